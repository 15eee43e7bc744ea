"""amqstomp.otel against a real ActiveMQ (and RabbitMQ for messaging.system): the spans'
names, kinds, attributes and parentage for both APIs and each ack mode, the metrics'
values, the semantic-conventions opt-in, the trace context carried in STOMP headers
(a user's own header kept), uninstrument(), and nothing of OpenTelemetry imported
while amqstomp is not instrumented.

The SDK's InMemorySpanExporter and InMemoryMetricReader collect what was emitted.
"""
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest
from conftest import wait_until

pytest.importorskip("opentelemetry.sdk")  # the otel extra (scripts/setup.sh installs it)

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

import amqstomp  # noqa: E402
from amqstomp import _observe  # noqa: E402
from amqstomp.jms import (CLIENT_ACKNOWLEDGE, NON_PERSISTENT, BytesMessage, ConnectionFactory, Queue,  # noqa: E402
                          TextMessage)
from amqstomp.flow import RedeliveryPolicy  # noqa: E402
from amqstomp.otel import LINK, NEW, AmqstompInstrumentor  # noqa: E402

pytestmark = pytest.mark.timeout(90)

PREFIX = "amqstomp-otel-%s-" % uuid.uuid4().hex[:6]
_MADE = []


class Telemetry:
    """An instrumented amqstomp: the spans and metric points it emitted."""

    def __init__(self, **options):
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.instrumentor = AmqstompInstrumentor()
        self.instrumentor.instrument(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider,
                                     **options)

    def spans(self, kind=None, name_part=None):
        found = [s for s in self.exporter.get_finished_spans() if s.name != "connect"]
        return [s for s in found if (kind is None or s.kind == kind) and (name_part is None or name_part in s.name)]

    def points(self, name):
        data = self.reader.get_metrics_data()
        return [point for rm in data.resource_metrics for sm in rm.scope_metrics for metric in sm.metrics
                if metric.name == name for point in metric.data.data_points]

    def total(self, name, **attrs):
        return sum(p.value if hasattr(p, "value") else p.sum for p in self.points(name)
                   if all(p.attributes.get(k) == v for k, v in attrs.items()))

    def close(self):
        self.instrumentor.uninstrument()


@pytest.fixture
def telemetry():
    made = []

    def make(**options):
        t = Telemetry(**options)
        made.append(t)
        return t
    yield make
    for t in made:
        t.close()
    assert _observe.observer is None


@pytest.fixture(autouse=True)
def _disconnect():
    yield
    while _MADE:
        _MADE.pop().disconnect()


def qname():
    return "/queue/%s%s" % (PREFIX, uuid.uuid4().hex[:10])


def stomp12(broker, listener=None, username=None, password=None):
    conn = amqstomp.Connection12(broker.host_and_ports)
    _MADE.append(conn)
    if listener is not None:
        conn.set_listener("rec", listener)
    conn.connect(username, password, wait=True, timeout=15)
    return conn


class Acking:
    """A stomp.py listener that records each MESSAGE and, with ``conn``, ACKs it."""

    def __init__(self, conn=None):
        self.conn = conn
        self.frames = []

    def on_message(self, frame):
        self.frames.append(frame)
        if self.conn is not None:
            self.conn.ack(frame.headers["ack"])


def test_stomppy_send_process_and_individual_acks_are_spans_of_one_trace(activemq, telemetry):
    t = telemetry()
    q = qname()
    producer = stomp12(activemq)
    for i in range(3):
        producer.send(q, "m%d" % i, headers={"correlation-id": "c%d" % i})
    listener = Acking()
    consumer = stomp12(activemq, listener)
    listener.conn = consumer
    consumer.subscribe(q, id="s1", ack="client-individual")
    assert wait_until(lambda: len(t.spans(SpanKind.CLIENT, "settle")) == 3, 15)

    sends = t.spans(SpanKind.PRODUCER)
    assert [s.name for s in sends] == ["%s publish" % q] * 3
    port = activemq.host_and_ports[0][1]
    for span in sends:
        assert span.attributes["messaging.system"] == "activemq"
        assert span.attributes["messaging.destination.name"] == q
        assert span.attributes["messaging.operation"] == "publish"
        assert span.attributes["server.address"] == "127.0.0.1" and span.attributes["server.port"] == port
    assert [s.attributes["messaging.message.conversation_id"] for s in sends] == ["c0", "c1", "c2"]
    processes = t.spans(SpanKind.CONSUMER)
    assert [s.name for s in processes] == ["%s deliver" % q] * 3
    send_ids = [s.context.span_id for s in sends]
    for i, (span, frame) in enumerate(zip(processes, listener.frames)):
        # the default policy: a process span is the child of the send span the message carries
        assert span.parent is not None and span.parent.span_id == send_ids[i]
        assert span.context.trace_id == sends[i].context.trace_id
        assert span.attributes["messaging.message.id"] == frame.headers["message-id"]
        assert span.attributes["messaging.destination.subscription.name"] == "s1"
        assert span.attributes["messaging.message.conversation_id"] == "c%d" % i
        assert "traceparent" in frame.headers  # carried as a STOMP header
    settles = t.spans(SpanKind.CLIENT, "settle")
    assert [s.name for s in settles] == ["%s settle" % q] * 3
    for settle, process in zip(settles, processes):  # acked in the listener: a child of its process span
        assert settle.parent.span_id == process.context.span_id
        assert settle.attributes["messaging.batch.message_count"] == 1
        assert settle.attributes["messaging.destination.subscription.name"] == "s1"

    assert t.total("messaging.client.sent.messages", **{"messaging.destination.name": q}) == 3
    assert t.total("messaging.client.consumed.messages", **{"messaging.destination.name": q}) == 3
    assert t.total("messaging.process.duration", **{"messaging.destination.name": q}) >= 0
    assert sum(p.count for p in t.points("messaging.process.duration")
               if p.attributes.get("messaging.destination.name") == q) == 3
    assert t.total("amqstomp.client.ack.batch.size", **{"messaging.destination.name": q}) == 3


def test_a_batched_optimized_ack_is_one_settle_span_with_its_count(activemq, telemetry):
    t = telemetry()
    q = qname()
    count = 40
    producer = stomp12(activemq)
    for i in range(count):
        producer.send(q, "m%d" % i)
    listener = Acking()
    consumer = stomp12(activemq, listener)
    consumer.subscribe(q, id="b1", ack="client", optimize_acknowledge=True, prefetch_size=20)
    assert wait_until(lambda: len(listener.frames) == count, 15)
    consumer.unsubscribe(id="b1")  # the ACK of what the last batch left
    assert wait_until(lambda: sum(s.attributes.get("messaging.batch.message_count", 0)
                                  for s in t.spans(SpanKind.CLIENT, "settle")) == count, 10)
    settles = t.spans(SpanKind.CLIENT, "settle")
    assert 1 < len(settles) < count  # batches: one span per ACK frame
    assert all(s.attributes["messaging.batch.message_count"] > 1 for s in settles[:-1])
    assert t.total("amqstomp.client.ack.batch.size") == count
    assert sum(p.count for p in t.points("amqstomp.client.ack.batch.size")) == len(settles)
    assert t.total("messaging.client.consumed.messages", **{"messaging.destination.name": q}) == count


def test_a_send_the_broker_refuses_ends_its_span_with_the_error_and_the_reason(activemq, telemetry):
    t = telemetry()
    errors = []

    class Errors:
        def on_error(self, frame):
            errors.append(frame)

    conn = stomp12(activemq, Errors())
    # an unknown transaction: the broker answers ERROR (the stomp.py API's send() refuses it up front,
    # the transport's send_frame writes it)
    conn.transport.send_frame("SEND", {"destination": qname(), "transaction": "nope", "receipt": "bad"}, b"x")
    assert wait_until(lambda: errors and t.spans(SpanKind.PRODUCER), 10)
    send, = t.spans(SpanKind.PRODUCER)
    assert send.attributes["error.type"] == "BrokerError"
    assert not send.status.is_ok and errors[0].headers["message"] in send.status.description
    assert t.total("messaging.client.sent.messages", **{"error.type": "BrokerError"}) == 1


def test_connect_spans_and_the_connection_metrics(activemq, tcp_proxy_factory, telemetry):
    t = telemetry()
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    conn = stomp12(proxy)
    assert t.total("amqstomp.client.connections", **{"amqstomp.reconnect": False}) == 1
    assert proxy.cut() == 1  # the socket is lost: the client did not close it
    assert wait_until(lambda: t.total("amqstomp.client.connection.losses") == 1, 10)
    assert wait_until(lambda: not conn.is_connected(), 10)
    conn.connect(wait=True, timeout=15)  # the same connection, a new socket
    assert t.total("amqstomp.client.connections", **{"amqstomp.reconnect": True}) == 1
    assert sum(p.count for p in t.points("amqstomp.client.disconnected.duration")) == 1
    connects = [s for s in t.exporter.get_finished_spans() if s.name == "connect"]
    assert len(connects) == 2 and all(s.parent is None for s in connects)
    assert connects[0].attributes["amqstomp.reconnect"] is False
    assert connects[1].attributes["amqstomp.reconnect"] is True
    assert connects[1].attributes["server.port"] == proxy.address[1]
    assert [e.name for e in connects[1].events] == ["amqstomp.link_lost"]


def test_the_prefetch_and_unacknowledged_gauges(activemq, telemetry):
    t = telemetry()
    q = qname()
    producer = stomp12(activemq)
    for i in range(6):
        producer.send(q, "g%d" % i)
    listener = Acking()
    consumer = stomp12(activemq, listener)
    # amqstomp's batched ACKs, the batch (65 of 100) and its clocks out of reach: six consumed, none acked
    consumer.subscribe(q, id="g1", ack="client", optimize_acknowledge=True, prefetch_size=100,
                       optimize_acknowledge_timeout_ms=600_000, idle_ack_ms=600_000)
    assert wait_until(lambda: len(listener.frames) == 6, 15)

    def gauge(name):
        return [p.value for p in t.points(name) if p.attributes.get("messaging.destination.subscription.name")
                == "g1"]
    assert wait_until(lambda: gauge("amqstomp.client.unacknowledged.messages") == [6], 5)
    assert gauge("amqstomp.client.prefetched.messages") == [0]
    assert gauge("amqstomp.client.prefetch.credit") == [94]  # 100 - the six delivered, not acked
    consumer.unsubscribe(id="g1")  # ACKs the six, ends the subscription: no more points of it
    assert gauge("amqstomp.client.unacknowledged.messages") == []
    assert gauge("amqstomp.client.prefetch.credit") == []


@pytest.mark.compiled_pass_only  # a full broker's flow control and the blocked time: broker behaviour, timers
@pytest.mark.timeout(150)
def test_the_time_a_jms_send_is_blocked_by_producer_flow_control(activemq_factory, telemetry):
    """ActiveMQ with a 1 MB memory limit holds the RECEIPTs of a full producer window back:
    the send waits (on_usage_full tells), a consumer drains the queue, the send goes on;
    the wait is one point (or more) of amqstomp.client.producer.blocked.duration."""
    broker = activemq_factory(memory_limit="1 mb", producer_flow_control=True)
    t = telemetry()
    queue = Queue(qname())
    total, full = 300, threading.Event()  # 3 MB of 10 kB messages: three times the memory limit
    factory = ConnectionFactory(broker.url, producer_window_size=256 * 1024)
    with factory.create_connection() as conn:
        conn.set_usage_listener(lambda e: full.set(), lambda e: None)
        producer = conn.create_session().create_producer(queue)
        sent = []

        def produce():
            for i in range(total):
                producer.send(BytesMessage(b"x" * 10000), delivery_mode=NON_PERSISTENT)
                sent.append(i)
        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        assert full.wait(30), "on_usage_full never came"
        time.sleep(1.0)
        assert thread.is_alive() and len(sent) < total  # blocked on the window
        consumer = conn.create_session().create_consumer(queue)
        conn.start()
        got, deadline = 0, time.monotonic() + 60
        while got < total and time.monotonic() < deadline:
            if consumer.receive(2) is not None:
                got += 1
        assert got == total
        thread.join(10)
        assert len(sent) == total
    points = t.points("amqstomp.client.producer.blocked.duration")
    assert sum(p.count for p in points) >= 1
    assert sum(p.sum for p in points) >= 1.0  # it waited on_usage_full's 1 s, and the second above
    assert all(p.attributes["messaging.system"] == "activemq" for p in points)


class Failing:
    """A stomp.py listener / JMS MessageListener that raises for every message it is handed."""

    def __init__(self):
        self.handed = 0

    def on_message(self, message):
        self.handed += 1
        raise RuntimeError("listener failed (a test)")

    __call__ = on_message  # a JMS MessageListener is a callable


#: the poison WARNING of maximum_redeliveries=2: the delivery and two redeliveries, then given up
POISONED_AFTER_2 = "delivered 3 times (1 + 2 redeliveries, maximumRedeliveries=2)"


def test_stomppy_local_redeliveries_then_poison_are_told_apart_from_the_brokers(activemq, telemetry, caplog):
    t = telemetry()
    q = qname()
    stomp12(activemq).send(q, "fails")
    listener = Failing()
    consumer = stomp12(activemq, listener)
    consumer.subscribe(q, id="r1", ack="client", optimize_acknowledge=True,  # amqstomp ACKs: its policy applies
                       redelivery_policy=RedeliveryPolicy(maximum_redeliveries=2, initial_redelivery_delay_ms=10))
    assert wait_until(lambda: t.total("amqstomp.client.poisoned.messages") == 1, 15)
    assert listener.handed == 3  # the delivery, two local redeliveries
    poisoned, = [r for r in caplog.records if "poisoned" in r.getMessage()]
    assert poisoned.levelname == "WARNING" and POISONED_AFTER_2 in poisoned.getMessage()
    assert t.total("amqstomp.client.redelivered.messages", **{"amqstomp.redelivery.source": "local"}) == 2
    assert t.total("amqstomp.client.redelivered.messages", **{"amqstomp.redelivery.source": "broker"}) == 0
    local = [s for s in t.spans(SpanKind.CONSUMER) if s.attributes.get("amqstomp.redelivery.source") == "local"]
    assert len(local) == 2


def test_jms_local_redeliveries_then_poison_are_told_apart_from_the_brokers(activemq, telemetry, caplog):
    t = telemetry()
    queue = Queue(qname())
    factory = ConnectionFactory(activemq.url, maximum_redeliveries=2, initial_redelivery_delay_ms=0)
    listener = Failing()
    with factory.create_connection() as conn:
        session = conn.create_session()  # AUTO_ACKNOWLEDGE: a MessageListener that raises gets it again
        session.create_consumer(queue).set_message_listener(listener)
        conn.start()
        session.create_producer(queue).send(TextMessage("fails"))
        assert wait_until(lambda: t.total("amqstomp.client.poisoned.messages") == 1, 15)
    assert listener.handed == 3
    # (it said "after 3 redeliveries": there were two)
    poisoned, = [r for r in caplog.records if "poisoned" in r.getMessage()]
    assert poisoned.levelname == "WARNING" and POISONED_AFTER_2 in poisoned.getMessage()
    assert t.total("amqstomp.client.redelivered.messages", **{"amqstomp.redelivery.source": "local"}) == 2
    assert t.total("amqstomp.client.redelivered.messages", **{"amqstomp.redelivery.source": "broker"}) == 0


def test_a_suppressed_duplicate_is_counted(activemq, tcp_proxy_factory, telemetry):
    """checkForDuplicates: the broker's redelivery of a message the JMS consumer had consumed
    (AUTO_ACKNOWLEDGE; its batched ACK stalled, then the socket cut) is not handed over and is
    counted in amqstomp.client.duplicate.messages."""
    t = telemetry()
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    queue = Queue(qname())
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        feeder.create_session().create_producer(queue).send(TextMessage("t0"), delivery_mode=NON_PERSISTENT)
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100&jms.checkForDuplicates=true" \
        % proxy.address
    with ConnectionFactory(url, heartbeats=(1000, 1000)).create_connection(timeout_s=15) as conn:
        consumer = conn.create_session().create_consumer(queue)
        conn.start()
        assert wait_until(lambda: len(consumer._buffer) == 1, 10)  # prefetched: the path can stall first
        transport = conn._state.consumer_link.transport
        seq = transport.link_seq
        proxy.stall()
        assert consumer.receive(5) is not None  # its ACK goes into the stalled path
        time.sleep(0.3)
        assert proxy.cut() >= 1
        proxy.unstall()
        assert wait_until(lambda: transport.is_connected() and transport.link_seq != seq, 15)
        assert consumer.receive(5) is None
    assert t.total("amqstomp.client.duplicate.messages", **{"messaging.system": "activemq"}) == 1


def test_a_transaction_commit_span_counts_its_sends(activemq, telemetry):
    t = telemetry()
    q = qname()
    conn = stomp12(activemq)
    tx = conn.begin()
    for i in range(3):
        conn.send(q, "t%d" % i, transaction=tx)
    conn.commit(tx)
    tx = conn.begin()
    conn.send(q, "gone", transaction=tx)
    conn.abort(tx)
    assert wait_until(lambda: len(t.spans(SpanKind.CLIENT)) == 2, 10)
    commit, abort = t.spans(SpanKind.CLIENT)
    assert commit.name == "commit" and commit.attributes["messaging.batch.message_count"] == 3
    assert abort.name == "abort" and abort.attributes["messaging.batch.message_count"] == 1


def test_jms_listener_receive_and_client_acknowledge(activemq, telemetry):
    t = telemetry()
    q = Queue(qname()[len("/queue/"):])
    destination = "/queue/" + q.name
    factory = ConnectionFactory(activemq.url)
    with factory.create_connection() as connection:
        connection.start()
        session = connection.create_session()
        producer = session.create_producer(q)
        for i in range(4):
            message = TextMessage("j%d" % i)
            message.correlation_id = "jc%d" % i
            producer.send(message)
        pull_session = connection.create_session(acknowledge_mode=CLIENT_ACKNOWLEDGE)
        pull = pull_session.create_consumer(q)
        received = [pull.receive(10) for _ in range(2)]
        assert all(m is not None for m in received)
        pull_session.acknowledge()  # one cumulative ACK of both
        pull_sub = pull.subscription_id
        pull.close()
        got = []
        pushed = session.create_consumer(q)
        push_sub = pushed.subscription_id
        pushed.set_message_listener(got.append)
        assert wait_until(lambda: len(got) == 2, 15)
        assert wait_until(lambda: len(t.spans(SpanKind.CONSUMER, "deliver")) == 2, 5)

    sends = t.spans(SpanKind.PRODUCER)
    assert len(sends) == 4 and all(s.attributes["messaging.destination.name"] == destination for s in sends)
    by_trace = {s.context.trace_id: s for s in sends}
    receives = t.spans(name_part="receive")
    assert len(receives) == 2
    for span in receives:  # v1.24: CONSUMER; the caller's context is its parent, the creation context a link
        assert span.kind == SpanKind.CONSUMER
        assert span.links and span.links[0].context.span_id in {s.context.span_id for s in sends}
    processes = t.spans(SpanKind.CONSUMER, "deliver")
    for span in processes:  # a MessageListener's span: the child of the send span
        assert span.parent.span_id == by_trace[span.context.trace_id].context.span_id
    def settled(sub_id):
        return [s.attributes.get("messaging.batch.message_count") for s in t.spans(SpanKind.CLIENT, "settle")
                if s.attributes.get("messaging.destination.subscription.name") == sub_id]
    assert settled(pull_sub) == [2]  # Session.acknowledge(): one ACK frame, two messages
    assert sum(settled(push_sub)) == 2  # AUTO_ACKNOWLEDGE: amqstomp's batched ACKs
    assert t.total("messaging.client.consumed.messages") == 4
    assert t.total("messaging.client.sent.messages") == 4


def test_the_opt_in_switch_gives_the_current_names(activemq, telemetry, monkeypatch):
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http,messaging")
    t = telemetry(process_context=LINK)
    q = qname()
    producer = stomp12(activemq)
    producer.send(q, "new")
    consumer = stomp12(activemq, Acking())
    consumer.subscribe(q, id="n1", ack="auto")
    assert wait_until(lambda: t.spans(SpanKind.CONSUMER), 15)
    send, = t.spans(SpanKind.PRODUCER)
    assert send.name == "send %s" % q
    assert send.attributes["messaging.operation.type"] == "send"
    assert send.attributes["messaging.operation.name"] == "send"
    assert "messaging.operation" not in send.attributes
    process, = t.spans(SpanKind.CONSUMER)
    assert process.name == "process %s" % q and process.attributes["messaging.operation.type"] == "process"
    # LINK: not the send span's child; linked to it
    assert process.parent is None or process.parent.span_id != send.context.span_id
    assert process.links[0].context.span_id == send.context.span_id


def test_dup_gives_both_names(activemq, telemetry):
    t = telemetry(semconv="messaging/dup")
    q = qname()
    stomp12(activemq).send(q, "dup")
    assert wait_until(lambda: t.spans(SpanKind.PRODUCER), 5)
    send, = t.spans(SpanKind.PRODUCER)
    assert send.name == "send %s" % q
    assert send.attributes["messaging.operation"] == "publish"
    assert send.attributes["messaging.operation.type"] == "send"


def test_a_users_traceparent_header_is_not_overwritten(activemq, telemetry):
    t = telemetry(semconv=NEW)
    q = qname()
    mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    producer = stomp12(activemq)
    producer.send(q, "own", headers={"traceparent": mine})
    listener = Acking()
    consumer = stomp12(activemq, listener)
    consumer.subscribe(q, id="u1", ack="auto")
    assert wait_until(lambda: listener.frames, 15)
    assert listener.frames[0].headers["traceparent"] == mine
    assert wait_until(lambda: t.spans(SpanKind.CONSUMER), 5)
    process, = t.spans(SpanKind.CONSUMER)
    assert format(process.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert format(process.parent.span_id, "016x") == "b7ad6b7169203331"


def test_uninstrument_stops_the_spans(activemq, telemetry):
    t = telemetry()
    q = qname()
    producer = stomp12(activemq)
    producer.send(q, "one")
    assert len(t.spans(SpanKind.PRODUCER)) == 1
    t.instrumentor.uninstrument()
    assert _observe.observer is None
    producer.send(q, "two", headers={"receipt": "r2"})
    producer.wait_for_receipt("r2", timeout=10) if hasattr(producer, "wait_for_receipt") else None
    assert len(t.spans(SpanKind.PRODUCER)) == 1
    listener = Acking()
    stomp12(activemq, listener).subscribe(q, id="x", ack="auto")
    assert wait_until(lambda: len(listener.frames) == 2, 15)
    assert "traceparent" not in listener.frames[1].headers
    assert t.spans(SpanKind.CONSUMER) == []


def test_rabbitmq_is_the_messaging_system(rabbitmq, telemetry):
    t = telemetry()
    q = qname()
    conn = stomp12(rabbitmq, username=rabbitmq.username, password=rabbitmq.password)
    conn.send(q, "r", headers={"receipt": "rr"})
    assert wait_until(lambda: t.spans(SpanKind.PRODUCER), 10)
    send, = t.spans(SpanKind.PRODUCER)
    assert send.attributes["messaging.system"] == "rabbitmq"
    assert send.status.is_ok
    rabbitmq.delete_queues(PREFIX)


def test_nothing_of_opentelemetry_is_imported_when_not_instrumented(activemq):
    code = (
        "import sys, amqstomp, amqstomp.jms\n"
        "from amqstomp import _observe\n"
        "c = amqstomp.Connection12(%r)\n"
        "c.connect(wait=True, timeout=15)\n"
        "c.send('/queue/%snoimport', 'x', headers={'receipt': 'r'})\n"
        "c.disconnect()\n"
        "assert _observe.observer is None\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "assert not loaded, loaded\n"
        "print('clean')\n" % (activemq.host_and_ports, PREFIX))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, OTEL_SEMCONV_STABILITY_OPT_IN=""))
    assert result.returncode == 0 and "clean" in result.stdout, result.stderr


def test_a_settle_count_applies_only_to_the_ack_of_its_message():
    """In memory: a count given for one message never labels another ACK (one whose
    write failed before the observer saw it leaves a stale count behind)."""
    _observe.settling(5, {"ack": "a5", "message-id": "m5"})
    assert _observe.settled_count({"id": "other"}) is None
    assert _observe.settled_count({"id": "a5"}) is None  # read once
    _observe.settling(3, {"ack": "a3", "message-id": "m3"})
    assert _observe.settled_count({"id": "a3"}) == 3
    _observe.settling(2, {"message-id": "m2"})  # STOMP 1.0/1.1: the ACK names the message-id
    assert _observe.settled_count({"message-id": "m2", "subscription": "s"}) == 2


def test_opentelemetry_instrument_finds_the_instrumentor_by_its_entry_point():
    from importlib.metadata import entry_points

    eps = entry_points()
    group = eps.select(group="opentelemetry_instrumentor") if hasattr(eps, "select") else \
        eps.get("opentelemetry_instrumentor", [])  # Python 3.9
    found = [ep for ep in group if ep.name == "amqstomp"]
    assert len(found) == 1 and found[0].load() is AmqstompInstrumentor
    assert AmqstompInstrumentor().instrumentation_dependencies() == ("amqstomp >= 0.1",)


def test_a_failing_instrumentation_never_fails_a_send_or_a_delivery(activemq, telemetry, monkeypatch, caplog):
    t = telemetry()

    def broken(*args, **kwargs):
        raise RuntimeError("a broken tracer")
    monkeypatch.setattr(_observe.observer.tracer, "start_span", broken)
    q = qname()
    stomp12(activemq).send(q, "still sent", headers={"receipt": "r"})
    listener = Acking()
    consumer = stomp12(activemq, listener)
    listener.conn = consumer
    consumer.subscribe(q, id="f", ack="client-individual")
    assert wait_until(lambda: len(listener.frames) == 1, 15)
    assert listener.frames[0].body == "still sent"
    assert t.spans(SpanKind.PRODUCER) == [] and t.spans(SpanKind.CONSUMER) == []
    assert "not observed" in caplog.text and "process span not made" in caplog.text


def test_without_an_sdk_messages_pass_unobserved_until_one_is_set(activemq):
    """instrument() before any SDK (the API's placeholder providers): a message's spans would be
    dropped anyway, and making them cost ~45,000 instructions a message; message operations go
    unobserved (the hot paths see no observer) until a watcher thread sees real providers, then
    for good; the thread ends then."""
    code = (
        "import threading, time, amqstomp\n"
        "from amqstomp import _observe\n"
        "from amqstomp.otel import SDK_WATCH_S, AmqstompInstrumentor\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "AmqstompInstrumentor().instrument()\n"
        "assert _observe.observer is not None and _observe.messages is None\n"
        "c = amqstomp.Connection12(%r)\n"
        "c.connect(wait=True, timeout=15)\n"
        "for i in range(100):\n"
        "    c.send('/queue/%snosdk', 'x')\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "assert not [s for s in exporter.get_finished_spans()]\n"
        "trace.set_tracer_provider(provider)\n"
        "deadline = time.monotonic() + SDK_WATCH_S * 10\n"
        "while _observe.messages is None and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "assert _observe.messages is _observe.observer\n"
        "for i in range(10):\n"
        "    c.send('/queue/%snosdk', 'x')\n"
        "c.disconnect()\n"
        "sends = [s for s in exporter.get_finished_spans() if s.kind == trace.SpanKind.PRODUCER]\n"
        "assert len(sends) == 10, len(sends)\n"
        "assert not [t for t in threading.enumerate() if t.name == 'amqstomp-otel-sdk-watch']\n"
        "print('observed', len(sends))\n" % (activemq.host_and_ports, PREFIX, PREFIX))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, OTEL_SEMCONV_STABILITY_OPT_IN=""))
    assert result.returncode == 0 and "observed" in result.stdout, result.stdout + result.stderr
