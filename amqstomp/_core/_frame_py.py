"""The frame object of the pure-Python codec (:mod:`amqstomp._core._codec_py`): :class:`Frame`.

The compiled codec's ``Frame`` (:mod:`amqstomp._core._codec`) has the same
attributes and behaviour; :mod:`amqstomp.codec` exports whichever is loaded.
"""
import copy
from typing import Any, Dict, Optional, Union

__all__ = ["Frame", "parsed_frame"]

_MISSING = object()
_new = object.__new__


class Frame:
    """One STOMP frame.

    Attributes:
        cmd (str): the command, e.g. ``"MESSAGE"``.
        headers (dict[str, str]): header names to values, decoded and unescaped;
            when a header repeats, the first value is kept (STOMP 1.2 spec,
            "Repeated Header Entries").
        body (bytes | str): the body as received (bytes); a connection with
            ``auto_decode`` replaces it by its text before handing it over.
        original_headers (dict[str, str]): the headers as they were when the
            frame was made (stomp.py 9.0 ``Frame.original_headers``): for a
            received frame, as they arrived, before listeners'
            ``on_before_message`` changed ``headers``. A frame built with
            ``Frame(...)`` copies its headers at once, as stomp.py's does; a
            frame from the parser copies them when first asked, or before the
            first ``on_before_message`` a listener has (no copy per frame
            otherwise). Assignable.
        delivery_count (int): set by a connection's duplicate audit: how many
            times it saw this MESSAGE's message-id (1 = first), at least 2 when
            the broker marked it ``redelivered:true`` (like JMSXDeliveryCount).
        link_seq (int): the number of the socket that delivered it (a
            transport's ``link_seq``, counted from 1 per connection; 0 for a
            frame that did not come from a socket). An ACK of a MESSAGE goes
            only on the socket that delivered it: after a failover ActiveMQ
            redelivers with the same ``message-id`` on the new socket.
    """

    __slots__ = ("cmd", "headers", "body", "delivery_count", "link_seq", "_original_headers")

    _original_headers: Any

    def __init__(self, cmd: str, headers: Optional[Dict[str, str]] = None,
                 body: Union[bytes, str] = b"") -> None:
        self.cmd = cmd
        if headers is None:
            headers = {}
        self.headers = headers
        self._original_headers = headers.copy() if type(headers) is dict else copy.copy(headers)
        self.body = body
        self.delivery_count = 1
        self.link_seq = 0

    @property
    def original_headers(self) -> Any:
        original = self._original_headers
        if original is None:
            headers = self.headers
            original = self._original_headers = headers.copy() if type(headers) is dict else copy.copy(headers)
        return original

    @original_headers.setter
    def original_headers(self, value: Any) -> None:
        self._original_headers = value

    def __eq__(self, other: object) -> bool:
        cmd = getattr(other, "cmd", _MISSING)
        headers = getattr(other, "headers", _MISSING)
        body = getattr(other, "body", _MISSING)
        if cmd is _MISSING or headers is _MISSING or body is _MISSING:
            return NotImplemented
        return bool(self.cmd == cmd and self.headers == headers and self.body == body)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        body = self.body
        long = body is not None and len(body) > 64
        return "Frame(cmd=%r, headers=%r, body=%r%s)" % (
            self.cmd, self.headers, body[:64] if long else body, "..." if long else "")

    __str__ = __repr__

    def _fill(self, cmd: str, headers: Dict[str, str], body: bytes) -> None:
        self.cmd = cmd
        self.headers = headers
        self.body = body
        self.delivery_count = 1
        self.link_seq = 0
        self._original_headers = None

    def __reduce__(self) -> Any:
        return (Frame, (self.cmd, self.headers, self.body))


def parsed_frame(cmd: str, headers: Dict[str, str], body: bytes) -> Frame:
    """A frame the parser completed: no copy of its headers until
    :attr:`Frame.original_headers` is first read."""
    frame: Frame = _new(Frame)
    Frame._fill(frame, cmd, headers, body)
    return frame
