"""A broker URI as the keywords of stomp.py's connection classes: :func:`parse_target`.

The target is a host (with a port), or an ActiveMQ URI parsed by
:func:`amqstomp.uri.parse_uri`: ``stomp://host:port``, ``stomp+ssl://host:port``
(TLS), or ``failover:(stomp://a:61613,stomp://b:61613)?maxReconnectAttempts=5``
(a lost connection is replaced, subscriptions made again: the connection's
``auto_reconnect``). A URI option stomp.py's API cannot honour raises
:class:`~amqstomp.exception.ConfigurationError` naming it (nothing is dropped
silently). Used by the command-line client (:mod:`amqstomp.cli.target`) and by
the stomp.py-style compositions (:mod:`amqstomp.fanin`, :mod:`amqstomp.spreading`),
whose members are broker URIs.

Licensed under the Apache License, Version 2.0.
"""
import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .exception import ConfigurationError
from ._core.uri import FAILOVER_OPTIONS, BrokerURI, parse_uri
from ._core.uri_options import CONNECTION_OPTIONS

__all__ = ["Target", "is_uri", "parse_target"]

HostAndPort = Tuple[str, int]

#: transport options of a URI -> the keyword of stomp.py's connection classes (and a unit factor)
_TRANSPORT_KEYWORDS = {"connection_timeout_ms": ("timeout", 0.001), "keepalive": ("keepalive", None),
                       "vhost": ("vhost", None), "heart_beat_receive_scale": ("heart_beat_receive_scale", None)}
#: failover options with no counterpart in stomp.py's connections, and why
_FAILOVER_UNUSED = {
    "startup_max_reconnect_attempts": "the first connect is tried for the connection's timeout (s; --timeout)",
    "timeout_ms": "a frame waits for a new connection for the connection's timeout (s; --timeout)",
}


@dataclass
class Target:
    """The brokers and the connection keywords of one target (a host or a broker URI).

    Attributes:
        host_and_ports: brokers in the order tried.
        tls_hosts: those reached over TLS (``stomp+ssl://`` members).
        failover: a ``failover:`` URI (the connection reconnects by itself).
        version: the URI's ``stompVersion``, or None.
        heartbeats: the URI's ``heartBeat`` (ms, ms), or None.
        username, password: the URI's ``jms.userName`` / ``jms.password``, or None.
        headers: extra CONNECT headers (``client-id`` from ``jms.clientID``).
        keywords: constructor keywords of stomp.py's connection classes
            (``timeout`` in s, ``keepalive``, ``vhost``, ``auto_reconnect``, ``reconnect_*``,
            ``priority_backup``, ``priority_uris``, ``rebalance_interval_ms``).
    """

    host_and_ports: List[HostAndPort]
    tls_hosts: List[HostAndPort] = field(default_factory=list)
    failover: bool = False
    version: Optional[str] = None
    heartbeats: Optional[Tuple[int, int]] = None
    username: Optional[str] = None
    password: Optional[str] = None
    headers: Dict[str, str] = field(default_factory=dict)
    keywords: Dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``host:port``, or ``failover:(a:1,b:2)``: for messages."""
        hosts = ",".join("%s:%s" % hp for hp in self.host_and_ports)
        return "failover:(%s)" % hosts if self.failover else hosts


def is_uri(text: str) -> bool:
    """True when ``text`` (a ``-H`` value) is a URI rather than a host name."""
    return "://" in text or text.lower().startswith("failover:")


def _port(port: Any) -> int:
    try:
        value = int(port)
    except (TypeError, ValueError):
        raise ConfigurationError("port must be a number from 1 to 65535, got %r" % (port,)) from None
    if not 0 < value < 65536:
        raise ConfigurationError("port must be a number from 1 to 65535, got %r" % (port,))
    return value


def parse_target(host: str, port: Any = 61613) -> Target:
    """The target of ``-H host -P port``; ``host`` may be a URI (then ``port`` is not used).

    Raises:
        ConfigurationError: a bad port, a bad URI (:func:`amqstomp.uri.parse_uri`),
            an option the client cannot honour, or failover members whose
            transport options differ (the client has one set for all).
    """
    if not isinstance(host, str) or not host.strip():
        raise ConfigurationError("host must be a host name, an address or a URI, got %r" % (host,))
    if not is_uri(host):
        return Target([(host, _port(port))])
    uri = parse_uri(host)
    target = Target([e.host_and_port for e in uri.endpoints],
                    [e.host_and_port for e in uri.endpoints if e.tls], uri.failover)
    _transport_options(uri, target)
    _connection_options(uri, target)
    if uri.failover:
        _failover_options(uri, target)
    return target


def _uri_name(keyword: str) -> str:
    """The URI's (ActiveMQ's) name of an option known by its keyword."""
    for table in (CONNECTION_OPTIONS, FAILOVER_OPTIONS):
        for option in table.values():
            if option.keyword == keyword:
                return option.uri_name
    return keyword  # pragma: no cover - every keyword comes from a table


def _transport_options(uri: BrokerURI, target: Target) -> None:
    names = sorted({name for e in uri.endpoints for name in e.options})
    for name in names:
        values = {repr(e.options.get(name)) for e in uri.endpoints}
        if len(values) > 1:
            raise ConfigurationError("the members of %s differ in %s (%s): the command-line client uses one "
                                     "value for all of them" % (target.describe(), name, ", ".join(sorted(values))))
        value = uri.endpoints[0].options[name]
        if name == "heartbeats":
            target.heartbeats = (int(value[0]), int(value[1]))
        elif name == "version":
            target.version = value
        else:
            keyword, scale = _TRANSPORT_KEYWORDS[name]
            target.keywords[keyword] = value * scale if scale else value


def _connection_options(uri: BrokerURI, target: Target) -> None:
    for name, value in uri.options.items():
        if name == "username":
            target.username = value
        elif name == "password":
            target.password = value
        elif name == "client_id":
            target.headers["client-id"] = value
        else:
            raise ConfigurationError("option %s of the URI belongs to amqstomp's JMS API (amqstomp.jms); the "
                                     "command-line client (stomp.py's API) does not use it" % _uri_name(name))


def _failover_options(uri: BrokerURI, target: Target) -> None:
    """ActiveMQ's FailoverTransport options as stomp.py's reconnect keywords
    (ActiveMQ's defaults where the URI names none)."""
    options = {o.keyword: o.default for o in FAILOVER_OPTIONS.values()}
    for name, value in uri.failover_options.items():
        if name in _FAILOVER_UNUSED:
            raise ConfigurationError("failover option %s is not used by stomp.py's API (the command-line client, "
                                     "FanInConnection, SpreadingConnection): %s"
                                     % (_uri_name(name), _FAILOVER_UNUSED[name]))
        options[name] = value
    exponential = options["reconnect_use_exponential_back_off"]
    target.keywords.update(
        auto_reconnect=True,
        reconnect_sleep_initial=options["initial_reconnect_delay_ms"] / 1000.0,
        reconnect_sleep_max=options["max_reconnect_delay_ms"] / 1000.0,
        reconnect_sleep_increase=options["reconnect_back_off_multiplier"] - 1.0 if exponential else 0.0,
        reconnect_attempts_max=options["max_reconnect_attempts"],
    )
    if options["priority_backup"]:  # the first member is the priority one unless priorityURIs says (before a shuffle)
        target.keywords.update(priority_backup=True,
                               priority_uris=options["priority_uris"] or [target.host_and_ports[0]])
    if options["rebalance_interval_ms"]:  # round robin over the members in the order tried
        target.keywords["rebalance_interval_ms"] = options["rebalance_interval_ms"]
    if options["randomize"]:
        random.shuffle(target.host_and_ports)
