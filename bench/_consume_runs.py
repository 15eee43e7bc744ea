"""bench/consume.py's repetitions (``--runs N``): run order, per-case medians, medians of ratios.

Pure functions over the case rows :func:`bench.consume.run_case` returns (each with a ``run``
number, 1..N; a row without one, as in a single-run JSON saved before ``--runs``, is run 1):

* :func:`run_order` -- the cases of one repetition: within each (body, prefetch) block the ack
  modes' order rotates from run to run, and within each ack mode the clients' order, so no
  client always goes first (as bench/produce.py rotates its clients);
* :func:`summarize_cases` -- one entry per case: the median msg/s and CPU of its ok runs, every
  run's value (``None`` for a failed one) and ``ok_runs`` of ``runs``;
* :func:`median_ratios` -- the ratio tables of each repetition (computed *inside* it: both sides
  of a ratio from the same run) merged into one: each number is the median of the runs' ratios,
  with the runs' values beside it as ``<field>_runs`` (``None`` where that run had no ratio);
* :func:`with_runs` -- a median with its runs' spread for a table: ``"1.28x (1.08-1.98)"``.
"""
import statistics
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

#: the ratio tables of bench/consume.compute_ratios and the fields naming an entry in each
RATIO_TABLES: Dict[str, Tuple[str, ...]] = {
    "pairs": ("ack", "prefetch", "body_size"),
    "headline": ("prefetch", "body_size"),
    "java_pairs": ("client", "ack", "prefetch", "body_size"),
    "ceiling_pairs": ("client", "ack", "prefetch", "body_size"),
}
#: a case row's numbers that get a median (and a ``<name>_runs`` list) over its repetitions
CASE_NUMBERS = ("msg_per_s", "cpu_per_10k_s", "consume_cpu_per_10k_s", "cpu_per_mib_vs_memcpy",
                "sys_per_mib_vs_memcpy")


def run_of(row: Dict[str, Any]) -> int:
    """The repetition a row belongs to (1 for a row saved before ``--runs``)."""
    return int(row.get("run") or 1)


def median(values: Sequence[Optional[float]]) -> Optional[float]:
    """Median of the values that are not None, or None when there are none."""
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _rotate(items: List[Any], run: int) -> List[Any]:
    shift = (run - 1) % len(items) if items else 0
    return items[shift:] + items[:shift]


def run_order(cases: Sequence[Any], run: int) -> List[Any]:
    """The cases (objects with ``client``, ``ack``, ``prefetch``, ``body_size``, in
    bench/consume.build_cases' order) in the order repetition ``run`` (1-based) runs them.
    Run 1 keeps the given order; later runs rotate, per (body, prefetch) block, the ack modes
    by ``run - 1`` and, per ack mode, the clients by ``run - 1``: the cases a ratio compares
    stay in the same block, and who goes first changes."""
    blocks: Dict[Tuple[int, int], Dict[str, List[Any]]] = {}
    for case in cases:
        blocks.setdefault((case.body_size, case.prefetch), {}).setdefault(case.ack, []).append(case)
    out: List[Any] = []
    for groups in blocks.values():
        for ack in _rotate(list(groups), run):
            out.extend(_rotate(groups[ack], run))
    return out


def summarize_cases(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One entry per case id (first-seen order), over its repetitions.

    Returns:
        list of dict: ``id``, ``client``, ``ack``, ``prefetch``, ``body_size``, ``count``,
        ``runs`` (repetitions of the case), ``ok_runs``, ``statuses`` (each run's),
        ``stall_runs`` (runs that stalled), for each of :data:`CASE_NUMBERS` the median over the
        ok runs and ``<name>_runs`` (every run's value in run order, ``None`` where it failed),
        ``max_gap_ms`` (the largest of the runs), ``lost`` (summed) and ``status`` (``ok``
        when every run was, ``not available`` when none could run, else ``failed``).
    """
    by: Dict[str, List[Dict[str, Any]]] = {}
    for row in rows:
        by.setdefault(row["id"], []).append(row)
    out = []
    for case_id, mine in by.items():
        mine = sorted(mine, key=run_of)
        ok = [r for r in mine if r.get("status") == "ok"]
        first = mine[0]
        entry: Dict[str, Any] = {k: first.get(k) for k in ("id", "client", "ack", "prefetch", "body_size", "count")}
        entry.update(runs=len(mine), ok_runs=len(ok), statuses=[r.get("status") for r in mine],
                     stall_runs=[run_of(r) for r in mine if r.get("stall")])
        for name in CASE_NUMBERS:
            entry[name] = median([r.get(name) for r in ok])
            entry[name + "_runs"] = [r.get(name) if r.get("status") == "ok" else None for r in mine]
        gaps = [r["max_gap_ms"] for r in mine if r.get("max_gap_ms") is not None]
        entry["max_gap_ms"] = max(gaps) if gaps else None
        lost = [r["lost"] for r in mine if isinstance(r.get("lost"), int)]
        entry["lost"] = sum(lost) if lost else None
        if len(ok) == len(mine):
            entry["status"] = "ok"
        elif all(r.get("status") == "not available" for r in mine):
            entry["status"] = "not available"
        else:
            entry["status"] = "failed"
        out.append(entry)
    return out


def _sort_key(entry: Dict[str, Any], acks: Sequence[str], clients: Sequence[str]) -> Tuple[Any, ...]:
    ack, client = entry.get("ack"), entry.get("client")
    return (entry["body_size"], entry["prefetch"], acks.index(ack) if ack in acks else -1,
            clients.index(client) if client in clients else -1)


def median_ratios(per_run: Dict[int, Dict[str, Any]], acks: Sequence[str] = (),
                  clients: Sequence[str] = ()) -> Dict[str, Any]:
    """Merge each repetition's ratio tables (``per_run``: run number -> a
    bench/consume.compute_ratios answer over that run's rows only) into one of the same shape.

    Each entry of each table of :data:`RATIO_TABLES` (matched across runs by its naming fields)
    gets, per number, the median over the runs that have it, and ``<field>_runs``: one value per
    run in run order, ``None`` where that run had no such entry or number (a side failed). Same
    for ``headline_geomean`` (each run's geomean; the median of those). Entries are sorted by
    body, prefetch, ack (in ``acks`` order) and client (in ``clients`` order).
    """
    runs = sorted(per_run)
    out: Dict[str, Any] = {}
    for table, names in RATIO_TABLES.items():
        merged: Dict[Tuple[Any, ...], Dict[int, Dict[str, Any]]] = {}
        for run in runs:
            for entry in per_run[run].get(table) or []:
                merged.setdefault(tuple(entry[n] for n in names), {})[run] = entry
        entries = []
        for key, by_run in merged.items():
            fields = [f for f in next(iter(by_run.values())) if f not in names]
            entry = dict(zip(names, key))
            for field in fields:
                values = [(by_run.get(run) or {}).get(field) for run in runs]
                entry[field] = median(values)
                entry[field + "_runs"] = values
            entries.append(entry)
        out[table] = sorted(entries, key=lambda e: _sort_key(e, acks, clients))
    geo: Dict[str, Any] = {}
    fields = sorted({f for run in runs for f in (per_run[run].get("headline_geomean") or {})})
    for field in fields:
        values = [(per_run[run].get("headline_geomean") or {}).get(field) for run in runs]
        geo[field] = median(values)
        geo[field + "_runs"] = values
    out["headline_geomean"] = geo
    return out


def ratios_by_run(rows: Sequence[Dict[str, Any]],
                  compute: Callable[[Sequence[Dict[str, Any]]], Dict[str, Any]],
                  acks: Sequence[str] = (), clients: Sequence[str] = ()) -> Dict[str, Any]:
    """``compute`` (bench/consume.compute_ratios) over each repetition's rows alone, then
    :func:`median_ratios` over the repetitions."""
    grouped: Dict[int, List[Dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(run_of(row), []).append(row)
    return median_ratios({run: compute(mine) for run, mine in grouped.items()}, acks, clients)


def with_runs(value: Optional[float], runs: Optional[Sequence[Optional[float]]], fmt: str = "%.2f",
              suffix: str = "") -> str:
    """``value`` formatted, then, for more than one run, the runs' range and, when some run has
    no value, how many have: ``"1.28x (1.08-1.98)"``, ``"1.28x (1.08-1.98, 2/3)"``; ``"-"`` for
    no value at all."""
    if value is None:
        return "-"
    text = fmt % value + suffix
    if not runs or len(runs) <= 1:
        return text
    vals = [v for v in runs if v is not None]
    spread = "%s-%s" % (fmt % min(vals), fmt % max(vals))
    if len(vals) < len(runs):
        spread += ", %d/%d" % (len(vals), len(runs))
    return "%s (%s)" % (text, spread)
