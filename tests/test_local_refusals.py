"""Caller mistakes the broker would answer late or not at all, refused where they
are made (against a real ActiveMQ; each test also shows what the broker does
with the same frame sent as is through ``send_frame``):

* a transaction begun twice, a SEND/ACK/NACK in a transaction never begun, an
  UNSUBSCRIBE of an id never subscribed: ActiveMQ answers an ERROR that reaches
  only ``on_error``, long after the call returned;
* a destination prefix with no name (``/queue/``): ActiveMQ closes the connection
  without an ERROR frame;
* a timeout that is not a number: InvalidTimeoutError (a TypeError and a
  ValueError) naming it, not a comparison failing deep inside.
"""
import uuid
from typing import List

import pytest
from conftest import assert_still_usable

import amqstomp as stomp
from amqstomp.exception import (
    BrokerError,
    DuplicateTransactionError,
    InvalidDestinationError,
    InvalidTimeoutError,
    NotConnectedException,
    UnknownSubscriptionError,
    UnknownTransactionError,
)

pytestmark = pytest.mark.timeout(90)


def queue_name() -> str:
    return "/queue/amqstomp-local-" + uuid.uuid4().hex[:12]


class SendSpy:
    """A listener that records every frame sent (``on_send``)."""

    def __init__(self) -> None:
        self.sent: List = []

    def on_send(self, frame) -> None:
        self.sent.append((frame.cmd, dict(frame.headers)))

    def commands(self) -> List[str]:
        return [cmd for cmd, _ in self.sent]


@pytest.fixture
def connect(stomp_connect):
    return stomp_connect


def still_usable(conn, col) -> None:
    """The connection is open, a send still gets its RECEIPT, no ERROR came."""
    assert_still_usable(conn, col, queue_name())


# --------------------------------------------------------------------------- transactions


def test_begin_of_a_transaction_begun_already_raises_and_sends_nothing(connect):
    conn, col = connect()
    spy = SendSpy()
    conn.set_listener("spy", spy)
    conn.begin("tx1")
    with pytest.raises(DuplicateTransactionError) as info:
        conn.begin("tx1")
    assert isinstance(info.value, ValueError) and "'tx1'" in str(info.value)
    assert spy.commands() == ["BEGIN"]
    conn.send_frame("BEGIN", {"transaction": "raw"})  # one begun with a BEGIN frame counts too
    with pytest.raises(DuplicateTransactionError):
        conn.begin("raw")
    still_usable(conn, col)
    conn.commit("tx1")
    conn.abort("raw")
    assert conn.begin("tx1") == "tx1"  # ended: the id may be used again
    conn.commit("tx1")
    still_usable(conn, col)
    # what the local check spares the caller: the broker's answer, on_error only
    conn.begin("tx2")
    conn.send_frame("BEGIN", {"transaction": "tx2", "receipt": "r-dup"})
    with pytest.raises(BrokerError, match="already started"):
        conn.wait_for_receipt("r-dup", 10)


def test_send_ack_nack_in_a_transaction_never_begun_raise_and_send_nothing(connect):
    conn, col = connect()
    q = queue_name()
    conn.subscribe(q, "s", ack="client-individual", receipt="r-s")
    conn.wait_for_receipt("r-s", 10)
    conn.send(q, "one")
    conn.send(q, "two")
    one, two = col.wait_messages(2)
    spy = SendSpy()
    conn.set_listener("spy", spy)
    with pytest.raises(UnknownTransactionError, match="SEND in transaction 'nosuch'") as info:
        conn.send(q, "x", transaction="nosuch")
    assert isinstance(info.value, ValueError)
    with pytest.raises(UnknownTransactionError, match="ACK in transaction 'nosuch'"):
        conn.ack(one.headers["ack"], transaction="nosuch")
    with pytest.raises(UnknownTransactionError, match="NACK in transaction 'nosuch'"):
        conn.nack(two.headers["ack"], transaction="nosuch")
    assert spy.sent == []
    conn.ack(one.headers["ack"])  # both messages still held: nothing was counted acknowledged
    conn.ack(two.headers["ack"])
    tx = conn.begin()
    conn.send(q, "in tx", transaction=tx)
    conn.commit(tx)
    with pytest.raises(UnknownTransactionError):  # ended
        conn.send(q, "late", transaction=tx)
    assert [m.body for m in col.wait_messages(3)][2] == "in tx"
    still_usable(conn, col)
    # what the local check spares the caller
    conn.send_frame("SEND", {"destination": q, "transaction": "nosuch", "receipt": "r-tx"}, "x")
    with pytest.raises(BrokerError, match="Invalid transaction id"):
        conn.wait_for_receipt("r-tx", 10)


# --------------------------------------------------------------------------- a closed connection


def _closed_calls(conn, version, tx, message):
    """(what, call) of every frame-writing call whose local check would refuse it after
    ``disconnect()``: a transaction that is gone, a message no longer held."""
    if version == "1.2":
        ack = lambda **kw: conn.ack(message.headers["ack"], **kw)  # noqa: E731
        nack = lambda **kw: conn.nack(message.headers["ack"], **kw)  # noqa: E731
    elif version == "1.1":
        ack = lambda **kw: conn.ack(message.headers["message-id"], message.headers["subscription"], **kw)  # noqa
        nack = lambda **kw: conn.nack(message.headers["message-id"], message.headers["subscription"], **kw)  # noqa
    else:
        ack = lambda **kw: conn.ack(message.headers["message-id"], **kw)  # noqa: E731
        nack = None
    calls = [
        ("send(transaction=tx)", lambda: conn.send("/queue/x", "late", transaction=tx)),
        ("commit(tx)", lambda: conn.commit(tx)),
        ("abort(tx)", lambda: conn.abort(tx)),
        ("ack()", lambda: ack()),
        ("ack(transaction=tx)", lambda: ack(transaction=tx)),
        ("begin(tx)", lambda: conn.begin(tx)),
        ("unsubscribe(id)", lambda: conn.unsubscribe(id="s") if version == "1.0" else conn.unsubscribe("s")),
        ("send()", lambda: conn.send("/queue/x", "late")),
    ]
    if nack is not None:
        calls += [("nack()", lambda: nack()), ("nack(transaction=tx)", lambda: nack(transaction=tx))]
    return calls


@pytest.mark.parametrize("conn_class", [stomp.Connection10, stomp.Connection11, stomp.Connection12])
@pytest.mark.parametrize("auto_reconnect", [False, True])
def test_after_disconnect_every_call_raises_not_connected_first(connect, conn_class, auto_reconnect):
    """stomp.py raises NotConnectedException for every frame after ``disconnect()``, and
    applications catch it to reconnect and retry: the local checks (a transaction or a
    message this connection no longer has) come after it, never instead of it."""
    conn, col = connect(conn_class, auto_reconnect=auto_reconnect)
    q = queue_name()
    conn.subscribe(q, id="s", ack="client", receipt="r-s")
    conn.wait_for_receipt("r-s", 10)
    tx = conn.begin()
    conn.send(q, "held")
    message = col.wait_messages(1)[0]
    conn.disconnect()
    assert not conn.is_connected()
    for what, call in _closed_calls(conn, conn_class.version, tx, message):
        with pytest.raises(NotConnectedException):
            call()
        try:
            call()
        except NotConnectedException as exc:
            assert "not connected" in str(exc), (what, exc)


def test_before_connect_the_calls_raise_not_connected_as_stomp_py_does(activemq):
    conn = stomp.Connection12(activemq.host_and_ports)
    for what, call in (("send(transaction=tx)", lambda: conn.send("/queue/x", "x", transaction="tx")),
                       ("commit", lambda: conn.commit("tx")), ("abort", lambda: conn.abort("tx")),
                       ("ack", lambda: conn.ack("m1")), ("nack", lambda: conn.nack("m1", transaction="tx")),
                       ("unsubscribe", lambda: conn.unsubscribe("s"))):
        with pytest.raises(NotConnectedException):
            call()
    with pytest.raises(ValueError):  # a required argument is checked first, as stomp.py's assert does
        conn.commit(None)


# --------------------------------------------------------------------------- unsubscribe


def test_unsubscribe_of_an_id_not_subscribed_raises_and_sends_nothing(connect):
    conn, col = connect()
    spy = SendSpy()
    conn.set_listener("spy", spy)
    with pytest.raises(UnknownSubscriptionError, match="'nosuch'") as info:
        conn.unsubscribe(id="nosuch")
    assert isinstance(info.value, ValueError)
    q = queue_name()
    conn.subscribe(q, "s1")
    conn.unsubscribe("s1")
    with pytest.raises(UnknownSubscriptionError):  # twice
        conn.unsubscribe("s1")
    # a SUBSCRIBE frame sent through send_frame is known, until unsubscribed
    conn.send_frame("SUBSCRIBE", {"destination": q, "id": "raw", "ack": "auto", "receipt": "r-raw"})
    conn.wait_for_receipt("r-raw", 10)
    conn.unsubscribe("raw")
    with pytest.raises(UnknownSubscriptionError):
        conn.unsubscribe("raw")
    conn.send_frame("SUBSCRIBE", {"destination": q, "id": "raw2", "ack": "auto"})
    conn.send_frame("UNSUBSCRIBE", {"id": "raw2"})
    with pytest.raises(UnknownSubscriptionError):
        conn.unsubscribe("raw2")
    assert [h["id"] for cmd, h in spy.sent if cmd == "UNSUBSCRIBE"] == ["s1", "raw", "raw2"]
    still_usable(conn, col)
    conn.subscribe(q, "old")  # made before the connection was opened again
    conn.disconnect()
    conn.connect("admin", "admin", wait=True, timeout=15)
    with pytest.raises(UnknownSubscriptionError):
        conn.unsubscribe("old")
    still_usable(conn, col)
    # what the local check spares the caller
    conn.send_frame("UNSUBSCRIBE", {"id": "nosuch", "receipt": "r-un"})
    with pytest.raises(BrokerError, match="No subscription matched"):
        conn.wait_for_receipt("r-un", 10)


def test_unsubscribe_on_10_by_id_is_checked_and_by_destination_is_not(connect):
    conn, col = connect(stomp.Connection10)
    q = queue_name()
    with pytest.raises(UnknownSubscriptionError):
        conn.unsubscribe(id="nosuch")
    conn.subscribe(q, id="s1")
    conn.unsubscribe(id="s1")
    other = queue_name()
    conn.subscribe(other)  # no id: known to the broker by its destination only
    conn.unsubscribe(destination=other)
    still_usable(conn, col)


# --------------------------------------------------------------------------- destinations


@pytest.mark.parametrize("destination", ["/queue/", "/topic/", "/queue/ ", "/temp-queue/", "/remote-temp-queue/",
                                         "/queue/a,/queue/", " "])
def test_a_prefix_without_a_name_is_refused_for_send_and_subscribe(connect, destination):
    conn, col = connect()
    spy = SendSpy()
    conn.set_listener("spy", spy)
    with pytest.raises(InvalidDestinationError) as info:
        conn.send(destination, "x")
    assert isinstance(info.value, ValueError) and repr(destination) in str(info.value)
    with pytest.raises(InvalidDestinationError, match="SUBSCRIBE destination"):
        conn.subscribe(destination, id="s")
    with pytest.raises(InvalidDestinationError):
        conn.subscribe(destination + "?consumer.prefetchSize=1", id="s")
    assert spy.sent == []
    conn.subscribe(queue_name(), id="s", receipt="r-s")  # the id was not taken
    conn.wait_for_receipt("r-s", 10)
    still_usable(conn, col)


def test_a_prefix_without_a_name_is_refused_on_10_without_an_id(connect):
    conn, col = connect(stomp.Connection10)
    with pytest.raises(InvalidDestinationError):
        conn.subscribe("/topic/")
    conn.send("/queue/a/", "a name ending in a slash is a name", receipt="r-slash")
    conn.wait_for_receipt("r-slash", 10)
    still_usable(conn, col)


@pytest.mark.parametrize("destination", [123, b"/queue/x", 3.5])
def test_a_destination_that_is_not_a_str_is_refused_by_type(connect, destination):
    """subscribe(123) used to end in AttributeError ('partition'), send(123) went out as '123'."""
    conn, col = connect()
    spy = SendSpy()
    conn.set_listener("spy", spy)
    with pytest.raises(TypeError, match="SEND destination must be a str, got %s" % type(destination).__name__):
        conn.send(destination, "x")
    with pytest.raises(TypeError, match="SUBSCRIBE destination must be a str"):
        conn.subscribe(destination, id="s")
    assert spy.sent == []
    still_usable(conn, col)


def test_jms_refuses_a_blank_destination_name_before_sending(activemq):
    """ActiveMQ dropped the producer socket on a SEND to '/queue/ ', and the connection was broken."""
    from amqstomp.exception import InvalidDestinationError as StompInvalidDestination
    from amqstomp.jms import ConnectionFactory, Queue, TextMessage

    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session()
        for blank in (" ", "/queue/ ", "queue://  ", "/topic/ "):
            with pytest.raises(StompInvalidDestination, match="empty or blank"):
                session.create_producer(blank)
            with pytest.raises(StompInvalidDestination):
                session.create_consumer(blank)
        with pytest.raises(StompInvalidDestination, match=r"Queue\(' '\)"):
            Queue(" ")
        producer = session.create_producer(None)
        with pytest.raises(StompInvalidDestination):
            producer.send(" ", TextMessage("x"))
        session.create_producer(Queue(queue_name())).send(TextMessage("still usable"))


def test_activemq_closes_the_connection_on_a_prefix_without_a_name(connect):
    """Why the local check: the same SEND written as is loses the connection, no ERROR frame."""
    conn, col = connect()
    conn.send_frame("SEND", {"destination": "/queue/", "receipt": "r-empty"}, "x")
    with pytest.raises(stomp.exception.ConnectionClosedException):
        conn.wait_for_receipt("r-empty", 10)
    assert col.wait_for(lambda c: "disconnected" in c.events)
    assert col.errors == [] and "closed by the broker" in conn.transport.close_reason


# --------------------------------------------------------------------------- timeouts


def test_a_timeout_that_is_not_a_number_is_named(connect):
    conn, col = connect()
    conn.send(queue_name(), "x", receipt="r-1")
    listener = stomp.listener.TestListener(receipt="r-1", verbose=False)
    waits = [
        ("wait_for_receipt", lambda t: conn.wait_for_receipt("r-1", timeout=t)),
        ("transport.wait_for_receipt", lambda t: conn.transport.wait_for_receipt("r-1", t)),
        ("transport.wait_for_connection", lambda t: conn.transport.wait_for_connection(t)),
        ("transport.stop", lambda t: conn.transport.stop(t)),
        ("connect", lambda t: conn.connect("admin", "admin", wait=True, timeout=t)),
        ("wait_on_receipt", lambda t: listener.wait_on_receipt(t)),
        ("wait_on_disconnected", lambda t: listener.wait_on_disconnected(t)),
        ("wait_for_message", lambda t: listener.wait_for_message(t)),
        ("wait_for_heartbeat", lambda t: listener.wait_for_heartbeat(t)),
    ]
    for what, wait in waits:
        for bad in ("abc", b"1", [1], True):
            with pytest.raises(InvalidTimeoutError, match=r"^timeout must be a number of seconds or None, not ") as info:
                wait(bad)
            assert repr(bad) in str(info.value), what
            assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
        with pytest.raises(InvalidTimeoutError, match="timeout must be a .*number of seconds"):
            wait(float("nan"))
    with pytest.raises(ValueError, match="finite"):  # connect's own rule: finite and >= 0
        conn.connect("admin", "admin", wait=True, timeout=-1)
    assert conn.wait_for_receipt("r-1", timeout=10).headers["receipt-id"] == "r-1"
    with pytest.raises(InvalidTimeoutError, match=">= 0"):  # as other negative timeouts (task 10), not a 0 s wait
        conn.wait_for_receipt("r-1", timeout=-1)
    still_usable(conn, col)


@pytest.mark.parametrize("heartbeats", [(float("nan"), 0), ("a", 0), (0, float("inf")), 5, (1, 2, 3), (-1, 0)])
def test_bad_heartbeats_are_named(heartbeats):
    """(nan, 0) used to end in "cannot convert float NaN to integer"."""
    with pytest.raises(ValueError, match=r"^heartbeats must be a pair of non-negative ints \(ms\), got "):
        stomp.Connection12([("127.0.0.1", 61613)], heartbeats=heartbeats)


def test_a_timeout_of_another_real_type_is_taken(connect):
    from fractions import Fraction

    conn, col = connect()
    conn.send(queue_name(), "x", receipt="r-2")
    assert conn.wait_for_receipt("r-2", timeout=Fraction(10)).headers["receipt-id"] == "r-2"
