"""Smoke test of bench/failover.py: one quick run (a master/slave pair, two
kills) and the shape of its JSON; no timing is checked, only that the figures
are there, are numbers, and that the run itself saw nothing lost."""
import json
import math
import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from bench import failover  # noqa: E402

# compiled_pass_only: smoke runs of the bench harness (children, Java legs, stomp.py baselines), above the codec
pytestmark = [pytest.mark.broker, pytest.mark.compiled_pass_only]


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@pytest.mark.timeout(600)
def test_quick_run_writes_the_json_shape(tmp_path, capsys):
    path = tmp_path / "failover.json"
    failover.main(["--quick", "--flow", "20", "--json", str(path)])
    out = capsys.readouterr().out
    assert "kill->1st msg s" in out and "median" in out
    data = json.loads(path.read_text())
    assert data["bench"] == "failover"
    assert data["status"] == "ok", data["problems"]
    assert data["problems"] == []
    assert data["config"]["kills"] == failover.QUICK_KILLS
    assert data["config"]["store_filesystem"] not in ("tmpfs", "ramfs")
    assert len(data["kills"]) == failover.QUICK_KILLS
    for n, row in enumerate(data["kills"], 1):
        assert set(failover.KILL_FIELDS) <= set(row)
        assert row["kill"] == n
        assert row["killed"] in ("bench-a", "bench-b")
        for field in ("takeover_s", "client_reconnect_s", "kill_to_first_message_s", "slave_restart_s"):
            assert _number(row[field]), (field, row)
        assert row["log_takeover_s"] is None or _number(row["log_takeover_s"])
    assert [r["killed"] for r in data["kills"]] == ["bench-a", "bench-b"]  # the pair alternates
    assert set(data["median"]) == set(failover.MEDIAN_FIELDS)
    assert all(_number(v) for v in data["median"].values())
    msgs = data["messages"]
    assert {"sent", "received", "lost", "duplicates", "duplicates_redelivered", "duplicates_resent"} <= set(msgs)
    assert msgs["lost"] == 0 and msgs["sent"] > 0
    assert msgs["duplicates"] == msgs["duplicates_redelivered"] + msgs["duplicates_resent"]
    assert "python" in data["machine"]


def test_log_line_time_and_filesystem_type():
    text = ("2026-11-30 10:35:11,048 | INFO  | Listening for connections at: stomp://localhost:1 | x | main\n"
            "2026-11-30 10:35:11,049 | INFO  | Connector stomp started | x | main\n")
    t = failover.log_line_time(text, failover.CONNECTOR_STARTED)
    assert t is not None
    assert t - failover.log_line_time(text, "Listening") == pytest.approx(0.001, abs=1e-6)
    assert failover.log_line_time(text, "not there") is None
    assert failover.filesystem_type("/proc") == "proc"


def test_report_table_from_saved_results(capsys):
    results = {"kills": [{"kill": 1, "killed": "bench-a", "takeover_s": 1.0, "client_reconnect_s": 0.1,
                          "kill_to_first_message_s": 1.1, "log_takeover_s": None}],
               "median": {"takeover_s": 1.0, "client_reconnect_s": 0.1, "kill_to_first_message_s": 1.1},
               "messages": {"sent": 5, "received": 6, "lost": 0, "duplicates": 1, "duplicates_redelivered": 1,
                            "duplicates_resent": 0},
               "status": "ok", "problems": []}
    failover.print_report(results)
    out = capsys.readouterr().out
    assert "median" in out and "1.100" in out and "5 sent" in out
