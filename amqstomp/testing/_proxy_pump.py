"""The proxied connections of :class:`~amqstomp.testing.proxy.TcpProxy`: the
bytes they move and the faults done to them.

:class:`Pump` owns every proxied pair (the accepted client socket and the
upstream one), keeps the proxy's selector interested in exactly what each
socket can do next, moves bytes with back-pressure (at most ``CHUNK`` bytes
held per direction), and carries out the faults on live pairs: :meth:`Pump.cut`,
:meth:`Pump.set_stalled`, :meth:`Pump.half_close`, :meth:`Pump.stop_reading`.  :class:`ProxyCounters`
holds the numbers tests wait on.  Everything here except
:class:`ProxyCounters`' reads runs on the proxy thread.
"""
from __future__ import annotations

import errno
import selectors
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from ._proxy_sockets import CHUNK, arm_quickack, log, quiet, reset_close

__all__ = ["DIRECTIONS", "Flow", "Pair", "ProxyCounters", "Pump"]

#: What :meth:`Pump.half_close` can shut down.
DIRECTIONS = ("to_client", "to_broker", "both")
#: :attr:`Flow.hold` values (:meth:`Pump.stop_reading`): forwarding as usual; forwarding up to
#: the end of the frame in progress (its NUL byte); holding (reading nothing, forwarding nothing).
FORWARDING, TO_FRAME_END, HOLDING = 0, 1, 2


class ProxyCounters:
    """The proxy's counters under one condition (``cond``), notified on every change.

    Attributes (written by the proxy thread, read by anyone):
        live (int): pairs connected upstream and not yet closed.
        accepted (int): connections accepted, refused ones included.
        refused (int): connections reset because of a refusal or because the
            target did not accept them.
        bytes_to_broker (int), bytes_to_client (int): bytes forwarded each way.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.live = 0
        self.accepted = 0
        self.refused = 0
        self.bytes_to_broker = 0
        self.bytes_to_client = 0

    def count_accepted(self) -> None:
        with self.cond:
            self.accepted += 1
            self.cond.notify_all()

    def count_refused(self) -> None:
        with self.cond:
            self.refused += 1
            self.cond.notify_all()

    def add_live(self, delta: int) -> None:
        with self.cond:
            self.live += delta
            self.cond.notify_all()

    def add_sent(self, direction: str, n: int) -> None:
        with self.cond:
            if direction == "to_broker":
                self.bytes_to_broker += n
            else:
                self.bytes_to_client += n

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait (holding ``cond`` while testing) until ``predicate()`` is true;
        returns whether it was within ``timeout`` seconds."""
        with self.cond:
            return self.cond.wait_for(predicate, timeout)


class Flow:
    """One direction of a pair: bytes read from ``src`` wait in ``buf`` for ``dst``."""

    __slots__ = ("src", "dst", "buf", "eof", "shut", "discard", "name", "hold", "held")

    def __init__(self, src: socket.socket, dst: socket.socket, name: str) -> None:
        self.src = src
        self.dst = dst
        self.name = name
        self.buf = bytearray()
        self.eof = False      # src sent EOF
        self.shut = False     # dst's write side is shut down
        self.discard = False  # half-closed: read src, drop the bytes
        self.hold = FORWARDING  # stop_reading(): see FORWARDING, TO_FRAME_END, HOLDING
        self.held = bytearray()  # read from src after the frame end, kept for resume_reading()

    def cut_at_frame_end(self) -> None:
        """TO_FRAME_END: once ``buf`` holds a NUL byte (a STOMP frame's end), keep
        what follows it in ``held`` and hold from there on."""
        end = self.buf.find(b"\0")
        if end >= 0:
            self.held += self.buf[end + 1:]
            del self.buf[end + 1:]
            self.hold = HOLDING

    @property
    def done(self) -> bool:
        return self.eof and self.shut and not self.buf

    def shut_dst(self) -> None:
        """Shut ``dst``'s write side down (once): the peer there reads EOF."""
        if not self.shut:
            self.shut = True
            quiet(lambda: self.dst.shutdown(socket.SHUT_WR))


class Pair:
    """A proxied connection: the accepted client socket and the upstream one."""

    __slots__ = ("client", "upstream", "peer", "connecting", "connect_deadline", "up", "down")

    def __init__(self, client: socket.socket, upstream: socket.socket, peer: Any,
                 connect_deadline: float) -> None:
        self.client = client
        self.upstream = upstream
        self.peer = peer
        self.connecting = True
        self.connect_deadline = connect_deadline
        self.up = Flow(client, upstream, "to_broker")
        self.down = Flow(upstream, client, "to_client")


class Pump:
    """Every proxied pair of one proxy, and the selector interest of their sockets.

    Args:
        counters: where connects, refusals and forwarded bytes are counted.
        quickack (bool): re-arm ``TCP_QUICKACK`` on a socket before each read
            from it (see :class:`~amqstomp.testing.proxy.TcpProxy`).

    Attributes:
        selector: the proxy thread's selector; set before the first pair is
            opened (the proxy's ``start()``), None before.
        port (int): the proxy's listening port, for log records.
        stalled (bool): no byte is forwarded while true (:meth:`set_stalled`).
        keepalive (float or None): set by :meth:`stop_reading`: seconds between the
            heart-beats (one EOL) sent to the broker on a held pair; None: reading as usual.
        to_client_budget (int or None): bytes still to forward to clients before
            the pump stalls itself (:meth:`stall_after`); None: no budget.
    """

    def __init__(self, counters: ProxyCounters, quickack: bool = True) -> None:
        self.counters = counters
        self.quickack = bool(quickack)
        self.selector: Optional[selectors.BaseSelector] = None
        self.port = 0
        self.stalled = False
        self.to_client_budget: Optional[int] = None
        self.keepalive: Optional[float] = None
        self._next_keepalive = 0.0
        self._pairs: List[Pair] = []
        self._by_sock: Dict[socket.socket, Pair] = {}
        self._interest: Dict[socket.socket, int] = {}

    # ------------------------------------------------------------ pairs

    def pair_of(self, sock: socket.socket) -> Optional[Pair]:
        """The pair ``sock`` belongs to, or None (not one of the pump's sockets)."""
        return self._by_sock.get(sock)

    def open(self, client: socket.socket, peer: Any, family: int, sockaddr: Any,
             connect_timeout: float) -> None:
        """Start connecting a new upstream socket (``family``, ``sockaddr``) for
        the accepted ``client``; on failure the client is reset and counted
        as refused.  The connect finishes in :meth:`service`, or the pair is
        reset by :meth:`check_connect_deadlines` after ``connect_timeout`` s."""
        try:
            upstream = socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:
            log.warning("proxy :%d: no socket for upstream: %s", self.port, exc)
            self.counters.count_refused()
            reset_close(client)
            return
        client.setblocking(False)
        upstream.setblocking(False)
        for s in (client, upstream):
            quiet(lambda: s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1))
        err = upstream.connect_ex(sockaddr)
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
            log.info("proxy :%d: connect to %s failed: %s", self.port, sockaddr, errno.errorcode.get(err, err))
            self.counters.count_refused()
            reset_close(client)
            upstream.close()
            return
        pair = Pair(client, upstream, peer, time.monotonic() + connect_timeout)
        if self.keepalive is not None:
            pair.up.hold = TO_FRAME_END
        self._pairs.append(pair)
        self._by_sock[client] = pair
        self._by_sock[upstream] = pair
        self._refresh(pair)

    def check_connect_deadlines(self) -> None:
        """Reset (and count as refused) pairs whose upstream connect is overdue."""
        now = time.monotonic()
        for pair in [p for p in self._pairs if p.connecting and now >= p.connect_deadline]:
            log.info("proxy :%d: upstream connect timed out", self.port)
            self.counters.count_refused()
            self._drop(pair, reset=True)

    def service(self, pair: Pair, sock: socket.socket, mask: int) -> None:
        """Handle the selector events ``mask`` of ``sock`` (one of ``pair``'s)."""
        if pair.connecting:
            if sock is pair.upstream and mask & selectors.EVENT_WRITE:
                err = pair.upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    log.info("proxy :%d: upstream connect failed: %s", self.port,
                             errno.errorcode.get(err, err))
                    self.counters.count_refused()
                    self._drop(pair, reset=True)
                    return
                pair.connecting = False
                self.counters.add_live(1)
                log.debug("proxy :%d: %s connected upstream", self.port, pair.peer)
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
            log.debug("proxy :%d: connection error %s: resetting the pair", self.port, exc)
            self._drop(pair, reset=True)
            return
        self._refresh(pair)
        self._finish_if_done(pair)

    def drop_all(self) -> None:
        """Reset every pair (the proxy is stopping)."""
        for pair in list(self._pairs):
            self._drop(pair, reset=True)

    # ------------------------------------------------------------ faults

    def cut(self) -> int:
        """Reset every pair both ways; returns how many there were."""
        pairs = list(self._pairs)
        for pair in pairs:
            self._drop(pair, reset=True)
        if pairs:
            log.info("proxy :%d: cut %d connection(s)", self.port, len(pairs))
        return len(pairs)

    def set_stalled(self, stalled: bool) -> None:
        """Stop (True) or resume (False) forwarding on every pair; on resume the
        bytes held go first.  Either way a :meth:`stall_after` budget is dropped."""
        self.stalled = stalled
        self.to_client_budget = None
        self._refresh_all()

    def stall_after(self, to_client: int) -> None:
        """Forward at most ``to_client`` more bytes to clients (all pairs
        together), then stall as :meth:`set_stalled` (True) does."""
        self.stalled = False
        self.to_client_budget = to_client
        if to_client <= 0:
            self.set_stalled(True)
        else:
            self._refresh_all()

    def stop_reading(self, keepalive: Optional[float]) -> None:
        """Stop (``keepalive`` seconds) or resume (None) reading what clients send,
        on every pair, present and future, while the broker's bytes still reach
        them. Each pair first forwards the frame in progress to its end (the next
        NUL byte: bodies must hold none), then reads nothing more from the client
        (its writes fill the socket buffers) and sends the broker one EOL (a STOMP
        heart-beat, between frames) every ``keepalive`` seconds, so the broker's
        inactivity check is satisfied as ActiveMQ's is while flow control holds
        its transport thread. On resume the held bytes go first."""
        self.keepalive = keepalive
        self._next_keepalive = time.monotonic()
        for pair in list(self._pairs):
            flow = pair.up
            if keepalive is None:
                flow.hold = FORWARDING
                flow.buf += flow.held
                flow.held = bytearray()
            elif flow.hold == FORWARDING:
                flow.hold = TO_FRAME_END
                flow.cut_at_frame_end()
        self._refresh_all()

    def keep_alive(self) -> None:
        """Proxy thread, every pass: a heart-beat to the broker of every held pair
        whose frame in progress went out, once every ``keepalive`` seconds."""
        now = time.monotonic()
        if self.keepalive is None or now < self._next_keepalive:
            return
        self._next_keepalive = now + self.keepalive
        for pair in self._pairs:
            if pair.up.hold == HOLDING and not pair.up.buf and not pair.connecting:
                try:
                    pair.upstream.send(b"\n")
                except OSError:  # full, or gone: the pair's own events say which
                    pass

    def half_close(self, direction: str) -> int:
        """Shut ``direction`` (one of :data:`DIRECTIONS`) of every connected pair
        down and drop its bytes from now on; returns how many pairs."""
        pairs = [p for p in self._pairs if not p.connecting]
        for pair in pairs:
            flows = {"to_client": [pair.down], "to_broker": [pair.up],
                     "both": [pair.down, pair.up]}[direction]
            for flow in flows:
                flow.discard = True
                flow.buf.clear()
                flow.shut_dst()
            self._refresh(pair)
            self._finish_if_done(pair)
        log.info("proxy :%d: half-closed %s on %d connection(s)", self.port, direction, len(pairs))
        return len(pairs)

    # ------------------------------------------------------------ bytes

    def _read(self, flow: Flow) -> None:
        if self.quickack:
            arm_quickack(flow.src)
        try:
            data = flow.src.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            flow.eof = True
            if not flow.buf:
                flow.shut_dst()
            return
        if flow.discard:
            return
        flow.buf += data
        if flow.hold == TO_FRAME_END:
            flow.cut_at_frame_end()
        self._flush(flow)

    def _flush(self, flow: Flow) -> None:
        if self.stalled or not flow.buf:
            return
        budget = self.to_client_budget if flow.name == "to_client" else None
        try:
            sent = flow.dst.send(flow.buf if budget is None else flow.buf[:budget])
        except (BlockingIOError, InterruptedError):
            return
        del flow.buf[:sent]
        self.counters.add_sent(flow.name, sent)
        if budget is not None:
            self.to_client_budget = budget - sent
            if budget - sent <= 0:  # spent: stall every pair from here on
                self.stalled = True
                self.to_client_budget = None
                for pair in self._pairs:
                    self._refresh(pair)
        if not flow.buf and flow.eof:
            flow.shut_dst()

    # ------------------------------------------------------------ selector interest

    def _wanted(self, pair: Pair, sock: socket.socket) -> int:
        if pair.connecting:
            return selectors.EVENT_WRITE if sock is pair.upstream else 0
        if self.stalled:
            return 0
        mask = 0
        for flow in (pair.up, pair.down):
            if flow.src is sock and not flow.eof and len(flow.buf) < CHUNK and flow.hold != HOLDING:
                mask |= selectors.EVENT_READ
            if flow.dst is sock and flow.buf:
                mask |= selectors.EVENT_WRITE
        return mask

    def _refresh(self, pair: Pair) -> None:
        selector = self.selector
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
                if not self.stalled and not pair.connecting:
                    for flow in (pair.up, pair.down):
                        self._flush(flow)
            except OSError:
                self._drop(pair, reset=True)
                continue
            self._refresh(pair)
            self._finish_if_done(pair)

    # ------------------------------------------------------------ closing

    def _finish_if_done(self, pair: Pair) -> None:
        if pair in self._pairs and pair.up.done and pair.down.done:
            log.debug("proxy :%d: %s closed both ways", self.port, pair.peer)
            self._drop(pair, reset=False)

    def _drop(self, pair: Pair, reset: bool) -> None:
        """Forget ``pair`` and close both sockets (with RST if ``reset``)."""
        if pair not in self._pairs:
            return
        self._pairs.remove(pair)
        selector = self.selector
        for sock in (pair.client, pair.upstream):
            self._by_sock.pop(sock, None)
            if self._interest.pop(sock, 0) and selector is not None:
                quiet(lambda: selector.unregister(sock))
            if reset:
                reset_close(sock)
            else:
                quiet(sock.close)
        if not pair.connecting:
            self.counters.add_live(-1)
