"""One STOMP socket on an asyncio loop: the driver of :class:`amqstomp._core.state.ProtocolState`.

An :class:`asyncio.BufferedProtocol` (no reading task: the loop calls :meth:`AioLink.buffer_updated`
with what the socket read into its buffer, and the MESSAGE frames go straight to their subscription's
queue, no task and no thread per message). Everything the protocol decides is the
core's: framing (the compiled codec), CONNECTED and its deadline, receipts and the
ERROR-to-receipt matching, heart-beat negotiation and deadlines
(:meth:`~amqstomp._core.state.ProtocolState.next_deadline`). This module only applies
those decisions with the loop's clock and timers:

* one timer per socket (``loop.call_at``) re-armed at the core's next deadline: it writes
  a heart-beat (an EOL) when one is due, ends a socket whose CONNECTED is overdue, and
  ends a socket whose broker is silent past the receive deadline -- after one
  confirmation: the loop may have been blocked (a handler that held it 3 s) with the
  broker's bytes waiting in the socket, so the check runs once more after the loop has
  read what is waiting (a ``call_soon`` runs after a zero-timeout poll of the selector);
  while this side holds reading (a full prefetch buffer) silence is not held against
  the broker;
* writes are whole frames (appended whole to the link's buffer, which goes out in one
  ``transport.write`` at the loop turn's end, :meth:`AioLink.write`: never half a frame,
  whatever task is cancelled); :meth:`AioLink.drain` waits while the transport's
  buffer is above its high-water mark (``pause_writing``/``resume_writing``);
* receipts are :class:`asyncio.Future` tokens registered in the core; a lost socket
  fails each with :class:`~amqstomp.exception.ConnectionClosedException`.

Licensed under the Apache License, Version 2.0.
"""
import asyncio
import logging
import socket
import sys
import ssl as _ssl
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, cast

from ..codec import Frame
from ..exception import ConnectFailedException, ConnectionClosedException, StompProtocolError, WriteTimeout
from .._core.errors import (ERROR_EVENTS, connect_wait_failure, error_answer_failures, error_outcome,
                            last_error_note)
from .._core.events import LinkEvent
from .._core.limits import DEFER_FLUSH_BYTES, DEFER_IDLE_S
from .._core.state import CONNECTED, RECEIPT, ProtocolState

__all__ = ["AioLink", "LostAfterWrite", "open_link"]

log = logging.getLogger("amqstomp.aio")

_EOL = b"\n"
#: :data:`~amqstomp._core.limits.DEFER_IDLE_S` in ms (the core's clock unit)
_IDLE_MS = DEFER_IDLE_S * 1000.0
#: The read buffer (bytes a read takes at most).
READ_BYTES = 65536
#: Linux: re-armed after every read, as the threaded reader does (ActiveMQ leaves Nagle on: with the
#: client's TCP ACK delayed, each window of small MESSAGE frames would wait up to 40 ms for it)
_QUICKACK = getattr(socket, "TCP_QUICKACK", None) if sys.platform.startswith("linux") else None


def loop_clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """``loop.time`` (seconds, the clock of the loop's timers), as a function to call per frame:
    :func:`time.monotonic` itself when the loop's ``time`` is asyncio's own (which returns it),
    not one more Python call per read and per write; any other loop's (uvloop's) ``time``."""
    if getattr(type(loop), "time", None) is asyncio.BaseEventLoop.time:
        return time.monotonic
    return loop.time


class LostAfterWrite(ConnectionClosedException):
    """Internal: a frame was written, then its socket ended before its RECEIPT (the
    callers raise the exception that names the doubt: SendInDoubtError, TransactionInDoubtError)."""


class AioLink(asyncio.BufferedProtocol):
    """One socket's STOMP session on the loop (see the module docstring).

    Args:
        loop (asyncio.AbstractEventLoop): the loop it runs on.
        seq (int): this socket's number in its client (1, 2, ...: a message names the
            socket that delivered it, for the lost-socket rule).
        on_message (Callable[[Frame], None]): called on the loop for each MESSAGE.
        on_lost (Callable[[AioLink], None]): called once when the socket ended.
        version (str): the highest STOMP version asked for (``"1.2"``).
        grace (float): receive heart-beat grace factor (1.5).
        broker (str | None): the user's dialect name, or None (CONNECTED's ``server``).
        on_event (Callable[[LinkEvent], None] | None): called on the loop with the listeners'
            event of an ERROR that answers no waiter (:class:`~amqstomp._core.events.ErrorIn`:
            :attr:`amqstomp._core.errors.ErrorOutcome.unanswered`).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, seq: int, on_message: Callable[[Frame], None],
                 on_lost: Callable[["AioLink"], None], version: str = "1.2", grace: float = 1.5,
                 broker: Optional[str] = None, on_event: Optional[Callable[[LinkEvent], None]] = None) -> None:
        self.loop = loop
        self.seq = seq
        self.on_message = on_message
        self.on_lost = on_lost
        self.on_event = on_event
        #: the loop's clock (seconds; :func:`loop_clock`)
        self.clock = loop_clock(loop)
        self.proto = ProtocolState(version, grace, loop.time() * 1000.0, broker)
        self.transport: Optional[asyncio.Transport] = None
        self._view = memoryview(bytearray(READ_BYTES))
        self._sock: Any = None
        self.connected: "asyncio.Future[Frame]" = loop.create_future()
        self.closed = False
        self.close_reason = ""
        self.close_error: Optional[BaseException] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        #: the connect timeout (seconds) CONNECTED was due within (:meth:`connect_sent`)
        self.connect_within_s = 0.0
        self._suspect = False
        #: True while the transport's write buffer is above its high-water mark
        self.write_paused = False
        self._drain_waiters: List["asyncio.Future[None]"] = []
        self._deferred = bytearray()
        self._flush_armed = False
        self._read_holders: Set[Any] = set()
        #: calls made once every frame of the read being handled went to its place (from
        #: :meth:`buffer_updated`, outside any task; appended to while it hands frames on): a
        #: subscription resumes its waiting receive then, which takes every message of the read in
        #: one go, not one task switch each
        self.after_read: List[Callable[[], None]] = []
        self.ended: "asyncio.Future[None]" = loop.create_future()

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport: asyncio's, or uvloop's (which has its interface without subclassing it)
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if _QUICKACK is not None and sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # asyncio hands out a TransportSocket, whose setsockopt is a Python call around the
            # socket's: re-armed per read, the socket's own is called (the wrapper's otherwise)
            # (a new connection starts in quick-ACK mode: armed from the first read on)
            raw = getattr(sock, "_sock", None)
            self._sock = raw if isinstance(raw, socket.socket) else sock

    def get_buffer(self, sizehint: int) -> memoryview:
        """The loop reads into one preallocated buffer (``recv_into``): a plain ``Protocol``
        gets a new bytes object of the transport's ``max_size`` (256 KiB) per read, which
        the allocator maps and unmaps each time -- measured here as most of the CPU per
        message at prefetch 1."""
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        """The loop read ``nbytes`` into the buffer: frames to the core, MESSAGEs to their subscription."""
        proto = self.proto
        if self._sock is not None:  # re-armed (Linux clears it); the socket closing: no more
            try:
                self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:  # the socket is closing
                self._sock = None
        try:
            frames = proto.receive_data(bytes(self._view[:nbytes]), self.clock() * 1000.0)
        except StompProtocolError as exc:
            for frame in exc.frames:
                self._frame(frame)
            self.lose("the broker's bytes are not STOMP: %s" % exc, exc)
            return
        on_message = self.on_message
        try:
            for frame in frames:
                if frame.cmd == "MESSAGE":
                    on_message(frame)
                else:
                    self._frame(frame)
                if self.closed:
                    return
        finally:
            if self.after_read:
                due, self.after_read = self.after_read, []
                for call in due:
                    call()

    def data_received(self, data: bytes) -> None:
        """Bytes read (a test's, or a loop that ignores the buffer protocol): handled as reads
        into the buffer, :data:`READ_BYTES` at a time (:meth:`buffer_updated`)."""
        view = self._view
        for start in range(0, len(data), READ_BYTES):
            chunk = data[start:start + READ_BYTES]
            view[:len(chunk)] = chunk
            self.buffer_updated(len(chunk))
            if self.closed:
                return

    def eof_received(self) -> Optional[bool]:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self.proto.by_client:
            reason = "connection closed by the client"
        elif exc is not None:
            reason = "connection lost: %s" % exc
        else:
            reason = "connection closed by the broker"
        self._end(reason, exc)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------ control frames

    def _frame(self, frame: Frame) -> None:
        """A frame other than MESSAGE: what an ERROR does is the core's decision
        (:func:`amqstomp._core.errors.error_outcome`), applied here: logged, its waiter
        failed, or, answering none, its event handed to ``on_event``; an ERROR answering
        CONNECT also ends the socket."""
        proto = self.proto
        event, token = proto.handle(frame)
        if event == RECEIPT:
            if token is not None and not token.done():
                token.set_result(frame)
        elif event == CONNECTED:
            if not self.connected.done():
                self.connected.set_result(frame)
            self._arm()
        elif event in ERROR_EVENTS:
            outcome = error_outcome(proto, event, token, frame)
            log.log(outcome.level, "%s", outcome.log_line)
            if outcome.error is not None and not token.done():
                token.set_exception(outcome.error)
            if outcome.refused is not None:
                if not self.connected.done():
                    self.connected.set_exception(outcome.refused)
                self.lose("the broker refused CONNECT")
                return
            if outcome.unanswered and self.on_event is not None and outcome.event is not None:
                self.on_event(outcome.event)
        else:
            log.warning("unexpected %s frame from the broker, ignored", frame.cmd)
        if proto.error_answers:
            for future, error in error_answer_failures(proto.take_error_answers()):
                if not future.done():
                    future.set_exception(error)

    # ------------------------------------------------------------ writing

    def write(self, data: bytes, defer: bool = False) -> None:
        """Write one whole frame's bytes (never part of one), in order: out by the end of this
        loop turn (see :meth:`flush`).

        Frames written during one turn of the loop (the tasks and callbacks it runs before it
        polls the sockets again) -- but the first after :data:`~amqstomp._core.limits.DEFER_IDLE_S`
        without a write, which goes out at once, unless ``defer`` (a SEND nobody awaits a RECEIPT
        for: it always waits for the turn's end, so a producer's run of them never depends on the
        clock) -- gather in this link's buffer and go out in one
        ``transport.write`` at the turn's end (one ``loop.call_soon``, armed by the turn's first
        frame: no timer, and a lone frame leaves as soon as the task that wrote it yields), or at
        once when :data:`~amqstomp._core.limits.DEFER_FLUSH_BYTES` have gathered (a task that never
        yields still writes). N frames in one turn cost one ``send`` instead of N (on loopback a
        ``send`` costs more CPU than the client's own work per message): the threaded writer's
        coalescing (:mod:`amqstomp._io.writer`), with the loop's turn for its timer. A frame of
        that size or more is written as it is, behind what gathered (no copy).

        Raises:
            ConnectionClosedException: the socket is gone; nothing written.
        """
        transport = self.transport
        if self.closed or transport is None:
            raise ConnectionClosedException("connection closed: %s" % (self.close_reason or "not open"))
        buffer = self._deferred
        if not buffer and not defer:
            now = self.clock() * 1000.0
            if now - self.proto.last_write_ms >= _IDLE_MS:  # the link was idle: at once (the threaded writer's rule)
                transport.write(data)
                self.proto.last_write_ms = now
                return
        if len(data) >= DEFER_FLUSH_BYTES:
            self.flush()
            self._write_out(data)
            return
        buffer += data
        if len(buffer) >= DEFER_FLUSH_BYTES:
            self.flush()
        elif not self._flush_armed:
            self._flush_armed = True
            self.loop.call_soon(self._turn_end)

    def _write_out(self, data: bytes) -> None:
        cast(asyncio.Transport, self.transport).write(data)
        self.proto.last_write_ms = self.clock() * 1000.0

    def _turn_end(self) -> None:
        """The loop turn's end (the ``call_soon`` a turn's first :meth:`write` armed)."""
        self._flush_armed = False
        self.flush()

    def flush(self) -> None:
        """Write what gathered (:meth:`write`) now, in one ``transport.write``; nothing when the
        socket is gone (what gathered is dropped then)."""
        buffer = self._deferred
        if buffer and not self.closed and self.transport is not None:
            self._write_out(bytes(buffer))
        buffer.clear()

    def encode(self, cmd: str, headers: Dict[str, Any], body: bytes = b"") -> bytes:
        """The frame's bytes in the session's version (:meth:`ProtocolState.encode`): a header
        whose value is None is left out; a ``content-length: None`` means no automatic one (as
        the threaded API's ``send``)."""
        if "content-length" in headers and headers["content-length"] is None:
            return self.proto.encode(cmd, headers, body, False)
        return self.proto.encode(cmd, headers, body)

    async def drain(self, wait_s: float, what: object) -> None:
        """Wait until the transport's write buffer is below its low-water mark (returns at
        once when it is), within ``wait_s`` seconds; ``what`` names the frame written last.

        Raises:
            WriteTimeout: the socket took no more bytes in time (what was queued goes out if
                the broker reads again).
            ConnectionClosedException: the socket ended while waiting.
        """
        try:
            await asyncio.wait_for(self._drained(), wait_s)
        except asyncio.TimeoutError:
            raise WriteTimeout("%s: queued, and the socket took no more bytes within %.3g s (the broker is "
                               "not reading): it goes out if the broker reads again" % (what, wait_s)) from None

    async def _drained(self) -> None:
        while self.write_paused:
            if self.closed:
                raise ConnectionClosedException("connection closed: %s" % self.close_reason)
            waiter: "asyncio.Future[None]" = self.loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def expect_receipt(self, receipt_id: str) -> "asyncio.Future[Frame]":
        """A future for the RECEIPT (or ERROR) of ``receipt_id``, registered in the core."""
        future: "asyncio.Future[Frame]" = self.loop.create_future()
        if self.closed:
            future.set_exception(ConnectionClosedException("connection closed: %s" % self.close_reason))
        else:
            self.proto.expect_receipt(receipt_id, future)
        return future

    def forget_receipt(self, receipt_id: str) -> None:
        """Its waiter gave up (timeout, cancellation): the core forgets the token."""
        self.proto.pop_receipt(receipt_id)

    # ------------------------------------------------------------ reading held by flow control

    def hold_reading(self, holder: Any) -> None:
        """A subscription's local buffer is full: stop reading the socket (TCP back-pressure)."""
        if not self._read_holders and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._read_holders.add(holder)

    def release_reading(self, holder: Any) -> None:
        """``holder`` drained to half: read again once nothing else holds; the silence
        while held was this side's, not the broker's."""
        holders = self._read_holders
        if holder in holders:
            holders.discard(holder)
            if not holders and self.transport is not None and not self.closed:
                self.proto.peer_seen(self.loop.time() * 1000.0)
                self.transport.resume_reading()

    # ------------------------------------------------------------ the timer

    def connect_sent(self, within_s: float, timeout_s: float) -> None:
        """CONNECT went out: CONNECTED is due within ``within_s`` seconds (the core's deadline), what
        is left of the connect timeout of ``timeout_s`` seconds (which a late CONNECTED's error names)."""
        self.connect_within_s = timeout_s
        self.proto.connect_sent(self.loop.time() * 1000.0, within_s * 1000.0)
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.closed:
            return
        due = self.proto.next_deadline(self.loop.time() * 1000.0)
        if due is not None:
            self._timer = self.loop.call_at(due / 1000.0, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.closed:
            return
        proto = self.proto
        now = self.loop.time() * 1000.0
        if proto.connected_overdue(now):
            reason = "no CONNECTED frame within %.3g s (connect_timeout; the peer accepted the socket and did not " \
                     "answer CONNECT)" % self.connect_within_s
            self.lose(reason, TimeoutError(reason))
            return
        if proto.send_ms and proto.connected and proto.heartbeat_due_in_ms(now) <= 0.0:
            self.write(_EOL)
            self.flush()  # at once: the next heart-beat deadline counts from this write
        if proto.recv_ms and proto.connected:
            if self._read_holders:
                proto.peer_seen(now)  # reading is held here: the silence is ours
            elif proto.receive_left_ms(now) <= 0.0:
                if not self._suspect:  # confirm once, after the loop read what is waiting
                    self._suspect = True
                    self.loop.call_soon(self._confirm_silence)
                    return
                self.lose("heart-beat timeout: nothing from the broker for %.0f ms"
                          % (now - proto.last_read_ms))
                return
        self._suspect = False
        self._arm()

    def _confirm_silence(self) -> None:
        if self.closed:
            return
        if self.proto.receive_left_ms(self.loop.time() * 1000.0) > 0.0:
            self._suspect = False
            self._arm()
        else:
            self._tick()

    # ------------------------------------------------------------ the end

    def closing(self) -> None:
        """This side asks to close (DISCONNECT): the end is no loss."""
        self.proto.closing()

    def lose(self, reason: str, error: Optional[BaseException] = None) -> None:
        """End the socket now (a fault found here: heart-beat, CONNECTED overdue, bad bytes)."""
        if self.closed:
            return
        log.warning("ending the connection: %s", reason)
        self._end(reason, error)
        if self.transport is not None:
            self.transport.abort()

    def abort(self) -> None:
        """End the socket now without a loss (the client's close, bounded)."""
        self.proto.closing()
        self._end("connection closed by the client", None)
        if self.transport is not None:
            self.transport.abort()

    def _end(self, reason: str, error: Optional[BaseException]) -> None:
        if self.closed:
            return
        if not self.proto.by_client:
            reason += last_error_note(self.proto, self.loop.time() * 1000.0)
        self.closed = True
        self.close_reason = reason
        self.close_error = error
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        closed = ConnectionClosedException("connection closed: %s" % reason)
        for future in self.proto.connection_lost():
            if not future.done():
                future.set_exception(closed)
        if not self.connected.done():
            self.connected.set_exception(connect_wait_failure(self.proto, reason, error))
            self.connected.exception()  # retrieved: no "never retrieved" warning when nobody waits
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_exception(closed)
        self._drain_waiters = []
        if not self.ended.done():
            self.ended.set_result(None)
        self.on_lost(self)


async def open_link(loop: asyncio.AbstractEventLoop, factory: Callable[[], AioLink], host: str, port: int,
                    context: Optional[_ssl.SSLContext], headers: Mapping[str, Any], timeout_s: float) -> AioLink:
    """Open a socket to ``host:port`` (TLS with ``context``), write CONNECT with ``headers`` and
    wait for CONNECTED: all within ``timeout_s`` seconds (the CONNECTED deadline is the core's,
    :meth:`ProtocolState.connect_sent`).

    Raises:
        ConnectRefusedError: the broker answered CONNECT with ERROR (its reason in the message).
        ConnectFailedException: no TCP connection, or no CONNECTED, in time; or the socket ended first.
    """
    deadline = loop.time() + timeout_s
    try:
        _transport, link = await asyncio.wait_for(loop.create_connection(factory, host, port, ssl=context), timeout_s)
    except asyncio.TimeoutError:
        raise ConnectFailedException("no TCP connection within %.3g s" % timeout_s) from None
    except OSError as exc:
        raise ConnectFailedException(str(exc)) from exc
    try:
        link.write(link.encode("CONNECT", dict(headers)))
        left = max(0.0, deadline - loop.time())
        link.connect_sent(left, timeout_s)
        await asyncio.wait_for(asyncio.shield(link.connected), left + 1.0)  # the core's deadline ends it first
    except asyncio.TimeoutError:
        link.lose("no CONNECTED frame within %.3g s" % timeout_s)
        raise ConnectFailedException("no CONNECTED frame within %.3g s" % timeout_s) from None
    except ConnectionClosedException as exc:
        raise ConnectFailedException(str(exc)) from exc
    except BaseException:
        link.abort()
        raise
    log.info("connected to %s:%d (%s, STOMP %s)", host, port, link.proto.server, link.proto.version)
    return link
