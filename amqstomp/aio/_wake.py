"""The wake-up of a receive waiting for a MESSAGE: resolved by the socket's reading callback,
it resumes the waiting task in the same turn of the loop.

An :class:`asyncio.Future` schedules its done-callbacks (``call_soon``): a task waiting for a
MESSAGE then resumes one loop turn after the read that brought it -- a second pass through the
selector (a zero-timeout poll) per message, most of the loop's cost per message at prefetch 1.
:func:`resume` resolves the receive's future and, called outside any task (the loop's reading
callback), runs the waiting task's wake-up at once, in the task's context: the done-callback is
taken off the future first (its ``_callbacks``, which asyncio's Future has in C and in Python),
so the future schedules nothing. Anywhere else -- inside a task (a task cannot resume another
while it runs), several callbacks, a future without ``_callbacks`` -- it is ``set_result``.

The waiter is a plain (C) :class:`asyncio.Future` (:func:`future_maker`): awaiting it, a task
calls no Python function; an earlier Python ``Wake`` class cost 6 Python calls per message at
prefetch 1 (issue 23).

Licensed under the Apache License, Version 2.0.
"""
import asyncio
import functools
import types
from typing import Any, Callable, Optional

__all__ = ["future_maker", "resume"]

#: the task running on a loop, or None: Python 3.9-3.11's :func:`asyncio.current_task` is a Python
#: function around the C module's ``_current_tasks`` dict (one more Python call per wake-up); 3.12+
#: has it in C
_CURRENT_TASKS = getattr(asyncio.tasks, "_current_tasks", None)
_current_task: Callable[[asyncio.AbstractEventLoop], Optional["asyncio.Task[Any]"]] = (
    _CURRENT_TASKS.get if type(_CURRENT_TASKS) is dict and isinstance(asyncio.current_task, types.FunctionType)
    else asyncio.current_task)


def future_maker(loop: asyncio.AbstractEventLoop) -> "Callable[[], asyncio.Future[None]]":
    """``loop.create_future``, as a function to call per receive: :class:`asyncio.Future` bound to
    ``loop`` (a C constructor) when the loop's ``create_future`` is asyncio's own (which makes
    just that), not one more Python call; any other loop's (uvloop's) ``create_future``."""
    if getattr(type(loop), "create_future", None) is asyncio.BaseEventLoop.create_future:
        return functools.partial(asyncio.Future, loop=loop)
    return loop.create_future


def resume(waiter: "asyncio.Future[None]") -> None:
    """Resolve ``waiter`` (pending) with None; from outside any task, with one done-callback
    (the awaiting task's wake-up), run that callback now, before returning, in its context
    (see the module docstring); otherwise as ``waiter.set_result(None)``.

    Raises:
        asyncio.InvalidStateError: ``waiter`` is done already.
    """
    callbacks = getattr(waiter, "_callbacks", None)
    loop = waiter.get_loop()
    if not callbacks or len(callbacks) != 1 or _current_task(loop) is not None:
        waiter.set_result(None)
        return
    fn, context = callbacks[0]
    waiter.remove_done_callback(fn)
    waiter.set_result(None)
    try:
        context.run(fn, waiter)
    except RuntimeError as exc:
        if "already entered" not in str(exc):
            raise
        loop.call_soon(fn, waiter, context=context)  # the reader runs in that context: not at once
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:  # as a loop's callback: reported, not raised into the reader
        loop.call_exception_handler({"message": "exception in a wake-up callback", "exception": exc,
                                     "future": waiter})
