"""Where the command-line client connects, and the one line it prints when it cannot.

The target is stomp.py's ``-H host -P port``, or, in ``-H`` (or as the one
positional argument), an ActiveMQ URI parsed by :func:`amqstomp.uri.parse_uri`:
``stomp://host:port``, ``stomp+ssl://host:port`` (TLS), or
``failover:(stomp://a:61613,stomp://b:61613)?maxReconnectAttempts=5`` (a
lost connection is replaced, subscriptions made again: the connection's
``auto_reconnect``). :func:`parse_target` (:mod:`amqstomp._target`, shared with the stomp.py-style
fan-in and spreading connections) turns it into the keywords of
stomp.py's connection classes; a URI option the client cannot honour raises
:class:`~amqstomp.exception.ConfigurationError` naming it (nothing is dropped
silently).

:func:`connect_failure` words a failed connect as one line: an unknown host, a
closed port, a timeout, a TLS failure, or a login the broker refused (with the
broker's own reason, its ERROR frame's ``message``).
"""
import socket
import ssl
from typing import Optional

from .._io.connector import refused_hint
from .._target import Target, is_uri, parse_target
from ..exception import ConnectFailedException, ConnectRefusedError

__all__ = ["Target", "is_uri", "parse_target", "connect_failure"]


def connect_failure(exc: ConnectFailedException, target: Target, username: Optional[str] = None) -> str:
    """One line saying why connecting to ``target`` failed (no traceback)."""
    where = target.describe()
    if isinstance(exc, ConnectRefusedError):
        # the broker's whole reason: its ``message`` header and its body (RabbitMQ: "Bad CONNECT" + why)
        who = " of user %r" % username if username else ""
        return "%s refused the login%s: %s" % (where, who, exc.reason or exc)
    cause = exc.__cause__
    if isinstance(cause, socket.gaierror):
        hosts = ", ".join(sorted({h for h, _ in target.host_and_ports}))
        return "cannot connect to %s: unknown host %s (%s)" % (where, hosts, cause.strerror or cause)
    if isinstance(cause, ConnectionRefusedError):  # on 61613, where to find the broker's STOMP port
        return "cannot connect to %s: connection refused (no broker listens there)%s" % (
            where, refused_hint(target.host_and_ports))
    if isinstance(cause, (socket.timeout, TimeoutError)):
        return "cannot connect to %s: timed out (%s)" % (where, cause)
    if isinstance(cause, ssl.SSLError):
        return "cannot connect to %s: TLS failed: %s" % (where, cause)
    return "cannot connect to %s: %s" % (where, exc)
