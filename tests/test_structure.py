"""The package's shape, checked from its source with ``ast`` (docs/architecture.md):

* no import circle among amqstomp's modules, counting imports inside functions
  (an import moved into a function to dodge a circle is still one); imports
  under ``if TYPE_CHECKING:`` that point back are listed below with a reason;
* no ``other._private`` attribute: a module reads only its own objects' private
  state (``self._x``, ``cls._x``, or a class defined in the same module);
* no module above 600 lines (the C files Cython generates aside);
* the layers (docs/architecture.md): nothing below the facades (the protocol
  core, the drivers, the engine, flow, codec, failover, subscriptions, URIs)
  imports a stomp.py facade module, and the JMS API imports none either: both
  APIs stand on the same driver (``amqstomp._io.driver.Driver``), the stomp.py
  one adding its hooks in its own modules.
"""
import ast
import os
import re
from typing import Dict, Iterator, List, Set, Tuple


import amqstomp

PACKAGE_DIR = os.path.dirname(os.path.abspath(amqstomp.__file__))
MAX_LINES = 600
#: modules allowed above the limit, and the most lines each may have (none: the compiled
#: codec is _codec.pyx with its parser, large-body fill and encoder in Cython include files, .pxi)
STILL_LONG: Dict[str, int] = {}

#: ``if TYPE_CHECKING:`` imports allowed to point at a module that imports the importer
#: (annotations only; nothing runs them): (importer, imported)
TYPING_ONLY = {
    # the JMS session state names the classes that share it
    ("amqstomp.jms._state", "amqstomp.jms._transaction"), ("amqstomp.jms._state", "amqstomp.jms.browser"),
    ("amqstomp.jms._state", "amqstomp.jms._connection_state"), ("amqstomp.jms._state", "amqstomp.jms.consumer"),
    ("amqstomp.jms._state", "amqstomp.jms.producer"), ("amqstomp.jms._state", "amqstomp.jms.session"),
    ("amqstomp.jms._connection_state", "amqstomp.jms.connection"),  # ConnectionState.factory
    ("amqstomp.jms.link", "amqstomp.jms._connection_state"),  # Link.connection
    ("amqstomp.jms._producer_flow", "amqstomp.jms.link"),  # the window and tracker name the link they serve
    ("amqstomp.aio.handler", "amqstomp.aio.subscription"),  # the workers name the subscription and message
}


def _modules(root: str = PACKAGE_DIR) -> Dict[str, Tuple[str, ast.Module, bool]]:
    """dotted name -> (path, tree, is_package) for every .py file below ``root``."""
    out = {}
    base = os.path.dirname(root)
    for directory, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            dotted = os.path.relpath(path, base)[:-3].replace(os.sep, ".")
            is_package = dotted.endswith(".__init__")
            if is_package:
                dotted = dotted[:-len(".__init__")]
            with open(path, encoding="utf-8") as f:
                out[dotted] = (path, ast.parse(f.read(), filename=path), is_package)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, typing_only: bool = False) -> Iterator[Tuple[ast.AST, bool]]:
    """Every import node in ``tree`` (at any depth), with whether it sits under
    ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, typing_only
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), typing_only)
        else:
            yield from _imports(node, typing_only)


def _targets(node: ast.AST, importer: str, is_package: bool, modules: Set[str]) -> Set[str]:
    """The package's modules an import node loads (the deepest existing name)."""
    names: List[str] = []
    if isinstance(node, ast.ImportFrom):
        if node.level:
            parts = (importer if is_package else importer.rsplit(".", 1)[0]).split(".")
            parts = parts[:len(parts) - (node.level - 1)]
            full = ".".join(parts + ([node.module] if node.module else []))
        else:
            full = node.module or ""
        names = [full + "." + alias.name for alias in node.names] + [full]
    elif isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    found = set()
    for name in names:
        while name and name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in modules:
            found.add(name)
    return found


def _graphs(modules: Dict[str, Tuple[str, ast.Module, bool]]) -> Tuple[Dict[str, Set[str]], Dict[str, Set[str]]]:
    names = set(modules)
    runtime: Dict[str, Set[str]] = {name: set() for name in names}
    typing: Dict[str, Set[str]] = {name: set() for name in names}
    for name, (_, tree, is_package) in modules.items():
        for node, typing_only in _imports(tree):
            for target in _targets(node, name, is_package, names):
                # a module importing its own package (or the package its submodule) is how
                # packages work, not a circle
                if target != name and not name.startswith(target + ".") and not target.startswith(name + "."):
                    (typing if typing_only else runtime)[name].add(target)
    return runtime, typing


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    modules = _modules()
    runtime, _ = _graphs(modules)
    assert "amqstomp._io.link" in runtime["amqstomp.transport"], "the parser missed the imports"
    assert _cycles(runtime) == []


def test_type_checking_imports_that_point_back_are_listed():
    runtime, typing = _graphs(_modules())
    for importer, targets in sorted(typing.items()):
        for target in sorted(targets):
            both = {k: set(v) for k, v in runtime.items()}
            both[importer].add(target)
            if _cycles(both):
                assert (importer, target) in TYPING_ONLY, (
                    "%s imports %s under TYPE_CHECKING, which imports it back: list it in TYPING_ONLY if it "
                    "is only an annotation" % (importer, target))


#: stomp.py's facade: the modules that only adapt stomp.py 9.0's names and signatures
FACADE_MODULES = {"amqstomp.connection", "amqstomp.connect", "amqstomp.protocol", "amqstomp._session",
                  "amqstomp.transport", "amqstomp._transport_base", "amqstomp.listener", "amqstomp.utils",
                  "amqstomp.adapter", "amqstomp.adapter.ws"}
#: below the facades: every API's shared machinery
BELOW_FACADES = ("amqstomp._core", "amqstomp._io", "amqstomp._engine")
BELOW_FACADE_MODULES = {"amqstomp.codec", "amqstomp.flow",
                        "amqstomp._core._codec_py", "amqstomp._core._flow_py", "amqstomp._core._frame_py", "amqstomp.uri",
                        "amqstomp.exception", "amqstomp.log", "amqstomp.constants"}


def _facade_imports(modules: Dict[str, Tuple[str, ast.Module, bool]], importers) -> List[Tuple[str, str]]:
    runtime, typing = _graphs(modules)
    return sorted((name, target) for name in modules if importers(name)
                  for target in runtime[name] | typing[name] if target in FACADE_MODULES)


def _is_below(name: str) -> bool:
    return name in BELOW_FACADE_MODULES or any(name == p or name.startswith(p + ".") for p in BELOW_FACADES)


def test_nothing_below_the_facades_imports_a_facade_module():
    modules = _modules()
    assert {"amqstomp._io.driver", "amqstomp._engine.client", "amqstomp._engine.failover"} <= {
        name for name in modules if _is_below(name)}, "the layer list no longer matches the package"
    assert _facade_imports(modules, _is_below) == []


def test_jms_imports_no_stomp_py_facade_module():
    modules = _modules()
    assert _facade_imports(modules, lambda name: name.startswith("amqstomp.jms")) == []


def test_the_layer_checks_find_what_they_look_for(tmp_path):
    """A driver importing stomp.py's utils, and a JMS module importing the
    stomp.py transport under TYPE_CHECKING, are both seen."""
    package = tmp_path / "amqstomp"
    (package / "_io").mkdir(parents=True)
    (package / "jms").mkdir()
    for init in ("__init__.py", "_io/__init__.py", "jms/__init__.py"):
        (package / init).write_text("")
    (package / "utils.py").write_text("")
    (package / "transport.py").write_text("")
    (package / "_io" / "owner.py").write_text("from ..utils import clamp_wait\n")
    (package / "jms" / "link.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from ..transport import Transport\n")
    modules = _modules(str(package))
    assert _facade_imports(modules, _is_below) == [("amqstomp._io.owner", "amqstomp.utils")]
    assert _facade_imports(modules, lambda name: name.startswith("amqstomp.jms")) == [
        ("amqstomp.jms.link", "amqstomp.transport")]


def _private_accesses(tree: ast.AST) -> Iterator[ast.Attribute]:
    own_classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and \
                not (node.attr.startswith("__") and node.attr.endswith("__")):
            if isinstance(node.value, ast.Name) and node.value.id in ({"self", "cls"} | own_classes):
                continue
            yield node


def test_no_private_attribute_of_another_object_is_used():
    found = []
    for name, (path, tree, _) in sorted(_modules().items()):
        with open(path, encoding="utf-8") as f:
            source = f.read()
        for node in _private_accesses(tree):
            found.append("%s:%d: %s" % (name, node.lineno, ast.get_source_segment(source, node) or node.attr))
    assert found == []


#: the calls that change a subscription's flow window (amqstomp.flow.SubscriptionWindow)
WINDOW_WRITES = {"on_delivered", "on_consumed", "on_application_ack", "flush", "poll"}


def _subscription_internals(tree):
    """A subscription's lock taken (``sub.lock``, ``x.sub.lock``) or its window changed
    (``x.window.flush(...)``...): what only its owner, ``_engine/subscription.py``, may do."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "lock" and (
                (isinstance(node.value, ast.Name) and node.value.id in ("sub", "subscription"))
                or (isinstance(node.value, ast.Attribute) and node.value.attr in ("sub", "_sub"))):
            yield node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in WINDOW_WRITES and isinstance(node.func.value, ast.Attribute) \
                and node.func.value.attr == "window":
            yield node


#: what a driver may import of the acknowledgement core: the actions it applies, not the rules
ACK_ACTIONS = {"AckDue", "PAUSE", "TURNED_SLOW"}


def _imports_acks(node) -> bool:
    """``node`` imports ``amqstomp._core.acks`` (or names from it other than its actions, :data:`ACK_ACTIONS`)."""
    if isinstance(node, ast.Import):
        return any(a.name == "amqstomp._core.acks" for a in node.names)
    if not isinstance(node, ast.ImportFrom):
        return False
    module = (node.module or "").split(".")
    if module[-1:] == ["acks"]:
        return not all(a.name in ACK_ACTIONS for a in node.names)
    return module[-1:] in (["_core"], [""]) and any(a.name == "acks" for a in node.names)


def test_a_subscriptions_lock_and_window_are_its_owners():
    """Only ``_engine/subscription.SubscriptionManager`` takes a subscription's lock or changes its
    window (the JMS API asks it: ``application_acked``); issue 22. The window's rules are the
    pure acknowledgement core's (``_core/acks.py``), which takes no lock and is called by
    the owner alone, under the lock."""
    found = []
    for name, (path, tree, _) in sorted(_modules().items()):
        if name in ("amqstomp._engine.subscription", "amqstomp.aio.subscription"):
            continue  # the owners: the threaded one (under its lock) and asyncio's (one loop thread)
        with open(path, encoding="utf-8") as f:
            source = f.read()
        found.extend("%s:%d: %s" % (name, node.lineno, ast.get_source_segment(source, node))
                     for node in _subscription_internals(tree)
                     if name != "amqstomp._core.acks" or isinstance(node, ast.Attribute))
        found.extend("%s:%d: imports the acknowledgement core" % (name, node.lineno)
                     for node in ast.walk(tree) if _imports_acks(node))
    assert found == []
    caught = ast.parse("def f(self, sub):\n    with sub.lock:\n        sub.window.flush(0)\n"
                       "    with self.sub.lock:\n        pass\n")
    assert len(list(_subscription_internals(caught))) == 3  # the check sees what it looks for
    imports = ast.parse("from ._core import acks\nfrom .._core.acks import consumed\n"
                        "import amqstomp._core.acks\nfrom ._core import settle\nfrom .callbacks import x\n"
                        "from .._core.acks import AckDue\nfrom .._core.acks import AckDue, timer_due\n")
    assert [_imports_acks(node) for node in imports.body] == [True, True, True, False, False, False, True]


#: the driver calls that apply the subscription core's actions (issue 22): made by its one applier only
SUBSCRIPTION_APPLIER = "amqstomp._engine.applier"
SUBSCRIPTION_TABLE = "amqstomp._engine.subscription"
APPLIER_CALLS = {"send_frame", "call_later", "pause_reading", "resume_reading", "post"}


def _applier_calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in APPLIER_CALLS:
            yield node


def _clock_reads(tree):
    """An import of ``time`` (or of a name from it) and any use of a ``monotonic``/``time`` attribute."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "time" for a in node.names):
            yield node
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "time":
            yield node
        elif isinstance(node, (ast.Attribute, ast.Name)) and getattr(node, "attr", getattr(node, "id", "")) in (
                "monotonic", "_monotonic", "perf_counter"):
            yield node


def test_the_subscription_table_reads_no_clock_and_leaves_the_driver_to_its_applier():
    """``_engine/subscription.SubscriptionManager`` takes the subscription's lock and asks the
    core; the time it passes in (``now_ms``) and every driver call the core's actions ask for
    (pause/resume of reading, the flush timer, the ACK and poison writes, the slow-consumer
    event, a local redelivery) are ``_engine/applier.SubscriptionApplier``'s (issue 22)."""
    modules = _modules()
    table = modules[SUBSCRIPTION_TABLE][1]
    assert [ast.dump(node) for node in _clock_reads(table)] == []
    assert [ast.unparse(node.func) for node in _applier_calls(table)] == []
    applier = modules[SUBSCRIPTION_APPLIER][1]
    assert {node.func.attr for node in _applier_calls(applier)} == APPLIER_CALLS  # the check sees them
    assert len(list(_clock_reads(applier))) >= 2


#: the one module that takes, waits on and notifies a JMS session's condition (``SessionState._cond``)
SESSION_CONDITION_OWNER = "amqstomp.jms._state"


def _condition_uses(tree):
    """A condition reached through another object (``state.cond``, ``self.state._cond``,
    ``self._state.cond.wait()``...): anything but an object's own ``self.cond`` / ``self._cond``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("cond", "_cond") and not (
                isinstance(node.value, ast.Name) and node.value.id == "self"):
            yield node


def test_a_sessions_condition_is_its_owners():
    """Only ``jms/_state.py`` takes, waits on or notifies a JMS session's condition
    (issue 22): the session, its consumers, producers, browsers and transaction call
    ``SessionState``'s named methods (each change under the condition, each wait
    bounded). Checked over ``amqstomp.jms``, where a session's state is reachable; the
    owner keeps it private (``_cond``), which the private-attribute check forbids to
    every other module of the package as well. A ``self.cond`` of a class's own
    (``_producer_flow.ProducerWindow``'s) is not a session's."""
    modules = _modules()
    found = []
    for name, (path, tree, _) in sorted(modules.items()):
        if not name.startswith("amqstomp.jms.") or name == SESSION_CONDITION_OWNER:
            continue
        with open(path, encoding="utf-8") as f:
            source = f.read()
        found.extend("%s:%d: %s" % (name, node.lineno, ast.get_source_segment(source, node))
                     for node in _condition_uses(tree))
    assert found == []
    owner = modules[SESSION_CONDITION_OWNER][1]
    assert {node.attr for node in ast.walk(owner) if isinstance(node, ast.Attribute)
            and node.attr in ("cond", "_cond")} == {"_cond"}  # private: no public ``cond`` to reach
    caught = ast.parse("def f(self, state):\n    with state.cond:\n        state.cond.notify_all()\n"
                       "    self.state._cond.wait(1)\n    with self.cond:\n        self._cond.notify()\n")
    assert len(list(_condition_uses(caught))) == 3  # the check sees what it looks for, not an object's own


def test_no_module_is_longer_than_600_lines():
    long = []
    for directory, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            if name.endswith((".py", ".pyx", ".pxi", ".pxd", ".pyi")):
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    lines = sum(1 for _ in f)
                rel = os.path.relpath(os.path.join(directory, name), PACKAGE_DIR)
                if lines > STILL_LONG.get(rel, MAX_LINES):
                    long.append("%s: %d lines" % (os.path.relpath(os.path.join(directory, name), PACKAGE_DIR), lines))
    assert sorted(long) == []


def test_the_checks_find_what_they_look_for(tmp_path):
    """A circle through a function-level import, a TYPE_CHECKING import, and a
    private read of another object are all seen."""
    package = tmp_path / "amqstomp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("class K:\n    _x = 1\n\n\ndef f(other):\n    from .a import y\n"
                                  "    return other._secret + K._x\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import z\n")
    modules = _modules(str(package))
    runtime, typing = _graphs(modules)
    assert _cycles(runtime) == [["amqstomp.a", "amqstomp.b"]]
    assert typing["amqstomp.c"] == {"amqstomp.a"}
    assert [node.attr for node in _private_accesses(modules["amqstomp.b"][1])] == ["_secret"]


#: what decides which socket a frame goes on over failover, and the receipt-gated SUBSCRIBE:
#: the engine's rules (amqstomp._engine.client.Client and its acknowledging/subscribing parts),
#: which a facade calls and never writes again (issue 22)
ENGINE_RULE_NAMES = {
    "connected_link_seq": "which socket a frame goes on (Client.socket_now / route)",
    "reconnecting": "waiting out a replay (Client.socket_now)",
    "lost_with_socket": "a frame of a transaction lost with its socket (Client.transaction_lost)",
    "write_lost": "a frame of a transaction lost with its socket (Client.transaction_lost)",
    "wait_future": "a receipt-gated SUBSCRIBE (Client.subscribe_gated / subscribe / replay)",
    "own_receipt": "a SUBSCRIBE's own receipt (Client.write_subscribe)",
}


def _engine_rules(tree):
    """Names of the engine's write-over-failover and SUBSCRIBE rules used
    outside it, and a SUBSCRIBE written directly (``x.send_frame("SUBSCRIBE", ...)``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ENGINE_RULE_NAMES:
            yield node, ENGINE_RULE_NAMES[node.attr]
        elif isinstance(node, ast.Name) and node.id in ENGINE_RULE_NAMES:
            yield node, ENGINE_RULE_NAMES[node.id]
        elif isinstance(node, ast.alias) and node.name in ENGINE_RULE_NAMES:
            yield node, ENGINE_RULE_NAMES[node.name]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "send_frame" and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == "SUBSCRIBE":
            yield node, "a SUBSCRIBE written past Client.write_subscribe"


def test_jms_has_no_write_over_failover_rule_nor_subscribe_loop_of_its_own():
    """The JMS API writes over failover and SUBSCRIBEs with a receipt through the
    engine's Client (``write``, ``route``, ``request``, ``transaction_lost``,
    ``subscribe``, ``replay``), as the stomp.py API does: no copy of those rules
    in ``jms/`` (issue 22)."""
    found = []
    for name, (path, tree, _) in sorted(_modules().items()):
        if not name.startswith("amqstomp.jms"):
            continue
        with open(path, encoding="utf-8") as f:
            source = f.read()
        found.extend("%s:%d: %s -- %s" % (name, getattr(node, "lineno", 0),
                                          ast.get_source_segment(source, node) or getattr(node, "name", ""), why)
                     for node, why in _engine_rules(tree))
    assert found == []
    caught = ast.parse("from .._core.transactions import lost_with_socket\n"
                       "def f(link, headers):\n    seq = link.transport.connected_link_seq()\n"
                       "    future = link.transport.send_frame('SUBSCRIBE', headers)\n"
                       "    link.transport.wait_future(future, 1.0, 'x')\n")
    assert len(list(_engine_rules(caught))) == 4  # the check sees what it looks for


#: the ways a link event was once named by a string; posted as typed events now
#: (:mod:`amqstomp._core.events`), mapped to stomp.py's names in one table
#: (``_engine/dispatch.LISTENER_CALLS``); ``notify(name)`` stays stomp.py's public API
#: (``Driver.notify``, a facade's), not the driver's way to post
_POSTS = ("post", "events.put")


def _posts_by_name(tree):
    """``x.post("<name>", ...)`` / ``x.events.put(("<name>", ...))`` calls: an event named by a string."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        func = node.func
        name = func.attr
        if name == "put" and isinstance(func.value, ast.Attribute) and func.value.attr == "events":
            name = "events.put"
        if name not in _POSTS:
            continue
        first = node.args[0]
        if isinstance(first, ast.Tuple) and first.elts:
            first = first.elts[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            yield node


def test_link_events_are_typed_not_named_by_strings():
    """No module posts a link event by name: ``Link.post`` and ``LinkOwner.post``
    take :mod:`amqstomp._core.events` classes (issue 22); the JMS API observes its
    links through the typed ``LinkObserver``, not a stomp.py listener."""
    found = []
    for name, (path, tree, _) in sorted(_modules().items()):
        found.extend("%s:%d" % (name, node.lineno) for node in _posts_by_name(tree))
    assert found == []
    jms = [name for name, (_, tree, _) in _modules().items() if name.startswith("amqstomp.jms")
           and any(isinstance(node, (ast.Name, ast.Attribute, ast.alias)) and
                   getattr(node, "id", getattr(node, "attr", getattr(node, "name", None))) == "ListenerDispatch"
                   for node in ast.walk(tree))]
    assert jms == []
    caught = ast.parse("link.post('heartbeat', None)\nlink.events.put(('message', f))\nlink.post(HeartbeatIn())\n")
    assert len(list(_posts_by_name(caught))) == 2  # the check sees what it looks for


#: the ways a listener event could be handed on by a stomp.py name: ``x.notify("<name>")`` /
#: ``x.call("<name>")`` (stomp.py's ``Transport.notify``, ``ListenerDispatch.call``), the calling
#: thread's ``x.announce(...)`` and the old ``x.notify_now("<name>")``; every event the library
#: makes is a :mod:`amqstomp._core.events` class, mapped to stomp.py's names in one table
#: (``_engine/dispatch.LISTENER_CALLS``). None is left, in any module (issue 22: the last,
#: ``_engine/client``'s "disconnecting", became the typed ``Disconnecting`` event)
_NAMED_CALLS = ("notify", "call", "notify_now", "announce", "call_event")
#: the one module that makes a :class:`~amqstomp._core.events.Notice`: ``event_named``, for a
#: name the application gives stomp.py's public ``notify(name)`` itself
_NOTICE_HOME = "amqstomp._core.events"


def _named_notifications(tree):
    """``x.notify("<name>", ...)`` / ``x.call("<name>", ...)`` (...) calls: an event handed on by a
    string; and every ``Notice(...)`` made (an event named by a string)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr in _NAMED_CALLS
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node, node.args[0].value
        elif (isinstance(func, ast.Name) and func.id == "Notice") or \
                (isinstance(func, ast.Attribute) and func.attr == "Notice"):
            yield node, "Notice"


def test_no_event_is_notified_by_a_string_name():
    """The library hands its listeners' events on as :mod:`amqstomp._core.events` classes
    (``post(TransportResumed())``, ``announce(Disconnecting())``), which ``LISTENER_CALLS`` maps
    to stomp.py's ``on_<name>`` once; no module notifies, calls or announces one by a stomp.py
    name, nor makes a ``Notice`` but ``event_named`` (issue 22). A user's
    ``conn.transport.notify("heartbeat")`` stays stomp.py's API (tests call it)."""
    found = set()
    for name, (path, tree, _) in sorted(_modules().items()):
        found.update((name, event) for _, event in _named_notifications(tree)
                     if not (name == _NOTICE_HOME and event == "Notice"))
    assert found == set()
    planted = ast.parse("def f(self, link, x):\n    self.transport.notify('usage_full')\n"
                        "    link.dispatch.call('before_message', x)\n    self.transport.post(UsageFull())\n"
                        "    self.dispatch.notify(str(x.cmd).lower(), x)\n    subprocess.call(['ls'])\n"
                        "    self.transport.notify_now('disconnecting')\n    self.transport.announce(Disconnecting())\n"
                        "    self.dispatch.call_event(events.Notice('disconnecting'))\n")
    assert [event for _, event in _named_notifications(planted)] == \
        ["usage_full", "before_message", "disconnecting", "Notice"]


#: what the pure core never imports, over its whole import closure inside amqstomp (issue 22):
#: sockets, threads, locks, the clock, event loops (the drivers bring them)
CORE_FORBIDDEN = {"socket", "ssl", "threading", "_thread", "selectors", "time", "asyncio", "concurrent",
                  "multiprocessing"}
#: the compiled modules' sources, checked by text (``ast`` cannot read Cython)
CORE_CYTHON = (".pyx", ".pxi", ".pxd")


def _outside_imports(tree: ast.AST) -> Set[str]:
    """Top-level names of the modules outside amqstomp that ``tree`` imports, at any depth
    (functions, ``if TYPE_CHECKING:`` blocks too)."""
    out = set()
    for node, _ in _imports(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out - {"amqstomp"}


def _core_closure(modules: Dict[str, Tuple[str, ast.Module, bool]]) -> Tuple[Set[str], Dict[str, Set[str]]]:
    """Every module under ``amqstomp._core`` and every amqstomp module they import, transitively
    (TYPE_CHECKING imports counted), with the forbidden modules each imports."""
    runtime, typing = _graphs(modules)
    todo = [name for name in modules if name == "amqstomp._core" or name.startswith("amqstomp._core.")]
    seen: Set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(runtime[name] | typing[name])
    bad = {name: _outside_imports(modules[name][1]) & CORE_FORBIDDEN for name in seen}
    return seen, {name: hit for name, hit in bad.items() if hit}


def _cython_forbidden(directory: str) -> Dict[str, Set[str]]:
    """The forbidden modules each Cython source of ``directory`` imports (``import x``,
    ``from x import``, ``cimport``)."""
    found: Dict[str, Set[str]] = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(CORE_CYTHON):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                text = f.read()
            hit = {m for m in CORE_FORBIDDEN
                   if re.search(r"^\s*(?:c?import\s+%s\b|from\s+%s(?:\.\w+)*\s+c?import\b)" % (m, m), text, re.M)}
            if hit:
                found[name] = hit
    return found


def test_the_core_imports_no_socket_thread_clock_or_event_loop_over_its_import_closure():
    """``amqstomp/_core/`` and everything of amqstomp it imports, transitively, import none of
    :data:`CORE_FORBIDDEN` (issue 22: the core takes time as ``now_ms`` and returns actions).
    The package ``amqstomp`` itself (the facades' entry) is not counted: a module's own
    package is how packages work, not an import of it."""
    modules = _modules()
    seen, bad = _core_closure(modules)
    assert {"amqstomp._core.state", "amqstomp._core.subscriptions", "amqstomp._core.uri", "amqstomp.codec",
            "amqstomp.flow", "amqstomp.exception"} <= seen, "the walk missed modules the core is built on"
    assert "amqstomp._engine.subscription" not in seen and "amqstomp._io.driver" not in seen
    assert bad == {}
    assert _cython_forbidden(os.path.join(PACKAGE_DIR, "_core")) == {}


def test_the_core_closure_check_finds_a_forbidden_import(tmp_path):
    """The check above can fail: a clock read two imports away (in a function, under
    TYPE_CHECKING, or from a Cython source) is reported."""
    package = tmp_path / "amqstomp"
    (package / "_core").mkdir(parents=True)
    (package / "__init__.py").write_text("import threading\n")  # the package itself: not counted
    (package / "_core" / "__init__.py").write_text("")
    (package / "_core" / "a.py").write_text("from ..helper import f\n")
    (package / "helper.py").write_text("def f():\n    import time\n    return time.monotonic()\n")
    (package / "_core" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from concurrent.futures import Future\n")
    (package / "_core" / "c.pyx").write_text("cimport cython\nfrom asyncio import sleep\n")
    (package / "driver.py").write_text("import socket\n")  # outside the closure: not counted
    seen, bad = _core_closure(_modules(str(package)))
    assert "amqstomp.driver" not in seen
    assert bad == {"amqstomp.helper": {"time"}, "amqstomp._core.b": {"concurrent"}}
    assert _cython_forbidden(str(package / "_core")) == {"c.pyx": {"asyncio"}}


#: the calls that prepare a SUBSCRIBE (its headers, prefetch and window): the pure core's
#: ``amqstomp._core.subscriptions`` alone makes them, for every API (issue 22)
SUBSCRIBE_PREPARATION = {"subscribe_headers", "prefetch_header", "parse_destination", "prefetch_for",
                         "SubscriptionWindow"}
SUBSCRIBE_PREPARERS = {"amqstomp._core.subscriptions"}


def _subscribe_preparation(tree):
    """Calls of :data:`SUBSCRIBE_PREPARATION` names (``f(...)``, ``x.f(...)``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in SUBSCRIBE_PREPARATION:
                yield node


def test_subscribe_headers_are_prepared_in_one_place():
    """SUBSCRIBE headers, the prefetch they set and the window that goes with them are decided
    by ``amqstomp._core.subscriptions`` only; the stomp.py facade, the JMS consumers, the engine
    and the subscription table call it (the codec and flow modules, which define the window, aside)."""
    found = []
    for name, (path, tree, _) in sorted(_modules().items()):
        if name in SUBSCRIBE_PREPARERS or name.startswith(("amqstomp._core._flow", "amqstomp._core._codec")):
            continue
        with open(path, encoding="utf-8") as f:
            source = f.read()
        found.extend("%s:%d: %s" % (name, node.lineno, ast.get_source_segment(source, node))
                     for node in _subscribe_preparation(tree))
    assert found == []
    caught = ast.parse("def f(policy, d):\n    h = subscribe_headers(d, 1, 'auto', {}, {})\n"
                       "    return policy.prefetch_for('queue'), frames.prefetch_header('activemq', 1, None)\n")
    assert len(list(_subscribe_preparation(caught))) == 3  # the check sees what it looks for


#: the modules that keep a connection's life, and the flags they kept before it became the core's one
#: state (:class:`amqstomp._core.lifecycle.ConnectionLifecycle`, issue 22): assigning any of these
#: attributes there is a second copy of that state
LIFECYCLE_KEEPERS = ("amqstomp._engine.failover", "amqstomp._io.probe", "amqstomp.jms._connection_state",
                     "amqstomp.jms.connection", "amqstomp.aio._failover")
LIFECYCLE_FLAGS = {"_reconnecting", "_stop", "_up", "stopped", "gave_up", "closed", "failure"}


def _lifecycle_flags_assigned(tree):
    """``x.<flag> = ...`` (also augmented, annotated, in a tuple) for a flag of LIFECYCLE_FLAGS."""
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Attribute) and leaf.attr in LIFECYCLE_FLAGS:
                    yield leaf


def test_connection_state_is_the_cores_lifecycle_not_flags():
    """The failover loops (thread and asyncio drivers) and the JMS connection hold their
    state as the core's ``ConnectionLifecycle`` and ask it: no flag of their own for armed,
    reconnecting, stopped, gave up, closed or broken comes back (issue 22)."""
    modules = _modules()
    found = []
    for name in LIFECYCLE_KEEPERS:
        path, tree, _ = modules[name]
        with open(path, encoding="utf-8") as f:
            source = f.read()
        found.extend("%s:%d: %s" % (name, node.lineno, ast.get_source_segment(source, node))
                     for node in _lifecycle_flags_assigned(tree))
        assert name == "amqstomp.jms.connection" or "ConnectionLifecycle" in source, name  # holds (declares) it
    assert found == []
    # the JMS connection's lifecycle is public for the send path to read; only its owner steps it
    steps = {"arm", "connect", "up", "lost", "close", "fail", "loop_ended", "step"}
    stepped = ["%s:%d" % (name, node.lineno) for name, (_, tree, _) in modules.items()
               if name != "amqstomp.jms._connection_state" for node in ast.walk(tree)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in steps
               and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "life"]
    assert stepped == []
    caught = ast.parse("self._reconnecting = True\nstate.closed = True\nself.a, self._stop = 1, 2\n"
                       "self.failure: Optional[BaseException] = None\nself._life.close()\n")
    assert len(list(_lifecycle_flags_assigned(caught))) == 4  # the check sees what it looks for
