"""rebalanceInterval / rebalance_interval_ms: a failover connection moves to another
broker of its list every interval, so connections spread over standalone brokers,
without losing a message or settling one twice (docs/guides/scaling-out.md "Rebalancing").

- the pure plan (amqstomp._core.rebalance.Rebalance): when a move is due, which brokers
  to try and in which order, what a failed probe means -- in memory, no threads;
- the options: URI, keywords of both APIs, what is refused and why;
- both APIs on two standalone real brokers (no network between them): a busy consumer
  (stomp.py client-individual; JMS CLIENT_ACKNOWLEDGE), synchronous acknowledgements
  (settled = the ACK's RECEIPT came), a 2.5 s interval, producers sending a known set to
  both brokers meanwhile: the consumer moves to the other broker, keeps moving, and
  settles every message once; what a move hands back stays on the broker it left and is
  drained by the consumer when it comes back there (counted: redelivered deliveries).
"""
import queue
import random
import threading
import time
import uuid
from collections import Counter
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import pytest
from conftest import assert_consumed, wait_until

import amqstomp
from amqstomp._core.backoff import ReconnectPolicy
from amqstomp._core import settle
from amqstomp._core.rebalance import MAX_SETTLE_MS, MIN_REBALANCE_INTERVAL_MS, Rebalance
from amqstomp.exception import AcknowledgeInDoubtError, AcknowledgeInterruptedError, ConfigurationError
from amqstomp.testing._process import close_all
from amqstomp.testing.broker import ActiveMQBroker, start_broker
from amqstomp.testing.statistics import queue_statistics
from amqstomp.uri import parse_uri

pytestmark = pytest.mark.timeout(240)

A, B, C = ("a", 1), ("b", 2), ("c", 3)


# --------------------------------------------------------------------------- the plan, in memory


def test_a_move_is_due_one_interval_after_each_connection_to_the_next_broker_round_robin() -> None:
    plan = Rebalance(2500, [A, B, C])
    assert plan.wait_s(0.0) is None and plan.due(1e9) == []  # not connected: nothing planned
    plan.connected(A, 100.0)
    assert plan.due(102.4) == [] and plan.wait_s(102.0) == pytest.approx(0.5)
    assert plan.due(102.5) == [B, C]  # the next one first, then the one after; never A
    plan.probe_failed(102.6)  # neither answered: stay, try again one interval later
    assert plan.next_at == pytest.approx(105.1) and plan.due(105.0) == []
    plan.stopped()  # moving (or lost): nothing planned until the next connection
    assert plan.wait_s(105.1) is None and plan.due(1e9) == []
    plan.connected(B, 200.0)
    assert plan.due(202.5) == [C, A]
    plan.connected(C, 300.0)  # wraps round
    assert plan.due(302.5) == [A, B]
    two = Rebalance(1000, [A, B, A])  # a broker listed twice is one broker
    two.connected(A, 0.0)
    assert two.due(1.0) == [B]


def test_a_due_move_settles_first_until_nothing_is_held_or_the_bound_passes() -> None:
    plan = Rebalance(2500, [A, B])
    assert plan.settle_ms == 2500 and Rebalance(600000, [A, B]).settle_ms == MAX_SETTLE_MS
    plan.connected(A, 0.0)
    assert plan.move_now(2.5, 7)  # not settling: nothing to wait for
    plan.settling(2.5)  # a broker answered: nothing new is handed over from now
    assert not plan.move_now(2.6, 3) and plan.settle_wait_s(2.6) == pytest.approx(2.4)
    assert plan.move_now(2.7, 0)  # the application settled all it held: move at once
    assert not plan.move_now(4.99, 1) and plan.move_now(5.0, 1)  # the bound: what it holds is handed back
    assert plan.settle_wait_s(6.0) == 0.0
    plan.stopped()  # moving (or lost): no longer settling
    assert plan.settle_until is None and plan.settle_wait_s(6.0) == 0.0 and plan.move_now(6.0, 9)


def test_a_socket_settling_before_a_move_hands_nothing_more_over() -> None:
    class Alive:
        def link_alive(self, seq: int) -> bool:
            return seq == 4

    acked, auto = settle.Subscribed("client-individual", app_acked=True), settle.Subscribed("auto")
    assert settle.hand_over(4, 0, acked, True, Alive()) == settle.HAND_OVER_NOTE
    assert settle.hand_over(4, 0, acked, True, Alive(), moving_seq=4) == settle.DROP_MOVING
    assert settle.hand_over(4, 0, auto, True, Alive(), moving_seq=4) == settle.HAND_OVER  # settled by the broker
    assert settle.hand_over(4, 0, settle.Subscribed("client"), True, Alive(), moving_seq=4) == settle.DROP_MOVING
    assert settle.hand_over(4, 0, acked, True, Alive(), moving_seq=3) == settle.HAND_OVER_NOTE  # an older move's


def test_the_ledger_counts_what_the_application_holds_per_socket() -> None:
    """What a stomp.py-API move waits for (SocketLedger.held): handed over and not answered by an ACK/NACK."""
    from amqstomp._engine.ledger import SocketLedger

    class Transport:
        version, link_seq = "1.2", 3

        def link_alive(self, seq: int) -> bool:
            return seq == self.link_seq

    class Frame:
        def __init__(self, ack: str, sub: str = "s1") -> None:
            self.headers = {"ack": ack, "subscription": sub, "message-id": "m-" + ack}
            self.link_seq = 3

    ledger = SocketLedger(Transport())  # type: ignore[arg-type]
    for name in ("a", "b", "c"):
        ledger.handed_over(Frame(name))
    for name in ("x", "y", "z"):
        ledger.handed_over(Frame(name, "s2"), cumulative=True)
    assert ledger.held(3) == 6 and ledger.held(2) == 0
    assert ledger.socket_of({"id": "b"}) == 3 and ledger.held(3) == 5  # an individual ACK
    assert ledger.socket_of({"id": "y"}) == 3
    assert ledger.covered("s2", {"id": "y"}, 3) == 0 and ledger.held(3) == 3  # cumulative: y and x before it
    ledger.socket_of({"id": "a"})
    ledger.socket_of({"id": "c"})
    ledger.socket_of({"id": "z"})
    assert ledger.held(3) == 0


def test_with_randomize_the_next_broker_is_another_one_at_random() -> None:
    plan = Rebalance(1000, [A, B, C], randomize=True, rng=random.Random(7))
    firsts = set()
    for i in range(40):
        plan.connected(A, float(i))
        due = plan.due(i + 1.0)
        assert sorted(due) == [B, C]  # every other broker, never the one it is on
        firsts.add(due[0])
    assert firsts == {B, C}


def test_off_by_default_and_the_failover_loop_tries_the_moves_target_first() -> None:
    off = Rebalance(0, [A])
    off.connected(A, 0.0)
    assert off.wait_s(0.0) is None and off.due(1e9) == []
    assert ReconnectPolicy().rebalance_interval_ms == 0
    policy = ReconnectPolicy(randomize=False)
    assert policy.order([A, B, C], failed=A, first=C) == [C, B, A]  # the move's target, then as before
    assert policy.order([A, B, C], failed=A, first=("x", 9)) == [B, C, A]  # one not listed: no change


@pytest.mark.parametrize("kwargs, named", [
    ({"rebalance_interval_ms": MIN_REBALANCE_INTERVAL_MS - 1}, "at least 1000 ms, got 999"),
    ({"rebalance_interval_ms": -1}, "must be 0 \\(off\\) or an int"),
    ({"rebalance_interval_ms": True}, "must be 0 \\(off\\) or an int"),
    ({"rebalance_interval_ms": 2000, "priority_backup": True}, "cannot be combined"),
])
def test_bad_intervals_are_refused_naming_the_option(kwargs: Dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        ReconnectPolicy(**kwargs)


def test_the_uri_option_and_both_apis_keywords() -> None:
    uri = parse_uri("failover:(stomp://127.0.0.1:1,stomp://127.0.0.1:2)?rebalanceInterval=2500")
    assert ReconnectPolicy.from_uri(uri).rebalance_interval_ms == 2500
    two = "failover:(stomp://127.0.0.1:1,stomp://127.0.0.1:2)"
    assert ReconnectPolicy.from_uri(amqstomp.ConnectionFactory(two, rebalance_interval_ms=3000).resolved.uri) \
        .rebalance_interval_ms == 3000
    with pytest.raises(ConfigurationError, match="at least two different brokers"):
        amqstomp.ConnectionFactory("failover:(stomp://127.0.0.1:1)?rebalanceInterval=2000")
    with pytest.raises(ConfigurationError, match="cannot be combined"):
        amqstomp.ConnectionFactory(two + "?rebalanceInterval=2000&priorityBackup=true")
    with pytest.raises(ConfigurationError, match="unknown option 'rebalanceInterval'"):
        amqstomp.ConnectionFactory("stomp://127.0.0.1:1?rebalanceInterval=2000")  # one broker: no failover
    with pytest.raises(ConfigurationError, match="failover option: it needs a failover: URI"):
        amqstomp.ConnectionFactory("stomp://127.0.0.1:1", rebalance_interval_ms=2000)
    conn = amqstomp.Connection12([A, B], auto_reconnect=True, rebalance_interval_ms=2000)
    assert conn.reconnector.policy.rebalance_interval_ms == 2000
    assert conn.reconnector.prober is not None and conn.reconnector.prober.name.endswith("-rebalance")
    assert amqstomp.Connection12([A, B], auto_reconnect=True).reconnector.prober is None  # off by default
    with pytest.raises(ConfigurationError, match="need auto_reconnect=True"):
        amqstomp.Connection12([A, B], rebalance_interval_ms=2000)
    with pytest.raises(ConfigurationError, match="at least two different brokers"):
        amqstomp.Connection12([A], auto_reconnect=True, rebalance_interval_ms=2000)


def test_the_command_line_client_takes_the_interval_to_its_connection() -> None:
    from amqstomp.cli.target import parse_target

    target = parse_target("failover:(stomp://a:1,stomp://b:2)?rebalanceInterval=4000&randomize=false")
    assert target.keywords["rebalance_interval_ms"] == 4000
    assert "rebalance_interval_ms" not in parse_target("failover:(stomp://a:1,stomp://b:2)").keywords


# --------------------------------------------------------------------------- on real brokers

MESSAGES = 300
INTERVAL_MS = 2500
#: the consumer's pace (s per message): slower than the messages arrive, so that it holds a
#: prefetched backlog when the connection moves (the move's DISCONNECT hands it back)
CONSUME_S = 0.04
#: the consumer's prefetch (messages) in the first test; the settle-first test below runs at 1000
#: (ActiveMQ's default) and the broker's default
PREFETCH = 10
#: from a move being due to the connection being on the next broker: the probe, DISCONNECT's
#: receipt, CONNECT and the re-SUBSCRIBE
MOVE_BOUND_S = 10.0


@pytest.fixture(scope="module")
def brokers() -> Iterator[List[ActiveMQBroker]]:
    """Two standalone brokers (no network between them), shared by this file's broker tests (two
    JVM starts instead of fourteen): each test has queues of its own, closes its connections and
    checks it left its queues empty on both, so nothing carries over from one test to the next."""
    ActiveMQBroker.require()
    started: List[ActiveMQBroker] = []
    try:
        for i in (1, 2):
            started.append(start_broker(java_heap="256M", broker_name="amqstomp-rebalance-%d" % i))
        yield started
    finally:
        close_all([broker.stop for broker in reversed(started)])


class Run:
    """What a consumer saw: deliveries (body, broker, redelivered), what it settled."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: List[Tuple[str, Optional[Tuple[str, int]], bool]] = []
        self.settled: Set[str] = set()
        self.settled_again: List[str] = []
        self.not_settled = 0
        self.errors: List[BaseException] = []
        self.stop = threading.Event()

    def got(self, body: str, broker: Optional[Tuple[str, int]], redelivered: bool) -> None:
        with self.lock:
            self.deliveries.append((body, broker, redelivered))
            if body in self.settled:
                self.settled_again.append(body)

    def settle(self, body: str) -> None:
        with self.lock:
            self.settled.add(body)

    def settled_all(self, sent: List[str]) -> bool:
        with self.lock:
            return set(sent) <= self.settled


def _produce(brokers: List[Any], queue_name: str, sent: List[str], done: threading.Event) -> None:
    """A known set, message i to broker i % 2 (persistent: each send waits for its RECEIPT)."""
    conns = [amqstomp.ConnectionFactory(broker.url).create_connection(timeout_s=30) for broker in brokers]
    try:
        sessions = [conn.create_session() for conn in conns]
        producers = [s.create_producer(amqstomp.Queue(queue_name)) for s in sessions]
        for i in range(MESSAGES):
            body = "m%04d" % i
            producers[i % 2].send(sessions[i % 2].create_text_message(body))
            sent.append(body)
            time.sleep(0.015)
    finally:
        for conn in conns:
            conn.close()
        done.set()


def _jms_consumer(url: str, queue_name: str, run: Run) -> Tuple[Any, Any, Any, Any]:
    conn = amqstomp.ConnectionFactory(url + "&jms.sendAcksAsync=false").create_connection(timeout_s=30)
    consumer = conn.create_session(acknowledge_mode=amqstomp.CLIENT_ACKNOWLEDGE) \
        .create_consumer(amqstomp.Queue(queue_name))
    conn.start()
    link = conn._state.consumer_link
    transport = link.transport

    def loop() -> None:
        deadline = time.monotonic() + 200
        while not run.stop.is_set() and time.monotonic() < deadline:
            try:
                message = consumer.receive(0.1)
            except Exception as exc:
                run.errors.append(exc)
                return
            if message is None:
                continue
            run.got(message.text, transport.current_host_and_port, bool(message.redelivered))
            time.sleep(CONSUME_S)
            try:  # cumulative, but every message is acknowledged: it covers this one alone
                message.acknowledge()
            except (AcknowledgeInterruptedError, AcknowledgeInDoubtError):
                run.not_settled += 1  # not settled: it came on the socket a move handed back
                continue
            except Exception as exc:
                run.errors.append(exc)
                continue
            run.settle(message.text)

    return conn, loop, transport, link.reconnector


class _Frames:
    def __init__(self) -> None:
        self.queue: "queue.Queue[Any]" = queue.Queue()

    def on_message(self, frame: Any) -> None:
        self.queue.put(frame)


def _stomppy_consumer(addresses: List[Tuple[str, int]], queue_name: str, run: Run,
                      prefetch: Optional[int] = PREFETCH) -> Tuple[Any, Any, Any, Any]:
    conn = amqstomp.Connection12(addresses, auto_reconnect=True, reconnect_attempts_max=-1,
                                 reconnect_sleep_initial=0.1, reconnect_sleep_max=0.5,
                                 rebalance_interval_ms=INTERVAL_MS, timeout=10)
    frames = _Frames()
    conn.set_listener("frames", frames)
    conn.connect(wait=True)
    conn.subscribe("/queue/" + queue_name, id="s1", ack="client-individual",
                   headers={} if prefetch is None else {"activemq.prefetchSize": prefetch})

    def loop() -> None:
        deadline = time.monotonic() + 200
        n = 0
        while not run.stop.is_set() and time.monotonic() < deadline:
            try:
                frame = frames.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            body = frame.body if isinstance(frame.body, str) else frame.body.decode()
            run.got(body, conn.transport.current_host_and_port, frame.headers.get("redelivered") == "true")
            time.sleep(CONSUME_S)
            n += 1
            receipt = "ack-%d" % n
            try:
                conn.ack(frame.headers["ack"], receipt=receipt)
                conn.wait_for_receipt(receipt, timeout=10)
            except Exception:  # refused (a socket handed back), or no RECEIPT: not settled
                run.not_settled += 1
                continue
            run.settle(body)

    return conn, loop, conn.transport, conn.reconnector


def _assert_each_broker_dequeued_its_share(brokers: List[Any], queue_name: str) -> None:
    """Each broker dequeued the MESSAGES // 2 sent to it (message i to broker i % 2) and holds none
    in flight. Not their sizes: the messages are PERSISTENT and sent while the consumer takes them,
    and ActiveMQ 5.17 may leave such a send out of enqueueCount for good (conftest.assert_consumed)."""
    for broker in brokers:
        assert_consumed(broker, queue_name, MESSAGES // 2)


def _run_until_settled(brokers: List[Any], queue_name: str, run: Run, api: str, conn: Any, loop: Any,
                       reconnector: Any, transport: Any, bound_s: float, while_producing: Any = None,
                       produced_all: Any = None) -> Tuple[List[str], float, List[int]]:
    """Run the consumer ``loop`` and a producer of MESSAGES until every message is settled
    (within ``bound_s`` after the start; ``while_producing(started)`` and ``produced_all()``
    are the test's own checks at those points), then stop both and close the connection.

    Returns:
        (sent bodies, seconds until all were settled, queue sizes left on each broker)
    """
    sent: List[str] = []
    produced = threading.Event()
    threads = [threading.Thread(target=loop, name="test-consumer", daemon=True),
               threading.Thread(target=_produce, name="test-producer", daemon=True,
                                args=(brokers, queue_name, sent, produced))]
    try:
        started = time.monotonic()
        for thread in threads:
            thread.start()
        if while_producing is not None:
            while_producing(started)
        assert produced.wait(90)
        if produced_all is not None:
            produced_all()
        # every message settled once (a copy handed back by a move comes again and is settled then)
        assert wait_until(lambda: run.settled_all(sent), bound_s, interval=0.1), \
            "not settled in %.0f s: %d of %d (%s); %d moves, on %s, %d deliveries, %d refused, queues %s" % (
                time.monotonic() - started, len(run.settled), len(sent), sorted(set(sent) - run.settled)[:10],
                reconnector.prober.moves, transport.current_host_and_port, len(run.deliveries), run.not_settled,
                [queue_statistics(b, queue_name) for b in brokers])
        took = time.monotonic() - started
        time.sleep(0.5)  # a late duplicate would show now
    finally:
        run.stop.set()
        for thread in threads:
            thread.join(30)
        conn.close() if api == "jms" else conn.disconnect()
    return sent, took, [queue_statistics(broker, queue_name)["size"] for broker in brokers]


@pytest.mark.broker
@pytest.mark.compiled_pass_only  # rebalancing: the prober thread and its timers
@pytest.mark.parametrize("api", ["stomppy", "jms"])
def test_a_rebalance_moves_a_busy_consumer_with_nothing_lost_or_settled_twice(brokers, api) -> None:
    first, other = (b.host_and_ports[0] for b in brokers)
    queue_name = "amqstomp-rebalance-" + uuid.uuid4().hex[:10]
    run = Run()
    if api == "jms":
        url = "failover:(%s,%s)?randomize=false&rebalanceInterval=%d&initialReconnectDelay=100" \
              "&maxReconnectDelay=500&jms.prefetchPolicy.queuePrefetch=%d" % (brokers[0].url, brokers[1].url,
                                                                            INTERVAL_MS, PREFETCH)
        conn, loop, transport, reconnector = _jms_consumer(url, queue_name, run)
    else:
        conn, loop, transport, reconnector = _stomppy_consumer([first, other], queue_name, run)
    try:
        assert transport.current_host_and_port == first
    except AssertionError:
        conn.close() if api == "jms" else conn.disconnect()
        raise
    seen: Dict[str, int] = {}

    def while_producing(started: float) -> None:
        # it moves to the other broker one interval after it connected
        assert wait_until(lambda: transport.current_host_and_port == other, INTERVAL_MS / 1000.0 + MOVE_BOUND_S), \
            "still on %s %.1f s after starting" % (transport.current_host_and_port, time.monotonic() - started)

    def produced_all() -> None:
        seen["moves"] = reconnector.prober.moves

    sent, took, left = _run_until_settled(brokers, queue_name, run, api, conn, loop, reconnector, transport, 120,
                                          while_producing, produced_all)
    moves_while_producing = seen["moves"]
    with run.lock:
        per_broker = Counter(broker for _, broker, _ in run.deliveries)
        redelivered = sum(1 for _, _, again in run.deliveries if again)
        delivered = len(run.deliveries)
    print("\n%s: all settled in %.1f s; %d sent, %d moves (%d while producing), %d deliveries (%s), %d redelivered (handed back by a "
          "move and drained when the consumer came back), %d acknowledgements refused, left on the brokers %s"
          % (api, took, len(sent), reconnector.prober.moves, moves_while_producing, delivered,
             ", ".join("%s:%s %d" % (b[0], b[1], n) for b, n in per_broker.items() if b), redelivered,
             run.not_settled, left))
    assert run.errors == []
    assert len(sent) == MESSAGES
    assert run.settled_again == []  # none settled twice
    _assert_each_broker_dequeued_its_share(brokers, queue_name)  # nothing left behind on either broker
    assert moves_while_producing >= 1 and reconnector.prober.moves >= 2  # moved away, and came back
    assert per_broker[first] > 0 and per_broker[other] > 0
    assert redelivered > 0  # the moves handed back a prefetched backlog, drained on coming back
    assert transport.current_host_and_port is None  # closed
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.name.endswith("-rebalance")], 10)


# --------------------------------------------------------------------------- settle before moving, large prefetch

#: the settle-first run's bound on the whole run (s): 300 messages at 40 ms each are 12 s of work
SETTLE_RUN_BOUND_S = 90.0


def _jms_batch_consumer(url: str, queue_name: str, run: Run) -> Tuple[Any, Any, Any, Any]:
    """A JMS CLIENT_ACKNOWLEDGE consumer that acknowledges in batches: every 10 messages, and
    whatever it holds when receive() finds nothing (acknowledge() covers the session's messages)."""
    conn = amqstomp.ConnectionFactory(url + "&jms.sendAcksAsync=false").create_connection(timeout_s=30)
    consumer = conn.create_session(acknowledge_mode=amqstomp.CLIENT_ACKNOWLEDGE) \
        .create_consumer(amqstomp.Queue(queue_name))
    conn.start()
    transport = conn._state.consumer_link.transport

    def loop() -> None:
        deadline = time.monotonic() + SETTLE_RUN_BOUND_S + 30
        batch: List[Any] = []
        while not run.stop.is_set() and time.monotonic() < deadline:
            try:
                message = consumer.receive(0.1)
            except Exception as exc:
                run.errors.append(exc)
                return
            if message is not None:
                run.got(message.text, transport.current_host_and_port, bool(message.redelivered))
                time.sleep(CONSUME_S)
                batch.append(message)
            if not batch or (message is not None and len(batch) < 10):
                continue
            try:
                batch[-1].acknowledge()
            except (AcknowledgeInterruptedError, AcknowledgeInDoubtError):
                run.not_settled += len(batch)  # handed back by a move: they come again
            except Exception as exc:
                run.errors.append(exc)
            else:
                for settled in batch:
                    run.settle(settled.text)
            batch = []

    return conn, loop, transport, conn._state.consumer_link.reconnector


@pytest.mark.broker
@pytest.mark.compiled_pass_only  # rebalancing: the prober thread and its timers
@pytest.mark.parametrize("prefetch", [1000, None], ids=["prefetch1000", "default"])
@pytest.mark.parametrize("api", ["stomppy", "jms"])
def test_a_rebalance_settles_before_it_moves_so_a_large_prefetch_finishes(brokers, api, prefetch) -> None:
    """ActiveMQ's default prefetch (1000): the consumer is handed more than it can work through
    in an interval; each move first stops handing it new messages and waits for it to settle
    what it has, so every message is delivered to the application about once."""
    first, other = (b.host_and_ports[0] for b in brokers)
    queue_name = "amqstomp-settle-" + uuid.uuid4().hex[:10]
    run = Run()
    if api == "jms":
        url = "failover:(%s,%s)?randomize=false&rebalanceInterval=%d&initialReconnectDelay=100" \
              "&maxReconnectDelay=500" % (brokers[0].url, brokers[1].url, INTERVAL_MS)
        if prefetch is not None:
            url += "&jms.prefetchPolicy.queuePrefetch=%d" % prefetch
        conn, loop, transport, reconnector = _jms_batch_consumer(url, queue_name, run)
    else:
        conn, loop, transport, reconnector = _stomppy_consumer([first, other], queue_name, run, prefetch)
    sent, took, left = _run_until_settled(brokers, queue_name, run, api, conn, loop, reconnector, transport,
                                          SETTLE_RUN_BOUND_S)
    moves = reconnector.prober.moves
    with run.lock:
        per_broker = Counter(broker for _, broker, _ in run.deliveries)
        delivered = len(run.deliveries)
    print("\n%s prefetch %s: all settled in %.1f s; %d moves, %d deliveries of %d messages (%s), %d acknowledgements "
          "refused, left on the brokers %s" % (api, prefetch or "default", took, moves, delivered, len(sent),
                                               ", ".join("%s:%s %d" % (b[0], b[1], n) for b, n in per_broker.items()
                                                         if b), run.not_settled, left))
    assert run.errors == []
    assert len(sent) == MESSAGES and run.settled_again == []  # every one settled, none twice
    _assert_each_broker_dequeued_its_share(brokers, queue_name)
    assert moves >= 2 and per_broker[first] > 0 and per_broker[other] > 0  # it moved away and came back
    # a move hands back only what the application still held at the settle bound (the stomp.py consumer
    # queues every frame it is handed: what it did not get through within the bound; the JMS one: nothing),
    # not the prefetched backlog: without settling first, 3,052 deliveries of 300 in 120 s, never done
    bound = MESSAGES * 3 // 2 if api == "stomppy" else MESSAGES + moves
    assert delivered <= bound, "%d deliveries of %d messages in %d moves" % (delivered, MESSAGES, moves)
    assert run.not_settled == delivered - MESSAGES  # each refused one came again, and only those
    assert took < SETTLE_RUN_BOUND_S


@pytest.mark.broker
@pytest.mark.compiled_pass_only  # rebalancing: a thread race around the move's DISCONNECT
def test_an_ack_racing_the_moves_disconnect_is_refused_as_interrupted_never_a_broker_error(brokers) -> None:
    """The race injected: the application ACKs (with a receipt) a message it still holds at the
    settle bound just as the move writes its DISCONNECT (from a listener's on_send of it). The ACK
    is refused unwritten with AcknowledgeInterruptedError -- not ActiveMQ's ERROR "Not connected."
    (BrokerError) nor a bare ConnectionClosedException -- and the message comes again."""
    queue_name = "/queue/amqstomp-race-" + uuid.uuid4().hex[:10]
    conn = amqstomp.Connection12([b.host_and_ports[0] for b in brokers], auto_reconnect=True,
                                 reconnect_attempts_max=-1, reconnect_sleep_initial=0.1, reconnect_sleep_max=0.5,
                                 rebalance_interval_ms=MIN_REBALANCE_INTERVAL_MS, timeout=10)
    frames = _Frames()
    outcome: "queue.Queue[Any]" = queue.Queue()

    class RacingAck:
        held: Optional[Any] = None

        def on_send(self, frame: Any) -> None:
            if frame.cmd == "DISCONNECT" and str(frame.headers.get("receipt", "")).startswith("amqstomp-move-") \
                    and self.held is not None:
                held, self.held = self.held, None

                def ack() -> None:
                    try:
                        conn.ack(held.headers["ack"], receipt="racing")
                        conn.wait_for_receipt("racing", timeout=10)
                        outcome.put("applied")
                    except Exception as exc:
                        outcome.put(exc)

                racer = threading.Thread(target=ack, name="test-racing-ack", daemon=True)
                racer.start()
                racer.join(0.5)  # it waits for the DISCONNECT to go out (or, unguarded, races it)

    racing = RacingAck()
    conn.set_listener("frames", frames)
    conn.set_listener("racing", racing)
    try:
        conn.connect(wait=True)
        conn.subscribe(queue_name, id="s1", ack="client-individual", headers={"activemq.prefetchSize": 1})
        sender = amqstomp.Connection12([brokers[0].host_and_ports[0]])
        sender.connect(wait=True)
        sender.send(queue_name, "held", headers={"persistent": "true", "receipt": "sent"})
        sender.wait_for_receipt("sent", timeout=10)
        sender.disconnect()
        first = frames.queue.get(timeout=10)
        racing.held = first  # held past the settle bound (1 s): the move hands it back
        result = outcome.get(timeout=MIN_REBALANCE_INTERVAL_MS / 1000.0 * 2 + MOVE_BOUND_S)
        assert isinstance(result, AcknowledgeInterruptedError), result
        # it comes again, once the connection is back on the broker it left
        again = None
        deadline = time.monotonic() + 30
        while again is None and time.monotonic() < deadline:
            try:
                frame = frames.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if frame.body == "held":
                again = frame
        assert again is not None and again.headers.get("redelivered") == "true"
        conn.ack(again.headers["ack"], receipt="again")
        conn.wait_for_receipt("again", timeout=10)
    finally:
        conn.disconnect()
    # "held" (PERSISTENT, sent while the subscription consumed) dequeued on the first broker, nothing on the
    # other: dequeues, not the sizes (conftest.assert_consumed says why)
    for broker, dequeued in zip(brokers, (1, 0)):
        assert_consumed(broker, queue_name, dequeued)
