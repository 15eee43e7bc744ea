"""The chaos harness behind tests/test_chaos.py (bounded, CI) and bench/chaos.py (long, release checks).

One run: for every *mode* (a way of settling messages, below) a producer and a consumer talk to
ActiveMQ through their own :class:`~amqstomp.testing.proxy.TcpProxy`, with failover on (stomp.py
API: ``auto_reconnect=True``; JMS API: ``failover:`` URIs), while a schedule made from one seed
cuts, stalls, half-closes and refuses the proxies, holds the endpoint a consumer uses broken for
longer than the stall timeout (*held faults*, bench/_chaos_faults.py: the peer stops reading
while the consumer's own send() is blocked; the endpoint drops SYNs), runs busy-loop processes
that compete for the CPU, and (with a shared-store master/slave pair) kills the master with
SIGKILL. Every message
carries a unique sequence number (property/header ``chaos_seq``). A :class:`Ledger` per mode
records each delivery the application saw (message id, ``redelivered`` flag, delivery count) and
each settlement the API reported as done; at the end the producers stop, the chaos heals, the
consumers drain, close, and the broker's own view is read (statistics plugin, then a fresh plain
consumer drains what is left, and ``ActiveMQ.DLQ`` is searched for the run's messages).

Invariants, checked per mode (:data:`MODES` says which apply):

``lost``
    every sequence number whose send was confirmed (receipt) is delivered at least once.
    Allowed only for ``stomp-auto`` (``ack:auto`` is at-most-once: the broker acks at dispatch,
    what is in flight or buffered when the socket dies is gone; docs/guides/consumers.md).
``settled->redelivered``
    a message (message-id) whose settlement returned normally is never delivered again.
    Strict for the modes whose settlement call reports the broker applied it: stomp.py API
    ``client``/``client-individual`` (``ack(..., receipt=r)`` then ``wait_for_receipt(r)``
    returned), JMS CLIENT/INDIVIDUAL with ``jms.sendAcksAsync=false`` (acknowledge() waits for
    the ACK's RECEIPT: "a normal return means the broker applied it"), transacted sessions
    (``commit()`` returned). Counted but allowed for ``jms-client-async``/
    ``jms-individual-async`` (the default ``sendAcksAsync=true``: acknowledge() returns once the
    ACK is written, as ActiveMQ's Java client) and for modes where the library settles
    (stomp ``auto``/optimized, JMS AUTO/DUPS_OK: redelivery after a failure is documented).
``rolled-back-gone``
    transacted: every message of a ``commit()`` that raised ``TransactionRolledBackError`` is
    delivered again ("its consumed messages come again"). A COMMIT the broker did execute but
    the client reported as rolled back shows up here. ``TransactionInDoubtError`` (if the
    library has it) promises nothing either way: counted, not checked.
``rbsend`` (transacted producers of ``jms-tx1``/``jms-txbatch``)
    no send of a producer transaction whose ``commit()`` (or a send in it) raised
    ``TransactionRolledBackError`` is ever delivered ("its sends were dropped"); the batch is sent
    again in a new transaction, so each try is told apart by its ``chaos_attempt`` header.
``unflagged``
    a redelivery (a message-id this consumer saw before) carries ``redelivered: true`` or a
    delivery count > 1 (docs/guides/failover.md: "every one carrying redelivered: true").
``stalls``
    no consumer idle for ``stall_timeout_s`` while the broker holds messages for it (its queue
    size > 0 by the statistics plugin, or, if the broker cannot answer, confirmed sends it has
    not delivered yet).
``left`` / ``dlq``
    after the consumer closed, its queue is empty (statistics ``size`` 0 and nothing for a
    fresh consumer) and nothing of the run is in ``ActiveMQ.DLQ`` (redelivery limits are off).
``errors``
    an API call raised what its documentation does not list for a failover connection, the
    broker sent an ERROR frame, an exception listener / ``on_disconnected`` fired, a listener
    call raised; globally: ERROR log records of ``amqstomp.*`` loggers (not
    ``amqstomp.testing``), uncaught exceptions in any thread (``threading.excepthook``).
``leaks`` (global)
    after everything closed, the threads and the process's sockets (/proc/self/fd) are back to
    what they were before the run.

Reproducing: the run's seed decides the schedule (every chaos event, its time and target, the
busy-loop windows, the kills), each mode's prefetch, batch sizes, send bursts and processing
delays. Thread timing is not replayable, the schedule is: ``python bench/chaos.py --seed X
--modes ...`` replays a reported run's schedule.

Units: seconds (float) unless a name ends in ``_ms``.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import os
import queue as _queue
import random
import subprocess
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import amqstomp
import amqstomp.exception as _exc
from amqstomp.testing import master_slave
from amqstomp.testing.broker import ActiveMQBroker, queue_statistics, start_broker
from amqstomp.testing.proxy import TcpProxy

from bench._chaos_faults import (ALL_FAULTS, HELD_ACTIONS, HELD_FAULTS, HeldFaults, free_of_held, held_intervals,
                                 held_window, plan_held)

log = logging.getLogger("amqstomp.testing.chaos")

Address = Tuple[str, int]

# ------------------------------------------------------------------------------------------ modes


@dataclass(frozen=True)
class ModeSpec:
    name: str
    api: str  # "stomp" | "jms" | "aio" (an amqstomp.aio consumer, bench/_chaos_aio.py; a stomp.py-API producer)
    settle: str  # what the consumer does
    may_lose: bool = False  # confirmed sends may never arrive (documented at-most-once)
    strict: bool = False  # settled-then-redelivered is a violation
    transacted: bool = False
    allowed: str = ""  # one line: what the mode may do under failures


MODES: Dict[str, ModeSpec] = {m.name: m for m in (
    ModeSpec("stomp-auto", "stomp", "auto", may_lose=True,
             allowed="loss (ack:auto is at-most-once); no redelivery expected"),
    ModeSpec("stomp-client", "stomp", "client", strict=True,
             allowed="redelivery of messages whose cumulative ACK was not confirmed by its RECEIPT"),
    ModeSpec("stomp-individual", "stomp", "client-individual", strict=True,
             allowed="redelivery of messages whose ACK was not confirmed by its RECEIPT"),
    ModeSpec("stomp-optimized", "stomp", "optimized",
             allowed="redelivery (the library's batched ACKs may be lost)"),
    ModeSpec("jms-auto", "jms", "AUTO",
             allowed="redelivery (batched ACKs may be lost)"),
    ModeSpec("jms-dups-ok", "jms", "DUPS_OK",
             allowed="redelivery (lazy batched ACKs may be lost)"),
    ModeSpec("jms-client", "jms", "CLIENT", strict=True,
             allowed="redelivery of messages whose acknowledge() raised (sendAcksAsync=false)"),
    ModeSpec("jms-individual", "jms", "INDIVIDUAL", strict=True,
             allowed="redelivery of messages whose acknowledge() raised (sendAcksAsync=false)"),
    ModeSpec("jms-client-async", "jms", "CLIENT-async",
             allowed="redelivery after acknowledge() returned (sendAcksAsync=true: ACK written, not confirmed)"),
    ModeSpec("jms-individual-async", "jms", "INDIVIDUAL-async",
             allowed="redelivery after acknowledge() returned (sendAcksAsync=true: ACK written, not confirmed)"),
    ModeSpec("jms-tx1", "jms", "TX1", strict=True, transacted=True,
             allowed="redelivery after a commit() that raised (rolled back / in doubt); producer and "
                     "consumer commit per message; an in-doubt producer commit may duplicate"),
    ModeSpec("jms-txbatch", "jms", "TXBATCH", strict=True, transacted=True,
             allowed="redelivery after a commit() that raised (rolled back / in doubt); producer and "
                     "consumer commit per 1-8 messages; an in-doubt producer commit may duplicate"),
    ModeSpec("aio-auto", "aio", "auto", may_lose=True,
             allowed="loss (ack:auto is at-most-once); handler form, 2 workers"),
    ModeSpec("aio-individual", "aio", "individual", strict=True,
             allowed="redelivery of messages whose ack(receipt=True) raised"),
    ModeSpec("aio-client", "aio", "client", strict=True,
             allowed="redelivery of messages whose cumulative ack(receipt=True) raised, or of a lost socket"),
    ModeSpec("aio-handler", "aio", "handler",
             allowed="redelivery (the handler form's ACK has no receipt); 4 workers, 5% raise once"),
)}

ALL_MODES: List[str] = list(MODES)
#: the amqstomp.aio modes (no held faults are planned for them: see bench/_chaos_aio.py)
AIO_MODES: List[str] = [m for m in MODES if MODES[m].api == "aio"]


def _exception_class(name: str) -> Optional[type]:
    for module in (_exc, getattr(amqstomp, "jms", None)):
        cls = getattr(module, name, None) if module is not None else None
        if isinstance(cls, type):
            return cls
    return None


#: exceptions a commit() may raise after which the transaction is known rolled back / unknown
ROLLED_BACK: Tuple[type, ...] = tuple(c for c in (_exception_class("TransactionRolledBackError"),) if c)
IN_DOUBT: Tuple[type, ...] = tuple(c for c in (_exception_class("TransactionInDoubtError"),) if c)
ACK_INTERRUPTED: Tuple[type, ...] = tuple(c for c in (_exception_class("AcknowledgeInterruptedError"),) if c)
#: a send that failed this way is sent again (at-least-once producers); not an error
SEND_RETRY: Tuple[type, ...] = (_exc.ConnectionClosedException, _exc.NotConnectedException, _exc.ReceiptTimeout)
#: a confirmed ACK (stomp.py API: ack with a receipt) that failed this way was not settled; not an error
#: (KeyError: wait_for_receipt of an ACK the library did not write, its message came on a lost socket)
STOMP_ACK_UNCONFIRMED: Tuple[type, ...] = (_exc.ConnectionClosedException, _exc.NotConnectedException,
                                           _exc.ReceiptTimeout, KeyError)
#: acknowledge() (JMS) documents these for a failover connection (sendAcksAsync=false adds ReceiptTimeout)
JMS_ACK_UNSETTLED: Tuple[type, ...] = ACK_INTERRUPTED + (_exc.ReceiptTimeout,) + tuple(
    getattr(_exc, name) for name in ("AcknowledgeInDoubtError",) if hasattr(_exc, name))


# ------------------------------------------------------------------------------------------ config


DEFAULT_WEIGHTS: Dict[str, float] = {"cut": 4, "stall": 2, "half_close": 2, "refuse": 1}


@dataclass
class ChaosConfig:
    """What one run does. ``seed`` decides everything random."""

    seed: int
    modes: Sequence[str] = tuple(ALL_MODES)
    seconds: float = 20.0  # producers + chaos
    rate: float = 20.0  # mean sends per second per mode (plus bursts)
    burst_probability: float = 0.02  # per send: start a burst
    burst_size: Tuple[int, int] = (10, 60)
    chaos_gap_s: float = 1.5  # mean gap between proxy events
    stall_s: Tuple[float, float] = (0.3, 4.0)
    refuse_s: Tuple[float, float] = (0.2, 1.5)
    #: the classic proxy faults and how often each is picked (bench/_chaos_faults.parse_faults)
    weights: Dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    #: held faults (bench/_chaos_faults.py): "unread" (the peer stops reading while the consumer's
    #: send() is blocked), "drop" (the consumer's endpoint drops SYNs); each mode's consumer gets a
    #: second endpoint for them
    held_faults: Tuple[str, ...] = HELD_FAULTS
    held_share: float = 0.5  # share of the modes that get a held fault per round
    held_s: Optional[Tuple[float, float]] = None  # a held fault's length; None: stall_timeout_s + 1..3 s
    hogs: int = 1  # busy-loop processes at once while a hog window is on (0: none)
    hog_on_s: Tuple[float, float] = (2.0, 8.0)
    hog_off_s: Tuple[float, float] = (1.0, 5.0)
    kills: int = 0  # master kills (needs a MasterSlavePair)
    heartbeat_ms: int = 1000
    #: a stall (a violation): a consumer that got nothing for this long while the broker holds
    #: messages for it (its queue's size by the statistics plugin: produced, not yet settled)
    stall_timeout_s: float = 10.0
    drain_timeout_s: float = 60.0
    quiet_s: float = 1.5  # drained = everything seen and nothing delivered for this long
    prefetch_choices: Sequence[int] = (1, 5, 50, 500)
    persistent: bool = True
    leak_timeout_s: float = 15.0
    #: tests of the checker only: "skip-ack" makes the ack-calling consumers record a settlement
    #: without acknowledging anything; "no-heartbeats" connects the consumers without heart-beats,
    #: so a stalled endpoint is never noticed (broken clients the invariants must catch)
    sabotage: str = ""

    @property
    def faults(self) -> List[str]:
        return [f for f in ALL_FAULTS if self.weights.get(f) or f in self.held_faults]

    def replay_command(self) -> str:
        return ("python bench/chaos.py --runs 1 --seconds %g --seed %d --modes %s --hogs %d --kills %d --rate %g "
                "--gap %g --prefetch %s --faults %s --held-share %g --stall-timeout %g%s"
                % (self.seconds, self.seed, ",".join(self.modes), self.hogs, self.kills, self.rate, self.chaos_gap_s,
                   ",".join(map(str, self.prefetch_choices)), ",".join(self.faults) or "none", self.held_share,
                   self.stall_timeout_s, "" if self.persistent else " --non-persistent"))


# ------------------------------------------------------------------------------------------ ledger

_event_index = itertools.count(1)  # one order for every delivery and settlement of the process


def _next_index() -> int:
    return next(_event_index)


@dataclass
class Delivery:
    index: int
    at: float
    seq: int
    message_id: str
    flagged: bool  # redelivered:true
    count: int  # delivery count (1: first)
    link: int  # the socket it came on, when the library says (0: unknown)
    attempt: str = ""  # the send attempt (chaos_attempt) this copy came from


class Ledger:
    """What one mode's application saw and was told. Thread-safe; all times monotonic."""

    MAX_NOTES = 30

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.lock = threading.Lock()
        self.attempts: Dict[int, int] = {}  # seq -> sends tried
        #: "seq.n" (header chaos_attempt) -> "sent" | "confirmed" | "failed" | "committed" |
        #: "rolled_back" (its transaction's commit()/send raised TransactionRolledBackError) | "in_doubt"
        self.attempt_status: Dict[str, str] = {}
        self.producer_commits: Dict[str, int] = {}
        self.confirmed: Dict[int, float] = {}  # seq -> when its send was confirmed
        self.deliveries: List[Delivery] = []
        self.seen_seqs: Set[int] = set()
        self.settled: Dict[str, int] = {}  # message-id -> event index after the call returned
        self.rolled_back: List[Tuple[int, List[str]]] = []
        self.in_doubt: List[Tuple[int, List[str]]] = []
        self.commits_ok = 0
        self.unsettled_calls: Dict[str, int] = {}  # "acknowledge: AcknowledgeInterruptedError" -> n (documented)
        self.send_retries: Dict[str, int] = {}
        self.errors: List[str] = []
        self.error_count = 0
        self.stalls: List[Tuple[float, float, str]] = []  # (start, duration, why)
        self.last_delivery = time.monotonic()
        self.started = time.monotonic()
        self.listener_events: Dict[str, int] = {}

    # producer side
    def attempt(self, seq: int) -> str:
        """A new send attempt of ``seq``; returns its id (``chaos_attempt``)."""
        with self.lock:
            n = self.attempts[seq] = self.attempts.get(seq, 0) + 1
            aid = "%d.%d" % (seq, n)
            self.attempt_status[aid] = "sent"
        return aid

    def attempt_outcome(self, attempt_ids: Sequence[str], status: str) -> None:
        with self.lock:
            for aid in attempt_ids:
                self.attempt_status[aid] = status
            if status in ("committed", "rolled_back", "in_doubt"):
                self.producer_commits[status] = self.producer_commits.get(status, 0) + 1

    def confirm(self, seq: int) -> None:
        with self.lock:
            self.confirmed.setdefault(seq, time.monotonic())

    def send_retry(self, exc: BaseException) -> None:
        key = type(exc).__name__
        with self.lock:
            self.send_retries[key] = self.send_retries.get(key, 0) + 1

    # consumer side
    def deliver(self, seq: int, message_id: str, flagged: bool, count: int, link: int = 0,
                attempt: str = "") -> Delivery:
        d = Delivery(_next_index(), time.monotonic(), seq, message_id, flagged, count, link, attempt)
        with self.lock:
            self.deliveries.append(d)
            self.seen_seqs.add(seq)
            self.last_delivery = d.at
        return d

    def settle(self, message_ids: Sequence[str]) -> None:
        """Call right after the settling call returned normally."""
        index = _next_index()
        with self.lock:
            for mid in message_ids:
                self.settled.setdefault(mid, index)

    def commit_ok(self, message_ids: Sequence[str]) -> None:
        self.settle(message_ids)
        with self.lock:
            self.commits_ok += 1

    def commit_rolled_back(self, message_ids: Sequence[str]) -> None:
        index = _next_index()
        with self.lock:
            self.rolled_back.append((index, list(message_ids)))

    def commit_in_doubt(self, message_ids: Sequence[str]) -> None:
        index = _next_index()
        with self.lock:
            self.in_doubt.append((index, list(message_ids)))

    def unsettled(self, call: str, exc: BaseException) -> None:
        key = "%s: %s" % (call, type(exc).__name__)
        with self.lock:
            self.unsettled_calls[key] = self.unsettled_calls.get(key, 0) + 1

    def error(self, what: str, exc: Optional[BaseException] = None) -> None:
        text = what if exc is None else "%s: %s: %s" % (what, type(exc).__name__, exc)
        with self.lock:
            self.error_count += 1
            if len(self.errors) < self.MAX_NOTES:
                self.errors.append(text)
        log.warning("chaos %s: %s", self.mode, text)

    def event(self, name: str) -> None:
        with self.lock:
            self.listener_events[name] = self.listener_events.get(name, 0) + 1

    # views
    def pending_confirmed(self) -> Tuple[int, float]:
        """(how many confirmed seqs were never delivered, when the oldest was confirmed)."""
        with self.lock:
            missing = [t for s, t in self.confirmed.items() if s not in self.seen_seqs]
        return len(missing), (min(missing) if missing else 0.0)


# ------------------------------------------------------------------------------------------ results


@dataclass
class ModeResult:
    mode: str
    sent: int = 0  # confirmed sends
    send_attempts: int = 0
    deliveries: int = 0
    unique: int = 0  # distinct seqs delivered
    redeliveries: int = 0  # deliveries of a message-id seen before
    dup_copies: int = 0  # extra message-ids for one seq (a send repeated after a lost receipt)
    settled: int = 0  # message-ids settled
    settled_redelivered: int = 0
    commits_ok: int = 0
    rolled_back: int = 0  # messages in commits that raised TransactionRolledBackError
    rolled_back_gone: int = 0
    in_doubt: int = 0  # messages in commits that raised TransactionInDoubtError
    rolled_back_sends_delivered: int = 0  # sends of producer transactions reported rolled back, delivered
    lost: int = 0
    unflagged: int = 0
    stalls: int = 0
    stall_max_s: float = 0.0
    held: int = 0  # held faults applied to its consumer (bench/_chaos_faults.py)
    failover_max_s: Optional[float] = None  # the longest from a held fault to the consumer resumed
    held_unresumed: int = 0  # held faults the consumer was not connected again within
    left: int = 0
    dlq: int = 0
    errors: int = 0
    notes: List[str] = field(default_factory=list)
    violations: List[str] = field(default_factory=list)
    info: Dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def failover_text(self) -> str:
        """``fo-max``: the longest held fault to resumed (s); ``-`` none; ``never`` not within the fault."""
        if not self.held:
            return "-"
        if self.held_unresumed:
            return "never"
        return "%.1f" % self.failover_max_s if self.failover_max_s is not None else "-"


def evaluate(spec: ModeSpec, ledger: Ledger, left: int = 0, left_settled: int = 0, dlq: int = 0,
             broker_size: Optional[int] = None) -> ModeResult:
    """The invariants of ``spec`` over what ``ledger`` recorded (and what the broker had left)."""
    r = ModeResult(spec.name)
    with ledger.lock:
        deliveries = sorted(ledger.deliveries, key=lambda d: d.index)
        confirmed = dict(ledger.confirmed)
        settled = dict(ledger.settled)
        rolled_back = list(ledger.rolled_back)
        in_doubt = list(ledger.in_doubt)
        r.send_attempts = sum(ledger.attempts.values())
        r.commits_ok = ledger.commits_ok
        r.errors = ledger.error_count
        errors = list(ledger.errors)
        stalls = list(ledger.stalls)
        r.info = {"unsettled_calls": dict(ledger.unsettled_calls), "send_retries": dict(ledger.send_retries),
                  "listener_events": dict(ledger.listener_events),
                  "producer_commits": dict(ledger.producer_commits)}
        attempt_status = dict(ledger.attempt_status)
    r.sent = len(confirmed)
    r.deliveries = len(deliveries)
    seen_mids: Dict[str, int] = {}
    mids_by_seq: Dict[int, Set[str]] = {}
    last_delivery_of: Dict[str, int] = {}
    settled_redelivered: List[Delivery] = []
    unflagged: List[Delivery] = []
    for d in deliveries:
        if d.message_id in seen_mids:
            r.redeliveries += 1
            if not d.flagged and d.count <= 1:
                unflagged.append(d)
        seen_mids[d.message_id] = seen_mids.get(d.message_id, 0) + 1
        mids_by_seq.setdefault(d.seq, set()).add(d.message_id)
        last_delivery_of[d.message_id] = d.index
        s = settled.get(d.message_id)
        if s is not None and d.index > s:
            settled_redelivered.append(d)
    r.unique = len(mids_by_seq)
    bad_sends = [d for d in deliveries if d.attempt and attempt_status.get(d.attempt) == "rolled_back"]
    r.rolled_back_sends_delivered = len({d.attempt for d in bad_sends})
    r.dup_copies = sum(len(m) - 1 for m in mids_by_seq.values())
    r.settled = len(settled)
    r.settled_redelivered = len(settled_redelivered)
    r.unflagged = len(unflagged)
    lost = sorted(s for s in confirmed if s not in mids_by_seq)
    r.lost = len(lost)
    gone: List[str] = []
    for index, mids in rolled_back:
        r.rolled_back += len(mids)
        for mid in mids:
            if last_delivery_of.get(mid, 0) < index:
                gone.append(mid)
    r.rolled_back_gone = len(gone)
    r.in_doubt = sum(len(m) for _, m in in_doubt)
    r.stalls = len(stalls)
    r.stall_max_s = max((s[1] for s in stalls), default=0.0)
    r.left = max(left, broker_size or 0)
    r.dlq = dlq

    def seqs(items: Sequence[Delivery]) -> str:
        return ", ".join("seq %d (%s, flagged=%s count=%d link=%d)" % (d.seq, d.message_id, d.flagged, d.count,
                                                                         d.link) for d in items[:5])

    if r.lost and not spec.may_lose:
        r.violations.append("lost %d confirmed message(s): seqs %s" % (r.lost, lost[:10]))
    if r.settled_redelivered:
        text = "%d delivery(ies) of messages already settled: %s" % (r.settled_redelivered, seqs(settled_redelivered))
        if spec.strict:
            r.violations.append(text)
        else:
            r.notes.append("allowed: " + text)
    if r.rolled_back_gone:
        r.violations.append("%d message(s) of commits reported rolled back never came again (committed after all?): %s"
                            % (r.rolled_back_gone, gone[:5]))
    if r.rolled_back_sends_delivered:
        r.violations.append("%d send(s) of producer transactions reported rolled back were delivered "
                            "(committed after all?): %s" % (r.rolled_back_sends_delivered,
                                                           sorted({d.attempt for d in bad_sends})[:10]))
    if r.unflagged:
        r.violations.append("%d redelivery(ies) without redelivered flag or delivery count: %s"
                            % (r.unflagged, seqs(unflagged)))
    if r.stalls:
        r.violations.append("%d stall(s), longest %.1f s: %s" % (r.stalls, r.stall_max_s,
                                                                "; ".join(s[2] for s in stalls[:3])))
    if r.left:
        r.violations.append("%d message(s) left on the broker after the consumer closed (%d of them settled)"
                            % (r.left, left_settled))
    if r.dlq:
        r.violations.append("%d message(s) of the run in ActiveMQ.DLQ" % r.dlq)
    if r.errors:
        r.violations.append("%d error(s): %s" % (r.errors, " | ".join(errors[:5])))
    if spec.may_lose and r.lost:
        r.notes.append("allowed: lost %d (at-most-once)" % r.lost)
    return r


@dataclass
class RunReport:
    config: ChaosConfig
    modes: Dict[str, ModeResult] = field(default_factory=dict)
    global_violations: List[str] = field(default_factory=list)
    log_errors: List[str] = field(default_factory=list)
    thread_exceptions: List[str] = field(default_factory=list)
    harness_notes: List[str] = field(default_factory=list)
    schedule: List[str] = field(default_factory=list)
    events_done: List[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    drain_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.global_violations and all(m.ok for m in self.modes.values())

    def violations(self) -> List[str]:
        out = ["[%s] %s" % (name, v) for name, m in self.modes.items() for v in m.violations]
        return out + ["[global] %s" % v for v in self.global_violations]

    COLUMNS = ("mode", "sent", "deliv", "uniq", "redeliv", "dupsend", "settled", "set->redel", "rolledbk",
               "rb-gone", "indoubt", "rbsend", "lost", "unflag", "stalls", "held", "fo-max", "left", "dlq", "errors",
               "verdict")

    def table(self) -> str:
        rows = []
        for name, m in self.modes.items():
            rows.append((name, m.sent, m.deliveries, m.unique, m.redeliveries, m.dup_copies, m.settled,
                         m.settled_redelivered, m.rolled_back, m.rolled_back_gone, m.in_doubt,
                         m.rolled_back_sends_delivered, m.lost, m.unflagged,
                         m.stalls, m.held, m.failover_text(), m.left, m.dlq, m.errors, "ok" if m.ok else "FAIL"))
        return format_table(rows, self.COLUMNS)

    def text(self, verbose: bool = False) -> str:
        c = self.config
        lines = ["chaos run seed=%d: %d mode(s), %.0f s of chaos (%d events), drain %.1f s, total %.1f s -> %s"
                 % (c.seed, len(self.modes), c.seconds, len(self.events_done), self.drain_s, self.elapsed_s,
                    "OK" if self.ok else "VIOLATIONS"),
                 self.table()]
        for v in self.violations():
            lines.append("VIOLATION " + v)
        for name, m in self.modes.items():
            for note in m.notes:
                lines.append("note [%s] %s" % (name, note))
            extra = {k: v for k, v in m.info.items() if v}
            if extra and (verbose or not m.ok):
                lines.append("info [%s] %s" % (name, extra))
        for note in self.harness_notes:
            lines.append("harness: " + note)
        if verbose:
            lines.append("events: " + "; ".join(self.events_done))
        lines.append("replay: " + c.replay_command())
        return "\n".join(lines)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "seed": self.config.seed, "ok": self.ok, "elapsed_s": round(self.elapsed_s, 2),
            "drain_s": round(self.drain_s, 2),
            "config": {k: (list(v) if isinstance(v, (tuple, list)) else v) for k, v in vars(self.config).items()},
            "modes": {name: {k: v for k, v in vars(m).items()} for name, m in self.modes.items()},
            "global_violations": self.global_violations, "log_errors": self.log_errors[:50],
            "thread_exceptions": self.thread_exceptions[:50], "events": self.events_done,
            "harness_notes": self.harness_notes, "replay": self.config.replay_command(),
        }


def format_table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(h) for h in header]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ process watch


def socket_fds() -> Set[str]:
    """``"fd:inode"`` of this process's sockets (from /proc/self/fd)."""
    out = set()
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for name in names:
        try:
            target = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue
        if target.startswith("socket:"):
            out.add(name + ":" + target)
    return out


class ErrorCapture(logging.Handler):
    """ERROR records of ``amqstomp.*`` loggers (not ``amqstomp.testing``) and uncaught thread
    exceptions, while installed."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: List[str] = []
        self.thread_exceptions: List[str] = []
        self._previous_hook: Any = None
        self._lock2 = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        name = record.name
        if not (name == "amqstomp" or name.startswith("amqstomp.")) or name.startswith("amqstomp.testing"):
            return
        try:
            text = "%s %s [%s]: %s" % (record.levelname, name, record.threadName, record.getMessage())
        except Exception:  # pragma: no cover - a bad format string in the library
            text = "%s %s: %r %r" % (record.levelname, name, record.msg, record.args)
        if record.exc_info and record.exc_info[1] is not None:
            text += " (%s: %s)" % (type(record.exc_info[1]).__name__, record.exc_info[1])
        with self._lock2:
            self.records.append(text)

    def _hook(self, args: Any) -> None:
        tb = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        name = args.thread.name if args.thread is not None else "?"
        with self._lock2:
            self.thread_exceptions.append("thread %s: %s" % (name, tb.strip().splitlines()[-1] if tb else "?"))
            self.thread_exceptions.append(tb[-2000:])
        if self._previous_hook is not None:
            self._previous_hook(args)

    def install(self) -> None:
        logger = logging.getLogger("amqstomp")
        logger.addHandler(self)
        self._previous_hook = threading.excepthook
        threading.excepthook = self._hook

    def uninstall(self) -> None:
        logging.getLogger("amqstomp").removeHandler(self)
        if threading.excepthook == self._hook:
            threading.excepthook = self._previous_hook


# ------------------------------------------------------------------------------------------ proxy

def make_proxy(target: Address) -> TcpProxy:
    """A started :class:`TcpProxy` to ``target`` that re-arms ``TCP_QUICKACK`` before each
    read, as the client does (``quickack=True``, the default, said here on purpose).

    Without it the proxy's own sockets delay their TCP ACKs (40 ms) while ActiveMQ's STOMP
    connector runs Nagle: a receipt round trip through the proxy took ~45 ms (a prefetch-1
    consumer acking with receipts: 100 messages in 4.6 s through the proxy, 0.2 s direct), so
    the proxy, not the client, would set the pace of such consumers."""
    return TcpProxy(target, quickack=True).start()


# ------------------------------------------------------------------------------------------ brokers


class SingleBroker:
    """One running broker (e.g. the ``activemq`` fixture): proxies all front it."""

    can_kill = False

    def __init__(self, broker: ActiveMQBroker) -> None:
        self.broker = broker

    @property
    def addresses(self) -> List[Address]:
        return [self.broker.host_and_ports[0]]

    def stats_targets(self) -> List[ActiveMQBroker]:
        return [self.broker]

    def kill_master(self) -> str:  # pragma: no cover - can_kill is False
        raise RuntimeError("a single broker cannot fail over")

    def ready_for_kill(self) -> bool:
        return False

    def close(self) -> None:
        pass


class MasterSlavePair:
    """A :class:`amqstomp.testing.master_slave.MasterSlavePair` (``chaos-a``, ``chaos-b``; lock
    interval 500 ms, ``persistJMSRedelivered``, ``allowLinkStealing``, statistics) as the run
    drives it: :meth:`kill_master` returns at once and a background thread waits for the takeover
    and starts the killed broker again as the new slave. ``make(**options)`` starts one broker
    (``wait=False`` for the slave), e.g. the ``activemq_factory`` fixture or :func:`make_broker`.
    Without ``store`` the pair makes its own on disk and removes it on :meth:`close`."""

    can_kill = True
    TAKEOVER_TIMEOUT_S = 60.0

    def __init__(self, make: Callable[..., ActiveMQBroker], store: Optional[str] = None) -> None:
        self.pair = master_slave.MasterSlavePair(
            store, factory=make, names=("chaos-a", "chaos-b"), timeout_s=self.TAKEOVER_TIMEOUT_S,
            persist_jms_redelivered=True, allow_link_stealing=True, statistics=True).start()
        self._recovering: Optional[threading.Thread] = None
        self.kills = 0
        self.takeovers: List[float] = []  # s from the SIGKILL to the slave answering STOMP
        self.problems: List[str] = []

    @property
    def addresses(self) -> List[Address]:
        return self.pair.addresses

    def stats_targets(self) -> List[ActiveMQBroker]:
        return list(self.pair.roles())  # the master first

    def ready_for_kill(self) -> bool:
        t = self._recovering
        return t is None or not t.is_alive()

    def kill_master(self) -> str:
        """SIGKILL the master; returns its name."""
        victim = self.pair.master
        started, _ = self.pair.kill_master()
        self.kills += 1

        def recover() -> None:
            try:
                self.takeovers.append(self.pair.wait_for_slave(self.TAKEOVER_TIMEOUT_S) - started)
                self.pair.restart_slave()
            except Exception as exc:  # reported by the run
                self.problems.append("recovery after killing %s: %s" % (victim.broker_name, exc))

        self._recovering = threading.Thread(target=recover, name="chaos-recover", daemon=True)
        self._recovering.start()
        return victim.broker_name

    def wait_recovered(self, timeout: float) -> bool:
        t = self._recovering
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

    def close(self) -> None:
        self.wait_recovered(90)
        try:
            self.pair.stop()
        except Exception:  # pragma: no cover
            log.exception("stopping %r", self.pair)


#: Start a broker for bench (``wait=False`` returns before it answers).
make_broker = start_broker


# ------------------------------------------------------------------------------------------ clients


def _stomp_flags(frame: Any) -> Tuple[bool, int]:
    flagged = frame.headers.get("redelivered") == "true"
    return flagged, int(getattr(frame, "delivery_count", 1) or 1)


class _Client:
    """A producer or consumer of one mode; ``start()``, ``stop()``, ``close()``."""

    def __init__(self, run: "ChaosRun", spec: ModeSpec, ledger: Ledger, queue_name: str,
                 addresses: List[Address], rng: random.Random) -> None:
        self.run = run
        self.spec = spec
        self.ledger = ledger
        self.queue_name = queue_name
        self.addresses = addresses
        self.rng = rng
        self.stopping = threading.Event()
        self.closing = False
        self.threads: List[threading.Thread] = []
        self.conn: Any = None  # set by start(); None when its set-up failed

    def close(self) -> None:
        self.closing = True
        if self.conn is None:
            return
        try:
            if self.spec.api == "stomp" or (self.spec.api == "aio" and not isinstance(self, Consumer)):
                self.conn.disconnect()
            else:
                self.conn.close()
        except Exception as exc:
            self.ledger.error("closing the %s" % type(self).__name__.lower(), exc)

    def transport_event(self, name: str) -> None:
        """``on_transport_interrupted`` / ``_resumed`` of this client's connection."""
        self.ledger.event(name)

    def _thread(self, target: Callable[[], None], role: str) -> None:
        t = threading.Thread(target=self._guard(target), name="chaos-%s-%s" % (self.spec.name, role), daemon=True)
        self.threads.append(t)
        t.start()

    def _guard(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except Exception as exc:
                self.ledger.error("%s crashed" % threading.current_thread().name, exc)
        return run

    def stop(self, timeout: float = 30.0) -> None:
        self.stopping.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))
            if t.is_alive():
                self.ledger.error("thread %s did not stop within %.0f s" % (t.name, timeout))

    @property
    def heartbeat_ms(self) -> int:
        if self.run.config.sabotage == "no-heartbeats" and isinstance(self, Consumer):
            return 0
        return self.run.config.heartbeat_ms

    def jms_url(self, prefetch: Optional[int] = None, extra: str = "") -> str:
        members = ",".join("stomp://%s:%d" % a for a in self.addresses)
        hb = self.heartbeat_ms
        url = ("failover:(%s)?randomize=false&initialReconnectDelay=10&maxReconnectDelay=200"
               "&nested.heartBeat=%d,%d&jms.redeliveryPolicy.maximumRedeliveries=-1"
               "&jms.redeliveryPolicy.initialRedeliveryDelay=100&jms.redeliveryPolicy.redeliveryDelay=100"
               % (members, hb, hb))
        if prefetch is not None:
            url += "&jms.prefetchPolicy.all=%d" % prefetch
        return url + extra

    def stomp_connection(self, listener: Any) -> Any:
        hb = self.heartbeat_ms
        conn = amqstomp.Connection12(self.addresses, auto_reconnect=True, heartbeats=(hb, hb),
                                     reconnect_sleep_initial=0.02, reconnect_sleep_increase=0.5,
                                     reconnect_sleep_jitter=0.1, reconnect_sleep_max=0.3,
                                     reconnect_attempts_max=-1, timeout=20)
        conn.set_listener("chaos", listener)
        conn.connect("admin", "admin", wait=True, timeout=30)
        return conn


class _StompEvents(amqstomp.ConnectionListener):
    def __init__(self, client: "_Client", on_message: Optional[Callable[[Any], None]] = None) -> None:
        self.client = client
        self.handler = on_message

    def on_message(self, frame: Any) -> None:
        if self.handler is None:
            return
        try:
            self.handler(frame)
        except Exception as exc:
            self.client.ledger.error("listener raised", exc)

    def on_error(self, frame: Any) -> None:
        self.client.ledger.error("ERROR frame: %s" % (frame.headers.get("message") or frame.body,))

    def on_disconnected(self) -> None:
        # before connect() returned: a failed connect attempt (connect retries with auto_reconnect)
        if not self.client.closing and self.client.conn is not None:
            self.client.ledger.error("on_disconnected (failover gave up)")

    def on_transport_interrupted(self) -> None:
        self.client.transport_event("interrupted")

    def on_transport_resumed(self) -> None:
        self.client.transport_event("resumed")


class _JmsEvents:
    def __init__(self, client: "_Client") -> None:
        self.client = client

    def __call__(self, exc: BaseException) -> None:  # exception listener
        if not self.client.closing:
            self.client.ledger.error("exception listener", exc)

    def on_transport_interrupted(self) -> None:
        self.client.transport_event("interrupted")

    def on_transport_resumed(self) -> None:
        self.client.transport_event("resumed")


class Producer(_Client):
    """Sends seq 0, 1, 2, ... until stopped; a seq counts as sent once confirmed, and a seq whose
    send failed is sent again (at-least-once; each try is an *attempt*, header ``chaos_attempt``).

    Non-transacted modes send one message at a time and wait for its RECEIPT (stomp.py API:
    ``send(receipt=)`` + ``wait_for_receipt``; JMS: a persistent send, or ``jms.alwaysSyncSend``
    for non-persistent runs). The transacted modes send in a transacted session too (``jms-tx1``:
    a commit per message, ``jms-txbatch``: per 2-6 messages): the batch is confirmed when
    ``commit()`` returned; when it (or a send) raised TransactionRolledBackError its attempts are
    *rolled back* -- none of them may ever be delivered -- and the batch is sent again; an in-doubt
    commit is sent again too (a duplicate copy is allowed)."""

    def open(self) -> None:
        if self.spec.api in ("stomp", "aio"):
            self.conn = self.stomp_connection(_StompEvents(self))
        else:
            from amqstomp.jms import ConnectionFactory, Queue
            extra = "" if self.run.config.persistent else "&jms.alwaysSyncSend=true"
            self.conn = ConnectionFactory(self.jms_url(extra=extra)).create_connection(timeout_s=30)
            self.events = _JmsEvents(self)
            self.conn.set_exception_listener(self.events)
            self.conn.set_transport_listener(self.events)
            self.session = self.conn.create_session(transacted=self.spec.transacted)
            self.producer = self.session.create_producer(Queue(self.queue_name))

    def start(self) -> None:
        self._thread(self._loop, "producer")

    def _send_once(self, seq: int, attempt: str) -> None:
        body = "chaos %s %d %s" % (self.spec.name, seq, "x" * self.rng.randint(0, 200))
        props = {"chaos_seq": str(seq), "chaos_run": self.run.run_id, "chaos_mode": self.spec.name,
                 "chaos_attempt": attempt}
        if self.spec.api in ("stomp", "aio"):
            receipt = "s-%s-%s" % (attempt, uuid.uuid4().hex[:6])
            headers = dict(props, persistent="true" if self.run.config.persistent else "false")
            self.conn.send("/queue/" + self.queue_name, body, headers=headers, receipt=receipt)
            self.conn.wait_for_receipt(receipt, 10)
        else:
            from amqstomp.jms import NON_PERSISTENT, PERSISTENT, TextMessage
            message = TextMessage(body)
            for k, v in props.items():
                message.set_property(k, v)
            self.producer.send(message, delivery_mode=PERSISTENT if self.run.config.persistent else NON_PERSISTENT)

    def _pause(self, burst: List[int]) -> None:
        """Between sends: mostly a random gap (mean 1/rate), sometimes a burst of back-to-back sends."""
        if burst[0] > 0:
            burst[0] -= 1
            return
        if self.rng.random() < self.run.config.burst_probability:
            burst[0] = self.rng.randint(*self.run.config.burst_size)
            return
        self.stopping.wait(self.rng.expovariate(max(0.1, self.run.config.rate)))

    def _loop(self) -> None:
        if self.spec.transacted:
            self._loop_transacted()
            return
        burst = [0]
        seq = 0
        while not self.stopping.is_set():
            aid = self.ledger.attempt(seq)
            try:
                self._send_once(seq, aid)
            except SEND_RETRY as exc:
                self.ledger.attempt_outcome([aid], "failed")
                self.ledger.send_retry(exc)
                self.stopping.wait(0.05)
                continue  # the same seq again
            except Exception as exc:
                self.ledger.attempt_outcome([aid], "failed")
                self.ledger.error("send seq %d" % seq, exc)
                self.stopping.wait(0.2)
                continue
            self.ledger.attempt_outcome([aid], "confirmed")
            self.ledger.confirm(seq)
            seq += 1
            self._pause(burst)

    def _loop_transacted(self) -> None:
        burst = [0]
        next_seq = 0
        batch: List[int] = []
        while not self.stopping.is_set():
            if not batch:
                size = 1 if self.spec.settle == "TX1" else self.rng.randint(2, 6)
                batch = list(range(next_seq, next_seq + size))
                next_seq += size
            attempts: List[str] = []
            outcome = ""
            try:
                for seq in batch:
                    aid = self.ledger.attempt(seq)
                    attempts.append(aid)
                    self._send_once(seq, aid)
                    self._pause(burst)
            except ROLLED_BACK as exc:
                outcome = "rolled_back"
                self.ledger.send_retry(exc)
            except Exception as exc:
                outcome = "failed"
                self.ledger.error("transacted send", exc)
            if outcome:
                self.ledger.attempt_outcome(attempts, outcome)
                self._rollback()
                self.stopping.wait(0.05)
                continue  # the same batch again, in a new transaction
            try:
                self.session.commit()
            except IN_DOUBT as exc:
                self.ledger.attempt_outcome(attempts, "in_doubt")
                self.ledger.unsettled("producer commit", exc)
                continue
            except ROLLED_BACK as exc:
                self.ledger.attempt_outcome(attempts, "rolled_back")
                self.ledger.unsettled("producer commit", exc)
                continue
            except Exception as exc:
                self.ledger.attempt_outcome(attempts, "in_doubt")  # unknown: checked as neither
                self.ledger.error("producer commit", exc)
                continue
            self.ledger.attempt_outcome(attempts, "committed")
            for seq in batch:
                self.ledger.confirm(seq)
            batch = []

    def _rollback(self) -> None:
        try:
            self.session.rollback()
        except Exception as exc:
            self.ledger.unsettled("producer rollback", exc)


class Consumer(_Client):
    """The consumer of one mode: records deliveries and settlements in the ledger."""

    def open(self) -> None:
        cfg = self.run.config
        self.prefetch = self.rng.choice(list(cfg.prefetch_choices))
        # settle every 1..batch_max messages (or when none came for 0.2 s); never more than the prefetch:
        # a batch above it waits for the idle timer each time (DESIGN: a cumulative-ACK interval above
        # the prefetch stops delivery) -- slow, not what this run is about
        self.batch_max = max(1, min(self.rng.randint(2, 8), self.prefetch))
        self.delay_probability = self.rng.choice((0.0, 0.05, 0.2))
        self.settle_pending: List[Any] = []  # frames/messages consumed, not settled yet (app view)
        self.work: "_queue.Queue[Any]" = _queue.Queue()
        self.rng_lock = threading.Lock()
        self.flood_topic = "%s.flood" % self.queue_name
        if self.spec.api == "stomp":
            self._open_stomp()
        elif self.spec.api == "aio":
            from bench._chaos_aio import open_aio
            open_aio(self)
        else:
            self._open_jms()

    def describe(self) -> str:
        return "%s prefetch=%d batch<=%d delay_p=%.2f" % (self.spec.name, self.prefetch, self.batch_max,
                                                         self.delay_probability)

    # ---- held faults (bench/_chaos_faults.py)
    def transport_event(self, name: str) -> None:
        super().transport_event(name)
        self.run.held.consumer_event(self.spec.name, name)

    def start_thread(self, target: Callable[[], None], role: str) -> None:
        self._thread(target, role)

    def flood_send(self, body: bytes) -> None:
        """One message on this consumer's own connection to a topic nobody subscribes to (the
        ``unread`` fault's producer): written without a receipt, non-persistent."""
        if self.spec.api == "stomp":
            self.conn.send("/topic/" + self.flood_topic, body)
        else:
            from amqstomp.jms import NON_PERSISTENT
            self.flood_producer.send(body, delivery_mode=NON_PERSISTENT)

    def _maybe_delay(self) -> None:
        with self.rng_lock:
            d = self.rng.random() < self.delay_probability
            t = self.rng.uniform(0.0, 0.02)
        if d:
            time.sleep(t)

    def _next_batch(self) -> int:
        with self.rng_lock:
            return self.rng.randint(1, self.batch_max)

    # ---- stomp.py API
    def _open_stomp(self) -> None:
        settle = self.spec.settle
        handler = {"auto": self._stomp_record, "optimized": self._stomp_record,
                   "client-individual": self._stomp_individual, "client": self._stomp_enqueue}[settle]
        self.conn = self.stomp_connection(_StompEvents(self, handler))
        kwargs: Dict[str, Any] = {"prefetch_size": self.prefetch}
        ack = settle
        if settle == "optimized":
            from amqstomp.flow import RedeliveryPolicy
            ack = "client"
            kwargs.update(optimize_acknowledge=True,
                          redelivery_policy=RedeliveryPolicy(maximum_redeliveries=-1, initial_redelivery_delay_ms=100))
        receipt = "sub-" + uuid.uuid4().hex[:8]
        self.conn.subscribe("/queue/" + self.queue_name, id="chaos-" + self.spec.name, ack=ack, receipt=receipt,
                            **kwargs)
        self.conn.wait_for_receipt(receipt, 30)
        # a second, idle subscription after it: every failover replays both, in order, so the main
        # one delivers (and is acked) while the next is still being replayed
        receipt = "sub-" + uuid.uuid4().hex[:8]
        self.conn.subscribe("/queue/%s.idle" % self.queue_name, id="idle-" + self.spec.name, ack="client-individual",
                            receipt=receipt)
        self.conn.wait_for_receipt(receipt, 30)

    def _stomp_record(self, frame: Any) -> None:
        flagged, count = _stomp_flags(frame)
        self.ledger.deliver(int(frame.headers.get("chaos_seq", -1)), frame.headers.get("message-id", "?"),
                            flagged, count, int(getattr(frame, "link_seq", 0) or 0),
                            frame.headers.get("chaos_attempt", ""))
        self._maybe_delay()

    def _stomp_ack(self, frame: Any, covers: List[str]) -> None:
        if self.run.config.sabotage == "skip-ack":
            self.ledger.settle(covers)
            return
        receipt = "ack-" + uuid.uuid4().hex[:10]
        try:
            self.conn.ack(frame.headers["ack"], receipt=receipt)
            self.conn.wait_for_receipt(receipt, 5)
        except STOMP_ACK_UNCONFIRMED as exc:
            self.ledger.unsettled("ack", exc)
            return
        except Exception as exc:
            self.ledger.error("ack", exc)
            return
        self.ledger.settle(covers)

    def _stomp_individual(self, frame: Any) -> None:
        self._stomp_record(frame)
        self._stomp_ack(frame, [frame.headers.get("message-id", "?")])

    def _stomp_enqueue(self, frame: Any) -> None:
        self._stomp_record(frame)
        self.work.put(frame)

    def _stomp_client_worker(self) -> None:
        """client (cumulative) acks from the application's own thread: every few messages, or when
        nothing came for 0.2 s; a confirmed ACK settles every message taken before it."""
        pending: List[Any] = []
        batch = self._next_batch()
        while not self.stopping.is_set():
            try:
                frame = self.work.get(timeout=0.2)
            except _queue.Empty:
                frame = None
            if frame is not None:
                pending.append(frame)
                if len(pending) < batch:
                    continue
            if not pending:
                continue
            self._stomp_ack(pending[-1], [f.headers.get("message-id", "?") for f in pending])
            pending = []
            batch = self._next_batch()

    # ---- JMS API
    def _open_jms(self) -> None:
        from amqstomp.jms import (AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE, DUPS_OK_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE,
                                  ConnectionFactory, Queue)
        settle = self.spec.settle
        extra = "&jms.sendAcksAsync=false" if settle in ("CLIENT", "INDIVIDUAL") else ""
        # the unread fault's flood (its only producer) shares the consumer's socket: the socket of
        # its ACKs and heart-beats is then the one blocked in a write
        shared = "&amqstomp.separateProducerSocket=false" if "unread" in self.run.config.held_faults else ""
        try:
            factory = ConnectionFactory(self.jms_url(self.prefetch, extra + shared))
        except _exc.ConfigurationError:
            if not extra:
                raise
            # a library without jms.sendAcksAsync: its acknowledge() is asynchronous; the strict
            # check stays (what an application of that version was told: acknowledge() returned)
            self.run.note("%s: the library has no jms.sendAcksAsync; acknowledge() is asynchronous" % self.spec.name)
            factory = ConnectionFactory(self.jms_url(self.prefetch, shared))
        self.conn = factory.create_connection(timeout_s=30)
        self.events = _JmsEvents(self)
        self.conn.set_exception_listener(self.events)
        self.conn.set_transport_listener(self.events)
        mode = {"AUTO": AUTO_ACKNOWLEDGE, "DUPS_OK": DUPS_OK_ACKNOWLEDGE, "CLIENT": CLIENT_ACKNOWLEDGE,
                "CLIENT-async": CLIENT_ACKNOWLEDGE, "INDIVIDUAL": INDIVIDUAL_ACKNOWLEDGE,
                "INDIVIDUAL-async": INDIVIDUAL_ACKNOWLEDGE, "TX1": AUTO_ACKNOWLEDGE, "TXBATCH": AUTO_ACKNOWLEDGE}[settle]
        self.session = self.conn.create_session(transacted=self.spec.transacted, acknowledge_mode=mode)
        self.consumer = self.session.create_consumer(Queue(self.queue_name))
        if settle in ("DUPS_OK", "INDIVIDUAL", "INDIVIDUAL-async"):
            self.consumer.set_message_listener(self._jms_listener)
        # a second, idle consumer (own session) after it: every failover replays both subscriptions
        self.idle_consumer = self.conn.create_session().create_consumer(Queue(self.queue_name + ".idle"))
        if "unread" in self.run.config.held_faults:  # the flood's producer: its own session, same connection
            from amqstomp.jms import Topic
            self.flood_producer = self.conn.create_session().create_producer(Topic(self.flood_topic))
        self.conn.start()

    def _jms_record(self, message: Any) -> str:
        seq = message.get_property("chaos_seq")
        if seq is None:
            seq = message.headers.get("chaos_seq", -1)
        mid = message.message_id or "?"
        attempt = message.get_property("chaos_attempt") or message.headers.get("chaos_attempt", "")
        self.ledger.deliver(int(seq), mid, bool(message.redelivered), int(message.delivery_count or 1),
                            int(getattr(message, "link_seq", 0) or 0), str(attempt))
        self._maybe_delay()
        return mid

    def _jms_listener(self, message: Any) -> None:
        try:
            mid = self._jms_record(message)
            if self.spec.settle.startswith("INDIVIDUAL"):
                self._jms_acknowledge(message, [mid])
        except Exception as exc:  # a listener that raises gets its message redelivered: not what we test
            self.ledger.error("listener", exc)

    def _jms_acknowledge(self, message: Any, covers: List[str]) -> None:
        if self.run.config.sabotage == "skip-ack":
            self.ledger.settle(covers)
            return
        try:
            message.acknowledge()
        except JMS_ACK_UNSETTLED as exc:
            self.ledger.unsettled("acknowledge", exc)
            return
        except Exception as exc:
            self.ledger.error("acknowledge", exc)
            return
        self.ledger.settle(covers)

    def _jms_commit(self, covers: List[str]) -> None:
        try:
            self.session.commit()
        except IN_DOUBT as exc:
            self.ledger.unsettled("commit", exc)
            self.ledger.commit_in_doubt(covers)
            return
        except ROLLED_BACK as exc:
            self.ledger.unsettled("commit", exc)
            self.ledger.commit_rolled_back(covers)
            return
        except Exception as exc:
            self.ledger.error("commit", exc)
            self.ledger.commit_in_doubt(covers)  # unknown outcome: checked as neither
            return
        self.ledger.commit_ok(covers)

    def _jms_receive_loop(self) -> None:
        settle = self.spec.settle
        pending: List[str] = []
        last: Any = None
        batch = 1 if settle == "TX1" else self._next_batch()
        while not self.stopping.is_set():
            try:
                message = self.consumer.receive(0.2)
            except Exception as exc:
                self.ledger.error("receive", exc)
                self.stopping.wait(0.2)
                continue
            if message is not None:
                pending.append(self._jms_record(message))
                last = message
                if settle == "AUTO" or len(pending) < batch:
                    if settle == "AUTO":
                        pending = []
                    continue
            if not pending:
                continue
            if settle in ("CLIENT", "CLIENT-async"):
                self._jms_acknowledge(last, pending)
            else:
                self._jms_commit(pending)
            pending = []
            batch = 1 if settle == "TX1" else self._next_batch()

    def start(self) -> None:
        if self.spec.api == "aio":
            return  # its loop thread consumes from open() on (bench/_chaos_aio.py)
        if self.spec.api == "stomp":
            if self.spec.settle == "client":
                self._thread(self._stomp_client_worker, "acker")
        elif self.spec.settle in ("AUTO", "CLIENT", "CLIENT-async", "TX1", "TXBATCH"):
            self._thread(self._jms_receive_loop, "receiver")


# ------------------------------------------------------------------------------------------ schedule

SPIN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


@dataclass(order=True)
class Event:
    at: float
    order: int
    #: cut | stall | unstall | half_close | refuse | unrefuse | hog | kill | unread | unread_end | drop | drop_end
    action: str = field(compare=False)
    targets: Tuple[str, ...] = field(compare=False, default=())  # mode names
    arg: Any = field(compare=False, default=None)

    def describe(self) -> str:
        tgt = ",".join(self.targets) if self.targets else ""
        arg = (" %.2f" % self.arg) if isinstance(self.arg, float) else (" %s" % self.arg if self.arg else "")
        return "t=%.2f %s%s%s" % (self.at, self.action, arg, (" [" + tgt + "]") if tgt else "")


def _kill_zones(config: ChaosConfig) -> List[Tuple[float, float]]:
    """Where a master kill may fall (its slot +-20 %) and the takeover after it (8 s)."""
    slot = config.seconds / (config.kills + 1)
    return [(slot * (i + 1) - 0.2 * slot, slot * (i + 1) + 0.2 * slot + 8.0) for i in range(config.kills)]


def make_schedule(config: ChaosConfig, modes: Sequence[str]) -> List[Event]:
    """Every chaos event of a run, from its seed alone. Held faults (bench/_chaos_faults.py) are
    planned first; the other proxy events leave a mode alone while (and 1 s around) it has one."""
    rng = random.Random("schedule:%d" % config.seed)
    events: List[Event] = []
    order = itertools.count()
    # the held faults' flood writes on the consumer's connection from a harness thread: not for aio consumers
    held = plan_held(config.seed, [m for m in modes if m not in AIO_MODES], config.seconds, config.held_faults, config.held_share,
                     held_window(config.stall_timeout_s, config.held_s), _kill_zones(config))
    for at, action, targets, arg in held:
        events.append(Event(at, next(order), action, targets, arg))
    held_at = held_intervals(held)
    actions = [a for a in config.weights if config.weights[a] > 0]
    weights = [config.weights[a] for a in actions]
    busy_until: Dict[str, float] = {m: 0.0 for m in modes}  # a stall/refuse in progress on that proxy
    t = rng.uniform(0.5, 1.5)
    while t < config.seconds and actions:
        action = rng.choices(actions, weights)[0]
        if rng.random() < 0.3 or len(modes) == 1:
            targets = tuple(modes)
        else:
            targets = (rng.choice(list(modes)),)
        if action in ("stall", "refuse"):
            targets = tuple(m for m in targets if busy_until[m] <= t)
            if targets:
                lo, hi = config.stall_s if action == "stall" else config.refuse_s
                dur = rng.uniform(lo, hi)
                targets = tuple(m for m in targets if free_of_held(held_at, m, t, t + dur))
            if targets:
                events.append(Event(t, next(order), action, targets, dur))
                events.append(Event(t + dur, next(order), "unstall" if action == "stall" else "unrefuse", targets))
                for m in targets:
                    busy_until[m] = t + dur
        else:
            arg = rng.choice(("to_client", "to_broker", "both")) if action == "half_close" else None
            targets = tuple(m for m in targets if free_of_held(held_at, m, t, t))
            if targets:
                events.append(Event(t, next(order), action, targets, arg))
        t += rng.expovariate(1.0 / max(0.05, config.chaos_gap_s))
    if config.hogs > 0:
        t = rng.uniform(*config.hog_off_s)
        while t < config.seconds:
            dur = min(rng.uniform(*config.hog_on_s), config.seconds - t)
            events.append(Event(t, next(order), "hog", (), round(dur, 2)))
            t += dur + rng.uniform(*config.hog_off_s)
    for i in range(config.kills):
        slot = config.seconds / (config.kills + 1)
        events.append(Event(slot * (i + 1) + rng.uniform(-0.2, 0.2) * slot, next(order), "kill"))
    events.sort()
    return events


# ------------------------------------------------------------------------------------------ the run


class ChaosRun:
    """One run of :class:`ChaosConfig` against ``brokers`` (:class:`SingleBroker` or
    :class:`MasterSlavePair`). ``run()`` returns a :class:`RunReport`; it raises only when the
    set-up itself fails (after cleaning up)."""

    def __init__(self, config: ChaosConfig, brokers: Any, out: Callable[[str], None] = lambda s: None) -> None:
        unknown = [m for m in config.modes if m not in MODES]
        if unknown:
            raise ValueError("unknown mode(s) %s; known: %s" % (unknown, ", ".join(MODES)))
        if config.kills and not brokers.can_kill:
            raise ValueError("kills need a MasterSlavePair")
        faults = set(config.weights) | set(config.held_faults)
        if not faults <= set(ALL_FAULTS) or set(config.held_faults) - set(HELD_FAULTS):
            raise ValueError("unknown fault(s) %s; classic (weights): %s, held: %s" % (
                sorted(faults - set(ALL_FAULTS)), ", ".join(DEFAULT_WEIGHTS), ", ".join(HELD_FAULTS)))
        self.config = config
        self.brokers = brokers
        self.out = out
        self.run_id = "%d-%s" % (config.seed, uuid.uuid4().hex[:6])
        self.report = RunReport(config)
        self.ledgers: Dict[str, Ledger] = {}
        self.proxies: Dict[str, List[TcpProxy]] = {}  # every proxy of a mode (what the classic faults hit)
        #: mode -> role ("consumer", "producer") -> the proxies it connects through, in failover order
        self.endpoints: Dict[str, Dict[str, List[TcpProxy]]] = {}
        self.held = HeldFaults(lambda: self._t0, self.note)
        self.consumers: Dict[str, Consumer] = {}
        self.producers: Dict[str, Producer] = {}
        self.queue_names: Dict[str, str] = {}
        self.hogs: List[subprocess.Popen] = []
        self.stop_chaos = threading.Event()
        self.stop_monitor = threading.Event()
        self.draining = False
        self._t0 = 0.0

    # -- helpers
    def note(self, text: str) -> None:
        self.report.harness_notes.append(text)
        self.out("chaos: " + text)

    def _all_proxies(self, modes: Sequence[str]) -> List[TcpProxy]:
        return [p for m in modes for p in self.proxies.get(m, [])]

    def broker_queue_size(self, name: str) -> Optional[int]:
        for target in self.brokers.stats_targets():
            try:
                return int(queue_statistics(target, name, timeout=3.0).get("size", 0))
            except LookupError:
                return 0
            except Exception:
                continue
        return None

    # -- chaos executor
    def _execute(self, schedule: List[Event]) -> None:
        heap = list(schedule)
        heapq.heapify(heap)
        while heap and not self.stop_chaos.is_set():
            ev = heap[0]
            wait = self._t0 + ev.at - time.monotonic()
            if wait > 0:
                self.stop_chaos.wait(min(wait, 0.1))
                continue
            heapq.heappop(heap)
            if ev.action == "kill" and not self.brokers.ready_for_kill():
                ev.at += 0.5  # the last kill's new slave is not waiting on the lock yet
                heapq.heappush(heap, ev)
                continue
            try:
                self._apply(ev)
                self.report.events_done.append(ev.describe())
            except Exception as exc:
                self.note("event %s failed: %s: %s" % (ev.describe(), type(exc).__name__, exc))
            self._reap_hogs()

    def _apply(self, ev: Event) -> None:
        if ev.action in HELD_ACTIONS:
            for mode in ev.targets:
                self.held.apply(ev.action, mode, ev.arg, self.consumers[mode], self.endpoints[mode]["consumer"])
            return
        proxies = self._all_proxies(ev.targets)
        if ev.action == "cut":
            for p in proxies:
                p.cut()
        elif ev.action == "stall":
            for p in proxies:
                p.stall()
        elif ev.action == "unstall":
            for p in proxies:
                p.unstall()
        elif ev.action == "half_close":
            for p in proxies:
                p.half_close(ev.arg)
        elif ev.action == "refuse":
            for p in proxies:
                p.refuse(True, "reset")
                p.cut()
        elif ev.action == "unrefuse":
            for p in proxies:
                p.refuse(False)
        elif ev.action == "hog":
            for _ in range(self.config.hogs):
                self.hogs.append(subprocess.Popen([sys.executable, "-c", SPIN, str(ev.arg)], stdin=subprocess.DEVNULL,
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        elif ev.action == "kill":
            ev.arg = self.brokers.kill_master()
        else:  # pragma: no cover
            raise ValueError(ev.action)

    def _reap_hogs(self) -> None:
        self.hogs = [h for h in self.hogs if h.poll() is None]

    def _heal(self) -> None:
        self.held.end_all()
        for p in self._all_proxies(list(self.proxies)):
            for call in (p.unstall, lambda: p.refuse(False)):
                try:
                    call()
                except Exception as exc:
                    self.note("healing %r: %s" % (p, exc))
        self._kill_hogs()

    def _kill_hogs(self) -> None:
        for h in self.hogs:
            if h.poll() is None:
                h.kill()
            try:
                h.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.note("busy-loop process %d did not die" % h.pid)
        self.hogs = []

    # -- stall monitor
    def _monitor(self) -> None:
        threshold = self.config.stall_timeout_s
        in_stall: Dict[str, float] = {}
        while not self.stop_monitor.wait(0.5):
            now = time.monotonic()
            for mode, ledger in self.ledgers.items():
                with ledger.lock:
                    last = ledger.last_delivery
                idle = now - last
                if idle < threshold:
                    if mode in in_stall:
                        start = in_stall.pop(mode)
                        self._end_stall(mode, start, now, "resumed")
                    continue
                if mode in in_stall:
                    continue
                missing, oldest = ledger.pending_confirmed()
                size = self.broker_queue_size(self.queue_names[mode])
                if size is None:
                    has_work = missing > 0 and not MODES[mode].may_lose and now - oldest > threshold
                    why = "%d confirmed message(s) not delivered (broker unreachable)" % missing
                else:
                    has_work = size > 0
                    why = "broker holds %d message(s), %d confirmed never delivered" % (size, missing)
                if has_work:
                    in_stall[mode] = last
                    self.out("chaos: STALL %s: idle %.1f s, %s%s" % (mode, idle, why,
                                                                    " (drain phase)" if self.draining else ""))
                    ledger.stalls.append((last - self._t0, idle, "idle %.1fs at t=%.1f: %s" % (
                        idle, last - self._t0, why)))
        now = time.monotonic()
        for mode, start in in_stall.items():
            self._end_stall(mode, start, now, "still stalled at the end")

    def _end_stall(self, mode: str, start: float, now: float, how: str) -> None:
        ledger = self.ledgers[mode]
        with ledger.lock:
            for i in range(len(ledger.stalls) - 1, -1, -1):
                at, _, why = ledger.stalls[i]
                if abs(at - (start - self._t0)) < 1e-6:
                    ledger.stalls[i] = (at, now - start, why + "; %s after %.1f s" % (how, now - start))
                    break

    # -- drain
    def _drained(self, mode: str) -> Optional[str]:
        """None once ``mode`` is drained, else what it waits for."""
        ledger = self.ledgers[mode]
        missing, _ = ledger.pending_confirmed()
        with ledger.lock:
            idle = time.monotonic() - ledger.last_delivery
        if missing and not MODES[mode].may_lose:
            return "%d confirmed not delivered" % missing
        if idle < self.config.quiet_s:
            return "deliveries %.1f s ago" % idle
        size = self.broker_queue_size(self.queue_names[mode])
        if size == 0 or (size is None and not missing):
            return None
        return "broker queue size %s" % size

    def _drain(self) -> None:
        started = time.monotonic()
        deadline = started + self.config.drain_timeout_s
        waiting: Dict[str, str] = {m: "" for m in self.ledgers}
        next_note = started + 5.0
        while waiting and time.monotonic() < deadline:
            for m in list(waiting):
                why = self._drained(m)
                if why is None:
                    del waiting[m]
                    self.ledgers[m].listener_events["drained after s"] = round(time.monotonic() - started, 1)
                else:
                    waiting[m] = why
            if waiting:
                if time.monotonic() > next_note:
                    self.out("chaos: drain +%.0f s waiting for %s" % (time.monotonic() - started, waiting))
                    next_note += 5.0
                time.sleep(0.25)
        self.report.drain_s = time.monotonic() - started
        if waiting:
            self.note("drain: not drained after %.0f s: %s" % (self.config.drain_timeout_s, waiting))

    # -- the broker's view
    def _leftovers(self, modes: Sequence[str]) -> Tuple[Dict[str, List[str]], Dict[str, int]]:
        """After the consumers closed: drain each queue with a fresh plain consumer (directly on
        the broker); and ActiveMQ.DLQ for this run's messages. Returns (mode -> message-ids left,
        mode -> DLQ count)."""
        left: Dict[str, List[str]] = {m: [] for m in modes}
        dlq: Dict[str, int] = {m: 0 for m in modes}
        for target in self.brokers.stats_targets():
            if target.ping(timeout=2.0):
                break
        else:
            self.note("no broker answers: leftovers not checked")
            return left, dlq
        got: "_queue.Queue[Any]" = _queue.Queue()

        class Grab(amqstomp.ConnectionListener):
            def on_message(self, frame: Any) -> None:
                got.put(frame)

        conn = amqstomp.Connection12(target.host_and_ports)
        conn.set_listener("grab", Grab())
        conn.connect("admin", "admin", wait=True, timeout=15)
        try:
            subs = [("/queue/" + self.queue_names[m], None) for m in modes]
            subs.append(("/queue/ActiveMQ.DLQ", "chaos_run = '%s'" % self.run_id))
            for n, (dest, selector) in enumerate(subs):
                headers = {"selector": selector} if selector else {}
                conn.subscribe(dest, id="left-%d" % n, ack="client-individual", headers=headers, receipt="left-%d" % n)
                conn.wait_for_receipt("left-%d" % n, 15)
            quiet_until = time.monotonic() + 1.5
            hard = time.monotonic() + 30
            while time.monotonic() < min(quiet_until, hard):
                try:
                    frame = got.get(timeout=0.1)
                except _queue.Empty:
                    continue
                quiet_until = time.monotonic() + 1.0
                conn.ack(frame.headers["ack"])
                mode = frame.headers.get("chaos_mode", "")
                if frame.headers.get("subscription") == "left-%d" % (len(subs) - 1):
                    if mode in dlq:
                        dlq[mode] += 1
                elif mode in left:
                    left[mode].append(frame.headers.get("message-id", "?"))
        finally:
            conn.disconnect()
        return left, dlq

    # -- the run
    def run(self) -> RunReport:
        cfg = self.config
        started = time.monotonic()
        baseline_threads = set(threading.enumerate())
        baseline_sockets = socket_fds()
        capture = ErrorCapture()
        capture.install()
        try:
            self._run(cfg)
        finally:  # also when the set-up failed: nothing of the run may outlive it
            for proxies in self.proxies.values():
                for p in proxies:
                    try:
                        p.close()
                    except Exception as exc:
                        self.note("closing a proxy: %s" % exc)
            self._kill_hogs()
            capture.uninstall()
        # resources back to baseline
        deadline = time.monotonic() + cfg.leak_timeout_s
        while True:
            extra_threads = [t for t in threading.enumerate() if t not in baseline_threads and t.is_alive()
                             and t.name != "chaos-recover"]
            extra_sockets = socket_fds() - baseline_sockets
            if (not extra_threads and not extra_sockets) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if extra_threads:
            self.report.global_violations.append("%d thread(s) left: %s" % (
                len(extra_threads), sorted(t.name for t in extra_threads)[:20]))
        if extra_sockets:
            self.report.global_violations.append("%d socket(s) left open: %s" % (
                len(extra_sockets), sorted(extra_sockets)[:10]))
        self.report.log_errors = list(capture.records)
        self.report.thread_exceptions = list(capture.thread_exceptions)
        if capture.records:
            self.report.global_violations.append("%d ERROR log record(s) from amqstomp: %s" % (
                len(capture.records), " | ".join(capture.records[:5])))
        if capture.thread_exceptions:
            self.report.global_violations.append("uncaught exception(s) in threads: %s" % (
                " | ".join(capture.thread_exceptions[:2])))
        for problem in getattr(self.brokers, "problems", []):
            self.report.global_violations.append("broker pair: " + problem)
        self.report.elapsed_s = time.monotonic() - started
        return self.report

    def _make_endpoints(self, mode: str) -> None:
        """The producer and the consumer of ``mode`` each get a proxy per broker address; with held
        faults on, the consumer gets a second one per address after those (its endpoint to fail
        over to when the one it uses is held broken)."""
        addresses = self.brokers.addresses
        roles: Dict[str, List[TcpProxy]] = {"consumer": [], "producer": []}
        self.endpoints[mode] = roles
        self.proxies[mode] = []
        copies = {"consumer": 2 if self.config.held_faults else 1, "producer": 1}
        for role, n in copies.items():
            for _ in range(n):
                for a in addresses:
                    p = make_proxy(a)
                    self.proxies[mode].append(p)  # closed by run() even when the next one fails
                    roles[role].append(p)

    def _run(self, cfg: ChaosConfig) -> None:
        schedule = make_schedule(cfg, list(cfg.modes))
        self.report.schedule = [e.describe() for e in schedule]
        monitor = threading.Thread(target=self._monitor, name="chaos-monitor", daemon=True)
        executor = threading.Thread(target=self._execute, args=(schedule,), name="chaos-executor", daemon=True)
        clients: List[_Client] = []
        try:
            for mode in cfg.modes:
                self.ledgers[mode] = Ledger(mode)
                self.queue_names[mode] = "chaos.%s.%s" % (self.run_id, mode)
                self._make_endpoints(mode)
            for mode in cfg.modes:  # consumers first, then producers
                addresses = [p.address for p in self.endpoints[mode]["consumer"]]
                rng = random.Random("consumer:%d:%s" % (cfg.seed, mode))
                c = Consumer(self, MODES[mode], self.ledgers[mode], self.queue_names[mode], addresses, rng)
                clients.append(c)
                c.open()
                self.consumers[mode] = c
                self.out("chaos: consumer " + c.describe())
            for mode in cfg.modes:
                addresses = [p.address for p in self.endpoints[mode]["producer"]]
                rng = random.Random("producer:%d:%s" % (cfg.seed, mode))
                p = Producer(self, MODES[mode], self.ledgers[mode], self.queue_names[mode], addresses, rng)
                clients.append(p)
                p.open()
                self.producers[mode] = p
            self._t0 = time.monotonic()
            for ledger in self.ledgers.values():
                ledger.last_delivery = self._t0
            for c in clients:
                c.start()
            monitor.start()
            executor.start()
            time.sleep(cfg.seconds)
            for p in self.producers.values():
                p.stop()
            self.stop_chaos.set()
            executor.join(30)
            self._heal()
            if cfg.kills and hasattr(self.brokers, "wait_recovered"):
                if not self.brokers.wait_recovered(90):
                    self.note("the killed broker did not come back as a slave within 90 s")
            self.draining = True
            self._drain()
            self.stop_monitor.set()
            monitor.join(15)
            for c in self.consumers.values():
                c.stop()
        finally:
            self.stop_chaos.set()
            self.stop_monitor.set()
            if executor.is_alive():
                executor.join(30)
            if monitor.is_alive():
                monitor.join(15)
            self._heal()
            for c in clients:
                c.stopping.set()
                c.close()  # records its own errors
            for c in clients:
                c.stop(10)
        sizes = {mode: self.broker_queue_size(self.queue_names[mode]) for mode in cfg.modes}
        left, dlq = self._leftovers(list(cfg.modes))
        for mode in cfg.modes:
            ledger = self.ledgers[mode]
            with ledger.lock:
                left_settled = sum(1 for mid in left[mode] if mid in ledger.settled)
            result = evaluate(MODES[mode], ledger, len(left[mode]), left_settled, dlq[mode], sizes[mode])
            result.held, result.failover_max_s, result.held_unresumed, held = self.held.summary(mode)
            result.info["held faults"] = held
            self.report.modes[mode] = result


def run_chaos(config: ChaosConfig, brokers: Any, out: Callable[[str], None] = lambda s: None) -> RunReport:
    """Run one chaos run; see :class:`ChaosRun`."""
    return ChaosRun(config, brokers, out).run()
