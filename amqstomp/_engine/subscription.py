"""Consumer flow control of one connection: the glue between the transport's
threads and the pure per-subscription windows of :mod:`amqstomp.flow`, whose
decisions the acknowledgement core (:mod:`amqstomp._core.acks`) takes, under
the subscription's lock, with the time the driver reads; the actions they
return are applied to the driver by :class:`amqstomp._engine.applier.SubscriptionApplier`
(pause/resume of reading, the flush timer, the ACK writes, the slow-consumer
event, the poison frame, a local redelivery), never here.

Three of the transport's threads call in; a lock per subscription keeps each window consistent:

* reader thread, every MESSAGE (:meth:`SubscriptionManager.on_message`): count it delivered; stop
  reading the socket when the local buffer is full (TCP back-pressure), tell listeners once when the
  consumer turns slow (pending > 2 x prefetch, ActiveMQ's definition: a typed
  :class:`~amqstomp._core.events.SlowConsumer` event, stomp.py's ``on_slow_consumer(info)``);
  then queue it for the listeners.
* dispatching thread, after every listener returned (:meth:`on_consumed`): count it consumed; send
  the ACK the window decides (optimizeAcknowledge: one cumulative ACK per batch); resume reading
  once the buffer drained to half.
* timer thread (:meth:`_on_timer`): the ACK of a batch left short by a timer
  (optimizeAcknowledgeTimeOut, the scheduled interval, the idle flush).

A message is acked only after the application had it (at-least-once): the window sees it consumed
after the listeners returned. What a failed listener means (local redelivery, then poison) is the
settlement core's (:mod:`amqstomp._core.settle`); no ACK goes past a message awaiting redelivery.
``subscribe``'s own keywords (never sent as headers): :data:`amqstomp.protocol.RESERVED_KEYWORDS`.
"""
import logging
import threading
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Tuple

from .. import _observe
from ..flow import MessageAudit, PrefetchPolicy, RedeliveryPolicy, SubscriptionWindow
from .applier import SubscriptionApplier
from .ports import TransportPort
from .._unacked import UNACKED_MAX, UnackedMessages
from .._duplicates import DuplicateAudits
from .._unknown_ids import DELIVER_NOT_MADE_HERE, DROP_UNKNOWN, UnknownSubscriptions
from .._core.frames import ack_identity
from .._core import acks
from .._core.acks import PAUSE, TURNED_SLOW, Acking, application_acks
from .._core.settle import CONSUMED, Poison, after_failure, first_delivery_count, listener_failed, next_redelivery
from .._core.subscriptions import subscribe_plan, subscribe_request, unregistered_window

log = logging.getLogger("amqstomp.subscription")

__all__ = ["Subscription", "SubscriptionManager"]

_OWNER_PURGE_AT = 50000


class Subscription(Acking):
    """One subscription of a connection: what was sent (for a later replay), its
    window and the state the acknowledgement rules keep (:class:`amqstomp._core.acks.Acking`),
    its lock and flush timer."""

    __slots__ = ("id", "destination", "ack", "headers", "lock", "timer", "redelivery_policy", "make_window",
                 "app_acked", "unacked", "settled")

    def __init__(self, id: str, destination: str, ack: str, headers: Dict[str, Any],
                 window: SubscriptionWindow, redelivery_policy: RedeliveryPolicy,
                 make_window: Optional[Callable[[], SubscriptionWindow]] = None) -> None:
        Acking.__init__(self, window)
        self.id = id
        self.make_window = make_window  # a fresh window like this one (for a replay on a new socket)
        self.destination = destination
        self.ack = ack
        self.headers = headers
        self.lock = threading.Lock()
        self.timer: Any = None
        self.redelivery_policy = redelivery_policy
        # the application acknowledges (not auto, not optimize_acknowledge): identities of the
        # messages delivered and not acknowledged yet, in delivery order (see check_ack)
        self.app_acked = application_acks(ack, window.optimize_acknowledge)
        self.unacked: Deque[Tuple[str, ...]] = deque()
        self.settled: Any = None  # its SettledAudit (amqstomp._duplicates), None: duplicates not checked

    def __repr__(self) -> str:
        return "Subscription(id=%r, destination=%r, ack=%r, %r)" % (self.id, self.destination, self.ack, self.window)


class SubscriptionManager(UnackedMessages, DuplicateAudits, UnknownSubscriptions):
    """The subscriptions of one connection and their flow control (see the module docstring).

    Args:
        transport: the connection's :class:`amqstomp.transport.Transport`.
        deliver (callable | None): the dispatch policy, ``deliver(frame)`` for each
            MESSAGE flow control lets through (reader or timer thread; must not
            block): ``transport.deliver_message`` when None (the stomp.py API: the
            listeners, on the link's dispatching thread), or the JMS connection's
            route to its sessions' executors.
        prefetch_policy (PrefetchPolicy | None): prefetch sizes the windows assume
            when a subscription names none (ActiveMQ 5.17's defaults).
        audit_depth (int): message-ids per subscription the duplicate audit
            remembers (ActiveMQ's default 2048); it outlives reconnects, so a
            message seen again gets ``frame.delivery_count > 1``. 0 turns it off.
        redelivery_policy (RedeliveryPolicy | None): local redelivery of messages
            whose listener raised (``org.apache.activemq.RedeliveryPolicy`` defaults).
        check_for_duplicates (bool): suppress deliveries of messages settled here
            before (:mod:`amqstomp._core.duplicates`; ``audit_depth`` ids per audit).
    """

    def __init__(self, transport: TransportPort, prefetch_policy: Optional[PrefetchPolicy] = None,
                 audit_depth: int = 2048, redelivery_policy: Optional[RedeliveryPolicy] = None,
                 track_acks: bool = False, deliver: Optional[Callable[[Any], None]] = None,
                 drop_unknown: bool = False, check_for_duplicates: bool = False) -> None:
        self.transport = transport
        self._init_unknown(drop_unknown)
        #: where MESSAGEs go once counted (the dispatch policy, see ``deliver``)
        self.deliver: Callable[[Any], None] = deliver if deliver is not None else transport.deliver_message
        # track_acks (the stomp.py API, whose application names what it ACKs): the identities of delivered,
        # unacknowledged messages of app-acked subscriptions; an ACK/NACK of another is refused (check_ack)
        self._init_unacked(track_acks)
        self._init_duplicates(check_for_duplicates, audit_depth)
        self.prefetch_policy = prefetch_policy or PrefetchPolicy()
        self.redelivery_policy = redelivery_policy or RedeliveryPolicy()
        self.audit = MessageAudit(audit_depth) if audit_depth else None
        self._subs: Dict[str, Subscription] = {}
        # frames between the reader and the application: id(frame) -> (subscription, body bytes, place in
        # its dispatch order); set by the reader, popped by the dispatcher (single dict operations, atomic)
        self._owner: Dict[int, Tuple[Subscription, int, int]] = {}
        #: the one applier of the core's actions to ``transport`` (its clock, pause/resume, timers, ACK writes)
        self.applier = SubscriptionApplier(transport, self._on_timer)
        self._clock = self.applier.clock  # its clock (s): now_ms for a subscription that batches (Acking.clocked)
        self._unregistered = self._unregistered_sub()

    def _unregistered_sub(self) -> Subscription:
        """The one window bounding the MESSAGEs of every subscription not made here
        (:func:`amqstomp._core.subscriptions.unregistered_window`); no ACK is decided for them."""
        return Subscription("", "", "auto", {}, unregistered_window(), self.redelivery_policy)

    # ------------------------------------------------------------------ setup

    def get(self, id: Any) -> Optional[Subscription]:
        return self._subs.get(str(id))

    def __len__(self) -> int:
        return len(self._subs)

    def _server(self, wait_timeout: Optional[float]) -> Optional[str]:
        """The broker's CONNECTED ``server``, waiting up to ``wait_timeout`` s for
        CONNECTED on an open socket that has not had it yet (None: not known)."""
        if self.transport.server is None and self.transport.is_open():
            self.transport.wait_connected(wait_timeout)
        server: Optional[str] = self.transport.server
        return server

    def prepare(self, destination: str, id: Any, ack: str, headers: Dict[str, Any],
                options: Mapping[str, Any], wait_timeout: Optional[float] = None) -> Tuple[Dict[str, Any], Subscription]:
        """Build the SUBSCRIBE headers and register the subscription (before the
        frame is sent: messages may follow it at once). The headers and the
        window are the pure core's decision (:func:`amqstomp._core.subscriptions.subscribe_request`,
        then :func:`~amqstomp._core.subscriptions.subscribe_plan`), the one
        place every API's SUBSCRIBE is prepared; this applies it, waiting up to
        ``wait_timeout`` s for CONNECTED when the decision needs the broker.

        ``destination`` may carry ActiveMQ consumer options
        (``/queue/a?consumer.prefetchSize=10``), which become ``activemq.*``
        headers (``x-*`` options pass through as headers of their name: RabbitMQ's
        queue arguments); ``options`` holds :data:`amqstomp._core.subscriptions.SUBSCRIBE_OPTIONS`
        values. Broker-specific headers are added only when asked for, and only
        when the broker dialect (:mod:`amqstomp._core.dialect`: CONNECTED's
        ``server``, or the ``broker`` option) is the broker they are for.

        Returns:
            (headers of the SUBSCRIBE frame, the Subscription).

        Raises:
            ConfigurationError: unknown ack mode or destination option; a bad
                option value; optimize_acknowledge without ``ack='client'``;
                prefetch 0 on ActiveMQ (it delivers nothing over STOMP) or on
                RabbitMQ (no limit at all), a prefetch outside 0 .. 2**31-1, or
                on a broker without a prefetch header; ActiveMQ options on
                another broker; a ``selector`` on a broker that ignores it
                (RabbitMQ). The message names the broker.
            ValueError: a subscription with this id exists already.
        """
        sub_id = str(id)
        if sub_id in self._subs:
            raise ValueError("subscription id %r is in use on this connection; unsubscribe it first" % sub_id)
        request = subscribe_request(destination, id, ack, headers, options, self.redelivery_policy)
        server = self._server(wait_timeout) if request.needs_broker else self.transport.server
        plan = subscribe_plan(request, self.transport.dialect, server, self.prefetch_policy)
        sub = Subscription(sub_id, plan.name, ack, plan.headers, plan.window, plan.redelivery_policy, plan.new_window)
        sub.settled = self._settled_audit(plan.name, sub_id, plan.browser)
        self._subs[sub_id] = sub
        return plan.headers, sub

    def discard(self, id: Any) -> None:
        """Forget a subscription whose SUBSCRIBE could not be sent."""
        sub = self._subs.pop(str(id), None)
        if sub is not None:
            self._retire(sub)

    def close(self, id: Any, write_timeout: Optional[float] = None) -> None:
        """Before UNSUBSCRIBE: send the ACK of what was consumed and not yet acked,
        and deliver no more of its queued messages, unless it is ``ack:auto`` (the
        broker redelivers the others; ``auto`` ones were acked at dispatch, and
        those still coming until the broker has the UNSUBSCRIBE are delivered too:
        :meth:`_unknown_verdict`)."""
        sub = self._subs.pop(str(id), None)
        self._unsubscribed(str(id), sub.ack if sub is not None else "")
        if sub is not None:
            with sub.lock:
                token = acks.closing(sub, int(self._clock() * 1000))
            self._retire(sub)
            self._forget_unacked(sub)
            if token is not None:
                self.applier.write_ack(sub, token, write_timeout)

    def close_all(self, write_timeout: Optional[float] = None) -> None:
        """Before DISCONNECT: :meth:`close` every subscription (each ACK write
        bounded by ``write_timeout`` seconds)."""
        for sub_id in list(self._subs):
            self.close(sub_id, write_timeout)

    def reset(self) -> None:
        """A new socket: the old subscriptions (and their un-sent ACKs) are gone with the old one."""
        for sub in list(self._subs.values()):
            self._retire(sub)
        self._subs.clear()
        self._owner.clear()
        self._retire(self._unregistered)
        self._unregistered = self._unregistered_sub()
        self._clear_unacked()

    def renew(self) -> List[Subscription]:
        """A new socket replaces a lost one (failover): every subscription starts
        again with an empty window, same id and headers. What the lost socket
        delivered and nobody acknowledged comes again from the broker; the old
        socket's frames still queued are dropped (client acks) and no ACK is
        ever sent for them on the new socket. Returns the new subscriptions, in
        the order they were made, for the facade to SUBSCRIBE again."""
        fresh: List[Subscription] = []
        self._retire(self._unregistered)  # what the lost socket delivered for it is dropped or passed on
        self._unregistered = self._unregistered_sub()
        for sub_id, old in list(self._subs.items()):
            self._retire(old)
            self._forget_unacked(old)
            window = old.make_window() if old.make_window is not None else old.window
            sub = Subscription(old.id, old.destination, old.ack, old.headers, window,
                               old.redelivery_policy, old.make_window)
            sub.settled = old.settled  # what was settled stays settled
            self._subs[sub_id] = sub
            fresh.append(sub)
        return fresh

    def _is_current(self, sub: Any) -> bool:
        return not sub.closed and self._subs.get(sub.id) is sub

    def _self_acked(self) -> List[str]:
        return [sub.id for sub in list(self._subs.values()) if sub.window.optimize_acknowledge and not sub.closed]

    def _retire(self, sub: Subscription) -> None:
        with sub.lock:
            sub.closed = True
            self.applier.retire(sub)  # frames still queued for it are dropped or passed on by should_dispatch

    # ------------------------------------------------------------------ threads

    def on_message(self, frame: Any) -> None:
        """Reader thread: a MESSAGE arrived."""
        headers = frame.headers
        sub_id = headers.get("subscription")
        message_id = headers.get("message-id")
        if self.audit is not None and message_id is not None:  # only the reader thread touches the audit
            count = self.audit.record((sub_id, message_id))
            if count > 1 or "redelivered" in headers:  # (the common first delivery skips the call)
                count = first_delivery_count(count, headers)
            if count > 1:
                frame.delivery_count = count
        sub = self._subs.get(sub_id) if sub_id is not None else None
        if sub is None:
            verdict = DELIVER_NOT_MADE_HERE
            if self._drop_unknown and sub_id is not None:
                verdict = self._unknown_verdict(sub_id, message_id)
                if verdict == DROP_UNKNOWN:
                    return
            if verdict == DELIVER_NOT_MADE_HERE and self._unacked_complete:
                self._unacked_complete = False  # a subscription not made here (no id, a raw SUBSCRIBE)
            sub = self._unregistered  # bounded all the same (ack:auto: no ACK is decided for it)
        size = len(frame.body)
        with sub.lock:
            window = sub.window
            now = 0
            if sub.clocked:
                clock = self._clock  # an attribute load: self._clock() would look a method up the MRO first
                now = int(clock() * 1000)
            todo = acks.delivered(sub, now, size)
            if todo & PAUSE:
                self.applier.pause(sub)  # true while the buffer is full (the rest of one recv's frames)
            seq = window.delivered
        if sub.app_acked and self._unacked_complete:
            identity = ack_identity(self.transport.version, headers)
            unacked = self._unacked
            unacked[identity] = sub
            if sub.settled is not None:
                self._unacked_ids[identity] = message_id
            if sub.ack == "client":
                sub.unacked.append(identity)
            if len(unacked) > UNACKED_MAX:  # an application that never acks: stop checking
                self._unacked_complete = False
                unacked.clear()
                self._unacked_ids.clear()
        owner = self._owner
        owner[id(frame)] = (sub, size, seq)
        if len(owner) > _OWNER_PURGE_AT:  # frames of closed subscriptions a JMS session dropped
            for key, entry in list(owner.items()):
                if entry[0].closed:
                    owner.pop(key, None)
        if todo & TURNED_SLOW:  # stomp.py listeners: on_slow_consumer(info); JMS links: LinkObserver.on_slow_consumer
            self.applier.turned_slow(sub)
        self.deliver(frame)


    def subscription_of(self, frame: Any) -> Optional[Subscription]:
        """Dispatcher thread: the subscription a queued MESSAGE was counted in (closed
        since, perhaps), else the open one its ``subscription`` header names, else None."""
        entry = self._owner.get(id(frame))
        return entry[0] if entry is not None else self._subs.get(frame.headers.get("subscription"))

    def drop(self, frame: Any) -> None:
        """Dispatcher thread: a queued MESSAGE is dropped before the listeners (its
        socket was lost: the broker redelivers it; no consumer wants it); forget it.
        One of a subscription not made here leaves the buffer bound's count."""
        entry = self._owner.pop(id(frame), None)
        if entry is not None and entry[0] is self._unregistered:
            self.on_consumed(frame, entry)

    def on_consumed(self, frame: Any, entry: Optional[Tuple[Subscription, int, int]] = None) -> None:
        """Dispatcher thread (or a JMS session's): the application had ``frame``
        (``entry``: its place, taken already by the caller). The acknowledgement
        core decides (:func:`amqstomp._core.acks.consumed`); applied here."""
        if entry is None:
            entry = self._owner.pop(id(frame), None)
            if entry is None:
                return
        sub = entry[0]
        with sub.lock:
            now = 0
            if sub.clocked:
                clock = self._clock  # (see on_message)
                now = int(clock() * 1000)
            if sub.settled is not None and not sub.app_acked:  # the broker's or amqstomp's to ACK: settled
                sub.settled.settled(frame.headers.get("message-id"))
            todo = acks.consumed(sub, frame.headers, entry[2], entry[1], now, sub.timer is not None)
            if todo is None:
                return
            self.applier.apply(sub, todo, now)
        if todo.ack is not None:
            self.applier.write_ack(sub, todo.ack, link_seq=frame.link_seq)

    def application_acked(self, sub: Subscription, cumulative: bool) -> None:
        """JMS API: an ACK of the application's went out: free ``sub``'s window (one; all if ``cumulative``)."""
        with sub.lock:
            sub.window.on_application_ack(cumulative)

    def poisoned(self, sub: Subscription, frame: Any, counted: bool) -> None:
        """Both APIs: ``frame``'s reject (:class:`amqstomp._core.settle.Poison`) was written: count
        it settled (consumed too unless ``counted``), then write the ACK held back for the others, naming
        the newest of them, never ``frame`` (:func:`amqstomp._core.acks.poisoned`)."""
        entry = self._owner.pop(id(frame), None)
        with sub.lock:
            now = int(self._clock() * 1000)
            todo = acks.poisoned(sub, frame.headers.get("message-id"), counted,
                                 entry[1] if entry is not None else 0, now)
            self.applier.apply(sub, todo, now)
        if todo.ack is not None:
            self.applier.write_ack(sub, todo.ack, link_seq=frame.link_seq)

    def on_failed(self, frame: Any, reason: str) -> None:
        """Dispatcher thread: a listener raised for ``frame`` (``reason`` "error"), or none
        was registered ("no listener"): the settlement core's answer applied (``listener_failed``,
        ``after_failure`` of :mod:`amqstomp._core.settle`: where amqstomp ACKs, a local
        redelivery or poison, counted by ``next_redelivery`` of ``frame.delivery_count``, the
        broker's redeliveries included; else the application owns its ACK, as in stomp.py: consumed)."""
        entry = self._owner.get(id(frame))
        if entry is None:
            return
        sub = entry[0]
        if listener_failed(acks.settled_by(sub)) == CONSUMED:
            self.on_consumed(frame, self._owner.pop(id(frame), None) or entry)
            return
        message_id, error = frame.headers.get("message-id"), reason == "error"
        with sub.lock:
            acks.failed(sub, message_id, error)  # no ACK past it until it is consumed or poisoned
        action = after_failure(sub.redelivery_policy, next_redelivery(frame.delivery_count), error,
                               self.transport.version, self.transport.dialect, frame.headers)
        if _observe.messages is not None and (isinstance(action, Poison) or action.redelivered):
            _observe.messages.redelivery(self.transport, frame, isinstance(action, Poison))
        if isinstance(action, Poison):
            log.warning("message %s of subscription %s poisoned: %s (%s: the broker's dead-letter queue)",
                        message_id, sub.id, action.reason, action.command)
            self.applier.poison(action, frame.link_seq)
            self.poisoned(sub, frame, counted=False)  # out of the buffer; ACKs held back for it may go now
            return
        if action.redelivered:  # the application saw it (a listener raised): a redelivery
            frame.headers["redelivered"] = "true"
            frame.delivery_count += 1
        self.applier.redeliver(action, self._redeliver, sub, frame)

    def _redeliver(self, sub: Subscription, frame: Any) -> None:
        if not sub.closed:
            self.deliver(frame)

    def _on_timer(self, sub: Subscription) -> None:
        """Timer thread: a batch deadline passed. The ACK it decides is queued
        without blocking (this thread also runs the heart-beat receive check and
        must never wait on a socket write), still under ``sub.lock``, so that no
        later ACK of the subscription is written before it (a cumulative ACK
        after a newer one would name a message the broker no longer holds)."""
        with sub.lock:
            sub.timer = None
            now = int(self._clock() * 1000)
            todo = acks.timer_due(sub, now)
            if todo is None:
                return
            self.applier.apply(sub, todo, now)
            if todo.ack is not None:
                self.applier.write_ack(sub, todo.ack, nowait=True)
