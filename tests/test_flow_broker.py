"""Consumer flow control against a real ActiveMQ, checked with the broker's own counters
(statistics plugin): optimized ack batches, no loss when a consumer dies, load balancing by
prefetch, and no stall draining a backlog in any ack mode x prefetch."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
from conftest import wait_until

import amqstomp
from amqstomp.exception import ConfigurationError
from amqstomp.testing import queue_statistics

pytestmark = pytest.mark.broker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fill(broker, queue, count, body=b"x" * 256, start=0):
    """Put `count` messages (header seq=start..) on `queue`; returns when the broker has them all."""
    conn = amqstomp.Connection12(broker.host_and_ports)
    conn.connect(wait=True)
    try:
        for i in range(start, start + count):
            headers = {"seq": i}
            if i == start + count - 1:
                headers["receipt"] = "filled"
            conn.send(queue, body, headers=headers)
        conn.wait_for_receipt("filled", timeout=60)
    finally:
        conn.disconnect()


class Recorder(amqstomp.ConnectionListener):
    def __init__(self, hold_at=None, delay=0.0):
        self.frames = []
        self.times = []
        self.hold_at = hold_at  # block in on_message for this (0-based) message until released
        self.release = threading.Event()
        self.holding = threading.Event()
        self.delay = delay
        self.errors = []
        self.slow = []
        self.ack = None  # set to conn.ack to ack every message from the listener

    def on_message(self, frame):
        if self.hold_at is not None and len(self.frames) == self.hold_at:
            self.holding.set()
            self.release.wait(30)
        self.frames.append(frame)
        self.times.append(time.monotonic())
        if self.ack is not None:
            self.ack(frame.headers["ack"])
        if self.delay:
            time.sleep(self.delay)

    def on_error(self, frame):
        self.errors.append(frame)

    def on_slow_consumer(self, info):
        self.slow.append(info)

    def max_gap(self):
        return max((b - a for a, b in zip(self.times, self.times[1:])), default=0.0)


def consumer(broker, listener, **kw):
    conn = amqstomp.Connection12(broker.host_and_ports, auto_decode=False, **kw)
    conn.set_listener("rec", listener)
    conn.connect(wait=True)
    return conn


def qname():
    return "flow.%s" % uuid.uuid4().hex[:8]


@pytest.mark.timeout(120)
def test_optimized_acks_follow_the_batch_rule(activemq):
    """prefetch 100 -> threshold 65 (SEEDS 003): 64 consumed -> the broker has dequeued nothing;
    65 consumed -> 65 dequeued; 130 consumed -> 130; the rest acked on unsubscribe."""
    q = qname()
    fill(activemq, "/queue/" + q, 200)
    rec = Recorder(hold_at=64)
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True, prefetch_size=100,
                   idle_ack_ms=0, optimize_acknowledge_timeout_ms=0)
    assert rec.holding.wait(30)
    time.sleep(0.3)
    assert queue_statistics(activemq, q)["dequeueCount"] == 0  # 64 consumed: below the threshold
    first_hold = rec.release
    rec.release = threading.Event()
    rec.hold_at = 65
    rec.holding.clear()
    first_hold.set()
    assert wait_until(lambda: rec.holding.is_set(), 30)
    assert wait_until(lambda: queue_statistics(activemq, q)["dequeueCount"] == 65, 10)
    rec.hold_at = None
    rec.release.set()
    assert wait_until(lambda: len(rec.frames) == 200, 30)
    assert wait_until(lambda: queue_statistics(activemq, q)["dequeueCount"] >= 195, 10)
    assert queue_statistics(activemq, q)["dequeueCount"] == 195  # 3 batches of 65; 5 unacked
    conn.unsubscribe(1)
    assert wait_until(lambda: queue_statistics(activemq, q)["dequeueCount"] == 200, 10)
    conn.disconnect()
    assert not rec.errors


@pytest.mark.timeout(120)
def test_idle_flush_and_timeout_ack_a_short_batch(activemq):
    q = qname()
    fill(activemq, "/queue/" + q, 10)  # fewer than the threshold of 65
    rec = Recorder()
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True, prefetch_size=100)
    assert wait_until(lambda: len(rec.frames) == 10, 30)
    # the idle flush (50 ms without a delivery) acks the 10
    assert wait_until(lambda: queue_statistics(activemq, q)["dequeueCount"] == 10, 5)
    conn.disconnect()


@pytest.mark.timeout(120)
def test_messages_are_acked_only_after_the_listener_returned(activemq):
    q = qname()
    fill(activemq, "/queue/" + q, 5)
    rec = Recorder(hold_at=0)
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True, prefetch_size=10)
    assert rec.holding.wait(30)
    time.sleep(1.0)  # far past every timer: nothing consumed, nothing acked
    assert queue_statistics(activemq, q)["dequeueCount"] == 0
    rec.hold_at = None
    rec.release.set()
    assert wait_until(lambda: queue_statistics(activemq, q)["dequeueCount"] == 5, 10)
    conn.disconnect()


@pytest.mark.timeout(180)
def test_killed_consumer_loses_nothing(activemq):
    """A consumer process dies mid-batch (kill -9): its un-acked messages come back, marked
    redelivered, and a second consumer gets them; every message is received at least once."""
    q = qname()
    total = 3000
    fill(activemq, "/queue/" + q, total)
    child = textwrap.dedent("""
        import sys, time, amqstomp
        seen = []
        class L(amqstomp.ConnectionListener):
            def on_message(self, frame):
                sys.stdout.write(frame.headers["seq"] + "\\n"); sys.stdout.flush()
                time.sleep(0.0005)
        c = amqstomp.Connection12([("127.0.0.1", %d)], auto_decode=False)
        c.set_listener("l", L())
        c.connect(wait=True)
        c.subscribe("/queue/%s", id=1, ack="client", optimize_acknowledge=True, prefetch_size=100)
        time.sleep(60)
    """ % (activemq.stomp_port, q))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, env=env)
    first = set()
    try:
        deadline = time.monotonic() + 60
        while len(first) < 1000 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            first.add(int(line))
        os.kill(proc.pid, signal.SIGKILL)
        for line in proc.stdout:  # whatever it printed before it died
            first.add(int(line))
    finally:
        proc.kill()
        proc.wait(10)
    assert len(first) >= 1000
    dequeued = queue_statistics(activemq, q)["dequeueCount"]
    assert dequeued < len(first) or dequeued < total  # it died with something un-acked
    rec = Recorder()
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=2, ack="client", optimize_acknowledge=True, prefetch_size=100)
    assert wait_until(lambda: queue_statistics(activemq, q)["size"] == 0, 60)
    conn.disconnect()
    second = [int(f.headers["seq"]) for f in rec.frames]
    assert set(second) | first == set(range(total)), "lost: %s" % sorted(set(range(total)) - set(second) - first)[:10]
    again = [f for f in rec.frames if int(f.headers["seq"]) in first]
    assert again, "the kill came between two batches; nothing was redelivered"
    assert all(f.headers.get("redelivered") == "true" for f in again)
    assert all(f.delivery_count >= 2 for f in again)
    # never dispatched before: first delivery (those dispatched to the dead consumer's buffer but never
    # handed to its application come back redelivered too, so they count 2)
    assert all(f.delivery_count == 1 for f in rec.frames if f.headers.get("redelivered") != "true")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("prefetch", [1, 1000])
def test_prefetch_decides_load_balancing(activemq, prefetch):
    """SEEDS 001/003: with prefetch 1 two slow consumers share a queue; with 1000 the first hoards
    it (the backlog, one broker page of 200, sits in its buffer while the second gets nothing)."""
    q = qname()
    total = 200
    fill(activemq, "/queue/" + q, total)
    recs = [Recorder(delay=0.005), Recorder(delay=0.005)]
    conns = []
    for rec in recs:
        conn = consumer(activemq, rec)
        conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True, prefetch_size=prefetch,
                       headers={"receipt": "sub"})
        conn.wait_for_receipt("sub", 10)
        conns.append(conn)
        time.sleep(0.05)
    assert wait_until(lambda: sum(len(r.frames) for r in recs) == total, 60)
    for conn in conns:
        conn.disconnect()
    share = len(recs[0].frames) / total
    if prefetch == 1:
        assert 0.4 <= share <= 0.6, share
    else:
        assert share == 1.0, share


ACK_MODES = ["auto", "client-individual", "optimized"]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("body_size,count", [(256, 5000), (64 * 1024, 1000)], ids=["256B", "64KiB"])
def test_backlog_drains_without_stall(activemq, body_size, count):
    """A backlog far above the broker's page size (200) drains with no gap over 5 s between two
    messages, for prefetch 1, 10, 100, 1000 in every ack mode (the broker's stalls last 30 s)."""
    results = []
    for prefetch in (1, 10, 100, 1000):
        for mode in ACK_MODES:
            q = qname()
            fill(activemq, "/queue/" + q, count, body=b"b" * body_size)
            rec = Recorder()
            conn = consumer(activemq, rec)
            if mode == "client-individual":
                rec.ack = conn.ack  # the application acks each message itself, as stomp.py users do
                conn.subscribe("/queue/" + q, id=1, ack="client-individual", prefetch_size=prefetch)
            elif mode == "optimized":
                conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True, prefetch_size=prefetch)
            else:
                conn.subscribe("/queue/" + q, id=1, ack="auto", prefetch_size=prefetch)
            started = time.monotonic()
            wait_until(lambda: len(rec.frames) >= count or rec.max_gap() > 5
                       or (rec.times and time.monotonic() - rec.times[-1] > 6), 120, interval=0.05)
            got = len(rec.frames)
            conn.disconnect()
            results.append((prefetch, mode, got, rec.max_gap(), time.monotonic() - started))
            assert got == count, results[-1]
            assert rec.max_gap() < 5.0, results[-1]
            assert wait_until(lambda: queue_statistics(activemq, q)["size"] == 0, 10), results[-1]
    print("\n".join("prefetch %5d %-18s %6d msgs  max gap %.3f s  %.1f s" % r for r in results))


@pytest.mark.timeout(120)
def test_auto_ack_buffer_is_bounded_by_back_pressure(activemq):
    """ack:auto: the broker no longer limits what it pushes, so amqstomp stops reading when its
    buffer holds max_buffered messages; the slow-consumer callback fires above 2 x prefetch."""
    q = qname()
    fill(activemq, "/queue/" + q, 3000)
    rec = Recorder(hold_at=0)
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="auto", prefetch_size=100, max_buffered=500)
    assert rec.holding.wait(30)
    time.sleep(1.0)
    sub = conn.subscriptions.get(1)
    # stopped reading at 500; the frames of the socket read in progress (64 KiB) come on top
    assert 500 <= sub.window.delivered <= 500 + 65536 // 256
    assert conn.transport.reading_paused
    rec.hold_at = None
    rec.release.set()
    assert wait_until(lambda: len(rec.frames) == 3000, 60)
    # listeners hear it on the dispatcher, after the message that was being handled
    assert rec.slow and rec.slow[0]["subscription"] == "1" and rec.slow[0]["pending"] > 200
    conn.disconnect()


@pytest.mark.timeout(60)
def test_destination_options_become_activemq_headers(activemq):
    q = qname()
    fill(activemq, "/queue/" + q, 20)
    rec = Recorder(hold_at=0)
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/%s?consumer.prefetchSize=5" % q, id=1, ack="client-individual")
    sub = conn.subscriptions.get(1)
    assert sub.headers["activemq.prefetchSize"] == "5" and sub.headers["destination"] == "/queue/" + q
    assert rec.holding.wait(30)
    time.sleep(0.5)
    assert sub.window.delivered == 5  # the broker honoured the prefetch
    assert queue_statistics(activemq, q)["inflightCount"] == 5
    rec.hold_at = None
    rec.release.set()
    conn.disconnect()


@pytest.mark.timeout(60)
def test_reserved_keywords_are_not_headers_and_bad_ones_fail(activemq):
    conn = consumer(activemq, Recorder())
    try:
        with pytest.raises(ConfigurationError, match="ack='client'"):
            conn.subscribe("/queue/x", id=1, ack="auto", optimize_acknowledge=True)
        with pytest.raises(ConfigurationError, match="prefetch_size=0 refused: .* ActiveMQ Classic"):
            conn.subscribe("/queue/x", id=2, ack="client", prefetch_size=0)
        with pytest.raises(ConfigurationError, match="consumer.prefetchSize"):
            conn.subscribe("/queue/x?consumer.prefetchsize=3", id=3, ack="client")
        conn.subscribe("/queue/x", id=4, ack="client", optimize_acknowledge=True, ack_batch_cap=50)
        headers = conn.subscriptions.get(4).headers
        assert not any(k in headers for k in ("optimize_acknowledge", "ack_batch_cap"))
        assert "activemq.prefetchSize" not in headers  # nothing the user did not ask for
        assert conn.subscriptions.get(4).window.threshold == 50
    finally:
        conn.disconnect()


@pytest.mark.timeout(60)
def test_unsubscribed_client_messages_are_not_delivered_after(activemq):
    """After unsubscribe, queued un-acked messages are dropped locally (the broker redelivers
    them to other consumers) instead of reaching a listener that can no longer ack them."""
    q = qname()
    fill(activemq, "/queue/" + q, 50)
    rec = Recorder(hold_at=0)
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True, prefetch_size=50)
    assert rec.holding.wait(30)
    assert wait_until(lambda: conn.subscriptions.get(1).window.delivered == 50, 10)
    conn.unsubscribe(1)
    rec.hold_at = None
    rec.release.set()
    time.sleep(0.5)
    assert len(rec.frames) == 1
    conn.disconnect()
    other = Recorder()
    conn2 = consumer(activemq, other)
    conn2.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True)
    assert wait_until(lambda: len(other.frames) >= 49, 20)
    conn2.disconnect()
    assert {int(f.headers["seq"]) for f in other.frames} | {int(rec.frames[0].headers["seq"])} == set(range(50))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cls", [amqstomp.Connection10, amqstomp.Connection11, amqstomp.Connection12])
def test_optimized_acks_on_every_stomp_version(activemq, cls):
    """The library's ACKs carry the right ids per version (1.0 message-id, 1.1 + subscription, 1.2 ack)."""
    q = qname()
    fill(activemq, "/queue/" + q, 500)
    rec = Recorder()
    conn = cls(activemq.host_and_ports, auto_decode=False)
    conn.set_listener("rec", rec)
    conn.connect(wait=True)
    conn.subscribe("/queue/" + q, id="s1", ack="client", optimize_acknowledge=True, prefetch_size=50)
    assert wait_until(lambda: len(rec.frames) == 500, 30)
    assert wait_until(lambda: queue_statistics(activemq, q)["dequeueCount"] == 500, 10)
    conn.disconnect()
    assert not rec.errors


def test_ack_headers_per_version():
    from amqstomp._core.frames import ack_headers
    h = {"message-id": "m1", "subscription": "s", "ack": "a1"}
    assert ack_headers("1.2", h) == {"id": "a1"}
    assert ack_headers("1.1", h) == {"message-id": "m1", "subscription": "s"}
    assert ack_headers("1.0", h) == {"message-id": "m1"}


@pytest.mark.timeout(60)
def test_duplicate_audit_counts_deliveries_on_one_connection(activemq):
    """Un-acked messages of a closed subscription come back to the next one on the same
    connection: the audit (message-id window) marks them delivery_count 2."""
    q = qname()
    fill(activemq, "/queue/" + q, 10)
    rec = Recorder()
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="client-individual")  # the application never acks
    assert wait_until(lambda: len(rec.frames) == 10, 20)
    assert [f.delivery_count for f in rec.frames] == [1] * 10
    conn.unsubscribe(1)
    conn.subscribe("/queue/" + q, id=2, ack="client", optimize_acknowledge=True)
    assert wait_until(lambda: len(rec.frames) == 20, 20)
    again = rec.frames[10:]
    assert [f.headers["message-id"] for f in again] == [f.headers["message-id"] for f in rec.frames[:10]]
    assert [f.delivery_count for f in again] == [2] * 10
    conn.disconnect()


# ------------------------------------------------------------ found by a hostile tester

from amqstomp.flow import RedeliveryPolicy  # noqa: E402

FAST_REDELIVERY = RedeliveryPolicy(maximum_redeliveries=2, initial_redelivery_delay_ms=50)


@pytest.mark.timeout(60)
def test_listener_that_raises_gets_the_message_again_and_it_is_not_acked_meanwhile(activemq):
    q = qname()
    fill(activemq, "/queue/" + q, 50)
    failures = {5: 2, 17: 1, 33: 1}  # seq -> times the listener raises before it takes it

    class Flaky(Recorder):
        def on_message(self, frame):
            seq = int(frame.headers["seq"])
            if failures.get(seq, 0) > 0:
                failures[seq] -= 1
                raise RuntimeError("listener failed on %d" % seq)
            super().on_message(frame)

    rec = Flaky()
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True, prefetch_size=100,
                   redelivery_policy=FAST_REDELIVERY)
    assert wait_until(lambda: len(rec.frames) == 50, 20)
    assert sorted(int(f.headers["seq"]) for f in rec.frames) == list(range(50))
    again = {int(f.headers["seq"]): f for f in rec.frames if int(f.headers["seq"]) in (5, 17, 33)}
    assert again[5].delivery_count == 3 and again[17].delivery_count == 2
    assert all(f.headers.get("redelivered") == "true" for f in again.values())
    assert wait_until(lambda: queue_statistics(activemq, q)["dequeueCount"] == 50, 10)
    conn.disconnect()


@pytest.mark.timeout(60)
def test_a_message_that_always_fails_is_poisoned_to_the_dlq(activemq):
    q = qname()
    conn0 = amqstomp.Connection12(activemq.host_and_ports)
    conn0.connect(wait=True)
    for i in range(3):
        conn0.send("/queue/" + q, "m%d" % i, headers={"seq": i, "persistent": "true",
                                                      **({"receipt": "r"} if i == 2 else {})})
    conn0.wait_for_receipt("r", 10)
    conn0.disconnect()

    class Poison(Recorder):
        def on_message(self, frame):
            if frame.headers["seq"] == "1":
                raise ValueError("cannot handle this one")
            super().on_message(frame)

    rec = Poison()
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True,
                   redelivery_policy=FAST_REDELIVERY)
    assert wait_until(lambda: len(rec.frames) == 2, 20)
    assert wait_until(lambda: queue_statistics(activemq, q)["size"] == 0, 10)
    conn.disconnect()
    dlq = Recorder()
    conn2 = consumer(activemq, dlq)
    conn2.subscribe("/queue/ActiveMQ.DLQ", id=9, ack="auto", selector="seq = 1")
    assert wait_until(lambda: any(f.headers.get("seq") == "1" for f in dlq.frames), 10)
    conn2.disconnect()


@pytest.mark.timeout(60)
def test_poisoning_the_newest_message_writes_no_ack_of_it(activemq):
    """Was a bug: a poisoned message that was the newest one consumed got, after its NACK,
    the ACK held back for it, naming it: ActiveMQ answered ERROR "Unexpected ACK received"
    (the settlement core's order: the reject first, then an ACK of the others only)."""
    q = qname()
    conn0 = amqstomp.Connection12(activemq.host_and_ports)
    conn0.connect(wait=True)
    conn0.send("/queue/" + q, "only", headers={"persistent": "true", "receipt": "r"})
    conn0.wait_for_receipt("r", 10)
    conn0.disconnect()
    errors, settled = [], []

    class AlwaysFails(amqstomp.ConnectionListener):
        def on_message(self, frame):
            raise ValueError("cannot handle this one")

        def on_error(self, frame):
            errors.append(frame.headers.get("message"))

        def on_send(self, frame):
            if frame.cmd in ("ACK", "NACK"):
                settled.append(frame.cmd)

    conn = consumer(activemq, AlwaysFails())
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True,
                   redelivery_policy=RedeliveryPolicy(maximum_redeliveries=0, initial_redelivery_delay_ms=10))
    assert wait_until(lambda: queue_statistics(activemq, q)["size"] == 0, 15)
    conn.disconnect()  # its RECEIPT comes after any ERROR the broker wrote before it
    assert settled == ["NACK"] and errors == []


@pytest.mark.timeout(60)
def test_messages_before_the_listener_is_set_are_not_lost(activemq):
    q = qname()
    fill(activemq, "/queue/" + q, 100)
    conn = amqstomp.Connection12(activemq.host_and_ports, auto_decode=False)
    conn.connect(wait=True)
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True)
    time.sleep(1.0)  # messages arrive with no listener registered (a common stomp.py ordering)
    assert queue_statistics(activemq, q)["dequeueCount"] == 0
    rec = Recorder()
    conn.set_listener("late", rec)
    assert wait_until(lambda: len({f.headers["seq"] for f in rec.frames}) == 100, 20)
    assert wait_until(lambda: queue_statistics(activemq, q)["dequeueCount"] == 100, 10)
    assert all(f.delivery_count == 1 and "redelivered" not in f.headers for f in rec.frames)  # first sight
    conn.disconnect()


@pytest.mark.timeout(60)
def test_unsubscribe_while_reading_is_paused_resumes_reading(activemq):
    q, q2 = qname(), qname()
    fill(activemq, "/queue/" + q, 200)
    fill(activemq, "/queue/" + q2, 20)
    rec = Recorder(hold_at=0)
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="auto", prefetch_size=10)
    assert rec.holding.wait(10)
    assert wait_until(lambda: conn.transport.reading_paused, 10)
    conn.unsubscribe(1)
    assert not conn.transport.reading_paused
    rec.hold_at = None
    rec.release.set()
    conn.subscribe("/queue/" + q2, id=2, ack="client", optimize_acknowledge=True, headers={"receipt": "s2"})
    conn.wait_for_receipt("s2", 10)
    assert wait_until(lambda: sum(1 for f in rec.frames if f.headers["subscription"] == "2") == 20, 20)
    conn.disconnect()


@pytest.mark.timeout(60)
def test_resubscribe_with_the_same_id_while_messages_are_queued(activemq):
    q = qname()
    fill(activemq, "/queue/" + q, 20)
    rec = Recorder(hold_at=0)
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True, prefetch_size=10)
    assert rec.holding.wait(10)
    assert wait_until(lambda: conn.subscriptions.get(1).window.delivered == 10, 10)
    conn.unsubscribe(1)
    conn.subscribe("/queue/" + q, id=1, ack="client", optimize_acknowledge=True, prefetch_size=10)
    rec.hold_at = None
    rec.release.set()
    fill(activemq, "/queue/" + q, 50, start=20)
    assert wait_until(lambda: {int(f.headers["seq"]) for f in rec.frames} >= set(range(1, 70)), 20), \
        sorted({int(f.headers["seq"]) for f in rec.frames})[-5:]
    assert wait_until(lambda: queue_statistics(activemq, q)["size"] == 0, 10)
    conn.disconnect()
    assert not rec.errors


@pytest.mark.timeout(60)
def test_waiting_for_a_receipt_inside_a_listener_with_a_full_buffer(activemq):
    q = qname()
    fill(activemq, "/queue/" + q, 100)
    waited = []

    class Waiter(Recorder):
        def on_message(self, frame):
            super().on_message(frame)
            if len(self.frames) % 25 == 1:
                receipt = "r%d" % len(self.frames)
                conn.send("/queue/" + q + ".out", "x", headers={"receipt": receipt})
                started = time.monotonic()
                conn.wait_for_receipt(receipt, 5)
                waited.append(time.monotonic() - started)

    rec = Waiter(delay=0.005)
    conn = consumer(activemq, rec)
    conn.subscribe("/queue/" + q, id=1, ack="auto", prefetch_size=10)
    assert wait_until(lambda: len(rec.frames) == 100, 30)
    assert len(waited) == 4 and max(waited) < 2
    conn.disconnect()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["destination", "header"])
def test_negative_prefetch_is_refused(activemq, how):
    conn = consumer(activemq, Recorder())
    try:
        with pytest.raises(ConfigurationError, match="prefetch"):
            if how == "destination":
                conn.subscribe("/queue/x?consumer.prefetchSize=-1", id=1, ack="client")
            else:
                conn.subscribe("/queue/x", id=1, ack="client", headers={"activemq.prefetchSize": "-1"})
        assert conn.subscriptions.get(1) is None
    finally:
        conn.disconnect()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("typo,meant", [("optimise_acknowledge", "optimize_acknowledge"),
                                        ("optimize_acknowledgement", "optimize_acknowledge"),
                                        ("prefetchSize", "prefetch_size"), ("prefetch", "prefetch_size")])
def test_misspelt_amqstomp_keywords_are_refused(activemq, typo, meant):
    conn = consumer(activemq, Recorder())
    try:
        with pytest.raises(ConfigurationError, match="did you mean %s" % meant):
            conn.subscribe("/queue/x", id=1, ack="client", **{typo: True})
    finally:
        conn.disconnect()


@pytest.mark.timeout(60)
def test_same_message_on_two_subscriptions_is_not_a_duplicate(activemq):
    topic = "/topic/" + qname()
    rec = Recorder()
    conn = consumer(activemq, rec)
    for sid in (1, 2):
        conn.subscribe(topic, id=sid, ack="auto", headers={"receipt": "s%d" % sid})
        conn.wait_for_receipt("s%d" % sid, 10)
    for i in range(10):
        conn.send(topic, "t%d" % i)
    assert wait_until(lambda: len(rec.frames) == 20, 10)
    assert [f.delivery_count for f in rec.frames] == [1] * 20
    conn.disconnect()
