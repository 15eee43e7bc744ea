"""One STOMP connection's protocol state, sans I/O (the h11/wsproto model).

:class:`ProtocolState` is fed what a socket received and asked what to write;
it never touches a socket, a thread or a clock (times come in as ``now_ms``,
milliseconds on any monotonic scale). The threaded transport
(:mod:`amqstomp.transport`) drives one per socket; an asyncio driver can drive
the same class from its loop.

What it owns (STOMP 1.2 sections in brackets):

* framing both ways through :mod:`amqstomp.codec` in the negotiated version
  ("Protocol Negotiation": CONNECTED switches the parser);
* the CONNECTED state, the broker's ``server`` and dialect, and the frame
  limits that broker enforces (:mod:`amqstomp._core.limits`);
* receipt correlation ("RECEIPT", "ERROR"): a frame sent with a ``receipt``
  header registers an opaque token (the driver's future); the RECEIPT or the
  ERROR carrying that ``receipt-id`` hands it back; a lost connection hands
  back every token still waiting. A broker whose ERRORs carry no
  ``receipt-id`` (RabbitMQ 3.10: :attr:`~amqstomp._core.dialect.Dialect.error_receipts`)
  may answer a later frame before an earlier one's RECEIPT (RabbitMQ sends a
  SEND's RECEIPT once the message is confirmed, an unknown destination's ERROR
  at once), so its ERROR is taken as the answer to the one receipt awaited
  when exactly one is; with more, the receipts awaited at that ERROR become
  its suspects: once RECEIPTs have answered all but as many suspects as there
  are such ERRORs, those are their answers (:meth:`ProtocolState.take_error_answers`):
  no wait sits out its timeout for an answer that came; when the connection
  ends first, whose answer it was is unknown (a connection loss). The last ERROR is kept
  (:attr:`ProtocolState.last_error`), so that the end of the connection can give
  the broker's reason;
* heart-beats ("Heart-beating"): negotiation, when the next one must be
  written, when the peer is overdue (:meth:`ProtocolState.next_deadline`);
* the CONNECTED deadline ("Connecting": the server's first frame answers
  CONNECT): once the driver says CONNECT went out and how long the broker has
  (:meth:`ProtocolState.connect_sent`), :meth:`ProtocolState.next_deadline`
  includes it while CONNECTING and :meth:`ProtocolState.connected_overdue`
  says when it passed with no answer (the driver then ends the socket as a
  loss: a broker that accepts the socket but never answers);
* where the socket's session is in its life (:class:`LinkState`, one value
  instead of "connected?" flags): CONNECTING until CONNECTED, OPEN, CLOSING
  once this side asked to close, then CLOSED (closed by this side) or LOST
  (ended by the peer, the network or an error); how it ended
  (:attr:`ProtocolState.end`, a :class:`~amqstomp._core.events.LinkEnd`:
  why, the error, by whom), whether that end is reported to the API
  (:attr:`ProtocolState.silent`: a failover attempt abandoned is not), and
  whether the API declared the session down while the socket lives
  (:attr:`ProtocolState.down`: stomp.py's ``set_connected(False)``, a
  DISCONNECT's receipt). The driver asks :attr:`ProtocolState.usable`.

* the ids this side UNSUBSCRIBEd (:attr:`ProtocolState.unsubscribed`, until
  a SUBSCRIBE takes the id again): an ERROR that is only the broker's late
  answer to one of them (RabbitMQ's, after a clean close:
  :func:`~amqstomp._core.dialect.unsubscribed_error`) is no error.

Events returned by :meth:`ProtocolState.handle` for a received frame other
than MESSAGE (MESSAGE frames go to the consumer as they are, the hot path):
:data:`CONNECTED`, :data:`RECEIPT`, :data:`ERROR`, :data:`CONNECT_REFUSED`
(an ERROR that answers CONNECT), :data:`UNSUBSCRIBED_ERROR` and :data:`UNEXPECTED`;
what an ERROR event means for the waiters is :func:`amqstomp._core.errors.error_outcome`'s.
"""
import enum
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..codec import Frame, FrameParser, encode_frame
from ..exception import FrameEncodeError, StompProtocolError
from .events import LinkEnd
from .dialect import ACTIVEMQ, BROKERS, GENERIC, dialect_of, unsubscribed_error
from .dialect import auto_content_length as _auto_content_length
from .heartbeat import DUE_SLACK, broker_heartbeat, negotiate, parse_heartbeat, receive_timeout_ms, send_period_ms
from .limits import ACTIVEMQ_LIMITS, LIMITS_SAFE_BYTES, NO_CHECK_BYTES, check_limits

__all__ = ["ProtocolState", "LinkState", "CONNECTED", "RECEIPT", "ERROR", "CONNECT_REFUSED", "UNEXPECTED", "UNSUBSCRIBED_ERROR",
           "UNSUBSCRIBED_KEPT"]

#: :meth:`ProtocolState.handle` event: CONNECTED arrived; version, heart-beats and limits are set.
CONNECTED = 1
#: a RECEIPT; the token is the one registered for its ``receipt-id`` (None: none was).
RECEIPT = 2
#: an ERROR after CONNECTED; the token is the one of its ``receipt-id`` (None: none).
ERROR = 3
#: an ERROR before CONNECTED: the broker refused the connection.
CONNECT_REFUSED = 4
#: a frame a broker does not send to clients (logged and ignored by the driver).
UNEXPECTED = 5
#: an ERROR that is only the broker's late answer to this side's own UNSUBSCRIBE
#: (:func:`~amqstomp._core.dialect.unsubscribed_error`): logged at DEBUG by the
#: driver, not an error; it answers no receipt (the token is None).
UNSUBSCRIBED_ERROR = 6

#: How many UNSUBSCRIBEd ids :attr:`ProtocolState.unsubscribed` keeps (the oldest go first).
UNSUBSCRIBED_KEPT = 256


class LinkState(enum.Enum):
    """Where one socket's STOMP session is in its life (STOMP 1.2 "Connecting",
    "DISCONNECT"; the ``link_state`` of :class:`ProtocolState`)."""

    #: the socket is open, CONNECTED has not come
    CONNECTING = "connecting"
    #: CONNECTED came; frames may be written
    OPEN = "open"
    #: this side asked to close (``LinkOwner.close``): no failover follows
    CLOSING = "closing"
    #: the socket ended without this side asking (a failover layer may replace it)
    LOST = "lost"
    #: the socket ended after this side asked to close
    CLOSED = "closed"


class ProtocolState:
    """The protocol state of one socket's STOMP session (see the module docstring).

    Args:
        version (str): the STOMP version to encode and parse with until
            CONNECTED names the negotiated one (``"1.0"``, ``"1.1"``, ``"1.2"``).
        grace (float): the receive heart-beat grace factor (stomp.py's
            ``heart_beat_receive_scale``, 1.5).
        now_ms (float): the time (ms) the socket opened: silence is counted from it.

        broker (str | None): the user's dialect (``broker`` option: a name of
            :data:`amqstomp._core.dialect.BROKERS`); None: the one
            CONNECTED's ``server`` names.

    Raises:
        ValueError: an unknown version.
    """

    __slots__ = ("parser", "version", "grace", "link_state", "connected_frame", "server", "dialect",
                 "limits", "check_above", "client_heartbeat", "send_ms", "recv_ms", "recv_timeout_ms",
                 "last_read_ms", "last_write_ms", "receipts", "broker", "last_error", "last_error_ms",
                 "error_receipt_id", "unsubscribed", "connected_by_ms", "error_suspects", "unmatched_errors",
                 "error_answers", "offered_versions", "end", "silent", "down")

    def __init__(self, version: str = "1.2", grace: float = 1.5, now_ms: float = 0.0,
                 broker: Optional[str] = None) -> None:
        self.parser = FrameParser(version=version)
        #: the version frames are encoded in (the negotiated one once CONNECTED came)
        self.version = version
        self.grace = float(grace)
        #: where the session is (:class:`LinkState`)
        self.link_state = LinkState.CONNECTING
        self.connected_frame: Optional[Frame] = None
        self.server: Optional[str] = None
        #: the user's dialect, or None (:func:`~amqstomp._core.dialect.dialect_of` the ``server``)
        self.broker = broker
        self.dialect = broker or GENERIC
        #: the last ERROR frame received, or None, when it was read (ms, the ``now_ms`` scale),
        #: and the receipt it answered (or None); what follows from an ERROR: :mod:`amqstomp._core.errors`
        self.last_error: Optional[Frame] = None
        self.last_error_ms = 0.0
        self.error_receipt_id: Optional[str] = None
        #: (header line bytes, headers, frame bytes) the broker enforces, or None
        self.limits: Optional[Tuple[int, int, int]] = None
        #: frames above this many bytes are checked against :attr:`limits`
        self.check_above = NO_CHECK_BYTES
        self.client_heartbeat = (0, 0)
        self.send_ms = 0
        self.recv_ms = 0
        self.recv_timeout_ms = 0.0
        self.last_read_ms = float(now_ms)
        self.last_write_ms = float(now_ms)
        self.receipts: Dict[str, Any] = {}
        #: receipt ids one of the :attr:`unmatched_errors` may answer (an ordered set: a dict)
        self.error_suspects: Dict[str, None] = {}
        #: ERRORs naming no receipt, received while several receipts were awaited, not yet matched
        self.unmatched_errors: List[Frame] = []
        #: (receipt id, token, ERROR frame) matched, for :meth:`take_error_answers`
        self.error_answers: List[Tuple[str, Any, Frame]] = []
        #: the subscription ids this side UNSUBSCRIBEd and has not SUBSCRIBEd again,
        #: oldest first (at most :data:`UNSUBSCRIBED_KEPT`; a dict used as an ordered set)
        self.unsubscribed: Dict[str, None] = {}
        #: when (ms, the ``now_ms`` scale) CONNECTED is due (:meth:`connect_sent`), or None: no deadline
        self.connected_by_ms: Optional[float] = None
        #: the versions the CONNECT (or STOMP) frame offered (its ``accept-version``; none: 1.0 only),
        #: None until one was encoded: CONNECTED must name one of them
        self.offered_versions: Optional[Tuple[str, ...]] = None
        #: how the socket ended (:meth:`connection_lost`), None while it lives
        self.end: Optional[LinkEnd] = None
        #: its end is not reported to the API (a failover layer abandoning one attempt of its own)
        self.silent = False
        #: the API declared the session down while the socket lives (:meth:`set_down`)
        self.down = False

    # ------------------------------------------------------------ receiving

    def receive_data(self, data: bytes, now_ms: float) -> List[Frame]:
        """Bytes read from the socket at ``now_ms``: the frames they completed
        (EOLs between frames are heart-beats and complete none). Any byte counts
        as the peer's liveness.

        Raises:
            StompProtocolError: the stream is not STOMP (``.frames`` holds the
                frames completed before the fault).
        """
        self.last_read_ms = now_ms
        frames = self.parser.feed(data)
        if frames and self.connected_frame is None:  # CONNECTED has not come (not: the socket is closing)
            _before_connected(frames, self.offered_versions)
        return frames

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held by the parser."""
        return self.parser.buffered

    def peer_seen(self, now_ms: float) -> None:
        """The peer showed it is alive at ``now_ms`` without a byte being parsed
        (bytes waiting in the socket while reading is paused)."""
        self.last_read_ms = now_ms

    def handle(self, frame: Frame) -> Tuple[int, Any]:
        """Account for a received frame other than MESSAGE.

        Returns:
            (event, token): one of the module's event codes and, for RECEIPT
            and ERROR, the token registered for the frame's ``receipt-id``
            (None when there was none).
        """
        cmd = frame.cmd
        if cmd == "RECEIPT":
            token = self.pop_receipt(frame.headers.get("receipt-id"))
            if self.unmatched_errors:
                self._match_errors()
            return RECEIPT, token
        if cmd == "ERROR":
            if self.unsubscribed and unsubscribed_error(self.dialect, frame.headers, frame.body, self.unsubscribed):
                return UNSUBSCRIBED_ERROR, None  # neither the connection's last ERROR nor any receipt's answer
            self.last_error = frame
            self.last_error_ms = self.last_read_ms  # the read that completed it
            receipt_id = frame.headers.get("receipt-id")
            if receipt_id is None and self.receipts and not BROKERS[self.dialect].error_receipts:
                if len(self.receipts) == 1 and not self.unmatched_errors:
                    receipt_id = next(iter(self.receipts))  # the one frame it can answer (see the module docstring)
                else:  # one of them, or a frame sent without a receipt: matched later (_match_errors)
                    self.unmatched_errors.append(frame)
                    self.error_suspects.update(dict.fromkeys(self.receipts))
                    self._match_errors()
            self.error_receipt_id = receipt_id
            token = self.pop_receipt(receipt_id)
            return (ERROR if self.connected else CONNECT_REFUSED), token
        if cmd == "CONNECTED":
            self._on_connected(frame)
            return CONNECTED, None
        return UNEXPECTED, None

    def _on_connected(self, frame: Frame) -> None:
        self.version = self.parser.version
        self.connected_frame = frame
        self.server = frame.headers.get("server")
        self.dialect = dialect_of(self.server, self.broker)
        self.send_ms, self.recv_ms = negotiate(
            self.client_heartbeat, broker_heartbeat(frame.headers.get("heart-beat"), self.client_heartbeat))
        self.recv_timeout_ms = receive_timeout_ms(self.recv_ms, self.grace)
        if self.dialect == ACTIVEMQ:  # Classic's StompWireFormat limits (Artemis has its own)
            self.limits = ACTIVEMQ_LIMITS
            self.check_above = LIMITS_SAFE_BYTES
        self.connected_by_ms = None
        if self.link_state is LinkState.CONNECTING:
            self.link_state = LinkState.OPEN

    @property
    def connected(self) -> bool:
        """True from CONNECTED until the socket ends (also while closing)."""
        state = self.link_state
        return state is LinkState.OPEN or (state is LinkState.CLOSING and self.connected_frame is not None)

    @property
    def by_client(self) -> bool:
        """True once this side asked to close (:meth:`closing`): the end is no loss."""
        state = self.link_state
        return state is LinkState.CLOSING or state is LinkState.CLOSED

    @property
    def usable(self) -> bool:
        """True while CONNECTED came, the socket lives, nobody asked to close it and
        the API did not declare it down (:meth:`set_down`)."""
        return self.link_state is LinkState.OPEN and not self.down

    def set_down(self, down: bool) -> None:
        """The API declares the session down (True: stomp.py's ``set_connected(False)``,
        the receipt of a DISCONNECT it marked) or up again (False) while the socket
        lives: :attr:`usable` answers so; nothing else changes."""
        self.down = down

    def closing(self, silent: bool = False) -> None:
        """This side asks to close the socket (CLOSING; CLOSED if it ended already:
        its end is then the client's, no loss to recover from). ``silent``: its end
        is not reported to the API (:attr:`silent`; once set, it stays)."""
        if silent:
            self.silent = True
        state = self.link_state
        if state is LinkState.LOST or state is LinkState.CLOSED:
            self.link_state = LinkState.CLOSED
        else:
            self.link_state = LinkState.CLOSING

    # ------------------------------------------------------------ sending

    def encode(self, cmd: str, headers: Mapping[str, Any], body: bytes, auto_content_length: bool = True,
               head: Optional[bytes] = None) -> bytes:
        """The bytes of one frame in the session's version; a CONNECT/STOMP
        frame's ``heart-beat`` is remembered for the negotiation.

        Args:
            head (bytes | None): a pre-encoded :class:`~amqstomp.codec.FrameHead`
                for this version (its header lines come first).

        A SEND whose ``transformation`` ActiveMQ reads from the body gets no
        automatic ``content-length`` (:func:`~amqstomp._core.dialect.auto_content_length`).
        An UNSUBSCRIBE's ``id`` joins :attr:`unsubscribed`; a SUBSCRIBE's leaves it.
        A CONNECT's ``accept-version`` becomes :attr:`offered_versions`.

        Raises:
            FrameEncodeError: the frame cannot be written in this version (also:
                a NUL in the body of such a SEND).
            FrameLimitError: it breaks a limit the broker enforces (not sent).
        """
        if cmd == "SEND":  # (the most frequent first)
            if "transformation" in headers and auto_content_length and not _auto_content_length(cmd, headers):
                auto_content_length = False
                if b"\x00" in bytes(body):
                    raise FrameEncodeError("a SEND with transformation:%s goes without content-length (else "
                                           "ActiveMQ ignores the transformation and makes a BytesMessage), so its "
                                           "body cannot hold a NUL byte" % (headers.get("transformation"),))
        elif cmd == "CONNECT" or cmd == "STOMP":
            self.client_heartbeat = parse_heartbeat(headers.get("heart-beat"))
            offered = headers.get("accept-version")  # absent: "the client only supports 1.0" (STOMP 1.2)
            self.offered_versions = tuple(v.strip() for v in str(offered or "1.0").split(","))
        elif cmd == "UNSUBSCRIBE" or (cmd == "SUBSCRIBE" and self.unsubscribed):
            self._note_subscription(cmd, headers.get("id"))
        if head is None:
            data = encode_frame(cmd, headers, body, self.version, auto_content_length)
        else:
            data = encode_frame(cmd, headers, body, self.version, auto_content_length, head)
        if len(data) > self.check_above:
            self.check_limits(cmd, data, len(body))
        return data

    def check_limits(self, cmd: str, data: bytes, body_size: int) -> None:
        """Check an encoded frame (``data``, with a ``body_size``-byte body) against the
        limits the broker enforces (:func:`amqstomp._core.limits.check_limits`); only
        needed above :attr:`check_above` bytes.

        Raises:
            FrameLimitError: it breaks one (not to be sent).
        """
        check_limits(self.limits, cmd, data, body_size, self.server)

    def _note_subscription(self, cmd: str, sub_id: Any) -> None:
        if sub_id is None:
            return
        sub_id = str(sub_id)
        unsubscribed = self.unsubscribed
        unsubscribed.pop(sub_id, None)
        if cmd == "UNSUBSCRIBE":
            unsubscribed[sub_id] = None
            if len(unsubscribed) > UNSUBSCRIBED_KEPT:
                del unsubscribed[next(iter(unsubscribed))]

    def data_written(self, now_ms: float) -> None:
        """Bytes went out at ``now_ms`` (they count as this side's heart-beat)."""
        self.last_write_ms = now_ms

    # ------------------------------------------------------------ receipts

    def expect_receipt(self, receipt_id: str, token: Any) -> None:
        """Remember ``token`` until the RECEIPT (or ERROR) for ``receipt_id``."""
        self.receipts[receipt_id] = token

    def pop_receipt(self, receipt_id: Optional[str]) -> Any:
        """The token registered for ``receipt_id`` (forgotten now), or None."""
        if receipt_id is None:
            return None
        if self.error_suspects:
            self.error_suspects.pop(receipt_id, None)
        return self.receipts.pop(receipt_id, None)

    def _match_errors(self) -> None:
        """Match the :attr:`unmatched_errors` with their suspects, in order, once no
        more suspects are left than such ERRORs (the other ERRORs answered frames
        sent without a receipt)."""
        errors, suspects = self.unmatched_errors, self.error_suspects
        if len(suspects) > len(errors):
            return
        for receipt_id, frame in zip(suspects, errors):
            token = self.receipts.pop(receipt_id, None)
            if token is not None:
                self.error_answers.append((receipt_id, token, frame))
        suspects.clear()
        errors.clear()

    def take_error_answers(self) -> List[Tuple[str, Any, Frame]]:
        """The receipts an ERROR naming none was matched with since the last call
        (see the module docstring), as (receipt id, token, ERROR frame); forgotten now."""
        answers, self.error_answers = self.error_answers, []
        return answers

    def connection_lost(self, reason: str = "", error: Optional[BaseException] = None) -> List[Any]:
        """The socket is gone: not connected any more; the tokens of every receipt
        still awaited (none will come; with an ERROR naming no receipt, more than it
        could answer: whose it was is unknown). CLOSED when this side asked to close, else LOST;
        :attr:`end` records ``reason``, ``error`` and by whom (the first end only)."""
        by_client = self.by_client
        self.link_state = LinkState.CLOSED if by_client else LinkState.LOST
        if self.end is None:
            self.end = LinkEnd(reason, error, by_client)
        self.error_suspects.clear()
        self.unmatched_errors.clear()
        tokens = list(self.receipts.values())
        self.receipts.clear()
        return tokens

    # ------------------------------------------------------------ heart-beats

    @property
    def send_period_ms(self) -> float:
        """How often (ms) the send check runs; 0 when no heart-beats are sent."""
        return send_period_ms(self.send_ms)

    def heartbeat_due_in_ms(self, now_ms: float) -> float:
        """0 when a heart-beat must be written now (nothing was written for the
        send period), else the ms until one is due. Only with ``send_ms`` > 0."""
        period = send_period_ms(self.send_ms)
        idle = now_ms - self.last_write_ms
        return 0.0 if idle >= period * DUE_SLACK else period - idle

    def receive_left_ms(self, now_ms: float) -> float:
        """ms of silence left before the peer is overdue (<= 0: overdue now)."""
        return self.last_read_ms + self.recv_timeout_ms - now_ms

    def next_deadline(self, now_ms: float) -> Optional[float]:
        """The next time (ms, same scale as ``now_ms``) something is due: a
        heart-beat to write, the peer's receive deadline, or (CONNECTING) the
        CONNECTED deadline (:meth:`connect_sent`); None when none is."""
        due = []
        if self.connected_by_ms is not None and self.link_state is LinkState.CONNECTING:
            due.append(self.connected_by_ms)
        if self.send_ms:
            due.append(now_ms + self.heartbeat_due_in_ms(now_ms))
        if self.recv_ms:
            due.append(self.last_read_ms + self.recv_timeout_ms)
        return min(due) if due else None

    # ------------------------------------------------------------ the CONNECTED deadline

    def connect_sent(self, now_ms: float, within_ms: float) -> None:
        """CONNECT (or STOMP) went out at ``now_ms``: the broker's CONNECTED is due
        within ``within_ms`` ms (the driver's connect timeout). No effect once the
        session is past CONNECTING (CONNECTED came, or the socket is closing or gone).

        Raises:
            ValueError: ``within_ms`` is not a finite number >= 0.
        """
        within = float(within_ms)
        if not 0.0 <= within < float("inf"):
            raise ValueError("within_ms must be a finite number of ms >= 0, got %r" % (within_ms,))
        if self.link_state is LinkState.CONNECTING:
            self.connected_by_ms = float(now_ms) + within

    def connected_overdue(self, now_ms: float) -> bool:
        """True when :meth:`connect_sent`'s deadline has passed at ``now_ms`` and the
        session is still CONNECTING: the broker accepted the socket but did not
        answer CONNECT in time (the driver ends the socket as a loss)."""
        due = self.connected_by_ms
        return due is not None and self.link_state is LinkState.CONNECTING and now_ms >= due


def _before_connected(frames: List[Frame], offered: Optional[Tuple[str, ...]] = None) -> None:
    """Frames received before CONNECTED was handled: a MESSAGE ahead of the
    CONNECTED frame is a protocol error (STOMP 1.2 "Connecting": the server's
    first frame answers CONNECT), never a delivery; so is a CONNECTED whose
    ``version`` (none: 1.0) is not one of the ``offered`` versions ("Protocol
    Negotiation": the server picks the highest version both speak).

    Raises:
        StompProtocolError: with ``.frames`` the frames before the MESSAGE or CONNECTED.
    """
    for index, frame in enumerate(frames):
        cmd = frame.cmd
        if cmd == "CONNECTED":
            version = frame.headers.get("version", "1.0")
            if offered is not None and version not in offered:
                error = StompProtocolError("the broker's CONNECTED names version %r, which this client did not "
                                           "offer (accept-version:%s)" % (version, ",".join(offered)))
                error.frames = frames[:index]
                raise error
            return
        if cmd == "MESSAGE":
            error = StompProtocolError("a MESSAGE frame before CONNECTED (destination %r)"
                                       % (frame.headers.get("destination"),))
            error.frames = frames[:index]
            raise error
