# Included by _codec.pyx (Cython include: one extension module): the incremental parser.
# It uses the interned tables and Frame of _codec.pyx; the pure twin is amqstomp._core._codec_py.FrameParser.

cdef class FrameParser:
    """Incremental STOMP frame parser (compiled). See
    :class:`amqstomp._core._codec_py.FrameParser` for arguments, behaviour and errors."""

    cdef public str version
    cdef readonly Py_ssize_t max_command_length
    cdef readonly Py_ssize_t max_header_line_length
    cdef readonly Py_ssize_t max_headers
    cdef readonly Py_ssize_t max_body_length
    cdef bytearray _buf
    cdef object _direct     # the bytes a feed parses in place (not via _buf), else None
    cdef Py_ssize_t _direct_from   # ... from this index on (its head went into _buf: a split)
    cdef Py_ssize_t _direct_shift  # what _base was moved by when the in-place pass began
    cdef long long _base
    cdef int _state
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _scan
    cdef object _cmd
    cdef int _cmd_slot
    cdef dict _headers
    cdef Py_ssize_t _nheaders
    cdef long long _clen
    cdef bint _crlf         # version 1.2: CRLF ends a line, and \\r is an escape
    cdef bint _v10          # version 1.0: nothing is escaped
    cdef bint _unescape
    # ActiveMQ's ``ack`` repeats ``message-id``: the last escaped value of this feed (its raw bytes
    # in _buf, valid until _buf changes: reset at each feed and version change) and its str
    cdef const char *_esc_p
    cdef Py_ssize_t _esc_n
    cdef object _esc_val
    # The last escaped value unescaped (at most SMALL_VALUE bytes; _pv_n 0: none): its raw bytes, its
    # output, where its escapes start, the version rule it was read by (_codec_template.pxi)
    cdef char _pv_raw[SMALL_VALUE]
    cdef char _pv_out[SMALL_VALUE]
    cdef unsigned char _pv_esc[SMALL_ESCAPES]
    cdef Py_ssize_t _pv_n
    cdef int _pv_nesc
    cdef bint _pv_v12
    # The MESSAGE template: a dict of the header names (all known keys, none repeated) the last
    # MESSAGE built from scratch had, in order, with its values. A MESSAGE starts as a copy of it
    # (one memcpy, sized already) and only the values that changed are set; a header line that
    # does not match the template's next name turns the frame back into a fresh dict of the lines
    # matched so far (_leave_template), which then goes on as without a template.
    cdef dict _tmpl
    cdef int _tmpl_n
    cdef int _tmpl_slots[MAX_TEMPLATE]
    cdef PyObject *_tmpl_vals[MAX_TEMPLATE]  # borrowed from _tmpl (never changed while it is held)
    cdef int _tidx          # header lines of this frame matched with the template, or -1: none used
    cdef int _tmpl_vcode    # _vcode() of the version the template was made under
    cdef long long _tmpl_clen  # its content-length (when one of its lines is content-length)
    # raw line i of the template is _tmpl_raw[_tmpl_off[i]:_tmpl_off[i + 1]]; a line with exactly
    # these bytes has the template's value (same version): nothing to decode (_codec_template.pxi)
    cdef Py_ssize_t _tmpl_off[MAX_TEMPLATE + 1]
    cdef int _tmpl_run[MAX_TEMPLATE]   # lines t .. _tmpl_run[t] - 1 are compared in one go
    cdef char _tmpl_vol[MAX_TEMPLATE]  # line t changed once: parsed, not compared
    cdef int _tmpl_clidx    # the template's content-length line, or -1
    cdef char _tmpl_raw[TEMPLATE_BYTES]
    cdef Py_ssize_t _fresh_off[MAX_TEMPLATE + 1]  # the same for the frame built without a template
    cdef char _fresh_raw[TEMPLATE_BYTES]
    cdef bint _fresh_ok     # a frame built without the template can become the template
    cdef int _nfresh
    cdef int _fresh_slots[MAX_TEMPLATE]
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
        self._direct = None
        self._base = 0
        self._state = S_IDLE
        self._pos = 0
        self._scan = 0
        self._cmd = None
        self._cmd_slot = -1
        self._headers = None
        self._tmpl = None
        self._tmpl_n = 0
        self._tidx = -1
        self._fresh_ok = False
        self._nfresh = 0
        self._esc_p = NULL
        self._esc_n = 0
        self._esc_val = None
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
        """See :attr:`amqstomp._core._codec_py.FrameParser.offset`."""
        return self._base + self._pos - self._held()

    @property
    def buffered(self):
        """See :attr:`amqstomp._core._codec_py.FrameParser.buffered`."""
        return PyByteArray_GET_SIZE(self._buf) - self._pos + self._held()

    @property
    def body_missing(self):
        """See :attr:`amqstomp._core._codec_py.FrameParser.body_missing`."""
        return _body_missing(self)

    def read_body(self, readinto):
        """See :meth:`amqstomp._core._codec_py.FrameParser.read_body`; a large body
        (held outside the buffer) gets ``readinto`` a view of its own bytes."""
        return _big_read(self, readinto) if self._state == S_BIG and self._error is None \
            else read_body_chunk(self, readinto)

    cdef inline Py_ssize_t _held(self) noexcept:
        """Bytes of a large body held outside the buffer (already counted in _base)."""
        return self._big_fill if self._state == S_BIG or self._state == S_BODY_NUL else 0

    cdef inline int _vcode(self) noexcept:
        """What of the version decides how a header line reads: CRLF (1.2), escapes (not 1.0)."""
        return self._crlf + 2 * self._v10

    cdef object _fail(self, str message, Py_ssize_t pos):
        self._error = StompProtocolError(message, self._base + pos)
        return self._error

    cdef inline object _value(self, int slot, const char *p, Py_ssize_t n, Py_ssize_t pos):
        """Decode a header value p[:n] (at buffer position ``pos``), reusing the last
        str of this header when equal; bad UTF-8 is the twin's StompProtocolError."""
        cdef PyObject *last
        cdef PyObject *made
        if slot >= 0:
            last = self._last_values[slot]
            if (last != NULL and PyUnicode_IS_COMPACT_ASCII(<object>last)
                    and PyUnicode_GET_LENGTH(<object>last) == n
                    and memcmp(PyUnicode_DATA(<object>last), p, n) == 0):
                return <object>last
        value = _ascii_str(p, n)
        if value is None:
            made = _decode_utf8_raw(p, n, NULL)  # no try block on the hot path
            if made == NULL:
                PyErr_Clear()
                return self._decoded(p, n, pos)  # raises, at the first bad byte
            value = <object>made
            Py_DECREF(value)  # <object> took a reference of its own: the new str's is handed over
        if slot >= 0:
            Py_INCREF(value)
            Py_XDECREF(self._last_values[slot])
            self._last_values[slot] = <PyObject *>value
        return value

    cdef inline object _unescaped_value(self, const char *p, Py_ssize_t n, Py_ssize_t pos, const char *first):
        """_unescaped, reusing the str of the previous escaped value of this feed
        when the bytes are the same (ActiveMQ's ``ack`` repeats ``message-id``)."""
        if self._esc_p != NULL and self._esc_n == n and memcmp(self._esc_p, p, n) == 0:
            return self._esc_val
        value = _unescaped(self, p, n, pos, first)
        self._esc_p = p
        self._esc_n = n
        self._esc_val = value
        return value

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
        cdef const char *colon = NULL
        cdef const char *slash = NULL
        cdef bint tvol = False
        cdef Py_ssize_t klen, i
        cdef int slot
        cdef bint escaped
        cdef Py_ssize_t size
        cdef long long clen
        cdef Py_ssize_t start, digits
        cdef const char *p
        cdef Py_ssize_t m
        cdef object name = None
        cdef object value = None
        if self._tidx >= 0:  # the template's next name, with another value? (no colon search, no hash)
            slot = _tmpl_name(self, line, n)
            if slot >= 0:
                klen = _KEYS_T.klen[slot]
                colon = line + klen
                name = _KEYS_T.value(slot)
                tvol = self._tmpl_vol[self._tidx]  # changes every time: no reuse of the last str
                slash = <const char *>memchr(colon + 1, b'\\', n - klen - 1) if self._unescape else NULL
                escaped = slash != NULL
        if colon == NULL:
            colon = <const char *>memchr(line, b':', n)
            if colon == NULL:
                raise self._fail("header line without ':'", pos)
            klen = colon - line
            if klen == 0:
                raise self._fail("header line without a name before ':'", pos)
            # ActiveMQ escapes every ':' of a 1.1/1.2 value (message-id, ack ...): a hot path
            slash = <const char *>memchr(line, b'\\', n) if self._unescape else NULL
            escaped = slash != NULL
            if escaped and memchr(line, b'\\', klen) != NULL:
                name = _unescaped(self, line, klen, pos, NULL)
                slot = -1
            else:
                slot = _KEYS_T.find(line, klen)
                name = _KEYS_T.value(slot) if slot >= 0 else self._decoded(line, klen, pos)
        if escaped:
            value = self._unescaped_value(colon + 1, n - klen - 1, pos + klen + 1, slash if slash > colon else NULL)
        else:
            value = self._value(-1 if tvol else slot, colon + 1, n - klen - 1, pos + klen + 1)
        if self._tidx >= 0:
            if slot >= 0 and self._tidx < self._tmpl_n and self._tmpl_slots[self._tidx] == slot:
                if <PyObject *>value != self._tmpl_vals[self._tidx]:
                    PyDict_SetItem(self._headers, name, value)
                self._tidx += 1
            else:
                _tmpl_leave(self)
        if self._tidx < 0:
            # (not "returned value is value": a repeat may carry the very str the first one had)
            size = len(self._headers)
            PyDict_SetDefault(self._headers, name, value)
            if len(self._headers) == size:
                self._fresh_ok = False
                return 0  # repeated header: the first one wins
            if slot < 0 or self._nfresh >= MAX_TEMPLATE:
                self._fresh_ok = False
            elif self._fresh_ok:
                _tmpl_record(self, slot, line, n)
        if slot != CONTENT_LENGTH_SLOT:
            return 0
        if escaped:
            self._clen = _content_length(value, self.max_body_length, self._base + pos)
            return 0
        # ASCII digits, spaces around them tolerated (as ActiveMQ does)
        clen = 0
        p = colon + 1
        i = 0
        m = n - klen - 1
        while i < m and p[i] == b' ':
            i += 1
        start = i
        while i < m and p[i] >= c'0' and p[i] <= c'9':
            if clen <= 100000000000000000LL:  # beyond 18 digits it exceeds any limit; never overflow
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
            self._buffer_direct()
            exc.frames = frames
            self._error = exc
            raise
        except BaseException:
            self._buffer_direct()
            raise
        return frames

    cdef int _buffer_direct(self) except -1:
        """A feed parsed straight from its input failed: the input goes into _buf, as
        if it had been appended first (offset and buffered are then what they were)."""
        cdef Py_ssize_t n
        if self._direct is not None:
            n = PyBytes_GET_SIZE(self._direct) - self._direct_from
            if n:
                PyByteArray_Resize(self._buf, PyByteArray_GET_SIZE(self._buf) + n)
                memcpy(PyByteArray_AS_STRING(self._buf) + PyByteArray_GET_SIZE(self._buf) - n,
                       PyBytes_AS_STRING(self._direct) + self._direct_from, n)
            self._base -= self._direct_shift
            self._direct = None
        return 0

    cdef Py_ssize_t _head_length(self, data, Py_ssize_t nbuf):
        """How many bytes of the input end what the buffer holds: the rest of its line
        (command, header, or a CR between frames), or of its body; 0 when not in it."""
        cdef const char *p = PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef const char *found
        if self._state == S_BODY:
            if self._clen >= 0:
                return self._clen + 1 - nbuf if self._clen + 1 - nbuf <= n else 0
            found = <const char *>memchr(p, 0, n)
        elif self._state == S_IDLE or self._state == S_COMMAND or self._state == S_HEADERS:
            found = <const char *>memchr(p, b'\n', n)
        else:
            return 0
        return found - p + 1 if found != NULL else 0

    cdef int _feed(self, data, list frames) except -1:
        if self._state == S_BIG:
            data = _big_fill_from(self, data)
            if data is None:
                return 0
        cdef const char *buf
        cdef Py_ssize_t end
        cdef Py_ssize_t nbuf = PyByteArray_GET_SIZE(self._buf)
        cdef Py_ssize_t k = 0
        cdef bint split = False
        self._direct_from = 0
        self._direct_shift = 0
        # A bytes input (a socket's read) is parsed where it is, and only what is left of it at
        # the end is buffered. When the buffer holds the start of a frame, only the head of the
        # input that ends the frame's line (or body) is appended first ("split"); once that is
        # parsed, the rest is parsed in place. Any other input is appended to the buffer.
        if type(data) is bytes and nbuf:
            k = self._head_length(data, nbuf)
            split = 0 < k < PyBytes_GET_SIZE(data)
        if type(data) is bytes and (nbuf == 0 or split):
            self._direct = data
            self._direct_from = k
        if nbuf == 0 and self._direct is not None:
            buf = PyBytes_AS_STRING(data)
            end = PyBytes_GET_SIZE(data)
        else:
            if split:
                PyByteArray_Resize(self._buf, nbuf + k)
                memcpy(PyByteArray_AS_STRING(self._buf) + nbuf, PyBytes_AS_STRING(data), k)
            else:
                self._buf += data
            buf = PyByteArray_AS_STRING(self._buf)
            end = PyByteArray_GET_SIZE(self._buf)
        cdef Py_ssize_t pos = self._pos
        cdef int state = self._state
        cdef const char *lf
        cdef const char *nul
        cdef Py_ssize_t stop, lfpos, clen
        cdef int slot
        cdef char c
        cdef bint message
        cdef Frame frame
        cdef object cmd, body
        self._crlf = self.version == "1.2"
        self._v10 = self.version == "1.0"
        self._esc_p = NULL  # the bytes parsed changed
        while True:  # a second pass only after a split (below)
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
                    # a MESSAGE (what a consumer mostly gets): no search for its LF, no lookup
                    message = end - pos >= 8 and self.max_command_length >= 7 and _message_line(buf + pos)
                    lf = buf + pos + 7 if message else <const char *>memchr(buf + pos, b'\n', end - pos)
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
                    slot = MESSAGE_SLOT if message else _COMMANDS_T.find(buf + pos, stop - pos)
                    if slot < 0:
                        raise self._fail("unknown command %r"
                                         % PyBytes_FromStringAndSize(buf + pos, min(stop - pos, 64)).decode("latin-1"),
                                         pos)
                    self._cmd = _COMMANDS_T.value(slot)
                    self._cmd_slot = slot
                    if slot == MESSAGE_SLOT and self._tmpl is not None and self._tmpl_vcode == self._vcode():
                        self._headers = PyDict_Copy(self._tmpl)
                        self._tidx = 0
                    else:
                        self._headers = {}
                        self._tidx = -1
                    self._fresh_ok = slot == MESSAGE_SLOT
                    self._nfresh = 0
                    self._fresh_off[0] = 0
                    self._nheaders = 0
                    self._clen = -1
                    self._unescape = not (self._v10 or slot == CONNECT_SLOT or slot == CONNECTED_SLOT
                                          or slot == STOMP_SLOT)
                    pos = lfpos + 1
                    state = S_HEADERS
                if state == S_HEADERS:
                    while True:
                        if self._tidx >= 0:
                            lfpos = _tmpl_match(self, buf, pos, end)
                            if lfpos >= 0:  # the template's lines: their values are in the dict already
                                pos = lfpos
                                continue
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
                            if self._tidx >= 0 and self._tidx != self._tmpl_n:
                                _tmpl_leave(self)
                            if self._tidx < 0:
                                if self._fresh_ok and self._nfresh:
                                    _tmpl_keep(self)
                                elif self._cmd_slot == MESSAGE_SLOT:
                                    # unlike the template and unfit to be one (a name not interned,
                                    # a repeat): the MESSAGEs after it start without one
                                    self._tmpl = None
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
                    body = _big_take(self)  # _big_fill stays: offset/buffered still see it if this feed fails
                    state = S_BODY
                    self._clen = -2  # emit below
                if state == S_BODY:
                    clen = self._clen
                    if clen == -2:
                        pass  # large body completed above
                    elif clen >= 0:
                        if end - pos < clen + 1:
                            if clen >= DIRECT_BODY and not split:  # (after a split: from the input)
                                _big_start(self, buf + pos, end - pos, pos)
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
                    if self._cmd_slot == CONNECTED_SLOT:
                        version = frame.headers.get("version", "1.0")
                        if version in VERSIONS:
                            self.version = version
                            self._crlf = version == "1.2"
                            self._v10 = version == "1.0"
                            self._esc_p = NULL  # how \r unescapes follows the version
            if split:
                split = False
                if pos == end and state != S_BIG:
                    # the frame the buffer held is complete: parse the rest of the input in place
                    # (data[k] is at buf[end]: positions shift by k - end, the stream base by nbuf)
                    self._base += nbuf
                    self._direct_shift = nbuf
                    buf = PyBytes_AS_STRING(data)
                    end = PyBytes_GET_SIZE(data)
                    pos = k
                    self._scan = k
                    self._esc_p = NULL
                    continue
                # (not expected) buffer the rest of the input too, and parse on as without a split
                self._direct = None
                self._buf += data[k:]
                buf = PyByteArray_AS_STRING(self._buf)
                end = PyByteArray_GET_SIZE(self._buf)
                self._esc_p = NULL
                continue
            break
        if self._direct is not None:
            self._direct = None
            PyByteArray_Resize(self._buf, end - pos)
            if pos < end:
                memcpy(PyByteArray_AS_STRING(self._buf), buf + pos, end - pos)
        elif pos:
            del self._buf[:pos]
        if pos:
            self._base += pos
            self._scan = max(0, self._scan - pos)
            pos = 0
        self._pos = pos
        self._state = state
        return 0
