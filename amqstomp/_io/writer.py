"""The write half of a link (:class:`LinkWriter`, which :class:`amqstomp._io.link.Link` extends):
the write lock, the write buffer of deferred frames, the frames queued by threads that must never
block, and the non-blocking flushes the timer thread runs.

Writes: a frame is written under the write lock, in the order the callers got the lock. A frame sent with
``defer=True`` (asynchronous SENDs nobody waits for) is written at once too unless the link is under a
sustained burst: the buffer empty and either nothing written for :data:`DEFER_IDLE_S` (the link is idle:
the streak of close frames starts again) or fewer than :data:`DEFER_STREAK` frames written at once in a
row, each closer than that to the previous write. So sparse or jittery traffic (a paced 2,000 msg/s
whose late pacer sends two or three frames back to back) has every frame go out as it is sent; a
producer sending flat out has its first :data:`DEFER_STREAK` + 1 frames written alone, then each waits in
the write buffer, for at most :data:`DEFER_FLUSH_S` (the timer thread flushes it), until
:data:`DEFER_FLUSH_BYTES` have gathered, or until a frame sent without ``defer`` (it goes out behind them,
in one ``send``): many small frames then cost one system call instead of one each (on loopback a ``send``
costs about 5 µs of CPU, more than the client's own work per message). A timer flush does not end the
streak (the frame after it is close to that write). Order is kept; heart-beats flush the buffer instead.
TLS links never defer.

A thread that must never wait on a socket (the timer: it also runs the heart-beat receive check) writes
with :meth:`LinkWriter.write_nowait`: its frame is queued, written by the next writer before that
writer's own frame, or by the timer once the lock is free and the socket takes bytes.

The last frame of a socket (:meth:`LinkWriter.write_last`, any DISCONNECT): under the write lock the link
becomes ``finished`` (and, at the session's end, the core's link state CLOSING; a planned move's DISCONNECT
leaves the state, so the failover loop still takes the socket's end over), then the frames before it and the
DISCONNECT are written. Every write after that is refused under the same lock (NotConnectedException): no
frame goes out behind the DISCONNECT (STOMP 1.2 "DISCONNECT": the broker ignores it) while its caller is told
it was sent.
"""
import logging
import select
import socket
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Deque, List, Optional

from .._core.events import LinkEnd
from .._core.limits import DEFER_FLUSH_BYTES, DEFER_IDLE_S
from ..exception import ConnectionClosedException, NotConnectedException, StompException
from .channel import send_progress
from .scheduler import Scheduler

__all__ = ["LinkWriter", "DEFER_FLUSH_S", "DEFER_FLUSH_BYTES", "DEFER_IDLE_S", "DEFER_STREAK", "WRITE_FAILED_READ_S",
           "WRITE_STALL_S", "MIN_WRITE_STALL_S", "PeerStoppedReading"]

#: Longest time (seconds) a ``defer=True`` frame waits in the write buffer before the timer thread writes it.
DEFER_FLUSH_S = 0.001
#: Frames written at once in a row, each closer than :data:`DEFER_IDLE_S` to the previous write, before a
#: ``defer=True`` frame waits in the write buffer (a sustained burst): a pacer at 2,000 msg/s has a frame
#: wait only when it catches up after a stall of (DEFER_STREAK + 1) / 2 ms or more, and a flat-out producer
#: pays DEFER_STREAK extra system calls per burst (a burst ends after DEFER_IDLE_S without a write)
DEFER_STREAK = 8
#: Seconds a failed write waits for the reader to read what the broker sent
#: before it closed the socket (its ERROR: the reason the exception gives).
WRITE_FAILED_READ_S = 0.5
#: Seconds the broker may take none of our bytes while a write waits on it (a writer blocked in the
#: socket, or frames in the write buffer) before the link is ended as stalled, when the connection names
#: no bound of its own (the stomp.py API's ``timeout``, JMS's ``jms.sendTimeout`` unless 0): as long as
#: :data:`amqstomp.aio._options.DEFAULT_RECEIPT_TIMEOUT`, the asyncio API's bound of a send.
#: Progress is what counts, not the time a write takes: a broker that reads slowly is never stalled.
WRITE_STALL_S = 10.0
#: The shortest such bound (seconds) a connection may name: a stomp.py ``timeout=`` meant for the
#: connect (0.2 s, say) must not end a healthy link whose peer is slow to acknowledge for a moment.
MIN_WRITE_STALL_S = 1.0
log = logging.getLogger("amqstomp.transport")
_MSG_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


class PeerStoppedReading(TimeoutError):
    """The error a link ends with when the peer took none of our bytes for the bound while
    a write waited (:meth:`LinkWriter.end_stalled`): the link's ``close_error`` tells it."""

_POLL = getattr(select, "poll", None)


def _writable(sock: Any) -> bool:
    """True when the socket takes more bytes now (poll's POLLOUT: for TCP at least
    a third of its send buffer is free, room for a few small frames)."""
    try:
        fd = sock.fileno()
        if fd < 0:
            return False
        if _POLL is not None:
            poller = _POLL()
            poller.register(fd, select.POLLOUT)
            return bool(poller.poll(0))
        return bool(select.select([], [fd], [], 0)[1])  # pragma: no cover - no poll()
    except (OSError, ValueError):
        return False


class LinkWriter:
    """The write half of a :class:`amqstomp._io.link.Link` (its state is set up by
    :meth:`init_writer`; the link supplies the attributes declared below)."""

    channel: Any
    proto: Any
    scheduler: Scheduler
    #: how the link ended (the core's record, :attr:`amqstomp._core.state.ProtocolState.end`),
    #: None while it lives: read without a lock on the hot path
    closed: Optional[LinkEnd]
    reader: Optional[threading.Thread]
    events: Any  # the link's EventQueue (amqstomp._io.handoff)
    host_and_port: Any
    read_done: threading.Event
    state_lock: threading.Lock
    flush_owed: Optional[Callable[[], Any]]
    connect_future: "Future[Any]"

    @property
    def close_reason(self) -> str:
        """Why the link ended; "" while it lives."""
        end = self.closed
        return end.reason if end is not None else ""

    def close(self, reason: str, error: Optional[BaseException] = None) -> bool:  # pragma: no cover - Link's
        raise NotImplementedError

    def wait_read_done(self, timeout_s: Optional[float]) -> bool:
        """Wait up to ``timeout_s`` seconds for the socket to be read to its end (True when
        it was). The reading thread does not wait for itself, unless it runs a listener: the
        other thread then takes reading over (:mod:`amqstomp._io.handoff`). No wait
        before the link's threads started."""
        if self.reader is None or self.read_done.is_set():
            return self.read_done.is_set()
        events = self.events
        if events.reading_here() and not events.promote_now():
            return False
        return self.read_done.wait(timeout_s)

    def init_writer(self, channel: Any) -> None:
        """The write state of a new link on ``channel``."""
        self.write_lock = threading.Lock()
        # deferred frames not yet written (under write_lock), and their size in bytes: a list joined
        # once per write (a growing bytearray copies each frame ~9 times); TLS and WebSocket never defer
        self.wbuf: List[bytes] = []
        self.wbuf_bytes = 0
        self.message_framed = bool(getattr(channel, "message_framed", False))
        # a blocking write of a whole frame with no deadline (:meth:`write`'s usual case): the channel's
        # ``write_whole`` when it has one (a plain socket's own ``sendall``: no Python call in between),
        # else its ``sendall``
        self.write_whole: Callable[[bytes], Any] = getattr(channel, "write_whole", None) or channel.sendall
        # WebSocket: one write, one message, one frame
        self.can_defer = not getattr(channel, "tls", False) and _MSG_DONTWAIT != 0 and not self.message_framed
        self.flush_scheduled = False  # a timer flush of wbuf is pending
        # defer=True frames written at once in a row, each closer than DEFER_IDLE_S to the previous
        # write (write_deferred, under write_lock): at DEFER_STREAK the next ones wait in wbuf
        self.defer_streak = 0
        #: the session's last frame (its DISCONNECT) was written (:meth:`write_last`, under the write
        #: lock): every later write is refused (read without the lock on the hot path, as ``closed``)
        self.finished = False
        #: the last frame was a planned move's DISCONNECT (:meth:`write_last` with ``session_end`` False):
        #: the socket is handed back, not the session ended (what :meth:`refused` says)
        self.handed_back = False
        # frames a thread that must never block queued (write_nowait: the timer's batched ACKs), in
        # the order they were queued; every writer writes them first, under the write lock
        self.nowait: Deque[bytes] = deque()
        self.nowait_scheduled = False  # a timer flush of `nowait` is pending
        # the peer's progress at the last look (write_stalled): bytes it acknowledged, and since when
        # (ms, the protocol state's clock) it took none of ours while some waited
        self.acked_mark = -1
        self.stalled_since_ms = 0.0
        #: ms the peer may take none of our bytes while a write waits on it (:meth:`write_watch_tick`)
        self.write_stall_ms = WRITE_STALL_S * 1000.0

    def write_stalled(self, now_ms: float) -> float:
        """Timer thread (the heart-beat send tick): how long (ms) the peer has taken
        none of the bytes this side wrote while some wait in the socket (0.0 when
        it took some since the last look, when none wait, or when the kernel does
        not tell: :func:`amqstomp._io.channel.send_progress`, Linux only). Looks at
        the kernel's counters only: never takes the write lock, never blocks."""
        sock = getattr(self.channel, "sock", None)
        progress = None if sock is None else send_progress(sock)
        if progress is None:
            return 0.0
        acked, waiting = progress
        if not waiting or acked != self.acked_mark:
            self.acked_mark = acked
            self.stalled_since_ms = now_ms
            return 0.0
        return now_ms - self.stalled_since_ms

    @property
    def write_stall_ms(self) -> float:
        """How long (ms) the peer may take none of our bytes while a write waits
        (:meth:`write_watch_tick`); set by the link's owner, never under
        :data:`MIN_WRITE_STALL_S`."""
        return self._write_stall_ms

    @write_stall_ms.setter
    def write_stall_ms(self, ms: float) -> None:
        self._write_stall_ms = max(MIN_WRITE_STALL_S * 1000.0, ms)

    def end_stalled(self, reason: str) -> None:
        """Timer thread: end the link as a loss because the peer takes none of our
        bytes (``reason`` says for how long); a write blocked on it then fails
        (``ConnectionClosedException``; a SEND's is the driver's ``SendInDoubtError``)."""
        log.warning("%s:%s: %s", self.host_and_port[0], self.host_and_port[1], reason)
        self.close(reason, PeerStoppedReading(reason))

    def write_watch_tick(self) -> None:
        """Timer thread, every :meth:`write_watch_period_s` while the link lives: a
        write waiting on a peer that took none of our bytes for
        :attr:`write_stall_ms` ends the link (:meth:`end_stalled`), heart-beats
        or none. A write waits when a writer holds the write lock (blocked in the
        socket), frames wait in the write buffers, or a RECEIPT is awaited (a JMS
        producer window, a receipted send: its frame may be among the bytes the
        peer does not take). Reads the kernel's counters
        only (:meth:`write_stalled`): never blocks; a peer that reads slowly keeps
        the link. Without ``TCP_INFO`` (not Linux) there is no such check."""
        if self.closed:
            return
        stalled_ms = self.write_stalled(time.monotonic() * 1000.0)
        if stalled_ms >= self.write_stall_ms and (self.write_lock.locked() or self.wbuf or self.nowait
                                                  or self.proto.receipts):
            self.end_stalled("the broker stopped reading: it took none of our bytes for %.2f s while a write "
                             "waited (bound %.3g s)" % (stalled_ms / 1000.0, self.write_stall_ms / 1000.0))
            return
        self.scheduler.call_later(self.write_watch_period_s(), self.write_watch_tick)

    def write_watch_period_s(self) -> float:
        """Seconds between two :meth:`write_watch_tick`: a quarter of the bound, 0.05 to 1 s."""
        return min(1.0, max(0.05, self.write_stall_ms / 4000.0))

    def take_buffer(self) -> bytes:
        """Under the write lock: the deferred frames as one bytes, the buffer emptied."""
        joined = b"".join(self.wbuf)
        self.wbuf.clear()
        self.wbuf_bytes = 0
        return joined

    def lock_for_write(self, write_timeout: Optional[float]) -> None:
        """Take the write lock, waiting at most ``write_timeout`` s (None: for
        ever); a wait that times out closes the link (the broker stopped reading).

        Raises:
            ConnectionClosedException: the wait timed out, or the link is closed.
        """
        lock = self.write_lock
        if not lock.acquire(timeout=-1 if write_timeout is None else max(0.0, write_timeout)):
            reason = "a write was blocked for %.3g s (the broker stopped reading)" % (write_timeout or 0.0)
            self.close(reason)
            raise ConnectionClosedException("connection closed: %s" % reason)
        if self.closed:
            lock.release()
            raise ConnectionClosedException("connection closed: %s" % self.close_reason)

    def write(self, data: bytes, write_timeout: Optional[float] = None) -> None:
        """Write the deferred frames, then ``data``, under the write lock. With
        ``write_timeout`` (s) both the wait for the lock and the write itself are
        bounded by it (each): a write that cannot finish in time closes the link.

        Raises:
            ConnectionClosedException: the link is closed, the write failed or
                did not finish within ``write_timeout``.
        """
        if write_timeout is None:  # the usual case: no clock read, the lock taken here
            lock = self.write_lock
            lock.acquire()
            if data and not (self.wbuf or self.nowait or self.closed or self.finished):
                # nothing queued before it, not finished: straight out
                try:  # _sendall(data), inlined: a call less per frame on the hot path
                    self.write_whole(data)
                    self.proto.last_write_ms = time.monotonic() * 1000.0  # (ProtocolState.data_written, inlined)
                except OSError as exc:
                    raise self.write_failed(exc) from exc
                except BaseException as exc:
                    self.write_interrupted(exc)
                    raise
                finally:
                    lock.release()
                return
            lock.release()
        self.lock_for_write(write_timeout)
        try:
            if self.finished:
                raise self.refused()
            self.write_locked(data, write_timeout)
        finally:
            self.write_lock.release()

    def write_locked(self, data: bytes, write_timeout: Optional[float]) -> None:
        """Under the write lock: the queued frames, the deferred ones, then ``data``
        (each write bounded by ``write_timeout`` s; None: not bounded).

        Raises:
            ConnectionClosedException: the write failed or did not finish in time.
        """
        deadline = None if write_timeout is None else time.monotonic() + max(0.0, write_timeout)
        if self.nowait:
            self.take_nowait()
        wbuf = self.wbuf
        if wbuf:
            big = len(data) >= DEFER_FLUSH_BYTES  # not copied into the join
            if data and not big:
                wbuf.append(data)  # one system call for all
            self._sendall(self.take_buffer(), deadline)
            if big:
                self._sendall(data, deadline)
        elif data:
            self._sendall(data, deadline)

    def write_last(self, data: bytes, write_timeout: Optional[float] = None, session_end: bool = True) -> None:
        """Write a DISCONNECT (``data``) as :meth:`write` does, after the frames
        queued before it, and make it the last frame of this socket: under the
        write lock, before it is written, the link becomes ``finished``, so every
        later write is refused (:meth:`refused`: NotConnectedException) and none
        goes out behind it (STOMP 1.2 "DISCONNECT": the broker ignores it).

        ``session_end`` True (the session's end: ``disconnect()``, or a DISCONNECT
        frame written on the open socket by the application): the core's link state
        becomes CLOSING too (:meth:`amqstomp._core.state.ProtocolState.closing`: the
        socket's end is then this side's, no loss). False (a DISCONNECT pinned to
        this socket: a failover layer's planned move hands it back): the state is
        left as it is, so the socket's end is still taken over by the failover loop,
        and a frame refused here waits for the next socket (the engine's
        :meth:`amqstomp._engine.client.Client.write`) or raises.

        Raises:
            ConnectionClosedException: the link is closed, the write failed or
                did not finish within ``write_timeout`` (the link is then closed).
        """
        self.lock_for_write(write_timeout)
        try:
            if session_end:
                with self.state_lock:  # (lock order: the write lock, then the state lock)
                    self.proto.closing()
            elif not self.finished:
                self.handed_back = True
            self.finished = True
            self.write_locked(data, write_timeout)
        finally:
            self.write_lock.release()

    def refused(self) -> NotConnectedException:
        """The exception of a write refused after the socket's last frame (:meth:`write_last`)."""
        if self.handed_back:
            return NotConnectedException("not connected: this socket was handed back (its DISCONNECT is written "
                                         "before a planned move to another broker; nothing was sent after it)")
        return NotConnectedException("not connected: the connection is closing (its DISCONNECT is written; "
                                     "nothing was sent after it)")

    def _sendall(self, data: bytes, deadline: Optional[float] = None) -> None:
        """Under the write lock: write ``data`` whole (until ``deadline``,
        ``time.monotonic()`` s, at most); a failed or late write closes the link.

        Raises:
            ConnectionClosedException: the write failed or did not finish in time.
        """
        try:
            if deadline is None:
                self.channel.sendall(data)
            else:
                self.channel.sendall(data, deadline)
        except OSError as exc:
            raise self.write_failed(exc) from exc
        except BaseException as exc:
            self.write_interrupted(exc)
            raise
        self.proto.data_written(time.monotonic() * 1000.0)

    def write_interrupted(self, exc: BaseException) -> None:
        """Under the write lock: a write ended by an exception that is not the socket's
        (Ctrl-C's KeyboardInterrupt, one a signal handler raised: Python runs the handler
        inside a ``sendall`` that waits). Part of the frame may be on the wire, and the
        broker would read whatever follows as the rest of it, so this socket carries
        nothing more: the link is closed as a loss (a failover layer moves to a new
        socket; without one the next write raises). The caller re-raises ``exc``; the
        frame was not delivered (a broker drops a frame its socket cut short). A
        StompException is no interruption: the channel refused the frame before writing
        a byte (a WebSocket text message that is not UTF-8: FrameEncodeError), and the
        link carries on."""
        if isinstance(exc, StompException):
            return
        self.close("a write was interrupted (%s): part of a frame may be on the wire, so the socket "
                   "cannot carry another" % (type(exc).__name__,))  # (not the caller's exception: no other thread raises it)

    def write_failed(self, exc: OSError) -> ConnectionClosedException:
        """A write failed: close the link; the exception to raise. The reader gets :data:`WRITE_FAILED_READ_S`
        to read the ERROR a broker sends before it closes (oversize frame, refused login): its reason."""
        self.wait_read_done(WRITE_FAILED_READ_S)
        reason = "write failed: %s" % exc
        self.close(reason, exc)
        if self.close_reason != reason:  # the reader's, with the broker's reason: that first
            reason = "%s (then a write failed: %s)" % (self.close_reason, exc)
        closed = ConnectionClosedException("connection closed: %s" % reason)
        closed.__cause__ = exc
        return closed

    def write_deferred(self, data: bytes, write_timeout: Optional[float]) -> None:
        """Write ``data`` now when the link is idle (see the module docstring), else
        add it to the write buffer; write the buffer when it is full, else make
        sure a timer flush is coming."""
        if write_timeout is None:
            lock = self.write_lock
            lock.acquire()
            if self.closed:
                lock.release()
                raise ConnectionClosedException("connection closed: %s" % self.close_reason)
        else:
            self.lock_for_write(write_timeout)
        try:
            proto = self.proto
            if self.finished:
                raise self.refused()
            if self.nowait:
                self.take_nowait()
            wbuf = self.wbuf
            if not wbuf:
                if time.monotonic() * 1000.0 - proto.last_write_ms >= DEFER_IDLE_S * 1000.0:
                    self.defer_streak = -1  # idle: nothing to coalesce with, the streak starts again (at 0)
                if self.defer_streak < DEFER_STREAK:  # sparse or jittery traffic, or a burst's start: no wait
                    self.defer_streak += 1
                    self._sendall(data, None if write_timeout is None else time.monotonic() + max(0.0, write_timeout))
                    return
            wbuf.append(data)
            size = self.wbuf_bytes + len(data)
            if size >= DEFER_FLUSH_BYTES:
                self._sendall(self.take_buffer(),
                              None if write_timeout is None else time.monotonic() + max(0.0, write_timeout))
            else:
                self.wbuf_bytes = size
                if not self.flush_scheduled:
                    self.flush_scheduled = True
                    self.scheduler.call_later(DEFER_FLUSH_S, self.flush_tick)
        finally:
            self.write_lock.release()

    def flush_tick(self, tries: int = 0) -> None:
        """Timer thread: write the deferred frames without ever blocking (the timer
        also sends heart-beats). When a writer holds the lock or the broker is not
        reading, look again later (backing off to 50 ms)."""
        if self.closed:
            return
        if self.write_lock.acquire(blocking=False):
            try:
                if not self.flush_some():
                    self.flush_scheduled = False
                    return
            finally:
                self.write_lock.release()
        self.scheduler.call_later(min(0.05, DEFER_FLUSH_S * (2 ** min(tries, 6))), self.flush_tick, tries + 1)

    def write_nowait(self, data: bytes) -> None:
        """Write ``data`` without ever blocking the calling thread (the timer's
        batched ACKs: that thread also runs the heart-beat receive check).

        ``data`` joins the frames queued this way, in the order they were queued;
        every later writer writes them before its own frame, under the write lock,
        so nothing queued after ``data`` overtakes it. When the write lock is free
        and the socket takes bytes, they are written now, as far as they fit
        without blocking; otherwise the timer tries again shortly (backing off to
        50 ms) until they are written or the link closes (they are then lost with
        the socket, like the bytes in its buffers: the broker redelivers what they
        acknowledged).

        Raises:
            ConnectionClosedException: the link is closed.
            NotConnectedException: the session's last frame was written (:meth:`write_last`).
        """
        if self.closed:
            raise ConnectionClosedException("connection closed: %s" % self.close_reason)
        if self.finished:
            raise self.refused()
        self.nowait.append(data)
        if not self.nowait_scheduled:
            self.nowait_tick()

    def take_nowait(self) -> None:
        """Under the write lock: move the queued ``write_nowait`` frames to the write
        buffer (a message-framed channel, WebSocket, writes each as its own message now)."""
        queued = self.nowait
        if self.message_framed:
            while queued:
                self._sendall(queued.popleft())
            return
        wbuf = self.wbuf
        while queued:
            data = queued.popleft()
            wbuf.append(data)
            self.wbuf_bytes += len(data)

    def nowait_tick(self, tries: int = 0) -> None:
        """Timer thread (or :meth:`write_nowait`'s caller): write the queued
        ``write_nowait`` frames without blocking; look again later when a writer
        holds the lock or the socket does not take them."""
        self.nowait_scheduled = False
        if self.closed or not self.nowait:
            return
        if self.finished:  # queued as the DISCONNECT went out: lost with the socket
            self.nowait.clear()
            return
        if self.write_lock.acquire(blocking=False):
            try:
                if self.closed:
                    return
                if self.can_defer:  # a plain socket: a non-blocking partial write, the rest kept
                    self.take_nowait()
                    if not self.flush_some():
                        return
                elif _writable(self.channel.sock):  # TLS, WebSocket: a few small frames fit once writable
                    self.take_nowait()
                    if self.wbuf:
                        self._sendall(self.take_buffer())
                    return
            except ConnectionClosedException:
                return
            finally:
                self.write_lock.release()
        self.nowait_scheduled = True
        self.scheduler.call_later(min(0.05, DEFER_FLUSH_S * (2 ** min(tries, 6))), self.nowait_tick, tries + 1)

    def flush_some(self) -> bool:
        """Under the write lock: write what fits, never blocking, of what the channel owes (``flush_owed``)
        and of the buffer (the ``write_nowait`` frames joined to it first, on a plain socket). True when some is
        left (the broker is not reading fast enough)."""
        if self.nowait and self.can_defer:
            self.take_nowait()
        wbuf = self.wbuf
        try:
            left = self.flush_owed is not None and not self.closed and bool(self.flush_owed())
            if left or not wbuf or self.closed:
                return left
            joined = wbuf[0] if len(wbuf) == 1 else b"".join(wbuf)
            sent = self.channel.send_some(joined)
        except OSError as exc:
            self.write_failed(exc)
            return False
        if sent:
            self.proto.data_written(time.monotonic() * 1000.0)
        wbuf[:] = [joined[sent:]] if sent < len(joined) else []
        self.wbuf_bytes = len(joined) - sent
        return bool(wbuf)
