"""A link's two threads and their roles (:class:`LinkThreads`, the part of
:class:`amqstomp._io.owner.LinkOwner` that starts and runs them).

Every link has three threads, all ending with it: the timer (heart-beats, deferred-write
flushes, ack timers: :class:`~amqstomp._io.scheduler.Scheduler`) and two that share the
socket and the listeners (:mod:`amqstomp._io.handoff`): at any moment one *reads*
(bytes into the link's :class:`~amqstomp._core.state.ProtocolState`, MESSAGE frames to
the observer, receipts resolved, typed events queued) and runs a MESSAGE's listeners
itself when nothing is queued; the other *dispatches* the queued events in arrival
order and takes reading over when a listener on the reading thread runs long or waits
on a read, so a slow callback never stops reading or heart-beats. They start as the
reader (``amqstomp-reader-<connection>.<socket>``) and the dispatcher
(``amqstomp-dispatch-...``), names they keep whatever role they have later.
"""
import functools
import logging
import threading
from typing import Any, Callable, Optional

from .. import _observe
from .._core.events import ReceiverLoopCompleted
from .link import STOP, Link
from .observer import LAST_EVENTS

__all__ = ["LinkThreads"]

log = logging.getLogger("amqstomp.transport")


class LinkThreads:
    """Starts a link's threads and runs their roles; the owner supplies the attributes below."""

    create_thread_fc: Optional[Callable[[Callable[[], None]], Any]]
    dispatch: Any  # the API's EventSink (amqstomp._io.observer)
    observer: Any  # the TransportObserver
    recv_bytes: int
    always_session_async: bool

    def frame_sink(self) -> Any:  # pragma: no cover - the owner's
        raise NotImplementedError

    def start_threads(self, link: Link) -> None:
        """Start ``link``'s timer, dispatcher and reader (made by the ``override_threading``
        factory when one is set)."""
        link.deliver_here = functools.partial(self.dispatch.deliver, link, self)
        link.events.inline_ok = not self.always_session_async
        factory = self.create_thread_fc
        if factory is None:
            link.scheduler.start()
            link.dispatcher = threading.Thread(target=self._dispatch_loop, args=(link,),
                                               name="amqstomp-dispatch-%s" % link.name, daemon=True)
            link.reader = threading.Thread(target=self._read_loop, args=(link,),
                                           name="amqstomp-reader-%s" % link.name, daemon=True)
            link.dispatcher.start()
            link.reader.start()
        else:  # override_threading: the caller's factory makes (and starts) each thread
            link.scheduler.start(factory)
            self._factory_thread(factory, link, "dispatcher", self._dispatch_loop)
            self._factory_thread(factory, link, "reader", self._read_loop)

    @staticmethod
    def _factory_thread(factory: Callable[[Callable[[], None]], Any], link: Link, role: str,
                        loop: Callable[[Link], None]) -> None:
        """A link thread made by ``factory(callback)`` (stomp.py's
        ``override_threading`` contract: it returns the started thread). The
        link's ``role`` (the thread object its joins wait for) is whichever comes first:
        the thread the callback runs on or the factory's result."""
        def run() -> None:
            if getattr(link, role) is None:
                setattr(link, role, threading.current_thread())
            loop(link)

        thread = factory(run)
        if getattr(link, role) is None:
            setattr(link, role, thread)
        try:
            thread.name = "amqstomp-%s-%s" % ("dispatch" if role == "dispatcher" else role, link.name)
        except (AttributeError, TypeError):  # a thread-like object without a settable name
            pass

    def _read_loop(self, link: Link) -> None:
        """The thread that reads first (:mod:`amqstomp._io.handoff`: it may dispatch later)."""
        self._work(link, True)

    def _dispatch_loop(self, link: Link) -> None:
        """The thread that dispatches first (it may read later)."""
        self._work(link, False)

    def _work(self, link: Link, reading: bool) -> None:
        """One of the link's two threads: read until the other takes reading over, then
        dispatch until this one is to read again, and so on, until the socket ends (the
        reading role) or its last event was dispatched (the dispatching role)."""
        batch = None
        while True:
            if reading and not self._read(link, batch):
                return
            if not self.dispatch.run(link, self):
                return
            reading, batch = True, link.events.take_batch()

    def _read(self, link: Link, batch: Any) -> bool:
        """The reading role: :meth:`Link.read_loop` (``batch``: the frames the other thread
        read and left), then, when the socket ended, the end of the link: the observer
        decides what the listeners hear last. True when the other thread took reading over."""
        reason, error = "the reader ended", None
        ended = True
        try:
            result = link.read_loop(self.recv_bytes, self.frame_sink(), batch)
            if result is None:
                ended = False
            else:
                reason, error = result
        finally:
            if ended:
                self._link_ended(link, reason, error)
        return not ended

    def _link_ended(self, link: Link, reason: str, error: Optional[BaseException]) -> None:
        """The reading thread, after the socket ended: the observer decides what the listeners
        hear last (queued behind every event before them), then the dispatching thread's stop."""
        last: Optional[str] = "disconnected"
        proto = link.proto
        if not proto.by_client:
            try:
                last = self.observer.on_link_lost(link.seq, reason, error)
            except Exception:
                log.exception("on_link_lost failed")
        if _observe.observer is not None:
            if link.planned_end is not None:  # (its DISCONNECT made it the client's end)
                _observe.observer.connection_event(self, "moved", link.planned_end)
            elif not proto.by_client:
                _observe.observer.connection_event(self, "link_lost", reason)
        if last is not None and not proto.silent:  # the link's last events, unless its end is unreported
            link.post(ReceiverLoopCompleted())
            link.post(LAST_EVENTS[last]())
        link.events.put(STOP)
