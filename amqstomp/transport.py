"""The socket engine: one STOMP connection's sockets, threads, receipts and listeners.

A :class:`Transport` is stomp.py's ``Transport`` (this module answers to
``stomp.transport`` after :func:`amqstomp.install_as_stomp`): the brokers to
connect to, with stomp.py's attempts and back-off, TLS per broker
(``set_ssl``/``get_ssl``), over :class:`amqstomp._transport_base.BaseTransport`
(the listener registry, ``send_frame`` / ``transmit`` / ``send``, receipts by
id and the rest of stomp.py's transport API) and
:class:`amqstomp._io.owner.LinkOwner` (at most one live socket at a time, a
*link*, with its reader, dispatcher and timer threads). Writes and their
coalescing are the link's (:mod:`amqstomp._io.link`); connecting the
connector's (:mod:`amqstomp._io.connector`); listener fan-out
:mod:`amqstomp._engine.dispatch`'s.

The layer above hears from the transport through ONE typed interface,
:class:`amqstomp._io.observer.TransportObserver` (:meth:`Transport.set_observer`;
the engine's :class:`amqstomp._engine.client.Client` is the observer): every
MESSAGE on the reader thread, the dispatch decision and the consumed / failed
outcome of each on the dispatcher, and a socket that ends without
:meth:`Transport.close`, which a failover layer may take over (it opens the
next link with :meth:`Transport.open`, ``only=`` one broker, and the listeners
hear ``on_transport_interrupted`` instead of ``on_disconnected``).
docs/architecture.md shows where this sits.

Like stomp.py's module it holds stomp.py's :mod:`amqstomp.utils` names (and
through them :mod:`amqstomp.constants`'), and ``DEFAULT_SSL_VERSION``,
``LINUX_KEEPALIVE_AVAIL``, ``MAC_KEEPALIVE_AVAIL``; ``from amqstomp.transport
import *`` (``stomp.transport``) gives what stomp.py's gives, the modules and
socket constants it imported included (its module has no ``__all__``).
"""
import copy
import errno
import math
import os
import queue
import random
import re
import selectors
import socket
import ssl
import sys
import threading
import time
import uuid
from collections import deque
from io import BytesIO
from ssl import SSLError
from time import monotonic
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import amqstomp as stomp  # stomp.py's module has the package as `stomp` (its `import stomp.listener`)
from . import exception, log
from ._io.channel import order_hosts, tls_context
from ._core.uri import checked_hosts
# amqstomp's names here, imported by name (``X as X``: re-exported, outside __all__)
from ._io.link import DEFER_FLUSH_BYTES as DEFER_FLUSH_BYTES, DEFER_FLUSH_S as DEFER_FLUSH_S
from ._io.owner import DEFAULT_CLOSE_TIMEOUT as DEFAULT_CLOSE_TIMEOUT
from ._io.scheduler import Scheduler as Scheduler, TimerHandle as TimerHandle
from ._core.backoff import ReconnectPolicy
from ._transport_base import DEFAULT_WAIT_TIMEOUT as DEFAULT_WAIT_TIMEOUT, BaseTransport
from ._transport_hooks import StompPyConnector
from .exception import ConfigurationError, InvalidHostError, InvalidTimeoutError
from .utils import (  # stomp.py's module star-imports stomp.utils (and so stomp.constants)
    CMD_ABORT, CMD_ACK, CMD_BEGIN, CMD_COMMIT, CMD_CONNECT, CMD_DISCONNECT, CMD_NACK, CMD_SEND, CMD_STOMP,
    CMD_SUBSCRIBE, CMD_UNSUBSCRIBE, ENC_NEWLINE, ENC_NULL, HDR_ACCEPT_VERSION, HDR_ACK, HDR_CONTENT_LENGTH,
    HDR_CONTENT_TYPE, HDR_DESTINATION, HDR_HEARTBEAT, HDR_HOST, HDR_ID, HDR_LOGIN, HDR_MESSAGE_ID, HDR_PASSCODE,
    HDR_RECEIPT, HDR_SUBSCRIPTION, HDR_TRANSACTION, HEADER_LINE_RE, HEARTBEAT_FRAME, LINE_END_RE, NULL,
    PASSCODE_RE, PREAMBLE_END_RE, Frame, PollableQueue, calculate_heartbeats, clean_headers, clean_lines,
    clamp_wait, convert_frame, decode, default_create_thread, encode, get_errno, get_uuid, is_eol_default,
    is_localhost, join, length, merge_headers, pack, parse_frame, parse_headers,
)
from . import utils as _utils

#: Linux-style keep-alive tuning (``keepalive=("linux", idle, interval, count)``) is available.
LINUX_KEEPALIVE_AVAIL = all(hasattr(socket, n) for n in ("SOL_TCP", "TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"))
#: macOS-style keep-alive tuning (``keepalive=("mac", interval)``) is available (stomp.py's test: IPPROTO_TCP).
MAC_KEEPALIVE_AVAIL = hasattr(socket, "IPPROTO_TCP")

#: What ``from amqstomp.transport import *`` (``stomp.transport``) gives: stomp.py 9.0's names,
#: no more (amqstomp's own, ``Scheduler``, ``SslParams``, the ``DEFAULT_*`` timeouts..., are
#: imported by name): its classes and constants, stomp.utils' star import, and what its module
#: imports (the socket keep-alive constants only where the platform has them, as there).
__all__ = ["Transport", "BaseTransport", "DEFAULT_SSL_VERSION", "LINUX_KEEPALIVE_AVAIL", "MAC_KEEPALIVE_AVAIL",
           "BytesIO", "SSLError", "deque", "errno", "exception", "log", "math", "monotonic", "random",
           "selectors", "ssl", "stomp", "sys", "time"]
__all__ += _utils.__all__
if LINUX_KEEPALIVE_AVAIL:
    from socket import SO_KEEPALIVE, SOL_SOCKET, SOL_TCP, TCP_KEEPCNT, TCP_KEEPIDLE, TCP_KEEPINTVL

    __all__ += ["SOL_SOCKET", "SO_KEEPALIVE", "SOL_TCP", "TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"]
if MAC_KEEPALIVE_AVAIL:
    from socket import IPPROTO_TCP

    __all__ += ["IPPROTO_TCP"]

HostAndPort = Tuple[str, int]

#: Seconds allowed for one TCP (and TLS) connect when ``timeout`` is None.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: ``set_ssl``'s default ``ssl_version`` (stomp.py's: ``ssl.PROTOCOL_TLS_CLIENT``).
DEFAULT_SSL_VERSION: Optional[int] = ssl.PROTOCOL_TLS_CLIENT
if TYPE_CHECKING:
    #: :data:`amqstomp.utils.LOCALHOST_NAMES` (the same list, worked out on first use)
    LOCALHOST_NAMES: List[str]
else:
    __getattr__ = _utils.lazy_localhost_names(__name__)


class SslParams(Dict[str, Any]):
    """stomp.py's ``get_ssl`` answer: the ``set_ssl`` arguments (``key_file``,
    ``cert_file``, ``ca_certs``, ``cert_validator``, ``verify``, ``ssl_version``,
    ``password``) and ``ssl_context``, the ``ssl.SSLContext`` made of them. Its
    repr masks the password."""

    def __repr__(self) -> str:
        return repr({k: ("********" if k == "password" and v is not None else v) for k, v in self.items()})

    __str__ = __repr__


# --------------------------------------------------------------------------- transport


class Transport(BaseTransport):
    """One STOMP connection's socket, threads, heart-beats and receipts
    (stomp.py 9.0 ``stomp.transport.Transport``; its positional parameters in
    its order).

    Args:
        host_and_ports (list[tuple[str, int]] | None): brokers to try, in order;
            ``[("localhost", 61613)]`` when None. A port may be a str of digits
            (``"61613"``); a bad host or port (``"abc"``) makes :meth:`open_socket`
            raise InvalidHostError naming it (:func:`amqstomp._core.uri.checked_hosts`).
        prefer_localhost (bool): try entries naming this machine first.
        try_loopback_connect (bool): for an entry naming this machine by its
            host name, try ``127.0.0.1`` on that port first.
        reconnect_sleep_initial (float): seconds before the second round of
            connect attempts.
        reconnect_sleep_increase (float): each later pause is this fraction
            longer (0.5: 50 % longer).
        reconnect_sleep_jitter (float): up to this fraction is added at random.
        reconnect_sleep_max (float): longest pause, seconds.
        reconnect_attempts_max (int): socket connect attempts in all (each host
            tried counts one); -1 for no limit. Applies to :meth:`open` only;
            failover after a drop is a separate layer.
        timeout (float | None): seconds for one TCP (+TLS) connect
            (:data:`DEFAULT_CONNECT_TIMEOUT` when None), and the default for
            blocking waits (:data:`DEFAULT_WAIT_TIMEOUT` when None).
        keepalive (bool | tuple | None): TCP keep-alive: True for the OS
            defaults, ``("linux", idle_s, interval_s, count)`` or
            ``("mac", interval_s)`` to tune it.
        vhost (str | None): kept for the facade's ``host`` header.
        auto_decode (bool): listeners get bodies as ``str`` (decoded with
            ``encoding``; undecodable bytes become U+FFFD, never an exception:
            :class:`amqstomp.connection.BaseConnection`) instead of ``bytes``.
        encoding (str): text encoding of bodies (a name Python has no text codec for:
            UnknownEncodingError here, :func:`amqstomp._core.frames.check_encoding`).
        recv_bytes (int): bytes asked for per ``recv`` (>= 1, else ConfigurationError here).
        is_eol_fc (callable): stomp.py's heart-beat test; kept, not consulted
            (see :class:`amqstomp._transport_base.BaseTransport`).
        bind_host_port (tuple[str, int] | None): local address to bind before
            connecting.
        ssl_context (ssl.SSLContext | None): wrap every connection in TLS with
            this context (see also :meth:`set_ssl_context`).
        heart_beat_receive_scale (float): grace factor for the receive check
            (stomp.py's name and default, 1.5). The broker is declared dead
            (``on_heartbeat_timeout``, then the socket is closed) after
            ``2 x receive interval x scale`` of silence: ActiveMQ's inactivity
            monitor decides on a fixed grid whether to send a keep-alive and
            can leave two intervals between bytes (see :data:`amqstomp._core.heartbeat.PEER_GRID_FACTOR`).
            Heart-beats are written whenever nothing was written for half the
            send interval, because ActiveMQ checks reads on a fixed grid with
            no grace.
        auto_content_length (bool): add ``content-length`` to frames with a body
            (STOMP 1.2 "Header content-length"; ActiveMQ then builds a
            BytesMessage, without it a TextMessage).
    """

    def __init__(self,
                 host_and_ports: Optional[Sequence[HostAndPort]] = None,
                 prefer_localhost: bool = True,
                 try_loopback_connect: bool = True,
                 reconnect_sleep_initial: float = 0.1,
                 reconnect_sleep_increase: float = 0.5,
                 reconnect_sleep_jitter: float = 0.1,
                 reconnect_sleep_max: float = 60.0,
                 reconnect_attempts_max: int = 3,
                 timeout: Optional[float] = None,
                 keepalive: Any = None,
                 vhost: Optional[str] = None,
                 auto_decode: bool = True,
                 encoding: str = "utf-8",
                 recv_bytes: int = 65536,
                 is_eol_fc: Callable[[bytes], bool] = is_eol_default,
                 bind_host_port: Optional[HostAndPort] = None,
                 *,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 heart_beat_receive_scale: float = 1.5,
                 auto_content_length: bool = True) -> None:
        if isinstance(recv_bytes, bool) or not isinstance(recv_bytes, int) or recv_bytes < 1:
            raise ConfigurationError("recv_bytes must be an int >= 1 (bytes asked for per recv), got %r" % (recv_bytes,))
        deferred: Optional[BaseException] = None  # stomp.py builds a connection to a bad host, fails at connect()
        try:
            hosts = checked_hosts(host_and_ports or [("localhost", 61613)])
        except ConfigurationError as exc:
            deferred, hosts = InvalidHostError(str(exc)), []
        self.host_and_ports: List[HostAndPort] = order_hosts(hosts, prefer_localhost, try_loopback_connect)
        self.reconnect_sleep_initial = reconnect_sleep_initial
        self.reconnect_sleep_increase = reconnect_sleep_increase
        self.reconnect_sleep_jitter = reconnect_sleep_jitter
        self.reconnect_sleep_max = reconnect_sleep_max
        self.reconnect_attempts_max = reconnect_attempts_max
        #: the delays between connect rounds (stomp.py's formula)
        self.backoff = ReconnectPolicy.stomp_py(reconnect_sleep_initial, reconnect_sleep_increase,
                                                reconnect_sleep_jitter, reconnect_sleep_max, reconnect_attempts_max)
        clamped = clamp_wait(timeout, "timeout", strict=True)  # InvalidTimeoutError naming it
        if clamped == 0:
            raise InvalidTimeoutError("timeout must be a finite number of seconds > 0 or None, got %r" % (timeout,))
        self.keepalive = keepalive
        self.vhost = vhost
        self.bind_host_port = bind_host_port
        connector = StompPyConnector(self.host_and_ports, clamped if clamped is not None else DEFAULT_CONNECT_TIMEOUT,
                                     bind_host_port, keepalive, ssl_context)
        connector.deferred_error = deferred  # (on the connector: no attribute added to this hot object)
        BaseTransport.__init__(self, auto_decode, encoding, is_eol_fc, connector=connector,
                               heart_beat_receive_scale=heart_beat_receive_scale, recv_bytes=recv_bytes,
                               auto_content_length=auto_content_length, timeout=clamped)
        # stomp.py's name (its test suites read conn.transport._Transport__ssl_params): host -> set_ssl's settings
        self.__ssl_params: Dict[Optional[HostAndPort], SslParams] = {}

    # ------------------------------------------------------------ connecting

    def open_socket(self, only: Optional[HostAndPort] = None,
                    deadline: Optional[float] = None) -> Tuple[Any, HostAndPort]:
        """Connect to the first reachable of :attr:`host_and_ports`, with
        stomp.py's attempts, back-off and order (as listed: :attr:`backoff`'s
        ``order``); or make one attempt to ``only``
        (:meth:`amqstomp._io.connector.Connector.connect`).

        Returns:
            (channel, (host, port)).

        Raises:
            ConnectFailedException: every attempt failed.
            InvalidHostError: (a ConnectFailedException) a ``host_and_ports``
                entry names no broker (kept as the connector's ``deferred_error``).
            TypeError, ValueError: ``set_ssl`` was given settings no TLS context
                can be made of (e.g. ``ssl_version="x"``): raised here, as stomp.py
                raised them from ``connect()``.
        """
        error = self.connector.deferred_error
        if error is not None:
            raise type(error)(*error.args)
        return self.connector.connect(self.reconnect_attempts_max, self.backoff_delay, only, deadline,
                                      self.backoff.order)

    def backoff_delay(self, round_number: int) -> float:
        """Seconds to sleep before connect round ``round_number + 1`` (1-based):
        ``initial * (1 + increase) ** (round_number - 1)``, capped at
        ``reconnect_sleep_max``, plus up to ``jitter`` of it at random
        (:meth:`amqstomp._core.backoff.ReconnectPolicy.stomp_py`)."""
        return self.backoff.delay_ms(round_number) / 1000.0

    # ------------------------------------------------------------ TLS

    def set_ssl(self, for_hosts: Sequence[HostAndPort] = (), key_file: Optional[str] = None,
                cert_file: Optional[str] = None, ca_certs: Optional[str] = None,
                cert_validator: Optional[Callable[[Any, str], Tuple[bool, str]]] = None,
                ssl_version: Optional[int] = DEFAULT_SSL_VERSION, password: Any = None, verify: bool = True) -> None:
        """stomp.py's TLS set-up: use TLS for ``for_hosts`` (every broker when
        empty; stomp.py then used it for none).

        Args:
            key_file (str | None): the client certificate's key (PEM).
            cert_file (str | None): the client certificate (PEM).
            ca_certs (str): CA bundle to verify the broker with (system CAs when None).
            cert_validator: ``(cert, hostname) -> (ok, message)`` extra check
                after the handshake; a false ``ok`` fails that connect attempt.
            ssl_version (int): an ``ssl.PROTOCOL_*`` constant.
            password: key password.
            verify (bool): verify the broker's certificate and host name.

        Raises:
            OSError, ssl.SSLError: a file cannot be read or is not what it should be.
            ValueError: ``for_hosts`` is not a sequence of ``(host, port)`` pairs
                (e.g. a ``"host:port"`` string).

        Settings of the wrong type or value (``ssl_version="x"``, a
        ``cert_validator`` that is not callable) are stored as stomp.py does and
        raise (TypeError, ValueError) from ``connect()``.

        For full control pass an ``ssl.SSLContext`` as ``ssl_context=`` instead.
        """
        hosts = _ssl_hosts(for_hosts)
        try:
            if cert_validator is not None and not callable(cert_validator):
                raise TypeError("set_ssl(cert_validator=%r): expected a callable (cert, hostname) -> (ok, message)"
                                % (type(cert_validator).__name__,))
            context: Optional[ssl.SSLContext] = tls_context(ca_certs, cert_file, key_file, password, verify,
                                                            ssl_version)
        except (TypeError, ValueError) as exc:  # stomp.py stores them and fails at connect()
            self.connector.deferred_error, context = exc, None
        if context is not None:
            self.set_ssl_context(context, hosts, cert_validator)
        params = SslParams(key_file=key_file, cert_file=cert_file, ca_certs=ca_certs, cert_validator=cert_validator,
                           verify=verify, ssl_version=ssl_version, password=password, ssl_context=context)
        keys: List[Optional[HostAndPort]] = list(hosts) if hosts else [None]
        for host_and_port in keys:
            self.__ssl_params[host_and_port] = params

    def get_ssl(self, host_and_port: Optional[HostAndPort] = None) -> Optional[SslParams]:
        """stomp.py's ``get_ssl``: the TLS settings for ``host_and_port`` (the
        current broker when None) as :class:`SslParams`, or None when it is not
        TLS. ``["ssl_context"]`` is the context (also for one given as
        ``ssl_context=``, whose other entries are then absent)."""
        host_and_port = host_and_port or self.current_host_and_port
        context = self.get_ssl_context(host_and_port)
        params = self.__ssl_params.get(host_and_port) if host_and_port else None
        params = params or self.__ssl_params.get(None)
        if context is None:  # settings stored, no context made of them (they fail at connect())
            return params if params is not None and params["ssl_context"] is None else None
        if params is not None and params["ssl_context"] is context:
            return params
        return SslParams(ssl_context=context)


def _ssl_hosts(for_hosts: Any) -> Optional[List[HostAndPort]]:
    """``set_ssl``'s ``for_hosts`` as ``[(host, port)]`` (None when empty: every broker).

    Raises:
        ValueError: naming the entry that is not a ``(host, port)`` pair with an integer port.
    """
    if isinstance(for_hosts, (str, bytes)):
        raise ValueError("set_ssl(for_hosts=%r): expected a list of (host, port) pairs, not a string" % (for_hosts,))
    hosts: List[HostAndPort] = []
    for entry in for_hosts or ():
        try:
            host, port = entry
            hosts.append((host, int(port)))
        except (TypeError, ValueError):
            raise ValueError("set_ssl(for_hosts=...): entry %r is not a (host, port) pair with an integer port"
                             % (entry,)) from None
    return hosts or None
