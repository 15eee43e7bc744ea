"""The hook points every API goes through, for an instrumentation: one observer, or none.

amqstomp calls :data:`observer` at the few places every API shares (nothing is
monkey-patched): the frame write (:meth:`amqstomp._io.driver.Driver.send_frame`:
SEND, ACK/NACK, BEGIN/COMMIT/ABORT, CONNECT, SUBSCRIBE...), the hand-over of a
MESSAGE to the application (a stomp.py listener in
:mod:`amqstomp._engine.dispatch`; a JMS ``MessageListener`` or ``receive()``
in :mod:`amqstomp.jms.consumer`; the exception a stomp.py listener raised there),
the events of a connection (connected, socket lost, a planned move's end), and
the end of a send's wait for room in a producer window
(:class:`amqstomp.jms._producer_flow.ProducerWindow`). While :data:`observer`
is None (the default) each of those places pays one attribute test and imports
nothing. :mod:`amqstomp.otel` installs an
observer that makes OpenTelemetry spans and metrics; this module knows nothing
of OpenTelemetry.

A settlement site that knows how many messages an ACK settles (a batched
cumulative or optimized ACK: :class:`amqstomp._engine.subscription.SubscriptionManager`;
``Session.acknowledge()``) says so with :func:`settling` just before the ACK
is written on the same thread; the write reads it back (:func:`settled_count`)
if the ACK names the message the count was given for.
"""
import threading
from concurrent.futures import Future
from typing import Any, Callable, Mapping, Optional, Protocol, TypeVar

__all__ = ["Observer", "observer", "messages", "MESSAGE_FRAMES", "install", "observe_messages", "settling",
           "settled_count"]

T = TypeVar("T")


class Observer(Protocol):
    """What amqstomp calls while an observer is installed. Each runs on the thread
    of the operation it observes and must not block; an exception it raises is
    the operation's (an observer catches its own)."""

    def send_frame(self, driver: Any, cmd: str, headers: Optional[Mapping[str, Any]], body: Any,
                   write_timeout: Optional[float], defer: bool, head: Any, link_seq: int,
                   nowait: bool) -> "Optional[Future[Any]]":
        """Write the frame (it must: :meth:`Driver.send_frame` returns what this
        returns): through ``driver.frame_hook`` when one is set, else with
        ``Driver.send_frame(..., hooks=False)``. ``headers`` may be replaced by a
        copy with headers added (a SEND's trace context); never changed in place."""

    def process(self, driver: Any, frame: Any, run: Callable[..., T], *args: Any) -> T:
        """Hand ``frame`` (a MESSAGE) to the application: return ``run(*args)``."""

    def listener_raised(self, exc: BaseException) -> None:
        """A stomp.py listener raised ``exc`` with the MESSAGE :meth:`process` hands
        over on this thread (the dispatcher logs it and goes on with the next
        listener; ``process`` then returns ``"error"``). Failures only."""

    def received(self, driver: Any, frame: Any, started_ns: int) -> None:
        """A pull consumer's ``receive()`` called at ``started_ns`` (``time.time_ns()``)
        returns ``frame`` (a MESSAGE) to the application now."""

    def connection_event(self, driver: Any, event: str, detail: Any = None) -> None:
        """``connected`` (``detail``: the CONNECTED frame), ``link_lost`` (the reason: a
        socket ended that the client did not close), ``moved`` (the reason: a socket the
        failover loop ended by plan, to move to another broker; no loss)."""

    def redelivery(self, driver: Any, frame: Any, poisoned: bool) -> None:
        """amqstomp's RedeliveryPolicy decided on ``frame`` (a MESSAGE whose listener
        raised, or a JMS message rolled back or recovered): hand it over again
        (``poisoned`` False; the next hand-over of this frame object is a local
        redelivery) or poison it (True: NACKed, the broker's dead-letter queue).
        Called through :data:`messages` only, off the hot path (failures only)."""

    def duplicate(self, driver: Any, frame: Any) -> None:
        """``frame`` (a MESSAGE) is a delivery of a message this consumer settled before and
        is not handed over (``checkForDuplicates``, :mod:`amqstomp._core.duplicates`).
        Called through :data:`messages` only, off the hot path (duplicates only)."""

    def blocked(self, driver: Any, seconds: float) -> None:
        """A send on ``driver`` waited ``seconds`` (``time.monotonic()`` difference) for
        room in its producer window (ActiveMQ's producer flow control: the broker holds
        the window's RECEIPTs back while its memory is full); called when the wait ends,
        by a timeout or a lost connection too. Called through :data:`messages` only."""


#: the installed observer (:func:`install`), or None: read once per hook point
observer: Optional[Observer] = None
#: the same observer while it observes each message's operations too (SEND, ACK/NACK, a
#: MESSAGE handed over), else None: the hot paths read this one. An instrumentation with
#: nothing to record them to (OpenTelemetry without an SDK) installs with ``messages=False``
#: and turns them on later (:func:`observe_messages`); connections, subscriptions and
#: transactions are observed either way
messages: Optional[Observer] = None

#: the commands of a message's operations (see :data:`messages`)
MESSAGE_FRAMES = frozenset(("SEND", "ACK", "NACK"))

_local = threading.local()


def install(new: Optional[Observer], messages: bool = True) -> Optional[Observer]:
    """Install ``new`` (None: none) as the observer, of each message's operations too
    unless ``messages`` is False; returns the one it replaces."""
    global observer
    old, observer = observer, new
    observe_messages(new if messages else None)
    return old


def observe_messages(new: Optional[Observer]) -> None:
    """Observe each message's operations with ``new`` (the installed observer), or not (None)."""
    global messages
    messages = new



def settling(count: int, message_headers: Mapping[str, Any]) -> None:
    """The next ACK this thread writes for the MESSAGE of ``message_headers`` (its
    ``ack`` or ``message-id``) settles ``count`` messages (a batch)."""
    _local.hint = (count, message_headers)


def settled_count(ack_headers: Mapping[str, Any]) -> Optional[int]:
    """The count :func:`settling` gave on this thread for the message the ACK/NACK
    of ``ack_headers`` names (STOMP 1.2 ``id`` = the MESSAGE's ``ack``; 1.0/1.1
    ``message-id``), else None; a hint is read once."""
    hint = getattr(_local, "hint", None)
    if hint is None:
        return None
    _local.hint = None
    count, message = hint
    ack_id = ack_headers.get("id")
    if ack_id is not None:
        return count if message.get("ack") == ack_id else None
    return count if message.get("message-id") == ack_headers.get("message-id") else None
