"""The state a :class:`~amqstomp.jms.Session` shares with its consumers,
producers and browsers: :class:`SessionState` (one per session: its lock and
condition, its members, whether it is closing, whose listener runs) and
:class:`ConsumerLedger` (one per consumer: the messages on their way to the
application, guarded by the session's condition), with :class:`Delivery`, one
MESSAGE in a consumer's hands.

The session, its consumers, producers, browsers and its transaction hold a
reference to the same :class:`SessionState`; they read and change each other's
shared state only through it, never through another object's private
attributes.

Licensed under the Apache License, Version 2.0.
"""
import itertools
import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Deque, List, Optional, Tuple

from ..codec import Frame
from .exceptions import IllegalStateError

if TYPE_CHECKING:  # pragma: no cover - annotations only: these modules import this one
    from ._connection_state import ConnectionState
    from ._producer_flow import ProducerWindow
    from ._transaction import Transaction
    from .browser import QueueBrowser
    from .consumer import ConsumerCore
    from .producer import MessageProducer
    from .session import Session

__all__ = ["Delivery", "ConsumerLedger", "SessionState"]

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
    """A consumer's messages between the socket and the application; every
    attribute is read and written under the session's ``cond``.

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


class SessionState:
    """What a session shares with its consumers, producers, browsers and
    transaction. Lists and flags are guarded by ``cond``.

    Attributes:
        connection (ConnectionState): what the owning connection shares.
        session (Session): the session itself (set by it once made).
        transaction (Transaction): the session's transaction bookkeeping (set by
            the session).
        number (int): the session's number in its connection.
        acknowledge_mode (int), transacted (bool).
        cond (threading.Condition): the session's lock; notified on every change
            a waiter may look for (a message, a close, a listener finished).
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
        self.cond = threading.Condition(threading.Lock())
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

    def enqueue(self, consumer: "ConsumerCore", frame: Frame) -> None:
        """Reader thread: a MESSAGE for ``consumer`` (one of this session's), to
        be handed over by the dispatch thread or ``receive()``."""
        ledger = consumer.ledger
        with self.cond:
            if ledger.closed:
                return
            ledger.buffer.append(Delivery(frame, next(self._seq)))
            self.cond.notify_all()

    def all_consumers(self) -> List["ConsumerCore"]:
        """The open consumers and those whose close waits for the transaction
        (call with ``cond`` held)."""
        return list(self.consumers) + list(self.deferred_close)

    def take_delivered(self) -> List[Tuple["ConsumerCore", List[Delivery]]]:
        """Each open consumer's delivered messages (for those that had some),
        taken out of their ledgers (see :meth:`ConsumerLedger.take_delivered`)."""
        with self.cond:
            work = []
            for consumer in self.consumers:
                deliveries = consumer.ledger.take_delivered()
                if deliveries:
                    work.append((consumer, deliveries))
        return work

    def check_open(self, error: Optional[BaseException] = None) -> None:
        """Raises ``error`` (default: IllegalStateError) when the session is
        closed or closing, and what :meth:`ConnectionState.check_open` raises."""
        if self.closed or self.closing:
            raise error or IllegalStateError("%r is closed" % (self.session,))
        self.connection.check_open()

    def on_session_thread(self) -> bool:
        """True when called from the session's dispatch thread (a listener)."""
        return self.thread is threading.current_thread()

    def wake(self) -> None:
        """Notify every waiter on ``cond`` (the dispatch thread, ``receive()``)."""
        with self.cond:
            self.cond.notify_all()

    def wait_idle(self, consumer: Optional["ConsumerCore"] = None) -> bool:
        """Wait until no listener (of ``consumer``, or any) runs on the session
        thread; at most ``close_timeout_ms`` (False then: two listeners closing
        each other's sessions would otherwise wait for each other forever)."""
        close_timeout_s = self.connection.close_wait_s()
        deadline = time.monotonic() + close_timeout_s
        with self.cond:
            while self.running is not None and (consumer is None or self.running is consumer):
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("%r: a listener still runs after %.1f s; going on without it",
                                self.session, close_timeout_s)
                    return False
                self.cond.wait(min(0.5, left))
        return True
