"""bench/gate.py: the decision (median of the runs against a floor or a ceiling),
the floors file, and one real run of the gate on the cheap codec ratio.

No timing assertion on the code under test: the end-to-end cases use a floor
far below and one far above anything the codec bench can measure."""
import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from bench import gate  # noqa: E402
from bench.gate import FAIL, HIGHER, LOWER, PASS, SKIP  # noqa: E402

GATE_PY = os.path.join(REPO_ROOT, "bench", "gate.py")


# --------------------------------------------------------------------------- the decision


@pytest.mark.timeout(10)
def test_floor_passes_at_or_above_and_fails_below():
    v = gate.judge("codec", HIGHER, 15.0, [22.0, 19.0, 25.0])
    assert v["status"] == PASS and v["median"] == 22.0
    assert v["limit_kind"] == "floor"
    assert gate.judge("codec", HIGHER, 15.0, [15.0, 15.0, 15.0])["status"] == PASS  # the floor itself passes
    low = gate.judge("codec", HIGHER, 15.0, [14.9, 30.0, 3.0])
    assert low["status"] == FAIL and low["median"] == 14.9
    assert "< floor" in low["reason"]


@pytest.mark.timeout(10)
def test_ceiling_passes_at_or_below_and_fails_above():
    v = gate.judge("cpu", LOWER, 0.45, [0.31, 0.50, 0.30])
    assert v["status"] == PASS and v["median"] == 0.31
    assert v["limit_kind"] == "ceiling"
    assert gate.judge("cpu", LOWER, 0.45, [0.45] * 3)["status"] == PASS
    high = gate.judge("cpu", LOWER, 0.45, [0.2, 0.46, 0.9])
    assert high["status"] == FAIL and high["median"] == 0.46
    assert "> ceiling" in high["reason"]


@pytest.mark.timeout(10)
def test_the_median_of_three_decides_not_the_mean_nor_one_run():
    # one lucky run does not pass a regression (mean 34, median 1)...
    assert gate.judge("m", HIGHER, 10.0, [1.0, 100.0, 1.0])["status"] == FAIL
    # ...and one unlucky run does not fail a healthy figure (mean 7.7, median 11)
    assert gate.judge("m", HIGHER, 10.0, [11.0, 1.0, 11.0])["status"] == PASS
    assert gate.judge("m", LOWER, 0.5, [0.3, 5.0, 0.4])["status"] == PASS
    assert gate.judge("m", LOWER, 0.5, [0.3, 5.0, 0.6])["status"] == FAIL
    assert gate.median_of([3.0, 1.0, 2.0]) == 2.0
    assert gate.median_of([]) is None


@pytest.mark.timeout(10)
def test_a_run_without_a_value_fails_the_metric_with_its_reason():
    v = gate.judge("m", HIGHER, 1.0, [50.0, None, 60.0], errors=["run 2: amqstomp:optimized:p1000:256B timeout"])
    assert v["status"] == FAIL
    assert "1 of 3 runs" in v["reason"] and "timeout" in v["reason"]
    assert v["median"] == 55.0  # still reported
    for bad in (float("nan"), float("inf"), 0.0, -1.0, "12", True):
        assert gate.judge("m", HIGHER, 1.0, [5.0, bad, 5.0])["status"] == FAIL, bad
    assert gate.judge("m", HIGHER, 1.0, [])["status"] == FAIL
    with pytest.raises(ValueError):
        gate.judge("m", "up", 1.0, [1.0])


@pytest.mark.timeout(10)
def test_exit_code_follows_the_verdicts():
    ok = gate.judge("a", HIGHER, 1.0, [2.0, 2.0, 2.0])
    bad = gate.judge("b", LOWER, 1.0, [2.0, 2.0, 2.0])
    skip = gate.skipped("c", HIGHER, 1.0, "bench/produce.py does not exist")
    assert skip["status"] == SKIP
    assert gate.gate_exit_code([ok, skip]) == 0
    assert gate.gate_exit_code([ok, bad, skip]) == 1
    text = gate.format_verdicts([ok, bad, skip])
    assert "FAIL" in text and "ceiling <= 1.00" in text and "floor >= 1.00" in text


@pytest.mark.timeout(10)
def test_consume_ratio_from_one_runs_rows():
    def row(client, ack, prefetch, rate, cpu, status="ok"):
        return {"id": "%s:%s:p%d:256B" % (client, ack, prefetch), "status": status, "msg_per_s": rate,
                "received": 1000, "consume_cpu_s": cpu, "problems": [] if status == "ok" else ["stalled"]}

    rows = {gate.AMQ_OPT_P1000: row("amqstomp", "optimized", 1000, 60000.0, 0.1),
            gate.STOMPPY_IND_P1000: row("stomp.py", "client-individual", 1000, 20000.0, 0.4)}
    msgs = gate.BUILTIN_METRICS["consume_p1000_optimized_vs_stomppy_individual"]
    cpu = gate.BUILTIN_METRICS["consume_p1000_cpu_per_msg_optimized_over_individual"]
    assert gate.consume_value(rows, msgs) == (pytest.approx(3.0), "")
    assert gate.consume_value(rows, cpu) == (pytest.approx(0.25), "")
    rows[gate.STOMPPY_IND_P1000]["status"] = "timeout"
    value, err = gate.consume_value(rows, msgs)
    assert value is None and "timeout" in err
    auto = gate.BUILTIN_METRICS["consume_p1000_optimized_vs_stomppy_auto"]
    assert gate.consume_value(rows, auto)[0] is None  # stomp.py auto was not run


# --------------------------------------------------------------------------- the floors file

GOOD = """
[settings]
codec_frames = 1000

[metrics.codec_compiled_vs_stomppy]
direction = "higher"
floor = 15.0

[metrics.consume_p1000_cpu_per_msg_optimized_over_individual]
direction = "lower"
ceiling = 0.45

[metrics.produce_send_ratio]
direction = "higher"
floor = 2.0
bench = "produce"
json_key = "headline.send_ratio"
"""


@pytest.mark.timeout(10)
def test_floors_file_both_directions():
    settings, metrics = gate.parse_floors(GOOD)
    assert settings == {"codec_frames": 1000}
    by = {m.name: m for m in metrics}
    assert by["codec_compiled_vs_stomppy"].direction == HIGHER and by["codec_compiled_vs_stomppy"].limit == 15.0
    cpu = by["consume_p1000_cpu_per_msg_optimized_over_individual"]
    assert cpu.direction == LOWER and cpu.limit == 0.45
    assert by["produce_send_ratio"].bench == "produce"
    assert by["produce_send_ratio"].definition.json_key == "headline.send_ratio"
    assert [m.name for m in gate.select(metrics, "codec_*,nothing")] == ["codec_compiled_vs_stomppy"]
    assert len(gate.select(metrics, "")) == 3
    assert gate.json_lookup({"a": [{"b": 2.5}]}, "a.0.b") == 2.5


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text, message", [
    # a floor on a lower-is-better metric would gate the wrong way round
    ('[metrics.consume_p1000_cpu_per_msg_optimized_over_individual]\ndirection = "lower"\nfloor = 0.4\n',
     "takes a ceiling"),
    ('[metrics.consume_p1000_cpu_per_msg_optimized_over_individual]\ndirection = "higher"\nfloor = 0.4\n',
     "lower is better"),
    ('[metrics.codec_compiled_vs_stomppy]\ndirection = "higher"\nceiling = 15\n', "takes a floor"),
    ('[metrics.codec_compiled_vs_stomppy]\nfloor = 15\n', "direction must be"),
    ('[metrics.codec_compiled_vs_stomppy]\ndirection = "higher"\nfloor = 0\n', "above 0"),
    ('[metrics.codec_compiled_vs_stomppy]\ndirection = "higher"\nfloor = 15\nflor = 3\n', "unknown key"),
    ('[metrics.made_up]\ndirection = "higher"\nfloor = 2\n', "unknown metric"),
    ('[settings]\nframes = 3\n[metrics.codec_compiled_vs_stomppy]\ndirection = "higher"\nfloor = 1\n',
     "unknown setting"),
    ("[settings]\ncodec_frames = 3\n", "nothing to gate"),
    ("[metrics.codec_compiled_vs_stomppy\n", "not valid TOML"),
])
def test_floors_file_errors(text, message):
    with pytest.raises(gate.FloorsError) as info:
        gate.parse_floors(text, "floors.toml")
    assert message in str(info.value)


@pytest.mark.timeout(10)
def test_the_shipped_floors_file_loads_and_says_where_each_figure_came_from():
    path = os.path.join(REPO_ROOT, "bench", "floors.toml")
    _, metrics = gate.load_floors(path)
    # built-in metrics, or bench/produce.py figures named by a json_key
    assert all(m.name in gate.BUILTIN_METRICS or (m.definition.bench == "produce" and m.definition.json_key)
               for m in metrics)
    assert len(metrics) >= 4
    with open(path) as fh:
        text = fh.read()
    for m in metrics:
        head, _, _ = text.partition("[metrics.%s]" % m.name)
        comment = head.rstrip().rsplit("\n\n", 1)[-1]  # the comment block right above the table
        assert "measured" in comment and "bench/results/" in comment, m.name


@pytest.mark.timeout(10)
def test_bad_floors_file_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "floors.toml"
    bad.write_text('[metrics.codec_compiled_vs_stomppy]\ndirection = "lower"\nfloor = 3\n')
    assert gate.main(["--floors", str(bad), "--json", str(tmp_path / "g.json"), "--no-png"]) == 2
    assert "takes a ceiling" in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists()


# --------------------------------------------------------------------------- a real run on the codec ratio


def _run_gate(tmp_path, floor):
    pytest.importorskip("stomp", reason="stomp.py is every ratio's baseline")
    floors = tmp_path / ("floors_%g.toml" % floor)
    floors.write_text(
        "[settings]\ncodec_frames = 2000\ncodec_repeat = 1\n\n"
        "[metrics.codec_compiled_vs_stomppy]\ndirection = \"higher\"\nfloor = %r\n\n"
        # not selected by --only: must not be measured (it would start a broker)
        "[metrics.consume_p10_client_vs_stomppy_client]\ndirection = \"higher\"\nfloor = 1.0\n" % float(floor))
    out_json = tmp_path / ("gate_%g.json" % floor)
    out_png = tmp_path / ("gate_%g.png" % floor)
    proc = subprocess.run(
        [sys.executable, GATE_PY, "--floors", str(floors), "--only", "codec_compiled*", "--runs", "3",
         "--json", str(out_json), "--png", str(out_png)],
        capture_output=True, text=True, timeout=150, cwd=REPO_ROOT)
    return proc, out_json, out_png


@pytest.mark.timeout(180)
def test_gate_passes_with_a_floor_below_the_measured_codec_ratio(tmp_path):
    proc, out_json, out_png = _run_gate(tmp_path, 2.0)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out_json.read_text())
    (verdict,) = result["verdicts"]
    assert verdict["metric"] == "codec_compiled_vs_stomppy" and verdict["status"] == PASS
    assert len(verdict["samples"]) == 3 and verdict["median"] == sorted(verdict["samples"])[1]
    assert result["passed"] is True and result["settings"]["codec_frames"] == 2000
    assert "broker" not in proc.stdout  # --only kept the consume metric out
    assert "gate PASSED" in proc.stdout
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "warning: no chart" in proc.stderr
    else:
        assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(180)
def test_gate_fails_and_names_the_metric_when_the_floor_is_far_above(tmp_path):
    proc, out_json, _ = _run_gate(tmp_path, 1000.0)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL codec_compiled_vs_stomppy" in proc.stdout
    assert "gate FAILED" in proc.stdout and "codec_compiled_vs_stomppy" in proc.stdout.splitlines()[-1]
    (verdict,) = json.loads(out_json.read_text())["verdicts"]
    assert verdict["status"] == FAIL and verdict["limit"] == 1000.0
