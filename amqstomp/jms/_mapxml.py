"""``jms-map-xml``: the XML form of a :class:`amqstomp.jms.MapMessage` body
(XStream's rendering of a ``java.util.HashMap``, which ActiveMQ's
JmsFrameTranslator reads and writes), and the Java types of map entries.

Entries are ``name -> (tag, value)``: ``tag`` is XStream's element name for the
Java type (``boolean``, ``byte``, ``short``, ``char``, ``int``, ``long``,
``float``, ``double``, ``string``, ``byte-array``, ``null``), ``value`` the
Python value (bool, int, float, str, bytes or None).

Licensed under the Apache License, Version 2.0.
"""
import base64
import re
import xml.etree.ElementTree as ET
from typing import Any, Dict, Tuple

from .exceptions import MessageFormatError

__all__ = ["MAP_TRANSFORMATION", "MAP_SUBSCRIBE_TRANSFORMATION", "INT_RANGES", "MAP_TAGS", "XML_BAD",
           "TypedEntries", "java_float", "encode_map", "decode_map"]

#: The ``transformation`` a MapMessage is sent with, and the one ActiveMQ's
#: JmsFrameTranslator gives a MapMessage it renders for a consumer.
MAP_TRANSFORMATION = "jms-map-xml"
#: What a consumer's SUBSCRIBE asks for to get MapMessages rendered
#: (``map_messages=True``): ``jms-xml`` renders maps as ``jms-map-xml`` and leaves
#: text and bytes messages as they are (JmsFrameTranslator.convertMessage).
MAP_SUBSCRIBE_TRANSFORMATION = "jms-xml"

#: The value range of each Java integer type (XStream's element names).
INT_RANGES = {"byte": (-2 ** 7, 2 ** 7 - 1), "short": (-2 ** 15, 2 ** 15 - 1), "int": (-2 ** 31, 2 ** 31 - 1),
              "long": (-2 ** 63, 2 ** 63 - 1)}
#: XStream's element names for the Java types of ActiveMQMapMessage entries.
MAP_TAGS = frozenset(("boolean", "byte", "short", "char", "int", "long", "float", "double", "string", "byte-array",
                      "null"))
#: Characters XML 1.0 cannot carry (so XStream on the broker could not parse them).
XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_FLOAT_TEXT = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}


class TypedEntries(Dict[str, Tuple[str, Any]]):
    """Map entries with their Java types, ``name -> (tag, value)``, as
    :func:`decode_map` gives them: a :class:`MapMessage` made from one keeps
    the types as they are (a plain dict has them inferred).

    Attributes:
        body_missing (bool): the broker sent the map without its entries (the
            consumer did not ask for ``map_messages``); reading one raises.
    """

    body_missing = False

    @classmethod
    def missing(cls) -> "TypedEntries":
        """No entries, because the broker did not send them (``body_missing``)."""
        entries = cls()
        entries.body_missing = True
        return entries


def java_float(value: float) -> str:
    """``value`` as Java renders a float/double (``Infinity``, ``NaN``, ``1.5``)."""
    text = repr(float(value))
    return _FLOAT_TEXT.get(text, text)


def encode_map(entries: Dict[str, Tuple[str, Any]]) -> bytes:
    """The ``jms-map-xml`` body (UTF-8) of ``entries`` (``name -> (tag, value)``)."""
    root = ET.Element("map")
    for name, (tag, value) in entries.items():
        entry = ET.SubElement(root, "entry")
        ET.SubElement(entry, "string").text = name
        element = ET.SubElement(entry, tag)
        if tag == "null":
            continue
        if tag == "boolean":
            element.text = "true" if value else "false"
        elif tag in ("float", "double"):
            element.text = java_float(value)
        elif tag == "byte-array":
            element.text = base64.b64encode(value).decode("ascii")
        else:
            element.text = str(value)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=False)
    return data


def decode_map(body: bytes) -> TypedEntries:
    """Parse a ``jms-map-xml`` body (XStream's rendering of the map) into its
    entries; an element of another Java type keeps its text as a ``string``.

    Raises:
        MessageFormatError: not such XML (a DOCTYPE is refused outright), an
            XStream reference, a value its element's type cannot hold.
    """
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise MessageFormatError("a jms-map-xml body with a DOCTYPE/ENTITY declaration is refused")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise MessageFormatError("jms-map-xml body is not XML: %s" % exc) from None
    if root.tag != "map":
        raise MessageFormatError("jms-map-xml body has root <%s>, expected <map>" % root.tag)
    entries = TypedEntries()
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
            elif tag in INT_RANGES:
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
        entries[name] = (tag, value)
    return entries
