"""amqstomp.testing.TcpProxy: the loopback proxy that failover tests put between
a client and a broker.  First against a tiny echo server started here (exact
byte-level behaviour of cut / stall / half-close / refuse / retarget, no leaks),
then against a real ActiveMQ with amqstomp's own client (what the client sees).
"""
import os
import socket
import socketserver
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
from conftest import Collector, _entry_point_registered, wait_until

import amqstomp as stomp
from amqstomp.testing import ProxyError, TcpProxy

pytestmark = [
    pytest.mark.timeout(60),
    # a socket the proxy forgets without closing is closed by the garbage
    # collector with a ResourceWarning (so /proc/self/fd alone would not see it)
    pytest.mark.filterwarnings("error::ResourceWarning"),
    pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"),
]

# --------------------------------------------------------------------------- helpers


class EchoServer:
    """A threaded echo server on 127.0.0.1 that records what it got.

    Every chunk received is sent back with ``prefix`` in front; on EOF it shuts
    its write side down and closes.  ``received`` holds every byte, ``eofs``
    counts orderly EOFs, ``errors`` resets / other socket errors.
    """

    def __init__(self, prefix: bytes = b"") -> None:
        self.prefix = prefix
        self.lock = threading.Lock()
        self.received = bytearray()
        self.eofs = 0
        self.errors = 0
        self.open = 0
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock = self.request
                sock.settimeout(30)
                with outer.lock:
                    outer.open += 1
                try:
                    for _ in range(100000):
                        data = sock.recv(65536)
                        if not data:
                            with outer.lock:
                                outer.eofs += 1
                            sock.shutdown(socket.SHUT_WR)
                            return
                        with outer.lock:
                            outer.received += data
                        sock.sendall(outer.prefix + data)
                except OSError:
                    with outer.lock:
                        outer.errors += 1
                finally:
                    with outer.lock:
                        outer.open -= 1

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = self.server.server_address[:2]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="test-echo", daemon=True)
        self.thread.start()

    def got(self) -> bytes:
        with self.lock:
            return bytes(self.received)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def echo():
    server = EchoServer()
    try:
        yield server
    finally:
        server.close()


def dial(proxy: TcpProxy, timeout: float = 5.0) -> socket.socket:
    sock = socket.create_connection(proxy.address, timeout=timeout)
    return sock


def recv_exactly(sock: socket.socket, n: int, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while len(buf) < n and time.monotonic() < deadline:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def read_outcome(sock: socket.socket, timeout: float = 5.0) -> str:
    """What the next read on ``sock`` gives: "eof", "reset", "timeout" or "data"."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(65536)
    except socket.timeout:
        return "timeout"
    except ConnectionResetError:
        return "reset"
    return "data" if data else "eof"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def thread_names():
    return sorted(t.name for t in threading.enumerate())


# --------------------------------------------------------------------------- basics (echo server)


@pytest.mark.timeout(20)
def test_forwards_both_ways_with_backpressure(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    assert proxy.address[0] == "127.0.0.1" and proxy.address[1] > 0
    assert proxy.host_and_ports == [proxy.address]
    with dial(proxy) as sock:
        sock.sendall(b"hello")
        assert recv_exactly(sock, 5) == b"hello"
        assert proxy.wait_for_connections(1, 5)
        # 4 MiB both ways through 64 KiB buffers: exercises partial writes
        payload = os.urandom(4 * 1024 * 1024)
        sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
        sender.start()
        assert recv_exactly(sock, len(payload), 15) == payload
        sender.join(5)
    assert proxy.wait_for_connections(0, 5, exact=True)
    assert proxy.accepted == 1
    assert proxy.bytes_to_broker == proxy.bytes_to_client == 5 + len(payload)
    assert echo.eofs == 1  # the client's close went through as an orderly EOF


def test_listens_on_loopback_only_and_validates():
    with pytest.raises(ValueError):
        TcpProxy(("127.0.0.1", 1), listen_host="0.0.0.0")
    with pytest.raises(ValueError):
        TcpProxy(("127.0.0.1", 1), listen_port=70000)
    proxy = TcpProxy(("127.0.0.1", 1))
    with pytest.raises(ProxyError):
        proxy.address  # not started
    with pytest.raises(ProxyError):
        proxy.cut()
    with pytest.raises(ValueError):
        proxy.half_close("sideways")
    with pytest.raises(ValueError):
        proxy.refuse(True, mode="maybe")
    proxy.close()  # closing a never-started proxy is fine


@pytest.mark.timeout(20)
def test_cut_resets_both_sides_and_keeps_accepting(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    sock = dial(proxy)
    sock.sendall(b"ping")
    assert recv_exactly(sock, 4) == b"ping"
    assert proxy.cut() == 1
    assert proxy.connections == 0
    assert read_outcome(sock, 5) == "reset"  # SO_LINGER 0: RST, not FIN
    sock.close()
    assert wait_until(lambda: echo.errors == 1, 5), (echo.errors, echo.eofs)
    assert echo.eofs == 0
    with dial(proxy) as again:  # the proxy itself carries on
        again.sendall(b"pong")
        assert recv_exactly(again, 4) == b"pong"
    assert proxy.accepted == 2


@pytest.mark.timeout(20)
def test_stall_is_silence_without_eof_and_unstall_delivers(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    with dial(proxy) as sock:
        sock.sendall(b"a")
        assert recv_exactly(sock, 1) == b"a"
        proxy.stall()
        assert proxy.stalled
        sock.sendall(b"held")
        assert read_outcome(sock, 1.0) == "timeout"  # silence, not EOF
        assert echo.got() == b"a"                    # nothing reached the server
        assert proxy.connections == 1
        before = proxy.bytes_to_broker
        proxy.unstall()
        assert recv_exactly(sock, 4) == b"held"
        assert proxy.bytes_to_broker == before + 4


@pytest.mark.timeout(20)
def test_stall_applies_to_new_connections(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    proxy.stall()
    with dial(proxy) as sock:
        assert proxy.wait_for_connections(1, 5)  # TCP is up on both sides
        sock.sendall(b"x")
        assert read_outcome(sock, 0.5) == "timeout"
        proxy.unstall()
        assert recv_exactly(sock, 1) == b"x"


@pytest.mark.timeout(20)
def test_stall_after_forwards_exactly_the_budget_to_the_client_then_stalls(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    with dial(proxy) as sock:
        proxy.stall_after(to_client=5)
        assert not proxy.stalled
        sock.sendall(b"abcdefgh")                     # the echo sends 8 back; 5 pass
        assert recv_exactly(sock, 5) == b"abcde"
        assert read_outcome(sock, 0.5) == "timeout"   # the rest is held, no EOF
        assert proxy.stalled and proxy.bytes_to_client == 5
        proxy.unstall()
        assert recv_exactly(sock, 3) == b"fgh"
        sock.sendall(b"z")                            # no budget after unstall
        assert recv_exactly(sock, 1) == b"z"
    with pytest.raises(ValueError, match="to_client"):
        proxy.stall_after(to_client=-1)


@pytest.mark.timeout(20)
def test_stop_reading_holds_the_client_after_its_frame_and_keeps_the_broker_side_alive(tcp_proxy_factory, echo):
    """stop_reading: the client's frame in progress goes on to its NUL, nothing after
    it; the broker side gets a heart-beat (EOL) every keepalive and what it sends
    still reaches the client; the client's writes fill the buffers (rcvbuf 64 KiB);
    resume_reading forwards the held bytes first, in order."""
    proxy = tcp_proxy_factory(echo.address, rcvbuf=65536)
    with dial(proxy) as sock:
        sock.sendall(b"x")
        assert recv_exactly(sock, 1) == b"x"
        proxy.stop_reading(keepalive=0.1)
        sock.sendall(b"ab\0cd")
        assert wait_until(lambda: echo.got().count(b"\n") >= 3, 5), echo.got()  # heart-beats to the broker
        assert echo.got().replace(b"\n", b"") == b"xab\0"  # nothing after the frame's end
        assert recv_exactly(sock, 4) == b"ab\0\n"  # the broker's bytes still reach the client
        sock.setblocking(False)
        written = 0
        for _ in range(10000):  # bounded: the buffers fill, the proxy reads nothing more
            try:
                written += sock.send(b"y" * 65536)
            except BlockingIOError:
                break
        else:
            pytest.fail("the client's writes never blocked")
        time.sleep(0.3)
        assert echo.got().replace(b"\n", b"") == b"xab\0"
        proxy.resume_reading()
        want = b"xab\0cd" + b"y" * written

        def forwarded():
            for _ in range(1000):  # take the echoes, so the echo server never blocks on them
                try:
                    if not sock.recv(1 << 20):
                        break
                except BlockingIOError:
                    break
            return echo.got().replace(b"\n", b"")
        assert wait_until(lambda: forwarded() == want, 10), len(echo.got())
    with pytest.raises(ValueError, match="keepalive"):
        proxy.stop_reading(keepalive=0)
    with pytest.raises(ValueError, match="rcvbuf"):
        TcpProxy(echo.address, rcvbuf=0)


@pytest.mark.timeout(20)
def test_half_close_to_client_gives_eof_while_client_still_writes(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    sock = dial(proxy)
    sock.sendall(b"1")
    assert recv_exactly(sock, 1) == b"1"
    assert proxy.half_close("to_client") == 1
    assert read_outcome(sock, 5) == "eof"
    sock.sendall(b"still here")  # client -> broker is open
    assert wait_until(lambda: echo.got() == b"1still here", 5), echo.got()
    assert proxy.connections == 1
    sock.close()  # client's EOF reaches the server, which closes: the pair ends
    assert proxy.wait_for_connections(0, 5, exact=True)
    assert wait_until(lambda: echo.eofs == 1, 5)


@pytest.mark.timeout(20)
def test_half_close_to_broker_gives_server_eof(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    sock = dial(proxy)
    sock.sendall(b"1")
    assert recv_exactly(sock, 1) == b"1"
    proxy.half_close("to_broker")
    assert wait_until(lambda: echo.eofs == 1, 5)
    # the echo server answers EOF with its own: it reaches the client
    assert read_outcome(sock, 5) == "eof"
    sock.close()
    assert proxy.wait_for_connections(0, 5, exact=True)


@pytest.mark.timeout(20)
def test_refuse_reset_mode(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    proxy.refuse(True)
    assert proxy.refusing
    try:
        sock = dial(proxy)  # the handshake completes (kernel backlog) ...
    except ConnectionResetError:
        pass  # ... and on loopback the RST may even beat connect()'s return
    else:
        with sock:
            assert read_outcome(sock, 5) in ("reset", "eof")  # ... then it is reset
    assert proxy.wait_for_accepted(1, 5)
    assert proxy.refused == 1 and proxy.connections == 0
    assert echo.open == 0 and echo.got() == b""
    proxy.refuse(False)
    with dial(proxy) as sock:
        sock.sendall(b"ok")
        assert recv_exactly(sock, 2) == b"ok"


@pytest.mark.timeout(20)
def test_refuse_closed_mode_gives_connection_refused_then_same_port_again(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    port = proxy.address[1]
    with dial(proxy) as live:  # a live connection survives refusal
        live.sendall(b"a")
        assert recv_exactly(live, 1) == b"a"
        proxy.refuse(True, mode="closed")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(proxy.address, timeout=5)
        live.sendall(b"b")
        assert recv_exactly(live, 1) == b"b"
        proxy.refuse(False)
    assert proxy.address[1] == port
    with dial(proxy) as sock:
        sock.sendall(b"ok")
        assert recv_exactly(sock, 2) == b"ok"


@pytest.mark.timeout(20)
def test_refuse_drop_mode_is_a_black_hole_until_refuse_false(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    port = proxy.address[1]
    fds0 = open_fds()
    with dial(proxy) as live:  # a live connection survives refusal
        live.sendall(b"a")
        assert recv_exactly(live, 1) == b"a"
        proxy.refuse(True, mode="drop")
        assert proxy.refusing
        started = time.monotonic()
        with pytest.raises(socket.timeout):  # no answer at all: not refused, not reset
            socket.create_connection(proxy.address, timeout=0.5)
        assert time.monotonic() - started >= 0.45
        live.sendall(b"b")
        assert recv_exactly(live, 1) == b"b"
        proxy.refuse(False)
    assert proxy.address[1] == port and not proxy.refusing
    with dial(proxy) as sock:
        sock.sendall(b"ok")
        assert recv_exactly(sock, 2) == b"ok"
    assert proxy.wait_for_connections(0, 5, exact=True)
    assert wait_until(lambda: open_fds() == fds0, 5), (open_fds(), fds0)  # the black hole's sockets are closed


@pytest.mark.timeout(20)
def test_retarget_moves_new_connections_only(tcp_proxy_factory, echo):
    other = EchoServer(prefix=b"B:")
    try:
        proxy = tcp_proxy_factory(echo.address)
        old = dial(proxy)
        # connect() returns once the kernel has the connection; until the proxy
        # has accepted it, a retarget applies to it too
        assert proxy.wait_for_connections(1, 5)
        proxy.retarget(other.address)
        assert proxy.target == other.address
        new = dial(proxy)
        new.sendall(b"x")
        assert recv_exactly(new, 3) == b"B:x"
        old.sendall(b"y")
        assert recv_exactly(old, 1) == b"y"
        old.close()
        new.close()
    finally:
        other.close()


@pytest.mark.timeout(20)
def test_target_down_resets_the_client(tcp_proxy_factory):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    proxy = tcp_proxy_factory(("127.0.0.1", port))
    try:
        sock = dial(proxy)
    except ConnectionResetError:
        pass
    else:
        with sock:
            assert read_outcome(sock, 5) in ("reset", "eof")
    assert wait_until(lambda: proxy.refused == 1, 5)
    assert proxy.connections == 0


def test_waits_are_bounded(tcp_proxy_factory, echo):
    proxy = tcp_proxy_factory(echo.address)
    start = time.monotonic()
    assert proxy.wait_for_connections(1, 0.3) is False
    assert proxy.wait_for_accepted(1, 0.3) is False
    assert time.monotonic() - start < 2.0


@pytest.mark.timeout(30)
def test_one_thread_for_many_connections(tcp_proxy_factory, echo):
    before = threading.active_count()
    proxy = tcp_proxy_factory(echo.address)
    assert threading.active_count() == before + 1
    socks = [dial(proxy) for _ in range(40)]
    try:
        assert proxy.wait_for_connections(40, 10)
        for i, sock in enumerate(socks):
            sock.sendall(b"%03d" % i)
        for i, sock in enumerate(socks):
            assert recv_exactly(sock, 3) == b"%03d" % i
        # the echo server has a thread per connection; the proxy still has one
        proxy_threads = [t for t in threading.enumerate() if t.name.startswith("tcp-proxy-")]
        assert len(proxy_threads) == 1
    finally:
        for sock in socks:
            sock.close()
    assert proxy.wait_for_connections(0, 10, exact=True)


@pytest.mark.timeout(60)
def test_twenty_cut_cycles_leak_no_fds_or_threads(echo):
    # warm-up outside the measurement (imports, lazily created objects)
    with TcpProxy(echo.address) as warm, dial(warm) as sock:
        sock.sendall(b"w")
        recv_exactly(sock, 1)
    assert wait_until(lambda: echo.open == 0, 5)
    fds0, threads0 = open_fds(), threading.active_count()

    proxy = TcpProxy(echo.address).start()
    fds_running = open_fds()
    assert fds_running == fds0 + 4  # listener, wake-up pair, selector
    for cycle in range(20):
        socks = [dial(proxy) for _ in range(3)]
        for sock in socks:
            sock.sendall(b"c")
            assert recv_exactly(sock, 1) == b"c"
        assert proxy.wait_for_connections(3, 5, exact=True), cycle
        assert proxy.cut() == 3
        for sock in socks:
            assert read_outcome(sock, 5) == "reset", cycle
            sock.close()
        # the echo handlers see the reset and close their sockets
        assert wait_until(lambda: echo.open == 0 and open_fds() == fds_running, 5), (cycle, open_fds())
    assert proxy.accepted == 60
    proxy.close()
    assert open_fds() == fds0
    assert wait_until(lambda: threading.active_count() == threads0, 5), thread_names()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(proxy.address, timeout=5)
    with pytest.raises(ProxyError):
        proxy.stall()


@pytest.mark.timeout(20)
def test_close_resets_live_connections_and_joins(echo):
    proxy = TcpProxy(echo.address).start()
    sock = dial(proxy)
    proxy.stall()  # even a stalled pair is released
    sock.sendall(b"x")
    assert proxy.wait_for_connections(1, 5)
    thread = [t for t in threading.enumerate() if t.name == "tcp-proxy-%d" % proxy.address[1]][0]
    proxy.close()
    assert not thread.is_alive()
    assert read_outcome(sock, 5) == "reset"
    sock.close()
    proxy.close()  # idempotent


@pytest.mark.timeout(60)
def test_fixture_closes_its_proxies_at_teardown(tmp_path):
    """Runs a two-test session in a subprocess: the first makes proxies with
    the fixture, the second (after its teardown) finds them closed."""
    (tmp_path / "test_inner.py").write_text(textwrap.dedent("""
        import socket, threading
        import pytest
        from amqstomp.testing import ProxyError
        made = []

        def test_make(tcp_proxy_factory):
            made.append(tcp_proxy_factory(("127.0.0.1", 9)))
            made.append(tcp_proxy_factory(("127.0.0.1", 9)))
            assert sum(t.name.startswith("tcp-proxy-") for t in threading.enumerate()) == 2

        def test_closed_after_teardown():
            assert len(made) == 2
            assert not [t for t in threading.enumerate() if t.name.startswith("tcp-proxy-")]
            for proxy in made:
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection(proxy.address, timeout=5)
                with pytest.raises(ProxyError):
                    proxy.cut()
    """))
    # the amqstomp this process imported (a checkout or an installed wheel), and
    # its plugin loaded the way tests/conftest.py does (entry point, or -p)
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(stomp.__file__)))
    env = dict(os.environ, PYTHONPATH=package_parent + os.pathsep + os.environ.get("PYTHONPATH", ""))
    plugin = [] if _entry_point_registered() else ["-p", "amqstomp.testing.pytest_plugin"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, "test_inner.py"],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


# --------------------------------------------------------------------------- amqstomp through the proxy (ActiveMQ)


def queue_name() -> str:
    return "/queue/amqstomp-proxy-" + uuid.uuid4().hex[:12]


def connect(proxy, **kwargs):
    conn = stomp.Connection12(proxy.host_and_ports, **kwargs)
    col = Collector()
    conn.set_listener("collector", col)
    conn.connect("admin", "admin", wait=True, timeout=15)
    return conn, col


def amq_threads():
    return [t for t in threading.enumerate() if t.name.startswith("amqstomp-")]


@pytest.fixture
def broker_proxy(activemq, tcp_proxy_factory):
    return tcp_proxy_factory(activemq.host_and_ports[0])


@pytest.mark.broker
@pytest.mark.timeout(60)
def test_amqstomp_send_and_receive_through_proxy(broker_proxy):
    conn, col = connect(broker_proxy)
    try:
        assert broker_proxy.connections == 1
        dest = queue_name()
        conn.subscribe(dest, id="1", ack="auto")
        for i in range(10):
            conn.send(dest, "m%d" % i, receipt="r%d" % i)
        bodies = [m.body for m in col.wait_messages(10, 15)]
        assert bodies == [("m%d" % i).encode() for i in range(10)] or bodies == ["m%d" % i for i in range(10)]
        assert broker_proxy.bytes_to_broker > 0 and broker_proxy.bytes_to_client > 0
    finally:
        conn.disconnect()
    assert broker_proxy.wait_for_connections(0, 10, exact=True)


@pytest.mark.broker
@pytest.mark.timeout(60)
def test_cut_is_seen_as_a_disconnect(broker_proxy):
    conn, col = connect(broker_proxy)
    try:
        start = time.monotonic()
        assert broker_proxy.cut() == 1
        assert col.wait_event("disconnected", 10)
        elapsed = time.monotonic() - start
        assert elapsed < 2.0, elapsed  # a reset is seen at once, not by a timer
        assert "heartbeat_timeout" not in col.events
        assert not conn.is_connected()
    finally:
        conn.disconnect()


@pytest.mark.broker
@pytest.mark.timeout(60)
@pytest.mark.compiled_pass_only  # the proxy's stall seen by heart-beat timers
def test_stall_is_detected_by_heartbeats(broker_proxy):
    conn, col = connect(broker_proxy, heartbeats=(1000, 1000))
    try:
        time.sleep(0.5)
        broker_proxy.stall()
        start = time.monotonic()
        assert col.wait_event("heartbeat_timeout", 15)
        elapsed = time.monotonic() - start
        assert col.wait_event("disconnected", 10)
        assert col.events.index("heartbeat_timeout") < col.events.index("disconnected")
        # at least one negotiated interval of silence, at most 1000 ms x 2 (peer's
        # check grid) x 1.5 (grace) = 3 s plus timer slack
        assert 1.0 <= elapsed < 5.0, elapsed
        assert not conn.is_connected()
    finally:
        conn.disconnect()


@pytest.mark.broker
@pytest.mark.timeout(60)
@pytest.mark.compiled_pass_only  # the proxy's stall, no heart-beats: a 3 s wait that nothing happens
def test_stall_without_heartbeats_goes_unnoticed(broker_proxy):
    """The counterpart that makes the previous test meaningful: with no
    heart-beats a stalled peer looks alive."""
    conn, col = connect(broker_proxy)
    try:
        broker_proxy.stall()
        assert not col.wait_event("disconnected", 3)
        assert conn.is_connected()
    finally:
        broker_proxy.cut()
        conn.disconnect()


@pytest.mark.broker
@pytest.mark.timeout(60)
def test_half_close_is_seen_as_eof(broker_proxy):
    conn, col = connect(broker_proxy)  # no heart-beats: only the EOF can tell
    try:
        start = time.monotonic()
        broker_proxy.half_close("to_client")
        assert col.wait_event("disconnected", 10)
        assert time.monotonic() - start < 2.0
        assert "heartbeat_timeout" not in col.events
        assert not conn.is_connected()
        # the client closed its socket on EOF: the pair ends both ways
        assert broker_proxy.wait_for_connections(0, 10, exact=True)
    finally:
        conn.disconnect()


@pytest.mark.broker
@pytest.mark.timeout(120)
def test_twenty_cut_cycles_leave_threads_and_fds_stable(broker_proxy):
    def cycle():
        conn, col = connect(broker_proxy)
        assert broker_proxy.wait_for_connections(1, 5, exact=True)
        assert broker_proxy.cut() == 1
        assert col.wait_event("disconnected", 10)
        conn.disconnect()
        assert wait_until(lambda: not amq_threads(), 10), [t.name for t in amq_threads()]

    assert wait_until(lambda: not amq_threads(), 10)
    cycle()  # warm-up: lazily created objects outside the measurement
    fds0, threads0 = open_fds(), threading.active_count()
    durations = []
    for _ in range(20):
        start = time.monotonic()
        cycle()
        durations.append(time.monotonic() - start)
    assert broker_proxy.connections == 0
    assert wait_until(lambda: threading.active_count() == threads0, 10), thread_names()
    assert wait_until(lambda: open_fds() == fds0, 10), (open_fds(), fds0)
    assert max(durations) < 5.0, durations
