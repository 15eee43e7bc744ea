"""The rules every API follows to write on a connection that survives socket losses.

A :class:`Client` joins a :class:`~amqstomp.transport.Transport`, its
:class:`~amqstomp._engine.ledger.SocketLedger` and (with failover) its
:class:`~amqstomp._engine.failover.Reconnector`, and decides for every frame which
socket it may go on -- the one place these rules are written, for the
stomp.py-style connections and the JMS API alike:

* a frame outside a transaction goes on the connected socket; while a new one
  is being made (and its subscriptions replayed) it waits, as the facade's
  wait policy says; a write that fails is written again on the next socket
  (at-least-once), and so is a frame waiting for its receipt whose socket is
  lost before it (:meth:`Client.request`, a bounded number of times);
* a frame of a transaction goes on the socket its BEGIN was written on, or
  nowhere: the broker knows the transaction there only, and rolled it back
  when that socket ended (:class:`~amqstomp.exception.TransactionRolledBackError`;
  an ABORT is then simply done); BEGIN is recorded where it was written;
* an ACK/NACK goes on the socket that delivered the message, or nowhere
  (:class:`~amqstomp.exception.AcknowledgeInterruptedError`): ActiveMQ
  redelivers a lost socket's message on the new socket under the same
  ``message-id``; with a receipt, a written ACK whose receipt never came is
  in doubt (:class:`~amqstomp.exception.AcknowledgeInDoubtError`)
  (:mod:`.acknowledging`);
* after a reconnect the subscriptions are sent again, each waiting for its
  RECEIPT (ActiveMQ starts dispatching only after it), before anything else
  is written (:meth:`Client.replay`); a SUBSCRIBE lost with its socket before
  its RECEIPT is written again unless the replay covered it (:mod:`.subscribing`).

The Client is also the transport's one observer
(:class:`amqstomp._io.observer.TransportObserver`): MESSAGEs go to the
subscriptions' flow control, the dispatch decision applies the failover rule
above, and a lost socket goes to the failover loop.

The facades keep what differs by API, as parameters: how long a write waits
for a new socket and what it raises then (``wait_up``: the stomp.py API's
``timeout``, the JMS API's call deadline or the failover URI's ``timeout``),
how a receipt is waited for and what its absence raises (``wait_receipt`` of
:meth:`Client.request`: the JMS ``jms.sendTimeout`` and ``ResourceAllocationError``),
how often a frame is written again (the JMS API's ``MAX_SEND_RETRIES``), and
what they tell their listeners. The JMS producer window is the JMS link's: it
asks the Client which socket (:meth:`Client.route`) and applies
:meth:`Client.transaction_lost` to a failed write.
"""
import logging
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..codec import Frame, FrameHead
from ..exception import (
    ConnectFailedException,
    ConnectionClosedException,
    NotConnectedException,
    StompException,
    TransactionRolledBackError,
)
from .._core.events import Disconnecting
from .._core.settle import DROP_DISCONNECTED, DROP_LOST_SOCKET, DROP_MOVING, HAND_OVER, HAND_OVER_NOTE_CUMULATIVE, \
    hand_over
from .._core.transactions import TransactionTable, rolled_back, write_lost
from .acknowledging import Acknowledging
from .ports import TransportPort, WaitUp
from .subscribing import Subscribing

__all__ = ["Client", "WaitUp"]

log = logging.getLogger("amqstomp.engine")


class Client(Acknowledging, Subscribing):
    """Which socket each frame goes on (see the module docstring).

    Args:
        transport (Transport): the sockets.
        ledger (SocketLedger): which socket delivered what and began which transaction.
        reconnector (Reconnector | None): the failover loop; None: a lost socket
            ends the session (every rule above reduces to "write on the open socket").
        manager (SubscriptionManager | None): the subscriptions' flow control
            (prefetch windows, ack batching); None: MESSAGEs go straight to the listeners.

    The Client installs itself as ``transport``'s observer.
    """

    def __init__(self, transport: TransportPort, ledger: Any, reconnector: Any = None, manager: Any = None) -> None:
        self.transport = transport
        self.ledger = ledger
        self.reconnector = reconnector
        self.manager = manager
        #: the connection's one transaction table (:mod:`amqstomp._core.transactions`), the ledger's
        self.transactions: TransactionTable = ledger.transactions
        #: owners of the table's entries other than the ledger and the subscriptions' check:
        #: name -> ``give_back(entries)``, called with what an ABORT hands back (the JMS
        #: consumers' ``"consumed"``, set by ``jms/_transaction.py``)
        self.give_back: Dict[str, Callable[[List[Any]], None]] = {}
        #: the socket (``transport.link_seq``) the last CONNECT of :meth:`handshake` went on; 0 before one
        self.handshake_seq = 0
        #: the socket open when the application last called :meth:`disconnect`: what it
        #: delivered and the dispatcher has not handed over yet reaches no listener
        self.disconnected_seq = 0
        #: the socket :meth:`hand_back` gave up for a planned move (0: none)
        self.handed_back_seq = 0
        #: the socket settling before a planned move (:meth:`settling`; 0: none): what it
        #: delivers is no longer handed to the application
        self.moving_seq = 0
        #: ``held(seq)``: messages socket ``seq`` delivered that the application holds
        #: unsettled (:meth:`held`); the JMS connection sets its own (its consumers' count)
        self.held_by_application: Optional[Callable[[int], int]] = None
        #: with planned moves: no ACK/NACK of the socket :meth:`hand_back` gives up is written after
        #: its DISCONNECT (refused before, AcknowledgeInterruptedError); None without planned moves
        self.move_gate: Optional[Any] = threading.Lock() \
            if reconnector is not None and getattr(reconnector, "prober", None) is not None else None
        # per dispatching thread: the socket whose deliveries it hands over (each socket has its own)
        self._dispatching = threading.local()
        if manager is not None:  # the reader and the dispatcher call it directly: no frame of ours per MESSAGE
            self.on_message = manager.on_message  # type: ignore[method-assign]
            self.on_consumed = manager.on_consumed  # type: ignore[method-assign]
        transport.set_observer(self)
        if reconnector is not None:
            reconnector.hand_back = self.hand_back  # a planned move (priorityBackup, rebalance) settles first
            reconnector.settle = self  # rebalance: settling() and held() before the move
        #: without failover, :meth:`write`'s rule is "on the open socket or not at all": this is
        #: that write, ``direct_write(cmd, headers, body)`` (``transport.send_frame``), for a facade's
        #: hot path (one call from ``send()`` to the encoder); None with failover (use :meth:`write`)
        self.direct_write: Optional[Callable[..., Any]] = transport.send_frame if reconnector is None else None

    # ------------------------------------------------------------ connecting

    def handshake(self, version: str, command: str, headers_for: Callable[[str], Mapping[str, Any]],
                  wait_s: Optional[float], only: Optional[Tuple[str, int]] = None,
                  deadline: Optional[float] = None, silent: bool = False,
                  opened: Optional[Callable[[], None]] = None,
                  failing: Optional[Callable[[], None]] = None,
                  send: Optional[Callable[[str, Mapping[str, Any]], Any]] = None,
                  reuse: bool = False, connected_within: Optional[float] = None,
                  hand_over: bool = False) -> Optional[Frame]:
        """Open a socket and send CONNECT/STOMP (STOMP 1.2 "Connecting"), for
        every API and for every reconnect: ``transport.open(version, only,
        deadline)``, then ``opened()`` (if given), then ``command`` with
        ``headers_for(host)`` (the host connected to: the default ``host``
        header), then, unless ``wait_s`` is None, the wait for CONNECTED.
        ``failing()`` runs when the attempt failed, before the socket is closed.
        ``send(command, headers)`` writes CONNECT (``transport.send_frame`` when
        None: a facade routes it through its own ``send_frame``); ``reuse``: on
        the socket open now (stomp.py's ``transport.start()`` opened it), no new one.
        :attr:`handshake_seq` is then that socket's number.

        Not waited for (``wait_s`` None), ``connected_within`` (seconds) arms the
        socket's CONNECTED deadline once CONNECT is written
        (:meth:`amqstomp._io.driver.Driver.expect_connected`): unanswered by then,
        the socket ends as a loss (the failover loop's, else ``on_disconnected``).
        ``hand_over`` (with failover; not waited for): the failover loop is armed
        before the socket opens, so its loss, even before CONNECTED, is the
        loop's (the next broker, with the back-off); a socket that ends under
        the CONNECT write (a broker that resets it) raises nothing then. When
        no socket opens at all the loop is disarmed again and the exception raised.
        The deadline is then this broker's share of ``connected_within`` (equal
        among the failover brokers), as a waited first connection gives it, so
        that a send waiting ``connected_within`` for the connection sees the next broker.

        Returns:
            Frame | None: CONNECTED (None when not waited for).

        Raises:
            ConnectRefusedError: the broker answered with ERROR (its reason).
            ConnectFailedException: no socket, the write failed, or no CONNECTED
                within ``wait_s``; the socket is then closed (``silent``: without
                ``on_disconnected``, another attempt follows).
        """
        transport = self.transport
        rc = self.reconnector if hand_over and wait_s is None else None
        if rc is not None:
            rc.arm()
        try:
            if reuse and transport.current_host_and_port is not None:
                host = transport.current_host_and_port[0]
            else:
                host, _ = transport.open(version, only=only, deadline=deadline)
        except BaseException:
            if rc is not None:
                rc.disarm()
            raise
        seq = transport.link_seq
        try:
            if opened is not None:
                opened()
            (send or transport.send_frame)(command, headers_for(host))
            self.handshake_seq = transport.link_seq
            if wait_s is None:
                if connected_within is not None:  # with failover, this broker's share, as with a wait
                    share = connected_within / (len(rc.endpoints) if rc is not None else 1)
                    transport.expect_connected(share, seq)
                if rc is not None:
                    rc.socket_opened()
                return None
            return transport.wait_connected(wait_s)  # type: ignore[no-any-return]
        except StompException as exc:
            if rc is not None and not transport.link_alive(seq):  # ended as a loss: the armed loop has it
                log.info("connect: the socket to %s ended under CONNECT (%s): the failover loop tries the next "
                         "broker", host, exc)
                return None
            if rc is not None:
                rc.disarm()
            if failing is not None:
                failing()
            transport.close(reason="connect failed: %s" % exc, silent=silent)
            if isinstance(exc, ConnectFailedException):
                raise
            raise ConnectFailedException(str(exc)) from exc

    # ------------------------------------------------------------ transactions

    def transaction_refusal(self, cmd: str, transaction: Any) -> Optional[StompException]:
        """What refuses ``cmd`` in ``transaction`` (duplicate BEGIN, unknown id,
        stale transaction), or None: the table's decision
        (:meth:`amqstomp._core.transactions.TransactionTable.refusal`), for
        every API; the caller raises it."""
        return self.transactions.refusal(cmd, transaction)

    def transaction_began(self, transaction: Any) -> None:
        """A BEGIN of ``transaction`` was written (the socket it went on is noted
        by :meth:`write` with failover)."""
        self.transactions.began(transaction)

    def transaction_socket(self, cmd: str, headers: Mapping[str, Any]) -> int:
        """The socket a frame of a transaction must be written on: the one its
        BEGIN went on; 0 for a frame outside a transaction, a BEGIN, without
        failover, or a transaction this session did not record.

        Raises:
            TransactionRolledBackError: that socket was lost (the broker rolled
                the transaction back with it).
        """
        tx = headers.get("transaction")
        if tx is None or cmd == "BEGIN" or self.reconnector is None:
            return 0
        table = self.transactions
        seq = table.socket(tx)
        if seq and table.is_stale(tx):
            raise rolled_back(cmd, tx)
        return seq

    def transaction_stale(self, transaction: Any) -> bool:
        """True when ``transaction`` began on a socket lost since (failover): the broker
        rolled it back with that socket (:meth:`~amqstomp._core.transactions.TransactionTable.is_stale`)."""
        return self.transactions.is_stale(transaction)

    def transaction_ended(self, transaction: Any, aborted: bool) -> None:
        """COMMIT (``aborted`` False) or ABORT (True) of ``transaction`` was
        written (or found nothing to end): it leaves the table. After ABORT the
        messages its ACK/NACKs acknowledged are the application's again -- the
        broker undid those acknowledgements and holds the messages as delivered
        (STOMP 1.2 "ABORT"; ActiveMQ 5.17 does not redispatch them) -- so a later
        ACK of one is written, on the socket that delivered it; after COMMIT they
        are gone for good. The table hands what they took back to its owners:
        the ledger (:meth:`amqstomp._engine.ledger.SocketLedger.give_back`), the
        subscriptions' check (``manager.give_back``) and any other owner
        registered in :attr:`give_back` (the JMS consumers)."""
        taken = self.transactions.ended(transaction, aborted)
        if taken:
            for owner, entries in taken.items():
                if owner == "ledger":
                    self.ledger.give_back(entries)
                elif owner == "unacked":
                    if self.manager is not None:
                        self.manager.give_back(entries)
                else:
                    give_back = self.give_back.get(owner)
                    if give_back is not None:
                        give_back(entries)

    def transaction_took(self, transaction: Any, owner: str, entries: List[Any]) -> bool:
        """An ACK in ``transaction`` took ``entries`` from ``owner`` (given back on
        ABORT through :attr:`give_back`): the table's
        :meth:`~amqstomp._core.transactions.TransactionTable.took`; False when
        ``transaction`` is not open (the owner keeps them)."""
        return self.transactions.took(transaction, owner, entries)

    def transaction_taken(self, transaction: Any, owner: str) -> List[Any]:
        """What ACKs in the open ``transaction`` took from ``owner`` so far (a copy)."""
        return self.transactions.taken(transaction, owner)

    def check_ack(self, command: str, ack_headers: Mapping[str, Any], transaction: Any, subscriptions: Any,
                  key: Optional[Tuple[str, ...]] = None) -> Any:
        """``subscriptions.check_ack`` (refuses an ACK/NACK of a message the session
        does not hold); in ``transaction``, what it took is noted in the table
        (given back on ABORT). ``key``: the ACK's identity, if computed already.
        Returns what it took (see ``check_ack``)."""
        taken = subscriptions.check_ack(command, ack_headers, transaction, key)
        if taken and transaction is not None:
            self.transactions.took(transaction, "unacked", taken)
        return taken

    # ------------------------------------------------------------ writing

    def write(self, cmd: str, headers: Mapping[str, Any], body: Any, wait_up: WaitUp,
              write_timeout: Optional[float] = None, defer: bool = False,
              head: Optional[FrameHead] = None) -> "Optional[Future[Frame]]":
        """Write one frame by the rules of the module docstring.

        Args:
            wait_up: the facade's wait for a new socket (see :data:`WaitUp`).
            write_timeout, defer, head: as :meth:`Transport.send_frame`.

        Returns:
            Future | None: the receipt future (when the frame asks for one);
            None also for an ABORT of a transaction lost with its socket.

        Raises:
            TransactionRolledBackError: a frame of a transaction whose socket is gone.
            whatever ``wait_up`` raises (no new socket in time, failover gave up).
            StompException: ACK/NACK (they go through :meth:`acknowledge`).
        """
        transport = self.transport
        rc = self.reconnector
        if rc is None:
            return transport.send_frame(cmd, headers, body, write_timeout, defer, head)  # type: ignore[no-any-return]
        tx = headers.get("transaction")
        ends = tx is not None and (cmd == "COMMIT" or cmd == "ABORT")
        try:
            while True:
                cause: Optional[BaseException] = None
                try:
                    seq = self.socket_now(cmd, headers)  # a transaction's socket: never waits for another
                except TransactionRolledBackError:
                    if cmd == "ABORT":
                        return None  # gone with its socket: nothing to abort
                    raise
                if seq:
                    try:
                        future = transport.send_frame(cmd, headers, body, write_timeout, defer, head, link_seq=seq)
                    except (NotConnectedException, ConnectionClosedException) as exc:
                        if self.transaction_lost(cmd, headers, exc):
                            return None
                        cause = exc
                    else:
                        if cmd == "BEGIN" and tx is not None:
                            self.transactions.began(tx, seq)  # the socket it was written on
                        return future  # type: ignore[no-any-return]
                wait_up(cmd, cause)
        finally:
            if ends:
                self.transaction_ended(tx, cmd == "ABORT")

    def socket_now(self, cmd: str, headers: Mapping[str, Any]) -> int:
        """The socket a frame goes on now (the rules of the module docstring):
        its transaction's (:meth:`transaction_socket`), else, with failover, the
        connected socket when no reconnect is replaying subscriptions on it; 0
        with failover: none now (wait for one); 0 without failover: the open one.

        Raises:
            TransactionRolledBackError: its transaction's socket was lost.
        """
        seq = self.transaction_socket(cmd, headers)
        rc = self.reconnector
        if seq or rc is None:
            return seq
        # the socket read first, then the replay flag: a socket connected and not being
        # replayed (a write pinned to it cannot land on a newer socket before its CONNECT)
        connected = self.transport.connected_link_seq()
        return connected if connected and not rc.reconnecting else 0

    def route(self, cmd: str, headers: Mapping[str, Any], wait_up: Optional[WaitUp]) -> int:
        """:meth:`socket_now`, waiting with ``wait_up`` (only called with failover;
        None without) while there is none: the socket (``link_seq``) a frame
        written apart from :meth:`write` goes on (0: the open socket, no failover).

        Raises:
            TransactionRolledBackError: its transaction's socket was lost.
            whatever ``wait_up`` raises.
        """
        if self.reconnector is None:
            return 0  # (transaction_socket's answer without failover)
        while True:
            seq = self.socket_now(cmd, headers)
            if seq:
                return seq
            assert wait_up is not None, "a facade with failover passes its wait"
            wait_up(cmd, None)

    @staticmethod
    def transaction_lost(cmd: str, headers: Mapping[str, Any], exc: BaseException) -> bool:
        """A write of ``cmd`` with ``headers`` failed with ``exc``: the rule for a
        frame of a transaction whose socket is gone
        (:func:`amqstomp._core.transactions.write_lost`): True for an ABORT
        (drop it), False when the rule does not apply (the caller handles ``exc``).

        Raises:
            TransactionRolledBackError: any other frame of such a transaction.
        """
        return write_lost(cmd, headers.get("transaction"), exc)

    def request(self, cmd: str, headers: Mapping[str, Any], body: Any, wait_up: Optional[WaitUp],
                wait_receipt: Callable[["Future[Frame]"], Any], written: Optional[Callable[["Future[Frame]"], Any]] = None,
                head: Optional[FrameHead] = None, resends: int = 0, what: str = "") -> Any:
        """Write a frame whose ``headers`` ask for a receipt on :meth:`route`'s
        socket, call ``written(future)`` (the facade tracks it), then return
        ``wait_receipt(future)`` (the facade's bounded wait and its exceptions).
        With failover, a frame outside a transaction is at-least-once: one whose
        write finds no socket waits (``wait_up``) and goes on the next, and one
        whose socket is lost before its RECEIPT (``wait_receipt`` raising
        ConnectionClosedException) is written again on the next socket -- the
        broker may have applied the first -- at most ``resends`` times (a broker
        that closes the connection on this very frame would be fed it forever).
        A frame of a transaction is never written again (:meth:`transaction_lost`).
        ``what`` names the frame in messages (e.g. ``a send to /queue/a``).

        Returns:
            what ``wait_receipt`` returns; None for an ABORT of a lost transaction.

        Raises:
            TransactionRolledBackError: a frame of a transaction whose socket is gone.
            ConnectionClosedException: the socket was lost before the RECEIPT
                (no failover, a transaction's frame, or ``resends`` exceeded).
            NotConnectedException, ConnectionClosedException: no socket (no
                failover); whatever ``wait_up`` and ``wait_receipt`` raise.
        """
        again = self.reconnector is not None and headers.get("transaction") is None
        losses = 0
        while True:
            seq = self.route(cmd, headers, wait_up)
            try:
                future = self.transport.send_frame(cmd, headers, body, None, False, head, link_seq=seq)
            except (NotConnectedException, ConnectionClosedException) as exc:
                if self.transaction_lost(cmd, headers, exc):
                    return None
                if not again:
                    raise
                assert wait_up is not None
                wait_up(cmd, exc)  # lost between route() and the write: the next socket
                continue
            assert future is not None  # it has a receipt header
            if written is not None:
                written(future)
            try:
                return wait_receipt(future)
            except ConnectionClosedException as exc:
                if not again:
                    raise
                losses += 1
                if losses > resends:
                    raise ConnectionClosedException(
                        "%s lost its socket %d times before its receipt; not sent again (a broker that closes the "
                        "connection on this frame? see its log)" % (what or cmd, losses)) from exc
                log.info("socket lost before the receipt of %s: writing it again after failover", what or cmd)
                assert wait_up is not None
                wait_up(cmd, None)

    # ------------------------------------------------------------ dispatch

    def on_message(self, frame: Frame) -> None:
        """Reader thread: a MESSAGE to the subscriptions' flow control, or to the listeners
        (with a manager, its ``on_message`` replaces this method on the instance, as
        its ``on_consumed`` replaces :meth:`on_consumed`)."""
        manager = self.manager
        if manager is not None:
            manager.on_message(frame)
        else:
            self.transport.deliver_message(frame)

    def on_consumed(self, frame: Frame) -> None:
        """Dispatcher thread: the listeners had ``frame``; flow control counts it."""
        if self.manager is not None:
            self.manager.on_consumed(frame)

    def on_failed(self, frame: Frame, reason: str) -> None:
        """Dispatcher thread: the listeners did not have ``frame`` (``reason``)."""
        if self.manager is not None:
            self.manager.on_failed(frame, reason)

    def on_link_lost(self, link_seq: int, reason: str, error: Optional[BaseException]) -> Optional[str]:
        """Reader thread: a socket ended by itself; the failover loop takes it over
        (:meth:`amqstomp._engine.failover.Reconnector.on_link_lost`), else it is the end."""
        if self.reconnector is not None:
            result: Optional[str] = self.reconnector.on_link_lost(link_seq, reason, error)
            return result
        return "disconnected"

    def should_dispatch(self, frame: Frame) -> bool:
        """Dispatcher thread: whether a queued MESSAGE still goes to the
        application, by the settlement core's hand-over rule
        (:func:`amqstomp._core.settle.hand_over`): an ``ack:auto`` delivery always
        (the broker settled it: as with stomp.py, whose listeners have every MESSAGE
        read before the DISCONNECT's RECEIPT); else not after :meth:`disconnect`,
        not when its subscription was closed meanwhile, and, with failover, not when
        it came on a lost socket in a subscription somebody acknowledges (it could
        not be acknowledged: the broker redelivers it), so a failover does not wait
        for the old socket's buffer to be dispatched; where the application ACKs,
        the delivery is noted in the ledger with its socket. A delivery of a message
        settled here before is not handed over either (:mod:`amqstomp._core.duplicates`,
        ``SubscriptionManager.suppress``)."""
        seq = frame.link_seq
        subscriptions = self.manager
        if subscriptions is None:  # no subscription known here: as ack:auto (settle.broker_settled)
            return True
        sub = subscriptions.subscription_of(frame)
        verdict = hand_over(seq, self.disconnected_seq, sub, self.reconnector is not None, self.transport,
                            self.moving_seq)
        if verdict >= DROP_DISCONNECTED:
            if verdict != DROP_DISCONNECTED:
                subscriptions.drop(frame)
                log.debug("dropping message %s of socket %d: %s", frame.headers.get("message-id"), seq,
                          "the broker redelivers it" if verdict in (DROP_LOST_SOCKET, DROP_MOVING)
                          else "its subscription closed")
            return False
        if sub is not None and sub.settled is not None and frame.headers.get("message-id") in sub.settled \
                and subscriptions.suppress(sub, frame):  # settled here before: the duplicates core's verdict
            return False
        if verdict == HAND_OVER:
            return True
        self._dispatching.seq = seq  # an ACK in this thread's listeners answers this socket's delivery
        self.ledger.handed_over(frame, cumulative=verdict == HAND_OVER_NOTE_CUMULATIVE)
        return True

    # ------------------------------------------------------------ ending

    def disconnect(self, manager: Any, wait_s: float, headers: Mapping[str, Any], announce: bool = False,
                   reason: str = "closed by the client", join_s: float = 10.0, disarm_s: Optional[float] = None,
                   send: Optional[Callable[[str, Mapping[str, Any], Any, Optional[float]], Any]] = None
                   ) -> Optional[StompException]:
        """End the session (STOMP 1.2 "DISCONNECT"), for every API: stop the
        failover loop, forget open transactions (the broker rolls them back),
        then, while connected, write the ACKs ``manager`` still holds
        (optimized acknowledge), DISCONNECT with ``headers`` (they carry a
        ``receipt``) and wait for its RECEIPT -- all within ``wait_s`` seconds --
        and close the socket, waiting up to ``join_s`` s for its threads
        (``disarm_s`` s for a reconnect in progress; ``join_s`` when None).
        ``announce``: the listeners hear ``on_disconnecting`` first. ``send(cmd,
        headers, body, write_timeout)`` writes the DISCONNECT (``transport.send_frame``
        when None). From the DISCONNECT's write on, any other frame asked for is refused
        (NotConnectedException; an application's ACK once this began: AcknowledgeInterruptedError).
        Never raises for a connection that is gone already: returns what ended the wait for the
        RECEIPT instead (ReceiptTimeout: none came in time), None when it came or nothing was sent."""
        transport, outcome = self.transport, None
        self.disconnected_seq = max(self.disconnected_seq, transport.link_seq)
        if self.reconnector is not None:
            self.reconnector.disarm(join_s if disarm_s is None else disarm_s)
        self.ledger.clear_transactions()
        if transport.is_connected():
            deadline = time.monotonic() + wait_s
            if manager is not None:
                manager.close_all(write_timeout=wait_s)
            if announce:  # on this thread, before DISCONNECT: a send from on_disconnecting goes out first
                transport.announce(Disconnecting())
            try:
                future = (send or transport.send_frame)("DISCONNECT", headers, None,
                                                        max(0.0, deadline - time.monotonic()))
                if future is None and send is not None and headers.get("receipt") is not None:
                    future = transport.receipt_future(str(headers["receipt"]))  # sent by the facade's send_frame
                if future is not None:
                    transport.wait_future(future, max(0.0, deadline - time.monotonic()), "DISCONNECT receipt")
            except StompException as exc:  # gone already, or no receipt in time: close anyway
                log.debug("DISCONNECT: %s", exc)
                outcome = exc
        transport.close(join_s, reason=reason)
        return outcome

    def settling(self) -> int:
        """Before a rebalance's move (:mod:`amqstomp._core.rebalance`), for every API: from
        now on nothing the open socket delivers in a subscription somebody acknowledges is
        handed to the application (the move's DISCONNECT hands it back). Returns that
        socket's number (``transport.link_seq``)."""
        self.moving_seq = seq = self.transport.link_seq
        return seq

    def held(self, seq: int) -> int:
        """Messages (count) socket ``seq`` delivered that the application was handed and
        has not acknowledged yet: the JMS connection's count (:attr:`held_by_application`),
        else the socket ledger's (:meth:`amqstomp._engine.ledger.SocketLedger.held`)."""
        count = self.held_by_application
        return count(seq) if count is not None else self.ledger.held(seq)

    def hand_back(self, link_seq: int = 0, wait_s: float = 10.0) -> None:
        """Before a planned move to another broker (priorityBackup, rebalanceInterval), for every
        API: DISCONNECT with a receipt on the open socket and wait for the
        RECEIPT, at most ``wait_s`` seconds. The broker has then applied every
        ACK written before and takes back the messages delivered and not
        acknowledged (it redelivers them, on the next broker through the
        network). The failover loop ends the socket afterwards. ``link_seq``
        (non-zero): the socket the move gives up; the DISCONNECT goes on it only
        (lost meanwhile: nothing is written, the loop's next socket is not
        touched). Never raises."""
        transport = self.transport
        link_seq = link_seq or transport.link_seq
        receipt = "amqstomp-move-%d" % link_seq
        try:
            transport.own_receipt(receipt)  # no listener's on_receipt
            gate = self.move_gate
            if gate is None:
                self.handed_back_seq = link_seq
                future = transport.send_frame("DISCONNECT", {"receipt": receipt}, None, wait_s, link_seq=link_seq)
            else:
                with gate:  # an ACK/NACK of this socket goes out before the DISCONNECT, or not at all
                    self.handed_back_seq = link_seq
                    future = transport.send_frame("DISCONNECT", {"receipt": receipt}, None, wait_s,
                                                  link_seq=link_seq)
            if future is not None:
                transport.wait_future(future, wait_s, "DISCONNECT receipt")
        except StompException as exc:  # gone already, or no receipt in time: the move goes on
            log.debug("DISCONNECT before a planned move: %s", exc)
