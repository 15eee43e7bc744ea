"""bench/produce: producer throughput and CPU of amqstomp against stomp.py, in one run.

One local ActiveMQ with a KahaDB store on local disk (never tmpfs: the
directory's file system is checked and recorded; ``--data-dir`` chooses it)
serves every case. Cases, each with 256-byte bodies (``content-length``, so
ActiveMQ makes BytesMessages):

* ``async``: non-persistent sends that wait for nothing;
* ``sync``: persistent sends, each waiting for the broker's RECEIPT (stored);
* ``tx100`` / ``tx1000``: transactions of 100 / 1,000 persistent sends
  (BEGIN, SENDs, COMMIT with a receipt waited for).

Clients: ``stomp.py`` (PyPI stomp-py, the baseline), ``amqstomp-jms`` (the
JMS-style API: ``ConnectionFactory`` -> session -> ``MessageProducer``, a new
``BytesMessage`` per send; transacted cases use a transacted session and
``commit()``) and, for reference, ``amqstomp`` (the stomp.py-compatible
``amqstomp.Connection12.send``, the very code that drives stomp.py) and
``activemq-java``: ActiveMQ's own Java JMS client over OpenWire
(``bench/java/JmsBench.java``, compiled by ``bench/_java.py``; cases
``async``, ``tx100`` and ``tx1000``: NON_PERSISTENT sends with
``jms.useAsyncSend=true`` then one persistent send whose broker answer is
awaited, or persistent sends in a transacted session committed every 100 /
1,000). The JVM warms up with the same case and count on another queue
first; its CPU over the measured part is read from ``/proc/<pid>/stat`` by
the parent (see bench/_java.py). ``--no-java`` leaves it out; without a JDK it
is left out with a note.

Every (run, case, client) is a child process (``--child SPEC``): it connects,
warms up (200 sends to another queue), then measures wall time and its own
CPU time (``time.process_time()``: every thread of the client) over the send
loop *and* the confirmation that the broker has every message, so that
asynchronous sends are not flattered: in ``async`` the last of the N sends is
a persistent one that waits for its RECEIPT (ActiveMQ handles one
connection's frames in order, so it answers after all earlier ones); ``sync``
and the transactions wait for every receipt anyway. The parent then checks
the broker's own counter (``enqueueCount`` from the statistics plugin) and
drains the queue (not timed). Runs: ``--runs`` (3), clients in a rotating
order; the tables give the median of the runs.

Usage::

    python bench/produce.py [--quick | --tiny] [--runs N] [--cases GLOB[,GLOB]]
                            [--data-dir DIR] [--deadline S] [--json [PATH]] [--no-java]

Case ids look like ``amqstomp-jms:tx100``. Results: ``bench/results/produce.json``
with ``--json``.
"""
import argparse
import fnmatch
import importlib
import json
import os
import statistics
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from amqstomp.testing.master_slave import filesystem_type  # noqa: E402
from bench import _java  # noqa: E402
from bench._common import (  # noqa: E402
    REPO_ROOT,
    default_json_path,
    drain_queue,
    format_table,
    machine_info,
    process_cpu_seconds,
    run_child,
    start_broker,
    wait_queue_statistics,
    write_json,
)

THIS_FILE = os.path.abspath(__file__)

CLIENTS = ("stomp.py", "amqstomp-jms", "amqstomp", _java.CLIENT)
#: the cases the Java client runs (a synchronous send per message is left to the STOMP clients)
JAVA_CASES = ("async", "tx100", "tx1000")
#: case -> (persistent, transaction batch size or 0, waits for each receipt)
CASES: Dict[str, Tuple[bool, int, bool]] = {
    "async": (False, 0, False),
    "sync": (True, 0, True),
    "tx100": (True, 100, False),
    "tx1000": (True, 1000, False),
}
#: messages per case: a full run, --quick, --tiny (the test's smoke run)
COUNTS = {
    "full": {"async": 50_000, "sync": 2_000, "tx100": 20_000, "tx1000": 20_000},
    "quick": {"async": 10_000, "sync": 500, "tx100": 5_000, "tx1000": 5_000},
    "tiny": {"async": 300, "sync": 20, "tx100": 200, "tx1000": 1_000},
}
BODY_SIZE = 256
WARMUP = 200
DEFAULT_DEADLINE = 300.0
#: file systems that keep data in memory: a store there would flatter persistent sends
MEMORY_FILE_SYSTEMS = ("tmpfs", "ramfs")


# --------------------------------------------------------------------------- store directory


def file_system_of(path: str) -> str:
    """Type of the file system holding ``path`` (from /proc/mounts; longest
    mount point that contains it), or "unknown"."""
    return filesystem_type(path) or "unknown"


def choose_data_dir(given: Optional[str] = None) -> Tuple[str, str]:
    """A fresh directory for the broker (its KahaDB store) on a disk-backed file
    system: ``given``, else under the system's temp directory, /var/tmp, or
    the repository. Returns (directory, file system type).

    Raises:
        RuntimeError: ``given`` is on tmpfs/ramfs.
    """
    import tempfile

    if given:
        kind = file_system_of(os.path.dirname(os.path.abspath(given)) if not os.path.exists(given) else given)
        if kind in MEMORY_FILE_SYSTEMS:
            raise RuntimeError("--data-dir %s is on %s: the store must be on disk" % (given, kind))
        os.makedirs(given, exist_ok=True)
        return os.path.abspath(given), kind
    for parent in (tempfile.gettempdir(), "/var/tmp", os.path.join(REPO_ROOT, "bench")):
        if os.path.isdir(parent) and file_system_of(parent) not in MEMORY_FILE_SYSTEMS:
            return tempfile.mkdtemp(prefix="amqstomp-produce-", dir=parent), file_system_of(parent)
    raise RuntimeError("no disk-backed directory found for the broker's store")


# --------------------------------------------------------------------------- child


class _Receipts:
    """stomp.py-style listener part: remembers RECEIPT ids, lets a thread wait for one."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.seen: set = set()
        self.errors: List[str] = []

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.seen.add(frame.headers.get("receipt-id"))
            self.cond.notify_all()

    def on_error(self, frame: Any) -> None:
        with self.cond:
            self.errors.append(frame.headers.get("message", "ERROR"))
            self.cond.notify_all()

    def wait(self, receipt: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while receipt not in self.seen:
                if self.errors:
                    raise RuntimeError("broker ERROR: %s" % self.errors[-1])
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no receipt %s within %.0f s" % (receipt, timeout))
                self.cond.wait(left)
            self.seen.discard(receipt)


def _stomp_like(spec: Dict[str, Any], module_name: str) -> Dict[str, Any]:
    """The stomp.py API (stomp.py itself, or amqstomp's drop-in Connection12)."""
    mod = importlib.import_module(module_name)
    persistent, batch, each = CASES[spec["case"]]
    count, dest, body = spec["count"], spec["destination"], b"x" * spec["body_size"]
    conn = mod.Connection12([tuple(hp) for hp in spec["host_and_ports"]], heartbeats=(0, 0))
    receipts = _Receipts()

    class _Listener(mod.ConnectionListener):  # type: ignore[name-defined,misc]
        def on_receipt(self, frame: Any) -> None:
            receipts.on_receipt(frame)

        def on_error(self, frame: Any) -> None:
            receipts.on_error(frame)

    conn.set_listener("bench", _Listener())
    conn.connect(wait=True)
    timeout = spec["receipt_timeout"]
    try:
        warm = dest + ".warmup"
        for _ in range(WARMUP - 1):
            conn.send(warm, body, headers={"persistent": "false"})
        conn.send(warm, body, headers={"persistent": "false", "receipt": "warm"})
        receipts.wait("warm", timeout)
        flag = "true" if persistent else "false"
        send = conn.send
        t0, c0 = time.perf_counter(), time.process_time()
        if batch:
            n = 0
            while n < count:
                tx = conn.begin()
                for _ in range(min(batch, count - n)):
                    send(dest, body, headers={"persistent": flag, "transaction": tx})
                    n += 1
                conn.commit(tx, headers={"receipt": "c%d" % n})
                receipts.wait("c%d" % n, timeout)
        elif each:
            for i in range(count):
                send(dest, body, headers={"persistent": flag, "receipt": "r%d" % i})
                receipts.wait("r%d" % i, timeout)
        else:
            headers = {"persistent": flag}
            for _ in range(count - 1):
                send(dest, body, headers=headers)
            # the last one persistent with a receipt: it comes after every earlier send
            send(dest, body, headers={"persistent": "true", "receipt": "last"})
            receipts.wait("last", timeout)
        c1, t1 = time.process_time(), time.perf_counter()
    finally:
        conn.disconnect()
    return {"seconds": t1 - t0, "cpu_s": c1 - c0}


def _jms(spec: Dict[str, Any]) -> Dict[str, Any]:
    """amqstomp's JMS-style API."""
    from amqstomp.jms import NON_PERSISTENT, PERSISTENT, BytesMessage, ConnectionFactory, Queue

    persistent, batch, each = CASES[spec["case"]]
    count, body = spec["count"], b"x" * spec["body_size"]
    host, port = spec["host_and_ports"][0]
    factory = ConnectionFactory("stomp://%s:%d" % (host, port))
    connection = factory.create_connection()
    try:
        warm = connection.create_session().create_producer(Queue(spec["queue"] + ".warmup"))
        for _ in range(WARMUP - 1):
            warm.send(BytesMessage(body), delivery_mode=NON_PERSISTENT)
        warm.send(BytesMessage(body), delivery_mode=PERSISTENT)  # waits for its receipt
        mode = PERSISTENT if persistent else NON_PERSISTENT
        session = connection.create_session(transacted=bool(batch))
        producer = session.create_producer(Queue(spec["queue"]))
        if batch:
            producer.send(BytesMessage(body), delivery_mode=NON_PERSISTENT)  # opens the session's paths
            session.rollback()
        send = producer.send
        t0, c0 = time.perf_counter(), time.process_time()
        if batch:
            n = 0
            while n < count:
                for _ in range(min(batch, count - n)):
                    send(BytesMessage(body), delivery_mode=mode)
                    n += 1
                session.commit()
        elif each:
            for _ in range(count):
                send(BytesMessage(body), delivery_mode=mode)  # PERSISTENT: waits for the RECEIPT
        else:
            for _ in range(count - 1):
                send(BytesMessage(body), delivery_mode=mode)
            # the last one persistent, so synchronous: its receipt comes after every earlier send
            send(BytesMessage(body), delivery_mode=PERSISTENT)
        c1, t1 = time.process_time(), time.perf_counter()
    finally:
        connection.close()
    return {"seconds": t1 - t0, "cpu_s": c1 - c0}


def produce(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Run one case in this process and return its measurements."""
    client = spec["client"]
    if client == "amqstomp-jms":
        out = _jms(spec)
        module = "amqstomp.jms"
    else:
        module = "stomp" if client == "stomp.py" else "amqstomp"
        out = _stomp_like(spec, module)
    out["module"] = module
    if module.startswith("amqstomp"):
        from amqstomp import codec

        out["codec"] = codec.IMPLEMENTATION
    return out


def child_main(spec_json: str) -> None:
    spec = json.loads(spec_json)
    try:
        out = produce(spec)
        out["ok"] = True
    except Exception as exc:  # reported to the parent as a failed row
        import traceback

        traceback.print_exc()
        out = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
    print(json.dumps(out), flush=True)


# --------------------------------------------------------------------------- parent


def run_case(broker: Any, client: str, case: str, count: int, run: int,
             deadline: float = DEFAULT_DEADLINE, body_size: int = BODY_SIZE) -> Dict[str, Any]:
    """One child process: ``client`` sends ``count`` messages of ``case``;
    returns a row (status "ok" only when the child succeeded and the broker
    counted every message)."""
    queue = "bench.produce.%s.%s.%d.%s" % (case, client.replace(".", ""), run, uuid.uuid4().hex[:8])
    spec = {"client": client, "case": case, "count": count, "body_size": body_size, "queue": queue,
            "destination": "/queue/" + queue, "host_and_ports": [list(hp) for hp in broker.host_and_ports],
            "receipt_timeout": max(30.0, deadline / 2)}
    row: Dict[str, Any] = {"id": "%s:%s" % (client, case), "client": client, "case": case, "run": run,
                           "count": count, "body_size": body_size, "status": "ok", "problems": [], "queue": queue}
    broker_cpu0 = process_cpu_seconds(getattr(broker, "pid", None))
    if client == _java.CLIENT:
        java = _java.run_java(broker.openwire_url, queue, "produce", count, deadline, body_size=body_size,
                              case=case)
        report = dict(java.report or {}, ok=java.ok, error=None if java.ok else java.error,
                      cpu_s=java.cpu_s, module="activemq-client %s" % (java.report or {}).get("activemq_client"))
        row["child"] = {"returncode": java.returncode, "timed_out": java.timed_out, "wall_s": java.wall_s,
                        "cpu_s": java.total_cpu_s, "marks": java.marks}
        timed_out, stderr, warmup = java.timed_out, java.stderr_tail, count
    else:
        child = run_child([sys.executable, THIS_FILE, "--child", json.dumps(spec)], timeout=deadline)
        report = child.last_json() or {}
        row["child"] = child.to_dict()
        timed_out, stderr, warmup = child.timed_out, child.stderr, WARMUP
        if not report.get("ok"):
            report.setdefault("error", "exit %s" % child.returncode)
    broker_cpu1 = process_cpu_seconds(getattr(broker, "pid", None))
    if timed_out or not report.get("ok"):
        row["status"] = "failed"
        row["problems"].append("timed out" if timed_out else report.get("error"))
        row["child_stderr_tail"] = stderr[-2000:]
    else:
        seconds, cpu = report["seconds"], report["cpu_s"]
        row.update(seconds=seconds, cpu_s=cpu, msg_per_s=count / seconds if seconds > 0 else None,
                   cpu_us_per_msg=cpu / count * 1e6, module=report.get("module"), codec=report.get("codec"))
    if broker_cpu0 is not None and broker_cpu1 is not None:
        row["broker_cpu_s"] = broker_cpu1 - broker_cpu0
    stats = wait_queue_statistics(broker, queue, lambda s: int(s.get("enqueueCount", -1)) >= count, timeout=10.0)
    row["enqueue_count"] = int(stats["enqueueCount"]) if "enqueueCount" in stats else None
    if row["enqueue_count"] != count:
        row["status"] = "failed"
        row["problems"].append("broker counted %s of %d messages" % (row["enqueue_count"], count))
    # empty the queues (not timed): the broker should not carry earlier cases' messages
    drained = drain_queue(broker.host_and_ports, "/queue/" + queue, expected=count, timeout=120.0)
    drain_queue(broker.host_and_ports, "/queue/" + queue + ".warmup", expected=warmup, timeout=60.0, idle=1.0)
    row["drained"] = drained
    return row


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarize(rows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Medians per (case, client), ratios against stomp.py, and the targets of issue 4."""
    summary: List[Dict[str, Any]] = []
    by: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for case in CASES:
        for client in CLIENTS:
            mine = [r for r in rows if r["case"] == case and r["client"] == client]
            if not mine:
                continue
            ok = [r for r in mine if r["status"] == "ok"]
            entry = {"case": case, "client": client, "runs": len(mine), "ok_runs": len(ok),
                     "msg_per_s": _median([r.get("msg_per_s") for r in ok]),
                     "cpu_us_per_msg": _median([r.get("cpu_us_per_msg") for r in ok]),
                     "msg_per_s_runs": [r.get("msg_per_s") for r in mine],
                     "cpu_us_per_msg_runs": [r.get("cpu_us_per_msg") for r in mine]}
            by[(case, client)] = entry
            summary.append(entry)
    for entry in summary:
        rate, cpu = entry["msg_per_s"], entry["cpu_us_per_msg"]
        for other, suffix in (("stomp.py", "stomppy"), (_java.CLIENT, "java")):
            base = by.get((entry["case"], other))
            entry["msg_per_s_vs_" + suffix] = (rate / base["msg_per_s"] if base and rate and base["msg_per_s"]
                                               else None)
            entry["cpu_per_msg_vs_" + suffix] = (cpu / base["cpu_us_per_msg"]
                                                 if base and cpu and base["cpu_us_per_msg"] else None)
        # the Java ratio of each run (rows of the same run paired): their spread says
        # whether a median of them could be gated on a loaded machine
        java_runs = {r["run"]: r for r in rows if r["case"] == entry["case"] and r["client"] == _java.CLIENT
                     and r["status"] == "ok"}
        mine = [r for r in rows if r["case"] == entry["case"] and r["client"] == entry["client"]
                and r["status"] == "ok" and r.get("run") in java_runs]
        for key, field in (("msg_per_s_vs_java_runs", "msg_per_s"), ("cpu_per_msg_vs_java_runs", "cpu_us_per_msg")):
            entry[key] = [r[field] / java_runs[r["run"]][field] for r in mine if java_runs[r["run"]][field]]
    targets: List[Dict[str, Any]] = []

    def target(name: str, value: Optional[float], op: str, limit: float) -> None:
        met = None if value is None else (value >= limit if op == ">=" else value <= limit)
        targets.append({"target": name, "value": value, "op": op, "limit": limit, "met": met})

    for case in CASES:
        jms = by.get((case, "amqstomp-jms"))
        target("%s: amqstomp-jms msg/s / stomp.py msg/s" % case, jms and jms["msg_per_s_vs_stomppy"], ">=", 1.0)
    jms_async = by.get(("async", "amqstomp-jms"))
    target("async: amqstomp-jms CPU/msg / stomp.py CPU/msg", jms_async and jms_async["cpu_per_msg_vs_stomppy"],
           "<=", 0.5)
    sync = by.get(("sync", "amqstomp-jms"))
    for case in ("tx100", "tx1000"):
        tx = by.get((case, "amqstomp-jms"))
        value = (tx["msg_per_s"] / sync["msg_per_s"]
                 if tx and sync and tx["msg_per_s"] and sync["msg_per_s"] else None)
        target("%s: amqstomp-jms msg/s / amqstomp-jms sync msg/s" % case, value, ">=", 3.0)
    # the same ratios by "client:case", for bench/gate.py's json_key (e.g.
    # "ratios.amqstomp-jms:async.cpu_per_msg_vs_stomppy")
    # and against the Java client: "ratios.amqstomp:async.cpu_per_msg_vs_java" (per message:
    # below 1 = less CPU than the Java client; msg/s: above 1 = faster)
    ratios = {"%s:%s" % (e["client"], e["case"]): {k: e[k] for k in (
        "msg_per_s_vs_stomppy", "cpu_per_msg_vs_stomppy", "msg_per_s_vs_java", "cpu_per_msg_vs_java")}
        for e in summary}
    return {"summary": summary, "targets": targets, "ratios": ratios}


def format_report(result: Dict[str, Any]) -> str:
    def f(x: Optional[float], fmt: str) -> str:
        return "-" if x is None else fmt % x

    rows = [[e["case"], e["client"], "%d/%d" % (e["ok_runs"], e["runs"]), f(e["msg_per_s"], "%.0f"),
             f(e["cpu_us_per_msg"], "%.2f"), f(e["msg_per_s_vs_stomppy"], "%.2fx"),
             f(e["cpu_per_msg_vs_stomppy"], "%.2fx"), f(e.get("msg_per_s_vs_java"), "%.2fx"),
             f(e.get("cpu_per_msg_vs_java"), "%.2fx")] for e in result["summary"]]
    text = format_table(rows, ["case", "client", "runs ok", "msg/s", "CPU us/msg", "msg/s vs stomp.py",
                               "CPU vs stomp.py", "msg/s vs Java", "CPU vs Java"], align="llrrrrrrr")
    lines = [text, "", "targets (issue 4):"]
    for t in result["targets"]:
        state = "n/a" if t["met"] is None else ("met" if t["met"] else "NOT met")
        lines.append("  %-52s %8s %s %-4g %s" % (t["target"], f(t["value"], "%.2f"), t["op"], t["limit"], state))
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer messages per case (%s)" % COUNTS["quick"])
    size.add_argument("--tiny", action="store_true", help="a smoke run (%s)" % COUNTS["tiny"])
    ap.add_argument("--runs", type=int, default=3, help="runs per case and client (median reported; default 3)")
    ap.add_argument("--cases", default="", help="comma-separated globs over ids such as 'amqstomp-jms:tx*'")
    ap.add_argument("--data-dir", help="broker directory (KahaDB store); must not be on tmpfs")
    ap.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE, help="seconds per child (default 300)")
    ap.add_argument("--json", nargs="?", const=default_json_path("produce"), metavar="PATH",
                    help="write the results as JSON (default path bench/results/produce.json)")
    ap.add_argument("--no-java", action="store_true", help="leave out the ActiveMQ Java client (OpenWire)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_main(args.child)
        return {}
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    counts = COUNTS[mode]
    patterns = [p for p in args.cases.split(",") if p]
    java_absent = "left out (--no-java)" if args.no_java else _java.available()
    if java_absent is None:
        try:
            print("Java client compiled in %s" % _java.compile_bench(), flush=True)
        except RuntimeError as exc:
            java_absent = str(exc)
    plan = [(case, client) for case in CASES for client in CLIENTS
            if not patterns or any(fnmatch.fnmatch("%s:%s" % (client, case), p) for p in patterns)]
    plan = [(case, client) for case, client in plan
            if client != _java.CLIENT or (case in JAVA_CASES and java_absent is None)]
    if java_absent and not args.no_java:
        print("ActiveMQ Java client: not run: %s" % java_absent, flush=True)
    if not plan:
        ap.error("no case matches --cases %r" % args.cases)
    data_dir, fs_kind = choose_data_dir(args.data_dir)
    print("broker store: %s (%s)" % (data_dir, fs_kind), flush=True)
    rows: List[Dict[str, Any]] = []
    started = time.time()
    broker = start_broker(persistent=True, base_dir=data_dir, broker_name="amqstomp-produce",
                          openwire=any(client == _java.CLIENT for _, client in plan))
    try:
        for run in range(1, args.runs + 1):
            for case in CASES:
                clients = [c for c in CLIENTS if (case, c) in plan]
                shift = (run - 1) % len(clients) if clients else 0
                for client in clients[shift:] + clients[:shift]:  # rotate the order per run
                    row = run_case(broker, client, case, counts[case], run, args.deadline)
                    rows.append(row)
                    print("run %d %-22s %s %s msg/s %s us CPU/msg%s" % (
                        run, row["id"], row["status"], "%.0f" % row["msg_per_s"] if row.get("msg_per_s") else "-",
                        "%.2f" % row["cpu_us_per_msg"] if row.get("cpu_us_per_msg") else "-",
                        "  " + "; ".join(row["problems"]) if row["problems"] else ""), flush=True)
    finally:
        broker.stop()
        if not args.data_dir:  # a directory this run made: remove it
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)
    result: Dict[str, Any] = {
        "bench": "produce",
        "date": time.strftime("%Y-%m-%d", time.localtime(started)),
        "started": started,
        "seconds": time.time() - started,
        "mode": mode,
        "runs": args.runs,
        "counts": counts,
        "body_size": BODY_SIZE,
        "broker": {"store_dir": data_dir, "file_system": fs_kind, "persistent": True},
        "java": {"run": java_absent is None, "why_not": java_absent, "warmup": "same case and count first"},
        "machine": machine_info(),
        "rows": rows,
    }
    result.update(summarize(rows))
    print()
    print(format_report(result))
    if args.json:
        print("\nwrote", write_json(args.json, result))
    return result


if __name__ == "__main__":
    main()
