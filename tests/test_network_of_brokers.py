"""A network of ActiveMQ brokers (amqstomp.testing.ActiveMQNetwork), on real brokers.

- the configuration it writes (in memory: the XML of each keyword);
- the set-up itself: every member answers, every bridge is up, and after stop the
  threads, file descriptors and child processes are back to what they were;
- what prefetch does to the distribution of 300 messages produced on member 1
  with one consumer per member (the split is printed: docs/guides/scaling-out.md);
- the stranded messages: a consumer leaves without acknowledging what was forwarded to
  its broker; a consumer on the producing broker gets them only with
  ``replayWhenNoConsumers`` (``replay_when_no_consumers``);
- a member killed (kill -9) mid-run with persistent messages, producers and consumers on
  every member (failover: URIs over the members), then restarted: nothing lost, nothing
  settled comes again, everything consumed.
"""
import os
import re
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Set, Tuple

import pytest
from conftest import assert_given_back, assert_none_left, wait_until

import amqstomp
from amqstomp.exception import AcknowledgeInDoubtError, AcknowledgeInterruptedError
from amqstomp.testing import ActiveMQBroker, ActiveMQNetwork, queue_statistics
from amqstomp.testing._config import render_activemq_xml
from amqstomp.testing.network import bridge_peers, network_connectors_xml

pytestmark = pytest.mark.timeout(240)


def _queue() -> str:
    return "amqstomp-net-" + uuid.uuid4().hex[:10]


def _stat(broker: Any, queue: str, name: str) -> int:
    """A counter of ``queue`` on ``broker``; 0 while the broker has no such queue (6.1 says so)."""
    try:
        return int(queue_statistics(broker, queue).get(name, 0))
    except LookupError:
        return 0


# --------------------------------------------------------------------------- in memory


def test_bridge_peers_of_a_mesh_and_a_chain() -> None:
    assert [bridge_peers(i, 3, "mesh") for i in range(3)] == [[1, 2], [0, 2], [0, 1]]
    assert [bridge_peers(i, 3, "chain") for i in range(3)] == [[1], [0, 2], [1]]
    with pytest.raises(ValueError, match="topology must be one of"):
        bridge_peers(0, 3, "ring")


def test_each_keyword_is_written_into_the_connector() -> None:
    xml = network_connectors_xml("net-1", [("net-2", "tcp://127.0.0.1:1234")], conduit_subscriptions=True,
                                 decrease_network_consumer_priority=False,
                                 suppress_duplicate_queue_subscriptions=False, network_ttl=4, reconnect_delay_ms=300)
    assert 'name="net-1-to-net-2"' in xml
    assert ('uri="static:(tcp://127.0.0.1:1234)?initialReconnectDelay=300&amp;maxReconnectDelay=300'
            '&amp;useExponentialBackOff=false"') in xml
    for attribute in ('duplex="false"', 'conduitSubscriptions="true"', 'decreaseNetworkConsumerPriority="false"',
                      'suppressDuplicateQueueSubscriptions="false"', 'networkTTL="4"'):
        assert attribute in xml
    assert network_connectors_xml("net-1", [], conduit_subscriptions=False, decrease_network_consumer_priority=True,
                                  suppress_duplicate_queue_subscriptions=True, network_ttl=1,
                                  reconnect_delay_ms=1) == ""


@pytest.mark.parametrize("replay", [True, False])
def test_replay_writes_the_filter_and_turns_the_audit_off(tmp_path, replay) -> None:
    net = ActiveMQNetwork(2, replay_when_no_consumers=replay)
    net.members = [ActiveMQBroker(broker_name=name, openwire=True) for name in net.names]
    for i in range(2):
        net._configure(i)
    xml = render_activemq_xml(net.members[0], str(tmp_path))
    queue_entry = re.search(r'<policyEntry queue="&gt;"[^\n]*', xml).group(0)
    assert ('replayWhenNoConsumers="true"' in queue_entry) is replay
    assert ('enableAudit="false"' in queue_entry) is replay
    assert "net-1-to-net-2" in xml and net.members[1].openwire_url in xml
    assert 'conduitSubscriptions="false"' in xml and 'decreaseNetworkConsumerPriority="true"' in xml
    assert 'suppressDuplicateQueueSubscriptions="true"' in xml and 'networkTTL="1"' in xml


def test_bad_keywords_are_named() -> None:
    with pytest.raises(ValueError, match="n must be an int >= 2"):
        ActiveMQNetwork(1)
    with pytest.raises(ValueError, match="topology"):
        ActiveMQNetwork(3, topology="star")
    with pytest.raises(ValueError, match="network_ttl"):
        ActiveMQNetwork(3, network_ttl=0)
    with pytest.raises(ValueError, match="stomp_port= is set by ActiveMQNetwork"):
        ActiveMQNetwork(3, stomp_port=61613)
    assert ActiveMQNetwork(4, topology="chain").network_ttl == 3


# --------------------------------------------------------------------------- the set-up


def _fds() -> Set[str]:
    return set(os.listdir("/proc/self/fd"))


def _children() -> Set[int]:
    mine = str(os.getpid())
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == mine:
                found.add(int(pid))
    return found


@pytest.mark.broker
@pytest.mark.compiled_pass_only  # the network harness: bridges, a member restart
@pytest.mark.parametrize("topology", ["mesh", "chain"])
def test_a_network_starts_bridges_restarts_a_member_and_leaves_nothing_behind(topology) -> None:
    threads, fds, children = threading.active_count(), _fds(), _children()
    net = ActiveMQNetwork(3, topology=topology)
    try:
        net.start()
        assert net.bridged() == []
        assert len(_children()) == len(children) + 3
        # a message produced on the first member reaches a consumer on the last (two hops on a chain)
        queue = _queue()
        consumer = amqstomp.ConnectionFactory(net.members[2].url).create_connection(timeout_s=30)
        try:
            received = consumer.create_session().create_consumer(amqstomp.Queue(queue))
            consumer.start()
            assert wait_until(lambda: _stat(net.members[0], queue, "consumerCount") >= 1, 20)
            producer = amqstomp.ConnectionFactory(net.members[0].url).create_connection(timeout_s=30)
            try:
                session = producer.create_session()
                session.create_producer(amqstomp.Queue(queue)).send(session.create_text_message("over the bridges"))
            finally:
                producer.close()
            message = received.receive(20)
            assert message is not None and message.text == "over the bridges"
        finally:
            consumer.close()
        net.kill(1)
        assert not net.members[1].running
        net.restart(1)  # waits for its bridges and its peers' bridges to it
        assert net.members[1].ping() and net.bridged() == []
        net.stop_member(0)  # a clean stop keeps its directory for the restart
        assert not net.members[0].running and os.path.isdir(str(net.members[0].base_dir))
        net.restart(0)
        assert net.members[0].ping() and net.bridged() == []
    finally:
        net.stop()
    assert wait_until(lambda: threading.active_count() <= threads, 10), threading.enumerate()
    assert wait_until(lambda: _fds() <= fds, 10), sorted(_fds() - fds)
    assert _children() <= children


# --------------------------------------------------------------------------- the distribution


def _drain(url: str, queue: str, counts: List[int], index: int, stop: threading.Event,
           ready: threading.Event) -> None:
    conn = amqstomp.ConnectionFactory(url).create_connection(timeout_s=30)
    try:
        consumer = conn.create_session().create_consumer(amqstomp.Queue(queue))
        conn.start()
        ready.set()
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            if consumer.receive(0.1) is not None:
                counts[index] += 1
    finally:
        conn.close()


@pytest.mark.compiled_pass_only  # the brokers' network: how it spreads messages
def test_prefetch_decides_the_split_of_300_messages_over_three_consumers(activemq_network_factory) -> None:
    net = activemq_network_factory(3)
    split: Dict[int, List[int]] = {}
    for prefetch in (1000, 1):
        queue = _queue()
        counts = [0, 0, 0]
        stop = threading.Event()
        readies = [threading.Event() for _ in range(3)]
        threads = [threading.Thread(target=_drain, daemon=True, name=f"test-consumer-{i}",
                                    args=(f"{m.url}?jms.prefetchPolicy.queuePrefetch={prefetch}", queue, counts, i,
                                          stop, readies[i]))
                   for i, m in enumerate(net.members)]
        for thread in threads:
            thread.start()
        try:
            assert all(ready.wait(30) for ready in readies)
            # the local consumer and one bridge consumer per other member
            assert wait_until(lambda: _stat(net.members[0], queue, "consumerCount") >= 3, 20)
            conn = amqstomp.ConnectionFactory(net.members[0].url).create_connection(timeout_s=30)
            try:
                session = conn.create_session()
                producer = session.create_producer(amqstomp.Queue(queue))
                for i in range(300):
                    producer.send(session.create_text_message("m%03d" % i))
            finally:
                conn.close()
            assert wait_until(lambda: sum(counts) >= 300, 60), counts
            time.sleep(0.5)  # a duplicate would show now
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
        assert sum(counts) == 300, counts
        split[prefetch] = list(counts)
    print("\nsplit of 300 messages produced on member 1 (consumer on member 1/2/3): "
          "prefetch 1000: %s; prefetch 1: %s" % (split[1000], split[1]))
    # room for all of them: the local consumer (higher priority than the bridges) takes them all
    assert split[1000][0] >= 290, split
    # room for one: the bridges (prefetch 1000 each) now compete with the local consumer and carry
    # messages to both other members. How many they win is the broker's timing: 146/146 of 300 in
    # one run here, 50/50 in another on a loaded machine, so only "both get some, the local
    # consumer no longer gets them all" is asserted.
    assert split[1][1] > 0 and split[1][2] > 0 and split[1][0] < 290, split


# --------------------------------------------------------------------------- stranded messages


@pytest.mark.compiled_pass_only  # the brokers' network: replay of stranded messages
@pytest.mark.parametrize("replay", [False, True], ids=["no-replay", "replay"])
def test_messages_left_on_a_broker_without_consumers_come_back_only_with_replay(activemq_network_factory,
                                                                                replay) -> None:
    net = activemq_network_factory(3, replay_when_no_consumers=replay)
    queue = _queue()
    # a consumer on member 2 takes 20 messages produced on member 1 (forwarded over the bridge) ...
    leaver = amqstomp.ConnectionFactory(net.members[1].url).create_connection(timeout_s=30)
    session = leaver.create_session(acknowledge_mode=amqstomp.CLIENT_ACKNOWLEDGE)
    taker = session.create_consumer(amqstomp.Queue(queue))
    leaver.start()
    assert wait_until(lambda: _stat(net.members[0], queue, "consumerCount") >= 1, 20)
    producer_conn = amqstomp.ConnectionFactory(net.members[0].url).create_connection(timeout_s=30)
    try:
        psession = producer_conn.create_session()
        producer = psession.create_producer(amqstomp.Queue(queue))
        for i in range(20):
            producer.send(psession.create_text_message("s%02d" % i))
    finally:
        producer_conn.close()
    taken = [taker.receive(10) for _ in range(20)]
    assert all(m is not None for m in taken)
    # ... and leaves without acknowledging: the 20 are back on member 2's queue, which has no consumer
    # (not its size == 20: conftest.assert_given_back says why; the 20 are counted by consuming them)
    leaver.close()
    assert_given_back(net.members[1], queue)
    # a consumer on member 1, where they were produced
    got = _receive_all(net.members[0].url, queue, 20, 15 if replay else 5)
    if replay:
        assert sorted(got) == ["s%02d" % i for i in range(20)]
    else:
        assert got == []  # stranded on member 2 (ActiveMQ's network bridge never sends a message back): all 20, once
        assert sorted(_receive_all(net.members[1].url, queue, 20, 20)) == ["s%02d" % i for i in range(20)]
    assert_none_left(net.members[1], queue)


def _receive_all(url: str, queue: str, count: int, within_s: float) -> List[str]:
    """The bodies a consumer on ``url`` gets from ``queue``: up to ``count`` of them (``within_s``
    seconds at most), then whatever comes within 0.5 s more (a duplicate, a message too many)."""
    conn = amqstomp.ConnectionFactory(url).create_connection(timeout_s=30)
    try:
        consumer = conn.create_session().create_consumer(amqstomp.Queue(queue))
        conn.start()
        got: List[str] = []
        deadline = time.monotonic() + within_s
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.receive(0.2)
            if message is not None:
                got.append(message.text)
        message = consumer.receive(0.5)
        if message is not None:
            got.append(message.text)
    finally:
        conn.close()
    return got


# --------------------------------------------------------------------------- a member killed


class Member:
    """A producer and a consumer on one member (failover URIs, that member first)."""

    def __init__(self, net: ActiveMQNetwork, index: int, queue: str, count: int) -> None:
        others = [i for i in range(net.n) if i != index]
        url = net.failover_url([index] + others, initialReconnectDelay=10, maxReconnectDelay=200, timeout=60000)
        # synchronous ACKs: settled means the broker's RECEIPT came
        factory = amqstomp.ConnectionFactory(url + "&jms.prefetchPolicy.queuePrefetch=10&jms.sendAcksAsync=false",
                                             send_timeout_ms=60000)
        self.index = index
        self.count = count
        self.queue = queue
        self.consumer_conn = factory.create_connection(timeout_s=30)
        self.producer_conn = factory.create_connection(timeout_s=30)
        self.consumer = self.consumer_conn.create_session(acknowledge_mode=amqstomp.INDIVIDUAL_ACKNOWLEDGE) \
            .create_consumer(amqstomp.Queue(queue))
        self.consumer_conn.start()
        self.psession = self.producer_conn.create_session()
        self.producer = self.psession.create_producer(amqstomp.Queue(queue))
        self.lock = threading.Lock()
        self.sent: List[str] = []  # send() returned: the broker's RECEIPT came
        self.received: List[Tuple[str, str]] = []  # (message-id, body)
        self.settled: Set[str] = set()  # message-ids whose acknowledge() returned (ACK's RECEIPT came)
        self.settled_bodies: Set[str] = set()
        self.in_doubt: Set[str] = set()  # bodies whose ACK was written, its RECEIPT lost with the socket
        self.settled_again: List[str] = []
        self.errors: List[Tuple[str, BaseException]] = []
        self.interrupted_acks = 0
        self.sent_half = threading.Event()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True, name=f"test-producer-{index}"),
                        threading.Thread(target=self._consume, daemon=True, name=f"test-consumer-{index}")]

    def _produce(self) -> None:
        for k in range(self.count):
            body = "p%d-%04d" % (self.index, k)
            try:
                self.producer.send(self.psession.create_text_message(body))
            except Exception as exc:
                self.errors.append(("send " + body, exc))
                return
            with self.lock:
                self.sent.append(body)
            if k == self.count // 2:
                self.sent_half.set()
            time.sleep(0.005)

    def _consume(self) -> None:
        deadline = time.monotonic() + 200
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                message = self.consumer.receive(0.1)
            except Exception as exc:
                self.errors.append(("receive", exc))
                return
            if message is None:
                continue
            message_id = message.message_id or ""
            with self.lock:
                self.received.append((message_id, message.text))
                if message_id in self.settled:
                    self.settled_again.append(message_id)
            try:
                message.acknowledge()
            except AcknowledgeInterruptedError:
                self.interrupted_acks += 1  # not written: its socket was lost; it comes again
                continue
            except AcknowledgeInDoubtError:
                with self.lock:  # written; the broker may have applied it (then it never comes again)
                    self.in_doubt.add(message.text)
                continue
            except Exception as exc:
                self.errors.append(("acknowledge " + message.text, exc))
                continue
            with self.lock:
                self.settled.add(message_id)
                self.settled_bodies.add(message.text)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)
        for conn in (self.producer_conn, self.consumer_conn):
            conn.close()


@pytest.mark.compiled_pass_only  # a member kill: failover threads
def test_a_member_killed_mid_run_loses_nothing_and_settles_nothing_twice(activemq_network_factory) -> None:
    net = activemq_network_factory(3, persistent=True)
    queue = _queue()
    members = [Member(net, i, queue, 150) for i in range(3)]
    try:
        for member in members:
            for thread in member.threads:
                thread.start()
        assert all(member.sent_half.wait(60) for member in members)
        killed_at = time.monotonic()
        net.kill(1)
        time.sleep(1.0)
        net.restart(1)
        restarted_in = time.monotonic() - killed_at
        assert all(wait_until(lambda m=m: not m.threads[0].is_alive(), 90) for m in members)
        sent = {body for m in members for body in m.sent}

        def settled() -> Set[str]:  # every message settled once: a copy whose ACK was refused comes again
            return {body for m in members for body in list(m.settled_bodies) + list(m.in_doubt)}

        wait_until(lambda: sent <= settled(), 90, interval=0.2)
    finally:
        for member in members:
            member.close()
    errors = [e for m in members for e in m.errors]
    settled_again = [i for m in members for i in m.settled_again]
    # across members too: a message settled on one consumer must not come to another
    settled_by: Dict[str, int] = {}
    for m in members:
        for message_id in m.settled:
            settled_by[message_id] = settled_by.get(message_id, 0) + 1
    settled_twice = [i for i, n in settled_by.items() if n > 1]
    lost = sorted(sent - settled())
    per_member = [len(m.received) for m in members]
    in_doubt = sorted(body for m in members for body in m.in_doubt)
    print("\nkill -9 of member 2 and restart after %.1f s: sent %d, received %s, lost %d, "
          "settled again %d, acks refused %d, acks in doubt %d (%s)"
          % (restarted_in, len(sent), per_member, len(lost), len(settled_again) + len(settled_twice),
             sum(m.interrupted_acks for m in members), len(in_doubt), in_doubt))
    assert errors == []
    assert len(sent) == 450
    assert lost == [], [(m.index, [body for _, body in m.received if body in lost]) for m in members]
    # nothing left on any broker: an ACK in doubt was applied (or its message came again and was settled).
    # Not the size 0: the members send PERSISTENT while they (and the bridges) consume, and ActiveMQ 5.17 may
    # leave such a send out of enqueueCount for good (conftest.assert_none_left); what each broker dequeues
    # is not known (bridges, a restart)
    for member in net.members:
        assert_none_left(member, queue)
    assert settled_again == [] and settled_twice == []
