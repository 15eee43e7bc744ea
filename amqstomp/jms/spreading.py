"""``SpreadingProducer``: sends spread over the brokers of a list, round robin,
each broker with its own connection, failover and producer flow control::

    from amqstomp.jms import SpreadingProducer, Queue, TextMessage

    with SpreadingProducer("failover:(stomp://a:61613,stomp://b:61613)?timeout=2000",
                           Queue("orders")) as producer:
        producer.send(TextMessage("hi"))          # returns the URL of the broker that took it

It is a composition: per broker an ordinary JMS :class:`~amqstomp.jms.Connection`,
:class:`~amqstomp.jms.Session` and :class:`~amqstomp.jms.MessageProducer`; each
send follows that producer's rules (a PERSISTENT send waits for the broker's
RECEIPT...). Nothing of the protocol is here.

Licensed under the Apache License, Version 2.0.
"""
import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..exception import ConnectionClosedException, NotConnectedException
from .._members import Closing, Turns, member_urls
from ._members import Member, MemberGroup, member_factory, open_members
from .connection import Connection, ConnectionFactory
from .destination import Destination, as_destination
from .exceptions import IllegalStateError
from .fanin import BrokerListener
from .message import Message
from .producer import MessageProducer

__all__ = ["SpreadingProducer"]

log = logging.getLogger("amqstomp.jms.fanin")


class SpreadingProducer(MemberGroup):
    """A producer of ``destination`` on every broker of ``brokers``; each
    :meth:`send` goes to the next broker in turn that can take it.

    Args:
        brokers (str | list[str]): as :class:`FanInConsumer`'s: a list of broker
            URLs, or one ``failover:(a,b,c)?...`` URI giving one member per broker,
            each ``failover:(x)?...`` reconnecting to its own broker. Give the
            members a ``timeout`` (ms a send waits while its broker is down;
            the failover URI's option), else a send caught by a broker's loss waits
            for that broker to come back.
        destination (Destination | str): where every send goes.
        username (str | None): as :meth:`ConnectionFactory.create_connection`.
        password (str | None): as there (never logged).
        timeout_s (float | None): each connection's connect deadline (s), as there.
            None: a ``failover:`` member without ``startupMaxReconnectAttempts`` or
            ``timeout`` makes at most 10 start-up attempts
            (:data:`~amqstomp.jms._members.STARTUP_ATTEMPTS`), then
            ConnectFailedException: the construction never waits for ever.
        **options: :class:`ConnectionFactory` keywords for every connection.

    Attributes:
        destination (Destination): where every send goes.
        delivery_mode (int), priority (int), time_to_live (int, ms): ``send``'s
            defaults, as :class:`MessageProducer`'s.

    Raises:
        ConnectFailedException: a broker could not be connected (the others are
            closed again).
        ConfigurationError, TypeError, ValueError: bad brokers or options (as
            :class:`FanInConsumer`: a broker listed twice, ``rebalanceInterval`` in a failover URI).
    """

    def __init__(self, brokers: Union[str, Sequence[str]], destination: Union[Destination, str], *,
                 username: Optional[str] = None, password: Optional[str] = None,
                 timeout_s: Optional[float] = None, **options: Any) -> None:
        urls = member_urls(brokers)
        self.destination = as_destination(destination)
        self._producers: Dict[int, MessageProducer] = {}
        self._exception_listener: Optional[BrokerListener] = None
        self._closing = Closing()
        self._sent = [0] * len(urls)
        self._turns = Turns(len(urls))
        first: Optional[MessageProducer] = None

        def opener(url: str, index: int) -> Tuple[Connection, ConnectionFactory]:
            nonlocal first
            factory = member_factory(url, timeout_s, **options)
            connection = factory.create_connection(username, password, timeout_s)
            try:
                producer = connection.create_session().create_producer(self.destination)
            except BaseException:
                connection.close()
                raise
            self._producers[index] = producer
            first = first or producer
            return connection, factory

        self._members: List[Member] = open_members(urls, opener, self._report)
        assert first is not None
        self.delivery_mode = first.delivery_mode
        self.priority = first.priority
        self.time_to_live = first.time_to_live

    def __repr__(self) -> str:
        return "<jms.SpreadingProducer to %s on %d brokers%s>" % (self.destination, len(self._members),
                                                                  " closed" if self._closing.closed else "")

    @property
    def sent(self) -> List[int]:
        """Messages each broker accepted (sends that returned), in the order of :attr:`brokers`."""
        return list(self._sent)

    def set_exception_listener(self, listener: Optional[BrokerListener]) -> None:
        """``listener(broker_url, exc)``: as :meth:`FanInConsumer.set_exception_listener`."""
        self._exception_listener = listener

    def send(self, message: Union[Message, str, bytes], delivery_mode: Optional[int] = None,
             priority: Optional[int] = None, time_to_live: Optional[int] = None) -> str:
        """Send ``message`` to one broker and return that broker's URL (redacted, as in :attr:`brokers`).

        The brokers are taken in turn (round robin). A broker is passed over
        while another caller's send holds it, while it is between sockets
        (failover), while its producer flow control holds sends back (its
        ``on_usage_full`` came and ``on_usage_not_full`` not yet), or once its
        connection is lost; when every broker is passed over, the send waits on
        the next one that is not lost, by that producer's rules (its window,
        ``send_timeout_ms``, the failover ``timeout``). A send refused before it
        was written (the broker's connection broken, or no socket within the
        failover ``timeout``: ``NotConnectedException``) goes to the next broker.
        (A PERSISTENT send whose socket was lost after it was written and before
        its RECEIPT is written again on the member's next socket; if none comes
        within the ``timeout`` it also ends in ``NotConnectedException`` and goes
        to the next broker, while the lost broker may have stored it: at least
        once, a duplicate possible, never a loss.)
        Returning means that broker's producer accepted it by the normal rules
        (a PERSISTENT send: the broker's RECEIPT came).

        Raises:
            ConnectionClosedException: every broker is lost, or none took it; or
                the chosen broker's connection was lost while the send waited for
                its receipt (the message may be on that broker; not sent elsewhere).
            StompException: another error of the chosen producer whose outcome is
                not "not written" (``ReceiptTimeout``, ``ResourceAllocationError``,
                ``BrokerError``...): as :meth:`MessageProducer.send` raises it; the
                message may be on that broker; it is not sent elsewhere.
            IllegalStateError: closed.
        """
        if self._closing.closed:
            raise IllegalStateError("%r is closed" % (self,))
        order = self._turns.order()
        tried: List[int] = []
        for index in [i for i in order if self._members[i].usable]:  # free, connected, not held back
            member = self._members[index]
            if not member.lock.acquire(blocking=False):
                continue
            try:
                if self._send_on(index, message, delivery_mode, priority, time_to_live):
                    return member.name
            finally:
                member.lock.release()
            tried.append(index)
        for index in order:  # every broker busy, between sockets or full: wait on one by its rules
            member = self._members[index]
            if member.lost is not None or index in tried:
                continue
            with member.lock:
                if self._send_on(index, message, delivery_mode, priority, time_to_live):
                    return member.name
        raise ConnectionClosedException("no broker of %r took the message; lost: %s" % (
            self, {url: str(exc) for url, exc in self.lost.items()}))

    def _send_on(self, index: int, message: Union[Message, str, bytes], delivery_mode: Optional[int],
                 priority: Optional[int], time_to_live: Optional[int]) -> bool:
        """True: member ``index`` accepted it; False: it was not written there."""
        member = self._members[index]
        connection = member.connection
        if member.lost is not None:
            return False
        if connection.failure is not None:  # broken before the send: not written
            member.mark_lost(connection.failure)
            return False
        try:
            self._producers[index].send(
                message, self.delivery_mode if delivery_mode is None else delivery_mode,
                self.priority if priority is None else priority,
                self.time_to_live if time_to_live is None else time_to_live)
        except NotConnectedException as exc:  # no socket within the failover timeout: not written
            log.info("broker %s: not connected, next broker: %s", member.name, exc)
            return False
        except ConnectionClosedException:
            if connection.failure is not None:
                member.mark_lost(connection.failure)
            raise
        self._sent[index] += 1
        self._turns.took(index)
        return True

    def close(self) -> None:
        """Close every broker's connection, all at once, each within its ``close_timeout_ms``
        (``jms.closeTimeout``), so within the longest of them.
        Safe to call more than once; a call while another thread's close runs waits for it to end.

        Raises:
            StompException: the first error a connection's close raised, after closing the others.
        """
        self._closing.close(self._members)

    def __enter__(self) -> "SpreadingProducer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
