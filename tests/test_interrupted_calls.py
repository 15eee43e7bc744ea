"""Calls of the stomp.py API ended by an exception that is not the connection's
own: Ctrl-C (KeyboardInterrupt) or an exception raised by a signal handler (an
alarm-based timeout), arriving while the call waits on a socket.

A new user's finding (2026-12-07): ``connect(wait=True)`` interrupted that way
left its socket, its CONNECT unanswered, and the connection's three threads
running until ``disconnect()``. The caller's exception must go on as it is, and
nothing the abandoned call started may outlive it.

The interruption is a SIGALRM whose handler raises :class:`Interrupted`, a
BaseException as KeyboardInterrupt is (pytest treats a real KeyboardInterrupt as a
request to stop the session); the peer is a
socket on 127.0.0.1 that the kernel accepts and nobody ever answers.
"""
import signal
import threading
import uuid

import pytest
from conftest import wait_until

import amqstomp
from amqstomp.exception import NotConnectedException
from amqstomp.testing import queue_statistics

pytestmark = pytest.mark.timeout(60)


class Interrupted(BaseException):
    """What the alarm's handler raises: like KeyboardInterrupt, not an Exception (with
    ``auto_reconnect`` a connect attempt that raises an Exception is that attempt's
    failure, and the next one follows: the policy's passes bound it)."""


@pytest.fixture
def alarm():
    """Arm SIGALRM ``after`` seconds; its handler raises Interrupted."""
    def handler(signum, frame):
        raise Interrupted("the alarm went off")

    previous = signal.signal(signal.SIGALRM, handler)

    def arm(after: float) -> None:
        signal.setitimer(signal.ITIMER_REAL, after)

    try:
        yield arm
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("auto_reconnect", [False, True])
def test_an_interrupted_connect_wait_ends_its_socket_and_threads(alarm, silent_peer, auto_reconnect):
    """``connect(wait=True)`` interrupted while it waits for CONNECTED: the exception
    reaches the caller unchanged, and the socket and every thread the connect started
    end within a few seconds (they ran until ``disconnect()``; the connect's own
    bound here is 30 s, so only the interruption can have ended them)."""
    before = set(threading.enumerate())
    conn = amqstomp.Connection12([silent_peer], timeout=30, auto_reconnect=auto_reconnect,
                                 reconnect_attempts_max=-1)
    alarm(0.5)
    with pytest.raises(Interrupted):
        conn.connect("admin", "admin", wait=True)
    assert wait_until(lambda: not (set(threading.enumerate()) - before), 10), \
        sorted(t.name for t in set(threading.enumerate()) - before)
    assert not conn.is_connected()
    assert not conn.transport.is_open()
    conn.disconnect()  # still a no-op that does not raise


@pytest.mark.parametrize("auto_reconnect", [False, True])
def test_a_send_interrupted_inside_its_write_ends_the_socket_it_cut(alarm, activemq, tcp_proxy_factory,
                                                                     auto_reconnect):
    """A ``send()`` interrupted while its frame is being written (the broker not
    reading: a stalled proxy; a 32 MiB body): part of the frame
    may be on the wire, so that socket can carry nothing more (the broker would read
    the next frames as the rest of the body). The socket is closed as a loss: the
    caller's exception goes on, and the next ``send()`` raises (no failover) or goes
    out whole on a new socket (failover), never reported sent on the cut one (a
    fresh user's finding: ``is_connected()`` stayed True and the next send returned
    normally, its message lost)."""
    proxy = tcp_proxy_factory(tuple(activemq.host_and_ports[0]))
    conn = amqstomp.Connection12([proxy.address], timeout=30, auto_reconnect=auto_reconnect,
                                 reconnect_attempts_max=-1)
    conn.connect("admin", "admin", wait=True)
    queue = "/queue/amqstomp-interrupted-" + uuid.uuid4().hex[:10]
    try:
        proxy.stall()  # nothing forwarded: our writes fill the socket buffers, then block
        alarm(1.0)
        with pytest.raises(Interrupted):
            conn.send(queue, b"z" * (32 << 20))
        signal.setitimer(signal.ITIMER_REAL, 0)
        proxy.unstall()
        if not auto_reconnect:
            assert wait_until(lambda: not conn.is_connected(), 5)
            with pytest.raises(NotConnectedException):
                conn.send(queue, "after")
            return
        conn.send(queue, "after", receipt="after")  # on the failover loop's new socket
        conn.wait_for_receipt("after", 20)
        assert wait_until(lambda: (queue_statistics(activemq, queue[len("/queue/"):]) or {}).get("size") == 1, 10)
    finally:
        conn.disconnect()
