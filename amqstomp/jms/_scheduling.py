"""The checks of ActiveMQ's scheduling properties (``AMQ_SCHEDULED_DELAY``,
``AMQ_SCHEDULED_PERIOD``, ``AMQ_SCHEDULED_REPEAT``, ``AMQ_SCHEDULED_CRON``):
a value the broker's scheduler cannot parse is refused before it is sent.

Used by :meth:`amqstomp.jms.Message.schedule` and ``set_property``.

Licensed under the Apache License, Version 2.0.
"""
import re
import time
from typing import Any, Dict, Optional, Set, Tuple

from .exceptions import MessageFormatError

__all__ = ["check_scheduled_property", "is_scheduling_property", "SCHEDULING_PROPERTIES"]

# ActiveMQ's scheduler (SchedulerBroker) reads these properties of a SEND with
# Long.valueOf / Integer.valueOf of the header text and the cron entry with its
# CronParser; a value they refuse makes the broker answer ERROR and close the
# socket, so amqstomp refuses it before sending. Name -> (largest value, unit).
_JAVA_LONG_MAX = 2 ** 63 - 1
_JAVA_INT_MAX = 2 ** 31 - 1
_SCHEDULED_NUMBERS: Dict[str, Tuple[int, str]] = {
    "AMQ_SCHEDULED_DELAY": (_JAVA_LONG_MAX, "ms"),
    "AMQ_SCHEDULED_PERIOD": (_JAVA_LONG_MAX, "ms"),
    "AMQ_SCHEDULED_REPEAT": (_JAVA_INT_MAX, "repeats"),
}
# ActiveMQ adds AMQ_SCHEDULED_DELAY to the current time in a Java long: a delay
# that overflows it makes the broker answer "Illegal execution time". The check
# keeps 100 years of room, so a message checked now is still fine when sent later.
_DELAY_ROOM_MS = 100 * 365 * 24 * 3600 * 1000
_SCHEDULED_CRON = "AMQ_SCHEDULED_CRON"
_DECIMAL = re.compile(r"[+-]?[0-9]+\Z")  # what Long.valueOf takes (ASCII digits only here)
_CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
                ("day of week", 0, 6))
_CRON_SEPARATORS = re.compile(r"[ \t]+")
_CRON_TOKEN = re.compile(r"[0-9*,/-]+\Z")
_CRON_NUMBER = re.compile(r"[0-9]{1,9}\Z")

#: The names of the properties ActiveMQ's scheduler reads.
SCHEDULING_PROPERTIES = frozenset(list(_SCHEDULED_NUMBERS) + [_SCHEDULED_CRON])


def is_scheduling_property(name: str) -> bool:
    """True when ``name`` (str) is one of :data:`SCHEDULING_PROPERTIES`."""
    return name in SCHEDULING_PROPERTIES


def check_scheduled_property(name: str, value: Any) -> None:
    """Refuse a value of one of ActiveMQ's scheduling properties that the broker
    cannot parse (it would answer ERROR and close the socket).

    ``AMQ_SCHEDULED_DELAY`` and ``AMQ_SCHEDULED_PERIOD`` (ms) must be whole numbers
    from 0 to 2**63 - 1 (a Java long) -- the delay less the current time since
    the epoch and 100 years, because the broker adds it to the current time in a
    Java long (an overflow is its "Illegal execution time") --,
    ``AMQ_SCHEDULED_REPEAT`` one from 0 to
    2**31 - 1 (a Java int): an ``int`` (not a bool or float) or a str of ASCII
    digits with an optional sign. ActiveMQ 5.18+ further refuses a repeat above
    its ``maxRepeatAllowed`` (1000 by default). ``AMQ_SCHEDULED_CRON`` must be a
    str that ActiveMQ's CronParser accepts, checked structurally: exactly five
    fields separated by spaces or tabs -- minute 0-59, hour 0-23, day of month
    1-31, month 1-12, day of week 0-6 (0 = Sunday) -- each ``*``, a number, a
    range ``a-b``, a list ``a,b,...`` of numbers and ranges, or a step ``x/n``
    (n >= 1). As in CronParser a step keeps the values of ``x`` that are
    multiples of ``n`` (``*/15`` = 0,15,30,45; ``5/10`` selects nothing and is
    refused). No names (JAN, MON), no Quartz ``? L W #``, no seconds field.
    Other property names are not checked here.

    Raises:
        MessageFormatError (a ValueError): naming the property and the bad value.
    """
    if name in _SCHEDULED_NUMBERS:
        largest, unit = _SCHEDULED_NUMBERS[name]
        if name == "AMQ_SCHEDULED_DELAY":
            largest -= int(time.time() * 1000) + _DELAY_ROOM_MS
        number: Optional[int] = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and _DECIMAL.match(value):
            number = int(value)
        if number is None or not 0 <= number <= largest:
            raise MessageFormatError("%s must be a whole number of %s from 0 to %d (what ActiveMQ's scheduler "
                                     "parses), got %r" % (name, unit, largest, value))
    elif name == _SCHEDULED_CRON:
        if not isinstance(value, str):
            raise MessageFormatError("%s must be a str (a cron entry such as '0 * * * *'), got %r" % (name, value))
        problem = _cron_problem(value)
        if problem:
            raise MessageFormatError("%s: %r is not a cron entry ActiveMQ accepts: %s" % (name, value, problem))


def _cron_problem(entry: str) -> Optional[str]:
    """What is wrong with a cron entry (None: nothing); see check_scheduled_property."""
    fields = [f for f in _CRON_SEPARATORS.split(entry.strip(" \t")) if f]
    if len(fields) != len(_CRON_FIELDS):
        return ("%d field(s); it needs 5 separated by spaces: minute hour day-of-month month day-of-week"
                % len(fields))
    for token, (what, low, high) in zip(fields, _CRON_FIELDS):
        if not _CRON_TOKEN.match(token):
            return "%s field %r: only digits and * , - / are allowed" % (what, token)
        try:
            values = _cron_values(token, low, high)
        except ValueError as exc:
            return "%s field %r: %s" % (what, token, exc)
        if not values:
            return "%s field %r selects no %s (a step x/n keeps the multiples of n in x)" % (what, token, what)
    return None


def _cron_values(token: str, low: int, high: int) -> Set[int]:
    """The values a cron field selects, evaluated the way CronParser does (a
    step before a list before a range); ValueError says what is wrong."""
    if token == "*":
        return set(range(low, high + 1))
    if "/" in token:
        base, _, step = token.partition("/")
        if not _CRON_NUMBER.match(step) or int(step) < 1:
            raise ValueError("the step after '/' must be a number >= 1, got %r" % (step,))
        n = int(step)
        return {v for v in _cron_values(base, low, high) if v % n == 0}
    if "," in token:
        chosen: Set[int] = set()
        for part in token.split(","):
            if not part:
                raise ValueError("an empty list item")
            chosen |= _cron_values(part, low, high)
        return chosen
    if "-" in token:
        first, _, last = token.partition("-")
        a, b = _cron_number(first, low, high), _cron_number(last, low, high)
        if a > b:
            raise ValueError("the range %d-%d is empty" % (a, b))
        return set(range(a, b + 1))
    return {_cron_number(token, low, high)}


def _cron_number(text: str, low: int, high: int) -> int:
    if not _CRON_NUMBER.match(text):
        raise ValueError("%r is not a number" % (text,))
    value = int(text)
    if not low <= value <= high:
        raise ValueError("%d is outside %d-%d" % (value, low, high))
    return value

