"""Connection listeners: the callbacks a connection makes, stomp.py-compatible.

Register one with ``conn.set_listener(name, listener)``. Callbacks about
received data and the connection's life run on the connection's dispatcher
thread, one at a time and in arrival order (never on the thread that reads the
socket, so a slow callback delays neither reading nor heart-beats).
``on_send`` is the exception: it runs on the thread that sends, before the
frame is encoded, and may change the frame.

Frames handed over are :class:`amqstomp.codec.Frame` objects (``cmd``,
``headers``, ``body``); with ``auto_decode`` (the default) ``body`` is a
``str``, else ``bytes``.
"""
import logging
import sys
import threading
import time
from time import monotonic
from typing import Any, Dict, List, Optional, Tuple

from . import exception, log, utils

from .constants import (  # stomp.py's listener module star-imports stomp.constants
    CMD_ABORT, CMD_ACK, CMD_BEGIN, CMD_COMMIT, CMD_CONNECT, CMD_DISCONNECT, CMD_NACK, CMD_SEND, CMD_STOMP,
    CMD_SUBSCRIBE, CMD_UNSUBSCRIBE, HDR_ACCEPT_VERSION, HDR_ACK, HDR_CONTENT_LENGTH, HDR_CONTENT_TYPE,
    HDR_DESTINATION, HDR_HEARTBEAT, HDR_HOST, HDR_ID, HDR_LOGIN, HDR_MESSAGE_ID, HDR_PASSCODE, HDR_RECEIPT,
    HDR_SUBSCRIPTION, HDR_TRANSACTION,
)
from .exception import NotConnectedException
from .utils import Frame, calculate_heartbeats, clean_headers, default_create_thread
from ._io.timeouts import clamp_wait

__all__ = ["Publisher", "ConnectionListener", "HeartbeatListener", "WaitingListener", "StatsListener",
           "PrintingListener", "TestListener",
           "CMD_ABORT", "CMD_ACK", "CMD_BEGIN", "CMD_COMMIT", "CMD_CONNECT", "CMD_DISCONNECT", "CMD_NACK",
           "CMD_SEND", "CMD_STOMP", "CMD_SUBSCRIBE", "CMD_UNSUBSCRIBE", "HDR_ACCEPT_VERSION", "HDR_ACK",
           "HDR_CONTENT_LENGTH", "HDR_CONTENT_TYPE", "HDR_DESTINATION", "HDR_HEARTBEAT", "HDR_HOST",
           "HDR_ID", "HDR_LOGIN", "HDR_MESSAGE_ID", "HDR_PASSCODE", "HDR_RECEIPT", "HDR_SUBSCRIPTION",
           "HDR_TRANSACTION",
           # stomp.py's module has no __all__: its star import also gives what it imports
           "exception", "log", "monotonic", "sys", "threading", "time", "utils"]

_log = logging.getLogger("amqstomp.listener")


class Publisher:
    """A registry of named listeners: the interface a connection offers
    (stomp.py 9.0 ``stomp.listener.Publisher``). These do nothing; a class that
    keeps listeners overrides them."""

    def set_listener(self, name: str, listener: Any) -> None:
        """Register ``listener`` under ``name`` (replacing one of that name)."""

    def remove_listener(self, name: str) -> None:
        """Forget the listener registered under ``name``."""

    def get_listener(self, name: str) -> Any:
        """The listener registered under ``name``, or None (always None here)."""
        return None


class ConnectionListener:
    """Base class with every callback a connection makes; each does nothing.
    Override the ones you need."""

    def on_connecting(self, host_and_port: Tuple[str, int]) -> None:
        """A socket to ``host_and_port`` is open; no STOMP frame has been exchanged yet."""

    def on_connected(self, frame: Any) -> None:
        """The broker's CONNECTED frame arrived (STOMP 1.2 "CONNECTED Frame")."""

    def on_disconnecting(self) -> None:
        """The client is about to send DISCONNECT."""

    def on_disconnected(self) -> None:
        """The socket is closed (by ``disconnect``, the broker, the network, a
        heart-beat timeout or a protocol error). Always the connection's last
        callback; nothing should be sent until it connects again."""

    def on_heartbeat_timeout(self) -> None:
        """Nothing arrived from the broker within the negotiated heart-beat
        interval (with grace); ``on_disconnected`` follows (or, when the
        connection reconnects by itself, ``on_transport_interrupted``)."""

    def on_transport_interrupted(self) -> None:
        """The socket was lost and the connection reconnects by itself
        (``auto_reconnect=True``; ActiveMQ's TransportListener.transportInterrupted).
        Messages not acknowledged yet come again, from the broker, flagged
        ``redelivered``; ACKs for them are not sent on the new socket."""

    def on_transport_resumed(self) -> None:
        """A new socket is connected (CONNECTED arrived) after
        ``on_transport_interrupted``; subscriptions are being replayed
        (ActiveMQ's TransportListener.transportResumed)."""

    def on_before_message(self, frame: Any) -> None:
        """Called for each MESSAGE on every listener before any ``on_message``."""

    def on_message(self, frame: Any) -> None:
        """A MESSAGE frame arrived."""

    def on_slow_consumer(self, info: Dict[str, Any]) -> None:
        """A subscription's local buffer holds more than 2 x prefetch messages
        (ActiveMQ's slow consumer), or no longer does. ``info``: ``subscription``
        (id), ``destination``, ``pending`` and ``prefetch`` (messages). Called
        once each time the state changes."""

    def on_receipt(self, frame: Any) -> None:
        """A RECEIPT frame arrived (for a frame sent with a ``receipt`` header)."""

    def on_error(self, frame: Any) -> None:
        """An ERROR frame arrived, as the broker sent it (its ``message`` header
        and body hold the broker's reason; :func:`amqstomp.exception.broker_reason`
        joins them). An ERROR that answers CONNECT comes through
        :meth:`on_connect_refused`, which calls this one unless overridden."""

    def on_connect_refused(self, frame: Any) -> None:
        """amqstomp: the broker answered CONNECT with this ERROR frame (a refused
        login, virtual host or client id); ``connect(wait=True)`` raises
        :class:`~amqstomp.exception.ConnectRefusedError` with its reason. By
        default it calls :meth:`on_error` (stomp.py reports it there)."""
        self.on_error(frame)

    def on_protocol_error(self, error: Any) -> None:
        """amqstomp: the broker's bytes were not valid STOMP (``error``, a
        :class:`~amqstomp.exception.StompProtocolError` naming the fault and its
        byte offset); the client closes the connection, ``on_disconnected``
        follows (``transport.close_reason`` says why)."""

    def on_send(self, frame: Any) -> None:
        """A frame is about to be sent (on the sending thread; may change it)."""

    def on_heartbeat(self) -> None:
        """A heart-beat (a lone EOL) arrived."""

    def on_receiver_loop_completed(self, frame: Any) -> None:
        """The thread reading the socket ended (``frame`` is always None);
        ``on_disconnected`` follows."""


for _callback in vars(ConnectionListener).values():  # no-ops the dispatcher skips (amqstomp._engine.dispatch)
    if callable(_callback) and _callback.__name__.startswith("on_"):
        setattr(_callback, "amqstomp_noop", True)
del _callback

class HeartbeatListener(ConnectionListener):
    """Sends heart-beats and watches the broker's, for a stomp.py-style
    transport (stomp.py 9.0 ``stomp.listener.HeartbeatListener``; STOMP 1.2
    "Heart-beating"). amqstomp's own connections do not need it: their engine
    negotiates and runs heart-beats (the ``heartbeats=`` argument).

    Register it on a transport that has stomp.py's ``transmit(frame)``,
    ``is_connected()``, ``set_connected(bool)``, ``disconnect_socket()``,
    ``stop()`` and ``listeners`` (a dict of name to listener). It adds
    ``heart-beat`` to the CONNECT/STOMP frame it is shown in ``on_send``; on
    CONNECTED it works out the periods with :func:`amqstomp.utils.calculate_heartbeats`
    and starts a daemon thread that transmits ``Frame(None, {}, None)`` (a
    heart-beat) whenever nothing was sent for the send period, and, when nothing
    (a frame or a heart-beat) came for ``receive period x heart_beat_receive_scale``,
    logs a WARNING, closes the transport and calls ``on_heartbeat_timeout`` on its
    listeners. ``on_disconnected`` ends the thread.

    Args:
        transport: the stomp.py-style transport.
        heartbeats (tuple[int, int]): the client's ``(cx, cy)`` in ms; after
            CONNECTED, the negotiated ``(send, receive)``.
        heart_beat_receive_scale (float): grace factor on the receive period.

    Attributes (as stomp.py's):
        running (bool): the heart-beat thread should keep going.
        transport: the transport it was registered on.
        heartbeats (tuple[int, int]): see Args.
        received_heartbeat (float | None): ``time.monotonic()`` time of the
            last thing received (or the grace end).
        heartbeat_thread (threading.Thread | None): the heart-beat thread.
        next_outbound_heartbeat (float | None): when the next heart-beat is due.
        heart_beat_receive_scale (float): see Args.
        heartbeat_terminate_event (threading.Event): set to end the thread.
        disconnecting (bool): a DISCONNECT was sent.
        send_sleep (float): the send period in seconds; 0 is off.
        receive_sleep (float): the receive period in seconds; 0 is off.
    """

    def __init__(self, transport: Any, heartbeats: Tuple[int, int], heart_beat_receive_scale: float = 1.5) -> None:
        self.running = False
        self.transport = transport
        self.heartbeats = heartbeats
        self.received_heartbeat: Optional[float] = None
        self.heartbeat_thread: Optional[threading.Thread] = None
        self.next_outbound_heartbeat: Optional[float] = None
        self.heart_beat_receive_scale = heart_beat_receive_scale
        self.heartbeat_terminate_event = threading.Event()
        self.disconnecting = False
        self.send_sleep = 0.0
        self.receive_sleep = 0.0

    def on_connected(self, frame: Any) -> None:
        self.disconnecting = False
        value = frame.headers.get(HDR_HEARTBEAT)
        if value is None:
            return
        self.heartbeats = calculate_heartbeats(value.replace(" ", "").split(","), self.heartbeats)
        _log.debug("heart-beats negotiated: send %d ms, receive %d ms", *self.heartbeats)
        if self.heartbeats == (0, 0):
            return
        self.send_sleep = self.heartbeats[0] / 1000.0
        self.receive_sleep = self.heartbeats[1] / 1000.0 * self.heart_beat_receive_scale
        self.received_heartbeat = time.monotonic() + self.receive_sleep  # grace for the first one
        self.running = True
        if self.heartbeat_thread is None:
            self.heartbeat_terminate_event.clear()
            thread = default_create_thread(self._heartbeat_loop)
            thread.name = "StompHeartbeat" + thread.name
            self.heartbeat_thread = thread

    def on_disconnecting(self) -> None:
        self.disconnecting = True

    def on_disconnected(self) -> None:
        self.running = False
        self.heartbeat_terminate_event.set()

    def on_message(self, frame: Any) -> None:
        self._received()

    def on_receipt(self, *_: Any) -> None:
        self._received()

    def on_error(self, *_: Any) -> None:
        self._received()

    def on_heartbeat(self) -> None:
        self._received()

    def on_send(self, frame: Any) -> None:
        if frame.cmd in (CMD_CONNECT, CMD_STOMP) and tuple(self.heartbeats) != (0, 0):
            frame.headers[HDR_HEARTBEAT] = "%s,%s" % tuple(self.heartbeats)
        if self.next_outbound_heartbeat is not None:
            self.next_outbound_heartbeat = time.monotonic() + self.send_sleep

    def _received(self) -> None:
        if self.received_heartbeat is not None:
            # the grace given at CONNECTED is kept until it ends
            self.received_heartbeat = max(self.received_heartbeat, time.monotonic())

    def _heartbeat_loop(self) -> None:
        if self.send_sleep:
            self.next_outbound_heartbeat = time.monotonic() + self.send_sleep
        while not self.heartbeat_terminate_event.is_set():
            now = time.monotonic()
            waits = []
            if self.next_outbound_heartbeat is not None:
                waits.append(self.next_outbound_heartbeat - now)
            if self.receive_sleep and self.received_heartbeat is not None:
                waits.append(self.received_heartbeat + self.receive_sleep - now)
            pause = min(waits) if waits else self.send_sleep or self.receive_sleep
            if pause > 0 and self.heartbeat_terminate_event.wait(pause):
                break
            if not self.transport.is_connected() or self.disconnecting:
                self.heartbeat_terminate_event.wait(self.send_sleep or self.receive_sleep)
                continue
            now = time.monotonic()
            if self.send_sleep and self.next_outbound_heartbeat is not None and now >= self.next_outbound_heartbeat:
                try:
                    self.transport.transmit(Frame(None, {}, None))  # type: ignore[arg-type]
                except NotConnectedException:
                    _log.debug("heart-beat not sent: not connected")
                except Exception as exc:  # the loop must go on; the receive check decides
                    _log.debug("heart-beat not sent: %s", exc)
                self.next_outbound_heartbeat = now + self.send_sleep
            if self.receive_sleep and self.received_heartbeat is not None \
                    and now - self.received_heartbeat > self.receive_sleep:
                _log.warning("heart-beat timeout: nothing received for %.3f s (limit %.3f s)",
                            now - self.received_heartbeat, self.receive_sleep)
                self.received_heartbeat = now  # one report per silence
                self.transport.set_connected(False)
                self.transport.disconnect_socket()
                self.transport.stop()
                for listener in list(self.transport.listeners.values()):
                    callback = getattr(listener, "on_heartbeat_timeout", None)
                    if callback is not None:
                        callback()
        self.heartbeat_thread = None
        _log.debug("heart-beat loop ended")


class WaitingListener(ConnectionListener):
    """Lets a thread wait for one receipt id, and for the disconnection.

    Args:
        receipt (str): the receipt id to wait for.
    """

    def __init__(self, receipt: Optional[str]) -> None:
        self.receipt = receipt
        self.received = False
        self.disconnected = False
        self.receipt_condition = threading.Condition()
        self.disconnect_condition = threading.Condition()

    def on_receipt(self, frame: Any) -> None:
        if frame.headers.get("receipt-id") == self.receipt:
            with self.receipt_condition:
                self.received = True
                self.receipt_condition.notify_all()

    def on_connected(self, frame: Any) -> None:
        with self.disconnect_condition:
            self.disconnected = False

    def on_disconnected(self) -> None:
        with self.disconnect_condition:
            self.disconnected = True
            self.disconnect_condition.notify_all()
        with self.receipt_condition:  # no receipt can come any more
            self.receipt_condition.notify_all()

    def wait_on_receipt(self, timeout: Optional[float] = None) -> bool:
        """Wait until the receipt arrives (then re-arm for the next one).

        Args:
            timeout (float | None): seconds; None waits with no limit.

        Returns:
            bool: True when the receipt arrived; False on timeout or when the
            connection ended first.

        Raises:
            InvalidTimeoutError: (a TypeError and a ValueError) ``timeout`` is
                not a number of seconds.
        """
        timeout = clamp_wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.receipt_condition:
            while not self.received:
                if self.disconnected:
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self.receipt_condition.wait(remaining)
            self.received = False
            return True

    def wait_on_disconnected(self, timeout: Optional[float] = None) -> bool:
        """Wait until ``on_disconnected``.

        Args:
            timeout (float | None): seconds; None waits with no limit.

        Returns:
            bool: True when disconnected, False on timeout.

        Raises:
            InvalidTimeoutError: (a TypeError and a ValueError) ``timeout`` is
                not a number of seconds.
        """
        timeout = clamp_wait(timeout)
        with self.disconnect_condition:
            return self.disconnect_condition.wait_for(lambda: self.disconnected, timeout)


class StatsListener(ConnectionListener):
    """Counts what happens on a connection.

    Attributes:
        errors (int): ERROR frames heard.
        connections (int): connection attempts (``on_connecting`` calls).
        disconnects (int): ``on_disconnected`` calls.
        messages (int): MESSAGE frames heard.
        messages_sent (int): frames sent (``on_send`` calls).
        heartbeat_timeouts (int): ``on_heartbeat_timeout`` calls.
        heartbeat_count (int): heart-beats received.
    """

    def __init__(self) -> None:
        self.errors = 0
        self.connections = 0
        self.disconnects = 0
        self.messages = 0
        self.messages_sent = 0
        self.heartbeat_timeouts = 0
        self.heartbeat_count = 0

    def on_connecting(self, host_and_port: Tuple[str, int]) -> None:
        self.connections += 1
        _log.info("connecting to %s:%s (connection #%d)", host_and_port[0], host_and_port[1], self.connections)

    def on_disconnected(self) -> None:
        self.disconnects += 1
        _log.info("disconnected (#%d)", self.disconnects)

    def on_error(self, frame: Any) -> None:
        self.errors += 1
        _log.info("broker error: %s", frame.headers.get("message", ""))

    def on_message(self, frame: Any) -> None:
        self.messages += 1

    def on_send(self, frame: Any) -> None:
        self.messages_sent += 1

    def on_heartbeat_timeout(self) -> None:
        self.heartbeat_timeouts += 1

    def on_heartbeat(self) -> None:
        self.heartbeat_count += 1

    def __str__(self) -> str:
        return ("Connections: %d\nDisconnects: %d\nMessages sent: %d\nMessages received: %d\n"
                "Heartbeats received: %d\nErrors: %d" % (
                    self.connections, self.disconnects, self.messages_sent, self.messages,
                    self.heartbeat_count, self.errors))


class PrintingListener(ConnectionListener):
    """Prints every callback stomp.py 9.0's ``PrintingListener`` prints, in its
    words (``on_message {headers} body``, ``on_send CMD {headers} body`` with the
    passcode masked by :func:`amqstomp.utils.clean_headers`...): with ``print()``,
    or, with ``print_to_log``, to the ``amqstomp.listener`` log at INFO. The log
    lines leave the body out (it follows at DEBUG): amqstomp never logs bodies
    above DEBUG, where stomp.py logs them at INFO. Like stomp.py's, it prints
    nothing for ``on_disconnecting`` and ``on_receiver_loop_completed``.

    Args:
        print_to_log (bool): log instead of print.
    """

    def __init__(self, print_to_log: bool = False) -> None:
        self.print_to_log = print_to_log

    def _out(self, text: str, *body: Any) -> None:
        """``text``, then the body when one is given (stomp.py's ``"%s %s"``)."""
        if self.print_to_log:
            _log.info("%s", text)
            if body and _log.isEnabledFor(logging.DEBUG):
                _log.debug("  body: %r", body[0])
        elif body:
            print("%s %s" % (text, body[0]))
        else:
            print(text)

    def on_connecting(self, host_and_port: Tuple[str, int]) -> None:
        self._out("on_connecting %s %s" % tuple(host_and_port))

    def on_connected(self, frame: Any) -> None:
        self._out("on_connected %s" % (frame.headers,), frame.body)

    def on_disconnected(self) -> None:
        self._out("on_disconnected")

    def on_heartbeat_timeout(self) -> None:
        self._out("on_heartbeat_timeout")

    def on_before_message(self, frame: Any) -> None:
        self._out("on_before_message %s" % (frame.headers,), frame.body)

    def on_message(self, frame: Any) -> None:
        self._out("on_message %s" % (frame.headers,), frame.body)

    def on_receipt(self, frame: Any) -> None:
        self._out("on_receipt %s" % (frame.headers,), frame.body)

    def on_error(self, frame: Any) -> None:
        self._out("on_error %s" % (frame.headers,), frame.body)

    def on_send(self, frame: Any) -> None:
        self._out("on_send %s %s" % (frame.cmd, clean_headers(frame.headers)), frame.body)

    def on_heartbeat(self) -> None:
        self._out("on_heartbeat")


class TestListener(StatsListener, WaitingListener, PrintingListener):
    """Stats + waiting + printing, and it keeps the messages: handy in tests
    (stomp.py 9.0's ``TestListener``: it prints every callback as
    :class:`PrintingListener` does).

    Args:
        receipt (str | None): receipt id for :meth:`wait_on_receipt`.
        print_to_log (bool): see :class:`PrintingListener`.
        verbose (bool): amqstomp's: False prints (and logs) nothing.

    Attributes:
        message_list (list[tuple[dict, Any]]): (headers, body) of each MESSAGE.
        timestamp (str): when it was made, ``time.strftime("%Y%m%d%H%M%S")``
            (stomp.py's attribute; tests use it in unique names).
        message_received (bool): stomp.py's flag: set by each message, cleared
            by :meth:`wait_for_message` (or by setting it False).
        heartbeat_received (bool): the same for heart-beats and :meth:`wait_for_heartbeat`.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, receipt: Optional[str] = None, print_to_log: bool = False, verbose: bool = True) -> None:
        StatsListener.__init__(self)
        WaitingListener.__init__(self, receipt)
        PrintingListener.__init__(self, print_to_log)
        self.verbose = verbose
        self.message_list: List[Tuple[Any, Any]] = []
        self.message_condition = threading.Condition()
        self.heartbeat_condition = threading.Condition()
        self.message_received = False
        self.heartbeat_received = False
        self.timestamp = time.strftime("%Y%m%d%H%M%S")

    def _out(self, text: str, *body: Any) -> None:
        if self.verbose:
            PrintingListener._out(self, text, *body)

    def on_connecting(self, host_and_port: Tuple[str, int]) -> None:
        StatsListener.on_connecting(self, host_and_port)
        PrintingListener.on_connecting(self, host_and_port)

    def on_connected(self, frame: Any) -> None:
        WaitingListener.on_connected(self, frame)
        PrintingListener.on_connected(self, frame)

    def on_disconnected(self) -> None:
        StatsListener.on_disconnected(self)
        WaitingListener.on_disconnected(self)
        PrintingListener.on_disconnected(self)

    def on_error(self, frame: Any) -> None:
        StatsListener.on_error(self, frame)
        PrintingListener.on_error(self, frame)

    def on_receipt(self, frame: Any) -> None:
        WaitingListener.on_receipt(self, frame)
        PrintingListener.on_receipt(self, frame)

    def on_send(self, frame: Any) -> None:
        StatsListener.on_send(self, frame)
        PrintingListener.on_send(self, frame)

    def on_heartbeat_timeout(self) -> None:
        StatsListener.on_heartbeat_timeout(self)
        PrintingListener.on_heartbeat_timeout(self)

    def on_message(self, frame: Any) -> None:
        StatsListener.on_message(self, frame)
        PrintingListener.on_message(self, frame)
        with self.message_condition:
            self.message_list.append((frame.headers, frame.body))
            self.message_received = True
            self.message_condition.notify_all()

    def on_heartbeat(self) -> None:
        StatsListener.on_heartbeat(self)
        PrintingListener.on_heartbeat(self)
        with self.heartbeat_condition:
            self.heartbeat_received = True
            self.heartbeat_condition.notify_all()

    def wait_for_message(self, timeout: Optional[float] = None) -> Optional[bool]:
        """Wait until :attr:`message_received` is set, then clear it (stomp.py's
        flag: one call returns for any number of messages that came since the
        last). ``timeout``: seconds, amqstomp's (None: no limit, as stomp.py).

        Returns:
            None without ``timeout`` (stomp.py's); with it, True, or False when
            none came in time.

        Raises:
            InvalidTimeoutError: ``timeout`` is not a number of seconds.
        """
        return _wait_flag(self.message_condition, self, "message_received", timeout)

    def get_latest_message(self) -> Tuple[Any, Any]:
        """(headers, body) of the last message received."""
        return self.message_list[-1]

    def wait_for_heartbeat(self, timeout: Optional[float] = None) -> Optional[bool]:
        """:meth:`wait_for_message` for :attr:`heartbeat_received` (a heart-beat
        received)."""
        return _wait_flag(self.heartbeat_condition, self, "heartbeat_received", timeout)


def _wait_flag(condition: threading.Condition, owner: Any, flag: str, timeout: Optional[float]) -> Optional[bool]:
    """Wait (``timeout`` s, None: no limit) for ``owner.<flag>``, then clear it:
    None without ``timeout`` (stomp.py's return), else whether it was set."""
    wait_s = clamp_wait(timeout)
    with condition:
        ok = condition.wait_for(lambda: getattr(owner, flag), wait_s)
        if ok:
            setattr(owner, flag, False)
    return None if timeout is None else bool(ok)
