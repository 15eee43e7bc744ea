"""Messages: :class:`Message` (headers and properties only), :class:`TextMessage`
and :class:`BytesMessage`, and their mapping onto STOMP frames (ActiveMQ's).

On ActiveMQ a SEND without ``content-length`` becomes a TextMessage and one with
it a BytesMessage. amqstomp sends a :class:`TextMessage` without
``content-length``; a text that holds a NUL character cannot be framed that
way, so on ActiveMQ it goes with ``content-length`` and ``amq-msg-type:text``
(the broker then still makes a TextMessage), and elsewhere it is refused. A
received MESSAGE is a :class:`BytesMessage` when it has ``content-length``
(unless ``amq-msg-type`` says ``text``), else a :class:`TextMessage`.

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
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Tuple, Union

from .constants import DEFAULT_PRIORITY, NON_PERSISTENT, PERSISTENT
from .destination import Destination, destination_from_header
from .exceptions import IllegalStateError, MessageFormatError

if TYPE_CHECKING:  # pragma: no cover
    from ..codec import Frame

__all__ = ["Message", "TextMessage", "BytesMessage", "RESERVED_HEADERS", "message_from_frame", "send_headers"]

#: Header names a property cannot have: amqstomp sets them itself (or they change
#: the frame's meaning on the broker).
RESERVED_HEADERS = frozenset((
    "destination", "receipt", "transaction", "content-length", "message-id", "subscription", "ack", "id",
    "redelivered", "expires", "priority", "persistent", "reply-to", "correlation-id", "type", "timestamp",
    "amq-msg-type", "JMSXGroupID", "JMSXGroupSeq", "transformation", "receipt-id",
))

# headers of a received MESSAGE that are not properties
_FRAME_ONLY = frozenset(("destination", "message-id", "subscription", "ack", "content-length", "redelivered",
                         "expires", "priority", "persistent", "reply-to", "correlation-id", "type",
                         "timestamp", "amq-msg-type", "JMSXGroupID", "JMSXGroupSeq"))

PropertyValue = Union[str, int, float, bool]


def _now_ms() -> int:
    return int(time.time() * 1000)


class Message:
    """A message without a body (JMS ``Message``); base of the others.

    Attributes (JMS header fields; set by ``send`` on the message sent, and from
    the MESSAGE frame on a received one):
        destination (Destination | None): where it was sent.
        message_id (str | None): the broker's id (received messages only: a STOMP
            SEND gets no id back).
        timestamp (int): ms since the epoch when it was sent (0: unknown).
        correlation_id (str | None), reply_to (Destination | None), type (str | None).
        delivery_mode (int): PERSISTENT or NON_PERSISTENT.
        priority (int): 0-9.
        expiration (int): ms since the epoch after which the broker drops it; 0 = never.
        redelivered (bool): delivered before (by the broker, or by this client after
            a rollback / recover / a listener that raised).
        delivery_count (int): 1 for a first delivery (JMSXDeliveryCount).
        group_id (str | None), group_seq (int | None): message groups (JMSXGroupID /
            JMSXGroupSeq). ActiveMQ routes by them but does not pass them back to
            STOMP consumers, so received messages have None.
        properties (dict[str, str | int | float | bool]): application properties.
    """

    def __init__(self) -> None:
        self.destination: Optional[Destination] = None
        self.message_id: Optional[str] = None
        self.timestamp = 0
        self.correlation_id: Optional[str] = None
        self.reply_to: Optional[Destination] = None
        self.type: Optional[str] = None
        self.delivery_mode = PERSISTENT
        self.priority = DEFAULT_PRIORITY
        self.expiration = 0
        self.redelivered = False
        self.delivery_count = 1
        self.group_id: Optional[str] = None
        self.group_seq: Optional[int] = None
        self.properties: Dict[str, PropertyValue] = {}
        self.headers: Dict[str, str] = {}  # the MESSAGE frame's headers, for received messages
        self._acknowledge: Optional[Callable[[], None]] = None

    # ------------------------------------------------------------ properties

    def set_property(self, name: str, value: PropertyValue) -> None:
        """Set an application property (sent as a STOMP header).

        Raises:
            MessageFormatError: the name is one amqstomp sets itself
                (:data:`RESERVED_HEADERS`), or the value is not str/int/float/bool.
        """
        _check_property(name, value)
        self.properties[name] = value

    def get_property(self, name: str, default: Any = None) -> Any:
        """An application property, or ``default``."""
        return self.properties.get(name, default)

    def property_names(self) -> Iterator[str]:
        return iter(list(self.properties))

    def clear_properties(self) -> None:
        self.properties.clear()

    # ------------------------------------------------------------ body

    def _payload(self, activemq: bool) -> Tuple[bytes, Dict[str, Any]]:
        """The SEND body and the headers that frame it."""
        return b"", {"content-length": None}

    def clear_body(self) -> None:
        """Empty the body."""

    # ------------------------------------------------------------ acknowledge

    def acknowledge(self) -> None:
        """CLIENT_ACKNOWLEDGE: ack every message the session consumed so far (one
        cumulative ACK per consumer). INDIVIDUAL_ACKNOWLEDGE: ack this message only.
        Other modes: nothing to do (JMS says it is ignored).

        Raises:
            IllegalStateError: the session is closed.
        """
        fn = self._acknowledge
        if fn is not None:
            fn()

    def __repr__(self) -> str:
        return "<%s id=%s destination=%s>" % (type(self).__name__, self.message_id, self.destination)


class TextMessage(Message):
    """A message whose body is text (``str``); ActiveMQ's TextMessage.

    Args:
        text (str): the body.
    """

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.text = text

    @property
    def body(self) -> str:
        return self.text

    def clear_body(self) -> None:
        self.text = ""

    def _payload(self, activemq: bool) -> Tuple[bytes, Dict[str, Any]]:
        text = self.text
        if not isinstance(text, str):
            raise MessageFormatError("TextMessage.text must be str, got %s" % type(text).__name__)
        data = text.encode("utf-8")
        if b"\x00" not in data:
            return data, {"content-length": None}  # no content-length: ActiveMQ makes a TextMessage
        if activemq:
            return data, {"content-length": len(data), "amq-msg-type": "text"}
        raise MessageFormatError("a text with a NUL character needs content-length, which makes it a "
                                 "bytes message on this broker; send a BytesMessage")

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 40 else self.text[:40] + "..."
        return "<TextMessage id=%s destination=%s text=%r>" % (self.message_id, self.destination, text)


class BytesMessage(Message):
    """A message whose body is bytes; ActiveMQ's BytesMessage.

    Args:
        data (bytes): the body.
    """

    def __init__(self, data: bytes = b"") -> None:
        super().__init__()
        self.data = bytes(data)

    @property
    def body(self) -> bytes:
        return self.data

    @property
    def body_length(self) -> int:
        return len(self.data)

    def clear_body(self) -> None:
        self.data = b""

    def _payload(self, activemq: bool) -> Tuple[bytes, Dict[str, Any]]:
        data = self.data
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise MessageFormatError("BytesMessage.data must be bytes, got %s" % type(data).__name__)
        return bytes(data), {"content-length": len(data)}

    def __repr__(self) -> str:
        return "<BytesMessage id=%s destination=%s %d bytes>" % (self.message_id, self.destination, len(self.data))


def _check_property(name: str, value: Any) -> None:
    if not isinstance(name, str) or not name:
        raise MessageFormatError("a property name must be a non-empty str, got %r" % (name,))
    if name in RESERVED_HEADERS:
        raise MessageFormatError("%r is a STOMP header amqstomp sets itself; use the message's "
                                 "attribute for it (correlation_id, reply_to, group_id...)" % (name,))
    if not isinstance(value, (str, int, float, bool)):
        raise MessageFormatError("property %r must be str, int, float or bool, got %s" % (name, type(value).__name__))


def _text(value: PropertyValue) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


def send_headers(message: Message, destination: Destination, delivery_mode: int, priority: int,
                 time_to_live: int, activemq: bool, timestamp: bool = True) -> Tuple[Dict[str, Any], bytes]:
    """The SEND headers and body of ``message``; sets the message's JMS header fields
    (destination, delivery mode, priority, timestamp, expiration) as ``send`` does.

    Raises:
        MessageFormatError: a bad property, body, priority or delivery mode.
    """
    if delivery_mode not in (PERSISTENT, NON_PERSISTENT):
        raise MessageFormatError("delivery_mode must be PERSISTENT (2) or NON_PERSISTENT (1), got %r"
                                 % (delivery_mode,))
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9:
        raise MessageFormatError("priority must be an int 0-9, got %r" % (priority,))
    if isinstance(time_to_live, bool) or not isinstance(time_to_live, int) or time_to_live < 0:
        raise MessageFormatError("time_to_live must be an int >= 0 (ms), got %r" % (time_to_live,))
    body, headers = message._payload(activemq)
    for name, value in message.properties.items():
        _check_property(name, value)
        headers[name] = _text(value)
    now = _now_ms() if (timestamp or time_to_live) else 0
    headers["destination"] = destination.stomp_name
    if delivery_mode == PERSISTENT:  # ActiveMQ's default is non-persistent
        headers["persistent"] = "true"
    if priority != DEFAULT_PRIORITY:
        headers["priority"] = str(priority)
    if timestamp:
        headers["timestamp"] = str(now)
    expiration = now + time_to_live if time_to_live else 0
    if expiration:
        headers["expires"] = str(expiration)
    if message.correlation_id is not None:
        headers["correlation-id"] = str(message.correlation_id)
    if message.reply_to is not None:
        if not isinstance(message.reply_to, Destination):
            raise MessageFormatError("reply_to must be a Destination (Queue, Topic, TemporaryQueue), got %r"
                                     % (message.reply_to,))
        headers["reply-to"] = message.reply_to.stomp_name
    if message.type is not None:
        headers["type"] = str(message.type)
    if message.group_id is not None:
        headers["JMSXGroupID"] = str(message.group_id)
    if message.group_seq is not None:
        headers["JMSXGroupSeq"] = str(int(message.group_seq))
    message.destination = destination
    message.delivery_mode = delivery_mode
    message.priority = priority
    message.timestamp = now
    message.expiration = expiration
    return headers, body


def _int(value: Optional[str], default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default


def message_from_frame(frame: "Frame", lookup: Optional[Callable[[str], Any]] = None,
                       delivery_count: int = 1) -> Message:
    """A Message made from a MESSAGE frame (a new object on every delivery)."""
    headers = frame.headers
    body = frame.body
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    kind = headers.get("amq-msg-type")
    message: Message
    if kind == "text" or (kind != "bytes" and "content-length" not in headers):
        message = TextMessage(data.decode("utf-8", errors="replace"))
    else:
        message = BytesMessage(data)
    message.headers = headers
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
    message.redelivered = message.delivery_count > 1 or headers.get("redelivered") == "true"
    message.group_id = headers.get("JMSXGroupID")
    seq = headers.get("JMSXGroupSeq")
    message.group_seq = _int(seq, 0) if seq is not None else None
    message.properties = {k: v for k, v in headers.items() if k not in _FRAME_ONLY}
    return message


def closed_acknowledge() -> None:
    raise IllegalStateError("the session of this message is closed")
