"""The stomp.py-compatible facade against a real ActiveMQ: each STOMP version,
each ack mode, receipts, transactions, bodies and headers, errors, and a
stomp.py-style script run unchanged.
"""
import threading
import time
import uuid

import pytest
from conftest import Collector, wait_until

import amqstomp as stomp
import amqstomp.utils
from amqstomp.exception import (
    BrokerError,
    ConnectFailedException,
    NotConnectedException,
    ReceiptTimeout,
    UnknownMessageError,
)

VERSIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}

pytestmark = pytest.mark.timeout(60)


def queue_name() -> str:
    return "/queue/amqstomp-test-" + uuid.uuid4().hex[:12]


@pytest.fixture
def open_conn(stomp_connect):
    """``open_conn(version="1.2", **kwargs)`` -> (connection, Collector), connected;
    every connection made is disconnected at teardown."""
    return lambda version="1.2", **kwargs: stomp_connect(VERSIONS[version], **kwargs)


def ack_args(version, frame):
    """Positional arguments of ``ack``/``nack`` for ``frame`` on ``version``."""
    if version == "1.2":
        return (frame.headers["ack"],)
    if version == "1.1":
        return (frame.headers["message-id"], frame.headers["subscription"])
    return (frame.headers["message-id"],)


def subscribe_and_wait(conn, destination, sub_id, ack="auto", **headers):
    receipt = "sub-" + uuid.uuid4().hex[:8]
    conn.subscribe(destination, sub_id, ack, receipt=receipt, **headers)
    conn.wait_for_receipt(receipt, 10)


def bodies(frames):
    return [f.body for f in frames]


# --------------------------------------------------------------------------- basics per version


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_connect_send_receive(open_conn, version):
    conn, col = open_conn(version)
    assert conn.is_connected()
    assert col.connected_frame.headers["version"] == version
    assert conn.transport.version == version
    assert col.events[:2] == ["connecting", "connected"]
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    conn.send(q, "hello %s" % version, content_type="text/plain", receipt="r1")
    conn.wait_for_receipt("r1", 10)
    (msg,) = col.wait_messages(1)
    assert msg.cmd == "MESSAGE"
    assert msg.body == "hello %s" % version
    assert isinstance(msg.body, str)
    assert msg.headers["destination"] == q
    assert msg.headers["content-type"] == "text/plain"
    if version != "1.0":
        assert msg.headers["subscription"] == "s1"


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_disconnect_sequence_of_callbacks(activemq, version):
    conn = VERSIONS[version](activemq.host_and_ports)
    col = Collector()
    conn.set_listener("c", col)
    conn.connect("admin", "admin", wait=True)
    conn.disconnect()
    assert not conn.is_connected()
    assert col.events == ["connecting", "connected", "disconnecting", "receipt",
                          "receiver_loop_completed", "disconnected"]
    conn.disconnect()  # again: harmless


def test_a_send_from_on_disconnecting_goes_out_before_the_disconnect(activemq):
    """on_disconnecting is called before DISCONNECT is written (docs/guides/stomp-py.md), on
    the thread that called disconnect(): a message a listener sends from it reaches the
    broker (a new user saw it written after DISCONNECT and lost, send() returning normally)."""
    q = queue_name()
    conn = stomp.Connection12(activemq.host_and_ports)
    commands = []

    class LastWords:
        def on_send(self, frame):
            commands.append(frame.cmd)

        def on_disconnecting(self):
            conn.send(q, "last words", receipt="r-last")

    conn.set_listener("last", LastWords())
    conn.connect("admin", "admin", wait=True)
    conn.disconnect()
    assert commands[-2:] == ["SEND", "DISCONNECT"], commands
    reader = stomp.Connection12(activemq.host_and_ports)
    col = Collector()
    reader.set_listener("c", col)
    reader.connect("admin", "admin", wait=True)
    try:
        reader.subscribe(q, id="s1", ack="auto")
        (msg,) = col.wait_messages(1)
        assert msg.body == "last words"
    finally:
        reader.disconnect()


def test_connection_default_is_stomp_11():
    assert stomp.Connection is stomp.Connection11
    assert stomp.StompConnection12 is stomp.Connection12
    assert stomp.Connection10 is stomp.StompConnection10
    assert stomp.__version__ == "0.1.0"
    assert stomp.utils.Frame is amqstomp.codec.Frame
    assert issubclass(stomp.exception.ConnectFailedException, stomp.exception.StompException)


def test_nack_only_on_11_and_12():
    assert not hasattr(stomp.Connection10, "nack")
    assert hasattr(stomp.Connection11, "nack") and hasattr(stomp.Connection12, "nack")


# --------------------------------------------------------------------------- ack modes


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_auto_ack_messages_are_gone_after_disconnect(open_conn, version):
    conn, col = open_conn(version)
    q = queue_name()
    subscribe_and_wait(conn, q, "s1", "auto")
    for i in range(3):
        conn.send(q, "m%d" % i)
    assert bodies(col.wait_messages(3)) == ["m0", "m1", "m2"]
    conn.disconnect()
    again, col2 = open_conn(version)
    subscribe_and_wait(again, q, "s2", "auto")
    time.sleep(0.5)
    assert col2.messages == []


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_client_ack_unacked_come_back_after_disconnect(open_conn, version):
    conn, col = open_conn(version)
    q = queue_name()
    subscribe_and_wait(conn, q, "s1", "client")
    for i in range(3):
        conn.send(q, "m%d" % i)
    assert bodies(col.wait_messages(3)) == ["m0", "m1", "m2"]
    conn.disconnect()  # nothing acked
    again, col2 = open_conn(version)
    subscribe_and_wait(again, q, "s2", "client")
    msgs = col2.wait_messages(3)
    assert bodies(msgs) == ["m0", "m1", "m2"]
    assert all(m.headers.get("redelivered") == "true" for m in msgs)
    again.ack(*ack_args(version, msgs[-1]), receipt="done")
    again.wait_for_receipt("done", 10)


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_client_ack_is_cumulative(open_conn, version):
    conn, col = open_conn(version)
    q = queue_name()
    subscribe_and_wait(conn, q, "s1", "client")
    for i in range(5):
        conn.send(q, "m%d" % i)
    msgs = col.wait_messages(5)
    conn.ack(*ack_args(version, msgs[2]), receipt="ack3")  # acks m0..m2
    conn.wait_for_receipt("ack3", 10)
    conn.disconnect()
    again, col2 = open_conn(version)
    subscribe_and_wait(again, q, "s2", "client")
    assert bodies(col2.wait_messages(2)) == ["m3", "m4"]
    time.sleep(0.3)
    assert len(col2.messages) == 2


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_client_individual_acks_one(open_conn, version):
    conn, col = open_conn(version)
    q = queue_name()
    subscribe_and_wait(conn, q, "s1", "client-individual")
    for i in range(3):
        conn.send(q, "m%d" % i)
    msgs = col.wait_messages(3)
    conn.ack(*ack_args(version, msgs[1]), receipt="ack-m1")
    conn.wait_for_receipt("ack-m1", 10)
    conn.disconnect()
    again, col2 = open_conn(version)
    subscribe_and_wait(again, q, "s2", "client-individual")
    assert bodies(col2.wait_messages(2)) == ["m0", "m2"]
    time.sleep(0.3)
    assert len(col2.messages) == 2


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_nack_sends_to_the_dead_letter_queue(open_conn, version):
    conn, col = open_conn(version)
    q = queue_name()
    marker = uuid.uuid4().hex
    subscribe_and_wait(conn, q, "s1", "client-individual")
    conn.send(q, "poison", persistent="true", marker=marker)
    (msg,) = col.wait_messages(1)
    conn.nack(*ack_args(version, msg), receipt="nacked")
    conn.wait_for_receipt("nacked", 10)
    time.sleep(0.3)
    assert len(col.messages) == 1  # not redelivered to us
    dlq, dcol = open_conn(version)
    subscribe_and_wait(dlq, "/queue/ActiveMQ.DLQ", "dlq", "auto", selector="marker = '%s'" % marker)
    (dead,) = dcol.wait_messages(1)
    assert dead.body == "poison"


# --------------------------------------------------------------------------- receipts and errors


def test_wait_for_receipt_and_its_timeout(open_conn):
    conn, col = open_conn("1.2")
    q = queue_name()
    conn.send(q, "x", receipt="abc")
    frame = conn.wait_for_receipt("abc", 10)
    assert frame.cmd == "RECEIPT" and frame.headers["receipt-id"] == "abc"
    assert col.wait_for(lambda c: any(r.headers["receipt-id"] == "abc" for r in c.receipts), 5)
    assert conn.wait_for_receipt("abc", 0) is frame  # still answerable afterwards
    with pytest.raises(KeyError):
        conn.wait_for_receipt("never-sent", 0.1)


@pytest.mark.compiled_pass_only  # receipt and DISCONNECT timeouts against a stalled proxy: timers
def test_receipt_timeout_is_bounded(stall_proxy):
    conn = stomp.Connection12(stall_proxy.host_and_ports)
    conn.connect("admin", "admin", wait=True, timeout=10)
    try:
        stall_proxy.stall()
        conn.send(queue_name(), "x", receipt="slow")
        start = time.monotonic()
        with pytest.raises(ReceiptTimeout):
            conn.wait_for_receipt("slow", 0.3)
        assert time.monotonic() - start < 2
    finally:
        start = time.monotonic()
        conn.disconnect()  # bounded even though the broker cannot answer
        assert not conn.is_connected()


def test_error_without_receipt_reaches_on_error_and_connection_goes_on(open_conn):
    conn, col = open_conn("1.2")
    conn.send_frame("SEND", {}, "no destination")  # ActiveMQ: ERROR, socket stays open
    assert col.wait_for(lambda c: len(c.errors) == 1, 10)
    assert "Destination" in col.errors[0].headers["message"]
    assert conn.is_connected()
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    conn.send(q, "after the error")
    assert bodies(col.wait_messages(1)) == ["after the error"]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ack_of_unknown_message_is_an_error_with_receipt(open_conn, version):
    conn, col = open_conn(version)
    q = queue_name()
    subscribe_and_wait(conn, q, "s1", "client-individual")
    # ack() refuses an id this connection never had (UnknownMessageError, nothing sent); a raw ACK
    # frame still reaches the broker, whose ERROR comes back through the receipt
    if version == "1.2":
        with pytest.raises(UnknownMessageError):
            conn.ack("no-such-ack-id", receipt="bad")
        conn.send_frame("ACK", {"id": "no-such-ack-id", "receipt": "bad"})
    else:  # a well-formed ActiveMQ message id (a malformed one makes it drop the socket)
        with pytest.raises(UnknownMessageError):
            conn.ack("ID:nohost-1-1-1:1:1:1:1", "s1", receipt="bad")
        conn.send_frame("ACK", {"message-id": "ID:nohost-1-1-1:1:1:1:1", "subscription": "s1", "receipt": "bad"})
    with pytest.raises(BrokerError) as info:
        conn.wait_for_receipt("bad", 10)
    assert "ACK" in info.value.frame.headers["message"]
    assert col.wait_for(lambda c: len(c.errors) == 1, 5)
    assert conn.is_connected()
    conn.send(q, "still fine", receipt="ok")
    conn.wait_for_receipt("ok", 10)


def test_send_rejects_a_body_that_is_not_text_or_bytes(open_conn):
    conn, _ = open_conn("1.2")
    with pytest.raises(TypeError):
        conn.send(queue_name(), 5)
    with pytest.raises(ValueError):
        conn.send(None, "x")


def test_send_when_not_connected_raises(activemq):
    conn = stomp.Connection12(activemq.host_and_ports)
    with pytest.raises(NotConnectedException):
        conn.send("/queue/x", "x")


def test_connect_to_closed_port(activemq):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    conn = stomp.Connection([("127.0.0.1", port)])
    start = time.monotonic()
    with pytest.raises(ConnectFailedException):
        conn.connect("admin", "admin", wait=True)
    assert time.monotonic() - start < 3
    # endless attempts (-1) still end with wait=True's timeout
    conn = stomp.Connection([("127.0.0.1", port)], reconnect_attempts_max=-1, reconnect_sleep_initial=0.05)
    start = time.monotonic()
    with pytest.raises(ConnectFailedException, match="attempt"):
        conn.connect("admin", "admin", wait=True, timeout=1.5)
    assert 1.4 < time.monotonic() - start < 5  # a last attempt at the deadline
    for bad in (float("nan"), float("inf"), -1, "3"):
        with pytest.raises(ValueError, match="timeout"):
            conn.connect("admin", "admin", wait=True, timeout=bad)
        with pytest.raises(ValueError, match="timeout"):
            stomp.Connection12([("127.0.0.1", port)], timeout=bad)
    assert not conn.is_connected()


# --------------------------------------------------------------------------- transactions


@pytest.mark.parametrize("version", ["1.0", "1.2"])
def test_transacted_send_visible_only_after_commit(open_conn, version):
    producer, _ = open_conn(version)
    consumer, col = open_conn(version)
    q = queue_name()
    subscribe_and_wait(consumer, q, "s1")
    tx = producer.begin()
    assert isinstance(tx, str) and tx
    producer.send(q, "in tx 1", transaction=tx)
    producer.send(q, "in tx 2", transaction=tx, receipt="sent")
    producer.wait_for_receipt("sent", 10)
    time.sleep(0.5)
    assert col.messages == []
    producer.commit(tx, receipt="committed")
    producer.wait_for_receipt("committed", 10)
    assert bodies(col.wait_messages(2)) == ["in tx 1", "in tx 2"]


def test_aborted_send_is_dropped(open_conn):
    producer, _ = open_conn("1.1")
    consumer, col = open_conn("1.1")
    q = queue_name()
    subscribe_and_wait(consumer, q, "s1")
    tx = producer.begin("my-tx")
    assert tx == "my-tx"
    producer.send(q, "aborted", transaction=tx)
    producer.abort(tx, receipt="aborted")
    producer.wait_for_receipt("aborted", 10)
    producer.send(q, "marker")
    assert bodies(col.wait_messages(1)) == ["marker"]
    time.sleep(0.3)
    assert bodies(col.messages) == ["marker"]


# --------------------------------------------------------------------------- bodies and headers


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_binary_body_with_nuls_round_trips(open_conn, version):
    conn, col = open_conn(version, auto_decode=False)
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    body = bytes(range(256)) * 64 + b"\x00\x00end\x00"
    conn.send(q, body)
    (msg,) = col.wait_messages(1)
    assert isinstance(msg.body, bytes)
    assert msg.body == body


def test_auto_decode_and_encoding(open_conn):
    conn, col = open_conn("1.2")
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    conn.send(q, "žluťoučký kůň 🐎")
    conn.send(q, b"\xff\xfe not utf-8")
    first, second = col.wait_messages(2)
    assert first.body == "žluťoučký kůň 🐎"
    # as documented (BaseConnection's auto_decode, docs/guides/stomp-py.md): never raised, each
    # undecodable byte a U+FFFD (errors="replace")
    assert second.body == "\ufffd\ufffd not utf-8"

    latin, lcol = open_conn("1.2", encoding="latin-1")
    q2 = queue_name()
    subscribe_and_wait(latin, q2, "s1")
    latin.send(q2, "café")
    (msg,) = lcol.wait_messages(1)
    assert msg.body == "café" and msg.headers["content-length"] == "4"


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_utf8_and_special_header_values_round_trip(open_conn, version):
    conn, col = open_conn(version)
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    headers = {"ключ": "значение", "colon": "a:b:c", "newline": "line1\nline2", "backslash": "a\\b",
               "emoji": "☃ 🐍"}
    conn.send(q, "x", headers=headers)
    (msg,) = col.wait_messages(1)
    for key, value in headers.items():
        assert msg.headers[key] == value, key


def test_keyword_headers_and_persistent_true(open_conn):
    conn, col = open_conn("1.2")
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    conn.send(q, "p", persistent=True, priority=7, custom_header="v")
    (msg,) = col.wait_messages(1)
    assert msg.headers["persistent"] == "true"  # a Python True means persistent on ActiveMQ
    assert msg.headers["priority"] == "7"
    assert msg.headers["custom_header"] == "v"


def test_text_message_without_content_length(open_conn):
    conn, col = open_conn("1.2")
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    sent = []

    class Spy(stomp.ConnectionListener):
        def on_send(self, frame):
            sent.append(dict(frame.headers))

    conn.set_listener("spy", Spy())
    conn.send(q, "text", headers={"content-length": None})
    conn.send(q, "bytes")
    first, second = col.wait_messages(2)
    assert first.body == "text" and "content-length" not in first.headers
    assert second.headers["content-length"] == "5"
    assert [("content-length" in h) for h in sent] == [False, True]

    plain, pcol = open_conn("1.1", auto_content_length=False)
    q2 = queue_name()
    subscribe_and_wait(plain, q2, "s1")
    plain.send(q2, "as text")
    (msg,) = pcol.wait_messages(1)
    assert msg.body == "as text" and "content-length" not in msg.headers


def test_unsubscribe_stops_delivery(open_conn):
    conn, col = open_conn("1.1")
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    conn.send(q, "before")
    col.wait_messages(1)
    conn.unsubscribe("s1", receipt="unsub")
    conn.wait_for_receipt("unsub", 10)
    conn.send(q, "after", receipt="sent")
    conn.wait_for_receipt("sent", 10)
    time.sleep(0.3)
    assert bodies(col.messages) == ["before"]


def test_unsubscribe_by_destination_on_10(open_conn):
    conn, col = open_conn("1.0")
    q = queue_name()
    conn.subscribe(q)  # no id in 1.0
    conn.unsubscribe(destination=q, receipt="u")
    conn.wait_for_receipt("u", 10)


# --------------------------------------------------------------------------- listeners


def test_listener_registry_and_helper_listeners(open_conn, capsys):
    conn, col = open_conn("1.2")
    stats = stomp.StatsListener()
    conn.set_listener("stats", stats)
    conn.set_listener("print", stomp.PrintingListener())
    assert conn.get_listener("stats") is stats
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    conn.send(q, "counted")
    col.wait_messages(1)
    assert wait_until(lambda: stats.messages == 1, 5)
    assert stats.messages_sent >= 2
    conn.remove_listener("print")
    assert conn.get_listener("print") is None
    out = capsys.readouterr().out
    assert "on_message" in out and "counted" in out
    assert "passcode" not in out or "********" in out
    assert "Messages received: 1" in str(stats)


def test_waiting_listener_and_context_manager(activemq):
    with stomp.Connection12(activemq.host_and_ports) as conn:
        waiter = stomp.WaitingListener("w1")
        conn.set_listener("waiter", waiter)
        conn.connect("admin", "admin", wait=True)
        conn.send(queue_name(), "x", receipt="w1")
        assert waiter.wait_on_receipt(timeout=10)
        assert not waiter.wait_on_receipt(timeout=0.1)
    assert not conn.is_connected()
    assert waiter.wait_on_disconnected(timeout=5)


def test_listener_exception_does_not_break_dispatch(open_conn):
    conn, col = open_conn("1.2")

    class Broken(stomp.ConnectionListener):
        def on_message(self, frame):
            raise RuntimeError("listener bug")

    conn.set_listener("a-broken", Broken())  # runs before "collector"
    q = queue_name()
    subscribe_and_wait(conn, q, "s1")
    conn.send(q, "1")
    conn.send(q, "2")
    assert bodies(col.wait_messages(2)) == ["1", "2"]


def test_listener_can_wait_for_a_receipt_inside_a_callback(open_conn):
    conn, col = open_conn("1.2")
    results = []

    class AckInside(stomp.ConnectionListener):
        def on_message(self, frame):
            conn.ack(frame.headers["ack"], receipt="inside")
            results.append(conn.wait_for_receipt("inside", 5).cmd)

    conn.set_listener("ack-inside", AckInside())
    q = queue_name()
    subscribe_and_wait(conn, q, "s1", "client-individual")
    conn.send(q, "x")
    assert wait_until(lambda: results == ["RECEIPT"], 10)


@pytest.mark.parametrize("where", ["listener", "another thread"])
def test_no_on_message_after_disconnect_returned(activemq, where):
    """Messages the socket delivered and the dispatcher had not handed over yet reach no
    listener once disconnect() was called (stomp.py's listeners run on its reader, which ends
    with the socket). They were handed over for some runs and dropped for others, or partly."""
    producer = stomp.Connection12(activemq.host_and_ports)
    producer.connect("admin", "admin", wait=True)
    try:
        for run in range(5):
            q = queue_name()
            for i in range(20):
                producer.send(q, "m%d" % i)
            producer.send(q, "last", receipt="r")
            producer.wait_for_receipt("r", 10)
            conn = stomp.Connection12(activemq.host_and_ports)
            seen = []
            first = threading.Event()

            class Listener(stomp.ConnectionListener):
                def on_message(self, frame):
                    seen.append(frame.body)
                    if where == "listener" and len(seen) == 1:
                        conn.disconnect()
                    else:
                        first.set()
                        time.sleep(0.02)  # the rest waits on the dispatcher's queue

                def on_disconnected(self):
                    seen.append("disconnected")

            conn.set_listener("l", Listener())
            conn.connect("admin", "admin", wait=True)
            conn.subscribe(q, id="1", ack="client-individual")
            if where == "listener":
                assert wait_until(lambda: "disconnected" in seen, 10), seen
                time.sleep(0.3)
                assert seen == ["m0", "disconnected"], seen
            else:
                assert first.wait(10)
                conn.disconnect()
                returned = len(seen)
                time.sleep(0.3)
                assert seen[returned:] in ([], ["disconnected"]) and seen[-1] == "disconnected", seen
                assert len(seen) < 22, "every message was handed over after disconnect()"
    finally:
        producer.disconnect()


def test_reconnect_from_on_disconnected(stall_proxy):
    """The stomp.py pattern: reconnect from inside on_disconnected."""
    conn = stomp.Connection12(stall_proxy.host_and_ports)
    reconnected = threading.Event()

    class Reconnect(stomp.ConnectionListener):
        def __init__(self):
            self.drops = 0

        def on_disconnected(self):
            self.drops += 1
            if self.drops == 1:
                conn.connect("admin", "admin", wait=True, timeout=10)
                reconnected.set()

    conn.set_listener("r", Reconnect())
    conn.connect("admin", "admin", wait=True)
    stall_proxy.drop()
    assert reconnected.wait(15)
    assert conn.is_connected()
    conn.disconnect()
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("amqstomp-")], 10)


# --------------------------------------------------------------------------- stomp.py-style script


def test_stomp_py_style_script_works_unchanged(activemq):
    port = activemq.stomp_port
    received = []
    done = threading.Event()

    # ---- the script, as a stomp.py user writes it ----
    import amqstomp as stomp

    class L(stomp.ConnectionListener):
        def on_error(self, frame):
            print('received an error "%s"' % frame.body)

        def on_message(self, frame):
            received.append(frame.body)
            done.set()

    conn = stomp.Connection([('127.0.0.1', port)])
    conn.set_listener('', L())
    conn.connect('admin', 'admin', wait=True)
    conn.subscribe(destination='/queue/x', id=1, ack='auto')
    conn.send(body='hi', destination='/queue/x')
    # ---- end of script ----

    try:
        assert done.wait(10)
        assert received == ['hi']
    finally:
        conn.disconnect()
