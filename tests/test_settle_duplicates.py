"""Duplicate suppression (ActiveMQ's connection audit, issue 24): the pure core
(:mod:`amqstomp._core.duplicates`) in memory, and both APIs' drivers applying it
without a socket or thread (a recording wire stands for the transport)."""
from types import SimpleNamespace
from typing import List, Tuple

import pytest
import test_settle_model

from amqstomp._engine.client import Client
from amqstomp._core import duplicates as dup
from amqstomp.codec import Frame
from amqstomp._engine.ledger import SocketLedger
from amqstomp._engine.subscription import SubscriptionManager

pytestmark = pytest.mark.timeout(30)

QUEUE = "/queue/dups"


# ---------------------------------------------------------------- the core


def test_a_settled_id_is_a_duplicate_and_how_each_mode_settles_it() -> None:
    audit = dup.SettledAudit(8)
    audit.settled("ID:1")
    verdict = dup.duplicate
    assert verdict(audit, "ID:1", "auto", False, False, False) == dup.DUPLICATE_DROP  # the broker settled it
    assert verdict(audit, "ID:1", "client", False, False, False) == dup.DUPLICATE_CONSUMED  # amqstomp ACKs
    assert verdict(audit, "ID:1", "client-individual", True, True, False) == dup.DUPLICATE_ACK
    assert verdict(audit, "ID:1", "client", True, False, False) == dup.DUPLICATE_ACK  # nothing earlier held
    # ack:client with earlier deliveries outstanding: a cumulative ACK now would settle them too
    assert verdict(audit, "ID:1", "client", True, True, True) == dup.DUPLICATE_WITH_NEXT
    assert verdict(audit, "ID:1", "client", True, True, False) == dup.DUPLICATE_HAND_OVER
    assert verdict(None, "ID:1", "auto", False, False, False) == dup.NOT_DUPLICATE  # not checked


def test_only_settled_ids_are_audited_and_a_nack_or_rollback_takes_one_out() -> None:
    audit = dup.SettledAudit()
    # delivered, not settled (its socket lost before the ACK): handed over again when redelivered
    assert dup.duplicate(audit, "ID:delivered", "client-individual", True, False, False) == dup.NOT_DUPLICATE
    audit.settled("ID:acked")
    assert "ID:acked" in audit
    audit.forget("ID:acked")  # NACKed / rolled back / redelivered locally
    assert dup.duplicate(audit, "ID:acked", "client-individual", True, False, False) == dup.NOT_DUPLICATE
    audit.forget("ID:never")  # nothing to forget: no error
    audit.settled(None)  # a MESSAGE without a message-id is not audited
    assert len(audit) == 0


def test_the_audit_keeps_the_newest_depth_ids() -> None:
    audit = dup.SettledAudit(3)
    for n in range(1, 5):
        audit.settled("ID:%d" % n)
    assert len(audit) == 3 and "ID:1" not in audit and "ID:4" in audit
    audit.settled("ID:2")  # settled again: still the oldest (kept by when it was first settled)
    audit.settled("ID:5")
    assert "ID:2" not in audit and {"ID:3", "ID:4", "ID:5"} == {i for i in ("ID:3", "ID:4", "ID:5") if i in audit}
    audit.forget("ID:4")
    audit.settled("ID:4")  # forgotten, then settled again: kept no longer than its first slot
    assert "ID:4" in audit and len(audit) <= 3
    audit.settled("ID:6")  # the ring comes round to ID:4's first slot
    assert "ID:4" not in audit and "ID:6" in audit and len(audit) <= 3
    assert dup.SettledAudit().depth == dup.DEFAULT_AUDIT_DEPTH == 2048
    for bad in (0, -1, True, 1.5, "2048"):
        with pytest.raises(ValueError, match="audit depth must be an int >= 1"):
            dup.SettledAudit(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the drivers, in memory


_Wire = test_settle_model._Wire  # the drivers' part without a socket or thread, recording writes


def _message(n: int, ack_id: str, sub: str = "s") -> Frame:
    frame = Frame("MESSAGE", {"destination": QUEUE, "message-id": "ID:m-%d" % n, "subscription": sub,
                              "ack": ack_id}, b"body")
    frame.link_seq = 1
    return frame


def _stomppy(ack: str, optimize: bool = False, check: bool = True) -> Tuple[_Wire, SubscriptionManager, Client]:
    wire = _Wire()
    manager = SubscriptionManager(wire, track_acks=True, check_for_duplicates=check)  # type: ignore[arg-type]
    client = Client(wire, SocketLedger(wire), None, manager)  # type: ignore[arg-type]
    manager.prepare(QUEUE, "s", ack, {}, {"optimize_acknowledge": optimize})
    return wire, manager, client


def _deliver(manager: SubscriptionManager, client: Client, frame: Frame) -> bool:
    """The reader, then the dispatcher: True when the listeners get ``frame``."""
    manager.on_message(frame)
    handed = client.should_dispatch(frame)
    if handed:
        manager.on_consumed(frame)
    return handed


def _app_ack(manager: SubscriptionManager, wire: _Wire, frame: Frame, command: str = "ACK") -> None:
    """The stomp.py API's ack() without failover (BaseProtocol._acknowledge)."""
    ack = {"id": frame.headers["ack"]}
    taken = manager.check_ack(command, ack)
    wire.send_frame(command, ack)
    manager.application_settled(command, taken)


def test_stomppy_individual_a_settled_message_delivered_again_is_acked_not_handed_over() -> None:
    wire, manager, client = _stomppy("client-individual")
    first = _message(1, "a-1")
    assert _deliver(manager, client, first)
    _app_ack(manager, wire, first)
    wire.writes.clear()
    again = _message(1, "a-2")  # the broker's second delivery: same message-id, new ack id
    assert _deliver(manager, client, again) is False
    assert wire.writes == [("ACK", {"id": "a-2"}, 1)]  # so the broker drops it and frees the window
    assert manager.duplicates_suppressed == 1
    sub = manager.get("s")
    assert sub is not None and sub.window.consumed == sub.window.delivered == 2  # the buffer is not held
    with pytest.raises(Exception, match="no unacknowledged message"):
        manager.check_ack("ACK", {"id": "a-2"})  # not the application's to acknowledge


def test_stomppy_a_message_handed_over_but_not_acked_comes_again() -> None:
    """At-least-once: delivered (even handed over) but never acknowledged -- its socket lost,
    or its ACK interrupted -- the redelivery reaches the application."""
    wire, manager, client = _stomppy("client-individual")
    assert _deliver(manager, client, _message(1, "a-1"))
    assert _deliver(manager, client, _message(1, "a-2"))
    assert manager.duplicates_suppressed == 0 and wire.writes == []


def test_stomppy_a_nacked_message_comes_again() -> None:
    wire, manager, client = _stomppy("client-individual")
    first = _message(1, "a-1")
    assert _deliver(manager, client, first)
    _app_ack(manager, wire, first, "NACK")
    assert _deliver(manager, client, _message(1, "a-2"))


def test_stomppy_auto_and_optimized_suppress_without_their_own_ack() -> None:
    wire, manager, client = _stomppy("auto")
    assert _deliver(manager, client, _message(1, "a-1"))
    assert _deliver(manager, client, _message(1, "a-2")) is False
    assert wire.writes == []  # ack:auto: the broker settled it when it sent it
    wire, manager, client = _stomppy("client", optimize=True)
    assert _deliver(manager, client, _message(1, "a-1"))
    assert _deliver(manager, client, _message(1, "a-2")) is False
    sub = manager.get("s")
    assert sub is not None and sub.window.consumed == 2  # the batched ACK covers it


def test_stomppy_cumulative_ack_of_a_duplicate_only_when_nothing_earlier_is_held() -> None:
    wire, manager, client = _stomppy("client")
    first, held = _message(1, "a-1"), _message(2, "a-2")
    assert _deliver(manager, client, first)
    _app_ack(manager, wire, first)
    assert _deliver(manager, client, held)  # handed over, not acknowledged yet
    wire.writes.clear()
    # a cumulative ACK of the duplicate would settle "held" too: it is handed over after all
    assert _deliver(manager, client, _message(1, "a-3"))
    assert wire.writes == []
    _app_ack(manager, wire, held)
    _app_ack(manager, wire, _message(1, "a-3"))
    wire.writes.clear()
    assert _deliver(manager, client, _message(1, "a-4")) is False  # nothing held: its own ACK
    assert wire.writes == [("ACK", {"id": "a-4"}, 1)]


def test_stomppy_off_hands_every_delivery_over() -> None:
    wire, manager, client = _stomppy("auto", check=False)
    assert _deliver(manager, client, _message(1, "a-1"))
    assert _deliver(manager, client, _message(1, "a-2"))
    assert manager.get("s").settled is None  # type: ignore[union-attr]


def test_the_audit_is_per_queue_and_outlives_a_failover_replay() -> None:
    wire, manager, client = _stomppy("auto")
    manager.prepare(QUEUE, "t", "auto", {}, {})
    manager.prepare("/topic/x", "u", "auto", {}, {})
    one, two, topic = manager.get("s"), manager.get("t"), manager.get("u")
    assert one is not None and two is not None and topic is not None
    assert one.settled is two.settled and topic.settled is not one.settled  # a topic: each has a copy
    audit = one.settled
    renewed = {sub.id: sub for sub in manager.renew()}
    assert renewed["s"].settled is audit
    # a queue browser settles nothing: what it browses must not count as settled for the consumers
    manager.prepare(QUEUE, "b", "auto", {"browser": "true"}, {})
    assert manager.get("b").settled is None  # type: ignore[union-attr]


def test_jms_duplicate_verdicts_applied() -> None:
    """The JMS driver (Subscriber.duplicate): the same core verdicts; CLIENT_ACKNOWLEDGE
    with deliveries outstanding holds the duplicate with them (acknowledge() settles it)."""
    from amqstomp.jms._state import ConsumerLedger, Delivery
    from amqstomp.jms._subscriber import Subscriber

    wire = _Wire()
    manager = SubscriptionManager(wire, check_for_duplicates=True)  # type: ignore[arg-type]
    frame_headers, sub = manager.prepare(QUEUE, "s", "client", {}, {})
    acks: List[str] = []

    subscriber = object.__new__(Subscriber)
    subscriber.sub = sub
    subscriber.sub_id = "s"
    subscriber.consumer = "consumer"
    subscriber.ledger = ConsumerLedger()
    subscriber.state = test_settle_model._session_state()
    subscriber.link = SimpleNamespace(manager=manager)
    subscriber.send_ack = lambda frame, transaction=None: acks.append(frame.headers["ack"])  # type: ignore
    first = _message(1, "a-1")
    manager.on_message(first)
    assert not subscriber.duplicate(sub, Delivery(first, 1))  # not settled: handed over
    subscriber.ledger.delivered.append(Delivery(first, 1))
    subscriber.settled(subscriber.ledger.take_delivered())  # acknowledge() wrote its ACK
    held = _message(2, "a-2")
    manager.on_message(held)
    subscriber.ledger.delivered.append(Delivery(held, 1))  # handed over, not acknowledged
    again = _message(1, "a-3")
    manager.on_message(again)
    assert subscriber.duplicate(sub, Delivery(again, 1)) is True
    assert acks == [] and [d.frame for d in subscriber.ledger.delivered] == [held, again]
    subscriber.settled(subscriber.ledger.take_delivered())
    fourth = _message(1, "a-4")
    manager.on_message(fourth)
    assert subscriber.duplicate(sub, Delivery(fourth, 1)) is True and acks == ["a-4"]  # nothing held: ACK now
    assert manager.duplicates_suppressed == 2


def test_the_duplicate_options_are_checked_one_by_one() -> None:
    """Each API names the option that is wrong (a new user found one message for both
    keywords, and jms.auditDepth=0 silently turning off the audit just asked for)."""
    import amqstomp
    from amqstomp.exception import ConfigurationError
    from amqstomp.jms.options import resolve

    with pytest.raises(ConfigurationError, match=r"^check_for_duplicates must be True or False, got 'yes'"):
        amqstomp.Connection12([("127.0.0.1", 1)], check_for_duplicates="yes")
    for depth in (0, -1, True, "2048"):
        with pytest.raises(ConfigurationError, match=r"^audit_depth must be an int >= 1"):
            amqstomp.Connection12([("127.0.0.1", 1)], check_for_duplicates=True, audit_depth=depth)
    with pytest.raises(ConfigurationError, match=r"jms.checkForDuplicates=true needs jms.auditDepth >= 1"):
        resolve("stomp://127.0.0.1:1?jms.checkForDuplicates=true&jms.auditDepth=0", {})
    assert resolve("stomp://127.0.0.1:1?jms.auditDepth=0", {}).options["audit_depth"] == 0  # audits off: fine
