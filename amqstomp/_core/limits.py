"""The frame limits: what a broker enforces, checked before a frame is written,
and the largest frame this client takes; the bytes of gathered frames a
writer sends at once (:data:`DEFER_FLUSH_BYTES`); no I/O.

:data:`ACTIVEMQ_LIMITS` are ActiveMQ Classic's (activemq-stomp
``StompWireFormat``, 5.x); :func:`check_limits` raises
:class:`~amqstomp.exception.FrameLimitError` naming the limit and the header.
:data:`MAX_RECEIVED_FRAME_BYTES` follows from the codec's parser limits.
"""
from typing import Optional, Tuple

from ..codec import (
    DEFAULT_MAX_BODY_LENGTH,
    DEFAULT_MAX_COMMAND_LENGTH,
    DEFAULT_MAX_HEADER_LINE_LENGTH,
    DEFAULT_MAX_HEADERS,
)
from ..exception import FrameLimitError

__all__ = ["ACTIVEMQ_LIMITS", "LIMITS_SAFE_BYTES", "NO_CHECK_BYTES", "MAX_RECEIVED_FRAME_BYTES",
           "RECEIVED_HEADER_BUDGET_BYTES", "DEFER_FLUSH_BYTES", "DEFER_IDLE_S",
           "check_limits"]

#: Bytes of gathered frames written at once, without waiting longer to gather more: the
#: threaded writer's deferred SENDs (:mod:`amqstomp._io.writer`) and the asyncio link's frames
#: of one loop turn (:meth:`amqstomp.aio._link.AioLink.write`); a frame of this size or more is
#: written as it is (not copied into the gathered bytes). One rule, both drivers.
DEFER_FLUSH_BYTES = 65536
#: A frame is written at once when nothing gathered and nothing was written for this long
#: (seconds), in both drivers: frames gather only above ~1/DEFER_IDLE_S = 5,000 frames a second
#: (under load), never at a lower rate (an ACK per message at prefetch 1 is not held back).
DEFER_IDLE_S = 0.0002

#: ActiveMQ Classic's STOMP frame limits (activemq-stomp ``StompWireFormat``,
#: 5.x): bytes of one encoded header line (``MAX_HEADER_LENGTH``), headers per
#: frame (``MAX_HEADERS``), bytes of a frame (``MAX_DATA_LENGTH`` bounds the
#: body; the ``wireFormat.maxFrameSize`` of ActiveMQ's sample configuration,
#: 104857600, the command, header lines and body together). A frame over one
#: gets an ERROR and the connection closed (measured on 5.17.2: it still takes
#: 10241-byte lines and 1001 headers, from the order of its checks; these are
#: the documented limits).
ACTIVEMQ_LIMITS = (10240, 1000, 100 * 1024 * 1024)
#: A frame of at most this many bytes (body aside) breaks none of
#: :data:`ACTIVEMQ_LIMITS` (1001 header lines take more): only larger ones are looked at.
LIMITS_SAFE_BYTES = 3000
#: "No limits known": a size no frame reaches (a small int keeps the comparison cheap).
NO_CHECK_BYTES = 2 ** 30 - 1

#: Bytes of a received frame outside its body that the parser
#: (:class:`amqstomp.codec.FrameParser`, default limits) lets through: the
#: command line and ``DEFAULT_MAX_HEADERS`` header lines of
#: ``DEFAULT_MAX_HEADER_LINE_LENGTH`` bytes, each with its CR LF, the blank
#: line and the NUL (STOMP 1.2 "Augmented BNF", "Size Limits").
RECEIVED_HEADER_BUDGET_BYTES = (DEFAULT_MAX_COMMAND_LENGTH + 2
                                + DEFAULT_MAX_HEADERS * (DEFAULT_MAX_HEADER_LINE_LENGTH + 2) + 2 + 1)
#: The largest frame this client takes, in bytes: the parser's body limit
#: (``DEFAULT_MAX_BODY_LENGTH``, 100 MiB) + :data:`RECEIVED_HEADER_BUDGET_BYTES`
#: (115100629 bytes). A transport that carries STOMP in messages bounds one
#: message by it (:class:`amqstomp._io.websocket.WebSocketChannel`).
MAX_RECEIVED_FRAME_BYTES = DEFAULT_MAX_BODY_LENGTH + RECEIVED_HEADER_BUDGET_BYTES


def check_limits(limits: Optional[Tuple[int, int, int]], cmd: str, data: bytes, body_length: int,
                 server: Optional[str]) -> None:
    """Raise FrameLimitError when the encoded frame ``data`` (``body_length``
    bytes of it the body) breaks one of ``limits`` (header line bytes, headers,
    frame bytes); nothing when ``limits`` is None.

    Raises:
        FrameLimitError: ``.limit`` names which ("frame size", "header line",
            "headers"); the message says the frame was not sent.
    """
    if limits is None or (len(data) - body_length <= LIMITS_SAFE_BYTES and len(data) <= limits[2]):
        return
    max_line, max_headers, max_frame = limits
    where = "the broker (server %s) answers ERROR and closes the connection; %s frame not sent" % (server, cmd)
    if len(data) > max_frame:
        raise FrameLimitError("frame of %d bytes is over the broker's limit of %d bytes: %s"
                              % (len(data), max_frame, where), "frame size", max_frame, len(data))
    lines = [line for line in bytes(data[:len(data) - body_length - 1]).split(b"\n")[1:] if line]
    for line in lines:
        if len(line) > max_line:
            name = line.split(b":", 1)[0].decode("utf-8", "replace")
            raise FrameLimitError("header %r: its line is %d bytes encoded, over the broker's limit of %d bytes "
                                  "per header line: %s" % (name, len(line), max_line, where),
                                  "header line", max_line, len(line), name)
    count = len({line.split(b":", 1)[0] for line in lines})  # the broker counts distinct names
    if count > max_headers:
        raise FrameLimitError("%d headers, over the broker's limit of %d headers per frame: %s"
                              % (count, max_headers, where), "headers", max_headers, count)
