"""A fresh stomp.py user's findings (M1, M2, L4-L8), each run against the real
stomp.py 9.0 (imported under its own name: tests/stomppy_reference.py) and amqstomp
where both can run the same script: ``on_send``'s frame (body as given, ``''`` for
frames without one, header values escaped as stomp.py's 1.1/1.2 protocol does),
``start()``/``stop()`` of a replaced ``conn.transport``, stomp.py's connect log
lines under its logger, ``TestListener.wait_for_message``'s flag, the RECEIPT
body's type, what a call after ``disconnect()`` says, and ``override_threading``'s
checks. The choices that differ on purpose are in docs/guides/stomp-py.md.
"""
import logging
import socket
import threading
import time
import uuid
from unittest import mock

import pytest

import amqstomp
from amqstomp.exception import ConfigurationError, NotConnectedException
from amqstomp.listener import TestListener

from stomppy_reference import reference

stomp = reference("stomp")
real_listener = reference("stomp.listener")

pytestmark = pytest.mark.timeout(120)

LIBRARIES = (("stomp.py", stomp), ("amqstomp", amqstomp))


def _queue():
    return "/queue/findings-" + uuid.uuid4().hex[:10]


def _until(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.01)
    return predicate()


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SendRecorder:
    def __init__(self):
        self.sent = []

    def on_send(self, frame):
        # the values as handed over (stomp.py later sets content-length on the same dict)
        self.sent.append((frame.cmd, {k: v for k, v in frame.headers.items()
                                      if k not in ("host", "receipt", "content-length")}, frame.body))


# --------------------------------------------------------------------------- M1


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_on_send_sees_the_frame_stomp_py_hands_its_listeners(activemq, version):
    """M1: a listener's ``on_send`` gets the body as given (a ``str`` stays a ``str``),
    ``''`` for CONNECT/SUBSCRIBE/DISCONNECT, header values escaped on 1.1/1.2
    (but for CONNECT/STOMP); the frame on the wire is the one given (the broker
    delivers ``x:y`` and ``héllo``)."""
    queue = _queue()
    seen = {}
    for name, lib in LIBRARIES:
        conn = getattr(lib, "Connection" + version.replace(".", ""))([("127.0.0.1", activemq.stomp_port)])
        recorder = SendRecorder()
        conn.set_listener("s", recorder)
        conn.connect("admin", "admin", wait=True)
        conn.send(queue, "héllo", headers={"a": "x:y", "b": "l1\nl2\\"})
        conn.send(queue, b"raw")
        conn.disconnect()
        seen[name] = recorder.sent
    assert seen["amqstomp"] == seen["stomp.py"]
    assert seen["amqstomp"][1] == ("SEND", {"a": "x\\cy", "b": "l1\\nl2\\\\", "destination": queue}, "héllo")
    assert seen["amqstomp"][0][2] == "" and seen["amqstomp"][-1] == ("DISCONNECT", {}, "")
    # what went on the wire is what was given
    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)])
    got = TestListener(verbose=False)
    conn.set_listener("got", got)
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(queue, id="s", ack="auto")
    try:
        assert _until(lambda: len(got.message_list) == 4)  # two from each library
        texts = [(headers["a"], headers["b"]) for headers, body in got.message_list if body == "héllo"]
        assert texts == [("x:y", "l1\nl2\\")] * 2
    finally:
        conn.disconnect()


def test_a_header_on_send_changes_is_written_as_it_sets_it(activemq):
    """What an ``on_send`` sets goes on the wire as set (escaped by the codec);
    a value it leaves as shown goes as given; CR is escaped on 1.2 as stomp.py's
    ``Protocol12`` does."""
    queue = _queue()

    class Changer:
        shown = None

        def on_send(self, frame):
            if frame.cmd == "SEND":
                Changer.shown = dict(frame.headers)
                frame.headers["added"] = "p:q"

    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)])
    conn.set_listener("c", Changer())
    got = TestListener(verbose=False)
    conn.set_listener("got", got)
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(queue, id="s", ack="auto")
    try:
        conn.send(queue, "x", headers={"cr": "a\rb", "kept": "m:n"})
        assert got.wait_for_message(15)
        headers = got.message_list[0][0]
        assert Changer.shown["cr"] == "a\\rb" and Changer.shown["kept"] == "m\\cn"
        assert headers["cr"] == "a\rb" and headers["kept"] == "m:n" and headers["added"] == "p:q"
    finally:
        conn.disconnect()


def test_a_replaced_transmit_sees_what_stomp_pys_does(activemq):
    """M1's frame for a ``transmit`` replaced on the instance: the body as given,
    header values escaped; the broker still gets the values given."""
    queue = _queue()
    seen = {}
    for name, lib in LIBRARIES:
        conn = lib.Connection12([("127.0.0.1", activemq.stomp_port)])
        conn.connect("admin", "admin", wait=True)
        frames = []
        original = conn.transport.transmit

        def recording(frame, frames=frames, original=original):
            frames.append((frame.cmd, {k: v for k, v in frame.headers.items() if k != "content-length"}, frame.body))
            return original(frame)

        conn.transport.transmit = recording
        conn.send(queue, "héllo", headers={"a": "x:y"})
        del conn.transport.transmit
        conn.disconnect()
        seen[name] = frames
    assert seen["amqstomp"] == seen["stomp.py"] == [("SEND", {"a": "x\\cy", "destination": queue}, "héllo")]
    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)])
    got = TestListener(verbose=False)
    conn.set_listener("got", got)
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(queue, id="s", ack="auto")
    try:
        assert _until(lambda: len(got.message_list) == 2)  # (one wait_for_message may take both)
        assert [(headers["a"], body) for headers, body in got.message_list] == [("x:y", "héllo")] * 2
    finally:
        conn.disconnect()


# --------------------------------------------------------------------------- M2


def _mock_transport_calls(lib):
    conn = lib.Connection12([("127.0.0.1", 61613)])
    conn.transport = mock.Mock()
    conn.transport.is_connected.return_value = True
    conn.transport.vhost = None
    conn.transport.current_host_and_port = ("127.0.0.1", 61613)
    conn.connect("u", "p")
    conn.send("/queue/a", "hi")
    conn.disconnect(receipt="r")
    conn.disconnect()  # no receipt: stomp.py does not stop the transport
    return [call[0] for call in conn.transport.mock_calls]


def test_a_replaced_transport_is_started_and_stopped_as_stomp_py_does():
    """M2: ``conn.transport = Mock()``: ``connect()`` calls ``transport.start()``
    first, ``disconnect(receipt=...)`` calls ``transport.stop()`` after DISCONNECT
    (not without a receipt), as stomp.py's connection classes do."""
    ours, theirs = _mock_transport_calls(amqstomp), _mock_transport_calls(stomp)
    assert ours == theirs
    assert ours.count("start") == 1 and ours.count("stop") == 1 and ours[0] == "start"


# --------------------------------------------------------------------------- L6


def _connect_log(lib, port, caplog):
    caplog.clear()
    conn = lib.Connection12([("127.0.0.1", port)], reconnect_attempts_max=1)
    try:
        conn.connect("admin", "admin", wait=True)
        conn.disconnect()
    except lib.exception.ConnectFailedException:
        pass
    return [(r.name, r.levelname, r.getMessage().split(": [")[0]) for r in caplog.records
            if r.name == "stomp.py" and r.levelno >= logging.INFO]


def test_stomp_pys_connect_lines_under_its_logger(activemq, caplog):
    """L6: stomp.py's INFO ``established connection to host H, port P`` and WARNING
    ``could not connect to host H, port P: <error>``, under ``"stomp.py"``."""
    caplog.set_level(logging.INFO, logger="stomp.py")
    closed = _closed_port()
    for port, line in ((activemq.stomp_port, ("stomp.py", "INFO", "established connection to host 127.0.0.1, "
                                                                   "port %d" % activemq.stomp_port)),
                       (closed, ("stomp.py", "WARNING", "could not connect to host 127.0.0.1, port %d" % closed))):
        theirs = _connect_log(stomp, port, caplog)
        ours = _connect_log(amqstomp, port, caplog)
        assert line in theirs and line in ours, (theirs, ours)


# --------------------------------------------------------------------------- L7


@pytest.mark.parametrize("name,lib", [("stomp.py", real_listener), ("amqstomp", amqstomp.listener)])
def test_wait_for_message_is_stomp_pys_flag(name, lib):
    """L7: two messages, one ``wait_for_message()`` takes both (the flag is
    cleared); it returns None, as stomp.py's."""
    listener = lib.TestListener(print_to_log=True)
    frame_class = stomp.utils.Frame if name == "stomp.py" else amqstomp.utils.Frame
    listener.on_message(frame_class("MESSAGE", {"message-id": "1"}, "a"))
    listener.on_message(frame_class("MESSAGE", {"message-id": "2"}, "b"))
    assert listener.wait_for_message() is None
    assert listener.message_received is False
    if name == "amqstomp":  # amqstomp's timeout: none left to wait for
        assert listener.wait_for_message(0.01) is False
        listener.on_heartbeat()
        listener.on_heartbeat()
        assert listener.wait_for_heartbeat() is None and listener.heartbeat_received is False


# --------------------------------------------------------------------------- L8


@pytest.mark.parametrize("auto_decode,body", [(True, ""), (False, b"")])
def test_wait_for_receipt_gives_the_body_listeners_get(activemq, auto_decode, body):
    """L8: the RECEIPT frame ``wait_for_receipt`` returns has the body type the
    listeners' ``on_receipt`` get (stomp.py's: ``str`` with ``auto_decode``),
    whether or not a listener has ``on_receipt``."""
    for with_listener in (False, True):
        conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)], auto_decode=auto_decode)
        if with_listener:
            conn.set_listener("w", amqstomp.WaitingListener("none"))
        conn.connect("admin", "admin", wait=True)
        try:
            conn.send(_queue(), "x", receipt="r1")
            frame = conn.wait_for_receipt("r1", 15)
            assert type(frame.body) is type(body) and frame.body == body
        finally:
            conn.disconnect()


# --------------------------------------------------------------------------- L4


def test_a_call_after_disconnect_names_the_frame_not_its_bookkeeping(activemq):
    """L4: after ``disconnect()``, ``unsubscribe``/``ack``/``commit`` of what was
    live raise NotConnectedException naming the frame not sent, not "this
    connection has not subscribed" (stomp.py returns None: nothing reached the broker)."""
    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)])
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(_queue(), id="s1", ack="client")
    tx = conn.begin()
    conn.disconnect()
    for command, call in (("UNSUBSCRIBE", lambda: conn.unsubscribe("s1")), ("ACK", lambda: conn.ack("m1")),
                          ("COMMIT", lambda: conn.commit(tx))):
        with pytest.raises(NotConnectedException) as info:
            call()
        assert str(info.value) == "not connected (no open socket): %s not sent" % command
        assert info.value.__cause__ is None


# --------------------------------------------------------------------------- L5


def test_override_threading_checks_its_factory(activemq):
    """L5: a factory that is not callable is refused at ``override_threading``; one
    that returns None or a thread it did not start is refused at ``connect()``
    (not "no CONNECTED within ..."), the socket closed; a good one then works."""
    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)], timeout=10)
    with pytest.raises(TypeError, match="callable"):
        conn.transport.override_threading(5)

    def started(callback):
        thread = threading.Thread(target=callback, daemon=True)
        thread.start()
        return thread

    for factory, said in ((lambda callback: None, "returned None"),
                          (lambda callback: threading.Thread(target=callback, daemon=True), "not started")):
        conn.transport.override_threading(factory)
        with pytest.raises(ConfigurationError, match=said):
            conn.connect("admin", "admin", wait=True)
        assert not conn.transport.is_open()
        conn.transport.override_threading(started)
        conn.connect("admin", "admin", wait=True)
        assert conn.is_connected()
        conn.disconnect()


# --------------------------------------------------------------------------- L3


@pytest.mark.timeout(40)
@pytest.mark.parametrize("auto_reconnect", [False, True])
def test_a_second_connect_while_connected(activemq, auto_reconnect):
    """L3 (a documented difference): connect() again with the same arguments does
    nothing (with ``auto_reconnect`` too: it used to wait for ever on its own lock);
    with another login, passcode or headers it raises ConnectFailedException naming
    the login (never the passcode) and the connection stays up. stomp.py sent a
    second CONNECT, which ActiveMQ answers with ERROR."""
    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)], auto_reconnect=auto_reconnect)
    listener = TestListener(verbose=False)
    conn.set_listener("t", listener)
    conn.connect("admin", "admin", wait=True)
    try:
        conn.connect("admin", "admin", wait=True)
        for args, kwargs in ((("other", "admin"), {}), (("admin", "s3cret"), {}),
                             (("admin", "admin"), {"headers": {"client-id": "z"}})):
            with pytest.raises(amqstomp.exception.ConnectFailedException, match="login 'admin'") as info:
                conn.connect(*args, wait=True, **kwargs)
            assert "s3cret" not in str(info.value)
        assert conn.is_connected() and listener.connections == 1 and listener.errors == 0
        conn.send(_queue(), "x", receipt="r")
        conn.wait_for_receipt("r", 15)
    finally:
        conn.disconnect()
