"""stomp.py's ``subscribe()`` arguments, as amqstomp reads them: its own keywords
taken out of the headers (:func:`pop_reserved`), the ``ack`` default told apart
from the same text given, and destination/id/ack reconciled with the same
names among the headers (:func:`subscribe_arguments`). Used by
:mod:`amqstomp.protocol`, which re-exports ``RESERVED_KEYWORDS`` and ``pop_reserved``.
Only stomp.py's arguments are read here; the SUBSCRIBE itself is prepared by the
pure core (:mod:`amqstomp._core.subscriptions`), for every API."""
import difflib
from typing import Any, Dict, Literal, MutableMapping, Tuple, cast

from ._core.subscriptions import SUBSCRIBE_OPTIONS
from .exception import ConfigurationError

__all__ = ["RESERVED_KEYWORDS", "AckMode", "ACK_DEFAULT", "pop_reserved", "subscribe_arguments"]


#: ``subscribe`` keywords that configure amqstomp and are never sent as headers: the options the
#: pure core's SUBSCRIBE preparation reads (:data:`amqstomp._core.subscriptions.SUBSCRIBE_OPTIONS`).
RESERVED_KEYWORDS = SUBSCRIBE_OPTIONS

# names close to a reserved keyword, which stomp.py's rule would otherwise send as headers
_ALIASES = {"prefetch": "prefetch_size", "prefetchSize": "prefetch_size", "prefetch_count": "prefetch_size",
            "optimizeAcknowledge": "optimize_acknowledge"}


def pop_reserved(keyword_headers: MutableMapping[str, Any]) -> Dict[str, Any]:
    """Remove amqstomp's own keywords from ``keyword_headers`` and return them.

    Raises:
        ConfigurationError: a keyword that looks like a misspelt reserved one
            (``optimise_acknowledge``, ``prefetchSize`` ...): stomp.py's rule would
            send it as a header and the option would silently do nothing.
    """
    for name in keyword_headers:
        if name in RESERVED_KEYWORDS:
            continue
        guess = _ALIASES.get(name)
        if guess is None and "_" in name:
            close = difflib.get_close_matches(name, RESERVED_KEYWORDS, n=1, cutoff=0.8)
            guess = close[0] if close else None
        if guess is not None:
            raise ConfigurationError("subscribe keyword %r is not an amqstomp option; did you mean %s? "
                                     "(pass it in headers={...} to send it as a header)" % (name, guess))
    return {name: keyword_headers.pop(name) for name in RESERVED_KEYWORDS if name in keyword_headers}


class _Default(str):
    """A keyword's default value: equal to the text, but told apart (``is``) from
    the same text given by the caller."""

    __slots__ = ()


#: The ``ack`` modes of SUBSCRIBE (STOMP 1.2 "SUBSCRIBE ack Header"): a type checker
#: refuses ``ack="clint"``.
AckMode = Literal["auto", "client", "client-individual"]
#: ``subscribe``'s default ``ack`` (``"auto"``); an ``ack`` header wins over it.
ACK_DEFAULT = cast(AckMode, _Default("auto"))


def subscribe_arguments(frame_headers: Dict[str, Any], destination: Any, id: Any,
                         ack: str) -> Tuple[Any, Any, str]:
    """``subscribe``'s destination, id and ack, reconciled with the same names
    among its headers: a header fills a keyword left out (``ack`` at its
    default); both given and different raise ValueError."""
    for name, value in (("destination", destination), ("id", id)):
        given = frame_headers.get(name)
        if given is None:
            continue
        if value is None:
            value = given
        elif str(given) != str(value):
            raise ValueError("subscribe: %s given twice, %r as argument and %r as header" % (name, value, given))
        if name == "destination":
            destination = value
        else:
            id = value
    header_ack = frame_headers.get("ack")
    if header_ack is not None:
        if ack is ACK_DEFAULT:
            ack = str(header_ack)
        elif str(header_ack) != ack:
            raise ValueError("subscribe: ack given twice, %r as argument and %r as header" % (ack, header_ack))
    return destination, id, str(ack)
