"""Smoke test of bench/consume.py's case runner: a tiny backlog, one stomp.py and
one amqstomp consumer (each in its own child process) against a real ActiveMQ.
Counts and result fields only; no timing assertions."""
import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

stomp = pytest.importorskip("stomp", reason="stomp.py is the bench's baseline")

from bench import _java, consume  # noqa: E402
from amqstomp.testing.broker import queue_statistics  # noqa: E402
from bench._common import ChildResult, format_table, human_size, run_child  # noqa: E402

# compiled_pass_only: smoke runs of the bench harness (children, Java legs, stomp.py baselines), above the codec
pytestmark = [pytest.mark.broker, pytest.mark.compiled_pass_only]

BACKLOG = 500

ROW_FIELDS = {
    "id", "client", "ack", "prefetch", "body_size", "count", "status", "msg_per_s", "cpu_s",
    "cpu_per_10k_s", "consume_cpu_per_10k_s", "max_gap_ms", "stall", "received", "distinct", "missing", "lost",
    "duplicates", "dequeue_count", "fill", "queue_stats_after", "child", "problems",
}


@pytest.fixture(scope="module")
def bench_broker(activemq_factory_module):
    """One ActiveMQ (statistics, OpenWire for the Java leg) for this module's cases: each
    run_case fills and drains a fresh queue of its own, as bench/consume.py does on one broker."""
    return activemq_factory_module(statistics=True, openwire=True)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("client, ack, prefetch", [
    ("stomp.py", "client-individual", 10),
    ("amqstomp", "client", 10),
    ("amqstomp", "optimized", 10),
])
def test_run_case_consumes_the_whole_backlog(bench_broker, client, ack, prefetch):
    broker = bench_broker
    if ack == "optimized":
        available, reason = consume.probe_optimized(broker.host_and_ports)
        if not available:
            pytest.skip("amqstomp optimized acks: " + reason)
    case = consume.Case(client, ack, prefetch, 256, BACKLOG)
    row = consume.run_case(broker, case, deadline=60.0)

    assert ROW_FIELDS <= set(row), sorted(ROW_FIELDS - set(row))
    assert row["status"] == "ok", (row["status"], row["problems"], row.get("child_stderr_tail"))
    assert row["received"] == BACKLOG
    assert row["distinct"] == BACKLOG
    assert row["missing"] == row["lost"] == 0
    assert row["duplicates"] == 0
    assert row["dequeue_count"] == BACKLOG
    assert row["queue_stats_after"]["size"] == 0
    assert row["fill"]["count"] == BACKLOG
    assert row["child"]["module"] == consume.CLIENTS[client]
    assert row["cpu_s"] > 0 and row["msg_per_s"] > 0
    assert row["stall"] is False
    threads = row["child"]["thread_cpu_s"]
    assert "MainThread" in threads and all(cpu >= 0 for cpu in threads.values())
    if client == "amqstomp":  # its reader thread read every message
        assert any(name.startswith("amqstomp-reader") and cpu > 0 for name, cpu in threads.items()), threads
    if ack == "client":
        # K = min(100, 10 // 2) = 5: one cumulative ACK per 5 messages, none left over
        assert row["ack_interval"] == 5
        assert row["acks_sent"] == BACKLOG // 5
    elif ack == "optimized":
        assert row["acks_sent"] == 0  # the library acks, the listener never does
    else:
        assert row["acks_sent"] == BACKLOG


def test_cases_and_ack_interval():
    assert [consume.default_ack_interval(p) for p in (1, 2, 10, 199, 1000)] == [1, 1, 5, 99, 100]
    cases = consume.build_cases(quick=True, java=False, raw=False)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)) == 2 * 3 * 7
    with_raw = [c.id for c in consume.build_cases(quick=True, java=False)]
    assert sorted(set(with_raw) - set(ids)) == sorted(
        "raw-stomp:client-individual:p%d:%s" % (prefetch, body) for prefetch in (1, 1000) for body in ("256B", "64KiB"))
    with pytest.raises(ValueError):
        consume.Case("raw-stomp", "auto", 10, 256, 10)
    with_java = [c.id for c in consume.build_cases(quick=True, raw=False)]
    assert sorted(set(with_java) - set(ids)) == sorted(
        "%s:%s:p%d:%s" % (_java.CLIENT, ack, prefetch, body)
        for ack, prefetch in consume.JAVA_CASES for body in ("256B", "64KiB"))
    assert "stomp.py:optimized:p1:256B" not in ids
    assert "amqstomp:optimized:p1000:64KiB" in ids
    picked = consume.build_cases(quick=True, patterns=["amqstomp:optimized:*"])
    assert {c.ack for c in picked} == {"optimized"} and len(picked) == 6
    with pytest.raises(ValueError):
        consume.Case("stomp.py", "optimized", 10, 256, 10)


def test_huge_cases_and_memcpy_baseline():
    """1 MiB bodies come only when asked for; a row's consume CPU per MiB is counted in copies of 1 MiB."""
    assert not [c for c in consume.build_cases(quick=True, java=False) if c.body_size == consume.HUGE_BODY]
    named = consume.build_cases(quick=True, patterns=["amqstomp:auto:p1000:1MiB"], java=False)
    assert [(c.id, c.count) for c in named] == [("amqstomp:auto:p1000:1MiB", consume.QUICK_HUGE_BACKLOG)]
    assert {c.count for c in consume.build_cases(huge=7, java=False) if c.body_size == consume.HUGE_BODY} == {7}
    row = {"received": 100, "body_size": 65536, "consume_cpu_s": 0.25, "consume_sys_s": 0.125}
    assert consume.cpu_per_mib_vs_memcpy(row, 0.0001) == pytest.approx(0.25 / 6.25 / 0.0001)
    assert consume.cpu_per_mib_vs_memcpy(row, 0.0001, "consume_sys_s") == pytest.approx(0.125 / 6.25 / 0.0001)
    assert consume.cpu_per_mib_vs_memcpy({"received": 0, "body_size": 1}, 0.0001) is None
    assert 0 < consume.memcpy_mib_seconds(rounds=5) < 1.0
    floor = consume.loopback_floor(0.001, mib=4)
    assert floor["mib"] == 4 and floor["bytes"] == 4 * consume.HUGE_BODY
    assert floor["cpu_per_mib_vs_memcpy"] > 0 and 0 <= floor["sys_per_mib_vs_memcpy"] <= floor["cpu_per_mib_vs_memcpy"]


def test_ratios_and_table():
    def row(client, ack, rate, cpu):
        return {"id": "%s:%s" % (client, ack), "client": client, "ack": ack, "prefetch": 10,
                "body_size": 256, "count": 100, "status": "ok", "msg_per_s": rate, "cpu_s": cpu,
                "received": 100, "consume_cpu_s": cpu / 2}

    rows = [row("stomp.py", "auto", 100.0, 2.0), row("amqstomp", "auto", 300.0, 1.0),
            row("stomp.py", "client-individual", 50.0, 4.0), row("amqstomp", "optimized", 400.0, 1.0)]
    ratios = consume.compute_ratios(rows)
    (pair,) = ratios["pairs"]
    assert pair["msg_per_s_ratio"] == pytest.approx(3.0)
    assert pair["cpu_per_msg_ratio"] == pytest.approx(0.5)
    (head,) = ratios["headline"]
    assert head["optimized_vs_stomppy_individual_msg_per_s"] == pytest.approx(8.0)
    assert head["optimized_vs_stomppy_auto_msg_per_s"] == pytest.approx(4.0)
    assert head["cpu_per_msg_optimized_over_stomppy_individual"] == pytest.approx(0.25)
    text = format_table([["a", 1], ["bb", 22]], ["x", "y"])
    assert text.splitlines()[0].startswith("x")
    assert human_size(65536) == "64KiB" and human_size(256) == "256B"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("ack, prefetch", [("client-individual", 1), ("auto", 1000)])
def test_java_leg_consumes_the_whole_backlog(bench_broker, ack, prefetch):
    """The ActiveMQ Java client (OpenWire) consumes a STOMP-filled backlog: every
    sequence number once, the broker dequeues all, its warm-up backlog (same
    size) is gone, and the parent has the JVM's CPU from SUBSCRIBE to the last
    message (less than the JVM's whole life)."""
    if _java.java_tools() is None:
        pytest.skip("javac/java not installed")
    broker = bench_broker
    row = consume.run_case(broker, consume.Case(_java.CLIENT, ack, prefetch, 256, BACKLOG), deadline=60.0)

    assert row["status"] == "ok", (row["status"], row["problems"], row.get("child_stderr_tail"))
    assert row["received"] == row["distinct"] == row["dequeue_count"] == BACKLOG
    assert row["missing"] == row["lost"] == row["duplicates"] == 0
    assert row["queue_stats_after"]["size"] == 0
    assert row["child"]["module"] == consume.CLIENTS[_java.CLIENT]
    assert row["child"]["warmup"] == BACKLOG
    warm = queue_statistics(broker, row["queue"] + ".warmup", timeout=10.0)
    assert warm["enqueueCount"] == warm["dequeueCount"] == BACKLOG and warm["size"] == 0
    assert row["msg_per_s"] > 0
    assert 0 < row["child"]["consume_cpu_s"] < row["cpu_s"]
    marks = row["child_process"]["marks"]
    assert marks["start"] < marks["end"] <= row["child_process"]["wall_s"]


def test_ratios_against_java():
    def row(client, ack, rate, cpu):
        return {"id": "%s:%s" % (client, ack), "client": client, "ack": ack, "prefetch": 1000,
                "body_size": 256, "count": 100, "status": "ok", "msg_per_s": rate, "cpu_s": 9.0,
                "received": 100, "consume_cpu_s": cpu}

    rows = [row("stomp.py", "auto", 100.0, 2.0), row("amqstomp", "auto", 300.0, 1.0),
            row(_java.CLIENT, "auto", 200.0, 4.0), row("amqstomp", "client", 500.0, 1.0)]
    pairs = {p["client"]: p for p in consume.compute_ratios(rows)["java_pairs"]}
    assert set(pairs) == {"stomp.py", "amqstomp"}  # no Java pair for a mode Java did not run
    assert pairs["amqstomp"]["msg_per_s_vs_java"] == pytest.approx(1.5)
    assert pairs["amqstomp"]["consume_cpu_per_msg_vs_java"] == pytest.approx(0.25)
    assert pairs["stomp.py"]["msg_per_s_vs_java"] == pytest.approx(0.5)


@pytest.mark.timeout(60)
def test_run_child_reports_cpu_and_enforces_deadline():
    busy = run_child([sys.executable, "-c", "import time; t=time.process_time()\n"
                      "while time.process_time() - t < 0.3: pass\nprint('{\"ok\": 1}')"], timeout=30)
    assert isinstance(busy, ChildResult)
    assert busy.returncode == 0 and not busy.timed_out
    assert busy.cpu_s >= 0.25
    assert busy.last_json() == {"ok": 1}
    hung = run_child([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1.0)
    assert hung.timed_out and hung.returncode < 0
    assert hung.wall_s < 30


@pytest.mark.timeout(120)
@pytest.mark.parametrize("prefetch,body_size", [(1, 256), (1000, 256), (1, 65536), (1000, 1 << 20)])
def test_raw_ceiling_consumes_every_message_once_and_the_broker_dequeues_them(activemq_factory, prefetch, body_size):
    """bench/_raw_stomp.py (the raw-stomp row): every sequence number once, every message ACKed
    (the broker's dequeueCount), its DISCONNECT receipted; and the ratio to it in the report.
    64 KiB and 1 MiB bodies come through its body read (recv_into a buffer of the frame's size)."""
    broker = activemq_factory(statistics=True)
    count = BACKLOG if body_size < 1 << 20 else 40
    row = consume.run_case(broker, consume.Case(consume.RAW, "client-individual", prefetch, body_size, count),
                           deadline=60.0)
    assert row["status"] == "ok", (row["status"], row["problems"], row.get("child_stderr_tail"))
    assert row["received"] == row["distinct"] == row["dequeue_count"] == row["acks_sent"] == count
    assert row["missing"] == row["lost"] == row["duplicates"] == 0
    assert row["queue_stats_after"]["size"] == 0
    assert row["child"]["module"] == consume.CLIENTS[consume.RAW] and row["child"]["disconnect_confirmed"]
    assert row["msg_per_s"] > 0 and row["child"]["consume_cpu_s"] > 0
    other = dict(row, client="amqstomp", msg_per_s=row["msg_per_s"] / 2)
    (pair,) = consume.compute_ratios([row, other])["ceiling_pairs"]
    assert pair["client"] == "amqstomp" and pair["msg_per_s_vs_raw"] == pytest.approx(0.5)


@pytest.mark.timeout(60)
def test_raw_ceiling_says_so_when_a_message_is_missing(activemq_factory):
    """It counts distinct sequence numbers, not frames: asked for one more message than the queue
    holds, it reports a timeout with what it saw (and run_case a failed row), never ok."""
    from bench._common import fill_queue
    from bench import _raw_stomp

    broker = activemq_factory()
    host, port = broker.host_and_ports[0]
    fill_queue(broker.host_and_ports, "/queue/raw-short", 20, 256)
    report = _raw_stomp.consume(host, port, "/queue/raw-short", 21, 10, deadline_s=2.0)
    assert report["status"] == "timeout" and report["received"] == report["distinct"] == 20
    assert report["disconnect_confirmed"]
