"""The acknowledgement core (amqstomp._core.acks) driven in memory: no broker,
no threads, no clock (the model's own ``now_ms``); and, at the end, the JMS
acknowledge modes' rules (amqstomp._core.ackmodes) in memory. A hypothesis state machine
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
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from amqstomp._core import ackmodes, acks
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


# ---------------------------------------------------------------- the JMS acknowledge modes (in memory)

JMS_MODES = [ackmodes.JMS_AUTO, ackmodes.JMS_DUPS_OK, ackmodes.JMS_AT_MOST_ONCE, ackmodes.JMS_CLIENT, ackmodes.JMS_INDIVIDUAL,
             ackmodes.JMS_TRANSACTED]


class _Frame:
    def __init__(self, headers: Dict[str, str], delivery_count: int = 1) -> None:
        self.headers = headers
        self.delivery_count = delivery_count


class _Delivery:
    """What a JMS session holds of a MESSAGE (``jms._state.Delivery``'s attributes)."""

    def __init__(self, n: int, broker_count: int = 1, lost: bool = False) -> None:
        self.frame = _Frame({"message-id": "m%d" % n, "ack": "a%d" % n, "subscription": "1"}, broker_count)
        self.redeliveries = 0
        self.lost = lost

    @property
    def delivery_count(self) -> int:
        return self.frame.delivery_count + self.redeliveries


def test_each_jms_mode_names_its_stomp_ack_and_who_settles():
    """The SUBSCRIBE ``ack`` header and what a failed listener means, per JMS acknowledge mode."""
    from amqstomp._core.settle import CONSUMED, RECOVER, REDELIVER, ROLLBACK, listener_failed
    table = {m.name: (m.stomp_ack, listener_failed(m.settled_by), m.tracked, m.cumulative, m.transacted,
                      m.individual, m.acknowledges_all, m.recovers_current) for m in JMS_MODES}
    assert table == {
        "AUTO_ACKNOWLEDGE": ("client", REDELIVER, False, False, False, False, False, True),
        "DUPS_OK_ACKNOWLEDGE": ("client", REDELIVER, False, False, False, False, False, True),
        "AT_MOST_ONCE": ("auto", CONSUMED, False, False, False, False, False, False),
        "CLIENT_ACKNOWLEDGE": ("client", CONSUMED, True, True, False, False, True, False),
        "INDIVIDUAL_ACKNOWLEDGE": ("client-individual", RECOVER, True, False, False, True, False, False),
        "SESSION_TRANSACTED": ("client", ROLLBACK, True, True, True, False, False, False),
    }


def test_the_apis_differ_on_purpose_only_in_the_mode_parameter():
    """A stomp.py ``client-individual`` listener that raised leaves its message consumed (the
    application ACKs or NACKs it); a JMS INDIVIDUAL_ACKNOWLEDGE one gets its unacked messages again."""
    from amqstomp._core.settle import CONSUMED, RECOVER, listener_failed
    stomp_py = Sub(_window("client-individual", False, 10, 10), "client-individual")
    assert listener_failed(acks.settled_by(stomp_py)) == CONSUMED
    assert listener_failed(ackmodes.JMS_INDIVIDUAL.settled_by) == RECOVER
    assert ackmodes.JMS_INDIVIDUAL.stomp_ack == stomp_py.ack


def test_window_options_per_mode():
    options = {"optimize_acknowledge": True, "ack_batch_cap": 50, "optimize_acknowledge_timeout_ms": 300,
               "idle_ack_ms": 20, "dups_ok_ack_timeout_ms": 1000, "optimized_ack_scheduled_ack_interval_ms": 0}
    assert ackmodes.window_options(ackmodes.JMS_AUTO, options) == {
        "optimize_acknowledge": True, "ack_batch_cap": 50, "optimize_acknowledge_timeout_ms": 300,
        "idle_ack_ms": 20, "optimized_ack_scheduled_ack_interval_ms": 0}
    lazy = ackmodes.window_options(ackmodes.JMS_DUPS_OK, options)
    assert lazy["optimize_acknowledge_timeout_ms"] == lazy["idle_ack_ms"] == 1000
    assert ackmodes.window_options(ackmodes.JMS_AUTO, dict(options, optimize_acknowledge=False))["ack_batch_cap"] == 1
    for mode in (ackmodes.JMS_AT_MOST_ONCE, ackmodes.JMS_CLIENT, ackmodes.JMS_INDIVIDUAL, ackmodes.JMS_TRANSACTED):
        assert ackmodes.window_options(mode, options) == {}
    with pytest.raises(KeyError):
        ackmodes.window_options(ackmodes.JMS_AUTO, {"optimize_acknowledge": True})


@given(lost=st.lists(st.booleans(), max_size=12))
def test_client_acknowledge_names_the_newest_delivery_of_the_open_socket(lost: List[bool]):
    """CLIENT_ACKNOWLEDGE / transacted: ONE cumulative ACK naming the newest delivery that came on
    the open socket; deliveries of a lost socket are never named and are counted not acknowledged."""
    deliveries = [_Delivery(i, lost=flag) for i, flag in enumerate(lost)]
    for mode in (ackmodes.JMS_CLIENT, ackmodes.JMS_TRANSACTED):
        todo = ackmodes.application_ack(mode, deliveries, lambda d: d.lost)
        live = [d for d in deliveries if not d.lost]
        assert todo.cumulative and todo.settles == live and todo.not_acked == len(deliveries) - len(live)
        assert todo.names is (live[-1] if live else None)


def test_individual_acknowledge_acks_the_one_message():
    one = _Delivery(1)
    todo = ackmodes.application_ack(ackmodes.JMS_INDIVIDUAL, [one], lambda d: False)
    assert todo.names is one and todo.settles == [one] and not todo.cumulative and todo.not_acked == 0
    gone = ackmodes.application_ack(ackmodes.JMS_INDIVIDUAL, [one], lambda d: True)
    assert gone.names is None and gone.settles == [] and gone.not_acked == 1
    for mode in (ackmodes.JMS_AUTO, ackmodes.JMS_DUPS_OK, ackmodes.JMS_AT_MOST_ONCE):
        with pytest.raises(ValueError, match="does not acknowledge"):
            ackmodes.application_ack(mode, [one], lambda d: False)
    for lost in (False, True):  # individual_ack (the JMS driver's per-message call): the same action
        short = ackmodes.individual_ack(one, lost)
        full = ackmodes.application_ack(ackmodes.JMS_INDIVIDUAL, [one], lambda d: lost)
        assert (short.names, short.settles, short.cumulative, short.not_acked) == \
            (full.names, full.settles, full.cumulative, full.not_acked)


def test_acks_in_a_transaction_every_batch_and_the_rest_at_commit():
    """Transacted: an ACK in the transaction each time ``threshold`` messages are pending (the
    broker keeps dispatching), and the rest at COMMIT (threshold 1); nothing pending: none."""
    acked, written = 0, []
    for delivered in range(1, 8):
        pending = ackmodes.in_transaction_ack(delivered, acked, 3)
        if pending:
            written.append((delivered, pending))
            acked = delivered
    assert written == [(3, 3), (6, 3)]
    assert ackmodes.in_transaction_ack(7, acked, 1) == 1
    assert ackmodes.in_transaction_ack(7, 7, 1) == 0
    assert ackmodes.in_transaction_ack(2, 0, 0) == 2  # a threshold below 1 is 1


def test_which_modes_ack_in_a_transaction_before_settling():
    """SESSION_TRANSACTED always; CLIENT_ACKNOWLEDGE only where an ACK in a transaction grows the
    window (ActiveMQ Classic: its private "delivered" transaction); no other mode, on any broker."""
    from amqstomp._core.dialect import BROKERS, ACTIVEMQ
    grows = {name for name, dialect in BROKERS.items() if dialect.window_grows_in_tx}
    assert grows == {ACTIVEMQ}
    for window_grows in (False, True):
        assert ackmodes.acks_in_transaction(ackmodes.JMS_TRANSACTED, window_grows)
        assert ackmodes.acks_in_transaction(ackmodes.JMS_CLIENT, window_grows) is window_grows
        for mode in (ackmodes.JMS_AUTO, ackmodes.JMS_DUPS_OK, ackmodes.JMS_AT_MOST_ONCE, ackmodes.JMS_INDIVIDUAL):
            assert not ackmodes.acks_in_transaction(mode, window_grows)


def test_local_redelivery_counts_and_poisons_past_the_policy():
    """maximumRedeliveries=2: a message is handed over 1 + 2 times, then poisoned (NACK with its
    ACK identity); the delay is the policy's for the first one kept; a broker redelivery counts."""
    policy = RedeliveryPolicy(maximum_redeliveries=2, initial_redelivery_delay_ms=10, redelivery_delay_ms=25)
    fresh, again_from_broker = _Delivery(1), _Delivery(2, broker_count=3)
    todo = ackmodes.redeliver(policy, [fresh, again_from_broker], "1.2", "activemq")
    assert todo.again == [fresh] and todo.delay_ms == 10
    assert [(d, p.command, p.headers) for d, p in todo.poisoned] == [(again_from_broker, "NACK", {"id": "a2"})]
    assert fresh.redeliveries == 1
    todo = ackmodes.redeliver(policy, [fresh], "1.2", "activemq")
    assert todo.again == [fresh] and todo.delay_ms == 25 and not todo.poisoned
    todo = ackmodes.redeliver(policy, [fresh], "1.0", "activemq")
    assert todo.again == [] and todo.delay_ms == 0
    [(delivery, action)] = todo.poisoned
    assert delivery is fresh and action.command == "ACK" and "3 times" in action.reason  # STOMP 1.0 has no NACK
