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

The acknowledge modes (:class:`AckMode`, the second half of this module) are
the one parameter by which the APIs' rules differ: who settles (the broker,
amqstomp, the application, a transaction), whether the application's ACK is
cumulative, and what a failed listener means (:func:`amqstomp._core.settle.listener_failed`).
The JMS sessions apply them (``jms/consumer.py``, ``jms/_subscriber.py``,
``jms/_transaction.py``): which messages wait for the application's
acknowledgement (:attr:`AckMode.tracked`), which ACK it writes
(:func:`application_ack`), the ACKs in a transaction (:func:`in_transaction_ack`)
and the local redelivery with its poison (:func:`redeliver`).

Licensed under the Apache License, Version 2.0.
"""
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .settle import BY_APPLICATION, BY_BROKER, BY_LIBRARY, INDIVIDUAL, TRANSACTED, Poison, after_failure

__all__ = ["PAUSE", "TURNED_SLOW", "Acking", "AckDue", "AckMode", "AppAck", "Redelivery", "JMS_AUTO",
           "JMS_AT_MOST_ONCE", "JMS_CLIENT", "JMS_DUPS_OK", "JMS_INDIVIDUAL", "JMS_TRANSACTED",
           "application_ack", "application_acks", "closing", "consumed", "delivered", "failed",
           "in_transaction_ack", "poisoned", "redeliver", "settled_by", "timer_due",
           "window_options"]

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


def closing(sub: Any, now_ms: int) -> Optional[Mapping[str, Any]]:
    """Before UNSUBSCRIBE: the headers of the MESSAGE the last ACK names, covering
    what was consumed and not acked (optimized acknowledge), or None (nothing
    held back, or a message still waits for its redelivery)."""
    token = None if sub.failures else sub.window.flush(now_ms)
    if token is not None:
        sub.named = token
    return token


# ---------------------------------------------------------------- the acknowledge modes (both APIs)

class AckMode:
    """How a consumer's messages are settled: the parameter by which the APIs' rules
    differ on purpose (JMS 2.0 section 6.2.10 acknowledge modes, ActiveMQ 5.17
    ``ActiveMQMessageConsumer``; the stomp.py API's STOMP ``ack`` header). Frozen values;
    the JMS modes are the module constants (:data:`JMS_AUTO`...); a stomp.py-API
    subscription's is read off it (:func:`settled_by`, :func:`application_acks`).

    Attributes:
        name (str): for messages (the JMS constant's name, or the STOMP ``ack`` mode).
        stomp_ack (str): the SUBSCRIBE's ``ack`` header: ``auto``, ``client`` or ``client-individual``.
        settled_by (str): who settles (:data:`~amqstomp._core.settle.BY_BROKER`, ``BY_LIBRARY``,
            ``BY_APPLICATION``, ``INDIVIDUAL``, ``TRANSACTED``): what a failed listener means
            (:func:`amqstomp._core.settle.listener_failed`). The one rule where the APIs differ:
            a stomp.py ``client-individual`` listener that raised leaves its message consumed
            (``BY_APPLICATION``, :func:`settled_by`: the application ACKs or NACKs it); a JMS
            ``INDIVIDUAL_ACKNOWLEDGE`` one gets every unacknowledged message again (``INDIVIDUAL``).
        optimized (bool): amqstomp writes cumulative ACKs in batches (optimized acknowledge,
            the window's ``optimize_acknowledge``).
        lazy (bool): with ``optimized``, the short batch waits DUPS_OK's longer timeout
            (``dups_ok_ack_timeout_ms`` for both deadlines).
        tracked (bool): the application settles: a message is kept from its hand-over until
            its ACK or COMMIT (JMS ``delivered``), and the window counts it consumed at
            hand-over; else the window counts it once the application had it.
        cumulative (bool): with ``tracked``, one ACK names the newest message handed over and
            settles every earlier one (ActiveMQ ``ack:client``); else one ACK per message.
        transacted (bool): the ACKs go in the session's transaction (:func:`in_transaction_ack`).
    """

    __slots__ = ("name", "stomp_ack", "settled_by", "optimized", "lazy", "tracked", "cumulative", "transacted")

    def __init__(self, name: str, stomp_ack: str, settled_by: str, optimized: bool = False, lazy: bool = False,
                 tracked: bool = False, cumulative: bool = False, transacted: bool = False) -> None:
        self.name = name
        self.stomp_ack = stomp_ack
        self.settled_by = settled_by
        self.optimized = optimized
        self.lazy = lazy
        self.tracked = tracked
        self.cumulative = cumulative
        self.transacted = transacted

    @property
    def acks_when_skipped(self) -> bool:
        """A message the consumer skips (``no_local``, expired) is acked by amqstomp at once:
        one ACK per message (INDIVIDUAL); the cumulative modes' next ACK covers it, and the
        untracked ones count it consumed."""
        return self.tracked and not self.cumulative

    def __repr__(self) -> str:
        return "AckMode(%s)" % self.name


#: JMS ``AUTO_ACKNOWLEDGE``: amqstomp acks in batches (optimized acknowledge; one per message
#: with ``jms.optimizeAcknowledge=false``), a failed listener's message is redelivered locally
JMS_AUTO = AckMode("AUTO_ACKNOWLEDGE", "client", BY_LIBRARY, optimized=True)
#: JMS ``DUPS_OK_ACKNOWLEDGE``: as :data:`JMS_AUTO`, with the lazier flush deadline
JMS_DUPS_OK = AckMode("DUPS_OK_ACKNOWLEDGE", "client", BY_LIBRARY, optimized=True, lazy=True)
#: ActiveMQ's ``AT_MOST_ONCE`` (and browsers): ``ack:auto``, the broker settled it when it sent it
JMS_AT_MOST_ONCE = AckMode("AT_MOST_ONCE", "auto", BY_BROKER)
#: JMS ``CLIENT_ACKNOWLEDGE``: ``acknowledge()`` writes one cumulative ACK per consumer
JMS_CLIENT = AckMode("CLIENT_ACKNOWLEDGE", "client", BY_APPLICATION, tracked=True, cumulative=True)
#: ActiveMQ's ``INDIVIDUAL_ACKNOWLEDGE``: each message's ``acknowledge()`` acks that one
JMS_INDIVIDUAL = AckMode("INDIVIDUAL_ACKNOWLEDGE", "client-individual", INDIVIDUAL, tracked=True)
#: JMS ``SESSION_TRANSACTED``: cumulative ACKs in the transaction, the rest at COMMIT
JMS_TRANSACTED = AckMode("SESSION_TRANSACTED", "client", TRANSACTED, tracked=True, cumulative=True,
                         transacted=True)

def window_options(mode: AckMode, options: Mapping[str, Any]) -> Dict[str, Any]:
    """The ack-batching options of the prefetch window (``SubscriptionManager.prepare``'s)
    of a consumer in ``mode``: none unless amqstomp acks (:attr:`AckMode.optimized`).

    Args:
        options (Mapping): the connection's, by these names: ``optimize_acknowledge`` (bool;
            False: one ACK per consumed message, ``ack_batch_cap`` 1), ``ack_batch_cap``
            (messages), ``optimize_acknowledge_timeout_ms`` and ``idle_ack_ms`` (ms; a
            :attr:`~AckMode.lazy` mode uses ``dups_ok_ack_timeout_ms`` for both),
            ``optimized_ack_scheduled_ack_interval_ms`` (ms).

    Raises:
        KeyError: a needed option is missing; ValueError: one is not an int.
    """
    if not mode.optimized:
        return {}
    out: Dict[str, Any] = {"optimize_acknowledge": True,
                           "ack_batch_cap": int(options["ack_batch_cap"]) if options.get("optimize_acknowledge")
                           else 1}
    if mode.lazy:
        out["optimize_acknowledge_timeout_ms"] = out["idle_ack_ms"] = int(options["dups_ok_ack_timeout_ms"])
    else:
        out["optimize_acknowledge_timeout_ms"] = int(options["optimize_acknowledge_timeout_ms"])
        out["idle_ack_ms"] = int(options["idle_ack_ms"])
    out["optimized_ack_scheduled_ack_interval_ms"] = int(options["optimized_ack_scheduled_ack_interval_ms"])
    return out


class AppAck:
    """Action, the application's acknowledgement (:func:`application_ack`): write one ACK
    naming ``names`` (a delivery; None: nothing to write) on the socket that delivered it;
    once written, free the window (``cumulative``: every consumed message; else one) and
    record ``settles`` as settled. ``not_acked``: deliveries of a socket lost since, which
    no ACK can reach (the broker redelivers them; the driver tells the application)."""

    __slots__ = ("names", "settles", "cumulative", "not_acked")

    def __init__(self, names: Any, settles: List[Any], cumulative: bool, not_acked: int) -> None:
        self.names = names
        self.settles = settles
        self.cumulative = cumulative
        self.not_acked = not_acked

    def __repr__(self) -> str:
        return "AppAck(names=%r, settles=%d, cumulative=%r, not_acked=%d)" % (
            self.names, len(self.settles), self.cumulative, self.not_acked)


def application_ack(mode: AckMode, deliveries: Sequence[Any], lost: Callable[[Any], bool]) -> AppAck:
    """The application acknowledges ``deliveries`` (handed over, in hand-over order;
    :attr:`AckMode.tracked` modes): a cumulative mode writes ONE ACK naming the newest of
    them that came on the open socket; INDIVIDUAL one per message (pass one). ``lost(d)``:
    True for a delivery of a socket lost since (``settle.from_lost_socket``) -- never acked.

    Raises:
        ValueError: ``mode`` is not one the application acknowledges in.
    """
    if not mode.tracked:
        raise ValueError("%r: the application does not acknowledge in this mode" % (mode,))
    live = [d for d in deliveries if not lost(d)]
    not_acked = len(deliveries) - len(live)
    if not live:
        return AppAck(None, [], mode.cumulative, not_acked)
    return AppAck(live[-1], live, mode.cumulative, not_acked)


def in_transaction_ack(delivered: int, acked: int, threshold: int) -> int:
    """Transacted (:attr:`AckMode.transacted`): of the ``delivered`` messages handed over
    in the open transaction, an ACK in it covers ``acked`` already. Returns how many
    messages an ACK in the transaction naming the newest one covers now, or 0: once
    ``threshold`` (messages) are pending -- every batch, so the broker, which counts
    ACKs in a transaction as delivered, keeps dispatching in a long transaction --, and
    at COMMIT with ``threshold`` 1 (whatever is pending)."""
    pending = delivered - acked
    return pending if pending >= max(1, threshold) else 0


class Redelivery:
    """Action (:func:`redeliver`): put ``again`` back at the head of the consumer's
    buffer, in their order, handed over no earlier than ``delay_ms`` from now (0: at
    once); write each of ``poisoned`` (delivery, :class:`~amqstomp._core.settle.Poison`)'s
    reject first."""

    __slots__ = ("again", "poisoned", "delay_ms")

    def __init__(self, again: List[Any], poisoned: List[Tuple[Any, Poison]], delay_ms: int) -> None:
        self.again = again
        self.poisoned = poisoned
        self.delay_ms = delay_ms

    def __repr__(self) -> str:
        return "Redelivery(again=%d, poisoned=%d, delay_ms=%d)" % (len(self.again), len(self.poisoned),
                                                                  self.delay_ms)


def redeliver(policy: Any, deliveries: Sequence[Any], version: Optional[str], dialect: str) -> Redelivery:
    """Local redelivery of ``deliveries`` whose listener failed (JMS ``recover()`` too),
    each with ``frame.headers``, ``redeliveries`` (this client's, counted here: one more)
    and ``delivery_count`` (1 + the broker's and this client's redeliveries: ActiveMQ's
    ``redeliveryCounter``). Each is redelivered or, past ``policy.maximum_redeliveries``,
    poisoned (:func:`amqstomp._core.settle.after_failure`); the delay is the redelivery
    policy's for the first one kept. Deliveries of a lost socket are the caller's to drop
    first (the broker redelivers them)."""
    again: List[Any] = []
    poisoned_: List[Tuple[Any, Poison]] = []
    delay_ms = 0
    for delivery in deliveries:
        delivery.redeliveries += 1
        action = after_failure(policy, delivery.delivery_count - 1, True, version, dialect, delivery.frame.headers)
        if isinstance(action, Poison):
            poisoned_.append((delivery, action))
        else:
            if not again:
                delay_ms = action.delay_ms
            again.append(delivery)
    return Redelivery(again, poisoned_, delay_ms)
