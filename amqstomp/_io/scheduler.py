"""One thread per socket that runs callbacks at given times (``call_later``).

Runs heart-beat send/check ticks, deferred-write flushes, ack-batch timers
and redelivery delays; stops with its socket.
"""
import heapq
import itertools
import logging
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from .timeouts import MAX_WAIT_S

__all__ = ["Scheduler", "TimerHandle"]

log = logging.getLogger("amqstomp.transport")


class TimerHandle:
    """A callback scheduled on a :class:`Scheduler`; ``cancel()`` stops it from running.

    Attributes:
        when (float): ``time.monotonic()`` deadline, in seconds.
    """

    __slots__ = ("when", "fn", "args", "cancelled")

    def __init__(self, when: float, fn: Callable[..., Any], args: Tuple[Any, ...]) -> None:
        self.when = when
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the callback (no effect once it has started)."""
        self.cancelled = True


class Scheduler:
    """One thread that runs callbacks at given times (a tiny ``call_later`` loop).

    Callbacks run one at a time on the scheduler's thread and must be short;
    an exception in one is logged and does not stop the others. Used for
    heart-beats here; later modules use it for ack-flush timers and reconnect
    back-off.

    Args:
        name (str): the thread's name.
    """

    def __init__(self, name: str = "amqstomp-timer") -> None:
        self.name = name
        self._heap: List[Tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition(threading.Lock())
        self._stopped = False
        self._thread: Optional[threading.Thread] = None

    @property
    def thread(self) -> Optional[threading.Thread]:
        """The scheduler's thread (None before :meth:`start`)."""
        return self._thread

    def start(self, create_thread: Optional[Callable[[Callable[[], None]], Any]] = None) -> "Scheduler":
        """Start the thread; returns self.

        Args:
            create_thread: ``fc(callback) -> started thread`` (stomp.py's
                ``override_threading`` contract) to make it with; None: a daemon
                ``threading.Thread`` named :attr:`name`.
        """
        if self._thread is None:
            if create_thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            else:
                self._thread = create_thread(self._run)
                try:
                    self._thread.name = self.name
                except (AttributeError, TypeError):  # a thread-like object without a settable name
                    pass
        return self

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run ``fn(*args)`` on the scheduler thread after ``delay_s`` seconds.

        Returns:
            TimerHandle: cancel it to drop the call. After :meth:`stop` the
            returned handle is already cancelled.
        """
        handle = TimerHandle(time.monotonic() + max(0.0, min(float(delay_s), MAX_WAIT_S)), fn, args)
        with self._cond:
            if self._stopped:
                handle.cancelled = True
                return handle
            heapq.heappush(self._heap, (handle.when, next(self._seq), handle))
            if self._heap[0][2] is handle:
                self._cond.notify()
        return handle

    def stop(self, join_timeout: Optional[float] = None) -> None:
        """Drop every pending call and end the thread.

        Args:
            join_timeout (float | None): seconds to wait for the thread to end
                (not waited for when None, or when called from the thread itself).
        """
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        thread = self._thread
        if join_timeout is not None and thread is not None and thread is not threading.current_thread():
            thread.join(join_timeout)

    def _run(self) -> None:
        cond = self._cond
        heap = self._heap
        while True:
            with cond:
                while True:
                    if self._stopped:
                        return
                    if heap:
                        delay = heap[0][0] - time.monotonic()
                        if delay <= 0:
                            handle = heapq.heappop(heap)[2]
                            break
                        cond.wait(delay)
                    else:
                        cond.wait()
            if handle.cancelled:
                continue
            try:
                handle.fn(*handle.args)
            except Exception:
                log.exception("timer callback %r failed", handle.fn)
