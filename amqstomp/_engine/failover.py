"""Failover: ActiveMQ's failover transport
(``org.apache.activemq.transport.failover.FailoverTransport``) for STOMP.

Two pieces:

* :class:`ReconnectPolicy` (defined in :mod:`amqstomp._core.backoff`) --
  when to try the next broker and when to give up, as pure decisions (no
  sockets, clocks or threads), with FailoverTransport's defaults; ``failover:(stomp://a:61613,stomp://b:61613)?randomize=false``
  URIs are parsed by :func:`amqstomp.uri.parse_uri` and
  :meth:`ReconnectPolicy.from_uri` takes their options;
* :class:`Reconnector` -- the loop that keeps one
  :class:`~amqstomp.transport.Transport` connected. It takes over a lost
  socket (the transport's link-lost hook), tries the brokers with the
  policy's back-off on a thread of its own (``amqstomp-failover``, alive only
  while reconnecting), and calls the facade's ``establish(host_and_port)``
  for each attempt: open the socket, CONNECT, wait for CONNECTED, replay the
  subscriptions. The facades (:mod:`amqstomp.connection`, :mod:`amqstomp.jms`)
  own what is replayed; this module owns when. With ``priorityBackup`` or
  ``rebalanceInterval`` it also moves the connection by plan (:meth:`Reconnector.move_to`).

:class:`~amqstomp._engine.ledger.SocketLedger` (which socket delivered each message) is
the engine's ledger beside it.

What a lost socket means for the application (documented in the "Failover and
master/slave" page of the documentation, docs/guides/failover.md): messages delivered on it and not acknowledged come again
from the broker (``redelivered: true``) and ACKs for them are never written on
the new socket; a transaction open at the loss fails on commit with
:class:`~amqstomp.exception.TransactionRolledBackError`.

Licensed under the Apache License, Version 2.0.
"""
import logging
import threading
import time
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from ..exception import ConfigurationError, ConnectFailedException, ConnectRefusedError
from .._core.backoff import LossStreak, PriorityReturn, ReconnectPolicy
from .._core.lifecycle import ARMED, LOOPING, ConnectionLifecycle, Phase
from .._core.rebalance import Rebalance
from .._io.probe import MoveProber, PlannedMoves, stomp_answers
from .ports import TransportPort
from .._io.timeouts import clamp_wait

__all__ = ["Reconnector"]

log = logging.getLogger("amqstomp.failover")

HostAndPort = Tuple[str, int]

#: Longest single sleep of the reconnect loop (s): longer delays are slept in pieces.
_MAX_SLEEP_S = 3600.0


class Reconnector(PlannedMoves):
    """Keeps one transport connected (see the module docstring); with
    ``priorityBackup``, moves it back to a priority broker, with
    ``rebalanceInterval`` to another broker now and then (:meth:`move_to`).

    Args:
        transport: the :class:`~amqstomp.transport.Transport` to watch; its
            link-lost hook is set here.
        endpoints (list[tuple[str, int]]): the brokers, in URI order.
        policy (ReconnectPolicy): back-off, attempt limits, order (after a
            loss, the broker lost is tried last: :meth:`ReconnectPolicy.order`).
        establish: ``establish((host, port))`` makes one attempt: open the
            transport to that broker, CONNECT, wait for CONNECTED, replay state.
            It raises (any :class:`~amqstomp.exception.StompException` or
            ``OSError``) when the attempt failed; the socket is then closed here.
        on_gave_up: ``on_gave_up(exc)`` when the policy's attempt limit is
            reached after a loss (on the failover thread); ``exc`` is a
            :class:`~amqstomp.exception.ConnectFailedException`.
        name (str): thread name and log prefix.
        on_stopped: ``on_stopped()`` when :meth:`disarm` ended a reconnect in
            progress after a loss, before a new socket was connected (on the
            failover thread): nobody else tells the application that the
            connection it heard interrupted has ended.

    Thread: ``amqstomp-failover`` runs only between a loss and the end of the
    reconnect (success, give-up or :meth:`disarm`).
    """

    def __init__(self, transport: TransportPort, endpoints: Sequence[HostAndPort], policy: ReconnectPolicy,
                 establish: Callable[[HostAndPort], None],
                 on_gave_up: Optional[Callable[[BaseException], None]] = None,
                 name: str = "amqstomp-failover", on_stopped: Optional[Callable[[], None]] = None) -> None:
        if not endpoints:
            raise ConfigurationError("failover needs at least one broker")
        self.transport = transport
        self.endpoints: List[HostAndPort] = [(str(h), int(p)) for h, p in endpoints]
        self.policy = policy
        self.name = name
        self._establish = establish
        self._on_gave_up = on_gave_up
        self._on_stopped = on_stopped
        self._lock = threading.Lock()
        #: notified on every step of the lifecycle that ends a wait (connected, disarmed, gave up)
        self._changed = threading.Condition(self._lock)
        #: armed or not, a loop running, gave up and why: the one state (:mod:`amqstomp._core.lifecycle`),
        #: stepped under ``_lock``; disarmed (idle) until arm()
        self._life = ConnectionLifecycle()
        self._thread: Optional[threading.Thread] = None
        self.ever_connected = False
        self.streak = LossStreak(policy)  #: protocol errors in a row soon after CONNECTED: back off
        #: times a lost socket was replaced
        self.failovers = 0
        #: (host, port) whose connection was lost last (None before any loss): tried last on
        #: every pass of the reconnect (:meth:`ReconnectPolicy.order`, FailoverTransport's
        #: ``failedConnectTransportURI``)
        self.lost_endpoint: Optional[HostAndPort] = None
        #: monotonic time of the last loss and of the reconnect after it (None until then)
        self.lost_at: Optional[float] = None
        self.resumed_at: Optional[float] = None
        #: why the last attempt failed, or the last loss
        self.last_error: Optional[BaseException] = None
        #: ``time.monotonic()`` by which the running attempt must end, or None (no limit but the
        #: attempt's own): with ``connect(timeout_s)``, each attempt of a pass gets an equal share
        #: of the time left among the brokers still to try in it (the last all of it), so a broker
        #: that accepts the socket but never answers cannot use up the time of the next ones
        self.attempt_deadline: Optional[float] = None
        plan: Optional[Union[PriorityReturn, Rebalance]] = None  # when and where a planned move goes
        if policy.priority_backup:
            plan = PriorityReturn(policy, self.endpoints)
        elif policy.rebalance_interval_ms:
            plan = Rebalance(policy.rebalance_interval_ms, self.endpoints, policy.randomize)
        #: priorityBackup or rebalanceInterval: probes the brokers to move to (None without either)
        self.prober = None if plan is None else MoveProber(
            plan, lambda hp: stomp_answers(getattr(transport, "connector"), hp), self.move_to, name + "-" + plan.kind)
        #: the broker a planned move goes to: the failover loop tries it first, on its first pass
        self.move_target: Optional[HostAndPort] = None
        #: ``hand_back(seq)`` before a planned move (the engine's Client sets it: DISCONNECT, its RECEIPT)
        self.hand_back: Optional[Callable[[int], None]] = None
        #: the engine's Client when it settles before a rebalance's move (``settling()``, ``held(seq)``)
        self.settle: Optional[Any] = None
        self._moving_seq = 0  # the socket a planned move ends
        #: planned moves begun (:meth:`move_to`), counted before their socket ends, and the last one's reason
        self.planned_moves = 0
        self.last_move: Optional[str] = None

    # ------------------------------------------------------------ state

    @property
    def armed(self) -> bool:
        """True between :meth:`arm` and :meth:`disarm` (losses are taken over)."""
        return self._life.phase in ARMED  # (the lifecycle's question, without a second call)

    @property
    def reconnecting(self) -> bool:
        """True while a lost socket is being replaced (a loop runs, also while it ends)."""
        return self._life.phase in LOOPING

    @property
    def gave_up(self) -> Optional[BaseException]:
        """Why the policy gave up after a loss (a ConnectFailedException), until :meth:`arm`; else None."""
        return self._life.cause

    @property
    def phase(self) -> Phase:
        """Where the failover is (:class:`amqstomp._core.lifecycle.Phase`)."""
        return self._life.phase

    def wait_connected(self, timeout_s: Optional[float]) -> bool:
        """Block until the transport is connected again (True), the reconnector
        gives up or is disarmed, or ``timeout_s`` seconds pass (False; None =
        no limit while armed). InvalidTimeoutError: ``timeout_s`` is not a
        number (:func:`amqstomp.utils.clamp_wait`)."""
        timeout_s = clamp_wait(timeout_s, "timeout_s")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if self.transport.is_connected() and not self._life.reconnecting:
                return True
            if not self._life.armed:
                return False
            wait = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if wait <= 0:
                return False
            with self._changed:
                self._changed.wait(wait)

    # ------------------------------------------------------------ control

    def connect(self, timeout_s: Optional[float] = None) -> HostAndPort:
        """The first connection, on the calling thread, with the policy's start-up
        limit (``startup_max_reconnect_attempts``) and at most ``timeout_s``
        seconds when given; arms the reconnector.

        Raises:
            ConnectRefusedError: a broker answered CONNECT with ERROR (a wrong
                login or virtual host): the attempts end there, with its reason.
                (After a loss the attempts go on: a client id the broker still
                holds for the lost socket is let go after a while.)
            ConnectFailedException: the limit or ``timeout_s`` was reached.
        """
        self.arm()
        with self._lock:
            self._life.connect()  # an attempt's lost socket is this loop's business
            self.lost_endpoint = self.move_target = None  # a first connection: the brokers as listed
        try:
            return self._loop(None if timeout_s is None else time.monotonic() + timeout_s)
        except BaseException:
            self.disarm()
            raise
        finally:
            self.attempt_deadline = None
            with self._changed:
                if self._thread is None:
                    self._life.loop_ended()
                    self._changed.notify_all()

    def arm(self) -> None:
        """Take over losses from now on."""
        with self._lock:
            self._life.arm()
            if self.transport.is_open():
                self.ever_connected = True  # the facade connected by itself
                here = self.transport.current_host_and_port
                if self.prober is not None and here is not None:
                    self.prober.connected((str(here[0]), int(here[1])))

    def socket_opened(self) -> None:
        """The facade opened a socket and wrote CONNECT itself after :meth:`arm` (``connect()``
        without ``wait``): with priorityBackup, the prober watches it, as :meth:`arm` does."""
        with self._lock:
            here = self.transport.current_host_and_port
            if self.prober is not None and here is not None and self._life.takes_over_losses:
                self.prober.connected((str(here[0]), int(here[1])))

    def check_armed(self) -> None:
        """Failover thread, inside an attempt (after its socket opened, before the
        listeners hear it resumed): go on only while armed.

        Raises:
            ConnectFailedException: :meth:`disarm` was called (``disconnect()``,
                also from a listener): the attempt ends and the loop with it.
        """
        if not self._life.armed:
            raise ConnectFailedException("failover stopped (the connection is being closed)")

    def disarm(self, join_timeout_s: float = 10.0) -> None:
        """Stop taking over losses and end a reconnect in progress (bounded wait
        for the failover thread). Call before closing the transport on purpose."""
        with self._changed:
            self._life.close()
            self._changed.notify_all()  # wait_connected() and the loop's sleeps end
            thread = self._thread
        if self.prober is not None:
            self.prober.stop(join_timeout_s)
        if thread is None or thread is threading.current_thread() or not thread.is_alive():
            return
        # an attempt in progress (a connect, a CONNECTED or RECEIPT wait) ends at once
        self.transport.close(None, reason="failover stopped: the connection is being closed", silent=True)
        if threading.current_thread().name.startswith("amqstomp-"):
            # one of this library's dispatcher / session threads (a listener closing the
            # connection): the failover thread may be waiting for it; it ends by itself
            return
        thread.join(join_timeout_s)
        if thread.is_alive():
            log.warning("%s: failover thread still running %.1f s after disarm", self.name, join_timeout_s)

    # ------------------------------------------------------------ the loop

    def on_link_lost(self, seq: int, reason: str, error: Optional[BaseException]) -> Optional[str]:
        """Transport's reader thread: a socket ended without close(). Returns the
        event the listeners hear (:meth:`amqstomp._io.observer.TransportObserver.on_link_lost`;
        the engine's Client passes the call on)."""
        with self._lock:
            if not self._life.armed:
                # an attempt's socket, lost while disarm() stops the loop: the loop's end tells
                # the listeners (on_stopped), once; else the socket the application closes
                return None if self._life.reconnecting else "disconnected"
            self.last_error = error or ConnectFailedException(reason)
            moving, self._moving_seq = seq == self._moving_seq != 0, 0  # move_to() set the rest
            if self._life.reconnecting and not moving:
                return None  # an attempt's socket: the running loop sees it is not connected and goes on
            # ended before its CONNECTED (connect() without wait): still the first connection, nothing to resume
            connected = moving or self.transport.connected_frame is not None
            if not moving:
                self._life.lost()
                self.ever_connected = connected
                self.lost_at = time.monotonic()
                self.streak.lost(self.resumed_at, self.lost_at, error)  # resumed_at: the reconnect before
                lost = self.transport.last_host_and_port
                self.lost_endpoint = None if lost is None else (str(lost[0]), int(lost[1]))
                log.warning("%s: connection to %s %s (%s); failing over (that broker is tried last)", self.name,
                            _where(lost), "lost" if connected else "ended before CONNECTED", reason)
                if self.prober is not None:
                    self.prober.lost()
            thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread = thread
        thread.start()
        return "transport_interrupted" if connected else None  # (before CONNECTED: the loop's end tells)

    def _run(self) -> None:
        try:
            self._loop(passes=self.streak.failed)
        except ConnectFailedException as exc:
            self._ended(exc)
        except Exception as exc:  # a bug: never end silently, and never leave senders waiting
            log.exception("%s: failover loop failed", self.name)
            self._ended(ConnectFailedException("failover loop failed: %r" % (exc,)))
        finally:
            with self._changed:
                if self._thread is threading.current_thread():
                    self._thread = None
                    self._life.loop_ended()
                    self._changed.notify_all()

    def _ended(self, exc: ConnectFailedException) -> None:
        """Failover thread: the loop after a loss ended without a new socket:
        the policy gave up (``on_gave_up(exc)``), or :meth:`disarm` stopped it
        (``on_stopped()``)."""
        if not self.armed:
            callback: Optional[Callable[[], None]] = self._on_stopped
            what = "on_stopped"
        else:
            with self._changed:
                self._life.fail(exc)
                self._changed.notify_all()
            gave_up = self._on_gave_up
            callback = None if gave_up is None else (lambda: gave_up(exc))
            what = "on_gave_up"
        if callback is not None:
            try:
                callback()
            except Exception:
                log.exception("%s: %s failed", self.name, what)

    def _loop(self, deadline: Optional[float] = None, passes: int = 0) -> HostAndPort:
        """Try the brokers until one is connected; raises ConnectFailedException
        when the policy gives up, ``deadline`` (monotonic) passes or the
        reconnector is disarmed. ``passes``: failed attempts carried over (:class:`LossStreak`)."""
        self.attempt_deadline = deadline
        if passes and (self.streak.gives_up() or self._sleep(self.streak.delay_ms() / 1000.0)):
            raise ConnectFailedException(self.streak.reason(self.last_error))  # (or disarmed: _ended says)
        last: Optional[BaseException] = None
        final_pass = False  # the deadline comes before the next back-off ends: one last pass at it
        first, self.move_target = self.move_target, None
        while True:
            order = self.policy.order(self.endpoints, failed=self.lost_endpoint, first=first)
            first = None
            for index, host_and_port in enumerate(order):
                if not self._life.armed:
                    raise ConnectFailedException("failover stopped (the connection is being closed)")
                if deadline is not None:  # this attempt's share of the time left (see attempt_deadline)
                    now = time.monotonic()
                    self.attempt_deadline = now + max(0.0, deadline - now) / (len(order) - index)
                try:
                    self._establish(host_and_port)
                except Exception as exc:  # StompException, OSError, UnicodeError (a bad host name)...
                    last = exc
                    self.last_error = exc
                    log.debug("%s: attempt on %s failed: %s", self.name, _where(host_and_port), exc)
                    self._discard()
                    if isinstance(exc, ConnectRefusedError) and not self.ever_connected:
                        raise  # a wrong login or virtual host: trying again will not help
                    continue
                with self._changed:
                    if not self._life.armed:
                        closing = True
                    elif self.transport.is_connected():
                        closing = False
                        self._life.up()
                        if self.ever_connected:
                            self.failovers += 1
                            self.resumed_at = time.monotonic()
                        self.ever_connected = True
                        self._changed.notify_all()
                    else:
                        closing = None  # lost again at once: next broker
                if closing is None:
                    continue
                if closing:
                    self._discard()
                    raise ConnectFailedException("failover stopped (the connection is being closed)")
                if self.prober is not None:
                    self.prober.connected(host_and_port)
                if self.failovers and self.resumed_at is not None and self.lost_at is not None:
                    log.info("%s: reconnected to %s after %.3f s", self.name, _where(host_and_port),
                             self.resumed_at - self.lost_at)
                return host_and_port
            passes += 1
            if not self._life.armed:
                raise ConnectFailedException("failover stopped (the connection is being closed)")
            gave_up = self.policy.gives_up(passes, self.ever_connected)
            level = self.policy.log_level(passes, gave_up)
            if level is not None:
                log.log(level, "%s: failed to connect to %s after %d attempt(s)%s: %s", self.name,
                        ", ".join(_where(hp) for hp in self.endpoints), passes,
                        "; giving up" if gave_up else ", continuing to retry", last)
            delay_s = self.policy.delay_ms(passes) / 1000.0
            if not gave_up and deadline is not None:
                left = deadline - time.monotonic()
                if final_pass or left <= 0:
                    gave_up = True
                    log.error("%s: no broker of %s within the time allowed", self.name,
                              ", ".join(_where(hp) for hp in self.endpoints))
                elif delay_s >= left:
                    delay_s, final_pass = left, True
            if gave_up:
                raise ConnectFailedException("could not connect to any of %s after %d attempt(s): %s"
                                             % (", ".join(_where(hp) for hp in self.endpoints), passes, last))
            if self._sleep(delay_s):
                raise ConnectFailedException("failover stopped (the connection is being closed)")

    def _sleep(self, delay_s: float) -> bool:
        """Sleep ``delay_s`` seconds (in pieces); True when disarmed meanwhile (at once if already)."""
        end = time.monotonic() + delay_s
        with self._changed:
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                if not self._life.armed:
                    return True
                self._changed.wait(min(left, _MAX_SLEEP_S))

    def _discard(self) -> None:
        try:
            self.transport.close(10.0, reason="failover attempt abandoned", silent=True)
        except Exception:  # pragma: no cover - close never raises by design
            log.exception("%s: closing a failed attempt", self.name)

    def __repr__(self) -> str:
        life = self._life
        state = "reconnecting" if life.reconnecting else ("armed" if life.armed else "disarmed")
        return "<Reconnector %s %s failovers=%d>" % (self.name, state, self.failovers)


def _where(host_and_port: Optional[HostAndPort]) -> str:
    return "?" if host_and_port is None else "%s:%s" % host_and_port
