"""Smoke test of bench/produce.py: a --tiny run of every case and client (children
against a real ActiveMQ with a KahaDB store on disk), and its JSON shape. Counts,
fields and the broker's own counters only; never a timing assertion."""
import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

pytest.importorskip("stomp", reason="stomp.py is the bench's baseline")

from bench import _java, produce  # noqa: E402
from amqstomp.testing.broker import queue_statistics  # noqa: E402

# compiled_pass_only: smoke runs of the bench harness (children, Java legs, stomp.py baselines), above the codec
pytestmark = [pytest.mark.broker, pytest.mark.compiled_pass_only]

SUMMARY_FIELDS = {"case", "client", "runs", "ok_runs", "msg_per_s", "cpu_us_per_msg", "msg_per_s_vs_stomppy",
                  "cpu_per_msg_vs_stomppy", "msg_per_s_runs", "cpu_us_per_msg_runs"}
ROW_FIELDS = {"id", "client", "case", "run", "count", "body_size", "status", "problems", "seconds", "cpu_s",
              "msg_per_s", "cpu_us_per_msg", "enqueue_count", "drained", "child", "module"}


@pytest.mark.timeout(600)
def test_tiny_run_writes_the_json(tmp_path):
    out = tmp_path / "produce.json"
    proc = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "bench", "produce.py"), "--tiny", "--runs", "1",
                           "--deadline", "120", "--data-dir", str(tmp_path / "broker"), "--json", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=560)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "targets (issue 4)" in proc.stdout
    result = json.loads(out.read_text())

    assert result["bench"] == "produce" and result["mode"] == "tiny" and result["runs"] == 1
    assert result["counts"] == produce.COUNTS["tiny"]
    assert result["broker"]["file_system"] not in produce.MEMORY_FILE_SYSTEMS
    assert result["broker"]["persistent"] is True
    rows = result["rows"]
    planned = {(c, k) for c in produce.CASES for k in produce.CLIENTS
               if k != _java.CLIENT or c in produce.JAVA_CASES}
    if _java.java_tools() is None:  # no JDK: the Java leg is left out
        planned = {(c, k) for c, k in planned if k != _java.CLIENT}
    assert {(r["case"], r["client"]) for r in rows} == planned
    for row in rows:
        assert ROW_FIELDS <= set(row), sorted(ROW_FIELDS - set(row))
        assert row["status"] == "ok", (row["id"], row["problems"], row.get("child_stderr_tail"))
        assert row["count"] == produce.COUNTS["tiny"][row["case"]]
        assert row["enqueue_count"] == row["count"]  # the broker's own counter: every message arrived
        assert row["drained"] == row["count"]
        assert row["cpu_s"] > 0 and row["msg_per_s"] > 0
        if row["client"] == _java.CLIENT:
            assert row["module"].startswith("activemq-client 5.")
        else:
            assert row["module"] == {"stomp.py": "stomp", "amqstomp": "amqstomp", "amqstomp-jms": "amqstomp.jms"}[
                row["client"]]
    summary = result["summary"]
    assert len(summary) == len(planned)
    for entry in summary:
        assert SUMMARY_FIELDS <= set(entry), sorted(SUMMARY_FIELDS - set(entry))
        assert entry["ok_runs"] == 1
        if entry["client"] == "stomp.py":
            assert entry["msg_per_s_vs_stomppy"] == pytest.approx(1.0)
    names = [t["target"] for t in result["targets"]]
    assert len(names) == 4 + 1 + 2
    assert all(t["met"] in (True, False) for t in result["targets"])


def test_summary_ratios_and_targets():
    def row(client, case, rate, cpu_us):
        return {"id": "%s:%s" % (client, case), "client": client, "case": case, "status": "ok",
                "msg_per_s": rate, "cpu_us_per_msg": cpu_us}

    rows = [row("stomp.py", "async", 100.0, 8.0), row("amqstomp-jms", "async", 150.0, 3.0),
            row("stomp.py", "async", 300.0, 10.0), row("amqstomp-jms", "async", 250.0, 5.0),
            row("stomp.py", "sync", 10.0, 100.0), row("amqstomp-jms", "sync", 12.0, 90.0),
            row("stomp.py", "tx100", 40.0, 20.0), row("amqstomp-jms", "tx100", 30.0, 20.0)]
    result = produce.summarize(rows)
    entries = {(e["case"], e["client"]): e for e in result["summary"]}
    jms = entries[("async", "amqstomp-jms")]
    assert jms["msg_per_s"] == pytest.approx(200.0)  # median of two runs
    assert jms["msg_per_s_vs_stomppy"] == pytest.approx(1.0)
    assert jms["cpu_per_msg_vs_stomppy"] == pytest.approx(4.0 / 9.0)
    targets = {t["target"]: t for t in result["targets"]}
    assert targets["async: amqstomp-jms CPU/msg / stomp.py CPU/msg"]["met"] is True
    assert targets["tx100: amqstomp-jms msg/s / stomp.py msg/s"]["met"] is False
    assert targets["tx100: amqstomp-jms msg/s / amqstomp-jms sync msg/s"]["value"] == pytest.approx(2.5)
    assert targets["tx1000: amqstomp-jms msg/s / stomp.py msg/s"]["met"] is None  # not measured
    assert "targets (issue 4)" in produce.format_report(dict(result))


def test_java_ratios_per_run_pair_rows_of_the_same_run():
    def row(client, run, rate, cpu_us):
        return {"id": "%s:async" % client, "client": client, "case": "async", "status": "ok", "run": run,
                "msg_per_s": rate, "cpu_us_per_msg": cpu_us}

    rows = [row("amqstomp", 1, 100.0, 2.0), row(_java.CLIENT, 1, 50.0, 8.0),
            row("amqstomp", 2, 300.0, 3.0), row(_java.CLIENT, 2, 100.0, 4.0),
            row("amqstomp", 3, 999.0, 1.0)]  # run 3 has no Java row: no ratio
    entry = [e for e in produce.summarize(rows)["summary"] if e["client"] == "amqstomp"][0]
    assert entry["msg_per_s_vs_java_runs"] == [pytest.approx(2.0), pytest.approx(3.0)]
    assert entry["cpu_per_msg_vs_java_runs"] == [pytest.approx(0.25), pytest.approx(0.75)]
    assert entry["msg_per_s_vs_java"] == pytest.approx(300.0 / 75.0)  # medians: 300 / median(50, 100)


def test_data_dir_refuses_memory_file_systems(tmp_path, monkeypatch):
    monkeypatch.setattr(produce, "file_system_of", lambda path: "tmpfs")
    with pytest.raises(RuntimeError, match="tmpfs"):
        produce.choose_data_dir(str(tmp_path / "x"))
    monkeypatch.setattr(produce, "file_system_of", lambda path: "ext4")
    path, kind = produce.choose_data_dir(str(tmp_path / "y"))
    assert kind == "ext4" and os.path.isdir(path)


def test_file_system_of_names_the_mount():
    assert produce.file_system_of("/") not in ("", None)
    assert produce.file_system_of("/proc/self") == "proc"


JAVA_COUNTS = {"async": 300, "tx100": 200}


@pytest.mark.timeout(300)
def test_java_leg_produces(activemq_factory, tmp_path):
    """The ActiveMQ Java client (OpenWire) runs async and tx100 on the bench's
    broker; the broker counts every message, the parent has the JVM's CPU over
    the measured part, and summarize() sets amqstomp / Java ratios."""
    if _java.java_tools() is None:
        pytest.skip("javac/java not installed")
    broker = activemq_factory(persistent=True, statistics=True, openwire=True, base_dir=str(tmp_path / "broker"))
    rows = []
    for case, count in JAVA_COUNTS.items():
        row = produce.run_case(broker, _java.CLIENT, case, count, 1, deadline=120.0)
        assert row["status"] == "ok", (row["id"], row["problems"], row.get("child_stderr_tail"))
        assert row["enqueue_count"] == row["drained"] == count  # the broker's own counter
        assert row["module"].startswith("activemq-client 5.")
        assert row["msg_per_s"] > 0
        # CPU of the measured part only (< the JVM's whole life: start-up and warm-up)
        assert 0 < row["cpu_s"] < row["child"]["cpu_s"]
        assert row["child"]["marks"]["start"] < row["child"]["marks"]["end"] <= row["child"]["wall_s"]
        # the warm-up (same case, same count) went to a queue of its own, drained afterwards
        warm = queue_statistics(broker, row["queue"] + ".warmup", timeout=10.0)
        assert warm["enqueueCount"] == warm["dequeueCount"] == count and warm["size"] == 0
        rows.append(row)
    rows.append(produce.run_case(broker, "amqstomp", "async", JAVA_COUNTS["async"], 1, deadline=120.0))
    assert rows[-1]["status"] == "ok", rows[-1]["problems"]
    result = produce.summarize(rows)
    mine = result["ratios"]["amqstomp:async"]
    assert mine["cpu_per_msg_vs_java"] == pytest.approx(rows[-1]["cpu_us_per_msg"] / rows[0]["cpu_us_per_msg"])
    assert mine["msg_per_s_vs_java"] == pytest.approx(rows[-1]["msg_per_s"] / rows[0]["msg_per_s"])
    assert result["ratios"]["%s:async" % _java.CLIENT]["cpu_per_msg_vs_java"] == pytest.approx(1.0)
    assert "CPU vs Java" in produce.format_report(result)
    entry = [e for e in result["summary"] if e["client"] == "amqstomp"][0]
    assert entry["cpu_per_msg_vs_java_runs"] == [pytest.approx(mine["cpu_per_msg_vs_java"])]  # one run, paired


@pytest.mark.timeout(120)
def test_java_program_compiles_once_into_the_cache(tmp_path, monkeypatch):
    """compile_bench() puts the classes outside the source tree, keyed by the
    source's hash: a second call (even in a new process) reuses them."""
    if _java.java_tools() is None:
        pytest.skip("javac/java not installed")
    monkeypatch.setattr(_java, "_COMPILED", {})
    first = _java.compile_bench(cache_dir=str(tmp_path))
    assert first.startswith(str(tmp_path)) and os.path.isfile(os.path.join(first, "JmsBench.class"))
    assert not os.path.commonpath([first, REPO_ROOT]) == REPO_ROOT
    stamp = os.stat(os.path.join(first, "JmsBench.class")).st_mtime_ns
    monkeypatch.setattr(_java, "_COMPILED", {})  # as a new process would start
    assert _java.compile_bench(cache_dir=str(tmp_path)) == first
    assert os.stat(os.path.join(first, "JmsBench.class")).st_mtime_ns == stamp
    assert [d for d in os.listdir(str(tmp_path)) if d.startswith("build-")] == []
    # a changed source is stale: it compiles again, into a directory of its own
    changed = tmp_path / "src" / "JmsBench.java"
    changed.parent.mkdir()
    with open(_java.SOURCE) as fh:
        changed.write_text(fh.read() + "\n// changed\n")
    monkeypatch.setattr(_java, "SOURCE", str(changed))
    monkeypatch.setattr(_java, "_COMPILED", {})
    second = _java.compile_bench(cache_dir=str(tmp_path))
    assert second != first and os.path.isfile(os.path.join(second, "JmsBench.class"))
