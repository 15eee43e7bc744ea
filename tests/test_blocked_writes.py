"""A peer that stops reading must not stop liveness: with the application's own
SEND blocked in a socket write (the proxy between client and broker stopped
reading and forwarding, both ways), the heart-beat receive check still fires and
the connection fails over to the next broker -- for both APIs and every ack mode.

The thread that decides liveness (the link's timer) never waits on a socket
write: the batched ACKs it sends are queued and written without blocking
(``Link.write_nowait``). Before that, the optimized-ACK timer took the write
lock held by the blocked ``send()`` and the heart-beat check never ran again.

Bound asserted (issue 20): the heart-beat timeout within 2 x interval x 1.5 +
0.5 s of the stall, and connected to the second broker within 1 s more.
"""
import threading
import time
import uuid

import pytest
from conftest import Collector, TransportTimes, fill_queue, wait_until

import amqstomp
import amqstomp.jms
import amqstomp as stomp

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

HB_MS = 1000
NOTICE_S = 2 * HB_MS / 1000.0 * 1.5 + 0.5  # the bound for the heart-beat timeout
FAILOVER_S = 1.0  # on the next broker within this much more
BODY = b"p" * 16384  # 16 KiB: a few sends fill the socket buffers


def queue_name(tag: str) -> str:
    return "/queue/amqstomp-bw-%s-%s" % (tag, uuid.uuid4().hex[:10])


def topic_name() -> str:
    """Where the producer sends: a topic nobody subscribes to, so the broker keeps
    nothing of it (a queue would fill the shared broker's memory for later tests)."""
    return "/topic/amqstomp-bw-out-%s" % uuid.uuid4().hex[:10]


class Recorder(Collector):
    def __init__(self) -> None:
        super().__init__()
        self.times = {}

    def on_transport_interrupted(self):
        self.times.setdefault("interrupted", time.monotonic())
        self._record("interrupted")

    def on_transport_resumed(self):
        self.times.setdefault("resumed", time.monotonic())
        self._record("resumed")


class Producer(threading.Thread):
    """Sends 16 KiB messages on the consumer's own connection until stopped;
    errors during the failover are counted, not raised."""

    def __init__(self, send) -> None:
        super().__init__(name="test-producer", daemon=True)
        self.send = send
        self.stop = threading.Event()
        self.sent = 0
        self.errors = 0

    def run(self) -> None:
        for _ in range(1000000):
            if self.stop.is_set():
                return
            try:
                self.send()
                self.sent += 1
            except Exception:
                self.errors += 1
                time.sleep(0.01)


def _stall_and_measure(proxy, rec, got, blocked, transport):
    """Stall the proxy once the consumer is busy and the producer blocked; returns
    (seconds from the silence to the heart-beat timeout, seconds from it to the
    resumed connection, what the stalled link says of its end: the client's own
    count of the silence when it decided, for a failure message). The silence begins
    at the stall, or at the client's last read of what the proxy forwarded before it
    (``transport.last_read`` of the stalled socket, ``transport.link_seq``), whichever
    is later: a loaded machine's reader may still be taking those bytes from its socket
    buffer after the stall (seen: 1.6 s, with the pure-Python codec), and every byte it
    reads shows the broker alive."""
    assert wait_until(lambda: len(got) >= 20, 30), len(got)
    proxy.refuse(True, mode="closed")  # the stalled broker's address answers no more
    stalled_seq, stalled_link = transport.link_seq, transport._link
    proxy.stall()  # done by the proxy's thread when it returns: nothing is forwarded after it
    stalled_at = time.monotonic()
    last_read = [0.0]

    def interrupted():
        if transport.link_seq == stalled_seq:  # (polled well within the 3 s of silence before the timeout)
            last_read[0] = max(last_read[0], transport.last_read)
        return rec.times.get("interrupted") is not None

    # the producer's send is now blocked in a socket write that cannot finish
    assert wait_until(interrupted, NOTICE_S + 5), rec.events[-8:]
    noticed = rec.times["interrupted"] - max(stalled_at, last_read[0])
    assert wait_until(lambda: rec.times.get("resumed") is not None, 15), rec.events[-8:]
    resumed = rec.times["resumed"] - rec.times["interrupted"]
    assert blocked(), "the producer sent nothing: the scenario did not happen"
    end = stalled_link.closed
    why = "the stalled link's end: %s; the silence began %.2f s after the stall" % (
        end.reason if end is not None else "none yet", max(0.0, last_read[0] - stalled_at))
    return noticed, resumed, why


# ------------------------------------------------------------------ stomp.py API

STOMPPY_MODES = [("client", True), ("client", False), ("client-individual", False), ("auto", False)]


@pytest.mark.compiled_pass_only  # blocked writes: the heart-beat timers and failover threads
@pytest.mark.parametrize("ack,optimize", STOMPPY_MODES, ids=["client-optimized", "client", "individual", "auto"])
def test_stomppy_a_peer_that_stops_reading_is_noticed_and_failed_over_with_the_producer_blocked(
        activemq, tcp_proxy_factory, ack, optimize):
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    q_in, q_out = queue_name("in"), topic_name()
    fill_queue(activemq, q_in, 600)
    direct = activemq.host_and_ports[0]
    conn = stomp.Connection12([proxy.address, direct], auto_reconnect=True, heartbeats=(HB_MS, HB_MS),
                              reconnect_sleep_initial=0.05, reconnect_attempts_max=-1, timeout=10)
    rec = Recorder()
    got = []

    class Slow(stomp.ConnectionListener):
        def on_message(self, frame):
            if ack != "auto":  # auto: a quick listener; a full buffer would hold the silence back
                time.sleep(0.02)
            got.append(frame.headers["message-id"])
            if ack != "auto" and not optimize:
                try:
                    conn.ack(frame.headers["ack"])
                except Exception:
                    pass  # a message of the lost socket: the broker redelivers it

    conn.set_listener("rec", rec)
    conn.set_listener("slow", Slow())
    conn.connect("admin", "admin", wait=True, timeout=15)
    assert conn.transport.current_host_and_port == proxy.address
    kwargs = {"optimize_acknowledge": True} if optimize else {}
    conn.subscribe(q_in, id="s1", ack=ack, prefetch_size=100, **kwargs)
    producer = Producer(lambda: conn.send(q_out, BODY))
    producer.start()
    try:
        noticed, resumed, why = _stall_and_measure(proxy, rec, got, lambda: producer.sent > 0, conn.transport)
        assert noticed <= NOTICE_S, "heart-beat timeout heard after %.2f s (bound %.2f s); %s" % (
            noticed, NOTICE_S, why)
        assert resumed <= FAILOVER_S, "on the next broker %.2f s after the loss" % resumed
        assert conn.transport.current_host_and_port == tuple(direct)
        # the consumer carries on from the second broker (ack:auto lost what the stalled
        # socket held: the broker acknowledged it at dispatch; fresh messages come)
        count = len(got)
        fill_queue(activemq, q_in, 20)
        assert wait_until(lambda: len(got) >= count + 20, 30), (count, len(got))
    finally:
        producer.stop.set()
        t0 = time.monotonic()
        conn.disconnect(timeout=5)
        took = time.monotonic() - t0
        producer.join(15)
        proxy.unstall()
    assert took < 10, "disconnect() took %.1f s" % took
    assert not producer.is_alive()


# ------------------------------------------------------------------ JMS API

JMS_MODES = [amqstomp.AUTO_ACKNOWLEDGE, amqstomp.DUPS_OK_ACKNOWLEDGE, amqstomp.CLIENT_ACKNOWLEDGE,
             amqstomp.INDIVIDUAL_ACKNOWLEDGE]


@pytest.mark.compiled_pass_only  # blocked writes: the heart-beat timers and failover threads
@pytest.mark.parametrize("mode", JMS_MODES, ids=["auto", "dups-ok", "client", "individual"])
def test_jms_a_peer_that_stops_reading_is_noticed_and_failed_over_with_the_producer_blocked(
        activemq, tcp_proxy_factory, mode):
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    q_in, q_out = queue_name("in").split("/")[-1], topic_name().split("/")[-1]
    fill_queue(activemq, "/queue/" + q_in, 600)
    # one socket for sends and consumption: the blocked producer holds the socket the ACKs use
    url = ("failover:(stomp://%s:%d,stomp://%s:%d)?randomize=false&initialReconnectDelay=10"
           "&maxReconnectDelay=100&amqstomp.separateProducerSocket=false"
           % (proxy.address + tuple(activemq.host_and_ports[0])))
    factory = amqstomp.ConnectionFactory(url, heartbeats=(HB_MS, HB_MS))
    events = TransportTimes()
    got = []
    with factory.create_connection(timeout_s=15) as conn:
        conn.set_transport_listener(events)
        session = conn.create_session(acknowledge_mode=mode)
        consumer = session.create_consumer(amqstomp.Queue(q_in + "?consumer.prefetchSize=100"))

        def on_message(message):
            time.sleep(0.02)
            got.append(message.message_id)
            if mode in (amqstomp.CLIENT_ACKNOWLEDGE, amqstomp.INDIVIDUAL_ACKNOWLEDGE):
                try:
                    message.acknowledge()
                except Exception:
                    pass  # a message of the lost socket: the broker redelivers it

        consumer.set_message_listener(on_message)
        conn.start()
        psession = conn.create_session()
        sender = psession.create_producer(amqstomp.Topic(q_out))
        producer = Producer(lambda: sender.send(BODY, delivery_mode=amqstomp.jms.NON_PERSISTENT))
        producer.start()
        try:
            noticed, resumed, why = _stall_and_measure(proxy, events, got, lambda: producer.sent > 0,
                                                       conn._state.consumer_link.transport)
            assert noticed <= NOTICE_S, "heart-beat timeout heard after %.2f s (bound %.2f s); %s" % (
                noticed, NOTICE_S, why)
            assert resumed <= FAILOVER_S, "on the next broker %.2f s after the loss" % resumed
            count = len(got)
            assert wait_until(lambda: len(got) >= count + 20, 30), (count, len(got))
        finally:
            producer.stop.set()
            t0 = time.monotonic()
            conn.close()
            took = time.monotonic() - t0
            producer.join(15)
            proxy.unstall()
    assert took < 10, "close() took %.1f s" % took
    assert not producer.is_alive()


# ------------------------------------------------------------------ a write with a timeout is bounded itself


@pytest.mark.parametrize("size", [4 << 20, 64 << 20])
def test_a_write_with_a_timeout_that_cannot_finish_closes_the_link_in_time(size):
    """``write_timeout`` bounds the write, not only the wait for the write lock: a DISCONNECT
    (or a close's ACK) written to a socket whose peer stopped reading returns within it and
    closes the link (the frame is cut: nothing else may follow on that socket)."""
    import socket

    from amqstomp._io.channel import PlainChannel
    from amqstomp._io.link import Link
    from amqstomp.exception import ConnectionClosedException

    ours, theirs = socket.socketpair()
    link = Link(PlainChannel(ours), ("127.0.0.1", 1), "1.2", 1, 1.5)
    outcome = []

    def write():
        try:
            link.write(b"x" * size, write_timeout=1.0)
            outcome.append("returned")
        except ConnectionClosedException as exc:
            outcome.append(exc)

    started = time.monotonic()
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(10)
    took = time.monotonic() - started
    try:
        assert not writer.is_alive(), "the write was still blocked after 10 s"
        assert isinstance(outcome[0], ConnectionClosedException), outcome
        assert "could not finish" in str(outcome[0])
        assert took < 2.5, took
        assert link.closed
    finally:
        link.scheduler.stop()
        ours.close()
        theirs.close()


def test_a_frame_is_logged_at_debug_once_debug_is_turned_on_at_run_time(caplog):
    """Driver.send_frame skips its DEBUG line through logging's own cache of isEnabledFor while
    DEBUG is off (a cached False: no call per frame); a level set at run time clears that cache,
    so the next frame is logged, and setting it back stops the lines again."""
    import logging
    import socket

    from amqstomp._io.channel import PlainChannel
    from amqstomp._io.driver import Driver
    from amqstomp._io.link import Link

    ours, theirs = socket.socketpair()
    link = Link(PlainChannel(ours), ("127.0.0.1", 1), "1.2", 1, 1.5)
    driver = Driver(None, None)  # type: ignore[arg-type]  # no socket is opened: the link is given
    driver._link = link
    logger = logging.getLogger("amqstomp.transport")
    saved = logger.level
    try:
        logger.setLevel(logging.INFO)
        caplog.set_level(logging.DEBUG, logger="amqstomp.other")  # a handler; not this logger's level
        for _ in range(2):
            driver.send_frame("ACK", {"id": "quiet"})
        logger.setLevel(logging.DEBUG)
        driver.send_frame("ACK", {"id": "shown"})
        logger.setLevel(logging.INFO)
        driver.send_frame("ACK", {"id": "quiet-again"})
        lines = [r.getMessage() for r in caplog.records if r.name == "amqstomp.transport"]
        assert [line for line in lines if "sending ACK" in line] == ["sending ACK {'id': 'shown'} (0 body bytes)"]
        theirs.settimeout(5.0)
        received = b""
        while received.count(b"\x00") < 4:
            received += theirs.recv(4096)
        assert received.count(b"ACK\n") == 4  # every frame written, logged or not
    finally:
        logger.setLevel(saved)
        link.scheduler.stop()
        ours.close()
        theirs.close()
