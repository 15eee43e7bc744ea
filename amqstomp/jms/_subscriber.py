"""``Subscriber``: the STOMP side of one :class:`~amqstomp.jms.MessageConsumer`
-- its subscription on the connection's consumer link (SUBSCRIBE with its
RECEIPT, over failover too; UNSUBSCRIBE), its prefetch window, and the
ACK / NACK frames its messages are settled with.

A consumer of the connection's own temporary queue on RabbitMQ sends no
SUBSCRIBE (RabbitMQ takes ``/temp-queue/x`` only as a SEND's ``reply-to``):
the replies come on the subscription the broker makes for the connection at
the first such SEND, named ``/temp-queue/x`` and acked by the broker
(:func:`is_reply_subscription`); the consumer registers under that id, with
``ack:auto`` (its session's acknowledge mode does not apply), and is never
replayed or UNSUBSCRIBEd.

Licensed under the Apache License, Version 2.0.
"""
import logging
import time
from typing import Any, Dict, List, Optional

from ..codec import Frame
from ..exception import ConnectionClosedException, ReceiptTimeout, StompException
from .._core.dialect import BROKERS
from .._core.duplicates import DUPLICATE_ACK, DUPLICATE_HAND_OVER, DUPLICATE_WITH_NEXT, NOT_DUPLICATE
from .._core import ackmodes
from .._core.ackmodes import AckMode
from .._core.settle import BY_BROKER, Poison, Subscribed
from ..flow import optimized_ack_threshold
from .._engine.subscription import Subscription
from .._core.subscriptions import consumer_headers, policy_prefetch
from ._state import ConsumerLedger, Delivery, SessionState
from .constants import (
    AT_MOST_ONCE,
    AUTO_ACKNOWLEDGE,
    CLIENT_ACKNOWLEDGE,
    DUPS_OK_ACKNOWLEDGE,
    INDIVIDUAL_ACKNOWLEDGE,
    SESSION_TRANSACTED,
)
from .destination import Destination
from .exceptions import BrowseInterruptedError, IllegalStateError
from .link import message_ack_headers

__all__ = ["ACK_MODES", "Subscriber", "check_selector", "is_reply_subscription"]

log = logging.getLogger("amqstomp.jms.consumer")

#: the acknowledgement core's rules (:class:`amqstomp._core.ackmodes.AckMode`) of each acknowledge mode
ACK_MODES: Dict[int, AckMode] = {
    AUTO_ACKNOWLEDGE: ackmodes.JMS_AUTO, DUPS_OK_ACKNOWLEDGE: ackmodes.JMS_DUPS_OK, AT_MOST_ONCE: ackmodes.JMS_AT_MOST_ONCE,
    CLIENT_ACKNOWLEDGE: ackmodes.JMS_CLIENT, INDIVIDUAL_ACKNOWLEDGE: ackmodes.JMS_INDIVIDUAL,
    SESSION_TRANSACTED: ackmodes.JMS_TRANSACTED}

_PREFETCH_OPTIONS = ("prefetch_all", "queue_prefetch", "queue_browser_prefetch", "durable_topic_prefetch",
                     "topic_prefetch")


def check_selector(selector: Any) -> None:
    """Refuse a selector that is not a str (or None) before anything is sent: the
    broker would answer with an ERROR that does not name the argument.

    Raises:
        TypeError: ``selector`` is neither a str nor None.
    """
    if selector is not None and not isinstance(selector, str):
        raise TypeError("selector must be a JMS selector (str) or None, got %r" % (selector,))


def is_reply_subscription(link: Any, sub_id: str) -> bool:
    """True for a subscription the broker made itself for the replies to a
    temporary queue (RabbitMQ: id ``/temp-queue/x``): never SUBSCRIBEd,
    UNSUBSCRIBEd nor replayed (see the module docstring)."""
    return sub_id.startswith("/temp-queue/") and BROKERS[link.dialect].temp_reply_only


class Subscriber:
    """The subscription of one consumer (made by it; see the module docstring).

    Args:
        state (SessionState): the consumer's session.
        consumer: the consumer (what the connection routes this subscription's
            MESSAGEs to; see :meth:`ConnectionState.register_consumer`).
        ledger (ConsumerLedger): the consumer's (its ``closed`` flag).
        destination (Destination), selector (str | None), no_local (bool),
        durable_name (str | None), browser (bool), transformation (str | None):
            what SUBSCRIBE says.
        mode (int): the acknowledge mode (AT_MOST_ONCE: ``ack:auto``).

    Attributes (besides those):
        ack_mode (AckMode): the acknowledgement core's rules of ``mode`` (:data:`ACK_MODES`).

    Attributes:
        link (Link): the connection's consumer link.
        sub_id (str): the subscription id (a new one after :meth:`renew_id`).
        sub (Subscription | None): the manager's subscription, once registered.
        tx_threshold (int): ACK in a transaction every that many messages (see ``acks_in_tx``).
        acks_in_tx (bool): it ACKs what it handed over in a transaction every
            ``tx_threshold`` messages (:func:`amqstomp._core.ackmodes.acks_in_transaction`:
            transacted; CLIENT_ACKNOWLEDGE on ActiveMQ Classic), known once subscribed.
        browse_seq (int | None): a browse: the socket (``transport.link_seq``)
            whose RECEIPT started it; None until it came.
        browse_lost (bool): a browse that a failover dropped (it is not replayed).
    """

    def __init__(self, state: SessionState, consumer: Any, ledger: ConsumerLedger, destination: Destination,
                 selector: Optional[str], no_local: bool, durable_name: Optional[str], browser: bool,
                 transformation: Optional[str], mode: int) -> None:
        connection = state.connection
        self.state = state
        self.consumer = consumer
        self.ledger = ledger
        self.connection = connection
        self.link = connection.consumer_link
        self.destination = destination
        self.selector = selector
        self.no_local = no_local
        self.durable_name = durable_name
        self.browser = browser
        self.transformation = transformation
        self.mode = mode
        self.ack_mode = ACK_MODES[mode]
        #: the STOMP ack mode of its SUBSCRIBE
        self.ack = self.ack_mode.stomp_ack
        #: what the settlement core's hand-over rule reads of it (the consumer settles on its own close)
        self.subscribed = Subscribed(self.ack)
        self.sub_id = ""
        self.renew_id()
        self.sub: Optional[Subscription] = None
        self.tx_threshold = 1
        self.acks_in_tx = self.ack_mode.transacted
        self.browse_seq: Optional[int] = None
        self.browse_lost = False

    def __repr__(self) -> str:  # log lines name the consumer
        return repr(self.consumer)

    def renew_id(self) -> None:
        """Take a new subscription id (``C.S.N``: connection, session, a number)."""
        connection = self.connection
        self.sub_id = "%d.%d.%d" % (connection.number, self.state.number, connection.next_id())

    # ------------------------------------------------------------ subscribe

    def subscribe_options(self) -> Dict[str, Any]:
        """The SubscriptionManager options of this subscription (ack batching, prefetch)."""
        out = ackmodes.window_options(self.ack_mode, self.connection.options)
        given = self.connection.factory.resolved.given
        if any(name in given for name in _PREFETCH_OPTIONS) and "consumer.prefetchSize" not in self.destination.options:
            manager = self.link.manager
            assert manager is not None
            out["prefetch_size"] = policy_prefetch(manager.prefetch_policy, self.destination.stomp_name,
                                                   durable=self.durable_name is not None, browser=self.browser)
        return out

    def subscribe(self, wait_s: Optional[float] = -1.0, timeout_s: Optional[float] = None) -> None:
        """Register the subscription with the link's SubscriptionManager, then send
        SUBSCRIBE and wait for its RECEIPT: ``timeout_s`` seconds (the caller's),
        or the connection's ``request_timeout_s`` (``jms.sendTimeout``, else
        ``jms.closeTimeout``) when None.

        Over failover the registration comes first, so a reconnect that starts
        after it replays the subscription (``ConnectionState.on_link_resumed``); the
        SUBSCRIBE itself waits for a socket that is up and not being replayed
        (``wait_s`` seconds; -1: the same bound as the RECEIPT, in all; None: as
        long as the failover lasts -- the URI's ``timeout``, the connection's
        close or the reconnect giving up end it) and is sent again on the new
        socket when the socket it went on is lost before the RECEIPT, unless the
        reconnect replayed it meanwhile.

        Raises:
            BrokerError: the broker refused the SUBSCRIBE (also on replay).
            ReceiptTimeout: no RECEIPT within the bound (a stalled broker); the
                consumer is not made, and an UNSUBSCRIBE follows the SUBSCRIBE (a
                broker that was only slow gives back what it dispatched to it).
            ConnectionClosedException / NotConnectedException: the connection is
                gone, or no new socket came within the wait.
            IllegalStateError: the consumer was closed meanwhile.
            BrowseInterruptedError: a browse whose socket was lost before its
                RECEIPT (browses are not replayed).
            ConfigurationError: headers the broker does not support.
        """
        link = self.link
        manager = link.manager
        assert manager is not None
        ack = self.ack
        headers = consumer_headers(link.dialect, link.server, self.selector, self.no_local, self.durable_name,
                                   self.browser, self.transformation)
        reply_only = self.destination.is_temporary and BROKERS[link.dialect].temp_reply_only
        if reply_only:  # RabbitMQ: see the module docstring
            self.sub_id = self.destination.stomp_name
        frame_headers, sub = manager.prepare(self.destination.subscribe_name, self.sub_id, ack, headers,
                                             self.subscribe_options(), link.connect_timeout_s)
        self.sub = sub
        if reply_only:
            self.connection.register_consumer(self.sub_id, self.consumer)
            return
        self.tx_threshold = optimized_ack_threshold(sub.window.prefetch, cap=int(
            self.connection.options.get("ack_batch_cap") or 100))
        self.acks_in_tx = ackmodes.acks_in_transaction(self.ack_mode, BROKERS[link.dialect].window_grows_in_tx)
        self.connection.register_consumer(self.sub_id, self.consumer)  # messages may follow SUBSCRIBE at once
        if timeout_s is None:
            timeout_s = self.connection.request_timeout_s
        try:
            # ActiveMQ starts dispatching only after it sent this RECEIPT
            if link.reconnector is None:
                seq = link.transport.link_seq
                link.client.subscribe_gated(frame_headers, link.client.subscribe_receipt("subscribe", self.sub_id),
                                            timeout_s, "SUBSCRIBE receipt")
                if self.browser:
                    self.browse_seq = seq
            else:
                self._subscribe_over_failover(frame_headers, sub, timeout_s if wait_s == -1.0 else wait_s, timeout_s)
        except BaseException as exc:
            sub_id = self.sub_id
            self.connection.unregister_consumer(sub_id)
            manager.discard(sub_id)
            if isinstance(exc, ReceiptTimeout):
                self.cancel_late_subscribe()
            raise

    def cancel_late_subscribe(self) -> None:
        """After a SUBSCRIBE's RECEIPT timed out: UNSUBSCRIBE it, written without
        waiting (deferred). A broker that was only slow (stalled) handles it after
        the SUBSCRIBE: messages it dispatched to the consumer nobody holds go back
        to the queue instead of waiting there until the connection closes."""
        try:
            self.link.transport.send_frame("UNSUBSCRIBE", {"id": self.sub_id}, None, None, True)
        except StompException as exc:
            log.debug("%r: UNSUBSCRIBE after the SUBSCRIBE timed out not sent: %s", self, exc)

    def _subscribe_over_failover(self, frame_headers: Dict[str, Any], sub: Subscription,
                                 wait_s: Optional[float], receipt_s: float) -> None:
        """The SUBSCRIBE of a registered subscription on a failover link (see
        :meth:`subscribe`): the engine's receipt-gated SUBSCRIBE over failover
        (:meth:`amqstomp._engine.client.Client.subscribe`); returns once a RECEIPT
        came for it on the current socket, either for this SUBSCRIBE or for the
        reconnect's replay of it. A browse is not replayed: its consumer sends it
        again on the new socket (``replayed=False``)."""
        link = self.link
        deadline = None if wait_s is None else time.monotonic() + wait_s

        def vanished() -> BaseException:
            if self.browser:  # browses are not replayed
                return BrowseInterruptedError("browse of %s interrupted by a failover; iterate again"
                                              % (self.destination,))
            if self.ledger.closed:
                return IllegalStateError("%r was closed while subscribing" % (self,))
            return ConnectionClosedException("%r: the subscription was dropped during a failover (refused on "
                                             "replay)" % (self,))

        self.sub, seq = link.client.subscribe(link.manager, sub, frame_headers,
                                              lambda what, cause: link.await_up(deadline, what), receipt_s,
                                              deadline, "subscribe", vanished, replayed=not self.browser)
        if self.browser and seq:
            self.browse_seq = seq

    def unsubscribe(self) -> None:
        """Unregister the subscription and UNSUBSCRIBE (waiting for the RECEIPT,
        at most ``close_timeout_ms``; a failure is logged, not raised)."""
        connection = self.connection
        connection.unregister_consumer(self.sub_id)
        manager = self.link.manager
        assert manager is not None
        if not self.link.transport.is_connected() or is_reply_subscription(self.link, self.sub_id):
            manager.discard(self.sub_id)
            return
        if self.browser and (self.browse_lost or self.browse_seq != self.link.transport.link_seq):
            manager.discard(self.sub_id)
            return  # browses are not replayed: the broker has no such subscription on this socket
        # closing it also resumes reading if its full buffer was what paused it (and no
        # other subscription's is full): the manager owns pause and resume
        manager.close(self.sub_id, write_timeout=connection.close_wait_s())
        try:
            self.link.request("UNSUBSCRIBE", {"id": self.sub_id}, connection.close_wait_s(), "UNSUBSCRIBE")
        except StompException as exc:
            log.debug("%r: UNSUBSCRIBE: %s", self, exc)

    # ------------------------------------------------------------ window and acks

    def count(self, delivery: Delivery) -> None:
        """The application had ``delivery``: count it consumed in the prefetch
        window (the manager sends AUTO_ACKNOWLEDGE's batched ACKs)."""
        delivery.counted = True
        manager = self.link.manager
        assert manager is not None
        manager.on_consumed(delivery.frame)

    def send_ack(self, frame: Frame, transaction: Optional[str] = None) -> None:
        """ACK ``frame`` on the socket that delivered it.

        Raises:
            AcknowledgeInterruptedError: that socket was lost (failover): the
                broker redelivers the message.
            AcknowledgeInDoubtError: ``jms.sendAcksAsync=false``: written, no
                RECEIPT (socket lost or timeout): the broker may have applied it.
            ConnectionClosedException: the connection is closed (no failover).
            BrokerError: ``jms.sendAcksAsync=false`` only.
        """
        headers = message_ack_headers(self.link, frame.headers)
        if transaction is not None:
            headers["transaction"] = transaction
        self.link.acknowledge("ACK", headers, frame.link_seq, self.connection.ack_receipt_timeout_s)

    def duplicate(self, sub: Subscription, delivery: Delivery) -> bool:
        """Session thread: a delivery of a message settled here before: the duplicates core's
        verdict (:func:`amqstomp._core.duplicates.duplicate`) applied; True: not handed over
        (the consumer's ``delivered`` is what its next ``acknowledge()``/``commit()`` settles)."""
        manager = self.link.manager
        assert manager is not None
        outstanding = self.state.delivered_count(self.ledger) > 0
        verdict = manager.duplicate_of(sub, delivery.frame, outstanding, next_ack_names_newest=True)
        if verdict == NOT_DUPLICATE or verdict == DUPLICATE_HAND_OVER:
            return False
        if not delivery.counted:
            self.count(delivery)  # its place in the window (AUTO_ACKNOWLEDGE: the batched ACK)
        if verdict == DUPLICATE_WITH_NEXT:  # settled with the outstanding ones
            self.state.track(self.ledger, delivery)
        elif verdict == DUPLICATE_ACK:
            try:
                self.send_ack(delivery.frame)
            except StompException as exc:  # its socket is gone: the broker delivers it again
                log.debug("%r: ACK of duplicate %s not sent: %s", self, delivery.frame.headers.get("message-id"), exc)
            else:
                self.window_acked(cumulative=sub.ack == "client")
        return True

    def settled(self, deliveries: List[Delivery]) -> None:
        """``deliveries`` were settled (their ACK or COMMIT written): into the duplicate audit
        (:mod:`amqstomp._core.duplicates`)."""
        sub = self.current_sub()
        if sub is not None and sub.settled is not None and self.link.manager is not None:
            self.link.manager.record_settled(sub, [d.frame.headers.get("message-id") for d in deliveries])

    def current_sub(self) -> Optional[Subscription]:
        """This consumer's subscription; after a failover replayed it, the new one."""
        sub = self.sub
        if sub is not None and sub.closed and self.link.manager is not None:
            fresh = self.link.manager.get(self.sub_id)
            if fresh is not None and not fresh.closed:
                self.sub = sub = fresh
        return sub

    def window_acked(self, cumulative: bool) -> None:
        """An ACK of the application's went out: free the prefetch window (one
        message, or all consumed ones when ``cumulative``)."""
        sub = self.current_sub()
        manager = self.link.manager
        if sub is not None and manager is not None:
            manager.application_acked(sub, cumulative)

    def poison(self, delivery: Delivery, action: Poison) -> None:
        """Past maximum_redeliveries: write the settlement core's reject frame
        (``action``, :func:`amqstomp._core.settle.poison`: NACK; ActiveMQ moves it
        to the DLQ; on RabbitMQ with ``requeue:false``: dead-lettered, or dropped
        without a dead-letter exchange)."""
        if self.ack_mode.settled_by == BY_BROKER:  # pragma: no cover - AT_MOST_ONCE: never redelivered
            return
        frame = delivery.frame
        link = self.link
        log.warning("%r: message %s poisoned: %s (%s: the broker's dead-letter queue)", self,
                    frame.headers.get("message-id"), action.reason or "past maximumRedeliveries", action.command)
        try:
            link.acknowledge(action.command, action.headers, frame.link_seq)
        except StompException as exc:
            log.debug("%r: %s not sent: %s", self, action.command, exc)
        sub = self.current_sub()
        if sub is not None and link.manager is not None:  # settled: the window counts it, ACKs held back go
            link.manager.poisoned(sub, frame, delivery.counted)
        delivery.counted = True

