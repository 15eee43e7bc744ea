"""STOMP over WebSocket (amqstomp.WSConnection, stomp.py's stomp.adapter.ws) against a real
broker's WebSocket endpoint: RabbitMQ's rabbitmq_web_stomp, enabled on loopback ports by the
session (fixture ``rabbitmq_web_stomp``) -- Debian's ActiveMQ 5.17 has no ws:// transport
(test_activemq_ws_connector says why, or runs against one where the broker has it).

Destinations are topics (RabbitMQ deletes a topic subscription's queue with it), so the
machine's RabbitMQ keeps nothing; the broker's prefetch window (prefetch-count) shows that
ACKs reach it: without them delivery stops after the window.
"""
import os
import socket
import re
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

import amqstomp
from amqstomp.exception import (
    ConfigurationError,
    ConnectFailedException,
    FrameEncodeError,
    WebSocketHandshakeError,
    WebSocketProtocolError,
    WebSocketUnavailableError,
)
from amqstomp._core.limits import MAX_RECEIVED_FRAME_BYTES
from amqstomp.testing import ActiveMQBroker, BrokerNotAvailable
from conftest import Collector, wait_until

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Listener(Collector):
    def on_transport_interrupted(self):
        self._record("interrupted")

    def on_transport_resumed(self):
        self._record("resumed")


def _topic():
    return "/topic/ws-test-%s" % uuid.uuid4().hex[:10]


@pytest.fixture
def ws_conn(rabbitmq_web_stomp):
    """``make(url=None, **WSConnection options)`` -> (connection, listener), connected;
    every one is disconnected at the end."""
    made = []

    def make(url=None, connect=True, **options):
        options.setdefault("vhost", rabbitmq_web_stomp.vhost)
        options.setdefault("timeout", 20)
        conn = amqstomp.WSConnection([url or rabbitmq_web_stomp.url], **options)
        listener = Listener()
        conn.set_listener("", listener)
        made.append(conn)
        if connect:
            conn.connect(rabbitmq_web_stomp.login, rabbitmq_web_stomp.passcode, wait=True)
        return conn, listener

    yield make
    for conn in made:
        try:
            conn.disconnect()
        except Exception:
            pass


def _subscribe(conn, destination, **options):
    receipt = "sub-%s" % uuid.uuid4().hex[:6]
    conn.subscribe(destination, id=1, receipt=receipt, **options)
    conn.wait_for_receipt(receipt, timeout=20)


# --------------------------------------------------------------------------- send / receive, acks


def test_send_and_receive_over_websocket(ws_conn, rabbitmq_web_stomp):
    conn, listener = ws_conn()
    assert conn.transport.ws_url() == rabbitmq_web_stomp.url
    assert listener.connected_frame.headers["server"].startswith("RabbitMQ")
    topic = _topic()
    _subscribe(conn, topic, ack="auto")
    bodies = ["plain", "héllo wörld", "x" * 70000, "nul\x00inside"]
    for body in bodies:
        conn.send(topic, body)
    got = listener.wait_messages(len(bodies), timeout=20)
    assert [m.body for m in got] == bodies  # order, a 70 kB frame, a NUL (content-length)
    assert all(m.headers["destination"] == topic for m in got)


@pytest.mark.parametrize("mode", ["client-individual", "client", "optimize"])
def test_acks_reach_the_broker(ws_conn, mode):
    """prefetch 5, 30 messages: the broker sends past the window only when the ACKs
    written over the WebSocket arrive."""
    conn, listener = ws_conn()
    topic = _topic()
    options = dict(ack="client", optimize_acknowledge=True) if mode == "optimize" else dict(ack=mode)
    _subscribe(conn, topic, prefetch_size=5, **options)
    for i in range(30):
        conn.send(topic, "m%d" % i)
    acked = 0
    deadline = time.monotonic() + 30
    while acked < 30 and time.monotonic() < deadline:
        got = listener.wait_messages(acked + 1, timeout=5)
        if len(got) <= acked:
            break
        if mode == "client-individual":
            for frame in got[acked:]:
                conn.ack(frame.headers["ack"])
        elif mode == "client":
            conn.ack(got[-1].headers["ack"])  # cumulative: one ACK for all before it
        acked = len(got)
    assert [m.body for m in listener.messages] == ["m%d" % i for i in range(30)]


def test_without_acks_delivery_stops_at_the_window(ws_conn):
    """The control for test_acks_reach_the_broker: no ACK, no sixth message."""
    conn, listener = ws_conn()
    topic = _topic()
    _subscribe(conn, topic, ack="client-individual", prefetch_size=5)
    for i in range(10):
        conn.send(topic, "m%d" % i)
    assert len(listener.wait_messages(5, timeout=10)) == 5
    time.sleep(1.0)
    assert len(listener.messages) == 5


def test_nack_redelivers(ws_conn):
    conn, listener = ws_conn()
    topic = _topic()
    _subscribe(conn, topic, ack="client-individual")
    conn.send(topic, "again")
    first = listener.wait_messages(1)[0]
    conn.nack(first.headers["ack"])  # RabbitMQ requeues it
    second = listener.wait_messages(2)[1]
    assert second.body == "again" and second.headers.get("redelivered") == "true"
    conn.ack(second.headers["ack"])


# --------------------------------------------------------------------------- message types


def test_text_messages_refuse_a_body_that_is_not_utf8(ws_conn):
    conn, listener = ws_conn(auto_decode=False)
    topic = _topic()
    _subscribe(conn, topic)
    with pytest.raises(FrameEncodeError, match="UTF-8.*binary_mode=True"):
        conn.send(topic, b"\xff\xfe binary")
    conn.send(topic, b"still usable")  # nothing was written: the connection carries on
    assert listener.wait_messages(1)[0].body == b"still usable"


def test_binary_mode_carries_any_bytes(ws_conn):
    conn, listener = ws_conn(binary_mode=True, auto_decode=False)
    topic = _topic()
    _subscribe(conn, topic)
    body = bytes(range(256)) * 4
    conn.send(topic, body)
    assert listener.wait_messages(1)[0].body == body


# --------------------------------------------------------------------------- heart-beats


def test_heartbeats_both_ways_over_websocket(ws_conn, rabbitmq_web_stomp, tcp_proxy_factory):
    """Through a proxy that counts bytes: while idle, the client's beats (each a masked
    one-byte message, 7 bytes on the wire) go up and the broker's come down; both sides
    keep the connection."""
    proxy = tcp_proxy_factory(rabbitmq_web_stomp.host_and_port)
    url = "ws://127.0.0.1:%d%s" % (proxy.address[1], rabbitmq_web_stomp.path)
    conn, listener = ws_conn(url, heartbeats=(400, 400))
    hb = conn.transport.heartbeats
    assert hb[0] and hb[1], hb
    up, down = proxy.bytes_to_broker, proxy.bytes_to_client
    time.sleep(3.0)
    assert conn.is_connected()
    beats_up = proxy.bytes_to_broker - up
    assert beats_up >= 7 * 5, beats_up  # half the interval: >= 6 beats in 3 s
    assert proxy.bytes_to_client - down >= 3 * 3  # the broker's: 3-byte frames
    assert listener.heartbeats >= 3


def test_a_silent_broker_is_detected_by_heartbeats(ws_conn, rabbitmq_web_stomp, tcp_proxy_factory):
    proxy = tcp_proxy_factory(rabbitmq_web_stomp.host_and_port)
    url = "ws://127.0.0.1:%d%s" % (proxy.address[1], rabbitmq_web_stomp.path)
    conn, listener = ws_conn(url, heartbeats=(400, 400))
    proxy.stall()
    assert listener.wait_event("heartbeat_timeout", timeout=10)
    assert listener.wait_event("disconnected", timeout=10)
    assert not conn.is_connected()


# --------------------------------------------------------------------------- failover


def test_failover_over_websocket(ws_conn, rabbitmq_web_stomp, tcp_proxy_factory):
    proxy = tcp_proxy_factory(rabbitmq_web_stomp.host_and_port)
    url = "ws://127.0.0.1:%d%s" % (proxy.address[1], rabbitmq_web_stomp.path)
    conn, listener = ws_conn(url, auto_reconnect=True, reconnect_attempts_max=-1, heartbeats=(1000, 1000))
    topic = _topic()
    _subscribe(conn, topic)
    conn.send(topic, "before")
    assert listener.wait_messages(1)[0].body == "before"
    assert proxy.cut() >= 1
    assert listener.wait_event("interrupted", timeout=20)
    assert listener.wait_event("resumed", timeout=30), listener.events
    assert proxy.accepted >= 2
    conn.send(topic, "after")  # the subscription was replayed on the new WebSocket
    assert [m.body for m in listener.wait_messages(2, timeout=20)] == ["before", "after"]
    assert "disconnected" not in listener.events


# --------------------------------------------------------------------------- TLS


def test_wss_through_the_one_tls_helper(ws_conn, rabbitmq_web_stomp):
    if rabbitmq_web_stomp.tls_url is None:
        pytest.skip("the web-STOMP plugin was running already, without this session's TLS listener")
    target = ("127.0.0.1", rabbitmq_web_stomp.tls_port)
    # a wss:// URL verifies with the system's CAs: the test certificate is refused
    conn, _ = ws_conn(rabbitmq_web_stomp.tls_url, connect=False, reconnect_attempts_max=1)
    with pytest.raises(ConnectFailedException, match="CERTIFICATE_VERIFY_FAILED"):
        conn.connect("guest", "guest", wait=True)
    # set_ssl with its CA: verified, host name included
    conn, listener = ws_conn(rabbitmq_web_stomp.tls_url, connect=False)
    conn.set_ssl([target], ca_certs=rabbitmq_web_stomp.ca_certs)
    conn.connect("guest", "guest", wait=True)
    assert conn.transport.ws_url() == rabbitmq_web_stomp.tls_url
    topic = _topic()
    _subscribe(conn, topic)
    conn.send(topic, "over TLS")
    assert listener.wait_messages(1)[0].body == "over TLS"


# --------------------------------------------------------------------------- errors


def test_upgrade_refused_names_status_and_reason(ws_conn, rabbitmq_web_stomp):
    conn, _ = ws_conn("ws://127.0.0.1:%d/no-such-path" % rabbitmq_web_stomp.port, connect=False,
                      reconnect_attempts_max=1)
    with pytest.raises(ConnectFailedException) as info:
        conn.connect("guest", "guest", wait=True)
    assert "refused: HTTP 404 Not Found" in str(info.value)
    cause = info.value.__cause__
    assert isinstance(cause, WebSocketHandshakeError) and cause.status == 404, repr(cause)
    assert cause.url.endswith("/no-such-path")


def test_a_stomp_port_is_not_a_websocket(activemq):
    """ActiveMQ's STOMP port reads the upgrade request as the start of a frame and waits."""
    conn = amqstomp.WSConnection(["ws://127.0.0.1:%d/" % activemq.stomp_port], reconnect_attempts_max=1, timeout=2)
    with pytest.raises(ConnectFailedException, match="no answer within 2 s .*a plain STOMP port"):
        conn.connect(wait=True)


def test_a_server_that_does_not_speak_http(rabbitmq_web_stomp):
    """RabbitMQ's AMQP port (DESIGN.md: 127.0.0.1:5672) answers anything else with its protocol
    header and closes (a reset, as the request was not read: the header may be lost with it)."""
    conn = amqstomp.WSConnection(["ws://127.0.0.1:5672/"], reconnect_attempts_max=1, timeout=10)
    with pytest.raises(ConnectFailedException) as info:
        conn.connect(wait=True)
    assert isinstance(info.value.__cause__, WebSocketHandshakeError), repr(info.value.__cause__)
    text = str(info.value)
    assert "WebSocket upgrade to ws://127.0.0.1:5672/: " in text
    assert ("did not answer with HTTP" in text and "b'AMQP" in text) or "the connection failed before an answer" in text


def test_an_upgrade_without_answer_times_out(ws_conn, rabbitmq_web_stomp, tcp_proxy_factory):
    proxy = tcp_proxy_factory(rabbitmq_web_stomp.host_and_port)
    proxy.stall()  # the request never reaches the broker
    url = "ws://127.0.0.1:%d%s" % (proxy.address[1], rabbitmq_web_stomp.path)
    conn, _ = ws_conn(url, connect=False, reconnect_attempts_max=1, timeout=1.5)
    started = time.monotonic()
    with pytest.raises(ConnectFailedException, match="no answer within 1.5 s"):
        conn.connect("guest", "guest", wait=True)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("url, text", [
    ("http://127.0.0.1:61614/", "scheme isn't ws or wss"),
    ("ws://", "hostname isn't provided"),
    ("ws://127.0.0.1:99999/", "out of range"),
    ("ws://user:pw@127.0.0.1/", "user and password go in connect"),
])
def test_bad_urls(url, text):
    with pytest.raises(ConfigurationError, match="bad WebSocket URL.*" + text):
        amqstomp.WSConnection([url])


def test_bad_options():
    with pytest.raises(ConfigurationError, match="ws_path"):
        amqstomp.WSConnection([("127.0.0.1", 1)], ws_path="no-slash")
    with pytest.raises(ConfigurationError, match="handshake header"):
        amqstomp.WSConnection([("127.0.0.1", 1)], header=["no colon"])


def _python(code):
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=90)


def test_without_the_library_it_says_which_extra():
    proc = _python("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "websockets" or name.startswith("websockets."):
                    raise ImportError("blocked for the test: " + name)
        sys.meta_path.insert(0, Block())
        import amqstomp, amqstomp.adapter.ws            # importing needs no WebSocket library
        from amqstomp.exception import WebSocketUnavailableError
        try:
            amqstomp.WSConnection([("127.0.0.1", 61614)])
        except WebSocketUnavailableError as exc:
            assert isinstance(exc, ImportError)
            print("RAISED", exc)
        amqstomp.Connection([("127.0.0.1", 61613)])     # the plain connection does not care
    """)
    assert proc.returncode == 0, proc.stderr
    assert "RAISED" in proc.stdout and "pip install 'amqstomp[ws]'" in proc.stdout, proc.stdout


def test_a_stomp_py_websocket_program_runs_unchanged(rabbitmq_web_stomp):
    """stomp.py's own API after install_as_stomp(): stomp.WSConnection with
    host_and_ports, ws_path and a TestListener, as its users write it."""
    proc = _python("""
        import logging
        import sys
        logging.basicConfig(level=logging.INFO)  # a failure shows the broker's close code
        import amqstomp
        amqstomp.install_as_stomp()
        import stomp
        from stomp.listener import TestListener
        from stomp.adapter.ws import WSStompConnection, WSTransport
        conn = stomp.WSConnection([("127.0.0.1", %d)], ws_path="/ws", vhost="/")
        assert isinstance(conn, WSStompConnection) and isinstance(conn.transport, WSTransport)
        listener = TestListener("r1")
        conn.set_listener("", listener)
        conn.connect("guest", "guest", wait=True)
        conn.subscribe("/topic/ws-stomppy-program", id=1, ack="auto")
        conn.send("/topic/ws-stomppy-program", "from a stomp.py program", receipt="r1")
        listener.wait_for_message()
        headers, body = listener.get_latest_message()
        # one write: the listener prints its events from the dispatcher thread meanwhile
        sys.stdout.write("GOT %%s %%s\\n" %% (body, listener.message_list and len(listener.message_list)))
        conn.disconnect()
    """ % rabbitmq_web_stomp.port)
    assert proc.returncode == 0, proc.stderr
    assert "GOT from a stomp.py program" in proc.stdout, proc.stdout


# --------------------------------------------------------------------------- ActiveMQ


def test_activemq_ws_connector():
    """ActiveMQBroker(ws=True): with activemq-http on the broker's class path it opens a ws://
    connector and STOMP runs over it; Debian's package has none, and the helper says so before
    it starts anything."""
    why = ActiveMQBroker.ws_available()
    if why is not None:
        assert "activemq-http" in why and "Debian" in why
        with pytest.raises(BrokerNotAvailable, match="no ws:// transport"):
            ActiveMQBroker(ws=True).start()
        return
    with ActiveMQBroker(ws=True) as broker:  # pragma: no cover - an ActiveMQ with activemq-http
        conn = amqstomp.WSConnection([broker.ws_url], timeout=20)
        listener = Listener()
        conn.set_listener("", listener)
        conn.connect(wait=True)
        _subscribe(conn, "/queue/ws-amq", ack="client-individual")
        conn.send("/queue/ws-amq", "over ActiveMQ's ws://")
        frame = listener.wait_messages(1)[0]
        conn.ack(frame.headers["ack"])
        assert frame.body == "over ActiveMQ's ws://"
        conn.disconnect()


def test_activemq_config_gets_the_ws_connector(tmp_path):
    from amqstomp.testing._config import render_activemq_xml

    broker = ActiveMQBroker(ws=True)
    xml = render_activemq_xml(broker, str(tmp_path))
    assert '<transportConnector name="ws" uri="ws://127.0.0.1:%d"/>' % broker.ws_port in xml
    assert broker.ws_url == "ws://127.0.0.1:%d/" % broker.ws_port
    assert "name=\"ws\"" not in render_activemq_xml(ActiveMQBroker(), str(tmp_path))


# --------------------------------------------------------------------------- the channel on its own


class _Peer:
    """The server end of a socketpair (or of an upgraded connection: ``proto``, the
    server protocol that did the upgrade), parsed by websockets' own server protocol."""

    def __init__(self, ws, sock, proto=None):
        self.ws, self.sock = ws, sock
        self.proto = proto or ws.server.ServerProtocol(max_size=None, state=ws.protocol.State.OPEN)

    def frames(self, want, timeout=5.0):
        self.sock.settimeout(timeout)
        got = []
        while len(got) < want:
            self.proto.receive_data(self.sock.recv(65536))
            got += [f for f in self.proto.events_received()]
        return got

    def send(self, *frames):
        for frame in frames:
            self.proto.send_frame(frame)
        self.sock.sendall(b"".join(self.proto.data_to_send()))


@pytest.fixture
def channel_pair():
    from amqstomp._io.channel import PlainChannel
    from amqstomp._io.websocket import WebSocketChannel, require_websockets

    ws = require_websockets()
    import websockets.server  # noqa: F401  (the peer)

    a, b = socket.socketpair()
    client = ws.client.ClientProtocol(ws.uri.parse_uri("ws://127.0.0.1/ws"), max_size=None,
                                      state=ws.protocol.State.OPEN)
    channel = WebSocketChannel(PlainChannel(a), client, False, "ws://127.0.0.1/ws")
    yield ws, channel, _Peer(ws, b)
    a.close()
    b.close()


def test_one_stomp_frame_per_message_and_no_coalescing(channel_pair):
    """ActiveMQ's StompSocket parses one frame per text message: the link must not join
    frames on a WebSocket (it does on TCP), and every write is one masked text message."""
    from amqstomp._io.link import Link

    ws, channel, peer = channel_pair
    link = Link(channel, ("127.0.0.1", 1), "1.2", 1, 1.5)
    try:
        assert not link.can_defer
        frames = [b"SEND\ndestination:/queue/a\n\nbody %d\x00" % i for i in range(3)]
        for data in frames:
            link.write(data)
        assert channel.try_send(b"\n")
        got = peer.frames(4)
        assert [f.opcode for f in got] == [ws.frames.Opcode.TEXT] * 4
        assert [bytes(f.data) for f in got] == frames + [b"\n"]
    finally:
        link.scheduler.stop()


def test_pings_are_answered_and_a_close_ends_the_stream(channel_pair):
    """The reader (recv) never writes: the pong waits for a writer or flush_owed (the link's
    timer thread, told through call_when_owed); of pongs still waiting only the newest goes (RFC 6455
    5.5.3); the broker's Close ends the stream and is answered (5.5.1)."""
    ws, channel, peer = channel_pair
    Frame, Op = ws.frames.Frame, ws.frames.Opcode
    told = []
    channel.call_when_owed(lambda: told.append(1))
    peer.send(Frame(Op.TEXT, b"MESSAGE\n\n\x00"), Frame(Op.PING, b"p1"), Frame(Op.PING, b"p2"),
              Frame(Op.TEXT, b"\n"))
    data = b""
    while len(data) < len(b"MESSAGE\n\n\x00\n"):
        data += channel.recv(65536)
    assert data == b"MESSAGE\n\n\x00\n"  # the payloads, in order; the pings are no STOMP bytes
    assert told == [1]
    peer.sock.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.sock.recv(1)  # recv wrote nothing
    assert channel.flush_owed() is False  # all written
    pong = peer.frames(1)[0]
    assert pong.opcode is Op.PONG and bytes(pong.data) == b"p2"
    peer.send(Frame(Op.CLOSE, ws.frames.Close(1001, "going away").serialize()))
    assert channel.recv(65536) == b""
    assert (channel.close_code, channel.close_reason) == (1001, "going away")
    assert told == [1, 1]
    assert channel.flush_owed() is False
    echo = peer.frames(1)[0]
    assert echo.opcode is Op.CLOSE  # RFC 6455 5.5.1: the close is answered


def test_a_protocol_error_from_the_broker_is_a_lost_connection(channel_pair):
    ws, channel, peer = channel_pair
    peer.sock.sendall(b"\x81\x85abcd")  # a masked frame from a server: RFC 6455 5.1 forbids it
    with pytest.raises(WebSocketProtocolError, match="WebSocket protocol error.*close code 1002") as caught:
        channel.recv(65536)
    assert caught.value.close_code == 1002
    channel.flush_owed()
    close = peer.frames(1)[0]
    assert close.opcode is ws.frames.Opcode.CLOSE and ws.frames.Close.parse(close.data).code == 1002


def test_urls_give_each_broker_its_path_and_tls():
    """Paths and wss:// from URLs, per broker, also for the 127.0.0.1 entry tried first for
    a URL that names this machine (try_loopback_connect); (host, port) pairs take ws_path."""
    host = socket.gethostname()
    conn = amqstomp.WSConnection(["wss://%s:61619/stomp" % host, "ws://127.0.0.2:15674/ws?x=1", ("127.0.0.3", 80)],
                                 ws_path="/default")
    transport = conn.transport
    urls = [transport.ws_url(hp) for hp in transport.host_and_ports]
    if host not in ("localhost", "127.0.0.1"):
        assert urls[0] == "wss://127.0.0.1:61619/stomp"
    assert "wss://%s:61619/stomp" % host in urls
    assert "ws://127.0.0.2:15674/ws?x=1" in urls and "ws://127.0.0.3:80/default" in urls


# --------------------------------------------------------------------------- hostile WebSocket peers

WS_CONNECTED = b"CONNECTED\nversion:1.2\nserver:FakeBroker/1\nheart-beat:%d,%d\n\n\x00"


class FakeWebSocketServer:
    """A one-connection WebSocket 'broker' on 127.0.0.1 for hostile-peer tests: a thread
    with a plain socket that does the HTTP upgrade (websockets' own ``ServerProtocol``),
    answers the STOMP CONNECT with CONNECTED (``heart_beat`` = its header's (cx, cy)), then
    runs ``script(peer)`` (a :class:`_Peer`; ``peer.sock`` for raw bytes). Everything is
    bounded: the socket times out after ``lifetime`` s, and the connection is closed when the
    script returns or :meth:`stop` is called. ``rcvbuf`` (bytes) shrinks the server's
    receive buffer (a peer that stops reading fills it sooner)."""

    def __init__(self, script, heart_beat=(0, 0), lifetime=30.0, rcvbuf=None):
        from amqstomp._io.websocket import require_websockets

        self.ws = require_websockets()
        import websockets.server  # noqa: F401  (the peer)

        self.server = socket.socket()
        if rcvbuf:
            self.server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # inherited by accept()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.port = self.server.getsockname()[1]
        self.url = "ws://127.0.0.1:%d/ws" % self.port
        self.script, self.heart_beat, self.lifetime = script, heart_beat, lifetime
        self.stopped = threading.Event()
        self.error = None  # what ended the script, if not its return
        self.thread = threading.Thread(target=self._run, name="fake-ws-server", daemon=True)
        self.thread.start()

    def _run(self):
        ws = self.ws
        self.server.settimeout(self.lifetime)
        try:
            sock, _ = self.server.accept()
        except OSError as exc:
            self.error = exc
            return
        sock.settimeout(self.lifetime)
        try:
            proto = ws.server.ServerProtocol(max_size=None)
            while proto.state is ws.protocol.State.CONNECTING:
                data = sock.recv(65536)
                if not data:
                    return
                proto.receive_data(data)
                for request in proto.events_received():
                    proto.send_response(proto.accept(request))
                sock.sendall(b"".join(proto.data_to_send()))
            peer = _Peer(ws, sock, proto)
            while not any(f.data.startswith((b"CONNECT", b"STOMP")) for f in peer.frames(1, self.lifetime)):
                pass
            peer.send(ws.frames.Frame(ws.frames.Opcode.TEXT, WS_CONNECTED % self.heart_beat))
            self.script(peer)
        except (OSError, AssertionError) as exc:
            self.error = exc
        finally:
            sock.close()
            self.server.close()

    def stop(self):
        self.stopped.set()
        self.server.close()
        self.thread.join(self.lifetime + 1)


def _rss_bytes():
    """This process's resident set size, in bytes (Linux: /proc/self/statm)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _client_threads():
    return [t for t in threading.enumerate() if t.name.startswith("amqstomp-")]


def _fake_ws_conn(server, **options):
    conn = amqstomp.WSConnection([server.url], timeout=5, auto_decode=False, **options)
    listener = Listener()
    conn.set_listener("", listener)
    conn.connect(wait=True)
    return conn, listener


@pytest.mark.timeout(90)
def test_a_huge_websocket_frame_fails_the_connection_at_the_stomp_limit():
    """A peer that declares a 1 TiB binary frame and streams into it: the client refuses the
    frame by its header (RFC 6455 7.4.1 close code 1009, the limit named) instead of
    buffering it whole; the process does not grow by more than the limit."""
    limit = MAX_RECEIVED_FRAME_BYTES
    cap, chunk = 320 << 20, b"\0" * (1 << 20)
    streamed = [0]

    def script(peer):
        time.sleep(0.3)  # after connect() returned
        peer.sock.sendall(b"\x82\x7f" + (1 << 40).to_bytes(8, "big"))  # FIN, binary, 64-bit length
        deadline = time.monotonic() + 20
        while streamed[0] < cap and time.monotonic() < deadline and not server.stopped.is_set():
            peer.sock.sendall(chunk)
            streamed[0] += len(chunk)

    server = FakeWebSocketServer(script)
    conn, listener = _fake_ws_conn(server)
    try:
        before = peak = _rss_bytes()
        deadline = time.monotonic() + 40
        while "disconnected" not in listener.events and time.monotonic() < deadline:
            peak = max(peak, _rss_bytes())
            time.sleep(0.01)
        peak = max(peak, _rss_bytes())
        growth = peak - before
        print("streamed %d MiB, RSS grew %.1f MB, reason: %s"
              % (streamed[0] >> 20, growth / 1e6, conn.transport.close_reason))
        assert "disconnected" in listener.events
        assert growth < limit + (32 << 20), growth
        assert streamed[0] < cap  # the client closed the connection, the peer did not stop
        reason = conn.transport.close_reason
        assert "1009" in reason and str(limit) in reason, reason
        error = listener.protocol_errors[0]  # on_protocol_error, then on_disconnected
        assert isinstance(error, WebSocketProtocolError) and (error.close_code, error.limit) == (1009, limit)
    finally:
        conn.disconnect()
        server.stop()


@pytest.mark.timeout(90)
def test_pings_from_a_peer_that_stops_reading_never_block_the_reader():
    """A peer that completes CONNECT (heart-beats 1000,1000; the client's 5000,1000), then
    sends pings (125-byte payloads, until the client stops taking them or 6 MB went) and
    never reads again: the
    client's reader keeps reading -- the MESSAGE sent after the pings arrives; it never
    writes a pong itself --, disconnect() (timeout=5) returns in time although nothing is
    read, and no thread of the client is left."""
    ping = b"\x89\x7d" + b"p" * 125  # FIN, ping, 125 bytes: the most a control frame holds
    message = b"MESSAGE\nsubscription:1\nmessage-id:after\ndestination:/queue/a\n\nlast\x00"
    sent = {"pings": 0, "message": False}

    def script(peer):
        while not any(f.data.startswith(b"SUBSCRIBE") for f in peer.frames(1)):
            pass  # from here on it reads nothing
        # a send that waits this long: the client stopped reading (a client that blocks writing
        # pongs never reads again; 1 s was too short for a reader starved of CPU under CI's load:
        # 44,000 pings went, then one send waited 1 s and the MESSAGE was never sent)
        peer.sock.settimeout(5.0)
        # a few hundred pongs fill what the peer's 4 KiB receive buffer and the client's send buffer
        # hold (a reader that writes pongs itself blocks then); 50,000 pings, at most 5 s, keep the
        # whole run well inside the client's 15 s give-up of a peer taking none of its bytes, also
        # when a loaded machine parses them slowly (200,000 pings for up to 10 s came near it)
        deadline = time.monotonic() + 5
        try:
            while sent["pings"] < 50_000 and time.monotonic() < deadline:
                peer.sock.sendall(ping * 1000)
                sent["pings"] += 1000
            peer.sock.sendall(bytes([0x81, len(message)]) + message)  # FIN, text, < 126 bytes
            sent["message"] = True
        except socket.timeout:
            pass
        server.stopped.wait(40)  # silent, reading nothing, until the test ends

    server = FakeWebSocketServer(script, heart_beat=(1000, 1000), rcvbuf=4096)
    before = set(threading.enumerate())
    # the client sends every 5000 ms (receives every 1000 ms): a peer that takes none of its bytes
    # (pongs) for 2 x 5000 x 1.5 = 15 s is given up (Link.heartbeat_send_tick), longer than the
    # pings take here (at most 10 s); with 1000 ms it could be given up (3 s) before the MESSAGE
    conn, listener = _fake_ws_conn(server, heartbeats=(5000, 1000))
    took = None
    try:
        conn.subscribe("/queue/a", id="1")
        got = listener.wait_messages(1, timeout=30)
        print("pings sent: %d, message sent: %s" % (sent["pings"], sent["message"]))
        assert [m.headers["message-id"] for m in got] == ["after"]  # the reader kept reading
        started = time.monotonic()
        conn.disconnect()  # the connection's timeout: 5 s for the DISCONNECT receipt
        took = time.monotonic() - started
        print("disconnect took %.2f s" % took)
    finally:
        if took is None:
            threading.Thread(target=conn.disconnect, daemon=True).start()  # never hang the test run
        server.stop()
    assert took < 5 + 2
    assert wait_until(lambda: not [t for t in _client_threads() if t not in before], 5), _client_threads()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("split", [False, True], ids=["one-frame", "across-continuations"])
def test_a_text_message_that_is_not_utf8_fails_the_connection(split):
    """RFC 6455 8.1: a text message that is not UTF-8 fails the WebSocket connection (close
    code 1007). The message before it -- valid UTF-8 with a character split between two
    fragments -- arrives; the bad one (in one frame, or its bad sequence split across
    fragments) is not handed on; the listener hears why and on_disconnected; the client's
    Close carries 1007."""
    heard = {}

    def script(peer):
        Frame, Op = peer.ws.frames.Frame, peer.ws.frames.Opcode
        time.sleep(0.3)  # after connect() returned
        good = "MESSAGE\nsubscription:1\nmessage-id:good\ndestination:/queue/a\n\nd\u00e9j\u00e0\x00".encode()
        cut = good.index(b"\xc3") + 1  # between the two bytes of the first "é"
        bad = b"MESSAGE\nsubscription:1\nmessage-id:bad\ndestination:/queue/a\n\n\xc3(\x00"
        if split:
            cut_bad = bad.index(b"\xc3") + 1
            bad_frames = [Frame(Op.TEXT, bad[:cut_bad], fin=False), Frame(Op.CONT, bad[cut_bad:])]
        else:
            bad_frames = [Frame(Op.TEXT, bad)]
        peer.send(Frame(Op.TEXT, good[:cut], fin=False), Frame(Op.CONT, good[cut:]), *bad_frames)
        deadline = time.monotonic() + 10
        while "close" not in heard and time.monotonic() < deadline:
            heard.update(("close", f) for f in peer.frames(1, timeout=10) if f.opcode is Op.CLOSE)

    server = FakeWebSocketServer(script)
    conn, listener = _fake_ws_conn(server)
    try:
        conn.subscribe("/queue/a", id="1")
        assert listener.wait_event("disconnected", timeout=10)
        assert [m.headers["message-id"] for m in listener.messages] == ["good"]
        assert listener.messages[0].body == "d\u00e9j\u00e0".encode()
        reason = conn.transport.close_reason
        assert "1007" in reason and "UTF-8" in reason, reason
        error = listener.protocol_errors[0]  # on_protocol_error, then on_disconnected
        assert isinstance(error, WebSocketProtocolError) and error.close_code == 1007
    finally:
        conn.disconnect()
        server.stop()
    assert "close" in heard, server.error
    assert server.ws.frames.Close.parse(heard["close"].data).code == 1007


@pytest.mark.timeout(60)
def test_binary_mode_takes_text_messages_as_bytes():
    """binary_mode=True (the bodies are bytes): text messages are not checked, since
    RabbitMQ's web-STOMP sends every frame in a text message by default, binary bodies
    included (test_binary_mode_carries_any_bytes)."""
    def script(peer):
        Frame, Op = peer.ws.frames.Frame, peer.ws.frames.Opcode
        time.sleep(0.3)  # after connect() returned
        peer.send(Frame(Op.TEXT, b"MESSAGE\nsubscription:1\nmessage-id:1\ndestination:/queue/a\n\n\xc3(\x00"))
        # answer the DISCONNECT's receipt, so disconnect() need not wait out its timeout
        deadline = time.monotonic() + 10
        while not server.stopped.is_set() and time.monotonic() < deadline:
            for f in peer.frames(1, timeout=10):
                if f.data.startswith(b"DISCONNECT"):
                    receipt = re.search(rb"\nreceipt:([^\n]*)\n", f.data).group(1)
                    peer.send(Frame(Op.TEXT, b"RECEIPT\nreceipt-id:" + receipt + b"\n\n\x00"))
                    return

    server = FakeWebSocketServer(script)
    conn, listener = _fake_ws_conn(server, binary_mode=True)
    try:
        conn.subscribe("/queue/a", id="1")
        assert [m.body for m in listener.wait_messages(1)] == [b"\xc3("]
        assert conn.is_connected() and not listener.protocol_errors
    finally:
        conn.disconnect()
        server.stop()
