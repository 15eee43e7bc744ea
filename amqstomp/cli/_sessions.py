"""How :class:`amqstomp.cli.shell.StompCLI` runs a whole session (:class:`Sessions`, its
base class, kept here so that each module stays readable): the interactive shell, a
``-F`` file or ``-L`` listening, then the disconnect.

A ``-F`` file whose subscription is still open at its end waits (bounded) for the
MESSAGEs the broker is still delivering before it disconnects: ``disconnect()`` hands
none to the listeners once called, and a ``sendrec``'s MESSAGE comes just after its
RECEIPT, about when the file ends (it printed in 2 runs of 3). stomp.py's client
exits right after the last command, printing what came by then.
"""
import signal
import threading
import time
from typing import Any, Callable, Dict, Optional

from ..exception import StompException
from ._signals import MainThreadNudge

__all__ = ["Sessions", "SETTLE_QUIET_S", "SETTLE_MAX_S", "ECHO_MAX_S"]

#: seconds without a MESSAGE after which a ``-F`` file's session ends (a subscription open)
SETTLE_QUIET_S = 0.25
#: the longest wait, seconds, for that quiet (a busy subscription ends the session anyway)
SETTLE_MAX_S = 2.0
#: the longest wait, seconds, of a file's command for the MESSAGE it sent to a destination subscribed to
ECHO_MAX_S = 1.0
#: the commands that send a message to the destination they name first
_SENDING = frozenset(("send", "sendrec", "sendreply", "sendfile"))


class Sessions:
    """:meth:`run_session` and its parts (the shell supplies the attributes declared below)."""

    conn: Any
    failures: int
    _quit: bool
    _gone: threading.Event
    _subscriptions: Dict[str, Any]
    _last_message: float
    transaction_id: Optional[str]
    _tx_echo: bool  # the open transaction holds a send to a destination subscribed to
    _error: Callable[..., None]
    do_subscribe: Callable[[str], None]
    do_run: Callable[[str], bool]
    cmdloop: Callable[[], None]

    def run_session(self, listen: Optional[str] = None, filename: Optional[str] = None) -> int:
        """The session :func:`amqstomp.cli.client.main` runs, then disconnect:
        ``listen`` (``-L``): subscribe and print what arrives until Ctrl-C or
        SIGTERM (status 0) or the connection is lost (1); ``filename``
        (``-F``): its commands (1 when one failed), then, a subscription open,
        what arrives until :data:`SETTLE_QUIET_S` pass without a MESSAGE (at
        most :data:`SETTLE_MAX_S`); else the interactive shell (0). Ctrl-C reaches the
        main thread whichever thread took it, whenever (:mod:`amqstomp.cli._signals`)."""
        status = 0
        nudge = MainThreadNudge()
        nudge.start()
        try:
            if listen is not None:
                signal.signal(signal.SIGTERM, _interrupt)  # `kill`: stop as Ctrl-C does
                self.do_subscribe(listen)
                while not self._gone.wait(0.5):
                    pass
                status = 1  # the connection was lost
            elif filename is not None:
                if not self.do_run(filename):  # not after a quit line: from it on nothing prints
                    self.settle()
                status = 1 if self.failures else 0
            else:
                self.cmdloop()
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM during -L or -F: stop
            pass
        except StompException as exc:
            self._error(str(exc))
            status = 1
        finally:
            self._quit = True
            self.conn.disconnect()
            nudge.stop()
        return status

    def settle(self) -> None:
        """While a subscription is open and the connection up: wait until no MESSAGE
        printed for :data:`SETTLE_QUIET_S` (counted from the call at the earliest),
        at most :data:`SETTLE_MAX_S` in all."""
        start = time.monotonic()
        while self._subscriptions and not self._gone.is_set():
            now = time.monotonic()
            left = min(SETTLE_QUIET_S - (now - max(start, self._last_message)), start + SETTLE_MAX_S - now)
            if left <= 0:
                return
            time.sleep(left)


    def await_echo(self, line: str, started: float) -> None:
        """In a file of commands (``-F``, ``run``), after ``line`` ran (from time.monotonic()
        ``started``) without failing: when it sent a message to a destination subscribed to
        (or committed a transaction holding one), wait for a MESSAGE to print, at most
        :data:`ECHO_MAX_S`, so that it prints before the next command's output, in the order
        of the commands typed one by one. Without it where it printed depended on timing: of
        ``subscribe q``, ``sendrec q hello``, ``version``, ``begin``, ``commit``, the MESSAGE
        printed after ``version``'s line or after ``commit``'s in 3 runs of 6 (stomp.py's
        client exits first and prints none)."""
        words = line.split()
        if words and words[0] in ("abort", "rollback"):
            self._tx_echo = False
        if not words or not self._subscriptions:
            return
        if words[0] in _SENDING:
            if len(words) < 2 or words[1] not in self._subscriptions:
                return
            if self.transaction_id is not None:  # delivered at the commit
                self._tx_echo = True
                return
        elif words[0] != "commit" or not self._tx_echo:
            return
        self._tx_echo = False
        deadline = started + ECHO_MAX_S
        while self._last_message < started and not self._gone.is_set():  # bounded: ECHO_MAX_S
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.005))


def _interrupt(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one must not cut the disconnect
    raise KeyboardInterrupt
