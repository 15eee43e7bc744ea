"""The receive heart-beat check against a real ActiveMQ, through amqstomp's TcpProxy:

* a consumer whose reading is paused by flow control (its buffer is full) still
  notices a peer that reset (cut), closed (half_close) or went silent (stall) --
  and does not blame a live peer that its own closed receive window holds back;
* a thread holding the GIL in C for longer than the receive window while the
  broker's beats wait unread in the socket is no heart-beat timeout; a really
  silent peer still is."""
import ctypes
import threading
import time
import uuid

import pytest
from conftest import fill_queue, wait_until

import amqstomp
from amqstomp.testing import TcpProxy

pytestmark = pytest.mark.broker

# the client sends no beats (so the broker never closes it while the GIL is held)
# and wants one every second: the receive deadline is 1 s x 2 x 1.5 = 3 s
RECV_ONLY_1S = (0, 1000)
DEADLINE_S = 3.0
KIB = b"x" * 1024


def qname(prefix="hb"):
    return "/queue/%s.%s" % (prefix, uuid.uuid4().hex[:10])


class Held(amqstomp.ConnectionListener):
    """Blocks in its first on_message until released (at most 60 s): the buffer
    fills and flow control pauses reading."""

    def __init__(self):
        self.release = threading.Event()
        self.holding = threading.Event()
        self.count = 0
        self.events = []

    def on_message(self, frame):
        if self.count == 0:
            self.holding.set()
            self.release.wait(60)
        self.count += 1

    def on_heartbeat_timeout(self):
        self.events.append("heartbeat_timeout")

    def on_disconnected(self):
        self.events.append("disconnected")


def receive_window(conn):
    """This side's advertised receive window (bytes), None when the kernel does not
    tell (the check then falls back to "empty socket buffer = open")."""
    try:
        from amqstomp._io.channel import receive_window as _receive_window
    except ImportError:  # code from before the paused check (to see these tests fail there)
        return None
    return _receive_window(conn.transport._link.channel.sock)


def paused_consumer(proxy, destination, prefetch, heartbeats=(1000, 1000)):
    listener = Held()
    conn = amqstomp.Connection12(proxy.host_and_ports, auto_decode=False, heartbeats=heartbeats)
    conn.set_listener("held", listener)
    conn.connect(wait=True)
    conn.subscribe(destination, id=1, ack="auto", prefetch_size=prefetch)
    assert listener.holding.wait(20)
    assert wait_until(lambda: conn.transport.reading_paused, 10)
    return conn, listener


# --------------------------------------------------------------------------- paused


@pytest.mark.timeout(90)
@pytest.mark.compiled_pass_only  # heart-beat timers (and the GIL), above the codec
def test_a_paused_consumer_notices_a_reset_peer(activemq):
    """Reading paused with the receive window closed (3,000 x 1 KiB on ack:auto, the
    listener blocked): a reset from the peer (the proxy cuts, RST) is noticed within
    the heart-beat deadline and the connection ends. The client sends no beats, so
    only the receive check can notice (a beat written would fail on the reset).
    Before: never (the check was suspended while paused and the reader never looked)."""
    q = qname()
    fill_queue(activemq, q, 3000, body=KIB)
    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        conn, listener = paused_consumer(proxy, q, prefetch=100, heartbeats=RECV_ONLY_1S)
        try:
            time.sleep(1.0)  # the broker fills the socket
            assert conn.is_connected() and conn.transport.reading_paused
            began = time.monotonic()
            assert proxy.cut() == 1
            assert wait_until(lambda: not conn.is_connected(), DEADLINE_S + 5), "still connected"
            took = time.monotonic() - began
            assert took < DEADLINE_S, took
        finally:
            listener.release.set()
            conn.disconnect()


@pytest.mark.timeout(90)
@pytest.mark.compiled_pass_only  # heart-beat timers (and the GIL), above the codec
def test_a_paused_consumer_notices_an_eof_and_delivers_what_came_before_it(activemq):
    """Reading paused with room left in the window (30 x 100 B, buffer 10): the peer's
    EOF (the proxy half-closes towards the client) ends the pause, the reader reads
    what the broker sent before it, and the connection ends; released, the listener
    gets every message that was read (ack:auto: nothing the broker sent is lost).
    (An EOF behind a closed window cannot arrive before reading resumes: TCP keeps
    it behind the data.)"""
    q = qname()
    fill_queue(activemq, q, 30, body=b"z" * 100)
    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        conn, listener = paused_consumer(proxy, q, prefetch=10)
        try:
            time.sleep(1.0)
            assert conn.is_connected() and conn.transport.reading_paused
            began = time.monotonic()
            assert proxy.half_close("to_client") == 1
            assert wait_until(lambda: not conn.is_connected(), DEADLINE_S + 5), "still connected"
            took = time.monotonic() - began
            assert took < DEADLINE_S, took
            delivered = conn.subscriptions.get(1).window.delivered
            listener.release.set()
            assert wait_until(lambda: listener.count == delivered, 10), (listener.count, delivered)
            assert delivered == 30
        finally:
            listener.release.set()
            conn.disconnect()


@pytest.mark.timeout(120)
@pytest.mark.compiled_pass_only  # heart-beat timers (and the GIL), above the codec
def test_a_paused_consumer_notices_a_killed_broker(activemq_factory):
    """Reading paused with the receive window closed; the broker is killed (-9):
    its kernel answers our next heart-beat with a reset (the FIN itself waits behind
    the data the closed window holds back), which ends the connection. (A guard: the
    heart-beat write failing on the reset noticed this before too.)"""
    broker = activemq_factory(broker_name="amqstomp-hb-kill")
    q = qname()
    fill_queue(broker, q, 3000, body=KIB)
    listener = Held()
    conn = amqstomp.Connection12(broker.host_and_ports, auto_decode=False, heartbeats=(1000, 1000))
    conn.set_listener("held", listener)
    conn.connect(wait=True)
    try:
        conn.subscribe(q, id=1, ack="auto", prefetch_size=100)
        assert listener.holding.wait(20)
        assert wait_until(lambda: conn.transport.reading_paused, 10)
        time.sleep(1.0)
        began = time.monotonic()
        broker.kill()
        assert wait_until(lambda: not conn.is_connected(), DEADLINE_S + 5), "still connected"
        took = time.monotonic() - began
        assert took < DEADLINE_S + 1.0, took
    finally:
        listener.release.set()
        conn.disconnect()


@pytest.mark.timeout(90)
@pytest.mark.compiled_pass_only  # heart-beat timers (and the GIL), above the codec
def test_a_paused_consumer_notices_a_stalled_peer_while_its_window_is_open(activemq):
    """Reading paused with room left in the receive window (30 messages, buffer 10):
    the broker's beats keep arriving, so 5 s paused is no timeout; after the proxy
    stalls, silence with the window open is a dead peer (timeout within ~3 s).
    Before: never noticed while paused."""
    q = qname()
    fill_queue(activemq, q, 30, body=b"y" * 100)
    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        conn, listener = paused_consumer(proxy, q, prefetch=10)
        try:
            time.sleep(5.0)  # > the 3 s deadline: paused, yet the peer shows it is alive
            assert conn.is_connected() and conn.transport.reading_paused
            window = receive_window(conn)
            assert window is None or window >= 4096, window  # open: the peer could send
            began = time.monotonic()
            proxy.stall()
            assert wait_until(lambda: not conn.is_connected(), DEADLINE_S + 5)
            took = time.monotonic() - began
            # the last beat seen came at most ~2 s before the stall (ActiveMQ's grid), and the
            # paused socket is looked at every second
            assert 0.5 < took < DEADLINE_S + 2.0, took
        finally:
            listener.release.set()
            conn.disconnect()
        assert "heartbeat_timeout" in listener.events


@pytest.mark.timeout(90)
def test_a_paused_consumer_does_not_blame_a_peer_its_closed_window_holds_back(activemq):
    """Reading paused 8 s with the receive window closed (the broker cannot send,
    not even beats): no heart-beat timeout; released, every message comes."""
    q = qname()
    count = 3000
    fill_queue(activemq, q, count, body=KIB)
    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        conn, listener = paused_consumer(proxy, q, prefetch=100)
        try:
            time.sleep(8.0)
            assert conn.is_connected() and conn.transport.reading_paused
            window = receive_window(conn)
            assert window is None or window < 4096, window  # closed: the peer cannot send
            listener.release.set()
            assert wait_until(lambda: listener.count == count, 30), listener.count
            assert "heartbeat_timeout" not in listener.events
            assert conn.is_connected()
        finally:
            listener.release.set()
            conn.disconnect()


# --------------------------------------------------------------------------- the GIL


def _hold_the_gil(seconds):
    """Sleep in C without releasing the GIL (PyDLL keeps it held across the call)."""
    libc = ctypes.PyDLL(None)
    libc.sleep.argtypes = [ctypes.c_uint]
    libc.sleep(int(seconds))


@pytest.mark.timeout(120)
@pytest.mark.compiled_pass_only  # heart-beat timers (and the GIL), above the codec
def test_c_code_holding_the_gil_is_not_a_heartbeat_timeout(activemq):
    """1 s beats (3 s deadline); the main thread holds the GIL in C for 5 s, six
    times, with the broker's beats waiting in the socket meanwhile: never a
    heart-beat timeout. Before: a timeout in most runs (5 s > the deadline, and
    the timer thread may run before the reader)."""
    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        listener = Held()
        conn = amqstomp.Connection12(proxy.host_and_ports, heartbeats=RECV_ONLY_1S)
        conn.set_listener("l", listener)
        conn.connect(wait=True)
        try:
            assert conn.transport.heartbeats == (0, 1000)
            for i in range(6):
                _hold_the_gil(5)
                time.sleep(0.5)  # the reader and the timer catch up
                assert conn.is_connected(), "heart-beat timeout after GIL hold %d" % (i + 1)
            assert "heartbeat_timeout" not in listener.events
        finally:
            conn.disconnect()


@pytest.mark.timeout(60)
@pytest.mark.compiled_pass_only  # heart-beat timers (and the GIL), above the codec
def test_a_silent_peer_is_still_a_heartbeat_timeout(activemq):
    """The look at the socket does not hide a dead peer: the proxy stalls, no byte
    comes, the timeout fires within the deadline plus the confirmation look."""
    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        listener = Held()
        conn = amqstomp.Connection12(proxy.host_and_ports, heartbeats=RECV_ONLY_1S)
        conn.set_listener("l", listener)
        conn.connect(wait=True)
        try:
            time.sleep(1.5)
            began = time.monotonic()
            proxy.stall()
            assert wait_until(lambda: not conn.is_connected(), DEADLINE_S + 5)
            took = time.monotonic() - began
            assert took < DEADLINE_S + 1.0, took
            assert wait_until(lambda: "heartbeat_timeout" in listener.events, 5)
        finally:
            conn.disconnect()
