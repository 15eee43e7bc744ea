"""priorityBackup / priorityURIs: a failover connection on a backup broker goes back
to the priority broker once it answers, without losing a message or delivering a
settled one again (ActiveMQ's FailoverTransport; docs/guides/scaling-out.md).

- the pure plan (amqstomp._core.backoff): which brokers are priority ones, the
  order of a pass, when to probe and the probes' back-off -- in memory;
- both APIs on a network of two real brokers: connected to the backup because the
  preferred broker is down, a consumer (synchronous acknowledgements: settled means
  the broker's RECEIPT came) runs throughout; the preferred broker starts; the
  connection is on it within its bound; every message produced arrives, and no
  settled one comes again.
"""
import queue
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Set, Tuple

import pytest
from conftest import wait_until

import amqstomp
from amqstomp.exception import AcknowledgeInDoubtError, AcknowledgeInterruptedError, ConfigurationError
from amqstomp._core.backoff import MIN_PRIORITY_PROBE_MS, PriorityReturn, ReconnectPolicy
from amqstomp.uri import parse_uri

pytestmark = pytest.mark.timeout(180)

A, B, C = ("a", 1), ("b", 2), ("c", 3)


# --------------------------------------------------------------------------- the plan, in memory


def test_the_first_broker_is_the_priority_one_unless_priority_uris_say_otherwise() -> None:
    plain = ReconnectPolicy(randomize=False)
    assert not plain.is_priority(A, [A, B, C])  # no priorityBackup: none is
    first = ReconnectPolicy(randomize=False, priority_backup=True)
    assert [first.is_priority(e, [A, B, C]) for e in (A, B, C)] == [True, False, False]
    listed = ReconnectPolicy(randomize=False, priority_backup=True, priority_uris="stomp://b:2,stomp://c:3")
    assert [listed.is_priority(e, [A, B, C]) for e in (A, B, C)] == [False, True, True]
    assert listed.order([A, B, C]) == [B, C, A]
    assert listed.order([A, B, C], failed=B) == [C, A, B]  # the one just left goes last
    shuffled = ReconnectPolicy(priority_backup=True, priority_uris=[("c", 3)])
    assert all(shuffled.order([A, B, C])[0] == C for _ in range(20))


def test_priority_uris_come_from_the_uri_and_a_bad_one_is_named() -> None:
    uri = parse_uri("failover:(stomp://a:1,stomp://b:2)?priorityBackup=true&priorityURIs=stomp://b:2")
    policy = ReconnectPolicy.from_uri(uri)
    assert policy.priority_backup and policy.priority_uris == (B,)
    with pytest.raises(ConfigurationError, match="priorityURIs"):
        parse_uri("failover:(stomp://a:1)?priorityURIs=tcp://a:61616")
    with pytest.raises(ConfigurationError, match="priorityURIs names c:3, not a broker of the failover list"):
        PriorityReturn(ReconnectPolicy(priority_backup=True, priority_uris=[C]), [A, B])
    with pytest.raises(ConfigurationError, match="priority_uris"):
        ReconnectPolicy(priority_backup=True, priority_uris=[("a",)])


@pytest.mark.parametrize("given", ["stomp://127.0.0.1:2", ["stomp://127.0.0.1:2"], ("stomp://127.0.0.1:2",),
                                   [("127.0.0.1", 2)], (("127.0.0.1", 2),), ("127.0.0.1", 2)])
def test_jms_priority_uris_take_a_str_a_list_or_a_tuple(given: Any) -> None:
    """The keyword as the URI option's text, or a list or tuple of URIs or (host, port) pairs
    (a tuple was refused, its repr read as a URI), or one bare (host, port) pair (its host was
    read as a URI and refused)."""
    factory = amqstomp.ConnectionFactory("failover:(stomp://127.0.0.1:1,stomp://127.0.0.1:2)",
                                         priority_backup=True, priority_uris=given)
    assert ReconnectPolicy.from_uri(factory.resolved.uri).priority_uris == (("127.0.0.1", 2),)


@pytest.mark.parametrize("query, keywords, named", [
    ("", {"priority_uris": ("stomp://127.0.0.1:2", "tcp://127.0.0.1:2")},
     r"priority_uris: 'tcp://127.0.0.1:2' is not a stomp://host:port URI"),
    ("", {"priority_uris": [("127.0.0.1",)]}, r"priority_uris: \('127.0.0.1',\) is neither a stomp://host:port URI"),
    ("", {"priority_uris": [("127.0.0.1", "2")]}, r"priority_uris: \('127.0.0.1', '2'\) is neither"),
    ("", {"priority_uris": 2}, "priority_uris must be stomp://host:port URIs"),
    ("", {"priority_uris": [("127.0.0.1", 3)]}, "priorityURIs names 127.0.0.1:3, not a broker of the failover list"),
    ("?priorityBackup=true&priorityURIs=stomp://127.0.0.1:3", {},
     "priorityURIs names 127.0.0.1:3, not a broker of the failover list"),
])
def test_jms_priority_uris_are_checked_when_the_factory_is_made(query: str, keywords: Dict[str, Any],
                                                                named: str) -> None:
    """Checked by ConnectionFactory(), not first by create_connection(); the keyword and the
    bad entry named."""
    if "priorityBackup" not in query:
        keywords = dict(keywords, priority_backup=True)
    with pytest.raises(ConfigurationError, match=named):
        amqstomp.ConnectionFactory("failover:(stomp://127.0.0.1:1,stomp://127.0.0.1:2)" + query, **keywords)


def test_probing_starts_on_a_backup_backs_off_and_stops_on_a_priority_broker() -> None:
    policy = ReconnectPolicy(randomize=False, priority_backup=True, initial_reconnect_delay_ms=200,
                             max_reconnect_delay_ms=1000)
    plan = PriorityReturn(policy, [A, B, C])
    assert plan.wait_s(0.0) is None and plan.due(1e9) == []  # not connected yet
    plan.connected(B, 100.0)
    assert plan.due(100.1) == [] and plan.wait_s(100.1) == pytest.approx(0.1)
    assert plan.due(100.2) == [A]
    delays = []
    now = 100.2
    for _ in range(5):
        plan.probe_failed(now)
        delays.append(round(plan.next_at - now, 3))
        now = plan.next_at
    assert delays == [0.4, 0.8, 1.0, 1.0, 1.0]  # the reconnect back-off, capped at maxReconnectDelay
    plan.stopped()  # lost: no probing while the loop reconnects
    assert plan.wait_s(now) is None
    plan.connected(A, now)  # on the priority broker: nothing to probe
    assert plan.wait_s(now) is None and plan.due(now + 100) == []
    fast = PriorityReturn(ReconnectPolicy(priority_backup=True, initial_reconnect_delay_ms=0), [A, B])
    fast.connected(B, 0.0)
    assert fast.next_at == MIN_PRIORITY_PROBE_MS / 1000.0  # never a busy probe
    off = PriorityReturn(ReconnectPolicy(), [A, B])
    off.connected(B, 0.0)
    assert off.wait_s(0.0) is None  # without priorityBackup: never


def test_the_command_line_client_takes_priority_backup_to_its_connection() -> None:
    from amqstomp.cli.target import parse_target

    target = parse_target("failover:(stomp://a:1,stomp://b:2)?priorityBackup=true")
    assert target.keywords["priority_backup"] is True
    assert list(target.keywords["priority_uris"]) == [A]  # the first member, whatever the shuffle
    listed = parse_target("failover:(stomp://a:1,stomp://b:2)?priorityBackup=true&priorityURIs=stomp://b:2")
    assert list(listed.keywords["priority_uris"]) == [B]
    assert "priority_backup" not in parse_target("failover:(stomp://a:1,stomp://b:2)").keywords
    conn = amqstomp.Connection12([A, B], **listed.keywords)
    assert conn.reconnector.policy.priority_uris == (B,) and conn.reconnector.prober is not None


# --------------------------------------------------------------------------- on real brokers

MESSAGES = 400
#: the consumer's pace (s per message): slower than the producer, so that a backlog is
#: prefetched on the backup when the connection moves (DISCONNECT hands it back)
CONSUME_S = 0.02
#: from the priority broker answering to the connection being on it: one probe interval
#: (maxReconnectDelay 500 ms), the probe, DISCONNECT's receipt, CONNECT and the replay
MOVE_BOUND_S = 10.0


class Run:
    """What a consumer saw: bodies, message-ids settled (the ACK's RECEIPT came), errors."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: List[Tuple[str, str]] = []
        self.settled: Set[str] = set()
        self.settled_bodies: Set[str] = set()
        self.settled_again: List[str] = []
        self.not_settled = 0
        self.errors: List[BaseException] = []
        self.stop = threading.Event()

    def got(self, message_id: str, body: str) -> None:
        with self.lock:
            self.received.append((message_id, body))
            if message_id in self.settled:
                self.settled_again.append(message_id)

    def bodies(self) -> Set[str]:
        with self.lock:
            return {body for _, body in self.received}

    def settle(self, message_id: str, body: str) -> None:
        with self.lock:
            self.settled.add(message_id)
            self.settled_bodies.add(body)

    def settled_all(self, sent: List[str]) -> bool:
        with self.lock:
            return set(sent) <= self.settled_bodies


def _produce(url: str, queue_name: str, sent: List[str], done: threading.Event) -> None:
    conn = amqstomp.ConnectionFactory(url).create_connection(timeout_s=30)
    try:
        session = conn.create_session()
        producer = session.create_producer(amqstomp.Queue(queue_name))
        for i in range(MESSAGES):
            body = "m%04d" % i
            producer.send(session.create_text_message(body))  # persistent: waits for the RECEIPT
            sent.append(body)
            time.sleep(0.001)
    finally:
        conn.close()
        done.set()


def _jms_consumer(url: str, queue_name: str, run: Run) -> Tuple[Any, Any]:
    factory = amqstomp.ConnectionFactory(url + "&jms.sendAcksAsync=false")
    conn = factory.create_connection(timeout_s=30)
    consumer = conn.create_session(acknowledge_mode=amqstomp.INDIVIDUAL_ACKNOWLEDGE) \
        .create_consumer(amqstomp.Queue(queue_name))
    conn.start()

    def loop() -> None:
        deadline = time.monotonic() + 150
        while not run.stop.is_set() and time.monotonic() < deadline:
            try:
                message = consumer.receive(0.1)
            except Exception as exc:
                run.errors.append(exc)
                return
            if message is None:
                continue
            run.got(message.message_id or "", message.text)
            time.sleep(CONSUME_S)
            try:
                message.acknowledge()
            except (AcknowledgeInterruptedError, AcknowledgeInDoubtError):
                run.not_settled += 1  # not settled: the broker may deliver it again
                continue
            except Exception as exc:  # (a BrokerError for an ACK after the move's DISCONNECT, before the fix)
                run.errors.append(exc)
                continue
            run.settle(message.message_id or "", message.text)

    transport = conn._state.consumer_link.transport
    return conn, (loop, transport, conn._state.consumer_link.reconnector)


class _Frames:
    def __init__(self) -> None:
        self.queue: "queue.Queue[Any]" = queue.Queue()

    def on_message(self, frame: Any) -> None:
        self.queue.put(frame)


def _stomppy_consumer(addresses: List[Tuple[str, int]], queue_name: str, run: Run) -> Tuple[Any, Any]:
    conn = amqstomp.Connection12(addresses, auto_reconnect=True, reconnect_attempts_max=-1,
                                 reconnect_sleep_initial=0.1, reconnect_sleep_increase=1.0,
                                 reconnect_sleep_max=0.5, priority_backup=True, timeout=10)
    frames = _Frames()
    conn.set_listener("frames", frames)
    conn.connect(wait=True)
    conn.subscribe("/queue/" + queue_name, id="s1", ack="client-individual")

    def loop() -> None:
        deadline = time.monotonic() + 150
        n = 0
        while not run.stop.is_set() and time.monotonic() < deadline:
            try:
                frame = frames.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            message_id = frame.headers["message-id"]
            body = frame.body if isinstance(frame.body, str) else frame.body.decode()
            run.got(message_id, body)
            time.sleep(CONSUME_S)
            n += 1
            receipt = "ack-%d" % n
            try:
                conn.ack(frame.headers["ack"], receipt=receipt)
                conn.wait_for_receipt(receipt, timeout=10)
            except (AcknowledgeInterruptedError, AcknowledgeInDoubtError):
                run.not_settled += 1
                continue
            except Exception:  # the socket went before the RECEIPT: not settled
                run.not_settled += 1
                continue
            run.settle(message_id, body)

    return conn, (loop, conn.transport, conn.reconnector)


@pytest.mark.compiled_pass_only  # priorityBackup: the prober thread and its back-off timers
@pytest.mark.parametrize("api", ["jms", "stomppy"])
def test_back_on_the_priority_broker_once_it_answers_with_nothing_lost_or_settled_twice(
        activemq_network_factory, api) -> None:
    net = activemq_network_factory(2)
    preferred, backup = net.addresses
    net.stop_member(0)  # the preferred broker is down: the client starts on the backup
    queue_name = "amqstomp-priority-" + uuid.uuid4().hex[:10]
    url = net.failover_url(priorityBackup="true", initialReconnectDelay=100, maxReconnectDelay=500)
    run = Run()
    if api == "jms":
        conn, (loop, transport, reconnector) = _jms_consumer(url, queue_name, run)
    else:
        conn, (loop, transport, reconnector) = _stomppy_consumer(net.addresses, queue_name, run)
    sent: List[str] = []
    produced = threading.Event()
    threads = [threading.Thread(target=loop, name="test-consumer", daemon=True),
               threading.Thread(target=_produce, name="test-producer", daemon=True,
                                args=(net.members[1].url, queue_name, sent, produced))]
    try:
        assert transport.current_host_and_port == backup
        for thread in threads:
            thread.start()
        assert wait_until(lambda: len(run.bodies()) >= MESSAGES // 4, 60)
        launched = time.monotonic()
        net.restart(0)  # the preferred broker answers again (and its bridges are up)
        up = launched + (net.members[0].startup_seconds or 0.0)  # its first CONNECTED
        assert wait_until(lambda: transport.current_host_and_port == preferred, MOVE_BOUND_S), \
            "still on %s %.1f s after the priority broker answered" % (transport.current_host_and_port,
                                                                      time.monotonic() - up)
        moved_in = time.monotonic() - up
        backlog = len(sent) - len(run.bodies())
        assert produced.wait(90)
        # every message settled once (a copy whose ACK was refused comes again and is settled then)
        assert wait_until(lambda: run.settled_all(sent), 60, interval=0.1), \
            sorted(set(sent) - run.settled_bodies)[:10]
        time.sleep(0.5)  # a late duplicate would show now
    finally:
        run.stop.set()
        for thread in threads:
            thread.join(30)
        conn.close() if api == "jms" else conn.disconnect()
    print("\n%s: back on the priority broker %.2f s after it answered (%d sent, not consumed yet); received %d "
          "for %d sent, %d acknowledgements not settled (the move's), settled again %d"
          % (api, moved_in, backlog, len(run.received), len(sent), run.not_settled, len(run.settled_again)))
    assert run.errors == []
    assert len(sent) == MESSAGES
    assert run.settled_again == []
    assert reconnector.prober is not None and reconnector.prober.moves == 1
    assert transport.current_host_and_port is None  # closed
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.name.endswith("-priority")], 10)


@pytest.mark.compiled_pass_only  # priorityBackup: the prober thread and the failover loop's
def test_a_move_ends_the_socket_it_gives_up_not_the_one_the_loop_opened_since(activemq, tcp_proxy_factory) -> None:
    """Was a bug (the test above saw two moves under load): the broker closes the socket a
    move gives up once it has sent the DISCONNECT's RECEIPT; the failover loop may then be
    connected to the priority broker before the probe thread ends "the open socket" --
    which was the new one: the loop went to the backup, and a second probe moved it back.
    Here the probe thread is held after the RECEIPT until the loop is connected again."""
    direct = tuple(activemq.host_and_ports[0])
    proxy = tcp_proxy_factory(direct)  # the priority broker (the first address): down at first
    proxy.refuse(True, mode="closed")
    conn = amqstomp.Connection12([proxy.address, direct], auto_reconnect=True, reconnect_attempts_max=-1,
                                 reconnect_sleep_initial=0.1, reconnect_sleep_increase=1.0,
                                 reconnect_sleep_max=0.5, priority_backup=True, timeout=10)
    reconnector, transport = conn.reconnector, conn.transport
    held: List[bool] = []
    try:
        conn.connect(wait=True)
        assert transport.current_host_and_port == direct
        hand_back = reconnector.hand_back

        def hand_back_then_wait(*args: Any) -> None:
            given_up = transport.link_seq
            hand_back(*args)  # DISCONNECT, its RECEIPT; the broker closes the socket
            held.append(wait_until(lambda: transport.link_seq != given_up and transport.is_connected()
                                   and not reconnector.reconnecting, 10))

        reconnector.hand_back = hand_back_then_wait
        proxy.refuse(False)  # the priority broker answers: the probe moves the connection there
        assert wait_until(lambda: reconnector.prober.moves >= 1, 15), "no move"
        assert held == [True], "the loop was not connected again while the move's thread waited"
        assert wait_until(lambda: transport.is_connected() and not reconnector.reconnecting, 15)
        assert transport.current_host_and_port == proxy.address
        assert (reconnector.prober.moves, reconnector.failovers) == (1, 1)  # one move, no loss after it
    finally:
        conn.disconnect()


@pytest.mark.parametrize("keywords, named", [
    ({"priority_backup": "no", "auto_reconnect": True}, "priority_backup must be True or False, got 'no'"),
    ({"priority_backup": True}, "need auto_reconnect=True"),
    ({"priority_uris": "stomp://127.0.0.1:1"}, "need auto_reconnect=True"),
])
def test_stomp_py_api_priority_keywords_are_checked(keywords, named):
    """A string was taken as true, and without auto_reconnect the keywords did nothing, silently."""
    with pytest.raises(amqstomp.exception.ConfigurationError, match=named):
        amqstomp.Connection12([("127.0.0.1", 1)], **keywords)


@pytest.mark.compiled_pass_only  # priorityBackup: the prober thread and the failover loop's
def test_a_send_racing_a_move_goes_on_the_new_socket_not_behind_the_disconnect(activemq, tcp_proxy_factory) -> None:
    """A send that chose the socket a planned move gives up, and is written once the move's
    DISCONNECT was answered, before the socket is dropped (held here between the two, and the
    broker's close of that socket held back by the proxy, so the race is met every run): before
    the fix it went out behind the DISCONNECT (the broker ignores it) and ``send()`` returned
    normally, the message lost. Now that socket refuses every write after its DISCONNECT and
    the send waits for the failover loop's new socket and goes there."""
    direct = tuple(activemq.host_and_ports[0])
    priority = tcp_proxy_factory(direct)  # the priority broker (the first address): down at first
    priority.refuse(True, mode="closed")
    backup = tcp_proxy_factory(direct)  # the socket the move gives up: its end held back after the RECEIPT
    destination = "/queue/amqstomp.test.moverace-" + uuid.uuid4().hex[:10]
    conn = amqstomp.Connection12([priority.address, backup.address], auto_reconnect=True,
                                 reconnect_attempts_max=-1, reconnect_sleep_initial=0.1, reconnect_sleep_increase=1.0,
                                 reconnect_sleep_max=0.5, priority_backup=True, timeout=10)
    reconnector, transport = conn.reconnector, conn.transport
    chosen, handed_back, tried = threading.Event(), threading.Event(), threading.Event()
    outcome: Dict[str, Any] = {}
    try:
        conn.connect(wait=True)
        assert transport.current_host_and_port == backup.address
        old = transport.link_seq
        original, hand_back = transport.send_frame, reconnector.hand_back

        def spy(cmd: str, headers: Any = None, *args: Any, **kwargs: Any) -> Any:
            if cmd != "SEND" or kwargs.get("link_seq") != old or chosen.is_set():
                return original(cmd, headers, *args, **kwargs)
            chosen.set()  # this send chose the old socket: written once the move's DISCONNECT was answered
            handed_back.wait(15)
            try:
                return original(cmd, headers, *args, **kwargs)
            finally:
                tried.set()

        def hand_back_then_wait(seq: int, *args: Any) -> None:
            # the RECEIPT reaches the client, then nothing more: the broker's close of the socket stays held
            backup.stall_after(len(b"RECEIPT\nreceipt-id:amqstomp-move-%d\n\n\x00" % seq))
            hand_back(seq, *args)  # DISCONNECT, its RECEIPT: the broker is done with this socket
            handed_back.set()
            tried.wait(15)  # the racer's write on it, before the move drops it

        transport.send_frame = spy
        reconnector.hand_back = hand_back_then_wait

        def racer() -> None:
            try:
                conn.send(destination, "racer")
            except Exception as exc:  # what the race came to: refused is allowed, silence is not
                outcome["error"] = exc
            else:
                outcome["error"] = None

        thread = threading.Thread(target=racer, name="test-move-racer", daemon=True)
        thread.start()
        assert chosen.wait(10)
        priority.refuse(False)  # the priority broker answers: the probe moves the connection there
        assert wait_until(lambda: reconnector.prober.moves >= 1, 15), "no move"
        thread.join(20)
        assert not thread.is_alive() and "error" in outcome
        assert handed_back.is_set() and tried.is_set()
        assert wait_until(lambda: transport.is_connected() and not reconnector.reconnecting, 15)
        assert transport.current_host_and_port == priority.address and transport.link_seq != old
        del transport.send_frame
        conn.send(destination, "after", receipt="after")
        conn.wait_for_receipt("after", timeout=10)
    finally:
        conn.disconnect()
    expected = ["after"] if outcome.get("error") is not None else ["racer", "after"]
    got = _bodies_on(activemq, destination, len(expected))
    assert sorted(got) == sorted(expected), "send() %s; the broker holds %r" % (
        "returned normally" if outcome.get("error") is None else "raised %r" % outcome["error"], got)
    assert outcome["error"] is None, "the send was refused instead of going on the new socket: %r" % outcome["error"]


def _bodies_on(activemq: Any, destination: str, expected: int, timeout_s: float = 20.0) -> List[str]:
    """The bodies ``destination`` holds: a fresh consumer takes them until ``expected`` came
    and nothing more for 1 s, or nothing came for 3 s, within ``timeout_s``."""
    frames = _Frames()
    conn = amqstomp.Connection12([tuple(activemq.host_and_ports[0])])
    conn.set_listener("frames", frames)
    conn.connect("admin", "admin", wait=True, timeout=15)
    got: List[str] = []
    try:
        conn.subscribe(destination, id="count", ack="auto")
        deadline, last = time.monotonic() + timeout_s, time.monotonic()
        while time.monotonic() < deadline:
            try:
                frame = frames.queue.get(timeout=0.1)
            except queue.Empty:
                quiet = time.monotonic() - last
                if (len(got) >= expected and quiet > 1.0) or quiet > 3.0:
                    break
                continue
            got.append(frame.body if isinstance(frame.body, str) else frame.body.decode())
            last = time.monotonic()
    finally:
        conn.disconnect()
    return got
