"""The members of the stomp.py-style compositions (:class:`amqstomp.fanin.FanInConnection`,
:class:`amqstomp.spreading.SpreadingConnection`): one ordinary stomp.py-API connection
(:class:`~amqstomp.connection.StompConnection12`, or 1.0/1.1) per broker URL, made from
the URL as the command-line client makes its connection (:func:`amqstomp._target.parse_target`:
``stomp://`` connects once, ``failover:(x)?...`` reconnects to its own broker with
``auto_reconnect``), and :class:`StompGroup`, what both compositions share: the
members' construction, ``connect``, the listeners, ``disconnect``.

What does not depend on the API (member URLs, the prefetch split, redaction, the
bounded parallel close, the members' bookkeeping) is :mod:`amqstomp._members`'.

Licensed under the Apache License, Version 2.0.
"""
import logging
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _members as shared
from ._members import Closing, member_urls
from ._session import DEFAULT_DISCONNECT_TIMEOUT
from ._target import parse_target
from .connection import StompConnection10, StompConnection11, StompConnection12
from .exception import ConnectionClosedException, NotConnectedException, StompException
from .listener import ConnectionListener
from .transport import DEFAULT_CLOSE_TIMEOUT, DEFAULT_WAIT_TIMEOUT

__all__ = ["StompMember", "StompGroup", "WATCH_LISTENER", "VERSIONS"]

log = logging.getLogger("amqstomp.fanin")

#: the name each member's own listener is registered under (refused to the application's)
WATCH_LISTENER = "amqstomp-member-watch"
#: STOMP version -> connection class
VERSIONS = {"1.0": StompConnection10, "1.1": StompConnection11, "1.2": StompConnection12}


class _Watch(ConnectionListener):
    """A member's own listener: what tells the composition the member is between
    sockets or gone (no callback per MESSAGE: ConnectionListener's no-ops are never called)."""

    def __init__(self, member: "StompMember") -> None:
        self.member = member

    def on_connected(self, frame: Any) -> None:
        self.member.on_connected()

    def on_transport_interrupted(self) -> None:
        self.member.on_transport_interrupted()

    def on_transport_resumed(self) -> None:
        self.member.on_transport_resumed()

    def on_disconnected(self) -> None:
        self.member.on_disconnected()


class StompMember(shared.Member[Any]):
    """One broker's stomp.py-API connection in a composition
    (:class:`amqstomp._members.Member`).

    Attributes: as :class:`amqstomp._members.Member`'s, and
        username, password (str | None): the URL's ``jms.userName`` / ``jms.password``
            (used when ``connect()`` names none; the password never shown).
        headers (dict): CONNECT headers of the URL (``client-id`` from ``jms.clientID``).
        failover (bool): a ``failover:`` URL (the connection reconnects by itself).
        closing (bool): the composition is disconnecting it (its end is not a loss).
        up (bool): its connection has been connected (CONNECTED came) at least once:
            until then a call it refuses (NotConnectedException) came before
            ``connect()`` and is no loss.
    """

    def __init__(self, url: str, version: str, report: Any, keywords: Mapping[str, Any]) -> None:
        target = parse_target(url)
        options = dict(target.keywords)
        options.update(keywords)
        cls = VERSIONS[version]
        if target.heartbeats is not None and version != "1.0":
            options.setdefault("heartbeats", target.heartbeats)
        if version == "1.0":
            options.pop("heart_beat_receive_scale", None)
        connection = cls(target.host_and_ports, **options)
        if target.tls_hosts:
            connection.set_ssl(target.tls_hosts)
        wait_s = connection.timeout if connection.timeout is not None else DEFAULT_DISCONNECT_TIMEOUT
        super().__init__(url, connection, report, wait_s + DEFAULT_CLOSE_TIMEOUT, connection.disconnect,
                         connection.transport.threads)
        self.username = target.username
        self.password = target.password
        self.headers = dict(target.headers)
        self.failover = target.failover
        self.closing = False
        self.up = False
        connection.set_listener(WATCH_LISTENER, _Watch(self))

    def on_connected(self) -> None:
        """CONNECTED came (``connect()``, or a ``failover:`` member's new socket): the
        member is up, and used again if it was lost (:meth:`~amqstomp._members.Member.revive`)."""
        self.up = True
        self.revive()

    def refused(self, exc: BaseException) -> None:
        """A call found the connection not connected (``exc``, not written): a
        ``stomp://`` member that was up is lost; one never connected (the call came
        before ``connect()``) or a ``failover:`` one (reconnecting by itself) is not."""
        if self.up and not self.failover:
            self.mark_lost(exc)

    def on_disconnected(self) -> None:
        """The connection ended without a new socket (a ``stomp://`` member's loss, a
        ``failover:`` member whose attempts ran out, a connect attempt that failed):
        lost, unless being disconnected, or connected again already (a late report
        of an earlier socket)."""
        if not self.closing and not self.connection.is_connected():
            reason = self.connection.transport.close_reason or "the connection ended"
            self.mark_lost(ConnectionClosedException("connection to %s ended: %s" % (self.name, reason)))

    def close(self) -> None:
        self.closing = True
        super().close()

    @property
    def wait_s(self) -> float:
        """The connection's ``timeout`` (s), or the default of its blocking waits."""
        timeout = self.connection.timeout
        return float(timeout) if timeout is not None else DEFAULT_WAIT_TIMEOUT


class StompGroup(shared.MemberGroup[Any]):
    """What the stomp.py-style compositions share: one connection per broker of
    ``brokers`` (see :class:`amqstomp.fanin.FanInConnection` for the arguments),
    their listeners, ``connect`` and ``disconnect``."""

    _members: List[StompMember]
    #: the STOMP version of every broker's connection: ``"1.0"``, ``"1.1"`` or ``"1.2"``
    version: str

    def __init__(self, brokers: Union[str, Sequence[str]], version: str = "1.2", **keywords: Any) -> None:
        if version not in VERSIONS:
            raise ValueError("version must be '1.0', '1.1' or '1.2', got %r" % (version,))
        urls = member_urls(brokers)
        self.version = version
        self._closing = Closing()
        self._listeners: Dict[str, Any] = {}
        self._exception_listener = None
        self._members = []
        try:
            for url in urls:
                self._members.append(StompMember(url, version, self._report, keywords))
        except BaseException:
            shared.close_members(self._members)
            raise

    # ------------------------------------------------------------ listeners

    def set_listener(self, name: str, listener: Any) -> None:
        """Register ``listener`` under ``name`` on every broker's connection (stomp.py's
        ``set_listener``): its callbacks run on the dispatching thread of the connection
        that heard the event, so with several brokers concurrently; ``on_connected``,
        ``on_disconnected`` and the like come once per broker.

        Raises:
            ValueError: ``name`` is the members' own listener's (:data:`WATCH_LISTENER`).
            RequiredArgumentError: ``listener`` is None.
        """
        if name == WATCH_LISTENER:
            raise ValueError("listener name %r is the composition's own" % (name,))
        for member in self._members:
            member.connection.set_listener(name, listener)
        self._listeners[name] = listener

    def remove_listener(self, name: str) -> None:
        """Unregister the listener ``name`` from every broker's connection."""
        for member in self._members:
            if member.connection.get_listener(name) is not None:
                member.connection.remove_listener(name)
        self._listeners.pop(name, None)

    def get_listener(self, name: str) -> Optional[Any]:
        """The listener registered as ``name``, or None."""
        return self._listeners.get(name)

    @property
    def delivering_broker(self) -> Optional[str]:
        """The broker (redacted URL, as in :attr:`brokers`) whose connection's thread
        calls: in a listener callback, the broker that delivered the frame at hand
        (each connection dispatches on its own thread); None on any other thread.
        How a listener tells brokers apart: no header is added to the broker's frame."""
        member = self._member_of_thread()
        return member.name if member is not None else None

    def _member_of_thread(self) -> Optional[StompMember]:
        me = threading.current_thread()
        return next((member for member in self._members if member.owns(me)), None)

    def _member_named(self, broker: Union[str, int]) -> StompMember:
        """The member ``broker`` names: its redacted URL (as in :attr:`brokers`) or index."""
        if isinstance(broker, int) and not isinstance(broker, bool) and 0 <= broker < len(self._members):
            return self._members[broker]
        for member in self._members:
            if broker == member.name:
                return member
        raise ValueError("broker %r is not one of %s (or an index)" % (broker, self.brokers))

    # ------------------------------------------------------------ life

    def connect(self, username: Optional[str] = None, passcode: Optional[str] = None, wait: bool = True,
                headers: Optional[Mapping[str, Any]] = None, with_connect_command: bool = False,
                timeout: Optional[float] = None, **keyword_headers: Any) -> None:
        """Connect every broker's connection not connected (its ``connect(wait=True)``, in
        turn), each with ``username``/``passcode`` (else its URL's
        ``jms.userName``/``jms.password``) and the CONNECT ``headers`` (stomp.py's
        signature; ``wait`` is accepted and the call always waits: a composition needs
        to know which brokers it has). Bounded: each connect waits at most ``timeout``
        s (else the connection's ``timeout``, else 30 s), a ``failover:`` member's
        passes included.

        Called again (as a stomp.py user does after a loss), it connects the brokers
        lost since (a ``stomp://`` member whose broker went away, a ``failover:`` one
        whose attempts ran out); those connect anew and are used again (out of
        :attr:`lost`); the connected ones are left as they are. A broker connected
        again has none of its earlier subscriptions (as a plain connection's
        ``connect()``): subscribe again.

        Raises:
            ConnectFailedException: a broker could not be connected. On the first
                connect (no broker connected yet) those connected are disconnected
                again and the composition is closed; called again, the other brokers
                are still tried, the ones that failed are marked lost (:attr:`lost`),
                those up stay up, and the first error is raised.
            StompException: disconnected already (make a new one).
        """
        if self._closing.closed:
            raise StompException("%r was disconnected: make a new one" % (self,))
        again = any(member.up for member in self._members)
        first_error: Optional[BaseException] = None
        for member in self._members:
            if member.lost is None and member.connection.is_connected():
                continue
            merged = dict(member.headers)
            merged.update(headers or {})
            wait_s = timeout if timeout is not None else member.wait_s
            try:
                member.connection.connect(username if username is not None else member.username,
                                          passcode if passcode is not None else member.password,
                                          wait=True, headers=merged, with_connect_command=with_connect_command,
                                          timeout=wait_s, **keyword_headers)
            except Exception as exc:
                if not again:
                    self.disconnect()
                    raise
                member.mark_lost(exc)  # (a failed attempt: lost, the other brokers go on)
                first_error = first_error or exc
                continue
            except BaseException:
                self.disconnect()
                raise
            member.on_connected()  # (its listener hears CONNECTED later, on its own thread)
        if first_error is not None:
            raise first_error

    def is_connected(self) -> bool:
        """True while some broker's connection is connected."""
        return any(member.connection.is_connected() for member in self._members)

    def disconnect(self) -> None:
        """Disconnect every broker's connection, all at once, each bounded (its
        ``timeout`` or 10 s for the DISCONNECT receipt, then its threads), so within
        the longest of them: messages delivered and not acknowledged go back to their
        broker. Safe to call more than once; final (make a new composition to connect again).

        Raises:
            StompException: the first error a connection's disconnect raised, after the others.
        """
        self._closing.close(self._members)

    def _check_connected(self) -> None:
        """Raises NotConnectedException when ``connect()`` never connected a broker
        (a call before it: no broker is marked lost for it)."""
        if not any(member.up for member in self._members):
            raise NotConnectedException("%r is not connected: call connect() first" % (self,))

    def _live(self) -> List[StompMember]:
        live = [member for member in self._members if member.lost is None]
        if not live:
            raise NotConnectedException("every broker of %r is lost: %s" % (self, {
                name: str(exc) for name, exc in self.lost.items()}))
        return live

    def __enter__(self) -> "StompGroup":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.disconnect()
