"""Consumer flow control of one connection: the glue between the transport's
threads and the pure per-subscription windows of :mod:`amqstomp.flow`.

The transport calls in from three threads, and a lock per subscription keeps
each window consistent:

* reader thread, every MESSAGE (:meth:`SubscriptionManager.on_message`): count
  it delivered; stop reading the socket when the local buffer is full (TCP
  back-pressure), tell listeners once when the consumer turns slow
  (pending > 2 x prefetch, ActiveMQ's definition); then queue it for the listeners.
* dispatcher thread, after every listener returned (:meth:`on_consumed`): count
  it consumed; send the ACK the window decides (optimizeAcknowledge: one
  cumulative ACK per batch); resume reading once the buffer drained to half.
* timer thread (:meth:`_on_timer`): the ACK of a batch left short by a timer
  (optimizeAcknowledgeTimeOut, the scheduled interval, the idle flush).

A message is acked only after the application had it (at-least-once): the
window sees it consumed after the listeners returned.

Keywords of ``subscribe`` that are amqstomp's own and never sent as headers
are :data:`RESERVED_KEYWORDS`.
"""
import logging
import threading
import time
from typing import Any, Dict, Mapping, MutableMapping, Optional, Tuple

from .exception import ConfigurationError, NotConnectedException, StompException
from .flow import (
    ACK_MODES,
    DEFAULT_ACK_BATCH_CAP,
    MessageAudit,
    PrefetchPolicy,
    SubscriptionWindow,
)
from .uri import destination_kind, parse_destination

log = logging.getLogger("amqstomp.subscription")

__all__ = ["RESERVED_KEYWORDS", "Subscription", "SubscriptionManager", "pop_reserved", "ack_headers"]

#: ``subscribe`` keywords that configure amqstomp and are never sent as headers.
RESERVED_KEYWORDS = (
    "optimize_acknowledge",
    "prefetch_size",
    "ack_batch_cap",
    "optimize_acknowledge_timeout_ms",
    "optimized_ack_scheduled_ack_interval_ms",
    "idle_ack_ms",
    "max_buffered",
)


def pop_reserved(keyword_headers: MutableMapping[str, Any]) -> Dict[str, Any]:
    """Remove amqstomp's own keywords from ``keyword_headers`` and return them."""
    return {name: keyword_headers.pop(name) for name in RESERVED_KEYWORDS if name in keyword_headers}


def ack_headers(version: str, message_headers: Mapping[str, str]) -> Dict[str, str]:
    """Headers of the ACK/NACK of a MESSAGE, per STOMP version (STOMP 1.2 spec "ACK"):
    1.2 ``id`` = the MESSAGE's ``ack`` header; 1.1 ``message-id`` + ``subscription``;
    1.0 ``message-id``."""
    if version == "1.2" and "ack" in message_headers:
        return {"id": message_headers["ack"]}
    if version == "1.0":
        return {"message-id": message_headers["message-id"]}
    return {"message-id": message_headers["message-id"], "subscription": message_headers["subscription"]}


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class Subscription:
    """One subscription of a connection: what was sent (for a later replay) and its window."""

    __slots__ = ("id", "destination", "ack", "headers", "window", "lock", "timer", "slow")

    def __init__(self, id: str, destination: str, ack: str, headers: Dict[str, Any],
                 window: SubscriptionWindow) -> None:
        self.id = id
        self.destination = destination
        self.ack = ack
        self.headers = headers
        self.window = window
        self.lock = threading.Lock()
        self.timer: Any = None
        self.slow = False

    def __repr__(self) -> str:
        return "Subscription(id=%r, destination=%r, ack=%r, %r)" % (self.id, self.destination, self.ack, self.window)


class SubscriptionManager:
    """The subscriptions of one connection and their flow control (see the module docstring).

    Args:
        transport: the connection's :class:`amqstomp.transport.Transport`.
        prefetch_policy (PrefetchPolicy | None): prefetch sizes the windows assume
            when a subscription names none (ActiveMQ 5.17's defaults).
        audit_depth (int): message-ids the duplicate audit remembers (ActiveMQ's
            default 2048); it outlives reconnects, so a message seen again gets
            ``frame.delivery_count > 1``. 0 turns the audit off.
    """

    def __init__(self, transport: Any, prefetch_policy: Optional[PrefetchPolicy] = None,
                 audit_depth: int = 2048) -> None:
        self.transport = transport
        self.prefetch_policy = prefetch_policy or PrefetchPolicy()
        self.audit = MessageAudit(audit_depth) if audit_depth else None
        self._subs: Dict[str, Subscription] = {}
        # closed subscriptions (id -> ack mode) whose queued messages are no longer delivered
        self._closed: Dict[str, str] = {}
        transport.set_message_handler(self.on_message)
        transport.set_consumed_hook(self.on_consumed)
        transport.set_dispatch_filter(self.should_dispatch)

    # ------------------------------------------------------------------ setup

    def get(self, id: Any) -> Optional[Subscription]:
        return self._subs.get(str(id))

    def __len__(self) -> int:
        return len(self._subs)

    def _server(self, wait_timeout: Optional[float]) -> str:
        server = self.transport.server
        if server is None and self.transport.is_open():
            self.transport.wait_connected(wait_timeout)
            server = self.transport.server
        return server or ""

    def prepare(self, destination: str, id: Any, ack: str, headers: Dict[str, Any],
                options: Mapping[str, Any], wait_timeout: Optional[float] = None) -> Tuple[Dict[str, Any], Subscription]:
        """Build the SUBSCRIBE headers and register the subscription (before the
        frame is sent: messages may follow it at once).

        ``destination`` may carry ActiveMQ consumer options
        (``/queue/a?consumer.prefetchSize=10``), which become ``activemq.*``
        headers; ``options`` holds :data:`RESERVED_KEYWORDS` values. Broker-
        specific headers are added only when asked for, and only when the
        CONNECTED frame's ``server`` names the broker they are for.

        Returns:
            (headers of the SUBSCRIBE frame, the Subscription).

        Raises:
            ConfigurationError: unknown ack mode or destination option;
                optimize_acknowledge without ``ack='client'``; prefetch 0 on
                ActiveMQ (it delivers nothing over STOMP); ActiveMQ options on
                another broker.
            ValueError: a subscription with this id exists already.
        """
        sub_id = str(id)
        if sub_id in self._subs:
            raise ValueError("subscription id %r is in use on this connection; unsubscribe it first" % sub_id)
        if ack not in ACK_MODES:
            raise ConfigurationError("ack must be one of %s, got %r" % (", ".join(ACK_MODES), ack))
        name, extra = parse_destination(destination)
        optimize = bool(options.get("optimize_acknowledge", False))
        if optimize and ack != "client":
            raise ConfigurationError(
                "optimize_acknowledge=True needs ack='client' (cumulative ACKs; got ack=%r)" % ack)
        prefetch_size = options.get("prefetch_size")
        if extra or prefetch_size is not None:
            server = self._server(wait_timeout)
            if prefetch_size is not None:
                if isinstance(prefetch_size, bool) or not isinstance(prefetch_size, int) or prefetch_size < 0:
                    raise ConfigurationError("prefetch_size must be an int >= 0, got %r" % (prefetch_size,))
                if server.startswith("ActiveMQ"):
                    extra["activemq.prefetchSize"] = str(prefetch_size)
                elif server.startswith("RabbitMQ"):
                    extra["prefetch-count"] = str(prefetch_size)
                else:
                    raise ConfigurationError("prefetch_size: no known prefetch header for broker %r "
                                             "(ActiveMQ and RabbitMQ have one)" % (server or "unknown",))
            activemq_only = [k for k in extra if k.startswith("activemq.")]
            if activemq_only and not server.startswith("ActiveMQ"):
                raise ConfigurationError("destination options %s are ActiveMQ's; the broker says server=%r"
                                         % (", ".join(sorted(activemq_only)), server))
        frame_headers = dict(headers)
        for key, value in extra.items():
            frame_headers.setdefault(key, value)  # the caller's own header wins
        frame_headers["destination"] = name
        frame_headers["id"] = id
        frame_headers["ack"] = ack
        prefetch = self._prefetch(name, frame_headers)
        if prefetch == 0 and (self.transport.server or "").startswith("ActiveMQ"):
            raise ConfigurationError(
                "prefetch size 0 (pull) delivers nothing over STOMP on ActiveMQ; use 1 and take messages "
                "one at a time (SEEDS 001: consumers that cannot buffer use prefetch 1)")
        window = SubscriptionWindow(
            max(prefetch, 1), ACK_MODES[ack], auto_ack=optimize, optimize_acknowledge=optimize,
            ack_batch_cap=int(options.get("ack_batch_cap", DEFAULT_ACK_BATCH_CAP)),
            optimize_acknowledge_timeout_ms=int(options.get("optimize_acknowledge_timeout_ms", 300)),
            optimized_ack_scheduled_ack_interval_ms=int(options.get("optimized_ack_scheduled_ack_interval_ms", 0)),
            idle_ack_ms=int(options.get("idle_ack_ms", 50)),
            max_buffered=options.get("max_buffered"))
        sub = Subscription(sub_id, name, ack, frame_headers, window)
        self._closed.pop(sub_id, None)
        self._subs[sub_id] = sub
        return frame_headers, sub

    def _prefetch(self, destination: str, headers: Mapping[str, Any]) -> int:
        for key in ("activemq.prefetchSize", "prefetch-count"):
            if key in headers:
                try:
                    return int(headers[key])
                except (TypeError, ValueError):
                    raise ConfigurationError("%s must be an integer, got %r" % (key, headers[key])) from None
        durable = "activemq.subscriptionName" in headers or "durable-subscription-name" in headers
        kind = destination_kind(destination, durable=durable, browser=str(headers.get("browser")) == "true")
        return self.prefetch_policy.prefetch_for(kind)

    def discard(self, id: Any) -> None:
        """Forget a subscription whose SUBSCRIBE could not be sent."""
        sub = self._subs.pop(str(id), None)
        if sub is not None:
            self._cancel(sub)

    def close(self, id: Any, write_timeout: Optional[float] = None) -> None:
        """Before UNSUBSCRIBE: send the ACK of what was consumed and not yet acked,
        and deliver no more of its queued messages, unless it is ``ack:auto`` (the
        broker redelivers the others; ``auto`` ones were acked at dispatch)."""
        sub = self._subs.pop(str(id), None)
        if sub is not None:
            self._closed[sub.id] = sub.ack
            self._flush(sub, write_timeout)

    def close_all(self, write_timeout: Optional[float] = None) -> None:
        """Before DISCONNECT: :meth:`close` every subscription (each ACK write
        bounded by ``write_timeout`` seconds)."""
        for sub_id in list(self._subs):
            self.close(sub_id, write_timeout)

    def reset(self) -> None:
        """A new socket: the old subscriptions (and their un-sent ACKs) are gone with the old one."""
        for sub in self._subs.values():
            self._cancel(sub)
        self._subs.clear()
        self._closed.clear()

    def should_dispatch(self, frame: Any) -> bool:
        """Dispatcher thread: False for a queued MESSAGE of a closed client-ack subscription."""
        if not self._closed:
            return True
        ack = self._closed.get(frame.headers.get("subscription"))
        return ack is None or ack == "auto"

    def _flush(self, sub: Subscription, write_timeout: Optional[float] = None) -> None:
        with sub.lock:
            self._cancel(sub)
            token = sub.window.flush(_now_ms())
        if token is not None:
            self._send_ack(token, write_timeout)

    @staticmethod
    def _cancel(sub: Subscription) -> None:
        if sub.timer is not None:
            sub.timer.cancel()
            sub.timer = None

    # ------------------------------------------------------------------ threads

    def on_message(self, frame: Any) -> None:
        """Reader thread: a MESSAGE arrived."""
        headers = frame.headers
        message_id = headers.get("message-id")
        if self.audit is not None and message_id is not None:  # only the reader thread touches the audit
            count = self.audit.record(message_id)
            if count == 1 and headers.get("redelivered") == "true":
                count = 2
            if count > 1:
                frame.delivery_count = count
        sub = self._subs.get(headers.get("subscription"))
        if sub is not None:
            with sub.lock:
                window = sub.window
                pause = window.on_delivered(_now_ms())
                turned_slow = window.slow_consumer and not sub.slow
                sub.slow = window.slow_consumer
            if pause:
                self.transport.pause_reading()
            if turned_slow:
                self.transport.notify("slow_consumer", {
                    "subscription": sub.id, "destination": sub.destination,
                    "pending": window.pending, "prefetch": window.prefetch})
        self.transport.deliver_message(frame)

    def on_consumed(self, frame: Any) -> None:
        """Dispatcher thread: every listener returned from ``on_message(frame)``."""
        sub = self._subs.get(frame.headers.get("subscription"))
        if sub is None:
            return
        arm = None
        with sub.lock:
            window = sub.window
            if window.consumed >= window.delivered:  # delivered before a reset
                return
            now = _now_ms()
            token = window.on_consumed(frame.headers, now)
            resume = window.should_resume()
            if sub.timer is None:
                arm = window.next_deadline_ms()
                if arm is not None:
                    self._arm(sub, arm, now)
        if token is not None:
            self._send_ack(token)
        if resume:
            self.transport.resume_reading()

    def _arm(self, sub: Subscription, deadline_ms: int, now_ms: int) -> None:
        try:
            sub.timer = self.transport.call_later(max(0, deadline_ms - now_ms) / 1000.0, self._on_timer, sub)
        except NotConnectedException:
            sub.timer = None

    def _on_timer(self, sub: Subscription) -> None:
        """Timer thread: a batch deadline passed."""
        with sub.lock:
            sub.timer = None
            if self._subs.get(sub.id) is not sub:
                return
            now = _now_ms()
            token = sub.window.poll(now)
            deadline = sub.window.next_deadline_ms()
            if deadline is not None:
                self._arm(sub, deadline, now)
        if token is not None:
            self._send_ack(token)

    def _send_ack(self, message_headers: Mapping[str, str], write_timeout: Optional[float] = None) -> None:
        version = self.transport.version or "1.2"
        try:
            self.transport.send_frame("ACK", ack_headers(version, message_headers), None, write_timeout)
        except StompException as exc:
            # the connection is gone: its un-acked messages go back to the queue (redelivered);
            # an ACK for them is never sent on another connection
            log.debug("ACK not sent: %s", exc)
