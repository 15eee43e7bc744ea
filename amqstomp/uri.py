"""ActiveMQ-style URIs and options: one table maps each camelCase URI option to
its snake_case Python keyword (``docs/options.md`` is generated from it).

Grammar (ActiveMQ's):

* ``stomp://host:port?opt=value&...``, ``stomp+ssl://...`` (TLS), ``stomp+nio://``
  (the broker's NIO connector; a plain TCP socket for the client);
* ``failover:(stomp://a:61613,stomp://b:61613)?opt=...`` or without the
  parentheses; ``nested.*`` options go to every member;
* destinations with consumer options: ``/queue/a?consumer.prefetchSize=10``
  (ActiveMQ ignores ``?consumer.*`` over STOMP, so amqstomp turns each option
  into the matching SUBSCRIBE header, e.g. ``activemq.prefetchSize:10``).

An OpenWire ``tcp://`` URI, an unknown ``jms.*``/transport option, or a bad value
raises :class:`amqstomp.exception.ConfigurationError` naming the option and the URI.
"""
import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Tuple
from urllib.parse import unquote

from ._core.option_values import (  # (the tables below use the names they had when defined here)
    MS as _MS, MS_OR_OFF as _MS_OR_OFF, PREFETCH as _PREFETCH, boolean as _bool, broker_dialect as _broker,
    float_min as _float_min, heart_beat as _heart_beat, int_in as _int_in, redact as _redact, stomp_version as _version)
from .exception import ConfigurationError, InvalidDestinationError

__all__ = [
    "Option", "CONNECTION_OPTIONS", "TRANSPORT_OPTIONS", "FAILOVER_OPTIONS", "CONSUMER_OPTIONS",
    "KEYWORD_ONLY_OPTIONS", "Endpoint", "BrokerURI", "parse_uri", "priority_endpoints", "DESTINATION_PREFIXES",
    "check_destination", "parse_destination", "destination_kind", "options_table_markdown",
]


class Option(NamedTuple):
    """One URI option: ``uri_name`` (ActiveMQ's camelCase) maps to ``keyword``
    (amqstomp's snake_case); ``convert`` parses the text; ``default`` and
    ``meaning`` (units, source) are for the docs."""

    uri_name: str
    keyword: str
    convert: Callable[[str], Any]
    default: Any
    meaning: str


def _table(*options: Option) -> Dict[str, Option]:
    return {o.uri_name: o for o in options}


#: ``jms.*`` options (ActiveMQConnectionFactory's names), and amqstomp's own ``amqstomp.*``.
CONNECTION_OPTIONS = _table(
    Option("jms.prefetchPolicy.all", "prefetch_all", _PREFETCH, None,
           "prefetch size (messages) of every destination kind"),
    Option("jms.prefetchPolicy.queuePrefetch", "queue_prefetch", _PREFETCH, 1000,
           "queue consumers' prefetch size (messages); ActiveMQPrefetchPolicy"),
    Option("jms.prefetchPolicy.queueBrowserPrefetch", "queue_browser_prefetch", _PREFETCH, 500,
           "queue browsers' prefetch size (messages)"),
    Option("jms.prefetchPolicy.durableTopicPrefetch", "durable_topic_prefetch", _PREFETCH, 100,
           "durable topic subscribers' prefetch size (messages)"),
    Option("jms.prefetchPolicy.topicPrefetch", "topic_prefetch", _PREFETCH, 32767,
           "topic subscribers' prefetch size (messages); ActiveMQ 5.17's source (docs say 32766)"),
    Option("jms.optimizeAcknowledge", "optimize_acknowledge", _bool, False,
           "ack consumed messages in batches with one cumulative ACK; ActiveMQMessageConsumer"),
    Option("jms.optimizeAcknowledgeTimeOut", "optimize_acknowledge_timeout_ms", _MS, 300,
           "ms after the last ACK when what is unacked is acked anyway"),
    Option("jms.optimizedAckScheduledAckInterval", "optimized_ack_scheduled_ack_interval_ms", _MS, 0,
           "ack what is unacked every this many ms; 0 = off"),
    Option("jms.redeliveryPolicy.maximumRedeliveries", "maximum_redeliveries", _MS_OR_OFF, 6,
           "redeliveries of a rolled-back message before it is poisoned (-1 = no limit); RedeliveryPolicy"),
    Option("jms.redeliveryPolicy.initialRedeliveryDelay", "initial_redelivery_delay_ms", _MS, 1000,
           "ms before the first redelivery"),
    Option("jms.redeliveryPolicy.redeliveryDelay", "redelivery_delay_ms", _MS, 1000,
           "ms between later redeliveries (without back-off)"),
    Option("jms.redeliveryPolicy.useExponentialBackOff", "use_exponential_back_off", _bool, False,
           "multiply the delay by backOffMultiplier each time"),
    Option("jms.redeliveryPolicy.backOffMultiplier", "back_off_multiplier", _float_min(1.0), 5.0,
           "the back-off multiplier"),
    Option("jms.redeliveryPolicy.maximumRedeliveryDelay", "maximum_redelivery_delay_ms", _MS_OR_OFF, -1,
           "upper bound of the redelivery delay in ms; -1 = none"),
    Option("jms.clientID", "client_id", str, None, "JMS client id, sent as CONNECT's client-id header"),
    Option("jms.userName", "username", str, None, "login (CONNECT's login header)"),
    Option("jms.password", "password", str, None, "passcode (CONNECT's passcode header); never logged"),
    Option("jms.checkForDuplicates", "check_for_duplicates", _bool, False, "drop deliveries of settled messages"),
    Option("jms.auditDepth", "audit_depth", _MS, 2048, "message-ids per duplicate audit; 0 = audits off"),
    Option("amqstomp.ackBatchCap", "ack_batch_cap", _int_in(1), 100,
           "largest optimized ACK batch (messages): keep it at or below the broker's maxPageSize (200)"),
    Option("amqstomp.idleAckTimeOut", "idle_ack_ms", _MS, 50,
           "ack what is unacked when no message arrived for this many ms; 0 = off"),
    Option("jms.useAsyncSend", "use_async_send", _bool, False,
           "persistent sends outside a transaction do not wait for the broker's RECEIPT; "
           "ActiveMQConnectionFactory"),
    Option("jms.alwaysSyncSend", "always_sync_send", _bool, False,
           "every send outside a transaction waits for the broker's RECEIPT, non-persistent ones too"),
    Option("jms.producerWindowSize", "producer_window_size", _MS, 1048576,
           "bytes of async sends a producer may have awaiting the broker's RECEIPT before send() "
           "blocks; 0 = no window (async sends carry no receipt; ActiveMQ then stops reading "
           "the socket when its memory is full)"),
    Option("jms.sendTimeout", "send_timeout_ms", _MS, 30000,
           "ms a send waits for its RECEIPT or for room in the producer window, then raises "
           "ReceiptTimeout; a whole commit() (its sends' receipts, COMMIT's, the rollback of a "
           "commit that failed) and rollback() take at most this long; also the bound of creating a consumer (its SUBSCRIBE's RECEIPT; "
           "there 0 = closeTimeout); 0 = as long as the connection lives. ActiveMQ's default is 0; "
           "amqstomp bounds every blocking call by default (a broker that takes a SEND and never "
           "answers, with heart-beats off, would block forever)"),
    Option("jms.sendAcksAsync", "send_acks_async", _bool, True,
           "acknowledge() writes its ACK and returns (ActiveMQConnectionFactory's sendAcksAsync); "
           "false: it waits for the ACK's RECEIPT (up to sendTimeout, else closeTimeout), so a "
           "normal return means the broker applied it"),
    Option("jms.closeTimeout", "close_timeout_ms", _MS, 15000,
           "ms a whole close() of a connection, session or consumer may wait for the broker's "
           "answers, all of them together (ABORT, UNSUBSCRIBE, DISCONNECT receipts, async sends)"),
    Option("amqstomp.usageFullAfter", "usage_full_after_ms", _MS, 1000,
           "a RECEIPT later than this many ms calls on_usage_full (ActiveMQ holds a blocked "
           "producer's receipts back while its memory is full)"),
    Option("amqstomp.separateProducerSocket", "separate_producer_socket", _bool, True,
           "non-transacted producers send on their own socket, so producer flow control never "
           "stalls the ACKs and heart-beats of consumers"),
    Option("amqstomp.dupsOkAckTimeOut", "dups_ok_ack_timeout_ms", _MS, 1000,
           "DUPS_OK_ACKNOWLEDGE: ms a short ACK batch may wait (AUTO_ACKNOWLEDGE uses "
           "optimizeAcknowledgeTimeOut and idleAckTimeOut)"),
    Option("amqstomp.broker", "broker", _broker, "auto",
           "the broker's dialect: auto (from CONNECTED's server header), activemq (Classic), artemis, "
           "rabbitmq or generic (no broker-specific headers); _core/dialect.py"),
    Option("amqstomp.releaseAfterRollback", "release_after_rollback", _bool, False,
           "a transacted session's rollback() re-subscribes the consumers that got messages in "
           "the transaction (UNSUBSCRIBE returns them to the queue, for any consumer) instead of "
           "redelivering them locally; docs/guides/transactions.md \"Release after rollback\""),
)

#: Options of one STOMP transport (a member of a failover URI takes them too).
TRANSPORT_OPTIONS = _table(
    Option("connectionTimeout", "connection_timeout_ms", _MS, 30000, "ms to open the TCP connection"),
    Option("heartBeat", "heartbeats", _heart_beat, (0, 0),
           "STOMP heart-beat 'cx,cy' in ms: what we send, what we want (STOMP 1.2 'Heart-beating')"),
    Option("heartBeatGraceFactor", "heart_beat_receive_scale", _float_min(1.0), 1.5,
           "silence tolerated, as a multiple of the negotiated receive interval (and, Linux, a broker "
           "taking none of the bytes written, of the send interval)"),
    Option("keepAlive", "keepalive", _bool, False, "TCP keep-alive on the socket"),
    Option("stompVersion", "version", _version, "1.2", "highest STOMP version to ask for: 1.0, 1.1 or 1.2"),
    Option("host", "vhost", str, None, "CONNECT's host header (virtual host); default: / (RabbitMQ's default "
           "virtual host; ActiveMQ ignores the header)"),
)

#: Options of a ``failover:`` URI (FailoverTransport's names and defaults).
FAILOVER_OPTIONS = _table(
    Option("initialReconnectDelay", "initial_reconnect_delay_ms", _MS, 10, "ms before the first reconnect"),
    Option("maxReconnectDelay", "max_reconnect_delay_ms", _MS, 30000, "upper bound of the delay in ms"),
    Option("useExponentialBackOff", "reconnect_use_exponential_back_off", _bool, True,
           "multiply the delay after each failed attempt"),
    Option("backOffMultiplier", "reconnect_back_off_multiplier", _float_min(1.0), 2.0, "the back-off multiplier"),
    Option("maxReconnectAttempts", "max_reconnect_attempts", _MS_OR_OFF, -1,
           "attempts after a connection was lost; -1 = forever"),
    Option("startupMaxReconnectAttempts", "startup_max_reconnect_attempts", _MS_OR_OFF, -1,
           "attempts before the first connection; -1 = forever"),
    Option("randomize", "randomize", _bool, True,
           "pick members in random order; after a loss the member lost is tried last either way"),
    Option("timeout", "timeout_ms", _MS_OR_OFF, -1, "ms a send waits while disconnected; -1 = forever"),
    Option("priorityBackup", "priority_backup", _bool, False,
           "prefer the priority members (priorityURIs, else the first): tried first on every pass unless just "
           "lost, and moved back to once one answers a probe (sent with the reconnect back-off, at least every "
           "maxReconnectDelay ms) while connected to another"),
    Option("priorityURIs", "priority_uris", lambda text: priority_endpoints(text), None,
           "with priorityBackup: the members to prefer, stomp:// URIs separated by commas; None: the first one"),
    Option("rebalanceInterval", "rebalance_interval_ms", _MS, 0,
           "amqstomp's own: every this many ms (at least 1000; 0 = never) move the connection to the next member "
           "that answers (at random with randomize), handing back what it holds first; not with priorityBackup. "
           "ActiveMQ rebalances OpenWire clients from the broker (rebalanceClusterClients), which STOMP never hears"),
)


def priority_endpoints(text: str) -> Tuple[Tuple[str, int], ...]:
    """``(host, port)`` of each ``stomp://host:port`` URI of ``text`` (separated by commas: ``priorityURIs``).
    Raises ConfigurationError (a ValueError): not a STOMP URI, an option in one, or none."""
    found = [_endpoint(m.strip(), text, {}) for m in str(text).split(",") if m.strip()]
    if not found or any(leftover for _, leftover in found):
        raise ConfigurationError("priorityURIs must be stomp://host:port URIs separated by commas, got %r" % (text,))
    return tuple(endpoint.host_and_port for endpoint, _ in found)

#: Keywords of the JMS API's ``ConnectionFactory`` that have no URI form (TLS), with their meaning.
KEYWORD_ONLY_OPTIONS = {
    "ssl_context": "an ssl.SSLContext for stomp+ssl:// (certificate verification is the context's)",
    "ca_certs": "CA bundle (PEM file) to verify the broker with; default: the system's CAs",
    "cert_file": "client certificate (PEM) for brokers that ask for one",
    "key_file": "the client certificate's private key (PEM); default: cert_file",
    "key_password": "password of key_file",
}

#: ``consumer.*`` destination options -> SUBSCRIBE header (ActiveMQ ConsumerInfo properties).
CONSUMER_OPTIONS = _table(
    Option("consumer.prefetchSize", "activemq.prefetchSize", _PREFETCH, None, "the consumer's prefetch size"),
    Option("consumer.maximumPendingMessageLimit", "activemq.maximumPendingMessageLimit", _MS_OR_OFF, None,
           "messages the broker keeps for a slow topic consumer before discarding"),
    Option("consumer.noLocal", "activemq.noLocal", _bool, None, "skip messages sent on this connection"),
    Option("consumer.dispatchAsync", "activemq.dispatchAsync", _bool, None, "broker dispatches asynchronously"),
    Option("consumer.retroactive", "activemq.retroactive", _bool, None, "retroactive topic consumer"),
    Option("consumer.exclusive", "activemq.exclusive", _bool, None, "exclusive queue consumer"),
    Option("consumer.priority", "activemq.priority", _int_in(0, 127), None, "consumer priority (0-127)"),
    Option("consumer.selector", "selector", str, None, "JMS selector (STOMP 'selector' header)"),
)


@dataclass
class Endpoint:
    """One broker address of a URI."""

    scheme: str  # "stomp", "stomp+ssl", "stomp+nio", "stomp+nio+ssl"
    host: str
    port: int
    options: Dict[str, Any] = field(default_factory=dict)  # TRANSPORT_OPTIONS keywords

    @property
    def tls(self) -> bool:
        return self.scheme.endswith("+ssl")

    @property
    def host_and_port(self) -> Tuple[str, int]:
        return self.host, self.port


@dataclass
class BrokerURI:
    """A parsed broker URI: its endpoints (one, or the members of a failover
    URI), whether it was a ``failover:`` URI, and its options by Python keyword."""

    endpoints: List[Endpoint]
    failover: bool = False
    options: Dict[str, Any] = field(default_factory=dict)  # CONNECTION_OPTIONS keywords
    failover_options: Dict[str, Any] = field(default_factory=dict)  # FAILOVER_OPTIONS keywords

    def __repr__(self) -> str:  # the password masked (reprs end up in logs and exceptions)
        return "BrokerURI(endpoints=%r, failover=%r, options=%r, failover_options=%r)" % (
            self.endpoints, self.failover, mask_secrets(self.options), self.failover_options)


#: Option keywords whose values are secrets: masked in reprs, never logged.
SECRET_KEYWORDS = ("password", "key_password")


def mask_secrets(options: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of ``options`` with the values of :data:`SECRET_KEYWORDS` replaced by ``***``."""
    if not any(options.get(name) is not None for name in SECRET_KEYWORDS):
        return options
    return {k: ("***" if k in SECRET_KEYWORDS and v is not None else v) for k, v in options.items()}


def redact(text: str) -> str:
    """``text`` (a broker URI) with passwords and URI credentials masked."""
    return _redact(text)


_SCHEMES = {"stomp": 61613, "stomp+nio": 61613, "stomp+ssl": 61612, "stomp+nio+ssl": 61612}
_OPENWIRE = ("tcp", "ssl", "nio", "nio+ssl", "vm", "auto", "auto+nio", "auto+ssl", "amqp", "mqtt", "ws", "wss",
             "udp", "http", "https")


def _unknown(kind: str, key: str, where: str, known: Iterable[str]) -> ConfigurationError:
    close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
    hint = "; did you mean %s?" % " or ".join(close) if close else ""
    return ConfigurationError("unknown %s %r in %r%s (docs/options.md lists them all)" % (kind, key, where, hint))


def _split_query(text: str, uri: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    if not text:
        return out
    for part in text.split("&"):
        if not part:
            continue
        if "=" not in part:
            raise ConfigurationError("option %r has no value (expected name=value) in %r" % (part, uri))
        key, value = part.split("=", 1)
        out[unquote(key)] = unquote(value)
    return out


def _convert(option: Option, text: str, uri: str) -> Any:
    try:
        return option.convert(text)
    except ValueError as exc:
        shown = "***" if option.keyword == "password" else text
        raise ConfigurationError("option %s=%r in %r: %s" % (option.uri_name, shown, uri, exc)) from None


def _endpoint(text: str, uri: str, nested: Dict[str, str]) -> Tuple[Endpoint, Dict[str, str]]:
    if "://" not in text:
        raise ConfigurationError("%r in %r is not a URI (expected stomp://host:port)" % (text, uri))
    scheme, rest = text.split("://", 1)
    scheme = scheme.lower()
    if scheme not in _SCHEMES:
        if scheme in _OPENWIRE:
            raise ConfigurationError(
                "%r is not a STOMP URI: amqstomp speaks STOMP, not %s; use stomp://host:61613 "
                "(or stomp+ssl://) and open a STOMP transport connector on the broker" % (uri, scheme))
        raise ConfigurationError("unknown scheme %r in %r (expected stomp, stomp+ssl, stomp+nio)" % (scheme, uri))
    hostport, _, query = rest.partition("?")
    hostport = hostport.rstrip("/")
    if "@" in hostport:
        raise ConfigurationError("credentials in the authority of %r are not supported: use "
                                 "jms.userName and jms.password" % (uri,))
    if hostport.startswith("["):  # [ipv6]:port
        host, bracket, port_text = hostport[1:].partition("]")
        if not bracket or (port_text and not port_text.startswith(":")):
            raise ConfigurationError("bad IPv6 address in %r (expected [address]:port)" % (uri,))
        port_text = port_text[1:]
    else:
        host, _, port_text = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    if not host:
        raise ConfigurationError("no host in %r" % (uri,))
    _check_host(host, text, uri)
    try:
        port = int(port_text) if port_text else _SCHEMES[scheme]
        if not 0 < port < 65536:
            raise ValueError
    except ValueError:
        raise ConfigurationError("bad port %r in %r" % (port_text, uri)) from None
    raw = dict(nested)
    raw.update(_split_query(query, uri))
    options: Dict[str, Any] = {}
    leftover: Dict[str, str] = {}
    for key, value in raw.items():
        if key in TRANSPORT_OPTIONS:
            opt = TRANSPORT_OPTIONS[key]
            options[opt.keyword] = _convert(opt, value, uri)
        else:
            leftover[key] = value
    return Endpoint(scheme, host, port, options), leftover


def _check_host(host: str, member: str, uri: str) -> None:
    """A host name a socket can be opened to: no blanks or control characters,
    labels of 1-63 characters, 253 in all (RFC 1123); IPv6 literals pass."""
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in host):
        raise ConfigurationError("host %r of %r in %r holds a blank or a control character" % (host, member, uri))
    if ":" in host:  # an IPv6 literal (from [..]); the socket layer checks it
        return
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise ConfigurationError("host %r of %r in %r is not a valid host name (each dot-separated label "
                                 "must have 1 to 63 characters)" % (host, member, uri)) from None
    if len(ascii_host) > 253:
        raise ConfigurationError("host name of %r in %r is longer than 253 characters" % (member, uri))


def _apply_connection_options(raw: Dict[str, str], uri: str, target: Dict[str, Any]) -> None:
    for key, value in raw.items():
        opt = CONNECTION_OPTIONS.get(key)
        if opt is None:
            raise _unknown("option", key, uri, list(CONNECTION_OPTIONS) + list(TRANSPORT_OPTIONS))
        target[opt.keyword] = _convert(opt, value, uri)


def parse_uri(uri: str) -> BrokerURI:
    """Parse a broker URI (see the module docstring for the grammar).

    Returns:
        BrokerURI: endpoints with their transport options; connection options
        (``jms.*``, ``amqstomp.*``) by snake_case keyword; failover options.

    Raises:
        ConfigurationError: not a STOMP URI (``tcp://`` is OpenWire), an unknown
            option, a bad value, no host, a bad port.
    """
    if not isinstance(uri, str) or not uri.strip():
        raise ConfigurationError("broker URI must be a non-empty str, got %r" % (uri,))
    text = uri.strip()
    uri = _redact(text)  # what error messages show
    if text.lower().startswith("failover:"):
        body = text[len("failover:"):]
        if body.startswith("("):
            close = body.find(")")
            if close < 0:
                raise ConfigurationError("unbalanced parenthesis in %r" % (uri,))
            members_text, query = body[1:close], body[close + 1:]
            if query and not query.startswith("?"):
                raise ConfigurationError("expected '?' after ')' in %r" % (uri,))
            query = query[1:]
        else:
            # without parentheses the outer query is the last member's; ActiveMQ reads it as the failover's
            members_text, _, query = body.partition("?")
        raw = _split_query(query, uri)
        nested = {k[len("nested."):]: v for k, v in raw.items() if k.startswith("nested.")}
        failover_options: Dict[str, Any] = {}
        connection_raw: Dict[str, str] = {}
        for key, value in raw.items():
            if key.startswith("nested."):
                continue
            if key in FAILOVER_OPTIONS:
                opt = FAILOVER_OPTIONS[key]
                failover_options[opt.keyword] = _convert(opt, value, uri)
            elif key in CONNECTION_OPTIONS:
                connection_raw[key] = value
            elif key in TRANSPORT_OPTIONS:
                raise ConfigurationError("%s is an option of each broker, not of the failover URI %r: give it to "
                                         "every member as nested.%s=..., or to one inside the parentheses "
                                         "(failover:(stomp://host:port?%s=...))" % (key, uri, key, key))
            else:
                raise _unknown("failover option", key, uri, list(FAILOVER_OPTIONS) + list(CONNECTION_OPTIONS))
        endpoints = []
        options: Dict[str, Any] = {}
        # a comma separates members only where the next one starts (a heartBeat value holds one too)
        for member in re.split(r",(?=\s*[A-Za-z][A-Za-z0-9+.-]*://)", members_text):
            member = member.strip().rstrip(",").strip()
            if not member:
                continue
            endpoint, leftover = _endpoint(member, uri, nested)
            for key in sorted(leftover):
                if key in CONNECTION_OPTIONS:
                    raise ConfigurationError("option %s on a member of %r: connection options go on the failover "
                                             "URI's own query (failover:(...)?%s=...)" % (key, uri, key))
                where = "nested.%s" % key if key in nested else key
                raise _unknown("transport option", where, uri,
                               ["nested." + k for k in TRANSPORT_OPTIONS] if key in nested else list(TRANSPORT_OPTIONS))
            endpoints.append(endpoint)
        if not endpoints:
            raise ConfigurationError("failover URI %r names no broker" % (uri,))
        _apply_connection_options(connection_raw, uri, options)
        return BrokerURI(endpoints, True, options, failover_options)
    endpoint, leftover = _endpoint(text, uri, {})
    options = {}
    _apply_connection_options(leftover, uri, options)
    return BrokerURI([endpoint], False, options, {})


#: The destination prefixes of ActiveMQ's STOMP (``/queue/``, ``/topic/``, temporary and
#: remote temporary ones) and RabbitMQ's (``/exchange/``, ``/amq/queue/``, ``/reply-queue/``):
#: none may stand without a name (:func:`check_destination`).
DESTINATION_PREFIXES = ("/queue/", "/topic/", "/temp-queue/", "/temp-topic/", "/remote-temp-queue/",
                        "/remote-temp-topic/", "/exchange/", "/amq/queue/", "/reply-queue/")
ACCEPTED_CACHE_SIZE = 1024  #: accepted names :func:`check_destination` remembers (a dict lookup next time)
_ACCEPTED: Dict[str, None] = {}


def check_destination(destination: Any, command: str = "SEND") -> None:
    """Refuse a ``destination`` that no broker takes, before ``command`` (SEND,
    SUBSCRIBE) is written: empty (or blank), or a prefix of
    :data:`DESTINATION_PREFIXES` with no name after it (or a blank one), alone
    or as a member of an ActiveMQ composite destination (``/queue/a,/queue/``).
    ActiveMQ 5.17 closes the connection on them without an ERROR frame (an
    empty ``/temp-queue/`` or ``/temp-topic/`` name it takes, as a temporary
    destination named ""), RabbitMQ 3.10 answers ERROR "Invalid destination"
    to every one: refused on every broker.

    Raises:
        InvalidDestinationError: (a ValueError) naming the destination and why.
        TypeError: ``destination`` is not a ``str`` (bytes included).
    """
    if destination.__class__ is str and destination in _ACCEPTED:
        return  # checked before (the hot path: a producer sends to a few destinations)
    if not isinstance(destination, str):
        raise TypeError("%s destination must be a str, got %s %r" % (command, type(destination).__name__,
                                                                     destination))
    if not destination.strip():
        raise InvalidDestinationError("%s destination is empty (%r): ActiveMQ closes the connection on it"
                                      % (command, destination))
    for member in destination.split(",") if "," in destination else (destination,):
        member = member.strip()
        for prefix in DESTINATION_PREFIXES:
            if member.startswith(prefix) and not member[len(prefix):].strip():
                raise InvalidDestinationError(
                    "%s destination %r has no name after %s: ActiveMQ closes the connection on it (RabbitMQ "
                    "answers 'Invalid destination')" % (command, destination, prefix))
    if len(_ACCEPTED) >= ACCEPTED_CACHE_SIZE:
        _ACCEPTED.clear()  # bounded: an application making a destination per message starts again
    _ACCEPTED[destination] = None


def parse_destination(destination: str) -> Tuple[str, Dict[str, str]]:
    """Split ``/queue/a?consumer.prefetchSize=10`` into ``("/queue/a",
    {"activemq.prefetchSize": "10"})``: each ``consumer.*`` option becomes its
    SUBSCRIBE header (``consumer.selector`` the standard ``selector`` header);
    an ``x-*`` option (RabbitMQ's queue arguments: ``x-max-length``,
    ``x-queue-type``...) is passed through as the header of that name. The
    name is checked first (:func:`check_destination`).

    Raises:
        InvalidDestinationError: (a ValueError) the name is empty, or a prefix
            alone (``/queue/``).
        TypeError: ``destination`` is not a ``str``.
        ConfigurationError: an unknown option or a bad value.
    """
    check_destination(destination, "SUBSCRIBE")
    name, sep, query = destination.partition("?")
    check_destination(name, "SUBSCRIBE")
    if not sep:
        return destination, {}
    headers: Dict[str, str] = {}
    for key, value in _split_query(query, destination).items():
        if key.startswith("x-") and len(key) > 2:
            headers[key] = value
            continue
        opt = CONSUMER_OPTIONS.get(key)
        if opt is None:
            raise _unknown("destination option", key, destination, CONSUMER_OPTIONS)
        converted = _convert(opt, value, destination)
        headers[opt.keyword] = ("true" if converted else "false") if isinstance(converted, bool) else str(converted)
    return name, headers


def destination_kind(destination: str, durable: bool = False, browser: bool = False) -> str:
    """Prefetch-policy kind of a STOMP destination: ``"queue"``,
    ``"queue-browser"``, ``"topic"`` or ``"durable-topic"``. Anything not
    ``/topic/`` (or ``/temp-topic/``) counts as a queue, as on ActiveMQ."""
    if destination.startswith(("/topic/", "/temp-topic/")):
        return "durable-topic" if durable else "topic"
    return "queue-browser" if browser else "queue"


def options_table_markdown() -> str:
    """The URI option ↔ Python keyword table, as Markdown: the whole of docs/options.md."""
    lines = ["# URI options and Python keywords", "",
             "Generated from `amqstomp/uri.py` by `amqstomp options > docs/options.md`; a test keeps",
             "the two equal. URI options keep ActiveMQ's camelCase; Python keywords are snake_case, with",
             "`_ms` for milliseconds. An unknown option raises `amqstomp.exception.ConfigurationError`;",
             "so does a boolean other than `true`/`false` (ActiveMQ's Java client reads `1` or `yes` as false).", ""]
    for title, table in (("Connection options (`jms.*`, `amqstomp.*`)", CONNECTION_OPTIONS),
                         ("Transport options (each `stomp://` member)", TRANSPORT_OPTIONS),
                         ("Failover options (`failover:(...)?...`)", FAILOVER_OPTIONS),
                         ("Destination options (`/queue/a?consumer.*`) and the SUBSCRIBE header each becomes",
                          CONSUMER_OPTIONS)):
        lines += ["## " + title, "", "| URI option | Python keyword / header | default | meaning |",
                  "|---|---|---|---|"]
        for opt in table.values():
            default = "" if opt.default is None else "`%s`" % (opt.default,)
            lines.append("| `%s` | `%s` | %s | %s |" % (opt.uri_name, opt.keyword, default, opt.meaning))
        lines.append("")
    lines += ["## Keywords without a URI form (`ConnectionFactory(url, ssl_context=...)`)", "",
              "| Python keyword | meaning |", "|---|---|"]
    lines += ["| `%s` | %s |" % item for item in KEYWORD_ONLY_OPTIONS.items()]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(options_table_markdown(), end="")
