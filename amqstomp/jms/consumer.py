"""``MessageConsumer``: one STOMP subscription on the connection's consumer
socket, with its local buffer and its local redelivery.

The reader thread counts each MESSAGE in the subscription's prefetch window
(:class:`amqstomp.subscription.SubscriptionManager`) and appends it to the
consumer's buffer; the session's thread (listener) or the caller of
``receive()`` takes it from there. When the application had the message, the
consumer tells the manager (``on_consumed``), which sends AUTO_ACKNOWLEDGE's
batched ACKs; the other modes' ACKs are sent here.

Licensed under the Apache License, Version 2.0.
"""
import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional

from ..codec import Frame
from ..exception import (
    AcknowledgeInterruptedError,
    BrokerError,
    ConfigurationError,
    ConnectionClosedException,
    NotConnectedException,
    ReceiptTimeout,
    StompException,
)
from ..flow import optimized_ack_threshold
from ..subscription import Subscription
from ..uri import destination_kind
from ..utils import clamp_wait
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
from .message import Message, message_from_frame

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

__all__ = ["MessageConsumer"]

log = logging.getLogger("amqstomp.jms")

MessageListener = Callable[[Message], Any]

_PREFETCH_OPTIONS = ("prefetch_all", "queue_prefetch", "queue_browser_prefetch", "durable_topic_prefetch",
                     "topic_prefetch")


class _Delivery:
    """One MESSAGE in a consumer's hands: the frame, its arrival number, how often
    this client redelivered it, and whether the prefetch window counted it consumed."""

    __slots__ = ("frame", "seq", "redeliveries", "counted")

    def __init__(self, frame: Frame, seq: int) -> None:
        self.frame = frame
        self.seq = seq
        self.redeliveries = 0
        self.counted = False

    @property
    def delivery_count(self) -> int:
        return int(getattr(self.frame, "delivery_count", 1) or 1) + self.redeliveries


class MessageConsumer:
    """Made by :meth:`Session.create_consumer`.

    Attributes:
        destination (Destination), selector (str | None), no_local (bool).
    """

    def __init__(self, session: "Session", destination: Destination, selector: Optional[str],
                 no_local: bool, durable_name: Optional[str] = None, browser: bool = False,
                 transformation: Optional[str] = None, mode: Optional[int] = None) -> None:
        connection = session.connection
        self._session = session
        self._connection = connection
        self._link = connection.consumer_link
        self.destination = destination
        self.selector = selector
        self.no_local = no_local
        #: the durable subscription's name (``activemq.subscriptionName``), or None
        self.durable_name = durable_name
        self._browser = browser
        self._transformation = transformation
        self._mode = session.acknowledge_mode if mode is None else mode
        self._buffer: Deque[_Delivery] = deque()
        self._delivered: List[_Delivery] = []  # handed over, not yet acked (client / individual / transacted)
        self._tx_acked = 0  # how many of _delivered an ACK in the open transaction covers
        self._paused_until = 0.0
        self._listener: Optional[MessageListener] = None
        self._closed = False
        self._sub_id = "%d.%d.%d" % (connection.number, session.number, connection.next_id())
        self._sub: Optional[Subscription] = None
        self._tx_threshold = 1
        #: browser: the consumer socket (transport link_seq) the browse is on; 0 before its RECEIPT
        # the socket (link_seq) whose RECEIPT started this browse; None until it came
        self._browse_seq: Optional[int] = None
        #: browser: a failover dropped the browse (it is not replayed; the iteration raises)
        self._browse_lost = False

    def __repr__(self) -> str:
        return "<jms.MessageConsumer %s on %s%s>" % (self._sub_id, self.destination,
                                                      " closed" if self._closed else "")

    @property
    def subscription_id(self) -> str:
        return self._sub_id

    # ------------------------------------------------------------ subscribe

    def _subscribe_options(self) -> Dict[str, Any]:
        options = self._connection.options
        out: Dict[str, Any] = {}
        if self._mode in (AUTO_ACKNOWLEDGE, DUPS_OK_ACKNOWLEDGE):
            out["optimize_acknowledge"] = True
            # optimize_acknowledge=False: one ACK per consumed message
            out["ack_batch_cap"] = int(options["ack_batch_cap"]) if options.get("optimize_acknowledge") else 1
            if self._mode == DUPS_OK_ACKNOWLEDGE:
                lazy = int(options["dups_ok_ack_timeout_ms"])
                out["optimize_acknowledge_timeout_ms"] = lazy
                out["idle_ack_ms"] = lazy
            else:
                out["optimize_acknowledge_timeout_ms"] = int(options["optimize_acknowledge_timeout_ms"])
                out["idle_ack_ms"] = int(options["idle_ack_ms"])
            out["optimized_ack_scheduled_ack_interval_ms"] = int(options["optimized_ack_scheduled_ack_interval_ms"])
        given = self._connection.factory._resolved.given
        if any(name in given for name in _PREFETCH_OPTIONS) and "consumer.prefetchSize" not in self.destination.options:
            manager = self._link.manager
            assert manager is not None
            kind = destination_kind(self.destination.stomp_name, durable=self.durable_name is not None,
                                    browser=self._browser)
            out["prefetch_size"] = manager.prefetch_policy.prefetch_for(kind)
        return out

    def _subscribe(self, wait_s: Optional[float] = -1.0, timeout_s: Optional[float] = None) -> None:
        """Register the subscription with the link's SubscriptionManager, then send
        SUBSCRIBE and wait for its RECEIPT: ``timeout_s`` seconds (the caller's),
        or the connection's ``request_timeout_s`` (``jms.sendTimeout``, else
        ``jms.closeTimeout``) when None.

        Over failover the registration comes first, so a reconnect that starts
        after it replays the subscription (``Connection._on_link_resumed``); the
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
        link = self._link
        manager = link.manager
        assert manager is not None
        mode = self._mode
        ack = "auto" if mode == AT_MOST_ONCE else ("client-individual" if mode == INDIVIDUAL_ACKNOWLEDGE
                                                     else "client")
        headers: Dict[str, Any] = {}
        if self.selector:
            headers["selector"] = self.selector
        if self.no_local:
            if not link.is_activemq:
                raise ConfigurationError("no_local needs ActiveMQ's activemq.noLocal header; the broker says "
                                         "server=%r" % (link.server,))
            headers["activemq.noLocal"] = "true"
        if self.durable_name is not None:
            headers["activemq.subscriptionName"] = self.durable_name
        if self._browser:
            headers["browser"] = "true"
        if self._transformation is not None:
            headers["transformation"] = self._transformation
        frame_headers, sub = manager.prepare(self.destination.subscribe_name, self._sub_id, ack, headers,
                                             self._subscribe_options(), link.connect_timeout_s)
        self._sub = sub
        self._tx_threshold = optimized_ack_threshold(sub.window.prefetch, cap=int(
            self._connection.options.get("ack_batch_cap") or 100))
        self._connection._register_consumer(self._sub_id, self)  # messages may follow SUBSCRIBE at once
        if timeout_s is None:
            timeout_s = self._connection.request_timeout_s
        try:
            # ActiveMQ starts dispatching only after it sent this RECEIPT
            if link.reconnector is None:
                link.request("SUBSCRIBE", frame_headers, timeout_s, "SUBSCRIBE receipt")
                if self._browser:
                    self._browse_seq = link.transport.link_seq
            else:
                self._subscribe_over_failover(frame_headers, sub, timeout_s if wait_s == -1.0 else wait_s, timeout_s)
        except BaseException as exc:
            sub_id = self._sub_id
            self._connection._unregister_consumer(sub_id)
            manager.discard(sub_id)
            if isinstance(exc, ReceiptTimeout):
                self._cancel_late_subscribe()
            raise

    def _cancel_late_subscribe(self) -> None:
        """After a SUBSCRIBE's RECEIPT timed out: UNSUBSCRIBE it, written without
        waiting (deferred). A broker that was only slow (stalled) handles it after
        the SUBSCRIBE: messages it dispatched to the consumer nobody holds go back
        to the queue instead of waiting there until the connection closes."""
        try:
            self._link.transport.send_frame("UNSUBSCRIBE", {"id": self._sub_id}, None, None, True)
        except StompException as exc:
            log.debug("%r: UNSUBSCRIBE after the SUBSCRIBE timed out not sent: %s", self, exc)

    def _subscribe_over_failover(self, frame_headers: Dict[str, Any], sub: Subscription,
                                 wait_s: Optional[float], receipt_s: float) -> None:
        """The SUBSCRIBE of a registered subscription on a failover link (see
        :meth:`_subscribe`); returns once a RECEIPT came for it on the current
        socket, either for this SUBSCRIBE or for the reconnect's replay of it."""
        link = self._link
        manager = link.manager
        assert manager is not None
        transport = link.transport
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while True:
            link._await_up(deadline, "SUBSCRIBE")  # connected, and any replay finished
            current = manager.get(self._sub_id)
            if current is None:
                if self._browser:  # browses are not replayed
                    raise BrowseInterruptedError("browse of %s interrupted by a failover; iterate again"
                                                 % (self.destination,))
                if self._closed:
                    raise IllegalStateError("%r was closed while subscribing" % (self,))
                raise ConnectionClosedException("%r: the subscription was dropped during a failover (refused on "
                                                "replay)" % (self,))
            if current is not sub:
                if not self._browser:
                    self._sub = current  # a reconnect after the registration replayed it and got its RECEIPT
                    return
                # a reconnect renewed this browse before its RECEIPT came and left it to us (browses
                # are never replayed; nothing was browsed yet): send it on the new socket
                sub = self._sub = current
            seq = transport.link_seq
            headers = dict(frame_headers)
            headers["receipt"] = "subscribe-%s-%d" % (self._sub_id, seq)
            try:
                future = transport.send_frame("SUBSCRIBE", headers)
                assert future is not None  # it has a receipt header
                left = receipt_s if deadline is None else max(0.0, min(receipt_s, deadline - time.monotonic()))
                transport.wait_future(future, left, "SUBSCRIBE receipt")
                if self._browser:
                    self._browse_seq = seq
                return
            except (ConnectionClosedException, NotConnectedException) as exc:
                # the socket went before the RECEIPT: the reconnect replays the subscription,
                # or (when it renewed the subscriptions before this one was registered) the
                # next turn sends it on the new socket
                log.info("%r: SUBSCRIBE interrupted by a failover (%s); waiting for the new socket", self, exc)
            except BrokerError:
                now = manager.get(self._sub_id)
                if now is not None and now is not sub:
                    self._sub = now  # a duplicate of the replay that a reconnect sent meanwhile
                    return
                raise

    # ------------------------------------------------------------ application API

    def set_message_listener(self, listener: Optional[MessageListener]) -> None:
        """Deliver messages to ``listener(message)`` on the session's thread (None:
        stop; messages then wait for ``receive()``).

        What a listener that raises gets: AUTO_ACKNOWLEDGE / DUPS_OK /
        INDIVIDUAL_ACKNOWLEDGE -- the message again (local redelivery after the
        redelivery delay; poisoned after ``maximum_redeliveries``);
        CLIENT_ACKNOWLEDGE -- the next message (the failed one stays unacked until
        ``acknowledge()`` or ``recover()``); transacted -- the session rolls back;
        AT_MOST_ONCE -- the next message (the failed one is gone).
        """
        self._check_open()
        with self._session._cond:
            self._listener = listener
            self._session._cond.notify_all()

    @property
    def message_listener(self) -> Optional[MessageListener]:
        return self._listener

    def receive(self, timeout: Optional[float] = None) -> Optional[Message]:
        """The next message: wait up to ``timeout`` seconds (None: until one comes
        or the consumer is closed). Returns None on timeout or close.

        Raises:
            IllegalStateError: the consumer has a message listener, or is closed.
            ConnectionClosedException: the connection broke.
            ValueError: ``timeout`` is not a number of seconds >= 0 (or None).
        """
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout >= 0 or timeout != timeout):
            raise ValueError("timeout must be a number of seconds >= 0 or None, got %r" % (timeout,))
        self._check_open()
        if self._listener is not None:
            raise IllegalStateError("this consumer has a message listener; receive() is for consumers without")
        timeout = clamp_wait(timeout)  # longer than the platform can wait (inf too): that long
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            delivery = self._session._take(self, left)
            if delivery is None:
                return None
            if self._skip_if_unwanted(delivery):
                continue
            message = self._hand_over(delivery)
            self._consumed(delivery)
            return message

    def receive_no_wait(self) -> Optional[Message]:
        """A message that is here already, or None."""
        return self.receive(0)

    def close(self) -> None:
        """Stop delivery and UNSUBSCRIBE (waiting for the broker's receipt, bounded
        by ``close_timeout_ms``): what AUTO_ACKNOWLEDGE consumed is acked first;
        prefetched but unconsumed messages, and consumed ones not acknowledged
        (CLIENT/INDIVIDUAL), go back to the queue for other consumers. In a
        transacted session with an open transaction that holds messages of this
        consumer, the UNSUBSCRIBE waits for commit / rollback (rolled-back ones then
        go back to the queue, not to this consumer)."""
        session = self._session
        with session._cond:
            if self._closed:
                return
            self._closed = True
            self._buffer.clear()
            deferred = session.transacted and bool(self._delivered)
            if self in session._consumers:
                session._consumers.remove(self)
            if deferred:
                session._deferred_close.append(self)
            session._cond.notify_all()
        if session._thread is not threading.current_thread():
            session._wait_idle(self)
        if not deferred:
            self._unsubscribe()

    def __enter__(self) -> "MessageConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("%r is closed" % (self,))
        self._session._check_open()

    # ------------------------------------------------------------ delivery

    def _skip_if_unwanted(self, delivery: _Delivery) -> bool:
        """no_local messages of this connection's producer socket, and expired
        ones, are consumed without reaching the application; messages of a
        consumer socket lost since (failover) are dropped unacknowledged."""
        frame = delivery.frame
        if self._connection.is_from_lost_socket(frame):
            return True  # failover: never handed over nor acked; the broker redelivers it
        unwanted = self.no_local and self._connection.is_local_message(frame)
        if not unwanted:
            expires = frame.headers.get("expires")
            if expires and expires != "0":
                try:
                    unwanted = 0 < int(expires) < time.time() * 1000
                except ValueError:
                    unwanted = False
        if not unwanted:
            return False
        self._hand_over(delivery)
        self._consumed(delivery)
        if self._mode == INDIVIDUAL_ACKNOWLEDGE:
            self._ack_individual(delivery)
        return True

    def _hand_over(self, delivery: _Delivery) -> Message:
        """The application gets ``delivery`` now: track it and make its Message."""
        mode = self._mode
        if mode in (CLIENT_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE, SESSION_TRANSACTED):
            if not delivery.counted:
                self._count(delivery)
            with self._session._cond:
                self._delivered.append(delivery)
        message = message_from_frame(delivery.frame, self._connection.lookup_temporary, delivery.delivery_count)
        if mode == CLIENT_ACKNOWLEDGE:
            message._acknowledge = self._session.acknowledge
        elif mode == INDIVIDUAL_ACKNOWLEDGE:
            message._acknowledge = lambda: self._ack_individual(delivery, check=True)
        return message

    def _consumed(self, delivery: _Delivery) -> None:
        """The application had ``delivery`` (listener returned, receive() returned)."""
        mode = self._mode
        if mode in (AUTO_ACKNOWLEDGE, DUPS_OK_ACKNOWLEDGE, AT_MOST_ONCE):
            if not delivery.counted:
                self._count(delivery)  # the manager sends the batched ACK
        elif mode == SESSION_TRANSACTED:
            self._maybe_ack_in_transaction()

    def _count(self, delivery: _Delivery) -> None:
        delivery.counted = True
        manager = self._link.manager
        assert manager is not None
        manager.on_consumed(delivery.frame)

    def _dispatch(self, delivery: _Delivery) -> None:
        """Session thread: hand ``delivery`` to the listener."""
        listener = self._listener
        if listener is None or self._closed:  # pragma: no cover - raced with set_message_listener(None) / close
            with self._session._cond:
                if not self._closed:
                    self._buffer.appendleft(delivery)
            return
        if self._skip_if_unwanted(delivery):
            return
        session = self._session
        message = self._hand_over(delivery)
        session._recover_current = False
        try:
            listener(message)
        except BaseException as exc:  # SystemExit too: it must not end the session thread
            log.error("%r: listener raised %r on message %s", self, exc, delivery.frame.headers.get("message-id"),
                      exc_info=True)
            self._listener_failed(delivery)
            return
        if session._recover_current:
            session._recover_current = False
            self._redeliver([delivery])
            return
        self._consumed(delivery)

    def _listener_failed(self, delivery: _Delivery) -> None:
        mode = self._mode
        if mode in (AUTO_ACKNOWLEDGE, DUPS_OK_ACKNOWLEDGE):
            self._redeliver([delivery])
        elif mode == INDIVIDUAL_ACKNOWLEDGE:
            with self._session._cond:
                deliveries, self._delivered = self._delivered, []
            self._redeliver(deliveries)
        elif mode == SESSION_TRANSACTED:
            try:
                self._session.rollback()
            except StompException as exc:
                log.warning("%r: rollback after a listener error failed: %s", self, exc)
        else:  # CLIENT_ACKNOWLEDGE: stays unacked; AT_MOST_ONCE: gone
            self._consumed(delivery)

    # ------------------------------------------------------------ acks

    def _send_ack(self, frame: Frame, transaction: Optional[str] = None) -> None:
        """ACK ``frame`` on the socket that delivered it.

        Raises:
            AcknowledgeInterruptedError: that socket was lost (failover): the
                broker redelivers the message.
            AcknowledgeInDoubtError: ``jms.sendAcksAsync=false``: written, no
                RECEIPT (socket lost or timeout): the broker may have applied it.
            ConnectionClosedException: the connection is closed (no failover).
            BrokerError: ``jms.sendAcksAsync=false`` only.
        """
        headers = message_ack_headers(self._link, frame.headers)
        if transaction is not None:
            headers["transaction"] = transaction
        self._link.acknowledge("ACK", headers, frame.link_seq, self._connection.ack_receipt_timeout_s())

    def _current_sub(self) -> Optional[Subscription]:
        """This consumer's subscription; after a failover replayed it, the new one."""
        sub = self._sub
        if sub is not None and sub.closed and self._link.manager is not None:
            fresh = self._link.manager.get(self._sub_id)
            if fresh is not None and not fresh.closed:
                self._sub = sub = fresh
        return sub

    def _window_acked(self, cumulative: bool) -> None:
        sub = self._current_sub()
        if sub is None:
            return
        with sub.lock:
            sub.window.on_application_ack(cumulative)

    def _ack_individual(self, delivery: _Delivery, check: bool = False) -> None:
        """INDIVIDUAL_ACKNOWLEDGE: ACK this one message."""
        if check:
            self._session._check_open(IllegalStateError("the session of this message is closed"))
        with self._session._cond:
            if delivery not in self._delivered:
                return  # acked already, or being redelivered
            self._delivered.remove(delivery)
        if self._connection.is_from_lost_socket(delivery.frame):  # its window went with the socket
            raise AcknowledgeInterruptedError(
                "message %s not acknowledged: it came on a connection lost since (failover); the broker "
                "redelivers it" % delivery.frame.headers.get("message-id"))
        try:
            self._send_ack(delivery.frame)
        finally:
            if not self._connection.is_from_lost_socket(delivery.frame):
                self._window_acked(cumulative=False)

    def _maybe_ack_in_transaction(self) -> None:
        """Transacted: an ACK in the transaction every batch, so the broker (which
        counts ACKs in a transaction as delivered) keeps dispatching in long ones."""
        with self._session._cond:
            pending = len(self._delivered) - self._tx_acked
            if pending < self._tx_threshold:
                return
            frame = self._delivered[-1].frame
            self._tx_acked = len(self._delivered)
        try:
            self._send_ack(frame, self._session.transaction_id())
        except StompException as exc:
            # its socket is gone: commit() finds the message came on a lost socket (or the
            # connection closed) and fails
            log.debug("%r: ACK in transaction not sent: %s", self, exc)

    # ------------------------------------------------------------ local redelivery

    def _redeliver(self, deliveries: List[_Delivery]) -> None:
        """Put ``deliveries`` back at the head of the buffer (in their order) for a
        redelivery after the policy's delay; poison those past the limit."""
        # failover: a lost socket's messages come again from the broker, not from here
        deliveries = [d for d in deliveries if not self._connection.is_from_lost_socket(d.frame)]
        if not deliveries:
            return
        policy = self._connection.redelivery_policy
        keep: List[_Delivery] = []
        poison: List[_Delivery] = []
        for delivery in deliveries:
            delivery.redeliveries += 1
            if policy.exceeded(delivery.delivery_count - 1):
                poison.append(delivery)
            else:
                keep.append(delivery)
        for delivery in poison:
            self._poison(delivery)
        if not keep:
            return
        delay_ms = policy.delay_ms(keep[0].delivery_count - 1)
        session = self._session
        with session._cond:
            if self._closed:
                return  # UNSUBSCRIBE gives them back to the broker
            self._buffer.extendleft(reversed(keep))
            until = time.monotonic() + delay_ms / 1000.0
            self._paused_until = max(self._paused_until, until) if delay_ms else self._paused_until
            session._cond.notify_all()

    def _poison(self, delivery: _Delivery) -> None:
        """Past maximum_redeliveries: NACK (ActiveMQ moves it to the DLQ)."""
        if self._mode == AT_MOST_ONCE:  # pragma: no cover - never redelivered
            return
        frame = delivery.frame
        link = self._link
        version = link.version
        sub = self._current_sub()
        flush: Any = None
        if sub is not None:
            with sub.lock:
                window = sub.window
                now = int(time.monotonic() * 1000)
                if not delivery.counted:
                    # ack what was consumed before it, then count it without an ACK of its own
                    flush = window.flush(now)
                    if window.consumed < window.delivered:
                        window.on_consumed(frame.headers, now)
                    window.on_application_ack(True)
                else:
                    window.on_application_ack(False)
        delivery.counted = True
        log.warning("%r: message %s poisoned after %d redeliveries (NACK: the broker's dead-letter queue)",
                    self, frame.headers.get("message-id"), delivery.delivery_count - 1)
        try:
            if flush is not None:
                link.acknowledge("ACK", message_ack_headers(link, flush), frame.link_seq)
            if version == "1.0":  # no NACK in STOMP 1.0: drop it
                link.acknowledge("ACK", message_ack_headers(link, frame.headers), frame.link_seq)
            else:
                link.acknowledge("NACK", message_ack_headers(link, frame.headers), frame.link_seq)
        except StompException as exc:
            log.debug("%r: NACK not sent: %s", self, exc)

    # ------------------------------------------------------------ close

    def _resubscribe(self) -> None:
        """``release_after_rollback``: drop the local buffer, UNSUBSCRIBE (ActiveMQ
        returns every message it delivered to this subscription and nobody acked to
        the queue) and SUBSCRIBE again under a new id. Over failover the new
        subscription is registered before its SUBSCRIBE, so a socket lost meanwhile
        does not lose it: the reconnect replays it, or the SUBSCRIBE waits for the
        new socket (as long as the failover lasts: see :meth:`_subscribe`).

        Raises:
            BrokerError / ReceiptTimeout / ConnectionClosedException /
                NotConnectedException: the new SUBSCRIBE failed (the caller closes
                the consumer: it holds no subscription).
        """
        session = self._session
        with session._cond:
            if self._closed:
                return
            self._buffer.clear()
            self._paused_until = 0.0
        self._unsubscribe()
        with session._cond:
            if self._closed:
                return
            self._buffer.clear()  # anything routed before the unsubscribe went through
            connection = self._connection
            self._sub_id = "%d.%d.%d" % (connection.number, session.number, connection.next_id())
        log.debug("%r: re-subscribing after a rollback", self)
        self._subscribe(wait_s=None)

    def _abandon(self) -> None:
        """Close without UNSUBSCRIBE: the consumer holds no subscription any more
        (its re-subscribe failed)."""
        session = self._session
        with session._cond:
            self._closed = True
            self._buffer.clear()
            self._delivered = []
            if self in session._consumers:
                session._consumers.remove(self)
            session._cond.notify_all()
        self._connection._unregister_consumer(self._sub_id)
        manager = self._link.manager
        if manager is not None:
            manager.discard(self._sub_id)

    def _browse_interrupted(self) -> None:
        """Failover thread: the reconnect dropped this browser's subscription
        instead of replaying it; the iteration raises BrowseInterruptedError."""
        session = self._session
        with session._cond:
            self._browse_lost = True
            session._cond.notify_all()

    def _unsubscribe(self) -> None:
        connection = self._connection
        connection._unregister_consumer(self._sub_id)
        manager = self._link.manager
        assert manager is not None
        if not self._link.transport.is_connected():
            manager.discard(self._sub_id)
            return
        if self._browser and (self._browse_lost or self._browse_seq != self._link.transport.link_seq):
            manager.discard(self._sub_id)
            return  # browses are not replayed: the broker has no such subscription on this socket
        # closing it also resumes reading if its full buffer was what paused it (and no
        # other subscription's is full): the manager owns pause and resume
        manager.close(self._sub_id, write_timeout=connection.close_timeout_s)
        try:
            self._link.request("UNSUBSCRIBE", {"id": self._sub_id}, connection.close_timeout_s, "UNSUBSCRIBE")
        except StompException as exc:
            log.debug("%r: UNSUBSCRIBE: %s", self, exc)
