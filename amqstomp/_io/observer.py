"""What a transport's threads report to the layer above it: one typed interface.

:class:`TransportObserver` is the single seam between the I/O layer
(:class:`amqstomp.transport.Transport` and its :class:`~amqstomp._io.link.Link`)
and the engine (:class:`amqstomp._engine.client.Client` implements it and
installs itself with :meth:`Transport.set_observer`). Until an observer is set,
:class:`ListenersOnly` applies: every MESSAGE goes to the listeners and a lost
socket is the end of the connection.
"""
from typing import Any, Optional, Protocol

__all__ = ["TransportObserver", "ListenersOnly", "DISCONNECTED", "INTERRUPTED"]

#: :meth:`TransportObserver.on_link_lost` results: what the listeners hear last
DISCONNECTED = "disconnected"
INTERRUPTED = "transport_interrupted"


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
