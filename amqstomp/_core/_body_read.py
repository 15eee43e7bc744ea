"""Reading a frame's body straight from a stream: the part both codecs share.

:meth:`FrameParser.read_body <amqstomp._core._codec_py.FrameParser.read_body>`
hands ``readinto`` (a socket's ``recv_into``; the core never sees the socket)
a buffer for the rest of a body whose content-length is known. No I/O here.
"""
from typing import Any, Callable

__all__ = ["read_body_chunk", "read_count"]


def read_body_chunk(parser: Any, readinto: Callable[[Any], int]) -> int:
    """:meth:`FrameParser.read_body` through a buffer of its own, then ``feed``
    (the compiled parser's route for a body it does not hold outside its buffer)."""
    missing = parser.body_missing
    if not missing:
        parser.feed(b"")  # a stopped parser raises its error
        raise ValueError("no body with a content-length is arriving")
    chunk = bytearray(missing)
    n = read_count(readinto(chunk), missing)
    if n:
        parser.feed(bytes(memoryview(chunk)[:n]))
    return n


def read_count(n: Any, room: int) -> int:
    """What ``readinto`` returned, checked: an int from 0 to ``room``."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= room:
        raise ValueError("readinto returned %r, not a byte count from 0 to %d" % (n, room))
    return n
