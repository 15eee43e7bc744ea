"""A connect refused on port 61613 (STOMP's default) says where to look for the
broker's real STOMP port; it used to say only "Connection refused" (a RabbitMQ
whose STOMP plugin listens elsewhere left a new user with no hint)."""
import socket
import subprocess
import sys

import pytest

import amqstomp
from amqstomp.exception import ConnectFailedException

pytestmark = pytest.mark.timeout(30)


def _listening(port):
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


@pytest.mark.parametrize("auto_reconnect", [False, True])
def test_refused_on_61613_names_how_to_find_the_stomp_port(auto_reconnect):
    if _listening(61613):
        pytest.skip("something listens on 127.0.0.1:61613 on this machine")
    conn = amqstomp.Connection12([("127.0.0.1", 61613)], reconnect_attempts_max=1, auto_reconnect=auto_reconnect)
    with pytest.raises(ConnectFailedException) as info:
        conn.connect("guest", "guest", wait=True, timeout=5)
    text = str(info.value)
    assert "Connection refused" in text or "refused" in text
    assert "rabbitmq-diagnostics listeners" in text and "amqstomp.testing" in text, text


def test_refused_on_another_port_adds_no_hint():
    port = _free_port()
    conn = amqstomp.Connection12([("127.0.0.1", port)], reconnect_attempts_max=1)
    with pytest.raises(ConnectFailedException) as info:
        conn.connect("guest", "guest", wait=True, timeout=5)
    assert "refused" in str(info.value) and "rabbitmq-diagnostics" not in str(info.value)


def test_the_command_line_client_says_it_too(tmp_path):
    if _listening(61613):
        pytest.skip("something listens on 127.0.0.1:61613 on this machine")
    proc = subprocess.run([sys.executable, "-m", "amqstomp", "-H", "127.0.0.1", "-P", "61613", "--timeout", "3"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20, cwd=str(tmp_path))
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "connection refused" in proc.stderr and "rabbitmq-diagnostics listeners" in proc.stderr, proc.stderr
