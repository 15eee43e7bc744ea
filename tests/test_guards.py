"""Nothing lost, nothing stalled, no false success: frames the broker would
refuse are refused before they are written, calls that name what this
connection does not have raise, every blocking call has a bound, secrets stay
out of reprs. Against a real ActiveMQ where the broker decides; a tiny fake
STOMP server (127.0.0.1) where a broker must misbehave."""
import logging
import socket
import threading
import time
import uuid
from typing import List

import pytest
from conftest import Collector, assert_still_usable, wait_until

import amqstomp as stomp
from amqstomp.exception import FrameLimitError, UnknownMessageError
from amqstomp.jms import ConnectionFactory, TextMessage

pytestmark = pytest.mark.timeout(90)


def queue_name() -> str:
    return "/queue/amqstomp-guard-" + uuid.uuid4().hex[:12]


class FakeBroker:
    """A STOMP server on 127.0.0.1 that answers CONNECT with CONNECTED (``server``
    as given) and nothing else: it reads and records every other frame, and
    answers none (no RECEIPT, no ERROR). ``frames`` holds the raw frames read."""

    def __init__(self, server: str = "fake/1.0", version: str = "1.2") -> None:
        self.server_name = server
        self.version = version
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.frames: List[bytes] = []
        self.closing = threading.Event()
        self.socks: List[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True, name="fake-broker")]
        self.threads[0].start()

    @property
    def url(self) -> str:
        return "stomp://127.0.0.1:%d" % self.port

    @property
    def host_and_ports(self):
        return [("127.0.0.1", self.port)]

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                sock, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.socks.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True, name="fake-broker-conn")
            self.threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(0.2)
        buf = b""
        while not self.closing.is_set():
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\0" in buf:
                frame, buf = buf.split(b"\0", 1)
                frame = frame.lstrip(b"\r\n")
                self.frames.append(frame)
                reply = self.answer(frame)
                if reply:
                    sock.sendall(reply)

    def answer(self, frame: bytes) -> bytes:
        """What the server writes back for ``frame`` (a subclass may answer more): CONNECTED
        for a CONNECT, nothing for the rest."""
        if frame.startswith((b"CONNECT", b"STOMP")):
            return b"CONNECTED\nversion:%s\nserver:%s\n\n\0" % (self.version.encode(), self.server_name.encode())
        return b""

    def commands(self) -> List[str]:
        return [f.split(b"\n", 1)[0].decode() for f in self.frames]

    def close(self) -> None:
        self.closing.set()
        self.listener.close()
        for sock in self.socks:
            try:
                sock.close()
            except OSError:
                pass
        for thread in self.threads:
            thread.join(5)


@pytest.fixture
def fake_broker():
    made: List[FakeBroker] = []

    def factory(**kwargs) -> FakeBroker:
        broker = FakeBroker(**kwargs)
        made.append(broker)
        return broker

    yield factory
    for broker in made:
        broker.close()


@pytest.fixture
def conn12(stomp_connect):
    return stomp_connect


def still_usable(conn, col) -> None:
    """The connection is open and a send still gets its RECEIPT."""
    assert_still_usable(conn, col, queue_name())


# --------------------------------------------------------------------------- 1. broker limits


def test_send_refuses_a_header_line_activemq_would_refuse_and_the_connection_lives(conn12):
    conn, col = conn12()
    q = queue_name()
    # "big:" + 10236 bytes = a 10240-byte line: the limit itself goes through
    conn.send(q, "fits", headers={"big": "v" * 10236}, receipt="r-fits")
    conn.wait_for_receipt("r-fits", 10)
    with pytest.raises(FrameLimitError) as info:
        conn.send(q, "too long", headers={"big": "v" * 10237})
    assert isinstance(info.value, ValueError)
    assert info.value.limit == "header line" and info.value.header == "big"
    assert info.value.maximum == 10240 and info.value.actual == 10241
    assert "'big'" in str(info.value) and "10240" in str(info.value)
    # escaping counts: 6000 colons are 12000 bytes on the wire (\c each)
    with pytest.raises(FrameLimitError):
        conn.send(q, "escaped", headers={"colons": ":" * 6000})
    still_usable(conn, col)


def test_send_refuses_more_headers_than_activemq_takes(conn12):
    conn, col = conn12()
    q = queue_name()
    fits = {"h%d" % i: "v" for i in range(997)}  # + destination, receipt, content-length = 1000
    conn.send(q, "fits", headers=fits, receipt="r-fits")
    conn.wait_for_receipt("r-fits", 10)
    too_many = {"h%d" % i: "v" for i in range(998)}  # 1001 headers
    with pytest.raises(FrameLimitError) as info:
        conn.send(q, "too many", headers=too_many, receipt="r-many")
    assert info.value.limit == "headers" and info.value.maximum == 1000 and info.value.actual == 1001
    still_usable(conn, col)


def test_send_refuses_a_frame_over_activemq_s_maximum_size(conn12):
    conn, col = conn12()
    with pytest.raises(FrameLimitError) as info:
        conn.send(queue_name(), b"x" * (100 * 1024 * 1024))  # the body alone; headers make it bigger
    assert info.value.limit == "frame size" and info.value.maximum == 100 * 1024 * 1024
    still_usable(conn, col)


def test_jms_send_refuses_what_activemq_would_refuse_sync_and_async(activemq):
    with ConnectionFactory(activemq.url).create_connection("admin", "admin") as connection:
        connection.start()
        session = connection.create_session()
        q = session.create_queue(queue_name()[len("/queue/"):])
        consumer = session.create_consumer(q)
        producer = session.create_producer(q)
        for persistent in (True, False):  # a sync send, an async send
            message = TextMessage("too long")
            message.set_property("big", "v" * 20000)
            with pytest.raises(FrameLimitError):
                producer.send(message, delivery_mode=2 if persistent else 1)
        producer.send(TextMessage("fine"))
        got = consumer.receive(10)
        assert got is not None and got.text == "fine"
        assert connection.failure is None


def test_a_broker_with_unknown_limits_gets_the_frame(fake_broker):
    broker = fake_broker(server="SomeBroker/1.0")
    conn = stomp.Connection12(broker.host_and_ports)
    conn.connect("admin", "admin", wait=True, timeout=10)
    try:
        conn.send("/queue/x", "big", headers={"big": "v" * 20000})
        assert wait_until(lambda: "SEND" in broker.commands(), 5)
    finally:
        conn.transport.close()


# --------------------------------------------------------------------------- 3. secrets in reprs


def test_reprs_mask_the_password(activemq):
    secret = "S3cret-" + uuid.uuid4().hex[:6]
    urls = [activemq.url + "?jms.password=%s&jms.userName=admin" % secret,
            "failover:(%s)?jms.password=%s&randomize=false" % (activemq.url, secret)]
    for url in urls:
        factory = ConnectionFactory(url)
        assert secret not in repr(factory) and secret not in str(factory)
        assert "jms.password=***" in repr(factory)
        assert secret not in repr(factory._resolved.uri)
        assert factory.options["password"] == secret  # the value itself is kept
        with factory.create_connection() as connection:
            assert secret not in repr(connection)
            session = connection.create_session()
            assert secret not in repr(session)
    factory = ConnectionFactory(activemq.url, password=secret)
    assert secret not in repr(factory)


def _chain(exc):
    """``exc`` and its causes, as str and repr (what a traceback shows)."""
    out = []
    while exc is not None:
        out += [str(exc), repr(exc)]
        exc = exc.__cause__ or exc.__context__
    return out


def test_a_cr_or_lf_in_a_connect_header_names_the_header_and_never_shows_a_secret(fake_broker, caplog):
    caplog.set_level(logging.DEBUG)
    broker = fake_broker()
    secret = "S3cret-" + uuid.uuid4().hex[:6]

    def stomp_py(login="u", passcode="p", vhost=None, headers=None, **options):
        conn = stomp.Connection12(broker.host_and_ports, vhost=vhost, **options)
        try:
            conn.connect(login, passcode, wait=True, timeout=10, headers=headers)
        finally:
            conn.disconnect()

    cases = [
        ("passcode", lambda: stomp_py(passcode=secret + "\nmore")),
        ("passcode", lambda: stomp_py(passcode=secret + "\r")),
        ("passcode", lambda: stomp_py(passcode=secret + "\n", auto_reconnect=True, reconnect_sleep_initial=0.01)),
        ("login", lambda: stomp_py(login="us\ner")),
        ("host", lambda: stomp_py(vhost="v\nh")),
        ("client-id", lambda: stomp_py(headers={"client-id": "c\nd"})),
        ("x-mine", lambda: stomp_py(headers={"x-mine": "a\rb"})),
        ("passcode", lambda: ConnectionFactory(broker.url).create_connection("u", secret + "\n")),
        ("login", lambda: ConnectionFactory(broker.url).create_connection("us\ner", "p")),
        ("client-id", lambda: ConnectionFactory(broker.url, client_id="c\nd").create_connection("u", "p")),
    ]
    for header, call in cases:
        with pytest.raises(stomp.exception.ConnectFailedException) as caught:
            call()
        texts = _chain(caught.value)
        assert "header %r" % header in texts[0] and "CR or LF" in texts[0], texts
        assert not any(secret in text for text in texts), texts
    # a frame with escaping: a CR in a STOMP 1.1 header
    for headers, named in (({"x-mine": "a\rb"}, "x-mine"), ({"passcode": secret + "\r"}, "passcode")):
        with pytest.raises(stomp.exception.FrameEncodeError) as caught:
            stomp.codec.encode_frame("SEND", dict(headers, destination="/queue/x"), b"", "1.1")
        assert "header %r" % named in str(caught.value) and secret not in repr(caught.value), caught.value
    assert not [r for r in caplog.records if secret in r.getMessage()
                or secret in str(r.args) or (r.exc_info and secret in repr(r.exc_info[1]))]


@pytest.mark.parametrize("keyword, value, error, named", [
    ("heart_beat_receive_scale", 0, ValueError, ">= 1"), ("heart_beat_receive_scale", -1, ValueError, ">= 1"),
    ("heart_beat_receive_scale", 0.99, ValueError, ">= 1"), ("heart_beat_receive_scale", float("nan"), ValueError, "nan"),
    ("heart_beat_receive_scale", float("inf"), ValueError, "inf"), ("heart_beat_receive_scale", "2", TypeError, "'2'"),
    ("auto_decode", "yes", TypeError, "'yes'"), ("auto_decode", None, TypeError, "None"),
    ("vhost", 5, TypeError, "5"), ("reconnect_attempts_max", "3", TypeError, "'3'"),
    ("reconnect_attempts_max", 3.0, TypeError, "3.0"), ("keepalive", "x", TypeError, "'x'"),
    ("keepalive", 1, TypeError, "1"), ("keepalive", ("linux",), ValueError, "takes 3"),
    ("keepalive", ("windows", 1), ValueError, "'linux', 'mac' or 'auto'"), ("keepalive", ("mac", -1), ValueError, "takes 1"),
])
def test_a_wrong_connection_keyword_is_refused_by_name(keyword, value, error, named):
    with pytest.raises(error) as caught:
        stomp.Connection12([("127.0.0.1", 61613)], **{keyword: value})
    assert keyword in str(caught.value) and named in str(caught.value), caught.value


@pytest.mark.parametrize("keyword, value", [
    ("heart_beat_receive_scale", 1), ("heart_beat_receive_scale", 1.0), ("heart_beat_receive_scale", 2.5),
    ("auto_decode", False), ("auto_decode", 0), ("auto_decode", 1), ("vhost", "/"), ("vhost", None),
    ("reconnect_attempts_max", -1), ("keepalive", True), ("keepalive", False), ("keepalive", ("auto",)),
    ("keepalive", ("linux", 60, 10, 3)), ("keepalive", ["linux", None, None, None]), ("keepalive", ("mac", 3)),
])
def test_what_stomp_py_users_pass_is_still_taken(keyword, value):
    stomp.Connection12([("127.0.0.1", 61613)], **{keyword: value})


# --------------------------------------------------------------------------- 4. bad hosts, huge timeouts


@pytest.mark.parametrize("entries, named", [
    ([(None, 61613)], "None"), ([(b"127.0.0.1", 61613)], "b'127.0.0.1'"), ([("", 61613)], "''"),
    ([(" ", 61613)], "' '"), (("127.0.0.1", 61613), "('127.0.0.1', 61613)"), ([("127.0.0.1", None)], "None"),
    ([("127.0.0.1", 0)], "port 0"), ([("127.0.0.1",)], "('127.0.0.1',)")])
def test_a_bad_host_or_port_is_refused_by_name_without_a_lookup(entries, named, monkeypatch):
    looked_up = []
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: looked_up.append(a) or 1 / 0)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: looked_up.append(a) or 1 / 0)
    with pytest.raises(ValueError) as info:
        conn = stomp.Connection12(entries)
        conn.connect("admin", "admin", wait=True, timeout=5)
    assert named in str(info.value), str(info.value)
    assert not looked_up


@pytest.mark.parametrize("url", [None, b"stomp://127.0.0.1:61613", "", "stomp://:61613", "failover:(stomp://:61613)"])
def test_a_jms_factory_refuses_a_bad_url_or_host(url):
    with pytest.raises(ValueError) as info:
        ConnectionFactory(url)
    assert ("no host" in str(info.value)) or repr(url) in str(info.value)


def test_huge_timeouts_wait_instead_of_raising_overflow(activemq):
    conn = stomp.Connection12(activemq.host_and_ports, timeout=1e12)
    conn.connect("admin", "admin", wait=True, timeout=1e12)
    try:
        q = queue_name()
        conn.send(q, "x", receipt="r-huge")
        assert conn.wait_for_receipt("r-huge", timeout=1e12).cmd == "RECEIPT"
        waiting = stomp.WaitingListener("r-2")
        conn.set_listener("waiting", waiting)
        conn.send(q, "y", receipt="r-2")
        assert waiting.wait_on_receipt(1e12)
        # a timer a long way off does not kill the timer thread: the next one still runs
        conn.transport.call_later(1e12, lambda: None)
        fired = threading.Event()
        conn.transport.call_later(0.05, fired.set)
        assert fired.wait(5)
    finally:
        conn.disconnect()
    plain = stomp.Connection12(activemq.host_and_ports)
    plain.connect("admin", "admin", wait=True, timeout=float(10 ** 12))
    plain.disconnect()


def test_huge_jms_timeouts_wait_instead_of_raising_overflow(activemq):
    big = 10 ** 15  # ms
    factory = ConnectionFactory(activemq.url + "?connectionTimeout=%d&jms.closeTimeout=%d&jms.sendTimeout=%d"
                                "&jms.redeliveryPolicy.redeliveryDelay=%d" % (big, big, big, big))
    connection = factory.create_connection("admin", "admin", timeout_s=1e12)
    try:
        connection.start()
        session = connection.create_session()
        q = session.create_queue(queue_name()[len("/queue/"):])
        consumer = session.create_consumer(q)
        producer = session.create_producer(q)
        producer.send(TextMessage("one"))  # persistent: waits for its receipt, sendTimeout huge
        producer.send(TextMessage("two"))
        assert consumer.receive(1e12).text == "one"
        assert consumer.receive(float("inf")).text == "two"
        assert consumer.receive(0.1) is None
    finally:
        connection.close()
    failover = ConnectionFactory("failover:(%s)?timeout=%d&maxReconnectDelay=%d" % (activemq.url, big, big))
    failover.create_connection("admin", "admin", timeout_s=1e12).close()


# --------------------------------------------------------------------------- 8. subscribe's ack header


class SendSpy:
    """A listener that records every frame sent (``on_send``)."""

    def __init__(self) -> None:
        self.sent: List = []

    def on_send(self, frame) -> None:
        self.sent.append((frame.cmd, dict(frame.headers)))

    def subscribes(self):
        return [headers for cmd, headers in self.sent if cmd == "SUBSCRIBE"]

    def watch(self, driver) -> None:
        """Record every frame ``driver`` (a JMS link's :class:`amqstomp._io.driver.Driver`,
        which has no stomp.py listeners) writes, through its ``frame_hook``."""
        def hook(cmd, headers, body, write_timeout, defer, head, link_seq, nowait):
            self.sent.append((cmd, dict(headers or {})))
            return driver.send_frame(cmd, headers, body, write_timeout, defer, head, link_seq, nowait, hooks=False)
        driver.frame_hook = hook


def test_an_ack_header_wins_over_the_default_keyword_on_the_wire(activemq, conn12):
    q = queue_name()
    conn, col = conn12()
    spy = SendSpy()
    conn.set_listener("spy", spy)
    conn.subscribe(q, "ci", headers={"ack": "client-individual"}, receipt="r-ci")
    conn.wait_for_receipt("r-ci", 10)
    assert spy.subscribes()[-1]["ack"] == "client-individual"
    assert conn.subscriptions.get("ci").ack == "client-individual"
    sender, _ = conn12()
    for body in ("first", "second"):
        sender.send(q, body, receipt="s-" + body)
        sender.wait_for_receipt("s-" + body, 10)
    first, second = col.wait_messages(2)
    assert [first.body, second.body] == ["first", "second"]
    conn.ack(second.headers["ack"], receipt="a-second")  # not the first one
    conn.wait_for_receipt("a-second", 10)
    conn.disconnect()
    # client-individual on the broker: the unacked first message comes back, the acked second does not
    # (ack:auto would have lost both; ack:client would have acked both with the second's ACK)
    again, col2 = conn12()
    again.subscribe(q, "check", ack="auto", receipt="r-check")
    again.wait_for_receipt("r-check", 10)
    assert [m.body for m in col2.wait_messages(1)] == ["first"]
    time.sleep(0.5)
    assert [m.body for m in col2.messages] == ["first"]
    assert col2.messages[0].headers.get("redelivered") == "true"


def test_subscribe_arguments_given_twice_must_agree(activemq, conn12):
    conn, col = conn12()
    q = queue_name()
    for kwargs in ({"ack": "client", "headers": {"ack": "auto"}},
                   {"ack": "auto", "headers": {"ack": "client-individual"}},
                   {"headers": {"id": "other"}},
                   {"headers": {"destination": q + "-other"}}):
        with pytest.raises(ValueError):
            conn.subscribe(q, "twice", **kwargs)
        assert conn.subscriptions.get("twice") is None
    conn.subscribe(q, "same", ack="client", headers={"ack": "client", "id": "same", "destination": q},
                   receipt="r-same")
    conn.wait_for_receipt("r-same", 10)
    assert conn.subscriptions.get("same").ack == "client"
    ten = stomp.Connection10(activemq.host_and_ports)
    ten.connect("admin", "admin", wait=True, timeout=10)
    try:
        ten.subscribe(q, headers={"id": "from-header", "ack": "client"}, receipt="r-10")
        ten.wait_for_receipt("r-10", 10)
        assert ten.subscriptions.get("from-header").ack == "client"
    finally:
        ten.disconnect()


# --------------------------------------------------------------------------- 9. refused SUBSCRIBEs

BAD_SELECTOR = "this is (( not a selector"  # ActiveMQ answers ERROR and keeps the socket open


class FailoverRecorder(Collector):
    def on_transport_interrupted(self):
        self._record("interrupted")

    def on_transport_resumed(self):
        self._record("resumed")


def test_a_refused_subscribe_frees_its_id_and_is_not_replayed(activemq, conn12):
    q = queue_name()
    conn, col = conn12()
    conn.subscribe(q, "s1", ack="auto", selector=BAD_SELECTOR)  # no receipt asked by the caller
    assert col.wait_for(lambda c: len(c.errors) == 1, 10)
    assert wait_until(lambda: conn.subscriptions.get("s1") is None, 5)
    conn.subscribe(q, "s1", ack="client-individual", receipt="r-s1")  # the id is free again
    conn.wait_for_receipt("r-s1", 10)
    conn.send(q, "hello", receipt="r-send")
    conn.wait_for_receipt("r-send", 10)
    (msg,) = col.wait_messages(1)
    assert msg.headers["subscription"] == "s1" and msg.body == "hello"
    conn.ack(msg.headers["ack"])
    # a refusal that answers the caller's own receipt unregisters it too
    conn.subscribe(q, "s2", ack="auto", selector=BAD_SELECTOR, receipt="r-s2")
    with pytest.raises(stomp.exception.BrokerError):
        conn.wait_for_receipt("r-s2", 10)
    assert wait_until(lambda: conn.subscriptions.get("s2") is None, 5)


def test_a_refused_subscribe_is_not_replayed_after_a_reconnect(activemq):
    from amqstomp.testing import TcpProxy

    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        conn = stomp.Connection12([proxy.address], auto_reconnect=True, heartbeats=(1000, 1000),
                                  reconnect_sleep_initial=0.05, reconnect_attempts_max=-1, timeout=20)
        rec = FailoverRecorder()
        spy = SendSpy()
        conn.set_listener("rec", rec)
        conn.set_listener("spy", spy)
        conn.connect("admin", "admin", wait=True, timeout=15)
        try:
            q = queue_name()
            conn.subscribe(q, "bad", ack="auto", selector=BAD_SELECTOR)
            assert rec.wait_for(lambda c: len(c.errors) == 1, 10)
            assert wait_until(lambda: conn.subscriptions.get("bad") is None, 5)
            conn.subscribe(q, "good", ack="auto", receipt="r-good")
            conn.wait_for_receipt("r-good", 10)
            before = len(spy.subscribes())
            proxy.cut()
            assert rec.wait_for(lambda c: c.events.count("resumed") == 1, 15)
            assert wait_until(lambda: conn.subscriptions.get("good") is not None
                              and len(spy.subscribes()) > before, 10)
            time.sleep(0.5)
            replayed = [h["id"] for h in spy.subscribes()[before:]]
            assert replayed == ["good"], replayed
            assert len(rec.errors) == 1
            producer = stomp.Connection12(activemq.host_and_ports)
            producer.connect("admin", "admin", wait=True, timeout=10)
            producer.send(q, "after the cut")
            producer.disconnect()
            assert [m.body for m in rec.wait_messages(1)] == ["after the cut"]
        finally:
            conn.disconnect()


def test_jms_a_refused_consumer_leaves_nothing_registered_or_replayed(activemq):
    from amqstomp.exception import BrokerError
    from amqstomp.testing import TcpProxy

    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        factory = ConnectionFactory("failover:(stomp://127.0.0.1:%d)?initialReconnectDelay=50" % proxy.address[1],
                                    client_id="guard-" + uuid.uuid4().hex[:8])
        reported = []
        with factory.create_connection("admin", "admin") as connection:
            connection.set_exception_listener(reported.append)
            spy = SendSpy()
            link = connection._state.consumer_link
            spy.watch(link.transport)
            connection.start()
            session = connection.create_session()
            queue = session.create_queue(queue_name()[len("/queue/"):])
            topic = session.create_topic("guard.topic." + uuid.uuid4().hex[:8])
            with pytest.raises(BrokerError):
                session.create_consumer(queue, selector=BAD_SELECTOR)
            with pytest.raises(BrokerError):
                session.create_durable_subscriber(topic, "durable", selector=BAD_SELECTOR)
            assert len(link.manager) == 0
            durable = session.create_durable_subscriber(topic, "durable")  # the name is free again
            good = session.create_consumer(queue)
            assert len(link.manager) == 2
            before = len(spy.subscribes())
            proxy.cut()
            assert wait_until(lambda: len(spy.subscribes()) >= before + 2, 15)
            time.sleep(0.5)
            replayed = sorted(h["id"] for h in spy.subscribes()[before:])
            assert replayed == sorted([durable.subscription_id, good.subscription_id])
            assert not reported, reported
            producer = session.create_producer(queue)
            producer.send(TextMessage("after the cut"))
            got = good.receive(10)
            assert got is not None and got.text == "after the cut"
            durable.close()
            session.unsubscribe("durable")


def test_jms_a_selector_that_is_not_a_str_is_refused_before_anything_is_sent(activemq):
    """selector=5 went to the broker as is and came back as 'BrokerError: ... ERROR: 5'; now a
    TypeError naming it, for every entry that takes a selector, and no frame written."""
    from amqstomp.jms import FanInConsumer

    factory = ConnectionFactory(activemq.url, client_id="guard-" + uuid.uuid4().hex[:8])
    with factory.create_connection() as connection:
        spy = SendSpy()
        spy.watch(connection._state.consumer_link.transport)
        session = connection.create_session()
        queue = session.create_queue(queue_name()[len("/queue/"):])
        topic = session.create_topic("guard.topic." + uuid.uuid4().hex[:8])
        for selector in (5, b"a = 1", 0, ["a = 1"]):
            for call in (lambda: session.create_consumer(queue, selector=selector),
                         lambda: session.create_durable_subscriber(topic, "d", selector),
                         lambda: session.create_browser(queue, selector=selector),
                         lambda: FanInConsumer([activemq.url], queue, selector=selector)):
                with pytest.raises(TypeError, match=r"selector must be a JMS selector \(str\) or None, got "):
                    call()
        assert spy.sent == []
        assert len(connection._state.consumer_link.manager) == 0
        assert session.create_consumer(queue, selector="a = 1").selector == "a = 1"  # still usable


# --------------------------------------------------------------------------- 2. unknown transactions, unknown acks


def test_commit_or_abort_of_a_transaction_never_begun_raises_and_sends_nothing(activemq, conn12):
    from amqstomp.exception import UnknownTransactionError

    conn, col = conn12()
    spy = SendSpy()
    conn.set_listener("spy", spy)
    for call in (conn.commit, conn.abort):
        with pytest.raises(UnknownTransactionError) as info:
            call("never-begun")
        assert isinstance(info.value, ValueError) and "never-begun" in str(info.value)
    assert not [cmd for cmd, _ in spy.sent if cmd in ("COMMIT", "ABORT")]
    q = queue_name()
    tx = conn.begin()
    conn.send(q, "in tx", transaction=tx)
    conn.commit(tx)
    with pytest.raises(UnknownTransactionError):  # ended already
        conn.commit(tx)
    with pytest.raises(UnknownTransactionError):
        conn.abort(tx)
    conn.send_frame("BEGIN", {"transaction": "raw"})  # a BEGIN sent by hand counts too
    conn.abort("raw")
    still_usable(conn, col)  # no ERROR came: nothing unknown reached the broker
    conn.subscribe(q, "s", ack="auto", receipt="r-s")
    conn.wait_for_receipt("r-s", 10)
    assert [m.body for m in col.wait_messages(1)] == ["in tx"]
    conn.disconnect()
    conn.connect("admin", "admin", wait=True, timeout=10)
    tx2 = conn.begin()
    conn.disconnect()
    conn.connect("admin", "admin", wait=True, timeout=10)
    with pytest.raises(UnknownTransactionError):  # began before the connection was opened again
        conn.commit(tx2)


def test_ack_of_an_id_never_received_gets_the_broker_s_error_with_a_receipt(conn12):
    """With ``receipt=`` on a raw ACK frame (send_frame bypasses the check) the
    broker's ERROR for an id this connection never received reaches the caller;
    the connection carries on."""
    conn, col = conn12()
    conn.send_frame("ACK", {"id": "never-received", "receipt": "r-ack"})
    with pytest.raises(stomp.exception.BrokerError) as info:
        conn.wait_for_receipt("r-ack", 10)
    assert "Unexpected ACK" in str(info.value)


def test_ack_of_an_id_never_received_raises(conn12):
    conn, col = conn12()
    with pytest.raises(UnknownMessageError, match="nothing sent"):
        conn.ack("never-received")  # ActiveMQ answered ERROR 'Unexpected ACK' that only on_error saw
    time.sleep(0.5)
    assert col.errors == [] and conn.is_connected()


# --------------------------------------------------------------------------- 7. stomp.py's 3 reconnect attempts


def _attempt_warnings(caplog):
    return [r for r in caplog.records if r.name == "amqstomp.connection" and r.levelname == "WARNING"
            and "reconnect_attempts_max" in r.getMessage()]


@pytest.mark.parametrize("explicit", [False, True])
def test_giving_up_on_stomp_py_s_default_attempts_warns_once_with_what_to_set(activemq, caplog, explicit):
    import logging

    from amqstomp.testing import TcpProxy

    caplog.set_level(logging.WARNING, logger="amqstomp.connection")
    kwargs = {"reconnect_attempts_max": 3} if explicit else {}
    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        conn = stomp.Connection12([proxy.address], auto_reconnect=True, reconnect_sleep_initial=0.01,
                                  reconnect_sleep_max=0.05, timeout=5, **kwargs)
        rec = FailoverRecorder()
        conn.set_listener("rec", rec)
        try:
            for round_ in (1, 2):  # the second give-up on the same connection says nothing more
                conn.connect("admin", "admin", wait=True, timeout=10)
                proxy.refuse(True, mode="closed")
                proxy.cut()
                assert rec.wait_for(lambda c: c.events.count("disconnected") == round_, 15), rec.events
                proxy.refuse(False)
            warnings = _attempt_warnings(caplog)
            if explicit:
                assert warnings == []
            else:
                assert len(warnings) == 1, [w.getMessage() for w in warnings]
                assert "reconnect_attempts_max=-1" in warnings[0].getMessage()
        finally:
            conn.disconnect()


# --------------------------------------------------------------------------- 6. a send's receipt never comes


def test_jms_send_timeout_defaults_to_a_bound():
    assert ConnectionFactory("stomp://127.0.0.1:61613").options["send_timeout_ms"] == 30000
    assert ConnectionFactory("stomp://127.0.0.1:61613?jms.sendTimeout=0").options["send_timeout_ms"] == 0


def _send_in_thread(producer, message):
    outcome = {}

    def run():
        started = time.monotonic()
        try:
            producer.send(message)
            outcome["result"] = "returned"
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            outcome["result"] = exc
        outcome["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True, name="test-send")
    thread.start()
    return thread, outcome


def test_jms_persistent_send_to_a_broker_that_never_answers_times_out(fake_broker):
    from amqstomp.exception import ReceiptTimeout, StompException

    broker = fake_broker()
    factory = ConnectionFactory(broker.url, send_timeout_ms=400, close_timeout_ms=300)
    with factory.create_connection("admin", "admin") as connection:
        session = connection.create_session()
        producer = session.create_producer(session.create_queue("never.answered"))
        thread, outcome = _send_in_thread(producer, TextMessage("lost?"))
        thread.join(10)
        assert not thread.is_alive(), "send() still blocked"
        assert isinstance(outcome["result"], ReceiptTimeout), outcome
        assert 0.35 <= outcome["elapsed"] < 3, outcome
        assert "SEND" in broker.commands()  # it was written; the broker never answered
        tx = connection.create_session(transacted=True)
        tx.create_producer(tx.create_queue("never.answered")).send(TextMessage("in tx"))
        started = time.monotonic()
        with pytest.raises(StompException):  # in doubt: no RECEIPT for the COMMIT
            tx.commit()
        assert time.monotonic() - started < 3


@pytest.mark.compiled_pass_only  # the default 30 s send timeout: a timer above the codec
@pytest.mark.timeout(120)
def test_jms_persistent_send_with_default_options_is_bounded(fake_broker):
    from amqstomp.exception import ReceiptTimeout

    broker = fake_broker()
    factory = ConnectionFactory(broker.url, close_timeout_ms=300)  # sendTimeout: the default
    with factory.create_connection("admin", "admin") as connection:
        session = connection.create_session()
        producer = session.create_producer(session.create_queue("never.answered"))
        thread, outcome = _send_in_thread(producer, TextMessage("lost?"))
        thread.join(45)
        assert not thread.is_alive(), "send() still blocked after 45 s"
        assert isinstance(outcome["result"], ReceiptTimeout), outcome
        assert 29 <= outcome["elapsed"] < 40, outcome


# --------------------------------------------------------------------------- 5. a consumer against a stalled broker


@pytest.mark.compiled_pass_only  # receipt timeouts against a stalled proxy: timers above the codec
@pytest.mark.timeout(120)
def test_jms_create_consumer_on_a_stalled_broker_honours_the_timeout(activemq):
    from amqstomp.exception import ReceiptTimeout
    from amqstomp.testing import TcpProxy

    with TcpProxy(activemq.host_and_ports[0]) as proxy:
        url = "stomp://127.0.0.1:%d" % proxy.address[1]
        for factory, call_timeout, bound in ((ConnectionFactory(url), 1.0, 1.0),  # the caller's
                                             (ConnectionFactory(url, send_timeout_ms=1500), None, 1.5)):
            with factory.create_connection("admin", "admin") as connection:
                session = connection.create_session()
                queue = session.create_queue(queue_name()[len("/queue/"):])
                proxy.stall()
                try:
                    for make in (lambda: session.create_consumer(queue, timeout_s=call_timeout),
                                 lambda: session.create_browser(queue, timeout=bound)):
                        started = time.monotonic()
                        with pytest.raises(ReceiptTimeout):
                            make()
                        elapsed = time.monotonic() - started
                        assert bound * 0.9 <= elapsed < bound + 2, elapsed
                    assert len(connection._state.consumer_link.manager) == 0
                finally:
                    proxy.unstall()
                consumer = session.create_consumer(queue)  # the connection carries on
                session.create_producer(queue).send(TextMessage("after the stall"))
                connection.start()
                got = None
                deadline = time.monotonic() + 10
                while got is None or got.text != "after the stall":  # one stalled SUBSCRIBE may take some
                    assert time.monotonic() < deadline
                    got = consumer.receive(1)
    with ConnectionFactory(activemq.url).create_connection() as connection:
        with pytest.raises(ValueError):
            connection.create_session().create_consumer("/queue/x", timeout_s=-1)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ack_twice_or_after_a_cumulative_ack_raises_and_the_right_ones_go_out(activemq, version):
    """client-individual: a second ACK of one message is refused; client
    (cumulative): the ACK of a newer message acknowledges the older ones, whose
    own ACK is then refused (ActiveMQ: ERROR 'Unexpected ACK received', and on
    1.0/1.1 with an unknown id it closed the connection)."""
    import uuid as _uuid

    import amqstomp

    from conftest import Collector, wait_until

    cls = {"1.1": amqstomp.Connection11, "1.2": amqstomp.Connection12}[version]
    conn = cls(activemq.host_and_ports)
    col = Collector()
    conn.set_listener("c", col)
    conn.connect("admin", "admin", wait=True, timeout=15)
    q = "/queue/guards-" + _uuid.uuid4().hex[:10]

    def ack(frame):
        if version == "1.2":
            conn.ack(frame.headers["ack"])
        else:
            conn.ack(frame.headers["message-id"], frame.headers["subscription"])

    try:
        conn.subscribe(q, id="ind", ack="client-individual")
        conn.send(q, "one")
        assert wait_until(lambda: len(col.messages) == 1, 10)
        ack(col.messages[0])
        with pytest.raises(UnknownMessageError):
            ack(col.messages[0])
        conn.unsubscribe("ind")
        q2 = q + "-cum"
        conn.subscribe(q2, id="cum", ack="client")
        for body in ("a", "b", "c"):
            conn.send(q2, body)
        assert wait_until(lambda: len(col.messages) == 4, 10)
        a, b, c = col.messages[1:4]
        ack(b)  # cumulative: a and b
        with pytest.raises(UnknownMessageError):
            ack(a)
        ack(c)
        time.sleep(0.5)
        assert col.errors == [] and conn.is_connected()
    finally:
        conn.disconnect()
