"""Where a test broker is reached: its connector URLs and login, as
properties computed from its ``host``, ports and ``users`` (a mixin of
:class:`~amqstomp.testing.broker.ActiveMQBroker`).

Every URL names 127.0.0.1 (the test brokers bind loopback only); a URL of a
connector the broker does not open is None.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

__all__ = ["BrokerEndpoints"]


class BrokerEndpoints:
    """The connector URLs, ``host_and_ports`` and ``credentials`` of a broker
    whose class sets the attributes declared here."""

    host: str
    stomp_port: int
    stomp_nio_port: Optional[int]
    stomp_ssl_port: Optional[int]
    ws_port: Optional[int]
    users: Optional[Dict[str, str]]

    @property
    def url(self) -> str:
        """``stomp://127.0.0.1:PORT`` of the plain STOMP connector."""
        return f"stomp://{self.host}:{self.stomp_port}"

    @property
    def nio_url(self) -> Optional[str]:
        """``stomp+nio://127.0.0.1:PORT`` (``nio=True``), else None."""
        return f"stomp+nio://{self.host}:{self.stomp_nio_port}" if self.stomp_nio_port else None

    @property
    def ssl_url(self) -> Optional[str]:
        """``stomp+ssl://127.0.0.1:PORT`` (``ssl=...``), else None."""
        return f"stomp+ssl://{self.host}:{self.stomp_ssl_port}" if self.stomp_ssl_port else None

    @property
    def ws_url(self) -> Optional[str]:
        """``ws://127.0.0.1:PORT/`` of the WebSocket connector (``ws=True``), else None."""
        return f"ws://{self.host}:{self.ws_port}/" if self.ws_port else None

    @property
    def host_and_ports(self) -> List[Tuple[str, int]]:
        """``[("127.0.0.1", stomp_port)]``, as stomp.py's ``Connection`` takes it."""
        return [(self.host, self.stomp_port)]

    @property
    def credentials(self) -> Optional[Tuple[str, str]]:
        """``(login, password)`` of the first of ``users``, or None (no authentication)."""
        if not self.users:
            return None
        return next(iter(self.users.items()))
