"""What a selector (:mod:`amqstomp.codec`, :mod:`amqstomp.flow`) does when its
compiled module does not load: it takes the pure-Python twin, and says so when
the compiled module is there but broken.

A compiled module that is not there at all (a source checkout, the pure wheel,
no build for this interpreter) is the pure twin's ordinary case: nothing is
said. One that is there and fails to import (a truncated ``.so``, one built
against another library, one without its ``PyInit_`` function: seen after two
installs built from one tree at once) is replaced by the twin with a
:class:`RuntimeWarning` naming the module and the import error: the same API,
a slower library, and the user hears why. ``AMQSTOMP_NO_EXTENSIONS=1`` chooses
the twins without trying the compiled modules, and without a word.
"""
import importlib
import os
import warnings
from types import ModuleType
from typing import Any, Dict, Tuple

__all__ = ["twin_instead", "choose"]


def choose(compiled: str, twin: str, namespace: Dict[str, Any]) -> Tuple[ModuleType, str]:
    """A selector's choice: import the compiled module ``compiled`` (a full name) unless
    ``AMQSTOMP_NO_EXTENSIONS`` is set or it does not load (then :func:`twin_instead`
    says why), else the pure-Python ``twin``; copy the chosen module's ``__all__`` names
    into ``namespace`` (the selector's ``globals()``).

    Returns:
        (module, implementation): the module loaded and ``"cython"`` or ``"python"``.
    """
    module, implementation = None, "python"
    if not os.environ.get("AMQSTOMP_NO_EXTENSIONS"):
        try:
            module, implementation = importlib.import_module(compiled), "cython"
        except ImportError as error:  # not built (quiet), or there but broken (a RuntimeWarning says so)
            twin_instead(compiled, error)
    if module is None:
        module = importlib.import_module(twin)
    namespace.update((name, getattr(module, name)) for name in module.__all__)
    return module, implementation


def twin_instead(name: str, error: ImportError) -> None:
    """The compiled module ``name`` (``"amqstomp._core._codec"``) failed to import with
    ``error``, and its pure-Python twin is used: warn (RuntimeWarning, shown once
    per module by the default warning filters) unless the module is simply absent.

    Args:
        name (str): the compiled module's full name.
        error (ImportError): what importing it raised.
    """
    if isinstance(error, ModuleNotFoundError) and error.name == name:
        return  # not built (or not for this interpreter): the twin is the plan
    warnings.warn("%s is installed but does not load (%s: %s); amqstomp uses its pure-Python twin instead, "
                  "slower. Reinstall amqstomp to get the compiled module back, or set "
                  "AMQSTOMP_NO_EXTENSIONS=1 to choose the pure-Python modules without this warning"
                  % (name, type(error).__name__, error), RuntimeWarning, stacklevel=3)
