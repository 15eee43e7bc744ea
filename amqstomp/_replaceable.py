"""Methods an instance may replace, as stomp.py's users replace them: :class:`ReplaceableMethod`.

stomp.py programs (and their tests) replace ``conn.send_frame`` or
``conn.transport.transmit`` on the instance (``mock.patch.object(conn,
"send_frame")``) or in a subclass to see every frame. amqstomp routes frames
through such a replacement only when there is one, and must know at once
without looking at the instance's ``__dict__`` per frame (and without a
``__setattr__``, which makes every attribute read of the object slower on
CPython). A :class:`ReplaceableMethod` is the method on the class (its
signature, ``super()`` calls and subclass overrides work as for any method);
assigning to it on an instance keeps the replacement beside the method and
calls the owner's ``changed`` method, which updates the flag the hot path reads.
"""
from typing import Any, Callable, Optional

__all__ = ["ReplaceableMethod", "replaceable"]


class ReplaceableMethod:
    """A data descriptor around ``func``: reading it on an instance gives the
    instance's replacement if one was assigned, else ``func`` bound; on the
    class, ``func`` itself. Assigning or deleting on an instance stores or
    drops the replacement, then calls ``instance.<changed>()``.

    Args:
        func: the method.
        changed (str): the name of the owner's method to call after a change.
    """

    def __init__(self, func: Callable[..., Any], changed: str) -> None:
        self.func = func
        self.changed = changed
        self.name = func.__name__
        self.key = "_replacement_" + func.__name__
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.key = "_replacement_" + name

    def __get__(self, obj: Any, objtype: Optional[type] = None) -> Any:
        if obj is None:
            return self.func
        replacement = getattr(obj, self.key, None)
        if replacement is not None:
            return replacement
        return self.func.__get__(obj, objtype)

    def __set__(self, obj: Any, value: Any) -> None:
        object.__setattr__(obj, self.key, value)
        getattr(obj, self.changed)()

    def __delete__(self, obj: Any) -> None:
        if getattr(obj, self.key, None) is None:
            raise AttributeError(self.name)
        object.__setattr__(obj, self.key, None)
        getattr(obj, self.changed)()

    def replaced_on(self, obj: Any) -> bool:
        """True when ``obj`` has a replacement of its own, or its class overrides the method."""
        return getattr(obj, self.key, None) is not None or getattr(type(obj), self.name) is not self.func


def replaceable(changed: str) -> Callable[[Callable[..., Any]], Any]:
    """Decorator: the method as a :class:`ReplaceableMethod` calling ``changed`` after a change."""
    def wrap(func: Callable[..., Any]) -> Any:
        return ReplaceableMethod(func, changed)
    return wrap
