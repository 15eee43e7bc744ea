"""One socket and everything that lives and dies with it: the link.

A :class:`Link` holds the socket's channel, its :class:`~amqstomp._core.state.ProtocolState`, its timer
thread (:class:`~amqstomp._io.scheduler.Scheduler`), its event queue and the roles of its two other
threads (:mod:`amqstomp._io.handoff`), and does the socket-level work that needs no STOMP decision:
writing under the write lock, heart-beat ticks (asking the protocol state when one is due and when the
peer is overdue), watching a paused socket, and closing. Its reading and dispatching threads are started
and run by :class:`amqstomp._io.owner.LinkOwner` (:mod:`amqstomp._io.threads`).

Writes: the write half, :class:`amqstomp._io.writer.LinkWriter` (the write lock, deferred frames,
frames queued by threads that must never block).
"""
import logging
import socket
import sys
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as _FutureTimeout
from typing import Any, Callable, Iterator, List, Optional, Protocol, Tuple

from .._core.errors import (ERROR_EVENTS, connect_wait_failure, error_answer_failures, error_outcome,
                            last_error_note)
from .._core.events import (
    HeartbeatIn,
    HeartbeatTimeout,
    LinkEnd,
    LinkEvent,
    ProtocolErrorIn,
    ReceiptIn,
)
from .._core.heartbeat import send_stall_timeout_ms
from .._core.state import CONNECTED, RECEIPT, ProtocolState
from ..codec import HEARTBEAT, Frame
from ..exception import ConnectFailedException, ConnectionClosedException, StompException, StompProtocolError
from .channel import look_at_socket, receive_window, stream_reader
from .futures import fail, resolve, wait_future
from .handoff import EventQueue
from .scheduler import Scheduler
from .writer import DEFER_FLUSH_BYTES, DEFER_FLUSH_S, WRITE_FAILED_READ_S, WRITE_STALL_S, LinkWriter

__all__ = ["Link", "FrameSink", "STOP", "DEFER_FLUSH_S", "DEFER_FLUSH_BYTES", "WRITE_FAILED_READ_S", "WRITE_STALL_S", "HostAndPort",
           "resolve", "fail", "wait_future"]

log = logging.getLogger("amqstomp.transport")

HostAndPort = Tuple[str, int]

# A receive deadline that passed with no byte read and none waiting is checked once more after this
# long (seconds) before the peer is declared dead: a reader whose recv() returned while another
# thread held the GIL has its bytes, not the socket.
_HB_CONFIRM_S = 0.1
# While reading is paused the peer is not blamed for silence when this side's advertised receive
# window is below this many bytes: we hold it back.
_CLOSED_WINDOW = 4096
_QUICKACK = getattr(socket, "TCP_QUICKACK", None) if sys.platform.startswith("linux") else None
#: the last item of a link's event queue: its dispatcher ends there
STOP = object()



class FrameSink(Protocol):
    """Who a link's reader hands frames to (:class:`amqstomp._io.owner.LinkOwner`)."""

    def on_frame(self, link: "Link", frame: Frame) -> None:
        """Reader thread: one frame received on ``link``."""


class Link(LinkWriter):
    """Everything that lives and dies with one socket. ``broker``: the user's broker dialect (None:
    CONNECTED's ``server`` names it; :class:`~amqstomp._core.state.ProtocolState`)."""

    #: an API's own DEBUG lines, or None (:attr:`amqstomp._io.owner.LinkOwner.debug_log`)
    debug_log: Any = None

    def __init__(self, channel: Any, host_and_port: HostAndPort, version: str, seq: int, grace: float,
                 broker: Optional[str] = None, name: str = "") -> None:
        self.channel = channel
        self.host_and_port = host_and_port
        self.proto = ProtocolState(version, grace, time.monotonic() * 1000.0, broker)
        #: set when the reader has read to the end of the socket (and closed the link)
        self.read_done = threading.Event()
        self.init_writer(channel)
        # True while the reader is in channel.recv() (or about to be): bytes waiting in the socket
        # count as the peer's liveness only then (peer_alive); a reader stuck elsewhere cannot read them
        self.in_recv = True
        self.state_lock = threading.Lock()
        #: the core's end record (``proto.end``), set by :meth:`close` under ``state_lock``; None while
        #: the link lives (read without the lock on the hot path: a write, a heart-beat tick)
        self.closed: Optional[LinkEnd] = None
        self.connect_future: "Future[Frame]" = Future()
        #: seconds the broker has to answer CONNECT (:meth:`expect_connected`), 0.0 until armed
        self.connect_within_s = 0.0
        #: the listeners' events and which thread reads (:mod:`amqstomp._io.handoff`)
        self.events = EventQueue()
        #: what its threads are called after: ``<connection>.<socket>`` (``amqstomp-timer-3.1``)
        self.name = name or str(seq)
        self.scheduler = Scheduler("amqstomp-timer-%s" % self.name)
        self.flush_owed = getattr(channel, "flush_owed", None)  # a WebSocket's pongs: flush_some writes them
        if self.flush_owed is not None:  # when its reader, which never writes, has some
            channel.call_when_owed(lambda: self.scheduler.call_later(0.0, self.flush_tick))
        #: ``deliver(frame)``: one MESSAGE to the listeners on the calling thread (set by the owner)
        self.deliver_here: Optional[Callable[[Frame], None]] = None
        self.reader: Optional[threading.Thread] = None
        self.dispatcher: Optional[threading.Thread] = None
        # reading paused by flow control: `paused`, `pause_suspended` and `draining` change under
        # pause_lock, which also sets `resume` from them (:meth:`apply_pause`), so the last
        # pause_reading()/resume_reading() always wins and none is lost
        self.pause_lock = threading.Lock()
        self.paused = False  # pause_reading() asked the reader to stop
        self.pause_suspended = 0  # receipt waits on the dispatcher in progress (they must read)
        self.draining = False  # the peer closed/reset while paused: read what it sent, to the end
        self.resume = threading.Event()  # set while the reader may read
        self.resume.set()
        self.paused_waiting = -1  # bytes waiting in the socket at the last look while paused
        self.hb_suspect = False  # a receive deadline passed with no sign of the peer: confirming
        self.seq = seq
        #: why this socket is being ended by plan (LinkOwner.end_planned: a priorityBackup or rebalance move), else None
        self.planned_end: Optional[str] = None

    def threads(self) -> List[threading.Thread]:
        return [t for t in (self.reader, self.dispatcher, self.scheduler.thread) if t is not None]

    def apply_pause(self) -> None:
        """Under ``pause_lock``: let the reader read unless a pause holds it."""
        if self.paused and not self.pause_suspended and not self.draining and not self.closed:
            self.resume.clear()
        else:
            self.resume.set()

    def set_paused(self, paused: bool) -> None:
        """Hold (True) or release (False) the reader; the last call wins
        (:meth:`amqstomp._io.owner.LinkOwner.pause_reading`). A release counts as
        a sign of the peer: the silence while held was ours."""
        with self.pause_lock:
            self.paused = paused
            if not paused:
                self.proto.peer_seen(time.monotonic() * 1000.0)
            self.apply_pause()

    # ------------------------------------------------------------ receipts and waits

    def expect_receipt(self, receipt_id: str) -> "Future[Frame]":
        """A future for the RECEIPT with ``receipt-id: receipt_id`` on this socket,
        failed at once with ConnectionClosedException when the link is closed
        (see :meth:`amqstomp.transport.Transport.expect_receipt`)."""
        future: "Future[Frame]" = Future()
        with self.state_lock:
            if self.closed:
                future.set_exception(ConnectionClosedException("connection closed: %s" % self.close_reason))
            else:
                self.proto.expect_receipt(receipt_id, future)
        return future

    def wait(self, future: "Future[Any]", timeout_s: float, what: str) -> Any:
        """``future.result()`` within ``timeout_s`` seconds (:class:`ReceiptTimeout`
        on expiry). On the thread running this link's listeners a pause of the reader is
        lifted for the wait: the answer may be behind the messages that filled
        the buffer, which only that thread would drain; when that thread is the reading
        one (a listener run inline), the other thread takes reading over first."""
        events = self.events
        on_dispatcher = events.dispatching_here()
        if on_dispatcher:
            events.promote_now()
            with self.pause_lock:
                self.pause_suspended += 1
                self.apply_pause()
        try:
            return wait_future(future, timeout_s, what)
        finally:
            if on_dispatcher:
                with self.pause_lock:
                    self.pause_suspended -= 1
                    self.apply_pause()  # a pause still asked for holds again

    def wait_connected(self, timeout_s: float) -> Frame:
        """The broker's CONNECTED frame on this link, within ``timeout_s`` seconds.

        Raises:
            ConnectFailedException: an ERROR came instead (ConnectRefusedError),
                the link ended, or nothing came in time (its message names the
                broker's host:port).
        """
        try:
            frame: Frame = self.connect_future.result(timeout_s)
            return frame
        except _FutureTimeout:
            host, port = self.host_and_port[0], self.host_and_port[1]
            raise ConnectFailedException("%s:%s: no CONNECTED frame within %.3g s (the broker accepted the socket "
                                         "and did not answer CONNECT)" % (host, port, timeout_s)) from None
        except ConnectFailedException:
            raise
        except StompException as exc:
            raise ConnectFailedException(str(exc)) from exc

    def expect_connected(self, within_s: float) -> None:
        """CONNECT was just written: arm the CONNECTED deadline, ``within_s``
        seconds from now (:meth:`ProtocolState.connect_sent`). Past it with no
        CONNECTED, :meth:`connected_check_tick` ends the socket as a loss (not a
        client close): a failover layer takes it over, else the listeners hear
        ``on_disconnected``. A no-op once the link is closed or CONNECTED came.

        Raises:
            ValueError: ``within_s`` is not a finite number >= 0.
        """
        with self.state_lock:
            if self.closed:
                return
            self.proto.connect_sent(time.monotonic() * 1000.0, within_s * 1000.0)
            self.connect_within_s = within_s
        self.scheduler.call_later(within_s, self.connected_check_tick)

    def connected_check_tick(self) -> None:
        """Timer thread: the CONNECTED deadline (:meth:`expect_connected`). Passed with
        no CONNECTED: the link is closed as a loss; not yet: checked again then."""
        if self.closed:
            return
        proto = self.proto
        now_ms = time.monotonic() * 1000.0
        if proto.connected_overdue(now_ms):
            reason = "no CONNECTED frame within %.3g s of CONNECT" % (self.connect_within_s,)
            log.warning("%s:%s: %s (the broker accepted the socket but did not answer)", self.host_and_port[0],
                        self.host_and_port[1], reason)
            self.close(reason, TimeoutError(reason))
            return
        due = proto.connected_by_ms
        if due is not None and proto.connected_frame is None:  # the timer ran early: again at the deadline
            self.scheduler.call_later(max(0.0, due - now_ms) / 1000.0, self.connected_check_tick)

    def on_control_frame(self, frame: Frame, post_receipts: bool) -> bool:
        """Reader thread: a frame other than MESSAGE. Resolves or fails the receipt
        it answers (STOMP 1.2 "RECEIPT", "ERROR") and the CONNECTED wait, and
        queues the listeners' event (``receipt`` only when ``post_receipts``).
        Returns True for CONNECTED (the caller starts the heart-beats and posts
        ``connected``).

        What an ERROR does is the core's decision (:func:`amqstomp._core.errors.error_outcome`,
        applied here): the receipt it answers fails with :class:`BrokerError`; one that answers
        CONNECT fails the CONNECTED wait with :class:`ConnectRefusedError` and reaches the
        listeners as ``connect_refused`` (their ``on_connect_refused``, whose default is
        ``on_error``), every other one as ``error``. A late answer to this side's own
        UNSUBSCRIBE (RabbitMQ's, :data:`~amqstomp._core.state.UNSUBSCRIBED_ERROR`) is logged at DEBUG, no error."""
        outcome = None
        with self.state_lock:  # receipts change under it (expect_receipt, close)
            proto = self.proto
            event, future = proto.handle(frame)
            if event in ERROR_EVENTS:
                outcome = error_outcome(proto, event, future, frame)
            answers = proto.take_error_answers() if proto.error_answers else None
        if answers:  # receipts an ERROR naming none answers (RabbitMQ: ProtocolState.take_error_answers)
            for token, error in error_answer_failures(answers):
                fail(token, error)
        if event == RECEIPT:
            if future is not None:
                resolve(future, frame)
            if post_receipts:
                self.post(ReceiptIn(frame))
        elif event == CONNECTED:
            return True
        elif outcome is not None:
            log.log(outcome.level, "%s", outcome.log_line)
            if outcome.error is not None:
                fail(outcome.token, outcome.error)
            if outcome.refused is not None:
                fail(self.connect_future, outcome.refused)
            if outcome.event is not None:
                self.post(outcome.event)
        else:
            log.warning("ignoring unexpected %s frame from the broker", frame.cmd)
        return False

    def start_heartbeats(self) -> None:
        """Reader thread, after CONNECTED: arm the heart-beat send and check ticks
        at the negotiated intervals (STOMP 1.2 "Heart-beating"), and the write
        watch (:meth:`write_watch_tick`, with heart-beats or without)."""
        proto = self.proto
        log.debug("CONNECTED version=%s server=%s heart-beats send=%d ms receive=%d ms",
                  proto.version, proto.server, proto.send_ms, proto.recv_ms)
        debug_log = self.debug_log
        if proto.version != "1.0" and debug_log is not None and debug_log.enabled() and \
                debug_log.heartbeat_header(proto.connected_frame):
            debug_log.log_heartbeats_negotiated(proto.send_ms, proto.recv_ms, proto.grace)
        self.scheduler.call_later(self.write_watch_period_s(), self.write_watch_tick)  # heart-beats or none
        if proto.send_ms:
            self.scheduler.call_later(proto.send_period_ms / 1000.0, self.heartbeat_send_tick)
        if proto.recv_ms:
            self.scheduler.call_later(proto.recv_timeout_ms / 1000.0, self.heartbeat_check_tick)

    def error_note(self) -> str:
        """What the reason of a connection the broker ended adds: its last ERROR
        (:func:`amqstomp._core.errors.last_error_note`)."""
        return last_error_note(self.proto, time.monotonic() * 1000.0)

    def heartbeat_send_tick(self) -> None:
        """Timer thread: write a heart-beat when the protocol state says one is
        due (never blocking: a writer holding the lock is activity enough).

        Also the send side's liveness: when the peer has taken none of the bytes
        written to the socket for :func:`~amqstomp._core.heartbeat.send_stall_timeout_ms`
        (2 x the negotiated send interval x the grace factor; Linux's ``TCP_INFO``,
        :meth:`write_stalled`), the link is closed as a loss (a ``TimeoutError``
        cause): a blocked write raises ``ConnectionClosedException``, a failover
        connection moves on. A peer that keeps sending would never trip the
        receive check."""
        if self.closed:
            return
        proto = self.proto
        period = proto.send_period_ms / 1000.0
        now_ms = time.monotonic() * 1000.0
        stalled_ms = self.write_stalled(now_ms)
        if stalled_ms and stalled_ms >= send_stall_timeout_ms(proto.send_ms, proto.grace):
            # our heart-beats cannot reach the peer: it stopped reading (or is gone) while it may
            # still be sending (the receive check cannot see that): give the socket up as a loss
            self.end_stalled("the broker stopped reading: it took none of our bytes for %.2f s (heart-beats every "
                             "%d ms)" % (stalled_ms / 1000.0, proto.send_ms))
            return
        due_in = proto.heartbeat_due_in_ms(now_ms) / 1000.0
        if not due_in:
            # never wait for the write lock: whoever holds it is writing, which
            # counts as activity; and a full socket buffer must not stall the
            # timer thread (it also runs the receive check)
            if self.write_lock.acquire(blocking=False):
                try:
                    if self.wbuf:  # deferred frames count as activity: write them instead
                        self.flush_some()
                    elif not self.closed and self.channel.try_send(HEARTBEAT):
                        self.proto.data_written(time.monotonic() * 1000.0)
                        debug_log = self.debug_log
                        if debug_log is not None and debug_log.enabled():
                            debug_log.log_heartbeat_sent()
                except OSError as exc:
                    self.close("heart-beat write failed: %s" % exc, exc)
                    return
                finally:
                    self.write_lock.release()
            delay = period
        else:
            delay = due_in
        self.scheduler.call_later(delay, self.heartbeat_send_tick)

    def heartbeat_check_tick(self) -> None:
        """Timer thread: the receive heart-beat check. Any byte read counts as the
        peer's liveness (``last_read``); past the deadline the socket is looked at
        before the peer is blamed (see :meth:`peer_alive`); while reading is
        paused the socket is looked at every interval, as the reader does not."""
        if self.closed:
            return
        now = time.monotonic()
        proto = self.proto
        paused = not self.resume.is_set()
        interval_s = proto.recv_ms / 1000.0
        timeout_s = proto.recv_timeout_ms / 1000.0
        if paused and self.paused_look():
            proto.peer_seen(now * 1000.0)
        left_s = proto.receive_left_ms(now * 1000.0) / 1000.0
        if left_s > 0:
            self.hb_suspect = False
            delay = left_s
            if paused:
                delay = min(delay, interval_s)
            self.scheduler.call_later(delay, self.heartbeat_check_tick)
            return
        if self.peer_alive(paused):
            proto.peer_seen(now * 1000.0)
            self.hb_suspect = False
            self.scheduler.call_later(interval_s if paused else timeout_s, self.heartbeat_check_tick)
            return
        if not self.hb_suspect:
            # once more shortly: a reader that had its recv() return while another thread
            # held the GIL has the peer's bytes and updates last_read when it runs
            self.hb_suspect = True
            self.scheduler.call_later(min(_HB_CONFIRM_S, timeout_s), self.heartbeat_check_tick)
            return
        reason = "heart-beat timeout: nothing received for %.2f s (negotiated %d ms)" % (
            now - proto.last_read_ms / 1000.0, proto.recv_ms)
        log.warning("%s:%s: %s", self.host_and_port[0], self.host_and_port[1], reason)
        self.post(HeartbeatTimeout())
        self.close(reason)

    def paused_look(self) -> bool:
        """Timer thread, reading paused: True when the socket shows the peer since
        the last look -- more bytes waiting, or its reset/EOF (that ends the
        pause: the reader reads what came before it, then meets the end and the
        link is lost as usual, failover or disconnect)."""
        gone, waiting = look_at_socket(self.channel.sock)
        if gone:
            log.info("%s:%s: the peer closed or reset the connection while reading was paused: "
                     "reading what it sent before", self.host_and_port[0], self.host_and_port[1])
            with self.pause_lock:
                self.draining = True
                self.apply_pause()
            return True
        if waiting > self.paused_waiting:
            self.paused_waiting = waiting  # new bytes since the last look
            return True
        return False

    def peer_alive(self, paused: bool) -> bool:
        """Timer thread, the receive deadline passed with nothing read: is there a
        sign of the peer the reader has not taken? Looks, reads nothing.

        Reading: bytes waiting in the socket (or in TLS's buffer) are the peer's
        while the reader is in ``recv()`` (it is behind: C code holding the GIL);
        a reader held outside ``recv()`` past the deadline (and the confirming
        look :data:`_HB_CONFIRM_S` later) cannot take them: they are no sign, and
        the link is closed, which also ends whatever held the reader -- unless it is
        running a listener: the other thread then takes reading over and reads them.

        Paused (no new byte since the last look, :meth:`paused_look`): when this
        side's receive window is closed, TCP stops the peer -- our doing, not held
        against it (a stall then shows once reading resumes). Silence with the
        window open is a dead or stalled peer. Without the window size (not Linux
        >= 6.2) only an empty socket buffer (window certainly open) lets silence
        count against the peer."""
        channel = self.channel
        gone, waiting = look_at_socket(channel.sock)
        if not paused:
            if gone:
                return True
            if waiting == 0 and channel.pending() <= 0:
                return False
            # what waits unread is the peer's sign only while the reader can take it: a reader
            # held elsewhere for a whole receive timeout (a write that cannot finish) cannot; a
            # reading thread running a listener hands reading over now (amqstomp._io.handoff)
            return self.in_recv or self.events.ask_promotion()
        if waiting == 0:
            return False
        window = receive_window(channel.sock)
        return window is None or window < _CLOSED_WINDOW

    @property
    def close_error(self) -> Optional[BaseException]:
        """The exception that ended the link, or None (also while it lives)."""
        end = self.closed
        return end.error if end is not None else None

    def close(self, reason: str, error: Optional[BaseException] = None) -> bool:
        """End the link: the core records how (:meth:`ProtocolState.connection_lost`: LOST, or
        CLOSED when this side asked), then every awaited receipt and the CONNECTED wait fail
        (ConnectionClosedException / ConnectFailedException), a pause ends, the timer stops and
        the socket is shut down (the reader then ends). False when it was closed already."""
        with self.state_lock:
            if self.closed:
                return False
            proto = self.proto
            by_client = proto.by_client
            if not by_client:
                reason += self.error_note()
            receipts = proto.connection_lost(reason, error)
            self.closed = proto.end
            connect_failed = None if self.connect_future.done() else connect_wait_failure(proto, reason, error)
        # release every waiter before the socket goes: on_disconnected (posted
        # by the reader once the shutdown wakes it) must find them released
        closed = ConnectionClosedException("connection closed: %s" % reason)
        if error is not None:
            closed.__cause__ = error
        for future in receipts:
            fail(future, closed)
        if connect_failed is not None:
            fail(self.connect_future, connect_failed)
        with self.pause_lock:
            self.resume.set()
        self.scheduler.stop()
        self.channel.shutdown()
        debug_log = self.debug_log
        if (self.proto.send_ms or self.proto.recv_ms) and self.proto.version != "1.0" and debug_log is not None \
                and debug_log.enabled():
            debug_log.log_heartbeat_loop_ended()
        return True

    def read_loop(self, recv_bytes: int, sink: "FrameSink",
                  batch: Optional[Iterator[Frame]] = None) -> Optional[Tuple[str, Optional[BaseException]]]:
        """The reading thread: read the socket until it ends, feeding the protocol
        state and handing each frame to ``sink.on_frame(self, frame)``; re-arms
        ``TCP_QUICKACK`` before every read (Linux: ActiveMQ leaves Nagle on, and
        the client's delayed TCP ACK would stall each prefetch window ~40 ms).
        Waits while reading is paused. Ends by closing the link and the socket.
        ``batch``: frames read by the thread this one took reading over from
        (:mod:`amqstomp._io.handoff`), handled first.

        Returns:
            (reason, error): why the socket ended, and the exception if any; None when
            the other thread took reading over while a listener ran here (the caller
            dispatches now).
        """
        channel = self.channel
        proto = self.proto
        receive = proto.receive_data
        monotonic = time.monotonic
        read = stream_reader(channel, proto, recv_bytes, monotonic)
        # what read() does while no body is arriving, without its Python call (one read per
        # message at prefetch 1)
        recv = channel.recv
        parser = proto.parser
        quickack = _QUICKACK
        sock = channel.sock
        events = self.events
        me = threading.get_ident()
        events.reading = me  # (a thread taking reading over was named under the queue's lock already)
        error: Optional[BaseException] = None
        reason = "connection closed by the broker"
        handed_over = False
        try:
            while True:
                if batch is not None:
                    events.batch = batch  # what a thread taking reading over handles first
                    on_frame = sink.on_frame
                    for frame in batch:
                        on_frame(self, frame)
                        if events.lost == me:  # taken over while a listener ran here (EventQueue.handed_over)
                            events.lost = 0
                            handed_over = True
                            return None
                    batch = None
                if not self.resume.is_set():
                    # what waits in the socket now: the check tick compares against it
                    self.paused_waiting = look_at_socket(sock)[1]
                    self.resume.wait()
                    self.paused_waiting = -1
                if self.closed:
                    break
                if quickack is not None:
                    try:
                        sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)
                    except OSError:
                        quickack = None
                self.in_recv = True
                data = read() if parser.body_missing else recv(recv_bytes)
                self.in_recv = False
                events.reads += 1  # (the idle thread's sign that this one still reads)
                if not data:
                    break
                frames = receive(data, monotonic() * 1000.0)
                if frames:
                    batch = iter(frames)
                elif not proto.buffered and not data.strip(b"\r\n"):
                    debug_log = self.debug_log
                    if debug_log is not None and debug_log.enabled():
                        debug_log.log_heartbeat_received()
                    self.post(HeartbeatIn())
        except StompProtocolError as exc:
            events.stop_reading()  # (nothing inline: these frames' listeners run on the other thread)
            for frame in exc.frames:  # complete frames that came before the fault
                try:
                    sink.on_frame(self, frame)
                except Exception:
                    log.exception("handling a frame before a protocol error failed")
            error = exc
            reason = "protocol error: %s" % exc
            log.error("closing connection to %s:%s: %s", self.host_and_port[0], self.host_and_port[1], reason)
            self.post(ProtocolErrorIn(exc))  # the listeners' on_protocol_error; the frames are the broker's only
        except OSError as exc:
            if not self.closed:
                error = exc
                reason = "connection lost: %s" % exc
        except Exception as exc:  # a bug: never end silently
            error = exc
            reason = "internal error in the reader: %r" % exc
            log.exception("reader thread failed")
        finally:
            if not handed_over and events.reading not in (me, 0):  # a failure after the other thread took over
                handed_over = True
                log.error("the thread that handed reading over failed after: %r", error)
            if not handed_over:
                events.stop_reading()
                if not self.closed:
                    log.info("%s:%s: %s", self.host_and_port[0], self.host_and_port[1], reason)
                elif self.close_reason:
                    reason = self.close_reason  # closed on purpose (heart-beat timeout, close()): say why
                self.close(reason, error)
                reason = self.close_reason
                self.read_done.set()
                if self.write_lock.acquire(timeout=5.0):
                    try:
                        channel.close()
                    finally:
                        self.write_lock.release()
                else:
                    channel.close()
        return None if handed_over else (reason, error)

    def post(self, event: LinkEvent) -> None:
        """Queue ``event`` (:mod:`amqstomp._core.events`) for this socket's dispatching thread
        (a MESSAGE frame is offered as it is: :meth:`amqstomp._io.owner.LinkOwner.deliver_message`)."""
        self.events.put(event)

    def promote_reader(self) -> None:
        """Called on a thread about to wait for what only a read brings (a receipt, the
        socket's end): when it is the reading thread inside a listener, the other
        thread takes reading over now (:meth:`amqstomp._io.handoff.EventQueue.promote_now`)."""
        self.events.promote_now()

