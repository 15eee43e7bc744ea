"""Model-based tests (hypothesis stateful) of the bookkeeping that decides
where an ACK/NACK and a transaction's frames go when ``auto_reconnect``
replaces a lost socket: no broker, no threads.

What runs is the REAL code: :class:`amqstomp._engine.ledger.SocketLedger` and the
decisions of the engine's :class:`amqstomp._engine.client.Client` (``should_dispatch``
for the dispatcher) and of :class:`amqstomp.connection.BaseConnection` (``ack``/``nack`` through ``_ack_frame``, ``begin``,
``commit``, ``abort``) of a real ``amqstomp.Connection1x(auto_reconnect=True)``
whose transport is replaced by :class:`FakeTransport` (``version``,
``link_seq``, ``link_alive(seq)``, ``send_frame(..., link_seq=)`` that raises
NotConnectedException as the real one does, and records what it writes on
which socket). Only the ledger's ``size`` is chosen here (a new
``SocketLedger(fake, size)``).

The model broker is ActiveMQ Classic as DESIGN.md section 2 describes it: each
socket has its own deliveries; when a socket is lost, every unacknowledged
delivery of the client-ack subscription is redelivered on the next socket
with the SAME message-id, a NEW ``ack`` id (STOMP 1.2) and
``redelivered:true``; an ACK/NACK is applied only to a delivery of the socket
it is written on (1.2 by ``ack`` id; 1.1 message-id + subscription; 1.0
message-id), else it is a stray frame (ActiveMQ answers ERROR "Unexpected
ACK"); ``ack:client`` is cumulative (earlier deliveries of that socket too);
NACK settles one message (to the DLQ); a transaction's ACKs are applied only at
a COMMIT written on the socket where its BEGIN was, and a lost socket rolls
its transactions back; ABORT settles nothing (and redelivers nothing).

Actions (one per step, drawn from those possible in the state): produce (a new message on the queue); deliver (broker -> the client's
dispatch queue, the dispatcher perhaps right after); hand over (the
dispatcher, in arrival order: ``Client.should_dispatch``); ack/nack by the
application of any message it holds, in any order (an old copy after its
redelivered copy was handed over included), perhaps in a transaction (BEGIN
comes with its first ACK); commit or abort; socket loss, mostly with the
reconnect right after (socket numbers may jump: failed attempts use numbers
too); reconnect. Any write may come with a failover interleaving with it, just
before it (after the library's checks) or just after it: for ACK/NACK only in
the main machines (the library pins those to their socket), for BEGIN/COMMIT/
ABORT too in the xfail machine (see the reproducers).

Invariants:
* a queued MESSAGE is handed over iff its socket is alive (a lost socket's are
  dropped: the broker redelivers them);
* ack() that returns normally wrote exactly one frame, on the socket that
  delivered the copy it names, while that socket was the open one, and the
  broker applied it to that copy; ack() that raises AcknowledgeInterruptedError
  (or TransactionRolledBackError for a transaction of a lost socket) wrote
  nothing; no ACK/NACK/COMMIT/ABORT is ever a stray frame;
* STOMP 1.2: no ambiguity, each normal return settles exactly the copy the
  application named;
* STOMP 1.0/1.1 leave one ambiguity: an ACK names a message-id (+ subscription),
  which the lost copy and the redelivered one share, so when both copies were
  handed over and neither acked ("two live copies of one message-id") the ACK
  cannot say which one it means. The library promises (SocketLedger.socket_of,
  Client.acknowledge_identity) one rule: an ACK made on the thread that
  dispatches a socket's deliveries names that socket's copy (here the model's
  thread dispatches: the socket of the copy handed over last), any other the
  copy handed over FIRST that was not named by an earlier ack/nack; asserted
  here: the broker applies the ACK to exactly that copy. (An ack() from another
  thread after a failover names the lost copy first and raises
  AcknowledgeInterruptedError, as on 1.2; the next one settles the new copy.)
  ABORT gives back what its ACK/NACKs named: the application holds those
  messages again (ActiveMQ does not redispatch them) and may ack them.
* commit() that returns normally wrote COMMIT on the socket of the BEGIN and
  the broker applied its ACKs; one that raises TransactionRolledBackError
  wrote nothing; abort() settles nothing;
* a message whose ack()/commit() returned normally is settled at the broker
  and never redelivered; no message is settled that the application was never
  handed (no loss);
* the ledger never holds more than ``size`` identities.

Documented, not bugs: an identity the ledger has forgotten (more than
``size`` newer ones) is ACKed on whichever socket is open (SocketLedger's
docstring): such ACKs are only checked to go on the open socket, and what they
settle is exempt from the checks above (they may be stray, or on 1.0/1.1
settle the redelivered copy).

Out of scope: a loss between the write and the broker (the model broker
applies a frame the moment it is written; an ACK or COMMIT lost in the socket's
buffers makes the broker redeliver a message whose ack() returned normally:
at-least-once covers it, and JMS's receipts report it as in doubt); thread
interleavings other than the failover just before / after a write; the JMS
API's ACK paths (they key on ``frame.link_seq`` directly, see test_failover_settle.py).

The settlement core (``amqstomp._core.settle``, the last section): its
rules (hand-over, the lost-socket rule, what a failed delivery means, local
redelivery, poison) driven in memory, and each API's driver over the same
facts -- the stomp.py API's ``Client.should_dispatch`` and
``SubscriptionManager.on_failed``, the JMS API's ``ConnectionState.hands_over``,
``is_from_lost_socket`` and ``ConsumerCore.redeliver`` -- which must agree.

Sensitivity: ``test_the_model_catches_a_broken_library`` breaks the library in
a local copy (monkeypatch: the newest copy instead of the rule's, 1.2 keyed by
message-id, no eviction, transactions never stale, lost sockets' messages
dispatched, ACKs not pinned to their socket) and asserts that hypothesis finds
a counterexample (derandomized, no shrinking).
The ``test_reproducer_*`` tests are the bugs this model found, kept as
regression tests (fixed: transaction frames pinned to their socket; STOMP 1.0
id-less subscriptions refused under auto_reconnect).
"""
import itertools
import types
from collections import Counter, OrderedDict
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

import amqstomp
from amqstomp.codec import Frame
from amqstomp.exception import (
    AcknowledgeInterruptedError,
    ConfigurationError,
    NotConnectedException,
    TransactionRolledBackError,
)
from amqstomp._engine import client as engine_client
from amqstomp._engine.client import Client
from amqstomp._core import ackmodes, settle
from amqstomp._engine.ledger import SocketLedger
from amqstomp._core.transactions import TransactionTable

pytestmark = pytest.mark.timeout(120)

SUB = "1"
DEST = "/queue/settle.model"
CONNECTIONS = {"1.0": amqstomp.Connection10, "1.1": amqstomp.Connection11, "1.2": amqstomp.Connection12}


# the model's strategies, built once: a strategy built at every step costs more than the step
_BOOLEANS = st.booleans()
_MOSTLY_TRUE = st.sampled_from([True, True, False])
_MOSTLY_ACK = st.sampled_from(["ACK", "ACK", "NACK"])
_RACES = st.sampled_from([None, None, None, "before", "after"])
_BUILT: Dict[Any, Any] = {}


def _sampled(values: Tuple[Any, ...]) -> Any:
    """``st.sampled_from(values)``, built once per tuple."""
    strategy = _BUILT.get(values)
    if strategy is None:
        strategy = _BUILT[values] = st.sampled_from(values)
    return strategy


def _integers(low: int, high: int) -> Any:
    """``st.integers(low, high)``, built once per bounds."""
    key = ("integers", low, high)
    strategy = _BUILT.get(key)
    if strategy is None:
        strategy = _BUILT[key] = st.integers(low, high)
    return strategy


class ModelViolation(AssertionError):
    """The library broke one of the promises the model checks."""


def check(condition: Any, message: str, *args: Any) -> None:
    if not condition:
        raise ModelViolation(message % args if args else message)


# --------------------------------------------------------------------------- the broker's side


class Delivery:
    """One MESSAGE frame the broker sent: a copy of a message on one socket."""

    __slots__ = ("n", "message_id", "sock", "ack_id", "redelivered", "state", "settled_by", "handed")

    def __init__(self, n: int, message_id: str, sock: int, ack_id: str, redelivered: bool) -> None:
        self.n = n  # dispatch order, over all sockets
        self.message_id = message_id
        self.sock = sock
        self.ack_id = ack_id
        self.redelivered = redelivered
        self.state = "pending"  # -> "settled" (ACK/NACK applied) | "lost" (its socket died first)
        self.settled_by: Optional[Write] = None
        self.handed = False  # the application had it

    def __repr__(self) -> str:
        return "<copy %s of %s on socket %d, %s%s>" % (self.ack_id, self.message_id, self.sock, self.state,
                                                       ", handed over" if self.handed else "")


class Write:
    """A frame the fake transport wrote, and what the model broker made of it."""

    __slots__ = ("sock", "cmd", "headers", "matched", "stray", "redundant", "fallback")

    def __init__(self, sock: int, cmd: str, headers: Dict[str, str]) -> None:
        self.sock = sock
        self.cmd = cmd
        self.headers = headers
        self.matched: Optional[Delivery] = None  # the delivery an ACK/NACK named on its socket
        self.stray: Optional[str] = None  # why ActiveMQ would answer ERROR
        self.redundant = False  # named a delivery settled already
        self.fallback = False  # an ACK of an identity the ledger had forgotten (documented)

    def __repr__(self) -> str:
        return "<%s on socket %d %r%s>" % (self.cmd, self.sock, self.headers,
                                          " STRAY: %s" % self.stray if self.stray else "")


class ModelBroker:
    """ActiveMQ Classic's side of one client-ack subscription (module docstring)."""

    def __init__(self, version: str, cumulative: bool, message_ids: List[str]) -> None:
        self.version = version
        self.cumulative = cumulative
        self.queued = list(message_ids)  # waiting for dispatch; redeliveries go first
        self.redelivered: Set[str] = set()
        self.deliveries: List[Delivery] = []
        # transaction -> (socket of its BEGIN, [(deliveries its ACK covers, the ACK)])
        self.transactions: Dict[str, Tuple[int, List[Tuple[List[Delivery], Write]]]] = {}
        self.settled: Dict[str, Delivery] = {}  # message-id -> the delivery whose settlement removed it
        self._ack_ids = itertools.count(1)

    def dispatch(self, message_id: str, sock: int) -> Delivery:
        self.queued.remove(message_id)
        delivery = Delivery(len(self.deliveries), message_id, sock, "ack:%d:%d" % (sock, next(self._ack_ids)),
                            message_id in self.redelivered)
        self.deliveries.append(delivery)
        return delivery

    def _named(self, sock: int, headers: Dict[str, str]) -> Optional[Delivery]:
        """The delivery of socket ``sock`` an ACK/NACK with ``headers`` names (STOMP 1.2 spec "ACK")."""
        if self.version == "1.2":
            found = [d for d in self.deliveries if d.sock == sock and d.ack_id == headers.get("id")]
        elif self.version == "1.1":
            found = [d for d in self.deliveries if d.sock == sock and d.message_id == headers.get("message-id")
                     and headers.get("subscription") == SUB]
        else:
            found = [d for d in self.deliveries if d.sock == sock and d.message_id == headers.get("message-id")]
        assert len(found) <= 1, "model: a message is dispatched at most once per socket"
        return found[0] if found else None

    def _covered(self, delivery: Delivery, cmd: str) -> List[Delivery]:
        if self.cumulative and cmd == "ACK":  # ack:client acks every earlier delivery of the socket too
            return [d for d in self.deliveries
                    if d.sock == delivery.sock and d.n <= delivery.n and d.state == "pending"]
        return [delivery]

    def _settle(self, deliveries: List[Delivery], write: Write) -> None:
        for d in deliveries:
            if d.state == "pending":
                d.state = "settled"
                d.settled_by = write
                self.settled[d.message_id] = d

    def receive(self, write: Write) -> None:
        """A frame written on socket ``write.sock`` (applied at once: see 'Out of scope')."""
        cmd, headers, sock = write.cmd, write.headers, write.sock
        tx = headers.get("transaction", "")
        if cmd in ("ACK", "NACK"):
            delivery = write.matched = self._named(sock, headers)
            if delivery is None:
                write.stray = "no delivery of that identity on socket %d" % sock
                return
            if delivery.state != "pending":
                write.redundant = True  # ActiveMQ: ERROR "Unexpected ACK"; the message is settled already
                return
            if tx:
                entry = self.transactions.get(tx)
                if entry is None or entry[0] != sock:
                    write.stray = "transaction %s unknown on socket %d" % (tx, sock)
                    return
                entry[1].append((self._covered(delivery, cmd), write))
                return
            self._settle(self._covered(delivery, cmd), write)
        elif cmd == "BEGIN":
            self.transactions[tx] = (sock, [])
        elif cmd in ("COMMIT", "ABORT"):
            entry = self.transactions.get(tx)
            if entry is None or entry[0] != sock:
                write.stray = "transaction %s unknown on socket %d" % (tx, sock)
                return
            del self.transactions[tx]
            if cmd == "COMMIT":
                for covered, ack in entry[1]:
                    self._settle(covered, ack)

    def lose(self, sock: int) -> None:
        """Socket ``sock`` ended: its unacked deliveries come again on the next one, its
        transactions are rolled back."""
        for d in reversed(self.deliveries):
            if d.sock == sock and d.state == "pending":
                d.state = "lost"
                self.queued.insert(0, d.message_id)
                self.redelivered.add(d.message_id)
        for tx in [tx for tx, entry in self.transactions.items() if entry[0] == sock]:
            del self.transactions[tx]


# --------------------------------------------------------------------------- the client's wire


class FakeTransport:
    """What BaseConnection and SocketLedger use of a Transport, without a socket.

    ``interleave`` = (when, commands, fn): ``fn()`` (a failover) runs once, just
    before or just after the next write of one of ``commands``, as the reader /
    failover threads may between the library's checks and its write."""

    def __init__(self, version: str, broker: ModelBroker) -> None:
        self.version = version
        self.broker = broker
        self.link_seq = 1
        self.open = True
        self.current_host_and_port = ("model-broker", 61613)  # (the failover layer notes where it is)
        self.writes: List[Write] = []
        self.interleave: Optional[Tuple[str, Tuple[str, ...], Callable[[], None]]] = None
        self.hooked = False  # no stomp.py transport hook replaced, and no listener's on_send:
        self.dispatch = types.SimpleNamespace(on_send=None)  # the facade's direct send path

    def link_alive(self, seq: int) -> bool:
        return self.open and seq == self.link_seq

    def set_observer(self, observer: Any) -> None:
        self.observer = observer

    def is_open(self) -> bool:
        return self.open

    def is_connected(self) -> bool:
        return self.open

    def closing(self) -> bool:
        """The model never calls disconnect(): no socket of its is ever ending by our DISCONNECT."""
        return False

    def connected_link_seq(self) -> int:
        return self.link_seq if self.open else 0

    def own_receipt(self, receipt_id: str) -> None:
        """The library's own receipts reach no listener; the model has none."""

    def send_frame(self, cmd: str, headers: Optional[Dict[str, Any]] = None, body: Any = None,
                   write_timeout: Optional[float] = None, defer: bool = False, head: Any = None,
                   link_seq: int = 0) -> None:
        hook = None
        if self.interleave is not None and cmd in self.interleave[1]:
            hook, self.interleave = self.interleave, None
        if hook is not None and hook[0] == "before":
            hook[2]()
        if not self.open:
            raise NotConnectedException("not connected (no open socket)")
        if link_seq and link_seq != self.link_seq:
            raise NotConnectedException("%s not sent: socket %d was lost (socket %d is open now)"
                                        % (cmd, link_seq, self.link_seq))
        write = Write(self.link_seq, cmd, {k: str(v) for k, v in (headers or {}).items() if v is not None})
        self.writes.append(write)
        self.broker.receive(write)
        if hook is not None and hook[0] == "after":
            hook[2]()
        return None


# --------------------------------------------------------------------------- the model


class SettleModel(RuleBasedStateMachine):
    """One connection, one client-ack subscription, a few messages (module docstring)."""

    VERSION = "1.2"
    #: frames a failover may interleave with; the library pins ACK/NACK to their socket
    RACY: Tuple[str, ...] = ("ACK", "NACK")
    TRANSPORT = FakeTransport

    # ----------------------------------------------------------------- set-up

    @initialize(mode=st.sampled_from(["client-individual", "client"]), size=st.sampled_from([2, 3, 64]),
                messages=st.sampled_from([1, 2, 3, 5]))
    def setup(self, mode: str, size: int, messages: int) -> None:
        self._setup(mode, size, messages)

    def _setup(self, mode: str = "client-individual", size: int = 64, messages: int = 3) -> None:
        self.mode = mode
        self.size = size
        self._message_ids = itertools.count(messages)
        self.broker = ModelBroker(self.VERSION, mode == "client",
                                  ["ID:model-1:1:1:1:%d" % i for i in range(messages)])
        self.transport = self.TRANSPORT(self.VERSION, self.broker)
        conn = CONNECTIONS[self.VERSION](auto_reconnect=True)
        conn.transport = self.transport  # type: ignore[assignment]
        conn._ledger = SocketLedger(self.transport, size=size)
        assert conn.reconnector is not None
        conn.reconnector.transport = self.transport
        conn._client = Client(self.transport, conn._ledger, conn.reconnector,
                              conn.subscriptions)  # the engine's rules over the fakes
        conn.reconnector.arm()  # no thread until a loss is reported, which the fake never does
        # MESSAGEs reach the engine at Client.should_dispatch here, never the manager's reader path, so its
        # check of unknown ids (check_ack; tested against the broker in test_guards) is off
        conn.subscriptions._unacked_complete = False
        conn.subscribe(DEST, id=SUB, ack=mode)
        self.conn = conn
        self.inbox: List[Tuple[Frame, Delivery]] = []  # delivered, waiting for the dispatcher
        self.held: List[Tuple[Frame, Delivery]] = []  # handed over, not acked by the application
        # the ledger's documented policy: identity -> copies handed over and not named yet
        # (oldest identity forgotten first beyond ``size``)
        self.promised: "OrderedDict[Tuple[str, ...], List[Delivery]]" = OrderedDict()
        self.app_settled: Dict[str, str] = {}  # message-id -> how the application settled it
        self.tx: Optional[str] = None
        self.tx_sock = 0  # where the model saw its BEGIN written
        self.tx_acks: List[Tuple[Delivery, Write]] = []
        self.tx_held: List[Tuple[Frame, Delivery]] = []  # what the transaction's ACKs took from held
        self.dispatching_sock = 0  # the socket of the last copy handed over (this thread dispatches)
        self._tx_ids = itertools.count(1)
        self.checked = 0  # writes checked for stray frames
        self.stats: Counter = Counter()

    def identity(self, d: Delivery) -> Tuple[str, ...]:
        """What an ACK names (DESIGN.md section 2)."""
        if self.VERSION == "1.2":
            return (d.ack_id,)
        if self.VERSION == "1.1":
            return (d.message_id, SUB)
        return (d.message_id,)

    # ----------------------------------------------------------------- the one rule

    def enabled(self) -> Tuple[str, ...]:
        """The names of the actions possible in this state, in a fixed order (never none:
        with the socket open, ``deliver`` or ``produce``; without, ``reconnect``)."""
        open_, queued = self.transport.open, self.broker.queued
        return tuple(name for name, possible in (
            ("deliver", open_ and bool(queued)),
            ("produce", len(queued) < 3),
            ("lose_socket", open_ and bool(self.inbox or self.held or self.tx is not None)),
            ("reconnect", not open_),
            ("hand_over", bool(self.inbox)),
            ("ack", bool(self.held)),
            ("end_transaction", self.tx is not None),
        ) if possible)

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        """One action drawn from those possible now: built from the state, so every drawn
        step is valid. (Seven rules behind preconditions made hypothesis filter: its
        feature flags often disabled every rule possible in the state, and that test case
        was thrown away.)"""
        getattr(self, data.draw(_sampled(self.enabled()), label="action"))(data)

    # ----------------------------------------------------------------- the broker and the wire

    def deliver(self, data: st.DataObject) -> None:
        """The broker dispatches one message (a redelivered one first, mostly), and
        the dispatcher may hand the queue over at once."""
        queued = self.broker.queued
        self._deliver(data.draw(_sampled(tuple(queued[:1] * 2 + queued)), label="message"))
        if data.draw(_BOOLEANS, label="dispatcher runs"):
            while self.inbox:
                self._hand_over()

    def produce(self, data: st.DataObject) -> None:
        """A producer sends a new message to the queue."""
        self.broker.queued.append("ID:model-1:1:1:1:%d" % next(self._message_ids))

    def _deliver(self, message_id: str) -> Delivery:
        check(message_id not in self.app_settled, "%s was settled (%s) and is delivered again",
              message_id, self.app_settled.get(message_id))
        d = self.broker.dispatch(message_id, self.transport.link_seq)
        headers = {"destination": DEST, "message-id": message_id, "subscription": SUB}
        if self.VERSION == "1.2":
            headers["ack"] = d.ack_id
        if d.redelivered:
            headers["redelivered"] = "true"
        frame = Frame("MESSAGE", headers, b"body")
        frame.link_seq = d.sock
        self.inbox.append((frame, d))
        return d

    def lose_socket(self, data: st.DataObject) -> None:
        """The socket ends; mostly the new one is there before the application acts again."""
        reconnect = data.draw(_MOSTLY_TRUE, label="reconnect")
        failed_attempts = data.draw(_integers(0, 2), label="failed attempts")
        self._lose()
        if reconnect:
            self._reconnect(failed_attempts)

    def _lose(self) -> None:
        if self.transport.open:
            self.transport.open = False
            self.broker.lose(self.transport.link_seq)
            self.stats["losses"] += 1

    def reconnect(self, data: st.DataObject) -> None:
        self._reconnect(data.draw(_integers(0, 2), label="failed attempts"))

    def _reconnect(self, failed_attempts: int = 0) -> None:
        self.transport.link_seq += 1 + failed_attempts
        self.transport.open = True

    def _failover(self) -> None:
        self._lose()
        self._reconnect()
        self.stats["raced failovers"] += 1

    def _race(self, when: str, cmd: str) -> None:
        self.transport.interleave = (when, (cmd,), self._failover)

    def _maybe_race(self, data: st.DataObject, cmd: str) -> None:
        """Perhaps a failover replaces the socket just before / just after the next
        ``cmd`` write (commands in RACY only)."""
        self.transport.interleave = None  # one armed for a write that did not happen is moot
        if self.transport.open and cmd in self.RACY:
            race = data.draw(_RACES, label="failover races " + cmd)
            if race is not None:
                self._race(race, cmd)

    # ----------------------------------------------------------------- the dispatcher

    def hand_over(self, data: st.DataObject) -> None:
        """The dispatcher takes one or more queued MESSAGEs, in arrival order."""
        for _ in range(data.draw(_integers(1, len(self.inbox)), label="frames")):
            self._hand_over()

    def _hand_over(self) -> bool:
        frame, d = self.inbox.pop(0)
        alive = self.transport.link_alive(d.sock)
        handed = self.conn._client.should_dispatch(frame)
        check(handed == alive, "%r: handed over=%s while its socket alive=%s (open socket %d)",
              d, handed, alive, self.transport.link_seq)
        if handed:
            d.handed = True
            self.dispatching_sock = d.sock
            self.held.append((frame, d))
            key = self.identity(d)
            copies = self.promised.get(key)
            if copies is None:
                self.promised[key] = [d]
                while len(self.promised) > self.size:
                    self.promised.popitem(last=False)
            else:
                copies.append(d)
        else:
            self.stats["dropped"] += 1
        return handed

    # ----------------------------------------------------------------- the application

    def ack(self, data: st.DataObject) -> None:
        """The application ACKs/NACKs a message it holds (any of them), perhaps in the
        open transaction, perhaps while a failover replaces the socket just before or
        just after the write."""
        index = data.draw(_integers(0, len(self.held) - 1), label="held message")
        cmd = "ACK" if self.VERSION == "1.0" else data.draw(_MOSTLY_ACK, label="cmd")
        in_tx = (self.tx is not None or self.transport.open) and data.draw(_BOOLEANS, label="in a transaction")
        if in_tx and self.tx is None:
            self._maybe_race(data, "BEGIN")
            self._begin()
        self._maybe_race(data, cmd)
        self._ack(index, cmd, in_tx)

    def _ack(self, index: int, cmd: str = "ACK", in_tx: bool = False) -> str:
        frame, named = self.held.pop(index)
        tx = self.tx if in_tx else None
        transport = self.transport
        # what the library promises, decided before the call
        stale_tx = tx is not None and not transport.link_alive(self.tx_sock)
        copy: Optional[Delivery] = None
        if not stale_tx:  # the ledger is consulted (and forgets the copy) only past the transaction check
            key = self.identity(named)
            copies = self.promised.get(key)
            if copies:
                # the ledger's rule: the copy of the caller's dispatcher socket, else the oldest
                mine = [i for i, c in enumerate(copies) if c.sock == self.dispatching_sock]
                copy = copies.pop(mine[0] if mine and len(copies) > 1 else 0)
                if not copies:
                    del self.promised[key]
        racing = transport.interleave is not None and cmd in transport.interleave[1]
        race_before = racing and transport.interleave is not None and transport.interleave[0] == "before"
        sock_at_call = transport.link_seq
        open_at_call = transport.open
        before = len(transport.writes)

        headers = frame.headers
        call = self.conn.ack if cmd == "ACK" else self.conn.nack  # type: ignore[attr-defined]
        try:
            if self.VERSION == "1.2":
                call(headers["ack"], transaction=tx)
            elif self.VERSION == "1.1":
                call(headers["message-id"], headers["subscription"], transaction=tx)
            else:
                call(headers["message-id"], transaction=tx)
            outcome = "ok"
        except AcknowledgeInterruptedError as exc:
            outcome = "interrupted"
            if "sent, but" in str(exc):  # ack:client: written; earlier messages of a lost socket not covered
                check(self.mode == "client" and cmd == "ACK" and exc.count > 0,
                      "%s of %r: a partial AcknowledgeInterruptedError outside a cumulative ACK: %s", cmd, named, exc)
                lost_before = [d for d in self.broker.deliveries
                               if d.handed and d.sock != transport.link_seq and d.state == "lost"]
                check(bool(lost_before), "%s of %r said %d earlier messages of a lost socket were not covered, "
                      "the model holds none", cmd, named, exc.count)
                self.stats["cumulative ACK not covering a lost socket's messages"] += 1
                outcome = "ok"
        except TransactionRolledBackError:
            outcome = "rolled back"
        new = transport.writes[before:]
        self.stats["%s %s" % (cmd, outcome)] += 1
        if any(d.handed and d.n > named.n and d.message_id == named.message_id for d in self.broker.deliveries):
            self.stats["%s of a copy after a newer copy was handed over: %s" % (cmd, outcome)] += 1

        if stale_tx:
            check(outcome == "rolled back" and not new,
                  "%s of %r in transaction %s of lost socket %d: %s, wrote %r", cmd, named, tx, self.tx_sock,
                  outcome, new)
            return outcome
        if outcome != "ok":
            check(outcome == "interrupted", "%s of %r raised TransactionRolledBackError, its transaction %s "
                  "is on the open socket %d", cmd, named, tx, self.tx_sock)
            check(not new, "%s of %r raised AcknowledgeInterruptedError but wrote %r", cmd, named, new)
            if copy is None:
                check(not open_at_call, "%s of forgotten %r interrupted while socket %d was open",
                      cmd, named, sock_at_call)
            else:
                check(not (open_at_call and copy.sock == sock_at_call) or race_before,
                      "%s of %r interrupted, though %r came on the open socket %d", cmd, named, copy, sock_at_call)
            return outcome
        check(len(new) == 1 and new[0].cmd == cmd, "%s of %r returned normally and wrote %r", cmd, named, new)
        write = new[0]
        if copy is None:  # the ledger forgot it (documented): written on the open socket
            write.fallback = True
            self.stats["forgotten identity"] += 1
            check(racing or (open_at_call and write.sock == sock_at_call),
                  "%s of forgotten %r written on socket %d, not the open one", cmd, named, write.sock)
            return outcome
        check(not race_before, "%s of %r returned normally though its socket %d was lost just before the write "
              "(written: %r)", cmd, named, copy.sock, write)
        check(write.sock == copy.sock, "%s of %r written on socket %d, not on socket %d that delivered it",
              cmd, copy, write.sock, copy.sock)
        check(open_at_call and copy.sock == sock_at_call,
              "%s of %r returned normally, its socket %d was not the open one", cmd, copy, copy.sock)
        check(write.stray is None and write.matched is copy,
              "%s of %r: the broker applied it to %r (%s)", cmd, copy, write.matched, write.stray)
        if self.VERSION == "1.2":
            check(copy is named, "1.2: %s of %r settled another copy %r", cmd, named, copy)
        elif copy is not named:
            self.stats["1.0/1.1 ambiguity: named another copy than the one held"] += 1
        if write.redundant:
            earlier = copy.settled_by
            check(earlier is not None and (self.mode == "client" or earlier.fallback),
                  "%s of %r: that copy was settled already by %r", cmd, copy, earlier)
        if tx is None:
            check(copy.state == "settled", "%s of %r returned normally, the broker did not settle it", cmd, copy)
            self.app_settled.setdefault(copy.message_id, "%s on socket %d" % (cmd, write.sock))
        else:
            self.tx_acks.append((copy, write))
            self.tx_held.append((frame, named))
        return outcome

    def end_transaction(self, data: st.DataObject) -> None:
        """COMMIT the open transaction (BEGIN came with its first ACK), or ABORT it."""
        commit = data.draw(_MOSTLY_TRUE, label="commit")
        self._maybe_race(data, "COMMIT" if commit else "ABORT")
        if commit:
            self._commit()
        else:
            self._abort()

    def _begin(self) -> None:
        tx = "tx-%d" % next(self._tx_ids)
        before = len(self.transport.writes)
        self.conn.begin(tx)
        new = self.transport.writes[before:]
        check(len(new) == 1 and new[0].cmd == "BEGIN", "begin wrote %r", new)
        self.tx, self.tx_sock, self.tx_acks, self.tx_held = tx, new[0].sock, [], []

    def _commit(self) -> str:
        tx, sock, acks = self.tx, self.tx_sock, self.tx_acks
        self.tx, self.tx_acks = None, []
        alive = self.transport.link_alive(sock)
        racing = self.transport.interleave is not None and "COMMIT" in self.transport.interleave[1]
        before = len(self.transport.writes)
        try:
            self.conn.commit(tx)
            outcome = "ok"
        except TransactionRolledBackError:
            outcome = "rolled back"
        new = self.transport.writes[before:]
        self.stats["COMMIT %s" % outcome] += 1
        if outcome == "rolled back":
            check(not alive or racing, "commit of %s raised TransactionRolledBackError, its socket %d is open",
                  tx, sock)
            check(not new, "commit of %s raised TransactionRolledBackError and wrote %r", tx, new)
            check(all(w.matched is None or w.matched.settled_by is not w for _, w in acks),
                  "commit of %s rolled back, yet its ACKs were applied", tx)
            return outcome
        check(alive, "commit of %s (BEGIN on socket %d) returned normally after that socket was lost "
              "(open socket %d; wrote %r)", tx, sock, self.transport.link_seq, new)
        check(len(new) == 1 and new[0].cmd == "COMMIT" and new[0].sock == sock and new[0].stray is None,
              "commit of %s (BEGIN on socket %d) returned normally and wrote %r", tx, sock, new)
        for copy, _ in acks:
            check(copy.state == "settled", "commit of %s returned normally, %r is not settled", tx, copy)
            self.app_settled.setdefault(copy.message_id, "ACK in %s, committed on socket %d" % (tx, sock))
        return outcome

    def _abort(self) -> None:
        tx, sock, acks, taken = self.tx, self.tx_sock, self.tx_acks, self.tx_held
        self.tx, self.tx_acks, self.tx_held = None, [], []
        alive = self.transport.link_alive(sock)
        racing = self.transport.interleave is not None and "ABORT" in self.transport.interleave[1]
        before = len(self.transport.writes)
        self.conn.abort(tx)
        new = self.transport.writes[before:]
        if alive and not (racing and not new):
            check(len(new) == 1 and new[0].cmd == "ABORT" and new[0].sock == sock and new[0].stray is None,
                  "abort of %s (BEGIN on socket %d) wrote %r", tx, sock, new)
        else:
            check(not new, "abort of %s of lost socket %d wrote %r", tx, sock, new)
        for copy, w in acks:
            check(copy.settled_by is not w, "abort of %s applied its ACK %r", tx, w)
        # the library's promise: what the transaction's ACK/NACKs took is the application's again
        for copy, _ in reversed(acks):
            self.promised.setdefault(self.identity(copy), []).insert(0, copy)
            while len(self.promised) > self.size:
                self.promised.popitem(last=False)
        self.held.extend(taken)

    # ----------------------------------------------------------------- invariants

    @invariant()
    def ledger_is_bounded(self) -> None:
        held = len(self.conn._ledger._messages)
        check(held <= self.size, "the ledger holds %d identities, its size is %d", held, self.size)

    @invariant()
    def no_stray_frames(self) -> None:
        for write in self.transport.writes[self.checked:]:
            if write.stray is not None and write.fallback:
                self.stats["forgotten identity, stray ACK"] += 1
            else:
                check(write.stray is None, "stray frame (ActiveMQ answers ERROR): %r", write)
        self.checked = len(self.transport.writes)

    @invariant()
    def settled_stays_settled(self) -> None:
        for message_id, how in self.app_settled.items():
            d = self.broker.settled.get(message_id)
            check(d is not None and message_id not in self.broker.queued,
                  "%s was settled by the application (%s) but the broker redelivers it", message_id, how)
            assert d is not None
            check(all(e.message_id != message_id or e.n <= d.n for e in self.broker.deliveries),
                  "%s was settled (%s) and delivered again", message_id, how)

    @invariant()
    def nothing_settled_unseen(self) -> None:
        handed = {d.message_id for d in self.broker.deliveries if d.handed}
        for d in self.broker.deliveries:
            if d.state == "settled" and d.settled_by is not None and not d.settled_by.fallback:
                check(d.message_id in handed, "%r was settled by %r, the application never had that message",
                      d, d.settled_by)


def _machine(version: str, **attributes: Any) -> type:
    attributes["VERSION"] = version
    return type("SettleModel%s" % version.replace(".", ""), (SettleModel,), attributes)


MACHINES = {version: _machine(version) for version in CONNECTIONS}

MODEL_SETTINGS = settings(max_examples=80, stateful_step_count=50, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@pytest.mark.parametrize("version", sorted(MACHINES))
def test_settle_model(version: str) -> None:
    run_state_machine_as_test(MACHINES[version], settings=MODEL_SETTINGS)


#: the racing machine's search: its mutants (a transaction frame written unpinned, below) are
#: found derandomized within 25 examples (COMMIT; BEGIN 5, ABORT 3). Every generated step is valid
#: (``SettleModel.step``); with seven rules behind preconditions, 761 of 1,361 test cases were
#: thrown away at 600 examples. Randomized (12 seeds each), the slowest mutant (ABORT) needed at
#: most 221 and 340 examples, where the rules found it within 600 examples in 11 of 12 seeds: 300
#: examples keep that power at 6.9 s of CPU (600 rule-based examples: 12.7 s).
#: (It ran MUTANT_SETTINGS' 2,000: 4,950 test cases, 38 s of CPU, 100-128 s on a loaded machine
#: against the 120 s timeout.)
RACING_SETTINGS = settings(max_examples=300, stateful_step_count=40, deadline=None, database=None,
                           derandomize=True, phases=[Phase.generate], report_multiple_bugs=False,
                           suppress_health_check=[HealthCheck.too_slow])
RACING = ("ACK", "NACK", "BEGIN", "COMMIT", "ABORT")


def test_settle_model_with_failovers_racing_transaction_frames() -> None:
    """begin()/commit()/abort() are pinned to the transaction's socket: a failover
    interleaving with their write keeps the transaction promises (was a bug)."""
    run_state_machine_as_test(_machine("1.2", RACY=RACING), settings=RACING_SETTINGS)


@pytest.mark.parametrize("unpinned", ["BEGIN", "COMMIT", "ABORT"])
def test_the_racing_model_catches_an_unpinned_transaction_frame(unpinned: str) -> None:
    """The racing machine's sensitivity at its own settings: a transport that writes
    ``unpinned`` on whatever socket is open (its link_seq ignored) is caught."""

    class Unpinned(FakeTransport):
        def send_frame(self, cmd: str, headers: Optional[Dict[str, Any]] = None, body: Any = None,
                       write_timeout: Optional[float] = None, defer: bool = False, head: Any = None,
                       link_seq: int = 0) -> None:
            return super().send_frame(cmd, headers, body, write_timeout, defer, head,
                                      0 if cmd == unpinned else link_seq)

    with pytest.raises(ModelViolation):
        run_state_machine_as_test(_machine("1.2", RACY=RACING, TRANSPORT=Unpinned), settings=RACING_SETTINGS)


# --------------------------------------------------------------------------- the model can fail

# (the 1.1 "newest copy" mutant is found within 600 examples in a process of its own, but not
# always after other hypothesis tests ran in the same session: 2,000 leave room; a mutant found
# early stops the search, so only a library the model cannot fault pays for the whole count)
MUTANT_SETTINGS = settings(max_examples=2000, stateful_step_count=40, deadline=None, database=None,
                           derandomize=True, phases=[Phase.generate], report_multiple_bugs=False,
                           suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _socket_of_newest(self: SocketLedger, ack_headers: Any, caller_seq: int = 0, key: Any = None) -> Optional[int]:
    """socket_of taking the copy handed over LAST (the rule before stale 1.1 ACKs were refused)."""
    key = self.ack_key(self.transport.version, ack_headers)
    seqs = self._messages.get(key)
    if not seqs:
        return None
    seq = seqs.pop()
    if not seqs:
        del self._messages[key]
    return seq


def _ack_key_by_message_id(version: Optional[str], headers: Any) -> Tuple[str, ...]:
    """ack_key that ignores the 1.2 ``ack`` id (keys every version by message-id)."""
    return (str(headers.get("message-id")),)


def _handed_over_unbounded(self: SocketLedger, frame: Any, cumulative: bool = False) -> None:
    """handed_over that never forgets."""
    key = self.ack_key(self.transport.version, frame.headers)
    self._messages.setdefault(key, []).append(frame.link_seq or self.transport.link_seq)


def _should_dispatch_keeps_lost(self: Client, frame: Any) -> bool:
    """Client.should_dispatch that hands a lost socket's queued messages over too."""
    sub = self.manager.get(frame.headers.get("subscription"))
    if sub is not None and sub.ack != "auto":
        self.ledger.handed_over(frame)
    return True


class _AllAlive:
    def link_alive(self, seq: int) -> bool:
        return True


def _hand_over_never_lost(seq: int, disconnected: int, sub: Any, failover: bool, links: Any,
                          moving_seq: int = 0) -> int:
    """The settlement core's hand_over asked as if every socket were alive (the lost-socket rule never fires)."""
    return settle.hand_over(seq, disconnected, sub, failover, _AllAlive(), moving_seq)


class _TransportIgnoringLinkSeq(FakeTransport):
    """A transport that writes an ACK on whatever socket is open (link_seq ignored)."""

    def send_frame(self, cmd: str, headers: Optional[Dict[str, Any]] = None, body: Any = None,
                   write_timeout: Optional[float] = None, defer: bool = False, head: Any = None,
                   link_seq: int = 0) -> None:
        return super().send_frame(cmd, headers, body, write_timeout, defer, head, 0)


MUTANTS: Dict[str, Tuple[str, Any, str, Any]] = {
    "socket_of takes the newest copy": ("1.1", SocketLedger, "socket_of", _socket_of_newest),
    "ack identity is the message-id on 1.2": ("1.2", SocketLedger, "ack_key",
                                              staticmethod(_ack_key_by_message_id)),
    "the ledger never forgets": ("1.2", SocketLedger, "handed_over", _handed_over_unbounded),
    "a transaction is never stale": ("1.2", TransactionTable, "is_stale", lambda self, tx: False),
    "the dispatcher hands lost sockets' messages over": ("1.2", Client, "should_dispatch",
                                                         _should_dispatch_keeps_lost),
    "the core's lost-socket rule never fires": ("1.2", engine_client, "hand_over", _hand_over_never_lost),
    "the ACK is not pinned to its socket": ("1.2", None, "", None),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_model_catches_a_broken_library(mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    version, owner, name, replacement = MUTANTS[mutant]
    machine = MACHINES[version]
    if owner is not None:
        monkeypatch.setattr(owner, name, replacement)
    else:
        machine = _machine(version, TRANSPORT=_TransportIgnoringLinkSeq)
    with pytest.raises(ModelViolation):
        run_state_machine_as_test(machine, settings=MUTANT_SETTINGS)


# --------------------------------------------------------------------------- reproducers


def _model(version: str = "1.2", mode: str = "client-individual", size: int = 64, messages: int = 1) -> SettleModel:
    model = MACHINES[version]()
    model._setup(mode, size, messages)
    return model


def test_1_1_ambiguity_the_ack_names_the_copy_handed_over_last() -> None:
    """The documented 1.0/1.1 ambiguity, step by step: the old copy's ACK settles the new copy."""
    m = _model("1.1")
    old = m._deliver(m.broker.queued[0])
    assert m._hand_over()
    m._lose()
    m._reconnect()
    new = m._deliver(old.message_id)
    assert m._hand_over() and new.redelivered
    assert m._ack(0) == "ok"  # the application names its OLD copy...
    assert new.state == "settled" and old.state == "lost"  # ...the ACK named (and settled) the new one
    assert m._ack(0) == "interrupted"  # the new copy's own ack finds the old socket's entry
    m.settled_stays_settled()
    m.no_stray_frames()


def test_reproducer_commit_racing_a_failover() -> None:
    """Was a bug: commit() checked that the transaction's socket was alive, then
    wrote COMMIT unpinned: a failover between the two put it on the new socket
    (where ActiveMQ does not know the transaction) and commit() returned normally."""
    m = _model("1.2")
    m._deliver(m.broker.queued[0])
    assert m._hand_over()
    m._begin()
    assert m._ack(0, in_tx=True) == "ok"
    m._race("before", "COMMIT")  # the reader/failover threads replace the socket after the check
    m._commit()


def test_reproducer_begin_racing_a_failover() -> None:
    """Was a bug: begin() wrote BEGIN and then recorded the transport's socket: a
    failover between the two recorded the new socket."""
    m = _model("1.2")
    m._race("after", "BEGIN")
    m._begin()  # BEGIN on socket 1, then socket 2 replaces it
    m._deliver(m.broker.queued[0])
    assert m._hand_over()
    m._ack(0, in_tx=True)  # the transaction is the lost socket's: must raise TransactionRolledBackError
    m._commit()


def test_reproducer_stomp10_subscription_without_id() -> None:
    """Was a bug: a STOMP 1.0 subscribe() without an id was not registered, so under
    auto_reconnect its messages were not noted in the ledger (an ack of a lost
    socket's message went on the new socket) and it was not replayed. Now refused."""
    broker = ModelBroker("1.0", False, ["ID:model-1:1:1:1:0"])
    transport = FakeTransport("1.0", broker)
    conn = amqstomp.Connection10(auto_reconnect=True)
    conn.transport = transport  # type: ignore[assignment]
    with pytest.raises(ConfigurationError, match="give subscribe\\(\\) an 'id'"):
        conn.subscribe(DEST, ack="client-individual")
    assert transport.writes == []

# --------------------------------------------------------------------------- the settlement core, both APIs
#
# amqstomp._core.settle decides hand-over, the lost-socket rule, what a failed delivery means,
# local redelivery and poison for BOTH APIs; the drivers apply its answers. Driven here in memory:
# the rules themselves (no driver), then each API's driver over the same facts -- the stomp.py
# API's Client.should_dispatch / SubscriptionManager.on_failed and the JMS API's
# ConnectionState.hands_over / is_from_lost_socket / ConsumerCore.redeliver -- which must agree.

from types import SimpleNamespace  # noqa: E402

from hypothesis import given  # noqa: E402

from amqstomp._core.dialect import ACTIVEMQ, GENERIC, RABBITMQ  # noqa: E402
from amqstomp.flow import RedeliveryPolicy  # noqa: E402
from amqstomp.jms import consumer as jms_consumer  # noqa: E402
from amqstomp.jms.constants import AUTO_ACKNOWLEDGE  # noqa: E402
from amqstomp.jms._connection_state import ConnectionState  # noqa: E402
from amqstomp.jms._state import ConsumerLedger, SessionState  # noqa: E402
from amqstomp.jms._state import Delivery as JmsDelivery  # noqa: E402
from conftest import OpenSocket  # noqa: E402
from amqstomp.jms._subscriber import Subscriber  # noqa: E402
from amqstomp._engine.subscription import SubscriptionManager  # noqa: E402

CORE_SETTINGS = settings(max_examples=300, deadline=None, database=None)
ACKS = ("auto", "client", "client-individual")


@CORE_SETTINGS
@given(seq=st.integers(0, 4), disconnected=st.integers(0, 4), ack=st.sampled_from(ACKS), closed=st.booleans(),
       app_acks=st.booleans(), failover=st.booleans(), open_seq=st.integers(0, 4))
def test_core_hand_over_rules(seq: int, disconnected: int, ack: str, closed: bool, app_acks: bool,
                              failover: bool, open_seq: int) -> None:
    """The hand-over rule's promises, over every combination of its facts."""
    links = OpenSocket(open_seq)
    verdict = settle.hand_over(seq, disconnected, settle.Subscribed(ack, closed, app_acks), failover, links)
    handed = verdict < settle.DROP_DISCONNECTED
    lost = failover and seq != 0 and seq != open_seq
    if ack == "auto":  # the broker settled it when it sent it: dropping it loses it, even after disconnect()
        assert verdict == settle.HAND_OVER and settle.broker_settled(ack)
    elif seq and seq <= disconnected:
        assert verdict == settle.DROP_DISCONNECTED  # the broker redelivers it: no listener after disconnect()
    else:  # dropped only where the broker redelivers it: closed subscription, lost socket
        assert handed == (not closed and not lost)
        assert verdict != settle.DROP_LOST_SOCKET or lost
    noted = verdict in (settle.HAND_OVER_NOTE, settle.HAND_OVER_NOTE_CUMULATIVE)
    assert noted == (handed and failover and app_acks and ack != "auto")  # the ACK's socket is known
    assert (verdict == settle.HAND_OVER_NOTE_CUMULATIVE) == (noted and ack == "client")  # ack:client is cumulative
    assert set(links.asked) <= {seq} and (not links.asked or (failover and ack != "auto"))
    assert settle.from_lost_socket(seq, failover, OpenSocket(open_seq)) == lost
    unknown = settle.hand_over(seq, disconnected, None, failover, OpenSocket(open_seq))  # a subscription not made here
    assert unknown == settle.HAND_OVER and settle.broker_settled(None)  # taken as ack:auto


class _Wire:
    """What a SubscriptionManager and a Client use of a driver, without a socket or thread:
    timers are recorded (``later``), writes too (``writes``: command, headers, socket)."""

    version = "1.2"
    dialect = ACTIVEMQ
    server = "ActiveMQ/5.17.2"

    def __init__(self) -> None:
        self.link_seq = 1
        self.writes: List[Tuple[str, Dict[str, Any], int]] = []
        self.later: List[Tuple[float, Callable[..., None], Tuple[Any, ...]]] = []
        self.delivered: List[Frame] = []

    def link_alive(self, seq: int) -> bool:
        return seq == self.link_seq

    def set_observer(self, observer: Any) -> None:
        self.observer = observer

    def is_open(self) -> bool:
        return True

    def deliver_message(self, frame: Frame) -> None:
        self.delivered.append(frame)

    def send_frame(self, cmd: str, headers: Any = None, body: Any = None, write_timeout: Any = None,
                   defer: bool = False, head: Any = None, link_seq: int = 0, nowait: bool = False) -> None:
        self.writes.append((cmd, dict(headers or {}), link_seq))

    def call_later(self, delay: float, fn: Callable[..., None], *args: Any) -> Any:
        self.later.append((delay, fn, args))
        return SimpleNamespace(cancel=lambda: None)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def notify(self, *args: Any) -> None:
        pass

    def post(self, event: Any) -> None:
        pass


def _message(n: int = 1, link_seq: int = 1) -> Frame:
    frame = Frame("MESSAGE", {"destination": DEST, "message-id": "ID:core-%d" % n, "subscription": SUB,
                              "ack": "a-%d" % n}, b"body")
    frame.link_seq = link_seq
    return frame


@pytest.mark.parametrize("failover", [False, True])
@pytest.mark.parametrize("lost", [False, True])
@pytest.mark.parametrize("ack,optimize", [("auto", False), ("client", False), ("client-individual", False),
                                          ("client", True)])
def test_both_apis_hand_over_by_the_core(ack: str, optimize: bool, lost: bool, failover: bool) -> None:
    """The same delivery (socket 1; socket 2 open when ``lost``) reaches the application of
    the stomp.py API (Client.should_dispatch) exactly when it reaches a JMS consumer
    (ConnectionState.hands_over): not from a lost socket where somebody acknowledges."""
    wire = _Wire()
    manager = SubscriptionManager(wire)  # type: ignore[arg-type]
    ledger = SocketLedger(wire)
    client = Client(wire, ledger, SimpleNamespace() if failover else None, manager)  # type: ignore[arg-type]
    manager.prepare(DEST, SUB, ack, {}, {"optimize_acknowledge": optimize})
    frame = _message()
    manager.on_message(frame)
    wire.link_seq = 2 if lost else 1
    expected = not (failover and lost and ack != "auto")
    assert client.should_dispatch(frame) is expected
    noted = expected and failover and ack != "auto" and not optimize
    assert (ledger.subscription_of(ack_headers_of(frame)) == SUB) == (noted and ack == "client")
    assert (ledger.socket_of(ack_headers_of(frame)) == 1) == noted
    jms = SimpleNamespace(consumer_link=SimpleNamespace(reconnector=SimpleNamespace() if failover else None,
                                                         transport=wire, client=SimpleNamespace(moving_seq=0)))
    assert ConnectionState.hands_over(jms, frame, settle.Subscribed(ack)) is expected  # type: ignore[arg-type]
    assert ConnectionState.is_from_lost_socket(jms, frame) is (failover and lost)  # type: ignore[arg-type]


def ack_headers_of(frame: Frame) -> Dict[str, str]:
    return {"id": frame.headers["ack"]}


def test_stomppy_hand_over_drops_a_closed_subscriptions_and_after_disconnect() -> None:
    """The stomp.py API's driver applies the core's other drops: a queued MESSAGE of a
    client-ack subscription closed meanwhile, and one of an acknowledged subscription after
    disconnect(); an ack:auto one is handed over all the same (the broker settled it), and
    so is one of an ack:auto subscription arriving after its close (issue: hand-over)."""
    wire = _Wire()
    manager = SubscriptionManager(wire, drop_unknown=True)  # type: ignore[arg-type]  # as the stomp.py API's
    client = Client(wire, SocketLedger(wire), None, manager)  # type: ignore[arg-type]
    manager.prepare(DEST, SUB, "client-individual", {}, {})
    first, second = _message(1), _message(2)
    manager.on_message(first)
    manager.on_message(second)
    manager.close(SUB)
    assert client.should_dispatch(first) is False
    manager.prepare(DEST, "2", "auto", {}, {})
    auto = _message(3)
    auto.headers["subscription"] = "2"
    manager.on_message(auto)
    assert client.should_dispatch(auto) is True
    manager.prepare(DEST, "3", "client-individual", {}, {})
    acked = _message(4)
    acked.headers["subscription"] = "3"
    manager.on_message(acked)
    client.disconnected_seq = 1
    assert client.should_dispatch(auto) is True  # the broker settled it: dropped, it would be lost
    assert client.should_dispatch(acked) is False  # never acked: the broker redelivers it
    manager.close("2")
    late = _message(5)
    late.headers["subscription"] = "2"
    manager.on_message(late)  # in flight when the UNSUBSCRIBE went: delivered, not dropped
    assert wire.delivered[-1] is late and client.should_dispatch(late) is True
    manager.close("3")
    late_acked = _message(6)
    late_acked.headers["subscription"] = "3"
    manager.on_message(late_acked)  # the broker redelivers it: dropped
    assert wire.delivered[-1] is late


@CORE_SETTINGS
@given(maximum=st.integers(-1, 4), initial=st.integers(0, 50), delay=st.integers(0, 50),
       exponential=st.booleans(), redelivery=st.integers(1, 8), error=st.booleans(),
       version=st.sampled_from(["1.0", "1.1", "1.2"]), dialect=st.sampled_from([ACTIVEMQ, RABBITMQ, GENERIC]))
def test_core_failure_outcome(maximum: int, initial: int, delay: int, exponential: bool, redelivery: int,
                              error: bool, version: str, dialect: str) -> None:
    """after_failure: poisoned exactly past the policy's maximum (a failed listener only),
    else redelivered after the policy's delay; the poison frame is the broker's reject."""
    policy = RedeliveryPolicy(maximum, initial, delay, exponential, 2.0)
    headers = {"message-id": "ID:m-1", "subscription": SUB, "ack": "a-1"}
    action = settle.after_failure(policy, redelivery, error, version, dialect, headers)
    if not error:
        assert isinstance(action, settle.Redeliver) and not action.redelivered
        assert action.delay_ms == settle.NO_LISTENER_RETRY_MS
    elif policy.exceeded(redelivery):
        assert isinstance(action, settle.Poison)
        identity = {"1.2": {"id": "a-1"}, "1.1": {"message-id": "ID:m-1", "subscription": SUB},
                    "1.0": {"message-id": "ID:m-1"}}[version]
        if version == "1.0":
            if dialect == ACTIVEMQ:
                identity["subscription"] = SUB  # ActiveMQ's 1.0 quirk
            assert (action.command, action.headers) == ("ACK", identity)  # no NACK in STOMP 1.0
        else:
            if dialect == RABBITMQ:
                identity["requeue"] = "false"  # a plain NACK would put it straight back
            assert (action.command, action.headers) == ("NACK", identity)
    else:
        assert isinstance(action, settle.Redeliver) and action.redelivered
        assert action.delay_ms == policy.delay_ms(redelivery)


def test_listener_failure_by_who_settles() -> None:
    """One table says what a failed listener means; each JMS acknowledge mode and each
    stomp.py subscription kind reads it."""
    assert [settle.listener_failed(s) for s in (settle.BY_BROKER, settle.BY_LIBRARY, settle.BY_APPLICATION,
                                                settle.INDIVIDUAL, settle.TRANSACTED)] == [
        settle.CONSUMED, settle.REDELIVER, settle.CONSUMED, settle.RECOVER, settle.ROLLBACK]
    from amqstomp.jms import constants
    from amqstomp.jms._subscriber import ACK_MODES  # each mode's rules, of the acknowledgement core
    assert {mode: settle.listener_failed(rules.settled_by) for mode, rules in ACK_MODES.items()} == {
        constants.AUTO_ACKNOWLEDGE: settle.REDELIVER, constants.DUPS_OK_ACKNOWLEDGE: settle.REDELIVER,
        constants.AT_MOST_ONCE: settle.CONSUMED, constants.CLIENT_ACKNOWLEDGE: settle.CONSUMED,
        constants.INDIVIDUAL_ACKNOWLEDGE: settle.RECOVER, constants.SESSION_TRANSACTED: settle.ROLLBACK}
    with pytest.raises(ValueError, match="settled_by must be one of"):
        settle.listener_failed("nobody")


def _session_state(connection: Any = None) -> SessionState:
    """A JMS session's state (its condition, its ledger methods) with no session around it."""
    return SessionState(connection or SimpleNamespace(), 1, AUTO_ACKNOWLEDGE, False)


def _stomppy_failures_until_poison(policy: RedeliveryPolicy, redelivered: bool = False) -> Tuple[List[int], Any]:
    """The stomp.py API's driver: a MESSAGE of an optimized-acknowledge subscription whose
    listener always raises; the manager's timers run by hand. Returns the redelivery delays (ms)
    and the first frame written (command, headers, socket): the reject. ``redelivered``: the
    broker sent it with ``redelivered:true``."""
    wire = _Wire()
    manager = SubscriptionManager(wire, redelivery_policy=policy)  # type: ignore[arg-type]
    manager.prepare(DEST, SUB, "client", {}, {"optimize_acknowledge": True})
    frame = _message()
    if redelivered:
        frame.headers["redelivered"] = "true"
    manager.on_message(frame)
    delays: List[int] = []
    for _ in range(20):
        manager.on_failed(frame, "error")
        if wire.writes:  # (an ACK of what was held back meanwhile may follow the reject)
            return delays, wire.writes[0]
        (delay, fn, args), = [entry for entry in wire.later if entry[1] == manager._redeliver]
        wire.later.clear()
        delays.append(int(round(delay * 1000)))
        fn(*args)
        assert wire.delivered[-1] is frame and frame.headers["redelivered"] == "true"
    raise AssertionError("never poisoned")


def _jms_failures_until_poison(policy: RedeliveryPolicy, redelivered: bool = False) -> Tuple[int, Any]:
    """The JMS API's driver (ConsumerCore.redeliver, as an AUTO_ACKNOWLEDGE listener that
    always raises calls it): returns the local redeliveries and the poison action.
    ``redelivered``: the broker sent it with ``redelivered:true`` (the reader's duplicate
    audit, ``SubscriptionManager.on_message``, counts it delivered twice)."""
    core = object.__new__(jms_consumer.ConsumerCore)
    poisoned: List[Tuple[Any, Any]] = []
    core._connection = SimpleNamespace(is_from_lost_socket=lambda frame: False, redelivery_policy=policy)
    core.subscriber = SimpleNamespace(link=SimpleNamespace(version="1.2", dialect=ACTIVEMQ),
                                      poison=lambda delivery, action: poisoned.append((delivery, action)))
    core._state = _session_state(core._connection)
    core.ledger = ConsumerLedger()
    frame = _message()
    if redelivered:
        frame.headers["redelivered"] = "true"
        SubscriptionManager(_Wire()).on_message(frame)  # type: ignore[arg-type]  # the reader's audit
    delivery = JmsDelivery(frame, 1)
    for count in range(20):
        core.redeliver([delivery])
        if poisoned:
            assert poisoned[0][0] is delivery and not core.ledger.buffer
            return count, poisoned[0][1]
        assert core.ledger.buffer.popleft() is delivery
    raise AssertionError("never poisoned")


@pytest.mark.parametrize("maximum", [0, 1, 3])
def test_both_apis_redeliver_then_poison_by_the_core(maximum: int) -> None:
    """A message the broker delivered once, whose listener always raises: both APIs
    redeliver it locally ``maximum_redeliveries`` times (the stomp.py API after the
    policy's delays), then give it up with the same reject frame on its socket."""
    policy = RedeliveryPolicy(maximum, 10, 20, True, 2.0)
    delays, rejects = _stomppy_failures_until_poison(policy)
    assert delays == [policy.delay_ms(n) for n in range(1, maximum + 1)]
    assert rejects == ("NACK", {"id": "a-1"}, 1)
    redelivered, action = _jms_failures_until_poison(RedeliveryPolicy(maximum, 0))
    assert redelivered == maximum
    assert (action.command, action.headers) == ("NACK", {"id": "a-1"})


@pytest.mark.parametrize("maximum", [1, 3])
def test_both_apis_count_the_brokers_redeliveries_toward_the_maximum(maximum: int) -> None:
    """One redelivery count for both APIs (settle.next_redelivery): a MESSAGE the broker
    redelivered (``redelivered:true``: delivery count 2), whose listener always raises, has
    one local redelivery fewer before it is poisoned -- as ActiveMQ's Java client, whose
    ``redeliveryCounter`` includes the broker's. (The stomp.py API counted only its own
    failures before.)"""
    policy = RedeliveryPolicy(maximum, 10, 20, True, 2.0)
    delays, rejects = _stomppy_failures_until_poison(policy, redelivered=True)
    assert delays == [policy.delay_ms(n) for n in range(2, maximum + 1)]
    assert rejects == ("NACK", {"id": "a-1"}, 1)
    redelivered, action = _jms_failures_until_poison(RedeliveryPolicy(maximum, 0), redelivered=True)
    assert redelivered == maximum - 1
    assert (action.command, action.headers) == ("NACK", {"id": "a-1"})
    assert action.reason == settle.poisoned_after(maximum + 1, maximum)


@pytest.mark.parametrize("maximum", [0, 2])
def test_the_poison_reason_counts_the_deliveries_and_the_redeliveries(maximum: int, caplog: Any) -> None:
    """maximumRedeliveries=2 (org.apache.activemq.RedeliveryPolicy) hands a message over
    1 + 2 = 3 times, then gives it up: the reason both APIs log says so (the JMS API's said
    "after 3 redeliveries" for two)."""
    policy = RedeliveryPolicy(maximum, 0)
    expected = "delivered %d times (1 + %d redeliveries, maximumRedeliveries=%d)" % (maximum + 1, maximum, maximum)
    assert settle.poisoned_after(maximum + 1, maximum) == expected
    action = settle.after_failure(policy, maximum + 1, True, "1.2", ACTIVEMQ, {"ack": "a-1"})
    assert isinstance(action, settle.Poison) and action.reason == expected
    _, _ = _stomppy_failures_until_poison(policy)
    assert [r.getMessage() for r in caplog.records if "poisoned" in r.getMessage()] == [
        "message ID:core-1 of subscription %s poisoned: %s (NACK: the broker's dead-letter queue)" % (SUB, expected)]
    redelivered, jms_action = _jms_failures_until_poison(policy)
    assert redelivered == maximum and jms_action.reason == expected


def _optimized(wire: _Wire, maximum: int = 0) -> SubscriptionManager:
    manager = SubscriptionManager(wire, redelivery_policy=RedeliveryPolicy(maximum, 0))  # type: ignore[arg-type]
    manager.prepare(DEST, SUB, "client", {}, {"optimize_acknowledge": True, "ack_batch_cap": 1})
    return manager


def _jms_poison(manager: SubscriptionManager, wire: _Wire, frame: Frame) -> None:
    """The JMS API's driver: Subscriber.poison of a delivery the window did not count (AUTO_ACKNOWLEDGE)."""
    subscriber = object.__new__(Subscriber)
    subscriber.mode = AUTO_ACKNOWLEDGE
    subscriber.ack_mode = ackmodes.JMS_AUTO
    subscriber.sub_id = SUB
    subscriber.sub = manager.get(SUB)
    subscriber.consumer = "consumer"
    subscriber.link = SimpleNamespace(manager=manager, acknowledge=lambda cmd, headers, seq: wire.writes.append(
        (cmd, dict(headers), seq)))
    subscriber.poison(JmsDelivery(frame, 1), settle.poison("1.2", ACTIVEMQ, frame.headers))


@pytest.mark.parametrize("api", ["stomp.py", "jms"])
def test_both_apis_poison_the_newest_message_without_an_ack_of_it(api: str) -> None:
    """A poisoned message that is the newest one consumed: its reject is the only frame
    written -- no ACK names it after its NACK (ActiveMQ 5.17 answers ERROR "Unexpected ACK":
    the stomp.py API did so before) -- and the window counts it settled."""
    wire = _Wire()
    manager = _optimized(wire)
    first, failing, later = _message(1), _message(2), _message(3)
    for frame in (first, failing, later):
        manager.on_message(frame)
    manager.on_consumed(first)
    assert wire.writes == [("ACK", {"id": "a-1"}, 1)]  # ack_batch_cap 1: one ACK per message
    wire.writes.clear()
    if api == "stomp.py":
        manager.on_failed(failing, "error")  # maximum_redeliveries 0: poisoned at once
    else:
        _jms_poison(manager, wire, failing)
    assert wire.writes == [("NACK", {"id": "a-2"}, 1)]
    sub = manager.get(SUB)
    assert sub is not None and sub.window.consumed == sub.window.acked == 2


def test_stomppy_poison_after_a_message_consumed_meanwhile() -> None:
    """The stomp.py API: a message consumed while another awaits its redelivery is not
    ACKed (a cumulative ACK would settle the waiting one too); once that one is poisoned,
    its reject goes first, then the held-back ACK naming the later message."""
    wire = _Wire()
    manager = _optimized(wire, maximum=1)
    failing, later = _message(1), _message(2)
    manager.on_message(failing)
    manager.on_message(later)
    manager.on_failed(failing, "error")  # redelivered later (maximum_redeliveries 1)
    manager.on_consumed(later)
    assert wire.writes == []  # held back: the ACK of a-2 would settle a-1 too
    manager.on_failed(failing, "error")  # its second failure: poisoned
    assert wire.writes == [("NACK", {"id": "a-1"}, 1), ("ACK", {"id": "a-2"}, 1)]
    sub = manager.get(SUB)
    assert sub is not None and sub.window.consumed == sub.window.acked == 2


@pytest.mark.parametrize("ack", ["client", "client-individual"])
def test_an_acknowledgement_computes_its_identity_once(ack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stomp.py API's ACK over failover (``Client.acknowledge_identity``): the ACK's
    identity is computed once and passed to the ledger and the unacked check (issue 22;
    before: three to four times per ACK), and the ACK still goes on the delivering socket."""
    import amqstomp._engine.acknowledging
    import amqstomp._unacked
    import amqstomp._engine.ledger
    from amqstomp._core.frames import ack_identity

    calls: List[Any] = []

    def counted(version: Any, headers: Any) -> Tuple[str, ...]:
        calls.append(dict(headers))
        return ack_identity(version, headers)

    wire = _Wire()
    manager = SubscriptionManager(wire, track_acks=True)  # type: ignore[arg-type]
    ledger = SocketLedger(wire)  # type: ignore[arg-type]
    client = Client(wire, ledger, SimpleNamespace(armed=True), manager)  # type: ignore[arg-type]
    manager.prepare(DEST, SUB, ack, {}, {})
    frame = _message()
    manager.on_message(frame)
    assert client.should_dispatch(frame)
    for module in (amqstomp._engine.acknowledging, amqstomp._unacked, amqstomp._engine.ledger):
        monkeypatch.setattr(module, "ack_identity", counted, raising=False)
    client.acknowledge_identity("ACK", {"id": "a-1"}, {"id": "a-1"}, manager)
    assert calls == [{"id": "a-1"}]
    assert wire.writes == [("ACK", {"id": "a-1"}, 1)]
