# C types for amqstomp/_io/_handoff_py.py compiled as it is into the extension amqstomp._io._handoff
# (setup.py), as amqstomp/_core/_flow.pxd types _flow_py.py. Cython reads the .pxd named after the
# module it builds; Python never reads this file. What is declared here must match _handoff_py.py.
# Thread identities (threading.get_ident()) stay Python ints: they do not fit a C long everywhere.

cdef class EventQueue:
    cdef object _items
    cdef object _wake
    cdef list _token
    cdef list _ticket
    cdef public object busy
    cdef public bint idle
    cdef public object reading
    cdef public object lost
    cdef public object batch
    cdef public bint promote_asked
    cdef public long long promotions
    cdef public long long reads
    cdef public bint inline_ok

    cpdef put(self, object item)
    cpdef object get(self)
    cpdef bint empty(self)
    cpdef bint promote_now(self)
    cpdef bint ask_promotion(self)
    cpdef bint dispatching_here(self)
    cpdef bint reading_here(self)
    cpdef offer(self, object item, object deliver)
    cpdef bint handed_over(self)
    cpdef stop_reading(self)
    cpdef object next_item(self, bint done)
    cpdef finish(self)
    cpdef object take_batch(self)
