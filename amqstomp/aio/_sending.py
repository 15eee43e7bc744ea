"""What :meth:`amqstomp.aio.Client.send` is given, checked before anything is awaited or
written: the body's bytes and the SEND frame's headers (STOMP 1.2 "SEND"); and the producer
window its sends with a receipt wait for room in (:class:`ProducerWindow`).

Licensed under the Apache License, Version 2.0.
"""
import asyncio
import collections
from typing import Any, Callable, Deque, Dict, Mapping, Optional, Tuple, Union

from ..exception import ConfigurationError, ConnectionClosedException, ReceiptTimeout
from ..uri import check_destination
from .._core.frames import check_headers

__all__ = ["send_frame", "ProducerWindow"]

#: headers send() writes from its own arguments (the argument named for the message)
_SET_BY = {"destination": "the destination argument", "transaction": "transaction=",
           "content-type": "content_type=", "receipt": "receipt=True (the client makes the receipt id)"}


def send_frame(destination: str, body: Union[bytes, str], headers: Optional[Mapping[str, Any]],
               transaction: Optional[str], content_type: Optional[str]) -> Tuple[bytes, Dict[str, Any]]:
    """The SEND's body bytes and headers: a str body UTF-8 encoded (with ``content-type:
    text/plain; charset=utf-8`` unless one is given); ``headers`` first, then ``destination``,
    ``content-type`` and ``transaction`` from the arguments.

    Raises:
        InvalidDestinationError: ``destination`` is no destination.
        TypeError: ``body`` is neither bytes-like nor str (its type named).
        ConfigurationError: (a ValueError) ``headers`` gives ``destination``, ``transaction`` or
            ``content-type`` with another value than the argument, or a ``receipt`` (the
            header and the argument to use are named): it was silently overridden before.
    """
    check_destination(destination, "SEND")
    if isinstance(body, str):
        data = body.encode("utf-8")
    elif isinstance(body, (bytes, bytearray, memoryview)):
        data = bytes(body)
    else:
        raise TypeError("the body of the SEND to %s must be bytes or str, not %s" % (destination, type(body).__name__))
    if headers is not None and type(headers) is not dict:  # (the ABC isinstance only then: ~300 instructions)
        check_headers(headers, "SEND")
    frame_headers: Dict[str, Any] = dict(headers) if headers else {}
    given = {"destination": destination, "transaction": transaction, "content-type": content_type, "receipt": None}
    for name, value in given.items():
        if frame_headers.get(name) is not None and (value is None or str(frame_headers[name]) != str(value)):
            raise ConfigurationError("the SEND to %s: headers give %s: %r, which %s sets (%r): give it there only"
                                     % (destination, name, frame_headers[name], _SET_BY[name], value))
    frame_headers["destination"] = destination
    if content_type is not None:
        frame_headers["content-type"] = content_type
    elif isinstance(body, str):
        frame_headers.setdefault("content-type", "text/plain; charset=utf-8")
    if transaction is not None:
        frame_headers["transaction"] = transaction
    return data, frame_headers


class ProducerWindow:
    """Bytes of SEND bodies awaiting their RECEIPTs at once (ActiveMQ's ``producerWindowSize``):
    a send beyond waits for room, in order of arrival (back-pressure). One per client, on its loop.

    Args:
        size (int): the window, bytes (>= 1).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        #: bytes of the sends awaiting their RECEIPTs now
        self.in_flight = 0
        self._room: Deque["asyncio.Future[None]"] = collections.deque()

    def take(self, size: int) -> bool:
        """Count ``size`` bytes in when there is room (always when nothing is in flight): True;
        else False, nothing counted (then :meth:`wait_take`). No await: the common case."""
        if self.in_flight and self.in_flight + size > self.size:
            return False
        self.in_flight += size
        return True

    async def wait_take(self, size: int, wait_s: float, what: str, stopped: Callable[[], Optional[str]]) -> None:
        """Count ``size`` bytes in once there is room, within ``wait_s`` seconds, sends waiting
        for room served in order. ``stopped()``: why the send may not go on (the client
        closing, the socket gone), else None; asked before each wait.

        Raises:
            ConnectionClosedException: ``stopped()`` gave a reason; nothing counted.
            ReceiptTimeout: no room in time; nothing counted.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while not self.take(size):
            reason = stopped()
            if reason is not None:
                raise ConnectionClosedException("%s not sent: %s" % (what, reason))
            waiter: "asyncio.Future[None]" = loop.create_future()
            self._room.append(waiter)
            try:
                await asyncio.wait_for(waiter, max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise ReceiptTimeout("%s not sent: no room in the producer window (%d bytes awaiting receipts) "
                                     "within %.3g s" % (what, self.in_flight, wait_s)) from None

    def give_back(self, size: int) -> None:
        """``size`` bytes answered (or given up): the first send waiting for room looks again."""
        self.in_flight -= size
        while self._room:
            waiter = self._room.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    def wake_all(self) -> None:
        """Every send waiting for room looks again (the socket ended, the client is closing)."""
        for waiter in self._room:
            if not waiter.done():
                waiter.set_result(None)
