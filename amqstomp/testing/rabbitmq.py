"""RabbitMQ's STOMP plugin, on a loopback port, for tests: :class:`RabbitMQStomp`.

RabbitMQ itself is the machine's; its STOMP plugin is off until asked for.
:meth:`RabbitMQStomp.start` turns it on with its listener on a free port of
127.0.0.1 (never 61613 when that is taken), as RabbitMQ's documentation says:

1. ``rabbitmqctl eval 'application:set_env(rabbitmq_stomp, tcp_listeners,
   [{"127.0.0.1", PORT}], [{persistent, true}]).'``
2. ``rabbitmq-plugins enable rabbitmq_stomp``

and :meth:`RabbitMQStomp.stop` turns it off again when it was turned on by
these tools and no other user (a :class:`RabbitMQStomp` or
:class:`~amqstomp.testing.web_stomp.RabbitMQWebStomp`, in any test process of
this machine) still needs it: the plugins are used by reference, as
:mod:`amqstomp.testing._rabbitmq` says (:data:`LOCK_PATH`, :data:`USERS_PATH`).
When the plugin is on already, its listener is used as it is. Credentials:
``guest``/``guest`` (RabbitMQ lets that user in from loopback only), virtual
host ``/``.

:meth:`RabbitMQStomp.require` says why RabbitMQ cannot be used
(:class:`~amqstomp.testing.web_stomp.RabbitMQNotAvailable`, a
:class:`~amqstomp.testing.broker.BrokerNotAvailable`).
"""
from __future__ import annotations

import re
import socket
import time
from typing import List, Optional, Tuple

from ._rabbitmq import LOCK_PATH, STOMP, TOOL_TIMEOUT_S, RabbitMQPlugins, rabbitmq_eval, users_path
from ._stomp import FrameReader, encode_frame, goodbye
from .broker import BrokerStartError

__all__ = ["RabbitMQStomp", "LOCK_PATH", "USERS_PATH", "TOOL_TIMEOUT_S"]

#: Held (shared) by every user of the STOMP plugin.
USERS_PATH = users_path(STOMP)


class RabbitMQStomp(RabbitMQPlugins):
    """RabbitMQ's STOMP listener on 127.0.0.1 (see the module docstring).

    Args:
        port (int | None): the listener's port when the plugin is turned on here;
            a free one when None.
        startup_timeout (float): seconds to wait for the listener to answer.

    Attributes:
        host (str), port (int): where the listener is (after :meth:`start`).
        username, password, vhost (str): ``guest``, ``guest``, ``/``.
        server (str): CONNECTED's ``server`` header (``RabbitMQ/3.10.8``).
        enabled_here (bool): this object turned the plugin on.
    """

    username = "guest"
    password = "guest"

    def __init__(self, port: Optional[int] = None, startup_timeout: float = 60.0) -> None:
        super().__init__()
        self.port = port or 0
        self.startup_timeout = float(startup_timeout)
        self.server = ""

    # ------------------------------------------------------------ info

    @property
    def url(self) -> str:
        """``stomp://127.0.0.1:PORT`` (for the JMS API's ConnectionFactory)."""
        return "stomp://%s:%d" % (self.host, self.port)

    @property
    def host_and_ports(self) -> List[Tuple[str, int]]:
        """``[("127.0.0.1", PORT)]`` (for the stomp.py-style connections)."""
        return [(self.host, self.port)]

    @property
    def enabled_here(self) -> bool:
        return STOMP in self.enabled_plugins

    def __repr__(self) -> str:
        return "<RabbitMQStomp %s %s>" % (self.url, self.server or "not started")

    def _start(self) -> None:
        """:meth:`start`: the STOMP plugin on 127.0.0.1, answering CONNECT."""
        self._use_stomp(self.port)
        self.port = self.stomp_host_and_port[1]
        self.server = self._wait_ready()

    def delete_queues(self, prefix: str) -> int:
        """Delete the queues of virtual host ``/`` whose name starts with ``prefix``
        (a test session's own: RabbitMQ keeps a ``/queue/x`` queue after its
        last consumer); how many.

        Raises:
            ValueError: an empty prefix, or one with characters other than
                letters, digits, ``-``, ``_`` and ``.``.
            BrokerStartError: ``rabbitmqctl`` failed.
        """
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", prefix or ""):
            raise ValueError("queue name prefix must be letters, digits, '-', '_' or '.', got %r" % (prefix,))
        out = rabbitmq_eval("length([ok || Q <- rabbit_amqqueue:list(<<\"/\">>), "
                            "binary:longest_common_prefix([element(4, amqqueue:get_name(Q)), <<\"%s\">>]) == %d, "
                            "element(1, rabbit_amqqueue:delete(Q, false, false, <<\"amqstomp.testing\">>)) == ok])."
                            % (prefix, len(prefix.encode())))
        return int(out or 0)

    # ------------------------------------------------------------ helpers

    def _wait_ready(self) -> str:
        """CONNECT as guest until CONNECTED comes; its ``server`` header."""
        deadline = time.monotonic() + self.startup_timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=5.0)
            except OSError as exc:
                last = exc
                time.sleep(0.2)
                continue
            try:
                sock.sendall(encode_frame("CONNECT", {"accept-version": "1.2", "host": self.vhost,
                                                      "login": self.username, "passcode": self.password}))
                command, headers, body = FrameReader(sock, time.monotonic() + 5.0).read()
                if command == "CONNECTED":
                    goodbye(sock)
                    return headers.get("server", "")
                last = "%s %s %r" % (command, headers.get("message", ""), body[:200])
            except (OSError, ValueError, RuntimeError) as exc:
                last = exc
            finally:
                sock.close()
            time.sleep(0.2)
        raise BrokerStartError("RabbitMQ's STOMP listener on %s:%d did not answer within %.0f s: %s"
                               % (self.host, self.port, self.startup_timeout, last))
