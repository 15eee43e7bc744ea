"""The socket a connection holds now: :class:`LinkOwner`, the I/O half of
:class:`amqstomp.transport.Transport`.

A LinkOwner holds at most one live :class:`~amqstomp._io.link.Link` at a time
and runs exactly three threads per link, all ending with it
(:mod:`amqstomp._io.threads`): the **timer** (heart-beats, deferred-write
flushes, ack timers) and two that take turns at **reading** (bytes into the
link's :class:`~amqstomp._core.state.ProtocolState`; MESSAGE frames to the
observer, receipts resolved, typed events (:mod:`amqstomp._core.events`)
queued; a MESSAGE's listeners run right there when nothing is queued) and
**dispatching** (the queued events in arrival order: the API's
:class:`~amqstomp._io.observer.EventSink`), so a slow callback never delays
reading or heart-beats (:mod:`amqstomp._io.handoff`). It answers what the open
socket is, opens and closes sockets, pauses reading, and reports MESSAGEs and
losses through :class:`~amqstomp._io.observer.TransportObserver`.

The frame-level API (``send_frame``, receipts by id, the listener registry)
is :class:`amqstomp.transport.Transport`'s, which adds it to this class.
"""
import itertools
import logging
import ssl
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable, List, Optional, Sequence, Tuple

from .. import _observe
from ..codec import Frame
from ..exception import ConnectFailedException, NotConnectedException, StompException
from .._core.events import Connected, Connecting, LinkEvent, ReceiverLoopCompleted
from .._core.state import LinkState
from .connector import Connector
from .link import STOP, WRITE_STALL_S, Link, wait_future
from .observer import LAST_EVENTS, EventSink, ListenersOnly, TransportObserver
from .scheduler import TimerHandle
from .threads import LinkThreads
from .timeouts import clamp_wait

__all__ = ["LinkOwner", "DEFAULT_CLOSE_TIMEOUT", "DEFAULT_WAIT_TIMEOUT"]

log = logging.getLogger("amqstomp.transport")

#: the state of a link whose CONNECTED came and that is not closing or gone
_OPEN = LinkState.OPEN

HostAndPort = Tuple[str, int]
#: Seconds ``close()`` waits for the link's threads to end.
DEFAULT_CLOSE_TIMEOUT = 10.0
#: Seconds a blocking wait (CONNECTED, a receipt) lasts when the caller gives no timeout.
DEFAULT_WAIT_TIMEOUT = 30.0

_NUMBERS = itertools.count(1)  # the numbers of the link owners (connections) of this process, for thread names


class LinkOwner(LinkThreads):
    """The open socket (a link) of one connection, its threads, and the observer
    it reports to.

    Args:
        connector (Connector): where and how sockets are made.
        dispatch (EventSink): who serves the dispatching thread (the stomp.py facade's
            listeners, a JMS link's :class:`~amqstomp._io.observer.ObserverLoop`).
        heart_beat_receive_scale (float): grace factor of the receive check.
        recv_bytes (int): bytes asked for per ``recv``.
    """

    #: None, or an API's own DEBUG lines (a module or object with ``enabled()``,
    #: ``log_sent(cmd, headers, body, version)`` and the heart-beat lines of
    #: :class:`amqstomp._io.link.Link`): the stomp.py facade's :mod:`amqstomp._stomppy_log`
    debug_log: Any = None

    def __init__(self, connector: Connector, dispatch: EventSink, heart_beat_receive_scale: float,
                 recv_bytes: int) -> None:
        #: where and how sockets are made (brokers, TLS per broker, the TCP connect)
        self.connector = connector
        #: who hears the link's events on its dispatching thread (:class:`~amqstomp._io.observer.EventSink`)
        self.dispatch = dispatch
        #: True: every MESSAGE goes to the dispatching thread, never to listeners on the reading one
        #: (ActiveMQ's alwaysSessionAsync; read when a socket opens: :mod:`amqstomp._io.handoff`)
        self.always_session_async = False
        self.heart_beat_receive_scale = float(heart_beat_receive_scale)
        self.recv_bytes = int(recv_bytes)
        self._lock = threading.RLock()
        self._link: Optional[Link] = None
        #: the STOMP version of the open link (the negotiated one once CONNECTED arrived; None before one):
        #: kept by :meth:`open` and :meth:`on_frame`, not a property (~600 instructions a read; ACKs read it)
        self.version: Optional[str] = None
        self._link_seq = itertools.count(1)
        #: this connection's number in the process: its threads are named ``amqstomp-<role>-<number>.<socket>``
        self.number = next(_NUMBERS)
        #: who hears MESSAGEs, their outcome and lost sockets (:meth:`set_observer`)
        self.observer: TransportObserver = ListenersOnly(self)
        #: the user's broker dialect (``broker`` option; None: CONNECTED's ``server`` names it)
        self.broker: Optional[str] = None
        #: the client id of the connection this socket serves when its CONNECT does not carry it
        #: (a JMS connection's producer socket: ActiveMQ refuses a second CONNECT with the same
        #: ``client-id``); what an instrumentation reports. None: CONNECT's ``client-id``, if any
        self.client_id: Optional[str] = None
        #: ``fc(callback) -> started thread`` making the link threads (None: amqstomp's own)
        self.create_thread_fc: Optional[Callable[[Callable[[], None]], Any]] = None
        #: the default of blocking waits (seconds; None: :data:`DEFAULT_WAIT_TIMEOUT`), and how long (s) a write may
        #: wait on a broker that takes none of our bytes before its link ends (``Link.write_watch_tick``)
        self.timeout: Optional[float] = None
        self.write_stall_s = WRITE_STALL_S
        self._done_receipts: "OrderedDict[str, Future[Frame]]" = OrderedDict()
        # receipts amqstomp asked for itself (own_receipt): their RECEIPTs reach no listener
        self._own_receipts: "OrderedDict[str, None]" = OrderedDict()

    def open_socket(self, only: Optional[HostAndPort] = None,
                    deadline: Optional[float] = None) -> Tuple[Any, HostAndPort]:
        """Connect to a broker: ``(channel, (host, port))``; one attempt to
        ``only`` when given (:meth:`amqstomp._io.connector.Connector.connect`).

        Raises:
            ConnectFailedException: every attempt failed.
        """
        return self.connector.connect(1, lambda round_number: 0.0, only, deadline)

    def set_ssl_context(self, context: ssl.SSLContext,
                        for_hosts: Optional[Sequence[HostAndPort]] = None,
                        cert_validator: Optional[Callable[[Any, str], Tuple[bool, str]]] = None) -> None:
        """Use TLS (``context``) for the given hosts, or for all when ``for_hosts`` is None.

        Args:
            cert_validator: optional ``(cert, hostname) -> (ok, message)``
                called with ``getpeercert()`` after the handshake; a false
                ``ok`` fails that connect attempt.
        """
        self.connector.set_tls(context, for_hosts, cert_validator)

    def get_ssl_context(self, host_and_port: Optional[HostAndPort] = None) -> Optional[ssl.SSLContext]:
        """The TLS context used for ``host_and_port`` (the current one when None), or None."""
        return self.connector.tls_context(host_and_port or self.current_host_and_port)

    @property
    def current_host_and_port(self) -> Optional[HostAndPort]:
        """(host, port) of the open socket, or None."""
        link = self._link
        return link.host_and_port if link is not None and not link.closed else None

    @property
    def heartbeat_thread(self) -> Optional[threading.Thread]:
        """The open socket's timer thread (``amqstomp-timer-<n>.<m>``) once CONNECTED
        negotiated heart-beats, else None: stomp.py's ``HeartbeatListener.heartbeat_thread``."""
        link = self._link
        if link is None or link.closed or not (link.proto.send_ms or link.proto.recv_ms):
            return None
        return link.scheduler.thread

    @property
    def last_host_and_port(self) -> Optional[HostAndPort]:
        """(host, port) of the open or the last socket, or None before the first."""
        link = self._link
        return link.host_and_port if link is not None else None

    @property
    def connected_frame(self) -> Optional[Frame]:
        """The CONNECTED frame of the current link (None before it arrives)."""
        link = self._link
        return link.proto.connected_frame if link is not None else None

    @property
    def server(self) -> Optional[str]:
        """CONNECTED's ``server`` header (e.g. ``"ActiveMQ/5.17.2"``), or None."""
        frame = self.connected_frame
        return frame.headers.get("server") if frame is not None else None

    @property
    def dialect(self) -> str:
        """The broker dialect (:mod:`amqstomp._core.dialect`) of the open or
        the last socket: the user's ``broker``, else what its ``server`` names."""
        link = self._link
        return link.proto.dialect if link is not None else (self.broker or "generic")

    @property
    def heartbeats(self) -> Tuple[int, int]:
        """Negotiated (send, receive) heart-beat intervals in ms; (0, 0) when off
        (STOMP 1.2 "Heart-beating")."""
        link = self._link
        if link is None or link.closed:
            return 0, 0
        return link.proto.send_ms, link.proto.recv_ms

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
        return link.seq if link is not None and link.proto.link_state is _OPEN else 0

    @property
    def tls(self) -> bool:
        """True while the open socket is a TLS one."""
        link = self._link
        return link is not None and not link.closed and bool(link.channel.tls)

    @property
    def last_read(self) -> float:
        """``time.monotonic()`` (s) when the current socket last showed the peer
        alive (a byte read); 0.0 before the first socket."""
        link = self._link
        return link.proto.last_read_ms / 1000.0 if link is not None else 0.0

    @property
    def close_reason(self) -> str:
        """Why the current (or last) socket ended; "" while it is open or before the first."""
        link = self._link
        return link.close_reason if link is not None else ""

    def threads(self) -> List[threading.Thread]:
        """The current socket's threads (reader, dispatcher, timer) that were started."""
        link = self._link
        return link.threads() if link is not None else []

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
        return link is not None and link.proto.link_state is _OPEN

    def open(self, version: str = "1.2", only: Optional[HostAndPort] = None,
             deadline: Optional[float] = None) -> HostAndPort:
        """Open a socket to the first reachable broker and start the link's threads
        (its first event: :class:`~amqstomp._core.events.Connecting`). No STOMP frame
        is sent: the caller sends CONNECT/STOMP with :meth:`send_frame`.

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
        seq = next(self._link_seq)
        link = Link(self.wrap_channel(channel), host_and_port, version, seq, self.heart_beat_receive_scale,
                    self.broker, "%d.%d" % (self.number, seq))
        link.debug_log, link.write_stall_ms = self.debug_log, self.write_stall_s * 1000.0
        with self._lock:
            self._link = link
            self.version = link.proto.version
        link.post(Connecting(host_and_port))  # always the link's first event
        self.start_threads(link)
        return host_and_port

    def close(self, timeout: Optional[float] = DEFAULT_CLOSE_TIMEOUT, reason: str = "closed by the client",
              silent: bool = False) -> None:
        """Close the socket (no DISCONNECT frame) and wait for the link's threads.

        Pending receipt futures fail with ConnectionClosedException; the link's
        last events (:class:`~amqstomp._core.events.ReceiverLoopCompleted`,
        :class:`~amqstomp._core.events.Disconnected`) come after every event
        already queued. Safe to call more than once and from a listener.

        Args:
            timeout (float | None): seconds to wait for the threads in all
                (not waited for when None).
            silent (bool): no last events (a failover layer abandoning an attempt).
        """
        link = self._link
        if link is None:
            return
        with link.state_lock:
            link.proto.closing(silent)  # by the client (not lost): no failover
        link.close(reason)
        if timeout is not None:
            self._join(link, timeout)

    def close_requested(self) -> None:
        """This side ends the open socket (it closes it next; no frame is written on
        it any more: the core's CLOSING): from now its end is the client's, no loss,
        whoever closes the socket first. A no-op without a socket."""
        link = self._link
        if link is not None:
            with link.state_lock:
                link.proto.closing()

    def ended_by_client(self) -> bool:
        """True when this side ends or ended the open or last socket on purpose
        (:meth:`close`, :meth:`close_requested`; not an attempt abandoned ``silent``ly,
        whose loss stays the connection's): no loss to report."""
        link = self._link
        return link is not None and link.proto.by_client and not link.proto.silent

    def end_planned(self, reason: str, link_seq: int) -> None:
        """Socket ``link_seq`` is about to end by plan (``reason``: a failover layer's move to
        another broker, its DISCONNECT and then :meth:`drop`): an instrumentation
        hears of its end as a ``moved`` connection event, not as a lost socket. A
        no-op unless ``link_seq`` is the open socket."""
        link = self._link
        if link is not None and link.seq == link_seq:
            link.planned_end = reason

    def drop(self, reason: str, link_seq: int) -> None:
        """End socket ``link_seq`` as if the broker had ended it: the observer's
        ``on_link_lost`` decides what follows (a failover layer's planned move to another
        broker). Returns at once; a no-op unless it is the open one (ended: never the next)."""
        link = self._link
        if link is not None and link.seq == link_seq:
            link.close(reason)

    def _join(self, link: Link, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        me = threading.current_thread()
        link.promote_reader()  # a listener run by the reading thread: the other one reads to the end
        for thread in link.threads():
            if thread is me or not getattr(thread, "is_alive", lambda: False)():
                continue  # (a factory's thread-like object without is_alive is not waited for)
            try:
                thread.join(max(0.0, deadline - time.monotonic()))
            except RuntimeError:  # a thread that cannot be joined (a dummy thread of a factory)
                continue
            if thread.is_alive():
                log.warning("thread %s still running %.1f s after close (a listener callback busy?)",
                            thread.name, timeout)

    def set_observer(self, observer: Optional[TransportObserver]) -> None:
        """Report MESSAGEs, their outcome and lost sockets to ``observer`` (the engine's
        Client); None restores :class:`~amqstomp._io.observer.ListenersOnly`."""
        self.observer = observer if observer is not None else ListenersOnly(self)

    def deliver_message(self, frame: Frame) -> None:
        """A MESSAGE for the listeners (``on_before_message`` then ``on_message``):
        queued for the dispatching thread, or, on the reading thread with nothing queued
        and nobody dispatching, run here now (:mod:`amqstomp._io.handoff`)."""
        link = self._link
        if link is not None:
            link.events.offer(frame, link.deliver_here)  # a MESSAGE is its own event (:mod:`amqstomp._core.events`)

    def post(self, event: LinkEvent) -> None:
        """Queue ``event`` on the open or last socket's dispatcher, after everything
        queued before it; without a socket yet, hand it to the dispatch here."""
        link = self._link
        if link is not None:
            link.post(event)
        else:
            self.dispatch.call_event(event)

    def pause_reading(self) -> None:
        """Stop reading the socket after the current ``recv`` (TCP then pushes
        back on the broker). A pause is a state, not a count: the last call of
        this and :meth:`resume_reading` wins (they are serialised). While paused
        the peer is still watched (:meth:`amqstomp._io.link.Link.heartbeat_check_tick`);
        closing the link ends a pause, a receipt wait on the dispatching thread
        lifts it for its duration (:meth:`wait_future`)."""
        link = self._link
        if link is not None:
            link.set_paused(True)

    def resume_reading(self) -> None:
        """Undo :meth:`pause_reading`."""
        link = self._link
        if link is not None:
            link.set_paused(False)

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

    # ------------------------------------------------------------ receipts

    def expect_receipt(self, receipt_id: str) -> "Future[Frame]":
        """Register a future for the RECEIPT with ``receipt-id: receipt_id``.

        Call before writing the frame (``send_frame`` does so by itself for a
        frame with a ``receipt`` header). The future's result is the RECEIPT
        frame; it fails with :class:`BrokerError` when an ERROR carries that
        ``receipt-id``, with :class:`ConnectionClosedException` when the
        connection ends first (STOMP 1.2 "RECEIPT", "ERROR"), and with
        :class:`NotConnectedException` when no socket is open.
        """
        link = self._link
        future: "Future[Frame]"
        if link is None or link.closed:
            future = Future()
            future.set_exception(NotConnectedException("not connected (no open socket)"))
            return future
        future = link.expect_receipt(receipt_id)
        with self._lock:
            self._done_receipts[receipt_id] = future
            while len(self._done_receipts) > 1024:
                self._done_receipts.popitem(last=False)
        return future

    def own_receipt(self, receipt_id: str) -> None:
        """Mark ``receipt_id`` as one amqstomp asks for itself (a SUBSCRIBE's,
        a replayed SUBSCRIBE's), before the frame asking for it is written:
        its RECEIPT resolves the receipt future but reaches no listener's
        ``on_receipt`` (stomp.py calls ``on_receipt`` only for receipts the
        application asked for, and for DISCONNECT's). An ERROR answering it
        still reaches ``on_error``. The last 1024 marks are kept."""
        with self._lock:
            own = self._own_receipts
            own[receipt_id] = None
            while len(own) > 1024:
                own.popitem(last=False)

    def is_own_receipt(self, receipt_id: str) -> bool:
        """True when ``receipt_id`` is one amqstomp asked for itself
        (:meth:`own_receipt`) and its RECEIPT has not been handled yet."""
        with self._lock:
            return receipt_id in self._own_receipts

    def _listeners_hear(self, frame: Frame) -> bool:
        """Reader thread: whether the listeners hear RECEIPT ``frame``: not one
        of :meth:`own_receipt` (forgotten now), nor when none has an ``on_receipt``."""
        own = self._own_receipts
        if own:
            receipt_id = str(frame.headers.get("receipt-id"))
            with self._lock:
                if receipt_id in own:
                    del own[receipt_id]
                    return False
        return bool(self.dispatch.wants_receipts)

    def receipt_future(self, receipt_id: str) -> "Optional[Future[Frame]]":
        """The future registered for ``receipt_id`` (pending or among the
        last 1024 registered), or None."""
        with self._lock:
            return self._done_receipts.get(receipt_id)

    def wait_for_receipt(self, receipt_id: str, timeout: Optional[float] = None) -> Frame:
        """The RECEIPT for ``receipt_id`` (the ``receipt`` header of a frame sent on this
        transport), waited for ``timeout`` s (None: ``self.timeout`` or :data:`DEFAULT_WAIT_TIMEOUT`).

        Raises:
            ReceiptTimeout: nothing within ``timeout``.
            BrokerError: the broker answered with an ERROR for that receipt.
            ConnectionClosedException: the connection ended first.
            KeyError: no frame with that receipt id was sent on this transport.
            InvalidTimeoutError: ``timeout`` is not a number of seconds >= 0.
        """
        clamp_wait(timeout, negative=False)  # a bad timeout is named before anything else (-1 too)
        future = self.receipt_future(receipt_id)
        if future is None:
            raise KeyError("no frame with receipt %r was sent on this connection" % (receipt_id,))
        frame: Frame = self.wait_future(future, timeout, "receipt %r" % (receipt_id,))
        return frame

    def _wait_s(self, timeout: Optional[float]) -> float:
        """A caller's wait, checked (:func:`amqstomp.utils.clamp_wait`:
        InvalidTimeoutError), or the default (seconds)."""
        if timeout is not None:
            return clamp_wait(timeout)  # type: ignore[return-value]
        return self.timeout if self.timeout is not None else DEFAULT_WAIT_TIMEOUT

    def wait_future(self, future: "Future[Any]", timeout: Optional[float] = None, what: str = "reply") -> Any:
        """``future.result()`` with a bounded wait (seconds; ``self.timeout`` or
        :data:`DEFAULT_WAIT_TIMEOUT` when None): :class:`ReceiptTimeout` on expiry.
        On the dispatching thread it reads on meanwhile although flow control
        paused reading (:meth:`amqstomp._io.link.Link.wait`)."""
        link = self._link
        if link is None:
            return wait_future(future, self._wait_s(timeout), what)
        return link.wait(future, self._wait_s(timeout), what)

    def wait_connected(self, timeout: Optional[float] = None) -> Frame:
        """The broker's CONNECTED frame, waited for ``timeout`` s (None: ``self.timeout``
        or :data:`DEFAULT_WAIT_TIMEOUT`).

        Raises:
            ConnectFailedException: an ERROR came instead, the connection
                ended, or nothing came within ``timeout``.
        """
        link = self._link
        if link is None:
            raise ConnectFailedException("not connected (no open socket)")
        return link.wait_connected(self._wait_s(timeout))

    def wrap_channel(self, channel: Any) -> Any:
        """The channel a new link reads and writes (a subclass may wrap it); ``channel`` here."""
        return channel

    def frame_sink(self) -> Any:
        """Who the reader hands frames to (:class:`amqstomp._io.link.FrameSink`): this owner here."""
        return self

    def control_frame_seen(self, link: Link, frame: Frame) -> None:
        """Reader thread: a frame other than MESSAGE was handled (nothing to do here)."""

    def on_frame(self, link: Link, frame: Frame) -> None:
        """Reader thread: one frame received on ``link`` (:class:`amqstomp._io.link.FrameSink`)."""
        if frame.cmd == "MESSAGE":
            frame.link_seq = link.seq  # its ACK goes on this socket only
            self.observer.on_message(frame)
            return
        if log.isEnabledFor(logging.DEBUG):
            log.debug("received %s %r", frame.cmd, frame.headers)
        post = self._listeners_hear(frame) if frame.cmd == "RECEIPT" else False
        if link.on_control_frame(frame, post):
            if link is self._link:  # the negotiated version (:attr:`version`), before the threads hear of it
                self.version = link.proto.version
            link.start_heartbeats()
            if _observe.observer is not None:
                _observe.observer.connection_event(self, "connected", frame)
            # the dispatcher resolves connect_future once on_connected has run, so
            # connect(wait=True) returns with the listeners already told
            link.post(Connected(frame))
        self.control_frame_seen(link, frame)

