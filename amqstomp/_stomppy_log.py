"""stomp.py 9.0's DEBUG lines about frames and heart-beats, under its logger ``"stomp.py"``.

stomp.py users' tests count frames in its DEBUG log (``caplog`` records of the
``"stomp.py"`` logger): ``sending frame: [b'SEND', b'\\n', ...]`` for each frame
written (stomp/transport.py ``BaseTransport.transmit``, the frame's lines as
``stomp.utils.convert_frame`` makes them, a passcode masked by ``clean_lines``),
``received frame: 'MESSAGE', headers={...}, body='...'`` for each CONNECTED,
MESSAGE, RECEIPT, ERROR and heart-beat received (``BaseTransport.process_frame``),
and the heart-beat loop's lines (stomp/listener.py ``HeartbeatListener``).
amqstomp writes the same texts, at DEBUG, under the same logger, from the
places that do the same work (the transport's ``send_frame``, the reader, the
link's heart-beat timer), only while that logger is enabled for DEBUG:

* frames sent: checked inside the transport's own DEBUG check (``"stomp.py"`` is
  the parent of ``"amqstomp"``, :mod:`amqstomp.log`), so nothing is added to a
  write's default path;
* frames received (but the RECEIPTs of receipts amqstomp asked for itself,
  which stomp.py never asked for): a logging frame sink is chosen when a socket opens
  (:meth:`amqstomp._transport_base.BaseTransport.frame_sink`), so DEBUG must be
  enabled on ``"stomp.py"`` before ``connect()`` (as a test's
  ``caplog.set_level(logging.DEBUG, logger="stomp.py")`` is);
* heart-beats: looked up per heart-beat (a few per second at most).

Bodies appear only at DEBUG, as in stomp.py; the passcode never does.
"""
import logging
import time
from typing import Any, Dict, Mapping, Optional

from .codec import Frame
from ._stomppy_wire import escaped, escapes
from .utils import clean_lines, convert_frame

__all__ = ["STOMP_PY_LOG", "enabled", "log_sent", "log_received", "log_heartbeat_sent", "log_heartbeats_negotiated",
           "log_heartbeat_loop_ended", "LoggingFrameSink"]

#: stomp.py 9.0's one logger (stomp/log.py)
STOMP_PY_LOG = logging.getLogger("stomp.py")
#: stomp.py's heart-beat frame as ``transmit`` logs it: ``Frame(None, {}, None)`` is one EOL
_HEARTBEAT_LINES = [b"\n"]


def enabled() -> bool:
    """True when ``"stomp.py"`` logs DEBUG records (logging caches the answer per level)."""
    return STOMP_PY_LOG.isEnabledFor(logging.DEBUG)


def log_sent(cmd: str, headers: Mapping[str, Any], body: Any, version: str = "1.2", encoding: str = "utf-8") -> None:
    """``sending frame: <lines>``: the frame as stomp.py's ``convert_frame`` lists
    it (command, ``name:value`` lines sorted by name, None values left out, the
    body, the NUL; on STOMP 1.1/1.2 the values escaped as its ``Protocol11``
    escapes them, but for CONNECT/STOMP), passcode masked (stomp.utils
    ``clean_lines``). Only at DEBUG."""
    if isinstance(body, str):
        body = body.encode(encoding)
    elif isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    escape = escapes(version, cmd)
    frame_headers: Dict[str, Any] = {}
    for name, value in headers.items():
        if value is True or value is False:
            value = "true" if value else "false"
        elif escape and isinstance(value, str):
            value = escaped(version, value)
        frame_headers[name] = value
    STOMP_PY_LOG.debug("sending frame: %s", clean_lines(convert_frame(Frame(cmd, frame_headers, body or b""))))


def log_received(frame: Frame, auto_decode: bool, encoding: str) -> None:
    """``received frame: 'CMD', headers={...}, body=...`` as stomp.py's
    ``process_frame`` logs a CONNECTED, MESSAGE, RECEIPT or ERROR (the body
    decoded with ``encoding`` when ``auto_decode``, as its listeners get it)."""
    body = frame.body
    if auto_decode and isinstance(body, (bytes, bytearray, memoryview)):
        body = bytes(body).decode(encoding, errors="replace")
    STOMP_PY_LOG.debug("received frame: %r, headers=%r, body=%r", frame.cmd, dict(frame.headers), body)


def log_heartbeat_received() -> None:
    """stomp.py's line for a heart-beat read from the socket."""
    STOMP_PY_LOG.debug("received frame: %r, headers=%r, body=%r", "heartbeat", {}, None)


def log_heartbeat_sent() -> None:
    """stomp.py's two lines for a heart-beat written (its loop's, then ``transmit``'s)."""
    STOMP_PY_LOG.debug("sending a heartbeat message at %s", time.monotonic())
    STOMP_PY_LOG.debug("sending frame: %s", clean_lines(_HEARTBEAT_LINES))


def log_heartbeats_negotiated(send_ms: int, recv_ms: int, receive_scale: float) -> None:
    """stomp.py's lines on a CONNECTED with a ``heart-beat`` header (STOMP 1.1/1.2):
    the intervals worked out and, when not (0, 0), its heart-beat loop starting."""
    STOMP_PY_LOG.debug("heartbeats calculated %s", str((send_ms, recv_ms)))
    if (send_ms, recv_ms) == (0, 0):
        return
    send_sleep = send_ms / 1000
    STOMP_PY_LOG.debug("set receive_sleep to %s, send_sleep to %s", (recv_ms / 1000) * receive_scale, send_sleep)
    STOMP_PY_LOG.debug("starting heartbeat loop")
    if send_sleep:
        STOMP_PY_LOG.debug("calculated next outbound heartbeat as %s", time.monotonic() + send_sleep)


def log_heartbeat_loop_ended() -> None:
    """stomp.py's line when the heart-beats of a socket end."""
    STOMP_PY_LOG.debug("heartbeat loop ended")


class LoggingFrameSink:
    """The reader's frame sink while ``"stomp.py"`` logs DEBUG (chosen when a
    socket opens): stomp.py's ``received frame`` line for each CONNECTED,
    MESSAGE, RECEIPT and ERROR, then the transport's own ``on_frame``.

    Args:
        transport: the :class:`~amqstomp._transport_base.BaseTransport` (its
            ``on_frame``, ``auto_decode`` and ``encoding``).
    """

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    def on_frame(self, link: Any, frame: Frame) -> None:
        transport = self.transport
        if frame.cmd in ("CONNECTED", "MESSAGE", "RECEIPT", "ERROR") and enabled() and not (
                frame.cmd == "RECEIPT" and transport.is_own_receipt(str(frame.headers.get("receipt-id")))):
            log_received(frame, transport.auto_decode, transport.encoding)  # (not amqstomp's own receipts)
        transport.on_frame(link, frame)


def heartbeat_header(frame: Optional[Frame]) -> bool:
    """True when a CONNECTED frame has a ``heart-beat`` header (stomp.py logs its
    heart-beat lines only then)."""
    return frame is not None and "heart-beat" in frame.headers
