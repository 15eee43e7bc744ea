"""The ``compiled_pass_only`` marker (pyproject's markers): scripts/test.sh's second run of the
suite with the pure codec/flow twins (step 9, ``AMQSTOMP_NO_EXTENSIONS=1``) leaves those tests
out, to keep the README's test command near 45 minutes. The rule, checked here from the test
files' source (``ast``) and from scripts/test.sh itself:

* the marker goes only on tests that need a broker or a peer: a broker/proxy fixture among their
  arguments, or the ``broker`` marker (threads, timers, failover, broker behaviour above the
  codec, which the compiled pass runs in full);
* never in a file of the codec, flow, protocol core, settlement or ack modes (those run in both
  passes), and at least one failover round trip and one chaos run stay in the pure pass;
* step 9 of scripts/test.sh deselects it (``-m "not compiled_pass_only"``), and the marker is
  declared in pyproject.toml.
"""
import ast
import fnmatch
import os
import re
import shlex
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
MARK = "compiled_pass_only"

#: fixtures that give a test a broker or a peer to talk to (amqstomp/testing/pytest_plugin.py,
#: tests/conftest.py, and the module fixtures of the broker files)
BROKER_FIXTURES = {"activemq", "activemq_persistent", "activemq_factory", "activemq_factory_module",
                   "activemq_network_factory", "rabbitmq", "rabbitmq_web_stomp", "stomp_broker", "tcp_proxy_factory",
                   "proxy", "cluster",
                   # the fake STOMP peers (tests/test_guards.py), the stalling proxy (tests/conftest.py) and
                   # tests/test_proxy.py's proxy in front of the session broker
                   "fake_broker", "stall_proxy", "broker_proxy"}
#: files whose tests run in both passes, whatever they exercise: the codec, flow, protocol core,
#: settlement and ack modes, and the smoke round trips
BOTH_PASSES = ["test_codec*.py", "test_flow*.py", "test_protocol*.py", "test_settle*.py", "test_acks*.py",
               "test_smoke.py", "test_transaction_table.py", "test_subscriptions_core.py", "test_brokers.py",
               "test_broker.py", "test_jms.py", "test_stomppy_settle_tx.py"]
#: tests that must stay in the pure pass: a failover round trip (each API), a chaos run, and one
#: liveness test that reads the flow window
KEPT = [("test_failover.py", "test_twenty_cuts_reconnect_resubscribe_and_lose_nothing_with_stable_threads"),
        ("test_failover.py", "test_jms_failover_sync_sends_and_individual_acks_lose_nothing_over_cuts"),
        ("test_chaos.py", "test_chaos_every_mode_through_cuts_stalls_half_closes_and_a_busy_cpu"),
        # the heart-beat check against the flow window's state (the flow twin decides it is closed)
        ("test_heartbeat_liveness.py", "test_a_paused_consumer_does_not_blame_a_peer_its_closed_window_holds_back")]


def _marks(decorators: List[ast.expr]) -> Set[str]:
    """The names of ``pytest.mark.NAME`` (called or not) among ``decorators`` (or a pytestmark value)."""
    out = set()
    for node in decorators:
        if isinstance(node, ast.Call):
            node = node.func
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
            out.add(node.attr)
    return out


def _module_marks(tree: ast.Module) -> Set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            value = node.value
            return _marks(list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else [value])
    return set()


def _tests(path: str) -> Iterator[Tuple[str, Set[str], Set[str]]]:
    """(test name, its marks including the module's, its argument names) for each test of ``path``."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    module = _module_marks(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node.name, module | _marks(node.decorator_list), {a.arg for a in node.args.args}


def _all_tests() -> Dict[str, List[Tuple[str, Set[str], Set[str]]]]:
    return {name: list(_tests(os.path.join(TESTS, name)))
            for name in sorted(os.listdir(TESTS)) if name.startswith("test_") and name.endswith(".py")}


def marked() -> List[Tuple[str, str, Set[str], Set[str]]]:
    return [(name, test, marks, args) for name, tests in _all_tests().items()
            for test, marks, args in tests if MARK in marks]


def test_the_marker_is_on_broker_tests_only_and_never_on_a_codec_flow_settlement_file() -> None:
    found = marked()
    assert found, "no test is marked %s: the no-extensions pass would leave nothing out" % MARK
    no_broker = ["%s::%s" % (name, test) for name, test, marks, args in found
                 if not (args & BROKER_FIXTURES or "broker" in marks)]
    assert no_broker == [], "marked %s but needs no broker (it runs in both passes): %s" % (MARK, no_broker)
    both = sorted({name for name, _, _, _ in found if any(fnmatch.fnmatch(name, p) for p in BOTH_PASSES)})
    assert both == [], "codec/flow/protocol/settlement/ack files run in both passes: %s" % both
    tests = _all_tests()
    for name, test in KEPT:
        entry = next((t for t in tests.get(name, []) if t[0] == test), None)
        assert entry is not None, "%s::%s is gone: name another test the pure pass keeps" % (name, test)
        assert MARK not in entry[1], "%s::%s must stay in the no-extensions pass" % (name, test)


def test_the_marker_is_declared_in_pyproject_with_its_reason() -> None:
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    assert re.search(r'"%s: [^"]{20,}"' % MARK, text), "pyproject.toml's markers lack %s with its reason" % MARK


def _step_9_pytest_arguments(script: str) -> List[str]:
    """The arguments of scripts/test.sh's ``run_suite no-extensions`` (continuation lines joined;
    ``$COMPILED_PASS_ONLY`` replaced by the value the script gives it)."""
    joined = script.replace("\\\n", " ")
    value = re.search(r"^COMPILED_PASS_ONLY=(\S+)", joined, re.M)
    calls = [line for line in joined.splitlines() if line.strip().startswith("run_suite no-extensions ")]
    assert len(calls) == 1, "scripts/test.sh: expected one `run_suite no-extensions` call, found %d" % len(calls)
    line = calls[0].split("#", 1)[0]
    if value:
        line = line.replace("$COMPILED_PASS_ONLY", value.group(1)).replace("${COMPILED_PASS_ONLY}", value.group(1))
    words = shlex.split(line)
    assert "AMQSTOMP_NO_EXTENSIONS=1" in words and "--" in words, words
    return words[words.index("--") + 1:]


def step_9_problem(script: str) -> str:
    """What is wrong with the script's step 9 (the no-extensions pass), or "" when it leaves out
    exactly the marked tests."""
    args = _step_9_pytest_arguments(script)
    if "-m" not in args:
        return "step 9 (no-extensions) passes no -m: %s" % args
    expression = args[args.index("-m") + 1]
    if expression.split() != ["not", MARK]:
        return "step 9 selects %r: it must leave out exactly the %s tests" % (expression, MARK)
    return ""


def test_step_9_of_the_test_script_deselects_the_marker() -> None:
    with open(os.path.join(ROOT, "scripts", "test.sh"), encoding="utf-8") as f:
        assert step_9_problem(f.read()) == ""


@pytest.mark.parametrize("script, ok", [
    ('COMPILED_PASS_ONLY=compiled_pass_only\nrun_suite no-extensions "$V" python AMQSTOMP_NO_EXTENSIONS=1 -- \\\n'
     '  -m "not $COMPILED_PASS_ONLY"\n', True),
    ('run_suite no-extensions "$V" python AMQSTOMP_NO_EXTENSIONS=1 --\n', False),
    ('run_suite no-extensions "$V" python AMQSTOMP_NO_EXTENSIONS=1 -- -m "not slow"\n', False),
    ('run_suite no-extensions "$V" python AMQSTOMP_NO_EXTENSIONS=1 -- -m "compiled_pass_only"\n', False),
])
def test_the_script_check_fails_on_a_step_9_that_keeps_the_marked_tests(script: str, ok: bool) -> None:
    """The check above, on made-up scripts: it passes only when step 9 deselects the marker."""
    assert (step_9_problem(script) == "") is ok
