"""Exceptions raised by amqstomp.

Every exception amqstomp raises derives from :class:`StompException`, so
``except amqstomp.exception.StompException`` catches them all.  The names
shared with stomp.py (``StompException``, ``ConnectionClosedException``,
``NotConnectedException``, ``ConnectFailedException``,
``InterruptedException``) keep stomp.py's meaning, so code written against
stomp.py keeps catching what it caught before. ``from amqstomp.exception import *``
(``stomp.exception``) gives those five, as stomp.py's does; amqstomp's own
exceptions are imported by name.
"""
from typing import Any, List, Optional

__all__ = ["StompException", "ConnectionClosedException", "NotConnectedException", "ConnectFailedException",
           "InterruptedException"]


class StompException(Exception):
    """Base class of every amqstomp exception."""


class ConnectionClosedException(StompException):
    """The connection was closed (by the broker, the network or ``disconnect``)
    while an operation was waiting on it."""


class NotConnectedException(StompException):
    """An operation needs a connected session and there is none."""


class ConnectFailedException(StompException):
    """Connecting failed: the socket could not be opened, the broker answered
    the CONNECT frame with ERROR, or no CONNECTED frame came within the timeout."""


class InterruptedException(StompException):
    """A read was interrupted (kept for stomp.py compatibility)."""


class WrongEventLoopError(StompException, RuntimeError):
    """An :mod:`amqstomp.aio` client (or its subscription, transaction or message) was
    awaited on an event loop other than the one it was connected on: another thread's loop,
    or a new ``asyncio.run()`` after the owning one ended. Raised before anything is written
    or waited for (asyncio's futures and transports belong to one loop: a write from another
    thread is not supported, and its wait would fail after the frame went out). A
    RuntimeError, as asyncio's own wrong-loop errors. From another thread, hand the coroutine
    to the client's loop: ``asyncio.run_coroutine_threadsafe(coro, loop)``."""

    def __init__(self, message: str = "this Client belongs to the event loop it was connected on; from another "
                                      "thread use asyncio.run_coroutine_threadsafe(coro, loop)") -> None:
        super().__init__(message)


class StompProtocolError(StompException):
    """A peer sent bytes that are not a valid STOMP frame, or a frame broke a
    configured limit (STOMP 1.2 spec, "Augmented BNF" and "Size Limits").

    Attributes:
        offset (int): byte offset, counted from the first byte ever fed to the
            parser, at which the fault was found.
        frames (list): frames the failing ``feed`` call completed before the
            fault, to be handed on before the error is dealt with.
    """

    def __init__(self, message: str, offset: int = -1) -> None:
        self.offset = offset
        self.frames: List[Any] = []
        if offset >= 0:
            message = "%s (at byte offset %d)" % (message, offset)
        super().__init__(message)


class WebSocketProtocolError(StompProtocolError):
    """The broker's WebSocket frames broke RFC 6455, so the client failed the
    WebSocket connection (section 7.1.7) with ``close_code`` in its Close frame
    and closed the socket: 1002 a protocol error (section 5), 1007 a text
    message that is not UTF-8 (section 8.1), 1009 a message over the largest
    STOMP frame this client takes (sections 7.4.1, 10.4; the limit is
    :data:`amqstomp._core.limits.MAX_RECEIVED_FRAME_BYTES`). Listeners get
    it in ``on_protocol_error``, then ``on_disconnected``.

    Attributes:
        close_code (int | None): the close code sent (RFC 6455 section 7.4.1).
        limit (int | None): for 1009, the limit in bytes.
        url (str): the WebSocket URL.
    """

    def __init__(self, message: str, close_code: Optional[int] = None, limit: Optional[int] = None,
                 url: str = "") -> None:
        self.close_code = close_code
        self.limit = limit
        self.url = url
        super().__init__(message)


class FrameEncodeError(StompException, ValueError):
    """The application asked to encode a frame that cannot be written in the
    chosen STOMP version: a header name or value holding a character the
    version cannot carry, or a ``content-length`` that does not match the body."""


class FrameLimitError(FrameEncodeError):
    """The frame breaks a limit that the connected broker is known to enforce
    (CONNECTED's ``server`` names it): the broker would answer ERROR and close
    the connection, losing the frame, so it is not written. Only limits of
    brokers amqstomp knows are checked (ActiveMQ Classic's STOMP wire format:
    a header line of at most 10240 bytes encoded, at most 1000 headers, a frame
    of at most 100 MiB); with other brokers nothing is checked.

    Attributes:
        limit (str): ``"header line"``, ``"headers"`` or ``"frame size"``.
        maximum (int): the limit (bytes, or a number of headers).
        actual (int): what the frame has.
        header (str | None): the header whose line is too long (``"header line"``).
    """

    def __init__(self, message: str, limit: str = "", maximum: int = 0, actual: int = 0,
                 header: Optional[str] = None) -> None:
        self.limit = limit
        self.maximum = maximum
        self.actual = actual
        self.header = header
        super().__init__(message)


class ReceiptTimeout(StompException, TimeoutError):
    """No RECEIPT for a frame within the caller's timeout (STOMP 1.2 spec, "RECEIPT")."""


class WriteTimeout(ReceiptTimeout):
    """A frame sent without a receipt was handed to the socket, and the socket took no
    more bytes within the caller's timeout: its send buffer stayed full (the broker
    stopped reading, or reads slower than the client writes). The frame waits in the
    transport's buffer: it goes out if the broker reads again, and is lost with the
    socket otherwise; nothing says the broker got it. No receipt was asked for; it is a
    :class:`ReceiptTimeout` (a ``TimeoutError``) so that code catching that around a
    send keeps catching it. Raised by :meth:`amqstomp.aio.Client.send` with
    ``receipt=False`` (the threaded APIs close such a socket as a loss instead:
    ``ConnectionClosedException``)."""


class RequiredArgumentError(StompException, ValueError, AssertionError):
    """A required argument is None (``send(destination=None)``,
    ``set_listener(name, None)``, ``ack(None)``...). stomp.py 9.0 checks these
    with ``assert`` (AssertionError, and nothing at all under ``python -O``);
    amqstomp always checks, and the exception is both a ValueError and an
    AssertionError, so ``except`` clauses written for either keep working."""


class UnknownTransactionError(StompException, ValueError):
    """``commit()`` or ``abort()`` of a transaction this connection did not
    begin, or ended already (committed, aborted), or that began before the
    connection was opened again; or ``send()``, ``ack()`` or ``nack()`` in such
    a transaction: ActiveMQ would answer ERROR ("Invalid transaction id") and
    the caller would never hear of it. Nothing is sent."""


class DuplicateTransactionError(StompException, ValueError):
    """``begin()`` of a transaction id this connection has begun already and
    not ended (committed, aborted): ActiveMQ would answer ERROR ("The
    transaction was already started") and the caller would never hear of it.
    Nothing is sent."""


class UnknownSubscriptionError(StompException, ValueError):
    """``unsubscribe(id)`` of a subscription id this connection has not
    subscribed (with ``subscribe()`` or a SUBSCRIBE frame through
    ``send_frame``), or unsubscribed already, or whose SUBSCRIBE the broker
    refused, or that was made before the connection was opened again:
    ActiveMQ would answer ERROR ("No subscription matched.") and the caller
    would never hear of it. Nothing is sent."""


class InvalidTimeoutError(StompException, ValueError, TypeError):
    """A timeout (seconds) that is not one: not a real number (``"abc"``,
    ``True``), NaN, or where it must be, negative or infinite. Raised by every
    public wait before it waits (:func:`amqstomp.utils.clamp_wait`), naming the
    argument. Both a ValueError and a TypeError, so ``except`` clauses written
    for either catch it."""


class InvalidDestinationError(StompException, ValueError):
    """A SEND or SUBSCRIBE destination that no broker takes: empty, or a
    destination prefix (``/queue/``, ``/topic/``, ``/temp-queue/``...) with no
    name after it. ActiveMQ 5.17 closes the connection on most of them without
    an ERROR frame (the caller would only see "connection closed by the
    broker"); RabbitMQ answers ERROR "Invalid destination". Nothing is sent."""


class UnknownMessageError(StompException, ValueError):
    """``ack()`` or ``nack()`` of a message this connection was not handed (or
    acknowledged already, individually or by a cumulative ACK): ActiveMQ would
    answer ERROR ("Unexpected ACK received"), on STOMP 1.0/1.1 close the
    connection, and the caller would never hear of it. Nothing is sent."""


#: Lines of an ERROR body that a :class:`BrokerError`'s message quotes, at most.
REASON_LINES = 3
#: Characters of an ERROR body that a :class:`BrokerError`'s message quotes, at most.
REASON_CHARS = 400


def broker_reason(frame: Any) -> str:
    """The broker's own reason in an ERROR frame, for an exception's message:
    its ``message`` header, then the first lines of its body (at most
    :data:`REASON_LINES` lines and :data:`REASON_CHARS` characters; lines that
    repeat the ``message`` and Java stack frames are left out), e.g.
    ``Bad CONNECT: Virtual host '127.0.0.1' access denied``."""
    headers = getattr(frame, "headers", None) or {}
    message = str(headers.get("message", "") or "").strip()
    body = getattr(frame, "body", b"") or b""
    text = bytes(body).decode("utf-8", "replace") if isinstance(body, (bytes, bytearray, memoryview)) else str(body)
    lines: List[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("at ") or line.startswith("...") \
                or (message and (line == message or line.endswith(": " + message))):
            continue  # a Java stack frame, or the message again (``SomeException: <message>``)
        lines.append(line)
        if len(lines) >= REASON_LINES:
            break
    details = " ".join(lines)
    if len(details) > REASON_CHARS:
        details = details[:REASON_CHARS] + "..."
    if message and details:
        return "%s: %s" % (message, details)
    return message or details or "(an ERROR frame with no message)"


class BrokerError(StompException):
    """The broker answered a frame with an ERROR frame (STOMP 1.2 spec, "ERROR").
    The exception's message ends with the broker's reason (:func:`broker_reason`:
    the ERROR's ``message`` header and the first lines of its body) and the
    receipt it answered, if any.

    Attributes:
        frame: the ERROR frame.
        broker_message (str): its ``message`` header ("" when none).
        reason (str): :func:`broker_reason` of it.
        receipt_id (str | None): the receipt it answered: its ``receipt-id``, or
            the one receipt awaited when the broker names none (RabbitMQ).
    """

    def __init__(self, message: str, frame: Optional[Any] = None, receipt_id: Optional[str] = None) -> None:
        self.frame = frame
        headers = getattr(frame, "headers", None) or {}
        self.broker_message = str(headers.get("message", "") or "")
        self.reason = broker_reason(frame) if frame is not None else ""
        self.receipt_id = receipt_id if receipt_id is not None else headers.get("receipt-id")
        if self.reason and self.reason not in message:
            message = "%s: %s" % (message, self.reason)
        if self.receipt_id is not None and repr(str(self.receipt_id)) not in message:
            message = "%s (ERROR for receipt %r)" % (message, str(self.receipt_id))
        super().__init__(message)


class ConnectRefusedError(ConnectFailedException, BrokerError):
    """The broker answered CONNECT with an ERROR frame (a wrong login, an
    unknown virtual host, a client id in use...): the exception's message
    carries the broker's reason (:func:`broker_reason`). A
    :class:`ConnectFailedException` and a :class:`BrokerError`. Trying again
    will not help (a connect with failover stops at it, unless it was
    connected before: a client id the broker still holds for the lost socket
    is let go after a while).

    Attributes:
        frame, broker_message, reason, receipt_id: as :class:`BrokerError`.
    """

    def __init__(self, message: str, frame: Optional[Any] = None) -> None:
        BrokerError.__init__(self, message, frame)


class ConfigurationError(StompException, ValueError):
    """A URI, option or destination option is not understood: an OpenWire
    ``tcp://`` URI, an unknown ``jms.*`` option, a value of the wrong type. The
    message names the option and the URI (ActiveMQConnectionFactory refuses
    unknown ``jms.*`` options too)."""


class UnknownEncodingError(ConfigurationError, LookupError):
    """The ``encoding`` given to a connection names no text codec Python has
    (``codecs.lookup`` finds none, or finds a bytes-to-bytes one such as
    ``"base64"``), raised when the connection is made, naming the keyword and the
    value. A ConfigurationError (a ValueError), and a LookupError as
    ``codecs.lookup``'s own: code that caught the error of the first ``send``
    keeps catching it. stomp.py 9.0 stores ``encoding`` and never uses it (its
    bodies are UTF-8 both ways), so no stomp.py program saw an error there."""


class InvalidHostError(ConnectFailedException, ConfigurationError):
    """A ``host_and_ports`` entry that names no broker (a host that is not a
    non-empty ``str``, a port outside 1-65535), raised by ``connect()``: the
    connection is built as in stomp.py, whose ``connect()`` raised
    ConnectFailedException after failing to look the entry up
    (stomp/transport.py ``attempt_connection``). Also a ConfigurationError (a
    ValueError): the message names the entry."""


class TransactionRolledBackError(StompException):
    """``commit()`` failed and the transaction was rolled back: the broker
    refused the COMMIT, or the connection was lost while the transaction was
    open (the broker rolls back a transaction whose connection ends; ActiveMQ's
    ``javax.jms.TransactionRolledBackException`` after a failover). Its sends
    were dropped; its consumed messages come again."""


class TransactionInDoubtError(StompException):
    """``commit()`` does not know whether the broker committed: the COMMIT frame
    was written, then the socket was lost (or no RECEIPT came within the send
    timeout) before the broker's RECEIPT arrived. The broker may or may not have
    committed. If it did, the transaction's sends are delivered and its consumed
    messages are gone; if not, the sends were dropped and the consumed messages
    are redelivered by the broker (``redelivered: true``). Nothing is
    redelivered locally. Not a :class:`TransactionRolledBackError`: undoing the
    application's work as for a rollback would be wrong if the broker committed
    (an application that needs to know keeps its own idempotency key).

    Source: ActiveMQ's ``ActiveMQSession.commit()`` over failover, where a
    COMMIT whose reply was lost is in doubt (``TransactionRolledBackException``
    there only when the broker is known not to have it)."""


class TransactionPartlyCommittedError(TransactionInDoubtError):
    """``commit()`` of a JMS session whose transaction went on two sockets: its
    SENDs were committed on the producer socket (it began with a send, before
    the session had a consumer), and the COMMIT of its acknowledgements on the
    consumer socket failed (``acks_in_doubt`` False: never written, the broker
    redelivers the consumed messages) or got no receipt (``acks_in_doubt``
    True). Do not send again: the sends are delivered. A
    :class:`TransactionInDoubtError` (the transaction as a whole is neither
    committed nor rolled back), never a :class:`TransactionRolledBackError`.

    Attributes:
        acks_in_doubt (bool): whether the acknowledgements' COMMIT was written.
    """

    def __init__(self, message: str, acks_in_doubt: bool = False) -> None:
        super().__init__(message)
        self.acks_in_doubt = acks_in_doubt


class SendInDoubtError(ConnectionClosedException):
    """A SEND that waited for its RECEIPT was written, then its socket was lost
    before the RECEIPT came: the broker may or may not have the message (STOMP
    1.2 "RECEIPT": only a RECEIPT says the broker processed the frame). Not sent
    again (a second copy could be a duplicate). A
    :class:`ConnectionClosedException`, so code written for the threaded API's
    ``send(..., receipt=...)`` on a lost socket keeps catching it. Raised by
    :meth:`amqstomp.aio.Client.send`, and by the threaded APIs' sends (stomp.py's
    ``send``, JMS's ``MessageProducer.send``) whose write was under way when the
    connection was ended because the broker took none of its bytes (it stopped
    reading: ``Connection(timeout=...)``, ``jms.sendTimeout``, else 10 s without
    progress; see docs/guides/failover.md): that frame was not written whole, and
    the frames written before it that still waited in the socket may or may not
    have reached the broker."""


class AcknowledgeInterruptedError(ConnectionClosedException):
    """An ACK or NACK was not sent: the message came on a socket that was lost
    since (failover). It is never written on another socket (the broker answers
    an ACK of a lost socket's message with an ERROR, or on STOMP 1.0/1.1 it would
    acknowledge the redelivered copy before the application saw it); the broker
    redelivers the message (``redelivered: true``). A
    :class:`ConnectionClosedException`: the socket that delivered the message is
    closed.

    Attributes:
        count (int): messages of this acknowledgement that were not acknowledged.
    """

    def __init__(self, message: str, count: int = 1) -> None:
        self.count = count
        super().__init__(message)


class AcknowledgeInDoubtError(StompException):
    """An ACK that waits for its RECEIPT (``jms.sendAcksAsync=false``) was
    written, then its socket was lost (or no RECEIPT came within the timeout)
    before the broker's RECEIPT: the broker may or may not have applied it. If
    it did, the messages are settled; if not, it redelivers them
    (``redelivered: true``). Not an :class:`AcknowledgeInterruptedError`,
    which says for certain that nothing was acknowledged.

    Attributes:
        count (int): messages whose acknowledgement is in doubt (JMS
            ``CLIENT_ACKNOWLEDGE``: every message the cumulative ACK names).
    """

    def __init__(self, message: str, count: int = 1) -> None:
        self.count = count
        super().__init__(message)


class ModuleConflictError(StompException, ImportError):
    """:func:`amqstomp.install_as_stomp` was called after the real stomp.py was
    imported: ``stomp`` (or a ``stomp.*`` module) in ``sys.modules`` is stomp.py's.
    Mixing the two libraries' classes would break ``isinstance`` and
    ``except`` clauses, so nothing is installed: call it before anything
    imports ``stomp``."""


class WebSocketUnavailableError(StompException, ImportError):
    """STOMP over WebSocket was asked for (:class:`amqstomp.WSConnection`) but the
    WebSocket library it runs on, the ``websockets`` package, is not installed:
    ``pip install 'amqstomp[ws]'``."""


class WebSocketHandshakeError(ConnectFailedException):
    """The HTTP upgrade to WebSocket failed (RFC 6455 section 4.1): the server
    refused it (``status`` is its HTTP status code, ``reason`` its reason
    phrase), answered something that is not HTTP (a STOMP port, say), closed
    the connection, or did not answer in time (``status`` None then).

    Attributes:
        url (str): the WebSocket URL that was asked for.
        status (int | None): the HTTP status code of a refusal.
        reason (str): the server's reason phrase, or what went wrong.
    """

    def __init__(self, message: str, url: str = "", status: Optional[int] = None, reason: str = "") -> None:
        self.url = url
        self.status = status
        self.reason = reason
        super().__init__(message)
