"""One socket of a :class:`amqstomp.jms.Connection` (a *link*).

A link is a :class:`amqstomp._io.driver.Driver` (the socket, its reader,
dispatcher and timer threads, frames encoded and written: the same driver the
stomp.py API's transport is built on, without stomp.py's hooks), the
CONNECT/DISCONNECT exchange, and what the JMS layer adds on top:

* on the **consumer link**, a :class:`amqstomp._engine.subscription.SubscriptionManager`
  that counts prefetch windows and decides batched ACKs; the MESSAGE frames it
  lets through go to the sessions' executors (its dispatch policy is the JMS
  connection's route, where the stomp.py API's is the transport's listeners);
* on every link, a :class:`SendTracker`: receipts of SENDs in flight, the
  usage-full detector (a RECEIPT later than ``usage_full_after_ms``) and the
  errors of asynchronous sends;
* a :class:`_LinkObserver` (the driver's typed
  :class:`~amqstomp._io.observer.LinkObserver`, no stomp.py listener) on the
  driver's dispatching thread, which is the connection's "executor" (as in the
  Java client): exception listener and usage callbacks run there, never on the reader.

With a ``failover:`` URI a link has a :class:`amqstomp._engine.failover.Reconnector`:
a lost socket is replaced (same CONNECT, same client id), the consumer link's
subscriptions are sent again (each gated on its RECEIPT), frames wait for the
new socket (bounded), a synchronous SEND whose socket was lost before its
RECEIPT came is written again on the new one (at-least-once), and ACKs or
transactional frames of the lost socket's messages and transactions are never
written on the new one (the broker redelivers those messages; a COMMIT of a
transaction begun on the lost socket raises TransactionRolledBackError). These
rules are the engine's, shared with the stomp.py API
(:class:`amqstomp._engine.client.Client`: ``write``, ``request``, ``route``,
``transaction_lost``, ``acknowledge``, ``subscribe``, ``replay``); the link
passes what is the JMS API's own: its waits (:meth:`Link.await_up`), the
receipt wait and its exceptions, ``MAX_SEND_RETRIES`` and the producer window.

Licensed under the Apache License, Version 2.0.
"""
import logging
import ssl
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..codec import Frame, FrameHead
from ..exception import (
    BrokerError,
    ConnectionClosedException,
    NotConnectedException,
    ReceiptTimeout,
    StompException,
    TransactionInDoubtError,
    TransactionRolledBackError,
    broker_reason,
)
from .._core.backoff import ReconnectPolicy
from .._engine.failover import Reconnector
from .._engine.ledger import SocketLedger
from ..flow import PrefetchPolicy
from .._engine.client import Client, WaitUp
from .._core.events import TransportResumed
from .._io.connector import Connector
from .._io.driver import Driver
from .._io.link import WRITE_STALL_S
from .._io.observer import ObserverLoop
from .._io.channel import tls_context
from .._core.dialect import ACTIVEMQ, GENERIC, check_broker, connect_host
from .._core.frames import ACCEPT_VERSIONS, ack_headers, connect_headers
from .._engine.subscription import SubscriptionManager
from ..uri import Endpoint
from ._producer_flow import ASYNC_RECEIPT_PREFIX, SEND_OVERHEAD_BYTES, ProducerWindow, SendTracker, UsageEvent
from .exceptions import ResourceAllocationError, is_resource_allocation_error

if TYPE_CHECKING:  # pragma: no cover
    from ._connection_state import ConnectionState

__all__ = ["Link", "SendTracker", "ProducerWindow", "UsageEvent", "ASYNC_RECEIPT_PREFIX", "message_ack_headers"]

log = logging.getLogger("amqstomp.jms")

#: Times a synchronous SEND is written again on a new socket (failover) before it fails.
MAX_SEND_RETRIES = 3


def message_ack_headers(link: "Link", message_headers: Mapping[str, str]) -> Dict[str, str]:
    """ACK/NACK headers for a MESSAGE on ``link``'s broker and STOMP version
    (:func:`amqstomp._core.frames.ack_headers`, with ActiveMQ's 1.0 quirk)."""
    # (``link.version``, its property's call skipped once a socket opened: one read per ACK)
    return ack_headers(link.transport.version or link.version, message_headers, link.is_activemq)


class _LinkObserver:
    """A link's events (:class:`amqstomp._io.observer.LinkObserver`), on its
    dispatching thread (the connection's executor)."""

    def __init__(self, link: "Link") -> None:
        self.link = link

    def on_error(self, frame: Frame) -> None:
        self.link.connection.on_error_frame(self.link, frame)

    def on_connect_refused(self, frame: Frame) -> None:  # that connect attempt raises it (with failover: retries)
        log.info("the broker refused a CONNECT on the %s socket: %s", self.link.role, broker_reason(frame))

    def on_heartbeat_timeout(self) -> None:
        self.link.heartbeat_timed_out = True

    def on_disconnected(self) -> None:
        self.link.connection.on_link_lost(self.link)

    def on_transport_interrupted(self) -> None:
        self.link.connection.on_transport_event(self.link, "on_transport_interrupted")

    def on_transport_resumed(self) -> None:
        self.link.connection.on_transport_event(self.link, "on_transport_resumed")

    def on_usage(self, full: bool) -> None:  # (the tracker's event says which)
        event = self.link.tracker.pop_event()
        if event is not None:
            self.link.connection.on_usage(event)

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
        connection (ConnectionState): what the owning :class:`amqstomp.jms.Connection`
            shares (it hears of the link's events).
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

    def __init__(self, connection: "ConnectionState", role: str, endpoint: Endpoint, options: Mapping[str, Any],
                 client_id: Optional[str], route: Optional[Callable[[Frame], None]],
                 endpoints: Optional[List[Endpoint]] = None, policy: Optional[ReconnectPolicy] = None) -> None:
        self.connection = connection
        self.role = role
        self.endpoint = endpoint
        self.endpoints = list(endpoints or [endpoint])
        self.options = options
        self.client_id = client_id
        self.heartbeat_timed_out = False
        self.connected_frame: Optional[Frame] = None
        #: the broker dialect (:mod:`amqstomp._core.dialect`: the ``broker`` option, else
        #: CONNECTED's ``server``; set on each CONNECTED and kept while a failover replaces
        #: the socket), and whether it is ActiveMQ Classic. Attributes: send() reads them.
        self.dialect = GENERIC
        self.is_activemq = False
        timeout_ms = options.get("connection_timeout_ms") or 30000
        self.connect_timeout_s = timeout_ms / 1000.0
        connector = Connector([ep.host_and_port for ep in self.endpoints], self.connect_timeout_s,
                              keepalive=bool(options.get("keepalive")) or None)
        #: the socket, its threads and the frames written (the driver every API shares)
        self.transport = Driver(connector, ObserverLoop(_LinkObserver(self)),
                                float(options.get("heart_beat_receive_scale") or 1.5),
                                timeout=self.connect_timeout_s)
        # a write on a broker that takes none of our bytes ends the socket after jms.sendTimeout, else 10 s
        self.transport.write_stall_s = (options.get("send_timeout_ms") or 0) / 1000.0 or WRITE_STALL_S
        self.transport.broker = check_broker(options.get("broker"), "broker (amqstomp.broker)")
        self.transport.client_id = connection.client_id  # the producer socket's too (not in its CONNECT)
        tls_hosts = [ep.host_and_port for ep in self.endpoints if ep.tls]
        if tls_hosts:
            self.transport.set_ssl_context(make_ssl_context(options), tls_hosts)
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
            depth = int(options.get("audit_depth") or 0)  # 0: neither audit
            self.manager = SubscriptionManager(self.transport, prefetch_policy, audit_depth=depth, deliver=route,
                                               check_for_duplicates=bool(depth and options.get("check_for_duplicates")))
        #: which socket each frame goes on (the rules every API shares); the transport's observer
        self.client = Client(self.transport, self.ledger, self.reconnector, self.manager)

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

    def ended_by_client(self) -> bool:
        """True when this side ended (or is ending) the socket: :meth:`close`, a
        failed attempt, the connection's end (the core's link state, not a loss)."""
        return self.transport.ended_by_client()

    def close_reason(self) -> str:
        return self.transport.close_reason or "not connected"

    def threads(self) -> List[threading.Thread]:
        return self.transport.threads()

    # ------------------------------------------------------------ open / close

    def open(self, timeout_s: Optional[float] = None) -> None:
        """Open the socket, send CONNECT and wait for CONNECTED (with failover: try
        the brokers with the policy's start-up limit), for at most ``timeout_s``
        seconds when given (``create_connection(timeout_s=...)``, a plain
        ``stomp://`` URI too: the TCP connect and the CONNECTED wait).

        Raises:
            ConnectFailedException: no socket, an ERROR (bad login, client id in
                use) or no CONNECTED within ``connection_timeout_ms``.
        """
        if self.reconnector is not None:
            self.reconnector.connect(timeout_s)
            return
        self._connect(None, None if timeout_s is None else time.monotonic() + timeout_s)

    def _establish(self, host_and_port: Tuple[str, int]) -> None:
        """Failover thread (or :meth:`open`): one attempt on ``host_and_port``;
        after a loss, also the replay (the connection's :meth:`on_link_resumed`)."""
        assert self.reconnector is not None
        resumed = self.reconnector.ever_connected
        self._connect(host_and_port)
        if resumed:
            self.reconnector.check_armed()  # close() was called meanwhile: not resumed
            self.transport.post(TransportResumed())
            self.connection.on_link_resumed(self)

    def _gave_up(self, exc: BaseException) -> None:
        """Failover thread: the policy's attempts ran out: the connection is broken."""
        self.connection.on_link_lost(self, exc)

    def _connect(self, only: Optional[Tuple[str, int]], deadline: Optional[float] = None) -> None:
        options = self.options
        version = options["version"]

        def name_threads() -> None:  # amqstomp-reader-1 -> amqstomp-jms1-consumer-reader
            for thread in self.threads():
                kind = thread.name.split("-")[1] if thread.name.count("-") >= 2 else thread.name
                thread.name = "amqstomp-jms%d-%s-%s" % (self.connection.number, self.role, kind)

        def headers_for(host: str) -> Dict[str, Any]:
            return connect_headers(ACCEPT_VERSIONS[version], connect_host(version, options.get("vhost")),
                                   tuple(options.get("heartbeats") or (0, 0)), options.get("username"),
                                   options.get("password"), self.client_id)

        wait_s = self.connect_timeout_s
        if self.reconnector is not None:
            deadline = self.reconnector.attempt_deadline
        if deadline is not None:  # create_connection(timeout_s): no attempt outlives it (TCP connect: handshake)
            wait_s = max(0.001, min(wait_s, deadline - time.monotonic()))

        def failing() -> None:
            if self.reconnector is None:
                self.transport.close_requested()  # a failed attempt ends the link for good: no loss

        self.connected_frame = self.client.handshake(version, "CONNECT", headers_for, wait_s, only=only,
                                                     deadline=deadline, silent=self.reconnector is not None,
                                                     opened=name_threads, failing=failing)
        self.dialect = self.transport.dialect
        self.is_activemq = self.dialect == ACTIVEMQ
        log.debug("%s link connected to %s:%s (%s, STOMP %s)", self.role, self.endpoint.host,
                  self.endpoint.port, self.server, self.version)

    def close(self, timeout_s: float) -> None:
        """Ack what the manager still holds, DISCONNECT (waiting up to ``timeout_s``
        for the receipt), close the socket and wait for the link's threads (the
        connection is closed first: its end is no loss to report)."""
        self.client.disconnect(self.manager, timeout_s, {"receipt": "disconnect"}, disarm_s=timeout_s)

    # ------------------------------------------------------------ frames

    # ------------------------------------------------------------ failover

    def gone(self) -> bool:
        """True when the socket is down for good (no failover, or it gave up)."""
        if self.transport.is_connected():
            return False
        return self.reconnector is None or not self.reconnector.armed

    def begin(self, transaction: str) -> None:
        """BEGIN ``transaction`` on this link (no receipt); the connection's
        transaction table (:mod:`amqstomp._core.transactions`) notes it.

        Raises:
            DuplicateTransactionError: (a ValueError) this link began ``transaction``
                already and has not ended it; nothing sent (ActiveMQ: "The
                transaction was already started").
        """
        refusal = self.client.transaction_refusal("BEGIN", transaction)
        if refusal is not None:
            raise refusal
        self._write("BEGIN", {"transaction": transaction}, None)
        self.client.transaction_began(transaction)

    def end_transaction(self, cmd: str, transaction: str, timeout_s: Optional[float], wait: bool = True) -> None:
        """COMMIT or ABORT (``cmd``) ``transaction``: with ``wait`` as :meth:`request`
        (its RECEIPT waited for ``timeout_s`` seconds), else written without one.
        Either way the transaction leaves the table (which gives back what its ACKs
        took after an ABORT).

        Raises:
            UnknownTransactionError: (a ValueError) this link did not begin
                ``transaction``, or ended it already; nothing sent (ActiveMQ:
                "Invalid transaction id").
            TransactionRolledBackError: COMMIT of a transaction whose socket is
                gone (failover), or as :meth:`request`; whatever it raises.
        """
        refusal = self.client.transaction_refusal(cmd, transaction)
        try:
            if refusal is not None:
                raise refusal
            if wait:
                self.request(cmd, {"transaction": transaction}, timeout_s, cmd)
            else:
                self.send(cmd, {"transaction": transaction})
        finally:
            self.client.transaction_ended(transaction, cmd == "ABORT")  # (nothing for an unknown one)

    def transaction_abandoned(self, transaction: str) -> None:
        """``transaction`` ends without a COMMIT or ABORT frame (a commit failed before
        its COMMIT was written): it leaves the table, which gives back what its ACKs
        took (nothing for a transaction that is not open)."""
        self.client.transaction_ended(transaction, True)

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
        frame_headers = headers
        if receipt_timeout_s is not None:
            frame_headers = dict(headers)
            frame_headers["receipt"] = "%s-%d" % (cmd.lower(), self.tracker.next_number())
        self.client.acknowledge(cmd, frame_headers, link_seq, receipt_timeout_s, self.closed_why)

    def closed_why(self) -> str:
        """Why a frame was not written on this link's closed socket (an ACK's ConnectionClosedException)."""
        return "the %s socket is closed: %s" % (self.role, self.close_reason())

    def await_up(self, deadline: Optional[float], what: str) -> None:
        """Wait for a new socket (failover) until ``deadline`` (monotonic) or the
        policy's ``timeout``; raise when it does not come."""
        rc = self.reconnector
        if rc is None or not rc.armed:
            raise ConnectionClosedException("the %s socket is closed: %s" % (self.role, self.close_reason()))
        policy_ms = rc.policy.timeout_ms
        limit = None if policy_ms < 0 else time.monotonic() + policy_ms / 1000.0
        if deadline is not None:
            limit = deadline if limit is None else min(limit, deadline)
        by_call = deadline is not None and (policy_ms < 0 or deadline < time.monotonic() + policy_ms / 1000.0)
        if not rc.wait_connected(None if limit is None else max(0.0, limit - time.monotonic())):
            if rc.gave_up is not None:
                raise ConnectionClosedException("%s not sent: failover gave up: %s" % (what, rc.gave_up))
            raise NotConnectedException("%s not sent: no broker reconnected in time (%s)" % (
                what, "the call's own timeout, e.g. jms.sendTimeout" if by_call else "the failover URI's timeout"))

    def _write(self, cmd: str, headers: Mapping[str, Any], body: Any, deadline: Optional[float] = None,
               defer: bool = False, head: Optional[FrameHead] = None) -> "Optional[Future[Frame]]":
        """``transport.send_frame``, riding through a failover: a frame that finds
        the socket down waits for the new one. A frame of a transaction goes on
        the socket its BEGIN went on, or raises TransactionRolledBackError (an
        ABORT is dropped: None); a BEGIN whose socket was lost before it was
        written is written on the new one. ``defer``: see
        :meth:`Transport.send_frame`; ``head`` too."""
        if cmd == "ACK" or cmd == "NACK":
            raise StompException("internal: %s goes through Link.acknowledge (its socket)" % cmd)
        return self.client.write(cmd, headers, body, self._wait_up(deadline), defer=defer, head=head)

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
        frame_headers["receipt"] = "%s-%d" % (cmd.lower(), self.tracker.next_number())
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
        An asynchronous SEND is written deferred (at once on an idle socket, else
        it may wait up to 1 ms in the socket's write buffer, see
        :meth:`amqstomp._io.writer.LinkWriter.write_deferred`).

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
        client = self.client
        write = client.direct_write  # without failover the engine's write is the open socket's, bound once
        deadline = None
        if sync or window is None or write is None:
            if window is None and not sync:
                self._write("SEND", headers, body, defer=True, head=head)
                return
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            if sync:
                self._send_sync(headers, body, deadline, timeout_s, head)
                return
            # with failover: a transaction's SENDs go where its BEGIN went; others wait for a socket
            write = partial(self.transport.send_frame, link_seq=client.route("SEND", headers, self._wait_up(deadline)))
        # (the common send: no clock read -- the window reads it only when it must wait)
        assert window is not None
        nbytes = len(body) + SEND_OVERHEAD_BYTES
        chunk = window.acquire(nbytes, self, deadline, self.receipt_every_send, timeout_s)
        if chunk:  # this send carries the window chunk's receipt
            receipt = headers["receipt"] = self.tracker.next_id(False)
        try:
            future = write("SEND", headers, body, None, True, head)
        except BaseException as exc:
            window.unsent(nbytes, chunk)
            client.transaction_lost("SEND", headers, exc)
            raise
        if chunk:
            assert future is not None
            destination = (head.headers if head is not None else headers)["destination"]
            self.tracker.sent(receipt, destination, future, window, chunk)

    def _wait_up(self, deadline: Optional[float]) -> WaitUp:
        """The engine's wait for a new socket (:data:`amqstomp._engine.client.WaitUp`):
        :meth:`await_up` until ``deadline`` or the failover URI's ``timeout``."""
        return lambda what, cause: self.await_up(deadline, what)

    def _send_sync(self, headers: Dict[str, Any], body: bytes, deadline: Optional[float],
                   timeout_s: Optional[float], head: Optional[FrameHead]) -> None:
        """A synchronous SEND (:meth:`send_message`): the engine's request
        (:meth:`amqstomp._engine.client.Client.request`), at-least-once over
        failover: written again on the new socket when its socket is lost before
        the RECEIPT (the broker may have stored the first one; consumers see the
        copy as a new message), at most :data:`MAX_SEND_RETRIES` times, until
        ``deadline``."""
        receipt = headers["receipt"] = self.tracker.next_id(True)
        destination = (head.headers if head is not None else headers)["destination"]
        self.client.request("SEND", headers, body, None if self.reconnector is None else self._wait_up(deadline),
                            lambda future: self._await_receipt(future, destination, deadline, timeout_s),
                            lambda future: self.tracker.sent(receipt, destination, future, None, 0),
                            head, MAX_SEND_RETRIES, "a send to %s" % destination)

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
