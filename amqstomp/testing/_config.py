"""What a test broker runs with: its ``activemq.xml``, log configuration,
class-path links and java command line.

Everything here is pure text and file writing: :func:`render_activemq_xml`
turns a broker's settings (an :class:`~amqstomp.testing.broker.ActiveMQBroker`,
read through :class:`BrokerSettings`) into the Spring XML ActiveMQ reads,
:func:`write_broker_dir` lays out ``conf/``, ``data/``, ``lib/`` and ``tmp/``
in the broker's directory, :func:`java_command` builds the command line.
Every connector is bound to 127.0.0.1.
"""
from __future__ import annotations

import os
import shutil
from typing import Any, Dict, List, Optional, Protocol, Sequence
from xml.sax.saxutils import quoteattr

__all__ = [
    "FAST_START_JVM_ARGS",
    "JVM_FLAGS",
    "SSL_KEYS",
    "BrokerSettings",
    "find_java",
    "java_command",
    "render_activemq_xml",
    "write_broker_dir",
    "ws_transport_jars",
    "WS_NOT_AVAILABLE",
]

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

#: The JVM flags every test broker gets, whatever its distribution.
JVM_FLAGS = (*_STARTUP_FLAGS, *_JVM_MODULE_FLAGS)

#: Extra ``jvm_args`` that cut start-up by about 0.2 s (to about 0.8 s) at the
#: price of 20-45 % less broker throughput (C1 compiler only).
FAST_START_JVM_ARGS = ("-XX:TieredStopAtLevel=1",)

#: The keys an ``ssl`` settings dict may have.
SSL_KEYS = frozenset(
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


class BrokerSettings(Protocol):
    """The attributes of a broker that its configuration is made from (see
    :class:`~amqstomp.testing.broker.ActiveMQBroker` for their meaning)."""

    host: str
    broker_name: str
    persistent: bool
    scheduler: bool
    producer_flow_control: bool
    persist_jms_redelivered: bool
    max_page_size: Optional[int]
    kahadb_dir: Optional[str]
    lock_acquire_sleep_ms: Optional[int]
    memory_limit: Optional[str]
    send_fail_if_no_space: bool
    statistics: bool
    transformations: bool
    ssl: Optional[Dict[str, Any]]
    allow_link_stealing: bool
    users: Optional[Dict[str, str]]
    stomp_port: int
    stomp_nio_port: Optional[int]
    stomp_ssl_port: Optional[int]
    extra_xml: str
    # also read when present: ws_port (Optional[int], the ws:// connector),
    # openwire_port (Optional[int], the OpenWire tcp:// connector),
    # queue_policy (Dict[str, str], more attributes of the queue ">" policyEntry; they win),
    # queue_policy_xml (str, elements inside that policyEntry)


def _xbool(value: bool) -> str:
    return "true" if value else "false"


def _file_url(path: str) -> str:
    return "file:" + os.path.abspath(path)


def render_activemq_xml(b: BrokerSettings, base_dir: str) -> str:
    """The ``activemq.xml`` of broker ``b`` whose directory is ``base_dir``."""
    data_dir = os.path.join(base_dir, "data")
    q = quoteattr
    broker_attrs = {
        "brokerName": b.broker_name,
        "useJmx": "false",
        "persistent": _xbool(b.persistent),
        "dataDirectory": data_dir,
        "tmpDataDirectory": os.path.join(data_dir, "tmp_storage"),
        "schedulerSupport": _xbool(b.scheduler),
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

    queue_policy = {"queue": ">", "producerFlowControl": _xbool(b.producer_flow_control)}
    topic_policy = {"topic": ">", "producerFlowControl": _xbool(b.producer_flow_control)}
    if b.persist_jms_redelivered:
        queue_policy["persistJMSRedelivered"] = "true"
    if b.max_page_size is not None:
        queue_policy["maxPageSize"] = str(int(b.max_page_size))
        topic_policy["maxPageSize"] = str(int(b.max_page_size))
    queue_policy.update(getattr(b, "queue_policy", None) or {})
    out.append("    <destinationPolicy><policyMap><policyEntries>")
    for policy, inner in ((queue_policy, getattr(b, "queue_policy_xml", "")), (topic_policy, "")):
        attrs = " ".join(f"{k}={q(v)}" for k, v in policy.items())
        out.append(f"      <policyEntry {attrs}>{inner}</policyEntry>" if inner else f"      <policyEntry {attrs}/>")
    out.append("    </policyEntries></policyMap></destinationPolicy>")

    if b.persistent:
        kaha = b.kahadb_dir or os.path.join(data_dir, "kahadb")
        out.append(f"    <persistenceAdapter><kahaDB directory={q(kaha)}>")
        if b.lock_acquire_sleep_ms is not None:
            out.append(
                "      <locker><shared-file-locker lockAcquireSleepInterval="
                f"{q(str(int(b.lock_acquire_sleep_ms)))}/></locker>"
            )
        out.append("    </kahaDB></persistenceAdapter>")

    if b.memory_limit is not None or b.send_fail_if_no_space:
        out.append(
            f"    <systemUsage><systemUsage sendFailIfNoSpace={q(_xbool(b.send_fail_if_no_space))}>"
        )
        if b.memory_limit is not None:
            out.append(
                f"      <memoryUsage><memoryUsage limit={q(b.memory_limit)}/></memoryUsage>"
            )
        out.append("    </systemUsage></systemUsage>")

    plugins = []
    if b.statistics:
        plugins.append("<statisticsBrokerPlugin/>")
    if b.users:
        # ActiveMQ's SimpleAuthenticationPlugin: only these logins connect (any of them may do anything)
        entries = "".join(f"<authenticationUser username={q(name)} password={q(password)} groups=\"users\"/>"
                          for name, password in b.users.items())
        plugins.append(f'<simpleAuthenticationPlugin anonymousAccessAllowed="false"><users>{entries}</users>'
                       "</simpleAuthenticationPlugin>")
    if plugins:
        out.append("    <plugins>" + "".join(plugins) + "</plugins>")

    if b.ssl is not None:
        ssl_attrs = {
            "keyStore": _file_url(b.ssl["keystore"]),
            "keyStorePassword": b.ssl.get("keystore_password", ""),
        }
        if b.ssl.get("truststore"):
            ssl_attrs["trustStore"] = _file_url(b.ssl["truststore"])
            ssl_attrs["trustStorePassword"] = b.ssl.get("truststore_password", "")
        attrs = " ".join(f"{k}={q(v)}" for k, v in ssl_attrs.items())
        out.append(f"    <sslContext><sslContext {attrs}/></sslContext>")

    link = ' allowLinkStealing="true"' if b.allow_link_stealing else ""
    out.append("    <transportConnectors>")
    out.append(
        f'      <transportConnector name="stomp" uri={q(f"stomp://{b.host}:{b.stomp_port}")}{link}/>'
    )
    if b.stomp_nio_port:
        out.append(
            '      <transportConnector name="stomp+nio" '
            f'uri={q(f"stomp+nio://{b.host}:{b.stomp_nio_port}")}{link}/>'
        )
    if b.stomp_ssl_port and b.ssl is not None:
        query = "?needClientAuth=true" if b.ssl.get("need_client_auth") else ""
        out.append(
            '      <transportConnector name="stomp+ssl" '
            f'uri={q(f"stomp+ssl://{b.host}:{b.stomp_ssl_port}{query}")}{link}/>'
        )
    ws_port = getattr(b, "ws_port", None)
    if ws_port:
        out.append(f'      <transportConnector name="ws" uri={q(f"ws://{b.host}:{ws_port}")}{link}/>')
    openwire_port = getattr(b, "openwire_port", None)
    if openwire_port:
        out.append(f'      <transportConnector name="openwire" uri={q(f"tcp://{b.host}:{openwire_port}")}{link}/>')
    out.append("    </transportConnectors>")
    if b.extra_xml:
        out.append(b.extra_xml)
    out.append("  </broker>")
    out.append("</beans>")
    return "\n".join(out) + "\n"


def write_broker_dir(b: BrokerSettings, base_dir: str, activemq_xml: Optional[str] = None) -> None:
    """Create ``conf/``, ``data/``, ``lib/`` and ``tmp/`` in ``base_dir`` and
    write ``conf/activemq.xml`` (``activemq_xml``, or :func:`render_activemq_xml`
    of ``b`` when None) and the log4j (1 and 2) configurations; with
    ``b.transformations``, link XStream and friends into ``lib/``.
    Raises :class:`OSError` when the directory cannot be written."""
    for sub in ("conf", "data", "lib", "tmp"):
        os.makedirs(os.path.join(base_dir, sub), exist_ok=True)
    files = (
        ("activemq.xml", render_activemq_xml(b, base_dir) if activemq_xml is None else activemq_xml),
        ("log4j.properties", _LOG4J_PROPERTIES),
        ("log4j2.properties", _LOG4J2_PROPERTIES),
    )
    for name, text in files:
        with open(os.path.join(base_dir, "conf", name), "w", encoding="utf-8") as f:
            f.write(text)
    if b.transformations:
        for jar in _TRANSFORMATION_JARS:
            src = os.path.join(_JAVA_SHARE, jar)
            dst = os.path.join(base_dir, "lib", jar)
            if os.path.exists(src) and not os.path.lexists(dst):
                os.symlink(src, dst)


#: Why a broker cannot open a ``ws://`` connector (see :func:`ws_transport_jars`).
WS_NOT_AVAILABLE = (
    "this ActiveMQ ({home}) has no ws:// transport: no jar in its lib folders provides "
    "META-INF/services/org/apache/activemq/transport/ws (module activemq-http, with Jetty's WebSocket "
    "server); Debian's activemq 5.17 package does not ship activemq-http. Point AMQSTOMP_ACTIVEMQ_HOME at "
    "an Apache ActiveMQ distribution (its lib/optional and lib/web have them), or test STOMP over WebSocket "
    "against RabbitMQ's rabbitmq_web_stomp (amqstomp.testing.web_stomp)"
)

_WS_SERVICE = "META-INF/services/org/apache/activemq/transport/ws"
_LIB_DIRS = ("lib", "lib/optional", "lib/web", "lib/extra", "lib/camel")


def ws_transport_jars(activemq_home: str, base_dir: Optional[str] = None) -> List[str]:
    """The jars in ActiveMQ's class-path folders (``activemq_home``'s and
    ``base_dir``'s ``lib``, ``lib/optional``, ``lib/web``...) that provide the
    ``ws://`` transport (the ``ws`` transport factory of activemq-http); empty
    when there is none, e.g. in Debian's package."""
    import zipfile

    found = []
    roots = [activemq_home] + ([base_dir] if base_dir else [])
    for root in roots:
        for sub in _LIB_DIRS:
            folder = os.path.join(root, sub)
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                if not name.endswith(".jar"):
                    continue
                path = os.path.join(folder, name)
                try:
                    with zipfile.ZipFile(path) as jar:
                        if _WS_SERVICE in jar.namelist():
                            found.append(path)
                except (OSError, zipfile.BadZipFile):
                    continue
    return found


def find_java(java: Optional[str] = None) -> Optional[str]:
    """The ``java`` to run: the given path or name, else ``$JAVA_HOME/bin/java``,
    else the one on ``PATH``; None when there is none."""
    if java:
        return java if os.access(java, os.X_OK) else shutil.which(java)
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def java_command(
    java: str, base_dir: str, activemq_home: str, java_heap: str, jvm_args: Sequence[str]
) -> List[str]:
    """The command line that starts ActiveMQ from ``base_dir/conf/activemq.xml``
    (``java_heap`` in the JVM's ``-Xmx`` notation, e.g. ``"512M"``)."""
    conf = os.path.join(base_dir, "conf")
    return [
        java,
        f"-Xmx{java_heap}",
        *_STARTUP_FLAGS,
        *_JVM_MODULE_FLAGS,
        *jvm_args,
        f"-Djava.io.tmpdir={os.path.join(base_dir, 'tmp')}",
        f"-Dactivemq.classpath={conf}",
        f"-Dactivemq.home={activemq_home}",
        f"-Dactivemq.base={base_dir}",
        f"-Dactivemq.conf={conf}",
        f"-Dactivemq.data={os.path.join(base_dir, 'data')}",
        "-jar",
        os.path.join(activemq_home, "bin", "activemq.jar"),
        "start",
        f"xbean:file:{os.path.join(conf, 'activemq.xml')}",
    ]
