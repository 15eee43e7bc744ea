"""The duplicate audits of one connection's subscriptions: where the settlement of a
message is recorded and where a delivery of a settled one is found, for both APIs.

:class:`DuplicateAudits` is a part of :class:`amqstomp._engine.subscription.SubscriptionManager`
(its base class, like :class:`amqstomp._unacked.UnackedMessages`); the rule itself
-- what is audited, what is a duplicate and how it is settled -- is the core's,
:mod:`amqstomp._core.duplicates`. One :class:`~amqstomp._core.duplicates.SettledAudit`
per queue (shared by the connection's subscriptions to it) and one per topic
subscription; a subscription holds its audit as ``Subscription.settled`` (None:
not checked) and keeps it across a failover's replay.

Where settlement is recorded (:meth:`DuplicateAudits.record_settled`): for ``ack:auto``
and where amqstomp acknowledges, when the application had the message
(``SubscriptionManager.on_consumed``); the stomp.py API's application ACKs, once
written outside a transaction (``Client.acknowledge_identity``); JMS
``CLIENT_ACKNOWLEDGE``/``INDIVIDUAL_ACKNOWLEDGE``, once the ACK was written; a JMS
transaction, once its COMMIT was.

Licensed under the Apache License, Version 2.0.
"""
import logging
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from . import _observe
from .exception import StompException
from ._core.dialect import ACTIVEMQ
from ._core.duplicates import (DEFAULT_AUDIT_DEPTH, DUPLICATE_ACK, DUPLICATE_HAND_OVER, NOT_DUPLICATE,
                                   SettledAudit, duplicate)
from ._core.frames import ack_headers, ack_identity
from ._core.destinations import destination_kind

__all__ = ["DuplicateAudits"]

log = logging.getLogger("amqstomp.subscription")


class DuplicateAudits:
    """The settled-message audits of a connection (see the module docstring)."""

    transport: Any
    _unacked: Dict[Tuple[str, ...], Any]
    _unacked_complete: bool
    check_ack: Callable[..., Any]  # UnackedMessages'
    on_consumed: Callable[[Any], None]  # SubscriptionManager's

    def _init_duplicates(self, check_for_duplicates: bool, depth: int) -> None:
        if not isinstance(check_for_duplicates, bool):
            raise ValueError("check_for_duplicates must be True or False, got %r" % (check_for_duplicates,))
        self.check_for_duplicates = check_for_duplicates
        self._audit_depth = depth or DEFAULT_AUDIT_DEPTH
        self._audits: Dict[str, SettledAudit] = {}
        #: deliveries of settled messages not handed to the application (counted for the tests and the docs)
        self.duplicates_suppressed = 0
        #: ACK identity -> message-id of the audited deliveries the application acknowledges and
        #: has not yet (its ACKs name identities); kept with ``_unacked``
        self._unacked_ids: Dict[Tuple[str, ...], str] = {}

    def _settled_audit(self, destination: str, sub_id: str, browser: bool = False) -> Optional[SettledAudit]:
        """The audit of a new subscription: its queue's, else its own (None: not checked, and
        never for a queue browser, which settles nothing: as the Java client's dispatch)."""
        if not self.check_for_duplicates or browser:
            return None
        key = "q" + destination if destination_kind(destination) == "queue" else "s" + sub_id
        audit = self._audits.get(key)
        if audit is None:
            if len(self._audits) >= 1000:  # ConnectionAudit's LRU bound: the oldest goes
                self._audits.pop(next(iter(self._audits)))
            audit = self._audits[key] = SettledAudit(self._audit_depth)
        return audit

    def duplicate_of(self, sub: Any, frame: Any, outstanding: Optional[bool] = None,
                     next_ack_names_newest: bool = False) -> int:
        """Dispatcher or session thread, just before the hand-over of a MESSAGE of
        ``sub`` whose ``message-id`` its audit holds: the core's verdict
        (:func:`amqstomp._core.duplicates.duplicate`). ``outstanding`` None: asked of
        the stomp.py API's record of unacknowledged deliveries (unknown counts as yes)."""
        if outstanding is None:
            outstanding = True
            if sub.ack == "client" and self._unacked_complete:
                order = sub.unacked
                outstanding = bool(order) and order[0] != ack_identity(self.transport.version, frame.headers)
        verdict = duplicate(sub.settled, frame.headers.get("message-id"), sub.ack, sub.app_acked, outstanding,
                            next_ack_names_newest)
        if verdict and verdict != DUPLICATE_HAND_OVER:
            self.duplicates_suppressed += 1
            if _observe.messages is not None:
                _observe.messages.duplicate(self.transport, frame)
            log.debug("message %s of subscription %s was settled here before: duplicate (verdict %d)",
                      frame.headers.get("message-id"), sub.id, verdict)
        return verdict

    def suppress(self, sub: Any, frame: Any) -> bool:
        """The stomp.py API's dispatcher, before the listeners get a MESSAGE of ``sub``
        whose ``message-id`` its audit holds: True when it is a duplicate not handed over,
        settled as the core says (no ACK for ``ack:auto``; counted consumed where amqstomp
        acknowledges; else its own ACK, on the socket that delivered it)."""
        verdict = self.duplicate_of(sub, frame)
        if verdict == NOT_DUPLICATE or verdict == DUPLICATE_HAND_OVER:
            return False
        if verdict == DUPLICATE_ACK:
            try:
                self.check_ack("ACK", frame.headers)  # no longer the application's to acknowledge
            except StompException:
                pass
            self._unacked_ids.pop(ack_identity(self.transport.version, frame.headers), None)
        self.on_consumed(frame)  # its place in the window (and, optimized, the batched ACK)
        if verdict == DUPLICATE_ACK:
            headers = ack_headers(self.transport.version or "1.2", frame.headers, self.transport.dialect == ACTIVEMQ)
            try:
                self.transport.send_frame("ACK", headers, None, link_seq=frame.link_seq)
            except StompException as exc:  # its socket is gone: the broker delivers it again, suppressed again
                log.debug("ACK of duplicate %s not sent: %s", frame.headers.get("message-id"), exc)
        return True

    @staticmethod
    def record_settled(sub: Any, message_ids: Iterable[Optional[str]]) -> None:
        """``message_ids`` of ``sub`` were settled (see the module docstring)."""
        audit = sub.settled if sub is not None else None
        if audit is not None:
            for message_id in message_ids:
                audit.settled(message_id)

    @staticmethod
    def forget_settled(sub: Any, message_id: Optional[str]) -> None:
        """``message_id`` of ``sub`` was NACKed or rolled back: out of the audit."""
        if sub is not None and sub.settled is not None:
            sub.settled.forget(message_id)

    def application_settled(self, command: str, settling: Optional[List[Any]]) -> None:
        """The stomp.py API: the application's ACK/NACK was written outside a transaction;
        ``settling``: ``(subscription, message-id)`` of each message it settles, as
        ``check_ack`` returned them (None: none audited). An ACK settles them; a NACK
        takes them out of the audit."""
        if settling is None:
            return
        for sub, message_id in settling:
            audit = sub.settled
            if audit is not None and message_id is not None:
                if command == "ACK":
                    audit.settled(message_id)
                else:
                    audit.forget(message_id)
