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
``half_close(direction)``
    shut one direction down: ``"to_client"`` sends the client an EOF while
    what it writes still reaches the broker; ``"to_broker"`` the reverse;
    ``"both"`` both (an orderly close, FIN both ways).
``refuse(True)`` / ``refuse(False)``
    make new connections fail (existing ones are left alone): mode ``"reset"``
    accepts and resets them at once (the client's ``connect()`` succeeds, its
    first read fails); mode ``"closed"`` closes the listening socket so
    ``connect()`` itself gets ``ECONNREFUSED``, and ``refuse(False)`` binds the
    same port again.
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

Units: ports are ints, timeouts are seconds (float), buffer sizes and counters
are bytes.  Only the standard library is used.  Log records go to the
``amqstomp.testing`` logger.

Example::

    with TcpProxy(broker.host_and_ports[0]) as proxy:
        conn = amqstomp.Connection12(proxy.host_and_ports, heartbeats=(1000, 1000))
        conn.connect("admin", "admin", wait=True)
        proxy.stall()      # conn's heart-beat check fires after ~3 s
"""
from __future__ import annotations

import errno
import logging
import queue
import selectors
import socket
import struct
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["TcpProxy", "ProxyError"]

log = logging.getLogger("amqstomp.testing")

#: Bytes read from a socket at once, and the most held for one direction
#: before the proxy stops reading that side (back-pressure).
CHUNK = 65536
#: Seconds a control call waits for the proxy thread to carry it out.
COMMAND_TIMEOUT = 5.0
#: Seconds between the loop's housekeeping passes (connect deadlines).
_TICK = 0.1
#: Most connections accepted per wake-up of the loop (the rest wait a pass).
_ACCEPT_BURST = 64
#: Most control commands run per wake-up.
_COMMAND_BURST = 64

_LINGER_RST = struct.pack("ii", 1, 0)
_DIRECTIONS = ("to_client", "to_broker", "both")
_REFUSE_MODES = ("reset", "closed")


class ProxyError(RuntimeError):
    """The proxy thread did not carry out a command (or stop) in time, or the
    proxy is used in a state that does not allow it (e.g. ``address`` before
    ``start()``)."""


def _resolve(target: Tuple[str, int]) -> Tuple[int, Any]:
    """``(family, sockaddr)`` for a ``(host, port)``; raises :class:`OSError`
    (``socket.gaierror``) when the name does not resolve."""
    host, port = target
    infos = socket.getaddrinfo(host, int(port), 0, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    if not infos:  # pragma: no cover - getaddrinfo raises instead
        raise OSError("cannot resolve %s:%s" % (host, port))
    family, _, _, _, sockaddr = infos[0]
    return int(family), sockaddr


def _reset_close(sock: socket.socket) -> None:
    """Close ``sock`` with an RST (``SO_LINGER`` 0) where possible; never raises."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


def _quiet(call: Callable[[], Any]) -> None:
    try:
        call()
    except OSError:
        pass


class _Flow:
    """One direction of a pair: bytes read from ``src`` wait in ``buf`` for ``dst``."""

    __slots__ = ("src", "dst", "buf", "eof", "shut", "discard", "name")

    def __init__(self, src: socket.socket, dst: socket.socket, name: str) -> None:
        self.src = src
        self.dst = dst
        self.name = name
        self.buf = bytearray()
        self.eof = False      # src sent EOF
        self.shut = False     # dst's write side is shut down
        self.discard = False  # half-closed: read src, drop the bytes

    @property
    def done(self) -> bool:
        return self.eof and self.shut and not self.buf


class _Pair:
    """A proxied connection: the accepted client socket and the upstream one."""

    __slots__ = ("client", "upstream", "peer", "connecting", "connect_deadline", "up", "down")

    def __init__(self, client: socket.socket, upstream: socket.socket, peer: Any,
                 connect_deadline: float) -> None:
        self.client = client
        self.upstream = upstream
        self.peer = peer
        self.connecting = True
        self.connect_deadline = connect_deadline
        self.up = _Flow(client, upstream, "to_broker")
        self.down = _Flow(upstream, client, "to_client")


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

    def __init__(self, target: Tuple[str, int], listen_host: str = "127.0.0.1",
                 listen_port: int = 0, connect_timeout: float = 5.0) -> None:
        if listen_host != "127.0.0.1":
            raise ValueError("TcpProxy listens on 127.0.0.1 only, not %r" % (listen_host,))
        if not 0 <= int(listen_port) <= 65535:
            raise ValueError("listen_port out of range: %r" % (listen_port,))
        if connect_timeout <= 0:
            raise ValueError("connect_timeout must be > 0 seconds")
        self._target = (str(target[0]), int(target[1]))
        self._target_addr = _resolve(self._target)
        self._listen_host = listen_host
        self._listen_port = int(listen_port)
        self.connect_timeout = float(connect_timeout)

        self._cond = threading.Condition()
        self._live = 0
        self.accepted = 0
        self.refused = 0
        self.bytes_to_broker = 0
        self.bytes_to_client = 0

        self._stalled = False
        self._refusing: Optional[str] = None
        self._pairs: List[_Pair] = []
        self._by_sock: Dict[socket.socket, _Pair] = {}
        self._interest: Dict[socket.socket, int] = {}

        self._listener: Optional[socket.socket] = None
        self._selector: Optional[selectors.BaseSelector] = None
        self._wake_r: Optional[socket.socket] = None
        self._wake_w: Optional[socket.socket] = None
        self._commands: "queue.SimpleQueue[Tuple[Callable[[], Any], threading.Event, List[Any]]]" = \
            queue.SimpleQueue()
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
                wake_r, wake_w = socket.socketpair()
            except OSError:
                selector.close()
                raise
            try:
                listener = self._bind(self._listen_port)
            except OSError:
                for s in (wake_r, wake_w):
                    s.close()
                selector.close()
                raise
            wake_r.setblocking(False)
            wake_w.setblocking(False)
            self._selector, self._wake_r, self._wake_w = selector, wake_r, wake_w
            self._listener = listener
            self._listen_port = listener.getsockname()[1]
            selector.register(wake_r, selectors.EVENT_READ)
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
                self._wake()
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
            self._listen_port, self._target[0], self._target[1], state, self._live)

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
    def connections(self) -> int:
        """Live proxied pairs (upstream connected, not yet closed)."""
        with self._cond:
            return self._live

    @property
    def stalled(self) -> bool:
        """True between :meth:`stall` and :meth:`unstall`."""
        return self._stalled

    @property
    def refusing(self) -> bool:
        """True between ``refuse(True)`` and ``refuse(False)``."""
        return self._refusing is not None

    def wait_for_connections(self, n: int, timeout: float = 10.0, exact: bool = False) -> bool:
        """Wait until at least ``n`` (``exact=True``: exactly ``n``) proxied
        pairs are live; returns whether that happened within ``timeout`` seconds."""
        def ok() -> bool:
            return self._live == n if exact else self._live >= n
        with self._cond:
            return self._cond.wait_for(ok, timeout)

    def wait_for_accepted(self, n: int, timeout: float = 10.0) -> bool:
        """Wait until :attr:`accepted` reaches ``n``; returns whether it did
        within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self.accepted >= n, timeout)

    # ------------------------------------------------------------ controls

    def cut(self) -> int:
        """Abort every proxied connection both ways (RST via ``SO_LINGER`` 0);
        returns how many pairs were cut.  New connections are still accepted.

        Raises:
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        def run() -> int:
            pairs = list(self._pairs)
            for pair in pairs:
                self._drop(pair, reset=True)
            if pairs:
                log.info("proxy :%d: cut %d connection(s)", self._listen_port, len(pairs))
            return len(pairs)
        return int(self._call(run))

    def stall(self) -> None:
        """Stop forwarding in both directions on every connection, present
        and future, keeping every socket open.  Bytes already read stay held.

        Raises:
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        def run() -> None:
            self._stalled = True
            self._refresh_all()
        self._call(run)
        log.info("proxy :%d: stalled", self._listen_port)

    def unstall(self) -> None:
        """Forward again after :meth:`stall` (held bytes go first).

        Raises:
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        def run() -> None:
            self._stalled = False
            self._refresh_all()
        self._call(run)
        log.info("proxy :%d: unstalled", self._listen_port)

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
        if direction not in _DIRECTIONS:
            raise ValueError("half_close direction must be one of %s, not %r" % (_DIRECTIONS, direction))

        def run() -> int:
            pairs = [p for p in self._pairs if not p.connecting]
            for pair in pairs:
                flows = {"to_client": [pair.down], "to_broker": [pair.up],
                         "both": [pair.down, pair.up]}[direction]
                for flow in flows:
                    flow.discard = True
                    flow.buf.clear()
                    if not flow.shut:
                        flow.shut = True
                        _quiet(lambda: flow.dst.shutdown(socket.SHUT_WR))
                self._refresh(pair)
                self._finish_if_done(pair)
            log.info("proxy :%d: half-closed %s on %d connection(s)", self._listen_port, direction, len(pairs))
            return len(pairs)
        return int(self._call(run))

    def refuse(self, refusing: bool = True, mode: str = "reset") -> None:
        """Make new connections fail (``refusing=True``) or succeed again.

        Modes: ``"reset"`` -- accept, then reset at once (the client's connect
        succeeds, its first read fails); ``"closed"`` -- close the listening
        socket (the client's connect gets ``ECONNREFUSED``); ``refuse(False)``
        listens on the same port again.  Live connections are not touched.

        Raises:
            ValueError: unknown ``mode``.
            OSError: ``refuse(False)`` after ``"closed"`` cannot bind the port
                again (another socket took it meanwhile).
            ProxyError: the proxy thread did not do it within ``COMMAND_TIMEOUT``.
        """
        if mode not in _REFUSE_MODES:
            raise ValueError("refuse mode must be one of %s, not %r" % (_REFUSE_MODES, mode))

        def run() -> None:
            selector = self._selector
            assert selector is not None
            if refusing:
                if self._refusing != "closed" and mode == "closed" and self._listener is not None:
                    selector.unregister(self._listener)
                    self._listener.close()
                    self._listener = None
                self._refusing = mode if self._refusing != "closed" else "closed"
            else:
                if self._listener is None:
                    self._listener = self._bind(self._listen_port)
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
        addr = _resolve(target)
        with self._cond:
            self._target = (str(target[0]), int(target[1]))
            self._target_addr = addr
        log.info("proxy :%d: new connections go to %s:%d", self._listen_port, *self._target)

    # ------------------------------------------------------------ thread side

    def _bind(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._listen_host, port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    def _wake(self) -> None:
        w = self._wake_w
        if w is not None:
            try:
                w.send(b"\0")
            except (BlockingIOError, OSError):  # full: already awake; closed: ending
                pass

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
        done = threading.Event()
        result: List[Any] = []
        self._commands.put((fn, done, result))
        self._wake()
        if not done.wait(COMMAND_TIMEOUT):
            raise ProxyError("proxy thread did not answer within %.1f s" % COMMAND_TIMEOUT)
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    def _run(self) -> None:
        selector = self._selector
        assert selector is not None
        try:
            # runs until close(); every pass is bounded (select timeout _TICK,
            # at most _ACCEPT_BURST accepts and _COMMAND_BURST commands)
            while not self._closing:
                events = selector.select(_TICK)
                for key, mask in events:
                    sock = key.fileobj
                    if sock is self._wake_r:
                        self._drain_wake()
                    elif sock is self._listener:
                        self._accept()
                    else:
                        assert isinstance(sock, socket.socket)
                        pair = self._by_sock.get(sock)
                        if pair is not None:
                            self._service(pair, sock, mask)
                self._run_commands()
                self._check_connect_deadlines()
        except Exception:  # pragma: no cover - a bug: log it, release the sockets
            log.exception("proxy :%d: loop failed", self._listen_port)
        finally:
            self._shutdown()

    def _drain_wake(self) -> None:
        r = self._wake_r
        assert r is not None
        for _ in range(16):
            try:
                if not r.recv(4096):
                    return
            except (BlockingIOError, InterruptedError):
                return

    def _run_commands(self) -> None:
        for _ in range(_COMMAND_BURST):
            try:
                fn, done, result = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                result.append(fn())
            except BaseException as exc:  # handed back to the caller
                result.append(exc)
            done.set()

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
            with self._cond:
                self.accepted += 1
                self._cond.notify_all()
            if self._refusing is not None:
                log.debug("proxy :%d: refusing %s", self._listen_port, peer)
                self._count_refused()
                _reset_close(client)
                continue
            self._open_upstream(client, peer)

    def _open_upstream(self, client: socket.socket, peer: Any) -> None:
        with self._cond:
            family, sockaddr = self._target_addr
        try:
            upstream = socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:
            log.warning("proxy :%d: no socket for upstream: %s", self._listen_port, exc)
            self._count_refused()
            _reset_close(client)
            return
        client.setblocking(False)
        upstream.setblocking(False)
        for s in (client, upstream):
            _quiet(lambda: s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1))
        err = upstream.connect_ex(sockaddr)
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
            log.info("proxy :%d: connect to %s failed: %s", self._listen_port, sockaddr, errno.errorcode.get(err, err))
            self._count_refused()
            _reset_close(client)
            upstream.close()
            return
        pair = _Pair(client, upstream, peer, time.monotonic() + self.connect_timeout)
        self._pairs.append(pair)
        self._by_sock[client] = pair
        self._by_sock[upstream] = pair
        self._refresh(pair)

    def _count_refused(self) -> None:
        with self._cond:
            self.refused += 1
            self._cond.notify_all()

    def _check_connect_deadlines(self) -> None:
        now = time.monotonic()
        for pair in [p for p in self._pairs if p.connecting and now >= p.connect_deadline]:
            log.info("proxy :%d: upstream connect timed out", self._listen_port)
            self._count_refused()
            self._drop(pair, reset=True)

    def _service(self, pair: _Pair, sock: socket.socket, mask: int) -> None:
        if pair.connecting:
            if sock is pair.upstream and mask & selectors.EVENT_WRITE:
                err = pair.upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    log.info("proxy :%d: upstream connect failed: %s", self._listen_port,
                             errno.errorcode.get(err, err))
                    self._count_refused()
                    self._drop(pair, reset=True)
                    return
                pair.connecting = False
                with self._cond:
                    self._live += 1
                    self._cond.notify_all()
                log.debug("proxy :%d: %s connected upstream", self._listen_port, pair.peer)
                self._refresh(pair)
            return
        try:
            if mask & selectors.EVENT_WRITE:
                for flow in (pair.up, pair.down):
                    if flow.dst is sock:
                        self._flush(flow)
            if mask & selectors.EVENT_READ:
                for flow in (pair.up, pair.down):
                    if flow.src is sock:
                        self._read(flow)
        except OSError as exc:
            # a reset or broken pipe on one side: pass it on as a reset
            log.debug("proxy :%d: connection error %s: resetting the pair", self._listen_port, exc)
            self._drop(pair, reset=True)
            return
        self._refresh(pair)
        self._finish_if_done(pair)

    def _read(self, flow: _Flow) -> None:
        try:
            data = flow.src.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            flow.eof = True
            if not flow.buf and not flow.shut:
                flow.shut = True
                _quiet(lambda: flow.dst.shutdown(socket.SHUT_WR))
            return
        if flow.discard:
            return
        flow.buf += data
        self._flush(flow)

    def _flush(self, flow: _Flow) -> None:
        if self._stalled or not flow.buf:
            return
        try:
            sent = flow.dst.send(flow.buf)
        except (BlockingIOError, InterruptedError):
            return
        del flow.buf[:sent]
        with self._cond:
            if flow.name == "to_broker":
                self.bytes_to_broker += sent
            else:
                self.bytes_to_client += sent
        if not flow.buf and flow.eof and not flow.shut:
            flow.shut = True
            _quiet(lambda: flow.dst.shutdown(socket.SHUT_WR))

    def _wanted(self, pair: _Pair, sock: socket.socket) -> int:
        if pair.connecting:
            return selectors.EVENT_WRITE if sock is pair.upstream else 0
        if self._stalled:
            return 0
        mask = 0
        for flow in (pair.up, pair.down):
            if flow.src is sock and not flow.eof and len(flow.buf) < CHUNK:
                mask |= selectors.EVENT_READ
            if flow.dst is sock and flow.buf:
                mask |= selectors.EVENT_WRITE
        return mask

    def _refresh(self, pair: _Pair) -> None:
        selector = self._selector
        assert selector is not None
        for sock in (pair.client, pair.upstream):
            want = self._wanted(pair, sock)
            have = self._interest.get(sock, 0)
            if want == have:
                continue
            if have and want:
                selector.modify(sock, want)
            elif want:
                selector.register(sock, want)
            else:
                selector.unregister(sock)
            if want:
                self._interest[sock] = want
            else:
                self._interest.pop(sock, None)

    def _refresh_all(self) -> None:
        for pair in list(self._pairs):
            try:
                if not self._stalled and not pair.connecting:
                    for flow in (pair.up, pair.down):
                        self._flush(flow)
            except OSError:
                self._drop(pair, reset=True)
                continue
            self._refresh(pair)
            self._finish_if_done(pair)

    def _finish_if_done(self, pair: _Pair) -> None:
        if pair in self._pairs and pair.up.done and pair.down.done:
            log.debug("proxy :%d: %s closed both ways", self._listen_port, pair.peer)
            self._drop(pair, reset=False)

    def _drop(self, pair: _Pair, reset: bool) -> None:
        """Forget ``pair`` and close both sockets (with RST if ``reset``)."""
        if pair not in self._pairs:
            return
        self._pairs.remove(pair)
        selector = self._selector
        for sock in (pair.client, pair.upstream):
            self._by_sock.pop(sock, None)
            if self._interest.pop(sock, 0) and selector is not None:
                _quiet(lambda: selector.unregister(sock))
            if reset:
                _reset_close(sock)
            else:
                _quiet(sock.close)
        if not pair.connecting:
            with self._cond:
                self._live -= 1
                self._cond.notify_all()

    def _shutdown(self) -> None:
        for pair in list(self._pairs):
            self._drop(pair, reset=True)
        # answer commands queued meanwhile so no caller waits its full timeout
        for _ in range(_COMMAND_BURST):
            try:
                _, done, result = self._commands.get_nowait()
            except queue.Empty:
                break
            result.append(ProxyError("TcpProxy closed"))
            done.set()
        for sock in (self._listener, self._wake_r, self._wake_w):
            if sock is not None:
                _quiet(sock.close)
        self._listener = None
        if self._selector is not None:
            self._selector.close()
        log.debug("proxy :%d: stopped", self._listen_port)
