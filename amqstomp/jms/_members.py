"""The brokers of a fan-in consumer or a spreading producer
(:mod:`amqstomp.jms.fanin`): one JMS :class:`~amqstomp.jms.connection.Connection`
per broker, and what the composition needs to know of each (lost, between
sockets, flow-controlled), heard through the connection's public listeners.

A list of brokers is either a sequence of broker URLs (each used as given: a
``stomp://`` URL connects once, a ``failover:(...)`` URL fails over on its
own), or one ``failover:(a,b,c)?query`` URI, which becomes one
``failover:(a)?query`` per member (each member reconnects to its own broker;
``randomize``, ``priorityBackup`` and ``priorityURIs`` are dropped: they choose
among brokers, and a member has one).

Licensed under the Apache License, Version 2.0.
"""
import logging
import re
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..exception import ConfigurationError, StompException
from .._core.uri import parse_uri, redact
from .connection import Connection, ConnectionFactory

__all__ = ["member_urls", "split_prefetch", "member_factory", "STARTUP_ATTEMPTS", "Member", "MemberGroup",
           "open_members", "close_members", "Closing"]

log = logging.getLogger("amqstomp.jms.fanin")

#: failover options that choose among brokers: meaningless for a member with one broker
_CHOOSING = ("randomize", "prioritybackup", "priorityuris")


def member_urls(brokers: Union[str, Sequence[str]]) -> List[str]:
    """One broker URL per member (see the module docstring).

    Raises:
        TypeError: ``brokers`` is neither a str nor a sequence of str.
        ValueError: no broker, or a ``failover:`` URI without parentheses.
        ConfigurationError: a bad URL, a broker (host:port) listed twice, or
            ``rebalanceInterval`` in a failover URI (one broker per member: nothing to rebalance).
    """
    if isinstance(brokers, str):
        text = brokers.strip()
        if not text.lower().startswith("failover:"):
            return [text]
        body = text[len("failover:"):]
        if not body.startswith("(") or ")" not in body:
            raise ValueError("brokers: a failover URI must list its members in parentheses, "
                             "failover:(stomp://a:61613,stomp://b:61613)?..., got %r" % (redact(text),))
        close = body.index(")")
        members, query = body[1:close], body[close + 1:].lstrip("?")
        keys = [pair.split("=", 1)[0].lower() for pair in query.split("&") if pair]
        if "rebalanceinterval" in keys:
            raise ConfigurationError("brokers: rebalanceInterval has no meaning here: the fan-in consumer and the "
                                     "spreading producer split a failover URI into one member per broker (each on "
                                     "its own broker, nothing to rebalance), got %r" % (redact(text),))
        kept = [pair for pair in query.split("&") if pair and pair.split("=", 1)[0].lower() not in _CHOOSING]
        suffix = ("?" + "&".join(kept)) if kept else ""
        urls = ["failover:(%s)%s" % (member.strip(), suffix)
                for member in re.split(r",(?=\s*[A-Za-z][A-Za-z0-9+.-]*://)", members) if member.strip()]
    elif isinstance(brokers, (list, tuple)) and all(isinstance(url, str) for url in brokers):
        urls = [url.strip() for url in brokers]
    else:
        raise TypeError("brokers must be a broker URL (str) or a list of them, got %r" % (brokers,))
    if not urls or not all(urls):
        raise ValueError("brokers: at least one broker URL, none empty, got %r" % ([redact(u) for u in urls],))
    seen: Dict[Tuple[str, int], str] = {}
    for url in urls:
        for endpoint in parse_uri(url).endpoints:
            pair = (endpoint.host.lower(), endpoint.port)
            if pair in seen:
                raise ConfigurationError("brokers: %s:%d is listed twice (in %s and %s): one member per broker"
                                         % (endpoint.host, endpoint.port, redact(seen[pair]), redact(url)))
            seen[pair] = url
    return urls


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


def split_prefetch(total: int, n: int) -> List[int]:
    """``total`` messages of prefetch over ``n`` members: ``total // n`` each, one
    more for the first ``total % n``, at least 1 each (so ``n`` when ``total < n``).

    Raises:
        ValueError: ``total`` is not an int >= 1 or ``n`` < 1.
    """
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        raise ValueError("prefetch must be an int >= 1 (messages across all brokers), got %r" % (total,))
    if n < 1:
        raise ValueError("at least one broker, got %d" % (n,))
    return [max(1, total // n + (1 if i < total % n else 0)) for i in range(n)]


class Member:
    """One broker's connection in a composition, and its state as its listeners
    report it.

    Attributes:
        url (str): the member's broker URL (as given: may hold ``jms.password``; never
            shown outside the object).
        name (str): ``url`` redacted (:func:`~amqstomp.uri.redact`): what the
            composition shows of the member (exception listener argument, ``lost``
            keys, ``brokers``, messages, logs).
        connection (Connection): its JMS connection.
        lost (BaseException | None): why the connection broke for good (the
            exception listener heard it, or a call raised it); the member is
            then skipped.
        interrupted (bool): a ``failover:`` member between sockets.
        full (bool): its producer flow control holds sends back
            (``on_usage_full`` heard, ``on_usage_not_full`` not yet).
        lock (threading.Lock): one caller at a time on its session.
        close_timeout_s (float): its connection's ``jms.closeTimeout`` (s).
    """

    def __init__(self, url: str, connection: Connection, report: Callable[[str, BaseException], None],
                 close_timeout_s: float = 15.0) -> None:
        self.url = url
        self.close_timeout_s = close_timeout_s
        self.name = redact(url)
        self.connection = connection
        self.lost: Optional[BaseException] = None
        self.interrupted = False
        self.full = False
        self.lock = threading.Lock()
        self._report = report
        connection.set_exception_listener(self.on_exception)
        connection.set_transport_listener(self)
        connection.set_usage_listener(self._on_full, self._on_not_full)

    def __repr__(self) -> str:
        return "<member %s%s>" % (self.name, " lost" if self.lost is not None else "")

    @property
    def usable(self) -> bool:
        """Connected, not lost, not flow-controlled."""
        return self.lost is None and not self.interrupted and not self.full

    def on_exception(self, exc: BaseException) -> None:
        """The connection's exception listener; a broken connection loses the member."""
        if self.connection.failure is not None or self.connection.is_closed:
            self.mark_lost(self.connection.failure or exc)
        else:
            log.warning("broker %s: %s", self.name, exc)
            self._report(self.name, exc)

    def mark_lost(self, exc: BaseException) -> None:
        if self.lost is None:
            self.lost = exc
            log.warning("broker %s lost: %s", self.name, exc)
            self._report(self.name, exc)

    def on_transport_interrupted(self) -> None:
        self.interrupted = True
        log.info("broker %s: socket lost, reconnecting", self.name)

    def on_transport_resumed(self) -> None:
        self.interrupted = False
        log.info("broker %s: reconnected", self.name)

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


#: s a close() waits for the members' closing threads beyond the longest ``jms.closeTimeout``
#: (each connection's close ends within its own; this only bounds the wait should one not)
CLOSE_SLACK_S = 5.0


def close_members(members: Sequence[Member]) -> None:
    """Close every member's connection at once, each on its own thread and within its
    ``close_timeout_ms`` (``jms.closeTimeout``), so the whole close takes at most the
    longest of them, not their sum (a member whose thread calls, a listener's close(),
    is closed on this thread); even when one raises, the first error is raised after.

    Raises:
        StompException: the first error a connection's close raised, or a close that
            did not end within its ``jms.closeTimeout`` and :data:`CLOSE_SLACK_S`.
    """
    errors: List[Optional[BaseException]] = [None] * len(members)

    def close(index: int) -> None:
        try:
            members[index].connection.close()
        except Exception as exc:  # keep closing the others
            log.debug("closing %r: %s", members[index], exc)
            errors[index] = exc

    me = threading.current_thread()
    inline = [i for i, member in enumerate(members) if me in member.connection.threads()]
    closers: List[Tuple[int, threading.Thread]] = []
    for index in range(len(members)):
        if index not in inline:
            thread = threading.Thread(target=close, args=(index,), name="amqstomp-jms-close", daemon=True)
            thread.start()
            closers.append((index, thread))
    for index in inline:
        close(index)
    longest = max([member.close_timeout_s for member in members] or [0.0])
    deadline = time.monotonic() + longest + CLOSE_SLACK_S
    for index, thread in closers:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive() and errors[index] is None:
            errors[index] = StompException("closing %s did not end within its jms.closeTimeout (%.1f s)"
                                           % (members[index].name, members[index].close_timeout_s))
    first = next((exc for exc in errors if exc is not None), None)
    if first is not None:
        raise first




class Closing:
    """The close() of a composition: the first call closes the members
    (:func:`close_members`); a concurrent or later call waits until that close has
    ended (running listeners finished, as JMS asks of every close()), except on a
    member's own thread (a listener's close(), which that close waits for)."""

    def __init__(self) -> None:
        self.closed = False
        self._lock = threading.Lock()
        self._done = threading.Event()

    def close(self, members: Sequence[Member]) -> None:
        """Raises:
            StompException: as :func:`close_members`; or, for a second call, the first
                did not end within the longest ``jms.closeTimeout`` and :data:`CLOSE_SLACK_S`."""
        with self._lock:
            first = not self.closed
            self.closed = True
        if first:
            try:
                close_members(members)
            finally:
                self._done.set()
            return
        me = threading.current_thread()
        if any(me in member.connection.threads() for member in members):
            return
        longest = max([member.close_timeout_s for member in members] or [0.0])
        if not self._done.wait(longest + CLOSE_SLACK_S):
            raise StompException("another thread's close() did not end within jms.closeTimeout (%.1f s)" % longest)


class MemberGroup:
    """What a fan-in consumer and a spreading producer share about their brokers: the members
    (``_members``, set by the subclass), their close (``_closing``) and the exception listener
    (``_exception_listener``), read the same way by both."""

    _members: List[Member]
    _closing: Closing
    _exception_listener: Optional[Callable[[str, BaseException], None]] = None

    @property
    def brokers(self) -> List[str]:
        """The members' broker URLs, in order, redacted (:func:`amqstomp.uri.redact`: no password)."""
        return [member.name for member in self._members]

    @property
    def lost(self) -> Dict[str, BaseException]:
        """The brokers whose connection broke for good (redacted URL, as in :attr:`brokers`,
        -> why); they are left out (no message is received from or sent to them)."""
        return {member.name: member.lost for member in self._members if member.lost is not None}

    @property
    def connections(self) -> List[Connection]:
        """Each broker's JMS connection, in the order of :attr:`brokers` (to look at, e.g.
        ``threads()``, ``failure``; closing one loses that broker)."""
        return [member.connection for member in self._members]

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closing.closed

    def _report(self, url: str, exc: BaseException) -> None:
        listener = self._exception_listener
        if listener is not None:
            try:
                listener(url, exc)
            except Exception:  # the application's: logged, not raised into the connection
                log.exception("exception listener of %r failed", self)
