"""Transactions of :mod:`amqstomp.aio` (STOMP 1.2 "BEGIN", "COMMIT", "ABORT").

``async with client.transaction() as tx``: BEGIN on entry; ``await tx.send(...)``
and ``await tx.ack(message)`` inside; on a normal exit COMMIT, whose RECEIPT is
awaited; on an exception ABORT (its RECEIPT awaited, bounded) and the exception
goes on. The guards are the core's one transaction table
(:class:`amqstomp._core.transactions.TransactionTable`: an unknown or ended
transaction, a BEGIN of an open one, a transaction of a lost socket).

Licensed under the Apache License, Version 2.0.
"""
import asyncio
import logging
from typing import TYPE_CHECKING, Any, Mapping, Optional, Union

from ..exception import (BrokerError, ReceiptTimeout, StompException, TransactionInDoubtError,
                         TransactionRolledBackError, UnknownMessageError)
from ._link import LostAfterWrite
from .subscription import TAKEN_BY

if TYPE_CHECKING:
    from ._port import ClientPort
    from .subscription import Message

__all__ = ["Transaction"]

log = logging.getLogger("amqstomp.aio")


class Transaction:
    """One transaction (made by :meth:`Client.transaction`).

    Attributes:
        id (str): the ``transaction`` header's value.
        timeout (float): seconds COMMIT's and ABORT's RECEIPTs are awaited.
    """

    def __init__(self, client: "ClientPort", transaction_id: str, timeout: float) -> None:
        self.client = client
        self.id = transaction_id
        self.timeout = timeout
        self.ended = False
        #: a COMMIT written whose wait for the RECEIPT was cancelled: its outcome is unknown
        self.commit_cancelled = False

    async def begin(self) -> None:
        """Write BEGIN (no RECEIPT: an ERROR for it fails the COMMIT).

        Raises:
            DuplicateTransactionError: begun already; ConnectionClosedException: no socket.
        """
        client = self.client
        client.check_loop()
        link = await client.ready(self.timeout, "BEGIN of %s" % self.id)
        client.transaction_check("BEGIN", self.id)
        await client.write_frame(link, "BEGIN", {"transaction": self.id}, b"", False, self.timeout,
                                  "BEGIN of %s" % self.id)
        client.transactions.began(self.id, link.seq)

    async def send(self, destination: str, body: Union[bytes, str], headers: Optional[Mapping[str, Any]] = None,
                   *, receipt: bool = False, content_type: Optional[str] = None,
                   timeout: Optional[float] = None) -> None:
        """SEND in this transaction (:meth:`Client.send` with ``transaction``; no RECEIPT by
        default: the COMMIT's says the broker has them all)."""
        await self.client.send(destination, body, headers, receipt=receipt, transaction=self.id,
                               content_type=content_type, timeout=timeout)

    async def ack(self, message: "Message") -> None:
        """ACK ``message`` in this transaction (settled at COMMIT; an ABORT gives it back to the broker,
        which redelivers it). Raises as :meth:`Message.ack`, and UnknownTransactionError;
        UnknownMessageError also when another client delivered ``message`` (a transaction
        is one connection's: nothing sent)."""
        if message.subscription.client is not self.client:
            raise UnknownMessageError("ACK of %r in transaction %s: the message belongs to another connection (another "
                                      "Client delivered it; settle it there); nothing sent" % (message, self.id))
        await message.ack(transaction=self.id)

    async def commit(self, timeout: Optional[float] = None) -> None:
        """COMMIT and wait for its RECEIPT (``timeout`` seconds, default the transaction's).

        Raises:
            TransactionRolledBackError: the broker refused the COMMIT (its ERROR is the cause),
                or the transaction's socket was lost before the COMMIT was written.
            TransactionInDoubtError: the COMMIT was written and no RECEIPT came (the socket
                was lost, or the timeout passed): the broker may or may not have committed.
            UnknownTransactionError: not begun, or ended already.
            TransactionInDoubtError: also when an earlier commit() of it was cancelled after its
                COMMIT was written (the outcome of that one is unknown); :meth:`abort` then too.
        """
        await self._end("COMMIT", timeout)

    async def abort(self, timeout: Optional[float] = None) -> None:
        """ABORT and wait for its RECEIPT (``timeout`` seconds). A transaction whose socket is
        gone has nothing to abort (the broker rolled it back): returns.

        Raises:
            ReceiptTimeout, BrokerError: as the broker answers; UnknownTransactionError;
            TransactionInDoubtError: a commit() of it was cancelled after its COMMIT was written.
        """
        await self._end("ABORT", timeout)

    async def _end(self, cmd: str, timeout: Optional[float]) -> None:
        client = self.client
        client.check_loop()
        if self.commit_cancelled:
            raise TransactionInDoubtError("the outcome of %s is unknown: its COMMIT was written, then the wait for its "
                                          "receipt was cancelled, so the broker may or may not have committed; this "
                                          "%s() wrote nothing" % (self.id, cmd.lower()))
        table = client.transactions
        if cmd == "ABORT" and table.is_stale(self.id):
            table.ended(self.id, True)
            self.ended = True
            return
        refusal = table.refusal(cmd, self.id)
        if refusal is not None:
            if isinstance(refusal, TransactionRolledBackError):
                table.ended(self.id, True)
                self.ended = True
            raise refusal
        link = client.require()
        wait = self.timeout if timeout is None else client.timeout_s(timeout)
        for message in table.ended(self.id, cmd == "ABORT").get(TAKEN_BY, ()):  # (written below, no await before)
            message.subscription.given_back(message)
        self.ended = True
        what = "%s of %s" % (cmd, self.id)
        try:
            await client.write_frame(link, cmd, {"transaction": self.id}, b"", True, wait, what)
        except asyncio.CancelledError:
            # (written whole before the first await: the broker may commit it)
            self.commit_cancelled = cmd == "COMMIT"
            raise
        except LostAfterWrite as exc:
            if cmd == "COMMIT":
                raise TransactionInDoubtError("the connection was lost after %s was written and before its receipt: "
                                              "the broker may or may not have committed (%s)" % (what, exc)) from exc
            raise
        except ReceiptTimeout as exc:
            if cmd == "COMMIT":
                raise TransactionInDoubtError("no receipt for %s within %.3g s: the broker may or may not have "
                                              "committed" % (what, wait)) from exc
            raise
        except BrokerError as exc:
            if cmd == "COMMIT":
                raise TransactionRolledBackError("the broker refused %s: %s" % (what, exc.reason)) from exc
            raise

    async def __aenter__(self) -> "Transaction":
        await self.begin()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.ended:
            return
        if exc_type is None:
            await self.commit()
            return
        try:  # the exception goes on; the ABORT is bounded and its failure only logged
            await self.abort()
        except (StompException, asyncio.TimeoutError) as error:
            log.warning("ABORT of %s after %s failed: %s", self.id, exc_type.__name__, error)

    def __repr__(self) -> str:
        return "<aio.Transaction %s%s>" % (self.id, " ended" if self.ended else "")
