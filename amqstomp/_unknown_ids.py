"""MESSAGEs for subscription ids that are not open on a connection of the stomp.py API:
which are still delivered and which are dropped (with how loud a log).

:class:`UnknownSubscriptions` is a part of :class:`amqstomp._engine.subscription.SubscriptionManager`
(its base class), kept here so that each module stays readable.

Licensed under the Apache License, Version 2.0.
"""
import logging
from typing import Any, Dict, Set

from ._core.settle import broker_settled

__all__ = ["DELIVER_NOT_MADE_HERE", "DELIVER_SETTLED", "DROP_UNKNOWN", "DROPPED_WARNINGS", "UnknownSubscriptions"]

log = logging.getLogger("amqstomp.subscription")

#: MESSAGEs of one unknown subscription id that are logged at WARNING when dropped (then at DEBUG)
DROPPED_WARNINGS = 10
#: unsubscribed ids remembered (with their ``ack`` mode), newest kept
CLOSED_IDS_KEPT = 256

#: :meth:`UnknownSubscriptions._unknown_verdict`: delivered, a subscription not made here (raw, injected)
DELIVER_NOT_MADE_HERE = 0
#: drop it, never given to the listeners
DROP_UNKNOWN = 1
#: delivered: an ``ack:auto`` subscription unsubscribed here, still in flight (the broker settled it)
DELIVER_SETTLED = 2


class UnknownSubscriptions:
    """What a connection does with MESSAGEs of subscriptions it does not know."""

    transport: Any

    def _init_unknown(self, drop_unknown: bool) -> None:
        self._drop_unknown = drop_unknown  # the stomp.py API: MESSAGEs of unknown ids are dropped (_unknown_verdict)
        #: ids of SUBSCRIBEs written as they are (``send_frame``): their MESSAGEs are delivered (bounded by
        #: the unregistered window), as are those without ``subscription`` (1.0)
        self.raw_ids: Set[str] = set()
        #: recently unsubscribed ids -> their ``ack`` mode ("" not known): in flight at a clean close
        self._closed_ids: Dict[str, str] = {}
        self._dropped: Dict[str, int] = {}  # subscription id -> MESSAGEs dropped

    def _unsubscribed(self, sub_id: str, ack: str) -> None:
        """Subscription ``sub_id`` (STOMP ``ack`` mode ``ack``; "": not known) is being
        unsubscribed: its MESSAGEs still in flight are told apart (:meth:`_unknown_verdict`)."""
        closed = self._closed_ids
        closed.pop(sub_id, None)
        closed[sub_id] = ack
        if len(closed) > CLOSED_IDS_KEPT:
            del closed[next(iter(closed))]

    def _unknown_verdict(self, sub_id: str, message_id: Any) -> int:
        """Reader thread: a MESSAGE for subscription ``sub_id``, which is not open here.
        :data:`DELIVER_NOT_MADE_HERE` for an id of :attr:`raw_ids`, RabbitMQ's replies to a
        ``/temp-queue/`` reply-to and a frame the application injects (``transport.process_frame``,
        stomp.py's way to test listeners); :data:`DELIVER_SETTLED` for an ``ack:auto`` subscription
        unsubscribed here (the broker settled it when it sent it: dropped, it would be lost --
        :func:`amqstomp._core.settle.broker_settled`; stomp.py's listeners get it too); else
        :data:`DROP_UNKNOWN`, never given to the listeners, the connection stays up: logged at WARNING
        for an id never subscribed here (the first :data:`DROPPED_WARNINGS`, then DEBUG), at DEBUG for
        one unsubscribed (in flight at a clean close: no error). No window counts a dropped one, no ACK
        is due: the broker requeues an UNSUBSCRIBEd client-ack subscription's messages."""
        injecting = getattr(self.transport, "injecting", None)
        if sub_id in self.raw_ids or sub_id.startswith("/temp-queue/") or (injecting is not None and injecting()):
            return DELIVER_NOT_MADE_HERE
        closed_ack = self._closed_ids.get(sub_id)
        if closed_ack and broker_settled(closed_ack):
            return DELIVER_SETTLED
        seen = self._dropped.get(sub_id, 0) + 1
        if seen == 1 and len(self._dropped) >= 1024:
            self._dropped.clear()
        self._dropped[sub_id] = seen
        closed = closed_ack is not None
        log.log(logging.DEBUG if closed or seen > DROPPED_WARNINGS else logging.WARNING,
                "MESSAGE %s for subscription %s dropped, not given to the listeners: %s%s", message_id, sub_id,
                "after its UNSUBSCRIBE" if closed else "not subscribed on this connection",
                " (more of this subscription at DEBUG)" if seen == DROPPED_WARNINGS and not closed else "")
        return DROP_UNKNOWN
