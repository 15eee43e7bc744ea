"""amqstomp.testing's two ActiveMQ Classic distributions: Debian's 5.17 and Apache's 6.1.7
(the activemq-all jar of the jmspy wheel, installed by scripts/activemq6.sh). How a broker
chooses (``distribution=``, ``$AMQSTOMP_ACTIVEMQ_DISTRIBUTION``), what it says when 6.1 is not
installed, the ``stomp_broker`` parameter ids of a 6.1 session, and a real 6.1 broker running
the configuration 5.17 runs (authentication plugin, statistics plugin through XStream).

The tests that start 6.1 skip, saying why, when its jars are not installed, unless
``AMQSTOMP_REQUIRE_ACTIVEMQ6=1`` (scripts/test.sh passes it on from .ci/run): then they fail.
"""
import os
import subprocess
import sys
import uuid

import pytest

import amqstomp
from amqstomp.exception import ConnectFailedException, StompException
from amqstomp.testing import ActiveMQBroker, BrokerNotAvailable, queue_statistics
from amqstomp.testing import _distribution
from amqstomp.testing._distribution import DISTRIBUTION_ENV, activemq6_missing

pytestmark = pytest.mark.timeout(120)

REQUIRE_ENV = "AMQSTOMP_REQUIRE_ACTIVEMQ6"


def need_activemq6():
    """Skip (fail with AMQSTOMP_REQUIRE_ACTIVEMQ6=1) unless the 6.1 jars are installed."""
    why = activemq6_missing()
    if why:
        if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
            pytest.fail("%s is set: %s" % (REQUIRE_ENV, why), pytrace=False)
        pytest.skip(why)


@pytest.mark.timeout(30)
def test_the_distribution_is_the_keyword_else_the_environment_else_5_17(monkeypatch):
    monkeypatch.delenv(DISTRIBUTION_ENV, raising=False)
    assert ActiveMQBroker().distribution == "5.17"
    assert ActiveMQBroker(distribution="6.1").distribution == "6.1"
    monkeypatch.setenv(DISTRIBUTION_ENV, "6.1")
    assert ActiveMQBroker().distribution == "6.1"
    assert ActiveMQBroker(distribution="5.17").distribution == "5.17"
    with pytest.raises(ValueError, match="unknown ActiveMQ distribution '6.0'; known: 5.17, 6.1"):
        ActiveMQBroker(distribution="6.0")
    monkeypatch.setenv(DISTRIBUTION_ENV, "six")
    with pytest.raises(ValueError, match=DISTRIBUTION_ENV):
        ActiveMQBroker()


@pytest.mark.timeout(30)
def test_a_6_1_broker_runs_the_all_in_one_jar_with_what_spring_and_the_plugins_need(monkeypatch, tmp_path):
    home = tmp_path / "amq6"
    monkeypatch.setenv(_distribution.ACTIVEMQ6_HOME_ENV, str(home))
    broker = ActiveMQBroker(distribution="6.1", base_dir=str(tmp_path / "b"))
    assert broker.activemq_home == str(home)
    cmd = broker.command()
    classpath = cmd[cmd.index("-cp") + 1].split(os.pathsep)
    assert classpath[:3] == [str(home / name) for name in _distribution.ACTIVEMQ6_JARS]
    assert _distribution.COMMONS_LOGGING_JAR in classpath
    assert classpath[-1] == str(tmp_path / "b" / "lib" / "*")  # XStream for transformations/statistics
    assert cmd[cmd.index("-cp") + 2:] == ["org.apache.activemq.console.Main", "start",
                                          "xbean:file:%s" % (tmp_path / "b" / "conf" / "activemq.xml")]
    assert "-Dlog4j2.configurationFile=%s" % (tmp_path / "b" / "conf" / "log4j2.properties") in cmd
    # 5.17 is started as before: Debian's launcher jar
    old = ActiveMQBroker(distribution="5.17", base_dir=str(tmp_path / "c"))
    assert old.command()[-3:-1] == [os.path.join(old.activemq_home, "bin", "activemq.jar"), "start"]


@pytest.mark.timeout(30)
def test_missing_6_1_jars_are_reported_with_what_to_run(monkeypatch, tmp_path):
    monkeypatch.setenv(_distribution.ACTIVEMQ6_HOME_ENV, str(tmp_path))
    assert not ActiveMQBroker.available(distribution="6.1")
    with pytest.raises(BrokerNotAvailable, match=r"activemq-all-6\.1\.7\.jar.*bash scripts/activemq6\.sh"):
        ActiveMQBroker.require(distribution="6.1")
    with pytest.raises(BrokerNotAvailable, match="scripts/activemq6.sh"):
        ActiveMQBroker(distribution="6.1").start()


@pytest.mark.timeout(60)
def test_a_6_1_session_names_the_activemq_run_activemq_6_1():
    code = "import amqstomp.testing.pytest_plugin as p; print(p.BROKER_NAMES)"
    for value, names in (("6.1", "('activemq-6.1', 'rabbitmq')"), ("", "('activemq', 'rabbitmq')")):
        env = dict(os.environ, **{DISTRIBUTION_ENV: value})
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=50)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == names


@pytest.mark.timeout(120)
def test_activemq_6_1_starts_and_answers_as_activemq_classic():
    """The 5.17 configuration on 6.1: the simple authentication plugin (needs the jaas classes)
    refuses a wrong password and takes a right one, the statistics plugin answers (XStream), the
    CONNECTED frame's unfiltered version is recognised as ActiveMQ Classic."""
    need_activemq6()
    queue = "/queue/amq61-%s" % uuid.uuid4().hex[:8]
    with ActiveMQBroker(distribution="6.1", users={"amq": "secret"}, statistics=True,
                        broker_name="amqstomp-61") as broker:
        with open(broker.log_path, encoding="utf-8") as f:
            assert "Apache ActiveMQ 6.1.7 (amqstomp-61," in f.read()
        wrong = amqstomp.Connection12(broker.host_and_ports, reconnect_attempts_max=1)
        with pytest.raises((ConnectFailedException, StompException)):
            wrong.connect("amq", "wrong", wait=True, timeout=10)
        wrong.disconnect()
        conn = amqstomp.Connection12(broker.host_and_ports)
        conn.connect("amq", "secret", wait=True, timeout=15)
        try:
            assert conn.transport.server == "ActiveMQ/${project.version}"
            assert conn.transport.dialect == "activemq"
            conn.send(queue, "one", receipt="sent")
            conn.wait_for_receipt("sent", 10)
        finally:
            conn.disconnect()
        assert queue_statistics(broker, queue.split("/", 2)[2])["size"] == 1
