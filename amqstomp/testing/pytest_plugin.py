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
``activemq_factory_module``
    the same factory, module-scoped: its brokers are stopped when the module ends.
``activemq_network_factory``
    function-scoped factory: ``activemq_network_factory(n=3, **options)`` starts an
    :class:`~amqstomp.testing.network.ActiveMQNetwork` (every member bridged) and
    stops every network it made at teardown.
``rabbitmq_web_stomp``
    session-scoped :class:`~amqstomp.testing.web_stomp.RabbitMQWebStomp`: RabbitMQ's
    STOMP-over-WebSocket plugin on loopback ports (``ws://`` and ``wss://``),
    used for the session (Debian's ActiveMQ has no ``ws://`` transport).
``tcp_proxy_factory``
    function-scoped factory: ``tcp_proxy_factory((host, port), **options)``
    starts a :class:`~amqstomp.testing.proxy.TcpProxy` in front of that
    address and closes every proxy it made at teardown (needs no broker).
``rabbitmq``
    session-scoped: the machine's RabbitMQ with its STOMP plugin on a free
    127.0.0.1 port (:class:`~amqstomp.testing.rabbitmq.RabbitMQStomp`; guest/guest).
``stomp_broker``
    session-scoped, parametrised over ``activemq`` and ``rabbitmq`` (the
    ActiveMQ run's id is ``activemq-6.1`` in a 6.1 session, see below): a
    :class:`StompBroker` (``name``, ``url``, ``host_and_ports``, ``username``,
    ``password``, ``vhost``) for the broker-neutral tests; each test runs once
    per broker. Mark what needs ActiveMQ with ``pytest.mark.activemq_only(reason)``
    (its RabbitMQ run is skipped with the reason).

The ActiveMQ fixtures run Debian's ActiveMQ 5.17, or ActiveMQ 6.1 when
``AMQSTOMP_ACTIVEMQ_DISTRIBUTION=6.1`` is set for the session (every broker made
without ``distribution=``; :mod:`amqstomp.testing._distribution`).

When ActiveMQ (of that distribution) is not installed the fixtures fail with an install hint; with
``AMQSTOMP_SKIP_BROKER=1`` in the environment they skip instead. When RabbitMQ
is absent (or not running) ``rabbitmq``, ``stomp_broker``'s RabbitMQ runs and
``rabbitmq_web_stomp`` skip, saying why, unless ``AMQSTOMP_REQUIRE_RABBITMQ=1``
(set by ``.ci/run``; ``AMQSTOMP_SKIP_BROKER=1`` wins): then they fail. The
RabbitMQ plugins are used by reference (:mod:`amqstomp.testing._rabbitmq`): a
plugin these fixtures turned on is turned off by its last user, in any order
and across test processes.

The module is registered through the ``pytest11`` entry point ``amqstomp``.
Without the package installed, load it with ``-p amqstomp.testing.pytest_plugin``
or ``pytest_plugins = ["amqstomp.testing.pytest_plugin"]`` in a conftest; do
not do both, pytest refuses a plugin registered under two names.
"""
from __future__ import annotations

import os
import shutil
from typing import Any, Callable, Iterator, List, NoReturn, Optional, Tuple, TypeVar

import pytest

from ._distribution import default_distribution
from ._process import close_all
from .broker import ActiveMQBroker, BrokerNotAvailable, start_broker
from .network import ActiveMQNetwork
from .proxy import TcpProxy
from .rabbitmq import RabbitMQStomp
from .web_stomp import RabbitMQWebStomp

__all__ = ["activemq", "activemq_persistent", "activemq_factory", "activemq_network_factory", "rabbitmq_web_stomp", "tcp_proxy_factory",
           "rabbitmq", "stomp_broker", "StompBroker"]

SKIP_ENV = "AMQSTOMP_SKIP_BROKER"
#: Set (to 1) where RabbitMQ must be there (CI): the ``rabbitmq`` fixture fails instead of skipping.
REQUIRE_RABBITMQ_ENV = "AMQSTOMP_REQUIRE_RABBITMQ"
#: The ActiveMQ run's id in ``stomp_broker``: ``activemq`` (5.17), ``activemq-6.1`` in a 6.1 session.
ACTIVEMQ_RUN = "activemq" if default_distribution() == "5.17" else "activemq-" + default_distribution()
#: The brokers ``stomp_broker`` runs each test on (its parameter ids).
BROKER_NAMES = (ACTIVEMQ_RUN, "rabbitmq")


class StompBroker:
    """One broker of the ``stomp_broker`` fixture: what a broker-neutral test needs.

    Attributes:
        name (str): ``"activemq"`` or ``"rabbitmq"`` (amqstomp's dialect names;
            ``"activemq"`` for 5.17 and 6.1 alike).
        distribution (str | None): ``"5.17"`` or ``"6.1"`` for ActiveMQ, else None.
        url (str): ``stomp://127.0.0.1:PORT`` (JMS API).
        host_and_ports (list[tuple[str, int]]): for the stomp.py-style connections.
        username, password (str): a login the broker takes (ActiveMQ's test
            brokers take any; RabbitMQ ``guest``/``guest``).
        vhost (str | None): RabbitMQ's ``/``; None for ActiveMQ.
        broker: the :class:`ActiveMQBroker` or :class:`RabbitMQStomp`.
    """

    def __init__(self, name: str, broker: Any, username: str, password: str, vhost: Optional[str]) -> None:
        self.name = name
        self.broker = broker
        self.url: str = broker.url
        self.host_and_ports: List[Tuple[str, int]] = broker.host_and_ports
        self.username = username
        self.password = password
        self.vhost = vhost
        self.distribution: Optional[str] = getattr(broker, "distribution", None)

    @property
    def is_activemq(self) -> bool:
        return self.name == "activemq"

    def __repr__(self) -> str:
        return "<StompBroker %s %s>" % (self.name, self.url)


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "activemq_only(reason): the test needs ActiveMQ Classic; its run on "
                                       "other brokers of the stomp_broker fixture is skipped with the reason")


def _rabbitmq_missing(exc: BaseException) -> NoReturn:
    """RabbitMQ is not there: fail with ``AMQSTOMP_REQUIRE_RABBITMQ=1`` (unless
    ``AMQSTOMP_SKIP_BROKER=1``), else skip, saying why."""
    if os.environ.get(REQUIRE_RABBITMQ_ENV, "") not in ("", "0") and os.environ.get(SKIP_ENV, "") in ("", "0"):
        pytest.fail("RabbitMQ is required here (%s is set): %s" % (REQUIRE_RABBITMQ_ENV, exc), pytrace=False)
    pytest.skip("RabbitMQ not available: %s" % (exc,))


_Helper = TypeVar("_Helper", RabbitMQStomp, RabbitMQWebStomp)


def _use_rabbitmq(helper: _Helper) -> Iterator[_Helper]:
    """A RabbitMQ fixture's body: ``helper`` started (or :func:`_rabbitmq_missing`), then stopped."""
    try:
        helper.start()
    except BrokerNotAvailable as exc:
        _rabbitmq_missing(exc)
    try:
        yield helper
    finally:
        helper.stop()


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
    yield from _brokers_made()


@pytest.fixture(scope="module")
def activemq_factory_module() -> Iterator[Callable[..., ActiveMQBroker]]:
    """``factory(**ActiveMQBroker options, wait=True)`` -> a started broker; all of them are
    stopped when the module ends. For a module whose tests each need a broker with the same
    options (TLS, the scheduler, OpenWire): one JVM start (about 6 s on a loaded 2-CPU machine)
    instead of one per test; each test then uses destinations of its own and stops no broker."""
    yield from _brokers_made()


def _brokers_made() -> Iterator[Callable[..., ActiveMQBroker]]:
    """The ActiveMQ factories' body: yields the factory, then stops what it made (newest first)."""
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


@pytest.fixture
def activemq_network_factory() -> Iterator[Callable[..., ActiveMQNetwork]]:
    """``factory(n=3, **ActiveMQNetwork options)`` -> a started network (every
    bridge established); all of them are stopped when the test ends."""
    _require_broker()
    made: List[ActiveMQNetwork] = []

    def factory(n: int = 3, **options: Any) -> ActiveMQNetwork:
        network = ActiveMQNetwork(n, **options)
        made.append(network)
        return network.start()

    try:
        yield factory
    finally:
        close_all([network.stop for network in reversed(made)])


@pytest.fixture(scope="session")
def rabbitmq_web_stomp() -> Iterator[RabbitMQWebStomp]:
    """RabbitMQ's web-STOMP endpoint (ws:// and, with openssl, wss://) for the
    session; skips (fails with ``AMQSTOMP_REQUIRE_RABBITMQ=1``) when RabbitMQ is
    absent or not running."""
    yield from _use_rabbitmq(RabbitMQWebStomp(tls=shutil.which("openssl") is not None))


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


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[RabbitMQStomp]:
    """The machine's RabbitMQ, its STOMP plugin on a free 127.0.0.1 port (guest/guest,
    virtual host ``/``), for the whole session; skips (fails with
    ``AMQSTOMP_REQUIRE_RABBITMQ=1``) when RabbitMQ is absent or not running."""
    yield from _use_rabbitmq(RabbitMQStomp())


@pytest.fixture(scope="session", params=BROKER_NAMES)
def stomp_broker(request: Any) -> StompBroker:
    """Each broker-neutral test once on ActiveMQ (the session's ``activemq``) and
    once on RabbitMQ (``rabbitmq``): a :class:`StompBroker`."""
    if request.param == ACTIVEMQ_RUN:
        return StompBroker("activemq", request.getfixturevalue("activemq"), "admin", "admin", None)
    target = StompBroker("rabbitmq", request.getfixturevalue("rabbitmq"), RabbitMQStomp.username,
                         RabbitMQStomp.password, RabbitMQStomp.vhost)
    return target


@pytest.fixture(autouse=True)
def _activemq_only(request: Any) -> None:
    """Skip the non-ActiveMQ runs of a test marked ``activemq_only(reason)``."""
    marker = request.node.get_closest_marker("activemq_only")
    if marker is None or "stomp_broker" not in request.fixturenames:
        return
    callspec = getattr(request.node, "callspec", None)
    name = callspec.params.get("stomp_broker") if callspec is not None else None
    if name is not None and name != ACTIVEMQ_RUN:
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "needs ActiveMQ Classic")
        pytest.skip("ActiveMQ only: %s" % reason)
