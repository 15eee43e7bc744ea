"""Tests of amqstomp.testing: the real-ActiveMQ broker harness and its fixtures.

These start real brokers (about 1 s each) and talk STOMP over raw sockets, so
they check the harness without depending on the amqstomp client.
"""
import ipaddress
import os
import re
import socket
import ssl
import sys
import time
import uuid
import xml.etree.ElementTree as ET

import pytest

from amqstomp.testing import broker as broker_mod
from amqstomp.testing.broker import (
    NOT_FOUND_MESSAGE,
    ActiveMQBroker,
    BrokerNotAvailable,
    BrokerStartError,
    _frame,
    _stomp_handshake,
    broker_statistics,
    queue_statistics,
    topic_statistics,
)
from conftest import broker_keystore

if "amqstomp.testing.pytest_plugin" not in sys.modules:
    # Neither the pytest11 entry point nor a conftest loaded the plugin
    # (a source checkout): take its fixtures from here.
    from amqstomp.testing.pytest_plugin import (  # noqa: F401
        activemq,
        activemq_factory,
        activemq_persistent,
    )

pytestmark = pytest.mark.broker


# ---------------------------------------------------------------- helpers

class Stomp:
    """A tiny raw STOMP 1.2 session for these tests."""

    def __init__(self, broker, port=None, timeout=10.0):
        self.sock, self.reader = _stomp_handshake(broker.host, port or broker.stomp_port, timeout)
        self.receipts = 0

    def _deadline(self, timeout):
        self.reader.deadline = time.monotonic() + timeout

    def send(self, destination, body=b"", timeout=10.0, **headers):
        self.receipts += 1
        receipt = f"r{self.receipts}"
        self.sock.sendall(_frame("SEND", {"destination": destination, "receipt": receipt, **headers}, body))
        self._deadline(timeout)
        command, hdrs, _ = self.reader.read()
        assert command == "RECEIPT" and hdrs.get("receipt-id") == receipt, (command, hdrs)

    def subscribe(self, destination, sub_id="1", ack="auto"):
        self.sock.sendall(_frame("SUBSCRIBE", {"id": sub_id, "destination": destination, "ack": ack}))

    def receive(self, count, timeout=10.0):
        self._deadline(timeout)
        bodies = []
        while len(bodies) < count:
            command, hdrs, body = self.reader.read()
            assert command == "MESSAGE", (command, hdrs, body)
            bodies.append(body)
        return bodies

    def close(self):
        try:
            self.sock.sendall(_frame("DISCONNECT", {}))
        finally:
            self.sock.close()


def unique(prefix="amqstomp.test"):
    return f"{prefix}.{uuid.uuid4().hex[:12]}"


def listening_sockets(pid):
    """(ip address, port) of every TCP socket process ``pid`` listens on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state != "0A" or inode not in inodes:  # 0A = LISTEN
                    continue
                addr_hex, port_hex = local.split(":")
                raw = b"".join(bytes.fromhex(addr_hex[i:i + 8])[::-1] for i in range(0, len(addr_hex), 8))
                addr = ipaddress.ip_address(raw)
                if addr.version == 6 and addr.ipv4_mapped is not None:
                    addr = addr.ipv4_mapped
                found.append((addr, int(port_hex, 16)))
    return found


def processes_mentioning(text):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def wait_for(predicate, timeout=10.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


# ---------------------------------------------------------------- tests

@pytest.mark.timeout(120)
def test_session_broker_speaks_stomp(activemq):
    assert activemq.running
    assert activemq.url == f"stomp://127.0.0.1:{activemq.stomp_port}"
    assert activemq.host_and_ports == [("127.0.0.1", activemq.stomp_port)]
    sock = socket.create_connection(("127.0.0.1", activemq.stomp_port), timeout=10)
    try:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
        data = b""
        while b"\0" not in data:
            chunk = sock.recv(4096)
            assert chunk, "broker closed the connection"
            data += chunk
    finally:
        sock.close()
    assert data.startswith(b"CONNECTED\n")
    # 6.1.7's all-in-one jar announces itself with its version placeholder unfiltered
    assert {"5.17": b"server:ActiveMQ/5.", "6.1": b"server:ActiveMQ/${project.version}\n"}[activemq.distribution] in data
    assert b"version:1.2" in data
    assert os.path.exists(activemq.log_path)


@pytest.mark.timeout(120)
def test_only_loopback_is_bound(activemq_factory):
    broker = activemq_factory(nio=True)
    sockets = listening_sockets(broker.pid)
    assert sockets, "the broker listens on nothing?"
    assert {addr for addr, _ in sockets} == {ipaddress.ip_address("127.0.0.1")}, sockets
    assert sorted(port for _, port in sockets) == sorted([broker.stomp_port, broker.stomp_nio_port])
    # the NIO connector speaks STOMP too
    session = Stomp(broker, port=broker.stomp_nio_port)
    session.close()
    # and the config opens no other protocol
    root = ET.parse(broker.config_path).getroot()
    uris = [el.get("uri") for el in root.iter("{http://activemq.apache.org/schema/core}transportConnector")]
    assert uris == [f"stomp://127.0.0.1:{broker.stomp_port}", f"stomp+nio://127.0.0.1:{broker.stomp_nio_port}"]


@pytest.mark.timeout(120)
def test_openwire_connector_on_loopback(activemq_factory):
    """``openwire=True`` opens ActiveMQ's OpenWire ``tcp://`` connector, on
    127.0.0.1 only: the broker's first bytes there are its WireFormatInfo
    (command type 1, then the magic ``ActiveMQ``), STOMP stays where it was."""
    broker = activemq_factory(openwire=True)
    assert broker.openwire_port and broker.openwire_port != broker.stomp_port
    assert broker.openwire_url == f"tcp://127.0.0.1:{broker.openwire_port}"
    sockets = listening_sockets(broker.pid)
    assert {addr for addr, _ in sockets} == {ipaddress.ip_address("127.0.0.1")}, sockets
    assert sorted(port for _, port in sockets) == sorted([broker.stomp_port, broker.openwire_port])
    sock = socket.create_connection(("127.0.0.1", broker.openwire_port), timeout=10)
    try:
        data = b""
        deadline = time.monotonic() + 10
        while len(data) < 13 and time.monotonic() < deadline:
            chunk = sock.recv(4096)
            assert chunk, "the OpenWire connector closed the connection"
            data += chunk
    finally:
        sock.close()
    # 4-byte size, command type 1 (WIREFORMAT_INFO), 8-byte magic
    assert data[4] == 1 and data[5:13] == b"ActiveMQ", data[:40]
    Stomp(broker).close()
    root = ET.parse(broker.config_path).getroot()
    uris = [el.get("uri") for el in root.iter("{http://activemq.apache.org/schema/core}transportConnector")]
    assert uris == [f"stomp://127.0.0.1:{broker.stomp_port}", f"tcp://127.0.0.1:{broker.openwire_port}"]
    assert ActiveMQBroker().openwire_url is None  # not opened unless asked


@pytest.mark.timeout(120)
def test_queue_statistics_counts(activemq):
    queue = unique()
    session = Stomp(activemq)
    try:
        for i in range(5):
            session.send(f"/queue/{queue}", b"message %d" % i)
        stats = queue_statistics(activemq, queue)
        assert stats["destinationName"] == f"queue://{queue}"
        assert stats["enqueueCount"] == 5
        assert stats["size"] == 5
        assert stats["dequeueCount"] == 0
        assert stats["inflightCount"] == 0
        assert isinstance(stats["averageEnqueueTime"], float)
        # other ways to name the broker and the queue
        assert queue_statistics(activemq.host_and_ports[0], f"/queue/{queue}")["size"] == 5
        assert queue_statistics(activemq.url, queue)["size"] == 5

        session.subscribe(f"/queue/{queue}")
        assert session.receive(5) == [b"message %d" % i for i in range(5)]
        stats = wait_for(lambda: (s := queue_statistics(activemq, queue))["dequeueCount"] == 5 and s)
        assert stats and stats["size"] == 0 and stats["consumerCount"] == 1
    finally:
        session.close()


@pytest.mark.timeout(120)
def test_topic_and_broker_statistics(activemq):
    topic = unique()
    session = Stomp(activemq)
    try:
        session.subscribe(f"/topic/{topic}")
        session.send(f"/topic/{topic}", b"hi")
        assert session.receive(1) == [b"hi"]
        stats = topic_statistics(activemq, topic)
        assert stats["destinationName"] == f"topic://{topic}"
        assert stats["enqueueCount"] == 1
        assert stats["consumerCount"] == 1
    finally:
        session.close()
    overall = broker_statistics(activemq)
    assert overall["brokerName"] == activemq.broker_name
    assert overall["enqueueCount"] >= 1


@pytest.mark.timeout(120)
def test_statistics_of_unknown_queue_is_a_lookup_error(activemq):
    started = time.monotonic()
    with pytest.raises(LookupError):
        queue_statistics(activemq, unique("never.created"), timeout=10.0)
    assert time.monotonic() - started < 5.0


@pytest.mark.timeout(120)
def test_statistics_request_is_bounded_without_the_plugin(activemq_factory):
    broker = activemq_factory(statistics=False, transformations=True)
    session = Stomp(broker)
    queue = unique()
    session.send(f"/queue/{queue}", b"x")
    session.close()
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="statistics plugin"):
        queue_statistics(broker, queue, timeout=1.0)
    assert time.monotonic() - started < 3.0


@pytest.mark.timeout(120)
def test_statistics_without_xstream_fail_clearly(activemq_factory):
    # Debian's broker cannot render jms-map-xml without XStream: it drops the
    # connection instead of sending an ERROR frame.
    broker = activemq_factory(statistics=True, transformations=False)
    assert not os.path.exists(os.path.join(broker.base_dir, "lib", "xstream.jar"))
    session = Stomp(broker)
    queue = unique()
    session.send(f"/queue/{queue}", b"x")
    session.close()
    with pytest.raises(ConnectionError, match="XStream"):
        queue_statistics(broker, queue, timeout=5.0)


@pytest.mark.timeout(120)
def test_persistent_fixture_keeps_persistent_messages(activemq_persistent):
    queue = unique()
    session = Stomp(activemq_persistent)
    try:
        session.send(f"/queue/{queue}", b"kept", persistent="true")
    finally:
        session.close()
    assert activemq_persistent.persistent
    assert queue_statistics(activemq_persistent, queue)["size"] == 1
    assert os.path.isdir(os.path.join(activemq_persistent.base_dir, "data", "kahadb"))


@pytest.mark.timeout(120)
def test_persistent_store_survives_a_new_broker(tmp_path, activemq_factory):
    store = str(tmp_path / "kahadb")
    queue = f"/queue/{unique()}"
    first = activemq_factory(kahadb_dir=store)
    assert first.persistent
    session = Stomp(first)
    for i in range(3):
        session.send(queue, b"p%d" % i, persistent="true")
    session.close()
    first.stop()

    second = activemq_factory(kahadb_dir=store)
    session = Stomp(second)
    try:
        session.subscribe(queue)
        assert session.receive(3) == [b"p0", b"p1", b"p2"]
    finally:
        session.close()


@pytest.mark.timeout(120)
def test_restart_keeps_directory_store_and_port(activemq_factory):
    broker = activemq_factory(persistent=True)
    port, base = broker.stomp_port, broker.base_dir
    queue = f"/queue/{unique()}"
    session = Stomp(broker)
    session.send(queue, b"again", persistent="true")
    session.close()
    old_pid = broker.pid
    broker.restart()
    assert broker.pid != old_pid and broker.stomp_port == port and broker.base_dir == base
    session = Stomp(broker)
    try:
        session.subscribe(queue)
        assert session.receive(1) == [b"again"]
    finally:
        session.close()


@pytest.mark.timeout(120)
def test_stop_leaves_no_process_and_no_directory():
    with ActiveMQBroker(broker_name="amqstomp-stop-test") as broker:
        pid, base = broker.pid, broker.base_dir
        assert broker.ping()
        assert processes_mentioning(f"-Dactivemq.base={base}") == [pid]
    assert not broker.running and broker.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert processes_mentioning(f"-Dactivemq.base={base}") == []
    assert not os.path.exists(base)
    broker.stop()  # idempotent


@pytest.mark.timeout(120)
def test_kill_then_stop(activemq_factory):
    broker = activemq_factory()
    pid, base = broker.pid, broker.base_dir
    broker.kill()
    assert not broker.running
    assert broker.returncode == -9
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert os.path.exists(os.path.join(base, "data", "activemq.log"))  # kept for post-mortem
    broker.stop()
    assert not os.path.exists(base)


@pytest.mark.timeout(120)
def test_shared_store_failover(tmp_path, activemq_factory):
    store = str(tmp_path / "shared-kahadb")
    queue = f"/queue/{unique()}"
    master = activemq_factory(kahadb_dir=store, lock_acquire_sleep_ms=500, broker_name="master")
    slave = activemq_factory(kahadb_dir=store, lock_acquire_sleep_ms=500, broker_name="slave", wait=False)
    session = Stomp(master)
    for i in range(20):
        session.send(queue, b"m%d" % i, persistent="true")
    session.close()

    time.sleep(1.5)  # several lock attempts of the slave
    assert slave.running
    assert not slave.ping(timeout=1.0)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", slave.stomp_port), timeout=1.0).close()
    with pytest.raises(BrokerStartError):
        slave.wait_ready(timeout=0.5)

    master.kill()
    started = time.monotonic()
    slave.wait_ready(timeout=30)
    assert time.monotonic() - started < 15
    assert queue_statistics(slave, queue)["size"] == 20
    session = Stomp(slave)
    try:
        session.subscribe(queue)
        assert session.receive(20) == [b"m%d" % i for i in range(20)]
    finally:
        session.close()


@pytest.mark.timeout(120)
def test_start_failure_reports_the_broker_log():
    broker = ActiveMQBroker(extra_xml="<noSuchBrokerElement/>", startup_timeout=60)
    with pytest.raises(BrokerStartError) as info:
        broker.start()
    message = str(info.value)
    assert "exited with status" in message
    assert "ERROR" in message and "noSuchBrokerElement" in message
    assert not broker.running
    assert broker.base_dir is None  # temporary directory removed


@pytest.mark.timeout(120)
def test_ssl_connector(tmp_path, activemq_factory):
    broker = activemq_factory(ssl={"keystore": broker_keystore(tmp_path), "keystore_password": "secret123"})
    assert broker.ssl_url == f"stomp+ssl://127.0.0.1:{broker.stomp_ssl_port}"
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", broker.stomp_ssl_port), timeout=10)
    with context.wrap_socket(raw) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
        data = b""
        while b"\0" not in data:
            chunk = sock.recv(4096)
            assert chunk
            data += chunk
    assert data.startswith(b"CONNECTED\n")


@pytest.mark.timeout(30)
def test_rendered_config_carries_the_options(tmp_path):
    broker = ActiveMQBroker(
        base_dir=str(tmp_path), memory_limit="1 mb", send_fail_if_no_space=True,
        producer_flow_control=False, scheduler=True, persist_jms_redelivered=True,
        max_page_size=7, allow_link_stealing=True, persistent=True,
        lock_acquire_sleep_ms=500, extra_xml="<!-- extra -->", broker_name="cfg",
    )
    text = broker.render_config()
    root = ET.fromstring(text)
    ns = "{http://activemq.apache.org/schema/core}"
    b = root.find(f"{ns}broker")
    assert b.get("brokerName") == "cfg" and b.get("useJmx") == "false"
    assert b.get("persistent") == "true" and b.get("schedulerSupport") == "true"
    queue_policy = next(p for p in b.iter(f"{ns}policyEntry") if p.get("queue") == ">")
    assert queue_policy.get("producerFlowControl") == "false"
    assert queue_policy.get("persistJMSRedelivered") == "true"
    assert queue_policy.get("maxPageSize") == "7"
    usage = b.find(f"{ns}systemUsage/{ns}systemUsage")
    assert usage.get("sendFailIfNoSpace") == "true"
    assert usage.find(f"{ns}memoryUsage/{ns}memoryUsage").get("limit") == "1 mb"
    locker = b.find(f"{ns}persistenceAdapter/{ns}kahaDB/{ns}locker/{ns}shared-file-locker")
    assert locker.get("lockAcquireSleepInterval") == "500"
    assert b.find(f"{ns}plugins/{ns}statisticsBrokerPlugin") is not None
    connector = b.find(f"{ns}transportConnectors/{ns}transportConnector")
    assert connector.get("allowLinkStealing") == "true"
    assert "<!-- extra -->" in text
    with pytest.raises(ValueError):
        ActiveMQBroker(ssl={"keystroe": "x"})


class _CustomXMLBroker(ActiveMQBroker):
    """The documented way to change the broker XML: override render_config()."""

    def render_config(self) -> str:
        text = super().render_config()
        # a queue that exists from the start, seen in the broker's statistics below
        return text.replace("<transportConnectors>", "<destinations><queue physicalName=\"from.subclass\"/>"
                            "</destinations>\n    <transportConnectors>", 1) + "<!-- subclass-marker -->\n"


@pytest.mark.timeout(120)
def test_a_subclass_render_config_is_what_the_broker_runs_with(tmp_path):
    broker = _CustomXMLBroker(base_dir=str(tmp_path / "b"))
    try:
        broker.start()
        with open(broker.config_path, encoding="utf-8") as f:
            written = f.read()
        assert written.endswith("<!-- subclass-marker -->\n") and "from.subclass" in written
        assert queue_statistics(broker, "from.subclass")["size"] == 0  # the broker read it: the queue is there
    finally:
        broker.stop()


@pytest.mark.timeout(30)
def test_missing_activemq_is_reported_clearly(monkeypatch, tmp_path):
    monkeypatch.delenv("AMQSTOMP_ACTIVEMQ_DISTRIBUTION", raising=False)  # Debian's 5.17 (6.1's: test_broker_distribution)
    missing = str(tmp_path / "no-activemq")
    assert not ActiveMQBroker.available(activemq_home=missing)
    with pytest.raises(BrokerNotAvailable, match="apt-get install -y activemq"):
        ActiveMQBroker.require(activemq_home=missing)
    with pytest.raises(BrokerNotAvailable) as info:
        ActiveMQBroker(activemq_home=missing).start()
    assert str(info.value).startswith(NOT_FOUND_MESSAGE)

    from amqstomp.testing import pytest_plugin

    monkeypatch.setattr(broker_mod, "ACTIVEMQ_HOME", missing)
    monkeypatch.delenv(pytest_plugin.SKIP_ENV, raising=False)
    with pytest.raises(pytest.fail.Exception, match="ActiveMQ not found"):
        pytest_plugin._require_broker()
    monkeypatch.setenv(pytest_plugin.SKIP_ENV, "1")
    with pytest.raises(pytest.skip.Exception):
        pytest_plugin._require_broker()


# ---------------------------------------------------------------- whose port is it, and why did it fail

class FakeStompServer:
    """A listener on 127.0.0.1 that answers every CONNECT with CONNECTED: another
    process's STOMP port, as far as a client can tell."""

    def __init__(self):
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.answered = 0
        self.stopped = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2.0)
                try:
                    data = b""
                    while b"\0" not in data:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    conn.sendall(b"CONNECTED\nversion:1.2\nserver:ActiveMQ/5.17.2\n\n\0")
                    self.answered += 1
                except OSError:
                    pass

    def close(self):
        self.stopped = True
        self.thread.join(5)
        self.sock.close()


@pytest.mark.timeout(30)
def test_a_given_port_held_by_another_process_fails_at_once():
    holder = FakeStompServer()
    try:
        broker = ActiveMQBroker(stomp_port=holder.port)
        started = time.monotonic()
        with pytest.raises(BrokerStartError) as info:
            broker.start()
        assert time.monotonic() - started < 5
    finally:
        holder.close()
    assert info.value.summary == (f"ActiveMQ amqstomp-test not started: port {holder.port} on 127.0.0.1 is in "
                                  "use by another process (choose another port, or stop that process)")
    assert not broker.running and broker.pid is None


@pytest.mark.timeout(120)
def test_readiness_is_our_brokers_not_a_listener_answering(monkeypatch):
    """The port check before launching aside, the readiness check alone must not
    take another process's STOMP listener for the broker: our java fails to bind
    (and says so), the other one answers CONNECTED all along."""
    from amqstomp.testing import _startup

    holder = FakeStompServer()
    monkeypatch.setattr(broker_mod, "port_in_use", lambda host, port: False)  # as if it came a moment later
    try:
        broker = ActiveMQBroker(stomp_port=holder.port, startup_timeout=90)
        with pytest.raises(BrokerStartError) as info:
            broker.start()
        assert not broker.running
        assert broker.ping() and _startup.port_in_use("127.0.0.1", holder.port)  # a ping alone says "ready"
    finally:
        holder.close()
    summary = info.value.summary
    assert summary.startswith("ActiveMQ amqstomp-test exited with status 1 during start-up\n"), summary
    assert "Address already in use" in summary
    assert len(summary.splitlines()) <= 4 and "\tat " not in summary  # the reason, not the Java stack
    # the details: the JVM's output without the lines of the broker's log (its stack trace printed again)
    sections = re.split(r"^--- (.*) ---$", info.value.details, flags=re.M)
    parts = {title.split(" ")[0]: set(text.splitlines()) - {""} for title, text in zip(sections[1::2], sections[2::2])}
    assert "activemq.log" in parts and not parts["activemq.log"] & parts.get("broker.out", set())


@pytest.mark.timeout(120)
def test_a_broker_with_users_starts_and_refuses_anonymous_logins(activemq_factory):
    broker = activemq_factory(users={"admin": "s3cret", "app": "pw"})
    assert broker.credentials == ("admin", "s3cret")
    assert broker.ping()  # logs in as admin
    with pytest.raises(ConnectionError, match="User name \\[null\\] or password is invalid"):
        _stomp_handshake(broker.host, broker.stomp_port, 10)
    sock, _ = _stomp_handshake(broker.host, broker.stomp_port, 10, "app", "pw")
    sock.close()
    # the statistics queries log in with the broker's credentials
    assert broker_statistics(broker)["brokerName"] == broker.broker_name
    with pytest.raises(ValueError, match="users must be"):
        ActiveMQBroker(users={"admin": 5})


@pytest.mark.timeout(30)
def test_start_failure_reason_is_a_few_lines():
    from amqstomp.testing._startup import failure_reason, started_line

    log = "\n".join([
        "2026-12-01 21:11:00,001 | INFO  | Refreshing ... | org.x | main",
        "2026-12-01 21:11:01,002 | ERROR | Failed to load: URL [file:/x/activemq.xml], reason: broken | org.y | main",
        "org.springframework.beans.BeanCreationException: broken",
        "\tat org.springframework.Foo(Foo.java:1)",
        "Caused by: java.net.BindException: Address already in use",
        "\tat java.base/sun.nio.ch.Net.bind0(Native Method)",
    ])
    assert failure_reason(log) == ["Failed to load: URL [file:/x/activemq.xml], reason: broken",
                                   "cause: java.net.BindException: Address already in use"]
    assert failure_reason("", "Error: Could not find or load main class x\n") == [
        "Error: Could not find or load main class x"]
    assert failure_reason("", "") == []
    ok = "2026-12-01 | INFO  | Apache ActiveMQ 5.17.2 (amqstomp-test, ID:vm-1) started | o.a.BrokerService | main"
    assert started_line(ok, "amqstomp-test") == ok
    assert started_line(ok, "amqstomp-other") is None


@pytest.mark.timeout(120)
def test_a_broker_whose_extra_xml_turns_authentication_on_starts(activemq_factory):
    """Its readiness probe logs in as nobody and is refused: an ERROR answer is
    a STOMP broker answering all the same (it used to wait for the timeout)."""
    plugin = ('<plugins><simpleAuthenticationPlugin anonymousAccessAllowed="false"><users>'
              '<authenticationUser username="u" password="p" groups="users"/></users>'
              '</simpleAuthenticationPlugin></plugins>')
    broker = activemq_factory(extra_xml=plugin, statistics=False, startup_timeout=60)
    assert broker.startup_seconds is not None and broker.startup_seconds < 55
    assert not broker.ping()  # CONNECTED needs a login
    sock, _ = _stomp_handshake(broker.host, broker.stomp_port, 10, "u", "p")
    sock.close()
