"""Destinations: :class:`Queue`, :class:`Topic`, :class:`TemporaryQueue`,
:class:`TemporaryTopic`, and the mapping to and from STOMP destination names
(ActiveMQ's: ``/queue/a``, ``/topic/b``, ``/temp-queue/x``,
``/remote-temp-queue/ID:...``).

A queue or topic name may carry ActiveMQ consumer options
(``Queue("orders?consumer.prefetchSize=10&consumer.exclusive=true")``) or
RabbitMQ queue arguments (``Queue("orders?x-max-length=1000")``); they apply
when a consumer subscribes (each becomes its SUBSCRIBE header:
``activemq.*``, see ``docs/options.md``, or the ``x-*`` header itself) and are
not part of the name a producer sends to.

Names are taken in three forms (:func:`as_destination`): a STOMP name
(``/queue/orders``), an ActiveMQ destination URL as Java clients write them
(``queue://orders``, ``topic://prices``, ``temp-queue://ID:...``,
``temp-topic://ID:...``), or a bare name (a queue). A STOMP name of another
kind (RabbitMQ's ``/exchange/x/key``, ``/amq/queue/q``) is kept as it is
(:class:`StompDestination`); a ``/reply-queue/...`` (RabbitMQ's name of a
temporary queue of another connection, in a ``reply-to``) is a remote
:class:`ReplyQueue`.

Licensed under the Apache License, Version 2.0.
"""
from typing import Any, Optional, Union

from .exceptions import InvalidDestinationError

__all__ = ["Destination", "Queue", "Topic", "TemporaryDestination", "TemporaryQueue", "TemporaryTopic",
           "ReplyQueue", "StompDestination", "destination_from_header", "as_destination"]


class Destination:
    """Base class of every destination.

    Attributes:
        name (str): the name without prefix or options (``"orders"``).
        options (str): the ``consumer.*`` options after ``?`` ("" when none).
    """

    _prefix = "/queue/"
    #: the ActiveMQ destination URL scheme of this kind (``queue://``)
    _scheme = "queue://"
    is_topic = False
    is_temporary = False

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidDestinationError("a destination name must be a non-empty str, got %r" % (name,))
        given = name
        if name.startswith(self._prefix):
            name = name[len(self._prefix):]
        elif name.startswith(self._scheme):
            name = name[len(self._scheme):]
        elif "://" in name.partition("?")[0]:
            raise InvalidDestinationError("%r: %s takes a %s URL (or %s..., or the bare name)"
                                          % (name, type(self).__name__, self._scheme, self._prefix))
        elif name.startswith("/"):
            raise InvalidDestinationError(
                "%r: give %s the bare name (or %s...), not another kind of STOMP destination"
                % (name, type(self).__name__, self._prefix))
        base, _, options = name.partition("?")
        if not base.strip():  # ActiveMQ closes the connection on a blank name
            raise InvalidDestinationError("%s(%r): the destination name is empty or blank"
                                          % (type(self).__name__, given))
        self.name = base
        self.options = options

    @property
    def stomp_name(self) -> str:
        """The STOMP ``destination`` header value (no options)."""
        return self._prefix + self.name

    @property
    def subscribe_name(self) -> str:
        """The name with its consumer options, as SUBSCRIBE takes it."""
        return self.stomp_name + ("?" + self.options if self.options else "")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Destination) and other.stomp_name == self.stomp_name

    def __hash__(self) -> int:
        return hash(self.stomp_name)

    def __str__(self) -> str:
        return self.stomp_name

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.name + ("?" + self.options if self.options else ""))


class Queue(Destination):
    """A queue: ``Queue("orders")`` is STOMP ``/queue/orders``."""

    _prefix = "/queue/"


class Topic(Destination):
    """A topic: ``Topic("prices")`` is STOMP ``/topic/prices``."""

    _prefix = "/topic/"
    _scheme = "topic://"
    is_topic = True


class StompDestination(Destination):
    """A STOMP destination name of a kind amqstomp has no class for, kept as it is
    (RabbitMQ's ``/exchange/amq.topic/key``, ``/amq/queue/q``; on ActiveMQ the
    broker refuses it, naming the kinds it has)."""

    _prefix = ""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name.startswith("/") or len(name) < 2:
            raise InvalidDestinationError("a STOMP destination name starts with '/', got %r" % (name,))
        base, _, options = name.partition("?")
        self.name = base
        self.options = options


class TemporaryDestination(Destination):
    """A temporary destination. One made by a connection of this process
    (``session.create_temporary_queue()``) is named ``/temp-queue/<name>`` on the
    socket that made it (the broker maps the name to a destination of that
    connection); one received from elsewhere is ``/remote-temp-queue/<broker name>``
    and can be sent to from any socket.

    Attributes:
        remote (bool): received from elsewhere (a ``reply-to`` naming another
            connection's temporary destination): send to it from any socket; only
            the connection that made it consumes from it.
        deleted (bool): :meth:`delete` was called.
    """

    _remote_prefix = "/remote-temp-queue/"
    is_temporary = True

    def __init__(self, name: str, owner: Optional[Any] = None, remote: bool = False) -> None:
        if remote:
            if not name.startswith(self._remote_prefix):
                name = self._remote_prefix + name
            self.name = name[len(self._remote_prefix):]
            self.options = ""
        else:
            super().__init__(name)
        self.remote = remote
        self._owner = owner  # what the jms.Connection that made it shares (its ConnectionState), or None
        self.deleted = False

    @property
    def stomp_name(self) -> str:
        return (self._remote_prefix if self.remote else self._prefix) + self.name

    def delete(self) -> None:
        """Stop using this temporary destination: consumers can no longer be made
        on it and producers refuse to send to it. STOMP has no command to delete
        it on the broker; ActiveMQ deletes it when the connection that made it
        closes."""
        if self._owner is not None:
            self._owner.delete_temporary(self)
        self.deleted = True


class TemporaryQueue(TemporaryDestination):
    """A queue that lives as long as the connection that made it
    (``session.create_temporary_queue()``); the usual ``reply_to`` of a request."""

    _prefix = "/temp-queue/"
    _scheme = "temp-queue://"
    _remote_prefix = "/remote-temp-queue/"


class TemporaryTopic(TemporaryDestination):
    """A topic that lives as long as the connection that made it."""

    _prefix = "/temp-topic/"
    _scheme = "temp-topic://"
    _remote_prefix = "/remote-temp-topic/"
    is_topic = True


class ReplyQueue(TemporaryQueue):
    """RabbitMQ's temporary queue of another connection, as a ``reply-to``
    names it (``/reply-queue/amq.gen-...``): send the reply there, from any
    socket."""

    _remote_prefix = "/reply-queue/"

    def __init__(self, name: str) -> None:
        super().__init__(name, remote=True)



def destination_from_header(value: Optional[str], lookup: Optional[Any] = None) -> Optional[Destination]:
    """The destination a STOMP header names (``destination``, ``reply-to``), or
    None. ``lookup(stomp_name)`` may return this connection's own temporary
    destination for a ``/temp-queue/`` name. Unknown prefixes give a Queue with
    the raw name (what ActiveMQ would make of it)."""
    if not value:
        return None
    if value.startswith("/queue/"):
        return Queue(value)
    if value.startswith("/topic/"):
        return Topic(value)
    if value.startswith("/remote-temp-queue/"):
        return TemporaryQueue(value, remote=True)
    if value.startswith("/remote-temp-topic/"):
        return TemporaryTopic(value, remote=True)
    if value.startswith(("/temp-queue/", "/temp-topic/")):
        found = lookup(value) if lookup is not None else None
        if found is not None:
            return found  # type: ignore[no-any-return]
        return TemporaryQueue(value) if value.startswith("/temp-queue/") else TemporaryTopic(value)
    if value.startswith("/reply-queue/"):
        return ReplyQueue(value)
    if value.startswith("/") and len(value) > 1:
        return StompDestination(value)
    return Queue(value)


def as_destination(value: Union[Destination, str]) -> Destination:
    """A Destination from a Destination, a STOMP name (``/queue/a``, ``/topic/b``),
    an ActiveMQ destination URL (``queue://a``, ``topic://b``; ``temp-queue://ID:x``
    and ``temp-topic://ID:x`` name another connection's temporary destination:
    sent to as ``/remote-temp-queue/ID:x``), or a bare name (a queue).

    Raises:
        InvalidDestinationError: not a Destination nor a non-empty str.
    """
    if isinstance(value, Destination):
        return value
    if not isinstance(value, str) or not value:
        raise InvalidDestinationError("expected a Destination or a STOMP destination name, got %r" % (value,))
    if value.startswith("temp-queue://"):
        return TemporaryQueue(value[len("temp-queue://"):], remote=True)
    if value.startswith("temp-topic://"):
        return TemporaryTopic(value[len("temp-topic://"):], remote=True)
    if value.startswith(("queue://", "topic://")):
        return Queue(value) if value.startswith("queue://") else Topic(value)
    if value.startswith("/"):
        base, sep, options = value.partition("?")
        found = destination_from_header(base)
        if found is None:  # pragma: no cover - base is non-empty
            raise InvalidDestinationError("no destination in %r" % (value,))
        if sep and isinstance(found, (Queue, Topic)) and not found.is_temporary:
            found.options = options
        return found
    return Queue(value)
