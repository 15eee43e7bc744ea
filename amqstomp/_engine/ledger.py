"""Which socket delivered each message the application was handed, and which
socket each transaction began on: :class:`SocketLedger` (both APIs; the engine's
:class:`~amqstomp._engine.client.Client` asks it before an ACK/NACK or a
transactional frame goes out over failover).

Licensed under the Apache License, Version 2.0.
"""
import threading
from collections import OrderedDict, deque
from typing import Any, Deque, Dict, List, Mapping, Optional, Tuple

from .._core.frames import ack_identity
from .._core.settle import delivery_answered, not_covered
from .._core.transactions import TransactionTable
from .ports import TransportPort

__all__ = ["SocketLedger"]


class SocketLedger:
    """Which socket of a transport (its ``link_seq``) delivered each message the
    application was handed, and which socket each transaction began on, so that
    a failover layer never writes an ACK/NACK or a transactional frame of a lost
    socket on the new one (the broker redelivers those messages and rolled those
    transactions back).

    Messages are keyed by the identity their ACK names (STOMP 1.2 spec "ACK"):
    1.2 the MESSAGE's ``ack`` header, 1.1 ``message-id`` + ``subscription``, 1.0
    ``message-id``; never by message-id alone on 1.2, since ActiveMQ redelivers
    with the same ``message-id`` on the new socket. On 1.0/1.1 the lost copy and
    the redelivered one share their identity; the application's ACK carries no
    socket, so one rule (:meth:`socket_of`, the settlement core's
    :func:`~amqstomp._core.settle.delivery_answered`) says which delivery it is for: an
    ACK made by a listener on a socket's dispatching thread answers that
    socket's delivery; otherwise, the listeners being handed the copies in
    delivery order, the ACKs of an identity answer its outstanding deliveries
    oldest first -- the first ACK after a failover answers the lost socket's copy (refused:
    :class:`~amqstomp.exception.AcknowledgeInterruptedError`, as a 1.2 ACK of
    that copy's own ``ack`` id is), the next one the redelivered copy (written).
    Where identities never collide (1.2) the rule changes nothing. An ACK/NACK
    inside a transaction takes its delivery until the transaction ends: ABORT
    gives it back (:meth:`give_back`; the taking is kept in the connection's
    :class:`~amqstomp._core.transactions.TransactionTable`, :attr:`transactions`). For ``ack:client``
    subscriptions (cumulative ACKs) it also keeps their hand-over order, so a
    cumulative ACK can tell which earlier messages it does not cover: those of
    another (lost) socket (:meth:`covered`).

    Args:
        transport: the :class:`~amqstomp.transport.Transport` (its ``link_seq``
            names the current socket, ``version`` the negotiated STOMP version).
        size (int): message identities remembered (the oldest are forgotten first;
            a forgotten one is acknowledged on the current socket).
    """

    def __init__(self, transport: TransportPort, size: int = 65536) -> None:
        self.transport = transport
        self.size = int(size)
        self._messages: "OrderedDict[Tuple[str, ...], List[int]]" = OrderedDict()
        # ack:client subscriptions: subscription id -> (identity, socket, message-id) in hand-over order
        self._cumulative: Dict[str, Deque[Tuple[Tuple[str, ...], int, str]]] = {}
        self._cumulative_sub: Dict[Tuple[str, ...], str] = {}  # identity -> its ack:client subscription
        #: the connection's one transaction table (which socket each began on; what its
        #: ACK/NACKs took from this ledger: ("message", key, socket) and ("order",
        #: subscription, [hand-over entries]), under the owner "ledger")
        self.transactions = TransactionTable(transport.link_alive)
        self._lock = threading.Lock()
        # socket -> deliveries handed over on it and not answered by an ACK/NACK yet (:meth:`held`)
        self._held: Dict[int, int] = {}

    @staticmethod
    def ack_key(version: Optional[str], headers: Mapping[str, Any]) -> Tuple[str, ...]:
        """The identity an ACK names (:func:`amqstomp._core.frames.ack_identity`)."""
        return ack_identity(version, headers)

    def handed_over(self, frame: Any, cumulative: bool = False) -> None:
        """Dispatcher thread: the application is handed ``frame`` (a MESSAGE);
        ``cumulative``: its subscription is ``ack:client``."""
        key = self.ack_key(self.transport.version, frame.headers)
        seq = frame.link_seq or self.transport.link_seq
        with self._lock:
            held = self._held
            if seq not in held and held:  # a new socket: the earlier ones' counts are of no use
                held.clear()
            held[seq] = held.get(seq, 0) + 1
            kept = self._messages
            seqs = kept.get(key)
            if seqs is None:
                kept[key] = [seq]
                while len(kept) > self.size:
                    kept.popitem(last=False)
            else:
                seqs.append(seq)
            if cumulative:
                sub_id = str(frame.headers.get("subscription"))
                order = self._cumulative.setdefault(sub_id, deque())
                order.append((key, seq, str(frame.headers.get("message-id"))))
                self._cumulative_sub[key] = sub_id
                if len(order) > self.size:
                    self._cumulative_sub.pop(order.popleft()[0], None)

    def subscription_of(self, ack_headers: Mapping[str, Any], key: Optional[Tuple[str, ...]] = None) -> Optional[str]:
        """The ``ack:client`` subscription whose hand-over order holds the message
        an ACK with these headers names, or None. ``key``: their identity, if the
        caller has it (:meth:`ack_key`; computed here when None), as in the methods below."""
        return self._cumulative_sub.get(key if key is not None else self.ack_key(self.transport.version, ack_headers))

    def answered(self, subscription: str, ack_headers: Mapping[str, Any], seq: int, transaction: Any = None,
                 key: Optional[Tuple[str, ...]] = None) -> None:
        """An ACK/NACK naming the copy (identity, socket ``seq``) of an
        ``ack:client`` subscription was sent (in ``transaction``, if not None),
        or refused with AcknowledgeInterruptedError: drop it from the hand-over
        order (a later cumulative ACK does not count it again)."""
        if key is None:
            key = self.ack_key(self.transport.version, ack_headers)
        with self._lock:
            order = self._cumulative.get(str(subscription))
            if order:
                for entry in order:
                    if entry[0] == key and entry[1] == seq:
                        order.remove(entry)
                        if transaction is not None:
                            self._note(transaction, ("order", str(subscription), [entry]))
                        if self.transport.version == "1.2" or not any(other[0] == key for other in order):
                            self._cumulative_sub.pop(key, None)
                        break

    def covered(self, subscription: str, ack_headers: Mapping[str, Any], seq: int, transaction: Any = None,
                key: Optional[Tuple[str, ...]] = None) -> int:
        """A cumulative ACK of the copy (``ack_headers``' identity, socket ``seq``)
        of ``subscription`` was written: drop it and every message of that
        subscription handed over before it from the hand-over order. Returns how
        many of those came on another socket than ``seq`` (a lost one) and
        have no redelivered copy among the ones it covers: the ACK does not
        cover them (ActiveMQ acknowledges a socket's own deliveries only) and
        the broker redelivers them (:func:`amqstomp._core.settle.not_covered`)."""
        if key is None:
            key = self.ack_key(self.transport.version, ack_headers)
        with self._lock:
            order = self._cumulative.get(str(subscription))
            if not order or not any(entry[0] == key and entry[1] == seq for entry in order):
                return 0
            taken = []
            held = self._held
            while order:
                entry = order.popleft()
                taken.append(entry)
                if entry[0] == key and entry[1] == seq:
                    break
                if entry[1] in held:  # settled by this cumulative ACK (its own was counted by socket_of)
                    held[entry[1]] -= 1
            if transaction is not None:
                self._note(transaction, ("order", str(subscription), taken))
            # on 1.0/1.1 a lost copy and its redelivered copy share an identity; on 1.2 they never do
            remaining = {entry[0] for entry in order} if self.transport.version != "1.2" else set()
            for entry in taken:
                if entry[0] not in remaining:
                    self._cumulative_sub.pop(entry[0], None)
            # (the sockets stay noted in _messages: a later ACK naming one goes on its socket or
            # raises; on 1.0/1.1 it would otherwise name the redelivered copy)
            return not_covered(taken, seq)

    def socket_of(self, ack_headers: Mapping[str, Any], caller_seq: int = 0,
                  key: Optional[Tuple[str, ...]] = None) -> Optional[int]:
        """The socket that delivered the message an ACK/NACK with these headers
        names, and forget that delivery; None when unknown. Of several
        deliveries of one identity (1.0/1.1 after a failover: the lost copy and
        the redelivered one): the one of socket ``caller_seq`` (the ACK is made
        on that socket's dispatching thread, by a listener it handed the
        delivery to), else the oldest outstanding one: ACKs answer deliveries
        in the order the listeners were handed them (the class docstring's rule)."""
        if key is None:
            key = self.ack_key(self.transport.version, ack_headers)
        with self._lock:
            seqs = self._messages.get(key)
            if not seqs:
                return None
            seq = seqs.pop(delivery_answered(seqs, caller_seq))
            if not seqs:
                del self._messages[key]
            if seq in self._held:
                self._held[seq] -= 1
            return seq

    def held(self, seq: int) -> int:
        """Messages socket ``seq`` delivered that the application was handed (in a
        subscription it acknowledges) and has not answered with an ACK/NACK yet (a
        cumulative ACK answers the earlier ones too); counted while ``seq`` is the
        newest socket that handed one over. What a rebalance waits for before it
        moves (:mod:`amqstomp._core.rebalance`)."""
        with self._lock:
            return max(0, self._held.get(seq, 0))

    def took(self, transaction: Any, ack_headers: Mapping[str, Any], seq: int,
             key: Optional[Tuple[str, ...]] = None) -> None:
        """An ACK/NACK in ``transaction`` took the delivery (``ack_headers``'
        identity, socket ``seq``) :meth:`socket_of` returned: noted in the
        transaction table for :meth:`give_back`."""
        if key is None:
            key = self.ack_key(self.transport.version, ack_headers)
        with self._lock:
            self._note(transaction, ("message", key, seq))

    def _note(self, transaction: Any, taken: Tuple[Any, ...]) -> None:
        """Under the lock: a delivery taken by an ACK/NACK of ``transaction``."""
        self.transactions.took(transaction, "ledger", [taken])

    def give_back(self, taken: List[Tuple[Any, ...]]) -> None:
        """An ABORT ended the transaction whose ACK/NACKs took ``taken`` (what the
        transaction table's ``ended`` returned for the owner "ledger"): those
        deliveries are outstanding again (an ACK of one goes on its socket, or is
        refused when that socket is gone), in front of later ones."""
        with self._lock:
            kept = self._messages
            for entry in reversed(taken):  # the last taken first: each goes back in front
                if entry[0] == "message":
                    key, seq = entry[1], entry[2]
                    kept.setdefault(key, []).insert(0, seq)
                    if seq in self._held:
                        self._held[seq] += 1
                    while len(kept) > self.size:
                        kept.popitem(last=False)
                else:
                    sub_id, entries = entry[1], entry[2]
                    order = self._cumulative.setdefault(sub_id, deque())
                    order.extendleft(reversed(entries))
                    for identity in entries:
                        self._cumulative_sub[identity[0]] = sub_id

    def clear_transactions(self) -> None:
        """The connection ended (or opened again): no transaction is open any more."""
        with self._lock:
            self.transactions.clear()

    def forget_subscription(self, subscription: Any) -> None:
        """``subscription`` ended (UNSUBSCRIBE): drop its hand-over order."""
        with self._lock:
            order = self._cumulative.pop(str(subscription), None)
            for entry in order or ():
                self._cumulative_sub.pop(entry[0], None)
