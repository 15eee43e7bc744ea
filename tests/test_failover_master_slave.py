"""Failover across a real shared-store master/slave pair of ActiveMQ brokers.

Two brokers on loopback share one KahaDB directory on local disk (never
tmpfs: the store must survive a kill -9 the way a real disk does). The one
holding the store lock is the master and has its STOMP port open; the other
waits on the lock with its ports closed (``lockAcquireSleepInterval`` 500 ms).
A producer (JMS-style API, ``failover:`` URI over both brokers,
``randomize=false``) sends persistent messages, each waiting for its RECEIPT;
a consumer (CLIENT_ACKNOWLEDGE, acking every few messages, or
INDIVIDUAL_ACKNOWLEDGE) reads through the same kind of URI. The master is
killed with SIGKILL mid-stream ten times in a row; after each takeover the
killed broker is started again as the new slave on the same store, so the pair
alternates.

What is checked, per kill and at the end:

* every message whose ``send`` returned was received at least once (0 lost);
* every duplicate is explained: a *redelivery* (same message-id as an earlier
  copy) carries ``redelivered:true`` or was flagged by the duplicate audit
  (delivery count > 1), and a kill happened between the two copies; a
  *re-sent copy* (new message-id, same body) is a send that was in flight
  across a kill (started before the master was dead, returned after the
  signal: a SEND can still reach the master between ``kill()``'s signal and
  the process's death, which is why a kill is an interval): the client wrote it
  again on the new socket because the old socket died before the RECEIPT
  (at-least-once); the broker had stored the first copy, so both exist, and
  no flag can mark the second one (it is a different message to the broker);
* both clients carry on after each kill (the consumer gets a message from the
  new master's socket, the producer gets a receipt from it), within bounds;
* the thread count is the same after every kill, and every amqstomp thread
  ends when the connections close.

Per-kill figures (sent, received, duplicates, takeover and first-message
times) are printed as a table (``pytest -s``) and attached to the test report.
Every wait is bounded; the test's own timeout is generous.
"""
import logging
import os
import shutil
import threading
import time
import uuid
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import pytest
from conftest import assert_none_left, wait_until

import amqstomp
from amqstomp.exception import AcknowledgeInterruptedError
from amqstomp.testing import MasterSlavePair, disk_temp_dir, filesystem_type, queue_statistics

log = logging.getLogger("amqstomp.tests.master_slave")

pytestmark = [pytest.mark.broker, pytest.mark.timeout(900)]

#: master kills in a row
KILLS = 10
#: ActiveMQ's lockAcquireSleepInterval for the pair (ms)
LOCK_SLEEP_MS = 500
#: messages the consumer must get (and the producer send) between two kills
FLOW_BETWEEN_KILLS = 40
#: bounds (s)
TAKEOVER_TIMEOUT_S = 60.0
RESUME_TIMEOUT_S = 60.0
SLAVE_START_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 90.0
#: the producer stops after this many sends whatever happens (a count bound)
MAX_SENDS = 500_000
#: CLIENT_ACKNOWLEDGE acks every this many messages (ActiveMQ's client ack is cumulative)
CLIENT_ACK_EVERY = 10


# --------------------------------------------------------------------------- the store on local disk


@pytest.fixture
def store_dir(tmp_path):
    """A KahaDB directory on a disk file system: under ``tmp_path`` unless that is
    tmpfs/ramfs, else under /var/tmp (removed afterwards)."""
    parent = disk_temp_dir("amqstomp-master-slave-", parent=str(tmp_path))
    assert filesystem_type(parent) not in ("tmpfs", "ramfs"), "no disk-backed directory for the store"
    try:
        yield os.path.join(parent, "kahadb")
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_filesystem_type_reads_proc_mounts(tmp_path):
    assert filesystem_type("/proc") == "proc"
    assert filesystem_type(str(tmp_path)) not in ("", "proc")


# --------------------------------------------------------------------------- the pair


def start_pair(factory: Any, store: str) -> MasterSlavePair:
    """A shared-store pair made by ``activemq_factory``: ``ms-a`` the master,
    ``ms-b`` waiting on the store lock (its STOMP port closed)."""
    return MasterSlavePair(store, factory=factory, names=("ms-a", "ms-b"), lock_acquire_sleep_ms=LOCK_SLEEP_MS,
                           timeout_s=SLAVE_START_TIMEOUT_S, persist_jms_redelivered=True,
                           allow_link_stealing=True, statistics=True).start()


def pair_url(pair: MasterSlavePair) -> str:
    """The failover URI over both brokers, in a fixed order (a first, b second)."""
    return pair.failover_url(initialReconnectDelay=10, maxReconnectDelay=200, timeout=60000)


# --------------------------------------------------------------------------- the clients


class Sent(NamedTuple):
    body: str
    started: float  # monotonic s: send() called
    done: float  # monotonic s: send() returned (the broker's RECEIPT came)


class Received(NamedTuple):
    at: float  # monotonic s
    body: str
    message_id: str
    redelivered_header: bool  # the broker's redelivered:true
    delivery_count: int  # >= 2 when the client's duplicate audit saw it before (or the broker redelivered)
    socket: int  # the consumer link's socket number it came on (0: unknown)


class ConnectionEvents:
    """Exception listener and transport listener of one connection: what it heard."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.exceptions: List[BaseException] = []
        self.interrupted = 0
        self.resumed = 0

    def __call__(self, exc: BaseException) -> None:  # the exception listener
        with self.lock:
            self.exceptions.append(exc)

    def on_transport_interrupted(self) -> None:
        with self.lock:
            self.interrupted += 1

    def on_transport_resumed(self) -> None:
        with self.lock:
            self.resumed += 1


def amq_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("amqstomp-")]


def failover_threads() -> List[str]:
    return [t.name for t in threading.enumerate() if t.name.endswith("-failover")]


class Stream:
    """A producer thread and a consumer thread on two JMS-style connections."""

    def __init__(self, url: str, acknowledge_mode: int) -> None:
        self.queue = "amqstomp-ms-" + uuid.uuid4().hex[:10]
        self.acknowledge_mode = acknowledge_mode
        factory = amqstomp.ConnectionFactory(url, send_timeout_ms=60000)
        self.consumer_conn = factory.create_connection(timeout_s=30)
        self.producer_conn = factory.create_connection(timeout_s=30)
        self.consumer_events = ConnectionEvents()
        self.producer_events = ConnectionEvents()
        for conn, events in ((self.consumer_conn, self.consumer_events), (self.producer_conn, self.producer_events)):
            conn.set_exception_listener(events)  # an ACK of a lost socket on the new one would be an ERROR here
            conn.set_transport_listener(events)
        self.lock = threading.Lock()
        self.sent: List[Sent] = []
        self.received: List[Received] = []
        self.errors: List[Tuple[str, BaseException]] = []
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.acks = 0
        self.interrupted_acks = 0
        session = self.consumer_conn.create_session(acknowledge_mode=acknowledge_mode)
        self.consumer = session.create_consumer(amqstomp.Queue(self.queue))
        self.consumer_conn.start()
        psession = self.producer_conn.create_session()
        self.producer = psession.create_producer(amqstomp.Queue(self.queue))
        self.producer_session = psession
        # internal: which socket a MESSAGE came on (the link's socket numbers)
        self.consumer_link = self.consumer_conn._state.consumer_link
        self.threads = [threading.Thread(target=self._produce, name="test-producer", daemon=True),
                        threading.Thread(target=self._consume, name="test-consumer", daemon=True)]

    @property
    def producer_link(self) -> Any:
        return self.producer_conn._state._producer_link

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def counts(self) -> Tuple[int, int]:
        with self.lock:
            return len(self.sent), len(self.received)

    def _produce(self) -> None:
        for i in range(MAX_SENDS):
            if self.stop_producing.is_set():
                return
            body = "m%07d" % i
            started = time.monotonic()
            try:
                self.producer.send(self.producer_session.create_text_message(body))  # persistent: waits for the receipt
            except Exception as exc:
                with self.lock:
                    self.errors.append(("send %s" % body, exc))
                return
            with self.lock:
                self.sent.append(Sent(body, started, time.monotonic()))

    def _consume(self) -> None:
        unacked = None
        pending = 0
        deadline = time.monotonic() + 1800  # far beyond the test's timeout: a bound, not a limit
        while time.monotonic() < deadline and not self.stop_consuming.is_set():
            try:
                message = self.consumer.receive(0.2)
            except Exception as exc:
                with self.lock:
                    self.errors.append(("receive", exc))
                return
            if message is None:
                if unacked is not None:  # idle: ack what is consumed
                    self._ack(unacked)
                    unacked, pending = None, 0
                continue
            socket = message.link_seq
            record = Received(time.monotonic(), message.text, message.message_id or "",
                              message.headers.get("redelivered") == "true", message.delivery_count, socket)
            with self.lock:
                self.received.append(record)
            if self.acknowledge_mode == amqstomp.INDIVIDUAL_ACKNOWLEDGE:
                self._ack(message)
                continue
            unacked, pending = message, pending + 1
            if pending >= CLIENT_ACK_EVERY:
                self._ack(unacked)
                unacked, pending = None, 0

    def _ack(self, message: Any) -> None:
        try:
            message.acknowledge()
            self.acks += 1
        except AcknowledgeInterruptedError:
            # messages of the killed master's socket: not acknowledged, and said so; they come again
            self.interrupted_acks += 1
        except Exception as exc:
            with self.lock:
                self.errors.append(("acknowledge %s" % message.text, exc))

    def stop(self) -> None:
        self.stop_producing.set()
        self.threads[0].join(90)
        assert not self.threads[0].is_alive(), "the producer did not stop (a send hung?)"

    def close(self) -> None:
        self.stop_producing.set()
        self.stop_consuming.set()
        for thread in self.threads:
            if thread.ident is not None:
                thread.join(30)
        for conn in (self.producer_conn, self.consumer_conn):
            conn.close()


# --------------------------------------------------------------------------- analysis


def classify(received: List[Received]) -> Dict[str, List[Tuple[Received, Received]]]:
    """Pairs (earlier copy, duplicate) by kind: ``redelivered`` (same message-id),
    ``resent`` (new message-id, same body)."""
    by_id: Dict[str, Received] = {}
    by_body: Dict[str, Received] = {}
    out: Dict[str, List[Tuple[Received, Received]]] = {"redelivered": [], "resent": []}
    for rec in received:
        if rec.message_id in by_id:
            out["redelivered"].append((by_id[rec.message_id], rec))
        elif rec.body in by_body:
            out["resent"].append((by_body[rec.body], rec))
        by_id.setdefault(rec.message_id, rec)
        by_body.setdefault(rec.body, rec)
    return out


def in_flight_at(windows: List[Tuple[float, float]], started: float, done: float) -> Optional[int]:
    """Index of a kill whose window (signal sent .. process reaped, monotonic s)
    overlaps a send's (started, done), or None."""
    for n, (before, after) in enumerate(windows):
        if started < after and done > before:
            return n
    return None


def phase_of(kills: List[float], t: float) -> int:
    """0 before the first kill, k after kill k (1-based) and before kill k+1."""
    return sum(1 for k in kills if k <= t)


def format_table(rows: List[Dict[str, Any]]) -> str:
    header = ["kill", "master", "sent", "received", "dup redelivered", "dup resent", "lost", "takeover s",
              "kill->1st msg s", "threads"]
    lines = [header] + [[str(r["kill"]), r["killed"], str(r["sent"]), str(r["received"]), str(r["dup_redelivered"]),
                         str(r["dup_resent"]), str(r["lost"]), "%.3f" % r["takeover_s"],
                         "%.3f" % r["kill_to_first_message_s"], str(r["threads"])] for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in lines)


# --------------------------------------------------------------------------- the test


@pytest.mark.compiled_pass_only  # broker kills and takeovers: failover threads and timers
@pytest.mark.parametrize("mode", ["client", "individual"])
def test_ten_master_kills_in_a_row_lose_nothing(activemq_factory, store_dir, mode):
    ack_mode = amqstomp.CLIENT_ACKNOWLEDGE if mode == "client" else amqstomp.INDIVIDUAL_ACKNOWLEDGE
    threads_before = threading.active_count()
    pair = start_pair(activemq_factory, store_dir)
    stream = Stream(pair_url(pair), ack_mode)
    kills: List[float] = []  # monotonic s just before each SIGKILL
    kill_windows: List[Tuple[float, float]] = []
    rows: List[Dict[str, Any]] = []
    thread_counts: List[int] = []
    try:
        stream.start()
        sent0, received0 = stream.counts()
        for k in range(1, KILLS + 1):
            # the flow counted from the last takeover on: it runs while the slave restarts
            assert wait_until(lambda: stream.counts()[0] >= sent0 + FLOW_BETWEEN_KILLS
                              and stream.counts()[1] >= received0 + FLOW_BETWEEN_KILLS
                              or stream.errors, RESUME_TIMEOUT_S), ("no flow before kill %d" % k, stream.counts())
            assert not stream.errors, stream.errors
            consumer_socket = stream.consumer_link.transport.link_seq
            producer_failovers = stream.producer_link.reconnector.failovers
            consumer_failovers = stream.consumer_link.reconnector.failovers
            killed = pair.master.broker_name
            t_kill, t_dead = pair.kill_master()
            kills.append(t_kill)
            kill_windows.append((t_kill, t_dead))
            t_ready = pair.wait_for_slave(TAKEOVER_TIMEOUT_S)

            def first_new() -> Optional[Received]:
                with stream.lock:
                    return next((r for r in stream.received[received0:] if r.socket > consumer_socket), None)

            assert wait_until(lambda: first_new() is not None or stream.errors, RESUME_TIMEOUT_S), \
                ("kill %d: no message from the new master" % k, stream.counts(), stream.errors)
            assert not stream.errors, stream.errors
            first = first_new()
            assert wait_until(lambda: stream.producer_link.reconnector.failovers > producer_failovers
                              and stream.counts()[0] > sent0 and stream.sent[-1].done > t_ready,
                              RESUME_TIMEOUT_S), "kill %d: the producer did not carry on" % k
            assert stream.consumer_link.reconnector.failovers == consumer_failovers + 1
            assert wait_until(lambda: not failover_threads(), 30), failover_threads()
            thread_counts.append(threading.active_count())
            rows.append({"kill": k, "killed": killed, "takeover_s": t_ready - t_kill,
                         "kill_to_first_message_s": first.at - t_kill,
                         "client_reconnect_s": first.at - t_ready, "threads": thread_counts[-1]})
            sent0, received0 = stream.counts()
            pair.restart_slave(SLAVE_START_TIMEOUT_S)
        # let the last master carry some traffic, then stop and drain
        sent_end, received_end = stream.counts()
        assert wait_until(lambda: stream.counts()[1] >= received_end + FLOW_BETWEEN_KILLS, RESUME_TIMEOUT_S)
        stream.stop()
        sent_bodies = {s.body for s in stream.sent}
        assert wait_until(lambda: sent_bodies <= {r.body for r in list(stream.received)}, DRAIN_TIMEOUT_S), \
            "lost: %s" % sorted(sent_bodies - {r.body for r in list(stream.received)})[:20]
        time.sleep(1.0)  # late duplicates (redeliveries in flight) are counted too
        stream.stop_consuming.set()
        stream.threads[1].join(30)
        assert not stream.threads[1].is_alive()
        assert not stream.errors, stream.errors
        assert stream.consumer_events.exceptions == [] and stream.producer_events.exceptions == []
        # one interruption and one resumption per kill and connection, as the Java client's one
        # transport (the producer's connection has two sockets, its consumer link and its producer
        # link, both lost at each kill: told once, resumed when the second is back)
        assert wait_until(lambda: (stream.consumer_events.interrupted, stream.consumer_events.resumed,
                                   stream.producer_events.interrupted, stream.producer_events.resumed)
                          == (KILLS, KILLS, KILLS, KILLS), 10), vars(stream.producer_events)
    finally:
        stream.close()
    assert wait_until(lambda: not amq_threads(), 15), amq_threads()
    assert threading.active_count() <= threads_before + 1, [t.name for t in threading.enumerate()]

    # ---- the accounting
    sent, received = stream.sent, stream.received
    received_bodies = {r.body for r in received}
    lost = [s.body for s in sent if s.body not in received_bodies]
    assert lost == []
    dups = classify(received)
    # a redelivery carries the broker's flag or the audit's count, and came on a later socket
    # than the earlier copy (the socket that died with the master never delivers it twice)
    for earlier, dup in dups["redelivered"]:
        assert dup.redelivered_header or dup.delivery_count > 1, (earlier, dup)
        assert dup.socket > earlier.socket > 0, (earlier, dup)
    # a re-sent copy is a send that was in flight across a kill
    sent_by_body = {s.body: s for s in sent}
    for earlier, dup in dups["resent"]:
        s = sent_by_body.get(dup.body)
        assert s is not None and in_flight_at(kill_windows, s.started, s.done) is not None, (earlier, dup, s)
    # never a duplicate without a kill before it
    assert all(phase_of(kills, dup.at) >= 1 for kind in dups.values() for _, dup in kind)

    for row in rows:
        k = row["kill"]
        phase_sends = [s for s in sent if phase_of(kills, s.done) == k - 1]  # acknowledged by the killed master
        row["sent"] = len(phase_sends)
        row["lost"] = sum(1 for s in phase_sends if s.body not in received_bodies)
        row["received"] = sum(1 for r in received if phase_of(kills, r.at) == k - 1)
        row["dup_redelivered"] = sum(1 for _, d in dups["redelivered"] if phase_of(kills, d.at) == k)
        row["dup_resent"] = sum(1 for _, d in dups["resent"] if phase_of(kills, d.at) == k)
    table = format_table(rows)
    flagged_by_broker = sum(1 for _, d in dups["redelivered"] if d.redelivered_header)
    summary = ("ack=%s: %d sent, %d received (%d distinct bodies), %d redelivered duplicates (%d with "
               "redelivered:true, %d only by the audit), %d re-sent copies, %d lost, in-flight sends across "
               "kills %d; threads after each kill %s"
               % (mode, len(sent), len(received), len(received_bodies), len(dups["redelivered"]),
                  flagged_by_broker, len(dups["redelivered"]) - flagged_by_broker,
                  len(dups["resent"]), len(lost),
                  sum(1 for s in sent if in_flight_at(kill_windows, s.started, s.done) is not None), thread_counts))
    print("\n" + table + "\n" + summary)

    assert len(rows) == KILLS and all(row["lost"] == 0 for row in rows)
    assert all(row["sent"] >= FLOW_BETWEEN_KILLS for row in rows)
    # the same threads after every kill (the failover threads have ended each time)
    assert max(thread_counts) == min(thread_counts), thread_counts
    # sanity bounds only (never tight): the takeover is the lock interval plus a start of the store
    assert all(row["takeover_s"] < TAKEOVER_TIMEOUT_S for row in rows)
    # the broker's view: every message acknowledged, nothing left on the queue, none in flight. Not the size 0:
    # the sends are PERSISTENT and overlap the consumer, and ActiveMQ 5.17 may leave such a send out of
    # enqueueCount for good (conftest.assert_none_left); what the last master dequeued is not known (it
    # counts from its start, and re-sent copies are messages of their own)
    assert_none_left(pair.master, stream.queue, 15)


@pytest.mark.compiled_pass_only  # a takeover's replay order: failover threads
def test_acks_of_the_new_socket_go_out_while_later_subscriptions_are_replayed(activemq_factory, store_dir):
    """Regression: the consumer subscribed first is replayed first and gets
    messages while the reconnect still replays the 30 later subscriptions (each
    waits for its RECEIPT); its ACKs belong to the new socket and must be sent.
    When they were dropped, a prefetch-1 INDIVIDUAL_ACKNOWLEDGE consumer stalled
    for good after the failover (1 message in flight on the broker, never acked)."""
    pair = start_pair(activemq_factory, store_dir)
    url = pair_url(pair) + "&jms.prefetchPolicy.queuePrefetch=1"
    queue = "amqstomp-ms-replay-" + uuid.uuid4().hex[:8]
    total = 200
    factory = amqstomp.ConnectionFactory(url, send_timeout_ms=60000)
    with factory.create_connection(timeout_s=30) as producer_conn:
        psession = producer_conn.create_session()
        producer = psession.create_producer(amqstomp.Queue(queue))
        for i in range(total):
            producer.send(psession.create_text_message("r%d" % i))
    got: List[str] = []
    with factory.create_connection(timeout_s=30) as conn:
        events = ConnectionEvents()
        conn.set_exception_listener(events)
        session = conn.create_session(acknowledge_mode=amqstomp.INDIVIDUAL_ACKNOWLEDGE)
        consumer = session.create_consumer(amqstomp.Queue(queue))
        for i in range(30):
            conn.create_session(acknowledge_mode=amqstomp.INDIVIDUAL_ACKNOWLEDGE).create_consumer(
                amqstomp.Queue("%s-other-%d" % (queue, i)))
        conn.start()
        first = consumer.receive(30)
        assert first is not None
        first.acknowledge()
        got.append(first.text)
        pair.kill_master()
        pair.wait_for_slave(TAKEOVER_TIMEOUT_S)
        new_master = pair.master  # the roles swap at the takeover
        deadline = time.monotonic() + RESUME_TIMEOUT_S
        while len(set(got)) < total and time.monotonic() < deadline:
            message = consumer.receive(1.0)
            if message is not None:
                got.append(message.text)
                message.acknowledge()
        assert events.exceptions == []
    assert len(set(got)) == total, "%d of %d received after the failover" % (len(set(got)), total)
    stats = queue_statistics(new_master, queue, timeout=15)
    assert stats["size"] == 0 and stats["inflightCount"] == 0, stats
