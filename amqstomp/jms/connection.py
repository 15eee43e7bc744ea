"""``ConnectionFactory`` and ``Connection`` of the JMS-style API.

A :class:`Connection` holds up to two sockets (*links*, see :mod:`amqstomp.jms.link`):

* the **consumer link**, opened by :meth:`ConnectionFactory.create_connection`
  (it carries the client id): SUBSCRIBE/ACK/NACK, the transactions of
  transacted sessions that have consumers (SENDs, ACKs, BEGIN/COMMIT/ABORT:
  committed together), and sends that name a temporary destination of this
  connection (``/temp-queue/x`` means a different queue on another socket);
* the **producer link**, opened by the first producer of a session without
  consumers (``separate_producer_socket``, default True): every other SEND,
  send-only transactions included (see ``Transaction.transacted_send`` in
  :mod:`amqstomp.jms._transaction`).

Why two: ActiveMQ's producer flow control (memory full, no ``sendFailIfNoSpace``)
stops reading a socket that carries a SEND without a receipt until memory frees
up; an ACK or heart-beat queued behind it on the same socket waits too, and a
consumer whose ACKs do not arrive frees no memory. amqstomp's own sends carry
receipts (sync sends, and async sends within the producer window), which
ActiveMQ parks instead of blocking the socket, but ``producer_window_size=0``
sends do not; the separate socket keeps consumers safe either way.

Threads (all end on :meth:`Connection.close`): per open link three --
``amqstomp-jmsC-consumer-reader`` (reads the socket), ``...-dispatch`` (this
connection's executor: exception listener, usage callbacks) and ``...-timer``
(heart-beats, ACK batch timers, usage-full checks), ``producer`` instead of
``consumer`` for the producer link -- and one ``amqstomp-jmsC-session-S`` per
session (its listeners). A connection with S sessions and a producer in a
session without consumers runs 3 + 3 + S threads; without such a producer (or
with ``separate_producer_socket=False``) 3 + S. With a ``failover:`` URI a
socket being replaced also has ``amqstomp-jmsC-consumer-failover`` (or
``-producer-failover``) until its new socket is connected.

What the connection shares with its sessions and links (options, timeouts, the links, the
routing of MESSAGEs, temporary destinations, what the links report) lives in its
:class:`~amqstomp.jms._connection_state.ConnectionState`; :class:`Connection` is the API.

Licensed under the Apache License, Version 2.0.
"""
import logging
import threading
from typing import Any, Dict, List, Optional

from ..exception import StompException
from ..flow import RedeliveryPolicy
from .._core.uri import redact
from .._io.timeouts import clamp_wait
from ._connection_state import ConnectionState, ExceptionListener, UsageListener
from .constants import ACKNOWLEDGE_MODES, AUTO_ACKNOWLEDGE, SESSION_TRANSACTED
from .exceptions import IllegalStateError
from .options import ResolvedOptions, resolve
from .session import Session, check_session_arguments

__all__ = ["ConnectionFactory", "Connection"]

log = logging.getLogger("amqstomp.jms.connection")


class ConnectionFactory:
    """Makes connections to one broker (ActiveMQConnectionFactory's role).

    Args:
        broker_url (str): ``stomp://host:61613`` or ``stomp+ssl://host:61612``, with
            ActiveMQ's URI options, e.g.
            ``stomp://127.0.0.1:61613?jms.prefetchPolicy.all=50&heartBeat=1000,1000``;
            or ``failover:(stomp://a:61613,stomp://b:61613)?randomize=false`` (the
            documentation's "Failover and master/slave" page, docs/guides/failover.md:
            reconnect with FailoverTransport's back-off,
            replay of CONNECT and subscriptions; heart-beats default to 5000,5000
            there, so a silent broker is noticed too).
        **options: the same options by Python keyword (the "URI options" page,
            docs/options.md; "Producers and flow control", docs/guides/producers.md,
            for the producer options); keywords win
            over the URI. Also ``ssl_context`` (an ``ssl.SSLContext``), or
            ``ca_certs`` / ``cert_file`` / ``key_file`` / ``key_password`` for
            ``stomp+ssl://`` (the broker's certificate and host name are verified
            unless your context says otherwise).

    Raises:
        ConfigurationError: an OpenWire ``tcp://`` URI (amqstomp speaks STOMP), an
            unknown ``jms.*`` or failover option or keyword, a bad value.
    """

    def __init__(self, broker_url: str = "stomp://localhost:61613", **options: Any) -> None:
        self.broker_url = broker_url
        self._keywords = dict(options)
        self._resolved = resolve(broker_url, self._keywords)

    @property
    def options(self) -> Dict[str, Any]:
        """Every option by keyword, as connections will use them (a copy)."""
        return dict(self._resolved.options)

    @property
    def resolved(self) -> ResolvedOptions:
        """The parsed broker URI and options (``uri``, ``options``, ``given``:
        the names the URI or the keywords set)."""
        return self._resolved

    def create_connection(self, username: Optional[str] = None, password: Optional[str] = None,
                          timeout_s: Optional[float] = None) -> "Connection":
        """Connect (the consumer socket; CONNECT and CONNECTED) and return the
        connection, stopped: call :meth:`Connection.start` to get messages.

        Args:
            username (str | None): overrides ``jms.userName``.
            password (str | None): overrides ``jms.password`` (never logged).
            timeout_s (float | None): give up after this many seconds: with a
                ``failover:`` URI over all attempts (None: the URI's ``timeout``
                when set, else its ``startupMaxReconnectAttempts`` decide, -1 =
                keep trying, as ActiveMQ's client does); with a ``stomp://`` URI
                the one attempt (TCP connect and CONNECTED; None: its
                ``connectionTimeout``, 30 s by default).

        Raises:
            ConnectFailedException: the broker is unreachable, refused the login
                or the client id.
            ValueError: ``timeout_s`` is not a number >= 0.
        """
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                      or not timeout_s >= 0 or timeout_s == float("inf")):
            raise ValueError("timeout_s must be a finite number of seconds >= 0 or None, got %r" % (timeout_s,))
        timeout_s = clamp_wait(timeout_s)
        options = dict(self._resolved.options)
        if username is not None:
            options["username"] = username
        if password is not None:
            options["password"] = password
        return Connection(self, options, timeout_s)

    def __repr__(self) -> str:  # jms.password masked: reprs end up in logs and exceptions
        return "ConnectionFactory(%r)" % (redact(self.broker_url) if isinstance(self.broker_url, str)
                                          else self.broker_url,)


class Connection:
    """A JMS-style connection (not the stomp.py-compatible ``amqstomp.Connection``).
    Made by :meth:`ConnectionFactory.create_connection`; see the module docstring
    for its sockets and threads. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, factory: ConnectionFactory, options: Dict[str, Any],
                 timeout_s: Optional[float] = None) -> None:
        self._state = ConnectionState(factory, options, timeout_s)
        self._state.open()

    # ------------------------------------------------------------ properties

    @property
    def client_id(self) -> Optional[str]:
        """The JMS client id (``jms.clientID``), or None."""
        return self._state.client_id

    @property
    def server(self) -> str:
        """CONNECTED's ``server`` header, e.g. ``ActiveMQ/5.17.2``."""
        return self._state.consumer_link.server

    @property
    def is_started(self) -> bool:
        return self._state.started

    @property
    def is_closed(self) -> bool:
        return self._state.closed

    @property
    def failure(self) -> Optional[BaseException]:
        """Why the connection broke (a socket lost, a heart-beat timeout), or None."""
        return self._state.failure

    @property
    def redelivery_policy(self) -> RedeliveryPolicy:
        """How this connection's consumers redeliver a rolled-back or recovered message
        locally (the delays, the maximum before it is poisoned: NACK, the broker's
        dead-letter queue): ActiveMQConnection's ``getRedeliveryPolicy`` /
        ``setRedeliveryPolicy``. Made from the ``jms.redeliveryPolicy.*`` options;
        assign another :class:`amqstomp.flow.RedeliveryPolicy` to replace it (the next
        redelivery uses it).

        Raises:
            TypeError: (on assignment) not a RedeliveryPolicy.
        """
        return self._state.redelivery_policy

    @redelivery_policy.setter
    def redelivery_policy(self, policy: RedeliveryPolicy) -> None:
        if not isinstance(policy, RedeliveryPolicy):
            raise TypeError("redelivery_policy must be an amqstomp.flow.RedeliveryPolicy, got %r" % (policy,))
        self._state.redelivery_policy = policy

    def threads(self) -> List[threading.Thread]:
        """The threads this connection runs now (see the module docstring)."""
        state = self._state
        out: List[threading.Thread] = []
        for link in state.links():
            out += link.threads()
        for session in state.sessions():
            if session.thread is not None:
                out.append(session.thread)
        return [t for t in out if t.is_alive()]

    # ------------------------------------------------------------ listeners

    def set_exception_listener(self, listener: Optional[ExceptionListener]) -> None:
        """``listener(exc)`` hears of what goes wrong asynchronously: the connection
        lost (:class:`ConnectionClosedException`; the connection is then broken --
        close it and make a new one), an ERROR frame no call is waiting for
        (:class:`BrokerError`), an asynchronous send refused for lack of space
        (:class:`ResourceAllocationError`). It runs on the connection's dispatcher
        thread, never on the reader."""
        self._state.exception_listener = listener

    @property
    def exception_listener(self) -> Optional[ExceptionListener]:
        return self._state.exception_listener

    def set_transport_listener(self, listener: Any) -> None:
        """With a ``failover:`` URI, ``listener.on_transport_interrupted()`` runs when
        the connection loses a socket (a new one is being sought; sends wait),
        ``listener.on_transport_resumed()`` when it is connected again (ActiveMQ's
        ``TransportListener``). Once per outage, as the Java client's one transport
        per connection: a connection with a consumer and a producer socket that loses
        both hears interrupted when the first goes, resumed when the last is back.
        Either method may be missing. They run on the dispatching thread of the
        socket concerned."""
        self._state.transport_listener = listener

    def set_usage_listener(self, on_usage_full: Optional[UsageListener] = None,
                           on_usage_not_full: Optional[UsageListener] = None) -> None:
        """Producer flow control callbacks (the Java client's usage listeners):
        ``on_usage_full(event)`` when the broker's RECEIPT for a send is later than
        ``usage_full_after_ms`` (ActiveMQ holds a blocked producer's receipts back
        while its memory is full), ``on_usage_not_full(event)`` when receipts flow
        again. ``event`` is a :class:`UsageEvent`. They run on the dispatcher
        thread of the socket the send went on."""
        self._state.on_usage_full = on_usage_full
        self._state.on_usage_not_full = on_usage_not_full

    # ------------------------------------------------------------ life

    def create_session(self, transacted: bool = False, acknowledge_mode: int = AUTO_ACKNOWLEDGE) -> Session:
        """A new session with its own dispatch thread.

        Args:
            transacted (bool): ACKs and SENDs in a STOMP transaction until
                :meth:`Session.commit` (``acknowledge_mode`` is then ignored).
            acknowledge_mode (int): AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE,
                DUPS_OK_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE or AT_MOST_ONCE.

        Raises:
            IllegalStateError: the connection is closed.
            TypeError: ``transacted`` is not a bool, or ``acknowledge_mode`` not an int.
            ValueError: an unknown acknowledge mode.
        """
        check_session_arguments(transacted, acknowledge_mode)
        if transacted:
            acknowledge_mode = SESSION_TRANSACTED
        elif acknowledge_mode not in ACKNOWLEDGE_MODES or acknowledge_mode == SESSION_TRANSACTED:
            raise ValueError("acknowledge_mode must be one of AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE, "
                             "DUPS_OK_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE, AT_MOST_ONCE (or transacted=True), "
                             "got %r" % (acknowledge_mode,))
        state = self._state
        with state.lock:
            state.check_open()
            return Session(state, acknowledge_mode, state.next_id())  # it adds itself to the connection

    def start(self) -> None:
        """Start (or restart) delivery to listeners and ``receive()``."""
        state = self._state
        state.check_open()
        state.started = True
        for session in state.sessions():
            session.wake()

    def stop(self) -> None:
        """Pause delivery; returns once no listener of this connection runs. Messages
        keep arriving into the consumers' buffers (up to the prefetch).

        Raises:
            IllegalStateError: called from a listener of the same connection (JMS forbids it).
        """
        state = self._state
        sessions = state.sessions()
        if any(session.on_session_thread() for session in sessions):
            raise IllegalStateError("stop() from a listener of the same connection would wait for itself")
        state.started = False
        for session in sessions:
            session.wait_idle()

    def close(self) -> None:
        """Close every session (rolling back open transactions), then both sockets
        (DISCONNECT); all of it within ``close_timeout_ms`` (``jms.closeTimeout``,
        ActiveMQConnection.close()), whatever the broker does; every thread of the
        connection ends. Temporary destinations go with the consumer socket.
        Safe to call more than once, and from a listener."""
        state = self._state
        with state.lock:
            if not state.close():
                return
        state.started = False
        with state.within(state.close_timeout_s):  # one closeTimeout for all of it
            for session in state.sessions():
                try:
                    session.session.close()
                except StompException as exc:
                    log.debug("closing %r: %s", session.session, exc)
            for link in reversed(state.links()):  # the producer socket first
                link.close(state.close_wait_s())

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._state)
