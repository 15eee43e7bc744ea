"""The message classes of the JMS-style API: :class:`Message` (headers and
properties only), :class:`TextMessage`, :class:`BytesMessage` and
:class:`MapMessage`. Import them from :mod:`amqstomp.jms` (or
:mod:`amqstomp.jms.message`, which also maps them onto STOMP frames).

Licensed under the Apache License, Version 2.0.
"""
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union, cast

from .._core.dialect import ACTIVEMQ, BROKERS, TEXT_CONTENT_TYPE
from ._mapxml import INT_RANGES, MAP_TRANSFORMATION, XML_BAD, TypedEntries, decode_map, encode_map, java_float
from ._scheduling import check_scheduled_property, is_scheduling_property
from .constants import DEFAULT_PRIORITY, PERSISTENT
from .destination import Destination
from .exceptions import MessageFormatError

__all__ = ["Message", "TextMessage", "BytesMessage", "MapMessage", "RESERVED_HEADERS", "PropertyValue", "MapValue",
           "bind_acknowledge", "check_property", "stomp_body"]

#: Header names a property cannot have: amqstomp sets them itself (or they change
#: the frame's meaning on the broker).
RESERVED_HEADERS = frozenset((
    "destination", "receipt", "transaction", "content-length", "message-id", "subscription", "ack", "id",
    "redelivered", "expires", "priority", "persistent", "reply-to", "correlation-id", "type", "timestamp",
    "amq-msg-type", "JMSXGroupID", "JMSXGroupSeq", "transformation", "receipt-id", "content-type",
))

PropertyValue = Union[str, int, float, bool]

MapValue = Union[None, bool, int, float, str, bytes]  # bytes: received byte[] entries only


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
        check_property(name, value)
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

    def _stomp_body(self, dialect: str) -> Tuple[bytes, Dict[str, Any]]:
        """The SEND body (bytes) of this message and the headers that frame it
        (``content-length``: None leaves it out), for a broker of ``dialect``
        (:mod:`amqstomp._core.dialect`).

        Raises:
            MessageFormatError: a body that cannot travel to this broker.
        """
        return b"", {"content-length": None}

    def clear_body(self) -> None:
        """Empty the body."""

    # ------------------------------------------------------------ acknowledge

    def _set_acknowledge(self, callback: Optional[Callable[[], None]]) -> None:
        self._acknowledge = callback

    def _send_body(self, dialect: str) -> Tuple[bytes, Dict[str, Any]]:
        return self._stomp_body(dialect)  # the class's own

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


def _checked_text(text: Any) -> str:
    """TextMessage's ``text`` other than a plain ``str``: None is ``""``, a
    ``str`` subclass is kept; anything else is refused."""
    if text is None:
        return ""
    if isinstance(text, str):
        return text
    hint = "; send bytes as a BytesMessage" if isinstance(text, (bytes, bytearray, memoryview)) else ""
    raise TypeError("TextMessage: text must be str or None, got %s%s" % (type(text).__name__, hint))


class TextMessage(Message):
    """A message whose body is text (``str``); ActiveMQ's TextMessage.

    Args:
        text (str | None): the body; None is the empty text (JMS allows a
            null text).

    Raises:
        TypeError: ``text`` is neither a ``str`` nor None (bytes go in a
            :class:`BytesMessage`).
    """

    def __init__(self, text: Optional[str] = "") -> None:
        # Message.__init__ inlined: a new message per send is on producers' hot path
        self.properties: Dict[str, PropertyValue] = {}
        self.headers: Dict[str, str] = {}
        self.text = text if text.__class__ is str else _checked_text(text)

    @property
    def body(self) -> str:
        return self.text

    def clear_body(self) -> None:
        self.text = ""

    def _stomp_body(self, dialect: str) -> Tuple[bytes, Dict[str, Any]]:
        text = self.text
        if not isinstance(text, str):
            raise MessageFormatError("TextMessage.text must be str, got %s" % type(text).__name__)
        data = text.encode("utf-8")
        if b"\x00" not in data:  # no content-length: ActiveMQ makes a TextMessage; content-type: every broker
            return data, {"content-length": None, "content-type": TEXT_CONTENT_TYPE}
        if dialect == ACTIVEMQ:
            return data, {"content-length": len(data), "amq-msg-type": "text", "content-type": TEXT_CONTENT_TYPE}
        if BROKERS[dialect].text_length_ok:
            return data, {"content-length": len(data), "content-type": TEXT_CONTENT_TYPE}
        raise MessageFormatError("a text with a NUL character needs content-length, which makes it a bytes "
                                 "message on %s; send a BytesMessage" % BROKERS[dialect].title)

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
        # the fields send() reads, on the instance: CPython 3.11 reads an instance's own
        # attribute in a few instructions, a class default through the generic lookup
        self.correlation_id = self.reply_to = self.type = self.group_id = self.group_seq = None
        if data.__class__ is bytes:
            self.data = data
        else:
            try:
                self.data = bytes(memoryview(data))  # bytearray, memoryview, array...: not an int or a str
            except TypeError:
                raise TypeError("BytesMessage: data must be bytes-like, got %s; send text as a TextMessage"
                                % type(data).__name__) from None

    @property
    def body(self) -> bytes:
        return self.data

    @property
    def body_length(self) -> int:
        return len(self.data)

    def clear_body(self) -> None:
        self.data = b""

    def _stomp_body(self, dialect: str) -> Tuple[bytes, Dict[str, Any]]:
        data = self.data
        if data.__class__ is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise MessageFormatError("BytesMessage.data must be bytes, got %s" % type(data).__name__)
            data = bytes(data)
        return data, {"content-length": len(data)}

    def __repr__(self) -> str:
        return "<BytesMessage id=%s destination=%s %d bytes>" % (self.message_id, self.destination, len(self.data))


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

    def __init__(self, entries: Union[Dict[str, MapValue], TypedEntries, None] = None) -> None:
        super().__init__()
        self._map: Dict[str, Tuple[str, Any]] = {}
        self._body_missing = False
        if isinstance(entries, TypedEntries):  # decoded from jms-map-xml: the Java types are known
            self._map.update(entries)
            self._body_missing = entries.body_missing
        elif entries is not None:
            if not isinstance(entries, dict):
                raise TypeError("MapMessage(entries) takes a dict, got %s" % type(entries).__name__)
            for name, value in cast(Dict[str, MapValue], entries).items():
                self.set_object(name, value)

    # -- writing

    def _set(self, name: str, tag: str, value: Any) -> None:
        if not isinstance(name, str) or not name:
            raise MessageFormatError("a MapMessage entry name must be a non-empty str, got %r" % (name,))
        if XML_BAD.search(name):
            raise MessageFormatError("MapMessage entry name %r holds a character XML cannot carry" % (name,))
        self._body_missing = False
        self._map[name] = (tag, value)

    def _set_int(self, name: str, value: Any, tag: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("MapMessage entry %r: set_%s takes an int, got %s" % (name, tag, type(value).__name__))
        low, high = INT_RANGES[tag]
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
            low, high = INT_RANGES["int"]
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
        if XML_BAD.search(value):
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
                if kind in INT_RANGES:
                    number = int(value.strip(), 10)
                    low, high = INT_RANGES[kind]
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
            return java_float(value)
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
    def _stomp_body(self, dialect: str) -> Tuple[bytes, Dict[str, Any]]:
        if dialect != ACTIVEMQ:
            raise MessageFormatError("a MapMessage travels as ActiveMQ Classic's jms-map-xml transformation; the "
                                     "broker is %s, which has none (send its entries as text, e.g. JSON)"
                                     % BROKERS[dialect].title)
        # no content-length: ActiveMQ's JmsFrameTranslator reads the XML only then
        return encode_map(self._map), {"content-length": None, "transformation": MAP_TRANSFORMATION}

    @classmethod
    def from_xml(cls, body: bytes) -> "MapMessage":
        """A MapMessage with the entries of a ``jms-map-xml`` body (XStream's
        rendering of the map), their Java types kept.

        Raises:
            MessageFormatError: not such XML (a DOCTYPE is refused outright).
        """
        return cls(decode_map(body))

    def __repr__(self) -> str:
        return "<MapMessage id=%s destination=%s %d entries>" % (self.message_id, self.destination, len(self._map))


#: ``bind_acknowledge(message, callback)``: what ``message.acknowledge()`` calls (the
#: consumer sets it on each message it hands over; None: nothing).
bind_acknowledge = Message._set_acknowledge

#: ``stomp_body(message, dialect) -> (body, headers)``: the SEND body (bytes) of ``message``
#: and the headers that frame it (``content-length``: None leaves it out), for a broker of
#: ``dialect`` (:mod:`amqstomp._core.dialect`); MessageFormatError for a body that cannot
#: travel to this broker.
stomp_body = Message._send_body


def check_property(name: str, value: Any) -> None:
    """Refuse an application property amqstomp cannot send.

    Raises:
        MessageFormatError: the name is empty or one of :data:`RESERVED_HEADERS`,
            the value is not str/int/float/bool, or a scheduling property's value
            ActiveMQ would refuse.
    """
    if not isinstance(name, str) or not name:
        raise MessageFormatError("a property name must be a non-empty str, got %r" % (name,))
    if name in RESERVED_HEADERS:
        raise MessageFormatError("%r is a STOMP header amqstomp sets itself; use the message's "
                                 "attribute for it (correlation_id, reply_to, group_id...)" % (name,))
    if not isinstance(value, (str, int, float, bool)):
        raise MessageFormatError("property %r must be str, int, float or bool, got %s" % (name, type(value).__name__))
    if is_scheduling_property(name):
        check_scheduled_property(name, value)
