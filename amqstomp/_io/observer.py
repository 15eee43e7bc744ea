"""What a driver's threads report to the layers above it: typed interfaces.

* :class:`TransportObserver`, the seam between the I/O layer
  (:class:`~amqstomp._io.owner.LinkOwner` and its :class:`~amqstomp._io.link.Link`)
  and the engine (:class:`amqstomp._engine.client.Client` implements it and
  installs itself with ``set_observer``): MESSAGEs, their outcome, lost sockets.
  Until an observer is set, :class:`ListenersOnly` applies: every MESSAGE goes
  to the dispatcher and a lost socket is the end of the connection.
* :class:`EventSink`, who serves a link's dispatching thread: the link's typed
  events (:mod:`amqstomp._core.events`) in arrival order. The stomp.py facade's
  :class:`amqstomp._engine.dispatch.ListenerDispatch` is one (events to
  listener methods, by one table); :class:`ObserverLoop` is the other, which
  hands them to a typed :class:`LinkObserver` (a JMS link).
"""
import logging
from typing import Any, Callable, Dict, Optional, Protocol, Type

from .._core.events import (
    Connected,
    ConnectRefused,
    Disconnected,
    ErrorIn,
    HeartbeatTimeout,
    LinkEvent,
    SlowConsumer,
    TransportInterrupted,
    TransportResumed,
    UsageFull,
    UsageNotFull,
    event_named,
)
from ..codec import Frame
from .futures import resolve
from .handoff import PROMOTE
from .link import STOP

__all__ = ["TransportObserver", "ListenersOnly", "DISCONNECTED", "INTERRUPTED", "LAST_EVENTS", "EventSink", "serve_events",
           "LinkObserver", "ObserverLoop"]

log = logging.getLogger("amqstomp.transport")

#: :meth:`TransportObserver.on_link_lost` results: what the link's last event is
DISCONNECTED = "disconnected"
INTERRUPTED = "transport_interrupted"
#: those results -> the event class queued last (:mod:`amqstomp._core.events`)
LAST_EVENTS: Dict[str, Type[LinkEvent]] = {DISCONNECTED: Disconnected, INTERRUPTED: TransportInterrupted}


class TransportObserver(Protocol):
    """The calls a transport makes upward, and the thread each runs on. None may block."""

    def on_message(self, frame: Any) -> None:
        """Reader thread: a MESSAGE arrived (``frame.link_seq`` is its socket's
        number). Count it, buffer it, then hand it on with
        ``Transport.deliver_message``; ``Transport.pause_reading`` when a buffer is full."""

    def should_dispatch(self, frame: Any) -> bool:
        """Dispatcher thread, before the listeners: whether a queued MESSAGE is still
        to be delivered (False drops it, e.g. one of a lost socket the broker redelivers)."""

    def on_consumed(self, frame: Any) -> None:
        """Dispatcher thread: every listener's ``on_message`` returned for ``frame``
        (the application had it): count it consumed, decide its ACK."""

    def on_failed(self, frame: Any, reason: str) -> None:
        """Dispatcher thread: the application did not have ``frame``: a listener
        raised (``"error"``) or none was registered (``"no listener"``)."""

    def on_link_lost(self, link_seq: int, reason: str, error: Optional[BaseException]) -> Optional[str]:
        """Reader thread: socket ``link_seq`` ended without ``Transport.close``
        (EOF, a socket or protocol error, a heart-beat timeout). Returns what the
        listeners hear last: :data:`DISCONNECTED`, :data:`INTERRUPTED` (a failover
        layer took the loss over) or None (a failover attempt of its own failed)."""


class ListenersOnly:
    """The observer of a transport nobody else observes: MESSAGEs straight to the
    listeners, all of them dispatched, nothing counted, a loss ends the connection."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    def on_message(self, frame: Any) -> None:
        self.transport.deliver_message(frame)

    def should_dispatch(self, frame: Any) -> bool:
        return True

    def on_consumed(self, frame: Any) -> None:
        pass

    def on_failed(self, frame: Any, reason: str) -> None:
        pass

    def on_link_lost(self, link_seq: int, reason: str, error: Optional[BaseException]) -> Optional[str]:
        return DISCONNECTED


class EventSink(Protocol):
    """Who serves a link's dispatching thread (:class:`~amqstomp._io.owner.LinkOwner`'s ``dispatch``)."""

    #: RECEIPTs are queued for it (:class:`~amqstomp._core.events.ReceiptIn`) only when True
    wants_receipts: bool

    def run(self, link: Any, owner: Any) -> bool:
        """The dispatching thread of ``link``: take ``link.events`` in order
        (``link.events.next_item``) until :data:`amqstomp._io.link.STOP` (False) or
        :data:`amqstomp._io.handoff.PROMOTE` (True: this thread reads now): typed
        events, and MESSAGE frames by :meth:`deliver`; after
        :class:`~amqstomp._core.events.Connected`, resolve ``link.connect_future``
        with its frame."""

    def deliver(self, link: Any, owner: Any, frame: Any) -> None:
        """One MESSAGE to the application, on whichever thread dispatches now (the
        reading one too, :mod:`amqstomp._io.handoff`); its outcome to ``owner.observer``."""

    def call_event(self, event: Any) -> None:
        """``event`` with no socket to queue it on: handled on the calling thread."""

    def call(self, event: str, arg: Any = None) -> None:
        """stomp.py's named event (``notify`` without a socket) on the calling thread."""


class LinkObserver(Protocol):
    """A link's events as typed calls, on its dispatching thread, never on the reader
    (:class:`ObserverLoop` makes them). None may block for long: they delay the
    events behind them."""

    def on_error(self, frame: Any) -> None:
        """An ERROR frame after CONNECTED (STOMP 1.2 "ERROR")."""

    def on_connect_refused(self, frame: Any) -> None:
        """An ERROR answering CONNECT (the connect attempt raises ConnectRefusedError too)."""

    def on_heartbeat_timeout(self) -> None:
        """The peer was silent past the receive heart-beat bound; the link is closing."""

    def on_disconnected(self) -> None:
        """The link's last event: the socket ended and no failover took it over
        (``owner.ended_by_client()`` tells this side's end from a loss)."""

    def on_transport_interrupted(self) -> None:
        """The link's last event: a failover layer took the loss over."""

    def on_transport_resumed(self) -> None:
        """A failover layer's new socket is CONNECTED and replayed."""

    def on_usage(self, full: bool) -> None:
        """Producer flow control began (``full``) or ended."""

    def on_slow_consumer(self, info: Any) -> None:
        """A subscription's buffer stayed full (``info``: what it is)."""


def _calls(observer: LinkObserver) -> Dict[type, Callable[[Any], None]]:
    """The event class -> call table of ``observer`` (events not in it are not its business)."""
    return {
        ErrorIn: observer.on_error,
        ConnectRefused: observer.on_connect_refused,
        HeartbeatTimeout: lambda arg: observer.on_heartbeat_timeout(),
        Disconnected: lambda arg: observer.on_disconnected(),
        TransportInterrupted: lambda arg: observer.on_transport_interrupted(),
        TransportResumed: lambda arg: observer.on_transport_resumed(),
        UsageFull: lambda arg: observer.on_usage(True),
        UsageNotFull: lambda arg: observer.on_usage(False),
        SlowConsumer: observer.on_slow_consumer,
    }


class ObserverLoop:
    """The :class:`EventSink` of an API that observes its links with a typed
    :class:`LinkObserver` (the JMS API): each event to its call by one table,
    on the dispatching thread; what the observer raises is logged and the loop goes on."""

    wants_receipts = False

    def __init__(self, observer: LinkObserver) -> None:
        self.observer = observer
        self._calls = _calls(observer)

    def call_event(self, event: Any) -> None:
        fn = self._calls.get(event.__class__)
        if fn is None:
            return
        try:
            fn(event.arg)
        except BaseException:  # SystemExit too: it would end the dispatching thread silently
            log.exception("link observer %r raised on %r", self.observer, event)

    def call(self, event: str, arg: Any = None) -> None:
        item = event_named(event, arg)
        if isinstance(item, LinkEvent):
            self.call_event(item)

    def run(self, link: Any, owner: Any) -> bool:
        return serve_events(link, owner, self.call_event, self.deliver)

    def deliver(self, link: Any, owner: Any, frame: Any) -> None:
        log.debug("a MESSAGE reached a link observer's dispatcher: not delivered")
        try:
            owner.observer.on_failed(frame, "no listener")
        except BaseException:
            log.exception("on_failed failed")


def serve_events(link: Any, owner: Any, on_event: Callable[[Any], None],
                 deliver: Callable[[Any, Any, Any], None]) -> bool:
    """An :class:`EventSink`'s ``run``, for every API: ``link.events`` in arrival order
    (``next_item``: :mod:`amqstomp._io.handoff`) to ``on_event(event)`` for a typed event
    (after :class:`~amqstomp._core.events.Connected`, ``link.connect_future`` resolved with
    its frame) and to ``deliver(link, owner, frame)`` for a MESSAGE, until
    :data:`amqstomp._io.link.STOP` (False) or :data:`amqstomp._io.handoff.PROMOTE` (True:
    the calling thread reads now)."""
    events = link.events
    next_item = events.next_item
    frame_class = Frame
    item = next_item(False)
    while True:
        if item.__class__ is not frame_class:  # (a MESSAGE, the frame itself, is the usual item)
            if item is PROMOTE:
                return True
            if item is STOP:
                events.finish()
                return False
            if isinstance(item, LinkEvent):
                on_event(item)
                if item.__class__ is Connected:
                    resolve(link.connect_future, item.arg)
                item = next_item(True)
                continue
        deliver(link, owner, item)
        item = next_item(True)
