"""``MessageConsumer``: one STOMP subscription on the connection's consumer
socket, with its local buffer and its local redelivery.

:class:`MessageConsumer` is the API; :class:`ConsumerCore` does the work and is
what the session, its transaction, the connection's routing and browsers hold
(with its :class:`~amqstomp.jms._state.ConsumerLedger` and its
:class:`~amqstomp.jms._subscriber.Subscriber`).

The reader thread counts each MESSAGE in the subscription's prefetch window
(:class:`amqstomp._engine.subscription.SubscriptionManager`) and appends it to the
consumer's buffer; the session's thread (listener) or the caller of
``receive()`` takes it from there. When the application had the message, the
consumer tells the manager (``on_consumed``), which sends AUTO_ACKNOWLEDGE's
batched ACKs; the other modes' ACKs are written here. Which ACK, when, and
what a failed listener means are the acknowledgement core's decisions
(:mod:`amqstomp._core.ackmodes`: the consumer's :class:`~amqstomp._core.ackmodes.AckMode`,
:func:`~amqstomp._core.ackmodes.application_ack`, :func:`~amqstomp._core.ackmodes.in_transaction_ack`,
:func:`~amqstomp._core.ackmodes.redeliver`); this module applies them with the
session's state (:class:`~amqstomp.jms._state.SessionState`, whose methods make
each change under the session's condition and hold the waits) and the consumer
socket.

Licensed under the Apache License, Version 2.0.
"""
import logging
import time
from functools import partial
from typing import Any, Callable, Deque, List, Optional

from .. import _observe
from ..exception import AcknowledgeInDoubtError, AcknowledgeInterruptedError, ConfigurationError, StompException
from ..log import report_callback_error
from .._core import ackmodes
from .._core.callables import is_async_callable
from .._core.settle import RECOVER, REDELIVER, ROLLBACK, listener_failed
from .._engine.subscription import Subscription
from .._io.timeouts import clamp_wait
from ._state import ConsumerLedger, Delivery, SessionState
from ._subscriber import Subscriber
from .destination import Destination
from .exceptions import IllegalStateError
from ._messages import bind_acknowledge
from .message import Message, message_from_frame

__all__ = ["ConsumerCore", "MessageConsumer", "MessageListener", "acknowledge_delivered"]

log = logging.getLogger("amqstomp.jms.consumer")

MessageListener = Callable[[Message], Any]


class ConsumerCore:
    """What a :class:`MessageConsumer` is to its session (see the module docstring);
    the browsers' consumers too.

    Attributes:
        destination (Destination), selector (str | None), no_local (bool),
        durable_name (str | None): as :class:`MessageConsumer` has them.
        ledger (ConsumerLedger): its messages on their way to the application
            (shared with the session, under the session's condition).
        subscriber (Subscriber): its STOMP subscription.
    """

    def __init__(self, state: SessionState, destination: Destination, selector: Optional[str],
                 no_local: bool, durable_name: Optional[str] = None, browser: bool = False,
                 transformation: Optional[str] = None, mode: Optional[int] = None) -> None:
        self._state = state
        self._connection = state.connection
        self.destination = destination
        self.selector = selector
        self.no_local = no_local
        self.durable_name = durable_name
        self._browser = browser
        self.ledger = ConsumerLedger()
        self.subscriber = Subscriber(state, self, self.ledger, destination, selector, no_local, durable_name,
                                     browser, transformation, state.acknowledge_mode if mode is None else mode)
        #: the acknowledgement core's rules of its acknowledge mode
        self._acks = self.subscriber.ack_mode

    def __repr__(self) -> str:
        return "<jms.MessageConsumer %s on %s%s>" % (self.subscriber.sub_id, self.destination,
                                                      " closed" if self.ledger.closed else "")

    # ------------------------------------------------------------ application API (MessageConsumer's)

    def set_message_listener(self, listener: Optional[MessageListener]) -> None:
        self._check_open()
        if listener is not None:
            _check_listener(listener)
        self._state.set_listener(self.ledger, listener)

    def receive(self, timeout: Optional[float] = None) -> Optional[Message]:
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout >= 0 or timeout != timeout):
            raise ValueError("timeout must be a number of seconds >= 0 or None, got %r" % (timeout,))
        self._check_open()
        if self.ledger.listener is not None:
            raise IllegalStateError("this consumer has a message listener; receive() is for consumers without")
        started_ns = time.time_ns() if _observe.messages is not None else 0  # an instrumentation's receive span
        timeout = clamp_wait(timeout)  # longer than the platform can wait (inf too): that long
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            delivery = self._state.take_for_receive(self.ledger, deadline)
            if delivery is None:
                return None
            if self._skip_if_unwanted(delivery):
                continue
            message = self._hand_over(delivery)
            if _observe.messages is not None:
                _observe.messages.received(self.subscriber.link.transport, delivery.frame,
                                           started_ns or time.time_ns())
            self._consumed(delivery)
            return message

    def close(self) -> None:
        """Close the consumer (UNSUBSCRIBE; in a transaction, once it ends); all
        of it within ``close_timeout_ms`` (``jms.closeTimeout``)."""
        with self._connection.within(self._connection.close_timeout_s):
            self._close()

    def _close(self) -> None:
        state = self._state
        deferred = state.close_consumer(self)
        if deferred is None:
            return  # closed already
        if not state.on_session_thread():
            state.wait_idle(self)
        if not deferred:
            self.subscriber.unsubscribe()

    @property
    def closed(self) -> bool:
        return self.ledger.closed

    def _check_open(self) -> None:
        if self.ledger.closed:
            raise IllegalStateError("%r is closed" % (self,))
        self._state.check_open()

    def held_on(self, seq: int) -> int:
        """Messages of socket ``seq`` handed to the application and not acknowledged yet."""
        return self._state.held_on(self.ledger, seq)

    # ------------------------------------------------------------ delivery

    def deliver(self, frame: Any) -> None:
        """Reader thread: a MESSAGE of this consumer's subscription (the
        connection routes it here); the session buffers it for dispatch."""
        self._state.enqueue(self, frame)

    def _skip_if_unwanted(self, delivery: Delivery) -> bool:
        """no_local messages of this connection's producer socket, and expired
        ones, are consumed without reaching the application; messages of a
        consumer socket lost since (failover) are dropped unacknowledged, unless
        the broker settled them when it sent them (AT_MOST_ONCE): the settlement
        core's hand-over rule (:func:`amqstomp._core.settle.hand_over`)."""
        frame = delivery.frame
        if not self._connection.hands_over(frame, self.subscriber.subscribed):
            return True  # failover: never handed over nor acked; the broker redelivers it
        sub = self.subscriber.current_sub()
        if sub is not None and sub.settled is not None and frame.headers.get("message-id") in sub.settled:
            return self.subscriber.duplicate(sub, delivery)
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
        if self._acks.individual:
            self._ack_individual(delivery)
        return True

    def _hand_over(self, delivery: Delivery) -> Message:
        """The application gets ``delivery`` now: track it and make its Message."""
        mode = self._acks
        if mode.tracked:  # the application settles it: kept until its ACK / COMMIT
            if not delivery.counted:
                self.subscriber.count(delivery)
            self._state.track(self.ledger, delivery)
        message = message_from_frame(delivery.frame, self._connection.lookup_temporary, delivery.delivery_count)
        if mode.acknowledges_all:  # Message.acknowledge()
            bind_acknowledge(message, self._state.session.acknowledge)
        elif mode.individual:  # one ACK per message: this one
            bind_acknowledge(message, partial(self._ack_individual, delivery, True))  # (no Python frame of its own)
        return message

    def _consumed(self, delivery: Delivery) -> None:
        """The application had ``delivery`` (listener returned, receive() returned)."""
        mode = self._acks
        if not mode.tracked:
            if not delivery.counted:
                self.subscriber.count(delivery)  # the manager sends the batched ACK
        elif self.subscriber.acks_in_tx:  # transacted; CLIENT_ACKNOWLEDGE on ActiveMQ Classic
            self._maybe_ack_in_transaction()

    def dispatch(self, delivery: Delivery) -> None:
        """Session thread: hand ``delivery`` (taken from the head of the buffer)
        to the listener, then settle it as the acknowledge mode says."""
        listener = self.ledger.listener
        state = self._state
        if listener is None or self.ledger.closed:  # pragma: no cover - raced with set_message_listener(None) / close
            state.requeue(self.ledger, [delivery])
            return
        if self._skip_if_unwanted(delivery):
            return
        message = self._hand_over(delivery)
        state.recover_current = False
        try:
            if _observe.messages is None:
                listener(message)
            else:  # an instrumentation: its process span around the listener
                _observe.messages.process(self.subscriber.link.transport, delivery.frame, _listen, listener,
                                          message)
        except BaseException as exc:  # SystemExit too: it must not end the session thread
            report_callback_error(log, "%r: listener raised %r on message %s", self, exc,
                                  delivery.frame.headers.get("message-id"))
            self._listener_failed(delivery)
            return
        if state.recover_current:
            state.recover_current = False
            self.redeliver([delivery])
            return
        self._consumed(delivery)

    def _listener_failed(self, delivery: Delivery) -> None:
        """The listener raised for ``delivery``: the settlement core says what that
        means in this acknowledge mode (:func:`amqstomp._core.settle.listener_failed`)."""
        outcome = listener_failed(self._acks.settled_by)
        if outcome == REDELIVER:
            self.redeliver([delivery])
        elif outcome == RECOVER:
            self.redeliver(self._state.take_delivered_of(self.ledger))
        elif outcome == ROLLBACK:
            try:
                self._state.session.rollback()
            except StompException as exc:
                log.warning("%r: rollback after a listener error failed: %s", self, exc)
        else:  # CLIENT_ACKNOWLEDGE: stays unacked; AT_MOST_ONCE: gone
            self._consumed(delivery)

    # ------------------------------------------------------------ acks

    def _ack_individual(self, delivery: Delivery, check: bool = False) -> None:
        """INDIVIDUAL_ACKNOWLEDGE: ACK this one message."""
        state = self._state
        if check:
            state.check_open(closed_message="the session of this message is closed")
        if not state.untrack(self.ledger, delivery):
            return  # acked already, or being redelivered
        lost = self._connection.is_from_lost_socket
        todo = ackmodes.individual_ack(delivery, lost(delivery.frame))
        if todo.names is None:  # its window went with the socket
            raise AcknowledgeInterruptedError(
                "message %s not acknowledged: it came on a connection lost since (failover); the broker "
                "redelivers it" % delivery.frame.headers.get("message-id"))
        try:
            self.subscriber.send_ack(todo.names.frame)
        finally:
            if not lost(delivery.frame):
                self.subscriber.window_acked(cumulative=todo.cumulative)
        self.subscriber.settled(todo.settles)

    def _maybe_ack_in_transaction(self) -> None:
        """An ACK in the transaction every batch, so the broker (which counts ACKs in
        a transaction as delivered) keeps dispatching: a transacted session's own
        transaction; CLIENT_ACKNOWLEDGE's private "delivered" one (ActiveMQ Classic,
        begun here, committed by ``acknowledge()``: see
        :func:`amqstomp._core.ackmodes.acks_in_transaction`). Under the transaction's
        lock, so that no commit or abort comes between the BEGIN, the cover and the ACK."""
        state = self._state
        if not ackmodes.in_transaction_ack(state.delivered_count(self.ledger), 0, self.subscriber.tx_threshold):
            return
        try:
            with state.transaction.lock:
                tx = state.transaction.transaction_id(acks=True)  # (a transaction lost with its socket: a new one)
                acks = state.cover_in_transaction(tx, [self])  # what the ACK covers moves into the transaction table
                if not acks:
                    return
                frame, count = acks[0]
                if _observe.messages is not None:
                    _observe.settling(count, frame.headers)
                self.subscriber.send_ack(frame, tx)
        except StompException as exc:
            # its socket is gone: commit() / acknowledge() finds the message came on a lost
            # socket (or the connection closed) and fails
            log.debug("%r: ACK in transaction not sent: %s", self, exc)

    # ------------------------------------------------------------ local redelivery

    def redeliver(self, deliveries: List[Delivery]) -> None:
        """Put ``deliveries`` back at the head of the buffer (in their order) for a
        redelivery after the policy's delay; poison (NACK) those past
        ``maximum_redeliveries``. Messages of a socket lost since are dropped:
        the broker redelivers them."""
        # failover: a lost socket's messages come again from the broker, not from here
        deliveries = [d for d in deliveries if not self._connection.is_from_lost_socket(d.frame)]
        if not deliveries:
            return
        link = self.subscriber.link
        todo = ackmodes.redeliver(self._connection.redelivery_policy, deliveries, link.version, link.dialect)
        keep, poison, delay_ms = todo.again, todo.poisoned, todo.delay_ms
        if _observe.messages is not None:  # an instrumentation counts them
            for delivery in keep:
                _observe.messages.redelivery(link.transport, delivery.frame, False)
            for delivery, _ in poison:
                _observe.messages.redelivery(link.transport, delivery.frame, True)
        for delivery, action in poison:
            self.subscriber.poison(delivery, action)
        if keep:
            self._state.requeue(self.ledger, keep, delay_ms)

    # ------------------------------------------------------------ close

    def resubscribe(self) -> None:
        """``release_after_rollback``: drop the local buffer, UNSUBSCRIBE (ActiveMQ
        returns every message it delivered to this subscription and nobody acked to
        the queue) and SUBSCRIBE again under a new id. Over failover the new
        subscription is registered before its SUBSCRIBE, so a socket lost meanwhile
        does not lose it: the reconnect replays it, or the SUBSCRIBE waits for the
        new socket (as long as the failover lasts: see :meth:`Subscriber.subscribe`).

        Raises:
            BrokerError / ReceiptTimeout / ConnectionClosedException /
                NotConnectedException: the new SUBSCRIBE failed (the caller closes
                the consumer: it holds no subscription).
        """
        state = self._state
        if not state.clear_buffer(self.ledger, unpause=True):
            return  # closed
        self.subscriber.unsubscribe()
        if not state.clear_buffer(self.ledger):  # anything routed before the unsubscribe went through
            return
        self.subscriber.renew_id()
        log.debug("%r: re-subscribing after a rollback", self)
        self.subscriber.subscribe(wait_s=None)

    def abandon(self) -> None:
        """Close without UNSUBSCRIBE: the consumer holds no subscription any more
        (its re-subscribe failed)."""
        self._state.discard_consumer(self)
        subscriber = self.subscriber
        self._connection.unregister_consumer(subscriber.sub_id)
        manager = subscriber.link.manager
        if manager is not None:
            manager.discard(subscriber.sub_id)

    def browse_interrupted(self) -> None:
        """Failover thread: the reconnect dropped this browser's subscription
        instead of replaying it; the iteration raises BrowseInterruptedError."""
        self.subscriber.browse_lost = True
        self._state.wake()  # a browse waiting for its next message raises


class MessageConsumer:
    """Made by :meth:`Session.create_consumer` (and
    :meth:`Session.create_durable_subscriber`); see the module docstring."""

    def __init__(self, core: ConsumerCore) -> None:
        self._core = core

    def __repr__(self) -> str:
        return repr(self._core)

    @property
    def destination(self) -> Destination:
        """Where it consumes from."""
        return self._core.destination

    @property
    def selector(self) -> Optional[str]:
        """The JMS message selector, or None."""
        return self._core.selector

    @property
    def no_local(self) -> bool:
        """Messages sent by this connection are skipped."""
        return self._core.no_local

    @property
    def durable_name(self) -> Optional[str]:
        """The durable subscription's name (``activemq.subscriptionName``), or None."""
        return self._core.durable_name

    @property
    def subscription_id(self) -> str:
        """The STOMP subscription's ``id`` (``C.S.N``: connection, session, a number)."""
        return self._core.subscriber.sub_id

    @property
    def _buffer(self) -> Deque[Delivery]:  # tests look at it
        return self._core.ledger.buffer

    @property
    def _sub(self) -> Optional[Subscription]:  # tests look at it
        return self._core.subscriber.sub

    def set_message_listener(self, listener: Optional[MessageListener]) -> None:
        """Deliver messages to ``listener(message)`` on the session's thread (None:
        stop; messages then wait for ``receive()``).

        What a listener that raises gets: AUTO_ACKNOWLEDGE / DUPS_OK /
        INDIVIDUAL_ACKNOWLEDGE -- the message again (local redelivery after the
        redelivery delay; poisoned after ``maximum_redeliveries``);
        CLIENT_ACKNOWLEDGE -- the next message (the failed one stays unacked until
        ``acknowledge()`` or ``recover()``); transacted -- the session rolls back;
        AT_MOST_ONCE -- the next message (the failed one is gone).

        Raises:
            IllegalStateError: the consumer, its session or connection is closed.
            ConfigurationError: ``listener`` is not callable, or is an ``async def`` one (nothing
                would await it: use :mod:`amqstomp.aio` for async code).
        """
        self._core.set_message_listener(listener)

    @property
    def message_listener(self) -> Optional[MessageListener]:
        return self._core.ledger.listener

    def receive(self, timeout: Optional[float] = None) -> Optional[Message]:
        """The next message: wait up to ``timeout`` seconds (None: until one comes
        or the consumer is closed; 0: no wait, as :meth:`receive_no_wait`). Returns
        None on timeout or close. Unlike Java's ``MessageConsumer.receive(long)``,
        the unit is seconds, not milliseconds, and 0 does not mean "for ever": a
        port of ``receive(0)`` is ``receive()``, of ``receive(1000)`` ``receive(1.0)``.

        Raises:
            IllegalStateError: the consumer has a message listener, or is closed.
            ConnectionClosedException: the connection broke.
            ValueError: ``timeout`` is not a number of seconds >= 0 (or None).
        """
        return self._core.receive(timeout)

    def receive_no_wait(self) -> Optional[Message]:
        """A message that is here already, or None."""
        return self._core.receive(0)

    def close(self) -> None:
        """Stop delivery and UNSUBSCRIBE (waiting for the broker's receipt, bounded
        by ``close_timeout_ms``): what AUTO_ACKNOWLEDGE consumed is acked first;
        prefetched but unconsumed messages, and consumed ones not acknowledged
        (CLIENT/INDIVIDUAL), go back to the queue for other consumers. In a
        transacted session with an open transaction that holds messages of this
        consumer, the UNSUBSCRIBE waits for commit / rollback (rolled-back ones then
        go back to the queue, not to this consumer)."""
        self._core.close()

    @property
    def closed(self) -> bool:
        return self._core.ledger.closed

    def __enter__(self) -> "MessageConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def acknowledge_delivered(state: SessionState) -> None:
    """CLIENT_ACKNOWLEDGE (``Session.acknowledge()``): ack every message the
    session's consumers delivered so far, one cumulative ACK per consumer, each
    on the socket that delivered it.

    Raises:
        AcknowledgeInterruptedError: some of the messages came on a socket lost
            since (failover): those were not acknowledged (``count`` says how
            many) and the broker redelivers them; the others were.
        AcknowledgeInDoubtError: ``jms.sendAcksAsync=false`` only: an ACK was
            written and its RECEIPT did not come.
        ConnectionClosedException: the connection is closed (no failover).
        BrokerError: ``jms.sendAcksAsync=false`` only.
    """
    lost = state.connection.is_from_lost_socket
    not_acked = 0
    in_doubt: Optional[AcknowledgeInDoubtError] = None
    doubtful = 0
    for consumer, deliveries in state.take_delivered():
        subscriber = consumer.subscriber
        todo = ackmodes.application_ack(subscriber.ack_mode, deliveries, lambda d: lost(d.frame))
        not_acked += todo.not_acked
        if todo.names is None:
            continue
        live = todo.settles
        if _observe.messages is not None:
            _observe.settling(len(live), todo.names.frame.headers)
        try:
            subscriber.send_ack(todo.names.frame)
        except AcknowledgeInterruptedError:
            not_acked += len(live)
            continue
        except AcknowledgeInDoubtError as exc:
            in_doubt, doubtful = exc, doubtful + len(live)
            continue
        subscriber.window_acked(cumulative=todo.cumulative)
        subscriber.settled(live)
    if in_doubt is not None:
        raise AcknowledgeInDoubtError(
            "%s; %d message(s) in doubt%s" % (in_doubt, doubtful, ", %d more not acknowledged (they came on a "
                                              "connection lost since)" % not_acked if not_acked else ""),
            doubtful) from in_doubt
    if not_acked:
        raise AcknowledgeInterruptedError(
            "%d message(s) not acknowledged: they came on a connection lost since (failover); the broker "
            "redelivers them" % not_acked, not_acked)


def _check_listener(listener: Any) -> None:
    """A MessageListener handed to ``set_message_listener``: a plain callable of the message.

    Raises:
        ConfigurationError: ``listener`` is not callable, or is an ``async def`` one (a function,
            a ``functools.partial`` of one, an object whose ``__call__`` is one:
            :func:`amqstomp._core.callables.is_async_callable`): the session thread calls it and
            nobody would await the coroutine it returns, so its code would never run while its
            messages were acknowledged.
    """
    if not callable(listener):
        raise ConfigurationError("a message listener must be a callable of the message, got %r (%s)"
                                 % (listener, type(listener).__name__))
    if is_async_callable(listener):
        raise ConfigurationError("message listener %r is an async function: JMS listeners are called on a session "
                                 "thread and nothing awaits them (its messages would be acknowledged without its "
                                 "code running); use a plain function, or amqstomp.aio for async code" % (listener,))


def _listen(listener: Callable[[Message], Any], message: Message) -> None:
    """Run a MessageListener (what an instrumentation's process span wraps)."""
    listener(message)
