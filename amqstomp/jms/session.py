"""``Session``: a single-threaded context for producing and consuming, with its
own dispatch thread (``amqstomp-jmsC-session-S``).

Listeners of the session's consumers run on that thread, one at a time, in
the order the messages arrived on the socket (across the session's consumers),
so a slow listener delays only its own session: the connection's reader keeps
reading (heart-beats, other sessions' messages) and its timer keeps writing
heart-beats. ``receive()`` runs on the caller's thread.

Acknowledge modes and what goes on the wire (the documentation's "The JMS-style
API" page, docs/guides/jms.md):

======================  =====================  ==========================================
mode                    SUBSCRIBE ``ack``      ACKs
======================  =====================  ==========================================
AUTO_ACKNOWLEDGE        ``client``             amqstomp, after the listener returned /
                                               ``receive()`` handed the message over; one
                                               cumulative ACK per batch
DUPS_OK_ACKNOWLEDGE     ``client``             the same, lazier timers
CLIENT_ACKNOWLEDGE      ``client``             ``message.acknowledge()``: one cumulative
                                               ACK per consumer
INDIVIDUAL_ACKNOWLEDGE  ``client-individual``  ``message.acknowledge()``: that message
SESSION_TRANSACTED      ``client``             ACK with ``transaction`` (batched), then
                                               COMMIT
AT_MOST_ONCE            ``auto``               the broker, at dispatch
======================  =====================  ==========================================

Redelivery is local: ActiveMQ does not redeliver after a STOMP ABORT, nor
while the subscription lives, so rollback / recover / a listener that raised
put the messages back at the head of their consumer's buffer, and the
consumer waits the RedeliveryPolicy's delay before it delivers again. After
``maximum_redeliveries`` the message is poisoned: NACK, which sends it to the
dead-letter queue on ActiveMQ (``ActiveMQ.DLQ``).

Licensed under the Apache License, Version 2.0.
"""
import logging
import threading
from typing import TYPE_CHECKING, Any, Optional, Union

from .._core.dialect import BROKERS, refusal
from ..exception import BrokerError, StompException
from .._io.timeouts import clamp_wait
from ._state import SessionState
from ._subscriber import ACK_MODES, check_selector
from ._transaction import Transaction
from .browser import QueueBrowser
from .constants import ACKNOWLEDGE_MODES, AT_MOST_ONCE, SESSION_TRANSACTED
from .consumer import ConsumerCore, MessageConsumer, acknowledge_delivered
from .destination import Destination, Queue, TemporaryQueue, TemporaryTopic, Topic, as_destination
from .exceptions import IllegalStateError, InvalidDestinationError, TransactionRolledBackError
from .message import MAP_SUBSCRIBE_TRANSFORMATION, BytesMessage, MapMessage, Message, TextMessage
from .producer import MessageProducer

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from ._connection_state import ConnectionState

__all__ = ["Session", "as_destination"]

log = logging.getLogger("amqstomp.jms.session")


def check_session_arguments(transacted: Any, acknowledge_mode: Any) -> None:
    """The types of ``Connection.create_session``'s arguments: ``transacted`` a
    ``bool``, ``acknowledge_mode`` an ``int`` (one of the acknowledge modes, a
    bool is not one), checked even when ``transacted`` makes the mode unused.
    (``create_session`` checks the mode's value: ValueError.)

    Raises:
        TypeError: naming the argument and the type it got.
    """
    if transacted is not True and transacted is not False:
        raise TypeError("create_session: transacted must be a bool (True or False), got %s %r"
                        % (type(transacted).__name__, transacted))
    if not isinstance(acknowledge_mode, int) or isinstance(acknowledge_mode, bool):
        raise TypeError("create_session: acknowledge_mode must be an int (AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE, "
                        "DUPS_OK_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE or AT_MOST_ONCE), got %s %r"
                        % (type(acknowledge_mode).__name__, acknowledge_mode))


class Session:
    """Made by :meth:`Connection.create_session`; see the module docstring.

    Attributes:
        acknowledge_mode (int): one of the constants (SESSION_TRANSACTED when transacted).
        transacted (bool): made with ``transacted=True``.
    """

    def __init__(self, connection: "ConnectionState", acknowledge_mode: int, number: int) -> None:
        self._connection = connection
        self.acknowledge_mode = acknowledge_mode
        self.transacted = acknowledge_mode == SESSION_TRANSACTED
        # what the session shares with its consumers, producers, browsers and transaction
        state = self._state = SessionState(connection, number, acknowledge_mode, self.transacted)
        state.session = self
        self._transaction = state.transaction = Transaction(state)
        state.thread = threading.Thread(
            target=self._run, name="amqstomp-jms%d-session-%d" % (connection.number, number), daemon=True)
        state.thread.start()
        connection.add_session(state)

    def __repr__(self) -> str:
        return "<jms.Session %d.%d %s%s>" % (self._connection.number, self._state.number,
                                              ACKNOWLEDGE_MODES.get(self.acknowledge_mode, "?"),
                                              " closed" if self._state.closed else "")

    # ------------------------------------------------------------ factories

    def create_queue(self, name: str) -> Queue:
        return Queue(name)

    def create_topic(self, name: str) -> Topic:
        return Topic(name)

    def create_temporary_queue(self) -> TemporaryQueue:
        """A queue that lives as long as the connection (ActiveMQ deletes it when the
        connection's consumer socket closes). Only this connection can consume from
        it; send its ``reply_to`` to others."""
        self._check_open()
        temp = self._connection.create_temporary(topic=False)
        assert isinstance(temp, TemporaryQueue)
        return temp

    def create_temporary_topic(self) -> TemporaryTopic:
        """A topic that lives as long as the connection (ConfigurationError: a broker without, RabbitMQ)."""
        self._check_open()
        link = self._connection.consumer_link
        if not BROKERS[link.dialect].temp_topics:
            raise refusal("a temporary topic", link.dialect, link.server, "ActiveMQ Classic")
        temp = self._connection.create_temporary(topic=True)
        assert isinstance(temp, TemporaryTopic)
        return temp

    def create_message(self) -> Message:
        return Message()

    def create_text_message(self, text: Optional[str] = "") -> TextMessage:
        return TextMessage(text)

    def create_bytes_message(self, data: bytes = b"") -> BytesMessage:
        return BytesMessage(data)

    def create_map_message(self) -> MapMessage:
        """An empty :class:`MapMessage` (typed entries; sent as ``jms-map-xml``)."""
        return MapMessage()

    def create_producer(self, destination: Union[Destination, str, None] = None) -> MessageProducer:
        """A producer for ``destination`` (None: give one to each ``send``).

        Non-transacted sessions' producers send on the connection's producer
        socket (opened by the first one); transacted sessions' on the consumer
        socket, so that a transaction's SENDs and ACKs commit together.
        """
        self._check_open()
        dest = as_destination(destination) if destination is not None else None
        producer = MessageProducer(self._state, dest)
        self._state.add_producer(producer)
        return producer

    def create_consumer(self, destination: Union[Destination, str], selector: Optional[str] = None,
                        no_local: bool = False, map_messages: bool = False,
                        timeout_s: Optional[float] = None) -> MessageConsumer:
        """Subscribe to ``destination`` and return the consumer once the broker
        confirmed the subscription (RECEIPT). Messages are delivered after
        :meth:`Connection.start`.

        Args:
            destination: Queue, Topic, TemporaryQueue of this connection, or a STOMP
                name; ``consumer.*`` options of the destination become ``activemq.*``
                SUBSCRIBE headers.
            selector (str | None): a JMS message selector.
            no_local (bool): skip messages sent by this connection (topics).
            map_messages (bool): receive MapMessages with their entries: SUBSCRIBE
                with ``transformation:jms-xml``, so that ActiveMQ's
                JmsFrameTranslator renders each MapMessage as ``jms-map-xml`` (other
                messages are unchanged). The broker needs XStream on its class
                path (without it ActiveMQ 5.17 closes the socket when it renders
                one); see :class:`amqstomp.jms.MapMessage`.
            timeout_s (float | None): seconds to wait for the broker's RECEIPT;
                None: the connection's ``jms.sendTimeout`` (30 s by default; when
                0, ``jms.closeTimeout``).

        Raises:
            InvalidDestinationError: a temporary destination of another connection.
            ConfigurationError: a bad destination option, or an option the broker
                does not support (``no_local``, ``map_messages`` need ActiveMQ).
            BrokerError: the broker refused the subscription.
            ReceiptTimeout: no RECEIPT within ``timeout_s`` (a stalled broker).
            ValueError: ``timeout_s`` is not a number of seconds >= 0 (or None).
            TypeError: ``selector`` is not a str (or None).
        """
        self._check_open()
        check_selector(selector)
        dest = as_destination(destination)
        if dest.is_temporary:
            if getattr(dest, "deleted", False):
                raise InvalidDestinationError("%s was deleted" % (dest,))
            if not self._connection.is_own_temporary(dest):
                raise InvalidDestinationError("%s is a temporary destination of another connection: only the "
                                              "connection that made it can consume from it" % (dest,))
        # RabbitMQ: the broker's own subscription (ack:auto) of the connection gets the replies
        reply_only = dest.is_temporary and BROKERS[self._connection.consumer_link.dialect].temp_reply_only
        mode = AT_MOST_ONCE if reply_only else None
        consumer = ConsumerCore(self._state, dest, selector, bool(no_local),
                                transformation=self._map_transformation(map_messages), mode=mode)
        return self._open_consumer(consumer, timeout_s)

    def _map_transformation(self, map_messages: bool) -> Optional[str]:
        if not isinstance(map_messages, bool):
            raise TypeError("map_messages must be True or False, got %r" % (map_messages,))
        if not map_messages:
            return None
        link = self._connection.consumer_link
        if not link.is_activemq:
            raise refusal("map_messages (ActiveMQ's transformation header)", link.dialect, link.server)
        return MAP_SUBSCRIBE_TRANSFORMATION

    def _open_consumer(self, consumer: ConsumerCore, timeout_s: Optional[float] = None) -> MessageConsumer:
        if timeout_s is not None:
            if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s >= 0:
                raise ValueError("timeout_s must be a number of seconds >= 0 or None, got %r" % (timeout_s,))
            timeout_s = clamp_wait(timeout_s)
        state = self._state
        state.add_consumer(consumer)
        try:
            consumer.subscriber.subscribe(timeout_s=timeout_s)
        except BaseException:
            state.discard_consumer(consumer)
            raise
        return MessageConsumer(consumer)

    # ------------------------------------------------------------ durable subscriptions, browsers

    def create_durable_subscriber(self, topic: Union[Topic, str], name: str, selector: Optional[str] = None,
                                  no_local: bool = False, map_messages: bool = False,
                                  timeout_s: Optional[float] = None) -> MessageConsumer:
        """Subscribe durably to ``topic`` as ``name``: the broker keeps the messages
        published while no consumer of the subscription is open, and delivers them
        when one opens again (ActiveMQ: SUBSCRIBE with ``activemq.subscriptionName``;
        the subscription is the connection's client id + ``name``). Closing the
        consumer keeps the subscription; :meth:`unsubscribe` removes it.

        Prefetch: ``jms.prefetchPolicy.durableTopicPrefetch`` (100, ActiveMQ 5.17's
        ``ActiveMQPrefetchPolicy``) unless the topic says ``consumer.prefetchSize``.

        Args:
            topic (Topic | str): a Topic (not a temporary one) or ``/topic/name``.
            name (str): the subscription's name, unique per client id.
            selector (str | None), no_local (bool), map_messages (bool): as in
                :meth:`create_consumer` (``selector`` and ``no_local`` are part of
                the subscription: reopening it with others replaces it, ActiveMQ's
                rule).
            timeout_s (float | None): as in :meth:`create_consumer`.

        Raises:
            IllegalStateError: the connection has no client id (``jms.clientID`` /
                ``client_id=``), or a consumer of this connection has the
                subscription open already; the session is closed.
            InvalidDestinationError: not a topic, or a temporary topic.
            ValueError: ``name`` is not a non-empty str.
            TypeError: ``selector`` is not a str (or None).
            ConfigurationError: the broker is not ActiveMQ.
            BrokerError: the broker refused it (e.g. another connection with the
                same client id has it open).
        """
        self._check_open()
        check_selector(selector)
        dest = as_destination(topic)
        if not isinstance(dest, Topic):
            raise InvalidDestinationError("a durable subscription needs a Topic, got %r" % (dest,))
        self._check_durable_name(name, "create_durable_subscriber")
        if self._durable_consumer(name) is not None:
            raise IllegalStateError("durable subscription %r is open on this connection already; close its "
                                    "consumer first" % (name,))
        consumer = ConsumerCore(self._state, dest, selector, bool(no_local), durable_name=name,
                                transformation=self._map_transformation(map_messages))
        return self._open_consumer(consumer, timeout_s)

    def unsubscribe(self, name: str) -> None:
        """Remove the durable subscription ``name`` of this connection's client id
        from the broker, with the messages it kept (ActiveMQ: UNSUBSCRIBE with
        ``activemq.subscriptionName``, which becomes a RemoveSubscriptionInfo).
        Waits for the broker's RECEIPT (at most ``close_timeout_ms``).

        Raises:
            IllegalStateError: a consumer of this connection has it open (close it
                first; JMS forbids removing an active subscription, and so does
                ActiveMQ: "Durable consumer is in use"), no client id, or closed.
            InvalidDestinationError: the broker has no such subscription.
            ValueError: ``name`` is not a non-empty str.
            ConfigurationError: the broker is not ActiveMQ.
            BrokerError: another refusal; ReceiptTimeout: no answer in time.
        """
        self._check_open()
        self._check_durable_name(name, "unsubscribe")
        open_consumer = self._durable_consumer(name)
        if open_consumer is not None:
            pending = open_consumer.closed
            raise IllegalStateError(
                "durable subscription %r is in use by %r%s; close it before unsubscribe()" % (
                    name, open_consumer,
                    " (its close waits for the transaction's commit or rollback)" if pending else ""))
        connection = self._connection
        headers = {"id": "unsubscribe-%d" % connection.next_id(), "activemq.subscriptionName": name}
        try:
            connection.consumer_link.request("UNSUBSCRIBE", headers, connection.close_wait_s(),
                                             "UNSUBSCRIBE of durable subscription %r" % (name,))
        except BrokerError as exc:
            text = "%s %s" % (exc.frame.headers.get("message", "") if exc.frame is not None else "", exc)
            if "No durable subscription exists" in text:
                raise InvalidDestinationError("no durable subscription %r for client id %r on the broker"
                                              % (name, connection.client_id)) from exc
            if "in use" in text:
                raise IllegalStateError("durable subscription %r is in use: %s" % (name, exc)) from exc
            raise
        log.debug("%r: durable subscription %r removed", self, name)

    def _check_durable_name(self, name: Any, what: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("%s: the durable subscription name must be a non-empty str, got %r" % (what, name))
        link = self._connection.consumer_link
        if not link.is_activemq:
            raise refusal("durable subscriptions (activemq.subscriptionName)", link.dialect, link.server)
        if not self._connection.client_id:
            raise IllegalStateError("%s needs a client id: durable subscriptions belong to one (set "
                                    "jms.clientID in the URI or client_id= on the ConnectionFactory)" % (what,))

    def _durable_consumer(self, name: str) -> Optional[ConsumerCore]:
        """The consumer of this connection (any session) that holds durable
        subscription ``name`` on the broker, also one whose UNSUBSCRIBE waits for
        the end of a transaction."""
        for state in self._connection.sessions():
            consumer = state.durable_consumer(name)
            if consumer is not None:
                return consumer
        return None

    def create_browser(self, queue: Union[Queue, str], selector: Optional[str] = None,
                       timeout: float = 30.0) -> QueueBrowser:
        """A :class:`QueueBrowser`: look at the messages on ``queue`` without
        consuming them (ActiveMQ: SUBSCRIBE with ``browser:true``; the broker ends
        each browse with a MESSAGE carrying ``browser:end``). Browsing does not
        need :meth:`Connection.start`.

        Args:
            queue (Queue | str): the queue.
            selector (str | None): only messages it selects.
            timeout (float): seconds iteration waits for the broker's next message
                (or its end marker) before raising :class:`BrowseTimeoutError`.

        Raises:
            InvalidDestinationError: not a queue.
            ConfigurationError: the broker is not ActiveMQ, or STOMP 1.0 (ActiveMQ
                browses only for 1.1+).
            ValueError: ``timeout`` not > 0.
            TypeError: ``selector`` is not a str (or None).
            BrokerError: the broker refused the subscription (a bad selector).
            ReceiptTimeout: no RECEIPT for the browse within ``timeout``.
        """
        self._check_open()
        dest = as_destination(queue)
        if not isinstance(dest, Queue):
            raise InvalidDestinationError("a queue browser needs a Queue, got %r" % (dest,))
        return QueueBrowser(self._state, dest, selector, timeout)  # subscribed: its first browse

    # ------------------------------------------------------------ transactions

    def commit(self) -> None:
        """Commit the transaction: the broker delivers its SENDs and drops the
        messages it ACKed. Waits until every SEND of the transaction was received
        (its RECEIPT), then for COMMIT's receipt.

        A session whose transaction went on the producer socket (it had no
        consumer when the transaction began) commits that one first; should a
        consumer have joined meanwhile, its ACKs commit right after, in their
        own transaction on the consumer socket (a failure between the two
        redelivers those messages: at-least-once, never a loss).

        Raises:
            IllegalStateError: not a transacted session, or closed.
            TransactionRolledBackError: the broker refused the COMMIT, or the
                connection was lost before the COMMIT was written, or a message
                consumed in the transaction came on a socket lost since (failover:
                the broker redelivers it); the transaction is rolled back
                (consumed messages redelivered locally, or by the broker).
            TransactionInDoubtError: the COMMIT was written, then its socket
                was lost (or ``jms.sendTimeout`` passed) before the broker's
                RECEIPT: the broker may or may not have committed. Nothing is
                redelivered locally; if the broker did not commit, it redelivers
                the consumed messages.
            TransactionPartlyCommittedError: (a TransactionInDoubtError) the
                sends went on the producer socket and were committed, the
                acknowledgements were not (see the exception).
        """
        state = self._state
        if not state.closed and not state.closing and self.transacted and self._connection.failure is not None:
            # the connection broke (no failover, or it gave up) before COMMIT was written: the broker
            # rolled the transaction back with its connection
            self._transaction.lost()
            raise TransactionRolledBackError("commit failed, transaction rolled back: the connection is broken: %s"
                                             % (self._connection.failure,))
        self._check_open()
        if not self.transacted:
            raise IllegalStateError("commit() needs a transacted session")
        self._transaction.commit()

    def rollback(self) -> None:
        """Roll the transaction back: the broker drops its SENDs (ABORT), and the
        messages it consumed are redelivered locally by their consumers after the
        redelivery delay (poisoned to the DLQ after ``maximum_redeliveries``).
        With ``release_after_rollback`` (``amqstomp.releaseAfterRollback``) the
        consumers that got them re-subscribe instead, which returns the messages
        (and what they had prefetched) to the queue for any consumer; see
        "Release after rollback" in the documentation's Transactions guide
        (docs/guides/transactions.md) for the trade-off. Over failover a
        socket lost during that re-subscribe is ridden through: the consumer's
        new subscription is replayed, or sent on the new socket, waiting as long
        as the failover lasts (the URI's ``timeout``; close() ends the wait).

        Raises:
            IllegalStateError: not a transacted session, or closed.
            StompException: ``release_after_rollback`` only (a BrokerError,
                ReceiptTimeout, ConnectionClosedException or
                NotConnectedException): a consumer could not subscribe again;
                that consumer is closed (the rollback itself took place).
        """
        self._check_open()
        if not self.transacted:
            raise IllegalStateError("rollback() needs a transacted session")
        self._transaction.rollback()

    def recover(self) -> None:
        """Redeliver (locally, after the redelivery delay) every message this
        session's consumers delivered and that was not acknowledged yet; called
        from a listener in AUTO/DUPS_OK mode, the current message. CLIENT_ACKNOWLEDGE
        on ActiveMQ Classic ABORTs the session's "delivered" transaction first (the
        broker keeps its messages dispatched to the subscription; the next
        ``acknowledge()`` settles them).

        Raises:
            IllegalStateError: a transacted session (use rollback), or closed.
        """
        self._check_open()
        if self.transacted:
            raise IllegalStateError("recover() is not for a transacted session; use rollback()")
        state = self._state
        if state.on_session_thread() and state.running is not None and \
                ACK_MODES[self.acknowledge_mode].recovers_current:
            state.recover_current = True
        # CLIENT_ACKNOWLEDGE's "delivered" transaction (ActiveMQ): its ACKs' messages come back
        # into delivered; the broker keeps them dispatched to the subscription, a later ACK names them
        self._transaction.abort_open()
        for consumer, deliveries in state.take_delivered():
            consumer.redeliver(deliveries)
        self._transaction.finish_deferred_closes()  # consumers closed while it was open: UNSUBSCRIBE now

    def acknowledge(self) -> None:
        """CLIENT_ACKNOWLEDGE: ack every message delivered so far, one cumulative
        ACK per consumer (what ``message.acknowledge()`` calls), each on the
        socket that delivered it. With ``jms.sendAcksAsync=false`` each ACK
        waits for its RECEIPT. On ActiveMQ Classic, once the consumers ACKed part
        of them in the session's "delivered" transaction (so that the broker kept
        dispatching past the prefetch: :func:`amqstomp._core.ackmodes.acks_in_transaction`),
        it ACKs the rest in it and COMMITs it, waiting for the RECEIPT (within
        ``jms.sendTimeout``): an AcknowledgeInDoubtError without one, an
        AcknowledgeInterruptedError when it was not committed (the messages come
        again: the open socket's locally).

        Raises:
            IllegalStateError: the session is closed.
            AcknowledgeInterruptedError: some of the messages came on a socket
                lost since (failover): those were not acknowledged (``count``
                says how many) and the broker redelivers them; the others were.
            AcknowledgeInDoubtError: ``jms.sendAcksAsync=false`` only: an ACK
                was written and its RECEIPT did not come (socket lost, or the
                timeout): the broker may or may not have applied it.
            ConnectionClosedException: the connection is closed (no failover).
            BrokerError: ``jms.sendAcksAsync=false`` only.
        """
        self._state.check_open(closed_message="the session of this message is closed")
        if not ACK_MODES[self.acknowledge_mode].acknowledges_all:  # the core's rule: CLIENT_ACKNOWLEDGE only
            return
        if not self._transaction.commit_delivered():  # ActiveMQ: the "delivered" transaction, if open
            acknowledge_delivered(self._state)

    # ------------------------------------------------------------ life

    def _check_open(self, error: Optional[BaseException] = None) -> None:
        self._state.check_open(error)

    def close(self) -> None:
        """Roll back an open transaction, close the consumers (their prefetched
        messages go back to the broker) and producers, and end the session's
        thread (after the listener running now, unless called from it); all of
        it within ``close_timeout_ms`` (``jms.closeTimeout``), whatever the broker does."""
        with self._connection.within(self._connection.close_timeout_s):
            self._close()

    def _close(self) -> None:
        state = self._state
        if not state.begin_close():
            return
        if not state.on_session_thread():
            state.wait_idle()
        if self.transacted and self._connection.consumer_link.transport.is_connected():
            with self._transaction.lock:
                try:
                    self._transaction.rollback_locked()
                except StompException as exc:
                    log.debug("%r: rollback on close: %s", self, exc)
        elif self._transaction.tx is not None and self._connection.consumer_link.transport.is_connected():
            self._transaction.abort_open()  # CLIENT_ACKNOWLEDGE's "delivered" transaction: not acknowledged
        consumers, producers, _ = state.members()
        for consumer in consumers:
            consumer.close()
        for producer in producers:
            producer.close()
        for browser in state.members()[2]:
            browser.close()
        self._transaction.finish_deferred_closes()
        state.end_close()
        thread = state.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(min(10.0, max(0.5, self._connection.close_wait_s())))
            if thread.is_alive():  # pragma: no cover - a listener that never returns
                log.warning("%s still running 10 s after close (a listener busy?)", thread.name)
        self._connection.remove_session(self._state)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._state.closed

    # ------------------------------------------------------------ dispatch thread

    def _run(self) -> None:
        """The session's dispatch thread: each message a listener gets, one at a time,
        in their order of arrival (:meth:`SessionState.next_dispatch`), until the
        session is closed."""
        state = self._state
        while True:
            pick = state.next_dispatch()
            if pick is None:
                return
            consumer, delivery = pick
            try:
                consumer.dispatch(delivery)
            except BaseException:  # never end the session thread silently
                log.exception("%r: dispatching a message failed", self)
            finally:
                state.dispatched()
