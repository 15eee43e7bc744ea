"""The JMS API's transactions pass the connection's one transaction table
(amqstomp._core.transactions), as the stomp.py API's do: a BEGIN of an open
transaction id and a COMMIT/ABORT of one the link never began (or ended) are
refused before anything is written, with an exception naming the id (ActiveMQ
would answer ERROR, "The transaction was already started" / "Invalid
transaction id", and close nothing the caller could see)."""
import uuid

import pytest

from amqstomp.jms import AUTO_ACKNOWLEDGE, ConnectionFactory, Queue, TextMessage
from amqstomp.jms.exceptions import DuplicateTransactionError, UnknownTransactionError

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]


def test_a_duplicate_begin_and_an_unknown_commit_or_abort_are_refused_naming_the_id(activemq):
    queue = Queue("jms-tx-guard-%s" % uuid.uuid4().hex[:8])
    with ConnectionFactory(activemq.url).create_connection() as conn:
        session = conn.create_session(transacted=True)
        consumer = session.create_consumer(queue)  # the session's transaction goes on the consumer socket
        producer = session.create_producer(queue)
        producer.send(TextMessage("in the transaction"))
        transaction = session._transaction
        tx = transaction.tx
        assert tx is not None
        link = conn._state.consumer_link
        with pytest.raises(DuplicateTransactionError, match=r"BEGIN of transaction '%s'.*already" % tx):
            link.begin(tx)
        with pytest.raises(UnknownTransactionError, match=r"COMMIT of transaction 'tx-none'.*did not begin"):
            link.end_transaction("COMMIT", "tx-none", 5.0)
        with pytest.raises(UnknownTransactionError, match=r"ABORT of transaction 'tx-none'"):
            link.end_transaction("ABORT", "tx-none", 5.0)
        # the refusals wrote nothing: the session's own transaction is intact and commits
        session.commit()
        conn.start()
        assert consumer.receive(5).text == "in the transaction"
        session.commit()
        # a committed transaction is ended: its id is unknown now, a BEGIN of it a new one
        with pytest.raises(UnknownTransactionError, match=r"COMMIT of transaction '%s'" % tx):
            link.end_transaction("COMMIT", tx, 5.0)
        link.begin(tx)
        link.end_transaction("ABORT", tx, 5.0)
        with pytest.raises(UnknownTransactionError, match=r"ABORT of transaction '%s'" % tx):
            link.end_transaction("ABORT", tx, 5.0)
        reader = conn.create_session(False, AUTO_ACKNOWLEDGE)
        assert reader.create_consumer(queue).receive(0.3) is None
