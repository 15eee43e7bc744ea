"""How the text of a URI option becomes its value: the converters of
:mod:`amqstomp.uri`'s option tables (each raises ValueError with what it expected;
the URI parser names the option and the URI).
"""
import math
import re
from typing import Callable, Optional, Tuple

from .dialect import BROKERS

__all__ = ["boolean", "int_in", "float_min", "stomp_version", "broker_dialect", "PREFETCH", "MS", "MS_OR_OFF",
           "redact", "heart_beat"]


def boolean(text: str) -> bool:
    """``true`` or ``false`` in any case; ActiveMQ's Java client (``Boolean.parseBoolean``) reads any other value as false."""
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false (ActiveMQ's Java client reads any other value, 1 and yes included, as false)")
    return lowered == "true"


def int_in(low: int, high: Optional[int] = None) -> Callable[[str], int]:
    """An int converter that refuses values outside low .. high."""
    def convert(text: str) -> int:
        value = int(text.strip(), 10)
        if value < low or (high is not None and value > high):
            raise ValueError("expected an integer from %d%s" % (low, " to %d" % high if high is not None else " up"))
        return value
    return convert


def float_min(low: float) -> Callable[[str], float]:
    """A float converter that refuses NaN, infinities and values below ``low``."""
    def convert(text: str) -> float:
        value = float(text.strip())
        if not math.isfinite(value) or value < low:
            raise ValueError("expected a finite number >= %g" % low)
        return value
    return convert


def stomp_version(text: str) -> str:
    if text not in ("1.0", "1.1", "1.2"):
        raise ValueError("expected 1.0, 1.1 or 1.2")
    return text


def broker_dialect(text: str) -> str:
    value = text.strip().lower()
    if value != "auto" and value not in BROKERS:
        raise ValueError("expected auto, %s" % ", ".join(BROKERS))
    return value


#: prefetch sizes (messages): 0 to a Java int
PREFETCH = int_in(0, 2 ** 31 - 1)
#: ms, >= 0
MS = int_in(0)
#: ms or a count, -1 = off / no limit
MS_OR_OFF = int_in(-1)


def redact(text: str) -> str:
    """``text`` with passwords and URI credentials masked, for error messages."""
    text = re.sub(r"((?:password|passcode)=)[^&)\s]*", r"\1***", text, flags=re.I)
    return re.sub(r"(//)[^/@\s]*@", r"\1***@", text)


def heart_beat(text: str) -> Tuple[int, int]:
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError("expected two numbers of ms, 'cx,cy'")
    cx, cy = (int(p.strip(), 10) for p in parts)
    if cx < 0 or cy < 0:
        raise ValueError("heart-beat intervals must be >= 0 ms")
    return cx, cy
