"""Settling messages over a failover, against a real ActiveMQ behind a TcpProxy
the tests cut: an acknowledgement or a commit that returns normally did what it
says, and one that cannot raises its own exception.

ActiveMQ redelivers a lost socket's messages on the new socket under the SAME
message-id (a new ``ack`` id on STOMP 1.2), so which socket delivered a message
is told by its delivery (``Frame.link_seq`` / ``Message.link_seq``), never by
its message-id. Each test lets the redelivered copy arrive first, the case
where keying by message-id reported success for an ACK that was dropped.
"""
import contextlib
import threading
import time
import uuid

import pytest
from conftest import Collector, cut_stalled_later, wait_until

import amqstomp as stomp
from amqstomp.exception import AcknowledgeInterruptedError, TransactionInDoubtError, TransactionRolledBackError
from amqstomp.jms import (
    AUTO_ACKNOWLEDGE,
    CLIENT_ACKNOWLEDGE,
    INDIVIDUAL_ACKNOWLEDGE,
    NON_PERSISTENT,
    ConnectionFactory,
    Queue,
    TextMessage,
)

pytestmark = pytest.mark.timeout(120)


def _queue() -> Queue:
    return Queue("settle.%s" % uuid.uuid4().hex[:10])


def _feed(activemq, queue: Queue, count: int) -> None:
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        producer = feeder.create_session().create_producer(queue)
        for i in range(count):
            producer.send(TextMessage("t%d" % i), delivery_mode=NON_PERSISTENT)


def _left_on_broker(activemq, queue: Queue, wait_s: float = 1.0) -> list:
    """What a fresh consumer gets from ``queue`` (the broker's view)."""
    with ConnectionFactory(activemq.url).create_connection() as check:
        consumer = check.create_session().create_consumer(queue)
        check.start()
        got = []
        while True:
            message = consumer.receive(wait_s)
            if message is None:
                return got
            got.append(message.text)


def _failover_url(proxy) -> str:
    return "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100" % proxy.address


@contextlib.contextmanager
def _failover_consumer(activemq, tcp_proxy_factory, fed: int, transacted: bool = False,
                       acknowledge_mode: int = AUTO_ACKNOWLEDGE):
    """A queue fed ``fed`` messages, and a started consumer of it on a failover
    connection through a TcpProxy: yields (proxy, queue, connection, session, consumer)."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    queue = _queue()
    _feed(activemq, queue, fed)
    with ConnectionFactory(_failover_url(proxy), heartbeats=(1000, 1000)).create_connection(timeout_s=15) as conn:
        session = conn.create_session(transacted=transacted, acknowledge_mode=acknowledge_mode)
        consumer = session.create_consumer(queue)
        conn.start()
        yield proxy, queue, conn, session, consumer


def _cut_and_wait_for_copies(proxy, connection, consumer, copies: int) -> None:
    """Cut the socket, wait for the new one and for ``copies`` redelivered
    messages to sit in the consumer's buffer."""
    transport = connection._state.consumer_link.transport
    seq = transport.link_seq
    assert proxy.cut() >= 1
    assert wait_until(lambda: transport.is_connected() and transport.link_seq != seq, 15)
    assert wait_until(lambda: len(consumer._buffer) >= copies, 10), len(consumer._buffer)


def test_jms_commit_after_the_redelivered_copy_arrived_raises_rolled_back(activemq, tcp_proxy_factory):
    """The issue's case: the copies (same message-id) are in the buffer before
    commit(); commit() used to commit an empty transaction and return."""
    with _failover_consumer(activemq, tcp_proxy_factory, 3, transacted=True) as (proxy, queue, conn, session,
                                                                                 consumer):
        first = consumer.receive(5)
        assert first.text == "t0" and first.link_seq == conn._state.consumer_link.transport.link_seq
        _cut_and_wait_for_copies(proxy, conn, consumer, 3)
        with pytest.raises(TransactionRolledBackError, match="lost since"):
            session.commit()
        again = [consumer.receive(5) for _ in range(3)]
        assert [m.text for m in again] == ["t0", "t1", "t2"]
        assert again[0].redelivered and again[0].message_id == first.message_id
        assert again[0].link_seq > first.link_seq
        session.commit()
        assert consumer.receive(0.5) is None
    assert _left_on_broker(activemq, queue) == []


@pytest.mark.parametrize("mode", [CLIENT_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE], ids=["client", "individual"])
def test_jms_acknowledge_of_a_lost_socket_message_raises_and_the_copy_acks(activemq, tcp_proxy_factory, mode):
    with _failover_consumer(activemq, tcp_proxy_factory, 2, acknowledge_mode=mode) as (proxy, queue, conn, session,
                                                                                       consumer):
        first = consumer.receive(5)
        assert first.text == "t0"
        _cut_and_wait_for_copies(proxy, conn, consumer, 2)
        with pytest.raises(AcknowledgeInterruptedError) as info:
            first.acknowledge()
        assert info.value.count == 1 and "lost since" in str(info.value)
        got = [consumer.receive(5) for _ in range(2)]
        assert [m.text for m in got] == ["t0", "t1"] and got[0].redelivered
        for message in got:
            message.acknowledge()  # on the socket that delivered them: no error
        assert consumer.receive(0.5) is None
    assert _left_on_broker(activemq, queue) == []


def test_jms_sync_acknowledge_waits_for_the_receipt(activemq):
    """jms.sendAcksAsync=false: acknowledge() returns once the broker had the ACK."""
    queue = _queue()
    _feed(activemq, queue, 1)
    url = activemq.url + ("&" if "?" in activemq.url else "?") + "jms.sendAcksAsync=false"
    with ConnectionFactory(url).create_connection() as conn:
        session = conn.create_session(acknowledge_mode=CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(queue)
        conn.start()
        message = consumer.receive(5)
        sent = []
        transport = conn._state.consumer_link.transport
        original = transport.send_frame

        def spy(cmd, headers=None, *args, **kwargs):
            sent.append((cmd, dict(headers or {})))
            return original(cmd, headers, *args, **kwargs)

        transport.send_frame = spy
        try:
            message.acknowledge()
        finally:
            transport.send_frame = original
        acks = [h for cmd, h in sent if cmd == "ACK"]
        assert len(acks) == 1 and "receipt" in acks[0]
    assert _left_on_broker(activemq, queue) == []


def _drop_commit_receipt_then(transport, action, prefix="commit-"):
    """Leave the RECEIPT of the next COMMIT (frame whose receipt starts with
    ``prefix``) unmatched as it arrives, then run ``action`` (on another
    thread): the broker executed the frame, the client never learns it.
    Returns the list the dropped receipt id goes into."""
    original = transport.on_frame  # the reader hands every frame to it (FrameSink)
    done = []

    def on_frame(link, frame):
        receipt_id = frame.headers.get("receipt-id") if frame.cmd == "RECEIPT" else None
        if not done and receipt_id is not None and receipt_id.startswith(prefix):
            done.append(receipt_id)
            threading.Thread(target=action, daemon=True).start()
            return None
        return original(link, frame)

    transport.on_frame = on_frame
    return done


def test_jms_commit_whose_receipt_was_lost_is_in_doubt_not_rolled_back(activemq, tcp_proxy_factory):
    """The COMMIT reached the broker and was executed; the socket died before its
    RECEIPT came. Reporting a rollback made the application undo work the broker
    had committed (and the message never came again)."""
    with _failover_consumer(activemq, tcp_proxy_factory, 1, transacted=True) as (proxy, queue, conn, session,
                                                                                 consumer):
        assert consumer.receive(5).text == "t0"
        _drop_commit_receipt_then(conn._state.consumer_link.transport, proxy.cut)
        with pytest.raises(TransactionInDoubtError, match="may or may not"):
            session.commit()
        assert consumer.receive(2) is None  # the broker committed it: never redelivered, not locally either
    assert _left_on_broker(activemq, queue) == []


def test_jms_commit_cut_before_the_broker_had_it_is_in_doubt_and_comes_again(activemq, tcp_proxy_factory):
    """The COMMIT was written into a stalled path and the socket then died: the
    client cannot know; the broker did not commit, so the message comes again."""
    with _failover_consumer(activemq, tcp_proxy_factory, 1, transacted=True) as (proxy, queue, conn, session,
                                                                                 consumer):
        assert consumer.receive(5).text == "t0"
        proxy.stall()

        cut_stalled_later(proxy)
        with pytest.raises(TransactionInDoubtError):
            session.commit()
        again = consumer.receive(15)
        assert again is not None and again.text == "t0" and again.redelivered
        session.commit()
    assert _left_on_broker(activemq, queue) == []


# ---------------------------------------------------------------- stomp.py API


class _Holding(Collector):
    """Holds its listener on the first message until released, then acks every
    message (client-individual), recording what each ack did."""

    def __init__(self, conn_ref):
        super().__init__()
        self.conn_ref = conn_ref
        self.release = threading.Event()
        self.entered = threading.Event()
        self.outcomes = []

    def on_message(self, frame):
        super().on_message(frame)
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait(20)
        conn = self.conn_ref[0]
        try:
            if conn.version == "1.2":
                conn.ack(frame.headers["ack"])
            else:
                conn.ack(frame.headers["message-id"], frame.headers["subscription"])
            self.outcomes.append(("acked", frame.body, frame.link_seq))
        except AcknowledgeInterruptedError:
            self.outcomes.append(("interrupted", frame.body, frame.link_seq))


@pytest.mark.parametrize("connection_class", [stomp.Connection11, stomp.Connection12], ids=["1.1", "1.2"])
def test_stomppy_ack_of_the_lost_copy_raises_after_the_new_copy_arrived(activemq, tcp_proxy_factory,
                                                                         connection_class):
    """STOMP 1.1: the ACK of the lost socket's copy used to go out on the new
    socket (same message-id), ack the redelivered copy before the application
    saw it, and the application's own ACK of the copy then drew 'Unexpected ACK'."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    q = "/queue/settle-" + uuid.uuid4().hex[:10]
    ref = [None]
    rec = _Holding(ref)
    conn = connection_class([proxy.address], auto_reconnect=True, heartbeats=(1000, 1000),
                            reconnect_sleep_initial=0.05, reconnect_attempts_max=-1, timeout=20)
    ref[0] = conn
    conn.set_listener("rec", rec)
    conn.connect("admin", "admin", wait=True, timeout=15)
    producer = stomp.Connection12(activemq.host_and_ports)
    producer.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe(q, id="s", ack="client-individual", receipt="sub")
        conn.wait_for_receipt("sub", 10)
        producer.send(q, "one")
        assert rec.entered.wait(10)
        seq = conn.transport.link_seq
        proxy.cut()
        # the copy arrives on the new socket while the listener still holds the old one
        assert wait_until(lambda: conn.transport.is_connected() and conn.transport.link_seq != seq, 15)
        time.sleep(1.0)
        rec.release.set()
        assert wait_until(lambda: len(rec.outcomes) == 2, 15), rec.outcomes
        # the listener held on the lost copy blocks the old dispatcher; the copy may be handed over
        # before it returns (the reconnect stops waiting for it after 10 s): order by socket
        old, new = sorted(rec.outcomes, key=lambda outcome: outcome[2])
        assert old[:2] == ("interrupted", "one") and new[:2] == ("acked", "one") and new[2] > old[2]
        time.sleep(0.5)
        assert rec.errors == []  # no 'Unexpected ACK'
    finally:
        rec.release.set()
        conn.disconnect()
        producer.disconnect()
    check = Collector()
    plain = stomp.Connection12(activemq.host_and_ports)
    plain.set_listener("c", check)
    plain.connect("admin", "admin", wait=True, timeout=15)
    plain.subscribe(q, id=1, ack="auto")
    time.sleep(1.0)
    plain.disconnect()
    assert check.messages == []


def test_stomppy_failover_does_not_dispatch_the_lost_socket_buffer(activemq, tcp_proxy_factory):
    """The lost socket's buffered client-ack messages used to be fed to the
    listener (whose acks went nowhere) before the reconnect could proceed."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    q = "/queue/settle-" + uuid.uuid4().hex[:10]
    stale = []
    calls = []
    ref = [None]

    class Slow(Collector):
        def on_message(self, frame):
            conn = ref[0]
            calls.append(frame)
            if not conn.transport.link_alive(frame.link_seq):
                stale.append(frame.headers["message-id"])
            time.sleep(0.01)
            try:
                conn.ack(frame.headers["ack"])
            except AcknowledgeInterruptedError:
                pass

    producer = stomp.Connection12(activemq.host_and_ports)
    producer.connect("admin", "admin", wait=True, timeout=15)
    for i in range(300):
        producer.send(q, "m%d" % i)
    rec = Slow()
    conn = stomp.Connection12([proxy.address], auto_reconnect=True, heartbeats=(1000, 1000),
                              reconnect_sleep_initial=0.05, reconnect_attempts_max=-1, timeout=20)
    ref[0] = conn
    conn.set_listener("rec", rec)
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        conn.subscribe(q, id="s", ack="client-individual", prefetch_size=200)
        assert wait_until(lambda: len(calls) >= 20, 10)
        proxy.cut()
        assert wait_until(lambda: len({f.headers["message-id"] for f in calls}) >= 300, 60)
        assert len(stale) <= 1, stale  # at most the one the listener was in when the socket died
    finally:
        conn.disconnect()
        producer.disconnect()


@pytest.mark.timeout(180)
def test_jms_transacted_backlog_over_ten_cuts_commits_each_once_or_says_in_doubt(activemq, tcp_proxy_factory):
    """The hostile pass's scenario: a 3,000-message backlog consumed by a
    transacted session committing each message, with the socket cut every 0.5 s
    ten times. Every commit() that returned normally settled its message for
    good (never delivered again); every message ends committed exactly once,
    or its commit was reported in doubt; the broker ends with nothing left."""
    from amqstomp.jms import PERSISTENT

    total = 3000
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    queue = _queue()
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        session = feeder.create_session(transacted=True)
        producer = session.create_producer(queue)
        for i in range(total):
            producer.send(TextMessage("m%05d" % i), delivery_mode=PERSISTENT)
            if i % 500 == 499:
                session.commit()
        session.commit()
    committed = {}   # text -> commits that returned normally
    in_doubt = set()
    rolled_back = 0
    after_commit = []  # deliveries of a message whose commit had returned normally
    cuts = []

    def cutter():
        for _ in range(10):
            time.sleep(0.5)
            cuts.append(proxy.cut())

    url = _failover_url(proxy) + "&maxReconnectAttempts=-1"
    with ConnectionFactory(url, heartbeats=(1000, 1000)).create_connection(timeout_s=15) as conn:
        session = conn.create_session(transacted=True)
        consumer = session.create_consumer(queue)
        conn.start()
        thread = threading.Thread(target=cutter, daemon=True)
        thread.start()
        deadline = time.monotonic() + 150
        while len(committed) < total and time.monotonic() < deadline:
            message = consumer.receive(1.0)
            if message is None:
                if not thread.is_alive() and len(committed) + len(in_doubt) >= total:
                    break
                continue
            text = message.text
            if text in committed:
                after_commit.append((text, message.delivery_count))
            try:
                session.commit()
            except TransactionInDoubtError:
                in_doubt.add(text)
                continue
            except TransactionRolledBackError:
                rolled_back += 1
                continue
            committed[text] = committed.get(text, 0) + 1
        thread.join(10)
    left = _left_on_broker(activemq, queue)
    print("\nbacklog %d, cuts %s: committed %d, in doubt %d, rolled back %d, after-commit deliveries %d, left %d"
          % (total, cuts, len(committed), len(in_doubt), rolled_back, len(after_commit), len(left)))
    assert len(cuts) == 10 and sum(cuts) >= 5  # the cuts hit live sockets
    assert after_commit == []  # never redelivered once commit() returned
    assert all(count == 1 for count in committed.values())
    missing = {"m%05d" % i for i in range(total)} - set(committed) - in_doubt
    assert missing == set(), sorted(missing)[:10]
    assert left == [] or set(left) <= in_doubt  # at most messages in doubt that the broker did not commit


def test_jms_producer_transaction_sends_after_a_loss_raise_not_broker_errors(activemq, tcp_proxy_factory):
    """A transacted session without consumers keeps its transaction on the producer
    socket. After that socket was lost, the transaction's later SENDs went on the
    new socket, where ActiveMQ never saw the BEGIN ('Invalid transaction id'
    ERRORs at the exception listener); they raise TransactionRolledBackError now
    and the session rolls back, so the next send starts a new transaction."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    queue = _queue()
    errors = []
    with ConnectionFactory(_failover_url(proxy), heartbeats=(1000, 1000)).create_connection(timeout_s=15) as conn:
        conn.set_exception_listener(errors.append)
        session = conn.create_session(transacted=True)
        producer = session.create_producer(queue)
        producer.send(TextMessage("lost-1"))
        transport = conn._state.producer_link().transport
        seq = transport.link_seq
        assert proxy.cut() >= 1
        assert wait_until(lambda: transport.is_connected() and transport.link_seq != seq, 15)
        with pytest.raises(TransactionRolledBackError, match="the next send or receive starts a new one"):
            producer.send(TextMessage("lost-2"))
        # the session rolled back with the broker: the next send is a new transaction (a send into the
        # dead one raised again and again, and its consumer's messages stayed stuck)
        producer.send(TextMessage("kept"))
        session.commit()
        time.sleep(0.5)
        assert errors == []
    assert _left_on_broker(activemq, queue) == ["kept"]


def test_jms_sync_ack_whose_receipt_was_lost_is_in_doubt(activemq, tcp_proxy_factory):
    """jms.sendAcksAsync=false: the ACK reached the broker, its RECEIPT did not
    reach us before the socket died. acknowledge() said 'not acknowledged, the
    broker redelivers it' and the broker never did; the outcome is unknown to the
    client: AcknowledgeInDoubtError."""
    from amqstomp.exception import AcknowledgeInDoubtError

    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    queue = _queue()
    _feed(activemq, queue, 1)
    url = _failover_url(proxy) + "&jms.sendAcksAsync=false"
    with ConnectionFactory(url, heartbeats=(1000, 1000)).create_connection(timeout_s=15) as conn:
        session = conn.create_session(acknowledge_mode=INDIVIDUAL_ACKNOWLEDGE)
        consumer = session.create_consumer(queue)
        conn.start()
        message = consumer.receive(5)
        transport = conn._state.consumer_link.transport
        dropped = _drop_commit_receipt_then(transport, proxy.cut, prefix="ack-")
        with pytest.raises(AcknowledgeInDoubtError, match="may or may not"):
            message.acknowledge()
        assert dropped
        assert consumer.receive(2) is None  # the broker had applied it: never redelivered
    assert _left_on_broker(activemq, queue) == []


def test_jms_create_connection_timeout_bounds_a_stalled_attempt(activemq, tcp_proxy_factory):
    """create_connection(timeout_s=2) on a failover: URI whose broker accepts the
    socket and never answers CONNECT took 30 s (the attempt's own CONNECTED wait)."""
    from amqstomp.exception import ConnectFailedException

    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    proxy.stall()
    started = time.monotonic()
    with pytest.raises(ConnectFailedException):
        ConnectionFactory(_failover_url(proxy)).create_connection(timeout_s=2)
    assert time.monotonic() - started < 6
    proxy.unstall()


def test_stomppy_send_to_an_empty_destination_raises_before_writing(activemq):
    conn = stomp.Connection12(activemq.host_and_ports)
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        with pytest.raises(ValueError, match="empty"):
            conn.send("", "x")
        assert conn.is_connected()  # ActiveMQ closed the connection on it
    finally:
        conn.disconnect()
