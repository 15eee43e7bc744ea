"""The state a :class:`~amqstomp.jms.Connection` shares with its sessions, its
links and its temporary destinations: :class:`ConnectionState` (one per
connection: its options and timeouts, its two links, its sessions, the
consumers its MESSAGEs are routed to, its temporary destinations, whether it
is started, closed or broken, its listeners; and what the links report:
ERROR frames, transport events, a socket resumed or lost).

The public :class:`~amqstomp.jms.Connection` is the API over it; sessions,
consumers, producers, browsers, transactions and links hold a reference to the
same :class:`ConnectionState` and collaborate through it, never through the
public class.

Licensed under the Apache License, Version 2.0.
"""
import contextlib
import itertools
import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Set

from ..codec import Frame
from ..exception import BrokerError, ConnectionClosedException
from .._core.backoff import ReconnectPolicy
from .._core.lifecycle import CLOSING, ConnectionLifecycle, Phase
from ..flow import RedeliveryPolicy
from .._core.settle import DROP_DISCONNECTED, Subscribed, from_lost_socket, hand_over
from ._subscriber import is_reply_subscription
from .destination import Destination, TemporaryDestination, TemporaryQueue, TemporaryTopic
from .exceptions import IllegalStateError, ResourceAllocationError, is_resource_allocation_error
from .link import ASYNC_RECEIPT_PREFIX, Link, UsageEvent

if TYPE_CHECKING:  # pragma: no cover - annotations only: these modules import this one
    from ._state import SessionState
    from .connection import ConnectionFactory
    from .consumer import ConsumerCore

__all__ = ["ConnectionState", "ExceptionListener", "UsageListener"]

log = logging.getLogger("amqstomp.jms.connection")

ExceptionListener = Callable[[BaseException], Any]
UsageListener = Callable[[UsageEvent], Any]

_connection_ids = itertools.count(1)


class ConnectionState:
    """What a connection shares with its sessions, links and temporary destinations
    (see the module docstring). Made by :class:`~amqstomp.jms.Connection`, which
    then calls :meth:`open`.

    Attributes:
        factory (ConnectionFactory): the factory that made the connection.
        options (dict): the connection's resolved options (username/password included).
        number (int): the connection's number in this process (thread names, ids).
        reconnect_policy (ReconnectPolicy | None): the failover URI's, or None.
        close_timeout_s (float): ``jms.closeTimeout`` in seconds: what a whole close
            (of the connection, a session, a consumer) may wait, all its steps together
            (:meth:`within`, :meth:`wait_s`).
        request_timeout_s (float): seconds a call waits for the broker's answer when it
            names no timeout of its own (the SUBSCRIBE's RECEIPT): ``jms.sendTimeout``,
            else (0) ``jms.closeTimeout``.
        ack_receipt_timeout_s (float | None): seconds an ACK waits for its RECEIPT
            (``jms.sendAcksAsync=false``), or None: it asks for none.
        redelivery_policy (RedeliveryPolicy): how consumers redeliver rolled-back messages.
        lock (threading.RLock): guards the sessions, consumers, temporaries, links.
        consumer_link (Link): the consumer socket (once :meth:`open` made it).
        started (bool): delivery to listeners and ``receive()`` runs (``start()``/``stop()``).
        life (ConnectionLifecycle): the connection's life (opened, closed, broken and why), the
            core's one state (:mod:`amqstomp._core.lifecycle`); read by others (the send path tests
            ``life.phase``), stepped only here (:meth:`open`, :meth:`close`, :meth:`on_link_lost`).
        closed (bool), failure (BaseException | None): its questions (properties).
        exception_listener, transport_listener, on_usage_full, on_usage_not_full: the
            listeners the application set (:class:`~amqstomp.jms.Connection`'s setters).
    """

    def __init__(self, factory: "ConnectionFactory", options: Dict[str, Any], timeout_s: Optional[float]) -> None:
        self.factory = factory
        self.options = options
        self.number = next(_connection_ids)
        uri = factory.resolved.uri
        self.endpoint = uri.endpoints[0]
        self.endpoints = list(uri.endpoints)
        self.reconnect_policy: Optional[ReconnectPolicy] = ReconnectPolicy.from_uri(uri) if uri.failover else None
        if timeout_s is None and self.reconnect_policy is not None and self.reconnect_policy.timeout_ms >= 0:
            timeout_s = self.reconnect_policy.timeout_ms / 1000.0  # as in ActiveMQ: it bounds start() too
        self.open_timeout_s = timeout_s
        self.transport_listener: Any = None
        self.lock = threading.RLock()
        #: the sockets lost and not connected again yet (:meth:`on_transport_event`), under ``lock``
        self._interrupted_links: Set[Link] = set()
        self._sessions: List["SessionState"] = []
        self._consumers: Dict[str, "ConsumerCore"] = {}
        self._temporaries: Dict[str, TemporaryDestination] = {}
        self._ids = itertools.count(1)
        self.started = False
        #: opened, closed, broken and why: the one state (:mod:`amqstomp._core.lifecycle`), stepped under _life_lock
        self.life = ConnectionLifecycle()
        self._life_lock = threading.Lock()  # held only while a step is applied (never while calling out)
        self.exception_listener: Optional[ExceptionListener] = None
        self.on_usage_full: Optional[UsageListener] = None
        self.on_usage_not_full: Optional[UsageListener] = None
        self.close_timeout_s = (options.get("close_timeout_ms") or 15000) / 1000.0
        self.request_timeout_s = (options.get("send_timeout_ms") or 0) / 1000.0 or self.close_timeout_s
        self.ack_receipt_timeout_s: Optional[float] = None
        if options.get("send_acks_async") is False:  # acknowledge() waits for the ACK's RECEIPT
            self.ack_receipt_timeout_s = (options.get("send_timeout_ms") or 0) / 1000.0 or self.close_timeout_s
        self.redelivery_policy = RedeliveryPolicy(
            maximum_redeliveries=options["maximum_redeliveries"],
            initial_redelivery_delay_ms=options["initial_redelivery_delay_ms"],
            redelivery_delay_ms=options["redelivery_delay_ms"],
            use_exponential_back_off=options["use_exponential_back_off"],
            back_off_multiplier=options["back_off_multiplier"],
            maximum_redelivery_delay_ms=options["maximum_redelivery_delay_ms"])
        self._deadline = threading.local()  # the deadline of the call under way on each thread
        self._producer_link: Optional[Link] = None
        self.consumer_link = Link(self, "consumer", self.endpoint, options, options.get("client_id"),
                                  self.route, self.endpoints, self.reconnect_policy)
        self.consumer_link.client.held_by_application = self.held_on  # what a rebalance waits for

    @contextlib.contextmanager
    def within(self, seconds: Optional[float]) -> Iterator[None]:
        """Every wait of the call under way on this thread (a close, a commit) shares
        one deadline, ``seconds`` from now (None: none of its own), read by
        :meth:`wait_s`; a call inside another keeps the outer, earlier deadline (a
        session's close inside the connection's). Here ``jms.closeTimeout`` and
        ``jms.sendTimeout`` bound a whole call, not each of its frames (ActiveMQ's
        Java client closes with one ShutdownInfo, waited for closeTimeout; a STOMP
        close needs an ABORT, UNSUBSCRIBEs and DISCONNECTs)."""
        mine = seconds is not None and getattr(self._deadline, "at", None) is None
        if seconds is not None and mine:
            self._deadline.at = time.monotonic() + seconds
        try:
            yield
        finally:
            if mine:
                self._deadline.at = None

    def wait_s(self, seconds: Optional[float]) -> Optional[float]:
        """Seconds one wait may take: ``seconds`` (None: no bound of its own), cut to
        what is left of the deadline of the call under way on this thread
        (:meth:`within`; 0 once it passed)."""
        at: Optional[float] = getattr(self._deadline, "at", None)
        if at is None:
            return seconds
        left = max(0.0, at - time.monotonic())
        return left if seconds is None else min(seconds, left)

    def close_wait_s(self) -> float:
        """Seconds one wait of a close may take: ``jms.closeTimeout``, cut to what is
        left of the close under way (:meth:`wait_s`)."""
        seconds = self.wait_s(self.close_timeout_s)
        assert seconds is not None
        return seconds

    def open(self) -> None:
        """Connect the consumer socket (CONNECT, CONNECTED; see :meth:`Link.open`)."""
        with self._life_lock:
            self.life.connect()
        try:
            self.consumer_link.open(self.open_timeout_s)
        except BaseException:
            with self._life_lock:
                self.life.loop_ended()  # not opened (or broken meanwhile: failed)
            raise
        with self._life_lock:
            if self.life.phase is Phase.CONNECTING:
                self.life.up()
            else:  # broken (or closed) while it opened: it stays so
                self.life.loop_ended()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (the connection's ``close()``)."""
        return self.life.phase in CLOSING

    @property
    def failure(self) -> Optional[BaseException]:
        """Why the connection broke (kept after a close), or None."""
        return self.life.cause

    def close(self) -> bool:
        """Mark the connection closed (the first call; the connection's ``close()`` then
        closes its sessions and links). Returns False when it was closed already."""
        with self._life_lock:
            if self.life.closing:
                return False
            self.life.close()
        return True

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("started" if self.started else "stopped")
        return "<jms.Connection #%d %s:%s %s>" % (self.number, self.endpoint.host, self.endpoint.port, state)

    @property
    def client_id(self) -> Optional[str]:
        value: Optional[str] = self.options.get("client_id")
        return value

    def check_open(self) -> None:
        """Raises IllegalStateError (closed) or ConnectionClosedException (broken)."""
        life = self.life  # (:attr:`closed` and :attr:`failure` read inline: two Python calls less per check)
        if life.phase in CLOSING:
            raise IllegalStateError("the connection is closed")
        if life.cause is not None:
            raise ConnectionClosedException("the connection is broken: %s" % (life.cause,))

    # ------------------------------------------------------------ sessions, links

    def sessions(self) -> List["SessionState"]:
        """The open sessions' states (a copy)."""
        with self.lock:
            return list(self._sessions)

    def add_session(self, session: "SessionState") -> None:
        """A session was made."""
        with self.lock:
            self._sessions.append(session)

    def remove_session(self, session: "SessionState") -> None:
        """A session closed: forget it."""
        with self.lock:
            if session in self._sessions:
                self._sessions.remove(session)

    def links(self) -> List[Link]:
        """The links opened so far: the consumer link, then the producer link."""
        producer = self._producer_link
        return [self.consumer_link] + ([producer] if producer is not None else [])

    def producer_link(self) -> Link:
        """The link non-transacted producers send on (opened on first use)."""
        if not self.options.get("separate_producer_socket", True):
            return self.consumer_link
        with self.lock:
            self.check_open()
            if self._producer_link is None:
                link = Link(self, "producer", self.endpoint, self.options, None, None,
                            self.endpoints, self.reconnect_policy)
                link.open()
                self._producer_link = link
            return self._producer_link

    def next_id(self) -> int:
        """A number unique in this connection (ids of sessions, subscriptions)."""
        return next(self._ids)

    # ------------------------------------------------------------ consumers

    def register_consumer(self, sub_id: str, consumer: "ConsumerCore") -> None:
        """Route the MESSAGEs of subscription ``sub_id`` to ``consumer``."""
        with self.lock:
            self._consumers[sub_id] = consumer

    def unregister_consumer(self, sub_id: str) -> None:
        """Stop routing subscription ``sub_id`` (its MESSAGEs are dropped)."""
        with self.lock:
            self._consumers.pop(sub_id, None)

    def consumers(self) -> Dict[str, "ConsumerCore"]:
        """Subscription id -> the consumer its MESSAGEs go to (a copy)."""
        with self.lock:
            return dict(self._consumers)

    def route(self, frame: Frame) -> None:
        """Reader thread of the consumer link: a MESSAGE the manager counted."""
        consumer = self._consumers.get(frame.headers.get("subscription", ""))
        if consumer is None:
            log.debug("dropping a MESSAGE for closed subscription %r", frame.headers.get("subscription"))
            manager = self.consumer_link.manager
            if manager is not None:
                manager.drop(frame)  # out of the buffer bound's count
            return
        consumer.deliver(frame)

    def is_from_lost_socket(self, frame: Frame) -> bool:
        """True for a MESSAGE that came on a consumer socket lost since
        (failover): it must not be handed over or acked; the broker redelivers it
        (the settlement core's rule, :func:`amqstomp._core.settle.from_lost_socket`)."""
        link = self.consumer_link
        if link.reconnector is None:  # no failover: never (the rule's first term, without its call)
            return False
        return from_lost_socket(frame.link_seq, True, link.transport)

    def hands_over(self, frame: Frame, subscribed: Subscribed) -> bool:
        """Session thread: whether a MESSAGE of a subscription (its STOMP ``ack`` mode in
        ``subscribed``) still goes to the application (the settlement core's
        :func:`amqstomp._core.settle.hand_over`; a consumer's own close is its own):
        not one of a consumer socket lost since in an acknowledged subscription."""
        link = self.consumer_link
        return hand_over(frame.link_seq, 0, subscribed, link.reconnector is not None,
                         link.transport, link.client.moving_seq) < DROP_DISCONNECTED

    def held_on(self, seq: int) -> int:
        """Messages consumer socket ``seq`` delivered that the application was handed and
        has not acknowledged yet (CLIENT, INDIVIDUAL, transacted: each consumer's
        ``delivered``), what a rebalance waits for before it moves
        (:mod:`amqstomp._core.rebalance`)."""
        return sum(consumer.held_on(seq) for consumer in self.consumers().values())

    def is_local_message(self, frame: Frame) -> bool:
        """True when ``frame`` was sent by this connection's producer socket (for
        ``no_local`` consumers: the broker only knows the consumer socket's own)."""
        link = self._producer_link
        conn_id = link.broker_connection_id if link is not None else None
        message_id = frame.headers.get("message-id", "")
        return bool(conn_id) and message_id.startswith(str(conn_id) + ":")

    # ------------------------------------------------------------ temporary destinations

    def create_temporary(self, topic: bool) -> TemporaryDestination:
        """A new temporary queue (or topic) of this connection.

        Raises:
            IllegalStateError / ConnectionClosedException: see :meth:`check_open`.
        """
        self.check_open()
        name = "amqstomp-%d-%s" % (self.number, uuid.uuid4().hex[:12])
        temp: TemporaryDestination = TemporaryTopic(name, owner=self) if topic else TemporaryQueue(name, owner=self)
        with self.lock:
            self._temporaries[temp.stomp_name] = temp
        return temp

    def lookup_temporary(self, stomp_name: str) -> Optional[TemporaryDestination]:
        """This connection's temporary destination of that STOMP name, or None."""
        return self._temporaries.get(stomp_name)

    def is_own_temporary(self, destination: Optional[Destination]) -> bool:
        """True for a temporary destination this connection made (and did not delete)."""
        return (isinstance(destination, TemporaryDestination) and not destination.remote
                and self._temporaries.get(destination.stomp_name) is destination)

    def delete_temporary(self, temp: TemporaryDestination) -> None:
        """Forget ``temp`` (:meth:`TemporaryDestination.delete`).

        Raises:
            IllegalStateError: a consumer of this connection still consumes from it.
        """
        with self.lock:
            for consumer in self._consumers.values():
                if consumer.destination == temp:
                    raise IllegalStateError("%s still has a consumer; close it first" % (temp,))
            self._temporaries.pop(temp.stomp_name, None)

    # ------------------------------------------------------------ link events (dispatching threads)

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
        """Dispatcher thread of ``link``: on_transport_interrupted / on_transport_resumed,
        told to the transport listener once per outage of the connection, as ActiveMQ's
        one transport per connection does (``TransportListener``): interrupted when the
        first of its sockets is lost, resumed when the last of those lost is connected
        again (a socket that connects with none lost: resumed, as before)."""
        with self.lock:
            lost = self._interrupted_links
            if name == "on_transport_interrupted":
                tell = not lost
                lost.add(link)
            else:
                tell = not lost or (link in lost and len(lost) == 1)
                lost.discard(link)
        if name == "on_transport_interrupted":
            log.info("%r: %s socket lost; failing over", self, link.role)
        if not tell:
            return
        fn = getattr(self.transport_listener, name, None)
        if fn is None:
            return
        try:
            fn()
        except BaseException:  # a listener must not end the dispatching thread
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
            with self.lock:
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
        """Failover or dispatching thread of ``link``: its socket is lost for good
        (no failover, or the failover gave up): the connection is broken, the
        other link is closed, waiters wake and the exception listener hears of it."""
        if link.ended_by_client():
            return
        reason = link.close_reason()
        if gave_up is not None:
            reason = "failover gave up: %s" % gave_up
        if link.heartbeat_timed_out:
            reason = "heart-beat timeout (%s)" % reason
        exc = ConnectionClosedException("the %s socket of %r was lost: %s" % (link.role, self, reason))
        with self._life_lock:
            if self.life.closing:
                return  # closed by the application meanwhile: its close ends the rest
            self.life.fail(exc)
        for other in self.links():
            if other is not link:
                other.transport.close_requested()
                if other.reconnector is not None:
                    other.reconnector.disarm(0.0)
                other.transport.close(None, reason="the %s socket was lost" % link.role)
        for session in self.sessions():
            session.wake()
        self.report(exc)

    def report(self, exc: BaseException) -> None:
        """Hand ``exc`` to the exception listener (logged when there is none);
        what the listener raises is logged, not raised."""
        listener = self.exception_listener
        if listener is None:
            log.warning("%r: %s (no exception listener)", self, exc)
            return
        try:
            listener(exc)
        except BaseException:  # a listener must not end the dispatching thread
            log.exception("exception listener %r raised", listener)

    def on_usage(self, event: UsageEvent) -> None:
        """Dispatcher thread: producer flow control began (``event.full``) or
        ended; calls the usage listener."""
        fn = self.on_usage_full if event.full else self.on_usage_not_full
        if event.full:
            log.info("%r: producer flow control: %s", self, event)
        if fn is None:
            return
        try:
            fn(event)
        except BaseException:
            log.exception("usage listener %r raised", fn)
