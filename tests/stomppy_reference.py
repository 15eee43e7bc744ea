"""The real stomp.py 9.0, for the differential tests (``test_stomppy_compat.py``,
``test_stomppy_helpers.py``, ``test_stomppy_surface.py``), or why there is none.

A module counts as amqstomp's by identity: it is one of the module objects that
``sys.modules`` holds under ``amqstomp`` or ``amqstomp.*`` (what
:func:`amqstomp.install_as_stomp` puts under ``stomp.*``). Its path says nothing:
the installed-wheel runs of ``scripts/test.sh`` keep the real stomp.py in a venv
under a directory named ``amqstomp-test.*``.

Without stomp.py 9.0 installed the differential tests skip; with it installed,
a reason to skip (stomp is amqstomp in this process, the import fails, another
version answers) fails the run instead: CI must not pass with them skipped.
"""
import importlib
import sys
from types import ModuleType
from typing import Optional

import pytest

try:
    from importlib.metadata import PackageNotFoundError, version
except ImportError:  # pragma: no cover - Python < 3.8
    version = None  # type: ignore[assignment]

#: the stomp.py release amqstomp is compared with (the test extra installs it)
REFERENCE_VERSION = "9.0.0"


def installed_version() -> Optional[str]:
    """The version of the installed ``stomp.py`` distribution, or None."""
    if version is None:  # pragma: no cover
        return None
    try:
        return version("stomp.py")
    except PackageNotFoundError:
        return None


def is_amqstomp(module: object) -> bool:
    """True when ``module`` is one of amqstomp's modules (compared by identity)."""
    return any(module is loaded for name, loaded in list(sys.modules.items())
               if name == "amqstomp" or name.startswith("amqstomp."))


def no_reference(reason: str) -> None:
    """Skip the calling test module for ``reason``, or fail the run when
    stomp.py 9.0 is installed (the differential tests must run then)."""
    if installed_version() == REFERENCE_VERSION:
        pytest.fail("stomp.py %s is installed but the differential tests would be skipped: %s"
                    % (REFERENCE_VERSION, reason), pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def reference(name: str = "stomp") -> ModuleType:
    """The real stomp.py's module ``name``, imported under its own name (see :func:`no_reference`)."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        no_reference("stomp.py %s is the reference (the test extra installs it): %s" % (REFERENCE_VERSION, exc))
    if is_amqstomp(module):
        no_reference("%s is amqstomp's module in this process (install_as_stomp() ran): no reference" % name)
    found = getattr(sys.modules.get("stomp"), "__version__", None)
    if found != REFERENCE_VERSION:
        no_reference("the stomp module here is version %r, the reference is %s" % (found, REFERENCE_VERSION))
    return module
