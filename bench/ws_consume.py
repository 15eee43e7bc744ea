"""bench/ws_consume: amqstomp's consume rate over WebSocket against plain TCP, same broker, same run.

Debian's ActiveMQ has no ws:// transport, so the broker is the machine's RabbitMQ: its
``rabbitmq_stomp`` plugin (TCP) and ``rabbitmq_web_stomp`` (WebSocket), enabled on
loopback ports by :class:`amqstomp.testing.web_stomp.RabbitMQWebStomp` for the run and
disabled after (when this run enabled it).

Per round and transport (``tcp``: ``amqstomp.Connection12``; ``ws``:
``amqstomp.WSConnection``, text messages): a fresh queue is filled over TCP with
``--count`` messages of ``--size`` bytes (not timed), then one consumer subscribes
(``prefetch_size`` = ``--prefetch``, RabbitMQ's ``prefetch-count``) and consumes them
all; the rate is messages / seconds from the first message to the last, the CPU is this
process's (``time.process_time()``, every thread) over the same span, per message. Ack
modes: ``auto`` and ``optimized`` (``ack="client", optimize_acknowledge=True``: amqstomp
acks in batches); with ``auto`` also stomp.py 9 (its ``Connection12`` and ``WSConnection``,
websocket-client) as the baseline, unless ``--no-stomp-py``. Rounds alternate the transports;
the table gives medians and the
ws / tcp ratio. Every wait has a deadline (``--deadline``); the queues are deleted at the
end (``rabbitmqctl delete_queue``).

Usage::

    python bench/ws_consume.py [--count N] [--size BYTES] [--prefetch N] [--rounds R]
                              [--json [PATH]]
"""
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import amqstomp  # noqa: E402
from amqstomp.testing.web_stomp import RabbitMQWebStomp  # noqa: E402
from bench._common import default_json_path, format_table, machine_info, write_json  # noqa: E402


class _Counter(amqstomp.ConnectionListener):
    def __init__(self, count: int) -> None:
        self.count = count
        self.seen = 0
        self.first = 0.0
        self.cpu_first = 0.0
        self.last = 0.0
        self.cpu_last = 0.0
        self.done = threading.Event()

    def on_message(self, frame: Any) -> None:
        if self.seen == 0:
            self.first, self.cpu_first = time.monotonic(), time.process_time()
        self.seen += 1
        if self.seen == self.count:
            self.last, self.cpu_last = time.monotonic(), time.process_time()
            self.done.set()


def _fill(endpoint: RabbitMQWebStomp, tcp: Tuple[str, int], queue: str, count: int, body: bytes,
          deadline: float) -> None:
    conn = amqstomp.Connection12([tcp], vhost="/")
    conn.connect(endpoint.login, endpoint.passcode, wait=True)
    try:
        for i in range(count):
            conn.send(queue, body, headers={"receipt": "filled"} if i == count - 1 else None)
        conn.wait_for_receipt("filled", timeout=max(1.0, deadline - time.monotonic()))
    finally:
        conn.disconnect()


def _consume(kind: str, endpoint: RabbitMQWebStomp, tcp: Tuple[str, int], queue: str, count: int,
             prefetch: int, ack: str, deadline: float) -> Dict[str, float]:
    if kind.startswith("stomp.py"):  # the baseline: stomp.py 9's own classes (websocket-client for ws)
        import stomp

        if kind.endswith("ws"):
            conn: Any = stomp.WSConnection([(endpoint.host, endpoint.port)], ws_path=endpoint.path, vhost="/",
                                           auto_decode=False)
        else:
            conn = stomp.Connection12([tcp], vhost="/", auto_decode=False)
    elif kind == "ws":
        conn = amqstomp.WSConnection([endpoint.url], vhost="/", auto_decode=False)
    else:
        conn = amqstomp.Connection12([tcp], vhost="/", auto_decode=False)
    counter = _Counter(count)
    conn.set_listener("", counter)
    conn.connect(endpoint.login, endpoint.passcode, wait=True)
    try:
        if kind.startswith("stomp.py"):
            conn.subscribe(queue, id=1, ack="auto", headers={"prefetch-count": prefetch})
        else:
            options = dict(ack="client", optimize_acknowledge=True) if ack == "optimized" else dict(ack="auto")
            conn.subscribe(queue, id=1, prefetch_size=prefetch, **options)
        if not counter.done.wait(max(0.0, deadline - time.monotonic())):
            raise RuntimeError("%s %s: %d of %d messages before the deadline" % (kind, ack, counter.seen, count))
    finally:
        conn.disconnect()
    span = max(counter.last - counter.first, 1e-9)
    return {"msg_s": (count - 1) / span, "cpu_us": (counter.cpu_last - counter.cpu_first) * 1e6 / max(1, count - 1)}


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--prefetch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-stomp-py", dest="stomp_py", action="store_false",
                        help="leave out the stomp.py baseline (ack auto)")
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds per fill or consume")
    parser.add_argument("--json", nargs="?", const=default_json_path("ws_consume"), default=None)
    args = parser.parse_args(argv)
    body = b"x" * args.size
    results: Dict[Tuple[str, str], List[Dict[str, float]]] = {}
    queues: List[str] = []
    with RabbitMQWebStomp() as endpoint:
        tcp = endpoint.stomp_host_and_port
        print("RabbitMQ: STOMP on %s:%d, web-STOMP on %s; %d x %d B, prefetch %d, %d rounds"
              % (tcp[0], tcp[1], endpoint.url, args.count, args.size, args.prefetch, args.rounds))
        try:
            for round_no in range(args.rounds):
                for ack in ("auto", "optimized"):
                    kinds: Tuple[str, ...] = ("tcp", "ws")
                    if ack == "auto" and args.stomp_py:
                        kinds += ("stomp.py-tcp", "stomp.py-ws")
                    if round_no % 2:
                        kinds = kinds[::-1]
                    for kind in kinds:
                        queue = "/queue/amqstomp-bench-ws-%s" % uuid.uuid4().hex[:8]
                        queues.append(queue)
                        _fill(endpoint, tcp, queue, args.count, body, time.monotonic() + args.deadline)
                        result = _consume(kind, endpoint, tcp, queue, args.count, args.prefetch, ack,
                                          time.monotonic() + args.deadline)
                        results.setdefault((ack, kind), []).append(result)
                        print("  round %d %-9s %-3s %8.0f msg/s %6.1f us CPU/msg"
                              % (round_no + 1, ack, kind, result["msg_s"], result["cpu_us"]))
        finally:
            for queue in queues:
                subprocess.run(["rabbitmqctl", "-q", "delete_queue", queue.rsplit("/", 1)[1]],
                               capture_output=True, timeout=60)
    rows = []
    summary = {}
    for ack in ("auto", "optimized"):
        tcp_rate = statistics.median(r["msg_s"] for r in results[(ack, "tcp")])
        ws_rate = statistics.median(r["msg_s"] for r in results[(ack, "ws")])
        tcp_cpu = statistics.median(r["cpu_us"] for r in results[(ack, "tcp")])
        ws_cpu = statistics.median(r["cpu_us"] for r in results[(ack, "ws")])
        summary[ack] = {"tcp_msg_s": tcp_rate, "ws_msg_s": ws_rate, "ratio": ws_rate / tcp_rate,
                        "tcp_cpu_us": tcp_cpu, "ws_cpu_us": ws_cpu}
        rows.append((ack, "%.0f" % tcp_rate, "%.0f" % ws_rate, "%.2f" % (ws_rate / tcp_rate),
                     "%.1f" % tcp_cpu, "%.1f" % ws_cpu))
    if ("auto", "stomp.py-ws") in results:
        base = {k: statistics.median(r["msg_s"] for r in results[("auto", k)]) for k in ("stomp.py-tcp", "stomp.py-ws")}
        cpu = {k: statistics.median(r["cpu_us"] for r in results[("auto", k)]) for k in ("stomp.py-tcp", "stomp.py-ws")}
        summary["stomp.py auto"] = {"tcp_msg_s": base["stomp.py-tcp"], "ws_msg_s": base["stomp.py-ws"],
                                    "ratio": base["stomp.py-ws"] / base["stomp.py-tcp"],
                                    "tcp_cpu_us": cpu["stomp.py-tcp"], "ws_cpu_us": cpu["stomp.py-ws"],
                                    "amqstomp_ws_over_stomp_py_ws": summary["auto"]["ws_msg_s"] / base["stomp.py-ws"]}
        rows.append(("stomp.py auto", "%.0f" % base["stomp.py-tcp"], "%.0f" % base["stomp.py-ws"],
                     "%.2f" % (base["stomp.py-ws"] / base["stomp.py-tcp"]), "%.1f" % cpu["stomp.py-tcp"],
                     "%.1f" % cpu["stomp.py-ws"]))
    print(format_table(rows, ("ack", "tcp msg/s", "ws msg/s", "ws/tcp", "tcp us CPU/msg", "ws us CPU/msg")))
    if args.json:
        print("wrote", write_json(args.json, {"machine": machine_info(), "args": vars(args), "summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
