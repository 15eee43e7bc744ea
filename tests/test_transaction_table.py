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


def test_took_says_whether_it_noted_and_taken_reads_an_owners_entries():
    """took returns False for a transaction that is not open (the owner keeps what it
    would have given); taken is a copy of one owner's entries, in the order taken."""
    table = TransactionTable()
    assert table.took("t1", "consumed", ["d1"]) is False  # never begun
    assert table.took("t1", "consumed", []) is True  # nothing to note
    table.began("t1")
    assert table.took("t1", "consumed", ["d1"]) is True and table.took("t1", "ledger", ["m1"]) is True
    assert table.took("t1", "consumed", ["d2"]) is True
    copy = table.taken("t1", "consumed")
    assert copy == ["d1", "d2"] and table.taken("t1", "unacked") == [] and table.taken("t9", "consumed") == []
    copy.append("x")
    assert table.taken("t1", "consumed") == ["d1", "d2"]
    assert table.ended("t1", aborted=True) == {"consumed": ["d1", "d2"], "ledger": ["m1"]}
    assert table.taken("t1", "consumed") == [] and table.took("t1", "consumed", ["d3"]) is False


class _Transport:
    """What the engine Client and the SocketLedger read of a transport (no socket)."""

    link_seq = 1
    version = "1.2"

    def link_alive(self, seq):
        return seq == 1

    def set_observer(self, observer):
        pass

    def send_frame(self, *args, **kwargs):
        raise AssertionError("no frame is written here")


def _jms_transaction():
    """A JMS session's state and Transaction over the engine's Client and its one
    table; one consumer (its ledger). Returns (transaction, client, consumer)."""
    from types import SimpleNamespace

    from amqstomp._engine.client import Client
    from amqstomp._engine.ledger import SocketLedger
    from amqstomp.jms._state import ConsumerLedger, SessionState
    from amqstomp.jms._transaction import Transaction
    from amqstomp.jms.constants import SESSION_TRANSACTED

    transport = _Transport()
    client = Client(transport, SocketLedger(transport))
    connection = SimpleNamespace(consumer_link=SimpleNamespace(client=client))
    state = SessionState(connection, 1, SESSION_TRANSACTED, True)
    consumer = SimpleNamespace(ledger=ConsumerLedger())
    return Transaction(state), client, consumer


def _delivery(n):
    from amqstomp.codec import Frame
    from amqstomp.jms._state import Delivery

    return Delivery(Frame("MESSAGE", {"message-id": "m%d" % n, "ack": "a%d" % n, "subscription": "1"}, b""), n)


@pytest.mark.parametrize("aborted", [True, False])
def test_the_jms_consumers_acks_in_a_transaction_are_the_tables(aborted):
    """Issue 22: what a JMS transaction consumed lives in the one table (owner "consumed"),
    not beside it: an ACK in the transaction moves the consumer's pending deliveries into
    the table; ABORT gives them back in front of the ones handed over since, in their order;
    COMMIT drops them."""
    transaction, client, consumer = _jms_transaction()
    first, second, later = _delivery(1), _delivery(2), _delivery(3)
    ledger = consumer.ledger
    ledger.delivered = [first, second]
    client.transaction_began("tx-1")
    transaction.tx = "tx-1"
    # one ACK names the newest
    assert transaction.state.cover_in_transaction("tx-1", [consumer]) == [(second.frame, 2)]
    assert ledger.delivered == [] and transaction.holds(consumer)
    assert client.transactions.taken("tx-1", "consumed") == [(transaction.state, consumer, [first, second])]
    ledger.delivered.append(later)  # handed over since; not covered by an ACK yet
    client.transaction_ended("tx-1", aborted)
    assert ledger.delivered == ([first, second, later] if aborted else [later])
    assert "tx-1" not in client.transactions


def test_a_jms_ack_in_a_transaction_that_is_not_open_leaves_the_deliveries_pending():
    """cover_in_transaction: a transaction ended (or never begun) meanwhile notes nothing;
    the deliveries stay the consumer's (the next transaction's ACK covers them)."""
    transaction, client, consumer = _jms_transaction()
    pending = [_delivery(1)]
    consumer.ledger.delivered = list(pending)
    assert transaction.state.cover_in_transaction("tx-9", [consumer]) == []
    assert consumer.ledger.delivered == pending and client.transactions.taken("tx-9", "consumed") == []
    assert transaction.holds(consumer)  # handed over in the (next) transaction
    consumer.ledger.delivered = []
    assert not transaction.holds(consumer)
