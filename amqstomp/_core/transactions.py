"""The one transaction table of a connection, for every API (STOMP 1.2 "BEGIN",
"COMMIT", "ABORT"; ActiveMQ's ``TransactionId`` per connection).

What it decides, once for the stomp.py API (``protocol.py``, ``_session.py``),
the engine (:class:`amqstomp._engine.client.Client`, ``SocketLedger``) and the
JMS API (``jms/link.py``, ``jms/_transaction.py``):

* a BEGIN of an id that is open (begun, not ended) is refused
  (:class:`~amqstomp.exception.DuplicateTransactionError`; ActiveMQ would answer
  ERROR "The transaction was already started");
* a COMMIT/ABORT, or a SEND/ACK/NACK in a transaction, of an id that is not open
  is refused (:class:`~amqstomp.exception.UnknownTransactionError`; ActiveMQ:
  "Invalid transaction id");
* a transaction belongs to the socket its BEGIN was written on (its ``link_seq``;
  0 when not recorded: without failover). When that socket is gone the broker
  rolled it back: it is *stale*, and a SEND/ACK/NACK/COMMIT in it is refused
  (:class:`~amqstomp.exception.TransactionRolledBackError`), an ABORT has
  nothing to do, and a BEGIN of the same id is a new transaction;
* what ACK/NACKs inside a transaction took (by owner: the socket ledger's
  deliveries, ``"ledger"``; the subscriptions' unacknowledged map, ``"unacked"``;
  the JMS consumers' deliveries, ``"consumed"``: a transacted session's messages
  once an ACK in the transaction covers them) is handed back on ABORT and
  forgotten on COMMIT (:meth:`TransactionTable.ended`); the drivers put each
  owner's entries back where they came from;
* everything is forgotten when the connection ends (:meth:`TransactionTable.clear`).

Pure: no socket, thread, lock or clock. Whether a socket is alive is the
caller's knowledge, given to the table as ``alive(link_seq) -> bool`` (the
transport's ``link_alive``); decisions come back as values (an exception to raise, or None; a socket number; what to give
back), which the drivers apply under their own locks.

Licensed under the Apache License, Version 2.0.
"""
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional

from ..exception import (
    ConnectionClosedException,
    DuplicateTransactionError,
    NotConnectedException,
    StompException,
    TransactionRolledBackError,
    UnknownTransactionError,
)

__all__ = ["TransactionTable", "TRANSACTIONS_MAX", "rolled_back", "lost_with_socket", "write_lost"]

#: open transactions a table remembers; beyond, the oldest is forgotten (an application
#: that never ends its transactions); a forgotten one is then an unknown transaction
TRANSACTIONS_MAX = 65536

#: ``alive(link_seq)``: True while socket ``link_seq`` is the open one (the transport's ``link_alive``)
Alive = Callable[[int], bool]


def rolled_back(command: str, transaction: Any) -> TransactionRolledBackError:
    """The refusal of ``command`` in ``transaction``, which began on a socket lost
    since (failover, or a plain connection that was lost): the broker rolled it back
    with that socket."""
    return TransactionRolledBackError("%s not sent: transaction %s began on a connection lost since; the broker "
                                      "rolled it back with that connection" % (command, transaction))


def lost_with_socket(command: str, transaction: Any) -> TransactionRolledBackError:
    """``command`` in ``transaction`` found the transaction's socket gone while
    being written (failover): the broker rolled the transaction back."""
    return TransactionRolledBackError("%s not sent: the connection of transaction %s was lost (failover); the "
                                      "broker rolled it back" % (command, transaction))


class _Open:
    """One open transaction: the socket of its BEGIN (0: not recorded) and what
    its ACK/NACKs took, by owner."""

    __slots__ = ("socket", "taken")

    def __init__(self, socket: int) -> None:
        self.socket = socket
        self.taken: Optional[Dict[str, List[Any]]] = None


def write_lost(command: str, transaction: Any, exc: BaseException) -> bool:
    """A write of ``command`` failed with ``exc``: the rule for a frame of
    ``transaction`` (None: outside one) whose socket is gone. The broker rolled
    the transaction back with that socket, so the frame is written on no other.

    Returns:
        bool: True for an ABORT (nothing left to abort: the caller drops it);
        False when the rule does not apply (no transaction, a BEGIN -- written
        on the next socket --, or ``exc`` is no lost socket: the caller handles it).

    Raises:
        TransactionRolledBackError: any other frame of such a transaction
            (:func:`lost_with_socket`, from ``exc``).
    """
    if transaction is None or command == "BEGIN" or \
            not isinstance(exc, (NotConnectedException, ConnectionClosedException)):
        return False
    if command == "ABORT":
        return True
    raise lost_with_socket(command, transaction) from exc


def _never_lost(seq: int) -> bool:
    return True


class TransactionTable:
    """The open transactions of one connection (see the module docstring).

    Args:
        alive (Callable[[int], bool]): True while socket ``link_seq`` is the open
            one (the transport's ``link_alive``); by default every socket is.
        size (int): open transactions remembered (:data:`TRANSACTIONS_MAX`).
    """

    __slots__ = ("_open", "alive", "size")

    def __init__(self, alive: Alive = _never_lost, size: int = TRANSACTIONS_MAX) -> None:
        self._open: "OrderedDict[str, _Open]" = OrderedDict()
        self.alive = alive
        self.size = int(size)

    def __contains__(self, transaction: Any) -> bool:
        return str(transaction) in self._open

    def __len__(self) -> int:
        return len(self._open)

    def __repr__(self) -> str:
        return "<TransactionTable open=%d>" % len(self._open)

    # ------------------------------------------------------------ decisions

    def refusal(self, command: str, transaction: Any) -> Optional[StompException]:
        """What refuses ``command`` (BEGIN, COMMIT, ABORT, SEND, ACK, NACK) in
        ``transaction``, or None when it may be written. The caller raises it
        (the stomp.py facade may waive it, see ``BaseProtocol._refuse``).

        Returns:
            DuplicateTransactionError: BEGIN of an open (not stale) transaction.
            UnknownTransactionError: any other command of a transaction that is
                not open (never begun, ended, or begun before the connection
                was opened again).
            TransactionRolledBackError: SEND/ACK/NACK/COMMIT of a stale
                transaction (its socket is gone). An ABORT of one is not
                refused: there is nothing to abort, and writing it is dropped.
        """
        kept = self._open
        record = kept.get(transaction)
        if record is None and type(transaction) is not str:  # (keys are str: an id given as another type)
            record = kept.get(str(transaction))
        if command == "BEGIN":
            if record is not None and not self._stale(record):
                return DuplicateTransactionError(
                    "BEGIN of transaction %r, which this connection began already and has not ended: ActiveMQ would "
                    "answer ERROR 'The transaction was already started'; nothing sent" % (transaction,))
            return None
        if record is None:
            return UnknownTransactionError(
                "%s %s transaction %r, which this connection did not begin or ended already (or began before it "
                "connected again): ActiveMQ would answer ERROR 'Invalid transaction id'; nothing sent"
                % (command, "of" if command == "COMMIT" or command == "ABORT" else "in", transaction))
        if record.socket and command != "ABORT" and self.is_stale(transaction):  # (no socket: never stale)
            return rolled_back(command, transaction)
        return None

    def socket(self, transaction: Any) -> int:
        """The socket (``link_seq``) ``transaction``'s BEGIN was written on; 0 when
        not recorded (no failover, or not open)."""
        record = self._open.get(str(transaction))
        return 0 if record is None else record.socket

    def is_stale(self, transaction: Any) -> bool:
        """True when ``transaction`` began on a socket that is gone (the broker
        rolled it back with that socket)."""
        record = self._open.get(str(transaction))
        return record is not None and self._stale(record)

    def _stale(self, record: _Open) -> bool:
        return record.socket != 0 and not self.alive(record.socket)

    # ------------------------------------------------------------ events

    def began(self, transaction: Any, socket: int = 0) -> None:
        """A BEGIN of ``transaction`` was written, on socket ``socket`` when known
        (0: not recorded). A BEGIN on another socket than the one recorded (the
        same id begun again after its socket was lost) is a new transaction."""
        key = str(transaction)
        kept = self._open
        record = kept.get(key)
        if record is None or (socket and record.socket and record.socket != socket):
            kept[key] = _Open(socket)
            kept.move_to_end(key)
            while len(kept) > self.size:
                kept.popitem(last=False)
        elif socket:
            record.socket = socket

    def took(self, transaction: Any, owner: str, entries: List[Any]) -> bool:
        """An ACK/NACK in ``transaction`` took ``entries`` from ``owner``'s store
        (given back to it on ABORT, by :meth:`ended`).

        Returns:
            bool: True when noted (or nothing to note); False for a transaction
            that is not open: nothing would give them back, so the owner keeps them.
        """
        record = self._open.get(str(transaction))
        if record is None:
            return not entries
        if not entries:
            return True
        if record.taken is None:
            record.taken = {}
        record.taken.setdefault(owner, []).extend(entries)
        return True

    def taken(self, transaction: Any, owner: str) -> List[Any]:
        """What ACK/NACKs in the open ``transaction`` took from ``owner`` so far, in
        the order taken (a copy; empty for a transaction that is not open)."""
        record = self._open.get(str(transaction))
        if record is None or record.taken is None:
            return []
        return list(record.taken.get(owner, ()))

    def ended(self, transaction: Any, aborted: bool) -> Dict[str, List[Any]]:
        """A COMMIT (``aborted`` False) or an ABORT (True) of ``transaction`` was
        written, or found its socket gone: it is no longer open.

        Returns:
            dict[str, list]: ABORT: what its ACK/NACKs took, by owner, in the
            order taken (each owner puts its entries back); COMMIT: empty (what
            they took is final).
        """
        record = self._open.pop(str(transaction), None)
        if record is None or not aborted or record.taken is None:
            return {}
        return record.taken

    def clear(self) -> None:
        """The connection ended (or opened again): no transaction is open."""
        self._open.clear()
