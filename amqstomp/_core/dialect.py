"""Broker dialects: what differs between the STOMP brokers amqstomp knows, in one place, no I/O.

The dialect comes from CONNECTED's ``server`` header (:func:`dialect_of`), or
from the user (``broker=`` keyword, ``amqstomp.broker`` URI option:
:func:`check_broker`), and decides, for both APIs:

* the ``host`` header of CONNECT (:func:`connect_host`): the user's virtual
  host, else ``/`` (RabbitMQ's default virtual host; ActiveMQ Classic and
  Artemis ignore the header). CONNECT goes out before the ``server`` header is
  known, so the default must work everywhere: RabbitMQ reads any other value
  (the host name stomp.py sends on 1.2) as a virtual host and refuses it;
* the prefetch header (:func:`prefetch_header`): ``activemq.prefetchSize`` on
  ActiveMQ Classic, ``prefetch-count`` on RabbitMQ (where 0 means unlimited,
  refused here), none elsewhere (Artemis' ``consumer-window-size`` counts bytes);
* who gets ActiveMQ Classic's own headers (``activemq.*``, ``amq-msg-type``,
  ``transformation:jms-map-xml``, ``browser``): ActiveMQ Classic only, never
  Artemis (:data:`ACTIVEMQ_ONLY`, :func:`refusal`);
* temporary queues: ActiveMQ subscribes to ``/temp-queue/x``; RabbitMQ takes
  it only as a SEND's ``reply-to`` and delivers the replies on the
  connection's own subscription named ``/temp-queue/x`` (acked by the broker);
* NACK (:func:`reject_headers`): on ActiveMQ the message goes to the DLQ; on
  RabbitMQ a NACK requeues unless it says ``requeue:false``, so the client's
  own "give up on this message" NACK carries it (dead-lettered or dropped);
* whether ERRORs name the receipt they answer (:attr:`Dialect.error_receipts`:
  RabbitMQ 3.10's do not), and whether the RECEIPTs of a transaction's frames
  come before its COMMIT (RabbitMQ holds them until then:
  :attr:`Dialect.tx_receipts_at_commit`);
* text or bytes (:func:`is_text`): a ``text/*`` ``content-type`` means text on
  every broker; without one, ActiveMQ's rule (no ``content-length``: text);
* the ERRORs a clean close provokes (:func:`unsubscribed_error`): RabbitMQ 3.10
  answers a delivery that was on its way when the client's own UNSUBSCRIBE
  removed the subscription with ``ERROR message:Subscription not found`` (body
  ``There is no current subscription with tag 'T_<id>'.``): noise, not an error.

Sources: activemq-stomp ``ProtocolConverter`` / ``LegacyFrameTranslator`` /
``JmsFrameTranslator`` (5.17), RabbitMQ's STOMP plugin documentation and 3.10.8
as measured, ActiveMQ Artemis' STOMP documentation.
"""
import re
from typing import Any, Collection, Dict, Mapping, Optional, Tuple

from ..exception import ConfigurationError

__all__ = ["ACTIVEMQ", "ARTEMIS", "RABBITMQ", "GENERIC", "AUTO", "BROKERS", "Dialect", "dialect_of",
           "is_activemq_classic", "check_broker", "describe", "refusal", "prefetch_header", "reject_headers",
           "DEFAULT_VHOST", "connect_host", "TEXT_CONTENT_TYPE", "is_text", "JMS_TRANSFORMATIONS",
           "auto_content_length", "ACTIVEMQ_ONLY", "unsubscribed_error"]

#: Broker dialects (CONNECTED's ``server`` header): ActiveMQ Classic (``ActiveMQ/5.17.2``).
ACTIVEMQ = "activemq"
#: ActiveMQ Artemis (``ActiveMQ-Artemis/2.x``): not Classic; ignores ``activemq.*`` headers.
ARTEMIS = "artemis"
#: RabbitMQ's STOMP plugin (``RabbitMQ/3.10.x``).
RABBITMQ = "rabbitmq"
#: Any other STOMP broker, or no ``server`` header.
GENERIC = "generic"
#: The ``broker`` option's default: the dialect CONNECTED's ``server`` names.
AUTO = "auto"

#: CONNECT's ``host`` when the user names no virtual host (RabbitMQ's default one).
DEFAULT_VHOST = "/"
#: The ``content-type`` of a JMS TextMessage's SEND.
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"
#: SEND ``transformation`` values ActiveMQ's JmsFrameTranslator reads from the
#: body: it does so only without ``content-length`` (with one, the message
#: becomes a BytesMessage and the transformation is ignored).
JMS_TRANSFORMATIONS = frozenset(("jms-map-xml", "jms-map-json", "jms-object-xml", "jms-object-json",
                                 "jms-xml", "jms-json"))
#: Headers only ActiveMQ Classic understands (beside every ``activemq.*`` header).
ACTIVEMQ_ONLY = frozenset(("amq-msg-type", "browser", "transformation"))


class Dialect:
    """What one broker does differently (see the module docstring).

    Attributes:
        name (str): :data:`ACTIVEMQ`, :data:`ARTEMIS`, :data:`RABBITMQ` or :data:`GENERIC`.
        title (str): the broker's name in messages.
        prefetch (str | None): the SUBSCRIBE header that sets a consumer's
            prefetch in messages; None: the broker has none.
        prefetch_zero (str | None): why a prefetch of 0 is refused (None: allowed).
        classic (bool): ActiveMQ Classic's own headers and features work.
        error_receipts (bool): an ERROR answering a frame with a ``receipt``
            carries its ``receipt-id``.
        temp_reply_only (bool): ``/temp-queue/x`` is valid only as a SEND's
            ``reply-to``; replies come on the connection's subscription of that name.
        temp_topics (bool): ``/temp-topic/x`` exists.
        selectors (bool): SUBSCRIBE's ``selector`` is applied.
        nack_requeues (bool): a plain NACK puts the message back on its queue.
        text_length_ok (bool): a text body may carry ``content-length`` (its
            ``content-type`` says text to every consumer).
        tx_receipts_at_commit (bool): the broker holds the frames of a
            transaction, their RECEIPTs too, until COMMIT (RabbitMQ): a client
            must not wait for them before it commits.
        late_unsubscribe_errors (bool): a delivery racing the client's
            UNSUBSCRIBE comes back as an ERROR naming that subscription
            (RabbitMQ: :func:`unsubscribed_error`).
        window_grows_in_tx (bool): an ACK written inside a transaction counts its
            messages delivered and extends the subscription's prefetch window until
            COMMIT settles them or ABORT takes the extension back (ActiveMQ Classic:
            ``StompSubscription.onStompMessageAck`` writes a DELIVERED ack,
            ``PrefetchSubscription`` grows ``prefetchExtension``). What lets a
            CLIENT_ACKNOWLEDGE consumer keep receiving past its prefetch before
            ``acknowledge()`` (:func:`amqstomp._core.ackmodes.acks_in_transaction`).
    """

    __slots__ = ("name", "title", "prefetch", "prefetch_zero", "classic", "error_receipts", "temp_reply_only",
                 "temp_topics", "selectors", "nack_requeues", "text_length_ok",
                 "tx_receipts_at_commit", "late_unsubscribe_errors", "window_grows_in_tx")

    def __init__(self, name: str, title: str, prefetch: Optional[str] = None, prefetch_zero: Optional[str] = None,
                 classic: bool = False, error_receipts: bool = True, temp_reply_only: bool = False,
                 temp_topics: bool = True, selectors: bool = True, nack_requeues: bool = False,
                 text_length_ok: bool = False, tx_receipts_at_commit: bool = False,
                 late_unsubscribe_errors: bool = False, window_grows_in_tx: bool = False) -> None:
        self.name = name
        self.title = title
        self.prefetch = prefetch
        self.prefetch_zero = prefetch_zero
        self.classic = classic
        self.error_receipts = error_receipts
        self.temp_reply_only = temp_reply_only
        self.temp_topics = temp_topics
        self.selectors = selectors
        self.nack_requeues = nack_requeues
        self.text_length_ok = text_length_ok
        self.tx_receipts_at_commit = tx_receipts_at_commit
        self.late_unsubscribe_errors = late_unsubscribe_errors
        self.window_grows_in_tx = window_grows_in_tx

    def __repr__(self) -> str:
        return "<Dialect %s>" % self.name


#: Every known dialect by name.
BROKERS: Dict[str, Dialect] = {
    ACTIVEMQ: Dialect(ACTIVEMQ, "ActiveMQ Classic", prefetch="activemq.prefetchSize",
                      prefetch_zero="a prefetch of 0 (pull) delivers nothing over STOMP on ActiveMQ Classic; use 1 "
                                    "and take messages one at a time",
                      classic=True, window_grows_in_tx=True),
    ARTEMIS: Dialect(ARTEMIS, "ActiveMQ Artemis", temp_topics=False),
    RABBITMQ: Dialect(RABBITMQ, "RabbitMQ", prefetch="prefetch-count",
                      prefetch_zero="RabbitMQ reads prefetch-count:0 as no limit at all; give a prefetch of 1 or more",
                      error_receipts=False, temp_reply_only=True, temp_topics=False, selectors=False,
                      nack_requeues=True, text_length_ok=True, tx_receipts_at_commit=True,
                      late_unsubscribe_errors=True),
    GENERIC: Dialect(GENERIC, "this STOMP broker", error_receipts=False),
}


def dialect_of(server: Optional[str], override: Optional[str] = None) -> str:
    """The broker dialect: ``override`` (the user's ``broker`` option) unless it
    is None or :data:`AUTO`, else the one CONNECTED's ``server`` header names:
    :data:`ACTIVEMQ` (``ActiveMQ/...``), :data:`ARTEMIS` (``ActiveMQ-Artemis...``),
    :data:`RABBITMQ` (``RabbitMQ...``) or :data:`GENERIC`."""
    if override is not None and override != AUTO:
        return override
    if not server:
        return GENERIC
    if server.startswith("ActiveMQ/"):
        return ACTIVEMQ
    if server.startswith("ActiveMQ-Artemis"):
        return ARTEMIS
    if server.startswith("RabbitMQ"):
        return RABBITMQ
    return GENERIC


def is_activemq_classic(server: Optional[str]) -> bool:
    """True when ``server`` (CONNECTED's header) names ActiveMQ Classic, the only
    broker that gets ``activemq.*`` headers and Classic's quirks (Artemis
    announces ``ActiveMQ-Artemis/...``)."""
    return server is not None and server.startswith("ActiveMQ/")


def check_broker(value: Any, where: str = "broker") -> Optional[str]:
    """The user's ``broker`` option checked: None or ``"auto"`` (from
    CONNECTED's ``server``), or a dialect name.

    Raises:
        ConfigurationError: anything else (naming ``where``).
    """
    if value is None or value == AUTO:
        return None
    if not isinstance(value, str) or value.lower() not in BROKERS:
        raise ConfigurationError("%s must be one of auto, %s; got %r" % (where, ", ".join(BROKERS), value))
    return value.lower()


def describe(dialect: str, server: Optional[str]) -> str:
    """The broker as messages name it: ``RabbitMQ (server RabbitMQ/3.10.8)``."""
    title = BROKERS[dialect].title if dialect in BROKERS else dialect
    return "%s (server %s)" % (title, server) if server else title


def refusal(feature: str, dialect: str, server: Optional[str], needs: str = "ActiveMQ Classic") -> ConfigurationError:
    """The exception for a feature this broker cannot do (raise it): ``feature``
    (what was asked, e.g. ``"map_messages"``) needs ``needs``."""
    return ConfigurationError("%s needs %s; the broker is %s, which cannot do it (nothing was sent)"
                              % (feature, needs, describe(dialect, server)))


def prefetch_header(dialect: str, size: int, server: Optional[str]) -> Tuple[str, str]:
    """The SUBSCRIBE header (name, value) that sets a prefetch of ``size``
    messages on this broker.

    Raises:
        ConfigurationError: the broker has no prefetch header in messages, or
            refuses ``size`` 0 (ActiveMQ: nothing is delivered; RabbitMQ: 0 is
            unlimited); the message names the broker.
    """
    info = BROKERS.get(dialect, BROKERS[GENERIC])
    if info.prefetch is None:
        raise ConfigurationError("prefetch_size: no known prefetch header (in messages) for %s; ActiveMQ Classic "
                                 "and RabbitMQ have one" % describe(dialect, server))
    if size == 0 and info.prefetch_zero is not None:
        raise ConfigurationError("prefetch_size=0 refused: %s" % info.prefetch_zero)
    return info.prefetch, str(size)


def reject_headers(dialect: str, ack_headers: Mapping[str, str]) -> Dict[str, str]:
    """The headers of the client's own NACK that gives a message up (poisoned
    after its redeliveries): ``ack_headers`` (the message's ACK identity), and on
    RabbitMQ ``requeue:false`` (a plain NACK would put it straight back on its
    queue: it is dead-lettered, or dropped without a dead-letter exchange).
    ActiveMQ sends a NACKed message to its DLQ by itself."""
    headers = dict(ack_headers)
    if BROKERS.get(dialect, BROKERS[GENERIC]).nack_requeues:
        headers["requeue"] = "false"
    return headers


def connect_host(version: str, vhost: Optional[str], like_stomp_py: bool = False) -> Optional[str]:
    """CONNECT's ``host`` header for the highest STOMP ``version`` asked for:
    the user's ``vhost``, else :data:`DEFAULT_VHOST` on 1.1/1.2 (where the spec
    requires the header); None (no header) on 1.0 without a vhost.
    ``like_stomp_py`` (the stomp.py API): without a vhost, a header only on 1.2,
    as stomp.py sends one (its value there is the broker's host name, which
    RabbitMQ refuses as a virtual host: ``/`` instead); brokers take a CONNECT
    without ``host`` as their default virtual host."""
    if vhost:
        return vhost
    if version == "1.0" or (like_stomp_py and version == "1.1"):
        return None
    return DEFAULT_VHOST


def is_text(headers: Mapping[str, Any]) -> Optional[bool]:
    """What a MESSAGE's ``content-type`` says: True for ``text/*`` (and the
    XML/JSON types), False for any other type, None without one (then the
    broker's rule decides: ActiveMQ's is no ``content-length`` = text)."""
    content_type = headers.get("content-type")
    if not content_type:
        return None
    kind = str(content_type).split(";", 1)[0].strip().lower()
    return kind.startswith("text/") or kind in ("application/json", "application/xml")


def auto_content_length(cmd: str, headers: Mapping[str, Any]) -> bool:
    """False for a SEND whose ``transformation`` ActiveMQ reads from the body
    (:data:`JMS_TRANSFORMATIONS`): the automatic ``content-length`` would make
    the broker ignore it and deliver a BytesMessage."""
    return cmd != "SEND" or headers.get("transformation") not in JMS_TRANSFORMATIONS


#: RabbitMQ 3.10's ERROR for a delivery whose subscription is gone (rabbit_stomp_processor's
#: send_delivery): ``message`` header and body; ``T_<id>`` is the consumer tag of SUBSCRIBE ``id``.
_GONE_MESSAGE = "Subscription not found"
_GONE_BODY = re.compile(r"There is no current subscription with tag 'T_(.*)'\.\s*\Z", re.DOTALL)


def unsubscribed_error(dialect: str, headers: Mapping[str, Any], body: Any,
                       unsubscribed: Collection[str]) -> Optional[str]:
    """The subscription id when an ERROR (``headers``, ``body``) is only the
    broker's late answer to the client's own UNSUBSCRIBE of one of the ids in
    ``unsubscribed``, else None (a real ERROR).

    RabbitMQ 3.10 cancels the consumer while deliveries to it are still on their
    way inside the broker; each one that finds the subscription gone comes back
    as ``ERROR message:Subscription not found`` with the body
    ``There is no current subscription with tag 'T_<id>'.`` and answers no
    frame of the client's. Measured on 3.10.8 with 200 messages queued: 6 in 50
    unsubscribe + disconnect, 8 in 50 JMS ``close()``; with 1,000, most of them. Only that
    message, that body and an id the client unsubscribed count; an ERROR
    naming the receipt it answers never does."""
    if not BROKERS.get(dialect, BROKERS[GENERIC]).late_unsubscribe_errors or not unsubscribed:
        return None
    if headers.get("message") != _GONE_MESSAGE or "receipt-id" in headers:
        return None
    if isinstance(body, (bytes, bytearray, memoryview)):
        body = bytes(body).decode("utf-8", errors="replace")
    match = _GONE_BODY.match(str(body or ""))
    if match is None or match.group(1) not in unsubscribed:
        return None
    return match.group(1)
