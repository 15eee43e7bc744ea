"""Back-off policies: when to try the next broker and when to give up, no I/O.

One formula, ``initial x multiplier ** (attempt - 1)`` capped at a maximum plus
up to ``jitter`` of it at random, in two sets of defaults:

* ActiveMQ's ``FailoverTransport`` (``failover:`` URIs and the JMS API):
  :class:`ReconnectPolicy` with its defaults, :meth:`ReconnectPolicy.from_uri`;
* stomp.py's ``reconnect_sleep_*`` keywords (the stomp.py-style connections):
  :meth:`ReconnectPolicy.stomp_py` (``multiplier = 1 + reconnect_sleep_increase``).

A protocol error soon after CONNECTED continues the back-off of the reconnect
before it (:class:`LossStreak`): a peer that answers CONNECT and then sends
garbage makes no reconnect storm.

The order of the brokers on each pass is :meth:`ReconnectPolicy.order` for
both APIs and every transport: the one lost last goes last (FailoverTransport's
``getConnectList()``). With ``priorityBackup``, :class:`PriorityReturn` says
when to probe the priority members while connected to another one (the
failover driver probes and moves the connection); with ``rebalanceInterval``,
:class:`amqstomp._core.rebalance.Rebalance` says when to move it to another one.

Delays are in ms; the caller sleeps (this module reads no clock: the times it
is given are the caller's ``time.monotonic()``).
"""
import logging
import math
import random
from typing import Any, List, Optional, Sequence, Tuple, TypeVar

from ..exception import ConfigurationError, StompProtocolError
from .uri import FAILOVER_OPTIONS, BrokerURI, priority_endpoints
from .rebalance import check_rebalance

__all__ = ["ReconnectPolicy", "PriorityReturn", "LossStreak", "MAX_RECONNECT_SLEEP_S", "MIN_PRIORITY_PROBE_MS",
           "STABLE_CONNECTION_MS", "priority_brokers", "check_priority_members", "stomp_py_failover"]

T = TypeVar("T")

#: Longest stomp.py ``reconnect_sleep_*`` value accepted (s): a year; anything longer is a mistake.
MAX_RECONNECT_SLEEP_S = 86400 * 365
#: Shortest pause between two probes of the priority members (ms), whatever the back-off says.
MIN_PRIORITY_PROBE_MS = 100
#: How long (ms) a connection must stay up, at least, for its loss to start the back-off afresh
#: (:class:`LossStreak`; the policy's initial delay when that is longer).
STABLE_CONNECTION_MS = 1000

# option keyword (docs/options.md) -> constructor argument, where they differ (the
# redelivery policy's options own the plain names)
_ARGUMENT = {"reconnect_use_exponential_back_off": "use_exponential_back_off",
             "reconnect_back_off_multiplier": "back_off_multiplier"}
_DEFAULTS = {_ARGUMENT.get(option.keyword, option.keyword): option.default for option in FAILOVER_OPTIONS.values()}
_JAVA_LONG_MAX = 2 ** 63 - 1


class ReconnectPolicy:
    """When to try the next broker, and when to give up (FailoverTransport's rules
    and defaults; ``docs/options.md`` maps the URI names).

    Args:
        initial_reconnect_delay_ms (int): delay before the first retry (10).
        max_reconnect_delay_ms (int): upper bound of the delay (30000).
        use_exponential_back_off (bool): multiply the delay after each failed attempt (True).
        back_off_multiplier (float): the multiplier (2.0).
        max_reconnect_attempts (int): attempts after a connection was lost; -1 = forever.
        startup_max_reconnect_attempts (int): attempts before the first connection
            ever succeeded; -1 = forever.
        randomize (bool): try the brokers in random order (True); the broker
            lost last is tried last whatever the order (:meth:`order`).
        priority_backup (bool): prefer the priority brokers (``priority_uris``,
            else the first listed): tried first on every pass unless it is the
            one lost last, and moved back to while connected to another
            (:class:`PriorityReturn`; FailoverTransport's ``priorityBackup``).
        priority_uris: the priority brokers: ``(host, port)`` pairs, or
            ``stomp://host:port`` URIs in a str separated by commas
            (``priorityURIs``); None or empty: the first broker listed.
        timeout_ms (int): how long a send waits while disconnected; -1 = forever.
        jitter (float): up to this fraction is added to each delay at random
            (stomp.py's ``reconnect_sleep_jitter``; FailoverTransport has none: 0).
        rebalance_interval_ms (int): ``rebalanceInterval``: every this many ms the
            connection moves to another broker of the list (0: never;
            :class:`amqstomp._core.rebalance.Rebalance`).

    Raises:
        ConfigurationError: a negative delay, a multiplier < 1, attempts < -1, a
            rebalance interval below 1000 ms (but 0) or together with ``priority_backup``.
    """

    def __init__(self, initial_reconnect_delay_ms: int = 10, max_reconnect_delay_ms: int = 30000,
                 use_exponential_back_off: bool = True, back_off_multiplier: float = 2.0,
                 max_reconnect_attempts: int = -1, startup_max_reconnect_attempts: int = -1,
                 randomize: bool = True, priority_backup: bool = False, timeout_ms: int = -1,
                 jitter: float = 0.0, priority_uris: Any = None, rebalance_interval_ms: int = 0) -> None:
        for name, value, low in (("initial_reconnect_delay_ms", initial_reconnect_delay_ms, 0),
                                 ("max_reconnect_delay_ms", max_reconnect_delay_ms, 0),
                                 ("max_reconnect_attempts", max_reconnect_attempts, -1),
                                 ("startup_max_reconnect_attempts", startup_max_reconnect_attempts, -1),
                                 ("timeout_ms", timeout_ms, -1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError("%s must be an int >= %d, got %r" % (name, low, value))
        for name, value in (("initial_reconnect_delay_ms", initial_reconnect_delay_ms),
                            ("max_reconnect_delay_ms", max_reconnect_delay_ms), ("timeout_ms", timeout_ms)):
            if value > _JAVA_LONG_MAX:
                raise ConfigurationError("%s must be at most %d ms (a Java long), got %r" % (name, _JAVA_LONG_MAX, value))
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or not 0 <= jitter <= 10:
            raise ConfigurationError("jitter must be a number from 0 to 10, got %r" % (jitter,))
        if isinstance(back_off_multiplier, bool) or not isinstance(back_off_multiplier, (int, float)) \
                or not math.isfinite(back_off_multiplier) or not back_off_multiplier >= 1:
            raise ConfigurationError("back_off_multiplier must be a finite number >= 1, got %r" % (back_off_multiplier,))
        self.initial_reconnect_delay_ms = initial_reconnect_delay_ms
        self.max_reconnect_delay_ms = max_reconnect_delay_ms
        self.use_exponential_back_off = bool(use_exponential_back_off)
        self.back_off_multiplier = float(back_off_multiplier)
        self.max_reconnect_attempts = max_reconnect_attempts
        self.startup_max_reconnect_attempts = startup_max_reconnect_attempts
        self.randomize = bool(randomize)
        self.priority_backup = bool(priority_backup)
        self.priority_uris = priority_brokers(priority_uris)
        self.timeout_ms = timeout_ms
        self.jitter = float(jitter)
        self.rebalance_interval_ms = check_rebalance(rebalance_interval_ms, self.priority_backup)

    @classmethod
    def from_uri(cls, uri: BrokerURI) -> "ReconnectPolicy":
        """The policy of a parsed ``failover:`` URI (defaults for a plain one)."""
        options = dict(_DEFAULTS)
        for keyword, value in uri.failover_options.items():
            options[_ARGUMENT.get(keyword, keyword)] = value
        return cls(**options)

    @classmethod
    def stomp_py(cls, reconnect_sleep_initial: float = 0.1, reconnect_sleep_increase: float = 0.5,
                 reconnect_sleep_jitter: float = 0.1, reconnect_sleep_max: float = 60.0,
                 reconnect_attempts_max: int = 3, priority_backup: bool = False,
                 priority_uris: Any = None, rebalance_interval_ms: int = 0) -> "ReconnectPolicy":
        """The policy of stomp.py's keywords (seconds and fractions, stomp.py's
        defaults): delay ``initial x (1 + increase) ** (attempt - 1)``, capped at
        ``max``, plus up to ``jitter`` of it; brokers tried in the order given
        (``priority_backup``, ``priority_uris`` and ``rebalance_interval_ms`` as in the constructor).

        Raises:
            ConfigurationError: a value that is not a number of seconds from 0 to
                :data:`MAX_RECONNECT_SLEEP_S`, or attempts below -1 (naming it).
        """
        for name, value in (("reconnect_sleep_initial", reconnect_sleep_initial),
                            ("reconnect_sleep_increase", reconnect_sleep_increase),
                            ("reconnect_sleep_jitter", reconnect_sleep_jitter),
                            ("reconnect_sleep_max", reconnect_sleep_max)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or value > MAX_RECONNECT_SLEEP_S:
                raise ConfigurationError("%s must be a number of seconds from 0 to %d, got %r"
                                         % (name, MAX_RECONNECT_SLEEP_S, value))
        if isinstance(reconnect_attempts_max, bool) or not isinstance(reconnect_attempts_max, int) \
                or reconnect_attempts_max < -1:
            raise ConfigurationError("reconnect_attempts_max must be an int >= -1 (-1: no limit), got %r"
                                     % (reconnect_attempts_max,))
        return cls(initial_reconnect_delay_ms=int(reconnect_sleep_initial * 1000),
                   max_reconnect_delay_ms=int(reconnect_sleep_max * 1000),
                   use_exponential_back_off=reconnect_sleep_increase > 0,
                   back_off_multiplier=1.0 + reconnect_sleep_increase,
                   max_reconnect_attempts=reconnect_attempts_max, randomize=False,
                   jitter=min(10.0, reconnect_sleep_jitter), priority_backup=priority_backup,
                   priority_uris=priority_uris, rebalance_interval_ms=rebalance_interval_ms)

    def delay_ms(self, attempt: int) -> int:
        """Delay (ms) before attempt number ``attempt`` (1 = the first retry):
        the initial delay, multiplied ``attempt - 1`` times with back-off, capped."""
        if attempt < 1:
            return 0
        delay = float(self.initial_reconnect_delay_ms)
        if self.use_exponential_back_off and attempt > 1 and delay > 0 and self.back_off_multiplier > 1:
            # compare exponents, not products: multiplier ** attempt overflows a float soon
            room = math.log(max(float(self.max_reconnect_delay_ms), 1.0) / delay) / math.log(self.back_off_multiplier)
            delay = float(self.max_reconnect_delay_ms) if attempt - 1 >= room else \
                delay * self.back_off_multiplier ** (attempt - 1)
        delay = min(delay, float(self.max_reconnect_delay_ms))
        if self.jitter:
            delay *= 1.0 + random.random() * self.jitter
        return int(delay)

    def gives_up(self, attempts: int, ever_connected: bool) -> bool:
        """True when ``attempts`` failed attempts are the limit: ``max_reconnect_attempts``
        once a connection existed, ``startup_max_reconnect_attempts`` before (when that
        is -1, ``max_reconnect_attempts`` applies, as in FailoverTransport)."""
        limit = self.max_reconnect_attempts
        if not ever_connected and self.startup_max_reconnect_attempts != -1:
            limit = self.startup_max_reconnect_attempts
        return limit != -1 and attempts >= limit

    def order(self, endpoints: Sequence[T], rng: Optional[random.Random] = None,
              failed: Optional[T] = None, first: Optional[T] = None) -> List[T]:
        """The order to try ``endpoints`` in on one pass (ActiveMQ's
        ``FailoverTransport.getConnectList()``): as listed, or shuffled with
        ``randomize``; with ``priority_backup`` the first one listed (the
        primary) first; ``failed``, the endpoint whose connection was lost last,
        goes last (after the shuffle, and after the primary too when it is the
        one lost), so a broker that just went silent costs no connect timeout
        before the others are tried.

        Args:
            endpoints (Sequence[T]): the brokers, in URI order (any comparable
                items: ``(host, port)`` tuples).
            rng (random.Random | None): the shuffle's source (``random`` when None).
            failed (T | None): the endpoint lost last, None before any loss; one
                not listed changes nothing; one listed twice goes last twice.
            first (T | None): the broker a planned move goes to (priorityBackup,
                rebalanceInterval): first of all; None or one not listed changes nothing.

        Returns:
            list[T]: a new list holding every endpoint once per listing.
        """
        out = list(endpoints)
        lost = [e for e in out if failed is not None and e == failed]
        if lost:
            out = [e for e in out if e != failed]
        head = [e for e in out if self.is_priority(e, endpoints)]
        out = [e for e in out if not self.is_priority(e, endpoints)]
        if self.randomize and len(out) > 1:
            (rng or random).shuffle(out)
        out = head + out + lost
        if first is not None and first in out:
            out.remove(first)
            out.insert(0, first)
        return out

    def is_priority(self, endpoint: Any, endpoints: Sequence[Any]) -> bool:
        """True when ``endpoint`` is a priority broker of ``endpoints`` (URI
        order): one of ``priority_uris``, else the first listed; never without
        ``priority_backup`` (FailoverTransport's ``isPriority``)."""
        if not self.priority_backup:
            return False
        if self.priority_uris:
            return endpoint in self.priority_uris
        return bool(endpoints) and endpoint == endpoints[0]

    @staticmethod
    def log_level(attempts: int, gave_up: bool) -> Optional[int]:
        """How loudly to report ``attempts`` failed attempts: ERROR when giving up,
        WARNING after the first and every 10th ("failed to connect to [...] after N
        attempt(s), continuing to retry"), else nothing above DEBUG."""
        if gave_up:
            return logging.ERROR
        if attempts == 1 or attempts % 10 == 0:
            return logging.WARNING
        return None

    def __repr__(self) -> str:
        fields: Any = ", ".join("%s=%r" % (k, getattr(self, k)) for k in _DEFAULTS)
        return "ReconnectPolicy(%s)" % fields


class LossStreak:
    """How many connections in a row a peer ended with a protocol error soon after
    CONNECTED: such a loss continues the back-off instead of starting it afresh.
    Pure: times are the caller's ``time.monotonic()`` (s).

    ActiveMQ's ``FailoverTransport`` starts its attempt count and delay afresh
    as soon as a connection is made; its brokers speak OpenWire, they do not
    answer CONNECT and then send what is not STOMP. A STOMP peer that does
    would make that a reconnect storm (about 20 sockets a second, each with an
    ERROR line, forever). Here a connection lost to a protocol error
    (:class:`~amqstomp.exception.StompProtocolError`: garbage, a MESSAGE before
    CONNECTED, a version not offered...) before it stayed up :attr:`stable_ms`
    (the larger of :data:`STABLE_CONNECTION_MS` and the policy's initial delay)
    counts as one more failed attempt, for the delay before the next attempt
    (:meth:`delay_ms`) and for the attempt limit (:meth:`gives_up`). Any other
    loss (a reset, an EOF, a heart-beat timeout), or one after that time,
    starts afresh, as FailoverTransport does: a connection that worked is
    replaced at once however often the network cuts it.

    Args:
        policy (ReconnectPolicy): the back-off and the limit.
    """

    def __init__(self, policy: ReconnectPolicy) -> None:
        self.policy = policy
        #: how long (ms) a connection must stay up for its loss to start afresh
        self.stable_ms = max(STABLE_CONNECTION_MS, policy.initial_reconnect_delay_ms)
        #: failed attempts carried into the next reconnect (0: it starts afresh)
        self.failed = 0

    def lost(self, up_since_s: Optional[float], now_s: float, error: Optional[BaseException] = None) -> int:
        """The connection made at ``up_since_s`` (None: unknown, counted as one
        that stayed up) was lost at ``now_s`` because of ``error`` (None: no
        exception, e.g. an EOF). Returns :attr:`failed`."""
        if up_since_s is None or (now_s - up_since_s) * 1000.0 >= self.stable_ms \
                or not isinstance(error, StompProtocolError):
            self.failed = 0
        else:
            self.failed += 1
        return self.failed

    def delay_ms(self) -> int:
        """The delay (ms) before the reconnect's first attempt (0 when it starts afresh)."""
        return self.policy.delay_ms(self.failed)

    def gives_up(self) -> bool:
        """True when the carried failures reach the policy's limit (no attempt is made)."""
        return self.failed > 0 and self.policy.gives_up(self.failed, True)

    def reason(self, last: Any) -> str:
        """What a reconnect that :meth:`gives_up` raises with (``last``: the last loss's cause)."""
        return ("%d connection(s) in a row ended by a protocol error within %.3g s of CONNECTED, the attempt "
                "limit: %s"
                % (self.failed, self.stable_ms / 1000.0, last))


def priority_brokers(value: Any, name: str = "priority_uris") -> Tuple[Tuple[str, int], ...]:
    """The priority brokers (``priorityURIs``) as ``(host, port)`` pairs, from ``value``: None
    or empty (none: the first broker listed), ``stomp://host:port`` URIs in a str separated by
    commas, a list or tuple of such URIs and ``(host, port)`` pairs, or one bare ``(host, port)`` pair.

    Raises:
        ConfigurationError: (a ValueError) naming ``name`` and the entry that is neither.
    """
    if not value:
        return ()
    if isinstance(value, str):
        entries: List[Any] = [value]
    elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int) \
            and not isinstance(value[1], bool):
        entries = [value]  # one bare (host, port) pair, not a list of two entries
    elif isinstance(value, (list, tuple)):
        entries = list(value)
    else:
        raise ConfigurationError("%s must be stomp://host:port URIs (a str separated by commas, or a list or "
                                 "tuple of URIs or (host, port) pairs), got %r" % (name, value))
    found: List[Tuple[str, int]] = []
    for entry in entries:
        if isinstance(entry, str):
            try:
                found.extend(priority_endpoints(entry))
            except ValueError as exc:
                raise ConfigurationError("%s: %r is not a stomp://host:port URI (%s)" % (name, entry, exc)) from None
            continue
        pair = tuple(entry) if isinstance(entry, (list, tuple)) else ()
        if len(pair) != 2 or not isinstance(pair[0], str) or not pair[0] or isinstance(pair[1], bool) \
                or not isinstance(pair[1], int) or not 0 < pair[1] < 65536:
            raise ConfigurationError("%s: %r is neither a stomp://host:port URI nor a (host, port) pair "
                                     "(a str and a port from 1 to 65535)" % (name, entry))
        found.append((pair[0], pair[1]))
    return tuple(found)


def check_priority_members(priority: Sequence[Any], endpoints: Sequence[Any]) -> None:
    """Every priority broker (``(host, port)``) must be one of the failover list's ``endpoints``.

    Raises:
        ConfigurationError: naming those that are not (the connection only ever goes to a listed broker).
    """
    missing = [e for e in priority if e not in endpoints]
    if missing:
        raise ConfigurationError("priorityURIs names %s, not a broker of the failover list %s"
                                 % (", ".join("%s:%s" % e for e in missing), ", ".join("%s:%s" % e for e in endpoints)))


class PriorityReturn:
    """When to probe the priority brokers while connected to another one, and
    where to go back to (ActiveMQ's ``FailoverTransport`` with
    ``priorityBackup``: it keeps trying the priority URIs while connected
    elsewhere and moves the connection once one of them connects).

    Pure: every method is given ``now_s`` (the caller's ``time.monotonic()``).
    The pause between probes is the reconnect back-off
    (:meth:`ReconnectPolicy.delay_ms` of the probes failed so far, capped at
    ``max_reconnect_delay_ms``), at least :data:`MIN_PRIORITY_PROBE_MS`.

    Args:
        policy (ReconnectPolicy): its ``priority_backup`` turns probing on.
        endpoints (Sequence): the brokers, in URI order.

    Raises:
        ConfigurationError: a ``priority_uris`` broker that ``endpoints`` does
            not list (the connection only ever goes to a listed broker).
    """

    #: names for logs and threads: the option, and the probe thread's suffix
    option, kind = "priorityBackup", "priority"

    def __init__(self, policy: ReconnectPolicy, endpoints: Sequence[Any]) -> None:
        self.policy = policy
        self.endpoints = list(endpoints)
        if policy.priority_backup:
            check_priority_members(policy.priority_uris, self.endpoints)
        #: the priority brokers to probe now and then; empty: no probing
        self.targets: List[Any] = []
        #: the ``now_s`` of the next probe, None when not probing
        self.next_at: Optional[float] = None
        self.failed = 0

    def connected(self, endpoint: Any, now_s: float) -> None:
        """A connection to ``endpoint`` was made: probing starts (the first
        probe one back-off from now) when it is not a priority broker, and
        stops when it is."""
        self.failed = 0
        if self.policy.priority_backup and not self.policy.is_priority(endpoint, self.endpoints):
            self.targets = [e for i, e in enumerate(self.endpoints)
                            if self.policy.is_priority(e, self.endpoints) and e not in self.endpoints[:i]]
            self.next_at = now_s + self.interval_s(1)
        else:
            self.targets, self.next_at = [], None

    def stopped(self) -> None:
        """The connection was lost or closed: no probing until :meth:`connected`."""
        self.targets, self.next_at = [], None

    def due(self, now_s: float) -> List[Any]:
        """The priority brokers to probe now (in URI order), [] when none is due."""
        return list(self.targets) if self.next_at is not None and now_s >= self.next_at else []

    def wait_s(self, now_s: float) -> Optional[float]:
        """Seconds until the next probe (0 when due), None when not probing."""
        return None if self.next_at is None else max(0.0, self.next_at - now_s)

    def probe_failed(self, now_s: float) -> None:
        """No priority broker answered the probe made at ``now_s``: the next one
        a longer back-off later."""
        if self.next_at is not None:
            self.failed += 1
            self.next_at = now_s + self.interval_s(self.failed + 1)

    def interval_s(self, attempt: int) -> float:
        """Seconds before probe number ``attempt`` (1 = the first)."""
        return max(MIN_PRIORITY_PROBE_MS, self.policy.delay_ms(attempt)) / 1000.0


def stomp_py_failover(auto_reconnect: bool, sleeps: Tuple[float, float, float, float], attempts_max: int,
                      priority_backup: Any = False,
                      priority_uris: Any = None, rebalance_interval_ms: Any = 0) -> Optional[ReconnectPolicy]:
    """The failover policy of a stomp.py-API connection (:meth:`ReconnectPolicy.stomp_py` of
    ``sleeps``, its ``reconnect_sleep_initial``, ``_increase``, ``_jitter`` and ``_max``), or
    None without ``auto_reconnect``.

    Raises:
        ConfigurationError: ``priority_backup`` not a bool; ``priority_backup``,
            ``priority_uris`` or ``rebalance_interval_ms`` given without ``auto_reconnect``
            (they decide where the failover loop connects); any value the policy refuses.
    """
    if not isinstance(priority_backup, bool):
        raise ConfigurationError("priority_backup must be True or False, got %r" % (priority_backup,))
    if (priority_backup or priority_uris is not None or rebalance_interval_ms != 0) and not auto_reconnect:
        raise ConfigurationError("priority_backup, priority_uris and rebalance_interval_ms need auto_reconnect=True "
                                 "(they decide where the failover loop reconnects)")
    if not auto_reconnect:
        return None
    initial, increase, jitter, longest = sleeps
    return ReconnectPolicy.stomp_py(initial, increase, jitter, longest, attempts_max, priority_backup, priority_uris,
                                    rebalance_interval_ms)
