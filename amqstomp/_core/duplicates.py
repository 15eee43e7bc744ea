"""Duplicate suppression: a MESSAGE this consumer already SETTLED, delivered again,
decided once for every API (the stomp.py-style listeners and the JMS consumers).

Behind a network of brokers, or after a failover, ActiveMQ can deliver again a
message the client settled: a bridge forwards it again after a broker crash, or
an ACK written on a socket that was lost before the broker read it leaves the
message with the broker, which redelivers it on the next socket while the client
counted it settled. ActiveMQ's Java client suppresses such deliveries with its
connection audit (``ActiveMQConnection.checkForDuplicates``, default true;
``ActiveMQMessageAudit`` of ``auditDepth`` message ids, checked in
``ActiveMQMessageConsumer.dispatch``; ``rollbackDuplicate`` takes a message out
again when it is rolled back or redelivered).

Pure (no socket, thread, lock or clock). The rules:

* **what is audited** (:class:`SettledAudit`, kept in the compiled flow module
  :mod:`amqstomp.flow` since it is asked per MESSAGE): the ``message-id`` of every
  message this consumer SETTLED -- acknowledged by an ACK the client wrote
  (the application's, or amqstomp's batched one), committed in a transaction,
  consumed where the broker (``ack:auto``) or amqstomp (optimized acknowledge,
  JMS ``AUTO_ACKNOWLEDGE``/``DUPS_OK``) settles it once the application had it.
  Never one only delivered: a message delivered and not acknowledged when its
  socket was lost is the application's again when the broker redelivers it
  (at-least-once). The Java client audits at dispatch and takes out what it
  rolls back; auditing at settlement is the same set without the take-outs
  racing the redelivery. A message NACKed, rolled back or redelivered locally
  leaves the audit (:meth:`SettledAudit.forget`): it was never settled, or not
  any more;
* **bounded**: the audit keeps the newest ``depth`` ids (ActiveMQ's ``auditDepth``
  2048; ActiveMQ's is per producer, up to ``auditMaximumProducerNumber`` 64 of
  them, keyed by the producer sequence a STOMP ``message-id`` does not expose);
  one audit per queue (per connection, as ActiveMQ's ``ConnectionAudit``: a queue
  message goes to one consumer) and one per topic subscription (each gets a copy);
* **a duplicate** (:func:`duplicate`) is never handed to the application. Its
  settlement: ``ack:auto`` -- none (the broker settled it when it sent it);
  amqstomp acknowledges -- counted consumed, the batched ACK covers it; the
  application acknowledges one at a time (``client-individual``) -- its own ACK
  now, so the broker drops it and the prefetch window is freed (a consumer must
  never sit idle on a window full of suppressed duplicates); ``ack:client``
  (cumulative) -- its own ACK now when no earlier delivery of the subscription
  is outstanding (the ACK then settles nothing the application still holds),
  else, where the API's next acknowledgement names the newest delivery (JMS
  ``CLIENT_ACKNOWLEDGE``, a transaction), held with the outstanding ones and
  settled by it; else (the stomp.py API, whose application names what it ACKs)
  handed over after all: a cumulative ACK now would settle messages the
  application has not acknowledged. The Java client poison-acks a suppressed
  duplicate (to the dead-letter queue); an ACK drops it without filling the DLQ.

Licensed under the Apache License, Version 2.0.
"""
from typing import Optional

from ..flow import SettledAudit  # compiled with the flow module: asked per MESSAGE

__all__ = ["DEFAULT_AUDIT_DEPTH", "DUPLICATE_ACK", "DUPLICATE_CONSUMED", "DUPLICATE_DROP", "DUPLICATE_HAND_OVER",
           "DUPLICATE_WITH_NEXT", "NOT_DUPLICATE", "SettledAudit", "duplicate"]

#: ActiveMQMessageAudit.DEFAULT_WINDOW_SIZE: message ids an audit keeps
DEFAULT_AUDIT_DEPTH = 2048

# ---------------------------------------------------------------- verdicts (ints: asked per MESSAGE)

#: not settled here before: hand it over
NOT_DUPLICATE = 0
#: a duplicate of an ``ack:auto`` subscription: drop it, nothing to write
DUPLICATE_DROP = 1
#: a duplicate: drop it and write its own ACK (on the socket that delivered it)
DUPLICATE_ACK = 2
#: a duplicate where amqstomp acknowledges: drop it, count it consumed (the window's ACK covers it)
DUPLICATE_CONSUMED = 3
#: a duplicate held with the outstanding deliveries: the API's next cumulative acknowledgement settles it
DUPLICATE_WITH_NEXT = 4
#: a duplicate that cannot be settled alone without settling what the application holds: handed over
DUPLICATE_HAND_OVER = 5


def duplicate(audit: Optional[SettledAudit], message_id: Optional[str], ack: str, app_acked: bool,
              outstanding: bool, next_ack_names_newest: bool) -> int:
    """Whether a MESSAGE about to be handed over is a duplicate of one settled, and
    what becomes of it (module docstring).

    Args:
        audit (SettledAudit | None): its consumer's audit (None: duplicates not checked).
        message_id (str | None): its ``message-id`` header.
        ack (str): its subscription's STOMP ``ack`` mode (``auto``, ``client``,
            ``client-individual``).
        app_acked (bool): the application writes the ACKs (not ``auto``, not amqstomp's
            optimized acknowledge).
        outstanding (bool): the application holds earlier deliveries of the
            subscription it has not acknowledged yet (asked for ``ack:client`` only).
        next_ack_names_newest (bool): the API's next acknowledgement is cumulative and
            names the newest delivery (JMS ``CLIENT_ACKNOWLEDGE`` and transactions).

    Returns:
        int: :data:`NOT_DUPLICATE`, :data:`DUPLICATE_DROP`, :data:`DUPLICATE_ACK`,
        :data:`DUPLICATE_CONSUMED`, :data:`DUPLICATE_WITH_NEXT` or :data:`DUPLICATE_HAND_OVER`.
    """
    if audit is None or message_id not in audit:
        return NOT_DUPLICATE
    if ack == "auto":
        return DUPLICATE_DROP
    if not app_acked:
        return DUPLICATE_CONSUMED
    if ack != "client" or not outstanding:
        return DUPLICATE_ACK
    return DUPLICATE_WITH_NEXT if next_ack_names_newest else DUPLICATE_HAND_OVER
