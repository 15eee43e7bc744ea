"""RabbitMQ's STOMP-over-WebSocket plugin (``rabbitmq_web_stomp``) on a free
loopback port, for tests of :class:`amqstomp.WSConnection`.

Debian's ActiveMQ 5.17 package cannot open ``ws://`` connectors (it lacks the
activemq-http module, see :data:`amqstomp.testing._config.WS_NOT_AVAILABLE`),
so STOMP over WebSocket is tested against the machine's RabbitMQ (DESIGN.md
section 3: a system service on 127.0.0.1:5672, plugins off until enabled).

:class:`RabbitMQWebStomp` (a context manager) uses two plugins by reference, as
:mod:`amqstomp.testing._rabbitmq` says: ``rabbitmq_stomp``, which the plugin
runs on (turned on, when off, with its listener on a free port of 127.0.0.1,
so nothing binds beyond loopback), and ``rabbitmq_web_stomp`` (turned on, when
off, with its listener on ``127.0.0.1:<port>``, and with ``tls=True`` also a
TLS listener, ``wss://127.0.0.1:TLS_PORT/ws``, with a self-signed certificate
for 127.0.0.1 made by ``openssl`` in a temporary directory RabbitMQ's user can
read: :attr:`~RabbitMQWebStomp.ca_certs` verifies it). It waits until the ports
accept; the last user out turns off what these tools turned on (removing the
certificate, and stopping the listeners RabbitMQ 3.10 leaves running). A plugin
running already is used as it is, with its listeners. The endpoint is
``ws://127.0.0.1:PORT/ws``; the login is ``guest``/``guest`` on the virtual
host ``/``.

Errors: :class:`RabbitMQNotAvailable` (a
:class:`~amqstomp.testing.broker.BrokerNotAvailable`, a RuntimeError) when
RabbitMQ's tools or node are missing (or ``openssl`` for ``tls=True``);
:class:`~amqstomp.testing.broker.BrokerStartError` (a RuntimeError) naming the
command and its output when a step fails or a port does not open within
``timeout`` seconds.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from typing import Any, Dict, Optional, Tuple

from ._process import free_port
from ._rabbitmq import WEB_STOMP, RabbitMQNotAvailable, RabbitMQPlugins, run_tool

__all__ = ["RabbitMQNotAvailable", "RabbitMQWebStomp"]

log = logging.getLogger("amqstomp.testing.web_stomp")

PLUGIN = WEB_STOMP
#: the rabbit_networking protocols of the plugin's listeners
_PROTOCOLS = ("http/web-stomp", "https/web-stomp")
_CERT_PREFIX = "amqstomp-web-stomp-"


class RabbitMQWebStomp(RabbitMQPlugins):
    """RabbitMQ's web-STOMP endpoint on ``127.0.0.1:port`` (a free one when None).

    Args:
        port (int | None): the plugin's listener when it is turned on here.
        timeout (float): seconds for a tool call and for the ports to accept.
        tls (bool): also a ``wss://`` listener (when the plugin is turned on here; a running
            plugin's TLS listener is used when it has one).

    Attributes:
        host (str), port (int), path (str): where the endpoint is.
        login, passcode, vhost (str): ``guest``, ``guest``, ``/``.
        tls_port (int | None), ca_certs (str | None): the TLS listener's port (once started)
            and the certificate that verifies it.
    """

    path = "/ws"
    login = "guest"
    passcode = "guest"

    def __init__(self, port: Optional[int] = None, timeout: float = 90.0, tls: bool = False) -> None:
        super().__init__()
        self.port = port or free_port()
        self.timeout = timeout
        self.tls = tls
        self.tls_port: Optional[int] = None
        self.ca_certs: Optional[str] = None

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:PORT/ws``."""
        return "ws://%s:%d%s" % (self.host, self.port, self.path)

    @property
    def tls_url(self) -> Optional[str]:
        """``wss://127.0.0.1:TLS_PORT/ws`` (``tls=True``), else None."""
        return "wss://%s:%d%s" % (self.host, self.tls_port, self.path) if self.tls_port else None

    @property
    def host_and_port(self) -> Tuple[str, int]:
        return (self.host, self.port)

    def _start(self) -> None:
        """:meth:`start`: the plugin (turned on at :attr:`port` when it is off), on the STOMP
        plugin it runs on; waits until its ports accept (``timeout``)."""
        self._use_stomp()
        if not self._use(PLUGIN, self._configure):
            self._adopt()
        ports = [self.port] + ([self.tls_port] if self.tls_port else [])
        self._wait_accepting(ports, self.timeout, PLUGIN)

    def stop(self) -> None:
        """Stop using the plugins; the last user turns off those these tools turned on
        (stopping the listeners RabbitMQ 3.10 leaves running, removing the certificate)."""
        self._release(self._cleanup)

    # ------------------------------------------------------------ helpers

    def _configure(self) -> str:
        """Before the plugin is enabled here: its listeners; a note of the ports and the
        certificate's directory, for whoever disables it."""
        self.set_env(PLUGIN, "tcp_config", '[{port, %d}, {ip, "127.0.0.1"}]' % self.port)
        ssl_config, cert_dir = "[]", None
        if self.tls:
            cert_dir, cert, key = self._make_cert()
            self.tls_port, self.ca_certs = free_port(), cert
            ssl_config = '[{port, %d}, {ip, "127.0.0.1"}, {certfile, "%s"}, {keyfile, "%s"}]' % (
                self.tls_port, cert, key)
        self.set_env(PLUGIN, "ssl_config", ssl_config)
        return json.dumps({"ports": [p for p in (self.port, self.tls_port) if p], "cert_dir": cert_dir})

    def _adopt(self) -> None:
        """The plugin runs already: its listeners, as its configuration says."""
        match = re.search(r"\{port,\s*(\d+)\}", self.get_env(PLUGIN, "tcp_config"))
        self.port = int(match.group(1)) if match else 15674
        ssl = self.get_env(PLUGIN, "ssl_config")
        tls_port, cert = re.search(r"\{port,\s*(\d+)\}", ssl), re.search(r'\{certfile,\s*"([^"]+)"\}', ssl)
        if tls_port and cert and os.path.exists(cert.group(1)):
            self.tls_port, self.ca_certs = int(tls_port.group(1)), cert.group(1)
        log.info("rabbitmq_web_stomp is running already, on port %d: used as it is", self.port)

    def _make_cert(self) -> Tuple[str, str, str]:
        """A self-signed certificate and key for 127.0.0.1, readable by RabbitMQ's user:
        (directory, certificate, key)."""
        openssl = shutil.which("openssl")
        if openssl is None:
            raise RabbitMQNotAvailable("openssl is needed for tls=True (apt-get install -y openssl)")
        cert_dir = tempfile.mkdtemp(prefix=_CERT_PREFIX)
        os.chmod(cert_dir, 0o755)
        cert, key = os.path.join(cert_dir, "cert.pem"), os.path.join(cert_dir, "key.pem")
        try:
            run_tool([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                      "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                     60.0)
        except BaseException:
            shutil.rmtree(cert_dir, ignore_errors=True)
            raise
        for path in (cert, key):
            os.chmod(path, 0o644)  # a throw-away test key: the broker runs as another user
        return cert_dir, cert, key

    def _cleanup(self, plugin: str, note: str) -> None:
        """After ``plugin`` was disabled here: for web-STOMP, stop the listeners RabbitMQ 3.10
        leaves running, and remove the certificate made for it."""
        if plugin != PLUGIN:
            return
        try:
            made: Dict[str, Any] = json.loads(note) if note.strip() else {}
        except ValueError:
            made = {}
        self.stop_leftover_listeners(_PROTOCOLS, made.get("ports") or [])
        cert_dir = made.get("cert_dir")
        if cert_dir and os.path.basename(cert_dir).startswith(_CERT_PREFIX):
            shutil.rmtree(cert_dir, ignore_errors=True)

