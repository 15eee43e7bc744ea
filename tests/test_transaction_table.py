"""The one transaction table (amqstomp._core.transactions), in memory: no
socket, no thread. Sockets are numbers; ``alive`` says which one is open."""
import pytest

from amqstomp.exception import (
    BrokerError, ConnectionClosedException, DuplicateTransactionError, NotConnectedException,
    TransactionRolledBackError, UnknownTransactionError,
)
from amqstomp._core.transactions import TransactionTable, write_lost

pytestmark = pytest.mark.timeout(10)


class Sockets:
    """The open socket's number (0: none); ``alive`` is the transport's ``link_alive``."""

    def __init__(self, open_seq=1):
        self.open_seq = open_seq

    def alive(self, seq):
        return seq == self.open_seq


def test_begin_refuses_an_open_id_and_every_other_command_an_unknown_one():
    table = TransactionTable(Sockets().alive)
    assert table.refusal("BEGIN", "t1") is None
    for cmd in ("SEND", "ACK", "NACK", "COMMIT", "ABORT"):
        refusal = table.refusal(cmd, "t1")
        assert isinstance(refusal, UnknownTransactionError) and "'t1'" in str(refusal) and cmd in str(refusal)
    table.began("t1")
    refusal = table.refusal("BEGIN", "t1")
    assert isinstance(refusal, DuplicateTransactionError)
    assert "BEGIN of transaction 't1'" in str(refusal) and "already started" in str(refusal)
    for cmd in ("SEND", "ACK", "NACK", "COMMIT", "ABORT"):
        assert table.refusal(cmd, "t1") is None
    assert table.ended("t1", aborted=False) == {}
    assert "t1" not in table
    assert isinstance(table.refusal("COMMIT", "t1"), UnknownTransactionError)
    assert table.refusal("BEGIN", "t1") is None  # ended: the id may begin again


def test_a_transaction_belongs_to_the_socket_of_its_begin_and_is_stale_once_it_is_gone():
    sockets = Sockets(open_seq=1)
    table = TransactionTable(sockets.alive)
    table.began("t1", 1)
    table.began("t1")  # the facade's note after the engine's: the socket stays
    assert table.socket("t1") == 1 and not table.is_stale("t1")
    sockets.open_seq = 2  # failover: socket 1 lost, 2 open
    assert table.is_stale("t1")
    for cmd in ("SEND", "ACK", "NACK", "COMMIT"):
        refusal = table.refusal(cmd, "t1")
        assert isinstance(refusal, TransactionRolledBackError) and "t1" in str(refusal) and cmd in str(refusal)
    assert table.refusal("ABORT", "t1") is None  # nothing to abort; the write is dropped
    assert table.refusal("BEGIN", "t1") is None  # stale: the id may begin again...
    table.began("t1", 2)  # ...as a new transaction on the new socket
    assert table.socket("t1") == 2 and not table.is_stale("t1")
    assert isinstance(table.refusal("BEGIN", "t1"), DuplicateTransactionError)


def test_without_a_recorded_socket_a_transaction_is_never_stale():
    sockets = Sockets(open_seq=0)
    table = TransactionTable(sockets.alive)
    table.began("t1")
    assert table.socket("t1") == 0 and not table.is_stale("t1")
    assert table.refusal("COMMIT", "t1") is None


def test_abort_gives_back_what_the_acks_took_by_owner_in_order_and_commit_nothing():
    table = TransactionTable()
    table.began("t1")
    table.began("t2")
    table.took("t1", "ledger", [("message", ("m1",), 1)])
    table.took("t1", "unacked", [("m1", "sub", False)])
    table.took("t1", "ledger", [("message", ("m2",), 1)])
    table.took("t2", "ledger", [("message", ("m3",), 1)])
    table.took("t9", "ledger", [("message", ("m9",), 1)])  # not open: nothing would give it back
    assert "t9" not in table
    assert table.ended("t1", aborted=True) == {"ledger": [("message", ("m1",), 1), ("message", ("m2",), 1)],
                                               "unacked": [("m1", "sub", False)]}
    assert table.ended("t1", aborted=True) == {}  # ended once
    assert table.ended("t2", aborted=False) == {}  # COMMIT: what its ACKs took is final
    assert len(table) == 0


def test_clear_forgets_every_open_transaction():
    table = TransactionTable()
    for tx in ("a", "b", "c"):
        table.began(tx, 1)
    table.clear()
    assert len(table) == 0 and isinstance(table.refusal("COMMIT", "a"), UnknownTransactionError)


def test_the_oldest_open_transaction_is_forgotten_beyond_the_size():
    table = TransactionTable(size=2)
    for tx in ("a", "b", "c"):
        table.began(tx)
    assert "a" not in table and "b" in table and "c" in table


def test_a_frame_of_a_transaction_lost_with_its_socket_goes_on_no_other():
    """write_lost, the one rule both APIs' writes apply (Client.write, .request,
    the JMS producer window): a frame of a transaction whose socket is gone is
    refused (an ABORT dropped); a BEGIN, a frame outside a transaction, or
    another failure is the caller's."""
    for lost in (NotConnectedException("down"), ConnectionClosedException("closed")):
        for cmd in ("SEND", "ACK", "NACK", "COMMIT"):
            with pytest.raises(TransactionRolledBackError, match="transaction t1 was lost") as info:
                write_lost(cmd, "t1", lost)
            assert info.value.__cause__ is lost and cmd in str(info.value)
        assert write_lost("ABORT", "t1", lost) is True
        assert write_lost("BEGIN", "t1", lost) is False
        assert write_lost("SEND", None, lost) is False
    assert write_lost("SEND", "t1", BrokerError("refused")) is False
