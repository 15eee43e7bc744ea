"""``Session``: a single-threaded context for producing and consuming, with its
own dispatch thread (``amqstomp-jmsC-session-S``).

Listeners of the session's consumers run on that thread, one at a time, in
the order the messages arrived on the socket (across the session's consumers),
so a slow listener delays only its own session: the connection's reader keeps
reading (heart-beats, other sessions' messages) and its timer keeps writing
heart-beats. ``receive()`` runs on the caller's thread.

Acknowledge modes and what goes on the wire (README, "JMS-style API"):

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
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, List, Optional, Tuple, Union

from ..codec import Frame
from ..exception import (
    AcknowledgeInDoubtError,
    AcknowledgeInterruptedError,
    BrokerError,
    ConfigurationError,
    StompException,
    TransactionInDoubtError,
)
from ..utils import clamp_wait
from .constants import (
    ACKNOWLEDGE_MODES,
    AUTO_ACKNOWLEDGE,
    CLIENT_ACKNOWLEDGE,
    DUPS_OK_ACKNOWLEDGE,
    SESSION_TRANSACTED,
)
from .destination import Destination, Queue, TemporaryQueue, TemporaryTopic, Topic, destination_from_header
from .exceptions import IllegalStateError, InvalidDestinationError, TransactionRolledBackError
from .link import Link, message_ack_headers
from .message import MAP_SUBSCRIBE_TRANSFORMATION, BytesMessage, MapMessage, Message, TextMessage

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection
    from .browser import QueueBrowser
    from .consumer import MessageConsumer, _Delivery
    from .producer import MessageProducer

__all__ = ["Session", "as_destination"]

log = logging.getLogger("amqstomp.jms")


def as_destination(value: Union[Destination, str]) -> Destination:
    """A Destination from a Destination or a STOMP name (``/queue/a``, ``/topic/b``;
    a bare name is a queue)."""
    if isinstance(value, Destination):
        return value
    if not isinstance(value, str) or not value:
        raise InvalidDestinationError("expected a Destination or a STOMP destination name, got %r" % (value,))
    if value.startswith("/"):
        base, sep, options = value.partition("?")
        found = destination_from_header(base)
        if found is None:  # pragma: no cover - base is non-empty
            raise InvalidDestinationError("no destination in %r" % (value,))
        if sep and isinstance(found, (Queue, Topic)) and not found.is_temporary:
            found.options = options
        return found
    return Queue(value)


class Session:
    """Made by :meth:`Connection.create_session`; see the module docstring.

    Attributes:
        connection: the owning :class:`Connection`.
        acknowledge_mode (int): one of the constants (SESSION_TRANSACTED when transacted).
        transacted (bool).
    """

    def __init__(self, connection: "Connection", acknowledge_mode: int, number: int) -> None:
        self.connection = connection
        self.acknowledge_mode = acknowledge_mode
        self.transacted = acknowledge_mode == SESSION_TRANSACTED
        self.number = number
        self._cond = threading.Condition(threading.Lock())
        self._consumers: List["MessageConsumer"] = []
        self._producers: List["MessageProducer"] = []
        self._deferred_close: List["MessageConsumer"] = []
        self._browsers: List["QueueBrowser"] = []
        self._seq = itertools.count()
        self._closing = False
        self._closed = False
        self._running: Optional["MessageConsumer"] = None  # whose listener runs now
        self._recover_current = False
        self._tx_lock = threading.RLock()
        self._tx: Optional[str] = None  # the transaction on the consumer socket (ACKs, and SENDs there)
        self._send_tx: Optional[Tuple[Link, str]] = None  # a send-only transaction on the producer socket
        self._tx_numbers = itertools.count(1)
        self._thread: Optional[threading.Thread] = threading.Thread(
            target=self._run, name="amqstomp-jms%d-session-%d" % (connection.number, number), daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return "<jms.Session %d.%d %s%s>" % (self.connection.number, self.number,
                                              ACKNOWLEDGE_MODES.get(self.acknowledge_mode, "?"),
                                              " closed" if self._closed else "")

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
        temp = self.connection.create_temporary(topic=False)
        assert isinstance(temp, TemporaryQueue)
        return temp

    def create_temporary_topic(self) -> TemporaryTopic:
        """A topic that lives as long as the connection."""
        self._check_open()
        temp = self.connection.create_temporary(topic=True)
        assert isinstance(temp, TemporaryTopic)
        return temp

    def create_message(self) -> Message:
        return Message()

    def create_text_message(self, text: str = "") -> TextMessage:
        return TextMessage(text)

    def create_bytes_message(self, data: bytes = b"") -> BytesMessage:
        return BytesMessage(data)

    def create_map_message(self) -> MapMessage:
        """An empty :class:`MapMessage` (typed entries; sent as ``jms-map-xml``)."""
        return MapMessage()

    def create_producer(self, destination: Union[Destination, str, None] = None) -> "MessageProducer":
        """A producer for ``destination`` (None: give one to each ``send``).

        Non-transacted sessions' producers send on the connection's producer
        socket (opened by the first one); transacted sessions' on the consumer
        socket, so that a transaction's SENDs and ACKs commit together.
        """
        from .producer import MessageProducer

        self._check_open()
        dest = as_destination(destination) if destination is not None else None
        producer = MessageProducer(self, dest)
        with self._cond:
            self._producers.append(producer)
        return producer

    def create_consumer(self, destination: Union[Destination, str], selector: Optional[str] = None,
                        no_local: bool = False, map_messages: bool = False,
                        timeout_s: Optional[float] = None) -> "MessageConsumer":
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
        """
        from .consumer import MessageConsumer

        self._check_open()
        dest = as_destination(destination)
        if dest.is_temporary:
            if not self.connection.is_own_temporary(dest):
                raise InvalidDestinationError("%s is a temporary destination of another connection: only the "
                                              "connection that made it can consume from it" % (dest,))
            if getattr(dest, "deleted", False):
                raise InvalidDestinationError("%s was deleted" % (dest,))
        consumer = MessageConsumer(self, dest, selector, bool(no_local),
                                   transformation=self._map_transformation(map_messages))
        return self._open_consumer(consumer, timeout_s)

    def _map_transformation(self, map_messages: bool) -> Optional[str]:
        if not isinstance(map_messages, bool):
            raise TypeError("map_messages must be True or False, got %r" % (map_messages,))
        if not map_messages:
            return None
        link = self.connection.consumer_link
        if not link.is_activemq:
            raise ConfigurationError("map_messages needs ActiveMQ's transformation header; the broker says "
                                     "server=%r" % (link.server,))
        return MAP_SUBSCRIBE_TRANSFORMATION

    def _open_consumer(self, consumer: "MessageConsumer", timeout_s: Optional[float] = None) -> "MessageConsumer":
        if timeout_s is not None:
            if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s >= 0:
                raise ValueError("timeout_s must be a number of seconds >= 0 or None, got %r" % (timeout_s,))
            timeout_s = clamp_wait(timeout_s)
        with self._cond:
            self._consumers.append(consumer)
        try:
            consumer._subscribe(timeout_s=timeout_s)
        except BaseException:
            with self._cond:
                consumer._closed = True
                if consumer in self._consumers:
                    self._consumers.remove(consumer)
            raise
        return consumer

    # ------------------------------------------------------------ durable subscriptions, browsers

    def create_durable_subscriber(self, topic: Union[Topic, str], name: str, selector: Optional[str] = None,
                                  no_local: bool = False, map_messages: bool = False,
                                  timeout_s: Optional[float] = None) -> "MessageConsumer":
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
            ConfigurationError: the broker is not ActiveMQ.
            BrokerError: the broker refused it (e.g. another connection with the
                same client id has it open).
        """
        from .consumer import MessageConsumer

        self._check_open()
        dest = as_destination(topic)
        if not isinstance(dest, Topic):
            raise InvalidDestinationError("a durable subscription needs a Topic, got %r" % (dest,))
        self._check_durable_name(name, "create_durable_subscriber")
        if self._durable_consumer(name) is not None:
            raise IllegalStateError("durable subscription %r is open on this connection already; close its "
                                    "consumer first" % (name,))
        consumer = MessageConsumer(self, dest, selector, bool(no_local), durable_name=name,
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
        connection = self.connection
        headers = {"id": "unsubscribe-%d" % connection.next_id(), "activemq.subscriptionName": name}
        try:
            connection.consumer_link.request("UNSUBSCRIBE", headers, connection.close_timeout_s,
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
        link = self.connection.consumer_link
        if not link.is_activemq:
            raise ConfigurationError("durable subscriptions use ActiveMQ's activemq.subscriptionName header; "
                                     "the broker says server=%r" % (link.server,))
        if not self.connection.client_id:
            raise IllegalStateError("%s needs a client id: durable subscriptions belong to one (set "
                                    "jms.clientID in the URI or client_id= on the ConnectionFactory)" % (what,))

    def _durable_consumer(self, name: str) -> Optional["MessageConsumer"]:
        """The consumer of this connection (any session) that holds durable
        subscription ``name`` on the broker, also one whose UNSUBSCRIBE waits for
        the end of a transaction."""
        for session in self.connection._session_list():
            with session._cond:
                for consumer in session._all_consumers():
                    if consumer.durable_name == name:
                        return consumer
        return None

    def create_browser(self, queue: Union[Queue, str], selector: Optional[str] = None,
                       timeout: float = 30.0) -> "QueueBrowser":
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
            BrokerError: the broker refused the subscription (a bad selector).
            ReceiptTimeout: no RECEIPT for the browse within ``timeout``.
        """
        from .browser import QueueBrowser

        self._check_open()
        dest = as_destination(queue)
        if not isinstance(dest, Queue):
            raise InvalidDestinationError("a queue browser needs a Queue, got %r" % (dest,))
        browser = QueueBrowser(self, dest, selector, timeout)
        with self._cond:
            self._browsers.append(browser)
        try:
            browser._start()
        except BaseException:
            with self._cond:
                if browser in self._browsers:
                    self._browsers.remove(browser)
            raise
        return browser

    # ------------------------------------------------------------ transactions

    @property
    def send_link(self) -> Link:
        """The socket this session's producers send on (for a transacted session,
        the one its next transactional SEND goes on, see :meth:`transacted_send`)."""
        if self.transacted:
            with self._tx_lock:
                if self._send_tx is not None:
                    return self._send_tx[0]
                if self._tx is not None or self._consumers or self._deferred_close:
                    return self.connection.consumer_link
            return self.connection.producer_link()
        return self.connection.producer_link()

    def transaction_id(self) -> str:
        """The open transaction's id on the consumer socket (BEGIN is sent on first use)."""
        with self._tx_lock:
            if self._tx is None:
                self._check_open()
                tx = "tx-%d.%d-%d" % (self.connection.number, self.number, next(self._tx_numbers))
                self.connection.consumer_link.send("BEGIN", {"transaction": tx})
                self._tx = tx
            return self._tx

    def transacted_send(self, needs_consumer_socket: bool = False) -> Tuple[Link, str]:
        """Where a transactional SEND goes: ``(link, transaction id)``.

        A transaction whose session has no consumer holds only SENDs: it goes on
        the producer socket, where asynchronous sends ask for a receipt once per
        producer-window quarter (on the consumer socket every SEND asks for one,
        so that ActiveMQ's producer flow control never stops reading the socket
        that carries ACKs: see the module docstring of :mod:`amqstomp.jms.link`).
        A session with consumers keeps its SENDs and ACKs in one transaction on
        the consumer socket, committed together. ``needs_consumer_socket``: the
        SEND names a temporary destination of this connection (which means
        another queue on another socket).
        """
        with self._tx_lock:
            if not needs_consumer_socket:
                if self._send_tx is not None:
                    return self._send_tx
                if self._tx is None and not self._consumers and not self._deferred_close:
                    link = self.connection.producer_link()
                    if link is not self.connection.consumer_link:
                        self._check_open()
                        tx = "tx-%d.%d-%d" % (self.connection.number, self.number, next(self._tx_numbers))
                        link.send("BEGIN", {"transaction": tx})
                        self._send_tx = (link, tx)
                        return self._send_tx
            return self.connection.consumer_link, self.transaction_id()

    def _all_consumers(self) -> List["MessageConsumer"]:
        return list(self._consumers) + list(self._deferred_close)

    def _drain_sends(self, timeout_s: Optional[float]) -> bool:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            producers = list(self._producers)
        link = self._send_tx[0] if self._send_tx is not None else self.connection.consumer_link
        ok = True
        for producer in producers:
            if producer._window is not None:
                ok = producer._window.drain(link, deadline) and ok
        return ok

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
        """
        self._check_open()
        if not self.transacted:
            raise IllegalStateError("commit() needs a transacted session")
        link = self.connection.consumer_link
        with self._tx_lock:
            if self._consumed_on_lost_socket():
                # their ACKs can never be written (the broker redelivers them): committing the rest
                # would report success for messages that come again (JMS: rolled back by failover)
                self._rollback_after_failed_commit()
                raise TransactionRolledBackError("commit failed: messages of this transaction came on a connection "
                                                 "lost since (failover) and will be redelivered; rolled back")
            if not self._drain_sends(self._send_timeout_s()):
                self._rollback_after_failed_commit()
                raise TransactionRolledBackError("the transaction's sends were not confirmed; rolled back")
            acks: List[Tuple["MessageConsumer", Frame]] = []
            with self._cond:
                for consumer in self._all_consumers():
                    if len(consumer._delivered) > consumer._tx_acked:
                        acks.append((consumer, consumer._delivered[-1].frame))
                        consumer._tx_acked = len(consumer._delivered)
            tx = self._tx
            send_tx = self._send_tx
            if send_tx is not None:
                try:
                    send_tx[0].request("COMMIT", {"transaction": send_tx[1]}, self._send_timeout_s(), "COMMIT")
                except TransactionInDoubtError:
                    self._send_tx = None
                    self._rollback_after_failed_commit()  # the consumer side (if any) did not commit
                    raise
                except StompException as exc:
                    self._send_tx = None
                    self._rollback_after_failed_commit()
                    raise TransactionRolledBackError("commit failed, transaction rolled back: %s" % exc) from exc
                self._send_tx = None
            try:
                if acks:
                    tx = self.transaction_id()
                    for _, frame in acks:
                        headers = message_ack_headers(link, frame.headers)
                        headers["transaction"] = tx
                        link.acknowledge("ACK", headers, frame.link_seq)
                if tx is not None:
                    if acks and self._consumed_on_lost_socket():  # lost while its ACKs were written
                        try:
                            link.send("ABORT", {"transaction": tx})
                        except StompException:
                            pass  # its socket is gone too: the broker rolled it back
                        raise TransactionRolledBackError("messages of this transaction came on a connection lost "
                                                         "since (failover) and will be redelivered")
                    link.request("COMMIT", {"transaction": tx}, self._send_timeout_s(), "COMMIT")
            except TransactionInDoubtError:
                # the broker has the outcome: if it committed, these messages are settled; if not, it
                # redelivers them (their socket is gone). Redelivering them here too would be wrong.
                self._tx = None
                self._forget_delivered()
                self._finish_deferred_closes()
                raise
            except StompException as exc:
                self._tx = None
                if tx is not None and isinstance(exc, AcknowledgeInterruptedError):
                    try:  # the ACKs written before it are in the broker's transaction: end it
                        link.send("ABORT", {"transaction": tx})
                    except StompException:
                        pass  # its socket is gone too: the broker rolled it back
                self._rollback_local()
                self._finish_deferred_closes()
                if send_tx is not None:
                    raise TransactionRolledBackError(
                        "the transaction's sends were committed, but its acknowledgements were rolled back (the "
                        "consumed messages come again): %s" % exc) from exc
                raise TransactionRolledBackError("commit failed, transaction rolled back: %s" % exc) from exc
            self._tx = None
            with self._cond:
                settled = []
                for consumer in self._all_consumers():
                    if consumer._delivered:
                        settled.append(consumer)
                    consumer._delivered = []
                    consumer._tx_acked = 0
            for consumer in settled:
                consumer._window_acked(cumulative=True)
            self._finish_deferred_closes()

    def rollback(self) -> None:
        """Roll the transaction back: the broker drops its SENDs (ABORT), and the
        messages it consumed are redelivered locally by their consumers after the
        redelivery delay (poisoned to the DLQ after ``maximum_redeliveries``).
        With ``release_after_rollback`` (``amqstomp.releaseAfterRollback``) the
        consumers that got them re-subscribe instead, which returns the messages
        (and what they had prefetched) to the queue for any consumer; see the
        README's "Release after rollback" for the trade-off. Over failover a
        socket lost during that re-subscribe is ridden through: the consumer's
        new subscription is replayed, or sent on the new socket, waiting as long
        as the failover lasts (the URI's ``timeout``; close() ends the wait).

        Raises:
            IllegalStateError: not a transacted session, or closed.
            StompException (BrokerError, ReceiptTimeout, ConnectionClosedException,
                NotConnectedException): ``release_after_rollback`` only: a
                consumer could not subscribe again; that consumer is closed (the
                rollback itself took place).
        """
        self._check_open()
        if not self.transacted:
            raise IllegalStateError("rollback() needs a transacted session")
        with self._tx_lock:
            self._rollback_locked()

    def _transaction_lost(self) -> None:
        """A send found the transaction's socket lost (failover): roll back as
        rollback() does (the broker has already), so the next operation begins
        a new transaction."""
        with self._tx_lock:
            self._rollback_after_failed_commit()

    def _forget_delivered(self) -> None:
        """An in-doubt commit: the consumed messages are the broker's to settle
        or redeliver; none is redelivered locally."""
        with self._cond:
            for consumer in self._all_consumers():
                consumer._delivered = []
                consumer._tx_acked = 0

    def _consumed_on_lost_socket(self) -> bool:
        """Whether a message consumed in the open transaction came on a consumer
        socket lost since (failover)."""
        lost = self.connection.is_from_lost_socket
        with self._cond:
            return any(lost(d.frame) for consumer in self._all_consumers() for d in consumer._delivered)

    def _rollback_after_failed_commit(self) -> None:
        """The rollback of a commit that failed: its TransactionRolledBackError is
        what the caller gets; a consumer that could not re-subscribe
        (``release_after_rollback``) is closed and reported to the exception
        listener."""
        try:
            self._rollback_locked()
        except StompException as exc:
            log.warning("%r: rollback after a failed commit: %s", self, exc)

    def _rollback_locked(self) -> None:
        send_tx = self._send_tx
        if send_tx is not None:
            self._drain_sends(self.connection.close_timeout_s)
            self._send_tx = None
            try:
                send_tx[0].request("ABORT", {"transaction": send_tx[1]}, self.connection.close_timeout_s, "ABORT")
            except StompException as exc:
                log.warning("%r: ABORT failed: %s", self, exc)
        tx, self._tx = self._tx, None
        if tx is not None:
            self._drain_sends(self.connection.close_timeout_s)
            try:
                self.connection.consumer_link.request("ABORT", {"transaction": tx},
                                                      self.connection.close_timeout_s, "ABORT")
            except StompException as exc:
                log.warning("%r: ABORT failed: %s", self, exc)
        try:
            if self.connection.options.get("release_after_rollback") and not self._closing:
                self._release_after_rollback()
            else:
                self._rollback_local()
        finally:
            self._finish_deferred_closes()

    def _release_after_rollback(self) -> None:
        """``release_after_rollback``: every consumer that got messages in the
        rolled-back transaction UNSUBSCRIBEs (ActiveMQ puts what it delivered and
        nobody acked back on the queue, for any consumer, marked redelivered) and
        SUBSCRIBEs again; the others keep their subscriptions. A failover during
        this rides through (the new subscription is replayed or sent on the new
        socket).

        Raises:
            StompException (BrokerError, ReceiptTimeout, ConnectionClosedException,
                NotConnectedException): a consumer could not subscribe again; it is
                closed (and the exception listener is told), the others were
                still re-subscribed. The first such error is raised.
        """
        with self._cond:
            release = []
            for consumer in self._all_consumers():
                if consumer._delivered and not consumer._closed:
                    release.append(consumer)
                consumer._delivered = []
                consumer._tx_acked = 0
        failed: List[StompException] = []
        for consumer in release:
            try:
                consumer._resubscribe()
            except StompException as exc:
                log.warning("%r: re-subscribing %r after a rollback failed; it is closed: %s", self, consumer, exc)
                consumer._abandon()
                failed.append(exc)
                self.connection._report(exc)
        if failed:
            raise failed[0]

    def _rollback_local(self) -> None:
        with self._cond:
            work = []
            for consumer in self._all_consumers():
                if consumer._delivered:
                    work.append((consumer, consumer._delivered))
                consumer._delivered = []
                consumer._tx_acked = 0
        for consumer, deliveries in work:
            consumer._redeliver(deliveries)

    def _finish_deferred_closes(self) -> None:
        with self._cond:
            closing, self._deferred_close = self._deferred_close, []
        for consumer in closing:
            consumer._unsubscribe()

    def recover(self) -> None:
        """Redeliver (locally, after the redelivery delay) every message this
        session's consumers delivered and that was not acknowledged yet; called
        from a listener in AUTO/DUPS_OK mode, the current message.

        Raises:
            IllegalStateError: a transacted session (use rollback), or closed.
        """
        self._check_open()
        if self.transacted:
            raise IllegalStateError("recover() is not for a transacted session; use rollback()")
        if self._thread is threading.current_thread() and self._running is not None and \
                self.acknowledge_mode in (AUTO_ACKNOWLEDGE, DUPS_OK_ACKNOWLEDGE):
            self._recover_current = True
        with self._cond:
            work = []
            for consumer in self._consumers:
                if consumer._delivered:
                    work.append((consumer, consumer._delivered))
                consumer._delivered = []
        for consumer, deliveries in work:
            consumer._redeliver(deliveries)

    def acknowledge(self) -> None:
        """CLIENT_ACKNOWLEDGE: ack every message delivered so far, one cumulative
        ACK per consumer (what ``message.acknowledge()`` calls), each on the
        socket that delivered it. With ``jms.sendAcksAsync=false`` each ACK
        waits for its RECEIPT.

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
        self._check_open(IllegalStateError("the session of this message is closed"))
        if self.acknowledge_mode != CLIENT_ACKNOWLEDGE:
            return
        with self._cond:
            work = []
            for consumer in self._consumers:
                if consumer._delivered:
                    work.append((consumer, consumer._delivered))
                consumer._delivered = []
        lost = self.connection.is_from_lost_socket
        not_acked = 0
        in_doubt: Optional[AcknowledgeInDoubtError] = None
        doubtful = 0
        for consumer, deliveries in work:
            live = [d for d in deliveries if not lost(d.frame)]
            not_acked += len(deliveries) - len(live)
            if not live:
                continue
            try:
                consumer._send_ack(live[-1].frame)
            except AcknowledgeInterruptedError:
                not_acked += len(live)
                continue
            except AcknowledgeInDoubtError as exc:
                in_doubt, doubtful = exc, doubtful + len(live)
                continue
            consumer._window_acked(cumulative=True)
        if in_doubt is not None:
            raise AcknowledgeInDoubtError(
                "%s; %d message(s) in doubt%s" % (in_doubt, doubtful, ", %d more not acknowledged (they came on a "
                                                  "connection lost since)" % not_acked if not_acked else ""),
                doubtful) from in_doubt
        if not_acked:
            raise AcknowledgeInterruptedError(
                "%d message(s) not acknowledged: they came on a connection lost since (failover); the broker "
                "redelivers them" % not_acked, not_acked)

    def _send_timeout_s(self) -> Optional[float]:
        ms = self.connection.options.get("send_timeout_ms") or 0
        return ms / 1000.0 if ms else None

    # ------------------------------------------------------------ life

    def _check_open(self, error: Optional[BaseException] = None) -> None:
        if self._closed or self._closing:
            raise error or IllegalStateError("%r is closed" % (self,))
        self.connection.check_open()

    def close(self) -> None:
        """Roll back an open transaction, close the consumers (their prefetched
        messages go back to the broker) and producers, and end the session's
        thread (after the listener running now, unless called from it)."""
        with self._cond:
            if self._closing or self._closed:
                return
            self._closing = True
            self._cond.notify_all()
        me = threading.current_thread()
        if self._thread is not me:
            self._wait_idle()
        if self.transacted and self.connection.consumer_link.transport.is_connected():
            with self._tx_lock:
                try:
                    self._rollback_locked()
                except StompException as exc:
                    log.debug("%r: rollback on close: %s", self, exc)
        with self._cond:
            consumers = list(self._consumers)
            producers = list(self._producers)
        for consumer in consumers:
            consumer.close()
        for producer in producers:
            producer.close()
        with self._cond:
            browsers = list(self._browsers)
        for browser in browsers:
            browser.close()
        self._finish_deferred_closes()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not me:
            thread.join(10.0)
            if thread.is_alive():  # pragma: no cover - a listener that never returns
                log.warning("%s still running 10 s after close (a listener busy?)", thread.name)
        self.connection._remove_session(self)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------ dispatch thread

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _wait_idle(self, consumer: Optional["MessageConsumer"] = None) -> bool:
        """Wait until no listener (of ``consumer``, or any) runs on the session thread;
        at most ``close_timeout_ms`` (False then: two listeners closing each other's
        sessions would otherwise wait for each other forever)."""
        deadline = time.monotonic() + self.connection.close_timeout_s
        with self._cond:
            while self._running is not None and (consumer is None or self._running is consumer):
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("%r: a listener still runs after %.1f s; going on without it",
                                self, self.connection.close_timeout_s)
                    return False
                self._cond.wait(min(0.5, left))
        return True

    def _enqueue(self, consumer: "MessageConsumer", frame: Frame) -> None:
        """Reader thread: a MESSAGE for ``consumer``."""
        from .consumer import _Delivery

        with self._cond:
            if consumer._closed:
                return
            consumer._buffer.append(_Delivery(frame, next(self._seq)))
            self._cond.notify_all()

    def _next_for_listener(self) -> Tuple[Optional[Tuple["MessageConsumer", "_Delivery"]], Optional[float]]:
        connection = self.connection
        if not connection._started or connection._failure is not None or self._closing:
            return None, None
        now = time.monotonic()
        best: Optional["MessageConsumer"] = None
        wait: Optional[float] = None
        for consumer in self._consumers:
            if consumer._listener is None or consumer._closed or not consumer._buffer:
                continue
            if consumer._paused_until > now:
                left = consumer._paused_until - now
                wait = left if wait is None else min(wait, left)
                continue
            if best is None or consumer._buffer[0].seq < best._buffer[0].seq:
                best = consumer
        if best is not None:
            return (best, best._buffer.popleft()), None
        return None, wait

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while True:
                    if self._closed:
                        return
                    pick, wait = self._next_for_listener()
                    if pick is not None:
                        break
                    cond.wait(wait)
                consumer, delivery = pick
                self._running = consumer
            try:
                consumer._dispatch(delivery)
            except BaseException:  # never end the session thread silently
                log.exception("%r: dispatching a message failed", self)
            finally:
                with cond:
                    self._running = None
                    cond.notify_all()

    def _take(self, consumer: "MessageConsumer", timeout: Optional[float]) -> Optional["_Delivery"]:
        """``receive()``'s wait, on the caller's thread."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        connection = self.connection
        with self._cond:
            while True:
                if consumer._closed or self._closing or self._closed:
                    return None
                connection.check_open()
                now = time.monotonic()
                wait: Optional[float] = None
                if connection._started and consumer._buffer:
                    if consumer._paused_until <= now:
                        return consumer._buffer.popleft()
                    wait = consumer._paused_until - now
                if deadline is not None:
                    left = deadline - now
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

