"""The public surface of stomp.py 9.0, as data, and its comparison with amqstomp's.

``python tests/stomppy_surface.py`` imports the real stomp.py (it must be
importable, and amqstomp must not stand in for it in that process) and prints
:func:`describe` of :data:`MODULES` as JSON (with ``--star``, :func:`star_exports`:
what ``from module import *`` gives, compared by :func:`compare_star`). :func:`compare` runs in a process
where :func:`amqstomp.install_as_stomp` is in effect and returns the problems,
keyed so that a ``PENDING`` list can name them:

* ``"*"``: the module cannot be imported;
* ``"Name"``: missing, another kind (a class must stay a class), an
  incompatible signature, or another value (plain constants);
* ``"Name.member"``: a method of a class missing or incompatible;
* ``"Name().attr"``: an attribute of an instance missing (listener classes and
  ``Frame``, the ones made without I/O);
* ``"Name(Base)"``: not a subclass of amqstomp's ``Base`` (stomp.py's ``Name``
  is one of its ``Base``), so ``isinstance``/``except`` keep working.

A public name is one without a leading underscore (and ``__version__``) that
is not a module, and not the standard library's own object re-exported by a
``from x import y`` (``monotonic``, ``deque``, ``socket.SOL_TCP``...).
Signatures are compared for what a stomp.py caller can pass: every positional
slot and keyword name stomp.py's accepts must be accepted with the same
meaning, optional stays optional, and anything amqstomp adds is optional.
"""
import importlib
import inspect
import json
import socket
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

#: stomp.py 9.0's modules (stomp.colours and stomp.adapter.multicast too: programs can import them)
MODULES = [
    "stomp", "stomp.connect", "stomp.listener", "stomp.transport", "stomp.protocol", "stomp.utils",
    "stomp.constants", "stomp.exception", "stomp.log", "stomp.colours", "stomp.adapter", "stomp.adapter.ws",
    "stomp.adapter.multicast", "stomp.__main__",
]
#: classes whose instances are probed for attributes (made without I/O), with arguments by parameter name
INSTANCE_ARGS = {"receipt": "r", "transport": None, "heartbeats": (0, 0), "cmd": "SEND"}
INSTANCE_MODULES = {"stomp.listener": None, "stomp.utils": ("Frame",)}
#: members probed besides the public ones
DUNDER_MEMBERS = ("__enter__", "__exit__")
PLAIN = (str, bytes, int, float, bool, type(None))

Param = Tuple[str, str, bool]  # name, kind name, has a default


def _signature(obj: Any) -> Optional[List[Param]]:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [(p.name, p.kind.name, p.default is not inspect.Parameter.empty) for p in sig.parameters.values()]


def _foreign(module: Any, name: str, value: Any) -> bool:
    """A standard-library object re-exported under its own name."""
    if callable(value):
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and not home.startswith("stomp") and home in sys.modules:
            return getattr(sys.modules[home], name, None) is value
        return False
    return isinstance(value, int) and not isinstance(value, bool) and getattr(socket, name, None) == value


def _public(module: Any) -> Dict[str, Any]:
    out = {}
    for name, value in vars(module).items():
        if (name.startswith("_") and name != "__version__") or inspect.ismodule(value):
            continue
        if not _foreign(module, name, value):
            out[name] = value
    return out


def _members(cls: type) -> Dict[str, Any]:
    out = {}
    for name in dir(cls):
        if name.startswith("_") and name not in DUNDER_MEMBERS:
            continue
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is None or not owner.__module__.startswith("stomp"):
            continue
        raw = vars(owner)[name]
        if isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw):
            out[name] = _signature(getattr(cls, name))
    return out


def _instance_attrs(cls: type) -> Optional[List[str]]:
    params = inspect.signature(cls).parameters.values()
    try:
        args = {p.name: INSTANCE_ARGS[p.name] for p in params
                if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        instance = cls(**args)
    except Exception:
        return None
    return sorted(name for name in vars(instance) if not name.startswith("_"))


def describe(module_names: List[str] = MODULES) -> Dict[str, Any]:
    """``{module: {name: entry}}`` of the modules as importable now (the real stomp.py)."""
    surface: Dict[str, Any] = {}
    for module_name in module_names:
        module = importlib.import_module(module_name)
        entries = {}
        for name, value in sorted(_public(module).items()):
            home = getattr(value, "__module__", None)
            entry: Dict[str, Any] = {"home": home if isinstance(home, str) and home.startswith("stomp") else None,
                                     "qualname": getattr(value, "__qualname__", name)}
            if inspect.isclass(value):
                entry["kind"] = "class"
                entry["signature"] = _signature(value)
                entry["members"] = _members(value)
                entry["bases"] = ["%s:%s" % (c.__module__, c.__qualname__) for c in value.__mro__[1:]
                                  if c.__module__.startswith("stomp")]
                wanted = INSTANCE_MODULES.get(module_name, ())
                probed = module_name in INSTANCE_MODULES and (wanted is None or name in wanted)
                if probed and entry["home"] == module_name:
                    entry["instance"] = _instance_attrs(value)
            elif callable(value):
                entry["kind"] = "callable"
                entry["signature"] = _signature(value)
            else:
                entry["kind"] = "data"
                entry["type"] = type(value).__name__
                if isinstance(value, PLAIN) and name != "__version__":
                    entry["value"] = value.decode("latin-1") if isinstance(value, bytes) else value
                    entry["bytes"] = isinstance(value, bytes)
            entries[name] = entry
        surface[module_name] = entries
    return surface


def _star_entry(value: Any) -> Optional[str]:
    """How a star-imported object is compared: ``"module re"`` (a module: the same
    module object, stomp.py's own ones as amqstomp's), ``"object io:BytesIO"`` (the
    standard library's object, the same one), or None (stomp.py's own object: its
    presence is what counts here, its kind and signature are :func:`compare`'s)."""
    if inspect.ismodule(value):
        return "module " + value.__name__
    home = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if isinstance(home, str) and not home.startswith("stomp") and isinstance(qualname, str) \
            and home in sys.modules and getattr(sys.modules[home], qualname, None) is value:
        return "object %s:%s" % (home, qualname)
    return None


def star_exports(module_names: List[str] = MODULES) -> Dict[str, Optional[Dict[str, Optional[str]]]]:
    """``{module: {name: entry}}``: the names ``from module import *`` binds (the
    module's ``__all__``, else every name without a leading underscore, imported
    modules and objects included), each with :func:`_star_entry`; None for a
    module that cannot be imported."""
    out: Dict[str, Optional[Dict[str, Optional[str]]]] = {}
    for module_name in module_names:
        try:
            importlib.import_module(module_name)
        except ImportError:
            out[module_name] = None
            continue
        namespace: Dict[str, Any] = {}
        exec("from %s import *" % module_name, namespace)
        out[module_name] = {name: _star_entry(value) for name, value in namespace.items() if name != "__builtins__"}
    return out


def compare_star(real: Dict[str, Optional[Dict[str, Optional[str]]]],
                 importer: Callable[[str], Any] = importlib.import_module) -> Dict[str, Dict[str, str]]:
    """``{module: {name: problem}}``: how ``from module import *`` of the modules
    ``importer`` gives now (amqstomp's, after ``install_as_stomp()``) differs from
    ``real`` (:func:`star_exports` of the real stomp.py): a name missing, a name more,
    or a module or standard-library object that is not the same one."""
    problems: Dict[str, Dict[str, str]] = {}
    mine = star_exports([name for name, names in real.items() if names is not None])
    for module_name, names in real.items():
        if names is None:
            continue
        found: Dict[str, str] = {}
        problems[module_name] = found
        have = mine.get(module_name)
        if have is None:
            found["*"] = "module not importable"
            continue
        namespace: Dict[str, Any] = {}
        exec("from %s import *" % module_name, namespace)
        for name in sorted(set(names) - set(have)):
            found[name] = "missing from the star import"
        for name in sorted(set(have) - set(names)):
            found[name] = "not in stomp.py's star import"
        for name in sorted(set(names) & set(have)):
            entry = names[name]
            if entry is None:
                continue
            kind, _, ref = entry.partition(" ")
            if kind == "module":
                try:
                    expected = importer(ref)
                except ImportError:
                    expected = None
            else:
                expected = _counterpart(ref, importer)
            if expected is None or namespace[name] is not expected:
                found[name] = "not %s (stomp.py's)" % ref
    return problems


# --------------------------------------------------------------------------- comparison


def signature_problem(real: Optional[List[Param]], mine: Optional[List[Param]],
                      by_position: bool = False) -> Optional[str]:
    """Why a call stomp.py's signature ``real`` accepts may fail or mean
    something else with ``mine``; None when every such call works.
    ``by_position``: only positional calls matter (``__exit__``); names aside.
    A stomp.py forwarder (``connect(self, *args, **kwargs)``) is not checked
    here: its contract is the method it forwards to, checked where that is."""
    if real is None:
        return None
    if [p[1] for p in real if p[0] != "self"] == ["VAR_POSITIONAL", "VAR_KEYWORD"]:
        return None
    if by_position:
        real = [(p[0], "POSITIONAL_ONLY", p[2]) if p[1] == "POSITIONAL_OR_KEYWORD" else p for p in real]
    if mine is None:
        return "has no signature to compare"
    positional = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
    r_pos = [p for p in real if p[1] in positional]
    m_pos = [p for p in mine if p[1] in positional]
    m_by_name = {p[0]: p for p in mine if p[1] in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY")}
    m_var_pos = any(p[1] == "VAR_POSITIONAL" for p in mine)
    m_var_kw = any(p[1] == "VAR_KEYWORD" for p in mine)
    for i, (name, kind, has_default) in enumerate(r_pos):
        if i < len(m_pos):
            m_name, m_kind, m_default = m_pos[i]
            if kind == "POSITIONAL_OR_KEYWORD" and m_name != name:
                return "parameter %d is %r, stomp.py's is %r" % (i, m_name, name)
            if kind == "POSITIONAL_OR_KEYWORD" and m_kind == "POSITIONAL_ONLY":
                return "parameter %r cannot be passed by keyword" % name
            if has_default and not m_default:
                return "parameter %r is required, optional in stomp.py" % name
        elif not m_var_pos:
            return "no positional slot for stomp.py's parameter %r" % name
        elif kind == "POSITIONAL_OR_KEYWORD" and name not in m_by_name and not m_var_kw:
            return "parameter %r cannot be passed by keyword" % name
    for name, kind, has_default in real:
        if kind == "KEYWORD_ONLY":
            if name in m_by_name:
                if has_default and not m_by_name[name][2]:
                    return "keyword %r is required, optional in stomp.py" % name
            elif not m_var_kw:
                return "no keyword %r" % name
        elif kind == "VAR_POSITIONAL" and not m_var_pos:
            return "no *args"
        elif kind == "VAR_KEYWORD" and not m_var_kw:
            return "no **kwargs"
    real_names = {p[0] for p in real}
    for j, (name, kind, has_default) in enumerate(mine):
        if kind in positional and j >= len(r_pos) and not has_default:
            return "requires %r, which stomp.py callers do not pass" % name
        if kind == "KEYWORD_ONLY" and not has_default and name not in real_names:
            return "requires keyword %r, which stomp.py callers do not pass" % name
    return None


def _my_signature(obj: Any) -> Optional[List[Param]]:
    sig = _signature(obj)
    if sig is None and getattr(obj, "__module__", None) == "amqstomp._core._codec":
        # a compiled class has no signature; its pure-Python twin has the same API
        twin = importlib.import_module("amqstomp._core._codec_py")
        sig = _signature(getattr(twin, getattr(obj, "__name__", ""), None))
    return sig


def _counterpart(ref: str, importer: Callable[[str], Any]) -> Any:
    module_name, qualname = ref.split(":", 1)
    try:
        obj = importer(module_name)
    except ImportError:
        return None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def compare(surface: Dict[str, Any],
            importer: Callable[[str], Any] = importlib.import_module) -> Dict[str, Dict[str, str]]:
    """``{module: {key: problem}}``: how the modules ``importer`` gives now
    (amqstomp's, after ``install_as_stomp()``) differ from ``surface``
    (:func:`describe` of the real stomp.py)."""
    problems: Dict[str, Dict[str, str]] = {}
    for module_name, entries in surface.items():
        found: Dict[str, str] = {}
        problems[module_name] = found
        try:
            module = importer(module_name)
        except ImportError as exc:
            found["*"] = "module not importable: %s" % exc
            continue
        for name, entry in entries.items():
            if not hasattr(module, name):
                found[name] = "missing"
                continue
            mine = getattr(module, name)
            home = entry.get("home")
            if home and home != module_name:
                # a re-export: fine when it is the object its home module has (checked there)
                original = _counterpart("%s:%s" % (home, entry["qualname"]), importer)
                if original is not None:
                    if mine is not original:
                        found[name] = "not the same object as %s.%s" % (home, entry["qualname"])
                    continue
            _compare_entry(name, entry, mine, found, importer)
    return problems


def _compare_entry(name: str, entry: Dict[str, Any], mine: Any, found: Dict[str, str],
                   importer: Callable[[str], Any]) -> None:
    kind = entry["kind"]
    if kind == "data":
        if "value" in entry:
            value = entry["value"].encode("latin-1") if entry.get("bytes") else entry["value"]
            if mine != value or type(mine).__name__ != entry["type"]:  # (JSON made an IntEnum an int)
                found[name] = "value %r, stomp.py's %r" % (mine, value)
        elif type(mine).__name__ != entry["type"]:
            found[name] = "a %s, stomp.py's is a %s" % (type(mine).__name__, entry["type"])
        return
    if kind == "class" and not inspect.isclass(mine):
        found[name] = "not a class"
        return
    if not callable(mine):
        found[name] = "not callable"
        return
    problem = signature_problem(entry["signature"], _my_signature(mine))
    if problem:
        found[name] = problem
    if kind != "class":
        return
    for member, real_sig in entry["members"].items():
        key = "%s.%s" % (name, member)
        if not hasattr(mine, member):
            found[key] = "missing"
            continue
        problem = signature_problem(real_sig, _my_signature(getattr(mine, member)), member in DUNDER_MEMBERS)
        if problem:
            found[key] = problem
    for base in entry["bases"]:
        other = _counterpart(base, importer)
        if inspect.isclass(other) and not issubclass(mine, other):
            found["%s(%s)" % (name, base.split(":", 1)[1])] = "not a subclass of %s" % base
    attrs = entry.get("instance")
    if attrs:
        instance = _make(mine)
        if instance is None:
            found[name + "()"] = "cannot be made with stomp.py's arguments"
            return
        for attr in attrs:
            if not hasattr(instance, attr):
                found["%s().%s" % (name, attr)] = "instance attribute missing"


def _make(cls: Any) -> Any:
    params = (_my_signature(cls) or [])
    args = {p[0]: INSTANCE_ARGS[p[0]] for p in params
            if not p[2] and p[1] not in ("VAR_POSITIONAL", "VAR_KEYWORD") and p[0] in INSTANCE_ARGS}
    try:
        return cls(**args)
    except Exception:
        return None


def check(problems: Dict[str, Dict[str, str]], pending: Dict[str, Dict[str, str]]) -> Tuple[List[str], List[str]]:
    """(problems not in ``pending``, ``pending`` entries that are no problem any more),
    each as ``"module: key: text"``."""
    unexpected = ["%s: %s: %s" % (m, k, v) for m, found in sorted(problems.items())
                  for k, v in sorted(found.items()) if k not in pending.get(m, {})]
    stale = ["%s: %s: %s" % (m, k, reason) for m, keys in sorted(pending.items())
             for k, reason in sorted(keys.items()) if k not in problems.get(m, {})]
    return unexpected, stale


def counts(surface: Dict[str, Any], problems: Dict[str, Dict[str, str]]) -> Dict[str, Tuple[int, int, int]]:
    """``{module: (public names, names present, names present with no problem)}``;
    a name with a problem in a member, an instance attribute or a base counts as
    present but not as without problem."""
    out = {}
    for module_name, entries in surface.items():
        found = problems.get(module_name, {})
        if "*" in found:
            out[module_name] = (len(entries), 0, 0)
            continue
        missing = {k for k, v in found.items() if v == "missing" and k in entries}
        troubled = {k.split(".", 1)[0].split("(", 1)[0] for k in found} & set(entries)
        out[module_name] = (len(entries), len(entries) - len(missing), len(entries) - len(troubled))
    return out


if __name__ == "__main__":
    json.dump(star_exports() if sys.argv[1:] == ["--star"] else describe(), sys.stdout, indent=1, sort_keys=True)
