"""``amqstomp demo``: a producer, a local ActiveMQ and a consumer.

It starts a local ActiveMQ (Debian's ``activemq`` package, see
:mod:`amqstomp.testing`), sends N messages through it and consumes them with
client acknowledgement (optimizeAcknowledge), showing progress, then prints
sent / received / lost, the broker's own counters and the rates. Exit status
0 only when nothing was lost; 1 when something was; 2 when ActiveMQ is not
installed or does not start (its reason printed in a few lines).
"""
import argparse
import logging
import sys
import threading
import time
from typing import Any, Dict, Sequence, TextIO, Tuple

import amqstomp

log = logging.getLogger("amqstomp.cli.demo")


class _Progress:
    """One status line, rewritten in place (plain lines when not a terminal)."""

    def __init__(self, total: int, stream: TextIO = sys.stdout) -> None:
        self.total = total
        self.stream = stream
        self.tty = stream.isatty()
        self._last = 0.0

    def show(self, sent: int, received: int, started: float, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < (0.2 if self.tty else 2.0):
            return
        self._last = now
        elapsed = max(now - started, 1e-9)
        width = 30
        done = int(width * received / self.total) if self.total else width
        line = "[%s%s] sent %7d  received %7d / %d  %8.0f msg/s" % (
            "#" * done, "." * (width - done), sent, received, self.total, received / elapsed)
        if self.tty:
            self.stream.write("\r" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def run_demo(host_and_ports: Sequence[Tuple[str, int]], messages: int, body_size: int, prefetch: int,
             destination: str, timeout: float, out: TextIO = sys.stdout) -> Dict[str, Any]:
    """Send ``messages`` messages to ``destination`` and consume them with
    ``ack:client`` and optimizeAcknowledge: amqstomp acks each batch with one
    cumulative ACK after the listener returned (at-least-once).

    Returns a dict: sent, received (distinct), duplicates, lost, seconds,
    send_rate and receive_rate (messages/s).
    """
    seen = bytearray(messages)
    state = {"received": 0, "duplicates": 0}
    done = threading.Event()
    lock = threading.Lock()

    consumer = amqstomp.Connection12(host_and_ports, auto_decode=False)

    class Counter(amqstomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            seq = int(frame.headers["amqstomp-seq"])
            with lock:
                if seen[seq]:
                    state["duplicates"] += 1
                else:
                    seen[seq] = 1
                    state["received"] += 1
                if state["received"] == messages:
                    done.set()

        def on_error(self, frame: Any) -> None:
            log.error("broker error: %s", frame.headers.get("message"))

    consumer.set_listener("demo", Counter())
    consumer.connect(wait=True)
    consumer.subscribe(destination, id="demo", ack="client", optimize_acknowledge=True,
                       prefetch_size=prefetch, headers={"receipt": "sub-demo"})
    consumer.wait_for_receipt("sub-demo", timeout=10)

    producer = amqstomp.Connection12(host_and_ports)
    producer.connect(wait=True)
    body = b"x" * body_size
    progress = _Progress(messages, out)
    sent = 0
    started = time.monotonic()
    for seq in range(messages):
        headers: Dict[str, Any] = {"amqstomp-seq": seq}
        if seq == messages - 1:
            headers["receipt"] = "last-send"
        producer.send(destination, body, headers=headers)
        sent += 1
        if seq % 1000 == 0:
            progress.show(sent, state["received"], started)
    producer.wait_for_receipt("last-send", timeout=timeout)
    send_seconds = time.monotonic() - started
    deadline = started + timeout
    while not done.wait(0.2):
        progress.show(sent, state["received"], started)
        if time.monotonic() > deadline:
            break
    seconds = time.monotonic() - started
    progress.show(sent, state["received"], started, force=True)
    progress.end()
    producer.disconnect()
    consumer.disconnect()
    received = state["received"]
    return {
        "sent": sent,
        "received": received,
        "duplicates": state["duplicates"],
        "lost": sent - received,
        "seconds": seconds,
        "send_rate": sent / send_seconds if send_seconds else 0.0,
        "receive_rate": received / seconds if seconds else 0.0,
    }


def demo(args: argparse.Namespace) -> int:
    """``amqstomp demo``: the arguments checked by :mod:`amqstomp.cli.tools`."""
    from amqstomp.codec import IMPLEMENTATION
    from amqstomp.testing import ActiveMQBroker, BrokerStartError, queue_statistics

    if not ActiveMQBroker.available():
        print("amqstomp demo: ActiveMQ not found: install Debian's package with `apt-get install -y activemq`",
              file=sys.stderr)
        return 2
    print("amqstomp demo: codec=%s, %d messages of %d bytes, ack:client with optimizeAcknowledge, prefetch %d"
          % (IMPLEMENTATION, args.messages, args.body_size, args.prefetch))
    t0 = time.monotonic()
    broker = ActiveMQBroker(persistent=args.persistent)
    try:
        try:
            broker.start()
        except BrokerStartError as exc:
            print("amqstomp demo: %s" % exc.summary, file=sys.stderr)
            return 2
        print("ActiveMQ started on %s in %.1f s (pid %s)" % (broker.url, time.monotonic() - t0, broker.pid))
        result = run_demo(broker.host_and_ports, args.messages, args.body_size, args.prefetch,
                          args.destination, args.timeout)
        stats = queue_statistics(broker, args.destination.rsplit("/", 1)[-1])
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback; the broker is stopped below
        print("amqstomp demo: interrupted (Ctrl-C); stopping ActiveMQ", file=sys.stderr, flush=True)
        return 130
    finally:
        broker.stop()
    print("broker's view of %s: enqueued %d, dequeued %d, left %d"
          % (args.destination, stats["enqueueCount"], stats["dequeueCount"], stats["size"]))
    print("sent %(sent)d, received %(received)d, lost %(lost)d, duplicates %(duplicates)d" % result)
    print("send rate %.0f msg/s, end-to-end %.0f msg/s (%.2f s)"
          % (result["send_rate"], result["receive_rate"], result["seconds"]))
    return 0 if result["lost"] == 0 and stats["size"] == 0 else 1
