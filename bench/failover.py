"""bench/failover: time from a master's kill -9 to the first message on the new master.

A shared-store master/slave pair of local ActiveMQ brokers (one KahaDB
directory on local disk, ``lockAcquireSleepInterval`` 500 ms,
``persistJMSRedelivered``, ``allowLinkStealing``) and two JMS-style clients on
a ``failover:(a,b)?randomize=false`` URI: a producer sending persistent
messages (each waits for its RECEIPT) and a CLIENT_ACKNOWLEDGE consumer. Per
kill (``--kills``, 5; ``--quick``: 2):

1. wait until messages flow (the consumer got ``--flow`` more) and the slave
   waits on the store lock (its log says so);
2. ``t_kill``: SIGKILL the master;
3. ``t_ready``: the slave answers a STOMP CONNECT on its port (a probe: TCP
   connect every 2 ms while refused, then CONNECT -> CONNECTED). The broker's
   takeover is ``t_ready - t_kill``: the lock interval, the store's recovery
   and the start of the connectors. The slave's log time of "Connector stomp
   started" is recorded too (``log_takeover_s``, wall clock, ms resolution) as
   a cross-check that the probe adds nothing;
4. ``t_first``: the consumer receives the first message that came on its new
   socket. The client's reconnect is ``t_first - t_ready``: the back-off wait
   before the next attempt, CONNECT, the re-SUBSCRIBE (gated on its receipt)
   and the first dispatch. The total is ``t_first - t_kill``;
5. the killed broker starts again on the same store as the new slave.

At the end the producer stops and every message whose send returned must be
received (at least once): ``lost`` must be 0, duplicates are counted. The
medians over the kills are printed as a table and written (with every kill) to
``bench/results/failover.json`` (``--json PATH`` elsewhere, ``--no-json`` not
at all).

Usage::

    python bench/failover.py [--quick] [--kills N] [--flow N]
                             [--max-reconnect-delay-ms MS] [--json PATH | --no-json]

Units: seconds (float) for times, counts as ints.
"""
import argparse
import logging
import os
import shutil
import statistics
import sys
import threading
import time
import traceback
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from amqstomp.exception import AcknowledgeInterruptedError  # noqa: E402
from amqstomp.testing.master_slave import CONNECTOR_STARTED, MasterSlavePair  # noqa: E402
from amqstomp.testing.master_slave import broker_log, broker_log_size, log_line_time  # noqa: E402
from amqstomp.testing.master_slave import disk_temp_dir, filesystem_type  # noqa: E402
from bench._common import default_json_path, format_table, machine_info, write_json  # noqa: E402

log = logging.getLogger("amqstomp.bench.failover")

LOCK_SLEEP_MS = 500
DEFAULT_KILLS = 5
QUICK_KILLS = 2
DEFAULT_FLOW = 200
QUICK_FLOW = 30
DEFAULT_MAX_RECONNECT_DELAY_MS = 100
#: bounds (s) of each wait
STEP_TIMEOUT_S = 60.0
#: the slave's STOMP port is probed this often after a kill
PROBE_INTERVAL_S = 0.002
#: the producer's count bound
MAX_SENDS = 1_000_000

#: keys of one kill's record (seconds unless a count)
KILL_FIELDS = ("kill", "killed", "takeover_s", "client_reconnect_s", "kill_to_first_message_s",
               "log_takeover_s", "slave_restart_s")
MEDIAN_FIELDS = ("takeover_s", "client_reconnect_s", "kill_to_first_message_s")


def wait_for(predicate: Any, timeout_s: float, what: str, interval_s: float = 0.02) -> None:
    """Poll ``predicate`` until true; TimeoutError(``what``) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            raise TimeoutError("%s: not within %.0f s" % (what, timeout_s))
        time.sleep(interval_s)


def start_pair(store: str) -> MasterSlavePair:
    """``bench-a`` (the first master) and ``bench-b`` (waiting on the lock) on ``store``."""
    return MasterSlavePair(store, names=("bench-a", "bench-b"), lock_acquire_sleep_ms=LOCK_SLEEP_MS,
                           timeout_s=STEP_TIMEOUT_S, persist_jms_redelivered=True, allow_link_stealing=True,
                           statistics=False).start()


# --------------------------------------------------------------------------- clients


class Stream:
    """Producer and consumer threads on two JMS-style failover connections."""

    def __init__(self, url: str) -> None:
        import amqstomp

        self.queue = "bench-failover-" + uuid.uuid4().hex[:8]
        factory = amqstomp.ConnectionFactory(url, send_timeout_ms=int(STEP_TIMEOUT_S * 1000))
        self.consumer_conn = factory.create_connection(timeout_s=30)
        self.producer_conn = factory.create_connection(timeout_s=30)
        session = self.consumer_conn.create_session(acknowledge_mode=amqstomp.CLIENT_ACKNOWLEDGE)
        self.consumer = session.create_consumer(amqstomp.Queue(self.queue))
        self.consumer_conn.start()
        self.producer_session = self.producer_conn.create_session()
        self.producer = self.producer_session.create_producer(amqstomp.Queue(self.queue))
        self.consumer_link = self.consumer_conn._state.consumer_link
        self.lock = threading.Lock()
        self.sent: List[str] = []
        # (monotonic time, body, message id, socket number of the consumer link)
        self.received: List[Tuple[float, str, str, int]] = []
        self.errors: List[str] = []
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.threads = [threading.Thread(target=self._produce, name="bench-producer", daemon=True),
                        threading.Thread(target=self._consume, name="bench-consumer", daemon=True)]
        for thread in self.threads:
            thread.start()

    def counts(self) -> Tuple[int, int]:
        with self.lock:
            return len(self.sent), len(self.received)

    def _produce(self) -> None:
        for i in range(MAX_SENDS):
            if self.stop_producing.is_set():
                return
            body = "b%07d" % i
            try:
                self.producer.send(self.producer_session.create_text_message(body))
            except Exception as exc:
                with self.lock:
                    self.errors.append("send: %r" % (exc,))
                return
            with self.lock:
                self.sent.append(body)

    def _consume(self) -> None:
        pending = None
        count = 0
        deadline = time.monotonic() + 3600
        while not self.stop_consuming.is_set() and time.monotonic() < deadline:
            try:
                message = self.consumer.receive(0.1)
                if message is None:
                    if pending is not None:
                        pending.acknowledge()
                        pending, count = None, 0
                    continue
                socket_seq = message.link_seq
                with self.lock:
                    self.received.append((time.monotonic(), message.text, message.message_id or "", socket_seq))
                pending, count = message, count + 1
                if count >= 10:
                    message.acknowledge()
                    pending, count = None, 0
            except AcknowledgeInterruptedError:
                pending, count = None, 0  # messages of the lost socket: not acknowledged, they come again
            except Exception as exc:
                with self.lock:
                    self.errors.append("receive/ack: %r" % (exc,))
                return

    def first_after(self, index: int, socket_seq: int) -> Optional[float]:
        """Time of the first message from ``index`` on that came on a socket after ``socket_seq``."""
        with self.lock:
            for t, _, _, seq in self.received[index:]:
                if seq > socket_seq:
                    return t
        return None

    def close(self) -> None:
        self.stop_producing.set()
        self.stop_consuming.set()
        for thread in self.threads:
            thread.join(STEP_TIMEOUT_S)
        for conn in (self.producer_conn, self.consumer_conn):
            try:
                conn.close()
            except Exception:
                log.exception("closing %r", conn)


# --------------------------------------------------------------------------- the run


def one_kill(pair: MasterSlavePair, stream: Stream, number: int, flow: int) -> Dict[str, Any]:
    """Kill the master once and measure (see the module docstring)."""
    sent0, received0 = stream.counts()
    wait_for(lambda: stream.counts()[1] >= received0 + flow or bool(stream.errors), STEP_TIMEOUT_S,
             "%d messages before kill %d" % (flow, number))
    if stream.errors:
        raise RuntimeError("client errors: %s" % stream.errors)
    _, received1 = stream.counts()
    socket_seq = stream.consumer_link.transport.link_seq
    master, slave = pair.roles()
    offset = broker_log_size(slave)
    killed = master.broker_name
    t_kill_wall = time.time()
    t_kill, _ = pair.kill_master()
    t_ready = pair.wait_for_slave(STEP_TIMEOUT_S, PROBE_INTERVAL_S)
    wait_for(lambda: stream.first_after(received1, socket_seq) is not None or bool(stream.errors),
             STEP_TIMEOUT_S, "first message after kill %d" % number, 0.005)
    if stream.errors:
        raise RuntimeError("client errors: %s" % stream.errors)
    t_first = stream.first_after(received1, socket_seq)
    assert t_first is not None
    sent_now = stream.counts()[0]
    wait_for(lambda: stream.counts()[0] > sent_now or bool(stream.errors), STEP_TIMEOUT_S,
             "the producer after kill %d" % number)
    started_wall = log_line_time(broker_log(slave, offset), CONNECTOR_STARTED)
    restart_s = pair.restart_slave(STEP_TIMEOUT_S)
    return {
        "kill": number, "killed": killed,
        "takeover_s": t_ready - t_kill,
        "client_reconnect_s": t_first - t_ready,
        "kill_to_first_message_s": t_first - t_kill,
        "log_takeover_s": None if started_wall is None else started_wall - t_kill_wall,
        "slave_restart_s": restart_s,
    }


def run(kills: int = DEFAULT_KILLS, flow: int = DEFAULT_FLOW,
        max_reconnect_delay_ms: int = DEFAULT_MAX_RECONNECT_DELAY_MS) -> Dict[str, Any]:
    """Start a pair, run ``kills`` master kills, stop everything; the results dict
    (see :data:`KILL_FIELDS`, :data:`MEDIAN_FIELDS`)."""
    t_run = time.monotonic()
    store_parent = disk_temp_dir("amqstomp-bench-failover-")
    results: Dict[str, Any] = {
        "bench": "failover", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine_info(),
        "config": {"kills": kills, "flow_between_kills": flow, "lock_acquire_sleep_ms": LOCK_SLEEP_MS,
                   "initial_reconnect_delay_ms": 10, "max_reconnect_delay_ms": max_reconnect_delay_ms,
                   "randomize": False, "acknowledge": "client (every 10)", "persistent_sync_sends": True,
                   "store_filesystem": filesystem_type(store_parent)},
        "kills": [], "problems": [],
    }
    pair: Optional[MasterSlavePair] = None
    stream: Optional[Stream] = None
    try:
        pair = start_pair(os.path.join(store_parent, "kahadb"))
        url = pair.failover_url(initialReconnectDelay=10, maxReconnectDelay=max_reconnect_delay_ms)
        results["config"]["url"] = url
        stream = Stream(url)
        for number in range(1, kills + 1):
            row = one_kill(pair, stream, number, flow)
            results["kills"].append(row)
            print("kill %d (%s): takeover %.3f s + client %.3f s = %.3f s" % (
                number, row["killed"], row["takeover_s"], row["client_reconnect_s"],
                row["kill_to_first_message_s"]), flush=True)
        # at-least-once: every sent message comes
        stream.stop_producing.set()
        stream.threads[0].join(STEP_TIMEOUT_S)
        with stream.lock:
            sent = set(stream.sent)
        try:
            wait_for(lambda: sent <= {r[1] for r in list(stream.received)}, STEP_TIMEOUT_S, "the last messages")
        except TimeoutError as exc:
            results["problems"].append(str(exc))
        time.sleep(0.5)
        with stream.lock:
            received = list(stream.received)
            errors = list(stream.errors)
        bodies = [r[1] for r in received]
        ids = [r[2] for r in received]
        results["messages"] = {
            "sent": len(sent), "received": len(received), "lost": len(sent - set(bodies)),
            "duplicates": len(bodies) - len(set(bodies)),
            "duplicates_redelivered": len(ids) - len(set(ids)),
        }
        results["messages"]["duplicates_resent"] = (results["messages"]["duplicates"]
                                                    - results["messages"]["duplicates_redelivered"])
        if results["messages"]["lost"]:
            results["problems"].append("%d message(s) lost" % results["messages"]["lost"])
        results["problems"] += errors
    except Exception as exc:
        results["problems"].append("".join(traceback.format_exception_only(type(exc), exc)).strip())
        results["traceback"] = traceback.format_exc()
    finally:
        if stream is not None:
            stream.close()
        if pair is not None:
            try:
                pair.stop()
            except Exception:
                log.exception("stopping the brokers")
        shutil.rmtree(store_parent, ignore_errors=True)
    rows = results["kills"]
    results["median"] = {f: (statistics.median(r[f] for r in rows) if rows else None) for f in MEDIAN_FIELDS}
    results["status"] = "ok" if not results["problems"] and len(rows) == kills else "failed"
    results["wall_s"] = time.monotonic() - t_run
    return results


def _s(value: Optional[float]) -> str:
    return "-" if value is None else "%.3f" % value


def print_report(results: Dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout
    rows = [[r["kill"], r["killed"], _s(r["takeover_s"]), _s(r["client_reconnect_s"]),
             _s(r["kill_to_first_message_s"]), _s(r.get("log_takeover_s"))] for r in results["kills"]]
    med = results["median"]
    rows.append(["median", "", _s(med["takeover_s"]), _s(med["client_reconnect_s"]),
                 _s(med["kill_to_first_message_s"]), ""])
    print(format_table(rows, ["kill", "master", "takeover s", "client reconnect s", "kill->1st msg s",
                              "takeover (log) s"]), file=out)
    msgs = results.get("messages")
    if msgs:
        print("messages: %(sent)d sent, %(received)d received, %(lost)d lost, %(duplicates)d duplicates "
              "(%(duplicates_redelivered)d redelivered, %(duplicates_resent)d re-sent)" % msgs, file=out)
    print("status: %s%s" % (results["status"], "".join("\n  problem: %s" % p for p in results["problems"])),
          file=out)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="%d kills, %d messages between kills"
                    % (QUICK_KILLS, QUICK_FLOW))
    ap.add_argument("--kills", type=int, help="master kills (default %d)" % DEFAULT_KILLS)
    ap.add_argument("--flow", type=int, help="messages the consumer gets between kills (default %d)" % DEFAULT_FLOW)
    ap.add_argument("--max-reconnect-delay-ms", type=int, default=DEFAULT_MAX_RECONNECT_DELAY_MS,
                    help="the failover URI's maxReconnectDelay (default %d)" % DEFAULT_MAX_RECONNECT_DELAY_MS)
    ap.add_argument("--json", default=default_json_path("failover"), metavar="PATH",
                    help="write the results here (default bench/results/failover.json)")
    ap.add_argument("--no-json", action="store_true", help="write no JSON")
    args = ap.parse_args(argv)
    kills = args.kills or (QUICK_KILLS if args.quick else DEFAULT_KILLS)
    flow = args.flow or (QUICK_FLOW if args.quick else DEFAULT_FLOW)
    if kills < 1 or flow < 1:
        ap.error("--kills and --flow must be >= 1")
    results = run(kills, flow, args.max_reconnect_delay_ms)
    results["args"] = vars(args)
    print_report(results)
    if not args.no_json:
        print("results written to %s" % write_json(args.json, results))
    return results


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(0 if main().get("status") == "ok" else 1)
