"""bench/consume.py --runs N: the run order, per-case medians and the ratios' medians
(bench/_consume_runs.py), over made-up case rows. No broker, no timing."""
import json
import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from bench import _consume_runs, _java, consume  # noqa: E402


def row(client, ack, rate, run=None, prefetch=1000, body=256, status="ok", consume_cpu=1.0, stall=False):
    out = {"id": "%s:%s:p%d:%s" % (client, ack, prefetch, consume.human_size(body)), "client": client, "ack": ack,
           "prefetch": prefetch, "body_size": body, "count": 100, "status": status,
           "msg_per_s": rate if status == "ok" else None, "cpu_s": 2.0, "received": 100 if status == "ok" else 40,
           "consume_cpu_s": consume_cpu, "cpu_per_10k_s": 200.0, "consume_cpu_per_10k_s": consume_cpu * 100,
           "max_gap_ms": 6000.0 if stall else 3.0, "lost": 0, "dequeue_count": 100, "stall": stall, "problems": []}
    if run is not None:
        out["run"] = run
    return out


#: per run: (stomp.py, amqstomp, Java, raw) msg/s. amqstomp / stomp.py inside each run is
#: 1.0, 5.0, 4.0 (median 4.0), while the medians of the two clients' own runs (100 and 100)
#: would give 1.0: a ratio taken across the runs fails the test.
RATES = {1: (100.0, 100.0, 50.0, 400.0), 2: (10.0, 50.0, 100.0, 100.0), 3: (1000.0, 4000.0, 1000.0, 2000.0)}


def three_runs():
    rows = []
    for run, (stomppy, amq, java, raw) in RATES.items():
        rows += [row("stomp.py", "client-individual", stomppy, run), row("amqstomp", "client-individual", amq, run),
                 row(_java.CLIENT, "client-individual", java, run), row(consume.RAW, "client-individual", raw, run),
                 row("stomp.py", "auto", stomppy, run), row("amqstomp", "optimized", amq * 2, run)]
    return rows


def test_every_ratio_is_taken_inside_a_run_then_the_median():
    ratios = consume.compute_ratios_by_run(three_runs())
    (pair,) = ratios["pairs"]
    assert pair["msg_per_s_ratio_runs"] == pytest.approx([1.0, 5.0, 4.0])  # run order, not sorted
    assert pair["msg_per_s_ratio"] == pytest.approx(4.0)
    java = {p["client"]: p for p in ratios["java_pairs"]}
    assert java["amqstomp"]["msg_per_s_vs_java_runs"] == pytest.approx([2.0, 0.5, 4.0])
    assert java["amqstomp"]["msg_per_s_vs_java"] == pytest.approx(2.0)  # medians of the rates: 100/100
    ceiling = {(p["client"], p["ack"]): p for p in ratios["ceiling_pairs"]}
    assert ceiling[("amqstomp", "client-individual")]["msg_per_s_vs_raw_runs"] == pytest.approx([0.25, 0.5, 2.0])
    assert ceiling[("amqstomp", "client-individual")]["msg_per_s_vs_raw"] == pytest.approx(0.5)
    (head,) = ratios["headline"]
    assert head["optimized_vs_stomppy_individual_msg_per_s_runs"] == pytest.approx([2.0, 10.0, 8.0])
    assert head["optimized_vs_stomppy_individual_msg_per_s"] == pytest.approx(8.0)
    assert ratios["headline_geomean"]["optimized_vs_stomppy_auto_msg_per_s"] == pytest.approx(8.0)
    assert ratios["headline_geomean"]["optimized_vs_stomppy_auto_msg_per_s_runs"] == pytest.approx([2.0, 10.0, 8.0])


def test_case_medians_count_every_run_and_a_failed_one_is_shown():
    rows = three_runs()
    failed = next(r for r in rows if r["run"] == 2 and r["id"] == "amqstomp:client-individual:p1000:256B")
    failed.update(status="timeout", msg_per_s=None, stall=True, max_gap_ms=7000.0)
    summary = {e["id"]: e for e in _consume_runs.summarize_cases(rows)}
    amq = summary["amqstomp:client-individual:p1000:256B"]
    assert (amq["runs"], amq["ok_runs"], amq["status"]) == (3, 2, "failed")
    assert amq["statuses"] == ["ok", "timeout", "ok"] and amq["stall_runs"] == [2]
    assert amq["msg_per_s_runs"] == [100.0, None, 4000.0]
    assert amq["msg_per_s"] == pytest.approx(2050.0)
    assert amq["max_gap_ms"] == 7000.0
    stomppy = summary["stomp.py:client-individual:p1000:256B"]
    assert (stomppy["ok_runs"], stomppy["msg_per_s"], stomppy["status"]) == (3, 100.0, "ok")
    (pair,) = consume.compute_ratios_by_run(rows)["pairs"]
    assert pair["msg_per_s_ratio_runs"][1] is None  # that run has no ratio; it is not dropped
    assert pair["msg_per_s_ratio"] == pytest.approx(2.5)  # median of 1.0 and 4.0
    assert _consume_runs.with_runs(pair["msg_per_s_ratio"], pair["msg_per_s_ratio_runs"], suffix="x") \
        == "2.50x (1.00-4.00, 2/3)"
    cells = consume.format_summary_row(amq)
    assert "2/3" in cells and "failed STALL (run 2) (ok, timeout, ok)" in cells


def test_with_runs_formats_median_and_range():
    assert _consume_runs.with_runs(1.28, [1.08, 1.28, 1.98], suffix="x") == "1.28x (1.08-1.98)"
    assert _consume_runs.with_runs(1.28, [1.28]) == "1.28"
    assert _consume_runs.with_runs(1.28, None) == "1.28"
    assert _consume_runs.with_runs(None, [None, None]) == "-"


def test_a_single_run_without_run_numbers_gives_the_old_ratios():
    """Rows saved before --runs carry no ``run``: they are run 1 and the numbers are compute_ratios'."""
    rows = [r for r in three_runs() if r.pop("run") == 1]
    old, new = consume.compute_ratios(rows), consume.compute_ratios_by_run(rows)
    for table in ("pairs", "headline", "java_pairs", "ceiling_pairs"):
        assert len(old[table]) == len(new[table])
        for before in old[table]:
            (after,) = [e for e in new[table] if all(e[k] == before[k] for k in _consume_runs.RATIO_TABLES[table])]
            assert {k: after[k] for k in before} == pytest.approx(before)
            assert all(after[k + "_runs"] == [before[k]] for k in before if k not in _consume_runs.RATIO_TABLES[table])


def test_run_order_rotates_clients_and_keeps_blocks():
    cases = consume.build_cases(quick=True)
    assert _consume_runs.run_order(cases, 1) == cases
    groups = {}
    for case in cases:
        groups.setdefault(case.group, []).append(case.client)
    firsts = {}
    for run in (1, 2, 3, 4):
        order = _consume_runs.run_order(cases, run)
        assert sorted(c.id for c in order) == sorted(c.id for c in cases)
        # the (body, prefetch) blocks stay where they were
        assert [(c.body_size, c.prefetch) for c in order] == [(c.body_size, c.prefetch) for c in cases]
        for group in groups:
            firsts.setdefault(group, set()).add(next(c.client for c in order if c.group == group))
    for group, clients in groups.items():
        assert firsts[group] == set(clients), group  # every client of a group goes first in some run


def test_report_reprints_a_saved_run_of_several_repetitions_and_an_old_one(tmp_path, capsys):
    path = tmp_path / "consume.json"
    path.write_text(json.dumps({"bench": "consume", "runs": 3, "cases": three_runs()}))
    saved = consume.main(["--report", str(path)])
    text = capsys.readouterr().out
    assert "runs ok" in text and "3/3" in text
    assert "4.00x (1.00-5.00)" in text  # amqstomp / stomp.py client-individual: median of the runs
    assert [e["runs"] for e in saved["summary"]] == [3] * 6
    old = os.path.join(REPO_ROOT, "bench", "results", "ceiling_consume_1.json")
    if not os.path.exists(old):
        pytest.skip("no saved single-run consume JSON")
    saved = consume.main(["--report", old])
    text = capsys.readouterr().out
    assert "dequeued" in text and "runs ok" not in text  # the single-run table, as before --runs
    assert saved["ceiling_pairs"] and all(len(p["msg_per_s_vs_raw_runs"]) == 1 for p in saved["ceiling_pairs"])
