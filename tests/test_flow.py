"""Flow-control unit tests (pure computation), over the compiled module and the twin."""
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqstomp._core import _flow_py

pytestmark = pytest.mark.timeout(60)

try:
    from amqstomp._core import _flow as _flow_c
except ImportError:  # pragma: no cover
    _flow_c = None

IMPLS = [pytest.param(_flow_py, id="python"),
         pytest.param(_flow_c, id="cython", marks=pytest.mark.skipif(_flow_c is None, reason="not built"))]


@pytest.fixture(params=IMPLS)
def flow(request):
    return request.param


def test_compiled_flow_loads_by_default():
    env = {k: v for k, v in os.environ.items() if k != "AMQSTOMP_NO_EXTENSIONS"}
    out = subprocess.run([sys.executable, "-c",
                          "import amqstomp.flow as f; print(f.IMPLEMENTATION, f.SubscriptionWindow.__module__)"],
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    if os.environ.get("AMQSTOMP_PURE_BUILD"):
        assert out[0] == "python"
    else:
        assert out == ["cython", "amqstomp._core._flow"]


def test_same_names():
    if _flow_c is None:
        pytest.skip("not built")
    assert sorted(_flow_c.__all__) == sorted(_flow_py.__all__)
    for name in _flow_py.__all__:
        assert hasattr(_flow_c, name)


def test_prefetch_defaults_are_activemq_517(flow):
    policy = flow.PrefetchPolicy()
    assert (policy.queue_prefetch, policy.queue_browser_prefetch,
            policy.durable_topic_prefetch, policy.topic_prefetch) == (1000, 500, 100, 32767)
    assert flow.PrefetchPolicy(all=50).prefetch_for("topic") == 50
    assert flow.PrefetchPolicy(queue_prefetch=1).prefetch_for("queue") == 1
    with pytest.raises(ValueError, match="kind"):
        policy.prefetch_for("exchange")
    with pytest.raises(ValueError, match="queue"):
        flow.PrefetchPolicy(queue_prefetch=-1)


@pytest.mark.parametrize("prefetch,expected", [(1, 1), (2, 1), (10, 6), (100, 65), (153, 99), (200, 100),
                                               (1000, 100), (32767, 100)])
def test_threshold_rule(flow, prefetch, expected):
    assert flow.optimized_ack_threshold(prefetch) == expected
    # never at or above the prefetch (trap: delivery stops after `prefetch` messages) unless prefetch is 1
    assert expected < prefetch or prefetch == 1
    # never above half the broker's default page size of 200 (trap: 30 s page-in wait)
    assert expected <= 100


def test_threshold_cap_is_an_option(flow):
    assert flow.optimized_ack_threshold(1000, cap=500) == 500
    assert flow.optimized_ack_threshold(1000, cap=5000) == 650
    with pytest.raises(ValueError, match="prefetch"):
        flow.optimized_ack_threshold(0)


def test_seed_example_prefetch_100(flow):
    """SEEDS 003: prefetch 100 -> threshold 65; 50 consumed -> no ack; 66 consumed -> one ack of 65, one pending."""
    w = flow.SubscriptionWindow(100, flow.ACK_CLIENT, optimize_acknowledge=True, ack_batch_cap=1000,
                                optimize_acknowledge_timeout_ms=0, idle_ack_ms=0)
    acks = []
    for i in range(66):
        w.on_delivered(0)
    for i in range(66):
        a = w.on_consumed("m%d" % i, 0)
        if a is not None:
            acks.append((i, a))
        if i == 49:
            assert acks == []
    assert acks == [(64, "m64")]
    assert w.acked == 65 and w.unacked == 1 and w.acks_sent == 1
    assert w.flush(0) == "m65" and w.unacked == 0


def test_individual_acks_every_message(flow):
    w = flow.SubscriptionWindow(10, flow.ACK_CLIENT_INDIVIDUAL)
    for i in range(3):
        w.on_delivered(0)
    assert [w.on_consumed(i, 0) for i in range(3)] == [0, 1, 2]
    assert w.acked == 3


def test_auto_mode_never_acks_and_counts_broker_acks(flow):
    w = flow.SubscriptionWindow(10, flow.ACK_AUTO)
    w.on_delivered(0)
    assert w.acked == 1 and w.on_consumed("x", 0) is None and w.poll(10 ** 6) is None


def test_manual_client_leaves_acks_to_the_application(flow):
    w = flow.SubscriptionWindow(10, flow.ACK_CLIENT, auto_ack=False)
    for i in range(5):
        w.on_delivered(0)
        assert w.on_consumed(i, 0) is None
    assert w.unacked == 5
    w.on_application_ack()
    assert w.unacked == 0


def test_optimize_needs_client_mode(flow):
    with pytest.raises(ValueError, match="client"):
        flow.SubscriptionWindow(10, flow.ACK_CLIENT_INDIVIDUAL, optimize_acknowledge=True)
    with pytest.raises(ValueError, match="prefetch"):
        flow.SubscriptionWindow(0, flow.ACK_CLIENT)
    with pytest.raises(ValueError, match="ack_mode"):
        flow.SubscriptionWindow(10, 7)


def test_timers(flow):
    w = flow.SubscriptionWindow(1000, flow.ACK_CLIENT, optimize_acknowledge=True,
                                optimize_acknowledge_timeout_ms=300, idle_ack_ms=50)
    w.on_delivered(1000)
    assert w.next_deadline_ms() is None  # nothing consumed yet
    assert w.on_consumed("a", 1001) is None
    assert w.next_deadline_ms() == 1050  # idle flush comes first
    assert w.poll(1049) is None
    w.on_delivered(1040)  # a delivery pushes the idle deadline
    assert w.next_deadline_ms() == 1090
    assert w.poll(1090) == "a" and w.unacked == 0 and w.next_deadline_ms() is None


def test_timeout_since_last_ack_on_consume(flow):
    w = flow.SubscriptionWindow(1000, flow.ACK_CLIENT, optimize_acknowledge=True,
                                optimize_acknowledge_timeout_ms=300, idle_ack_ms=0)
    acks = []
    for t in range(0, 1000, 10):  # a steady trickle: 1 message per 10 ms, never idle
        w.on_delivered(t)
        a = w.on_consumed(t, t)
        if a is not None:
            acks.append(a)
    assert acks == [300, 600, 900]


def test_scheduled_interval(flow):
    w = flow.SubscriptionWindow(1000, flow.ACK_CLIENT, optimize_acknowledge=True,
                                optimize_acknowledge_timeout_ms=0, idle_ack_ms=0,
                                optimized_ack_scheduled_ack_interval_ms=200)
    w.on_delivered(0)
    w.on_consumed("x", 0)
    assert w.next_deadline_ms() == 200
    assert w.poll(199) is None and w.poll(200) == "x"


def test_buffer_bound_and_slow_consumer(flow):
    w = flow.SubscriptionWindow(10, flow.ACK_AUTO, max_buffered=25)
    pauses = [w.on_delivered(0) for _ in range(20)]
    assert pauses == [False] * 20 and not w.slow_consumer
    w.on_delivered(0)
    assert w.slow_consumer and not w.paused  # 21 pending > 2 x 10 (ActiveMQ's definition)
    pauses = [w.on_delivered(0) for _ in range(4)]
    assert pauses == [False, False, False, True] and w.paused  # 25 = max_buffered
    for i in range(12):
        w.on_consumed(i, 0)
    assert w.should_resume() is False  # 13 pending > 12
    w.on_consumed(12, 0)
    assert w.should_resume() is True and not w.paused
    assert w.should_resume() is False


def test_default_buffer_bounds(flow):
    assert flow.SubscriptionWindow(100, flow.ACK_AUTO).max_buffered == 100
    assert flow.SubscriptionWindow(100, flow.ACK_CLIENT).max_buffered == 201  # never pauses a client mode
    assert flow.SubscriptionWindow(32767, flow.ACK_AUTO).max_buffered == 10000
    assert flow.SubscriptionWindow(1, flow.ACK_AUTO).max_buffered_bytes == flow.DEFAULT_MAX_BUFFERED_BYTES


def test_byte_bound(flow):
    w = flow.SubscriptionWindow(1000, flow.ACK_AUTO, max_buffered_bytes=1000)
    assert [w.on_delivered(0, 400) for _ in range(3)] == [False, False, True]
    assert w.pending_bytes == 1200 and w.slow_consumer
    w.on_consumed("a", 0, 400)
    assert not w.should_resume()  # 800 bytes > 500
    w.on_consumed("b", 0, 400)
    assert w.should_resume() and w.pending_bytes == 400
    with pytest.raises(ValueError, match="max_buffered_bytes"):
        flow.SubscriptionWindow(10, flow.ACK_AUTO, max_buffered_bytes=-1)


def test_consumed_without_delivery_is_an_error(flow):
    w = flow.SubscriptionWindow(10, flow.ACK_CLIENT)
    with pytest.raises(ValueError, match="on_delivered"):
        w.on_consumed("x", 0)


@settings(max_examples=200, deadline=None)
@given(prefetch=st.integers(1, 2000), n=st.integers(0, 3000), cap=st.integers(1, 400))
def test_batches_never_exceed_threshold_and_cover_everything(prefetch, n, cap):
    results = []
    for flow in (_flow_py, _flow_c):
        if flow is None:
            continue
        w = flow.SubscriptionWindow(prefetch, flow.ACK_CLIENT, optimize_acknowledge=True, ack_batch_cap=cap,
                                    optimize_acknowledge_timeout_ms=0, idle_ack_ms=0)
        last = 0
        sizes = []
        in_flight = 0
        for i in range(n):
            # the broker never has more than `prefetch` un-acked messages out
            assert in_flight < prefetch
            w.on_delivered(i)
            in_flight += 1
            if w.on_consumed(i, i) is not None:
                sizes.append(w.acked - last)
                last = w.acked
                in_flight = w.delivered - w.acked
        w.flush(n)
        assert w.acked == n
        assert all(s <= w.threshold for s in sizes)
        results.append(sizes)
    assert all(r == results[0] for r in results)


def test_redelivery_policy_defaults(flow):
    p = flow.RedeliveryPolicy()
    assert (p.maximum_redeliveries, p.initial_redelivery_delay_ms, p.back_off_multiplier,
            p.use_exponential_back_off) == (6, 1000, 5.0, False)
    assert [p.delay_ms(n) for n in (1, 2, 3)] == [1000, 1000, 1000]
    assert not p.exceeded(6) and p.exceeded(7)
    e = flow.RedeliveryPolicy(use_exponential_back_off=True, maximum_redelivery_delay_ms=60000)
    assert [e.delay_ms(n) for n in (1, 2, 3, 4)] == [1000, 5000, 25000, 60000]
    assert not flow.RedeliveryPolicy(maximum_redeliveries=-1).exceeded(10 ** 6)
    with pytest.raises(ValueError, match="back_off_multiplier"):
        flow.RedeliveryPolicy(back_off_multiplier=0.5)


def test_message_audit(flow):
    a = flow.MessageAudit(depth=3)
    assert [a.is_duplicate(x) for x in "abca"] == [False, False, False, True]
    assert a.record("a") == 3
    a.record("d")  # evicts the id first seen earliest, "a"
    assert "a" not in a and "b" in a and len(a) == 3
    assert a.is_duplicate("a") is False
    a.forget("c")
    assert "c" not in a and a.is_duplicate("c") is False
    with pytest.raises(ValueError, match="depth"):
        flow.MessageAudit(0)
