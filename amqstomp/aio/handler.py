"""The handler form of an :mod:`amqstomp.aio` subscription: :meth:`Subscription.run`.

``await sub.run(handler, concurrency=N)`` hands each MESSAGE to ``await handler(message)``
with at most N handlers running at once: N worker tasks, started once, each taking the
next message from the subscription's own queue (:meth:`Subscription.get`; no task per
message). The shape is ``run`` on a subscription opened with ``async with`` (not a
``handler=`` argument of ``subscribe``) so that one object keeps one life: the SUBSCRIBE is
confirmed by its RECEIPT on entry, the handlers end before the UNSUBSCRIBE on exit, and a
cancellation of ``run`` cancels its workers (nothing is left running behind the caller).

What a handler's outcome means (amqstomp settles the messages in this form, as the
listener of ActiveMQ's Java client with ``AUTO_ACKNOWLEDGE``):

* it returned: ``ack:client-individual`` -- its message is ACKed; ``ack:client`` -- ACKed
  (cumulative: one worker only, see :func:`check_run`); ``ack:auto`` -- nothing (the broker
  settled it when it sent it);
* it raised (an :class:`Exception`): reported (``on_error``); then ``ack:auto`` -- consumed
  (:func:`amqstomp._core.settle.listener_failed` ``BY_BROKER``); else the settlement core's
  local redelivery (``BY_LIBRARY``: :func:`~amqstomp._core.settle.after_failure` counted by
  :func:`~amqstomp._core.settle.next_redelivery`, the broker's redeliveries included): the
  same worker hands it to the handler again after the redelivery policy's delay (the
  worker's slot stays taken, as ActiveMQ's default ``nonBlockingRedelivery=false`` holds
  the consumer), and past ``maximum_redeliveries`` it is poisoned -- the reject frame of
  :func:`~amqstomp._core.settle.poison` (NACK: ActiveMQ's dead-letter queue) on the socket
  that delivered it.

A message whose socket was lost meanwhile (failover) is neither ACKed nor NACKed: the
broker redelivers it on the new socket. Licensed under the Apache License, Version 2.0.
"""
import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, List, Optional

from ..exception import AcknowledgeInterruptedError, ConfigurationError, StompException
from ..log import report_callback_error
from ._options import MIN_TIMEOUT_S
from .._core.callables import is_async_callable
from .._core.settle import (BY_BROKER, BY_LIBRARY, CONSUMED, Poison, after_failure, first_delivery_count,
                            listener_failed, next_redelivery)

if TYPE_CHECKING:
    from .subscription import Message, Subscription

__all__ = ["Handler", "ErrorCallback", "check_run", "stop_handlers", "Workers"]

log = logging.getLogger("amqstomp.aio")

#: seconds a cancelled handler gets to end when a close's timeout is spent already
CANCEL_GRACE_S = 0.1

#: ``async def handler(message: Message) -> None``
Handler = Callable[["Message"], Awaitable[Any]]
#: ``def on_error(error: Exception, message: Message) -> None``, called on the loop (must not block)
ErrorCallback = Callable[[Exception, "Message"], None]


def check_run(sub: "Subscription", handler: Any, concurrency: Any) -> None:
    """The arguments of :meth:`Subscription.run`, checked before any worker starts.

    Raises:
        ConfigurationError: ``concurrency`` not an int >= 1; above 1 with ``ack:client`` (a
            cumulative ACK of one handler's message would settle another's still running);
            an optimized-acknowledge subscription (amqstomp already ACKs in batches: use
            ``ack='client-individual'``); ``handler`` not callable, or a plain ``def`` one (a
            function, method, ``functools.partial`` or object whose ``__call__`` is not ``async
            def``: :func:`amqstomp._core.callables.is_async_callable`; one whose kind its code
            does not tell is refused at its first call that returns no awaitable, from ``run``);
            ``run`` active already.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError("concurrency must be an int >= 1 (handlers at once), got %r" % (concurrency,))
    if not callable(handler):
        raise ConfigurationError("handler must be an async function of the message, got %r" % (handler,))
    if is_async_callable(handler) is False:
        raise ConfigurationError("handler must be an async function of the message ('async def'; run() awaits "
                                 "what it returns), got the plain callable %r" % (handler,))
    if sub.window.optimize_acknowledge:
        raise ConfigurationError("run() settles each message itself: subscribe without optimize_acknowledge "
                                 "(ack='client-individual' for concurrent handlers)")
    if sub.ack == "client" and concurrency > 1:
        raise ConfigurationError("ack='client' ACKs are cumulative: with concurrency=%d a handler's ACK would "
                                 "settle messages other handlers still run; use ack='client-individual'"
                                 % concurrency)
    if sub.workers is not None:
        raise ConfigurationError("subscription %s runs a handler already" % sub.id)


async def stop_handlers(loop: asyncio.AbstractEventLoop, subs: Iterable["Subscription"], timeout: float) -> float:
    """:meth:`Client.close`: the handlers of every subscription running one finish within
    ``timeout`` seconds (their ACKs written) or are cancelled. Returns the seconds left of
    ``timeout`` (at least :data:`MIN_TIMEOUT_S`) for the rest of the close.

    The task calling (a handler may close its client) is never waited for nor cancelled: it is
    named here, as each subscription's stop runs in a task of its own (``gather``)."""
    running = [sub for sub in subs if sub.workers is not None]
    if not running:
        return timeout
    deadline = loop.time() + timeout
    caller = asyncio.current_task()
    await asyncio.gather(*(sub.stop_handlers(timeout, caller) for sub in running))
    return max(MIN_TIMEOUT_S, deadline - loop.time())


class Workers:
    """The N worker tasks of one :meth:`Subscription.run` (see the module docstring)."""

    def __init__(self, sub: "Subscription", handler: Handler, concurrency: int,
                 on_error: Optional[ErrorCallback]) -> None:
        self.sub = sub
        self.handler = handler
        self.on_error = on_error
        self.stopping = False
        #: a handler's call returned no awaitable: what run() raises (the workers stop; nothing settled)
        self.refused: Optional[ConfigurationError] = None
        #: the workers waiting for a message or for a redelivery's delay (cancelled at once by :meth:`stop`:
        #: nothing taken, or a message left unacknowledged, which the broker redelivers)
        self.idle: "set[asyncio.Task[None]]" = set()
        loop = sub.client.loop
        self.tasks: "List[asyncio.Task[None]]" = [loop.create_task(self._work()) for _ in range(concurrency)]

    async def _work(self) -> None:
        sub = self.sub
        me = asyncio.current_task()
        assert me is not None
        while not self.stopping:
            self.idle.add(me)
            try:
                message = await sub.get(None)
            except StompException:  # SubscriptionClosedError: ended (the caller of run() is told why)
                return
            finally:
                self.idle.discard(me)
            if self.stopping:  # a refused handler: this message stays unacknowledged (redelivered)
                return
            await self._handle(message)

    async def _handle(self, message: "Message") -> None:
        sub = self.sub
        message.delivery_count = first_delivery_count(message.frame.delivery_count, message.headers)
        while True:
            try:
                outcome = self.handler(message)
                if not inspect.isawaitable(outcome):  # a plain callable check_run could not tell
                    self._refuse(outcome)
                    return
                await outcome
            except Exception as exc:  # the handler failed: reported, then the settlement core decides
                self._report(exc, message)
                if listener_failed(BY_BROKER if not sub.app_acked else BY_LIBRARY) == CONSUMED:
                    return
                link = message.link
                action = after_failure(sub.redelivery_policy, next_redelivery(message.delivery_count), True,
                                       link.proto.version, link.proto.dialect, message.headers)
                if isinstance(action, Poison):
                    log.warning("message %s of subscription %s poisoned: %s (%s: the broker's dead-letter queue)",
                                message.message_id, sub.id, action.reason, action.command)
                    await self._settle(message, action.command, action.headers)
                    return
                message.delivery_count += 1
                me = asyncio.current_task()
                assert me is not None
                self.idle.add(me)
                try:
                    await asyncio.sleep(action.delay_ms / 1000.0)
                finally:
                    self.idle.discard(me)
                if self.stopping or message.link.closed or message.link is not sub.link:
                    return  # its socket is gone: the broker redelivers it
                continue
            if sub.app_acked:
                await self._settle(message, "ACK", None)
            return

    async def _settle(self, message: "Message", cmd: str, headers: Optional[Any]) -> None:
        try:
            await self.sub.settle_message(message, cmd, None, False, None, headers)
        except AcknowledgeInterruptedError as exc:  # socket lost or subscription closed: redelivered
            log.debug("%s", exc)
        except StompException as exc:
            log.info("%s of %r not written: %s", cmd, message, exc)

    def _refuse(self, outcome: Any) -> None:
        """The handler returned ``outcome``, not an awaitable: it is no async function. run()
        raises ConfigurationError; its message is neither ACKed nor redelivered to it (the
        broker redelivers it once the subscription ends), no worker takes another."""
        if self.refused is None:
            self.refused = ConfigurationError(
                "handler must be an async function of the message ('async def'; run() awaits what it returns): "
                "%r returned %s, not an awaitable" % (self.handler, type(outcome).__name__))
        self.stopping = True
        me = asyncio.current_task()
        for task in list(self.idle):
            if task is not me:
                task.cancel()

    def _report(self, exc: Exception, message: "Message") -> None:
        """Called in the ``except`` block of ``exc``: to ``on_error``, else logged at WARNING; with
        logging not configured, also written to stderr (as the threaded APIs' listener errors:
        :func:`amqstomp.log.report_callback_error`), so that no failure of the application's code
        passes unseen. What ``on_error`` raises is reported the same way (at ERROR)."""
        if self.on_error is None:
            report_callback_error(log, "handler of subscription %s raised %s for message %s", self.sub.id,
                                  type(exc).__name__, message.message_id, level=logging.WARNING)
            return
        try:
            self.on_error(exc, message)
        except Exception:  # noqa: BLE001 - a failing callback must not stop the worker
            report_callback_error(log, "on_error of subscription %s raised", self.sub.id)

    async def wait(self) -> None:
        """Until every worker ended; a cancellation of the caller cancels them all (and waits for them)."""
        try:
            await asyncio.wait(self.tasks)
        except BaseException:
            await self.cancel()
            raise
        for task in self.tasks:  # a worker's own failure (not a handler's: those are reported)
            error = None if task.cancelled() else task.exception()
            if error is not None:
                raise error
        if self.refused is not None:
            raise self.refused

    async def stop(self, timeout: float, caller: "Optional[asyncio.Task[Any]]" = None) -> None:
        """No more messages handed out; the handlers running get ``timeout`` seconds to finish
        (their ACKs written), then are cancelled (their messages unacknowledged: redelivered).

        ``caller`` (default the current task): the task closing, never waited for -- a handler
        closing its own subscription (or client) ends after the close returns. Bounded: the
        cancelled handlers get what is left of ``timeout`` (at least :data:`CANCEL_GRACE_S`) to
        end; one that ignores its cancellation is left running (a WARNING says so)."""
        self.stopping = True
        me = asyncio.current_task() if caller is None else caller
        loop = self.sub.client.loop
        deadline = loop.time() + timeout
        for task in list(self.idle):
            if task is not me:
                task.cancel()
        pending = [task for task in self.tasks if not task.done() and task is not me]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        pending = [task for task in self.tasks if not task.done() and task is not me]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=max(CANCEL_GRACE_S, deadline - loop.time()))
            stuck = sum(1 for task in pending if not task.done())
            if stuck:
                log.warning("%d handler(s) of subscription %s ignored their cancellation: left running",
                            stuck, self.sub.id)

    async def cancel(self) -> None:
        """:meth:`run` cancelled: every worker cancelled, and waited for."""
        me = asyncio.current_task()
        pending = [task for task in self.tasks if not task.done() and task is not me]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
