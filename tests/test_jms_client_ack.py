"""CLIENT_ACKNOWLEDGE never stalls at the prefetch (ActiveMQ Classic, real broker).

A Java-style "receive until None, then acknowledge()" loop must see every message:
ActiveMQ's Java client sends DELIVERED acks once half the prefetch is delivered and
not acknowledged (``ActiveMQMessageConsumer.afterMessageIsConsumed``), which extend
the broker's window (``PrefetchSubscription.prefetchExtension``). Over STOMP the same
extension comes from an ACK inside a transaction (``StompSubscription.onStompMessageAck``
writes a DELIVERED ack), settled at COMMIT. These tests hold the consumer to that, and
to what acknowledge(), recover() and a lost socket must still do.
"""
import threading
import time
import uuid

import pytest
from conftest import wait_until

from amqstomp.exception import AcknowledgeInterruptedError, ConnectionClosedException
from amqstomp.jms import CLIENT_ACKNOWLEDGE, ConnectionFactory, Queue, TextMessage
from amqstomp.testing import queue_statistics

pytestmark = pytest.mark.broker

PREFETCH = 5
COUNT = 20


def _queue():
    return Queue("cack.%s" % uuid.uuid4().hex[:10])


def _fill(conn, queue, count=COUNT):
    producer = conn.create_session().create_producer(queue)
    for i in range(count):
        producer.send(TextMessage("m%d" % i))


def _drain(consumer, wait_s=2.0, limit=10 * COUNT):
    got = []
    for _ in range(limit):  # bounded: a consumer that never ends fails the test
        message = consumer.receive(wait_s)
        if message is None:
            break
        got.append(message)
    return got


def _size(broker, queue):
    try:
        return queue_statistics(broker, queue.name)["size"]
    except LookupError:
        return 0


def _url(base):
    return base + ("&" if "?" in base else "?") + "jms.prefetchPolicy.all=%d" % PREFETCH


def _failover_connection(activemq, tcp_proxy_factory, queue, count):
    """``queue`` filled with ``count`` messages, and a failover connection to the broker through
    a TcpProxy: (proxy, connection, the exception listener's list)."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = _url("failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100" % proxy.address)
    with ConnectionFactory(_url(activemq.url)).create_connection() as direct:
        _fill(direct, queue, count)
    errors = []
    conn = ConnectionFactory(url, close_timeout_ms=2000).create_connection(timeout_s=15)
    conn.set_exception_listener(errors.append)
    return proxy, conn, errors


def _close_quietly(conn):
    """Close ``conn``; what close says about a socket the test cut is not the test's point."""
    try:
        conn.close()
    except Exception:  # pragma: no cover - see above
        pass


def _cut_then_drain(proxy, conn, consumer, count):
    """A batch received (ACKed in the transaction), the socket cut, the new one up: what
    ``consumer`` receives then, which must be every one of the ``count`` messages (more than
    the prefetch) -- a consumer that stalls at the prefetch fails here."""
    before = [consumer.receive(5.0) for _ in range(PREFETCH - 1)]
    assert all(m is not None for m in before)
    transport = conn._state.consumer_link.transport
    seq = transport.link_seq
    assert proxy.cut() >= 1
    assert wait_until(lambda: transport.is_connected() and transport.link_seq != seq, 15)
    after = _drain(consumer, wait_s=3.0, limit=4 * count)
    texts = {m.text for m in after}
    assert texts == {"m%d" % i for i in range(count)}, \
        "%d distinct after the failover, of %d: stalled at the prefetch (%d)" % (len(texts), count, PREFETCH)
    return after


@pytest.mark.timeout(90)
def test_drain_then_acknowledge_gets_every_message_and_settles_them(activemq):
    queue = _queue()
    factory = ConnectionFactory(_url(activemq.url))
    with factory.create_connection() as conn:
        _fill(conn, queue)
        session = conn.create_session(False, CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(queue)
        conn.start()
        got = _drain(consumer)
        assert [m.text for m in got] == ["m%d" % i for i in range(COUNT)], \
            "received %d of %d before acknowledge()" % (len(got), COUNT)
        got[-1].acknowledge()
        consumer.close()
        assert wait_until(lambda: _size(activemq, queue) == 0, 10)
        fresh = conn.create_session(False, CLIENT_ACKNOWLEDGE).create_consumer(queue)
        assert fresh.receive(1.0) is None  # all settled


@pytest.mark.timeout(90)
def test_recover_mid_way_redelivers_the_unacknowledged_and_loses_nothing(activemq):
    queue = _queue()
    factory = ConnectionFactory(_url(activemq.url), initial_redelivery_delay_ms=0)
    with factory.create_connection() as conn:
        _fill(conn, queue)
        session = conn.create_session(False, CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(queue)
        conn.start()
        first = [consumer.receive(5) for _ in range(12)]  # past the prefetch: some went in an ACK already
        assert [m.text for m in first] == ["m%d" % i for i in range(12)]
        session.recover()
        again = [consumer.receive(5) for _ in range(12)]
        assert [m.text for m in again] == ["m%d" % i for i in range(12)]
        assert all(m.redelivered for m in again)
        rest = _drain(consumer)
        assert [m.text for m in rest] == ["m%d" % i for i in range(12, COUNT)]
        assert not any(m.redelivered for m in rest)
        session.acknowledge()
        consumer.close()
        assert wait_until(lambda: _size(activemq, queue) == 0, 10)
        assert conn.create_session().create_consumer(queue).receive(1.0) is None


@pytest.mark.timeout(90)
def test_a_lost_connection_before_acknowledge_gives_every_message_back(activemq, tcp_proxy_factory):
    queue = _queue()
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = _url("stomp://%s:%d" % proxy.address)
    with ConnectionFactory(_url(activemq.url)).create_connection() as direct:
        _fill(direct, queue)
    conn = ConnectionFactory(url, close_timeout_ms=2000).create_connection()
    try:
        consumer = conn.create_session(False, CLIENT_ACKNOWLEDGE).create_consumer(queue)
        conn.start()
        got = _drain(consumer)
        assert len(got) == COUNT
        proxy.cut()  # never acknowledged: the broker rolls back what it was told and redelivers all
    finally:
        try:
            conn.close()
        except Exception:  # the socket is gone: what close says about it is not this test's point
            pass
    with ConnectionFactory(_url(activemq.url)).create_connection() as conn2:
        consumer = conn2.create_session(False, CLIENT_ACKNOWLEDGE).create_consumer(queue)
        conn2.start()
        again = _drain(consumer)
        assert sorted(m.text for m in again) == sorted("m%d" % i for i in range(COUNT))
        assert all(m.redelivered for m in again)
        again[-1].acknowledge()
        consumer.close()
    assert wait_until(lambda: _size(activemq, queue) == 0, 10)


@pytest.mark.timeout(90)
def test_a_lost_connection_stops_a_listener_and_the_broker_redelivers_what_it_held(activemq, tcp_proxy_factory):
    """No failover: once the connection is broken the listener gets none of the messages still
    prefetched (ActiveMQ's Java client closes its sessions the same way), acknowledge() raises
    ConnectionClosedException, and the broker redelivers every message not acknowledged.
    Documented in docs/guides/jms.md ("CLIENT_ACKNOWLEDGE past the prefetch")."""
    queue = _queue()
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    with ConnectionFactory(_url(activemq.url)).create_connection() as direct:
        _fill(direct, queue)
    conn = ConnectionFactory(_url("stomp://%s:%d" % proxy.address), close_timeout_ms=2000).create_connection()
    errors, seen, acknowledged = [], [], []
    holding, release, returned = threading.Event(), threading.Event(), threading.Event()

    def listener(message):
        seen.append(message.text)
        if len(seen) == 1:
            holding.set()
            release.wait(30)
        try:
            message.acknowledge()
            acknowledged.append(True)
        except ConnectionClosedException:
            acknowledged.append(False)
        returned.set()

    try:
        conn.set_exception_listener(errors.append)
        consumer = conn.create_session(False, CLIENT_ACKNOWLEDGE).create_consumer(queue)
        consumer.set_message_listener(listener)
        conn.start()
        assert holding.wait(10)
        buffered = consumer._core.ledger.buffer  # (internal: the prefetched messages the listener has not had)
        assert wait_until(lambda: len(buffered) == PREFETCH - 1, 10)
        proxy.cut()
        assert wait_until(lambda: errors, 10)
        release.set()
        assert returned.wait(10)
        time.sleep(0.5)  # the buffered messages would follow within ms
        assert seen == ["m0"] and acknowledged == [False]
    finally:
        _close_quietly(conn)
    with ConnectionFactory(_url(activemq.url)).create_connection() as conn2:
        consumer = conn2.create_session(False, CLIENT_ACKNOWLEDGE).create_consumer(queue)
        conn2.start()
        again = _drain(consumer)
        assert sorted(m.text for m in again) == sorted("m%d" % i for i in range(COUNT))
        again[-1].acknowledge()


@pytest.mark.timeout(90)
def test_closing_the_session_unacknowledged_gives_every_message_back(activemq):
    """The session's close ABORTs its "delivered" transaction: nothing it ACKed in it is settled."""
    queue = _queue()
    factory = ConnectionFactory(_url(activemq.url))
    with factory.create_connection() as conn:
        _fill(conn, queue)
        session = conn.create_session(False, CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(queue)
        conn.start()
        assert len(_drain(consumer)) == COUNT
        session.close()
        again = _drain(conn.create_session(False, CLIENT_ACKNOWLEDGE).create_consumer(queue))
        assert sorted(m.text for m in again) == sorted("m%d" % i for i in range(COUNT))
        again[-1].acknowledge()
    assert wait_until(lambda: _size(activemq, queue) == 0, 10)


@pytest.mark.timeout(90)
def test_after_a_failover_the_consumer_gets_past_the_prefetch_without_acknowledge(activemq, tcp_proxy_factory):
    """The private "delivered" transaction lives on one socket: after a failover a new one is
    begun on the new socket (the old one went with its socket, the broker rolled it back), so the
    batch ACKs keep the window growing -- no stall at the prefetch before acknowledge(). What the
    lost socket delivered comes again (redelivered) and is never ACKed on the new socket;
    acknowledge() says that it could not settle those, and the next one settles everything."""
    queue, count = _queue(), 6 * PREFETCH
    proxy, conn, errors = _failover_connection(activemq, tcp_proxy_factory, queue, count)
    try:
        consumer = conn.create_session(False, CLIENT_ACKNOWLEDGE).create_consumer(queue)
        conn.start()
        after = _cut_then_drain(proxy, conn, consumer, count)  # more than the prefetch, no acknowledge()
        texts = {m.text for m in after}
        # the lost socket's deliveries are among those acknowledge() settles: it says they were not
        # (their ACKs cannot be written; the broker redelivered them) and the session recovers
        with pytest.raises(AcknowledgeInterruptedError, match="lost since"):
            after[-1].acknowledge()
        again = _drain(consumer, wait_s=3.0, limit=4 * count)
        assert {m.text for m in again} == texts and all(m.redelivered for m in again)
        again[-1].acknowledge()  # all of them on the open socket
        assert consumer.receive(0.5) is None
        consumer.close()
        assert not errors, errors
    finally:
        _close_quietly(conn)
    assert wait_until(lambda: _size(activemq, queue) == 0, 10), _size(activemq, queue)


@pytest.mark.timeout(120)
def test_after_a_failover_a_transacted_consumer_gets_past_the_prefetch_and_commit_rolls_back(activemq,
                                                                                            tcp_proxy_factory):
    """A transacted session's consumer ACKs in its transaction every batch (the broker's window grows
    with them). After a failover that transaction is gone (the broker rolled it back with its socket):
    the consumer must not sit at the prefetch until ``commit()`` -- the batch ACKs go in a new
    transaction on the new socket, so every message comes (the broker redelivers the lost socket's).
    ``commit()`` still raises TransactionRolledBackError (JMS: part of the transaction was lost) and
    rolls all of it back; the next transaction takes every message once, and the queue ends empty."""
    from amqstomp.jms import TransactionRolledBackError

    queue, count = _queue(), 6 * PREFETCH
    proxy, conn, errors = _failover_connection(activemq, tcp_proxy_factory, queue, count)
    try:
        session = conn.create_session(True)
        consumer = session.create_consumer(queue)
        conn.start()
        _cut_then_drain(proxy, conn, consumer, count)  # more than the prefetch, no commit()
        with pytest.raises(TransactionRolledBackError):
            session.commit()  # the transaction lost part of itself with the socket: never reported committed
        again = _drain(consumer, wait_s=3.0, limit=4 * count)
        assert sorted(m.text for m in again) == sorted("m%d" % i for i in range(count))
        session.commit()
        assert consumer.receive(0.5) is None
        consumer.close()
        assert not errors, errors
    finally:
        _close_quietly(conn)
    assert wait_until(lambda: _size(activemq, queue) == 0, 10), _size(activemq, queue)
