"""JMS calls that wait for the broker are bounded as a whole, and say honestly
what happened: Connection.close() / Session.close() take at most
``jms.closeTimeout`` however many frames they wait for, and a transacted
commit() at most ``jms.sendTimeout``: TransactionInDoubtError when the COMMIT
was written and its RECEIPT did not come, TransactionRolledBackError when
it was never written. The broker is stalled by a TcpProxy (sockets open,
nothing forwarded), so every RECEIPT waited for is late."""
import time
import uuid

import pytest
from conftest import wait_until

from amqstomp.exception import TransactionInDoubtError, TransactionPartlyCommittedError
from amqstomp.jms import (
    NON_PERSISTENT,
    BytesMessage,
    ConnectionFactory,
    Queue,
    TextMessage,
    TransactionRolledBackError,
)
from amqstomp.testing import queue_statistics

pytestmark = pytest.mark.broker

#: what a bounded call may take beyond its bound (thread wake-ups, a loaded machine)
SLACK_S = 1.5


def _commit_fails_within_the_send_timeout(session, expected):
    """session.commit() raises ``expected`` within jms.sendTimeout=1000 (+ SLACK_S)."""
    start = time.monotonic()
    with pytest.raises(expected):
        session.commit()
    took = time.monotonic() - start
    assert took < 1.0 + SLACK_S, "commit took %.1f s with jms.sendTimeout=1000" % took


def _queue(prefix):
    return Queue("deadline.%s.%s" % (prefix, uuid.uuid4().hex[:8]))


@pytest.mark.timeout(120)
def test_close_under_a_stalled_broker_takes_one_close_timeout_in_all(activemq, tcp_proxy_factory):
    """Seven frames wait for a RECEIPT in this close (ABORT, three UNSUBSCRIBEs,
    two DISCONNECTs, a producer's async sends): each used to wait closeTimeout."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = "stomp://%s:%d?jms.closeTimeout=2000" % proxy.address
    connection = ConnectionFactory(url).create_connection()
    plain = connection.create_session()
    plain.create_consumer(_queue("a"))
    plain.create_consumer(_queue("b"))
    transacted = connection.create_session(True)
    queue = _queue("c")
    transacted.create_consumer(queue)
    transacted.create_producer(queue).send(TextMessage("open transaction"))
    connection.start()
    proxy.stall()
    start = time.monotonic()
    connection.close()
    took = time.monotonic() - start
    assert took < 2.0 + SLACK_S, "close took %.1f s with jms.closeTimeout=2000" % took


@pytest.mark.timeout(120)
def test_session_close_under_a_stalled_broker_takes_one_close_timeout(activemq, tcp_proxy_factory):
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = "stomp://%s:%d?jms.closeTimeout=2000" % proxy.address
    with ConnectionFactory(url).create_connection() as connection:
        session = connection.create_session(True)
        for name in "abc":
            session.create_consumer(_queue(name))
        session.create_producer(_queue("d")).send(TextMessage("open transaction"))
        proxy.stall()
        start = time.monotonic()
        session.close()
        took = time.monotonic() - start
        assert took < 2.0 + SLACK_S, "session close took %.1f s with jms.closeTimeout=2000" % took
        proxy.unstall()


@pytest.mark.timeout(120)
def test_a_commit_whose_receipt_is_late_is_in_doubt_within_the_send_timeout(activemq, tcp_proxy_factory):
    """The COMMIT was written: the broker commits it once the stall ends, so the
    message consumed in it is gone (not rolled back, as it used to be reported)."""
    queue = _queue("doubt")
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        feeder.create_session().create_producer(queue).send(TextMessage("once"))
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = "stomp://%s:%d?jms.sendTimeout=1000&jms.closeTimeout=2000" % proxy.address
    with ConnectionFactory(url).create_connection() as connection:
        session = connection.create_session(True)
        consumer = session.create_consumer(queue)
        connection.start()
        got = consumer.receive(10)
        assert got is not None and got.text == "once"
        proxy.stall()
        _commit_fails_within_the_send_timeout(session, TransactionInDoubtError)
        proxy.unstall()
        assert wait_until(lambda: queue_statistics(activemq, queue.name)["size"] == 0, 10), \
            "the broker did not commit the COMMIT reported in doubt"
        assert consumer.receive(0.5) is None  # not redelivered locally either


@pytest.mark.timeout(120)
def test_a_commit_whose_sends_are_unconfirmed_rolls_back_within_the_send_timeout(activemq, tcp_proxy_factory):
    """No COMMIT was written: the transaction is rolled back, for real (its SEND
    never reaches the queue once the stall ends), and within sendTimeout."""
    queue = _queue("rolled")
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = "stomp://%s:%d?jms.sendTimeout=1000&jms.closeTimeout=2000" % proxy.address
    with ConnectionFactory(url).create_connection() as connection:
        session = connection.create_session(True)
        session.create_consumer(_queue("other"))  # the transaction goes on the consumer socket
        producer = session.create_producer(queue)
        connection.start()
        proxy.stall()
        producer.send(TextMessage("never"))  # transacted sends are asynchronous
        _commit_fails_within_the_send_timeout(session, TransactionRolledBackError)
        proxy.unstall()
        session.create_producer(queue).send(TextMessage("marker"))
        session.commit()
    with ConnectionFactory(activemq.url).create_connection() as check:
        consumer = check.create_session().create_consumer(queue)
        check.start()
        texts = []
        for _ in range(3):
            message = consumer.receive(2)
            if message is None:
                break
            texts.append(message.text)
        assert texts == ["marker"], texts


@pytest.mark.timeout(120)
def test_an_async_send_that_finds_the_producer_window_full_fails_within_the_send_timeout(activemq, tcp_proxy_factory):
    """Without failover an asynchronous send reads no clock unless it must wait: the wait
    for room in a full producer window is still bounded by jms.sendTimeout (ReceiptTimeout),
    and the sends before it went out (the window counts them)."""
    from amqstomp.exception import ReceiptTimeout

    queue = _queue("window")
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = "stomp://%s:%d?jms.sendTimeout=1000&jms.closeTimeout=2000" % proxy.address
    with ConnectionFactory(url, producer_window_size=4096).create_connection() as connection:
        producer = connection.create_session().create_producer(queue)
        producer.send(TextMessage("before"), delivery_mode=NON_PERSISTENT)  # the producer socket is open
        proxy.stall()
        start = time.monotonic()
        sent = 0
        with pytest.raises(ReceiptTimeout, match="no room in the producer window"):
            for sent in range(1, 101):  # 1 KiB each: the 4 KiB window is full after a few
                producer.send(BytesMessage(b"x" * 1024), delivery_mode=NON_PERSISTENT)
        took = time.monotonic() - start
        assert 2 <= sent < 10, "the window let %d sends of 1 KiB through" % sent
        assert took < 1.0 + SLACK_S, "a send waited %.1f s for room with jms.sendTimeout=1000" % took
        proxy.unstall()


@pytest.mark.timeout(120)
def test_a_commit_whose_sends_committed_and_acks_did_not_says_partly_committed(activemq, tcp_proxy_factory):
    """A transaction that began with a send (no consumer yet) commits its SENDs on the
    producer socket, then its ACKs on the consumer socket. The consumer socket is cut just
    before the ACK: the sends are delivered, the consumed message comes again. It used to
    raise TransactionRolledBackError, which an application retries: duplicate sends."""
    seed_queue, out_queue = _queue("seed"), _queue("out")
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        feeder.create_session().create_producer(seed_queue).send(TextMessage("seed"))
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = "stomp://%s:%d?jms.sendTimeout=5000&jms.closeTimeout=2000" % proxy.address
    connection = ConnectionFactory(url).create_connection()
    try:
        session = connection.create_session(True)
        session.create_producer(out_queue).send(TextMessage("in-tx"))  # the transaction is on the producer socket
        consumer = session.create_consumer(seed_queue)
        connection.start()
        got = consumer.receive(10)
        assert got is not None and got.text == "seed"
        link = connection._state.consumer_link  # white box: the consumer socket dies as the ACK goes out
        acknowledge = link.acknowledge

        def cut_then_acknowledge(*args, **kwargs):
            proxy.cut()
            return acknowledge(*args, **kwargs)

        link.acknowledge = cut_then_acknowledge
        with pytest.raises(TransactionPartlyCommittedError) as info:
            session.commit()
        assert not isinstance(info.value, TransactionRolledBackError)
        assert isinstance(info.value, TransactionInDoubtError) and info.value.acks_in_doubt is False
        assert "sends were committed" in str(info.value)
    finally:
        connection.close()
    with ConnectionFactory(activemq.url).create_connection() as check:
        session = check.create_session()
        out, seed = session.create_consumer(out_queue), session.create_consumer(seed_queue)
        check.start()
        got_out, got_seed = out.receive(10), seed.receive(10)
        assert got_out is not None and got_out.text == "in-tx"  # committed: do not send it again
        assert got_seed is not None and got_seed.text == "seed"  # not acknowledged: it comes again


@pytest.mark.timeout(120)
def test_a_commit_on_a_broken_connection_is_rolled_back(activemq, tcp_proxy_factory):
    """No failover: the socket is lost before commit(); the broker rolled the transaction
    back with its connection. It raised ConnectionClosedException (not a rollback)."""
    queue = _queue("broken")
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    connection = ConnectionFactory("stomp://%s:%d" % proxy.address).create_connection()
    try:
        session = connection.create_session(True)
        session.create_consumer(_queue("other"))
        session.create_producer(queue).send(TextMessage("lost with its connection"))
        proxy.cut()
        assert wait_until(lambda: connection._state.failure is not None, 10)
        with pytest.raises(TransactionRolledBackError, match="connection is broken"):
            session.commit()
    finally:
        connection.close()
    try:
        size = queue_statistics(activemq, queue.name)["size"]
    except LookupError:  # the SEND was never committed: no queue
        size = 0
    assert size == 0
