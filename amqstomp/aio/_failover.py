"""Failover for :mod:`amqstomp.aio`: a ``failover:(...)`` URI's reconnect loop on the event loop.

The plan is the core's (:class:`amqstomp._core.backoff.ReconnectPolicy`: the order of the
brokers on each pass, the delay between passes, when to give up, ActiveMQ's
``FailoverTransport`` rules; :class:`~amqstomp._core.backoff.LossStreak`: a peer that ends
connections with a protocol error soon after CONNECTED continues the back-off instead of
starting a reconnect storm). This module only runs it: one task per reconnect (none while
connected), which opens the next socket, lets the client replay its subscriptions (each
SUBSCRIBE confirmed by its RECEIPT) and then wakes whoever waits for a socket
(:meth:`Failover.wait_up`, bounded by the caller's timeout and the URI's ``timeout``).

Licensed under the Apache License, Version 2.0.
"""
import asyncio
import logging
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from ..exception import BrokerError, ConnectFailedException, ConnectionClosedException, NotConnectedException, ReceiptTimeout
from ..log import report_callback_error
from .._core.backoff import LossStreak, ReconnectPolicy
from .._core.lifecycle import ConnectionLifecycle
from ._link import AioLink

__all__ = ["Failover", "notify", "replay_subscriptions"]

log = logging.getLogger("amqstomp.aio")

Endpoint = Tuple[str, int, bool]
#: opens one socket to (host, port, tls) within the seconds given (None: the client's connect_timeout)
OpenOne = Callable[[str, int, bool, Optional[float]], Awaitable[AioLink]]


def notify(callback: Optional[Callable[..., None]], *args: Any) -> None:
    """Call the application's ``on_interrupted``/``on_resumed``/``on_error`` (if any) on the loop;
    what it raises is logged (ERROR; on stderr too while logging is not configured:
    :func:`amqstomp.log.report_callback_error`), never the reconnect's end (nor the read of the
    frames after an ERROR)."""
    if callback is None:
        return
    try:
        callback(*args)
    except Exception:  # the application's
        report_callback_error(log, "the %s callback raised", getattr(callback, "__name__", "event"))


class Failover:
    """The reconnect loop of one client (see the module docstring).

    Args:
        loop (asyncio.AbstractEventLoop): the client's loop.
        policy (ReconnectPolicy): from the URI (:meth:`ReconnectPolicy.from_uri`).
        endpoints (list[tuple[str, int, bool]]): (host, port, tls) in URI order.
        open_one (Callable): opens one socket and waits for CONNECTED, within the seconds given
            when not None (raises ConnectFailedException).
        connected (Callable[[AioLink], Awaitable[None]]): the client takes the new socket
            (replays its subscriptions) before the waiters are woken.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, policy: ReconnectPolicy, endpoints: List[Endpoint],
                 open_one: OpenOne, connected: Callable[[AioLink], Awaitable[None]]) -> None:
        self.loop = loop
        self.policy = policy
        self.endpoints = endpoints
        self.open_one = open_one
        self.connected = connected
        self.streak = LossStreak(policy)
        self.up = asyncio.Event()
        self.task: "Optional[asyncio.Task[None]]" = None
        #: connecting, open, reconnecting, stopped, gave up and why: the one state
        #: (:mod:`amqstomp._core.lifecycle`), stepped on the loop
        self._life = ConnectionLifecycle()
        self.ever_connected = False
        self.last: Optional[Endpoint] = None
        self.up_since: Optional[float] = None
        self.reconnects = 0
        #: the last reason each broker (host, port, tls) failed, for the messages
        self.reasons: Dict[Endpoint, str] = {}

    async def first(self, bound_s: Optional[float]) -> AioLink:
        """The first socket: passes over the brokers until one connects, or the policy's
        ``startupMaxReconnectAttempts`` (else ``maxReconnectAttempts``) gives up, or
        ``bound_s`` seconds passed (None: no bound but the policy's -- the client gives
        ``connect_timeout`` unless the URI sets ``startupMaxReconnectAttempts``).

        The bound is one absolute deadline that every attempt and every back-off sleep is cut
        to (:meth:`_passes` stops when it passes): no wait here depends on a cancellation
        getting through (``asyncio.wait_for`` before Python 3.12 can swallow one that meets
        a result, and a loop it was meant to end would then go on for ever).

        Raises:
            ConnectRefusedError: a broker refused CONNECT (a login: trying again will not help).
            ConnectFailedException: given up, or no broker within ``bound_s`` (the brokers
                tried and their last reasons in the message).
            ConnectionClosedException: the client was closed meanwhile.
        """
        deadline = None if bound_s is None else self.loop.time() + bound_s
        self._life.connect()
        try:
            link = await self._passes(0, False, deadline, bound_s)
        except BaseException:
            self._life.loop_ended()  # not connected: back to idle (closed, when stop() came meanwhile)
            raise
        self._life.up()
        self.ever_connected = True
        return link

    @property
    def stopped(self) -> bool:
        """True once the client closed (:meth:`stop`): no more reconnects, waiters raise
        ConnectionClosedException."""
        return self._life.closing

    @property
    def gave_up(self) -> Optional[str]:
        """Why the reconnect after a loss gave up (the ConnectFailedException's text), or None."""
        cause = self._life.cause
        return None if cause is None else str(cause)

    def _tried(self) -> str:
        return "; ".join("%s:%d: %s" % (host, port, self.reasons.get((host, port, tls), "not tried yet"))
                         for host, port, tls in self.endpoints)

    def _left(self, deadline: Optional[float], bound_s: Optional[float]) -> Optional[float]:
        """Seconds left before ``deadline`` (None: no deadline); raises once none are left,
        or once the client stopped the reconnects."""
        if self.stopped:
            raise ConnectionClosedException("failover stopped: the client was closed")
        if deadline is None:
            return None
        left = deadline - self.loop.time()
        if left <= 0.0:
            raise ConnectFailedException(
                "failover: no broker connected within %.3g s (connect_timeout; the URI sets no "
                "startupMaxReconnectAttempts): %s" % (bound_s or 0.0, self._tried()))
        return left

    async def _passes(self, failed: int, ever: bool, deadline: Optional[float] = None,
                      bound_s: Optional[float] = None) -> AioLink:
        """Passes over the brokers (the policy's order and back-off) until one connects;
        each attempt and each sleep is cut to ``deadline`` (the loop's time; None: none),
        and the loop itself stops once it passed or the client stopped (see :meth:`first`)."""
        attempts = failed
        while True:
            reasons = []
            for endpoint in self.policy.order(self.endpoints, failed=self.last):
                host, port, tls = endpoint
                left = self._left(deadline, bound_s)
                try:
                    link = await self.open_one(host, port, tls, left)
                except ConnectFailedException as exc:
                    if isinstance(exc, BrokerError) and not ever:
                        raise
                    reasons.append("%s:%d: %s" % (host, port, exc))
                    self.reasons[endpoint] = str(exc)
                    continue
                if self.stopped:  # closed while this socket opened (a cancellation that did not get through)
                    link.abort()
                    self._left(deadline, bound_s)
                self.last = endpoint
                self.up_since = self.loop.time()
                return link
            attempts += 1
            if self.policy.gives_up(attempts, ever):
                raise ConnectFailedException("failover gave up after %d attempt(s): %s" % (attempts, "; ".join(reasons)))
            level = self.policy.log_level(attempts, False)
            if level is not None:
                log.log(level, "failed to connect to %s after %d attempt(s), continuing to retry",
                        [("%s:%d" % e[:2]) for e in self.endpoints], attempts)
            delay = self.policy.delay_ms(attempts) / 1000.0
            left = self._left(deadline, bound_s)
            await asyncio.sleep(delay if left is None else min(delay, left))

    def lost(self, error: Optional[BaseException]) -> None:
        """The open socket was lost (not closed by the client): reconnect in a task."""
        self.up.clear()
        if self.task is not None and not self.task.done():
            return
        self._life.lost()
        failed = self.streak.lost(self.up_since, self.loop.time(), error)
        self.task = self.loop.create_task(self._reconnect(failed))

    async def _reconnect(self, failed: int) -> None:
        try:
            while True:
                if self.streak.gives_up():
                    raise ConnectFailedException(self.streak.reason(self.last))
                if failed:
                    await asyncio.sleep(self.streak.delay_ms() / 1000.0)
                link = await self._passes(failed, True)
                self.reconnects += 1
                await self.connected(link)
                if not link.closed:
                    if not self.stopped:
                        self._life.up()
                    self.up.set()
                    return
                # lost during its replay (this task was still running: nobody else reconnects)
                failed = self.streak.lost(self.up_since, self.loop.time(), link.close_error)
        except ConnectFailedException as exc:
            if not self.stopped:  # (closed meanwhile: the close is what the waiters hear)
                self._life.fail(exc)
            log.error("failover gave up: %s", exc)
            self.up.set()  # the waiters see gave_up
        except ConnectionClosedException:
            if not self.stopped:
                raise
            # stopped by the client (a cancellation that did not get through ends here too)
        finally:
            self._life.loop_ended()

    async def wait_up(self, timeout: float, what: str) -> None:
        """Wait (``timeout`` seconds, and at most the URI's ``timeout``) until a socket is up.

        Raises:
            ConnectionClosedException: failover gave up, or the client was closed (at once).
            NotConnectedException: no socket came in time (nothing was written).
        """
        policy_s = self.policy.timeout_ms / 1000.0 if self.policy.timeout_ms >= 0 else timeout
        wait = min(timeout, policy_s)
        if not self.stopped:
            try:
                await asyncio.wait_for(self.up.wait(), wait)
            except asyncio.TimeoutError:
                raise NotConnectedException("%s not sent: no broker reconnected within %.3g s" % (what, wait)) from None
        if self.stopped:
            raise ConnectionClosedException("%s not sent: the client was closed while it waited for a reconnect"
                                            % what)
        if self.gave_up is not None:
            raise ConnectionClosedException("%s not sent: failover gave up: %s" % (what, self.gave_up))

    async def stop(self, timeout: float) -> None:
        """End the reconnect task, if one runs (the client closes), waiting for it at most
        ``timeout`` seconds; whoever waits in :meth:`wait_up` is woken at once with
        ConnectionClosedException. The task also sees :attr:`stopped` at its next step (its
        loop ends even if the cancellation did not get through)."""
        self._life.close()
        self.up.set()
        task = self.task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait((task,), timeout=max(timeout, 0.0))  # (raises nothing; never cancels)
        if task is not None and task.done() and not task.cancelled():
            task.exception()  # ended: its outcome no longer matters (retrieved: no warning)
        self.task = None

    def describe(self) -> Any:
        return {"reconnects": self.reconnects, "gave_up": self.gave_up}


async def replay_subscriptions(client: Any, link: AioLink, subs: Dict[str, Any]) -> None:
    """Failover: the new socket ``link`` of ``client`` (an :class:`amqstomp.aio.Client`) is up:
    replay every open subscription of ``subs`` (the client's, by id) on it, each SUBSCRIBE confirmed by its RECEIPT (a refused
    one ends that subscription, saying why; a replay that fails otherwise ends the socket,
    which the failover loop replaces), then ``on_resumed``."""
    client.link = link
    log.info("reconnected (%s): replaying %d subscription(s)", link.proto.server, len(subs))
    for sub in list(subs.values()):
        sub.replayed(link)
        try:
            await client.write_frame(link, "SUBSCRIBE", dict(sub.headers), b"", True, sub.timeout,
                                     "the SUBSCRIBE to %s (replay)" % sub.destination)
        except BrokerError as exc:
            subs.pop(sub.id, None)
            sub.lost(exc)
        except (ConnectionClosedException, ReceiptTimeout) as exc:
            log.warning("replay of the SUBSCRIBE to %s failed (%s): the connection is ended and "
                        "replaced", sub.destination, exc)
            link.lose("a subscription replay failed: %s" % exc)
            return
    notify(client.on_resumed)
