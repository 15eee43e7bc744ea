"""Shared pieces of the broker benches (bench/consume.py, later bench/produce.py).

* :func:`start_broker` -- one local ActiveMQ for the whole run, sized for a
  bench (bigger heap and memory limit than the test broker, statistics on);
* :func:`fill_queue` -- pre-load a backlog with amqstomp's connection (sends
  without receipts, one receipt at the end), each message numbered in the
  :data:`SEQ_HEADER` header so a consumer can prove nothing was lost;
* :func:`drain_queue` -- empty a queue (warm-up, or leftovers of a failed case);
* :func:`run_child` -- run a command in a child process under a deadline and
  return its own CPU time (``os.wait4``), its exit status and its output;
* :func:`process_cpu_seconds` -- CPU time of another process (the broker), from /proc;
* :func:`wait_queue_statistics` -- poll the broker's counters until they settle;
* :func:`format_table`, :func:`write_json`, :func:`default_json_path`,
  :func:`machine_info`, :func:`geomean`.

Units: seconds (float) for durations, bytes for sizes, counts as ints.
"""
import ctypes
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

RESULTS_DIR = os.path.join(REPO_ROOT, "bench", "results")

#: Header every backlog message carries: its sequence number, 0 .. count-1.
SEQ_HEADER = "bench-seq"

#: Broker set-up for benches: a 100,000 x 256 B or 10,000 x 64 KiB
#: non-persistent backlog lives in the broker's memory (about 700 MB for the
#: latter), so the heap and memory limit are raised above the test defaults.
BENCH_JAVA_HEAP = "2G"
BENCH_MEMORY_LIMIT = "1400 mb"

__all__ = [
    "REPO_ROOT", "RESULTS_DIR", "SEQ_HEADER", "ChildResult", "child_env", "default_json_path", "die_with_parent",
    "drain_queue", "fill_queue", "format_table", "geomean", "machine_info", "process_cpu_seconds",
    "run_child", "start_broker", "wait_queue_statistics", "write_json", "human_size",
]


# --------------------------------------------------------------------------- broker


def start_broker(persistent: bool = False, **options: Any):
    """Start an :class:`~amqstomp.testing.broker.ActiveMQBroker` for a bench and
    return it (started; the caller stops it, or uses it as a context manager).

    Defaults: statistics plugin on, heap :data:`BENCH_JAVA_HEAP`, memory limit
    :data:`BENCH_MEMORY_LIMIT`; ``options`` override any of them.
    """
    from amqstomp.testing.broker import ActiveMQBroker

    kwargs: Dict[str, Any] = dict(
        persistent=persistent,
        statistics=True,
        java_heap=BENCH_JAVA_HEAP,
        memory_limit=BENCH_MEMORY_LIMIT,
        broker_name="amqstomp-bench",
    )
    kwargs.update(options)
    broker = ActiveMQBroker(**kwargs)
    broker.start()
    return broker


def fill_queue(host_and_ports: Sequence, destination: str, count: int, body_size: int,
               persistent: bool = False, extra_headers: Optional[Dict[str, Any]] = None,
               receipt_timeout: float = 300.0) -> Dict[str, Any]:
    """Send ``count`` messages of ``body_size`` bytes to ``destination``.

    Uses amqstomp's ``Connection12``: every SEND without a receipt (the write
    returns once the kernel has the bytes), then one frame with a receipt; the
    broker answers it after every earlier SEND, so on return the whole backlog
    is on the queue (``count`` must be >= 1). Each message carries ``bench-seq: i`` and a
    ``content-length`` (a BytesMessage on ActiveMQ); ``persistent: true`` when
    asked.

    Returns:
        dict: ``count``, ``body_size``, ``seconds``, ``msg_per_s``.
    """
    import amqstomp

    if count < 1:
        raise ValueError("count must be >= 1, got %r" % (count,))
    body = (b"0123456789abcdef" * (body_size // 16 + 1))[:body_size]
    headers: Dict[str, Any] = dict(extra_headers or {})
    if persistent:
        headers["persistent"] = "true"
    conn = amqstomp.Connection12(list(host_and_ports), auto_decode=False, heartbeats=(0, 0))
    t0 = time.perf_counter()
    conn.connect(wait=True, timeout=30)
    try:
        send = conn.send
        for i in range(count - 1):
            headers[SEQ_HEADER] = i
            send(destination, body, headers=headers)
        # the last SEND asks for a receipt: ActiveMQ handles one connection's
        # frames in order, so its RECEIPT means the whole backlog is queued
        receipt = "fill-" + uuid.uuid4().hex
        headers[SEQ_HEADER] = count - 1
        send(destination, body, headers=dict(headers, receipt=receipt))
        conn.wait_for_receipt(receipt, timeout=receipt_timeout)
    finally:
        conn.disconnect()
    seconds = time.perf_counter() - t0
    return {"count": count, "body_size": body_size, "seconds": seconds,
            "msg_per_s": count / seconds if seconds > 0 else float("inf")}


def drain_queue(host_and_ports: Sequence, destination: str, expected: Optional[int] = None,
                timeout: float = 60.0, idle: float = 2.0) -> int:
    """Consume (ack auto, prefetch 1000) until ``expected`` messages arrived, or
    nothing came for ``idle`` seconds, or ``timeout`` passed; returns the count."""
    import threading

    import amqstomp

    state = {"n": 0, "last": time.monotonic()}
    done = threading.Event()

    class _Drain(amqstomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            state["n"] += 1
            state["last"] = time.monotonic()
            if expected is not None and state["n"] >= expected:
                done.set()

    conn = amqstomp.Connection12(list(host_and_ports), auto_decode=False, heartbeats=(0, 0))
    conn.set_listener("drain", _Drain())
    conn.connect(wait=True, timeout=30)
    try:
        conn.subscribe(destination, id="drain", ack="auto", headers={"activemq.prefetchSize": 1000})
        deadline = time.monotonic() + timeout
        state["last"] = time.monotonic()
        while not done.is_set():
            now = time.monotonic()
            if now >= deadline or now - state["last"] >= idle:
                break
            done.wait(0.05)
    finally:
        conn.disconnect()
    return state["n"]


def wait_queue_statistics(broker: Any, queue: str, ready: Callable[[Dict[str, Any]], bool],
                          timeout: float = 5.0, interval: float = 0.1) -> Dict[str, Any]:
    """``queue_statistics(broker, queue)`` polled until ``ready(stats)`` or
    ``timeout`` seconds; returns the last answer (an empty dict when the
    broker never answered)."""
    from amqstomp.testing.broker import queue_statistics

    deadline = time.monotonic() + timeout
    stats: Dict[str, Any] = {}
    while True:
        try:
            stats = queue_statistics(broker, queue, timeout=max(1.0, deadline - time.monotonic()))
        except (LookupError, TimeoutError, ConnectionError, OSError) as exc:
            stats = {"error": repr(exc)}
        if "error" not in stats and ready(stats):
            return stats
        if time.monotonic() >= deadline:
            return stats
        time.sleep(interval)


# --------------------------------------------------------------------------- child processes

try:
    _LIBC: Optional[Any] = ctypes.CDLL(None, use_errno=True)
    _LIBC.prctl  # noqa: B018  (Linux only)
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """For ``preexec_fn`` (between fork and exec): the child gets SIGKILL when
    this process dies (Linux ``PR_SET_PDEATHSIG``; nothing elsewhere)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_die_with_parent = die_with_parent  # the old name


class ChildResult:
    """What :func:`run_child` learned about one child process.

    Attributes:
        argv (list[str]), returncode (int: negative = killed by that signal),
        timed_out (bool: killed at the deadline), wall_s, user_s, sys_s
        (float seconds; CPU of the child itself, from ``os.wait4``),
        max_rss_kb (int), stdout, stderr (str).
    """

    def __init__(self, argv: List[str], returncode: int, timed_out: bool, wall_s: float,
                 user_s: float, sys_s: float, max_rss_kb: int, stdout: str, stderr: str) -> None:
        self.argv = argv
        self.returncode = returncode
        self.timed_out = timed_out
        self.wall_s = wall_s
        self.user_s = user_s
        self.sys_s = sys_s
        self.max_rss_kb = max_rss_kb
        self.stdout = stdout
        self.stderr = stderr

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    def last_json(self) -> Optional[Dict[str, Any]]:
        """The last stdout line that parses as a JSON object, or None."""
        for line in reversed(self.stdout.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    continue
        return None

    def to_dict(self) -> Dict[str, Any]:
        return {"returncode": self.returncode, "timed_out": self.timed_out, "wall_s": self.wall_s,
                "user_s": self.user_s, "sys_s": self.sys_s, "cpu_s": self.cpu_s,
                "max_rss_kb": self.max_rss_kb}


def child_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """This environment with the repository first on PYTHONPATH (so a child
    imports this checkout's amqstomp and bench package)."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + path if path else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


def run_child(argv: List[str], timeout: float, env: Optional[Dict[str, str]] = None,
              cwd: Optional[str] = None, poll_interval: float = 0.02) -> ChildResult:
    """Run ``argv`` and wait for it, at most ``timeout`` seconds (then SIGKILL).

    The child's CPU time comes from ``os.wait4`` on its pid: its own user and
    system seconds, nothing of this process or of other children. stdout and
    stderr go to temporary files (a chatty child never blocks on a full pipe).
    The child gets SIGKILL if this process dies first.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=env if env is not None else child_env(), cwd=cwd,
                                preexec_fn=_die_with_parent)
        timed_out = False
        reaped = False
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    reaped = True
                    break
                if time.monotonic() - t0 >= timeout:
                    timed_out = True
                    proc.kill()
                    pid, status, usage = os.wait4(proc.pid, 0)
                    reaped = True
                    break
                time.sleep(poll_interval)
        finally:
            if not reaped:  # interrupted (KeyboardInterrupt): never leave it running
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return ChildResult(list(argv), proc.returncode, timed_out, wall, usage.ru_utime, usage.ru_stime,
                           usage.ru_maxrss, out.read().decode("utf-8", "replace"),
                           err.read().decode("utf-8", "replace"))


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: Optional[int]) -> Optional[float]:
    """user + system CPU seconds of a running process (Linux /proc), or None."""
    if not pid:
        return None
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            data = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = data[data.rfind(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / float(_CLK_TCK)


# --------------------------------------------------------------------------- output


def human_size(n: int) -> str:
    """256 -> '256B', 65536 -> '64KiB', 1048576 -> '1MiB'."""
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return "%d%s" % (n // factor, unit)
    return "%dB" % n


def geomean(values: Iterable[float]) -> Optional[float]:
    """Geometric mean of the positive finite values, or None when there are none."""
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def format_table(rows: Sequence[Sequence[Any]], header: Sequence[str],
                 align: Optional[str] = None) -> str:
    """A plain-text table; ``align`` is one char per column, 'l' or 'r'
    (default: first column left, the others right)."""
    cells = [[str(h) for h in header]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    align = align or ("l" + "r" * (len(header) - 1))
    lines = []
    for n, row in enumerate(cells):
        parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align)]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def default_json_path(name: str) -> str:
    """``bench/results/<name>.json``."""
    return os.path.join(RESULTS_DIR, name + ".json")


def write_json(path: str, data: Any) -> str:
    """Write ``data`` as indented JSON (creating the directory); returns the path."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2, sort_keys=False)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def machine_info() -> Dict[str, Any]:
    """Python, platform, CPU count, library versions, load average."""
    info: Dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    try:
        info["loadavg"] = os.getloadavg()
    except OSError:
        pass
    try:
        import stomp
        info["stomp.py"] = getattr(stomp, "__version__", None)
    except ImportError:
        info["stomp.py"] = None
    try:
        import amqstomp
        from amqstomp import codec as _codec_sel
        info["amqstomp"] = amqstomp.__version__
        info["amqstomp_codec"] = getattr(_codec_sel, "IMPLEMENTATION", None)
        from amqstomp import flow as _flow_sel
        info["amqstomp_flow"] = getattr(_flow_sel, "IMPLEMENTATION", None)
        from amqstomp._io import handoff as _handoff_sel
        info["amqstomp_handoff"] = getattr(_handoff_sel, "IMPLEMENTATION", None)
    except ImportError:
        pass
    return info
