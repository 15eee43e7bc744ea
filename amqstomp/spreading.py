"""``SpreadingConnection``: stomp.py's ``send`` spread over the brokers of a list,
round robin, each broker with its own connection and failover
(docs/guides/scaling-out.md, "The spreading producer")::

    import amqstomp

    conn = amqstomp.SpreadingConnection("failover:(stomp://a:61613,stomp://b:61613)?maxReconnectDelay=2000",
                                        timeout=2)
    conn.connect("admin", "admin")
    broker = conn.send("/queue/orders", "hi", receipt="r-1", persistent="true")   # the broker that took it

It is a composition: per broker an ordinary stomp.py-API connection, each send
that connection's ``send`` (and, with ``receipt``, its ``wait_for_receipt``);
nothing of the protocol is here. The JMS-style twin is
:class:`amqstomp.jms.SpreadingProducer`; both stand on :mod:`amqstomp._members`.
A class apart from :class:`~amqstomp.fanin.FanInConnection`: see there why.

Licensed under the Apache License, Version 2.0.
"""
import logging
from typing import Any, List, Mapping, Optional, Sequence, Union

from ._members import Turns
from ._stomppy_members import StompGroup, StompMember
from .exception import ConnectionClosedException, NotConnectedException

__all__ = ["SpreadingConnection"]

log = logging.getLogger("amqstomp.fanin")


class SpreadingConnection(StompGroup):
    """stomp.py's ``send`` over one connection per broker of ``brokers``: each send
    goes to the next broker in turn that can take it.

    Args:
        brokers (str | list[str]): as :class:`~amqstomp.fanin.FanInConnection`'s.
        version (str): as there (``"1.2"`` by default).
        **keywords: as there; ``timeout`` (s) is also how long a send caught by a
            ``failover:`` member's loss waits for its new socket before it goes to
            the next broker (30 s when None: give one).

    Raises:
        as :class:`~amqstomp.fanin.FanInConnection`.
    """

    def __init__(self, brokers: Union[str, Sequence[str]], version: str = "1.2", **keywords: Any) -> None:
        super().__init__(brokers, version, **keywords)
        self._sent = [0] * len(self._members)
        self._turns = Turns(len(self._members))

    def __repr__(self) -> str:
        return "<SpreadingConnection on %d brokers%s>" % (len(self._members), " closed" if self.closed else "")

    @property
    def sent(self) -> List[int]:
        """Messages each broker took (sends that returned), in the order of :attr:`brokers`."""
        return list(self._sent)

    def send(self, destination: str, body: Any, content_type: Optional[str] = None,
             headers: Optional[Mapping[str, Any]] = None, **keyword_headers: Any) -> str:
        """SEND to one broker (that connection's
        :meth:`~amqstomp.protocol.BaseProtocol.send`, same arguments) and return its
        name (redacted URL, as in :attr:`brokers`).

        The brokers are taken in turn (round robin). A broker is passed over while
        another thread's send holds it (so a broker whose producer flow control
        holds a send back, in its write or its RECEIPT, keeps only that send), while
        it is between sockets (failover), or once it is lost; when every broker is
        passed over, the send waits on the next one not lost, by that connection's
        rules. A send refused before it was written (NotConnectedException: the
        connection gone, or no new socket within its ``timeout``) goes to the next
        broker.

        With a ``receipt`` header the send returns only once that broker's RECEIPT
        came (the broker has the message; with ``persistent:true``, stored). A socket
        lost after the SEND was written and before its RECEIPT (the broker may have
        it) sends it to the next broker: at least once, a duplicate possible, never
        a loss. Without ``receipt`` a send returns once written, as stomp.py's: a
        socket lost then may lose it.

        Raises:
            NotConnectedException: ``connect()`` not called yet (no broker is marked
                lost for it), every broker is lost, or none took it.
            ReceiptTimeout: no RECEIPT within the connection's ``timeout`` (30 s when
                None): the message may be on that broker; it is not sent elsewhere.
            BrokerError: the broker refused it (an ERROR for the receipt).
            ValueError, TypeError: as a connection's ``send`` (nothing sent anywhere).
        """
        if self.closed:
            raise NotConnectedException("%r is disconnected: SEND not sent" % (self,))
        self._check_connected()
        receipt = keyword_headers.get("receipt", (headers or {}).get("receipt"))
        order = self._turns.order()
        tried: List[int] = []
        for index in [i for i in order if self._members[i].usable]:  # free, connected, not held
            member = self._members[index]
            if not member.lock.acquire(blocking=False):
                continue
            try:
                if self._send_on(index, destination, body, content_type, headers, keyword_headers, receipt):
                    return member.name
            finally:
                member.lock.release()
            tried.append(index)
        for index in order:  # every broker busy or between sockets: wait on one by its rules
            member = self._members[index]
            if member.lost is not None or index in tried:
                continue
            with member.lock:
                if self._send_on(index, destination, body, content_type, headers, keyword_headers, receipt):
                    return member.name
        raise NotConnectedException("no broker of %r took the SEND; lost: %s" % (
            self, {name: str(exc) for name, exc in self.lost.items()}))

    def _send_on(self, index: int, destination: str, body: Any, content_type: Optional[str],
                 headers: Optional[Mapping[str, Any]], keyword_headers: Mapping[str, Any], receipt: Any) -> bool:
        """True: member ``index`` took it; False: not written there, or its receipt lost with its socket."""
        member: StompMember = self._members[index]
        if member.lost is not None:
            return False
        conn = member.connection
        try:
            conn.send(destination, body, content_type, headers, **keyword_headers)
        except NotConnectedException as exc:  # not written (lost only if it was up: StompMember.refused)
            member.refused(exc)
            log.info("broker %s: not connected, next broker: %s", member.name, exc)
            return False
        if receipt is not None:
            try:
                conn.wait_for_receipt(str(receipt), member.wait_s)
            except ConnectionClosedException as exc:  # written, its socket lost before the RECEIPT
                if not member.failover:
                    member.mark_lost(exc)
                log.warning("broker %s: SEND written, socket lost before its RECEIPT (the broker may have it): "
                            "sent to the next broker (at least once): %s", member.name, exc)
                return False
        self._sent[index] += 1
        self._turns.took(index)
        return True
