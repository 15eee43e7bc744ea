"""stomp.py 9.0's ``BaseTransport`` over amqstomp's link owner: listeners, frames out, receipts.

:class:`BaseTransport` is the socket-agnostic half of
:class:`amqstomp.transport.Transport`, as stomp.py splits it
(``stomp/transport.py``): the listener registry, the frames written
(``send_frame``, stomp.py's ``transmit(frame)`` and ``send(bytes)``), receipts
by id, and stomp.py's transport API (``start``, ``stop``, ``set_connected``,
``set_receipt``, ``override_threading``, ``process_frame`` ...), on
:class:`amqstomp._io.owner.LinkOwner` (the open socket and its threads).
:class:`~amqstomp.transport.Transport` adds the brokers, connect attempts and
TLS.

stomp.py's override points are honoured without costing the default path:
frames go through ``transmit`` / ``send`` and received bytes and frames
through ``receive`` / ``process_frame`` only when a subclass (or a mock set
on the instance: :class:`amqstomp._replaceable.ReplaceableMethod`) replaces
them (:attr:`BaseTransport.hooked`; ``receive``/``process_frame`` are looked
at when a socket opens).
"""
import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

from ._engine.dispatch import ListenerDispatch
from ._io.link import DEFER_FLUSH_BYTES, Link
from ._io.owner import DEFAULT_CLOSE_TIMEOUT, DEFAULT_WAIT_TIMEOUT, LinkOwner
from .codec import HEARTBEAT, Frame, FrameHead, encode_frame
from .exception import (
    ConnectFailedException,
    ConnectRefusedError,
    FrameEncodeError,
    NotConnectedException,
)
from ._replaceable import ReplaceableMethod, replaceable
from .listener import Publisher
from .utils import clamp_wait, is_eol_default

__all__ = ["BaseTransport", "DEFAULT_WAIT_TIMEOUT"]

log = logging.getLogger("amqstomp.transport")

HostAndPort = Tuple[str, int]

_NO_HEADERS: Mapping[str, Any] = {}  # never written to
_MASKED_HEADERS = ("passcode",)


def _merged(head: FrameHead, headers: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """A frame head's headers followed by the frame's own (a name in both keeps
    the head's value: the receiver of the encoded frame keeps the first line,
    STOMP 1.2 "Repeated Header Entries")."""
    merged = dict(head.headers)
    if headers:
        for name, value in headers.items():
            merged.setdefault(name, value)
    return merged


def _clean_headers(headers: Mapping[str, Any]) -> Dict[str, Any]:
    if any(name in headers for name in _MASKED_HEADERS):
        return {k: ("********" if k in _MASKED_HEADERS else v) for k, v in headers.items()}
    return dict(headers)


class _ReceivingChannel:
    """A link's channel whose ``recv`` is the transport's ``receive()`` (a
    subclass replaced it); everything else is the channel's."""

    def __init__(self, raw: Any, transport: "BaseTransport") -> None:
        self.raw = raw
        self._transport = transport

    def recv(self, size: int) -> bytes:
        data = self._transport.receive()
        return data if data else b""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class _ProcessFrameSink:
    """The reader's frame sink when ``process_frame`` was replaced: every frame
    received goes through it, with its bytes (without the NUL) as stomp.py passes them."""

    def __init__(self, transport: "BaseTransport") -> None:
        self.transport = transport

    def on_frame(self, link: Link, frame: Frame) -> None:
        transport = self.transport
        try:
            raw: Optional[bytes] = encode_frame(frame.cmd, frame.headers, frame.body, link.proto.version)[:-1]
        except (FrameEncodeError, ValueError):
            raw = None
        dispatch = transport.dispatch
        if dispatch.auto_decode and isinstance(frame.body, (bytes, bytearray)):
            frame.body = bytes(frame.body).decode(dispatch.encoding, errors="replace")  # as stomp.py's reader
        transport.process_frame(frame, raw)


class _StompPyState:
    """What only stomp.py's API keeps, in one object per transport."""

    __slots__ = ("is_eol_fc", "start_version", "receipt_marks", "disconnect_receipt", "down_seq", "local")

    def __init__(self, is_eol_fc: Callable[[bytes], bool]) -> None:
        self.is_eol_fc = is_eol_fc
        self.start_version = "1.2"  # the STOMP version start() opens a socket with
        self.receipt_marks: Dict[str, Any] = {}  # set_receipt()
        self.disconnect_receipt: Optional[str] = None  # the last DISCONNECT's receipt
        self.down_seq = 0  # set_connected(False) of this socket
        self.local = threading.local()  # .write_timeout: of a frame on its way through transmit()


class BaseTransport(LinkOwner, Publisher):
    """stomp.py 9.0's ``BaseTransport`` (listeners, threads, frames out,
    receipts) over a :class:`~amqstomp._io.owner.LinkOwner`. Use
    :class:`amqstomp.transport.Transport`; this class alone has no brokers
    (``connector=None``: :meth:`attempt_connection` raises ConnectFailedException).

    Args:
        auto_decode (bool): listeners get bodies as ``str`` (decoded with
            ``encoding``, undecodable bytes replaced) instead of ``bytes``.
        encoding (str): text encoding of bodies.
        is_eol_fc (callable): stomp.py's heart-beat test ``fc(bytes) -> bool``;
            kept as :attr:`is_eol_fc`. amqstomp's parser tells heart-beats by the
            STOMP version itself (LF; CRLF too on 1.2: stomp.py's
            ``StompConnection12.is_eol``), so it is not consulted.
        connector: keyword-only, as :class:`~amqstomp.transport.Transport`'s.
        heart_beat_receive_scale (float): keyword-only, as :class:`~amqstomp.transport.Transport`'s.
        recv_bytes (int): keyword-only, as :class:`~amqstomp.transport.Transport`'s.
        auto_content_length (bool): keyword-only, as :class:`~amqstomp.transport.Transport`'s.
        timeout (float | None): keyword-only, as :class:`~amqstomp.transport.Transport`'s.

    Attributes:
        hooked (bool): ``transmit`` or ``send`` is replaced (by a subclass or on
            the instance): every frame goes through ``transmit(frame)`` and its
            bytes through ``send(bytes)``, as in stomp.py.
        create_thread_fc: the thread factory of :meth:`override_threading`
            (None: amqstomp's named daemon threads).
    """

    hooked = False
    _send_replaced = False
    _compat: _StompPyState

    def __init__(self, auto_decode: bool = True, encoding: str = "utf-8",
                 is_eol_fc: Callable[[bytes], bool] = is_eol_default, *, connector: Any = None,
                 heart_beat_receive_scale: float = 1.5, recv_bytes: int = 65536,
                 auto_content_length: bool = True, timeout: Optional[float] = None) -> None:
        LinkOwner.__init__(self, connector, ListenerDispatch(auto_decode, encoding), heart_beat_receive_scale,
                           recv_bytes)
        self.auto_decode = auto_decode
        self.encoding = encoding
        self.auto_content_length = auto_content_length
        self.timeout = timeout
        # stomp.py's state, in one attribute: the instance's dict stays small enough for
        # CPython to share its keys (attribute reads on the hot path stay specialised)
        self._compat = _StompPyState(is_eol_fc)
        self._update_hooks()

    def _replaced(self, name: str) -> bool:
        method: ReplaceableMethod = vars(BaseTransport)[name]
        return method.replaced_on(self)

    def _update_hooks(self) -> None:
        """After ``transmit`` or ``send`` was replaced on this transport (or put back)."""
        self._send_replaced = sends = self._replaced("send")
        self.hooked = sends or self._replaced("transmit")

    # ------------------------------------------------------------ listeners

    def set_listener(self, name: str, listener: Any) -> None:
        """Register ``listener`` (a :class:`~amqstomp.listener.ConnectionListener`
        or any object with some ``on_*`` methods) under ``name``; listeners are
        called in the order of their names.

        Raises:
            RequiredArgumentError: (a ValueError and AssertionError, as stomp.py's
                ``assert``) ``listener`` is None.
        """
        self.dispatch.set(name, listener)

    def remove_listener(self, name: str) -> None:
        """Unregister the listener called ``name`` (KeyError when there is none)."""
        self.dispatch.remove(name)

    def get_listener(self, name: str) -> Any:
        """The listener registered as ``name``, or None."""
        return self.dispatch.get(name)

    @property
    def listeners(self) -> Dict[str, Any]:
        """A copy of the name -> listener map."""
        listeners: Dict[str, Any] = self.dispatch.as_dict()
        return listeners

    # ------------------------------------------------------------ writing

    def send_frame(self, cmd: str, headers: Optional[Mapping[str, Any]] = None,
                   body: Union[bytes, bytearray, memoryview, str, None] = b"",
                   write_timeout: Optional[float] = None, defer: bool = False,
                   head: Optional[FrameHead] = None, link_seq: int = 0,
                   on_send: bool = True, nowait: bool = False) -> "Optional[Future[Frame]]":
        """Encode and write one frame; thread-safe.

        Header values: ``None`` leaves the header out (an explicit
        ``content-length: None`` also turns off the automatic one, so ActiveMQ
        makes a TextMessage); ``True``/``False`` become ``"true"``/``"false"``
        (ActiveMQ reads ``persistent`` only as the exact string ``true``);
        anything else goes through ``str()``. Listeners' ``on_send(frame)`` run
        first, on the calling thread, and may change the frame; with
        :attr:`hooked` the frame goes through :meth:`transmit` (stomp.py's path).

        A frame with a ``receipt`` header registers a receipt future before it
        is written (see :meth:`expect_receipt`).

        A write blocks while the broker does not read (ActiveMQ's producer flow
        control stops reading a blocked producer's socket). With
        ``write_timeout`` (seconds) a frame that could not start being written
        in that time closes the connection instead (used by ``disconnect``).

        With ``defer=True`` the frame may wait in the link's write buffer for
        up to :data:`amqstomp._io.link.DEFER_FLUSH_S` seconds: for frames nobody
        waits on; a frame someone waits for (a receipt, a reply) is sent without
        ``defer``, which writes the buffer first. Frames still in the buffer
        when the socket is lost are lost with it, like those in the socket's
        own buffers.

        ``head`` (:class:`amqstomp.codec.FrameHead` of ``cmd``): headers the
        frame starts with, before ``headers``, encoded once per STOMP version
        for all the frames that share it; listeners' ``on_send`` see them merged.

        ``link_seq`` (int): when not 0, the frame goes on socket number
        ``link_seq`` (:attr:`link_seq`) or nowhere: an ACK/NACK names a message
        that socket delivered (``Frame.link_seq``).

        ``on_send`` (bool): False when the caller ran the listeners' ``on_send``
        and the replacements already (:meth:`transmit` does).

        ``nowait`` (bool): the calling thread must never block (the timer's
        batched ACKs): the frame is queued to be written before any later frame,
        now if the socket takes it, else by the timer without blocking
        (:meth:`amqstomp._io.link.Link.write_nowait`); no receipt may be asked for.

        Returns:
            Future | None: the receipt future when the frame asks for one.

        Raises:
            NotConnectedException: no socket is open, or socket ``link_seq`` is
                not the open one any more.
            ConnectionClosedException: the write failed, or waited past
                ``write_timeout`` (the link is then closed).
            FrameEncodeError: the frame cannot be written in this STOMP version.
        """
        link = self._link
        if link is None or link.closed:
            raise NotConnectedException("not connected (no open socket)")
        if link_seq and link_seq != link.seq:
            raise NotConnectedException("%s not sent: socket %d was lost (socket %d is open now)"
                                        % (cmd, link_seq, link.seq))
        if head is not None and head.command != cmd:
            raise FrameEncodeError("a %s head for a %s frame" % (head.command, cmd))
        if self.hooked and on_send:
            return self._through_transmit(cmd, headers, body, head, write_timeout)
        auto_length = self.auto_content_length
        clean: Mapping[str, Any]
        payload: Any
        on_send_fns = self.dispatch.on_send if on_send else ()
        if on_send_fns or (headers and type(headers) is not dict):
            copied: Dict[str, Any] = {}
            if head is not None:
                headers = _merged(head, headers)
                head = None
            if headers:
                for key, value in headers.items():
                    if value is None:
                        if key == "content-length":
                            auto_length = False
                        continue
                    if value is True or value is False:
                        value = "true" if value else "false"
                    copied[key] = value
            frame = Frame(cmd, copied, b"" if body is None else body)  # type: ignore[arg-type]
            self._on_send(frame, on_send_fns)
            cmd, clean, payload = frame.cmd, frame.headers, frame.body
        else:
            # the codec leaves None values out and writes bools as true/false itself
            clean = headers if headers else _NO_HEADERS
            if "content-length" in clean and clean["content-length"] is None:
                auto_length = False
            payload = b"" if body is None else body
        if payload.__class__ is not bytes and isinstance(payload, str):
            payload = payload.encode(self.encoding)
        proto = link.proto
        # the broker's limits (ActiveMQ) are checked here, before anything is written
        data = proto.encode(cmd, clean, payload, auto_length, None if head is None else head.encoded(proto.version))
        future = None
        receipt = clean.get("receipt")
        if receipt is not None and cmd != "CONNECT" and cmd != "STOMP":
            future = self.expect_receipt(str(receipt))
            if cmd == "DISCONNECT":
                self._compat.disconnect_receipt = str(receipt)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("sending %s %r (%d body bytes)", cmd, _clean_headers(_merged(head, clean) if head else clean),
                      len(payload))
        if self._send_replaced:
            self.send(data)  # stomp.py's path: transmit() -> send(bytes)
        elif nowait:
            link.write_nowait(data)
        elif defer and link.can_defer and len(data) < DEFER_FLUSH_BYTES:
            link.write_deferred(data, write_timeout)
        else:
            link.write(data, write_timeout)
        return future

    def _on_send(self, frame: Frame, fns: Tuple[Callable[[Frame], Any], ...]) -> None:
        for on_send in fns:
            try:
                on_send(frame)
            except Exception:
                log.exception("listener on_send raised")

    def _through_transmit(self, cmd: str, headers: Optional[Mapping[str, Any]], body: Any,
                          head: Optional[FrameHead], write_timeout: Optional[float]) -> "Optional[Future[Frame]]":
        frame_headers = _merged(head, headers) if head is not None else dict(headers or {})
        frame = Frame(cmd, frame_headers, b"" if body is None else body)
        opts = self._compat.local
        opts.write_timeout = write_timeout
        try:
            future: "Optional[Future[Frame]]" = self.transmit(frame)
        finally:
            opts.write_timeout = None
        return future if isinstance(future, Future) else self.receipt_future(str(frame.headers.get("receipt")))

    @replaceable("_update_hooks")
    def transmit(self, frame: Frame) -> "Optional[Future[Frame]]":
        """stomp.py's ``transmit``: listeners' ``on_send(frame)``, then ``frame``
        encoded (STOMP version of the socket, the broker's limits checked) and
        written with :meth:`send`. ``Frame(None, {}, None)`` (stomp.py's
        heart-beat) writes an EOL. A subclass that replaces it sees every frame
        the connection writes (``send_frame`` routes through it).

        Returns:
            Future | None: the receipt future when the frame asks for one.

        Raises:
            NotConnectedException: no socket is open.
            FrameEncodeError: the frame cannot be written in this STOMP version.
        """
        self._on_send(frame, self.dispatch.on_send)
        if frame.cmd:
            return self.send_frame(frame.cmd, frame.headers, frame.body,
                                   getattr(self._compat.local, "write_timeout", None), on_send=False)
        self.send(HEARTBEAT)
        return None

    @replaceable("_update_hooks")
    def send(self, encoded_frame: bytes) -> None:
        """stomp.py's ``send``: write encoded bytes on the open socket as they
        are (in order with every other write).

        Raises:
            NotConnectedException: no socket is open.
            ConnectionClosedException: the write failed (the link is then closed).
        """
        link = self._link
        if link is None or link.closed:
            raise NotConnectedException("not connected (no open socket)")
        link.write(bytes(encoded_frame), getattr(self._compat.local, "write_timeout", None))

    def flush(self) -> None:
        """Write the frames waiting in the write buffer now (blocking while the
        broker does not read). Nothing to do when there are none or no socket.

        Raises:
            ConnectionClosedException: the write failed (the link is then closed).
        """
        link = self._link
        if link is not None and link.wbuf and not link.closed:
            link.write(b"")

    def shutdown_queue(self) -> None:
        """stomp.py's ``shutdown_queue`` (its TLS send queue): write what waits
        in the write buffer now (:meth:`flush`)."""
        self.flush()

    def wait_for_connection(self, timeout: Optional[float] = None) -> None:
        """stomp.py's ``wait_for_connection``: :meth:`wait_connected` (bounded:
        ``timeout`` s, else ``self.timeout`` or :data:`DEFAULT_WAIT_TIMEOUT`).

        Raises:
            ConnectFailedException: no CONNECTED (an ERROR, the socket ended, or the time ran out).
        """
        self.wait_connected(timeout)

    def set_receipt(self, receipt_id: str, value: Any) -> None:
        """stomp.py's receipt marks: remember ``value`` for ``receipt_id`` (a
        false value forgets it). A RECEIPT for a receipt marked ``"DISCONNECT"``
        counts the connection as gone (:meth:`is_connected` False), and when it
        answers the last DISCONNECT frame sent, the socket is closed, as stomp.py
        does. (amqstomp's own ``disconnect()`` waits for its receipt instead.)"""
        marks = self._compat.receipt_marks
        with self._lock:
            if value:
                marks[receipt_id] = value
            else:
                marks.pop(receipt_id, None)

    def control_frame_seen(self, link: Link, frame: Frame) -> None:
        """Reader thread, a frame other than MESSAGE handled: a marked receipt (:meth:`set_receipt`)."""
        state = self._compat
        if state.receipt_marks and frame.cmd == "RECEIPT":
            receipt = frame.headers.get("receipt-id")
            with self._lock:
                value = state.receipt_marks.pop(receipt, None) if receipt is not None else None
            if value == "DISCONNECT":
                state.down_seq = link.seq
                if receipt == state.disconnect_receipt:
                    state.disconnect_receipt = None
                    self.close(None, reason="the receipt of DISCONNECT came")

    # ------------------------------------------------------------ stomp.py's transport API

    @property
    def is_eol_fc(self) -> Callable[[bytes], bool]:
        """stomp.py's heart-beat test given to the constructor (kept, not consulted)."""
        return self._compat.is_eol_fc

    @property
    def start_version(self) -> str:
        """The STOMP version :meth:`start` opens a socket with ("1.2"; a protocol sets its own)."""
        return self._compat.start_version

    @start_version.setter
    def start_version(self, version: str) -> None:
        self._compat.start_version = version

    @property
    def connected(self) -> bool:
        """stomp.py's ``connected`` attribute: :meth:`is_connected`."""
        return self.is_connected()

    @property
    def running(self) -> bool:
        """stomp.py's ``running``: True while a socket is open."""
        return self.is_open()

    @property
    def connection_error(self) -> bool:
        """stomp.py's ``connection_error``: the broker answered this socket's CONNECT with ERROR."""
        link = self._link
        future = link.connect_future if link is not None else None
        return future is not None and future.done() and not future.cancelled() and \
            isinstance(future.exception(), ConnectRefusedError)

    @property
    def socket(self) -> Any:
        """The open socket (``socket.socket`` or ``ssl.SSLSocket``), or None."""
        link = self._link
        return getattr(link.channel, "sock", None) if link is not None and not link.closed else None

    def is_connected(self) -> bool:
        """True while a socket is open and the broker's CONNECTED has arrived
        (and :meth:`set_connected` did not say otherwise since)."""
        return LinkOwner.is_connected(self) and self.link_seq != self._compat.down_seq

    def set_connected(self, connected: bool) -> None:
        """stomp.py's ``set_connected``: False makes :meth:`is_connected` False
        for the open socket (stomp.py's heart-beat listener calls it before
        ``disconnect_socket``); True undoes that (it cannot stand in for the
        broker's CONNECTED)."""
        self._compat.down_seq = 0 if connected else self.link_seq

    def override_threading(self, create_thread_fc: Callable[[Callable[[], None]], Any]) -> None:
        """Create the connection's threads with ``create_thread_fc(callback)``,
        which returns a started thread running ``callback`` (stomp.py's
        contract; gevent and eventlet users pass their own). Used for every
        socket opened from now on: its reader, dispatcher and timer."""
        self.create_thread_fc = create_thread_fc

    def start(self) -> None:
        """stomp.py's ``start``: open a socket to the first broker that accepts
        (:meth:`attempt_connection`) unless one is open; listeners hear
        ``on_connecting``. No STOMP frame is sent: ``connect()`` sends CONNECT."""
        if not self.is_open():
            self.attempt_connection()

    def attempt_connection(self) -> None:
        """Open a socket (:attr:`start_version` to begin with) and start its
        reader, dispatcher and timer threads, with the transport's connect
        attempts and back-off.

        Raises:
            ConnectFailedException: no broker accepted (or this transport has none).
            StompException: a socket is open already.
        """
        if self.connector is None:
            raise ConnectFailedException("this transport has no brokers to connect to (use amqstomp.transport."
                                         "Transport)")
        self.open(self._compat.start_version)

    def stop(self, timeout: Optional[float] = None) -> None:
        """stomp.py's ``stop``: wait for the socket's threads to end while it is
        connected (a DISCONNECT receipt, the broker, ``disconnect_socket``),
        bounded: ``timeout`` s, else :data:`amqstomp._io.owner.DEFAULT_CLOSE_TIMEOUT`;
        the socket is closed when that passes (logged)."""
        link = self._link
        if link is None:
            return
        wait_s = DEFAULT_CLOSE_TIMEOUT if timeout is None else clamp_wait(timeout)
        reader = link.reader
        if reader is not None and reader is not threading.current_thread() and not link.closed:
            join = getattr(reader, "join", None)
            if join is not None:
                join(wait_s)
        if not link.closed:
            log.warning("stop(): the socket to %s:%s was still open after %.3g s: closing it",
                        link.host_and_port[0], link.host_and_port[1], wait_s)
            self.close(wait_s, reason="stop()")

    def disconnect_socket(self) -> None:
        """stomp.py's ``disconnect_socket``: close the socket (no DISCONNECT
        frame) and wait (bounded) for its threads; listeners hear
        ``on_disconnected``. Safe from a listener and when not connected."""
        self.close(reason="disconnect_socket()")

    def cleanup(self) -> None:
        """stomp.py's ``cleanup``: close the socket without waiting for its threads."""
        self.close(None, reason="cleanup()")

    @replaceable("_update_hooks")
    def receive(self) -> bytes:
        """stomp.py's ``receive``: one ``recv`` of up to ``recv_bytes`` on the
        open socket (b"" at its end). The reader thread calls it for every read
        when a subclass replaces it; otherwise it is not used (calling it beside
        the reader takes bytes from it).

        Raises:
            NotConnectedException: no socket is open.
        """
        link = self._link
        if link is None or link.closed:
            raise NotConnectedException("not connected (no open socket)")
        channel = link.channel
        data: bytes = getattr(channel, "raw", channel).recv(self.recv_bytes)
        return data

    @replaceable("_update_hooks")
    def process_frame(self, f: Frame, frame_str: Optional[bytes]) -> None:
        """stomp.py's ``process_frame``: handle ``f`` as a frame received.
        With a socket open, as the reader does (receipts, flow control, the
        listeners on the dispatcher thread); without one, the listeners are
        called here (``on_before_message`` and ``on_message`` for a MESSAGE).
        The reader calls it for every frame (``frame_str``: the frame's bytes
        without the NUL) when a subclass replaces it."""
        link = self._link
        if link is not None and not link.closed:
            local = self._compat.local  # not the reader: the application injects it (injecting())
            local.injecting = threading.current_thread() is not link.reader
            try:
                self.on_frame(link, f)
            finally:
                local.injecting = False
            return
        if f.cmd == "MESSAGE":
            self.dispatch.call("before_message", f)
        self.dispatch.call(str(f.cmd).lower(), f)

    def injecting(self) -> bool:
        """True while the application hands a frame in with :meth:`process_frame`
        on this thread (a MESSAGE for a subscription never made is then delivered)."""
        return bool(getattr(self._compat.local, "injecting", False))

    def notify(self, frame_type: str, frame: Any = None) -> None:
        """Listener callback ``on_<frame_type>`` (stomp.py's ``notify``): queued on
        the dispatcher after everything already queued once a socket was opened,
        else called here. ``frame_type`` is one of connecting, connected,
        before_message, message, receipt, error, heartbeat, heartbeat_timeout,
        disconnecting, receiver_loop_completed, disconnected,
        transport_interrupted, transport_resumed."""
        link = self._link
        if link is not None:
            link.post(frame_type, frame)
        else:
            self.dispatch.call(frame_type, frame)

    # ------------------------------------------------------------ hooks of the link owner

    def wrap_channel(self, channel: Any) -> Any:
        return _ReceivingChannel(channel, self) if self._replaced("receive") else channel

    def frame_sink(self) -> Any:
        return _ProcessFrameSink(self) if self._replaced("process_frame") else self
