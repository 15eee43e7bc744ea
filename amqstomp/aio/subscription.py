"""Subscriptions and messages of :mod:`amqstomp.aio`.

A :class:`Subscription` is an async context manager (SUBSCRIBE confirmed by its
RECEIPT on entry, UNSUBSCRIBE on exit) and an async iterator of :class:`Message`.
The socket's protocol object appends each MESSAGE to the subscription's own queue
(a deque and at most one waiting future: no task per message); the prefetch
window, the pause of reading and the ACK batching are the core's
(:mod:`amqstomp._core.acks`, :class:`amqstomp.flow.SubscriptionWindow`), the
ACK/NACK headers too (:func:`amqstomp._core.frames.ack_headers`).

When a message counts as consumed (STOMP's ``ack`` modes; ActiveMQ 5.17
``ActiveMQMessageConsumer``): once the application asks for the next one (or the
subscription closes) -- the previous message was then handled, as a listener
that returned. With ``optimize_acknowledge`` that is when amqstomp's cumulative
ACK may cover it (at-least-once: a message is never acked before the
application asked for the one after it).

Licensed under the Apache License, Version 2.0.
"""
import asyncio
import collections
import logging
from asyncio import get_running_loop
from typing import (TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Coroutine, Deque, Dict, Mapping, Optional,
                    Tuple, Union)

from ..codec import Frame
from ..exception import (AcknowledgeInterruptedError, ConfigurationError, ConnectionClosedException,
                         StompException, UnknownMessageError)
from ..flow import SubscriptionWindow
from .._core import acks
from .._core.acks import PAUSE, Acking
from .._core.frames import ack_headers, ack_identity, reject_command
from ..flow import RedeliveryPolicy
from ._wake import future_maker, resume
from .handler import ErrorCallback, Handler, Workers, check_run
from .._io.timeouts import clamp_wait

if TYPE_CHECKING:
    from ._link import AioLink
    from ._port import ClientPort

__all__ = ["Subscription", "Message", "SubscriptionClosedError", "TAKEN_BY"]

#: The owner name under which a transaction's ACK/NACKs note what they took
#: (:meth:`amqstomp._core.transactions.TransactionTable.took`).
TAKEN_BY = "aio"

log = logging.getLogger("amqstomp.aio")


class SubscriptionClosedError(ConnectionClosedException):
    """The subscription ended while a receive waited: its socket was lost (no failover
    in this release), or it was closed. A :class:`ConnectionClosedException`."""


class Message:
    """One MESSAGE handed to the application.

    Attributes:
        headers (dict[str, str]): the frame's headers.
        body (bytes | str): the body (bytes; str for a ``text/*`` content type when
            the codec decodes it).
        destination (str | None), message_id (str | None): from the headers.
    """

    __slots__ = ("frame", "subscription", "link", "seq", "size", "settled", "delivery_count", "key")

    def __init__(self, frame: Frame, subscription: "Subscription", link: "AioLink", seq: int, size: int) -> None:
        self.frame = frame
        self.subscription = subscription
        self.link = link
        self.seq = seq
        self.size = size
        self.settled = False
        #: the identity its ACK names (:func:`amqstomp._core.frames.ack_identity`), derived once, when
        #: it is handed to the application of a subscription it acknowledges (empty before)
        self.key: Tuple[str, ...] = ()
        #: 1 + the broker's and this client's redeliveries of it (JMSXDeliveryCount); counted by
        #: :meth:`Subscription.run` (:func:`amqstomp._core.settle.first_delivery_count`)
        self.delivery_count = 1

    @property
    def headers(self) -> Dict[str, str]:
        return self.frame.headers

    @property
    def body(self) -> Union[bytes, str]:
        return self.frame.body

    @property
    def destination(self) -> Optional[str]:
        return self.frame.headers.get("destination")

    @property
    def message_id(self) -> Optional[str]:
        return self.frame.headers.get("message-id")

    def ack(self, *, transaction: Optional[str] = None, receipt: bool = False,
            timeout: Optional[float] = None) -> Coroutine[Any, Any, None]:
        """Acknowledge this message (STOMP 1.2 "ACK"; ``ack:client`` acknowledges every
        earlier one of its subscription too, as ActiveMQ does): ``await message.ack()`` (a
        function returning the settling coroutine, not a coroutine of its own to resume per
        message; nothing happens until it is awaited).

        Args:
            transaction (str | None): the transaction the ACK belongs to (``Transaction.ack``).
            receipt (bool): wait for the broker's RECEIPT (``timeout`` seconds).
            timeout (float | None): seconds; default the client's ``receipt_timeout``.

        Raises:
            UnknownMessageError: acknowledged already, or an ``ack:auto`` / optimized
                subscription (the broker or amqstomp acknowledges): nothing written.
            AcknowledgeInterruptedError: the socket that delivered it is gone, or its
                subscription was closed (UNSUBSCRIBE, or :meth:`Client.close`): nothing
                written; the broker redelivers it (never written on another socket). Settle
                a message before leaving its subscription's ``async with``.
            ReceiptTimeout, BrokerError: with ``receipt``.
            WrongEventLoopError: awaited on another loop than its client's (as every await of
                :mod:`amqstomp.aio`): nothing written.
        """
        return self.subscription.settle_message(self, "ACK", transaction, receipt, timeout)

    def nack(self, *, transaction: Optional[str] = None, receipt: bool = False,
             timeout: Optional[float] = None) -> Coroutine[Any, Any, None]:
        """Reject this message (STOMP 1.2 "NACK"; an ACK on STOMP 1.0, which has no NACK).
        ActiveMQ 5.x takes it as a poison acknowledgement: a persistent message goes to its
        DLQ (after the broker's redelivery policy with its ``redeliveryPlugin``), a
        non-persistent one is dropped; it is not requeued as on RabbitMQ. Raises as :meth:`ack`
        (``await message.nack()``)."""
        return self.subscription.settle_message(self, "NACK", transaction, receipt, timeout)

    def __repr__(self) -> str:
        return "<aio.Message %s from %s>" % (self.message_id, self.destination)


class Subscription(Acking):
    """One subscription (see the module docstring); made by :meth:`Client.subscribe`.

    Attributes:
        id (str): the subscription id (the SUBSCRIBE's ``id`` header).
        destination (str), ack (str): as subscribed.
        window (SubscriptionWindow): the core's prefetch window.

    Its API: :meth:`get`, ``async for``, ``async with``, :meth:`close`. The other methods
    (``deliver``, ``lost``, ``interrupted``, ``replayed``, ``settle_message``, ``given_back``,
    ``closed_by_client``) are the package's own (public names only because another object calls
    them); not part of the API.
    """

    def __init__(self, client: "ClientPort", sub_id: str, destination: str, ack: str, headers: Dict[str, Any],
                 window: SubscriptionWindow, optimize_acknowledge: bool, timeout: float,
                 redelivery_policy: Optional[RedeliveryPolicy] = None) -> None:
        Acking.__init__(self, window)
        self.closed = True  # until SUBSCRIBEd
        self.client = client
        self.id = sub_id
        self.destination = destination
        self.ack = ack
        self.headers = headers
        self.timeout = timeout
        self.app_acked = acks.application_acks(ack, optimize_acknowledge)
        self.link: Optional["AioLink"] = None
        self._queue: Deque[Message] = collections.deque()
        #: the receives waiting, oldest first (each woken once, for one message, or all at the end)
        self._waiters: "Deque[asyncio.Future[None]]" = collections.deque()
        self._new_future: "Optional[Callable[[], asyncio.Future[None]]]" = None  # (_wake.future_maker)
        self._seq = 0
        #: messages delivered by the read being handled while receives waited (woken after it)
        self._delivered = 0
        self._handed: Optional[Message] = None  # handed over, its consumption not yet counted
        self._unacked: Dict[Tuple[str, ...], Message] = {}
        self._timer: Optional[asyncio.TimerHandle] = None
        self._ended: Optional[BaseException] = None
        #: of the messages whose handler raised (:meth:`run`)
        self.redelivery_policy = redelivery_policy if redelivery_policy is not None else RedeliveryPolicy()
        #: the workers of :meth:`run` while it runs
        self.workers: Optional[Workers] = None

    # ------------------------------------------------------------ the loop side (the socket's protocol)

    def deliver(self, frame: Frame, link: "AioLink") -> None:
        """A MESSAGE for this subscription (called by the client on the loop)."""
        body = frame.body
        size = len(body)
        now = int(link.clock() * 1000) if self.clocked else 0
        self._seq += 1
        flags = acks.delivered(self, now, size)
        if flags & PAUSE:
            link.hold_reading(self)
        self._queue.append(Message(frame, self, link, self._seq, size))
        if self._waiters:
            self._delivered += 1
            if self._delivered == 1:
                link.after_read.append(self._wake_delivered)

    def _wake_delivered(self) -> None:
        """The read's frames were all delivered: wake a receive per message delivered while
        receives waited (FIFO); a receive without a deadline resumes now, in this turn of the
        loop, and takes what is queued (:func:`amqstomp.aio._wake.resume`)."""
        count, self._delivered = self._delivered, 0
        queue, waiters = self._queue, self._waiters
        while count and queue and waiters:
            waiter = waiters.popleft()
            if not waiter.done():  # (a cancelled receive's is: the next one gets the message)
                count -= 1
                resume(waiter)

    def _wake_one(self) -> None:
        """Wake the oldest receive still waiting (FIFO), once: it takes the next message."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _wake_all(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def lost(self, error: BaseException) -> None:
        """Its socket ended: receives waiting and to come raise ``error`` once the queue is empty."""
        if self._ended is None:
            self._ended = error
        self.closed = True
        self._cancel_timer()
        self._wake_all()

    def interrupted(self) -> None:
        """Failover: its socket was lost; it stays open and is replayed on the next one. What
        the lost socket's window counted is void (the broker redelivers what was not
        acknowledged): reset, with the ACK batching state, so no ACK of the lost socket's
        messages is ever written on the new one."""
        self._cancel_timer()
        self.window.reset()
        self.failures.clear()
        self.newest = None
        self.named = None
        self.slow = False
        self._unacked.clear()  # their ACKs are refused (AcknowledgeInterruptedError: the socket is gone)

    def replayed(self, link: "AioLink") -> None:
        """Failover: its SUBSCRIBE goes out again on ``link``; deliveries count from zero."""
        self.interrupted()
        self.link = link

    # ------------------------------------------------------------ receiving

    def __aiter__(self) -> AsyncIterator[Message]:
        return self

    def __anext__(self) -> Coroutine[Any, Any, Message]:
        """The next message (no timeout). The iteration ends (StopAsyncIteration) once the
        application closed the subscription or its client -- at once, buffered messages
        dropped; it raises SubscriptionClosedError when the socket was lost (no failover).
        (A plain function returning the receive's coroutine: no coroutine of its own to
        resume per message.)"""
        return self._receive(None, True)

    async def get(self, timeout: Optional[float] = None) -> Message:
        """The next message, within ``timeout`` seconds (None: until one comes or the
        subscription ends). Several tasks may wait at once: each message goes to one of
        them, the longest waiting first (a message then counts as consumed once any reader
        asks for or gets the next one: with ``optimize_acknowledge``, read with one task for
        at-least-once).

        Raises:
            asyncio.TimeoutError: none came in time (nothing taken: a cancelled or timed-out
                receive leaves the queue as it was, and passes a wake-up it got on).
            SubscriptionClosedError: the subscription ended: its socket lost (after what it
                had delivered), or closed by the application or :meth:`Client.close` (at once:
                what was buffered is dropped).
            InvalidTimeoutError: ``timeout`` is not a number of seconds >= 0 (negative, NaN,
                infinite, not a number: the message names it); 0 is a poll.
        """
        return await self._receive(timeout, False)

    async def _receive(self, timeout: Optional[float], iterating: bool) -> Message:
        """:meth:`get`; ``iterating`` (``async for``): StopAsyncIteration, not
        SubscriptionClosedError, once the application closed the subscription or its client."""
        link = self.link
        loop = link.loop if link is not None else self.client.loop
        if get_running_loop() is not loop:  # (the socket's loop is the client's: check_loop says why, no call per message)
            self.client.check_loop()
        wait = None if timeout is None else clamp_wait(timeout, "timeout", strict=True)
        if self._handed is not None:
            self._count_handed()
        queue = self._queue
        deadline = None if wait is None else loop.time() + wait
        while True:
            while queue:
                message = queue.popleft()
                if message.link is not self.link and not self.client.hands_over(self, message.link):
                    # a lost socket's delivery (failover): the broker redelivers it; drop every such one
                    while queue and queue[0].link is message.link:
                        queue.popleft()
                    continue
                if self._handed is not None:
                    self._count_handed()  # another reader's message, handed while this one waited
                self._handed = message
                if self.app_acked:
                    key = message.key = ack_identity(message.link.proto.version, message.frame.headers)
                    self._unacked[key] = message
                return message
            if self._ended is not None:
                if iterating and isinstance(self._ended, _ClosedByApp):
                    raise StopAsyncIteration
                raise SubscriptionClosedError("subscription %s ended: %s" % (self.id, self._ended))
            new_future = self._new_future
            if new_future is None:
                new_future = self._new_future = future_maker(loop)
            waiter = new_future()  # resumed by the reading callback at once (_wake.py)
            awaited: Awaitable[None] = waiter
            if deadline is not None:
                awaited = asyncio.wait_for(waiter, max(0.0, deadline - loop.time()))
            self._waiters.append(waiter)
            try:
                await awaited
            except BaseException as exc:
                # cancelled or timed out: take nothing; a wake-up this receive got goes to the next one
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    if queue or self._ended is not None:
                        self._wake_one()
                if isinstance(exc, asyncio.TimeoutError):
                    raise asyncio.TimeoutError("no message on %s (subscription %s) within %.3g s"
                                               % (self.destination, self.id, wait or 0.0)) from None
                raise

    def _count_handed(self) -> None:
        """The message handed before was handled: the core counts it consumed (which may
        decide an ACK, a resume of reading, a flush deadline)."""
        message = self._handed
        if message is None:
            return
        self._handed = None
        link = message.link
        if link is not self.link or self.closed:
            return  # a lost socket's delivery: its window is gone
        now = int(link.clock() * 1000) if self.clocked else 0
        todo = acks.consumed(self, message.frame.headers, message.seq, message.size, now, self._timer is not None)
        if todo is not None:
            self._apply(todo, link)

    def _apply(self, todo: acks.AckDue, link: "AioLink") -> None:
        if todo.resume:
            link.release_reading(self)
        if todo.ack is not None:
            try:
                link.write(link.encode("ACK", ack_headers(link.proto.version, todo.ack,
                                                         link.proto.dialect == "activemq")))
            except StompException as exc:  # the socket is gone: the broker redelivers
                log.debug("batched ACK of subscription %s not written: %s", self.id, exc)
        if todo.flush_at_ms is not None and self._timer is None and not link.closed:
            self._timer = link.loop.call_at(todo.flush_at_ms / 1000.0, self._flush_due)

    def _flush_due(self) -> None:
        self._timer = None
        link = self.link
        if link is None or link.closed:
            return
        todo = acks.timer_due(self, int(link.clock() * 1000))
        if todo is not None:
            self._apply(todo, link)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ------------------------------------------------------------ settling

    async def settle_message(self, message: Message, cmd: str, transaction: Optional[str], receipt: bool,
                             timeout: Optional[float], frame_headers: Optional[Mapping[str, str]] = None) -> None:
        link = message.link
        if get_running_loop() is not link.loop:  # (its socket's loop is the client's; as in _receive)
            self.client.check_loop()
        if not self.app_acked:
            raise UnknownMessageError("%s of %r: subscription %s (ack:%s%s) is acknowledged by %s; nothing sent"
                                      % (cmd, message, self.id, self.ack,
                                         ", optimize_acknowledge" if self.window.optimize_acknowledge else "",
                                         "the broker" if self.ack == "auto" else "amqstomp"))
        # a message settled before its subscription ended or its socket went is "acknowledged already" (below)
        if (self._ended is not None or link.closed or link is not self.link) and not message.settled:
            if not link.closed and link is self.link:
                raise AcknowledgeInterruptedError(
                    "%s of %r not sent: subscription %s was closed (%s); the broker redelivers the message"
                    % (cmd, message, self.id, self._ended))
            raise AcknowledgeInterruptedError(
                "%s of %r not sent: the connection that delivered it was lost (%s); the broker redelivers it"
                % (cmd, message, link.close_reason))
        if message.settled or message.key not in self._unacked:
            raise UnknownMessageError("%s of %r: acknowledged already (or by a cumulative ACK); nothing sent"
                                      % (cmd, message))
        version = link.proto.version
        headers: Dict[str, Any] = (dict(frame_headers) if frame_headers is not None
                                   else ack_headers(version, message.frame.headers, link.proto.dialect == "activemq"))
        if cmd == "NACK":
            cmd = reject_command(version)
        if transaction is not None:
            self.client.transaction_check(cmd, transaction)
            headers["transaction"] = transaction
        # decided and written with no await in between: a cancellation leaves no half state
        cumulative = self.ack == "client"
        if cumulative:
            taken = [other for other in self._unacked.values() if other.seq <= message.seq]
        else:
            taken = [message]
        for other in taken:
            other.settled = True
            del self._unacked[other.key]
        if transaction is not None:  # an ABORT gives them back (Transaction, the core's table)
            self.client.transactions.took(transaction, TAKEN_BY, taken)
        if acks.acked_by_application(self, cumulative):
            link.release_reading(self)
        if receipt:
            await self.client.write_frame(link, cmd, headers, b"", True, timeout, _Settling((cmd, message)))
        elif self.client.write_now(link, cmd, headers, b""):  # (no coroutine per ACK: issue 23)
            await link.drain(self.client.timeout_s(timeout), _Settling((cmd, message)))

    # ------------------------------------------------------------ the handler form

    async def run(self, handler: Handler, *, concurrency: int = 1,
                  on_error: Optional[ErrorCallback] = None) -> None:
        """Hand every message to ``await handler(message)``, at most ``concurrency`` at once,
        until the subscription ends (:meth:`close` from another task, :meth:`Client.close`);
        returning ACKs the message, raising redelivers it by the subscription's
        ``redelivery_policy`` then NACKs it (:mod:`amqstomp.aio.handler`). Cancelling ``run``
        cancels the handlers running (their messages stay unacknowledged: redelivered).

        Args:
            handler (async callable): takes the :class:`Message`; its return value is ignored.
            concurrency (int): handlers running at once (worker tasks; messages, >= 1; 1 for ``ack:client``).
            on_error (Callable[[Exception, Message], None] | None): told of each exception a
                handler raised, on the loop (default: a WARNING with the traceback, no body).

        Raises:
            ConfigurationError: see :func:`amqstomp.aio.handler.check_run`; or the subscription
                was not entered (``async with`` it first).
            SubscriptionClosedError: the subscription ended (closed, or its socket lost without failover).
        """
        self.client.check_loop()
        if self._ended is not None:
            raise SubscriptionClosedError("subscription %s ended: %s" % (self.id, self._ended))
        if self.link is None:
            raise ConfigurationError("run() of subscription %s before its SUBSCRIBE: use it in 'async with' first"
                                     % self.id)
        check_run(self, handler, concurrency)
        workers = self.workers = Workers(self, handler, concurrency, on_error)
        try:
            await workers.wait()
        finally:
            if self.workers is workers:
                self.workers = None
        if self._ended is not None and not isinstance(self._ended, _ClosedByApp):
            raise SubscriptionClosedError("subscription %s ended: %s" % (self.id, self._ended))

    async def stop_handlers(self, timeout: float, caller: "Optional[asyncio.Task[Any]]" = None) -> None:
        """Closing: :meth:`run`'s handlers get ``timeout`` seconds to finish (ACKs written), then are
        cancelled; none handed a message after this call. ``caller``: the task closing (default
        the current one), never waited for (:meth:`Workers.stop`)."""
        workers = self.workers
        if workers is not None:
            await workers.stop(timeout, caller)

    # ------------------------------------------------------------ life

    def given_back(self, message: Message) -> None:
        """The transaction whose ACK/NACK took ``message`` was aborted: it is unsettled again
        (the application may ACK it again; the broker redelivers what stays unacknowledged)."""
        if self.link is message.link and not self.closed:
            message.settled = False
            self._unacked[message.key] = message

    async def __aenter__(self) -> "Subscription":
        """SUBSCRIBE, confirmed by its RECEIPT (:meth:`Client.subscribe`). A subscription has one
        life: entered once, closed once.

        Raises:
            ConfigurationError: entered already (open, or ended: closed, refused, or its
                socket lost); nothing is written.
        """
        self.client.check_loop()
        if self._ended is not None:
            raise ConfigurationError("subscription %s to %s has ended (%s): a closed subscription is not reusable; "
                                     "create a new one with client.subscribe(...)"
                                     % (self.id, self.destination, self._ended))
        if self.link is not None:
            raise ConfigurationError("subscription %s to %s is open already: enter it once ('async with' one "
                                     "client.subscribe(...) per subscription)" % (self.id, self.destination))
        await self.client.confirm_subscription(self)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self, timeout: Optional[float] = None) -> None:
        """UNSUBSCRIBE (after the ACK amqstomp holds back for what was consumed, with
        optimized acknowledge), waiting for its RECEIPT ``timeout`` seconds (default the
        client's ``receipt_timeout``). No effect when closed already or its socket is gone.

        Raises:
            ReceiptTimeout: no RECEIPT in time (the broker may still deliver until it answers).
        """
        self.client.check_loop()
        if self._ended is not None:
            return
        await self.stop_handlers(self.client.timeout_s(timeout))
        if self._ended is not None:
            return
        self._count_handed()
        link = self.link
        self._ended = _ClosedByApp("closed by the application")
        self._drop_buffered("closed by the application")
        self._cancel_timer()
        self.client.forget(self)
        if link is None or link.closed:
            self.closed = True
            self.lost(self._ended)
            return
        token = acks.closing(self, int(link.clock() * 1000))
        self.closed = True
        if token is not None:
            link.write(link.encode("ACK", ack_headers(link.proto.version, token, link.proto.dialect == "activemq")))
        link.release_reading(self)
        self.lost(self._ended)
        await self.client.write_frame(link, "UNSUBSCRIBE", {"id": self.id}, b"", True, timeout,
                                       "UNSUBSCRIBE of %s" % self.id)

    def closed_by_client(self) -> None:
        """:meth:`Client.close`: it ends now (the client's DISCONNECT unsubscribes it);
        receives raise SubscriptionClosedError and iterations end, buffered or not."""
        if self._ended is None:
            self._ended = _ClosedByApp("the client was closed")
            self._drop_buffered("the client was closed")
        self.lost(self._ended)

    def _drop_buffered(self, why: str) -> None:
        """The subscription ends by the application's doing: no more messages are handed
        out. With ``ack:auto`` those buffered are lost -- ActiveMQ settled each when it
        dispatched it -- and a WARNING says how many; otherwise the broker redelivers them."""
        count = len(self._queue)
        self._queue.clear()
        if not count:
            return
        if self.ack == "auto":
            log.warning("subscription %s to %s %s with %d buffered message(s) dropped: with ack:auto the broker "
                        "settled them when it dispatched them, so they are lost (for at-least-once use "
                        "ack='client-individual'; prefetch_size=1 bounds the loss)",
                        self.id, self.destination, why, count)
        else:
            log.debug("subscription %s %s: %d buffered unacknowledged message(s) dropped (the broker "
                      "redelivers them)", self.id, why, count)

    def __repr__(self) -> str:
        return "<aio.Subscription %s %s ack:%s>" % (self.id, self.destination, self.ack)


class _Settling(Tuple[str, Message]):
    """What an ACK/NACK is, ``(cmd, message)``, for an error's text only: ``str()`` formats it
    (the message's ``repr``) when a timeout or a lost link names it, not once per settled
    message (a tuple: made with no Python call per message)."""

    __slots__ = ()

    def __str__(self) -> str:
        return "%s of %r" % (self[0], self[1])


class _ClosedByApp(StompException):
    """Marks a subscription the application closed (its iteration then just ends)."""

