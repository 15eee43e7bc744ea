"""Draw the spans amqstomp.otel emits for a small real scenario as a timeline (docs/images/trace-timeline.png).

The scenario, against a local ActiveMQ (:class:`amqstomp.testing.ActiveMQBroker`, 127.0.0.1):
a producer sends three messages, then two more in a transaction (BEGIN, SEND, SEND,
COMMIT); a consumer with ``ack:client-individual`` ACKs each of the first queue's
messages itself; a second subscription with ``optimize_acknowledge`` takes six
messages of another queue, settled by amqstomp's batched cumulative ACKs. The
spans go to the OpenTelemetry SDK's ``InMemorySpanExporter``; the picture has one
row per span (children indented under their parent, a process span under the send
span whose context its MESSAGE carried), bars coloured by span kind, time in ms
from the first span's start.

Run from the repository (needs the ``otel`` and ``bench`` extras: the SDK and matplotlib)::

    .venv/bin/python docs/trace_timeline.py [OUTPUT.png]

Licensed under the Apache License, Version 2.0.
"""
import os
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

import matplotlib

matplotlib.use("Agg")  # no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

import amqstomp  # noqa: E402
from amqstomp.otel import AmqstompInstrumentor  # noqa: E402
from amqstomp.testing import ActiveMQBroker  # noqa: E402

DEFAULT_OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images", "trace-timeline.png")
COLOURS = {SpanKind.PRODUCER: "#1f77b4", SpanKind.CONSUMER: "#2ca02c", SpanKind.CLIENT: "#ff7f0e",
           SpanKind.INTERNAL: "#7f7f7f", SpanKind.SERVER: "#9467bd"}
WAIT_S = 15.0  # every wait of the scenario is bounded by this


class _Recorder:
    """A stomp.py listener: counts the MESSAGEs, ACKs each one when given a connection."""

    def __init__(self, conn: Optional[Any] = None) -> None:
        self.conn = conn
        self.count = 0
        self.done = threading.Condition()

    def on_message(self, frame: Any) -> None:
        if self.conn is not None:
            self.conn.ack(frame.headers["ack"])
        with self.done:
            self.count += 1
            self.done.notify_all()

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        with self.done:
            while self.count < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("%d of %d messages within %.0f s" % (self.count, count, WAIT_S))
                self.done.wait(left)


def run_scenario(broker: ActiveMQBroker) -> None:
    """The producer, the transaction and the two consumers (see the module docstring)."""
    run = uuid.uuid4().hex[:6]
    acked, batched = "/queue/timeline-acked-" + run, "/queue/timeline-batched-" + run
    producer = amqstomp.Connection12(broker.host_and_ports)
    producer.connect(wait=True, timeout=WAIT_S)
    for i in range(3):
        producer.send(acked, "m%d" % i)
    tx = producer.begin()
    producer.send(acked, "t0", transaction=tx)
    producer.send(acked, "t1", transaction=tx)
    producer.commit(tx)
    for i in range(6):
        producer.send(batched, "b%d" % i, headers={"receipt": "r%d" % i} if i == 5 else None)
    producer.wait_for_receipt("r5", WAIT_S)

    consumer = amqstomp.Connection12(broker.host_and_ports)
    own_acks = _Recorder(consumer)
    consumer.set_listener("acks", own_acks)
    consumer.connect(wait=True, timeout=WAIT_S)
    consumer.subscribe(acked, id="acked", ack="client-individual")
    own_acks.wait_for(5)
    consumer.unsubscribe(id="acked")
    consumer.remove_listener("acks")
    batch = _Recorder()
    consumer.set_listener("batch", batch)
    # amqstomp ACKs the six with one cumulative ACK (its batch is 65 % of the prefetch: 6 of 10)
    consumer.subscribe(batched, id="batched", ack="client", optimize_acknowledge=True, prefetch_size=10,
                       optimize_acknowledge_timeout_ms=60_000, idle_ack_ms=60_000)
    batch.wait_for(6)
    consumer.unsubscribe(id="batched")
    consumer.disconnect()
    producer.disconnect()


def _rows(spans: List[ReadableSpan]) -> List[Tuple[ReadableSpan, int]]:
    """The spans in tree order (each parent followed by its children, by start time), with their depth."""
    by_id = {span.context.span_id: span for span in spans}
    children: Dict[Optional[int], List[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in by_id else None
        children.setdefault(parent, []).append(span)
    rows: List[Tuple[ReadableSpan, int]] = []
    stack: List[Tuple[ReadableSpan, int]] = [(s, 0) for s in sorted(children.get(None, []),
                                                                    key=lambda s: s.start_time or 0, reverse=True)]
    while stack:
        span, depth = stack.pop()
        rows.append((span, depth))
        for child in sorted(children.get(span.context.span_id, []), key=lambda s: s.start_time or 0, reverse=True):
            stack.append((child, depth + 1))
    return rows


def draw(spans: List[ReadableSpan], output: str) -> None:
    """Draw ``spans`` as a timeline PNG at ``output``."""
    rows = _rows(spans)
    origin = min(span.start_time or 0 for span in spans)
    total_ms = (max(span.end_time or 0 for span in spans) - origin) / 1e6
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(rows) + 1.6))
    labels = []
    for y, (span, depth) in enumerate(rows):
        start = ((span.start_time or origin) - origin) / 1e6
        width = max(((span.end_time or span.start_time or origin) - (span.start_time or origin)) / 1e6,
                    total_ms / 400)  # a span too short to see still shows
        ax.barh(y, width, left=start, height=0.6, color=COLOURS.get(span.kind, "#000000"))
        count = (span.attributes or {}).get("messaging.batch.message_count")
        labels.append("   " * depth + ("└ " if depth else "") + span.name
                      + (" (%d message%s)" % (count, "s" if count > 1 else "") if count else ""))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8, family="monospace")
    widest = max(len(label) for label in labels)
    for label in ax.get_yticklabels():  # left-aligned, so a child's indent shows
        label.set_horizontalalignment("left")
    ax.tick_params(axis="y", pad=widest * 8 * 0.6 + 4)  # monospace 8 pt: a character is ~0.6 x 8 pt wide
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top
    ax.set_xlabel("ms since the first span started")
    ax.set_title("amqstomp.otel spans: a producer, a transaction, two consumers (ActiveMQ)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    kinds = sorted({span.kind for span in spans}, key=lambda k: k.value)
    ax.legend(handles=[Patch(color=COLOURS[k], label=k.name) for k in kinds], loc="upper center", ncol=3, fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)


def main(argv: List[str]) -> int:
    output = argv[1] if len(argv) > 1 else DEFAULT_OUTPUT
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = AmqstompInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with ActiveMQBroker() as broker:
            run_scenario(broker)
    finally:
        instrumentor.uninstrument()
    spans = list(exporter.get_finished_spans())
    draw(spans, output)
    print("%d spans drawn to %s" % (len(spans), output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
