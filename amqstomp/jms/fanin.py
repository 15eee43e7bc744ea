"""``FanInConsumer``: one logical consumer of a destination served by a
connection to every broker of a list, so that no message strands on a broker
without consumers.

Behind a network of brokers, a message forwarded to a broker whose consumer
then left stays there (a bridge never sends a message back to a broker on its
path) unless the brokers replay it (``replayWhenNoConsumers``); brokers behind a
plain failover list do not know of each other at all, and a broker without a
consumer keeps what was produced on it. A fan-in consumer has a consumer on
each of them::

    from amqstomp.jms import FanInConsumer, Queue

    with FanInConsumer("failover:(stomp://a:61613,stomp://b:61613)?maxReconnectDelay=2000",
                       Queue("orders"), prefetch=100) as consumer:
        message = consumer.receive(5)

It is a composition: per broker an ordinary JMS :class:`~amqstomp.jms.Connection`,
:class:`~amqstomp.jms.Session` and :class:`~amqstomp.jms.MessageConsumer`
(``amqstomp-jms*`` threads each, see :mod:`amqstomp.jms.connection`), so each
message is settled on the socket that delivered it by that consumer's rules;
nothing of the protocol is here.

Licensed under the Apache License, Version 2.0.
"""
import logging
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..exception import ConnectionClosedException
from .._io.timeouts import clamp_wait
from .._members import Closing, member_urls, split_prefetch
from ._members import Member, MemberGroup, member_factory, open_members
from ._subscriber import check_selector
from .connection import Connection, ConnectionFactory
from .constants import ACKNOWLEDGE_MODES, AUTO_ACKNOWLEDGE, SESSION_TRANSACTED
from .consumer import MessageConsumer, MessageListener
from .destination import Destination, Topic, as_destination
from .exceptions import IllegalStateError
from .message import Message

__all__ = ["FanInConsumer", "BrokerListener"]

log = logging.getLogger("amqstomp.jms.fanin")

#: ``listener(broker_url, exc)``: what went wrong on one broker's connection
BrokerListener = Callable[[str, BaseException], Any]

#: ``receive()`` with nothing here waits on one broker at a time, then looks at the others: first
#: for :data:`FIRST_SLICE_S`, doubling while nothing comes up to :data:`WAIT_SLICE_S` (s)
FIRST_SLICE_S = 0.001
WAIT_SLICE_S = 0.016


class FanInConsumer(MemberGroup):
    """One consumer of ``destination`` on every broker of ``brokers``.

    Args:
        brokers (str | list[str]): the brokers: a list of broker URLs (each used as
            given: ``stomp://`` connects once and a lost broker is reported and
            left out; ``failover:(...)`` reconnects on its own), or one
            ``failover:(a,b,c)?...`` URI, which gives one member per broker, each
            ``failover:(x)?...`` with the URI's options (not ``randomize``,
            ``priorityBackup``, ``priorityURIs``), so each reconnects to its own broker.
        destination (Destination | str): a queue (or topic: each broker's copy
            of a topic message comes, i.e. once per broker the message reaches).
        acknowledge_mode (int): AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE,
            DUPS_OK_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE or AT_MOST_ONCE (no
            transactions: one transaction cannot span brokers).
            ``message.acknowledge()`` in CLIENT_ACKNOWLEDGE acknowledges the
            messages of the broker that delivered it (its session's).
        selector (str | None): a JMS selector.
        prefetch (int | None): messages in flight across all brokers (the
            budget); None: the options' prefetch for the destination kind
            (``jms.prefetchPolicy.all``, else ``queuePrefetch``/``topicPrefetch``,
            1000 for queues). Each broker gets ``prefetch // n``, the first
            ``prefetch % n`` one more, at least 1 each (so at least ``n`` in all).
        username (str | None): as :meth:`ConnectionFactory.create_connection`.
        password (str | None): as there (never logged).
        timeout_s (float | None): each connection's connect deadline (s), as there.
            None: a ``failover:`` member without ``startupMaxReconnectAttempts`` or
            ``timeout`` makes at most 10 start-up attempts
            (:data:`~amqstomp.jms._members.STARTUP_ATTEMPTS`), then
            ConnectFailedException: the construction never waits for ever.
        **options: :class:`ConnectionFactory` keywords for every connection
            (failover keywords only where the URLs are ``failover:``).

    Attributes:
        destination (Destination): what it consumes.

    Delivery starts at once. ``receive()`` takes from the brokers in turn (each
    broker's messages in their order; no order across brokers). A listener runs
    on each broker's session thread: with several brokers, concurrently.

    Raises:
        ConnectFailedException: a broker could not be connected (the others are
            closed again).
        ConfigurationError: a bad URL or option, a broker listed twice,
            ``rebalanceInterval`` in a failover URI. TypeError / ValueError: bad
            ``brokers``, ``selector``, ``prefetch`` or ``acknowledge_mode``.
    """

    def __init__(self, brokers: Union[str, Sequence[str]], destination: Union[Destination, str], *,
                 acknowledge_mode: int = AUTO_ACKNOWLEDGE, selector: Optional[str] = None,
                 prefetch: Optional[int] = None, username: Optional[str] = None, password: Optional[str] = None,
                 timeout_s: Optional[float] = None, **options: Any) -> None:
        if acknowledge_mode == SESSION_TRANSACTED or acknowledge_mode not in ACKNOWLEDGE_MODES:
            raise ValueError("acknowledge_mode must be AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE, DUPS_OK_ACKNOWLEDGE, "
                             "INDIVIDUAL_ACKNOWLEDGE or AT_MOST_ONCE (a transaction cannot span brokers), got %r"
                             % (acknowledge_mode,))
        check_selector(selector)
        urls = member_urls(brokers)
        self.destination = as_destination(destination)
        if prefetch is None:
            resolved = ConnectionFactory(urls[0], **options).options
            kind = "topic_prefetch" if isinstance(self.destination, Topic) else "queue_prefetch"
            prefetch = int(resolved.get("prefetch_all") or resolved[kind])
        self._shares = split_prefetch(prefetch, len(urls))
        self._exception_listener: Optional[BrokerListener] = None
        self._consumers: Dict[int, MessageConsumer] = {}
        self._next = 0
        self._closing = Closing()

        def opener(url: str, index: int) -> Tuple[Connection, ConnectionFactory]:
            factory = member_factory(url, timeout_s, **dict(options, prefetch_all=self._shares[index]))
            connection = factory.create_connection(username, password, timeout_s)
            try:
                session = connection.create_session(False, acknowledge_mode)
                self._consumers[index] = session.create_consumer(self.destination, selector)
                connection.start()
            except BaseException:
                connection.close()
                raise
            return connection, factory

        self._members: List[Member] = open_members(urls, opener, self._report)

    def __repr__(self) -> str:
        return "<jms.FanInConsumer of %s on %d brokers%s>" % (self.destination, len(self._members),
                                                              " closed" if self._closing.closed else "")

    # ------------------------------------------------------------ what it is

    @property
    def prefetch_shares(self) -> List[int]:
        """Each broker's prefetch (messages), in the order of :attr:`brokers`."""
        return list(self._shares)

    def set_exception_listener(self, listener: Optional[BrokerListener]) -> None:
        """``listener(broker_url, exc)`` (``broker_url`` redacted, as in :attr:`brokers`)
        hears what goes wrong on a broker's connection: its loss (the broker is then left out of :meth:`receive`),
        an ERROR no call waits for. It runs on that connection's dispatching thread."""
        self._exception_listener = listener

    # ------------------------------------------------------------ messages

    def set_message_listener(self, listener: Optional[MessageListener]) -> None:
        """``listener(message)`` for every message, on the session thread of the
        broker that delivered it (brokers' listeners run concurrently); settled as
        each broker's consumer settles a listener's message. None takes it away.

        Raises:
            IllegalStateError: closed.
            ConfigurationError: ``listener`` is not callable, or is an ``async def`` one
                (:meth:`MessageConsumer.set_message_listener`).
        """
        self._check_open()
        for consumer in self._consumers.values():
            consumer.set_message_listener(listener)

    def receive(self, timeout: Optional[float] = None) -> Optional[Message]:
        """The next message of any broker, or None after ``timeout`` seconds
        (None: wait until one comes or the consumer is closed; 0: only one here already).
        Looks at the brokers in turn, starting after the one that gave the last
        message; while none has one it waits on each in turn, 1 ms at first,
        doubling up to :data:`WAIT_SLICE_S` (16 ms): a message is taken at most that
        long after it arrived.

        Raises:
            IllegalStateError: closed, or a listener is set.
            ConnectionClosedException: every broker's connection is lost.
            ValueError: ``timeout`` is not a number >= 0 or None.
        """
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout >= 0):
            raise ValueError("timeout must be a number of seconds >= 0 or None, got %r" % (timeout,))
        self._check_open()
        timeout = clamp_wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        slice_s = FIRST_SLICE_S
        while True:
            live = [i for i, member in enumerate(self._members) if member.lost is None]
            if not live:
                raise ConnectionClosedException("every broker of %r is lost: %s" % (self, self.lost))
            n = len(live)
            start = self._next
            for k in range(n):
                index = live[(start + k) % n]
                message = self._take(index, 0)
                if message is not None:
                    self._next = (start + k + 1) % n
                    return message
            if self._closing.closed:
                return None
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            index = live[start % n]
            self._next = (start + 1) % n
            message = self._take(index, slice_s if left is None else min(left, slice_s))
            if message is not None:
                return message
            slice_s = min(WAIT_SLICE_S, slice_s * 2)

    def receive_no_wait(self) -> Optional[Message]:
        """A message some broker has here already, or None."""
        return self.receive(0)

    def _take(self, index: int, timeout: float) -> Optional[Message]:
        member = self._members[index]
        try:
            return self._consumers[index].receive(timeout)
        except ConnectionClosedException as exc:  # this broker's connection broke: leave it out
            member.mark_lost(exc)
            return None
        except IllegalStateError:
            if self._closing.closed:
                return None
            if member.connection.is_closed:  # closed under us: that broker is left out
                member.mark_lost(IllegalStateError("the connection to %s was closed" % (member.name,)))
                return None
            raise

    def _check_open(self) -> None:
        if self._closing.closed:
            raise IllegalStateError("%r is closed" % (self,))

    # ------------------------------------------------------------ life

    def close(self) -> None:
        """Close every broker's connection, all at once, each within its ``close_timeout_ms``
        (``jms.closeTimeout``), so within the longest of them:
        messages delivered and not settled go back to their broker. Safe to call
        more than once; a call while another thread's close runs waits for it to end
        (running listeners finished).

        Raises:
            StompException: the first error a connection's close raised, after closing the others.
        """
        self._closing.close(self._members)

    def __enter__(self) -> "FanInConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
