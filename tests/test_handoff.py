"""The hand-off between a link's two threads (amqstomp._io.handoff, issue 21): a MESSAGE
goes to the listeners on the reading thread when nothing is queued and nobody
dispatches; the other thread takes reading over when a listener runs long or waits on
a read. In memory over both builds (the compiled amqstomp._io._handoff and the pure
twin), then against a real ActiveMQ."""
import threading
import time
import uuid

import pytest
from conftest import fill_queue, wait_until

import amqstomp
from amqstomp._io import _handoff_py
from amqstomp.listener import ConnectionListener

try:
    from amqstomp._io import _handoff as _handoff_c
except ImportError:  # pragma: no cover - a pure-Python install
    _handoff_c = None

IMPLS = [pytest.param(_handoff_py, id="python"),
         pytest.param(_handoff_c, id="cython",
                      marks=pytest.mark.skipif(_handoff_c is None, reason="compiled hand-off not built"))]

pytestmark = pytest.mark.timeout(120)


def _hour_polls(monkeypatch, impl):
    """Polls an hour apart: only an explicit request can hand reading over within a test's bounds."""
    monkeypatch.setattr(impl, "ACTIVE_POLL_S", 3600.0)
    monkeypatch.setattr(impl, "IDLE_POLL_S", 3600.0)


def _dispatching(events):
    """A dispatching thread waiting for its next item; (thread, list it appends the item to)."""
    got = []
    thread = threading.Thread(target=lambda: got.append(events.next_item(False)), daemon=True)
    thread.start()
    return thread, got


def _reading_queue(impl):
    events = impl.EventQueue()
    events.reading = threading.get_ident()
    return events


@pytest.mark.parametrize("impl", IMPLS)
def test_the_reading_thread_runs_the_listeners_itself_when_nothing_is_queued(impl):
    events = _reading_queue(impl)
    ran = []
    events.offer("m1", ran.append)
    assert ran == ["m1"] and events.empty()
    events.put("receipt")  # something queued: the next MESSAGE waits behind it, in order
    events.offer("m2", ran.append)
    assert ran == ["m1"]
    assert events.next_item(False) == "receipt"
    assert events.next_item(True) == "m2"
    events.finish()


@pytest.mark.parametrize("impl", IMPLS)
def test_another_thread_never_runs_listeners_inline(impl):
    events = impl.EventQueue()  # nobody reads on this thread
    ran = []
    events.offer("m1", ran.append)
    assert ran == [] and not events.empty()


@pytest.mark.parametrize("impl", IMPLS)
def test_while_a_listener_runs_inline_what_arrives_is_queued_behind_it(impl):
    events = _reading_queue(impl)
    seen = []

    def listener(item):
        seen.append(item)
        events.offer("m2", seen.append)  # (a nested offer: the token is taken, so it queues)
        assert events.dispatching_here()

    events.offer("m1", listener)
    assert seen == ["m1"] and not events.dispatching_here()
    assert events.next_item(False) == "m2"
    events.finish()


def _run_reader(events, deliver, item="m1"):
    """A reading thread that offers ``item``; returns (thread, result dict)."""
    result = {}

    def run():
        events.reading = threading.get_ident()
        events.batch = iter(["rest-1", "rest-2"])  # what it read and had not handled yet
        events.offer(item, deliver)
        result["handed_over"] = events.handed_over()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


@pytest.mark.parametrize("impl", IMPLS)
def test_a_listener_running_long_on_the_reading_thread_hands_reading_over(impl):
    events = impl.EventQueue()
    release = threading.Event()
    reader, result = _run_reader(events, lambda item: release.wait(30))
    assert wait_until(lambda: events.busy, 10)
    # the idle dispatching thread looks, finds the same inline dispatch a poll later, takes reading over
    assert events.next_item(False) is impl.PROMOTE
    assert events.reading == threading.get_ident() and events.promotions == 1
    assert list(events.take_batch()) == ["rest-1", "rest-2"] and events.take_batch() is None
    release.set()
    reader.join(10)
    assert result == {"handed_over": True}


@pytest.mark.parametrize("impl", IMPLS)
def test_a_listener_about_to_wait_on_a_read_hands_reading_over_at_once(impl, monkeypatch):
    # polls of an hour: only promote_now can hand reading over within the test's bounds
    _hour_polls(monkeypatch, impl)
    events = impl.EventQueue()
    release = threading.Event()
    asked = []

    def listener(item):
        asked.append(events.promote_now())
        release.wait(30)

    reader, result = _run_reader(events, listener)
    dispatcher, got = _dispatching(events)
    dispatcher.join(20)
    assert got == [impl.PROMOTE] and asked == [True]
    release.set()
    reader.join(10)
    assert result == {"handed_over": True}


@pytest.mark.parametrize("impl", IMPLS)
def test_another_thread_can_ask_for_reading_to_be_taken_over(impl, monkeypatch):
    # (the heart-beat check does, when bytes wait unread while a listener runs on the reading thread)
    _hour_polls(monkeypatch, impl)
    events = impl.EventQueue()
    assert not events.ask_promotion()  # nothing runs inline
    release = threading.Event()
    reader, result = _run_reader(events, lambda item: release.wait(30))
    assert wait_until(lambda: events.busy, 10)
    dispatcher, got = _dispatching(events)
    assert wait_until(lambda: events.idle, 10)
    assert events.ask_promotion()
    dispatcher.join(20)
    assert got == [impl.PROMOTE]
    release.set()
    reader.join(10)
    assert result == {"handed_over": True}


@pytest.mark.parametrize("impl", IMPLS)
def test_promote_now_is_refused_off_the_reading_thread_and_a_quick_listener_keeps_reading(impl):
    events = _reading_queue(impl)
    assert not events.promote_now()  # not in a listener
    events.offer("m1", lambda item: None)
    assert not events.handed_over() and events.reading_here()


@pytest.mark.parametrize("impl", IMPLS)
def test_a_put_wakes_the_sleeping_dispatching_thread(impl, monkeypatch):
    _hour_polls(monkeypatch, impl)
    events = impl.EventQueue()
    dispatcher, got = _dispatching(events)
    assert wait_until(lambda: events.idle, 10)
    events.put("event")
    dispatcher.join(20)
    assert got == ["event"]


# --------------------------------------------------------------------------- against ActiveMQ


def _hosts(broker):
    return [("127.0.0.1", broker.stomp_port)]


@pytest.mark.broker
def test_a_quick_listener_runs_on_the_reading_thread_with_no_hand_off(activemq):
    dest = "/queue/handoff-%s" % uuid.uuid4().hex[:10]
    fill_queue(activemq, dest, 200)
    threads, got = [], []

    class L(ConnectionListener):
        def on_message(self, frame):
            threads.append(threading.current_thread().name)
            got.append(frame.headers["message-id"])

    conn = amqstomp.Connection12(_hosts(activemq))
    conn.set_listener("l", L())
    conn.connect("admin", "admin", wait=True)
    try:
        conn.subscribe(dest, id="1", ack="auto")
        assert wait_until(lambda: len(got) == 200, 30)
        events = conn.transport._link.events
        assert len(set(got)) == 200
        assert events.promotions == 0
        # (a MESSAGE arriving while the other thread dispatches an event is queued behind it)
        assert threads.count("amqstomp-reader-%d.1" % conn.transport.number) >= 150, set(threads)
    finally:
        conn.disconnect()


@pytest.mark.broker
@pytest.mark.parametrize("polls", ["usual", "hour-long"])
def test_a_slow_listener_keeps_heart_beats_order_and_every_message(activemq, monkeypatch, polls):
    """A listener that takes 1.5 s on its first message, with heart-beats of 300 ms: the
    other thread takes reading over (the broker's heart-beats are read: no timeout), the
    messages behind it are read meanwhile and reach the listener in order, none lost. With
    hour-long polls only the heart-beat check's own request hands reading over."""
    if polls == "hour-long":
        from amqstomp._io import handoff

        impl = _handoff_c if handoff.IMPLEMENTATION == "cython" else _handoff_py
        _hour_polls(monkeypatch, impl)
    dest = "/queue/handoff-%s" % uuid.uuid4().hex[:10]
    fill_queue(activemq, dest, 50)
    got, errors = [], []

    class L(ConnectionListener):
        def on_message(self, frame):
            got.append(frame.headers["message-id"])
            if len(got) == 1:
                time.sleep(1.5)
            conn.ack(frame.headers["ack"])

        def on_heartbeat_timeout(self):
            errors.append("heartbeat timeout")

        def on_disconnected(self):
            errors.append("disconnected")

    conn = amqstomp.Connection12(_hosts(activemq), heartbeats=(300, 300))
    conn.set_listener("l", L())
    conn.connect("admin", "admin", wait=True)
    try:
        conn.subscribe(dest, id="1", ack="client-individual", headers={"activemq.prefetchSize": "10"})
        assert wait_until(lambda: len(got) == 50, 30), len(got)
        assert conn.transport._link.events.promotions >= 1
        assert errors == [] and conn.is_connected()
        ids = [int(m.rsplit(":", 1)[1]) for m in got]
        assert ids == sorted(ids) and len(set(ids)) == 50
    finally:
        conn.disconnect()
    assert errors == ["disconnected"]


@pytest.mark.broker
@pytest.mark.parametrize("impl", IMPLS)
def test_a_listener_that_waits_for_a_receipt_gets_it_without_the_poll(activemq, monkeypatch, impl):
    """A listener that sends with a receipt and waits for it (only a read brings it): with
    polls of an hour, only the wait's own hand-over can bring it within the test's bound."""
    from amqstomp._io import handoff

    if handoff.IMPLEMENTATION != ("cython" if impl is _handoff_c else "python"):
        pytest.skip("this build loads the other hand-off")
    _hour_polls(monkeypatch, impl)
    dest = "/queue/handoff-%s" % uuid.uuid4().hex[:10]
    fill_queue(activemq, dest, 5)
    committed = []

    class L(ConnectionListener):
        def on_message(self, frame):
            receipt = "r-" + frame.headers["message-id"]
            conn.send(dest + ".out", "x", receipt=receipt)
            conn.transport.wait_for_receipt(receipt, 20)  # (Link.wait: the other thread reads meanwhile)
            conn.ack(frame.headers["ack"])
            committed.append(frame.headers["message-id"])

    conn = amqstomp.Connection12(_hosts(activemq), timeout=20)
    conn.set_listener("l", L())
    conn.connect("admin", "admin", wait=True)
    try:
        conn.subscribe(dest, id="1", ack="client-individual", headers={"activemq.prefetchSize": "1"})
        assert wait_until(lambda: len(committed) == 5, 60), committed
        assert conn.transport._link.events.promotions >= 1
    finally:
        conn.disconnect()


@pytest.mark.broker
def test_disconnect_from_a_listener_on_the_reading_thread_ends_promptly(activemq, monkeypatch):
    """disconnect() from a listener that runs inline: the other thread reads the socket to its
    end (DISCONNECT's RECEIPT, then EOF), so closing does not wait for a poll or a timeout."""
    from amqstomp._io import handoff

    impl = _handoff_c if handoff.IMPLEMENTATION == "cython" else _handoff_py
    _hour_polls(monkeypatch, impl)
    dest = "/queue/handoff-%s" % uuid.uuid4().hex[:10]
    fill_queue(activemq, dest, 3)
    done, heard = threading.Event(), []

    class L(ConnectionListener):
        def on_message(self, frame):
            if not heard:
                heard.append(threading.current_thread().name)
                conn.disconnect()
                done.set()

        def on_disconnected(self):
            heard.append("disconnected")

    conn = amqstomp.Connection12(_hosts(activemq), timeout=20)
    conn.set_listener("l", L())
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(dest, id="1", ack="auto")
    assert done.wait(30)
    assert heard[0].startswith("amqstomp-reader-")
    assert wait_until(lambda: "disconnected" in heard, 10), heard
    assert wait_until(lambda: not any(t.is_alive() for t in conn.transport.threads()), 10)


@pytest.mark.broker
def test_a_batch_of_short_listeners_does_not_stop_the_socket_being_read(activemq):
    """One read brings hundreds of messages; a listener of 20 ms each keeps the reading thread
    away from the socket for seconds unless the other thread takes reading over: with
    heart-beats of 1 s the broker's would go unread (a false heart-beat timeout, and with
    ack=auto the unhandled rest lost). The idle thread finds no read since its last look and
    takes over (a fresh-eyes tester's finding: 400 x 20 ms, heart-beats 1 s, ack auto)."""
    dest = "/queue/handoff-%s" % uuid.uuid4().hex[:10]
    fill_queue(activemq, dest, 300, body=b"x" * 200)
    got, errors = [], []

    class L(ConnectionListener):
        def on_message(self, frame):
            got.append(frame.headers["message-id"])
            time.sleep(0.02)

        def on_heartbeat_timeout(self):
            errors.append("heartbeat timeout")

    conn = amqstomp.Connection12(_hosts(activemq), heartbeats=(1000, 1000))
    conn.set_listener("l", L())
    conn.connect("admin", "admin", wait=True)
    try:
        conn.subscribe(dest, id="1", ack="auto")
        assert wait_until(lambda: len(got) >= 20, 30)
        # a receipt the main thread waits for, while the batch's listeners run: read by the other
        # thread within a poll or two (without the take-over: after the whole batch, some 5 s)
        conn.send(dest + ".out", "x", receipt="r-main")
        conn.transport.wait_for_receipt("r-main", 2.0)
        assert len(got) < 250  # (the batch was still being handled)
        assert wait_until(lambda: len(got) == 300 or errors, 60), len(got)
        assert errors == [] and len(set(got)) == 300 and conn.is_connected()
        assert conn.transport._link.events.promotions >= 1
    finally:
        conn.disconnect()


@pytest.mark.broker
@pytest.mark.parametrize("always_session_async", [True, False])
def test_always_session_async_keeps_every_listener_call_on_one_thread(activemq, always_session_async):
    """ActiveMQ's alwaysSessionAsync: every MESSAGE through the queue to the one dispatching
    thread (code that keeps thread-bound objects between calls, a sqlite3 connection made in
    the listener); without it the calls may run on either of the socket's two threads, one
    at a time (a slow listener hands reading over, so the next calls come on the other)."""
    dest = "/queue/handoff-%s" % uuid.uuid4().hex[:10]
    fill_queue(activemq, dest, 40)
    threads, got = [], []

    class L(ConnectionListener):
        def on_message(self, frame):
            threads.append(threading.current_thread().name)
            got.append(frame.headers["message-id"])
            if len(got) in (1, 20):
                time.sleep(0.4)  # long enough for the other thread to take reading over

    conn = amqstomp.Connection12(_hosts(activemq), always_session_async=always_session_async)
    conn.set_listener("l", L())
    conn.connect("admin", "admin", wait=True)
    try:
        conn.subscribe(dest, id="1", ack="auto", headers={"activemq.prefetchSize": "10"})
        assert wait_until(lambda: len(got) == 40, 30), len(got)
        tag = "%d.1" % conn.transport.number
        if always_session_async:
            assert set(threads) == {"amqstomp-dispatch-" + tag}
            assert conn.transport._link.events.promotions == 0
        else:  # (which of the two runs which call is the hand-off's business)
            assert set(threads) <= {"amqstomp-dispatch-" + tag, "amqstomp-reader-" + tag}
            assert "amqstomp-reader-" + tag in threads and conn.transport._link.events.promotions >= 1
    finally:
        conn.disconnect()
