"""Smoke test of bench/aio.py's stompman comparison: each API's child consumes a tiny backlog
(client-individual, so every message is ACKed; 256 B bodies, and a few 1 MiB ones) and produces
(without receipts, and in transactions of 100 with the COMMIT waited), against a real ActiveMQ;
then the per-repetition ratios and the JSON merge. Counts and fields only; no timing assertions."""
import argparse
import json
import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

pytest.importorskip("stompman", reason="stompman is bench/aio.py's asyncio comparator (the bench extra)")

from bench import aio  # noqa: E402

COUNT = 200
BIG_COUNT = 5  # 1 MiB bodies: stompman spends about 125 ms of CPU on each


@pytest.fixture(scope="module")
def bench_broker(activemq_factory_module):
    """One ActiveMQ for every case, as bench/aio.py runs them: each run has a fresh queue."""
    return activemq_factory_module(statistics=True)  # the bench checks each consumed queue's dequeueCount


@pytest.mark.broker
@pytest.mark.compiled_pass_only
@pytest.mark.timeout(240)
@pytest.mark.parametrize("case, ack, prefetch, apis", aio.STOMPMAN_CASES)
def test_every_api_consumes_or_sends_the_whole_count(bench_broker, case, ack, prefetch, apis):
    broker = bench_broker
    host, port = broker.host_and_ports[0]
    args = argparse.Namespace(runs=1, count=COUNT, big_count=BIG_COUNT, deadline=60.0)
    expected = BIG_COUNT if case == "consume-1mib" else COUNT
    assert aio.case_count(case, args) == expected
    # _run_case exits (SystemExit) when a child fails or receives fewer than the count
    runs = aio._run_case(broker, "stomp://%s:%d" % (host, port), case, ack, prefetch, apis, args)
    assert sorted(runs) == sorted(apis)
    for api, results in runs.items():
        assert [r["received"] for r in results] == [expected], api
        assert results[0]["seconds"] > 0 and results[0]["cpu"] >= 0, (api, results)
        if not case.startswith("produce"):  # every message ACKed and none left once the consumer closed
            assert results[0]["dequeued"] == expected, api


def test_the_bench_has_the_issues_cases_against_stompman_and_the_threaded_api():
    # issue 23: 1 MiB bodies, produce non-persistent async, transacted batches of 100 -- each aio vs
    # stompman vs the threaded API in the same run
    cases = {case: apis for case, _, _, apis in aio.STOMPMAN_CASES}
    for case in ("consume-1mib", "produce", "produce-tx100"):
        assert set(cases[case]) == {"aio", "threaded", "stompman"}, case
    assert aio.CASE_BODY["consume-1mib"] == 1 << 20 and aio.CASE_BATCH["produce-tx100"] == 100
    assert aio.case_count("consume-1mib", argparse.Namespace(count=10000, big_count=7)) == 7
    assert aio.case_count("produce-tx100", argparse.Namespace(count=10000, big_count=7)) == 10000


def test_ratios_are_per_repetition_and_relative_to_stompman():
    runs = {"aio": [{"received": 100, "seconds": 1.0, "cpu": 0.1}, {"received": 100, "seconds": 0.5, "cpu": 0.1}],
            "stompman": [{"received": 100, "seconds": 2.0, "cpu": 0.4}, {"received": 100, "seconds": 2.0, "cpu": 0.2}]}
    (row,) = aio._stompman_ratios("x", runs)
    assert row["api"] == "aio"
    assert row["rate_ratios"] == [2.0, 4.0] and row["rate_ratio"] == 3.0
    assert row["cpu_ratios"] == [4.0, 2.0] and row["cpu_ratio"] == 3.0


def test_json_merge_keeps_the_other_keys(tmp_path):
    path = str(tmp_path / "aio.json")
    with open(path, "w") as fh:
        json.dump({"rows": [1], "machine": {"a": 1}}, fh)
    merged = aio._merged(path, {"stompman": {"rows": [2]}})
    assert merged == {"rows": [1], "machine": {"a": 1}, "stompman": {"rows": [2]}}
    assert aio._merged(str(tmp_path / "absent.json"), {"rows": [3]}) == {"rows": [3]}


def test_a_run_of_some_cases_keeps_the_other_cases_figures_and_says_when_they_were_measured():
    old = {"machine": {"loadavg": [9]}, "count": 10000, "runs": 3,
           "rows": [{"case": "ack-p1000", "api": "aio"}, {"case": "produce", "api": "aio"}],
           "ratios": [{"case": "ack-p1000", "api": "aio"}, {"case": "produce", "api": "aio"}]}
    new = {"machine": {"loadavg": [2]}, "measured": "T2", "count": 10000, "runs": 3,
           "rows": [{"case": "produce", "api": "aio", "new": 1}],
           "ratios": [{"case": "produce", "api": "aio", "new": 1}]}
    merged = aio.merged_section(old, new)
    assert merged["rows"] == [{"case": "ack-p1000", "api": "aio"}, {"case": "produce", "api": "aio", "new": 1}]
    assert merged["ratios"] == [{"case": "ack-p1000", "api": "aio"}, {"case": "produce", "api": "aio", "new": 1}]
    assert merged["machine"] == {"loadavg": [2]}
    assert merged["earlier"] == [{"cases": ["ack-p1000"], "machine": {"loadavg": [9]}, "count": 10000, "runs": 3}]
    # a later run of ack-p1000 replaces the earliest figures: produce's run is the earlier one now
    newer = dict(new, measured="T3", rows=[{"case": "ack-p1000", "api": "aio", "new": 2}], ratios=[])
    again = aio.merged_section(merged, newer)
    assert again["rows"] == [{"case": "produce", "api": "aio", "new": 1}, {"case": "ack-p1000", "api": "aio", "new": 2}]
    assert again["earlier"] == [{"cases": ["produce"], "machine": {"loadavg": [2]}, "measured": "T2", "count": 10000,
                                 "runs": 3}]
    assert aio.merged_section(None, new) == new and aio.merged_section(old, dict(old, measured="T4")) == dict(
        old, measured="T4")


def test_the_p1000_and_p1_cases_have_the_raw_ceiling_and_the_optimized_row():
    # issues 21/23: the broker's ceiling in the same run; at-least-once batched acks (optimize_acknowledge)
    cases = {case: apis for case, _, _, apis in aio.STOMPMAN_CASES}
    assert {"aio", "aio-optimized", "stompman", "raw-stomp"} <= set(cases["ack-p1000"])
    assert {"aio", "threaded", "raw-stomp"} <= set(cases["client-individual-p1"])
    assert "no cumulative or batched" in aio.STOMPMAN_BATCHING


def test_ceiling_ratios_are_per_repetition_over_the_raw_client():
    runs = {"aio": [{"received": 100, "seconds": 2.0, "cpu": 0.4}, {"received": 100, "seconds": 1.0, "cpu": 0.2}],
            "raw-stomp": [{"received": 100, "seconds": 1.0, "cpu": 0.1}, {"received": 100, "seconds": 1.0, "cpu": 0.1}]}
    (row,) = aio._ceiling_ratios("x", runs)
    assert row["api"] == "aio" and row["rate_vs_raw_runs"] == [0.5, 1.0] and row["rate_vs_raw"] == 0.75
    assert row["cpu_vs_raw_runs"] == [4.0, 2.0] and row["cpu_vs_raw"] == 3.0
    assert aio._ceiling_ratios("x", {"aio": runs["aio"]}) == []
    old = {"rows": [{"case": "a"}], "ratios": [], "ceiling": [{"case": "a", "api": "aio"}]}
    new = {"rows": [{"case": "b"}], "ratios": [], "ceiling": [{"case": "b", "api": "aio"}]}
    assert aio.merged_section(old, new)["ceiling"] == old["ceiling"] + new["ceiling"]


@pytest.mark.broker
@pytest.mark.compiled_pass_only  # the bench's own dequeue check (a 10 s wait), nothing of the codec
@pytest.mark.timeout(60)
def test_a_queue_left_with_messages_ends_the_run(bench_broker):
    """The dequeue check after each consumer can fail: a queue nobody consumed is no row."""
    from bench._common import fill_queue

    broker = bench_broker  # the module's broker (statistics on); a queue of this test's own
    fill_queue(broker.host_and_ports, "/queue/bench-aio-left", 5, 256)
    with pytest.raises(SystemExit, match="expected 5 dequeued"):
        aio._dequeued(broker, "/queue/bench-aio-left", 5, "aio", "ack-p1000")
