"""The public-looking names of amqstomp's public classes that are not documented as API.

    python scripts/api_internals.py [--check]      (bash scripts/docs.sh internals runs it)

The API reference (docs/reference/*.md) documents, for each public class, an explicit list of
members (or, where no list is given, every name without a leading underscore). Every other name
without an underscore that such a class has -- a method, property or class attribute, which
``help()`` lists beside the API, or an attribute set in ``__init__``, which ``dir()`` shows --
is an internal that wears a public name: rename it with a leading underscore, or document it.

Public classes: those of the API modules below (the stomp.py-compatible API and the JMS-style
API, with their exceptions and listeners) exported by their ``__all__`` or defined there with a
public name (``__all__`` of a stomp.py module is stomp.py's star-import set, which leaves
amqstomp's own classes out: ``amqstomp.exception.UnknownTransactionError``...). The classes and members are
read from the source with griffe (as the site is built), the pages' member lists with
``scripts/docs_hooks.expand_members`` (``- __all__`` expanded).

Attributes set outside ``__init__`` are invisible to griffe: for the classes that can be made
without a broker (connections before ``connect``, listeners, destinations, messages, the
factory), an instance is made (amqstomp imported from the checkout, pure-Python modules) and
its ``vars()`` are checked too.

The other way round, a name a page block lists must be there to be shown: a member of the
class the block documents (its own, or one it inherits when the block has
``inherited_members: true``), or of the module. mkdocstrings skips a listed name it does not
find without a warning, even with ``--strict``, so a method listed under the wrong class
(``connect`` under ``BaseConnection``, which does not have it) vanished from the reference while
this script counted it documented. Such names are listed as "listed but not there".

``--check`` exits 1 when any such name is left, except the ones :data:`DEFERRED` names with
their reason (listed, marked, not counted); ``bash scripts/docs.sh`` runs it before the build.
Needs the docs extra (griffe, PyYAML): run it with .venv-docs/bin/python.
"""
import argparse
import glob
import os
import re
import sys
from typing import Any, Dict, List, Optional, Set, Tuple

import griffe
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from docs_hooks import expand_members  # noqa: E402  (the same expansion the site uses)

#: the modules whose exported classes are the public API checked here
API_MODULES = ("amqstomp", "amqstomp.listener", "amqstomp.exception", "amqstomp.jms")
ALL = None  # a page block without a member list: every public-looking name is documented

#: Names left for later, each with why: "class path.name" -> reason (the name is listed,
#: marked, and not counted by --check, for that class and its subclasses). Empty: the
#: stomp.py-API connections' reconnector, subscriptions, encoding, timeout, auto_decode,
#: auto_resubscribe and vhost, deferred while that API was reworked, went with the rework
#: (they live on amqstomp._session.StompSession now).
DEFERRED: Dict[str, str] = {}

_BLOCK = re.compile(r"^::: *(?P<path>[\w.]+) *\n(?P<options>(?:[ \t]+.*\n|[ \t]*\n)*)", re.M)


def page_blocks(pages: Optional[List[str]] = None) -> List[Tuple[str, Dict[str, Any]]]:
    """Every ``::: path`` block of the API pages (``pages``: docs/reference/*.md) with its options."""
    blocks = []
    for page in pages if pages is not None else sorted(glob.glob(os.path.join(ROOT, "docs", "reference", "*.md"))):
        with open(page, encoding="utf-8") as fh:
            text = expand_members(fh.read())
        for match in _BLOCK.finditer(text + "\n"):
            raw = match.group("options").strip("\n")
            options = (yaml.safe_load(_dedent(raw)) or {}).get("options", {}) if raw.strip() else {}
            blocks.append((match.group("path"), options))
    return blocks


def _dedent(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    indent = min(len(line) - len(line.lstrip()) for line in lines) if lines else 0
    return "\n".join(line[indent:] for line in text.splitlines())


def _resolve(obj: Any) -> Any:
    return obj.final_target if obj.is_alias else obj


def documented(package: Any, pages: Optional[List[str]] = None) -> Dict[str, Optional[Set[str]]]:
    """Canonical class path -> the member names the pages document (ALL: every public one)."""
    out: Dict[str, Optional[Set[str]]] = {}
    for path, options in page_blocks(pages):
        obj = _resolve(package[path[len("amqstomp."):]] if path != "amqstomp" else package)
        members = options.get("members")
        if obj.is_class:
            names = set(members) if isinstance(members, list) else (set() if members is False else ALL)
            if names:  # what the block shows: a name it lists that is not there is not documented
                shown = obj.all_members if options.get("inherited_members", False) else obj.members
                names = {name for name in names if name in shown}
            out[obj.path] = names
        elif obj.is_module and isinstance(members, list):
            for name in members:  # a class listed in a module block shows every public member
                if name not in obj.members:
                    continue  # not shown (listed_but_absent reports it)
                member = _resolve(obj[name])
                if member.is_class:
                    out.setdefault(member.path, ALL)
        elif obj.is_module and members is None:
            for member in obj.members.values():  # its own classes (imports are not shown)
                if member.is_alias:
                    continue
                if member.is_class and not member.name.startswith("_"):
                    out.setdefault(member.path, ALL)
    return out


def listed_but_absent(package: Any, pages: Optional[List[str]] = None) -> List[Tuple[str, str]]:
    """(block path, name) of every name a page block's ``members:`` list names that the
    documented object does not have, so mkdocstrings silently shows nothing for it."""
    out: List[Tuple[str, str]] = []
    for path, options in page_blocks(pages):
        members = options.get("members")
        if not isinstance(members, list):
            continue
        obj = _resolve(package[path[len("amqstomp."):]] if path != "amqstomp" else package)
        inherited = bool(options.get("inherited_members", False))
        for name in members:
            if obj.is_class:
                there = name in obj.members or (inherited and name in obj.all_members)
            else:
                there = name in obj.members
            if not there:
                out.append((path, str(name)))
    return out


def public_classes(package: Any) -> Dict[str, Any]:
    """Canonical path -> class, for every class the API modules export or define publicly."""
    classes: Dict[str, Any] = {}
    for module_path in API_MODULES:
        module = package if module_path == "amqstomp" else package[module_path[len("amqstomp."):]]
        names = list(module.exports or []) + [n for n, member in module.members.items()
                                              if not n.startswith("_") and not member.is_alias]
        for name in names:
            try:
                obj = _resolve(module[name])
            except (KeyError, griffe.AliasResolutionError):
                continue
            if obj.is_class:
                classes[obj.path] = obj
    return classes


def kind_of(member: Any) -> str:
    member = _resolve(member)
    if "property" in member.labels:
        return "property"
    if member.is_function:
        return "classmethod" if "classmethod" in member.labels else "method"
    if member.is_attribute:
        return "instance attribute" if "instance-attribute" in member.labels else "class attribute"
    return member.kind.value


def _shown(docs: Dict[str, Optional[Set[str]]], where: Any, name: str) -> bool:
    """Whether the page block of class ``where`` shows ``name``: listed there (and there,
    see :func:`documented`), or, for a block without a list, one of the class's own members
    (mkdocstrings' ``inherited_members`` is off unless a block turns it on)."""
    if where.path not in docs:
        return False
    names = docs[where.path]
    return name in where.members if names is ALL else name in (names or ())


def internals(package: Any) -> Dict[str, List[Tuple[str, str, str]]]:
    """Class path -> [(name, kind, where defined)] of undocumented public-looking names. A name
    counts as documented when the page block of the class, or of a class it inherits from,
    lists it (or lists no members: then every public name is shown)."""
    docs = documented(package)
    out: Dict[str, List[Tuple[str, str, str]]] = {}
    for path, cls in sorted(public_classes(package).items()):
        lineage = [cls] + list(cls.mro())
        found = []
        for name, member in sorted(cls.all_members.items()):
            if name.startswith("_"):
                continue
            target = member.final_target if member.is_alias else member  # inherited: an alias
            owner = target.parent.path if target.parent is not None else path
            if not any(_shown(docs, where, name) for where in lineage):
                found.append((name, kind_of(member), owner))
        if found:
            out[path] = found
    return out


def _instances() -> Dict[str, Any]:
    """Class path -> an instance made without a broker."""
    os.environ.setdefault("AMQSTOMP_NO_EXTENSIONS", "1")
    sys.path.insert(0, ROOT)
    import amqstomp
    from amqstomp import jms

    made: Dict[str, Any] = {}
    for cls in (amqstomp.Connection10, amqstomp.Connection11, amqstomp.Connection12):
        made["%s.%s" % (cls.__module__, cls.__qualname__)] = cls([("127.0.0.1", 61613)])
    for obj in (amqstomp.ConnectionListener(), amqstomp.StatsListener(), amqstomp.WaitingListener(None),
                amqstomp.PrintingListener(), amqstomp.TestListener(), jms.ConnectionFactory("stomp://127.0.0.1:61613"),
                jms.Queue("q"), jms.Topic("t"), jms.Message(), jms.TextMessage("x"), jms.BytesMessage(b"x"),
                jms.MapMessage({"k": 1})):
        made["%s.%s" % (type(obj).__module__, type(obj).__qualname__)] = obj
    return made


def runtime_internals(package: Any, found: Dict[str, List[Tuple[str, str, str]]]) -> None:
    """Add to ``found`` the instance attributes griffe cannot see (set outside ``__init__``)."""
    docs = documented(package)
    classes = public_classes(package)
    for path, obj in _instances().items():
        cls = classes.get(path)
        if cls is None:
            continue
        known = set(cls.all_members) | {name for name, _, _ in found.get(path, [])}
        lineage = [cls] + list(cls.mro())
        for name in sorted(vars(obj)):
            if name.startswith("_") or name in known:
                continue
            if any(_shown(docs, where, name) for where in lineage):
                continue
            found.setdefault(path, []).append((name, "instance attribute (set outside __init__)", path))


def deferred(package: Any, path: str, name: str) -> Optional[str]:
    """Why ``name`` of class ``path`` is left for later (:data:`DEFERRED`), or None."""
    cls = public_classes(package).get(path)
    lineage = [path] + ([base.path for base in cls.mro()] if cls is not None else [])
    for where in lineage:
        why = DEFERRED.get("%s.%s" % (where, name))
        if why is not None:
            return why
    return None


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when any undocumented public name is left")
    args = ap.parse_args(argv)
    package = griffe.load("amqstomp", search_paths=[ROOT], resolve_aliases=True)
    found = internals(package)
    runtime_internals(package, found)
    total = sum(len(v) for v in found.values())
    print("Public-looking names of public classes that the API reference does not document")
    print("(help() lists methods, properties and class attributes; dir() also instance attributes):\n")
    left = 0
    for path, names in found.items():
        print("%s  (%d)" % (path, len(names)))
        for name, kind, owner in names:
            inherited = "" if owner == path else "  [from %s]" % owner
            why = deferred(package, path, name)
            left += why is None
            print("    %-28s %s%s%s" % (name, kind, inherited, "" if why is None else "\n        deferred: " + why))
    print("\n%d names in %d classes; %d not deferred" % (total, len(found), left))
    absent = listed_but_absent(package)
    print("\nListed on the API pages but not there (mkdocstrings shows nothing for them): %d" % len(absent))
    for path, name in absent:
        print("    %s: %s" % (path, name))
    if args.check and left:
        print("api_internals: %d undocumented public name(s): rename with a leading underscore (or move them to "
              "an internal object), or document them in docs/reference/" % left, file=sys.stderr)
    if args.check and absent:
        print("api_internals: %d name(s) listed in docs/reference/ under a block whose object does not have "
              "them: list each under the class (or module) that defines it, or set inherited_members"
              % len(absent), file=sys.stderr)
    return 1 if args.check and (left or absent) else 0


if __name__ == "__main__":
    sys.exit(main())
