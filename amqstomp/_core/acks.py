"""Acknowledgement: what a subscription's window decides when a MESSAGE is
delivered, consumed, poisoned or left waiting, and which ACK amqstomp writes
for it -- decided once, for every API (the stomp.py-style listeners and the
JMS sessions both count through ``subscription.SubscriptionManager``).

Pure (no socket, thread, lock, clock or asyncio): each function takes one
subscription's settlement state (:class:`Acking`: ``window``, ``failures``,
``newest``...), the time where a rule reads it (``now_ms``, monotonic
milliseconds, read by the driver only for a subscription that is
:attr:`~Acking.clocked`), changes that state and returns what the driver does,
as values: :data:`PAUSE` / :data:`TURNED_SLOW` flags from :func:`delivered`,
and :class:`AckDue` (write an ACK naming this MESSAGE, read the socket again,
flush at this time) from the others. ``SubscriptionManager`` applies them
under the subscription's lock, and writes the ACK after it.

The rules (ActiveMQ 5.17 ``ActiveMQMessageConsumer``, STOMP 1.2 "ACK"):

* **who acknowledges** (:func:`application_acks`, :func:`settled_by`): the
  broker for ``ack:auto``; amqstomp for optimized acknowledge (``ack:client``,
  cumulative); the application otherwise (``client``, ``client-individual``);
* **the prefetch window** (``amqstomp.flow.SubscriptionWindow``): a delivery
  takes credit, a consumption or the application's ACK gives it back; reading
  stops while the local buffer is full and starts again once it drained to
  half; the consumer turns slow above twice its prefetch;
* **optimized acknowledge**: one cumulative ACK per batch (65 % of the
  prefetch, ``ack_batch_cap``), naming the NEWEST message consumed in
  dispatch order; a batch left short is flushed by a deadline
  (``optimizeAcknowledgeTimeOut``, the scheduled interval, the idle flush)
  that the driver's timer keeps (:func:`timer_due`);
* **no ACK past a local redelivery**: while a message of the subscription
  waits for its redelivery (``failures``) no cumulative ACK is written (it
  would settle that one too); its consumption flushes what was held back;
  a poisoned one is settled by its reject first, then the held-back ACK names
  the newest of the others, never it (:func:`poisoned`; ActiveMQ answers an
  ACK of a NACKed message with ERROR "Unexpected ACK").

The acknowledge modes -- the parameter by which the APIs differ on purpose --
and the JMS modes' decisions that read no subscription (which ACK the
application writes, the ACKs in a transaction, the local redelivery) are
:mod:`amqstomp._core.ackmodes`, beside this module: the rules here change a
subscription's state and are called by its owner alone, under its lock.

Licensed under the Apache License, Version 2.0.
"""
from typing import Any, Dict, Mapping, Optional

from .settle import BY_APPLICATION, BY_BROKER, BY_LIBRARY

__all__ = ["PAUSE", "TURNED_SLOW", "Acking", "AckDue", "acked_by_application", "application_acks", "closing", "consumed",
           "delivered", "failed", "poisoned", "settled_by", "timer_due"]

#: :func:`delivered`: stop reading the socket (the subscription's local buffer is full)
PAUSE = 1
#: :func:`delivered`: the consumer just turned slow (pending above 2 x prefetch): tell the listeners once
TURNED_SLOW = 2


class Acking:
    """What the rules read and change of a subscription (``subscription.Subscription``
    has these attributes; a driver without one can use this class).

    Attributes:
        window (amqstomp.flow.SubscriptionWindow): its prefetch window and ack batching.
        closed (bool): unsubscribed (or its socket replaced) since.
        clocked (bool): a rule reads the time (optimized acknowledge); else the driver
            passes ``now_ms`` 0 and reads no clock.
        slow (bool): it is a slow consumer now.
        failures (dict[str, int]): message-id -> failed deliveries, of the messages
            waiting for a local redelivery.
        newest (Mapping | None): headers of the newest message consumed in dispatch order.
        newest_seq (int): its place in that order (1 = the first delivered).
        named (Mapping | None): headers of the message the last ACK amqstomp wrote named.
    """

    __slots__ = ("window", "closed", "clocked", "slow", "failures", "newest", "newest_seq", "named")

    def __init__(self, window: Any) -> None:
        self.window = window
        self.closed = False
        self.clocked = bool(window.optimize_acknowledge)
        self.slow = False
        self.failures: Dict[str, int] = {}
        self.newest: Any = None
        self.newest_seq = 0
        self.named: Any = None


class AckDue:
    """Action, what the driver does after a decision (None where there is nothing):
    ``ack`` (Mapping | None): write an ACK naming the MESSAGE with these headers
    (``frames.ack_headers`` for the version), after the lock, on the socket that
    delivered it; ``resume`` (bool): read the socket again (under the lock);
    ``flush_at_ms`` (int | None): arm the timer for :func:`timer_due` at this
    monotonic time in ms (under the lock)."""

    __slots__ = ("ack", "resume", "flush_at_ms")

    def __init__(self, ack: Optional[Mapping[str, Any]], resume: bool = False,
                 flush_at_ms: Optional[int] = None) -> None:
        self.ack = ack
        self.resume = resume
        self.flush_at_ms = flush_at_ms

    def __repr__(self) -> str:
        return "AckDue(ack=%r, resume=%r, flush_at_ms=%r)" % (self.ack, self.resume, self.flush_at_ms)


def application_acks(ack: str, optimize_acknowledge: bool) -> bool:
    """True when the application writes the ACKs of a subscription with STOMP
    ``ack`` mode ``ack``: not ``auto`` (the broker's), not optimized acknowledge (amqstomp's)."""
    return ack != "auto" and not optimize_acknowledge


def settled_by(sub: Any) -> str:
    """Who settles ``sub``'s messages now, as :func:`amqstomp._core.settle.listener_failed`
    is asked: ``BY_LIBRARY`` (optimized acknowledge, still open), ``BY_BROKER`` (``ack:auto``),
    else ``BY_APPLICATION``."""
    if sub.window.optimize_acknowledge and not sub.closed:
        return BY_LIBRARY
    return BY_BROKER if getattr(sub, "ack", None) == "auto" else BY_APPLICATION


def delivered(sub: Any, now_ms: int, size: int) -> int:
    """A MESSAGE of ``size`` body bytes arrived for ``sub`` (reader). Returns
    flags: :data:`PAUSE` (stop reading: the buffer is full; not for a closed
    subscription) | :data:`TURNED_SLOW` (tell the listeners, once per turn)."""
    window = sub.window
    flags = PAUSE if window.on_delivered(now_ms, size) and not sub.closed else 0
    slow = window.slow_consumer
    if slow and not sub.slow:
        flags |= TURNED_SLOW
    sub.slow = slow
    return flags


def consumed(sub: Any, headers: Mapping[str, Any], seq: int, size: int, now_ms: int,
             armed: bool) -> Optional[AckDue]:
    """The application had the MESSAGE with ``headers`` (``size`` body bytes, the
    ``seq``-th delivered of ``sub``), or it counts as consumed. ``armed``: the
    flush timer is set already. Returns None (nothing to do: the common case) or
    what is due: the ACK the window decided (cumulative ones name the newest
    message consumed in dispatch order; none while another waits for its
    redelivery; the held-back ones once that one is consumed), a resume, a
    flush deadline. Nothing for a closed subscription."""
    if sub.closed:
        return None
    window = sub.window
    if window.consumed >= window.delivered:  # pragma: no cover - delivered before a reset
        return None
    failures = sub.failures
    again = False
    if failures:
        message_id = headers.get("message-id")
        if message_id in failures:  # a local redelivery, consumed at last
            del failures[message_id]
            again = True
    if seq > sub.newest_seq:
        sub.newest, sub.newest_seq = headers, seq
    optimized = window.optimize_acknowledge
    token = window.on_consumed(sub.newest if optimized else headers, now_ms, size)
    if optimized:
        if failures:
            token = None  # a message waiting for redelivery must not be acked by a cumulative ACK
        elif again and token is None:
            token = window.flush(now_ms)  # the ACKs held back meanwhile
    resume = window.should_resume()
    deadline = None if armed else window.next_deadline_ms()
    if token is None and not resume and deadline is None:
        return None
    if token is not None:
        sub.named = token
    return AckDue(token, resume, deadline)


def timer_due(sub: Any, now_ms: int) -> Optional[AckDue]:
    """The flush deadline of ``sub`` passed: the ACK of the batch left short (none
    while a message waits for its redelivery) and the next deadline. None for a
    closed subscription."""
    if sub.closed:
        return None
    window = sub.window
    token = None if sub.failures else window.poll(now_ms)
    if token is not None:
        sub.named = token
    return AckDue(token, False, window.next_deadline_ms())


def failed(sub: Any, message_id: Any, error: bool) -> int:
    """A delivery of ``message_id`` failed (``error``: a listener raised; False: no
    listener took it, not counted). Returns the failures counted so far; the
    message now waits for its redelivery (no cumulative ACK passes it)."""
    failures: Dict[str, int] = sub.failures
    count = failures[message_id] = failures.get(message_id, 0) + (1 if error else 0)
    return count


def poisoned(sub: Any, message_id: Any, counted: bool, size: int, now_ms: int) -> AckDue:
    """The reject of ``message_id`` (``settle.Poison``) was written: it is settled
    (consumed too unless ``counted``, ``size`` body bytes). Returns the ACK held
    back for the others, naming the newest of them, never the poisoned one (None
    where none is due: not optimized, another waits for its redelivery, closed,
    or named already), and the resume."""
    window = sub.window
    failures = sub.failures
    failures.pop(message_id, None)
    due = window.optimize_acknowledge and not (failures or sub.closed)  # else no ACK is due now
    if due:
        window.flush(now_ms)  # the window's count: the ACK below covers these
    if not counted and window.consumed < window.delivered:
        window.on_consumed(sub.newest, now_ms, size)
    window.on_application_ack(False)
    newest = sub.newest  # held back (a batch not full, or while it awaited its redelivery)
    token = newest if due and newest is not None and newest is not sub.named else None
    if token is not None:
        sub.named = token
    return AckDue(token, window.should_resume())


def acked_by_application(sub: Any, cumulative: bool) -> bool:
    """The application's own ACK (or NACK) of a message of ``sub`` was decided (manual
    ``client``: ``cumulative``, every message consumed so far; ``client-individual``:
    one): the window gives the credit back. Returns True when reading may resume (a
    paused buffer drained to half). ActiveMQ 5.17 ``ActiveMQMessageConsumer.acknowledge``."""
    window = sub.window
    window.on_application_ack(cumulative)
    return bool(window.should_resume())


def closing(sub: Any, now_ms: int) -> Optional[Mapping[str, Any]]:
    """Before UNSUBSCRIBE: the headers of the MESSAGE the last ACK names, covering
    what was consumed and not acked (optimized acknowledge), or None (nothing
    held back, or a message still waits for its redelivery)."""
    token = None if sub.failures else sub.window.flush(now_ms)
    if token is not None:
        sub.named = token
    return token
