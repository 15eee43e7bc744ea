"""The connectors of a test broker: their ports and URLs.

:class:`Connectors` is the part of
:class:`~amqstomp.testing.broker.ActiveMQBroker` that names where a client
connects: the plain STOMP connector always, and the optional ones the broker
was made with (``stomp+nio://``, ``stomp+ssl://``, ``ws://``, OpenWire
``tcp://``). Every connector is bound to :attr:`Connectors.host`
(127.0.0.1); ports are ints, ``None`` for a connector that is not opened.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from ._process import free_port

__all__ = ["Connectors"]


class Connectors:
    """Ports and URLs of a broker's transport connectors (a mix-in: the
    broker sets the ``*_port`` attributes in its constructor)."""

    host = "127.0.0.1"
    stomp_port: int
    stomp_nio_port: Optional[int]
    stomp_ssl_port: Optional[int]
    ws_port: Optional[int]
    openwire_port: Optional[int]
    #: the connectors a broker opens only when asked, by attribute name
    OPTIONAL_PORTS = ("stomp_nio_port", "stomp_ssl_port", "ws_port", "openwire_port")

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
    def openwire_url(self) -> Optional[str]:
        """``tcp://127.0.0.1:PORT`` of the OpenWire connector (``openwire=True``):
        what ActiveMQ's Java client (``ActiveMQConnectionFactory``) takes as
        its broker URL; None when the broker has no OpenWire connector."""
        return f"tcp://{self.host}:{self.openwire_port}" if self.openwire_port else None

    @property
    def host_and_ports(self) -> List[Tuple[str, int]]:
        """``[("127.0.0.1", stomp_port)]``, as stomp.py's ``Connection`` takes it."""
        return [(self.host, self.stomp_port)]

    def _ports(self) -> List[int]:
        """Every port this broker binds (the ones it was asked to open)."""
        return [p for p in [self.stomp_port] + [getattr(self, n) for n in self.OPTIONAL_PORTS] if p]

    def _new_ports(self) -> None:
        """A fresh free port for the STOMP connector and for every optional one opened."""
        self.stomp_port = free_port()
        for name in self.OPTIONAL_PORTS:
            if getattr(self, name):
                setattr(self, name, free_port())
