"""Sockets: plain and TLS channels, connecting, and looking at a socket without reading it.

Channels are blocking sockets read by one thread and written by others under
the link's write lock. :func:`connect` is the one place sockets are made;
:func:`tls_context` the one place a TLS context is built from file names.
"""
import logging
import select
import selectors
import socket
import ssl
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple, Union

from ..exception import ConfigurationError, ConnectFailedException

if TYPE_CHECKING:
    from .._core.state import ProtocolState

__all__ = ["PlainChannel", "TLSChannel", "stream_reader", "connect", "set_keepalive", "tls_context", "look_at_socket",
           "receive_window", "send_progress", "checked_hosts", "local_host_names", "order_hosts", "LOCAL_NAMES"]

log = logging.getLogger("amqstomp.transport")

HostAndPort = Tuple[str, int]
TLSEntry = Tuple[ssl.SSLContext, Optional[Callable[[Any, str], Tuple[bool, str]]]]

#: Names of this machine that need no look-up.
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
_MSG_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


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
_TCPI_UNACKED = 24  # offsetof(struct tcp_info, tcpi_unacked): segments sent, not yet acknowledged
_TCPI_BYTES_ACKED = 120  # offsetof(struct tcp_info, tcpi_bytes_acked), Linux >= 4.1
_TCPI_NOTSENT = 144  # offsetof(struct tcp_info, tcpi_notsent_bytes), Linux >= 4.6


def look_at_socket(sock: socket.socket) -> Tuple[bool, int]:
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


def _wait_writable(sock: socket.socket, deadline: float, unwritten: int) -> None:
    """Wait until ``sock`` takes bytes or ``deadline`` (``time.monotonic()`` s) passes.

    Raises:
        TimeoutError: the deadline passed (``unwritten`` bytes are named).
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("a write could not finish in time: %d bytes unwritten (the peer stopped reading)"
                           % unwritten)
    if _POLL is not None:
        poller = _POLL()
        poller.register(sock.fileno(), select.POLLOUT)
        poller.poll(left * 1000.0)
    else:  # pragma: no cover - no poll()
        select.select([], [sock], [], left)


def receive_window(sock: socket.socket) -> Optional[int]:
    """The receive window this side advertised last, in bytes (Linux >= 6.2's
    ``tcpi_rcv_wnd``), or None when the kernel does not tell."""
    info = _tcp_info(sock, _TCPI_RCV_WND + 4)
    if info is None:
        return None
    return int(struct.unpack_from("I", info, _TCPI_RCV_WND)[0])


def _tcp_info(sock: socket.socket, need: int) -> Optional[bytes]:
    """The socket's Linux ``TCP_INFO`` record when the kernel gives at least ``need``
    bytes of it, else None (not Linux, an older kernel, a closed socket)."""
    if _TCP_INFO is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 512)
    except (OSError, ValueError):
        return None
    return info if len(info) >= need else None


def send_progress(sock: socket.socket) -> Optional[Tuple[int, bool]]:
    """How far the peer has taken what this side wrote, from the kernel (Linux's
    ``TCP_INFO``, >= 4.6): (bytes it acknowledged so far, whether bytes of ours
    wait unacknowledged or unsent), or None when the kernel does not tell (not
    Linux, a closed socket). A peer that stops reading closes its receive
    window: its kernel acknowledges nothing more while our bytes wait."""
    info = _tcp_info(sock, _TCPI_NOTSENT + 4)
    if info is None:
        return None
    acked = int(struct.unpack_from("Q", info, _TCPI_BYTES_ACKED)[0])
    waiting = struct.unpack_from("I", info, _TCPI_UNACKED)[0] or struct.unpack_from("I", info, _TCPI_NOTSENT)[0]
    return acked, bool(waiting)


# --------------------------------------------------------------------------- reading

#: the rest of a body of at least this many bytes (content-length) is read straight into its bytes
#: (issue 21: one copy per body, the kernel's)
BODY_READ_MIN = 16 * 1024
#: after such a body, the next read asks for at most this many bytes: its NUL and the next frame's
#: command and headers (a large body after them is again read straight into its bytes)
HEAD_READ_BYTES = 4096


def stream_reader(channel: Any, proto: "ProtocolState", size: int, clock: Callable[[], float]) -> Callable[[], bytes]:
    """The reader thread's read: ``read()`` returns the next bytes for
    ``proto.receive_data`` (b"": the stream ended), asking for ``size`` bytes.
    While a body of a known content-length of at least :data:`BODY_READ_MIN`
    bytes is arriving, its rest is first read straight into the body's bytes
    (``proto.parser.read_body(channel.recv_into)``: one copy, by the kernel), reporting
    ``clock()`` (s) after each read as the peer's liveness; then at most
    :data:`HEAD_READ_BYTES` are read (the next frame's head, so that a large
    body after it comes the same way). Reading is not paused inside a body.
    Channels other than :class:`PlainChannel` and
    :class:`TLSChannel` (a transport's own ``receive()``, a websocket) get
    ``channel.recv(size)`` only. While ``proto.parser.body_missing`` is 0,
    ``read()`` is ``channel.recv(size)``: a caller may call that itself."""
    recv: Callable[[int], bytes] = channel.recv
    if not isinstance(channel, (PlainChannel, TLSChannel)):
        return lambda: recv(size)
    recv_into = channel.recv_into
    head = min(size, HEAD_READ_BYTES)
    # the state's parser, asked directly: one read per message at prefetch 1, and the state's own
    # properties would cost two Python calls on each (ProtocolState assigns its parser once)
    parser = proto.parser

    def read() -> bytes:
        missing = parser.body_missing
        if not missing or missing + parser.buffered < BODY_READ_MIN:
            return recv(size)
        while missing:
            if not parser.read_body(recv_into):
                return b""
            proto.peer_seen(clock() * 1000.0)
            missing = parser.body_missing
        return recv(head)
    return read


# --------------------------------------------------------------------------- channels


class PlainChannel:
    """A connected TCP socket in blocking mode: reads on the reader thread,
    writes under the link's write lock, each direction on its own.

    ``recv(size)`` and ``recv_into(buffer)`` (writable, e.g. a memoryview; returns the bytes
    read, 0: the end) are the socket's own methods: the reader thread calls them with no
    Python call in between (one or two reads per message)."""

    tls = False
    recv: Callable[[int], bytes]
    recv_into: Callable[[Any], int]
    write_whole: Callable[[bytes], None]

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.settimeout(None)
        self.recv = sock.recv
        self.recv_into = sock.recv_into
        #: :meth:`sendall` without a deadline: the socket's own (the writer calls it with no Python call
        #: in between, :attr:`amqstomp._io.writer.LinkWriter.write_whole`)
        self.write_whole = sock.sendall

    def pending(self) -> int:
        """Bytes read from the socket but not yet returned by :meth:`recv` (none)."""
        return 0

    def sendall(self, data: bytes, deadline: Optional[float] = None) -> None:
        """Write ``data`` whole, blocking; with ``deadline`` (``time.monotonic()``
        seconds) at most until then.

        Raises:
            OSError: the write failed; TimeoutError (an OSError) when the deadline
                passed with bytes unwritten (the stream is then cut mid-frame:
                the caller closes the link).
        """
        if deadline is None:
            self.sock.sendall(data)
            return
        view = memoryview(data)
        sock = self.sock
        while len(view):
            try:
                sent = sock.send(view, _MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                sent = 0
            if sent:
                view = view[sent:]
                continue
            _wait_writable(sock, deadline, len(view))

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


class TLSChannel:
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
        data: bytes = self._read(self.sock.recv, size, b"")
        return data

    def recv_into(self, buffer: Any) -> int:
        """Read into ``buffer`` (writable); returns the bytes read (0: the end)."""
        got: int = self._read(self.sock.recv_into, buffer, 0)
        return got

    def _read(self, call: Callable[[Any], Any], arg: Any, ended: Any) -> Any:
        """``call(arg)`` under the lock, waiting outside it while OpenSSL wants to;
        ``ended`` once the connection is closed."""
        while True:
            with self._io:
                if self._closed:
                    return ended
                try:
                    return call(arg)
                except ssl.SSLWantReadError:
                    events = selectors.EVENT_READ
                except ssl.SSLWantWriteError:
                    events = selectors.EVENT_WRITE
                except ssl.SSLZeroReturnError:
                    return ended
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

    def sendall(self, data: bytes, deadline: Optional[float] = None) -> None:
        """Write ``data`` whole (as :meth:`PlainChannel.sendall`, ``deadline`` included)."""
        pending = self._unsent
        if pending is not None:
            self._unsent = None
            self._sendall_view(pending, deadline)
        self._sendall_view(memoryview(data), deadline)

    def _sendall_view(self, view: memoryview, deadline: Optional[float] = None) -> None:
        while len(view):
            sent, events = self._send_some(view)
            if sent:
                view = view[sent:]
            elif deadline is None:
                self._wait(self._wsel, events)
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("a write could not finish in time: %d bytes unwritten" % len(view))
                try:
                    self._wsel.modify(self.sock, events)
                except (KeyError, ValueError):
                    self._wsel.register(self.sock, events)
                self._wsel.select(min(left, self._POLL_S))

    def send_some(self, data: Union[bytes, bytearray, memoryview]) -> int:
        """Write without blocking; returns the bytes written. 0: nothing fits
        now, or OpenSSL took the bytes and asks to be called again with the same
        ones (SSL_write's retry rule): the caller keeps ``data`` and writes it
        first, with this or :meth:`sendall`. A beat :meth:`try_send` left
        unfinished goes first (0 while it does not fit)."""
        pending = self._unsent
        if pending is not None:
            sent, _ = self._send_some(pending)
            rest = pending[sent:]
            self._unsent = rest if len(rest) else None
            if self._unsent is not None:
                return 0
        return self._send_some(memoryview(data))[0]

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


# --------------------------------------------------------------------------- connecting


def connect(host_and_port: HostAndPort, timeout: float, bind_host_port: Optional[HostAndPort] = None,
            keepalive: Any = None, tls: Optional[TLSEntry] = None) -> Union["PlainChannel", "TLSChannel"]:
    """A connected channel to ``host_and_port``: TCP (``TCP_NODELAY`` on,
    keep-alive per ``keepalive``, see :func:`set_keepalive`), wrapped in TLS
    when ``tls`` = (context, validator) is given; ``validator(cert, host)``
    returns (ok, message) after the handshake.

    Args:
        timeout (float): seconds for the TCP connect and the TLS handshake.

    Raises:
        OSError, ssl.SSLError: the connect or the handshake failed.
        ConnectFailedException: the validator rejected the certificate.
    """
    sock = socket.create_connection(host_and_port, timeout, bind_host_port)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        set_keepalive(sock, keepalive)
        if tls is None:
            return PlainChannel(sock)
        context, validator = tls
        wrapped = context.wrap_socket(sock, server_hostname=host_and_port[0])
        sock = wrapped
        if validator is not None:
            ok, message = validator(wrapped.getpeercert(), host_and_port[0])
            if not ok:
                raise ConnectFailedException("server certificate rejected: %s" % (message,))
        return TLSChannel(wrapped)
    except BaseException:
        sock.close()
        raise


#: keepalive kinds and how many values follow each (None: any number, ignored)
_KEEPALIVE_KINDS = {"auto": None, "linux": 3, "mac": 1}


def check_keepalive(spec: Any) -> Any:
    """``keepalive`` checked (stomp.py's meaning, :func:`set_keepalive`): None or a
    bool, or a tuple or list: ``("linux", idle_s, interval_s, count)``,
    ``("mac", interval_s)`` (each value an int >= 0 or None: the OS default) or
    ``("auto", ...)``. stomp.py logs anything else at ERROR and goes on without
    keep-alive (a tuple ``("linux",)`` fails its connect).

    Raises:
        TypeError: neither None, a bool nor a tuple or list, naming ``keepalive``.
        ConfigurationError: (a ValueError) an unknown kind or a wrong count or value, naming it.
    """
    if spec is None or isinstance(spec, bool):
        return spec
    if not isinstance(spec, (tuple, list)):
        raise TypeError("keepalive must be None, a bool, or a tuple such as ('linux', idle_s, interval_s, count) "
                        "or ('mac', interval_s), got %r" % (spec,))
    kind = spec[0] if spec else None
    if kind not in _KEEPALIVE_KINDS:
        raise ConfigurationError("keepalive %r: the first item must be 'linux', 'mac' or 'auto'" % (spec,))
    count, values = _KEEPALIVE_KINDS[kind], tuple(spec[1:])
    if count is not None and (len(values) != count or not all(
            v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0) for v in values)):
        raise ConfigurationError("keepalive %r: %r takes %d value(s), each an int >= 0 or None"
                                 % (spec, kind, count))
    return spec


def set_keepalive(sock: socket.socket, spec: Any) -> None:
    """TCP keep-alive on ``sock``: ``spec`` True for the OS defaults,
    ``("linux", idle_s, interval_s, count)`` or ``("mac", interval_s)`` to tune
    it, ``("auto", ...)`` / falsy for nothing more (stomp.py's ``keepalive``)."""
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


def tls_context(ca_certs: Optional[str] = None, cert_file: Optional[str] = None, key_file: Optional[str] = None,
                password: Any = None, verify: bool = True, protocol: Optional[int] = None) -> ssl.SSLContext:
    """A client TLS context: verifies the broker's certificate and host name
    against ``ca_certs`` (a CA bundle file; the system's CAs when None), with a
    client certificate when ``cert_file`` is given (``key_file``, its
    ``password``). ``verify=False`` turns verification off; ``protocol`` (an
    ``ssl.PROTOCOL_*`` constant, stomp.py's ``ssl_version``) picks one.

    Raises:
        OSError, ssl.SSLError: a file cannot be read or is not what it should be.
    """
    if protocol is None:
        context: ssl.SSLContext = _load(ssl.create_default_context, "ca_certs", ca_certs, keyword="cafile")
    else:
        context = ssl.SSLContext(protocol)
        if ca_certs:
            _load(context.load_verify_locations, "ca_certs", ca_certs)
        else:
            context.load_default_certs()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        _load(context.load_cert_chain, "cert_file/key_file", "%s, %s" % (cert_file, key_file or cert_file),
              cert_file, key_file or cert_file, password)
    return context


def _load(call: Callable[..., Any], what: str, path: Optional[str], *args: Any, keyword: str = "") -> Any:
    """``call`` loading TLS files; an error names the argument and the file(s).

    Raises:
        OSError (FileNotFoundError...), ssl.SSLError: as ``call`` raised it, its
            message naming ``what`` and ``path``.
    """
    try:
        if keyword:
            return call(**{keyword: path})
        return call(*(args or (path,)))
    except ssl.SSLError as exc:
        raise ssl.SSLError(exc.errno, "%s (%s=%s)" % (exc.strerror or exc, what, path)) from exc
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise type(exc)(exc.errno, "%s (%s)" % (exc.strerror, what), path) from exc


# --------------------------------------------------------------------------- broker addresses


def local_host_names() -> Tuple[str, ...]:
    try:
        return LOCAL_NAMES + (socket.gethostname(),)
    except OSError:
        return LOCAL_NAMES


def order_hosts(hosts: List[HostAndPort], prefer_localhost: bool, try_loopback: bool) -> List[HostAndPort]:
    """stomp.py's order of ``hosts``: those naming this machine first
    (``prefer_localhost``), and for an entry naming it by host name,
    ``127.0.0.1`` on that port before it (``try_loopback``)."""
    if not (prefer_localhost or try_loopback):
        return hosts
    local = local_host_names()
    if prefer_localhost:
        hosts = sorted(hosts, key=lambda hp: 0 if hp[0] in local else 1)  # stable
    if try_loopback:
        extra = []
        for host, port in hosts:
            if host in local and host not in LOCAL_NAMES and ("127.0.0.1", port) not in hosts \
                    and ("localhost", port) not in hosts and ("127.0.0.1", port) not in extra:
                extra.append(("127.0.0.1", port))
        hosts = extra + hosts
    return hosts
