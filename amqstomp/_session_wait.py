"""How a stomp.py-API frame waits for a socket: :func:`never_waits` without
failover, :func:`reconnect_wait` with it (the ``wait`` of
:meth:`amqstomp._engine.client.Client.write`, used by
:meth:`amqstomp._session.StompSession._write`); and how a ``connect()`` wait that
an exception of the caller's ended gives its attempt up (:func:`abandon_connect`)."""
import logging
import time
from typing import Any, Callable, List, Optional

from .exception import NotConnectedException
from ._engine.failover import Reconnector

__all__ = ["never_waits", "reconnect_wait", "abandon_connect"]

log = logging.getLogger("amqstomp.connection")

#: ``wait(cmd, cause)``: returns once a socket may take the frame, else raises
Wait = Callable[[str, Optional[BaseException]], None]


def never_waits(cmd: str, cause: Optional[BaseException]) -> None:  # pragma: no cover - no failover: never called
    """The wait of a connection without failover: the engine writes on the open
    socket or raises, and never asks to wait for another."""
    raise NotConnectedException("not connected (%s not sent)" % cmd) from cause


def reconnect_wait(rc: Reconnector, wait_s: float) -> Wait:
    """The wait of one frame with failover: for the failover loop's new socket,
    ``wait_s`` seconds in all from the first wait (the clock is read only when a
    write finds no socket).

    Raises (from the wait):
        NotConnectedException: none within ``wait_s``, the attempts gave up, or
            ``disconnect()`` disarmed the loop (``cause`` re-raised when the
            loop is disarmed and the write failed).
    """
    deadline: List[float] = []

    def wait_up(cmd, cause):  # type: ignore[no-untyped-def]  # (not annotated: evaluated per call)
        if not rc.armed and cause is not None:
            raise cause
        now = time.monotonic()
        if not deadline:
            deadline.append(now + wait_s)
        left = deadline[0] - now
        if left <= 0 or not rc.wait_connected(left):
            if rc.gave_up is not None:
                raise NotConnectedException("not connected: reconnecting gave up: %s" % rc.gave_up) from cause
            if not rc.armed:
                raise NotConnectedException("not connected (%s not sent)" % cmd) from cause
            raise NotConnectedException("not reconnected within %.3g s (%s not sent)" % (wait_s, cmd)) from cause

    return wait_up


def abandon_connect(exc: BaseException, rc: Optional[Reconnector], transport: Any) -> None:
    """``connect(wait=True)`` ended by an exception that is not the connection's own
    (Ctrl-C: KeyboardInterrupt; one a signal handler raised): nobody waits for that
    CONNECTED any more, so the attempt ends now (the failover loop ``rc`` disarmed,
    the socket closed) instead of keeping its socket and threads until
    ``disconnect()``. The caller re-raises ``exc``; a failed clean-up is logged,
    never raised over it."""
    try:
        if rc is not None:
            rc.disarm()
        transport.close(reason="connect abandoned: %s" % (type(exc).__name__,))
    except Exception:
        log.exception("closing the connection after an abandoned connect() failed")
