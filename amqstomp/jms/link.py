"""One socket of a :class:`amqstomp.jms.Connection` (a *link*).

A link is a :class:`amqstomp.transport.Transport` (reader, dispatcher and timer
threads), the CONNECT/DISCONNECT exchange, and what the JMS layer adds on top:

* on the **consumer link**, a :class:`amqstomp.subscription.SubscriptionManager`
  that counts prefetch windows and decides batched ACKs; the MESSAGE frames it
  would queue for the transport's listeners go to the sessions instead
  (:class:`_ManagerPort` sits between the two);
* on every link, a :class:`SendTracker`: receipts of SENDs in flight, the
  usage-full detector (a RECEIPT later than ``usage_full_after_ms``) and the
  errors of asynchronous sends;
* a :class:`_LinkListener` on the transport's dispatcher thread, which is the
  connection's "executor" (as in the Java client): exception listener and
  usage callbacks run there, never on the reader.

With a ``failover:`` URI a link has a :class:`amqstomp.failover.Reconnector`:
a lost socket is replaced (same CONNECT, same client id), the consumer link's
subscriptions are sent again (each gated on its RECEIPT), frames wait for the
new socket (bounded), a synchronous SEND whose socket was lost before its
RECEIPT came is written again on the new one (at-least-once), and ACKs or
transactional frames of the lost socket's messages and transactions are never
written on the new one (the broker redelivers those messages; a COMMIT of a
transaction begun on the lost socket raises TransactionRolledBackError).

Licensed under the Apache License, Version 2.0.
"""
import itertools
import logging
import ssl
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Mapping, Optional, Tuple

from ..codec import Frame, FrameHead
from ..exception import (
    BrokerError,
    ConnectFailedException,
    ConnectionClosedException,
    NotConnectedException,
    ReceiptTimeout,
    AcknowledgeInDoubtError,
    AcknowledgeInterruptedError,
    StompException,
    TransactionInDoubtError,
    TransactionRolledBackError,
)
from ..failover import ReconnectPolicy, Reconnector, SocketLedger
from ..flow import PrefetchPolicy
from .._io.channel import tls_context
from .._protocol.frames import ACCEPT_VERSIONS, ack_headers, connect_headers, is_activemq_classic
from ..subscription import SubscriptionManager
from ..transport import Transport, TimerHandle
from ..uri import Endpoint
from .exceptions import ResourceAllocationError, is_resource_allocation_error

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection

__all__ = ["Link", "SendTracker", "ProducerWindow", "UsageEvent", "ASYNC_RECEIPT_PREFIX", "message_ack_headers"]

log = logging.getLogger("amqstomp.jms")

#: Receipt ids of asynchronous sends start with this; an ERROR carrying one goes to
#: the exception listener (a synchronous send raises it instead).
ASYNC_RECEIPT_PREFIX = "a-"
_SYNC_RECEIPT_PREFIX = "s-"

#: Times a synchronous SEND is written again on a new socket (failover) before it fails.
MAX_SEND_RETRIES = 3


class UsageEvent:
    """What ``on_usage_full`` / ``on_usage_not_full`` are told.

    Attributes:
        full (bool): True for usage full, False for not full.
        destination (str): STOMP destination of the send whose receipt was late
            (full) or has just arrived (not full).
        waited_s (float): seconds that send has waited / waited for its receipt.
        pending_sends (int): sends on this socket still waiting for a receipt.
    """

    __slots__ = ("full", "destination", "waited_s", "pending_sends")

    def __init__(self, full: bool, destination: str, waited_s: float, pending_sends: int) -> None:
        self.full = full
        self.destination = destination
        self.waited_s = waited_s
        self.pending_sends = pending_sends

    def __repr__(self) -> str:
        return "UsageEvent(full=%r, destination=%r, waited_s=%.3f, pending_sends=%d)" % (
            self.full, self.destination, self.waited_s, self.pending_sends)


class ProducerWindow:
    """Bytes of one producer's asynchronous sends that await a RECEIPT
    (ActiveMQ's producerWindowSize): ``send`` blocks while the window is full.

    Not every asynchronous send asks for a receipt: on the producer socket a
    send closes a *chunk* (and asks for one) when the bytes sent since the last
    receipt reach a quarter of the window, and the receipt releases the whole
    chunk. That is exact because ActiveMQ handles the SENDs of one connection in
    order: the ones without a receipt before the one with it (a SEND without a
    receipt is never parked, the broker's reader handles it or waits). On the
    consumer socket every send asks for one (``every_send``), so the broker never
    stops reading that socket (see :class:`SendTracker`).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.chunk_size = max(1, size // 4)
        # bytes sent since the last send that asked for a receipt (the open chunk): only
        # senders change it, without the lock (the common send touches nothing else)
        self.unreceipted = 0
        # under the lock: bytes of the chunks whose receipts are awaited, and their count
        # (the sender adds a chunk when it closes one, the reader takes it off)
        self.closed = 0
        self.chunks = 0
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        # threads in cond.wait, and the least room one of the acquire()s among them
        # needs: a receipt wakes them only when that may be enough (or none is awaited)
        self.waiters = 0
        self.need = 0

    @property
    def in_flight(self) -> int:
        """Bytes sent and not yet covered by a receipt."""
        return self.closed + self.unreceipted

    def acquire(self, nbytes: int, link: "Link", deadline: Optional[float], every_send: bool) -> int:
        """Wait for room for ``nbytes`` and count them in flight. Returns the bytes
        the send's receipt is to release, or 0 when the send asks for no receipt.
        (A send larger than the window goes when nothing else awaits a receipt.)
        Before it waits, the socket's deferred frames are written (the receipts it
        waits for may be theirs).

        The common send -- room, and no chunk to close -- takes no lock: it reads
        ``closed``/``chunks``, which only the lock's holders change (a stale
        value is a larger one: it can only send it to the locked path), and
        adds to ``unreceipted``, which only senders change (two threads sending
        on one producer at once, which JMS does not allow, could lose an
        addition: a receipt then comes a little later, nothing more).
        """
        unreceipted = self.unreceipted + nbytes
        if unreceipted < self.chunk_size and not every_send and (
                not self.chunks or self.closed + unreceipted <= self.size):
            self.unreceipted = unreceipted
            return 0
        flushed = False
        while True:
            with self.lock:
                if not self.chunks or self.closed + self.unreceipted + nbytes <= self.size:
                    return self._count(nbytes, every_send)
                if flushed:
                    self._wait_room(nbytes, link, deadline)
                    return self._count(nbytes, every_send)
            link.transport.flush()  # never under the window's lock: it may block on the socket
            flushed = True

    def _count(self, nbytes: int, every_send: bool) -> int:
        """Under the lock: count a send in the open chunk, closing it when full."""
        unreceipted = self.unreceipted + nbytes
        if not every_send and unreceipted < self.chunk_size:
            self.unreceipted = unreceipted
            return 0
        self.unreceipted = 0
        self.closed += unreceipted
        self.chunks += 1
        return unreceipted

    def _wait_room(self, nbytes: int, link: "Link", deadline: Optional[float]) -> None:
        while self.chunks and self.closed + self.unreceipted + nbytes > self.size:
            self.need = nbytes if not self.waiters else min(self.need, nbytes)
            if link.gone():
                raise ConnectionClosedException("connection closed while waiting for room in the producer "
                                                "window: %s" % link.close_reason())
            wait = 0.5
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ReceiptTimeout("no room in the producer window (%d bytes awaiting receipts) "
                                         "within the send timeout" % self.in_flight)
                wait = min(wait, left)
            self._wait(wait)

    def _wait(self, seconds: float) -> None:
        self.waiters += 1
        try:
            self.cond.wait(seconds)
        finally:
            self.waiters -= 1
            if not self.waiters:
                self.need = 0

    def unsent(self, nbytes: int, chunk: int) -> None:
        """A send counted by ``acquire`` could not be written."""
        with self.cond:
            if chunk:
                self.closed -= chunk
                self.chunks -= 1
                self.unreceipted += chunk - nbytes  # the chunk's other sends went: open again
            else:
                self.unreceipted -= nbytes
            self.cond.notify_all()

    def release(self, chunk: int) -> None:
        """The receipt of a chunk (or the ERROR answering it) came."""
        with self.lock:
            self.closed -= chunk
            self.chunks -= 1
            if self.waiters and (not self.chunks or self.closed + self.unreceipted + self.need <= self.size):
                self.cond.notify_all()

    def drain(self, link: "Link", deadline: Optional[float]) -> bool:
        """Wait until no receipt is awaited (writing the socket's deferred frames
        first); False when the deadline passed first (or the link is gone)."""
        if self.chunks:
            try:
                link.transport.flush()
            except StompException:
                pass  # the socket is down: the loop below tells whether a new one comes (failover)
        with self.cond:
            while self.chunks:
                if link.gone():
                    return False
                wait = 0.5
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    wait = min(wait, left)
                if not self.waiters:
                    self.need = self.size + 1  # wake me only when no receipt is awaited
                self._wait(wait)
            return True


class SendTracker:
    """SENDs of one link awaiting their RECEIPT: usage-full detection and the
    errors of asynchronous sends.

    ActiveMQ (producerFlowControl on, memory full) parks a SEND that asks for a
    receipt and answers it once there is room again, and keeps reading the
    socket meanwhile; a SEND without a receipt instead blocks the connection's
    reader on the broker, so nothing else sent on that socket (ACKs,
    heart-beats, SUBSCRIBE) is read until memory frees up (measured on 5.17.2).
    A receipt later than ``usage_full_after_s`` therefore means "usage full".
    """

    def __init__(self, link: "Link", usage_full_after_s: float) -> None:
        self.link = link
        self.usage_full_after_s = usage_full_after_s
        self.lock = threading.Lock()
        # receipt id -> (monotonic time sent, destination)
        self.outstanding: "OrderedDict[str, Tuple[float, str]]" = OrderedDict()
        self.full = False
        self.changed_at = 0.0  # when `full` last changed
        self.events: Deque[UsageEvent] = deque()
        self.timer: Optional[TimerHandle] = None
        self._ids = itertools.count(1)

    def next_id(self, sync: bool) -> str:
        return "%s%d" % (_SYNC_RECEIPT_PREFIX if sync else ASYNC_RECEIPT_PREFIX, next(self._ids))

    def sent(self, receipt: str, destination: str, future: "Future[Frame]",
             window: Optional[ProducerWindow], nbytes: int) -> None:
        """Track a SEND just written with ``receipt`` (``window``: release ``nbytes`` there)."""
        now = time.monotonic()
        with self.lock:
            self.outstanding[receipt] = (now, destination)
            arm = self.timer is None and self.usage_full_after_s > 0
            if arm:
                self.timer = self._call_later(self.usage_full_after_s)
        future.add_done_callback(lambda f: self._done(receipt, window, nbytes))

    def _call_later(self, delay: float) -> Optional[TimerHandle]:
        try:
            return self.link.transport.call_later(delay, self._check)
        except StompException:
            return None

    def _done(self, receipt: str, window: Optional[ProducerWindow], nbytes: int) -> None:
        """Reader thread (or the sender, when already answered): a receipt, an ERROR or the end."""
        now = time.monotonic()
        event = None
        with self.lock:
            entry = self.outstanding.pop(receipt, None)
            if entry is not None and self.full and self.link.transport.is_connected():
                self.full = False
                self.changed_at = now
                event = UsageEvent(False, entry[1], now - entry[0], len(self.outstanding))
                self.events.append(event)
        if window is not None:
            window.release(nbytes)
        if event is not None:
            self.link.transport.notify("usage_not_full")

    def _check(self) -> None:
        """Timer thread: is the oldest receipt late?"""
        now = time.monotonic()
        post = False
        with self.lock:
            self.timer = None
            if not self.outstanding:
                return
            sent_at, destination = next(iter(self.outstanding.values()))
            since = max(sent_at, self.changed_at)
            if not self.full and now - since >= self.usage_full_after_s:
                self.full = True
                self.changed_at = now
                self.events.append(UsageEvent(True, destination, now - sent_at, len(self.outstanding)))
                post = True
                delay = self.usage_full_after_s
            else:
                delay = max(0.05, since + self.usage_full_after_s - now) if not self.full else self.usage_full_after_s
            self.timer = self._call_later(delay)
        if post:
            self.link.transport.notify("usage_full")

    def pop_event(self) -> Optional[UsageEvent]:
        with self.lock:
            return self.events.popleft() if self.events else None


class _ManagerPort:
    """The transport as the SubscriptionManager sees it: everything is the real
    transport's, except that queued MESSAGEs go to the JMS sessions (``route``)
    and the consumed hook / dispatch filter are not installed (the sessions'
    threads call :meth:`SubscriptionManager.on_consumed` themselves)."""

    def __init__(self, transport: Transport, route: Callable[[Frame], None]) -> None:
        self._transport = transport
        self._route = route

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def set_message_handler(self, handler: Optional[Callable[[Frame], None]]) -> None:
        self._transport.set_message_handler(handler)

    def set_consumed_hook(self, hook: Optional[Callable[[Frame], None]]) -> None:
        pass

    def set_dispatch_filter(self, fn: Optional[Callable[[Frame], bool]]) -> None:
        pass

    def deliver_message(self, frame: Frame) -> None:
        self._route(frame)


def message_ack_headers(link: "Link", message_headers: Mapping[str, str]) -> Dict[str, str]:
    """ACK/NACK headers for a MESSAGE on ``link``'s broker and STOMP version
    (:func:`amqstomp._protocol.frames.ack_headers`, with ActiveMQ's 1.0 quirk)."""
    return ack_headers(link.version, message_headers, link.is_activemq)


class _LinkListener:
    """Runs on the link's dispatcher thread (the connection's executor)."""

    def __init__(self, link: "Link") -> None:
        self.link = link

    def on_error(self, frame: Frame) -> None:
        self.link.connection._on_error_frame(self.link, frame)

    def on_heartbeat_timeout(self) -> None:
        self.link.heartbeat_timed_out = True

    def on_disconnected(self) -> None:
        self.link.connection._on_link_lost(self.link)

    def on_transport_interrupted(self) -> None:
        self.link.connection._on_transport_event(self.link, "on_transport_interrupted")

    def on_transport_resumed(self) -> None:
        self.link.connection._on_transport_event(self.link, "on_transport_resumed")

    def on_usage_full(self) -> None:
        event = self.link.tracker.pop_event()
        if event is not None:
            self.link.connection._on_usage(event)

    def on_usage_not_full(self) -> None:
        self.on_usage_full()

    def on_slow_consumer(self, info: Dict[str, Any]) -> None:
        log.info("slow consumer: %r", info)


def make_ssl_context(options: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS context for ``stomp+ssl://``: ``ssl_context`` when given, else one that
    verifies the broker's certificate and host name (``ca_certs`` or the system's
    CAs), with a client certificate when ``cert_file`` is given."""
    context = options.get("ssl_context")
    if context is not None:
        return context  # type: ignore[no-any-return]
    return tls_context(options.get("ca_certs"), options.get("cert_file"), options.get("key_file"),
                       options.get("key_password"))


class Link:
    """One socket of a JMS connection (see the module docstring).

    Args:
        connection: the owning :class:`amqstomp.jms.Connection`.
        role (str): ``"consumer"`` or ``"producer"`` (thread names, messages).
        endpoint (Endpoint): the broker (the first one of a failover URI).
        options (dict): the connection's resolved options.
        client_id (str | None): CONNECT's ``client-id`` (the consumer link only:
            ActiveMQ refuses a second connection with the same client id).
        route: where MESSAGE frames go (consumer link), or None.
        endpoints (list[Endpoint] | None): every broker of a ``failover:`` URI.
        policy (ReconnectPolicy | None): reconnect with it (failover); None: a
            lost socket breaks the connection.
    """

    def __init__(self, connection: "Connection", role: str, endpoint: Endpoint, options: Mapping[str, Any],
                 client_id: Optional[str], route: Optional[Callable[[Frame], None]],
                 endpoints: Optional[List[Endpoint]] = None, policy: Optional[ReconnectPolicy] = None) -> None:
        self.connection = connection
        self.role = role
        self.endpoint = endpoint
        self.endpoints = list(endpoints or [endpoint])
        self.options = options
        self.client_id = client_id
        self.closing = False
        self.heartbeat_timed_out = False
        self.connected_frame: Optional[Frame] = None
        #: the broker is ActiveMQ (CONNECTED's ``server``; set on each CONNECTED and
        #: kept while a failover replaces the socket). An attribute: send() reads it.
        self.is_activemq = False
        timeout_ms = options.get("connection_timeout_ms") or 30000
        self.connect_timeout_s = timeout_ms / 1000.0
        self.transport = Transport(
            [ep.host_and_port for ep in self.endpoints], prefer_localhost=False, try_loopback_connect=False,
            reconnect_attempts_max=1, timeout=self.connect_timeout_s,
            keepalive=bool(options.get("keepalive")) or None, vhost=options.get("vhost"),
            auto_decode=False,
            heart_beat_receive_scale=float(options.get("heart_beat_receive_scale") or 1.5))
        tls_hosts = [ep.host_and_port for ep in self.endpoints if ep.tls]
        if tls_hosts:
            self.transport.set_ssl_context(make_ssl_context(options), tls_hosts)
        self.transport.set_listener("amqstomp-jms", _LinkListener(self))
        #: the failover loop (a ``failover:`` URI), else None
        self.reconnector: Optional[Reconnector] = None
        #: what came / began on which socket (failover)
        self.ledger = SocketLedger(self.transport)
        self._last_server = ""
        if policy is not None:
            self.reconnector = Reconnector(
                self.transport, [ep.host_and_port for ep in self.endpoints], policy, self._establish,
                self._gave_up, name="amqstomp-jms%d-%s-failover" % (connection.number, role))
        self.tracker = SendTracker(self, (options.get("usage_full_after_ms") or 0) / 1000.0)
        #: every asynchronous SEND asks for a receipt (the consumer socket: ActiveMQ must never
        #: stop reading it); else one per producer-window chunk
        self.receipt_every_send = role == "consumer"
        self.manager: Optional[SubscriptionManager] = None
        if route is not None:
            prefetch_policy = PrefetchPolicy(
                queue_prefetch=options["queue_prefetch"], queue_browser_prefetch=options["queue_browser_prefetch"],
                durable_topic_prefetch=options["durable_topic_prefetch"], topic_prefetch=options["topic_prefetch"],
                all=options.get("prefetch_all"))
            self.manager = SubscriptionManager(_ManagerPort(self.transport, route), prefetch_policy,
                                               audit_depth=int(options.get("audit_depth") or 0))

    # ------------------------------------------------------------ state

    @property
    def version(self) -> str:
        return self.transport.version or self.options["version"]

    @property
    def server(self) -> str:
        """CONNECTED's ``server`` header; while a failover replaces the socket,
        the last broker's (so that broker checks do not fail meanwhile)."""
        server = self.transport.server
        if server:
            self._last_server = server
            return server
        return self._last_server


    @property
    def broker_connection_id(self) -> Optional[str]:
        """The broker's id of this connection (CONNECTED's ``session`` header is
        ActiveMQ's connection id when no client id was sent)."""
        if self.client_id or self.connected_frame is None:
            return None
        return self.connected_frame.headers.get("session")

    def close_reason(self) -> str:
        return self.transport.close_reason or "not connected"

    def threads(self) -> List[threading.Thread]:
        return self.transport.threads()

    # ------------------------------------------------------------ open / close

    def open(self, timeout_s: Optional[float] = None) -> None:
        """Open the socket, send CONNECT and wait for CONNECTED (with failover: try
        the brokers with the policy's start-up limit, for at most ``timeout_s``
        seconds when given).

        Raises:
            ConnectFailedException: no socket, an ERROR (bad login, client id in
                use) or no CONNECTED within ``connection_timeout_ms``.
        """
        if self.reconnector is not None:
            self.reconnector.connect(timeout_s)
            return
        self._connect(None)

    def _establish(self, host_and_port: Tuple[str, int]) -> None:
        """Failover thread (or :meth:`open`): one attempt on ``host_and_port``;
        after a loss, also the replay (the connection's :meth:`_on_link_resumed`)."""
        assert self.reconnector is not None
        resumed = self.reconnector.ever_connected
        self._connect(host_and_port)
        if resumed:
            self.transport.notify("transport_resumed")
            self.connection._on_link_resumed(self)

    def _gave_up(self, exc: BaseException) -> None:
        """Failover thread: the policy's attempts ran out: the connection is broken."""
        self.connection._on_link_lost(self, exc)

    def _connect(self, only: Optional[Tuple[str, int]]) -> None:
        options = self.options
        version = options["version"]
        host, _ = self.transport.open(version, only=only)
        for thread in self.threads():  # amqstomp-reader-1 -> amqstomp-jms1-consumer-reader
            kind = thread.name.split("-")[1] if thread.name.count("-") >= 2 else thread.name
            thread.name = "amqstomp-jms%d-%s-%s" % (self.connection.number, self.role, kind)
        headers = connect_headers(ACCEPT_VERSIONS[version], options.get("vhost") or host,
                                  tuple(options.get("heartbeats") or (0, 0)), options.get("username"),
                                  options.get("password"), self.client_id)
        try:
            self.transport.send_frame("CONNECT", headers)
            wait_s = self.connect_timeout_s
            deadline = self.reconnector.attempt_deadline if self.reconnector is not None else None
            if deadline is not None:  # create_connection(timeout_s): no attempt outlives it
                wait_s = max(0.001, min(wait_s, deadline - time.monotonic()))
            self.connected_frame = self.transport.wait_connected(wait_s)
            self.is_activemq = is_activemq_classic(self.server)
        except StompException as exc:
            if self.reconnector is None:
                self.closing = True
            self.transport.close(reason="connect failed: %s" % exc, silent=self.reconnector is not None)
            if isinstance(exc, ConnectFailedException):
                raise
            raise ConnectFailedException(str(exc)) from exc
        log.debug("%s link connected to %s:%s (%s, STOMP %s)", self.role, self.endpoint.host,
                  self.endpoint.port, self.server, self.version)

    def close(self, timeout_s: float) -> None:
        """Ack what the manager still holds, DISCONNECT (waiting up to ``timeout_s``
        for the receipt), close the socket and wait for the link's threads."""
        self.closing = True
        if self.reconnector is not None:
            self.reconnector.disarm(timeout_s)
        transport = self.transport
        if transport.is_connected():
            deadline = time.monotonic() + timeout_s
            if self.manager is not None:
                self.manager.close_all(write_timeout=timeout_s)
            try:
                future = transport.send_frame("DISCONNECT", {"receipt": "disconnect"}, None, timeout_s)
                if future is not None:
                    transport.wait_future(future, max(0.0, deadline - time.monotonic()), "DISCONNECT receipt")
            except StompException as exc:
                log.debug("%s link DISCONNECT: %s", self.role, exc)
        transport.close(10.0, reason="closed by the client")

    # ------------------------------------------------------------ frames

    # ------------------------------------------------------------ failover

    def gone(self) -> bool:
        """True when the socket is down for good (no failover, or it gave up)."""
        if self.transport.is_connected():
            return False
        return self.reconnector is None or not self.reconnector.armed

    def delivered_on_lost_socket(self, frame: Frame) -> bool:
        """True when ``frame`` (a MESSAGE) came on a socket that is not the open
        one any more (by ``frame.link_seq``; never by message-id, which ActiveMQ
        keeps when it redelivers on the new socket)."""
        seq = frame.link_seq
        return seq != 0 and not self.transport.link_alive(seq)

    def transaction_socket(self, cmd: str, headers: Mapping[str, Any]) -> int:
        """The socket a frame of a transaction must be written on: the one its
        BEGIN went on (ActiveMQ knows the transaction there only); 0 for a frame
        outside a transaction, a BEGIN, or without failover.

        Raises:
            TransactionRolledBackError: that socket was lost (the broker rolled
                the transaction back with it).
        """
        tx = headers.get("transaction")
        if tx is None or cmd == "BEGIN" or self.reconnector is None:
            return 0
        seq = self.ledger.transaction_socket(tx)
        if seq is None:
            return 0
        if not self.transport.link_alive(seq):
            raise TransactionRolledBackError("%s not sent: transaction %s began on a connection lost since (failover); "
                                             "the broker rolled it back" % (cmd, tx))
        return seq

    def acknowledge(self, cmd: str, headers: Mapping[str, Any], link_seq: int,
                    receipt_timeout_s: Optional[float] = None) -> None:
        """Write an ACK/NACK of a message socket ``link_seq`` delivered, on that
        socket only: it goes out even while a reconnect is still replaying later
        subscriptions (the ones replayed first receive messages already), and
        never on another socket (ActiveMQ redelivers the message there under
        the same message-id). With ``receipt_timeout_s`` it carries a receipt and
        waits for it (seconds; None: as long as the socket lives).

        Raises:
            AcknowledgeInterruptedError: socket ``link_seq`` is gone (failover):
                nothing was written; the broker redelivers the message.
            AcknowledgeInDoubtError: written, and the socket was lost (or
                ``receipt_timeout_s`` passed) before the receipt came.
            BrokerError: the broker answered ERROR (the receipt was asked for).
            ConnectionClosedException: the socket is gone and no failover is set.
        """
        tx_seq = self.transaction_socket(cmd, headers)
        if tx_seq and tx_seq != link_seq:
            raise TransactionRolledBackError("%s not sent: the message came on another connection than its "
                                             "transaction's (failover); the broker redelivers it" % cmd)
        frame_headers = headers
        if receipt_timeout_s is not None:
            frame_headers = dict(headers)
            frame_headers["receipt"] = "%s-%d" % (cmd.lower(), next(self.tracker._ids))
        try:
            future = self.transport.send_frame(cmd, frame_headers, None, link_seq=link_seq)
        except (NotConnectedException, ConnectionClosedException) as exc:
            if self.reconnector is None or not self.reconnector.armed:
                raise ConnectionClosedException("%s not sent: the %s socket is closed: %s"
                                                % (cmd, self.role, self.close_reason())) from exc
            raise AcknowledgeInterruptedError(
                "%s not sent: the message came on a connection lost since (failover); the broker redelivers it"
                % cmd) from exc
        if future is None:
            return
        try:
            future.result(receipt_timeout_s)
        except FutureTimeout:
            raise AcknowledgeInDoubtError(
                "%s written, no receipt within %.3g s: the broker may or may not have applied it"
                % (cmd, receipt_timeout_s or 0.0)) from None
        except ConnectionClosedException as exc:
            raise AcknowledgeInDoubtError(
                "%s written, then its connection was lost before the receipt: the broker may or may not have "
                "applied it (if not, it redelivers the message)" % cmd) from exc

    def _await_up(self, deadline: Optional[float], what: str) -> None:
        """Wait for a new socket (failover) until ``deadline`` (monotonic) or the
        policy's ``timeout``; raise when it does not come."""
        rc = self.reconnector
        if rc is None or not rc.armed:
            raise ConnectionClosedException("the %s socket is closed: %s" % (self.role, self.close_reason()))
        policy_ms = rc.policy.timeout_ms
        limit = None if policy_ms < 0 else time.monotonic() + policy_ms / 1000.0
        if deadline is not None:
            limit = deadline if limit is None else min(limit, deadline)
        if not rc.wait_connected(None if limit is None else max(0.0, limit - time.monotonic())):
            if rc.gave_up is not None:
                raise ConnectionClosedException("%s not sent: failover gave up: %s" % (what, rc.gave_up))
            raise NotConnectedException("%s not sent: no broker reconnected in time (failover timeout)" % what)

    def _write(self, cmd: str, headers: Mapping[str, Any], body: Any, deadline: Optional[float] = None,
               defer: bool = False, head: Optional[FrameHead] = None) -> "Optional[Future[Frame]]":
        """``transport.send_frame``, riding through a failover: a frame that finds
        the socket down waits for the new one. A frame of a transaction goes on
        the socket its BEGIN went on, or raises TransactionRolledBackError (an
        ABORT is dropped: None); a BEGIN whose socket was lost before it was
        written is written on the new one. ``defer``: see
        :meth:`Transport.send_frame`; ``head`` too."""
        if self.reconnector is None:
            return self.transport.send_frame(cmd, headers, body, None, defer, head)
        if cmd == "ACK" or cmd == "NACK":
            raise StompException("internal: %s goes through Link.acknowledge (its socket)" % cmd)
        tx = headers.get("transaction")
        while True:
            # the socket read first, then the replay flag (see Transport.connected_link_seq)
            connected = self.transport.connected_link_seq()
            if connected and not self.reconnector.reconnecting:
                try:
                    seq = self.transaction_socket(cmd, headers) or connected
                except TransactionRolledBackError:
                    if cmd == "ABORT":
                        return None  # gone with its socket: nothing to abort
                    raise
                try:
                    future = self.transport.send_frame(cmd, headers, body, None, defer, head, link_seq=seq)
                except (NotConnectedException, ConnectionClosedException) as exc:
                    if tx is not None and cmd != "BEGIN":
                        if cmd == "ABORT":
                            return None
                        raise TransactionRolledBackError(
                            "%s not sent: the connection of transaction %s was lost (failover); the broker rolled "
                            "it back" % (cmd, tx)) from exc
                else:
                    if tx is not None:
                        if cmd == "BEGIN":
                            self.ledger.began(tx, seq)  # the socket it was written on
                        elif cmd == "COMMIT" or cmd == "ABORT":
                            self.ledger.ended(tx)
                    return future
            self._await_up(deadline, cmd)

    def send(self, cmd: str, headers: Mapping[str, Any], body: Any = None) -> None:
        """Write a frame (no receipt)."""
        self._write(cmd, headers, body)

    def request(self, cmd: str, headers: Mapping[str, Any], timeout_s: Optional[float],
                what: Optional[str] = None) -> Frame:
        """Write a frame with a receipt and wait for it: ``timeout_s`` seconds, or as
        long as the connection lives when None.

        A COMMIT that was written and then got no receipt (its socket lost, or
        ``timeout_s`` passed) is in doubt: the broker may have committed it.

        Raises:
            ConnectionClosedException / NotConnectedException: the link is gone.
            BrokerError: the broker answered ERROR.
            ReceiptTimeout: no receipt within ``timeout_s``.
            TransactionRolledBackError: a transactional frame (COMMIT) could not
                be written: its transaction began on a socket lost since, or the
                write failed (the broker rolls back a transaction whose
                connection ends).
            TransactionInDoubtError: COMMIT only: written, and no receipt came.
        """
        frame_headers = dict(headers)
        frame_headers["receipt"] = "%s-%d" % (cmd.lower(), next(self.tracker._ids))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        future = self._write(cmd, frame_headers, None, deadline)
        if future is None:  # a frame of a lost socket's transaction (failover): nothing to wait for
            if cmd == "ABORT":
                return Frame("RECEIPT", {}, b"")  # the broker rolled it back with its connection
            raise TransactionRolledBackError("%s: its transaction was lost with its connection" % (what or cmd))
        try:
            return future.result(timeout_s)
        except FutureTimeout:
            if cmd == "COMMIT":
                raise TransactionInDoubtError(
                    "no receipt for %s within %.3g s: the broker may or may not have committed the transaction"
                    % (what or cmd, timeout_s or 0.0)) from None
            raise ReceiptTimeout("no receipt for %s within %.3g s" % (what or cmd, timeout_s or 0.0)) from None
        except ConnectionClosedException as exc:
            if cmd == "COMMIT":
                raise TransactionInDoubtError(
                    "the connection was lost after %s was written and before its receipt: the broker may or may "
                    "not have committed the transaction (%s)" % (what or cmd, exc)) from exc
            raise

    def send_message(self, headers: Dict[str, Any], body: bytes, sync: bool, window: Optional[ProducerWindow],
                     timeout_s: Optional[float], head: Optional[FrameHead] = None) -> None:
        """SEND a message: ``sync`` waits for the RECEIPT; else with a ``window`` the
        send carries a receipt and holds window room until it comes; else none.
        An asynchronous SEND is written deferred (it may wait up to 1 ms in the
        socket's write buffer, see :meth:`Transport.send_frame`).

        ``head``: headers the frame starts with, encoded once for many sends
        (:class:`amqstomp.jms.message.SendHead`: destination, persistent,
        priority); ``headers`` are then the rest (:func:`message_headers`).

        Raises:
            ResourceAllocationError: (sync) the broker is out of space and
                configured to refuse (sendFailIfNoSpace).
            BrokerError: (sync) another ERROR.
            ConnectionClosedException: the connection ended first.
            ReceiptTimeout: ``timeout_s`` passed.
            FrameEncodeError: a header cannot be written in the socket's STOMP version.
        """
        transport = self.transport
        if not sync and window is None:
            self._write("SEND", headers, body, defer=True, head=head)
            return
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        tx_seq = self.transaction_socket("SEND", headers)  # a transaction's SENDs go where its BEGIN went
        if self.reconnector is not None and not tx_seq:
            tx_seq = transport.connected_link_seq()  # never before a new socket's CONNECT
            if not tx_seq:
                self._await_up(deadline, "SEND")
                tx_seq = transport.connected_link_seq()
        if not sync:
            assert window is not None
            nbytes = len(body) + 64
            chunk = window.acquire(nbytes, self, deadline, self.receipt_every_send)
            if not chunk:
                try:
                    transport.send_frame("SEND", headers, body, None, True, head, link_seq=tx_seq)
                except BaseException as exc:
                    window.unsent(nbytes, 0)
                    self._transaction_lost(tx_seq, headers, exc)
                    raise
                return
        receipt = self.tracker.next_id(sync)
        headers["receipt"] = receipt
        destination = (head.headers if head is not None else headers)["destination"]
        if sync and self.reconnector is not None and "transaction" not in headers:
            self._send_sync_failover(headers, body, deadline, timeout_s, destination, head)
            return
        try:
            future = transport.send_frame("SEND", headers, body, None, not sync, head, link_seq=tx_seq)
        except BaseException as exc:
            if not sync:
                assert window is not None
                window.unsent(nbytes, chunk)
            self._transaction_lost(tx_seq, headers, exc)
            raise
        assert future is not None
        if not sync:
            self.tracker.sent(receipt, destination, future, window, chunk)
            return
        self.tracker.sent(receipt, destination, future, None, 0)
        self._await_receipt(future, destination, deadline, timeout_s)

    @staticmethod
    def _transaction_lost(tx_seq: int, headers: Mapping[str, Any], exc: BaseException) -> None:
        """A SEND of a transaction pinned to socket ``tx_seq`` found it gone:
        raise TransactionRolledBackError (else let ``exc`` go on)."""
        if "transaction" in headers and isinstance(exc, (NotConnectedException, ConnectionClosedException)):
            raise TransactionRolledBackError("SEND not sent: the connection of transaction %s was lost (failover); "
                                             "the broker rolled it back" % (headers.get("transaction"),)) from exc

    @staticmethod
    def _await_receipt(future: "Future[Frame]", destination: str, deadline: Optional[float],
                       timeout_s: Optional[float]) -> None:
        """Wait for a synchronous SEND's RECEIPT until ``deadline``.

        Raises:
            ResourceAllocationError: the broker is out of space (sendFailIfNoSpace).
            BrokerError: another ERROR.
            ConnectionClosedException: the socket was lost first.
            ReceiptTimeout: ``deadline`` passed (``timeout_s`` for the message).
        """
        try:
            future.result(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except BrokerError as exc:
            if exc.frame is not None and is_resource_allocation_error(exc.frame):
                raise ResourceAllocationError(str(exc), exc.frame) from exc
            raise
        except FutureTimeout:
            raise ReceiptTimeout("no receipt for a send to %s within %.3g s"
                                 % (destination, timeout_s or 0.0)) from None

    def _send_sync_failover(self, headers: Dict[str, Any], body: bytes, deadline: Optional[float],
                            timeout_s: Optional[float], destination: str, head: Optional[FrameHead] = None) -> None:
        """A synchronous SEND over failover: when the socket is lost before the
        RECEIPT, the SEND is written again on the new socket (at-least-once: the
        broker may have stored the first one; consumers see the copy as a new
        message), until ``deadline``."""
        losses = 0
        while True:
            seq = self.transport.connected_link_seq()  # never before a new socket's CONNECT
            try:
                if not seq:
                    raise NotConnectedException("not connected")
                future = self.transport.send_frame("SEND", headers, body, None, False, head, link_seq=seq)
            except (NotConnectedException, ConnectionClosedException):
                self._await_up(deadline, "SEND")
                continue
            assert future is not None
            self.tracker.sent(headers["receipt"], destination, future, None, 0)
            try:
                self._await_receipt(future, destination, deadline, timeout_s)
                return
            except ConnectionClosedException as exc:
                losses += 1
                if losses > MAX_SEND_RETRIES:
                    # a broker that closes the socket on a frame it cannot take (a bad header) would
                    # otherwise be fed the same frame forever
                    raise ConnectionClosedException(
                        "a send to %s lost its socket %d times before its receipt; not sent again (a broker "
                        "that closes the connection on this message? see its log)" % (destination, losses)
                    ) from exc
                log.info("socket lost before the receipt of a send to %s: sending it again after failover",
                         destination)
                self._await_up(deadline, "SEND")
