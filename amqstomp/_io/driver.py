"""The threaded driver every API writes frames through: :class:`Driver`.

A :class:`Driver` is a :class:`~amqstomp._io.owner.LinkOwner` (one live socket
at a time, its reader, dispatcher and timer threads) that also encodes and
writes frames (:meth:`Driver.send_frame`: the socket rule of ``link_seq``, the
broker's limits, the receipt registered before the bytes go out, the nowait
and deferred writes) and posts typed events to the dispatcher
(:meth:`~amqstomp._io.owner.LinkOwner.post`; stomp.py's named ones: :meth:`Driver.notify`).
It knows no API: the stomp.py facade's
:class:`amqstomp._transport_base.BaseTransport` adds stomp.py's hooks on top of
it (listeners' ``on_send``, ``transmit``/``send`` replaced by a subclass), and
the JMS API's links (:mod:`amqstomp.jms.link`) use it as it is.
"""
import logging
from concurrent.futures import Future
from typing import Any, Callable, Dict, Mapping, Optional, Union

from .. import _observe
from .._core.events import LinkEvent, event_named
from .._core.state import LinkState
from ..codec import Frame, FrameHead, encode_frame
from ..constants import SECRET_HEADERS
from ..exception import ConnectionClosedException, FrameEncodeError, NotConnectedException, SendInDoubtError
from .connector import Connector
from .link import DEFER_FLUSH_BYTES, Link
from .writer import PeerStoppedReading
from .observer import EventSink
from .owner import LinkOwner

__all__ = ["Driver", "masked_headers", "merged_headers"]

log = logging.getLogger("amqstomp.transport")

_NO_HEADERS: Mapping[str, Any] = {}  # never written to
_CLOSING = LinkState.CLOSING
_DEBUG = logging.DEBUG
#: ``log.isEnabledFor``, bound once (logging caches its answer per level and clears the cache on
#: every level change: DEBUG turned on at run time shows the next frame)
_debug_enabled = log.isEnabledFor
#: that cache (``Logger._cache``, level -> bool; cleared in place by every ``setLevel``/``disable``):
#: a cached False skips the Python call of ``isEnabledFor`` per frame; anything else asks it
#: (an interpreter without the cache: ``{}``, always asked)
_found_cache: Any = getattr(log, "_cache", None)
_debug_cache: Dict[int, bool] = _found_cache if isinstance(_found_cache, dict) else {}


def merged_headers(head: FrameHead, headers: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """A frame head's headers followed by the frame's own (a name in both keeps
    the head's value: the receiver of the encoded frame keeps the first line,
    STOMP 1.2 "Repeated Header Entries")."""
    merged = dict(head.headers)
    if headers:
        for name, value in headers.items():
            merged.setdefault(name, value)
    return merged


def masked_headers(headers: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy of ``headers`` with the values of :data:`~amqstomp.constants.SECRET_HEADERS` masked
    (``********``), for a log line."""
    if any(name in headers for name in SECRET_HEADERS):
        return {k: ("********" if k in SECRET_HEADERS else v) for k, v in headers.items()}
    return dict(headers)


class Driver(LinkOwner):
    """The open socket of one connection, its threads, and the frames written on it.

    Args:
        connector (Connector | None): where and how sockets are made (None: none can be).
        dispatch (EventSink): who serves the dispatching thread
            (:class:`amqstomp._io.observer.EventSink`).
        heart_beat_receive_scale (float): grace factor of the receive check.
        recv_bytes (int): bytes asked for per ``recv``.
        auto_content_length (bool): add ``content-length`` to frames with a body
            (STOMP 1.2 "Header content-length").
        encoding (str): text encoding of ``str`` bodies.
        timeout (float | None): the default of blocking waits, seconds.

    Attributes:
        frame_hook: None, or ``fn(cmd, headers, body, write_timeout, defer,
            head, link_seq, nowait) -> receipt future`` that every
            :meth:`send_frame` goes through instead (an API's own hooks: the
            stomp.py facade's listeners' ``on_send`` and ``transmit``; it writes
            with ``hooks=False``).
        write_hook: None, or ``fn(bytes)`` that writes every encoded frame
            instead of the link (stomp.py's ``send(bytes)`` replaced by a subclass).
        disconnect_receipt (str | None): the receipt asked for by the last
            DISCONNECT written.
    """

    frame_hook: Optional[Callable[..., Any]]
    write_hook: Optional[Callable[[bytes], Any]]

    def __init__(self, connector: Optional[Connector], dispatch: EventSink, heart_beat_receive_scale: float = 1.5,
                 recv_bytes: int = 65536, auto_content_length: bool = True, encoding: str = "utf-8",
                 timeout: Optional[float] = None) -> None:
        LinkOwner.__init__(self, connector, dispatch, heart_beat_receive_scale, recv_bytes)  # type: ignore[arg-type]
        # instance attributes, not class defaults: CPython 3.11 specialises an instance's own
        # attribute read (send_frame reads both per frame), not a class attribute's
        self.frame_hook = None
        self.write_hook = None
        self.auto_content_length = auto_content_length
        self.encoding = encoding
        self.timeout = timeout
        if timeout is not None:  # the connection's own bound (stomp.py API: ``timeout``) bounds a stalled write too
            self.write_stall_s = timeout
        self.disconnect_receipt: Optional[str] = None

    def send_frame(self, cmd: str, headers: Optional[Mapping[str, Any]] = None,
                   body: Union[bytes, bytearray, memoryview, str, None] = b"",
                   write_timeout: Optional[float] = None, defer: bool = False,
                   head: Optional[FrameHead] = None, link_seq: int = 0,
                   nowait: bool = False, hooks: bool = True) -> "Optional[Future[Frame]]":
        """Encode and write one frame; thread-safe.

        Header values: ``None`` leaves the header out (an explicit
        ``content-length: None`` also turns off the automatic one, so ActiveMQ
        makes a TextMessage); ``True``/``False`` become ``"true"``/``"false"``
        (ActiveMQ reads ``persistent`` only as the exact string ``true``);
        anything else goes through ``str()``.

        A frame with a ``receipt`` header registers a receipt future before it
        is written (see :meth:`expect_receipt`).

        A write blocks while the broker does not read (ActiveMQ's producer flow
        control stops reading a blocked producer's socket). With
        ``write_timeout`` (seconds) the write itself is bounded: one that does
        not finish in that time closes the connection (used by ``disconnect``).

        Args:
            defer (bool): the frame may wait in the link's write buffer for up
                to :data:`amqstomp._io.link.DEFER_FLUSH_S` seconds (frames nobody
                waits on; one someone waits for is sent without it, which writes
                the buffer first). Frames still in the buffer when the socket is
                lost are lost with it, like those in the socket's own buffers.
            head (FrameHead | None): headers the frame starts with, before
                ``headers``, encoded once per STOMP version for all the frames
                that share it.
            link_seq (int): when not 0, the frame goes on socket number
                ``link_seq`` (:attr:`link_seq`) or nowhere: an ACK/NACK names a
                message that socket delivered (``Frame.link_seq``).
            nowait (bool): the calling thread must never block (the timer's
                batched ACKs): the frame is queued to be written before any
                later frame, now if the socket takes it, else by the timer
                without blocking (:meth:`amqstomp._io.link.Link.write_nowait`);
                no receipt may be asked for.
            hooks (bool): False: not through :attr:`frame_hook` nor the
                observer of :mod:`amqstomp._observe` (they write so themselves).

        A DISCONNECT (with a ``receipt`` or not, ``disconnect()``'s or one the
        application writes itself) is the socket's last frame: every frame asked
        for after it on that socket is refused (:meth:`amqstomp._io.writer.LinkWriter.write_last`),
        never written behind it (the broker ignores it) while its caller is told it
        was sent. On the open socket (no ``link_seq``) it ends the session: the
        socket is CLOSING from its write on. One pinned to a socket (``link_seq``:
        a failover layer's planned move, or a frame written through failover) leaves
        the socket's end to the failover loop: a frame refused there waits for the
        next socket (:meth:`amqstomp._engine.client.Client.write`) or raises.

        Returns:
            Future | None: the receipt future when the frame asks for one.

        Raises:
            NotConnectedException: no socket is open, socket ``link_seq`` is
                not the open one any more, or the open one is closing (its
                DISCONNECT was written).
            ConnectionClosedException: the write failed, or took longer than
                ``write_timeout`` (the link is then closed).
            FrameEncodeError: the frame cannot be written in this STOMP version,
                or (ActiveMQ) breaks one of the broker's limits.
        """
        if hooks and (_observe.observer is not None or self.frame_hook is not None):  # (one test when neither)
            watcher = _observe.observer
            if watcher is not None and (_observe.messages is not None or cmd not in _observe.MESSAGE_FRAMES):  # an instrumentation (amqstomp.otel): it writes the frame
                return watcher.send_frame(self, cmd, headers, body, write_timeout, defer, head, link_seq, nowait)
            hook = self.frame_hook
            if hook is not None:
                return hook(cmd, headers, body, write_timeout, defer, head, link_seq, nowait)  # type: ignore[no-any-return]
        link = self._link
        if link is None or link.closed or (link_seq and link_seq != link.seq) or \
                (head is not None and head.command != cmd):
            link = self.writable_link(cmd, link_seq, head)
        auto_length = self.auto_content_length
        clean: Mapping[str, Any]
        if headers.__class__ is dict:  # (the usual frame: one test)
            # the codec leaves None values out and writes bools as true/false itself
            clean = headers
            if "content-length" in clean and clean["content-length"] is None:
                auto_length = False
        elif headers:  # a Mapping of another kind: the codec takes dicts
            clean = {}
            if head is not None:
                headers = merged_headers(head, headers)
                head = None
            for key, value in headers.items():
                if value is None:
                    if key == "content-length":
                        auto_length = False
                    continue
                clean[key] = ("true" if value else "false") if value is True or value is False else value
        else:  # None or empty
            clean = _NO_HEADERS
        payload: Any = b"" if body is None else body
        if payload.__class__ is not bytes and isinstance(payload, str):
            payload = payload.encode(self.encoding)
        proto = link.proto
        version = proto.version
        head_lines = b""
        if head is not None:
            encodings = head.encodings
            head_lines = encodings[version] if version in encodings else head.encoded(version)
        if (cmd == "SEND" and "transformation" not in clean) or cmd == "ACK" or cmd == "NACK":
            # the most frequent frames, encoded here: ProtocolState.encode has no rule for an ACK, a NACK
            # or a SEND without a transformation but the broker's limits (one Python call less per frame)
            data = encode_frame(cmd, clean, payload, version, auto_length, head_lines)
            if len(data) > proto.check_above:  # the broker's limits (ActiveMQ), before anything is written
                proto.check_limits(cmd, data, len(payload))
        else:
            data = proto.encode(cmd, clean, payload, auto_length, head_lines)
        future = None
        receipt = clean["receipt"] if "receipt" in clean else None  # (no method call for the usual frame)
        if receipt is not None and cmd != "CONNECT" and cmd != "STOMP":
            future = self.expect_receipt(str(receipt))
            if cmd == "DISCONNECT":
                self.disconnect_receipt = str(receipt)
        if _debug_cache.get(_DEBUG) is not False and _debug_enabled(_DEBUG):
            shown = merged_headers(head, clean) if head else clean
            log.debug("sending %s %r (%d body bytes)", cmd, masked_headers(shown), len(payload))
            debug_log = self.debug_log
            if debug_log is not None and debug_log.enabled():  # an API's own DEBUG lines (stomp.py's)
                debug_log.log_sent(cmd, shown, payload, proto.version)
        write = self.write_hook
        try:
            if write is not None:
                write(data)
            elif nowait:  # (never a DISCONNECT: the timer's ACKs)
                link.write_nowait(data)
            elif defer and link.can_defer and len(data) < DEFER_FLUSH_BYTES:  # (never a DISCONNECT: SENDs)
                link.write_deferred(data, write_timeout)
            elif cmd != "DISCONNECT":
                link.write(data, write_timeout)
            else:  # the socket's last frame, receipt or none: nothing may follow it (STOMP 1.2 "DISCONNECT");
                # the session's end unless pinned to a socket (a planned move)
                link.write_last(data, write_timeout, not link_seq)
        except ConnectionClosedException as exc:
            stalled = isinstance(link.close_error, PeerStoppedReading)  # the link's end says why, no flag of its own
            if cmd == "SEND" and stalled and isinstance(exc.__cause__, OSError):
                raise stalled_send(link, clean, exc) from exc
            raise
        return future

    def writable_link(self, cmd: str, link_seq: int = 0, head: Optional[FrameHead] = None) -> Link:
        """The open link a ``cmd`` frame may be written on (see :meth:`send_frame`).

        Raises:
            NotConnectedException: no socket is open, or socket ``link_seq`` is
                not the open one any more.
            FrameEncodeError: ``head`` is another command's.
        """
        link = self._link
        if link is None or link.closed:
            raise NotConnectedException("not connected (no open socket)")
        if link_seq and link_seq != link.seq:
            raise NotConnectedException("%s not sent: socket %d was lost (socket %d is open now)"
                                        % (cmd, link_seq, link.seq))
        if head is not None and head.command != cmd:
            raise FrameEncodeError("a %s head for a %s frame" % (head.command, cmd))
        return link

    def closing(self) -> bool:
        """True while this side ends the open socket and it has not ended yet (the
        core's CLOSING: its DISCONNECT was written, or a close is under way): no
        frame is written on it any more."""
        link = self._link
        return link is not None and link.proto.link_state is _CLOSING

    def expect_connected(self, within_s: float, link_seq: int) -> None:
        """CONNECT went out on socket ``link_seq``: its CONNECTED is due within
        ``within_s`` seconds, else the socket ends as a loss
        (:meth:`amqstomp._io.link.Link.expect_connected`). A no-op when that socket
        is no longer the current one (a failover loop replaced it meanwhile).

        Raises:
            ValueError: ``within_s`` is not a finite number >= 0.
        """
        link = self._link
        if link is not None and link.seq == link_seq:
            link.expect_connected(within_s)

    def flush(self) -> None:
        """Write the frames waiting in the write buffer now (blocking while the
        broker does not read). Nothing to do when there are none or no socket.

        Raises:
            ConnectionClosedException: the write failed (the link is then closed).
        """
        link = self._link
        if link is not None and link.wbuf and not link.closed:
            link.write(b"")

    def announce(self, event: LinkEvent) -> None:
        """``event`` (a :mod:`amqstomp._core.events` class) handed to the listeners on
        the calling thread, now (not queued behind the dispatcher's work): for a
        callback whose promise is "before": :class:`~amqstomp._core.events.Disconnecting`
        (``on_disconnecting``) runs before DISCONNECT is written, so what a listener
        sends from it goes out first."""
        self.dispatch.call_event(event)

    def notify(self, frame_type: str, frame: Any = None) -> None:
        """stomp.py's ``notify``: the event stomp.py names ``frame_type`` (connecting,
        connected, message, receipt, error, heartbeat_timeout, disconnected,
        transport_interrupted, transport_resumed, usage_full, slow_consumer...:
        :func:`amqstomp._core.events.event_named`) queued on the dispatcher after
        everything already queued once a socket was opened, else handed to the
        dispatch here."""
        link = self._link
        if link is not None:
            link.events.put(event_named(frame_type, frame))
        else:
            self.dispatch.call(frame_type, frame)


def stalled_send(link: Link, headers: Mapping[str, Any], closed: ConnectionClosedException) -> SendInDoubtError:
    """The exception of a SEND whose write was under way when ``link`` was ended
    because the broker took none of its bytes (``Link.write_watch_tick`` or the
    heart-beat send tick): the frame was not written whole, and the frames written
    before it that still waited in the socket may or may not have reached the broker."""
    return SendInDoubtError("SEND to %s interrupted, %s: this frame was not written whole, and the frames written "
                            "before it that still waited in the socket (sends without a receipt) may or may not "
                            "have reached the broker" % (headers.get("destination"), closed))
