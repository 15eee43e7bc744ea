"""Where and how sockets are made: the brokers in order, TLS per broker, connect attempts with back-off.

:class:`Connector` is the one place a socket to a broker is opened (through
:func:`amqstomp._io.channel.connect`), for every API.
"""
import logging
import ssl
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..exception import ConnectFailedException
from .channel import PlainChannel, TLSChannel, TLSEntry, connect
from .websocket import WebSocketChannel

__all__ = ["Connector"]

log = logging.getLogger("amqstomp.transport")

HostAndPort = Tuple[str, int]
Channel = Union[PlainChannel, TLSChannel, WebSocketChannel]


class Connector:
    """How one transport's sockets are made.

    Args:
        host_and_ports (list[tuple[str, int]]): the brokers, in the order tried.
        timeout_s (float): seconds for one TCP (+TLS) connect.
        bind_host_port (tuple[str, int] | None): local address to bind first.
        keepalive: TCP keep-alive (see :func:`amqstomp._io.channel.set_keepalive`).
        ssl_context (ssl.SSLContext | None): TLS for every broker.

    Attributes:
        deferred_error (BaseException | None): see below.
        upgrade: None, or ``upgrade(channel, (host, port), timeout_s) -> channel``
            run on each new channel (:class:`amqstomp._io.websocket.WebSocketUpgrade`:
            STOMP over WebSocket); it closes the channel when it raises.
    """

    def __init__(self, host_and_ports: List[HostAndPort], timeout_s: float,
                 bind_host_port: Optional[HostAndPort] = None, keepalive: Any = None,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.host_and_ports = host_and_ports
        self.timeout_s = timeout_s
        self.bind_host_port = bind_host_port
        self.keepalive = keepalive
        self._tls_default: Optional[TLSEntry] = (ssl_context, None) if ssl_context else None
        self._tls_hosts: Dict[HostAndPort, TLSEntry] = {}
        self.upgrade: Optional[Callable[[Channel, HostAndPort, float], Channel]] = None
        #: what every connect must raise, kept from the configuration (stomp.py fails at connect(), not
        #: when the connection is made: a bad host entry, set_ssl settings no TLS context can be made of)
        self.deferred_error: Optional[BaseException] = None

    def set_tls(self, context: ssl.SSLContext, for_hosts: Optional[Sequence[HostAndPort]] = None,
                validator: Optional[Callable[[Any, str], Tuple[bool, str]]] = None) -> None:
        """Use TLS (``context``) for ``for_hosts``, or for every broker when None;
        ``validator(cert, host) -> (ok, message)`` runs after each handshake."""
        entry = (context, validator)
        if for_hosts is None:
            self._tls_default = entry
        else:
            for host, port in for_hosts:
                self._tls_hosts[(host, int(port))] = entry

    def tls_context(self, host_and_port: Optional[HostAndPort]) -> Optional[ssl.SSLContext]:
        """The TLS context used for ``host_and_port`` (the default one when None), or None."""
        entry = self._tls_hosts.get(host_and_port) if host_and_port else None
        entry = entry or self._tls_default
        return entry[0] if entry else None

    def connect_one(self, host_and_port: HostAndPort, timeout_s: Optional[float] = None) -> Channel:
        """One connect attempt to ``host_and_port``, within ``timeout_s`` seconds
        for the TCP connect, and as much again for TLS and for the WebSocket
        upgrade (:attr:`timeout_s` when None).

        Raises:
            OSError, ssl.SSLError, ConnectFailedException: it failed.
        """
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        channel = connect(host_and_port, timeout_s, self.bind_host_port, self.keepalive,
                          self._tls_hosts.get(host_and_port) or self._tls_default)
        if self.upgrade is None:
            return channel
        return self.upgrade(channel, host_and_port, timeout_s)

    def attempt_succeeded(self, host_and_port: HostAndPort, channel: Channel) -> None:
        """The INFO line of a socket opened (a facade may log its own instead)."""
        log.info("connected to %s:%s%s", host_and_port[0], host_and_port[1], " (TLS)" if channel.tls else "")

    def attempt_failed(self, host_and_port: HostAndPort, exc: BaseException) -> None:
        """The WARNING line of one failed attempt of a round (a facade may log its own instead)."""
        log.warning("could not connect to %s:%s: %s", host_and_port[0], host_and_port[1], exc)

    def connect(self, attempts_max: int, backoff_s: Callable[[int], float], only: Optional[HostAndPort] = None,
                deadline: Optional[float] = None,
                order: Optional[Callable[[List[HostAndPort]], List[HostAndPort]]] = None) -> Tuple[Channel, HostAndPort]:
        """Connect to the first reachable broker, in rounds over :attr:`host_and_ports`
        in the order ``order(host_and_ports)`` gives each round (as listed when
        None; :meth:`amqstomp._core.backoff.ReconnectPolicy.order`), with
        ``backoff_s(round)`` seconds between rounds (stomp.py's attempts:
        each broker tried counts one; ``attempts_max`` -1 for no limit, bounded
        by ``deadline``, a ``time.monotonic()``); or make one attempt to ``only``,
        its timeout cut to end by ``deadline``. Each attempt of a round has its
        own :attr:`timeout_s`; one that fails or times out ends that attempt, not
        the round.

        Returns:
            (channel, (host, port)).

        Raises:
            ConnectFailedException: every attempt failed (naming the last error, which is
                its ``__cause__``: e.g. socket.gaierror for an unknown host).
        """
        if only is not None:
            target = (str(only[0]), int(only[1]))
            timeout_s = None if deadline is None else max(0.001, min(self.timeout_s, deadline - time.monotonic()))
            try:
                channel = self.connect_one(target, timeout_s)
            except (OSError, ssl.SSLError, ConnectFailedException) as exc:
                raise ConnectFailedException("could not connect to %s:%s: %s%s" % (
                    target[0], target[1], exc, refused_hint([target] if _refused(exc) else []))) from exc
            self.attempt_succeeded(target, channel)
            return channel, target
        attempts = 0
        rounds = 0
        last_error: Optional[BaseException] = None
        refused: List[HostAndPort] = []  # the brokers that refused the TCP connection
        final_round = False  # the deadline falls within the next pause: one last round at it
        while True:
            for host_and_port in (order or list)(self.host_and_ports):
                if attempts_max != -1 and attempts >= attempts_max:
                    break
                attempts += 1
                try:
                    channel = self.connect_one(host_and_port)
                except (OSError, ssl.SSLError, ConnectFailedException) as exc:
                    last_error = exc
                    if _refused(exc) and host_and_port not in refused:
                        refused.append(host_and_port)
                    self.attempt_failed(host_and_port, exc)
                    continue
                self.attempt_succeeded(host_and_port, channel)
                return channel, host_and_port
            if attempts_max != -1 and attempts >= attempts_max:
                break
            rounds += 1
            pause = backoff_s(rounds)
            if deadline is not None:
                left = deadline - time.monotonic()
                if final_round or left <= 0:
                    break
                if pause >= left:
                    pause, final_round = left, True
            time.sleep(pause)
        raise ConnectFailedException("could not connect to any of %s after %d attempt(s): %s%s"
                                     % (self.host_and_ports, attempts, last_error, refused_hint(refused))
                                     ) from last_error


#: STOMP's usual port (ActiveMQ's and RabbitMQ's default STOMP listener)
STOMP_PORT = 61613


def _refused(exc: BaseException) -> bool:
    return isinstance(exc, ConnectionRefusedError)


def refused_hint(refused: List[HostAndPort]) -> str:
    """The sentence a connect error adds when ``refused`` (the brokers that
    refused the TCP connection) holds STOMP's default port 61613, "" otherwise:
    nothing listens there, which on a machine whose broker has its STOMP
    listener elsewhere (RabbitMQ's ``rabbitmq_stomp`` plugin configured on
    another port, or not enabled) says nothing about where to look."""
    if not any(int(port) == STOMP_PORT for _, port in refused):
        return ""
    return (" -- nothing accepts connections on port %d, STOMP's default: the broker may listen for STOMP "
            "on another port, or not at all. RabbitMQ: `rabbitmq-diagnostics listeners` lists its ports (the "
            "`stomp` one; `rabbitmq-plugins enable rabbitmq_stomp` turns STOMP on); ActiveMQ: the `stomp` "
            "transportConnector of activemq.xml. For tests, amqstomp.testing starts one and gives its port "
            "(`RabbitMQStomp().start()`, `ActiveMQBroker`, `amqstomp broker`)" % STOMP_PORT)
