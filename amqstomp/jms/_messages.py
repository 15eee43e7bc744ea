"""The message classes of the JMS-style API: :class:`Message` (headers and
properties only), :class:`TextMessage` and :class:`BytesMessage`
(:class:`~amqstomp.jms.MapMessage` is in ``_mapmessage.py``). Import them from
:mod:`amqstomp.jms` (or :mod:`amqstomp.jms.message`, which also maps them onto
STOMP frames).

A received message's properties and body are read-only until
:meth:`Message.clear_properties` / :meth:`Message.clear_body` (javax.jms.Message:
"When a message is received, its properties are in read-only mode", and its
body; a write raises :class:`MessageNotWriteableError`); its header fields
(``correlation_id``, ``destination``...) stay writable, as in JMS, and a send
sets them.

Licensed under the Apache License, Version 2.0.
"""
from operator import attrgetter
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

from .._core.dialect import ACTIVEMQ, BROKERS, TEXT_CONTENT_TYPE
from ._scheduling import check_scheduled_property, is_scheduling_property
from .constants import DEFAULT_PRIORITY, PERSISTENT
from .destination import Destination
from .exceptions import MessageFormatError, MessageNotWriteableError

__all__ = ["Message", "TextMessage", "BytesMessage", "RESERVED_HEADERS", "PropertyValue", "bind_acknowledge",
           "mark_received", "bytes_data", "not_writeable", "check_property", "stomp_body"]

#: Header names a property cannot have: amqstomp sets them itself (or they change
#: the frame's meaning on the broker).
RESERVED_HEADERS = frozenset((
    "destination", "receipt", "transaction", "content-length", "message-id", "subscription", "ack", "id",
    "redelivered", "expires", "priority", "persistent", "reply-to", "correlation-id", "type", "timestamp",
    "amq-msg-type", "JMSXGroupID", "JMSXGroupSeq", "transformation", "receipt-id", "content-type",
))

PropertyValue = Union[str, int, float, bool]


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
    # a received message's properties and body are read-only (see the module docstring)
    _properties_read_only = False
    _body_read_only = False

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
            MessageNotWriteableError: a received message, before :meth:`clear_properties`.
        """
        if self._properties_read_only:
            raise not_writeable(self, "properties")
        check_property(name, value)
        self.properties[name] = value

    def get_property(self, name: str, default: Any = None) -> Any:
        """An application property, or ``default``."""
        return self.properties.get(name, default)

    def property_names(self) -> Iterator[str]:
        return iter(list(self.properties))

    def clear_properties(self) -> None:
        """Remove every application property; a received message's properties
        become writable (JMS ``clearProperties``)."""
        self.properties.clear()
        self._properties_read_only = False

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
            MessageNotWriteableError: a received message, before :meth:`clear_properties`.
        """
        if self._properties_read_only:
            raise not_writeable(self, "properties")
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
        """Empty the body; a received message's body becomes writable (JMS ``clearBody``)."""
        self._body_read_only = False

    def _set_received(self) -> None:
        self._properties_read_only = self._body_read_only = True

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
        self._text = text if text.__class__ is str else _checked_text(text)

    @property
    def text(self) -> str:
        """The body.

        Raises:
            MessageNotWriteableError: (setting it) a received message, before :meth:`clear_body`.
        """
        return self._text

    @text.setter
    def text(self, text: str) -> None:
        if self._body_read_only:
            raise not_writeable(self, "body")
        self._text = text

    @property
    def body(self) -> str:
        return self._text

    def clear_body(self) -> None:
        self._text = ""
        self._body_read_only = False

    def _stomp_body(self, dialect: str) -> Tuple[bytes, Dict[str, Any]]:
        text = self._text
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
        text = self._text if len(self._text) <= 40 else self._text[:40] + "..."
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
            self._data = data
        else:
            try:
                self._data = bytes(memoryview(data))  # bytearray, memoryview, array...: not an int or a str
            except TypeError:
                raise TypeError("BytesMessage: data must be bytes-like, got %s; send text as a TextMessage"
                                % type(data).__name__) from None

    @property
    def data(self) -> bytes:
        """The body.

        Raises:
            MessageNotWriteableError: (setting it) a received message, before :meth:`clear_body`.
        """
        return self._data

    @data.setter
    def data(self, data: bytes) -> None:
        if self._body_read_only:
            raise not_writeable(self, "body")
        self._data = data

    @property
    def body(self) -> bytes:
        return self._data

    @property
    def body_length(self) -> int:
        return len(self._data)

    def clear_body(self) -> None:
        self._data = b""
        self._body_read_only = False

    def _stomp_body(self, dialect: str) -> Tuple[bytes, Dict[str, Any]]:
        data = self._data
        if data.__class__ is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise MessageFormatError("BytesMessage.data must be bytes, got %s" % type(data).__name__)
            data = bytes(data)
        return data, {"content-length": len(data)}

    def __repr__(self) -> str:
        return "<BytesMessage id=%s destination=%s %d bytes>" % (self.message_id, self.destination, len(self._data))


#: ``bind_acknowledge(message, callback)``: what ``message.acknowledge()`` calls (the
#: consumer sets it on each message it hands over; None: nothing).
bind_acknowledge = Message._set_acknowledge

#: ``mark_received(message)``: make a received message's properties and body read-only
#: (:func:`amqstomp.jms.message.message_from_frame` calls it on every message it makes).
mark_received = Message._set_received

#: ``bytes_data(message)``: a BytesMessage's body as stored, read without the ``data``
#: property (the send hot path's read: a C call, no Python frame).
bytes_data = attrgetter("_data")

#: ``stomp_body(message, dialect) -> (body, headers)``: the SEND body (bytes) of ``message``
#: and the headers that frame it (``content-length``: None leaves it out), for a broker of
#: ``dialect`` (:mod:`amqstomp._core.dialect`); MessageFormatError for a body that cannot
#: travel to this broker.
stomp_body = Message._send_body


def not_writeable(message: Message, part: str) -> MessageNotWriteableError:
    """The error for a write to the read-only ``part`` ("properties" or "body") of a
    received ``message`` (javax.jms.MessageNotWriteableException)."""
    what, clear = ("properties are", "clear_properties") if part == "properties" else ("body is", "clear_body")
    return MessageNotWriteableError("a received message's %s read-only (JMS: javax.jms.Message) until %s(): %r"
                                    % (what, clear, message))


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
