"""The brokers of a fan-in consumer or a spreading producer
(:mod:`amqstomp.jms.fanin`): one JMS :class:`~amqstomp.jms.connection.Connection`
per broker, and what the composition needs to know of each (lost, between
sockets, flow-controlled), heard through the connection's public listeners.

What does not depend on the API (the member URLs from one ``failover:(a,b,c)?query``
URI, :func:`split_prefetch`, redaction, the bounded parallel close, the members'
bookkeeping) is :mod:`amqstomp._members`', shared with the stomp.py-style
:class:`~amqstomp.fanin.FanInConnection`; here only what is JMS: a member's
:class:`ConnectionFactory` and the JMS listeners that tell it lost or full.

Licensed under the Apache License, Version 2.0.
"""
import logging
from typing import Any, Callable, List, Optional, Sequence, Tuple

from .. import _members as shared
from .._members import CLOSE_SLACK_S, Closing, close_members, member_urls, split_prefetch
from .connection import Connection, ConnectionFactory

__all__ = ["member_urls", "split_prefetch", "member_factory", "STARTUP_ATTEMPTS", "Member", "MemberGroup",
           "open_members", "close_members", "Closing", "CLOSE_SLACK_S"]

log = logging.getLogger("amqstomp.jms.fanin")

#: a ``failover:`` member's ``startupMaxReconnectAttempts`` when nothing else bounds its start-up
#: (neither that option, nor ``timeout``, nor ``timeout_s``): a broker that does not connect
#: fails the construction with ConnectFailedException instead of blocking it for ever
STARTUP_ATTEMPTS = 10


def member_factory(url: str, timeout_s: Optional[float], **options: Any) -> ConnectionFactory:
    """The :class:`ConnectionFactory` of one member: ``url`` with ``options``; a
    ``failover:`` URL whose start-up nothing bounds (no ``startupMaxReconnectAttempts``
    and no ``timeout`` in the URL or ``options``, ``timeout_s`` None) gets
    ``startupMaxReconnectAttempts`` = :data:`STARTUP_ATTEMPTS`.

    Raises:
        ConfigurationError: a bad URL or option.
    """
    factory = ConnectionFactory(url, **options)
    resolved = factory.resolved
    if (resolved.uri.failover and timeout_s is None
            and not resolved.given & {"startup_max_reconnect_attempts", "timeout_ms"}):
        factory = ConnectionFactory(url, **dict(options, startup_max_reconnect_attempts=STARTUP_ATTEMPTS))
    return factory


class Member(shared.Member[Connection]):
    """One broker's JMS connection in a composition (:class:`amqstomp._members.Member`),
    its state heard through the connection's exception, transport and usage listeners.

    Attributes: as :class:`amqstomp._members.Member`'s; ``close_timeout_s`` is the
    connection's ``jms.closeTimeout`` (s).
    """

    def __init__(self, url: str, connection: Connection, report: Callable[[str, BaseException], None],
                 close_timeout_s: float = 15.0) -> None:
        super().__init__(url, connection, report, close_timeout_s, connection.close, connection.threads)
        connection.set_exception_listener(self.on_exception)
        connection.set_transport_listener(self)
        connection.set_usage_listener(self._on_full, self._on_not_full)

    def on_exception(self, exc: BaseException) -> None:
        """The connection's exception listener; a broken connection loses the member."""
        if self.connection.failure is not None or self.connection.is_closed:
            self.mark_lost(self.connection.failure or exc)
        else:
            log.warning("broker %s: %s", self.name, exc)
            self.report(exc)

    def _on_full(self, event: Any) -> None:
        self.full = True

    def _on_not_full(self, event: Any) -> None:
        self.full = False


def open_members(urls: Sequence[str], opener: Callable[[str, int], Tuple[Connection, ConnectionFactory]],
                 report: Callable[[str, BaseException], None]) -> List[Member]:
    """``opener(url, index)`` (the connection and its factory) for each URL; on an
    error the ones opened are closed and the error raised."""
    members: List[Member] = []
    try:
        for index, url in enumerate(urls):
            connection, factory = opener(url, index)
            close_ms = factory.options.get("close_timeout_ms") or 15000
            members.append(Member(url, connection, report, close_ms / 1000.0))
    except BaseException:
        close_members(members)
        raise
    return members


class MemberGroup(shared.MemberGroup[Connection]):
    """What a fan-in consumer and a spreading producer show of their brokers
    (:class:`amqstomp._members.MemberGroup`, with JMS connections)."""
