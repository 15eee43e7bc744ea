"""RabbitMQ's STOMP plugin, on a loopback port, for tests: :class:`RabbitMQStomp`.

RabbitMQ itself is the machine's (``rabbitmq-server``, as Debian's package
runs it; amqstomp's CI starts it with ``rabbitmq-server -detached`` when it is
not running). Its STOMP plugin is off until asked for; :meth:`RabbitMQStomp.start`
turns it on with its listener on a free port of 127.0.0.1 (never 61613 when
that is taken), as RabbitMQ's documentation says:

1. ``rabbitmqctl eval 'application:set_env(rabbitmq_stomp, tcp_listeners,
   [{"127.0.0.1", PORT}], [{persistent, true}]).'``
2. ``rabbitmq-plugins enable rabbitmq_stomp``

and :meth:`RabbitMQStomp.stop` turns it off again when the plugin was turned
on here and no other test process (on this machine) still uses it: starting
and stopping take :data:`LOCK_PATH` in turn, every user holds a shared lock on
:data:`USERS_PATH`, and the last one out disables the plugin (not while
``rabbitmq_web_stomp``, which needs it, is enabled). When the plugin
is on already, its listener is used as it is (found with
``rabbitmq-diagnostics listeners``). Credentials: ``guest``/``guest`` (RabbitMQ
lets that user in from loopback only), virtual host ``/``.

RabbitMQ's tools talk to the node through Erlang distribution: they need the
node's cookie (root has it on Debian). :meth:`RabbitMQStomp.require` says why
RabbitMQ cannot be used (:class:`~amqstomp.testing.broker.BrokerNotAvailable`).
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import subprocess
import time
from typing import List, Optional, Sequence, Tuple

from ._process import free_port
from ._stomp import FrameReader, encode_frame, goodbye
from .broker import BrokerNotAvailable, BrokerStartError

__all__ = ["RabbitMQStomp", "LOCK_PATH", "USERS_PATH", "TOOL_TIMEOUT_S"]

#: Held (exclusively) while a test process turns the plugin on or off.
LOCK_PATH = "/tmp/amqstomp-rabbitmq-stomp.lock"
#: Held (shared) by every test process that uses the plugin.
USERS_PATH = "/tmp/amqstomp-rabbitmq-stomp.users"
#: Written by the process that enabled the plugin: the last user disables it.
_OWNED_PATH = "/tmp/amqstomp-rabbitmq-stomp.enabled-here"
#: Seconds one ``rabbitmqctl`` / ``rabbitmq-plugins`` call may take (enabling: ~10 s).
TOOL_TIMEOUT_S = 120.0
_LISTENER = re.compile(r"Interface: ([^,]+), port: (\d+), protocol: stomp,")


def _run(args: Sequence[str], timeout: float = TOOL_TIMEOUT_S) -> str:
    """Run a RabbitMQ tool: its output. Raises BrokerStartError with its output when it fails."""
    try:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BrokerStartError("%s did not finish within %.0f s" % (" ".join(args), timeout)) from None
    if proc.returncode != 0:
        raise BrokerStartError("%s failed (exit %d): %s" % (" ".join(args), proc.returncode,
                                                             (proc.stdout + proc.stderr).strip()[-800:]))
    return proc.stdout


class RabbitMQStomp:
    """RabbitMQ's STOMP listener on 127.0.0.1 (see the module docstring).

    Args:
        port (int | None): the listener's port when the plugin is turned on here;
            a free one when None.
        startup_timeout (float): seconds to wait for the listener to answer.

    Attributes:
        host (str), port (int): where the listener is (after :meth:`start`).
        username, password, vhost (str): ``guest``, ``guest``, ``/``.
        server (str): CONNECTED's ``server`` header (``RabbitMQ/3.10.8``).
        enabled_here (bool): this process turned the plugin on.
    """

    host = "127.0.0.1"
    username = "guest"
    password = "guest"
    vhost = "/"

    def __init__(self, port: Optional[int] = None, startup_timeout: float = 60.0) -> None:
        self.port = port or 0
        self.startup_timeout = float(startup_timeout)
        self.server = ""
        self.enabled_here = False
        self._lock_fd: Optional[int] = None

    # ------------------------------------------------------------ info

    @property
    def url(self) -> str:
        """``stomp://127.0.0.1:PORT`` (for the JMS API's ConnectionFactory)."""
        return "stomp://%s:%d" % (self.host, self.port)

    @property
    def host_and_ports(self) -> List[Tuple[str, int]]:
        """``[("127.0.0.1", PORT)]`` (for the stomp.py-style connections)."""
        return [(self.host, self.port)]

    def __repr__(self) -> str:
        return "<RabbitMQStomp %s %s>" % (self.url, self.server or "not started")

    @staticmethod
    def require() -> None:
        """Raise BrokerNotAvailable (saying why and what to do) unless the
        machine's RabbitMQ runs and its tools can talk to it."""
        for tool in ("rabbitmqctl", "rabbitmq-plugins"):
            if shutil.which(tool) is None:
                raise BrokerNotAvailable("RabbitMQ is not installed (%s not found): apt-get install rabbitmq-server"
                                         % tool)
        try:
            _run(["rabbitmqctl", "-q", "status"], timeout=60.0)
        except BrokerStartError as exc:
            raise BrokerNotAvailable("RabbitMQ is not running or its tools cannot reach it (start it with "
                                     "`rabbitmq-server -detached`; the tools need the node's Erlang cookie): %s"
                                     % exc) from None

    # ------------------------------------------------------------ start / stop

    def start(self) -> "RabbitMQStomp":
        """Make sure the STOMP plugin listens on 127.0.0.1 and answers CONNECT.

        Raises:
            BrokerNotAvailable: RabbitMQ is not there (:meth:`require`).
            BrokerStartError: a tool failed, or the listener did not answer in time.
        """
        self.require()
        mutex = os.open(LOCK_PATH, os.O_CREAT | os.O_RDWR, 0o666)
        fd = os.open(USERS_PATH, os.O_CREAT | os.O_RDWR, 0o666)
        try:
            self._lock(mutex)
            found = self._listener()
            if found is None:
                port = self.port or free_port()
                _run(["rabbitmqctl", "eval", "application:set_env(rabbitmq_stomp, tcp_listeners, "
                      "[{\"%s\", %d}], [{persistent, true}])." % (self.host, port)])
                _run(["rabbitmq-plugins", "enable", "rabbitmq_stomp"])
                with open(_OWNED_PATH, "w") as fh:
                    fh.write("%d\n" % os.getpid())
                self.enabled_here = True
                found = self._listener() or (self.host, port)
            self.port = found[1]
            self.server = self._wait_ready()
            fcntl.flock(fd, fcntl.LOCK_SH)  # in use: the last user out turns it off
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.close(mutex)
        self._lock_fd = fd
        return self

    def stop(self) -> None:
        """Stop using the plugin; disable it when it was turned on by these
        tools and nobody else uses it (see the module docstring)."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is None:
            return
        mutex = os.open(LOCK_PATH, os.O_CREAT | os.O_RDWR, 0o666)
        try:
            self._lock(mutex)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # another test process still uses it
            if not os.path.exists(_OWNED_PATH):
                return  # it was on before these tools came: leave it on
            enabled = _run(["rabbitmq-plugins", "list", "-E", "-m"], timeout=60.0).split()
            if "rabbitmq_web_stomp" not in enabled:
                _run(["rabbitmq-plugins", "disable", "rabbitmq_stomp"])
            os.unlink(_OWNED_PATH)
        except BrokerStartError:
            pass  # it stays on; the next start reuses it
        finally:
            os.close(fd)
            os.close(mutex)

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
        out = _run(["rabbitmqctl", "eval",
                    "length([ok || Q <- rabbit_amqqueue:list(<<\"/\">>), "
                    "binary:longest_common_prefix([element(4, amqqueue:get_name(Q)), <<\"%s\">>]) == %d, "
                    "element(1, rabbit_amqqueue:delete(Q, false, false, <<\"amqstomp.testing\">>)) == ok])."
                    % (prefix, len(prefix.encode()))])
        return int(out.strip() or 0)

    def __enter__(self) -> "RabbitMQStomp":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ helpers

    @staticmethod
    def _lock(fd: int) -> None:
        deadline = time.monotonic() + TOOL_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise BrokerStartError("%s stayed locked for %.0f s (another test process enabling "
                                           "RabbitMQ's STOMP plugin?)" % (LOCK_PATH, TOOL_TIMEOUT_S)) from None
                time.sleep(0.2)

    def _listener(self) -> Optional[Tuple[str, int]]:
        """The STOMP listener the node runs now, or None (plugin off)."""
        out = _run(["rabbitmq-diagnostics", "-q", "listeners"], timeout=60.0)
        for host, port in _LISTENER.findall(out):
            return ("127.0.0.1" if host in ("::", "0.0.0.0", "[::]") else host.strip("[]"), int(port))
        return None

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
