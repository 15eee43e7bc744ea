"""scripts/run_leftovers.sh: an interrupted (Ctrl-C, SIGTERM) or failed scripts/test.sh ends the
brokers its pytest runs started, and deletes their directories, and nothing another run started.

The run here is a stand-in: a bash script with test.sh's traps (its Ctrl-C trap is read from
scripts/test.sh) whose "pytest" starts an :class:`ActiveMQBroker` whose process is a sleeping
Python instead of Java: started as the real one is (a session of its own, so Ctrl-C does not
reach it; its directory made under ``TMPDIR``), from a thread other than the main one, so no
parent-death signal ends it either. A decoy "broker" of another run (another mark) must outlive
every case. The last test checks that scripts/test.sh wires the script in (the traps, and the
environment of every pytest run). (scripts/test.sh copies the script next to the installed suite;
elsewhere outside a checkout these tests skip.)"""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.timeout(90)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "run_leftovers.sh")
TEST_SH = os.path.join(ROOT, "scripts", "test.sh")

FAKE_PYTEST = r'''
import os, sys, threading, time

from amqstomp.testing.broker import ActiveMQBroker


class StandIn(ActiveMQBroker):
    """Started like an ActiveMQ broker; its process sleeps."""

    @classmethod
    def require(cls, activemq_home=None, distribution=None):
        pass

    def command(self):
        return [sys.executable, "-c", "import time; time.sleep(300)"]


ready, how = sys.argv[1], sys.argv[2]
broker = StandIn()
starter = threading.Thread(target=broker.start, kwargs={"wait": False})  # no parent-death signal
starter.start()
starter.join()
with open(ready + ".part", "w") as f:
    f.write("%d %d %s" % (os.getpid(), broker.pid, broker.base_dir))
os.rename(ready + ".part", ready)
if how == "crash":
    os._exit(1)  # a pytest that died without its teardown
try:
    time.sleep(300)
except KeyboardInterrupt:
    os._exit(2)  # pytest's status for an interrupted run; its teardown interrupted too
'''

STAND_IN = r'''set -euo pipefail
. "$1"
mark=$2 run_tmp=$3 how=$4 py=$5 fake=$6
trap 'end_run "$mark" "$run_tmp"' EXIT
%(int_trap)s
rc=0
env AMQSTOMP_TEST_RUN="$mark" TMPDIR="$run_tmp" "$py" "$fake" "$run_tmp/../ready" "$how" || rc=$?
touch "$run_tmp/../next-step"
[ "$how" != crash ]
'''


def _int_trap() -> str:
    with open(TEST_SH, encoding="utf-8") as f:
        traps = [line for line in f.read().splitlines() if re.match(r"trap .* INT$", line)]
    assert len(traps) == 1, "scripts/test.sh: expected one `trap ... INT` line, found %r" % traps
    return traps[0]


def _alive(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(path: str, proc: "subprocess.Popen[bytes]", timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert proc.poll() is None, "the stand-in run ended early: %r" % (proc.communicate(),)
        assert time.monotonic() < deadline, "the stand-in's broker did not start within %.0f s" % timeout
        time.sleep(0.05)
    with open(path) as f:
        return f.read()


def _default_sigint() -> None:
    # Ctrl-C must reach the stand-in even when this pytest was started with SIGINT ignored (in
    # the background of a script): a shell cannot trap a signal ignored when it started
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def decoy(tmp_path):
    """A "broker" of another run: another mark, its directory elsewhere; the test checks it lives."""
    d = tmp_path / "other-run" / "amqstomp-broker-decoy"
    d.mkdir(parents=True)
    env = dict(os.environ, AMQSTOMP_TEST_RUN="another run")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], cwd=str(d), env=env,
                            start_new_session=True)
    yield proc, d
    proc.kill()
    proc.wait(10)


@pytest.fixture
def stand_in(tmp_path):
    if not os.path.exists(SCRIPT):
        # a checkout has it (scripts/test.sh sources it); the installed suite gets a copy
        assert not os.path.exists(TEST_SH) or not os.path.exists(os.path.join(ROOT, "amqstomp")), \
            "no scripts/run_leftovers.sh"
        pytest.skip("not a checkout: no scripts/run_leftovers.sh")
    (tmp_path / "stand-in.sh").write_text(STAND_IN % {"int_trap": _int_trap()})
    (tmp_path / "fake_pytest.py").write_text(FAKE_PYTEST)
    (tmp_path / "run-tmp").mkdir()
    started = []

    def start(how: str) -> "subprocess.Popen[bytes]":
        env = {k: v for k, v in os.environ.items() if k != "AMQSTOMP_TEST_RUN"}
        env["END_RUN_GRACE"] = "10"
        proc = subprocess.Popen(
            ["bash", str(tmp_path / "stand-in.sh"), SCRIPT, "mark %s" % tmp_path, str(tmp_path / "run-tmp"),
             how, sys.executable, str(tmp_path / "fake_pytest.py")],
            env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=_default_sigint)
        started.append(proc)
        return proc

    yield start
    for proc in started:  # a failed test leaves nothing either
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    ready = tmp_path / "ready"
    if ready.exists():
        for pid in ready.read_text().split()[:2]:
            if _alive(int(pid)):
                os.kill(int(pid), signal.SIGKILL)


def _check(tmp_path, proc, ready: str, expected_rc: int, next_step: bool, decoy) -> None:
    pytest_pid, broker_pid, broker_dir = ready.split(" ", 2)
    out = proc.communicate(timeout=60)[0].decode(errors="replace")
    assert proc.returncode == expected_rc, out
    assert broker_dir.startswith(str(tmp_path / "run-tmp" / "amqstomp-broker-")), broker_dir
    assert not _alive(int(broker_pid)), "the run's broker is left running: %s" % out
    assert not _alive(int(pytest_pid)), "the run's pytest is left running: %s" % out
    assert not os.path.exists(broker_dir), "the run's broker directory is left: %s" % out
    assert os.path.exists(tmp_path / "next-step") == next_step, out
    proc_, d = decoy
    assert proc_.poll() is None and d.is_dir(), "another run's broker was touched"


def test_sigterm_to_the_script_ends_the_brokers_its_pytest_started(tmp_path, stand_in, decoy) -> None:
    proc = stand_in("term")
    ready = _wait_for(str(tmp_path / "ready"), proc)
    proc.send_signal(signal.SIGTERM)  # to the script alone: pytest and the broker do not get it
    _check(tmp_path, proc, ready, -signal.SIGTERM, False, decoy)  # bash dies of it, after its EXIT trap


def test_ctrl_c_stops_the_run_and_ends_what_teardown_left(tmp_path, stand_in, decoy) -> None:
    proc = stand_in("int")
    ready = _wait_for(str(tmp_path / "ready"), proc)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal's process group (the broker is not in it)
    _check(tmp_path, proc, ready, 130, False, decoy)


def test_a_failed_step_ends_the_brokers_of_a_crashed_pytest(tmp_path, stand_in, decoy) -> None:
    proc = stand_in("crash")
    ready = _wait_for(str(tmp_path / "ready"), proc)
    _check(tmp_path, proc, ready, 1, True, decoy)


def test_test_sh_marks_every_pytest_run_and_ends_the_run_on_exit() -> None:
    if not os.path.exists(SCRIPT):
        pytest.skip("not a checkout: no scripts/run_leftovers.sh")
    with open(TEST_SH, encoding="utf-8") as f:
        text = f.read()
    assert re.search(r'^\. "\$ROOT/scripts/run_leftovers\.sh"$', text, re.M), "test.sh does not source it"
    cleanup = re.search(r"^cleanup\(\) \{\n(.*?)^\}", text, re.M | re.S)
    assert cleanup and 'end_run "$WORK" "$WORK/tmp"' in cleanup.group(1)
    assert re.search(r"^trap cleanup EXIT$", text, re.M)
    # the machine's RabbitMQ (another user) must reach a certificate made under the tests' TMPDIR
    assert re.search(r'^chmod 711 "\$WORK" "\$WORK/tmp"$', text, re.M)
    run_suite = re.search(r"^run_suite\(\) \{.*?^\}", text, re.M | re.S)
    assert run_suite, "test.sh has no run_suite()"
    body = run_suite.group(0)
    assert 'envs+=(AMQSTOMP_TEST_RUN="$WORK" TMPDIR="$WORK/tmp")' in body
    # every python the function runs gets them, and no pytest runs outside it
    assert body.count('"${envs[@]}"') == body.count('"$venv/bin/python"') == 2, body
    assert len(re.findall(r"-m pytest", text)) == 2, "a pytest run outside run_suite (or the dev mode's) is not marked"
