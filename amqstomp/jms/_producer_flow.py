"""Producer flow control of a JMS link: the producer window and the tracking of SENDs in flight.

* :class:`ProducerWindow` -- ActiveMQ's ``producerWindowSize`` for asynchronous
  sends: bytes sent and not yet confirmed by a RECEIPT, blocking the producer
  when full (ActiveMQ's ``ActiveMQProducer`` / ``MemoryUsage`` semantics);
* :class:`SendTracker` -- receipts of SENDs in flight on one link, the
  usage-full detector (a RECEIPT later than ``usage_full_after_ms``) and the
  errors of asynchronous sends;
* :class:`UsageEvent` -- what the usage listeners get.

Licensed under the Apache License, Version 2.0.
"""
import itertools
import logging
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import Future
from typing import TYPE_CHECKING, Deque, Optional, Tuple

from .. import _observe
from .._core.events import UsageFull, UsageNotFull
from ..codec import Frame
from ..exception import ConnectionClosedException, ReceiptTimeout, StompException
from .._io.scheduler import TimerHandle

if TYPE_CHECKING:  # annotations only
    from .link import Link

__all__ = ["ProducerWindow", "SendTracker", "UsageEvent", "ASYNC_RECEIPT_PREFIX", "SEND_OVERHEAD_BYTES"]

#: Bytes a SEND counts in the producer window beyond its body (its headers, roughly)
SEND_OVERHEAD_BYTES = 64

log = logging.getLogger("amqstomp.jms")

#: Receipt ids of asynchronous sends start with this; an ERROR carrying one goes to
#: the exception listener (a synchronous send raises it instead).
ASYNC_RECEIPT_PREFIX = "a-"
_SYNC_RECEIPT_PREFIX = "s-"

class UsageEvent:
    """What ``on_usage_full`` / ``on_usage_not_full`` are told.

    Attributes:
        full (bool): True for usage full, False for not full.
        destination (str): STOMP destination of the send whose receipt was late
            (full) or has just arrived (not full).
        waited_s (float): seconds that send has waited / waited for its receipt.
        pending_sends (int): sends on this socket still waiting for a receipt.
    """

    __slots__ = ("full", "destination", "waited_s", "pending_sends")

    def __init__(self, full: bool, destination: str, waited_s: float, pending_sends: int) -> None:
        self.full = full
        self.destination = destination
        self.waited_s = waited_s
        self.pending_sends = pending_sends

    def __repr__(self) -> str:
        return "UsageEvent(full=%r, destination=%r, waited_s=%.3f, pending_sends=%d)" % (
            self.full, self.destination, self.waited_s, self.pending_sends)


class ProducerWindow:
    """Bytes of one producer's asynchronous sends that await a RECEIPT
    (ActiveMQ's producerWindowSize): ``send`` blocks while the window is full.

    Not every asynchronous send asks for a receipt: on the producer socket a
    send closes a *chunk* (and asks for one) when the bytes sent since the last
    receipt reach a quarter of the window, and the receipt releases the whole
    chunk. That is exact because ActiveMQ handles the SENDs of one connection in
    order: the ones without a receipt before the one with it (a SEND without a
    receipt is never parked, the broker's reader handles it or waits). On the
    consumer socket every send asks for one (``every_send``), so the broker never
    stops reading that socket (see :class:`SendTracker`).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.chunk_size = max(1, size // 4)
        # bytes sent since the last send that asked for a receipt (the open chunk): only
        # senders change it, without the lock (the common send touches nothing else)
        self.unreceipted = 0
        # under the lock: bytes of the chunks whose receipts are awaited, and their count
        # (the sender adds a chunk when it closes one, the reader takes it off)
        self.closed = 0
        self.chunks = 0
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        # threads in cond.wait, and the least room one of the acquire()s among them
        # needs: a receipt wakes them only when that may be enough (or none is awaited)
        self.waiters = 0
        self.need = 0

    @property
    def in_flight(self) -> int:
        """Bytes sent and not yet covered by a receipt."""
        return self.closed + self.unreceipted

    def take_room(self, nbytes: int) -> bool:
        """The common send's case of :meth:`acquire`, without a lock: True when ``nbytes``
        fit the open chunk (room, no chunk to close, no receipt to ask) and are counted in
        flight; False (nothing counted) when the send must take :meth:`acquire`'s locked path."""
        unreceipted = self.unreceipted + nbytes
        if unreceipted < self.chunk_size and (not self.chunks or self.closed + unreceipted <= self.size):
            self.unreceipted = unreceipted
            return True
        return False

    def acquire(self, nbytes: int, link: "Link", deadline: Optional[float], every_send: bool,
                timeout_s: Optional[float] = None) -> int:
        """Wait for room for ``nbytes`` and count them in flight. Returns the bytes
        the send's receipt is to release, or 0 when the send asks for no receipt.
        (A send larger than the window goes when nothing else awaits a receipt.)
        Before it waits, the socket's deferred frames are written (the receipts it
        waits for may be theirs). The wait ends at ``deadline`` (monotonic s);
        without one, ``timeout_s`` seconds after it starts (the clock is read
        only when the send must wait); without either, when room comes or the
        link is gone.

        The common send -- room, and no chunk to close -- takes no lock: it reads
        ``closed``/``chunks``, which only the lock's holders change (a stale
        value is a larger one: it can only send it to the locked path), and
        adds to ``unreceipted``, which only senders change (two threads sending
        on one producer at once, which JMS does not allow, could lose an
        addition: a receipt then comes a little later, nothing more).

        Raises:
            ReceiptTimeout: no room by the deadline.
            ConnectionClosedException: the link is gone while waiting.
        """
        if not every_send and self.take_room(nbytes):
            return 0
        flushed = False
        while True:
            with self.lock:
                if not self.chunks or self.closed + self.unreceipted + nbytes <= self.size:
                    return self._count(nbytes, every_send)
                if flushed:
                    if deadline is None and timeout_s is not None:
                        deadline = time.monotonic() + timeout_s
                    observed = _observe.messages
                    if observed is None:
                        self._wait_room(nbytes, link, deadline)
                    else:
                        started = time.monotonic()
                        try:
                            self._wait_room(nbytes, link, deadline)
                        finally:
                            observed.blocked(link.transport, time.monotonic() - started)
                    return self._count(nbytes, every_send)
            link.transport.flush()  # never under the window's lock: it may block on the socket
            flushed = True

    def _count(self, nbytes: int, every_send: bool) -> int:
        """Under the lock: count a send in the open chunk, closing it when full."""
        unreceipted = self.unreceipted + nbytes
        if not every_send and unreceipted < self.chunk_size:
            self.unreceipted = unreceipted
            return 0
        self.unreceipted = 0
        self.closed += unreceipted
        self.chunks += 1
        return unreceipted

    def _wait_room(self, nbytes: int, link: "Link", deadline: Optional[float]) -> None:
        while self.chunks and self.closed + self.unreceipted + nbytes > self.size:
            self.need = nbytes if not self.waiters else min(self.need, nbytes)
            if link.gone():
                raise ConnectionClosedException("connection closed while waiting for room in the producer "
                                                "window: %s" % link.close_reason())
            wait = 0.5
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ReceiptTimeout("no room in the producer window (%d bytes awaiting receipts) "
                                         "within the send timeout" % self.in_flight)
                wait = min(wait, left)
            self._wait(wait)

    def _wait(self, seconds: float) -> None:
        self.waiters += 1
        try:
            self.cond.wait(seconds)
        finally:
            self.waiters -= 1
            if not self.waiters:
                self.need = 0

    def unsent(self, nbytes: int, chunk: int) -> None:
        """A send counted by ``acquire`` could not be written."""
        with self.cond:
            if chunk:
                self.closed -= chunk
                self.chunks -= 1
                self.unreceipted += chunk - nbytes  # the chunk's other sends went: open again
            else:
                self.unreceipted -= nbytes
            self.cond.notify_all()

    def release(self, chunk: int) -> None:
        """The receipt of a chunk (or the ERROR answering it) came."""
        with self.lock:
            self.closed -= chunk
            self.chunks -= 1
            if self.waiters and (not self.chunks or self.closed + self.unreceipted + self.need <= self.size):
                self.cond.notify_all()

    def drain(self, link: "Link", deadline: Optional[float]) -> bool:
        """Wait until no receipt is awaited (writing the socket's deferred frames
        first); False when the deadline passed first (or the link is gone)."""
        if self.chunks:
            try:
                link.transport.flush()
            except StompException:
                pass  # the socket is down: the loop below tells whether a new one comes (failover)
        with self.cond:
            while self.chunks:
                if link.gone():
                    return False
                wait = 0.5
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    wait = min(wait, left)
                if not self.waiters:
                    self.need = self.size + 1  # wake me only when no receipt is awaited
                self._wait(wait)
            return True


class SendTracker:
    """SENDs of one link awaiting their RECEIPT: usage-full detection and the
    errors of asynchronous sends.

    ActiveMQ (producerFlowControl on, memory full) parks a SEND that asks for a
    receipt and answers it once there is room again, and keeps reading the
    socket meanwhile; a SEND without a receipt instead blocks the connection's
    reader on the broker, so nothing else sent on that socket (ACKs,
    heart-beats, SUBSCRIBE) is read until memory frees up (measured on 5.17.2).
    A receipt later than ``usage_full_after_s`` therefore means "usage full".
    """

    def __init__(self, link: "Link", usage_full_after_s: float) -> None:
        self.link = link
        self.usage_full_after_s = usage_full_after_s
        self.lock = threading.Lock()
        # receipt id -> (monotonic time sent, destination)
        self.outstanding: "OrderedDict[str, Tuple[float, str]]" = OrderedDict()
        self.full = False
        self.changed_at = 0.0  # when `full` last changed
        self.events: Deque[UsageEvent] = deque()
        self.timer: Optional[TimerHandle] = None
        self._ids = itertools.count(1)

    def next_number(self) -> int:
        """A number unique on this link (receipt ids of acks and transactions)."""
        return next(self._ids)

    def next_id(self, sync: bool) -> str:
        return "%s%d" % (_SYNC_RECEIPT_PREFIX if sync else ASYNC_RECEIPT_PREFIX, next(self._ids))

    def sent(self, receipt: str, destination: str, future: "Future[Frame]",
             window: Optional[ProducerWindow], nbytes: int) -> None:
        """Track a SEND just written with ``receipt`` (``window``: release ``nbytes`` there)."""
        now = time.monotonic()
        with self.lock:
            self.outstanding[receipt] = (now, destination)
            arm = self.timer is None and self.usage_full_after_s > 0
            if arm:
                self.timer = self._call_later(self.usage_full_after_s)
        future.add_done_callback(lambda f: self._done(receipt, window, nbytes))

    def _call_later(self, delay: float) -> Optional[TimerHandle]:
        try:
            return self.link.transport.call_later(delay, self._check)
        except StompException:
            return None

    def _done(self, receipt: str, window: Optional[ProducerWindow], nbytes: int) -> None:
        """Reader thread (or the sender, when already answered): a receipt, an ERROR or the end."""
        now = time.monotonic()
        event = None
        with self.lock:
            entry = self.outstanding.pop(receipt, None)
            if entry is not None and self.full and self.link.transport.is_connected():
                self.full = False
                self.changed_at = now
                event = UsageEvent(False, entry[1], now - entry[0], len(self.outstanding))
                self.events.append(event)
        if window is not None:
            window.release(nbytes)
        if event is not None:
            self.link.transport.post(UsageNotFull())

    def _check(self) -> None:
        """Timer thread: is the oldest receipt late?"""
        now = time.monotonic()
        post = False
        with self.lock:
            self.timer = None
            if not self.outstanding:
                return
            sent_at, destination = next(iter(self.outstanding.values()))
            since = max(sent_at, self.changed_at)
            if not self.full and now - since >= self.usage_full_after_s:
                self.full = True
                self.changed_at = now
                self.events.append(UsageEvent(True, destination, now - sent_at, len(self.outstanding)))
                post = True
                delay = self.usage_full_after_s
            else:
                delay = max(0.05, since + self.usage_full_after_s - now) if not self.full else self.usage_full_after_s
            self.timer = self._call_later(delay)
        if post:
            self.link.transport.post(UsageFull())

    def pop_event(self) -> Optional[UsageEvent]:
        with self.lock:
            return self.events.popleft() if self.events else None
