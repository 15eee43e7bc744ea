"""stomp.py 9.0's protocol over a replaced ``conn.transport`` (a stomp.py user's
test puts a ``Mock()`` there): frames handed to ``transport.transmit(Frame)``
exactly as stomp.py's ``Protocol1x.send_frame`` and ``connect`` build them
(stomp/protocol.py), so the mock sees what it would see with stomp.py. Used by
:class:`amqstomp._session.StompSession` only while the transport is replaced.
"""
from typing import Any, Callable, Dict, Mapping, Optional, cast

from .codec import Frame
from .exception import ConnectFailedException

__all__ = ["transmit", "connect", "disconnect", "escapes", "escaped", "shown_body"]


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
            raise ConnectFailedException("the broker answered CONNECT with ERROR")


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
