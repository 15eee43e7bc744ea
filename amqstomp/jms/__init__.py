"""amqstomp's JMS-style API: ``ConnectionFactory`` -> ``Connection`` -> ``Session``
-> ``MessageProducer`` / ``MessageConsumer``, as in ActiveMQ's Java client, over
STOMP:

    from amqstomp.jms import ConnectionFactory, Queue, AUTO_ACKNOWLEDGE

    factory = ConnectionFactory("stomp://127.0.0.1:61613?heartBeat=1000,1000")
    with factory.create_connection("admin", "admin") as connection:
        session = connection.create_session(False, AUTO_ACKNOWLEDGE)
        session.create_producer(Queue("orders")).send(session.create_text_message("hi"))
        consumer = session.create_consumer(Queue("orders"))
        connection.start()
        print(consumer.receive(5).text)

Its ``Connection`` is not the stomp.py-compatible ``amqstomp.Connection``. The
documentation's "The JMS-style API" page (docs/guides/jms.md in the source tree)
covers the acknowledge modes, threads and sockets; "URI options"
(docs/options.md) every option.

Licensed under the Apache License, Version 2.0.
"""
from .browser import QueueBrowser
from .connection import Connection, ConnectionFactory
from .constants import (
    AT_MOST_ONCE,
    AUTO_ACKNOWLEDGE,
    CLIENT_ACKNOWLEDGE,
    DEFAULT_DELIVERY_MODE,
    DEFAULT_PRIORITY,
    DEFAULT_TIME_TO_LIVE,
    DUPS_OK_ACKNOWLEDGE,
    INDIVIDUAL_ACKNOWLEDGE,
    NON_PERSISTENT,
    PERSISTENT,
    SESSION_TRANSACTED,
)
from .consumer import MessageConsumer
from .destination import Destination, Queue, ReplyQueue, StompDestination, TemporaryQueue, TemporaryTopic, Topic
from .exceptions import (
    AcknowledgeInDoubtError,
    AcknowledgeInterruptedError,
    BrowseInterruptedError,
    BrowseTimeoutError,
    IllegalStateError,
    InvalidDestinationError,
    JMSError,
    MessageFormatError,
    MessageNotWriteableError,
    ResourceAllocationError,
    TransactionInDoubtError,
    TransactionPartlyCommittedError,
    TransactionRolledBackError,
)
from .fanin import FanInConsumer
from .link import UsageEvent
from .message import BytesMessage, MapMessage, Message, TextMessage
from .options import JMS_OPTIONS
from .producer import MessageProducer
from .session import Session
from .spreading import SpreadingProducer

__all__ = [
    "ConnectionFactory",
    "Connection",
    "Session",
    "MessageProducer",
    "MessageConsumer",
    "Destination",
    "Queue",
    "Topic",
    "TemporaryQueue",
    "TemporaryTopic",
    "ReplyQueue",
    "StompDestination",
    "Message",
    "TextMessage",
    "BytesMessage",
    "MapMessage",
    "QueueBrowser",
    "FanInConsumer",
    "SpreadingProducer",
    "BrowseTimeoutError",
    "BrowseInterruptedError",
    "UsageEvent",
    "SESSION_TRANSACTED",
    "AUTO_ACKNOWLEDGE",
    "CLIENT_ACKNOWLEDGE",
    "DUPS_OK_ACKNOWLEDGE",
    "INDIVIDUAL_ACKNOWLEDGE",
    "AT_MOST_ONCE",
    "PERSISTENT",
    "NON_PERSISTENT",
    "DEFAULT_DELIVERY_MODE",
    "DEFAULT_PRIORITY",
    "DEFAULT_TIME_TO_LIVE",
    "JMSError",
    "ResourceAllocationError",
    "IllegalStateError",
    "TransactionRolledBackError",
    "TransactionInDoubtError",
    "TransactionPartlyCommittedError",
    "AcknowledgeInterruptedError",
    "AcknowledgeInDoubtError",
    "MessageFormatError",
    "MessageNotWriteableError",
    "InvalidDestinationError",
    "JMS_OPTIONS",
]
