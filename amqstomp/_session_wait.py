"""How a stomp.py-API frame waits for a socket: :func:`never_waits` without
failover, :func:`reconnect_wait` with it (the ``wait`` of
:meth:`amqstomp._engine.client.Client.write`, used by
:meth:`amqstomp._session.StompSession._write`)."""
import time
from typing import Callable, List, Optional

from .exception import NotConnectedException
from ._engine.failover import Reconnector

__all__ = ["never_waits", "reconnect_wait"]

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
