"""The RabbitMQ test helpers (amqstomp.testing: RabbitMQStomp, RabbitMQWebStomp, and the
``rabbitmq`` / ``rabbitmq_web_stomp`` fixtures) share the machine's plugins by reference:
a plugin one user turned on stays on while any other user -- of either helper, in this
process or another -- still needs it, whatever the order they stop in, and the last one
out turns off what these tools turned on (the machine's RabbitMQ is left as it was).
And both fixtures follow one rule when RabbitMQ is missing: skip, or fail with
AMQSTOMP_REQUIRE_RABBITMQ=1 (unless AMQSTOMP_SKIP_BROKER=1).
"""
import fcntl
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import amqstomp
from amqstomp.testing import RabbitMQStomp, RabbitMQWebStomp
from amqstomp.testing._rabbitmq import RabbitMQPlugins, users_path
from amqstomp.testing._stomp import FrameReader, encode_frame, goodbye

pytestmark = pytest.mark.timeout(600)

#: where ``import amqstomp`` finds the package under test (installed, or a checkout)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(amqstomp.__file__)))


def _child_env(**env):
    out = {k: v for k, v in os.environ.items() if k not in ("AMQSTOMP_REQUIRE_RABBITMQ", "AMQSTOMP_SKIP_BROKER")}
    out.update(env)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, out.get("PYTHONPATH")]))
    return out


def _connected(port, timeout=10.0):
    """The STOMP listener on 127.0.0.1:port answers CONNECT (guest, virtual host /) with CONNECTED."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(encode_frame("CONNECT", {"accept-version": "1.2", "host": "/", "login": "guest",
                                              "passcode": "guest"}))
        command, _, _ = FrameReader(sock, time.monotonic() + timeout).read()
        return command == "CONNECTED"
    finally:
        goodbye(sock)


def _accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), 5.0).close()
        return True
    except OSError:
        return False


_OTHER_PROCESS = textwrap.dedent("""
    import sys
    from amqstomp.testing import RabbitMQStomp
    with RabbitMQStomp() as broker:
        print(broker.port, flush=True)
    """)


@pytest.mark.broker  # the machine's RabbitMQ
@pytest.mark.compiled_pass_only  # the helpers' plugin bookkeeping (rabbitmq-plugins), nothing of the codec
def test_plugins_stay_on_while_another_user_needs_them_in_any_order(tmp_path):
    if RabbitMQPlugins.available() is not None:
        pytest.skip("RabbitMQ not available: %s" % RabbitMQPlugins.available())
    web = RabbitMQWebStomp().start()
    stomp = web2 = None
    try:
        stomp = RabbitMQStomp().start()
        assert stomp.port == web.stomp_host_and_port[1]  # one plugin, one listener
        # web-STOMP out first: the STOMP plugin it runs on stays for the other user
        web.stop()
        assert _connected(stomp.port)
        # a user in another process comes and goes: still on
        other = subprocess.run([sys.executable, "-c", _OTHER_PROCESS], capture_output=True, text=True,
                               timeout=300, cwd=str(tmp_path), env=_child_env())
        assert other.returncode == 0, other.stderr
        assert int(other.stdout.split()[0]) == stomp.port
        assert _connected(stomp.port)
        # the other way round: STOMP out first, web-STOMP keeps the plugin it needs
        web2 = RabbitMQWebStomp().start()
        stomp.stop()
        assert _accepts(web2.port)
        assert _connected(web2.stomp_host_and_port[1])
    finally:
        for helper in (web, stomp, web2):
            if helper is not None:
                helper.stop()
    # the last one out turned off what these helpers turned on (unless a user in another
    # test process of this machine holds it now); what was on before stays on
    enabled = set(web.enabled_plugins) | set(stomp.enabled_plugins) | set(web2.enabled_plugins)
    with RabbitMQPlugins._transition():
        for plugin in enabled:
            fd = os.open(users_path(plugin), os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # another test process uses it now
            finally:
                os.close(fd)
            assert not RabbitMQPlugins.app_running(plugin), plugin


_NEEDS_RABBITMQ = textwrap.dedent("""
    def test_stomp(rabbitmq):
        pass

    def test_web_stomp(rabbitmq_web_stomp):
        pass
    """)


@pytest.mark.parametrize("env, outcome", [
    ({}, "2 skipped"),
    ({"AMQSTOMP_REQUIRE_RABBITMQ": "1"}, "2 errors"),
    ({"AMQSTOMP_REQUIRE_RABBITMQ": "1", "AMQSTOMP_SKIP_BROKER": "1"}, "2 skipped"),
])
def test_both_fixtures_skip_or_fail_alike_when_rabbitmq_is_missing(tmp_path, env, outcome):
    (tmp_path / "test_needs_rabbitmq.py").write_text(_NEEDS_RABBITMQ)
    run_env = _child_env(PATH=str(tmp_path), **env)  # no rabbitmqctl, no rabbitmq-plugins
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
                           "-rsE", str(tmp_path)], cwd=str(tmp_path), env=run_env, capture_output=True, text=True,
                          timeout=120)
    out = proc.stdout + proc.stderr
    assert outcome in out, out
    assert "RabbitMQ is not installed (rabbitmqctl not found)" in out, out
