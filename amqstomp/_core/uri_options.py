"""The option tables of amqstomp's URIs, and how an option's text is read.

One table per place an option may stand, each mapping ActiveMQ's camelCase
URI name to amqstomp's snake_case Python keyword (``docs/options.md`` is
generated from them, :func:`amqstomp._core.uri.options_table_markdown`):

* :data:`CONNECTION_OPTIONS` -- ``jms.*`` (``ActiveMQConnectionFactory``'s
  names) and amqstomp's own ``amqstomp.*``, on the URI's query;
* :data:`TRANSPORT_OPTIONS` -- of one ``stomp://`` member (``heartBeat``...);
* :data:`CONSUMER_OPTIONS` -- ``consumer.*`` on a destination, each becoming
  a SUBSCRIBE header (:func:`amqstomp._core.destinations.parse_destination`);
* :data:`KEYWORD_ONLY_OPTIONS` -- ``ConnectionFactory`` keywords with no URI form.

The failover wrapper's own table (``FAILOVER_OPTIONS``) sits with the grammar
in :mod:`amqstomp._core.uri`, since ``priorityURIs`` is read with it. Pure:
no I/O; a bad option raises :class:`amqstomp.exception.ConfigurationError`.
"""
import difflib
from typing import Any, Callable, Dict, Iterable, NamedTuple
from urllib.parse import unquote

from .option_values import (  # (the tables below use the names they had when defined in amqstomp.uri)
    MS as _MS, MS_OR_OFF as _MS_OR_OFF, PREFETCH as _PREFETCH, boolean as _bool, broker_dialect as _broker,
    float_min as _float_min, heart_beat as _heart_beat, int_in as _int_in, stomp_version as _version)
from ..exception import ConfigurationError

__all__ = ["Option", "option_table", "CONNECTION_OPTIONS", "TRANSPORT_OPTIONS", "KEYWORD_ONLY_OPTIONS",
           "CONSUMER_OPTIONS", "SECRET_KEYWORDS", "mask_secrets", "unknown_option", "split_query", "convert_option"]


class Option(NamedTuple):
    """One URI option: ``uri_name`` (ActiveMQ's camelCase) maps to ``keyword``
    (amqstomp's snake_case); ``convert`` parses the text; ``default`` and
    ``meaning`` (units, source) are for the docs."""

    uri_name: str
    keyword: str
    convert: Callable[[str], Any]
    default: Any
    meaning: str


def option_table(*options: Option) -> Dict[str, Option]:
    """``options`` by their URI name (one table of this module)."""
    return {o.uri_name: o for o in options}


#: ``jms.*`` options (ActiveMQConnectionFactory's names), and amqstomp's own ``amqstomp.*``.
CONNECTION_OPTIONS = option_table(
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
TRANSPORT_OPTIONS = option_table(
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

#: Keywords of the JMS API's ``ConnectionFactory`` that have no URI form (TLS), with their meaning.
KEYWORD_ONLY_OPTIONS = {
    "ssl_context": "an ssl.SSLContext for stomp+ssl:// (certificate verification is the context's)",
    "ca_certs": "CA bundle (PEM file) to verify the broker with; default: the system's CAs",
    "cert_file": "client certificate (PEM) for brokers that ask for one",
    "key_file": "the client certificate's private key (PEM); default: cert_file",
    "key_password": "password of key_file",
}

#: ``consumer.*`` destination options -> SUBSCRIBE header (ActiveMQ ConsumerInfo properties).
CONSUMER_OPTIONS = option_table(
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


#: Option keywords whose values are secrets: masked in reprs, never logged.
SECRET_KEYWORDS = ("password", "key_password")


def mask_secrets(options: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of ``options`` with the values of :data:`SECRET_KEYWORDS` replaced by ``***``."""
    if not any(options.get(name) is not None for name in SECRET_KEYWORDS):
        return options
    return {k: ("***" if k in SECRET_KEYWORDS and v is not None else v) for k, v in options.items()}


def unknown_option(kind: str, key: str, where: str, known: Iterable[str]) -> ConfigurationError:
    """The error for an option ``key`` of ``kind`` not in ``known`` (raise it): it
    names ``where`` (a URI or destination, redacted) and the closest known names."""
    close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
    hint = "; did you mean %s?" % " or ".join(close) if close else ""
    return ConfigurationError("unknown %s %r in %r%s (docs/options.md lists them all)" % (kind, key, where, hint))


def split_query(text: str, uri: str) -> Dict[str, str]:
    """A URI query's ``name=value`` pairs (``&``-separated, percent-decoded).

    Raises:
        ConfigurationError: a part without ``=`` (``uri`` names where).
    """
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


def convert_option(option: Option, text: str, uri: str) -> Any:
    """``text`` read by ``option``'s converter.

    Raises:
        ConfigurationError: a bad value, naming the option and ``uri`` (a
            password's value is shown as ``***``).
    """
    try:
        return option.convert(text)
    except ValueError as exc:
        shown = "***" if option.keyword == "password" else text
        raise ConfigurationError("option %s=%r in %r: %s" % (option.uri_name, shown, uri, exc)) from None
