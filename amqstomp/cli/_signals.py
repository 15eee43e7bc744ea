"""Ctrl-C reaches the command-line shell's main thread, whichever thread the kernel gives it to.

A signal sent to the process (Ctrl-C at the terminal, ``kill -INT``) may be taken by any of
its threads that does not block it: the connection's reader, dispatcher or timer as well
as the main thread. Python then only notes it; its handler (``KeyboardInterrupt``) runs in
the main thread once that runs Python code again. The shell's main thread waits in
readline's ``select()`` on the terminal, which only a signal taken by that thread ends: so
the note waited for the next key, and Ctrl-C at the prompt printed nothing (every time
when the signal is sent to another thread: ``tests/test_cli.py``). A SIGINT the main thread
takes after the prompt was drawn but before its ``select()`` began would end the same way.

:class:`MainThreadNudge` relays it: Python writes each signal's number to the wakeup fd
(:func:`signal.set_wakeup_fd`) whichever thread took it; a thread of ours reads them and, for
SIGINT, sends :data:`NUDGE` to the main thread (:func:`signal.pthread_kill`) every
:data:`NUDGE_EVERY_S` until the SIGINT handler ran (at most :data:`NUDGE_FOR_S`): its no-op
handler ends the ``select()`` (EINTR), readline runs the pending handlers and
``KeyboardInterrupt`` is raised at the prompt. A nudge that finds the main thread elsewhere
is harmless (Python retries an interrupted call, PEP 475).
"""
import logging
import os
import signal
import threading
import time
from typing import Any, Optional

__all__ = ["MainThreadNudge", "NUDGE"]

log = logging.getLogger("amqstomp.cli")

#: the signal sent to the main thread to end a wait in a system call (its handler does nothing)
NUDGE = signal.SIGUSR2
#: seconds between two nudges while the SIGINT handler has not run
NUDGE_EVERY_S = 0.05
#: seconds after which a SIGINT's nudges stop (a main thread busy in a command runs the handler itself)
NUDGE_FOR_S = 5.0
_SIGINT = int(signal.SIGINT)


def _ignore(signum: int, frame: Any) -> None:
    """:data:`NUDGE`'s handler: nothing (its arrival ending the main thread's wait is the point)."""


class MainThreadNudge:
    """Nudges the main thread until it handled a SIGINT, whoever took it (module docstring).

    :meth:`start` in the main thread, :meth:`stop` when done; without a wakeup fd of its own
    (one already set: an asyncio loop's) or outside the main thread it does nothing. While
    started, SIGINT's handler counts its runs (``handled``), then runs the one it replaced.
    """

    def __init__(self) -> None:
        self._write_fd: Optional[int] = None
        self._thread: Optional[threading.Thread] = None
        self._previous: Any = None
        self.handled = 0

    def _on_sigint(self, signum: int, frame: Any) -> None:
        """SIGINT's handler while started (main thread): counted, then the replaced one."""
        self.handled += 1
        previous = self._previous
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    def start(self) -> bool:
        """Install the wakeup fd, :data:`NUDGE`'s handler and the relay thread; False when
        not done (not the main thread, or a wakeup fd set already)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        try:
            previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except (ValueError, OSError) as exc:
            log.debug("no signal relay: %s", exc)
            os.close(read_fd)
            os.close(write_fd)
            return False
        if previous != -1:  # somebody else's: leave it
            signal.set_wakeup_fd(previous)
            os.close(read_fd)
            os.close(write_fd)
            return False
        signal.signal(NUDGE, _ignore)
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        self._write_fd = write_fd
        self._thread = threading.Thread(target=self._relay, args=(read_fd,), name="amqstomp-cli-signals",
                                        daemon=True)
        self._thread.start()
        return True

    def _relay(self, read_fd: int) -> None:
        """Relay thread: after a SIGINT's number, nudge the main thread until its handler ran
        (counted before the read: one that ran meanwhile needs no nudge); ends at EOF (:meth:`stop`)."""
        main = threading.main_thread().ident
        try:
            while True:
                handled = self.handled
                data = os.read(read_fd, 64)
                if not data:
                    return
                if main is None or _SIGINT not in data:
                    continue
                deadline = time.monotonic() + NUDGE_FOR_S
                while self.handled == handled and self._write_fd is not None and time.monotonic() < deadline:
                    signal.pthread_kill(main, NUDGE)
                    time.sleep(NUDGE_EVERY_S)
        except OSError as exc:  # (the main thread gone: the process ends)
            log.debug("signal relay ended: %s", exc)
        finally:
            os.close(read_fd)

    def stop(self) -> None:
        """Remove the wakeup fd and end the relay thread (main thread; safe to call twice)."""
        write_fd, self._write_fd = self._write_fd, None
        if write_fd is None:
            return
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGINT, self._previous)
        os.close(write_fd)  # the relay reads EOF and ends
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(1.0)
