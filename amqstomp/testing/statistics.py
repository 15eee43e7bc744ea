"""The broker's own counters, from ActiveMQ's statistics plugin.

:func:`queue_statistics`, :func:`topic_statistics` and
:func:`broker_statistics` ask a running broker (started with
``statistics=True``) over a raw STOMP socket, independently of the amqstomp
client, and return the counters as a ``dict`` (ints for counters, floats for
averages, strings for names). ``timeout`` is in seconds.

The request is a SEND to ``/queue/ActiveMQ.Statistics.Destination.<name>``
(or ``.Broker``) with a ``reply-to`` temporary queue subscribed with
``transformation:jms-map-xml``; the reply is XStream's XML rendering of a
MapMessage, so the broker needs XStream on its class path
(``transformations=True``, the default with ``statistics=True``).
"""
from __future__ import annotations

import time
import uuid
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Tuple, Union

from ._stomp import encode_frame, goodbye, handshake

__all__ = ["Target", "broker_statistics", "queue_statistics", "topic_statistics"]

#: Where to ask: an :class:`~amqstomp.testing.broker.ActiveMQBroker` (or
#: anything with ``host_and_ports``; its ``credentials`` log in), a ``(host, port)`` tuple, or a
#: ``"host:port"`` / ``"stomp://host:port"`` string.
Target = Union[Tuple[str, int], str, Any]


def _resolve(target: Target) -> Tuple[str, int]:
    if isinstance(target, tuple) and len(target) == 2:
        return str(target[0]), int(target[1])
    if isinstance(target, str):
        rest = target.split("://", 1)[-1]
        host, _, port = rest.rstrip("/").rpartition(":")
        return host or "127.0.0.1", int(port)
    hp = getattr(target, "host_and_ports", None)
    if hp:
        return str(hp[0][0]), int(hp[0][1])
    raise TypeError(f"cannot find a STOMP host and port in {target!r}")


def _parse_map(body: bytes) -> Dict[str, Any]:
    """Parse XStream's ``jms-map-xml`` rendering of a MapMessage."""
    result: Dict[str, Any] = {}
    root = ET.fromstring(body.decode("utf-8"))
    for entry in root.findall("entry"):
        children = list(entry)
        if len(children) != 2:
            continue
        key = children[0].text or ""
        value_el = children[1]
        text = value_el.text or ""
        tag = value_el.tag
        value: Any
        if tag in ("long", "int", "short", "byte"):
            value = int(text)
        elif tag in ("double", "float"):
            value = float(text)
        elif tag == "boolean":
            value = text == "true"
        elif tag == "null":
            value = None
        else:
            value = text
        result[key] = value
    return result


def _statistics_request(
    target: Target, request_destination: str, timeout: float, until_empty: bool
) -> List[Dict[str, Any]]:
    host, port = _resolve(target)
    login, passcode = getattr(target, "credentials", None) or (None, None)  # a broker with users=
    deadline = time.monotonic() + timeout
    try:
        sock, reader = handshake(host, port, timeout, login, passcode)
    except TimeoutError:
        raise TimeoutError(f"no CONNECTED from {host}:{port} within {timeout} s") from None
    reader.deadline = deadline
    replies: List[Dict[str, Any]] = []
    try:
        reply_to = f"/temp-queue/amqstomp.stats.{uuid.uuid4().hex}"
        subscribe = encode_frame("SUBSCRIBE", {
            "id": "stats", "destination": reply_to, "ack": "auto",
            "transformation": "jms-map-xml",
        })
        headers = {"destination": request_destination, "reply-to": reply_to}
        if until_empty:
            headers["ActiveMQ.Statistics.Destination.List.End.With.Null"] = "true"
        sock.sendall(subscribe + encode_frame("SEND", headers))
        while True:
            try:
                command, hdrs, body = reader.read()
            except TimeoutError:
                raise TimeoutError(
                    f"no statistics reply for {request_destination} from {host}:{port} "
                    f"within {timeout} s (is the broker's statistics plugin on?)"
                ) from None
            except ConnectionError as exc:
                # ActiveMQ drops the connection when it cannot render the
                # reply as jms-map-xml: XStream is not on its class path.
                raise ConnectionError(
                    f"{host}:{port} closed the connection instead of answering "
                    f"{request_destination} ({exc}); start the broker with "
                    "statistics=True (or transformations=True) so XStream is linked"
                ) from None
            if command == "ERROR":
                raise RuntimeError(
                    f"broker answered {request_destination} with ERROR: "
                    f"{hdrs.get('message', '')} {body.decode('utf-8', 'replace')}".strip()
                )
            if command != "MESSAGE":
                continue
            stats = _parse_map(body) if body.strip() else {}
            if not stats:
                break  # the empty end-of-list message
            replies.append(stats)
            if not until_empty:
                break
    finally:
        goodbye(sock)
    return replies


def _destination_statistics(target: Target, kind: str, name: str, timeout: float) -> Dict[str, Any]:
    prefix = f"/{kind}/"
    if name.startswith(prefix):
        name = name[len(prefix):]
    request = f"/{kind}/ActiveMQ.Statistics.Destination.{name}"
    for stats in _statistics_request(target, request, timeout, until_empty=True):
        if stats.get("destinationName") == f"{kind}://{name}":
            return stats
    raise LookupError(f"the broker has no {kind} named {name!r}")


def queue_statistics(target: Target, queue_name: str, timeout: float = 10.0) -> Dict[str, Any]:
    """The broker's counters for one queue, from the statistics plugin.

    ``target`` is an :class:`~amqstomp.testing.broker.ActiveMQBroker`, a
    ``(host, port)`` tuple, a ``"host:port"`` / ``"stomp://host:port"``
    string, or anything with ``host_and_ports``.  ``queue_name`` may carry a
    ``/queue/`` prefix.
    Returns e.g. ``{"enqueueCount": 5, "dequeueCount": 0, "inflightCount": 0,
    "size": 5, "consumerCount": 0, "producerCount": 0, "expiredCount": 0,
    "dispatchCount": 0, "averageEnqueueTime": 0.0, "destinationName":
    "queue://name", ...}`` (counters int, averages float, names str).

    Raises :class:`LookupError` if the queue does not exist (yet),
    :class:`TimeoutError` if no answer comes within ``timeout`` seconds
    (statistics plugin off), :class:`ConnectionError` if the broker drops
    the connection (XStream missing: ``transformations=False``) and
    :class:`OSError` if the broker is unreachable.
    Messages sent without a receipt may not be counted yet.
    """
    return _destination_statistics(target, "queue", queue_name, timeout)


def topic_statistics(target: Target, topic_name: str, timeout: float = 10.0) -> Dict[str, Any]:
    """Like :func:`queue_statistics`, for a topic (``/topic/`` prefix optional)."""
    return _destination_statistics(target, "topic", topic_name, timeout)


def broker_statistics(target: Target, timeout: float = 10.0) -> Dict[str, Any]:
    """Broker-wide counters (``enqueueCount``, ``consumerCount``,
    ``storePercentUsage``, ``brokerName``, ...) from the statistics plugin.
    Raises as :func:`queue_statistics` does (but never :class:`LookupError`)."""
    replies = _statistics_request(target, "/queue/ActiveMQ.Statistics.Broker", timeout, until_empty=False)
    return replies[0]
