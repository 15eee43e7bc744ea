"""The brokers of a composition of ordinary connections, one per broker, whatever
the API: the JMS-style :class:`~amqstomp.jms.FanInConsumer` and
:class:`~amqstomp.jms.SpreadingProducer`, the stomp.py-style
:class:`~amqstomp.fanin.FanInConnection` and
:class:`~amqstomp.spreading.SpreadingConnection` (docs/guides/scaling-out.md).
Written once here, below both APIs (it imports neither):

* :func:`member_urls`: one broker URL per member from a list of URLs or from one
  ``failover:(a,b,c)?query`` URI, which becomes one ``failover:(a)?query`` per
  member (each member reconnects to its own broker; ``randomize``,
  ``priorityBackup`` and ``priorityURIs`` are dropped: they choose among
  brokers, and a member has one);
* :func:`split_prefetch`: one prefetch budget (messages) over the members;
* :class:`Member`: one broker's connection and its state as the composition hears
  it (lost, between sockets, flow-controlled), its name redacted
  (:func:`amqstomp.uri.redact`: no password ever shown);
* :func:`close_members` / :class:`Closing`: every member closed at once, each on
  its own thread and within its own bound, so the whole close takes the longest
  of them, not their sum;
* :class:`MemberGroup`: what a composition shows of its members (``brokers``,
  ``lost``, ``connections``, ``closed``, the exception listener's report).

Licensed under the Apache License, Version 2.0.
"""
import logging
import threading
import time
from typing import Callable, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar, Union

from .exception import ConfigurationError, StompException
from ._core.uri import failover_members, parse_uri, redact

__all__ = ["member_urls", "split_prefetch", "Member", "MemberGroup", "close_members", "Closing", "CLOSE_SLACK_S",
           "BrokerListener", "Turns"]

log = logging.getLogger("amqstomp.members")

#: ``listener(broker_url, exc)``: what went wrong on one broker's connection (the URL redacted)
BrokerListener = Callable[[str, BaseException], object]

#: failover options that choose among brokers: meaningless for a member with one broker
_CHOOSING = ("randomize", "prioritybackup", "priorityuris")

#: a member's connection type (a JMS Connection, a stomp.py-API connection)
C = TypeVar("C")


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
        members = failover_members(text, len("failover:("), len("failover:") + close)
        query = body[close + 1:].lstrip("?")
        keys = [pair.split("=", 1)[0].lower() for pair in query.split("&") if pair]
        if "rebalanceinterval" in keys:
            raise ConfigurationError("brokers: rebalanceInterval has no meaning here: a fan-in or spreading "
                                     "composition splits a failover URI into one member per broker (each on "
                                     "its own broker, nothing to rebalance), got %r" % (redact(text),))
        kept = [pair for pair in query.split("&") if pair and pair.split("=", 1)[0].lower() not in _CHOOSING]
        suffix = ("?" + "&".join(kept)) if kept else ""
        urls = ["failover:(%s)%s" % (member, suffix) for member in members]
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


class Member(Generic[C]):
    """One broker's connection in a composition, and its state as the connection's
    listeners report it (an API's subclass wires them).

    Args:
        url (str): the member's broker URL, as given (may hold a password: never shown).
        connection: its connection (a JMS Connection, a stomp.py-API connection).
        report: ``report(name, exc)``: the composition's exception listener.
        close_timeout_s (float): the most its close takes (s).
        close: closes ``connection`` (within ``close_timeout_s``).
        threads: the connection's threads now (a close called on one of them runs inline).

    Attributes:
        url (str), connection, close_timeout_s (float): as given.
        name (str): ``url`` redacted (:func:`~amqstomp.uri.redact`): what the
            composition shows of the member (``lost`` keys, ``brokers``, messages, logs).
        lost (BaseException | None): why the connection broke (a connection that was up
            lost, a connect attempt failed); the member is then skipped until it
            connects again (:meth:`revive`).
        interrupted (bool): a failing-over member between sockets.
        full (bool): its producer flow control holds sends back.
        lock (threading.Lock): one sender at a time on it.
    """

    def __init__(self, url: str, connection: C, report: Callable[[str, BaseException], None],
                 close_timeout_s: float, close: Callable[[], None],
                 threads: Callable[[], Sequence[threading.Thread]]) -> None:
        self.url = url
        self.name = redact(url)
        self.connection = connection
        self.close_timeout_s = close_timeout_s
        self.lost: Optional[BaseException] = None
        self.interrupted = False
        self.full = False
        self.lock = threading.Lock()
        self._report = report
        self._close = close
        self._threads = threads

    def __repr__(self) -> str:
        return "<member %s%s>" % (self.name, " lost" if self.lost is not None else "")

    @property
    def usable(self) -> bool:
        """Connected, not lost, not flow-controlled."""
        return self.lost is None and not self.interrupted and not self.full

    def owns(self, thread: threading.Thread) -> bool:
        """True when ``thread`` is one of the connection's threads now."""
        return thread in self._threads()

    def close(self) -> None:
        """Close the connection (within :attr:`close_timeout_s`)."""
        self._close()

    def report(self, exc: BaseException) -> None:
        """Tell the composition's exception listener (the member stays usable)."""
        self._report(self.name, exc)

    def mark_lost(self, exc: BaseException) -> None:
        """The connection broke for good: the member is skipped from now on (reported once)."""
        if self.lost is None:
            self.lost = exc
            log.warning("broker %s lost: %s", self.name, exc)
            self._report(self.name, exc)

    def revive(self) -> None:
        """The connection is connected again (a new ``connect()`` or its failover's
        new socket): a member marked lost is used again, and a later loss is
        reported again (:meth:`mark_lost`)."""
        self.interrupted = False
        if self.lost is not None:
            log.info("broker %s: connected again, used again (it was lost: %s)", self.name, self.lost)
            self.lost = None

    def on_transport_interrupted(self) -> None:
        self.interrupted = True
        log.info("broker %s: socket lost, reconnecting", self.name)

    def on_transport_resumed(self) -> None:
        self.interrupted = False
        log.info("broker %s: reconnected", self.name)


#: s a close() waits for the members' closing threads beyond the longest member's close bound
#: (each connection's close ends within its own; this only bounds the wait should one not)
CLOSE_SLACK_S = 5.0


def close_members(members: Sequence[Member[C]]) -> None:
    """Close every member's connection at once, each on its own thread and within its
    ``close_timeout_s``, so the whole close takes at most the longest of them, not their
    sum (a member whose own thread calls, a listener's close, is closed on this thread);
    even when one raises, the first error is raised after.

    Raises:
        StompException: the first error a connection's close raised, or a close that
            did not end within its ``close_timeout_s`` and :data:`CLOSE_SLACK_S`.
    """
    errors: List[Optional[BaseException]] = [None] * len(members)

    def close(index: int) -> None:
        try:
            members[index].close()
        except Exception as exc:  # keep closing the others
            log.debug("closing %r: %s", members[index], exc)
            errors[index] = exc

    me = threading.current_thread()
    inline = [i for i, member in enumerate(members) if member.owns(me)]
    closers: List[Tuple[int, threading.Thread]] = []
    for index in range(len(members)):
        if index not in inline:
            thread = threading.Thread(target=close, args=(index,), name="amqstomp-member-close", daemon=True)
            thread.start()
            closers.append((index, thread))
    for index in inline:
        close(index)
    longest = max([member.close_timeout_s for member in members] or [0.0])
    deadline = time.monotonic() + longest + CLOSE_SLACK_S
    for index, thread in closers:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive() and errors[index] is None:
            errors[index] = StompException("closing %s did not end within its close timeout (%.1f s)"
                                           % (members[index].name, members[index].close_timeout_s))
    first = next((exc for exc in errors if exc is not None), None)
    if first is not None:
        raise first


class Turns:
    """Whose turn it is among ``n`` brokers (a spreading producer's round robin,
    both APIs): :meth:`order` gives each send the member indexes to try, from its
    turn on; :meth:`took` moves the turn past the member that took a send, so a
    skipped member's share spreads evenly over the others. Thread-safe."""

    def __init__(self, n: int) -> None:
        self._n = n
        self._next = 0
        self._lock = threading.Lock()

    def order(self) -> List[int]:
        """The member indexes to try for one send, this send's turn first."""
        n = self._n
        with self._lock:
            start = self._next
            self._next = (start + 1) % n
        return [(start + k) % n for k in range(n)]

    def took(self, index: int) -> None:
        """Member ``index`` took a send: the next turn is the member after it."""
        with self._lock:
            self._next = (index + 1) % self._n


class Closing:
    """The close of a composition: the first call closes the members
    (:func:`close_members`); a concurrent or later call waits until that close has
    ended (running listeners finished), except on a member's own thread (a
    listener's close, which that close waits for)."""

    def __init__(self) -> None:
        self.closed = False
        self._lock = threading.Lock()
        self._done = threading.Event()

    def close(self, members: Sequence[Member[C]]) -> None:
        """Raises:
            StompException: as :func:`close_members`; or, for a second call, the first
                did not end within the longest member's close bound and :data:`CLOSE_SLACK_S`."""
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
        if any(member.owns(me) for member in members):
            return
        longest = max([member.close_timeout_s for member in members] or [0.0])
        if not self._done.wait(longest + CLOSE_SLACK_S):
            raise StompException("another thread's close did not end within the close timeout (%.1f s)" % longest)


class MemberGroup(Generic[C]):
    """What every composition shows of its brokers: the members (``_members``, set by
    the subclass), their close (``_closing``) and the exception listener
    (``_exception_listener``), read the same way by all."""

    _members: Sequence[Member[C]]
    _closing: Closing
    _exception_listener: Optional[BrokerListener] = None

    @property
    def brokers(self) -> List[str]:
        """The members' broker URLs, in order, redacted (:func:`amqstomp.uri.redact`: no password)."""
        return [member.name for member in self._members]

    @property
    def lost(self) -> Dict[str, BaseException]:
        """The brokers whose connection broke (redacted URL, as in :attr:`brokers`, -> why):
        a connection that was up and was lost, or a connect attempt that failed, never a
        call made before it connected; they are left out (no message is received from or
        sent to them) until their connection connects again."""
        return {member.name: member.lost for member in self._members if member.lost is not None}

    @property
    def connections(self) -> List[C]:
        """Each broker's connection, in the order of :attr:`brokers` (to look at; closing
        one loses that broker)."""
        return [member.connection for member in self._members]

    @property
    def closed(self) -> bool:
        """True once the composition was closed (``close()`` / ``disconnect()``)."""
        return self._closing.closed

    def set_exception_listener(self, listener: Optional[BrokerListener]) -> None:
        """``listener(broker_url, exc)`` (``broker_url`` redacted, as in :attr:`brokers`)
        hears what goes wrong on a broker's connection: its loss (the broker is then
        left out), an error no call waits for. It runs on that connection's thread."""
        self._exception_listener = listener

    def _report(self, url: str, exc: BaseException) -> None:
        listener = self._exception_listener
        if listener is not None:
            try:
                listener(url, exc)
            except Exception:  # the application's: logged, not raised into the connection
                log.exception("exception listener of %r failed", self)
