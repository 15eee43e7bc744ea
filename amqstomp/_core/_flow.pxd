# C types for amqstomp/_core/_flow_py.py compiled as it is into the extension amqstomp._core._flow
# (setup.py): one source, two builds, as aiohttp's _websocket/reader_py.py -> reader_c.pxd.
# Cython reads the .pxd named after the module it builds; Python never reads this file.
# `readonly`: readable from Python (the public attributes); without it, C only. What is
# declared here must match _flow_py.py (Cython refuses to compile a mismatch).
import cython


cdef class SubscriptionWindow:
    cdef readonly long long prefetch
    cdef readonly int ack_mode
    cdef bint _broker_acks
    cdef bint _individual
    cdef readonly bint auto_ack
    cdef readonly bint optimize_acknowledge
    cdef readonly long long threshold
    cdef readonly long long optimize_acknowledge_timeout_ms
    cdef readonly long long optimized_ack_scheduled_ack_interval_ms
    cdef readonly long long idle_ack_ms
    cdef readonly long long max_buffered
    cdef readonly long long max_buffered_bytes
    cdef readonly long long pending_bytes
    cdef readonly long long delivered
    cdef readonly long long consumed
    cdef readonly long long acked
    cdef readonly long long acks_sent
    cdef readonly long long last_ack_count
    cdef object _last_ack_id
    cdef long long _last_ack_ms
    cdef long long _last_delivery_ms
    cdef bint _paused

    # the per-message calls (subscription.py): C arguments, C locals, C calls inside
    cpdef bint on_delivered(self, long long now_ms, long long nbytes=*)
    cpdef bint should_resume(self)
    @cython.locals(unacked=cython.longlong)
    cpdef object on_consumed(self, object ack_id, long long now_ms, long long nbytes=*)
    cdef inline object _sent(self, long long now_ms, long long count)
    @cython.locals(unacked=cython.longlong, since_ack=cython.longlong, interval=cython.longlong)
    cpdef object poll(self, long long now_ms)
    @cython.locals(best=cython.longlong, at=cython.longlong, interval=cython.longlong)
    cpdef object next_deadline_ms(self)


cdef class MessageAudit:
    cdef readonly Py_ssize_t depth
    cdef object _seen

    # once per MESSAGE (the duplicate audit is on by default)
    @cython.locals(count=Py_ssize_t)
    cpdef Py_ssize_t record(self, object message_id) except -1


cdef class SettledAudit:
    cdef readonly Py_ssize_t depth
    cdef set _ids
    cdef list _ring
    cdef Py_ssize_t _next

    # asked once per MESSAGE (``in``) and told once per settled one
    @cython.locals(at=Py_ssize_t)
    cpdef settled(self, object message_id)
