"""A RabbitMQ cluster of a test's own nodes, with STOMP on each: :class:`RabbitMQCluster`.

Never the machine's node: every node here has its own name
(``amqstomp-<id>-<i>@localhost``), its own ports (AMQP, Erlang distribution and
STOMP, all free loopback ports, bound to 127.0.0.1), its own data and log
directories and its own Erlang cookie (a private ``HOME`` in a temporary
directory, for the nodes and for the ``rabbitmqctl`` calls that reach them).
The machine's RabbitMQ (and its ``epmd``, which every node on the host
registers with) is left alone. Nodes run as the current user from RabbitMQ's
own scripts (``/usr/lib/rabbitmq/bin``: Debian's ``/usr/sbin`` wrappers would
switch to the ``rabbitmq`` user, who cannot read the test's directories).

:meth:`RabbitMQCluster.start` starts node 1, then each other node, which
joins node 1's cluster (``rabbitmqctl stop_app / join_cluster / start_app``),
and waits until every node's STOMP listener answers (about 10 s per node on 2
cores). Quorum queues over STOMP: a SEND or SUBSCRIBE to ``/queue/<name>`` with
the header ``x-queue-type:quorum`` declares it (durable; RabbitMQ replicates it
on up to 5 nodes: here, all of them).

Faults: :meth:`kill` (SIGKILL of one node's VM), :meth:`stop_node` (a clean
stop), :meth:`restart` (the same node name, ports and data: it rejoins the
cluster by itself). :meth:`stop` stops every node and deletes the directories;
children left running at interpreter exit are stopped.

Errors: :class:`~amqstomp.testing.rabbitmq.RabbitMQNotAvailable` (a
``BrokerNotAvailable``) when RabbitMQ is not installed;
:class:`~amqstomp.testing.broker.BrokerStartError` naming the node, the command
and its output when a step fails or does not finish in time (every tool call
and wait is bounded).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._process import free_port, register, tail_file, unregister
from ._rabbitmq import RabbitMQNotAvailable
from ._startup import BrokerStartError

__all__ = ["RabbitMQCluster", "RabbitMQNode", "RABBITMQ_BIN", "NODE_START_TIMEOUT_S"]

#: RabbitMQ's own scripts (run as the current user).
RABBITMQ_BIN = "/usr/lib/rabbitmq/bin"
#: Seconds a node may take to start (its STOMP listener answering).
NODE_START_TIMEOUT_S = 120.0
#: Seconds one ``rabbitmqctl`` call may take.
CTL_TIMEOUT_S = 90.0
_CONFIG = """\
listeners.tcp.default = 127.0.0.1:{amqp_port}
stomp.listeners.tcp.1 = 127.0.0.1:{stomp_port}
loopback_users = none
log.console = false
log.file.level = warning
"""


class RabbitMQNode:
    """One node of a :class:`RabbitMQCluster` (see the module docstring).

    Attributes:
        name (str): its Erlang node name, ``amqstomp-<id>-<i>@localhost``.
        host (str): ``127.0.0.1``. stomp_port, amqp_port, dist_port (int): its ports.
        host_and_ports (list): ``[(host, stomp_port)]``, as the other test brokers give it.
        pid (int | None): its Erlang VM's process id while it runs.
    """

    host = "127.0.0.1"

    def __init__(self, cluster: "RabbitMQCluster", index: int) -> None:
        self.cluster = cluster
        self.index = index
        self.name = "amqstomp-%s-%d@localhost" % (cluster.cluster_id, index)
        self.amqp_port, self.dist_port, self.stomp_port = free_port(), free_port(), free_port()
        self.directory = os.path.join(cluster.base_dir, "node%d" % index)
        self.process: "Optional[subprocess.Popen[bytes]]" = None

    def __repr__(self) -> str:
        return "<RabbitMQNode %s stomp=127.0.0.1:%d %s>" % (self.name, self.stomp_port,
                                                           "running" if self.running else "stopped")

    @property
    def host_and_ports(self) -> List[Tuple[str, int]]:
        return [(self.host, self.stomp_port)]

    @property
    def pid(self) -> Optional[int]:
        try:
            with open(os.path.join(self.directory, "pid")) as fh:
                return int(fh.read().strip())
        except (OSError, ValueError):
            return None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def env(self) -> Dict[str, str]:
        """The environment of this node's server and of the tools that reach it."""
        env = dict(os.environ)
        d = self.directory
        env.update(HOME=self.cluster.home, RABBITMQ_NODENAME=self.name, RABBITMQ_NODE_IP_ADDRESS=self.host,
                   RABBITMQ_NODE_PORT=str(self.amqp_port), RABBITMQ_DIST_PORT=str(self.dist_port),
                   RABBITMQ_MNESIA_BASE=os.path.join(d, "mnesia"), RABBITMQ_LOG_BASE=os.path.join(d, "log"),
                   RABBITMQ_CONFIG_FILE=os.path.join(d, "rabbitmq"),
                   RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(d, "enabled_plugins"),
                   RABBITMQ_FEATURE_FLAGS_FILE=os.path.join(d, "feature_flags"),
                   RABBITMQ_PID_FILE=os.path.join(d, "pid"), ERL_CRASH_DUMP=os.path.join(d, "erl_crash.dump"),
                   RABBITMQ_SERVER_START_ARGS="-kernel inet_dist_use_interface {127,0,0,1}")
        return env

    def ctl(self, *args: str, timeout: float = CTL_TIMEOUT_S) -> str:
        """``rabbitmqctl -n <this node> ARGS``: its output.

        Raises:
            BrokerStartError: it failed or did not finish within ``timeout`` s (with its output).
        """
        argv = [os.path.join(RABBITMQ_BIN, "rabbitmqctl"), "-n", self.name] + list(args)
        try:
            proc = subprocess.run(argv, env=self.env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BrokerStartError("node %s: rabbitmqctl %s did not finish within %.0f s"
                                   % (self.name, " ".join(args), timeout)) from None
        if proc.returncode != 0:
            raise BrokerStartError("node %s: rabbitmqctl %s failed (exit %d): %s"
                                   % (self.name, " ".join(args), proc.returncode,
                                      (proc.stdout + proc.stderr).strip()[-800:]))
        return proc.stdout

    def launch(self) -> None:
        """Start this node's server (its data kept from an earlier run); returns at once."""
        for sub in ("mnesia", "log"):
            os.makedirs(os.path.join(self.directory, sub), exist_ok=True)
        with open(os.path.join(self.directory, "rabbitmq.conf"), "w") as fh:
            fh.write(_CONFIG.format(amqp_port=self.amqp_port, stomp_port=self.stomp_port))
        with open(os.path.join(self.directory, "enabled_plugins"), "w") as fh:
            fh.write("[rabbitmq_stomp].\n")
        out = open(os.path.join(self.directory, "server.out"), "ab")
        try:
            self.process = subprocess.Popen([os.path.join(RABBITMQ_BIN, "rabbitmq-server")], env=self.env(),
                                            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        finally:
            out.close()
        register(self)

    def wait_started(self, timeout: float = NODE_START_TIMEOUT_S) -> None:
        """Wait until the node runs its applications and its STOMP listener answers.

        Raises:
            BrokerStartError: it exited or did not get there within ``timeout`` s (its output's tail).
        """
        deadline = time.monotonic() + timeout
        while True:  # await_startup fails at once until the node has registered with epmd
            left = deadline - time.monotonic()
            try:
                self.ctl("await_startup", "--timeout", str(int(max(1.0, left))), timeout=max(1.0, left) + 10.0)
                break
            except BrokerStartError as exc:
                if not self.running or time.monotonic() + 0.5 >= deadline:
                    raise BrokerStartError("%s (its output: %s)" % (exc, self.output_tail())) from None
                time.sleep(0.5)
        while time.monotonic() < deadline:
            if not self.running:
                raise BrokerStartError("node %s exited (code %s): %s" % (self.name, self.process and
                                                                        self.process.returncode, self.output_tail()))
            try:
                socket.create_connection((self.host, self.stomp_port), timeout=1.0).close()
                return
            except OSError:
                time.sleep(0.2)
        raise BrokerStartError("node %s: STOMP port %d did not answer within %.0f s: %s"
                               % (self.name, self.stomp_port, timeout, self.output_tail()))

    def output_tail(self) -> str:
        return tail_file(os.path.join(self.directory, "server.out"), 20)

    def kill(self) -> None:
        """SIGKILL the node's VM (a crash: nothing flushed, no goodbye to the cluster)."""
        pid = self.pid
        if self.process is not None:
            for target in (pid, self.process.pid):
                if target:
                    try:
                        os.kill(target, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self._reap()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the node cleanly (``rabbitmqctl stop``), killing it after ``timeout`` s."""
        if not self.running:
            self._reap()
            return
        try:
            self.ctl("stop", timeout=timeout)
        except BrokerStartError:
            pass
        try:
            assert self.process is not None
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reap()

    def _reap(self) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # the script, the VM and erl_child_setup
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.process.wait(10.0)
            except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed group always exits
                pass
        self.process = None
        unregister(self)


class RabbitMQCluster:
    """``nodes`` RabbitMQ nodes of this test's own, clustered, STOMP on each (see the
    module docstring). A context manager.

    Args:
        nodes (int): how many (1-5; 3 by default).
        start_timeout (float): seconds each node may take to start.

    Attributes:
        nodes (list[RabbitMQNode]): in start order; ``nodes[0]`` is the one the others joined.
        host_and_ports (list): every node's STOMP ``(host, port)``, in order (a failover list).
        vhost (str): ``/``; credentials ``guest``/``guest`` (allowed from anywhere here:
            ``loopback_users = none``; the listeners bind 127.0.0.1).
    """

    vhost = "/"

    def __init__(self, nodes: int = 3, start_timeout: float = NODE_START_TIMEOUT_S) -> None:
        if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= 5:
            raise ValueError("RabbitMQCluster(nodes=%r): an int from 1 to 5" % (nodes,))
        self.start_timeout = start_timeout
        self.cluster_id = uuid.uuid4().hex[:8]
        self.base_dir = tempfile.mkdtemp(prefix="amqstomp-rabbitmq-cluster-")
        self.home = os.path.join(self.base_dir, "home")
        self.nodes = [RabbitMQNode(self, i + 1) for i in range(nodes)]

    def __repr__(self) -> str:
        return "<RabbitMQCluster %s %r>" % (self.cluster_id, self.nodes)

    @property
    def host_and_ports(self) -> List[Tuple[str, int]]:
        return [hp for node in self.nodes for hp in node.host_and_ports]

    def failover_url(self, **options: Any) -> str:
        """``failover:(stomp://127.0.0.1:P1,...)?options`` over every node, in order."""
        members = ",".join("stomp://%s:%d" % hp for hp in self.host_and_ports)
        query = "&".join("%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v) for k, v in options.items())
        return "failover:(%s)%s" % (members, "?" + query if query else "")

    @staticmethod
    def available() -> Optional[str]:
        """None when RabbitMQ's server scripts are installed, else why not."""
        for tool in ("rabbitmq-server", "rabbitmqctl"):
            if not os.access(os.path.join(RABBITMQ_BIN, tool), os.X_OK):
                return "RabbitMQ is not installed (%s/%s not found): apt-get install -y rabbitmq-server" % (
                    RABBITMQ_BIN, tool)
        return None

    def start(self) -> "RabbitMQCluster":
        """Start every node and cluster them (see the module docstring).

        Raises:
            RabbitMQNotAvailable: RabbitMQ is not installed.
            BrokerStartError: a node did not start or join in time (everything started is stopped).
        """
        why = self.available()
        if why is not None:
            raise RabbitMQNotAvailable(why)
        os.makedirs(self.home, exist_ok=True)
        cookie = os.path.join(self.home, ".erlang.cookie")
        with open(cookie, "w") as fh:
            fh.write("AMQSTOMP%s" % uuid.uuid4().hex.upper())
        os.chmod(cookie, 0o400)
        try:
            for node in self.nodes:
                node.launch()
            first = self.nodes[0]
            first.wait_started(self.start_timeout)
            for node in self.nodes[1:]:
                node.wait_started(self.start_timeout)
                node.ctl("stop_app")
                node.ctl("join_cluster", first.name)
                node.ctl("start_app")
                node.wait_started(self.start_timeout)
            self.wait_running(self.nodes)
        except BaseException:
            self.stop()
            raise
        return self

    def running_nodes(self, via: Optional[RabbitMQNode] = None) -> List[str]:
        """The node names the cluster reports running (asked of ``via``, else a running node)."""
        node = via or next((n for n in self.nodes if n.running), None)
        if node is None:
            return []
        names = node.ctl("eval", "rabbit_nodes:all_running().", timeout=30.0)
        return sorted(part.strip().strip("'[]\n ") for part in names.split(",") if part.strip().strip("'[]\n "))

    def wait_running(self, nodes: Sequence[RabbitMQNode], timeout: float = 60.0) -> None:
        """Wait until the cluster reports exactly ``nodes`` running.

        Raises:
            BrokerStartError: not within ``timeout`` s (what it reports instead).
        """
        want = sorted(n.name for n in nodes)
        deadline = time.monotonic() + timeout
        seen: List[str] = []
        while time.monotonic() < deadline:
            seen = self.running_nodes(nodes[0] if nodes else None)
            if seen == want:
                return
            time.sleep(0.5)
        raise BrokerStartError("RabbitMQ cluster %s: running nodes %s, expected %s" % (self.cluster_id, seen, want))

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (0-based)."""
        self.nodes[index].kill()

    def stop_node(self, index: int) -> None:
        """Stop node ``index`` (0-based) cleanly."""
        self.nodes[index].stop()

    def restart(self, index: int) -> None:
        """Start node ``index`` (0-based) again, with its name, ports and data (a running
        node is stopped cleanly first); wait until it runs in the cluster again."""
        node = self.nodes[index]
        if node.running:
            node.stop()
        node.launch()
        node.wait_started(self.start_timeout)
        self.wait_running([n for n in self.nodes if n.running])

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every node (the joined ones first) and delete the directories."""
        for node in reversed(self.nodes):
            node.stop(timeout)
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> "RabbitMQCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
