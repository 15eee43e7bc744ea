"""Small helpers kept where stomp.py users look for them (``stomp.utils``).

``Frame`` is :class:`amqstomp.codec.Frame` (``cmd``, ``headers``, ``body``).
Besides amqstomp's own helpers (:data:`MAX_WAIT_S`, :func:`clamp_wait`), this
module has stomp.py 9.0's ``stomp.utils`` names with the same signatures,
results and exception types, and the ``HDR_*``/``CMD_*`` constants of
:mod:`amqstomp.constants` (stomp.py's module star-imports them).
:func:`parse_frame` parses with amqstomp's codec; frames the codec refuses
(stomp.py's parser is lenient) are read the lenient way.
"""
import copy
import os
import queue
import re
import socket
import threading
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import codec
from ._io.timeouts import MAX_WAIT_S as MAX_WAIT_S, clamp_wait as clamp_wait  # amqstomp's, by name
from ._core.heartbeat import negotiate
from .codec import Frame
from .constants import SECRET_HEADERS as _SECRET_HEADERS
from .constants import (
    CMD_ABORT,
    CMD_ACK,
    CMD_BEGIN,
    CMD_COMMIT,
    CMD_CONNECT,
    CMD_DISCONNECT,
    CMD_NACK,
    CMD_SEND,
    CMD_STOMP,
    CMD_SUBSCRIBE,
    CMD_UNSUBSCRIBE,
    HDR_ACCEPT_VERSION,
    HDR_ACK,
    HDR_CONTENT_LENGTH,
    HDR_CONTENT_TYPE,
    HDR_DESTINATION,
    HDR_HEARTBEAT,
    HDR_HOST,
    HDR_ID,
    HDR_LOGIN,
    HDR_MESSAGE_ID,
    HDR_PASSCODE,
    HDR_RECEIPT,
    HDR_SUBSCRIPTION,
    HDR_TRANSACTION,
)
from .exception import StompProtocolError

#: What ``from amqstomp.utils import *`` (``stomp.utils``) gives: stomp.py 9.0's names, no
#: more (amqstomp's :data:`MAX_WAIT_S` and :func:`clamp_wait` are imported by name). stomp.py's
#: module has no ``__all__``, so its star import also hands out the modules it imported and
#: the constants it star-imported; code written for it uses them (``re``, ``uuid``...).
__all__ = [
    "Frame", "get_uuid", "merge_headers",
    "LOCALHOST_NAMES", "NULL", "ENC_NEWLINE", "ENC_NULL", "HEADER_LINE_RE", "PREAMBLE_END_RE", "LINE_END_RE",
    "PASSCODE_RE", "HEARTBEAT_FRAME", "decode", "encode", "pack", "join", "is_eol_default",
    "default_create_thread", "is_localhost", "parse_headers", "parse_frame", "clean_headers", "clean_lines",
    "calculate_heartbeats", "convert_frame", "length", "get_errno", "PollableQueue",
    # stomp.py's module star-imports stomp.constants
    "CMD_ABORT", "CMD_ACK", "CMD_BEGIN", "CMD_COMMIT", "CMD_CONNECT", "CMD_DISCONNECT", "CMD_NACK",
    "CMD_SEND", "CMD_STOMP", "CMD_SUBSCRIBE", "CMD_UNSUBSCRIBE", "HDR_ACCEPT_VERSION", "HDR_ACK",
    "HDR_CONTENT_LENGTH", "HDR_CONTENT_TYPE", "HDR_DESTINATION", "HDR_HEARTBEAT", "HDR_HOST", "HDR_ID",
    "HDR_LOGIN", "HDR_MESSAGE_ID", "HDR_PASSCODE", "HDR_RECEIPT", "HDR_SUBSCRIPTION", "HDR_TRANSACTION",
    # and the modules it imports
    "copy", "os", "queue", "re", "socket", "threading", "uuid",
]

#: The NUL octet that ends a frame (STOMP 1.2 spec, "Augmented BNF").
NULL = b"\x00"
ENC_NEWLINE = b"\n"
ENC_NULL = NULL
#: A header line ``name:value`` (groups ``key`` and ``value``; split at the first colon).
HEADER_LINE_RE = re.compile(r"(?P<key>[^:]+):(?P<value>.*)")
#: The blank line ending a frame's command and headers (LF or CRLF, STOMP 1.2).
PREAMBLE_END_RE = re.compile(b"\n\n|\r\n\r\n")
#: A line end (LF or CRLF, STOMP 1.2).
LINE_END_RE = re.compile("\n|\r\n")
#: A ``passcode`` header in the text of a frame's lines (``str(lines)``), with or
#: without spaces after the colon, up to a quote, a space or an escaped line
#: end. stomp.py 9.0's pattern needs a space after the colon, so a real
#: ``passcode:secret`` line went unmasked; this one masks it.
PASSCODE_RE = re.compile(r"passcode:\s*(?:[^'\"\s\\]|\\(?!n['\"]))+")
#: What stomp.py's reader hands on for a heart-beat (a frame whose ``cmd`` is
#: ``"heartbeat"``, no headers).
HEARTBEAT_FRAME = Frame("heartbeat")

if TYPE_CHECKING:
    #: Names of this machine (``localhost``, ``127.0.0.1``, and unless the
    #: environment has ``STOMP_SKIP_HOSTNAME_SCAN``, its host name, fully
    #: qualified name and address). Worked out on first use (the lookups may
    #: ask DNS), then a plain list that may be changed.
    LOCALHOST_NAMES: List[str]


def lazy_localhost_names(module: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``module`` (this one, ``stomp.connect``,
    ``stomp.transport``) that answers ``LOCALHOST_NAMES``, worked out when first asked for.

    The function returned raises AttributeError for any other name."""
    def module_getattr(name: str) -> Any:
        if name == "LOCALHOST_NAMES":
            return _localhost_names()
        raise AttributeError("module %r has no attribute %r" % (module, name))
    return module_getattr


if not TYPE_CHECKING:
    __getattr__ = lazy_localhost_names(__name__)


def _localhost_names() -> List[str]:
    """:data:`LOCALHOST_NAMES`, worked out and kept in the module on first use."""
    names: Optional[List[str]] = globals().get("LOCALHOST_NAMES")
    if names is None:
        names = globals()["LOCALHOST_NAMES"] = _scan_local_names()
    return names


def _host_address() -> str:
    return socket.gethostbyname(socket.gethostname())


def _host_fqdn() -> str:
    return socket.getfqdn(socket.gethostname())


def _scan_local_names() -> List[str]:
    names = ["localhost", "127.0.0.1"]
    if not os.environ.get("STOMP_SKIP_HOSTNAME_SCAN"):
        for lookup in (_host_address, socket.gethostname, _host_fqdn):
            try:
                names.append(lookup())
            except (OSError, UnicodeError):
                pass
    return names


def get_uuid() -> str:
    """A random UUID4 as text (used for receipt and transaction ids)."""
    return str(uuid.uuid4())


def merge_headers(header_map_list: Iterable[Optional[Mapping[str, Any]]]) -> Dict[str, Any]:
    """Merge header maps left to right (later maps win); None entries are skipped."""
    headers: Dict[str, Any] = {}
    for header_map in header_map_list:
        if header_map:
            headers.update(header_map)
    return headers


def decode(byte_data: Optional[Union[bytes, bytearray]], encoding: str = "utf-8") -> Optional[str]:
    """``byte_data`` as text, undecodable bytes replaced by U+FFFD; None stays
    None (stomp.py 9.0 ``stomp.utils.decode``).

    Raises:
        AttributeError: ``byte_data`` is not bytes-like (no ``decode``; stomp.py's type).
        LookupError: unknown ``encoding``.
    """
    if byte_data is None:
        return None
    if not hasattr(byte_data, "decode"):
        raise AttributeError("decode() needs bytes or None, got %s" % type(byte_data).__name__)
    return byte_data.decode(encoding, errors="replace")


def encode(char_data: Union[str, bytes], encoding: str = "utf-8") -> bytes:
    """``char_data`` as bytes: ``str`` encoded (unencodable characters replaced
    by ``?``), ``bytes`` as they are (stomp.py 9.0 ``stomp.utils.encode``).

    Raises:
        TypeError: anything else (bytearray too, as in stomp.py).
        LookupError: unknown ``encoding``.
    """
    if isinstance(char_data, str):
        return char_data.encode(encoding, errors="replace")
    if isinstance(char_data, bytes):
        return char_data
    raise TypeError("message should be a string or bytes, found %s" % type(char_data))


def pack(pieces: Iterable[bytes] = ()) -> bytes:
    """The pieces (bytes, e.g. :func:`convert_frame`'s) joined (stomp.py 9.0 ``stomp.utils.pack``).

    Raises:
        TypeError: a piece is not bytes-like.
    """
    return b"".join(pieces)


def join(chars: Iterable[bytes] = ()) -> str:
    """The pieces joined and decoded as UTF-8 (stomp.py 9.0 ``stomp.utils.join``).

    Raises:
        TypeError: a piece is not bytes-like.
        UnicodeDecodeError: the result is not UTF-8.
    """
    return b"".join(chars).decode()


def is_eol_default(c: bytes) -> bool:
    """Whether ``c`` is a line feed, ``b"\\n"`` (stomp.py 9.0's default end-of-line test)."""
    return c == b"\n"


def default_create_thread(callback: Callable[[], Any]) -> threading.Thread:
    """Start ``callback`` on a new daemon thread and return the thread
    (stomp.py 9.0 ``stomp.utils.default_create_thread``)."""
    thread = threading.Thread(target=callback, daemon=True)
    thread.start()
    return thread


def is_localhost(host_and_port: Tuple[str, Any]) -> int:
    """1 when the host of ``(host, port)`` is in :data:`LOCALHOST_NAMES`, else 2
    (a sort key; stomp.py 9.0 ``stomp.utils.is_localhost``).

    Raises:
        ValueError, TypeError: ``host_and_port`` is not a pair.
    """
    host, _ = host_and_port
    return 1 if host in _localhost_names() else 2


_UNESCAPES = {"\\r": "\r", "\\n": "\n", "\\c": ":", "\\\\": "\\"}
_ESCAPE_RE = re.compile(r"\\.")


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return _ESCAPE_RE.sub(lambda m: _UNESCAPES.get(m.group(0), m.group(0)), text)


def parse_headers(lines: Sequence[str], offset: int = 0) -> Dict[str, str]:
    """Header lines (``name:value``, from index ``offset`` on) as a dict, the
    first of repeated names kept (STOMP 1.2 "Repeated Header Entries"). Escapes
    ``\\r \\n \\c \\\\`` are undone in names and values, unknown ones kept as
    they are; lines without a name and a colon are skipped (stomp.py 9.0
    ``stomp.utils.parse_headers``).

    Raises:
        TypeError: a line is not a str.
    """
    headers: Dict[str, str] = {}
    for line in lines[offset:]:
        match = HEADER_LINE_RE.match(line)
        if match:
            key = _unescape(match.group("key"))
            if key not in headers:
                headers[key] = _unescape(match.group("value"))
    return headers


#: commands whose headers the codec leaves escaped (STOMP 1.2 "Value Encoding")
#: where stomp.py's parser undoes escapes anyway
_RAW_COMMANDS = ("CONNECT", "CONNECTED", "STOMP")


def _parse_with_codec(frame: bytes) -> Optional[Frame]:
    """The frame, when amqstomp's parser reads it as exactly one frame and the
    result is what stomp.py's lenient reading gives; else None."""
    if frame.__class__ is not bytes:
        return None
    end = PREAMBLE_END_RE.search(frame)
    if end is None or b"\r" in frame[:end.end()] or frame[:1] == b"\n":
        # no blank line; CRs (stomp.py keeps a CR before a lone LF); a leading
        # blank line (stomp.py's preamble then ends there)
        return None
    try:
        frames = codec.FrameParser("1.2").feed(frame + b"\0")
    except StompProtocolError:
        return None
    if len(frames) != 1:
        return None
    parsed = frames[0]
    if len(parsed.body) != len(frame) - end.end():
        return None  # the body held a NUL, or content-length said less
    if parsed.cmd in _RAW_COMMANDS and b"\\" in frame[:end.start()]:
        return None
    return parsed


def parse_frame(frame: bytes) -> Optional[Frame]:
    """A frame's bytes (without the trailing NUL, as stomp.py's reader hands
    them over) as a :class:`Frame`; None when they hold no command (a
    heart-beat). The body is every byte after the blank line (``content-length``
    is not checked); headers as :func:`parse_headers`, text decoded as UTF-8
    with bad bytes replaced. Same results as stomp.py 9.0 ``stomp.utils.parse_frame``;
    parsed by amqstomp's codec when it accepts the frame.

    Raises:
        TypeError: ``frame`` is not bytes-like.
    """
    if not isinstance(frame, (bytes, bytearray)):
        raise TypeError("parse_frame() needs the frame's bytes, got %s" % type(frame).__name__)
    parsed = _parse_with_codec(frame)
    if parsed is not None:
        return parsed
    end = PREAMBLE_END_RE.search(frame)
    head_end, body_start = (end.start(), end.end()) if end else (len(frame), len(frame))
    lines = LINE_END_RE.split(frame[:head_end].decode("utf-8", errors="replace"))
    first = 0
    while first < len(lines) and not lines[first]:
        first += 1
    if first >= len(lines):
        return None
    return Frame(lines[first], parse_headers(lines, first + 1), frame[body_start:])


def clean_headers(headers: Mapping[str, Any]) -> Mapping[str, Any]:
    """``headers`` with a ``passcode`` value (:data:`amqstomp.constants.SECRET_HEADERS`) masked
    as ``********`` (a copy; the same object when there is none) (stomp.py 9.0
    ``stomp.utils.clean_headers``)."""
    if any(name in headers for name in _SECRET_HEADERS):
        masked = copy.copy(headers)
        for name in _SECRET_HEADERS:
            if name in masked:
                masked[name] = "********"  # type: ignore[index]
        return masked
    return headers


def clean_lines(lines: Any) -> str:
    """``str(lines)`` (e.g. :func:`convert_frame`'s list) with passcodes masked
    by :data:`PASSCODE_RE` (stomp.py 9.0 ``stomp.utils.clean_lines``, which
    missed ``passcode:secret`` without a space)."""
    return PASSCODE_RE.sub("passcode:********", str(lines))


def calculate_heartbeats(shb: Sequence[str], chb: Tuple[int, int]) -> Tuple[int, int]:
    """The heart-beat periods in ms, ``(send, receive)``, from the server's
    CONNECTED ``heart-beat`` split into two strings ``shb`` and the client's
    ``(cx, cy)`` ``chb``: send every max(cx, sy) ms when both are non-zero,
    expect the server every max(sx, cy) ms when both are non-zero (STOMP 1.2
    "Heart-beating"; stomp.py 9.0 ``stomp.utils.calculate_heartbeats``, which
    differs only for a server value such as ``"00"``: it is 0 here).

    Raises:
        ValueError: ``shb`` is not two integers, or ``chb`` not two numbers.
    """
    (sx, sy), (cx, cy) = shb, chb
    return negotiate((cx, cy), (int(sx), int(sy)))


def convert_frame(frame: Any) -> List[bytes]:
    """A frame as stomp.py 9.0's list of byte pieces (``stomp.utils.convert_frame``):
    the command and an LF, one ``name:value`` LF line per header in name order
    (a tuple value gives a line per item, None leaves the header out), an LF,
    the body, the NUL; no command line and no NUL when ``cmd`` is empty (a
    heart-beat). Nothing is escaped or checked (stomp.py's protocol classes
    escape first; amqstomp's own encoder is :func:`amqstomp.codec.encode_frame`).
    A ``content-length`` header in ``frame.headers`` is set to the body's
    length in place, as stomp.py does.

    Raises:
        TypeError: the body is neither str nor bytes.
    """
    pieces: List[bytes] = []
    body = encode(frame.body) if frame.body else None
    if body is not None and HDR_CONTENT_LENGTH in frame.headers:
        frame.headers[HDR_CONTENT_LENGTH] = len(body)
    if frame.cmd:
        pieces.append(encode(frame.cmd))
        pieces.append(ENC_NEWLINE)
    for key, values in sorted(frame.headers.items()):
        if values is None:
            continue
        for value in (values if isinstance(values, tuple) else (values,)):
            pieces.append(encode("%s:%s\n" % (key, value)))
    pieces.append(ENC_NEWLINE)
    if body:
        pieces.append(body)
    if frame.cmd:
        pieces.append(ENC_NULL)
    return pieces


def length(s: Optional[Any]) -> int:
    """``len(s)``, 0 for None (stomp.py 9.0 ``stomp.utils.length``)."""
    return 0 if s is None else len(s)


def get_errno(e: BaseException) -> Any:
    """``e.errno``, or ``e.args[0]`` when ``e`` has no ``errno`` (stomp.py 9.0 ``stomp.utils.get_errno``).

    Raises:
        IndexError: neither (no ``errno``, no args).
    """
    try:
        return getattr(e, "errno")
    except AttributeError:
        return e.args[0]


class PollableQueue(queue.Queue):  # type: ignore[type-arg]
    """A :class:`queue.Queue` that a selector can wait on: each ``put`` writes
    one byte to a socket pair and each ``get`` reads one, so :meth:`fileno`
    is readable while items are queued (stomp.py 9.0 ``stomp.utils.PollableQueue``).
    ``get`` blocks until an item is there. :meth:`shutdown` closes the sockets.
    """

    def __init__(self) -> None:
        super().__init__()
        self._putsocket, self._getsocket = socket.socketpair()

    def fileno(self) -> int:
        """The readable end's file descriptor."""
        return self._getsocket.fileno()

    def put(self, item: Any, block: bool = True, timeout: Optional[float] = None) -> None:
        """Queue ``item`` (see :meth:`queue.Queue.put`) and make :meth:`fileno` readable."""
        super().put(item, block, timeout)
        self._putsocket.send(b"x")

    def get(self, block: bool = True, timeout: Optional[float] = None) -> Any:
        """The oldest item, waiting for one (the ``block`` and ``timeout`` of
        :meth:`queue.Queue.get` apply to the queue after the byte is read)."""
        self._getsocket.recv(1)
        return super().get(block, timeout)

    def shutdown(self, immediate: bool = False) -> None:
        """Close both sockets."""
        self._putsocket.close()
        self._getsocket.close()
