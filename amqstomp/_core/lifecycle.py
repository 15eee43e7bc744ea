"""The life of one connection above its sockets, as one transition table, no I/O.

A socket's own STOMP session has :class:`amqstomp._core.state.LinkState`
(connecting, open, closing, lost, closed: one socket, from its opening to its
end). A connection outlives its sockets: a failover loop replaces a lost one,
the application closes it, or it breaks for good. That is
:class:`ConnectionLifecycle`, held by every driver that keeps a connection:

* the thread driver's failover loop (:class:`amqstomp._engine.failover.Reconnector`:
  armed or not, a reconnect running, gave up and why);
* the JMS connection (:class:`amqstomp.jms._connection_state.ConnectionState`:
  closed, broken and why);
* the asyncio failover loop (:class:`amqstomp.aio._failover.Failover`: stopped,
  gave up and why).

Each asks it the questions (:attr:`~ConnectionLifecycle.armed`: may a loss be
taken over; :attr:`~ConnectionLifecycle.reconnecting`: does a connect loop
run; :attr:`~ConnectionLifecycle.closed`; :attr:`~ConnectionLifecycle.cause`:
why it failed) and tells it what happened with one :class:`Step` at a time;
:data:`TRANSITIONS` says where each step leads from each :class:`Phase`, and a
step it does not list raises :class:`IllegalTransition` (a driver bug, never a
broker's doing). The drivers keep their threads, locks, conditions and tasks,
and apply each step under their own lock: this object has none.

The phases follow ActiveMQ's ``FailoverTransport`` (``connected``,
``disposed``, ``connectionFailure``) and STOMP 1.2 "Connecting"/"DISCONNECT".

Licensed under the Apache License, Version 2.0.
"""
import enum
from typing import Dict, Optional

__all__ = ["Phase", "Step", "ConnectionLifecycle", "IllegalTransition", "TRANSITIONS", "ARMED", "LOOPING", "CLOSING"]


class Phase(enum.Enum):
    """Where a connection is in its life (see the module docstring)."""

    #: made, not connecting; or disarmed before it ever connected
    IDLE = "idle"
    #: the first connection is being made (a connect loop runs)
    CONNECTING = "connecting"
    #: connected, or watching a socket its owner opened: a loss is taken over
    OPEN = "open"
    #: a lost socket (or a planned move's) is being replaced (a connect loop runs)
    RECONNECTING = "reconnecting"
    #: asked to close while a connect loop runs: the loop still has to end
    STOPPING = "stopping"
    #: the connect loop gave up (or failed) and has still to end
    FAILING = "failing"
    #: closed by its owner (no loop runs); :attr:`ConnectionLifecycle.cause` keeps an earlier failure
    CLOSED = "closed"
    #: broken for good: no socket and no loop (:attr:`ConnectionLifecycle.cause` says why)
    FAILED = "failed"


class Step(enum.Enum):
    """What happened to a connection: the input of :data:`TRANSITIONS`."""

    #: the owner takes over losses from now on (clears the cause)
    ARM = "arm"
    #: the first connection begins (clears the cause)
    CONNECT = "connect"
    #: a connect loop got a connected socket and ends with it
    UP = "up"
    #: a socket was lost (or a planned move began): a reconnect loop starts
    LOST = "lost"
    #: the owner closes (disarms) the connection
    CLOSE = "close"
    #: the connection broke for good, or its loop gave up (records the cause)
    FAIL = "fail"
    #: a connect loop ended (its thread's or task's last step, whatever its outcome)
    LOOP_ENDED = "loop_ended"


_I, _C, _O, _R, _S, _G, _X, _F = (Phase.IDLE, Phase.CONNECTING, Phase.OPEN, Phase.RECONNECTING, Phase.STOPPING,
                                  Phase.FAILING, Phase.CLOSED, Phase.FAILED)

#: phase -> step -> next phase; a step missing for a phase is illegal there. The one table of the
#: connection's life: every driver's flags were replaced by it (docs/architecture.md).
TRANSITIONS: Dict[Phase, Dict[Step, Phase]] = {
    _I: {Step.ARM: _O, Step.CONNECT: _C, Step.CLOSE: _X, Step.FAIL: _F, Step.LOOP_ENDED: _I},
    # (LOOP_ENDED: the first connection did not come, and nobody closed: back to the start)
    _C: {Step.ARM: _C, Step.UP: _O, Step.CLOSE: _S, Step.FAIL: _G, Step.LOOP_ENDED: _I},
    _O: {Step.ARM: _O, Step.CONNECT: _C, Step.LOST: _R, Step.CLOSE: _X, Step.FAIL: _F, Step.LOOP_ENDED: _O},
    # (LOOP_ENDED without UP, CLOSE or FAIL: a loop ended abnormally; still armed, as before it)
    _R: {Step.ARM: _R, Step.UP: _O, Step.CLOSE: _S, Step.FAIL: _G, Step.LOOP_ENDED: _O},
    # (ARM: armed again before the loop ended: the loop goes on)
    _S: {Step.ARM: _R, Step.CLOSE: _S, Step.FAIL: _G, Step.LOOP_ENDED: _X},
    _G: {Step.ARM: _R, Step.CLOSE: _G, Step.FAIL: _G, Step.LOOP_ENDED: _F},
    _X: {Step.ARM: _O, Step.CONNECT: _C, Step.CLOSE: _X, Step.LOOP_ENDED: _X},
    _F: {Step.ARM: _O, Step.CONNECT: _C, Step.CLOSE: _X, Step.FAIL: _F, Step.LOOP_ENDED: _F},
}

#: the phases the questions of :class:`ConnectionLifecycle` answer True in (a driver's hot path may test
#: ``lifecycle.phase in ARMED`` itself: one attribute read, no property call)
ARMED = frozenset((Phase.CONNECTING, Phase.OPEN, Phase.RECONNECTING))
LOOPING = frozenset((Phase.CONNECTING, Phase.RECONNECTING, Phase.STOPPING, Phase.FAILING))
CLOSING = frozenset((Phase.STOPPING, Phase.CLOSED))


class IllegalTransition(RuntimeError):
    """A driver applied a :class:`Step` that :data:`TRANSITIONS` does not list for the
    current :class:`Phase` (a bug in the driver). ``phase`` and ``step`` say which."""

    def __init__(self, phase: Phase, step: Step) -> None:
        super().__init__("illegal connection transition: %s in phase %s" % (step.value, phase.value))
        self.phase = phase
        self.step = step


class ConnectionLifecycle:
    """One connection's phase and the cause of its failure (see the module docstring).

    Not thread-safe: the driver applies every step under its own lock (or on its
    event loop). Steps return the new :class:`Phase` and raise
    :class:`IllegalTransition` where :data:`TRANSITIONS` lists none.

    Attributes:
        phase (Phase): where the connection is; starts :attr:`Phase.IDLE`.
        cause (BaseException | None): why it failed (:meth:`fail`), kept through a
            close; cleared by :meth:`arm` and :meth:`connect`.
    """

    __slots__ = ("phase", "cause")

    def __init__(self) -> None:
        self.phase = Phase.IDLE
        self.cause: Optional[BaseException] = None

    def step(self, step: Step) -> Phase:
        """Apply ``step`` (see :data:`TRANSITIONS`); returns the new phase.

        Raises:
            IllegalTransition: ``step`` is not legal in the current phase (nothing changes).
        """
        target = TRANSITIONS[self.phase].get(step)
        if target is None:
            raise IllegalTransition(self.phase, step)
        self.phase = target
        return target

    # ------------------------------------------------------------ the steps, by name

    def arm(self) -> Phase:
        """:attr:`Step.ARM`: losses are taken over from now on; an earlier failure is forgotten."""
        phase = self.step(Step.ARM)
        self.cause = None
        return phase

    def connect(self) -> Phase:
        """:attr:`Step.CONNECT`: the first connection begins; an earlier failure is forgotten."""
        phase = self.step(Step.CONNECT)
        self.cause = None
        return phase

    def up(self) -> Phase:
        """:attr:`Step.UP`: the connect loop got its socket."""
        return self.step(Step.UP)

    def lost(self) -> Phase:
        """:attr:`Step.LOST`: the open socket was lost (or a planned move began)."""
        return self.step(Step.LOST)

    def close(self) -> Phase:
        """:attr:`Step.CLOSE`: the owner closes (a running loop must end: :attr:`Phase.STOPPING`)."""
        return self.step(Step.CLOSE)

    def fail(self, cause: BaseException) -> Phase:
        """:attr:`Step.FAIL`: broken for good, or the loop gave up, because of ``cause``."""
        phase = self.step(Step.FAIL)
        self.cause = cause
        return phase

    def loop_ended(self) -> Phase:
        """:attr:`Step.LOOP_ENDED`: the connect loop's thread or task ends (last step)."""
        return self.step(Step.LOOP_ENDED)

    # ------------------------------------------------------------ the questions

    @property
    def armed(self) -> bool:
        """True while a loss is the connection's to take over (connecting, open, reconnecting)."""
        return self.phase in ARMED

    @property
    def reconnecting(self) -> bool:
        """True while a connect loop runs (connecting, reconnecting, or ending: stopping, failing)."""
        return self.phase in LOOPING

    @property
    def takes_over_losses(self) -> bool:
        """True when a lost socket starts a reconnect (:attr:`Phase.OPEN`, no loop running)."""
        return self.phase is Phase.OPEN

    @property
    def closing(self) -> bool:
        """True once the owner closed it (:attr:`Phase.STOPPING` or :attr:`Phase.CLOSED`)."""
        return self.phase in CLOSING

    @property
    def closed(self) -> bool:
        """True once closed by its owner and no loop runs (:attr:`Phase.CLOSED`)."""
        return self.phase is Phase.CLOSED

    def __repr__(self) -> str:
        return "<ConnectionLifecycle %s%s>" % (self.phase.value, "" if self.cause is None else " (%s)" % self.cause)
