"""Process and port bookkeeping for the brokers the test tools start.

- :func:`free_port`: a loopback TCP port that is free now and that this
  process has not handed out before (two brokers started in a row never get
  the same one).
- :func:`die_with_parent`: a ``preexec_fn`` that makes the child get SIGTERM
  when this process dies (Linux ``prctl(PR_SET_PDEATHSIG)``; a no-op
  elsewhere).
- :func:`register` / :func:`unregister`: children still running at
  interpreter exit are stopped (their ``stop(timeout=10.0)`` is called).
- :func:`close_all`: stop or close several things, every one even when one
  fails, then raise the first error.
- :func:`tail_file`: the last lines of a log file, for error messages.
"""
from __future__ import annotations

import atexit
import ctypes
import logging
import os
import signal
import socket
import threading
import weakref
from typing import Any, Callable, Iterable, List, Optional, Set

__all__ = ["close_all", "die_with_parent", "free_port", "register", "tail_file", "unregister"]

log = logging.getLogger("amqstomp.testing._process")

_LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()
_RESERVED_PORTS: Set[int] = set()
_PORT_LOCK = threading.Lock()

try:
    _LIBC: Optional[Any] = ctypes.CDLL(None, use_errno=True)
    getattr(_LIBC, "prctl")  # Linux only: AttributeError elsewhere
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGTERM it when the parent dies."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def register(child: Any) -> None:
    """Stop ``child`` (anything with ``stop(timeout=seconds)``) at interpreter
    exit unless :func:`unregister` was called first. Held by a weak reference."""
    _LIVE.add(child)


def unregister(child: Any) -> None:
    """``child`` has ended: nothing to stop at exit."""
    _LIVE.discard(child)


@atexit.register
def _stop_leftovers() -> None:
    for child in list(_LIVE):
        try:
            child.stop(timeout=10.0)
        except Exception:  # pragma: no cover - best effort at interpreter exit
            log.exception("could not stop %r at exit", child)


def close_all(closers: Iterable[Callable[[], Any]]) -> None:
    """Call every one of ``closers`` (e.g. ``[broker.stop for broker in made]``)
    even when an earlier one raises; each error is logged, and the first is
    raised once all were called."""
    errors: List[Exception] = []
    for close in closers:
        try:
            close()
        except Exception as exc:  # keep closing the others
            log.exception("could not close: %r", close)
            errors.append(exc)
    if errors:
        raise errors[0]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and not handed out before.

    Raises :class:`RuntimeError` if 100 tries find none.
    """
    with _PORT_LOCK:
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port: int = s.getsockname()[1]
            if port not in _RESERVED_PORTS:
                _RESERVED_PORTS.add(port)
                return port
    raise RuntimeError("no free TCP port on 127.0.0.1")


def tail_file(path: Optional[str], lines: int = 40) -> str:
    """The last ``lines`` lines of the file (at most its last 256 KiB), or ""
    when ``path`` is None or unreadable."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 262144))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace").splitlines()[-lines:]
    return "\n".join(text)
