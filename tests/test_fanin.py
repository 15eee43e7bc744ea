"""The fan-in consumer and the spreading producer (amqstomp.jms.FanInConsumer,
amqstomp.jms.SpreadingProducer; docs/guides/scaling-out.md), on real brokers:

- the stranded-message scenario of tests/test_network_of_brokers.py (20 messages left
  on member 2 by a consumer that went away unacknowledged, no replayWhenNoConsumers):
  a fan-in consumer over the members gets all 20, none twice;
- a fan-in consumer over two standalone brokers (no network) gets what was produced on
  each, in each broker's order, its prefetch split over them; a broker stopped is reported
  and left out while the other goes on;
- a spreading producer puts messages on every member; a stopped member's share goes to
  the others; after its restart a fan-in consumer finds every message sent.
"""
import socket
import threading
import time
import uuid
from typing import Any, Dict, List

import pytest
from conftest import StallProxy, assert_consumed, assert_given_back, assert_none_left, wait_until

import amqstomp
from amqstomp.exception import AcknowledgeInterruptedError
from amqstomp.jms import FanInConsumer, SpreadingProducer, TextMessage
from amqstomp.jms._members import member_urls, split_prefetch
from amqstomp.testing import queue_statistics

pytestmark = pytest.mark.timeout(240)


def _queue() -> str:
    return "amqstomp-fanin-" + uuid.uuid4().hex[:10]


def _stat(broker: Any, queue: str, name: str = "size") -> int:
    try:
        return int(queue_statistics(broker, queue).get(name, 0))
    except LookupError:
        return 0


_size = _stat


def _produce(url: str, queue: str, bodies: List[str]) -> None:
    conn = amqstomp.ConnectionFactory(url).create_connection(timeout_s=30)
    try:
        session = conn.create_session()
        producer = session.create_producer(amqstomp.Queue(queue))
        for body in bodies:
            producer.send(session.create_text_message(body))
    finally:
        conn.close()


def _acknowledge(message: Any) -> None:
    try:
        message.acknowledge()
    except AcknowledgeInterruptedError:  # its socket was lost (a broker stopped): it comes again
        pass


def _drain(consumer: FanInConsumer, count: int, seconds: float) -> List[str]:
    got: List[str] = []
    for _ in range(int(seconds / 0.2)):  # bounded: at most `seconds`
        if len(got) >= count:
            break
        message = consumer.receive(0.2)
        if message is not None:
            got.append(message.text)
    return got


def test_member_urls_and_the_prefetch_split() -> None:
    assert member_urls("failover:(stomp://a:1,stomp://b:2)?randomize=false&maxReconnectDelay=200"
                       "&priorityBackup=true") == ["failover:(stomp://a:1)?maxReconnectDelay=200",
                                                   "failover:(stomp://b:2)?maxReconnectDelay=200"]
    assert member_urls(["stomp://a:1", "stomp://b:2"]) == ["stomp://a:1", "stomp://b:2"]
    # a comma after the last broker is allowed (as in ActiveMQ); an empty broker is refused, naming the
    # URI given and where (not the one-member URI made of it)
    assert member_urls("failover:(stomp://a:1,stomp://b:2,)") == ["failover:(stomp://a:1)", "failover:(stomp://b:2)"]
    with pytest.raises(ValueError, match=r"'failover:\(stomp://a:1,,stomp://b:2\)' has an empty broker: .* index 21"):
        member_urls("failover:(stomp://a:1,,stomp://b:2)")
    assert split_prefetch(1000, 3) == [334, 333, 333] and split_prefetch(2, 3) == [1, 1, 1]
    with pytest.raises(ValueError, match="parentheses"):
        member_urls("failover:stomp://a:1,stomp://b:2")
    with pytest.raises(TypeError, match="brokers must be"):
        member_urls([("a", 1)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="prefetch must be an int >= 1"):
        split_prefetch(0, 2)
    with pytest.raises(ValueError, match="a transaction cannot span brokers"):
        FanInConsumer(["stomp://127.0.0.1:1"], "q", acknowledge_mode=amqstomp.SESSION_TRANSACTED)
    # a broker listed twice: refused, naming it (and never its password)
    with pytest.raises(amqstomp.exception.ConfigurationError, match="B:2 is listed twice") as twice:
        member_urls(["stomp://a:1", "stomp://b:2", "stomp://B:2?jms.password=pw1"])
    assert "pw1" not in str(twice.value)
    with pytest.raises(amqstomp.exception.ConfigurationError, match="a:1 is listed twice"):
        FanInConsumer("failover:(stomp://a:1,stomp://b:2,stomp://a:1)", "q")
    with pytest.raises(amqstomp.exception.ConfigurationError, match="a:1 is listed twice"):
        SpreadingProducer(["failover:(stomp://a:1,stomp://c:3)", "stomp://a:1"], "q")
    # rebalanceInterval in a URI the fan-in splits into one member per broker: refused, saying so
    with pytest.raises(amqstomp.exception.ConfigurationError, match="one member per broker"):
        FanInConsumer("failover:(stomp://a:1,stomp://b:2)?rebalanceInterval=2000", "q")
    # a selector that is not a str: TypeError naming it
    with pytest.raises(TypeError, match="selector must be a JMS selector"):
        FanInConsumer(["stomp://127.0.0.1:1"], "q", selector=42)  # type: ignore[arg-type]


def test_a_fan_in_consumer_takes_the_messages_stranded_without_replay(activemq_network_factory) -> None:
    net = activemq_network_factory(3, replay_when_no_consumers=False)
    queue = _queue()
    # as in test_network_of_brokers: a consumer on member 2 takes 20 messages produced on member 1 ...
    leaver = amqstomp.ConnectionFactory(net.members[1].url).create_connection(timeout_s=30)
    taker = leaver.create_session(acknowledge_mode=amqstomp.CLIENT_ACKNOWLEDGE).create_consumer(amqstomp.Queue(queue))
    leaver.start()
    assert wait_until(lambda: _stat(net.members[0], queue, "consumerCount") >= 1, 20)
    _produce(net.members[0].url, queue, ["s%02d" % i for i in range(20)])
    assert all(taker.receive(10) is not None for _ in range(20))
    leaver.close()  # ... and leaves without acknowledging: the 20 are on member 2, no consumer there
    assert_given_back(net.members[1], queue)  # (not its size == 20: conftest says why; the 20 are consumed below)
    # one logical consumer on every member (the URI's members, each its own failover)
    with FanInConsumer(net.failover_url(maxReconnectDelay=200), amqstomp.Queue(queue),
                       acknowledge_mode=amqstomp.INDIVIDUAL_ACKNOWLEDGE, prefetch=30, timeout_s=30) as consumer:
        assert consumer.prefetch_shares == [10, 10, 10]
        got: List[str] = []
        for _ in range(100):  # at most 20 s
            if len(got) >= 20:
                break
            message = consumer.receive(0.2)
            if message is not None:
                got.append(message.text)
                message.acknowledge()
        assert consumer.receive(0.5) is None  # nothing comes twice
    assert sorted(got) == ["s%02d" % i for i in range(20)]



def test_a_fan_in_consumer_over_standalone_brokers(activemq, activemq_factory) -> None:
    # the session's broker is the one that stays; the one stopped below is the test's own
    brokers = [activemq, activemq_factory()]
    queue = _queue()
    for i, broker in enumerate(brokers):
        _produce(broker.url, queue, ["b%d-%03d" % (i, k) for k in range(30)])
    heard: List[str] = []
    threads = threading.active_count()
    consumer = FanInConsumer([b.url for b in brokers], queue, prefetch=7, timeout_s=30)
    try:
        consumer.set_exception_listener(lambda url, exc: heard.append(url))
        assert consumer.prefetch_shares == [4, 3]
        got = _drain(consumer, 60, 30)
        assert sorted(got) == sorted("b%d-%03d" % (i, k) for i in range(2) for k in range(30))
        for i in range(2):  # each broker's messages in its order
            mine = [body for body in got if body.startswith("b%d-" % i)]
            assert mine == sorted(mine)
        assert consumer.receive(0.3) is None
        # a listener: on each broker's session thread
        heard_by_listener: List[str] = []
        consumer.set_message_listener(lambda message: heard_by_listener.append(message.text))
        with pytest.raises(amqstomp.jms.IllegalStateError, match="message listener"):
            consumer.receive(0)
        for i, broker in enumerate(brokers):
            _produce(broker.url, queue, ["l%d-%d" % (i, k) for k in range(5)])
        assert wait_until(lambda: len(heard_by_listener) >= 10, 20), heard_by_listener
        assert sorted(heard_by_listener) == sorted("l%d-%d" % (i, k) for i in range(2) for k in range(5))
        consumer.set_message_listener(None)
        # a broker stopped (a stomp:// member: no reconnect) is reported and left out
        brokers[1].stop()
        assert wait_until(lambda: brokers[1].url in consumer.lost, 20), consumer.lost
        # the member shows in ``lost`` before its connection's thread calls the listener
        assert wait_until(lambda: len(heard) >= 1, 10) and heard == [brokers[1].url], heard
        _produce(brokers[0].url, queue, ["after-%d" % k for k in range(5)])
        assert _drain(consumer, 5, 20) == ["after-%d" % k for k in range(5)]
    finally:
        consumer.close()
    assert consumer.closed and wait_until(lambda: threading.active_count() <= threads, 10), threading.enumerate()
    # 30 before the consumer, 5 to its listener, 5 after the stop (those 10 PERSISTENT, sent while it
    # consumed: dequeues, not the size; conftest.assert_consumed says why)
    assert_consumed(brokers[0], queue, 40)


@pytest.mark.compiled_pass_only  # a member stopped mid-run: the spreading and failover threads
def test_a_spreading_producer_spreads_and_skips_a_stopped_broker(activemq_network_factory) -> None:
    """Also: a fan-in consumer whose member's broker stops reconnects to it (its own failover)."""
    net = activemq_network_factory(3, persistent=True)
    queue = _queue()
    # each member its own failover: a send caught by its broker's stop waits 1 s, then goes elsewhere
    url = net.failover_url(initialReconnectDelay=50, maxReconnectDelay=200, timeout=1000)
    sent: Dict[str, str] = {}
    got: List[str] = []

    def drain_until_all(consumer: FanInConsumer, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not set(sent) <= set(got) and time.monotonic() < deadline:
            message = consumer.receive(0.2)
            if message is not None:
                got.append(message.text)
                _acknowledge(message)

    with SpreadingProducer(url, amqstomp.Queue(queue), timeout_s=30) as producer:
        brokers = producer.brokers
        for k in range(30):
            body = "m%03d" % k
            sent[body] = producer.send(TextMessage(body))
        assert producer.sent == [10, 10, 10]  # round robin while all take
        # no consumer anywhere: each broker keeps what it was sent
        assert [_size(m, queue) for m in net.members] == [10, 10, 10]
        with FanInConsumer(net.failover_url(initialReconnectDelay=50, maxReconnectDelay=200), amqstomp.Queue(queue),
                           acknowledge_mode=amqstomp.INDIVIDUAL_ACKNOWLEDGE, timeout_s=30) as consumer:
            drain_until_all(consumer, 20)
            assert sorted(got) == sorted(sent)
            net.stop_member(1)
            for k in range(30, 60):
                body = "m%03d" % k
                sent[body] = producer.send(TextMessage(body))
            after = producer.sent
            # member 2's share went to the others, evenly
            assert after[1] <= 11 and after[0] >= 24 and after[2] >= 24, after
            assert all(sent["m%03d" % k] != brokers[1] for k in range(31, 60))
            net.restart(1)
            drain_until_all(consumer, 40)
            # copies come after: a send re-sent after the stop, a message whose ACK went with the stopped
            # broker's socket, one a bridge had taken: take them until 2 s pass without one (at most 30 s)
            quiet_since, deadline = time.monotonic(), time.monotonic() + 30
            while time.monotonic() - quiet_since < 2.0 and time.monotonic() < deadline:
                message = consumer.receive(0.2)
                if message is not None:
                    got.append(message.text)
                    _acknowledge(message)
                    quiet_since = time.monotonic()
            # the member on the stopped broker reconnected (its own failover): not lost
            assert consumer.lost == {} and consumer.connections[1].failure is None
    print("\nspreading producer, member 2 stopped after 30 of 60: sent per member %s, received %d (%d distinct): %s"
          % (after, len(got), len(set(got)), sorted(b for b in set(got) if got.count(b) > 1)))
    assert set(got) == set(sent)  # none lost
    # nothing left on any member (sent while consumed, bridged, re-sent, a restart between: what each member
    # dequeued is not known; the size may be below 0, conftest.assert_none_left says why)
    for member in net.members:
        assert_none_left(member, queue)



def test_a_full_broker_blocks_only_the_send_that_found_it_full(activemq_factory) -> None:
    """Broker 1 has a 1 MB memory limit with producer flow control, broker 2 room: two threads
    send 10 kB messages through one spreading producer; the send that finds broker 1 full waits
    there (its window), while the other thread's sends all go to broker 2. A consumer on broker
    1 then frees it, the waiting send completes, and every message is on one of the brokers."""
    full = activemq_factory(memory_limit="1 mb", producer_flow_control=True)
    roomy = activemq_factory()
    queue = _queue()
    body = "x" * 10000
    per_thread = 150  # 1.5 MB each: more than broker 1 holds
    done: Dict[int, int] = {0: 0, 1: 0}
    errors: List[BaseException] = []
    producer = SpreadingProducer([full.url, roomy.url], queue, producer_window_size=256 * 1024, timeout_s=30)
    producer.delivery_mode = amqstomp.jms.NON_PERSISTENT

    def send(thread: int) -> None:
        try:
            for k in range(per_thread):
                producer.send(TextMessage("%d-%03d:%s" % (thread, k, body)))
                done[thread] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(i,), daemon=True, name="test-sender-%d" % i) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        # one thread finishes, all its later sends on broker 2, while the other waits on broker 1's window
        assert wait_until(lambda: not all(t.is_alive() for t in threads), 60), (done, producer.sent)
        assert any(t.is_alive() for t in threads), (done, producer.sent)  # still held by broker 1
        waiting = producer.sent
        # broker 1 holds fewer than one thread's worth; the finished thread's later sends all went to broker 2
        assert errors == [] and waiting[0] < per_thread and sum(waiting) == done[0] + done[1], (waiting, done)
        drained: List[str] = []
        conn = amqstomp.ConnectionFactory(full.url).create_connection(timeout_s=30)
        try:
            consumer = conn.create_session().create_consumer(amqstomp.Queue(queue))
            conn.start()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (any(t.is_alive() for t in threads) or
                                                    len(drained) < producer.sent[0]):
                message = consumer.receive(0.2)
                if message is not None:
                    drained.append(message.text.split(":")[0])
        finally:
            conn.close()
        for thread in threads:
            thread.join(30)
        assert errors == [] and done == {0: per_thread, 1: per_thread}
        sent = producer.sent
    finally:
        producer.close()
    assert sum(sent) == 2 * per_thread and len(drained) == sent[0]
    print("\nspreading producer, broker 1 full: sent per broker %s (while one send waited: %s)" % (sent, waiting))
    assert wait_until(lambda: _size(roomy, queue) == sent[1], 10), (_size(roomy, queue), sent)
    assert len(set(drained)) == len(drained)


def test_no_member_url_shows_its_password(activemq_factory, caplog) -> None:
    """A member URL's jms.password shows nowhere the composition hands a URL out: the
    exception listener's argument, ``lost``, ``brokers``, repr, exceptions, logs (any level)."""
    caplog.set_level("DEBUG", logger="amqstomp")
    secret = "Secr3tPW-" + uuid.uuid4().hex[:6]
    broker = activemq_factory()
    url = "%s?jms.userName=admin&jms.password=%s" % (broker.url, secret)
    queue = _queue()
    consumer = FanInConsumer([url], queue, timeout_s=30)
    producer = SpreadingProducer([url], queue, timeout_s=30)
    heard: List[str] = []
    consumer.set_exception_listener(lambda u, exc: heard.append(u))
    producer.set_exception_listener(lambda u, exc: heard.append(u))
    shown: List[str] = [repr(consumer), repr(producer), producer.send("x")]
    try:
        broker.stop()
        assert wait_until(lambda: consumer.lost, 20), consumer.lost
        with pytest.raises(amqstomp.exception.ConnectionClosedException) as receiving:
            for _ in range(50):  # bounded: each receive waits at most 0.2 s
                consumer.receive(0.2)
        with pytest.raises(amqstomp.exception.StompException) as sending:
            producer.send("y")
        shown += [str(receiving.value), str(sending.value)]
        shown += heard + list(consumer.lost) + list(producer.lost) + consumer.brokers + producer.brokers
        shown += [repr(consumer), repr(producer), caplog.text]
        assert heard and all("jms.password" in u for u in heard)  # the URL is there, its password not
        assert not [text for text in shown if secret in text], shown
    finally:
        consumer.close()
        producer.close()
    assert secret not in caplog.text


def test_a_broker_that_never_connects_fails_the_start_up(activemq) -> None:
    """A failover URI with one broker down, no ``timeout_s``, no ``startupMaxReconnectAttempts``:
    the construction raises ConnectFailedException after the members' bounded start-up attempts."""
    broker = activemq
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        down = sock.getsockname()[1]
    uri = "failover:(%s,stomp://127.0.0.1:%d)?maxReconnectDelay=200" % (broker.url, down)
    outcome: List[Any] = []

    def construct() -> None:
        try:
            outcome.append(FanInConsumer(uri, _queue()))
        except BaseException as exc:  # what the construction raised
            outcome.append(exc)
    thread = threading.Thread(target=construct, daemon=True)
    thread.start()
    thread.join(60)
    assert outcome, "the construction still blocks after 60 s"
    if isinstance(outcome[0], FanInConsumer):
        outcome[0].close()
    assert isinstance(outcome[0], amqstomp.exception.ConnectFailedException), outcome
    assert "127.0.0.1:%d" % down in str(outcome[0])


def test_close_while_a_send_waits_on_silent_brokers_is_bounded(activemq, stall_proxy) -> None:
    """A spreading producer's close() from another thread, while a PERSISTENT send waits for
    the RECEIPT of a broker gone silent (each member behind a proxy that forwards nothing),
    returns within one JMS close timeout (jms.closeTimeout=4000, the members closed at once),
    not after the send's jms.sendTimeout (60 s) nor one closeTimeout per member (12 s)."""
    proxies = [stall_proxy] + [StallProxy(("127.0.0.1", activemq.stomp_port)) for _ in range(2)]
    try:
        urls = ["stomp://127.0.0.1:%d?jms.closeTimeout=4000&jms.sendTimeout=60000" % p.port for p in proxies]
        producer = SpreadingProducer(urls, _queue(), timeout_s=30)
        producer.send("before")
        for proxy in proxies:
            proxy.stall()
        sending: List[Any] = []

        def send() -> None:
            try:
                sending.append(producer.send("stuck", amqstomp.jms.PERSISTENT))
            except BaseException as exc:  # what the stuck send ends with
                sending.append(exc)
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        sender.join(1.0)
        assert not sending, sending  # it waits for the silent broker's RECEIPT
        closing: List[Any] = []

        def close() -> None:
            try:
                producer.close()
                closing.append("returned")
            except BaseException as exc:
                closing.append(exc)
        closer = threading.Thread(target=close, daemon=True)
        closer.start()
        closer.join(9)  # one closeTimeout is 4 s (5 s to spare on a loaded machine); in turn: 12 s
        for proxy in proxies:
            proxy.resume()
        assert closing == ["returned"], "close() still blocked 9 s after it began: %r" % (closing,)
        sender.join(10)
        assert sending and isinstance(sending[0], amqstomp.exception.StompException), sending
    finally:
        for proxy in proxies[1:]:
            proxy.close()


def test_every_close_waits_for_the_running_listeners(activemq) -> None:
    """Two threads close a fan-in consumer while its listener runs: neither close()
    returns before the listener has finished (JMS: close waits for running listeners)."""
    broker = activemq
    queue = _queue()
    _produce(broker.url, queue, ["m0"])
    consumer = FanInConsumer([broker.url], queue, timeout_s=30)
    events: List[str] = []
    started = threading.Event()
    release = threading.Event()

    def listener(message: Any) -> None:
        started.set()
        release.wait(10)
        events.append("listener ended")
    consumer.set_message_listener(listener)
    assert started.wait(20)

    def close(n: int) -> None:
        consumer.close()
        events.append("close %d returned" % n)
    closers = [threading.Thread(target=close, args=(n,), daemon=True) for n in (1, 2)]
    closers[0].start()
    assert wait_until(lambda: consumer.closed, 10)
    closers[1].start()
    closers[1].join(1.0)  # the second close has had time to return, were it not to wait
    release.set()
    for closer in closers:
        closer.join(20)
    assert events[0] == "listener ended" and sorted(events[1:]) == ["close 1 returned", "close 2 returned"], events
