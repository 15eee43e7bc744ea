"""The :class:`MapMessage` of the JMS-style API (typed entries, sent as
``jms-map-xml``). Import it from :mod:`amqstomp.jms`.

Licensed under the Apache License, Version 2.0.
"""
from typing import Any, Dict, Iterator, Optional, Tuple, Union, cast

from .._core.dialect import ACTIVEMQ, BROKERS
from ._mapxml import INT_RANGES, MAP_TRANSFORMATION, XML_BAD, TypedEntries, decode_map, encode_map, java_float
from ._messages import Message, not_writeable
from .exceptions import MessageFormatError

__all__ = ["MapMessage", "MapValue"]

MapValue = Union[None, bool, int, float, str, bytes]  # bytes: received byte[] entries only


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
        if self._body_read_only:
            raise not_writeable(self, "body")
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
        """Remove every entry; a received map becomes writable."""
        self._map.clear()
        self._body_missing = False
        self._body_read_only = False

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
