"""What a link reports upward, as typed events (the h11 ``_events`` model), and how a link ended.

A driver (:mod:`amqstomp._io`) queues one of these per event for the link's
dispatching thread (:meth:`amqstomp._io.link.Link.post`); an API maps each
class once to what its users see: the stomp.py facade to listener methods
(:data:`amqstomp._engine.dispatch.LISTENER_CALLS`), the JMS API to the
typed :class:`amqstomp._io.observer.LinkObserver` calls. A MESSAGE frame is
its own event (the hot path queues the :class:`~amqstomp.codec.Frame` as
the parser made it: no wrapper per message).

Each event is a ``__slots__`` class with one field, ``arg`` (the frame, the
``(host, port)``, the exception or the info; None when there is none): cheap
to make, and one read for the dispatcher. Names follow STOMP 1.2's words
("RECEIPT", "ERROR", "Heart-beating", "Connecting", "DISCONNECT").

:class:`LinkEnd` is how one socket ended (why, the error, whether this side
asked for it): :attr:`amqstomp._core.state.ProtocolState.end` holds it once
the socket is gone.
"""
from typing import Any, Dict, Optional, Type

__all__ = ["LinkEvent", "Connecting", "Connected", "ReceiptIn", "ErrorIn", "ConnectRefused", "HeartbeatIn",
           "HeartbeatTimeout", "ProtocolErrorIn", "ReceiverLoopCompleted", "Disconnecting", "Disconnected",
           "TransportInterrupted", "TransportResumed", "UsageFull", "UsageNotFull", "SlowConsumer", "Notice",
           "LinkEnd", "event_named", "EVENT_NAMES"]


class LinkEvent:
    """One event of a link, for its dispatching thread. ``arg``: its payload or None."""

    __slots__ = ("arg",)

    def __init__(self, arg: Any = None) -> None:
        self.arg = arg

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.arg)


class Connecting(LinkEvent):
    """A socket opened (``arg``: its ``(host, port)``); always a link's first event."""

    __slots__ = ()


class Connected(LinkEvent):
    """The broker's CONNECTED frame (``arg``) came (STOMP 1.2 "Connecting")."""

    __slots__ = ()


class ReceiptIn(LinkEvent):
    """A RECEIPT frame (``arg``) an API's user asked for (STOMP 1.2 "RECEIPT")."""

    __slots__ = ()


class ErrorIn(LinkEvent):
    """An ERROR frame (``arg``) after CONNECTED (STOMP 1.2 "ERROR")."""

    __slots__ = ()


class ConnectRefused(LinkEvent):
    """An ERROR frame (``arg``) answering CONNECT: the broker refused the connection."""

    __slots__ = ()


class HeartbeatIn(LinkEvent):
    """A heart-beat (an EOL between frames) was read (STOMP 1.2 "Heart-beating")."""

    __slots__ = ()


class HeartbeatTimeout(LinkEvent):
    """Nothing came from the peer within the negotiated receive interval and its
    grace (STOMP 1.2 "Heart-beating"); the link is being closed."""

    __slots__ = ()


class ProtocolErrorIn(LinkEvent):
    """The stream is not STOMP (``arg``: the :class:`~amqstomp.exception.StompProtocolError`)."""

    __slots__ = ()


class ReceiverLoopCompleted(LinkEvent):
    """The reader of the link ended (stomp.py's ``on_receiver_loop_completed``)."""

    __slots__ = ()


class Disconnecting(LinkEvent):
    """The application is ending the session: handed to the listeners on its own
    thread before DISCONNECT is written (stomp.py's ``on_disconnecting``), so what
    a listener sends from it goes out first. Never queued on a link."""

    __slots__ = ()


class Disconnected(LinkEvent):
    """The link's last event when the connection ended (no failover took it over)."""

    __slots__ = ()


class TransportInterrupted(LinkEvent):
    """The link's last event when a failover layer took the loss over."""

    __slots__ = ()


class TransportResumed(LinkEvent):
    """A failover layer's new socket is CONNECTED and its subscriptions are replayed."""

    __slots__ = ()


class UsageFull(LinkEvent):
    """Producer flow control began (a SEND's RECEIPT later than the usage-full bound)."""

    __slots__ = ()


class UsageNotFull(LinkEvent):
    """Producer flow control ended."""

    __slots__ = ()


class SlowConsumer(LinkEvent):
    """A subscription's buffer stayed full (``arg``: a dict describing it)."""

    __slots__ = ()


class Notice(LinkEvent):
    """An event the application named itself, with no class of its own: stomp.py's
    public ``Transport.notify(frame_type, frame)`` with a name not in :data:`EVENT_NAMES`
    (``before_message``, ``send``, its own): ``name``, ``arg``. Made by
    :func:`event_named` only; the library's own events are the classes above
    (``tests/test_structure.py`` checks no other module makes one)."""

    __slots__ = ("name",)

    def __init__(self, name: str, arg: Any = None) -> None:
        LinkEvent.__init__(self, arg)
        self.name = name

    def __repr__(self) -> str:
        return "Notice(%r, %r)" % (self.name, self.arg)


#: stomp.py's event names (``notify(frame_type)``, ``on_<frame_type>``) -> event class
EVENT_NAMES: Dict[str, Type[LinkEvent]] = {
    "connecting": Connecting,
    "connected": Connected,
    "receipt": ReceiptIn,
    "error": ErrorIn,
    "connect_refused": ConnectRefused,
    "heartbeat": HeartbeatIn,
    "heartbeat_timeout": HeartbeatTimeout,
    "protocol_error": ProtocolErrorIn,
    "receiver_loop_completed": ReceiverLoopCompleted,
    "disconnecting": Disconnecting,
    "disconnected": Disconnected,
    "transport_interrupted": TransportInterrupted,
    "transport_resumed": TransportResumed,
    "usage_full": UsageFull,
    "usage_not_full": UsageNotFull,
    "slow_consumer": SlowConsumer,
}


def event_named(name: str, arg: Any = None) -> Any:
    """The event stomp.py's name ``name`` stands for, with ``arg``: a MESSAGE
    (``"message"``) is its frame ``arg`` itself; a name with no class of its own
    is a :class:`Notice`."""
    if name == "message":
        return arg
    cls = EVENT_NAMES.get(name)
    return Notice(name, arg) if cls is None else cls(arg)


class LinkEnd:
    """How one socket ended: ``reason`` (text), ``error`` (the exception, or None)
    and ``by_client`` (this side asked to close it: no loss, no failover). Always
    true in a test (a link's ``closed``)."""

    __slots__ = ("reason", "error", "by_client")

    def __init__(self, reason: str, error: Optional[BaseException], by_client: bool) -> None:
        self.reason = reason
        self.error = error
        self.by_client = by_client

    def __repr__(self) -> str:
        return "LinkEnd(%r, %r, by_client=%r)" % (self.reason, self.error, self.by_client)
