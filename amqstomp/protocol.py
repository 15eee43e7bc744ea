"""The frames of the stomp.py API: what ``send``, ``subscribe``, ``ack`` ... write, per STOMP version.

The counterpart of stomp.py's ``stomp.protocol`` (``Protocol10``, ``Protocol11``,
``Protocol12``; this module answers to that name after
:func:`amqstomp.install_as_stomp`, and holds the listener and constant names
stomp.py's star-imports). Each is a stomp.py listener (``Protocol10`` a
:class:`~amqstomp.listener.ConnectionListener`, ``Protocol11``/``12`` a
:class:`~amqstomp.listener.HeartbeatListener`) and a
:class:`~amqstomp._session.StompSession` (connect, ``send_frame``,
disconnect, failover). ``Protocol12(transport)`` runs a session over a
:class:`~amqstomp.transport.Transport` you made, as in stomp.py;
:mod:`amqstomp.connection`'s ``StompConnection10/11/12`` combine them with
the transport they make (:class:`~amqstomp.connection.BaseConnection`). Every
frame goes through the engine's rules (:class:`amqstomp._engine.client.Client`):
a frame of a transaction on its BEGIN's socket, an ACK on the socket that
delivered the message.

Heart-beats are the engine's (negotiated and run by the transport's link), so
the heart-beat listener's callbacks do nothing on a protocol object; a
subclass that defines a callback (``on_message``...) hears it, as the
connection is registered on its transport as ``"protocol-listener"``.
"""
import functools
import logging
from concurrent.futures import Future
from typing import Any, Dict, Mapping, Optional, Tuple, cast

from ._session import StompSession
from .constants import (  # stomp.py's module star-imports stomp.listener (and its constants)
    CMD_ABORT, CMD_ACK, CMD_BEGIN, CMD_COMMIT, CMD_CONNECT, CMD_DISCONNECT, CMD_NACK, CMD_SEND, CMD_STOMP,
    CMD_SUBSCRIBE, CMD_UNSUBSCRIBE, HDR_ACCEPT_VERSION, HDR_ACK, HDR_CONTENT_LENGTH, HDR_CONTENT_TYPE,
    HDR_DESTINATION, HDR_HEARTBEAT, HDR_HOST, HDR_ID, HDR_LOGIN, HDR_MESSAGE_ID, HDR_PASSCODE, HDR_RECEIPT,
    HDR_SUBSCRIPTION, HDR_TRANSACTION,
)
from ._core.dialect import auto_content_length
from ._core.subscriptions import plain_headers
from .exception import (
    AcknowledgeInterruptedError, BrokerError, ConfigurationError, ConnectFailedException, DuplicateTransactionError,
    NotConnectedException, RequiredArgumentError, TransactionRolledBackError, UnknownMessageError,
    UnknownSubscriptionError, UnknownTransactionError,
)
from .listener import (
    ConnectionListener, HeartbeatListener, PrintingListener, Publisher, StatsListener, TestListener, WaitingListener,
)
from .listener import *  # noqa: F401,F403 -- stomp.py's module star-imports stomp.listener (modules too)
from . import listener as _listener
from .transport import Transport
from ._subscribe_args import ACK_DEFAULT as _ACK_DEFAULT, RESERVED_KEYWORDS as RESERVED_KEYWORDS, AckMode as AckMode
from ._subscribe_args import pop_reserved as pop_reserved, subscribe_arguments as _subscribe_arguments
from ._core.destinations import check_destination
from ._core.frames import body_bytes, check_headers
from .utils import get_uuid, merge_headers

#: What ``from amqstomp.protocol import *`` (``stomp.protocol``) gives: stomp.py 9.0's names,
#: no more (amqstomp's own, ``BaseProtocol``, ``RESERVED_KEYWORDS``..., are imported by name):
#: its classes, and stomp.listener's star import (constants, listeners, the modules it imports).
__all__ = ["Protocol10", "Protocol11", "Protocol12", "ConnectFailedException"]
__all__ += _listener.__all__

_log = logging.getLogger("amqstomp.connection")


#: what the local checks of a frame-writing call raise; on a closed connection NotConnectedException goes first
_LOCAL_REFUSALS = (UnknownTransactionError, DuplicateTransactionError, UnknownSubscriptionError, UnknownMessageError,
                   TransactionRolledBackError, AcknowledgeInterruptedError)


class BaseProtocol(StompSession):
    """The frames every STOMP version writes the same way (SEND, BEGIN, COMMIT,
    ABORT, SUBSCRIBE's bookkeeping, ACK/NACK's checks), over the session's
    transport (:class:`~amqstomp._session.StompSession`). On a closed connection
    (before ``connect``, after ``disconnect()``, a lost socket not being replaced)
    every call raises NotConnectedException, as stomp.py's, before any local
    check of a transaction, subscription or message: applications catch it to
    reconnect and retry."""

    def _refuse(self, error: BaseException, command: str) -> None:
        """Raise ``error``, a local check's refusal of a ``command`` frame, or
        NotConnectedException when closed: no open socket, none being replaced
        (``auto_reconnect``); its message names the frame not sent, not the
        refusal (what the connection held, subscriptions, messages, transactions,
        ended with it: the refusal's reason would mislead).
        Only on the way out of a refused call, never on a frame's way. Returns
        (the frame goes on) when a replaced ``send_frame``/``transport`` is the
        only wire (:meth:`StompSession._checks_waived`), as stomp.py sends it."""
        if self._checks_waived():
            return
        transport = self.transport
        is_open = getattr(transport, "is_open", None)  # amqstomp's; a replaced transport has stomp.py's API
        opened = is_open() if is_open is not None else transport.is_connected()
        rc = self.reconnector
        if not opened and (rc is None or not rc.armed):
            raise NotConnectedException("not connected (no open socket): %s not sent" % (command,)) from None
        raise error

    def _check_transaction(self, transaction: Optional[str], command: str) -> None:
        """A frame ``command`` (SEND, ACK, NACK) in ``transaction``: refused by the
        connection's transaction table (:meth:`amqstomp._engine.client.Client.transaction_refusal`:
        UnknownTransactionError unless this connection began it and has not ended
        it; TransactionRolledBackError when it began on a socket lost since;
        NotConnectedException first, when closed)."""
        if transaction is None:
            return
        refusal = self._client.transactions.refusal(command, transaction)
        if refusal is not None:
            self._refuse(refusal, command)

    def send(self, destination: str, body: Any, content_type: Optional[str] = None,
             headers: Optional[Mapping[str, Any]] = None, **keyword_headers: Any) -> None:
        """SEND a message (STOMP 1.2 "SEND").

        Args:
            destination (str): e.g. ``/queue/a`` or ``/topic/b``.
            body (str | bytes): a ``str`` is encoded with ``encoding``.
            content_type (str | None): the ``content-type`` header.
            headers (Mapping[str, Any] | None): more headers (``receipt``,
                ``transaction``, ``persistent``, ActiveMQ's ``JMSXGroupID``...).
            **keyword_headers: more headers, by keyword (as ``headers``).

        With ``auto_content_length`` a non-empty body gets ``content-length``
        (ActiveMQ makes a BytesMessage; without one, a TextMessage; pass
        ``headers={"content-length": None}`` for one TextMessage), except with
        a ``transformation`` ActiveMQ reads from the body (``jms-map-xml``...:
        with ``content-length`` it would ignore it). A ``content-length`` given
        by the caller is set to the body's real size in bytes (encoded), with
        ``auto_content_length`` or without, as stomp.py 9.0 does (its
        ``utils.convert_frame`` writes every ``content-length`` as the body's
        size): code that forwards a received message's headers with a new body
        keeps working. A given value that differs is no error but is not silent:
        a WARNING (``amqstomp.connection``) names it and the size sent, the
        first time on a connection (DEBUG after). An empty body gets
        ``content-length:0`` (stomp.py wrote the given value, so the broker read
        past the frame's end). The asyncio API refuses a mismatch instead
        (FrameEncodeError): it has no stomp.py code to stay compatible with.

        Raises:
            ValueError: destination or body is None.
            InvalidDestinationError: (a ValueError) the destination is empty,
                or a prefix with no name (``/queue/``): ActiveMQ closes the
                connection on those (:func:`amqstomp.uri.check_destination`).
            UnknownTransactionError: (a ValueError) a ``transaction`` header
                naming a transaction this connection did not begin (or ended);
                nothing is sent (ActiveMQ's ERROR would reach only ``on_error``).
            TypeError: body is neither str nor bytes-like.
            NotConnectedException: not connected (also instead of
                UnknownTransactionError on a closed connection).
            FrameLimitError: (a ValueError) on ActiveMQ, the frame breaks one of
                the broker's limits (a header line over 10240 bytes encoded, more
                than 1000 headers, a frame over 100 MiB): ActiveMQ would close the
                connection and lose it, so nothing is written.
        """
        if destination is None:
            raise RequiredArgumentError("'destination' is required")
        check_destination(destination, "SEND")
        if body is None:
            raise RequiredArgumentError("'body' is required")
        if headers is not None and type(headers) is not dict:  # (the ABC isinstance only then: ~300 instructions)
            check_headers(headers, "SEND")
        frame_headers = dict(headers) if headers else {}  # merge_headers([headers, keyword_headers]), inlined
        if keyword_headers:
            frame_headers.update(keyword_headers)
        frame_headers["destination"] = destination
        if content_type:
            frame_headers["content-type"] = content_type
        # len(payload): content-length, in bytes (a memoryview's too): body_bytes, the rule of every route;
        # its str case inline (the usual body: one Python call less per send, ~280 instructions)
        payload = body.encode(self.encoding) if body.__class__ is str else body_bytes(body, self.encoding)
        replaced = self._send_frame_replaced  # a test's send_frame/transport sees stomp.py's headers and body
        if "content-length" in frame_headers:
            given = frame_headers["content-length"]
            if given is not None:
                if str(given) != str(len(payload)):
                    self._length_mismatch(given, len(payload))
                if not replaced:
                    frame_headers["content-length"] = len(payload)
        elif self.auto_content_length and payload and auto_content_length("SEND", frame_headers):
            # not with a jms-* transformation (dialect.py); stomp.py's send() counts a str body as given
            # (characters), a memoryview by its bytes here (stomp.py: its items)
            frame_headers["content-length"] = len(body) if replaced and isinstance(body, str) else len(payload)
        transaction = frame_headers.get("transaction")
        if transaction is not None:
            self._check_transaction(transaction, "SEND")
        if replaced:  # (or a listener's on_send)
            self._send_as_given(frame_headers, body, payload)
        else:
            self._write("SEND", frame_headers, payload)

    def _length_mismatch(self, given: Any, size: int) -> None:
        """A caller's ``content-length`` that is not the body's size: logged (WARNING the first
        time on this connection, DEBUG after), then replaced by the size, as stomp.py does."""
        level = logging.DEBUG if self._length_warned else logging.WARNING
        self._length_warned = True
        _log.log(level, "send(): content-length %r given for a body of %d bytes: %d is sent, the body's size, as "
                 "stomp.py sends it (its utils.convert_frame); a mismatch on this connection is said once, "
                 "then at DEBUG", given, size, size)

    def _send_as_given(self, frame_headers: Dict[str, Any], body: Any, payload: Any) -> None:
        """:meth:`send`'s SEND with the body as given (a ``str`` is encoded by the
        transport, with the same encoding), as stomp.py's ``send_frame`` and its
        listeners' ``on_send`` get it: through a replaced ``send_frame``, else
        written (for a listener's ``on_send``) with ``content-length`` the body's size."""
        if self._update_send_frame():
            self._send("SEND", frame_headers, body)
            return
        if frame_headers.get("content-length") is not None:
            frame_headers["content-length"] = len(payload)
        self._write("SEND", frame_headers, body)

    def begin(self, transaction: Optional[str] = None, headers: Optional[Mapping[str, Any]] = None,
              **keyword_headers: Any) -> str:
        """BEGIN a transaction; returns its id (a fresh UUID when None).

        Raises:
            DuplicateTransactionError: (a ValueError) this connection began
                ``transaction`` already and has not ended it; nothing is sent.
                (stomp.py sent the BEGIN, ActiveMQ answered ERROR "The
                transaction was already started" and only ``on_error`` heard of it.)
            NotConnectedException: not connected.
        """
        frame_headers = merge_headers([headers, keyword_headers])
        transaction = transaction or get_uuid()
        refusal = self._client.transaction_refusal("BEGIN", transaction)
        if refusal is not None:
            self._refuse(refusal, "BEGIN")
        frame_headers["transaction"] = transaction
        self._send("BEGIN", frame_headers)  # the engine records the socket it went on
        self._client.transaction_began(transaction)
        return transaction

    def commit(self, transaction: Optional[str] = None, headers: Optional[Mapping[str, Any]] = None,
               **keyword_headers: Any) -> None:
        """COMMIT ``transaction`` (ActiveMQ then delivers its SENDs and applies its ACKs).

        Raises:
            TransactionRolledBackError: (``auto_reconnect``) the transaction
                began on a socket that was lost since: the broker rolled it back.
            UnknownTransactionError: (a ValueError) this connection did not
                begin ``transaction`` (with :meth:`begin` or a BEGIN frame), or
                ended it already; nothing is sent. (stomp.py sent the COMMIT,
                ActiveMQ answered ERROR and only ``on_error`` heard of it.)
            NotConnectedException: not connected (before either of those).
        """
        if transaction is None:
            raise RequiredArgumentError("'transaction' is required")
        refusal = self._client.transaction_refusal("COMMIT", transaction)  # unknown, or its socket lost
        if isinstance(refusal, UnknownTransactionError):
            self._refuse(refusal, "COMMIT")
        frame_headers = merge_headers([headers, keyword_headers])
        frame_headers["transaction"] = transaction
        try:
            if refusal is not None:
                self._refuse(refusal, "COMMIT")
            self._send("COMMIT", frame_headers)  # on the socket of its BEGIN only (the engine's rule)
        finally:
            self._client.transaction_ended(transaction, aborted=False)  # its ACKs are final

    def abort(self, transaction: str, headers: Optional[Mapping[str, Any]] = None, **keyword_headers: Any) -> None:
        """ABORT ``transaction``: its SENDs are dropped and its ACK/NACKs undone.
        The messages it acknowledged are not redelivered on ActiveMQ (5.17 does
        not redispatch on a STOMP ABORT): they are held again, so ``ack``/``nack``
        of one is written as stomp.py writes it (:meth:`amqstomp._engine.client.Client.transaction_ended`).

        Raises:
            UnknownTransactionError: (a ValueError) as :meth:`commit`.
            NotConnectedException: not connected (before that).
        """
        if transaction is None:
            raise RequiredArgumentError("'transaction' is required")
        refusal = self._client.transaction_refusal("ABORT", transaction)  # unknown only: a stale one is dropped
        if refusal is not None:
            self._refuse(refusal, "ABORT")
        frame_headers = merge_headers([headers, keyword_headers])
        frame_headers["transaction"] = transaction
        try:
            self._send("ABORT", frame_headers)  # a transaction gone with its socket: nothing to abort
        finally:
            self._client.transaction_ended(transaction, aborted=True)

    def _subscribe(self, destination: str, id: Any, ack: str, headers: Optional[Mapping[str, Any]],
                   keyword_headers: Dict[str, Any], id_required: bool = False) -> None:
        options = pop_reserved(keyword_headers)
        frame_headers = merge_headers([headers, keyword_headers])
        destination, id, ack = _subscribe_arguments(frame_headers, destination, id, ack)
        if destination is None:
            raise RequiredArgumentError("'destination' is required")
        if id is None and id_required:
            raise RequiredArgumentError("'id' is required")
        # a replaced send_frame/transport is the only wire: stomp.py's frame, no bookkeeping (argument errors first)
        if not (id is None and (options or self.reconnector is not None)) and self._checks_waived():
            self._send("SUBSCRIBE", plain_headers(destination, id, ack, frame_headers, destination_options=False))
            return
        if id is None:  # STOMP 1.0 allows it; no flow control without an id to match MESSAGEs
            if options:
                raise ValueError("%s need a subscription 'id'" % ", ".join(sorted(options)))
            if self.reconnector is not None:
                raise ConfigurationError("auto_reconnect replays subscriptions by their id and acknowledges on "
                                         "the socket that delivered each message: give subscribe() an 'id'")
            self._send("SUBSCRIBE", plain_headers(destination, None, ack, frame_headers), b"", self._write_plain)
            return
        frame_headers, sub = self.subscriptions.prepare(destination, id, ack, frame_headers, options, self.timeout)
        try:
            if "receipt" in frame_headers or (self._send_frame_replaced and self._update_send_frame()):
                future = self._send("SUBSCRIBE", frame_headers)
            else:  # a receipt of amqstomp's own (no on_receipt): a refusal (ERROR) names it
                future = self._client.write_subscribe(frame_headers, "amqstomp-subscribe-%s-%s" % (id, get_uuid()),
                                                      self._send)
        except BaseException:
            self.subscriptions.discard(id)
            raise
        if isinstance(future, Future):  # (a replaced transport's transmit may answer anything)
            future.add_done_callback(functools.partial(self._subscribe_answered, sub))

    def _unsubscribing(self, id: Any) -> None:
        """Before UNSUBSCRIBE of ``id``: the ACK of what optimizeAcknowledge has
        not acked yet, and the subscription forgotten.

        Raises:
            UnknownSubscriptionError: neither :meth:`subscribe` nor a SUBSCRIBE
                frame through :meth:`send_frame` made a subscription ``id`` on
                this connection that is still open (unsubscribed already,
                refused by the broker, made before the connection was opened
                again, or gone with a lost socket and not replayed): ActiveMQ
                would answer ERROR "No subscription matched.".
            NotConnectedException: instead, on a closed connection.
        """
        key = str(id)
        if self.subscriptions.get(key) is None and key not in self._raw_subscriptions:
            self._refuse(UnknownSubscriptionError(
                "UNSUBSCRIBE of subscription %r, which this connection has not subscribed or unsubscribed "
                "already (or subscribed before it connected again): ActiveMQ would answer ERROR 'No "
                "subscription matched.'; nothing sent" % (key,)), "UNSUBSCRIBE")
        self._raw_subscriptions.discard(key)
        self.subscriptions.close(id)
        self._ledger.forget_subscription(id)

    def _subscribe_answered(self, sub: Any, future: Any) -> None:
        """Reader thread (or the caller, when answered already): the broker's
        answer to a SUBSCRIBE. One it refused (an ERROR, e.g. a bad selector) is
        unregistered: its id is free again and a reconnect does not replay it."""
        if future.cancelled() or not isinstance(future.exception(), BrokerError):
            return
        if self._client.subscription_refused(self.subscriptions, sub):  # not replaced by a replay meanwhile
            _log.warning("subscription %s to %s refused by the broker; unregistered: %s",
                        sub.id, sub.destination, future.exception())

    def _ack_frame(self, command: str, ack_headers: Dict[str, Any], transaction: Optional[str],
                   receipt: Optional[str], keyword_headers: Optional[Mapping[str, Any]] = None,
                   key: Optional[Tuple[str, ...]] = None) -> None:
        """ACK/NACK ``ack_headers``' message (``key``: its identity, when the caller has it;
        see :meth:`_acknowledge`). Raises UnknownTransactionError,
        UnknownMessageError (a message this connection does not hold),
        AcknowledgeInterruptedError (one of a lost socket, or while
        ``disconnect()`` ends the connection), or, on a closed
        connection, NotConnectedException instead of any of them."""
        if not (transaction or receipt or keyword_headers or self._send_frame_replaced):
            # the usual ACK: nothing to add, so its frame is its identity's headers (no copy)
            self._acknowledge(ack_headers, command, ack_headers, None, None, key)
            return
        frame_headers = dict(ack_headers)  # a copy: ``ack_headers`` stays the message's identity
        if keyword_headers:
            frame_headers.update(keyword_headers)
        if transaction:
            self._check_transaction(transaction, command)
            frame_headers["transaction"] = transaction
        if receipt:
            frame_headers["receipt"] = receipt
        if self._send_frame_replaced:  # through it; its super().send_frame acknowledges as below
            self._send(command, frame_headers, None, functools.partial(self._acknowledge, ack_headers, tx=transaction))
            return
        self._acknowledge(ack_headers, command, frame_headers, None, transaction, key)

    def _acknowledge(self, ack_headers: Mapping[str, Any], command: str, frame_headers: Mapping[str, Any],
                     body: Any = None, tx: Optional[str] = None, key: Optional[Tuple[str, ...]] = None) -> None:
        """An ACK/NACK of the message ``ack_headers`` name, with ``frame_headers``:
        on the socket that delivered it, if this session holds it (see :meth:`_ack_frame`).
        ``key``: its identity (:func:`amqstomp._core.frames.ack_identity`) when the caller has it."""
        client = self._client
        taken = None
        try:  # (no cost on the way of an ACK that is written)
            if self.reconnector is not None:
                client.acknowledge_identity(command, ack_headers, frame_headers, self.subscriptions)
                return
            if client.disconnected_seq:  # disconnect() began once: is it ending this socket? (else no call)
                refusal = client.disconnect_refusal(command, ack_headers)
                if refusal is not None:
                    raise refusal
            if tx is None:
                taken = self.subscriptions.check_ack(command, ack_headers, None, key)
            else:  # what it takes, the table gives back on ABORT
                client.check_ack(command, ack_headers, tx, self.subscriptions)
        except _LOCAL_REFUSALS as exc:
            self._refuse(exc, command)
        client.transport.send_frame(command, frame_headers)
        if tx is None and taken is not None:  # written: settled (ACK) or not (NACK), for the duplicate audit
            self.subscriptions.application_settled(command, taken)


class Protocol10(BaseProtocol, ConnectionListener):
    """STOMP 1.0's SUBSCRIBE (``id`` optional), UNSUBSCRIBE and ACK (no NACK);
    stomp.py's ``Protocol10(transport, auto_content_length)``: a session over
    ``transport`` (registered on it as ``"protocol-listener"``)."""

    version = "1.0"
    _connect_command = "CONNECT"

    def __init__(self, transport: Transport, auto_content_length: bool = True) -> None:
        self._attach(transport, (0, 0), auto_content_length)

    def subscribe(self, destination: str, id: Optional[str] = None, ack: AckMode = _ACK_DEFAULT,
                  headers: Optional[Mapping[str, Any]] = None, **keyword_headers: Any) -> None:
        """SUBSCRIBE to ``destination`` (``id`` optional in 1.0); ``ack`` is
        ``auto`` or ``client`` (cumulative on ActiveMQ). Flow-control keywords
        as in :meth:`StompConnection11.subscribe` (they need an ``id``)."""
        self._subscribe(destination, id, ack, headers, keyword_headers)

    def unsubscribe(self, destination: Optional[str] = None, id: Optional[str] = None,
                    headers: Optional[Mapping[str, Any]] = None, **keyword_headers: Any) -> None:
        """UNSUBSCRIBE by ``id`` or by ``destination`` (after the ACK of what
        optimizeAcknowledge has not acked yet). An ``id`` this connection has
        no subscription for raises UnknownSubscriptionError (nothing sent); a
        ``destination`` alone is not checked."""
        if id is None and destination is None:
            raise RequiredArgumentError("'id' or 'destination' is required")
        if id is not None:
            self._unsubscribing(id)
        frame_headers = merge_headers([headers, keyword_headers])
        if id is not None:
            frame_headers["id"] = id
        if destination is not None:
            frame_headers["destination"] = destination
        self._send("UNSUBSCRIBE", frame_headers, b"", self._write_plain)

    def ack(self, id: str, transaction: Optional[str] = None, receipt: Optional[str] = None) -> None:
        """ACK the message whose ``message-id`` is ``id`` (STOMP 1.0 "ACK")."""
        if id is None:
            raise RequiredArgumentError("'id' is required")
        self._ack_frame("ACK", {"message-id": id}, transaction, receipt)


def _engine_heartbeats(self: Any, *args: Any, **kwargs: Any) -> None:
    """Nothing: heart-beats are negotiated and run by the transport's link
    (:meth:`amqstomp._io.link.Link.start_heartbeats`), not by this listener."""


setattr(_engine_heartbeats, "amqstomp_noop", True)  # the dispatcher never calls it (like ConnectionListener's)


class Protocol11(BaseProtocol, HeartbeatListener):
    """STOMP 1.1's SUBSCRIBE (``id`` required), UNSUBSCRIBE, ACK and NACK (by
    ``message-id`` + ``subscription``); stomp.py's ``Protocol11(transport,
    heartbeats, auto_content_length, heart_beat_receive_scale)``: a session over
    ``transport`` asking for ``heartbeats`` ``(cx, cy)`` ms, with the receive
    grace factor ``heart_beat_receive_scale``. A HeartbeatListener whose
    callbacks do nothing: the transport's link runs heart-beats."""

    version = "1.1"
    #: stomp.py's ``heartbeat_thread`` (None, or the thread running heart-beats): the transport's, see
    #: :attr:`amqstomp._io.owner.LinkOwner.heartbeat_thread` (read-only: an assignment is ignored)
    heartbeat_thread = property(lambda self: getattr(self.transport, "heartbeat_thread", None), lambda self, v: None)
    # the engine runs heart-beats: HeartbeatListener's callbacks would start a second loop
    on_connected = on_disconnected = on_disconnecting = on_message = _engine_heartbeats
    on_receipt = on_error = on_heartbeat = on_send = _engine_heartbeats

    def __init__(self, transport: Transport, heartbeats: Tuple[int, int] = (0, 0), auto_content_length: bool = True,
                 heart_beat_receive_scale: float = 1.5) -> None:
        transport.heart_beat_receive_scale = float(heart_beat_receive_scale)
        self._attach(transport, heartbeats, auto_content_length)

    def subscribe(self, destination: str, id: Any, ack: AckMode = _ACK_DEFAULT,
                  headers: Optional[Mapping[str, Any]] = None, **keyword_headers: Any) -> None:
        """SUBSCRIBE (STOMP 1.2 "SUBSCRIBE") with consumer flow control.

        Args:
            destination (str): queue or topic; ActiveMQ consumer options may
                follow (``/queue/a?consumer.prefetchSize=10``): each becomes its
                ``activemq.*`` header (docs/options.md), on ActiveMQ only.
            id: subscription id (MESSAGE frames carry it as ``subscription``).
            ack (str): ``auto`` (the broker acks at dispatch: at-most-once),
                ``client`` (cumulative on ActiveMQ) or ``client-individual``.
                An ``ack`` header in ``headers`` is used when this keyword is
                left out (stomp.py let the keyword's default win: ack:auto on
                the wire, at-most-once, while asking for client acks);
                likewise ``id`` and ``destination`` headers. Given both ways
                with different values, ValueError.
            headers (Mapping[str, Any] | None): e.g. ``selector``,
                ``activemq.prefetchSize``, ``receipt`` (ActiveMQ starts
                dispatch only after sending that receipt).
            **keyword_headers: more headers, by keyword (as ``headers``), and
                amqstomp's own keywords below.

        amqstomp's own keywords, never sent as headers (RESERVED_KEYWORDS):
            optimize_acknowledge (bool): with ``ack='client'`` amqstomp sends the
                ACKs itself, after the listeners returned, one cumulative ACK per
                batch (ActiveMQMessageConsumer's optimizeAcknowledge; batch rule in
                :func:`amqstomp.flow.optimized_ack_threshold`); do not call ``ack``.
            prefetch_size (int): messages the broker may push before an ACK
                (``activemq.prefetchSize`` on ActiveMQ, ``prefetch-count`` on RabbitMQ).
            ack_batch_cap (int, messages, 100), optimize_acknowledge_timeout_ms
                (300), optimized_ack_scheduled_ack_interval_ms (0 = off),
                idle_ack_ms (50), max_buffered (messages): see
                :class:`amqstomp.flow.SubscriptionWindow`.

        The local buffer is bounded: when a subscription has ``max_buffered``
        messages waiting for the listeners (with ``ack='auto'`` the broker no
        longer limits what it pushes), amqstomp stops reading the socket until
        half have been handled; listeners' ``on_slow_consumer`` hears when more
        than 2 x prefetch wait.

        Raises:
            ValueError: no destination or id, or the id is in use; ``ack``,
                ``id`` or ``destination`` given as keyword and header with
                different values.
            ConfigurationError: bad ack mode or option, see
                :meth:`amqstomp._engine.subscription.SubscriptionManager.prepare`.
        """
        self._subscribe(destination, id, ack, headers, keyword_headers, id_required=True)

    def unsubscribe(self, id: Any, headers: Optional[Mapping[str, Any]] = None, **keyword_headers: Any) -> None:
        """UNSUBSCRIBE the subscription ``id`` (after the ACK of what
        optimizeAcknowledge has not acked yet).

        Raises:
            UnknownSubscriptionError: (a ValueError) no subscription ``id`` on
                this connection (see :meth:`BaseProtocol._unsubscribing`);
                nothing is sent.
        """
        if id is None:
            raise RequiredArgumentError("'id' is required")
        self._unsubscribing(id)
        frame_headers = merge_headers([headers, keyword_headers])
        frame_headers["id"] = id
        self._send("UNSUBSCRIBE", frame_headers, b"", self._write_plain)

    def ack(self, id: str, subscription: Any, transaction: Optional[str] = None,
            receipt: Optional[str] = None) -> None:
        """ACK by ``message-id`` and ``subscription`` (STOMP 1.1 "ACK")."""
        if id is None or subscription is None:
            raise RequiredArgumentError("'id' and 'subscription' are required")
        self._ack_frame("ACK", {"message-id": id, "subscription": subscription}, transaction, receipt)

    def nack(self, id: str, subscription: Any, transaction: Optional[str] = None,
             receipt: Optional[str] = None, **keyword_headers: Any) -> None:
        """NACK by ``message-id`` and ``subscription`` (STOMP 1.1 "NACK"; on
        ActiveMQ the message goes to the DLQ)."""
        if id is None or subscription is None:
            raise RequiredArgumentError("'id' and 'subscription' are required")
        self._ack_frame("NACK", {"message-id": id, "subscription": subscription}, transaction, receipt,
                        keyword_headers)


class Protocol12(Protocol11):
    """STOMP 1.2's ACK and NACK (by the MESSAGE's ``ack`` header); CONNECT
    always carries ``host``. Same constructor as :class:`Protocol11`."""

    version = "1.2"

    def ack(self, id: str, transaction: Optional[str] = None,  # type: ignore[override]
            receipt: Optional[str] = None) -> None:
        """ACK the message whose ``ack`` header is ``id`` (STOMP 1.2 "ACK")."""
        if id is None:
            raise RequiredArgumentError("'id' is required")
        # on STOMP 1.2 its identity is its id, as ack_identity derives it (STOMP 1.2 "ACK"): given,
        # not derived again
        key = (id,) if id.__class__ is str and self._client.transport.version == "1.2" else None
        self._ack_frame("ACK", {"id": id}, transaction, receipt, None, key)

    def nack(self, id: str, transaction: Optional[str] = None,  # type: ignore[override]
             receipt: Optional[str] = None, **keyword_headers: Any) -> None:
        """NACK the message whose ``ack`` header is ``id`` (STOMP 1.2 "NACK")."""
        if id is None:
            raise RequiredArgumentError("'id' is required")
        self._ack_frame("NACK", {"id": id}, transaction, receipt, keyword_headers)
