"""Smoke test of bench/aio.py's stompman comparison: each API's child consumes a tiny backlog
(client-individual, so every message is ACKed) and produces, against a real ActiveMQ; then the
per-repetition ratios and the JSON merge. Counts and fields only; no timing assertions."""
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


@pytest.mark.broker
@pytest.mark.compiled_pass_only
@pytest.mark.parametrize("case, ack, prefetch, apis", aio.STOMPMAN_CASES)
def test_every_api_consumes_or_sends_the_whole_count(activemq_factory, case, ack, prefetch, apis):
    broker = activemq_factory()
    host, port = broker.host_and_ports[0]
    args = argparse.Namespace(runs=1, count=COUNT, deadline=60.0)
    # _run_case exits (SystemExit) when a child fails or receives fewer than COUNT messages
    runs = aio._run_case(broker, "stomp://%s:%d" % (host, port), case, ack, prefetch, apis, args)
    assert sorted(runs) == sorted(apis)
    for api, results in runs.items():
        assert [r["received"] for r in results] == [COUNT], api
        assert results[0]["seconds"] > 0 and results[0]["cpu"] >= 0, (api, results)


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
