"""RabbitMQ's STOMP-over-WebSocket plugin (``rabbitmq_web_stomp``) on a free
loopback port, for tests of :class:`amqstomp.WSConnection`.

Debian's ActiveMQ 5.17 package cannot open ``ws://`` connectors (it lacks the
activemq-http module, see :data:`amqstomp.testing._config.WS_NOT_AVAILABLE`),
so STOMP over WebSocket is tested against the machine's RabbitMQ (DESIGN.md
section 3: a system service on 127.0.0.1:5672, plugins off until enabled).

:class:`RabbitMQWebStomp` (a context manager) sets the plugin's listener to
``127.0.0.1:<free port>`` (and, when the ``rabbitmq_stomp`` plugin it depends on
is not running yet, that one's too, so nothing binds beyond loopback), runs
``rabbitmq-plugins enable rabbitmq_web_stomp``, waits until the port accepts
(with ``tls=True`` also a TLS listener, ``wss://127.0.0.1:TLS_PORT/ws``, with a
self-signed certificate for 127.0.0.1 made by ``openssl`` in a temporary
directory RabbitMQ's user can read: :attr:`ca_certs` verifies it),
and on exit disables again what it enabled (an already running plugin is used
as it is and left alone). The endpoint is ``ws://127.0.0.1:PORT/ws``; the
login is ``guest``/``guest`` on the virtual host ``/``.

Errors: :class:`RabbitMQNotAvailable` (RuntimeError) when RabbitMQ's tools or
node are missing; :class:`RuntimeError` naming the command and its output when
a step fails or the port does not open within ``timeout`` seconds.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, List, Optional, Tuple

from ._process import free_port

__all__ = ["RabbitMQNotAvailable", "RabbitMQWebStomp"]

log = logging.getLogger("amqstomp.testing.web_stomp")

PLUGIN = "rabbitmq_web_stomp"
_STOMP_PLUGIN = "rabbitmq_stomp"


class RabbitMQNotAvailable(RuntimeError):
    """RabbitMQ (its ``rabbitmqctl`` / ``rabbitmq-plugins``, or a running node) is not there."""


def _run(args: List[str], timeout: float) -> str:
    try:
        proc = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError("%s did not finish within %.0f s" % (" ".join(args), timeout)) from None
    if proc.returncode != 0:
        raise RuntimeError("%s failed (status %d): %s" % (" ".join(args), proc.returncode,
                                                           (proc.stderr or proc.stdout).strip()[-600:]))
    return proc.stdout


class RabbitMQWebStomp:
    """RabbitMQ's web-STOMP endpoint on ``127.0.0.1:port`` (a free one when None).

    Attributes:
        host (str), port (int), path (str): where the endpoint is.
        login, passcode, vhost (str): ``guest``, ``guest``, ``/``.
    """

    host = "127.0.0.1"
    path = "/ws"
    login = "guest"
    passcode = "guest"
    vhost = "/"

    def __init__(self, port: Optional[int] = None, timeout: float = 90.0, tls: bool = False) -> None:
        self.port = port or free_port()
        self.timeout = timeout
        self.tls = tls
        #: the TLS listener's port (``tls=True``, once started), and the certificate that verifies it
        self.tls_port: Optional[int] = None
        self.ca_certs: Optional[str] = None
        self._cert_dir: Optional[str] = None
        self._enabled = False  # this object enabled the plugin: it disables it again

    @property
    def tls_url(self) -> Optional[str]:
        """``wss://127.0.0.1:TLS_PORT/ws`` (``tls=True``), else None."""
        return "wss://%s:%d%s" % (self.host, self.tls_port, self.path) if self.tls_port else None

    def _make_cert(self) -> Tuple[str, str]:
        """A self-signed certificate and key for 127.0.0.1, readable by RabbitMQ's user."""
        openssl = shutil.which("openssl")
        if openssl is None:
            raise RabbitMQNotAvailable("openssl is needed for tls=True (apt-get install -y openssl)")
        self._cert_dir = tempfile.mkdtemp(prefix="amqstomp-web-stomp-")
        os.chmod(self._cert_dir, 0o755)
        cert, key = os.path.join(self._cert_dir, "cert.pem"), os.path.join(self._cert_dir, "key.pem")
        _run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
              "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], 60.0)
        for path in (cert, key):
            os.chmod(path, 0o644)  # a throw-away test key: the broker runs as another user
        return cert, key

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:PORT/ws``."""
        return "ws://%s:%d%s" % (self.host, self.port, self.path)

    @property
    def host_and_port(self) -> Tuple[str, int]:
        return (self.host, self.port)

    @staticmethod
    def available() -> Optional[str]:
        """None when RabbitMQ's tools are installed and its node answers, else why not."""
        for tool in ("rabbitmqctl", "rabbitmq-plugins"):
            if shutil.which(tool) is None:
                return "%s not found (RabbitMQ is not installed: apt-get install -y rabbitmq-server)" % tool
        try:
            _run(["rabbitmqctl", "-q", "eval", "ok."], 30.0)
        except RuntimeError as exc:
            return "the RabbitMQ node does not answer: %s" % exc
        return None

    def _eval(self, expr: str) -> str:
        return _run(["rabbitmqctl", "-q", "eval", expr], 30.0).strip()

    def _running(self, app: str) -> bool:
        out = self._eval("lists:keymember(%s, 1, application:which_applications())." % app)
        return out == "true"

    def _listener_port(self) -> Optional[int]:
        """The port of an already running web-STOMP listener."""
        out = self._eval("application:get_env(%s, tcp_config)." % PLUGIN)
        match = re.search(r"\{port,\s*(\d+)\}", out)
        return int(match.group(1)) if match else 15674

    @property
    def stomp_host_and_port(self) -> Tuple[str, int]:
        """Where the plain-TCP STOMP listener (``rabbitmq_stomp``, which the plugin
        runs on) is, once started: the first of its ``tcp_listeners``.

        Raises:
            RuntimeError: it has no TCP listener.
        """
        out = self._eval("application:get_env(%s, tcp_listeners)." % _STOMP_PLUGIN)
        match = re.search(r'\{"([^"]+)",\s*(\d+)\}', out) or re.search(r"\[(\d+)", out)
        if match is None:
            raise RuntimeError("rabbitmq_stomp has no TCP listener: %s" % out)
        if match.lastindex == 2:
            return (match.group(1), int(match.group(2)))
        return (self.host, int(match.group(1)))

    def start(self) -> "RabbitMQWebStomp":
        """Enable the plugin on :attr:`port` (or use the one running) and wait until it accepts."""
        why = self.available()
        if why is not None:
            raise RabbitMQNotAvailable(why)
        if self._running(PLUGIN):
            self.port = self._listener_port() or self.port
            log.info("rabbitmq_web_stomp is running already, on port %d: used as it is", self.port)
        else:
            if not self._running(_STOMP_PLUGIN):  # enabled with it: bind it to loopback too
                self._eval("application:set_env(%s, tcp_listeners, [{\"127.0.0.1\", %d}], [{persistent, true}])."
                           % (_STOMP_PLUGIN, free_port()))
            self._eval("application:set_env(%s, tcp_config, [{port, %d}, {ip, \"127.0.0.1\"}], [{persistent, true}])."
                       % (PLUGIN, self.port))
            ssl_config = "[]"
            if self.tls:
                cert, key = self._make_cert()
                self.tls_port, self.ca_certs = free_port(), cert
                ssl_config = "[{port, %d}, {ip, \"127.0.0.1\"}, {certfile, \"%s\"}, {keyfile, \"%s\"}]" % (
                    self.tls_port, cert, key)
            self._eval("application:set_env(%s, ssl_config, %s, [{persistent, true}])." % (PLUGIN, ssl_config))
            _run(["rabbitmq-plugins", "enable", PLUGIN], self.timeout)
            self._enabled = True
        self._wait_port()
        return self

    def _wait_port(self) -> None:
        deadline = time.monotonic() + self.timeout
        for port in [self.port] + ([self.tls_port] if self.tls_port else []):
            while True:
                try:
                    socket.create_connection((self.host, port), 1.0).close()
                    break
                except OSError as exc:
                    if time.monotonic() >= deadline:
                        self.stop()
                        raise RuntimeError("rabbitmq_web_stomp does not accept on %s:%d within %.0f s: %s"
                                           % (self.host, port, self.timeout, exc)) from None
                    time.sleep(0.1)

    def stop(self) -> None:
        """Disable the plugin again if :meth:`start` enabled it (its dependency
        ``rabbitmq_stomp`` goes with it unless someone enabled that one), and
        stop the listeners it opened, which RabbitMQ 3.10 leaves running."""
        if self._enabled:
            self._enabled = False
            try:
                _run(["rabbitmq-plugins", "disable", PLUGIN], self.timeout)
                # RabbitMQ 3.10's plugin leaves its listeners running (and serving) after it is
                # disabled: stop the ones it opened for this object
                ports = ",".join(str(p) for p in (self.port, self.tls_port) if p)
                self._eval("[ranch:stop_listener(R) || {R, #{port := P, protocol := rabbit_web_stomp_connection_sup}}"
                           " <- maps:to_list(ranch:info()), lists:member(P, [%s])]." % ports)
            finally:
                if self._cert_dir:
                    shutil.rmtree(self._cert_dir, ignore_errors=True)
                    self._cert_dir = None

    def __enter__(self) -> "RabbitMQWebStomp":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
