"""MESSAGEs for subscription ids that are not open on a connection of the stomp.py API:
which are still delivered and which are dropped (with how loud a log).

:class:`UnknownSubscriptions` is a part of :class:`amqstomp._engine.subscription.SubscriptionManager`
(its base class), kept here so that each module stays readable.

Licensed under the Apache License, Version 2.0.
"""
import logging
from collections import deque
from typing import Any, Deque, Dict, Set

__all__ = ["DROPPED_WARNINGS", "UnknownSubscriptions"]

log = logging.getLogger("amqstomp.subscription")

#: MESSAGEs of one unknown subscription id that are logged at WARNING when dropped (then at DEBUG)
DROPPED_WARNINGS = 10


class UnknownSubscriptions:
    """What a connection does with MESSAGEs of subscriptions it does not know."""

    transport: Any

    def _init_unknown(self, drop_unknown: bool) -> None:
        self._drop_unknown = drop_unknown  # the stomp.py API: MESSAGEs of unknown ids are dropped (_dropped_unknown)
        #: ids of SUBSCRIBEs written as they are (``send_frame``): their MESSAGEs are delivered (bounded by
        #: the unregistered window), as are those without ``subscription`` (1.0)
        self.raw_ids: Set[str] = set()
        self._closed_ids: Deque[str] = deque(maxlen=256)  # recently unsubscribed: their drops log at DEBUG
        self._dropped: Dict[str, int] = {}  # subscription id -> MESSAGEs dropped

    def _dropped_unknown(self, sub_id: str, message_id: Any) -> bool:
        """Reader thread: a MESSAGE for subscription ``sub_id``, which is not open here. Delivered
        (False) for an id of :attr:`raw_ids`, RabbitMQ's replies to a ``/temp-queue/`` reply-to and
        a frame the application injects (``transport.process_frame``, stomp.py's way to test listeners);
        else dropped (True), never given to the listeners, the connection stays up: logged at WARNING
        for an id never subscribed here (the first :data:`DROPPED_WARNINGS`, then DEBUG), at DEBUG for
        one unsubscribed (in flight at a clean close: no error). No window counts it, no ACK is due: the
        broker requeues an UNSUBSCRIBEd client-ack subscription's messages, counted ack:auto ones consumed."""
        injecting = getattr(self.transport, "injecting", None)
        if sub_id in self.raw_ids or sub_id.startswith("/temp-queue/") or (injecting is not None and injecting()):
            return False
        seen = self._dropped.get(sub_id, 0) + 1
        if seen == 1 and len(self._dropped) >= 1024:
            self._dropped.clear()
        self._dropped[sub_id] = seen
        closed = sub_id in self._closed_ids
        log.log(logging.DEBUG if closed or seen > DROPPED_WARNINGS else logging.WARNING,
                "MESSAGE %s for subscription %s dropped, not given to the listeners: %s%s", message_id, sub_id,
                "after its UNSUBSCRIBE" if closed else "not subscribed on this connection",
                " (more of this subscription at DEBUG)" if seen == DROPPED_WARNINGS and not closed else "")
        return True
