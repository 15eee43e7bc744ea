"""Shared test set-up: the real-ActiveMQ fixtures (``activemq``,
``activemq_persistent``, ``activemq_factory``) from
:mod:`amqstomp.testing.pytest_plugin`.

The plugin is loaded here unless an installed ``pytest11`` entry point already
registers it (pytest refuses one plugin under two names).
"""

try:
    from importlib.metadata import entry_points
except ImportError:  # pragma: no cover - Python < 3.8
    entry_points = None  # type: ignore[assignment]

_PLUGIN = "amqstomp.testing.pytest_plugin"


def _entry_point_registered() -> bool:
    if entry_points is None:
        return False
    try:
        eps = entry_points()
        group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
        return any(ep.value.split(":")[0].strip() == _PLUGIN for ep in group)
    except Exception:
        return False


if not _entry_point_registered():
    pytest_plugins = [_PLUGIN]


# --------------------------------------------------------------------------- helpers

import select  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from typing import Any, Callable, Iterator, List, Optional, Tuple  # noqa: E402

import pytest  # noqa: E402


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass; returns its last truth."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return bool(predicate())
        time.sleep(interval)


def assert_consumed(broker: Any, queue: str, dequeued: int, timeout: float = 10.0) -> None:
    """Wait (``timeout`` s at most) until ``broker`` counted ``dequeued`` dequeues of ``queue``
    (name, ``/queue/`` prefix optional) and holds none of its messages in flight; else raise
    AssertionError with its last statistics.

    Not the queue's ``size`` (enqueueCount - dequeueCount): ActiveMQ 5.17 now and then leaves a
    PERSISTENT message sent while a consumer of its queue is dispatched to out of enqueueCount
    for good (it pages the message in from its store before the send adds it to the cursor;
    "cursor got duplicate send" in its log), and the size then stays negative though every
    message was consumed once. A message not acknowledged still fails this (dequeueCount short,
    or in flight), and so does one more than ``dequeued`` left on the queue (size above 0)."""
    _wait_for_counters(broker, queue, timeout, "%d dequeues" % dequeued, absent=False,
                       done=lambda s: s["dequeueCount"] == dequeued and s["inflightCount"] == 0 and s["size"] <= 0)


def assert_none_left(broker: Any, queue: str, timeout: float = 10.0) -> None:
    """Wait (``timeout`` s at most) until ``broker`` holds none of ``queue``'s messages in flight
    and its size (enqueueCount - dequeueCount) is 0 or below; else raise AssertionError with its
    last statistics. For a queue whose dequeues on this broker are not known in advance (a restart
    resets its counters, network bridges forward, a send re-sent across a failover is a second
    message): a message left on it counts +1. Not ``size == 0``: the enqueue under-count that
    :func:`assert_consumed` describes takes 1 off for each message it missed."""
    _wait_for_counters(broker, queue, timeout, "none left", absent=True,
                       done=lambda s: s["size"] <= 0 and s["inflightCount"] == 0)


def assert_given_back(broker: Any, queue: str, timeout: float = 20.0) -> None:
    """Wait (``timeout`` s at most) until ``broker`` holds ``queue``'s messages as a consumer that
    left without acknowledging gives them back: none in flight, none dequeued, no consumer left;
    else raise AssertionError with its last statistics.

    Not ``size == N`` (N the messages that consumer had): a PERSISTENT message that reached the
    queue while that consumer was dispatched to can be left out of enqueueCount for good, and
    the size then stays below N though all N are on the queue (:func:`assert_consumed` says
    why). The caller proves the N are there by consuming them."""
    _wait_for_counters(broker, queue, timeout, "no consumer, none dequeued", absent=False,
                       done=lambda s: s["consumerCount"] == 0 and s["inflightCount"] == 0 and s["dequeueCount"] == 0)


def _wait_for_counters(broker: Any, queue: str, timeout: float, expected: str, absent: bool,
                       done: Callable[[dict], bool]) -> None:
    """Poll ``queue``'s statistics on ``broker`` until ``done(stats)`` (``absent``: what a queue
    the broker does not have passes as); AssertionError with the counters that tell a missing
    ACK from the broker's under-count if ``timeout`` s pass first."""
    from amqstomp.testing import queue_statistics

    last: dict = {}

    def check() -> bool:
        try:
            last.update(queue_statistics(broker, queue))
        except LookupError:
            return absent
        return done(last)

    assert wait_until(check, timeout), "%s: %s and none in flight expected, %d s after: %r" % (
        queue, expected, timeout, {k: last.get(k) for k in (
            "enqueueCount", "dequeueCount", "inflightCount", "size", "dispatchCount", "consumerCount")})


def fill_queue(broker: Any, destination: str, count: int, body: bytes = b"x" * 256) -> None:
    """Send ``count`` messages (header ``seq`` 0..count-1) to ``destination`` and wait
    for the broker's receipt of the last one."""
    import amqstomp

    conn = amqstomp.Connection12(broker.host_and_ports)
    conn.connect(wait=True)
    try:
        for i in range(count):
            headers: dict = {"seq": i}
            if i == count - 1:
                headers["receipt"] = "filled"
            conn.send(destination, body, headers=headers)
        conn.wait_for_receipt("filled", timeout=60)
    finally:
        conn.disconnect()


def broker_keystore(directory: Any) -> str:
    """A PKCS12 keystore with a self-signed certificate (CN=localhost, password ``secret123``)
    in ``directory``, for a TLS broker (``activemq_factory(ssl={"keystore": ..., "keystore_password":
    "secret123"})``); skips the test when the JDK's keytool is missing."""
    import shutil
    import subprocess
    keytool = shutil.which("keytool")
    if keytool is None:
        pytest.skip("keytool (from the JDK) is needed to make a keystore")
    keystore = str(directory / "broker.p12")
    subprocess.run([keytool, "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048",
                    "-dname", "CN=localhost", "-validity", "2", "-storetype", "PKCS12", "-keystore", keystore,
                    "-storepass", "secret123", "-keypass", "secret123"], check=True, capture_output=True, timeout=60)
    return keystore


class OpenSocket:
    """A fake of the I/O layer's one fact for the pure settlement core (``link_alive``): socket
    ``open_seq`` is the open one; records which sockets it was asked about."""

    def __init__(self, open_seq: int) -> None:
        self.open_seq = open_seq
        self.asked: List[int] = []

    def link_alive(self, seq: int) -> bool:
        self.asked.append(seq)
        return seq == self.open_seq


class TransportTimes:
    """A listener noting when the transport was interrupted and resumed (both APIs'
    ``on_transport_interrupted``/``on_transport_resumed``; the first time of each) and
    every event in order (``on_heartbeat_timeout`` too)."""

    def __init__(self) -> None:
        self.times: dict = {}
        self.events: List[str] = []

    def on_transport_interrupted(self) -> None:
        self.times.setdefault("interrupted", time.monotonic())
        self.events.append("interrupted")

    def on_transport_resumed(self) -> None:
        self.times.setdefault("resumed", time.monotonic())
        self.events.append("resumed")

    def on_heartbeat_timeout(self) -> None:
        self.events.append("heartbeat_timeout")


class Collector:
    """A listener that records every callback, with bounded waits.

    Attributes:
        messages (list[Frame]), errors (list[Frame]), receipts (list[Frame]),
        events (list[str]): callback names in call order.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.messages: List[Any] = []
        self.errors: List[Any] = []
        self.receipts: List[Any] = []
        self.protocol_errors: List[Any] = []
        self.events: List[str] = []
        self.heartbeats = 0
        self.connected_frame: Any = None

    def _record(self, name: str, target: Optional[List[Any]] = None, frame: Any = None) -> None:
        with self.cond:
            self.events.append(name)
            if target is not None:
                target.append(frame)
            self.cond.notify_all()

    def on_connecting(self, host_and_port: Tuple[str, int]) -> None:
        self._record("connecting")

    def on_connected(self, frame: Any) -> None:
        self.connected_frame = frame
        self._record("connected")

    def on_message(self, frame: Any) -> None:
        self._record("message", self.messages, frame)

    def on_error(self, frame: Any) -> None:
        self._record("error", self.errors, frame)

    def on_receipt(self, frame: Any) -> None:
        self._record("receipt", self.receipts, frame)

    def on_protocol_error(self, error: Any) -> None:
        self._record("protocol_error", self.protocol_errors, error)

    def on_heartbeat(self) -> None:
        with self.cond:
            self.heartbeats += 1

    def on_heartbeat_timeout(self) -> None:
        self._record("heartbeat_timeout")

    def on_disconnecting(self) -> None:
        self._record("disconnecting")

    def on_receiver_loop_completed(self, frame: Any) -> None:
        self._record("receiver_loop_completed")

    def on_disconnected(self) -> None:
        self._record("disconnected")

    def wait_for(self, predicate: Callable[["Collector"], bool], timeout: float = 10.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self), timeout)

    def wait_messages(self, count: int, timeout: float = 10.0) -> List[Any]:
        self.wait_for(lambda c: len(c.messages) >= count, timeout)
        with self.cond:
            return list(self.messages)

    def wait_event(self, name: str, timeout: float = 10.0) -> bool:
        return self.wait_for(lambda c: name in c.events, timeout)


class StallProxy:
    """A loopback TCP proxy (127.0.0.1 only) between a client and a broker.

    ``stall()`` stops forwarding in both directions without closing anything
    (a silent peer); ``resume()`` forwards again; ``inject_to_client(data)``
    writes raw bytes towards the client; ``drop()`` closes every connection.
    """

    def __init__(self, upstream: Tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.stalled = threading.Event()
        self.closing = threading.Event()
        self.lock = threading.Lock()
        self.pairs: List[Tuple[socket.socket, socket.socket]] = []
        self.threads: List[threading.Thread] = []
        self.bytes_up = 0
        self.bytes_down = 0
        self._spawn(self._accept_loop)

    @property
    def host_and_ports(self) -> List[Tuple[str, int]]:
        return [("127.0.0.1", self.port)]

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="test-proxy")
        with self.lock:
            self.threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self.closing.is_set():
            ready, _, _ = select.select([self.listener], [], [], 0.05)
            if not ready:
                continue
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, server))
            self._spawn(self._pump, client, server, "up")
            self._spawn(self._pump, server, client, "down")

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str) -> None:
        while not self.closing.is_set():
            if self.stalled.is_set():
                time.sleep(0.02)
                continue
            try:
                ready, _, _ = select.select([src], [], [], 0.05)
                if not ready or self.stalled.is_set():
                    continue
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if direction == "up":
                    self.bytes_up += len(data)
                else:
                    self.bytes_down += len(data)
            except (OSError, ValueError):
                break
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stall(self) -> None:
        self.stalled.set()

    def resume(self) -> None:
        self.stalled.clear()

    def inject_to_client(self, data: bytes) -> None:
        with self.lock:
            pairs = list(self.pairs)
        for client, _ in pairs:
            client.sendall(data)

    def drop(self) -> None:
        with self.lock:
            pairs = list(self.pairs)
        for client, server in pairs:
            for sock in (client, server):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closing.set()
        self.drop()
        with self.lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join(5)
        with self.lock:
            for client, server in self.pairs:
                client.close()
                server.close()
        self.listener.close()


@pytest.fixture
def silent_peer() -> Iterator[Tuple[str, int]]:
    """(host, port) of a listener on 127.0.0.1 the kernel accepts connections on; nothing ever
    reads or answers (a broker that accepted the socket and never answers CONNECT)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(50)
    try:
        yield listener.getsockname()
    finally:
        listener.close()


@pytest.fixture
def stall_proxy(activemq):
    """A :class:`StallProxy` in front of the session broker."""
    proxy = StallProxy(("127.0.0.1", activemq.stomp_port))
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture
def stomp_connect(activemq):
    """``stomp_connect(conn_class=amqstomp.Connection12, **kwargs)`` -> (connection,
    :class:`Collector`), connected to the session broker as admin; every connection
    made is disconnected at teardown."""
    import amqstomp

    made = []

    def factory(conn_class=None, **kwargs):
        conn = (conn_class or amqstomp.Connection12)(activemq.host_and_ports, **kwargs)
        col = Collector()
        conn.set_listener("collector", col)
        conn.connect("admin", "admin", wait=True, timeout=15)
        made.append(conn)
        return conn, col

    yield factory
    for conn in made:
        conn.disconnect()


def assert_still_usable(conn: Any, col: "Collector", destination: str) -> None:
    """The connection is open, a send to ``destination`` still gets its RECEIPT, no ERROR came."""
    assert conn.is_connected()
    receipt = "ok-" + uuid.uuid4().hex[:8]
    conn.send(destination, "after", receipt=receipt)
    conn.wait_for_receipt(receipt, 10)
    assert not col.errors, [e.headers.get("message") for e in col.errors]


class SessionQueues:
    """Destination names unique to this test session (another session's clean-up must not delete
    them: ``<tag>-<session hex>-<name hex>``), and the RabbitMQ queues among them deleted by
    :meth:`clean_up` (a module fixture calls it when the module is done)."""

    def __init__(self, tag: str) -> None:
        self.prefix = "amqstomp-%s-%s-" % (tag, uuid.uuid4().hex[:6])
        self.rabbitmq_used = False

    def name(self, broker: Any) -> str:
        """A fresh queue name (without ``/queue/``) on ``broker`` (a ``stomp_broker`` target)."""
        self.rabbitmq_used = self.rabbitmq_used or broker.name == "rabbitmq"
        return self.prefix + uuid.uuid4().hex[:12]

    def clean_up(self) -> None:
        if self.rabbitmq_used:
            from amqstomp.testing import RabbitMQStomp
            RabbitMQStomp().delete_queues(self.prefix)


def connect12(target: Any, made: List[Any], listener: Any = None, **kwargs: Any) -> Any:
    """A connected ``amqstomp.Connection12`` to ``target`` (a ``stomp_broker`` target: its
    hosts, user and password), ``listener`` set as "rec", appended to ``made`` (the caller's
    list, disconnected when the test ends, also when it failed half-way)."""
    import amqstomp

    conn = amqstomp.Connection12(target.host_and_ports, **kwargs)
    made.append(conn)
    if listener is not None:
        conn.set_listener("rec", listener)
    conn.connect(target.username, target.password, wait=True, timeout=15)
    return conn


def cut_stalled_later(proxy: Any, after_s: float = 0.5) -> None:
    """From another thread, ``after_s`` seconds from now: cut the TcpProxy's connections, then let
    it pass bytes again (what was written into the stalled path is lost with the socket)."""
    def cut() -> None:
        time.sleep(after_s)
        proxy.cut()
        proxy.unstall()

    threading.Thread(target=cut, daemon=True, name="test-cut-stalled-later").start()
