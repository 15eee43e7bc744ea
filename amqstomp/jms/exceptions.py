"""Exceptions of the JMS-style API (all derive from
:class:`amqstomp.exception.StompException`).

Licensed under the Apache License, Version 2.0.
"""
from typing import Any, Optional

from ..exception import (
    AcknowledgeInDoubtError,
    AcknowledgeInterruptedError,
    BrokerError,
    DuplicateTransactionError,
    StompException,
    TransactionInDoubtError,
    TransactionPartlyCommittedError,
    TransactionRolledBackError,
    UnknownTransactionError,
)
from ..exception import InvalidDestinationError as _InvalidDestinationError

__all__ = [
    "JMSError",
    "ResourceAllocationError",
    "IllegalStateError",
    "TransactionRolledBackError",
    "TransactionInDoubtError",
    "TransactionPartlyCommittedError",
    "UnknownTransactionError",
    "DuplicateTransactionError",
    "AcknowledgeInterruptedError",
    "AcknowledgeInDoubtError",
    "MessageFormatError",
    "MessageNotWriteableError",
    "InvalidDestinationError",
    "BrowseTimeoutError",
    "BrowseInterruptedError",
    "is_resource_allocation_error",
]


class JMSError(StompException):
    """Base class of the errors only the JMS-style API raises."""


class ResourceAllocationError(BrokerError):
    """The broker refused a SEND because its memory or store is full and it is
    configured with ``sendFailIfNoSpace`` (ActiveMQ answers ERROR with a
    ``javax.jms.ResourceAllocationException``). The connection stays usable:
    ActiveMQ keeps the socket open after this ERROR.

    Attributes:
        frame: the ERROR frame.
    """

    def __init__(self, message: str, frame: Optional[Any] = None) -> None:
        super().__init__(message, frame)


class IllegalStateError(JMSError):
    """An operation that the object's state does not allow: ``commit()`` on a
    non-transacted session, ``receive()`` on a consumer with a listener, any
    call on a closed object (``javax.jms.IllegalStateException``)."""


class MessageFormatError(JMSError, ValueError):
    """A message cannot be sent as asked: a property named like a STOMP header
    amqstomp sets itself, a body of the wrong type."""


class MessageNotWriteableError(JMSError):
    """A write to the properties or the body of a received message, which are
    read-only until ``clear_properties()`` / ``clear_body()``
    (``javax.jms.MessageNotWriteableException``; ActiveMQ's Java client raises it
    the same way). Header fields (``correlation_id``...) stay writable."""


class InvalidDestinationError(JMSError, _InvalidDestinationError):
    """A destination that cannot be used here: no destination for a producer
    without one, a temporary queue of another connection to consume from, a
    deleted temporary queue. Also a
    :class:`amqstomp.exception.InvalidDestinationError` (the stomp.py-style
    API's, for a destination no broker takes) and a ``ValueError``, so
    ``except amqstomp.exception.InvalidDestinationError`` catches both."""


class BrowseTimeoutError(JMSError, TimeoutError):
    """A browse got neither a message nor the broker's ``browser:end`` within the
    browser's ``timeout`` (the queue's messages may be paged out slowly, or the
    broker is stuck). The browse is closed; iterate again to retry."""


class BrowseInterruptedError(JMSError):
    """A failover replaced the consumer socket during a browse. A browse is a
    snapshot that the broker sends on one socket; what it had not sent yet is
    lost with that socket, and a browse replayed on the new one would start
    again from the head of the queue (duplicates within one iteration), so
    amqstomp does not replay browser subscriptions: the iteration raises this.
    The browser stays usable; iterate again for a new snapshot."""


_USAGE_MARKERS = ("ResourceAllocationException", "Usage Manager", "usage limit")


def is_resource_allocation_error(frame: Any) -> bool:
    """True for an ERROR frame with which ActiveMQ refuses a SEND for lack of space."""
    headers = getattr(frame, "headers", None) or {}
    text = headers.get("message", "")
    body = getattr(frame, "body", b"")
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body[:2000]).decode("utf-8", "replace")
    text = "%s\n%s" % (text, body)
    return any(marker in text for marker in _USAGE_MARKERS)
