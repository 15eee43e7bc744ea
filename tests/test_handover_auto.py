"""Hand-over of ``ack:auto`` deliveries while the application ends them, against a real ActiveMQ.

ActiveMQ settles an ``ack:auto`` MESSAGE when it sends it (its STOMP converter acknowledges it at
dispatch): a copy the client received and did not give to ``on_message`` is lost. stomp.py hands
every MESSAGE its receiver reads to the listeners, also during ``disconnect()`` (until the
DISCONNECT's RECEIPT) and after ``unsubscribe()`` (until the broker stops sending). So must
amqstomp: every message sent reached the listener or is still on the queue (a second consumer
drains it). In the acknowledged modes the copies not handed over go back to the queue (never
acked), so the same holds there with the listener's copies the ones it acknowledged.
"""
import threading
import time
import uuid
from typing import Any, List

import pytest
from conftest import fill_queue, wait_until

import amqstomp

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

COUNT = 2000
PREFETCH = 500


class SlowListener:
    """Records each MESSAGE after a short sleep, so the client's buffer holds many when the
    test ends the subscription; ACKs it in the acknowledged modes (from the listener)."""

    def __init__(self, conn: Any, ack: str) -> None:
        self.conn = conn
        self.ack = ack
        self.lock = threading.Lock()
        self.seqs: List[str] = []

    def on_message(self, frame: Any) -> None:
        time.sleep(0.002)
        if self.ack != "auto":
            self.conn.ack(frame.headers["ack"])
        with self.lock:
            self.seqs.append(frame.headers["seq"])

    def count(self) -> int:
        with self.lock:
            return len(self.seqs)


def _rest(activemq: Any, queue: str) -> List[str]:
    """The ``seq`` of every message left on the queue: consumed (ack:auto) until none came for
    a second (bounded: 60 x 0.5 s)."""
    conn = amqstomp.Connection12(activemq.host_and_ports)
    seqs: List[str] = []
    lock = threading.Lock()

    class Drain:
        def on_message(self, frame: Any) -> None:
            with lock:
                seqs.append(frame.headers["seq"])

    conn.set_listener("drain", Drain())
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe("/queue/" + queue, id="drain", ack="auto")
        previous = -1
        for _ in range(60):
            time.sleep(0.5)
            with lock:
                now = len(seqs)
            if now == previous:
                break
            previous = now
    finally:
        conn.disconnect()
    with lock:
        return list(seqs)


@pytest.mark.parametrize("ack", ["auto", "client-individual"])
@pytest.mark.parametrize("end", ["disconnect", "unsubscribe"])
def test_nothing_lost_when_ended_while_messages_flow(activemq: Any, ack: str, end: str) -> None:
    queue = "handover.%s" % uuid.uuid4().hex[:10]
    fill_queue(activemq, "/queue/" + queue, COUNT, body=b"x" * 64)
    conn = amqstomp.Connection12(activemq.host_and_ports)
    listener = SlowListener(conn, ack)
    conn.set_listener("slow", listener)
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe("/queue/" + queue, id="s1", ack=ack, headers={"activemq.prefetchSize": PREFETCH})
        assert wait_until(lambda: listener.count() >= 20, 30), listener.count()
        at_end = listener.count()
        if end == "unsubscribe":
            conn.unsubscribe("s1")
            previous = -1
            for _ in range(100):  # until the listener has had what it gets (bounded: 100 x 0.2 s)
                time.sleep(0.2)
                now = listener.count()
                if now == previous:
                    break
                previous = now
    finally:
        conn.disconnect()
    received = set(listener.seqs)
    assert len(received) == len(listener.seqs)  # the listener had no copy twice
    assert at_end < COUNT, "the subscription ended after everything arrived: the test proves nothing"
    rest = _rest(activemq, queue)
    # ActiveMQ may give back some of what it sent ack:auto (the UNSUBSCRIBE can overtake the
    # acknowledgements its STOMP converter makes at dispatch): a copy twice, never none
    missing = set(str(i) for i in range(COUNT)) - received - set(rest)
    assert not missing, (len(received), len(rest), sorted(missing, key=int)[:20])


def test_jms_auto_acknowledge_consumer_closed_while_messages_flow_loses_nothing(activemq: Any) -> None:
    """The JMS API's AUTO_ACKNOWLEDGE (``ack:client``, amqstomp's batched ACK): a consumer closed
    while its session holds messages it has not handed out drops them unacknowledged, and the
    broker gives them to the next consumer -- the same count holds."""
    from amqstomp.jms import AUTO_ACKNOWLEDGE, ConnectionFactory, Queue

    queue = "handover.%s" % uuid.uuid4().hex[:10]
    fill_queue(activemq, "/queue/" + queue, COUNT, body=b"x" * 64)
    seqs: List[str] = []
    lock = threading.Lock()

    def on_message(message: Any) -> None:
        time.sleep(0.002)
        with lock:
            seqs.append(str(message.get_property("seq")))

    def count() -> int:
        with lock:
            return len(seqs)

    factory = ConnectionFactory(activemq.url + "?jms.prefetchPolicy.all=%d" % PREFETCH)
    with factory.create_connection() as conn:
        consumer = conn.create_session(False, AUTO_ACKNOWLEDGE).create_consumer(Queue(queue))
        consumer.set_message_listener(on_message)
        conn.start()
        assert wait_until(lambda: count() >= 20, 30), count()
        at_end = count()
        consumer.close()
    received = set(seqs)
    assert len(received) == len(seqs)
    assert at_end < COUNT, "closed after everything arrived: the test proves nothing"
    rest = _rest(activemq, queue)
    missing = set(str(i) for i in range(COUNT)) - received - set(rest)
    assert not missing, (len(received), len(rest), sorted(missing, key=int)[:20])
