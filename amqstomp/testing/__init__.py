"""Test helpers for amqstomp: a real ActiveMQ Classic broker on demand.

:class:`ActiveMQBroker` (:mod:`amqstomp.testing.broker`) starts Debian's
ActiveMQ 5.17, or ActiveMQ 6.1.7 (``distribution="6.1"`` or
``$AMQSTOMP_ACTIVEMQ_DISTRIBUTION``; :mod:`amqstomp.testing._distribution`), as
the current user in a temporary directory, with STOMP connectors bound to
127.0.0.1 only, and stops it again.
:func:`queue_statistics` (:mod:`amqstomp.testing.statistics`) asks a running
broker (statistics plugin enabled) for a queue's counters over a raw socket.
:class:`MasterSlavePair` (:mod:`amqstomp.testing.master_slave`) runs two
brokers on one KahaDB store for failover tests: kill the master with kill -9,
wait for the slave to take over, start the killed one again as the slave.
:class:`ActiveMQNetwork` (:mod:`amqstomp.testing.network`) bridges N brokers
(a static mesh or chain of ``networkConnector``) into a network of brokers.
The pytest fixtures that use them live in :mod:`amqstomp.testing.pytest_plugin`.
:class:`TcpProxy` (:mod:`amqstomp.testing.proxy`) is a loopback TCP proxy a test
puts between a client and a broker to cut, stall, half-close or refuse
connections.
:class:`RabbitMQStomp` (:mod:`amqstomp.testing.rabbitmq`) turns the machine's
RabbitMQ STOMP plugin on, on a free loopback port, for tests on a second broker;
:class:`RabbitMQWebStomp` (:mod:`amqstomp.testing.web_stomp`) its
STOMP-over-WebSocket plugin, for the tests of :class:`amqstomp.WSConnection`
(Debian's ActiveMQ has no ``ws://`` transport).
:class:`RabbitMQCluster` (:mod:`amqstomp.testing.rabbitmq_cluster`) runs a
cluster of the test's own RabbitMQ nodes (never the machine's), STOMP on each,
for quorum queues and node kills.

Modules, each importing only those before it: ``_stomp`` (raw STOMP),
``_process`` (ports, child processes), ``_startup`` (is a port free, has our
broker started, why not), ``_config`` (activemq.xml, java command line),
``_distribution`` (5.17 or 6.1: where, which command line), ``_connectors``
(connector URLs and ports), ``statistics``, ``broker``, ``master_slave``, ``network``, ``_rabbitmq`` (the machine's
RabbitMQ node and its plugins, used by reference), ``rabbitmq``, ``web_stomp``, ``rabbitmq_cluster``;
the proxy stands apart:
``_proxy_sockets`` (shared names, socket helpers), ``_proxy_pump`` (proxied
pairs, their bytes and faults), ``_proxy_control`` (commands to the proxy
thread), ``proxy`` (:class:`TcpProxy`); ``pytest_plugin`` uses ``broker`` and
``proxy``.

This package does not import the rest of amqstomp, so it can check the client
against the broker's own view.
"""
from .broker import (
    ACTIVEMQ_HOME,
    FAST_START_JVM_ARGS,
    NOT_FOUND_MESSAGE,
    ActiveMQBroker,
    BrokerNotAvailable,
    BrokerStartError,
    start_broker,
)
from .master_slave import (
    CONNECTOR_STARTED,
    SLAVE_WAITING,
    MasterSlavePair,
    broker_log,
    broker_log_size,
    disk_temp_dir,
    filesystem_type,
    log_line_time,
    wait_for_stomp,
    wait_slave_waiting,
)
from .network import ActiveMQNetwork
from .proxy import ProxyError, TcpProxy
from .rabbitmq import RabbitMQStomp
from .rabbitmq_cluster import RabbitMQCluster
from .statistics import broker_statistics, queue_statistics, topic_statistics
from .web_stomp import RabbitMQNotAvailable, RabbitMQWebStomp

__all__ = [
    "ACTIVEMQ_HOME",
    "CONNECTOR_STARTED",
    "FAST_START_JVM_ARGS",
    "NOT_FOUND_MESSAGE",
    "SLAVE_WAITING",
    "ActiveMQBroker",
    "ActiveMQNetwork",
    "BrokerNotAvailable",
    "BrokerStartError",
    "MasterSlavePair",
    "ProxyError",
    "RabbitMQCluster",
    "RabbitMQNotAvailable",
    "RabbitMQStomp",
    "RabbitMQWebStomp",
    "TcpProxy",
    "broker_log",
    "broker_log_size",
    "broker_statistics",
    "disk_temp_dir",
    "filesystem_type",
    "log_line_time",
    "queue_statistics",
    "start_broker",
    "topic_statistics",
    "wait_for_stomp",
    "wait_slave_waiting",
]
