"""``ConnectionFactory`` and ``Connection`` of the JMS-style API.

A :class:`Connection` holds up to two sockets (*links*, see :mod:`amqstomp.jms.link`):

* the **consumer link**, opened by :meth:`ConnectionFactory.create_connection`
  (it carries the client id): SUBSCRIBE/ACK/NACK, the transactions of
  transacted sessions that have consumers (SENDs, ACKs, BEGIN/COMMIT/ABORT:
  committed together), and sends that name a temporary destination of this
  connection (``/temp-queue/x`` means a different queue on another socket);
* the **producer link**, opened by the first producer of a session without
  consumers (``separate_producer_socket``, default True): every other SEND,
  send-only transactions included (see :meth:`Session.transacted_send`).

Why two: ActiveMQ's producer flow control (memory full, no ``sendFailIfNoSpace``)
stops reading a socket that carries a SEND without a receipt until memory frees
up; an ACK or heart-beat queued behind it on the same socket waits too, and a
consumer whose ACKs do not arrive frees no memory. amqstomp's own sends carry
receipts (sync sends, and async sends within the producer window), which
ActiveMQ parks instead of blocking the socket, but ``producer_window_size=0``
sends do not; the separate socket keeps consumers safe either way.

Threads (all end on :meth:`Connection.close`): per open link three --
``amqstomp-jmsC-consumer-reader`` (reads the socket), ``...-dispatch`` (this
connection's executor: exception listener, usage callbacks) and ``...-timer``
(heart-beats, ACK batch timers, usage-full checks), ``producer`` instead of
``consumer`` for the producer link -- and one ``amqstomp-jmsC-session-S`` per
session (its listeners). A connection with S sessions and a producer in a
session without consumers runs 3 + 3 + S threads; without such a producer (or
with ``separate_producer_socket=False``) 3 + S. With a ``failover:`` URI a
socket being replaced also has ``amqstomp-jmsC-consumer-failover`` (or
``-producer-failover``) until its new socket is connected.

Licensed under the Apache License, Version 2.0.
"""
import itertools
import logging
import threading
import uuid
from typing import Any, Callable, Dict, List, Optional

from ..codec import Frame
from ..exception import BrokerError, ConnectionClosedException, StompException
from ..failover import ReconnectPolicy
from ..flow import RedeliveryPolicy
from ..uri import redact
from ..utils import clamp_wait
from .constants import ACKNOWLEDGE_MODES, AUTO_ACKNOWLEDGE, SESSION_TRANSACTED
from ._subscriber import is_reply_subscription
from .consumer import MessageConsumer
from .destination import Destination, TemporaryDestination, TemporaryQueue, TemporaryTopic
from .exceptions import IllegalStateError, ResourceAllocationError, is_resource_allocation_error
from .link import ASYNC_RECEIPT_PREFIX, Link, UsageEvent
from .options import ResolvedOptions, resolve
from .session import Session

__all__ = ["ConnectionFactory", "Connection"]

log = logging.getLogger("amqstomp.jms.connection")

ExceptionListener = Callable[[BaseException], Any]
UsageListener = Callable[[UsageEvent], Any]

_connection_ids = itertools.count(1)


class ConnectionFactory:
    """Makes connections to one broker (ActiveMQConnectionFactory's role).

    Args:
        broker_url (str): ``stomp://host:61613`` or ``stomp+ssl://host:61612``, with
            ActiveMQ's URI options, e.g.
            ``stomp://127.0.0.1:61613?jms.prefetchPolicy.all=50&heartBeat=1000,1000``;
            or ``failover:(stomp://a:61613,stomp://b:61613)?randomize=false`` (the
            documentation's "Failover and master/slave" page, docs/guides/failover.md:
            reconnect with FailoverTransport's back-off,
            replay of CONNECT and subscriptions; heart-beats default to 5000,5000
            there, so a silent broker is noticed too).
        **options: the same options by Python keyword (the "URI options" page,
            docs/options.md; "Producers and flow control", docs/guides/producers.md,
            for the producer options); keywords win
            over the URI. Also ``ssl_context`` (an ``ssl.SSLContext``), or
            ``ca_certs`` / ``cert_file`` / ``key_file`` / ``key_password`` for
            ``stomp+ssl://`` (the broker's certificate and host name are verified
            unless your context says otherwise).

    Raises:
        ConfigurationError: an OpenWire ``tcp://`` URI (amqstomp speaks STOMP), an
            unknown ``jms.*`` or failover option or keyword, a bad value.
    """

    def __init__(self, broker_url: str = "stomp://localhost:61613", **options: Any) -> None:
        self.broker_url = broker_url
        self._keywords = dict(options)
        self._resolved = resolve(broker_url, self._keywords)

    @property
    def options(self) -> Dict[str, Any]:
        """Every option by keyword, as connections will use them (a copy)."""
        return dict(self._resolved.options)

    @property
    def resolved(self) -> ResolvedOptions:
        """The parsed broker URI and options (``uri``, ``options``, ``given``:
        the names the URI or the keywords set)."""
        return self._resolved

    def create_connection(self, username: Optional[str] = None, password: Optional[str] = None,
                          timeout_s: Optional[float] = None) -> "Connection":
        """Connect (the consumer socket; CONNECT and CONNECTED) and return the
        connection, stopped: call :meth:`Connection.start` to get messages.

        Args:
            username (str | None): overrides ``jms.userName``.
            password (str | None): overrides ``jms.password`` (never logged).
            timeout_s (float | None): with a ``failover:`` URI, give up after this
                many seconds (None: the URI's ``timeout`` when set, else its
                ``startupMaxReconnectAttempts`` decide, -1 = keep trying, as
                ActiveMQ's client does).

        Raises:
            ConnectFailedException: the broker is unreachable, refused the login
                or the client id.
            ValueError: ``timeout_s`` is not a number >= 0.
        """
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                      or not timeout_s >= 0 or timeout_s == float("inf")):
            raise ValueError("timeout_s must be a finite number of seconds >= 0 or None, got %r" % (timeout_s,))
        timeout_s = clamp_wait(timeout_s)
        options = dict(self._resolved.options)
        if username is not None:
            options["username"] = username
        if password is not None:
            options["password"] = password
        return Connection(self, options, timeout_s)

    def __repr__(self) -> str:  # jms.password masked: reprs end up in logs and exceptions
        return "ConnectionFactory(%r)" % (redact(self.broker_url) if isinstance(self.broker_url, str)
                                          else self.broker_url,)


class Connection:
    """A JMS-style connection (not the stomp.py-compatible ``amqstomp.Connection``).
    Made by :meth:`ConnectionFactory.create_connection`; see the module docstring
    for its sockets and threads. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, factory: ConnectionFactory, options: Dict[str, Any],
                 timeout_s: Optional[float] = None) -> None:
        self.factory = factory
        self.options = options
        self.number = next(_connection_ids)
        uri = factory.resolved.uri
        self._endpoint = uri.endpoints[0]
        self._endpoints = list(uri.endpoints)
        #: the failover URI's reconnect policy, or None for a plain stomp:// URI
        self.reconnect_policy: Optional[ReconnectPolicy] = ReconnectPolicy.from_uri(uri) if uri.failover else None
        if timeout_s is None and self.reconnect_policy is not None and self.reconnect_policy.timeout_ms >= 0:
            timeout_s = self.reconnect_policy.timeout_ms / 1000.0  # as in ActiveMQ: it bounds start() too
        self._transport_listener: Any = None
        self._lock = threading.RLock()
        self._sessions: List[Session] = []
        self._consumers: Dict[str, MessageConsumer] = {}
        self._temporaries: Dict[str, TemporaryDestination] = {}
        self._ids = itertools.count(1)
        self._started = False
        self._closed = False
        self._failure: Optional[BaseException] = None
        self._exception_listener: Optional[ExceptionListener] = None
        self._on_usage_full: Optional[UsageListener] = None
        self._on_usage_not_full: Optional[UsageListener] = None
        self.close_timeout_s = (options.get("close_timeout_ms") or 15000) / 1000.0
        #: seconds a call waits for the broker's answer when it names no timeout of its own
        #: (creating a consumer: the SUBSCRIBE's RECEIPT): ``jms.sendTimeout``, else (0)
        #: ``jms.closeTimeout``
        self.request_timeout_s = (options.get("send_timeout_ms") or 0) / 1000.0 or self.close_timeout_s
        self._ack_receipt_timeout_s: Optional[float] = None
        if options.get("send_acks_async") is False:  # acknowledge() waits for the ACK's RECEIPT
            self._ack_receipt_timeout_s = (options.get("send_timeout_ms") or 0) / 1000.0 or self.close_timeout_s
        #: how consumers redeliver rolled-back messages (jms.redeliveryPolicy.*); may be replaced
        self.redelivery_policy = RedeliveryPolicy(
            maximum_redeliveries=options["maximum_redeliveries"],
            initial_redelivery_delay_ms=options["initial_redelivery_delay_ms"],
            redelivery_delay_ms=options["redelivery_delay_ms"],
            use_exponential_back_off=options["use_exponential_back_off"],
            back_off_multiplier=options["back_off_multiplier"],
            maximum_redelivery_delay_ms=options["maximum_redelivery_delay_ms"])
        self._producer_link: Optional[Link] = None
        self._consumer_link = Link(self, "consumer", self._endpoint, options, options.get("client_id"),
                                   self._route, self._endpoints, self.reconnect_policy)
        self._consumer_link.open(timeout_s)

    # ------------------------------------------------------------ properties

    @property
    def client_id(self) -> Optional[str]:
        """The JMS client id (``jms.clientID``), or None."""
        value: Optional[str] = self.options.get("client_id")
        return value

    @property
    def server(self) -> str:
        """CONNECTED's ``server`` header, e.g. ``ActiveMQ/5.17.2``."""
        return self._consumer_link.server

    @property
    def is_started(self) -> bool:
        return self._started

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def failure(self) -> Optional[BaseException]:
        """Why the connection broke (a socket lost, a heart-beat timeout), or None."""
        return self._failure

    def threads(self) -> List[threading.Thread]:
        """The threads this connection runs now (see the module docstring)."""
        out = list(self._consumer_link.threads())
        if self._producer_link is not None:
            out += self._producer_link.threads()
        for session in self.sessions():
            if session.state.thread is not None:
                out.append(session.state.thread)
        return [t for t in out if t.is_alive()]

    # ------------------------------------------------------------ listeners

    def set_exception_listener(self, listener: Optional[ExceptionListener]) -> None:
        """``listener(exc)`` hears of what goes wrong asynchronously: the connection
        lost (:class:`ConnectionClosedException`; the connection is then broken --
        close it and make a new one), an ERROR frame no call is waiting for
        (:class:`BrokerError`), an asynchronous send refused for lack of space
        (:class:`ResourceAllocationError`). It runs on the connection's dispatcher
        thread, never on the reader."""
        self._exception_listener = listener

    @property
    def exception_listener(self) -> Optional[ExceptionListener]:
        return self._exception_listener

    def set_transport_listener(self, listener: Any) -> None:
        """With a ``failover:`` URI, ``listener.on_transport_interrupted()`` runs when
        a socket of this connection is lost (a new one is being sought; sends
        wait), ``listener.on_transport_resumed()`` when a new socket is connected
        (ActiveMQ's ``TransportListener``). Either method may be missing. They run
        on the dispatcher thread of the socket concerned."""
        self._transport_listener = listener

    def set_usage_listener(self, on_usage_full: Optional[UsageListener] = None,
                           on_usage_not_full: Optional[UsageListener] = None) -> None:
        """Producer flow control callbacks (the Java client's usage listeners):
        ``on_usage_full(event)`` when the broker's RECEIPT for a send is later than
        ``usage_full_after_ms`` (ActiveMQ holds a blocked producer's receipts back
        while its memory is full), ``on_usage_not_full(event)`` when receipts flow
        again. ``event`` is a :class:`UsageEvent`. They run on the dispatcher
        thread of the socket the send went on."""
        self._on_usage_full = on_usage_full
        self._on_usage_not_full = on_usage_not_full

    # ------------------------------------------------------------ life

    def create_session(self, transacted: bool = False, acknowledge_mode: int = AUTO_ACKNOWLEDGE) -> Session:
        """A new session with its own dispatch thread.

        Args:
            transacted (bool): ACKs and SENDs in a STOMP transaction until
                :meth:`Session.commit` (``acknowledge_mode`` is then ignored).
            acknowledge_mode (int): AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE,
                DUPS_OK_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE or AT_MOST_ONCE.

        Raises:
            IllegalStateError: the connection is closed.
            ValueError: an unknown acknowledge mode.
        """
        if transacted:
            acknowledge_mode = SESSION_TRANSACTED
        elif acknowledge_mode not in ACKNOWLEDGE_MODES or acknowledge_mode == SESSION_TRANSACTED:
            raise ValueError("acknowledge_mode must be one of AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE, "
                             "DUPS_OK_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE, AT_MOST_ONCE (or transacted=True), "
                             "got %r" % (acknowledge_mode,))
        with self._lock:
            self.check_open()
            session = Session(self, acknowledge_mode, next(self._ids))
            self._sessions.append(session)
        return session

    def start(self) -> None:
        """Start (or restart) delivery to listeners and ``receive()``."""
        self.check_open()
        self._started = True
        for session in self.sessions():
            session.state.wake()

    def stop(self) -> None:
        """Pause delivery; returns once no listener of this connection runs. Messages
        keep arriving into the consumers' buffers (up to the prefetch).

        Raises:
            IllegalStateError: called from a listener of this connection (JMS forbids it).
        """
        sessions = self.sessions()
        if any(session.state.on_session_thread() for session in sessions):
            raise IllegalStateError("stop() from a listener of the same connection would wait for itself")
        self._started = False
        for session in sessions:
            session.state.wait_idle()

    def close(self) -> None:
        """Close every session (rolling back open transactions), then both sockets
        (DISCONNECT, bounded by ``close_timeout_ms``); every thread of the
        connection ends. Temporary destinations go with the consumer socket.
        Safe to call more than once, and from a listener."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._started = False
        for session in self.sessions():
            try:
                session.close()
            except StompException as exc:
                log.debug("closing %r: %s", session, exc)
        for link in (self._producer_link, self._consumer_link):
            if link is not None:
                link.close(self.close_timeout_s)

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("started" if self._started else "stopped")
        return "<jms.Connection #%d %s:%s %s>" % (self.number, self._endpoint.host, self._endpoint.port, state)

    # ------------------------------------------------------------ for sessions

    def check_open(self) -> None:
        """Raises IllegalStateError (closed) or ConnectionClosedException (broken)."""
        if self._closed:
            raise IllegalStateError("the connection is closed")
        if self._failure is not None:
            raise ConnectionClosedException("the connection is broken: %s" % (self._failure,))

    def sessions(self) -> List[Session]:
        """The open sessions (a copy)."""
        with self._lock:
            return list(self._sessions)

    def remove_session(self, session: Session) -> None:
        """A session closed: forget it."""
        with self._lock:
            if session in self._sessions:
                self._sessions.remove(session)

    @property
    def consumer_link(self) -> Link:
        return self._consumer_link

    def producer_link(self) -> Link:
        """The link non-transacted producers send on (opened on first use)."""
        if not self.options.get("separate_producer_socket", True):
            return self._consumer_link
        with self._lock:
            self.check_open()
            if self._producer_link is None:
                link = Link(self, "producer", self._endpoint, self.options, None, None,
                            self._endpoints, self.reconnect_policy)
                link.open()
                self._producer_link = link
            return self._producer_link

    def register_consumer(self, sub_id: str, consumer: MessageConsumer) -> None:
        """Route the MESSAGEs of subscription ``sub_id`` to ``consumer``."""
        with self._lock:
            self._consumers[sub_id] = consumer

    def unregister_consumer(self, sub_id: str) -> None:
        """Stop routing subscription ``sub_id`` (its MESSAGEs are dropped)."""
        with self._lock:
            self._consumers.pop(sub_id, None)

    def next_id(self) -> int:
        """A number unique in this connection (ids of sessions, subscriptions)."""
        return next(self._ids)

    def _route(self, frame: Frame) -> None:
        """Reader thread of the consumer link: a MESSAGE the manager counted."""
        consumer = self._consumers.get(frame.headers.get("subscription", ""))
        if consumer is None:
            log.debug("dropping a MESSAGE for closed subscription %r", frame.headers.get("subscription"))
            return
        consumer.deliver(frame)

    def is_from_lost_socket(self, frame: Frame) -> bool:
        """True for a MESSAGE that came on a consumer socket lost since
        (failover): it must not be handed over or acked; the broker redelivers it."""
        link = self._consumer_link
        return link.reconnector is not None and link.delivered_on_lost_socket(frame)

    def ack_receipt_timeout_s(self) -> Optional[float]:
        """Seconds acknowledge() waits for an ACK's RECEIPT (``jms.sendAcksAsync=false``),
        or None: it does not ask for one."""
        return self._ack_receipt_timeout_s

    def is_local_message(self, frame: Frame) -> bool:
        """True when ``frame`` was sent by this connection's producer socket (for
        ``no_local`` consumers: the broker only knows the consumer socket's own)."""
        link = self._producer_link
        conn_id = link.broker_connection_id if link is not None else None
        message_id = frame.headers.get("message-id", "")
        return bool(conn_id) and message_id.startswith(str(conn_id) + ":")

    # temporary destinations

    def create_temporary(self, topic: bool) -> TemporaryDestination:
        """A new temporary queue (or topic) of this connection.

        Raises:
            IllegalStateError / ConnectionClosedException: see :meth:`check_open`.
        """
        self.check_open()
        name = "amqstomp-%d-%s" % (self.number, uuid.uuid4().hex[:12])
        temp: TemporaryDestination = TemporaryTopic(name, owner=self) if topic else TemporaryQueue(name, owner=self)
        with self._lock:
            self._temporaries[temp.stomp_name] = temp
        return temp

    def lookup_temporary(self, stomp_name: str) -> Optional[TemporaryDestination]:
        """This connection's temporary destination of that STOMP name, or None."""
        return self._temporaries.get(stomp_name)

    def is_own_temporary(self, destination: Optional[Destination]) -> bool:
        """True for a temporary destination this connection made."""
        return (isinstance(destination, TemporaryDestination) and not destination.remote
                and destination.owner is self)

    def delete_temporary(self, temp: TemporaryDestination) -> None:
        """Forget ``temp`` (:meth:`TemporaryDestination.delete`).

        Raises:
            IllegalStateError: a consumer of this connection still consumes from it.
        """
        with self._lock:
            for consumer in self._consumers.values():
                if consumer.destination == temp:
                    raise IllegalStateError("%s still has a consumer; close it first" % (temp,))
            self._temporaries.pop(temp.stomp_name, None)

    # ------------------------------------------------------------ link events (dispatcher threads)

    def on_error_frame(self, link: Link, frame: Frame) -> None:
        """Dispatcher thread of ``link``: an ERROR frame no call waits for goes
        to the exception listener (one that answers a CONNECT comes as
        ``on_connect_refused`` instead: that connect attempt raises it; one
        that answers a call that waits for it, the call raises)."""
        receipt = frame.headers.get("receipt-id")
        if receipt is not None and not receipt.startswith(ASYNC_RECEIPT_PREFIX):
            return  # a waiting call raises it
        exc: BaseException
        if is_resource_allocation_error(frame):
            exc = ResourceAllocationError("broker refused an asynchronous send", frame)
        else:
            exc = BrokerError("broker error on the %s socket" % link.role, frame)
        self.report(exc)

    def on_transport_event(self, link: Link, name: str) -> None:
        """Dispatcher thread of ``link``: on_transport_interrupted / on_transport_resumed."""
        if name == "on_transport_interrupted":
            log.info("%r: %s socket lost; failing over", self, link.role)
        fn = getattr(self._transport_listener, name, None)
        if fn is None:
            return
        try:
            fn()
        except BaseException:  # a listener must not end the dispatcher thread
            log.exception("transport listener %s raised", name)

    def on_link_resumed(self, link: Link) -> None:
        """Failover thread: ``link`` has a new socket (CONNECTED arrived). The
        consumer link's subscriptions are sent again with their ids and headers,
        each waiting for its RECEIPT; one the broker refuses is reported to the
        exception listener once (not retried). Queue browses are dropped, not
        replayed (the broker would browse again from the head of the queue): their
        iteration raises BrowseInterruptedError. A browse whose RECEIPT had not come
        yet (nothing browsed) is left to its consumer, which SUBSCRIBEs it on the new
        socket."""
        manager = link.manager
        if manager is None:
            return

        def skip(sub: Any) -> bool:  # browses: dropped (or left to their consumer), never replayed
            if is_reply_subscription(link, sub.id):
                return True  # RabbitMQ's own subscription of a temporary queue: never SUBSCRIBEd
            if str(sub.headers.get("browser")) != "true":
                return False
            with self._lock:
                browsing = self._consumers.get(sub.id)
            if browsing is not None and browsing.subscriber.browse_seq is None and not browsing.closed:
                return True  # its RECEIPT had not come (nothing browsed): its consumer sends it again
            manager.discard(sub.id)
            if browsing is not None:
                browsing.browse_interrupted()
            return True

        def refused(sub: Any, exc: BrokerError) -> None:
            self.report(BrokerError("subscription to %s refused after failover (its consumer gets no more "
                                    "messages; close it): %s" % (sub.destination, exc), exc.frame))

        link.client.replay(manager, link.connect_timeout_s, "resubscribe", skip, refused)

    def on_link_lost(self, link: Link, gave_up: Optional[BaseException] = None) -> None:
        """Failover or dispatcher thread of ``link``: its socket is lost for good
        (no failover, or the failover gave up): the connection is broken, the
        other link is closed, waiters wake and the exception listener hears of it."""
        if link.closing or self._closed:
            return
        reason = link.close_reason()
        if gave_up is not None:
            reason = "failover gave up: %s" % gave_up
        if link.heartbeat_timed_out:
            reason = "heart-beat timeout (%s)" % reason
        exc = ConnectionClosedException("the %s socket of %r was lost: %s" % (link.role, self, reason))
        self._failure = exc
        for other in (self._consumer_link, self._producer_link):
            if other is not None and other is not link:
                other.closing = True
                if other.reconnector is not None:
                    other.reconnector.disarm(0.0)
                other.transport.close(None, reason="the %s socket was lost" % link.role)
        for session in self.sessions():
            session.state.wake()
        self.report(exc)

    def report(self, exc: BaseException) -> None:
        """Hand ``exc`` to the exception listener (logged when there is none);
        what the listener raises is logged, not raised."""
        listener = self._exception_listener
        if listener is None:
            log.warning("%r: %s (no exception listener)", self, exc)
            return
        try:
            listener(exc)
        except BaseException:  # a listener must not end the dispatcher thread
            log.exception("exception listener %r raised", listener)

    def on_usage(self, event: UsageEvent) -> None:
        """Dispatcher thread: producer flow control began (``event.full``) or
        ended; calls the usage listener."""
        fn = self._on_usage_full if event.full else self._on_usage_not_full
        if event.full:
            log.info("%r: producer flow control: %s", self, event)
        if fn is None:
            return
        try:
            fn(event)
        except BaseException:
            log.exception("usage listener %r raised", fn)
