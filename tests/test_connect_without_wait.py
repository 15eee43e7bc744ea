"""The stomp.py API's ``connect()`` without ``wait=True`` when the first broker
fails, against the session's persistent ActiveMQ (the good broker) and TcpProxy
front ends that fail the way a broker can: accept the socket and never answer
(``stall``), or accept it and reset it at once (``refuse(mode="reset")``).

stomp.py's ``connect()`` without ``wait`` writes CONNECT and returns; what
happens to that socket afterwards was nobody's business here before: a broker
that reset it made ``connect()`` raise at once (the next broker never tried), and
one that never answered left the connection there for ever. Now CONNECTED is due
within the connect timeout (the protocol core's CONNECTED deadline), a socket
that ends before it is a lost socket, and with ``auto_reconnect`` the failover
loop takes it over from the start (docs/guides/failover.md). Every wait is bounded.
"""
import threading
import time
import uuid

import pytest
from conftest import wait_until

import amqstomp
from amqstomp.exception import NotConnectedException

pytestmark = pytest.mark.timeout(120)


class Calls(amqstomp.ConnectionListener):
    """The connection callbacks heard, in order, and the bodies received."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = []
        self.bodies = []

    def _note(self, name: str) -> None:
        with self.lock:
            self.calls.append(name)

    def on_connected(self, frame) -> None:
        self._note("connected")

    def on_disconnected(self) -> None:
        self._note("disconnected")

    def on_transport_interrupted(self) -> None:
        self._note("transport_interrupted")

    def on_message(self, frame) -> None:
        with self.lock:
            self.bodies.append(frame.body)

    def names(self):
        with self.lock:
            return list(self.calls)


@pytest.mark.parametrize("fault", ["never answers", "resets"])
def test_connect_without_wait_goes_on_to_the_next_broker(fault, activemq_persistent, tcp_proxy_factory):
    backup = tuple(activemq_persistent.host_and_ports[0])
    first = tcp_proxy_factory(backup)
    if fault == "never answers":
        first.stall()  # the socket is accepted, no byte comes back
    else:
        first.refuse(True, mode="reset")  # accepted, then reset at once
    calls = Calls()
    # timeout=4 s over two brokers: the silent one has 2 s (its share), a send waits 4 s
    conn = amqstomp.Connection12([first.address, backup], auto_reconnect=True, timeout=4,
                                 reconnect_attempts_max=-1)
    conn.set_listener("calls", calls)
    try:
        conn.connect("admin", "admin")  # no wait: returns; the first socket is the failover loop's
        q = "/queue/amqstomp-nowait-" + uuid.uuid4().hex[:12]
        conn.subscribe(q, id="s1", ack="auto", receipt="sub-1")  # waits (timeout) for a connection
        conn.wait_for_receipt("sub-1", 15)
        conn.send(q, "hello", receipt="send-1")
        conn.wait_for_receipt("send-1", 15)  # the broker that answered has it
        assert conn.transport.current_host_and_port == backup
        assert wait_until(lambda: calls.bodies == ["hello"], 15), calls.bodies
        assert first.accepted >= 1  # the first broker was tried first
        # the first connection: no interruption heard, no end; one on_connected, from the backup
        assert calls.names() == ["connected"], calls.names()
    finally:
        conn.disconnect()


def test_connect_without_wait_to_a_broker_that_never_answers_is_heard_lost(activemq_persistent, tcp_proxy_factory):
    silent = tcp_proxy_factory(tuple(activemq_persistent.host_and_ports[0]))
    silent.stall()
    calls = Calls()
    conn = amqstomp.Connection12([silent.address], timeout=1)  # no auto_reconnect
    conn.set_listener("calls", calls)
    try:
        conn.connect("admin", "admin")  # returns: CONNECT written
        assert wait_until(lambda: "disconnected" in calls.names(), 15), \
            "the connection stayed on a broker that never answered CONNECT"
        assert calls.names() == ["disconnected"]
        assert not conn.is_connected()
        assert "no CONNECTED frame within 1 s" in conn.transport.close_reason, conn.transport.close_reason
        with pytest.raises(NotConnectedException):
            conn.send("/queue/amqstomp-nowait-lost", "never sent")
    finally:
        conn.disconnect()


def test_connect_without_wait_ends_as_a_reconnect_gives_up_when_no_broker_answers(
        activemq_persistent, tcp_proxy_factory):
    silent = tcp_proxy_factory(tuple(activemq_persistent.host_and_ports[0]))
    silent.stall()
    calls = Calls()
    conn = amqstomp.Connection12([silent.address], auto_reconnect=True, timeout=1, reconnect_attempts_max=1)
    conn.set_listener("calls", calls)
    try:
        conn.connect("admin", "admin")
        # the first socket's deadline (1 s), one more attempt (1 s), then the loop gives up
        assert wait_until(lambda: "disconnected" in calls.names(), 15), \
            "the connection stayed on a broker that never answered CONNECT"
        assert calls.names() == ["disconnected"]  # once, as when a reconnect gives up
        assert silent.accepted >= 2
        with pytest.raises(NotConnectedException, match="gave up"):
            conn.send("/queue/amqstomp-nowait-lost", "never sent")
    finally:
        conn.disconnect()
