"""Smoke test of bench/latency.py: a small run of every client against a real
ActiveMQ the bench starts, and its JSON shape. Counts and fields only; never a
timing assertion (latency figures are a report, see docs/benchmarks.md)."""
import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

pytest.importorskip("stomp", reason="stomp.py is the bench's baseline")

from bench import latency  # noqa: E402

# compiled_pass_only: smoke runs of the bench harness (children, Java legs, stomp.py baselines), above the codec
pytestmark = [pytest.mark.broker, pytest.mark.compiled_pass_only]


@pytest.mark.timeout(400)
def test_small_run_measures_every_message_of_every_client(tmp_path):
    out = tmp_path / "latency.json"
    proc = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "bench", "latency.py"), "--runs", "1",
                           "--count", "400", "--rate", "1000", "--json", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=380)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [r["client"] for r in result["rows"]] == list(latency.CLIENTS)
    for row in result["rows"]:
        assert row["status"] == "ok", row
        assert 0 < row["p50_us"] <= row["p90_us"] <= row["p99_us"] <= row["max_us"]
    summary = result["summary"]
    assert {c: summary[c]["runs"] for c in latency.CLIENTS} == {c: 1 for c in latency.CLIENTS}
    assert {"jms_p50_over_api_p50", "jms_p50_over_stomppy_p50", "jms_p99_over_stomppy_p99"} <= set(summary)


def test_percentiles_and_a_lost_message_fails_the_case():
    assert latency._percentiles([float(v) for v in range(1, 101)])["p50_us"] == 51.0
    collector = latency._Collector(expected=2)
    collector.record("0")
    assert not collector.done.is_set()
    collector.record(None)  # a message without the stamp counts for nothing
    assert len(collector.latencies_us) == 1 and not collector.done.is_set()
