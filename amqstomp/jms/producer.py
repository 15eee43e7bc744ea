"""``MessageProducer``: SENDs with the Java client's sync/async rules and a
producer window.

* Outside a transaction, a PERSISTENT send waits for the broker's RECEIPT
  (the broker has stored the message; Java's synchronous send), unless
  ``use_async_send``; a NON_PERSISTENT send does not wait, unless
  ``always_sync_send``.
* Asynchronous sends hold their bytes in the producer's window until a
  receipt covers them: on the producer socket one SEND in each chunk of a
  quarter of ``producer_window_size`` bytes asks for a RECEIPT, which covers
  the SENDs before it too (ActiveMQ handles one connection's SENDs in order:
  :class:`amqstomp.jms._producer_flow.ProducerWindow`); on the consumer
  socket every asynchronous SEND asks for one (ActiveMQ must never stop
  reading that socket). With ``producer_window_size`` bytes awaiting
  receipts, ``send`` blocks (async senders cannot flood the broker).
  ``producer_window_size=0`` sends without a receipt (then the broker's only
  brake is to stop reading the socket).
* In a transacted session the sends go in the session's transaction, on the
  consumer socket, asynchronously; ``commit()`` waits for their receipts.
* Asynchronous sends are written with ``defer=True``
  (:meth:`amqstomp._io.driver.Driver.send_frame`): one goes out at once when
  the socket wrote nothing for :data:`amqstomp._io.writer.DEFER_IDLE_S`
  (0.2 ms); closer together (under load) they may wait up to
  :data:`amqstomp._io.writer.DEFER_FLUSH_S` (1 ms) in the socket's write buffer
  so that many go out in one system call; a synchronous send, a COMMIT and a
  producer waiting for room in its window write the buffer at once.

Licensed under the Apache License, Version 2.0.
"""
import logging
import time
from typing import Any, Callable, Optional, Tuple, Union, cast

from ._state import SessionState
from .constants import DEFAULT_DELIVERY_MODE, DEFAULT_PRIORITY, DEFAULT_TIME_TO_LIVE, PERSISTENT
from .._core.dialect import BROKERS, refusal
from .._core.lifecycle import Phase
from .destination import Destination, TemporaryDestination, as_destination
from .exceptions import IllegalStateError, InvalidDestinationError, MessageFormatError, TransactionRolledBackError
from ._producer_flow import SEND_OVERHEAD_BYTES
from .link import Link, ProducerWindow
from .message import BytesMessage, Message, SendHead, TextMessage, message_headers

#: an open connection's phase (a module constant: an Enum member's attribute lookup costs more on the send path)
_OPEN = Phase.OPEN

__all__ = ["MessageProducer"]

log = logging.getLogger("amqstomp.jms.producer")


class MessageProducer:
    """Made by :meth:`Session.create_producer`.

    Attributes:
        destination (Destination | None): where ``send`` sends (None: each send names one).
        delivery_mode (int), priority (int), time_to_live (int, ms): defaults of ``send``.
        disable_message_timestamp (bool): do not set ``timestamp``.
    """

    def __init__(self, state: SessionState, destination: Optional[Destination]) -> None:
        self._state = state
        self._connection = state.connection
        self.destination = destination
        self.delivery_mode = DEFAULT_DELIVERY_MODE
        self.priority = DEFAULT_PRIORITY
        self.time_to_live = DEFAULT_TIME_TO_LIVE
        self.disable_message_timestamp = False
        options = self._connection.options
        size = int(options.get("producer_window_size") or 0)
        self._window: Optional[ProducerWindow] = ProducerWindow(size) if size > 0 else None
        if self._window is not None:  # a commit waits for its receipts
            state.add_window(self._window)
        # the connection's options, read once (send() is the hot path)
        self._always_sync = bool(options.get("always_sync_send"))
        self._use_async = bool(options.get("use_async_send"))
        timeout_ms = options.get("send_timeout_ms") or 0
        self._timeout_s: Optional[float] = timeout_ms / 1000.0 if timeout_ms else None
        self._closed = False
        self._head: Optional[SendHead] = None  # the last send's (most sends repeat it)
        self._sync = False  # whether a send with _head outside a transaction waits for its receipt
        self._routed = False  # whether a send with _head takes one of the less common routes (_send_routed)
        self._fast: Optional[ProducerWindow] = None  # _fast_window when a send with _head may use it, else None
        self._link: Link = state.transaction.send_link()  # opens the producer socket on first use
        self._transacted = state.transacted  # (fixed for the session's life)
        # send()'s common route (see there): the producer socket's write when it has no failover (the
        # engine's rule is then "the open socket", Client.direct_write) and the window when its sends
        # close chunks by size (not a receipt per send: the consumer socket's rule); else None
        direct_write = self._link.client.direct_write
        self._fast_window = self._window if direct_write is not None and not self._transacted \
            and not self._link.receipt_every_send else None
        self._direct_write = cast(Callable[..., Any], direct_write)  # (None only when _fast_window is)

    def __repr__(self) -> str:
        return "<jms.MessageProducer to %s%s>" % (self.destination, " closed" if self._closed else "")

    def send(self, message: Union[Message, str, bytes], delivery_mode: Optional[int] = None,
             priority: Optional[int] = None, time_to_live: Optional[int] = None,
             destination: Union[Destination, str, None] = None) -> None:
        """Send ``message`` (a ``str`` is sent as a TextMessage, ``bytes`` as a
        BytesMessage).

        Args:
            delivery_mode: PERSISTENT or NON_PERSISTENT (default: the producer's).
            priority: 0-9 (default: the producer's, 4).
            time_to_live: ms until the broker drops it; 0 = never (default: the producer's).
            destination: for a producer made without one.

        Raises:
            ResourceAllocationError: (a synchronous send) the broker's memory/store is
                full and it refuses sends (sendFailIfNoSpace); the connection stays
                usable.
            BrokerError: (a synchronous send) another ERROR.
            ReceiptTimeout: ``send_timeout_ms`` passed.
            InvalidDestinationError: no destination, a deleted temporary queue, or
                one of another connection (send to the ``reply_to`` it came with).
            IllegalStateError: the producer, session or connection is closed.
            FrameLimitError: (a ValueError) the message breaks a limit of the
                broker (ActiveMQ: a header line over 10240 bytes encoded -- a long
                property --, more than 1000 headers, a frame over 100 MiB); it is
                not sent (ActiveMQ would close the connection and lose it).
        """
        if self._closed:
            raise IllegalStateError("%r is closed" % (self,))
        state = self._state
        connection = self._connection
        if state.closed or state.closing or connection.life.phase is not _OPEN:  # (closed, broken)
            state.check_open()  # raises, naming what is closed
        if message.__class__ is not BytesMessage and not isinstance(message, Message):
            if isinstance(message, str):
                message = TextMessage(message)
            elif isinstance(message, (bytes, bytearray, memoryview)):
                message = BytesMessage(bytes(message))
            else:
                raise MessageFormatError("send() takes a Message, str or bytes, got %s" % type(message).__name__)
        dest = self.destination
        if destination is not None:
            other = as_destination(destination)
            if dest is not None and other != dest:
                raise InvalidDestinationError("this producer sends to %s; make one without a destination to "
                                              "send to %s" % (dest, other))
            dest = other
        if dest is None:
            raise InvalidDestinationError("this producer has no destination; pass destination=")
        mode = self.delivery_mode if delivery_mode is None else delivery_mode
        if priority is None:
            priority = self.priority
        head = self._head  # reused while destination, mode and priority repeat (the hot path)
        # (identity: an int the head was made with is the same object; anything else, e.g. a
        # bool or an IntEnum, makes a new head, which checks it)
        if head is None or head.destination is not dest or head.delivery_mode is not mode \
                or head.priority is not priority:
            head = self._head = SendHead(dest, mode, priority)
            # the Java client's rule, decided once per head: a PERSISTENT send outside a transaction
            # waits for its receipt unless use_async_send; always_sync_send makes every send wait
            self._sync = self._always_sync or (head.delivery_mode == PERSISTENT and not self._use_async)
            # send()'s route, decided once per head too: the less common ones (_send_routed) or the
            # common one, written by send() itself when asynchronous (see _fast_window)
            self._routed = head.temporary or self._transacted
            self._fast = None if self._sync or self._routed else self._fast_window
        reply_to = message.reply_to
        if self._routed or (reply_to is not None and isinstance(reply_to, TemporaryDestination)):
            self._send_routed(message, head, dest, reply_to, time_to_live)
            return
        link = self._link
        headers, body = message_headers(message, head, self.time_to_live if time_to_live is None else time_to_live,
                                        link.dialect, not self.disable_message_timestamp)
        window = self._fast
        if window is not None:
            # the common send -- asynchronous, on the producer socket, no failover -- when it fits the
            # window's open chunk (ProducerWindow.take_room, acquire's lock-free case: room, no receipt to ask):
            # counted and written here, one call from send() to the encoder
            nbytes = len(body) + SEND_OVERHEAD_BYTES
            if window.take_room(nbytes):
                try:
                    self._direct_write("SEND", headers, body, None, True, head)
                except BaseException:
                    window.unsent(nbytes, 0)
                    raise
                return
        link.send_message(headers, body, self._sync, self._window, self._timeout_s, head)

    def _send_routed(self, message: Message, head: SendHead, dest: Destination, reply_to: Optional[Destination],
                     time_to_live: Optional[int]) -> None:
        """:meth:`send` on a less common route (:meth:`_route`): a temporary
        destination or reply-to, or a transacted session."""
        link, transaction, sync, window = self._route(dest, reply_to)
        headers, body = message_headers(message, head, self.time_to_live if time_to_live is None else time_to_live,
                                        link.dialect, not self.disable_message_timestamp)
        if transaction is not None:
            headers["transaction"] = transaction
        try:
            link.send_message(headers, body, sync, window, self._timeout_s, head)
        except TransactionRolledBackError as exc:
            if transaction is None:
                raise
            # the broker rolled the transaction back with its socket: so does the session, so the
            # next send or receive starts a new one (not a send into a transaction that is gone)
            self._state.transaction.lost()
            raise TransactionRolledBackError("%s; the session rolled the transaction back (its consumed messages "
                                             "come again): the next send or receive starts a new one" % exc) from exc

    def _route(self, dest: Destination,
               reply_to: Optional[Destination]) -> Tuple[Link, Optional[str], bool, Optional[ProducerWindow]]:
        """:meth:`send`'s less common routes: a temporary destination (or
        reply-to) of this connection, or a transacted session. Returns the link
        to send on, the transaction id (None: outside one), whether the send
        waits for its receipt, and the window it counts in (None: none).

        Raises:
            InvalidDestinationError: a deleted temporary destination, or one of
                another connection.
            ConfigurationError: (RabbitMQ) a SEND to a temporary queue.
        """
        state = self._state
        connection = self._connection
        link = self._link
        for named in (dest, reply_to):
            if isinstance(named, TemporaryDestination) and not named.remote:
                if named.deleted:
                    raise InvalidDestinationError("%s was deleted" % (named,))
                if not connection.is_own_temporary(named):
                    raise InvalidDestinationError(
                        "%s is a temporary destination of another connection; send to the reply_to of the "
                        "message that named it (ActiveMQ gives it as /remote-temp-queue/...)" % (named,))
        own_temporary = connection.is_own_temporary(dest) or connection.is_own_temporary(reply_to)
        if connection.is_own_temporary(dest) and BROKERS[link.dialect].temp_reply_only:
            raise refusal("sending to a temporary queue (%s)" % (dest,), link.dialect, link.server,
                          "ActiveMQ (RabbitMQ takes /temp-queue/ only as a reply-to: send to the reply_to "
                          "of a message, /reply-queue/...)")
        window = self._window
        if state.transacted:
            link, transaction = state.transaction.transacted_send(own_temporary)
            # RabbitMQ answers a transaction's receipts only with the COMMIT: the COMMIT's receipt covers them
            return link, transaction, False, None if BROKERS[link.dialect].tx_receipts_at_commit else window
        if own_temporary:
            # /temp-queue/x names a queue of the socket that says it: use the one that made it; never a
            # receipt-less SEND on the consumer socket
            return connection.consumer_link, None, self._sync or window is None, window
        return link, None, self._sync, window

    def close(self) -> None:
        """Wait (bounded by ``close_timeout_ms``) for the receipts of this producer's
        asynchronous sends, and close it."""
        if self._closed:
            return
        self._closed = True
        window = self._window
        if window is not None and window.chunks:
            deadline = time.monotonic() + self._connection.close_wait_s()
            if not window.drain(self._link, deadline):
                log.warning("%r closed with %d receipt(s) not come", self, window.chunks)
        self._state.remove_producer(self, window)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "MessageProducer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
