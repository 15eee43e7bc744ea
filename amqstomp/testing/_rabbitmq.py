"""The machine's RabbitMQ node and its plugins, shared by the test helpers:
:class:`RabbitMQPlugins`, the base of :class:`~amqstomp.testing.rabbitmq.RabbitMQStomp`
(``rabbitmq_stomp``) and :class:`~amqstomp.testing.web_stomp.RabbitMQWebStomp`
(``rabbitmq_web_stomp``, which runs on ``rabbitmq_stomp``).

RabbitMQ itself is the machine's (``rabbitmq-server``, as Debian's package runs it; amqstomp's
CI starts it with ``rabbitmq-server -detached`` when it is not running); its plugins are off until
asked for. Its tools talk to the node through Erlang distribution: they need the node's cookie
(root has it on Debian). Every tool call is bounded (:data:`TOOL_TIMEOUT_S`, :data:`EVAL_TIMEOUT_S`)
and fails with :class:`~amqstomp.testing.broker.BrokerStartError` naming the command and its output.

One plugin, many users. Every user of a plugin (a helper object, in any test process of this
machine) holds a shared ``flock`` on the plugin's users file (:func:`users_path`) while it uses it;
turning a plugin on or off happens under the exclusive :data:`LOCK_PATH`. A plugin that was off is
configured first (its listener on 127.0.0.1: ``rabbitmqctl eval 'application:set_env(...)'``), then
enabled (``rabbitmq-plugins enable``), and marked as turned on by these tools (:func:`owned_path`);
the last user out (it gets the users file exclusively) disables a plugin so marked, unless a plugin
that needs it is still enabled (``rabbitmq-plugins disable rabbitmq_stomp`` would take
``rabbitmq_web_stomp`` with it). A plugin that was on before is used as it is and left on. A
helper that needs two plugins holds both (web-STOMP holds ``rabbitmq_stomp`` too), so the STOMP
tests and the WebSocket tests run in one session in any order, and in two test processes at once.
After a crash the mark stays: the next run's last user turns the plugin off.

Errors: :class:`RabbitMQNotAvailable` (a :class:`~amqstomp.testing.broker.BrokerNotAvailable`)
when RabbitMQ is not installed or its node does not answer (:meth:`RabbitMQPlugins.available` says
why); :class:`~amqstomp.testing.broker.BrokerStartError` when a step fails or a listener does not
answer in time.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import socket
import subprocess
import time
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar

from ._process import free_port
from ._startup import BrokerNotAvailable, BrokerStartError

__all__ = ["EVAL_TIMEOUT_S", "LOCK_PATH", "STOMP", "TOOL_TIMEOUT_S", "WEB_STOMP", "RabbitMQNotAvailable",
           "RabbitMQPlugins", "owned_path", "rabbitmq_eval", "run_tool", "users_path"]

STOMP = "rabbitmq_stomp"
WEB_STOMP = "rabbitmq_web_stomp"
#: Held (exclusively) while a test process turns a plugin on or off.
LOCK_PATH = "/tmp/amqstomp-rabbitmq-stomp.lock"
#: Seconds one ``rabbitmq-plugins`` call may take (enabling takes ~10 s, more on a loaded machine);
#: also how long :data:`LOCK_PATH` is waited for.
TOOL_TIMEOUT_S = 120.0
#: Seconds one ``rabbitmqctl eval`` may take.
EVAL_TIMEOUT_S = 60.0
#: The plugins that need another one: ``rabbitmq-plugins disable`` takes them along.
_DEPENDENTS: Dict[str, Tuple[str, ...]] = {STOMP: (WEB_STOMP,)}
_FILE_NAMES = {STOMP: "stomp", WEB_STOMP: "web-stomp"}
_ADDRESS = re.compile(r'\{"([^"]+)",\s*(\d+)\}')
_Self = TypeVar("_Self", bound="RabbitMQPlugins")


class RabbitMQNotAvailable(BrokerNotAvailable):
    """RabbitMQ (its ``rabbitmqctl`` / ``rabbitmq-plugins``, or a running node) is not there."""


def users_path(plugin: str) -> str:
    """The file every user of ``plugin`` holds a shared lock on."""
    return "/tmp/amqstomp-rabbitmq-%s.users" % _FILE_NAMES.get(plugin, plugin)


def owned_path(plugin: str) -> str:
    """The file that says these tools turned ``plugin`` on (the last user turns it off)."""
    return "/tmp/amqstomp-rabbitmq-%s.enabled-here" % _FILE_NAMES.get(plugin, plugin)


def run_tool(args: Sequence[str], timeout: float = TOOL_TIMEOUT_S) -> str:
    """Run a RabbitMQ tool (``timeout`` in seconds): its output.

    Raises:
        BrokerStartError: it did not finish in time, or exited non-zero (with its output).
    """
    try:
        proc = subprocess.run(list(args), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BrokerStartError("%s did not finish within %.0f s" % (" ".join(args), timeout)) from None
    except OSError as exc:
        raise BrokerStartError("%s could not run: %s" % (" ".join(args), exc)) from None
    if proc.returncode != 0:
        raise BrokerStartError("%s failed (exit %d): %s" % (" ".join(args), proc.returncode,
                                                             (proc.stdout + proc.stderr).strip()[-800:]))
    return proc.stdout


def rabbitmq_eval(expr: str, timeout: float = EVAL_TIMEOUT_S) -> str:
    """``rabbitmqctl -q eval EXPR`` on the node: the printed result, stripped."""
    return run_tool(["rabbitmqctl", "-q", "eval", expr], timeout).strip()


class RabbitMQPlugins:
    """The base of the RabbitMQ test helpers: the node's plugins, used by reference (see the
    module docstring). :meth:`start` runs the subclass's ``_start``, which calls :meth:`_use`
    for each plugin it needs; :meth:`stop` calls :meth:`_release`. A context manager.

    Attributes:
        host (str): ``127.0.0.1``; every listener turned on here binds to it.
        vhost (str): ``/``. Credentials: ``guest``/``guest`` (RabbitMQ lets that user in
            from loopback only).
    """

    host = "127.0.0.1"
    vhost = "/"

    def __init__(self) -> None:
        #: (plugin, fd of its users file), in the order taken
        self._uses: List[Tuple[str, int]] = []
        #: the plugins this object turned on (``rabbitmq_stomp``, ``rabbitmq_web_stomp``)
        self.enabled_plugins: List[str] = []

    # ------------------------------------------------------------ is RabbitMQ there

    @staticmethod
    def available() -> Optional[str]:
        """None when RabbitMQ's tools are installed and its node answers, else why not
        (what to do, too)."""
        for tool in ("rabbitmqctl", "rabbitmq-plugins"):
            if shutil.which(tool) is None:
                return "RabbitMQ is not installed (%s not found): apt-get install -y rabbitmq-server" % tool
        try:
            rabbitmq_eval("ok.")
        except BrokerStartError as exc:
            return ("RabbitMQ is not running or its tools cannot reach it (start it with "
                    "`rabbitmq-server -detached`; the tools need the node's Erlang cookie): %s" % exc)
        return None

    @classmethod
    def require(cls) -> None:
        """Raise :class:`RabbitMQNotAvailable`, saying why and what to do, unless
        :meth:`available`."""
        why = cls.available()
        if why is not None:
            raise RabbitMQNotAvailable(why)

    # ------------------------------------------------------------ the node

    @staticmethod
    def app_running(app: str) -> bool:
        """The Erlang application (a plugin's name) runs on the node now."""
        return rabbitmq_eval("lists:keymember(%s, 1, application:which_applications())." % app) == "true"

    @staticmethod
    def set_env(app: str, key: str, value: str) -> None:
        """``application:set_env(app, key, VALUE, [{persistent, true}])`` (``value`` is an
        Erlang term): a plugin's listener, set before it is enabled."""
        out = rabbitmq_eval("application:set_env(%s, %s, %s, [{persistent, true}])." % (app, key, value))
        if out != "ok":
            raise BrokerStartError("application:set_env(%s, %s, ...) answered %s" % (app, key, out))

    @staticmethod
    def get_env(app: str, key: str) -> str:
        """``application:get_env(app, key)`` as the node prints it (``undefined`` or ``{ok,...}``)."""
        return rabbitmq_eval("application:get_env(%s, %s)." % (app, key))

    @property
    def stomp_host_and_port(self) -> Tuple[str, int]:
        """Where the plain-TCP STOMP listener (``rabbitmq_stomp``) is now: the first of
        its TCP listeners.

        Raises:
            BrokerStartError: it has none (the plugin is off).
        """
        found = self.stomp_listener()
        if found is None:
            raise BrokerStartError("rabbitmq_stomp has no TCP listener (is the plugin on?)")
        return found

    @classmethod
    def stomp_listener(cls) -> Optional[Tuple[str, int]]:
        """Where ``rabbitmq_stomp`` listens now (the first of its TCP listeners), or None
        (the plugin is off)."""
        out = rabbitmq_eval("[{inet:ntoa(IP), Port} || {listener, _, stomp, _, IP, Port, _} "
                            "<- rabbit_networking:active_listeners()].")
        for host, port in _ADDRESS.findall(out):
            return (cls.host if host in ("::", "0.0.0.0") else host, int(port))
        return None

    @staticmethod
    def stop_leftover_listeners(protocols: Iterable[str], ports: Iterable[int]) -> None:
        """Stop the listeners of these rabbit_networking ``protocols`` (``'http/web-stomp'``...)
        on these ``ports`` and forget them: RabbitMQ 3.10's web-STOMP plugin leaves its listeners
        running (and serving) and listed after it is disabled."""
        port_list = ",".join(str(int(p)) for p in ports)
        protocol_list = ",".join("'%s'" % p for p in protocols)
        if not port_list or not protocol_list:
            return
        rabbitmq_eval("[ranch:stop_listener(R) || {R, #{port := P}} <- maps:to_list(ranch:info()), "
                      "lists:member(P, [%s])], "
                      "[rabbit_networking:tcp_listener_stopped(Proto, Opts, IP, P) || "
                      "{listener, _, Proto, _, IP, P, Opts} <- rabbit_networking:node_listeners(node()), "
                      "lists:member(Proto, [%s]), lists:member(P, [%s])], ok." % (port_list, protocol_list, port_list))

    @staticmethod
    def enabled_explicitly() -> List[str]:
        """The plugins ``rabbitmq-plugins`` lists as enabled explicitly."""
        return run_tool(["rabbitmq-plugins", "list", "-E", "-m"], EVAL_TIMEOUT_S).split()

    # ------------------------------------------------------------ use by reference

    @staticmethod
    @contextlib.contextmanager
    def _transition() -> Iterator[None]:
        """:data:`LOCK_PATH`, exclusively (waited for up to :data:`TOOL_TIMEOUT_S`)."""
        fd = os.open(LOCK_PATH, os.O_CREAT | os.O_RDWR, 0o666)
        try:
            deadline = time.monotonic() + TOOL_TIMEOUT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise BrokerStartError("%s stayed locked for %.0f s (another test process turning a "
                                               "RabbitMQ plugin on or off?)" % (LOCK_PATH, TOOL_TIMEOUT_S)) from None
                    time.sleep(0.2)
            yield
        finally:
            os.close(fd)

    def _use(self, plugin: str, configure: Callable[[], str]) -> bool:
        """Use ``plugin`` until :meth:`_release`: turned on when it is off, after
        ``configure()`` has set its listener (what it returns, a note of what it set up, is
        kept in the plugin's mark for whoever turns it off). True when this call turned it on."""
        fd = os.open(users_path(plugin), os.O_CREAT | os.O_RDWR, 0o666)
        try:
            with self._transition():
                enabled = False
                if not self.app_running(plugin):
                    note = configure()
                    run_tool(["rabbitmq-plugins", "enable", plugin])
                    with open(owned_path(plugin), "w") as fh:
                        fh.write("%d\n%s" % (os.getpid(), note))
                    enabled = True
                fcntl.flock(fd, fcntl.LOCK_SH)  # in use: the last user out turns it off
        except BaseException:
            os.close(fd)
            raise
        self._uses.append((plugin, fd))
        if enabled:
            self.enabled_plugins.append(plugin)
        return enabled

    def _use_stomp(self, port: int = 0) -> bool:
        """:meth:`_use` ``rabbitmq_stomp``, turned on (when off) with its TCP listener on
        127.0.0.1:``port`` (a free one when 0)."""
        def configure() -> str:
            self.set_env(STOMP, "tcp_listeners", '[{"127.0.0.1", %d}]' % (port or free_port()))
            return ""

        return self._use(STOMP, configure)

    def _release(self, after_disable: Optional[Callable[[str, str], None]] = None) -> None:
        """Stop using every plugin :meth:`_use` took (the last taken first); disable each one
        these tools turned on that nobody else uses, then call ``after_disable(plugin, note)``
        (``note``: what its ``configure`` returned). A tool that fails leaves the plugin on
        and marked (the next run's last user turns it off)."""
        while self._uses:
            plugin, fd = self._uses.pop()
            try:
                with self._transition():
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        continue  # another user still has it
                    try:
                        with open(owned_path(plugin)) as fh:
                            note = fh.read().partition("\n")[2]
                    except FileNotFoundError:
                        continue  # it was on before these tools came: leave it on
                    if any(p in self.enabled_explicitly() for p in _DEPENDENTS.get(plugin, ())):
                        continue  # disabling it would take them along; the mark stays
                    run_tool(["rabbitmq-plugins", "disable", plugin])
                    os.unlink(owned_path(plugin))
                    if after_disable is not None:
                        after_disable(plugin, note)
            except BrokerStartError:
                pass  # it stays on; the next run's last user turns it off
            finally:
                os.close(fd)

    # ------------------------------------------------------------ waiting

    def _wait_accepting(self, ports: Sequence[int], timeout: float, what: str) -> None:
        """Wait (``timeout`` seconds in all) until each port of 127.0.0.1 accepts a connection.

        Raises:
            BrokerStartError: one did not, naming ``what`` and the last error.
        """
        deadline = time.monotonic() + timeout
        for port in ports:
            while True:
                try:
                    socket.create_connection((self.host, port), 1.0).close()
                    break
                except OSError as exc:
                    if time.monotonic() >= deadline:
                        raise BrokerStartError("%s does not accept on %s:%d within %.0f s: %s"
                                               % (what, self.host, port, timeout, exc)) from None
                    time.sleep(0.1)

    # ------------------------------------------------------------ start / stop

    def start(self: _Self) -> _Self:
        """Use the plugins the helper needs (turned on when off) and wait until they answer;
        on failure, stop using them again.

        Raises:
            RabbitMQNotAvailable: RabbitMQ is not there (:meth:`require`).
            BrokerStartError: a tool failed, or a listener did not answer in time.
        """
        self.require()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        raise NotImplementedError  # the helper's own steps

    def stop(self) -> None:
        """Stop using the plugins; the last user turns off those these tools turned on."""
        self._release()

    def __enter__(self: _Self) -> _Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
