"""Minimal STOMP 1.2 over a raw blocking socket, for the test tools only.

Kept independent of the amqstomp client on purpose: :mod:`.broker` (is the
broker up?), :mod:`.statistics` (the broker's own counters) and
:mod:`.master_slave` (has the slave taken over?) check the client against
the broker without going through the code under test.

Units: ``timeout`` in seconds (float); ``deadline`` is a
:func:`time.monotonic` value.
"""
from __future__ import annotations

import socket
import time
from typing import Dict, Optional, Tuple

__all__ = ["FrameReader", "LoginRefused", "encode_frame", "goodbye", "handshake"]

_TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


class LoginRefused(ConnectionError):
    """The broker answered CONNECT with an ERROR frame (a wrong or missing
    login): a STOMP broker is there, refusing this connection."""


def encode_frame(command: str, headers: Dict[str, str], body: bytes = b"") -> bytes:
    """One STOMP frame as bytes (headers are not escaped: callers pass plain values)."""
    head = "".join(f"{k}:{v}\n" for k, v in headers.items())
    return f"{command}\n{head}\n".encode("utf-8") + body + b"\x00"


class FrameReader:
    """Reads STOMP frames from a blocking socket against a deadline.

    :meth:`read` raises :class:`TimeoutError` once :attr:`deadline`
    (monotonic seconds; callers may move it) has passed and
    :class:`ConnectionError` when the broker closes the connection.
    """

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.buf = b""

    def _fill(self) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline passed")
        self.sock.settimeout(remaining)
        if _TCP_QUICKACK is not None:
            # ack at once, so the broker's Nagle does not hold its next frame
            self.sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError("deadline passed") from None
        if not data:
            raise ConnectionError("broker closed the connection")
        self.buf += data

    def read(self) -> Tuple[str, Dict[str, str], bytes]:
        """The next frame as ``(command, headers, body)``; heart-beats are skipped."""
        while True:
            self.buf = self.buf.lstrip(b"\r\n")  # heart-beats
            end = self.buf.find(b"\n\n")
            if end < 0:
                self._fill()
                continue
            head = self.buf[:end].decode("utf-8", "replace").replace("\r", "").split("\n")
            headers: Dict[str, str] = {}
            for line in head[1:]:
                key, _, value = line.partition(":")
                headers.setdefault(key, value)
            start = end + 2
            if "content-length" in headers:
                stop = start + int(headers["content-length"])
                while len(self.buf) < stop + 1:
                    self._fill()
            else:
                while True:
                    stop = self.buf.find(b"\x00", start)
                    if stop >= 0:
                        break
                    self._fill()
            body = self.buf[start:stop]
            self.buf = self.buf[stop + 1:]
            return head[0], headers, body


def handshake(host: str, port: int, timeout: float, login: Optional[str] = None,
              passcode: Optional[str] = None) -> Tuple[socket.socket, FrameReader]:
    """Connect, send CONNECT (with ``login``/``passcode`` when given) and read
    CONNECTED within ``timeout`` seconds.

    Returns the socket and a :class:`FrameReader` on it (the caller closes the
    socket, e.g. with :func:`goodbye`). Raises :class:`OSError` when the port
    does not accept, :class:`TimeoutError` when no frame comes in time and
    :class:`ConnectionError` when the broker answers anything but CONNECTED
    (:class:`LoginRefused` for an ERROR, e.g. a wrong login: its ``message``
    header is in the text).
    """
    deadline = time.monotonic() + timeout
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connect = {"accept-version": "1.2", "host": "localhost"}
        if login is not None:
            connect["login"] = login
            connect["passcode"] = passcode or ""
        sock.sendall(encode_frame("CONNECT", connect))
        reader = FrameReader(sock, deadline)
        command, headers, body = reader.read()
        if command == "ERROR":
            raise LoginRefused(f"broker answered CONNECT with ERROR: {headers.get('message', '')}".strip())
        if command != "CONNECTED":
            raise ConnectionError(
                f"broker answered CONNECT with {command}: {headers.get('message', '')} "
                f"{body.decode('utf-8', 'replace')}".strip()
            )
        return sock, reader
    except BaseException:
        sock.close()
        raise


def goodbye(sock: socket.socket) -> None:
    """Send DISCONNECT (best effort) and close the socket."""
    try:
        sock.sendall(encode_frame("DISCONNECT", {}))
    except OSError:
        pass
    finally:
        sock.close()
