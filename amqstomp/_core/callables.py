"""What kind of callable the application handed over: an ``async def`` one (its call returns
a coroutine to await) or a plain one (its call does the work). The asyncio API's handlers
(:meth:`amqstomp.aio.Subscription.run`) must be the first kind, the JMS API's message listeners
(called on a session thread, nobody awaits them) the second; each refuses the other kind
when it is handed over, rather than at each message (a plain handler awaited raises TypeError,
an ``async def`` listener called only makes a coroutine that never runs).

Licensed under the Apache License, Version 2.0.
"""
import functools
import inspect
import types
from typing import Any, Optional

__all__ = ["is_async_callable"]

#: the callables whose kind their code tells (``inspect.iscoroutinefunction`` reads it)
_PYTHON_CODE = (types.FunctionType, types.MethodType)


def is_async_callable(fn: Any) -> Optional[bool]:
    """Whether calling ``fn`` returns a coroutine: True for an ``async def`` function or
    method, a ``functools.partial`` of one, an object whose ``__call__`` is ``async def``
    (or anything ``inspect.iscoroutinefunction`` recognises, such as a function marked by
    ``inspect.markcoroutinefunction``); False for a plain Python function, method, partial of
    one, or an object whose ``__call__`` is one of those; None when its code cannot tell
    (a builtin, a compiled function, a ``__call__`` that is neither, a plain decorator's
    wrapper of an ``async def`` function, ``functools.wraps``): only a call shows.
    ``fn`` must be callable."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(type(fn), "__call__", None)
    if isinstance(fn, _PYTHON_CODE) or isinstance(fn, functools.partial):
        inner: Any = fn
        while isinstance(inner, functools.partial):
            inner = inner.func
        if not isinstance(inner, _PYTHON_CODE):
            return is_async_callable(inner)
        wrapped = getattr(inner, "__wrapped__", None)  # a plain decorator's wrapper may return its coroutine
        return None if wrapped is not None and callable(wrapped) and is_async_callable(wrapped) else False
    if isinstance(call, types.FunctionType):  # a class with a ``def __call__`` or ``async def __call__``
        return inspect.iscoroutinefunction(call)
    return None
