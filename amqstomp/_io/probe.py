"""The probes of the planned moves of a failover connection: with
``priorityBackup``, while it is on a broker that is not a priority one, a thread
asks the priority brokers now and then whether they answer, and tells the
failover loop to move there once one does; with ``rebalanceInterval``, once
the interval is up, it asks the other brokers in turn and moves to the first
that answers.

* :func:`stomp_answers` -- one probe: open a socket to the broker the way the
  connection does (TCP, TLS, WebSocket: its :class:`~amqstomp._io.connector.Connector`),
  write a CONNECT and wait for any frame (CONNECTED, or an ERROR refusing the
  probe's empty login: either way a STOMP broker serves there), then DISCONNECT
  and close. Bounded by its timeout.
* :class:`PlannedMoves` -- the planned move of :class:`amqstomp._engine.failover.Reconnector`;
* :class:`MoveProber` -- the thread (``<name>-priority`` or ``<name>-rebalance``),
  alive only while a move is planned (:class:`amqstomp._core.backoff.PriorityReturn`
  or :class:`amqstomp._core.rebalance.Rebalance` decides when and where to;
  this module keeps the clock).

Licensed under the Apache License, Version 2.0.
"""
import logging
import threading
import time
from typing import Any, Callable, Optional, Tuple

from .._core.lifecycle import ConnectionLifecycle

__all__ = ["PlannedMoves", "MoveProber", "stomp_answers"]

log = logging.getLogger("amqstomp.failover")

HostAndPort = Tuple[str, int]

#: Longest single probe (s): connect, CONNECT, the first frame back.
PROBE_TIMEOUT_S = 5.0

#: How often (s) a move settling first asks how many messages the application still holds.
_SETTLE_POLL_S = 0.02


def stomp_answers(connector: Any, host_and_port: HostAndPort, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when a STOMP broker answers CONNECT at ``host_and_port`` within
    ``timeout_s`` seconds (CONNECTED or ERROR); False when the connect fails,
    the socket closes or nothing comes. Never raises for network errors."""
    deadline = time.monotonic() + timeout_s
    try:
        channel = connector.connect_one(host_and_port, timeout_s)
    except Exception as exc:  # OSError, ssl.SSLError, ConnectFailedException...
        log.debug("priority probe of %s:%s: %s", host_and_port[0], host_and_port[1], exc)
        return False
    try:
        sock = getattr(channel, "sock", None)
        if sock is not None:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
        frame = "CONNECT\naccept-version:1.0,1.1,1.2\nhost:%s\n\n\x00" % host_and_port[0]
        channel.sendall(frame.encode("utf-8"), deadline)
        data = b""
        while b"\x00" not in data and len(data) < 65536 and time.monotonic() < deadline:
            chunk = channel.recv(4096)
            if not chunk:
                break
            data += chunk
        answered = data.lstrip(b"\r\n").startswith((b"CONNECTED", b"ERROR"))
        if answered:
            try:
                channel.sendall(b"DISCONNECT\n\n\x00", deadline)
            except OSError:
                pass
        return answered
    except (OSError, ValueError) as exc:
        log.debug("priority probe of %s:%s: %s", host_and_port[0], host_and_port[1], exc)
        return False
    finally:
        channel.close()


class MoveProber:
    """Probes the brokers a failover connection's plan names when a move is
    due (the priority brokers while it is on another one; the other brokers
    once the rebalance interval is up), and calls ``move(host_and_port, why)``
    for the first that answers.

    Args:
        plan: the connection's :class:`~amqstomp._core.backoff.PriorityReturn`
            or :class:`~amqstomp._core.rebalance.Rebalance` (read and updated
            under this object's lock; its ``option`` names it in logs).
        probe: ``probe(host_and_port) -> bool`` (:func:`stomp_answers` bound to
            the connection's connector).
        move: ``move(host_and_port, why) -> bool``: the failover loop's planned
            move (``why``: the plan's option); False when it did not happen (a
            reconnect in progress, closing).
        name (str): the thread's name.

    Thread: ``name``, started by :meth:`connected` when probing is due, ended
    by :meth:`stop` (bounded join) or when the plan has nothing to probe.
    """

    def __init__(self, plan: Any, probe: Callable[[HostAndPort], bool], move: Callable[[HostAndPort, str], bool],
                 name: str) -> None:
        self.plan = plan
        self._probe = probe
        self._move = move
        self.name = name
        self._cond = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._stopped = True
        #: planned moves made (to a priority broker, or rebalancing)
        self.moves = 0

    def connected(self, host_and_port: HostAndPort) -> None:
        """A connection to ``host_and_port`` was made: the plan says whether and when to move."""
        with self._cond:
            self.plan.connected(host_and_port, time.monotonic())
            self._stopped = False
            self._cond.notify_all()
            if self.plan.next_at is None or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def lost(self) -> None:
        """The connection is being replaced (lost, or moved): no probing meanwhile."""
        with self._cond:
            self.plan.stopped()
            self._cond.notify_all()

    def stop(self, join_timeout_s: float = 10.0) -> None:
        """No more probing (the connection is being closed); bounded wait for the thread."""
        with self._cond:
            self._stopped = True
            self.plan.stopped()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(join_timeout_s)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    wait = self.plan.wait_s(time.monotonic())
                    if wait is None:
                        if self._thread is threading.current_thread():
                            self._thread = None
                        return
                    if wait <= 0:
                        break
                    self._cond.wait(min(wait, 60.0))
                targets = self.plan.due(time.monotonic())
            answered = next((target for target in targets if self._probe(target)), None)
            if answered is not None and not self._stopped:
                log.info("%s: broker %s:%s answers: moving the connection there (%s)", self.name, answered[0],
                         answered[1], self.plan.option)
                if self._move(answered, self.plan.option):
                    self.moves += 1
                    continue  # the plan restarts at the next connected()
            with self._cond:
                self.plan.probe_failed(time.monotonic())


class PlannedMoves:
    """The planned move of a failover loop (a mix-in of
    :class:`amqstomp._engine.failover.Reconnector`, whose attributes it uses)."""

    _lock: Any
    #: the failover's one state (:class:`amqstomp._core.lifecycle.ConnectionLifecycle`), stepped under ``_lock``
    _life: ConnectionLifecycle
    #: ``_sleep(seconds)`` -> True when disarmed meanwhile (at once if already), else False after ``seconds``
    _sleep: Callable[[float], bool]
    _moving_seq: int
    transport: Any
    prober: Optional[MoveProber]
    hand_back: Optional[Callable[[int], None]]
    #: the engine's Client (``settling() -> seq``, ``held(seq) -> int``), set by it; None: no settling
    settle: Optional[Any]
    lost_at: Optional[float]
    lost_endpoint: Optional[HostAndPort]
    move_target: Optional[HostAndPort]
    planned_moves: int
    last_move: Optional[str]

    def move_to(self, target: HostAndPort, why: str = "priorityBackup") -> bool:
        """Probe thread (``why``: priorityBackup, rebalanceInterval): move the connection to ``target``.
        New frames wait for the new socket (as during a failover);
        ``hand_back(seq)`` settles the old one, socket ``seq`` (DISCONNECT and its RECEIPT: the
        broker has applied every ACK written before and takes back the
        messages not acknowledged, which it redelivers; ACKs an
        auto-acknowledge subscription batches and has not written yet are
        not written, as at a loss); the socket then ends as lost, and the failover loop
        connects, ``target`` first (then priority brokers, the one left last). Returns False
        (nothing done) when not connected, reconnecting or disarmed.

        With ``rebalanceInterval`` the connection settles first (:meth:`settle_first`)."""
        with self._lock:
            if not self._life.takes_over_losses or not self.transport.is_connected():
                return False
        plan = None if self.prober is None else self.prober.plan
        settle_ms = int(getattr(plan, "settle_ms", 0) or 0)  # rebalanceInterval's; priorityBackup: none
        if self.settle is not None and settle_ms > 0:
            self.settle_first(plan)
        with self._lock:
            if not self._life.takes_over_losses or not self.transport.is_connected():
                return False  # lost or closing meanwhile: that socket's end hands everything back
            self._life.lost()
            seq = self.transport.link_seq  # the socket this move ends, and no later one
            self._moving_seq, self.lost_at = seq, time.monotonic()
            here = self.transport.last_host_and_port
            self.lost_endpoint = None if here is None else (str(here[0]), int(here[1]))
            self.move_target = target
            reason = "moving to %s:%s (%s)" % (target[0], target[1], why)
            self.planned_moves, self.last_move = self.planned_moves + 1, reason  # before the listeners hear
        if self.prober is not None:
            self.prober.lost()
        self.transport.end_planned(reason, seq)  # no loss: an instrumentation counts a move
        if self.hand_back is not None:
            try:
                self.hand_back(seq)
            except Exception:  # never leave the connection half-moved
                log.exception("priority move: handing back failed")
        # the broker closes socket ``seq`` after the DISCONNECT's RECEIPT: the failover loop may be on the
        # target's socket already, which the move must not end (it moved twice, via the backup again)
        self.transport.drop(reason, seq)
        return True

    def settle_first(self, plan: Any) -> None:
        """Probe thread, before a rebalance's move: nothing more is handed to the
        application from the open socket (``settle.settling()``), and the move waits
        until the application has acknowledged what it was handed on it
        (``settle.held(seq)`` is 0) or the plan's bound passes
        (:meth:`amqstomp._core.rebalance.Rebalance.move_now`; at most
        :attr:`~amqstomp._core.rebalance.Rebalance.settle_ms` ms), or the socket ends.
        What it still holds then is handed back with the rest (the broker
        redelivers it; its ACKs are refused with AcknowledgeInterruptedError)."""
        settle = self.settle
        assert settle is not None
        seq = settle.settling()
        started = time.monotonic()
        # (the plan's settle state is this thread's; a stop or loss meanwhile clears it: the move goes on, and
        # the checks after this call see why)
        plan.settling(started)
        held = settle.held(seq)
        while True:
            now = time.monotonic()
            move, wait = plan.move_now(now, held), plan.settle_wait_s(now)
            if move or not self._life.armed or not self.transport.link_alive(seq):
                break
            self._sleep(min(_SETTLE_POLL_S, wait))
            held = settle.held(seq)
        log.info("settled before moving in %.3f s; %d message(s) still held by the application are handed back",
                 time.monotonic() - started, held)
