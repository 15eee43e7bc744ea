"""STOMP over WebSocket (RFC 6455): the WebSocket channel and the HTTP upgrade.

The I/O layer's third kind of channel, beside :class:`~amqstomp._io.channel.PlainChannel`
and :class:`~amqstomp._io.channel.TLSChannel`: a :class:`WebSocketChannel` wraps
one of them (so ``ws://`` is plain TCP and ``wss://`` is TLS from the one TLS
helper, :func:`amqstomp._io.channel.tls_context`) and gives the link the same
interface (``recv``, ``sendall``, ``try_send``, ``pending``, ``shutdown``,
``close``, ``sock``, ``tls``). What it reads is the STOMP byte stream -- the
payloads of the broker's WebSocket messages, one after the other -- and every
write is one WebSocket message, so the codec, the heart-beats (an EOL is one
``"\\n"`` message), flow control and failover above it do not know they run
over WebSocket.

The WebSocket protocol itself is the ``websockets`` package's sans-I/O
``ClientProtocol`` (bytes in, frames out; it never touches a socket): chosen
over websocket-client (stomp.py's, which owns its socket and TLS) so that the
socket stays this layer's (connect timeouts, keep-alive, ``TCP_QUICKACK``, the
heart-beat checks that look at the socket), and over wsproto because it hands
text messages over as bytes (no UTF-8 decode and re-encode per message) and
masks client frames in C. It is an optional dependency: ``amqstomp[ws]``.

Broker facts the channel follows (ActiveMQ 5.x ``activemq-http``'s
``StompSocket``; RabbitMQ's ``rabbitmq_web_stomp``): ActiveMQ reads only text
messages, one STOMP frame per message (``"\\n"`` alone is a heart-beat), so
the link writes one frame per message (:attr:`WebSocketChannel.message_framed`
turns its write coalescing off) and text is the default; RabbitMQ reads text
and binary messages as one stream.
"""
import codecs
import logging
import threading
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .._core.limits import MAX_RECEIVED_FRAME_BYTES
from ..exception import (
    ConfigurationError,
    FrameEncodeError,
    WebSocketHandshakeError,
    WebSocketProtocolError,
    WebSocketUnavailableError,
)

__all__ = ["WebSocketChannel", "WebSocketUpgrade", "WebSocketTarget", "parse_ws_url", "require_websockets",
           "INSTALL_HINT"]

log = logging.getLogger("amqstomp.transport")

HostAndPort = Tuple[str, int]

#: how to get the WebSocket library
INSTALL_HINT = "pip install 'amqstomp[ws]'"
_SNIPPET = 120  # bytes of an answer that is not HTTP shown in the error
_UTF8_STEP = 1 << 20  # bytes of a text payload decoded at a time (the str made is thrown away)
_PONG = 0x0A  # RFC 6455 section 5.2's opcode of a Pong frame


def require_websockets() -> Any:
    """The ``websockets`` package (its sans-I/O modules loaded).

    Raises:
        WebSocketUnavailableError: it is not installed (names the extra).
    """
    try:
        import websockets.client
        import websockets.exceptions
        import websockets.frames
        import websockets.http11
        import websockets.protocol
        import websockets.uri
    except ImportError as exc:
        raise WebSocketUnavailableError(
            "STOMP over WebSocket needs the 'websockets' package, amqstomp's 'ws' extra: %s (%s)"
            % (INSTALL_HINT, exc), name="websockets") from exc
    return websockets


class WebSocketTarget:
    """Where one broker's WebSocket endpoint is: ``host``, ``port``, the HTTP
    resource ``path`` (with its query) and whether it is ``secure``
    (``wss://``: TLS)."""

    __slots__ = ("host", "port", "path", "secure")

    def __init__(self, host: str, port: int, path: str = "/", secure: bool = False) -> None:
        self.host, self.port, self.path, self.secure = host, port, path or "/", secure

    @property
    def host_and_port(self) -> HostAndPort:
        return (self.host, self.port)

    def url(self, secure: Optional[bool] = None) -> str:
        """``ws[s]://host:port/path`` (``secure`` overrides the scheme)."""
        tls = self.secure if secure is None else secure
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d%s" % ("wss" if tls else "ws", host, self.port, self.path)

    def __repr__(self) -> str:
        return "WebSocketTarget(%r)" % self.url()


def parse_ws_url(url: Any) -> WebSocketTarget:
    """A ``ws://host[:port][/path]`` or ``wss://...`` URL as a target (port 80
    / 443 when left out, path ``/``).

    Raises:
        ConfigurationError: not a WebSocket URL (names the URL and what is wrong).
        WebSocketUnavailableError: the ``websockets`` package is not installed.
    """
    ws = require_websockets()
    if not isinstance(url, str):
        raise ConfigurationError("a WebSocket URL must be a str such as 'ws://127.0.0.1:61614/', got %r" % (url,))
    try:
        uri = ws.uri.parse_uri(url)
    except (ws.exceptions.InvalidURI, ValueError) as exc:
        raise ConfigurationError("bad WebSocket URL %r: %s (expected ws://host:port/path or wss://...)"
                                 % (url, exc)) from None
    if uri.user_info:
        raise ConfigurationError("bad WebSocket URL %r: user and password go in connect(), not the URL" % (url,))
    return WebSocketTarget(uri.host, uri.port, uri.resource_name, uri.secure)


def _header_items(header: Any) -> List[Tuple[str, str]]:
    """stomp.py's (websocket-client's) ``header``: a mapping, or a list of
    ``"Name: value"`` strings; as (name, value) pairs."""
    if not header:
        return []
    if isinstance(header, Mapping):
        return [(str(k), str(v)) for k, v in header.items()]
    items = []
    for line in header:
        name, sep, value = str(line).partition(":")
        if not sep or not name.strip():
            raise ConfigurationError("bad WebSocket handshake header %r: 'Name: value' expected" % (line,))
        items.append((name.strip(), value.strip()))
    return items


class WebSocketUpgrade:
    """What makes a connected channel a WebSocket: the HTTP upgrade with the
    resource path for each broker (``paths``, else ``default_path``), extra
    handshake headers, and the message type. A callable for
    :attr:`amqstomp._io.connector.Connector.upgrade`.

    Args:
        default_path (str): resource for brokers not in ``paths`` (stomp.py's
            ``ws_path``, ``"/"`` when None).
        paths (dict[(str, int), str]): resource per broker (from URLs).
        header (dict | list[str] | None): extra HTTP headers of the handshake.
        binary (bool): send binary messages (stomp.py's ``binary_mode``)
            instead of text ones, and take the broker's text messages without
            checking that they are UTF-8 (see :class:`WebSocketChannel`).

    Raises:
        WebSocketUnavailableError: the ``websockets`` package is not installed.
        ConfigurationError: a bad ``header``.
    """

    def __init__(self, default_path: Optional[str] = None, paths: Optional[Dict[HostAndPort, str]] = None,
                 header: Any = None, binary: bool = False) -> None:
        self._ws = require_websockets()
        path = default_path or "/"
        if not isinstance(path, str) or not path.startswith("/"):
            raise ConfigurationError("ws_path must be a str starting with '/', got %r" % (default_path,))
        self.default_path = path
        self.paths: Dict[HostAndPort, str] = dict(paths or {})
        self.headers = _header_items(header)
        self.binary = bool(binary)

    def url(self, host_and_port: HostAndPort, tls: bool) -> str:
        path = self.paths.get(host_and_port, self.default_path)
        return WebSocketTarget(host_and_port[0], host_and_port[1], path).url(tls)

    def __call__(self, channel: Any, host_and_port: HostAndPort, timeout_s: float) -> "WebSocketChannel":
        """Upgrade ``channel`` (connected to ``host_and_port``) within
        ``timeout_s`` seconds; the channel is closed when it fails.

        Raises:
            WebSocketHandshakeError: refused (HTTP status and reason), not
                HTTP, closed, or no answer in time.
            OSError: the socket failed.
        """
        try:
            return self._handshake(channel, self.url(host_and_port, bool(channel.tls)), timeout_s)
        except BaseException:
            channel.close()
            raise

    def _handshake(self, channel: Any, url: str, timeout_s: float) -> "WebSocketChannel":
        ws = self._ws
        # one message holds one STOMP frame: bounded by the largest the codec takes (RFC 6455 10.4)
        proto = ws.client.ClientProtocol(ws.uri.parse_uri(url), max_size=MAX_RECEIVED_FRAME_BYTES)
        request = proto.connect()
        for name, value in self.headers:
            request.headers[name] = value
        proto.send_request(request)
        state = {"done": False, "expired": False}
        guard = threading.Lock()

        def expire() -> None:  # timer thread: end a read or write that waits too long
            with guard:
                if state["done"]:
                    return
                state["expired"] = True
            channel.shutdown()

        watchdog = threading.Timer(timeout_s, expire)
        watchdog.daemon = True
        watchdog.start()
        first = b""  # the start of the answer, for the error when it is not HTTP
        events: List[Any] = []
        try:
            try:
                for data in proto.data_to_send():
                    if data:
                        channel.sendall(data)
                while proto.state is ws.protocol.State.CONNECTING and proto.handshake_exc is None:
                    data = channel.recv(65536)
                    if len(first) < _SNIPPET:
                        first += data[:_SNIPPET - len(first)]
                    if data:
                        proto.receive_data(data)
                    else:
                        proto.receive_eof()
                    events.extend(proto.events_received())
                    if not data:
                        break
            except OSError as exc:
                error: Optional[BaseException] = exc
            else:
                error = None
        finally:
            with guard:
                state["done"] = True
                expired = state["expired"]
            watchdog.cancel()
        if expired:
            raise WebSocketHandshakeError("WebSocket upgrade to %s: no answer within %.3g s (not a WebSocket "
                                          "endpoint? a plain STOMP port waits for the rest of a frame)"
                                          % (url, timeout_s), url, None, "timeout") from error
        if error is not None:
            seen = (" after it sent %r" % first) if first else ""
            raise WebSocketHandshakeError("WebSocket upgrade to %s: the connection failed before an answer%s: %s"
                                          % (url, seen, error), url, None, str(error)) from error
        failure = proto.handshake_exc
        if failure is not None:
            raise _handshake_error(ws, url, failure, first) from failure
        if proto.state is not ws.protocol.State.OPEN:
            raise WebSocketHandshakeError("WebSocket upgrade to %s: the server closed the connection without an "
                                          "answer" % url, url, None, "closed")
        channel_ = WebSocketChannel(channel, proto, self.binary, url)
        channel_.take(e for e in events if not isinstance(e, ws.http11.Response))
        log.debug("WebSocket open: %s (%s messages)", url, "binary" if self.binary else "text")
        return channel_


def _handshake_error(ws: Any, url: str, failure: BaseException, first: bytes) -> WebSocketHandshakeError:
    """The error for a failed upgrade: the status and reason of a refusal, the
    first bytes of an answer that is not HTTP."""
    if isinstance(failure, ws.exceptions.InvalidStatus):
        response = failure.response
        body = bytes(response.body or b"")[:_SNIPPET].decode("utf-8", "replace").strip()
        return WebSocketHandshakeError(
            "WebSocket upgrade to %s refused: HTTP %d %s%s" % (
                url, response.status_code, response.reason_phrase, (" (%s)" % body) if body else ""),
            url, response.status_code, response.reason_phrase)
    if isinstance(failure, ws.exceptions.InvalidMessage):
        seen = ("; it sent %r" % first) if first else "; it closed the connection"
        return WebSocketHandshakeError(
            "WebSocket upgrade to %s: the server did not answer with HTTP (a plain STOMP port, not a ws:// "
            "one?)%s" % (url, seen), url, None, "not HTTP")
    return WebSocketHandshakeError("WebSocket upgrade to %s: not a WebSocket answer: %s" % (url, failure),
                                   url, None, str(failure))


class WebSocketChannel:
    """A channel whose bytes travel in WebSocket messages (RFC 6455), over a
    plain or TLS channel. Reads on the reader thread, writes under the link's
    write lock, as the other channels.

    The reader never writes: the control frames the protocol answers with (a
    pong per ping, section 5.5.2, of which only the newest waits, 5.5.3; the
    Close echo, 5.5.1; the Close that fails the connection, 7.1.7) wait for
    the next writer, or for :meth:`flush_owed` on the link's timer thread,
    never blocking (:meth:`call_when_owed`). A pong that cannot go out in
    time is late; the reader goes on reading.

    What it takes in: messages of at most the protocol's ``max_size`` bytes
    (:data:`~amqstomp._core.limits.MAX_RECEIVED_FRAME_BYTES`, the largest
    STOMP frame the codec takes, set by :class:`WebSocketUpgrade`: a frame
    declaring more is refused by its header, never buffered, section 10.4),
    and text messages in UTF-8 (section 8.1; checked incrementally across
    continuation frames, an ASCII payload costs one ``bytes.isascii``). A
    message that breaks either, or any other rule, fails the connection
    (close code 1009, 1007, 1002): :meth:`recv` returns the payload before
    it, then raises :class:`~amqstomp.exception.WebSocketProtocolError`.
    With ``binary`` text messages are taken unchecked: RabbitMQ's web-STOMP
    (default ``web_stomp.ws_frame = text``) sends any body in text messages.

    Attributes:
        message_framed (bool): True: each write is one WebSocket message, so
            the link writes one STOMP frame per call (ActiveMQ parses one frame
            per message) and never coalesces frames.
        close_code (int | None), close_reason (str): the broker's Close frame.
    """

    message_framed = True

    def __init__(self, inner: Any, protocol: Any, binary: bool, url: str) -> None:
        self.inner = inner
        self.sock = inner.sock
        self.tls = inner.tls
        self.url = url
        self._proto = protocol
        self._ws = require_websockets()
        frames = self._ws.frames
        self._text_op, self._cont_op = frames.Opcode.TEXT, frames.Opcode.CONT
        self._data_ops = (frames.Opcode.TEXT, frames.Opcode.BINARY, frames.Opcode.CONT)
        self._close_op = frames.Opcode.CLOSE
        self._open = self._ws.protocol.State.OPEN
        self._lock = threading.Lock()  # the protocol object and the owed frames; held for no I/O
        self._wlock = threading.Lock()  # writes to the inner channel: whole WebSocket frames, in order
        self._send_message = protocol.send_binary if binary else protocol.send_text
        self._text = not binary
        self._chunks: List[bytes] = []  # payload received, not yet returned by recv
        self._owed: List[bytes] = []  # control frames (encoded) the reader's protocol answered with, unwritten
        self._rest: Optional[memoryview] = None  # the unwritten end of a frame a non-blocking write began
        self._woken = False  # the call_when_owed callback was called; not all owed frames written since
        self._on_owed: Optional[Callable[[], None]] = None
        self._utf8 = codecs.getincrementaldecoder("utf-8")()  # the text message being received
        self._in_text = False  # a text message is being received in continuation frames
        self._utf8_open = False  # ... and its bytes so far end inside a character
        self._ended = False  # the broker's Close frame, EOF or a protocol error came
        self._error: Optional[BaseException] = None
        self.close_code: Optional[int] = None
        self.close_reason = ""

    # ------------------------------------------------------------ reading

    def recv(self, size: int) -> bytes:
        """The next STOMP bytes (payload of one or more messages); ``b""`` at
        the end (the broker's Close frame or EOF). Reader thread; never writes.

        Raises:
            WebSocketProtocolError: the broker broke the WebSocket protocol (RFC
                6455): a message over the limit (1009), a text message that is
                not UTF-8 (1007), anything else (1002); the connection is failed.
            OSError: the socket failed.
        """
        while True:
            chunks = self._chunks
            if chunks:
                data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                chunks.clear()
                return bytes(data)
            if self._ended:
                if self._error is not None:
                    raise self._error
                return b""
            data = self.inner.recv(size)
            proto = self._proto
            with self._lock:
                if data:
                    proto.receive_data(data)
                else:
                    proto.receive_eof()
                events = proto.events_received()
                failure = proto.parser_exc
            self.take(events)
            if failure is not None and self._error is None and not isinstance(failure, EOFError):
                self._broken(self._parser_error(failure))
            if not data:
                self._ended = True

    def take(self, events: Iterable[Any]) -> None:
        """Reader side: keep the payload of ``events`` (frames) for :meth:`recv`,
        note a Close, fail the connection on a text message that is not UTF-8
        (1007), and queue what the protocol answers (:meth:`call_when_owed`)."""
        chunks = self._chunks
        for frame in events:
            opcode = frame.opcode
            if opcode in self._data_ops:
                data = frame.data
                if self._text and (opcode is self._text_op or (opcode is self._cont_op and self._in_text)):
                    error = self._check_utf8(data, frame.fin)
                    if error is not None:
                        self._broken(error, 1007, "invalid UTF-8")  # RFC 6455 7.4.1: invalid frame payload data
                        return  # nothing after the failure is taken (RFC 6455 7.1.7)
                    self._in_text = not frame.fin
                if data:
                    chunks.append(data)
            elif opcode is self._close_op:
                self._ended = True
                close = self._proto.close_rcvd
                if close is not None:
                    self.close_code, self.close_reason = int(close.code), close.reason
                log.info("%s: the broker closed the WebSocket (code %s%s)", self.url, self.close_code,
                         (", " + self.close_reason) if self.close_reason else "")
        self._answer()

    def _check_utf8(self, data: bytes, final: bool) -> Optional[WebSocketProtocolError]:
        """Reader side: the error when ``data``, the next part of a text message
        (``final``: its end), makes it invalid UTF-8 (RFC 6455 section 8.1); None
        when it is valid so far. Large payloads are decoded 1 MiB at a time."""
        if not self._utf8_open and data.isascii():
            return None
        decoder = self._utf8
        view, size = memoryview(data), len(data)
        try:
            for start in range(0, size or 1, _UTF8_STEP):
                decoder.decode(view[start:start + _UTF8_STEP], final and start + _UTF8_STEP >= size)
        except UnicodeDecodeError as exc:
            decoder.reset()
            return WebSocketProtocolError("WebSocket text message from %s is not UTF-8 (%s): the client failed the "
                                          "connection with close code 1007, invalid frame payload data (RFC 6455 "
                                          "section 8.1)" % (self.url, exc.reason), 1007, url=self.url)
        self._utf8_open = not final and bool(decoder.getstate()[0])
        return None

    def _parser_error(self, failure: BaseException) -> WebSocketProtocolError:
        """The error for what the protocol's parser refused (it sent the Close already)."""
        sent = self._proto.close_sent
        code = int(sent.code) if sent is not None else None
        if isinstance(failure, self._ws.exceptions.PayloadTooBig):
            limit = self._proto.max_message_size
            return WebSocketProtocolError(
                "WebSocket message from %s is over the client's limit of %s bytes (MAX_RECEIVED_FRAME_BYTES: the "
                "largest STOMP frame it takes, its body limit + a header budget): the client failed the "
                "connection with close code %s, message too big (RFC 6455 section 7.4.1; %s)"
                % (self.url, limit, code, failure), code, limit, self.url)
        return WebSocketProtocolError("WebSocket protocol error from %s: %s: the client failed the connection with "
                                      "close code %s (RFC 6455 section 7.1.7)" % (self.url, failure, code),
                                      code, url=self.url)

    def _broken(self, error: WebSocketProtocolError, code: int = 0, reason: str = "") -> None:
        """Reader side: the connection failed with ``error`` (after the payload
        taken so far); with ``code``, fail the protocol with it."""
        self._ended = True
        self._error = error  # the link's reader logs it
        if code:
            self._answer(code, reason)

    def _answer(self, fail_code: int = 0, reason: str = "") -> None:
        """Reader side: queue what the protocol answers, after failing it with
        ``fail_code`` (a Close frame, RFC 6455 section 7.1.7)."""
        with self._lock:
            if fail_code and self._proto.state is self._open:
                self._proto.fail(fail_code, reason)
            wake = self._owe(self._proto.data_to_send())
        if wake:
            self._wake()

    def pending(self) -> int:
        """Payload bytes read but not yet returned by :meth:`recv`, plus what
        the inner channel holds (TLS)."""
        return sum(len(c) for c in self._chunks) + int(self.inner.pending())

    # ------------------------------------------------------------ writing

    def _frame(self, data: Union[bytes, bytearray, memoryview]) -> bytes:
        """``data`` as one WebSocket message, encoded (masked, RFC 6455 5.3).

        Raises:
            FrameEncodeError: text messages and ``data`` is not UTF-8.
            ConnectionError: the WebSocket is closing.
        """
        if self._text and not data.isascii():  # type: ignore[union-attr]
            try:
                str(data, "utf-8")
            except UnicodeDecodeError as exc:
                raise FrameEncodeError(
                    "a WebSocket text message must be UTF-8 (RFC 6455 section 5.6) and this frame is not "
                    "(byte %d): send a text body, or binary messages (binary_mode=True; RabbitMQ reads them, "
                    "ActiveMQ's ws:// transport reads only text)" % exc.start) from None
        with self._lock:
            if self._proto.state is not self._open:
                raise ConnectionError("WebSocket to %s is closing" % self.url)
            self._send_message(data)
            out = self._proto.data_to_send()
        return out[0] if len(out) == 1 else b"".join(out)

    def sendall(self, data: bytes, deadline: Optional[float] = None) -> None:
        """Write ``data`` as one WebSocket message, after the control frames
        owed (blocking, until ``deadline`` at most: the inner channel's
        ``sendall``; a writer under the link's write lock)."""
        frame = self._frame(data)
        with self._wlock:
            if self._rest is not None or self._owed:
                self._write_owed(deadline)
            self.inner.sendall(frame, deadline)

    def try_send(self, data: bytes) -> bool:
        """Write ``data`` (a heart-beat) as one message without blocking, after
        the control frames owed; False (``data`` not sent) when a write is in
        progress or those do not fit. What of the message does not fit is
        written by the next writer or :meth:`flush_owed`."""
        if not self._wlock.acquire(blocking=False):
            return False
        try:
            if (self._rest is not None or self._owed) and self._send_owed_some():
                return False
            view = memoryview(self._frame(data))
            rest = view[self.inner.send_some(view):]
            if not len(rest):
                return True
            self._rest = rest  # begun, or taken by OpenSSL: it must go out whole
            with self._lock:
                wake, self._woken = not self._woken, True
        finally:
            self._wlock.release()
        if wake:
            self._wake()
        return True

    def flush_owed(self) -> bool:
        """Write what fits of the control frames owed, never blocking (the
        link's timer thread, under its write lock). True when some are left:
        call again later (a writer may also write them first)."""
        if not self._wlock.acquire(blocking=False):
            return True
        try:
            return self._send_owed_some()
        finally:
            self._wlock.release()

    def _owe(self, out: Sequence[bytes]) -> bool:
        """Under ``_lock``: queue the encoded control frames ``out``; a pong
        replaces one still waiting (RFC 6455 section 5.5.3). True when
        :meth:`call_when_owed`'s callback is due."""
        owed = self._owed
        for data in out:
            if not data:
                continue  # b"": half-close the TCP connection; the link closes it anyway
            if data[0] & 0x0F == _PONG:  # the opcode: the low 4 bits of the first byte (section 5.2)
                owed[:] = [d for d in owed if d[0] & 0x0F != _PONG]
            owed.append(data)
        if owed and not self._woken:
            self._woken = True
            return True
        return False

    def call_when_owed(self, callback: Optional[Callable[[], None]]) -> None:
        """Have ``callback()`` called (reader or timer thread, no lock held)
        when control frames start waiting to be written: it arranges a
        :meth:`flush_owed` (the link: its timer's ``flush_tick``)."""
        self._on_owed = callback

    def _wake(self) -> None:
        callback = self._on_owed
        if callback is not None:
            callback()

    def _send_owed_some(self) -> bool:
        """Under ``_wlock``: write what fits of the owed frames without
        blocking; True when some are left."""
        while True:
            view = self._rest
            if view is None:
                with self._lock:
                    if not self._owed:
                        self._woken = False
                        return False
                    view = memoryview(self._owed.pop(0))
            rest = view[self.inner.send_some(view):]
            if len(rest):
                self._rest = rest
                return True
            self._rest = None

    def _write_owed(self, deadline: Optional[float] = None) -> None:
        """Under ``_wlock``: write the owed frames, blocking (a writer; until ``deadline`` at most)."""
        rest, self._rest = self._rest, None
        if rest is not None:
            self.inner.sendall(rest, deadline)
        with self._lock:
            owed, self._owed = self._owed, []
            self._woken = False
        for data in owed:
            self.inner.sendall(data, deadline)

    # ------------------------------------------------------------ closing

    def shutdown(self) -> None:
        """Send a Close frame (1000) and what else is owed when no write is in
        progress and it fits without blocking, then shut the socket down (the
        reader then ends)."""
        if self._wlock.acquire(blocking=False):
            try:
                with self._lock:
                    if self._proto.state is self._open:
                        self._proto.send_close(1000)
                    self._owe(self._proto.data_to_send())
                self._send_owed_some()
            except Exception:  # best effort: the socket goes anyway
                pass
            finally:
                self._wlock.release()
        self.inner.shutdown()

    def close(self) -> None:
        self.inner.close()
