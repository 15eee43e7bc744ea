"""The ActiveMQ Java client (OpenWire) as a third client of the broker benches.

bench/produce.py and bench/consume.py run ``bench/java/JmsBench.java`` beside
stomp.py and amqstomp, on the same broker (which then opens an OpenWire
connector on 127.0.0.1: ``start_broker(openwire=True)``).

* :func:`java_tools` -- ``javac`` and ``java`` on PATH (or under
  ``$JAVA_HOME/bin``), or None;
* :func:`client_classpath` -- the few jars of Debian's ActiveMQ the client
  needs (``activemq-client``, the JMS 1.1 and J2EE-management API jars,
  ``hawtbuf``, ``slf4j-api``; no logging binding: slf4j's NOP logger);
* :func:`compile_bench` -- compile the program with ``javac`` into a cache
  directory outside the source tree (``$XDG_CACHE_HOME`` or ``~/.cache``,
  ``amqstomp-bench/java/<key>``), the key a hash of the source, the class path
  and the ``javac`` version: a changed source compiles again, an unchanged one
  never does;
* :func:`run_java` -- run one case in a JVM and measure it.

CPU is measured from here, the way the bench measures its Python children:
the Java program prints ``@mark start`` after its warm-up and ``@mark end``
after the measured part, and waits on its stdin each time; this process reads
the JVM's CPU time while it waits, then lets it go on. The figure is the
kernel's CPU clock of that process (``clock_gettime`` on the clock id of
``clock_getcpuclockid(pid)``, nanoseconds; every thread of the JVM, JIT, GC
and the client's own threads, exited ones included): the very clock
``time.process_time()`` reads in the Python children. Where that clock cannot
be read, user+system time from ``/proc/<pid>/stat`` (clock ticks, 10 ms). The JVM's whole-life CPU (start-up and warm-up included) comes from
``os.wait4``. Units: seconds (float), counts (int).

Warm-up: the Java program first runs the same case with the same number of
messages on ``<queue>.warmup`` (see the comment at the top of the Java source).
"""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench._common import REPO_ROOT, die_with_parent, process_cpu_seconds

JAVA_DIR = os.path.join(REPO_ROOT, "bench", "java")
SOURCE = os.path.join(JAVA_DIR, "JmsBench.java")
MAIN_CLASS = "JmsBench"
#: the client's jars in Debian's ActiveMQ (``$AMQSTOMP_ACTIVEMQ_HOME``/lib)
CLIENT_JARS = ("activemq-client.jar", "geronimo-jms_1.1_spec.jar", "geronimo-j2ee-management-1.1-spec.jar",
               "hawtbuf.jar", "slf4j-api.jar")
#: the name of the client in tables and JSON
CLIENT = "activemq-java"

__all__ = ["CLIENT", "JavaResult", "available", "client_classpath", "compile_bench", "java_tools",
           "run_java"]


def java_tools() -> Optional[Tuple[str, str]]:
    """``(javac, java)`` paths, or None when either is missing."""
    home = os.environ.get("JAVA_HOME")
    found = []
    for tool in ("javac", "java"):
        path = os.path.join(home, "bin", tool) if home else None
        if not (path and os.access(path, os.X_OK)):
            path = shutil.which(tool)
        if not path:
            return None
        found.append(path)
    return found[0], found[1]


def client_classpath(activemq_home: Optional[str] = None) -> List[str]:
    """The jars of :data:`CLIENT_JARS` under ``<activemq_home>/lib``.

    Raises:
        FileNotFoundError: one of them is missing.
    """
    home = activemq_home or os.environ.get("AMQSTOMP_ACTIVEMQ_HOME", "/usr/share/activemq")
    jars = [os.path.join(home, "lib", name) for name in CLIENT_JARS]
    missing = [j for j in jars if not os.path.isfile(j)]
    if missing:
        raise FileNotFoundError("ActiveMQ client jars not found: %s" % ", ".join(missing))
    return jars


def available() -> Optional[str]:
    """None when the Java leg can run here, else why not (a sentence)."""
    if java_tools() is None:
        return "javac/java not found (install a JDK, e.g. openjdk-17-jdk-headless)"
    try:
        client_classpath()
    except FileNotFoundError as exc:
        return str(exc)
    return None


_COMPILED: Dict[str, str] = {}


def cache_root() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "amqstomp-bench", "java")


def compile_bench(cache_dir: Optional[str] = None, timeout: float = 120.0) -> str:
    """Compile :data:`SOURCE` when missing or stale; returns the class directory.

    The directory is ``<cache_dir or cache_root()>/<key>``, ``key`` a hash of
    the source text, the class path and ``javac -version``; a compile writes
    into a temporary sibling first and renames it, so a concurrent or broken
    compile never leaves half a directory behind.

    Raises:
        RuntimeError: no JDK, or ``javac`` failed (its output in the message).
    """
    root = cache_dir or cache_root()
    if root in _COMPILED:  # once per process: the source does not change during a run
        return _COMPILED[root]
    tools = java_tools()
    if tools is None:
        raise RuntimeError(available() or "no JDK")
    javac = tools[0]
    classpath = client_classpath()
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60)
    digest = hashlib.sha256()
    with open(SOURCE, "rb") as fh:
        digest.update(fh.read())
    digest.update(os.pathsep.join(classpath).encode())
    digest.update((version.stdout + version.stderr).encode())
    target = os.path.join(root, digest.hexdigest()[:16])
    if os.path.isfile(os.path.join(target, MAIN_CLASS + ".class")):
        _COMPILED[root] = target
        return target
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="build-", dir=root)
    try:
        proc = subprocess.run([javac, "-nowarn", "-d", tmp, "-cp", os.pathsep.join(classpath), SOURCE],
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError("javac failed (%d):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
        try:
            os.rename(tmp, target)
        except OSError:  # another run compiled the same key meanwhile
            if not os.path.isfile(os.path.join(target, MAIN_CLASS + ".class")):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _COMPILED[root] = target
    return target


def process_cpu_clock(pid: int) -> Optional[float]:
    """CPU seconds of process ``pid`` (all its threads) from the kernel's
    per-process CPU clock (Linux: clock id ``(~pid << 3) | 2``, what glibc's
    ``clock_getcpuclockid`` returns), else :func:`process_cpu_seconds`."""
    try:
        return time.clock_gettime((~pid << 3) | 2)
    except (OSError, OverflowError, AttributeError):
        return process_cpu_seconds(pid)


class JavaResult:
    """One JVM run: ``report`` (its last JSON line, or None), ``returncode``,
    ``timed_out``, ``wall_s``; ``cpu_s`` (JVM CPU between the marks, from
    /proc) and ``total_cpu_s`` (its whole life, ``os.wait4``), in seconds;
    ``stderr_tail`` (str)."""

    def __init__(self) -> None:
        self.report: Optional[Dict[str, Any]] = None
        self.returncode: Optional[int] = None
        self.timed_out = False
        self.wall_s = 0.0
        self.cpu_s: Optional[float] = None
        self.total_cpu_s: Optional[float] = None
        self.marks: Dict[str, float] = {}
        self.stderr_tail = ""

    @property
    def ok(self) -> bool:
        return bool(self.report and self.report.get("ok")) and self.cpu_s is not None

    @property
    def error(self) -> str:
        if self.timed_out:
            return "timed out"
        if self.report and self.report.get("error"):
            return str(self.report["error"])
        if self.cpu_s is None and self.report and self.report.get("ok"):
            return "no CPU figure (marks %s)" % sorted(self.marks)
        return "exit %s: %s" % (self.returncode, self.stderr_tail[-300:])


def run_java(url: str, queue: str, role: str, count: int, timeout: float, body_size: int = 256,
             warmup: Optional[int] = None, classes: Optional[str] = None,
             **options: Any) -> JavaResult:
    """Run :data:`SOURCE`'s program once and measure it.

    Args:
        url (str): the broker's OpenWire URL (``broker.openwire_url``).
        queue (str): the measured queue's name (the warm-up uses ``queue + ".warmup"``).
        role (str): ``produce`` (``case=async|tx100|tx1000``) or ``consume``
            (``ack=auto|individual``, ``prefetch=N``): ``options``.
        count (int): measured messages; ``warmup`` defaults to the same number.
        timeout (float): seconds for the whole JVM (killed after).
        classes (str | None): a :func:`compile_bench` directory (compiled now when None).

    Returns:
        JavaResult (never raises for a failing program: see ``ok`` and ``error``).
    """
    tools = java_tools()
    if tools is None:
        raise RuntimeError(available() or "no JDK")
    classes = classes or compile_bench()
    argv = [tools[1], "-cp", os.pathsep.join([classes] + client_classpath()), MAIN_CLASS,
            "url=" + url, "queue=" + queue, "role=" + role, "count=%d" % count, "body=%d" % body_size,
            "warmup=%d" % (count if warmup is None else warmup), "timeout=%g" % max(1.0, timeout - 5)]
    argv += ["%s=%s" % (k, v) for k, v in sorted(options.items())]
    return _run(argv, timeout)


def _run(argv: Sequence[str], timeout: float) -> JavaResult:
    result = JavaResult()
    cpu: Dict[str, Optional[float]] = {}
    lines: List[str] = []
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                preexec_fn=die_with_parent)
        killer = threading.Timer(timeout, _kill, (proc, result))
        killer.daemon = True
        killer.start()
        usage = None
        try:
            assert proc.stdout is not None and proc.stdin is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith("@mark "):
                    name = line[6:].strip()
                    cpu[name] = process_cpu_clock(proc.pid)
                    result.marks[name] = time.monotonic() - t0
                    try:
                        proc.stdin.write(b"go\n")
                        proc.stdin.flush()
                    except OSError:
                        break
                else:
                    lines.append(line)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            killer.cancel()
            if proc.returncode is None:  # interrupted: never leave a JVM behind
                proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:  # the JVM is gone: a buffered "go" cannot be flushed
                        pass
        result.wall_s = time.monotonic() - t0
        result.returncode = proc.returncode
        if usage is not None:
            result.total_cpu_s = usage.ru_utime + usage.ru_stime
        err.seek(0)
        result.stderr_tail = err.read()[-4000:].decode("utf-8", "replace")
    start, end = cpu.get("start"), cpu.get("end")
    if start is not None and end is not None:
        result.cpu_s = end - start
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                result.report = json.loads(line)
                break
            except ValueError:
                continue
    return result


def _kill(proc: "subprocess.Popen[bytes]", result: JavaResult) -> None:
    if proc.poll() is None:
        result.timed_out = True
        proc.kill()
