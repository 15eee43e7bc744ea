"""Flow control's pause/resume of reading against a real ActiveMQ: no lost wake-up.

The reader decides "this subscription's buffer is full: pause" and the consumer's
thread "drained to half: resume". When the two decisions and the transport's
pause/resume calls are not one atomic transition, a resume can come between the
reader's decision and its pause call and be lost: reading stays paused forever
with the connection up (and with ack:auto the whole buffer is lost). The tests
widen that window deterministically: the reader sleeps 50 ms each time it takes
the applier's pause lock (the first few times), and the consumer, held on its
first message until the reader is at that point, drains meanwhile."""
import threading
import time
import uuid

import pytest
from conftest import fill_queue, wait_until

import amqstomp
from amqstomp.jms import AT_MOST_ONCE, NON_PERSISTENT, ConnectionFactory, Queue, TextMessage

pytestmark = pytest.mark.broker


def qname(prefix="pause"):
    return "%s.%s" % (prefix, uuid.uuid4().hex[:10])


def _on_reader():
    """The calling thread is a transport's reader (amqstomp-reader-N, amqstomp-jmsN-consumer-reader)."""
    name = threading.current_thread().name
    return name.startswith("amqstomp") and "reader" in name


class ReaderDelayLock:
    """A stand-in for the pause lock (``SubscriptionApplier._pause_lock``): the reader
    thread sleeps ``delay`` seconds before each of its first ``times`` acquisitions (the
    critical point between the reader's pause decision and its pause call)."""

    def __init__(self, delay=0.05, times=3):
        self._lock = threading.Lock()
        self.delay = delay
        self.left = times
        self.delayed = 0
        self.entered = threading.Event()  # the reader reached the critical point

    def _maybe_sleep(self):
        if self.left > 0 and _on_reader():
            self.left -= 1
            self.delayed += 1
            self.entered.set()
            time.sleep(self.delay)

    def acquire(self, blocking=True, timeout=-1):
        self._maybe_sleep()
        return self._lock.acquire(blocking, timeout)

    def release(self):
        self._lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


class Counter(amqstomp.ConnectionListener):
    """Holds its first message until ``hold`` is set (at most 10 s), then takes
    every message at once."""

    def __init__(self, hold):
        self.seqs = []
        self.hold = hold

    def on_message(self, frame):
        if not self.seqs:
            self.hold.wait(10)
        self.seqs.append(int(frame.headers["seq"]))


@pytest.mark.timeout(90)
@pytest.mark.parametrize("ack", ["auto", "client"])
def test_no_lost_wakeup_when_the_consumer_drains_during_the_pause_decision(activemq, ack):
    """stomp.py API: 1,000 messages through a 20-message buffer (pause at 20, resume
    at 10) with the reader delayed 50 ms at its pause point: every message comes.
    Before the fix: reading stayed paused after the first pause (20 of 1,000)."""
    q = "/queue/" + qname()
    count = 1000
    fill_queue(activemq, q, count)
    hook = ReaderDelayLock()
    rec = Counter(hook.entered)
    conn = amqstomp.Connection12(activemq.host_and_ports, auto_decode=False, heartbeats=(1000, 1000))
    conn.set_listener("rec", rec)
    conn.connect(wait=True)
    try:
        conn.subscriptions.applier._pause_lock = hook
        # client: amqstomp sends the (cumulative) ACKs; the buffer bound is lowered to the
        # prefetch so that it pauses at all
        options = {"max_buffered": 20, "optimize_acknowledge": True} if ack == "client" else {}
        conn.subscribe(q, id=1, ack=ack, prefetch_size=20, **options)
        got_all = wait_until(lambda: len(rec.seqs) >= count, 30)
        assert hook.delayed >= 1  # the reader did pause (and hit the delay)
        assert got_all, "%d of %d received; reading paused: %s" % (
            len(rec.seqs), count, conn.transport.reading_paused)
        assert sorted(rec.seqs) == list(range(count))
        assert not conn.transport.reading_paused
        assert conn.is_connected()
    finally:
        conn.disconnect()


@pytest.mark.timeout(90)
def test_no_lost_wakeup_jms_at_most_once(activemq):
    """JMS API (same SubscriptionManager): an AT_MOST_ONCE (ack:auto) consumer with
    prefetch 20 and the reader delayed at its pause point receives all 1,000."""
    queue = Queue(qname("pausejms"))
    count = 1000
    factory = ConnectionFactory(activemq.url + "?jms.prefetchPolicy.queuePrefetch=20")
    with factory.create_connection() as conn:
        producer = conn.create_session().create_producer(queue)
        for i in range(count):
            producer.send(TextMessage(str(i)), delivery_mode=NON_PERSISTENT)
        hook = ReaderDelayLock(delay=0.5)  # the session's receive() is slower than a listener
        conn._state.consumer_link.manager.applier._pause_lock = hook
        consumer = conn.create_session(False, AT_MOST_ONCE).create_consumer(queue)
        conn.start()
        assert hook.entered.wait(10)  # the reader is at its pause point: drain now
        got = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.receive(1.0)
            if message is not None:
                got.append(int(message.text))
        assert hook.delayed >= 1
        assert len(got) == count, "%d of %d received; reading paused: %s" % (
            len(got), count, conn._state.consumer_link.transport.reading_paused)
        assert got == list(range(count))


@pytest.mark.timeout(60)
def test_a_pause_in_force_during_a_receipt_wait_holds_after_it(activemq):
    """transport: a pause in force when a receipt wait on the dispatcher begins (the
    wait reads on meanwhile) holds again when the wait ends (it used to be dropped)."""
    conn = amqstomp.Connection12(activemq.host_and_ports, auto_decode=False)
    seen = []

    class L(amqstomp.ConnectionListener):
        def on_message(self, frame):
            transport = conn.transport
            if frame.body == b"first":
                future = transport.send_frame("SEND", {"destination": "/queue/" + qname("r"),
                                                       "receipt": "r1"}, b"x")
                transport.pause_reading()  # while the wait below suspends the pause
                transport.wait_future(future, 10)
                seen.append(transport.reading_paused)

    conn.set_listener("l", L())
    conn.connect(wait=True)
    try:
        q = "/queue/" + qname()
        conn.subscribe(q, id=1, ack="auto", headers={"receipt": "s"})
        conn.wait_for_receipt("s", 10)
        conn.transport.send_frame("SEND", {"destination": q}, b"first")
        assert wait_until(lambda: seen, 10)
        assert seen == [True]
        conn.transport.resume_reading()
        assert not conn.transport.reading_paused
    finally:
        conn.disconnect()
