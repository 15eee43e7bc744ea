"""Start a real ActiveMQ Classic broker for tests, and read its statistics.

:class:`ActiveMQBroker` runs Debian's ``activemq`` package (5.17.x, found in
``/usr/share/activemq`` or ``$AMQSTOMP_ACTIVEMQ_HOME``), or ActiveMQ 6.1's
all-in-one jar with ``distribution="6.1"`` (see :mod:`._distribution`), as the current user:
it writes ``conf/activemq.xml`` and a log4j configuration into a fresh
directory (a temporary one unless ``base_dir`` is given), then runs
``java -jar activemq.jar start xbean:file:...`` from there.  Only STOMP
connectors are opened (``stomp://``, optionally ``stomp+nio://`` and
``stomp+ssl://``; ``openwire=True`` adds ActiveMQ's own ``tcp://``, for a
Java JMS client), all bound to 127.0.0.1 on free ports; JMX and the web
console are off.  The broker's log goes to :attr:`ActiveMQBroker.log_path`, the
JVM's own output to :attr:`ActiveMQBroker.stdout_path`.

Units: ports are ints, timeouts and durations are seconds (float), except
``lock_acquire_sleep_ms`` (milliseconds, as ActiveMQ names it); sizes such as
``memory_limit`` and ``java_heap`` are strings in ActiveMQ's / the JVM's own
notation (``"1 mb"``, ``"512M"``).

Errors: :class:`BrokerNotAvailable` (a :class:`RuntimeError`) when ActiveMQ or
Java is not installed; :class:`BrokerStartError` (a :class:`RuntimeError`)
when a port it was given is held by another process, when the broker exits
during start-up or does not answer STOMP before the deadline -- its
``summary`` says why in a few lines, its message adds the tail of the
broker's log.

Ready means: this broker's own log (since this launch) says it started
(ActiveMQ's ``BrokerService`` logs that once every connector is bound), and
its STOMP port answers CONNECT (with CONNECTED, logging in with
:attr:`ActiveMQBroker.credentials` when it has ``users``; or with an ERROR
refusing the login when ``extra_xml`` turned authentication on). A port
answering alone proves nothing: another process may hold it.

:func:`queue_statistics`, :func:`topic_statistics` and
:func:`broker_statistics` query the broker's statistics plugin
(``statistics=True``) over a raw socket, independently of the amqstomp client,
and return the counters as a ``dict`` (ints for counters, floats for averages,
strings for names).

The package's other modules hold what this one uses: :mod:`._config` (the
XML and the command line), :mod:`._connectors` (ports and URLs), :mod:`._process` (ports, child processes),
:mod:`._stomp` (raw STOMP), :mod:`.statistics` (the statistics queries, also
importable from here).

Example::

    with ActiveMQBroker(persistent=True) as broker:
        ...  # connect to broker.host_and_ports
        assert queue_statistics(broker, "orders")["size"] == 0
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._config import (
    FAST_START_JVM_ARGS,
    JVM_FLAGS,
    SSL_KEYS,
    WS_NOT_AVAILABLE,
    find_java,
    java_command,
    render_activemq_xml,
    write_broker_dir,
    ws_transport_jars,
)
from ._connectors import Connectors
from ._distribution import activemq6_command, activemq6_home, activemq6_missing, check_distribution
from ._distribution import default_distribution
from ._process import die_with_parent, free_port, register, unregister
from ._startup import BrokerNotAvailable, BrokerStartError  # re-exported: importable from here, as before
from ._startup import failure_reason, file_size, log_tail, port_in_use, read_from, started_line
from ._stomp import encode_frame as _frame  # noqa: F401  (importable from here, as before)
from ._stomp import goodbye as _goodbye
from ._stomp import LoginRefused
from ._stomp import handshake as _stomp_handshake
from .statistics import Target, broker_statistics, queue_statistics, topic_statistics

__all__ = [
    "ACTIVEMQ_HOME",
    "NOT_FOUND_MESSAGE",
    "ActiveMQBroker",
    "BrokerNotAvailable",
    "BrokerStartError",
    "FAST_START_JVM_ARGS",
    "Target",
    "broker_statistics",
    "queue_statistics",
    "start_broker",
    "topic_statistics",
]

log = logging.getLogger("amqstomp.testing.broker")

#: Where Debian's package installs ActiveMQ (overridable by the environment).
ACTIVEMQ_HOME = os.environ.get("AMQSTOMP_ACTIVEMQ_HOME", "/usr/share/activemq")

NOT_FOUND_MESSAGE = (
    "ActiveMQ not found: install Debian's package with `apt-get install -y activemq`"
)


# --------------------------------------------------------------------------
# the broker

class ActiveMQBroker(Connectors):
    """A real ActiveMQ Classic broker in its own directory, as a child process.

    All keyword arguments are optional; see the module docstring for units.

    ``persistent``
        KahaDB store (in ``<dir>/data/kahadb`` unless ``kahadb_dir``).
    ``stomp_port``
        port of the ``stomp://`` connector; a free one when None.
    ``nio``
        also open ``stomp+nio://`` on :attr:`stomp_nio_port`.
    ``ssl``
        dict with ``keystore``, ``keystore_password`` and optionally
        ``truststore``, ``truststore_password``, ``need_client_auth`` (bool):
        also open ``stomp+ssl://`` on :attr:`stomp_ssl_port`.
    ``ws``
        also open ``ws://`` (STOMP over WebSocket) on :attr:`ws_port`
        (:attr:`ws_url`); needs ActiveMQ's activemq-http module, which
        Debian's package lacks: :class:`BrokerNotAvailable` then, saying so
        (:meth:`ws_available`).
    ``openwire``
        also open OpenWire (``tcp://``, ActiveMQ's Java client protocol) on
        :attr:`openwire_port` (:attr:`openwire_url`).
    ``memory_limit``
        broker memory usage limit, e.g. ``"1 mb"``.
    ``producer_flow_control``, ``max_page_size``, ``persist_jms_redelivered``
        policy for every queue and topic (``>``).
    ``send_fail_if_no_space``
        producers get an ERROR instead of blocking when memory is full.
    ``statistics``
        install the statistics plugin (see :func:`queue_statistics`).
    ``transformations``
        link XStream/Jettison into the broker's lib dir so that the STOMP
        ``transformation`` header works; defaults to ``statistics``.
    ``scheduler``
        ``schedulerSupport`` (``AMQ_SCHEDULED_DELAY`` headers).
    ``kahadb_dir``
        KahaDB directory (implies ``persistent``); give two brokers the same
        one for a shared-store master/slave pair.
    ``lock_acquire_sleep_ms``
        how often a slave retries the store lock (ActiveMQ default 10000).
    ``allow_link_stealing``
        a new connection with a used client-id replaces the old one.
    ``users``
        ``{login: password}``: ActiveMQ's ``simpleAuthenticationPlugin``
        with these users (anonymous access off); the first one is
        :attr:`credentials`, used by readiness checks and statistics.
    ``extra_xml``
        inserted verbatim inside ``<broker>``.
    ``broker_name``, ``base_dir`` (kept after stop), ``startup_timeout`` (s),
    ``java_heap`` (``-Xmx``), ``jvm_args`` (extra JVM flags), ``keep`` (do
    not delete the directory on stop), ``activemq_home``, ``java``.
    ``distribution``
        ``"5.17"`` (Debian's) or ``"6.1"`` (the jmspy wheel's jar, in
        ``activemq_home`` or :func:`~amqstomp.testing._distribution.activemq6_home`);
        None: ``$AMQSTOMP_ACTIVEMQ_DISTRIBUTION``, else ``"5.17"``.
        :class:`ValueError` for another name.
    """

    def __init__(
        self,
        *,
        persistent: bool = False,
        stomp_port: Optional[int] = None,
        nio: bool = False,
        ssl: Optional[Dict[str, Any]] = None,
        ws: bool = False,
        openwire: bool = False,
        memory_limit: Optional[str] = None,
        producer_flow_control: bool = True,
        send_fail_if_no_space: bool = False,
        statistics: bool = True,
        transformations: Optional[bool] = None,
        scheduler: bool = False,
        kahadb_dir: Optional[str] = None,
        lock_acquire_sleep_ms: Optional[int] = None,
        persist_jms_redelivered: bool = False,
        allow_link_stealing: bool = False,
        users: Optional[Dict[str, str]] = None,
        max_page_size: Optional[int] = None,
        extra_xml: str = "",
        broker_name: str = "amqstomp-test",
        base_dir: Optional[str] = None,
        startup_timeout: float = 60.0,
        java_heap: str = "512M",
        jvm_args: Sequence[str] = (),
        keep: bool = False,
        activemq_home: Optional[str] = None,
        java: Optional[str] = None,
        distribution: Optional[str] = None,
    ) -> None:
        #: "5.17" or "6.1" (see :mod:`amqstomp.testing._distribution`)
        self.distribution = check_distribution(distribution) if distribution else default_distribution()
        if ssl is not None:
            unknown = set(ssl) - SSL_KEYS
            if unknown:
                raise ValueError(f"unknown ssl keys {sorted(unknown)}; known: {sorted(SSL_KEYS)}")
            if not ssl.get("keystore"):
                raise ValueError("ssl needs at least 'keystore' (and 'keystore_password')")
        if users is not None and (not isinstance(users, dict) or not users or not all(
                isinstance(k, str) and k and isinstance(v, str) for k, v in users.items())):
            raise ValueError(f"users must be a non-empty dict of login -> password (str), got {users!r}")
        self.users = dict(users) if users else None
        self.persistent = bool(persistent or kahadb_dir is not None)
        self._auto_ports = stomp_port is None
        self.stomp_port: int = stomp_port if stomp_port is not None else free_port()
        self.nio = nio
        self.stomp_nio_port: Optional[int] = free_port() if nio else None
        self.ssl = dict(ssl) if ssl is not None else None
        self.stomp_ssl_port: Optional[int] = free_port() if ssl is not None else None
        self.ws_port: Optional[int] = free_port() if ws else None
        self.openwire_port: Optional[int] = free_port() if openwire else None
        self.memory_limit = memory_limit
        self.producer_flow_control = producer_flow_control
        self.send_fail_if_no_space = send_fail_if_no_space
        self.statistics = statistics
        self.transformations = statistics if transformations is None else transformations
        self.scheduler = scheduler
        self.kahadb_dir = os.path.abspath(kahadb_dir) if kahadb_dir else None
        self.lock_acquire_sleep_ms = lock_acquire_sleep_ms
        self.persist_jms_redelivered = persist_jms_redelivered
        self.allow_link_stealing = allow_link_stealing
        self.max_page_size = max_page_size
        self.extra_xml = extra_xml
        self.broker_name = broker_name
        self.startup_timeout = startup_timeout
        self.java_heap = java_heap
        self.jvm_args = list(jvm_args)
        self.keep = keep
        self.activemq_home = activemq_home or (activemq6_home() if self.distribution == "6.1" else ACTIVEMQ_HOME)
        self.java = java
        self._base_dir_arg = os.path.abspath(base_dir) if base_dir else None
        self._dir: Optional[str] = None
        self._owns_dir = False
        self._proc: "Optional[subprocess.Popen[bytes]]" = None
        self._lock = threading.RLock()
        #: seconds from launching java to the first STOMP CONNECTED (last start)
        self.startup_seconds: Optional[float] = None
        self.returncode: Optional[int] = None
        self._started_at = 0.0
        # sizes of the log and the JVM output at the last launch: what follows is this run's
        self._log_offset = 0
        self._out_offset = 0

    # ---------------------------------------------------------------- info
    @classmethod
    def _find_java(cls, java: Optional[str] = None) -> Optional[str]:
        return find_java(java)

    @classmethod
    def available(cls, activemq_home: Optional[str] = None, distribution: Optional[str] = None) -> bool:
        """True when ActiveMQ (of ``distribution``, default as in the constructor) and a ``java`` are installed."""
        try:
            cls.require(activemq_home, distribution)
        except BrokerNotAvailable:
            return False
        return True

    @classmethod
    def require(cls, activemq_home: Optional[str] = None, distribution: Optional[str] = None) -> None:
        """Raise :class:`BrokerNotAvailable` with a clear message unless :meth:`available`."""
        home = activemq_home or ACTIVEMQ_HOME
        if (check_distribution(distribution) if distribution else default_distribution()) == "6.1":
            missing = activemq6_missing(activemq_home)
            if missing:
                raise BrokerNotAvailable(missing)
        elif not os.path.isfile(os.path.join(home, "bin", "activemq.jar")):
            raise BrokerNotAvailable(f"{NOT_FOUND_MESSAGE} (looked in {home})")
        if not cls._find_java():
            raise BrokerNotAvailable(
                "Java not found (needed by ActiveMQ): install it with "
                "`apt-get install -y default-jre-headless` or set JAVA_HOME"
            )

    @classmethod
    def ws_available(cls, activemq_home: Optional[str] = None) -> Optional[str]:
        """None when this ActiveMQ can open ``ws://`` connectors, else why not."""
        home = activemq_home or ACTIVEMQ_HOME
        return None if ws_transport_jars(home) else WS_NOT_AVAILABLE.format(home=home)

    @property
    def credentials(self) -> Optional[Tuple[str, str]]:
        """``(login, password)`` of the first of ``users``, or None (no authentication)."""
        if not self.users:
            return None
        return next(iter(self.users.items()))

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """The java process is alive (a waiting slave is running but not ready)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def base_dir(self) -> Optional[str]:
        """The broker's directory (conf/, data/, lib/), or None before start."""
        return self._dir or self._base_dir_arg

    @property
    def log_path(self) -> Optional[str]:
        """The broker's log file (``<dir>/data/activemq.log``)."""
        d = self.base_dir
        return os.path.join(d, "data", "activemq.log") if d else None

    @property
    def stdout_path(self) -> Optional[str]:
        """The JVM's stdout and stderr (``<dir>/broker.out``)."""
        d = self.base_dir
        return os.path.join(d, "broker.out") if d else None

    @property
    def config_path(self) -> Optional[str]:
        d = self.base_dir
        return os.path.join(d, "conf", "activemq.xml") if d else None

    def log_tail(self, lines: int = 40) -> str:
        """The broker log's ERROR lines and root causes, then the last
        ``lines`` lines of the broker log and of the JVM output (without what
        the log holds already: the JVM repeats the broker's stack trace)."""
        return log_tail(self.log_path, self.stdout_path, lines)

    def start_failure_reason(self) -> List[str]:
        """Why the last launch failed, in at most three lines (see
        :func:`amqstomp.testing._startup.failure_reason`)."""
        return failure_reason(read_from(self.log_path, self._log_offset),
                              read_from(self.stdout_path, self._out_offset))

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<ActiveMQBroker {self.broker_name} {self.url} pid={self.pid} {state}>"

    # ---------------------------------------------------------------- config
    def render_config(self) -> str:
        """The ``activemq.xml`` this broker runs with (needs :attr:`base_dir`):
        :meth:`start` writes what this method returns, so a subclass may
        override it to change the XML (call ``super().render_config()`` and
        edit it); for an addition inside ``<broker>``, ``extra_xml=`` is enough.

        Returns:
            str: the XML text.
        """
        d = self.base_dir
        assert d is not None
        return render_activemq_xml(self, d)

    def _prepare_dir(self) -> str:
        if self._dir is None:
            if self._base_dir_arg:
                os.makedirs(self._base_dir_arg, exist_ok=True)
                self._dir, self._owns_dir = self._base_dir_arg, False
            else:
                self._dir = tempfile.mkdtemp(prefix="amqstomp-broker-")
                self._owns_dir = True
        write_broker_dir(self, self._dir, self.render_config())  # a subclass's render_config() counts
        return self._dir

    def command(self) -> List[str]:
        """The java command line (needs :attr:`base_dir`); raises
        :class:`BrokerNotAvailable` when no ``java`` is found."""
        d = self.base_dir
        assert d is not None
        java = self._find_java(self.java)
        if java is None:
            raise BrokerNotAvailable("Java not found (needed by ActiveMQ)")
        if self.distribution == "6.1":
            return activemq6_command(java, d, self.activemq_home, self.java_heap, JVM_FLAGS, self.jvm_args)
        return java_command(java, d, self.activemq_home, self.java_heap, self.jvm_args)

    # ---------------------------------------------------------------- life cycle
    def start(self, wait: bool = True, timeout: Optional[float] = None) -> "ActiveMQBroker":
        """Launch the broker; with ``wait``, return once it answers STOMP.

        ``timeout`` defaults to ``startup_timeout``.  Use ``wait=False`` for
        the slave of a shared store, then :meth:`wait_ready`.  Raises
        :class:`BrokerNotAvailable` or :class:`BrokerStartError` (a given
        port held by another process; the broker is stopped again before it
        is raised).
        """
        with self._lock:
            if self.running:
                raise RuntimeError(f"{self!r} is already running")
            self.require(self.activemq_home, self.distribution)
            if self.ws_port and not ws_transport_jars(self.activemq_home, self.base_dir):
                raise BrokerNotAvailable(WS_NOT_AVAILABLE.format(home=self.activemq_home))
            attempts = 3 if self._auto_ports else 1
            for attempt in range(attempts):
                self._check_ports()
                self._launch()
                if not wait:
                    return self
                try:
                    self.wait_ready(timeout)
                    return self
                except BrokerStartError as exc:
                    port_clash = "Address already in use" in str(exc)
                    self._terminate(timeout=10.0)
                    if port_clash and attempt + 1 < attempts:
                        log.warning("port clash starting %s; retrying on new ports", self.broker_name)
                        self._new_ports()
                        continue
                    self._proc = None
                    self._cleanup()
                    raise
            raise AssertionError("unreachable")  # pragma: no cover

    def _check_ports(self) -> None:
        """New free ports for a broker that chose its own while one is taken
        now; :class:`BrokerStartError` for a port the caller gave."""
        for _ in range(10):
            held = [port for port in self._ports() if port_in_use(self.host, port)]
            if not held:
                return
            if not self._auto_ports:
                raise BrokerStartError(
                    f"ActiveMQ {self.broker_name} not started: port {held[0]} on {self.host} is in use by "
                    "another process (choose another port, or stop that process)")
            self._new_ports()
        raise BrokerStartError(f"ActiveMQ {self.broker_name} not started: no free ports on {self.host}")

    def _launch(self) -> None:
        d = self._prepare_dir()
        cmd = self.command()
        self._log_offset = file_size(self.log_path)
        self._out_offset = file_size(self.stdout_path)
        log.info("starting ActiveMQ %s on %s in %s", self.broker_name, self.url, d)
        log.debug("command: %s", " ".join(cmd))
        preexec = die_with_parent if threading.current_thread() is threading.main_thread() else None
        with open(os.path.join(d, "broker.out"), "ab") as out:
            self._proc = subprocess.Popen(
                cmd,
                cwd=d,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,
                close_fds=True,
            )
        self._started_at = time.monotonic()
        self.returncode = None
        self.startup_seconds = None
        register(self)

    def ping(self, timeout: float = 2.0) -> bool:
        """True if the STOMP port answers CONNECT with CONNECTED now (logging
        in with :attr:`credentials` when the broker has ``users``). Says
        nothing about whose listener answered: see :meth:`wait_ready`."""
        return self._probe(timeout) == "CONNECTED"

    def _probe(self, timeout: float) -> Optional[str]:
        """How the STOMP port answers CONNECT now: "CONNECTED", "ERROR" (a
        refused login: a broker whose ``extra_xml`` turns authentication on
        is up all the same) or None (no STOMP answer)."""
        login, passcode = self.credentials or (None, None)
        try:
            sock, _ = _stomp_handshake(self.host, self.stomp_port, timeout, login, passcode)
        except LoginRefused:
            return "ERROR"
        except (OSError, TimeoutError, ConnectionError):
            return None
        _goodbye(sock)
        return "CONNECTED"

    def wait_ready(self, timeout: Optional[float] = None) -> "ActiveMQBroker":
        """Wait until this broker's log (since its launch) says it started and
        its STOMP port answers CONNECT (CONNECTED, or an ERROR refusing the
        login of a broker with authentication); :class:`BrokerStartError` if it
        exits first or ``timeout`` (default ``startup_timeout``) seconds pass."""
        timeout = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            proc = self._proc
            if proc is None:
                raise BrokerStartError(f"{self.broker_name} was not started")
            rc = proc.poll()
            if rc is not None:
                self.returncode = rc
                reason = "".join("\n  " + line for line in self.start_failure_reason())
                raise BrokerStartError(
                    f"ActiveMQ {self.broker_name} exited with status {rc} during start-up{reason}",
                    self.log_tail())
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                started = started_line(read_from(self.log_path, self._log_offset), self.broker_name)
                what = "did not answer STOMP" if started else "did not log that it started"
                raise BrokerStartError(
                    f"ActiveMQ {self.broker_name} {what} on {self.url} within {timeout:.1f} s",
                    self.log_tail())
            ours = started_line(read_from(self.log_path, self._log_offset), self.broker_name) is not None
            if ours and self._probe(timeout=min(2.0, max(0.1, remaining))) is not None:
                if self.startup_seconds is None:
                    self.startup_seconds = time.monotonic() - self._started_at
                    log.info("ActiveMQ %s ready in %.2f s", self.broker_name, self.startup_seconds)
                return self
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _terminate(self, timeout: float) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGCONT)  # in case it was suspended
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("ActiveMQ %s ignored SIGTERM for %.0f s; killing", self.broker_name, timeout)
                proc.kill()
                proc.wait()
            except ProcessLookupError:
                proc.wait()
        self.returncode = proc.returncode
        unregister(self)

    def _cleanup(self) -> None:
        if self._dir and self._owns_dir and not self.keep:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL; delete the
        temporary directory unless ``keep`` (a given ``base_dir`` is kept)."""
        with self._lock:
            self._terminate(timeout)
            if self._proc is not None:
                log.info("ActiveMQ %s stopped (status %s)", self.broker_name, self.returncode)
            self._proc = None
            self._cleanup()

    close = stop

    def restart(self, wait: bool = True, timeout: Optional[float] = None) -> "ActiveMQBroker":
        """Stop the process (keeping its directory, store and ports) and start again."""
        with self._lock:
            self._terminate(30.0)
            self._proc = None
            return self.start(wait=wait, timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the broker (a crash, for failover tests); the directory stays
        until :meth:`stop`."""
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
                self.returncode = proc.returncode
                log.info("ActiveMQ %s killed", self.broker_name)
            unregister(self)

    def suspend(self) -> None:
        """SIGSTOP the broker: it keeps its sockets but stops answering."""
        if self.running:
            os.kill(self._proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]

    def resume(self) -> None:
        """SIGCONT after :meth:`suspend`."""
        if self.running:
            os.kill(self._proc.pid, signal.SIGCONT)  # type: ignore[union-attr]

    def __enter__(self) -> "ActiveMQBroker":
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_broker(*, wait: bool = True, **options: Any) -> ActiveMQBroker:
    """An :class:`ActiveMQBroker` made with ``options`` and started; with
    ``wait=False`` it returns once the process is launched (a shared-store
    slave), else once it answers STOMP. The caller stops it. Raises what
    :meth:`ActiveMQBroker.start` raises."""
    broker = ActiveMQBroker(**options)
    broker.start(wait=wait)
    return broker
