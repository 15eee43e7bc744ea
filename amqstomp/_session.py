"""The life of a stomp.py-API STOMP session over its transport: :class:`StompSession`.

The base of :mod:`amqstomp.protocol`'s ``Protocol10/11/12`` (so of every
``StompConnection10/11/12``): it attaches to a
:class:`~amqstomp.transport.Transport` (the subscriptions' flow control, the
socket ledger, the engine's :class:`~amqstomp._engine.client.Client`, the
failover loop), connects and reconnects, writes frames (``send_frame``) and
disconnects. The frames of ``send``, ``subscribe``, ``ack``... are
:mod:`amqstomp.protocol`'s; the socket, threads and receipts the transport's.

stomp.py writes every frame through ``send_frame``, so a subclass (or a mock
set on the instance) that replaces it sees them all: here the frames of the
protocol methods, CONNECT and DISCONNECT go through a replaced ``send_frame``
(and its ``super().send_frame`` does what the method would have done); while
it is not replaced they take the direct path (:meth:`StompSession._send`).
"""
import functools
import logging
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, Set, Tuple

from ._engine.client import Client
from ._engine.dispatch import PROTOCOL_LISTENER
from ._engine.ledger import SocketLedger
from ._core.backoff import stomp_py_failover
from ._core.events import TransportResumed
from ._core.dialect import check_broker, connect_host
from ._core.frames import body_bytes, connect_headers
from ._replaceable import ReplaceableMethod, replaceable
from .codec import Frame
from .exception import (
    ConfigurationError, ConnectFailedException, ConnectRefusedError, NotConnectedException, ReceiptTimeout,
    StompException,
)
from ._engine.failover import Reconnector
from ._engine.subscription import SubscriptionManager
from .transport import DEFAULT_CLOSE_TIMEOUT, DEFAULT_WAIT_TIMEOUT, Transport
from .utils import get_uuid, merge_headers
from ._io.timeouts import clamp_wait
from . import _stomppy_wire as stomppy_wire
from ._session_wait import abandon_connect, never_waits, reconnect_wait

__all__ = ["StompSession", "DEFAULT_DISCONNECT_TIMEOUT", "DEFAULT_FAILOVER_HEARTBEATS"]

HostAndPort = Tuple[str, int]

log = logging.getLogger("amqstomp.connection")

#: Seconds ``disconnect()`` waits for the DISCONNECT receipt when the connection has no ``timeout``.
DEFAULT_DISCONNECT_TIMEOUT = 10.0
#: Heart-beats (ms) of a connection with ``auto_reconnect`` that names none: a
#: broker that goes silent with the socket still open is only noticed by them.
DEFAULT_FAILOVER_HEARTBEATS = (5000, 5000)
_TRANSACTION_COMMANDS = ("BEGIN", "COMMIT", "ABORT")
#: a frame's own write, as a protocol method would do it: ``write(cmd, headers, body) -> receipt future``
Write = Callable[[str, Mapping[str, Any], Any], Any]


class StompSession:
    """A STOMP session over a :class:`~amqstomp.transport.Transport`, as the
    stomp.py API runs it (see the module docstring).

    Reconnecting (keyword-only ``auto_reconnect=True``; off by default, as in
    stomp.py, whose ``reconnect_sleep_*`` / ``reconnect_attempts_max`` only
    govern the attempts inside ``connect``): after ``connect`` succeeded, a lost
    socket (EOF, reset, a heart-beat timeout) is replaced by an
    :class:`amqstomp._engine.failover.Reconnector` with stomp.py's back-off
    (``reconnect_sleep_initial`` s, each pause ``reconnect_sleep_increase``
    longer, up to ``reconnect_sleep_max`` s, plus ``reconnect_sleep_jitter``)
    for up to ``reconnect_attempts_max`` rounds over the hosts (-1: forever;
    stomp.py's default of 3 is shorter than a broker fail-over: pass -1 or
    more, a connection giving up because of the default says so once in a
    WARNING).
    Listeners get ``on_transport_interrupted()`` instead of
    ``on_disconnected()``, then ``on_connecting``/``on_connected`` and
    ``on_transport_resumed()``; ``on_disconnected()`` (once) only when the
    attempts run out or ``disconnect()`` ends them. The same CONNECT is sent
    again; with ``auto_resubscribe`` (the default) every subscription is sent
    again with its id and headers, each waiting for its RECEIPT (one the broker refuses is reported through
    ``on_error`` once and dropped). While down, ``send``/``subscribe``/``begin``
    wait for the new socket up to ``timeout`` seconds (30 when None), then
    raise NotConnectedException. A frame written before the loss is not
    written again (a SEND whose receipt you wait for fails with
    ConnectionClosedException: send it again: at-least-once). Messages the
    lost socket delivered that are still queued for the listeners are dropped
    (client acks: the broker redelivers them); ``ack``/``nack`` for a message of
    the lost socket are not sent and raise AcknowledgeInterruptedError (a
    ConnectionClosedException; the broker redelivers it, ``redelivered: true``):
    an ACK goes only on the socket that delivered the message. On STOMP 1.0/1.1
    an ACK names a ``message-id``, which the lost copy and the redelivered one
    share: the ACKs of one identity answer its deliveries oldest first, so the
    first one after a failover (the lost copy's) raises AcknowledgeInterruptedError
    and the next is written (:meth:`amqstomp._engine.client.Client.acknowledge_identity`). ``commit`` of a
    transaction begun before the loss raises TransactionRolledBackError.

    Attributes: declared below, each with its comment (the API reference shows them).
    """

    #: the STOMP version this class asks for
    version = "1.1"
    # what _attach sets on each connection (declared here for readers, type checkers and the reference)
    #: ``(cx, cy)``: the heart-beats asked for, in ms (STOMP 1.2 "Heart-beating")
    heartbeats: Tuple[int, int]
    #: a non-empty SEND body gets a ``content-length`` header (see :meth:`BaseProtocol.send`)
    auto_content_length: bool
    #: bodies reach the listeners as ``str`` (decoded with :attr:`encoding`), else as ``bytes``
    auto_decode: bool
    #: the encoding of ``str`` bodies sent and of bodies decoded for the listeners
    encoding: str
    #: seconds: the bound of the TCP connect and the default of blocking waits (None: amqstomp's defaults)
    timeout: Optional[float]
    #: the CONNECT ``host`` header (None: ``/`` on STOMP 1.2, none on 1.0/1.1)
    vhost: Optional[str]
    #: with ``auto_reconnect``, subscribe again (same ids and headers) on the new socket
    auto_resubscribe: bool
    #: the failover loop with ``auto_reconnect``, else None
    reconnector: Optional[Reconnector]
    #: this connection's subscriptions: ids, flow-control windows, messages not acknowledged yet
    subscriptions: SubscriptionManager
    _connect_command = "STOMP"
    #: ``send_frame`` or ``transport`` is replaced (by a subclass or on the instance: frames go through
    #: it), or a listener has ``on_send`` (``send`` hands the body on as given): frames may leave the
    #: direct path, :meth:`_update_send_frame` tells whether they go through ``send_frame``
    _send_frame_replaced = False

    def _attach(self, transport: Transport, heartbeats: Optional[Tuple[int, int]], auto_content_length: bool,
                auto_reconnect: bool = False, auto_resubscribe: bool = True,
                attempts_defaulted: bool = False, broker: Optional[str] = None,
                failover: Tuple[Any, ...] = (False, None, 0), duplicates: Tuple[Any, Any] = (False, 2048)) -> None:
        """Run this session over ``transport``: flow control, the socket ledger,
        the engine's Client and (``auto_reconnect``) the failover loop with the
        transport's back-off; registered on it as ``"protocol-listener"``, as
        stomp.py's protocol is. ``broker``: the user's broker dialect
        (:func:`amqstomp._core.dialect.check_broker`; None: from CONNECTED).
        ``failover``: ``(priority_backup, priority_uris, rebalance_interval_ms)`` of the failover loop
        (:func:`amqstomp._core.backoff.stomp_py_failover`); ``duplicates``:
        ``(check_for_duplicates, audit_depth)`` (:mod:`amqstomp._core.duplicates`)."""
        self.transport = transport
        transport.broker = check_broker(broker)  # the dialect: _core/dialect.py
        self._update_send_frame()  # an instance attribute: read per frame
        # stomp.py's default of 3 left as is: warned about once when failover gives up because of it
        self._attempts_defaulted = attempts_defaulted
        self._attempts_warned = False
        self._length_warned = False  # a caller's content-length that is not the body's size: warned about once
        if heartbeats is None:
            heartbeats = DEFAULT_FAILOVER_HEARTBEATS if auto_reconnect else (0, 0)
        try:
            hb = tuple(int(x) for x in heartbeats)
        except (TypeError, ValueError, OverflowError):  # NaN, inf, "a", None
            hb = ()
        if len(hb) != 2 or min(hb) < 0:
            raise ValueError("heartbeats must be a pair of non-negative ints (ms), got %r" % (heartbeats,))
        self.heartbeats = (hb[0], hb[1])
        self.timeout = transport.timeout  # clamped to what the platform can wait
        self.vhost = transport.vhost
        self.encoding = transport.encoding
        self.auto_decode = transport.auto_decode
        self.auto_content_length = auto_content_length
        check, depth = duplicates
        if not isinstance(check, bool) or isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ConfigurationError("check_for_duplicates must be True or False, got %r" % (check,) if not isinstance(
                check, bool) else "audit_depth must be an int >= 1 (message-ids per audit), got %r" % (depth,))
        self.subscriptions = SubscriptionManager(transport, audit_depth=depth, track_acks=True, drop_unknown=True,
                                                 check_for_duplicates=check)
        self._connect_lock = threading.RLock()  # (re-entered: _connect_over_failover -> _connect_once)
        self.auto_resubscribe = bool(auto_resubscribe)
        self._connect_args: Optional[Tuple[Any, ...]] = None
        # what came on which socket (auto_reconnect), and the connection's one transaction table
        self._ledger = SocketLedger(transport)
        # subscription ids of SUBSCRIBE frames sent through send_frame (not subscribe()) on the
        # current connection and not yet unsubscribed: unsubscribe() knows them, and their
        # MESSAGEs reach the listeners (those of an unknown id do not: SubscriptionManager._drop)
        self._raw_subscriptions: Set[str] = self.subscriptions.raw_ids
        self._sending = threading.local()  # the write of a frame on its way through a replaced send_frame
        #: the failover loop (``auto_reconnect=True``), else None
        self.reconnector = None
        if not isinstance(auto_reconnect, bool) or not isinstance(auto_resubscribe, bool):
            raise ConfigurationError("auto_reconnect and auto_resubscribe must be True or False, got %r, %r"
                                     % (auto_reconnect, auto_resubscribe))
        sleeps = (transport.reconnect_sleep_initial, transport.reconnect_sleep_increase,
                  transport.reconnect_sleep_jitter, transport.reconnect_sleep_max)
        policy = stomp_py_failover(auto_reconnect, sleeps, transport.reconnect_attempts_max, *failover)
        if policy is not None:
            self.reconnector = Reconnector(transport, transport.host_and_ports, policy,
                                           self._reestablish, self._gave_up,
                                           name="amqstomp-failover-%d" % transport.number,
                                           on_stopped=self._tell_disconnected)
        #: which socket each frame goes on (the rules every API shares)
        self._client = Client(transport, self._ledger, self.reconnector, self.subscriptions)
        if self._client.direct_write is not None:  # no failover: _write is the open socket's write
            self._write = self._client.direct_write  # type: ignore[method-assign]
        transport.start_version = self.version
        transport.set_listener(PROTOCOL_LISTENER, self)

    @property
    def auto_reconnect(self) -> bool:
        """True when a lost connection reconnects by itself (see ``auto_reconnect``)."""
        return self.reconnector is not None

    # ---------------------------------------------------------------- frames

    @property
    def transport(self) -> Transport:
        """The wire layer (stomp.py's ``conn.transport``): a
        :class:`~amqstomp.transport.Transport`. Assigning another object (a
        test's ``Mock()``) sends every frame to its ``transmit(Frame)``, as
        stomp.py's ``send_frame`` does (see ``_transport_replaced``); assigning
        the original back restores amqstomp's path. (A property, so that the
        assignment is noticed once, not looked for per frame: the frame paths
        read the original transport, never this.)"""
        return self._transport_now

    @transport.setter
    def transport(self, transport: Transport) -> None:
        self._transport_now = transport  # (never through __dict__: CPython keeps the attributes inline)
        if getattr(self, "_client", None) is not None:  # (not while the connection is being made)
            self._update_send_frame()

    def _update_send_frame(self) -> bool:
        """After ``send_frame`` or ``transport`` was replaced on this instance (or put
        back), and wherever the flag is found set (frames leave the direct path):
        whether frames go through ``send_frame`` (a white-box test may also swap
        the engine's transport after ``transport``: the flag then follows)."""
        method: ReplaceableMethod = vars(StompSession)["send_frame"]
        diverted = method.replaced_on(self) or self._transport_replaced()
        client = getattr(self, "_client", None)  # (and a listener's on_send: see _send_frame_replaced)
        self._send_frame_replaced = diverted or (client is not None and (
            bool(client.transport.dispatch.on_send) or client.transport.hooked))  # stomp.py's hooks see the body
        return diverted

    def _transport_replaced(self) -> bool:
        """True when ``conn.transport`` is no longer the transport this connection
        was made with (a stomp.py user's ``conn.transport = Mock()``): every frame
        then goes to ``transport.transmit(Frame)`` as stomp.py's ``send_frame`` does."""
        client = getattr(self, "_client", None)  # its transport: the one this connection was made with
        return client is not None and self.transport is not client.transport

    def _checks_waived(self) -> bool:
        """True when frames go to a replaced ``send_frame`` or ``transport`` and this
        connection's own socket is not open: that replacement is the only wire, so
        amqstomp's local refusals (unknown transaction, subscription, message) stand
        aside and the frame reaches it, as in stomp.py."""
        return self._send_frame_replaced and self._update_send_frame() and not self._client.transport.is_open()

    @replaceable("_update_send_frame")
    def send_frame(self, cmd: str, headers: Optional[Mapping[str, Any]] = None, body: Any = b"") -> Any:
        """Send any frame as is (headers escaped per version by the codec), by
        the engine's rules (:meth:`_write`). Every frame of the protocol
        methods (``send``, ``subscribe``, ``ack``, ``begin``..., CONNECT and
        DISCONNECT) comes through here when a subclass or a mock replaces this
        method (stomp.py's ``Protocol1x.send_frame``); this implementation,
        called as ``super().send_frame(cmd, headers, body)``, then does what
        that method would have done (an ACK on the socket that delivered its
        message...), with the headers and body it is given (a protocol method's
        ``content-length`` written as the body's bytes, as stomp.py's ``transmit``).
        A BEGIN, COMMIT or ABORT, and a SUBSCRIBE or UNSUBSCRIBE with an ``id``, sent
        here are noted: ``commit``/``abort``/``send(transaction=...)``/``unsubscribe``
        know them (they refuse what this connection never began or subscribed).

        Returns:
            Future | None: the receipt future when the frame asks for one.

        Raises:
            NotConnectedException: no socket is open (with ``auto_reconnect``:
                none again within the connection's ``timeout``).
        """
        local = self._sending
        write: Optional[Write] = getattr(local, "write", None)
        local.write = None  # used once: a frame the replacement sends itself takes the plain way
        if cmd == "SUBSCRIBE" and write is None and headers and headers.get("id") is not None:
            # not subscribe()'s: unsubscribe() knows it; noted before the write (MESSAGEs may follow at once)
            self._raw_subscriptions.add(str(headers["id"]))
        if self._send_frame_replaced and self._transport_replaced():
            future = stomppy_wire.transmit(self.transport, self.version, cmd, headers, body)
        else:
            if write is not None and body and headers and headers.get("content-length") is not None:
                # a protocol method's frame: its content-length (stomp.py's count) written as the body's bytes
                headers = dict(headers, **{"content-length": len(body_bytes(body, self.encoding))})
            future = (write or self._write)(cmd, headers or {}, body)
        if cmd in _TRANSACTION_COMMANDS and headers and headers.get("transaction") is not None:
            if cmd == "BEGIN":  # commit()/abort() know it
                self._client.transaction_began(headers["transaction"])
            else:  # ABORT gives back what its ACKs took
                self._client.transaction_ended(headers["transaction"], cmd == "ABORT")
        elif cmd == "UNSUBSCRIBE" and headers and headers.get("id") is not None:
            self._raw_subscriptions.discard(str(headers["id"]))
        return future

    def _send(self, cmd: str, headers: Mapping[str, Any], body: Any = b"", write: Optional[Write] = None) -> Any:
        """A protocol method's frame: through a replaced :meth:`send_frame`
        (which calls ``write`` when it calls the original), else straight to
        ``write`` (:meth:`_write` when None)."""
        if self._send_frame_replaced and self._update_send_frame():
            local = self._sending
            local.write = write or self._write
            try:  # stomp.py's argument shapes: a body for SEND only
                if cmd == "SEND":
                    return self.send_frame(cmd, dict(headers), body)
                return self.send_frame(cmd, dict(headers))
            finally:
                local.write = None
        return (write or self._write)(cmd, headers, body)

    def _write_plain(self, cmd: str, headers: Mapping[str, Any], body: Any = b"") -> Any:
        """A frame on the open socket as it is (no failover wait)."""
        return self._client.transport.send_frame(cmd, headers, body)

    def _write(self, cmd: str, headers: Optional[Mapping[str, Any]], body: Any = b"") -> Any:
        """Write a frame by the engine's rules (:meth:`amqstomp._engine.client.Client.write`):
        with ``auto_reconnect`` a frame that finds the connection down waits
        (bounded by ``timeout``) for the new socket and goes there, a frame whose
        write failed half-way is written again (at-least-once), and a frame of a
        transaction goes on its BEGIN's socket or raises TransactionRolledBackError."""
        if self.reconnector is None:
            return self._client.write(cmd, headers or {}, body, never_waits)
        wait_s = self.timeout if self.timeout is not None else DEFAULT_WAIT_TIMEOUT
        return self._client.write(cmd, headers or {}, body, reconnect_wait(self.reconnector, wait_s))

    def _reestablish(self, host_and_port: HostAndPort) -> None:
        """One attempt on ``host_and_port`` (Reconnector's ``establish``): socket,
        the same CONNECT, CONNECTED, then every subscription again
        (``auto_resubscribe``), each gated on its RECEIPT. Runs on the failover
        thread after a loss, and on the caller's for the first connection
        (:meth:`_connect_over_failover`; nothing to replay then)."""
        transport = self.transport
        if self._connect_args is None:  # pragma: no cover - armed only after connect()
            raise ConnectFailedException("never connected")
        username, passcode, headers, keyword_headers, command = self._connect_args
        wait_s = self.timeout if self.timeout is not None else DEFAULT_WAIT_TIMEOUT
        rc = self.reconnector
        assert rc is not None
        rc.check_armed()  # no socket, no on_connecting, once disconnect() was called
        deadline = rc.attempt_deadline  # connect(wait=True, timeout): no attempt outlives it
        if deadline is not None:
            wait_s = max(0.001, min(wait_s, deadline - time.monotonic()))
        self._client.handshake(self.version, command,
                               functools.partial(self._connect_headers, username, passcode, headers, keyword_headers),
                               wait_s, only=host_and_port, deadline=deadline, silent=True,
                               send=self._handshake_send(),
                               opened=rc.check_armed)  # no CONNECT once disconnect() was called
        if not rc.ever_connected:  # the first connection (connect()): nothing to resume or replay
            return
        rc.check_armed()  # nor on_transport_resumed
        transport.post(TransportResumed())  # the listeners' on_transport_resumed (LISTENER_CALLS)
        self._raw_subscriptions.clear()  # not replayed: gone with the lost socket
        if not self.auto_resubscribe:
            self.subscriptions.reset()
            return
        # each gated on its RECEIPT; one refused is reported once (on_error), never retried
        self._client.replay(self.subscriptions, wait_s, "amqstomp-resubscribe")

    def _gave_up(self, exc: BaseException) -> None:
        """Failover thread: the reconnect attempts ran out."""
        if self._attempts_defaulted and not self._attempts_warned:
            self._attempts_warned = True  # once per connection
            log.warning("reconnecting gave up after reconnect_attempts_max=3 passes over %s, stomp.py's default "
                        "(made for the attempts of connect()): a broker fail-over such as a master/slave "
                        "takeover takes about a second or more, longer than 3 short back-offs; pass "
                        "reconnect_attempts_max=-1 (retry until disconnect(); sends wait at most `timeout`) or a "
                        "larger number. (%s)", self.transport.host_and_ports, exc)
        self.subscriptions.reset()
        self._ledger.clear_transactions()
        self._tell_disconnected()

    def _tell_disconnected(self) -> None:
        """Failover thread: the listeners heard ``on_transport_interrupted`` and
        the connection ends without a new socket (the attempts ran out, or
        ``disconnect()`` stopped them): ``on_disconnected``, their last callback."""
        for listener in self.transport.listeners.values():
            fn = getattr(listener, "on_disconnected", None)
            if fn is None:
                continue
            try:
                fn()
            except BaseException:
                log.exception("listener %r raised in on_disconnected", listener)

    def wait_for_receipt(self, receipt_id: str, timeout: Optional[float] = None) -> Frame:
        """Wait for the RECEIPT of a frame sent with ``receipt=receipt_id``.

        Args:
            timeout (float | None): seconds; the connection's ``timeout`` or
                30 s when None.

        Returns:
            Frame: the RECEIPT frame, its body as listeners' ``on_receipt`` get
            it (``str`` with ``auto_decode``, as stomp.py's, else ``bytes``).

        Raises:
            ReceiptTimeout: nothing within ``timeout``.
            BrokerError: the broker answered that frame with ERROR.
            ConnectionClosedException: the connection ended first.
            KeyError: no frame with that receipt was sent.
            InvalidTimeoutError: (a TypeError and a ValueError) ``timeout``
                is not a number of seconds >= 0 (:func:`amqstomp.utils.clamp_wait`).
        """
        frame = self.transport.wait_for_receipt(str(receipt_id), timeout)
        if self.auto_decode and isinstance(frame.body, (bytes, bytearray)):  # as the listeners' on_receipt gets it
            frame.body = bytes(frame.body).decode(self.encoding, errors="replace")
        return frame

    def _connect_headers(self, username: Optional[str], passcode: Optional[str],
                         headers: Optional[Mapping[str, Any]], keyword_headers: Mapping[str, Any],
                         host: Optional[str] = None) -> Dict[str, Any]:
        """CONNECT's headers; ``host`` is the vhost, a ``host`` header given, else
        none on STOMP 1.0/1.1 (as stomp.py) and ``/`` on 1.2
        (:func:`amqstomp._core.dialect.connect_host`: RabbitMQ's default
        virtual host, where stomp.py sends the broker's host name, which
        RabbitMQ refuses as a virtual host; ActiveMQ ignores it)."""
        frame_headers = connect_headers(self.version, self.vhost, self.heartbeats, username, passcode,
                                        extra=merge_headers([headers, keyword_headers]))
        if "host" not in frame_headers:
            default = connect_host(self.version, None, like_stomp_py=True)
            if default is not None:
                frame_headers["host"] = default
        return frame_headers

    def connect(self, username: Optional[str] = None, passcode: Optional[str] = None, wait: bool = False,
                headers: Optional[Mapping[str, Any]] = None, with_connect_command: bool = False,
                timeout: Optional[float] = None, **keyword_headers: Any) -> None:
        """Open the socket and send CONNECT (1.0) or STOMP (1.1/1.2; CONNECT with
        ``with_connect_command``), STOMP 1.2 "Connecting".

        Sends ``accept-version`` (this class's version), ``host`` (the vhost; else ``/`` on 1.2, where
        stomp.py sends the broker's host name, which RabbitMQ refuses as a virtual host; none on
        1.0/1.1), ``heart-beat`` (when ``heartbeats`` is not (0, 0)), ``login``/``passcode``, plus
        ``headers`` and keyword headers.

        Args:
            wait (bool): block until CONNECTED.
            timeout (float | None): seconds: the bound of ``wait``; without ``wait``, the time
                CONNECTED is due in (with ``auto_reconnect``, the first broker's share, as with
                ``wait``), else the socket ends as a lost one; the connection's ``timeout`` or 30 s
                when None. With ``wait`` it also ends the socket attempts
                (``reconnect_attempts_max=-1`` included) once passed (no limit when both are None,
                as in stomp.py).

        With ``auto_reconnect`` the brokers are tried as a reconnect tries them
        (:class:`amqstomp._engine.failover.Reconnector`): a broker that resets the socket, drops it, or
        accepts it but never answers CONNECTED ends its attempt and the next broker is tried. With
        ``wait``, on this thread: one attempt per broker in the policy's order, each bounded by the
        connection's ``timeout`` (30 s when None) and its share of the time left (equal among the brokers
        still to try in the pass); passes repeat with the reconnect back-off until ``timeout`` (or
        ``reconnect_attempts_max`` passes) run out; a broker's ERROR answer ends them at once. Without
        ``wait``, one socket is opened here and CONNECT written; one that ends before CONNECTED is the
        failover loop's from there, in the background (the broker tried last; the listeners hear
        ``on_connected`` from the one that answers, or one ``on_disconnected`` when the attempts run out).
        A ``wait`` ended by the caller's own exception (Ctrl-C's KeyboardInterrupt, one a signal handler
        raised) ends the attempt too: socket closed, failover loop stopped; the exception goes on.

        Raises:
            ConnectRefusedError: (a ConnectFailedException) with ``wait``, the broker answered ERROR
                (its reason in the message and ``frame``).
            ConnectFailedException: no socket could be opened; or, with ``wait``, the broker closed
                the connection or said nothing within ``timeout`` (the socket is then closed).
            InvalidTimeoutError: (a TypeError and a ValueError) ``timeout`` is not a finite number
                >= 0 (:func:`amqstomp.utils.clamp_wait`).
        """
        timeout = clamp_wait(timeout, "timeout", strict=True)  # InvalidTimeoutError naming it
        if self._transport_replaced():  # stomp.py's calls and frames to the replacement
            stomppy_wire.connect(self.transport, self.send_frame, self.version, username, passcode,
                                 merge_headers([headers, keyword_headers]), with_connect_command, wait)
            return
        rc = self.reconnector
        if rc is not None and rc.reconnecting:  # the failover loop is at it already
            if not rc.wait_connected(timeout if timeout is not None else self.timeout):
                raise ConnectFailedException("not reconnected: %s" % (rc.gave_up or rc.last_error,))
            return
        if rc is None or not wait:
            self._connect_once(username, passcode, wait, headers, with_connect_command, timeout, keyword_headers)
            return
        self._connect_over_failover(username, passcode, headers, with_connect_command, timeout, keyword_headers)

    def _connect_over_failover(self, username: Optional[str], passcode: Optional[str],
                               headers: Optional[Mapping[str, Any]], with_connect_command: bool,
                               timeout: Optional[float], keyword_headers: Dict[str, Any]) -> None:
        """:meth:`connect` with ``auto_reconnect`` and ``wait``: the failover loop's passes on this thread
        (:meth:`amqstomp._engine.failover.Reconnector.connect`; each attempt bounded, see :meth:`connect`)."""
        rc = self.reconnector
        assert rc is not None
        with self._connect_lock:  # concurrent callers: one pass at a time; the second finds it connected
            if self.transport.is_open():  # connected already, or transport.start() opened a socket
                self._connect_once(username, passcode, True, headers, with_connect_command, timeout,
                                   keyword_headers)
                return
            self.subscriptions.reset()
            self._ledger.clear_transactions()
            self._raw_subscriptions.clear()
            command = "CONNECT" if (with_connect_command or self.version == "1.0") else self._connect_command
            self._connect_args = (username, passcode, dict(headers or {}), dict(keyword_headers), command)
            wait_s = timeout if timeout is not None else self.timeout
            opened_before = self.transport.link_seq
            try:
                rc.connect(wait_s)  # ConnectRefusedError at once; ConnectFailedException when the passes end
            except BaseException as exc:
                if isinstance(exc, ConnectFailedException):
                    if self.transport.link_seq != opened_before:  # a socket was opened (and closed silently):
                        self._tell_disconnected()  # on_disconnected once, as after connect() without failover
                elif not isinstance(exc, StompException):  # Ctrl-C, a signal handler's: the wait abandoned
                    abandon_connect(exc, rc, self.transport)
                raise

    def _connect_once(self, username: Optional[str], passcode: Optional[str], wait: bool,
                      headers: Optional[Mapping[str, Any]], with_connect_command: bool,
                      timeout: Optional[float], keyword_headers: Dict[str, Any], silent: bool = False) -> None:
        """One :meth:`connect`: a socket, CONNECT, and (``wait``) CONNECTED.
        ``silent``: a failed attempt closes its socket without
        ``on_disconnected`` (another attempt follows)."""
        rc = self.reconnector
        transport = self.transport
        with self._connect_lock:  # concurrent callers: one socket, one CONNECT
            opened = not transport.is_open()
            # a socket opened by transport.start() (stomp.py's order) has had no CONNECT yet
            started = not opened and self._client.handshake_seq != transport.link_seq
            asked = self._connect_args
            if not (opened or started) and asked is not None and asked[:4] != (
                    username, passcode, dict(headers or {}), dict(keyword_headers)):
                raise ConnectFailedException(  # (the passcode never in a message)
                    "connected already (login %r): a connect() with another login, passcode or headers sends "
                    "nothing (stomp.py sent a second CONNECT, which ActiveMQ refuses); disconnect() first"
                    % (asked[0],))
            if opened or started:
                self.subscriptions.reset()
                self._ledger.clear_transactions()
                self._raw_subscriptions.clear()
                wait_s = timeout if timeout is not None else self.timeout
                command = "CONNECT" if (with_connect_command or self.version == "1.0") else self._connect_command
                self._connect_args = (username, passcode, dict(headers or {}), dict(keyword_headers), command)
                self._client.handshake(  # CONNECTED is waited for below, outside the lock
                    self.version, command,
                    functools.partial(self._connect_headers, username, passcode, headers, keyword_headers), None,
                    deadline=time.monotonic() + wait_s if wait and wait_s is not None else None, silent=silent,
                    send=self._handshake_send(), reuse=started, hand_over=not wait,
                    connected_within=None if wait else (wait_s if wait_s is not None else DEFAULT_WAIT_TIMEOUT))
                if rc is not None and wait:
                    rc.arm()
        if not (opened or started):
            if wait and not self.transport.is_connected():
                self.transport.wait_connected(timeout)
            return
        try:
            if wait:
                self.transport.wait_connected(timeout)
        except StompException as exc:
            if rc is not None:
                rc.disarm()
            self.transport.close(reason="connect failed: %s" % exc, silent=silent)
            if isinstance(exc, ConnectFailedException):
                raise
            raise ConnectFailedException(str(exc)) from exc
        except BaseException as exc:  # Ctrl-C, a signal handler's exception: the wait abandoned
            abandon_connect(exc, rc, self.transport)
            raise

    def disconnect(self, receipt: Optional[str] = None, headers: Optional[Mapping[str, Any]] = None,
                   **keyword_headers: Any) -> None:
        """Send DISCONNECT with a receipt, wait for it (bounded: the
        connection's ``timeout`` or 10 s), close the socket and wait for the
        connection's threads (STOMP 1.2 "DISCONNECT"). Listeners get
        ``on_disconnecting`` first and ``on_disconnected`` last. Does nothing
        but clean up when not connected; never raises for a connection that
        is already gone.

        Args:
            receipt (str | None): receipt id to use (a fresh one when None).

        No RECEIPT within the bound (a frozen broker): it returns all the same, as
        stomp.py's, and logs a WARNING (``amqstomp.connection``) naming the receipt id
        and the seconds waited: the broker may not have handled what came before.
        """
        self._ledger.clear_transactions()
        self._raw_subscriptions.clear()
        frame_headers = merge_headers([headers, keyword_headers])
        frame_headers["receipt"] = receipt or get_uuid()
        if self._transport_replaced():  # stomp.py's calls and frames to the replacement
            stomppy_wire.disconnect(self.transport, self.send_frame, frame_headers, receipt)
            return
        wait_s = self.timeout if self.timeout is not None else DEFAULT_DISCONNECT_TIMEOUT
        missed = self._client.disconnect(
            self.subscriptions, wait_s, frame_headers, announce=True, reason="disconnected by the client",
            join_s=DEFAULT_CLOSE_TIMEOUT,
            send=self._disconnect_send if self._send_frame_replaced and self._update_send_frame() else None)
        if isinstance(missed, ReceiptTimeout):
            log.warning("disconnect(): no RECEIPT for the DISCONNECT's receipt %r within %.3g s (the connection's "
                        "timeout, else %g s): the socket was closed without it (%s)", frame_headers["receipt"],
                        wait_s, DEFAULT_DISCONNECT_TIMEOUT, missed)

    def _disconnect_send(self, cmd: str, headers: Mapping[str, Any], body: Any,
                         write_timeout: Optional[float]) -> Any:
        """DISCONNECT through a replaced :meth:`send_frame` (its original writes it
        within ``write_timeout``)."""
        return self._send(cmd, headers, body, lambda c, h, b: self.transport.send_frame(c, h, b, write_timeout))

    def _handshake_send(self) -> Optional[Callable[[str, Mapping[str, Any]], Any]]:
        """How CONNECT is written: through a replaced :meth:`send_frame`, else None (directly)."""
        if not (self._send_frame_replaced and self._update_send_frame()):
            return None
        return lambda cmd, headers: self._send(cmd, headers, b"", self._write_plain)

