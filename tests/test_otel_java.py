"""Trace context between amqstomp and a Java JMS client over ActiveMQ (issue 25's interop).

The OpenTelemetry Java agent's JMS instrumentation reads and writes W3C context as the JMS
string properties ``traceparent``/``tracestate``; ActiveMQ maps a STOMP SEND header to a JMS
property and a JMS property to a MESSAGE header. A small Java program
(``tests/java/TraceProperties.java``, ActiveMQ's OpenWire client from Debian's ActiveMQ)
stands for a Java service: it prints the ``traceparent`` property of the message it receives,
or sends a message carrying one, as the agent would.

* Python -> Java: the property the Java consumer sees names the trace and the span of the
  Python producer's send span.
* Java -> Python: the Python process span of the Java message is that context's child.
"""
import os
import subprocess
import uuid

import pytest
from conftest import wait_until

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

import amqstomp  # noqa: E402
from amqstomp.otel import AmqstompInstrumentor  # noqa: E402
from amqstomp.testing import ActiveMQBroker, BrokerNotAvailable  # noqa: E402

pytestmark = pytest.mark.timeout(180)

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "TraceProperties.java")
JAVA_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    """``fn(*args) -> CompletedProcess``: the compiled TraceProperties run in a JVM."""
    from bench import _java  # the suite's way to find a JDK and ActiveMQ's client jars

    why_not = _java.available()
    if why_not is not None:
        pytest.skip(why_not)
    javac, java_bin = _java.java_tools()
    classpath = _java.client_classpath()
    classes = str(tmp_path_factory.mktemp("trace-properties"))
    compiled = subprocess.run([javac, "-nowarn", "-d", classes, "-cp", os.pathsep.join(classpath), SOURCE],
                              capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    path = os.pathsep.join([classes] + classpath)

    def run(*args):
        return subprocess.run([java_bin, "-cp", path, "TraceProperties"] + [str(a) for a in args],
                              capture_output=True, text=True, timeout=JAVA_TIMEOUT_S)
    return run


@pytest.fixture(scope="module")
def broker():
    """An ActiveMQ with an OpenWire connector beside STOMP, for this module."""
    try:
        ActiveMQBroker.require()
    except BrokerNotAvailable as exc:
        pytest.skip(str(exc))
    started = ActiveMQBroker(openwire=True)
    started.start(wait=True)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = AmqstompInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    yield exporter
    instrumentor.uninstrument()


def test_a_python_send_span_is_the_traceparent_a_java_consumer_gets(broker, java, spans):
    name = "amqstomp-otel-java-%s" % uuid.uuid4().hex[:8]
    conn = amqstomp.Connection12(broker.host_and_ports)
    conn.connect(wait=True, timeout=15)
    try:
        conn.send("/queue/" + name, "to java", headers={"receipt": "sent"})
    finally:
        conn.disconnect()
    send, = [s for s in spans.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    got = java("consume", broker.openwire_url, name, 30000)
    assert got.returncode == 0, got.stdout + got.stderr
    line, = [x for x in got.stdout.splitlines() if x.startswith("traceparent=")]
    version, trace_id, span_id, flags = line[len("traceparent="):].split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled (this SDK also sets W3C's "random" bit, 02)
    assert trace_id == format(send.context.trace_id, "032x")
    assert span_id == format(send.context.span_id, "016x")


def test_a_java_traceparent_parents_the_python_process_span(broker, java, spans):
    name = "amqstomp-otel-java-%s" % uuid.uuid4().hex[:8]
    trace_id, span_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    sent = java("produce", broker.openwire_url, name, "00-%s-%s-01" % (trace_id, span_id))
    assert sent.returncode == 0, sent.stdout + sent.stderr
    frames = []

    class Listener:
        def on_message(self, frame):
            frames.append(frame)

    conn = amqstomp.Connection12(broker.host_and_ports)
    conn.set_listener("rec", Listener())
    conn.connect(wait=True, timeout=15)
    try:
        conn.subscribe("/queue/" + name, id="j", ack="auto")
        assert wait_until(lambda: frames, 20)
        assert wait_until(lambda: [s for s in spans.get_finished_spans() if s.kind == SpanKind.CONSUMER], 5)
    finally:
        conn.disconnect()
    assert frames[0].headers["traceparent"] == "00-%s-%s-01" % (trace_id, span_id)  # the property, as a header
    process, = [s for s in spans.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert format(process.context.trace_id, "032x") == trace_id
    assert format(process.parent.span_id, "016x") == span_id
    assert process.parent.is_remote
