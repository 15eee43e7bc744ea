"""amqstomp.otel for every API and acknowledge mode on both brokers (ActiveMQ and RabbitMQ),
and the leftovers of issue 25: the spans' names, kinds, attributes and parentage per ack
mode; no span for a prefetched message until it is handed over; the JMS connection's client
id on its producer socket's spans; a stomp.py listener's exception on its process span; a
priorityBackup move counted as a move, not as a lost connection; a COMMIT in doubt.

The SDK's InMemorySpanExporter and InMemoryMetricReader collect what was emitted
(test_otel.py's Telemetry).
"""
import time
import uuid

import pytest
from conftest import SessionQueues, connect12, wait_until

pytest.importorskip("opentelemetry.sdk")  # the otel extra (scripts/setup.sh installs it)

from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402
from test_otel import _disconnect, telemetry, Acking, Telemetry, _MADE  # noqa: E402,F401

import amqstomp  # noqa: E402
from amqstomp.jms import (AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE, DUPS_OK_ACKNOWLEDGE,  # noqa: E402
                          INDIVIDUAL_ACKNOWLEDGE, ConnectionFactory, Queue, TextMessage)
from amqstomp.otel import DUP  # noqa: E402

pytestmark = pytest.mark.timeout(90)

QUEUES = SessionQueues("otel-apis")


@pytest.fixture(scope="module", autouse=True)
def _rabbitmq_queues():
    yield
    QUEUES.clean_up()


def qname(broker):
    return QUEUES.name(broker)


def stomp12(target, listener=None, **kwargs):
    return connect12(target, _MADE, listener, **kwargs)


def _check_common(span, broker, destination):
    assert span.attributes["messaging.system"] == broker.name  # activemq / rabbitmq, from CONNECTED's server
    assert span.attributes["messaging.destination.name"] == destination
    assert span.attributes["server.address"] == "127.0.0.1"
    assert span.attributes["server.port"] == broker.host_and_ports[0][1]


def _check_process_spans(t, sends, destination, kind=SpanKind.CONSUMER, operation="deliver"):
    """Each process (receive) span: of the message's destination, the child of (linked to) its send span."""
    by_trace = {s.context.trace_id: s for s in sends}
    send_ids = {s.context.span_id for s in sends}
    spans = t.spans(name_part="%s %s" % (destination, operation))
    for span in spans:
        assert span.kind == kind
        if operation == "deliver":
            send = by_trace[span.context.trace_id]
            assert span.parent is not None and span.parent.span_id == send.context.span_id
        else:  # receive: the caller's context is its parent, the creation context a link
            assert span.links[0].context.span_id in send_ids
        assert span.attributes["messaging.message.id"]
        assert span.attributes["messaging.destination.subscription.name"]
    return spans


@pytest.mark.parametrize("ack", ["auto", "client", "client-individual"])
def test_stomppy_spans_of_each_ack_mode(stomp_broker, telemetry, ack):
    """Send, process and settle spans of the stomp.py API; the listener ACKs each message
    itself (ack:client: the application's cumulative ACK, whose count amqstomp does not decide)."""
    t = telemetry()
    destination = "/queue/" + qname(stomp_broker)
    producer = stomp12(stomp_broker)
    for i in range(3):
        producer.send(destination, "m%d" % i, headers={"receipt": "r%d" % i})
    listener = Acking()
    consumer = stomp12(stomp_broker, listener)
    if ack != "auto":
        listener.conn = consumer
    consumer.subscribe(destination, id="s-" + ack, ack=ack)
    assert wait_until(lambda: len(listener.frames) == 3, 15)
    settles = 0 if ack == "auto" else 3
    assert wait_until(lambda: len(t.spans(SpanKind.CONSUMER)) == 3 and len(t.spans(SpanKind.CLIENT)) == settles, 10)

    sends = t.spans(SpanKind.PRODUCER)
    assert [s.name for s in sends] == ["%s publish" % destination] * 3
    for span in sends:
        _check_common(span, stomp_broker, destination)
        assert span.status.is_ok  # ended with its RECEIPT
    processes = _check_process_spans(t, sends, destination)
    assert len(processes) == 3
    assert [s.attributes["messaging.message.id"] for s in processes] == \
        [f.headers["message-id"] for f in listener.frames]
    for span in t.spans(SpanKind.CLIENT):
        assert span.name == "%s settle" % destination
        _check_common(span, stomp_broker, destination)
        assert span.parent.span_id in {p.context.span_id for p in processes}  # acked in the listener
        assert span.attributes.get("messaging.batch.message_count") == (1 if ack == "client-individual" else None)
    assert t.total("messaging.client.sent.messages", **{"messaging.destination.name": destination}) == 3
    assert t.total("messaging.client.consumed.messages", **{"messaging.destination.name": destination}) == 3


_MODES = {"AUTO": AUTO_ACKNOWLEDGE, "CLIENT": CLIENT_ACKNOWLEDGE, "DUPS_OK": DUPS_OK_ACKNOWLEDGE,
          "INDIVIDUAL": INDIVIDUAL_ACKNOWLEDGE, "TRANSACTED": None}


@pytest.mark.parametrize("mode", list(_MODES))
def test_jms_spans_of_each_acknowledge_mode(stomp_broker, telemetry, mode):
    """A MessageListener's process spans (receive spans for the transacted session's pull
    consumer), one settle span per ACK frame whose counts add up to the messages settled,
    and the transacted session's commit span."""
    t = telemetry()
    count = 4
    name = qname(stomp_broker)
    destination = "/queue/" + name
    factory = ConnectionFactory(stomp_broker.url)
    with factory.create_connection(stomp_broker.username, stomp_broker.password) as connection:
        connection.start()
        producer = connection.create_session().create_producer(Queue(name))
        for i in range(count):
            producer.send(TextMessage("j%d" % i))
        session = connection.create_session(transacted=True) if mode == "TRANSACTED" else \
            connection.create_session(acknowledge_mode=_MODES[mode])
        consumer = session.create_consumer(Queue(name))
        sub_id = consumer.subscription_id
        got = []
        if mode == "TRANSACTED":
            for _ in range(count):
                message = consumer.receive(10)
                assert message is not None
                got.append(message)
            session.commit()
        else:
            def listen(message):
                got.append(message)
                if mode == "INDIVIDUAL" or (mode == "CLIENT" and len(got) == count):
                    message.acknowledge()
            consumer.set_message_listener(listen)
            assert wait_until(lambda: len(got) == count, 15)
        consumer.close()  # AUTO/DUPS_OK: the batched ACK of what is left

        def settled():
            return [s.attributes.get("messaging.batch.message_count") for s in t.spans(SpanKind.CLIENT, "settle")
                    if s.attributes.get("messaging.destination.subscription.name") == sub_id]
        assert wait_until(lambda: sum(c or 0 for c in settled()) == count, 10), settled()

    sends = t.spans(SpanKind.PRODUCER)
    assert len(sends) == count
    for span in sends:
        _check_common(span, stomp_broker, destination)
    if mode == "TRANSACTED":
        assert len(_check_process_spans(t, sends, destination, SpanKind.CONSUMER, "receive")) == count
        commit, = [s for s in t.spans(SpanKind.CLIENT) if s.name == "commit"]
        assert commit.status.is_ok
    else:
        assert len(_check_process_spans(t, sends, destination)) == count
    counts = settled()
    if mode == "INDIVIDUAL":
        assert counts == [1] * count
    elif mode == "CLIENT":
        assert counts == [count]  # one acknowledge(): one ACK frame of all four
    for span in t.spans(SpanKind.CLIENT, "settle"):
        _check_common(span, stomp_broker, destination)
    assert t.total("messaging.client.consumed.messages", **{"messaging.destination.name": destination}) == count
    assert t.total("amqstomp.client.ack.batch.size", **{"messaging.destination.name": destination}) == count


def test_a_prefetched_message_has_no_span_until_it_is_handed_over(activemq, telemetry):
    """Messages the broker pushed into the JMS consumer's buffer (prefetch) get their receive
    span when receive() returns each, not when they arrive (semconv: no receive/process span
    for a prefetched message)."""
    t = telemetry()
    name = QUEUES.prefix + uuid.uuid4().hex[:10]
    destination = "/queue/" + name
    with ConnectionFactory(activemq.url).create_connection() as connection:
        connection.start()
        producer = connection.create_session().create_producer(Queue(name))
        for i in range(5):
            producer.send(TextMessage("p%d" % i))
        consumer = connection.create_session().create_consumer(Queue(name))

        def prefetched():
            return [p.value for p in t.points("amqstomp.client.prefetched.messages")
                    if p.attributes.get("messaging.destination.name") == destination]
        assert wait_until(lambda: prefetched() == [5], 15)  # all five in the client's buffer
        assert t.spans(name_part="receive") == [] and t.spans(SpanKind.CONSUMER) == []
        assert t.total("messaging.client.consumed.messages") == 0
        for _ in range(2):
            assert consumer.receive(10) is not None
        assert len(t.spans(name_part="%s receive" % destination)) == 2
        assert prefetched() == [3]
        assert t.total("messaging.client.consumed.messages", **{"messaging.destination.name": destination}) == 2


def test_jms_producer_socket_spans_carry_the_connections_client_id(activemq, telemetry):
    """A JMS connection's producers send on a socket of their own whose CONNECT has no
    client-id (ActiveMQ refuses a second connection with the same one); their spans name
    the connection's client id all the same, in both conventions' names."""
    t = telemetry(semconv=DUP)
    name = QUEUES.prefix + uuid.uuid4().hex[:10]
    client_id = "otel-client-" + uuid.uuid4().hex[:8]
    with ConnectionFactory(activemq.url, client_id=client_id).create_connection() as connection:
        producer = connection.create_session().create_producer(Queue(name))
        producer.send(TextMessage("from the producer socket"))
        producer_link = connection._state.links()[-1]
        assert producer_link.role == "producer" and producer_link.client_id is None  # not in its CONNECT
        connection.start()
        assert connection.create_session().create_consumer(Queue(name)).receive(10) is not None
    send, = t.spans(SpanKind.PRODUCER)
    assert send.attributes["messaging.client.id"] == client_id
    assert send.attributes["messaging.client_id"] == client_id
    receive, = t.spans(name_part="receive")  # the consumer socket: its CONNECT carries it
    assert receive.attributes["messaging.client.id"] == client_id


class Raising:
    """A stomp.py listener / JMS MessageListener that raises ValueError."""

    def __init__(self):
        self.handed = 0

    def on_message(self, message):
        self.handed += 1
        raise ValueError("bad message (a test)")

    __call__ = on_message


def test_a_listener_that_raises_is_recorded_on_its_process_span_in_both_apis(activemq, telemetry):
    """As for a JMS MessageListener, a stomp.py listener's exception is the process span's:
    status ERROR, error.type the exception's class, an exception event."""
    t = telemetry()
    name = QUEUES.prefix + uuid.uuid4().hex[:10]
    destination = "/queue/" + name
    listener = Raising()
    consumer = stomp12_activemq(activemq, listener)
    consumer.subscribe(destination, id="x1", ack="auto")
    consumer.send(destination, "raises in stomp.py")
    assert wait_until(lambda: t.spans(SpanKind.CONSUMER), 15)
    factory = ConnectionFactory(activemq.url, maximum_redeliveries=0)
    jms_name = name + "-jms"
    with factory.create_connection() as connection:
        connection.create_session().create_consumer(Queue(jms_name)).set_message_listener(Raising())
        connection.start()
        connection.create_session().create_producer(Queue(jms_name)).send(TextMessage("raises in JMS"))
        assert wait_until(lambda: len(t.spans(SpanKind.CONSUMER)) == 2, 15)
    for span in t.spans(SpanKind.CONSUMER):
        assert span.status.status_code == StatusCode.ERROR
        assert span.status.description == "bad message (a test)"
        assert span.attributes["error.type"] == "ValueError"
        event, = [e for e in span.events if e.name == "exception"]
        assert event.attributes["exception.type"] == "ValueError"
        assert event.attributes["exception.message"] == "bad message (a test)"
    assert t.total("messaging.client.consumed.messages", **{"messaging.destination.name": destination,
                                                           "error.type": "ValueError"}) == 1


def stomp12_activemq(broker, listener):
    conn = amqstomp.Connection12(broker.host_and_ports)
    _MADE.append(conn)
    conn.set_listener("rec", listener)
    conn.connect(wait=True, timeout=15)
    return conn


@pytest.mark.timeout(120)
def test_a_priority_backup_move_is_a_move_not_a_lost_connection(activemq, tcp_proxy_factory, telemetry):
    """The failover loop's planned move back to a priority broker (DISCONNECT, then a new
    socket) is counted by amqstomp.client.connection.moves and the disconnected time's
    amqstomp.disconnect.cause=move, never as a lost connection. (Two proxies to one broker
    stand for the priority broker and the backup.)"""
    t = telemetry()
    priority = tcp_proxy_factory(activemq.host_and_ports[0])
    backup = tcp_proxy_factory(activemq.host_and_ports[0])
    priority.refuse(True, mode="closed")  # down (ECONNREFUSED): the connection starts on the backup
    conn = amqstomp.Connection12([priority.address, backup.address], auto_reconnect=True,
                                 reconnect_attempts_max=-1, reconnect_sleep_initial=0.1,
                                 reconnect_sleep_increase=1.0, reconnect_sleep_max=0.5, priority_backup=True,
                                 timeout=10)
    _MADE.append(conn)
    conn.connect(wait=True, timeout=15)
    assert conn.transport.current_host_and_port == backup.address
    priority.refuse(False)  # up again: the next probe moves the connection there
    assert wait_until(lambda: conn.transport.current_host_and_port == priority.address, 15)
    assert wait_until(lambda: t.total("amqstomp.client.connections", **{"amqstomp.reconnect": True}) == 1, 10)
    assert conn.reconnector.prober.moves == 1
    assert t.total("amqstomp.client.connection.moves") == 1
    assert t.total("amqstomp.client.connection.losses") == 0
    gaps = t.points("amqstomp.client.disconnected.duration")
    assert [(p.attributes["amqstomp.disconnect.cause"], p.count) for p in gaps] == [("move", 1)]
    # (attempts on the priority broker while it refused may come first: each a failed connect span, no loss)
    connects = [s for s in t.exporter.get_finished_spans() if s.name == "connect" and s.status.is_ok]
    assert len(connects) == 2
    assert [e.name for e in connects[1].events] == ["amqstomp.moved"]
    assert "priorityBackup" in connects[1].events[0].attributes["amqstomp.reason"]
    assert connects[1].attributes["server.port"] == priority.address[1]
    failed = [s for s in t.exporter.get_finished_spans() if s.name == "connect" and not s.status.is_ok]
    assert not [s.events for s in failed if s.events]  # no "lost" before a socket that never connected


@pytest.mark.timeout(60)
def test_a_rebalance_move_is_a_move_not_a_lost_connection(activemq, tcp_proxy_factory, telemetry):
    """rebalanceInterval's moves (DISCONNECT, then the next broker) are counted by
    amqstomp.client.connection.moves, one per move, never as lost connections. (Two
    proxies to one broker stand for two brokers.)"""
    t = telemetry()
    one, two = (tcp_proxy_factory(activemq.host_and_ports[0]) for _ in range(2))
    conn = amqstomp.Connection12([one.address, two.address], auto_reconnect=True, reconnect_attempts_max=-1,
                                 rebalance_interval_ms=1000, timeout=10)
    _MADE.append(conn)
    conn.connect(wait=True, timeout=15)
    assert conn.transport.current_host_and_port == one.address
    assert wait_until(lambda: conn.transport.current_host_and_port == two.address, 10)  # round robin
    assert wait_until(lambda: conn.transport.current_host_and_port == one.address, 10)  # and back
    conn.disconnect()
    assert conn.reconnector.prober.moves >= 2
    assert t.total("amqstomp.client.connection.moves") == conn.reconnector.prober.moves
    assert t.total("amqstomp.client.connection.losses") == 0
    moved = [e for s in t.exporter.get_finished_spans() if s.name == "connect" for e in s.events]
    assert moved and all(e.name == "amqstomp.moved" and "rebalanceInterval" in e.attributes["amqstomp.reason"]
                         for e in moved)


def test_a_commit_whose_receipt_never_comes_is_counted_in_doubt(activemq, tcp_proxy_factory, telemetry):
    """A COMMIT written, its socket lost before the RECEIPT: the broker may have committed.
    amqstomp.client.transactions.in_doubt counts it; its commit span says so and is an error."""
    t = telemetry()
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    conn = amqstomp.Connection12(proxy.host_and_ports)
    _MADE.append(conn)
    conn.connect(wait=True, timeout=15)
    tx = conn.begin()
    conn.send("/queue/" + QUEUES.prefix + uuid.uuid4().hex[:10], "in doubt", transaction=tx)
    proxy.stall()  # the COMMIT goes out, nothing comes back
    conn.commit(tx, receipt="commit-1")
    assert proxy.cut() == 1
    assert wait_until(lambda: t.total("amqstomp.client.transactions.in_doubt") == 1, 10)
    commit, = [s for s in t.spans(SpanKind.CLIENT) if s.name == "commit"]
    assert commit.attributes["amqstomp.transaction.in_doubt"] is True
    assert commit.attributes["messaging.batch.message_count"] == 1
    assert commit.attributes["error.type"] == "ConnectionClosedException"
    assert sum(p.count for p in t.points("messaging.client.operation.duration")
               if p.attributes.get("messaging.operation") == "commit"
               and p.attributes.get("error.type") == "ConnectionClosedException") == 1


@pytest.mark.timeout(120)
def test_failed_attempts_while_reconnecting_are_no_losses(activemq, tcp_proxy_factory, telemetry):
    """One lost connection, then attempts the broker's side resets before CONNECTED: one loss,
    and the disconnected time runs from the loss to the next CONNECTED (each failed attempt
    counted as a loss, and restarting that clock, before)."""
    t = telemetry()
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    conn = amqstomp.Connection12(proxy.host_and_ports, auto_reconnect=True, reconnect_attempts_max=-1,
                                 reconnect_sleep_initial=0.05, reconnect_sleep_increase=0.0,
                                 reconnect_sleep_max=0.1, timeout=10)
    _MADE.append(conn)
    conn.connect(wait=True, timeout=15)
    proxy.refuse(True)  # accepted, then reset: every attempt fails before CONNECTED
    refused = time.monotonic()
    assert proxy.cut() == 1
    assert wait_until(lambda: proxy.refused >= 3, 15)  # attempts made and failed
    time.sleep(max(0.0, 1.0 - (time.monotonic() - refused)))
    proxy.refuse(False)
    assert wait_until(lambda: t.total("amqstomp.client.connections", **{"amqstomp.reconnect": True}) == 1, 15)
    assert t.total("amqstomp.client.connection.losses") == 1
    gap, = t.points("amqstomp.client.disconnected.duration")
    assert gap.count == 1 and gap.attributes["amqstomp.disconnect.cause"] == "loss"
    assert gap.sum >= 0.9  # from the loss, not from the last failed attempt
