"""stomp.py 9.0's protocol over a replaced ``conn.transport`` (a stomp.py user's
test puts a ``Mock()`` there): frames handed to ``transport.transmit(Frame)``
exactly as stomp.py's ``Protocol1x.send_frame`` and ``connect`` build them
(stomp/protocol.py), so the mock sees what it would see with stomp.py. Used by
:class:`amqstomp._session.StompSession` only while the transport is replaced.
"""
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, cast

from .codec import Frame
from .exception import ConnectFailedException

__all__ = ["transmit", "connect", "disconnect", "escapes", "escaped", "shown_body", "Shown", "shown_frame",
           "given_headers"]


def escapes(version: str, cmd: str) -> bool:
    """True when stomp.py's protocol escapes ``cmd``'s header values before
    ``transmit`` (and its listeners' ``on_send``) sees them: STOMP 1.1/1.2, all
    frames but CONNECT/STOMP (``Protocol11/12.send_frame``)."""
    return version != "1.0" and cmd != "CONNECT" and cmd != "STOMP"


def escaped(version: str, value: str) -> str:
    """``value`` escaped as stomp.py's ``_escape_headers`` does (STOMP 1.2 "Value
    Encoding"): backslash, LF and colon; CR too on 1.2."""
    value = value.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")
    return value.replace("\r", "\\r") if version == "1.2" else value


def shown_body(cmd: str, body: Any) -> Any:
    """The body of a frame as stomp.py's ``send_frame`` hands it on: as given,
    ``''`` (its default) for a frame other than SEND without one."""
    if cmd != "SEND" and (body is None or (isinstance(body, (bytes, bytearray)) and not body)):
        return ""
    return body


class Shown:
    """What :func:`shown_frame` changed in a frame's headers, for :func:`given_headers`."""

    __slots__ = ("escaped", "no_length")

    def __init__(self) -> None:
        self.escaped: Dict[str, Tuple[str, Any]] = {}  # name -> (the escaped value shown, the value given)
        self.no_length = False  # a content-length: None (no automatic one) was left out


def shown_frame(version: str, cmd: str, headers: Optional[Mapping[str, Any]], body: Any,
                written: bool = True) -> Tuple[Frame, Shown]:
    """The frame a stomp.py listener's ``on_send`` (and a replaced ``transmit``)
    sees of one amqstomp writes: header values escaped (:func:`escapes`,
    :func:`escaped`), the body as given (:func:`shown_body`); with ``written``
    (``on_send``'s), None values left out and True/False as ``"true"``/``"false"``,
    as they are written; and what was changed."""
    shown = Shown()
    copied: Dict[str, Any] = {}
    escape = escapes(version, cmd)
    if headers:
        for key, value in headers.items():
            if value is None and written:
                shown.no_length = shown.no_length or key == "content-length"
                continue
            if (value is True or value is False) and written:
                value = "true" if value else "false"
            elif escape and isinstance(value, str):
                text = escaped(version, value)
                if text != value:
                    shown.escaped[key] = (text, value)
                    value = text
            copied[key] = value
    return Frame(cmd, copied, shown_body(cmd, body)), shown


def given_headers(headers: Dict[str, Any], shown: Optional[Shown]) -> Dict[str, Any]:
    """The headers to write after a listener (or ``transmit``) saw the frame of
    :func:`shown_frame`: a value left as shown goes as it was given (the codec
    escapes it), one set goes as set, a ``content-length: None`` left out is
    put back (no automatic one). ``headers`` is not changed."""
    if shown is None or not (shown.escaped or (shown.no_length and "content-length" not in headers)):
        return headers
    out = dict(headers)
    for key, (text, given) in shown.escaped.items():
        if out.get(key) is text:
            out[key] = given
    if shown.no_length and "content-length" not in out:
        out["content-length"] = None
    return out


def transmit(transport: Any, version: str, cmd: str, headers: Optional[Mapping[str, Any]], body: Any) -> Any:
    """stomp.py's ``Protocol1x.send_frame``: header values escaped in place on
    1.1/1.2 but for CONNECT/STOMP (:func:`escaped`), then ``transport.transmit(Frame(cmd, headers, body))``;
    its answer is returned."""
    if headers is None:
        headers = {}
    if escapes(version, cmd) and isinstance(headers, dict):
        for key, value in headers.items():
            if isinstance(value, str):
                headers[key] = escaped(version, value)
    return transport.transmit(Frame(cmd, cast(Dict[str, Any], headers), shown_body(cmd, body)))


def connect(transport: Any, send_frame: Callable[[str, Dict[str, Any]], Any], version: str,
            username: Optional[str], passcode: Optional[str], frame_headers: Dict[str, Any],
            with_connect_command: bool, wait: bool) -> None:
    """stomp.py's ``StompConnection1x.connect``: the transport's ``start()``, then
    ``Protocol1x.connect``: ``send_frame`` of CONNECT (1.0, or
    ``with_connect_command``) or STOMP with ``accept-version``, ``host`` (1.2:
    the transport's ``current_host_and_port[0]``; its ``vhost`` on 1.1/1.2 when
    set), ``login``, ``passcode``; with ``wait``, the transport's
    ``wait_for_connection()``.

    Raises:
        ConnectFailedException: with ``wait``, the transport's ``connection_error`` is set.
        TypeError: on 1.2, the transport has no ``current_host_and_port`` (as stomp.py).
    """
    transport.start()
    frame_headers["accept-version"] = version
    if version == "1.2":
        frame_headers["host"] = cast(Any, transport.current_host_and_port)[0]  # stomp.py's (a TypeError when None)
    if version != "1.0" and transport.vhost:
        frame_headers["host"] = transport.vhost
    if username is not None:
        frame_headers["login"] = username
    if passcode is not None:
        frame_headers["passcode"] = passcode
    command = "CONNECT" if (with_connect_command or version == "1.0") else "STOMP"
    send_frame(command, frame_headers)
    if wait:
        transport.wait_for_connection()
        if transport.connection_error:
            raise ConnectFailedException("the replaced transport's connection_error is set after "
                                         "wait_for_connection() (an ERROR answered the CONNECT)")


def disconnect(transport: Any, send_frame: Callable[[str, Dict[str, Any]], Any], frame_headers: Dict[str, Any],
               receipt: Optional[str]) -> None:
    """stomp.py's ``StompConnection1x.disconnect``: when the transport
    ``is_connected()``, its ``set_receipt(<receipt>, "DISCONNECT")`` and
    ``send_frame`` of DISCONNECT (``frame_headers`` hold the receipt); then,
    only when the caller gave a ``receipt``, the transport's ``stop()``."""
    if transport.is_connected():
        transport.set_receipt(frame_headers["receipt"], "DISCONNECT")
        send_frame("DISCONNECT", frame_headers)
    if receipt is not None:
        transport.stop()
