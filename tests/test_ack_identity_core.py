"""The stomp.py API's ACK-side rules as pure decisions of the settlement core
(amqstomp._core.settle: ``delivery_answered``, ``identity_ack_socket``,
``identity_ack_written``, ``not_covered``), driven in memory: no broker, no
threads, no sockets. The engine (``_engine/acknowledging.Acknowledging.acknowledge_identity``
and ``_engine/ledger.SocketLedger``) applies them; ``tests/test_settle_model.py``
drives that engine against a model.

The rules (STOMP 1.2 spec "ACK"; ActiveMQ Classic redelivers a lost socket's
unacknowledged messages on the new socket under the same ``message-id``):
* an ACK/NACK goes on the socket that delivered its message, or nowhere;
* of several deliveries of one identity (1.0/1.1 after a failover), an ACK made
  on a socket's dispatcher thread answers that socket's, any other the oldest;
* a cumulative ACK (``ack:client``) settles its own socket's deliveries only.
"""
from typing import Any, List, Tuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqstomp._core.settle import (
    ACK_REFUSED_LOST,
    NOTE_ANSWERED,
    NOTE_COVERED,
    NOTE_SETTLED,
    NOTE_TOOK,
    delivery_answered,
    identity_ack_socket,
    identity_ack_written,
    not_covered,
)
from conftest import OpenSocket

pytestmark = pytest.mark.timeout(60)


def test_an_ack_goes_on_the_socket_that_delivered_its_message_or_nowhere():
    links = OpenSocket(open_seq=2)
    assert identity_ack_socket(2, links) == 2
    assert identity_ack_socket(1, links) == ACK_REFUSED_LOST  # lost since: nothing written
    assert identity_ack_socket(None, links) == 0  # not noted by the ledger: the open socket's
    assert links.asked == [2, 1]  # the I/O is asked only about a noted delivery


def test_the_refusal_is_no_socket_number():
    assert ACK_REFUSED_LOST < 0


def test_of_two_copies_the_dispatcher_threads_ack_answers_its_own_sockets():
    # 1.1 after a failover: the lost socket 1's copy and the redelivered one of socket 2
    assert delivery_answered([1, 2], caller_seq=2) == 1
    assert delivery_answered([1, 2], caller_seq=1) == 0


def test_an_ack_from_another_thread_answers_the_oldest_delivery():
    assert delivery_answered([1, 2], caller_seq=0) == 0
    assert delivery_answered([1, 2], caller_seq=3) == 0  # a socket that delivered no copy


def test_one_delivery_is_the_one_answered_whatever_the_thread():
    assert delivery_answered([1], caller_seq=2) == 0


@given(seqs=st.lists(st.integers(1, 5), min_size=1, max_size=6), caller=st.integers(0, 6))
def test_the_delivery_answered_is_one_of_them_and_the_callers_when_it_has_one(seqs, caller):
    index = delivery_answered(seqs, caller)
    assert 0 <= index < len(seqs)
    if len(seqs) > 1 and caller in seqs:
        assert seqs[index] == caller
    else:
        assert index == 0


def test_the_first_ack_after_a_failover_is_refused_the_next_written():
    """The walk of the ledger's rule (1.0/1.1): both copies outstanding, ACKs made
    off the dispatcher thread: the first answers the lost copy (refused), the
    second the redelivered copy (written on the new socket)."""
    links = OpenSocket(open_seq=2)
    outstanding = [1, 2]
    first = outstanding.pop(delivery_answered(outstanding, 0))
    assert identity_ack_socket(first, links) == ACK_REFUSED_LOST
    second = outstanding.pop(delivery_answered(outstanding, 0))
    assert identity_ack_socket(second, links) == 2
    assert outstanding == []


@pytest.mark.parametrize("command, seq, cumulative, transaction, held, todo", [
    ("ACK", 2, False, None, True, NOTE_SETTLED),
    ("ACK", 2, False, None, False, 0),  # a message the session did not hold (no check): nothing to settle
    ("NACK", 2, False, None, True, NOTE_SETTLED),  # the audit tells ACK from NACK itself
    ("ACK", 2, False, "tx1", True, NOTE_TOOK),  # settled at COMMIT, given back at ABORT
    ("ACK", None, False, "tx1", True, 0),  # no delivery noted: nothing to give back
    ("ACK", 2, True, None, True, NOTE_SETTLED | NOTE_COVERED),
    ("NACK", 2, True, None, True, NOTE_SETTLED | NOTE_ANSWERED),
    ("ACK", 2, True, "tx1", False, NOTE_TOOK | NOTE_COVERED),
    ("NACK", 2, True, "tx1", False, NOTE_TOOK | NOTE_ANSWERED),
    ("ACK", None, True, None, True, NOTE_SETTLED),  # not noted: no hand-over order to change
])
def test_what_a_written_ack_leaves_to_note(command, seq, cumulative, transaction, held, todo):
    assert identity_ack_written(command, seq, cumulative, transaction, held) == todo


def test_the_note_flags_are_distinct_bits():
    flags = [NOTE_TOOK, NOTE_ANSWERED, NOTE_COVERED, NOTE_SETTLED]
    assert sorted(flags) == [1, 2, 4, 8]


def test_a_cumulative_ack_covers_its_own_sockets_deliveries_only():
    taken = [(("m1",), 1, "m1"), (("m2",), 1, "m2"), (("m3",), 2, "m3")]
    assert not_covered(taken, 2) == 2  # m1, m2 came on the lost socket 1
    assert not_covered(taken, 1) == 1


def test_a_lost_copy_with_its_redelivered_copy_covered_is_not_missed():
    # 1.1: m1 came on socket 1 (lost), again on socket 2; the ACK on 2 covers the copy of 2
    taken = [(("m1", "s"), 1, "m1"), (("m1", "s"), 2, "m1"), (("m2", "s"), 2, "m2")]
    assert not_covered(taken, 2) == 0


def test_nothing_taken_nothing_missed():
    assert not_covered([], 2) == 0


@given(st.lists(st.tuples(st.integers(1, 3), st.sampled_from("abcde")), max_size=12), st.integers(1, 3))
def test_only_other_sockets_messages_are_missed_and_a_copy_on_the_acks_socket_covers_them(entries, seq):
    taken: List[Tuple[Any, int, str]] = [((mid,), s, mid) for s, mid in entries]
    missed = not_covered(taken, seq)
    assert 0 <= missed <= sum(1 for s, _ in entries if s != seq)
    # the ACK's socket delivers a copy of every message: nothing is missed any more
    copies = taken + [((mid,), seq, mid) for _, mid in entries]
    assert not_covered(copies, seq) == 0
