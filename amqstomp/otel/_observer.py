"""The observer (:mod:`amqstomp._observe`) that makes OpenTelemetry spans and metrics.

One :class:`OtelObserver` serves every connection of the process (the
stomp.py API's and the JMS API's: both write through
:class:`amqstomp._io.driver.Driver`). What it learns of a connection from the
frames it sees written (the ``client-id`` of CONNECT, each SUBSCRIBE's
destination and ack mode, the SENDs of a transaction) lives in a
:class:`_DriverState` that goes away with the connection.
"""
import logging
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, Span, Status, StatusCode

from .. import _observe
from .._io.driver import Driver
from ..exception import ConnectionClosedException
from ._conventions import Conventions
from ._metrics import Instruments

__all__ = ["OtelObserver", "PARENT", "LINK"]

log = logging.getLogger("amqstomp.otel")

#: what an observed frame's write is followed by: ``finish(receipt future or None, exception or None)``
_Finish = Callable[[Any, Optional[BaseException]], None]

PARENT = "parent"  #: a process span's parent is the message's creation context (the Java agent's default)
LINK = "link"  #: a process span's parent is the current context; it links to the creation context

#: stomp.py's dispatch outcomes (not consumed) -> error.type
_OUTCOMES = {"error": "listener_error", "no listener": "no_listener"}
_ACK_IDS_KEPT = 4096  # ack id -> (destination, subscription) of recent hand-overs, for the settle spans
_ATTRS_KEPT = 256  # attribute sets kept per connection
_SYSTEMS = {"activemq": "activemq", "artemis": "activemq", "rabbitmq": "rabbitmq"}
#: ``amqstomp.disconnect.cause`` of a socket's end: lost (not the client's doing), or a planned
#: move to another broker (priorityBackup, rebalanceInterval)
LOSS, MOVE = "loss", "move"
_END_EVENTS = {LOSS: "amqstomp.link_lost", MOVE: "amqstomp.moved"}


class _DriverState:
    """What the observer knows of one connection."""

    __slots__ = ("client_id", "subs", "tx_sends", "ack_ids", "connect_span", "connects", "lost_at", "lost_reason",
                 "lost_cause", "up", "attrs", "__weakref__")

    def __init__(self) -> None:
        self.client_id: Optional[str] = None
        self.subs: Dict[str, Tuple[Optional[str], str]] = {}  # subscription id -> (destination, ack mode)
        self.tx_sends: Dict[str, int] = {}  # transaction id -> SENDs in it
        self.ack_ids: "OrderedDict[str, Tuple[Optional[str], Optional[str]]]" = OrderedDict()
        self.connect_span: Optional[Span] = None
        self.connects = 0
        self.lost_at: Optional[float] = None
        self.lost_reason: Optional[str] = None
        self.lost_cause = LOSS  # why the last socket ended: LOSS or MOVE
        self.up = False  # the socket got CONNECTED (else its end is a failed attempt, not a loss)
        #: (operation type, operation name, destination) -> the shared attributes (cleared on a new socket)
        self.attrs: Dict[Tuple[Optional[str], str, Optional[str]], Dict[str, Any]] = {}


def _header(headers: Optional[Mapping[str, Any]], head: Any, name: str) -> Any:
    """A frame's header as the broker reads it (a FrameHead's value first)."""
    if head is not None and name in head.headers:
        return head.headers[name]
    return headers.get(name) if headers else None


def _write(driver: Any, cmd: str, headers: Any, body: Any, write_timeout: Optional[float], defer: bool, head: Any,
           link_seq: int, nowait: bool) -> Any:
    hook = driver.frame_hook
    if hook is not None:
        return hook(cmd, headers, body, write_timeout, defer, head, link_seq, nowait)
    return Driver.send_frame(driver, cmd, headers, body, write_timeout, defer, head, link_seq, nowait, False)


def _error_type(exc: BaseException) -> str:
    return type(exc).__qualname__


class OtelObserver:
    """Spans and metrics of every amqstomp connection (see docs/observability.md).

    Args:
        tracer: the OpenTelemetry tracer.
        meter: the OpenTelemetry meter.
        conventions (Conventions): the semantic-conventions names.
        process_context (str): :data:`PARENT` or :data:`LINK`.
        capture_body_size (bool): ``messaging.message.body.size`` on send spans.

    Raises:
        ValueError: ``process_context`` is neither.
    """

    def __init__(self, tracer: trace.Tracer, meter: Any, conventions: Conventions, process_context: str = PARENT,
                 capture_body_size: bool = False, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        if process_context not in (PARENT, LINK):
            raise ValueError("process_context must be %r or %r, got %r" % (PARENT, LINK, process_context))
        self.tracer = tracer
        self._providers = (tracer_provider, meter_provider)  # None: the global one
        self.names = conventions
        self.parent_on_message = process_context == PARENT
        self.capture_body_size = capture_body_size
        self._states: "weakref.WeakKeyDictionary[Any, _DriverState]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.metrics = Instruments(meter, self._windows)
        #: per thread: ``processing``, the exceptions stomp.py listeners raised in the process span under way
        self._thread = threading.local()
        # id(frame) -> frame (held: its id is not reused) of the local redeliveries not yet handed over
        self._redelivering: "OrderedDict[int, Any]" = OrderedDict()

    # ------------------------------------------------------------ an SDK or not

    def recording(self) -> bool:
        """Whether a span or measurement would be recorded: False while both providers are
        the OpenTelemetry API's placeholders (no SDK set: every span and measurement of a
        message would be dropped, at ~45,000 instructions a message)."""
        tracer_provider, meter_provider = self._providers
        return not (_placeholder(tracer_provider or trace.get_tracer_provider())
                    and _placeholder(meter_provider or metrics.get_meter_provider()))

    # ------------------------------------------------------------ what a connection is

    def _state(self, driver: Any) -> _DriverState:
        state = self._states.get(driver)
        if state is None:
            with self._lock:
                state = self._states.setdefault(driver, _DriverState())
            if not state.connects:  # connected before it was instrumented: its loss is one
                state.up = _connected(driver)
        return state

    def _attrs(self, driver: Any, state: _DriverState, op_type: Optional[str], op_name: str,
               destination: Optional[str]) -> Dict[str, Any]:
        """The attributes every span and metric of ``driver`` shares (low cardinality): one dict per
        operation and destination until the next socket, never changed (the metrics' attributes)."""
        key = (op_type, op_name, destination)
        attrs = state.attrs.get(key)
        if attrs is not None:
            return attrs
        attrs = {"messaging.system": _SYSTEMS.get(driver.dialect, "stomp")}
        self.names.operation(attrs, op_type, op_name)
        if destination:
            attrs["messaging.destination.name"] = destination
        host_and_port = driver.current_host_and_port
        if host_and_port is not None:
            attrs["server.address"] = host_and_port[0]
            attrs["server.port"] = int(host_and_port[1])
        if len(state.attrs) >= _ATTRS_KEPT:  # many destinations (temporary ones): start again
            state.attrs.clear()
        state.attrs[key] = attrs
        return attrs

    def _windows(self) -> Iterable[Tuple[Dict[str, Any], Any]]:
        """Every known subscription's flow window, with its attributes (the gauges)."""
        found: List[Tuple[Dict[str, Any], Any]] = []
        for driver, state in list(self._states.items()):
            manager = getattr(getattr(driver, "observer", None), "manager", None)
            if manager is None:
                continue
            for sub_id, (destination, _) in list(state.subs.items()):
                sub = manager.get(sub_id)
                if sub is None or sub.closed:
                    continue
                attrs = {"messaging.system": _SYSTEMS.get(driver.dialect, "stomp"),
                         "messaging.destination.subscription.name": sub_id}
                if destination:
                    attrs["messaging.destination.name"] = destination
                found.append((attrs, sub.window))
        return found

    def _metric_attrs(self, attrs: Dict[str, Any], error: Optional[str]) -> Dict[str, Any]:
        if error is None:
            return attrs
        metric = dict(attrs)
        if error is not None:
            metric["error.type"] = error
        return metric

    @staticmethod
    def _end(span: Span, error: Optional[str], description: Optional[str] = None,
             end_time: Optional[int] = None) -> None:
        if error is not None:
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR, description))
        span.end(end_time)

    # ------------------------------------------------------------ frames written

    def send_frame(self, driver: Any, cmd: str, headers: Optional[Mapping[str, Any]], body: Any,
                   write_timeout: Optional[float], defer: bool, head: Any, link_seq: int, nowait: bool) -> Any:
        """Write the frame; around it, what the command is observed as. A failure of the
        instrumentation itself is logged and never fails the write."""
        try:
            begun = self._begin(driver, cmd, headers, body, head)
        except Exception:
            log.exception("amqstomp.otel: %s not observed", cmd)
            begun = None
        if begun is None:
            return _write(driver, cmd, headers, body, write_timeout, defer, head, link_seq, nowait)
        frame_headers, finish = begun
        try:
            future = _write(driver, cmd, frame_headers, body, write_timeout, defer, head, link_seq, nowait)
        except BaseException as exc:
            _guarded(finish, None, exc)
            raise
        _guarded(finish, future, None)
        return future

    def _begin(self, driver: Any, cmd: str, headers: Optional[Mapping[str, Any]], body: Any,
               head: Any) -> Optional[Tuple[Optional[Mapping[str, Any]], _Finish]]:
        """(the headers to write, ``finish(receipt future, exception)``), or None: nothing to observe."""
        if cmd == "SEND":
            return self._begin_send(driver, headers, body, head)
        if cmd == "ACK" or cmd == "NACK":
            return headers, self._begin_settle(driver, cmd, headers, head)
        if cmd == "COMMIT" or cmd == "ABORT":
            return headers, self._begin_transaction_end(driver, cmd, headers, head)
        state = self._state(driver)
        if cmd == "SUBSCRIBE":
            sub_id = _header(headers, head, "id")
            if sub_id is not None:
                ack = _header(headers, head, "ack")
                state.subs[str(sub_id)] = (_header(headers, head, "destination"), str(ack or "auto"))
        elif cmd == "UNSUBSCRIBE":
            state.subs.pop(str(_header(headers, head, "id")), None)
        elif cmd == "BEGIN":
            state.tx_sends[str(_header(headers, head, "transaction"))] = 0
        elif cmd == "CONNECT" or cmd == "STOMP":
            return headers, self._begin_connect(driver, state, headers, head)
        return None

    def _begin_send(self, driver: Any, headers: Optional[Mapping[str, Any]], body: Any,
                    head: Any) -> Tuple[Optional[Mapping[str, Any]], _Finish]:
        state = self._state(driver)
        destination = _header(headers, head, "destination")
        attrs = self._attrs(driver, state, "send", "send", destination)
        span_attrs = dict(attrs)
        self.names.client_id(span_attrs, state.client_id)
        correlation = _header(headers, head, "correlation-id")
        if correlation is not None:
            span_attrs["messaging.message.conversation_id"] = str(correlation)
        if self.capture_body_size and body is not None:
            span_attrs["messaging.message.body.size"] = len(body.encode() if isinstance(body, str) else body)
        span = self.tracer.start_span(self.names.span_name("send", "send", destination),
                                      kind=self.names.kind("send"), attributes=span_attrs)
        started = time.perf_counter()
        carrier: Dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        added = {name: value for name, value in carrier.items() if _header(headers, head, name) is None}
        if added:  # never a user's header of the same name
            headers = dict(headers) if headers else {}
            headers.update(added)
        transaction = _header(headers, head, "transaction")

        def finish(future: Any, exc: Optional[BaseException]) -> None:
            if exc is not None:
                self._sent(span, attrs, started, _error_type(exc), str(exc))
                return
            if transaction is not None:
                key = str(transaction)
                state.tx_sends[key] = state.tx_sends.get(key, 0) + 1
            if future is None:
                self._sent(span, attrs, started, None)
            else:  # it ends with the RECEIPT (or the ERROR)
                future.add_done_callback(lambda f: _guarded(self._sent, span, attrs, started, *_outcome(f)))
        return headers, finish

    def _sent(self, span: Span, attrs: Dict[str, Any], started: float, error: Optional[str],
              description: Optional[str] = None) -> None:
        self._end(span, error, description)
        metric = self._metric_attrs(attrs, error)
        self.metrics.sent.add(1, metric)
        self.metrics.operation_duration.record(time.perf_counter() - started, metric)

    def _begin_settle(self, driver: Any, cmd: str, headers: Optional[Mapping[str, Any]], head: Any) -> _Finish:
        state = self._state(driver)
        count = _observe.settled_count(headers or {})
        sub_id = _header(headers, head, "subscription")
        ack_id = _header(headers, head, "id") or _header(headers, head, "message-id")
        destination = None
        known = state.ack_ids.get(str(ack_id)) if ack_id is not None else None
        if known is not None:
            destination, sub_id = known[0], sub_id or known[1]
        sub = state.subs.get(str(sub_id)) if sub_id is not None else None
        if sub is not None:
            destination = destination or sub[0]
        if count is None and (cmd == "NACK" or (sub is not None and sub[1] == "client-individual")):
            count = 1
        op_name = cmd.lower()
        attrs = self._attrs(driver, state, "settle", op_name, destination)
        span_attrs = dict(attrs)
        self.names.client_id(span_attrs, state.client_id)
        if sub_id is not None:
            span_attrs["messaging.destination.subscription.name"] = str(sub_id)
        if count is not None:
            span_attrs["messaging.batch.message_count"] = count
        span = self.tracer.start_span(self.names.span_name("settle", op_name, destination),
                                      kind=self.names.kind("settle"), attributes=span_attrs)
        started = time.perf_counter()

        def finish(future: Any, exc: Optional[BaseException]) -> None:
            error = None if exc is None else _error_type(exc)
            self._end(span, error, None if exc is None else str(exc))
            metric = self._metric_attrs(attrs, error)
            self.metrics.operation_duration.record(time.perf_counter() - started, metric)
            if error is None and count is not None:
                self.metrics.ack_batch.record(count, metric)
                if cmd == "NACK":
                    self.metrics.rejected.add(count, metric)
        return finish

    def _begin_transaction_end(self, driver: Any, cmd: str, headers: Optional[Mapping[str, Any]],
                               head: Any) -> _Finish:
        state = self._state(driver)
        op_name = cmd.lower()
        attrs = self._attrs(driver, state, None, op_name, None)
        span_attrs = dict(attrs)
        self.names.client_id(span_attrs, state.client_id)
        sends = state.tx_sends.pop(str(_header(headers, head, "transaction")), None)
        if sends:
            span_attrs["messaging.batch.message_count"] = sends
        span = self.tracer.start_span(self.names.span_name(None, op_name, None), kind=self.names.kind(None),
                                      attributes=span_attrs)
        started = time.perf_counter()

        def ended(error: Optional[str], description: Optional[str], in_doubt: bool) -> None:
            if in_doubt:
                self.metrics.in_doubt.add(1, attrs)
                span.set_attribute("amqstomp.transaction.in_doubt", True)
            self._end(span, error, description)
            self.metrics.operation_duration.record(time.perf_counter() - started, self._metric_attrs(attrs, error))

        def finish(future: Any, exc: Optional[BaseException]) -> None:
            if exc is not None:
                ended(_error_type(exc), str(exc), False)  # not written
            elif future is None:
                ended(None, None, False)
            else:  # a COMMIT written whose socket was lost before its RECEIPT: in doubt
                future.add_done_callback(lambda f: _guarded(
                    ended, *_outcome(f), cmd == "COMMIT" and isinstance(f.exception(), ConnectionClosedException)))
        return finish

    def _begin_connect(self, driver: Any, state: _DriverState, headers: Optional[Mapping[str, Any]],
                       head: Any) -> _Finish:
        client_id = _header(headers, head, "client-id") or getattr(driver, "client_id", None)
        state.client_id = None if client_id is None else str(client_id)
        attrs = dict(self._attrs(driver, state, None, "connect", None))
        self.names.client_id(attrs, state.client_id)
        attrs["amqstomp.reconnect"] = state.connects > 0
        span = self.tracer.start_span("connect", kind=trace.SpanKind.CLIENT, attributes=attrs,
                                      context=otel_context.Context())  # a root: not part of a caller's trace
        if state.lost_at is not None:
            span.add_event(_END_EVENTS[state.lost_cause], {"amqstomp.reason": state.lost_reason or ""},
                           timestamp=int(state.lost_at * 1e9))
        previous, state.connect_span = state.connect_span, span
        if previous is not None:
            self._end(previous, "superseded")

        def finish(future: Any, exc: Optional[BaseException]) -> None:
            if exc is not None:  # else it ends with CONNECTED or the lost socket (connection_event)
                state.connect_span = None
                self._end(span, _error_type(exc), str(exc))
        return finish

    # ------------------------------------------------------------ connection events

    def connection_event(self, driver: Any, event: str, detail: Any = None) -> None:
        _guarded(self._connection_event, driver, event, detail)

    def _connection_event(self, driver: Any, event: str, detail: Any) -> None:
        state = self._state(driver)
        attrs: Dict[str, Any] = {"messaging.system": _SYSTEMS.get(driver.dialect, "stomp")}
        state.attrs.clear()  # the server (failover) and the dialect may change
        if event == "connected":
            reconnect = state.connects > 0
            state.connects += 1
            state.up = True
            span, state.connect_span = state.connect_span, None
            if state.lost_at is not None:
                gap = dict(attrs)
                gap["amqstomp.disconnect.cause"] = state.lost_cause
                self.metrics.disconnected.record(max(0.0, time.time() - state.lost_at), gap)
                state.lost_at = state.lost_reason = None
            metric = dict(attrs)
            metric["amqstomp.reconnect"] = reconnect
            self.metrics.connections.add(1, metric)
            if span is not None:
                span.set_attribute("messaging.system", attrs["messaging.system"])
                server = getattr(detail, "headers", {}).get("server")
                if server:
                    span.set_attribute("amqstomp.server", server)
                self._end(span, None)
        elif event == "link_lost" or event == "moved":
            span, state.connect_span = state.connect_span, None
            if not state.up:  # an attempt that never got CONNECTED (failover tries the next broker): no loss
                if span is not None:
                    self._end(span, "connect_failed", str(detail))
                return
            state.up = False
            cause = MOVE if event == "moved" else LOSS
            state.lost_at, state.lost_reason, state.lost_cause = time.time(), str(detail), cause
            (self.metrics.moves if cause == MOVE else self.metrics.losses).add(1, attrs)
            if span is not None:
                self._end(span, event, str(detail))

    # ------------------------------------------------------------ producer flow control

    def redelivery(self, driver: Any, frame: Any, poisoned: bool) -> None:
        _guarded(self._redelivery, driver, frame, poisoned)

    def _redelivery(self, driver: Any, frame: Any, poisoned: bool) -> None:
        if poisoned:
            attrs: Dict[str, Any] = {"messaging.system": _SYSTEMS.get(driver.dialect, "stomp")}
            destination = frame.headers.get("destination")
            if destination:
                attrs["messaging.destination.name"] = destination
            self.metrics.poisoned.add(1, attrs)
            return
        with self._lock:
            self._redelivering[id(frame)] = frame
            if len(self._redelivering) > _ACK_IDS_KEPT:  # redeliveries dropped (a socket lost, closed)
                self._redelivering.popitem(last=False)

    def duplicate(self, driver: Any, frame: Any) -> None:
        _guarded(self._duplicate, driver, frame)

    def _duplicate(self, driver: Any, frame: Any) -> None:
        attrs: Dict[str, Any] = {"messaging.system": _SYSTEMS.get(driver.dialect, "stomp")}
        destination = frame.headers.get("destination")
        if destination:
            attrs["messaging.destination.name"] = destination
        self.metrics.duplicates.add(1, attrs)

    def _local_redelivery(self, frame: Any) -> bool:
        """Whether ``frame``, handed over now, is one amqstomp redelivers itself (told by :meth:`redelivery`)."""
        with self._lock:
            return self._redelivering.pop(id(frame), None) is frame

    def blocked(self, driver: Any, seconds: float) -> None:
        _guarded(self._blocked, driver, seconds)

    def _blocked(self, driver: Any, seconds: float) -> None:
        attrs = self._attrs(driver, self._state(driver), "send", "send", None)
        self.metrics.blocked.record(max(0.0, seconds), attrs)

    # ------------------------------------------------------------ messages handed over

    def _message_span(self, driver: Any, frame: Any, op_type: str, start_time: Optional[int],
                      parent_on_message: bool) -> Tuple[Span, Dict[str, Any], Any]:
        state = self._state(driver)
        headers = frame.headers
        destination = headers.get("destination")
        sub_id = headers.get("subscription")
        ack_id = headers.get("ack") or headers.get("message-id")
        if ack_id is not None:
            with self._lock:
                state.ack_ids[str(ack_id)] = (destination, sub_id)
                if len(state.ack_ids) > _ACK_IDS_KEPT:
                    state.ack_ids.popitem(last=False)
        attrs = self._attrs(driver, state, op_type, op_type, destination)
        span_attrs = dict(attrs)
        self.names.client_id(span_attrs, state.client_id)
        for name, attribute in (("message-id", "messaging.message.id"),
                                ("correlation-id", "messaging.message.conversation_id"),
                                ("subscription", "messaging.destination.subscription.name")):
            value = headers.get(name)
            if value is not None:
                span_attrs[attribute] = str(value)
        local = bool(self._redelivering) and self._local_redelivery(frame)
        if local or headers.get("redelivered") == "true":
            source = "local" if local else "broker"
            span_attrs["amqstomp.redelivered"] = True
            span_attrs["amqstomp.redelivery.source"] = source
            metric = dict(attrs)
            metric["amqstomp.redelivery.source"] = source
            self.metrics.redelivered.add(1, metric)
        extracted = propagate.extract(headers)
        creation = trace.get_current_span(extracted).get_span_context()
        links = None
        parent = None
        if creation.is_valid:
            if parent_on_message:
                parent = extracted
            else:
                links = [Link(creation)]
        span = self.tracer.start_span(self.names.span_name(op_type, op_type, destination),
                                      context=parent, kind=self.names.kind(op_type), attributes=span_attrs,
                                      links=links, start_time=start_time)
        return span, attrs, extracted

    def process(self, driver: Any, frame: Any, run: Callable[..., Any], *args: Any) -> Any:
        """``run(*args)`` in a process span. A failure of the instrumentation itself is
        logged and never keeps the message from the application."""
        try:
            span, attrs, extracted = self._message_span(driver, frame, "process", None, self.parent_on_message)
            token = otel_context.attach(trace.set_span_in_context(span, extracted))
        except Exception:
            log.exception("amqstomp.otel: a MESSAGE's process span not made")
            return run(*args)
        started = time.perf_counter()
        error: Optional[str] = None
        description: Optional[str] = None
        local = self._thread
        outer = getattr(local, "processing", None)
        raised: List[BaseException] = []  # listener_raised() adds to it
        local.processing = raised
        try:
            result = run(*args)
            if isinstance(result, str):  # stomp.py's dispatch: the listeners did not have it
                if raised:  # as a MessageListener's: the (first) exception's class
                    error, description = _error_type(raised[0]), str(raised[0])
                else:
                    error = _OUTCOMES.get(result, result)
            return result
        except BaseException as exc:
            error, description = _error_type(exc), str(exc)
            _guarded(span.record_exception, exc)
            raise
        finally:
            local.processing = outer
            for failure in raised:
                _guarded(span.record_exception, failure)
            _guarded(self._processed, token, span, attrs, started, error, description)

    def listener_raised(self, exc: BaseException) -> None:
        processing = getattr(self._thread, "processing", None)
        if processing is not None:
            processing.append(exc)

    def _processed(self, token: Any, span: Span, attrs: Dict[str, Any], started: float, error: Optional[str],
                   description: Optional[str]) -> None:
        otel_context.detach(token)
        self._end(span, error, description)
        metric = self._metric_attrs(attrs, error)
        self.metrics.consumed.add(1, metric)
        self.metrics.process_duration.record(time.perf_counter() - started, metric)

    def received(self, driver: Any, frame: Any, started_ns: int) -> None:
        _guarded(self._received, driver, frame, started_ns)

    def _received(self, driver: Any, frame: Any, started_ns: int) -> None:
        # a receive span's parent is the caller's context; it links to the creation context
        span, attrs, _ = self._message_span(driver, frame, "receive", started_ns, False)
        self._end(span, None)
        self.metrics.consumed.add(1, attrs)
        self.metrics.operation_duration.record(max(0.0, (time.time_ns() - started_ns) / 1e9), attrs)


def _connected(driver: Any) -> bool:
    try:
        return bool(driver.is_connected())
    except Exception:  # (a driver of another kind)
        return False


def _placeholder(provider: Any) -> bool:
    """Whether ``provider`` is one of the OpenTelemetry API's own (its proxy before an SDK is set,
    or its no-op one): they record nothing."""
    return type(provider).__module__.startswith(("opentelemetry.trace", "opentelemetry.metrics"))


def _guarded(fn: Callable[..., Any], *args: Any) -> None:
    """``fn(*args)``; a failure of the instrumentation is logged, never raised into amqstomp."""
    try:
        fn(*args)
    except Exception:
        log.exception("amqstomp.otel: %r failed", fn)


def _outcome(future: Any) -> Tuple[Optional[str], Optional[str]]:
    """(error.type, description) of a receipt future that is done: (None, None) when it succeeded."""
    exc = None if future.cancelled() else future.exception()
    if exc is None:
        return None, None
    reason = getattr(exc, "reason", None)
    return _error_type(exc), str(reason or exc)
