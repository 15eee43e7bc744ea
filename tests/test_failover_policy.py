"""The failover transport's reconnect policy (pure decisions, ActiveMQ's defaults)."""
import logging
import random

import pytest

from amqstomp.exception import ConfigurationError, ConnectFailedException, StompProtocolError
from amqstomp._core.backoff import ReconnectPolicy
from amqstomp.uri import parse_uri

pytestmark = pytest.mark.timeout(30)


def test_activemq_defaults():
    p = ReconnectPolicy()
    assert (p.initial_reconnect_delay_ms, p.max_reconnect_delay_ms, p.use_exponential_back_off,
            p.back_off_multiplier, p.max_reconnect_attempts, p.startup_max_reconnect_attempts,
            p.randomize, p.timeout_ms) == (10, 30000, True, 2.0, -1, -1, True, -1)
    assert ReconnectPolicy.from_uri(parse_uri("stomp://a:1")).__dict__ == p.__dict__


def test_exponential_back_off_is_capped():
    p = ReconnectPolicy()
    assert [p.delay_ms(n) for n in (0, 1, 2, 3, 4, 12, 13, 100, 10 ** 6)] == \
        [0, 10, 20, 40, 80, 20480, 30000, 30000, 30000]
    flat = ReconnectPolicy(use_exponential_back_off=False, initial_reconnect_delay_ms=250)
    assert [flat.delay_ms(n) for n in (1, 2, 50)] == [250, 250, 250]


def test_from_a_failover_uri():
    p = ReconnectPolicy.from_uri(parse_uri(
        "failover:(stomp://a:1,stomp://b:2)?randomize=false&maxReconnectAttempts=5"
        "&initialReconnectDelay=100&maxReconnectDelay=1000&startupMaxReconnectAttempts=2"))
    assert (p.randomize, p.max_reconnect_attempts, p.startup_max_reconnect_attempts) == (False, 5, 2)
    assert [p.delay_ms(n) for n in (1, 2, 3, 4, 5)] == [100, 200, 400, 800, 1000]
    assert p.order(["a", "b", "c"]) == ["a", "b", "c"]


def test_giving_up():
    forever = ReconnectPolicy()
    assert not forever.gives_up(10 ** 6, True) and not forever.gives_up(10 ** 6, False)
    p = ReconnectPolicy(max_reconnect_attempts=5, startup_max_reconnect_attempts=2)
    assert not p.gives_up(1, False) and p.gives_up(2, False)
    assert not p.gives_up(4, True) and p.gives_up(5, True)
    only_max = ReconnectPolicy(max_reconnect_attempts=3)
    assert only_max.gives_up(3, False)  # startup -1: the general limit applies
    assert ReconnectPolicy(max_reconnect_attempts=0).gives_up(0, True)  # 0: never reconnect


def test_randomized_order_is_a_permutation():
    p = ReconnectPolicy()
    rng = random.Random(7)
    seen = {tuple(p.order(["a", "b", "c"], rng)) for _ in range(50)}
    assert len(seen) > 1 and all(sorted(s) == ["a", "b", "c"] for s in seen)


def test_warning_on_the_first_attempt_and_every_tenth():
    levels = [ReconnectPolicy.log_level(n, False) for n in range(1, 31)]
    warned = [n for n, level in zip(range(1, 31), levels) if level == logging.WARNING]
    assert warned == [1, 10, 20, 30]
    assert ReconnectPolicy.log_level(7, True) == logging.ERROR


@pytest.mark.parametrize("kw", [{"initial_reconnect_delay_ms": -1}, {"back_off_multiplier": 0.5},
                                {"max_reconnect_attempts": -2}, {"timeout_ms": True}])
def test_bad_values(kw):
    with pytest.raises(ConfigurationError):
        ReconnectPolicy(**kw)


def test_priority_backup_keeps_the_primary_first():
    import random as _random
    policy = ReconnectPolicy(randomize=True, priority_backup=True)
    rng = _random.Random(7)
    orders = {tuple(policy.order(["a", "b", "c", "d"], rng)) for _ in range(50)}
    assert all(order[0] == "a" for order in orders)
    assert len(orders) > 1  # the others are still shuffled


class _StubTransport:
    """Just enough of a Transport for the loop's own logic (no broker decides anything here)."""

    def __init__(self):
        self.connected_frame = None  # the CONNECTED of the current (or last) socket
        self.connected = False
        self.link_seq = 0
        self.current_host_and_port = None
        self.last_host_and_port = None
        self.closed = 0

    @property
    def connected(self):
        return self._connected

    @connected.setter
    def connected(self, value):
        self._connected = value
        if value:
            self.connected_frame = "CONNECTED"  # kept after a loss, as a Transport keeps its last socket's

    def is_connected(self):
        return self.connected

    def is_open(self):
        return self.connected

    def close(self, *args, **kwargs):
        self.closed += 1
        self.connected = False


def test_the_loop_treats_any_attempt_error_as_a_failed_attempt():
    from amqstomp._engine.failover import Reconnector
    transport = _StubTransport()
    calls = []

    def establish(host_and_port):
        calls.append(host_and_port)
        if len(calls) == 1:
            raise UnicodeError("label too long")  # what getaddrinfo raises for a bad host name
        if len(calls) == 2:
            raise RuntimeError("anything else")
        transport.connected = True

    rc = Reconnector(transport, [("h", 1)], ReconnectPolicy(initial_reconnect_delay_ms=1), establish)
    assert rc.connect(timeout_s=5) == ("h", 1)
    assert len(calls) == 3 and transport.closed == 2


def test_the_loop_gives_up_and_reports_once():
    from amqstomp._engine.failover import Reconnector
    from amqstomp.exception import ConnectFailedException
    transport = _StubTransport()
    gave_up = []

    def establish(host_and_port):
        raise OSError("refused")

    rc = Reconnector(transport, [("h", 1), ("k", 2)], ReconnectPolicy(initial_reconnect_delay_ms=1,
                     startup_max_reconnect_attempts=3), establish, gave_up.append)
    with pytest.raises(ConnectFailedException, match="after 3 attempt"):
        rc.connect()
    assert not rc.armed


def test_huge_back_off_never_overflows():
    policy = ReconnectPolicy(back_off_multiplier=1e200, max_reconnect_delay_ms=100)
    assert [policy.delay_ms(n) for n in (1, 2, 3, 1000, 10 ** 6)] == [10, 100, 100, 100, 100]
    assert ReconnectPolicy(back_off_multiplier=10).delay_ms(400) == 30000
    with pytest.raises(ConfigurationError):
        ReconnectPolicy(back_off_multiplier=float("inf"))
    with pytest.raises(ConfigurationError):
        ReconnectPolicy(max_reconnect_delay_ms=10 ** 20)


# --------------------------------------------------------------------------- the order after a loss
# ActiveMQ's FailoverTransport.getConnectList(): the URI whose transport failed is taken out, the
# rest shuffled (randomize), and the failed one appended: it is tried last.


def test_the_broker_just_lost_is_tried_last():
    p = ReconnectPolicy(randomize=False)
    assert p.order(["a", "b", "c"], failed="a") == ["b", "c", "a"]
    assert p.order(["a", "b", "c"], failed="b") == ["a", "c", "b"]
    assert p.order(["a", "b", "c"], failed="c") == ["a", "b", "c"]
    assert p.order([("p", 1), ("b", 2)], failed=("p", 1)) == [("b", 2), ("p", 1)]


def test_without_a_loss_or_with_an_unknown_broker_the_order_is_as_listed():
    p = ReconnectPolicy(randomize=False)
    assert p.order(["a", "b", "c"]) == ["a", "b", "c"]
    assert p.order(["a", "b", "c"], failed=None) == ["a", "b", "c"]
    assert p.order(["a", "b", "c"], failed="x") == ["a", "b", "c"]
    assert p.order(["a"], failed="a") == ["a"]
    assert p.order([], failed="a") == []


def test_the_broker_just_lost_goes_last_after_the_shuffle():
    p = ReconnectPolicy(randomize=True)
    rng = random.Random(11)
    orders = {tuple(p.order(["a", "b", "c", "d"], rng, failed="b")) for _ in range(60)}
    assert all(order[-1] == "b" and sorted(order) == ["a", "b", "c", "d"] for order in orders)
    assert len({order[:-1] for order in orders}) > 1  # the others are still shuffled


def test_priority_backup_keeps_the_primary_first_unless_it_is_the_broker_just_lost():
    listed = ["a", "b", "c", "d"]
    p = ReconnectPolicy(randomize=False, priority_backup=True)
    assert p.order(listed, failed="c") == ["a", "b", "d", "c"]
    assert p.order(listed, failed="a") == ["b", "c", "d", "a"]  # the primary just lost: last, as any
    shuffled = ReconnectPolicy(randomize=True, priority_backup=True)
    rng = random.Random(5)
    orders = {tuple(shuffled.order(listed, rng, failed="c")) for _ in range(60)}
    assert all(order[0] == "a" and order[-1] == "c" for order in orders)
    assert len(orders) > 1
    orders = {tuple(shuffled.order(listed, rng, failed="a")) for _ in range(60)}
    assert all(order[-1] == "a" and sorted(order) == listed for order in orders)
    assert len(orders) > 1


def test_a_broker_listed_twice_goes_last_with_every_copy():
    p = ReconnectPolicy(randomize=False)
    assert p.order(["a", "b", "a", "c"], failed="a") == ["b", "c", "a", "a"]


def test_after_a_loss_the_loop_tries_the_other_broker_first():
    import threading
    from amqstomp._engine.failover import Reconnector
    transport = _StubTransport()
    calls = []
    done = threading.Event()

    def establish(host_and_port):
        calls.append(host_and_port)
        transport.connected = True
        transport.last_host_and_port = host_and_port
        done.set()

    primary, backup = ("p", 1), ("b", 2)
    rc = Reconnector(transport, [primary, backup], ReconnectPolicy(randomize=False), establish)
    assert rc.connect(timeout_s=5) == primary  # the first connection: as listed
    assert calls == [primary]
    done.clear()
    transport.connected = False  # the primary's socket is lost
    assert rc.on_link_lost(1, "connection reset", None) == "transport_interrupted"
    assert done.wait(5) and rc.wait_connected(5)
    assert calls == [primary, backup]
    assert rc.lost_endpoint == primary
    done.clear()
    transport.connected = False  # now the backup's
    assert rc.on_link_lost(2, "connection reset", None) == "transport_interrupted"
    assert done.wait(5) and rc.wait_connected(5)
    assert calls == [primary, backup, primary]
    rc.disarm()


def test_a_socket_lost_before_its_connected_is_still_the_first_connection():
    """connect() without wait arms the loop, opens a socket and writes CONNECT; that
    socket ends before CONNECTED (a reset, or the CONNECTED deadline): the loop takes
    it over as the first connection -- the listeners hear nothing of it (no
    ``transport_interrupted``), the start-up limit applies, nothing is resumed -- and
    tries the next broker first."""
    import threading
    from amqstomp._engine.failover import Reconnector
    transport = _StubTransport()
    calls = []
    done = threading.Event()

    def establish(host_and_port):
        calls.append((host_and_port, rc.ever_connected))  # what the facade's establish reads: resume or not
        transport.connected = True
        done.set()

    primary, backup = ("p", 1), ("b", 2)
    rc = Reconnector(transport, [primary, backup], ReconnectPolicy(randomize=False), establish)
    rc.arm()  # the facade's connect() without wait, before its socket opens
    assert not rc.ever_connected
    transport.last_host_and_port = primary  # its socket, lost before CONNECTED
    assert rc.on_link_lost(1, "connection reset", None) is None
    assert done.wait(5) and rc.wait_connected(5)
    assert calls == [(backup, False)] and rc.ever_connected and rc.failovers == 0
    rc.disarm()


def test_a_loss_soon_after_connected_continues_the_back_off():
    from amqstomp._core.backoff import STABLE_CONNECTION_MS, LossStreak
    policy = ReconnectPolicy(initial_reconnect_delay_ms=100, max_reconnect_attempts=3)
    streak = LossStreak(policy)
    assert streak.stable_ms == STABLE_CONNECTION_MS == 1000
    assert LossStreak(ReconnectPolicy(initial_reconnect_delay_ms=5000)).stable_ms == 5000
    garbage = StompProtocolError("content-length 'zz' is not a non-negative integer")
    assert streak.lost(None, 50.0, garbage) == 0 and streak.delay_ms() == 0 and not streak.gives_up()  # unknown
    assert [streak.lost(10.0, 10.05, garbage), streak.lost(11.0, 11.999, garbage)] == [1, 2]  # up less than 1 s
    assert streak.delay_ms() == 200 and not streak.gives_up()
    assert streak.lost(12.0, 12.5, garbage) == 3 and streak.gives_up() and "3 connection(s)" in streak.reason("x")
    assert streak.lost(20.0, 21.0, garbage) == 0 and not streak.gives_up()  # stayed up 1 s: afresh
    assert streak.lost(22.0, 22.1, garbage) == 1
    for other in (None, ConnectionResetError(104, "reset"), ConnectFailedException("x")):  # a cut: afresh at once
        assert streak.lost(30.0, 30.1, other) == 0
        assert streak.lost(22.0, 22.1, garbage) == 1
    forever = LossStreak(ReconnectPolicy(initial_reconnect_delay_ms=100, max_reconnect_attempts=-1))
    for n in range(1, 50):
        assert forever.lost(0.0, 0.0, garbage) == n and not forever.gives_up()
    assert forever.delay_ms() == 30000  # capped at max_reconnect_delay_ms


def test_connections_lost_right_after_connected_back_off_and_reach_the_limit():
    """A peer that answers CONNECT and then sends garbage on each socket: each reconnect waits
    its back-off and the attempt limit ends them (they used to start afresh, forever)."""
    import threading
    import time
    from amqstomp._engine.failover import Reconnector
    transport = _StubTransport()
    calls, gave_up = [], []
    up = threading.Event()

    def establish(host_and_port):
        calls.append(time.monotonic())
        transport.connected = True
        up.set()

    rc = Reconnector(transport, [("h", 1)], ReconnectPolicy(initial_reconnect_delay_ms=100,
                     max_reconnect_attempts=3), establish, gave_up.append)
    rc.connect(timeout_s=5)
    for loss in range(1, 5):
        up.clear()
        transport.connected = False  # lost right after its CONNECTED
        error = StompProtocolError("content-length 'zz' is not a non-negative integer")
        assert rc.on_link_lost(loss, "protocol error: %s" % error, error) == "transport_interrupted"
        if loss < 4:
            assert up.wait(5) and rc.wait_connected(5)
    deadline = time.monotonic() + 5
    while not gave_up and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(gave_up) == 1 and "3 connection(s) in a row ended by a protocol error" in str(gave_up[0]), gave_up
    assert len(calls) == 4  # the first connection, then one attempt per loss before the limit
    # the first loss (of a connection whose start the loop did not see) retried at once,
    # the next ones after 100 and 200 ms (the policy's back-off)
    assert calls[3] - calls[2] >= 0.2 and calls[2] - calls[1] >= 0.1
    rc.disarm()
