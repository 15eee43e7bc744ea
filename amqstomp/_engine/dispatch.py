"""stomp.py listener fan-out: the registry of listeners and how each event reaches them.

One :class:`ListenerDispatch` per connection: the stomp.py facade's
:class:`~amqstomp._io.observer.EventSink`. The link's dispatching thread
(:meth:`ListenerDispatch.run`) takes its typed events
(:mod:`amqstomp._core.events`) in arrival order and maps each class ONCE, by
:data:`LISTENER_CALLS`, to the stomp.py listener method and its arguments; a
MESSAGE frame goes to ``on_before_message``/``on_message``
(:meth:`ListenerDispatch.notify_message`). A listener that raises is logged
and the others still run (a MESSAGE is then reported as not consumed:
``"error"``). Listener methods that are
:class:`~amqstomp.listener.ConnectionListener`'s own no-ops are never called
(none per MESSAGE costs nothing), and ``on_send`` of listeners runs on the
sending thread, before the frame is encoded.
"""
import logging
import threading
from typing import Any, Callable, Dict, Optional, Tuple, Type

from .. import _observe
from .._core.events import (
    Connected,
    Connecting,
    ConnectRefused,
    Disconnected,
    Disconnecting,
    ErrorIn,
    HeartbeatIn,
    HeartbeatTimeout,
    LinkEvent,
    Notice,
    ProtocolErrorIn,
    ReceiptIn,
    ReceiverLoopCompleted,
    SlowConsumer,
    TransportInterrupted,
    TransportResumed,
    UsageFull,
    UsageNotFull,
    event_named,
)
from .._io.link import Link
from .._io.observer import serve_events
from ..codec import Frame
from ..exception import RequiredArgumentError
from ..log import report_callback_error

__all__ = ["ListenerDispatch", "PROTOCOL_LISTENER", "LISTENER_CALLS"]

#: the name stomp.py registers a connection's protocol object under (``stomp/protocol.py``)
PROTOCOL_LISTENER = "protocol-listener"

#: events whose callback takes an argument (the frame, the (host, port), the info)
_WITH_ARG = frozenset(["connecting", "connected", "before_message", "message", "receipt", "error", "send",
                       "receiver_loop_completed", "slow_consumer"])
_DECODED = frozenset(["connected", "before_message", "message", "receipt", "error"])

log = logging.getLogger("amqstomp.transport")

# how a listener method is called for an event (stomp.py 9.0's ``BaseTransport.notify``)
_ARG = 0  # fn(event.arg)
_BODY = 1  # fn(frame), its body decoded first (auto_decode)
_REFUSED = 2  # as _BODY, ``on_connect_refused`` or, for a listener without one, ``on_error``
_NONE = 3  # fn(None)
_NO_ARG = 4  # fn()

#: event class -> (stomp.py's event name: the listener method is ``on_<name>``, how it is called)
LISTENER_CALLS: Dict[Type[LinkEvent], Tuple[str, int]] = {
    Connecting: ("connecting", _ARG),
    Connected: ("connected", _BODY),
    ReceiptIn: ("receipt", _BODY),
    ErrorIn: ("error", _BODY),
    ConnectRefused: ("connect_refused", _REFUSED),
    HeartbeatIn: ("heartbeat", _NO_ARG),
    HeartbeatTimeout: ("heartbeat_timeout", _NO_ARG),
    ProtocolErrorIn: ("protocol_error", _ARG),
    ReceiverLoopCompleted: ("receiver_loop_completed", _NONE),
    Disconnecting: ("disconnecting", _NO_ARG),
    Disconnected: ("disconnected", _NO_ARG),
    TransportInterrupted: ("transport_interrupted", _NO_ARG),
    TransportResumed: ("transport_resumed", _NO_ARG),
    UsageFull: ("usage_full", _NO_ARG),
    UsageNotFull: ("usage_not_full", _NO_ARG),
    SlowConsumer: ("slow_consumer", _ARG),
}
#: the application's own names (:class:`~amqstomp._core.events.Notice`, stomp.py's public ``notify(name)``)
#: whose callback takes the argument
_NOTICES_WITH_ARG = frozenset(["before_message", "send"])


class ListenerDispatch:
    """The listeners of one connection, called in the order of their names.

    Args:
        auto_decode (bool): MESSAGE/ERROR/RECEIPT/CONNECTED bodies reach the
            listeners as ``str`` (decoded with ``encoding``, undecodable bytes
            replaced) instead of ``bytes``.
        encoding (str): the text encoding of bodies.
    """

    def __init__(self, auto_decode: bool = True, encoding: str = "utf-8") -> None:
        self.auto_decode = auto_decode
        self.encoding = encoding
        self._lock = threading.Lock()
        self._listeners: Dict[str, Any] = {}
        #: the listeners, in the order of their names
        self.ordered: Tuple[Any, ...] = ()
        #: their own ``on_send`` methods (run by ``send_frame``); none: no Frame is built
        self.on_send: Tuple[Callable[[Frame], Any], ...] = ()
        #: per MESSAGE: their own ``on_before_message`` methods in listener order, then their
        #: own ``on_message`` methods in listener order (one tuple: one read per MESSAGE)
        self.message_calls: Tuple[Any, ...] = ()
        #: listeners that have a MESSAGE (0: it is reported ``"no listener"``)
        self.receivers = 0
        #: a listener has its own ``on_before_message``, which may change a MESSAGE's headers:
        #: ``Frame.original_headers`` is copied before it runs (else only when read)
        self.keeps_original = False
        #: a listener has its own ``on_receipt``: RECEIPTs go to the dispatcher
        self.wants_receipts = False

    def set(self, name: str, listener: Any) -> None:
        """Register ``listener`` under ``name`` (replacing one of that name).

        Raises:
            RequiredArgumentError: (a ValueError and AssertionError, stomp.py's
                ``assert``) ``listener`` is None.
        """
        if listener is None:
            raise RequiredArgumentError("listener must not be None")
        with self._lock:
            self._listeners[name] = listener
            self._rebuild()

    def remove(self, name: str) -> None:
        """Unregister the listener called ``name`` (KeyError when there is none)."""
        with self._lock:
            del self._listeners[name]
            self._rebuild()

    def get(self, name: str) -> Any:
        """The listener registered as ``name``, or None."""
        return self._listeners.get(name)

    def as_dict(self) -> Dict[str, Any]:
        """A copy of the name -> listener map."""
        with self._lock:
            return dict(self._listeners)

    def _rebuild(self) -> None:
        items = sorted(self._listeners.items(), key=lambda kv: str(kv[0]))
        ordered = tuple(listener for _, listener in items)
        self.ordered = ordered
        self.on_send = _own(ordered, "on_send")
        before_message = _own(ordered, "on_before_message")
        self.message_calls = before_message + _own(ordered, "on_message")
        self.keeps_original = bool(before_message)
        # a protocol object (stomp.py's "protocol-listener": the connection itself) has a
        # MESSAGE only when it has its own callback for it (a subclass's on_message)
        self.receivers = sum(1 for name, listener in items if name != PROTOCOL_LISTENER
                             or _overridden(listener, "on_message") or _overridden(listener, "on_before_message"))
        self.wants_receipts = any(_overridden(l, "on_receipt") is not None for l in ordered)

    def notify(self, event: str, arg: Any) -> Optional[str]:
        """stomp.py's named event ``event`` (:func:`~amqstomp._core.events.event_named`)
        to the listeners, as :meth:`notify_event` / :meth:`notify_message`."""
        item = event_named(event, arg)
        if isinstance(item, LinkEvent):
            self.notify_event(item)
            return None
        return self.notify_message(item)

    def notify_message(self, frame: Any) -> Optional[str]:
        """A MESSAGE to every listener's ``on_before_message`` then ``on_message``:
        None when they all had it, "error" when one raised, "no listener" when there
        was none. A listener that raises is logged per call; a failure of the
        dispatch itself (e.g. an unknown ``encoding`` for the body) is logged and
        counts as had (None)."""
        try:
            if self.auto_decode and isinstance(frame.body, (bytes, bytearray)):
                frame.body = bytes(frame.body).decode(self.encoding, errors="replace")
            if not self.receivers:
                return "no listener"
            failed = False
            if self.keeps_original:
                frame.original_headers  # the copy, before a listener changes the headers
            for fn in self.message_calls:  # each runs, whoever raised before it
                try:
                    fn(frame)
                except BaseException as exc:  # SystemExit too: it would end the dispatching thread silently
                    _listener_raised(fn, exc)
                    failed = True
            return "error" if failed else None
        except BaseException:
            log.exception("dispatching message failed")
            return None

    def notify_event(self, event: LinkEvent) -> None:
        """``event`` to the listeners, by :data:`LISTENER_CALLS` (a
        :class:`~amqstomp._core.events.Notice` by its name): ``on_<name>`` of each,
        in name order. A listener that raises is logged and the others still run."""
        spec = LISTENER_CALLS.get(event.__class__)
        if spec is not None:
            name, how = spec
        elif isinstance(event, Notice):
            name = event.name
            how = _ARG if name in _NOTICES_WITH_ARG else _NO_ARG
        else:
            log.warning("no stomp.py listener method for %r", event)
            return
        try:
            arg = event.arg
            method = "on_" + name
            listeners = self.ordered
            if how is _BODY or how is _REFUSED:
                if self.auto_decode and isinstance(arg.body, (bytes, bytearray)):
                    arg.body = bytes(arg.body).decode(self.encoding, errors="replace")
                for listener in listeners:
                    if how is _REFUSED and not hasattr(listener, method):
                        _call(listener, "on_error", arg)  # a listener of its own kind: an ERROR like the others
                    else:
                        _call(listener, method, arg)
            elif how is _ARG or how is _NONE:
                if how is _NONE:
                    arg = None
                for listener in listeners:
                    _call(listener, method, arg)
            else:
                for listener in listeners:
                    _call0(listener, method)
        except BaseException:
            log.exception("dispatching %s failed", name)

    call_event = notify_event

    def call(self, event: str, arg: Any = None) -> None:
        """Call ``on_<event>`` of every listener on this thread, in name order,
        with stomp.py's arguments (``BaseTransport.notify`` without a socket):
        none for heartbeat and disconnected-like events, ``arg`` otherwise. A
        listener that raises is logged and the others still run."""
        if event in _WITH_ARG:
            if event in _DECODED and self.auto_decode and isinstance(getattr(arg, "body", None), (bytes, bytearray)):
                arg.body = bytes(arg.body).decode(self.encoding, errors="replace")
            for listener in self.ordered:
                _call(listener, "on_" + event, arg)
        else:
            for listener in self.ordered:
                _call0(listener, "on_" + event)

    # ------------------------------------------------------------ the dispatching thread

    def run(self, link: Link, transport: Any) -> bool:
        """The dispatching thread of ``link``: every queued event to the listeners, in
        arrival order (a MESSAGE by :meth:`deliver`), until the link's last event
        (False) or until this thread is to read the socket (True: :mod:`amqstomp._io.handoff`).
        CONNECTED resolves the link's connect wait after ``on_connected`` ran."""
        return serve_events(link, transport, self.notify_event, self.deliver)

    def deliver(self, link: Link, transport: Any, frame: Frame) -> None:
        """One MESSAGE to the listeners, on whichever thread dispatches now: only where
        ``transport.observer`` (:class:`amqstomp._io.observer.TransportObserver`) says it
        still should, and its outcome reported back to it: consumed when every listener
        returned, failed otherwise."""
        observer = transport.observer
        try:
            if not observer.should_dispatch(frame):
                return
        except BaseException:
            log.exception("should_dispatch failed")
        watcher = _observe.messages  # an instrumentation: its process span around the listeners
        notify_message = self.notify_message
        outcome = notify_message(frame) if watcher is None else watcher.process(transport, frame, notify_message, frame)
        try:
            if outcome is None:
                observer.on_consumed(frame)
            else:
                observer.on_failed(frame, outcome)
        except BaseException:
            log.exception("consumed hook failed")


def _own(listeners: Tuple[Any, ...], name: str) -> Tuple[Any, ...]:
    """The listeners' own ``name`` methods, in order (no-ops left out)."""
    return tuple(fn for fn in (_overridden(listener, name) for listener in listeners) if fn is not None)


def _overridden(listener: Any, name: str) -> Any:
    """``listener.name`` as a bound method, or None when its function is marked
    ``amqstomp_noop`` (ConnectionListener's no-ops, a protocol's heart-beat callbacks).
    (Told by the bound method's function: the listener's ``__dict__`` is not
    looked at, which on CPython would slow every later attribute read of it.)"""
    fn = getattr(listener, name, None)
    if fn is None:
        return None
    func = getattr(fn, "__func__", None)
    if func is not None and getattr(fn, "__self__", None) is listener and (
            getattr(func, "amqstomp_noop", False)):
        return None
    return fn


def _listener_raised(fn: Any, exc: BaseException) -> None:
    """A listener's bound method (a MESSAGE's ``on_before_message``/``on_message``) raised
    ``exc``: logged, and told to an instrumentation's process span."""
    report_callback_error(log, "listener method %r raised", fn)
    watcher = _observe.messages
    if watcher is not None:
        watcher.listener_raised(exc)


def _call(listener: Any, name: str, arg: Any) -> bool:
    """Call ``listener.name(arg)``; False when it raised (logged)."""
    fn = getattr(listener, name, None)
    if fn is None:
        return True
    try:
        fn(arg)
        return True
    except BaseException:  # SystemExit too: it would end the dispatching thread silently
        report_callback_error(log, "listener %r raised in %s", listener, name)
        return False


def _call0(listener: Any, name: str) -> None:
    fn = getattr(listener, name, None)
    if fn is None:
        return
    try:
        fn()
    except BaseException:  # SystemExit too: it would end the dispatching thread silently
        report_callback_error(log, "listener %r raised in %s", listener, name)
