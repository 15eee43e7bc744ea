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
  bytes, ``""``) or whose port is not 1-65535 (an int, or a ``str`` of its
  digits such as ``"61613"``, as ``socket`` and so stomp.py take it; the
  asyncio API takes the same) makes ``connect()`` raise
  InvalidHostError (a ConnectFailedException, as stomp.py's, and a
  ConfigurationError) naming it, without a DNS look-up (stomp.py looked
  ``"None"`` up in DNS); a timeout
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
host name.

As in stomp.py, a connection is its protocol's listener (registered on its
transport as ``"protocol-listener"``: a subclass's ``on_message`` hears
messages), a :class:`~amqstomp.listener.Publisher`, and every frame its
methods write goes through ``send_frame`` when a subclass or a mock replaces
it (:mod:`amqstomp._session`); ``conn.transport`` has stomp.py's transport API
(``transmit``, ``override_threading``, ``set_receipt`` ...:
:class:`amqstomp._transport_base.BaseTransport`).
"""
import ssl
import types
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple, TypeVar, TYPE_CHECKING, cast

from ._core.heartbeat import check_receive_scale
from ._io.channel import check_keepalive
from ._session import DEFAULT_DISCONNECT_TIMEOUT, DEFAULT_FAILOVER_HEARTBEATS
from .listener import ConnectionListener, Publisher
from .protocol import AckMode, Protocol10, Protocol11, Protocol12
from .transport import SslParams, Transport

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
    "DEFAULT_DISCONNECT_TIMEOUT",
    "DEFAULT_FAILOVER_HEARTBEATS",
]

HostAndPort = Tuple[str, int]


class _DefaultInt(int):
    """A keyword's default number: equal to it, but told apart (``is``) from the
    same number given by the caller."""

    __slots__ = ()


#: ``reconnect_attempts_max``'s default (stomp.py's 3): warned about when it ends a failover.
_ATTEMPTS_DEFAULT = _DefaultInt(3)


def _check_arguments(reconnect_attempts_max: Any, keepalive: Any, vhost: Any, auto_decode: Any,
                     heart_beat_receive_scale: Any) -> None:
    """The connection keywords whose wrong type stomp.py 9.0 takes and then misuses (a
    ``TypeError`` at connect, a ``host:5`` header, ``auto_decode="false"`` decoding), refused
    here; ``auto_decode`` may be 0 or 1 as well as a bool.

    Raises:
        TypeError: a value of the wrong type, naming the argument.
        ConfigurationError: (a ValueError) ``heart_beat_receive_scale`` below 1.0 or not
            finite (:func:`amqstomp._core.heartbeat.check_receive_scale`), a bad
            ``keepalive`` tuple (:func:`amqstomp._io.channel.check_keepalive`).
    """
    if isinstance(reconnect_attempts_max, bool) or not isinstance(reconnect_attempts_max, int):
        raise TypeError("reconnect_attempts_max must be an int (-1: no limit), got %r" % (reconnect_attempts_max,))
    if vhost is not None and not isinstance(vhost, str):
        raise TypeError("vhost must be a str (CONNECT's host header) or None, got %r" % (vhost,))
    if not isinstance(auto_decode, bool) and auto_decode not in (0, 1):
        raise TypeError("auto_decode must be a bool, got %r" % (auto_decode,))
    check_keepalive(keepalive)
    check_receive_scale(heart_beat_receive_scale)


class BaseConnection(Publisher):
    """What every STOMP version's connection shares (stomp.py 9.0
    ``stomp.connect.BaseConnection``): the transport, its listener registry and
    TLS. Use :class:`StompConnection10`, :class:`StompConnection11` or
    :class:`StompConnection12`; their session (connect, frames, failover) is
    :class:`amqstomp._session.StompSession`'s.

    ``encoding`` (str, ``"utf-8"``): the text codec of ``str`` bodies sent (strictly:
    UnicodeEncodeError) and of bodies decoded for the listeners. A name Python has no
    text codec for (``"no-such-codec"``, ``"base64"``) raises UnknownEncodingError (a
    ConfigurationError and a LookupError) naming it, here; a non-str raises TypeError.
    (stomp.py 9.0 stores ``encoding`` and never uses it: its bodies are UTF-8 both ways.)

    ``auto_decode`` (bool, True): MESSAGE, ERROR and RECEIPT bodies reach the listeners
    as ``str`` decoded with ``encoding`` instead of ``bytes``. Bytes not valid in
    ``encoding`` never raise: each undecodable sequence becomes U+FFFD (``"\\ufffd"``,
    Python's ``errors="replace"``, as stomp.py's ``utils.decode``), so the ``str``
    cannot give the original bytes back: use ``auto_decode=False`` for binary bodies
    (and decode in the listener as you need).

    Keyword-only ``broker`` (every connection class): the broker dialect
    (``"activemq"``, ``"artemis"``, ``"rabbitmq"``, ``"generic"``; None or
    ``"auto"``: what CONNECTED's ``server`` names), which decides the
    broker-specific headers (:mod:`amqstomp._core.dialect`).

    Keyword-only ``priority_backup`` (bool, False) and ``priority_uris`` (None,
    a str of ``stomp://host:port`` URIs separated by commas, or ``(host, port)``
    pairs), with ``auto_reconnect=True``: ActiveMQ's ``priorityBackup`` and
    ``priorityURIs`` (docs/guides/scaling-out.md): the priority brokers (else
    the first of ``host_and_ports``) are tried first, and while connected to
    another the connection probes them and moves back to one that answers.
    ConfigurationError: a priority broker not among ``host_and_ports``.

    Keyword-only ``rebalance_interval_ms`` (int, 0 = off), with ``auto_reconnect=True``:
    every this many ms (at least 1000) the connection moves to the next broker of
    ``host_and_ports`` that answers (round robin), so connections spread over
    standalone brokers (docs/guides/scaling-out.md "Rebalancing"); the move hands
    back what it holds as a priorityBackup move does. ConfigurationError: below
    1000 ms (but 0), with ``priority_backup``, or fewer than two brokers.

    Keyword-only ``check_for_duplicates`` (bool, False) and ``audit_depth`` (int,
    2048 message ids): ActiveMQ's ``checkForDuplicates`` and ``auditDepth``: a
    delivery of a message this connection settled before (acknowledged, or
    consumed where the broker or amqstomp acknowledges) is not given to the
    listeners; it is acknowledged so the broker drops it
    (:mod:`amqstomp._core.duplicates`, docs/guides/scaling-out.md). Off by
    default (Java's is on): it costs 4-6 % of the client's instructions per message.
    ConfigurationError: not a bool, or a depth below 1.

    Keyword-only ``always_session_async`` (bool, False): ActiveMQ's
    ``alwaysSessionAsync``. False: a MESSAGE's listeners run on the thread that read
    it when nothing is queued (no thread hand-off per message; the connection's
    other thread takes reading over while a listener runs long or waits on a
    read), so consecutive ``on_message`` calls may run on either of the socket's
    two threads -- one at a time, in arrival order. True: every event goes
    through the queue to one dispatching thread, so the listeners always run on
    that thread (stomp.py's listeners always run on its receiver thread), for
    code that keeps thread-bound objects between calls (a ``sqlite3`` connection,
    a ``threading.local``); it costs a thread wake-up per message
    (:mod:`amqstomp._io.handoff`). It takes effect at the next socket when set
    later as ``transport.always_session_async``.

    Attributes:
        transport (Transport): the wire layer.
    """

    transport: Transport

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    @staticmethod
    def _make_transport(host_and_ports: Optional[Sequence[HostAndPort]], prefer_localhost: bool,
                        try_loopback_connect: bool, reconnect_sleep_initial: float, reconnect_sleep_increase: float,
                        reconnect_sleep_jitter: float, reconnect_sleep_max: float, reconnect_attempts_max: int,
                        timeout: Optional[float], keepalive: Any, vhost: Optional[str], auto_decode: bool,
                        encoding: str, auto_content_length: bool, heart_beat_receive_scale: float,
                        bind_host_port: Optional[HostAndPort], ssl_context: Optional[ssl.SSLContext],
                        recv_bytes: int) -> Transport:
        _check_arguments(reconnect_attempts_max, keepalive, vhost, auto_decode, heart_beat_receive_scale)
        return Transport(
            host_and_ports, prefer_localhost, try_loopback_connect, reconnect_sleep_initial,
            reconnect_sleep_increase, reconnect_sleep_jitter, reconnect_sleep_max, reconnect_attempts_max,
            timeout, keepalive, vhost, auto_decode, encoding, recv_bytes, bind_host_port=bind_host_port,
            ssl_context=ssl_context, heart_beat_receive_scale=heart_beat_receive_scale,
            auto_content_length=auto_content_length)

    # ---------------------------------------------------------------- listeners

    def set_listener(self, name: str, listener: ConnectionListener) -> None:
        """Register ``listener`` under ``name`` (listeners run in name order).

        Raises:
            RequiredArgumentError: (a ValueError and AssertionError) ``listener`` is None.
        """
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

    def set_receipt(self, receipt_id: str, value: Any) -> None:
        """stomp.py's receipt marks (:meth:`amqstomp._transport_base.BaseTransport.set_receipt`)."""
        self.transport.set_receipt(receipt_id, value)

    # ---------------------------------------------------------------- TLS

    def set_ssl(self, for_hosts: Sequence[HostAndPort] = (), key_file: Optional[str] = None,
                cert_file: Optional[str] = None, ca_certs: Optional[str] = None,
                cert_validator: Optional[Callable[[Any, str], Tuple[bool, str]]] = None,
                ssl_version: Optional[int] = ssl.PROTOCOL_TLS_CLIENT, password: Any = None,
                verify: bool = True) -> None:
        """stomp.py's TLS set-up: use TLS for ``for_hosts`` (every host when empty)
        (:meth:`amqstomp.transport.Transport.set_ssl`). For full control pass an
        ``ssl.SSLContext`` as ``ssl_context=`` to the constructor instead."""
        self.transport.set_ssl(for_hosts, key_file, cert_file, ca_certs, cert_validator, ssl_version, password,
                               verify)

    def get_ssl(self, host_and_port: Optional[HostAndPort] = None) -> Optional[SslParams]:
        """The TLS settings for ``host_and_port`` (the current host when None), or
        None (:meth:`amqstomp.transport.Transport.get_ssl`)."""
        return self.transport.get_ssl(host_and_port)

    def disconnect(self, receipt: Optional[str] = None, headers: Optional[Mapping[str, Any]] = None,
                   **keyword_headers: Any) -> None:
        """Nothing to do for a bare BaseConnection (stomp.py's); a connection's
        is its session's (:meth:`amqstomp._session.StompSession.disconnect`),
        which comes first in its bases."""

    def __enter__(self) -> "BaseConnection":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.disconnect()


_F = TypeVar("_F", bound=Callable[..., Any])


def _renamed(function: _F, qualname: str) -> _F:
    """``function`` under another qualified name, so that Python's own errors about its arguments
    name the class the user called, as stomp.py's do (``StompConnection12.__init__() got an
    unexpected keyword argument ...``), not the class it is inherited from."""
    code = function.__code__
    if hasattr(code, "co_qualname"):  # Python 3.11+: argument errors use the code's own name
        replace: Any = code.replace  # (typed without co_qualname for Python < 3.11)
        code = replace(co_qualname=qualname)
    renamed = types.FunctionType(code, function.__globals__, function.__name__, function.__defaults__,
                                 function.__closure__)
    renamed.__kwdefaults__ = function.__kwdefaults__
    renamed.__annotations__ = function.__annotations__
    renamed.__doc__ = function.__doc__
    renamed.__qualname__ = qualname
    renamed.__module__ = function.__module__
    return cast(_F, renamed)


class StompConnection10(Protocol10, BaseConnection):
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
                 auto_reconnect: bool = False, auto_resubscribe: bool = True, broker: Optional[str] = None,
                 priority_backup: bool = False, priority_uris: Any = None,
                 check_for_duplicates: bool = False, audit_depth: int = 2048, rebalance_interval_ms: int = 0,
                 always_session_async: bool = False) -> None:
        transport = self._make_transport(
            host_and_ports, prefer_localhost, try_loopback_connect, reconnect_sleep_initial, reconnect_sleep_increase,
            reconnect_sleep_jitter, reconnect_sleep_max, reconnect_attempts_max, timeout, keepalive, vhost,
            auto_decode, encoding, auto_content_length, 1.5, bind_host_port, ssl_context, recv_bytes)
        BaseConnection.__init__(self, transport)
        self._attach(transport, (0, 0), auto_content_length, auto_reconnect, auto_resubscribe,
                     reconnect_attempts_max is _ATTEMPTS_DEFAULT, broker,
                     (priority_backup, priority_uris, rebalance_interval_ms), (check_for_duplicates, audit_depth))
        transport.always_session_async = bool(always_session_async)


class StompConnection11(Protocol11, BaseConnection):
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
                 auto_reconnect: bool = False, auto_resubscribe: bool = True, broker: Optional[str] = None,
                 priority_backup: bool = False, priority_uris: Any = None,
                 check_for_duplicates: bool = False, audit_depth: int = 2048, rebalance_interval_ms: int = 0,
                 always_session_async: bool = False) -> None:
        transport = self._make_transport(
            host_and_ports, prefer_localhost, try_loopback_connect, reconnect_sleep_initial, reconnect_sleep_increase,
            reconnect_sleep_jitter, reconnect_sleep_max, reconnect_attempts_max, timeout, keepalive, vhost,
            auto_decode, encoding, auto_content_length, heart_beat_receive_scale, bind_host_port, ssl_context,
            recv_bytes)
        BaseConnection.__init__(self, transport)
        self._attach(transport, heartbeats, auto_content_length, auto_reconnect, auto_resubscribe,
                     reconnect_attempts_max is _ATTEMPTS_DEFAULT, broker,
                     (priority_backup, priority_uris, rebalance_interval_ms), (check_for_duplicates, audit_depth))
        transport.always_session_async = bool(always_session_async)


class StompConnection12(StompConnection11, Protocol12):
    """A STOMP 1.2 connection: ACK/NACK by the MESSAGE's ``ack`` header, and
    CONNECT carries ``host``. Same constructor as :class:`StompConnection11`."""

    version = "1.2"
    if not TYPE_CHECKING:  # for type checkers the constructor stays StompConnection11's, typed as such
        __init__ = _renamed(StompConnection11.__init__, "StompConnection12.__init__")

    @staticmethod
    def is_eol(c: bytes) -> bool:
        """stomp.py's STOMP 1.2 heart-beat test: ``c`` is LF or CRLF (amqstomp's
        parser applies it by itself on 1.2)."""
        return c == b"\x0a" or c == b"\x0d\x0a"


Connection10 = StompConnection10
Connection11 = StompConnection11
Connection12 = StompConnection12
#: stomp.py's default connection class (STOMP 1.1).
Connection = StompConnection11
