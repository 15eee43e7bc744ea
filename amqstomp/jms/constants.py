"""Acknowledge modes and delivery modes of the JMS-style API.

The values of the JMS acknowledge modes and delivery modes are the ones of
``javax.jms.Session`` / ``javax.jms.DeliveryMode`` (and ActiveMQ's
``INDIVIDUAL_ACKNOWLEDGE``), so numbers read from Java configuration mean the
same here. :data:`AT_MOST_ONCE` is amqstomp's own: STOMP ``ack:auto``.

Licensed under the Apache License, Version 2.0.
"""

__all__ = [
    "SESSION_TRANSACTED",
    "AUTO_ACKNOWLEDGE",
    "CLIENT_ACKNOWLEDGE",
    "DUPS_OK_ACKNOWLEDGE",
    "INDIVIDUAL_ACKNOWLEDGE",
    "AT_MOST_ONCE",
    "ACKNOWLEDGE_MODES",
    "NON_PERSISTENT",
    "PERSISTENT",
    "DEFAULT_PRIORITY",
    "DEFAULT_TIME_TO_LIVE",
    "DEFAULT_DELIVERY_MODE",
]

#: A transacted session: ACKs and SENDs belong to a STOMP transaction until ``commit()``.
SESSION_TRANSACTED = 0
#: amqstomp acks a message after the listener returned / ``receive()`` handed it over
#: (client acks, batched: at-least-once).
AUTO_ACKNOWLEDGE = 1
#: ``message.acknowledge()`` acks every message the session consumed so far.
CLIENT_ACKNOWLEDGE = 2
#: Like AUTO_ACKNOWLEDGE with lazier ACK batches (more duplicates after a crash).
DUPS_OK_ACKNOWLEDGE = 3
#: ``message.acknowledge()`` acks that message only (STOMP ``client-individual``).
INDIVIDUAL_ACKNOWLEDGE = 4
#: STOMP ``ack:auto``: the broker acks at dispatch; messages in the local buffer are
#: lost if the process dies (at-most-once). amqstomp's own mode.
AT_MOST_ONCE = 257

#: Names of the acknowledge modes, for messages.
ACKNOWLEDGE_MODES = {
    SESSION_TRANSACTED: "SESSION_TRANSACTED",
    AUTO_ACKNOWLEDGE: "AUTO_ACKNOWLEDGE",
    CLIENT_ACKNOWLEDGE: "CLIENT_ACKNOWLEDGE",
    DUPS_OK_ACKNOWLEDGE: "DUPS_OK_ACKNOWLEDGE",
    INDIVIDUAL_ACKNOWLEDGE: "INDIVIDUAL_ACKNOWLEDGE",
    AT_MOST_ONCE: "AT_MOST_ONCE",
}

#: Delivery mode: the broker may keep the message in memory only.
NON_PERSISTENT = 1
#: Delivery mode: the broker stores the message before it confirms the SEND.
PERSISTENT = 2

#: JMS defaults of a producer.
DEFAULT_DELIVERY_MODE = PERSISTENT
DEFAULT_PRIORITY = 4
DEFAULT_TIME_TO_LIVE = 0
