"""stomp.py 9.0's connection, protocol and transport behaviour, against a real ActiveMQ
(issue 13 items 2 and 3): ``send_frame`` interception, the transport API
(``transmit``, ``send``, ``start``/``stop``, ``set_connected``, ``set_receipt``,
``process_frame``, ``receive``...), ``override_threading`` with a custom thread
factory, ``Frame.original_headers``, listener call order and arguments,
stomp.py's exception types. Where feasible the real stomp.py (imported here
under its own name; amqstomp is not installed as ``stomp`` in this module)
runs the same script against the same broker and the two are compared.
"""
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

import amqstomp
from amqstomp import utils
from amqstomp.exception import ConnectFailedException, NotConnectedException, RequiredArgumentError
from amqstomp.listener import ConnectionListener, HeartbeatListener, Publisher, TestListener
from amqstomp.protocol import Protocol10, Protocol12
from amqstomp.transport import BaseTransport, Transport

from stomppy_reference import reference

# the real stomp.py, decided by module identity (tests/stomppy_reference.py); skipped only without stomp.py 9.0
stomp = reference("stomp")

pytestmark = pytest.mark.timeout(120)

WAIT = 15.0


def _queue():
    return "/queue/compat-" + uuid.uuid4().hex[:10]


def _until(predicate, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def _hosts(broker):
    return [("127.0.0.1", broker.stomp_port)]


class Recorder:
    """Every listener callback, in order, with a summary of its argument (both libraries)."""

    def __init__(self):
        self.events = []
        self.sent = []
        self.lock = threading.Lock()

    def _add(self, *event):
        with self.lock:
            self.events.append(event)

    def on_connecting(self, host_and_port):
        self._add("connecting", tuple(host_and_port))

    def on_connected(self, frame):
        self._add("connected", frame.cmd)

    def on_disconnecting(self):
        self._add("disconnecting")

    def on_disconnected(self):
        self._add("disconnected")

    def on_heartbeat_timeout(self):
        self._add("heartbeat_timeout")

    def on_before_message(self, frame):
        self._add("before_message", frame.body)

    def on_message(self, frame):
        self._add("message", frame.body, frame.headers["destination"], frame.headers["subscription"])

    def on_receipt(self, frame):
        self._add("receipt", frame.headers["receipt-id"])

    def on_error(self, frame):
        self._add("error", frame.headers.get("message"))

    def on_send(self, frame):
        with self.lock:
            self.sent.append((frame.cmd, sorted(frame.headers)))

    def on_heartbeat(self):
        pass  # none asked for

    def on_receiver_loop_completed(self, frame):
        self._add("receiver_loop_completed", frame)

    def has(self, *event):
        with self.lock:
            return event in self.events

    def first(self, name):
        with self.lock:
            return next(e for e in self.events if e[0] == name)


def test_listener_calls_match_stomp_py(activemq):
    """The same script through stomp.py 9.0 and amqstomp: the same callbacks in
    the same order with the same arguments, but for two documented choices at
    the end: amqstomp calls on_disconnecting before DISCONNECT (stomp.py 9.0
    never calls it), and on_disconnected is always the last callback (stomp.py
    calls it while handling the DISCONNECT receipt, before the listeners'
    on_receipt of it and before on_receiver_loop_completed)."""
    runs = {}
    for name, conn_class in (("stomp.py", stomp.Connection12), ("amqstomp", amqstomp.Connection12)):
        dest = _queue()
        rec = Recorder()
        ids = []

        class Acker:
            def on_message(self, frame):
                ids.append(frame.headers["ack"])

        conn = conn_class(_hosts(activemq))
        conn.set_listener("rec", rec)
        conn.set_listener("zz-acker", Acker())
        conn.connect("admin", "admin", wait=True)
        conn.subscribe(dest, id="s1", ack="client-individual", receipt="r-sub")
        assert _until(lambda: rec.has("receipt", "r-sub")), name
        conn.send(dest, "hello", content_type="text/plain")
        assert _until(lambda: ids), name
        conn.ack(ids[0], receipt="r-ack")
        assert _until(lambda: rec.has("receipt", "r-ack")), name
        conn.disconnect(receipt="r-disc")
        assert _until(lambda: rec.has("disconnected") and rec.has("receiver_loop_completed", None)), name
        runs[name] = rec
    theirs, ours = runs["stomp.py"].events, runs["amqstomp"].events
    start = [("connecting", ("127.0.0.1", activemq.stomp_port)), ("connected", "CONNECTED"), ("receipt", "r-sub"),
             ("before_message", "hello"), ("message", "hello", theirs[4][2], "s1"), ("receipt", "r-ack")]
    assert theirs == start + [("disconnected",), ("receipt", "r-disc"), ("receiver_loop_completed", None)]
    assert ours[:6] == [e if e[0] != "message" else e[:2] + (ours[4][2],) + e[3:] for e in start]
    assert ours[6:] == [("disconnecting",), ("receipt", "r-disc"), ("receiver_loop_completed", None),
                        ("disconnected",)]
    # on_send: the same frames with the same header names
    assert [cmd for cmd, _ in runs["stomp.py"].sent] == ["STOMP", "SUBSCRIBE", "SEND", "ACK", "DISCONNECT"]
    assert runs["amqstomp"].sent == runs["stomp.py"].sent


def test_listeners_hear_the_receipts_the_application_asked_for_as_in_stomp_py(activemq):
    """stomp.py calls on_receipt for the receipts the application asked for (and
    DISCONNECT's, which it asks for itself); amqstomp asks for a receipt on every
    SUBSCRIBE that has none (to tell a refused one): no listener hears that one,
    with or without a replaced send_frame."""
    heard = {}
    for name, base in (("stomp.py", stomp.Connection12), ("amqstomp", amqstomp.Connection12),
                       ("amqstomp, send_frame replaced", _spy(amqstomp.Connection12))):
        dest = _queue()
        got = Collector()
        conn = base(_hosts(activemq))
        conn.seen = []
        conn.set_listener("t", got)
        conn.connect("admin", "admin", wait=True)
        conn.subscribe(dest, id="s1", ack="auto")
        conn.subscribe(_queue(), id="s2", ack="auto", receipt="r-mine")
        conn.send(dest, "one", receipt="r-send")
        assert _until(lambda: got.messages and "r-send" in got.receipts), name
        conn.disconnect(receipt="r-disc")
        heard[name] = got.receipts
    assert heard["stomp.py"] == ["r-mine", "r-send", "r-disc"]
    assert heard["amqstomp"] == heard["stomp.py"]
    assert heard["amqstomp, send_frame replaced"] == heard["stomp.py"]


# --------------------------------------------------------------------------- send_frame


def _spy(base):
    class Spy(base):
        def send_frame(self, cmd, headers=None, body=""):
            self.seen.append((cmd, dict(headers or {})))
            return super().send_frame(cmd, headers, body)

    return Spy


class Collector:
    """MESSAGE frames and receipt ids, for either library."""

    def __init__(self):
        self.messages, self.receipts = [], []

    def on_message(self, frame):
        self.messages.append(frame)

    def on_receipt(self, frame):
        self.receipts.append(frame.headers["receipt-id"])


def _ack_args(conn, frame):
    """``ack``/``nack``'s arguments for ``frame`` in the connection's STOMP version."""
    if conn.version == "1.2":
        return (frame.headers["ack"],)
    return frame.headers["message-id"], frame.headers["subscription"]


def _send_frame_script(conn, dest):
    got = Collector()
    conn.set_listener("t", got)
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(dest, id="s1", ack="client-individual", receipt="r-sub")
    assert _until(lambda: "r-sub" in got.receipts)
    conn.send(dest, "one")
    assert _until(lambda: got.messages)
    conn.ack(*_ack_args(conn, got.messages[-1]))
    tx = conn.begin()
    conn.send(dest, "two", transaction=tx)
    conn.commit(tx)
    tx2 = conn.begin()
    conn.send(dest, "dropped", transaction=tx2)
    conn.abort(tx2)
    assert _until(lambda: len(got.messages) >= 2)
    conn.nack(*_ack_args(conn, got.messages[-1]), receipt="r-nack")
    assert _until(lambda: "r-nack" in got.receipts)
    conn.unsubscribe("s1")
    conn.disconnect(receipt="r-disc")
    return got


@pytest.mark.parametrize("version", ["1.2", "1.1"])
def test_protocol_frames_go_through_a_replaced_send_frame_as_in_stomp_py(activemq, version):
    classes = {"1.2": (stomp.Connection12, amqstomp.Connection12), "1.1": (stomp.Connection11, amqstomp.Connection11)}
    seen = {}
    for name, base in zip(("stomp.py", "amqstomp"), classes[version]):
        dest = _queue()
        conn = _spy(base)(_hosts(activemq))
        conn.seen = []
        got = _send_frame_script(conn, dest)
        assert [m.body for m in got.messages] == ["one", "two"], name  # the broker had every frame
        seen[name] = conn.seen
    commands = ["STOMP", "SUBSCRIBE", "SEND", "ACK", "BEGIN", "SEND", "COMMIT", "BEGIN", "SEND", "ABORT", "NACK",
                "UNSUBSCRIBE", "DISCONNECT"]
    assert [cmd for cmd, _ in seen["stomp.py"]] == commands
    assert [cmd for cmd, _ in seen["amqstomp"]] == commands
    for (cmd, theirs), (_, ours) in zip(seen["stomp.py"], seen["amqstomp"]):
        assert sorted(ours) == sorted(theirs), cmd  # the same headers, by name
        for key in ("id", "ack", "receipt", "accept-version", "login", "passcode"):
            if key in theirs and not (cmd in ("ACK", "NACK") and key == "id"):  # ack ids differ per run
                assert str(ours[key]) == str(theirs[key]), (cmd, key)


def test_a_mock_on_the_instance_sees_the_frames_and_can_hold_them(activemq):
    dest = _queue()
    conn = amqstomp.Connection12(_hosts(activemq))
    got = TestListener()
    conn.set_listener("t", got)
    conn.connect("admin", "admin", wait=True)
    seen = []
    original = conn.send_frame

    def spy(cmd, headers=None, body=b""):
        seen.append(cmd)
        if cmd == "SEND" and body == "held":  # the body as send() was given it, as stomp.py passes it
            return None  # never written
        return original(cmd, headers, body)

    conn.send_frame = spy
    conn.subscribe(dest, id="s1", receipt="r")
    conn.send(dest, "held")
    conn.send(dest, "written")
    assert _until(lambda: got.message_list)
    time.sleep(0.3)
    assert [body for _, body in got.message_list] == ["written"]
    del conn.send_frame  # back to the class's: the direct path again
    conn.send(dest, "direct")
    assert _until(lambda: len(got.message_list) == 2)
    conn.disconnect()
    assert seen == ["SUBSCRIBE", "SEND", "SEND"]  # the spy was gone before "direct" and DISCONNECT


def test_the_direct_path_is_taken_when_send_frame_is_not_replaced():
    conn = amqstomp.Connection12([("127.0.0.1", 1)])
    assert not conn._send_frame_replaced
    assert _spy(amqstomp.Connection12)([("127.0.0.1", 1)])._send_frame_replaced
    conn.send_frame = lambda *a, **k: None
    assert conn._send_frame_replaced
    del conn.send_frame
    assert not conn._send_frame_replaced


# --------------------------------------------------------------------------- the transport API


def test_transport_api_in_stomp_py_order(activemq):
    """stomp.py's manual order: start(), transmit(CONNECT), wait_for_connection(),
    transmit/send frames, set_receipt + DISCONNECT, stop()."""
    dest = _queue()
    transport = Transport(_hosts(activemq))
    got = TestListener()
    transport.set_listener("t", got)
    assert not transport.is_connected() and transport.socket is None
    transport.start()
    assert transport.running and not transport.is_connected()
    transport.transmit(utils.Frame("CONNECT", {"accept-version": "1.2", "host": "/", "login": "admin",
                                               "passcode": "admin"}))
    transport.wait_for_connection(WAIT)
    assert transport.is_connected() and transport.connected and isinstance(transport.socket, socket.socket)
    transport.transmit(utils.Frame("SUBSCRIBE", {"destination": dest, "id": "1", "ack": "auto", "receipt": "r1"}))
    transport.wait_for_receipt("r1", WAIT)
    transport.transmit(utils.Frame("SEND", {"destination": dest}, "via transmit"))
    transport.send(b"SEND\ndestination:" + dest.encode() + b"\n\nvia send\x00")
    transport.transmit(utils.Frame(None, {}, None))  # stomp.py's heart-beat frame: an EOL
    assert _until(lambda: len(got.message_list) == 2)
    assert [body for _, body in got.message_list] == ["via transmit", "via send"]
    transport.set_connected(False)
    assert not transport.is_connected() and transport.running
    transport.set_connected(True)
    assert transport.is_connected()
    transport.set_receipt("r-disc", "DISCONNECT")
    transport.transmit(utils.Frame("DISCONNECT", {"receipt": "r-disc"}))
    started = time.monotonic()
    transport.stop(WAIT)  # the receipt closes the socket, as in stomp.py (stop() would close it after WAIT)
    assert time.monotonic() - started < WAIT / 3
    assert not transport.is_connected() and not transport.running
    assert _until(lambda: got.disconnects == 1)
    with pytest.raises(NotConnectedException):
        transport.send(b"\n")


def test_a_receipt_marked_disconnect_ends_the_connected_state(activemq):
    """stomp.py's set_receipt(id, "DISCONNECT"): its RECEIPT makes the connection
    not connected (the socket closes only for the DISCONNECT frame's own receipt)."""
    conn = amqstomp.Connection12(_hosts(activemq))
    conn.connect("admin", "admin", wait=True)
    conn.set_receipt("r-mark", "DISCONNECT")
    conn.set_receipt("r-forgotten", "DISCONNECT")
    conn.set_receipt("r-forgotten", None)
    conn.subscribe(_queue(), id="1", receipt="r-forgotten")
    conn.wait_for_receipt("r-forgotten", WAIT)
    assert conn.is_connected()
    conn.subscribe(_queue(), id="2", receipt="r-mark")
    conn.wait_for_receipt("r-mark", WAIT)
    assert _until(lambda: not conn.is_connected())
    assert conn.transport.running  # the socket is still open
    conn.transport.disconnect_socket()


def test_start_then_connect_sends_connect_on_the_started_socket(activemq):
    conn = amqstomp.Connection12(_hosts(activemq))
    conn.transport.start()
    assert conn.transport.running and not conn.is_connected()
    conn.connect("admin", "admin", wait=True)
    assert conn.is_connected() and conn.transport.link_seq == 1
    conn.disconnect()


def test_disconnect_socket_cleanup_and_a_bounded_stop(activemq):
    for end in ("disconnect_socket", "cleanup", "stop"):
        rec = Recorder()
        conn = amqstomp.Connection12(_hosts(activemq))
        conn.set_listener("rec", rec)
        conn.connect("admin", "admin", wait=True)
        started = time.monotonic()
        if end == "stop":
            conn.transport.stop(0.3)  # connected and nobody closes it: closed when the time is up
        else:
            getattr(conn.transport, end)()
        assert _until(lambda: rec.has("disconnected")), end
        assert time.monotonic() - started < 5, end
        assert not conn.is_connected()
    conn.transport.stop()  # no socket: returns at once


def test_wait_for_connection_raises_connect_failed(activemq):
    transport = Transport(_hosts(activemq))
    with pytest.raises(ConnectFailedException):
        transport.wait_for_connection(0.2)  # no socket
    transport.start()
    with pytest.raises(ConnectFailedException):
        transport.wait_for_connection(0.3)  # no CONNECT sent
    transport.disconnect_socket()
    assert BaseTransport().listeners == {}
    with pytest.raises(ConnectFailedException):
        BaseTransport().start()  # no brokers


def test_a_transport_subclass_sees_every_frame_and_every_read(activemq):
    """stomp.py's override points: transmit(frame) and send(bytes) for what goes
    out, receive() and process_frame(f, frame_str) for what comes in."""
    dest = _queue()

    class Watched(Transport):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.transmitted, self.written, self.reads, self.processed = [], [], [], []

        def transmit(self, frame):
            self.transmitted.append(frame.cmd)
            return super().transmit(frame)

        def send(self, encoded_frame):
            self.written.append(encoded_frame)
            super().send(encoded_frame)

        def receive(self):
            data = super().receive()
            self.reads.append(len(data))
            return data

        def process_frame(self, f, frame_str):
            self.processed.append((f.cmd, frame_str.split(b"\n", 1)[0] if frame_str else None))
            super().process_frame(f, frame_str)

    transport = Watched(_hosts(activemq))
    proto = Protocol12(transport)  # stomp.py's composition: a protocol over a transport
    got = TestListener()
    transport.set_listener("t", got)
    assert transport.get_listener("protocol-listener") is proto
    proto.connect("admin", "admin", wait=True)
    proto.subscribe(dest, id="1", ack="client-individual")
    proto.send(dest, "hi")
    assert _until(lambda: got.message_list)
    headers, body = got.message_list[0]
    assert body == "hi"  # decoded, as stomp.py's reader does before process_frame
    proto.ack(headers["ack"])
    proto.disconnect()
    assert transport.transmitted == ["STOMP", "SUBSCRIBE", "SEND", "ACK", "DISCONNECT"]
    assert [w.split(b"\n", 1)[0] for w in transport.written] == [b"STOMP", b"SUBSCRIBE", b"SEND", b"ACK",
                                                                 b"DISCONNECT"]
    assert sum(transport.reads) > 0 and transport.reads[-1] == 0  # the end of the socket
    commands = [cmd for cmd, _ in transport.processed]
    assert commands[0] == "CONNECTED" and "MESSAGE" in commands and commands.count("RECEIPT") >= 2
    assert ("MESSAGE", b"MESSAGE") in transport.processed


def test_a_mock_transmit_on_the_instance(activemq):
    dest = _queue()
    conn = amqstomp.Connection12(_hosts(activemq))
    conn.connect("admin", "admin", wait=True)
    seen = []
    original = conn.transport.transmit
    conn.transport.transmit = lambda frame: (seen.append((frame.cmd, frame.body)), original(frame))[1]
    assert conn.transport.hooked
    got = TestListener()
    conn.set_listener("t", got)
    conn.subscribe(dest, id="1", receipt="r")
    conn.send(dest, "x")
    assert _until(lambda: got.message_list)
    del conn.transport.transmit
    assert not conn.transport.hooked
    conn.disconnect()
    # the body as send() was given it, as stomp.py's transmit gets it
    assert [cmd for cmd, _ in seen] == ["SUBSCRIBE", "SEND"] and seen[1][1] == "x"


def test_process_frame_injects_a_received_frame(activemq):
    got = TestListener()
    conn = amqstomp.Connection12(_hosts(activemq))
    conn.set_listener("t", got)
    fake = utils.Frame("MESSAGE", {"destination": "/queue/x", "message-id": "m1", "subscription": "none"}, b"fake")
    conn.transport.process_frame(fake, None)  # no socket: the listeners, on this thread
    assert [body for _, body in got.message_list] == ["fake"]
    conn.connect("admin", "admin", wait=True)
    conn.transport.process_frame(utils.Frame("MESSAGE", {"destination": "/queue/x", "message-id": "m2",
                                                         "subscription": "none"}, b"fake 2"), None)
    assert _until(lambda: len(got.message_list) == 2)  # as the reader hands it on, on the dispatcher
    conn.transport.notify("heartbeat")
    assert _until(lambda: got.heartbeat_count == 1)
    conn.disconnect()


def test_override_threading_makes_the_connections_threads(activemq):
    dest = _queue()
    made = []

    def factory(callback):
        thread = threading.Thread(target=callback, daemon=True)
        thread.made_by_factory = True
        thread.start()
        made.append(thread)
        return thread

    conn = amqstomp.Connection12(_hosts(activemq), heartbeats=(1000, 1000))
    conn.transport.override_threading(factory)
    ran_on = []

    class L(ConnectionListener):
        def on_message(self, frame):
            ran_on.append(threading.current_thread())

    conn.set_listener("l", L())
    conn.connect("admin", "admin", wait=True)
    assert len(made) == 3  # reader, dispatcher, timer
    tag = "%d.1" % conn.transport.number  # the connection's number in the process, its first socket
    assert {t.name for t in made} == {"amqstomp-reader-" + tag, "amqstomp-dispatch-" + tag, "amqstomp-timer-" + tag}
    assert all(t in made for t in conn.transport.threads())
    conn.subscribe(dest, id="1")
    conn.send(dest, "x")
    assert _until(lambda: ran_on)
    # one of the socket's two threads (amqstomp._io.handoff: the reading one when nothing is queued)
    assert getattr(ran_on[0], "made_by_factory", False) and ran_on[0].name in ("amqstomp-dispatch-" + tag,
                                                                                  "amqstomp-reader-" + tag)
    time.sleep(1.2)  # a heart-beat went out from the factory's timer thread
    assert conn.is_connected()
    conn.disconnect()
    assert not any(t.is_alive() for t in made)
    conn.connect("admin", "admin", wait=True)  # the next socket's threads too
    assert len(made) == 6
    conn.disconnect()


def test_override_threading_with_stomp_pys_default_create_thread(activemq):
    conn = amqstomp.Connection11(_hosts(activemq))
    conn.transport.override_threading(utils.default_create_thread)
    conn.connect("admin", "admin", wait=True)
    assert all(t.daemon for t in conn.transport.threads())
    conn.disconnect()


# --------------------------------------------------------------------------- original_headers


def test_original_headers_keep_what_arrived(activemq):
    """on_before_message changes headers; on_message sees the change in
    ``headers`` and the headers as they arrived in ``original_headers``, as with
    stomp.py 9.0 on the same broker."""
    results = {}
    for name, module in (("stomp.py", stomp), ("amqstomp", amqstomp)):
        dest = _queue()
        seen = []

        class Rewriter(module.ConnectionListener):
            def on_before_message(self, frame):
                frame.headers["rewritten"] = "yes"
                del frame.headers["subscription"]

        class Reader(module.ConnectionListener):
            def on_message(self, frame):
                seen.append((dict(frame.headers), dict(frame.original_headers)))

        conn = module.Connection12(_hosts(activemq))
        conn.set_listener("a", Rewriter())
        conn.set_listener("b", Reader())
        conn.connect("admin", "admin", wait=True)
        conn.subscribe(dest, id="s1")
        conn.send(dest, "x", headers={"custom": "1"})
        assert _until(lambda: seen), name
        conn.disconnect()
        headers, original = seen[0]
        assert headers["rewritten"] == "yes" and "subscription" not in headers, name
        assert "rewritten" not in original and original["subscription"] == "s1" and original["custom"] == "1", name
        results[name] = sorted(original)
    assert results["amqstomp"] == results["stomp.py"]


@pytest.mark.parametrize("impl", ["compiled", "pure"])
def test_frame_original_headers_in_both_codecs(impl):
    if impl == "compiled":
        codec = pytest.importorskip("amqstomp._core._codec")
    else:
        import amqstomp._core._codec_py as codec
    made = codec.Frame("SEND", {"a": "1"}, b"")
    made.headers["a"] = "2"
    assert made.original_headers == {"a": "1"}  # copied by the constructor, as stomp.py's
    assert codec.Frame("SEND").original_headers == {}
    parser = codec.FrameParser()
    (parsed,) = parser.feed(b"MESSAGE\nk:v\n\nbody\x00")
    original = parsed.original_headers  # made on first read
    parsed.headers["k"] = "changed"
    assert original == {"k": "v"} and parsed.original_headers is original
    parsed.original_headers = {"set": "by hand"}
    assert parsed.original_headers == {"set": "by hand"}
    (lazy,) = codec.FrameParser().feed(b"MESSAGE\nk:v\n\n\x00")
    lazy.headers["k"] = "changed"
    assert lazy.original_headers == {"k": "changed"}  # nobody read it before the change (see the dispatcher)


# --------------------------------------------------------------------------- shape and exceptions


def test_connections_are_listeners_and_publishers():
    for cls, base in ((amqstomp.Connection10, ConnectionListener), (amqstomp.Connection11, HeartbeatListener),
                      (amqstomp.Connection12, HeartbeatListener)):
        conn = cls([("127.0.0.1", 1)])
        assert isinstance(conn, base) and isinstance(conn, Publisher)
        assert conn.transport.get_listener("protocol-listener") is conn
        assert conn.transport.dispatch.on_send == ()  # its heart-beat callbacks are never called
    assert issubclass(Protocol10, ConnectionListener) and issubclass(Protocol12, HeartbeatListener)
    assert amqstomp.Connection12.is_eol(b"\r\n") and not amqstomp.Connection12.is_eol(b"x")


def test_a_connection_subclass_hears_its_own_callbacks(activemq):
    """stomp.py registers the connection as its transport's 'protocol-listener':
    a subclass that defines on_message gets messages."""
    dest = _queue()
    got = []

    class MyConnection(amqstomp.Connection12):
        def on_message(self, frame):
            got.append(frame.body)

    conn = MyConnection(_hosts(activemq))
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(dest, id="1")
    conn.send(dest, "to myself")
    assert _until(lambda: got)
    conn.disconnect()
    assert got == ["to myself"]


@pytest.mark.parametrize("call", [
    lambda c: c.set_listener("x", None),
    lambda c: c.send(None, "body"),
    lambda c: c.send("/queue/x", None),
    lambda c: c.ack(None),
    lambda c: c.nack(None),
    lambda c: c.subscribe(None, id="1"),
    lambda c: c.subscribe("/queue/x", id=None),
    lambda c: c.unsubscribe(None),
    lambda c: c.commit(None),
    lambda c: c.abort(None),
])
def test_required_arguments_raise_what_stomp_py_raises(call):
    with pytest.raises(AssertionError):
        call(stomp.Connection12([("127.0.0.1", 1)]))
    with pytest.raises(AssertionError) as raised:
        call(amqstomp.Connection12([("127.0.0.1", 1)]))
    assert isinstance(raised.value, RequiredArgumentError) and isinstance(raised.value, ValueError)


def test_get_ssl_is_stomp_pys_dict(tmp_path):
    conn = amqstomp.Connection12([("127.0.0.1", 1), ("127.0.0.1", 2)])
    assert conn.get_ssl(("127.0.0.1", 1)) is None
    conn.set_ssl(for_hosts=[("127.0.0.1", 2)], verify=False, password="secret")
    params = conn.get_ssl(("127.0.0.1", 2))
    assert params["verify"] is False and params["ssl_context"] is conn.transport.get_ssl_context(("127.0.0.1", 2))
    assert "secret" not in repr(params) and params["password"] == "secret"
    assert conn.get_ssl(("127.0.0.1", 1)) is None


# --------------------------------------------------------------------------- logging


def test_a_stomp_py_logging_setup_applies_without_install_as_stomp(activemq):
    """``import amqstomp as stomp``: handlers and level set on stomp.py's logger get
    amqstomp's records (their own names kept); propagate=False keeps them from the root."""
    code = textwrap.dedent("""
        import logging, sys
        root = logging.getLogger()
        root_records = []
        class Keep(logging.Handler):
            def emit(self, record):
                root_records.append(record.name)
        root.addHandler(Keep())
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        stomp_py = logging.getLogger("stomp.py")
        stomp_py.addHandler(handler)
        stomp_py.setLevel(logging.DEBUG)
        stomp_py.propagate = False
        import amqstomp as stomp
        conn = stomp.Connection12([("127.0.0.1", PORT)])
        conn.connect("admin", "admin", wait=True)
        conn.disconnect()
        print("ROOT", root_records)
    """).replace("PORT", str(activemq.stomp_port))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "amqstomp.transport DEBUG sending STOMP" in proc.stdout
    assert "'passcode': '********'" in proc.stdout  # never the passcode itself
    assert "ROOT []" in proc.stdout


LISTENER_RAISES = textwrap.dedent("""
    import logging, sys, time
    if sys.argv[1] == "configured":
        logging.basicConfig(stream=sys.stdout, level=logging.ERROR, format="LOGGED %(name)s %(message)s")
    import amqstomp as stomp
    from amqstomp.jms import ConnectionFactory, Queue, TextMessage
    class Boom(stomp.ConnectionListener):
        def on_message(self, frame):
            raise RuntimeError("boom in on_message")
    conn = stomp.Connection12([("127.0.0.1", PORT)])
    conn.set_listener("boom", Boom())
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(QUEUE + ".a", id="1")
    conn.send(QUEUE + ".a", "x", receipt="r")
    conn.wait_for_receipt("r", 10)
    time.sleep(0.5)
    conn.disconnect()
    def jms_listener(message):
        raise RuntimeError("boom in a JMS listener")
    with ConnectionFactory("stomp://127.0.0.1:PORT?jms.redeliveryPolicy.maximumRedeliveries=0").create_connection() as c:
        session = c.create_session()
        session.create_consumer(Queue(QUEUE + ".b")).set_message_listener(jms_listener)
        c.start()
        session.create_producer(Queue(QUEUE + ".b")).send(TextMessage("x"))
        time.sleep(1.0)
""")


@pytest.mark.parametrize("logging_set_up", ["unconfigured", "configured"])
def test_a_listener_that_raises_is_never_invisible(activemq, logging_set_up):
    """stomp.py's listener errors reach stderr through logging's last resort; amqstomp's
    NullHandler would hide them: with logging not configured they are written to stderr
    (as an exception that ends a thread is), with it configured they go to its handlers only."""
    code = LISTENER_RAISES.replace("PORT", str(activemq.stomp_port)).replace(
        "QUEUE", repr("/queue/raises." + uuid.uuid4().hex[:8]))
    proc = subprocess.run([sys.executable, "-c", code, logging_set_up], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for what in ("boom in on_message", "boom in a JMS listener"):
        if logging_set_up == "unconfigured":
            assert "RuntimeError: %s" % what in proc.stderr, proc.stderr
            assert "Traceback" in proc.stderr
        else:
            assert "RuntimeError: %s" % what in proc.stdout, proc.stdout  # the traceback, by the handler
            assert what not in proc.stderr, proc.stderr
    if logging_set_up == "configured":
        assert "LOGGED amqstomp.transport listener" in proc.stdout


def test_verbose_reaches_loggers_made_later():
    import logging

    import amqstomp.log as amqlog

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    late = logging.getLogger("amqstomp.made-later-%s" % uuid.uuid4().hex[:6])  # after every filter was attached
    keep = Keep()
    late.addHandler(keep)
    late.setLevel(logging.DEBUG)
    saved = amqlog.verbose
    try:
        error = OSError(104, "reset")
        amqlog.verbose = True
        late.warning("socket error: %s", error)
        amqlog.verbose = False
        late.warning("socket error: %s", error)
        logging.getLogger("amqstomplike").warning("not ours: %s", error)
    finally:
        amqlog.verbose = saved
        late.removeHandler(keep)
    assert [bool(r.exc_info) for r in records] == [True, False]


# --------------------------------------------------------------------------- a closed connection


def _closed_outcomes(module, version):
    """Exception type names of the frame-writing calls on a connection never connected."""
    cls = {"1.0": module.Connection10, "1.1": module.Connection11, "1.2": module.Connection12}[version]
    conn = cls([("127.0.0.1", 1)])
    ids = {"1.0": ("m1",), "1.1": ("m1", "s1"), "1.2": ("m1",)}[version]
    calls = {
        "send(transaction=tx)": lambda: conn.send("/queue/a", "x", transaction="tx"),
        "commit(tx)": lambda: conn.commit("tx"),
        "abort(tx)": lambda: conn.abort("tx"),
        "begin(tx)": lambda: conn.begin("tx"),
        "ack": lambda: conn.ack(*ids),
        "ack(transaction=tx)": lambda: conn.ack(*ids, transaction="tx"),
        "subscribe": lambda: conn.subscribe("/queue/a", id="s1"),
        "unsubscribe(id)": lambda: conn.unsubscribe(id="s1"),
    }
    if version != "1.0":
        calls["nack"] = lambda: conn.nack(*ids)
        calls["nack(transaction=tx)"] = lambda: conn.nack(*ids, transaction="tx")
    out = {}
    for what, call in calls.items():
        try:
            call()
            out[what] = "returned"
        except Exception as exc:
            out[what] = type(exc).__name__
    conn.disconnect()
    return out


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_calls_on_a_closed_connection_raise_not_connected_as_stomp_py(version):
    """What applications catch to reconnect and retry: NotConnectedException, for each call
    stomp.py 9.0 raises it for, before amqstomp's own checks of transactions and messages."""
    theirs, ours = _closed_outcomes(stomp, version), _closed_outcomes(amqstomp, version)
    assert ours == theirs
    assert set(theirs.values()) == {"NotConnectedException"}


@pytest.mark.parametrize("name", ["StompConnection10", "StompConnection11", "StompConnection12", "Connection"])
def test_an_unknown_keyword_names_the_class_called_as_in_stomp_py(name):
    """A stomp.py user's test may match the TypeError's text: StompConnection12 inherits its
    constructor from StompConnection11, yet the error names StompConnection12, as stomp.py's does."""
    def message(module):
        with pytest.raises(TypeError) as caught:
            getattr(module, name)([("127.0.0.1", 1)], no_such_keyword=1)
        return str(caught.value)

    assert message(amqstomp) == message(stomp)
    assert "no_such_keyword" in message(amqstomp)
