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
import base64
import math
import re
import time
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Set, Tuple, Union

from ..codec import FrameHead
from .constants import DEFAULT_PRIORITY, NON_PERSISTENT, PERSISTENT
from .destination import Destination, destination_from_header
from .exceptions import IllegalStateError, MessageFormatError

if TYPE_CHECKING:  # pragma: no cover
    from ..codec import Frame

__all__ = ["Message", "TextMessage", "BytesMessage", "MapMessage", "RESERVED_HEADERS", "message_from_frame", "check_scheduled_property",
           "send_headers", "message_headers", "SendHead", "MAP_TRANSFORMATION", "MAP_SUBSCRIBE_TRANSFORMATION"]

#: The ``transformation`` a MapMessage is sent with, and the one ActiveMQ's
#: JmsFrameTranslator gives a MapMessage it renders for a consumer.
MAP_TRANSFORMATION = "jms-map-xml"
#: What a consumer's SUBSCRIBE asks for to get MapMessages rendered
#: (``map_messages=True``): ``jms-xml`` renders maps as ``jms-map-xml`` and leaves
#: text and bytes messages as they are (JmsFrameTranslator.convertMessage).
MAP_SUBSCRIBE_TRANSFORMATION = "jms-xml"

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
                         "timestamp", "amq-msg-type", "JMSXGroupID", "JMSXGroupSeq", "transformation"))

PropertyValue = Union[str, int, float, bool]

# ActiveMQ's scheduler (SchedulerBroker) reads these properties of a SEND with
# Long.valueOf / Integer.valueOf of the header text and the cron entry with its
# CronParser; a value they refuse makes the broker answer ERROR and close the
# socket, so amqstomp refuses it before sending. Name -> (largest value, unit).
_JAVA_LONG_MAX = 2 ** 63 - 1
_JAVA_INT_MAX = 2 ** 31 - 1
_SCHEDULED_NUMBERS: Dict[str, Tuple[int, str]] = {
    "AMQ_SCHEDULED_DELAY": (_JAVA_LONG_MAX, "ms"),
    "AMQ_SCHEDULED_PERIOD": (_JAVA_LONG_MAX, "ms"),
    "AMQ_SCHEDULED_REPEAT": (_JAVA_INT_MAX, "repeats"),
}
# ActiveMQ adds AMQ_SCHEDULED_DELAY to the current time in a Java long: a delay
# that overflows it makes the broker answer "Illegal execution time". The check
# keeps 100 years of room, so a message checked now is still fine when sent later.
_DELAY_ROOM_MS = 100 * 365 * 24 * 3600 * 1000
_SCHEDULED_CRON = "AMQ_SCHEDULED_CRON"
_DECIMAL = re.compile(r"[+-]?[0-9]+\Z")  # what Long.valueOf takes (ASCII digits only here)
_CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
                ("day of week", 0, 6))
_CRON_SEPARATORS = re.compile(r"[ \t]+")
_CRON_TOKEN = re.compile(r"[0-9*,/-]+\Z")
_CRON_NUMBER = re.compile(r"[0-9]{1,9}\Z")


_time = time.time


def _now_ms() -> int:
    return int(_time() * 1000)


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
        link_seq (int): received messages: the number of the consumer socket
            that delivered it (1 for the connection's first, +1 per failover);
            its acknowledgement goes on that socket or raises
            :class:`~amqstomp.exception.AcknowledgeInterruptedError`. 0 when not received.
        group_id (str | None), group_seq (int | None): message groups (JMSXGroupID /
            JMSXGroupSeq). ActiveMQ routes by them but does not pass them back to
            STOMP consumers, so received messages have None.
        properties (dict[str, str | int | float | bool]): application properties.
    """

    # the header fields' defaults live on the class (immutable values; an assignment makes
    # the instance's own): a new message per send is on producers' hot path
    destination: Optional[Destination] = None
    message_id: Optional[str] = None
    timestamp = 0
    correlation_id: Optional[str] = None
    reply_to: Optional[Destination] = None
    type: Optional[str] = None
    delivery_mode = PERSISTENT
    priority = DEFAULT_PRIORITY
    expiration = 0
    redelivered = False
    delivery_count = 1
    link_seq = 0
    group_id: Optional[str] = None
    group_seq: Optional[int] = None
    _acknowledge: Optional[Callable[[], None]] = None

    def __init__(self) -> None:
        self.properties: Dict[str, PropertyValue] = {}
        self.headers: Dict[str, str] = {}  # the MESSAGE frame's headers, for received messages

    # ------------------------------------------------------------ properties

    def set_property(self, name: str, value: PropertyValue) -> None:
        """Set an application property (sent as a STOMP header).

        Raises:
            MessageFormatError: the name is one amqstomp sets itself
                (:data:`RESERVED_HEADERS`), the value is not str/int/float/bool, or
                it is an ``AMQ_SCHEDULED_*`` value ActiveMQ's scheduler would refuse
                (out of range, negative, not a whole number, a bad cron entry: see
                :func:`check_scheduled_property`).
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

    def schedule(self, delay_ms: int = 0, period_ms: int = 0, repeat: int = 0, cron: Optional[str] = None) -> None:
        """Ask ActiveMQ's scheduler to deliver this message later (or repeatedly):
        sets the properties ``AMQ_SCHEDULED_DELAY`` (ms), ``AMQ_SCHEDULED_PERIOD``
        (ms between repeats), ``AMQ_SCHEDULED_REPEAT`` (extra deliveries) and
        ``AMQ_SCHEDULED_CRON`` (ActiveMQ's ``ScheduledMessage``); 0 / None leaves a
        property out. The broker needs ``schedulerSupport="true"``; without it the
        properties are ignored and the message is delivered at once.

        ``delay_ms`` and ``period_ms`` go up to 2**63 - 1 (a Java long), ``repeat``
        up to 2**31 - 1 (a Java int; ActiveMQ 5.18+ refuses more than its
        ``maxRepeatAllowed``, 1000 by default); ``cron`` is five fields (minute
        hour day-of-month month day-of-week) in the syntax ActiveMQ's CronParser
        takes (:func:`check_scheduled_property` lists it). Nothing is changed when
        a value is refused.

        Raises:
            MessageFormatError (a ValueError): a negative or non-int value, one
                out of those ranges, a repeat without a period or cron, an empty
                cron string or a cron entry ActiveMQ would refuse; the message
                names the argument or property and the value.
        """
        for name, value in (("delay_ms", delay_ms), ("period_ms", period_ms), ("repeat", repeat)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise MessageFormatError("schedule(): %s must be an int >= 0, got %r" % (name, value))
        if cron is not None and (not isinstance(cron, str) or not cron.strip()):
            raise MessageFormatError("schedule(): cron must be a non-empty str (e.g. '0 * * * *') or None, got %r"
                                     % (cron,))
        if repeat and not period_ms and cron is None:
            raise MessageFormatError("schedule(): repeat=%d needs period_ms or cron" % repeat)
        wanted: Tuple[Tuple[str, Union[int, str, None]], ...] = (
            ("AMQ_SCHEDULED_DELAY", delay_ms), ("AMQ_SCHEDULED_PERIOD", period_ms),
            ("AMQ_SCHEDULED_REPEAT", repeat), ("AMQ_SCHEDULED_CRON", cron))
        for prop, setting in wanted:
            if setting:
                check_scheduled_property(prop, setting)
        for prop, setting in wanted:
            if setting:
                self.properties[prop] = setting
            else:
                self.properties.pop(prop, None)

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
        # Message.__init__ inlined: a new message per send is on producers' hot path
        self.properties: Dict[str, PropertyValue] = {}
        self.headers: Dict[str, str] = {}
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
        # Message.__init__ inlined: a new message per send is on producers' hot path
        self.properties: Dict[str, PropertyValue] = {}
        self.headers: Dict[str, str] = {}
        self.data = data if data.__class__ is bytes else bytes(data)

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
        if data.__class__ is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise MessageFormatError("BytesMessage.data must be bytes, got %s" % type(data).__name__)
            data = bytes(data)
        return data, {"content-length": len(data)}

    def __repr__(self) -> str:
        return "<BytesMessage id=%s destination=%s %d bytes>" % (self.message_id, self.destination, len(self.data))


# ---------------------------------------------------------------- MapMessage

# XStream's element names for the Java types of ActiveMQMapMessage entries
_INT_RANGES = {"byte": (-2 ** 7, 2 ** 7 - 1), "short": (-2 ** 15, 2 ** 15 - 1), "int": (-2 ** 31, 2 ** 31 - 1),
               "long": (-2 ** 63, 2 ** 63 - 1)}
_MAP_TAGS = frozenset(("boolean", "byte", "short", "char", "int", "long", "float", "double", "string", "byte-array",
                       "null"))
# characters XML 1.0 cannot carry (so XStream on the broker could not parse them)
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_FLOAT_TEXT = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}

MapValue = Union[None, bool, int, float, str, bytes]  # bytes: received byte[] entries only


def _java_float(value: float) -> str:
    text = repr(float(value))
    return _FLOAT_TEXT.get(text, text)


class MapMessage(Message):
    """A message whose body is a map of names to typed values (JMS ``MapMessage``;
    ActiveMQ's ActiveMQMapMessage).

    STOMP has no map body: amqstomp sends the map as XStream XML with
    ``transformation:jms-map-xml``, which ActiveMQ's JmsFrameTranslator turns
    into a real MapMessage (Java consumers see one). A STOMP consumer gets the
    entries back only if it asks (``create_consumer(..., map_messages=True)``:
    SUBSCRIBE with ``transformation:jms-xml``); otherwise ActiveMQ sends the
    frame without a body and reading an entry raises :class:`MessageFormatError`.
    The broker needs XStream on its class path (not in Debian's package: link
    /usr/share/java/{xstream,jettison,xpp3}.jar into its lib directory, as
    :class:`amqstomp.testing.ActiveMQBroker` does): without it ActiveMQ 5.17
    closes the socket.

    Entry types (the Java type each becomes): ``set_boolean`` (boolean),
    ``set_byte`` (byte), ``set_short`` (short), ``set_char`` (char, a 1-character
    str), ``set_int`` (int), ``set_long`` (long), ``set_float`` (float),
    ``set_double`` (double), ``set_string`` (String);
    ``set_object`` / ``m[name] = value`` infer it: bool -> boolean, int -> int
    or long (by range), float -> double, str -> String, None -> null. Getters
    convert as JMS 1.1's MapMessage table allows (e.g. ``get_long`` of an int
    entry, ``get_string`` of any but byte[]). There is no ``set_bytes``: the
    XStream of ActiveMQ 5.17 refuses to read a byte[] entry (measured: the
    broker then makes a TextMessage with a ``transformation-error`` header);
    received maps (from Java producers) may hold byte[] entries, read with
    :meth:`get_bytes`.
    """

    def __init__(self, entries: Optional[Dict[str, MapValue]] = None) -> None:
        super().__init__()
        self._map: Dict[str, Tuple[str, Any]] = {}
        self._body_missing = False
        if entries is not None:
            if not isinstance(entries, dict):
                raise TypeError("MapMessage(entries) takes a dict, got %s" % type(entries).__name__)
            for name, value in entries.items():
                self.set_object(name, value)

    # -- writing

    def _set(self, name: str, tag: str, value: Any) -> None:
        if not isinstance(name, str) or not name:
            raise MessageFormatError("a MapMessage entry name must be a non-empty str, got %r" % (name,))
        if _XML_BAD.search(name):
            raise MessageFormatError("MapMessage entry name %r holds a character XML cannot carry" % (name,))
        self._body_missing = False
        self._map[name] = (tag, value)

    def _set_int(self, name: str, value: Any, tag: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("MapMessage entry %r: set_%s takes an int, got %s" % (name, tag, type(value).__name__))
        low, high = _INT_RANGES[tag]
        if not low <= value <= high:
            raise MessageFormatError("MapMessage entry %r: %d is outside a Java %s (%d .. %d)"
                                     % (name, value, tag, low, high))
        self._set(name, tag, value)

    def set_boolean(self, name: str, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError("MapMessage entry %r: set_boolean takes a bool, got %s" % (name, type(value).__name__))
        self._set(name, "boolean", value)

    def set_byte(self, name: str, value: int) -> None:
        self._set_int(name, value, "byte")

    def set_short(self, name: str, value: int) -> None:
        self._set_int(name, value, "short")

    def set_int(self, name: str, value: int) -> None:
        self._set_int(name, value, "int")

    def set_long(self, name: str, value: int) -> None:
        self._set_int(name, value, "long")

    def _set_float(self, name: str, value: Any, tag: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError("MapMessage entry %r: set_%s takes a float, got %s" % (name, tag, type(value).__name__))
        self._set(name, tag, float(value))

    def set_float(self, name: str, value: float) -> None:
        """A Java float (32 bits: the value is rounded by the broker)."""
        self._set_float(name, value, "float")

    def set_double(self, name: str, value: float) -> None:
        self._set_float(name, value, "double")

    def set_char(self, name: str, value: str) -> None:
        if not isinstance(value, str) or len(value) != 1 or ord(value) > 0xFFFF:
            raise TypeError("MapMessage entry %r: set_char takes one character of the BMP, got %r" % (name, value))
        self._check_text(name, value)
        self._set(name, "char", value)

    def set_string(self, name: str, value: Optional[str]) -> None:
        if value is None:
            self._set(name, "null", None)
            return
        if not isinstance(value, str):
            raise TypeError("MapMessage entry %r: set_string takes a str, got %s" % (name, type(value).__name__))
        self._check_text(name, value)
        self._set(name, "string", value)

    def set_object(self, name: str, value: MapValue) -> None:
        """Set an entry, its Java type inferred from the Python one (see the class).

        Raises:
            TypeError: a value of another type (dict, list, Decimal...), naming the entry.
            MessageFormatError: an int beyond a Java long, a str XML cannot carry.
        """
        if value is None:
            self._set(name, "null", None)
        elif isinstance(value, bool):
            self.set_boolean(name, value)
        elif isinstance(value, int):
            low, high = _INT_RANGES["int"]
            self._set_int(name, value, "int" if low <= value <= high else "long")
        elif isinstance(value, float):
            self.set_double(name, value)
        elif isinstance(value, str):
            self.set_string(name, value)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError("MapMessage entry %r: bytes cannot be sent: ActiveMQ 5.17's XStream refuses byte[] in "
                            "jms-map-xml (it answers with transformation-error '[B' and makes a TextMessage); "
                            "send base64 text or a BytesMessage" % (name,))
        else:
            raise TypeError("MapMessage entry %r: unsupported value type %s (supported: None, bool, int, float, "
                            "str)" % (name, type(value).__name__))

    def __setitem__(self, name: str, value: MapValue) -> None:
        self.set_object(name, value)

    @staticmethod
    def _check_text(name: str, value: str) -> None:
        if _XML_BAD.search(value):
            raise MessageFormatError("MapMessage entry %r holds a character XML 1.0 cannot carry (a control "
                                     "character or a lone surrogate); use set_bytes" % (name,))

    # -- reading

    def _entry(self, name: str) -> Optional[Tuple[str, Any]]:
        if self._body_missing:
            raise MessageFormatError(
                "the broker sent this MapMessage without its entries: create the consumer with "
                "map_messages=True (SUBSCRIBE transformation:jms-xml) to receive them")
        return self._map.get(name)

    def _get(self, name: str, kind: str, accepted: Tuple[str, ...]) -> Any:
        entry = self._entry(name)
        if entry is None:
            raise KeyError("MapMessage has no entry %r" % (name,))
        tag, value = entry
        if tag in accepted:
            return value
        if tag == "string" and kind != "char":
            try:
                if kind == "boolean":
                    return value.strip().lower() == "true"
                if kind in _INT_RANGES:
                    number = int(value.strip(), 10)
                    low, high = _INT_RANGES[kind]
                    if not low <= number <= high:
                        raise ValueError("out of range")
                    return number
                return float(value)
            except ValueError:
                raise MessageFormatError("MapMessage entry %r: the string %r is not a %s" % (name, value, kind)) \
                    from None
        raise MessageFormatError("MapMessage entry %r is a %s; it cannot be read as a %s" % (name, tag, kind))

    def get_boolean(self, name: str) -> bool:
        """Raises: KeyError (no such entry), MessageFormatError (not convertible)."""
        return bool(self._get(name, "boolean", ("boolean",)))

    def get_byte(self, name: str) -> int:
        return int(self._get(name, "byte", ("byte",)))

    def get_short(self, name: str) -> int:
        return int(self._get(name, "short", ("byte", "short")))

    def get_int(self, name: str) -> int:
        return int(self._get(name, "int", ("byte", "short", "int")))

    def get_long(self, name: str) -> int:
        return int(self._get(name, "long", ("byte", "short", "int", "long")))

    def get_float(self, name: str) -> float:
        return float(self._get(name, "float", ("float",)))

    def get_double(self, name: str) -> float:
        return float(self._get(name, "double", ("float", "double")))

    def get_char(self, name: str) -> str:
        return str(self._get(name, "char", ("char",)))

    def get_string(self, name: str) -> Optional[str]:
        """Any entry but byte[] as text (Java's rendering: ``true``, ``1.5``);
        None for a missing or null entry."""
        entry = self._entry(name)
        if entry is None or entry[0] == "null":
            return None
        tag, value = entry
        if tag == "byte-array":
            raise MessageFormatError("MapMessage entry %r is a byte[]; it cannot be read as a string" % (name,))
        if tag == "boolean":
            return "true" if value else "false"
        if tag in ("float", "double"):
            return _java_float(value)
        return str(value)

    def get_bytes(self, name: str) -> Optional[bytes]:
        """A byte[] entry; None for a missing or null one."""
        entry = self._entry(name)
        if entry is None or entry[0] == "null":
            return None
        if entry[0] != "byte-array":
            raise MessageFormatError("MapMessage entry %r is a %s; it cannot be read as bytes" % (name, entry[0]))
        return bytes(entry[1])

    def get_object(self, name: str) -> MapValue:
        """The entry's value as Python holds it (None when missing or null)."""
        entry = self._entry(name)
        return None if entry is None else entry[1]

    def get_type(self, name: str) -> Optional[str]:
        """The entry's Java type as XStream names it (``int``, ``long``,
        ``string``, ``byte-array``...), or None when missing."""
        entry = self._entry(name)
        return None if entry is None else entry[0]

    def __getitem__(self, name: str) -> MapValue:
        entry = self._entry(name)
        if entry is None:
            raise KeyError(name)
        value: MapValue = entry[1]
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._entry(name) is not None

    def item_exists(self, name: str) -> bool:
        return name in self

    def get_map_names(self) -> Iterator[str]:
        self._entry("")
        return iter(list(self._map))

    def to_dict(self) -> Dict[str, MapValue]:
        """The entries as a plain dict (types as :meth:`get_object` gives them)."""
        self._entry("")
        return {name: value for name, (_, value) in self._map.items()}

    def __len__(self) -> int:
        return len(self._map)

    def clear_body(self) -> None:
        self._map.clear()
        self._body_missing = False

    # -- wire form (XStream's rendering of a java.util.HashMap)

    def _payload(self, activemq: bool) -> Tuple[bytes, Dict[str, Any]]:
        if not activemq:
            raise MessageFormatError("a MapMessage travels as ActiveMQ's jms-map-xml transformation; this broker "
                                     "is not ActiveMQ")
        root = ET.Element("map")
        for name, (tag, value) in self._map.items():
            entry = ET.SubElement(root, "entry")
            ET.SubElement(entry, "string").text = name
            element = ET.SubElement(entry, tag)
            if tag == "null":
                continue
            if tag == "boolean":
                element.text = "true" if value else "false"
            elif tag in ("float", "double"):
                element.text = _java_float(value)
            elif tag == "byte-array":
                element.text = base64.b64encode(value).decode("ascii")
            else:
                element.text = str(value)
        # no content-length: ActiveMQ's JmsFrameTranslator reads the XML only then
        return ET.tostring(root, encoding="utf-8", xml_declaration=False), {
            "content-length": None, "transformation": MAP_TRANSFORMATION}

    @classmethod
    def _from_xml(cls, body: bytes) -> "MapMessage":
        """Parse a ``jms-map-xml`` body (XStream's rendering of the map).

        Raises:
            MessageFormatError: not such XML (a DOCTYPE is refused outright).
        """
        if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
            raise MessageFormatError("a jms-map-xml body with a DOCTYPE/ENTITY declaration is refused")
        try:
            root = ET.fromstring(body)
        except ET.ParseError as exc:
            raise MessageFormatError("jms-map-xml body is not XML: %s" % exc) from None
        if root.tag != "map":
            raise MessageFormatError("jms-map-xml body has root <%s>, expected <map>" % root.tag)
        message = cls()
        for entry in root:
            children = list(entry)
            if entry.tag != "entry" or len(children) != 2 or children[0].tag != "string":
                raise MessageFormatError("unexpected jms-map-xml element <%s> (%d children)"
                                         % (entry.tag, len(children)))
            name = children[0].text or ""
            element = children[1]
            tag, text = element.tag, element.text or ""
            if "reference" in element.attrib:
                raise MessageFormatError("jms-map-xml entry %r is an XStream reference, which amqstomp does not "
                                         "resolve" % (name,))
            value: Any
            try:
                if tag == "null":
                    value = None
                elif tag == "boolean":
                    value = text.strip() == "true"
                elif tag in _INT_RANGES:
                    value = int(text.strip(), 10)
                elif tag in ("float", "double"):
                    value = float(text.strip())
                elif tag == "byte-array":
                    value = base64.b64decode(text.strip(), validate=True)
                elif tag in ("string", "char"):
                    value = text
                else:
                    tag, value = "string", text  # another Java type: keep its text
            except ValueError as exc:
                raise MessageFormatError("jms-map-xml entry %r: bad <%s> %r: %s" % (name, tag, text, exc)) from None
            message._map[name] = (tag, value)
        return message

    def __repr__(self) -> str:
        return "<MapMessage id=%s destination=%s %d entries>" % (self.message_id, self.destination, len(self._map))


def _check_property(name: str, value: Any) -> None:
    if not isinstance(name, str) or not name:
        raise MessageFormatError("a property name must be a non-empty str, got %r" % (name,))
    if name in RESERVED_HEADERS:
        raise MessageFormatError("%r is a STOMP header amqstomp sets itself; use the message's "
                                 "attribute for it (correlation_id, reply_to, group_id...)" % (name,))
    if not isinstance(value, (str, int, float, bool)):
        raise MessageFormatError("property %r must be str, int, float or bool, got %s" % (name, type(value).__name__))
    if name in _SCHEDULED_NUMBERS or name == _SCHEDULED_CRON:
        check_scheduled_property(name, value)


def check_scheduled_property(name: str, value: Any) -> None:
    """Refuse a value of one of ActiveMQ's scheduling properties that the broker
    cannot parse (it would answer ERROR and close the socket).

    ``AMQ_SCHEDULED_DELAY`` and ``AMQ_SCHEDULED_PERIOD`` (ms) must be whole numbers
    from 0 to 2**63 - 1 (a Java long) -- the delay less the current time since
    the epoch and 100 years, because the broker adds it to the current time in a
    Java long (an overflow is its "Illegal execution time") --,
    ``AMQ_SCHEDULED_REPEAT`` one from 0 to
    2**31 - 1 (a Java int): an ``int`` (not a bool or float) or a str of ASCII
    digits with an optional sign. ActiveMQ 5.18+ further refuses a repeat above
    its ``maxRepeatAllowed`` (1000 by default). ``AMQ_SCHEDULED_CRON`` must be a
    str that ActiveMQ's CronParser accepts, checked structurally: exactly five
    fields separated by spaces or tabs -- minute 0-59, hour 0-23, day of month
    1-31, month 1-12, day of week 0-6 (0 = Sunday) -- each ``*``, a number, a
    range ``a-b``, a list ``a,b,...`` of numbers and ranges, or a step ``x/n``
    (n >= 1). As in CronParser a step keeps the values of ``x`` that are
    multiples of ``n`` (``*/15`` = 0,15,30,45; ``5/10`` selects nothing and is
    refused). No names (JAN, MON), no Quartz ``? L W #``, no seconds field.
    Other property names are not checked here.

    Raises:
        MessageFormatError (a ValueError): naming the property and the bad value.
    """
    if name in _SCHEDULED_NUMBERS:
        largest, unit = _SCHEDULED_NUMBERS[name]
        if name == "AMQ_SCHEDULED_DELAY":
            largest -= int(_time() * 1000) + _DELAY_ROOM_MS
        number: Optional[int] = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and _DECIMAL.match(value):
            number = int(value)
        if number is None or not 0 <= number <= largest:
            raise MessageFormatError("%s must be a whole number of %s from 0 to %d (what ActiveMQ's scheduler "
                                     "parses), got %r" % (name, unit, largest, value))
    elif name == _SCHEDULED_CRON:
        if not isinstance(value, str):
            raise MessageFormatError("%s must be a str (a cron entry such as '0 * * * *'), got %r" % (name, value))
        problem = _cron_problem(value)
        if problem:
            raise MessageFormatError("%s: %r is not a cron entry ActiveMQ accepts: %s" % (name, value, problem))


def _cron_problem(entry: str) -> Optional[str]:
    """What is wrong with a cron entry (None: nothing); see check_scheduled_property."""
    fields = [f for f in _CRON_SEPARATORS.split(entry.strip(" \t")) if f]
    if len(fields) != len(_CRON_FIELDS):
        return ("%d field(s); it needs 5 separated by spaces: minute hour day-of-month month day-of-week"
                % len(fields))
    for token, (what, low, high) in zip(fields, _CRON_FIELDS):
        if not _CRON_TOKEN.match(token):
            return "%s field %r: only digits and * , - / are allowed" % (what, token)
        try:
            values = _cron_values(token, low, high)
        except ValueError as exc:
            return "%s field %r: %s" % (what, token, exc)
        if not values:
            return "%s field %r selects no %s (a step x/n keeps the multiples of n in x)" % (what, token, what)
    return None


def _cron_values(token: str, low: int, high: int) -> Set[int]:
    """The values a cron field selects, evaluated the way CronParser does (a
    step before a list before a range); ValueError says what is wrong."""
    if token == "*":
        return set(range(low, high + 1))
    if "/" in token:
        base, _, step = token.partition("/")
        if not _CRON_NUMBER.match(step) or int(step) < 1:
            raise ValueError("the step after '/' must be a number >= 1, got %r" % (step,))
        n = int(step)
        return {v for v in _cron_values(base, low, high) if v % n == 0}
    if "," in token:
        chosen: Set[int] = set()
        for part in token.split(","):
            if not part:
                raise ValueError("an empty list item")
            chosen |= _cron_values(part, low, high)
        return chosen
    if "-" in token:
        first, _, last = token.partition("-")
        a, b = _cron_number(first, low, high), _cron_number(last, low, high)
        if a > b:
            raise ValueError("the range %d-%d is empty" % (a, b))
        return set(range(a, b + 1))
    return {_cron_number(token, low, high)}


def _cron_number(text: str, low: int, high: int) -> int:
    if not _CRON_NUMBER.match(text):
        raise ValueError("%r is not a number" % (text,))
    value = int(text)
    if not low <= value <= high:
        raise ValueError("%d is outside %d-%d" % (value, low, high))
    return value


def _text(value: PropertyValue) -> str:
    if value is True or value is False:
        return "true" if value else "false"
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

    __slots__ = ("destination", "delivery_mode", "priority")

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
        headers = {"destination": destination.stomp_name}
        if delivery_mode == PERSISTENT:  # ActiveMQ's default is non-persistent
            headers["persistent"] = "true"
        if priority != DEFAULT_PRIORITY:
            headers["priority"] = str(priority)
        super().__init__("SEND", headers)


def message_headers(message: Message, head: SendHead, time_to_live: int, activemq: bool,
                    timestamp: bool = True) -> Tuple[Dict[str, Any], bytes]:
    """The SEND headers of ``message`` that follow ``head`` (body framing,
    properties, timestamp, expiration, correlation id, reply-to, type, group),
    and its body; sets the message's JMS header fields (destination, delivery
    mode, priority, timestamp, expiration) as ``send`` does. Timestamps are
    epoch ms (ints: the codec writes them).

    Raises:
        MessageFormatError: a bad property, body, reply-to or time-to-live.
    """
    # (the hot path of every send: the checks are cheap type() tests first)
    if time_to_live.__class__ is not int or time_to_live < 0:
        if isinstance(time_to_live, bool) or not isinstance(time_to_live, int) or time_to_live < 0:
            raise MessageFormatError("time_to_live must be an int >= 0 (ms), got %r" % (time_to_live,))
    if message.__class__ is BytesMessage and message.data.__class__ is bytes:
        body = message.data
        headers: Dict[str, Any] = {"content-length": len(body)}  # BytesMessage._payload inlined: hot path
    else:
        body, headers = message._payload(activemq)
    properties = message.properties
    if properties:
        for name, value in properties.items():
            _check_property(name, value)
            headers[name] = _text(value)
    now = int(_time() * 1000) if (timestamp or time_to_live) else 0
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
                 time_to_live: int, activemq: bool, timestamp: bool = True) -> Tuple[Dict[str, Any], bytes]:
    """All the SEND headers of ``message`` (:class:`SendHead`'s, then
    :func:`message_headers`'), and its body; sets the message's JMS header
    fields as ``send`` does.

    Raises:
        MessageFormatError: a bad property, body, priority, delivery mode,
            reply-to or time-to-live.
    """
    head = SendHead(destination, delivery_mode, priority)
    headers, body = message_headers(message, head, time_to_live, activemq, timestamp)
    full: Dict[str, Any] = dict(head.headers)
    full.update(headers)
    return full, body


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
    transformation = headers.get("transformation")
    if transformation == MAP_TRANSFORMATION or (transformation == MAP_SUBSCRIBE_TRANSFORMATION and not data.strip()):
        # the second: a map that a map_messages=True consumer had prefetched and gave back; ActiveMQ
        # keeps that subscription's transformation on it and sends other consumers no body
        if data.strip():
            message = MapMessage._from_xml(data)
        else:  # the consumer did not ask for the rendering: ActiveMQ sent no body
            message = MapMessage()
            message._body_missing = True
    elif kind == "text" or (kind != "bytes" and "content-length" not in headers):
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
    message.link_seq = frame.link_seq
    message.redelivered = message.delivery_count > 1 or headers.get("redelivered") == "true"
    message.group_id = headers.get("JMSXGroupID")
    seq = headers.get("JMSXGroupSeq")
    message.group_seq = _int(seq, 0) if seq is not None else None
    message.properties = {k: v for k, v in headers.items() if k not in _FRAME_ONLY}
    return message


def closed_acknowledge() -> None:
    raise IllegalStateError("the session of this message is closed")
