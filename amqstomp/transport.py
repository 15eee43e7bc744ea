"""The socket engine: one STOMP connection's sockets, threads, receipts and listeners.

A :class:`Transport` is a :class:`amqstomp._io.owner.LinkOwner` (at most one
live socket at a time, a *link*, with its reader, dispatcher and timer
threads, opening, closing, pausing) plus the frame-level API stomp.py users
know: ``send_frame`` (listeners' ``on_send`` first), receipts by id, the
listener registry, and stomp.py's connect attempts and back-off. Writes and their coalescing are the link's
(:mod:`amqstomp._io.link`); connecting, with stomp.py's attempts and back-off,
the connector's (:mod:`amqstomp._io.connector`); listener fan-out
:mod:`amqstomp._engine.dispatch`'s.

The layer above hears from the transport through ONE typed interface,
:class:`amqstomp._io.observer.TransportObserver` (:meth:`Transport.set_observer`;
the engine's :class:`amqstomp._engine.client.Client` is the observer): every
MESSAGE on the reader thread, the dispatch decision and the consumed / failed
outcome of each on the dispatcher, and a socket that ends without
:meth:`Transport.close`, which a failover layer may take over (it opens the
next link with :meth:`Transport.open`, ``only=`` one broker, and the listeners
hear ``on_transport_interrupted`` instead of ``on_disconnected``).
docs/architecture.md shows where this sits.
"""
import logging
import socket
import ssl
import sys
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._io.channel import checked_hosts, order_hosts
from ._io.connector import Connector
from ._io.link import DEFER_FLUSH_BYTES, DEFER_FLUSH_S, wait_future
from ._io.owner import DEFAULT_CLOSE_TIMEOUT, LinkOwner
from ._io.scheduler import Scheduler, TimerHandle
from ._protocol.backoff import ReconnectPolicy
from .codec import Frame, FrameHead
from .exception import ConnectFailedException, FrameEncodeError, NotConnectedException
from ._engine.dispatch import ListenerDispatch
from .utils import clamp_wait

__all__ = ["Transport", "Scheduler", "TimerHandle", "DEFAULT_CONNECT_TIMEOUT", "DEFAULT_WAIT_TIMEOUT",
           "DEFAULT_CLOSE_TIMEOUT", "DEFER_FLUSH_S", "DEFER_FLUSH_BYTES"]

log = logging.getLogger("amqstomp.transport")

HostAndPort = Tuple[str, int]

#: Seconds allowed for one TCP (and TLS) connect when ``timeout`` is None.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds a blocking wait (CONNECTED, a receipt) lasts when the caller gives no timeout.
DEFAULT_WAIT_TIMEOUT = 30.0

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


class Transport(LinkOwner):
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

    #: the stomp.py listeners and how they are called
    dispatch: ListenerDispatch

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
        self.auto_content_length = auto_content_length
        connector = Connector(self.host_and_ports, self.timeout if self.timeout is not None
                              else DEFAULT_CONNECT_TIMEOUT, bind_host_port, keepalive, ssl_context)
        LinkOwner.__init__(self, connector, ListenerDispatch(auto_decode, encoding),
                           heart_beat_receive_scale, recv_bytes)
        self._done_receipts: "OrderedDict[str, Future[Frame]]" = OrderedDict()

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

    # ------------------------------------------------------------ connecting

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

    def _wait_s(self, timeout: Optional[float]) -> float:
        if timeout is not None:
            return timeout
        return self.timeout if self.timeout is not None else DEFAULT_WAIT_TIMEOUT

    def wait_future(self, future: "Future[Any]", timeout: Optional[float] = None, what: str = "reply") -> Any:
        """``future.result()`` with a bounded wait (seconds; ``self.timeout`` or
        :data:`DEFAULT_WAIT_TIMEOUT` when None): :class:`ReceiptTimeout` on expiry.
        On the dispatcher thread it reads on meanwhile although flow control
        paused reading (:meth:`amqstomp._io.link.Link.wait`)."""
        link = self._link
        if link is None:
            return wait_future(future, self._wait_s(timeout), what)
        return link.wait(future, self._wait_s(timeout), what)

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
        return link.wait_connected(self._wait_s(timeout))
