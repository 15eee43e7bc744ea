"""What a broker's ERROR frame means for one socket's waiters: one decision, which every driver applies.

STOMP 1.2 "ERROR": the broker's ERROR answers the frame whose ``receipt`` its ``receipt-id``
names; one that comes before CONNECTED answers CONNECT ("Connecting"). Which waiter an ERROR
answers is :meth:`amqstomp._core.state.ProtocolState.handle`'s to say (with RabbitMQ's ERRORs,
which name no receipt, :meth:`~amqstomp._core.state.ProtocolState.take_error_answers`); this
module says what follows from it, as values, for the threaded driver
(:meth:`amqstomp._io.link.Link.on_control_frame`) and the asyncio one
(:meth:`amqstomp.aio._link.AioLink._frame`) alike:

* :func:`error_outcome` -- for an ERROR event of ``handle``: the receipt token that fails and the
  :class:`~amqstomp.exception.BrokerError` it fails with, the
  :class:`~amqstomp.exception.ConnectRefusedError` the CONNECTED wait fails with (an ERROR
  answering CONNECT), the typed event for the listeners (:class:`~amqstomp._core.events.ErrorIn`,
  :class:`~amqstomp._core.events.ConnectRefused`), and the log line and its level (a late answer
  to this side's own UNSUBSCRIBE is logged at DEBUG and is nothing else);
* :func:`error_answer_failures` -- the receipts an ERROR naming none was matched with, each with
  the :class:`~amqstomp.exception.BrokerError` it fails with;
* :func:`last_error_note` -- what the reason of a connection the broker ended adds: its last ERROR;
* :func:`connect_wait_failure` -- what the CONNECTED wait fails with when the socket ended first
  (saying so when the broker closed it before CONNECTED without an ERROR frame).

Pure: no socket, thread, lock or clock (times come in as ms). The drivers log with their own
loggers, at the level and with the text given here.
"""
import logging
from typing import Any, List, Optional, Tuple

from ..exception import BrokerError, ConnectFailedException, ConnectRefusedError, broker_reason
from .events import ConnectRefused, ErrorIn, LinkEvent
from .state import CONNECT_REFUSED, ERROR, UNSUBSCRIBED_ERROR, ProtocolState

__all__ = ["ERROR_EVENTS", "ErrorOutcome", "error_outcome", "error_answer_failures", "last_error_note",
           "connect_wait_failure", "ANSWERED", "ANSWERED_NAMING_NONE", "REFUSED", "NO_ERROR_FRAME"]

#: the events of :meth:`~amqstomp._core.state.ProtocolState.handle` for an ERROR frame (:func:`error_outcome`)
ERROR_EVENTS = frozenset((ERROR, CONNECT_REFUSED, UNSUBSCRIBED_ERROR))
#: the message of the BrokerError a receipt wait answered by an ERROR fails with
ANSWERED = "the broker answered with ERROR"
#: ... by an ERROR naming no receipt, matched with it once every other receipt awaited was answered
ANSWERED_NAMING_NONE = ANSWERED + " (naming no receipt: every other receipt awaited then was answered)"
#: the message of the ConnectRefusedError the CONNECTED wait fails with
REFUSED = "the broker refused the connection"
#: what the reason of a socket the broker closed before CONNECTED, with no ERROR, adds
NO_ERROR_FRAME = " without an ERROR frame (no reason given: a refused login, or a broker stopping)"


class ErrorOutcome:
    """What to do for one ERROR frame (:func:`error_outcome`).

    Attributes:
        token (Any): the receipt token (the driver's future) the ERROR answers, or None.
        error (BrokerError | None): what ``token`` fails with (None when there is no token).
        refused (ConnectRefusedError | None): what the CONNECTED wait fails with: the ERROR
            answers CONNECT (None after CONNECTED).
        event (LinkEvent | None): the listeners' event (ErrorIn, ConnectRefused), or None.
        level (int): the :mod:`logging` level of :attr:`log_line`.
        log_line (str): what the driver logs, the broker's reason included.
        unanswered (bool): an ERROR after CONNECTED that answers no waiter: its receipt names
            none awaited, and it is not kept to be matched with one (an ERROR naming no receipt
            while receipts are awaited, :meth:`~amqstomp._core.state.ProtocolState.take_error_answers`).
            Only a listener hears it (the asyncio API's ``on_error``).
    """

    __slots__ = ("token", "error", "refused", "event", "level", "log_line", "unanswered")

    def __init__(self, token: Any, error: Optional[BrokerError], refused: Optional[ConnectRefusedError],
                 event: Optional[LinkEvent], level: int, log_line: str, unanswered: bool = False) -> None:
        self.token = token
        self.error = error
        self.refused = refused
        self.event = event
        self.level = level
        self.log_line = log_line
        self.unanswered = unanswered

    def __repr__(self) -> str:
        return "ErrorOutcome(token=%r, error=%r, refused=%r, event=%r, level=%s, log_line=%r, unanswered=%r)" % (
            self.token, self.error, self.refused, self.event, logging.getLevelName(self.level), self.log_line,
            self.unanswered)


def error_outcome(proto: ProtocolState, event: int, token: Any, frame: Any) -> ErrorOutcome:
    """The outcome of an ERROR ``frame`` that ``proto.handle(frame)`` just returned as
    ``(event, token)``: :data:`~amqstomp._core.state.ERROR`,
    :data:`~amqstomp._core.state.CONNECT_REFUSED` or
    :data:`~amqstomp._core.state.UNSUBSCRIBED_ERROR` (STOMP 1.2 "ERROR", "Connecting").
    Call it right after ``handle`` (it reads the receipt the ERROR was matched with,
    :attr:`~amqstomp._core.state.ProtocolState.error_receipt_id`).

    Raises:
        ValueError: ``event`` is not one of those three.
    """
    reason = broker_reason(frame)
    if event == UNSUBSCRIBED_ERROR:
        return ErrorOutcome(None, None, None, None, logging.DEBUG,
                            "broker ERROR after this client's UNSUBSCRIBE (not an error): %s" % reason)
    if event != ERROR and event != CONNECT_REFUSED:
        raise ValueError("error_outcome takes an ERROR event of ProtocolState.handle, got event %r for a %s frame"
                         % (event, getattr(frame, "cmd", "?")))
    error = BrokerError(ANSWERED, frame, proto.error_receipt_id) if token is not None else None
    if event == CONNECT_REFUSED:
        return ErrorOutcome(token, error, ConnectRefusedError(REFUSED, frame), ConnectRefused(frame),
                            logging.WARNING, "broker ERROR: %s" % reason)
    unanswered = token is None and not any(kept is frame for kept in proto.unmatched_errors) \
        and not any(kept is frame for _, _, kept in proto.error_answers)
    return ErrorOutcome(token, error, None, ErrorIn(frame), logging.WARNING, "broker ERROR: %s" % reason,
                        unanswered)


def error_answer_failures(answers: List[Tuple[str, Any, Any]]) -> List[Tuple[Any, BrokerError]]:
    """The receipt waits that ERRORs naming no receipt were matched with
    (:meth:`~amqstomp._core.state.ProtocolState.take_error_answers`: (receipt id, token,
    ERROR frame)), each as (token, the BrokerError it fails with)."""
    return [(token, BrokerError(ANSWERED_NAMING_NONE, frame, receipt_id)) for receipt_id, token, frame in answers]


def last_error_note(proto: ProtocolState, now_ms: float) -> str:
    """What the reason of a connection the broker ended adds at ``now_ms`` (ms, the scale
    ``proto`` is fed with): ``"; its last ERROR (0.12 s before): <the broker's reason>"``,
    or "" when no ERROR came (:attr:`~amqstomp._core.state.ProtocolState.last_error`)."""
    frame = proto.last_error
    if frame is None:
        return ""
    return "; its last ERROR (%.2f s before): %s" % ((now_ms - proto.last_error_ms) / 1000.0, broker_reason(frame))


def connect_wait_failure(proto: ProtocolState, reason: str, error: Optional[BaseException]) -> ConnectFailedException:
    """What the CONNECTED wait fails with when the socket ended (``reason``, ``error``: why)
    before it was answered: "connection closed before CONNECTED: <reason>" ("right after"
    when CONNECTED came but the wait had not seen it yet); a socket the broker closed before
    CONNECTED with no ERROR (:attr:`~amqstomp._core.state.ProtocolState.last_error`) and no
    error of this side's says so (:data:`NO_ERROR_FRAME`: ActiveMQ closes a refused login's
    socket before its ERROR now and then). The CONNECTED deadline that passed (``error`` a
    TimeoutError: the peer accepted the socket and never answered) is ``reason`` alone ("no
    CONNECTED frame within <s> s"), not a close. ``error`` is its ``__cause__``."""
    was_connected = proto.connected_frame is not None
    if not was_connected and isinstance(error, TimeoutError):  # the CONNECTED deadline: no close ended the wait
        timed_out = ConnectFailedException(reason)
        timed_out.__cause__ = error
        return timed_out
    if not was_connected and not proto.by_client and error is None and proto.last_error is None:
        reason += NO_ERROR_FRAME
    failed = ConnectFailedException("connection closed %s CONNECTED: %s"
                                    % ("right after" if was_connected else "before", reason))
    failed.__cause__ = error
    return failed
