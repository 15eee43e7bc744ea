"""Options of the JMS-style API: the merge of a broker URI's options
(:mod:`amqstomp.uri`, which holds every option's table) with keyword arguments.

URI options keep ActiveMQ's camelCase, keywords are snake_case with ``_ms`` for
milliseconds, as in ``docs/options.md``. An unknown option or keyword raises
:class:`amqstomp.exception.ConfigurationError` (ActiveMQConnectionFactory
refuses unknown ``jms.*`` options too).

Licensed under the Apache License, Version 2.0.
"""
import difflib
import ssl
from typing import Any, Dict, Iterable, Mapping

from .._core.backoff import ReconnectPolicy, check_priority_members, priority_brokers
from .._core.rebalance import Rebalance
from ..exception import ConfigurationError
from .._core.uri import FAILOVER_OPTIONS, BrokerURI, parse_uri
from .._core.uri_options import CONNECTION_OPTIONS, KEYWORD_ONLY_OPTIONS, TRANSPORT_OPTIONS, Option
from .._io.timeouts import MAX_WAIT_S

__all__ = ["JMS_OPTIONS", "EXTRA_KEYWORDS", "ResolvedOptions", "resolve", "defaults", "FAILOVER_HEARTBEATS"]

#: Heart-beats (ms) of a ``failover:`` connection whose URI names none.
FAILOVER_HEARTBEATS = (5000, 5000)
_MAX_WAIT_MS = int(MAX_WAIT_S * 1000)


#: The options that are the JMS-style API's own (producer side, sessions); they live in
#: :data:`amqstomp.uri.CONNECTION_OPTIONS` with the others (docs/options.md).
JMS_OPTIONS = {name: option for name, option in CONNECTION_OPTIONS.items()
               if option.keyword in ("use_async_send", "always_sync_send", "producer_window_size",
                                     "send_timeout_ms", "close_timeout_ms", "usage_full_after_ms",
                                     "separate_producer_socket", "dups_ok_ack_timeout_ms",
                                     "release_after_rollback", "send_acks_async")}


#: Keywords that have no URI form (:data:`amqstomp.uri.KEYWORD_ONLY_OPTIONS`, in ``amqstomp options``' table).
EXTRA_KEYWORDS = KEYWORD_ONLY_OPTIONS

_BY_KEYWORD: Dict[str, Option] = {}
for _table_ in (CONNECTION_OPTIONS, TRANSPORT_OPTIONS, FAILOVER_OPTIONS):
    for _option in _table_.values():
        _BY_KEYWORD.setdefault(_option.keyword, _option)


def _keywords() -> Dict[str, str]:
    """keyword -> where it comes from, for the error message."""
    known: Dict[str, str] = {}
    for table, kind in ((CONNECTION_OPTIONS, "connection"), (TRANSPORT_OPTIONS, "transport"),
                        (FAILOVER_OPTIONS, "failover")):
        for option in table.values():
            known.setdefault(option.keyword, kind)
    for name in EXTRA_KEYWORDS:
        known[name] = "tls"
    return known


KNOWN_KEYWORDS = _keywords()


def defaults() -> Dict[str, Any]:
    """Every option's default, by keyword (the JMS API's own defaults applied)."""
    out: Dict[str, Any] = {}
    for table in (CONNECTION_OPTIONS, TRANSPORT_OPTIONS):
        for option in table.values():
            out.setdefault(option.keyword, option.default)
    # the JMS API batches AUTO_ACKNOWLEDGE acks unless told otherwise (docs/guides/jms.md; the table
    # `amqstomp options` prints, which lists them all, gives the stomp.py-style default, False)
    out["optimize_acknowledge"] = True
    for name in EXTRA_KEYWORDS:
        out[name] = None
    return out


class ResolvedOptions:
    """What :func:`resolve` returns.

    Attributes:
        uri (BrokerURI): the parsed URI (endpoints, transport options).
        options (dict): every option by keyword: defaults, then the URI's, then keywords.
        given (set): keywords the user set (in the URI or as a keyword).
    """

    def __init__(self, uri: BrokerURI, options: Dict[str, Any], given: Iterable[str]) -> None:
        self.uri = uri
        self.options = options
        self.given = set(given)


def _check_keyword(name: str, value: Any) -> Any:
    if name not in KNOWN_KEYWORDS:
        close = difflib.get_close_matches(name, list(KNOWN_KEYWORDS), n=3, cutoff=0.6)
        hint = "; did you mean %s?" % " or ".join(close) if close else ""
        raise ConfigurationError("unknown option %r%s (`amqstomp options` lists them all)" % (name, hint))
    if value is None:
        return value
    if name == "priority_uris":  # a str like the URI's, or a list/tuple of URIs or (host, port) pairs
        return priority_brokers(value)
    option = _BY_KEYWORD.get(name)
    if option is not None and name != "heartbeats":
        default = option.default
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigurationError("option %s must be True or False, got %r" % (name, value))
        if isinstance(default, int) and not isinstance(default, bool) and (
                isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigurationError("option %s must be an int, got %r" % (name, value))
        if not isinstance(value, bool):  # the URI form's own checks (ranges, versions)
            try:
                option.convert(str(value))
            except ValueError as exc:
                raise ConfigurationError("option %s=%r: %s" % (name, value, exc)) from None
    if name == "ssl_context" and not isinstance(value, ssl.SSLContext):
        raise ConfigurationError("ssl_context must be an ssl.SSLContext, got %r" % (value,))
    if name == "heartbeats":
        try:
            cx, cy = (int(v) for v in value)
        except (TypeError, ValueError):
            raise ConfigurationError("heartbeats must be a pair of ints (ms), got %r" % (value,)) from None
        if cx < 0 or cy < 0:
            raise ConfigurationError("heartbeats must be >= 0 ms, got %r" % (value,))
        return (cx, cy)
    return value


def resolve(broker_url: str, keywords: Mapping[str, Any]) -> ResolvedOptions:
    """Parse ``broker_url`` and merge its options with ``keywords`` (keywords win).

    Raises:
        ConfigurationError: an OpenWire ``tcp://`` URI, an unknown option or
            keyword, a bad value.
    """
    if not isinstance(broker_url, str) or not broker_url.strip():
        raise ConfigurationError("broker URL must be a non-empty str, got %r" % (broker_url,))
    text = broker_url.strip()
    uri = parse_uri(text)
    if len(uri.endpoints) != 1 and not uri.failover:  # pragma: no cover - only failover has several
        raise ConfigurationError("%r names %d brokers; one is expected" % (broker_url, len(uri.endpoints)))
    options = defaults()
    given = set()
    endpoint = uri.endpoints[0]  # transport options: the first member's (nested.* gives them to all)
    for source in (uri.options, endpoint.options):
        for name, value in source.items():
            options[name] = value
            given.add(name)
    if uri.failover and "heartbeats" not in given and "heartbeats" not in keywords:
        options["heartbeats"] = FAILOVER_HEARTBEATS  # a silent broker must be noticed too
    for name, value in keywords.items():
        value = _check_keyword(name, value)
        if KNOWN_KEYWORDS[name] == "failover":  # the reconnect policy's, by keyword (docs/options.md)
            if not uri.failover:
                raise ConfigurationError("option %s is a failover option: it needs a failover: URI, e.g. "
                                         "failover:(%s)" % (name, broker_url))
            if value is not None:
                uri.failover_options[name] = value
            continue
        options[name] = value
        given.add(name)
    if options["producer_window_size"] < 0:
        raise ConfigurationError("producer_window_size must be >= 0 bytes, got %r" % (options["producer_window_size"],))
    for name in ("send_timeout_ms", "close_timeout_ms", "usage_full_after_ms", "dups_ok_ack_timeout_ms",
                 "connection_timeout_ms"):
        if options[name] is not None and options[name] < 0:
            raise ConfigurationError("%s must be >= 0 ms, got %r" % (name, options[name]))
    if str(options["version"]) not in ("1.0", "1.1", "1.2"):
        raise ConfigurationError("version (stompVersion) must be 1.0, 1.1 or 1.2, got %r" % (options["version"],))
    options["version"] = str(options["version"])
    if options["check_for_duplicates"] and not options["audit_depth"]:  # 0 turns the audits off
        raise ConfigurationError("jms.checkForDuplicates=true needs jms.auditDepth >= 1 (message-ids per audit), "
                                 "got 0")
    if uri.failover:  # the reconnect policy's checks now, not at create_connection
        policy = ReconnectPolicy.from_uri(uri)
        endpoints = [ep.host_and_port for ep in uri.endpoints]
        if policy.priority_backup:
            check_priority_members(policy.priority_uris, endpoints)
        Rebalance(policy.rebalance_interval_ms, endpoints)  # (an interval needs two brokers at least)
    # times longer than the platform can wait (threading, sockets, timers) wait that long
    for table in (options, uri.failover_options):
        for name, value in table.items():
            if name.endswith("_ms") and isinstance(value, int) and not isinstance(value, bool) \
                    and value > _MAX_WAIT_MS:
                table[name] = _MAX_WAIT_MS
    return ResolvedOptions(uri, options, given)
