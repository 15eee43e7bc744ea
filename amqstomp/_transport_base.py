"""stomp.py 9.0's ``BaseTransport`` over amqstomp's driver: listeners, stomp.py's hooks, receipts.

:class:`BaseTransport` is the socket-agnostic half of
:class:`amqstomp.transport.Transport`, as stomp.py splits it
(``stomp/transport.py``): the listener registry, the frames written
(``send_frame``, stomp.py's ``transmit(frame)`` and ``send(bytes)``), receipts
by id, and stomp.py's transport API (``start``, ``stop``, ``set_connected``,
``set_receipt``, ``override_threading``, ``process_frame`` ...), on
:class:`amqstomp._io.driver.Driver` (the open socket, its threads, frames
encoded and written: what every API shares).
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

from ._core.frames import body_bytes, check_encoding
from ._engine.dispatch import PROTOCOL_LISTENER, ListenerDispatch
from ._io.driver import Driver, merged_headers
from ._io.link import Link
from ._io.owner import DEFAULT_CLOSE_TIMEOUT, DEFAULT_WAIT_TIMEOUT
from .codec import HEARTBEAT, Frame, FrameHead, encode_frame
from .exception import (
    ConfigurationError,
    ConnectFailedException,
    ConnectRefusedError,
    FrameEncodeError,
    NotConnectedException,
)
from . import _stomppy_log as stomppy_log
from . import _stomppy_wire as stomppy_wire
from ._replaceable import ReplaceableMethod, replaceable
from ._transport_hooks import ProcessFrameSink, ReceivingChannel, StompPyState
from .listener import Publisher
from .utils import is_eol_default
from ._io.timeouts import clamp_wait

__all__ = ["BaseTransport", "DEFAULT_WAIT_TIMEOUT"]

log = logging.getLogger("amqstomp.transport")

HostAndPort = Tuple[str, int]

class BaseTransport(Driver, Publisher):
    """stomp.py 9.0's ``BaseTransport`` (listeners, threads, frames out,
    receipts) over the driver, :class:`~amqstomp._io.driver.Driver`. Use
    :class:`amqstomp.transport.Transport`; this class alone has no brokers
    (``connector=None``: :meth:`attempt_connection` raises ConnectFailedException).

    Args:
        auto_decode (bool): listeners get bodies as ``str`` (decoded with
            ``encoding``; undecodable bytes become U+FFFD, never an exception:
            :class:`amqstomp.connection.BaseConnection`) instead of ``bytes``.
        encoding (str): text encoding of bodies; a name Python has no text codec
            for raises UnknownEncodingError here (:func:`amqstomp._core.frames.check_encoding`).
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
    #: stomp.py's DEBUG lines (sending frame / received frame / heart-beats) while its logger is enabled
    debug_log = stomppy_log
    _compat: StompPyState
    #: the listeners, and the dispatcher loop that calls them (the stomp.py API's EventSink)
    dispatch: ListenerDispatch

    def __init__(self, auto_decode: bool = True, encoding: str = "utf-8",
                 is_eol_fc: Callable[[bytes], bool] = is_eol_default, *, connector: Any = None,
                 heart_beat_receive_scale: float = 1.5, recv_bytes: int = 65536,
                 auto_content_length: bool = True, timeout: Optional[float] = None) -> None:
        check_encoding(encoding)  # here, not at the first send of a str (or, silently, of every body received)
        Driver.__init__(self, connector, ListenerDispatch(auto_decode, encoding), heart_beat_receive_scale,
                        recv_bytes, auto_content_length, encoding, timeout)
        self.auto_decode = auto_decode
        # stomp.py's state, in one attribute: the instance's dict stays small enough for
        # CPython to share its keys (attribute reads on the hot path stay specialised)
        self._compat = StompPyState(is_eol_fc)
        self._update_hooks()

    def _replaced(self, name: str) -> bool:
        method: ReplaceableMethod = vars(BaseTransport)[name]
        return method.replaced_on(self)

    def _update_hooks(self) -> None:
        """After ``transmit`` or ``send`` was replaced on this transport (or put back)."""
        sends = self._replaced("send")
        self.write_hook = self.send if sends else None  # stomp.py's path: transmit() -> send(bytes)
        self.hooked = sends or self._replaced("transmit")
        self._update_frame_hook()

    def _update_frame_hook(self) -> None:
        """Frames go through :meth:`_hooked_send_frame` only while something of
        stomp.py's wants to see them (a replaced ``transmit``/``send``, a
        listener's ``on_send``): the driver's ``send_frame`` alone otherwise."""
        # (a bare BaseTransport, no connector: stomp.py's stubs)
        self.frame_hook = self._hooked_send_frame if self.hooked or self.dispatch.on_send or self.connector is None \
            else None
        session = self.dispatch.get(PROTOCOL_LISTENER)  # its send() hands bodies on as given for on_send
        refresh = getattr(session, "_update_send_frame", None)
        if refresh is not None:
            refresh()

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
        self._update_frame_hook()

    def remove_listener(self, name: str) -> None:
        """Unregister the listener called ``name`` (KeyError when there is none)."""
        self.dispatch.remove(name)
        self._update_frame_hook()

    def get_listener(self, name: str) -> Any:
        """The listener registered as ``name``, or None."""
        return self.dispatch.get(name)

    @property
    def listeners(self) -> Dict[str, Any]:
        """A copy of the name -> listener map."""
        listeners: Dict[str, Any] = self.dispatch.as_dict()
        return listeners

    # ------------------------------------------------------------ writing

    def _hooked_send_frame(self, cmd: str, headers: Optional[Mapping[str, Any]], body: Any,
                           write_timeout: Optional[float], defer: bool, head: Optional[FrameHead], link_seq: int,
                           nowait: bool) -> "Optional[Future[Frame]]":
        """:meth:`send_frame` with stomp.py's hooks (the driver's
        :attr:`~amqstomp._io.driver.Driver.frame_hook` while there are some):
        listeners' ``on_send(frame)`` run first, on the calling thread, and may
        change the frame (they see a ``head``'s headers merged); with
        :attr:`hooked` the frame goes through :meth:`transmit` (stomp.py's path).
        A bare BaseTransport (no brokers, never a socket) does what stomp.py's
        does without one (:meth:`_write_unlinked`)."""
        if self._link is None and self.connector is None:
            return self._write_unlinked(cmd, headers, body, True)
        self.writable_link(cmd, link_seq, head)
        if self.hooked:
            return self._through_transmit(cmd, headers, body, head, write_timeout)
        on_send_fns = self.dispatch.on_send
        if on_send_fns:
            cmd, headers, body = self._on_send_frame(cmd, headers, body, head, on_send_fns)
            head = None
        return Driver.send_frame(self, cmd, headers, body, write_timeout, defer, head, link_seq, nowait, False)

    def _on_send_frame(self, cmd: str, headers: Optional[Mapping[str, Any]], body: Any, head: Optional[FrameHead],
                       fns: Tuple[Callable[[Frame], Any], ...]) -> Tuple[str, Dict[str, Any], Any]:
        """The frame the listeners' ``on_send`` made of this one: (cmd, headers, body).
        They see it as stomp.py's listeners do (:func:`amqstomp._stomppy_wire.shown_frame`:
        the body as given, header values escaped on STOMP 1.1/1.2 but for
        CONNECT/STOMP); a value they leave as shown is written as it was given,
        one they set as set (:func:`amqstomp._stomppy_wire.given_headers`)."""
        if head is not None:
            headers = merged_headers(head, headers)
        frame, shown = stomppy_wire.shown_frame(self._compat.start_version, cmd, headers, body)
        self._on_send(frame, fns)
        return frame.cmd, stomppy_wire.given_headers(frame.headers, shown), frame.body

    def _write_unlinked(self, cmd: str, headers: Optional[Mapping[str, Any]], body: Any,
                        on_send: bool) -> None:
        """A frame on a bare BaseTransport (no brokers, never a socket), as stomp.py's
        ``transmit`` does it without a socket: listeners' ``on_send``, then the frame
        encoded as stomp.py's ``convert_frame`` lays it out (headers sorted by name,
        values as they are, ``content-length`` only when given, set to the body's
        size) and handed to :meth:`send` (the stub: nothing; a subclass's: whatever it does)."""
        if self.hooked and on_send:
            self._through_transmit(cmd, headers, body, None, None)
            return
        frame = Frame(cmd, {k: v for k, v in (headers or {}).items() if v is not None}, b"" if body is None else body)
        if on_send:
            self._on_send(frame, self.dispatch.on_send)
        payload = body_bytes(frame.body, self.encoding)
        if "content-length" in frame.headers:
            frame.headers["content-length"] = str(len(payload))
        self.send(encode_frame(frame.cmd, dict(sorted(frame.headers.items())), payload, "1.0", False))

    def _on_send(self, frame: Frame, fns: Tuple[Callable[[Frame], Any], ...]) -> None:
        for on_send in fns:
            try:
                on_send(frame)
            except Exception:
                log.exception("listener on_send raised")

    def _through_transmit(self, cmd: str, headers: Optional[Mapping[str, Any]], body: Any,
                          head: Optional[FrameHead], write_timeout: Optional[float]) -> "Optional[Future[Frame]]":
        if head is not None:
            headers = merged_headers(head, headers)
        frame, shown = stomppy_wire.shown_frame(self._compat.start_version, cmd, headers, body, written=False)
        opts = self._compat.local
        opts.write_timeout = write_timeout
        opts.shown = shown  # what transmit() writes: the values given (stomppy_wire.given_headers)
        try:
            future: "Optional[Future[Frame]]" = self.transmit(frame)
        finally:
            opts.write_timeout = opts.shown = None
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
            if self._link is None and self.connector is None:
                return self._write_unlinked(frame.cmd, frame.headers, frame.body, False)
            local = self._compat.local
            headers = stomppy_wire.given_headers(frame.headers, getattr(local, "shown", None))
            local.shown = None  # (this frame's only)
            return self.send_frame(frame.cmd, headers, frame.body, getattr(local, "write_timeout", None), hooks=False)
        self.send(HEARTBEAT)
        return None

    @replaceable("_update_hooks")
    def send(self, encoded_frame: bytes) -> None:
        """stomp.py's ``send``: write encoded bytes on the open socket as they
        are (in order with every other write).

        A bare BaseTransport (no brokers: ``connector`` None) with no socket
        does nothing, as stomp.py's stub.

        Raises:
            NotConnectedException: no socket is open (a :class:`~amqstomp.transport.Transport`).
            ConnectionClosedException: the write failed (the link is then closed).
        """
        link = self._link
        if link is None or link.closed:
            if self.connector is None:
                return
            raise NotConnectedException("not connected (no open socket)")
        link.write(bytes(encoded_frame), getattr(self._compat.local, "write_timeout", None))

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
            if value == "DISCONNECT":  # the session is over for stomp.py's API (the core's usable)
                with link.state_lock:
                    link.proto.set_down(True)
                if receipt == self.disconnect_receipt:
                    self.disconnect_receipt = None
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
        (and :meth:`set_connected` did not say otherwise since): the core's
        :attr:`~amqstomp._core.state.ProtocolState.usable`."""
        link = self._link
        return link is not None and link.proto.usable

    def set_connected(self, connected: bool) -> None:
        """stomp.py's ``set_connected``: False makes :meth:`is_connected` False
        for the open socket (stomp.py's heart-beat listener calls it before
        ``disconnect_socket``); True undoes that (it cannot stand in for the
        broker's CONNECTED)."""
        link = self._link
        if link is not None:
            with link.state_lock:
                link.proto.set_down(not connected)

    def override_threading(self, create_thread_fc: Callable[[Callable[[], None]], Any]) -> None:
        """Create the connection's threads with ``create_thread_fc(callback)``,
        which returns a started thread running ``callback`` (stomp.py's
        contract; gevent and eventlet users pass their own). Used for every
        socket opened from now on: its reader, dispatcher and timer.

        Raises:
            TypeError: ``create_thread_fc`` is not callable.
            ConfigurationError: (a ValueError, from ``connect()``) it returned
                None or a ``threading.Thread`` it did not start (the connection's
                threads would never run: stomp.py waited for CONNECTED in vain);
                the socket is closed.
        """
        self.create_thread_fc = _checked_thread_factory(create_thread_fc)

    def open(self, version: str = "1.2", only: Optional[HostAndPort] = None,
             deadline: Optional[float] = None) -> HostAndPort:
        """:meth:`amqstomp._io.owner.LinkOwner.open`; a socket whose threads the
        :meth:`override_threading` factory did not start is closed again."""
        try:
            return Driver.open(self, version, only, deadline)
        except ThreadFactoryError as exc:
            self.close(reason=str(exc), silent=True)
            raise

    def attempt_connection(self) -> None:
        """Open a socket (:attr:`start_version` to begin with) and start its
        reader, dispatcher and timer threads, with the transport's connect
        attempts and back-off.

        A bare BaseTransport (no brokers) does nothing, as stomp.py's stub.

        Raises:
            ConnectFailedException: no broker accepted.
            StompException: a socket is open already.
        """
        if self.connector is not None:
            self.open(self._compat.start_version)

    def start(self) -> None:
        """stomp.py's ``start``: open a socket to the first broker that accepts
        (:meth:`attempt_connection`) unless one is open; listeners hear
        ``on_connecting``. No STOMP frame is sent: ``connect()`` sends CONNECT.

        Raises:
            ConnectFailedException: no broker accepted, or this transport has none
                (a bare BaseTransport: stomp.py's would start a reader that ends at once).
        """
        if self.connector is None:
            raise ConnectFailedException("this transport has no brokers to connect to (use amqstomp.transport."
                                         "Transport)")
        if not self.is_open():
            self.attempt_connection()

    def stop(self, timeout: Optional[float] = None) -> None:
        """stomp.py's ``stop``: wait for the socket's threads to end while it is
        connected (a DISCONNECT receipt, the broker, ``disconnect_socket``),
        bounded: ``timeout`` s, else :data:`amqstomp._io.owner.DEFAULT_CLOSE_TIMEOUT`;
        the socket is closed when that passes (logged)."""
        link = self._link
        if link is None:
            return
        wait_s = DEFAULT_CLOSE_TIMEOUT if timeout is None else clamp_wait(timeout)
        if not link.closed:
            link.wait_read_done(wait_s)
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
    def receive(self) -> Optional[bytes]:
        """stomp.py's ``receive``: one ``recv`` of up to ``recv_bytes`` on the
        open socket (b"" at its end). The reader thread calls it for every read
        when a subclass replaces it; otherwise it is not used (calling it beside
        the reader takes bytes from it).

        A bare BaseTransport (no brokers) with no socket returns None, as stomp.py's stub.

        Raises:
            NotConnectedException: no socket is open (a :class:`~amqstomp.transport.Transport`).
        """
        link = self._link
        if link is None or link.closed:
            if self.connector is None:
                return None
            raise NotConnectedException("not connected (no open socket)")
        channel = link.channel
        data: bytes = getattr(channel, "raw", channel).recv(self.recv_bytes)
        return data

    @replaceable("_update_hooks")
    def process_frame(self, f: Frame, frame_str: Optional[bytes]) -> None:
        """stomp.py's ``process_frame``: handle ``f`` as a frame received.
        With a socket open, as the reader does (receipts, flow control, the
        listeners on the dispatching thread); without one, the listeners are
        called here (``on_before_message`` and ``on_message`` for a MESSAGE).
        The reader calls it for every frame (``frame_str``: the frame's bytes
        without the NUL) when a subclass replaces it."""
        link = self._link
        if link is not None and not link.closed:
            local = self._compat.local  # not the reader: the application injects it (injecting())
            local.injecting = not link.events.reading_here()
            try:
                self.on_frame(link, f)
            finally:
                local.injecting = False
            return
        # the event the frame stands for (events.event_named): a MESSAGE to on_before_message then
        # on_message, a RECEIPT/ERROR/CONNECTED as its typed event (dispatch.LISTENER_CALLS)
        self.dispatch.notify(str(f.cmd).lower(), f)

    def injecting(self) -> bool:
        """True while the application hands a frame in with :meth:`process_frame`
        on this thread (a MESSAGE for a subscription never made is then delivered)."""
        return bool(getattr(self._compat.local, "injecting", False))

    # ------------------------------------------------------------ hooks of the link owner

    def wrap_channel(self, channel: Any) -> Any:
        return ReceivingChannel(channel, self) if self._replaced("receive") else channel

    def frame_sink(self) -> Any:
        if self._replaced("process_frame"):
            return ProcessFrameSink(self)
        return stomppy_log.LoggingFrameSink(self) if stomppy_log.enabled() else self


class ThreadFactoryError(ConfigurationError):
    """The :meth:`BaseTransport.override_threading` factory broke stomp.py's contract."""


def _checked_thread_factory(create_thread_fc: Any) -> Callable[[Callable[[], None]], Any]:
    """``create_thread_fc`` (of :meth:`BaseTransport.override_threading`), checked
    now (callable) and at each call (it returns the thread it started)."""
    if not callable(create_thread_fc):
        raise TypeError("override_threading needs a callable create_thread_fc(callback) that returns "
                        "the started thread, got %r" % (create_thread_fc,))

    def checked(callback: Callable[[], None]) -> Any:
        thread = create_thread_fc(callback)
        if thread is None or (isinstance(thread, threading.Thread) and thread.ident is None):
            raise ThreadFactoryError("override_threading: create_thread_fc %r returned %s; it must start a thread "
                                     "running the callback and return it (stomp.py's contract)"
                                     % (create_thread_fc, "None" if thread is None else "a thread not started"))
        return thread

    checked.__wrapped__ = create_thread_fc  # type: ignore[attr-defined]
    return checked
