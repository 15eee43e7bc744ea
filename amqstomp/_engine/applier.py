"""The one place a threaded connection applies the subscription core's actions
to its driver (issue 22, "One core, any driver"): the decisions are the pure
cores' (:mod:`amqstomp._core.acks`: the ``PAUSE`` / ``TURNED_SLOW`` flags and
:class:`~amqstomp._core.acks.AckDue`; :mod:`amqstomp._core.settle`:
:class:`~amqstomp._core.settle.Redeliver` / :class:`~amqstomp._core.settle.Poison`),
taken by :class:`amqstomp._engine.subscription.SubscriptionManager` under the
subscription's lock with the time of this driver's clock (:attr:`SubscriptionApplier.clock`);
what they ask of the driver happens here and nowhere else:

* reading paused and resumed (``pause_reading`` / ``resume_reading``): the set of
  subscriptions whose buffer is full, under its own lock;
* the flush timer armed and cancelled (``call_later``);
* the ACK written, on the socket that delivered the messages it names; the timer
  thread's ACK queued with ``nowait`` (that thread also runs the heart-beat check and
  must never block in a socket write);
* the slow-consumer event posted, the poison frame written, a local redelivery
  scheduled.

Lock order: the subscription's lock (its owner's) -> :attr:`SubscriptionApplier._pause_lock`
-> the transport's own.
"""
import logging
import threading
import time
from typing import Any, Callable, Mapping, Optional, Set

from .. import _observe
from ..exception import NotConnectedException, StompException
from .._core.acks import AckDue
from .._core.dialect import ACTIVEMQ
from .._core.events import SlowConsumer
from .._core.frames import ack_headers
from .._core.settle import Poison, Redeliver
from .ports import TransportPort

log = logging.getLogger("amqstomp.subscription")

__all__ = ["SubscriptionApplier"]

_monotonic = time.monotonic


class SubscriptionApplier:
    """Applies the subscription core's actions of one connection to ``transport``.

    Args:
        transport: the connection's driver (:class:`~amqstomp._engine.ports.TransportPort`).
        on_timer (callable): ``on_timer(sub)``, called on the transport's timer thread
            when a flush deadline armed by :meth:`apply` passed (the owner takes the
            subscription's lock and asks :func:`amqstomp._core.acks.timer_due`).

    A subscription here is the owner's (``amqstomp._engine.subscription.Subscription``):
    this reads its ``id``, ``destination`` and ``window`` and sets its ``timer``;
    the methods marked "under the lock" are called with its lock held.
    """

    __slots__ = ("transport", "on_timer", "clock", "_paused", "_pause_lock")

    def __init__(self, transport: TransportPort, on_timer: Callable[[Any], None]) -> None:
        self.transport = transport
        self.on_timer = on_timer
        #: the driver's clock, monotonic seconds (the timers' clock): the core's rules take
        #: ``int(clock() * 1000)`` as ``now_ms``, read only for a subscription that batches its
        #: ACKs (``Acking.clocked``); the C function itself, called inline on the per-message path
        self.clock: Callable[[], float] = _monotonic
        self._paused: Set[Any] = set()
        self._pause_lock = threading.Lock()

    # Pause and resume of reading are one state under one lock order, so that no
    # wake-up is lost: a window's paused flag changes only under its subscription's
    # lock, and with it (still under that lock) its membership of _paused and the
    # transport's pause/resume call, under _pause_lock. Hence window.paused <=> sub in
    # _paused (while not closed), and the transport is paused <=> _paused is not empty,
    # in the order the decisions were taken.

    def pause(self, sub: Any) -> None:
        """Under the lock: the core's ``PAUSE`` (``sub``'s buffer is full): stop reading the socket."""
        with self._pause_lock:
            self._paused.add(sub)
            self.transport.pause_reading()

    def unpause(self, sub: Any) -> None:
        """Under the lock: ``sub``'s buffer drained (or it closed): read again unless
        another subscription's buffer is still full."""
        with self._pause_lock:
            if sub not in self._paused:
                return
            self._paused.discard(sub)
            if not self._paused:
                self.transport.resume_reading()

    def apply(self, sub: Any, todo: AckDue, now_ms: int) -> None:
        """Under the lock: the resume and the flush timer ``todo`` asks for (its ACK is
        :meth:`write_ack`'s, after the lock, except on the timer thread)."""
        if todo.resume:
            self.unpause(sub)
        if todo.flush_at_ms is not None:
            try:
                sub.timer = self.transport.call_later(max(0, todo.flush_at_ms - now_ms) / 1000.0,
                                                      self.on_timer, sub)
            except NotConnectedException:
                sub.timer = None

    @staticmethod
    def cancel(sub: Any) -> None:
        """Under the lock: ``sub``'s flush timer is not wanted any more."""
        if sub.timer is not None:
            sub.timer.cancel()
            sub.timer = None

    def retire(self, sub: Any) -> None:
        """Under the lock: ``sub`` closed (or its socket was replaced): no timer, no pause of its own."""
        self.cancel(sub)
        self.unpause(sub)

    def write_ack(self, sub: Any, message_headers: Mapping[str, str], write_timeout: Optional[float] = None,
                  link_seq: int = 0, nowait: bool = False) -> None:
        """The ACK the core decided (``AckDue.ack``, or ``acks.closing``'s), naming the MESSAGE
        with ``message_headers``, on socket ``link_seq`` (the one that delivered the messages
        it names; 0: the open one) or not at all; ``nowait``: queued, never blocking
        (``send_frame``'s ``nowait``: the timer thread's). A lost socket is not an error here:
        its un-acked messages go back to the queue (redelivered), and an ACK for them is
        never sent on another connection."""
        transport = self.transport
        headers = ack_headers(transport.version or "1.2", message_headers, transport.dialect == ACTIVEMQ)
        if _observe.messages is not None:
            _observe.settling(sub.window.last_ack_count, message_headers)
        try:
            transport.send_frame("ACK", headers, None, write_timeout, link_seq=link_seq, nowait=nowait)
        except StompException as exc:
            log.debug("ACK not sent: %s", exc)

    def turned_slow(self, sub: Any) -> None:
        """The core's ``TURNED_SLOW``: tell the listeners (a typed
        :class:`~amqstomp._core.events.SlowConsumer`; stomp.py's ``on_slow_consumer(info)``,
        JMS links' ``LinkObserver.on_slow_consumer``)."""
        window = sub.window
        self.transport.post(SlowConsumer({
            "subscription": sub.id, "destination": sub.destination,
            "pending": window.pending, "pending_bytes": window.pending_bytes,
            "prefetch": window.prefetch}))

    def poison(self, action: Poison, link_seq: int) -> None:
        """The settlement core's :class:`~amqstomp._core.settle.Poison`: its reject frame, on
        socket ``link_seq`` (a lost one: not written, the broker redelivers the message)."""
        try:
            self.transport.send_frame(action.command, action.headers, link_seq=link_seq)
        except StompException as exc:
            log.debug("%s not sent: %s", action.command, exc)

    def redeliver(self, action: Redeliver, fn: Callable[..., Any], *args: Any) -> None:
        """The settlement core's :class:`~amqstomp._core.settle.Redeliver`: ``fn(*args)`` on the
        timer thread after ``action.delay_ms`` ms (nothing once the connection is gone:
        the broker redelivers the message)."""
        try:
            self.transport.call_later(action.delay_ms / 1000.0, fn, *args)
        except NotConnectedException:
            pass
