"""SUBSCRIBE gated on its RECEIPT, for every API: the subscribing rules of
:class:`amqstomp._engine.client.Client`.

ActiveMQ starts dispatching to a subscription only after it sent the RECEIPT
of its SUBSCRIBE (STOMP 1.2 "SUBSCRIBE", "RECEIPT"), so every SUBSCRIBE
amqstomp waits for carries a receipt of its own (:meth:`Subscribing.write_subscribe`:
no listener's ``on_receipt``). Written once here and used by both APIs:

* after a reconnect, every registered subscription is sent again, each
  waiting for its RECEIPT, before anything else is written (:meth:`Subscribing.replay`);
* a SUBSCRIBE over failover is written again on the new socket when its socket
  is lost before the RECEIPT, unless the replay covered it (:meth:`Subscribing.subscribe`,
  the JMS consumers');
* a SUBSCRIBE the broker refused (ERROR) unregisters its subscription, unless a
  replay replaced it meanwhile (:meth:`Subscribing.subscription_refused`, the
  stomp.py ``subscribe()``'s and the JMS consumers').

The registration itself is the subscription table's
(:meth:`amqstomp._engine.subscription.SubscriptionManager.prepare`); the SUBSCRIBE's
headers, its receipt among them, the pure core's (:mod:`amqstomp._core.subscriptions`).
"""
import logging
import time
from typing import Any, Callable, Mapping, Optional, Tuple

from .._core.subscriptions import gated_headers, receipt_id
from ..exception import BrokerError, ConnectionClosedException, NotConnectedException
from .ports import TransportPort, WaitUp

__all__ = ["Subscribing"]

log = logging.getLogger("amqstomp.engine")


class Subscribing:
    """The SUBSCRIBE rules of :class:`amqstomp._engine.client.Client` (see the
    module docstring)."""

    transport: TransportPort

    def replay(self, manager: Any, wait_s: Optional[float], receipt_prefix: str,
               skip: Optional[Callable[[Any], bool]] = None,
               refused: Optional[Callable[[Any, BrokerError], None]] = None) -> None:
        """Failover thread, on a new socket: SUBSCRIBE every subscription of
        ``manager`` again (:meth:`SubscriptionManager.renew`: same id and
        headers, a fresh window), each by :meth:`subscribe_gated` with a receipt
        ``<prefix>-<id>-<socket>``, waiting for it up to ``wait_s`` s (ActiveMQ
        dispatches only after its RECEIPT). ``skip(sub)`` True leaves one out (the
        facade deals with it); one the broker refuses (ERROR) is discarded, logged
        and handed to ``refused(sub, error)`` (never retried).

        Raises:
            ReceiptTimeout, ConnectionClosedException: the socket failed the
                replay (the reconnect loop then tries again).
        """
        for sub in manager.renew():
            if manager.get(sub.id) is not sub:
                continue  # unsubscribed or dropped while the ones before it were replayed
            if skip is not None and skip(sub):
                continue
            try:
                self.subscribe_gated(sub.headers, self.subscribe_receipt(receipt_prefix, sub.id), wait_s,
                                     "receipt for the replayed SUBSCRIBE %s" % sub.id)
            except BrokerError as exc:  # reported once, never retried
                manager.discard(sub.id)
                log.error("subscription %s to %s refused after reconnecting; dropped: %s",
                          sub.id, sub.destination, exc)
                if refused is not None:
                    refused(sub, exc)

    # ------------------------------------------------------------ subscribing

    def subscribe_receipt(self, prefix: str, sub_id: Any) -> str:
        """The receipt id of a SUBSCRIBE this client waits for itself on the
        open socket: ``<prefix>-<id>-<socket number>`` (unique per socket, so a
        late RECEIPT of a lost socket never answers the new socket's)."""
        return receipt_id(prefix, sub_id, self.transport.link_seq)

    def write_subscribe(self, headers: Mapping[str, Any], receipt: str,
                        send: Optional[Callable[[str, Mapping[str, Any]], Any]] = None) -> Any:
        """Write SUBSCRIBE ``headers`` (:meth:`SubscriptionManager.prepare`'s)
        with ``receipt``, marked as amqstomp's own before it is written
        (:meth:`Transport.own_receipt`: its RECEIPT reaches no listener's
        ``on_receipt``; STOMP 1.2 "RECEIPT", ActiveMQ starts dispatching only
        after it). ``send(cmd, headers)`` writes it (``transport.send_frame``,
        the open socket, when None; the stomp.py facade's goes through a replaced
        ``send_frame`` and the failover wait).

        Returns:
            what ``send`` returns: the receipt future (None from a replaced send).
        """
        wire = gated_headers(headers, receipt)
        self.transport.own_receipt(receipt)
        return (send or self.transport.send_frame)("SUBSCRIBE", wire)

    def subscribe_gated(self, headers: Mapping[str, Any], receipt: str, wait_s: Optional[float], what: str) -> None:
        """:meth:`write_subscribe` on the open socket, then wait up to ``wait_s``
        seconds (None: as long as the socket lives) for its RECEIPT.

        Raises:
            BrokerError: the broker refused the SUBSCRIBE (ERROR).
            ReceiptTimeout: no RECEIPT within ``wait_s`` (``what`` names it).
            ConnectionClosedException, NotConnectedException: the socket was
                lost before the RECEIPT (or before the write).
        """
        future = self.write_subscribe(headers, receipt)
        assert future is not None  # it has a receipt header
        self.transport.wait_future(future, wait_s, what)

    @staticmethod
    def subscription_refused(manager: Any, sub: Any) -> bool:
        """The broker refused (ERROR) a SUBSCRIBE of ``sub``: it is unregistered
        (its id is free again, a reconnect does not replay it) and True is
        returned -- unless a reconnect's replay has replaced it in ``manager``
        meanwhile (the ERROR answered the first socket's SUBSCRIBE, or a
        duplicate of the replay's): then False, and it stays."""
        if manager.get(sub.id) is not sub:
            return False
        manager.discard(sub.id)
        return True

    def subscribe(self, manager: Any, sub: Any, headers: Mapping[str, Any], wait_up: WaitUp,
                  receipt_s: float, deadline: Optional[float], receipt_prefix: str,
                  vanished: Callable[[], BaseException], replayed: bool = True) -> Tuple[Any, int]:
        """The SUBSCRIBE of ``sub``, registered in ``manager`` before (so that a
        reconnect that starts meanwhile replays it), over failover: wait for a
        socket that is up and not being replayed (``wait_up``), write it with a
        receipt (:meth:`subscribe_receipt`) and wait for its RECEIPT, at most
        ``receipt_s`` seconds and not past ``deadline`` (``time.monotonic()``;
        None: no limit). When the socket is lost before the RECEIPT it is written
        again on the new socket, unless the reconnect's :meth:`replay` covered it
        meanwhile (a ``replayed`` subscription the manager renewed: its RECEIPT
        came then). One not ``replayed`` (a JMS queue browse, which the facade
        leaves out of the replay until its first RECEIPT) is written on the new
        socket under its renewed registration.

        Returns:
            (Subscription, int): the registration now current (``sub``, or the
            replay's) and the socket whose RECEIPT came for this call's SUBSCRIBE
            (0 when the replay's RECEIPT counts instead).

        Raises:
            whatever ``vanished()`` returns, when the manager no longer holds the
                subscription (closed, or refused on replay).
            BrokerError: the broker refused it (not a duplicate of a replay).
            ReceiptTimeout: no RECEIPT in time.
            whatever ``wait_up`` raises (no socket in time, failover gave up).
        """
        sub_id = sub.id
        transport = self.transport
        while True:
            wait_up("SUBSCRIBE", None)  # connected, and any replay finished
            current = manager.get(sub_id)
            if current is None:
                raise vanished()
            if current is not sub:
                if replayed:
                    return current, 0  # a reconnect after the registration replayed it and got its RECEIPT
                sub = current  # renewed before its RECEIPT came and left to this call: send it on the new socket
            seq = transport.link_seq
            left = receipt_s if deadline is None else max(0.0, min(receipt_s, deadline - time.monotonic()))
            try:
                self.subscribe_gated(headers, self.subscribe_receipt(receipt_prefix, sub_id), left,
                                     "SUBSCRIBE receipt")
                return sub, seq
            except (ConnectionClosedException, NotConnectedException) as exc:
                # the socket went before the RECEIPT: the reconnect replays the subscription, or
                # (when it renewed the subscriptions before this one was registered) the next turn
                # sends it on the new socket
                log.info("SUBSCRIBE %s interrupted by a failover (%s); waiting for the new socket", sub_id, exc)
            except BrokerError:
                now = manager.get(sub_id)
                if now is not None and now is not sub:
                    return now, 0  # a duplicate of the replay that a reconnect sent meanwhile
                raise
