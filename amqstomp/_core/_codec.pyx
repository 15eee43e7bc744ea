# cython: language_level=3
"""STOMP frame codec, compiled.

Same public names and behaviour as the pure-Python twin
:mod:`amqstomp._core._codec_py` (whose docstrings are the reference); chosen by
:mod:`amqstomp.codec`. No I/O, no threads, no clocks: bytes in, frames out.

Speed comes from scanning a C view of the receive buffer (or of a ``bytes``
input itself, when nothing is buffered) with ``memchr``, reusing interned
``str`` objects for the command and the header names that ActiveMQ sends,
reusing the previous ``str`` of a header whose value did not change
(destination, subscription, priority ...; ``ack`` repeating ``message-id``),
and starting a MESSAGE's ``headers`` dict as a copy of a template made from an
earlier MESSAGE with the same names in the same order (sized already; only the
values that changed are set). The template keeps its raw header lines: a later
MESSAGE's lines with the same bytes are not parsed at all, only compared
(``_codec_template.pxi``). The dict a frame gets is always its own, a plain
``dict`` with every value decoded. ``Frame.cmd``, ``.headers`` and ``.body`` are
member descriptors, whose reads CPython specializes.

``encode_frame`` writes the frame into one C buffer (escaping on the UTF-8
bytes: every escaped character is ASCII, and no byte of a multi-byte UTF-8
sequence is). It handles the frames a client sends: a ``dict`` of ``str``
names to ``str`` / ``int`` / ``bool`` / None values and a ``bytes`` / ``str``
body. Anything else, and every case the twin refuses or treats specially
(lists of values, a ``content-length`` not written as the body's exact size,
a character that cannot be escaped), is handed to the twin's
``encode_frame`` whole, so output and errors are the twin's by construction.
"""
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Copy, PyDict_GetItem, PyDict_SetDefault, PyDict_SetItem
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyObject_GenericSetAttr
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdlib cimport free, malloc, realloc
from libc.stdint cimport uint64_t
from libc.string cimport memchr, memcmp, memcpy
cimport cython
import copy

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
from ._body_read import read_body_chunk, read_count
from ..exception import StompProtocolError

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
    # PyUnicode_DecodeUTF8 returning NULL with the error set, for the caller to handle
    PyObject *_decode_utf8_raw "PyUnicode_DecodeUTF8"(const char *s, Py_ssize_t size, const char *errors)
    void PyErr_Clear()
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyMemoryView_FromMemory(char *mem, Py_ssize_t size, int flags)
    int PyBUF_WRITE
    bint PyLong_CheckExact(object o)
    Py_ssize_t PyLong_AsSsize_t(object o) except? -1

cdef enum:
    S_IDLE = 0
    S_COMMAND = 1
    S_HEADERS = 2
    S_BODY = 3
    S_BIG = 4       # filling a large content-length body straight from the input (held in _big)
    S_BODY_NUL = 5  # large body complete (held in _big), its NUL still to come
    TABLE_SIZE = 512
    MAX_TEMPLATE = 32  # header lines a MESSAGE template holds (FrameParser._tmpl)
    SMALL_VALUE = 256  # an escaped header of at most this many bytes is unescaped in the parser's buffer
    SMALL_ESCAPES = 128  # escapes such a value holds at most (SMALL_VALUE / 2)
    TEMPLATE_BYTES = 4096  # raw header line bytes a MESSAGE template holds (_codec_template.pxi)

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


cdef inline object _ascii_str(const char *p, Py_ssize_t n):
    """p[:n] as a new str when every byte is ASCII (what UTF-8 decoding gives, without the
    decoder's general path), else None."""
    cdef Py_ssize_t i = 0
    cdef uint64_t word, acc = 0
    while i + 8 <= n:
        memcpy(&word, p + i, 8)
        acc |= word
        i += 8
    while i < n:
        acc |= <unsigned char>p[i]
        i += 1
    if acc & 0x8080808080808080ULL:
        return None
    text = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(text), p, n)
    return text


cdef uint64_t _MESSAGE_LINE
memcpy(&_MESSAGE_LINE, b"MESSAGE\n", 8)


cdef inline bint _message_line(const char *p) noexcept:
    """Whether the 8 bytes at p are b"MESSAGE\\n" (one 8-byte compare)."""
    cdef uint64_t word
    memcpy(&word, p, 8)
    return word == _MESSAGE_LINE


# A body with a content-length of at least this many bytes is copied straight
# from the input into its final bytes object instead of through the buffer.
# That object holds what arrived plus at most BIG_BODY, and grows (doubling,
# up to the declared size) as the body comes: a peer declaring a large body
# makes us hold only what it really sends.
cdef Py_ssize_t BIG_BODY = 1 << 20
# A body of at least this many bytes that has not fully arrived takes that route too (allocated
# whole when under BIG_BODY): a 64 KiB body is then copied once from the input, or not at all when
# the rest of it is read straight into it (FrameParser.read_body), never through the buffer.
cdef Py_ssize_t DIRECT_BODY = 16 * 1024


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
cdef int MESSAGE_SLOT = _COMMANDS_T.find(b"MESSAGE", 7)
cdef int CONNECTED_SLOT = _COMMANDS_T.find(b"CONNECTED", 9)
cdef int CONNECT_SLOT = _COMMANDS_T.find(b"CONNECT", 7)
cdef int STOMP_SLOT = _COMMANDS_T.find(b"STOMP", 5)
assert min(CONTENT_LENGTH_SLOT, MESSAGE_SLOT, CONNECTED_SLOT, CONNECT_SLOT, STOMP_SLOT) >= 0
assert len(_UNESCAPED) == 3  # the commands whose headers are not escaped: the three slots above


@cython.freelist(64)
cdef class Frame:
    """One STOMP frame: ``cmd`` (str), ``headers`` (dict[str, str]), ``body``
    (bytes as received; a connection with ``auto_decode`` makes it str),
    ``delivery_count`` (int, set by a connection's duplicate audit),
    ``link_seq`` (int, the socket that delivered it; 0 when none),
    ``original_headers`` (the headers as the frame was made: copied by the
    constructor, and for a parsed frame when first read). See :class:`amqstomp._core._frame_py.Frame`."""
    cdef object cmd      # read through member descriptors (_frame_members below), set by __setattr__
    cdef object headers
    cdef object body
    cdef public int delivery_count
    cdef public long long link_seq
    cdef object _original_headers

    def __init__(self, cmd, headers=None, body=b""):
        self.cmd = cmd
        if headers is None:
            headers = {}
        self.headers = headers
        self._original_headers = headers.copy() if type(headers) is dict else copy.copy(headers)
        self.body = body
        self.delivery_count = 1
        self.link_seq = 0

    @property
    def original_headers(self):
        """The headers as they were when the frame was made (stomp.py 9.0
        ``Frame.original_headers``): a received frame's as they arrived, before
        listeners' ``on_before_message`` changed ``headers``. Assignable."""
        cdef object headers
        if self._original_headers is None:
            headers = self.headers
            self._original_headers = headers.copy() if type(headers) is dict else copy.copy(headers)
        return self._original_headers

    @original_headers.setter
    def original_headers(self, value):
        self._original_headers = value

    def __eq__(self, other):
        if not (hasattr(other, "cmd") and hasattr(other, "headers") and hasattr(other, "body")):
            return NotImplemented
        return self.cmd == other.cmd and self.headers == other.headers and self.body == other.body

    __hash__ = None

    def __setattr__(self, name, value):
        # cmd, headers and body have read-only member descriptors (fast reads: below); any
        # object may be assigned to them, as to stomp.py's; deleting one leaves None
        if name == "headers":
            self.headers = value
        elif name == "body":
            self.body = value
        elif name == "cmd":
            self.cmd = value
        else:
            PyObject_GenericSetAttr(self, name, value)

    def __delattr__(self, name):
        if name == "headers" or name == "body" or name == "cmd":
            self.__setattr__(name, None)
        else:
            PyObject_GenericSetAttr(self, name, <object>NULL)

    def __repr__(self):
        body = self.body
        long = body is not None and len(body) > 64
        return "Frame(cmd=%r, headers=%r, body=%r%s)" % (
            self.cmd, self.headers, body[:64] if long else body, "..." if long else "")

    def __str__(self):
        return self.__repr__()

    def __reduce__(self):
        return (Frame, (self.cmd, self.headers, self.body))


# Frame's cmd, headers and body are read through member descriptors (T_OBJECT_EX, read-only:
# __setattr__ sets them), not Cython's getset properties: CPython specializes a read of a member
# descriptor in Python code (LOAD_ATTR_SLOT: one load from the object) and not of a property, and
# listeners, the dispatcher and the engine read them for every message.
cdef extern from *:
    """
    #include <structmember.h>
    #define __PYX_AMQ_FRAME_OFFSET(field) offsetof(struct __pyx_obj_8amqstomp_5_core_6_codec_Frame, field)
    static PyMemberDef __pyx_amq_frame_members[4];
    static int __pyx_amq_frame_members_install(PyTypeObject *t, Py_ssize_t cmd, Py_ssize_t headers,
                                               Py_ssize_t body) {
        const char *names[3] = {"cmd", "headers", "body"};
        Py_ssize_t offsets[3] = {cmd, headers, body};
        int i;
        for (i = 0; i < 3; i++) {
            PyObject *descr;
            __pyx_amq_frame_members[i].name = names[i];
            __pyx_amq_frame_members[i].type = T_OBJECT_EX;
            __pyx_amq_frame_members[i].offset = offsets[i];
            __pyx_amq_frame_members[i].flags = READONLY;
            __pyx_amq_frame_members[i].doc = NULL;
            descr = PyDescr_NewMember(t, &__pyx_amq_frame_members[i]);
            if (descr == NULL)
                return -1;
            if (PyDict_SetItemString(t->tp_dict, names[i], descr) < 0) {
                Py_DECREF(descr);
                return -1;
            }
            Py_DECREF(descr);
        }
        PyType_Modified(t);
        return 0;
    }
    """
    Py_ssize_t _FRAME_CMD "__PYX_AMQ_FRAME_OFFSET(cmd)"
    Py_ssize_t _FRAME_HEADERS "__PYX_AMQ_FRAME_OFFSET(headers)"
    Py_ssize_t _FRAME_BODY "__PYX_AMQ_FRAME_OFFSET(body)"
    int _frame_members_install "__pyx_amq_frame_members_install"(type t, Py_ssize_t cmd, Py_ssize_t headers,
                                                                 Py_ssize_t body) except -1


_frame_members_install(Frame, _FRAME_CMD, _FRAME_HEADERS, _FRAME_BODY)


cdef inline Frame _new_frame(object cmd, object headers, object body):
    cdef Frame f = Frame.__new__(Frame)
    f.cmd = cmd
    f.headers = headers
    f.body = body
    f.delivery_count = 1
    f.link_seq = 0
    f._original_headers = None
    return f


# the parser (with its large-body fill) and the encoder, textually part of this module (Cython "include")
include "_codec_parse.pxi"
include "_codec_template.pxi"
include "_codec_big.pxi"
include "_codec_encode.pxi"
