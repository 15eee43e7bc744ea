"""A loopback TCP proxy that tests control: cut, stall, half-close, refuse, retarget.

:class:`TcpProxy` listens on 127.0.0.1 (only) and forwards every connection it
accepts to a target ``(host, port)`` -- typically a broker -- so a test can
break the path between a client and the broker in the ways networks break:

``cut()``
    abort every proxied connection at once, both ways, with a TCP RST where the
    kernel allows it (``SO_LINGER`` 0): the client's next read fails with
    ``ConnectionResetError`` (or sees EOF).
``stall()`` / ``unstall()``
    stop forwarding bytes in both directions while both sockets stay open: the
    client sees silence, never an EOF (only heart-beats can tell).
``stop_reading()`` / ``resume_reading()``
    stop forwarding (and reading) what the client sends, at the end of the
    STOMP frame in progress, while what the broker sends still reaches the
    client, and keep the broker's side alive with heart-beats: a broker that
    stops reading while it keeps sending (the client's writes fill the socket
    buffers; only the client's own write progress can tell).
``half_close(direction)``
    shut one direction down: ``"to_client"`` sends the client an EOF while
    what it writes still reaches the broker; ``"to_broker"`` the reverse;
    ``"both"`` both (an orderly close, FIN both ways).
``refuse(True)`` / ``refuse(False)``
    make new connections fail (existing ones are left alone): mode ``"reset"``
    accepts and resets them at once (the client's ``connect()`` succeeds, its
    first read fails); mode ``"closed"`` closes the listening socket so
    ``connect()`` itself gets ``ECONNREFUSED``; mode ``"drop"`` makes the port
    a black hole that drops SYNs (a partitioned host: ``connect()`` hangs until
    the client's own timeout); ``refuse(False)`` binds the same port again.
``retarget((host, port))``
    send connections accepted from now on to another address (a failover pair).

Threads and sockets: one thread (named ``tcp-proxy-<port>``; deliberately not
``amqstomp-*``, the prefix the client's own threads use) runs one
:mod:`selectors` loop for the listening socket, every proxied pair and the
control commands, however many connections there are.  The control methods
run their work on that thread and return once it is done, so after ``stall()``
returns not one more byte is forwarded, and after ``cut()`` returns the
sockets are closed.  ``close()`` resets every connection, closes every socket
it opened and joins the thread.

Latency: by default (``quickack=True``) the proxy re-arms ``TCP_QUICKACK``
(Linux) on a socket before every read from it, as amqstomp's client does.
Otherwise the proxy's sockets delay their TCP ACKs (40 ms) while ActiveMQ's
STOMP connector runs Nagle, and a receipt round trip through the proxy takes
~45 ms instead of well under 1 ms: the proxy, not the client, would set the
pace of a consumer that acks with receipts.

Units: ports are ints, timeouts are seconds (float), buffer sizes and counters
are bytes.  Only the standard library is used.  Log records go to the
``amqstomp.testing`` logger.

Modules: this one is the server (listening socket, lifecycle, the control
methods, the thread's loop); the proxied pairs, their bytes and the faults
done to them are in :mod:`amqstomp.testing._proxy_pump`, the commands handed
to the thread in :mod:`amqstomp.testing._proxy_control`, the shared names and
socket helpers in :mod:`amqstomp.testing._proxy_sockets` (each importing only
the last).

Example::

    with TcpProxy(broker.host_and_ports[0]) as proxy:
        conn = amqstomp.Connection12(proxy.host_and_ports, heartbeats=(1000, 1000))
        conn.connect("admin", "admin", wait=True)
        proxy.stall()      # conn's heart-beat check fires after ~3 s
"""
from __future__ import annotations

import selectors
import socket
import threading
from typing import Any, Callable, List, Optional, Tuple

from ._proxy_control import CommandChannel
from ._proxy_pump import DIRECTIONS, ProxyCounters, Pump
from ._proxy_sockets import (  # CHUNK, COMMAND_TIMEOUT: still proxy.CHUNK, proxy.COMMAND_TIMEOUT
    CHUNK as CHUNK,
    COMMAND_TIMEOUT as COMMAND_TIMEOUT,
    LISTEN_HOST,
    ProxyError,
    bind_loopback,
    black_hole,
    log,
    quiet,
    reset_close,
    resolve,
)

__all__ = ["TcpProxy", "ProxyError"]

#: Seconds between the loop's housekeeping passes (connect deadlines).
_TICK = 0.1
#: Most connections accepted per wake-up of the loop (the rest wait a pass).
_ACCEPT_BURST = 64

_REFUSE_MODES = ("reset", "closed", "drop")


class TcpProxy:
    """A TCP proxy on 127.0.0.1 in front of ``target``, controlled by the test.

    Args:
        target ((str, int)): where accepted connections are forwarded; resolved
            once here (and on :meth:`retarget`), IPv4 or IPv6.
        listen_host (str): must be ``"127.0.0.1"`` (the proxy never listens on
            another interface); kept as a parameter for clarity.
        listen_port (int): port to listen on; 0 (default) picks a free one.
        connect_timeout (float): seconds the proxy waits for the target to
            accept a connection before resetting the client's.
        quickack (bool): re-arm ``TCP_QUICKACK`` before every read (default
            True; see the module documentation); False leaves the kernel's
            delayed ACKs alone.
        rcvbuf (int or None): ``SO_RCVBUF`` in bytes of the sockets accepted
            from clients (None: the kernel's, which grows to many MB on Linux).
            A broker's is fixed (ActiveMQ's ``socketBufferSize``, 64 KiB): give
            that to see how much a client can write to a broker that stopped
            reading (:meth:`stop_reading`) before TCP holds its bytes back.

    Raises:
        ValueError: ``listen_host`` is not 127.0.0.1, or bad arguments.
        OSError: ``target`` does not resolve (here or in :meth:`retarget`),
            the port cannot be bound (:meth:`start`).

    Attributes (read-only, updated by the proxy thread):
        accepted (int): connections accepted since start, refused ones included.
        refused (int): connections reset because of :meth:`refuse` or because
            the target did not accept them.
        bytes_to_broker (int), bytes_to_client (int): bytes forwarded each way.
    """

    def __init__(self, target: Tuple[str, int], listen_host: str = LISTEN_HOST,
                 listen_port: int = 0, connect_timeout: float = 5.0, quickack: bool = True,
                 rcvbuf: Optional[int] = None) -> None:
        if listen_host != LISTEN_HOST:
            raise ValueError("TcpProxy listens on 127.0.0.1 only, not %r" % (listen_host,))
        if not 0 <= int(listen_port) <= 65535:
            raise ValueError("listen_port out of range: %r" % (listen_port,))
        if connect_timeout <= 0:
            raise ValueError("connect_timeout must be > 0 seconds")
        if rcvbuf is not None and rcvbuf <= 0:
            raise ValueError("rcvbuf must be > 0 bytes or None, got %r" % (rcvbuf,))
        self.rcvbuf = rcvbuf
        self._target = (str(target[0]), int(target[1]))
        self._target_addr = resolve(self._target)
        self._listen_host = listen_host
        self._listen_port = int(listen_port)
        self.connect_timeout = float(connect_timeout)

        self._counters = ProxyCounters()
        self._cond = self._counters.cond
        self._pump = Pump(self._counters, quickack=quickack)
        self._refusing: Optional[str] = None

        self._listener: Optional[socket.socket] = None
        self._black_hole: List[socket.socket] = []  # refuse(mode="drop"): a full accept queue on the port
        self._selector: Optional[selectors.BaseSelector] = None
        self._channel = CommandChannel()
        self._thread: Optional[threading.Thread] = None
        self._closing = False
        self._lifecycle = threading.Lock()

    # ------------------------------------------------------------ lifecycle

    def start(self) -> "TcpProxy":
        """Bind, listen and start the proxy thread; returns ``self``.

        Raises:
            OSError: the port cannot be bound.
            ProxyError: already started, or closed.
        """
        with self._lifecycle:
            if self._thread is not None or self._closing:
                raise ProxyError("TcpProxy.start(): already started or closed")
            selector = selectors.DefaultSelector()
            try:
                self._channel.open()
            except OSError:
                selector.close()
                raise
            try:
                listener = bind_loopback(self._listen_port, self.rcvbuf)
            except OSError:
                self._channel.close()
                selector.close()
                raise
            self._selector = self._pump.selector = selector
            self._listener = listener
            self._listen_port = self._pump.port = listener.getsockname()[1]
            self._channel.register(selector)
            selector.register(listener, selectors.EVENT_READ)
            self._thread = threading.Thread(target=self._run, name="tcp-proxy-%d" % self._listen_port,
                                            daemon=True)
            self._thread.start()
        log.debug("proxy 127.0.0.1:%d -> %s:%d started", self._listen_port, *self._target)
        return self

    def close(self, timeout: float = COMMAND_TIMEOUT) -> None:
        """Reset every proxied connection, close every socket, join the thread.

        Idempotent.  Args: ``timeout`` seconds to wait for the thread.

        Raises:
            ProxyError: the thread did not end within ``timeout`` (its sockets
                are closed by the thread when it does end).
        """
        with self._lifecycle:
            if self._closing:
                thread = self._thread
            else:
                self._closing = True
                thread = self._thread
                if thread is None:  # never started: nothing was opened
                    return
                self._channel.wake()
        if thread is None:
            return
        thread.join(timeout)
        if thread.is_alive():
            raise ProxyError("proxy thread %s did not stop within %.1f s" % (thread.name, timeout))

    def __enter__(self) -> "TcpProxy":
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closing else ("running" if self._thread else "new")
        return "<TcpProxy 127.0.0.1:%d -> %s:%d %s, %d live>" % (
            self._listen_port, self._target[0], self._target[1], state, self._counters.live)

    # ------------------------------------------------------------ properties

    @property
    def address(self) -> Tuple[str, int]:
        """``("127.0.0.1", port)`` the proxy listens on.  Raises
        :class:`ProxyError` before :meth:`start`."""
        if self._thread is None:
            raise ProxyError("TcpProxy.address: not started")
        return (self._listen_host, self._listen_port)

    @property
    def host_and_ports(self) -> List[Tuple[str, int]]:
        """``[address]``, as ``amqstomp.Connection`` takes it."""
        return [self.address]

    @property
    def target(self) -> Tuple[str, int]:
        """The ``(host, port)`` new connections are forwarded to."""
        return self._target

    @property
    def quickack(self) -> bool:
        """Whether ``TCP_QUICKACK`` is re-armed before every read (constructor)."""
        return self._pump.quickack

    @property
    def accepted(self) -> int:
        """Connections accepted since start, refused ones included."""
        return self._counters.accepted

    @property
    def refused(self) -> int:
        """Connections reset because of :meth:`refuse` or because the target
        did not accept them."""
        return self._counters.refused

    @property
    def bytes_to_broker(self) -> int:
        """Bytes forwarded from clients to the target."""
        return self._counters.bytes_to_broker

    @property
    def bytes_to_client(self) -> int:
        """Bytes forwarded from the target to clients."""
        return self._counters.bytes_to_client

    @property
    def connections(self) -> int:
        """Live proxied pairs (upstream connected, not yet closed)."""
        with self._cond:
            return self._counters.live

    @property
    def stalled(self) -> bool:
        """True between :meth:`stall` and :meth:`unstall`."""
        return self._pump.stalled

    @property
    def refusing(self) -> bool:
        """True between ``refuse(True)`` and ``refuse(False)``."""
        return self._refusing is not None

    def wait_for_connections(self, n: int, timeout: float = 10.0, exact: bool = False) -> bool:
        """Wait until at least ``n`` (``exact=True``: exactly ``n``) proxied
        pairs are live; returns whether that happened within ``timeout`` seconds."""
        counters = self._counters

        def ok() -> bool:
            return counters.live == n if exact else counters.live >= n
        return counters.wait_for(ok, timeout)

    def wait_for_accepted(self, n: int, timeout: float = 10.0) -> bool:
        """Wait until :attr:`accepted` reaches ``n``; returns whether it did
        within ``timeout`` seconds."""
        return self._counters.wait_for(lambda: self._counters.accepted >= n, timeout)

    # ------------------------------------------------------------ controls

    def cut(self) -> int:
        """Abort every proxied connection both ways (RST via ``SO_LINGER`` 0);
        returns how many pairs were cut.  New connections are still accepted.

        Raises:
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        return int(self._call(self._pump.cut))

    def stall(self) -> None:
        """Stop forwarding in both directions on every connection, present
        and future, keeping every socket open.  Bytes already read stay held.

        Raises:
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        self._call(lambda: self._pump.set_stalled(True))
        log.info("proxy :%d: stalled", self._listen_port)

    def stall_after(self, to_client: int) -> None:
        """Forward at most ``to_client`` more bytes (all connections together)
        from the broker to clients, then stall as :meth:`stall` does: a cut that
        is sure to land in the middle of a stream the broker sends at once (a
        queue browse) whatever the machine's load.  :meth:`stall` and
        :meth:`unstall` drop the budget.

        Raises:
            ValueError: ``to_client`` is negative.
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        if to_client < 0:
            raise ValueError("stall_after: to_client must be >= 0 bytes, got %r" % (to_client,))
        self._call(lambda: self._pump.stall_after(int(to_client)))
        log.info("proxy :%d: stall after %d more bytes to clients", self._listen_port, to_client)

    def unstall(self) -> None:
        """Forward again after :meth:`stall` (held bytes go first).

        Raises:
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        self._call(lambda: self._pump.set_stalled(False))
        log.info("proxy :%d: unstalled", self._listen_port)

    def stop_reading(self, keepalive: float = 0.25) -> None:
        """Stop reading what clients send, on every connection, present and
        future, while the broker's bytes keep reaching them: each connection
        first forwards the STOMP frame in progress up to its NUL byte (bodies
        must hold none), then reads nothing more from its client, whose writes
        fill the socket buffers, and sends the broker a heart-beat (one EOL)
        every ``keepalive`` seconds, so the broker's inactivity check holds the
        connection up (as ActiveMQ's does while producer flow control holds its
        transport thread). A client that closes its socket meanwhile is not
        seen (nothing is read): :meth:`cut` ends such connections.

        Raises:
            ValueError: ``keepalive`` is not > 0 seconds.
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        if not keepalive > 0:
            raise ValueError("stop_reading: keepalive must be > 0 seconds, got %r" % (keepalive,))
        self._call(lambda: self._pump.stop_reading(float(keepalive)))
        log.info("proxy :%d: stopped reading from clients (heart-beats to the broker every %.3g s)",
                 self._listen_port, keepalive)

    def resume_reading(self) -> None:
        """Read and forward what clients send again after :meth:`stop_reading`
        (the bytes held go first).

        Raises:
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        self._call(lambda: self._pump.stop_reading(None))
        log.info("proxy :%d: reading from clients again", self._listen_port)

    def half_close(self, direction: str = "to_client") -> int:
        """Shut one direction of every live connection down; returns how many
        pairs were affected.

        ``"to_client"``: the client gets an EOF (bytes not yet delivered to it
        are dropped, later ones from the broker are read and dropped), while
        what the client writes still reaches the broker.  ``"to_broker"``: the
        broker gets an EOF, the client's later bytes are dropped, the broker's
        still reach the client.  ``"both"``: both.  A pair is closed once both
        of its directions have ended.

        Raises:
            ValueError: unknown ``direction``.
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        if direction not in DIRECTIONS:
            raise ValueError("half_close direction must be one of %s, not %r" % (DIRECTIONS, direction))
        return int(self._call(lambda: self._pump.half_close(direction)))

    def refuse(self, refusing: bool = True, mode: str = "reset") -> None:
        """Make new connections fail (``refusing=True``) or succeed again.

        Modes: ``"reset"`` -- accept, then reset at once (the client's connect
        succeeds, its first read fails); ``"closed"`` -- close the listening
        socket (the client's connect gets ``ECONNREFUSED``); ``"drop"`` -- close
        it and leave a black hole on the port that drops SYNs
        (:func:`~amqstomp.testing._proxy_sockets.black_hole`, Linux): the
        client's connect gets no answer and ends at its own timeout, as with a
        partitioned host. ``refuse(False)`` listens on the same port again.  A
        ``"reset"`` after ``"closed"`` or ``"drop"`` keeps the port as it is.
        Live connections are not touched.

        Raises:
            ValueError: unknown ``mode``.
            OSError: ``refuse(False)`` after ``"closed"`` or ``"drop"`` cannot bind
                the port again (another socket took it meanwhile), or ``"drop"``
                could not make the black hole (about 0.5 s; the port is then closed).
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        if mode not in _REFUSE_MODES:
            raise ValueError("refuse mode must be one of %s, not %r" % (_REFUSE_MODES, mode))

        def run() -> None:
            selector = self._selector
            assert selector is not None
            if refusing:
                if mode != "reset" and self._listener is not None:
                    selector.unregister(self._listener)
                    self._listener.close()
                    self._listener = None
                if mode == "closed":
                    self._close_black_hole()
                elif mode == "drop" and not self._black_hole:
                    self._refusing = "closed"  # until the black hole is there
                    self._black_hole = black_hole(self._listen_port)
                if self._listener is not None:
                    self._refusing = mode
                else:
                    self._refusing = "drop" if self._black_hole else "closed"
            else:
                self._close_black_hole()
                if self._listener is None:
                    self._listener = bind_loopback(self._listen_port, self.rcvbuf)
                    selector.register(self._listener, selectors.EVENT_READ)
                self._refusing = None
        self._call(run)
        log.info("proxy :%d: refuse=%s (%s)", self._listen_port, refusing, mode)

    def retarget(self, target: Tuple[str, int]) -> None:
        """Forward connections accepted from now on to ``target``; live ones
        keep their broker.  A client's ``connect()`` returns once the kernel
        has queued the connection, before the proxy accepts it: wait with
        :meth:`wait_for_accepted` / :meth:`wait_for_connections` first if a
        connection just made must stay on the old target.

        Raises:
            OSError: ``target`` does not resolve.
        """
        addr = resolve(target)
        with self._cond:
            self._target = (str(target[0]), int(target[1]))
            self._target_addr = addr
        log.info("proxy :%d: new connections go to %s:%d", self._listen_port, *self._target)

    # ------------------------------------------------------------ thread side

    def _close_black_hole(self) -> None:
        for sock in self._black_hole:
            quiet(sock.close)
        self._black_hole = []

    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the proxy thread and return its result; re-raises
        what ``fn`` raised.  Raises :class:`ProxyError` when the proxy is not
        running (before :meth:`start`, after :meth:`close`) or the thread does
        not answer within ``COMMAND_TIMEOUT`` seconds."""
        thread = self._thread
        if thread is None or self._closing or not thread.is_alive():
            raise ProxyError("TcpProxy is not running (start() it first; closed proxies stay closed)")
        if threading.current_thread() is thread:
            return fn()
        return self._channel.submit(fn)

    def _run(self) -> None:
        selector = self._selector
        assert selector is not None
        pump, channel = self._pump, self._channel
        try:
            # runs until close(); every pass is bounded (select timeout _TICK,
            # at most _ACCEPT_BURST accepts and COMMAND_BURST commands)
            while not self._closing:
                events = selector.select(_TICK)
                for key, mask in events:
                    sock = key.fileobj
                    if sock is channel.wake_r:
                        channel.drain()
                    elif sock is self._listener:
                        self._accept()
                    else:
                        assert isinstance(sock, socket.socket)
                        pair = pump.pair_of(sock)
                        if pair is not None:
                            pump.service(pair, sock, mask)
                channel.run_pending()
                pump.check_connect_deadlines()
                pump.keep_alive()
        except Exception:  # pragma: no cover - a bug: log it, release the sockets
            log.exception("proxy :%d: loop failed", self._listen_port)
        finally:
            self._shutdown()

    def _accept(self) -> None:
        listener = self._listener
        for _ in range(_ACCEPT_BURST):
            if listener is None:
                return
            try:
                client, peer = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and the like: log, try next pass
                log.warning("proxy :%d: accept failed: %s", self._listen_port, exc)
                return
            self._counters.count_accepted()
            if self._refusing is not None:
                log.debug("proxy :%d: refusing %s", self._listen_port, peer)
                self._counters.count_refused()
                reset_close(client)
                continue
            with self._cond:
                family, sockaddr = self._target_addr
            self._pump.open(client, peer, family, sockaddr, self.connect_timeout)

    def _shutdown(self) -> None:
        self._pump.drop_all()
        # answer commands queued meanwhile so no caller waits its full timeout
        self._channel.fail_pending()
        if self._listener is not None:
            quiet(self._listener.close)
        self._close_black_hole()
        self._channel.close()
        self._listener = None
        if self._selector is not None:
            self._selector.close()
        log.debug("proxy :%d: stopped", self._listen_port)
