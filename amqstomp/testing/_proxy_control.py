"""How :class:`~amqstomp.testing.proxy.TcpProxy`'s control methods hand their
work to the proxy thread.

A :class:`CommandChannel` is a queue of commands plus a wake-up socket pair
whose read end the proxy thread's selector watches: :meth:`CommandChannel.submit`
queues a function, wakes the thread and waits (at most ``COMMAND_TIMEOUT``
seconds) for its result, which the thread produces in
:meth:`CommandChannel.run_pending`.
"""
from __future__ import annotations

import queue
import selectors
import socket
import threading
from typing import Any, Callable, List, Optional, Tuple

from ._proxy_sockets import COMMAND_TIMEOUT, ProxyError, quiet

__all__ = ["COMMAND_BURST", "CommandChannel"]

#: Most control commands run per wake-up of the proxy thread.
COMMAND_BURST = 64

_Command = Tuple[Callable[[], Any], threading.Event, List[Any]]


class CommandChannel:
    """Commands for the proxy thread and the socket pair that wakes it.

    Attributes:
        wake_r (socket.socket or None): the end the proxy's selector watches
            (set by :meth:`open`, None before).
    """

    def __init__(self) -> None:
        self._commands: "queue.SimpleQueue[_Command]" = queue.SimpleQueue()
        self.wake_r: Optional[socket.socket] = None
        self._wake_w: Optional[socket.socket] = None

    def open(self) -> None:
        """Create the wake-up socket pair.  Raises :class:`OSError`."""
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        self.wake_r, self._wake_w = wake_r, wake_w

    def register(self, selector: selectors.BaseSelector) -> None:
        """Have ``selector`` watch the wake-up socket (after :meth:`open`)."""
        assert self.wake_r is not None
        selector.register(self.wake_r, selectors.EVENT_READ)

    def close(self) -> None:
        """Close both wake-up sockets; never raises :class:`OSError`."""
        for sock in (self.wake_r, self._wake_w):
            if sock is not None:
                quiet(sock.close)

    def wake(self) -> None:
        """Make the proxy thread's ``select()`` return."""
        w = self._wake_w
        if w is not None:
            try:
                w.send(b"\0")
            except (BlockingIOError, OSError):  # full: already awake; closed: ending
                pass

    def drain(self) -> None:
        """Read the wake-up bytes (proxy thread)."""
        r = self.wake_r
        assert r is not None
        for _ in range(16):
            try:
                if not r.recv(4096):
                    return
            except (BlockingIOError, InterruptedError):
                return

    def submit(self, fn: Callable[[], Any]) -> Any:
        """Queue ``fn`` for the proxy thread, wake it and return ``fn``'s
        result; re-raises what ``fn`` raised.  Raises :class:`ProxyError` when
        the thread does not answer within ``COMMAND_TIMEOUT`` seconds."""
        done = threading.Event()
        result: List[Any] = []
        self._commands.put((fn, done, result))
        self.wake()
        if not done.wait(COMMAND_TIMEOUT):
            raise ProxyError("proxy thread did not answer within %.1f s" % COMMAND_TIMEOUT)
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    def run_pending(self) -> None:
        """Run up to ``COMMAND_BURST`` queued commands (proxy thread)."""
        for _ in range(COMMAND_BURST):
            try:
                fn, done, result = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                result.append(fn())
            except BaseException as exc:  # handed back to the caller
                result.append(exc)
            done.set()

    def fail_pending(self) -> None:
        """Answer up to ``COMMAND_BURST`` queued commands with
        :class:`ProxyError` (the thread is ending), so no caller waits its
        full timeout."""
        for _ in range(COMMAND_BURST):
            try:
                _, done, result = self._commands.get_nowait()
            except queue.Empty:
                break
            result.append(ProxyError("TcpProxy closed"))
            done.set()
