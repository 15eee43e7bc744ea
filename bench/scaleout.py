"""bench/scaleout: aggregate produce and consume rates, and broker CPU per message,
past one broker (issue 24; docs/guides/scaling-out.md).

Cases (each on its own set-up, started and stopped by the bench; 256-byte
NON_PERSISTENT TextMessages to one queue, the JMS-style API, AUTO_ACKNOWLEDGE,
prefetch 1000 per consumer or, for a fan-in consumer, 1000 across its brokers):

* ``net1`` / ``net2`` / ``net3``: 1 broker, then 2 and 3 networked ActiveMQ brokers
  (``amqstomp.testing.ActiveMQNetwork``, a mesh with its defaults); one producer
  and one consumer per broker, each on that broker (``net1``: one standalone broker);
* ``net3-fanin``: 3 networked brokers, one producer per broker, ONE
  :class:`amqstomp.jms.FanInConsumer` over the three instead of one consumer per broker;
* ``net3-fanin3k``: the same with the fan-in consumer's budget 3,000 (1,000 per
  broker, as each consumer of ``net3`` has);
* ``net3-spread-fanin``: 3 networked brokers, ONE :class:`amqstomp.jms.SpreadingProducer`
  and one fan-in consumer;
* ``solo3-fanin``: 3 standalone brokers (no network), one producer per broker
  and one fan-in consumer (what the fan-in consumer is for when the brokers do
  not forward).
* ``rmq3-quorum-kill``: a RabbitMQ cluster of the bench's own 3 nodes
  (:class:`amqstomp.testing.rabbitmq_cluster.RabbitMQCluster`, never the machine's
  node), one quorum queue (``x-queue-type:quorum``), the stomp.py-style API with
  failover over the three nodes: one producer starting on each node (persistent,
  each SEND waits for its RECEIPT; one whose socket is lost first is sent again
  after the failover: a possible duplicate, never a loss) and one consumer
  (``client-individual``, ``prefetch-count`` 100, an ACK per message) starting on
  node 2, which is killed (SIGKILL) once a third of the messages were consumed.
  Lost (produced -- a RECEIPT came -- and never consumed) must be 0; duplicates
  (deliveries of a message consumed already) are counted. Its own default count
  (5,000; ``--quick`` 1,500): persistent quorum-queue sends waiting for their receipt.

Every producer and consumer is a thread of this process (the GIL: the client
side is one Python process). The producers send ``count`` messages in all (split
evenly); the consumers run at the same time and count until they have all of
them (a message missing or extra fails the case). Measured:

* produce rate: messages / seconds until the last send returned;
* consume rate: messages / seconds until the last message was received;
* broker CPU per message: user + system CPU of every broker JVM (``/proc/<pid>/stat``,
  the JVM and its children) over the case, divided by ``count``, in microseconds;
  the brokers and this process share the machine's cores, so the rates are bounded
  by the machine (on 2 cores, 3 JVMs and the client compete), while the CPU per
  message is what each set-up costs the brokers.

Usage::

    python bench/scaleout.py [--quick] [--count N] [--runs N] [--cases GLOB[,GLOB]] [--json [PATH]]

``--quick``: 3,000 messages a case (else 20,000), one run (else ``--runs``, 3: the
table gives each figure's median over the runs, each run on fresh brokers).

Licensed under the Apache License, Version 2.0.
"""
import argparse
import fnmatch
import os
import statistics
import sys
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import default_json_path, format_table, machine_info, write_json  # noqa: E402

import amqstomp  # noqa: E402
from amqstomp.jms import NON_PERSISTENT, FanInConsumer, SpreadingProducer  # noqa: E402
from amqstomp.testing import ActiveMQBroker, ActiveMQNetwork  # noqa: E402

CASES = ("net1", "net2", "net3", "net3-fanin", "net3-fanin3k", "net3-spread-fanin", "solo3-fanin",
         "rmq3-quorum-kill")
#: the RabbitMQ case's count (messages) when none is given, and with --quick
RMQ_COUNT, RMQ_QUICK_COUNT = 5000, 1500
QUORUM = {"x-queue-type": "quorum", "durable": "true", "auto-delete": "false"}
BODY = "x" * 256
#: a case that has not consumed everything after this long (s) fails
CASE_DEADLINE_S = 300.0


def _cpu_of_tree(pid: Optional[int]) -> float:
    """user + system CPU seconds of ``pid`` and its descendants (the broker's JVM)."""
    if not pid:
        return 0.0
    stats: Dict[int, List[str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as fh:
                    stats[int(name)] = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        fields = stats.get(current)
        if fields is None:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
        todo += [child for child, f in stats.items() if int(f[1]) == current]
    return total


class SetUp:
    """The brokers of a case: ``urls`` (one per broker) and ``pids``."""

    def __init__(self, kind: str, n: int) -> None:
        self.kind, self.n = kind, n
        self._network: Optional[ActiveMQNetwork] = None
        self._brokers: List[ActiveMQBroker] = []

    def __enter__(self) -> "SetUp":
        if self.kind == "net" and self.n > 1:
            self._network = ActiveMQNetwork(self.n, java_heap="256M").start()
            self._brokers = list(self._network.members)
        else:
            try:
                for _ in range(self.n):
                    self._brokers.append(ActiveMQBroker(java_heap="256M").start())
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._network is not None:
            self._network.stop()
        else:
            for broker in self._brokers:
                broker.stop()

    @property
    def urls(self) -> List[str]:
        return [broker.url for broker in self._brokers]

    def cpu(self) -> float:
        return sum(_cpu_of_tree(broker.pid) for broker in self._brokers)


def _producer_thread(url: str, queue: str, count: int, done: List[float], errors: List[BaseException]) -> None:
    try:
        conn = amqstomp.ConnectionFactory(url).create_connection(timeout_s=30)
        try:
            session = conn.create_session()
            producer = session.create_producer(amqstomp.Queue(queue))
            producer.delivery_mode = NON_PERSISTENT
            for _ in range(count):
                producer.send(session.create_text_message(BODY))
        finally:
            conn.close()
        done.append(time.monotonic())
    except BaseException as exc:  # reported by the case
        errors.append(exc)


def _spreading_thread(urls: Sequence[str], queue: str, count: int, done: List[float],
                      errors: List[BaseException]) -> None:
    try:
        with SpreadingProducer(list(urls), amqstomp.Queue(queue), timeout_s=30) as producer:
            producer.delivery_mode = NON_PERSISTENT
            for _ in range(count):
                producer.send(BODY)
        done.append(time.monotonic())
    except BaseException as exc:
        errors.append(exc)


class Counter:
    def __init__(self, total: int) -> None:
        self.total, self.count, self.last = total, 0, 0.0
        self.lock = threading.Lock()
        self.all_in = threading.Event()

    def add(self) -> None:
        with self.lock:
            self.count += 1
            if self.count >= self.total:
                self.last = time.monotonic()
                self.all_in.set()


def _receive_loop(receive: Callable[[float], Any], counter: Counter, stop: threading.Event) -> None:
    deadline = time.monotonic() + CASE_DEADLINE_S
    while not stop.is_set() and time.monotonic() < deadline:
        if receive(0.1) is not None:
            counter.add()


def run_case(name: str, count: int) -> Dict[str, Any]:
    n = int(name[len("net"):len("net") + 1]) if name.startswith("net") else 3
    kind = "net" if name.startswith("net") else "solo"
    queue = "bench-scaleout-" + uuid.uuid4().hex[:8]
    with SetUp(kind, n) as setup:
        urls = setup.urls
        counter = Counter(count)
        stop = threading.Event()
        closers: List[Callable[[], None]] = []
        threads: List[threading.Thread] = []
        errors: List[BaseException] = []
        try:
            if "fanin" in name:
                fan_in = FanInConsumer(urls, amqstomp.Queue(queue), prefetch=3000 if name.endswith("3k") else 1000,
                                       timeout_s=30)
                closers.append(fan_in.close)
                threads.append(threading.Thread(target=_receive_loop, args=(fan_in.receive, counter, stop)))
            else:
                for url in urls:
                    conn = amqstomp.ConnectionFactory(url).create_connection(timeout_s=30)
                    closers.append(conn.close)
                    consumer = conn.create_session().create_consumer(amqstomp.Queue(queue))
                    conn.start()
                    threads.append(threading.Thread(target=_receive_loop, args=(consumer.receive, counter, stop)))
            time.sleep(1.0)  # the subscriptions reach every broker over the bridges
            done: List[float] = []
            cpu0, started = setup.cpu(), time.monotonic()
            process0 = time.process_time()
            if "spread" in name:
                threads.append(threading.Thread(target=_spreading_thread, args=(urls, queue, count, done, errors)))
            else:
                shares = [count // n + (1 if i < count % n else 0) for i in range(n)]
                threads += [threading.Thread(target=_producer_thread, args=(url, queue, share, done, errors))
                            for url, share in zip(urls, shares)]
            for thread in threads:
                thread.start()
            counter.all_in.wait(CASE_DEADLINE_S)
            cpu = setup.cpu() - cpu0
            client_cpu = time.process_time() - process0
            time.sleep(0.5)  # an extra message would show now
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
            for close in closers:
                close()
    if errors:
        raise RuntimeError("%s: %r" % (name, errors[0]))
    if counter.count != count or not done:
        raise RuntimeError("%s: %d of %d messages consumed" % (name, counter.count, count))
    produce_s = max(done) - started
    consume_s = counter.last - started
    return {"case": name, "brokers": n, "count": count, "produce_rate": count / produce_s,
            "consume_rate": count / consume_s, "broker_cpu_us_per_msg": cpu / count * 1e6,
            "client_cpu_us_per_msg": client_cpu / count * 1e6}


def _rmq_producer(cluster: Any, first: int, queue: str, count: int, tag: str, produced: List[str],
                  done: List[float], errors: List[BaseException]) -> None:
    """Persistent SENDs, each waiting for its RECEIPT; one lost with its socket is sent again after the
    failover (bounded attempts): ``produced`` holds each body once its RECEIPT came."""
    nodes = cluster.nodes
    order = [hp for i in range(len(nodes)) for hp in nodes[(first + i) % len(nodes)].host_and_ports]
    conn = amqstomp.Connection12(order, vhost="/", heartbeats=(5000, 5000), auto_reconnect=True,
                                 reconnect_attempts_max=200, reconnect_sleep_initial=0.2, reconnect_sleep_max=2.0,
                                 timeout=30)
    try:
        conn.connect("guest", "guest", wait=True)
        for i in range(count):
            body = "%s-%d" % (tag, i)
            for attempt in range(20):
                receipt = "%s-%d" % (body, attempt)
                try:
                    conn.send(queue, body, headers=dict(QUORUM, persistent="true", receipt=receipt))
                    conn.wait_for_receipt(receipt, timeout=30)
                    break
                except amqstomp.exception.StompException:  # lost with its socket: again, once reconnected
                    if not conn.reconnector.wait_connected(60):
                        raise
            else:
                raise RuntimeError("%s: not sent in 20 attempts" % body)
            produced.append(body)
        done.append(time.monotonic())
    except BaseException as exc:
        errors.append(exc)
    finally:
        conn.disconnect()


def run_rabbitmq_case(name: str, count: int) -> Dict[str, Any]:
    """``rmq3-quorum-kill`` (module docstring)."""
    from amqstomp.testing.rabbitmq_cluster import RabbitMQCluster

    why = RabbitMQCluster.available()
    if why:
        raise RuntimeError("%s: %s" % (name, why))
    queue = "/queue/bench-qq-" + uuid.uuid4().hex[:8]
    lock = threading.Lock()
    seen: Dict[str, int] = {}
    counter = Counter(count)
    with RabbitMQCluster(3) as cluster:
        victim = cluster.nodes[1]
        order = [hp for i in (1, 2, 0) for hp in cluster.nodes[i].host_and_ports]
        consumer = amqstomp.Connection12(order, vhost="/", heartbeats=(5000, 5000), auto_reconnect=True,
                                         reconnect_attempts_max=200, reconnect_sleep_initial=0.2,
                                         reconnect_sleep_max=2.0, timeout=30)

        class Listener(amqstomp.ConnectionListener):
            def on_message(self, frame: Any) -> None:
                body = frame.body if isinstance(frame.body, str) else frame.body.decode()
                with lock:
                    seen[body] = seen.get(body, 0) + 1
                    first = seen[body] == 1
                try:
                    consumer.ack(frame.headers["ack"])
                except amqstomp.exception.StompException:
                    pass  # its socket is gone: the message comes again
                if first:
                    counter.add()

        consumer.set_listener("bench", Listener())
        consumer.connect("guest", "guest", wait=True)
        produced: List[str] = []
        done: List[float] = []
        errors: List[BaseException] = []
        threads: List[threading.Thread] = []
        try:
            consumer.subscribe(queue, id="1", ack="client-individual", headers=dict(QUORUM, **{"prefetch-count": "100"}))
            time.sleep(1.0)
            cpu0 = sum(_cpu_of_tree(node.pid) for node in cluster.nodes)
            started = time.monotonic()
            shares = [count // 3 + (1 if i < count % 3 else 0) for i in range(3)]
            threads = [threading.Thread(target=_rmq_producer, args=(cluster, i, queue, shares[i], "p%d" % i,
                                                                    produced, done, errors)) for i in range(3)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + CASE_DEADLINE_S
            while counter.count < count // 3 and time.monotonic() < deadline and not errors:
                time.sleep(0.05)
            on_victim = consumer.transport.current_host_and_port == victim.host_and_ports[0]
            victim_cpu = _cpu_of_tree(victim.pid)
            victim.kill()
            killed_at = time.monotonic()
            counter.all_in.wait(max(0.0, deadline - time.monotonic()))
            for thread in threads:
                thread.join(max(1.0, deadline - time.monotonic()))
            cpu = victim_cpu + sum(_cpu_of_tree(node.pid) for node in cluster.nodes if node is not victim) - cpu0
            time.sleep(1.0)  # a late duplicate would show now
        finally:
            consumer.disconnect()
    if errors:
        raise RuntimeError("%s: %r" % (name, errors[0]))
    lost = sorted(set(produced) - set(seen))
    duplicates = sum(n - 1 for n in seen.values())
    if not done or len(produced) != count:
        raise RuntimeError("%s: %d of %d produced" % (name, len(produced), count))
    return {"case": name, "brokers": 3, "count": count, "produce_rate": count / (max(done) - started),
            "consume_rate": count / (counter.last - started) if counter.last else 0.0,
            "broker_cpu_us_per_msg": cpu / count * 1e6, "client_cpu_us_per_msg": 0.0,
            "lost": len(lost), "duplicates": duplicates, "consumer_on_killed_node": on_victim,
            "killed_after_s": killed_at - started, "deliveries": sum(seen.values())}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3,000 messages a case")
    parser.add_argument("--count", type=int, default=None, help="messages a case (default 20,000)")
    parser.add_argument("--runs", type=int, default=None, help="runs a case (median; default 3, --quick 1)")
    parser.add_argument("--cases", default="*", help="comma-separated globs over %s" % (", ".join(CASES),))
    parser.add_argument("--json", nargs="?", const=default_json_path("scaleout"), default=None)
    args = parser.parse_args(argv)
    count = args.count or (3000 if args.quick else 20000)
    chosen = [c for c in CASES if any(fnmatch.fnmatch(c, g.strip()) for g in args.cases.split(","))]
    if not chosen:
        parser.error("no case matches %r" % (args.cases,))
    runs = args.runs or (1 if args.quick else 3)
    results = []
    for name in chosen:
        each = []
        case_count = count if not name.startswith("rmq") else args.count or (RMQ_QUICK_COUNT if args.quick
                                                                             else RMQ_COUNT)
        for run in range(runs):
            print("running %s (%d messages, run %d of %d)..." % (name, case_count, run + 1, runs), file=sys.stderr,
                  flush=True)
            if name.startswith("rmq"):
                each.append(run_rabbitmq_case(name, case_count))
                print("  lost %(lost)d, duplicates %(duplicates)d, deliveries %(deliveries)d, consumer on the killed "
                      "node: %(consumer_on_killed_node)s, killed %(killed_after_s).1f s in" % each[-1],
                      file=sys.stderr, flush=True)
            else:
                each.append(run_case(name, count))
        median = dict(each[0], runs=each)
        for key in ("produce_rate", "consume_rate", "broker_cpu_us_per_msg", "client_cpu_us_per_msg"):
            median[key] = statistics.median(r[key] for r in each)
        if name.startswith("rmq"):
            median["lost"] = sum(r["lost"] for r in each)  # over every run: must be 0
            median["duplicates"] = statistics.median(r["duplicates"] for r in each)
        results.append(median)
    rows = [[r["case"], r["brokers"], "%.0f" % r["produce_rate"], "%.0f" % r["consume_rate"],
             "%.1f" % r["broker_cpu_us_per_msg"], "%.1f" % r["client_cpu_us_per_msg"]] for r in results]
    print(format_table(rows, ["case", "brokers", "produced msg/s", "consumed msg/s", "broker CPU us/msg",
                              "client CPU us/msg"]))
    print("(%d cores shared by the brokers and this client: rates are bounded by the machine; CPU per message "
          "is not)" % (os.cpu_count() or 0))
    for r in results:
        if "lost" in r:
            print("%s: lost %d (all runs), duplicates %s (median), persistent, a node killed mid-run; the client "
                  "CPU is not measured there (the 3 producers and the consumer share this process)"
                  % (r["case"], r["lost"], r["duplicates"]))
    if args.json:
        print("written", write_json(args.json, {"machine": machine_info(), "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
