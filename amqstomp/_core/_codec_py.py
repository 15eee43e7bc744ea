"""STOMP frame codec, pure-Python twin of :mod:`amqstomp._core._codec`.

Same public names and behaviour as the compiled module; :mod:`amqstomp.codec`
chooses between the two (``AMQSTOMP_NO_EXTENSIONS=1`` forces this one).
Knows nothing of sockets: bytes in, frames out (and back).

Behaviour follows the STOMP 1.2 specification ("Augmented BNF", "Value
Encoding", "Size Limits", "Heart-beating") and, for the limits, ActiveMQ's
``StompWireFormat`` defaults.
"""
from types import MappingProxyType
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from ._body_read import read_body_chunk
from ._frame_py import Frame, parsed_frame
from ..constants import SECRET_HEADERS
from ..exception import FrameEncodeError, StompProtocolError

__all__ = ["Frame", "FrameParser", "encode_frame", "encode_headers", "FrameHead", "HEARTBEAT", "VERSIONS",
           "CLIENT_COMMANDS", "SERVER_COMMANDS", "DEFAULT_MAX_COMMAND_LENGTH", "DEFAULT_MAX_HEADER_LINE_LENGTH",
           "DEFAULT_MAX_HEADERS", "DEFAULT_MAX_BODY_LENGTH", "MAX_LIMIT"]

#: The bytes a heart-beat is made of (an EOL between frames).
HEARTBEAT = b"\n"
#: Protocol versions this codec speaks.
VERSIONS = ("1.0", "1.1", "1.2")
#: Frames a client sends (STOMP 1.2 spec, "Client Frames").
CLIENT_COMMANDS = frozenset(
    ["SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK", "NACK",
     "DISCONNECT", "CONNECT", "STOMP"]
)
#: Frames a server sends (STOMP 1.2 spec, "Server Frames").
SERVER_COMMANDS = frozenset(["CONNECTED", "MESSAGE", "RECEIPT", "ERROR"])
_COMMANDS = CLIENT_COMMANDS | SERVER_COMMANDS
#: Frames whose headers are never escaped (STOMP 1.2 spec, "Value Encoding").
_UNESCAPED_COMMANDS = frozenset(["CONNECT", "CONNECTED", "STOMP"])

# Defaults: at least ActiveMQ's own limits (StompWireFormat).
DEFAULT_MAX_COMMAND_LENGTH = 1024  # bytes
DEFAULT_MAX_HEADER_LINE_LENGTH = 10240  # bytes
DEFAULT_MAX_HEADERS = 1000  # header lines
DEFAULT_MAX_BODY_LENGTH = 100 * 1024 * 1024  # bytes
#: Largest value a limit may take (2**40 bytes = 1 TiB).
MAX_LIMIT = 1 << 40

_IDLE, _COMMAND, _HEADERS, _BODY = 0, 1, 2, 3


def _unescape(raw: bytes, version: str, where: int) -> str:
    """Decode UTF-8, then undo STOMP 1.1/1.2 header escaping (escape sequences are
    ASCII, so decoding first gives error offsets in the received bytes)."""
    text = _decode(raw, where)
    if "\\" not in text:
        return text
    out = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            e = text[i + 1] if i + 1 < n else ""
            if e == "n":
                out.append("\n")
            elif e == "c":
                out.append(":")
            elif e == "\\":
                out.append("\\")
            elif e == "r" and version == "1.2":
                out.append("\r")
            else:
                at = where + len(text[:i].encode("utf-8"))
                if not e:
                    raise StompProtocolError("header ends inside an escape sequence", at)
                raise StompProtocolError("undefined escape sequence %r in header" % ("\\" + e), at)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _content_length(value: str, limit: int, where: int) -> int:
    """The body size a content-length header gives: ASCII digits, spaces around
    them tolerated (as ActiveMQ does); beyond ``limit`` is an error."""
    digits = value.strip(" ")
    if not digits or not digits.isascii() or not digits.isdigit():
        raise StompProtocolError("content-length %r is not a non-negative integer" % value[:32], where)
    stripped = digits.lstrip("0") or "0"
    if len(stripped) > 19 or int(stripped) > limit:
        raise StompProtocolError("content-length %s exceeds max_body_length=%d bytes"
                                 % (value[:32], limit), where)
    return int(stripped)


def _decode(raw: bytes, where: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StompProtocolError("header is not valid UTF-8", where + exc.start) from None


class FrameParser:
    """Incremental STOMP frame parser.

    ``feed(data)`` takes any slice of the byte stream and returns the frames it
    completed; the result does not depend on how the stream was split. EOLs
    between frames are heart-beats and produce no frame.

    Args:
        version (str): ``"1.0"``, ``"1.1"`` or ``"1.2"``; decides header
            unescaping and whether CRLF ends a line (1.2 only). A CONNECTED
            frame switches the parser to the version it names (no ``version``
            header means 1.0), as STOMP 1.2 "Protocol Negotiation" says.
        max_command_length (int): bytes in the command line.
        max_header_line_length (int): bytes in one header line.
        max_headers (int): header lines per frame.
        max_body_length (int): bytes in one body.

    Raises:
        StompProtocolError: from ``feed`` when the stream is not STOMP or breaks
            a limit; ``.offset`` is the position in the whole stream and
            ``.frames`` the frames that same call completed before the fault
            (hand them on, then deal with the error). The parser is then
            broken and every later ``feed`` raises again.
        ValueError: from the constructor for an unknown version or a limit
            outside 1 .. MAX_LIMIT (bools refused).
    """

    def __init__(self, version: str = "1.2",
                 max_command_length: int = DEFAULT_MAX_COMMAND_LENGTH,
                 max_header_line_length: int = DEFAULT_MAX_HEADER_LINE_LENGTH,
                 max_headers: int = DEFAULT_MAX_HEADERS,
                 max_body_length: int = DEFAULT_MAX_BODY_LENGTH) -> None:
        if version not in VERSIONS:
            raise ValueError("unknown STOMP version %r (expected one of %s)" % (version, ", ".join(VERSIONS)))
        for name, value in (("max_command_length", max_command_length),
                            ("max_header_line_length", max_header_line_length),
                            ("max_headers", max_headers),
                            ("max_body_length", max_body_length)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
                raise ValueError("%s must be an int from 1 to %d, got %r" % (name, MAX_LIMIT, value))
        self.version = version
        self.max_command_length = max_command_length
        self.max_header_line_length = max_header_line_length
        self.max_headers = max_headers
        self.max_body_length = max_body_length
        self._buf = bytearray()
        self._base = 0  # stream offset of _buf[0]
        self._state = _IDLE
        self._pos = 0  # parse position in _buf
        self._scan = 0  # where the NUL search resumes (body without content-length)
        self._cmd = ""
        self._headers: Dict[str, str] = {}
        self._nheaders = 0
        self._clen = -1
        self._error: Optional[StompProtocolError] = None

    @property
    def offset(self) -> int:
        """Stream position parsing resumes at: the bytes consumed into complete
        frames and heart-beats, plus the complete command and header lines of a
        frame still arriving (its body, even a partial one, is ``buffered``).
        ``offset + buffered`` is every byte fed so far; after an error both stay
        what they were before the failing ``feed``, which counts in ``buffered``."""
        return self._base + self._pos

    @property
    def buffered(self) -> int:
        """Bytes received past :attr:`offset` and not yet part of a frame: a
        partial line, or the body received so far of a frame still arriving."""
        return len(self._buf) - self._pos

    @property
    def body_missing(self) -> int:
        """Bytes still to come of the body of a frame whose content-length was
        read (its NUL not counted); 0 when no such body is arriving or the parser stopped."""
        if self._error is not None or self._state != _BODY or self._clen < 0:
            return 0
        return max(0, self._clen - (len(self._buf) - self._pos))

    def read_body(self, readinto: Callable[[Any], int]) -> int:
        """Read more of the body that is arriving (:attr:`body_missing` > 0):
        ``readinto(buffer)`` (a socket's ``recv_into``) writes at most
        ``len(buffer)`` bytes and returns how many (0: the stream ended). They
        count as fed; no frame completes (its NUL is still to come). Returns the count.

        Raises:
            ValueError: no body is arriving, or readinto returned no int in 0 .. len(buffer).
            StompProtocolError: the parser stopped on an earlier error.
        """
        return read_body_chunk(self, readinto)

    def _fail(self, message: str, pos: int) -> StompProtocolError:
        self._error = StompProtocolError(message, self._base + pos)
        return self._error

    def feed(self, data: bytes) -> List[Frame]:
        """Add bytes from the stream; return the frames they completed (maybe none)."""
        if self._error is not None:
            raise StompProtocolError("parser stopped by an earlier error: %s" % self._error,
                                     self._error.offset)
        frames: List[Frame] = []
        try:
            self._feed(data, frames)
        except StompProtocolError as exc:
            exc.frames = frames
            self._error = exc
            raise
        return frames

    def _feed(self, data: bytes, frames: List[Frame]) -> None:
        buf = self._buf
        buf += data
        end = len(buf)
        pos = self._pos
        state = self._state
        crlf = self.version == "1.2"
        while True:
            if state == _IDLE:
                while pos < end:
                    c = buf[pos]
                    if c == 0x0A:
                        pos += 1
                    elif c == 0x0D:
                        if pos + 1 >= end:
                            break
                        if buf[pos + 1] != 0x0A:
                            raise self._fail("CR not followed by LF between frames", pos)
                        pos += 2
                    else:
                        break
                if pos >= end or (buf[pos] == 0x0D):
                    break
                state = _COMMAND
            if state == _COMMAND:
                lf = buf.find(b"\n", pos)
                if lf < 0:
                    if end - pos > self.max_command_length + crlf:  # + a CR whose LF is still to come
                        raise self._fail("command line longer than max_command_length=%d bytes"
                                         % self.max_command_length, pos)
                    break
                stop = lf
                if crlf and stop > pos and buf[stop - 1] == 0x0D:
                    stop -= 1
                if stop - pos > self.max_command_length:
                    raise self._fail("command line longer than max_command_length=%d bytes"
                                     % self.max_command_length, pos)
                raw = bytes(buf[pos:stop])
                cmd = raw.decode("latin-1")
                if cmd not in _COMMANDS:
                    raise self._fail("unknown command %r" % cmd[:64], pos)
                self._cmd = cmd
                self._headers = {}
                self._nheaders = 0
                self._clen = -1
                pos = lf + 1
                state = _HEADERS
            if state == _HEADERS:
                headers = self._headers
                unescape = self.version != "1.0" and self._cmd not in _UNESCAPED_COMMANDS
                maxline = self.max_header_line_length
                done = False
                while True:
                    lf = buf.find(b"\n", pos)
                    if lf < 0:
                        if end - pos > maxline + crlf:  # + a CR whose LF is still to come
                            raise self._fail("header line longer than max_header_line_length=%d bytes"
                                             % maxline, pos)
                        break
                    stop = lf
                    if crlf and stop > pos and buf[stop - 1] == 0x0D:
                        stop -= 1
                    if stop == pos:  # blank line: end of headers
                        pos = lf + 1
                        done = True
                        break
                    if stop - pos > maxline:
                        raise self._fail("header line longer than max_header_line_length=%d bytes"
                                         % maxline, pos)
                    self._nheaders += 1
                    if self._nheaders > self.max_headers:
                        raise self._fail("more than max_headers=%d header lines" % self.max_headers, pos)
                    line = bytes(buf[pos:stop])
                    colon = line.find(b":")
                    if colon <= 0:
                        raise self._fail("header line without a name before ':'" if colon == 0
                                         else "header line without ':'", pos)
                    if unescape:
                        name = _unescape(line[:colon], self.version, self._base + pos)
                        value = _unescape(line[colon + 1:], self.version, self._base + pos + colon + 1)
                    else:
                        name = _decode(line[:colon], self._base + pos)
                        value = _decode(line[colon + 1:], self._base + pos + colon + 1)
                    if name not in headers:
                        headers[name] = value
                        if name == "content-length":
                            self._clen = _content_length(value, self.max_body_length, self._base + pos)
                    pos = lf + 1
                if not done:
                    break
                state = _BODY
                self._scan = pos
            if state == _BODY:
                clen = self._clen
                if clen >= 0:
                    if end - pos < clen + 1:
                        break
                    if buf[pos + clen] != 0:
                        raise self._fail("frame body of content-length %d not followed by NUL" % clen,
                                         pos + clen)
                    body = bytes(buf[pos:pos + clen])
                    pos += clen + 1
                else:
                    nul = buf.find(b"\0", self._scan)
                    if nul < 0:
                        self._scan = end
                        if end - pos > self.max_body_length:
                            raise self._fail("frame body longer than max_body_length=%d bytes"
                                             % self.max_body_length, pos)
                        break
                    if nul - pos > self.max_body_length:
                        raise self._fail("frame body longer than max_body_length=%d bytes"
                                         % self.max_body_length, pos)
                    body = bytes(buf[pos:nul])
                    pos = nul + 1
                frame = parsed_frame(self._cmd, self._headers, body)
                frames.append(frame)
                self._headers = {}
                state = _IDLE
                if frame.cmd == "CONNECTED":
                    version = frame.headers.get("version", "1.0")
                    if version in VERSIONS:
                        self.version = version
                        crlf = version == "1.2"
        # drop what is consumed; keep the partial frame from pos on
        if pos:
            del buf[:pos]
            self._base += pos
            self._scan = max(0, self._scan - pos)
            pos = 0
        self._pos = pos
        self._state = state


_CHAR_ESCAPES_12 = {"\\": "\\\\", "\n": "\\n", ":": "\\c", "\r": "\\r"}
_CHAR_ESCAPES_11 = {"\\": "\\\\", "\n": "\\n", ":": "\\c"}


def _shown(text: Any, secret: bool) -> str:
    """How an error message shows a header's text: its repr (64 characters at most), never a
    secret's (:data:`~amqstomp.constants.SECRET_HEADERS`)."""
    return "(not shown: a secret)" if secret else repr(text[:64])


def _escape(text: str, version: str, what: str, secret: bool = False) -> str:
    if version == "1.1" and "\r" in text:
        raise FrameEncodeError("%s %s holds a CR, which STOMP 1.1 cannot carry" % (what, _shown(text, secret)))
    table = _CHAR_ESCAPES_12 if version == "1.2" else _CHAR_ESCAPES_11
    if not any(ch in text for ch in table):
        return text
    return "".join(table.get(ch, ch) for ch in text)


def _as_text(value: Any, what: str, secret: bool = False) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise FrameEncodeError("%s %s is not valid UTF-8" % (what, _shown(bytes(value), secret))) from None
    elif isinstance(value, bool):
        text = "true" if value else "false"  # ActiveMQ reads persistent only as the exact "true"
    else:
        text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise FrameEncodeError("%s %s cannot be encoded as UTF-8" % (what, _shown(text, secret))) from None
    return text


def _header_items(headers: Any) -> Iterator[Tuple[Any, Any]]:
    """(name, value) pairs: None values left out, a list or tuple value gives
    one header line per item (what stomp.py does; the receiver keeps the first)."""
    if not hasattr(headers, "items"):
        raise FrameEncodeError("headers must be a mapping of names to values, got %s" % type(headers).__name__)
    for key, value in headers.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            for item in value:
                if item is not None:
                    yield key, item
        else:
            yield key, value


def _check_command(command: Any, version: Any) -> None:
    if command not in _COMMANDS:
        raise FrameEncodeError("unknown STOMP command %r" % (command,))
    if version not in VERSIONS:
        raise FrameEncodeError("unknown STOMP version %r" % (version,))


def _header_lines(command: str, headers: Any, version: str, payload: Optional[bytes]) -> Tuple[List[str], bool]:
    """The header lines of a frame (checked and escaped) and whether one is
    ``content-length`` (checked against ``payload`` unless that is None)."""
    escape = version != "1.0" and command not in _UNESCAPED_COMMANDS
    lines: List[str] = []
    have_length = False
    if headers:
        for key, value in _header_items(headers):
            name = _as_text(key, "header name")
            secret = name in SECRET_HEADERS
            text = _as_text(value, "header %r: its value" % (name,), secret)
            if name == "content-length":
                have_length = True
                if payload is not None and text.strip() != str(len(payload)):
                    raise FrameEncodeError("header content-length=%r does not match the body's %d bytes"
                                           % (text, len(payload)))
            if not name:
                raise FrameEncodeError("empty header name")
            if escape:
                lines.append(_escape(name, version, "header name") + ":"
                             + _escape(text, version, "header %r: its value" % (name,), secret))
            else:
                for part, what in ((name, "header name %r" % (name[:64],)), (text, "header %r: its value %s"
                                                                         % (name[:64], _shown(text, secret)))):
                    if "\n" in part or "\r" in part:
                        raise FrameEncodeError(
                            "%s holds CR or LF, which a %s frame cannot carry (no escaping)"
                            % (what, command if command in _UNESCAPED_COMMANDS else "STOMP 1.0"))
                if ":" in name:
                    raise FrameEncodeError("header name %r holds ':', which a %s frame cannot carry"
                                           % (name[:64], command if command in _UNESCAPED_COMMANDS else "STOMP 1.0"))
                lines.append(name + ":" + text)
    return lines, have_length


def encode_headers(command: str, headers: Mapping[str, Any], version: str = "1.2") -> bytes:
    """Encode header lines once, to start many frames with them: pass the result
    as ``encode_frame(..., head=...)`` (same command and version). Each line
    ends with LF; there is no command line and no blank line. Values follow
    :func:`encode_frame`'s rules.

    Raises:
        FrameEncodeError: as :func:`encode_frame`; also a ``content-length``
            header (it belongs to each frame's own body).
    """
    _check_command(command, version)
    lines, have_length = _header_lines(command, headers, version, None)
    if have_length:
        raise FrameEncodeError("content-length cannot be part of a frame head: each frame has its own body")
    return "".join(line + "\n" for line in lines).encode("utf-8")


class FrameHead:
    """Headers that many frames start with, encoded once per STOMP version: pass
    it as ``head=`` to :meth:`amqstomp.transport.Transport.send_frame` (or its
    :meth:`encoded` bytes to :func:`encode_frame`).

    Args:
        command (str): the frames' command; not CONNECT or STOMP (sent once per
            connection, their headers are negotiated).
        headers (Mapping[str, Any]): the leading headers, copied: names as
            :func:`encode_frame` takes them (str, or UTF-8 bytes: kept as
            str), None values left out. ``content-length`` and ``receipt``
            cannot be among them (each frame has its own).

    Attributes:
        command (str): as given.
        headers (Mapping[str, Any]): the copy, read-only (the encoded lines
            must stay what they say).
        encodings (Dict[str, bytes]): STOMP version -> :meth:`encoded` bytes, for
            the versions encoded so far (a writer reads it first: a dict
            lookup, not a Python call per frame).

    Raises:
        FrameEncodeError: unknown command, CONNECT/STOMP, ``content-length``
            or ``receipt`` among the headers, a name that is not text, headers
            that are not a mapping.
    """

    __slots__ = ("command", "headers", "encodings")

    def __init__(self, command: str, headers: Mapping[str, Any]) -> None:
        if command not in _COMMANDS:
            raise FrameEncodeError("unknown STOMP command %r" % (command,))
        if command in ("CONNECT", "STOMP"):
            raise FrameEncodeError("a %s frame cannot have a head: it is sent once per connection" % command)
        if not hasattr(headers, "items"):
            raise FrameEncodeError("headers must be a mapping of names to values, got %s" % type(headers).__name__)
        copied: Dict[str, Any] = {}
        for key, value in headers.items():
            if not isinstance(key, (str, bytes, bytearray, memoryview)):
                raise FrameEncodeError("header name %r is not text" % (key,))
            name = _as_text(key, "header name")
            if name in ("content-length", "receipt"):
                raise FrameEncodeError("%s cannot be part of a frame head: each frame has its own" % name)
            if value is not None:
                copied[name] = value
        self.command = command
        self.headers: Mapping[str, Any] = MappingProxyType(copied)
        self.encodings: Dict[str, bytes] = {}

    def encoded(self, version: str) -> bytes:
        """The header lines for STOMP ``version`` (see :func:`encode_headers`);
        encoded on first use per version.

        Raises:
            FrameEncodeError: as :func:`encode_headers`.
        """
        data = self.encodings.get(version)
        if data is None:
            data = self.encodings[version] = encode_headers(self.command, self.headers, version)
        return data

    def __repr__(self) -> str:
        return "FrameHead(%r, %r)" % (self.command, dict(self.headers))


def encode_frame(command: str, headers: Optional[Mapping[str, Any]] = None,
                 body: Union[bytes, bytearray, memoryview, str, None] = None,
                 version: str = "1.2", auto_content_length: bool = True, head: bytes = b"") -> bytes:
    """Encode one frame as bytes ready for the socket.

    Args:
        command (str): a STOMP command (client or server frame).
        headers (Mapping[str, Any] | None): header names to values; values are
            converted with ``str()`` (bytes are decoded as UTF-8, bools become
            ``true``/``false``), a None value leaves the header out, a list or
            tuple value gives one line per item. Order is kept.
        body (bytes | bytearray | memoryview | str | None): the body; ``str``
            is encoded as UTF-8.
        version (str): ``"1.0"``, ``"1.1"`` or ``"1.2"``. 1.1/1.2 escape
            ``\\``, LF, ``:`` (and CR in 1.2) in header names and values, except
            on CONNECT/STOMP/CONNECTED (STOMP 1.2 spec, "Value Encoding").
        auto_content_length (bool): add ``content-length`` (in octets) when the
            body is not empty and the caller gave none.
        head (bytes): header lines made by :func:`encode_headers` for the same
            command and version, written before ``headers`` (a receiver keeps
            the first of repeated headers, STOMP 1.2 "Repeated Header Entries").

    Returns:
        bytes: the frame, ending with its NUL.

    Raises:
        FrameEncodeError: unknown command or version; a CR or LF in a header of
            a frame that cannot escape (STOMP 1.0, CONNECT); a ':' in a 1.0
            header name; a CR in a 1.1 header; a ``content-length`` different
            from the body's size; a body holding NUL with no ``content-length``;
            a body of another type; text that is not valid UTF-8; headers that
            are not a mapping; a ``head`` that is not bytes ending with LF.
    """
    _check_command(command, version)
    if body is None:
        payload = b""
    elif isinstance(body, str):
        try:
            payload = body.encode("utf-8")
        except UnicodeEncodeError:
            raise FrameEncodeError("body str cannot be encoded as UTF-8") from None
    elif isinstance(body, (bytes, bytearray, memoryview)):
        payload = bytes(body)
    else:
        raise FrameEncodeError("body must be bytes, bytearray, memoryview, str or None, not %s"
                               % type(body).__name__)
    if head.__class__ is not bytes or (head and not head.endswith(b"\n")):
        raise FrameEncodeError("head must be bytes from encode_headers (header lines ending with LF), got %r"
                               % (head[:64] if isinstance(head, (bytes, str)) else type(head).__name__,))
    lines, have_length = _header_lines(command, headers, version, payload)
    lines.insert(0, command)
    if not have_length and payload:
        if auto_content_length:
            lines.append("content-length:%d" % len(payload))
        elif b"\0" in payload:
            raise FrameEncodeError("body holds a NUL byte and the frame has no content-length")
    lines += ["", ""]  # the blank line after the headers, and the body's start
    if head:
        return (command + "\n").encode("utf-8") + head + "\n".join(lines[1:]).encode("utf-8") + payload + b"\0"
    return "\n".join(lines).encode("utf-8") + payload + b"\0"
