"""Which delivered messages the application of a stomp.py-API connection still
has to acknowledge, so that an ACK/NACK naming one it does not hold is refused
before it is written (ActiveMQ would answer ERROR "Unexpected ACK received"),
and what an ACK/NACK inside a transaction took, so that ABORT gives it back.

:class:`UnackedMessages` is a part of
:class:`amqstomp._engine.subscription.SubscriptionManager` (its base class), kept here
so that each module stays readable: the manager fills the map on the reader
thread (``SubscriptionManager.on_message``), this part checks and settles it.

Transactions (STOMP 1.2 "ACK"/"NACK" with a ``transaction`` header, "ABORT"):
an acknowledgement inside a transaction takes effect only at COMMIT. After
ABORT the broker holds the messages that transaction acknowledged as delivered
and not acknowledged (ActiveMQ 5.17 does not redispatch them on a STOMP ABORT:
they stay with this subscription until it ends), so they are again the
application's to ACK or NACK, as stomp.py (which checks nothing) lets it:
:meth:`UnackedMessages.check_ack` returns what an ACK/NACK in a transaction
took, which the engine notes in the connection's transaction table
(:mod:`amqstomp._core.transactions`); on ABORT the table hands it back to
:meth:`UnackedMessages.give_back`, on COMMIT it is forgotten.
"""
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._core.frames import ack_identity
from .exception import UnknownMessageError

__all__ = ["UnackedMessages", "UNACKED_MAX"]

#: unacknowledged deliveries ``check_ack`` keeps per connection before it stops checking
UNACKED_MAX = 1 << 17
#: (identity, subscription, taken from the subscription's cumulative order)
_Taken = Tuple[Tuple[str, ...], Any, bool]


class UnackedMessages:
    """The unacknowledged deliveries of the subscriptions the application
    acknowledges (not ``ack:auto``, not ``optimize_acknowledge``), keyed by the
    identity an ACK names (:func:`amqstomp._core.frames.ack_identity`:
    STOMP 1.2 ``ack``, 1.1 ``message-id`` + ``subscription``, 1.0 ``message-id``).
    Complete only while every MESSAGE came through a known subscription and the
    map stayed within :data:`UNACKED_MAX`; otherwise nothing is refused."""

    transport: Any
    _unacked_ids: Dict[Tuple[str, ...], Any]  # the duplicate audits' (amqstomp._duplicates)

    def _init_unacked(self, track_acks: bool) -> None:
        self._track_acks = track_acks
        self._unacked: Dict[Tuple[str, ...], Any] = {}
        self._unacked_complete = track_acks

    def _clear_unacked(self) -> None:
        """A new connection: nothing is held any more."""
        self._unacked.clear()
        self._unacked_ids.clear()
        self._unacked_complete = self._track_acks

    def _forget_unacked(self, sub: Any) -> None:
        """``sub`` ended (UNSUBSCRIBE, a lost socket): its deliveries are no longer the application's."""
        if self._unacked:
            for key, owner in list(self._unacked.items()):
                if owner is sub:
                    self._unacked.pop(key, None)
                    self._unacked_ids.pop(key, None)

    def _is_current(self, sub: Any) -> bool:
        """True while ``sub`` is an open subscription of this connection."""
        raise NotImplementedError  # SubscriptionManager's

    def _self_acked(self) -> List[str]:
        """The ids of the open subscriptions amqstomp acknowledges itself (``optimize_acknowledge``)."""
        raise NotImplementedError  # SubscriptionManager's

    def _self_acked_note(self, ack_headers: Mapping[str, Any]) -> str:
        """What a refused ACK/NACK's error adds when ``optimize_acknowledge`` subscriptions are open:
        their messages are not in the map, as amqstomp acknowledges them itself (in batches)."""
        ids = self._self_acked()
        if not ids:
            return ""
        named = ack_headers.get("subscription")
        if named is not None and str(named) in ids:
            return ("; subscription %s is optimize_acknowledge: amqstomp acknowledges that subscription itself, "
                    "not the application" % named)
        return ("; or it came on subscription %s, which amqstomp acknowledges itself (optimize_acknowledge), "
                "not the application" % " or ".join(ids))

    def _ack_id_note(self, key: Tuple[str, ...]) -> str:
        """What a refused ACK/NACK's error adds on STOMP 1.2, where the id it names is the
        MESSAGE's ``ack`` header (STOMP 1.2 "ACK"), which ActiveMQ makes different from its
        ``message-id``: that the id is a held message's message-id, when the duplicate audit
        knows the message-ids (no map is kept for this: the error path only), else the rule."""
        if self.transport.version != "1.2" or len(key) != 1:
            return ""
        if any(str(message_id) == key[0] for message_id in self._unacked_ids.values()):
            return ("; %r is the message-id of a message this connection holds: on STOMP 1.2 acknowledge with the "
                    "MESSAGE's 'ack' header (conn.ack(frame.headers['ack'])), not its message-id" % key[0])
        return ("; on STOMP 1.2 the id to acknowledge is the MESSAGE's 'ack' header (conn.ack(frame.headers['ack'])), "
                "not its message-id")

    def holds(self, ack_headers: Mapping[str, Any]) -> Optional[bool]:
        """Whether this connection holds the message ``ack_headers`` name (the
        identity an ACK names: :func:`amqstomp._core.frames.ack_identity`),
        delivered and not acknowledged yet; nothing changes. None: not known (the
        check is off: a MESSAGE of a subscription not made here came, or more
        than :data:`UNACKED_MAX` wait). A composition of connections
        (:class:`amqstomp.fanin.FanInConnection`) asks it to find the one an ACK is for."""
        if not self._unacked_complete:
            return None
        return ack_identity(self.transport.version, ack_headers) in self._unacked

    def check_ack(self, command: str, ack_headers: Mapping[str, Any],
                  transaction: Optional[Any] = None, key: Optional[Tuple[str, ...]] = None) -> Optional[List[Any]]:
        """The application is about to send ACK/NACK ``ack_headers``: refuse one
        naming a message this connection has not delivered unacknowledged (with
        ``track_acks``); count it acknowledged (an ACK of an ``ack:client``
        subscription acknowledges every earlier delivery of it too, ActiveMQ's
        cumulative ACK). With ``transaction`` (the id of the frame's
        ``transaction`` header) what it takes is returned, not forgotten.
        ``key``: the ACK's identity when the caller computed it already.

        Returns:
            list | None: in ``transaction``, what the ACK/NACK took, for the
            transaction table to hand to :meth:`give_back` on ABORT
            (:meth:`amqstomp._engine.client.Client.check_ack`); outside one, while
            the duplicate audit follows the deliveries, ``(subscription, message-id)``
            of each message it settles once written (``application_settled``); else None.

        Raises:
            UnknownMessageError: no such message (never delivered, or acknowledged
                already); ActiveMQ would answer ERROR ("Unexpected ACK received").
        """
        if not self._unacked_complete:
            return None
        if key is None:
            key = ack_identity(self.transport.version, ack_headers)
        sub = self._unacked.pop(key, None)
        if sub is None:
            raise UnknownMessageError(
                "%s of %s: this connection holds no unacknowledged message with that id (never delivered, or "
                "acknowledged already, also by a cumulative ACK%s); nothing sent%s"
                % (command, ", ".join(key), self._self_acked_note(ack_headers), self._ack_id_note(key)))
        if transaction is not None:
            return self._took(key, sub, command == "ACK" and sub.ack == "client")
        ids = self._unacked_ids  # the duplicate audit's: what this ACK settles, once written
        settling = [(sub, ids.pop(key, None))] if ids else None
        if command == "ACK" and sub.ack == "client":
            order = sub.unacked
            while order:
                earlier = order.popleft()
                if earlier == key:
                    break
                self._unacked.pop(earlier, None)
                if settling is not None:
                    settling.append((sub, ids.pop(earlier, None)))
        return settling

    def _took(self, key: Tuple[str, ...], sub: Any, cumulative: bool) -> List[_Taken]:
        """:meth:`check_ack` in a transaction: what it takes."""
        taken: List[_Taken] = []
        if cumulative:
            order = sub.unacked
            while order:
                earlier = order.popleft()
                if earlier == key:
                    break
                if self._unacked.pop(earlier, None) is not None:
                    taken.append((earlier, sub, True))
        taken.append((key, sub, cumulative))
        return taken

    def give_back(self, taken: List[_Taken]) -> None:
        """An ABORT ended the transaction whose ACK/NACKs took ``taken`` (what
        :meth:`check_ack` returned): those messages are held again, ACKable and
        NACKable, unless their subscription ended meanwhile."""
        if not taken or not self._unacked_complete:
            return
        back: Dict[Any, List[Tuple[str, ...]]] = {}
        for key, sub, in_order in taken:
            if not self._is_current(sub) or key in self._unacked:
                continue
            self._unacked[key] = sub
            if in_order:
                back.setdefault(sub, []).append(key)
        for sub, keys in back.items():  # older than every delivery still in the order: in front
            sub.unacked.extendleft(reversed(keys))
