"""Failover against a real ActiveMQ, through a loopback TCP proxy the tests
control (cut, stall, half-close, refuse): the stomp.py-compatible connection
with ``auto_reconnect`` and the JMS-style API with ``failover:`` URIs.

What each test proves is in its name; every wait is bounded.
"""
import socket
import threading
import time
import uuid

import pytest
from conftest import Collector, wait_until

import amqstomp
import amqstomp as stomp
from amqstomp.exception import (
    AcknowledgeInterruptedError,
    ConnectFailedException,
    ConnectRefusedError,
    NotConnectedException,
    TransactionRolledBackError,
)
from amqstomp.testing import TcpProxy

pytestmark = pytest.mark.timeout(180)


def queue_name() -> str:
    return "/queue/amqstomp-fo-" + uuid.uuid4().hex[:12]


class Recorder(Collector):
    """Collector plus the failover callbacks, and acks of client-individual messages."""

    def __init__(self, conn=None):
        super().__init__()
        self.conn = conn

    def on_transport_interrupted(self):
        self._record("interrupted")

    def on_transport_resumed(self):
        self._record("resumed")

    def on_disconnected(self):
        self._record("disconnected")

    def count(self, name):
        with self.cond:
            return self.events.count(name)


def amq_threads():
    return [t for t in threading.enumerate() if t.name.startswith("amqstomp-")]


def free_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def proxy(activemq):
    with TcpProxy(activemq.host_and_ports[0]) as p:
        yield p


def plain(activemq):
    conn = stomp.Connection12(activemq.host_and_ports)
    conn.connect("admin", "admin", wait=True, timeout=15)
    return conn


def failover_conn(proxy, listener=None, **kwargs):
    kwargs.setdefault("heartbeats", (1000, 1000))
    kwargs.setdefault("reconnect_sleep_initial", 0.05)
    kwargs.setdefault("reconnect_attempts_max", -1)
    kwargs.setdefault("timeout", 20)
    conn = stomp.Connection12([proxy.address], auto_reconnect=True, **kwargs)
    rec = listener or Recorder()
    conn.set_listener("rec", rec)
    conn.connect("admin", "admin", wait=True, timeout=15)
    return conn, rec


def send_and_confirm(conn, destination, bodies):
    for body in bodies:
        conn.send(destination, body)
    receipt = "r-" + uuid.uuid4().hex
    conn.send(destination, "marker", receipt=receipt, headers={"amqstomp-marker": "1"})
    conn.wait_for_receipt(receipt, 15)


# --------------------------------------------------------------------------- stomp.py-compatible API


def test_twenty_cuts_reconnect_resubscribe_and_lose_nothing_with_stable_threads(activemq, proxy):
    q = queue_name()
    conn, rec = failover_conn(proxy)
    got = set()
    lock = threading.Lock()

    class Acker(stomp.ConnectionListener):
        def on_message(self, frame):
            with lock:
                got.add(frame.body)
            conn.ack(frame.headers["ack"])

    conn.set_listener("acker", Acker())
    conn.subscribe(q, id="s1", ack="client-individual", receipt="sub-1")
    conn.wait_for_receipt("sub-1", 15)
    producer = plain(activemq)
    threads_after_first = None
    expected = set()
    try:
        for cycle in range(20):
            assert proxy.cut() == 1
            assert wait_until(lambda: rec.count("resumed") == cycle + 1, 20), rec.events[-6:]
            bodies = ["c%d-%d" % (cycle, i) for i in range(5)]
            expected.update(bodies)
            send_and_confirm(producer, q, bodies)
            assert wait_until(lambda: expected <= got, 20), sorted(expected - got)[:5]
            if cycle == 0:
                threads_after_first = threading.active_count()
        assert rec.count("interrupted") == 20
        assert rec.count("disconnected") == 0
        assert conn.reconnector.failovers == 20
        assert abs(threading.active_count() - threads_after_first) <= 1  # the failover thread may be ending
        assert wait_until(lambda: not [t for t in threading.enumerate()
                                       if t.name.startswith("amqstomp-failover")], 5)
    finally:
        conn.disconnect()
        producer.disconnect()
    assert wait_until(lambda: not amq_threads(), 10), amq_threads()


def test_a_stalled_broker_is_found_by_heart_beats_and_replaced(proxy):
    conn, rec = failover_conn(proxy, heartbeats=(500, 500))
    try:
        proxy.stall()
        started = time.monotonic()
        assert wait_until(lambda: rec.count("interrupted") == 1, 10), rec.events
        detected = time.monotonic() - started
        assert "heartbeat_timeout" in rec.events
        proxy.unstall()
        assert wait_until(lambda: rec.count("resumed") == 1, 15), rec.events
        assert conn.is_connected()
        assert detected < 2 * 0.5 * 1.5 * 2 + 1.0  # 2 intervals x grace, plus scheduling slack
    finally:
        conn.disconnect()


@pytest.mark.parametrize("direction", ["to_client", "both"])
def test_a_half_closed_socket_is_replaced(proxy, direction):
    conn, rec = failover_conn(proxy)
    try:
        assert proxy.half_close(direction) == 1
        assert wait_until(lambda: rec.count("resumed") == 1, 15), rec.events
        q = queue_name()
        conn.send(q, "after", receipt="r-after")
        conn.wait_for_receipt("r-after", 10)
    finally:
        conn.disconnect()


def test_a_send_while_down_waits_for_the_new_socket_or_times_out(activemq, proxy):
    q = queue_name()
    conn, rec = failover_conn(proxy, timeout=2)
    try:
        proxy.refuse(True)
        proxy.cut()
        assert wait_until(lambda: rec.count("interrupted") == 1, 10)
        started = time.monotonic()
        with pytest.raises(NotConnectedException, match="not reconnected within"):
            conn.send(q, "lost?")
        assert 1.5 < time.monotonic() - started < 6
        done = threading.Event()

        def late_send():
            conn.send(q, "waited", receipt="r-waited")
            done.set()

        sender = threading.Thread(target=late_send)
        sender.start()
        time.sleep(0.5)
        assert not done.is_set()  # blocked while no broker can be reached
        proxy.refuse(False)
        sender.join(10)
        assert done.is_set()
        conn.wait_for_receipt("r-waited", 10)
        consumer = plain(activemq)
        got = Collector()
        consumer.set_listener("got", got)
        consumer.subscribe(q, id=1, ack="auto")
        assert wait_until(lambda: len(got.messages) == 1, 10)
        assert got.messages[0].body == "waited"
        consumer.disconnect()
    finally:
        conn.disconnect()


def test_acks_of_the_lost_socket_are_never_sent_on_the_new_one(activemq, proxy):
    q = queue_name()
    conn, rec = failover_conn(proxy)
    producer = plain(activemq)
    try:
        conn.subscribe(q, id="s", ack="client-individual", receipt="sub")
        conn.wait_for_receipt("sub", 10)
        producer.send(q, "one")
        assert wait_until(lambda: len(rec.messages) == 1, 10)
        first = rec.messages[0]
        assert first.headers.get("redelivered") != "true"
        proxy.cut()
        assert wait_until(lambda: len(rec.messages) == 2, 15), rec.events
        again = rec.messages[1]
        assert again.body == "one" and again.headers["redelivered"] == "true"
        assert again.delivery_count >= 2
        with pytest.raises(AcknowledgeInterruptedError):
            conn.ack(first.headers["ack"], receipt="ack-old")  # of the lost socket: not written, says so
        with pytest.raises(KeyError):
            conn.wait_for_receipt("ack-old", 1)
        conn.ack(again.headers["ack"], receipt="ack-new")
        conn.wait_for_receipt("ack-new", 10)
        assert rec.errors == []
    finally:
        conn.disconnect()
        producer.disconnect()
    check = plain(activemq)
    got = Collector()
    check.set_listener("got", got)
    check.subscribe(q, id=1, ack="auto")
    time.sleep(1.0)
    check.disconnect()
    assert got.messages == []  # acked once, on the new socket


def test_commit_of_a_transaction_begun_before_the_loss_raises_and_its_sends_are_gone(activemq, proxy):
    q = queue_name()
    conn, rec = failover_conn(proxy)
    try:
        tx = conn.begin()
        conn.send(q, "in-tx", transaction=tx)
        proxy.cut()
        assert wait_until(lambda: rec.count("resumed") == 1, 15)
        with pytest.raises(TransactionRolledBackError, match="lost"):
            conn.send(q, "more", transaction=tx)
        with pytest.raises(TransactionRolledBackError, match="lost"):
            conn.commit(tx)
        tx2 = conn.begin()
        conn.send(q, "tx2", transaction=tx2)
        conn.commit(tx2)
        conn.send(q, "marker", receipt="r-m")
        conn.wait_for_receipt("r-m", 10)
    finally:
        conn.disconnect()
    check = plain(activemq)
    got = Collector()
    check.set_listener("got", got)
    check.subscribe(q, id=1, ack="auto")
    assert wait_until(lambda: len(got.messages) == 2, 10)
    time.sleep(0.3)
    check.disconnect()
    assert [m.body for m in got.messages] == ["tx2", "marker"]


def test_a_subscription_refused_on_replay_is_reported_once_and_not_retried(activemq, proxy):
    conn, rec = failover_conn(proxy)
    try:
        conn.subscribe(queue_name(), id="bad", ack="auto", receipt="r-bad")
        conn.wait_for_receipt("r-bad", 10)
        # a subscription the broker took, which it refuses when replayed (a refused SUBSCRIBE
        # itself is unregistered at once: tests/test_guards.py)
        conn.subscriptions.get("bad").headers["selector"] = "this is (( not a selector"
        good = queue_name()
        conn.subscribe(good, id="good", ack="auto", receipt="r-good")
        conn.wait_for_receipt("r-good", 10)
        for cycle in range(3):
            proxy.cut()
            assert wait_until(lambda: rec.count("resumed") == cycle + 1, 15)
            assert wait_until(lambda: conn.subscriptions.get("good") is not None, 5)
        time.sleep(0.5)
        replay_errors = [e for e in rec.errors if e.headers.get("receipt-id", "").startswith("amqstomp-resubscribe-bad")]
        assert len(replay_errors) == 1  # reported once, then dropped
        assert conn.subscriptions.get("bad") is None
        producer = plain(activemq)
        producer.send(good, "still here")
        producer.disconnect()
        assert wait_until(lambda: any(m.body == "still here" for m in rec.messages), 10)
    finally:
        conn.disconnect()


def test_without_resubscribe_the_subscriptions_are_dropped(activemq, proxy):
    q = queue_name()
    conn, rec = failover_conn(proxy, auto_resubscribe=False)
    try:
        conn.subscribe(q, id="s", ack="auto", receipt="r")
        conn.wait_for_receipt("r", 10)
        proxy.cut()
        assert wait_until(lambda: rec.count("resumed") == 1, 15)
        assert len(conn.subscriptions) == 0
    finally:
        conn.disconnect()


def test_reconnect_attempts_run_out_and_listeners_hear_disconnected(proxy):
    conn, rec = failover_conn(proxy, reconnect_attempts_max=3, reconnect_sleep_initial=0.05, timeout=5)
    proxy.refuse(True)
    proxy.cut()
    assert wait_until(lambda: rec.count("disconnected") == 1, 15), rec.events
    assert conn.reconnector.gave_up is not None
    with pytest.raises(NotConnectedException):
        conn.send(queue_name(), "x")
    conn.disconnect()
    assert wait_until(lambda: not amq_threads(), 10), amq_threads()


def test_disconnect_while_reconnecting_ends_with_one_on_disconnected(proxy):
    conn, rec = failover_conn(proxy)
    proxy.refuse(True)  # every attempt is reset: the reconnect goes on until disconnect()
    proxy.cut()
    assert wait_until(lambda: rec.count("interrupted") == 1, 10), rec.events
    assert wait_until(lambda: proxy.refused >= 2, 10)  # attempts refused meanwhile
    conn.disconnect()
    assert wait_until(lambda: rec.count("disconnected") == 1, 10), rec.events
    time.sleep(0.5)
    assert rec.count("disconnected") == 1 and rec.events[-1] == "disconnected", rec.events
    assert rec.count("resumed") == 0 and not conn.is_connected()
    assert wait_until(lambda: not amq_threads(), 10), amq_threads()


def test_disconnect_from_a_listener_while_reconnecting_ends_with_one_on_disconnected(proxy):
    class Closer(Recorder):
        def on_transport_interrupted(self):
            super().on_transport_interrupted()
            conn.disconnect()  # on the dispatcher thread: the failover thread is not waited for

    conn, rec = failover_conn(proxy, listener=Closer())
    proxy.refuse(True)
    proxy.cut()
    assert wait_until(lambda: rec.count("disconnected") == 1, 10), rec.events
    time.sleep(0.5)
    assert rec.count("disconnected") == 1 and rec.events[-1] == "disconnected", rec.events
    assert wait_until(lambda: not amq_threads(), 10), amq_threads()


def test_disconnect_from_a_listener_stops_a_reconnect_that_would_succeed(proxy):
    """The broker is reachable: the failover thread's attempt would succeed; disconnect()
    from on_transport_interrupted must end it (it used to connect and resume after
    disconnect() had returned: on_connected, on_transport_resumed, then on_disconnected)."""
    class Closer(Recorder):
        def on_transport_interrupted(self):
            super().on_transport_interrupted()
            conn.disconnect()
            self.events.append("returned")

    conn, rec = failover_conn(proxy, listener=Closer())
    proxy.cut()
    assert wait_until(lambda: rec.count("disconnected") == 1, 10), rec.events
    time.sleep(1.0)  # an attempt that went on would have connected by now
    after = rec.events[rec.events.index("returned"):]
    assert "connected" not in after and "resumed" not in after, rec.events
    assert rec.count("disconnected") == 1 and rec.events[-1] == "disconnected", rec.events
    assert not conn.is_connected()
    assert wait_until(lambda: not amq_threads(), 10), amq_threads()


def test_the_receipts_of_replayed_subscriptions_reach_no_listener(proxy):
    q = queue_name()
    conn, rec = failover_conn(proxy)
    try:
        conn.subscribe(q, id="s1", ack="auto")
        conn.subscribe(queue_name(), id="s2", ack="auto", receipt="r-mine")
        conn.wait_for_receipt("r-mine", 10)
        proxy.cut()
        assert wait_until(lambda: rec.count("resumed") == 1, 15), rec.events
        conn.send(q, "after", receipt="r-after")  # written after the replay's RECEIPTs came
        conn.wait_for_receipt("r-after", 10)
        assert [m.body for m in rec.wait_messages(1)] == ["after"]  # s1 was replayed
        assert wait_until(lambda: len(rec.receipts) == 2, 10)
        time.sleep(0.2)
        assert [r.headers["receipt-id"] for r in rec.receipts] == ["r-mine", "r-after"]
    finally:
        conn.disconnect()


def test_auto_reconnect_defaults_to_heart_beats(proxy):
    conn = stomp.Connection12([proxy.address], auto_reconnect=True)
    assert conn.heartbeats == (5000, 5000)
    assert stomp.Connection12([proxy.address]).heartbeats == (0, 0)


# --------------------------------------------------------------------------- JMS-style API


class TransportEvents:
    def __init__(self):
        self.events = []

    def on_transport_interrupted(self):
        self.events.append("interrupted")

    def on_transport_resumed(self):
        self.events.append("resumed")


def test_jms_transport_listener_hears_one_interruption_per_outage_of_both_sockets(proxy):
    # ActiveMQ's Java client has one transport per connection: its TransportListener hears one
    # transportInterupted/transportResumed per outage; amqstomp's consumer and producer sockets
    # are one connection too, so a cut of both is told once, resumed when the second is back
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=100&maxReconnectDelay=200" % proxy.address
    name = "amqstomp-fo-" + uuid.uuid4().hex[:8]
    events = TransportEvents()
    with amqstomp.ConnectionFactory(url).create_connection(timeout_s=15) as conn:
        conn.set_transport_listener(events)
        session = conn.create_session()
        consumer = session.create_consumer(amqstomp.Queue(name))
        conn.start()
        producer = session.create_producer(amqstomp.Queue(name))
        producer.send(session.create_text_message("before"))  # opens the producer socket
        assert consumer.receive(10).text == "before"
        assert len(conn._state.links()) == 2 and proxy.connections == 2
        assert proxy.cut() == 2
        assert wait_until(lambda: "resumed" in events.events, 15), events.events
        producer.send(session.create_text_message("after"))  # both sockets work again
        texts = []  # "before" may come again first: its ACK may have met the cut
        while "after" not in texts and len(texts) < 3:
            message = consumer.receive(10)
            texts.append(message.text if message is not None else None)
        assert "after" in texts, texts
        time.sleep(0.5)  # a second (wrong) pair of events would have come by now
        assert events.events == ["interrupted", "resumed"]
        assert conn.failure is None


def test_jms_failover_sync_sends_and_individual_acks_lose_nothing_over_cuts(proxy):
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=200" % proxy.address
    factory = amqstomp.ConnectionFactory(url, heartbeats=(1000, 1000))
    name = "amqstomp-fo-" + uuid.uuid4().hex[:8]
    got = []
    sent = []
    events = TransportEvents()
    with factory.create_connection(timeout_s=15) as consumer_conn, \
            factory.create_connection(timeout_s=15) as producer_conn:
        consumer_conn.set_transport_listener(events)
        session = consumer_conn.create_session(acknowledge_mode=amqstomp.INDIVIDUAL_ACKNOWLEDGE)
        consumer = session.create_consumer(amqstomp.Queue(name))

        def on_message(message):
            got.append(message.text)
            message.acknowledge()

        consumer.set_message_listener(on_message)
        consumer_conn.start()
        psession = producer_conn.create_session()
        producer = psession.create_producer(amqstomp.Queue(name))
        stop = threading.Event()
        errors = []

        def produce():
            for i in range(100000):
                if stop.is_set():
                    return
                try:
                    producer.send(psession.create_text_message("m%d" % i))  # persistent: waits for the receipt
                except Exception as exc:  # pragma: no cover - reported below
                    errors.append(exc)
                    return
                sent.append("m%d" % i)

        thread = threading.Thread(target=produce)
        thread.start()
        try:
            for _ in range(5):
                time.sleep(0.5)
                proxy.cut()
        finally:
            time.sleep(0.5)
            stop.set()
            thread.join(30)
        assert not errors
        assert wait_until(lambda: set(sent) <= set(got), 30), len(set(sent) - set(got))
        assert events.events.count("interrupted") >= 5
        assert consumer_conn.failure is None and producer_conn.failure is None
    assert len(sent) > 50


def test_jms_transaction_open_at_a_loss_fails_on_commit(proxy):
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10" % proxy.address
    name = "amqstomp-fo-" + uuid.uuid4().hex[:8]
    with amqstomp.ConnectionFactory(url).create_connection(timeout_s=15) as conn:
        events = TransportEvents()
        conn.set_transport_listener(events)
        session = conn.create_session(transacted=True)
        producer = session.create_producer(amqstomp.Queue(name))
        producer.send(session.create_text_message("lost with the socket"))
        proxy.cut()
        assert wait_until(lambda: "resumed" in events.events, 15)
        with pytest.raises(TransactionRolledBackError):
            session.commit()
        producer.send(session.create_text_message("committed"))
        session.commit()
        reader = conn.create_session()
        consumer = reader.create_consumer(amqstomp.Queue(name))
        conn.start()
        first = consumer.receive(10)
        assert first is not None and first.text == "committed"
        assert consumer.receive(0.5) is None


def test_jms_startup_before_the_broker_is_up_connects_within_the_back_off(activemq):
    port = free_port()
    url = "failover:(stomp://127.0.0.1:%d)?initialReconnectDelay=20&maxReconnectDelay=300" % port
    result = {}

    def connect():
        try:
            result["conn"] = amqstomp.ConnectionFactory(url).create_connection(timeout_s=20)
        except Exception as exc:  # pragma: no cover - reported below
            result["error"] = exc

    thread = threading.Thread(target=connect)
    thread.start()
    time.sleep(1.5)
    assert thread.is_alive()  # still trying: nothing listens yet
    with TcpProxy(activemq.host_and_ports[0], listen_port=port) as late:
        started = time.monotonic()
        thread.join(10)
        elapsed = time.monotonic() - started
        assert "conn" in result, result
        assert elapsed < 0.3 + 1.0  # within maxReconnectDelay (+ the connect itself)
        result["conn"].close()
        assert late.accepted >= 1


def test_jms_startup_gives_up_after_its_timeout_or_attempts():
    port = free_port()
    started = time.monotonic()
    with pytest.raises(ConnectFailedException):
        amqstomp.ConnectionFactory("failover:(stomp://127.0.0.1:%d)" % port).create_connection(timeout_s=2.0)
    assert 1.9 < time.monotonic() - started < 5  # the whole timeout: a last attempt at its end
    with pytest.raises(ConnectFailedException, match="after 3 attempt"):
        amqstomp.ConnectionFactory("failover:(stomp://127.0.0.1:%d)?startupMaxReconnectAttempts=3"
                                   "&initialReconnectDelay=1" % port).create_connection()
    assert wait_until(lambda: not amq_threads(), 5), amq_threads()


def test_jms_messages_buffered_from_the_lost_socket_are_dropped_and_come_again_redelivered(activemq, proxy):
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10" % proxy.address
    name = "amqstomp-fo-" + uuid.uuid4().hex[:8]
    producer = plain(activemq)
    for i in range(5):
        producer.send("/queue/" + name, "m%d" % i, receipt="r%d" % i, headers={"content-length": None})
        producer.wait_for_receipt("r%d" % i, 10)
    producer.disconnect()
    with amqstomp.ConnectionFactory(url).create_connection(timeout_s=15) as conn:
        events = TransportEvents()
        conn.set_transport_listener(events)
        session = conn.create_session(acknowledge_mode=amqstomp.INDIVIDUAL_ACKNOWLEDGE)
        consumer = session.create_consumer(amqstomp.Queue(name))
        conn.start()
        first = consumer.receive(10)
        assert first.text == "m0" and not first.redelivered
        assert wait_until(lambda: len(consumer._buffer) == 4, 10)  # the rest prefetched, buffered
        proxy.cut()
        assert wait_until(lambda: "resumed" in events.events, 15)
        with pytest.raises(AcknowledgeInterruptedError):
            first.acknowledge()  # of the lost socket: not sent, and it says so
        after = [consumer.receive(10) for _ in range(5)]
        assert [m.text for m in after] == ["m0", "m1", "m2", "m3", "m4"]
        assert all(m.redelivered for m in after)  # the broker's copies, not the lost socket's
        for message in after:
            message.acknowledge()
        assert consumer.receive(0.5) is None


@pytest.mark.compiled_pass_only  # a stall failover with its own broker: heart-beat timers and the failover thread
def test_jms_durable_subscriber_and_client_id_survive_a_stall_failover(activemq_factory):
    broker = activemq_factory(allow_link_stealing=True)
    topic = "amqstomp-fo-" + uuid.uuid4().hex[:8]
    with TcpProxy(broker.host_and_ports[0]) as proxy:
        url = ("failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=200"
               "&nested.heartBeat=500,500" % proxy.address)
        with amqstomp.ConnectionFactory(url, client_id="fo-durable-" + topic).create_connection(timeout_s=15) as conn:
            events = TransportEvents()
            conn.set_transport_listener(events)
            session = conn.create_session()
            subscriber = session.create_durable_subscriber(amqstomp.Topic(topic), "sub")
            conn.start()
            publisher = plain(broker)
            publisher.send("/topic/" + topic, "before", receipt="r1", headers={"content-length": None})
            publisher.wait_for_receipt("r1", 10)
            assert subscriber.receive(10).text == "before"
            proxy.stall()  # the broker still holds the old socket (and the client id) open
            assert wait_until(lambda: "interrupted" in events.events, 10)
            publisher.send("/topic/" + topic, "during", receipt="r2", headers={"content-length": None})
            publisher.wait_for_receipt("r2", 10)
            proxy.unstall()
            assert wait_until(lambda: "resumed" in events.events, 20), events.events
            message = subscriber.receive(10)
            if message is not None and message.text == "before":
                # its ACK was batched into the stalled socket: the broker redelivers it, flagged
                assert message.redelivered and message.delivery_count >= 2
                message = subscriber.receive(10)
            assert message is not None and message.text == "during"  # kept for the durable subscription
            assert subscriber.receive(0.5) is None
            publisher.disconnect()


# --------------------------------------------------------------------------- hostile findings


@pytest.mark.compiled_pass_only  # the failover loop against a broker that closes every socket
def test_a_sync_send_the_broker_closes_the_socket_on_is_not_resent_forever(activemq_factory):
    broker = activemq_factory(scheduler=True)
    url = "failover:(stomp://127.0.0.1:%d)?initialReconnectDelay=10" % broker.stomp_port
    with amqstomp.ConnectionFactory(url).create_connection(timeout_s=15) as conn:
        link = conn._state.producer_link()
        started = time.monotonic()
        # ActiveMQ drops the socket on a cron entry it cannot parse (the JMS API refuses to send
        # one; the raw link does not)
        with pytest.raises(amqstomp.exception.ConnectionClosedException, match="4 times"):
            link.send_message({"destination": "/queue/amqstomp-poison", "AMQ_SCHEDULED_CRON": "not a cron",
                               "persistent": "true"}, b"x", True, None, 30)
        assert time.monotonic() - started < 20
        assert link.reconnector.failovers <= 5
        session = conn.create_session()
        session.create_producer(amqstomp.Queue("amqstomp-after-poison")).send("fine")  # still usable


def test_stomp_frames_wait_for_connect_and_replay_on_the_new_socket(activemq, proxy):
    q = queue_name()
    conn, rec = failover_conn(proxy)
    real_open = conn.transport.open

    def slow_open(*args, **kwargs):  # widen the gap between the new socket and its CONNECT
        result = real_open(*args, **kwargs)
        time.sleep(0.3)
        return result

    conn.transport.open = slow_open
    try:
        accepted = proxy.accepted
        proxy.cut()
        assert proxy.wait_for_accepted(accepted + 1, 10)  # the new socket is open, its CONNECT not sent yet
        time.sleep(0.1)  # inside slow_open's 0.3 s
        for i in range(20):
            conn.send(q, "m%d" % i)  # no receipts: nothing may be written before CONNECT
        conn.send(q, "last", receipt="r-last")
        conn.wait_for_receipt("r-last", 15)
        assert [e for e in rec.errors] == []
    finally:
        conn.transport.open = real_open
        conn.disconnect()
    check = plain(activemq)
    got = Collector()
    check.set_listener("got", got)
    check.subscribe(q, id=1, ack="auto")
    assert wait_until(lambda: len(got.messages) == 21, 10), len(got.messages)
    check.disconnect()


def test_close_during_a_stalled_reconnect_attempt_is_prompt(proxy):
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10&nested.heartBeat=500,500" % proxy.address
    conn = amqstomp.ConnectionFactory(url).create_connection(timeout_s=15)
    events = TransportEvents()
    conn.set_transport_listener(events)
    proxy.stall()  # new connections stall too: the attempt's CONNECT is never answered
    assert wait_until(lambda: "interrupted" in events.events, 10)
    time.sleep(1.0)
    started = time.monotonic()
    conn.close()
    assert time.monotonic() - started < 5
    assert wait_until(lambda: not amq_threads(), 10), amq_threads()


def test_disconnect_from_on_transport_interrupted_is_prompt(proxy):
    done = threading.Event()
    took = []

    class Closer(Recorder):
        def on_transport_interrupted(self):
            started = time.monotonic()
            conn.disconnect()
            took.append(time.monotonic() - started)
            done.set()

    conn, _ = failover_conn(proxy, listener=Closer())
    proxy.cut()
    assert done.wait(15)
    assert took[0] < 3
    assert wait_until(lambda: not amq_threads(), 15), amq_threads()


def test_a_refused_connect_is_marked_and_jms_failover_attempts_do_not_reach_the_exception_listener(activemq, proxy):
    client_id = "fo-refused-" + uuid.uuid4().hex[:8]
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100" % proxy.address
    reports = []
    conn = amqstomp.ConnectionFactory(url, client_id=client_id).create_connection(timeout_s=15)
    conn.set_exception_listener(reports.append)
    events = TransportEvents()
    conn.set_transport_listener(events)
    thief = stomp.Connection12(activemq.host_and_ports)
    thief_errors = Collector()
    thief.set_listener("e", thief_errors)
    try:
        proxy.refuse(True)
        proxy.cut()
        assert wait_until(lambda: "interrupted" in events.events, 10)
        # the broker drops the cut connection's client-id once it notices the cut, which
        # under load can take a moment: until then it refuses the thief ("already connected")
        deadline = time.monotonic() + 15
        while True:
            try:
                thief.connect("admin", "admin", wait=True, timeout=10, headers={"client-id": client_id})
                break
            except ConnectFailedException:
                assert time.monotonic() < deadline, "the broker kept the cut connection's client-id"
                thief.disconnect()
                time.sleep(0.2)
        proxy.refuse(False)
        time.sleep(1.0)  # attempts refused meanwhile: "already connected"
        assert "resumed" not in events.events
        thief.disconnect()
        assert wait_until(lambda: "resumed" in events.events, 15), events.events
        assert reports == []
        # the stomp.py API: an ERROR that answers CONNECT reaches on_connect_refused (by default
        # on_error), as the broker sent it; connect() raises with the broker's reason
        dup = stomp.Connection12([proxy.address])
        dup_errors = Collector()
        refusals = []

        class Refusals(stomp.ConnectionListener):
            def on_connect_refused(self, frame):
                refusals.append(frame)

        dup.set_listener("e", dup_errors)
        dup.set_listener("r", Refusals())
        with pytest.raises(ConnectRefusedError) as refused:
            dup.connect("admin", "admin", wait=True, timeout=10, headers={"client-id": client_id})
        assert wait_until(lambda: dup_errors.errors and refusals, 5)
        assert refusals[0] is dup_errors.errors[0]
        assert not any(name.startswith("amqstomp") for name in refusals[0].headers)
        assert refusals[0].headers["message"] in str(refused.value)
        dup.disconnect()
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["individual", "client"])
def test_jms_prefetch_one_consumers_keep_counting_acks_after_a_failover(activemq, proxy, mode):
    url = ("failover:(stomp://%s:%d)?initialReconnectDelay=10&jms.prefetchPolicy.all=1" % proxy.address)
    name = "amqstomp-fo-" + uuid.uuid4().hex[:8]
    producer = plain(activemq)
    for i in range(40):
        producer.send("/queue/" + name, "m%d" % i, headers={"content-length": None})
    producer.send("/queue/" + name, "m-last", receipt="r", headers={"content-length": None})
    producer.wait_for_receipt("r", 10)
    producer.disconnect()
    ack_mode = amqstomp.INDIVIDUAL_ACKNOWLEDGE if mode == "individual" else amqstomp.CLIENT_ACKNOWLEDGE
    with amqstomp.ConnectionFactory(url).create_connection(timeout_s=15) as conn:
        events = TransportEvents()
        conn.set_transport_listener(events)
        session = conn.create_session(acknowledge_mode=ack_mode)
        consumer = session.create_consumer(amqstomp.Queue(name))
        conn.start()
        got = set()
        for cycle in range(3):
            for _ in range(5):
                message = consumer.receive(10)
                assert message is not None, (cycle, sorted(got))
                got.add(message.text)
                message.acknowledge()
            proxy.cut()
            assert wait_until(lambda: events.events.count("resumed") == cycle + 1, 15)
        deadline = time.monotonic() + 30
        while len(got) < 41 and time.monotonic() < deadline:
            message = consumer.receive(5)
            assert message is not None, sorted(got)  # a window that lost count stops delivery
            got.add(message.text)
            message.acknowledge()
        assert len(got) == 41


@pytest.mark.timeout(90)
def test_jms_commit_of_messages_from_a_lost_socket_raises_and_they_come_again(activemq, tcp_proxy_factory):
    """A transacted consumer received messages on a socket that was lost before
    commit(): their ACKs can never be written, so commit() must not report
    success (the broker redelivers them); it raises TransactionRolledBackError
    and the messages come again, flagged redelivered."""
    from amqstomp.exception import TransactionRolledBackError
    from amqstomp.jms import NON_PERSISTENT, ConnectionFactory, Queue, TextMessage

    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100" % proxy.address
    queue = Queue("tx-lost.%s" % uuid.uuid4().hex[:10])
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        producer = feeder.create_session().create_producer(queue)
        for i in range(3):
            producer.send(TextMessage("t%d" % i), delivery_mode=NON_PERSISTENT)
    with ConnectionFactory(url, heartbeats=(1000, 1000)).create_connection(timeout_s=15) as connection:
        session = connection.create_session(transacted=True)
        consumer = session.create_consumer(queue)
        connection.start()
        first = [consumer.receive(5).text for _ in range(2)]
        assert first == ["t0", "t1"]
        link = connection._state.consumer_link
        seq = link.transport.link_seq
        assert proxy.cut() >= 1
        assert wait_until(lambda: link.transport.is_connected() and link.transport.link_seq != seq, 15)
        with pytest.raises(TransactionRolledBackError, match="lost since"):
            session.commit()
        again = []
        for _ in range(3):
            message = consumer.receive(5)
            assert message is not None
            again.append((message.text, message.redelivered))
        session.commit()
        assert [text for text, _ in again] == ["t0", "t1", "t2"]
        assert again[0][1] and again[1][1]


def test_connect_with_auto_reconnect_rides_over_resets_before_connected(activemq, proxy):
    """connect(wait=True) with auto_reconnect: a socket the peer resets right
    after accepting it (a broker starting, a proxy) is tried again with the
    back-off until the timeout, instead of failing at the first reset."""
    proxy.refuse(True, mode="reset")
    threading.Timer(0.8, proxy.refuse, args=(False,)).start()
    conn = stomp.Connection12([proxy.address], auto_reconnect=True, reconnect_attempts_max=-1,
                              reconnect_sleep_initial=0.05, reconnect_sleep_max=0.2, timeout=20)
    started = time.monotonic()
    try:
        conn.connect("admin", "admin", wait=True, timeout=10)
        assert conn.is_connected() and time.monotonic() - started < 8
    finally:
        conn.disconnect()
    gives_up = stomp.Connection12([proxy.address], auto_reconnect=True, reconnect_attempts_max=-1,
                                  reconnect_sleep_initial=0.05, reconnect_sleep_max=0.2)
    proxy.refuse(True, mode="reset")
    started = time.monotonic()
    with pytest.raises(ConnectFailedException):
        gives_up.connect("admin", "admin", wait=True, timeout=1.5)
    assert time.monotonic() - started < 5  # bounded by the timeout
    proxy.refuse(False)


@pytest.mark.parametrize("mode, heard", [("reset", 1), ("closed", 0)])
def test_a_failed_first_connect_with_auto_reconnect_is_heard_as_one_disconnect(tcp_proxy_factory, activemq,
                                                                                mode, heard):
    """connect(wait=True) with auto_reconnect runs the failover loop, whose attempts close
    their sockets silently: when it gives up, the listeners hear on_disconnected once if a
    socket was opened (as after connect() without failover), never if none was."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    proxy.refuse(True, mode=mode)
    conn = stomp.Connection12([proxy.address], auto_reconnect=True, reconnect_sleep_initial=0.05,
                              reconnect_attempts_max=-1, timeout=5)
    rec = Recorder()
    conn.set_listener("rec", rec)
    with pytest.raises(ConnectFailedException):
        conn.connect("admin", "admin", wait=True, timeout=1.0)
    time.sleep(0.3)  # a late callback would show now
    assert rec.count("disconnected") == heard, rec.events
    assert not conn.is_connected()
    assert wait_until(lambda: not amq_threads(), 10), amq_threads()
