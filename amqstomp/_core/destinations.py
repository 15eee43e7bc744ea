"""Destination names: the checks before a SEND or SUBSCRIBE is written, the
``consumer.*`` options a name may carry (``/queue/a?consumer.prefetchSize=10``,
ActiveMQ's syntax, which its STOMP connector ignores: amqstomp turns each into
its SUBSCRIBE header), and the prefetch-policy kind of a destination.

Pure: no I/O. Errors: :class:`amqstomp.exception.InvalidDestinationError` (a
ValueError) and :class:`amqstomp.exception.ConfigurationError`.
"""
from typing import Any, Dict, Tuple

from ..exception import InvalidDestinationError
from .uri_options import CONSUMER_OPTIONS, convert_option, split_query, unknown_option

__all__ = ["DESTINATION_PREFIXES", "ACCEPTED_CACHE_SIZE", "check_destination", "parse_destination",
           "destination_kind"]


#: The destination prefixes of ActiveMQ's STOMP (``/queue/``, ``/topic/``, temporary and
#: remote temporary ones) and RabbitMQ's (``/exchange/``, ``/amq/queue/``, ``/reply-queue/``):
#: none may stand without a name (:func:`check_destination`).
DESTINATION_PREFIXES = ("/queue/", "/topic/", "/temp-queue/", "/temp-topic/", "/remote-temp-queue/",
                        "/remote-temp-topic/", "/exchange/", "/amq/queue/", "/reply-queue/")
ACCEPTED_CACHE_SIZE = 1024  #: accepted names :func:`check_destination` remembers (a dict lookup next time)
_ACCEPTED: Dict[str, None] = {}


def check_destination(destination: Any, command: str = "SEND") -> None:
    """Refuse a ``destination`` that no broker takes, before ``command`` (SEND,
    SUBSCRIBE) is written: empty (or blank), or a prefix of
    :data:`DESTINATION_PREFIXES` with no name after it (or a blank one), alone
    or as a member of an ActiveMQ composite destination (``/queue/a,/queue/``).
    ActiveMQ 5.17 closes the connection on them without an ERROR frame (an
    empty ``/temp-queue/`` or ``/temp-topic/`` name it takes, as a temporary
    destination named ""), RabbitMQ 3.10 answers ERROR "Invalid destination"
    to every one: refused on every broker.

    Raises:
        InvalidDestinationError: (a ValueError) naming the destination and why.
        TypeError: ``destination`` is not a ``str`` (bytes included).
    """
    if destination.__class__ is str and destination in _ACCEPTED:
        return  # checked before (the hot path: a producer sends to a few destinations)
    if not isinstance(destination, str):
        raise TypeError("%s destination must be a str, got %s %r" % (command, type(destination).__name__,
                                                                     destination))
    if not destination.strip():
        raise InvalidDestinationError("%s destination is empty (%r): ActiveMQ closes the connection on it"
                                      % (command, destination))
    for member in destination.split(",") if "," in destination else (destination,):
        member = member.strip()
        for prefix in DESTINATION_PREFIXES:
            if member.startswith(prefix) and not member[len(prefix):].strip():
                raise InvalidDestinationError(
                    "%s destination %r has no name after %s: ActiveMQ closes the connection on it (RabbitMQ "
                    "answers 'Invalid destination')" % (command, destination, prefix))
    if len(_ACCEPTED) >= ACCEPTED_CACHE_SIZE:
        _ACCEPTED.clear()  # bounded: an application making a destination per message starts again
    _ACCEPTED[destination] = None


def parse_destination(destination: str) -> Tuple[str, Dict[str, str]]:
    """Split ``/queue/a?consumer.prefetchSize=10`` into ``("/queue/a",
    {"activemq.prefetchSize": "10"})``: each ``consumer.*`` option becomes its
    SUBSCRIBE header (``consumer.selector`` the standard ``selector`` header);
    an ``x-*`` option (RabbitMQ's queue arguments: ``x-max-length``,
    ``x-queue-type``...) is passed through as the header of that name. The
    name is checked first (:func:`check_destination`).

    Raises:
        InvalidDestinationError: (a ValueError) the name is empty, or a prefix
            alone (``/queue/``).
        TypeError: ``destination`` is not a ``str``.
        ConfigurationError: an unknown option or a bad value.
    """
    check_destination(destination, "SUBSCRIBE")
    name, sep, query = destination.partition("?")
    check_destination(name, "SUBSCRIBE")
    if not sep:
        return destination, {}
    headers: Dict[str, str] = {}
    for key, value in split_query(query, destination).items():
        if key.startswith("x-") and len(key) > 2:
            headers[key] = value
            continue
        opt = CONSUMER_OPTIONS.get(key)
        if opt is None:
            raise unknown_option("destination option", key, destination, CONSUMER_OPTIONS)
        converted = convert_option(opt, value, destination)
        headers[opt.keyword] = ("true" if converted else "false") if isinstance(converted, bool) else str(converted)
    return name, headers


def destination_kind(destination: str, durable: bool = False, browser: bool = False) -> str:
    """Prefetch-policy kind of a STOMP destination: ``"queue"``,
    ``"queue-browser"``, ``"topic"`` or ``"durable-topic"``. Anything not
    ``/topic/`` (or ``/temp-topic/``) counts as a queue, as on ActiveMQ."""
    if destination.startswith(("/topic/", "/temp-topic/")):
        return "durable-topic" if durable else "topic"
    return "queue-browser" if browser else "queue"

