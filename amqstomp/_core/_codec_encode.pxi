# Included by _codec.pyx (Cython include: one extension module): the frame encoder.
# The pure twin is amqstomp._core._codec_py.encode_frame, which this hands every case it does not take.

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


#: 1 for the bytes header text may have to escape or refuse (\\ : LF CR), else 0: one table load per
#: byte in _put_text's loops instead of four comparisons (filled once, at import)
cdef unsigned char _TEXT_SPECIAL[256]


cdef void _fill_text_special() noexcept:
    cdef int i
    for i in range(256):
        _TEXT_SPECIAL[i] = 0
    _TEXT_SPECIAL[<unsigned char>b'\\'] = 1
    _TEXT_SPECIAL[<unsigned char>b':'] = 1
    _TEXT_SPECIAL[<unsigned char>b'\n'] = 1
    _TEXT_SPECIAL[<unsigned char>b'\r'] = 1


_fill_text_special()


cdef int _put_text(_Out *o, const char *s, Py_ssize_t n, int esc, bint is_name) except -1:
    """Append the UTF-8 text s[:n], escaped per ``esc``; FALLBACK when the twin
    has to decide (it refuses the text)."""
    cdef Py_ssize_t i, special = 0
    cdef char c
    cdef char *w
    for i in range(n):
        c = s[i]
        if _TEXT_SPECIAL[<unsigned char>c]:  # \\ : LF CR
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
        if not _TEXT_SPECIAL[<unsigned char>c]:
            w[0] = c
            w += 1
        elif c == b'\\':
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
        else:  # CR
            w[0] = b'\\'
            w[1] = b'r'
            w += 2
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
    :func:`amqstomp._core._codec_py.encode_frame` for arguments, output and errors,
    which are the same."""
    out = _encode(command, headers, body, version, auto_content_length, head)
    if out is None:
        return _encode_frame_py(command, headers, body, version, auto_content_length, head)
    return out
