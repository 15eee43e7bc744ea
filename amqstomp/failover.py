"""Failover, first piece: the reconnect policy of ActiveMQ's failover transport
(``org.apache.activemq.transport.failover.FailoverTransport``), as pure decisions.

``failover:(stomp://a:61613,stomp://b:61613)?randomize=false&maxReconnectAttempts=5``
is parsed by :func:`amqstomp.uri.parse_uri`; :meth:`ReconnectPolicy.from_uri`
takes its options. What to do with a lost connection (the loop, replaying
CONNECT and subscriptions) builds on these decisions in a later step.

No sockets, no clocks, no threads: the caller counts attempts and sleeps.
"""
import logging
import random
from typing import Any, List, Optional, Sequence, TypeVar

from .exception import ConfigurationError
from .uri import FAILOVER_OPTIONS, BrokerURI

__all__ = ["ReconnectPolicy"]

T = TypeVar("T")

_DEFAULTS = {option.keyword: option.default for option in FAILOVER_OPTIONS.values()}


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
        randomize (bool): try the brokers in random order (True).
        priority_backup (bool): prefer the first broker of the list (kept for the
            failover loop; no decision here yet).
        timeout_ms (int): how long a send waits while disconnected; -1 = forever.

    Raises:
        ConfigurationError: a negative delay, a multiplier < 1, attempts < -1.
    """

    def __init__(self, initial_reconnect_delay_ms: int = 10, max_reconnect_delay_ms: int = 30000,
                 use_exponential_back_off: bool = True, back_off_multiplier: float = 2.0,
                 max_reconnect_attempts: int = -1, startup_max_reconnect_attempts: int = -1,
                 randomize: bool = True, priority_backup: bool = False, timeout_ms: int = -1) -> None:
        for name, value, low in (("initial_reconnect_delay_ms", initial_reconnect_delay_ms, 0),
                                 ("max_reconnect_delay_ms", max_reconnect_delay_ms, 0),
                                 ("max_reconnect_attempts", max_reconnect_attempts, -1),
                                 ("startup_max_reconnect_attempts", startup_max_reconnect_attempts, -1),
                                 ("timeout_ms", timeout_ms, -1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError("%s must be an int >= %d, got %r" % (name, low, value))
        if not back_off_multiplier >= 1:
            raise ConfigurationError("back_off_multiplier must be >= 1, got %r" % (back_off_multiplier,))
        self.initial_reconnect_delay_ms = initial_reconnect_delay_ms
        self.max_reconnect_delay_ms = max_reconnect_delay_ms
        self.use_exponential_back_off = bool(use_exponential_back_off)
        self.back_off_multiplier = float(back_off_multiplier)
        self.max_reconnect_attempts = max_reconnect_attempts
        self.startup_max_reconnect_attempts = startup_max_reconnect_attempts
        self.randomize = bool(randomize)
        self.priority_backup = bool(priority_backup)
        self.timeout_ms = timeout_ms

    @classmethod
    def from_uri(cls, uri: BrokerURI) -> "ReconnectPolicy":
        """The policy of a parsed ``failover:`` URI (defaults for a plain one)."""
        options = dict(_DEFAULTS)
        options.update(uri.failover_options)
        return cls(**options)

    def delay_ms(self, attempt: int) -> int:
        """Delay (ms) before attempt number ``attempt`` (1 = the first retry):
        the initial delay, multiplied ``attempt - 1`` times with back-off, capped."""
        if attempt < 1:
            return 0
        delay = float(self.initial_reconnect_delay_ms)
        if self.use_exponential_back_off and attempt > 1:
            delay *= self.back_off_multiplier ** min(attempt - 1, 1000)
        return int(min(delay, float(self.max_reconnect_delay_ms)))

    def gives_up(self, attempts: int, ever_connected: bool) -> bool:
        """True when ``attempts`` failed attempts are the limit: ``max_reconnect_attempts``
        once a connection existed, ``startup_max_reconnect_attempts`` before (when that
        is -1, ``max_reconnect_attempts`` applies, as in FailoverTransport)."""
        limit = self.max_reconnect_attempts
        if not ever_connected and self.startup_max_reconnect_attempts != -1:
            limit = self.startup_max_reconnect_attempts
        return limit != -1 and attempts >= limit

    def order(self, endpoints: Sequence[T], rng: Optional[random.Random] = None) -> List[T]:
        """The order to try ``endpoints`` in: as listed, or shuffled with ``randomize``."""
        out = list(endpoints)
        if self.randomize and len(out) > 1:
            (rng or random).shuffle(out)
        return out

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
