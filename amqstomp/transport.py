"""The wire layer: one socket, its threads, heart-beats and receipts.

A :class:`Transport` owns at most one live socket at a time (a *link*). Per
link it runs exactly three threads, all of which end when the link ends
(``close()``, EOF, a socket error, a protocol error or a heart-beat timeout):

* the **reader** (``amqstomp-reader``): ``recv`` into a
  :class:`~amqstomp.codec.FrameParser`; resolves receipt futures; hands
  MESSAGE frames to a replaceable handler (see :meth:`Transport.set_message_handler`)
  and every other event to the dispatcher. On Linux it re-arms
  ``TCP_QUICKACK`` before every ``recv`` (ActiveMQ's STOMP connector leaves
  Nagle on; without it the client's delayed TCP ACK stalls each prefetch
  window for ~40 ms when the client has nothing to send);
* the **dispatcher** (``amqstomp-dispatch``): runs listener callbacks in
  arrival order, so a slow listener never delays reading or heart-beats;
* the **timer** (``amqstomp-timer``): a small :class:`Scheduler` for heart-beat
  send/check, the flush of deferred writes, and for later users (ack-flush
  timers, reconnect back-off).

Writes: a frame is written under the link's write lock, in the order the
callers got the lock. A frame sent with ``defer=True`` (asynchronous SENDs
nobody waits for) may instead wait in the link's write buffer, for at most
:data:`DEFER_FLUSH_S` (the timer thread flushes it), until
:data:`DEFER_FLUSH_BYTES` have gathered, or until any frame sent without
``defer`` (it goes out behind them, in one ``send``): many small frames then
cost one system call instead of one each. Order is kept; heart-beats flush the
buffer instead. TLS links never defer.

A socket that ends without :meth:`Transport.close` is offered to a failover
layer first (:meth:`Transport.set_link_lost_hook`, used by
:class:`amqstomp.failover.Reconnector`): it opens the next link with
:meth:`Transport.open` (``only=`` one broker) from its own short-lived thread,
and the listeners hear ``on_transport_interrupted`` instead of
``on_disconnected``. Each link's three threads end with it, so the count is the
same after any number of failovers.

This module knows STOMP only as far as the wire needs it: CONNECT/CONNECTED
heart-beat negotiation, RECEIPT/ERROR correlation, and frame encoding via
:mod:`amqstomp.codec`. Protocol facades live in :mod:`amqstomp.connection`.
"""
import heapq
import itertools
import logging
import math
import queue
import random
import select
import selectors
import socket
import ssl
import struct
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as _FutureTimeout
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

from .codec import HEARTBEAT, Frame, FrameHead, FrameParser, encode_frame
from .exception import (
    BrokerError,
    ConfigurationError,
    ConnectFailedException,
    ConnectRefusedError,
    ConnectionClosedException,
    FrameEncodeError,
    FrameLimitError,
    NotConnectedException,
    ReceiptTimeout,
    StompException,
    StompProtocolError,
)
from .listener import ConnectionListener as _ConnectionListener
from .utils import MAX_WAIT_S, clamp_wait

__all__ = ["Transport", "Scheduler", "TimerHandle", "DEFAULT_CONNECT_TIMEOUT", "DEFAULT_WAIT_TIMEOUT",
           "DEFER_FLUSH_S", "DEFER_FLUSH_BYTES"]

log = logging.getLogger("amqstomp.transport")

HostAndPort = Tuple[str, int]

#: Seconds allowed for one TCP (and TLS) connect when ``timeout`` is None.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds a blocking wait (CONNECTED, a receipt) lasts when the caller gives no timeout.
DEFAULT_WAIT_TIMEOUT = 30.0
#: Seconds ``close()`` waits for the link's threads to end.
DEFAULT_CLOSE_TIMEOUT = 10.0

# A heart-beat is written when nothing was written for this fraction of the
# negotiated send interval. ActiveMQ checks reads on a fixed grid of exactly
# that interval with no grace (ProtocolConverter.hbGracePeriodMultiplier = 1.0,
# AbstractInactivityMonitor.readCheck), so writing at the full interval would
# now and then leave one of its windows empty.
_HB_SEND_FRACTION = 0.5
# Peers that decide on a fixed grid whether to send a keep-alive (ActiveMQ's
# AbstractInactivityMonitor.writeCheck skips one when anything was written in
# the previous window; RabbitMQ's heart-beater works the same way) can leave
# up to two intervals between bytes: measured on ActiveMQ 5.17 with 1 s
# heart-beats, 2.0 s of silence after CONNECTED or after a MESSAGE. The
# receive deadline is therefore this many intervals times the grace factor.
_PEER_GRID_FACTOR = 2.0

#: Longest time (seconds) a frame sent with ``defer=True`` waits in the link's
#: write buffer before the timer thread writes it.
DEFER_FLUSH_S = 0.001
#: A write buffer holding this many bytes is written at once (by the sender).
DEFER_FLUSH_BYTES = 65536

_QUICKACK = getattr(socket, "TCP_QUICKACK", None) if sys.platform.startswith("linux") else None
_MSG_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
# A receive deadline that passed with no byte read and none waiting is checked once
# more after this long (seconds) before the peer is declared dead: a reader whose
# recv() returned while another thread held the GIL has its bytes, not the socket.
_HB_CONFIRM_S = 0.1
# While reading is paused the peer is not blamed for silence when this side's
# advertised receive window is below this many bytes: we hold it back.
_CLOSED_WINDOW = 4096
_STOP = object()
_NO_HEADERS: Mapping[str, Any] = {}  # never written to
_LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
_MASKED_HEADERS = ("passcode",)


# --------------------------------------------------------------------------- scheduler


class TimerHandle:
    """A callback scheduled on a :class:`Scheduler`; ``cancel()`` stops it from running.

    Attributes:
        when (float): ``time.monotonic()`` deadline, in seconds.
    """

    __slots__ = ("when", "fn", "args", "cancelled")

    def __init__(self, when: float, fn: Callable[..., Any], args: Tuple[Any, ...]) -> None:
        self.when = when
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the callback (no effect once it has started)."""
        self.cancelled = True


class Scheduler:
    """One thread that runs callbacks at given times (a tiny ``call_later`` loop).

    Callbacks run one at a time on the scheduler's thread and must be short;
    an exception in one is logged and does not stop the others. Used for
    heart-beats here; later modules use it for ack-flush timers and reconnect
    back-off.

    Args:
        name (str): the thread's name.
    """

    def __init__(self, name: str = "amqstomp-timer") -> None:
        self.name = name
        self._heap: List[Tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition(threading.Lock())
        self._stopped = False
        self._thread: Optional[threading.Thread] = None

    @property
    def thread(self) -> Optional[threading.Thread]:
        """The scheduler's thread (None before :meth:`start`)."""
        return self._thread

    def start(self) -> "Scheduler":
        """Start the thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        return self

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run ``fn(*args)`` on the scheduler thread after ``delay_s`` seconds.

        Returns:
            TimerHandle: cancel it to drop the call. After :meth:`stop` the
            returned handle is already cancelled.
        """
        handle = TimerHandle(time.monotonic() + max(0.0, min(float(delay_s), MAX_WAIT_S)), fn, args)
        with self._cond:
            if self._stopped:
                handle.cancelled = True
                return handle
            heapq.heappush(self._heap, (handle.when, next(self._seq), handle))
            if self._heap[0][2] is handle:
                self._cond.notify()
        return handle

    def stop(self, join_timeout: Optional[float] = None) -> None:
        """Drop every pending call and end the thread.

        Args:
            join_timeout (float | None): seconds to wait for the thread to end
                (not waited for when None, or when called from the thread itself).
        """
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        thread = self._thread
        if join_timeout is not None and thread is not None and thread is not threading.current_thread():
            thread.join(join_timeout)

    def _run(self) -> None:
        cond = self._cond
        heap = self._heap
        while True:
            with cond:
                while True:
                    if self._stopped:
                        return
                    if heap:
                        delay = heap[0][0] - time.monotonic()
                        if delay <= 0:
                            handle = heapq.heappop(heap)[2]
                            break
                        cond.wait(delay)
                    else:
                        cond.wait()
            if handle.cancelled:
                continue
            try:
                handle.fn(*handle.args)
            except Exception:
                log.exception("timer callback %r failed", handle.fn)


# --------------------------------------------------------------------------- socket looks

try:
    import fcntl as _fcntl
    import termios as _termios
    _FIONREAD: Optional[int] = _termios.FIONREAD
except ImportError:  # pragma: no cover - not Unix
    _fcntl = None  # type: ignore[assignment]
    _FIONREAD = None
_POLL = getattr(select, "poll", None)
# the peer reset the connection (ERR/HUP) or sent its FIN (RDHUP, Linux: seen even
# with unread bytes before it)
_POLL_GONE = (getattr(select, "POLLERR", 0) | getattr(select, "POLLHUP", 0) | getattr(select, "POLLNVAL", 0)
              | getattr(select, "POLLRDHUP", 0))
_POLL_IN = getattr(select, "POLLIN", 1)
_TCP_INFO = getattr(socket, "TCP_INFO", None) if sys.platform.startswith("linux") else None
_TCPI_RCV_WND = 232  # offsetof(struct tcp_info, tcpi_rcv_wnd), Linux >= 6.2


def _look_at_socket(sock: socket.socket) -> Tuple[bool, int]:
    """Look at a socket without reading from it: (the peer reset or closed the
    connection, bytes waiting to be read). Without FIONREAD the count is 1 for
    "some". A socket that cannot be looked at (closed) counts as gone."""
    try:
        fd = sock.fileno()
        if fd < 0:
            return True, 0
        if _POLL is not None:
            poller = _POLL()
            poller.register(fd, _POLL_IN | _POLL_GONE)
            events = 0
            for _, ev in poller.poll(0):
                events |= ev
            readable, gone = bool(events & _POLL_IN), bool(events & _POLL_GONE)
        else:  # pragma: no cover - no poll()
            r, _, x = select.select([fd], [], [fd], 0)
            readable, gone = bool(r), bool(x)
        if _fcntl is None or _FIONREAD is None:  # pragma: no cover - only "some or none"
            return gone, 1 if readable else 0
        buf = bytearray(4)
        _fcntl.ioctl(fd, _FIONREAD, buf)
        waiting = struct.unpack("i", bytes(buf))[0]
        if readable and waiting == 0:
            gone = True  # readable with nothing to read: the EOF
        return gone, waiting
    except (OSError, ValueError):
        return True, 0


def _receive_window(sock: socket.socket) -> Optional[int]:
    """The receive window this side advertised last, in bytes (Linux >= 6.2's
    ``tcpi_rcv_wnd``), or None when the kernel does not tell."""
    if _TCP_INFO is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 512)
    except (OSError, ValueError):
        return None
    if len(info) < _TCPI_RCV_WND + 4:
        return None
    return int(struct.unpack_from("I", info, _TCPI_RCV_WND)[0])


# --------------------------------------------------------------------------- channels


class _PlainChannel:
    """A connected TCP socket in blocking mode: reads on the reader thread,
    writes under the link's write lock, each direction on its own."""

    tls = False

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.settimeout(None)

    def recv(self, size: int) -> bytes:
        return self.sock.recv(size)

    def pending(self) -> int:
        """Bytes read from the socket but not yet returned by :meth:`recv` (none)."""
        return 0

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_some(self, data: Union[bytes, bytearray, memoryview]) -> int:
        """Write what fits without blocking; returns the bytes written (0: the
        socket buffer is full)."""
        try:
            return self.sock.send(data, _MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return 0

    def try_send(self, data: bytes) -> bool:
        """Write a few bytes without blocking; False when the socket buffer is full."""
        try:
            sent = self.sock.send(data, _MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        if sent < len(data):  # only ever used for 1-byte heart-beats
            self.sock.sendall(data[sent:])
        return True

    def shutdown(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _TLSChannel:
    """A TLS socket in non-blocking mode. OpenSSL connections must not be used
    by two threads at once, so every SSL call runs under one lock held only for
    that call; threads wait for readiness outside it with a selector."""

    tls = True
    _POLL_S = 1.0  # re-check the closed flag this often while waiting

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.sock = sock
        sock.setblocking(False)
        self._io = threading.Lock()
        self._closed = False
        self._unsent: Optional[memoryview] = None  # a write OpenSSL asked us to retry
        self._rsel = selectors.DefaultSelector()
        self._wsel = selectors.DefaultSelector()
        self._rsel.register(sock, selectors.EVENT_READ)

    def _wait(self, sel: selectors.BaseSelector, events: int) -> None:
        try:
            sel.modify(self.sock, events)
        except (KeyError, ValueError):
            sel.register(self.sock, events)
        sel.select(self._POLL_S)

    def recv(self, size: int) -> bytes:
        while True:
            with self._io:
                if self._closed:
                    return b""
                try:
                    return self.sock.recv(size)
                except ssl.SSLWantReadError:
                    events = selectors.EVENT_READ
                except ssl.SSLWantWriteError:
                    events = selectors.EVENT_WRITE
                except ssl.SSLZeroReturnError:
                    return b""
            self._wait(self._rsel, events)

    def pending(self) -> int:
        """Decrypted bytes OpenSSL holds that :meth:`recv` has not returned yet."""
        with self._io:
            if self._closed:
                return 0
            try:
                return self.sock.pending()
            except (OSError, ValueError):
                return 0

    def _send_some(self, view: memoryview) -> Tuple[int, int]:
        """One SSL write under the lock: (bytes written, events to wait for)."""
        with self._io:
            if self._closed:
                raise BrokenPipeError("TLS connection closed")
            try:
                return self.sock.send(view), 0
            except ssl.SSLWantWriteError:
                return 0, selectors.EVENT_WRITE
            except ssl.SSLWantReadError:
                return 0, selectors.EVENT_READ

    def sendall(self, data: bytes) -> None:
        pending = self._unsent
        if pending is not None:
            self._unsent = None
            self._sendall_view(pending)
        self._sendall_view(memoryview(data))

    def _sendall_view(self, view: memoryview) -> None:
        while len(view):
            sent, events = self._send_some(view)
            if sent:
                view = view[sent:]
            else:
                self._wait(self._wsel, events)

    def try_send(self, data: bytes) -> bool:
        try:
            self._wsel.modify(self.sock, selectors.EVENT_WRITE)
        except (KeyError, ValueError):
            self._wsel.register(self.sock, selectors.EVENT_WRITE)
        if not self._wsel.select(0):  # socket buffer full: skip this beat
            return False
        # a write OpenSSL asked us to retry goes first (it is an earlier beat)
        view = self._unsent if self._unsent is not None else memoryview(data)
        sent, _ = self._send_some(view)
        rest = view[sent:]
        self._unsent = rest if len(rest) else None
        return sent > 0

    def shutdown(self) -> None:
        with self._io:
            self._closed = True
        try:
            # the plain socket's shutdown: SSLSocket.shutdown would drop the SSL
            # object under a reader that may still touch it
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        for sel in (self._rsel, self._wsel):
            try:
                sel.close()
            except Exception:
                pass
        try:
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------- link


class _Link:
    """Everything that lives and dies with one socket."""

    def __init__(self, channel: Any, host_and_port: HostAndPort, version: str, seq: int) -> None:
        self.channel = channel
        self.host_and_port = host_and_port
        self.version = version
        self.parser = FrameParser(version=version)
        self.write_lock = threading.Lock()
        # deferred frames not yet written (under write_lock), and their size in bytes: a
        # list joined once per write (a growing bytearray copies each frame ~9 times);
        # TLS links never defer
        self.wbuf: List[bytes] = []
        self.wbuf_bytes = 0
        self.can_defer = not getattr(channel, "tls", False) and _MSG_DONTWAIT != 0
        self.flush_scheduled = False  # a timer flush of wbuf is pending
        self.state_lock = threading.Lock()
        self.closed = False
        self.close_reason = ""
        self.close_error: Optional[BaseException] = None
        self.connected = False
        # (header line bytes, headers, frame bytes) the broker enforces, from CONNECTED's server,
        # and the frame size above which send_frame checks them (none: never)
        self.limits: Optional[Tuple[int, int, int]] = None
        self.check_above = _NO_CHECK_BYTES
        self.connected_frame: Optional[Frame] = None
        self.connect_future: "Future[Frame]" = Future()
        self.receipts: Dict[str, "Future[Frame]"] = {}
        self.events: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self.scheduler = Scheduler("amqstomp-timer-%d" % seq)
        self.reader: Optional[threading.Thread] = None
        self.dispatcher: Optional[threading.Thread] = None
        now = time.monotonic()
        self.last_read = now
        self.last_write = now
        self.client_heartbeat = (0, 0)
        self.send_ms = 0
        self.recv_ms = 0
        self.recv_timeout_s = 0.0
        # reading paused by flow control: `paused`, `pause_suspended` and `draining` change
        # under pause_lock, which also sets `resume` from them (Transport._apply_pause), so
        # the last pause_reading()/resume_reading() always wins and none is lost
        self.pause_lock = threading.Lock()
        self.paused = False  # pause_reading() asked the reader to stop
        self.pause_suspended = 0  # receipt waits on the dispatcher in progress (they must read)
        self.draining = False  # the peer closed/reset while paused: read what it sent, to the end
        self.resume = threading.Event()  # set while the reader may read
        self.resume.set()
        self.paused_waiting = -1  # bytes waiting in the socket at the last look while paused
        self.hb_suspect = False  # a receive deadline passed with no sign of the peer: confirming
        self.seq = seq
        self.by_client = False  # closed by Transport.close() (not lost): no failover
        self.silent = False  # a failover attempt abandoned: no disconnected event

    def threads(self) -> List[threading.Thread]:
        return [t for t in (self.reader, self.dispatcher, self.scheduler.thread) if t is not None]


def _apply_pause(link: "_Link") -> None:
    """Under ``link.pause_lock``: let the reader read unless a pause holds it."""
    if link.paused and not link.pause_suspended and not link.draining and not link.closed:
        link.resume.clear()
    else:
        link.resume.set()


def _take_buffer(link: "_Link") -> bytes:
    """Under the write lock: the deferred frames as one bytes, the buffer emptied."""
    joined = b"".join(link.wbuf)
    link.wbuf.clear()
    link.wbuf_bytes = 0
    return joined


def _merged(head: FrameHead, headers: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """A frame head's headers followed by the frame's own (a name in both keeps
    the head's value: the receiver of the encoded frame keeps the first line,
    STOMP 1.2 "Repeated Header Entries")."""
    merged = dict(head.headers)
    if headers:
        for name, value in headers.items():
            merged.setdefault(name, value)
    return merged


def _parse_heartbeat(value: Optional[str]) -> Tuple[int, int]:
    if not value:
        return 0, 0
    try:
        x, y = value.replace(" ", "").split(",")
        return max(0, int(x)), max(0, int(y))
    except ValueError:
        log.warning("ignoring malformed heart-beat header %r", value)
        return 0, 0


def _clean_headers(headers: Mapping[str, Any]) -> Dict[str, Any]:
    if any(name in headers for name in _MASKED_HEADERS):
        return {k: ("********" if k in _MASKED_HEADERS else v) for k, v in headers.items()}
    return dict(headers)


#: ActiveMQ Classic's STOMP frame limits (activemq-stomp ``StompWireFormat``,
#: 5.x): bytes of one encoded header line (``MAX_HEADER_LENGTH``), headers per
#: frame (``MAX_HEADERS``), bytes of a frame (``MAX_DATA_LENGTH`` bounds the
#: body; the ``wireFormat.maxFrameSize`` of ActiveMQ's sample configuration,
#: 104857600, the command, header lines and body together). A frame over one
#: gets an ERROR and the connection closed (measured on 5.17.2: it still takes
#: 10241-byte lines and 1001 headers, from the order of its checks; these are
#: the documented limits). Checked by :meth:`Transport.send_frame` before
#: writing, when CONNECTED's ``server`` is ``ActiveMQ/...``.
ACTIVEMQ_LIMITS = (10240, 1000, 100 * 1024 * 1024)
# a frame of at most this many bytes breaks none of ACTIVEMQ_LIMITS (1001 header lines
# take more): send_frame looks closer only at larger ones
_LIMITS_SAFE_BYTES = 3000
_NO_CHECK_BYTES = 2 ** 30 - 1  # no limits known (a small int: the comparison stays cheap)


def _check_limits(link: "_Link", cmd: str, data: bytes, body_length: int, server: Optional[str]) -> None:
    """Raise FrameLimitError when the encoded frame ``data`` breaks one of the
    limits the link's broker enforces (``send_frame`` asks only for frames over
    ``link.check_above`` bytes)."""
    limits = link.limits
    if limits is None or (len(data) - body_length <= _LIMITS_SAFE_BYTES and len(data) <= limits[2]):
        return
    max_line, max_headers, max_frame = limits
    where = "the broker (server %s) answers ERROR and closes the connection; %s frame not sent" % (server, cmd)
    if len(data) > max_frame:
        raise FrameLimitError("frame of %d bytes is over the broker's limit of %d bytes: %s"
                              % (len(data), max_frame, where), "frame size", max_frame, len(data))
    lines = [line for line in bytes(data[:len(data) - body_length - 1]).split(b"\n")[1:] if line]
    for line in lines:
        if len(line) > max_line:
            name = line.split(b":", 1)[0].decode("utf-8", "replace")
            raise FrameLimitError("header %r: its line is %d bytes encoded, over the broker's limit of %d bytes "
                                  "per header line: %s" % (name, len(line), max_line, where),
                                  "header line", max_line, len(line), name)
    count = len({line.split(b":", 1)[0] for line in lines})  # the broker counts distinct names
    if count > max_headers:
        raise FrameLimitError("%d headers, over the broker's limit of %d headers per frame: %s"
                              % (count, max_headers, where), "headers", max_headers, count)


def _checked_hosts(host_and_ports: Any) -> List[HostAndPort]:
    """``host_and_ports`` as a list of (str, int), or ConfigurationError naming
    the bad entry: a host that is not a non-empty str (None, bytes, ``""``
    would be turned into text and looked up in DNS), a port outside 1-65535."""
    if isinstance(host_and_ports, (str, bytes)) or (
            isinstance(host_and_ports, tuple) and len(host_and_ports) == 2 and isinstance(host_and_ports[1], int)):
        raise ConfigurationError("host_and_ports must be a list of (host, port) pairs, got %r (one broker: "
                                 "[(host, port)])" % (host_and_ports,))
    hosts: List[HostAndPort] = []
    for entry in host_and_ports:
        try:
            host, port = entry
        except (TypeError, ValueError):
            raise ConfigurationError("each entry of host_and_ports must be a (host, port) pair, got %r"
                                     % (entry,)) from None
        if not isinstance(host, str) or not host.strip() or any(ord(ch) < 33 or ord(ch) == 127 for ch in host):
            raise ConfigurationError("bad host %r in host_and_ports entry %r: a host name or address as a "
                                     "non-empty str (no blanks or control characters) is expected"
                                     % (host, entry))
        try:
            number = int(port) if not isinstance(port, (bool, float)) else -1
        except (TypeError, ValueError):
            number = -1
        if not 0 < number < 65536:
            raise ConfigurationError("bad port %r in host_and_ports entry %r: an int from 1 to 65535 is expected"
                                     % (port, entry))
        hosts.append((host, number))
    return hosts


def _local_host_names() -> Tuple[str, ...]:
    try:
        return _LOCAL_NAMES + (socket.gethostname(),)
    except OSError:
        return _LOCAL_NAMES


# --------------------------------------------------------------------------- transport


class Transport:
    """One STOMP connection's socket, threads, heart-beats and receipts.

    Args:
        host_and_ports (list[tuple[str, int]] | None): brokers to try, in order;
            ``[("localhost", 61613)]`` when None.
        prefer_localhost (bool): try entries naming this machine first.
        try_loopback_connect (bool): for an entry naming this machine by its
            host name, try ``127.0.0.1`` on that port first.
        reconnect_sleep_initial (float): seconds before the second round of
            connect attempts.
        reconnect_sleep_increase (float): each later pause is this fraction
            longer (0.5: 50 % longer).
        reconnect_sleep_jitter (float): up to this fraction is added at random.
        reconnect_sleep_max (float): longest pause, seconds.
        reconnect_attempts_max (int): socket connect attempts in all (each host
            tried counts one); -1 for no limit. Applies to :meth:`open` only;
            failover after a drop is a separate layer.
        timeout (float | None): seconds for one TCP (+TLS) connect
            (:data:`DEFAULT_CONNECT_TIMEOUT` when None), and the default for
            blocking waits (:data:`DEFAULT_WAIT_TIMEOUT` when None).
        keepalive (bool | tuple | None): TCP keep-alive: True for the OS
            defaults, ``("linux", idle_s, interval_s, count)`` or
            ``("mac", interval_s)`` to tune it.
        vhost (str | None): kept for the facade's ``host`` header.
        auto_decode (bool): listeners get bodies as ``str`` (decoded with
            ``encoding``, undecodable bytes replaced) instead of ``bytes``.
        encoding (str): text encoding of bodies.
        bind_host_port (tuple[str, int] | None): local address to bind before
            connecting.
        ssl_context (ssl.SSLContext | None): wrap every connection in TLS with
            this context (see also :meth:`set_ssl_context`).
        heart_beat_receive_scale (float): grace factor for the receive check
            (stomp.py's name and default, 1.5). The broker is declared dead
            (``on_heartbeat_timeout``, then the socket is closed) after
            ``2 x receive interval x scale`` of silence: ActiveMQ's inactivity
            monitor decides on a fixed grid whether to send a keep-alive and
            can leave two intervals between bytes (see ``_PEER_GRID_FACTOR``).
            Heart-beats are written whenever nothing was written for half the
            send interval, because ActiveMQ checks reads on a fixed grid with
            no grace.
        recv_bytes (int): bytes asked for per ``recv``.
        auto_content_length (bool): add ``content-length`` to frames with a body
            (STOMP 1.2 "Header content-length"; ActiveMQ then builds a
            BytesMessage, without it a TextMessage).
    """

    def __init__(self,
                 host_and_ports: Optional[Sequence[HostAndPort]] = None,
                 prefer_localhost: bool = True,
                 try_loopback_connect: bool = True,
                 reconnect_sleep_initial: float = 0.1,
                 reconnect_sleep_increase: float = 0.5,
                 reconnect_sleep_jitter: float = 0.1,
                 reconnect_sleep_max: float = 60.0,
                 reconnect_attempts_max: int = 3,
                 timeout: Optional[float] = None,
                 keepalive: Any = None,
                 vhost: Optional[str] = None,
                 auto_decode: bool = True,
                 encoding: str = "utf-8",
                 bind_host_port: Optional[HostAndPort] = None,
                 *,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 heart_beat_receive_scale: float = 1.5,
                 recv_bytes: int = 65536,
                 auto_content_length: bool = True) -> None:
        hosts = _checked_hosts(host_and_ports or [("localhost", 61613)])
        self.host_and_ports: List[HostAndPort] = self._order_hosts(hosts, prefer_localhost, try_loopback_connect)
        self.reconnect_sleep_initial = reconnect_sleep_initial
        self.reconnect_sleep_increase = reconnect_sleep_increase
        self.reconnect_sleep_jitter = reconnect_sleep_jitter
        self.reconnect_sleep_max = reconnect_sleep_max
        self.reconnect_attempts_max = reconnect_attempts_max
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 < timeout < float("inf")):
            raise ValueError("timeout must be a finite number of seconds > 0 or None, got %r" % (timeout,))
        self.timeout = clamp_wait(timeout)  # longer than the platform can wait: that long
        self.keepalive = keepalive
        self.vhost = vhost
        self.auto_decode = auto_decode
        self.encoding = encoding
        self.bind_host_port = bind_host_port
        self.heart_beat_receive_scale = float(heart_beat_receive_scale)
        self.recv_bytes = int(recv_bytes)
        self.auto_content_length = auto_content_length
        self._ssl_default: Optional[Tuple[ssl.SSLContext, Any]] = (ssl_context, None) if ssl_context else None
        self._ssl_hosts: Dict[HostAndPort, Tuple[ssl.SSLContext, Any]] = {}
        self._lock = threading.RLock()
        self._link: Optional[_Link] = None
        self._link_seq = itertools.count(1)
        self._listeners: Dict[str, Any] = {}
        self._listener_list: Tuple[Any, ...] = ()
        self._before_message: Tuple[Any, ...] = ()
        self._on_message: Tuple[Any, ...] = ()
        self._on_send: Tuple[Callable[[Frame], Any], ...] = ()
        self._wants_receipts = False
        self._done_receipts: "OrderedDict[str, Future[Frame]]" = OrderedDict()
        self._message_handler: Callable[[Frame], None] = self.deliver_message
        self._consumed_hook: Optional[Callable[[Frame], None]] = None
        self._failed_hook: Optional[Callable[[Frame, str], None]] = None
        self._dispatch_filter: Optional[Callable[[Frame], bool]] = None
        self._link_lost_hook: Optional[Callable[[int, str, Optional[BaseException]], Optional[str]]] = None

    # ------------------------------------------------------------ configuration

    @staticmethod
    def _order_hosts(hosts: List[HostAndPort], prefer_localhost: bool, try_loopback: bool) -> List[HostAndPort]:
        if not (prefer_localhost or try_loopback):
            return hosts
        local = _local_host_names()
        if prefer_localhost:
            hosts = sorted(hosts, key=lambda hp: 0 if hp[0] in local else 1)  # stable
        if try_loopback:
            extra = []
            for host, port in hosts:
                if host in local and host not in _LOCAL_NAMES and ("127.0.0.1", port) not in hosts \
                        and ("localhost", port) not in hosts and ("127.0.0.1", port) not in extra:
                    extra.append(("127.0.0.1", port))
            hosts = extra + hosts
        return hosts

    def set_ssl_context(self, context: ssl.SSLContext,
                        for_hosts: Optional[Sequence[HostAndPort]] = None,
                        cert_validator: Optional[Callable[[Any, str], Tuple[bool, str]]] = None) -> None:
        """Use TLS (``context``) for the given hosts, or for all when ``for_hosts`` is None.

        Args:
            cert_validator: optional ``(cert, hostname) -> (ok, message)``
                called with ``getpeercert()`` after the handshake; a false
                ``ok`` fails that connect attempt.
        """
        entry = (context, cert_validator)
        if for_hosts is None:
            self._ssl_default = entry
        else:
            for host, port in for_hosts:
                self._ssl_hosts[(host, int(port))] = entry

    def get_ssl_context(self, host_and_port: Optional[HostAndPort] = None) -> Optional[ssl.SSLContext]:
        """The TLS context used for ``host_and_port`` (the current one when None), or None."""
        hp = host_and_port or self.current_host_and_port
        entry = self._ssl_hosts.get(hp) if hp else None
        entry = entry or self._ssl_default
        return entry[0] if entry else None

    # ------------------------------------------------------------ listeners

    def set_listener(self, name: str, listener: Any) -> None:
        """Register ``listener`` (a :class:`~amqstomp.listener.ConnectionListener`
        or any object with some ``on_*`` methods) under ``name``; listeners are
        called in the order of their names."""
        if listener is None:
            raise ValueError("listener must not be None")
        with self._lock:
            self._listeners[name] = listener
            self._rebuild_listeners()

    def remove_listener(self, name: str) -> None:
        """Unregister the listener called ``name`` (KeyError when there is none)."""
        with self._lock:
            del self._listeners[name]
            self._rebuild_listeners()

    def get_listener(self, name: str) -> Any:
        """The listener registered as ``name``, or None."""
        return self._listeners.get(name)

    @property
    def listeners(self) -> Dict[str, Any]:
        """A copy of the name -> listener map."""
        with self._lock:
            return dict(self._listeners)

    def _rebuild_listeners(self) -> None:
        ordered = tuple(listener for _, listener in sorted(self._listeners.items(), key=lambda kv: str(kv[0])))
        self._listener_list = ordered
        # listeners' own on_send (the base class's no-op is skipped: with none, send_frame
        # builds no Frame)
        self._on_send = tuple(fn for fn in (_overridden(l, "on_send") for l in ordered) if fn is not None)
        # per MESSAGE: the listeners' own on_before_message / on_message (the base class's
        # do-nothing methods are skipped: they are called for every message)
        self._before_message = tuple(_overridden(l, "on_before_message") for l in ordered)
        self._on_message = tuple(_overridden(l, "on_message") for l in ordered)
        # RECEIPTs go to the dispatcher only for a listener of its own on_receipt
        self._wants_receipts = any(_overridden(l, "on_receipt") is not None for l in ordered)

    # ------------------------------------------------------------ state

    @property
    def current_host_and_port(self) -> Optional[HostAndPort]:
        """(host, port) of the open socket, or None."""
        link = self._link
        return link.host_and_port if link is not None and not link.closed else None

    @property
    def version(self) -> Optional[str]:
        """The STOMP version in use on the open link (the negotiated one once
        CONNECTED arrived), or None."""
        link = self._link
        return link.version if link is not None else None

    @property
    def connected_frame(self) -> Optional[Frame]:
        """The CONNECTED frame of the current link (None before it arrives)."""
        link = self._link
        return link.connected_frame if link is not None else None

    @property
    def server(self) -> Optional[str]:
        """CONNECTED's ``server`` header (e.g. ``"ActiveMQ/5.17.2"``), or None."""
        frame = self.connected_frame
        return frame.headers.get("server") if frame is not None else None

    @property
    def heartbeats(self) -> Tuple[int, int]:
        """Negotiated (send, receive) heart-beat intervals in ms; (0, 0) when off
        (STOMP 1.2 "Heart-beating")."""
        link = self._link
        if link is None or link.closed:
            return 0, 0
        return link.send_ms, link.recv_ms

    @property
    def link_seq(self) -> int:
        """Number of the current (or last) socket of this transport: 1 for the
        first, +1 for each new one; 0 before the first. A failover layer tells
        the messages of a lost socket from the new socket's by it."""
        link = self._link
        return link.seq if link is not None else 0

    def connected_link_seq(self) -> int:
        """The open socket's number (:attr:`link_seq`) once its CONNECTED came,
        else 0. A caller that writes with ``send_frame(..., link_seq=)`` of it
        cannot put a frame on a newer socket before that one's CONNECT."""
        link = self._link
        return link.seq if link is not None and link.connected and not link.closed else 0

    def link_alive(self, seq: int) -> bool:
        """True while socket number ``seq`` is the open one: a MESSAGE it
        delivered (``Frame.link_seq``) can still be acknowledged."""
        link = self._link
        return link is not None and link.seq == seq and not link.closed

    def is_open(self) -> bool:
        """True while a socket is open (CONNECTED may not have arrived yet)."""
        link = self._link
        return link is not None and not link.closed

    def is_connected(self) -> bool:
        """True while a socket is open and the broker's CONNECTED has arrived."""
        link = self._link
        return link is not None and not link.closed and link.connected

    # ------------------------------------------------------------ open / close

    def open(self, version: str = "1.2", only: Optional[HostAndPort] = None,
             deadline: Optional[float] = None) -> HostAndPort:
        """Open a socket to the first reachable broker and start the link's threads.

        Listeners get ``on_connecting((host, port))`` first. No STOMP frame is
        sent: the caller sends CONNECT/STOMP with :meth:`send_frame`.

        Args:
            version (str): STOMP version to encode and parse with until the
                broker's CONNECTED names the negotiated one.
            only (tuple[str, int] | None): one attempt to this broker only (a
                failover layer's own loop decides where and when to retry).
            deadline (float | None): ``time.monotonic()`` after which no further
                attempt starts (also with ``reconnect_attempts_max=-1``).

        Returns:
            tuple[str, int]: the (host, port) connected to.

        Raises:
            ConnectFailedException: no broker accepted within
                ``reconnect_attempts_max`` attempts.
            StompException: a socket is already open.
        """
        with self._lock:
            old = self._link
            if old is not None and not old.closed:
                raise StompException("transport already open to %s:%s" % old.host_and_port)
        if old is not None:
            self._join(old, DEFAULT_CLOSE_TIMEOUT)
        channel, host_and_port = self.open_socket(only, deadline)
        link = _Link(channel, host_and_port, version, next(self._link_seq))
        with self._lock:
            self._link = link
        self._post(link, "connecting", host_and_port)  # always the link's first event
        link.scheduler.start()
        link.dispatcher = threading.Thread(target=self._dispatch_loop, args=(link,),
                                           name="amqstomp-dispatch-%d" % link.seq, daemon=True)
        link.reader = threading.Thread(target=self._read_loop, args=(link,),
                                       name="amqstomp-reader-%d" % link.seq, daemon=True)
        link.dispatcher.start()
        link.reader.start()
        return host_and_port

    def close(self, timeout: Optional[float] = DEFAULT_CLOSE_TIMEOUT, reason: str = "closed by the client",
              silent: bool = False) -> None:
        """Close the socket (no DISCONNECT frame) and wait for the link's threads.

        Pending receipt futures fail with ConnectionClosedException; listeners
        get ``on_receiver_loop_completed`` and ``on_disconnected`` (after every
        event already queued). Safe to call more than once and from a listener
        (the calling thread is not waited for).

        Args:
            timeout (float | None): seconds to wait for the threads in all
                (not waited for when None).
            silent (bool): no ``on_receiver_loop_completed`` / ``on_disconnected``
                (a failover layer abandoning one attempt of its own).
        """
        link = self._link
        if link is None:
            return
        link.by_client = True
        link.silent = link.silent or silent
        self._close_link(link, reason)
        if timeout is not None:
            self._join(link, timeout)

    def _join(self, link: _Link, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        me = threading.current_thread()
        for thread in link.threads():
            if thread is me or not thread.is_alive():
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("thread %s still running %.1f s after close (a listener callback busy?)",
                            thread.name, timeout)

    def open_socket(self, only: Optional[HostAndPort] = None,
                    deadline: Optional[float] = None) -> Tuple[Any, HostAndPort]:
        """Connect to the first reachable of :attr:`host_and_ports`, with
        stomp.py's attempts and back-off; or make one attempt to ``only``. The
        one place sockets are made.

        Returns:
            (channel, (host, port)).

        Raises:
            ConnectFailedException: every attempt failed.
        """
        if only is not None:
            try:
                channel = self._connect_one((str(only[0]), int(only[1])))
            except (OSError, ssl.SSLError, ConnectFailedException) as exc:
                raise ConnectFailedException("could not connect to %s:%s: %s" % (only[0], only[1], exc)) from exc
            log.info("connected to %s:%s%s", only[0], only[1], " (TLS)" if channel.tls else "")
            return channel, (str(only[0]), int(only[1]))
        attempts = 0
        rounds = 0
        last_error: Optional[BaseException] = None
        limit = self.reconnect_attempts_max
        final_round = False  # the deadline falls within the next pause: one last round at it
        while True:
            for host_and_port in self.host_and_ports:
                if limit != -1 and attempts >= limit:
                    break
                attempts += 1
                try:
                    channel = self._connect_one(host_and_port)
                except (OSError, ssl.SSLError, ConnectFailedException) as exc:
                    last_error = exc
                    log.warning("could not connect to %s:%s: %s", host_and_port[0], host_and_port[1], exc)
                    continue
                log.info("connected to %s:%s%s", host_and_port[0], host_and_port[1],
                         " (TLS)" if channel.tls else "")
                return channel, host_and_port
            if limit != -1 and attempts >= limit:
                break
            rounds += 1
            pause = self.backoff_delay(rounds)
            if deadline is not None:
                left = deadline - time.monotonic()
                if final_round or left <= 0:
                    break
                if pause >= left:
                    pause, final_round = left, True
            time.sleep(pause)
        raise ConnectFailedException("could not connect to any of %s after %d attempt(s): %s"
                                     % (self.host_and_ports, attempts, last_error))

    def backoff_delay(self, round_number: int) -> float:
        """Seconds to sleep before connect round ``round_number + 1`` (1-based):
        ``initial * (1 + increase) ** (round_number - 1)``, capped at
        ``reconnect_sleep_max``, plus up to ``jitter`` of it at random."""
        base = self.reconnect_sleep_initial * math.pow(1.0 + self.reconnect_sleep_increase, round_number - 1)
        base = min(self.reconnect_sleep_max, base)
        return base * (1.0 + random.random() * self.reconnect_sleep_jitter)

    def _connect_one(self, host_and_port: HostAndPort) -> Any:
        timeout = self.timeout if self.timeout is not None else DEFAULT_CONNECT_TIMEOUT
        sock = socket.create_connection(host_and_port, timeout, self.bind_host_port)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._set_keepalive(sock)
            entry = self._ssl_hosts.get(host_and_port) or self._ssl_default
            if entry is None:
                return _PlainChannel(sock)
            context, validator = entry
            tls = context.wrap_socket(sock, server_hostname=host_and_port[0])
            sock = tls
            if validator is not None:
                ok, message = validator(tls.getpeercert(), host_and_port[0])
                if not ok:
                    raise ConnectFailedException("server certificate rejected: %s" % (message,))
            return _TLSChannel(tls)
        except BaseException:
            sock.close()
            raise

    def _set_keepalive(self, sock: socket.socket) -> None:
        spec = self.keepalive
        if not spec:
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if spec is True:
            return
        kind, args = spec[0], tuple(spec[1:])
        options: List[Tuple[str, Any]] = []
        if kind == "linux":
            options = list(zip(("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"), args))
        elif kind == "mac":
            options = list(zip(("TCP_KEEPALIVE",), args))
        elif kind != "auto":
            log.warning("unknown keepalive specification %r (keep-alive left at OS defaults)", spec)
        for name, value in options:
            opt = getattr(socket, name, None)
            if opt is None or value is None:
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, opt, int(value))
            except OSError as exc:
                log.warning("could not set %s=%r: %s", name, value, exc)

    # ------------------------------------------------------------ writing

    def send_frame(self, cmd: str, headers: Optional[Mapping[str, Any]] = None,
                   body: Union[bytes, bytearray, memoryview, str, None] = b"",
                   write_timeout: Optional[float] = None, defer: bool = False,
                   head: Optional[FrameHead] = None, link_seq: int = 0) -> "Optional[Future[Frame]]":
        """Encode and write one frame; thread-safe.

        Header values: ``None`` leaves the header out (an explicit
        ``content-length: None`` also turns off the automatic one, so ActiveMQ
        makes a TextMessage); ``True``/``False`` become ``"true"``/``"false"``
        (ActiveMQ reads ``persistent`` only as the exact string ``true``);
        anything else goes through ``str()``. Listeners' ``on_send(frame)`` run
        first, on the calling thread, and may change the frame.

        A frame with a ``receipt`` header registers a receipt future before it
        is written (see :meth:`expect_receipt`); a CONNECT/STOMP frame's
        ``heart-beat`` header is remembered for the negotiation.

        A write blocks while the broker does not read (ActiveMQ's producer flow
        control stops reading a blocked producer's socket). With
        ``write_timeout`` (seconds) a frame that could not start being written
        in that time closes the connection instead (used by ``disconnect``).

        With ``defer=True`` the frame may wait in the link's write buffer for
        up to :data:`DEFER_FLUSH_S` seconds (see the module docstring): for
        frames nobody waits on; a frame someone waits for (a receipt, a reply)
        is sent without ``defer``, which writes the buffer first. Frames that
        are still in the buffer when the socket is lost are lost with it, like
        those in the socket's own buffers.

        ``head`` (:class:`amqstomp.codec.FrameHead` of ``cmd``): headers the
        frame starts with, before ``headers``, encoded once per STOMP version
        for all the frames that share it (a producer's destination and
        delivery mode); listeners' ``on_send`` see them merged.

        ``link_seq`` (int): when not 0, the frame goes on socket number
        ``link_seq`` (:attr:`link_seq`) or nowhere: an ACK/NACK names a message
        that socket delivered (``Frame.link_seq``), and after a failover the
        broker redelivers it on the new socket under the same ``message-id``.

        Returns:
            Future | None: the receipt future when the frame asks for one.

        Raises:
            NotConnectedException: no socket is open, or socket ``link_seq`` is
                not the open one any more.
            ConnectionClosedException: the write failed, or waited past
                ``write_timeout`` (the link is then closed).
            FrameEncodeError: the frame cannot be written in this STOMP version.
        """
        link = self._link
        if link is None or link.closed:
            raise NotConnectedException("not connected (no open socket)")
        if link_seq and link_seq != link.seq:
            raise NotConnectedException("%s not sent: socket %d was lost (socket %d is open now)"
                                        % (cmd, link_seq, link.seq))
        if head is not None and head.command != cmd:
            raise FrameEncodeError("a %s head for a %s frame" % (head.command, cmd))
        auto_length = self.auto_content_length
        clean: Mapping[str, Any]
        payload: Any
        if self._on_send or (headers and type(headers) is not dict):
            copied: Dict[str, Any] = {}
            if head is not None:
                headers = _merged(head, headers)
                head = None
            if headers:
                for key, value in headers.items():
                    if value is None:
                        if key == "content-length":
                            auto_length = False
                        continue
                    if value is True or value is False:
                        value = "true" if value else "false"
                    copied[key] = value
            frame = Frame(cmd, copied, b"" if body is None else body)  # type: ignore[arg-type]
            for on_send in self._on_send:
                try:
                    on_send(frame)
                except Exception:
                    log.exception("listener on_send raised")
            cmd, clean, payload = frame.cmd, frame.headers, frame.body
        else:
            # the codec leaves None values out and writes bools as true/false itself
            clean = headers if headers else _NO_HEADERS
            if "content-length" in clean and clean["content-length"] is None:
                auto_length = False
            payload = b"" if body is None else body
        if payload.__class__ is not bytes and isinstance(payload, str):
            payload = payload.encode(self.encoding)
        if cmd == "CONNECT" or cmd == "STOMP":
            link.client_heartbeat = _parse_heartbeat(clean.get("heart-beat"))
        if head is None:
            data = encode_frame(cmd, clean, payload, link.version, auto_length)
        else:
            data = encode_frame(cmd, clean, payload, link.version, auto_length, head.encoded(link.version))
        size = len(data)
        if size > link.check_above:  # the broker's limits (ActiveMQ): before anything is written
            _check_limits(link, cmd, data, len(payload), self.server)
        future = None
        receipt = clean.get("receipt")
        if receipt is not None and cmd != "CONNECT" and cmd != "STOMP":
            future = self.expect_receipt(str(receipt))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("sending %s %r (%d body bytes)", cmd, _clean_headers(_merged(head, clean) if head else clean),
                      len(payload))
        if defer and link.can_defer and size < DEFER_FLUSH_BYTES:
            self._write_deferred(link, data, write_timeout)
        else:
            self._write(link, data, write_timeout)
        return future

    def flush(self) -> None:
        """Write the frames waiting in the write buffer now (blocking while the
        broker does not read). Nothing to do when there are none or no socket.

        Raises:
            ConnectionClosedException: the write failed (the link is then closed).
        """
        link = self._link
        if link is not None and link.wbuf and not link.closed:
            self._write(link, b"")

    def _lock_for_write(self, link: _Link, write_timeout: Optional[float]) -> None:
        lock = link.write_lock
        if not lock.acquire(timeout=-1 if write_timeout is None else max(0.0, write_timeout)):
            reason = "a write was blocked for %.3g s (the broker stopped reading)" % (write_timeout or 0.0)
            self._close_link(link, reason)
            raise ConnectionClosedException("connection closed: %s" % reason)
        if link.closed:
            lock.release()
            raise ConnectionClosedException("connection closed: %s" % link.close_reason)

    def _write(self, link: _Link, data: bytes, write_timeout: Optional[float] = None) -> None:
        """Write the deferred frames, then ``data``, under the write lock."""
        self._lock_for_write(link, write_timeout)
        try:
            wbuf = link.wbuf
            try:
                if wbuf:
                    big = len(data) >= DEFER_FLUSH_BYTES  # not copied into the join
                    if data and not big:
                        wbuf.append(data)  # one system call for all
                    link.channel.sendall(_take_buffer(link))
                    if big:
                        link.channel.sendall(data)
                elif data:
                    link.channel.sendall(data)
            except OSError as exc:
                self._close_link(link, "write failed: %s" % exc, exc)
                raise ConnectionClosedException("write failed: %s" % exc) from exc
            link.last_write = time.monotonic()
        finally:
            link.write_lock.release()

    def _write_deferred(self, link: _Link, data: bytes, write_timeout: Optional[float]) -> None:
        """Add ``data`` to the write buffer; write the buffer when it is full, else
        make sure a timer flush is coming."""
        if write_timeout is None and not link.closed:
            link.write_lock.acquire()
            if link.closed:
                link.write_lock.release()
                raise ConnectionClosedException("connection closed: %s" % link.close_reason)
        else:
            self._lock_for_write(link, write_timeout)
        try:
            wbuf = link.wbuf
            wbuf.append(data)
            size = link.wbuf_bytes + len(data)
            if size >= DEFER_FLUSH_BYTES:
                joined = _take_buffer(link)
                try:
                    link.channel.sendall(joined)
                except OSError as exc:
                    self._close_link(link, "write failed: %s" % exc, exc)
                    raise ConnectionClosedException("write failed: %s" % exc) from exc
                link.last_write = time.monotonic()
            else:
                link.wbuf_bytes = size
                if not link.flush_scheduled:
                    link.flush_scheduled = True
                    link.scheduler.call_later(DEFER_FLUSH_S, self._flush_tick, link)
        finally:
            link.write_lock.release()

    def _flush_tick(self, link: _Link, tries: int = 0) -> None:
        """Timer thread: write the deferred frames without ever blocking (the timer
        also sends heart-beats). When a writer holds the lock or the broker is not
        reading, look again later (backing off to 50 ms)."""
        if link.closed:
            return
        if link.write_lock.acquire(blocking=False):
            try:
                if not self._flush_some(link):
                    link.flush_scheduled = False
                    return
            finally:
                link.write_lock.release()
        link.scheduler.call_later(min(0.05, DEFER_FLUSH_S * (2 ** min(tries, 6))), self._flush_tick, link, tries + 1)

    def _flush_some(self, link: _Link) -> bool:
        """Under the write lock: write what fits of the buffer without blocking.
        True when some is left (the broker is not reading fast enough)."""
        wbuf = link.wbuf
        if not wbuf or link.closed:
            return False
        joined = wbuf[0] if len(wbuf) == 1 else b"".join(wbuf)
        try:
            sent = link.channel.send_some(joined)
        except OSError as exc:
            self._close_link(link, "write failed: %s" % exc, exc)
            return False
        if sent:
            link.last_write = time.monotonic()
        wbuf.clear()
        if sent < len(joined):
            wbuf.append(joined[sent:])
        link.wbuf_bytes = len(joined) - sent
        return bool(wbuf)

    # ------------------------------------------------------------ receipts

    def expect_receipt(self, receipt_id: str) -> "Future[Frame]":
        """Register a future for the RECEIPT with ``receipt-id: receipt_id``.

        Call before writing the frame (``send_frame`` does so by itself for a
        frame with a ``receipt`` header). The future's result is the RECEIPT
        frame; it fails with :class:`BrokerError` when an ERROR carries that
        ``receipt-id``, and with :class:`ConnectionClosedException` when the
        connection ends first (STOMP 1.2 "RECEIPT", "ERROR").
        """
        link = self._link
        future: "Future[Frame]" = Future()
        if link is None or link.closed:
            future.set_exception(NotConnectedException("not connected (no open socket)"))
            return future
        with link.state_lock:
            if link.closed:
                future.set_exception(ConnectionClosedException("connection closed: %s" % link.close_reason))
            else:
                link.receipts[receipt_id] = future
        with self._lock:
            self._done_receipts[receipt_id] = future
            while len(self._done_receipts) > 1024:
                self._done_receipts.popitem(last=False)
        return future

    def receipt_future(self, receipt_id: str) -> "Optional[Future[Frame]]":
        """The future registered for ``receipt_id`` (pending or among the
        last 1024 registered), or None."""
        with self._lock:
            return self._done_receipts.get(receipt_id)

    def wait_for_receipt(self, receipt_id: str, timeout: Optional[float] = None) -> Frame:
        """Block until the RECEIPT for ``receipt_id`` arrives.

        Args:
            receipt_id (str): the ``receipt`` header value of a frame sent on
                this transport.
            timeout (float | None): seconds; ``self.timeout`` or
                :data:`DEFAULT_WAIT_TIMEOUT` when None.

        Returns:
            Frame: the RECEIPT frame.

        Raises:
            ReceiptTimeout: nothing within ``timeout``.
            BrokerError: the broker answered with an ERROR for that receipt.
            ConnectionClosedException: the connection ended first.
            KeyError: no frame with that receipt id was sent on this transport.
        """
        future = self.receipt_future(receipt_id)
        if future is None:
            raise KeyError("no frame with receipt %r was sent on this connection" % (receipt_id,))
        frame: Frame = self.wait_future(future, clamp_wait(timeout), "receipt %r" % (receipt_id,))
        return frame

    def wait_future(self, future: "Future[Any]", timeout: Optional[float] = None, what: str = "reply") -> Any:
        """``future.result()`` with a bounded wait: :class:`ReceiptTimeout` on expiry.

        Called from a listener (the dispatcher thread) while flow control has
        paused reading, it reads on meanwhile: the answer may be behind the
        messages that filled the buffer, which only this thread would drain."""
        if timeout is None:
            timeout = self.timeout if self.timeout is not None else DEFAULT_WAIT_TIMEOUT
        link = self._link
        on_dispatcher = link is not None and threading.current_thread() is link.dispatcher
        if on_dispatcher and link is not None:
            with link.pause_lock:
                link.pause_suspended += 1
                _apply_pause(link)
        try:
            return future.result(timeout)
        except _FutureTimeout:
            raise ReceiptTimeout("no %s within %.3g s" % (what, timeout)) from None
        finally:
            if on_dispatcher and link is not None:
                with link.pause_lock:
                    link.pause_suspended -= 1
                    _apply_pause(link)  # a pause still asked for holds again

    def wait_connected(self, timeout: Optional[float] = None) -> Frame:
        """Block until the broker's CONNECTED frame arrives.

        Args:
            timeout (float | None): seconds; ``self.timeout`` or
                :data:`DEFAULT_WAIT_TIMEOUT` when None.

        Returns:
            Frame: the CONNECTED frame.

        Raises:
            ConnectFailedException: an ERROR came instead, the connection
                ended, or nothing came within ``timeout``.
        """
        link = self._link
        if link is None:
            raise ConnectFailedException("not connected (no open socket)")
        if timeout is None:
            timeout = self.timeout if self.timeout is not None else DEFAULT_WAIT_TIMEOUT
        try:
            return link.connect_future.result(timeout)
        except _FutureTimeout:
            raise ConnectFailedException("no CONNECTED frame within %.3g s" % timeout) from None
        except ConnectFailedException:
            raise
        except StompException as exc:
            raise ConnectFailedException(str(exc)) from exc

    # ------------------------------------------------------------ seams for later layers

    def set_message_handler(self, handler: Optional[Callable[[Frame], None]]) -> None:
        """Replace what the reader thread does with each MESSAGE frame.

        The default, :meth:`deliver_message`, queues it for the listeners. A
        flow-control layer installs its own handler (it runs on the reader
        thread and must not block: count the prefetch window, buffer, then call
        :meth:`deliver_message`, and :meth:`pause_reading` when its buffer is
        full). None restores the default.
        """
        self._message_handler = handler if handler is not None else self.deliver_message

    def set_dispatch_filter(self, fn: Optional[Callable[[Frame], bool]]) -> None:
        """Ask ``fn(frame)`` on the dispatcher thread, before the listeners, whether
        a queued MESSAGE is still to be delivered (False drops it: a flow-control
        layer drops the un-acked messages of a subscription it closed, which the
        broker redelivers)."""
        self._dispatch_filter = fn

    def set_link_lost_hook(self, hook: Optional[Callable[[int, str, Optional[BaseException]], Optional[str]]]) -> None:
        """Run ``hook(link_seq, reason, error)`` on the reader thread when a socket
        ends that :meth:`close` did not end (EOF, a socket or protocol error, a
        heart-beat timeout). It returns what the listeners hear last:
        ``"disconnected"`` (no failover), ``"transport_interrupted"`` (a failover
        layer took the loss over) or None (nothing: a failover attempt of its own
        failed). It must not block."""
        self._link_lost_hook = hook

    def set_failed_hook(self, hook: Optional[Callable[[Frame, str], None]]) -> None:
        """Run ``hook(frame, reason)`` on the dispatcher thread instead of the
        consumed hook when the application did not have ``frame``: a listener
        raised (``"error"``) or none was registered (``"no listener"``)."""
        self._failed_hook = hook

    def set_consumed_hook(self, hook: Optional[Callable[[Frame], None]]) -> None:
        """Run ``hook(frame)`` on the dispatcher thread after every listener's
        ``on_message`` returned for ``frame`` (the application had it): where a
        flow-control layer counts a message consumed and decides its ACK."""
        self._consumed_hook = hook

    def deliver_message(self, frame: Frame) -> None:
        """Queue a MESSAGE for the listeners (``on_before_message`` then ``on_message``)."""
        link = self._link
        if link is not None:
            self._post(link, "message", frame)

    def pause_reading(self) -> None:
        """Stop reading the socket after the current ``recv`` (TCP then pushes
        back on the broker). A pause is a state, not a count: the last call of
        this and :meth:`resume_reading` wins (they are serialised), so a caller
        that decides and calls under one lock of its own loses no resume.

        While paused the peer is still watched: a reset or an EOF waiting in
        the socket ends the pause (the reader reads what came before it, then
        the link is lost as usual), and silence counts against the peer unless
        this side's receive window is closed (we hold it back) -- see
        :meth:`_heartbeat_check_tick`. Closing the link ends a pause; so does a
        receipt wait on the dispatcher thread, for its duration (see
        :meth:`wait_future`)."""
        link = self._link
        if link is not None:
            with link.pause_lock:
                link.paused = True
                _apply_pause(link)

    def resume_reading(self) -> None:
        """Undo :meth:`pause_reading`."""
        link = self._link
        if link is not None:
            with link.pause_lock:
                link.paused = False
                link.last_read = time.monotonic()
                _apply_pause(link)

    @property
    def reading_paused(self) -> bool:
        """True while the reader is held by :meth:`pause_reading` (not while a
        receipt wait or the end of the link overrides it)."""
        link = self._link
        return link is not None and not link.resume.is_set()

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run ``fn(*args)`` on this link's timer thread after ``delay_s`` seconds
        (never, when the link closes first).

        Raises:
            NotConnectedException: no socket is open.
        """
        link = self._link
        if link is None or link.closed:
            raise NotConnectedException("not connected (no open socket)")
        return link.scheduler.call_later(delay_s, fn, *args)

    def notify(self, event: str, arg: Any = None) -> None:
        """Queue listener callback ``on_<event>`` on the dispatcher (after
        everything already queued). ``event`` is one of connecting, connected,
        message, receipt, error, heartbeat, heartbeat_timeout, disconnecting,
        receiver_loop_completed, disconnected, transport_interrupted,
        transport_resumed."""
        link = self._link
        if link is not None:
            self._post(link, event, arg)

    # ------------------------------------------------------------ reader

    def _read_loop(self, link: _Link) -> None:
        channel = link.channel
        parser = link.parser
        size = self.recv_bytes
        quickack = _QUICKACK
        sock = channel.sock
        on_frame = self._on_frame
        error: Optional[BaseException] = None
        reason = "connection closed by the broker"
        try:
            while True:
                if not link.resume.is_set():
                    # what waits in the socket now: the check tick compares against it
                    link.paused_waiting = _look_at_socket(sock)[1]
                    link.resume.wait()
                    link.paused_waiting = -1
                if link.closed:
                    break
                if quickack is not None:
                    try:
                        sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)
                    except OSError:
                        quickack = None
                data = channel.recv(size)
                if not data:
                    break
                link.last_read = time.monotonic()
                frames = parser.feed(data)
                if frames:
                    for frame in frames:
                        on_frame(link, frame)
                elif not parser.buffered and not data.strip(b"\r\n"):
                    self._post(link, "heartbeat", None)
        except StompProtocolError as exc:
            for frame in exc.frames:  # complete frames that came before the fault
                try:
                    on_frame(link, frame)
                except Exception:
                    log.exception("handling a frame before a protocol error failed")
            error = exc
            reason = "protocol error: %s" % exc
            log.error("closing connection to %s:%s: %s", link.host_and_port[0], link.host_and_port[1], reason)
            self._post(link, "error", Frame("ERROR", {"message": reason, "amqstomp-protocol-error": "true"}, b""))
        except OSError as exc:
            if not link.closed:
                error = exc
                reason = "connection lost: %s" % exc
        except Exception as exc:  # a bug: never end silently
            error = exc
            reason = "internal error in the reader: %r" % exc
            log.exception("reader thread failed")
        finally:
            if not link.closed:
                log.info("%s:%s: %s", link.host_and_port[0], link.host_and_port[1], reason)
            elif link.close_reason:
                reason = link.close_reason  # closed on purpose (heart-beat timeout, close()): say why
            self._close_link(link, reason, error)
            if link.write_lock.acquire(timeout=5.0):
                try:
                    channel.close()
                finally:
                    link.write_lock.release()
            else:
                channel.close()
            last: Optional[str] = "disconnected"
            hook = self._link_lost_hook
            if hook is not None and not link.by_client:
                try:
                    last = hook(link.seq, reason, error)
                except Exception:
                    log.exception("link-lost hook failed")
            if link.silent:
                last = None
            if last is not None:
                self._post(link, "receiver_loop_completed", None)
                self._post(link, last, None)
            link.events.put(_STOP)

    def _on_frame(self, link: _Link, frame: Frame) -> None:
        cmd = frame.cmd
        if cmd == "MESSAGE":
            frame.link_seq = link.seq  # its ACK goes on this socket only
            self._message_handler(frame)
            return
        if log.isEnabledFor(logging.DEBUG):
            log.debug("received %s %r", cmd, frame.headers)
        if cmd == "RECEIPT":
            future = self._pop_receipt(link, frame.headers.get("receipt-id"))
            if future is not None:
                _resolve(future, frame)
            if self._wants_receipts:
                self._post(link, "receipt", frame)
        elif cmd == "ERROR":
            message = frame.headers.get("message", "")
            log.warning("broker ERROR: %s", message)
            future = self._pop_receipt(link, frame.headers.get("receipt-id"))
            if future is not None:
                _fail(future, BrokerError("broker error: %s" % message, frame))
            if not link.connected:
                frame.headers["amqstomp-connect-refused"] = "true"  # the answer to CONNECT
                _fail(link.connect_future, ConnectRefusedError("broker refused the connection: %s" % message, frame))
            self._post(link, "error", frame)
        elif cmd == "CONNECTED":
            self._on_connected(link, frame)
        else:
            log.warning("ignoring unexpected %s frame from the broker", cmd)

    def _pop_receipt(self, link: _Link, receipt_id: Optional[str]) -> "Optional[Future[Frame]]":
        if receipt_id is None:
            return None
        with link.state_lock:
            return link.receipts.pop(receipt_id, None)

    def _on_connected(self, link: _Link, frame: Frame) -> None:
        link.version = link.parser.version
        link.connected_frame = frame
        cx, cy = link.client_heartbeat
        sx, sy = _parse_heartbeat(frame.headers.get("heart-beat"))
        link.send_ms = max(cx, sy) if cx and sy else 0
        link.recv_ms = max(sx, cy) if sx and cy else 0
        now = time.monotonic()
        link.last_read = now
        if (frame.headers.get("server") or "").startswith("ActiveMQ/"):  # Classic (Artemis: ActiveMQ-Artemis/)
            link.limits = ACTIVEMQ_LIMITS
            link.check_above = _LIMITS_SAFE_BYTES
        link.connected = True
        log.debug("CONNECTED version=%s server=%s heart-beats send=%d ms receive=%d ms",
                  link.version, frame.headers.get("server"), link.send_ms, link.recv_ms)
        if link.send_ms:
            link.scheduler.call_later(link.send_ms / 1000.0 * _HB_SEND_FRACTION, self._heartbeat_send_tick, link)
        if link.recv_ms:
            link.recv_timeout_s = link.recv_ms / 1000.0 * _PEER_GRID_FACTOR * self.heart_beat_receive_scale
            link.scheduler.call_later(link.recv_timeout_s, self._heartbeat_check_tick, link)
        # the dispatcher resolves connect_future once on_connected has run, so
        # connect(wait=True) returns with the listeners already told
        self._post(link, "connected", frame)

    # ------------------------------------------------------------ heart-beats (timer thread)

    def _heartbeat_send_tick(self, link: _Link) -> None:
        if link.closed:
            return
        period = link.send_ms / 1000.0 * _HB_SEND_FRACTION
        idle = time.monotonic() - link.last_write
        if idle >= period * 0.98:
            # never wait for the write lock: whoever holds it is writing, which
            # counts as activity; and a full socket buffer must not stall the
            # timer thread (it also runs the receive check)
            if link.write_lock.acquire(blocking=False):
                try:
                    if link.wbuf:  # deferred frames count as activity: write them instead
                        self._flush_some(link)
                    elif not link.closed and link.channel.try_send(HEARTBEAT):
                        link.last_write = time.monotonic()
                except OSError as exc:
                    self._close_link(link, "heart-beat write failed: %s" % exc, exc)
                    return
                finally:
                    link.write_lock.release()
            delay = period
        else:
            delay = period - idle
        link.scheduler.call_later(delay, self._heartbeat_send_tick, link)

    def _heartbeat_check_tick(self, link: _Link) -> None:
        """Timer thread: the receive heart-beat check. Any byte read counts as the
        peer's liveness (``last_read``); past the deadline the socket is looked at
        before the peer is blamed (see :meth:`_peer_alive`); while reading is
        paused the socket is looked at every interval, as the reader does not."""
        if link.closed:
            return
        now = time.monotonic()
        paused = not link.resume.is_set()
        if paused and self._paused_look(link):
            link.last_read = now
        deadline = link.last_read + link.recv_timeout_s
        if now < deadline:
            link.hb_suspect = False
            delay = deadline - now
            if paused:
                delay = min(delay, link.recv_ms / 1000.0)
            link.scheduler.call_later(delay, self._heartbeat_check_tick, link)
            return
        if self._peer_alive(link, paused):
            link.last_read = now
            link.hb_suspect = False
            link.scheduler.call_later(link.recv_ms / 1000.0 if paused else link.recv_timeout_s,
                                      self._heartbeat_check_tick, link)
            return
        if not link.hb_suspect:
            # once more shortly: a reader that had its recv() return while another thread
            # held the GIL has the peer's bytes and updates last_read when it runs
            link.hb_suspect = True
            link.scheduler.call_later(min(_HB_CONFIRM_S, link.recv_timeout_s), self._heartbeat_check_tick, link)
            return
        reason = "heart-beat timeout: nothing received for %.2f s (negotiated %d ms)" % (
            now - link.last_read, link.recv_ms)
        log.warning("%s:%s: %s", link.host_and_port[0], link.host_and_port[1], reason)
        self._post(link, "heartbeat_timeout", None)
        self._close_link(link, reason)

    def _paused_look(self, link: _Link) -> bool:
        """Timer thread, reading paused: True when the socket shows the peer since
        the last look -- more bytes waiting, or its reset/EOF (that ends the
        pause: the reader reads what came before it, then meets the end and the
        link is lost as usual, failover or disconnect)."""
        gone, waiting = _look_at_socket(link.channel.sock)
        if gone:
            log.info("%s:%s: the peer closed or reset the connection while reading was paused: "
                     "reading what it sent before", link.host_and_port[0], link.host_and_port[1])
            with link.pause_lock:
                link.draining = True
                _apply_pause(link)
            return True
        if waiting > link.paused_waiting:
            link.paused_waiting = waiting  # new bytes since the last look
            return True
        return False

    def _peer_alive(self, link: _Link, paused: bool) -> bool:
        """Timer thread, the receive deadline passed with nothing read: is there a
        sign of the peer the reader has not taken? Looks, reads nothing.

        Reading: bytes waiting in the socket (or in TLS's buffer) are the peer's;
        the reader is behind (C code holding the GIL, a long frame handler).

        Paused (no new byte since the last look, :meth:`_paused_look`): when this
        side's receive window is closed, TCP stops the peer -- our doing, not held
        against it (a stall then shows once reading resumes). Silence with the
        window open is a dead or stalled peer. Without the window size (not Linux
        >= 6.2) only an empty socket buffer (window certainly open) lets silence
        count against the peer."""
        channel = link.channel
        gone, waiting = _look_at_socket(channel.sock)
        if not paused:
            return gone or waiting != 0 or channel.pending() > 0
        if waiting == 0:
            return False
        window = _receive_window(channel.sock)
        return window is None or window < _CLOSED_WINDOW

    # ------------------------------------------------------------ closing

    def _close_link(self, link: _Link, reason: str, error: Optional[BaseException] = None) -> bool:
        with link.state_lock:
            if link.closed:
                return False
            link.closed = True
            link.close_reason = reason
            link.close_error = error
            receipts = list(link.receipts.values())
            link.receipts.clear()
        was_connected = link.connected
        link.connected = False
        # release every waiter before the socket goes: on_disconnected (posted
        # by the reader once the shutdown wakes it) must find them released
        closed = ConnectionClosedException("connection closed: %s" % reason)
        if error is not None:
            closed.__cause__ = error
        for future in receipts:
            _fail(future, closed)
        if not link.connect_future.done():
            failed = ConnectFailedException("connection closed %s CONNECTED: %s"
                                            % ("right after" if was_connected else "before", reason))
            failed.__cause__ = error
            _fail(link.connect_future, failed)
        with link.pause_lock:
            link.resume.set()
        link.scheduler.stop()
        link.channel.shutdown()
        return True

    # ------------------------------------------------------------ dispatcher

    def _post(self, link: _Link, event: str, arg: Any) -> None:
        link.events.put((event, arg))

    def _dispatch_loop(self, link: _Link) -> None:
        events = link.events
        while True:
            item = events.get()
            if item is _STOP:
                break
            event, arg = item
            if event == "message" and self._dispatch_filter is not None and not self._dispatch_filter(arg):
                continue
            outcome: Optional[str] = None
            try:
                outcome = self._notify(event, arg)
            except BaseException:
                log.exception("dispatching %s failed", event)
            if event == "message":
                try:
                    if outcome is None:
                        if self._consumed_hook is not None:
                            self._consumed_hook(arg)
                    elif self._failed_hook is not None:
                        self._failed_hook(arg, outcome)
                except BaseException:
                    log.exception("consumed hook failed")
            if event == "connected":
                _resolve(link.connect_future, arg)

    def _notify(self, event: str, arg: Any) -> Optional[str]:
        """Call the listeners; for a MESSAGE return None when they all had it,
        "error" when one raised, "no listener" when there was none."""
        listeners = self._listener_list
        if event == "message" or event == "error" or event == "receipt" or event == "connected":
            if self.auto_decode and isinstance(arg.body, (bytes, bytearray)):
                arg.body = bytes(arg.body).decode(self.encoding, errors="replace")
            if event == "message":
                if not listeners:
                    return "no listener"
                failed = False
                for fn in self._before_message:
                    if fn is not None:
                        failed = not _call_fn(fn, arg) or failed
                for fn in self._on_message:
                    if fn is not None:
                        failed = not _call_fn(fn, arg) or failed
                return "error" if failed else None
            name = "on_" + event
            for listener in listeners:
                _call(listener, name, arg)
        elif event == "connecting":
            for listener in listeners:
                _call(listener, "on_connecting", arg)
        elif event == "slow_consumer":
            for listener in listeners:
                _call(listener, "on_slow_consumer", arg)
        elif event == "receiver_loop_completed":
            for listener in listeners:
                _call(listener, "on_receiver_loop_completed", None)
        else:  # heartbeat, heartbeat_timeout, disconnecting, disconnected, transport_interrupted/resumed
            name = "on_" + event
            for listener in listeners:
                _call0(listener, name)
        return None


def _overridden(listener: Any, name: str) -> Any:
    """``listener.name`` as a bound method, or None when it is ConnectionListener's no-op."""
    fn = getattr(listener, name, None)
    if fn is None:
        return None
    base = getattr(_ConnectionListener, name, None)
    if base is not None and getattr(type(listener), name, None) is base and name not in vars(listener):
        return None
    return fn


def _call_fn(fn: Any, arg: Any) -> bool:
    """Call a listener's bound method; False when it raised (logged)."""
    try:
        fn(arg)
        return True
    except BaseException:  # SystemExit too: it would end the dispatcher thread silently
        log.exception("listener method %r raised", fn)
        return False


def _call(listener: Any, name: str, arg: Any) -> bool:
    """Call ``listener.name(arg)``; False when it raised (logged)."""
    fn = getattr(listener, name, None)
    if fn is None:
        return True
    try:
        fn(arg)
        return True
    except BaseException:  # SystemExit too: it would end the dispatcher thread silently
        log.exception("listener %r raised in %s", listener, name)
        return False


def _call0(listener: Any, name: str) -> None:
    fn = getattr(listener, name, None)
    if fn is None:
        return
    try:
        fn()
    except BaseException:  # SystemExit too: it would end the dispatcher thread silently
        log.exception("listener %r raised in %s", listener, name)


def _resolve(future: "Future[Any]", value: Any) -> None:
    try:
        if not future.done():
            future.set_result(value)
    except Exception:  # cancelled or resolved meanwhile
        pass


def _fail(future: "Future[Any]", exc: BaseException) -> None:
    try:
        if not future.done():
            future.set_exception(exc)
    except Exception:
        pass
