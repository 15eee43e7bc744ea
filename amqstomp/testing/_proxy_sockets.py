"""Shared names and socket helpers of the loopback TCP proxy.

:mod:`amqstomp.testing.proxy` (the server, :class:`TcpProxy`),
:mod:`amqstomp.testing._proxy_pump` (the proxied pairs) and
:mod:`amqstomp.testing._proxy_control` (commands to the proxy thread) all use
these; this module imports none of them.  Only the standard library is used.
"""
from __future__ import annotations

import logging
import select
import socket
import struct
from typing import Any, Callable, List, Optional, Tuple

__all__ = [
    "CHUNK",
    "COMMAND_TIMEOUT",
    "LISTEN_HOST",
    "ProxyError",
    "arm_quickack",
    "bind_loopback",
    "black_hole",
    "log",
    "quiet",
    "reset_close",
    "resolve",
]

log = logging.getLogger("amqstomp.testing")

#: Bytes read from a socket at once, and the most held for one direction
#: before the proxy stops reading that side (back-pressure).
CHUNK = 65536
#: Seconds a control call waits for the proxy thread to carry it out.
COMMAND_TIMEOUT = 5.0
#: The only address the proxy listens on.
LISTEN_HOST = "127.0.0.1"

#: Seconds a connection filling a black hole's accept queue may take to complete;
#: one that takes longer found the queue full (the kernel dropped its SYN).
BLACK_HOLE_PROBE = 0.5
#: Most connections :func:`black_hole` makes before it gives up filling the queue.
_BLACK_HOLE_FILL = 8

_LINGER_RST = struct.pack("ii", 1, 0)
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


class ProxyError(RuntimeError):
    """The proxy thread did not carry out a command (or stop) in time, or the
    proxy is used in a state that does not allow it (e.g. ``address`` before
    ``start()``)."""


def resolve(target: Tuple[str, int]) -> Tuple[int, Any]:
    """``(family, sockaddr)`` for a ``(host, port)``; raises :class:`OSError`
    (``socket.gaierror``) when the name does not resolve."""
    host, port = target
    infos = socket.getaddrinfo(host, int(port), 0, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    if not infos:  # pragma: no cover - getaddrinfo raises instead
        raise OSError("cannot resolve %s:%s" % (host, port))
    family, _, _, _, sockaddr = infos[0]
    return int(family), sockaddr


def quiet(call: Callable[[], Any]) -> None:
    """Run ``call``, ignoring :class:`OSError`."""
    try:
        call()
    except OSError:
        pass


def reset_close(sock: socket.socket) -> None:
    """Close ``sock`` with an RST (``SO_LINGER`` 0) where possible; never raises."""
    quiet(lambda: sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST))
    quiet(sock.close)


def arm_quickack(sock: socket.socket) -> None:
    """Set ``TCP_QUICKACK`` on ``sock`` so its next received segments are
    acknowledged at once (the kernel clears the flag again by itself, so a
    reader re-arms it before every ``recv``).  A no-op where the option does
    not exist; never raises :class:`OSError`."""
    if _QUICKACK is not None:
        quiet(lambda: sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1))


def bind_loopback(port: int, rcvbuf: Optional[int] = None) -> socket.socket:
    """A non-blocking TCP socket listening on ``LISTEN_HOST:port`` (0: a free
    port), ``SO_REUSEADDR`` set, and ``SO_RCVBUF`` = ``rcvbuf`` bytes when given
    (the accepted sockets inherit it).  Raises :class:`OSError` (the socket is closed)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.bind((LISTEN_HOST, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def black_hole(port: int) -> List[socket.socket]:
    """Make ``LISTEN_HOST:port`` drop new SYNs, as a partitioned host does: a
    socket listening there with a backlog of 0 that is never accepted from, plus
    client connections that fill its accept queue. Linux drops a SYN for a
    listener whose accept queue is full (``ListenOverflows``), so a client's
    ``connect()`` hangs until its own timeout; nothing is refused or reset.

    Returns:
        list[socket.socket]: the listener first, then the filling connections;
        closing them all ends the black hole.

    Raises:
        OSError: the port cannot be bound, or the queue was not full after
            ``_BLACK_HOLE_FILL`` connections (each may take
            :data:`BLACK_HOLE_PROBE` s); the sockets are then closed.
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    socks = [listener]
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LISTEN_HOST, port))
        listener.listen(0)
        for _ in range(_BLACK_HOLE_FILL):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(filler)
            filler.setblocking(False)
            filler.connect_ex((LISTEN_HOST, port))
            _, writable, _ = select.select([], [filler], [], BLACK_HOLE_PROBE)  # writable: connected
            if not writable:
                return socks  # its SYN was dropped: the queue is full
        raise OSError("black hole on %s:%d: the accept queue was not full after %d connections"
                      % (LISTEN_HOST, port, _BLACK_HOLE_FILL))
    except BaseException:
        for sock in socks:
            quiet(sock.close)
        raise
