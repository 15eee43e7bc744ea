"""The smallest real round trips, producer -> ActiveMQ -> consumer, once through the
stomp.py-compatible API and once through the JMS-style API.

``scripts/test.sh`` runs this file, with the codec/flow differential tests, against the
manylinux wheel of every Python version the package declares (the full suite runs on one
version): it shows that each wheel's compiled codec and flow control carry real traffic, with
the Python version's own behaviour (an ``IntEnum``'s ``str()`` is its name before Python 3.11,
its digits after). The broker is the session's ``activemq`` fixture (amqstomp's pytest plugin).
"""
import enum
import queue
import uuid

import pytest
from conftest import wait_until

import amqstomp as stomp
from amqstomp.jms import CLIENT_ACKNOWLEDGE, NON_PERSISTENT, BytesMessage, ConnectionFactory, Queue, TextMessage
from amqstomp.testing import queue_statistics

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]


class Level(enum.IntEnum):
    HIGH = 8


def _size(broker, name):
    try:
        return queue_statistics(broker, name)["size"]
    except LookupError:  # no such queue yet
        return None


def test_stomp_py_api_round_trip(activemq):
    name = "smoke.stomp." + uuid.uuid4().hex[:10]
    frames = queue.Queue()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame):
            frames.put(frame)

    bodies = ["plain", "h\u00e9llo \u2603", "x" * 70000]  # ASCII, UTF-8, a body over 64 KiB
    conn = stomp.Connection12(activemq.host_and_ports)
    conn.set_listener("smoke", Listener())
    conn.connect("admin", "admin", wait=True)
    try:
        conn.subscribe("/queue/" + name, id="smoke", ack="client-individual")
        for i, body in enumerate(bodies):
            conn.send("/queue/" + name, body, headers={"seq": i, "colon:and\\slash": "v\nw"})
        for i, body in enumerate(bodies):
            frame = frames.get(timeout=10)
            assert (frame.headers["seq"], frame.body) == (str(i), body)
            assert frame.headers["colon:and\\slash"] == "v\nw"  # STOMP 1.2 header escaping both ways
            conn.ack(frame.headers["ack"])
        assert wait_until(lambda: _size(activemq, name) == 0, 10), "the acks did not reach the broker"
    finally:
        conn.disconnect()


def test_jms_api_round_trip(activemq):
    dest = Queue("smoke.jms." + uuid.uuid4().hex[:10])
    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session(acknowledge_mode=CLIENT_ACKNOWLEDGE)
        producer = session.create_producer(dest)
        text = TextMessage("h\u00e9llo")
        text.set_property("level", Level.HIGH)
        producer.send(text, priority=Level.HIGH)  # an IntEnum: its digits go out, on every Python
        producer.send(BytesMessage(b"\x00\x01\xff"), delivery_mode=NON_PERSISTENT)
        consumer = session.create_consumer(dest)
        connection.start()
        first, second = consumer.receive(10), consumer.receive(10)
        assert first is not None and second is not None, "a message did not arrive"
        assert (first.text, first.priority, first.get_property("level")) == ("h\u00e9llo", 8, "8")
        assert second.data == b"\x00\x01\xff"
        second.acknowledge()  # CLIENT_ACKNOWLEDGE: both
    assert wait_until(lambda: _size(activemq, dest.name) == 0, 10), "the acknowledgement did not reach the broker"
