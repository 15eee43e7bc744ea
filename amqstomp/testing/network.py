"""A network of real ActiveMQ Classic brokers on loopback, for tests of what
happens past one broker.

:class:`ActiveMQNetwork` starts ``n`` :class:`~amqstomp.testing.broker.ActiveMQBroker`
(each its own JVM, directory and store) joined by static, non-duplex
``networkConnector`` bridges over OpenWire (``tcp://127.0.0.1:PORT``, one
connector per peer) -- ActiveMQ's store-and-forward "network of brokers": a
message produced on one member is forwarded to another member when a
consumer there asks for it (ActiveMQ's ``DemandForwardingBridge``)::

    with ActiveMQNetwork(n=3, persistent=True) as net:
        url = net.failover_url()          # failover:(stomp://...,stomp://...,stomp://...)
        ...                               # producers and consumers on net.members[i].url
        net.kill(1)                       # kill -9 of one member
        net.restart(1)                    # same ports and store; waits for its bridges

What each keyword writes into every member's ``activemq.xml``
(ActiveMQ's ``NetworkConnector`` / ``PolicyEntry`` attributes; the defaults
are the settings ActiveMQ's documentation recommends against stuck messages):

``conduit_subscriptions`` (False)
    ``conduitSubscriptions``: False makes each remote consumer its own
    subscription on the bridge, so the brokers' dispatch counts every
    consumer (True, ActiveMQ's default, folds the consumers of a
    destination on a remote broker into one).
``decrease_network_consumer_priority`` (True)
    ``decreaseNetworkConsumerPriority``: a bridge's consumer gets a lower
    priority than a local one (and lower per hop), so a broker dispatches to
    its own consumers first (ActiveMQ 5.17's default is False, 5.18 and 6.x
    True).
``replay_when_no_consumers`` (True)
    the queue policy's ``conditionalNetworkBridgeFilterFactory
    replayWhenNoConsumers="true"`` with ``enableAudit="false"`` (the audit
    would take a replayed message for a duplicate): a message forwarded to a
    broker whose consumers left goes back to a broker that has consumers.
``suppress_duplicate_queue_subscriptions`` (True)
    ``suppressDuplicateQueueSubscriptions``: a consumer reachable over
    several paths (a mesh) is subscribed over the shortest one only.
``network_ttl`` (None: 1 for a mesh, ``n - 1`` for a chain)
    ``networkTTL``: how many bridges a message or subscription may cross.
``topology`` ("mesh")
    ``"mesh"``: every member bridges to every other; ``"chain"``: member
    ``i`` bridges to ``i - 1`` and ``i + 1``.
``persistent`` (False)
    each member's own KahaDB store (in its directory).
``reconnect_delay_ms`` (200)
    how often a bridge tries a lost peer again (the ``static:`` discovery's
    ``initialReconnectDelay`` and ``maxReconnectDelay``, no back-off).
``java_heap`` ("128M")
    each JVM's ``-Xmx``: three members fit in a small machine.

Any other keyword goes to every :class:`~amqstomp.testing.broker.ActiveMQBroker`
(``distribution``, ``statistics``, ``persist_jms_redelivered``, ``extra_xml``...).

Units: seconds (float) for timeouts, milliseconds where ActiveMQ names them
so (``reconnect_delay_ms``). Every wait has a deadline.

Errors: :class:`ValueError` for a bad keyword value (naming it);
:class:`~amqstomp.testing.broker.BrokerStartError` when a member does not
start or its bridges are not established within ``timeout_s``;
:class:`RuntimeError` for a call in the wrong state; :class:`IndexError` for
a member number out of range.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple
from xml.sax.saxutils import quoteattr

from ._process import close_all, free_port
from .broker import ActiveMQBroker, BrokerStartError
from .master_slave import broker_log, broker_log_size

__all__ = ["ActiveMQNetwork", "BRIDGE_ESTABLISHED", "TOPOLOGIES", "bridge_peers", "network_connectors_xml"]

log = logging.getLogger("amqstomp.testing.network")

#: The topologies :class:`ActiveMQNetwork` builds.
TOPOLOGIES = ("mesh", "chain")
#: What ActiveMQ's ``DemandForwardingBridgeSupport`` logs once a bridge to a peer is up.
BRIDGE_ESTABLISHED = "has been established"

#: Inside the queue ``>`` policyEntry with ``replay_when_no_consumers``.
REPLAY_FILTER_XML = ("<networkBridgeFilterFactory><conditionalNetworkBridgeFilterFactory"
                     ' replayWhenNoConsumers="true"/></networkBridgeFilterFactory>')


def _xbool(value: bool) -> str:
    return "true" if value else "false"


def bridge_peers(index: int, n: int, topology: str) -> List[int]:
    """The members member ``index`` (0-based) of ``n`` bridges to.

    Raises:
        ValueError: an unknown ``topology``.
    """
    if topology == "mesh":
        return [j for j in range(n) if j != index]
    if topology == "chain":
        return [j for j in (index - 1, index + 1) if 0 <= j < n]
    raise ValueError(f"topology must be one of {TOPOLOGIES}, got {topology!r}")


def network_connectors_xml(broker_name: str, peers: Sequence[Tuple[str, str]], *,
                           conduit_subscriptions: bool, decrease_network_consumer_priority: bool,
                           suppress_duplicate_queue_subscriptions: bool, network_ttl: int,
                           reconnect_delay_ms: int) -> str:
    """The ``<networkConnectors>`` element of member ``broker_name``: one
    static, non-duplex connector per ``(peer name, peer OpenWire URL)``
    (see the module docstring for what each keyword means). "" without peers."""
    if not peers:
        return ""
    delay = int(reconnect_delay_ms)
    out = ["    <networkConnectors>"]
    for peer_name, peer_url in peers:
        uri = (f"static:({peer_url})?initialReconnectDelay={delay}&maxReconnectDelay={delay}"
               "&useExponentialBackOff=false")
        attrs = {
            "name": f"{broker_name}-to-{peer_name}",
            "uri": uri,
            "duplex": "false",
            "conduitSubscriptions": _xbool(conduit_subscriptions),
            "decreaseNetworkConsumerPriority": _xbool(decrease_network_consumer_priority),
            "suppressDuplicateQueueSubscriptions": _xbool(suppress_duplicate_queue_subscriptions),
            "networkTTL": str(int(network_ttl)),
        }
        out.append("      <networkConnector " + " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items()) + "/>")
    out.append("    </networkConnectors>")
    return "\n".join(out)


class ActiveMQNetwork:
    """``n`` ActiveMQ brokers bridged to each other (see the module docstring
    for every keyword and its default).

    Attributes:
        members (list[ActiveMQBroker]): the brokers, member 0 first; their
            names are ``"<name_prefix>-1"`` ... ``"<name_prefix>-n"``.
    """

    def __init__(self, n: int = 3, *, topology: str = "mesh", persistent: bool = False,
                 conduit_subscriptions: bool = False, decrease_network_consumer_priority: bool = True,
                 replay_when_no_consumers: bool = True, suppress_duplicate_queue_subscriptions: bool = True,
                 network_ttl: Optional[int] = None, reconnect_delay_ms: int = 200, java_heap: str = "128M",
                 name_prefix: str = "net", timeout_s: float = 60.0, **broker_options: Any) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"n must be an int >= 2 (brokers in the network), got {n!r}")
        bridge_peers(0, n, topology)  # checks the topology
        if network_ttl is not None and (isinstance(network_ttl, bool) or not isinstance(network_ttl, int)
                                        or network_ttl < 1):
            raise ValueError(f"network_ttl must be an int >= 1 or None, got {network_ttl!r}")
        if isinstance(reconnect_delay_ms, bool) or not isinstance(reconnect_delay_ms, int) or reconnect_delay_ms < 1:
            raise ValueError(f"reconnect_delay_ms must be an int >= 1, got {reconnect_delay_ms!r}")
        for reserved in ("openwire", "broker_name", "stomp_port"):
            if reserved in broker_options:
                raise ValueError(f"{reserved}= is set by ActiveMQNetwork for each member")
        self.n = n
        self.topology = topology
        self.persistent = bool(persistent)
        self.conduit_subscriptions = bool(conduit_subscriptions)
        self.decrease_network_consumer_priority = bool(decrease_network_consumer_priority)
        self.replay_when_no_consumers = bool(replay_when_no_consumers)
        self.suppress_duplicate_queue_subscriptions = bool(suppress_duplicate_queue_subscriptions)
        self.network_ttl = network_ttl if network_ttl is not None else (1 if topology == "mesh" else n - 1)
        self.reconnect_delay_ms = reconnect_delay_ms
        self.timeout_s = float(timeout_s)
        self.broker_options = dict(broker_options, java_heap=java_heap, persistent=self.persistent,
                                   startup_timeout=self.timeout_s)
        self.names = [f"{name_prefix}-{i + 1}" for i in range(n)]
        self.members: List[ActiveMQBroker] = []
        # (member, peer) -> byte offset of the member's log from which its bridge to peer is looked for
        self._bridge_log_from: Dict[Tuple[int, int], int] = {}

    # ---------------------------------------------------------------- what it is
    def peers(self, index: int) -> List[int]:
        """The members member ``index`` bridges to (:func:`bridge_peers`)."""
        return bridge_peers(index, self.n, self.topology)

    def member(self, index: int) -> ActiveMQBroker:
        """Member ``index`` (0-based). IndexError out of range, RuntimeError before :meth:`start`."""
        if not self.members:
            raise RuntimeError("the network is not started")
        if not 0 <= index < self.n:
            raise IndexError(f"member {index} of a network of {self.n} (0..{self.n - 1})")
        return self.members[index]

    @property
    def urls(self) -> List[str]:
        """``stomp://127.0.0.1:PORT`` of every member, in order."""
        return [m.url for m in self.members]

    @property
    def addresses(self) -> List[Tuple[str, int]]:
        """``[(host, stomp_port)]`` of every member, in order."""
        return [m.host_and_ports[0] for m in self.members]

    def failover_url(self, order: Optional[Sequence[int]] = None, **params: Any) -> str:
        """``failover:(stomp://...,...)?randomize=false`` over the members (all
        of them in order, or those of ``order``), then ``&key=value`` for each
        of ``params`` (e.g. ``initialReconnectDelay=10``, in ms)."""
        chosen = [self.member(i) for i in (range(self.n) if order is None else order)]
        query = "".join(f"&{key}={value}" for key, value in params.items())
        return "failover:(%s)?randomize=false%s" % (",".join(m.url for m in chosen), query)

    def _configure(self, index: int) -> None:
        """Write the bridges and the queue policy into member ``index``'s settings."""
        broker = self.members[index]
        peers = [(self.names[j], str(self.members[j].openwire_url)) for j in self.peers(index)]
        bridges = network_connectors_xml(
            broker.broker_name, peers, conduit_subscriptions=self.conduit_subscriptions,
            decrease_network_consumer_priority=self.decrease_network_consumer_priority,
            suppress_duplicate_queue_subscriptions=self.suppress_duplicate_queue_subscriptions,
            network_ttl=self.network_ttl, reconnect_delay_ms=self.reconnect_delay_ms)
        user_xml = self.broker_options.get("extra_xml", "")
        broker.extra_xml = "\n".join(part for part in (user_xml, bridges) if part)
        if self.replay_when_no_consumers:
            broker.queue_policy = {"enableAudit": "false"}  # type: ignore[attr-defined]
            broker.queue_policy_xml = REPLAY_FILTER_XML  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"<ActiveMQNetwork {self.topology} of {self.n}: {' '.join(repr(m) for m in self.members)}>"

    # ---------------------------------------------------------------- life cycle
    def start(self) -> "ActiveMQNetwork":
        """Start every member (all JVMs at once), wait until each answers STOMP
        and every bridge is established. Stops what it started and raises
        :class:`~amqstomp.testing.broker.BrokerStartError` (or
        :class:`~amqstomp.testing.broker.BrokerNotAvailable`) on failure."""
        if self.members:
            raise RuntimeError(f"{self!r} is already started")
        try:
            for name in self.names:
                # given ports: a member never moves to other ports, so its peers' bridges stay right
                self.members.append(ActiveMQBroker(broker_name=name, openwire=True, stomp_port=free_port(),
                                                   **self.broker_options))
            for i in range(self.n):
                self._configure(i)
            for broker in self.members:
                broker.start(wait=False)
            deadline = time.monotonic() + self.timeout_s
            for broker in self.members:
                broker.wait_ready(max(0.1, deadline - time.monotonic()))
            self._bridge_log_from = {(i, j): 0 for i in range(self.n) for j in self.peers(i)}
            self.wait_bridged(max(0.1, deadline - time.monotonic()))
        except BaseException:
            try:
                self.stop()
            except Exception:  # the start's error is the one to see
                log.exception("could not clean up after a failed start of %r", self)
            raise
        log.info("network of %d (%s) started: %s", self.n, self.topology, ", ".join(self.urls))
        return self

    def bridged(self) -> List[Tuple[int, int]]:
        """The bridges ``(member, peer)`` not (re-)established yet, by the
        members' logs since their last (re)start or the peer's."""
        missing = []
        for (i, j), offset in self._bridge_log_from.items():
            text = broker_log(self.members[i], offset)
            peer = f"({self.names[j]})"
            if not any(BRIDGE_ESTABLISHED in line and peer in line for line in text.splitlines()):
                missing.append((i, j))
        return missing

    def wait_bridged(self, timeout_s: Optional[float] = None) -> None:
        """Wait until every bridge is established (:meth:`bridged` is empty).
        Raises :class:`~amqstomp.testing.broker.BrokerStartError` naming the
        missing bridges after ``timeout_s`` (default the network's ``timeout_s``)."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            missing = self.bridged()
            if not missing:
                return
            if time.monotonic() >= deadline:
                names = ", ".join(f"{self.names[i]}->{self.names[j]}" for i, j in missing)
                raise BrokerStartError(f"network bridges not established within {timeout_s:.1f} s: {names}",
                                       "\n".join(self.members[i].log_tail(20) for i in {i for i, _ in missing}))
            time.sleep(0.05)

    def kill(self, index: int) -> None:
        """SIGKILL member ``index`` (a crash); its directory and store stay for :meth:`restart`."""
        self.member(index).kill()

    def stop_member(self, index: int, timeout: float = 30.0) -> None:
        """Stop member ``index`` cleanly (SIGTERM, then SIGKILL after
        ``timeout`` s), keeping its directory and store for :meth:`restart`."""
        broker = self.member(index)
        broker.keep = True  # restart needs the directory; stop() removes it
        broker.stop(timeout)

    def restart(self, index: int, wait_bridged: bool = True) -> ActiveMQBroker:
        """Start member ``index`` again (killed, stopped or running) on its
        ports, directory and store; wait until it answers STOMP and, with
        ``wait_bridged``, until its bridges and its peers' bridges to it are
        established again. Raises as :meth:`start` does."""
        broker = self.member(index)
        for (i, j) in self._bridge_log_from:
            if i == index or j == index:
                self._bridge_log_from[(i, j)] = broker_log_size(self.members[i])
        broker.restart(wait=True, timeout=self.timeout_s)
        if wait_bridged:
            self.wait_bridged()
        return broker

    def stop(self) -> None:
        """Stop every member and remove their directories; tries every member,
        then raises the first error."""
        members, self.members = self.members, []
        for broker in members:
            broker.keep = bool(self.broker_options.get("keep", False))
        close_all([broker.stop for broker in reversed(members)])

    def __enter__(self) -> "ActiveMQNetwork":
        if not self.members:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
