"""amqstomp: a STOMP 1.0/1.1/1.2 client for ActiveMQ Classic, a drop-in for stomp.py.

``import amqstomp as stomp`` keeps stomp.py code working::

    conn = stomp.Connection([("127.0.0.1", 61613)])
    conn.set_listener("", MyListener())
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(destination="/queue/x", id=1, ack="auto")
    conn.send(body="hi", destination="/queue/x")

Licensed under the Apache License, Version 2.0.
"""
from . import exception, listener, utils
from .connection import (
    Connection,
    Connection10,
    Connection11,
    Connection12,
    StompConnection10,
    StompConnection11,
    StompConnection12,
)
from .listener import ConnectionListener, PrintingListener, StatsListener, TestListener, WaitingListener

# the JMS-style API (amqstomp.jms): its entry points and constants, also from here
from .jms import (  # noqa: E402
    AUTO_ACKNOWLEDGE,
    CLIENT_ACKNOWLEDGE,
    DUPS_OK_ACKNOWLEDGE,
    INDIVIDUAL_ACKNOWLEDGE,
    SESSION_TRANSACTED,
    ConnectionFactory,
    Queue,
    Topic,
)

__version__ = "0.1.0"

__all__ = [
    "Connection",
    "Connection10",
    "Connection11",
    "Connection12",
    "StompConnection10",
    "StompConnection11",
    "StompConnection12",
    "ConnectionListener",
    "StatsListener",
    "WaitingListener",
    "PrintingListener",
    "TestListener",
    "exception",
    "listener",
    "utils",
    "__version__",
    "ConnectionFactory",
    "Queue",
    "Topic",
    "AUTO_ACKNOWLEDGE",
    "CLIENT_ACKNOWLEDGE",
    "DUPS_OK_ACKNOWLEDGE",
    "INDIVIDUAL_ACKNOWLEDGE",
    "SESSION_TRANSACTED",
]
