"""stomp.py-compatible connections: ``Connection10``, ``Connection11``, ``Connection12``.

``import amqstomp as stomp`` keeps stomp.py 8/9 code working: same class
names, constructor keywords, method signatures, listener callbacks, and
unknown keyword arguments sent as frame headers. The classes only build
frames; the socket, threads, heart-beats and receipts are
:class:`amqstomp.transport.Transport`'s.

Differences from stomp.py, all on purpose:

* every blocking wait is bounded: ``connect(wait=True, timeout=...)``,
  :meth:`~StompConnection11.wait_for_receipt`, ``disconnect()``;
* ``disconnect()`` always waits (bounded) for the broker's receipt, then closes
  the socket and waits for the connection's threads to end;
* header values ``True``/``False`` are sent as ``true``/``false`` (ActiveMQ
  reads ``persistent`` only as the exact string ``true``); ``None`` leaves a
  header out;
* 1.1/1.2 escape header *names* as well as values (STOMP 1.2 "Value Encoding");
* ``str`` bodies are encoded with ``encoding`` strictly (stomp.py replaced
  unencodable characters with ``?``);
* a listener can wait for a receipt from inside a callback (receipts are
  resolved on the reading thread, not the dispatcher);
* a ``host_and_ports`` entry whose host is not a non-empty ``str`` (None,
  bytes, ``""``) or whose port is not 1-65535 raises ConfigurationError (a
  ValueError) naming it (stomp.py looked ``"None"`` up in DNS); a timeout
  longer than the platform can wait (``1e12``) waits that long
  (:data:`amqstomp.utils.MAX_WAIT_S`) instead of raising OverflowError;
* ``subscribe(..., headers={"ack": "client-individual"})`` subscribes in that
  mode (stomp.py sent ``ack:auto``, the keyword's default, silently giving
  at-most-once); ``ack``/``id``/``destination`` given both as argument and
  header with different values raise ValueError;
* every SUBSCRIBE asks for a receipt (``amqstomp-subscribe-<id>-<uuid>``,
  unless the caller gave one; listeners' ``on_receipt`` see it): a SUBSCRIBE
  the broker refuses (ERROR, e.g. a bad selector) is unregistered, so its id is
  free again and a reconnect does not replay it (stomp.py kept it);
* ``commit``/``abort`` of a transaction this connection did not begin (or
  ended already) raise UnknownTransactionError and send nothing (stomp.py sent
  it; ActiveMQ answered ERROR "Invalid transaction id", heard only by
  ``on_error``). Likewise ``ack``/``nack`` of a message this connection does not
  hold unacknowledged (never delivered, acknowledged already, or covered by an
  earlier cumulative ``ack:client`` ACK) raise UnknownMessageError (a
  ValueError) and send nothing (ActiveMQ answered ERROR "Unexpected ACK", and on
  STOMP 1.0/1.1 with a malformed id it closed the connection); the check is
  off once a MESSAGE of a subscription not made with ``subscribe(id=...)``
  arrives (its messages cannot be told apart).

Every stomp.py constructor keyword is accepted and honoured; note that
``timeout`` bounds the TCP connect and is the default for blocking waits (in
stomp.py it also became the socket's read timeout), and
``try_loopback_connect`` only matters for an entry naming this machine by its
host name. stomp.py's ``override_threading`` and ``set_receipt`` are not
offered (threads are the transport's; receipts are futures).
"""
import functools
import logging
import ssl
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Set, Tuple

from .codec import Frame
from .exception import (
    ConfigurationError,
    ConnectFailedException,
    ConnectRefusedError,
    NotConnectedException,
    StompException,
)
from ._engine.client import Client
from ._io.channel import tls_context
from ._protocol.backoff import ReconnectPolicy
from ._protocol.dialect import check_broker, connect_host
from ._protocol.frames import connect_headers
from .failover import Reconnector, SocketLedger
from .listener import ConnectionListener
from .transport import DEFAULT_CLOSE_TIMEOUT, DEFAULT_WAIT_TIMEOUT, Transport
from .protocol import AckMode, BaseProtocol, Protocol10, Protocol11, Protocol12
from .subscription import SubscriptionManager
from .utils import clamp_wait, get_uuid, merge_headers

__all__ = [
    "AckMode",
    "BaseConnection",
    "StompConnection10",
    "StompConnection11",
    "StompConnection12",
    "Connection10",
    "Connection11",
    "Connection12",
    "Connection",
]

HostAndPort = Tuple[str, int]

log = logging.getLogger("amqstomp.connection")

#: Seconds ``disconnect()`` waits for the DISCONNECT receipt when the
#: connection has no ``timeout``.
DEFAULT_DISCONNECT_TIMEOUT = 10.0
#: Heart-beats (ms) of a connection with ``auto_reconnect`` that names none: a
#: broker that goes silent with the socket still open is only noticed by them.
DEFAULT_FAILOVER_HEARTBEATS = (5000, 5000)
_TRANSACTION_COMMANDS = ("BEGIN", "COMMIT", "ABORT")


class _DefaultInt(int):
    """A keyword's default number: equal to it, but told apart (``is``) from the
    same number given by the caller."""

    __slots__ = ()


#: ``reconnect_attempts_max``'s default (stomp.py's 3): warned about when it ends a failover.
_ATTEMPTS_DEFAULT = _DefaultInt(3)


class BaseConnection(BaseProtocol):
    """What every STOMP version's connection shares. Use
    :class:`StompConnection10`, :class:`StompConnection11` or
    :class:`StompConnection12`.

    Reconnecting (keyword-only ``auto_reconnect=True``; off by default, as in
    stomp.py, whose ``reconnect_sleep_*`` / ``reconnect_attempts_max`` only
    govern the attempts inside ``connect``): after ``connect`` succeeded, a lost
    socket (EOF, reset, a heart-beat timeout) is replaced by an
    :class:`amqstomp.failover.Reconnector` with stomp.py's back-off
    (``reconnect_sleep_initial`` s, each pause ``reconnect_sleep_increase``
    longer, up to ``reconnect_sleep_max`` s, plus ``reconnect_sleep_jitter``)
    for up to ``reconnect_attempts_max`` rounds over the hosts (-1: forever;
    stomp.py's default of 3 is shorter than a broker fail-over: pass -1 or
    more, a connection giving up because of the default says so once in a
    WARNING).
    Listeners get ``on_transport_interrupted()`` instead of
    ``on_disconnected()``, then ``on_connecting``/``on_connected`` and
    ``on_transport_resumed()``; ``on_disconnected()`` only when the attempts
    run out. The same CONNECT is sent again; with ``auto_resubscribe`` (the
    default) every subscription is sent again with its id and headers, each
    waiting for its RECEIPT (one the broker refuses is reported through
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
    share: it names the copy handed to the listeners last. ``commit`` of a
    transaction begun before the loss raises TransactionRolledBackError.

    Keyword-only ``broker``: the broker dialect (``"activemq"``, ``"artemis"``,
    ``"rabbitmq"``, ``"generic"``; None or ``"auto"``: what CONNECTED's
    ``server`` names), which decides the broker-specific headers
    (:mod:`amqstomp._protocol.dialect`).

    Attributes:
        transport (Transport): the wire layer.
        version (str): the STOMP version this class asks for.
        reconnector (Reconnector | None): the failover loop with
            ``auto_reconnect``.
    """

    version = "1.1"
    _connect_command = "STOMP"

    def _setup(self, host_and_ports: Optional[Sequence[HostAndPort]], prefer_localhost: bool,
               try_loopback_connect: bool, reconnect_sleep_initial: float, reconnect_sleep_increase: float,
               reconnect_sleep_jitter: float, reconnect_sleep_max: float, reconnect_attempts_max: int,
               timeout: Optional[float], heartbeats: Optional[Tuple[int, int]], keepalive: Any, vhost: Optional[str],
               auto_decode: bool, encoding: str, auto_content_length: bool, heart_beat_receive_scale: float,
               bind_host_port: Optional[HostAndPort], ssl_context: Optional[ssl.SSLContext],
               recv_bytes: int, auto_reconnect: bool = False, auto_resubscribe: bool = True,
               broker: Optional[str] = None, transport: Optional[Transport] = None) -> None:
        # stomp.py's default of 3 left as is: warned about once when failover gives up because of it
        self._attempts_defaulted = reconnect_attempts_max is _ATTEMPTS_DEFAULT
        self._attempts_warned = False
        if self._attempts_defaulted:
            reconnect_attempts_max = 3
        self.transport = transport or Transport(  # given: a WSTransport (amqstomp.adapter.ws)
            host_and_ports, prefer_localhost, try_loopback_connect, reconnect_sleep_initial,
            reconnect_sleep_increase, reconnect_sleep_jitter, reconnect_sleep_max, reconnect_attempts_max,
            timeout, keepalive, vhost, auto_decode, encoding, bind_host_port,
            ssl_context=ssl_context, heart_beat_receive_scale=heart_beat_receive_scale,
            recv_bytes=recv_bytes, auto_content_length=auto_content_length)
        self.transport.broker = check_broker(broker)  # the dialect: _protocol/dialect.py
        if heartbeats is None:
            heartbeats = DEFAULT_FAILOVER_HEARTBEATS if auto_reconnect else (0, 0)
        hb = tuple(int(x) for x in heartbeats)
        if len(hb) != 2 or min(hb) < 0:
            raise ValueError("heartbeats must be a pair of non-negative ints (ms), got %r" % (heartbeats,))
        self.heartbeats: Tuple[int, int] = (hb[0], hb[1])
        self.timeout = self.transport.timeout  # clamped to what the platform can wait
        self.vhost = vhost
        self.encoding = encoding
        self.auto_decode = auto_decode
        self.auto_content_length = auto_content_length
        self.subscriptions = SubscriptionManager(self.transport, track_acks=True)
        self._connect_lock = threading.Lock()
        self.auto_resubscribe = bool(auto_resubscribe)
        self._connect_args: Optional[Tuple[Any, ...]] = None
        self._ledger = SocketLedger(self.transport)  # what came / began on which socket (auto_reconnect)
        # transactions begun (BEGIN written) on the current connection and not yet ended
        self._transactions: Set[str] = set()
        #: the failover loop (``auto_reconnect=True``), else None
        self.reconnector: Optional[Reconnector] = None
        if not isinstance(auto_reconnect, bool) or not isinstance(auto_resubscribe, bool):
            raise ConfigurationError("auto_reconnect and auto_resubscribe must be True or False, got %r, %r"
                                     % (auto_reconnect, auto_resubscribe))
        if auto_reconnect:
            policy = ReconnectPolicy.stomp_py(reconnect_sleep_initial, reconnect_sleep_increase,
                                              reconnect_sleep_jitter, reconnect_sleep_max, reconnect_attempts_max)
            self.reconnector = Reconnector(self.transport, self.transport.host_and_ports, policy,
                                           self._reestablish, self._gave_up)
        #: which socket each frame goes on (the rules every API shares)
        self._client = Client(self.transport, self._ledger, self.reconnector, self.subscriptions)

    @property
    def auto_reconnect(self) -> bool:
        """True when a lost connection reconnects by itself (see ``auto_reconnect``)."""
        return self.reconnector is not None

    # ---------------------------------------------------------------- listeners

    def set_listener(self, name: str, listener: ConnectionListener) -> None:
        """Register ``listener`` under ``name`` (listeners run in name order)."""
        self.transport.set_listener(name, listener)

    def remove_listener(self, name: str) -> None:
        """Unregister the listener ``name``."""
        self.transport.remove_listener(name)

    def get_listener(self, name: str) -> Optional[ConnectionListener]:
        """The listener registered as ``name``, or None."""
        listener: Optional[ConnectionListener] = self.transport.get_listener(name)
        return listener

    def is_connected(self) -> bool:
        """True while the socket is open and CONNECTED has arrived."""
        return self.transport.is_connected()

    # ---------------------------------------------------------------- TLS

    def set_ssl(self, for_hosts: Sequence[HostAndPort] = (), key_file: Optional[str] = None,
                cert_file: Optional[str] = None, ca_certs: Optional[str] = None,
                cert_validator: Optional[Callable[[Any, str], Tuple[bool, str]]] = None,
                ssl_version: int = ssl.PROTOCOL_TLS_CLIENT, password: Any = None, verify: bool = True) -> None:
        """stomp.py's TLS set-up: use TLS for ``for_hosts`` (every host when empty).

        Args:
            key_file (str | None): the client certificate's key (PEM).
            cert_file (str | None): the client certificate (PEM).
            ca_certs (str): CA bundle to verify the broker with (system CAs when None).
            cert_validator: ``(cert, hostname) -> (ok, message)`` extra check.
            ssl_version (int): an ``ssl.PROTOCOL_*`` constant.
            password: key password.
            verify (bool): verify the broker's certificate and host name.

        For full control pass an ``ssl.SSLContext`` as ``ssl_context=`` to the
        constructor instead.
        """
        context = tls_context(ca_certs, cert_file, key_file, password, verify, ssl_version)
        self.transport.set_ssl_context(context, list(for_hosts) or None, cert_validator)

    def get_ssl(self, host_and_port: Optional[HostAndPort] = None) -> Optional[ssl.SSLContext]:
        """The TLS context for ``host_and_port`` (the current host when None), or None."""
        return self.transport.get_ssl_context(host_and_port)

    # ---------------------------------------------------------------- frames

    def send_frame(self, cmd: str, headers: Optional[Mapping[str, Any]] = None, body: Any = b"") -> None:
        """Send any frame as is (headers escaped per version by the codec).

        Raises:
            NotConnectedException: no socket is open (with ``auto_reconnect``:
                none again within the connection's ``timeout``).
        """
        self._send(cmd, headers, body)
        if cmd in _TRANSACTION_COMMANDS and headers and headers.get("transaction") is not None:
            self._began(str(headers["transaction"]), cmd == "BEGIN")  # commit()/abort() know it

    # ---------------------------------------------------------------- failover

    def _send(self, cmd: str, headers: Optional[Mapping[str, Any]], body: Any = b"") -> Any:
        """Write a frame by the engine's rules (:meth:`amqstomp._engine.client.Client.write`):
        with ``auto_reconnect`` a frame that finds the connection down waits
        (bounded by ``timeout``) for the new socket and goes there, a frame whose
        write failed half-way is written again (at-least-once), and a frame of a
        transaction goes on its BEGIN's socket or raises TransactionRolledBackError."""
        wait_s = self.timeout if self.timeout is not None else DEFAULT_WAIT_TIMEOUT
        deadline = time.monotonic() + wait_s

        def wait_up(cmd: str, cause: Optional[BaseException]) -> None:
            rc = self.reconnector
            assert rc is not None  # the engine waits only with failover
            if not rc.armed and cause is not None:
                raise cause
            left = deadline - time.monotonic()
            if left <= 0 or not rc.wait_connected(left):
                if rc.gave_up is not None:
                    raise NotConnectedException("not connected: reconnecting gave up: %s" % rc.gave_up) from cause
                if not rc.armed:
                    raise NotConnectedException("not connected (%s not sent)" % cmd) from cause
                raise NotConnectedException("not reconnected within %.3g s (%s not sent)" % (wait_s, cmd)) from cause

        return self._client.write(cmd, headers or {}, body, wait_up)

    def _reestablish(self, host_and_port: HostAndPort) -> None:
        """Failover thread: one attempt to replace the lost socket (Reconnector's
        ``establish``): socket, the same CONNECT, CONNECTED, then every
        subscription again (``auto_resubscribe``), each gated on its RECEIPT."""
        transport = self.transport
        if self._connect_args is None:  # pragma: no cover - armed only after connect()
            raise ConnectFailedException("never connected")
        username, passcode, headers, keyword_headers, command = self._connect_args
        wait_s = self.timeout if self.timeout is not None else DEFAULT_WAIT_TIMEOUT
        self._client.handshake(self.version, command,
                               functools.partial(self._connect_headers, username, passcode, headers, keyword_headers),
                               wait_s, only=host_and_port, silent=True)
        transport.notify("transport_resumed")
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
            Frame: the RECEIPT frame.

        Raises:
            ReceiptTimeout: nothing within ``timeout``.
            BrokerError: the broker answered that frame with ERROR.
            ConnectionClosedException: the connection ended first.
            KeyError: no frame with that receipt was sent.
        """
        return self.transport.wait_for_receipt(str(receipt_id), timeout)

    def _connect_headers(self, username: Optional[str], passcode: Optional[str],
                         headers: Optional[Mapping[str, Any]], keyword_headers: Mapping[str, Any],
                         host: Optional[str] = None) -> Dict[str, Any]:
        """CONNECT's headers; ``host`` is the vhost, a ``host`` header given, else
        ``/`` on STOMP 1.1/1.2 (:func:`amqstomp._protocol.dialect.connect_host`:
        RabbitMQ's default virtual host, which it would refuse the broker's
        host name for; ActiveMQ ignores it)."""
        frame_headers = connect_headers(self.version, self.vhost, self.heartbeats, username, passcode,
                                        extra=merge_headers([headers, keyword_headers]))
        if "host" not in frame_headers:
            default = connect_host(self.version, None)
            if default is not None:
                frame_headers["host"] = default
        return frame_headers

    def connect(self, username: Optional[str] = None, passcode: Optional[str] = None, wait: bool = False,
                headers: Optional[Mapping[str, Any]] = None, with_connect_command: bool = False,
                timeout: Optional[float] = None, **keyword_headers: Any) -> None:
        """Open the socket and send CONNECT (1.0) or STOMP (1.1/1.2; CONNECT
        with ``with_connect_command``), STOMP 1.2 "Connecting".

        Sends ``accept-version`` (this class's version), ``host`` (the vhost;
        else ``/`` on 1.1/1.2, where stomp.py sends none or, on 1.2, the
        broker's host name, which RabbitMQ refuses as a virtual host), ``heart-beat`` (when
        ``heartbeats`` is not (0, 0)), ``login``/``passcode``, plus ``headers``
        and keyword headers.

        Args:
            wait (bool): block until CONNECTED.
            timeout (float | None): seconds for ``wait``; the connection's
                ``timeout`` or 30 s when None. With ``wait`` it also ends the
                socket attempts (``reconnect_attempts_max=-1`` included) once
                passed (the connection's ``timeout`` when None; no limit when both
                are None, as in stomp.py).

        With ``auto_reconnect`` and ``wait``, a socket lost before CONNECTED
        (a reset, the broker closing it) is tried again with the reconnect
        back-off until ``timeout`` (or the attempts) run out, as a reconnect is;
        a broker's ERROR answer is not.

        Raises:
            ConnectRefusedError: (a ConnectFailedException) with ``wait``, the
                broker answered ERROR (its reason in the message and ``frame``).
            ConnectFailedException: no socket could be opened; or, with
                ``wait``, the broker closed the connection or said nothing
                within ``timeout`` (the socket is then closed).
        """
        rc = self.reconnector
        if rc is not None and rc.reconnecting:  # the failover loop is at it already
            if not rc.wait_connected(timeout if timeout is not None else self.timeout):
                raise ConnectFailedException("not reconnected: %s" % (rc.gave_up or rc.last_error,))
            return
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 <= timeout < float("inf")):
            raise ValueError("timeout must be a finite number of seconds >= 0 or None, got %r" % (timeout,))
        timeout = clamp_wait(timeout)
        if rc is None or not wait:
            self._connect_once(username, passcode, wait, headers, with_connect_command, timeout, keyword_headers)
            return
        wait_s = timeout if timeout is not None else self.timeout
        deadline = None if wait_s is None else time.monotonic() + wait_s
        attempt = 0
        while True:
            now = time.monotonic()
            left = None if deadline is None else max(0.0, deadline - now)
            # listeners hear on_disconnected for the last attempt only (stomp.py's connect makes one)
            last = rc.policy.gives_up(attempt + 1, False) or (
                deadline is not None and now + rc.policy.delay_ms(attempt + 1) / 1000.0 >= deadline)
            try:
                self._connect_once(username, passcode, wait, headers, with_connect_command, left, keyword_headers,
                                   silent=not last)
                return
            except ConnectRefusedError:
                raise
            except ConnectFailedException as exc:
                attempt += 1
                delay_s = rc.policy.delay_ms(attempt) / 1000.0
                if rc.policy.gives_up(attempt, False) or (
                        deadline is not None and time.monotonic() + delay_s >= deadline):
                    raise
                log.info("connect attempt %d failed (%s); trying again in %.3g s", attempt, exc, delay_s)
                time.sleep(delay_s)

    def _connect_once(self, username: Optional[str], passcode: Optional[str], wait: bool,
                      headers: Optional[Mapping[str, Any]], with_connect_command: bool,
                      timeout: Optional[float], keyword_headers: Dict[str, Any], silent: bool = False) -> None:
        """One :meth:`connect`: a socket, CONNECT, and (``wait``) CONNECTED.
        ``silent``: a failed attempt closes its socket without
        ``on_disconnected`` (another attempt follows)."""
        rc = self.reconnector
        with self._connect_lock:  # concurrent callers: one socket, one CONNECT
            opened = not self.transport.is_open()
            if opened:
                self.subscriptions.reset()
                self._ledger.clear_transactions()
                self._transactions.clear()
                wait_s = timeout if timeout is not None else self.timeout
                command = "CONNECT" if (with_connect_command or self.version == "1.0") else self._connect_command
                self._client.handshake(  # CONNECTED is waited for below, outside the lock
                    self.version, command,
                    functools.partial(self._connect_headers, username, passcode, headers, keyword_headers), None,
                    deadline=time.monotonic() + wait_s if wait and wait_s is not None else None, silent=silent)
                self._connect_args = (username, passcode, dict(headers or {}), dict(keyword_headers), command)
                if rc is not None:
                    rc.arm()
        if not opened:
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
        """
        self._transactions.clear()
        frame_headers = merge_headers([headers, keyword_headers])
        frame_headers["receipt"] = receipt or get_uuid()
        wait_s = self.timeout if self.timeout is not None else DEFAULT_DISCONNECT_TIMEOUT
        self._client.disconnect(self.subscriptions, wait_s, frame_headers, announce=True,
                                reason="disconnected by the client", join_s=DEFAULT_CLOSE_TIMEOUT)

    def __enter__(self) -> "BaseConnection":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.disconnect()


class StompConnection10(BaseConnection, Protocol10):
    """A STOMP 1.0 connection (no heart-beats, no NACK, no header escaping).

    Constructor arguments are stomp.py's ``StompConnection10`` ones, in the
    same order (see :class:`amqstomp.transport.Transport` for their meaning),
    plus keyword-only ``ssl_context`` (an ``ssl.SSLContext`` for every host),
    ``vhost`` and ``recv_bytes``. ``timeout`` (seconds) bounds the TCP connect
    and is the default for blocking waits.
    """

    version = "1.0"
    _connect_command = "CONNECT"

    def __init__(self, host_and_ports: Optional[Sequence[HostAndPort]] = None, prefer_localhost: bool = True,
                 try_loopback_connect: bool = True, reconnect_sleep_initial: float = 0.1,
                 reconnect_sleep_increase: float = 0.5, reconnect_sleep_jitter: float = 0.1,
                 reconnect_sleep_max: float = 60.0, reconnect_attempts_max: int = _ATTEMPTS_DEFAULT,
                 timeout: Optional[float] = None, keepalive: Any = None, auto_decode: bool = True,
                 encoding: str = "utf-8", auto_content_length: bool = True,
                 bind_host_port: Optional[HostAndPort] = None, *, vhost: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None, recv_bytes: int = 65536,
                 auto_reconnect: bool = False, auto_resubscribe: bool = True, broker: Optional[str] = None) -> None:
        self._setup(host_and_ports, prefer_localhost, try_loopback_connect, reconnect_sleep_initial,
                    reconnect_sleep_increase, reconnect_sleep_jitter, reconnect_sleep_max, reconnect_attempts_max,
                    timeout, (0, 0), keepalive, vhost, auto_decode, encoding, auto_content_length, 1.5,
                    bind_host_port, ssl_context, recv_bytes,
                    auto_reconnect, auto_resubscribe, broker)



class StompConnection11(BaseConnection, Protocol11):
    """A STOMP 1.1 connection (stomp.py's default ``Connection``).

    Constructor arguments are stomp.py's ``StompConnection11`` ones, in the
    same order: ``heartbeats`` is ``(cx, cy)`` in ms (STOMP 1.2
    "Heart-beating"), ``heart_beat_receive_scale`` the grace factor on the
    receive side, ``vhost`` the ``host`` header; plus keyword-only
    ``ssl_context``, ``recv_bytes``, ``auto_reconnect`` and
    ``auto_resubscribe`` (see :class:`BaseConnection`). See
    :class:`amqstomp.transport.Transport`. ``heartbeats`` defaults to (0, 0),
    or to :data:`DEFAULT_FAILOVER_HEARTBEATS` with ``auto_reconnect``.
    """

    version = "1.1"

    def __init__(self, host_and_ports: Optional[Sequence[HostAndPort]] = None, prefer_localhost: bool = True,
                 try_loopback_connect: bool = True, reconnect_sleep_initial: float = 0.1,
                 reconnect_sleep_increase: float = 0.5, reconnect_sleep_jitter: float = 0.1,
                 reconnect_sleep_max: float = 60.0, reconnect_attempts_max: int = _ATTEMPTS_DEFAULT,
                 timeout: Optional[float] = None, heartbeats: Optional[Tuple[int, int]] = None, keepalive: Any = None,
                 vhost: Optional[str] = None, auto_decode: bool = True, encoding: str = "utf-8",
                 auto_content_length: bool = True, heart_beat_receive_scale: float = 1.5,
                 bind_host_port: Optional[HostAndPort] = None, *,
                 ssl_context: Optional[ssl.SSLContext] = None, recv_bytes: int = 65536,
                 auto_reconnect: bool = False, auto_resubscribe: bool = True, broker: Optional[str] = None) -> None:
        self._setup(host_and_ports, prefer_localhost, try_loopback_connect, reconnect_sleep_initial,
                    reconnect_sleep_increase, reconnect_sleep_jitter, reconnect_sleep_max, reconnect_attempts_max,
                    timeout, heartbeats, keepalive, vhost, auto_decode, encoding, auto_content_length,
                    heart_beat_receive_scale, bind_host_port, ssl_context, recv_bytes,
                    auto_reconnect, auto_resubscribe, broker)



class StompConnection12(StompConnection11, Protocol12):
    """A STOMP 1.2 connection: ACK/NACK by the MESSAGE's ``ack`` header, and
    CONNECT carries ``host``. Same constructor as :class:`StompConnection11`."""

    version = "1.2"


Connection10 = StompConnection10
Connection11 = StompConnection11
Connection12 = StompConnection12
#: stomp.py's default connection class (STOMP 1.1).
Connection = StompConnection11
