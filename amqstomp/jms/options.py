"""Options of the JMS-style API: the ``jms.*`` / ``amqstomp.*`` options that
:mod:`amqstomp.uri` does not know yet (producer side, sessions), and the
merge of URI options with keyword arguments.

URI options keep ActiveMQ's camelCase, keywords are snake_case with ``_ms`` for
milliseconds, as in ``docs/options.md``. An unknown option or keyword raises
:class:`amqstomp.exception.ConfigurationError` (ActiveMQConnectionFactory
refuses unknown ``jms.*`` options too).

Licensed under the Apache License, Version 2.0.
"""
import difflib
import ssl
from typing import Any, Dict, Iterable, List, Mapping, Tuple
from urllib.parse import unquote

from ..exception import ConfigurationError
from ..uri import CONNECTION_OPTIONS, TRANSPORT_OPTIONS, BrokerURI, Option, _bool, _int, parse_uri

__all__ = ["JMS_OPTIONS", "EXTRA_KEYWORDS", "ResolvedOptions", "resolve", "defaults"]


def _table(*options: Option) -> Dict[str, Option]:
    return {o.uri_name: o for o in options}


#: Options of the JMS-style API that ``amqstomp/uri.py`` does not list (yet).
JMS_OPTIONS = _table(
    Option("jms.useAsyncSend", "use_async_send", _bool, False,
           "persistent sends outside a transaction do not wait for the broker's RECEIPT; "
           "ActiveMQConnectionFactory"),
    Option("jms.alwaysSyncSend", "always_sync_send", _bool, False,
           "every send outside a transaction waits for the broker's RECEIPT, non-persistent ones too"),
    Option("jms.producerWindowSize", "producer_window_size", _int, 1048576,
           "bytes of async sends a producer may have awaiting the broker's RECEIPT before send() "
           "blocks; 0 = no window (async sends carry no receipt; ActiveMQ then stops reading "
           "the socket when its memory is full)"),
    Option("jms.sendTimeout", "send_timeout_ms", _int, 0,
           "ms a send waits for its RECEIPT or for room in the producer window; 0 = as long as "
           "the connection lives"),
    Option("jms.closeTimeout", "close_timeout_ms", _int, 15000,
           "ms close() waits for the broker's answers (UNSUBSCRIBE, DISCONNECT receipts)"),
    Option("amqstomp.usageFullAfter", "usage_full_after_ms", _int, 1000,
           "a RECEIPT later than this many ms calls on_usage_full (ActiveMQ holds a blocked "
           "producer's receipts back while its memory is full)"),
    Option("amqstomp.separateProducerSocket", "separate_producer_socket", _bool, True,
           "non-transacted producers send on their own socket, so producer flow control never "
           "stalls the ACKs and heart-beats of consumers"),
    Option("amqstomp.dupsOkAckTimeOut", "dups_ok_ack_timeout_ms", _int, 1000,
           "DUPS_OK_ACKNOWLEDGE: ms a short ACK batch may wait (AUTO_ACKNOWLEDGE uses "
           "optimizeAcknowledgeTimeOut and idleAckTimeOut)"),
)

#: Keywords that have no URI form.
EXTRA_KEYWORDS = {
    "ssl_context": "an ssl.SSLContext for stomp+ssl:// (certificate verification is the context's)",
    "ca_certs": "CA bundle (PEM file) to verify the broker with; default: the system's CAs",
    "cert_file": "client certificate (PEM) for brokers that ask for one",
    "key_file": "the client certificate's private key (PEM); default: cert_file",
    "key_password": "password of key_file",
}

_INT_KEYWORDS = {o.keyword for o in list(CONNECTION_OPTIONS.values()) + list(TRANSPORT_OPTIONS.values())
                 + list(JMS_OPTIONS.values()) if o.convert is _int}
_BOOL_KEYWORDS = {o.keyword for o in list(CONNECTION_OPTIONS.values()) + list(TRANSPORT_OPTIONS.values())
                  + list(JMS_OPTIONS.values()) if o.convert is _bool}


def _keywords() -> Dict[str, str]:
    """keyword -> where it comes from, for the error message."""
    known: Dict[str, str] = {}
    for table, kind in ((CONNECTION_OPTIONS, "connection"), (TRANSPORT_OPTIONS, "transport"),
                        (JMS_OPTIONS, "jms")):
        for option in table.values():
            known.setdefault(option.keyword, kind)
    for name in EXTRA_KEYWORDS:
        known[name] = "tls"
    return known


KNOWN_KEYWORDS = _keywords()


def defaults() -> Dict[str, Any]:
    """Every option's default, by keyword (the JMS API's own defaults applied)."""
    out: Dict[str, Any] = {}
    for table in (CONNECTION_OPTIONS, TRANSPORT_OPTIONS, JMS_OPTIONS):
        for option in table.values():
            out.setdefault(option.keyword, option.default)
    # the JMS API batches AUTO_ACKNOWLEDGE acks unless told otherwise (README "JMS-style API")
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


def _split_jms(broker_url: str) -> Tuple[str, Dict[str, Any]]:
    """Take the JMS_OPTIONS out of the URI's query (uri.py would refuse them)."""
    base, sep, query = broker_url.partition("?")
    if not sep:
        return broker_url, {}
    kept: List[str] = []
    found: Dict[str, Any] = {}
    for part in query.split("&"):
        key = unquote(part.split("=", 1)[0])
        option = JMS_OPTIONS.get(key)
        if option is None:
            kept.append(part)
            continue
        if "=" not in part:
            raise ConfigurationError("option %r has no value (expected name=value) in %r" % (part, broker_url))
        text = unquote(part.split("=", 1)[1])
        try:
            found[option.keyword] = option.convert(text)
        except ValueError as exc:
            raise ConfigurationError("option %s=%r in %r: %s" % (key, text, broker_url, exc)) from None
    rest = base + ("?" + "&".join(kept) if kept else "")
    return rest, found


def _check_keyword(name: str, value: Any) -> Any:
    if name not in KNOWN_KEYWORDS:
        close = difflib.get_close_matches(name, list(KNOWN_KEYWORDS), n=3, cutoff=0.6)
        hint = "; did you mean %s?" % " or ".join(close) if close else ""
        raise ConfigurationError("unknown option %r%s (docs/options.md and the README's JMS section "
                                 "list them all)" % (name, hint))
    if value is None:
        return value
    if name in _BOOL_KEYWORDS and not isinstance(value, bool):
        raise ConfigurationError("option %s must be True or False, got %r" % (name, value))
    if name in _INT_KEYWORDS and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigurationError("option %s must be an int, got %r" % (name, value))
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
        ConfigurationError: an OpenWire ``tcp://`` URI, a ``failover:`` URI (not in
            this release), an unknown option or keyword, a bad value.
    """
    if not isinstance(broker_url, str) or not broker_url.strip():
        raise ConfigurationError("broker URL must be a non-empty str, got %r" % (broker_url,))
    text = broker_url.strip()
    if text.lower().startswith("failover:"):
        raise ConfigurationError(
            "%r: failover comes in a later release of amqstomp's JMS-style API; connect to one "
            "broker with stomp://host:port (or stomp+ssl://) for now" % (broker_url,))
    rest, jms = _split_jms(text)
    uri = parse_uri(rest)
    if len(uri.endpoints) != 1:  # pragma: no cover - only failover has several
        raise ConfigurationError("%r names %d brokers; one is expected" % (broker_url, len(uri.endpoints)))
    options = defaults()
    given = set()
    endpoint = uri.endpoints[0]
    for source in (uri.options, endpoint.options, jms):
        for name, value in source.items():
            options[name] = value
            given.add(name)
    for name, value in keywords.items():
        options[name] = _check_keyword(name, value)
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
    return ResolvedOptions(uri, options, given)
