"""Regression tests for what a hostile tester found: fake peers on 127.0.0.1 that misbehave,
and misuse of the API. Each fake peer is bounded in time and stops by itself."""
import socket
import threading
import time
import uuid

import pytest

import amqstomp
from amqstomp.exception import ConnectionClosedException, FrameEncodeError

pytestmark = pytest.mark.timeout(60)

CONNECTED = b"CONNECTED\nversion:1.2\nserver:FakeBroker/1\nheart-beat:0,0\n\n\x00"


class FakePeer:
    """A one-connection STOMP 'broker' on 127.0.0.1: answers CONNECT with CONNECTED, then runs
    ``script(sock)``; closes after ``lifetime`` seconds at most."""

    def __init__(self, script, lifetime=20.0, connected=CONNECTED):
        self.connected = connected
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.port = self.server.getsockname()[1]
        self.script = script
        self.lifetime = lifetime
        #: set by :meth:`stop`: a script that holds the socket silent waits on it, not a fixed sleep
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.server.settimeout(self.lifetime)
        try:
            sock, _ = self.server.accept()
        except OSError:
            return
        sock.settimeout(self.lifetime)
        try:
            data = b""
            while b"\x00" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    return
                data += chunk
            sock.sendall(self.connected)
            self.script(sock)
        except OSError:
            pass
        finally:
            sock.close()
            self.server.close()

    def stop(self):
        self.stopped.set()
        self.server.close()
        self.thread.join(self.lifetime + 1)


class Events(amqstomp.ConnectionListener):
    def __init__(self):
        self.messages = []
        self.errors = []
        self.protocol_errors = []
        self.disconnected = threading.Event()

    def on_message(self, frame):
        self.messages.append(frame)

    def on_error(self, frame):
        self.errors.append(frame)

    def on_protocol_error(self, error):
        self.protocol_errors.append(error)

    def on_disconnected(self):
        self.disconnected.set()


def test_frames_before_garbage_in_one_segment_are_delivered():
    def script(sock):
        time.sleep(0.5)  # after connect() returned
        sock.sendall(b"MESSAGE\nmessage-id:1\nsubscription:1\ndestination:/queue/a\n\none\x00"
                     b"MESSAGE\nmessage-id:2\nsubscription:1\ndestination:/queue/a\n\ntwo\x00"
                     b"GARBAGE\n\n\x00")
        time.sleep(2)

    peer = FakePeer(script)
    events = Events()
    conn = amqstomp.Connection12([("127.0.0.1", peer.port)], auto_decode=False)
    conn.set_listener("e", events)
    conn.connect(wait=True, timeout=5)
    conn.subscribe("/queue/a", id=1)  # (a MESSAGE of a subscription never made reaches no listener)
    assert events.disconnected.wait(10)
    assert [f.body for f in events.messages] == [b"one", b"two"]
    # the client's own finding: on_protocol_error (the listeners get only the broker's frames)
    assert events.protocol_errors and "unknown command" in str(events.protocol_errors[0]) and not events.errors
    conn.disconnect()
    peer.stop()


def test_disconnect_is_bounded_when_the_peer_stops_reading():
    stop = threading.Event()

    def script(sock):
        stop.wait(20)  # never reads again

    peer = FakePeer(script)
    conn = amqstomp.Connection12([("127.0.0.1", peer.port)], timeout=3)
    conn.connect(wait=True)
    sender_error = []

    def flood():
        try:
            for _ in range(200):
                conn.send("/queue/a", b"x" * (1 << 20))
        except Exception as exc:  # the connection is closed under it
            sender_error.append(exc)

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    time.sleep(2)  # the socket buffers are full by now; the sender is blocked
    started = time.monotonic()
    conn.disconnect()
    assert time.monotonic() - started < 8
    sender.join(10)
    assert not sender.is_alive()
    assert sender_error and isinstance(sender_error[0], ConnectionClosedException)
    stop.set()
    peer.stop()


@pytest.mark.broker
def test_concurrent_connect_opens_one_socket(activemq):
    baseline = threading.active_count()
    for _ in range(3):
        conn = amqstomp.Connection12(activemq.host_and_ports)
        events = Events()
        conn.set_listener("e", events)
        failures = []

        def connect():
            try:
                conn.connect(wait=True, timeout=10)
            except Exception as exc:
                failures.append(exc)

        threads = [threading.Thread(target=connect) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert not failures
        assert conn.is_connected()
        assert threading.active_count() == baseline + 3  # one reader, dispatcher, timer
        conn.disconnect()
        assert not events.errors
    deadline = time.monotonic() + 10
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == baseline


@pytest.mark.broker
def test_listener_raising_system_exit_does_not_stop_dispatch(activemq):
    q = "/queue/hostile.%s" % uuid.uuid4().hex[:8]

    class Quitter(Events):
        def on_message(self, frame):
            super().on_message(frame)
            if len(self.messages) == 2:
                raise SystemExit("listener wants out")

    events = Quitter()
    conn = amqstomp.Connection12(activemq.host_and_ports)
    conn.set_listener("e", events)
    conn.connect(wait=True)
    conn.subscribe(q, id=1, ack="auto")
    for i in range(5):
        conn.send(q, "m%d" % i)
    deadline = time.monotonic() + 10
    while len(events.messages) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [f.body for f in events.messages] == ["m0", "m1", "m2", "m3", "m4"]
    conn.disconnect()


@pytest.mark.broker
def test_send_frame_refuses_a_body_that_is_not_bytes_or_str(activemq):
    conn = amqstomp.Connection12(activemq.host_and_ports)
    conn.connect(wait=True)
    try:
        for body in (12345, True, ["x"]):
            with pytest.raises(FrameEncodeError, match="body"):
                conn.send_frame("SEND", {"destination": "/queue/x"}, body)
        assert conn.is_connected()  # nothing was written
    finally:
        conn.disconnect()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.parametrize("how", ["unknown-id", "send_frame-subscribe"])
def test_messages_of_a_subscription_subscribe_did_not_make_are_bounded_too(how):
    """MESSAGEs of a subscription not registered by subscribe() (a SUBSCRIBE written with
    send_frame) count against a buffer bound: reading pauses, the client does not grow with
    the broker's backlog (issue 20, item 5: +141 MB for 300,000 frames before); those of an
    id the connection never used are dropped as they are read (nothing grows either)."""
    body = b"b" * 8192
    stop = threading.Event()
    pushed = [0]

    def script(sock):
        deadline = time.monotonic() + 6.0
        for i in range(30000):
            if stop.is_set() or time.monotonic() > deadline:
                return
            sock.sendall(b"MESSAGE\nsubscription:nobody\nmessage-id:m%d\ndestination:/queue/x\n"
                         b"content-length:%d\n\n%s\x00" % (i, len(body), body))
            pushed[0] += 1

    peer = FakePeer(script, lifetime=15.0)
    conn = amqstomp.Connection12([("127.0.0.1", peer.port)])
    seen = []

    class Slow(amqstomp.ConnectionListener):
        def on_message(self, frame):
            seen.append(1)
            time.sleep(0.002)

    conn.set_listener("slow", Slow())
    before = _rss_bytes()
    conn.connect(wait=True, timeout=10)
    if how == "send_frame-subscribe":
        conn.send_frame("SUBSCRIBE", {"destination": "/queue/x", "id": "nobody", "ack": "auto"})
    try:
        time.sleep(4.0)
        grown = _rss_bytes() - before
        assert pushed[0] > 1500, "the fake broker pushed only %d frames" % pushed[0]
        # 1000 messages of 8 KiB may wait for the listeners, plus the socket buffers
        assert grown < 60 * 1024 * 1024, "grew %.1f MB with %d frames pushed, %d seen" % (
            grown / 1e6, pushed[0], len(seen))
        if how == "unknown-id":  # dropped as they are read (the error path): none buffered, none seen
            assert seen == []
        else:
            assert pushed[0] < 29000, "the client read everything the fake broker sent: no back-pressure"
    finally:
        stop.set()
        conn.disconnect(timeout=5)
        peer.stop()


@pytest.mark.parametrize("value", ["-5,-5", "abc", "1000"])
def test_a_malformed_broker_heart_beat_keeps_the_clients_own_and_says_so(value, caplog):
    """CONNECTED ``heart-beat:-5,-5`` or ``abc`` turned heart-beats off silently (0,0): a broker that
    then fell silent was never noticed. Now the client keeps what it asked for, with a WARNING."""
    peer = FakePeer(lambda sock: peer.stopped.wait(8.0), lifetime=12.0,  # silent until stopped
                    connected=b"CONNECTED\nversion:1.2\nserver:FakeBroker/1\nheart-beat:%s\n\n\x00" % value.encode())
    conn = amqstomp.Connection12([("127.0.0.1", peer.port)], heartbeats=(1000, 1000))
    events = Events()
    conn.set_listener("e", events)
    try:
        with caplog.at_level("DEBUG", logger="amqstomp.subscription"):
            conn.connect(wait=True, timeout=10)
        assert conn.transport.heartbeats == (1000, 1000)
        assert any("heart-beat" in r.getMessage() and value in r.getMessage() for r in caplog.records), \
            [r.getMessage() for r in caplog.records]
        started = time.monotonic()
        assert events.disconnected.wait(2 * 1.0 * 1.5 + 1.5), "the silent broker was not noticed"
        assert time.monotonic() - started <= 2 * 1.0 * 1.5 + 1.0
    finally:
        conn.disconnect(timeout=2)
        peer.stop()


def test_a_message_before_connected_is_a_protocol_error_not_a_delivery():
    frame = b"MESSAGE\nsubscription:s\nmessage-id:early\ndestination:/queue/x\n\nearly\x00"
    peer = FakePeer(lambda sock: peer.stopped.wait(3.0), lifetime=10.0, connected=frame + CONNECTED)
    conn = amqstomp.Connection12([("127.0.0.1", peer.port)])
    events = Events()
    conn.set_listener("e", events)
    try:
        with pytest.raises(amqstomp.exception.ConnectFailedException, match="MESSAGE frame before CONNECTED"):
            conn.connect(wait=True, timeout=5)
        assert events.disconnected.wait(5)
        assert not events.messages
        assert events.protocol_errors and "before CONNECTED" in str(events.protocol_errors[0])
    finally:
        conn.disconnect(timeout=2)
        peer.stop()


class _ReceiptingPeer:
    """A fake broker's reading half: reads the client's frames, answers every
    ``receipt`` with a RECEIPT, notes the commands seen."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""
        self.commands = []

    def read_until(self, command, timeout=10.0):
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.2)
        while command not in self.commands and time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                return False
            self.buffer += chunk
            while b"\x00" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\x00", 1)
                lines = raw.lstrip(b"\r\n").split(b"\n")
                self.commands.append(lines[0].decode())
                for line in lines[1:]:
                    if line.startswith(b"receipt:"):
                        self.sock.sendall(b"RECEIPT\nreceipt-id:" + line[8:] + b"\n\n\x00")
        return command in self.commands


def _message(subscription, message_id, body):
    head = b"MESSAGE\nmessage-id:%s\ndestination:/queue/a\n" % message_id
    if subscription is not None:
        head += b"subscription:%s\n" % subscription
    return head + b"\n" + body + b"\x00"


def test_messages_for_an_unsubscribed_or_unknown_id_reach_no_listener(caplog):
    """A MESSAGE after UNSUBSCRIBE, or for an id this connection never subscribed,
    used to reach on_message; now it is dropped and logged with its id and
    message-id (WARNING for the unknown id; DEBUG for the unsubscribed one: in flight
    at a clean close, no error), and the connection stays up. A SUBSCRIBE written
    with send_frame and a STOMP 1.0-style MESSAGE without ``subscription`` are still
    delivered."""
    pushed = threading.Event()

    def script(sock):
        peer = _ReceiptingPeer(sock)
        if not peer.read_until("UNSUBSCRIBE"):
            return
        sock.sendall(_message(b"gone", b"m1", b"after-unsubscribe") + _message(b"ghost", b"m2", b"unknown")
                     + _message(b"raw", b"m3", b"raw") + _message(None, b"m4", b"no-subscription")
                     + _message(b"live", b"m5", b"live"))
        pushed.set()
        peer.read_until("DISCONNECT")

    peer = FakePeer(script)
    events = Events()
    conn = amqstomp.Connection12([("127.0.0.1", peer.port)], timeout=10)
    conn.set_listener("e", events)
    conn.connect(wait=True, timeout=5)
    try:
        with caplog.at_level("DEBUG", logger="amqstomp.subscription"):
            conn.subscribe("/queue/a", id="gone", ack="client-individual")
            conn.subscribe("/queue/b", id="live")
            conn.send_frame("SUBSCRIBE", {"destination": "/queue/c", "id": "raw", "ack": "auto"})
            conn.unsubscribe("gone")
            assert pushed.wait(10)
            deadline = time.monotonic() + 10
            while len(events.messages) < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.3)
        assert [f.body for f in events.messages] == ["raw", "no-subscription", "live"]
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        debug = [r.getMessage() for r in caplog.records if r.levelname == "DEBUG"]
        assert [line for line in warned if "ghost" in line and "m2" in line] and \
            not [line for line in warned if "gone" in line], warned
        assert any("gone" in line and "m1" in line and "UNSUBSCRIBE" in line for line in debug), debug
        assert conn.is_connected() and not events.errors and not events.protocol_errors
    finally:
        conn.disconnect()
        peer.stop()


@pytest.mark.broker
def test_messages_in_flight_at_unsubscribe_do_not_reach_on_message(activemq):
    """ActiveMQ: UNSUBSCRIBE while the broker's prefetched messages are still on
    their way; the ones read after it used to reach on_message (through the
    unregistered window). None does now, and the broker gets every one back."""
    queue = "/queue/hostile-unsub-" + uuid.uuid4().hex[:10]
    body = b"u" * 65536
    producer = amqstomp.Connection12(activemq.host_and_ports)
    producer.connect("admin", "admin", wait=True, timeout=15)
    for i in range(60):
        producer.send(queue, body, receipt="r-last" if i == 59 else None)
    producer.wait_for_receipt("r-last", 15)
    producer.disconnect()
    entered, release = threading.Event(), threading.Event()
    got = []

    class Holding(amqstomp.ConnectionListener):
        def on_message(self, frame):
            got.append(frame.headers["message-id"])
            entered.set()
            release.wait(15)

    conn = amqstomp.Connection12(activemq.host_and_ports, timeout=15)
    conn.set_listener("h", Holding())
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe(queue, id="s", ack="client-individual", prefetch_size=60, max_buffered=3)
        assert entered.wait(15)
        time.sleep(1.0)  # the buffer is full: the reader paused with most messages still in flight
        conn.unsubscribe("s")
        release.set()
        time.sleep(2.0)  # the rest is read now (reading resumes once the subscription closed)
        assert len(got) == 1, "%d messages reached on_message after UNSUBSCRIBE" % (len(got) - 1)
        assert conn.is_connected()
    finally:
        release.set()
        conn.disconnect()
    check = amqstomp.Connection12(activemq.host_and_ports)
    back = []

    class Count(amqstomp.ConnectionListener):
        def on_message(self, frame):
            back.append(1)

    check.set_listener("c", Count())
    check.connect("admin", "admin", wait=True, timeout=15)
    check.subscribe(queue, id="c", ack="auto")
    deadline = time.monotonic() + 15
    while len(back) < 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    check.disconnect()
    assert len(back) == 60  # client acks: every message went back to the queue


@pytest.mark.broker
def test_a_10_subscription_without_an_id_and_a_raw_subscribe_still_deliver(activemq):
    """The MESSAGEs that name no subscription made by subscribe() and still reach the
    listeners: STOMP 1.0's SUBSCRIBE without an id, a SUBSCRIBE written with send_frame."""
    queue = "/queue/hostile-noid-" + uuid.uuid4().hex[:10]
    events = Events()
    ten = amqstomp.Connection10(activemq.host_and_ports)
    ten.set_listener("e", events)
    ten.connect("admin", "admin", wait=True, timeout=15)
    raw = amqstomp.Connection12(activemq.host_and_ports)
    raw_events = Events()
    raw.set_listener("e", raw_events)
    raw.connect("admin", "admin", wait=True, timeout=15)
    try:
        ten.subscribe(queue + ".a", receipt="r-a")
        ten.wait_for_receipt("r-a", 10)
        raw.send_frame("SUBSCRIBE", {"destination": queue + ".b", "id": "raw-1", "ack": "auto", "receipt": "r-b"})
        raw.wait_for_receipt("r-b", 10)
        ten.send(queue + ".a", "to ten")
        raw.send(queue + ".b", "to raw")
        deadline = time.monotonic() + 10
        while (not events.messages or not raw_events.messages) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [f.body for f in events.messages] == ["to ten"]
        assert [f.body for f in raw_events.messages] == ["to raw"]
    finally:
        ten.disconnect()
        raw.disconnect()


GARBAGE = b"MESSAGE\nsubscription:1\nmessage-id:1\ncontent-length:zz\n\nhi\x00"


class _GarbageAfterConnected:
    """A 'broker' on 127.0.0.1 that answers every CONNECT with ``connected``, then sends ``then``
    (by default a MESSAGE whose content-length is not a number: a protocol error, the client
    drops the socket) and closes; it counts the connections. ``connected`` may be a list: the
    answer of each connection in turn, the last one for the rest. Accepts for ``lifetime`` s at most."""

    def __init__(self, connected=CONNECTED, lifetime=30.0, then=GARBAGE):
        self.connected = connected if isinstance(connected, list) else [connected]
        self.then = then
        self.count = 0
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(50)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.end = time.monotonic() + lifetime
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while time.monotonic() < self.end:
            try:
                sock, _ = self.server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            answer = self.connected[min(self.count, len(self.connected) - 1)]
            self.count += 1
            threading.Thread(target=self._serve, args=(sock, answer), daemon=True).start()

    def _serve(self, sock, answer):
        sock.settimeout(5)
        try:
            sock.recv(65536)
            sock.sendall(answer)
            time.sleep(0.05)
            sock.sendall(self.then)
            sock.recv(65536)  # until the client drops it
        except OSError:
            pass
        finally:
            sock.close()

    def stop(self):
        self.end = 0
        self.server.close()
        self.thread.join(5)


def test_connections_failing_right_after_connected_back_off_instead_of_a_storm():
    """Each socket fails just after CONNECTED: the reconnects back off as attempts that
    failed (141 sockets in 8 s before, without end) and the attempt limit ends them."""
    peer = _GarbageAfterConnected()
    conn = amqstomp.Connection12([("127.0.0.1", peer.port)], auto_reconnect=True, reconnect_attempts_max=-1,
                                 reconnect_sleep_initial=0.1, reconnect_sleep_increase=1.0,
                                 reconnect_sleep_jitter=0.0)
    try:
        conn.connect(wait=True, timeout=5)
        time.sleep(3.0)  # back-offs 0, 0.1, 0.2, 0.4, 0.8, 1.6 s: at most 7 sockets in 3 s
        assert 2 <= peer.count <= 8, peer.count
    finally:
        conn.disconnect(timeout=2)
        peer.stop()
    for api in ("stomp.py", "jms"):  # the attempt limit (3): a fourth quick loss ends the reconnects
        peer = _GarbageAfterConnected()
        events = Events()
        ended = threading.Event()
        if api == "stomp.py":
            conn = amqstomp.Connection12([("127.0.0.1", peer.port)], auto_reconnect=True,
                                         reconnect_attempts_max=3, reconnect_sleep_initial=0.05)
            conn.set_listener("e", events)
            conn.connect(wait=True, timeout=5)
            close = lambda: conn.disconnect(timeout=2)  # noqa: E731
            ended = events.disconnected
        else:
            from amqstomp.jms import ConnectionFactory
            connection = ConnectionFactory("failover:(stomp://127.0.0.1:%d)?initialReconnectDelay=50"
                                           "&maxReconnectAttempts=3" % peer.port).create_connection()
            connection.set_exception_listener(lambda exc: ended.set())
            close = connection.close
        try:
            assert ended.wait(15), (api, peer.count)
            time.sleep(0.5)
            assert peer.count == 4, (api, peer.count)  # the first connection and 3 attempts
        finally:
            close()
            peer.stop()


def test_a_connected_naming_a_version_not_offered_fails_the_connect_and_the_reconnect():
    """A CONNECTED saying version:9.9 to a client that offered 1.2 is a protocol error naming the
    version (it was taken, and conn.version said 1.2): on the first connection (both APIs) and
    on a failover reconnect."""
    from amqstomp.jms import ConnectionFactory
    wrong = CONNECTED.replace(b"version:1.2", b"version:9.9")
    peer = _GarbageAfterConnected(connected=wrong)
    try:
        conn = amqstomp.Connection12([("127.0.0.1", peer.port)])
        with pytest.raises(amqstomp.exception.ConnectFailedException, match="version '9.9'.*did not offer"):
            conn.connect(wait=True, timeout=5)
        conn.disconnect(timeout=2)
        with pytest.raises(amqstomp.exception.ConnectFailedException, match="version '9.9'.*did not offer"):
            ConnectionFactory("stomp://127.0.0.1:%d" % peer.port).create_connection()
    finally:
        peer.stop()
    # the first connection right (and dropped after a while), the reconnect wrong
    peer = _GarbageAfterConnected(connected=[CONNECTED, wrong], then=b"")
    events = Events()
    conn = amqstomp.Connection12([("127.0.0.1", peer.port)], auto_reconnect=True, reconnect_attempts_max=1,
                                 reconnect_sleep_initial=0.05)
    conn.set_listener("e", events)
    try:
        conn.connect(wait=True, timeout=5)
        assert conn.version == "1.2"
        assert events.disconnected.wait(15)  # the one reconnect failed: the attempts ran out
        assert peer.count == 2
        assert any("version '9.9'" in str(e) for e in events.protocol_errors), events.protocol_errors
        assert "version '9.9'" in str(conn.reconnector.gave_up), conn.reconnector.gave_up
    finally:
        conn.disconnect(timeout=2)
        peer.stop()
