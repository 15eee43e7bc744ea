"""Duplicate suppression against a real ActiveMQ (issue 24): a message whose ACK the
client wrote -- so it counted the message settled -- but the broker never read (the
path stalled, then the socket was cut) is redelivered by the broker on the next
socket. With ``checkForDuplicates`` (off by default) that delivery is not handed to the
application again and is acknowledged, so the broker drops it; without it the
application gets it a second time (what amqstomp did before).

What is visible: the application's deliveries, the client's suppressed count, and
the broker's queue afterwards (a fresh consumer finds nothing).
"""
import time
import uuid

import pytest
from conftest import Collector, cut_stalled_later, wait_until

import amqstomp as stomp
from amqstomp.exception import TransactionInDoubtError
from amqstomp.jms import CLIENT_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE, NON_PERSISTENT, ConnectionFactory, Queue, \
    TextMessage

pytestmark = pytest.mark.timeout(120)


def _left_on_broker(activemq, queue: Queue, wait_s: float = 1.0) -> list:
    """What a fresh consumer gets from ``queue`` (the broker's view)."""
    with ConnectionFactory(activemq.url).create_connection() as check:
        consumer = check.create_session().create_consumer(queue)
        check.start()
        got = []
        for _ in range(100):
            message = consumer.receive(wait_s)
            if message is None:
                break
            got.append(message.text)
        return got


def _lose_the_ack(proxy, ack, transport) -> None:
    """``ack()`` writes its ACK into a stalled path (it returns: no receipt), then the
    socket is cut before the broker read it; returns once a new socket is connected."""
    seq = transport.link_seq
    proxy.stall()
    ack()
    time.sleep(0.3)
    assert proxy.cut() >= 1
    proxy.unstall()
    assert wait_until(lambda: transport.is_connected() and transport.link_seq != seq, 15)


@pytest.mark.parametrize("check", [True, False], ids=["checkForDuplicates", "off"])
@pytest.mark.parametrize("ack", ["client-individual", "client"])
def test_stomppy_a_settled_message_redelivered_after_its_ack_was_lost(activemq, tcp_proxy_factory, ack, check):
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    q = "/queue/dups-" + uuid.uuid4().hex[:10]
    rec = Collector()
    conn = stomp.Connection12([proxy.address], auto_reconnect=True, heartbeats=(1000, 1000),
                              reconnect_sleep_initial=0.05, reconnect_attempts_max=-1, timeout=20,
                              check_for_duplicates=check)
    conn.set_listener("rec", rec)
    conn.connect("admin", "admin", wait=True, timeout=15)
    producer = stomp.Connection12(activemq.host_and_ports)
    producer.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe(q, id="s", ack=ack, receipt="sub")
        conn.wait_for_receipt("sub", 10)
        producer.send(q, "one")
        assert wait_until(lambda: len(rec.messages) == 1, 10)
        first = rec.messages[0]
        _lose_the_ack(proxy, lambda: conn.ack(first.headers["ack"]), conn.transport)
        if check:
            assert wait_until(lambda: conn.subscriptions.duplicates_suppressed == 1, 15)
            time.sleep(0.5)
            assert len(rec.messages) == 1  # settled once, handed over once
        else:  # before: the application got the message it had acknowledged again
            assert wait_until(lambda: len(rec.messages) == 2, 15)
            again = rec.messages[1]
            assert again.headers["message-id"] == first.headers["message-id"]
            assert again.headers["redelivered"] == "true"
            conn.ack(again.headers["ack"])
        assert rec.errors == []
    finally:
        conn.disconnect()
        producer.disconnect()
    assert _left_on_broker(activemq, Queue(q[len("/queue/"):])) == []  # the duplicate's ACK reached it


@pytest.mark.parametrize("check", [True, False], ids=["checkForDuplicates", "off"])
@pytest.mark.parametrize("mode", [CLIENT_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE], ids=["client", "individual"])
def test_jms_a_settled_message_redelivered_after_its_ack_was_lost(activemq, tcp_proxy_factory, mode, check):
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    queue = Queue("dups.%s" % uuid.uuid4().hex[:10])
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        feeder.create_session().create_producer(queue).send(TextMessage("t0"), delivery_mode=NON_PERSISTENT)
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100" % proxy.address
    url += "&jms.checkForDuplicates=%s" % ("true" if check else "false")
    with ConnectionFactory(url, heartbeats=(1000, 1000)).create_connection(timeout_s=15) as conn:
        session = conn.create_session(acknowledge_mode=mode)
        consumer = session.create_consumer(queue)
        conn.start()
        first = consumer.receive(5)
        assert first is not None and first.text == "t0"
        link = conn._state.consumer_link
        _lose_the_ack(proxy, first.acknowledge, link.transport)
        if check:  # (receive() takes the copy from the buffer and suppresses it)
            assert consumer.receive(5) is None  # settled once, handed over once
            assert link.manager.duplicates_suppressed == 1
        else:
            again = consumer.receive(15)
            assert again is not None and again.message_id == first.message_id and again.redelivered
            again.acknowledge()
    assert _left_on_broker(activemq, queue) == []


def _jms_consumer(activemq, tcp_proxy_factory, **session):
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    queue = Queue("dups.%s" % uuid.uuid4().hex[:10])
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        feeder.create_session().create_producer(queue).send(TextMessage("t0"), delivery_mode=NON_PERSISTENT)
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100&jms.checkForDuplicates=true" \
        % proxy.address
    conn = ConnectionFactory(url, heartbeats=(1000, 1000)).create_connection(timeout_s=15)
    consumer = conn.create_session(**session).create_consumer(queue)
    conn.start()
    return proxy, queue, conn, consumer


def test_jms_auto_acknowledge_a_consumed_message_is_settled_even_before_its_batched_ack(activemq,
                                                                                      tcp_proxy_factory):
    """AUTO_ACKNOWLEDGE: amqstomp owes the ACK once receive() returned; the path stalls before
    the batched ACK reaches the broker and is cut: the broker's redelivery is not handed over,
    and is acknowledged on the new socket."""
    proxy, queue, conn, consumer = _jms_consumer(activemq, tcp_proxy_factory)
    with conn:
        link = conn._state.consumer_link
        assert wait_until(lambda: len(consumer._buffer) == 1, 10)  # prefetched: the path can stall first
        received = []
        _lose_the_ack(proxy, lambda: received.append(consumer.receive(5)), link.transport)
        assert received[0] is not None and received[0].text == "t0"
        assert consumer.receive(5) is None
        assert link.manager.duplicates_suppressed == 1
    assert _left_on_broker(activemq, queue) == []


def test_jms_a_commit_in_doubt_settles_nothing_and_the_message_comes_again(activemq, tcp_proxy_factory):
    """A COMMIT written into a stalled path, then cut: in doubt, not settled, so with the
    audit on the broker's redelivery still reaches the application (at-least-once)."""
    proxy, queue, conn, consumer = _jms_consumer(activemq, tcp_proxy_factory, transacted=True)
    with conn:
        session = consumer._core._state.session
        first = consumer.receive(5)
        assert first is not None and first.text == "t0"
        transport = conn._state.consumer_link.transport
        seq = transport.link_seq
        proxy.stall()

        cut_stalled_later(proxy)
        with pytest.raises(TransactionInDoubtError):
            session.commit()
        assert wait_until(lambda: transport.is_connected() and transport.link_seq != seq, 15)
        again = consumer.receive(15)
        assert again is not None and again.message_id == first.message_id and again.redelivered
        session.commit()
        assert conn._state.consumer_link.manager.duplicates_suppressed == 0
    assert _left_on_broker(activemq, queue) == []
