"""stomp.py-API acknowledgements that a stomp.py user's own tests rely on,
against a real ActiveMQ (the broker decides what is consumed):

* an ACK/NACK inside a transaction that is then ABORTed is undone: the message
  is held again and a later plain ACK of it is written and consumes it (it
  used to raise UnknownMessageError and send nothing: the message stayed in
  flight and came again to the next subscription, a duplicate);
* STOMP 1.1 after a failover: the ACK of the lost socket's copy, written once
  the redelivered copy (same message-id + subscription) was handed over too, is
  refused as on STOMP 1.2 (it used to go out on the new socket and ack the copy
  the application had not processed).
"""
import threading
import time
import uuid

import pytest
from conftest import Collector, wait_until

import amqstomp as stomp
from amqstomp.exception import AcknowledgeInterruptedError

pytestmark = pytest.mark.timeout(90)

_CLASSES = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


def _queue() -> str:
    return "/queue/settle-tx-" + uuid.uuid4().hex[:10]


def _args(conn, frame):
    """``ack``/``nack``'s message arguments for ``frame`` in the connection's version."""
    if conn.version == "1.2":
        return (frame.headers["ack"],)
    if conn.version == "1.0":
        return (frame.headers["message-id"],)
    return frame.headers["message-id"], frame.headers["subscription"]


def _left_on_broker(activemq, queue: str, wait_s: float = 1.0) -> list:
    """The bodies a fresh ack:auto subscription gets from ``queue`` within ``wait_s``."""
    check = Collector()
    conn = stomp.Connection12(activemq.host_and_ports)
    conn.set_listener("c", check)
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe(queue, id="check", ack="auto")
        time.sleep(wait_s)
    finally:
        conn.disconnect()
    return [frame.body for frame in check.messages]


def _consumer(activemq, version: str, reconnect: bool, queue: str, ack: str, fed: list):
    conn = _CLASSES[version](activemq.host_and_ports, auto_reconnect=reconnect, reconnect_attempts_max=-1,
                             timeout=15)
    col = Collector()
    conn.set_listener("col", col)
    conn.connect("admin", "admin", wait=True, timeout=15)
    conn.subscribe(queue, id="s", ack=ack, receipt="r-sub")
    assert conn.wait_for_receipt("r-sub", 10) is not None
    producer = stomp.Connection12(activemq.host_and_ports)
    producer.connect("admin", "admin", wait=True, timeout=15)
    for body in fed:
        producer.send(queue, body)
    producer.disconnect()
    assert len(col.wait_messages(len(fed), 10)) >= len(fed)
    return conn, col


@pytest.mark.parametrize("reconnect", [False, True], ids=["plain", "auto_reconnect"])
@pytest.mark.parametrize("version,command", [("1.0", "ACK"), ("1.1", "ACK"), ("1.1", "NACK"), ("1.2", "ACK"),
                                             ("1.2", "NACK")])
def test_abort_gives_back_what_its_transaction_acknowledged(activemq, version, command, reconnect):
    queue = _queue()
    conn, col = _consumer(activemq, version, reconnect, queue, "client-individual", ["one"])
    try:
        frame = col.messages[0]
        tx = conn.begin()
        (conn.ack if command == "ACK" else conn.nack)(*_args(conn, frame), transaction=tx)
        conn.abort(tx)
        conn.ack(*_args(conn, frame), receipt="r-ack")  # raised UnknownMessageError, sent nothing
        assert conn.wait_for_receipt("r-ack", 10) is not None
        time.sleep(0.2)
        # ActiveMQ 5.17 refuses a NACK in a transaction ("Poison ack cannot be transacted"): not applied
        errors = [e.headers.get("message", "").split(":")[0] for e in col.errors]
        assert errors == ([] if command == "ACK" else ["Poison ack cannot be transacted"])
    finally:
        conn.disconnect()
    assert _left_on_broker(activemq, queue) == []  # consumed: not redelivered to the next subscription


@pytest.mark.parametrize("reconnect", [False, True], ids=["plain", "auto_reconnect"])
def test_commit_makes_an_ack_in_the_transaction_final(activemq, reconnect):
    queue = _queue()
    conn, col = _consumer(activemq, "1.1", reconnect, queue, "client-individual", ["one"])
    try:
        frame = col.messages[0]
        tx = conn.begin()
        conn.ack(*_args(conn, frame), transaction=tx)
        conn.commit(tx)
        with pytest.raises(stomp.exception.UnknownMessageError):
            conn.ack(*_args(conn, frame))
    finally:
        conn.disconnect()
    assert _left_on_broker(activemq, queue) == []


@pytest.mark.parametrize("reconnect", [False, True], ids=["plain", "auto_reconnect"])
def test_abort_of_a_cumulative_ack_gives_back_every_message_it_covered(activemq, reconnect):
    queue = _queue()
    conn, col = _consumer(activemq, "1.2", reconnect, queue, "client", ["one", "two", "three"])
    try:
        first, second, third = col.messages
        tx = conn.begin()
        conn.ack(second.headers["ack"], transaction=tx)  # covers "one" too (ActiveMQ's cumulative ACK)
        conn.abort(tx)
        conn.ack(first.headers["ack"], receipt="r-1")  # each held again
        assert conn.wait_for_receipt("r-1", 10) is not None
        conn.ack(third.headers["ack"], receipt="r-3")  # covers "two"
        assert conn.wait_for_receipt("r-3", 10) is not None
        time.sleep(0.2)
        assert col.errors == []
    finally:
        conn.disconnect()
    assert _left_on_broker(activemq, queue) == []


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_stale_ack_after_the_copy_was_handed_over_is_refused_and_the_next_acks_the_copy(
        activemq, tcp_proxy_factory, version):
    """The application keeps the frames and acks them later, in the order its
    listener had them: the lost socket's copy first (refused: its socket is
    gone), then the redelivered copy (written; the broker consumes it)."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    queue = _queue()
    col = Collector()
    conn = _CLASSES[version]([proxy.address], auto_reconnect=True, heartbeats=(1000, 1000),
                             reconnect_sleep_initial=0.05, reconnect_attempts_max=-1, timeout=20)
    conn.set_listener("col", col)
    conn.connect("admin", "admin", wait=True, timeout=15)
    producer = stomp.Connection12(activemq.host_and_ports)
    producer.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe(queue, id="s", ack="client-individual", receipt="r-sub")
        assert conn.wait_for_receipt("r-sub", 10) is not None
        producer.send(queue, "one")
        assert len(col.wait_messages(1, 10)) >= 1
        seq = conn.transport.link_seq
        proxy.cut()
        assert len(col.wait_messages(2, 20)) >= 2  # the redelivered copy, handed over on the new socket
        lost, copy = col.messages[:2]
        assert lost.link_seq == seq and copy.link_seq != seq and copy.headers["redelivered"] == "true"
        assert lost.headers["message-id"] == copy.headers["message-id"]
        with pytest.raises(AcknowledgeInterruptedError):
            conn.ack(*_args(conn, lost))  # written on the new socket before: it acked the copy
        conn.ack(*_args(conn, copy), receipt="r-copy")
        assert conn.wait_for_receipt("r-copy", 10) is not None
        time.sleep(0.3)
        assert col.errors == []  # no 'Unexpected ACK'
    finally:
        conn.disconnect()
        producer.disconnect()
    assert _left_on_broker(activemq, queue) == []


def test_abort_gives_back_through_a_send_frame_override(activemq):
    """The same through a subclass whose send_frame sees every frame (stomp.py's
    way of spying on a connection) and calls the original."""
    queue = _queue()
    seen = []

    class Spying(stomp.Connection12):
        def send_frame(self, cmd, headers=None, body=b""):
            seen.append(cmd)
            return super().send_frame(cmd, headers, body)

    conn = Spying(activemq.host_and_ports, timeout=15)
    col = Collector()
    conn.set_listener("col", col)
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe(queue, id="s", ack="client-individual", receipt="r-sub")
        assert conn.wait_for_receipt("r-sub", 10) is not None
        conn.send(queue, "one")
        assert len(col.wait_messages(1, 10)) >= 1
        frame = col.messages[0]
        tx = conn.begin()
        conn.ack(frame.headers["ack"], transaction=tx)
        conn.abort(tx)
        conn.ack(frame.headers["ack"], receipt="r-ack")
        assert conn.wait_for_receipt("r-ack", 10) is not None
        assert seen[-4:] == ["BEGIN", "ACK", "ABORT", "ACK"] and col.errors == []
    finally:
        conn.disconnect()
    assert _left_on_broker(activemq, queue) == []
