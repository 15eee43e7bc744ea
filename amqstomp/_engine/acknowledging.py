"""ACK/NACK on the socket that delivered the message: the acknowledging rules
of :class:`amqstomp._engine.client.Client`, for every API.

An ACK/NACK goes on the socket that delivered its message, or nowhere
(:class:`~amqstomp.exception.AcknowledgeInterruptedError`): ActiveMQ redelivers
a lost socket's message on the new socket under the same ``message-id``; with a
receipt, a written ACK whose receipt never came is in doubt
(:class:`~amqstomp.exception.AcknowledgeInDoubtError`). The stomp.py API names
what it acknowledges by its ACK identity, which the socket ledger
(:class:`amqstomp._engine.ledger.SocketLedger`) maps to the delivering socket; which
socket that allows and what is noted once it was written are the settlement core's
decisions (:func:`amqstomp._core.settle.identity_ack_socket`,
:func:`~amqstomp._core.settle.identity_ack_written`), applied here.
"""
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Mapping, Optional, Tuple

from ..exception import (
    AcknowledgeInDoubtError,
    AcknowledgeInterruptedError,
    BrokerError,
    ConnectionClosedException,
    NotConnectedException,
    TransactionRolledBackError,
)
from .._core.frames import ack_identity
from .._core.settle import (
    ACK_REFUSED_LOST,
    NOTE_ANSWERED,
    NOTE_COVERED,
    NOTE_SETTLED,
    NOTE_TOOK,
    identity_ack_socket,
    identity_ack_written,
)
from .ports import TransportPort

__all__ = ["Acknowledging"]

#: why an ACK/NACK refused while ``disconnect()`` ends its socket was not sent
_DISCONNECTING = ("disconnect() began on its connection: an ACK/NACK cannot follow its DISCONNECT; the broker "
                  "redelivers the message")


class Acknowledging:
    """The ACK/NACK rules of :class:`amqstomp._engine.client.Client` (see the
    module docstring); the Client holds the state they read."""

    transport: TransportPort
    ledger: Any
    reconnector: Any
    #: the socket :meth:`Client.hand_back` gave up for a planned move (0: none)
    handed_back_seq: int
    #: with planned moves: held while an ACK/NACK is checked and written, and while
    #: :meth:`Client.hand_back` writes its DISCONNECT (None: no planned moves)
    move_gate: Optional[Any]
    #: the socket open when the application last called ``disconnect()`` (0: never)
    disconnected_seq: int
    _dispatching: threading.local

    def transaction_socket(self, cmd: str, headers: Mapping[str, Any]) -> int:  # pragma: no cover - the Client's
        raise NotImplementedError

    def check_ack(self, command: str, ack_headers: Mapping[str, Any], transaction: Any,
                  subscriptions: Any, key: Optional[Tuple[str, ...]] = None) -> Any:  # pragma: no cover - the Client's
        raise NotImplementedError

    def acknowledge(self, cmd: str, headers: Mapping[str, Any], link_seq: int,
                    receipt_timeout_s: Optional[float] = None, closed: Optional[Callable[[], str]] = None) -> None:
        """Write an ACK/NACK of a message socket ``link_seq`` delivered (0: the
        open socket), on that socket only: it goes out even while a reconnect
        is still replaying later subscriptions, and never on another socket.
        With ``receipt_timeout_s`` (seconds) wait that long for the RECEIPT the
        ``headers`` ask for (None: do not wait).

        Raises:
            AcknowledgeInterruptedError: socket ``link_seq`` is gone (failover),
                or ``disconnect()`` is ending it (its DISCONNECT is written):
                nothing was written; the broker redelivers the message.
            AcknowledgeInDoubtError: written, and the socket was lost (or the
                wait passed) before the receipt came.
            TransactionRolledBackError: in a transaction whose socket is not
                the one that delivered the message.
            BrokerError: the broker answered ERROR (a receipt was asked for).
            ConnectionClosedException: the socket is gone and no failover is
                set (``closed()`` says why).
            AcknowledgeInterruptedError also: an ACK/NACK of the socket
                :meth:`hand_back` gave up (a planned move): with planned moves
                it is refused before it is written (never after the move's
                DISCONNECT); without, one the broker refused.
        """
        tx_seq = self.transaction_socket(cmd, headers) if "transaction" in headers else 0  # (0 outside one)
        if tx_seq and link_seq and tx_seq != link_seq:
            raise TransactionRolledBackError("%s not sent: the message came on another connection than its "
                                             "transaction's (failover); the broker redelivers it" % cmd)
        try:
            gate = self.move_gate
            if gate is None:
                future = self.transport.send_frame(cmd, headers, None, link_seq=link_seq)
            else:
                with gate:  # never after the DISCONNECT of a planned move (ActiveMQ: ERROR "Not connected.")
                    if self.handed_back_seq and (link_seq or self.transport.link_seq) == self.handed_back_seq:
                        raise AcknowledgeInterruptedError(
                            "%s not sent: its connection was handed back for a planned move to another broker "
                            "(priorityBackup, rebalanceInterval); the broker redelivers the message" % cmd)
                    future = self.transport.send_frame(cmd, headers, None, link_seq=link_seq)
        except AcknowledgeInterruptedError:
            raise
        except (NotConnectedException, ConnectionClosedException) as exc:
            if isinstance(exc, NotConnectedException) and self.transport.closing():
                raise AcknowledgeInterruptedError("%s not sent: %s" % (cmd, _DISCONNECTING)) from exc
            if self.reconnector is None or not self.reconnector.armed:
                if closed is None:
                    raise
                raise ConnectionClosedException("%s not sent: %s" % (cmd, closed())) from exc
            raise AcknowledgeInterruptedError(
                "%s not sent: the message came on a connection lost since (failover); the broker redelivers it"
                % cmd) from exc
        if future is None or receipt_timeout_s is None:
            return  # no receipt asked for, or the caller does not wait for it (stomp.py's ack(receipt=...))
        try:
            future.result(receipt_timeout_s)
        except FutureTimeout:
            raise AcknowledgeInDoubtError(
                "%s written, no receipt within %.3g s: the broker may or may not have applied it"
                % (cmd, receipt_timeout_s or 0.0)) from None
        except ConnectionClosedException as exc:
            raise AcknowledgeInDoubtError(
                "%s written, then its connection was lost before the receipt: the broker may or may not have "
                "applied it (if not, it redelivers the message)" % cmd) from exc
        except BrokerError as exc:  # ActiveMQ's "Not connected": written after the DISCONNECT of a move
            if link_seq and link_seq == self.handed_back_seq:
                raise AcknowledgeInterruptedError(
                    "%s not applied: written after its connection was handed back for a planned move to another "
                    "broker (priorityBackup, rebalanceInterval); the broker redelivers the message" % cmd) from exc
            raise

    def disconnect_refusal(self, command: str, ack_headers: Mapping[str, Any]) -> Optional[AcknowledgeInterruptedError]:
        """The refusal of the application's ACK/NACK (``command``) of the message
        ``ack_headers`` name once ``disconnect()`` began on the open socket (a
        listener still running as it ends: the subscriptions forgot what they
        held, and an ACK cannot follow the DISCONNECT, STOMP 1.2 "DISCONNECT"):
        AcknowledgeInterruptedError (nothing written; the broker redelivers the
        message); None otherwise."""
        if self.disconnected_seq and self.disconnected_seq == self.transport.link_seq:
            ack_id = ack_headers.get("id", ack_headers.get("message-id"))
            return AcknowledgeInterruptedError("%s for %s not sent: %s" % (command, ack_id, _DISCONNECTING))
        return None

    def acknowledge_identity(self, command: str, ack_headers: Mapping[str, Any], frame_headers: Mapping[str, Any],
                             subscriptions: Any) -> None:
        """The stomp.py API's ACK/NACK, which names a message by its ACK identity
        (not a message object): on the socket the ledger says delivered it, or
        nowhere; ``subscriptions.check_ack`` refuses one this session does not
        hold. An ``ack:client`` ACK is cumulative: one that cannot cover earlier
        messages of a lost socket says so after it was written.

        Which delivery an ACK is for, where several share its identity (STOMP
        1.0/1.1 after a failover: the lost socket's copy and the redelivered
        one, same ``message-id`` and ``subscription``), one rule
        (:meth:`amqstomp._engine.ledger.SocketLedger.socket_of`): an ACK made in a
        listener, on a socket's dispatching thread, answers that socket's
        delivery (the one that listener was handed); any other answers the
        oldest outstanding delivery, since the listeners were handed them in
        delivery order. So the first ACK of the identity after a failover
        answers the lost socket's copy and is refused with
        AcknowledgeInterruptedError, exactly as a STOMP 1.2 ACK of that copy's
        ``ack`` id is; the next one answers the redelivered copy and is
        written. Where identities never collide (1.2) it changes nothing.

        Raises:
            AcknowledgeInterruptedError: the message came on a socket lost since,
                or ``disconnect()`` began on the open socket (nothing written; the
                broker redelivers it), or a cumulative ACK was written but did
                not cover ``.count`` messages of a lost socket.
            UnknownMessageError: the session does not hold the message (nothing written).
        """
        ledger = self.ledger
        ack_id = ack_headers.get("id", ack_headers.get("message-id"))
        tx = frame_headers.get("transaction")
        key = ack_identity(self.transport.version, ack_headers)  # once, for the ledger and the check
        cumulative_sub = ledger.subscription_of(ack_headers, key)
        seq = ledger.socket_of(ack_headers, getattr(self._dispatching, "seq", 0), key)
        why = "the message came on a connection lost since (failover); the broker redelivers it"
        link_seq = identity_ack_socket(seq, self.transport)  # the core's rule: its socket, or nowhere
        refusal = self.disconnect_refusal(command, ack_headers)
        if refusal is not None:
            raise refusal
        if link_seq == ACK_REFUSED_LOST:
            if cumulative_sub is not None:
                ledger.answered(cumulative_sub, ack_headers, seq, None, key)
            raise AcknowledgeInterruptedError("%s for %s not sent: %s" % (command, ack_id, why))
        taken = self.check_ack(command, ack_headers, tx, subscriptions, key)
        try:
            self.acknowledge(command, frame_headers, link_seq)
        except AcknowledgeInterruptedError as exc:
            if cumulative_sub is not None and seq is not None:
                ledger.answered(cumulative_sub, ack_headers, seq, None, key)
            raise AcknowledgeInterruptedError("%s for %s not sent: %s" % (command, ack_id, why)) from exc
        todo = identity_ack_written(command, seq, cumulative_sub is not None, tx, taken is not None)
        if todo & NOTE_SETTLED:  # written: settled (ACK) or not (NACK), for the duplicate audit
            subscriptions.application_settled(command, taken)
        if todo & NOTE_TOOK:
            ledger.took(tx, ack_headers, seq, key)  # written in tx: ABORT gives it back (transaction_ended)
        if todo & NOTE_ANSWERED:
            ledger.answered(cumulative_sub, ack_headers, seq, tx, key)
        elif todo & NOTE_COVERED:
            missed = ledger.covered(cumulative_sub, ack_headers, seq, tx, key)
            if missed:  # ack:client: the ACK covers its own socket's deliveries only
                raise AcknowledgeInterruptedError(
                    "ACK for %s sent, but it does not cover %d message(s) handed over before it that came on a "
                    "connection lost since (failover); the broker redelivers them" % (ack_id, missed), missed)
