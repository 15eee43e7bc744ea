"""The socket engine: one STOMP connection's sockets, threads, receipts and listeners.

A :class:`Transport` owns at most one live socket at a time (a *link*,
:class:`amqstomp._io.link.Link`) and runs exactly three threads per link, all
ending with it: the **reader** (bytes into the link's
:class:`~amqstomp._protocol.state.ProtocolState`; MESSAGE frames to a
replaceable handler, receipts resolved, other events queued), the
**dispatcher** (listener callbacks in arrival order, so a slow listener never
delays reading or heart-beats) and the **timer** (heart-beats, deferred-write
flushes, ack timers). Writes and their coalescing are the link's
(:mod:`amqstomp._io.link`); connecting, with stomp.py's attempts and back-off,
the connector's (:mod:`amqstomp._io.connector`); listener fan-out
:mod:`amqstomp._engine.dispatch`'s.

A socket that ends without :meth:`Transport.close` is offered to a failover
layer first (:meth:`Transport.set_link_lost_hook`, used by
:class:`amqstomp.failover.Reconnector`): it opens the next link with
:meth:`Transport.open` (``only=`` one broker) from its own short-lived thread,
and the listeners hear ``on_transport_interrupted`` instead of
``on_disconnected``. docs/architecture.md shows where this sits.
"""
import itertools
import logging
import socket
import ssl
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as _FutureTimeout
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._io.channel import checked_hosts, order_hosts
from ._io.connector import Connector
from ._io.link import DEFER_FLUSH_BYTES, DEFER_FLUSH_S, STOP, Link, fail, resolve
from ._io.scheduler import Scheduler, TimerHandle
from ._protocol.backoff import ReconnectPolicy
from ._protocol.state import CONNECT_REFUSED, CONNECTED, ERROR, RECEIPT
from .codec import Frame, FrameHead
from .exception import (
    BrokerError,
    ConnectFailedException,
    ConnectRefusedError,
    ConnectionClosedException,
    FrameEncodeError,
    NotConnectedException,
    ReceiptTimeout,
    StompException,
)
from ._engine.dispatch import ListenerDispatch
from .utils import clamp_wait

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

_QUICKACK = getattr(socket, "TCP_QUICKACK", None) if sys.platform.startswith("linux") else None
_NO_HEADERS: Mapping[str, Any] = {}  # never written to
_MASKED_HEADERS = ("passcode",)


def _merged(head: FrameHead, headers: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """A frame head's headers followed by the frame's own (a name in both keeps
    the head's value: the receiver of the encoded frame keeps the first line,
    STOMP 1.2 "Repeated Header Entries")."""
    merged = dict(head.headers)
    if headers:
        for name, value in headers.items():
            merged.setdefault(name, value)
    return merged


def _clean_headers(headers: Mapping[str, Any]) -> Dict[str, Any]:
    if any(name in headers for name in _MASKED_HEADERS):
        return {k: ("********" if k in _MASKED_HEADERS else v) for k, v in headers.items()}
    return dict(headers)


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
            can leave two intervals between bytes (see :data:`amqstomp._protocol.heartbeat.PEER_GRID_FACTOR`).
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
        hosts = checked_hosts(host_and_ports or [("localhost", 61613)])
        self.host_and_ports: List[HostAndPort] = order_hosts(hosts, prefer_localhost, try_loopback_connect)
        self.reconnect_sleep_initial = reconnect_sleep_initial
        self.reconnect_sleep_increase = reconnect_sleep_increase
        self.reconnect_sleep_jitter = reconnect_sleep_jitter
        self.reconnect_sleep_max = reconnect_sleep_max
        self.reconnect_attempts_max = reconnect_attempts_max
        #: the delays between connect rounds (stomp.py's formula)
        self.backoff = ReconnectPolicy.stomp_py(reconnect_sleep_initial, reconnect_sleep_increase,
                                                reconnect_sleep_jitter, reconnect_sleep_max, reconnect_attempts_max)
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
        #: where and how sockets are made (brokers, TLS per broker, the TCP connect)
        self.connector = Connector(self.host_and_ports, self.timeout if self.timeout is not None
                                   else DEFAULT_CONNECT_TIMEOUT, bind_host_port, keepalive, ssl_context)
        self._lock = threading.RLock()
        self._link: Optional[Link] = None
        self._link_seq = itertools.count(1)
        #: the stomp.py listeners and how they are called (:class:`amqstomp._engine.dispatch.ListenerDispatch`)
        self.dispatch = ListenerDispatch(auto_decode, encoding)
        self._done_receipts: "OrderedDict[str, Future[Frame]]" = OrderedDict()
        self._message_handler: Callable[[Frame], None] = self.deliver_message
        self._consumed_hook: Optional[Callable[[Frame], None]] = None
        self._failed_hook: Optional[Callable[[Frame, str], None]] = None
        self._dispatch_filter: Optional[Callable[[Frame], bool]] = None
        self._link_lost_hook: Optional[Callable[[int, str, Optional[BaseException]], Optional[str]]] = None

    # ------------------------------------------------------------ configuration


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

    # ------------------------------------------------------------ listeners

    def set_listener(self, name: str, listener: Any) -> None:
        """Register ``listener`` (a :class:`~amqstomp.listener.ConnectionListener`
        or any object with some ``on_*`` methods) under ``name``; listeners are
        called in the order of their names.

        Raises:
            ValueError: ``listener`` is None.
        """
        self.dispatch.set(name, listener)

    def remove_listener(self, name: str) -> None:
        """Unregister the listener called ``name`` (KeyError when there is none)."""
        self.dispatch.remove(name)

    def get_listener(self, name: str) -> Any:
        """The listener registered as ``name``, or None."""
        return self.dispatch.get(name)

    @property
    def listeners(self) -> Dict[str, Any]:
        """A copy of the name -> listener map."""
        return self.dispatch.as_dict()

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
        return link.proto.version if link is not None else None

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
        return link.seq if link is not None and link.proto.connected and not link.closed else 0

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
        return link is not None and not link.closed and link.proto.connected

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
        link = Link(channel, host_and_port, version, next(self._link_seq), self.heart_beat_receive_scale)
        with self._lock:
            self._link = link
        link.post("connecting", host_and_port)  # always the link's first event
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
        link.close(reason)
        if timeout is not None:
            self._join(link, timeout)

    def _join(self, link: Link, timeout: float) -> None:
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
        stomp.py's attempts and back-off; or make one attempt to ``only``
        (:meth:`amqstomp._io.connector.Connector.connect`).

        Returns:
            (channel, (host, port)).

        Raises:
            ConnectFailedException: every attempt failed.
        """
        return self.connector.connect(self.reconnect_attempts_max, self.backoff_delay, only, deadline)

    def backoff_delay(self, round_number: int) -> float:
        """Seconds to sleep before connect round ``round_number + 1`` (1-based):
        ``initial * (1 + increase) ** (round_number - 1)``, capped at
        ``reconnect_sleep_max``, plus up to ``jitter`` of it at random
        (:meth:`amqstomp._protocol.backoff.ReconnectPolicy.stomp_py`)."""
        return self.backoff.delay_ms(round_number) / 1000.0



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
        on_send_fns = self.dispatch.on_send
        if on_send_fns or (headers and type(headers) is not dict):
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
            for on_send in on_send_fns:
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
        proto = link.proto
        # the broker's limits (ActiveMQ) are checked here, before anything is written
        data = proto.encode(cmd, clean, payload, auto_length, None if head is None else head.encoded(proto.version))
        size = len(data)
        future = None
        receipt = clean.get("receipt")
        if receipt is not None and cmd != "CONNECT" and cmd != "STOMP":
            future = self.expect_receipt(str(receipt))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("sending %s %r (%d body bytes)", cmd, _clean_headers(_merged(head, clean) if head else clean),
                      len(payload))
        if defer and link.can_defer and size < DEFER_FLUSH_BYTES:
            link.write_deferred(data, write_timeout)
        else:
            link.write(data, write_timeout)
        return future

    def flush(self) -> None:
        """Write the frames waiting in the write buffer now (blocking while the
        broker does not read). Nothing to do when there are none or no socket.

        Raises:
            ConnectionClosedException: the write failed (the link is then closed).
        """
        link = self._link
        if link is not None and link.wbuf and not link.closed:
            link.write(b"")

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
                link.proto.expect_receipt(receipt_id, future)
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
                link.apply_pause()
        try:
            return future.result(timeout)
        except _FutureTimeout:
            raise ReceiptTimeout("no %s within %.3g s" % (what, timeout)) from None
        finally:
            if on_dispatcher and link is not None:
                with link.pause_lock:
                    link.pause_suspended -= 1
                    link.apply_pause()  # a pause still asked for holds again

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
            link.post("message", frame)

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
                link.apply_pause()

    def resume_reading(self) -> None:
        """Undo :meth:`pause_reading`."""
        link = self._link
        if link is not None:
            with link.pause_lock:
                link.paused = False
                link.proto.peer_seen(time.monotonic() * 1000.0)
                link.apply_pause()

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
            link.post(event, arg)

    # ------------------------------------------------------------ reader

    def _read_loop(self, link: Link) -> None:
        """Reader thread: :meth:`Link.read_loop`, then the end of the link: the
        failover layer's hook decides what the listeners hear last."""
        reason, error = "the reader ended", None
        try:
            reason, error = link.read_loop(self.recv_bytes, self)
        finally:
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
                link.post("receiver_loop_completed", None)
                link.post(last, None)
            link.events.put(STOP)

    def on_frame(self, link: Link, frame: Frame) -> None:
        """Reader thread: one frame received on ``link`` (:class:`amqstomp._io.link.FrameSink`)."""
        self._on_frame(link, frame)

    def _on_frame(self, link: Link, frame: Frame) -> None:
        cmd = frame.cmd
        if cmd == "MESSAGE":
            frame.link_seq = link.seq  # its ACK goes on this socket only
            self._message_handler(frame)
            return
        if log.isEnabledFor(logging.DEBUG):
            log.debug("received %s %r", cmd, frame.headers)
        with link.state_lock:  # receipts change under it (expect_receipt, _close_link)
            event, future = link.proto.handle(frame)
        if event == RECEIPT:
            if future is not None:
                resolve(future, frame)
            if self.dispatch.wants_receipts:
                link.post("receipt", frame)
        elif event == ERROR or event == CONNECT_REFUSED:
            message = frame.headers.get("message", "")
            log.warning("broker ERROR: %s", message)
            if future is not None:
                fail(future, BrokerError("broker error: %s" % message, frame))
            if event == CONNECT_REFUSED:
                frame.headers["amqstomp-connect-refused"] = "true"  # the answer to CONNECT
                fail(link.connect_future, ConnectRefusedError("broker refused the connection: %s" % message, frame))
            link.post("error", frame)
        elif event == CONNECTED:
            self._on_connected(link, frame)
        else:
            log.warning("ignoring unexpected %s frame from the broker", cmd)

    def _on_connected(self, link: Link, frame: Frame) -> None:
        """Reader thread: CONNECTED was handled by the protocol state: start the heart-beat timers."""
        proto = link.proto
        log.debug("CONNECTED version=%s server=%s heart-beats send=%d ms receive=%d ms",
                  proto.version, proto.server, proto.send_ms, proto.recv_ms)
        if proto.send_ms:
            link.scheduler.call_later(proto.send_period_ms / 1000.0, link.heartbeat_send_tick)
        if proto.recv_ms:
            link.scheduler.call_later(proto.recv_timeout_ms / 1000.0, link.heartbeat_check_tick)
        # the dispatcher resolves connect_future once on_connected has run, so
        # connect(wait=True) returns with the listeners already told
        link.post("connected", frame)

    # ------------------------------------------------------------ heart-beats (timer thread)

    # ------------------------------------------------------------ closing

    # ------------------------------------------------------------ dispatcher

    def _post(self, link: Link, event: str, arg: Any) -> None:
        link.events.put((event, arg))

    def _dispatch_loop(self, link: Link) -> None:
        events = link.events
        notify = self.dispatch.notify
        while True:
            item = events.get()
            if item is STOP:
                break
            event, arg = item
            if event == "message" and self._dispatch_filter is not None and not self._dispatch_filter(arg):
                continue
            outcome: Optional[str] = None
            try:
                outcome = notify(event, arg)
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
                resolve(link.connect_future, arg)
