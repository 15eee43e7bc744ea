# Included by _codec.pyx after _codec_parse.pxi (Cython "include": one extension module): a body of
# content-length >= BIG_BODY that has not fully arrived is filled straight from the input into its
# final bytes object (held in FrameParser._big), not through the parser's buffer. Functions of the
# parser (its C attributes are theirs to change), called by FrameParser._feed.


cdef int _big_start(FrameParser self, const char *p, Py_ssize_t have, Py_ssize_t pos) except -1:
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


cdef int _big_grow(FrameParser self, Py_ssize_t need) except -1:
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


cdef object _big_take(FrameParser self):
    """The complete large body, handed over."""
    cdef object body
    if self._big_cap != self._clen:
        _PyBytes_Resize(&self._big, self._clen)
    body = <object>self._big
    Py_XDECREF(self._big)
    self._big = NULL
    self._big_cap = 0
    return body


cdef object _big_fill_from(FrameParser self, data):
    """Copy input into the large body; return the input left after it, or None."""
    cdef const unsigned char[::1] view = data
    cdef Py_ssize_t n = view.shape[0]
    cdef Py_ssize_t want = self._clen - self._big_fill
    cdef Py_ssize_t take = n if n < want else want
    if take > 0:
        if self._big_fill + take > self._big_cap:
            _big_grow(self, self._big_fill + take)
        memcpy(<char *>PyBytes_AS_STRING(<object>self._big) + self._big_fill, &view[0], take)
        self._big_fill += take
        self._base += take
    if self._big_fill < self._clen:
        return None
    self._state = S_BODY_NUL
    return data[take:]


cdef Py_ssize_t _body_missing(FrameParser self):
    """FrameParser.body_missing: of the large body, or of a body in the buffer."""
    cdef Py_ssize_t n
    if self._error is not None:
        return 0
    if self._state == S_BIG:
        return self._clen - self._big_fill
    if self._state == S_BODY and self._clen >= 0:
        n = self._clen - (PyByteArray_GET_SIZE(self._buf) - self._pos)
        return n if n > 0 else 0
    return 0


cdef object _big_read(FrameParser self, readinto):
    """FrameParser.read_body in S_BIG: ``readinto`` writes into the large body's
    unfilled bytes themselves (a view released before it returns: the body may move
    when it grows)."""
    if self._big_fill == self._big_cap:
        _big_grow(self, self._big_fill + 1)
    cdef Py_ssize_t room = self._big_cap - self._big_fill
    view = PyMemoryView_FromMemory(<char *>PyBytes_AS_STRING(<object>self._big) + self._big_fill, room,
                                   PyBUF_WRITE)
    try:
        n = readinto(view)
    finally:
        view.release()
    cdef Py_ssize_t got = -1
    if PyLong_CheckExact(n):  # what a socket's recv_into returns: checked here, without a Python call
        try:
            got = PyLong_AsSsize_t(n)
        except OverflowError:
            got = -1
    if got < 0 or got > room:
        got = read_count(n, room)  # anything else: read_count's check (and its error)
    self._big_fill += got
    self._base += got
    if self._big_fill == self._clen:
        self._state = S_BODY_NUL
    return got
