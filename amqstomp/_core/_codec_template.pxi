# Included by _codec.pyx after _codec_parse.pxi (Cython "include": one extension module): the
# MESSAGE template of FrameParser. Functions of the parser (its C attributes are theirs to change),
# called by FrameParser._feed and FrameParser._header.
#
# Also the reuse of the previous escaped value's output (_unescaped, _pv_prefix).
#
# A MESSAGE built without a template whose header names are all interned known keys, none
# repeated, becomes the template: a dict of its headers (each later MESSAGE starts as a copy of
# it: one memcpy, sized already) and the raw bytes of its header lines with their EOLs. A later
# MESSAGE's line i with exactly the bytes of the template's line i, under the same version rules
# (_vcode), has its value: nothing to look up or decode (the header line scan of _feed skips it).
# Lines that have not changed since the template was made are compared in one memcmp per run; a
# line seen changed once ("volatile": message-id, timestamp ...) is parsed as usual from then on,
# and its value replaces the copied one when it is another str.
# A line whose name is not the template's next one turns the frame back into a fresh dict of the
# lines matched so far (_tmpl_leave); such a frame does not become the template, and the MESSAGE
# after it starts without one (and becomes the next template).


cdef inline Py_ssize_t _tmpl_match(FrameParser self, const char *buf, Py_ssize_t pos, Py_ssize_t end) noexcept:
    """Where the header lines at buf[pos] end when they are the template's next ones byte for byte,
    with their EOLs: as many as run unchanged since the template was made in one memcmp, else the
    next one alone (self._tidx is then past them, and content-length the template's); -1 when the
    next line differs or has not fully arrived (it is parsed as usual)."""
    cdef int t = self._tidx
    if t >= self._tmpl_n or self._tmpl_vol[t]:
        return -1
    cdef int r = self._tmpl_run[t]
    cdef Py_ssize_t start = self._tmpl_off[t]
    cdef Py_ssize_t q = pos + (self._tmpl_off[r] - start)
    if q > end or memcmp(buf + pos, self._tmpl_raw + start, q - pos) != 0:
        if r == t + 1:
            if q <= end:
                _tmpl_volatile(self, t)
            return -1
        r = t + 1
        q = pos + (self._tmpl_off[r] - start)
        if q > end:
            return -1
        if memcmp(buf + pos, self._tmpl_raw + start, q - pos) != 0:
            _tmpl_volatile(self, t)
            return -1
    # (the template's lines were within every limit, and the frame's first lines are the
    # template's: at most _tmpl_n <= max_headers lines so far, none repeated)
    self._nheaders += r - t
    if t <= self._tmpl_clidx < r:
        self._clen = self._tmpl_clen
    self._tidx = r
    return q


cdef int _tmpl_volatile(FrameParser self, int t) noexcept:
    """Line t of the template came with another value: it is parsed from now on (no compare
    first), and the runs of unchanged lines compared in one go end before it."""
    cdef int i
    cdef int nxt = self._tmpl_n
    self._tmpl_vol[t] = 1
    for i in range(self._tmpl_n - 1, -1, -1):
        if self._tmpl_vol[i]:
            self._tmpl_run[i] = i + 1
            nxt = i
        else:
            self._tmpl_run[i] = nxt
    return 0


cdef inline int _tmpl_record(FrameParser self, int slot, const char *line, Py_ssize_t n) noexcept:
    """A frame that may become the template got its line ``line[:n]`` (name of ``slot``): keep
    its raw bytes with its EOL (LF, or CRLF when the LF follows a CR: the parser's ``stop``). A
    line that would not fit makes the frame unfit."""
    cdef int k = self._nfresh
    cdef Py_ssize_t off = self._fresh_off[k]
    n += 1 if line[n] == b'\n' else 2
    if off + n > TEMPLATE_BYTES:
        self._fresh_ok = False
        return 0
    memcpy(self._fresh_raw + off, line, n)
    self._fresh_off[k + 1] = off + n
    self._fresh_slots[k] = slot
    self._nfresh = k + 1
    return 0


cdef int _tmpl_leave(FrameParser self) except -1:
    """This frame stops following the MESSAGE template: its headers become a fresh dict of the
    _tidx names matched so far, in order, with their values; it will not be a template."""
    cdef dict fresh = {}
    cdef int i
    cdef object name
    for i in range(self._tidx):
        name = _KEYS_T.value(self._tmpl_slots[i])
        fresh[name] = self._headers[name]
    self._fresh_ok = False
    self._headers = fresh
    self._tidx = -1
    return 0


cdef int _tmpl_keep(FrameParser self) except -1:
    """The MESSAGE whose headers just ended was built without the template and can be one: it
    becomes the template (a copy: the frame's dict is the user's), with its raw lines."""
    cdef int i
    self._tmpl = PyDict_Copy(self._headers)
    self._tmpl_n = self._nfresh
    for i in range(self._nfresh):
        self._tmpl_slots[i] = self._fresh_slots[i]
        self._tmpl_vals[i] = PyDict_GetItem(self._tmpl, _KEYS_T.value(self._fresh_slots[i]))
    memcpy(self._tmpl_off, self._fresh_off, (self._nfresh + 1) * sizeof(Py_ssize_t))
    memcpy(self._tmpl_raw, self._fresh_raw, self._fresh_off[self._nfresh])
    self._tmpl_clen = self._clen
    self._tmpl_clidx = -1
    for i in range(self._nfresh):
        self._tmpl_vol[i] = 0
        self._tmpl_run[i] = self._nfresh
        if self._fresh_slots[i] == CONTENT_LENGTH_SLOT:
            self._tmpl_clidx = i
    self._tmpl_vcode = self._vcode()
    return 0


cdef inline int _tmpl_name(FrameParser self, const char *line, Py_ssize_t n) noexcept:
    """Slot of the template's next name when the header line ``line[:n]`` starts with it and a
    ':' (its value differs from the template's), else -1 (the line is parsed from scratch)."""
    cdef int t = self._tidx
    if t >= self._tmpl_n:
        return -1
    cdef int slot = self._tmpl_slots[t]
    cdef Py_ssize_t klen = _KEYS_T.klen[slot]
    if n <= klen or line[klen] != b':' or memcmp(line, _KEYS_T.kptr[slot], klen) != 0:
        return -1
    return slot


cdef object _unescaped(FrameParser self, const char *p, Py_ssize_t n, Py_ssize_t pos, const char *first):
    """Undo 1.1/1.2 escaping of p[:n] (at buffer position ``pos``; its first backslash at
    ``first`` when known, else NULL) and decode UTF-8; any fault is reported by the twin's
    exact rules and offsets. A value of at most SMALL_VALUE bytes is unescaped into the parser's
    _pv_out, after the output of the raw bytes it shares with the previous one (ActiveMQ's
    message-ids differ in their last digits; _pv_prefix)."""
    cdef char *o = self._pv_out
    cdef object text = None
    cdef Py_ssize_t i = 0, m = 0, span, c = 0
    cdef const char *slash
    cdef PyObject *made
    cdef char e
    cdef bint v12 = self._crlf
    if n > SMALL_VALUE:
        o = <char *>PyMem_Malloc(n)
        if o == NULL:
            raise MemoryError()
    else:
        c = i = _pv_prefix(self, p, n)
        m = i - self._pv_nesc
        self._pv_n = 0  # until this value is complete (_pv_out changes)
        if first != NULL and first < p + i:
            first = NULL
    while i < n:
        # copy up to the next backslash in one go
        slash = first if first != NULL else <const char *>memchr(p + i, b'\\', n - i)
        first = NULL
        span = (slash - p) - i if slash != NULL else n - i
        memcpy(o + m, p + i, span)
        m += span
        i += span
        if slash == NULL or i + 1 >= n:
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
        if o == self._pv_out:
            self._pv_esc[self._pv_nesc] = <unsigned char>i
            self._pv_nesc += 1
        m += 1
        i += 2
    if i == n:
        text = _ascii_str(o, m)
    if i == n and text is None:
        made = _decode_utf8_raw(o, m, NULL)
        if made == NULL:
            PyErr_Clear()  # not UTF-8: the twin says so below
        else:
            text = <object>made
            Py_DECREF(text)  # the new str's own reference, handed to ``text``
    if o != self._pv_out:
        PyMem_Free(o)
    elif text is not None:  # the next escaped value may start as this one
        memcpy(self._pv_raw + c, p + c, n - c)
        self._pv_n = n
        self._pv_v12 = v12
    if text is not None:
        return text
    # a bad escape or bad UTF-8: the twin raises with the right message and offset
    return _unescape(PyBytes_FromStringAndSize(p, n), self.version, self._base + pos)


cdef inline Py_ssize_t _pv_prefix(FrameParser self, const char *p, Py_ssize_t n) noexcept:
    """How many leading raw bytes of the escaped value p[:n] (n <= SMALL_VALUE) are the previous
    value's (same version rule), cut before an escape they would split; self._pv_nesc is then the
    number of escapes in them, whose output is self._pv_out[:c - _pv_nesc], in place already."""
    cdef Py_ssize_t lim = n if n < self._pv_n else self._pv_n
    cdef Py_ssize_t c = 0
    cdef uint64_t a, b
    cdef int k = 0
    if lim and self._pv_v12 == self._crlf:
        while c + 8 <= lim:
            memcpy(&a, p + c, 8)
            memcpy(&b, self._pv_raw + c, 8)
            if a != b:
                break
            c += 8
        while c < lim and p[c] == self._pv_raw[c]:
            c += 1
        while k < self._pv_nesc and self._pv_esc[k] < c:
            if self._pv_esc[k] == c - 1:
                c -= 1
                break
            k += 1
    self._pv_nesc = k
    return c
