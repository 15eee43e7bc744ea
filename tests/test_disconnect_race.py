"""A ``send()`` racing ``disconnect()`` on another thread (stomp.py API): no send
that returned normally may be missing on the broker, and the sends that lost the
race are refused with NotConnectedException.

Before the fix, DISCONNECT was written while the socket still counted as open:
SENDs accepted after it went out behind the DISCONNECT (ActiveMQ ignores them) or
were dropped at close, and their ``send()`` returned normally (thousands per run).
Now the DISCONNECT's write moves the socket to the core's CLOSING under the write
lock (:meth:`amqstomp._io.writer.LinkWriter.write_last`): every frame after it is
refused there.
"""
import threading
import time
import uuid
from typing import Any, Dict, List

import pytest

import amqstomp
from amqstomp.exception import NotConnectedException

#: the sender's bound: this many sends at most, or this many seconds
SEND_LIMIT = 500_000
SEND_S = 30.0


def _count_on(activemq: Any, destination: str, expected: int, timeout_s: float = 60.0) -> int:
    """How many messages ``destination`` holds: a fresh consumer (``ack:auto``) takes them
    until ``expected`` came and nothing more for 1 s, or nothing came for 3 s, within ``timeout_s``."""
    seen: List[int] = [0]
    last = [time.monotonic()]

    class Counter(amqstomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            seen[0] += 1
            last[0] = time.monotonic()

    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)])
    conn.set_listener("count", Counter())
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe(destination, id="count", ack="auto")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            quiet = time.monotonic() - last[0]
            if (seen[0] >= expected and quiet > 1.0) or quiet > 3.0:
                break
            time.sleep(0.1)
    finally:
        conn.disconnect()
    return seen[0]


@pytest.mark.timeout(180)
def test_a_send_racing_disconnect_is_on_the_broker_or_refused(activemq):
    destination = "/queue/amqstomp.test.discrace-" + uuid.uuid4().hex[:12]
    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)])
    conn.connect("admin", "admin", wait=True, timeout=15)
    result: Dict[str, Any] = {"ok": 0, "error": None}
    started = threading.Event()

    def sender() -> None:
        deadline = time.monotonic() + SEND_S
        try:
            for _ in range(SEND_LIMIT):
                if time.monotonic() > deadline:
                    return
                conn.send(destination, "x")
                result["ok"] += 1
                started.set()
        except Exception as exc:  # what ended the loop: the race's outcome
            result["error"] = exc

    thread = threading.Thread(target=sender, name="test-discrace-sender", daemon=True)
    thread.start()
    assert started.wait(10)
    time.sleep(0.5)
    conn.disconnect()
    thread.join(SEND_S + 10)
    assert not thread.is_alive()
    ok = result["ok"]
    assert ok < SEND_LIMIT, "the sender never met the disconnect"
    assert isinstance(result["error"], NotConnectedException), repr(result["error"])
    on_broker = _count_on(activemq, destination, ok)
    assert on_broker == ok, "%d sends returned normally, %d on the broker" % (ok, on_broker)


@pytest.mark.timeout(60)
def test_on_disconnecting_may_still_send(activemq):
    """stomp.py calls ``on_disconnecting`` before it writes DISCONNECT: a send from it goes out."""
    destination = "/queue/amqstomp.test.discrace-" + uuid.uuid4().hex[:12]
    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)])

    class Last(amqstomp.ConnectionListener):
        def on_disconnecting(self) -> None:
            conn.send(destination, "last words")

    conn.set_listener("last", Last())
    conn.connect("admin", "admin", wait=True, timeout=15)
    conn.disconnect()
    assert _count_on(activemq, destination, 1, timeout_s=10) == 1


@pytest.mark.timeout(90)
def test_an_ack_from_a_listener_while_disconnect_runs_is_refused(activemq, stall_proxy):
    """A ``client-individual`` listener that acknowledges once ``disconnect()`` began
    (the proxy holds the DISCONNECT's RECEIPT back, so the socket stays open for the
    connection's ``timeout``): AcknowledgeInterruptedError (nothing written, not
    silent; before, UnknownMessageError or written behind the DISCONNECT), and the
    broker still holds the message."""
    from amqstomp.exception import AcknowledgeInterruptedError

    destination = "/queue/amqstomp.test.discrace-" + uuid.uuid4().hex[:12]
    producer = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)])
    producer.connect("admin", "admin", wait=True, timeout=15)
    producer.send(destination, "one", receipt="sent")
    producer.disconnect()
    conn = amqstomp.Connection12(stall_proxy.host_and_ports, timeout=3)
    outcome: Dict[str, Any] = {}
    delivered = threading.Event()
    disconnecting = threading.Event()

    class Late(amqstomp.ConnectionListener):
        def on_disconnecting(self) -> None:
            disconnecting.set()

        def on_message(self, frame: Any) -> None:
            delivered.set()
            disconnecting.wait(20)
            try:
                conn.ack(frame.headers["ack"])
            except Exception as exc:
                outcome["error"] = exc
            else:
                outcome["error"] = None

    conn.set_listener("late", Late())
    conn.connect("admin", "admin", wait=True, timeout=15)
    conn.subscribe(destination, id="s", ack="client-individual")
    assert delivered.wait(15)
    stall_proxy.stall()  # no RECEIPT for the DISCONNECT: disconnect() waits its timeout, the socket CLOSING
    conn.disconnect()
    assert isinstance(outcome.get("error"), AcknowledgeInterruptedError), repr(outcome)
    assert "disconnect() began" in str(outcome["error"])
    stall_proxy.drop()  # the broker's end of the held socket: it takes the unacknowledged message back
    assert _count_on(activemq, destination, 1, timeout_s=10) == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("write", ["send_frame", "transport.send_frame", "transmit"])
def test_a_send_after_a_raw_disconnect_frame_is_refused(activemq, write):
    """A DISCONNECT the application writes itself (no receipt: stomp.py's ``send_frame``,
    the transport's, ``transmit``) is the socket's last frame as ``disconnect()``'s is: a
    send after it raises NotConnectedException, nothing is written behind it. Before,
    the send returned normally and the broker ignored it (STOMP 1.2 "DISCONNECT")."""
    from amqstomp.codec import Frame

    destination = "/queue/amqstomp.test.discrace-" + uuid.uuid4().hex[:12]
    conn = amqstomp.Connection12([("127.0.0.1", activemq.stomp_port)])
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.send(destination, "before", receipt="before")
        if write == "send_frame":
            conn.send_frame("DISCONNECT", {})
        elif write == "transport.send_frame":
            conn.transport.send_frame("DISCONNECT", {})
        else:
            conn.transport.transmit(Frame("DISCONNECT", {}))
        with pytest.raises(NotConnectedException):
            conn.send(destination, "after")
    finally:
        conn.disconnect()
    assert _count_on(activemq, destination, 1, timeout_s=10) == 1
