"""The acknowledgement core (amqstomp._core.acks) driven in memory: no broker,
no threads, no clock (the model's own ``now_ms``). A hypothesis state machine
plays one subscription's life -- deliveries, the application consuming them,
listeners failing (local redelivery by the redelivery policy, then poison),
timer flushes, close -- for each ack mode, and applies the core's actions as
``subscription.SubscriptionManager`` does.

Invariants (DESIGN.md section 2; ActiveMQ ``ActiveMQMessageConsumer``):
* amqstomp writes ACKs only for optimized acknowledge; each names a message
  the application had (consumed), the newest consumed in dispatch order, newer
  than the one the ACK before named; never one waiting for its redelivery or
  poisoned, and none at all while a message waits for its redelivery;
* reading pauses only while the buffer is full, resumes only once it drained
  to half, and pause and resume alternate;
* nothing consumed stays unacknowledged: at the end of every example (what
  waits for its redelivery consumed first) closing names the newest consumed
  message unless an ACK named it already.
"""
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from amqstomp._core import acks
from amqstomp._core.settle import BY_APPLICATION, BY_BROKER, BY_LIBRARY, Poison, after_failure
from amqstomp.flow import ACK_MODES, RedeliveryPolicy, SubscriptionWindow

pytestmark = pytest.mark.timeout(120)

MODES = [("auto", False), ("client", False), ("client-individual", False), ("client", True)]


class Sub(acks.Acking):
    __slots__ = ("ack",)

    def __init__(self, window: Any, ack: str) -> None:
        super().__init__(window)
        self.ack = ack


def _window(ack: str, optimized: bool, prefetch: int, max_buffered: int) -> SubscriptionWindow:
    return SubscriptionWindow(prefetch, ACK_MODES[ack], auto_ack=optimized, optimize_acknowledge=optimized,
                              ack_batch_cap=7, optimize_acknowledge_timeout_ms=300, idle_ack_ms=50,
                              max_buffered=max_buffered)


class AckMachine(RuleBasedStateMachine):
    """One subscription; ``queue`` is the dispatch queue (headers, seq, size)."""

    @initialize(mode=st.sampled_from(MODES), prefetch=st.integers(1, 40), max_buffered=st.integers(1, 12),
                policy=st.integers(0, 3))
    def setup(self, mode: Tuple[str, bool], prefetch: int, max_buffered: int, policy: int) -> None:
        ack, optimized = mode
        self.optimized = optimized
        self.sub = Sub(_window(ack, optimized, prefetch, max_buffered), ack)
        self.policy = RedeliveryPolicy(maximum_redeliveries=policy, initial_redelivery_delay_ms=10)
        self.now = 1000
        self.count = 0
        self.queue: List[Tuple[Dict[str, str], int, int]] = []
        self.waiting: List[Tuple[Dict[str, str], int, int]] = []  # failed, waiting for the redelivery
        self.consumed: Dict[str, int] = {}  # message-id -> seq, what the application had
        self.poisoned: set = set()
        self.newest_seq = 0
        self.acked_seq = 0  # seq of the message the last ACK named
        self.acked_ids: List[str] = []
        self.paused = False
        self.armed: Optional[int] = None

    # ------------------------------------------------------------ applying the actions

    def _apply(self, todo: Optional[acks.AckDue]) -> None:
        if todo is None:
            return
        if todo.resume:
            assert self.paused, "resume without a pause"
            assert self.sub.window.pending <= self.sub.window.max_buffered // 2
            self.paused = False
        if todo.flush_at_ms is not None:
            assert self.optimized
            self.armed = todo.flush_at_ms
        if todo.ack is not None:
            self._acked(todo.ack)

    def _acked(self, headers: Dict[str, str]) -> None:
        assert self.optimized, "amqstomp ACKs only for optimized acknowledge"
        assert not self.sub.failures and not self.waiting, "a cumulative ACK past a message awaiting redelivery"
        message_id = headers["message-id"]
        assert message_id in self.consumed, "an ACK of a message the application did not have"
        assert message_id not in self.poisoned
        seq = self.consumed[message_id]
        assert seq == self.newest_seq, "the ACK names the newest message consumed in dispatch order"
        assert seq > self.acked_seq, "an ACK naming what an earlier one covered"
        self.acked_seq = seq
        self.acked_ids.append(message_id)

    # ------------------------------------------------------------ rules

    @precondition(lambda self: not self.paused and self.count < 60)
    @rule(size=st.integers(0, 300))
    def deliver(self, size: int) -> None:
        self.count += 1
        headers = {"message-id": "m%d" % self.count, "ack": "a%d" % self.count, "subscription": "1"}
        flags = acks.delivered(self.sub, self.now, size)
        if flags & acks.PAUSE:
            assert self.sub.window.pending >= self.sub.window.max_buffered
            self.paused = True
        self.queue.append((headers, self.sub.window.delivered, size))

    @precondition(lambda self: self.queue)
    @rule()
    def consume(self) -> None:
        headers, seq, size = self.queue.pop(0)
        todo = acks.consumed(self.sub, headers, seq, size, self.now, self.armed is not None)
        self.consumed[headers["message-id"]] = seq
        self.newest_seq = max(self.newest_seq, seq)
        assert headers["message-id"] not in self.sub.failures
        self._apply(todo)

    @precondition(lambda self: self.queue)
    @rule()
    def listener_raises(self) -> None:
        headers, seq, size = self.queue.pop(0)
        settled_by = acks.settled_by(self.sub)
        if settled_by != BY_LIBRARY:  # the application (or the broker) settles it: consumed
            assert settled_by == (BY_BROKER if self.sub.ack == "auto" else BY_APPLICATION)
            self.queue.insert(0, (headers, seq, size))
            self.consume()
            return
        failures = acks.failed(self.sub, headers["message-id"], True)
        action = after_failure(self.policy, failures, True, "1.2", "activemq", headers)
        if isinstance(action, Poison):
            assert action.headers == {"id": headers["ack"]}
            self.poisoned.add(headers["message-id"])
            self._apply(acks.poisoned(self.sub, headers["message-id"], False, size, self.now))
            assert headers["message-id"] not in self.sub.failures
        else:
            assert self.sub.failures[headers["message-id"]] == failures
            self.waiting.append((headers, seq, size))

    @precondition(lambda self: self.waiting)
    @rule()
    def redeliver(self) -> None:
        self.queue.append(self.waiting.pop(0))

    @rule(dt=st.integers(1, 400))
    def tick(self, dt: int) -> None:
        self.now += dt
        if self.armed is not None and self.now >= self.armed:
            self.armed = None
            self._apply(acks.timer_due(self.sub, self.now))

    def teardown(self) -> None:
        """Every example ends with the UNSUBSCRIBE's flush (after the redeliveries still due)."""
        if not hasattr(self, "sub"):
            return
        while self.waiting or self.queue:
            self.queue.extend(self.waiting)
            self.waiting.clear()
            self.consume()
        token = acks.closing(self.sub, self.now)
        if token is not None:
            self._acked(token)
        if self.optimized and self.newest_seq:
            assert self.acked_seq == self.newest_seq, "a consumed message left unacknowledged at close"
        self.sub.closed = True
        assert acks.consumed(self.sub, {"message-id": "x"}, 10 ** 6, 0, self.now, False) is None
        assert acks.timer_due(self.sub, self.now) is None

    # ------------------------------------------------------------ invariants

    @invariant()
    def window_counts_the_buffer(self) -> None:
        window = self.sub.window
        assert window.pending == len(self.queue) + len(self.waiting)
        assert set(self.sub.failures) == {h["message-id"] for h, _, _ in self.waiting} | (
            set(self.sub.failures) & {h["message-id"] for h, _, _ in self.queue})

    @invariant()
    def the_application_acks_its_own(self) -> None:
        if not self.optimized:
            assert self.acked_ids == []


AckMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None, database=None)
TestAckCore = AckMachine.TestCase


def test_no_clock_for_a_subscription_that_does_not_batch():
    """Only optimized acknowledge reads the time (``clocked``): the driver passes 0 otherwise."""
    for ack, optimized in MODES:
        assert acks.Acking(_window(ack, optimized, 10, 10)).clocked is optimized


def test_who_acknowledges():
    assert not acks.application_acks("auto", False)
    assert acks.application_acks("client", False) and acks.application_acks("client-individual", False)
    assert not acks.application_acks("client", True)


def test_a_redelivered_message_consumed_at_last_flushes_what_was_held_back():
    """Optimized acknowledge: while m1 waits for its redelivery the batch's ACK is held back; once
    m1 is consumed the ACK goes, naming the newest message consumed (m3), not m1."""
    sub = Sub(_window("client", True, 2, 10), "client")  # threshold 1 (65 % of prefetch 2)
    frames = [({"message-id": "m%d" % i, "ack": "a%d" % i}, i, 0) for i in (1, 2, 3)]
    for _ in frames:
        acks.delivered(sub, 0, 0)
    assert acks.failed(sub, "m1", True) == 1
    assert acks.consumed(sub, frames[1][0], 2, 0, 0, True) is None  # held back: m1 waits
    assert acks.consumed(sub, frames[2][0], 3, 0, 0, True) is None
    todo = acks.consumed(sub, frames[0][0], 1, 0, 0, True)
    assert todo is not None and todo.ack is frames[2][0] and sub.named is frames[2][0]
    assert sub.failures == {}
