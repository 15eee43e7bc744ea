"""``FanInConnection``: stomp.py's API over a connection to every broker of a list,
so that one subscription is served by all of them and no message strands on a
broker without consumers (docs/guides/scaling-out.md, "The fan-in consumer")::

    import amqstomp

    conn = amqstomp.FanInConnection("failover:(stomp://a:61613,stomp://b:61613)?maxReconnectDelay=2000")
    conn.set_listener("", MyListener())       # on_message(frame) hears every broker's messages
    conn.connect("admin", "admin")
    conn.subscribe("/queue/orders", id=1, ack="client-individual", prefetch_size=100)
    # in MyListener.on_message: conn.ack(frame.headers["ack"])  -> to the broker that delivered it

It is a composition: per broker an ordinary stomp.py-API connection
(:class:`~amqstomp.connection.StompConnection12` by default; each ``stomp://`` URL
connects once, each ``failover:(x)`` reconnects to its own broker), so each message
is settled on the socket that delivered it by that connection's own rules;
nothing of the protocol is here. The JMS-style API's twin is
:class:`amqstomp.jms.FanInConsumer`; both stand on :mod:`amqstomp._members`.

Why a class of its own and not one with :class:`~amqstomp.spreading.SpreadingConnection`'s
role too: a stomp.py user's ``send`` on a fan-in connection could mean "to every
broker" or "to one"; two classes (as the JMS API's consumer and producer) keep
each method's meaning that of a plain connection's.

Licensed under the Apache License, Version 2.0.
"""
import logging
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ._core.dialect import BROKERS
from ._core.subscriptions import PREFETCH_HEADERS, default_prefetch, prefetch_named
from ._members import split_prefetch
from ._stomppy_members import StompGroup, StompMember
from .exception import (
    AcknowledgeInDoubtError, ConfigurationError, ConnectionClosedException, NotConnectedException,
    ReceiptTimeout, RequiredArgumentError, UnknownMessageError,
)

__all__ = ["FanInConnection", "AmbiguousMessageError", "PREFETCH_HEADERS"]

log = logging.getLogger("amqstomp.fanin")


class AmbiguousMessageError(UnknownMessageError):
    """``ack()``/``nack()`` outside a listener, without ``broker``, of an id that
    more than one broker's connection holds (message-ids are per broker: a topic
    message forwarded over a network of brokers comes from each with the same
    ``message-id``): nothing is sent; pass ``broker=`` (the
    :attr:`~FanInConnection.delivering_broker` the listener saw). A ValueError."""


class FanInConnection(StompGroup):
    """stomp.py's connection API over one connection per broker of ``brokers``.

    Args:
        brokers (str | list[str]): a list of broker URLs (each used as given:
            ``stomp://host:port`` connects once and a broker lost is reported and
            left out; ``failover:(stomp://host:port)?...`` reconnects on its own,
            ``auto_reconnect``), or one ``failover:(a,b,c)?...`` URI, which gives one
            member per broker, each ``failover:(x)?...`` with the URI's options (not
            ``randomize``, ``priorityBackup``, ``priorityURIs``). URI options as the
            command-line client reads them (:func:`amqstomp._target.parse_target`);
            ``jms.userName``/``jms.password`` are ``connect()``'s defaults.
        version (str): ``"1.2"`` (default), ``"1.1"`` or ``"1.0"``: the connection class
            of every member (:class:`~amqstomp.connection.StompConnection12`...).
        **keywords: stomp.py connection keywords for every member (``timeout`` in s,
            ``heartbeats``, ``reconnect_attempts_max``, ``auto_decode``...), over the URL's.

    Telling brokers apart: a listener's callbacks run on a thread of the broker's
    connection that delivered the frame; :attr:`delivering_broker`
    names that broker there (the frame is the broker's as it came, no header
    added). Each broker's messages come in its order; there is no order across
    brokers, and listeners of different brokers run concurrently.

    Raises:
        ConfigurationError, TypeError, ValueError: bad ``brokers`` (a broker listed
            twice, ``rebalanceInterval`` in a failover URI), a URI option stomp.py's
            API does not use, a bad keyword or ``version``.
    """

    def __init__(self, brokers: Union[str, Sequence[str]], version: str = "1.2", **keywords: Any) -> None:
        super().__init__(brokers, version, **keywords)
        self._shares: Dict[str, List[int]] = {}

    def __repr__(self) -> str:
        return "<FanInConnection on %d brokers%s>" % (len(self._members), " closed" if self.closed else "")

    def prefetch_shares(self, id: Any) -> List[int]:
        """Subscription ``id``'s prefetch on each broker (messages), in the order of
        :attr:`brokers`; empty when the brokers chose it (no prefetch header).

        Raises:
            KeyError: no subscription ``id``."""
        return list(self._shares[str(id)])

    # ------------------------------------------------------------ subscriptions

    def subscribe(self, destination: str, id: Any, ack: str = "auto", headers: Optional[Mapping[str, Any]] = None,
                  **keyword_headers: Any) -> None:
        """SUBSCRIBE ``destination`` as ``id`` on every broker not lost (each
        connection's :meth:`~amqstomp.connection.StompConnection11.subscribe`, same
        arguments), with one prefetch budget: ``prefetch_size`` (messages across all
        brokers; default what one subscription would get: the dialect's default for
        the destination's kind, 1000 for an ActiveMQ queue) split by
        :func:`amqstomp._members.split_prefetch` (``total // n`` each, one more for the
        first ``total % n``, at least 1 each). A broker with no prefetch header
        (a generic one) gets none unless ``prefetch_size`` is given; RabbitMQ, whose
        plain subscription sends no ``prefetch-count`` (no limit), gets its share of
        the same default (:class:`amqstomp.flow.PrefetchPolicy`, ActiveMQ 5.17's).
        ``ack='client'`` is cumulative per broker: an ACK covers the earlier
        messages of the broker that delivered it only. All or nothing: when one
        broker's connection refuses, those subscribed are unsubscribed again; a
        ``stomp://`` broker found gone is marked lost and left out instead.

        Raises:
            ConfigurationError: a prefetch header (``activemq.prefetchSize``,
                ``prefetch-count``, ``consumer.prefetchSize``): give the budget as
                ``prefetch_size``; anything a connection's subscribe raises.
            NotConnectedException: ``connect()`` not called yet (no broker is marked
                lost for it), or every broker is lost.
            ValueError, StompException: as a connection's subscribe; the brokers
                subscribed already are unsubscribed again.
        """
        if id is None:
            raise RequiredArgumentError("'id' is required (each broker's MESSAGEs carry it as 'subscription')")
        total = keyword_headers.pop("prefetch_size", None)
        name, given = prefetch_named(destination, headers or {}, keyword_headers)
        if given:
            raise ConfigurationError("%s: a fan-in subscription has one prefetch budget across its brokers; give it "
                                     "as prefetch_size= (messages), which is split over them" % ", ".join(given))
        self._check_connected()
        live = self._live()
        shares = self._split(live, name, headers or {}, total)
        done: List[StompMember] = []
        try:
            for member, share in zip(live, shares):
                extra_kw = dict(keyword_headers)
                if share:
                    extra_kw["prefetch_size"] = share
                try:
                    member.connection.subscribe(destination, id, ack, headers, **extra_kw)
                except NotConnectedException as exc:
                    # a failover member without a new socket within its timeout (the subscription would be
                    # missing there), or one never connected (a call before connect(): no loss): refused
                    if member.failover or not member.up:
                        raise
                    member.mark_lost(exc)  # a stomp:// member that was up, gone: left out, the others go on
                    continue
                done.append(member)
            if not done:
                self._live()  # every broker lost: NotConnectedException
        except BaseException:
            for member in done:
                try:
                    member.connection.unsubscribe(id)
                except Exception as exc:  # the first error is the one raised
                    log.debug("unsubscribing %s from %r again: %s", member.name, id, exc)
            raise
        self._shares[str(id)] = [s for s in shares if s]

    def _split(self, live: List[StompMember], name: str, headers: Mapping[str, Any],
               total: Optional[int]) -> List[int]:
        """Each live member's prefetch (0: none sent)."""
        if total is None:
            with_header = [m for m in live if BROKERS[m.connection.transport.dialect].prefetch]
            if not with_header:
                return [0] * len(live)
            total = default_prefetch(with_header[0].connection.subscriptions.prefetch_policy, name, headers)
            shares = iter(split_prefetch(max(1, int(total)), len(with_header)))
            return [next(shares) if m in with_header else 0 for m in live]
        return split_prefetch(total, len(live))

    def unsubscribe(self, id: Any, headers: Optional[Mapping[str, Any]] = None, **keyword_headers: Any) -> None:
        """UNSUBSCRIBE ``id`` on every broker not lost (each connection's
        ``unsubscribe``); all are tried, the first error raised after.

        Raises:
            UnknownSubscriptionError: no broker's connection has subscription ``id``.
            NotConnectedException: every broker is lost.
            StompException: the first error of a connection's unsubscribe.
        """
        errors: List[BaseException] = []
        for member in self._live():
            try:
                member.connection.unsubscribe(id, headers, **keyword_headers)
            except Exception as exc:  # keep unsubscribing the others
                errors.append(exc)
        self._shares.pop(str(id), None)
        if errors:
            raise errors[0]

    # ------------------------------------------------------------ settling

    def ack(self, id: str, subscription: Any = None, *, receipt: Optional[str] = None,
            broker: Union[str, int, None] = None) -> None:
        """ACK the message ``id`` names (STOMP 1.2: its ``ack`` header; 1.1: its
        ``message-id``, with ``subscription``; 1.0: its ``message-id``) on the
        connection of the broker that delivered it, by that connection's rules
        (:meth:`amqstomp.connection.StompConnection12.ack`): which broker:

        1. ``broker`` (a name of :attr:`brokers`, or its index), when given;
        2. in a listener, the broker whose connection's thread calls, if it holds that
           message (the frame at hand came from it);
        3. else the one broker whose connection holds that message delivered and not
           acknowledged (each connection keeps that record: ``subscriptions.holds``);
           held by more than one (message-ids are per broker: a collision),
           :class:`AmbiguousMessageError`, nothing sent;
        4. held by none: the connections are asked in turn and answer by their own
           rules (a message of a lost socket: AcknowledgeInterruptedError); one whose
           record is off (``holds`` None: a MESSAGE of a SUBSCRIBE it did not make, or
           more than 131072 unacknowledged) is asked first and writes it, as a plain
           connection then would.

        With ``receipt`` it returns only once that broker's RECEIPT came.

        Raises:
            AmbiguousMessageError: see 3 (a ValueError).
            UnknownMessageError: no broker's connection holds it (nothing sent).
            AcknowledgeInterruptedError: it came on a socket lost since (failover):
                nothing sent; the broker redelivers it.
            AcknowledgeInDoubtError: written, and no RECEIPT within the connection's
                ``timeout`` (or 30 s), or the socket was lost first.
            NotConnectedException: every broker is lost.
            ValueError: ``broker`` names no member; no ``subscription`` on STOMP 1.1.
        """
        self._settle("ACK", id, subscription, receipt, broker, {})

    def nack(self, id: str, subscription: Any = None, *, receipt: Optional[str] = None,
             broker: Union[str, int, None] = None, **keyword_headers: Any) -> None:
        """NACK (STOMP 1.1/1.2; on ActiveMQ the message goes to its DLQ), routed as :meth:`ack`.

        Raises:
            as :meth:`ack`; NotImplementedError on STOMP 1.0 (no NACK).
        """
        if self.version == "1.0":
            raise NotImplementedError("STOMP 1.0 has no NACK")
        self._settle("NACK", id, subscription, receipt, broker, keyword_headers)

    def _identity(self, id: str, subscription: Any) -> Dict[str, Any]:
        if id is None:
            raise RequiredArgumentError("'id' is required")
        if self.version == "1.2":
            return {"id": id}
        if self.version == "1.1":
            if subscription is None:
                raise RequiredArgumentError("'id' and 'subscription' are required (STOMP 1.1)")
            return {"message-id": id, "subscription": subscription}
        return {"message-id": id}

    def _settle(self, command: str, id: str, subscription: Any, receipt: Optional[str],
                broker: Union[str, int, None], keyword_headers: Dict[str, Any]) -> None:
        identity = self._identity(id, subscription)
        if broker is not None:
            self._settle_on(self._member_named(broker), command, id, subscription, receipt, keyword_headers)
            return
        live = self._live()
        held = {m: m.connection.subscriptions.holds(identity) for m in live}
        holders = [m for m in live if held[m]]
        mine = self._member_of_thread()
        if mine is not None and mine in holders:
            holders = [mine]
        if len(holders) > 1:
            raise AmbiguousMessageError(
                "%s of %s: held by %d brokers (%s): pass broker= (the delivering_broker of its listener); nothing "
                "sent" % (command, ", ".join(str(v) for v in identity.values()), len(holders),
                          ", ".join(m.name for m in holders)))
        if holders:
            self._settle_on(holders[0], command, id, subscription, receipt, keyword_headers)
            return
        # held by none: each connection answers by its own rules (nothing written where it refuses)
        order = ([mine] if mine is not None else []) + [m for m in live if m is not mine and held[m] is None] \
            + [m for m in live if m is not mine and held[m] is not None]
        for member in order:
            try:
                self._settle_on(member, command, id, subscription, receipt, keyword_headers)
                return
            except (UnknownMessageError, NotConnectedException):
                continue
        raise UnknownMessageError("%s of %s: no broker's connection holds that message (never delivered, or "
                                  "acknowledged already); nothing sent" % (command, ", ".join(
                                      str(v) for v in identity.values())))

    def _settle_on(self, member: StompMember, command: str, id: str, subscription: Any, receipt: Optional[str],
                   keyword_headers: Dict[str, Any]) -> None:
        conn = member.connection
        method = conn.ack if command == "ACK" else conn.nack
        if self.version == "1.1":
            method(id, subscription, receipt=receipt, **keyword_headers)
        else:
            method(id, receipt=receipt, **keyword_headers)
        if receipt is None:
            return
        try:
            conn.wait_for_receipt(receipt, member.wait_s)
        except (ReceiptTimeout, ConnectionClosedException) as exc:
            raise AcknowledgeInDoubtError("%s of %s written to %s, no RECEIPT: the broker may or may not have "
                                          "applied it (%s)" % (command, id, member.name, exc)) from exc
