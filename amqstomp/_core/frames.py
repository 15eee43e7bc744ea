"""Frame builders per STOMP version and broker dialect, no I/O.

Everything that decides which headers a client frame carries, for every API
(the stomp.py-style connections and the JMS facade alike):

* the broker dialect from CONNECTED's ``server`` header (:func:`dialect_of`,
  defined with everything else that differs by broker in :mod:`.dialect`);
* CONNECT/STOMP headers (:func:`connect_headers`, STOMP 1.2 "Connecting");
* the identity an ACK names and the ACK/NACK headers of a MESSAGE per STOMP
  version (:func:`ack_identity`, :func:`ack_headers`, STOMP 1.2 "ACK"),
  including ActiveMQ's STOMP 1.0 quirk (``subscription`` on 1.0 ACKs);
* which command rejects a message (:func:`reject_command`: NACK, or ACK on 1.0);
* SUBSCRIBE headers (:func:`subscribe_headers`, STOMP 1.2 "SUBSCRIBE"), for
  every API and every SUBSCRIBE of a subscription (its first and its replays);
* a body's bytes, whose ``len()`` is its ``content-length`` (:func:`body_bytes`),
  and the text encoding of bodies (:func:`check_encoding`).
"""
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ..exception import ConfigurationError, UnknownEncodingError
from .dialect import ACTIVEMQ, ARTEMIS, GENERIC, RABBITMQ, dialect_of, is_activemq_classic

__all__ = ["ACTIVEMQ", "ARTEMIS", "RABBITMQ", "GENERIC", "dialect_of", "is_activemq_classic",
           "ACCEPT_VERSIONS", "connect_headers", "ack_identity", "ack_headers", "reject_command",
           "subscribe_headers", "check_headers", "body_bytes", "check_encoding"]

#: ``accept-version`` offered for a highest wanted version (STOMP 1.2 "Protocol Negotiation").
ACCEPT_VERSIONS = {"1.0": "1.0", "1.1": "1.0,1.1", "1.2": "1.0,1.1,1.2"}


def connect_headers(accept_version: str, host: Optional[str] = None, heartbeats: Tuple[int, int] = (0, 0),
                    login: Optional[str] = None, passcode: Optional[str] = None, client_id: Optional[str] = None,
                    extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Headers of a CONNECT/STOMP frame (STOMP 1.2 "Connecting").

    Args:
        accept_version (str): the ``accept-version`` value (``"1.2"`` or a list
            such as :data:`ACCEPT_VERSIONS` ``["1.2"]``).
        host (str | None): the ``host`` header (virtual host); left out when None.
        heartbeats (tuple[int, int]): (cx, cy) ms; sent unless (0, 0) or the only
            version offered is 1.0 (which has no heart-beats).
        login, passcode (str | None): credentials; left out when None.
        client_id (str | None): ActiveMQ's ``client-id`` (durable subscriptions).
        extra (Mapping | None): the caller's own headers; they come first and the
            headers above replace theirs.

    Returns:
        dict[str, Any]: the headers, in sending order.
    """
    headers: Dict[str, Any] = dict(extra) if extra else {}
    headers["accept-version"] = accept_version
    if host:
        headers["host"] = host
    if accept_version != "1.0" and tuple(heartbeats) != (0, 0):
        headers["heart-beat"] = "%d,%d" % tuple(heartbeats)
    if login is not None:
        headers["login"] = login
    if passcode is not None:
        headers["passcode"] = passcode
    if client_id:
        headers["client-id"] = client_id
    return headers


def subscribe_headers(destination: str, id: Any, ack: str, headers: Mapping[str, Any],
                      options: Mapping[str, Any]) -> Dict[str, Any]:
    """Headers of a SUBSCRIBE frame (STOMP 1.2 "SUBSCRIBE").

    Args:
        destination (str): the destination's name, its options taken off
            (:func:`amqstomp.uri.parse_destination`).
        id: the ``id`` header (required from STOMP 1.1); left out when None (1.0).
        ack (str): the ``ack`` header (``auto``, ``client``, ``client-individual``).
        headers (Mapping): the caller's own headers (``selector``, ``receipt``,
            ActiveMQ's ``activemq.*``...); they come first.
        options (Mapping): headers the destination's options make
            (``?consumer.prefetchSize=10`` -> ``activemq.prefetchSize``; a
            broker's prefetch header); a caller's header of the same name wins.

    Returns:
        dict: a new mapping; ``destination``, ``id`` and ``ack`` replace the
        caller's headers of those names.
    """
    out = dict(headers)
    for key, value in options.items():
        out.setdefault(key, value)  # the caller's own header wins
    out["destination"] = destination
    if id is not None:
        out["id"] = id
    out["ack"] = ack
    return out


def ack_identity(version: Optional[str], headers: Mapping[str, Any]) -> Tuple[str, ...]:
    """The identity an ACK names (STOMP 1.2 spec "ACK"), from a MESSAGE's headers
    or an ACK's: 1.2 the MESSAGE's ``ack`` header (the ACK's ``id``), 1.1
    ``message-id`` + ``subscription``, 1.0 ``message-id``."""
    if version == "1.2":
        value = headers.get("ack")
        if value is None:
            value = headers.get("id")
        if value is not None:
            return (value if value.__class__ is str else str(value),)
    if version == "1.0":
        return (str(headers.get("message-id")),)
    return (str(headers.get("message-id")), str(headers.get("subscription")))


def ack_headers(version: str, message_headers: Mapping[str, str], activemq: bool = False) -> Dict[str, str]:
    """Headers of the ACK/NACK of a MESSAGE, per STOMP version (STOMP 1.2 spec "ACK"):
    1.2 ``id`` = the MESSAGE's ``ack`` header; 1.1 ``message-id`` + ``subscription``;
    1.0 ``message-id``.

    With ``activemq`` (the broker is ActiveMQ Classic) a 1.0 ACK also names the
    MESSAGE's ``subscription``: ActiveMQ 5.17 keeps a subscription after its
    UNSUBSCRIBE in the map it searches for a 1.0 ACK without one, so such an
    ACK can land on an old subscription that had the same message and be lost
    (the message then comes back).

    Raises:
        KeyError: the MESSAGE lacks the header the version needs.
    """
    if version == "1.2" and "ack" in message_headers:
        return {"id": message_headers["ack"]}
    if version == "1.0":
        headers = {"message-id": message_headers["message-id"]}
        if activemq and "subscription" in message_headers:
            headers["subscription"] = message_headers["subscription"]
        return headers
    return {"message-id": message_headers["message-id"], "subscription": message_headers["subscription"]}


def reject_command(version: Optional[str]) -> str:
    """The command that gives a message up: ``NACK`` (STOMP 1.1/1.2), ``ACK`` on
    1.0, which has no NACK (the message is then consumed, not redelivered)."""
    return "ACK" if version == "1.0" else "NACK"


def check_headers(headers: Any, command: str) -> None:
    """Raise ConfigurationError (a ValueError) when the ``headers`` argument of ``command``
    (SEND...) is neither None nor a mapping of header names to values (a str, a list...),
    naming the argument; for every API (the threaded and asyncio ``send``)."""
    if headers is not None and not isinstance(headers, Mapping):
        raise ConfigurationError("headers of %s must be a mapping (a dict of header names to values) or None, got %r "
                                 "(%s)" % (command, headers if len(repr(headers)) < 80 else type(headers).__name__,
                                           type(headers).__name__))


def body_bytes(body: Any, encoding: str) -> Union[bytes, bytearray, memoryview]:
    """The bytes a SEND body is written as; their ``len()`` is its ``content-length``
    (STOMP 1.2 "Header content-length": octets). The one rule for every stomp.py-style
    route (``send``, ``send_frame``).

    Args:
        body (str | bytes | bytearray | memoryview): a ``str`` is encoded with
            ``encoding`` (strictly); a ``memoryview`` of items wider than a byte
            (``array("i")``'s) is viewed as its bytes, without a copy when contiguous
            (``len()`` of the view itself counts items).
        encoding (str): the text encoding of ``str`` bodies.

    Raises:
        TypeError: ``body`` is neither str nor bytes-like.
        UnicodeEncodeError: a character ``encoding`` cannot write.
    """
    if isinstance(body, str):
        return body.encode(encoding)
    if isinstance(body, (bytes, bytearray)):
        return body
    if isinstance(body, memoryview):
        return body.cast("B") if body.c_contiguous else body.tobytes()
    raise TypeError("message body must be str or bytes, not %s" % type(body).__name__)


def check_encoding(encoding: Any) -> None:
    """Refuse a connection's ``encoding=`` unless Python has a text codec of that name
    (``codecs.lookup``; not a bytes-to-bytes one such as ``"base64"``).

    Raises:
        TypeError: ``encoding`` is not a str.
        UnknownEncodingError: (a ConfigurationError and a LookupError) no such text
            codec; the message names the keyword and the value.
    """
    if not isinstance(encoding, str):
        raise TypeError("encoding must be a str (a codec name such as 'utf-8'), got %r" % (encoding,))
    try:
        "".encode(encoding)  # codecs.lookup, and refused when not a text encoding
        b"".decode(encoding)
    except LookupError as exc:
        raise UnknownEncodingError("encoding=%r is not a text encoding Python knows (codecs.lookup: %s)"
                                   % (encoding, exc)) from exc
