"""The state a :class:`~amqstomp.jms.Session` shares with its consumers,
producers and browsers: :class:`SessionState` (one per session: its
condition, its members, whether it is closing, whose listener runs) and
:class:`ConsumerLedger` (one per consumer: the messages on their way to the
application), with :class:`Delivery`, one MESSAGE in a consumer's hands.

The session, its consumers, producers, browsers and its transaction hold a
reference to the same :class:`SessionState`; they read and change each other's
shared state only through it, never through another object's private
attributes. This module alone takes and waits on the session's condition
(``tests/test_structure.py`` checks it; issue 22): each change of a member list,
a ledger or a session flag is a named :class:`SessionState` method that makes
it under the condition and notifies the waiters, and each wait on it is bounded
(at most :data:`~amqstomp._io.timeouts.MAX_WAIT_S` a wait; callers give their
deadlines).

Licensed under the Apache License, Version 2.0.
"""
import itertools
import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Deque, List, Optional, Tuple

from ..codec import Frame
from .._io.timeouts import MAX_WAIT_S
from .exceptions import IllegalStateError

if TYPE_CHECKING:  # pragma: no cover - annotations only: these modules import this one
    from ._connection_state import ConnectionState
    from ._producer_flow import ProducerWindow
    from ._transaction import Transaction
    from .browser import QueueBrowser
    from .consumer import ConsumerCore
    from .producer import MessageProducer
    from .session import Session

__all__ = ["CONSUMED", "Delivery", "ConsumerLedger", "SessionState", "give_back"]

log = logging.getLogger("amqstomp.jms.session")


class Delivery:
    """One MESSAGE in a consumer's hands: the frame, its arrival number in the
    session (``seq``), how often this client redelivered it, and whether the
    prefetch window counted it consumed."""

    __slots__ = ("frame", "seq", "redeliveries", "counted")

    def __init__(self, frame: Frame, seq: int) -> None:
        self.frame = frame
        self.seq = seq
        self.redeliveries = 0
        self.counted = False

    @property
    def delivery_count(self) -> int:
        """1 for a first delivery, + the broker's and this client's redeliveries."""
        return int(getattr(self.frame, "delivery_count", 1) or 1) + self.redeliveries


class ConsumerLedger:
    """A consumer's messages between the socket and the application; changed
    only by its session's :class:`SessionState`, under the session's condition.

    Attributes:
        buffer (deque[Delivery]): arrived (or put back for redelivery), not yet
            handed over; the head goes next.
        delivered (list[Delivery]): handed over and not yet acknowledged
            (CLIENT / INDIVIDUAL / transacted modes); transacted: not yet covered by
            an ACK in the transaction -- those an ACK covers are the connection's
            transaction table's (:mod:`amqstomp._core.transactions`, owner
            ``"consumed"``), given back here on ABORT, gone on COMMIT.
        paused_until (float): ``time.monotonic()`` before which nothing is handed
            over (the redelivery delay).
        listener (callable | None): the consumer's message listener.
        closed (bool): the consumer is closed.
    """

    __slots__ = ("buffer", "delivered", "paused_until", "listener", "closed")

    def __init__(self) -> None:
        self.buffer: Deque[Delivery] = deque()
        self.delivered: List[Delivery] = []
        self.paused_until = 0.0
        self.listener: Optional[Callable[[Any], Any]] = None
        self.closed = False

    def take_delivered(self) -> List[Delivery]:
        """Empty ``delivered`` and return what it held."""
        taken, self.delivered = self.delivered, []
        return taken


#: the transaction table's owner of the JMS consumers' deliveries: entries
#: ``(SessionState, ConsumerCore, [Delivery])``, one per ACK in the transaction
CONSUMED = "consumed"


def give_back(entries: List[Tuple["SessionState", Any, List[Delivery]]]) -> None:
    """The transaction table hands back what ACKs in an aborted transaction took
    (``Client.give_back[CONSUMED]``): each consumer's deliveries go back in front
    of its ``delivered``, in their order (the rollback then redelivers them, or
    re-subscribes their consumer). Takes each session's condition: never call with
    one held."""
    for state, consumer, deliveries in reversed(entries):
        state.restore_delivered(consumer.ledger, deliveries)


class SessionState:
    """What a session shares with its consumers, producers, browsers and
    transaction. Lists, flags and the consumers' ledgers change only through its
    methods, under its condition (private to this module: the others call the
    methods; ``tests/test_structure.py``), notified on every change a waiter may
    look for (a message, a close, a listener finished).

    Attributes:
        connection (ConnectionState): what the owning connection shares.
        session (Session): the session itself (set by it once made).
        transaction (Transaction): the session's transaction bookkeeping (set by
            the session).
        number (int): the session's number in its connection.
        acknowledge_mode (int), transacted (bool).
        consumers (list[ConsumerCore]), producers, browsers: the open members.
        windows (list[ProducerWindow]): the open producers' windows (their
            asynchronous sends awaiting receipts).
        deferred_close (list[ConsumerCore]): consumers closed in an open
            transaction whose UNSUBSCRIBE waits for its end.
        closing, closed (bool): ``close()`` started / finished.
        running (ConsumerCore | None): whose listener runs now.
        recover_current (bool): ``recover()`` called from the running listener.
        thread (threading.Thread | None): the session's dispatch thread.
    """

    def __init__(self, connection: "ConnectionState", number: int, acknowledge_mode: int, transacted: bool) -> None:
        self.connection = connection
        self.number = number
        self.acknowledge_mode = acknowledge_mode
        self.transacted = transacted
        self.session: "Session"
        self.transaction: "Transaction"
        #: the condition's lock: ``with self._lock`` is ``with self._cond`` (Condition.__enter__ takes it)
        #: without the two Python calls of Condition's __enter__/__exit__ (per message: track, untrack)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self.consumers: List["ConsumerCore"] = []
        self.producers: List["MessageProducer"] = []
        self.windows: List["ProducerWindow"] = []
        self.browsers: List["QueueBrowser"] = []
        self.deferred_close: List["ConsumerCore"] = []
        self.closing = False
        self.closed = False
        self.running: Optional["ConsumerCore"] = None
        self.recover_current = False
        self.thread: Optional[threading.Thread] = None
        self._seq = itertools.count()

    def _wait(self, seconds: Optional[float]) -> None:
        """Wait on the condition (held) for a notify, at most ``seconds`` (None: no
        deadline, :data:`MAX_WAIT_S` per wait); the callers loop on what they wait for."""
        self._cond.wait(MAX_WAIT_S if seconds is None or seconds > MAX_WAIT_S else seconds)

    def wake(self) -> None:
        """Notify every waiter (the dispatch thread, ``receive()``, a browse): something
        they look for changed outside this object (the connection started or broke, a
        browse's socket was lost)."""
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, ready: Callable[[], Any], deadline: float, poll_s: float = 0.5) -> Any:
        """Wait until ``ready()`` returns something other than None and return it; None
        once ``deadline`` (``time.monotonic()``) passed. ``ready`` runs under the
        condition and only reads (what it raises propagates); it runs again on every
        notify and at least every ``poll_s`` seconds (for what changes without one: a
        socket's state)."""
        with self._cond:
            while True:
                result = ready()
                if result is not None:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(min(left, poll_s))

    # ------------------------------------------------------------ members

    def add_consumer(self, consumer: "ConsumerCore") -> None:
        with self._cond:
            self.consumers.append(consumer)

    def close_consumer(self, consumer: "ConsumerCore") -> Optional[bool]:
        """``consumer`` closes: nothing more is handed over (its buffer is dropped) and
        it leaves the open consumers; in a transacted session whose open transaction
        holds messages of it, it joins ``deferred_close`` (its UNSUBSCRIBE waits for
        the transaction's end). Returns None when it was closed already, else whether
        its close is deferred."""
        ledger = consumer.ledger
        with self._cond:
            if ledger.closed:
                return None
            ledger.closed = True
            ledger.buffer.clear()
            # transacted, or CLIENT_ACKNOWLEDGE's "delivered" transaction (ActiveMQ) is open
            deferred = (self.transacted or self.transaction.tx is not None) and self.transaction.holds(consumer)
            if consumer in self.consumers:
                self.consumers.remove(consumer)
            if deferred:
                self.deferred_close.append(consumer)
            self._cond.notify_all()
        return deferred

    def discard_consumer(self, consumer: "ConsumerCore") -> None:
        """``consumer`` holds no subscription (its SUBSCRIBE or its re-subscribe
        failed): closed, its buffered and delivered messages dropped (the broker has
        them), out of the open consumers."""
        ledger = consumer.ledger
        with self._cond:
            ledger.closed = True
            ledger.buffer.clear()
            ledger.delivered = []
            if consumer in self.consumers:
                self.consumers.remove(consumer)
            self._cond.notify_all()

    def take_deferred_closes(self) -> List["ConsumerCore"]:
        """The transaction ended: the consumers whose UNSUBSCRIBE waited for it (now
        out of ``deferred_close``)."""
        with self._cond:
            closing, self.deferred_close = self.deferred_close, []
        return closing

    def durable_consumer(self, name: str) -> Optional["ConsumerCore"]:
        """The consumer (open, or its close deferred) of durable subscription ``name``, or None."""
        with self._cond:
            for consumer in self._all_consumers():
                if consumer.durable_name == name:
                    return consumer
        return None

    def add_producer(self, producer: "MessageProducer") -> None:
        with self._cond:
            self.producers.append(producer)

    def add_window(self, window: "ProducerWindow") -> None:
        """A producer's window: a commit waits for its receipts (:meth:`producer_windows`)."""
        with self._cond:
            self.windows.append(window)

    def remove_producer(self, producer: "MessageProducer", window: Optional["ProducerWindow"]) -> None:
        with self._cond:
            if producer in self.producers:
                self.producers.remove(producer)
            if window is not None and window in self.windows:
                self.windows.remove(window)

    def producer_windows(self) -> List["ProducerWindow"]:
        with self._cond:
            return list(self.windows)

    def add_browser(self, browser: "QueueBrowser") -> None:
        with self._cond:
            self.browsers.append(browser)

    def remove_browser(self, browser: "QueueBrowser") -> None:
        with self._cond:
            if browser in self.browsers:
                self.browsers.remove(browser)
            self._cond.notify_all()

    def members(self) -> Tuple[List["ConsumerCore"], List["MessageProducer"], List["QueueBrowser"]]:
        """Copies of the open consumers, producers and browsers."""
        with self._cond:
            return list(self.consumers), list(self.producers), list(self.browsers)

    def _all_consumers(self) -> List["ConsumerCore"]:
        """The open consumers and those whose close waits for the transaction
        (call with the condition held)."""
        return self.consumers + self.deferred_close

    # ------------------------------------------------------------ life

    def check_open(self, error: Optional[BaseException] = None, closed_message: Optional[str] = None) -> None:
        """Raises ``error`` (default: IllegalStateError, with ``closed_message`` when given: made
        only then, not per call) when the session is closed or closing, and what
        :meth:`ConnectionState.check_open` raises."""
        if self.closed or self.closing:
            raise error or IllegalStateError(closed_message or "%r is closed" % (self.session,))
        self.connection.check_open()

    def on_session_thread(self) -> bool:
        """True when called from the session's dispatch thread (a listener)."""
        return self.thread is threading.current_thread()

    def begin_close(self) -> bool:
        """``close()`` starts: ``closing`` (waiters give up). False when it had already."""
        with self._cond:
            if self.closing or self.closed:
                return False
            self.closing = True
            self._cond.notify_all()
        return True

    def end_close(self) -> None:
        """``close()`` is done: ``closed`` (the dispatch thread ends)."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def wait_idle(self, consumer: Optional["ConsumerCore"] = None) -> bool:
        """Wait until no listener (of ``consumer``, or any) runs on the session
        thread; at most ``close_timeout_ms`` (False then: two listeners closing
        each other's sessions would otherwise wait for each other forever)."""
        close_timeout_s = self.connection.close_wait_s()
        deadline = time.monotonic() + close_timeout_s
        with self._cond:
            while self.running is not None and (consumer is None or self.running is consumer):
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("%r: a listener still runs after %.1f s; going on without it",
                                self.session, close_timeout_s)
                    return False
                self._cond.wait(min(0.5, left))
        return True

    # ------------------------------------------------------------ delivery

    def enqueue(self, consumer: "ConsumerCore", frame: Frame) -> None:
        """Reader thread: a MESSAGE for ``consumer`` (one of this session's), to
        be handed over by the dispatch thread or ``receive()``."""
        ledger = consumer.ledger
        with self._cond:
            if ledger.closed:
                return
            ledger.buffer.append(Delivery(frame, next(self._seq)))
            self._cond.notify_all()

    def next_dispatch(self) -> Optional[Tuple["ConsumerCore", Delivery]]:
        """Session thread: wait for the next message a listener gets -- of the
        consumers with a listener, the one that arrived first, once its consumer's
        redelivery delay passed, while the connection is started -- taken out of its
        buffer, its consumer marked ``running`` (until :meth:`dispatched`). None once
        the session is closed."""
        with self._cond:
            while True:
                if self.closed:
                    return None
                pick, wait = self._next_for_listener()
                if pick is not None:
                    self.running = pick[0]
                    return pick
                self._wait(wait)

    def _next_for_listener(self) -> Tuple[Optional[Tuple["ConsumerCore", Delivery]], Optional[float]]:
        """:meth:`next_dispatch`'s choice (condition held): the pick, or the seconds
        until a redelivery delay ends (None: nothing to wait for but a notify)."""
        connection = self.connection
        if not connection.started or connection.life.cause is not None or self.closing:
            return None, None
        now = time.monotonic()
        best: Optional["ConsumerCore"] = None
        best_seq = 0
        wait: Optional[float] = None
        for consumer in self.consumers:
            ledger = consumer.ledger
            if ledger.listener is None or ledger.closed or not ledger.buffer:
                continue
            if ledger.paused_until > now:
                left = ledger.paused_until - now
                wait = left if wait is None else min(wait, left)
                continue
            seq = ledger.buffer[0].seq
            if best is None or seq < best_seq:
                best, best_seq = consumer, seq
        if best is not None:
            return (best, best.ledger.buffer.popleft()), None
        return None, wait

    def dispatched(self) -> None:
        """Session thread: the listener :meth:`next_dispatch` chose returned."""
        with self._cond:
            self.running = None
            self._cond.notify_all()

    def take_for_receive(self, ledger: ConsumerLedger, deadline: Optional[float]) -> Optional[Delivery]:
        """``receive()``'s wait, on the caller's thread: the head of ``ledger``'s
        buffer, once the connection is started and the consumer's redelivery delay
        passed; None when ``deadline`` (``time.monotonic()``; None: none) passes
        first, or the consumer or the session is closed.

        Raises:
            what :meth:`ConnectionState.check_open` raises (the connection broke or closed).
        """
        connection = self.connection
        with self._cond:
            while True:
                if ledger.closed or self.closing or self.closed:
                    return None
                connection.check_open()
                now = time.monotonic()
                wait: Optional[float] = None
                if connection.started and ledger.buffer:
                    if ledger.paused_until <= now:
                        return ledger.buffer.popleft()
                    wait = ledger.paused_until - now
                if deadline is not None:
                    left = deadline - now
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._wait(wait)

    def take_buffered(self, ledger: ConsumerLedger) -> Optional[Delivery]:
        """The head of ``ledger``'s buffer now (a browse's next message), or None."""
        with self._cond:
            return ledger.buffer.popleft() if ledger.buffer else None

    def set_listener(self, ledger: ConsumerLedger, listener: Optional[Callable[[Any], Any]]) -> None:
        with self._cond:
            ledger.listener = listener
            self._cond.notify_all()

    def requeue(self, ledger: ConsumerLedger, deliveries: List[Delivery], delay_ms: int = 0) -> None:
        """Put ``deliveries`` back at the head of ``ledger``'s buffer, in their order,
        handed over again ``delay_ms`` from now at the earliest (the redelivery delay);
        dropped when the consumer is closed (its UNSUBSCRIBE gives them back to the broker)."""
        with self._cond:
            if ledger.closed:
                return
            ledger.buffer.extendleft(reversed(deliveries))
            if delay_ms:
                ledger.paused_until = max(ledger.paused_until, time.monotonic() + delay_ms / 1000.0)
            self._cond.notify_all()

    def clear_buffer(self, ledger: ConsumerLedger, unpause: bool = False) -> bool:
        """Drop what ``ledger``'s buffer holds (and, ``unpause``, its redelivery delay);
        False when the consumer is closed."""
        with self._cond:
            if ledger.closed:
                return False
            ledger.buffer.clear()
            if unpause:
                ledger.paused_until = 0.0
        return True

    # ------------------------------------------------------------ delivered, not yet settled

    def track(self, ledger: ConsumerLedger, delivery: Delivery) -> None:
        """``delivery`` was handed over (or is settled with those that were): it
        waits in ``delivered`` for its ACK / COMMIT."""
        with self._lock:  # (the condition's lock)
            ledger.delivered.append(delivery)

    def untrack(self, ledger: ConsumerLedger, delivery: Delivery) -> bool:
        """``delivery`` leaves ``delivered`` (its ACK is written next); False when it
        was not there (acked already, or being redelivered)."""
        with self._lock:  # (the condition's lock)
            try:
                ledger.delivered.remove(delivery)  # (one search, not ``in`` and then remove)
            except ValueError:
                return False
        return True

    def delivered_count(self, ledger: ConsumerLedger) -> int:
        with self._cond:
            return len(ledger.delivered)

    def held_on(self, ledger: ConsumerLedger, seq: int) -> int:
        """Messages of socket ``seq`` in ``ledger``'s ``delivered``."""
        with self._cond:
            return sum(1 for delivery in ledger.delivered if delivery.frame.link_seq == seq)

    def take_delivered_of(self, ledger: ConsumerLedger) -> List[Delivery]:
        """``ledger``'s delivered messages, taken out of it."""
        with self._cond:
            return ledger.take_delivered()

    def restore_delivered(self, ledger: ConsumerLedger, deliveries: List[Delivery]) -> None:
        """``deliveries`` go back in front of ``ledger``'s ``delivered`` (see :func:`give_back`)."""
        with self._cond:
            ledger.delivered[:0] = deliveries

    def take_delivered(self, also_deferred: bool = False) -> List[Tuple["ConsumerCore", List[Delivery]]]:
        """Each open consumer's delivered messages (``also_deferred``: and those of the
        consumers whose close waits for the transaction), for those that had some,
        taken out of their ledgers (see :meth:`ConsumerLedger.take_delivered`)."""
        with self._cond:
            work = []
            for consumer in (self._all_consumers() if also_deferred else self.consumers):
                deliveries = consumer.ledger.take_delivered()
                if deliveries:
                    work.append((consumer, deliveries))
        return work

    def delivered_counts(self) -> List[Tuple["ConsumerCore", int]]:
        """How many delivered messages each consumer (open, or its close deferred) holds."""
        with self._cond:
            return [(consumer, len(consumer.ledger.delivered)) for consumer in self._all_consumers()]

    def delivered_any(self, predicate: Callable[[Delivery], bool]) -> bool:
        """Whether ``predicate`` (it only reads) holds for a delivered message of a
        consumer (open, or its close deferred)."""
        with self._cond:
            return any(predicate(delivery) for consumer in self._all_consumers()
                       for delivery in consumer.ledger.delivered)

    def cover_in_transaction(self, tx: str, consumers: List["ConsumerCore"]) -> List[Tuple[Frame, int]]:
        """An ACK in ``tx`` (open) is to cover each of ``consumers``' deliveries not
        covered yet: they move, in one step, from its ``delivered`` into the
        connection's transaction table (owner :data:`CONSUMED`; given back by
        :func:`give_back` on ABORT). Returns, for each consumer that had some, the
        frame its ACK names (the newest) and how many it covers; nothing when ``tx``
        is not open (the deliveries stay pending for the next transaction's ACK)."""
        client = self.connection.consumer_link.client
        client.give_back.setdefault(CONSUMED, give_back)
        acks = []
        with self._cond:
            for consumer in consumers:
                taken = consumer.ledger.delivered
                if not taken or not client.transaction_took(tx, CONSUMED, [(self, consumer, taken)]):
                    continue
                consumer.ledger.delivered = []
                acks.append((taken[-1].frame, len(taken)))
        return acks
