"""Which ActiveMQ Classic a test broker runs: Debian's 5.17 or Apache's 6.1.

Two distributions are known (:data:`DISTRIBUTIONS`):

``"5.17"``
    Debian's ``activemq`` package (``/usr/share/activemq``, or
    ``$AMQSTOMP_ACTIVEMQ_HOME``), started through its ``bin/activemq.jar``
    launcher: what amqstomp.testing always ran.
``"6.1"``
    Apache ActiveMQ 6.1.7's ``activemq-all`` jar (jakarta JMS, Spring 6) with
    the log4j 2 jars next to it, from the ``jmspy`` wheel on PyPI, which ships
    them. ``bash scripts/activemq6.sh`` (run by ``scripts/setup.sh`` and
    ``scripts/test.sh``) downloads the wheel with pip, checks the jars'
    SHA-256 digests and extracts them into :func:`activemq6_home`: a cache
    directory outside the source tree. The broker runs as
    ``java -cp <jars> org.apache.activemq.console.Main start xbean:file:...``
    with Debian's commons-logging jar on the class path (Spring's XML
    loading of ``activemq.xml`` needs it; the all-in-one jar lacks it), Debian's
    activemq-jaas jar (``users=``: the authentication plugin's principal
    classes; the all-in-one jar lacks them too) and the broker directory's
    ``lib/*`` (XStream and friends for the STOMP ``transformation`` header:
    the all-in-one jar is on the JVM's class path, so jars in ``lib/`` reach
    its STOMP converter only through that path, not through ActiveMQ's own
    ``lib`` loader as with 5.17's launcher).

A broker's distribution is its ``distribution=`` keyword; None means
:func:`default_distribution`: ``$AMQSTOMP_ACTIVEMQ_DISTRIBUTION`` when set
(``5.17`` or ``6.1``), else ``"5.17"``. The pytest fixtures (``activemq``,
``activemq_factory``, the ActiveMQ run of ``stomp_broker``...) follow it, so a
whole test session runs on 6.1 with ``AMQSTOMP_ACTIVEMQ_DISTRIBUTION=6.1``.

Errors: :class:`ValueError` for an unknown distribution name (the keyword or
the environment variable).
"""
from __future__ import annotations

import os
from typing import List, Optional, Sequence

__all__ = [
    "ACTIVEMQ6_HOME_ENV",
    "ACTIVEMQ6_JARS",
    "ACTIVEMQ6_VERSION",
    "DEFAULT_DISTRIBUTION",
    "DISTRIBUTIONS",
    "DISTRIBUTION_ENV",
    "activemq6_command",
    "activemq6_home",
    "activemq6_missing",
    "check_distribution",
    "default_distribution",
]

#: The distributions :class:`~amqstomp.testing.broker.ActiveMQBroker` can run.
DISTRIBUTIONS = ("5.17", "6.1")
DEFAULT_DISTRIBUTION = "5.17"
#: Environment variable naming the distribution of brokers made without ``distribution=``.
DISTRIBUTION_ENV = "AMQSTOMP_ACTIVEMQ_DISTRIBUTION"
#: Environment variable overriding where the 6.1 jars are (:func:`activemq6_home`).
ACTIVEMQ6_HOME_ENV = "AMQSTOMP_ACTIVEMQ6_HOME"
ACTIVEMQ6_VERSION = "6.1.7"
#: The jars a 6.1 broker runs from (file name -> SHA-256), as the jmspy 0.1.1 wheel ships
#: them; scripts/activemq6.sh checks the same digests.
ACTIVEMQ6_JARS = {
    "activemq-all-6.1.7.jar": "6f009d96851bf73c8ec55285949d35f6fce544bc2770fd6fe0023180052efa2f",
    "log4j-api-2.25.0.jar": "0393e32167240eb56597a2016446928755729f1a181046cab5d42a81d0e3d909",
    "log4j-core-2.25.0.jar": "05d3eecb9e509fd47117c0fb43c7b4b2989b28ecd5543ad5feff2e4903d3c921",
}
#: Debian's libcommons-logging-java: Spring's XML bean loading logs through it.
COMMONS_LOGGING_JAR = "/usr/share/java/commons-logging.jar"
#: The activemq-jaas module, which 6.1.7's all-in-one jar leaves out though its
#: ``simpleAuthenticationPlugin`` needs its principal classes (GroupPrincipal):
#: Debian's 5.17.2 copy (package activemq), the same classes (used when present).
JAAS_JAR = "/usr/share/java/activemq-jaas.jar"

_INSTALL_HINT = (
    "run `bash scripts/activemq6.sh` in amqstomp's source tree (it downloads the jmspy wheel from PyPI with "
    "pip and extracts ActiveMQ {version}'s jars into {home}), or set {env} to a directory holding {jars}"
)


def check_distribution(name: str) -> str:
    """``name`` when it is one of :data:`DISTRIBUTIONS`, else :class:`ValueError`."""
    if name not in DISTRIBUTIONS:
        raise ValueError(f"unknown ActiveMQ distribution {name!r}; known: {', '.join(DISTRIBUTIONS)}")
    return name


def default_distribution() -> str:
    """``$AMQSTOMP_ACTIVEMQ_DISTRIBUTION`` when set and not empty, else ``"5.17"``;
    :class:`ValueError` when the variable names an unknown distribution."""
    value = os.environ.get(DISTRIBUTION_ENV, "").strip()
    if not value:
        return DEFAULT_DISTRIBUTION
    try:
        return check_distribution(value)
    except ValueError as exc:
        raise ValueError(f"{DISTRIBUTION_ENV}: {exc}") from None


def activemq6_home() -> str:
    """Where the 6.1 jars are: ``$AMQSTOMP_ACTIVEMQ6_HOME``, else
    ``$XDG_CACHE_HOME/amqstomp/activemq-6.1.7`` (``~/.cache/...`` without it),
    the directory scripts/activemq6.sh fills."""
    given = os.environ.get(ACTIVEMQ6_HOME_ENV)
    if given:
        return os.path.abspath(given)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "amqstomp", f"activemq-{ACTIVEMQ6_VERSION}")


def activemq6_missing(home: Optional[str] = None) -> Optional[str]:
    """None when ``home`` (default :func:`activemq6_home`) holds every jar of
    :data:`ACTIVEMQ6_JARS` and Debian's commons-logging jar is installed;
    else what is missing and how to get it (one sentence)."""
    home = home or activemq6_home()
    missing = [name for name in ACTIVEMQ6_JARS if not os.path.isfile(os.path.join(home, name))]
    if missing:
        return f"ActiveMQ {ACTIVEMQ6_VERSION} not found ({', '.join(missing)} missing in {home}): " + \
            _INSTALL_HINT.format(version=ACTIVEMQ6_VERSION, home=home, env=ACTIVEMQ6_HOME_ENV,
                                 jars=", ".join(ACTIVEMQ6_JARS))
    if not os.path.isfile(COMMONS_LOGGING_JAR):
        return (f"{COMMONS_LOGGING_JAR} not found (ActiveMQ {ACTIVEMQ6_VERSION} reads activemq.xml through "
                "Spring, which needs it): apt-get install -y libcommons-logging-java")
    return None


def activemq6_command(java: str, base_dir: str, home: str, java_heap: str,
                      flags: Sequence[str], jvm_args: Sequence[str]) -> List[str]:
    """The command line that starts ActiveMQ 6.1 from ``base_dir/conf/activemq.xml``
    with the jars in ``home``; ``flags`` are the JVM flags every test broker gets
    (GC, module opens), ``jvm_args`` the caller's. The broker logs through
    ``conf/log4j2.properties`` (the all-in-one jar's own log4j2.properties,
    console only, is not used)."""
    conf = os.path.join(base_dir, "conf")
    jars = [os.path.join(home, name) for name in ACTIVEMQ6_JARS] + [COMMONS_LOGGING_JAR]
    if os.path.isfile(JAAS_JAR):
        jars.append(JAAS_JAR)
    jars.append(os.path.join(base_dir, "lib", "*"))  # the JVM expands "dir/*" to the jars in dir
    return [
        java,
        f"-Xmx{java_heap}",
        *flags,
        *jvm_args,
        f"-Djava.io.tmpdir={os.path.join(base_dir, 'tmp')}",
        f"-Dlog4j2.configurationFile={os.path.join(conf, 'log4j2.properties')}",
        f"-Dactivemq.classpath={conf}",
        f"-Dactivemq.home={home}",
        f"-Dactivemq.base={base_dir}",
        f"-Dactivemq.conf={conf}",
        f"-Dactivemq.data={os.path.join(base_dir, 'data')}",
        "-cp",
        os.pathsep.join(jars),
        "org.apache.activemq.console.Main",
        "start",
        f"xbean:file:{os.path.join(conf, 'activemq.xml')}",
    ]
