# cython: language_level=3, annotation_typing=False
"""Consumer flow control, compiled.

Same public names and behaviour as the pure-Python twin
:mod:`amqstomp._flow_py` (whose docstrings are the reference); chosen by
:mod:`amqstomp.flow`. Only :class:`SubscriptionWindow`, called for every
message, is compiled here; the policies and the audit are the twin's own
classes. No I/O, no threads, no clocks: time comes in as ``now_ms``.
"""
from typing import Any, Optional

from ._flow_py import (
    ACK_AUTO,
    ACK_CLIENT,
    ACK_CLIENT_INDIVIDUAL,
    ACK_MODES,
    DEFAULT_ACK_BATCH_CAP,
    DEFAULT_MAX_BUFFERED_BYTES,
    OPTIMIZE_ACK_RATIO,
    MessageAudit,
    PrefetchPolicy,
    RedeliveryPolicy,
    optimized_ack_threshold,
)
from ._flow_py import __all__

cdef enum:
    _ACK_AUTO = 0
    _ACK_CLIENT = 1
    _ACK_CLIENT_INDIVIDUAL = 2


cdef class SubscriptionWindow:
    """Flow-control state of one subscription.

    Counts (messages): ``delivered`` (MESSAGE frames received), ``consumed``
    (handed to the application and returned from it), ``acked`` (covered by an
    ACK sent, or by the broker for ``ack:auto``); ``pending = delivered -
    consumed`` (in the local buffer), ``unacked = consumed - acked``.

    The caller reports events and gets decisions back:

    * ``on_delivered(now_ms) -> bool``: True when the local buffer is full and
      the reader should stop reading the socket (TCP back-pressure).
    * ``on_consumed(ack_id, now_ms)``: the ack id to send now, or None. ``ack:client``
      with optimizeAcknowledge returns the newest ack id once ``threshold``
      messages are unacked (one cumulative ACK covers them all);
      ``client-individual`` (automatic) returns every message's own ack id;
      ``ack:auto`` and manual ``client`` return None.
    * ``poll(now_ms)``: the ack id to send because a timer fired, or None:
      ``optimize_acknowledge_timeout_ms`` since the last ACK, the scheduled
      interval, or ``idle_ack_ms`` without a delivery.
    * ``next_deadline_ms()``: when ``poll`` may next have something, or None.
    * ``flush()``: the ack id covering everything consumed (on close), or None.

    Args:
        prefetch (int): the subscription's prefetch size (messages, >= 1).
        ack_mode (int): ``ACK_AUTO``, ``ACK_CLIENT`` or ``ACK_CLIENT_INDIVIDUAL``.
        auto_ack (bool): the library sends the ACKs (after the application had the
            message); False leaves ``client``/``client-individual`` ACKs to the
            application, as stomp.py does.
        optimize_acknowledge (bool): batch cumulative ACKs (``ack:client`` only).
        ack_batch_cap (int): upper bound of a batch, see :func:`optimized_ack_threshold`.
        optimize_acknowledge_timeout_ms (int): ack what is unacked once this long
            has passed since the last ACK (ActiveMQ's optimizeAcknowledgeTimeOut, 300).
        optimized_ack_scheduled_ack_interval_ms (int): ack what is unacked every
            interval; 0 = off (ActiveMQ's optimizedAckScheduledAckInterval).
        idle_ack_ms (int): ack what is unacked when no message arrived for this
            long (50); keeps a consumer whose share of a page is below the batch size
            from waiting for the broker's 30 s sweep.
        max_buffered (int | None): local buffer bound (messages); default
            ``prefetch`` for ``ack:auto`` (the broker no longer limits what it
            pushes) and ``2 x prefetch + 1`` for client modes (the broker does; an
            ACK sent from inside a listener lets it send ``prefetch`` more while
            that message is still held), capped at 10,000.
        max_buffered_bytes (int): local buffer bound in body bytes (64 MiB); 0 = none.
            ``on_delivered`` asks to pause at either bound, and ``should_resume()``
            says when pending is back at or below half of both.

    Raises:
        ValueError: bad arguments (named in the message).
    """

    cdef readonly long long prefetch
    cdef readonly int ack_mode
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
    cdef object _last_ack_id
    cdef long long _last_ack_ms
    cdef long long _last_delivery_ms
    cdef bint _paused


    def __init__(self, prefetch: int, ack_mode: int = ACK_AUTO, auto_ack: bool = True,
                 optimize_acknowledge: bool = False, ack_batch_cap: int = DEFAULT_ACK_BATCH_CAP,
                 optimize_acknowledge_timeout_ms: int = 300,
                 optimized_ack_scheduled_ack_interval_ms: int = 0,
                 idle_ack_ms: int = 50, max_buffered: Optional[int] = None,
                 max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES) -> None:
        if ack_mode not in (ACK_AUTO, ACK_CLIENT, ACK_CLIENT_INDIVIDUAL):
            raise ValueError("ack_mode must be ACK_AUTO, ACK_CLIENT or ACK_CLIENT_INDIVIDUAL, got %r"
                             % (ack_mode,))
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError("prefetch must be an int >= 1, got %r" % (prefetch,))
        if optimize_acknowledge and ack_mode != ACK_CLIENT:
            raise ValueError("optimize_acknowledge needs ack mode 'client' (cumulative ACKs)")
        for name, value in (("optimize_acknowledge_timeout_ms", optimize_acknowledge_timeout_ms),
                            ("optimized_ack_scheduled_ack_interval_ms", optimized_ack_scheduled_ack_interval_ms),
                            ("idle_ack_ms", idle_ack_ms)):
            if not isinstance(value, int) or value < 0:
                raise ValueError("%s must be an int >= 0 (ms), got %r" % (name, value))
        if max_buffered is None:
            # ack:auto: the broker stops counting at dispatch, so the buffer bound is ours;
            # client modes: the broker never has more than `prefetch` out, so never pause then
            max_buffered = min(prefetch if ack_mode == ACK_AUTO else 2 * prefetch + 1, 10000)
        if isinstance(max_buffered, bool) or not isinstance(max_buffered, int) or max_buffered < 1:
            raise ValueError("max_buffered must be an int >= 1, got %r" % (max_buffered,))
        if isinstance(max_buffered_bytes, bool) or not isinstance(max_buffered_bytes, int) or max_buffered_bytes < 0:
            raise ValueError("max_buffered_bytes must be an int >= 0, got %r" % (max_buffered_bytes,))
        self.prefetch = prefetch
        self.ack_mode = ack_mode
        self.auto_ack = bool(auto_ack) and ack_mode != ACK_AUTO
        self.optimize_acknowledge = bool(optimize_acknowledge) and self.auto_ack
        self.threshold = (optimized_ack_threshold(prefetch, OPTIMIZE_ACK_RATIO, ack_batch_cap)
                          if self.optimize_acknowledge else 1)
        self.optimize_acknowledge_timeout_ms = optimize_acknowledge_timeout_ms
        self.optimized_ack_scheduled_ack_interval_ms = optimized_ack_scheduled_ack_interval_ms
        self.idle_ack_ms = idle_ack_ms
        self.max_buffered = max_buffered
        self.max_buffered_bytes = max_buffered_bytes
        self.pending_bytes = 0
        self.delivered = 0
        self.consumed = 0
        self.acked = 0
        self.acks_sent = 0
        self._last_ack_id: Any = None
        self._last_ack_ms = -1
        self._last_delivery_ms = -1
        self._paused = False

    @property
    def pending(self) -> int:
        """Messages delivered but not yet consumed (in the local buffer)."""
        return self.delivered - self.consumed

    @property
    def unacked(self) -> int:
        """Messages consumed but not yet covered by an ACK."""
        return self.consumed - self.acked

    @property
    def slow_consumer(self) -> bool:
        """True when more than 2 x prefetch messages wait in the buffer (ActiveMQ's
        definition), or the buffer is full (reading is paused)."""
        return self._paused or self.delivered - self.consumed > 2 * self.prefetch

    @property
    def paused(self) -> bool:
        """True between an ``on_delivered`` that asked to pause and ``should_resume``."""
        return self._paused

    cpdef bint on_delivered(self, long long now_ms, long long nbytes=0):
        """A MESSAGE (of ``nbytes`` body bytes) arrived. Returns True when the
        reader should stop reading."""
        self.delivered += 1
        self._last_delivery_ms = now_ms
        if self._last_ack_ms < 0:
            self._last_ack_ms = now_ms
        if self.ack_mode == _ACK_AUTO:
            self.acked += 1  # the broker acked it at dispatch
        self.pending_bytes += nbytes
        if (self.delivered - self.consumed >= self.max_buffered
                or (self.max_buffered_bytes and self.pending_bytes >= self.max_buffered_bytes)):
            self._paused = True
        return self._paused

    def should_resume(self) -> bool:
        """True (once) when a paused reader may read again: pending at or below half
        of ``max_buffered`` and of ``max_buffered_bytes``."""
        if (self._paused and self.delivered - self.consumed <= self.max_buffered // 2
                and self.pending_bytes <= self.max_buffered_bytes // 2):
            self._paused = False
            return True
        return False

    cpdef object on_consumed(self, object ack_id, long long now_ms, long long nbytes=0):
        """The application had the message (of ``nbytes`` body bytes) whose ack id
        (STOMP 1.2 ``ack`` header, or message-id before 1.2) is ``ack_id``.
        Returns the ack id to send, or None."""
        if self.consumed >= self.delivered:
            raise ValueError("on_consumed without a matching on_delivered (consumed=%d, delivered=%d)"
                             % (self.consumed, self.delivered))
        self.consumed += 1
        self.pending_bytes -= nbytes
        if self.ack_mode == _ACK_AUTO:
            return None
        self._last_ack_id = ack_id
        if not self.auto_ack:
            return None
        if self.ack_mode == _ACK_CLIENT_INDIVIDUAL or not self.optimize_acknowledge:
            return self._sent(now_ms, 1)
        cdef long long unacked = self.consumed - self.acked
        if unacked >= self.threshold:
            return self._sent(now_ms, unacked)
        if (self.optimize_acknowledge_timeout_ms
                and now_ms - self._last_ack_ms >= self.optimize_acknowledge_timeout_ms):
            return self._sent(now_ms, unacked)
        return None

    def on_application_ack(self, cumulative: bool = True) -> None:
        """The application sent an ACK itself (manual ``client`` or ``client-individual``)."""
        if cumulative and self.ack_mode == _ACK_CLIENT:
            self.acked = self.consumed
        elif self.acked < self.consumed:
            self.acked += 1

    cdef inline object _sent(self, long long now_ms, long long count):
        self.acked += count
        self.acks_sent += 1
        self._last_ack_ms = now_ms
        return self._last_ack_id

    cpdef object poll(self, long long now_ms):
        """Timer check: the ack id to send now, or None."""
        cdef long long unacked = self.consumed - self.acked
        if unacked <= 0 or not self.optimize_acknowledge:
            return None
        cdef long long since_ack = now_ms - self._last_ack_ms
        if self.optimize_acknowledge_timeout_ms and since_ack >= self.optimize_acknowledge_timeout_ms:
            return self._sent(now_ms, unacked)
        interval = self.optimized_ack_scheduled_ack_interval_ms
        if interval and since_ack >= interval:
            return self._sent(now_ms, unacked)
        if self.idle_ack_ms and now_ms - self._last_delivery_ms >= self.idle_ack_ms:
            return self._sent(now_ms, unacked)
        return None

    def next_deadline_ms(self) -> Optional[int]:
        """Monotonic ms at which ``poll`` may next return an ack id, or None."""
        if self.consumed - self.acked <= 0 or not self.optimize_acknowledge:
            return None
        best = -1
        if self.optimize_acknowledge_timeout_ms:
            best = self._last_ack_ms + self.optimize_acknowledge_timeout_ms
        interval = self.optimized_ack_scheduled_ack_interval_ms
        if interval:
            at = self._last_ack_ms + interval
            best = at if best < 0 or at < best else best
        if self.idle_ack_ms:
            at = self._last_delivery_ms + self.idle_ack_ms
            best = at if best < 0 or at < best else best
        return None if best < 0 else best

    def flush(self, now_ms: int = 0) -> Any:
        """Ack id covering every consumed message not yet acked, or None (on close).
        Only for library-sent cumulative ACKs (optimizeAcknowledge)."""
        cdef long long unacked = self.consumed - self.acked
        if unacked <= 0 or not self.optimize_acknowledge:
            return None
        return self._sent(now_ms, unacked)

    def reset(self) -> None:
        """Forget every count (the subscription was replayed on a new connection)."""
        self.delivered = self.consumed = self.acked = self.pending_bytes = 0
        self._last_ack_id = None
        self._last_ack_ms = self._last_delivery_ms = -1
        self._paused = False

    def __repr__(self) -> str:
        return ("SubscriptionWindow(prefetch=%d, ack_mode=%d, delivered=%d, consumed=%d, acked=%d, "
                "threshold=%d)" % (self.prefetch, self.ack_mode, self.delivered, self.consumed,
                                   self.acked, self.threshold))


