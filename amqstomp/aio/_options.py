"""What :func:`amqstomp.aio.connect` is given, checked before anything opens: its
timeouts (:func:`check_timeout`) and what to connect to (:func:`resolve_target`: a URI
parsed by :func:`amqstomp.uri.parse_uri`, whose options fill the arguments left at
their defaults, or (host, port) pairs).

Licensed under the Apache License, Version 2.0.
"""
import ssl as _ssl
from typing import Any, List, NamedTuple, Optional, Tuple

from ..exception import ConfigurationError, InvalidHostError, InvalidTimeoutError
from ..flow import RedeliveryPolicy
from .._core.backoff import ReconnectPolicy
from .._core.frames import ACCEPT_VERSIONS
from .._io.timeouts import clamp_wait
from .._core.uri import FAILOVER_OPTIONS, BrokerURI, checked_hosts, parse_uri
from .._core.uri_options import CONNECTION_OPTIONS, TRANSPORT_OPTIONS

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_RECEIPT_TIMEOUT", "DEFAULT_CLOSE_TIMEOUT", "MIN_TIMEOUT_S", "SEND_RESENDS",
           "DEFAULT_PRODUCER_WINDOW", "DEFAULT_REDELIVERY",
           "check_timeout", "check_connect_objects", "Target", "resolve_target"]

#: The default bounds, seconds, of connect() (also what a timeout given as None means there).
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_RECEIPT_TIMEOUT = 10.0
DEFAULT_CLOSE_TIMEOUT = 5.0
#: The shortest timeout, seconds, a connect()/send()/subscribe()/transaction() takes: a shorter
#: one could not see a RECEIPT, so a frame would be written with a wait that cannot succeed.
MIN_TIMEOUT_S = 0.001
#: With failover, how many times a SEND whose socket was lost before its RECEIPT is written again
#: on the next socket before SendInDoubtError (at least once: the broker may then have it twice).
SEND_RESENDS = 2
#: Bytes of SEND bodies awaiting their RECEIPT at once, by default (ActiveMQ's producerWindowSize).
DEFAULT_PRODUCER_WINDOW = 1024 * 1024
#: The redelivery policy of a subscription naming none (:meth:`Subscription.run`'s; iterating redelivers nothing).
DEFAULT_REDELIVERY = RedeliveryPolicy()


def check_timeout(value: Optional[float], name: str, default: float) -> float:
    """A public timeout checked: seconds, ``default`` for None, at most
    :data:`amqstomp._io.timeouts.MAX_WAIT_S` (:func:`amqstomp._io.timeouts.clamp_wait`).

    Raises:
        InvalidTimeoutError: not a real number, NaN, infinite, or below :data:`MIN_TIMEOUT_S`
            (0 and negative ones too); the message names ``name``.
    """
    if value is None:
        return default
    seconds = clamp_wait(value, name, strict=True)
    if seconds is None or seconds < MIN_TIMEOUT_S:
        raise InvalidTimeoutError("%s must be a number of seconds >= %g (or None: %g s), got %r"
                                  % (name, MIN_TIMEOUT_S, default, value))
    return seconds


class Target(NamedTuple):
    """What to connect to, and the arguments a URI's options filled."""
    hosts: List[Tuple[str, int, bool]]
    policy: Optional[ReconnectPolicy]
    heartbeats: Tuple[int, int]
    vhost: Optional[str]
    version: str
    login: Optional[str]
    passcode: Optional[str]
    client_id: Optional[str]
    #: a ``failover:`` URI that sets ``startupMaxReconnectAttempts`` (else connect_timeout bounds the first connect)
    startup_given: bool


def resolve_target(url_or_hosts: Any, tls: bool, heartbeats: Tuple[int, int], vhost: Optional[str],
                   version: Any, login: Optional[str], passcode: Optional[str],
                   client_id: Optional[str]) -> Target:
    """The brokers (host, port, tls) and the reconnect plan of a ``failover:`` URI
    (:meth:`ReconnectPolicy.from_uri`); a URI's ``heartBeat``, ``host``, ``stompVersion``,
    ``jms.userName``/``jms.password``, ``jms.clientID`` fill the arguments left at their defaults.

    Raises:
        InvalidHostError: (a ConfigurationError) a (host, port) pair whose host is not a non-empty
            str or whose port is not 1-65535 (:func:`amqstomp._core.uri.checked_hosts`).
        ConfigurationError: a URI not understood, ``url_or_hosts`` neither a str nor a list of
            (host, port) pairs (:func:`amqstomp._core.uri.checked_hosts`: a port is an int from 1
            to 65535 or a str of its digits, ``"61613"``, as in the threaded API; ``"abc"`` is
            named in the message), no broker; ``heartbeats`` not a pair; ``vhost`` neither a str
            nor None; or a ``version`` that is not one of
            the strings ``1.0``, ``1.1``, ``1.2`` (its repr and type in the message); ``login`` or
            ``passcode`` neither a str nor None (its type in the message, not its value).
    """
    hosts: List[Tuple[str, int, bool]] = []
    policy = None
    startup_given = False
    if not isinstance(heartbeats, (tuple, list)) or len(heartbeats) != 2:
        raise ConfigurationError("heartbeats must be a pair (send, receive) of ints >= 0 (ms), as (10000, 10000), "
                                 "got %r (%s)" % (heartbeats, type(heartbeats).__name__))
    heartbeats = (heartbeats[0], heartbeats[1])
    if vhost is not None and not isinstance(vhost, str):
        raise ConfigurationError("vhost must be a str (CONNECT's host header) or None, got %r (%s)"
                                 % (vhost, type(vhost).__name__))
    if isinstance(url_or_hosts, str):
        uri = parse_uri(url_or_hosts)
        _refuse_unapplied(uri)
        if uri.failover:
            policy = ReconnectPolicy.from_uri(uri)
            startup_given = "startup_max_reconnect_attempts" in uri.failover_options
        opts = uri.options
        for endpoint in uri.endpoints:
            hosts.append((endpoint.host, endpoint.port, endpoint.tls))
            heartbeats = endpoint.options.get("heartbeats", heartbeats) if heartbeats == (0, 0) else heartbeats
            vhost = vhost or endpoint.options.get("vhost")
            if version == "1.2":
                version = endpoint.options.get("version", version)
        login = login if login is not None else opts.get("username")
        passcode = passcode if passcode is not None else opts.get("password")
        client_id = client_id or opts.get("client_id")
    elif isinstance(url_or_hosts, (list, tuple)):
        try:  # the threaded API's rule (a str port of digits too, as socket and stomp.py take it) and its error
            hosts.extend((host, port, tls) for host, port in checked_hosts(url_or_hosts, "url_or_hosts"))
        except InvalidHostError:
            raise
        except ConfigurationError as exc:
            raise InvalidHostError(str(exc)) from None
    else:
        raise ConfigurationError("url_or_hosts must be a URI str (stomp://host:port, failover:(...)) or a list of "
                                 "(host, port) pairs, got %r (%s)" % (url_or_hosts, type(url_or_hosts).__name__))
    if not hosts:
        raise ConfigurationError("no broker to connect to: %r" % (url_or_hosts,))
    for name, value in (("login", login), ("passcode", passcode)):
        if value is not None and not isinstance(value, str):  # the value itself is not shown: a passcode
            raise ConfigurationError("%s must be a str or None, got a %s" % (name, type(value).__name__))
    if not isinstance(version, str) or version not in ACCEPT_VERSIONS:
        raise ConfigurationError("version must be one of the strings '1.0', '1.1', '1.2', got %r (%s)"
                                 % (version, type(version).__name__))
    return Target(hosts, policy, heartbeats, vhost, version, login, passcode, client_id, startup_given)


#: the URI options this API applies (keywords of the option tables, :mod:`amqstomp._core.uri_options`):
#: of a broker, of the connection; every failover option but the ones that move a connection by plan
_APPLIED_TRANSPORT = frozenset({"heartbeats", "vhost", "version"})
_APPLIED_CONNECTION = frozenset({"username", "password", "client_id"})
_UNAPPLIED_FAILOVER = frozenset({"priority_backup", "priority_uris", "rebalance_interval_ms"})


def _refuse_unapplied(uri: BrokerURI) -> None:
    """Raise ConfigurationError naming the URI options of ``uri`` this API does not apply yet
    (the threaded APIs do), rather than ignore them: priorityBackup, priorityURIs and
    rebalanceInterval (the moves of :mod:`amqstomp._engine.failover`), and the connection and broker
    options other than heartBeat, host, stompVersion, jms.userName, jms.password, jms.clientID
    (``connect()``'s keywords set the rest: ``connect_timeout``, ``heart_beat_receive_scale``...)."""
    given = sorted(set(uri.options) - _APPLIED_CONNECTION) + sorted(set(uri.failover_options) & _UNAPPLIED_FAILOVER)
    for endpoint in uri.endpoints:
        given.extend(sorted(set(endpoint.options) - _APPLIED_TRANSPORT - set(given)))
    if given:
        names = {option.keyword: name for table in (CONNECTION_OPTIONS, TRANSPORT_OPTIONS, FAILOVER_OPTIONS)
                 for name, option in table.items()}
        raise ConfigurationError("amqstomp.aio does not apply the URI option(s) %s yet (the threaded APIs do); "
                                 "leave them out, or give connect() the keyword where it has one"
                                 % ", ".join("%s (%s)" % (names.get(k, k), k) for k in given))


def check_connect_objects(ssl: Any, callbacks: Any) -> None:
    """:func:`amqstomp.aio.connect`'s ``ssl`` and callbacks checked before anything opens.

    Raises:
        ConfigurationError: ``ssl`` neither an :class:`ssl.SSLContext` nor None; a callback
            (``on_error``...: ``callbacks`` maps names to values) neither callable nor None.
    """
    if ssl is not None and not isinstance(ssl, _ssl.SSLContext):
        raise ConfigurationError("ssl must be an ssl.SSLContext (ssl.create_default_context()) or None, got %r (%s)"
                                 % (ssl, type(ssl).__name__))
    for name, value in callbacks.items():
        if value is not None and not callable(value):
            raise ConfigurationError("%s must be a callable or None, got %r (%s)" % (name, value, type(value).__name__))
