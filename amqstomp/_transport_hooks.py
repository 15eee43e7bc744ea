"""What :class:`amqstomp._transport_base.BaseTransport` keeps for stomp.py's API: its
state object, the channel and frame sink used when ``receive``/``process_frame``
are replaced, and the connector that logs stomp.py's connect lines.
"""
import threading
from typing import Any, Callable, Dict, Optional

from ._io.connector import Channel, Connector, HostAndPort
from ._io.link import Link
from ._stomppy_log import STOMP_PY_LOG
from .codec import Frame, encode_frame
from .exception import FrameEncodeError

__all__ = ["ReceivingChannel", "ProcessFrameSink", "StompPyState", "StompPyConnector"]


class StompPyConnector(Connector):
    """The stomp.py API's connector: each socket attempt is logged as stomp.py's
    ``Transport.attempt_connection`` logs it, under its logger ``"stomp.py"``:
    ``established connection to host H, port P`` at INFO, ``could not connect to
    host H, port P: <error>`` at WARNING (instead of amqstomp's own lines)."""

    def attempt_succeeded(self, host_and_port: HostAndPort, channel: Channel) -> None:
        STOMP_PY_LOG.info("established connection to host %s, port %s", host_and_port[0], host_and_port[1])

    def attempt_failed(self, host_and_port: HostAndPort, exc: BaseException) -> None:
        STOMP_PY_LOG.warning("could not connect to host %s, port %s: %s", host_and_port[0], host_and_port[1], exc)

class ReceivingChannel:
    """A link's channel whose ``recv`` is the transport's ``receive()`` (a
    subclass replaced it); everything else is the channel's."""

    def __init__(self, raw: Any, transport: Any) -> None:
        self.raw = raw
        self._transport = transport

    def recv(self, size: int) -> bytes:
        data = self._transport.receive()
        return data if data else b""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class ProcessFrameSink:
    """The reader's frame sink when ``process_frame`` was replaced: every frame
    received goes through it, with its bytes (without the NUL) as stomp.py passes them."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    def on_frame(self, link: Link, frame: Frame) -> None:
        transport = self.transport
        try:
            raw: Optional[bytes] = encode_frame(frame.cmd, frame.headers, frame.body, link.proto.version)[:-1]
        except (FrameEncodeError, ValueError):
            raw = None
        dispatch = transport.dispatch
        if dispatch.auto_decode and isinstance(frame.body, (bytes, bytearray)):
            frame.body = bytes(frame.body).decode(dispatch.encoding, errors="replace")  # as stomp.py's reader
        transport.process_frame(frame, raw)


class StompPyState:
    """What only stomp.py's API keeps, in one object per transport."""

    __slots__ = ("is_eol_fc", "start_version", "receipt_marks", "local")

    def __init__(self, is_eol_fc: Callable[[bytes], bool]) -> None:
        self.is_eol_fc = is_eol_fc
        self.start_version = "1.2"  # the STOMP version start() opens a socket with
        self.receipt_marks: Dict[str, Any] = {}  # set_receipt()
        self.local = threading.local()  # .write_timeout, .shown (_stomppy_wire.Shown): of a frame on its way through transmit()
