"""The subscription core driven in memory, the way a driver drives it (issue 22,
"One core, any driver"): no broker, no thread, no socket, no clock -- the test
passes ``now_ms`` in and asserts the actions each decision returns:

* SUBSCRIBE prepared (:func:`amqstomp._core.subscriptions.subscribe_request` then
  :func:`~amqstomp._core.subscriptions.subscribe_plan`): the headers and the window;
* deliveries counted (:func:`amqstomp._core.acks.delivered`: the ``PAUSE`` flag when
  the buffer is full, ``TURNED_SLOW`` once), consumptions (:func:`~amqstomp._core.acks.consumed`:
  :class:`~amqstomp._core.acks.AckDue` with the batch's cumulative ACK, the resume at
  half, the flush deadline), the timer's flush (:func:`~amqstomp._core.acks.timer_due`)
  and close (:func:`~amqstomp._core.acks.closing`);
* then the one driver-side applier (:class:`amqstomp._engine.applier.SubscriptionApplier`)
  given those actions against a recording port: which driver calls each becomes
  (pause/resume of reading across subscriptions, the timer armed for the deadline,
  the timer thread's ACK queued with ``nowait``).

The hypothesis model of every mode is ``tests/test_acks_core.py``; the threaded
manager on a broker ``tests/test_pause_resume.py``, ``tests/test_optimize*.py``.
"""
from typing import Any, Dict, List, Optional, Tuple

import pytest

from amqstomp._core import acks
from amqstomp._core.settle import BY_LIBRARY
from amqstomp._core.subscriptions import subscribe_plan, subscribe_request
from amqstomp._engine.applier import SubscriptionApplier
from amqstomp.exception import NotConnectedException
from amqstomp.flow import PrefetchPolicy, RedeliveryPolicy

pytestmark = pytest.mark.timeout(30)

SERVER = "ActiveMQ/5.17.2"


class Sub(acks.Acking):
    """What a driver keeps per subscription beside the core's state (as the threaded
    ``Subscription`` and the asyncio one do)."""

    __slots__ = ("id", "destination", "ack", "timer")

    def __init__(self, window: Any, sub_id: str, destination: str, ack: str) -> None:
        super().__init__(window)
        self.id, self.destination, self.ack, self.timer = sub_id, destination, ack, None


def subscribe(options: Dict[str, Any], ack: str = "client", sub_id: str = "1") -> Tuple[Dict[str, Any], Sub]:
    request = subscribe_request("/queue/a", sub_id, ack, {}, options, RedeliveryPolicy())
    plan = subscribe_plan(request, "activemq", SERVER, PrefetchPolicy())
    return plan.headers, Sub(plan.window, sub_id, plan.name, ack)


def message(n: int) -> Dict[str, str]:
    return {"message-id": "m%d" % n, "ack": "a%d" % n, "subscription": "1"}


def test_subscribe_prepares_the_headers_and_the_batching_window():
    headers, sub = subscribe({"optimize_acknowledge": True, "prefetch_size": 10})
    assert headers["activemq.prefetchSize"] == "10"
    assert (headers["destination"], headers["id"], headers["ack"]) == ("/queue/a", "1", "client")
    window = sub.window
    assert (window.prefetch, window.threshold, window.optimize_acknowledge) == (10, 6, True)
    assert sub.clocked and not acks.application_acks("client", True)
    assert acks.settled_by(sub) == BY_LIBRARY
    _, plain = subscribe({}, ack="client-individual")
    assert not plain.clocked  # the driver reads no clock for it: now_ms 0


def test_a_full_buffer_pauses_and_the_half_drained_one_resumes():
    """max_buffered 4: the 4th delivery asks for PAUSE, each one after it too (the rest of a
    recv's frames); consumption resumes at 2 pending, once; slow above 2 x prefetch, once."""
    _, sub = subscribe({"prefetch_size": 1, "max_buffered": 4}, ack="auto")
    flags = [acks.delivered(sub, 0, 100) for _ in range(5)]
    assert flags == [0, 0, acks.TURNED_SLOW, acks.PAUSE, acks.PAUSE]
    assert sub.window.pending == 5 and sub.slow
    todos = [acks.consumed(sub, message(n), n, 100, 0, False) for n in range(1, 6)]
    assert [t is not None and t.resume for t in todos] == [False, False, True, False, False]
    assert todos[2].ack is None and todos[2].flush_at_ms is None  # the broker acks ack:auto
    assert acks.delivered(sub, 0, 100) == 0  # 1 pending: neither full nor slow
    assert acks.consumed(sub, message(6), 6, 100, 0, False) is None


def test_the_batch_is_acked_by_count_naming_the_newest_consumed():
    _, sub = subscribe({"optimize_acknowledge": True, "prefetch_size": 10, "idle_ack_ms": 0,
                        "optimize_acknowledge_timeout_ms": 0})
    now = 1000
    for _ in range(8):
        assert acks.delivered(sub, now, 10) == 0
    todos = [acks.consumed(sub, message(n), n, 10, now, False) for n in range(1, 9)]
    assert [t is None for t in todos] == [True] * 5 + [False, True, True]
    assert (todos[5].ack, todos[5].resume, todos[5].flush_at_ms) == (message(6), False, None)
    assert sub.named == message(6) and sub.window.acked == 6
    assert acks.timer_due(sub, now + 10 ** 6).ack is None  # no timer rule asked: nothing by time
    assert acks.closing(sub, now) == message(8)  # UNSUBSCRIBE: the rest, cumulatively
    assert acks.closing(sub, now) is None


def test_a_short_batch_is_acked_by_the_timer_at_the_deadline_it_asked_for():
    """optimizeAcknowledgeTimeOut 300 ms, idle flush off: the first consumption asks for
    the timer at now + 300; before it the timer finds nothing, at it the ACK of the batch."""
    _, sub = subscribe({"optimize_acknowledge": True, "prefetch_size": 10, "idle_ack_ms": 0,
                        "optimize_acknowledge_timeout_ms": 300})
    now = 5000
    for _ in range(3):
        acks.delivered(sub, now, 10)
    first = acks.consumed(sub, message(1), 1, 10, now, False)
    assert first is not None and (first.ack, first.resume) == (None, False)
    deadline = first.flush_at_ms
    assert deadline == now + 300
    # armed: the next consumptions ask for no second timer
    assert acks.consumed(sub, message(2), 2, 10, now + 1, True) is None
    assert acks.consumed(sub, message(3), 3, 10, now + 2, True) is None
    early = acks.timer_due(sub, deadline - 1)
    assert early is not None and early.ack is None and early.flush_at_ms == deadline
    due = acks.timer_due(sub, deadline)
    assert due is not None and due.ack == message(3) and not due.resume
    assert due.flush_at_ms is None  # nothing unacked: no timer
    assert acks.closing(sub, deadline) is None
    sub.closed = True
    assert acks.timer_due(sub, deadline + 300) is None


class Port:
    """The driver calls the applier makes, recorded (a TransportPort's members it uses)."""

    version = "1.2"
    dialect = "activemq"

    def __init__(self) -> None:
        self.calls: List[Tuple[Any, ...]] = []
        self.connected = True

    def pause_reading(self) -> None:
        self.calls.append(("pause",))

    def resume_reading(self) -> None:
        self.calls.append(("resume",))

    def call_later(self, delay_s: float, fn: Any, *args: Any) -> Any:
        if not self.connected:
            raise NotConnectedException("gone")
        self.calls.append(("later", delay_s, fn, args))
        return Timer(self.calls)

    def send_frame(self, cmd: str, headers: Optional[Dict[str, Any]] = None, body: Any = b"",
                   write_timeout: Optional[float] = None, link_seq: int = 0, nowait: bool = False) -> None:
        if not self.connected:
            raise NotConnectedException("gone")
        self.calls.append((cmd, headers, write_timeout, link_seq, nowait))

    def post(self, event: Any) -> None:
        self.calls.append(("post", event))


class Timer:
    def __init__(self, calls: List[Tuple[Any, ...]]) -> None:
        self.calls = calls

    def cancel(self) -> None:
        self.calls.append(("cancel",))


def test_the_applier_pauses_reading_once_and_resumes_when_every_buffer_drained():
    port = Port()
    applier = SubscriptionApplier(port, lambda sub: None)  # type: ignore[arg-type]
    _, one = subscribe({}, sub_id="1")
    _, two = subscribe({}, sub_id="2")
    applier.pause(one)
    applier.pause(two)
    applier.apply(one, acks.AckDue(None, resume=True), 0)
    assert port.calls == [("pause",), ("pause",)]  # two is still full
    applier.unpause(one)  # not paused any more: nothing
    applier.retire(two)  # closed while full: read again
    assert port.calls[2:] == [("resume",)]
    applier.retire(two)
    assert port.calls[3:] == []


def test_the_applier_arms_the_deadline_and_the_timer_writes_without_blocking():
    port = Port()
    fired: List[Any] = []
    applier = SubscriptionApplier(port, fired.append)  # type: ignore[arg-type]
    _, sub = subscribe({"optimize_acknowledge": True, "prefetch_size": 10})
    applier.apply(sub, acks.AckDue(None, flush_at_ms=1300), 1000)
    assert port.calls[0][:2] == ("later", 0.3) and port.calls[0][3] == (sub,)
    port.calls[0][2](sub)  # the timer thread's call
    assert fired == [sub] and sub.timer is not None
    applier.write_ack(sub, message(6), nowait=True)  # the timer thread's ACK: queued
    assert port.calls[1] == ("ACK", {"id": "a6"}, None, 0, True)
    applier.write_ack(sub, message(7), 2.0, link_seq=3)  # the dispatcher's: on the delivering socket
    assert port.calls[2] == ("ACK", {"id": "a7"}, 2.0, 3, False)
    applier.cancel(sub)
    assert port.calls[3:] == [("cancel",)] and sub.timer is None
    applier.apply(sub, acks.AckDue(None, flush_at_ms=500), 1000)  # past: at once
    assert port.calls[4][:2] == ("later", 0.0)


def test_the_applier_on_a_gone_connection_arms_nothing_and_raises_nothing():
    port = Port()
    applier = SubscriptionApplier(port, lambda sub: None)  # type: ignore[arg-type]
    _, sub = subscribe({"optimize_acknowledge": True, "prefetch_size": 10})
    port.connected = False
    applier.apply(sub, acks.AckDue(None, flush_at_ms=1300), 1000)
    assert sub.timer is None
    applier.write_ack(sub, message(1))  # the broker redelivers: the ACK is never sent elsewhere
    assert port.calls == []


def test_the_applier_reports_a_slow_consumer_as_a_typed_event():
    port = Port()
    applier = SubscriptionApplier(port, lambda sub: None)  # type: ignore[arg-type]
    _, sub = subscribe({"prefetch_size": 1, "max_buffered": 4}, ack="auto")
    for _ in range(3):
        acks.delivered(sub, 0, 7)
    applier.turned_slow(sub)
    (kind, event), = port.calls
    assert type(event).__name__ == "SlowConsumer"
    assert event.arg == {"subscription": "1", "destination": "/queue/a", "pending": 3, "pending_bytes": 21,
                         "prefetch": 1}
