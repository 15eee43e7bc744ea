"""``QueueBrowser``: the messages on a queue, looked at without consuming them.

On ActiveMQ a STOMP SUBSCRIBE with ``browser:true`` (STOMP 1.1 and later)
makes a browsing consumer (``ProtocolConverter.onStompSubscribe``; prefetch
``ActiveMQPrefetchPolicy.DEFAULT_QUEUE_BROWSER_PREFETCH``, 500): the broker
sends a copy of each message the queue holds (that the selector selects), then
one MESSAGE with ``browser:end`` and no body (``StompQueueBrowserSubscription``).
The browse subscription is ``ack:auto``: ActiveMQ acks the copies at dispatch,
which leaves the queue as it was and keeps the prefetch window open.

Each iteration of a :class:`QueueBrowser` is one such browse: the first uses the
subscription made by :meth:`Session.create_browser`, later ones subscribe again
(a new snapshot). An iteration ends at ``browser:end``; it raises
:class:`BrowseTimeoutError` when nothing comes for ``timeout`` seconds, so it
never hangs.

Over failover a browse is not replayed on the new socket: the broker would send
the queue again from its head, after what the lost socket delivered, and one
iteration would yield messages twice. An iteration whose socket is lost raises
:class:`BrowseInterruptedError` instead (at once, also with messages of the
lost socket still buffered); the browser stays open and the next iteration
browses on the new socket. A browse whose RECEIPT had not come when the socket
went (nothing browsed yet; a browser made during an outage) is sent again on
the new socket instead.

Licensed under the Apache License, Version 2.0.
"""
import logging
import threading
import time
from typing import Any, Iterator, Optional

from .._core.dialect import refusal
from ..exception import ConfigurationError
from ._state import Delivery, SessionState
from ._subscriber import check_selector
from .constants import AT_MOST_ONCE
from .consumer import ConsumerCore
from .destination import Queue
from .exceptions import BrowseInterruptedError, BrowseTimeoutError, IllegalStateError
from .message import Message, message_from_frame

__all__ = ["QueueBrowser", "BrowseTimeoutError", "BrowseInterruptedError"]

log = logging.getLogger("amqstomp.jms.browser")


class QueueBrowser:
    """Made by :meth:`Session.create_browser` (which waits for the first browse's
    RECEIPT: see there for what it raises). Iterate over it (or call
    :meth:`get_enumeration`) for the messages on the queue, oldest first; use it
    as a context manager or call :meth:`close`.

    Attributes:
        queue (Queue): the queue browsed.
        selector (str | None): the JMS selector, or None.
        timeout (float): seconds an iteration waits for the next message or the end.
    """

    def __init__(self, state: SessionState, queue: Queue, selector: Optional[str], timeout: float) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError("timeout must be a number of seconds > 0, got %r" % (timeout,))
        check_selector(selector)
        link = state.connection.consumer_link
        if not link.is_activemq:
            raise refusal("queue browsers (ActiveMQ's browser header)", link.dialect, link.server)
        if link.version == "1.0":
            raise ConfigurationError("ActiveMQ browses queues for STOMP 1.1 and later; this connection speaks "
                                     "1.0 (stompVersion)")
        self._state = state
        self.queue = queue
        self.selector = selector
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._consumer: Optional[ConsumerCore] = None
        self._fresh = False  # the current subscription has not been iterated yet
        self._closed = False
        state.add_browser(self)
        try:
            self._subscribe()  # the first browse
        except BaseException:
            state.remove_browser(self)
            raise

    def __repr__(self) -> str:
        return "<jms.QueueBrowser on %s%s>" % (self.queue, " closed" if self._closed else "")

    @property
    def closed(self) -> bool:
        return self._closed

    def _subscribe(self) -> None:
        """SUBSCRIBE a new browse (waits for the broker's RECEIPT, at most
        ``timeout`` seconds); the next iteration yields its messages.

        Raises:
            BrokerError: the broker refused it (a bad selector).
            ReceiptTimeout: no RECEIPT within ``timeout``.
            BrowseInterruptedError: its socket was lost before the RECEIPT.
        """
        consumer = ConsumerCore(self._state, self.queue, self.selector, False, browser=True, mode=AT_MOST_ONCE)
        consumer.subscriber.subscribe(timeout_s=self.timeout)  # the browse's RECEIPT: within the browser's timeout
        with self._lock:
            self._consumer = consumer
            self._fresh = True

    def _stop(self, consumer: ConsumerCore) -> None:
        with self._lock:
            if self._consumer is consumer:
                self._consumer = None
                self._fresh = False
        consumer.close()

    def __iter__(self) -> Iterator[Message]:
        return self.get_enumeration()

    def get_enumeration(self) -> Iterator[Message]:
        """A new browse: yields each message on the queue (a :class:`Message`
        subclass, as ``receive()`` gives) and ends at the broker's end marker.

        Raises (while iterating):
            BrowseTimeoutError: nothing came for ``timeout`` seconds.
            BrowseInterruptedError: a failover replaced the socket during the
                browse (it is not replayed: iterate again for a new snapshot).
            IllegalStateError: the browser, its session or connection is closed.
            ConnectionClosedException: the connection broke.
        """
        self._check_open()
        with self._lock:
            consumer, fresh = self._consumer, self._fresh
            self._fresh = False
        if consumer is not None and fresh and self._interrupted(consumer):
            fresh = False  # create_browser's browse was lost in a failover since: browse anew
        if consumer is None or not fresh:
            if consumer is not None:
                self._stop(consumer)  # an earlier browse left unfinished
            self._subscribe()
            with self._lock:
                consumer, self._fresh = self._consumer, False
        assert consumer is not None
        return self._browse(consumer)

    def _browse(self, consumer: ConsumerCore) -> Iterator[Message]:
        try:
            while True:
                delivery = self._next(consumer)
                consumer.subscriber.count(delivery)  # frees the window; ack:auto sends no ACK
                if delivery.frame.headers.get("browser") == "end":
                    return
                yield message_from_frame(delivery.frame, self._state.connection.lookup_temporary)
        finally:
            self._stop(consumer)

    @staticmethod
    def _interrupted(consumer: ConsumerCore) -> bool:
        """True when a failover replaced the socket ``consumer``'s browse was on."""
        subscriber = consumer.subscriber
        link = subscriber.link
        if link.reconnector is None:
            return False
        transport = link.transport
        return (subscriber.browse_lost or transport.link_seq != subscriber.browse_seq
                or not transport.is_connected())

    def _next(self, consumer: ConsumerCore) -> Delivery:
        """The browse's next message, waiting at most ``timeout`` seconds."""
        state = self._state
        deadline = time.monotonic() + self.timeout
        while True:
            if state.wait_for(lambda: self._ready(consumer), deadline) is None:
                raise BrowseTimeoutError("%r: no message and no end of browse from the broker within %.3g s"
                                         % (self, self.timeout))
            delivery = state.take_buffered(consumer.ledger)
            if delivery is not None:  # (None: closed meanwhile; the next look says so)
                return delivery

    def _ready(self, consumer: ConsumerCore) -> Optional[bool]:
        """What :meth:`_next` waits for (under the session's condition): True when a
        message is buffered, None while none is.

        Raises:
            BrowseInterruptedError, IllegalStateError (browser or session closed), or
            what ConnectionState.check_open raises.
        """
        if self._interrupted(consumer):
            raise BrowseInterruptedError("%r: browse interrupted by a failover; iterate again" % (self,))
        ledger = consumer.ledger
        if ledger.buffer:
            return True
        if self._closed or ledger.closed:
            raise IllegalStateError("%r was closed while browsing" % (self,))
        state = self._state
        if state.closing or state.closed:
            raise IllegalStateError("the session of %r is closed" % (self,))
        state.connection.check_open()
        return None

    def close(self) -> None:
        """End the browse in progress (UNSUBSCRIBE, waiting at most
        ``close_timeout_ms`` for the receipt). Safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
        self._state.remove_browser(self)

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("%r is closed" % (self,))
        self._state.check_open()

    def __enter__(self) -> "QueueBrowser":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
