"""The names the spans and metrics carry: the messaging semantic conventions, by version.

OpenTelemetry's rule for an instrumentation that existed before the messaging
conventions are stable ("Semantic conventions for messaging systems", v1.45
README): emit v1.24's names by default, the current ones when
``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``messaging``, both with
``messaging/dup`` (which wins over ``messaging``).

v1.24 (the default): span name ``{destination} {operation}``,
``messaging.operation`` ``publish`` / ``receive`` / ``deliver``,
``messaging.client_id``. Current (v1.26 and later, v1.44 checked): span name
``{operation name} {destination}``, ``messaging.operation.type`` ``send`` /
``receive`` / ``process`` / ``settle`` and ``messaging.operation.name``
(``send``, ``receive``, ``process``, ``ack``, ``nack``, ``commit``, ``abort``,
``connect``), ``messaging.client.id``. Both: ``messaging.system``,
``messaging.destination.name``, ``messaging.message.id``,
``messaging.message.conversation_id``, ``messaging.batch.message_count``,
``messaging.message.body.size``, ``messaging.destination.subscription.name``,
``server.address``, ``server.port``, ``error.type``.
"""
import os
from typing import Any, Dict, Mapping, Optional

from opentelemetry.trace import SpanKind

__all__ = ["Conventions", "OLD", "NEW", "DUP", "semconv_mode"]

OLD = "default"  #: v1.24 names only
NEW = "messaging"  #: the current names only
DUP = "messaging/dup"  #: both

#: operation type (current conventions) -> v1.24's ``messaging.operation``
_OLD_OPERATION = {"send": "publish", "receive": "receive", "process": "deliver", "settle": "settle"}

#: operation type -> span kind (current conventions; v1.24's receive is CONSUMER)
_KINDS = {"send": SpanKind.PRODUCER, "receive": SpanKind.CLIENT, "process": SpanKind.CONSUMER,
          "settle": SpanKind.CLIENT, None: SpanKind.CLIENT}


def semconv_mode(environ: Optional[Mapping[str, str]] = None) -> str:
    """:data:`OLD`, :data:`NEW` or :data:`DUP` from ``OTEL_SEMCONV_STABILITY_OPT_IN``
    (a comma-separated list; other categories in it are ignored)."""
    value = (os.environ if environ is None else environ).get("OTEL_SEMCONV_STABILITY_OPT_IN", "")
    listed = {item.strip() for item in value.split(",")}
    if DUP in listed:
        return DUP
    return NEW if NEW in listed else OLD


class Conventions:
    """Span names, kinds and attribute names of one semantic-conventions mode.

    Args:
        mode (str): :data:`OLD`, :data:`NEW` or :data:`DUP` (None: :func:`semconv_mode`).
    """

    def __init__(self, mode: Optional[str] = None) -> None:
        self.mode = semconv_mode() if mode is None else mode
        if self.mode not in (OLD, NEW, DUP):
            raise ValueError("semantic-conventions mode must be %r, %r or %r, got %r" % (OLD, NEW, DUP, mode))
        self.old = self.mode in (OLD, DUP)
        self.new = self.mode in (NEW, DUP)

    def span_name(self, op_type: Optional[str], op_name: str, destination: Optional[str]) -> str:
        """``{operation name} {destination}`` (current), ``{destination} {operation}`` (v1.24)."""
        if self.new:
            return "%s %s" % (op_name, destination) if destination else op_name
        operation = _OLD_OPERATION.get(op_type or "", op_name)
        return "%s %s" % (destination, operation) if destination else operation

    def kind(self, op_type: Optional[str]) -> SpanKind:
        """The span kind of an operation type (None: a transaction or connection operation)."""
        if op_type == "receive" and not self.new:
            return SpanKind.CONSUMER  # v1.24
        return _KINDS[op_type]

    def operation(self, attrs: Dict[str, Any], op_type: Optional[str], op_name: str) -> None:
        """Set the operation's attributes in ``attrs``."""
        if self.new:
            if op_type is not None:
                attrs["messaging.operation.type"] = op_type
            attrs["messaging.operation.name"] = op_name
        if self.old:
            attrs["messaging.operation"] = _OLD_OPERATION.get(op_type or "", op_name)

    def client_id(self, attrs: Dict[str, Any], client_id: Optional[str]) -> None:
        """Set the client id (``client-id`` of CONNECT: the JMS client ID) in ``attrs``."""
        if client_id:
            if self.new:
                attrs["messaging.client.id"] = client_id
            if self.old:
                attrs["messaging.client_id"] = client_id
