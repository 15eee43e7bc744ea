"""Large bodies through a real ActiveMQ and the threaded reader (issue 21): the rest of a body of
a known content-length is read straight into its bytes (amqstomp._io.channel.stream_reader); every
body must come out byte for byte, in order, whatever the sizes around it."""
import os
import uuid

import pytest

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

SIZES = [10, 20_000, 65_536, 10, 300_001, 65_536, 65_536, (2 << 20) + 7, 5, 1 << 20]


@pytest.mark.parametrize("ack, prefetch", [("auto", 1000), ("client-individual", 1)])
def test_large_bodies_arrive_whole(stomp_connect, ack, prefetch):
    producer, _ = stomp_connect()
    consumer, col = stomp_connect(auto_decode=False)
    queue = "/queue/big.bodies.%s" % uuid.uuid4().hex
    bodies = [os.urandom(size) for size in SIZES]
    for body in bodies:
        producer.send(queue, body)
    consumer.subscribe(queue, id="1", ack=ack, headers={"activemq.prefetchSize": str(prefetch)})
    got = []
    for _ in range(len(bodies)):  # bounded: one wait per message
        messages = col.wait_messages(len(got) + 1, timeout=30)
        assert len(messages) > len(got), "%d of %d messages came" % (len(got), len(bodies))
        frame = messages[len(got)]
        got.append(frame.body)
        if ack == "client-individual":
            consumer.ack(frame.headers["ack"])
    assert [len(b) for b in got] == SIZES
    assert all(type(b) is bytes for b in got)
    assert got == bodies
