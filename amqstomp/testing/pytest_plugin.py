"""pytest fixtures that run a real ActiveMQ broker (see :mod:`amqstomp.testing.broker`).

``activemq``
    session-scoped, non-persistent broker with the statistics plugin on.
``activemq_persistent``
    session-scoped, persistent (KahaDB) broker with the statistics plugin on.
``activemq_factory``
    function-scoped factory: ``activemq_factory(**options)`` starts an
    :class:`~amqstomp.testing.broker.ActiveMQBroker` with those options (pass
    ``wait=False`` to return before it answers, e.g. for a shared-store slave)
    and stops every broker it made at teardown.
``rabbitmq_web_stomp``
    session-scoped :class:`~amqstomp.testing.web_stomp.RabbitMQWebStomp`: RabbitMQ's
    STOMP-over-WebSocket plugin on loopback ports (``ws://`` and ``wss://``),
    enabled for the session and disabled after it (Debian's ActiveMQ has no
    ``ws://`` transport).
``tcp_proxy_factory``
    function-scoped factory: ``tcp_proxy_factory((host, port), **options)``
    starts a :class:`~amqstomp.testing.proxy.TcpProxy` in front of that
    address and closes every proxy it made at teardown (needs no broker).

When ActiveMQ is not installed the fixtures fail with an install hint; with
``AMQSTOMP_SKIP_BROKER=1`` in the environment they skip instead.

The module is registered through the ``pytest11`` entry point ``amqstomp``.
Without the package installed, load it with ``-p amqstomp.testing.pytest_plugin``
or ``pytest_plugins = ["amqstomp.testing.pytest_plugin"]`` in a conftest; do
not do both, pytest refuses a plugin registered under two names.
"""
from __future__ import annotations

import os
import shutil
from typing import Any, Callable, Iterator, List, Tuple

import pytest

from ._process import close_all
from .broker import ActiveMQBroker, BrokerNotAvailable, start_broker
from .proxy import TcpProxy
from .web_stomp import RabbitMQWebStomp

__all__ = ["activemq", "activemq_persistent", "activemq_factory", "rabbitmq_web_stomp", "tcp_proxy_factory"]

SKIP_ENV = "AMQSTOMP_SKIP_BROKER"


def _require_broker() -> None:
    """Fail (or skip with AMQSTOMP_SKIP_BROKER=1) unless ActiveMQ is installed."""
    try:
        ActiveMQBroker.require()
    except BrokerNotAvailable as exc:
        if os.environ.get(SKIP_ENV, "") not in ("", "0"):
            pytest.skip(f"{exc} ({SKIP_ENV} is set)")
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def activemq() -> Iterator[ActiveMQBroker]:
    """A non-persistent ActiveMQ with statistics, shared by the whole session."""
    _require_broker()
    broker = start_broker(statistics=True, broker_name="amqstomp-session")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def activemq_persistent() -> Iterator[ActiveMQBroker]:
    """A persistent (KahaDB) ActiveMQ with statistics, shared by the whole session."""
    _require_broker()
    broker = start_broker(persistent=True, statistics=True, broker_name="amqstomp-persistent")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def activemq_factory() -> Iterator[Callable[..., ActiveMQBroker]]:
    """``factory(**ActiveMQBroker options, wait=True)`` -> a started broker;
    all of them are stopped when the test ends."""
    _require_broker()
    made: List[ActiveMQBroker] = []

    def factory(**options: Any) -> ActiveMQBroker:
        wait = options.pop("wait", True)
        broker = ActiveMQBroker(**options)
        made.append(broker)
        broker.start(wait=wait)
        return broker

    try:
        yield factory
    finally:
        close_all([broker.stop for broker in reversed(made)])


@pytest.fixture(scope="session")
def rabbitmq_web_stomp() -> Iterator[RabbitMQWebStomp]:
    """RabbitMQ's web-STOMP endpoint (ws:// and, with openssl, wss://) for the
    session; fails with the reason when RabbitMQ is not there (skips with
    AMQSTOMP_SKIP_BROKER=1)."""
    why = RabbitMQWebStomp.available()
    if why is not None:
        if os.environ.get(SKIP_ENV, "") not in ("", "0"):
            pytest.skip(f"{why} ({SKIP_ENV} is set)")
        pytest.fail(why, pytrace=False)
    with RabbitMQWebStomp(tls=shutil.which("openssl") is not None) as endpoint:
        yield endpoint


@pytest.fixture
def tcp_proxy_factory() -> Iterator[Callable[..., TcpProxy]]:
    """``factory((host, port), **TcpProxy options)`` -> a started
    :class:`~amqstomp.testing.proxy.TcpProxy` on 127.0.0.1; all of them are
    closed when the test ends (the first error from a close is raised after
    closing the others)."""
    made: List[TcpProxy] = []

    def factory(target: Tuple[str, int], **options: Any) -> TcpProxy:
        proxy = TcpProxy(target, **options)
        made.append(proxy)
        proxy.start()
        return proxy

    try:
        yield factory
    finally:
        close_all([proxy.close for proxy in reversed(made)])
