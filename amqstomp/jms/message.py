"""Messages: :class:`Message` (headers and properties only), :class:`TextMessage`
and :class:`BytesMessage`, and their mapping onto STOMP frames (ActiveMQ's).

On ActiveMQ a SEND without ``content-length`` becomes a TextMessage and one with
it a BytesMessage. amqstomp sends a :class:`TextMessage` without
``content-length`` and with ``content-type: text/plain; charset=utf-8``; a text
that holds a NUL character cannot be framed that way, so on ActiveMQ it goes
with ``content-length`` and ``amq-msg-type:text`` (the broker then still makes
a TextMessage), on RabbitMQ with ``content-length`` (its ``content-type`` says
text), and elsewhere it is refused. A received MESSAGE is a
:class:`TextMessage` when its ``content-type`` is a text type (on every broker:
RabbitMQ puts ``content-length`` on every MESSAGE) or ActiveMQ's
``amq-msg-type`` says ``text``; one with another ``content-type`` is a
:class:`BytesMessage`; without one, ActiveMQ's rule decides (``content-length``:
bytes, none: text). The text is decoded with the ``charset`` the
``content-type`` names (UTF-8 by default).

JMS header fields map onto STOMP headers: ``correlation_id`` ↔ ``correlation-id``,
``reply_to`` ↔ ``reply-to``, ``type`` ↔ ``type``, ``priority`` ↔ ``priority``,
``expiration`` ↔ ``expires`` (ms since the epoch, 0 = never), ``timestamp`` ↔
``timestamp``, ``delivery_mode`` ↔ ``persistent``, ``group_id`` / ``group_seq``
↔ ``JMSXGroupID`` / ``JMSXGroupSeq``, ``message_id`` ← ``message-id``,
``redelivered`` ← ``redelivered`` or a local redelivery. Properties are the
other headers; they travel as text (STOMP headers are strings), so a property
set to ``5`` is received as ``"5"``.

Licensed under the Apache License, Version 2.0.
"""
import codecs
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

from ..codec import FrameHead
from .._core.dialect import ACTIVEMQ, is_text, refusal
from ._mapxml import MAP_SUBSCRIBE_TRANSFORMATION, MAP_TRANSFORMATION, TypedEntries
from ._mapmessage import MapMessage, MapValue
from ._messages import (
    RESERVED_HEADERS,
    BytesMessage,
    Message,
    PropertyValue,
    TextMessage,
    bytes_data,
    check_property,
    mark_received,
    stomp_body,
)
from ._scheduling import SCHEDULING_PROPERTIES, check_scheduled_property
from .constants import DEFAULT_PRIORITY, NON_PERSISTENT, PERSISTENT
from .destination import Destination, TemporaryDestination, destination_from_header
from .exceptions import IllegalStateError, MessageFormatError

if TYPE_CHECKING:  # pragma: no cover
    from ..codec import Frame

__all__ = ["Message", "TextMessage", "BytesMessage", "MapMessage", "RESERVED_HEADERS", "message_from_frame",
           "check_scheduled_property", "send_headers", "message_headers", "SendHead", "MAP_TRANSFORMATION",
           "MAP_SUBSCRIBE_TRANSFORMATION", "PropertyValue", "MapValue"]

# headers of a received MESSAGE that are not properties
_FRAME_ONLY = frozenset(("destination", "message-id", "subscription", "ack", "content-length", "redelivered",
                         "expires", "priority", "persistent", "reply-to", "correlation-id", "type",
                         "timestamp", "amq-msg-type", "JMSXGroupID", "JMSXGroupSeq", "transformation",
                         "content-type", "receipt"))  # receipt: RabbitMQ hands on the SEND's


_time_ns = time.time_ns
#: time_to_live 0 (never expires), tested by identity on the hot path: CPython has one small int 0, so the
#: producer's default is it; any other object (False, an IntEnum) takes the checked path
_NEVER = 0


def _text(value: PropertyValue) -> str:
    """A property's header text: ``true``/``false`` for a bool, the decimal digits for any
    other int (an ``IntEnum`` included: its ``str()`` is its name before Python 3.11)."""
    if type(value) is str:
        return value
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return "%d" % value
    return str(value)


class SendHead(FrameHead):
    """What many SENDs of a producer start with: ``destination``, ``persistent``
    and ``priority``, checked once and encoded once per STOMP version (a
    :class:`amqstomp.codec.FrameHead`); :func:`message_headers` gives the rest
    of each frame.

    Args:
        destination (Destination), delivery_mode (int: PERSISTENT / NON_PERSISTENT),
        priority (int 0-9).

    Raises:
        MessageFormatError: a bad delivery mode or priority.
    """

    __slots__ = ("destination", "delivery_mode", "priority", "temporary")

    def __init__(self, destination: Destination, delivery_mode: int, priority: int) -> None:
        if isinstance(delivery_mode, bool) or not isinstance(delivery_mode, int) \
                or delivery_mode not in (PERSISTENT, NON_PERSISTENT):
            raise MessageFormatError("delivery_mode must be PERSISTENT (2) or NON_PERSISTENT (1), got %r"
                                     % (delivery_mode,))
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9:
            raise MessageFormatError("priority must be an int 0-9, got %r" % (priority,))
        self.destination = destination
        self.delivery_mode = int(delivery_mode)
        self.priority = int(priority)
        #: a temporary destination (send() checks its owner and whether it was deleted)
        self.temporary = isinstance(destination, TemporaryDestination)
        headers = {"destination": destination.stomp_name}
        if delivery_mode == PERSISTENT:  # ActiveMQ's default is non-persistent
            headers["persistent"] = "true"
        if priority != DEFAULT_PRIORITY:
            headers["priority"] = "%d" % priority  # an IntEnum's str() is its name before Python 3.11
        super().__init__("SEND", headers)


def message_headers(message: Message, head: SendHead, time_to_live: int, dialect: str,
                    timestamp: bool = True) -> Tuple[Dict[str, Any], bytes]:
    """The SEND headers of ``message`` that follow ``head`` (body framing,
    properties, timestamp, expiration, correlation id, reply-to, type, group),
    and its body, for a broker of ``dialect`` (:mod:`amqstomp._core.dialect`);
    sets the message's JMS header fields (destination, delivery mode, priority,
    timestamp, expiration) as ``send`` does. Timestamps are epoch ms (ints: the
    codec writes them).

    Raises:
        MessageFormatError: a bad property, body, reply-to or time-to-live.
        ConfigurationError: ``AMQ_SCHEDULED_*`` properties (ActiveMQ's scheduler)
            for another broker, which would deliver the message at once.
    """
    # (the hot path of every send: the checks are cheap type() tests first)
    if time_to_live is not _NEVER and (time_to_live.__class__ is not int or time_to_live < 0):
        if isinstance(time_to_live, bool) or not isinstance(time_to_live, int) or time_to_live < 0:
            raise MessageFormatError("time_to_live must be an int >= 0 (ms), got %r" % (time_to_live,))
    # BytesMessage's body inlined (hot path): bytes_data is a C call, the data property would add a Python frame
    body = bytes_data(message) if message.__class__ is BytesMessage else None
    if body.__class__ is bytes:
        headers: Dict[str, Any] = {"content-length": len(body)}
    else:
        body, headers = stomp_body(message, dialect)
    properties = message.properties
    if properties:
        for name, value in properties.items():
            check_property(name, value)
            headers[name] = _text(value)
        if dialect != ACTIVEMQ and not SCHEDULING_PROPERTIES.isdisjoint(properties):
            raise refusal("scheduled delivery (AMQ_SCHEDULED_* properties)", dialect, None)
    if time_to_live is _NEVER:  # (the default: one test, no expiration arithmetic)
        expiration = 0
        now = _time_ns() // 1000000 if timestamp else 0  # (no float, no int())
        if timestamp:
            headers["timestamp"] = now
    else:
        now = _time_ns() // 1000000 if (timestamp or time_to_live) else 0
        if timestamp:
            headers["timestamp"] = now
        expiration = now + time_to_live if time_to_live else 0
        if expiration:
            headers["expires"] = expiration
    if message.correlation_id is not None:
        headers["correlation-id"] = str(message.correlation_id)
    reply_to = message.reply_to
    if reply_to is not None:
        if not isinstance(reply_to, Destination):
            raise MessageFormatError("reply_to must be a Destination (Queue, Topic, TemporaryQueue), got %r"
                                     % (reply_to,))
        headers["reply-to"] = reply_to.stomp_name
    if message.type is not None:
        headers["type"] = str(message.type)
    if message.group_id is not None:
        headers["JMSXGroupID"] = str(message.group_id)
    if message.group_seq is not None:
        headers["JMSXGroupSeq"] = str(int(message.group_seq))
    message.destination = head.destination
    message.delivery_mode = head.delivery_mode
    message.priority = head.priority
    message.timestamp = now
    message.expiration = expiration
    return headers, body


def send_headers(message: Message, destination: Destination, delivery_mode: int, priority: int,
                 time_to_live: int, dialect: str = ACTIVEMQ, timestamp: bool = True) -> Tuple[Dict[str, Any], bytes]:
    """All the SEND headers of ``message`` (:class:`SendHead`'s, then
    :func:`message_headers`'), and its body; sets the message's JMS header
    fields as ``send`` does.

    Raises:
        MessageFormatError: a bad property, body, priority, delivery mode,
            reply-to or time-to-live.
    """
    head = SendHead(destination, delivery_mode, priority)
    headers, body = message_headers(message, head, time_to_live, dialect, timestamp)
    full: Dict[str, Any] = dict(head.headers)
    full.update(headers)
    return full, body


def _charset(content_type: Optional[str]) -> str:
    """The ``charset`` a ``content-type`` names (a known codec), else UTF-8."""
    if content_type and "charset=" in content_type:
        name = content_type.split("charset=", 1)[1].split(";", 1)[0].strip().strip('"')
        try:
            return codecs.lookup(name).name
        except LookupError:
            pass
    return "utf-8"


def _int(value: Optional[str], default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default


def message_from_frame(frame: "Frame", lookup: Optional[Callable[[str], Any]] = None,
                       delivery_count: int = 1) -> Message:
    """A Message made from a MESSAGE frame (a new object on every delivery), its
    properties and body read-only (JMS: until ``clear_properties()`` / ``clear_body()``)."""
    headers = frame.headers
    body = frame.body
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    kind = headers.get("amq-msg-type")
    message: Message
    transformation = headers.get("transformation")
    text = is_text(headers)
    if transformation == MAP_TRANSFORMATION or (transformation == MAP_SUBSCRIBE_TRANSFORMATION and not data.strip()):
        # the second: a map that a map_messages=True consumer had prefetched and gave back; ActiveMQ
        # keeps that subscription's transformation on it and sends other consumers no body
        if data.strip():
            message = MapMessage.from_xml(data)
        else:  # the consumer did not ask for the rendering: ActiveMQ sent no body
            message = MapMessage(TypedEntries.missing())
    elif kind == "text" or (kind != "bytes" and (text or (text is None and "content-length" not in headers))):
        message = TextMessage(data.decode(_charset(headers.get("content-type")), errors="replace"))
    else:
        message = BytesMessage(data)
    message.headers = headers
    subscription = headers.get("subscription")
    if subscription is not None and subscription.startswith("/temp-queue/") and lookup is not None:
        # RabbitMQ: a reply to a temporary queue comes on the connection's subscription of its name
        message.destination = lookup(subscription) or destination_from_header(headers.get("destination"), lookup)
    else:
        message.destination = destination_from_header(headers.get("destination"), lookup)
    message.message_id = headers.get("message-id")
    message.timestamp = _int(headers.get("timestamp"), 0)
    message.correlation_id = headers.get("correlation-id")
    message.reply_to = destination_from_header(headers.get("reply-to"), lookup)
    message.type = headers.get("type")
    message.delivery_mode = PERSISTENT if headers.get("persistent") == "true" else NON_PERSISTENT
    message.priority = _int(headers.get("priority"), DEFAULT_PRIORITY)
    message.expiration = _int(headers.get("expires"), 0)
    message.delivery_count = max(1, delivery_count)
    message.link_seq = frame.link_seq
    message.redelivered = message.delivery_count > 1 or headers.get("redelivered") == "true"
    message.group_id = headers.get("JMSXGroupID")
    seq = headers.get("JMSXGroupSeq")
    message.group_seq = _int(seq, 0) if seq is not None else None
    message.properties = {k: v for k, v in headers.items() if k not in _FRAME_ONLY}
    mark_received(message)  # properties and body read-only until cleared (javax.jms.Message)
    return message


def closed_acknowledge() -> None:
    """An acknowledge callback for messages of a closed session.

    Raises:
        IllegalStateError: always.
    """
    raise IllegalStateError("the session of this message is closed")
