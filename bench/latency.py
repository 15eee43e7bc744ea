"""bench/latency: end-to-end latency at a fixed send rate, both amqstomp APIs and stomp.py side by side.

One case = one child process (no state carried between clients) that opens a
consumer connection (``ack:auto``, a listener) and a producer connection with
the SAME API, then sends ``--count`` messages of ``--body-size`` bytes at
``--rate`` messages per second (paced by the clock: message *i* leaves at
``start + i / rate``), each carrying its send time (``time.monotonic_ns()``) in
the ``bench-sent-ns`` header. The listener records receive time minus send time.
The percentiles are over every message but the first ``WARMUP`` (connection
warm-up). Clients:

* ``amqstomp`` -- the stomp.py-style API (``Connection12.send``, written at once);
* ``amqstomp-jms`` -- the JMS-style API (``MessageProducer.send``, NON_PERSISTENT:
  asynchronous, so it may wait in the write buffer, see ``amqstomp._io.writer``);
* ``stomp.py`` -- stomp.py itself (the baseline).

Units: microseconds (latency), messages per second (rate). Each figure is the
median over ``--runs`` runs; clients alternate inside each run, so a busy moment
of the machine hits all of them. The broker is one local ActiveMQ the bench
starts (non-persistent messages: the broker's disk is not measured); every
client runs once untimed first (a fresh broker's JIT made the first client's
p50 hundreds of milliseconds).

Usage::

    python bench/latency.py [--rate 2000] [--count 4000] [--runs 3] [--clients a,b] [--json [PATH]]

Issue 21 asks the JMS API's p50 for at most 1.2x the stomp.py-style API's and
at most stomp.py's, and its p99 for at most stomp.py's: ``--check`` exits 1
when a run's medians miss that (a report, not a unit test: timings are never
asserted in the test suite).
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (default_json_path, format_table, machine_info, run_child,  # noqa: E402
                     start_broker, write_json)

THIS_FILE = os.path.abspath(__file__)
CLIENTS = ("amqstomp", "amqstomp-jms", "stomp.py")
HEADER = "bench-sent-ns"
WARMUP = 200              #: messages sent first and left out of the percentiles
RECEIVE_WAIT_S = 60.0     #: the child waits at most this long for the last messages


def _percentiles(latencies_us: Sequence[float]) -> Dict[str, float]:
    ordered = sorted(latencies_us)
    n = len(ordered)

    def at(q: float) -> float:
        return ordered[min(n - 1, int(q * n))]

    return {"p50_us": at(0.50), "p90_us": at(0.90), "p99_us": at(0.99), "max_us": ordered[-1],
            "mean_us": statistics.fmean(ordered)}


class _Collector:
    """The consumer side: latencies in arrival order, and a wait for the last one."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.latencies_us: List[float] = []
        self.done = threading.Event()

    def record(self, sent_ns: Optional[str]) -> None:
        now = time.monotonic_ns()
        if sent_ns is None:
            return
        self.latencies_us.append((now - int(sent_ns)) / 1000.0)
        if len(self.latencies_us) >= self.expected:
            self.done.set()


def _paced(count: int, rate: float, send: Any) -> None:
    """Call ``send(sent_ns)`` ``count`` times, message i at start + i / rate."""
    interval = 1.0 / rate
    start = time.perf_counter()
    for i in range(count):
        due = start + i * interval
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(str(time.monotonic_ns()))


def _stomp_like(spec: Dict[str, Any], module_name: str, collector: _Collector) -> None:
    import importlib

    mod = importlib.import_module(module_name)
    hosts = [tuple(hp) for hp in spec["host_and_ports"]]
    body = b"x" * spec["body_size"]
    consumer = mod.Connection12(hosts, heartbeats=(0, 0))

    class _Listener(mod.ConnectionListener):  # type: ignore[misc,name-defined]
        def on_message(self, frame: Any) -> None:
            collector.record(frame.headers.get(HEADER))

    consumer.set_listener("latency", _Listener())
    consumer.connect(wait=True)
    producer = mod.Connection12(hosts, heartbeats=(0, 0))
    producer.connect(wait=True)
    try:
        consumer.subscribe(spec["destination"], id="1", ack="auto", headers={"receipt": "sub"})
        time.sleep(0.2)  # the SUBSCRIBE is in place before the first send (no receipt wait in stomp.py's shape)
        dest, send = spec["destination"], producer.send
        _paced(spec["count"], spec["rate"],
               lambda stamp: send(dest, body, headers={"persistent": "false", HEADER: stamp}))
        collector.done.wait(RECEIVE_WAIT_S)
    finally:
        producer.disconnect()
        consumer.disconnect()


def _jms(spec: Dict[str, Any], collector: _Collector) -> None:
    from amqstomp.jms import NON_PERSISTENT, BytesMessage, ConnectionFactory, Queue

    host, port = spec["host_and_ports"][0]
    factory = ConnectionFactory("stomp://%s:%d" % (host, port))
    consumer_connection = factory.create_connection()
    producer_connection = factory.create_connection()
    try:
        queue = Queue(spec["queue"])
        consumer = consumer_connection.create_session().create_consumer(queue)  # returns once subscribed
        consumer.set_message_listener(lambda message: collector.record(message.get_property(HEADER)))
        consumer_connection.start()
        producer = producer_connection.create_session().create_producer(queue)
        body = b"x" * spec["body_size"]

        def send(stamp: str) -> None:
            message = BytesMessage(body)
            message.set_property(HEADER, stamp)
            producer.send(message, delivery_mode=NON_PERSISTENT)

        _paced(spec["count"], spec["rate"], send)
        collector.done.wait(RECEIVE_WAIT_S)
    finally:
        producer_connection.close()
        consumer_connection.close()


def measure(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Run one case in this process; its percentiles (µs) and counts."""
    collector = _Collector(spec["count"])
    if spec["client"] == "amqstomp-jms":
        _jms(spec, collector)
    else:
        _stomp_like(spec, "stomp" if spec["client"] == "stomp.py" else "amqstomp", collector)
    received = len(collector.latencies_us)
    out: Dict[str, Any] = {"received": received}
    if received > WARMUP:
        out.update(_percentiles(collector.latencies_us[WARMUP:]))
    return out


def child_main(spec_json: str) -> None:
    spec = json.loads(spec_json)
    try:
        out = measure(spec)
        out["ok"] = out["received"] == spec["count"]
        if not out["ok"]:
            out["error"] = "received %d of %d" % (out["received"], spec["count"])
    except Exception as exc:  # reported to the parent as a failed row
        import traceback

        traceback.print_exc()
        out = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
    print(json.dumps(out), flush=True)


def run_case(broker: Any, client: str, rate: float, count: int, body_size: int, run: int) -> Dict[str, Any]:
    queue = "bench.latency.%s.%d.%s" % (client.replace(".", ""), run, uuid.uuid4().hex[:8])
    spec = {"client": client, "rate": rate, "count": count, "body_size": body_size, "queue": queue,
            "destination": "/queue/" + queue, "host_and_ports": [list(hp) for hp in broker.host_and_ports]}
    child = run_child([sys.executable, THIS_FILE, "--child", json.dumps(spec)],
                      timeout=count / rate + RECEIVE_WAIT_S + 60.0)
    report = child.last_json() or {}
    row: Dict[str, Any] = {"client": client, "run": run, "rate": rate, "count": count, "body_size": body_size}
    if child.timed_out or not report.get("ok"):
        row.update(status="failed", error="timed out" if child.timed_out else report.get("error"),
                   stderr_tail=child.stderr[-2000:])
    else:
        row.update(status="ok", **{k: v for k, v in report.items() if k.endswith("_us")})
    return row


def summarize(rows: Sequence[Dict[str, Any]], clients: Sequence[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for client in clients:
        ok = [r for r in rows if r["client"] == client and r["status"] == "ok"]
        if ok:
            out[client] = {k: statistics.median(r[k] for r in ok) for k in ("p50_us", "p90_us", "p99_us", "max_us")}
            out[client]["runs"] = len(ok)
    jms, api, stomppy = out.get("amqstomp-jms"), out.get("amqstomp"), out.get("stomp.py")
    if jms and api:
        out["jms_p50_over_api_p50"] = jms["p50_us"] / api["p50_us"]
    if jms and stomppy:
        out["jms_p50_over_stomppy_p50"] = jms["p50_us"] / stomppy["p50_us"]
        out["jms_p99_over_stomppy_p99"] = jms["p99_us"] / stomppy["p99_us"]
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, default=2000.0, help="messages per second (default 2000)")
    ap.add_argument("--count", type=int, default=4000, help="messages per case (default 4000)")
    ap.add_argument("--body-size", type=int, default=256, help="bytes per body (default 256)")
    ap.add_argument("--runs", type=int, default=3, help="runs; medians are reported (default 3)")
    ap.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated, of %s" % ", ".join(CLIENTS))
    ap.add_argument("--json", nargs="?", const=default_json_path("latency"), help="write the results there")
    ap.add_argument("--check", action="store_true", help="exit 1 when the JMS API misses issue 21's bounds")
    args = ap.parse_args(argv)
    if args.child:
        child_main(args.child)
        return 0
    clients = [c for c in args.clients.split(",") if c]
    unknown = set(clients) - set(CLIENTS)
    if unknown or args.count <= WARMUP or args.rate <= 0:
        ap.error("clients must be of %s; --count > %d; --rate > 0" % (", ".join(CLIENTS), WARMUP))
    rows: List[Dict[str, Any]] = []
    with start_broker() as broker:
        for client in clients:  # warm-up: a fresh broker's JIT makes its first second ~100x slower
            run_case(broker, client, args.rate, args.count, args.body_size, -1)
        for run in range(args.runs):
            for client in clients:
                row = run_case(broker, client, args.rate, args.count, args.body_size, run)
                rows.append(row)
                print("run %d %-13s %s" % (run, client, "p50 %.0f µs p99 %.0f µs" % (row["p50_us"], row["p99_us"])
                                            if row["status"] == "ok" else "FAILED: %s" % row.get("error")),
                      flush=True)
    summary = summarize(rows, clients)
    table = [[c, "%.0f" % summary[c]["p50_us"], "%.0f" % summary[c]["p90_us"], "%.0f" % summary[c]["p99_us"],
              "%.0f" % summary[c]["max_us"], summary[c]["runs"]] for c in clients if c in summary]
    print(format_table(table, ["client", "p50 µs", "p90 µs", "p99 µs", "max µs", "runs"]))
    for key in ("jms_p50_over_api_p50", "jms_p50_over_stomppy_p50", "jms_p99_over_stomppy_p99"):
        if key in summary:
            print("%-26s %.2f" % (key, summary[key]))
    if args.json:
        print("results:", write_json(args.json, {"machine": machine_info(), "rate": args.rate, "count": args.count,
                                                 "body_size": args.body_size, "rows": rows, "summary": summary}))
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        return 1
    if args.check and not (summary.get("jms_p50_over_api_p50", 9) <= 1.2
                           and summary.get("jms_p50_over_stomppy_p50", 9) <= 1.0
                           and summary.get("jms_p99_over_stomppy_p99", 9) <= 1.0):
        print("latency: the JMS API misses issue 21's bounds")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
