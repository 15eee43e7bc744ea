# cython: language_level=3
"""STOMP frame codec, compiled.

Same public names and behaviour as the pure-Python twin
:mod:`amqstomp._codec_py` (whose docstrings are the reference); chosen by
:mod:`amqstomp.codec`. No I/O, no threads, no clocks: bytes in, frames out.

Speed comes from scanning a C view of the receive buffer with ``memchr``,
reusing interned ``str`` objects for the command and the header names that
ActiveMQ sends, and reusing the previous ``str`` of a header whose value did
not change (destination, subscription, priority ...).

``encode_frame`` writes the frame into one C buffer (escaping on the UTF-8
bytes: every escaped character is ASCII, and no byte of a multi-byte UTF-8
sequence is). It handles the frames a client sends: a ``dict`` of ``str``
names to ``str`` / ``int`` / ``bool`` / None values and a ``bytes`` / ``str``
body. Anything else, and every case the twin refuses or treats specially
(lists of values, a ``content-length`` not written as the body's exact size,
a character that cannot be escaped), is handed to the twin's
``encode_frame`` whole, so output and errors are the twin's by construction.
"""
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_SetDefault
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy

from ._codec_py import (
    CLIENT_COMMANDS,
    DEFAULT_MAX_BODY_LENGTH,
    DEFAULT_MAX_COMMAND_LENGTH,
    DEFAULT_MAX_HEADER_LINE_LENGTH,
    DEFAULT_MAX_HEADERS,
    HEARTBEAT,
    MAX_LIMIT,
    SERVER_COMMANDS,
    VERSIONS,
    _content_length,
    _unescape,
)
from ._codec_py import encode_frame as _encode_frame_py
from ._codec_py import FrameHead, encode_headers
from .exception import StompProtocolError

__all__ = [
    "Frame",
    "FrameParser",
    "encode_frame",
    "encode_headers",
    "FrameHead",
    "HEARTBEAT",
    "VERSIONS",
    "CLIENT_COMMANDS",
    "SERVER_COMMANDS",
    "DEFAULT_MAX_COMMAND_LENGTH",
    "DEFAULT_MAX_HEADER_LINE_LENGTH",
    "DEFAULT_MAX_HEADERS",
    "DEFAULT_MAX_BODY_LENGTH",
    "MAX_LIMIT",
]

cdef extern from "Python.h":
    int _PyBytes_Resize(PyObject **string, Py_ssize_t newsize) except -1
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    void *PyUnicode_DATA(object o)
    const char *PyUnicode_AsUTF8AndSize(object o, Py_ssize_t *size) except NULL

cdef enum:
    S_IDLE = 0
    S_COMMAND = 1
    S_HEADERS = 2
    S_BODY = 3
    S_BIG = 4       # filling a large content-length body straight from the input (held in _big)
    S_BODY_NUL = 5  # large body complete (held in _big), its NUL still to come
    TABLE_SIZE = 512

# Commands and the header names brokers send most; each gets one interned str.
_COMMAND_LIST = sorted(CLIENT_COMMANDS | SERVER_COMMANDS)
_UNESCAPED = ("CONNECT", "CONNECTED", "STOMP")
_KNOWN_KEYS = (
    "content-length", "content-type", "destination", "subscription", "message-id",
    "ack", "expires", "priority", "timestamp", "persistent", "redelivered",
    "receipt-id", "receipt", "message", "version", "server", "heart-beat",
    "session", "id", "transaction", "correlation-id", "reply-to", "type",
    "amq-msg-type", "original-destination", "JMSXGroupID", "JMSXGroupSeq",
    "JMSXUserID", "transformation", "host", "login",
)

cdef inline unsigned int _slot(const char *p, Py_ssize_t n) noexcept nogil:
    if n <= 0:
        return 0
    return (<unsigned int>n * 31u + <unsigned char>p[0] * 7u + <unsigned char>p[n - 1] * 3u
            + <unsigned char>p[n >> 1]) % TABLE_SIZE


# A body with a content-length of at least this many bytes is copied straight
# from the input into its final bytes object instead of through the buffer.
# That object holds what arrived plus at most BIG_BODY, and grows (doubling,
# up to the declared size) as the body comes: a peer declaring a large body
# makes us hold only what it really sends.
cdef Py_ssize_t BIG_BODY = 1 << 20


cdef class _Interned:
    """Open table of interned str, looked up by a C string without allocating.
    A name whose slot is taken by another is simply not in the table."""
    cdef list _keep                         # owns the bytes and str below
    cdef const char *kptr[TABLE_SIZE]       # slot -> name bytes, or NULL
    cdef Py_ssize_t klen[TABLE_SIZE]
    cdef PyObject *vals[TABLE_SIZE]         # slot -> str (borrowed from _keep)

    def __init__(self, names):
        cdef bytes raw
        cdef unsigned int s
        self._keep = []
        for name in names:
            raw = name.encode("ascii")
            s = _slot(raw, len(raw))
            if self.kptr[s] == NULL:
                self._keep.append((raw, name))
                self.kptr[s] = raw
                self.klen[s] = len(raw)
                self.vals[s] = <PyObject *>name

    cdef inline int find(self, const char *p, Py_ssize_t n) noexcept:
        """Slot of the name p[:n], or -1."""
        cdef unsigned int s = _slot(p, n)
        if self.kptr[s] == NULL or self.klen[s] != n or memcmp(self.kptr[s], p, n) != 0:
            return -1
        return s

    cdef inline object value(self, int slot):
        return <object>self.vals[slot]


cdef _Interned _COMMANDS_T = _Interned(_COMMAND_LIST)
cdef _Interned _KEYS_T = _Interned(_KNOWN_KEYS)
cdef int CONTENT_LENGTH_SLOT = _KEYS_T.find(b"content-length", 14)
assert CONTENT_LENGTH_SLOT >= 0


cdef class Frame:
    """One STOMP frame: ``cmd`` (str), ``headers`` (dict[str, str]), ``body``
    (bytes as received; a connection with ``auto_decode`` makes it str),
    ``delivery_count`` (int, set by a connection's duplicate audit),
    ``link_seq`` (int, the socket that delivered it; 0 when none). See :class:`amqstomp._codec_py.Frame`."""
    cdef public object cmd
    cdef public object headers
    cdef public object body
    cdef public int delivery_count
    cdef public long long link_seq

    def __init__(self, cmd, headers=None, body=b""):
        self.cmd = cmd
        self.headers = headers if headers is not None else {}
        self.body = body
        self.delivery_count = 1
        self.link_seq = 0

    def __eq__(self, other):
        if not (hasattr(other, "cmd") and hasattr(other, "headers") and hasattr(other, "body")):
            return NotImplemented
        return self.cmd == other.cmd and self.headers == other.headers and self.body == other.body

    __hash__ = None

    def __repr__(self):
        body = self.body
        long = body is not None and len(body) > 64
        return "Frame(cmd=%r, headers=%r, body=%r%s)" % (
            self.cmd, self.headers, body[:64] if long else body, "..." if long else "")

    def __str__(self):
        return self.__repr__()

    def __reduce__(self):
        return (Frame, (self.cmd, self.headers, self.body))


cdef inline Frame _new_frame(object cmd, object headers, object body):
    cdef Frame f = Frame.__new__(Frame)
    f.cmd = cmd
    f.headers = headers
    f.body = body
    f.delivery_count = 1
    f.link_seq = 0
    return f


cdef class FrameParser:
    """Incremental STOMP frame parser (compiled). See
    :class:`amqstomp._codec_py.FrameParser` for arguments, behaviour and errors."""

    cdef public str version
    cdef readonly Py_ssize_t max_command_length
    cdef readonly Py_ssize_t max_header_line_length
    cdef readonly Py_ssize_t max_headers
    cdef readonly Py_ssize_t max_body_length
    cdef bytearray _buf
    cdef long long _base
    cdef int _state
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _scan
    cdef object _cmd
    cdef dict _headers
    cdef Py_ssize_t _nheaders
    cdef long long _clen
    cdef bint _crlf
    cdef bint _unescape
    cdef object _error
    cdef PyObject *_last_values[TABLE_SIZE]  # known-key slot -> last value (owned ref) or NULL
    cdef PyObject *_big     # bytes being filled in S_BIG / S_BODY_NUL (owned, the only reference) or NULL
    cdef Py_ssize_t _big_fill  # bytes of it filled (counted in offset's stream position, reported as buffered)
    cdef Py_ssize_t _big_cap   # its size (at most _clen; resized to _clen at the latest when full)

    def __init__(self, version="1.2",
                 max_command_length=DEFAULT_MAX_COMMAND_LENGTH,
                 max_header_line_length=DEFAULT_MAX_HEADER_LINE_LENGTH,
                 max_headers=DEFAULT_MAX_HEADERS,
                 max_body_length=DEFAULT_MAX_BODY_LENGTH):
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
        self._base = 0
        self._state = S_IDLE
        self._pos = 0
        self._scan = 0
        self._cmd = None
        self._headers = None
        self._nheaders = 0
        self._clen = -1
        self._error = None
        self._big_fill = 0
        self._big_cap = 0

    def __dealloc__(self):
        cdef int i
        for i in range(TABLE_SIZE):
            Py_XDECREF(self._last_values[i])
            self._last_values[i] = NULL
        Py_XDECREF(self._big)
        self._big = NULL

    @property
    def offset(self):
        """See :attr:`amqstomp._codec_py.FrameParser.offset`."""
        return self._base + self._pos - self._held()

    @property
    def buffered(self):
        """See :attr:`amqstomp._codec_py.FrameParser.buffered`."""
        return PyByteArray_GET_SIZE(self._buf) - self._pos + self._held()

    cdef inline Py_ssize_t _held(self) noexcept:
        """Bytes of a large body held outside the buffer (already counted in _base)."""
        return self._big_fill if self._state == S_BIG or self._state == S_BODY_NUL else 0

    cdef object _fail(self, str message, Py_ssize_t pos):
        self._error = StompProtocolError(message, self._base + pos)
        return self._error

    cdef inline object _value(self, int slot, const char *p, Py_ssize_t n):
        """Decode a header value, reusing the last str of this header when equal."""
        cdef PyObject *last
        if slot >= 0:
            last = self._last_values[slot]
            if (last != NULL and PyUnicode_IS_COMPACT_ASCII(<object>last)
                    and PyUnicode_GET_LENGTH(<object>last) == n
                    and memcmp(PyUnicode_DATA(<object>last), p, n) == 0):
                return <object>last
        value = PyUnicode_DecodeUTF8(p, n, NULL)
        if slot >= 0:
            Py_INCREF(value)
            Py_XDECREF(self._last_values[slot])
            self._last_values[slot] = <PyObject *>value
        return value

    cdef object _unescaped(self, const char *p, Py_ssize_t n, Py_ssize_t pos):
        """Undo 1.1/1.2 escaping of p[:n] (at buffer position ``pos``) and decode
        UTF-8; any fault is reported by the twin's exact rules and offsets."""
        cdef bytearray out = bytearray(n)
        cdef char *o = PyByteArray_AS_STRING(out)
        cdef Py_ssize_t i = 0, m = 0
        cdef char e
        cdef bint v12 = self.version == "1.2"
        while i < n:
            if p[i] != b'\\':
                o[m] = p[i]
                m += 1
                i += 1
                continue
            if i + 1 >= n:
                break
            e = p[i + 1]
            if e == b'n':
                o[m] = b'\n'
            elif e == b'c':
                o[m] = b':'
            elif e == b'\\':
                o[m] = b'\\'
            elif e == b'r' and v12:
                o[m] = b'\r'
            else:
                break
            m += 1
            i += 2
        if i == n:
            try:
                return PyUnicode_DecodeUTF8(o, m, NULL)
            except UnicodeDecodeError:
                pass
        # a bad escape or bad UTF-8: the twin raises with the right message and offset
        return _unescape(PyBytes_FromStringAndSize(p, n), self.version, self._base + pos)

    cdef object _decoded(self, const char *p, Py_ssize_t n, Py_ssize_t pos):
        """p[:n] (at buffer position ``pos``) decoded from UTF-8; a fault is the
        twin's StompProtocolError, at the offset of the first bad byte."""
        try:
            return PyUnicode_DecodeUTF8(p, n, NULL)
        except UnicodeDecodeError as exc:
            raise self._fail("header is not valid UTF-8", pos + exc.start) from None

    cdef int _header(self, const char *buf, Py_ssize_t pos, Py_ssize_t stop) except -1:
        """Parse the header line buf[pos:stop] into self._headers."""
        cdef const char *line = buf + pos
        cdef Py_ssize_t n = stop - pos
        cdef const char *colon = <const char *>memchr(line, b':', n)
        cdef Py_ssize_t klen, i
        cdef int slot
        cdef bint is_length
        cdef long long clen
        cdef Py_ssize_t start, digits
        cdef const char *p
        cdef Py_ssize_t m
        cdef object name = None
        cdef object value = None
        if colon == NULL:
            raise self._fail("header line without ':'", pos)
        klen = colon - line
        if klen == 0:
            raise self._fail("header line without a name before ':'", pos)
        if self._unescape and memchr(line, b'\\', n) != NULL:
            # ActiveMQ escapes every ':' of a 1.1/1.2 value (message-id, ack ...): a hot path
            if memchr(line, b'\\', klen) != NULL:
                name = self._unescaped(line, klen, pos)
                slot = -1
            else:
                slot = _KEYS_T.find(line, klen)
                name = _KEYS_T.value(slot) if slot >= 0 else self._decoded(line, klen, pos)
            value = self._unescaped(colon + 1, n - klen - 1, pos + klen + 1)
            if PyDict_SetDefault(self._headers, name, value) != <PyObject *>value:
                return 0  # repeated header: the first one wins
            if name == "content-length":
                self._clen = _content_length(value, self.max_body_length, self._base + pos)
            return 0
        slot = _KEYS_T.find(line, klen)
        is_length = slot == CONTENT_LENGTH_SLOT
        name = _KEYS_T.value(slot) if slot >= 0 else self._decoded(line, klen, pos)
        try:
            value = self._value(slot, colon + 1, n - klen - 1)
        except UnicodeDecodeError as exc:
            raise self._fail("header is not valid UTF-8", pos + klen + 1 + exc.start) from None
        if PyDict_SetDefault(self._headers, name, value) != <PyObject *>value:
            return 0  # repeated header: the first one wins
        if is_length:
            # ASCII digits, spaces around them tolerated (as ActiveMQ does)
            clen = 0
            p = colon + 1
            i = 0
            m = n - klen - 1
            while i < m and p[i] == b' ':
                i += 1
            start = i
            while i < m and b'0' <= p[i] <= b'9':
                if clen <= 100000000000000000:  # beyond 18 digits it exceeds any limit; never overflow
                    clen = clen * 10 + (p[i] - 48)
                i += 1
            digits = i - start
            while i < m and p[i] == b' ':
                i += 1
            if digits == 0 or i != m:
                raise self._fail("content-length %r is not a non-negative integer" % value[:32], pos)
            if clen > self.max_body_length:
                raise self._fail("content-length %s exceeds max_body_length=%d bytes"
                                 % (value[:32], self.max_body_length), pos)
            self._clen = clen
        return 0

    def feed(self, data):
        """Add bytes from the stream; return the frames they completed (maybe none)."""
        if self._error is not None:
            raise StompProtocolError("parser stopped by an earlier error: %s" % self._error,
                                     self._error.offset)
        cdef list frames = []
        try:
            self._feed(data, frames)
        except StompProtocolError as exc:
            exc.frames = frames
            self._error = exc
            raise
        return frames

    cdef int _start_big(self, const char *p, Py_ssize_t have, Py_ssize_t pos) except -1:
        """Start the large body of content-length _clen with the ``have`` bytes at p
        (buffer position ``pos``): reserve them plus at most BIG_BODY, not _clen."""
        cdef Py_ssize_t cap = self._clen if self._clen - have < BIG_BODY else have + BIG_BODY
        cdef object big
        try:
            big = PyBytes_FromStringAndSize(NULL, cap)
        except MemoryError:
            raise self._fail("no memory for a body of content-length %d" % self._clen, pos) from None
        if have:
            memcpy(<char *>PyBytes_AS_STRING(big), p, have)
        Py_XDECREF(self._big)
        Py_INCREF(big)
        self._big = <PyObject *>big  # the only reference once ``big`` goes: _PyBytes_Resize needs that
        self._big_cap = cap
        self._big_fill = have
        return 0

    cdef int _grow_big(self, Py_ssize_t need) except -1:
        """Make the large body hold ``need`` bytes: double it, up to _clen."""
        cdef Py_ssize_t cap = self._big_cap * 2
        if cap < need:
            cap = need
        if cap > self._clen:
            cap = self._clen
        try:
            _PyBytes_Resize(&self._big, cap)  # on failure it frees the body and sets NULL
        except MemoryError:
            raise self._fail("no memory for a body of content-length %d" % self._clen,
                             -self._big_fill) from None  # at the body's start
        self._big_cap = cap
        return 0

    cdef object _take_big(self):
        """The complete large body, handed over."""
        cdef object body
        if self._big_cap != self._clen:
            _PyBytes_Resize(&self._big, self._clen)
        body = <object>self._big
        Py_XDECREF(self._big)
        self._big = NULL
        self._big_cap = 0
        return body

    cdef object _fill_big(self, data):
        """Copy input into the large body; return the input left after it, or None."""
        cdef const unsigned char[::1] view = data
        cdef Py_ssize_t n = view.shape[0]
        cdef Py_ssize_t want = self._clen - self._big_fill
        cdef Py_ssize_t take = n if n < want else want
        if take > 0:
            if self._big_fill + take > self._big_cap:
                self._grow_big(self._big_fill + take)
            memcpy(<char *>PyBytes_AS_STRING(<object>self._big) + self._big_fill, &view[0], take)
            self._big_fill += take
            self._base += take
        if self._big_fill < self._clen:
            return None
        self._state = S_BODY_NUL
        return data[take:]

    cdef int _feed(self, data, list frames) except -1:
        if self._state == S_BIG:
            data = self._fill_big(data)
            if data is None:
                return 0
        self._buf += data
        cdef const char *buf = PyByteArray_AS_STRING(self._buf)
        cdef Py_ssize_t end = PyByteArray_GET_SIZE(self._buf)
        cdef Py_ssize_t pos = self._pos
        cdef int state = self._state
        cdef const char *lf
        cdef const char *nul
        cdef Py_ssize_t stop, lfpos, clen
        cdef int slot
        cdef char c
        cdef Frame frame
        cdef object cmd, body
        self._crlf = self.version == "1.2"
        while True:
            if state == S_IDLE:
                while pos < end:
                    c = buf[pos]
                    if c == b'\n':
                        pos += 1
                    elif c == b'\r':
                        if pos + 1 >= end:
                            break
                        if buf[pos + 1] != b'\n':
                            raise self._fail("CR not followed by LF between frames", pos)
                        pos += 2
                    else:
                        break
                if pos >= end or buf[pos] == b'\r':
                    break
                state = S_COMMAND
            if state == S_COMMAND:
                lf = <const char *>memchr(buf + pos, b'\n', end - pos)
                if lf == NULL:
                    if end - pos > self.max_command_length + self._crlf:  # + a CR whose LF is to come
                        raise self._fail("command line longer than max_command_length=%d bytes"
                                         % self.max_command_length, pos)
                    break
                lfpos = lf - buf
                stop = lfpos
                if self._crlf and stop > pos and buf[stop - 1] == b'\r':
                    stop -= 1
                if stop - pos > self.max_command_length:
                    raise self._fail("command line longer than max_command_length=%d bytes"
                                     % self.max_command_length, pos)
                slot = _COMMANDS_T.find(buf + pos, stop - pos)
                if slot < 0:
                    raise self._fail("unknown command %r"
                                     % PyBytes_FromStringAndSize(buf + pos, min(stop - pos, 64)).decode("latin-1"),
                                     pos)
                self._cmd = _COMMANDS_T.value(slot)
                self._headers = {}
                self._nheaders = 0
                self._clen = -1
                self._unescape = self.version != "1.0" and self._cmd not in _UNESCAPED
                pos = lfpos + 1
                state = S_HEADERS
            if state == S_HEADERS:
                while True:
                    lf = <const char *>memchr(buf + pos, b'\n', end - pos)
                    if lf == NULL:
                        if end - pos > self.max_header_line_length + self._crlf:  # + a CR whose LF is to come
                            raise self._fail("header line longer than max_header_line_length=%d bytes"
                                             % self.max_header_line_length, pos)
                        break
                    lfpos = lf - buf
                    stop = lfpos
                    if self._crlf and stop > pos and buf[stop - 1] == b'\r':
                        stop -= 1
                    if stop == pos:
                        pos = lfpos + 1
                        state = S_BODY
                        self._scan = pos
                        break
                    if stop - pos > self.max_header_line_length:
                        raise self._fail("header line longer than max_header_line_length=%d bytes"
                                         % self.max_header_line_length, pos)
                    self._nheaders += 1
                    if self._nheaders > self.max_headers:
                        raise self._fail("more than max_headers=%d header lines" % self.max_headers, pos)
                    self._header(buf, pos, stop)
                    pos = lfpos + 1
                if state != S_BODY:
                    break
            if state == S_BODY_NUL:
                if pos >= end:
                    break
                if buf[pos] != 0:
                    raise self._fail("frame body of content-length %d not followed by NUL" % self._clen, pos)
                pos += 1
                body = self._take_big()  # _big_fill stays: offset/buffered still see it if this feed fails
                state = S_BODY
                self._clen = -2  # emit below
            if state == S_BODY:
                clen = self._clen
                if clen == -2:
                    pass  # large body completed above
                elif clen >= 0:
                    if end - pos < clen + 1:
                        if clen >= BIG_BODY:
                            self._start_big(buf + pos, end - pos, pos)
                            pos = end
                            state = S_BIG
                        break
                    if buf[pos + clen] != 0:
                        raise self._fail("frame body of content-length %d not followed by NUL" % clen,
                                         pos + clen)
                    body = PyBytes_FromStringAndSize(buf + pos, clen)
                    pos += clen + 1
                else:
                    nul = <const char *>memchr(buf + self._scan, 0, end - self._scan)
                    if nul == NULL:
                        self._scan = end
                        if end - pos > self.max_body_length:
                            raise self._fail("frame body longer than max_body_length=%d bytes"
                                             % self.max_body_length, pos)
                        break
                    if (nul - buf) - pos > self.max_body_length:
                        raise self._fail("frame body longer than max_body_length=%d bytes"
                                         % self.max_body_length, pos)
                    body = PyBytes_FromStringAndSize(buf + pos, (nul - buf) - pos)
                    pos = (nul - buf) + 1
                frame = _new_frame(self._cmd, self._headers, body)
                frames.append(frame)
                self._headers = None
                state = S_IDLE
                if self._cmd == "CONNECTED":
                    version = frame.headers.get("version", "1.0")
                    if version in VERSIONS:
                        self.version = version
                        self._crlf = version == "1.2"
        if pos:
            del self._buf[:pos]
            self._base += pos
            self._scan = max(0, self._scan - pos)
            pos = 0
        self._pos = pos
        self._state = state
        return 0


# --------------------------------------------------------------------------- encoding

cdef frozenset _ENCODE_COMMANDS = frozenset(_COMMAND_LIST)
cdef frozenset _UNESCAPED_SET = frozenset(_UNESCAPED)

cdef enum:
    ESC_NONE = 0  # STOMP 1.0, CONNECT/STOMP/CONNECTED: no escaping; CR, LF (and ':' in names) refused
    ESC_11 = 1    # \\ \n \c; a CR is refused
    ESC_12 = 2    # \\ \n \c \r
    FALLBACK = 1  # a helper's answer: let the twin encode this frame (it may raise)


cdef struct _Out:
    char *p
    Py_ssize_t n
    Py_ssize_t cap


cdef int _reserve(_Out *o, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap
    cdef char *p
    if o.n + extra <= o.cap:
        return 0
    cap = o.cap * 2
    if cap < o.n + extra:
        cap = o.n + extra + 256
    p = <char *>realloc(o.p, cap)
    if p == NULL:
        raise MemoryError()
    o.p = p
    o.cap = cap
    return 0


cdef int _put(_Out *o, const char *s, Py_ssize_t n) except -1:
    _reserve(o, n)
    memcpy(o.p + o.n, s, n)
    o.n += n
    return 0


cdef int _put_text(_Out *o, const char *s, Py_ssize_t n, int esc, bint is_name) except -1:
    """Append the UTF-8 text s[:n], escaped per ``esc``; FALLBACK when the twin
    has to decide (it refuses the text)."""
    cdef Py_ssize_t i, special = 0
    cdef char c
    cdef char *w
    for i in range(n):
        c = s[i]
        if c == b'\\' or c == b':' or c == b'\n' or c == b'\r':
            if esc == ESC_NONE:
                if c == b'\n' or c == b'\r' or (c == b':' and is_name):
                    return FALLBACK
            elif c == b'\r' and esc == ESC_11:
                return FALLBACK
            else:
                special += 1
    if esc == ESC_NONE or special == 0:
        return _put(o, s, n)
    _reserve(o, n + special)
    w = o.p + o.n
    for i in range(n):
        c = s[i]
        if c == b'\\':
            w[0] = b'\\'
            w[1] = b'\\'
            w += 2
        elif c == b':':
            w[0] = b'\\'
            w[1] = b'c'
            w += 2
        elif c == b'\n':
            w[0] = b'\\'
            w[1] = b'n'
            w += 2
        elif c == b'\r':
            w[0] = b'\\'
            w[1] = b'r'
            w += 2
        else:
            w[0] = c
            w += 1
    o.n = w - o.p
    return 0


cdef Py_ssize_t _decimal(char *buf, Py_ssize_t value) noexcept:
    """Write value >= 0 in decimal at buf (room for 20 digits); return its length."""
    cdef char tmp[24]
    cdef Py_ssize_t n = 0, i
    if value == 0:
        buf[0] = b'0'
        return 1
    while value > 0:
        tmp[n] = <char>(48 + value % 10)
        value //= 10
        n += 1
    for i in range(n):
        buf[i] = tmp[n - 1 - i]
    return n


cdef object _encode(object command, object headers, object body, object version, object auto_content_length,
                    object head):
    """The frame as bytes, or None when the twin must encode it."""
    cdef int esc
    cdef object payload
    cdef const char *pdata
    cdef Py_ssize_t plen
    cdef const char *s
    cdef Py_ssize_t n
    cdef _Out o
    cdef bint have_length = False
    cdef char digits[24]
    cdef Py_ssize_t ndigits
    cdef char digits2[24]
    cdef Py_ssize_t ndigits2
    cdef long long num
    cdef object text
    cdef bytes out
    cdef char *w
    if type(command) is not str or command not in _ENCODE_COMMANDS:
        return None
    if version == "1.2" and type(version) is str:
        esc = ESC_12
    elif version == "1.1" and type(version) is str:
        esc = ESC_11
    elif version == "1.0" and type(version) is str:
        esc = ESC_NONE
    else:
        return None
    if esc != ESC_NONE and command in _UNESCAPED_SET:
        esc = ESC_NONE
    if body is None:
        payload = b""
    elif type(body) is bytes:
        payload = body
    elif type(body) is str:
        try:
            s = PyUnicode_AsUTF8AndSize(body, &n)
        except UnicodeEncodeError:
            return None
        payload = PyBytes_FromStringAndSize(s, n)
    elif isinstance(body, (bytes, bytearray, memoryview)):
        payload = bytes(body)
    else:
        return None
    pdata = PyBytes_AS_STRING(payload)
    plen = len(payload)
    if headers is not None and type(headers) is not dict:
        return None
    if type(head) is not bytes or (len(<bytes>head) and (<bytes>head)[len(<bytes>head) - 1] != 10):
        return None  # the twin names what is wrong with it
    o.p = <char *>malloc(512)
    if o.p == NULL:
        raise MemoryError()
    o.n = 0
    o.cap = 512
    try:
        s = PyUnicode_AsUTF8AndSize(command, &n)
        _put(&o, s, n)
        _put(&o, "\n", 1)
        if len(<bytes>head):
            _put(&o, PyBytes_AS_STRING(head), len(<bytes>head))
        if headers:
            ndigits = _decimal(digits, plen)
            for key, value in (<dict>headers).items():
                if value is None:
                    continue
                if type(key) is not str:
                    return None
                try:
                    s = PyUnicode_AsUTF8AndSize(key, &n)
                except UnicodeEncodeError:
                    return None
                if n == 0:
                    return None
                if type(value) is int and 0 <= value < 1000000000000000000:
                    # digits written straight into the frame (timestamps, lengths)
                    num = value
                    if n == 14 and memcmp(s, b"content-length", 14) == 0:
                        if num != plen:
                            return None  # the twin raises
                        have_length = True
                    if _put_text(&o, s, n, esc, True) == FALLBACK:
                        return None
                    _put(&o, ":", 1)
                    ndigits2 = _decimal(digits2, num)
                    _put(&o, digits2, ndigits2)
                    _put(&o, "\n", 1)
                    continue
                if type(value) is str:
                    text = value
                elif value is True:
                    text = "true"
                elif value is False:
                    text = "false"
                elif type(value) is int:
                    text = str(value)
                else:
                    return None  # lists, bytes, other objects: the twin's rules
                if n == 14 and memcmp(s, b"content-length", 14) == 0:
                    have_length = True
                    # the value must be the body's size written as the twin writes it
                    try:
                        s = PyUnicode_AsUTF8AndSize(text, &n)
                    except UnicodeEncodeError:
                        return None
                    if n != ndigits or memcmp(s, digits, n) != 0:
                        return None
                    _put(&o, b"content-length:", 15)
                    _put(&o, s, n)
                    _put(&o, "\n", 1)
                    continue
                if _put_text(&o, s, n, esc, True) == FALLBACK:
                    return None
                _put(&o, ":", 1)
                try:
                    s = PyUnicode_AsUTF8AndSize(text, &n)
                except UnicodeEncodeError:
                    return None
                if _put_text(&o, s, n, esc, False) == FALLBACK:
                    return None
                _put(&o, "\n", 1)
        if not have_length and plen:
            if auto_content_length:
                ndigits = _decimal(digits, plen)
                _put(&o, b"content-length:", 15)
                _put(&o, digits, ndigits)
                _put(&o, "\n", 1)
            elif memchr(pdata, 0, plen) != NULL:
                return None
        _put(&o, "\n", 1)
        out = PyBytes_FromStringAndSize(NULL, o.n + plen + 1)
        w = PyBytes_AS_STRING(out)
        memcpy(w, o.p, o.n)
        if plen:
            memcpy(w + o.n, pdata, plen)
        w[o.n + plen] = 0
        return out
    finally:
        free(o.p)


def encode_frame(command, headers=None, body=None, version="1.2", auto_content_length=True, head=b""):
    """Encode one frame as bytes ready for the socket (compiled). See
    :func:`amqstomp._codec_py.encode_frame` for arguments, output and errors,
    which are the same."""
    out = _encode(command, headers, body, version, auto_content_length, head)
    if out is None:
        return _encode_frame_py(command, headers, body, version, auto_content_length, head)
    return out
