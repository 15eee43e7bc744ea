"""A stomp.py 9.0 user's own tests, observing stomp.py's side effects, pass against
amqstomp (issue "A stomp.py user's own tests pass unchanged"): stomp.py's DEBUG
frame and heart-beat lines under its ``"stomp.py"`` logger (compared with the
real stomp.py's on the same ActiveMQ), frames through a replaced ``conn.transport``
or ``conn.send_frame`` in stomp.py's argument shapes, ``conn.heartbeat_thread``,
a bare ``BaseTransport``'s no-op stubs, and errors raised where stomp.py raises
them (a bad host at ``connect()``, ``set_ssl``'s bad settings at ``connect()``).
"""
import logging
import re
import ssl
import threading
import time
import uuid
from unittest.mock import MagicMock, Mock

import pytest

import amqstomp
from amqstomp.exception import ConfigurationError
from amqstomp.transport import BaseTransport

from conftest import wait_until
from stomppy_reference import reference

# the real stomp.py, decided by module identity (tests/stomppy_reference.py); skipped only without stomp.py 9.0
stomp = reference("stomp")

pytestmark = pytest.mark.timeout(120)

WAIT = 15.0


def _until(predicate, timeout=WAIT):
    return wait_until(predicate, timeout, 0.01)


# --------------------------------------------------------------------------- 1. stomp.py's DEBUG lines

_SENT_CMD = re.compile(r"^\[b'([A-Z]*)")


def _normalised(records):
    """stomp.py's frame lines as (template, command, header names): no ids, no timestamps."""
    out = []
    for record in records:
        if record.name != "stomp.py" or record.levelno != logging.DEBUG:
            continue
        if record.msg == "sending frame: %s":
            text = record.getMessage()[len("sending frame: "):]
            cmd = _SENT_CMD.match(text).group(1) or "heartbeat"
            names = set(re.findall(r"b'([a-z-]+):", text))
            if cmd == "SUBSCRIBE":
                names.discard("receipt")  # amqstomp's SUBSCRIBE asks for one (docs/guides/stomp-py.md)
            out.append((record.msg, cmd, tuple(sorted(names))))
        elif record.msg.startswith("received frame: "):
            cmd, headers = record.args[0], record.args[1]
            if cmd == "RECEIPT" and not str(headers.get("receipt-id", "")).startswith(("r-", "amqstomp-")):
                continue  # a connection of an earlier test (stomp.py's disconnect() does not wait for its receipt)
            out.append((record.msg, cmd, tuple(sorted(headers))))
    return sorted(out)


def _script(conn_class, broker, caplog):
    dest = "/queue/dropin-log-" + uuid.uuid4().hex[:8]
    got = []
    receipts = []

    class Listener:
        def on_message(self, frame):
            got.append(frame.headers["ack"])

        def on_receipt(self, frame):
            receipts.append(frame.headers["receipt-id"])

    caplog.clear()
    conn = conn_class([("127.0.0.1", broker.stomp_port)])
    conn.set_listener("l", Listener())
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(dest, id="s1", ack="client-individual", receipt="r-sub")
    assert _until(lambda: "r-sub" in receipts)
    conn.subscribe(dest + "-2", id="s2")  # amqstomp's own SUBSCRIBE receipt is not in stomp.py's log
    conn.send(dest, "hello", content_type="text/plain", headers={"x-n": "1"})
    assert _until(lambda: got)
    conn.ack(got[0], receipt="r-ack")
    assert _until(lambda: "r-ack" in receipts)
    conn.disconnect(receipt="r-disc")
    assert _until(lambda: "r-disc" in receipts)
    texts = [r.getMessage() for r in caplog.records if r.name == "stomp.py"]
    ack_line = next((t for t in texts if t.startswith("sending frame: [b'ACK'")), None)
    if ack_line is None:
        return _normalised(caplog.records), texts
    return _normalised(caplog.records) + [("ACK id escaped", "\\\\c" in ack_line)], texts


def test_debug_frame_lines_match_stomp_py(activemq, caplog):
    caplog.set_level(logging.DEBUG, logger="stomp.py")
    theirs, their_text = _script(stomp.Connection12, activemq, caplog)
    ours, our_text = _script(amqstomp.Connection12, activemq, caplog)
    assert theirs == ours
    sent = [t for t in ours[:-1] if t[0] == "sending frame: %s"]
    received = [t for t in ours[:-1] if t[0] != "sending frame: %s"]
    assert ours[-1] == ("ACK id escaped", True)  # message ids hold ':', which stomp.py logs escaped
    assert [t[1] for t in sent] == sorted(["STOMP", "SUBSCRIBE", "SUBSCRIBE", "SEND", "ACK", "DISCONNECT"])
    assert sorted(t[1] for t in received) == ["CONNECTED", "MESSAGE", "RECEIPT", "RECEIPT", "RECEIPT"]
    # the passcode is masked, as stomp.py masks it
    assert not any("passcode:admin" in line for line in our_text)
    assert any("passcode:********" in line for line in our_text)
    assert any("heartbeats calculated (0, 0)" == line for line in our_text)


_HEARTBEAT_TEMPLATES = ("heartbeats calculated %s", "set receive_sleep to %s, send_sleep to %s",
                        "starting heartbeat loop", "calculated next outbound heartbeat as %s",
                        "sending a heartbeat message at %s", "heartbeat loop ended")


def _heartbeat_lines(conn_class, broker, caplog):
    caplog.clear()
    conn = conn_class([("127.0.0.1", broker.stomp_port)], heartbeats=(300, 300))
    conn.connect("admin", "admin", wait=True)

    def seen():
        texts = [r.getMessage() for r in caplog.records if r.name == "stomp.py"]
        return any(t.startswith("sending a heartbeat message at ") for t in texts) and \
            "received frame: 'heartbeat', headers={}, body=None" in texts and "sending frame: [b'\\n']" in texts
    assert _until(seen, 10)
    conn.disconnect(receipt="r-hb")
    _until(lambda: any(r.msg == "heartbeat loop ended" for r in caplog.records), 5)
    records = [r for r in caplog.records if r.name == "stomp.py"]
    templates = {r.msg for r in records if r.msg in _HEARTBEAT_TEMPLATES}
    calculated = [r.getMessage() for r in records if r.msg == "heartbeats calculated %s"]
    return templates, calculated


def test_debug_heartbeat_lines_match_stomp_py(activemq, caplog):
    caplog.set_level(logging.DEBUG, logger="stomp.py")
    theirs = _heartbeat_lines(stomp.Connection12, activemq, caplog)
    ours = _heartbeat_lines(amqstomp.Connection12, activemq, caplog)
    assert ours == theirs
    assert theirs[0] == set(_HEARTBEAT_TEMPLATES)


def test_no_stomp_py_lines_without_debug(activemq, caplog):
    """With ``"stomp.py"`` above DEBUG nothing of it is made (the lines are built only when enabled)."""
    caplog.set_level(logging.INFO, logger="stomp.py")
    ours, _ = _script(amqstomp.Connection12, activemq, caplog)
    assert ours == []


# --------------------------------------------------------------------------- 2. conn.transport / conn.send_frame replaced

_VERSIONS = [("1.0", "Connection10"), ("1.1", "Connection11"), ("1.2", "Connection12")]


def _calls(version, make, seen):
    """Every protocol method on a connection never connected, and what ``seen()`` reports after each."""
    out = []

    def step(label, fn):
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - compared between the two libraries
            out.append((label, "raised", type(exc).__name__))
            return
        out.append((label,) + seen())

    conn = make()
    step("connect", lambda: conn.connect("u", "secret", wait=False, headers={"client-id": "c1"}))
    step("send", lambda: conn.send("/queue/a", "x:y", headers={"h": "v:1\nw"}, persistent="true"))
    step("subscribe", lambda: conn.subscribe("/queue/a", id="1", ack="client"))
    step("subscribe-same-id", lambda: conn.subscribe("/queue/b", id="1", headers={"selector": "a = 'x:y'"}))
    step("subscribe-no-id", lambda: conn.subscribe("/queue/c", id=None if version == "1.0" else "2"))
    step("unsubscribe", lambda: conn.unsubscribe(id="1"))
    step("begin", lambda: conn.begin("tx1"))
    step("send-tx", lambda: conn.send("/queue/a", b"z", transaction="tx1"))
    step("commit", lambda: conn.commit("tx1"))
    step("abort", lambda: conn.abort("tx-never-begun"))
    if version == "1.0":
        step("ack", lambda: conn.ack("m1", transaction="tx1", receipt="r"))
    elif version == "1.1":
        step("ack", lambda: conn.ack("m1", "1"))
        step("nack", lambda: conn.nack("m1", "1", receipt="r"))
    else:
        step("ack", lambda: conn.ack("m1"))
        step("nack", lambda: conn.nack("m1", receipt="r"))
    step("disconnect", lambda: conn.disconnect(receipt="d"))
    return conn, out


@pytest.mark.parametrize("version, name", _VERSIONS)
def test_a_mock_transport_sees_stomp_pys_frames(version, name):
    runs = {}
    for lib in (stomp, amqstomp):
        holder = {}

        def make():
            conn = getattr(lib, name)()
            conn.transport = MagicMock()
            conn.transport.vhost = None
            conn.transport.current_host_and_port = ("broker.example", 61613)
            holder["conn"] = conn
            return conn

        def seen():
            frame = holder["conn"].transport.transmit.call_args[0][0]
            return frame.cmd, dict(frame.headers), frame.body
        conn, out = _calls(version, make, seen)
        out.append(("set_receipt", conn.transport.set_receipt.call_args_list))
        out.append(("transmits", conn.transport.transmit.call_count))
        runs[lib.__name__] = out
    assert runs["amqstomp"] == runs["stomp"]


@pytest.mark.parametrize("version, name", _VERSIONS)
def test_a_mock_send_frame_is_called_as_stomp_py_calls_it(version, name):
    runs = {}
    for lib in (stomp, amqstomp):
        holder = {}

        def make():
            conn = getattr(lib, name)([("127.0.0.1", 1)])
            conn.send_frame = Mock()
            holder["conn"] = conn
            return conn

        def seen():
            return (holder["conn"].send_frame.call_args,)
        out = _calls(version, make, seen)[1][1:]  # (connect: stomp.py needs a socket for it)
        runs[lib.__name__] = out
    assert runs["amqstomp"] == runs["stomp"]


def test_putting_the_transport_back_restores_amqstomps_path(activemq):
    conn = amqstomp.Connection12(activemq.host_and_ports)
    own = conn.transport
    conn.transport = Mock()
    conn.transport = own
    conn.connect("admin", "admin", wait=True)
    try:
        conn.send("/queue/dropin-back-" + uuid.uuid4().hex[:6], "x", receipt="r-back")
        assert conn.wait_for_receipt("r-back", timeout=WAIT).cmd == "RECEIPT"
    finally:
        conn.disconnect()


# --------------------------------------------------------------------------- 3. heartbeat_thread


def _heartbeat_threads(conn_class, broker):
    conn = conn_class([("127.0.0.1", broker.stomp_port)], heartbeats=(500, 500))
    before = conn.heartbeat_thread
    conn.connect("admin", "admin", wait=True)
    assert _until(lambda: conn.heartbeat_thread is not None, 5)
    during = conn.heartbeat_thread
    alive = isinstance(during, threading.Thread) and during.is_alive()
    conn.disconnect()
    assert _until(lambda: conn.heartbeat_thread is None, 5)
    plain = conn_class([("127.0.0.1", broker.stomp_port)])  # heartbeats (0, 0): no thread
    plain.connect("admin", "admin", wait=True)
    none_without = plain.heartbeat_thread
    plain.disconnect()
    return before, alive, none_without


def test_heartbeat_thread_like_stomp_py(activemq):
    theirs = _heartbeat_threads(stomp.Connection12, activemq)
    ours = _heartbeat_threads(amqstomp.Connection12, activemq)
    assert ours == theirs == (None, True, None)
    assert hasattr(amqstomp.Connection11(), "heartbeat_thread") and hasattr(stomp.Connection11(), "heartbeat_thread")
    assert not hasattr(amqstomp.Connection10(), "heartbeat_thread")
    assert not hasattr(stomp.Connection10(), "heartbeat_thread")


# --------------------------------------------------------------------------- 4. a bare BaseTransport's stubs


def _stubs(transport_class):
    bare = transport_class()
    return [bare.send(b"SEND\n\n\x00"), bare.receive(), bare.cleanup(), bare.attempt_connection(),
            bare.disconnect_socket()]


def test_a_bare_base_transports_stubs_do_nothing_as_stomp_pys():
    assert _stubs(BaseTransport) == _stubs(stomp.transport.BaseTransport) == [None] * 5


def _transmitted(lib):
    class Recording(lib.transport.BaseTransport):
        def __init__(self):
            super().__init__()
            self.sent = []

        def send(self, encoded_frame):
            self.sent.append(encoded_frame)

    class SendSpy:
        def __init__(self):
            self.seen = []

        def on_send(self, frame):
            self.seen.append((frame.cmd, dict(frame.headers)))

    transport, spy = Recording(), SendSpy()
    transport.set_listener("spy", spy)
    transport.transmit(lib.utils.Frame("SEND", {"destination": "/queue/a", "content-length": 1, "x-z": "1"}, "hé"))
    transport.transmit(lib.utils.Frame("ACK", {"id": "m-1"}, ""))
    bare = lib.transport.BaseTransport()
    return transport.sent, spy.seen, bare.transmit(lib.utils.Frame("SEND", {"destination": "/queue/b"}, "x"))


def test_a_bare_base_transport_transmits_through_send_as_stomp_pys():
    """stomp.py's transmit() needs no socket: on_send, then the encoded bytes to send()
    (a test's BaseTransport subclass records them)."""
    ours, theirs = _transmitted(amqstomp), _transmitted(stomp)
    assert ours == theirs
    assert ours[0][0] == b"SEND\ncontent-length:3\ndestination:/queue/a\nx-z:1\n\nh\xc3\xa9\x00"


def test_the_real_transport_still_refuses_without_a_socket():
    transport = amqstomp.transport.Transport([("127.0.0.1", 1)])
    with pytest.raises(amqstomp.exception.NotConnectedException):
        transport.send(b"\n")
    with pytest.raises(amqstomp.exception.NotConnectedException):
        transport.transmit(amqstomp.utils.Frame("SEND", {"destination": "/queue/a"}, "x"))
    with pytest.raises(amqstomp.exception.NotConnectedException):
        transport.receive()


# --------------------------------------------------------------------------- 5. errors where stomp.py raises them


def test_a_bad_host_fails_at_connect_as_stomp_py():
    for lib in (stomp, amqstomp):
        conn = lib.Connection([(None, None)], reconnect_attempts_max=1, reconnect_sleep_initial=0.01)
        with pytest.raises(lib.exception.ConnectFailedException):
            conn.connect(wait=True)
    conn = amqstomp.Connection([(None, None)])
    with pytest.raises(ConfigurationError, match="None"):  # also a ValueError naming the entry
        conn.connect(wait=True)


def test_set_ssl_bad_settings_are_stored_and_fail_at_connect(activemq):
    target = ("127.0.0.1", activemq.stomp_port)
    found = {}
    for lib in (stomp, amqstomp):
        conn = lib.Connection12([target])
        conn.set_ssl([target], ssl_version="version", verify=False)  # no error yet
        stored = conn.transport._Transport__ssl_params[target]
        with pytest.raises(TypeError):
            conn.connect(wait=True)
        found[lib.__name__] = ({k: stored[k] for k in ("ssl_version", "verify", "key_file")},
                               {k: conn.get_ssl(target)[k] for k in ("ssl_version", "verify")})
        conn.transport.disconnect_socket()  # stomp.py leaves its socket open
    assert found["amqstomp"] == found["stomp"]
    assert found["amqstomp"][0]["ssl_version"] == "version"
    assert ssl  # (the module stomp.py's set_ssl needs)


@pytest.mark.parametrize("given", [{}, {"content-length": 99}])
def test_a_mock_sees_stomp_pys_content_length_for_a_text_body(given):
    """stomp.py's send() counts a str body as given (characters) and leaves a
    caller's content-length alone; a mock in its place sees the same (the wire
    still carries the encoded size: only the replaced path is stomp.py's)."""
    seen = {}
    for lib in (stomp, amqstomp):
        conn = lib.Connection12()
        conn.transport = MagicMock()
        conn.send("/queue/a", "h\u00e9\u00e9", headers=dict(given))
        frame = conn.transport.transmit.call_args[0][0]
        seen[lib.__name__] = (dict(frame.headers), frame.body)
    assert seen["amqstomp"] == seen["stomp"]


@pytest.mark.parametrize("for_hosts, named", [("localhost:61612", "not a string"), ([("h",)], "('h',)"),
                                              ([("h", "x")], "('h', 'x')")])
def test_set_ssl_for_hosts_that_are_not_pairs_are_named(for_hosts, named):
    conn = amqstomp.Connection12([("127.0.0.1", 1)])
    with pytest.raises(ValueError, match=re.escape(named)):
        conn.set_ssl(for_hosts=for_hosts)


def test_set_ssl_a_cert_validator_that_cannot_be_called_fails_at_connect():
    conn = amqstomp.Connection12([("127.0.0.1", 1)])
    conn.set_ssl(for_hosts=[("127.0.0.1", 1)], cert_validator="yes")  # stored, as stomp.py does
    with pytest.raises(TypeError, match="cert_validator"):  # stomp.py: 'str' object is not callable
        conn.connect(wait=True)
