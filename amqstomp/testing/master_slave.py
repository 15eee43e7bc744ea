"""A shared-store master/slave pair of real ActiveMQ brokers, for failover tests and benches.

Two :class:`~amqstomp.testing.broker.ActiveMQBroker` on different loopback
ports share one KahaDB directory. The first to take the store's lock is the
master and opens its STOMP port; the other waits on the lock with its ports
closed, retrying every ``lockAcquireSleepInterval`` (ActiveMQ's default is
10 s; a pair made here uses 500 ms), and takes over -- with every persistent
message still there -- once the master dies::

    with MasterSlavePair(persist_jms_redelivered=True) as pair:
        url = pair.failover_url(initialReconnectDelay=10)
        ...                                  # clients on `url`
        t_kill, t_dead = pair.kill_master()  # kill -9
        t_ready = pair.wait_for_slave(30.0)  # the slave answers STOMP: roles swap
        pair.restart_slave()                 # the killed one waits on the lock again

The store must live on a disk file system (never tmpfs: a kill -9 must leave
what a crash leaves on a disk): :func:`disk_temp_dir` makes such a directory.
Which broker holds the lock, and when it opened its connectors, is in its log:
:func:`broker_log`, :func:`broker_log_size`, :func:`log_line_time`.

Units: seconds (float) for timeouts and durations, :func:`time.monotonic`
values for the times returned, except ``lock_acquire_sleep_ms``
(milliseconds, as ActiveMQ names it). Every wait has a deadline.

Errors: :class:`~amqstomp.testing.broker.BrokerStartError` (a
:class:`RuntimeError`) when a broker exits, does not become a waiting slave,
answers STOMP while it should wait, or does not take over before its
deadline; :class:`RuntimeError` when a method is called in the wrong state
(e.g. :meth:`MasterSlavePair.failover_url` before :meth:`~MasterSlavePair.start`).
"""
from __future__ import annotations

import datetime
import logging
import os
import shutil
import tempfile
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from ._process import close_all
from ._stomp import goodbye, handshake
from .broker import ActiveMQBroker, BrokerStartError, start_broker

__all__ = [
    "CONNECTOR_STARTED",
    "DEFAULT_LOCK_ACQUIRE_SLEEP_MS",
    "MEMORY_FILESYSTEMS",
    "SLAVE_WAITING",
    "MasterSlavePair",
    "broker_log",
    "broker_log_size",
    "disk_temp_dir",
    "filesystem_type",
    "log_line_time",
    "wait_for_stomp",
    "wait_slave_waiting",
]

log = logging.getLogger("amqstomp.testing.master_slave")

#: What a broker logs when it starts waiting on the store lock.
SLAVE_WAITING = "This broker is now in slave mode waiting a lock to be acquired"
#: What a broker logs once its STOMP connector accepts connections.
CONNECTOR_STARTED = "Connector stomp started"
#: ``lockAcquireSleepInterval`` of a pair made here (ms).
DEFAULT_LOCK_ACQUIRE_SLEEP_MS = 500
#: File systems that live in memory (a store there does not survive like a disk's).
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")

#: ``factory(broker_name=..., wait=bool, **options)`` -> a started broker
#: (:func:`~amqstomp.testing.broker.start_broker`, or the ``activemq_factory``
#: fixture, which also stops the broker at teardown).
BrokerFactory = Callable[..., ActiveMQBroker]


# --------------------------------------------------------------------------- the store on disk


def filesystem_type(path: str) -> str:
    """The type of the file system holding ``path`` ("ext4", "tmpfs", ...):
    that of the longest mount point in ``/proc/mounts`` that contains it;
    "" when unknown (no ``/proc``)."""
    real = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) < 3:
                    continue
                mount = fields[1].replace("\\040", " ")
                inside = real == mount or real.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) > len(best):
                    best, kind = mount, fields[2]
    except OSError:
        return ""
    return kind


def disk_temp_dir(prefix: str = "amqstomp-", parent: Optional[str] = None) -> str:
    """A new directory on a disk file system: under ``parent`` (default: the
    temporary directory) unless that is in memory (:data:`MEMORY_FILESYSTEMS`),
    else under ``/var/tmp``. The caller removes it. Raises
    :class:`RuntimeError` when ``/var/tmp`` is in memory too, :class:`OSError`
    when the directory cannot be made."""
    parent = parent or tempfile.gettempdir()
    if filesystem_type(parent) in MEMORY_FILESYSTEMS:
        parent = "/var/tmp"
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    if filesystem_type(path) in MEMORY_FILESYSTEMS:
        shutil.rmtree(path, ignore_errors=True)
        raise RuntimeError(f"no disk-backed directory for a broker store ({parent} is in memory)")
    return path


# --------------------------------------------------------------------------- the brokers' logs


def broker_log_size(broker: ActiveMQBroker) -> int:
    """The size of ``broker``'s log file in bytes (0 when it has none yet): an
    offset for :func:`broker_log` that skips what is logged so far."""
    try:
        return os.path.getsize(broker.log_path or "")
    except OSError:
        return 0


def broker_log(broker: ActiveMQBroker, offset: int = 0) -> str:
    """``broker``'s log (``activemq.log``) from byte ``offset`` on; "" when it
    has none yet."""
    try:
        with open(broker.log_path or "", "rb") as fh:
            fh.seek(offset)
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def log_line_time(text: str, needle: str) -> Optional[float]:
    """Epoch seconds (wall clock, ms resolution) of the first log line of
    ``text`` that contains ``needle``, from its log4j stamp
    (``2026-11-30 10:35:11,049 | INFO | ...``, local time); None when no line
    has it or its stamp does not parse."""
    for line in text.splitlines():
        if needle in line:
            try:
                stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            except ValueError:
                return None
            return stamp.timestamp()
    return None


# --------------------------------------------------------------------------- waits


def wait_slave_waiting(broker: ActiveMQBroker, offset: int = 0, timeout_s: float = 60.0) -> None:
    """Wait until ``broker``'s log after byte ``offset`` says it waits on the
    store lock, then check that its STOMP port is closed.

    Raises :class:`BrokerStartError` (with the tail of its log) when the
    broker exits first, when ``timeout_s`` seconds pass, or when it answers
    STOMP (it is a master, not a slave).
    """
    deadline = time.monotonic() + timeout_s
    while SLAVE_WAITING not in broker_log(broker, offset):
        if not broker.running:
            raise BrokerStartError(
                f"{broker.broker_name} exited instead of waiting on the store lock\n{broker.log_tail()}"
            )
        if time.monotonic() >= deadline:
            raise BrokerStartError(
                f"{broker.broker_name} did not become a waiting slave within {timeout_s:.0f} s\n"
                + broker.log_tail()
            )
        time.sleep(0.05)
    if broker.ping(timeout=1.0):
        raise BrokerStartError(f"{broker.broker_name} answers STOMP while the master lives")


def wait_for_stomp(broker: ActiveMQBroker, timeout_s: float, poll_interval_s: float = 0.01) -> float:
    """Connect to ``broker``'s STOMP port every ``poll_interval_s`` seconds
    while it is closed; once a connection is accepted, CONNECT and wait for
    CONNECTED. Returns the monotonic time CONNECTED arrived.

    Raises :class:`BrokerStartError` when the broker's process exits or
    ``timeout_s`` seconds pass first.
    """
    deadline = time.monotonic() + timeout_s
    probes = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BrokerStartError(
                f"{broker.broker_name} did not answer STOMP on {broker.url} within {timeout_s:.0f} s "
                f"({probes} probes)\n{broker.log_tail()}"
            )
        if not broker.running:
            raise BrokerStartError(f"{broker.broker_name} exited (status {broker.returncode})\n{broker.log_tail()}")
        probes += 1
        try:
            sock, _ = handshake(broker.host, broker.stomp_port, min(5.0, max(0.1, left)))
        except OSError:  # refused, reset, timed out, or not CONNECTED
            time.sleep(min(poll_interval_s, max(0.0, deadline - time.monotonic())))
            continue
        connected = time.monotonic()
        goodbye(sock)
        return connected


# --------------------------------------------------------------------------- the pair


class MasterSlavePair:
    """Two brokers on one KahaDB directory: :attr:`master` answers STOMP,
    :attr:`slave` waits on the store lock.

    ``store_dir``
        the shared KahaDB directory; None: ``kahadb`` in a new
        :func:`disk_temp_dir`, removed by :meth:`stop`.
    ``factory``
        starts one broker (see :data:`BrokerFactory`); default
        :func:`~amqstomp.testing.broker.start_broker`.
    ``names``
        the brokers' names; the first is started first, so it is the first master.
    ``lock_acquire_sleep_ms``
        how often the slave retries the lock (ms).
    ``timeout_s``
        default bound of every wait (start-up, becoming a slave, takeover).
    ``broker_options``
        any other :class:`~amqstomp.testing.broker.ActiveMQBroker` option
        (``persist_jms_redelivered``, ``allow_link_stealing``, ``statistics``...).

    Every broker binds to 127.0.0.1 only. The roles swap in
    :meth:`wait_for_slave`; :attr:`master`, :attr:`slave` and :meth:`roles`
    may be read from other threads.
    """

    def __init__(
        self,
        store_dir: Optional[str] = None,
        *,
        factory: Optional[BrokerFactory] = None,
        names: Tuple[str, str] = ("ms-a", "ms-b"),
        lock_acquire_sleep_ms: int = DEFAULT_LOCK_ACQUIRE_SLEEP_MS,
        timeout_s: float = 60.0,
        **broker_options: Any,
    ) -> None:
        self._store_arg = os.path.abspath(store_dir) if store_dir else None
        self._own_parent: Optional[str] = None
        self.factory: BrokerFactory = factory or start_broker
        self.names = names
        self.timeout_s = timeout_s
        self.broker_options = dict(broker_options, lock_acquire_sleep_ms=lock_acquire_sleep_ms)
        self.brokers: Tuple[ActiveMQBroker, ...] = ()
        self._lock = threading.Lock()
        self._master: Optional[ActiveMQBroker] = None
        self._slave: Optional[ActiveMQBroker] = None

    # ---------------------------------------------------------------- state
    @property
    def store_dir(self) -> Optional[str]:
        """The shared KahaDB directory (None before :meth:`start` when it is the pair's own)."""
        if self._store_arg:
            return self._store_arg
        return os.path.join(self._own_parent, "kahadb") if self._own_parent else None

    def roles(self) -> Tuple[ActiveMQBroker, ActiveMQBroker]:
        """``(master, slave)``, read together. RuntimeError before :meth:`start`."""
        with self._lock:
            if self._master is None or self._slave is None:
                raise RuntimeError("the pair is not started")
            return self._master, self._slave

    @property
    def master(self) -> ActiveMQBroker:
        """The broker that holds the lock (or held it, between :meth:`kill_master`
        and :meth:`wait_for_slave`)."""
        return self.roles()[0]

    @property
    def slave(self) -> ActiveMQBroker:
        """The broker that waits on the lock (or is dead, after a takeover and
        before :meth:`restart_slave`)."""
        return self.roles()[1]

    @property
    def addresses(self) -> List[Tuple[str, int]]:
        """``[(host, stomp_port)]`` of both brokers, in the order of :attr:`names`."""
        return [b.host_and_ports[0] for b in self.brokers]

    def failover_url(self, **params: Any) -> str:
        """``failover:(stomp://127.0.0.1:A,stomp://127.0.0.1:B)?randomize=false``
        over both brokers in the order of :attr:`names`, then ``&key=value`` for
        each of ``params`` (e.g. ``initialReconnectDelay=10``, in ms)."""
        if not self.brokers:
            raise RuntimeError("the pair is not started")
        inner = ",".join(b.url for b in self.brokers)
        query = "".join(f"&{key}={value}" for key, value in params.items())
        return f"failover:({inner})?randomize=false{query}"

    def __repr__(self) -> str:
        return f"<MasterSlavePair {' '.join(repr(b) for b in self.brokers)} store={self.store_dir}>"

    # ---------------------------------------------------------------- life cycle
    def start(self) -> "MasterSlavePair":
        """Start the first broker (until it answers STOMP) and the second
        (until its log says it waits on the lock and its port is closed).
        Stops what it started and raises
        :class:`~amqstomp.testing.broker.BrokerStartError` (or
        :class:`~amqstomp.testing.broker.BrokerNotAvailable`) on failure."""
        if self.brokers:
            raise RuntimeError(f"{self!r} is already started")
        if self._store_arg is None:
            self._own_parent = disk_temp_dir("amqstomp-master-slave-")
        options = dict(self.broker_options, kahadb_dir=self.store_dir, startup_timeout=self.timeout_s)
        made: List[ActiveMQBroker] = []
        try:
            made.append(self.factory(broker_name=self.names[0], **options))
            made.append(self.factory(broker_name=self.names[1], wait=False, **options))
            self.brokers = tuple(made)
            with self._lock:
                self._master, self._slave = made
            wait_slave_waiting(made[1], 0, self.timeout_s)
        except BaseException:
            self.brokers = tuple(made)
            try:
                self.stop()
            except Exception:  # the start's error is the one to see
                log.exception("could not clean up after a failed start of %r", self)
            raise
        log.info("master %s, slave %s on %s", self.names[0], self.names[1], self.store_dir)
        return self

    def kill_master(self) -> Tuple[float, float]:
        """SIGKILL the master (a crash). Returns the monotonic times just before
        the signal and once the process is reaped: a request can still reach
        the master between the two, so a kill is an interval. The roles stay
        until :meth:`wait_for_slave`."""
        master = self.master
        before = time.monotonic()
        master.kill()
        dead = time.monotonic()
        log.info("killed master %s", master.broker_name)
        return before, dead

    def wait_for_slave(self, timeout_s: Optional[float] = None, poll_interval_s: float = 0.01) -> float:
        """Wait until the slave answers STOMP (probed every ``poll_interval_s``
        seconds), then swap the roles: it is the master, the dead one the slave.
        Returns the monotonic time it answered. Raises
        :class:`~amqstomp.testing.broker.BrokerStartError` when the slave exits
        or ``timeout_s`` (default :attr:`timeout_s`) seconds pass."""
        old_master, slave = self.roles()
        ready = wait_for_stomp(slave, self.timeout_s if timeout_s is None else timeout_s, poll_interval_s)
        with self._lock:
            self._master, self._slave = slave, old_master
        log.info("%s took over from %s", slave.broker_name, old_master.broker_name)
        return ready

    def restart_slave(self, timeout_s: Optional[float] = None) -> float:
        """Start the dead slave (the killed master) again on its directory,
        ports and the store, and wait until it waits on the lock. Returns the
        seconds that took. Raises :class:`RuntimeError` when the slave is
        running, :class:`~amqstomp.testing.broker.BrokerStartError` as
        :func:`wait_slave_waiting` does (``timeout_s`` default :attr:`timeout_s`)."""
        slave = self.slave
        if slave.running:
            raise RuntimeError(f"{slave.broker_name} is running: kill the master and wait_for_slave() first")
        offset = broker_log_size(slave)
        started = time.monotonic()
        slave.restart(wait=False)
        wait_slave_waiting(slave, offset, self.timeout_s if timeout_s is None else timeout_s)
        return time.monotonic() - started

    def stop(self) -> None:
        """Stop both brokers and remove the pair's own store directory (a given
        ``store_dir`` is kept). Tries every broker, then raises the first error."""
        try:
            close_all([broker.stop for broker in self.brokers])
        finally:
            if self._own_parent:
                shutil.rmtree(self._own_parent, ignore_errors=True)

    def __enter__(self) -> "MasterSlavePair":
        if not self.brokers:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
