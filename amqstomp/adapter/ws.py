"""STOMP over WebSocket: stomp.py 9.0's ``stomp.adapter.ws`` (``WSTransport``,
``WSStompConnection``; ``amqstomp.WSConnection``), on the same engine as
:class:`amqstomp.Connection12`.

Only the channel differs: each socket is upgraded to a WebSocket (RFC 6455)
right after the TCP (or TLS) connect, by
:class:`amqstomp._io.websocket.WebSocketUpgrade` on the transport's connector;
the codec, flow control (prefetch, optimized acks), receipts, heart-beats and
failover (``auto_reconnect``) are those of every amqstomp connection.

Needs the optional ``websockets`` package: ``pip install 'amqstomp[ws]'``
(:class:`amqstomp.exception.WebSocketUnavailableError` otherwise, raised by
the constructors). Like stomp.py, a broker is a ``(host, port)`` pair with the
resource ``ws_path`` (``"/"`` by default) and TLS (``wss``) after ``set_ssl``
for that broker; amqstomp also takes ``ws://host:port/path`` and
``wss://...`` URLs among ``host_and_ports`` (TLS from the URL, verified with
the system's CAs; ``set_ssl`` overrides it).

Brokers: ActiveMQ 5.x's ``ws://`` transport connector (``activemq-http``: Jetty,
any path) reads text messages only, one frame each; RabbitMQ's
``rabbitmq_web_stomp`` plugin (port 15674, path ``/ws``) reads text and binary.
"""
import errno
import inspect
import math
import random
import ssl
import sys
import time
from ssl import SSLError
from time import monotonic
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from .. import log
from .. import utils as _utils
from .._io.channel import tls_context
from .._io.websocket import WebSocketUpgrade, parse_ws_url
from ..connection import BaseConnection, StompConnection12
from ..exception import *  # noqa: F401,F403 -- stomp.py's ws module star-imports stomp.exception
from ..exception import ConfigurationError
from ..protocol import Protocol12
from ..transport import DEFAULT_SSL_VERSION, LINUX_KEEPALIVE_AVAIL, MAC_KEEPALIVE_AVAIL, BaseTransport, Transport
from ..utils import (  # and stomp.utils (its star import: constants, helpers, modules)
    CMD_ABORT, CMD_ACK, CMD_BEGIN, CMD_COMMIT, CMD_CONNECT, CMD_DISCONNECT, CMD_NACK, CMD_SEND, CMD_STOMP,
    CMD_SUBSCRIBE, CMD_UNSUBSCRIBE, ENC_NEWLINE, ENC_NULL, HDR_ACCEPT_VERSION, HDR_ACK, HDR_CONTENT_LENGTH,
    HDR_CONTENT_TYPE, HDR_DESTINATION, HDR_HEARTBEAT, HDR_HOST, HDR_ID, HDR_LOGIN, HDR_MESSAGE_ID, HDR_PASSCODE,
    HDR_RECEIPT, HDR_SUBSCRIPTION, HDR_TRANSACTION, HEADER_LINE_RE, HEARTBEAT_FRAME, LINE_END_RE, NULL,
    PASSCODE_RE, PREAMBLE_END_RE, Frame, PollableQueue, calculate_heartbeats, clean_headers, clean_lines,
    convert_frame, copy, decode, default_create_thread, encode, get_errno, get_uuid, is_eol_default, is_localhost,
    join, length, merge_headers, os, pack, parse_frame, parse_headers, queue, re, socket, threading, uuid,
)

if LINUX_KEEPALIVE_AVAIL:
    from socket import SO_KEEPALIVE, SOL_SOCKET, SOL_TCP, TCP_KEEPCNT, TCP_KEEPIDLE, TCP_KEEPINTVL
if MAC_KEEPALIVE_AVAIL:
    from socket import IPPROTO_TCP

#: What ``from amqstomp.adapter.ws import *`` (``stomp.adapter.ws``) gives: stomp.py 9.0's
#: names (its classes, what it imports from stomp.transport, stomp.connect, stomp.protocol,
#: the star imports of stomp.utils and stomp.exception, and the modules and socket constants
#: it imports), but its WebSocket library ``websocket`` (websocket-client): amqstomp's is
#: websockets' sans-I/O layer, imported when a connection is made. ``WSConnection`` (amqstomp's
#: name of :class:`WSStompConnection`) is imported by name.
__all__ = ["WSTransport", "WSStompConnection", "BaseTransport", "DEFAULT_SSL_VERSION", "LINUX_KEEPALIVE_AVAIL",
           "MAC_KEEPALIVE_AVAIL", "BaseConnection", "StompConnection12", "Protocol12", "log", "errno", "math",
           "random", "sys", "time", "monotonic", "ssl", "SSLError"]
__all__ += _utils.__all__
__all__ += ["StompException", "ConnectionClosedException", "NotConnectedException", "ConnectFailedException",
            "InterruptedException"]
if LINUX_KEEPALIVE_AVAIL:
    __all__ += ["SOL_SOCKET", "SO_KEEPALIVE", "SOL_TCP", "TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"]
if MAC_KEEPALIVE_AVAIL:
    __all__ += ["IPPROTO_TCP"]

if TYPE_CHECKING:
    #: :data:`amqstomp.utils.LOCALHOST_NAMES` (the same list, worked out on first use)
    LOCALHOST_NAMES: List[str]
else:
    __getattr__ = _utils.lazy_localhost_names(__name__)

HostAndPort = Tuple[str, int]
Target = Union[HostAndPort, str]

#: StompConnection12's default ``reconnect_attempts_max`` (stomp.py's 3, told apart from a 3 given)
_ATTEMPTS = inspect.signature(StompConnection12.__init__).parameters["reconnect_attempts_max"].default


def _targets(host_and_ports: Optional[Union[str, Sequence[Target]]]) -> Tuple[Any, Dict[HostAndPort, str],
                                                                             List[HostAndPort]]:
    """``host_and_ports`` with URLs turned into (host, port): (the list for the
    transport, resource path per URL broker, the ``wss://`` brokers).

    Raises:
        ConfigurationError: a bad URL.
    """
    if host_and_ports is None:
        return None, {}, []
    entries = [host_and_ports] if isinstance(host_and_ports, str) else list(host_and_ports)
    if not any(isinstance(entry, str) for entry in entries):
        return host_and_ports, {}, []
    hosts: List[Any] = []
    paths: Dict[HostAndPort, str] = {}
    secure: List[HostAndPort] = []
    for entry in entries:
        if not isinstance(entry, str):
            hosts.append(entry)
            continue
        target = parse_ws_url(entry)
        pair = target.host_and_port
        if pair in paths and paths[pair] != target.path:
            raise ConfigurationError("%s:%d is listed twice with different paths (%r, %r)"
                                     % (pair[0], pair[1], paths[pair], target.path))
        paths[pair] = target.path
        hosts.append(pair)
        if target.secure:
            secure.append(pair)
    return hosts, paths, secure


class WSTransport(Transport):
    """stomp.py's ``WSTransport``: an amqstomp :class:`~amqstomp.transport.Transport`
    whose sockets are WebSockets. Arguments as stomp.py's, in its order (see
    :class:`~amqstomp.transport.Transport`), plus:

    Args:
        host_and_ports (list[tuple[str, int] | str] | str | None): brokers as
            ``(host, port)`` or ``ws://`` / ``wss://`` URLs.
        recv_bytes (int): bytes asked for per socket read.
        is_eol_fc: stomp.py's end-of-line test; kept, not used (the codec
            finds EOLs and heart-beats itself).
        ws_path (str | None): HTTP resource of the WebSocket endpoint for
            ``(host, port)`` brokers (``"/"`` when None).
        header (dict | list[str] | None): extra HTTP headers for the upgrade
            request (a dict, or ``"Name: value"`` strings as websocket-client takes).
        binary_mode (bool): send binary WebSocket messages instead of text ones,
            for bodies that are not UTF-8; the broker's text messages are then
            taken as bytes, unchecked (RabbitMQ's web-STOMP sends any body in
            text messages). Without it a text message that is not UTF-8 fails
            the connection (RFC 6455 section 8.1, close code 1007).
        ssl_context (ssl.SSLContext | None): keyword-only, as for
            :class:`~amqstomp.transport.Transport`.
        heart_beat_receive_scale (float): keyword-only, as for
            :class:`~amqstomp.transport.Transport`.
        auto_content_length (bool): keyword-only, as for
            :class:`~amqstomp.transport.Transport`.

    Raises:
        WebSocketUnavailableError: the ``websockets`` package is not installed.
        ConfigurationError: a bad URL, ``ws_path`` or ``header``.
    """

    def __init__(self, host_and_ports: Optional[Union[str, Sequence[Target]]] = None, prefer_localhost: bool = True,
                 try_loopback_connect: bool = True, reconnect_sleep_initial: float = 0.1,
                 reconnect_sleep_increase: float = 0.5, reconnect_sleep_jitter: float = 0.1,
                 reconnect_sleep_max: float = 60.0, reconnect_attempts_max: int = 3,
                 timeout: Optional[float] = None, keepalive: Any = None, vhost: Optional[str] = None,
                 auto_decode: bool = True, encoding: str = "utf-8", recv_bytes: int = 65536,
                 is_eol_fc: Any = is_eol_default, bind_host_port: Optional[HostAndPort] = None,
                 ws_path: Optional[str] = None, header: Any = None, binary_mode: bool = False, *,
                 ssl_context: Optional[ssl.SSLContext] = None, heart_beat_receive_scale: float = 1.5,
                 auto_content_length: bool = True) -> None:
        hosts, paths, secure = _targets(host_and_ports)
        upgrade = WebSocketUpgrade(ws_path, paths, header, binary_mode)  # the library and the options first
        Transport.__init__(self, host_and_ports=hosts, prefer_localhost=prefer_localhost,
                           try_loopback_connect=try_loopback_connect,
                           reconnect_sleep_initial=reconnect_sleep_initial,
                           reconnect_sleep_increase=reconnect_sleep_increase,
                           reconnect_sleep_jitter=reconnect_sleep_jitter, reconnect_sleep_max=reconnect_sleep_max,
                           reconnect_attempts_max=int(reconnect_attempts_max), timeout=timeout, keepalive=keepalive,
                           vhost=vhost, auto_decode=auto_decode, encoding=encoding, is_eol_fc=is_eol_fc,
                           bind_host_port=bind_host_port,
                           ssl_context=ssl_context, heart_beat_receive_scale=heart_beat_receive_scale,
                           recv_bytes=recv_bytes, auto_content_length=auto_content_length)
        self.ws_path = upgrade.default_path
        self.header = header
        self.binary_mode = upgrade.binary
        for pair in self.host_and_ports:  # 127.0.0.1 tried first for a URL naming this machine: same path, TLS
            alias = next((hp for hp in upgrade.paths if hp[1] == pair[1] and hp != pair), None)
            if pair not in upgrade.paths and alias is not None and pair[0] == "127.0.0.1":
                upgrade.paths[pair] = upgrade.paths[alias]
                if alias in secure:
                    secure.append(pair)
        if secure:
            self.set_ssl_context(tls_context(), secure)
        self.connector.upgrade = self._upgrade = upgrade

    def ws_url(self, host_and_port: Optional[HostAndPort] = None) -> Optional[str]:
        """The WebSocket URL of ``host_and_port`` (the current broker when None;
        None when not connected): ``wss://`` when TLS is set for it."""
        target = host_and_port or self.current_host_and_port
        if target is None:
            return None
        return self._upgrade.url(target, self.get_ssl_context(target) is not None)


class WSStompConnection(StompConnection12):
    """stomp.py's ``WSStompConnection`` (``amqstomp.WSConnection``): a STOMP 1.2
    connection over WebSocket. Arguments as stomp.py's, in its order (see
    :class:`amqstomp.connection.StompConnection11` and :class:`WSTransport`;
    ``ws`` is accepted and unused, as in stomp.py 9.0), plus keyword-only
    ``ssl_context``, ``recv_bytes``, ``auto_reconnect``, ``auto_resubscribe`` and
    ``broker`` (see :class:`amqstomp.connection.BaseConnection`).

    Example (RabbitMQ's web-STOMP plugin)::

        conn = amqstomp.WSConnection(["ws://127.0.0.1:15674/ws"], vhost="/")
        conn.connect("guest", "guest", wait=True)

    Raises:
        WebSocketUnavailableError: the ``websockets`` package is not installed
            (``pip install 'amqstomp[ws]'``).
        ConfigurationError: a bad URL, ``ws_path`` or ``header``.
    """

    def __init__(self, host_and_ports: Optional[Union[str, Sequence[Target]]] = None, prefer_localhost: bool = True,
                 try_loopback_connect: bool = True, reconnect_sleep_initial: float = 0.1,
                 reconnect_sleep_increase: float = 0.5, reconnect_sleep_jitter: float = 0.1,
                 reconnect_sleep_max: float = 60.0, reconnect_attempts_max: int = _ATTEMPTS,
                 timeout: Optional[float] = None, heartbeats: Optional[Tuple[int, int]] = None,
                 keepalive: Any = None, vhost: Optional[str] = None, auto_decode: bool = True,
                 encoding: str = "utf-8", auto_content_length: bool = True, heart_beat_receive_scale: float = 1.5,
                 bind_host_port: Optional[HostAndPort] = None, ws: Any = None, ws_path: Optional[str] = None,
                 header: Any = None, binary_mode: bool = False, *, ssl_context: Optional[ssl.SSLContext] = None,
                 recv_bytes: int = 65536, auto_reconnect: bool = False, auto_resubscribe: bool = True,
                 broker: Optional[str] = None) -> None:
        transport = WSTransport(host_and_ports, prefer_localhost, try_loopback_connect, reconnect_sleep_initial,
                                reconnect_sleep_increase, reconnect_sleep_jitter, reconnect_sleep_max,
                                int(reconnect_attempts_max), timeout, keepalive, vhost, auto_decode, encoding,
                                recv_bytes, is_eol_default, bind_host_port, ws_path, header, binary_mode,
                                ssl_context=ssl_context, heart_beat_receive_scale=heart_beat_receive_scale,
                                auto_content_length=auto_content_length)
        BaseConnection.__init__(self, transport)
        self._attach(transport, heartbeats, auto_content_length, auto_reconnect, auto_resubscribe,
                     reconnect_attempts_max is _ATTEMPTS, broker)
        del ws  # accepted and unused, as in stomp.py 9.0


#: stomp.py's name in ``stomp``: ``stomp.WSConnection``
WSConnection = WSStompConnection
