"""The wake-up a receive without a deadline awaits: resolved by the socket's reading callback,
it resumes the waiting task in the same turn of the loop.

An :class:`asyncio.Future` schedules its done-callbacks (``call_soon``): a task waiting for a
MESSAGE then resumes one loop turn after the read that brought it -- a second pass through the
selector (a zero-timeout poll) per message, most of the loop's cost per message at prefetch 1.
:class:`Wake` follows the future protocol :class:`asyncio.Task` accepts from any awaitable
(``_asyncio_future_blocking``, ``get_loop``, ``add_done_callback``, ``cancel(msg)``,
``result``); :meth:`Wake.resume` called outside any task (the loop's reading callback) runs the
waiting task's wake-up at once, in the task's context. :meth:`Wake.set_result`, :meth:`Wake.cancel`
and a ``resume`` from inside a task (a task cannot resume another while it runs) schedule the
wake-up as a Future does.

Licensed under the Apache License, Version 2.0.
"""
import asyncio
import contextvars
from typing import Any, Callable, Generator, List, Optional, Tuple

__all__ = ["Wake"]

_PENDING, _DONE, _CANCELLED = 0, 1, 2
_current_task = asyncio.current_task


class Wake:
    """One wake-up (no value): await it; :meth:`set_result` (``None``) or :meth:`cancel` ends it.

    Args:
        loop (asyncio.AbstractEventLoop): the loop of the task that awaits it.
    """

    __slots__ = ("_loop", "_state", "_callbacks", "_asyncio_future_blocking", "_cancel_message")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._state = _PENDING
        self._callbacks: List[Tuple[Callable[[Any], Any], contextvars.Context]] = []
        self._asyncio_future_blocking = False
        self._cancel_message: Optional[str] = None

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self) -> None:
        """None once resolved.

        Raises:
            asyncio.CancelledError: it was cancelled; asyncio.InvalidStateError: not done yet.
        """
        if self._state == _CANCELLED:
            raise asyncio.CancelledError(self._cancel_message)
        if self._state == _PENDING:
            raise asyncio.InvalidStateError("the wake-up is not done")
        return None

    def exception(self) -> Optional[BaseException]:
        self.result()
        return None

    def add_done_callback(self, fn: Callable[[Any], Any], *, context: Optional[contextvars.Context] = None) -> None:
        if context is None:
            context = contextvars.copy_context()
        if self._state != _PENDING:
            self._loop.call_soon(fn, self, context=context)
        else:
            self._callbacks.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], Any]) -> int:
        kept = [(f, c) for f, c in self._callbacks if f != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks = kept
        return removed

    def set_result(self, result: None) -> None:
        """Resolve it as a Future would: the waiting task resumes at the loop's next turn.

        Raises:
            asyncio.InvalidStateError: done already.
        """
        self._resolve(False)

    def resume(self) -> None:
        """Resolve it, and when no task runs (the loop's reading callback) resume the waiting
        task now, before returning; from inside a task as :meth:`set_result`.

        Raises:
            asyncio.InvalidStateError: done already.
        """
        self._resolve(_current_task(self._loop) is None)

    def _resolve(self, at_once: bool) -> None:
        if self._state != _PENDING:
            raise asyncio.InvalidStateError("the wake-up is done already")
        self._state = _DONE
        self._run_callbacks(at_once)

    def cancel(self, msg: Optional[str] = None) -> bool:
        """As :meth:`asyncio.Future.cancel` (its wake-ups scheduled, never run at once)."""
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        self._cancel_message = msg
        self._run_callbacks(False)
        return True

    def _run_callbacks(self, at_once: bool) -> None:
        callbacks, self._callbacks = self._callbacks, []
        loop = self._loop
        for fn, context in callbacks:
            if not at_once:
                loop.call_soon(fn, self, context=context)
                continue
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

    def __await__(self) -> Generator[Any, None, None]:
        if self._state == _PENDING:
            self._asyncio_future_blocking = True
            yield self
        if self._state == _PENDING:
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__

    def __repr__(self) -> str:
        return "<aio.Wake %s>" % ("pending", "done", "cancelled")[self._state]
