"""What :meth:`amqstomp.aio.Client.send` is given, checked before anything is awaited or
written: the body's bytes and the SEND frame's headers (STOMP 1.2 "SEND").

Licensed under the Apache License, Version 2.0.
"""
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ..exception import ConfigurationError
from ..uri import check_destination

__all__ = ["send_frame"]

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
