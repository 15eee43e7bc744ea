"""bench/consume: consumer throughput and CPU of amqstomp against stomp.py, in one run.

One local ActiveMQ (non-persistent unless ``--persistent``) serves every case.
Per case:

1. a fresh queue is filled with the backlog (amqstomp, sends without
   receipts and one receipt at the end; not timed), each message numbered in a
   ``bench-seq`` header;
2. a child process (``python bench/consume.py --child SPEC``) imports the
   client library *by name* (``stomp`` or ``amqstomp``: the same consumer code
   runs on both, which is the drop-in claim), connects with STOMP 1.2,
   subscribes with ``activemq.prefetchSize`` and consumes until it has seen
   every sequence number, then acks what is left and disconnects;
3. the parent takes the child's own CPU time from ``os.wait4``, the child's
   report (msg/s from the first message to the last, the largest gap between
   two messages, distinct / duplicate sequence numbers) and the broker's
   counters for the queue (``dequeueCount`` must equal the backlog).

The ActiveMQ Java client (``activemq-java``: ``bench/java/JmsBench.java`` over
OpenWire, run by bench/_java.py) consumes the same backlogs in the cases where
JMS has the same ack mode: ``auto`` at prefetch 1000 (AUTO_ACKNOWLEDGE) and
``client-individual`` at prefetch 1000 and 1 (ActiveMQ's
INDIVIDUAL_ACKNOWLEDGE, ``acknowledge()`` per message), with a
``MessageListener``. The JVM first warms up on a backlog of the same size of
its own; its ``consume CPU`` (SUBSCRIBE to the last message) is read by this
process from the JVM's CPU clock, its ``CPU`` column is the JVM's whole life
(start-up and warm-up included). ``--no-java`` leaves it out.

The broker's ceiling (``raw-stomp``: bench/_raw_stomp.py, a blocking socket that
finds each MESSAGE's ``ack`` header and writes the ACK, nothing more; it checks
every sequence number arrived once) consumes the same backlogs at
client-individual prefetch 1000 and 1 (:data:`RAW_CASES`), in the same run;
the report divides each client's msg/s by it at the same prefetch and body
(``ceiling_pairs`` in the JSON). ``--no-raw`` leaves it out.

Ack modes: ``auto``; ``client-individual`` (an ACK per message from the
listener); ``client`` (a cumulative ACK every K messages, K = min(100,
prefetch // 2 or 1): an interval above the prefetch, or above the broker's page
size of 200 with a backlog, stalls ActiveMQ); and, amqstomp only, ``optimized``:
``subscribe(..., ack="client", optimize_acknowledge=True)``, the library acks
by itself. Prefetch 1, 10, 1000; bodies 256 B (backlog 100,000) and 64 KiB
(backlog 10,000); ``--quick`` uses 10,000 and 1,000; 1 MiB bodies (issue 21) with ``--huge N``
(backlog N) or when a ``--cases`` glob names ``1MiB`` (backlog 300, ``--quick`` 100).

Each row also gives its consume CPU per MiB of bodies received divided by the
time this process takes to copy 1 MiB (``memmove``, median of 301, measured
before and after the cases; the lower is used): "how many memcpys per MiB". With 64 KiB or
larger bodies the run also prints the kernel's floor (bench/_loopback.py): the CPU per MiB of a
thread that only receives bytes over loopback TCP with ``recv_into``, no broker, in the same units.

A gap of more than 5 s between two messages is a stall and is printed loudly;
every case has a deadline (``--deadline``, 120 s) so a stall ends as a failure
line, never a hang.

Repetitions: ``--runs N`` (default 1) runs every selected case N times in the
same run and broker, each time on a fresh backlog; from one repetition to the
next the order of the ack modes in a (body, prefetch) block and of the clients
in an ack mode rotates, so no client always goes first. Every ratio (amqstomp /
stomp.py, client / Java, client / raw-stomp) is computed inside a repetition,
both sides from the same run; the tables give the median over the repetitions
with the runs' range beside it, the case rows the median msg/s and CPU of the
ok runs and ``runs ok`` (k/N). Logic: bench/_consume_runs.py.

Usage::

    python bench/consume.py [--quick] [--persistent] [--cases GLOB[,GLOB]] [--huge N] [--runs N]
                            [--deadline S] [--json [PATH]] [--list] [--no-java] [--no-raw]

``--cases`` matches case ids such as ``amqstomp:optimized:p1000:256B`` or
``stomp.py:client-individual:p1:64KiB`` (shell globs, comma separated).
"""
import argparse
import fnmatch
import importlib
import json
import os
import resource
import sys
import threading
import time
import traceback
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _java, _loopback, _raw_stomp  # noqa: E402
from bench._consume_runs import ratios_by_run, run_order, summarize_cases, with_runs  # noqa: E402
from bench._common import (  # noqa: E402
    SEQ_HEADER,
    child_env,
    default_json_path,
    drain_queue,
    fill_queue,
    format_table,
    geomean,
    human_size,
    machine_info,
    process_cpu_seconds,
    run_child,
    start_broker,
    wait_queue_statistics,
    write_json,
)

THIS_FILE = os.path.abspath(__file__)

#: client name -> module the consumer imports
CLIENTS = {"stomp.py": "stomp", "amqstomp": "amqstomp", _java.CLIENT: "JmsBench (ActiveMQ Java client)",
           _raw_stomp.RAW: _raw_stomp.MODULE}
#: the broker's ceiling (bench/_raw_stomp.py: find the ack header, write the ACK, nothing more)
RAW = _raw_stomp.RAW
#: (ack, prefetch) the raw ceiling runs: it only knows client-individual
RAW_CASES = (("client-individual", 1000), ("client-individual", 1))
RAW_FILE = os.path.abspath(_raw_stomp.__file__)
#: (ack, prefetch) the Java client runs: JMS has no cumulative-every-K mode of its own
JAVA_CASES = (("auto", 1000), ("client-individual", 1000), ("client-individual", 1))
ACK_MODES = ("auto", "client-individual", "client", "optimized")
PREFETCHES = (1, 10, 1000)
#: (body size in bytes, backlog) for a full run and for --quick
BODIES = ((256, 100_000), (65536, 10_000))
QUICK_BODIES = ((256, 10_000), (65536, 1_000))
#: the 1 MiB bodies (issue 21): run with ``--huge N`` (backlog N) or when a ``--cases`` glob names
#: "1MiB" (backlog HUGE_BACKLOG, QUICK_HUGE_BACKLOG with --quick)
HUGE_BODY = 1 << 20
HUGE_BACKLOG = 300
QUICK_HUGE_BACKLOG = 100
#: copies of 1 MiB timed for the memcpy baseline (the median is kept)
MEMCPY_ROUNDS = 301
#: a gap between two consecutive messages above this (seconds) is a stall
STALL_S = 5.0
DEFAULT_DEADLINE = 120.0
#: seconds a child may spend outside the consume window (start-up, connect, disconnect)
CHILD_SLACK = 30.0


def default_ack_interval(prefetch: int) -> int:
    """K for ``client`` mode: min(100, prefetch // 2 or 1)."""
    return min(100, prefetch // 2 or 1)


class Case:
    """One measurement: a client, an ack mode, a prefetch, a body size, a backlog."""

    def __init__(self, client: str, ack: str, prefetch: int, body_size: int, count: int,
                 ack_interval: Optional[int] = None) -> None:
        if client not in CLIENTS:
            raise ValueError("unknown client %r (expected one of %s)" % (client, ", ".join(CLIENTS)))
        if ack not in ACK_MODES:
            raise ValueError("unknown ack mode %r (expected one of %s)" % (ack, ", ".join(ACK_MODES)))
        if ack == "optimized" and client != "amqstomp":
            raise ValueError("ack mode 'optimized' exists only for amqstomp")
        if client == RAW and ack != "client-individual":
            raise ValueError("the raw ceiling (%s) acks client-individual only" % RAW)
        self.client = client
        self.ack = ack
        self.prefetch = int(prefetch)
        self.body_size = int(body_size)
        self.count = int(count)
        self.ack_interval = int(ack_interval) if ack_interval else default_ack_interval(self.prefetch)

    @property
    def id(self) -> str:
        return "%s:%s:p%d:%s" % (self.client, self.ack, self.prefetch, human_size(self.body_size))

    @property
    def slug(self) -> str:
        return self.id.replace(":", ".").replace("stomp.py", "stomppy")

    @property
    def group(self) -> Tuple[str, int, int]:
        """What a ratio compares across clients: (ack, prefetch, body_size)."""
        return (self.ack, self.prefetch, self.body_size)

    def __repr__(self) -> str:
        return "<Case %s n=%d>" % (self.id, self.count)


def build_cases(quick: bool = False, patterns: Sequence[str] = (), small: Optional[int] = None,
                large: Optional[int] = None, ack_interval: Optional[int] = None,
                java: bool = True, raw: bool = True, huge: Optional[int] = None) -> List[Case]:
    """Every case in run order: per body, per prefetch, per ack mode, stomp.py,
    amqstomp, then (``java`` and a :data:`JAVA_CASES` pair) the Java client, then
    (``raw`` and a :data:`RAW_CASES` pair) the broker's ceiling.
    1 MiB bodies only with ``huge`` (their backlog) or a pattern naming "1MiB"."""
    bodies = list(QUICK_BODIES if quick else BODIES)
    if small:
        bodies[0] = (bodies[0][0], small)
    if large:
        bodies[1] = (bodies[1][0], large)
    if huge or any(human_size(HUGE_BODY) in p for p in patterns):
        bodies.append((HUGE_BODY, huge or (QUICK_HUGE_BACKLOG if quick else HUGE_BACKLOG)))
    cases = []
    for body_size, count in bodies:
        for prefetch in PREFETCHES:
            for ack in ACK_MODES:
                for client in CLIENTS:
                    if ack == "optimized" and client != "amqstomp":
                        continue
                    if client == _java.CLIENT and not (java and (ack, prefetch) in JAVA_CASES):
                        continue
                    if client == RAW and not (raw and (ack, prefetch) in RAW_CASES):
                        continue
                    case = Case(client, ack, prefetch, body_size, count, ack_interval)
                    if patterns and not any(fnmatch.fnmatchcase(case.id, p) for p in patterns):
                        continue
                    cases.append(case)
    return cases


# =========================================================================== the child


def _child_listener_class(base: type) -> type:
    class BenchConsumer(base):  # type: ignore[misc, valid-type]
        """Counts, checks and acks messages; the same code for every library."""

        def __init__(self, conn: Any, spec: Dict[str, Any]) -> None:
            self.conn = conn
            self.n = int(spec["count"])
            self.mode = {"auto": 0, "client-individual": 1, "client": 2, "optimized": 0}[spec["ack"]]
            self.interval = int(spec["ack_interval"])
            self.seen = bytearray(self.n)
            self.received = 0
            self.distinct = 0
            self.duplicates = 0
            self.foreign = 0
            self.redelivered = 0
            self.pending = 0
            self.acks_sent = 0
            self.last_ack_id: Optional[str] = None
            self.first: Optional[float] = None
            self.last: Optional[float] = None
            self.max_gap = 0.0
            self.max_gap_after = 0
            self.gaps_over_100ms = 0
            self.gaps_over_1s = 0
            self.stalls: List[Tuple[int, float]] = []
            self.t_done: Optional[float] = None
            self.ru_done: Optional[Any] = None
            self.done = threading.Event()
            self.bye = threading.Event()
            self.bye_receipt: Optional[str] = None
            self.errors: List[str] = []
            self.subscribe_headers: Optional[Dict[str, Any]] = None
            self.listener_error: Optional[str] = None

        def on_message(self, frame: Any) -> None:
            now = time.perf_counter()
            try:
                last = self.last
                if last is None:
                    self.first = now
                else:
                    gap = now - last
                    if gap > 0.1:
                        self.gaps_over_100ms += 1
                        if gap > 1.0:
                            self.gaps_over_1s += 1
                            if gap > STALL_S:
                                self.stalls.append((self.received, gap))
                        if gap > self.max_gap:
                            self.max_gap = gap
                            self.max_gap_after = self.received
                    elif gap > self.max_gap:
                        self.max_gap = gap
                        self.max_gap_after = self.received
                self.last = now
                self.received += 1
                headers = frame.headers
                if headers.get("redelivered") == "true":
                    self.redelivered += 1
                ack_id = headers.get("ack")
                mode = self.mode
                if mode == 1:
                    self.conn.ack(ack_id)
                    self.acks_sent += 1
                elif mode == 2:
                    self.pending += 1
                    if self.pending >= self.interval:
                        self.conn.ack(ack_id)
                        self.acks_sent += 1
                        self.pending = 0
                self.last_ack_id = ack_id
                try:
                    seq = int(headers[SEQ_HEADER])
                except (KeyError, ValueError):
                    self.foreign += 1
                    return
                if 0 <= seq < self.n:
                    if self.seen[seq]:
                        self.duplicates += 1
                    else:
                        self.seen[seq] = 1
                        self.distinct += 1
                        if self.distinct == self.n:
                            self.t_done = now
                            self.ru_done = resource.getrusage(resource.RUSAGE_SELF)
                            self.done.set()
                else:
                    self.foreign += 1
            except Exception as exc:  # report, never kill the library's thread
                if self.listener_error is None:
                    self.listener_error = "".join(traceback.format_exception_only(type(exc), exc)).strip()

        def on_send(self, frame: Any) -> None:
            if getattr(frame, "cmd", None) == "SUBSCRIBE":
                self.subscribe_headers = dict(frame.headers)

        def on_error(self, frame: Any) -> None:
            self.errors.append(str(frame.headers.get("message", "")) + " " + repr(frame.body)[:200])

        def on_receipt(self, frame: Any) -> None:
            if self.bye_receipt is not None and frame.headers.get("receipt-id") == self.bye_receipt:
                self.bye.set()

        def on_disconnected(self) -> None:
            self.bye.set()

    return BenchConsumer


def _cpu(ru: Any) -> float:
    return ru.ru_utime + ru.ru_stime


def leaked_optimize_header(headers: Optional[Dict[str, Any]]) -> bool:
    """True when a SUBSCRIBE frame carries the ``optimize_acknowledge`` keyword as a
    header: the library did not consume it (not wired), it sent it to the broker."""
    return bool(headers) and any(k.replace("-", "_").lower() == "optimize_acknowledge" for k in headers)


def consume(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The child's work: connect, subscribe, consume ``spec['count']`` messages; a report dict."""
    t0 = time.perf_counter()
    out: Dict[str, Any] = {"status": "error", "module": spec["module"]}
    mod = importlib.import_module(spec["module"])
    out["module_version"] = getattr(mod, "__version__", None)
    if spec["module"] == "amqstomp":
        from amqstomp import codec as _codec_sel
        out["codec"] = getattr(_codec_sel, "IMPLEMENTATION", None)
        try:
            from amqstomp import flow as _flow_sel
            out["flow"] = getattr(_flow_sel, "IMPLEMENTATION", None)
        except ImportError:
            out["flow"] = None
    out["import_s"] = time.perf_counter() - t0
    conn = mod.Connection12([(spec["host"], spec["port"])], auto_decode=bool(spec.get("decode")),
                            heartbeats=(0, 0))
    listener = _child_listener_class(mod.ConnectionListener)(conn, spec)
    conn.set_listener("bench", listener)
    conn.connect(wait=True)
    out["connect_s"] = time.perf_counter() - t0 - out["import_s"]

    sub_headers = {"activemq.prefetchSize": str(spec["prefetch"])}
    kwargs: Dict[str, Any] = {}
    wire_ack = spec["ack"]
    if wire_ack == "optimized":
        wire_ack = "client"
        kwargs["optimize_acknowledge"] = True
    ru_sub = resource.getrusage(resource.RUSAGE_SELF)
    threads_sub = thread_cpu()
    t_sub = time.perf_counter()
    try:
        conn.subscribe(spec["destination"], id="1", ack=wire_ack, headers=sub_headers, **kwargs)
    except TypeError as exc:
        out.update(status="not available", reason="subscribe() rejected optimize_acknowledge: %s" % exc)
        conn.disconnect()
        return out
    if kwargs and leaked_optimize_header(listener.subscribe_headers):
        out.update(status="not available",
                   reason="subscribe() sent optimize_acknowledge as a SUBSCRIBE header (keyword not wired)")
        conn.disconnect()
        return out

    deadline = float(spec["deadline_s"])
    finished = listener.done.wait(deadline)
    t_end = time.perf_counter()
    ru_end = listener.ru_done if finished else resource.getrusage(resource.RUSAGE_SELF)
    threads_end = thread_cpu()
    if finished and listener.mode == 2 and listener.pending:
        conn.ack(listener.last_ack_id)  # cumulative: acks everything before it too
        listener.acks_sent += 1
        listener.pending = 0
    listener.bye_receipt = "bench-bye-" + uuid.uuid4().hex
    t_disc = time.perf_counter()
    conn.disconnect(receipt=listener.bye_receipt)
    bye = listener.bye.wait(10.0)
    disconnect_s = time.perf_counter() - t_disc

    first, last = listener.first, listener.last
    received = listener.received
    span = (last - first) if (first is not None and last is not None) else 0.0
    tail_gap = (t_end - last) if (not finished and last is not None) else (
        (t_end - t_sub) if not finished else 0.0)
    out.update(
        status="ok" if finished else "timeout",
        count=listener.n,
        received=received,
        distinct=listener.distinct,
        duplicates=listener.duplicates,
        foreign=listener.foreign,
        redelivered=listener.redelivered,
        acks_sent=listener.acks_sent,
        first_message_s=(first - t_sub) if first is not None else None,
        span_s=span,
        msg_per_s=((received - 1) / span) if span > 0 else None,
        max_gap_s=max(listener.max_gap, tail_gap),
        max_gap_after=listener.max_gap_after if listener.max_gap >= tail_gap else received,
        tail_gap_s=tail_gap,
        gaps_over_100ms=listener.gaps_over_100ms,
        gaps_over_1s=listener.gaps_over_1s,
        stalls=[{"after_message": i, "gap_s": g} for i, g in listener.stalls],
        consume_cpu_s=_cpu(ru_end) - _cpu(ru_sub),
        consume_sys_s=ru_end.ru_stime - ru_sub.ru_stime,
        thread_cpu_s={name: cpu - threads_sub.get(name, 0.0) for name, cpu in threads_end.items()},
        consume_wall_s=((listener.t_done or t_end) - t_sub),
        disconnect_s=disconnect_s,
        disconnect_confirmed=bye,
        broker_errors=listener.errors,
        listener_error=listener.listener_error,
        subscribe_headers=listener.subscribe_headers,
        threads_left=threading.active_count() - 1,
    )
    if listener.listener_error:
        out["status"] = "error"
    return out


def thread_cpu() -> Dict[str, float]:
    """CPU time (s, user+sys) of each live thread of this process, by thread name (Linux:
    its CPU clock; ``{}`` where there is none). The consume report's ``thread_cpu_s`` is the
    difference between SUBSCRIBE and the end (a thread's whole time when it started after)."""
    out: Dict[str, float] = {}
    clock_of = getattr(time, "pthread_getcpuclockid", None)
    if clock_of is None:
        return out
    for thread in threading.enumerate():
        try:
            out[thread.name] = out.get(thread.name, 0.0) + time.clock_gettime(clock_of(thread.ident))
        except (OSError, TypeError):
            continue  # ended meanwhile, or never started
    return out


def child_main(spec_json: str) -> None:
    spec = json.loads(spec_json)
    try:
        result = consume(spec)
    except BaseException as exc:  # one JSON line whatever happens
        result = {"status": "error", "module": spec.get("module"),
                  "reason": "".join(traceback.format_exception_only(type(exc), exc)).strip(),
                  "traceback": traceback.format_exc()}
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    # the report is out; do not wait on library threads at interpreter exit
    os._exit(0 if result.get("status") in ("ok", "not available") else 1)


# =========================================================================== the parent


def probe_optimized(host_and_ports: Sequence) -> Tuple[bool, str]:
    """Is ``subscribe(..., optimize_acknowledge=True)`` wired in amqstomp?

    Subscribes once to an empty probe queue and looks at the SUBSCRIBE frame
    on its way out: a TypeError, or the keyword showing up as a frame header,
    means not available. Returns (available, reason)."""
    import amqstomp

    seen: Dict[str, Any] = {}

    class _Probe(amqstomp.ConnectionListener):
        def on_send(self, frame: Any) -> None:
            if frame.cmd == "SUBSCRIBE":
                seen.update(frame.headers)

    conn = amqstomp.Connection12(list(host_and_ports), auto_decode=False, heartbeats=(0, 0))
    conn.set_listener("probe", _Probe())
    conn.connect(wait=True, timeout=30)
    try:
        try:
            conn.subscribe("/queue/bench.consume.probe", id="probe", ack="client",
                           headers={"activemq.prefetchSize": "10"}, optimize_acknowledge=True)
        except TypeError as exc:
            return False, "subscribe() rejected optimize_acknowledge: %s" % exc
        if leaked_optimize_header(seen):
            return False, ("subscribe() sent optimize_acknowledge as a SUBSCRIBE header "
                           "(the keyword is not wired yet)")
        try:
            conn.unsubscribe(id="probe")
        except Exception:
            pass
        return True, "ok"
    finally:
        conn.disconnect()


def _rate(x: Optional[float]) -> str:
    return "-" if x is None else "%.0f" % x


def run_case(broker: Any, case: Case, deadline: float = DEFAULT_DEADLINE, decode: bool = False,
             persistent: Optional[bool] = None, tag: Optional[str] = None,
             optimized: Optional[Tuple[bool, str]] = None) -> Dict[str, Any]:
    """Fill a fresh queue, consume it in a child process, check the broker's counters.

    Args:
        broker: an :class:`~amqstomp.testing.broker.ActiveMQBroker` (statistics on).
        deadline (float): seconds the child may consume for.
        persistent (bool | None): send the backlog ``persistent:true``; by
            default when the broker is persistent.
        tag (str | None): part of the queue name (a fresh one when None).
        optimized: a :func:`probe_optimized` answer, to skip an unavailable case
            without filling a backlog.

    Returns:
        dict: the case (``id``, ``client``, ``ack``, ``prefetch``, ``body_size``,
        ``count``, ``ack_interval``), ``status`` (``ok``, ``timeout``, ``lost``,
        ``not-acked``, ``error``, ``not available``), ``msg_per_s``,
        ``cpu_s`` (child's user+sys, wait4), ``cpu_per_10k_s``,
        ``consume_cpu_per_10k_s`` (the child's CPU from SUBSCRIBE to the last
        message), ``max_gap_ms``, ``stall`` (bool), ``distinct``, ``missing``
        (sequence numbers never seen), ``lost`` (missing and not left on the
        queue either),
        ``duplicates``, ``dequeue_count``, ``broker_cpu_per_10k_s``, ``fill``,
        ``queue_stats_after``, ``child`` (the child's full report), ``problems``.
    """
    from amqstomp.testing.broker import queue_statistics  # noqa: F401  (fail early if missing)

    if persistent is None:
        persistent = bool(getattr(broker, "persistent", False))
    row: Dict[str, Any] = {
        "id": case.id, "client": case.client, "ack": case.ack, "prefetch": case.prefetch,
        "body_size": case.body_size, "count": case.count,
        "ack_interval": case.ack_interval if case.ack == "client" else None,
        "persistent": persistent, "problems": [],
    }
    if case.ack == "optimized" and optimized is not None and not optimized[0]:
        row.update(status="not available", reason=optimized[1])
        return row

    tag = tag or uuid.uuid4().hex[:8]
    queue = "bench.consume.%s.%s" % (tag, case.slug)
    destination = "/queue/" + queue
    row["queue"] = queue
    hosts = broker.host_and_ports
    host, port = hosts[0]

    row["fill"] = fill_queue(hosts, destination, case.count, case.body_size, persistent=persistent)
    before = wait_queue_statistics(broker, queue, lambda s: s.get("size", 0) >= case.count, timeout=10)
    row["queue_stats_before"] = before
    if before.get("size") != case.count:
        row["problems"].append("backlog is %r messages, expected %d" % (before.get("size"), case.count))

    spec = {
        "module": CLIENTS[case.client], "host": host, "port": port, "destination": destination,
        "ack": case.ack, "prefetch": case.prefetch, "count": case.count,
        "ack_interval": case.ack_interval, "deadline_s": deadline, "decode": decode,
    }
    broker_cpu0 = process_cpu_seconds(getattr(broker, "pid", None))
    if case.client == _java.CLIENT:
        child = _run_java_case(broker, case, queue, deadline)
    elif case.client == RAW:
        child = run_child([sys.executable, RAW_FILE, json.dumps(spec)], timeout=deadline + CHILD_SLACK,
                          env=child_env())
    else:
        child = run_child([sys.executable, THIS_FILE, "--child", json.dumps(spec)],
                          timeout=deadline + CHILD_SLACK, env=child_env())
    broker_cpu1 = process_cpu_seconds(getattr(broker, "pid", None))
    report = child.last_json()
    row["child_process"] = child.to_dict()
    if report is None:
        report = {"status": "error",
                  "reason": "child %s with no report" % ("killed at the deadline" if child.timed_out
                                                          else "exited %d" % child.returncode)}
        row["child_stderr_tail"] = child.stderr[-3000:]
    elif report.get("status") == "error":
        row["child_stderr_tail"] = child.stderr[-3000:]
    row["child"] = report
    status = report.get("status", "error")
    if status == "not available":
        row.update(status=status, reason=report.get("reason"))
        drained = drain_queue(hosts, destination, expected=case.count, timeout=60)
        row["drained_leftovers"] = drained
        return row

    received = report.get("received", 0) or 0
    distinct = report.get("distinct", 0) or 0
    cpu = child.cpu_s
    row.update(
        msg_per_s=report.get("msg_per_s"),
        cpu_s=cpu,
        cpu_per_10k_s=(cpu * 10000.0 / received) if received else None,
        consume_cpu_s=report.get("consume_cpu_s"),
        consume_sys_s=report.get("consume_sys_s"),
        consume_cpu_per_10k_s=(report["consume_cpu_s"] * 10000.0 / received)
        if received and report.get("consume_cpu_s") is not None else None,
        max_gap_ms=(report["max_gap_s"] * 1000.0) if report.get("max_gap_s") is not None else None,
        first_message_ms=(report["first_message_s"] * 1000.0) if report.get("first_message_s") is not None
        else None,
        received=received,
        distinct=distinct,
        missing=case.count - distinct,
        duplicates=report.get("duplicates"),
        redelivered=report.get("redelivered"),
        acks_sent=report.get("acks_sent"),
        broker_cpu_s=(broker_cpu1 - broker_cpu0) if broker_cpu0 is not None and broker_cpu1 is not None
        else None,
    )
    if row["broker_cpu_s"] is not None and received:
        row["broker_cpu_per_10k_s"] = row["broker_cpu_s"] * 10000.0 / received
    stalls = list(report.get("stalls") or [])
    if status == "timeout" and (report.get("tail_gap_s") or 0) > STALL_S:
        stalls.append({"after_message": received, "gap_s": report["tail_gap_s"], "until_deadline": True})
    row["stalls"] = stalls
    row["stall"] = bool(stalls) or (row["max_gap_ms"] or 0) > STALL_S * 1000.0

    after = wait_queue_statistics(
        broker, queue,
        lambda s: s.get("dequeueCount", 0) >= case.count and s.get("inflightCount", 0) == 0,
        timeout=5.0 if status == "ok" else 1.0)
    row["queue_stats_after"] = after
    row["dequeue_count"] = after.get("dequeueCount")
    leftover = after.get("size") or 0
    # missing = never seen by the consumer; lost = missing and not on the queue
    # either (a timed-out case leaves its undelivered backlog on the broker)
    row["lost"] = max(0, row["missing"] - leftover)
    if leftover:
        row["leftover"] = leftover
        row["drained_leftovers"] = drain_queue(hosts, destination, expected=leftover, timeout=60)

    if status != "ok":
        row["status"] = status
        if report.get("reason"):
            row["problems"].append(report["reason"])
        row["problems"].append("saw %d of %d sequence numbers; %d messages were still on the queue" % (
            distinct, case.count, leftover))
    elif distinct < case.count:
        row["status"] = "lost"
    elif after.get("dequeueCount") != case.count:
        row["status"] = "not-acked"
        row["problems"].append("broker dequeueCount %r, expected %d (size %r, inflight %r)" % (
            after.get("dequeueCount"), case.count, after.get("size"), after.get("inflightCount")))
    else:
        row["status"] = "ok"
    if report.get("broker_errors"):
        row["problems"].append("ERROR frames: %s" % "; ".join(report["broker_errors"])[:500])
    if report.get("duplicates"):
        row["problems"].append("%d duplicate deliveries" % report["duplicates"])
    if report.get("disconnect_confirmed") is False:
        row["problems"].append("no DISCONNECT receipt within 10 s")
    return row


class _JavaChild:
    """A :class:`~bench._java.JavaResult` seen as :func:`run_child`'s answer."""

    def __init__(self, java: "_java.JavaResult", count: int) -> None:
        self.java = java
        self.cpu_s = java.total_cpu_s or 0.0
        self.timed_out = java.timed_out
        self.returncode = java.returncode
        self.stderr = java.stderr_tail
        rep = dict(java.report or {})
        status = "ok" if java.ok and rep.get("distinct") == count else (
            "timeout" if java.timed_out or "within" in str(rep.get("error", "")) else "error")
        rep.update(status=status, module=CLIENTS[_java.CLIENT], consume_cpu_s=java.cpu_s)
        if status != "ok":
            rep["reason"] = java.error
        self.report = rep

    def last_json(self) -> Dict[str, Any]:
        return self.report

    def to_dict(self) -> Dict[str, Any]:
        return {"returncode": self.returncode, "timed_out": self.timed_out, "wall_s": self.java.wall_s,
                "cpu_s": self.cpu_s, "marks": self.java.marks}


def _run_java_case(broker: Any, case: Case, queue: str, deadline: float) -> _JavaChild:
    """The Java client consumes ``queue`` (after its warm-up on ``queue.warmup``)."""
    java = _java.run_java(broker.openwire_url, queue, "consume", case.count, 2 * deadline + CHILD_SLACK,
                          body_size=case.body_size,
                          ack="individual" if case.ack == "client-individual" else "auto",
                          prefetch=case.prefetch)
    if not java.ok:  # what a failed warm-up left behind
        drain_queue(broker.host_and_ports, "/queue/%s.warmup" % queue, timeout=60)
    return _JavaChild(java, case.count)


def format_row(row: Dict[str, Any]) -> List[Any]:
    def f(x: Optional[float], fmt: str) -> str:
        return "-" if x is None else fmt % x

    status = row["status"]
    if row.get("stall"):
        status += " STALL"
    return [row["client"], row["ack"], row["prefetch"], human_size(row["body_size"]),
            row["count"], _rate(row.get("msg_per_s")), f(row.get("cpu_per_10k_s"), "%.3f"),
            f(row.get("consume_cpu_per_10k_s"), "%.3f"), f(row.get("cpu_per_mib_vs_memcpy"), "%.1f"),
            f(row.get("sys_per_mib_vs_memcpy"), "%.1f"),
            f(row.get("max_gap_ms"), "%.1f"),
            row.get("lost", "-"), row.get("dequeue_count", "-"), status]


TABLE_HEADER = ["client", "ack", "prefetch", "body", "msgs", "msg/s", "CPU s/10k",
                "consume CPU s/10k", "consume CPU/MiB / memcpy/MiB", "of which sys", "max gap ms", "lost", "dequeued",
                "status"]
TABLE_ALIGN = "llrrrrrrrrrrrl"


def announce(row: Dict[str, Any], out: Any = None) -> None:
    """One progress line per case, plus loud lines for stalls and failures."""
    out = out or sys.stdout
    if row["status"] == "not available":
        print("%-40s not available: %s" % (row["id"], row.get("reason")), file=out, flush=True)
        return
    print("%-40s %8s msg/s  CPU %6.3f s/10k  max gap %8.1f ms  lost %s  dequeued %s  %s" % (
        row["id"], _rate(row.get("msg_per_s")), row.get("cpu_per_10k_s") or 0.0,
        row.get("max_gap_ms") or 0.0, row.get("lost"), row.get("dequeue_count"), row["status"]),
        file=out, flush=True)
    for stall in row.get("stalls") or []:
        print("!!! STALL: %s: %.1f s without a message after message %d%s" % (
            row["id"], stall["gap_s"], stall["after_message"],
            " (still waiting at the deadline)" if stall.get("until_deadline") else ""), file=out, flush=True)
    if row["status"] != "ok":
        print("!!! FAILED: %s: %s%s" % (row["id"], row["status"],
                                        (": " + "; ".join(row["problems"])) if row["problems"] else ""),
              file=out, flush=True)
    elif row["problems"]:
        print("    note: %s: %s" % (row["id"], "; ".join(row["problems"])), file=out, flush=True)


def memcpy_mib_seconds(rounds: int = MEMCPY_ROUNDS) -> float:
    """The median time (s) this process takes to copy 1 MiB between two buffers
    (``memmove``, warm caches): the floor a client's CPU per MiB received is held to."""
    import ctypes
    src = ctypes.create_string_buffer(b"m" * HUGE_BODY, HUGE_BODY)
    dst = ctypes.create_string_buffer(HUGE_BODY)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        ctypes.memmove(dst, src, HUGE_BODY)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def cpu_per_mib_vs_memcpy(row: Dict[str, Any], memcpy_s: Optional[float], key: str = "consume_cpu_s") -> Optional[float]:
    """The row's consume CPU (``key``: ``consume_sys_s`` for the kernel's part) per MiB of bodies
    received, in copies of 1 MiB."""
    if not memcpy_s or not row.get("received") or row.get(key) is None:
        return None
    mib = row["received"] * row["body_size"] / float(HUGE_BODY)
    return row[key] / mib / memcpy_s


def loopback_floor(memcpy_s: float, mib: int = 200) -> Dict[str, Any]:
    """bench/_loopback.receive_cost (the kernel's part of receiving ``mib`` MiB over loopback
    TCP, no broker) with its CPU per MiB in copies of 1 MiB (``cpu_per_mib_vs_memcpy``,
    ``sys_per_mib_vs_memcpy``)."""
    cost = _loopback.receive_cost(mib)
    got = cost["bytes"] / float(HUGE_BODY)
    return dict(cost, cpu_per_mib_vs_memcpy=(cost["user_s"] + cost["sys_s"]) / got / memcpy_s,
                sys_per_mib_vs_memcpy=cost["sys_s"] / got / memcpy_s)


def _ok(row: Optional[Dict[str, Any]]) -> bool:
    return bool(row) and row.get("status") == "ok" and bool(row.get("msg_per_s"))


def _cpu_per_msg(row: Dict[str, Any]) -> Optional[float]:
    return row["cpu_s"] / row["received"] if row.get("received") else None


def _consume_cpu_per_msg(row: Dict[str, Any]) -> Optional[float]:
    if row.get("received") and row.get("consume_cpu_s") is not None:
        return row["consume_cpu_s"] / row["received"]
    return None


def compute_ratios(rows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """amqstomp / stomp.py per (ack, prefetch, body), and the headline ratios."""
    by = {(r["client"], r["ack"], r["prefetch"], r["body_size"]): r for r in rows}
    pairs = []
    for (client, ack, prefetch, body), row in by.items():
        if client != "amqstomp" or ack == "optimized":
            continue
        base = by.get(("stomp.py", ack, prefetch, body))
        if not (_ok(row) and _ok(base)):
            continue
        pairs.append({
            "ack": ack, "prefetch": prefetch, "body_size": body,
            "msg_per_s_ratio": row["msg_per_s"] / base["msg_per_s"],
            "cpu_per_msg_ratio": _cpu_per_msg(row) / _cpu_per_msg(base),
            "consume_cpu_per_msg_ratio": (row["consume_cpu_s"] / row["received"])
            / (base["consume_cpu_s"] / base["received"]) if base.get("consume_cpu_s") else None,
        })
    headline = []
    for (client, ack, prefetch, body), row in by.items():
        if client != "amqstomp" or ack != "optimized" or not _ok(row):
            continue
        ind = by.get(("stomp.py", "client-individual", prefetch, body))
        auto = by.get(("stomp.py", "auto", prefetch, body))
        headline.append({
            "prefetch": prefetch, "body_size": body,
            "optimized_vs_stomppy_individual_msg_per_s":
                row["msg_per_s"] / ind["msg_per_s"] if _ok(ind) else None,
            "optimized_vs_stomppy_auto_msg_per_s":
                row["msg_per_s"] / auto["msg_per_s"] if _ok(auto) else None,
            "cpu_per_msg_optimized_over_stomppy_individual":
                _cpu_per_msg(row) / _cpu_per_msg(ind) if _ok(ind) else None,
            "consume_cpu_per_msg_optimized_over_stomppy_individual":
                _consume_cpu_per_msg(row) / _consume_cpu_per_msg(ind)
                if _ok(ind) and _consume_cpu_per_msg(ind) else None,
        })
    keys = ("optimized_vs_stomppy_individual_msg_per_s", "optimized_vs_stomppy_auto_msg_per_s",
            "cpu_per_msg_optimized_over_stomppy_individual",
            "consume_cpu_per_msg_optimized_over_stomppy_individual")
    summary = {k: geomean(h[k] for h in headline) for k in keys}
    java_pairs = []
    for (client, ack, prefetch, body), row in sorted(by.items(), key=lambda kv: (kv[0][3], kv[0][2], kv[0][1])):
        base = by.get((_java.CLIENT, ack, prefetch, body))
        if client in ("amqstomp", "stomp.py") and _ok(row) and _ok(base):
            java_pairs.append({
                "client": client, "ack": ack, "prefetch": prefetch, "body_size": body,
                "msg_per_s_vs_java": row["msg_per_s"] / base["msg_per_s"],
                "consume_cpu_per_msg_vs_java": _consume_cpu_per_msg(row) / _consume_cpu_per_msg(base)
                if _consume_cpu_per_msg(row) and _consume_cpu_per_msg(base) else None,
            })
    return {"pairs": pairs, "headline": headline, "headline_geomean": summary, "java_pairs": java_pairs,
            "ceiling_pairs": ceiling_pairs(by)}


def ceiling_pairs(by: Dict[Tuple[str, str, int, int], Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each client's row over the raw ceiling's (bench/_raw_stomp.py) at the same prefetch and
    body: ``msg_per_s_vs_raw`` (at most about 1: the broker's round trip bounds it) and
    ``consume_cpu_per_msg_vs_raw``. The client's rows of every ack mode are compared (an optimized
    or auto consumer may pass the raw client-individual ceiling: it sends fewer ACKs)."""
    out = []
    for (client, ack, prefetch, body), row in sorted(by.items(), key=lambda kv: (kv[0][3], kv[0][2], kv[0][1])):
        base = by.get((RAW, "client-individual", prefetch, body))
        if client != RAW and _ok(row) and _ok(base):
            mine, raw = _consume_cpu_per_msg(row), _consume_cpu_per_msg(base)
            out.append({"client": client, "ack": ack, "prefetch": prefetch, "body_size": body,
                        "raw_msg_per_s": base["msg_per_s"], "msg_per_s_vs_raw": row["msg_per_s"] / base["msg_per_s"],
                        "consume_cpu_per_msg_vs_raw": mine / raw if mine and raw else None})
    return out


def compute_ratios_by_run(rows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """:func:`compute_ratios` inside each repetition (rows by their ``run``, 1 when absent), then
    the median of each ratio over the repetitions, with ``<field>_runs`` (one value per run)."""
    return ratios_by_run(rows, compute_ratios, ACK_MODES, list(CLIENTS))


def format_summary_row(entry: Dict[str, Any]) -> List[Any]:
    """A :func:`bench._consume_runs.summarize_cases` entry as a table row: medians with the runs' range."""
    def m(name: str, fmt: str) -> str:
        return with_runs(entry.get(name), entry.get(name + "_runs"), fmt)

    status = entry["status"]
    if entry.get("stall_runs"):
        status += " STALL (run %s)" % ", ".join(str(r) for r in entry["stall_runs"])
    if status.startswith("failed"):
        status += " (%s)" % ", ".join(str(s) for s in entry["statuses"])
    return [entry["client"], entry["ack"], entry["prefetch"], human_size(entry["body_size"]), entry["count"],
            "%d/%d" % (entry["ok_runs"], entry["runs"]), m("msg_per_s", "%.0f"), m("cpu_per_10k_s", "%.3f"),
            m("consume_cpu_per_10k_s", "%.3f"), m("cpu_per_mib_vs_memcpy", "%.1f"), m("sys_per_mib_vs_memcpy", "%.1f"),
            "-" if entry.get("max_gap_ms") is None else "%.1f" % entry["max_gap_ms"],
            "-" if entry.get("lost") is None else entry["lost"], status]


SUMMARY_HEADER = ["client", "ack", "prefetch", "body", "msgs", "runs ok", "msg/s", "CPU s/10k",
                  "consume CPU s/10k", "consume CPU/MiB / memcpy/MiB", "of which sys", "max gap ms", "lost",
                  "status"]


def print_report(rows: Sequence[Dict[str, Any]], ratios: Dict[str, Any], out: Any = None,
                 summary: Optional[Sequence[Dict[str, Any]]] = None) -> None:
    """The tables: one row per case (``summary`` given with a case of more than one run: the
    medians of its runs, "runs ok" k/N), then the ratios (with ``<field>_runs``: the median and
    the runs' range)."""
    out = out or sys.stdout

    def r(p: Dict[str, Any], field: str, suffix: str = "") -> str:
        return with_runs(p.get(field), p.get(field + "_runs"), "%.2f", suffix)

    many = bool(summary) and any(e["runs"] > 1 for e in summary or ())
    print("\n== consumers: amqstomp vs stomp.py (CPU = the consumer process's user+sys, for activemq-java "
          "the JVM's whole life with start-up and warm-up; 'consume CPU' = SUBSCRIBE to last message)%s ==" % (
              "; median of the ok runs (their range)" if many else ""), file=out)
    if many:
        print(format_table([format_summary_row(e) for e in summary or ()], SUMMARY_HEADER, "llrrrrrrrrrrrl"),
              file=out)
    else:
        print(format_table([format_row(r) for r in rows], TABLE_HEADER, TABLE_ALIGN), file=out)
    runs_note = " -- each ratio inside a run, median of the runs (their range)" if many else ""

    if ratios["pairs"]:
        print("\n== amqstomp / stomp.py, same ack mode (msg/s: higher is better; CPU per message: "
              "lower is better)%s ==" % runs_note, file=out)
        table = [[p["ack"], p["prefetch"], human_size(p["body_size"]), r(p, "msg_per_s_ratio", "x"),
                  r(p, "cpu_per_msg_ratio"), r(p, "consume_cpu_per_msg_ratio")] for p in ratios["pairs"]]
        print(format_table(table, ["ack", "prefetch", "body", "msg/s ratio", "CPU/msg ratio",
                                   "consume CPU/msg ratio"], "lrrrrr"), file=out)

    if ratios.get("java_pairs"):
        print("\n== against the ActiveMQ Java client (OpenWire), same ack mode: client / Java (msg/s: higher "
              "is better; consume CPU per message, SUBSCRIBE to last message: lower is better)%s ==" % runs_note,
              file=out)
        table = [[p["client"], p["ack"], p["prefetch"], human_size(p["body_size"]), r(p, "msg_per_s_vs_java", "x"),
                  r(p, "consume_cpu_per_msg_vs_java")] for p in ratios["java_pairs"]]
        print(format_table(table, ["client", "ack", "prefetch", "body", "msg/s vs Java",
                                   "consume CPU/msg vs Java"], "llrrrr"), file=out)

    if ratios.get("ceiling_pairs"):
        print("\n== against the broker's ceiling (raw-stomp: a socket that finds the ack header and writes the "
              "ACK, client-individual, same prefetch and body): client / raw (msg/s; consume CPU per message)%s =="
              % runs_note, file=out)
        table = [[p["client"], p["ack"], p["prefetch"], human_size(p["body_size"]), _rate(p["raw_msg_per_s"]),
                  r(p, "msg_per_s_vs_raw", "x"), r(p, "consume_cpu_per_msg_vs_raw")]
                 for p in ratios["ceiling_pairs"]]
        print(format_table(table, ["client", "ack", "prefetch", "body", "raw msg/s", "msg/s vs raw",
                                   "consume CPU/msg vs raw"], "llrrrrr"), file=out)

    print("\n== headline: amqstomp optimized acks vs stomp.py%s ==" % runs_note, file=out)
    if not ratios["headline"]:
        print("(no amqstomp optimized case completed: see 'not available' / failure lines above)", file=out)
    else:
        cols = ("optimized_vs_stomppy_individual_msg_per_s", "optimized_vs_stomppy_auto_msg_per_s",
                "cpu_per_msg_optimized_over_stomppy_individual",
                "consume_cpu_per_msg_optimized_over_stomppy_individual")
        suffix = ("x", "x", "", "")
        table = [[h["prefetch"], human_size(h["body_size"])] + [r(h, c, x) for c, x in zip(cols, suffix)]
                 for h in ratios["headline"]]
        g = ratios["headline_geomean"]
        table.append(["geomean", ""] + [r(g, c, x) for c, x in zip(cols, suffix)])
        print(format_table(table, ["prefetch", "body", "msg/s vs stomp.py client-individual",
                                   "msg/s vs stomp.py auto", "CPU/msg vs stomp.py client-individual",
                                   "consume CPU/msg vs same"], "lrrrrr"), file=out)
    out.flush()


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="backlogs of 10,000 x 256 B and 1,000 x 64 KiB")
    ap.add_argument("--persistent", action="store_true", help="persistent (KahaDB) broker and messages")
    ap.add_argument("--cases", default="", help="comma-separated globs over case ids, e.g. 'amqstomp:*:p1000:*'")
    ap.add_argument("--small", type=int, help="backlog of the 256 B cases")
    ap.add_argument("--large", type=int, help="backlog of the 64 KiB cases")
    ap.add_argument("--huge", type=int, help="run 1 MiB cases with this backlog (default: only when --cases "
                    "names 1MiB, backlog %d, --quick %d)" % (HUGE_BACKLOG, QUICK_HUGE_BACKLOG))
    ap.add_argument("--ack-interval", type=int, help="K for ack mode 'client' (default min(100, prefetch//2 or 1))")
    ap.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE, help="seconds per case (default 120)")
    ap.add_argument("--runs", type=int, default=1, help="repetitions of every case in this run, clients in a "
                    "rotating order; ratios inside each, their median reported (default 1)")
    ap.add_argument("--decode", action="store_true", help="auto_decode=True (bodies as str) in the consumers")
    ap.add_argument("--json", nargs="?", const=default_json_path("consume"), metavar="PATH",
                    help="write every result here (default bench/results/consume.json)")
    ap.add_argument("--list", action="store_true", help="print the case ids and exit")
    ap.add_argument("--report", metavar="JSON",
                    help="re-print the tables of a saved run (ratios recomputed from its cases); no broker")
    ap.add_argument("--no-java", action="store_true", help="leave out the ActiveMQ Java client (OpenWire)")
    ap.add_argument("--no-raw", action="store_true", help="leave out the broker's ceiling (raw-stomp)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        child_main(args.child)
        return {}  # not reached

    if args.runs < 1:
        ap.error("--runs must be >= 1")
    if args.report:
        with open(args.report) as fh:
            saved = json.load(fh)
        saved.update(compute_ratios_by_run(saved["cases"]))
        saved["summary"] = summarize_cases(saved["cases"])
        print_report(saved["cases"], saved, summary=saved["summary"])
        if args.json:
            print("results written to %s" % write_json(args.json, saved))
        return saved

    patterns = [p.strip() for p in args.cases.split(",") if p.strip()]
    java_absent = "left out (--no-java)" if args.no_java else _java.available()
    if java_absent is None and not args.list:
        try:
            print("Java client compiled in %s" % _java.compile_bench(), flush=True)
        except RuntimeError as exc:
            java_absent = str(exc)
    if java_absent and not args.no_java:
        print("ActiveMQ Java client: not run: %s" % java_absent, flush=True)
    cases = build_cases(args.quick, patterns, args.small, args.large, args.ack_interval, java=java_absent is None,
                        raw=not args.no_raw, huge=args.huge)
    if args.list or not cases:
        for case in cases:
            print("%s  n=%d" % (case.id, case.count))
        if not cases:
            print("no case matches %r" % args.cases, file=sys.stderr)
        return {}

    t_run = time.monotonic()
    results: Dict[str, Any] = {
        "bench": "consume", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(), "args": vars(args), "stall_threshold_s": STALL_S, "runs": args.runs,
        "java": {"run": java_absent is None, "why_not": java_absent,
                 "warmup": "a backlog of the same size, same ack mode and prefetch, first"},
    }
    rows: List[Dict[str, Any]] = []
    memcpy_runs = [memcpy_mib_seconds()]
    broker = start_broker(persistent=args.persistent, openwire=any(c.client == _java.CLIENT for c in cases))
    try:
        results["broker"] = {"persistent": broker.persistent, "url": broker.url,
                             "startup_s": broker.startup_seconds, "java_heap": broker.java_heap,
                             "memory_limit": broker.memory_limit}
        print("broker %s (%s) up in %.1f s; %d cases%s" % (
            broker.url, "persistent" if broker.persistent else "non-persistent",
            broker.startup_seconds or 0.0, len(cases), " x %d runs" % args.runs if args.runs > 1 else ""),
            flush=True)
        # warm the broker's JIT (not timed)
        warm = "/queue/bench.consume.warmup"
        fill_queue(broker.host_and_ports, warm, 20000, 256, persistent=broker.persistent)
        drain_queue(broker.host_and_ports, warm, expected=20000, timeout=60)
        optimized = probe_optimized(broker.host_and_ports)
        results["optimized_ack"] = {"available": optimized[0], "reason": optimized[1]}
        if not optimized[0] and any(c.ack == "optimized" for c in cases):
            print("amqstomp optimized acks: NOT AVAILABLE (%s); those cases are skipped" % optimized[1],
                  flush=True)
        tag = uuid.uuid4().hex[:6]
        for run in range(1, args.runs + 1):
            if args.runs > 1:
                print("-- run %d of %d" % (run, args.runs), flush=True)
            # a queue of its own per repetition: the broker's counters of a queue add up
            run_tag = tag if args.runs == 1 else "%s-r%d" % (tag, run)
            for case in run_order(cases, run):
                try:
                    row = run_case(broker, case, deadline=args.deadline, decode=args.decode,
                                   persistent=args.persistent, tag=run_tag, optimized=optimized)
                except Exception as exc:  # one broken case must not lose the others
                    row = {"id": case.id, "client": case.client, "ack": case.ack, "prefetch": case.prefetch,
                           "body_size": case.body_size, "count": case.count, "status": "error",
                           "problems": ["".join(traceback.format_exception_only(type(exc), exc)).strip()],
                           "traceback": traceback.format_exc()}
                row["run"] = run
                rows.append(row)
                announce(row)
    finally:
        broker.stop()
    memcpy_runs.append(memcpy_mib_seconds())
    # the baseline is this run's: median copy time of 1 MiB, before and after the cases (the lower)
    memcpy_s = min(memcpy_runs)
    results["memcpy_mib_s"] = {"used": memcpy_s, "before": memcpy_runs[0], "after": memcpy_runs[1],
                               "rounds": MEMCPY_ROUNDS}
    for row in rows:
        row["cpu_per_mib_vs_memcpy"] = cpu_per_mib_vs_memcpy(row, memcpy_s)
        row["sys_per_mib_vs_memcpy"] = cpu_per_mib_vs_memcpy(row, memcpy_s, "consume_sys_s")
        threads = (row.get("child") or {}).get("thread_cpu_s")
        if threads and row["body_size"] >= 65536:
            row["thread_cpu_per_mib_vs_memcpy"] = {
                name: cpu_per_mib_vs_memcpy(dict(row, consume_cpu_s=cpu), memcpy_s) for name, cpu in threads.items()}
            print("  %s (run %d): CPU/MiB / memcpy by thread: %s" % (row["id"], row["run"], ", ".join(
                "%s %.1f" % item for item in sorted(row["thread_cpu_per_mib_vs_memcpy"].items(), key=lambda i: -i[1]))))
    print("memcpy of 1 MiB: %.1f us (median of %d, before/after the cases: %.1f / %.1f us)"
          % (memcpy_s * 1e6, MEMCPY_ROUNDS, memcpy_runs[0] * 1e6, memcpy_runs[1] * 1e6))
    if any(row["body_size"] >= 65536 for row in rows):
        floor = results["loopback_floor"] = loopback_floor(memcpy_s)
        print("the kernel's floor (bench/_loopback.py: %d MiB received over loopback TCP, recv_into a reused "
              "buffer, TCP_QUICKACK re-armed %s): CPU/MiB / memcpy/MiB %.1f, of which sys %.1f"
              % (floor["mib"], floor["quickack"], floor["cpu_per_mib_vs_memcpy"], floor["sys_per_mib_vs_memcpy"]))
    results["cases"] = rows
    results["summary"] = summarize_cases(rows)
    ratios = compute_ratios_by_run(rows)
    results.update(ratios)
    results["stalls"] = [{"id": r["id"], "run": r["run"], **s} for r in rows for s in (r.get("stalls") or [])]
    results["failures"] = [{"id": r["id"], "run": r["run"], "status": r["status"], "problems": r.get("problems")}
                           for r in rows if r["status"] not in ("ok", "not available")]
    results["wall_s"] = time.monotonic() - t_run
    print_report(rows, ratios, summary=results["summary"])
    if results["stalls"]:
        print("\n!!! %d STALL(S) (gap > %.0f s):" % (len(results["stalls"]), STALL_S))
        for s in results["stalls"]:
            print("!!!   %s (run %d): %.1f s after message %d" % (s["id"], s["run"], s["gap_s"], s["after_message"]))
    if results["failures"]:
        print("\n!!! %d case(s) failed: %s" % (len(results["failures"]),
                                               ", ".join("%s (run %d: %s)" % (f["id"], f["run"], f["status"])
                                                         for f in results["failures"])))
    print("\nwall time %.0f s" % results["wall_s"])
    if args.json:
        print("results written to %s" % write_json(args.json, results))
    return results


if __name__ == "__main__":
    main()
