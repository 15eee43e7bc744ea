# cython: language_level=3, annotation_typing=False
"""Consumer flow control: the one source of both implementations.

This file runs as it is (the pure-Python module ``amqstomp._core._flow_py``) and is
also compiled by Cython, as it is, into the extension ``amqstomp._core._flow``, with
the C types of ``amqstomp/_core/_flow.pxd`` (see setup.py; aiohttp compiles its
``_websocket/reader_py.py`` the same way). :mod:`amqstomp.flow` chooses one.
Annotations are for type checkers only (``annotation_typing=False`` above): the
compiled classes accept the same arguments as the pure ones. In the compiled build
:class:`SubscriptionWindow` and :class:`MessageAudit` are extension types (their
attributes are read-only from Python); the rest are ordinary classes and functions.

Pure computation: no sockets, no threads, no clocks (time comes in as
``now_ms``, a monotonic clock in milliseconds).

What lives here (sources in brackets):

* :class:`PrefetchPolicy` -- prefetch sizes by destination kind, with the
  defaults of ActiveMQ 5.17's ``ActiveMQPrefetchPolicy``.
* :func:`optimized_ack_threshold` -- when a batch of consumed messages is acked
  with one cumulative ACK (``ActiveMQMessageConsumer``'s optimizeAcknowledge:
  0.65 x prefetch), capped for STOMP so ActiveMQ keeps dispatching.
* :class:`SubscriptionWindow` -- per-subscription counts (delivered, consumed,
  acked), the ack decision for each ack mode, the bounded local buffer and the
  slow-consumer test (pending > 2 x prefetch).
* :class:`RedeliveryPolicy` -- delays and the redelivery limit
  (``org.apache.activemq.RedeliveryPolicy`` defaults).
* :class:`MessageAudit` -- a bounded window of message-ids that flags
  duplicates and counts deliveries (like ``ActiveMQMessageAudit``).
* :class:`SettledAudit` -- the bounded set of message-ids a consumer settled,
  asked per MESSAGE by the duplicate rule of :mod:`amqstomp._core.duplicates`.
"""
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Set

__all__ = [
    "ACK_AUTO",
    "ACK_CLIENT",
    "ACK_CLIENT_INDIVIDUAL",
    "ACK_MODES",
    "DEFAULT_ACK_BATCH_CAP",
    "DEFAULT_MAX_BUFFERED_BYTES",
    "OPTIMIZE_ACK_RATIO",
    "PrefetchPolicy",
    "optimized_ack_threshold",
    "SubscriptionWindow",
    "RedeliveryPolicy",
    "MessageAudit",
    "SettledAudit",
]

#: STOMP ``ack:auto``: the broker acks at dispatch (at-most-once).
ACK_AUTO = 0
#: STOMP ``ack:client``: cumulative; on ActiveMQ an ACK acks every earlier message of the subscription.
ACK_CLIENT = 1
#: STOMP ``ack:client-individual``: an ACK acks one message.
ACK_CLIENT_INDIVIDUAL = 2
#: The ``ack`` header value of each mode.
ACK_MODES = {"auto": ACK_AUTO, "client": ACK_CLIENT, "client-individual": ACK_CLIENT_INDIVIDUAL}

#: Java's optimizeAcknowledge ratio (ActiveMQMessageConsumer: 0.65 x prefetch).
OPTIMIZE_ACK_RATIO = 0.65
#: Largest batch acked at once by default: half of ActiveMQ's default queue page size
#: (``maxPageSize`` 200). With no new sends the broker pages the next messages in only
#: when an ACK arrives, so a batch larger than what it paged in waits for its 30 s sweep.
DEFAULT_ACK_BATCH_CAP = 100
#: Default bound of a subscription's local buffer in body bytes.
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024


class PrefetchPolicy:
    """Prefetch sizes (messages) by destination kind.

    Defaults are ActiveMQ 5.17's (``ActiveMQPrefetchPolicy``): queue 1000, queue
    browser 500, durable topic subscriber 100, topic 32767. URI options
    ``jms.prefetchPolicy.all|queuePrefetch|queueBrowserPrefetch|
    durableTopicPrefetch|topicPrefetch`` map onto the keywords here.

    Args:
        all (int | None): when given, sets every kind to it.

    Raises:
        ValueError: a negative size.
    """

    KINDS = ("queue", "queue-browser", "durable-topic", "topic")

    def __init__(self, queue_prefetch: int = 1000, queue_browser_prefetch: int = 500,
                 durable_topic_prefetch: int = 100, topic_prefetch: int = 32767,
                 all: Optional[int] = None) -> None:
        if all is not None:
            queue_prefetch = queue_browser_prefetch = durable_topic_prefetch = topic_prefetch = all
        self._sizes: Dict[str, int] = {}
        for kind, size in zip(self.KINDS, (queue_prefetch, queue_browser_prefetch,
                                           durable_topic_prefetch, topic_prefetch)):
            self._sizes[kind] = _check_prefetch(size, kind)

    @property
    def queue_prefetch(self) -> int:
        return self._sizes["queue"]

    @property
    def queue_browser_prefetch(self) -> int:
        return self._sizes["queue-browser"]

    @property
    def durable_topic_prefetch(self) -> int:
        return self._sizes["durable-topic"]

    @property
    def topic_prefetch(self) -> int:
        return self._sizes["topic"]

    def prefetch_for(self, kind: str) -> int:
        """Prefetch size for ``kind``: ``"queue"``, ``"queue-browser"``,
        ``"durable-topic"`` or ``"topic"``. Raises ValueError for another kind."""
        try:
            return self._sizes[kind]
        except KeyError:
            raise ValueError("unknown destination kind %r (expected one of %s)"
                             % (kind, ", ".join(self.KINDS))) from None

    def __repr__(self) -> str:
        return "PrefetchPolicy(%s)" % ", ".join("%s=%d" % kv for kv in self._sizes.items())


def _check_prefetch(size: Any, what: str) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError("prefetch size for %s must be an int >= 0, got %r" % (what, size))
    return size


def optimized_ack_threshold(prefetch: int, ratio: float = OPTIMIZE_ACK_RATIO,
                            cap: int = DEFAULT_ACK_BATCH_CAP) -> int:
    """Consumed-but-unacked messages that trigger one cumulative ACK.

    ``max(1, min(int(ratio * prefetch), cap))``: Java's 0.65 x prefetch keeps
    the batch below the prefetch (a batch above it would stop delivery after
    ``prefetch`` messages); the cap keeps it below what ActiveMQ pages into
    memory at once (``maxPageSize``, 200 by default). Raise ``cap`` only for a
    broker with a larger page size.

    Raises:
        ValueError: prefetch < 1, ratio not in (0, 1], cap < 1.
    """
    if prefetch < 1:
        raise ValueError("optimizeAcknowledge needs prefetch >= 1, got %r" % (prefetch,))
    if not 0 < ratio <= 1:
        raise ValueError("optimize acknowledge ratio must be in (0, 1], got %r" % (ratio,))
    if cap < 1:
        raise ValueError("ack batch cap must be >= 1, got %r" % (cap,))
    return max(1, min(int(ratio * prefetch), cap))


class SubscriptionWindow:
    """Flow-control state of one subscription.

    Counts (messages): ``delivered`` (MESSAGE frames received), ``consumed``
    (handed to the application and returned from it), ``acked`` (covered by an
    ACK sent, or by the broker for ``ack:auto``); ``pending = delivered -
    consumed`` (in the local buffer), ``unacked = consumed - acked``.

    The caller reports events and gets decisions back:

    * ``on_delivered(now_ms) -> bool``: True when the local buffer is full and
      the reader should stop reading the socket (TCP back-pressure).
    * ``on_consumed(ack_id, now_ms)``: the ack id to send now, or None. ``ack:client``
      with optimizeAcknowledge returns the newest ack id once ``threshold``
      messages are unacked (one cumulative ACK covers them all);
      ``client-individual`` (automatic) returns every message's own ack id;
      ``ack:auto`` and manual ``client`` return None.
    * ``poll(now_ms)``: the ack id to send because a timer fired, or None:
      ``optimize_acknowledge_timeout_ms`` since the last ACK, the scheduled
      interval, or ``idle_ack_ms`` without a delivery.
    * ``next_deadline_ms()``: when ``poll`` may next have something, or None.
    * ``flush()``: the ack id covering everything consumed (on close), or None.

    Args:
        prefetch (int): the subscription's prefetch size (messages, >= 1).
        ack_mode (int): ``ACK_AUTO``, ``ACK_CLIENT`` or ``ACK_CLIENT_INDIVIDUAL``.
        auto_ack (bool): the library sends the ACKs (after the application had the
            message); False leaves ``client``/``client-individual`` ACKs to the
            application, as stomp.py does.
        optimize_acknowledge (bool): batch cumulative ACKs (``ack:client`` only).
        ack_batch_cap (int): upper bound of a batch, see :func:`optimized_ack_threshold`.
        optimize_acknowledge_timeout_ms (int): ack what is unacked once this long
            has passed since the last ACK (ActiveMQ's optimizeAcknowledgeTimeOut, 300).
        optimized_ack_scheduled_ack_interval_ms (int): ack what is unacked every
            interval; 0 = off (ActiveMQ's optimizedAckScheduledAckInterval).
        idle_ack_ms (int): ack what is unacked when no message arrived for this
            long (50); keeps a consumer whose share of a page is below the batch size
            from waiting for the broker's 30 s sweep.
        max_buffered (int | None): local buffer bound (messages); default
            ``prefetch`` for ``ack:auto`` (the broker no longer limits what it
            pushes) and ``2 x prefetch + 1`` for client modes (the broker does; an
            ACK sent from inside a listener lets it send ``prefetch`` more while
            that message is still held), capped at 10,000.
        max_buffered_bytes (int): local buffer bound in body bytes (64 MiB); 0 = none.
            ``on_delivered`` asks to pause at either bound, and ``should_resume()``
            says when pending is back at or below half of both.

    Raises:
        ValueError: bad arguments (named in the message).
    """

    def __init__(self, prefetch: int, ack_mode: int = ACK_AUTO, auto_ack: bool = True,
                 optimize_acknowledge: bool = False, ack_batch_cap: int = DEFAULT_ACK_BATCH_CAP,
                 optimize_acknowledge_timeout_ms: int = 300,
                 optimized_ack_scheduled_ack_interval_ms: int = 0,
                 idle_ack_ms: int = 50, max_buffered: Optional[int] = None,
                 max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES) -> None:
        if ack_mode not in (ACK_AUTO, ACK_CLIENT, ACK_CLIENT_INDIVIDUAL):
            raise ValueError("ack_mode must be ACK_AUTO, ACK_CLIENT or ACK_CLIENT_INDIVIDUAL, got %r"
                             % (ack_mode,))
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError("prefetch must be an int >= 1, got %r" % (prefetch,))
        if optimize_acknowledge and ack_mode != ACK_CLIENT:
            raise ValueError("optimize_acknowledge needs ack mode 'client' (cumulative ACKs)")
        for name, value in (("optimize_acknowledge_timeout_ms", optimize_acknowledge_timeout_ms),
                            ("optimized_ack_scheduled_ack_interval_ms", optimized_ack_scheduled_ack_interval_ms),
                            ("idle_ack_ms", idle_ack_ms)):
            if not isinstance(value, int) or value < 0:
                raise ValueError("%s must be an int >= 0 (ms), got %r" % (name, value))
        if max_buffered is None:
            # ack:auto: the broker stops counting at dispatch, so the buffer bound is ours;
            # client modes: the broker never has more than `prefetch` out, so never pause then
            max_buffered = min(prefetch if ack_mode == ACK_AUTO else 2 * prefetch + 1, 10000)
        if isinstance(max_buffered, bool) or not isinstance(max_buffered, int) or max_buffered < 1:
            raise ValueError("max_buffered must be an int >= 1, got %r" % (max_buffered,))
        if isinstance(max_buffered_bytes, bool) or not isinstance(max_buffered_bytes, int) or max_buffered_bytes < 0:
            raise ValueError("max_buffered_bytes must be an int >= 0, got %r" % (max_buffered_bytes,))
        self.prefetch = prefetch
        self.ack_mode = ack_mode
        # the mode's tests on the per-message path, made once (flags, not module-global
        # lookups, in the compiled build)
        self._broker_acks = ack_mode == ACK_AUTO
        self._individual = ack_mode == ACK_CLIENT_INDIVIDUAL
        self.auto_ack = bool(auto_ack) and ack_mode != ACK_AUTO
        self.optimize_acknowledge = bool(optimize_acknowledge) and self.auto_ack
        self.threshold = (optimized_ack_threshold(prefetch, OPTIMIZE_ACK_RATIO, ack_batch_cap)
                          if self.optimize_acknowledge else 1)
        self.optimize_acknowledge_timeout_ms = optimize_acknowledge_timeout_ms
        self.optimized_ack_scheduled_ack_interval_ms = optimized_ack_scheduled_ack_interval_ms
        self.idle_ack_ms = idle_ack_ms
        self.max_buffered = max_buffered
        self.max_buffered_bytes = max_buffered_bytes
        self.pending_bytes = 0
        self.delivered = 0
        self.consumed = 0
        self.acked = 0
        self.acks_sent = 0
        self.last_ack_count = 0  # messages the last ACK decided here covers (an instrumentation's batch size)
        self._last_ack_id: Any = None
        self._last_ack_ms = -1
        self._last_delivery_ms = -1
        self._paused = False

    @property
    def pending(self) -> int:
        """Messages delivered but not yet consumed (in the local buffer)."""
        return self.delivered - self.consumed

    @property
    def unacked(self) -> int:
        """Messages consumed but not yet covered by an ACK."""
        return self.consumed - self.acked

    @property
    def slow_consumer(self) -> bool:
        """True when more than 2 x prefetch messages wait in the buffer (ActiveMQ's
        definition), or the buffer is full (reading is paused)."""
        return self._paused or self.delivered - self.consumed > 2 * self.prefetch

    @property
    def paused(self) -> bool:
        """True between an ``on_delivered`` that asked to pause and ``should_resume``."""
        return self._paused

    def on_delivered(self, now_ms: int, nbytes: int = 0) -> bool:
        """A MESSAGE (of ``nbytes`` body bytes) arrived. Returns True when the
        reader should stop reading."""
        self.delivered += 1
        self._last_delivery_ms = now_ms
        if self._last_ack_ms < 0:
            self._last_ack_ms = now_ms
        if self._broker_acks:
            self.acked += 1  # the broker acked it at dispatch
        self.pending_bytes += nbytes
        if (self.delivered - self.consumed >= self.max_buffered
                or (self.max_buffered_bytes and self.pending_bytes >= self.max_buffered_bytes)):
            self._paused = True
        return self._paused

    def should_resume(self) -> bool:
        """True (once) when a paused reader may read again: pending at or below half
        of ``max_buffered`` and of ``max_buffered_bytes``."""
        if (self._paused and self.delivered - self.consumed <= self.max_buffered // 2
                and self.pending_bytes <= self.max_buffered_bytes // 2):
            self._paused = False
            return True
        return False

    def on_consumed(self, ack_id: Any, now_ms: int, nbytes: int = 0) -> Any:
        """The application had the message (of ``nbytes`` body bytes) whose ack id
        (STOMP 1.2 ``ack`` header, or message-id before 1.2) is ``ack_id``.
        Returns the ack id to send, or None."""
        if self.consumed >= self.delivered:
            raise ValueError("on_consumed without a matching on_delivered (consumed=%d, delivered=%d)"
                             % (self.consumed, self.delivered))
        self.consumed += 1
        self.pending_bytes -= nbytes
        if self._broker_acks:
            return None
        self._last_ack_id = ack_id
        if not self.auto_ack:
            return None
        if self._individual or not self.optimize_acknowledge:
            return self._sent(now_ms, 1)
        unacked = self.consumed - self.acked
        if unacked >= self.threshold:
            return self._sent(now_ms, unacked)
        if (self.optimize_acknowledge_timeout_ms
                and now_ms - self._last_ack_ms >= self.optimize_acknowledge_timeout_ms):
            return self._sent(now_ms, unacked)
        return None

    def on_application_ack(self, cumulative: bool = True) -> None:
        """The application sent an ACK itself (manual ``client`` or ``client-individual``)."""
        if cumulative and self.ack_mode == ACK_CLIENT:
            self.acked = self.consumed
        elif self.acked < self.consumed:
            self.acked += 1

    def _sent(self, now_ms: int, count: int) -> Any:
        self.acked += count
        self.acks_sent += 1
        self.last_ack_count = count
        self._last_ack_ms = now_ms
        return self._last_ack_id

    def poll(self, now_ms: int) -> Any:
        """Timer check: the ack id to send now, or None."""
        unacked = self.consumed - self.acked
        if unacked <= 0 or not self.optimize_acknowledge:
            return None
        since_ack = now_ms - self._last_ack_ms
        if self.optimize_acknowledge_timeout_ms and since_ack >= self.optimize_acknowledge_timeout_ms:
            return self._sent(now_ms, unacked)
        interval = self.optimized_ack_scheduled_ack_interval_ms
        if interval and since_ack >= interval:
            return self._sent(now_ms, unacked)
        if self.idle_ack_ms and now_ms - self._last_delivery_ms >= self.idle_ack_ms:
            return self._sent(now_ms, unacked)
        return None

    def next_deadline_ms(self) -> Optional[int]:
        """Monotonic ms at which ``poll`` may next return an ack id, or None."""
        if self.consumed - self.acked <= 0 or not self.optimize_acknowledge:
            return None
        best = -1
        if self.optimize_acknowledge_timeout_ms:
            best = self._last_ack_ms + self.optimize_acknowledge_timeout_ms
        interval = self.optimized_ack_scheduled_ack_interval_ms
        if interval:
            at = self._last_ack_ms + interval
            best = at if best < 0 or at < best else best
        if self.idle_ack_ms:
            at = self._last_delivery_ms + self.idle_ack_ms
            best = at if best < 0 or at < best else best
        return None if best < 0 else best

    def flush(self, now_ms: int = 0) -> Any:
        """Ack id covering every consumed message not yet acked, or None (on close).
        Only for library-sent cumulative ACKs (optimizeAcknowledge)."""
        unacked = self.consumed - self.acked
        if unacked <= 0 or not self.optimize_acknowledge:
            return None
        return self._sent(now_ms, unacked)

    def reset(self) -> None:
        """Forget every count (the subscription was replayed on a new connection)."""
        self.delivered = self.consumed = self.acked = self.pending_bytes = 0
        self._last_ack_id = None
        self._last_ack_ms = self._last_delivery_ms = -1
        self._paused = False

    def __repr__(self) -> str:
        return ("SubscriptionWindow(prefetch=%d, ack_mode=%d, delivered=%d, consumed=%d, acked=%d, "
                "threshold=%d)" % (self.prefetch, self.ack_mode, self.delivered, self.consumed,
                                   self.acked, self.threshold))


class RedeliveryPolicy:
    """When and how often a message the client rolls back is redelivered
    (``org.apache.activemq.RedeliveryPolicy``; the defaults are its own).

    Args:
        maximum_redeliveries (int): redeliveries before the message is poisoned
            (sent to the DLQ with a NACK on ActiveMQ); -1 = no limit.
        initial_redelivery_delay_ms (int): delay before the first redelivery.
        redelivery_delay_ms (int | None): delay between later redeliveries
            without back-off (default: the initial delay).
        use_exponential_back_off (bool): multiply the delay each time.
        back_off_multiplier (float): the multiplier (5).
        maximum_redelivery_delay_ms (int): upper bound of the delay; -1 = none.

    Raises:
        ValueError: a negative delay, a multiplier < 1, maximum_redeliveries < -1.
    """

    def __init__(self, maximum_redeliveries: int = 6, initial_redelivery_delay_ms: int = 1000,
                 redelivery_delay_ms: Optional[int] = None, use_exponential_back_off: bool = False,
                 back_off_multiplier: float = 5.0, maximum_redelivery_delay_ms: int = -1) -> None:
        if maximum_redeliveries < -1:
            raise ValueError("maximum_redeliveries must be >= -1, got %r" % (maximum_redeliveries,))
        if initial_redelivery_delay_ms < 0:
            raise ValueError("initial_redelivery_delay_ms must be >= 0, got %r" % (initial_redelivery_delay_ms,))
        if redelivery_delay_ms is None:
            redelivery_delay_ms = initial_redelivery_delay_ms
        if redelivery_delay_ms < 0:
            raise ValueError("redelivery_delay_ms must be >= 0, got %r" % (redelivery_delay_ms,))
        if back_off_multiplier < 1:
            raise ValueError("back_off_multiplier must be >= 1, got %r" % (back_off_multiplier,))
        self.maximum_redeliveries = maximum_redeliveries
        self.initial_redelivery_delay_ms = initial_redelivery_delay_ms
        self.redelivery_delay_ms = redelivery_delay_ms
        self.use_exponential_back_off = use_exponential_back_off
        self.back_off_multiplier = back_off_multiplier
        self.maximum_redelivery_delay_ms = maximum_redelivery_delay_ms

    def delay_ms(self, redelivery: int) -> int:
        """Delay (ms) before redelivery number ``redelivery`` (1 = the first)."""
        if redelivery < 1:
            return 0
        delay = float(self.initial_redelivery_delay_ms)
        if redelivery > 1:
            if self.use_exponential_back_off:
                start = delay if delay > 0 else float(self.redelivery_delay_ms)
                delay = start * self.back_off_multiplier ** (redelivery - 1)
            else:
                delay = float(self.redelivery_delay_ms)
        if self.maximum_redelivery_delay_ms >= 0:
            delay = min(delay, float(self.maximum_redelivery_delay_ms))
        return int(delay)

    def exceeded(self, redelivery: int) -> bool:
        """True when redelivery number ``redelivery`` is past the limit (poison the message)."""
        return self.maximum_redeliveries >= 0 and redelivery > self.maximum_redeliveries


class MessageAudit:
    """Bounded window of recently seen message-ids (like ``ActiveMQMessageAudit``).

    ``record(message_id) -> int`` returns how many times the id was seen within
    the window (1 = first time); ``is_duplicate(message_id)`` records and
    returns ``record(...) > 1``. The oldest ids fall out after ``depth`` distinct ids.

    Raises:
        ValueError: depth < 1.
    """

    def __init__(self, depth: int = 2048) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError("audit depth must be an int >= 1, got %r" % (depth,))
        self.depth = depth
        self._seen: "OrderedDict[Any, int]" = OrderedDict()

    def record(self, message_id: Any) -> int:
        seen = self._seen
        count = seen.get(message_id, 0) + 1
        seen[message_id] = count
        if count == 1 and len(seen) > self.depth:
            seen.popitem(last=False)
        return count

    def is_duplicate(self, message_id: Any) -> bool:
        return self.record(message_id) > 1

    def forget(self, message_id: Any) -> None:
        """Drop an id (a message rolled back for redelivery is not a duplicate)."""
        self._seen.pop(message_id, None)

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, message_id: Any) -> bool:
        return message_id in self._seen


class SettledAudit:
    """The message ids a consumer settled, the newest ``depth`` of them: the set the
    duplicate rule (:mod:`amqstomp._core.duplicates`) asks, per MESSAGE, with ``in``.
    A ring of ``depth`` slots names the ids in the order they were settled; the oldest
    leaves the set when the ring comes round to its slot (an id forgotten and settled
    again has two slots and leaves at the first: it is kept a shorter time, never longer).

    Args:
        depth (int): ids kept (>= 1; ActiveMQ's ``auditDepth``, 2048).

    Raises:
        ValueError: ``depth`` is not an int >= 1.
    """

    def __init__(self, depth: int = 2048) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError("audit depth must be an int >= 1, got %r" % (depth,))
        self.depth = depth
        self._ids: Set[Any] = set()
        self._ring: List[Any] = [None] * depth
        self._next = 0

    def settled(self, message_id: Any) -> None:
        """``message_id`` was settled (None: a MESSAGE without one, not audited)."""
        if message_id is None or message_id in self._ids:
            return
        at = self._next
        oldest = self._ring[at]
        if oldest is not None:
            self._ids.discard(oldest)
        self._ring[at] = message_id
        self._ids.add(message_id)
        at += 1
        self._next = 0 if at == self.depth else at

    def forget(self, message_id: Any) -> None:
        """``message_id`` was NACKed, rolled back or is redelivered locally: not settled."""
        self._ids.discard(message_id)

    def __contains__(self, message_id: Any) -> bool:
        return message_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return "SettledAudit(depth=%d, %d ids)" % (self.depth, len(self._ids))
