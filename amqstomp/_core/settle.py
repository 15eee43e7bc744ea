"""Settlement: what becomes of a MESSAGE between its socket and the application,
decided once for every API (the stomp.py-style listeners and the JMS consumers).

Pure (no socket, thread, lock, clock or asyncio): each function takes the facts
its rule needs and returns a decision or an action; the drivers apply it under
their own locks -- for the stomp.py API ``_engine/client.Client`` and
``_engine/subscription.SubscriptionManager``, for the JMS API ``jms/consumer.ConsumerCore``
and ``jms/_subscriber.Subscriber``. The one fact that lives in the I/O layer,
whether a socket is still the open one, is asked through :class:`Links`
(``LinkOwner.link_alive``) and only when a rule needs it.

The rules (DESIGN.md section 2, ActiveMQ Classic's redelivery over failover):

* **the lost-socket rule** (:func:`from_lost_socket`): with failover, a
  MESSAGE that came on a socket that is not the open one any more is known by
  that socket (``Frame.link_seq``), never by its ``message-id``: ActiveMQ
  redelivers an unacknowledged message on the new socket under the same
  ``message-id`` (and, on STOMP 1.2, a new ``ack`` id). Its ACK cannot be
  written (the broker knows that delivery on the lost socket only), so it is
  neither handed over nor acknowledged;
* **hand-over** (:func:`hand_over`): not after the application's disconnect, not
  for a subscription closed meanwhile and not from a lost socket -- each only where
  somebody acknowledges (:func:`broker_settled`: ``ack:auto`` messages were settled
  by the broker when it sent them, so dropping one would lose it; stomp.py hands
  every MESSAGE its receiver reads to the listeners, during ``disconnect()`` and
  after ``unsubscribe()`` too); where the application
  sends the ACK the driver notes the delivery's socket under its ACK identity
  (``_engine/ledger.SocketLedger.handed_over``), so the ACK goes on that socket
  (:func:`identity_ack_socket`: that socket or nowhere, for the stomp.py API's ACK by identity);
* **a failed delivery** (:func:`listener_failed`, :func:`after_failure`): what
  a listener that raised means depends on who acknowledges -- the broker
  (``ack:auto``, JMS ``AT_MOST_ONCE``): consumed; amqstomp (optimized
  acknowledge, JMS ``AUTO_ACKNOWLEDGE``/``DUPS_OK``): redelivered locally after
  the redelivery policy's delay, then poisoned; the application: consumed
  (stomp.py API, JMS ``CLIENT_ACKNOWLEDGE``), all its unacknowledged messages
  again (JMS ``INDIVIDUAL_ACKNOWLEDGE``), or a rollback (transacted);
* **poison** (:func:`poison`): past ``maximum_redeliveries`` the message is given
  up with the broker's reject frame (NACK; ACK on STOMP 1.0, which has none;
  ``requeue:false`` on RabbitMQ) on the socket that delivered it; ActiveMQ
  moves it to its dead-letter queue (``org.apache.activemq.RedeliveryPolicy``,
  ``ActiveMQMessageConsumer.rollback``).

Licensed under the Apache License, Version 2.0.
"""
from typing import Any, Dict, Mapping, Optional, Protocol, Sequence, Tuple, Union

from .dialect import ACTIVEMQ, reject_headers
from .frames import ack_headers, reject_command

__all__ = [
    "BY_APPLICATION", "BY_BROKER", "BY_LIBRARY", "CONSUMED", "DROP_CLOSED", "DROP_DISCONNECTED",
    "DROP_LOST_SOCKET", "DROP_MOVING", "HAND_OVER", "HAND_OVER_NOTE", "HAND_OVER_NOTE_CUMULATIVE", "INDIVIDUAL", "Links",
    "NO_LISTENER_RETRY_MS", "Poison", "Subscribed", "RECOVER", "REDELIVER", "ROLLBACK", "Redeliver", "TRANSACTED",
    "after_failure", "broker_settled", "first_delivery_count", "from_lost_socket", "hand_over", "listener_failed", "next_redelivery",
    "poison", "poisoned_after",
    "ACK_REFUSED_LOST", "NOTE_ANSWERED", "NOTE_COVERED", "NOTE_SETTLED", "NOTE_TOOK",
    "delivery_answered", "identity_ack_socket", "identity_ack_written", "not_covered",
]

class Links(Protocol):
    """The one fact of the I/O layer the rules ask (``_io/owner.LinkOwner`` has it)."""

    def link_alive(self, seq: int) -> bool:
        """True while socket number ``seq`` is the open one."""

# ---------------------------------------------------------------- hand-over verdicts (ints: asked per MESSAGE)

#: give it to the application; nothing to note (nobody acknowledges, amqstomp does, or no failover)
HAND_OVER = 0
#: give it to the application, noting its socket under its ACK identity (the application ACKs it)
HAND_OVER_NOTE = 1
#: as :data:`HAND_OVER_NOTE`, in an ``ack:client`` subscription (its ACK is cumulative)
HAND_OVER_NOTE_CUMULATIVE = 2
#: drop: the application disconnected after the socket delivered it (an acknowledged
#: subscription: the broker redelivers it)
DROP_DISCONNECTED = 3
#: drop: its subscription was closed meanwhile (the broker redelivers it elsewhere)
DROP_CLOSED = 4
#: drop: it came on a socket lost since (failover; the broker redelivers it on the new one)
DROP_LOST_SOCKET = 5
#: drop: its socket is settling before a planned move (rebalanceInterval): the move's DISCONNECT
#: hands it back unacknowledged and the broker redelivers it (:mod:`amqstomp._core.rebalance`)
DROP_MOVING = 6


def broker_settled(ack: Optional[str]) -> bool:
    """True for a delivery of a subscription whose STOMP ``ack`` mode makes the broker
    count it consumed when it sends it (``auto``; None: a mode not known here, taken as
    ``auto``): it is never redelivered, so a copy the client received must reach the
    application while the connection delivers -- after ``disconnect()`` was called and
    after its subscription was closed too (STOMP 1.2 spec "SUBSCRIBE ack Header";
    ActiveMQ's ``StompSubscription`` acknowledges an ``auto`` MESSAGE at dispatch). In
    the other modes (``client``, ``client-individual``) an unacknowledged delivery goes
    back to the broker when its subscription or socket ends, so dropping it loses nothing."""
    return ack is None or ack == "auto"


def from_lost_socket(link_seq: int, failover: bool, links: Links) -> bool:
    """The lost-socket rule (module docstring): True for a delivery of socket
    ``link_seq`` (``Frame.link_seq``; 0: not known, never lost) when failover is
    on (``failover``) and that socket is not the open one (``links.link_alive(link_seq)``
    False). Such a delivery is neither handed over nor acknowledged."""
    return failover and link_seq != 0 and not links.link_alive(link_seq)


class Subscribed:
    """What the hand-over rule reads of a subscription, for a driver without one of its own
    (``subscription.Subscription`` has the same attributes): ``ack`` (str, the STOMP ``ack``
    mode), ``closed`` (bool, closed since the MESSAGE arrived), ``app_acked`` (bool, the
    application writes the ACK: not ``auto``, not amqstomp's optimized acknowledge)."""

    __slots__ = ("ack", "closed", "app_acked")

    def __init__(self, ack: str, closed: bool = False, app_acked: bool = False) -> None:
        self.ack = ack
        self.closed = closed
        self.app_acked = app_acked


def hand_over(link_seq: int, disconnected_seq: int, sub: Optional[Any], failover: bool, links: Links,
              moving_seq: int = 0) -> int:
    """Whether a queued MESSAGE still goes to the application (dispatcher or
    session thread, just before the application gets it).

    Args:
        link_seq (int): the socket that delivered it (``Frame.link_seq``; 0: unknown).
        disconnected_seq (int): the socket open at the application's last
            ``disconnect()`` (0: none); what it and earlier sockets delivered is dropped
            unless the broker settled it (:func:`broker_settled`).
        sub (Subscribed | Subscription | None): its subscription's ``ack`` mode,
            ``closed`` and ``app_acked`` (:class:`Subscribed`); None: one not known
            here (as ``ack:auto``).
        failover (bool): a lost socket is replaced (the lost-socket rule applies).
        links (Links): asked only for an acknowledged delivery under failover.
        moving_seq (int): the socket settling before a planned move (0: none): what it
            delivers in an acknowledged subscription is no longer handed over.

    Returns:
        int: :data:`HAND_OVER`, :data:`HAND_OVER_NOTE`, :data:`HAND_OVER_NOTE_CUMULATIVE`
        or a drop (:data:`DROP_DISCONNECTED`, :data:`DROP_CLOSED`, :data:`DROP_LOST_SOCKET`,
        :data:`DROP_MOVING`).
    """
    if sub is None:  # a mode not known here: as ack:auto (broker_settled)
        return HAND_OVER
    ack = sub.ack
    if ack == "auto":  # the broker settled it when it sent it: the application gets it, even now
        return HAND_OVER
    if link_seq and link_seq <= disconnected_seq:
        return DROP_DISCONNECTED
    if sub.closed:
        return DROP_CLOSED
    if not failover:
        return HAND_OVER
    if link_seq and not links.link_alive(link_seq):
        return DROP_LOST_SOCKET
    if moving_seq and link_seq == moving_seq:
        return DROP_MOVING
    if not sub.app_acked:
        return HAND_OVER
    return HAND_OVER_NOTE_CUMULATIVE if ack == "client" else HAND_OVER_NOTE


# ---------------------------------------------------------------- a failed delivery

#: who settles a consumer's messages (what :func:`listener_failed` is asked with)
BY_BROKER = "broker"  # ack:auto (stomp.py), JMS AT_MOST_ONCE
BY_LIBRARY = "library"  # optimized acknowledge: amqstomp ACKs (stomp.py), JMS AUTO_ACKNOWLEDGE / DUPS_OK
BY_APPLICATION = "application"  # client / client-individual (stomp.py), JMS CLIENT_ACKNOWLEDGE
INDIVIDUAL = "individual"  # JMS INDIVIDUAL_ACKNOWLEDGE
TRANSACTED = "transacted"  # JMS SESSION_TRANSACTED

#: the failed message counts as consumed (the window moves on; no ACK from amqstomp)
CONSUMED = "consumed"
#: the failed message again, after the redelivery policy's delay (:func:`after_failure`)
REDELIVER = "redeliver"
#: every message of the consumer handed over and not acknowledged, again (:func:`after_failure` each)
RECOVER = "recover"
#: the session rolls its transaction back (which redelivers)
ROLLBACK = "rollback"

_LISTENER_FAILED = {BY_BROKER: CONSUMED, BY_LIBRARY: REDELIVER, BY_APPLICATION: CONSUMED,
                    INDIVIDUAL: RECOVER, TRANSACTED: ROLLBACK}

#: milliseconds before a message that found no listener is offered again (not counted as a failure)
NO_LISTENER_RETRY_MS = 1000


def listener_failed(settled_by: str) -> str:
    """What a listener that raised (or a delivery no listener took) means for a
    consumer whose messages are settled ``settled_by`` (:data:`BY_BROKER`,
    :data:`BY_LIBRARY`, :data:`BY_APPLICATION`, :data:`INDIVIDUAL`, :data:`TRANSACTED`):
    :data:`CONSUMED`, :data:`REDELIVER`, :data:`RECOVER` or :data:`ROLLBACK`
    (module docstring; JMS 2.0 section 8.7 for the JMS modes).

    Raises:
        ValueError: an unknown ``settled_by``.
    """
    try:
        return _LISTENER_FAILED[settled_by]
    except KeyError:
        raise ValueError("settled_by must be one of %s, got %r"
                         % (", ".join(sorted(_LISTENER_FAILED)), settled_by)) from None


class Redeliver:
    """Action: hand the message to the application again after ``delay_ms``
    milliseconds (local redelivery; no ACK past it meanwhile); ``redelivered``:
    the application saw it (``redelivered:true``, one more delivery counted)."""

    __slots__ = ("delay_ms", "redelivered")

    def __init__(self, delay_ms: int, redelivered: bool) -> None:
        self.delay_ms = delay_ms
        self.redelivered = redelivered

    def __repr__(self) -> str:
        return "Redeliver(delay_ms=%d, redelivered=%r)" % (self.delay_ms, self.redelivered)


class Poison:
    """Action: give the message up -- write ``command`` with ``headers`` on the
    socket that delivered it (never another: see the lost-socket rule), FIRST; then
    count it settled, and only then write the ACK held back for the messages consumed
    around it, naming the newest of those and never the poisoned one (a cumulative ACK
    written before the reject would settle a poisoned message dispatched before the one
    it names; ActiveMQ 5.17 answers an ACK of a NACKed message with ERROR "Unexpected
    ACK"). ``SubscriptionManager.poisoned`` does this for both APIs."""

    __slots__ = ("command", "headers", "reason")

    def __init__(self, command: str, headers: Dict[str, str], reason: str = "") -> None:
        self.command = command
        self.headers = headers
        #: why, for the log line (:func:`poisoned_after`; "" when not told)
        self.reason = reason

    def __repr__(self) -> str:
        return "Poison(%s, %r)" % (self.command, self.headers)


def poison(version: Optional[str], dialect: str, message_headers: Mapping[str, str]) -> Poison:
    """The frame that gives a MESSAGE up (module docstring): NACK with its ACK
    identity (:func:`amqstomp._core.frames.ack_headers`; ActiveMQ's 1.0 quirk
    included) and, on RabbitMQ, ``requeue:false``
    (:func:`amqstomp._core.dialect.reject_headers`); on STOMP 1.0 an ACK
    (``version`` None: 1.2).

    Raises:
        KeyError: the MESSAGE lacks the header its version's identity needs.
    """
    version = version or "1.2"
    command = reject_command(version)
    headers = ack_headers(version, message_headers, dialect == ACTIVEMQ)
    if command == "NACK":
        headers = reject_headers(dialect, headers)
    return Poison(command, headers)


def poisoned_after(deliveries: int, maximum_redeliveries: int) -> str:
    """Why a message is poisoned, for a log line: it was handed to the application
    ``deliveries`` times -- the delivery and ``deliveries - 1`` redeliveries (the
    broker's and this client's: ActiveMQ's ``redeliveryCounter``) -- and failed each
    time, past ``maximumRedeliveries`` (``org.apache.activemq.RedeliveryPolicy``:
    ``maximumRedeliveries=2`` hands a message over 1 + 2 = 3 times, then poisons it)."""
    return "delivered %d times (1 + %d redeliveries, maximumRedeliveries=%d)" % (
        deliveries, deliveries - 1, maximum_redeliveries)


def next_redelivery(delivery_count: int) -> int:
    """The one redelivery count, for every API and acknowledge mode: a hand-over whose
    delivery count was ``delivery_count`` failed, so the next hand-over is redelivery number
    ``delivery_count`` (what :func:`after_failure` is asked with).

    ``delivery_count`` is what the application saw (``frame.delivery_count`` in the stomp.py
    API, ``Message.delivery_count``/JMSXDeliveryCount in the JMS API): 1, + the broker's
    redeliveries before the MESSAGE arrived (``redelivered:true``, or a message-id the
    duplicate audit saw before: ``SubscriptionManager.on_message``), + this client's local
    redeliveries of it so far. The broker's redeliveries count, as in ActiveMQ's Java client,
    which compares the message's ``redeliveryCounter`` -- the broker's, plus one per local
    rollback -- with ``RedeliveryPolicy.maximumRedeliveries``
    (``ActiveMQMessageConsumer.rollback``): a message that already came back from the
    broker has that many fewer local redeliveries left. (Before issue 22 the stomp.py API
    counted only this client's failures of the message-id.) A delivery no listener took is
    no failure: it is offered again without a count (:func:`after_failure` ``error`` False).
    """
    return delivery_count if delivery_count > 1 else 1


def first_delivery_count(seen: int, message_headers: Mapping[str, str]) -> int:
    """The delivery count of a MESSAGE as it arrives, before any local redelivery: ``seen``
    (how many times the consumer's duplicate audit saw its ``message-id``, 1 when not
    audited), at least 2 when the broker marked it ``redelivered:true`` (ActiveMQ sets it
    when its ``redeliveryCounter`` is > 0). What :func:`next_redelivery` counts from."""
    if seen <= 1 and message_headers.get("redelivered") == "true":
        return 2
    return seen if seen > 1 else 1


def after_failure(policy: Any, redelivery: int, error: bool, version: Optional[str], dialect: str,
                  message_headers: Mapping[str, str]) -> Union[Redeliver, Poison]:
    """A message amqstomp settles (:data:`REDELIVER`/:data:`RECOVER`) failed:
    redeliver it locally or poison it.

    Args:
        policy (amqstomp.flow.RedeliveryPolicy): ``exceeded`` / ``delay_ms``.
        redelivery (int): the number of the redelivery this would be (1 = the first):
            :func:`next_redelivery` of the failed hand-over's delivery count.
        error (bool): a listener raised (False: no listener took it -- offered again
            after :data:`NO_LISTENER_RETRY_MS`, never poisoned for it).
        version, dialect, message_headers: for :func:`poison`.

    Returns:
        Redeliver | Poison: the action (a Poison's ``reason``: :func:`poisoned_after`; the
        message was handed over ``redelivery`` times).
    """
    if not error:
        return Redeliver(NO_LISTENER_RETRY_MS, False)
    if policy.exceeded(redelivery):
        action = poison(version, dialect, message_headers)
        action.reason = poisoned_after(redelivery, policy.maximum_redeliveries)
        return action
    return Redeliver(policy.delay_ms(redelivery), True)


# ---------------------------------------------------------------- the application's ACK by identity (stomp.py API)

#: :func:`identity_ack_socket`: refused, nothing written -- the delivery's socket was lost since
#: (``AcknowledgeInterruptedError``; the broker redelivers the message)
ACK_REFUSED_LOST = -1

#: flags of :func:`identity_ack_written`: what the socket ledger notes once the ACK/NACK was written
NOTE_TOOK = 1  # in a transaction: the delivery is taken until it ends (ABORT gives it back)
NOTE_ANSWERED = 2  # ack:client, not an ACK: the delivery leaves the hand-over order
NOTE_COVERED = 4  # ack:client, an ACK (cumulative): it and the earlier deliveries leave the order
NOTE_SETTLED = 8  # outside a transaction, of a message the session held: settled for the duplicate audit


def delivery_answered(seqs: Sequence[int], caller_seq: int) -> int:
    """Which of the outstanding deliveries of one ACK identity an ACK/NACK answers
    (STOMP 1.0/1.1 after a failover: the lost socket's copy and the redelivered one
    share ``message-id`` and ``subscription``).

    Args:
        seqs (sequence of int): the sockets that delivered the identity, oldest first (not empty).
        caller_seq (int): the socket whose dispatching thread makes the ACK (0: another thread).

    Returns:
        int: the index into ``seqs``: the delivery of ``caller_seq`` (the listener it handed
        the message to acknowledges it), else the oldest (the listeners were handed the copies
        in delivery order, so the ACKs of an identity answer them oldest first). Where
        identities never collide (1.2) there is one delivery: 0.
    """
    if caller_seq and len(seqs) > 1 and caller_seq in seqs:
        return seqs.index(caller_seq)
    return 0


def identity_ack_socket(seq: Optional[int], links: Links) -> int:
    """The socket an ACK/NACK of the stomp.py API goes on (it names its message by
    its ACK identity, STOMP 1.2 spec "ACK", not by a delivery): the one that delivered it,
    or nowhere. ``seq``: that socket, as the socket ledger noted it (None: not noted --
    no failover, nothing handed over, or forgotten -- the open socket's).

    Returns:
        int: ``seq`` (0 when None: the open socket), or :data:`ACK_REFUSED_LOST` when
        socket ``seq`` is not the open one (``links.link_alive``): nothing is written.
    """
    if seq is None:
        return 0
    return seq if links.link_alive(seq) else ACK_REFUSED_LOST


def identity_ack_written(command: str, seq: Optional[int], cumulative: bool, transaction: Any,
                         held: bool) -> int:
    """What follows from an ACK/NACK of the stomp.py API that was written.

    Args:
        command (str): ``"ACK"`` or ``"NACK"``.
        seq (int | None): the socket that delivered it (None: not noted by the ledger).
        cumulative (bool): its message is in an ``ack:client`` subscription's hand-over order.
        transaction: its ``transaction`` header's value (None: outside one).
        held (bool): the session's unacked check found the message it names.

    Returns:
        int: flags: :data:`NOTE_SETTLED` (outside a transaction, a message held: the
        duplicate audit's), :data:`NOTE_TOOK` (in a transaction: ABORT gives the delivery
        back), :data:`NOTE_COVERED` (a cumulative ACK: it and the earlier deliveries of the
        subscription leave its order; :func:`not_covered` counts what it misses) or
        :data:`NOTE_ANSWERED` (a NACK in ``ack:client``: that delivery only).
    """
    todo = 0
    if transaction is None:
        if held:
            todo |= NOTE_SETTLED
    elif seq is not None:
        todo |= NOTE_TOOK
    if cumulative and seq is not None:
        todo |= NOTE_COVERED if command == "ACK" else NOTE_ANSWERED
    return todo


def not_covered(taken: Sequence[Tuple[Any, int, str]], seq: int) -> int:
    """How many of the deliveries a cumulative ACK written on socket ``seq`` took
    from its subscription's hand-over order it does not settle: those of another
    (lost) socket whose message has no redelivered copy among the ones of ``seq``
    it covers (ActiveMQ acknowledges a socket's own deliveries only; the broker
    redelivers the others). ``taken``: (identity, socket, ``message-id``) each, in
    hand-over order. 0: the ACK settled all of them."""
    covered_ids = {entry[2] for entry in taken if entry[1] == seq}
    return sum(1 for entry in taken if entry[1] != seq and entry[2] not in covered_ids)
