"""stomp.py 9.0's protocol over a replaced ``conn.transport`` (a stomp.py user's
test puts a ``Mock()`` there): frames handed to ``transport.transmit(Frame)``
exactly as stomp.py's ``Protocol1x.send_frame`` and ``connect`` build them
(stomp/protocol.py), so the mock sees what it would see with stomp.py. Used by
:class:`amqstomp._session.StompSession` only while the transport is replaced.
"""
from typing import Any, Callable, Dict, Mapping, Optional, cast

from .codec import Frame
from .exception import ConnectFailedException

__all__ = ["transmit", "connect"]


def transmit(transport: Any, version: str, cmd: str, headers: Optional[Mapping[str, Any]], body: Any) -> Any:
    """stomp.py's ``Protocol1x.send_frame``: header values escaped in place on
    1.1/1.2 but for CONNECT/STOMP (STOMP 1.2 "Value Encoding", as stomp.py's
    ``_escape_headers``), then ``transport.transmit(Frame(cmd, headers, body))``;
    its answer is returned."""
    if headers is None:
        headers = {}
    if version != "1.0" and cmd not in ("CONNECT", "STOMP") and isinstance(headers, dict):
        for key, value in headers.items():
            if isinstance(value, str):
                headers[key] = value.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")
    if cmd != "SEND" and isinstance(body, bytes) and not body:
        body = ""  # stomp.py's send_frame default
    return transport.transmit(Frame(cmd, cast(Dict[str, Any], headers), body))


def connect(transport: Any, send_frame: Callable[[str, Dict[str, Any]], Any], version: str,
            username: Optional[str], passcode: Optional[str], frame_headers: Dict[str, Any],
            with_connect_command: bool, wait: bool) -> None:
    """stomp.py's ``Protocol1x.connect``: ``send_frame`` of CONNECT (1.0, or
    ``with_connect_command``) or STOMP with ``accept-version``, ``host`` (1.2:
    the transport's ``current_host_and_port[0]``; its ``vhost`` on 1.1/1.2 when
    set), ``login``, ``passcode``; with ``wait``, the transport's
    ``wait_for_connection()``.

    Raises:
        ConnectFailedException: with ``wait``, the transport's ``connection_error`` is set.
        TypeError: on 1.2, the transport has no ``current_host_and_port`` (as stomp.py).
    """
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
