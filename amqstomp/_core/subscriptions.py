"""SUBSCRIBE preparation, written once for every API (issue 22): what a
SUBSCRIBE frame says and the prefetch window that goes with it, decided from
values and returned as values. No lock, no clock, no I/O; the subscription
table (:class:`amqstomp._engine.subscription.SubscriptionManager`) applies it, and the
stomp.py facade's ``subscribe()`` and the JMS consumers reach it through there.

A SUBSCRIBE (STOMP 1.2 "SUBSCRIBE") is prepared in two steps, because one
fact may have to be waited for (which broker answered, from CONNECTED's
``server``), and the waiting is the caller's:

1. :func:`subscribe_request` checks what the caller gave (ack mode, the
   destination and its ``consumer.*`` options, the window options) and says
   whether the broker must be known (:attr:`SubscribeRequest.needs_broker`:
   a prefetch header, a destination option, a selector);
2. :func:`subscribe_plan` decides, for that broker's dialect
   (:mod:`amqstomp._core.dialect`), the frame's headers (the prefetch header
   it reads, Classic-only options and selectors refused elsewhere) and the
   window (its prefetch: the header's, else the prefetch policy's for the
   destination's kind; its ack batching).

Also here: the headers a JMS consumer asks for (:func:`consumer_headers`),
a SUBSCRIBE that amqstomp gates on its RECEIPT (:func:`gated_headers`,
:func:`receipt_id`), the id-less STOMP 1.0 SUBSCRIBE (:func:`unregistered_headers`)
and the one window bounding the MESSAGEs of subscriptions not made through
the table (:func:`unregistered_window`).
"""
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..exception import ConfigurationError
from ..flow import (ACK_AUTO, ACK_MODES, DEFAULT_ACK_BATCH_CAP, DEFAULT_MAX_BUFFERED_BYTES, PrefetchPolicy,
                    RedeliveryPolicy, SubscriptionWindow)
from .destinations import destination_kind, parse_destination
from .dialect import ACTIVEMQ, BROKERS, prefetch_header, refusal
from .frames import subscribe_headers

__all__ = ["MAX_PREFETCH", "PREFETCH_HEADERS", "UNREGISTERED_MAX_BUFFERED", "SUBSCRIBE_OPTIONS", "option_int",
           "policy_prefetch", "window_prefetch", "default_prefetch", "prefetch_named", "SubscribeRequest",
           "subscribe_request", "SubscribePlan", "subscribe_plan",
           "consumer_headers", "plain_headers", "unregistered_window", "gated_headers", "receipt_id"]

#: Largest prefetch ActiveMQ takes (a Java int).
MAX_PREFETCH = 2 ** 31 - 1

#: the SUBSCRIBE headers that set a subscription's prefetch (messages): ActiveMQ's, RabbitMQ's
PREFETCH_HEADERS = ("activemq.prefetchSize", "prefetch-count")
#: MESSAGEs of subscriptions not made through the subscription table (STOMP 1.0 without an id, a raw
#: SUBSCRIBE, an unknown id) that may wait for the listeners before reading pauses (ActiveMQ's queue prefetch)
UNREGISTERED_MAX_BUFFERED = 1000
#: The options of a subscription that configure amqstomp (its window, its redelivery) and are never
#: sent as headers: what :func:`subscribe_request` reads (stomp.py's ``subscribe()`` keywords).
SUBSCRIBE_OPTIONS = ("optimize_acknowledge", "prefetch_size", "ack_batch_cap", "optimize_acknowledge_timeout_ms",
                     "optimized_ack_scheduled_ack_interval_ms", "idle_ack_ms", "max_buffered", "max_buffered_bytes",
                     "redelivery_policy")


def option_int(options: Mapping[str, Any], name: str, default: int, low: int = 0) -> int:
    """``options[name]`` (``default`` when absent), an int (not a bool) of at least ``low``.

    Raises:
        ConfigurationError: another value, naming the option.
    """
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigurationError("%s must be an int >= %d, got %r" % (name, low, value))
    return value


def policy_prefetch(policy: PrefetchPolicy, destination: str, durable: bool = False, browser: bool = False) -> int:
    """The prefetch (messages) ``policy`` gives a consumer of ``destination``
    (ActiveMQPrefetchPolicy: by kind, :func:`amqstomp._core.destinations.destination_kind`)."""
    return policy.prefetch_for(destination_kind(destination, durable=durable, browser=browser))


def window_prefetch(destination: str, headers: Mapping[str, Any], dialect: str, policy: PrefetchPolicy) -> int:
    """The local window's size (messages) for a SUBSCRIBE of ``headers``: the
    prefetch header this broker reads (ActiveMQ's ``activemq.prefetchSize``,
    RabbitMQ's ``prefetch-count``; either on a generic broker), else ``policy``'s
    size for the destination's kind (a durable subscription names itself with
    ``activemq.subscriptionName`` or ``durable-subscription-name``).

    Raises:
        ConfigurationError: the header is not an integer from 0 to :data:`MAX_PREFETCH`.
    """
    known = BROKERS[dialect].prefetch
    for key in ((known,) if known else ("activemq.prefetchSize", "prefetch-count")):
        if key in headers:
            try:
                value = int(str(headers[key]).strip())
            except (TypeError, ValueError):
                raise ConfigurationError("%s must be an integer, got %r" % (key, headers[key])) from None
            if not 0 <= value <= MAX_PREFETCH:
                raise ConfigurationError("%s must be from 0 to %d, got %d (ActiveMQ then delivers nothing)"
                                         % (key, MAX_PREFETCH, value))
            return value
    return default_prefetch(policy, destination, headers)


def default_prefetch(policy: PrefetchPolicy, destination: str, headers: Mapping[str, Any]) -> int:
    """The prefetch (messages) ``policy`` gives a SUBSCRIBE of ``destination`` (a
    name, without options) with ``headers`` that name no prefetch: by the
    destination's kind, a durable subscription naming itself with
    ``activemq.subscriptionName`` or ``durable-subscription-name``, a queue
    browser with ``browser:true`` (ActiveMQPrefetchPolicy)."""
    durable = "activemq.subscriptionName" in headers or "durable-subscription-name" in headers
    return policy_prefetch(policy, destination, durable, str(headers.get("browser")) == "true")


def prefetch_named(destination: str, *header_maps: Mapping[str, Any]) -> Tuple[str, List[str]]:
    """``destination``'s name (its ``?consumer.*`` options taken off) and the
    prefetch headers (:data:`PREFETCH_HEADERS`) that its options or any of
    ``header_maps`` name (``?consumer.prefetchSize=`` is ``activemq.prefetchSize``).

    Raises:
        ConfigurationError: an unknown destination option
            (:func:`amqstomp._core.destinations.parse_destination`).
    """
    name, extra = parse_destination(destination)
    return name, [k for k in PREFETCH_HEADERS if k in extra or any(k in h for h in header_maps)]


class SubscribeRequest:
    """What a caller asked to subscribe, checked (:func:`subscribe_request`).

    Attributes:
        sub_id (str): the subscription id (``id`` as text).
        id: the ``id`` as given (it goes in the frame as given).
        name (str): the destination without its options.
        extra (dict): the headers its options make (``consumer.*``, ``x-*``).
        ack (str): the STOMP ack mode.
        headers (Mapping): the caller's own headers.
        options (Mapping): :data:`SUBSCRIBE_OPTIONS` values.
        optimize (bool): optimizeAcknowledge (amqstomp ACKs in batches).
        redelivery_policy (RedeliveryPolicy): of the messages whose listener failed.
        prefetch_size (int | None): the prefetch asked for, in messages.
    """

    __slots__ = ("sub_id", "id", "name", "extra", "ack", "headers", "options", "optimize", "redelivery_policy",
                 "prefetch_size")

    def __init__(self, sub_id: str, id: Any, name: str, extra: Dict[str, Any], ack: str, headers: Mapping[str, Any],
                 options: Mapping[str, Any], optimize: bool, redelivery_policy: RedeliveryPolicy,
                 prefetch_size: Any) -> None:
        self.sub_id = sub_id
        self.id = id
        self.name = name
        self.extra = extra
        self.ack = ack
        self.headers = headers
        self.options = options
        self.optimize = optimize
        self.redelivery_policy = redelivery_policy
        self.prefetch_size = prefetch_size

    @property
    def needs_broker(self) -> bool:
        """True when :func:`subscribe_plan` must know the broker (CONNECTED's
        ``server``): a prefetch size, a destination option or a selector."""
        return bool(self.extra) or self.prefetch_size is not None or "selector" in self.headers


def subscribe_request(destination: str, id: Any, ack: str, headers: Mapping[str, Any], options: Mapping[str, Any],
                      redelivery_policy: RedeliveryPolicy) -> SubscribeRequest:
    """Step 1 (see the module docstring): check a subscription's arguments.

    Args:
        destination (str): may carry ActiveMQ consumer options
            (``/queue/a?consumer.prefetchSize=10``, each becoming its
            ``activemq.*`` header; ``x-*`` ones pass through as headers of their name).
        id: the subscription id; ack (str): ``auto``, ``client`` or ``client-individual``.
        headers (Mapping): the caller's own SUBSCRIBE headers.
        options (Mapping): :data:`SUBSCRIBE_OPTIONS` values.
        redelivery_policy (RedeliveryPolicy): the connection's, unless
            ``options`` names one.

    Raises:
        ConfigurationError: an unknown ack mode or destination option, a bad
            option value, optimize_acknowledge without ``ack='client'``.
        InvalidDestinationError, TypeError: the destination's name
            (:func:`amqstomp._core.destinations.check_destination`).
    """
    if ack not in ACK_MODES:
        raise ConfigurationError("ack must be one of %s, got %r" % (", ".join(ACK_MODES), ack))
    name, extra = parse_destination(destination)
    optimize = options.get("optimize_acknowledge", False)
    if not isinstance(optimize, bool):
        raise ConfigurationError("optimize_acknowledge must be True or False, got %r" % (optimize,))
    if optimize and ack != "client":
        raise ConfigurationError("optimize_acknowledge=True needs ack='client' (cumulative ACKs; got ack=%r)" % ack)
    policy = options.get("redelivery_policy", redelivery_policy)
    if not isinstance(policy, RedeliveryPolicy):
        raise ConfigurationError("redelivery_policy must be an amqstomp.flow.RedeliveryPolicy, got %r" % (policy,))
    return SubscribeRequest(str(id), id, name, extra, ack, headers, options, optimize, policy,
                            options.get("prefetch_size"))


class SubscribePlan:
    """A SUBSCRIBE decided (:func:`subscribe_plan`): its frame's ``headers``
    (dict), the destination's ``name``, ``ack``, ``browser`` (a queue browse),
    ``prefetch`` (messages: the broker's window; 0 only where the broker takes
    it), the ``redelivery_policy``, and ``window``, a first
    :class:`amqstomp.flow.SubscriptionWindow`; :meth:`new_window` makes another
    like it (a replay on a new socket)."""

    __slots__ = ("headers", "name", "ack", "browser", "prefetch", "redelivery_policy", "window", "_window_args",
                 "_window_kwargs")

    def __init__(self, headers: Dict[str, Any], name: str, ack: str, prefetch: int,
                 redelivery_policy: RedeliveryPolicy, window_args: Tuple[int, int],
                 window_kwargs: Dict[str, Any]) -> None:
        self.headers = headers
        self.name = name
        self.ack = ack
        self.browser = str(headers.get("browser")) == "true"
        self.prefetch = prefetch
        self.redelivery_policy = redelivery_policy
        self._window_args = window_args
        self._window_kwargs = window_kwargs
        try:
            self.window = self.new_window()
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None

    def new_window(self) -> SubscriptionWindow:
        """A fresh window (nothing delivered) of this subscription's size and ack batching."""
        return SubscriptionWindow(*self._window_args, **self._window_kwargs)


def subscribe_plan(request: SubscribeRequest, dialect: str, server: Optional[str],
                   prefetch_policy: PrefetchPolicy) -> SubscribePlan:
    """Step 2 (see the module docstring): the SUBSCRIBE of ``request`` on a broker
    of ``dialect`` (its CONNECTED ``server``, for messages; None: not known).
    Broker-specific headers are added only when asked for, and only when the
    dialect is the broker they are for.

    Raises:
        ConfigurationError: prefetch 0 on ActiveMQ (it delivers nothing over
            STOMP) or on RabbitMQ (no limit at all), a prefetch outside 0 ..
            2**31-1, or on a broker without a prefetch header; ActiveMQ options
            on another broker; a ``selector`` on a broker that ignores it
            (RabbitMQ); a bad window option. The message names the broker.
    """
    extra, headers = request.extra, request.headers
    if request.needs_broker:
        named = server or ""
        prefetch_size = request.prefetch_size
        if prefetch_size is not None:
            if isinstance(prefetch_size, bool) or not isinstance(prefetch_size, int):
                raise ConfigurationError("prefetch_size must be an int, got %r" % (prefetch_size,))
            key, value = prefetch_header(dialect, prefetch_size, named)
            extra[key] = value
        activemq_only = [k for k in extra if k.startswith("activemq.")]
        if activemq_only and not BROKERS[dialect].classic:
            raise refusal("destination options %s" % ", ".join(sorted(activemq_only)), dialect, named)
        if (extra.get("selector") or headers.get("selector")) and not BROKERS[dialect].selectors:
            raise refusal("a selector", dialect, named, "a broker that applies selectors (ActiveMQ, Artemis)")
    frame_headers = subscribe_headers(request.name, request.id, request.ack, headers, extra)
    prefetch = window_prefetch(request.name, frame_headers, dialect, prefetch_policy)
    if prefetch == 0 and (dialect == ACTIVEMQ or (BROKERS[dialect].prefetch or "") in frame_headers):
        prefetch_header(dialect, 0, server)  # raises, naming the broker
    options = request.options
    optimize = request.optimize
    window_kwargs = dict(
        auto_ack=optimize, optimize_acknowledge=optimize,
        ack_batch_cap=option_int(options, "ack_batch_cap", DEFAULT_ACK_BATCH_CAP, 1),
        optimize_acknowledge_timeout_ms=option_int(options, "optimize_acknowledge_timeout_ms", 300),
        optimized_ack_scheduled_ack_interval_ms=option_int(options, "optimized_ack_scheduled_ack_interval_ms", 0),
        idle_ack_ms=option_int(options, "idle_ack_ms", 50), max_buffered=options.get("max_buffered"),
        max_buffered_bytes=option_int(options, "max_buffered_bytes", DEFAULT_MAX_BUFFERED_BYTES))
    return SubscribePlan(frame_headers, request.name, request.ack, prefetch, request.redelivery_policy,
                         (max(prefetch, 1), ACK_MODES[request.ack]), window_kwargs)


def consumer_headers(dialect: str, server: Optional[str], selector: Optional[str] = None, no_local: bool = False,
                     durable_name: Optional[str] = None, browser: bool = False,
                     transformation: Optional[str] = None) -> Dict[str, Any]:
    """The SUBSCRIBE headers a JMS consumer asks for (before :func:`subscribe_request`):
    ``selector``; ``activemq.noLocal`` (ActiveMQ Classic's ConsumerInfo.noLocal);
    ``activemq.subscriptionName`` (a durable topic subscriber); ``browser:true``
    (a queue browser, ActiveMQ's STOMP); ``transformation`` (ActiveMQ's
    ``jms-map-json``...).

    Raises:
        ConfigurationError: ``no_local`` on a broker other than ActiveMQ Classic
            (naming the broker).
    """
    headers: Dict[str, Any] = {}
    if selector:
        headers["selector"] = selector
    if no_local:
        if dialect != ACTIVEMQ:
            raise refusal("no_local (activemq.noLocal)", dialect, server)
        headers["activemq.noLocal"] = "true"
    if durable_name is not None:
        headers["activemq.subscriptionName"] = durable_name
    if browser:
        headers["browser"] = "true"
    if transformation is not None:
        headers["transformation"] = transformation
    return headers


def plain_headers(destination: str, id: Any, ack: str, headers: Mapping[str, Any],
                  destination_options: bool = True) -> Dict[str, Any]:
    """The headers of a SUBSCRIBE the subscription table does not register (no
    window): one without an id (STOMP 1.0 allows it; nothing matches its
    MESSAGEs to a window), with the destination's options applied; or, with
    ``destination_options`` False, stomp.py's frame as the caller gave it
    (a replaced ``send_frame``/transport is the only wire).

    Raises:
        ConfigurationError, InvalidDestinationError, TypeError: as
            :func:`amqstomp._core.destinations.parse_destination` (only with
            ``destination_options``).
    """
    if not destination_options:
        return subscribe_headers(destination, id, ack, headers, {})
    name, extra = parse_destination(destination)
    return subscribe_headers(name, id, ack, headers, extra)


def unregistered_window() -> SubscriptionWindow:
    """The one window bounding the MESSAGEs of every subscription not made through
    the subscription table (:data:`UNREGISTERED_MAX_BUFFERED` messages, 64 MiB):
    ``ack:auto``, it pauses reading when full and decides no ACK."""
    return SubscriptionWindow(UNREGISTERED_MAX_BUFFERED, ACK_AUTO, auto_ack=False,
                              max_buffered=UNREGISTERED_MAX_BUFFERED)


def receipt_id(prefix: str, sub_id: Any, link_seq: int) -> str:
    """The receipt of a SUBSCRIBE amqstomp waits for itself: ``<prefix>-<id>-<socket
    number>``, unique per socket (a late RECEIPT of a lost socket never answers
    the new socket's)."""
    return "%s-%s-%d" % (prefix, sub_id, link_seq)


def gated_headers(headers: Mapping[str, Any], receipt: str) -> Dict[str, Any]:
    """A copy of SUBSCRIBE ``headers`` carrying ``receipt`` (ActiveMQ starts
    dispatching only after it sent that RECEIPT; STOMP 1.2 "RECEIPT")."""
    wire = dict(headers)
    wire["receipt"] = receipt
    return wire
