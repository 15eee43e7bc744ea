"""The acknowledge modes: how a consumer's messages are settled -- the one
parameter of the acknowledgement machine (:mod:`amqstomp._core.acks`, the
window's rules; :mod:`amqstomp._core.settle`, what a failed listener means) by
which the APIs differ on purpose -- and the decisions of the JMS modes that
read no subscription's state: the window's ack-batching options
(:func:`window_options`), the application's ACK (:func:`application_ack`),
the ACKs in a transaction (:func:`in_transaction_ack`) and the local
redelivery with its poison (:func:`redeliver`).

Pure (no socket, thread, lock, clock or asyncio): values in, actions out. The
JMS sessions apply them (``jms/consumer.py``, ``jms/_subscriber.py``,
``jms/_transaction.py``) with their threads, the session's condition and the
consumer socket. (A module of its own, not a part of ``acks.py``: the stomp.py
API's processes do not load it, and only a subscription's owner uses ``acks``.)

The rules (JMS 2.0 section 6.2.10; ActiveMQ 5.17 ``ActiveMQMessageConsumer``,
``ActiveMQSession``, ``RedeliveryPolicy``; DESIGN.md section 2):

* AUTO_ACKNOWLEDGE / DUPS_OK_ACKNOWLEDGE: amqstomp acks, one cumulative ACK per
  batch (optimized acknowledge), DUPS_OK with the lazier deadline; a failed
  listener's message is redelivered locally, then poisoned;
* AT_MOST_ONCE (browsers too): ``ack:auto``, the broker settled it when it sent it;
* CLIENT_ACKNOWLEDGE: ``acknowledge()`` writes ONE cumulative ACK per consumer,
  naming the newest message handed over on the open socket; on a broker whose
  window grows on an ACK in a transaction (ActiveMQ Classic) the messages handed
  over are ACKed every batch in the session's private "delivered" transaction,
  which ``acknowledge()`` commits (:func:`acks_in_transaction`);
* INDIVIDUAL_ACKNOWLEDGE: ``client-individual``, one ACK per message;
* SESSION_TRANSACTED: cumulative ACKs in the transaction, every batch (the broker
  counts them delivered and keeps dispatching) and the rest at COMMIT.

Licensed under the Apache License, Version 2.0.
"""
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .settle import (BY_APPLICATION, BY_BROKER, BY_LIBRARY, INDIVIDUAL, TRANSACTED, Poison, after_failure,
                     next_redelivery)

__all__ = ["AckMode", "AppAck", "Redelivery", "JMS_AUTO", "JMS_AT_MOST_ONCE", "JMS_CLIENT", "JMS_DUPS_OK",
           "JMS_INDIVIDUAL", "JMS_TRANSACTED", "acks_in_transaction", "application_ack", "individual_ack",
           "in_transaction_ack", "redeliver",
           "window_options"]



class AckMode:
    """How a consumer's messages are settled: the parameter by which the APIs' rules
    differ on purpose (JMS 2.0 section 6.2.10 acknowledge modes, ActiveMQ 5.17
    ``ActiveMQMessageConsumer``; the stomp.py API's STOMP ``ack`` header). Frozen values;
    the JMS modes are the module constants (:data:`JMS_AUTO`...); a stomp.py-API
    subscription's is read off it (:func:`amqstomp._core.acks.settled_by`,
    :func:`~amqstomp._core.acks.application_acks`).

    Attributes:
        name (str): for messages (the JMS constant's name, or the STOMP ``ack`` mode).
        stomp_ack (str): the SUBSCRIBE's ``ack`` header: ``auto``, ``client`` or ``client-individual``.
        settled_by (str): who settles (:data:`~amqstomp._core.settle.BY_BROKER`, ``BY_LIBRARY``,
            ``BY_APPLICATION``, ``INDIVIDUAL``, ``TRANSACTED``): what a failed listener means
            (:func:`amqstomp._core.settle.listener_failed`). The one rule where the APIs differ:
            a stomp.py ``client-individual`` listener that raised leaves its message consumed
            (``BY_APPLICATION``, ``acks.settled_by``: the application ACKs or NACKs it); a JMS
            ``INDIVIDUAL_ACKNOWLEDGE`` one gets every unacknowledged message again (``INDIVIDUAL``).
            How often a message was redelivered is no parameter: one count for every mode and
            API, the broker's redeliveries included (:func:`amqstomp._core.settle.next_redelivery`).
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
    def individual(self) -> bool:
        """One ACK per message (INDIVIDUAL_ACKNOWLEDGE): a message's ``acknowledge()`` acks
        that one, and a message the consumer skips (``no_local``, expired) is acked by
        amqstomp at once (the cumulative modes' next ACK covers it; the untracked ones
        count it consumed)."""
        return self.tracked and not self.cumulative

    @property
    def acknowledges_all(self) -> bool:
        """The application's ``acknowledge()`` (JMS ``Session.acknowledge``, any message's)
        acks every message handed over so far with one cumulative ACK per consumer
        (:func:`application_ack`): CLIENT_ACKNOWLEDGE; elsewhere it does nothing but
        INDIVIDUAL's, which acks its one message."""
        return self.tracked and self.cumulative and not self.transacted

    @property
    def recovers_current(self) -> bool:
        """``recover()`` called from a listener puts the message it runs for back too:
        amqstomp settles it once the listener returned (AUTO/DUPS_OK), so it is not
        settled yet; in the tracked modes it is among those handed over already."""
        return self.settled_by == BY_LIBRARY

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


def individual_ack(delivery: Any, lost: bool) -> AppAck:
    """:func:`application_ack` of INDIVIDUAL_ACKNOWLEDGE's one message, ``delivery``, whose
    lost-socket rule the caller applied (``lost``: it came on a socket lost since): the same
    action, without a list and a predicate call per acknowledgement."""
    if lost:
        return AppAck(None, [], False, 1)
    return AppAck(delivery, [delivery], False, 0)


def in_transaction_ack(delivered: int, acked: int, threshold: int) -> int:
    """Transacted (:attr:`AckMode.transacted`): of the ``delivered`` messages handed over
    in the open transaction, an ACK in it covers ``acked`` already. Returns how many
    messages an ACK in the transaction naming the newest one covers now, or 0: once
    ``threshold`` (messages) are pending -- every batch, so the broker, which counts
    ACKs in a transaction as delivered, keeps dispatching in a long transaction --, and
    at COMMIT with ``threshold`` 1 (whatever is pending)."""
    pending = delivered - acked
    return pending if pending >= max(1, threshold) else 0


def acks_in_transaction(mode: AckMode, window_grows_in_tx: bool) -> bool:
    """Whether a consumer in ``mode`` ACKs the messages it handed over inside a
    transaction every batch (:func:`in_transaction_ack`), so that the broker keeps
    dispatching past the prefetch before they are settled:

    * SESSION_TRANSACTED: always (its own transaction; the rest at COMMIT);
    * CLIENT_ACKNOWLEDGE, when ``window_grows_in_tx`` (the broker dialect's
      :attr:`~amqstomp._core.dialect.Dialect.window_grows_in_tx`: ActiveMQ Classic):
      in the session's private "delivered" transaction, which ``acknowledge()``
      COMMITs and ``recover()`` / close ABORT -- the STOMP form of the Java
      client's DELIVERED acks, sent once about half the prefetch is delivered and
      not acknowledged (ActiveMQ 5.17 ``ActiveMQMessageConsumer.afterMessageIsConsumed``,
      ``deliveredCounter``). On other brokers an ACK in a transaction need not
      grow the window (RabbitMQ), so CLIENT_ACKNOWLEDGE writes nothing before
      ``acknowledge()`` and a consumer holds at most its prefetch unacknowledged;
    * the other modes: never.
    """
    return mode.transacted or (mode.acknowledges_all and window_grows_in_tx)


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
    ``redeliveryCounter`` + 1). Each is redelivered or, past ``policy.maximum_redeliveries``,
    poisoned: the one count of every API (:func:`amqstomp._core.settle.next_redelivery`,
    :func:`~amqstomp._core.settle.after_failure`); the delay is the redelivery
    policy's for the first one kept. Deliveries of a lost socket are the caller's to drop
    first (the broker redelivers them)."""
    again: List[Any] = []
    poisoned_: List[Tuple[Any, Poison]] = []
    delay_ms = 0
    for delivery in deliveries:
        action = after_failure(policy, next_redelivery(delivery.delivery_count), True, version, dialect,
                               delivery.frame.headers)
        delivery.redeliveries += 1
        if isinstance(action, Poison):
            poisoned_.append((delivery, action))
        else:
            if not again:
                delay_ms = action.delay_ms
            again.append(delivery)
    return Redelivery(again, poisoned_, delay_ms)
