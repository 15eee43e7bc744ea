"""The stomp.py-style fan-in and spreading connections (amqstomp.FanInConnection,
amqstomp.SpreadingConnection; docs/guides/scaling-out.md), on real brokers:

- the stranded-message scenario (20 messages left on member 2 of a network by a
  consumer that went away unacknowledged, no replayWhenNoConsumers): a fan-in
  connection over the members gets all 20, none twice, every ACK on its broker;
- ACKs routed to the broker that delivered the message, also when two brokers hold
  the same message-id (a topic message forwarded over a network: STOMP 1.1 ACKs name
  message-id + subscription): in the listener by its thread, elsewhere by ``broker=``,
  and an ambiguous one refused with nothing sent;
- a member killed (kill -9) mid-run, persistent messages, client-individual ACKs
  waiting for their receipts: nothing lost, no settled message delivered again, every
  queue empty, threads and fds back to their baseline after ``disconnect()``;
- spreading: N sends land evenly on every broker; a stopped broker is skipped; a
  fan-in connection then finds every message sent (0 lost); a broker whose producer
  flow control holds a send keeps only that send, the other thread's go elsewhere;
- ``disconnect()`` of brokers gone silent is bounded and runs in parallel;
- a ``stomp://`` member lost (no reconnect) is reported once, redacted, and left out,
  by both compositions;
- a call before ``connect()`` fails and marks no broker lost; a lost member that
  ``connect()`` connects again is used again (issue 24).
"""
import os
import threading
import time
import uuid
from typing import Any, Dict, List, Set, Tuple

import pytest
from conftest import StallProxy, assert_consumed, assert_none_left, wait_until

import amqstomp
from amqstomp.exception import (
    AcknowledgeInDoubtError, AcknowledgeInterruptedError, ConfigurationError, UnknownMessageError,
)
from amqstomp.fanin import AmbiguousMessageError
from amqstomp.testing import queue_statistics

pytestmark = pytest.mark.timeout(240)


def _queue() -> str:
    return "amqstomp-fanin-sp-" + uuid.uuid4().hex[:10]


def _stat(broker: Any, queue: str, name: str = "size") -> int:
    try:
        return int(queue_statistics(broker, queue).get(name, 0))
    except LookupError:
        return 0


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _produce(broker: Any, destination: str, bodies: List[str]) -> None:
    """Persistent SENDs, the last with a receipt waited for (the broker has them all)."""
    conn = amqstomp.Connection12(broker.host_and_ports, timeout=30)
    conn.connect(wait=True)
    try:
        for i, body in enumerate(bodies):
            receipt = "p-%s" % uuid.uuid4().hex if i == len(bodies) - 1 else None
            conn.send(destination, body, persistent="true", receipt=receipt)
            if receipt:
                conn.wait_for_receipt(receipt, 30)
    finally:
        conn.disconnect()


class Acker(amqstomp.ConnectionListener):
    """Takes every MESSAGE; with ``ack`` set, ACKs it in the listener (on the thread of
    the connection that delivered it) through the fan-in connection."""

    def __init__(self, fanin: Any, ack: bool = True, delay_s: float = 0.0, receipts: bool = False) -> None:
        self.fanin = fanin
        self.ack = ack
        self.delay_s = delay_s
        self.receipts = receipts  # each ACK waits for its RECEIPT: once it returns, the message is settled
        self.settled: Set[str] = set()
        self.settled_again: List[str] = []
        self.in_doubt = 0
        self.got: List[Tuple[str, str]] = []  # (broker, body)
        self.frames: List[Tuple[str, Any]] = []
        self.interrupted = 0
        self.errors: List[Any] = []
        self.lock = threading.Lock()

    def on_message(self, frame: Any) -> None:
        broker = self.fanin.delivering_broker
        assert broker is not None
        if self.delay_s:
            time.sleep(self.delay_s)
        with self.lock:
            self.frames.append((broker, frame))
        with self.lock:
            if frame.body in self.settled:
                self.settled_again.append(frame.body)
        if self.ack:
            try:
                self.fanin.ack(frame.headers["ack"], receipt="a-%s" % uuid.uuid4().hex if self.receipts else None)
            except AcknowledgeInterruptedError:  # its socket was lost (a broker killed): it comes again
                with self.lock:
                    self.interrupted += 1
                return
            except AcknowledgeInDoubtError:  # written, the RECEIPT lost with the socket: it may come again
                with self.lock:
                    self.in_doubt += 1
                    self.got.append((broker, frame.body))
                return
        with self.lock:
            self.got.append((broker, frame.body))
            if self.receipts:
                self.settled.add(frame.body)

    def on_error(self, frame: Any) -> None:
        self.errors.append(frame.headers.get("message"))


def test_arguments_refused_before_anything_is_sent() -> None:
    with pytest.raises(ConfigurationError, match="a:1 is listed twice"):
        amqstomp.FanInConnection("failover:(stomp://a:1,stomp://b:2,stomp://a:1)")
    with pytest.raises(ConfigurationError, match="one member per broker"):
        amqstomp.SpreadingConnection("failover:(stomp://a:1,stomp://b:2)?rebalanceInterval=2000")
    with pytest.raises(ConfigurationError, match="failover option timeout is not used by stomp.py's API"):
        amqstomp.SpreadingConnection("failover:(stomp://a:1,stomp://b:2)?timeout=1000")
    with pytest.raises(ValueError, match="version must be"):
        amqstomp.FanInConnection(["stomp://127.0.0.1:1"], version="2.0")
    conn = amqstomp.FanInConnection(["stomp://127.0.0.1:1", "stomp://127.0.0.1:2?jms.password=pw1"])
    try:
        assert conn.brokers == ["stomp://127.0.0.1:1", "stomp://127.0.0.1:2?jms.password=***"]
        with pytest.raises(ValueError, match="the composition's own"):
            conn.set_listener("amqstomp-member-watch", amqstomp.ConnectionListener())
        with pytest.raises(ConfigurationError, match="prefetch_size="):
            conn.subscribe("/queue/x", 1, headers={"activemq.prefetchSize": 5})
        with pytest.raises(ConfigurationError, match="prefetch_size="):
            conn.subscribe("/queue/x?consumer.prefetchSize=5", 1)
        # never connected: no connection holds it, each refuses by its own rules
        with pytest.raises(UnknownMessageError, match="no broker's connection holds"):
            conn.ack("ID:x")
        with pytest.raises(ValueError, match="is not one of"):
            conn.ack("ID:x", broker="stomp://elsewhere:3")
    finally:
        conn.disconnect()
    assert conn.closed


def test_the_stranded_messages_come_to_a_fan_in_connection(activemq_network_factory) -> None:
    net = activemq_network_factory(3, replay_when_no_consumers=False)
    queue = _queue()
    # a consumer on member 2 takes 20 messages produced on member 1 ...
    leaver = amqstomp.Connection12(net.members[1].host_and_ports, timeout=30)
    taken: List[Any] = []
    leaver.set_listener("", type("L", (amqstomp.ConnectionListener,), {"on_message": lambda s, f: taken.append(f)})())
    leaver.connect(wait=True)
    leaver.subscribe("/queue/" + queue, 1, ack="client-individual", prefetch_size=100)
    assert wait_until(lambda: _stat(net.members[0], queue, "consumerCount") >= 1, 20)
    _produce(net.members[0], "/queue/" + queue, ["s%02d" % i for i in range(20)])
    assert wait_until(lambda: len(taken) >= 20, 20), len(taken)
    leaver.disconnect()  # ... and leaves without acknowledging: the 20 wait on member 2, no consumer there
    assert wait_until(lambda: _stat(net.members[1], queue) == 20, 20)
    threads, fds = threading.active_count(), _fds()
    conn = amqstomp.FanInConnection(net.failover_url(maxReconnectDelay=200), timeout=30)
    acker = Acker(conn)
    conn.set_listener("", acker)
    try:
        conn.connect("admin", "admin", wait=True)  # stomp.py's call
        conn.subscribe("/queue/" + queue, "fan", ack="client-individual", prefetch_size=30)
        assert conn.prefetch_shares("fan") == [10, 10, 10]
        assert wait_until(lambda: len(acker.got) >= 20, 30), acker.got
        time.sleep(0.5)  # nothing comes twice
        assert sorted(body for _, body in acker.got) == ["s%02d" % i for i in range(20)]
        assert {broker for broker, _ in acker.got} == {conn.brokers[1]}  # all from member 2, acked there
        assert acker.errors == [] and acker.interrupted == 0
        # none left on any member: the 20 were sent PERSISTENT to member 1 while its bridge consumed them, and
        # the bridge sent them on to member 2 while the leaver consumed there (conftest.assert_none_left: why
        # not the size 0)
        for member in net.members:
            assert_none_left(member, queue)
    finally:
        conn.disconnect()
    assert wait_until(lambda: threading.active_count() <= threads and _fds() <= fds, 15), threading.enumerate()


def test_acks_reach_the_broker_that_delivered_also_on_an_id_collision(activemq_network_factory) -> None:
    """A topic message forwarded over a network comes from both brokers with the same
    message-id: on STOMP 1.1 the two deliveries have the same ACK identity."""
    net = activemq_network_factory(2)
    topic = "/topic/" + _queue()
    conn = amqstomp.FanInConnection(net.urls, version="1.1", timeout=30)
    keeper = Acker(conn, ack=False)
    conn.set_listener("", keeper)
    producer = amqstomp.Connection12(net.members[0].host_and_ports, timeout=30)
    try:
        conn.connect()
        producer.connect(wait=True)
        conn.subscribe(topic, "t", ack="client-individual")

        def both_delivered() -> List[str]:
            seen: Dict[str, Set[str]] = {}
            for broker, frame in list(keeper.frames):
                seen.setdefault(frame.headers["message-id"], set()).add(broker)
            return [mid for mid, brokers in seen.items() if len(brokers) == 2]
        for k in range(100):  # until a message came from both (the bridge's topic demand is set up): at most 20 s
            producer.send(topic, "probe-%d" % k)
            if wait_until(lambda: both_delivered(), 0.2):
                break
        collided = both_delivered()
        assert collided, keeper.frames
        mid = collided[0]
        # outside a listener, no broker named: refused, nothing sent
        with pytest.raises(AmbiguousMessageError, match="held by 2 brokers"):
            conn.ack(mid, "t")
        # broker= settles that broker's delivery only (its RECEIPT waited for)
        conn.ack(mid, "t", broker=conn.brokers[0], receipt="ack-" + uuid.uuid4().hex)
        held = [c.subscriptions.holds({"message-id": mid, "subscription": "t"}) for c in conn.connections]
        assert held == [False, True]
        conn.ack(mid, "t", receipt="ack-" + uuid.uuid4().hex)  # now one broker holds it: routed there
        assert [c.subscriptions.holds({"message-id": mid, "subscription": "t"}) for c in conn.connections] == [
            False, False]
        with pytest.raises(UnknownMessageError):
            conn.ack(mid, "t")  # acknowledged on both: nothing sent
        # in a listener: each broker's copy acknowledged on its own thread, same id
        acking: List[Tuple[str, str]] = []

        class InListener(amqstomp.ConnectionListener):
            def on_message(self, frame: Any) -> None:
                if frame.body == "collide":
                    conn.ack(frame.headers["message-id"], frame.headers["subscription"])
                    acking.append((conn.delivering_broker or "", frame.headers["message-id"]))
        conn.set_listener("in", InListener())
        producer.send(topic, "collide")
        assert wait_until(lambda: len(acking) == 2, 20), acking
        assert {b for b, _ in acking} == set(conn.brokers) and acking[0][1] == acking[1][1]
        time.sleep(0.3)  # an ERROR (an ACK on the wrong broker) would come by now
        assert keeper.errors == []
        others = [(b, f.headers["message-id"]) for b, f in keeper.frames if f.body != "collide"]
        for broker, message_id in others:  # the probes left: each acknowledged where it came from
            if conn.connections[conn.brokers.index(broker)].subscriptions.holds(
                    {"message-id": message_id, "subscription": "t"}):
                conn.ack(message_id, "t", broker=broker)
        assert keeper.errors == []
    finally:
        producer.disconnect()
        conn.disconnect()


@pytest.mark.compiled_pass_only  # a member kill: failover threads (the stranded-message tests stay in both)
def test_a_member_killed_mid_run_loses_nothing(activemq_factory) -> None:
    brokers = [activemq_factory(persistent=True), activemq_factory(persistent=True)]
    queue = _queue()
    per_broker = 100
    for i, broker in enumerate(brokers):
        _produce(broker, "/queue/" + queue, ["b%d-%03d" % (i, k) for k in range(per_broker)])
    threads, fds = threading.active_count(), _fds()
    urls = ["failover:(%s)?initialReconnectDelay=50&maxReconnectDelay=200" % b.url for b in brokers]
    conn = amqstomp.FanInConnection(urls, timeout=10)
    lost: List[str] = []
    conn.set_exception_listener(lambda url, exc: lost.append(url))
    acker = Acker(conn, delay_s=0.01, receipts=True)  # slow enough that the kill comes mid-run
    conn.set_listener("", acker)
    try:
        conn.connect()
        conn.subscribe("/queue/" + queue, "k", ack="client-individual", prefetch_size=20)
        assert wait_until(lambda: len(acker.got) >= per_broker // 2, 30), len(acker.got)
        brokers[1].kill()
        time.sleep(1.0)
        brokers[1].restart()
        everything = {"b%d-%03d" % (i, k) for i in range(2) for k in range(per_broker)}
        assert wait_until(lambda: {body for _, body in acker.got} >= everything, 90), \
            sorted(everything - {body for _, body in acker.got})[:10]
        assert all(wait_until(lambda b=b: _stat(b, queue) == 0, 20) for b in brokers), \
            [(_stat(b, queue), _stat(b, queue, "inflightCount")) for b in brokers]
        assert conn.lost == {} and lost == [] and acker.errors == []  # the member on it reconnected by itself
        time.sleep(1.0)  # a settled message delivered again would come by now
        assert acker.settled_again == []  # an ACK whose RECEIPT came is never undone
        print("\nfan-in connection, broker 2 killed mid-run: %d deliveries for %d messages, %d ACKs refused "
              "(their socket lost: redelivered), %d in doubt, 0 settled messages delivered again"
              % (len(acker.got), len(everything), acker.interrupted, acker.in_doubt))
    finally:
        conn.disconnect()
    assert wait_until(lambda: threading.active_count() <= threads and _fds() <= fds, 15), (
        threading.enumerate(), _fds(), fds)


@pytest.mark.compiled_pass_only  # a member stopped mid-run: the spreading and failover threads
def test_a_spreading_connection_spreads_and_skips_a_stopped_broker(activemq_network_factory) -> None:
    net = activemq_network_factory(3, persistent=True)
    queue = "/queue/" + _queue()
    url = net.failover_url(initialReconnectDelay=50, maxReconnectDelay=200)
    sent: Dict[str, str] = {}
    with amqstomp.SpreadingConnection(url, timeout=1) as producer:
        producer.connect(timeout=30)
        for k in range(30):
            body = "m%03d" % k
            sent[body] = producer.send(queue, body, persistent="true", receipt="r-%d" % k)
        assert producer.sent == [10, 10, 10]  # round robin while all take
        assert [_stat(m, queue[len("/queue/"):]) for m in net.members] == [10, 10, 10]
        net.stop_member(1)
        for k in range(30, 60):
            body = "m%03d" % k
            sent[body] = producer.send(queue, body, persistent="true", receipt="r-%d" % k)
        after = producer.sent
        assert after[1] <= 11 and after[0] >= 24 and after[2] >= 24, after  # member 2's share went to the others
        assert all(sent["m%03d" % k] != producer.brokers[1] for k in range(31, 60))
        net.restart(1)
    consumer = amqstomp.FanInConnection(net.failover_url(initialReconnectDelay=50, maxReconnectDelay=200),
                                        timeout=30)
    acker = Acker(consumer)
    consumer.set_listener("", acker)
    try:
        consumer.connect()
        consumer.subscribe(queue, "s", ack="client-individual")
        assert wait_until(lambda: {body for _, body in acker.got} >= set(sent), 60), \
            sorted(set(sent) - {body for _, body in acker.got})
    finally:
        consumer.disconnect()
    print("\nspreading connection, member 2 stopped after 30 of 60: sent per member %s, received %d (%d distinct)"
          % (after, len(acker.got), len({b for _, b in acker.got})))


def test_a_full_broker_holds_only_the_send_that_found_it_full(activemq_factory) -> None:
    """Broker 1 has a 1 MB memory limit with producer flow control, broker 2 room: two
    threads send 10 kB messages with receipts through one spreading connection; the send
    that finds broker 1 full waits there (its RECEIPT held back), while the other
    thread's sends all go to broker 2. A consumer on broker 1 then frees it, and every
    message is on one of the brokers."""
    full = activemq_factory(memory_limit="1 mb", producer_flow_control=True)
    roomy = activemq_factory()
    name = _queue()
    queue = "/queue/" + name
    body = "x" * 10000
    per_thread = 150  # 1.5 MB each: more than broker 1 holds
    done = {0: 0, 1: 0}
    errors: List[BaseException] = []
    producer = amqstomp.SpreadingConnection([full.url, roomy.url], timeout=60)
    producer.connect(timeout=30)

    def send(thread: int) -> None:
        try:
            for k in range(per_thread):
                producer.send(queue, "%d-%03d:%s" % (thread, k, body), receipt="r-%d-%d" % (thread, k))
                done[thread] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(i,), daemon=True, name="test-sender-%d" % i) for i in range(2)]
    drained: List[str] = []
    try:
        for thread in threads:
            thread.start()
        # one thread finishes, its later sends all on broker 2, while the other waits on broker 1
        assert wait_until(lambda: not all(t.is_alive() for t in threads), 90), (done, producer.sent)
        assert any(t.is_alive() for t in threads), (done, producer.sent)  # still held by broker 1
        waiting = producer.sent
        assert errors == [] and waiting[0] < per_thread and sum(waiting) == done[0] + done[1], (waiting, done)
        conn = amqstomp.Connection12(full.host_and_ports, timeout=30)
        conn.set_listener("", type("D", (amqstomp.ConnectionListener,), {
            "on_message": lambda self, f: drained.append(f.body.split(":")[0])})())
        conn.connect(wait=True)
        try:
            conn.subscribe(queue, "drain", ack="auto")
            for thread in threads:
                thread.join(60)
            assert wait_until(lambda: len(drained) >= producer.sent[0], 30), (len(drained), producer.sent)
        finally:
            conn.disconnect()
        assert errors == [] and done == {0: per_thread, 1: per_thread}, (errors, done)
        sent = producer.sent
    finally:
        producer.disconnect()
    print("\nspreading connection, broker 1 full: sent per broker %s (while one send waited: %s)" % (sent, waiting))
    assert sum(sent) == 2 * per_thread and len(drained) == sent[0] and len(set(drained)) == len(drained)
    assert wait_until(lambda: _stat(roomy, name) == sent[1], 10), (_stat(roomy, name), sent)


def test_disconnect_of_silent_brokers_is_bounded_and_parallel(activemq) -> None:
    """Three members behind proxies that stop forwarding: each disconnect waits its
    ``timeout`` (2 s) for a DISCONNECT receipt that never comes, all at once: the
    whole disconnect takes about one of them (within 5 s), not three (6 s and more)."""
    proxies = [StallProxy(("127.0.0.1", activemq.stomp_port)) for _ in range(3)]
    threads = threading.active_count()
    try:
        conn = amqstomp.FanInConnection(["stomp://127.0.0.1:%d" % p.port for p in proxies], timeout=2)
        conn.connect()
        conn.subscribe("/queue/" + _queue(), "q")
        assert conn.is_connected()
        for proxy in proxies:
            proxy.stall()
        started = time.monotonic()
        conn.disconnect()
        took = time.monotonic() - started
        assert 1.5 <= took < 5.0, took
        assert conn.closed and not conn.is_connected()
        assert conn.lost == {}  # disconnected, not lost
    finally:
        for proxy in proxies:
            proxy.close()
    assert wait_until(lambda: threading.active_count() <= threads, 15), threading.enumerate()


def test_a_stomp_member_lost_is_reported_and_left_out_its_password_never_shown(activemq, activemq_factory,
                                                                              caplog) -> None:
    """Two standalone brokers, ``stomp://`` members (no reconnect), the second URL with a
    jms.password: it connects with it; stopping that broker reports it once (redacted), it is
    left out, the other broker's messages still come, and the password shows nowhere."""
    caplog.set_level("DEBUG", logger="amqstomp")
    secret = "Secr3tPW-" + uuid.uuid4().hex[:6]
    brokers = [activemq, activemq_factory()]  # the session's broker stays; the test's own is stopped
    name = _queue()
    queue = "/queue/" + name
    urls = [brokers[0].url, "%s?jms.userName=admin&jms.password=%s" % (brokers[1].url, secret)]
    conn = amqstomp.FanInConnection(urls, timeout=10)
    heard: List[Tuple[str, str]] = []
    conn.set_exception_listener(lambda url, exc: heard.append((url, str(exc))))
    acker = Acker(conn)
    conn.set_listener("", acker)
    try:
        conn.connect()
        conn.subscribe(queue, "x", ack="client-individual", prefetch_size=7)
        assert conn.prefetch_shares("x") == [4, 3]
        for i, broker in enumerate(brokers):
            _produce(broker, queue, ["b%d-%d" % (i, k) for k in range(10)])
        assert wait_until(lambda: len(acker.got) >= 20, 20), acker.got
        for i in range(2):  # each broker's in its order
            mine = [body for broker, body in acker.got if broker == conn.brokers[i]]
            assert mine == ["b%d-%d" % (i, k) for k in range(10)], mine
        brokers[1].stop()
        assert wait_until(lambda: conn.brokers[1] in conn.lost, 20), conn.lost
        # the member shows in ``lost`` before its connection's thread calls the listener
        assert wait_until(lambda: len(heard) >= 1, 10), heard
        assert [url for url, _ in heard] == [conn.brokers[1]] and "jms.password=***" in heard[0][0]
        _produce(brokers[0], queue, ["after-%d" % k for k in range(5)])
        assert wait_until(lambda: len(acker.got) >= 25, 20), acker.got
        conn.subscribe("/queue/" + _queue(), "y")  # the lost broker left out
        assert conn.is_connected()
        shown = [repr(conn), str(conn.lost), str(heard), str(conn.brokers), caplog.text]
        assert not [text for text in shown if secret in text], shown
    finally:
        conn.disconnect()
    # the 15 sent to it (PERSISTENT, while the fan-in consumed: dequeues, not the size; conftest.assert_consumed)
    assert_consumed(brokers[0], name, 15)
    assert secret not in caplog.text


def test_a_spreading_connection_leaves_a_lost_stomp_member_out(activemq, activemq_factory) -> None:
    """``stomp://`` members (no reconnect): a stopped broker is reported once and its
    share goes to the other; every send with a receipt is on a broker (0 lost)."""
    brokers = [activemq, activemq_factory()]  # the session's broker stays; the test's own is stopped
    name = _queue()
    heard: List[str] = []
    with amqstomp.SpreadingConnection([b.url for b in brokers], timeout=10) as producer:
        producer.set_exception_listener(lambda url, exc: heard.append(url))
        producer.connect()
        for k in range(10):
            producer.send("/queue/" + name, "a%d" % k, receipt="ra-%d" % k)
        assert producer.sent == [5, 5]
        brokers[1].stop()
        for k in range(10):
            assert producer.send("/queue/" + name, "b%d" % k, receipt="rb-%d" % k) == producer.brokers[0]
        assert producer.sent == [15, 5] and list(producer.lost) == [producer.brokers[1]]
        assert wait_until(lambda: len(heard) >= 1, 10) and heard == [producer.brokers[1]], heard
    assert _stat(brokers[0], name) == 15


def _two_members(activemq: Any, tcp_proxy_factory: Any) -> Tuple[List[Any], List[str]]:
    """Two ``stomp://`` members (no reconnect) on one broker, each behind its own proxy."""
    proxies = [tcp_proxy_factory(activemq.host_and_ports[0]) for _ in range(2)]
    return proxies, ["stomp://%s:%d" % p.address for p in proxies]


def test_a_send_before_connect_fails_and_loses_no_broker(activemq, tcp_proxy_factory) -> None:
    """Issue 24: a spreading connection's SEND before ``connect()`` raises
    NotConnectedException and marks no broker lost; after ``connect()`` every broker takes sends."""
    _, urls = _two_members(activemq, tcp_proxy_factory)
    name = _queue()
    with amqstomp.SpreadingConnection(urls, timeout=5) as producer:
        with pytest.raises(amqstomp.exception.NotConnectedException, match="connect"):
            producer.send("/queue/" + name, "early")
        assert producer.lost == {} and producer.sent == [0, 0]
        producer.connect()
        assert producer.is_connected()
        took = [producer.send("/queue/" + name, "m%d" % k, receipt="r-%d" % k) for k in range(4)]
        assert producer.sent == [2, 2] and set(took) == set(producer.brokers) and producer.lost == {}
    assert _stat(activemq, name) == 4


def test_a_subscribe_before_connect_fails_and_loses_no_broker(activemq, tcp_proxy_factory) -> None:
    """Issue 24: a fan-in connection's SUBSCRIBE (and UNSUBSCRIBE, ACK) before ``connect()``
    fails and marks no broker lost; after ``connect()`` subscribe, ACK and unsubscribe work
    on every broker."""
    _, urls = _two_members(activemq, tcp_proxy_factory)
    name = _queue()
    queue = "/queue/" + name
    _produce(activemq, queue, ["m%d" % k for k in range(4)])
    consumer = amqstomp.FanInConnection(urls, timeout=5)
    acker = Acker(consumer, receipts=True)
    consumer.set_listener("", acker)
    try:
        with pytest.raises(amqstomp.exception.NotConnectedException):
            consumer.subscribe(queue, "early", ack="client-individual")
        with pytest.raises(amqstomp.exception.NotConnectedException):  # each connection's own answer
            consumer.unsubscribe("early")
        with pytest.raises(UnknownMessageError):
            consumer.ack("ID:early")
        assert consumer.lost == {}
        consumer.connect()
        consumer.subscribe(queue, "s", ack="client-individual", prefetch_size=2)
        assert consumer.prefetch_shares("s") == [1, 1]
        assert wait_until(lambda: len(acker.settled) >= 4, 20), (acker.got, acker.errors)
        assert sorted(body for _, body in acker.got) == ["m0", "m1", "m2", "m3"] and acker.errors == []
        consumer.unsubscribe("s")
        assert consumer.lost == {}
    finally:
        consumer.disconnect()
    assert _stat(activemq, name) == 0


def test_a_lost_stomp_member_connected_again_is_used_again(activemq, tcp_proxy_factory) -> None:
    """Issue 24: a ``stomp://`` member lost (its socket cut) is reported and left out;
    ``connect()`` again connects it anew and it is used again (out of ``lost``, a later
    loss reported again); a ``connect()`` again that cannot reach it raises
    ConnectFailedException, keeps it lost and leaves the other broker working."""
    proxies, urls = _two_members(activemq, tcp_proxy_factory)
    name = _queue()
    queue = "/queue/" + name
    heard: List[str] = []
    with amqstomp.SpreadingConnection(urls, timeout=5) as producer:
        producer.set_exception_listener(lambda url, exc: heard.append(url))
        producer.connect()
        proxies[1].cut()
        assert wait_until(lambda: producer.brokers[1] in producer.lost, 10), producer.lost
        for k in range(4):
            assert producer.send(queue, "a%d" % k, receipt="ra-%d" % k) == producer.brokers[0]
        producer.connect()
        assert producer.lost == {}
        before = producer.sent
        for k in range(4):
            producer.send(queue, "b%d" % k, receipt="rb-%d" % k)
        assert [a - b for a, b in zip(producer.sent, before)] == [2, 2], (before, producer.sent)
        proxies[1].cut()  # lost again: reported again
        assert wait_until(lambda: producer.brokers[1] in producer.lost, 10), producer.lost
        # the member shows in ``lost`` before its connection's thread calls the listener
        assert wait_until(lambda: len(heard) >= 2, 10) and heard == [producer.brokers[1]] * 2, heard
        proxies[1].refuse(True, mode="closed")
        with pytest.raises(amqstomp.exception.ConnectFailedException):
            producer.connect(timeout=2)
        assert list(producer.lost) == [producer.brokers[1]] and not producer.closed
        assert heard == [producer.brokers[1]] * 2, heard  # once per loss (the refused connect: lost already)
        assert producer.send(queue, "still", receipt="r-still") == producer.brokers[0]
        proxies[1].refuse(False)
    consumer = amqstomp.FanInConnection(urls, timeout=5)
    try:
        consumer.connect()
        proxies[0].cut()
        assert wait_until(lambda: consumer.brokers[0] in consumer.lost, 10), consumer.lost
        consumer.subscribe("/queue/" + _queue(), "x", prefetch_size=4)
        assert consumer.prefetch_shares("x") == [4]  # the lost broker left out
        consumer.connect()
        assert consumer.lost == {}
        consumer.subscribe("/queue/" + _queue(), "y", prefetch_size=4)
        assert consumer.prefetch_shares("y") == [2, 2]
        assert consumer.connections[0].subscriptions.get("y") is not None
        consumer.unsubscribe("y")
    finally:
        consumer.disconnect()
    assert _stat(activemq, name) == 9  # every send with a receipt is there, none lost
