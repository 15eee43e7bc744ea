"""The periodic rebalance of a failover connection (``rebalanceInterval``), no I/O.

ActiveMQ rebalances its OpenWire clients from the broker side
(``rebalanceClusterClients``, sent as a ``ConnectionControl`` command that a
STOMP client never receives), so a STOMP client spreads itself: every
``rebalance_interval_ms`` it moves its connection to another broker of its
failover list. :class:`Rebalance` says when and where to; the failover
driver probes the brokers it names and moves the connection to the first
that answers (:class:`amqstomp._io.probe.MoveProber`,
:meth:`amqstomp._engine.failover.Reconnector.move_to`: the move that
``priorityBackup`` makes, settling or handing back what the connection holds
first).

Where to: the next broker of the list after the one the connection is on
(round robin, wrapping), then the ones after it; with ``randomize`` the other
brokers in random order. Never the broker it is on.

Settle before moving: when a move is due and a broker answered, the
connection first stops handing new deliveries to the application (they are
dropped unacknowledged and handed back by the move's DISCONNECT: the broker
redelivers them) and waits for the application to settle what it was handed
already, at most :attr:`Rebalance.settle_ms` (the interval, at most
:data:`MAX_SETTLE_MS`); then it moves. What the application still holds at
that bound is handed back as well, and its acknowledgements are refused
(:class:`~amqstomp.exception.AcknowledgeInterruptedError`). Without this, a
consumer with a large prefetch (ActiveMQ's default is 1000) was handed more
than it could finish within an interval, and each move handed most of it
back (one run: 3,052 deliveries of 300 messages in 120 s, never done).
:meth:`Rebalance.settling`, :meth:`Rebalance.move_now` and
:meth:`Rebalance.settle_wait_s` decide; the failover driver
(:meth:`amqstomp._io.probe.PlannedMoves.move_to`) counts what the application
holds and waits.

Pure: every method is given ``now_s`` (the caller's ``time.monotonic()``).
"""
import random
from typing import Any, List, Optional, Sequence

from ..exception import ConfigurationError

__all__ = ["Rebalance", "MIN_REBALANCE_INTERVAL_MS", "MAX_SETTLE_MS", "check_rebalance"]

#: Shortest ``rebalanceInterval`` accepted (ms; 0 turns it off): a move costs a DISCONNECT and
#: its RECEIPT, a CONNECT and every SUBSCRIBE again, and gives back what the connection prefetched.
MIN_REBALANCE_INTERVAL_MS = 1000

#: Longest wait (ms) for the application to settle what it holds before a move (the interval
#: when shorter): what it still holds then is handed back to the broker, which redelivers it.
MAX_SETTLE_MS = 30000


def check_rebalance(interval_ms: Any, priority_backup: bool) -> int:
    """``interval_ms`` (``rebalanceInterval``) when valid: 0 (off), or an int of at least
    :data:`MIN_REBALANCE_INTERVAL_MS` ms.

    Raises:
        ConfigurationError: not an int, between 1 and the minimum, negative, or given
            with ``priority_backup`` (that one keeps the connection on a priority
            broker, this one moves it away: they contradict each other).
    """
    if isinstance(interval_ms, bool) or not isinstance(interval_ms, int) or interval_ms < 0 \
            or 0 < interval_ms < MIN_REBALANCE_INTERVAL_MS:
        raise ConfigurationError("rebalance_interval_ms (rebalanceInterval) must be 0 (off) or an int of at least "
                                 "%d ms, got %r" % (MIN_REBALANCE_INTERVAL_MS, interval_ms))
    if interval_ms and priority_backup:
        raise ConfigurationError("rebalanceInterval and priorityBackup cannot be combined: priorityBackup keeps "
                                 "the connection on a priority broker, rebalanceInterval moves it away")
    return interval_ms


class Rebalance:
    """When to move a failover connection to another broker, and which brokers
    to try (see the module docstring). The same members as
    :class:`amqstomp._core.backoff.PriorityReturn`, so one probe thread drives
    either.

    Args:
        interval_ms (int): ``rebalanceInterval``: ms on one broker before a move;
            0: never (:func:`check_rebalance` checks it).
        endpoints (Sequence): the brokers, in URI order (``(host, port)`` pairs).
        randomize (bool): pick the next broker at random among the others
            instead of round robin.
        rng (random.Random | None): the source of that choice (``random`` when None).

    Raises:
        ConfigurationError: a bad ``interval_ms``; an interval with fewer than two
            different brokers (there is nowhere to move to).
    """

    #: names for logs and threads: the option, and the probe thread's suffix
    option, kind = "rebalanceInterval", "rebalance"

    def __init__(self, interval_ms: int, endpoints: Sequence[Any], randomize: bool = False,
                 rng: Optional[random.Random] = None) -> None:
        self.interval_ms = check_rebalance(interval_ms, False)
        self.endpoints: List[Any] = []
        for endpoint in endpoints:
            if endpoint not in self.endpoints:
                self.endpoints.append(endpoint)
        if self.interval_ms and len(self.endpoints) < 2:
            raise ConfigurationError("rebalanceInterval needs at least two different brokers in the failover "
                                     "list, got %s" % (", ".join("%s:%s" % tuple(e) for e in self.endpoints),))
        self.randomize = bool(randomize)
        self.rng = rng
        #: the broker the connection is on (None while not connected)
        self.here: Optional[Any] = None
        #: the brokers to try at the next move, in order (empty while not connected)
        self.targets: List[Any] = []
        #: the ``now_s`` of the next move, None when none is planned
        self.next_at: Optional[float] = None
        #: the longest wait (ms) for the application to settle what it holds before a move:
        #: the interval, at most :data:`MAX_SETTLE_MS`
        self.settle_ms = min(self.interval_ms, MAX_SETTLE_MS)
        #: the ``now_s`` by which a move being settled goes ahead anyway, None when not settling
        self.settle_until: Optional[float] = None

    def connected(self, endpoint: Any, now_s: float) -> None:
        """A connection to ``endpoint`` was made (first, after a loss, or after a
        move): the next move is one interval from now."""
        if not self.interval_ms:
            return
        self.here = endpoint
        others = [e for e in self.endpoints if e != endpoint]
        if self.randomize:
            (self.rng or random).shuffle(others)
        elif endpoint in self.endpoints:  # round robin: the ones after it first, wrapping
            after = self.endpoints.index(endpoint)
            others = [e for e in self.endpoints[after + 1:] + self.endpoints[:after] if e != endpoint]
        self.targets = others
        self.next_at = now_s + self.interval_ms / 1000.0

    def stopped(self) -> None:
        """The connection was lost, closed or is moving: nothing planned until :meth:`connected`."""
        self.here, self.targets, self.next_at, self.settle_until = None, [], None, None

    def due(self, now_s: float) -> List[Any]:
        """The brokers to try now, in order (the first that answers is moved to), [] when no move is due."""
        return list(self.targets) if self.next_at is not None and now_s >= self.next_at else []

    def wait_s(self, now_s: float) -> Optional[float]:
        """Seconds until the next move is due (0 when due), None when none is planned."""
        return None if self.next_at is None else max(0.0, self.next_at - now_s)

    def probe_failed(self, now_s: float) -> None:
        """No other broker answered at ``now_s``: the connection stays, and tries again one interval later."""
        if self.next_at is not None:
            self.next_at = now_s + self.interval_ms / 1000.0

    # ------------------------------------------------------------ settle before moving

    def settling(self, now_s: float) -> None:
        """A move is about to be made (a broker answered): from ``now_s`` the application is
        handed nothing new, and the move waits at most :attr:`settle_ms` for it to settle
        what it holds (:meth:`move_now`)."""
        self.settle_until = now_s + self.settle_ms / 1000.0

    def move_now(self, now_s: float, held: int) -> bool:
        """Whether the move goes ahead at ``now_s``: the application settled everything
        it was handed on the socket (``held``, messages handed over and not acknowledged:
        0), or the settle bound passed (what it still holds is handed back, and the
        broker redelivers it). True when not settling (nothing to wait for)."""
        return held <= 0 or self.settle_until is None or now_s >= self.settle_until

    def settle_wait_s(self, now_s: float) -> float:
        """Seconds left before the settle bound (0 when passed or not settling)."""
        return 0.0 if self.settle_until is None else max(0.0, self.settle_until - now_s)
