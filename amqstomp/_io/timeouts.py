"""The waits amqstomp hands to the platform: one bound and one check for every
public ``timeout`` (threads, sockets and timers are the drivers' business, so
this lives beside them, not in the pure protocol core)."""
import math
import numbers
import threading
from typing import Optional

from ..exception import InvalidTimeoutError

__all__ = ["MAX_WAIT_S", "clamp_wait"]

#: The longest wait, in seconds, that amqstomp hands to the platform (threading
#: waits, socket timeouts, timers): ``threading.TIMEOUT_MAX`` (about 292 years on
#: Linux, 49.7 days on Windows), at most 100 years. A longer valid timeout
#: (``timeout=1e12``) waits this long instead of raising OverflowError.
MAX_WAIT_S = min(threading.TIMEOUT_MAX, 100 * 365 * 86400.0)


def clamp_wait(seconds: Optional[float], name: str = "timeout", strict: bool = False,
               negative: bool = True) -> Optional[float]:
    """A wait given by a caller, checked: ``seconds`` (a negative one as 0, as
    ``threading.Event.wait`` takes it), or :data:`MAX_WAIT_S` when it is longer
    (infinity too); None stays None. Every public wait with a timeout goes
    through here.

    Args:
        name (str): the argument's name, for the error.
        strict (bool): refuse a negative or infinite wait too (``connect``'s).
        negative (bool): False: refuse a negative wait (an infinite one is clamped):
            a wait for one answer (``wait_for_receipt``), where -1 is no "do not wait".

    Raises:
        InvalidTimeoutError: (a ValueError and a TypeError) ``seconds`` is not
            a real number (a bool neither), or NaN (or, ``strict``, negative or
            infinite; or, not ``negative``, negative); the message names ``name``.
    """
    if seconds is None:
        return None
    if seconds.__class__ is not float and seconds.__class__ is not int:
        if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
            raise InvalidTimeoutError("%s must be a number of seconds or None, not %r (%s)"
                                      % (name, seconds, type(seconds).__name__))
        seconds = float(seconds)
    if seconds != seconds or (strict and not 0 <= seconds < math.inf) or (seconds < 0 and not negative):
        raise InvalidTimeoutError("%s must be a %snumber of seconds%s or None, got %r"
                                  % (name, "finite " if strict else "", " >= 0" if strict or not negative else "",
                                     seconds))
    if seconds <= MAX_WAIT_S:
        return seconds if seconds >= 0 else 0.0
    return MAX_WAIT_S
