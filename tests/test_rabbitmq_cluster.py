"""A RabbitMQ cluster of the test's own three nodes (amqstomp.testing.rabbitmq_cluster),
quorum queues over STOMP, and a node killed under a consumer: nothing lost.

The nodes are this module's, never the machine's RabbitMQ (own names, ports, data and
cookie); they run for the module (about 40 s to start on 2 cores)."""
import logging
import threading
import time
import uuid

import pytest

import amqstomp
from amqstomp.testing.rabbitmq_cluster import RabbitMQCluster
from conftest import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.timeout(600)]

QUORUM = {"x-queue-type": "quorum", "durable": "true", "auto-delete": "false"}

#: heart-beats (ms) of the test's connections: long enough that a loaded 2-core machine (a busy
#: Erlang VM, a client reader thread waiting for the CPU) misses none; a killed node is seen at
#: once all the same (its sockets are reset by the kernel)
HEARTBEATS = (5000, 5000)


@pytest.fixture(scope="module")
def cluster():
    why = RabbitMQCluster.available()
    if why:
        pytest.skip(why)
    with RabbitMQCluster(3) as started:
        yield started


def _connect(host_and_ports, **kw):
    conn = amqstomp.Connection12(host_and_ports, vhost="/", heartbeats=HEARTBEATS, **kw)
    conn.connect("guest", "guest", wait=True)
    return conn


class _Collect(amqstomp.ConnectionListener):
    def __init__(self, conn=None, ack_every=False):
        self.conn, self.ack_every = conn, ack_every
        self.messages, self.errors = [], []
        self.lock = threading.Lock()

    def on_message(self, frame):
        with self.lock:
            self.messages.append(frame)
        if self.ack_every:
            time.sleep(0.005)  # a consumer with work to do: the kill lands mid-stream
            self.conn.ack(frame.headers["ack"])

    def on_error(self, frame):
        self.errors.append(frame)


@pytest.mark.compiled_pass_only  # a RabbitMQ cluster's behaviour
def test_three_nodes_form_one_cluster_and_a_quorum_queue_spans_them(cluster):
    names = [node.name for node in cluster.nodes]
    assert cluster.running_nodes() == sorted(names)
    assert all(name.endswith("@localhost") and "amqstomp-" in name for name in names)  # never the machine's node
    queue = "/queue/amqstomp-qq-%s" % uuid.uuid4().hex[:8]
    producer = _connect(cluster.nodes[0].host_and_ports)
    consumer = _connect(cluster.nodes[2].host_and_ports)
    collect = _Collect()
    consumer.set_listener("c", collect)
    try:
        producer.send(queue, "on node 1", headers=dict(QUORUM, persistent="true", receipt="sent"))
        consumer.subscribe(queue, id="1", ack="auto", headers=QUORUM)
        assert wait_until(lambda: collect.messages, 30), collect.errors
        assert collect.messages[0].body == "on node 1"  # sent on node 1, consumed on node 3
        listed = cluster.nodes[1].ctl("list_queues", "name", "type", "--quiet")
        assert any(line.split() == [queue.rsplit("/", 1)[1], "quorum"] for line in listed.splitlines()), listed
    finally:
        producer.disconnect()
        consumer.disconnect()


@pytest.mark.compiled_pass_only  # a node kill: failover threads
def test_a_node_killed_under_a_consumer_loses_no_message_of_a_quorum_queue(cluster, caplog):
    """The consumer's own node is SIGKILLed mid-stream: it fails over to another node and
    every message arrives; a message seen twice is one it had not acknowledged, flagged
    ``redelivered``; the node restarts into the cluster."""
    count = 300
    queue = "/queue/amqstomp-qq-kill-%s" % uuid.uuid4().hex[:8]
    # what the client decided about deliveries (drops of a lost socket's, ACKs not sent): named when one is missing
    caplog.set_level(logging.DEBUG, logger="amqstomp.engine")
    caplog.set_level(logging.DEBUG, logger="amqstomp.subscription")
    victim = cluster.nodes[1]
    # the consumer's list starts with the victim: it is connected there when it dies
    order = victim.host_and_ports + cluster.nodes[2].host_and_ports + cluster.nodes[0].host_and_ports
    # reconnect attempts: every 0.2-2 s while the quorum queue elects a new leader (seconds; longer
    # under load), bounded by the wait for the messages below
    consumer = amqstomp.Connection12(order, vhost="/", heartbeats=HEARTBEATS, auto_reconnect=True,
                                     reconnect_attempts_max=200, reconnect_sleep_initial=0.2,
                                     reconnect_sleep_max=2.0)
    collect = _Collect(consumer, ack_every=True)
    consumer.set_listener("c", collect)
    consumer.connect("guest", "guest", wait=True)
    producer = _connect(cluster.nodes[0].host_and_ports)
    try:
        consumer.subscribe(queue, id="1", ack="client-individual",
                           headers=dict(QUORUM, **{"prefetch-count": "20"}))
        for i in range(count):
            producer.send(queue, str(i), headers=dict(QUORUM, persistent="true"))
        producer.send(queue, "last", headers=dict(QUORUM, persistent="true", receipt="all-sent"))
        assert wait_until(lambda: len(collect.messages) >= 60, 120), (len(collect.messages), collect.errors)
        assert consumer.transport.current_host_and_port == victim.host_and_ports[0], \
            "the consumer left the victim before the kill: %s (%s)" % (consumer.reconnector.last_error, collect.errors)
        victim.kill()
        bodies = {str(i) for i in range(count)} | {"last"}
        # a new leader elected, the consumer back, the un-acknowledged redelivered: seconds alone, more
        # under load (the bound is generous; it says only that every message comes)
        assert wait_until(lambda: bodies <= {m.body for m in collect.messages}, 240), (
            "missing after the kill: %s; last error %s; errors %s; first bodies %s; the client's decisions: %s" % (
                sorted(bodies - {m.body for m in collect.messages})[:20], consumer.reconnector.last_error,
                collect.errors, [m.body for m in collect.messages[:5]],
                [r.getMessage() for r in caplog.records if r.levelno <= logging.DEBUG][:20]))
        assert consumer.transport.current_host_and_port != victim.host_and_ports[0]
        seen = set()
        for message in collect.messages:
            if message.body in seen:
                assert message.headers.get("redelivered") == "true", message.headers
            seen.add(message.body)
        cluster.restart(1)
        assert cluster.running_nodes() == sorted(node.name for node in cluster.nodes)
    finally:
        producer.disconnect()
        consumer.disconnect()


@pytest.mark.compiled_pass_only  # the cluster harness's own clean-up
def test_nodes_stop_with_nothing_left_behind():
    """A cluster's processes, directories and threads (the client's too) are gone after stop()."""
    import os

    if RabbitMQCluster.available():
        pytest.skip(RabbitMQCluster.available())
    threads = set(threading.enumerate())
    cluster = RabbitMQCluster(1)
    cluster.start()
    node = cluster.nodes[0]
    pid = node.pid
    assert pid and os.path.exists("/proc/%d" % pid)
    conn = _connect(node.host_and_ports)
    conn.disconnect()
    cluster.restart(0)  # while it runs: stopped first (a second VM would crash on the ports, orphaning the first)
    assert node.pid != pid and not os.path.exists("/proc/%d" % pid) and node.running
    assert not os.path.exists("erl_crash.dump")  # a crash dump goes to the node's directory, if any
    pid = node.pid
    cluster.stop()
    assert not os.path.exists(cluster.base_dir)
    assert wait_until(lambda: not os.path.exists("/proc/%d" % pid), 10)
    assert wait_until(lambda: set(threading.enumerate()) <= threads, 10), set(threading.enumerate()) - threads


@pytest.mark.parametrize("nodes", [0, 6, 2.5, "3", True])
def test_a_cluster_size_that_is_not_an_int_from_1_to_5_is_refused_before_anything_is_made(nodes, tmp_path,
                                                                                          monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ValueError, match="nodes=%r" % (nodes,)):
        RabbitMQCluster(nodes)
    assert list(tmp_path.iterdir()) == []  # no directory left behind
