"""``Transaction``: the STOMP transactions of a transacted
:class:`~amqstomp.jms.Session` -- BEGIN on first use, the SENDs and ACKs in it,
COMMIT / ABORT, and what a commit or rollback does to the messages its
consumers delivered (local redelivery, ``release_after_rollback``, in-doubt
commits). The session's ``commit()`` / ``rollback()`` and its producers and
consumers call it; it reaches them through the :class:`SessionState` they share.

What a transaction consumed is recorded in one place for every API: a message
handed over waits in its consumer's ``ConsumerLedger.delivered`` until an ACK in
the transaction covers it, then it is the connection's transaction table's
(:mod:`amqstomp._core.transactions`, owner :data:`~amqstomp.jms._state.CONSUMED`;
moved there by :meth:`SessionState.cover_in_transaction`): given back to its
consumer on ABORT (or when a commit fails), gone on COMMIT.

A session with consumers keeps its SENDs and ACKs in one transaction on the
consumer socket, committed together; a transaction of a session without
consumers holds only SENDs and goes on the producer socket (see
:meth:`Transaction.transacted_send`).

Licensed under the Apache License, Version 2.0.
"""
import itertools
import logging
import threading
import time
from typing import Any, List, Optional, Tuple

from .. import _observe
from .._core.ackmodes import in_transaction_ack
from ..exception import (AcknowledgeInDoubtError, AcknowledgeInterruptedError, StompException, TransactionInDoubtError,
                         TransactionPartlyCommittedError)
from ._state import CONSUMED, Delivery, SessionState, give_back
from .exceptions import TransactionRolledBackError
from .link import Link, message_ack_headers

__all__ = ["Transaction"]

log = logging.getLogger("amqstomp.jms.session")

class Transaction:
    """The transaction bookkeeping of one session (every session has one; only
    a transacted session's begins transactions).

    Attributes:
        lock (threading.RLock): held across a commit / rollback / transactional send.
        tx (str | None): the open transaction on the consumer socket (ACKs, and
            SENDs there).
        send_tx (tuple[Link, str] | None): a send-only transaction on the producer socket.
    """

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self.lock = threading.RLock()
        self.tx: Optional[str] = None
        self.send_tx: Optional[Tuple[Link, str]] = None
        #: why the session's open transaction cannot commit (None: it can): a transacted session's
        #: transaction on the consumer socket was lost with that socket (failover) and replaced by a
        #: new one for the consumers' batch ACKs (:meth:`transaction_id`); ``commit()`` rolls back
        self.doomed: Optional[str] = None
        self._numbers = itertools.count(1)

    def __repr__(self) -> str:  # log lines name the session
        return repr(self.state.session)

    def send_link(self) -> Link:
        """The socket this session's producers send on (for a transacted session,
        the one its next transactional SEND goes on, see :meth:`transacted_send`)."""
        if self.state.transacted:
            with self.lock:
                if self.send_tx is not None:
                    return self.send_tx[0]
                if self.tx is not None or self.state.consumers or self.state.deferred_close:
                    return self.state.connection.consumer_link
            return self.state.connection.producer_link()
        return self.state.connection.producer_link()

    def transaction_id(self, acks: bool = False) -> str:
        """The open transaction's id on the consumer socket (BEGIN is sent on first use).

        CLIENT_ACKNOWLEDGE's private "delivered" transaction (a session that is not
        transacted) begun on a socket lost since (failover; the broker rolled it back with
        that socket) is abandoned here and a new one begun on the open socket, so that the
        batch ACKs keep ActiveMQ's window growing (:func:`amqstomp._core.ackmodes.acks_in_transaction`;
        else the consumer stalls at the prefetch until ``acknowledge()``). What the old one's
        ACKs took goes back to its consumers' ``delivered`` (the transaction table's give-back):
        those came on the lost socket, so they are never ACKed on the new one and
        ``acknowledge()`` reports them not acknowledged (AcknowledgeInterruptedError) --
        the broker redelivers them.

        A transacted session's transaction lost so is replaced the same way for its consumers'
        batch ACKs (``acks``: :meth:`amqstomp.jms.consumer.ConsumerCore._maybe_ack_in_transaction`),
        so its consumers never stall at the prefetch until ``commit()`` either; the session's
        transaction is then :attr:`doomed`: ``commit()`` rolls all of it back and raises
        TransactionRolledBackError (JMS: a commit after a failover that lost the transaction).
        A SEND (``acks`` False) into a lost transaction is not moved: it raises
        TransactionRolledBackError (the producer's rule)."""
        with self.lock:
            tx = self.tx
            if tx is not None and (acks or not self.state.transacted):
                link = self.state.connection.consumer_link
                if link.client.transaction_stale(tx):
                    if self.state.transacted:
                        log.info("%r: the socket of transaction %s was lost (failover): it is rolled back, and "
                                 "commit() will say so; its consumers ACK in a new one meanwhile", self, tx)
                        self.doomed = self.doomed or ("transaction %s was lost with its connection (failover; the "
                                                      "broker rolled it back)" % tx)
                    else:
                        log.info("%r: the socket of its acknowledgement transaction %s was lost; beginning a "
                                 "new one", self, tx)
                    self.tx = None
                    link.transaction_abandoned(tx)
            if self.tx is None:
                self.state.check_open()
                tx = "tx-%d.%d-%d" % (self.state.connection.number, self.state.number, next(self._numbers))
                self.state.connection.consumer_link.begin(tx)
                self.tx = tx
            return self.tx

    def transacted_send(self, needs_consumer_socket: bool = False) -> Tuple[Link, str]:
        """Where a transactional SEND goes: ``(link, transaction id)``.

        A transaction whose session has no consumer holds only SENDs: it goes on
        the producer socket, where asynchronous sends ask for a receipt once per
        producer-window quarter (on the consumer socket every SEND asks for one,
        so that ActiveMQ's producer flow control never stops reading the socket
        that carries ACKs: see the module docstring of :mod:`amqstomp.jms.link`).
        A session with consumers keeps its SENDs and ACKs in one transaction on
        the consumer socket, committed together. ``needs_consumer_socket``: the
        SEND names a temporary destination of this connection (which means
        another queue on another socket).
        """
        with self.lock:
            if not needs_consumer_socket:
                if self.send_tx is not None:
                    return self.send_tx
                if self.tx is None and not self.state.consumers and not self.state.deferred_close:
                    link = self.state.connection.producer_link()
                    if link is not self.state.connection.consumer_link:
                        self.state.check_open()
                        tx = "tx-%d.%d-%d" % (self.state.connection.number, self.state.number, next(self._numbers))
                        link.begin(tx)
                        self.send_tx = (link, tx)
                        return self.send_tx
            return self.state.connection.consumer_link, self.transaction_id()

    def drain_sends(self, timeout_s: Optional[float]) -> bool:
        """Wait (at most ``timeout_s`` seconds; None: no bound) for the receipts
        of the producers' asynchronous sends; False when some did not come."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        windows = self.state.producer_windows()
        link = self.send_tx[0] if self.send_tx is not None else self.state.connection.consumer_link
        ok = True
        for window in windows:
            ok = window.drain(link, deadline) and ok
        return ok

    def commit(self) -> None:
        """The session's ``commit()`` (see :meth:`Session.commit`), once it checked
        that the session is open and transacted.

        Raises:
            TransactionRolledBackError: the commit failed and was rolled back.
            TransactionInDoubtError: the COMMIT was written and its RECEIPT did
                not come.
            TransactionPartlyCommittedError: (a TransactionInDoubtError) the sends
                were committed on the producer socket, the acknowledgements not.

        With ``jms.sendTimeout``, all of it (the sends' receipts, COMMIT's, and the
        rollback of a commit that failed) within that time.
        """
        with self.state.connection.within(self.send_timeout_s()):
            self._commit()

    def _commit(self) -> None:
        state = self.state
        link = state.connection.consumer_link
        with self.lock:
            doomed = self.doomed
            if doomed is not None:  # the transaction lost part of itself with a socket: never reported committed
                self.rollback_after_failed_commit()
                raise TransactionRolledBackError("commit failed: %s; rolled back (the consumed messages come "
                                                 "again)" % doomed)
            if self.consumed_on_lost_socket():
                # their ACKs can never be written (the broker redelivers them): committing the rest
                # would report success for messages that come again (JMS: rolled back by failover)
                self.rollback_after_failed_commit()
                raise TransactionRolledBackError("commit failed: messages of this transaction came on a connection "
                                                 "lost since (failover) and will be redelivered; rolled back")
            if not self.drain_sends(self.left_s()):
                self.rollback_after_failed_commit()
                raise TransactionRolledBackError("the transaction's sends were not confirmed; rolled back")
            # the acknowledgement core's: one ACK each, naming the newest, covering the rest
            pending = [consumer for consumer, count in state.delivered_counts() if in_transaction_ack(count, 0, 1)]
            tx = self.tx
            send_tx = self.send_tx
            if send_tx is not None:
                try:
                    send_tx[0].end_transaction("COMMIT", send_tx[1], self.left_s())
                except TransactionInDoubtError:
                    self.send_tx = None
                    self.rollback_after_failed_commit()  # the consumer side (if any) did not commit
                    raise
                except StompException as exc:
                    self.send_tx = None
                    self.rollback_after_failed_commit()
                    raise TransactionRolledBackError("commit failed, transaction rolled back: %s" % exc) from exc
                self.send_tx = None
            consumed: List[Tuple[SessionState, Any, List[Delivery]]] = []  # what COMMIT settles
            try:
                if pending:
                    tx = self.transaction_id()
                    acks = state.cover_in_transaction(tx, pending)
                    for frame, count in acks:
                        headers = message_ack_headers(link, frame.headers)
                        headers["transaction"] = tx
                        if _observe.messages is not None:  # an instrumentation's settle span counts them
                            _observe.settling(count, frame.headers)
                        link.acknowledge("ACK", headers, frame.link_seq)
                if tx is not None:
                    if pending and self.consumed_on_lost_socket():  # lost while its ACKs were written
                        try:
                            link.end_transaction("ABORT", tx, None, wait=False)
                        except StompException:
                            pass  # its socket is gone too: the broker rolled it back
                        raise TransactionRolledBackError("messages of this transaction came on a connection lost "
                                                         "since (failover) and will be redelivered")
                    consumed = link.client.transaction_taken(tx, CONSUMED)  # COMMIT drops it from the table
                    link.end_transaction("COMMIT", tx, self.left_s())
            except TransactionInDoubtError as exc:
                # the broker has the outcome: if it committed, these messages are settled; if not, it
                # redelivers them (their socket is gone). Redelivering them here too would be wrong.
                self.tx = None
                self.forget_delivered()
                self.finish_deferred_closes()
                if send_tx is not None:
                    raise TransactionPartlyCommittedError(
                        "the transaction's sends were committed; the COMMIT of its acknowledgements got no receipt "
                        "(the consumed messages come again unless the broker committed it): %s" % exc,
                        acks_in_doubt=True) from exc
                raise
            except StompException as exc:
                self.tx = None
                if tx is not None and isinstance(exc, AcknowledgeInterruptedError):
                    try:  # the ACKs written before it are in the broker's transaction: end it
                        link.end_transaction("ABORT", tx, None, wait=False)
                    except StompException:
                        pass  # its socket is gone too: the broker rolled it back
                if tx is not None:  # not committed: what its ACKs took is the consumers' again
                    link.transaction_abandoned(tx)  # (failed before COMMIT: still in the table)
                    give_back(consumed)  # (the COMMIT failed: dropped from the table when it ended)
                self.rollback_local()
                self.finish_deferred_closes()
                if send_tx is not None:
                    raise TransactionPartlyCommittedError(
                        "the transaction's sends were committed, but its acknowledgements were rolled back (the "
                        "consumed messages come again; do not send again): %s" % exc) from exc
                raise TransactionRolledBackError("commit failed, transaction rolled back: %s" % exc) from exc
            self.tx = None
            settled: List[Any] = []
            for _, consumer, deliveries in consumed:
                if consumer not in settled:
                    settled.append(consumer)
                    consumer.subscriber.window_acked(cumulative=True)
                consumer.subscriber.settled(deliveries)  # committed: into the duplicate audit
            self.finish_deferred_closes()

    def rollback(self) -> None:
        """The session's ``rollback()`` (see :meth:`Session.rollback`), once it
        checked that the session is open and transacted; all of it within
        ``jms.sendTimeout`` (else ``jms.closeTimeout``)."""
        with self.state.connection.within(self.state.connection.request_timeout_s), self.lock:
            self.rollback_locked()

    def lost(self) -> None:
        """A send found the transaction's socket lost (failover): roll back as
        rollback() does (the broker has already), so the next operation begins
        a new transaction."""
        with self.lock:
            self.rollback_after_failed_commit()

    def holds(self, consumer: Any) -> bool:
        """Whether ``consumer`` has messages in the open transaction (handed over
        in it; covered by an ACK in it or not)."""
        if consumer.ledger.delivered:
            return True
        tx = self.tx
        return tx is not None and any(
            entry[1] is consumer
            for entry in self.state.connection.consumer_link.client.transaction_taken(tx, CONSUMED))

    def forget_delivered(self) -> None:
        """An in-doubt commit: the consumed messages are the broker's to settle
        or redeliver; none is redelivered locally."""
        self.state.take_delivered(also_deferred=True)

    def consumed_on_lost_socket(self) -> bool:
        """Whether a message consumed in the open transaction came on a consumer
        socket lost since (failover)."""
        lost = self.state.connection.is_from_lost_socket
        tx = self.tx
        if tx is not None and any(lost(d.frame) for _, _, deliveries in
                                  self.state.connection.consumer_link.client.transaction_taken(tx, CONSUMED)
                                  for d in deliveries):
            return True
        return self.state.delivered_any(lambda d: lost(d.frame))

    def rollback_after_failed_commit(self) -> None:
        """The rollback of a commit that failed: its TransactionRolledBackError is
        what the caller gets; a consumer that could not re-subscribe
        (``release_after_rollback``) is closed and reported to the exception
        listener."""
        try:
            self.rollback_locked()
        except StompException as exc:
            log.warning("%r: rollback after a failed commit: %s", self, exc)

    def rollback_locked(self) -> None:
        """Roll back (ABORT) what is open, then redeliver the consumed messages
        locally, or re-subscribe their consumers (``release_after_rollback``);
        call with :attr:`lock` held.

        Raises:
            StompException: ``release_after_rollback`` only: a consumer could not
                subscribe again (see :meth:`Session.rollback`).
        """
        state = self.state
        connection = state.connection
        self.doomed = None  # rolled back: the next transaction is a new one
        send_tx = self.send_tx
        if send_tx is not None:
            self.drain_sends(connection.close_wait_s())
            self.send_tx = None
            try:
                send_tx[0].end_transaction("ABORT", send_tx[1], connection.close_wait_s())
            except StompException as exc:
                log.warning("%r: ABORT failed: %s", self, exc)
        if self.tx is not None:
            self.drain_sends(connection.close_wait_s())
        self.abort_open()
        try:
            if connection.options.get("release_after_rollback") and not state.closing:
                self._release_after_rollback()
            else:
                self.rollback_local()
        finally:
            self.finish_deferred_closes()

    def abort_open(self) -> None:
        """ABORT the open transaction on the consumer socket, if any (waiting for its
        RECEIPT at most the connection's close wait): what its ACKs took goes back to
        its consumers' ``delivered`` (the transaction table's give-back), for the
        caller to redeliver. A failed ABORT is logged: the broker rolled it back with
        its socket, or does when the connection ends."""
        connection = self.state.connection
        with self.lock:
            tx, self.tx = self.tx, None
            if tx is None:
                return
            try:
                connection.consumer_link.end_transaction("ABORT", tx, connection.close_wait_s())
            except StompException as exc:
                log.warning("%r: ABORT failed: %s", self, exc)

    # ------------------------------------------------------------ CLIENT_ACKNOWLEDGE's "delivered" transaction

    def commit_delivered(self) -> bool:
        """CLIENT_ACKNOWLEDGE's ``acknowledge()`` when the session's private "delivered"
        transaction is open (its consumers ACKed in it every batch so that ActiveMQ
        Classic kept dispatching: :func:`amqstomp._core.ackmodes.acks_in_transaction`):
        ACK in it what is not covered yet, one cumulative ACK per consumer, then COMMIT
        and wait for its RECEIPT -- the commit path of a transacted session (ActiveMQ's
        ``StompSubscription.onStompCommit`` turns the transaction's DELIVERED acks into a
        standard ack). Within ``jms.sendTimeout``, as a commit.

        Returns:
            False when no such transaction is open (the caller writes the plain ACKs).

        Raises:
            AcknowledgeInterruptedError: not committed (a socket lost, an ACK or the
                COMMIT refused): the broker keeps the messages, and those of the open
                socket are redelivered locally, as after ``recover()``.
            AcknowledgeInDoubtError: the COMMIT was written and its RECEIPT did not come.
        """
        with self.lock:
            tx = self.tx
            if tx is None:
                return False
            count = sum(count for _, count in self.state.delivered_counts()) + sum(
                len(deliveries) for _, _, deliveries in
                self.state.connection.consumer_link.client.transaction_taken(tx, CONSUMED))
            try:
                self.commit()
            except TransactionInDoubtError as exc:
                raise AcknowledgeInDoubtError("acknowledge(): %s; %d message(s) in doubt" % (exc, count),
                                              count) from exc
            except TransactionRolledBackError as exc:
                raise AcknowledgeInterruptedError(
                    "acknowledge(): %d message(s) not acknowledged, they come again: %s" % (count, exc),
                    count) from exc
            return True

    def _release_after_rollback(self) -> None:
        """``release_after_rollback``: every consumer that got messages in the
        rolled-back transaction UNSUBSCRIBEs (ActiveMQ puts what it delivered and
        nobody acked back on the queue, for any consumer, marked redelivered) and
        SUBSCRIBEs again; the others keep their subscriptions. A failover during
        this rides through (the new subscription is replayed or sent on the new
        socket).

        Raises:
            StompException (BrokerError, ReceiptTimeout, ConnectionClosedException,
                NotConnectedException): a consumer could not subscribe again; it is
                closed (and the exception listener is told), the others were
                still re-subscribed. The first such error is raised.
        """
        release = [consumer for consumer, _ in self.state.take_delivered(also_deferred=True)
                   if not consumer.ledger.closed]
        failed: List[StompException] = []
        for consumer in release:
            try:
                consumer.resubscribe()
            except StompException as exc:
                log.warning("%r: re-subscribing %r after a rollback failed; it is closed: %s", self, consumer, exc)
                consumer.abandon()
                failed.append(exc)
                self.state.connection.report(exc)
        if failed:
            raise failed[0]

    def rollback_local(self) -> None:
        """Redeliver locally what the session's consumers delivered in the
        rolled-back transaction."""
        for consumer, deliveries in self.state.take_delivered(also_deferred=True):
            consumer.redeliver(deliveries)

    def finish_deferred_closes(self) -> None:
        """UNSUBSCRIBE the consumers closed during the transaction that ended."""
        for consumer in self.state.take_deferred_closes():
            consumer.subscriber.unsubscribe()

    def left_s(self) -> Optional[float]:
        """Seconds the commit under way may still wait (what is left of ``jms.sendTimeout``;
        None: no bound)."""
        return self.state.connection.wait_s(self.send_timeout_s())

    def send_timeout_s(self) -> Optional[float]:
        """``jms.sendTimeout`` in seconds (None: 0, no bound)."""
        ms = self.state.connection.options.get("send_timeout_ms") or 0
        return ms / 1000.0 if ms else None

