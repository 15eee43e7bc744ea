"""``amqstomp.install_as_stomp()``: make ``import stomp`` give amqstomp, the way
``pymysql.install_as_MySQLdb()`` stands in for MySQLdb.

After it, ``import stomp``, ``import stomp.utils``, ``from stomp.listener import
TestListener``, ``stomp.connect``, ``stomp.protocol``, ``stomp.transport``,
``stomp.constants``, ``stomp.exception``, ``stomp.log``, ``stomp.colours``,
``stomp.adapter`` and ``stomp.adapter.ws`` are amqstomp's modules (the same objects: ``sys.modules``
holds them under both names). Any other ``stomp.X`` is ``amqstomp.X`` when that
exists, imported when first asked for: ``stomp.__main__`` is ``amqstomp.__main__``
(stomp.py's command-line client; ``runpy.run_module("stomp", run_name="__main__")``,
what ``python -m stomp`` does, runs it); stomp.py modules amqstomp does not
provide yet raise ImportError saying so.
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
from types import ModuleType
from typing import Any, Dict, Optional, Sequence

from .exception import ModuleConflictError
from .log import route_to_stomp_py

__all__ = ["install_as_stomp", "tuple_version", "MODULES", "NOT_PROVIDED"]

#: stomp.py 9.0's modules and the amqstomp module that stands in for each
MODULES: Dict[str, str] = {
    "stomp": "amqstomp",
    "stomp.adapter": "amqstomp.adapter",
    "stomp.adapter.ws": "amqstomp.adapter.ws",
    "stomp.colours": "amqstomp.colours",
    "stomp.connect": "amqstomp.connect",
    "stomp.constants": "amqstomp.constants",
    "stomp.exception": "amqstomp.exception",
    "stomp.listener": "amqstomp.listener",
    "stomp.log": "amqstomp.log",
    "stomp.protocol": "amqstomp.protocol",
    "stomp.transport": "amqstomp.transport",
    "stomp.utils": "amqstomp.utils",
}

#: stomp.py 9.0's modules amqstomp does not provide (yet), and what to use instead
NOT_PROVIDED: Dict[str, str] = {
    "stomp.adapter.multicast": "stomp.py's multicast adapter is not provided by amqstomp",
}


def _is_amqstomp(module: object) -> bool:
    name = getattr(module, "__name__", "")
    return isinstance(name, str) and (name == "amqstomp" or name.startswith("amqstomp."))


class _AliasLoader(importlib.abc.Loader):
    """Loads ``stomp.X`` as the already imported ``amqstomp.X`` (no second copy)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.spec: Optional[importlib.machinery.ModuleSpec] = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the alias's spec on the module: give it its own back
        module.__spec__ = self.spec

    def get_code(self, fullname: str) -> Any:
        """The code of the module stood in for (runpy runs ``stomp.__main__`` with it)."""
        spec = importlib.util.find_spec(self.target)
        loader = spec.loader if spec is not None else None
        get_code = getattr(loader, "get_code", None)
        if get_code is None:
            raise ImportError("no code object for %s (%s)" % (fullname, self.target), name=fullname)
        return get_code(self.target)


class _StompAliasFinder(importlib.abc.MetaPathFinder):
    """Answers imports of ``stomp.*`` names not yet in ``sys.modules``."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if not fullname.startswith("stomp."):
            return None
        if fullname in NOT_PROVIDED:
            raise ModuleNotFoundError("%s: %s (amqstomp.install_as_stomp() is in effect)"
                                      % (fullname, NOT_PROVIDED[fullname]), name=fullname)
        real = MODULES.get(fullname, "amqstomp" + fullname[len("stomp"):])
        try:
            spec = importlib.util.find_spec(real)
        except ImportError:
            spec = None
        if spec is None:
            raise ModuleNotFoundError("No module named %r: amqstomp stands in for stomp "
                                      "(amqstomp.install_as_stomp()) and has no %r" % (fullname, real), name=fullname)
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real),
                                               is_package=spec.submodule_search_locations is not None)


def install_as_stomp() -> None:
    """Make ``import stomp`` (and its submodules) give amqstomp, so a stomp.py
    program runs unchanged once this ran first. Idempotent. Also routes
    amqstomp's log records through the ``"stomp.py"`` logger
    (:func:`amqstomp.log.route_to_stomp_py`).

    Raises:
        ModuleConflictError: stomp.py itself is imported already (``stomp`` or
            a ``stomp.*`` module in ``sys.modules`` is not amqstomp's); nothing
            is changed.
    """
    foreign = sorted(name for name, module in list(sys.modules.items())
                     if (name == "stomp" or name.startswith("stomp.")) and module is not None
                     and not _is_amqstomp(module))
    if foreign:
        where = getattr(sys.modules[foreign[0]], "__file__", None) or "?"
        raise ModuleConflictError(
            "amqstomp.install_as_stomp(): stomp.py is already imported (%s from %s); call it before "
            "anything imports stomp, or use stomp.py alone" % (", ".join(foreign), where), name="stomp")
    for alias, real in MODULES.items():
        sys.modules[alias] = importlib.import_module(real)
    if not any(isinstance(finder, _StompAliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _StompAliasFinder())
    route_to_stomp_py(True)


def tuple_version() -> None:
    """Turn ``amqstomp.__version__`` (``"0.1.0"``) into a tuple of ints
    (``(0, 1, 0)``), characters other than digits and dots dropped (stomp.py
    9.0 ``stomp.tuple_version``, which does this to ``stomp.__version__``).
    Idempotent."""
    import amqstomp

    version = amqstomp.__version__
    if not isinstance(version, tuple):
        setattr(amqstomp, "__version__", tuple(int(part) for part in re.sub("[^0-9.]", "", version).split(".")))
