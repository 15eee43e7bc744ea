"""The asyncio client: :func:`connect` and :class:`Client`.

One socket per client, one :class:`~amqstomp.aio._link.AioLink` protocol object on
it (no reading task: the loop delivers bytes to it), the sans-I/O core for every
protocol decision (:mod:`amqstomp._core`). Every public await takes a timeout
(seconds; the client's default when None) and none waits longer.

Errors are those of the threaded APIs (:mod:`amqstomp.exception`): a refused
CONNECT is :class:`~amqstomp.exception.ConnectRefusedError`, an ERROR answering a
frame :class:`~amqstomp.exception.BrokerError` with the broker's reason, no
RECEIPT in time :class:`~amqstomp.exception.ReceiptTimeout`, a SEND written whose
socket was lost before its RECEIPT :class:`~amqstomp.exception.SendInDoubtError`.

Licensed under the Apache License, Version 2.0.
"""
import asyncio
import itertools
import logging
import ssl as _ssl
from asyncio import get_running_loop
from typing import Any, Callable, Dict, Generator, List, Literal, Mapping, Optional, Sequence, Tuple, Union

from ..codec import Frame
from ..exception import (BrokerError, ConfigurationError, ConnectFailedException, ConnectionClosedException,
                         NotConnectedException, ReceiptTimeout, SendInDoubtError, StompException, WrongEventLoopError)
from ..flow import PrefetchPolicy, RedeliveryPolicy
from .._core.backoff import ReconnectPolicy
from .._core.events import ErrorIn, LinkEvent
from .._core.settle import HAND_OVER, HAND_OVER_NOTE, HAND_OVER_NOTE_CUMULATIVE, hand_over
from .._core.frames import ACCEPT_VERSIONS, connect_headers
from .._core.subscriptions import subscribe_plan, subscribe_request
from .._core.transactions import TransactionTable
from .._core.dialect import check_broker, connect_host
from .._core.heartbeat import check_receive_scale
from .._io.timeouts import clamp_wait
from ._failover import Failover, notify, replay_subscriptions
from ._options import (DEFAULT_CLOSE_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PRODUCER_WINDOW, DEFAULT_RECEIPT_TIMEOUT,
                       DEFAULT_REDELIVERY, MIN_TIMEOUT_S, SEND_RESENDS, check_connect_objects, check_timeout,
                       resolve_target)
from ._link import AioLink, LostAfterWrite, open_link
from ._sending import ProducerWindow, send_frame
from .handler import stop_handlers
from .subscription import Subscription
from .transaction import Transaction

__all__ = ["connect", "Client"]

log = logging.getLogger("amqstomp.aio")

Hosts = Union[str, Sequence[Tuple[str, Union[int, str]]]]
#: The STOMP ``ack`` modes a subscription takes (STOMP 1.2 "SUBSCRIBE").
AckMode = Literal["auto", "client", "client-individual"]
#: the message of the BrokerError ``on_error`` is given (the broker's reason follows)
UNSOLICITED = "the broker sent an ERROR answering no await of this client"


def connect(url_or_hosts: Hosts, *, login: Optional[str] = None, passcode: Optional[str] = None,
            heartbeats: Tuple[int, int] = (0, 0), vhost: Optional[str] = None, client_id: Optional[str] = None,
            connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT,
            receipt_timeout: Optional[float] = DEFAULT_RECEIPT_TIMEOUT,
            close_timeout: Optional[float] = DEFAULT_CLOSE_TIMEOUT,
            version: str = "1.2", ssl: Optional[_ssl.SSLContext] = None, heart_beat_receive_scale: float = 1.5,
            broker: Optional[str] = None, producer_window: int = DEFAULT_PRODUCER_WINDOW,
            on_interrupted: Optional[Callable[[str], None]] = None,
            on_resumed: Optional[Callable[[], None]] = None,
            on_error: Optional[Callable[[BrokerError], None]] = None) -> "Client":
    """A client for one broker: ``async with connect(...) as client`` (or
    ``client = await connect(...)`` and ``await client.close()``).

    Args:
        url_or_hosts (str | list[tuple[str, int]]): ``stomp://host:port`` or
            ``stomp+ssl://host:port`` (the URI grammar of :func:`amqstomp.uri.parse_uri`; its
            ``heartBeat``, ``host``, ``stompVersion``, ``jms.userName``/``jms.password``,
            ``jms.clientID`` options fill the arguments left at their defaults), or
            (host, port) pairs tried in order until one connects (a port is an int or a str of
            its digits, ``"61613"``, as the threaded API takes it), or a ``failover:(...)?...`` URI:
            reconnects by the core's plan (:class:`~amqstomp._core.backoff.ReconnectPolicy`, the URI's
            ``initialReconnectDelay``, ``maxReconnectAttempts``, ``randomize``, ``timeout``...),
            subscriptions replayed on every new socket, each SUBSCRIBE confirmed by its RECEIPT.
            Its first connect is bounded by the URI's ``startupMaxReconnectAttempts`` when it
            sets one (-1: for ever, as ActiveMQ's FailoverTransport), else by ``connect_timeout``
            over all passes (ConnectFailedException naming the brokers tried).
        login, passcode (str | None): CONNECT's credentials (the passcode is never logged).
        heartbeats (tuple[int, int]): (cx, cy) ms (STOMP 1.2 "Heart-beating").
        vhost (str | None): CONNECT's ``host`` header (default ``/``).
        client_id (str | None): ActiveMQ's ``client-id`` (durable subscriptions).
        connect_timeout (float | None): seconds for the socket and the CONNECTED frame, per
            host (None: 10). With failover, also the bound of the first connect over all
            passes when the URI gives no ``startupMaxReconnectAttempts``.
        receipt_timeout (float | None): default seconds a RECEIPT is awaited (None: 10).
        close_timeout (float | None): default seconds :meth:`Client.close` waits for
            DISCONNECT's RECEIPT (None: 5). Every timeout is >= :data:`MIN_TIMEOUT_S`.
        version (str): the highest STOMP version offered (``1.0``, ``1.1``, ``1.2``).
        ssl (ssl.SSLContext | None): for ``stomp+ssl://`` (default: ``ssl.create_default_context()``).
        heart_beat_receive_scale (float): receive grace factor, >= 1.0 (1.5).
        broker (str | None): the broker dialect (``activemq``, ``rabbitmq``...; checked by
            :func:`amqstomp._core.dialect.check_broker`); None or ``auto``: CONNECTED's ``server``.
        producer_window (int): bytes of SEND bodies awaiting RECEIPTs at once; a send
            beyond waits for room (back-pressure; ActiveMQ's ``producerWindowSize``).
        on_interrupted (Callable[[str], None] | None): failover: called on the loop when the
            socket is lost and a reconnect begins, with the reason (ActiveMQ's
            ``TransportListener.transportInterrupted``); it must not block.
        on_resumed (Callable[[], None] | None): failover: called on the loop once a new socket
            is up and the subscriptions were replayed (``transportResumed``).
        on_error (Callable[[BrokerError], None] | None): called on the loop with a
            :class:`~amqstomp.exception.BrokerError` (``frame``, ``reason``) for each ERROR frame
            after CONNECTED that answers none of this client's awaits (STOMP 1.2 "ERROR"; one
            that answers an await raises there); it must not block. Every ERROR is logged
            (WARNING, ``amqstomp.aio``), with or without it.

    Raises:
        ConfigurationError: a URI that is not understood, ``url_or_hosts`` neither a str nor a
            list of (host, port) pairs, a bad host or a port that is no number from 1 to 65535
            (``"abc"``: named in the message), an unknown ``broker`` or ``version`` (a str), a
            ``heart_beat_receive_scale`` below 1.0 (TypeError: not a number), a ``login`` or
            ``passcode`` that is not a str (or None).
        InvalidTimeoutError: a timeout that is not a finite number >= :data:`MIN_TIMEOUT_S` (or None).
    """
    return Client(url_or_hosts, login=login, passcode=passcode, heartbeats=heartbeats, vhost=vhost,
                  client_id=client_id, connect_timeout=connect_timeout, receipt_timeout=receipt_timeout,
                  close_timeout=close_timeout, version=version, ssl=ssl,
                  heart_beat_receive_scale=heart_beat_receive_scale, broker=broker, producer_window=producer_window,
                  on_interrupted=on_interrupted, on_resumed=on_resumed, on_error=on_error)


class Client:
    """An asyncio STOMP client (made by :func:`connect`; see the module docstring).

    Its API: :meth:`open` (``await``, ``async with``), :meth:`send`, :meth:`subscribe`, :meth:`transaction`,
    :meth:`close`, :attr:`connected`, :attr:`server`. Its other methods (``ready``, ``write_frame``...) are
    the package's own (public names: its subscriptions and transactions call them); not the API."""

    def __init__(self, url_or_hosts: Hosts, *, login: Optional[str] = None, passcode: Optional[str] = None,
                 heartbeats: Tuple[int, int] = (0, 0), vhost: Optional[str] = None,
                 client_id: Optional[str] = None, connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT,
                 receipt_timeout: Optional[float] = DEFAULT_RECEIPT_TIMEOUT,
                 close_timeout: Optional[float] = DEFAULT_CLOSE_TIMEOUT, version: str = "1.2",
                 ssl: Optional[_ssl.SSLContext] = None,
                 heart_beat_receive_scale: float = 1.5, broker: Optional[str] = None,
                 producer_window: int = DEFAULT_PRODUCER_WINDOW,
                 on_interrupted: Optional[Callable[[str], None]] = None,
                 on_resumed: Optional[Callable[[], None]] = None,
                 on_error: Optional[Callable[[BrokerError], None]] = None) -> None:
        self.connect_timeout = check_timeout(connect_timeout, "connect_timeout", DEFAULT_CONNECT_TIMEOUT)
        self.receipt_timeout = check_timeout(receipt_timeout, "receipt_timeout", DEFAULT_RECEIPT_TIMEOUT)
        self.close_timeout = check_timeout(close_timeout, "close_timeout", DEFAULT_CLOSE_TIMEOUT)
        #: the reconnect plan of a ``failover:`` URI, else None
        self.policy: Optional[ReconnectPolicy] = None
        self.failover: Optional[Failover] = None
        check_connect_objects(ssl, {"on_interrupted": on_interrupted, "on_resumed": on_resumed, "on_error": on_error})
        target = resolve_target(url_or_hosts, ssl is not None, heartbeats, vhost, version, login, passcode, client_id)
        self.hosts: List[Tuple[str, int, bool]] = target.hosts
        self.policy = target.policy
        #: failover: the bound, seconds, of the first connect over all passes (None: the URI's
        #: ``startupMaxReconnectAttempts`` bounds it)
        self._first_bound: Optional[float] = None if target.startup_given else self.connect_timeout
        heartbeats, vhost, version = target.heartbeats, target.vhost, target.version
        login, passcode, client_id = target.login, target.passcode, target.client_id
        check_receive_scale(heart_beat_receive_scale)
        broker = check_broker(broker)
        cx, cy = heartbeats
        if isinstance(cx, bool) or isinstance(cy, bool) or not isinstance(cx, int) or not isinstance(cy, int) \
                or cx < 0 or cy < 0:
            raise ConfigurationError("heartbeats must be two ints >= 0 (ms), got %r" % (heartbeats,))
        if isinstance(producer_window, bool) or not isinstance(producer_window, int) or producer_window < 1:
            raise ConfigurationError("producer_window must be an int >= 1 (bytes), got %r" % (producer_window,))
        self.version = version
        self.heartbeats = (cx, cy)
        self.vhost, self.client_id = vhost, client_id
        self._login, self._passcode = login, passcode
        self.ssl, self.grace = ssl, heart_beat_receive_scale
        self.broker = broker
        self.on_interrupted, self.on_resumed, self.on_error = on_interrupted, on_resumed, on_error
        self.prefetch_policy = PrefetchPolicy()
        self.link: Optional[AioLink] = None
        self._seq = 0
        self._ids = itertools.count(1)
        self._subs: Dict[str, Subscription] = {}
        self.transactions = TransactionTable(self.link_alive)
        #: the bytes of SEND bodies awaiting RECEIPTs (``producer_window``)
        self.window = ProducerWindow(producer_window)
        self._closing = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    # ------------------------------------------------------------ connecting

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = get_running_loop()
        return self._loop

    def check_loop(self) -> None:
        """Every public await's first call (its subscriptions', transactions', messages' too), before anything is
        written: WrongEventLoopError unless on the loop this client was opened on (:meth:`open` binds it)."""
        if get_running_loop() is not self._loop and self._loop is not None:
            raise WrongEventLoopError()

    @property
    def connected(self) -> bool:
        """True from CONNECTED until the socket ends or :meth:`close`."""
        link = self.link
        return link is not None and not link.closed and link.proto.connected and not self._closing

    @property
    def server(self) -> Optional[str]:
        """CONNECTED's ``server`` header (None before, or when the broker sends none)."""
        return None if self.link is None else self.link.proto.server

    def link_alive(self, seq: int) -> bool:
        """True while socket number ``seq`` is the open one (the settlement core's ``Links``)."""
        link = self.link
        return link is not None and link.seq == seq and not link.closed

    def hands_over(self, sub: Subscription, link: AioLink) -> bool:
        """Whether a queued MESSAGE of socket ``link`` still goes to the application: the
        settlement core's hand-over rule (:func:`amqstomp._core.settle.hand_over`: with
        failover, an acknowledged delivery of a socket lost since is dropped -- the broker
        redelivers it on the new one)."""
        verdict = hand_over(link.seq, 0, sub, self.failover is not None, self)
        return verdict == HAND_OVER or verdict == HAND_OVER_NOTE or verdict == HAND_OVER_NOTE_CUMULATIVE

    async def open(self) -> "Client":
        """Open the socket and wait for CONNECTED (each (host, port) in order, each within
        ``connect_timeout`` seconds).

        Raises:
            ConnectRefusedError: the broker answered CONNECT with ERROR (its reason in the message).
            ConnectFailedException: no broker connected (the reasons, per host, in the message).
        """
        if self.link is not None:
            raise ConnectFailedException("this client was opened already (make a new one with connect())")
        self._loop = get_running_loop()  # (a failed open leaves no socket: the next may run on another loop)
        if self.policy is not None:
            self.failover = Failover(self.loop, self.policy, self.hosts, self._open_one, self._reconnected)
            self.link = await self.failover.first(self._first_bound)
            return self
        reasons = []
        for host, port, tls in self.hosts:
            try:
                self.link = await self._open_one(host, port, tls)
                return self
            except ConnectFailedException as exc:
                if isinstance(exc, BrokerError):
                    raise
                reasons.append("%s:%d: %s" % (host, port, exc))
        raise ConnectFailedException("could not connect: %s" % "; ".join(reasons))

    async def _open_one(self, host: str, port: int, tls: bool, within: Optional[float] = None) -> AioLink:
        """One socket and its CONNECTED within ``connect_timeout`` s (and ``within`` s: failover's bound)."""
        self._seq += 1
        seq = self._seq
        loop = self.loop
        context = self.ssl if self.ssl is not None else (_ssl.create_default_context() if tls else None)
        headers = connect_headers(ACCEPT_VERSIONS[self.version], connect_host(self.version, self.vhost),
                                  self.heartbeats, self._login, self._passcode, self.client_id)

        def factory() -> AioLink:
            return AioLink(loop, seq, self._on_message, self._on_lost, self.version, self.grace, self.broker,
                           self._on_event)

        timeout = self.connect_timeout if within is None else min(self.connect_timeout, within)
        return await open_link(loop, factory, host, port, context, headers, timeout)

    def __await__(self) -> Generator[Any, None, "Client"]:
        return self.open().__await__()

    async def __aenter__(self) -> "Client":
        if self.link is None:
            await self.open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def ready(self, timeout: Optional[float], what: str) -> AioLink:
        """The open socket; with failover, waits for one while reconnecting (``timeout`` seconds).

        Raises:
            ConnectionClosedException: closed (or failover gave up); NotConnectedException: none in time.
        """
        failover = self.failover
        if failover is not None and not self._closing and (self.link is None or self.link.closed):
            await failover.wait_up(self.timeout_s(timeout), what)
        return self.require()

    def require(self) -> AioLink:
        link = self.link
        if link is None:
            raise NotConnectedException("not connected: await the client (or use it in async with) first")
        if link.closed:
            raise ConnectionClosedException("connection closed: %s" % link.close_reason)
        if self._closing:
            raise ConnectionClosedException("connection closed: the client is closing")
        return link

    # ------------------------------------------------------------ the loop side

    def _on_message(self, frame: Frame) -> None:
        sub = self._subs.get(frame.headers.get("subscription", ""))
        link = self.link
        if sub is None or link is None:
            log.debug("MESSAGE for no open subscription (%r): dropped", frame.headers.get("subscription"))
            return
        sub.deliver(frame, link)

    def _on_event(self, event: LinkEvent) -> None:
        """The core's listener event of an ERROR answering no await (ErrorIn): to ``on_error``."""
        if isinstance(event, ErrorIn):
            notify(self.on_error, BrokerError(UNSOLICITED, event.arg))

    def _on_lost(self, link: AioLink) -> None:
        if link is not self.link:
            return
        if not link.proto.by_client:
            log.warning("connection lost: %s", link.close_reason)
        failover = self.failover
        if failover is not None and not self._closing and not link.proto.by_client:
            for sub in list(self._subs.values()):
                sub.interrupted()  # replayed on the next socket; the transactions become stale
            failover.lost(link.close_error)
            notify(self.on_interrupted, link.close_reason)
        else:
            error = ConnectionClosedException("connection closed: %s" % link.close_reason)
            for sub in list(self._subs.values()):
                sub.lost(error)
            # (lost or closed by close(): its transactions stay, stale -- the broker rolled them back with the
            # connection: commit() raises TransactionRolledBackError, abort() has nothing to do)
        self.window.wake_all()

    async def _reconnected(self, link: AioLink) -> None:
        """Failover: the new socket is up (:func:`~amqstomp.aio._failover.replay_subscriptions`)."""
        await replay_subscriptions(self, link, self._subs)

    # ------------------------------------------------------------ writing

    def checked_timeout(self, timeout: Optional[float]) -> float:
        """A public call's ``timeout`` (seconds): ``receipt_timeout`` for None, else checked as
        :func:`check_timeout` (InvalidTimeoutError below :data:`MIN_TIMEOUT_S`), before anything is written."""
        return check_timeout(timeout, "timeout", self.receipt_timeout)

    def timeout_s(self, timeout: Optional[float]) -> float:
        """An internal wait (a deadline's remainder may be 0): None is ``receipt_timeout``."""
        if timeout is None:
            return self.receipt_timeout
        return clamp_wait(timeout, "timeout") or 0.0

    def write_now(self, link: AioLink, cmd: str, headers: Dict[str, Any], body: bytes) -> bool:
        """:meth:`write_frame` without a receipt, as a function: write one frame (whole; out at the
        end of the loop's turn, :meth:`AioLink.write`); True when the socket's buffer is then
        full -- the caller awaits :meth:`AioLink.drain`. An ACK per message runs no coroutine.

        Raises:
            ConnectionClosedException: the socket is gone (nothing written).
        """
        link.write(link.encode(cmd, headers, body), cmd == "SEND")
        return link.write_paused

    async def write_frame(self, link: AioLink, cmd: str, headers: Dict[str, Any], body: bytes, receipt: bool,
                           timeout: Optional[float], what: object) -> Optional[Frame]:
        """Write one frame (whole; out at the end of the loop's turn, :meth:`AioLink.write`) and,
        with ``receipt``, wait for its RECEIPT. ``what`` names the frame in an error's text; its ``str()`` is taken only then.

        Raises:
            ConnectionClosedException: the socket is gone (nothing written), or, with a
                receipt, it ended after the frame was written (the caller names the doubt).
            ReceiptTimeout: no RECEIPT within ``timeout`` seconds.
            WriteTimeout: without ``receipt``, the socket took no more bytes within ``timeout`` s.
            BrokerError: the broker answered ERROR.
        """
        if not receipt:
            link.write(link.encode(cmd, headers, body), cmd == "SEND")  # (write_now's, inline: a SEND per call)
            if link.write_paused:
                await link.drain(self.timeout_s(timeout), what)
            return None
        wait = self.timeout_s(timeout)
        receipt_id = "%s-%d" % (cmd.lower(), next(self._ids))
        headers["receipt"] = receipt_id
        data = link.encode(cmd, headers, body)  # (raises before anything is registered)
        future = link.expect_receipt(receipt_id)
        try:
            link.write(data)
        except BaseException:
            link.forget_receipt(receipt_id)
            future.cancel()
            raise
        try:
            return await asyncio.wait_for(future, wait)
        except ConnectionClosedException as exc:
            raise LostAfterWrite(str(exc)) from exc
        except asyncio.TimeoutError:
            raise ReceiptTimeout("no receipt for %s within %.3g s" % (what, wait)) from None
        finally:
            if not future.done() or future.cancelled():
                link.forget_receipt(receipt_id)

    async def send(self, destination: str, body: Union[bytes, str], headers: Optional[Mapping[str, Any]] = None,
                   *, receipt: bool = True, transaction: Optional[str] = None, content_type: Optional[str] = None,
                   timeout: Optional[float] = None) -> None:
        """SEND a message (STOMP 1.2 "SEND").

        Args:
            destination (str): ``/queue/a``, ``/topic/b``...
            body (bytes | str): a str is sent UTF-8 encoded (bytes, bytearray or memoryview
                otherwise).
            headers (Mapping | None): more headers (``persistent``, ``priority``...). As in the
                threaded API (:meth:`amqstomp.Connection.send`), a header whose value is None is
                left out, and ``content-length: None`` means no ``content-length`` header (ActiveMQ
                then makes a TextMessage; the body must hold no NUL byte).
            receipt (bool): True: return once the broker's RECEIPT came (the broker has
                the message); sends awaiting RECEIPTs hold at most ``producer_window``
                bytes of bodies (a send beyond waits for room). False: return once the
                frame is queued for the socket: written by the loop's next turn (or at once
                past 64 KiB queued), in order; a send waits while the transport's buffer is
                above its high-water mark. Nothing says the broker got it (a lost socket
                loses what was queued, as with any send without a receipt).
            transaction (str | None): the open transaction it belongs to.
            content_type (str | None): the ``content-type`` header.
            timeout (float | None): seconds for room and the RECEIPT (default ``receipt_timeout``).

        Raises:
            BrokerError: the broker answered ERROR (its reason in the message).
            SendInDoubtError: written, and the socket was lost before the RECEIPT (with failover,
                outside a transaction: after it was written again on :data:`SEND_RESENDS` new
                sockets; each resend is at least once: the broker may then have it twice).
            NotConnectedException: failover: no socket came back within ``timeout`` (or the
                URI's ``timeout``); nothing written.
            ConnectionClosedException: the client was closed (:meth:`close` wakes a send
                waiting for a reconnect, or for room, at once); nothing written.
            ReceiptTimeout: no RECEIPT (or no room) in time; the broker may have the message.
            WriteTimeout: (a ReceiptTimeout) ``receipt=False``: the socket took no more bytes
                within ``timeout`` (the broker stopped reading); the frame is queued, not confirmed.
            UnknownTransactionError, TransactionRolledBackError: a transaction not open here.
            InvalidDestinationError, FrameEncodeError, ConfigurationError (``headers`` naming a
                ``destination``, ``transaction``, ``content-type`` the arguments contradict, or a
                ``receipt``; :func:`~amqstomp.aio._sending.send_frame`): nothing written.
            InvalidTimeoutError: ``timeout`` is not a number of seconds >= :data:`MIN_TIMEOUT_S`;
                nothing written.
            TypeError: ``body`` is neither bytes-like nor str (the message names its type).
        """
        self.check_loop()
        data, frame_headers = send_frame(destination, body, headers, transaction, content_type)
        wait = self.checked_timeout(timeout)
        what = "the SEND to %s" % destination
        link = await self.ready(wait, what)
        if transaction is not None:
            self.transaction_check("SEND", transaction)
        if not receipt:
            await self.write_frame(link, "SEND", frame_headers, data, False, wait, what)
            return
        size = len(data)
        loop = self.loop
        deadline = loop.time() + wait
        if not self.window.take(size):
            await self.window.wait_take(size, wait, what, lambda: "the client was closed" if self._closing else (
                "connection closed: %s" % link.close_reason if link.closed else None))
        try:
            losses = 0
            while True:
                try:
                    await self.write_frame(link, "SEND", dict(frame_headers), data, True,
                                           max(0.0, deadline - loop.time()), what)
                    return
                except LostAfterWrite:
                    # failover, outside a transaction: written again on the next socket, a bounded
                    # number of times (as the threaded engine's request(): at least once)
                    losses += 1
                    if self.failover is None or transaction is not None or losses > SEND_RESENDS:
                        raise
                    log.info("socket lost before the receipt of %s: writing it again after failover", what)
                    link = await self.ready(max(0.0, deadline - loop.time()), what)
        except LostAfterWrite as exc:  # written: the broker may have it
            raise SendInDoubtError("%s was written, then the connection was lost before its receipt: the broker "
                                       "may or may not have the message (%s)" % (what, exc)) from exc
        finally:
            self.window.give_back(size)

    # ------------------------------------------------------------ subscriptions

    def subscribe(self, destination: str, *, ack: AckMode = "auto", prefetch_size: Optional[int] = None,
                  optimize_acknowledge: bool = False, headers: Optional[Mapping[str, Any]] = None,
                  redelivery_policy: Optional[RedeliveryPolicy] = None, timeout: Optional[float] = None,
                  ) -> Subscription:
        """A subscription to use as ``async with client.subscribe(...) as sub: async for message in sub``
        (SUBSCRIBE on entry, confirmed by its RECEIPT within ``timeout`` seconds; UNSUBSCRIBE on exit).

        Args:
            destination (str): with ActiveMQ's ``?consumer.*`` options if wanted.
            ack (str): ``auto``, ``client`` (cumulative) or ``client-individual`` (STOMP 1.2 "SUBSCRIBE").
            prefetch_size (int | None): messages the broker sends ahead (ActiveMQ's
                ``activemq.prefetchSize``, RabbitMQ's ``prefetch-count``); None: the broker's
                default (ActiveMQ 1000 for a queue), which the local window assumes.
            optimize_acknowledge (bool): ``ack:client`` only: amqstomp acknowledges, one
                cumulative ACK per batch (ActiveMQ's optimizeAcknowledge).
            headers (Mapping | None): more SUBSCRIBE headers (``selector``...).
            redelivery_policy (RedeliveryPolicy | None): for :meth:`Subscription.run`; None: ActiveMQ's.

        Raises:
            ConfigurationError: an unknown ack mode, optimize_acknowledge without ``ack:client``,
                or a prefetch this broker takes no header for.
            InvalidDestinationError, InvalidTimeoutError (``timeout`` not a number of seconds
                >= :data:`MIN_TIMEOUT_S`): nothing sent.
        """
        wait = self.checked_timeout(timeout)
        link = self.link
        if link is None:
            raise NotConnectedException("not connected: await the client (or use it in async with) first")
        # the SUBSCRIBE and its window, decided as for every API (_core/subscriptions.py)
        request = subscribe_request(destination, str(next(self._ids)), ack, headers or {},
                                    {"optimize_acknowledge": optimize_acknowledge, "prefetch_size": prefetch_size},
                                    DEFAULT_REDELIVERY if redelivery_policy is None else redelivery_policy)
        plan = subscribe_plan(request, link.proto.dialect, link.proto.server, self.prefetch_policy)
        return Subscription(self, request.sub_id, plan.name, ack, plan.headers, plan.window, request.optimize,
                            wait, request.redelivery_policy)

    async def confirm_subscription(self, sub: Subscription) -> None:
        link = await self.ready(sub.timeout, "the SUBSCRIBE to %s" % sub.destination)
        sub.link = link
        sub.closed = False
        self._subs[sub.id] = sub
        try:
            await self.write_frame(link, "SUBSCRIBE", dict(sub.headers), b"", True, sub.timeout,
                                    "the SUBSCRIBE to %s" % sub.destination)
        except BrokerError as exc:  # refused (the ERROR answered it): the broker registered no consumer
            self._subs.pop(sub.id, None)
            sub.lost(StompException("the SUBSCRIBE to %s was refused: %s" % (sub.destination, exc)))
            raise
        except BaseException:
            self._subs.pop(sub.id, None)
            sub.lost(StompException("the SUBSCRIBE to %s was not confirmed" % sub.destination))
            if not link.closed:  # a timeout or a cancel, the outcome unknown: make sure the broker stops delivering
                try:
                    link.write(link.encode("UNSUBSCRIBE", {"id": sub.id}))
                except StompException:
                    pass
            raise

    def forget(self, sub: Subscription) -> None:
        self._subs.pop(sub.id, None)

    # ------------------------------------------------------------ transactions

    def transaction(self, *, timeout: Optional[float] = None) -> Transaction:
        """A transaction, as ``async with client.transaction() as tx``: BEGIN on entry,
        COMMIT (its RECEIPT awaited ``timeout`` seconds) on a normal exit, ABORT on an
        exception (see :class:`~amqstomp.aio.transaction.Transaction`)."""
        return Transaction(self, "tx-%d" % next(self._ids), self.checked_timeout(timeout))

    def transaction_check(self, cmd: str, transaction: str) -> None:
        refusal = self.transactions.refusal(cmd, transaction)
        if refusal is not None:
            raise refusal

    # ------------------------------------------------------------ closing

    async def close(self, timeout: Optional[float] = None) -> None:
        """DISCONNECT (its RECEIPT awaited), then close the socket; every timer this client
        armed ends with it. Idempotent. The whole close is bounded by ``timeout`` seconds
        (default ``close_timeout``), whatever the broker does: past it (no RECEIPT, a broker
        that stopped reading, a reconnect still running) the socket is aborted. It never
        raises for the broker's silence (it runs as ``async with``'s exit, where an error would
        hide the block's own): a RECEIPT that did not come in time is a WARNING on the
        ``amqstomp.aio`` logger naming the seconds waited (the threaded ``disconnect()``'s rule)."""
        self.check_loop()
        link = self.link
        if link is None or self._closing:
            return
        self._closing = True
        loop = self.loop
        wait = self.close_timeout if timeout is None else (clamp_wait(timeout, "timeout") or 0.0)
        deadline = loop.time() + wait
        self.window.wake_all()  # sends waiting for room: they see the client closing
        if self.failover is not None:
            await self.failover.stop(wait)
            link = self.link
            assert link is not None
        await stop_handlers(loop, self._subs.values(), max(0.0, deadline - loop.time()))  # (their ACKs written first)
        for sub in list(self._subs.values()):
            sub.closed_by_client()
        self._subs.clear()
        if not link.closed:
            link.closing()  # the broker's close after the RECEIPT is no loss
            confirmed = False
            try:
                await self.write_frame(link, "DISCONNECT", {}, b"", True, max(0.0, deadline - loop.time()), "DISCONNECT")
                confirmed = True
            except (ReceiptTimeout, asyncio.TimeoutError) as exc:  # as the threaded disconnect(): said, not raised
                log.warning("close(): no RECEIPT for the DISCONNECT within %.3g s (%s): the socket is closed "
                            "without it", wait, exc)
            except StompException as exc:
                log.info("DISCONNECT not confirmed (%s): closing the socket", exc)
            if confirmed and link.transport is not None:  # all read by the broker: a graceful close
                link.transport.close()
                try:
                    await asyncio.wait_for(asyncio.shield(link.ended), max(0.0, deadline - loop.time()))
                except asyncio.TimeoutError:
                    pass
            if not link.closed:
                link.abort()  # (unconfirmed: bytes still buffered would only delay the close)
        log.info("closed")
