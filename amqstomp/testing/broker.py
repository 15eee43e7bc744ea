"""Start a real ActiveMQ Classic broker for tests, and read its statistics.

:class:`ActiveMQBroker` runs Debian's ``activemq`` package (5.17.x, found in
``/usr/share/activemq`` or ``$AMQSTOMP_ACTIVEMQ_HOME``) as the current user:
it writes ``conf/activemq.xml`` and a log4j configuration into a fresh
directory (a temporary one unless ``base_dir`` is given), then runs
``java -jar activemq.jar start xbean:file:...`` from there.  Only STOMP
connectors are opened (``stomp://``, optionally ``stomp+nio://`` and
``stomp+ssl://``), all bound to 127.0.0.1 on free ports; JMX and the web
console are off.  The broker's log goes to :attr:`ActiveMQBroker.log_path`, the
JVM's own output to :attr:`ActiveMQBroker.stdout_path`.

Units: ports are ints, timeouts and durations are seconds (float), except
``lock_acquire_sleep_ms`` (milliseconds, as ActiveMQ names it); sizes such as
``memory_limit`` and ``java_heap`` are strings in ActiveMQ's / the JVM's own
notation (``"1 mb"``, ``"512M"``).

Errors: :class:`BrokerNotAvailable` (a :class:`RuntimeError`) when ActiveMQ or
Java is not installed; :class:`BrokerStartError` (a :class:`RuntimeError`)
when the broker exits during start-up or does not answer STOMP before the
deadline -- its message ends with the tail of the broker's log.

:func:`queue_statistics`, :func:`topic_statistics` and
:func:`broker_statistics` query the broker's statistics plugin
(``statistics=True``) over a raw socket, independently of the amqstomp client,
and return the counters as a ``dict`` (ints for counters, floats for averages,
strings for names).

Example::

    with ActiveMQBroker(persistent=True) as broker:
        ...  # connect to broker.host_and_ports
        assert queue_statistics(broker, "orders")["size"] == 0
"""
from __future__ import annotations

import atexit
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union
from xml.sax.saxutils import quoteattr

__all__ = [
    "ACTIVEMQ_HOME",
    "NOT_FOUND_MESSAGE",
    "ActiveMQBroker",
    "BrokerNotAvailable",
    "BrokerStartError",
    "FAST_START_JVM_ARGS",
    "broker_statistics",
    "queue_statistics",
    "topic_statistics",
]

log = logging.getLogger("amqstomp.testing")

#: Where Debian's package installs ActiveMQ (overridable by the environment).
ACTIVEMQ_HOME = os.environ.get("AMQSTOMP_ACTIVEMQ_HOME", "/usr/share/activemq")

NOT_FOUND_MESSAGE = (
    "ActiveMQ not found: install Debian's package with `apt-get install -y activemq`"
)

# Debian's broker lacks XStream; with these on the class path the STOMP
# `transformation` header (jms-map-xml, jms-object-json, ...) works.
_JAVA_SHARE = "/usr/share/java"
_TRANSFORMATION_JARS = ("xstream.jar", "jettison.jar", "xpp3.jar", "xmlpull.jar", "mxparser.jar")

# The module flags Debian's /usr/bin/activemq passes to Java 9 and later.
_JVM_MODULE_FLAGS = (
    "--add-reads=java.xml=java.logging",
    "--add-opens", "java.base/java.security=ALL-UNNAMED",
    "--add-opens", "java.base/java.net=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.naming/javax.naming.spi=ALL-UNNAMED",
    "--add-opens", "java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.http=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.https=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.jar=ALL-UNNAMED",
    "--add-exports=jdk.xml.dom/org.w3c.dom.html=ALL-UNNAMED",
    "--add-exports=jdk.naming.rmi/com.sun.jndi.url.rmi=ALL-UNNAMED",
)

# JVM flags for a small test broker.  Measured on 2 CPUs (ActiveMQ 5.17.2,
# Java 17): start-up to the first CONNECTED is about 1.0 s with G1 or Serial
# GC; SerialGC gave the best STOMP throughput (about 80k sends/s and 120k
# deliveries/s from one raw-socket client against G1's 50k/80k).
_STARTUP_FLAGS = ("-XX:+UseSerialGC", "-Djava.awt.headless=true")

#: Extra ``jvm_args`` that cut start-up by about 0.2 s (to about 0.8 s) at the
#: price of 20-45 % less broker throughput (C1 compiler only).
FAST_START_JVM_ARGS = ("-XX:TieredStopAtLevel=1",)

_SSL_KEYS = frozenset(
    {"keystore", "keystore_password", "truststore", "truststore_password", "need_client_auth"}
)

_LOG4J_PROPERTIES = """\
# Written by amqstomp.testing: broker log to a file in the broker directory.
log4j.rootLogger=INFO, file
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.logger.org.apache.activemq.spring=WARN
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${activemq.data}/activemq.log
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=%d | %-5p | %m | %c | %t%n
"""

# Used instead when the installation logs through log4j 2.
_LOG4J2_PROPERTIES = """\
# Written by amqstomp.testing: broker log to a file in the broker directory.
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=File
logger.spring.name=org.springframework
logger.spring.level=WARN
logger.xbean.name=org.apache.xbean
logger.xbean.level=WARN
appender.file.type=File
appender.file.name=File
appender.file.fileName=${sys:activemq.data}/activemq.log
appender.file.append=true
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=%d | %-5p | %m | %c | %t%n%throwable
"""


class BrokerNotAvailable(RuntimeError):
    """ActiveMQ (or Java) is not installed on this machine."""


class BrokerStartError(RuntimeError):
    """The broker exited during start-up or did not answer STOMP in time."""


# --------------------------------------------------------------------------
# process bookkeeping

_LIVE: "weakref.WeakSet[ActiveMQBroker]" = weakref.WeakSet()
_RESERVED_PORTS: Set[int] = set()
_PORT_LOCK = threading.Lock()

try:
    _LIBC: Optional[Any] = ctypes.CDLL(None, use_errno=True)
    getattr(_LIBC, "prctl")  # Linux only: AttributeError elsewhere
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@atexit.register
def _stop_leftovers() -> None:
    for broker in list(_LIVE):
        try:
            broker.stop(timeout=10.0)
        except Exception:  # pragma: no cover - best effort at interpreter exit
            log.exception("could not stop %r at exit", broker)


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and not handed out before."""
    with _PORT_LOCK:
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port: int = s.getsockname()[1]
            if port not in _RESERVED_PORTS:
                _RESERVED_PORTS.add(port)
                return port
    raise RuntimeError("no free TCP port on 127.0.0.1")


def _tail(path: Optional[str], lines: int = 40) -> str:
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 262144))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace").splitlines()[-lines:]
    return "\n".join(text)


# --------------------------------------------------------------------------
# minimal STOMP over a raw socket (kept independent of the amqstomp client)

def _frame(command: str, headers: Dict[str, str], body: bytes = b"") -> bytes:
    head = "".join(f"{k}:{v}\n" for k, v in headers.items())
    return f"{command}\n{head}\n".encode("utf-8") + body + b"\x00"


_TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


class _FrameReader:
    """Reads STOMP frames from a blocking socket against a deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.buf = b""

    def _fill(self) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline passed")
        self.sock.settimeout(remaining)
        if _TCP_QUICKACK is not None:
            # ack at once, so the broker's Nagle does not hold its next frame
            self.sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError("deadline passed") from None
        if not data:
            raise ConnectionError("broker closed the connection")
        self.buf += data

    def read(self) -> Tuple[str, Dict[str, str], bytes]:
        while True:
            self.buf = self.buf.lstrip(b"\r\n")  # heart-beats
            end = self.buf.find(b"\n\n")
            if end < 0:
                self._fill()
                continue
            head = self.buf[:end].decode("utf-8", "replace").replace("\r", "").split("\n")
            headers: Dict[str, str] = {}
            for line in head[1:]:
                key, _, value = line.partition(":")
                headers.setdefault(key, value)
            start = end + 2
            if "content-length" in headers:
                stop = start + int(headers["content-length"])
                while len(self.buf) < stop + 1:
                    self._fill()
            else:
                while True:
                    stop = self.buf.find(b"\x00", start)
                    if stop >= 0:
                        break
                    self._fill()
            body = self.buf[start:stop]
            self.buf = self.buf[stop + 1:]
            return head[0], headers, body


def _stomp_handshake(host: str, port: int, timeout: float) -> Tuple[socket.socket, _FrameReader]:
    deadline = time.monotonic() + timeout
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(_frame("CONNECT", {"accept-version": "1.2", "host": "localhost"}))
        reader = _FrameReader(sock, deadline)
        command, headers, body = reader.read()
        if command != "CONNECTED":
            raise ConnectionError(
                f"broker answered CONNECT with {command}: {headers.get('message', '')} "
                f"{body.decode('utf-8', 'replace')}".strip()
            )
        return sock, reader
    except BaseException:
        sock.close()
        raise


def _goodbye(sock: socket.socket) -> None:
    try:
        sock.sendall(_frame("DISCONNECT", {}))
    except OSError:
        pass
    finally:
        sock.close()


# --------------------------------------------------------------------------
# the broker

class ActiveMQBroker:
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
    ``extra_xml``
        inserted verbatim inside ``<broker>``.
    ``broker_name``, ``base_dir`` (kept after stop), ``startup_timeout`` (s),
    ``java_heap`` (``-Xmx``), ``jvm_args`` (extra JVM flags), ``keep`` (do
    not delete the directory on stop), ``activemq_home``, ``java``.
    """

    host = "127.0.0.1"

    def __init__(
        self,
        *,
        persistent: bool = False,
        stomp_port: Optional[int] = None,
        nio: bool = False,
        ssl: Optional[Dict[str, Any]] = None,
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
    ) -> None:
        if ssl is not None:
            unknown = set(ssl) - _SSL_KEYS
            if unknown:
                raise ValueError(f"unknown ssl keys {sorted(unknown)}; known: {sorted(_SSL_KEYS)}")
            if not ssl.get("keystore"):
                raise ValueError("ssl needs at least 'keystore' (and 'keystore_password')")
        self.persistent = bool(persistent or kahadb_dir is not None)
        self._auto_ports = stomp_port is None
        self.stomp_port: int = stomp_port if stomp_port is not None else _free_port()
        self.nio = nio
        self.stomp_nio_port: Optional[int] = _free_port() if nio else None
        self.ssl = dict(ssl) if ssl is not None else None
        self.stomp_ssl_port: Optional[int] = _free_port() if ssl is not None else None
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
        self.activemq_home = activemq_home or ACTIVEMQ_HOME
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

    # ---------------------------------------------------------------- info
    @classmethod
    def _find_java(cls, java: Optional[str] = None) -> Optional[str]:
        if java:
            return java if os.access(java, os.X_OK) else shutil.which(java)
        home = os.environ.get("JAVA_HOME")
        if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
            return os.path.join(home, "bin", "java")
        return shutil.which("java")

    @classmethod
    def available(cls, activemq_home: Optional[str] = None) -> bool:
        """True when ActiveMQ's launcher jar and a ``java`` are installed."""
        home = activemq_home or ACTIVEMQ_HOME
        return os.path.isfile(os.path.join(home, "bin", "activemq.jar")) and bool(cls._find_java())

    @classmethod
    def require(cls, activemq_home: Optional[str] = None) -> None:
        """Raise :class:`BrokerNotAvailable` with a clear message unless :meth:`available`."""
        home = activemq_home or ACTIVEMQ_HOME
        if not os.path.isfile(os.path.join(home, "bin", "activemq.jar")):
            raise BrokerNotAvailable(f"{NOT_FOUND_MESSAGE} (looked in {home})")
        if not cls._find_java():
            raise BrokerNotAvailable(
                "Java not found (needed by ActiveMQ): install it with "
                "`apt-get install -y default-jre-headless` or set JAVA_HOME"
            )

    @property
    def url(self) -> str:
        """``stomp://127.0.0.1:PORT`` of the plain STOMP connector."""
        return f"stomp://{self.host}:{self.stomp_port}"

    @property
    def nio_url(self) -> Optional[str]:
        return f"stomp+nio://{self.host}:{self.stomp_nio_port}" if self.stomp_nio_port else None

    @property
    def ssl_url(self) -> Optional[str]:
        return f"stomp+ssl://{self.host}:{self.stomp_ssl_port}" if self.stomp_ssl_port else None

    @property
    def host_and_ports(self) -> List[Tuple[str, int]]:
        """``[("127.0.0.1", stomp_port)]``, as stomp.py's ``Connection`` takes it."""
        return [(self.host, self.stomp_port)]

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
        ``lines`` lines of the broker log and of the JVM output."""
        parts = []
        highlights = [
            line for line in _tail(self.log_path, 2000).splitlines()
            if "| ERROR |" in line or line.startswith("Caused by:")
        ]
        if highlights:
            parts.append("--- errors in activemq.log ---\n" + "\n".join(highlights[-10:]))
        for label, path in (("activemq.log", self.log_path), ("broker.out", self.stdout_path)):
            text = _tail(path, lines)
            if text:
                parts.append(f"--- {label} ({path}) ---\n{text}")
        return "\n".join(parts) or "(no broker output)"

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<ActiveMQBroker {self.broker_name} {self.url} pid={self.pid} {state}>"

    # ---------------------------------------------------------------- config
    def render_config(self) -> str:
        """The ``activemq.xml`` this broker runs with (needs :attr:`base_dir`)."""
        d = self.base_dir
        assert d is not None
        data_dir = os.path.join(d, "data")
        q = quoteattr
        broker_attrs = {
            "brokerName": self.broker_name,
            "useJmx": "false",
            "persistent": "true" if self.persistent else "false",
            "dataDirectory": data_dir,
            "tmpDataDirectory": os.path.join(data_dir, "tmp_storage"),
            "schedulerSupport": "true" if self.scheduler else "false",
            "schedulerDirectory": os.path.join(data_dir, "scheduler"),
            "useShutdownHook": "true",
        }
        out = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            "<!-- Written by amqstomp.testing.ActiveMQBroker -->",
            '<beans xmlns="http://www.springframework.org/schema/beans"',
            '       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"',
            '       xsi:schemaLocation="http://www.springframework.org/schema/beans'
            " http://www.springframework.org/schema/beans/spring-beans.xsd"
            " http://activemq.apache.org/schema/core"
            ' http://activemq.apache.org/schema/core/activemq-core.xsd">',
            '  <broker xmlns="http://activemq.apache.org/schema/core"',
        ]
        out += [f"          {k}={q(v)}" for k, v in broker_attrs.items()]
        out[-1] += ">"

        queue_policy = {"queue": ">", "producerFlowControl": _xbool(self.producer_flow_control)}
        topic_policy = {"topic": ">", "producerFlowControl": _xbool(self.producer_flow_control)}
        if self.persist_jms_redelivered:
            queue_policy["persistJMSRedelivered"] = "true"
        if self.max_page_size is not None:
            queue_policy["maxPageSize"] = str(int(self.max_page_size))
            topic_policy["maxPageSize"] = str(int(self.max_page_size))
        out.append("    <destinationPolicy><policyMap><policyEntries>")
        for policy in (queue_policy, topic_policy):
            attrs = " ".join(f"{k}={q(v)}" for k, v in policy.items())
            out.append(f"      <policyEntry {attrs}/>")
        out.append("    </policyEntries></policyMap></destinationPolicy>")

        if self.persistent:
            kaha = self.kahadb_dir or os.path.join(data_dir, "kahadb")
            out.append(f"    <persistenceAdapter><kahaDB directory={q(kaha)}>")
            if self.lock_acquire_sleep_ms is not None:
                out.append(
                    "      <locker><shared-file-locker lockAcquireSleepInterval="
                    f"{q(str(int(self.lock_acquire_sleep_ms)))}/></locker>"
                )
            out.append("    </kahaDB></persistenceAdapter>")

        if self.memory_limit is not None or self.send_fail_if_no_space:
            out.append(
                f"    <systemUsage><systemUsage sendFailIfNoSpace={q(_xbool(self.send_fail_if_no_space))}>"
            )
            if self.memory_limit is not None:
                out.append(
                    f"      <memoryUsage><memoryUsage limit={q(self.memory_limit)}/></memoryUsage>"
                )
            out.append("    </systemUsage></systemUsage>")

        if self.statistics:
            out.append("    <plugins><statisticsBrokerPlugin/></plugins>")

        if self.ssl is not None:
            ssl_attrs = {
                "keyStore": _file_url(self.ssl["keystore"]),
                "keyStorePassword": self.ssl.get("keystore_password", ""),
            }
            if self.ssl.get("truststore"):
                ssl_attrs["trustStore"] = _file_url(self.ssl["truststore"])
                ssl_attrs["trustStorePassword"] = self.ssl.get("truststore_password", "")
            attrs = " ".join(f"{k}={q(v)}" for k, v in ssl_attrs.items())
            out.append(f"    <sslContext><sslContext {attrs}/></sslContext>")

        link = ' allowLinkStealing="true"' if self.allow_link_stealing else ""
        out.append("    <transportConnectors>")
        out.append(
            f'      <transportConnector name="stomp" uri={q(f"stomp://{self.host}:{self.stomp_port}")}{link}/>'
        )
        if self.stomp_nio_port:
            out.append(
                '      <transportConnector name="stomp+nio" '
                f'uri={q(f"stomp+nio://{self.host}:{self.stomp_nio_port}")}{link}/>'
            )
        if self.stomp_ssl_port and self.ssl is not None:
            query = "?needClientAuth=true" if self.ssl.get("need_client_auth") else ""
            out.append(
                '      <transportConnector name="stomp+ssl" '
                f'uri={q(f"stomp+ssl://{self.host}:{self.stomp_ssl_port}{query}")}{link}/>'
            )
        out.append("    </transportConnectors>")
        if self.extra_xml:
            out.append(self.extra_xml)
        out.append("  </broker>")
        out.append("</beans>")
        return "\n".join(out) + "\n"

    def _prepare_dir(self) -> str:
        if self._dir is None:
            if self._base_dir_arg:
                os.makedirs(self._base_dir_arg, exist_ok=True)
                self._dir, self._owns_dir = self._base_dir_arg, False
            else:
                self._dir = tempfile.mkdtemp(prefix="amqstomp-broker-")
                self._owns_dir = True
        d = self._dir
        for sub in ("conf", "data", "lib", "tmp"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        with open(os.path.join(d, "conf", "activemq.xml"), "w", encoding="utf-8") as f:
            f.write(self.render_config())
        with open(os.path.join(d, "conf", "log4j.properties"), "w", encoding="utf-8") as f:
            f.write(_LOG4J_PROPERTIES)
        with open(os.path.join(d, "conf", "log4j2.properties"), "w", encoding="utf-8") as f:
            f.write(_LOG4J2_PROPERTIES)
        if self.transformations:
            for jar in _TRANSFORMATION_JARS:
                src = os.path.join(_JAVA_SHARE, jar)
                dst = os.path.join(d, "lib", jar)
                if os.path.exists(src) and not os.path.lexists(dst):
                    os.symlink(src, dst)
        return d

    def command(self) -> List[str]:
        """The java command line (needs :attr:`base_dir`)."""
        d = self.base_dir
        assert d is not None
        java = self._find_java(self.java)
        if java is None:
            raise BrokerNotAvailable("Java not found (needed by ActiveMQ)")
        conf = os.path.join(d, "conf")
        return [
            java,
            f"-Xmx{self.java_heap}",
            *_STARTUP_FLAGS,
            *_JVM_MODULE_FLAGS,
            *self.jvm_args,
            f"-Djava.io.tmpdir={os.path.join(d, 'tmp')}",
            f"-Dactivemq.classpath={conf}",
            f"-Dactivemq.home={self.activemq_home}",
            f"-Dactivemq.base={d}",
            f"-Dactivemq.conf={conf}",
            f"-Dactivemq.data={os.path.join(d, 'data')}",
            "-jar",
            os.path.join(self.activemq_home, "bin", "activemq.jar"),
            "start",
            f"xbean:file:{os.path.join(conf, 'activemq.xml')}",
        ]

    # ---------------------------------------------------------------- life cycle
    def start(self, wait: bool = True, timeout: Optional[float] = None) -> "ActiveMQBroker":
        """Launch the broker; with ``wait``, return once it answers STOMP.

        ``timeout`` defaults to ``startup_timeout``.  Use ``wait=False`` for
        the slave of a shared store, then :meth:`wait_ready`.  Raises
        :class:`BrokerNotAvailable` or :class:`BrokerStartError` (the broker
        is stopped again before the latter is raised).
        """
        with self._lock:
            if self.running:
                raise RuntimeError(f"{self!r} is already running")
            self.require(self.activemq_home)
            attempts = 3 if self._auto_ports else 1
            for attempt in range(attempts):
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
                        self.stomp_port = _free_port()
                        if self.stomp_nio_port:
                            self.stomp_nio_port = _free_port()
                        if self.stomp_ssl_port:
                            self.stomp_ssl_port = _free_port()
                        continue
                    self._proc = None
                    self._cleanup()
                    raise
            raise AssertionError("unreachable")  # pragma: no cover

    def _launch(self) -> None:
        d = self._prepare_dir()
        cmd = self.command()
        log.info("starting ActiveMQ %s on %s in %s", self.broker_name, self.url, d)
        log.debug("command: %s", " ".join(cmd))
        preexec = _die_with_parent if threading.current_thread() is threading.main_thread() else None
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
        _LIVE.add(self)

    def ping(self, timeout: float = 2.0) -> bool:
        """True if the STOMP port answers CONNECT with CONNECTED now."""
        try:
            sock, _ = _stomp_handshake(self.host, self.stomp_port, timeout)
        except (OSError, TimeoutError, ConnectionError):
            return False
        _goodbye(sock)
        return True

    def wait_ready(self, timeout: Optional[float] = None) -> "ActiveMQBroker":
        """Wait until the broker answers STOMP; :class:`BrokerStartError` if it
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
                raise BrokerStartError(
                    f"ActiveMQ {self.broker_name} exited with status {rc} during start-up\n"
                    + self.log_tail()
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrokerStartError(
                    f"ActiveMQ {self.broker_name} did not answer STOMP on {self.url} "
                    f"within {timeout:.1f} s\n" + self.log_tail()
                )
            if self.ping(timeout=min(2.0, max(0.1, remaining))):
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
        _LIVE.discard(self)

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
            _LIVE.discard(self)

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


def _xbool(value: bool) -> str:
    return "true" if value else "false"


def _file_url(path: str) -> str:
    return "file:" + os.path.abspath(path)


# --------------------------------------------------------------------------
# statistics plugin

Target = Union[ActiveMQBroker, Tuple[str, int], str, Any]


def _resolve(target: Target) -> Tuple[str, int]:
    if isinstance(target, ActiveMQBroker):
        return target.host, target.stomp_port
    if isinstance(target, tuple) and len(target) == 2:
        return str(target[0]), int(target[1])
    if isinstance(target, str):
        rest = target.split("://", 1)[-1]
        host, _, port = rest.rstrip("/").rpartition(":")
        return host or "127.0.0.1", int(port)
    hp = getattr(target, "host_and_ports", None)
    if hp:
        return str(hp[0][0]), int(hp[0][1])
    raise TypeError(f"cannot find a STOMP host and port in {target!r}")


def _parse_map(body: bytes) -> Dict[str, Any]:
    """Parse XStream's ``jms-map-xml`` rendering of a MapMessage."""
    result: Dict[str, Any] = {}
    root = ET.fromstring(body.decode("utf-8"))
    for entry in root.findall("entry"):
        children = list(entry)
        if len(children) != 2:
            continue
        key = children[0].text or ""
        value_el = children[1]
        text = value_el.text or ""
        tag = value_el.tag
        value: Any
        if tag in ("long", "int", "short", "byte"):
            value = int(text)
        elif tag in ("double", "float"):
            value = float(text)
        elif tag == "boolean":
            value = text == "true"
        elif tag == "null":
            value = None
        else:
            value = text
        result[key] = value
    return result


def _statistics_request(
    target: Target, request_destination: str, timeout: float, until_empty: bool
) -> List[Dict[str, Any]]:
    host, port = _resolve(target)
    deadline = time.monotonic() + timeout
    try:
        sock, reader = _stomp_handshake(host, port, timeout)
    except TimeoutError:
        raise TimeoutError(f"no CONNECTED from {host}:{port} within {timeout} s") from None
    reader.deadline = deadline
    replies: List[Dict[str, Any]] = []
    try:
        reply_to = f"/temp-queue/amqstomp.stats.{uuid.uuid4().hex}"
        subscribe = _frame("SUBSCRIBE", {
            "id": "stats", "destination": reply_to, "ack": "auto",
            "transformation": "jms-map-xml",
        })
        headers = {"destination": request_destination, "reply-to": reply_to}
        if until_empty:
            headers["ActiveMQ.Statistics.Destination.List.End.With.Null"] = "true"
        sock.sendall(subscribe + _frame("SEND", headers))
        while True:
            try:
                command, hdrs, body = reader.read()
            except TimeoutError:
                raise TimeoutError(
                    f"no statistics reply for {request_destination} from {host}:{port} "
                    f"within {timeout} s (is the broker's statistics plugin on?)"
                ) from None
            except ConnectionError as exc:
                # ActiveMQ drops the connection when it cannot render the
                # reply as jms-map-xml: XStream is not on its class path.
                raise ConnectionError(
                    f"{host}:{port} closed the connection instead of answering "
                    f"{request_destination} ({exc}); start the broker with "
                    "statistics=True (or transformations=True) so XStream is linked"
                ) from None
            if command == "ERROR":
                raise RuntimeError(
                    f"broker answered {request_destination} with ERROR: "
                    f"{hdrs.get('message', '')} {body.decode('utf-8', 'replace')}".strip()
                )
            if command != "MESSAGE":
                continue
            stats = _parse_map(body) if body.strip() else {}
            if not stats:
                break  # the empty end-of-list message
            replies.append(stats)
            if not until_empty:
                break
    finally:
        _goodbye(sock)
    return replies


def _destination_statistics(target: Target, kind: str, name: str, timeout: float) -> Dict[str, Any]:
    prefix = f"/{kind}/"
    if name.startswith(prefix):
        name = name[len(prefix):]
    request = f"/{kind}/ActiveMQ.Statistics.Destination.{name}"
    for stats in _statistics_request(target, request, timeout, until_empty=True):
        if stats.get("destinationName") == f"{kind}://{name}":
            return stats
    raise LookupError(f"the broker has no {kind} named {name!r}")


def queue_statistics(target: Target, queue_name: str, timeout: float = 10.0) -> Dict[str, Any]:
    """The broker's counters for one queue, from the statistics plugin.

    ``target`` is an :class:`ActiveMQBroker`, a ``(host, port)`` tuple, a
    ``"host:port"`` / ``"stomp://host:port"`` string, or anything with
    ``host_and_ports``.  ``queue_name`` may carry a ``/queue/`` prefix.
    Returns e.g. ``{"enqueueCount": 5, "dequeueCount": 0, "inflightCount": 0,
    "size": 5, "consumerCount": 0, "producerCount": 0, "expiredCount": 0,
    "dispatchCount": 0, "averageEnqueueTime": 0.0, "destinationName":
    "queue://name", ...}`` (counters int, averages float, names str).

    Raises :class:`LookupError` if the queue does not exist (yet),
    :class:`TimeoutError` if no answer comes within ``timeout`` seconds
    (statistics plugin off), :class:`ConnectionError` if the broker drops
    the connection (XStream missing: ``transformations=False``) and
    :class:`OSError` if the broker is unreachable.
    Messages sent without a receipt may not be counted yet.
    """
    return _destination_statistics(target, "queue", queue_name, timeout)


def topic_statistics(target: Target, topic_name: str, timeout: float = 10.0) -> Dict[str, Any]:
    """Like :func:`queue_statistics`, for a topic (``/topic/`` prefix optional)."""
    return _destination_statistics(target, "topic", topic_name, timeout)


def broker_statistics(target: Target, timeout: float = 10.0) -> Dict[str, Any]:
    """Broker-wide counters (``enqueueCount``, ``consumerCount``,
    ``storePercentUsage``, ``brokerName``, ...) from the statistics plugin."""
    replies = _statistics_request(target, "/queue/ActiveMQ.Statistics.Broker", timeout, until_empty=False)
    return replies[0]
