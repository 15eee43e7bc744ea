"""bench/gate: the CI performance gate -- amqstomp / stomp.py ratios and callgrind instruction counts, checked.

Two kinds of figure, neither of them a duration:

* RATIOS, amqstomp over stomp.py (the aio ones: over stompman, over the threaded
  API), both measured in the same run on the same machine: a slower or busier
  CI machine slows both clients alike. Each is the MEDIAN of ``--runs`` (3)
  runs; a run measures every selected ratio once. They still swing (0.57-1.29
  between repetitions on a shared 2-core machine): they catch large
  regressions and broken cases, not a 2x dearer ``send()``.
* INSTRUCTIONS PER MESSAGE (``instructions_*``, unit instructions/msg, lower is
  better): ``bench/instructions.py`` runs each small client program twice under
  ``valgrind --tool=callgrind`` against a fake STOMP peer on 127.0.0.1 (the peer
  in its own process, not counted), with N1 and N2 messages, and divides the
  difference of the whole-process totals by N2 - N1 (start-up, imports, connect
  and disconnect cancel out). Counts do not depend on the machine's load: three
  repetitions agree within 0.15 % (producers, codec) and about 1 % (consumers),
  so each ceiling is today's figure + 3 % and a send(), an ACK or a parse a few
  per cent dearer FAILS (a loop of ~1 microsecond added to ``send()``: +35 %;
  one of ~0.1 microsecond: +6 %).
  Measured once per gate (``instructions_repeat``, default 1: not per
  ``--runs``), before the ratio runs; about 2.7 minutes for the first nine cases.
  Cases: produce async and in transactions of 100 (stomp.py API), JMS-API async
  send, consume auto / client-individual / cumulative every 100 / optimized acks
  at prefetch 1000, client-individual at prefetch 1, the compiled codec per
  MESSAGE frame, and amqstomp.aio's async send and ``async for`` consumers (auto
  and client-individual at prefetch 1000, client-individual at prefetch 1). Without valgrind these metrics FAIL (never skip): ``bash
  scripts/setup.sh --system`` installs it as root.

The ratios:

* codec -- ``bench/codec.py --frames 20000 --skip-big`` in a child process: the
  compiled parser's frames/s over stomp.py's (and the pure-Python twin's);
* consume -- cases of ``bench/consume.py`` (its :func:`run_case`: a fresh
  backlog per case, the consumer in a child process) on ONE local ActiveMQ the
  gate starts for the whole run and stops at the end: amqstomp's optimized acks
  against stomp.py ``client-individual`` and ``auto`` at prefetch 1000 (msg/s,
  and the consumer's CPU per message: lower is better), and cumulative
  ``client`` acks at prefetch 10 (stomp.py stalls 40 ms per window there);
* aio -- ``bench/aio.py --stompman --runs 1`` in a child process (its own ActiveMQ;
  ``aio_count`` 256 B messages per case): amqstomp.aio's ``async for`` + ``await
  message.ack()`` consumer (client-individual) over stompman 3.x's at prefetch 1000 (msg/s,
  and stompman's process CPU per message over aio's: the steadier of the two under load),
  aio's at-least-once batched acks (``optimize_acknowledge``) over the same stompman row,
  and over amqstomp's threaded API at prefetch 1 (msg/s); both of a pair measured in the
  same run (issue 23);
* produce -- when ``bench/produce.py`` exists and the floors file gates one of
  its figures (``bench = "produce"`` plus a ``json_key`` into its JSON); it
  is skipped with a note otherwise.

Thresholds live in ONE file, ``bench/floors.toml``: per metric a
``direction`` and either a ``floor`` (``direction = "higher"``: fails when
the median is below it) or a ``ceiling`` (``direction = "lower"``: fails when
the median is above it), and optionally a ``[settings]`` table (frame count,
backlogs) the floors were measured with. A metric that could not be measured
in every run (a case failed, a stall, optimized acks missing) fails too.

Output: a table (metric, unit, median, the samples, floor/ceiling, PASS/FAIL),
the JSON of the run (``bench/results/gate.json``, with each instruction case's
totals) and a chart of the ratios against their floors
(``bench/results/gate.png``; ratios only; needs matplotlib -- without it the
gate warns and still decides).

Exit status: 0 every metric passed; 1 a metric failed; 2 bad usage or floors file.

Usage::

    python bench/gate.py [--floors PATH] [--runs N] [--only GLOB[,GLOB]]
                         [--json PATH] [--png PATH | --no-png] [--list]
                         [--codec-frames N] [--consume-backlog N] [--instructions-repeat N] ...

``--only 'instructions_*'`` runs the instruction part alone (no broker, no stomp.py).
"""
import argparse
import fnmatch
import json
import math
import os
import signal
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import instructions  # noqa: E402
from bench._common import (  # noqa: E402
    REPO_ROOT,
    RESULTS_DIR,
    child_env,
    format_table,
    machine_info,
    run_child,
    write_json,
)

BENCH_DIR = os.path.join(REPO_ROOT, "bench")
CODEC_PY = os.path.join(BENCH_DIR, "codec.py")
PRODUCE_PY = os.path.join(BENCH_DIR, "produce.py")
AIO_PY = os.path.join(BENCH_DIR, "aio.py")
DEFAULT_FLOORS = os.path.join(BENCH_DIR, "floors.toml")
DEFAULT_JSON = os.path.join(RESULTS_DIR, "gate.json")
DEFAULT_PNG = os.path.join(RESULTS_DIR, "gate.png")

HIGHER = "higher"  #: higher is better: the metric has a floor
LOWER = "lower"    #: lower is better: the metric has a ceiling
LIMIT_KEY = {HIGHER: "floor", LOWER: "ceiling"}

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
LIMIT_COLOR = "#1f3f8f"  # chart: the floor / ceiling marks

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

#: what the floors were measured with; ``[settings]`` in the floors file and
#: the command line override these
DEFAULT_SETTINGS: Dict[str, Any] = {
    "codec_frames": 20_000,      # MESSAGE frames (256 B bodies) per codec run
    "codec_repeat": 3,           # timings per parser inside one codec run (codec.py takes their median)
    "consume_backlog": 50_000,   # 256 B messages per prefetch-1000 case
    "consume_backlog_p10": 5_000,  # 256 B messages per prefetch-10 case (stomp.py: ~1,400 msg/s there)
    "consume_deadline_s": 60.0,  # per consume case; a stall ends as a failed sample
    "warmup_messages": 20_000,   # pushed through the broker once before the first case (its JIT)
    # bench/produce.py arguments (``--json PATH`` is appended); no floor gates the ActiveMQ Java
    # client (docs/benchmarks.md, "Against the ActiveMQ Java client"), so the gate does not run it
    "produce_args": ["--quick", "--no-java"],
    "child_timeout_s": 300.0,    # codec / produce / aio child processes
    # bench/aio.py --stompman per gate run (one repetition each; the gate takes the median of its own
    # runs): 256 B messages per consume case, and the cases the aio ratios need
    "aio_count": 10_000,
    "aio_cases": ["ack-p1000", "client-individual-p1"],
    # differential callgrind measurements per instruction metric (the gate takes their median; the
    # counts are deterministic, so one is enough: they are NOT repeated per --runs)
    "instructions_repeat": 1,
}


# =========================================================================== metrics the gate can measure


class MetricDef:
    """How to measure one gated ratio.

    Attributes:
        name (str), bench (``codec`` | ``consume`` | ``produce``),
        direction (:data:`HIGHER` | :data:`LOWER`), label (str: what it is),
        codec_case (str: a case name in bench/codec.py's JSON),
        cases ((amqstomp case, stomp.py case), each (client, ack, prefetch)),
        quantity (``msg_per_s`` | ``consume_cpu_per_msg``; aio: ``msg_per_s`` | ``cpu_per_msg``),
        backlog (str: the setting giving the consume backlog),
        json_key (str: dotted path into bench/produce.py's JSON),
        ic_case (str: a case of bench/instructions.py; ``bench = "instructions"``),
        aio_pair ((case, API, API): a case of bench/aio.py --stompman and the two APIs whose
            ``quantity`` it divides: ``msg_per_s`` ours / theirs, ``cpu_per_msg`` theirs / ours;
            ``bench = "aio"``).
    """

    def __init__(self, name: str, bench: str, direction: str, label: str, codec_case: str = "",
                 cases: Tuple[Tuple[str, str, int], ...] = (), quantity: str = "", backlog: str = "",
                 json_key: str = "", ic_case: str = "", aio_pair: Tuple[str, str, str] = ("", "", "")) -> None:
        self.name = name
        self.bench = bench
        self.direction = direction
        self.label = label
        self.codec_case = codec_case
        self.cases = cases
        self.quantity = quantity
        self.backlog = backlog
        self.json_key = json_key
        self.ic_case = ic_case
        self.aio_pair = aio_pair

    @property
    def unit(self) -> str:
        """What the figure is: ``instructions/msg`` or ``ratio``."""
        return "instructions/msg" if self.bench == "instructions" else "ratio"

    def __repr__(self) -> str:
        return "<MetricDef %s (%s, %s is better)>" % (self.name, self.bench, self.direction)


AMQ_OPT_P1000 = ("amqstomp", "optimized", 1000)
STOMPPY_IND_P1000 = ("stomp.py", "client-individual", 1000)
STOMPPY_AUTO_P1000 = ("stomp.py", "auto", 1000)
AMQ_CLIENT_P10 = ("amqstomp", "client", 10)
STOMPPY_CLIENT_P10 = ("stomp.py", "client", 10)

BUILTIN_METRICS: Dict[str, MetricDef] = {m.name: m for m in (
    MetricDef("codec_compiled_vs_stomppy", "codec", HIGHER,
              "codec frames/s, compiled / stomp.py", codec_case="amqstomp (compiled)"),
    MetricDef("codec_pure_python_vs_stomppy", "codec", HIGHER,
              "codec frames/s, pure Python / stomp.py", codec_case="amqstomp (pure Python)"),
    MetricDef("consume_p1000_optimized_vs_stomppy_individual", "consume", HIGHER,
              "consume msg/s, p1000 256 B: amqstomp optimized / stomp.py client-individual",
              cases=(AMQ_OPT_P1000, STOMPPY_IND_P1000), quantity="msg_per_s", backlog="consume_backlog"),
    MetricDef("consume_p1000_optimized_vs_stomppy_auto", "consume", HIGHER,
              "consume msg/s, p1000 256 B: amqstomp optimized / stomp.py auto",
              cases=(AMQ_OPT_P1000, STOMPPY_AUTO_P1000), quantity="msg_per_s", backlog="consume_backlog"),
    MetricDef("consume_p1000_cpu_per_msg_optimized_over_individual", "consume", LOWER,
              "consumer CPU per message, p1000 256 B: amqstomp optimized / stomp.py client-individual",
              cases=(AMQ_OPT_P1000, STOMPPY_IND_P1000), quantity="consume_cpu_per_msg",
              backlog="consume_backlog"),
    MetricDef("consume_p10_client_vs_stomppy_client", "consume", HIGHER,
              "consume msg/s, p10 256 B, ack client every 5: amqstomp / stomp.py",
              cases=(AMQ_CLIENT_P10, STOMPPY_CLIENT_P10), quantity="msg_per_s", backlog="consume_backlog_p10"),
    # issue 23: amqstomp.aio against stompman 3.x and against amqstomp's threaded API (bench/aio.py --stompman)
    MetricDef("aio_p1000_vs_stompman", "aio", HIGHER,
              "consume msg/s, p1000 256 B client-individual: amqstomp.aio async for + ack / stompman",
              aio_pair=("ack-p1000", "aio", "stompman"), quantity="msg_per_s"),
    # the load-proof one: process CPU seconds per message, stompman's over amqstomp.aio's (so higher is
    # better, like the msg/s ratio); both measured by bench/aio.py in the same run
    MetricDef("aio_p1000_cpu_vs_stompman", "aio", HIGHER,
              "consumer CPU per message, p1000 256 B client-individual: stompman / amqstomp.aio async for + ack",
              aio_pair=("ack-p1000", "aio", "stompman"), quantity="cpu_per_msg"),
    # at-least-once with batched acks (issue 23): amqstomp's cumulative ACKs (optimize_acknowledge) against
    # stompman's one ACK per message -- stompman has no batching of its own (bench/aio.py STOMPMAN_BATCHING)
    MetricDef("aio_p1000_optimized_vs_stompman", "aio", HIGHER,
              "consume msg/s, p1000 256 B: amqstomp.aio async for, optimize_acknowledge / stompman client-individual",
              aio_pair=("ack-p1000", "aio-optimized", "stompman"), quantity="msg_per_s"),
    MetricDef("aio_p1_vs_threaded", "aio", HIGHER,
              "consume msg/s, p1 256 B client-individual: amqstomp.aio async for + ack / amqstomp threaded",
              aio_pair=("client-individual-p1", "aio", "threaded"), quantity="msg_per_s"),
)}
#: callgrind instruction counts per message, one metric per case of bench/instructions.py
INSTRUCTION_PREFIX = "instructions_"
BUILTIN_METRICS.update({m.name: m for m in (
    MetricDef(INSTRUCTION_PREFIX + case.name, "instructions", LOWER,
              "instructions per message (callgrind, differential): " + case.label, ic_case=case.name)
    for case in instructions.CASES.values())})


class GatedMetric:
    """A metric as the floors file gates it: its :class:`MetricDef` plus the limit."""

    def __init__(self, definition: MetricDef, limit: float, description: str = "") -> None:
        self.definition = definition
        self.limit = float(limit)
        self.description = description or definition.label

    name = property(lambda self: self.definition.name)
    direction = property(lambda self: self.definition.direction)
    bench = property(lambda self: self.definition.bench)

    def __repr__(self) -> str:
        return "<GatedMetric %s %s %g>" % (self.name, LIMIT_KEY[self.direction], self.limit)


# =========================================================================== the decision (pure)


def usable(value: Any) -> bool:
    """A sample the median may use: a finite number above zero (a ratio)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def median_of(samples: Sequence[Any]) -> Optional[float]:
    """The median of the usable samples, or None when there is none."""
    values = [float(s) for s in samples if usable(s)]
    return statistics.median(values) if values else None


def passes(direction: str, value: float, limit: float) -> bool:
    """``value >= limit`` for :data:`HIGHER`, ``value <= limit`` for :data:`LOWER`."""
    if direction == HIGHER:
        return value >= limit
    if direction == LOWER:
        return value <= limit
    raise ValueError("direction must be %r or %r, got %r" % (HIGHER, LOWER, direction))


def judge(name: str, direction: str, limit: float, samples: Sequence[Any],
          errors: Sequence[str] = ()) -> Dict[str, Any]:
    """The gate's decision for one metric.

    Args:
        name: the metric.
        direction: :data:`HIGHER` (``limit`` is a floor) or :data:`LOWER` (a ceiling).
        limit: the floor or ceiling.
        samples: one value per run; None (or anything not a positive finite
            number) for a run that could not measure it.
        errors: why runs gave no value (reported, not judged).

    Returns:
        dict: ``metric``, ``direction``, ``limit_kind`` (floor | ceiling),
        ``limit``, ``samples``, ``median`` (of the usable samples, or None),
        ``status`` (PASS | FAIL) and ``reason`` (str).

    Rules: FAIL when a run gave no value (a broken case is a regression too),
    else FAIL when the median is below the floor / above the ceiling, else PASS.
    """
    if direction not in LIMIT_KEY:
        raise ValueError("direction must be %r or %r, got %r" % (HIGHER, LOWER, direction))
    kind = LIMIT_KEY[direction]
    samples = list(samples)
    med = median_of(samples)
    verdict: Dict[str, Any] = {"metric": name, "direction": direction, "limit_kind": kind,
                               "limit": float(limit), "samples": samples, "median": med}
    missing = sum(1 for s in samples if not usable(s))
    if not samples:
        verdict.update(status=FAIL, reason="no run measured it")
    elif missing:
        why = "; ".join(dict.fromkeys(e for e in errors if e)) or "no value"
        verdict.update(status=FAIL, reason="%d of %d runs gave no value: %s" % (missing, len(samples), why))
    elif med is not None and passes(direction, med, limit):
        verdict.update(status=PASS, reason="median %s %s %s %s" % (
            fmt_ratio(med), ">=" if direction == HIGHER else "<=", kind, fmt_ratio(limit)))
    else:
        verdict.update(status=FAIL, reason="median %s %s %s %s" % (
            fmt_ratio(med), "<" if direction == HIGHER else ">", kind, fmt_ratio(limit)))
    return verdict


def skipped(name: str, direction: str, limit: float, reason: str) -> Dict[str, Any]:
    """The verdict of a metric that is not measured on purpose (no bench/produce.py)."""
    return {"metric": name, "direction": direction, "limit_kind": LIMIT_KEY[direction], "limit": float(limit),
            "samples": [], "median": None, "status": SKIP, "reason": reason}


def gate_exit_code(verdicts: Sequence[Dict[str, Any]]) -> int:
    """1 when any verdict is FAIL, else 0 (SKIP does not fail)."""
    return EXIT_FAIL if any(v["status"] == FAIL for v in verdicts) else EXIT_PASS


def fmt_ratio(x: Optional[float]) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return "%.0f" % x
    if x >= 10:
        return "%.1f" % x
    return "%.2f" % x


# =========================================================================== the floors file


class FloorsError(ValueError):
    """The floors file is missing, not TOML, or names an unknown / inconsistent metric."""


def _toml_loads(text: str) -> Dict[str, Any]:
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover - older Pythons
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise FloorsError("reading the floors file needs Python 3.11+ (tomllib) or `pip install tomli`")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FloorsError("not valid TOML: %s" % exc)


def parse_floors(text: str, source: str = "<floors>") -> Tuple[Dict[str, Any], List[GatedMetric]]:
    """``[settings]`` and the ``[metrics.NAME]`` tables of a floors file.

    A metric table needs ``direction`` (``"higher"`` or ``"lower"``) and the
    matching limit, ``floor`` for higher or ``ceiling`` for lower (the other
    key is an error: it would silently gate the wrong way). A built-in metric's
    direction must agree with the gate's. Any other name needs
    ``bench = "produce"`` and ``json_key`` (dotted path into bench/produce.py's
    JSON). Optional: ``description``.

    Raises:
        FloorsError: with ``source`` and the offending metric in the message.
    """
    data = _toml_loads(text)
    unknown_top = set(data) - {"settings", "metrics"}
    if unknown_top:
        raise FloorsError("%s: unknown table(s) %s (expected [settings] and [metrics.NAME])"
                          % (source, ", ".join(sorted(unknown_top))))
    settings = dict(data.get("settings") or {})
    bad = set(settings) - set(DEFAULT_SETTINGS)
    if bad:
        raise FloorsError("%s: unknown setting(s) %s (known: %s)" % (
            source, ", ".join(sorted(bad)), ", ".join(DEFAULT_SETTINGS)))
    tables = data.get("metrics") or {}
    if not isinstance(tables, dict) or not tables:
        raise FloorsError("%s: no [metrics.NAME] table: nothing to gate" % source)
    metrics: List[GatedMetric] = []
    for name, table in tables.items():
        where = "%s: [metrics.%s]" % (source, name)
        if not isinstance(table, dict):
            raise FloorsError("%s is not a table" % where)
        direction = table.get("direction")
        if direction not in LIMIT_KEY:
            raise FloorsError('%s: direction must be "higher" (a floor) or "lower" (a ceiling), got %r'
                              % (where, direction))
        key, other = LIMIT_KEY[direction], LIMIT_KEY[HIGHER if direction == LOWER else LOWER]
        if other in table:
            raise FloorsError('%s: direction = "%s" takes a %s, not a %s' % (where, direction, key, other))
        limit = table.get(key)
        if limit is None or not usable(limit):
            raise FloorsError("%s: %s must be a number above 0, got %r" % (where, key, limit))
        allowed = {"direction", key, "description", "bench", "json_key"}
        extra = set(table) - allowed
        if extra:
            raise FloorsError("%s: unknown key(s) %s" % (where, ", ".join(sorted(extra))))
        if name in BUILTIN_METRICS:
            definition = BUILTIN_METRICS[name]
            if direction != definition.direction:
                raise FloorsError('%s: this metric is "%s is better" (a %s), the file says "%s"' % (
                    where, definition.direction, LIMIT_KEY[definition.direction], direction))
            if table.get("bench", definition.bench) != definition.bench:
                raise FloorsError("%s: this metric comes from bench %r" % (where, definition.bench))
        else:
            if table.get("bench") != "produce" or not table.get("json_key"):
                raise FloorsError('%s: unknown metric (built-in: %s); a bench/produce.py figure needs '
                                  'bench = "produce" and json_key = "dotted.path"'
                                  % (where, ", ".join(BUILTIN_METRICS)))
            definition = MetricDef(name, "produce", direction, table.get("description") or table["json_key"],
                                   json_key=str(table["json_key"]))
        metrics.append(GatedMetric(definition, float(limit), table.get("description", "")))
    return settings, metrics


def load_floors(path: str) -> Tuple[Dict[str, Any], List[GatedMetric]]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise FloorsError("cannot read the floors file: %s" % exc)
    return parse_floors(text, path)


def select(metrics: Sequence[GatedMetric], only: str) -> List[GatedMetric]:
    """The metrics matching any of the comma-separated globs in ``only`` (all when empty)."""
    patterns = [p.strip() for p in (only or "").split(",") if p.strip()]
    if not patterns:
        return list(metrics)
    return [m for m in metrics if any(fnmatch.fnmatchcase(m.name, p) for p in patterns)]


# =========================================================================== measuring


def json_lookup(data: Any, key: str) -> Any:
    """``data`` walked along a dotted path (``a.b.0.c``: dict keys, list indexes)."""
    for part in key.split("."):
        if isinstance(data, list):
            data = data[int(part)]
        else:
            data = data[part]
    return data


def run_json_child(argv: List[str], json_path: str, timeout: float) -> Tuple[Optional[Dict[str, Any]], str]:
    """Run a bench in a child process that writes ``json_path``; (its JSON or None, error)."""
    child = run_child(argv, timeout=timeout, env=child_env())
    if child.timed_out:
        return None, "%s killed after %.0f s" % (os.path.basename(argv[1]), timeout)
    if child.returncode != 0 or not os.path.exists(json_path):
        tail = (child.stderr.strip() or child.stdout.strip()).splitlines()[-3:]
        return None, "%s exited %d: %s" % (os.path.basename(argv[1]), child.returncode, " | ".join(tail))
    try:
        with open(json_path) as fh:
            return json.load(fh), ""
    except ValueError as exc:
        return None, "%s wrote unreadable JSON: %s" % (os.path.basename(argv[1]), exc)


def run_codec(settings: Dict[str, Any]) -> Tuple[Optional[Dict[str, Any]], str]:
    """One bench/codec.py run (no big-body case); (its JSON, error)."""
    with tempfile.TemporaryDirectory(prefix="amqstomp-gate-") as tmp:
        path = os.path.join(tmp, "codec.json")
        argv = [sys.executable, CODEC_PY, "--frames", str(int(settings["codec_frames"])),
                "--repeat", str(int(settings["codec_repeat"])), "--skip-big", "--json", path]
        return run_json_child(argv, path, float(settings["child_timeout_s"]))


def run_produce(settings: Dict[str, Any]) -> Tuple[Optional[Dict[str, Any]], str]:
    """One bench/produce.py run with ``produce_args`` and ``--json``; (its JSON, error)."""
    with tempfile.TemporaryDirectory(prefix="amqstomp-gate-") as tmp:
        path = os.path.join(tmp, "produce.json")
        argv = [sys.executable, PRODUCE_PY] + [str(a) for a in settings["produce_args"]] + ["--json", path]
        return run_json_child(argv, path, float(settings["child_timeout_s"]))


def run_aio(settings: Dict[str, Any]) -> Tuple[Optional[Dict[str, Any]], str]:
    """One bench/aio.py --stompman run (one repetition of ``aio_cases``); (its JSON, error)."""
    with tempfile.TemporaryDirectory(prefix="amqstomp-gate-") as tmp:
        path = os.path.join(tmp, "aio.json")
        argv = [sys.executable, AIO_PY, "--stompman", "--runs", "1", "--count", str(int(settings["aio_count"])),
                "--cases", ",".join(settings["aio_cases"]), "--json", path]
        return run_json_child(argv, path, float(settings["child_timeout_s"]))


def aio_value(data: Optional[Dict[str, Any]], definition: MetricDef) -> Tuple[Optional[float], str]:
    """One ratio of two APIs, both rows from the same bench/aio.py --stompman run.

    ``quantity`` ``msg_per_s``: ours over theirs; ``cpu_per_msg`` (the child's process CPU
    seconds per message, ``cpu_us_per_msg`` in the rows): theirs over ours. Either way above 1
    means amqstomp is ahead. Returns (ratio or None, why None)."""
    if data is None:
        return None, ""
    case, ours, theirs = definition.aio_pair
    field = {"msg_per_s": "msg_per_s", "cpu_per_msg": "cpu_us_per_msg"}.get(definition.quantity)
    if field is None:
        raise ValueError("aio metric %s: unknown quantity %r" % (definition.name, definition.quantity))
    values = {row.get("api"): row.get(field) for row in (data.get("stompman") or {}).get("rows", ())
              if row.get("case") == case}
    a, b = values.get(ours), values.get(theirs)
    if not usable(a) or not usable(b):
        return None, "bench/aio.py reported no %s for %s %s / %s" % (field, case, ours, theirs)
    if field == "cpu_us_per_msg":
        return float(b) / float(a), ""
    return float(a) / float(b), ""


def codec_value(data: Optional[Dict[str, Any]], definition: MetricDef) -> Tuple[Optional[float], str]:
    if data is None:
        return None, ""
    try:
        return float(data["cases"][definition.codec_case]["ratio"]), ""
    except (KeyError, TypeError, ValueError):
        return None, "bench/codec.py reported no ratio for %r" % definition.codec_case


def produce_value(data: Optional[Dict[str, Any]], definition: MetricDef) -> Tuple[Optional[float], str]:
    if data is None:
        return None, ""
    try:
        return float(json_lookup(data, definition.json_key)), ""
    except (KeyError, IndexError, TypeError, ValueError):
        return None, "bench/produce.py's JSON has no number at %r" % definition.json_key


def case_id(key: Tuple[str, str, int]) -> str:
    return "%s:%s:p%d:256B" % key


def _row_quantity(row: Optional[Dict[str, Any]], quantity: str) -> Tuple[Optional[float], str]:
    if not row:
        return None, "case not run"
    if row.get("status") != "ok":
        problems = "; ".join(row.get("problems") or []) or row.get("reason") or ""
        return None, "%s %s%s" % (row.get("id"), row.get("status"), (": " + problems) if problems else "")
    if quantity == "msg_per_s":
        value = row.get("msg_per_s")
    elif quantity == "consume_cpu_per_msg":
        received, cpu = row.get("received"), row.get("consume_cpu_s")
        value = cpu / received if received and cpu is not None else None
    else:
        raise ValueError("unknown quantity %r" % quantity)
    if value is None or not usable(value):
        return None, "%s: no %s" % (row.get("id"), quantity)
    return float(value), ""


def consume_value(rows: Dict[Tuple[str, str, int], Dict[str, Any]],
                  definition: MetricDef) -> Tuple[Optional[float], str]:
    """amqstomp's quantity over stomp.py's, from one run's rows (keyed by (client, ack, prefetch))."""
    ours, theirs = definition.cases
    a, err_a = _row_quantity(rows.get(ours), definition.quantity)
    b, err_b = _row_quantity(rows.get(theirs), definition.quantity)
    if a is None or b is None:
        return None, "; ".join(e for e in (err_a, err_b) if e)
    return a / b, ""


def consume_plan(metrics: Sequence[GatedMetric], settings: Dict[str, Any]) -> List[Tuple[Tuple[str, str, int], int]]:
    """The consume cases one run needs, in order, with their backlogs (each case once)."""
    plan: Dict[Tuple[str, str, int], int] = {}
    for m in metrics:
        if m.bench != "consume":
            continue
        for key in m.definition.cases:
            plan.setdefault(key, int(settings[m.definition.backlog]))
    # stomp.py and amqstomp alternate within a prefetch; big prefetch first
    return sorted(plan.items(), key=lambda kv: (-kv[0][2], kv[0][0] != "stomp.py", kv[0][1]))


_ROW_KEEP = ("id", "client", "ack", "prefetch", "body_size", "count", "status", "msg_per_s", "cpu_s",
             "consume_cpu_s", "received", "max_gap_ms", "stall", "lost", "duplicates", "dequeue_count",
             "problems", "reason", "child_stderr_tail")


def _brief_row(row: Dict[str, Any]) -> Dict[str, Any]:
    out = {k: row[k] for k in _ROW_KEEP if k in row}
    child = row.get("child") or {}
    for k in ("codec", "flow", "module_version"):
        if k in child:
            out["child_" + k] = child[k]
    return out


class ConsumeRunner:
    """One broker for every consume case of the gate (started lazily, stopped by :meth:`close`)."""

    def __init__(self, settings: Dict[str, Any], log: Callable[[str], None]) -> None:
        self.settings = settings
        self.log = log
        self.broker: Any = None
        self.optimized: Optional[Tuple[bool, str]] = None
        self.broker_info: Dict[str, Any] = {}
        self.start_error: Optional[str] = None
        self.tag = uuid.uuid4().hex[:6]

    def _start(self) -> None:
        from bench import consume
        from bench._common import drain_queue, fill_queue, start_broker

        self.broker = start_broker(persistent=False)
        self.broker_info = {"url": self.broker.url, "startup_s": self.broker.startup_seconds,
                            "pid": self.broker.pid}
        self.log("broker %s up in %.1f s" % (self.broker.url, self.broker.startup_seconds or 0.0))
        warm = int(self.settings["warmup_messages"])
        if warm > 0:
            queue = "/queue/bench.gate.%s.warmup" % self.tag
            fill_queue(self.broker.host_and_ports, queue, warm, 256)
            drain_queue(self.broker.host_and_ports, queue, expected=warm, timeout=60)
        self.optimized = consume.probe_optimized(self.broker.host_and_ports)
        if not self.optimized[0]:
            self.log("amqstomp optimized acks NOT AVAILABLE: %s" % self.optimized[1])

    def run(self, plan: Sequence[Tuple[Tuple[str, str, int], int]], run_no: int
            ) -> Dict[Tuple[str, str, int], Dict[str, Any]]:
        """Every case of ``plan`` once; rows keyed by (client, ack, prefetch)."""
        from bench import consume

        rows: Dict[Tuple[str, str, int], Dict[str, Any]] = {}
        if self.broker is None and self.start_error is None:
            try:
                self._start()
            except Exception as exc:
                self.start_error = "no broker: " + "".join(
                    traceback.format_exception_only(type(exc), exc)).strip()[:500]
                self.log(self.start_error)
        for key, backlog in plan:
            client, ack, prefetch = key
            if self.start_error:
                rows[key] = {"id": case_id(key), "status": "error", "problems": [self.start_error]}
                continue
            try:
                case = consume.Case(client, ack, prefetch, 256, backlog)
                row = consume.run_case(self.broker, case, deadline=float(self.settings["consume_deadline_s"]),
                                       tag="%s.r%d" % (self.tag, run_no), optimized=self.optimized)
            except Exception as exc:  # one broken case is a failed sample, not a crashed gate
                row = {"id": case_id(key), "status": "error",
                       "problems": ["".join(traceback.format_exception_only(type(exc), exc)).strip()]}
            rows[key] = row
            cpu = _row_quantity(row, "consume_cpu_per_msg")[0]
            self.log("  run %d  %-36s n=%-6d %9s msg/s  consume CPU %s s/10k  %s" % (
                run_no, row.get("id", case_id(key)), backlog,
                "-" if row.get("msg_per_s") is None else "%.0f" % row["msg_per_s"],
                "-" if cpu is None else "%.3f" % (cpu * 10000), row.get("status")))
        return rows

    def close(self) -> None:
        if self.broker is not None:
            broker, self.broker = self.broker, None
            broker.stop()
            self.log("broker stopped")


def measure_instructions(metrics: Sequence[GatedMetric], settings: Dict[str, Any],
                         log: Callable[[str], None] = print) -> Dict[str, Any]:
    """The instruction metrics: ``instructions_repeat`` differential callgrind
    measurements of each one's bench/instructions.py case (never per --runs: the
    counts do not depend on the machine's load).

    Without a working valgrind every instruction metric gets one missing sample
    and the reason, so it FAILS (an instruction ceiling is never skipped).

    Returns:
        dict: ``samples`` {metric: [value | None]}, ``errors`` {metric: [str]},
        ``raw`` {metric: bench/instructions.py's result for its case}.
    """
    samples: Dict[str, List[Optional[float]]] = {}
    errors: Dict[str, List[str]] = {}
    raw: Dict[str, Any] = {}
    repeat = max(1, int(settings["instructions_repeat"]))
    runner = instructions.Runner(log=log)
    try:
        if runner.valgrind is None:
            print("gate: INSTRUCTION METRICS CANNOT BE MEASURED: %s" % runner.valgrind_error, file=sys.stderr,
                  flush=True)
        for m in metrics:
            if runner.valgrind is None:
                samples[m.name], errors[m.name] = [None], [runner.valgrind_error]
                continue
            result = runner.measure(instructions.CASES[m.definition.ic_case], repeat)
            raw[m.name] = result
            samples[m.name] = list(result["samples"])
            errors[m.name] = []
            if result["error"]:
                samples[m.name].append(None)  # a case that failed fails its metric
                errors[m.name].append(result["error"])
    finally:
        runner.close()
    return {"samples": samples, "errors": errors, "raw": raw}


def measure(metrics: Sequence[GatedMetric], settings: Dict[str, Any], runs: int,
            log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Run every selected bench ``runs`` times; per metric its samples and errors.

    The instruction metrics are measured first, once (:func:`measure_instructions`).

    Returns:
        dict: ``samples`` {metric: [value | None per run]}, ``errors`` {metric:
        [str]}, ``raw`` (per run: codec JSON, brief consume rows, produce JSON),
        ``instructions`` (per instruction metric, bench/instructions.py's result),
        ``broker`` (url, start-up), ``optimized_ack``.
    """
    ic_metrics = [m for m in metrics if m.bench == "instructions"]
    ic: Dict[str, Any] = {"samples": {}, "errors": {}, "raw": {}}
    if ic_metrics:
        log("instruction counts: %d case(s) under callgrind, one at a time" % len(ic_metrics))
        ic = measure_instructions(ic_metrics, settings, log)
    metrics = [m for m in metrics if m.bench != "instructions"]
    benches = {m.bench for m in metrics}
    samples: Dict[str, List[Optional[float]]] = {m.name: [] for m in metrics}
    errors: Dict[str, List[str]] = {m.name: [] for m in metrics}
    samples.update(ic["samples"])
    errors.update(ic["errors"])
    raw: List[Dict[str, Any]] = []
    if not metrics:
        runs = 0  # instruction metrics only: no ratio runs
    plan = consume_plan(metrics, settings)
    consumer = ConsumeRunner(settings, log) if plan else None
    try:
        for run_no in range(1, runs + 1):
            t0 = time.monotonic()
            log("run %d/%d" % (run_no, runs))
            run_raw: Dict[str, Any] = {"run": run_no}
            codec_data = produce_data = aio_data = None
            codec_err = produce_err = aio_err = ""
            if "codec" in benches:
                codec_data, codec_err = run_codec(settings)
                run_raw["codec"] = codec_data if codec_data is not None else {"error": codec_err}
                if codec_data:
                    log("  run %d  codec %d frames: compiled %.1fx, pure Python %.2fx stomp.py" % (
                        run_no, codec_data.get("frames", 0),
                        codec_data["cases"].get("amqstomp (compiled)", {}).get("ratio", float("nan")),
                        codec_data["cases"].get("amqstomp (pure Python)", {}).get("ratio", float("nan"))))
                else:
                    log("  run %d  codec FAILED: %s" % (run_no, codec_err))
            rows: Dict[Tuple[str, str, int], Dict[str, Any]] = {}
            if consumer is not None:
                rows = consumer.run(plan, run_no)
                run_raw["consume"] = [_brief_row(r) for r in rows.values()]
            if "produce" in benches:
                produce_data, produce_err = run_produce(settings)
                run_raw["produce"] = produce_data if produce_data is not None else {"error": produce_err}
                log("  run %d  produce %s" % (run_no, "ok" if produce_data else "FAILED: " + produce_err))
            if "aio" in benches:
                aio_data, aio_err = run_aio(settings)
                run_raw["aio"] = aio_data if aio_data is not None else {"error": aio_err}
                log("  run %d  aio %s" % (run_no, "ok" if aio_data else "FAILED: " + aio_err))
            for m in metrics:
                if m.bench == "codec":
                    value, err = codec_value(codec_data, m.definition)
                    err = err or codec_err
                elif m.bench == "consume":
                    value, err = consume_value(rows, m.definition)
                elif m.bench == "aio":
                    value, err = aio_value(aio_data, m.definition)
                    err = err or aio_err
                else:
                    value, err = produce_value(produce_data, m.definition)
                    err = err or produce_err
                samples[m.name].append(value)
                if value is None:
                    errors[m.name].append("run %d: %s" % (run_no, err or "no value"))
            run_raw["wall_s"] = time.monotonic() - t0
            raw.append(run_raw)
    finally:
        if consumer is not None:
            consumer.close()
    out: Dict[str, Any] = {"samples": samples, "errors": errors, "raw": raw, "instructions": ic["raw"]}
    if consumer is not None:
        out["broker"] = consumer.broker_info
        if consumer.optimized is not None:
            out["optimized_ack"] = {"available": consumer.optimized[0], "reason": consumer.optimized[1]}
    return out


# =========================================================================== output


def format_verdicts(verdicts: Sequence[Dict[str, Any]]) -> str:
    rows = []
    for v in verdicts:
        samples = " ".join(fmt_ratio(s) if usable(s) else "-" for s in v["samples"]) or "-"
        limit = "%s %s" % (">=" if v["direction"] == HIGHER else "<=", fmt_ratio(v["limit"]))
        rows.append([v["metric"], v.get("unit", "ratio"), v["direction"], fmt_ratio(v["median"]), samples,
                     "%s %s" % (v["limit_kind"], limit), v["status"]])
    return format_table(rows, ["metric", "unit", "better", "median", "samples", "limit", "result"], "lllrrrl")


def write_png(path: str, verdicts: Sequence[Dict[str, Any]], title: str) -> Tuple[Optional[str], str]:
    """A chart of each ratio (bar from parity, its samples as dots) against its
    floor / ceiling (a black bar); returns (the path, "") or (None, why not)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, "matplotlib is not installed (pip install matplotlib)"
    # ratios only: the instruction counts (thousands per message) are in the table and the JSON
    shown = [v for v in verdicts if v["status"] != SKIP and v.get("unit", "ratio") == "ratio"]
    if not shown:
        return None, "no ratio was measured (the chart shows ratios only)"
    n = len(shown)
    height = 2.0 + 0.75 * n
    fig, ax = plt.subplots(figsize=(12, height))
    values = [1.0]
    for v in shown:
        values += [s for s in v["samples"] if usable(s)] + [v["limit"]]
    lo, hi = min(values) / 1.6, max(values) * 6.0
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.axvline(1.0, color="0.45", linestyle="--", linewidth=1)
    colors = {PASS: "#3a9d4a", FAIL: "#d2382f"}
    labels = []
    for i, v in enumerate(shown):
        y = n - 1 - i
        med = v["median"]
        color = colors.get(v["status"], "0.6")
        if med is not None:
            left, right = min(1.0, med), max(1.0, med)
            ax.barh(y, right - left, left=left, height=0.5, color=color, alpha=0.85)
        pts = [s for s in v["samples"] if usable(s)]
        ax.plot(pts, [y] * len(pts), "o", color="black", markersize=4, zorder=3)
        ax.plot([v["limit"], v["limit"]], [y - 0.36, y + 0.36], color=LIMIT_COLOR, linewidth=3.5, zorder=4)
        sign = ">=" if v["direction"] == HIGHER else "<="
        text = "%s  (%s %s %s)  %s" % (fmt_ratio(med) + "x" if med is not None else "not measured",
                                     v["limit_kind"], sign, fmt_ratio(v["limit"]), v["status"])
        ax.text(max([med or 0.0, v["limit"], 1.0] + pts) * 1.15, y, text, va="center", fontsize=9,
                color=color if v["status"] == FAIL else "black", fontweight="bold" if v["status"] == FAIL else None)
        labels.append("%s\n(%s is better)" % (v["metric"], v["direction"]))
    ax.set_yticks(range(n - 1, -1, -1))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("amqstomp / stomp.py, measured in the same run (log scale)")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    fig.legend(handles=[Patch(color=colors[PASS], label="median (PASS)"),
                        Patch(color=colors[FAIL], label="median (FAIL)"),
                       Line2D([], [], marker="o", color="black", linestyle="", markersize=4, label="one run"),
                       Line2D([], [], color=LIMIT_COLOR, linewidth=3.5, label="floor / ceiling"),
                       Line2D([], [], color="0.45", linestyle="--", linewidth=1, label="stomp.py = 1")],
               loc="lower center", ncol=5, fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", which="both", color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)
    fig.tight_layout(rect=(0, 0.35 / height, 1, 1))  # room for the legend under the axis label
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path, ""


# =========================================================================== main


def effective_settings(file_settings: Dict[str, Any], args: argparse.Namespace) -> Dict[str, Any]:
    settings = dict(DEFAULT_SETTINGS)
    settings.update(file_settings)
    for key in ("codec_frames", "codec_repeat", "consume_backlog", "consume_backlog_p10", "consume_deadline_s",
                "instructions_repeat"):
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = value
    return settings


def _raise_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds: the broker is stopped in a finally


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--floors", default=DEFAULT_FLOORS, help="floors file (default bench/floors.toml)")
    ap.add_argument("--runs", type=int, default=3, help="runs per metric; the median is gated (default 3)")
    ap.add_argument("--only", default="", metavar="GLOB[,GLOB]", help="gate only the metrics matching these")
    ap.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help="results (default bench/results/gate.json)")
    ap.add_argument("--png", default=DEFAULT_PNG, metavar="PATH", help="chart (default bench/results/gate.png)")
    ap.add_argument("--no-png", action="store_true", help="no chart")
    ap.add_argument("--list", action="store_true", help="print the gated metrics and their limits, run nothing")
    ap.add_argument("--codec-frames", dest="codec_frames", type=int, help="override [settings] codec_frames")
    ap.add_argument("--codec-repeat", dest="codec_repeat", type=int, help="override [settings] codec_repeat")
    ap.add_argument("--consume-backlog", dest="consume_backlog", type=int,
                    help="override [settings] consume_backlog (prefetch 1000 cases)")
    ap.add_argument("--consume-backlog-p10", dest="consume_backlog_p10", type=int,
                    help="override [settings] consume_backlog_p10")
    ap.add_argument("--consume-deadline", dest="consume_deadline_s", type=float,
                    help="override [settings] consume_deadline_s")
    ap.add_argument("--instructions-repeat", dest="instructions_repeat", type=int,
                    help="override [settings] instructions_repeat (differential callgrind measurements per case)")
    args = ap.parse_args(argv)

    if args.runs < 1:
        ap.error("--runs must be at least 1")
    try:
        file_settings, metrics = load_floors(args.floors)
    except FloorsError as exc:
        print("gate: bad floors file: %s" % exc, file=sys.stderr)
        return EXIT_USAGE
    chosen = select(metrics, args.only)
    if not chosen:
        print("gate: --only %r matches none of: %s" % (args.only, ", ".join(m.name for m in metrics)),
              file=sys.stderr)
        return EXIT_USAGE
    settings = effective_settings(file_settings, args)
    if args.list:
        for m in chosen:
            print("%-52s %-12s %s %s  %s" % (m.name, m.bench, LIMIT_KEY[m.direction], fmt_ratio(m.limit),
                                            m.description))
        return EXIT_PASS

    notes: List[str] = []
    verdicts_skipped: List[Dict[str, Any]] = []
    to_measure: List[GatedMetric] = []
    has_produce = os.path.exists(PRODUCE_PY)
    for m in chosen:
        if m.bench == "produce" and not has_produce:
            verdicts_skipped.append(skipped(m.name, m.direction, m.limit, "bench/produce.py does not exist"))
        else:
            to_measure.append(m)
    if not has_produce:
        notes.append("produce: skipped, bench/produce.py does not exist yet")
    elif not any(m.bench == "produce" for m in metrics):
        notes.append("produce: bench/produce.py exists but %s gates none of its ratios "
                     '(add [metrics.NAME] with bench = "produce" and json_key)' % os.path.relpath(args.floors))
    if any(m.bench in ("codec", "consume") for m in to_measure):
        try:
            import stomp  # noqa: F401  (the baseline of every ratio)
        except ImportError:
            print("gate: stomp.py is not installed (the baseline of every ratio): pip install 'stomp.py>=8'",
                  file=sys.stderr)
            return EXIT_USAGE

    if threading_is_main():
        signal.signal(signal.SIGTERM, _raise_on_sigterm)
    t0 = time.monotonic()
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    n_ic = sum(1 for m in chosen if m.bench == "instructions")
    print("gate: %d metric(s): %d ratio(s), median of %d run(s); %d instruction count(s), median of %d "
          "differential callgrind measurement(s); floors %s" % (
              len(chosen), len(chosen) - n_ic, args.runs, n_ic, int(settings["instructions_repeat"]),
              os.path.relpath(args.floors)), flush=True)
    for note in notes:
        print("note: " + note, flush=True)

    def log(line: str) -> None:
        print(line, flush=True)

    measured = measure(to_measure, settings, args.runs, log) if to_measure else {
        "samples": {}, "errors": {}, "raw": []}
    verdicts = [judge(m.name, m.direction, m.limit, measured["samples"][m.name], measured["errors"][m.name])
                for m in to_measure]
    order = {m.name: i for i, m in enumerate(chosen)}
    verdicts = sorted(verdicts + verdicts_skipped, key=lambda v: order[v["metric"]])
    for v in verdicts:
        m = next(m for m in chosen if m.name == v["metric"])
        v["description"] = m.description
        v["unit"] = m.definition.unit
    code = gate_exit_code(verdicts)
    wall = time.monotonic() - t0

    print("\n== performance gate: ratios amqstomp / stomp.py (median of %d run(s)), instructions per message "
          "(callgrind) ==" % args.runs)
    print(format_verdicts(verdicts))
    failed = [v for v in verdicts if v["status"] == FAIL]
    for v in failed:
        print("FAIL %s: %s" % (v["metric"], v["reason"]))
    for v in verdicts:
        if v["status"] == SKIP:
            print("SKIP %s: %s" % (v["metric"], v["reason"]))

    result = {
        "bench": "gate", "started": started, "passed": code == EXIT_PASS, "exit_code": code,
        "floors": os.path.abspath(args.floors), "runs": args.runs, "only": args.only or None,
        "settings": settings, "machine": machine_info(), "notes": notes, "verdicts": verdicts,
        "errors": measured["errors"], "broker": measured.get("broker"),
        "optimized_ack": measured.get("optimized_ack"), "raw_runs": measured["raw"],
        "instructions": measured.get("instructions"), "wall_s": wall,
    }
    if args.json:
        print("results written to %s" % write_json(args.json, result))
    if not args.no_png and args.png:
        title = "amqstomp / stomp.py performance gate: %s (median of %d runs, %s, %d CPUs)" % (
            "PASSED" if code == EXIT_PASS else "FAILED", args.runs, started[:16].replace("T", " "),
            os.cpu_count() or 0)
        png, why = write_png(args.png, verdicts, title)
        if png:
            print("chart written to %s" % png)
        else:
            print("warning: no chart: %s; the gate still decides" % why, file=sys.stderr)
    print("gate %s in %.0f s%s" % ("PASSED" if code == EXIT_PASS else "FAILED", wall,
                                   (": " + ", ".join(v["metric"] for v in failed)) if failed else ""))
    return code


def threading_is_main() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


if __name__ == "__main__":
    sys.exit(main())
