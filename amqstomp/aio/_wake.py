"""The wake-up a receive without a deadline awaits: resolved by the socket's reading callback,
it resumes the waiting task in the same turn of the loop.

An :class:`asyncio.Future` schedules its done-callbacks (``call_soon``): a task waiting for a
MESSAGE then resumes one loop turn after the read that brought it -- a second pass through the
selector (a zero-timeout poll) per message, most of the loop's cost per message at prefetch 1.
:class:`Wake` follows the future protocol :class:`asyncio.Task` accepts from any awaitable
(``_asyncio_future_blocking``, ``_loop``, ``add_done_callback``, ``cancel(msg)``, ``result``; no
``get_loop`` method: a task then reads ``_loop``, asyncio's fallback -- ``futures._get_loop``, the
C task's too -- one Python call less per wait); :meth:`Wake.wake` with ``at_once``, called outside
any task (the loop's reading callback), runs the waiting task's wake-up at once, in the task's
context. :meth:`Wake.set_result`, :meth:`Wake.cancel` and a wake-up from inside a task (a task
cannot resume another while it runs) schedule the wake-up as a Future does.

Per message at prefetch 1 this is on the hot path (issue 23): the task calls
``add_done_callback`` and ``result``; the reading callback calls :meth:`Wake.wake` -- nothing
else (no per-call helper, the first done-callback held without a list).

Licensed under the Apache License, Version 2.0.
"""
import asyncio
import contextvars
import types
from typing import Any, Callable, Generator, List, Optional, Tuple

__all__ = ["Wake"]

_PENDING, _DONE, _CANCELLED = 0, 1, 2

#: the task running on a loop, or None: Python 3.9-3.11's :func:`asyncio.current_task` is a Python
#: function around the C module's ``_current_tasks`` dict (one more Python call per wake-up); 3.12+
#: has it in C
_CURRENT_TASKS = getattr(asyncio.tasks, "_current_tasks", None)
_current_task: Callable[[asyncio.AbstractEventLoop], Optional["asyncio.Task[Any]"]] = (
    _CURRENT_TASKS.get if type(_CURRENT_TASKS) is dict and isinstance(asyncio.current_task, types.FunctionType)
    else asyncio.current_task)

_Callback = Tuple[Callable[[Any], Any], contextvars.Context]


class Wake:
    """One wake-up (no value): await it; :meth:`set_result` (``None``), :meth:`wake` or
    :meth:`cancel` ends it.

    Args:
        loop (asyncio.AbstractEventLoop): the loop of the task that awaits it.
    """

    __slots__ = ("_loop", "_state", "_first", "_more", "_asyncio_future_blocking", "_cancel_message")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._state = _PENDING
        self._first: Optional[_Callback] = None  # the awaiting task's wake-up (the only one, as a rule)
        self._more: Optional[List[_Callback]] = None
        self._asyncio_future_blocking = False
        self._cancel_message: Optional[str] = None

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self) -> None:
        """None once resolved.

        Raises:
            asyncio.CancelledError: it was cancelled; asyncio.InvalidStateError: not done yet.
        """
        if self._state == _DONE:
            return None
        if self._state == _CANCELLED:
            raise asyncio.CancelledError(self._cancel_message)
        raise asyncio.InvalidStateError("the wake-up is not done")

    def exception(self) -> Optional[BaseException]:
        self.result()
        return None

    def add_done_callback(self, fn: Callable[[Any], Any], *, context: Optional[contextvars.Context] = None) -> None:
        if context is None:
            context = contextvars.copy_context()
        if self._state != _PENDING:
            self._loop.call_soon(fn, self, context=context)
        elif self._first is None and self._more is None:
            self._first = (fn, context)
        else:
            if self._more is None:
                self._more = []
            self._more.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], Any]) -> int:
        callbacks = self._take()
        kept = [(f, c) for f, c in callbacks if f != fn]
        if kept:
            self._first, self._more = kept[0], kept[1:] or None
        return len(callbacks) - len(kept)

    def set_result(self, result: None) -> None:
        """Resolve it as a Future would: the waiting task resumes at the loop's next turn.

        Raises:
            asyncio.InvalidStateError: done already.
        """
        if not self.wake(False):
            raise asyncio.InvalidStateError("the wake-up is done already")

    def resume(self) -> None:
        """Resolve it, and when no task runs (the loop's reading callback) resume the waiting
        task now, before returning; from inside a task as :meth:`set_result`.

        Raises:
            asyncio.InvalidStateError: done already.
        """
        if not self.wake(True):
            raise asyncio.InvalidStateError("the wake-up is done already")

    def wake(self, at_once: bool) -> bool:
        """Resolve it (False, and nothing done, when it is done already: a cancelled receive's).
        ``at_once`` and no task running (the loop's reading callback): the waiting task resumes
        now, before this returns; otherwise its wake-up is scheduled (``call_soon``)."""
        if self._state != _PENDING:
            return False
        self._state = _DONE
        first = self._first
        if first is None and self._more is None:
            return True
        loop = self._loop
        if at_once and self._more is None and _current_task(loop) is None:
            self._first = None
            fn, context = first  # type: ignore[misc]
            try:
                context.run(fn, self)
            except RuntimeError as exc:
                if "already entered" not in str(exc):
                    raise
                loop.call_soon(fn, self, context=context)  # the reader runs in that context: not at once
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:  # as a loop's callback: reported, not raised into the reader
                loop.call_exception_handler({"message": "exception in a wake-up callback", "exception": exc,
                                             "future": self})
            return True
        for fn, context in self._take():
            loop.call_soon(fn, self, context=context)
        return True

    def cancel(self, msg: Optional[str] = None) -> bool:
        """As :meth:`asyncio.Future.cancel` (its wake-ups scheduled, never run at once)."""
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        self._cancel_message = msg
        loop = self._loop
        for fn, context in self._take():
            loop.call_soon(fn, self, context=context)
        return True

    def _take(self) -> List[_Callback]:
        """The done-callbacks, in order, removed."""
        callbacks = [] if self._first is None else [self._first]
        if self._more is not None:
            callbacks.extend(self._more)
        self._first = self._more = None
        return callbacks

    def __await__(self) -> Generator[Any, None, None]:
        if self._state == _PENDING:
            self._asyncio_future_blocking = True
            yield self
            if self._state == _PENDING:
                raise RuntimeError("await wasn't used with future")
        if self._state != _DONE:
            self.result()  # raises CancelledError

    __iter__ = __await__

    def __repr__(self) -> str:
        return "<aio.Wake %s>" % ("pending", "done", "cancelled")[self._state]
