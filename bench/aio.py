"""bench/aio: amqstomp.aio against amqstomp's threaded API, consumers and a producer, in one run.

One local ActiveMQ (non-persistent) serves every case. Consumer cases: a fresh queue is
filled with the backlog (not timed, 256 B bodies), then a child process
(``python bench/aio.py --child SPEC``) connects with the API under test, subscribes and
consumes the whole backlog; it reports msg/s from the first message to the last and its
CPU seconds over the same span (``resource.getrusage``: every thread of the child). The
threaded API's consumer is a stomp.py-style listener that acks in ``on_message``; the aio
one an ``async for`` loop that awaits ``message.ack()``.

Cases: ``auto`` at prefetch 1000; ``client-individual`` at prefetch 1 (an ACK per message);
``produce``: sends without receipts, then one with a receipt (timed to its RECEIPT);
``handlers-p1000`` (aio only, client-individual, prefetch 1000): the ``async for`` loop against
the handler form ``sub.run(handler, concurrency=4)`` (4 worker tasks, an ACK on return) and
against the alternative it was chosen over, a semaphore of 4 with a task per message.
Each case runs ``--runs`` times (3), and the report gives the median.

``--stompman``: amqstomp.aio against stompman (an asyncio STOMP client, installed by the bench
extra) on the same broker, in the same run: ``ack-p1000`` (client-individual, prefetch 1000:
aio ``async for`` + ``await message.ack()``, aio ``sub.run(handler)``, stompman's
``subscribe`` handler form, which ACKs on return), ``client-individual-p1`` (the same at
prefetch 1, the threaded API too), ``produce`` (non-persistent, no receipts, one at the end),
``consume-1mib`` (``--big-count`` 1 MiB bodies, 50 by default, client-individual, prefetch 1000;
aio, threaded, stompman) and ``produce-tx100`` (non-persistent SENDs in transactions of 100,
each COMMIT's RECEIPT awaited before the next BEGIN; stompman cannot ask one, so its COMMITs
are written unwaited and one receipted SEND ends its run). The ratios aio/stompman (msg/s) and
stompman/aio (CPU per message) are computed inside each repetition, then the median is taken;
the result goes under the ``stompman`` key of the JSON report, merged into the existing file
(its other keys kept; a run of some ``--cases`` keeps the other cases' rows, their run named
under ``earlier``).

``--loop uvloop``: in the cases of :data:`UVLOOP_CASES` (``produce``, ``client-individual-p1``,
``ack-p1000``, whichever the run has), amqstomp.aio also runs on uvloop's loop (API ``aio-uvloop``,
the same child program under ``uvloop.run``), beside asyncio's own loop, interleaved with the
other APIs in each repetition.

Usage::

    python bench/aio.py [--count N] [--runs R] [--json [PATH]]
    python bench/aio.py --stompman [--count 10000] [--big-count 50] [--cases C,..] [--json [PATH]]
    python bench/aio.py [--stompman] --loop uvloop [--cases produce,client-individual-p1,ack-p1000]
    python bench/aio.py --reader-probe     # asyncio.Protocol vs a StreamReader task, no broker
"""
import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _raw_stomp  # noqa: E402
from bench._common import (SEQ_HEADER, default_json_path, fill_queue, format_table, machine_info,  # noqa: E402
                           run_child, start_broker, wait_queue_statistics, write_json)

#: the API name of amqstomp.aio on uvloop's loop (``--loop uvloop``)
AIO_UVLOOP = "aio-uvloop"
#: the cases ``--loop uvloop`` also runs amqstomp.aio on uvloop in (beside the default loop)
UVLOOP_CASES = ("produce", "client-individual-p1", "ack-p1000")

BODY = 256
#: body size per case when not :data:`BODY` (bytes)
CASE_BODY = {"consume-1mib": 1 << 20}
#: SENDs per transaction per case (BEGIN, the SENDs, COMMIT with its RECEIPT awaited)
CASE_BATCH = {"produce-tx100": 100}
#: cases that take ``--big-count`` messages instead of ``--count``
BIG_CASES = ("consume-1mib",)


def _body(spec: Dict[str, Any]) -> bytes:
    return (b"0123456789abcdef" * (spec["body"] // 16 + 1))[:spec["body"]]


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def _aio_handlers(sub: Any, count: int, form: str) -> Dict[str, Any]:
    """``aio-run4``: sub.run(handler, concurrency=4); ``aio-sem4``: a semaphore of 4, a task per message."""
    state = {"n": 0, "t0": 0.0, "c0": 0.0}
    done = asyncio.Event()

    async def handler(message: Any) -> None:
        if state["n"] == 0:
            state["t0"], state["c0"] = time.perf_counter(), _cpu()
        state["n"] += 1
        if state["n"] == count:
            done.set()

    if form in ("aio-run4", "aio-run"):
        runner = asyncio.ensure_future(sub.run(handler, concurrency=4 if form == "aio-run4" else 1))
        await done.wait()
        t1, c1 = time.perf_counter(), _cpu()
        await sub.close()
        await runner
    else:
        semaphore = asyncio.Semaphore(4)
        tasks: set = set()

        async def one(message: Any) -> None:
            try:
                await handler(message)
                await message.ack()
            finally:
                semaphore.release()

        taken = 0
        async for message in sub:
            await semaphore.acquire()
            task = asyncio.ensure_future(one(message))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            taken += 1
            if taken == count:
                break
        await done.wait()
        t1, c1 = time.perf_counter(), _cpu()
    return {"received": state["n"], "seconds": t1 - state["t0"], "cpu": c1 - state["c0"]}


async def _aio_optimized(sub: Any, count: int) -> Dict[str, Any]:
    """``aio-optimized``: ``async for`` without an ack of its own (amqstomp's cumulative ACKs,
    ``optimize_acknowledge``), each message's ``bench-seq`` counted once (``distinct``)."""
    seen = bytearray(count)
    received = distinct = 0
    t0 = c0 = 0.0
    async for message in sub:
        if received == 0:
            t0, c0 = time.perf_counter(), _cpu()
        received += 1
        seq = int(message.headers[SEQ_HEADER])
        if not seen[seq]:
            seen[seq] = 1
            distinct += 1
        if distinct == count:
            break
    return {"received": received, "distinct": distinct, "seconds": time.perf_counter() - t0, "cpu": _cpu() - c0}


async def _aio_consume(spec: Dict[str, Any]) -> Dict[str, Any]:
    import amqstomp.aio

    count = spec["count"]
    ack = spec["ack"]
    optimized = spec["api"] == "aio-optimized"
    async with amqstomp.aio.connect(spec["url"]) as client:
        async with client.subscribe(spec["queue"], ack="client" if optimized else ack, prefetch_size=spec["prefetch"],
                                    optimize_acknowledge=optimized) as sub:
            if optimized:
                return await _aio_optimized(sub, count)  # the last ACK leaves as the subscription closes
            if spec["api"] not in ("aio", AIO_UVLOOP):
                return await _aio_handlers(sub, count, spec["api"])
            received = 0
            t0 = c0 = 0.0
            async for message in sub:
                if received == 0:
                    t0, c0 = time.perf_counter(), _cpu()
                received += 1
                if ack != "auto":
                    await message.ack()
                if received == count:
                    break
            t1, c1 = time.perf_counter(), _cpu()
    return {"received": received, "seconds": t1 - t0, "cpu": c1 - c0}


def _threaded_consume(spec: Dict[str, Any]) -> Dict[str, Any]:
    import amqstomp

    count = spec["count"]
    ack = spec["ack"]
    state: Dict[str, Any] = {"n": 0, "t0": 0.0, "c0": 0.0, "t1": 0.0, "c1": 0.0}
    done = threading.Event()
    host, port = spec["url"][len("stomp://"):].split(":")
    conn = amqstomp.Connection12([(host, int(port))], auto_decode=False, heartbeats=(0, 0))

    class Listener(amqstomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            if state["n"] == 0:
                state["t0"], state["c0"] = time.perf_counter(), _cpu()
            state["n"] += 1
            if ack != "auto":
                conn.ack(frame.headers["ack"])
            if state["n"] == count:
                state["t1"], state["c1"] = time.perf_counter(), _cpu()
                done.set()

    conn.set_listener("bench", Listener())
    conn.connect(wait=True, timeout=30)
    conn.subscribe(spec["queue"], id="1", ack=ack, headers={"activemq.prefetchSize": spec["prefetch"]})
    done.wait(spec["deadline"])
    conn.disconnect()
    return {"received": state["n"], "seconds": state["t1"] - state["t0"], "cpu": state["c1"] - state["c0"]}


async def _aio_produce(spec: Dict[str, Any]) -> Dict[str, Any]:
    import amqstomp.aio

    body = _body(spec)
    count, batch = spec["count"], spec["batch"]
    async with amqstomp.aio.connect(spec["url"]) as client:
        t0, c0 = time.perf_counter(), _cpu()
        if batch:
            sent = 0
            while sent < count:
                async with client.transaction(timeout=60) as tx:  # COMMIT's RECEIPT awaited on exit
                    for _ in range(min(batch, count - sent)):
                        await tx.send(spec["queue"], body)
                        sent += 1
        else:
            for _ in range(count - 1):
                await client.send(spec["queue"], body, receipt=False)
            await client.send(spec["queue"], body, receipt=True, timeout=60)
        t1, c1 = time.perf_counter(), _cpu()
    return {"received": spec["count"], "seconds": t1 - t0, "cpu": c1 - c0}


def _threaded_produce(spec: Dict[str, Any]) -> Dict[str, Any]:
    import amqstomp

    body = _body(spec)
    count, batch = spec["count"], spec["batch"]
    host, port = spec["url"][len("stomp://"):].split(":")
    conn = amqstomp.Connection12([(host, int(port))], auto_decode=False, heartbeats=(0, 0))
    conn.connect(wait=True, timeout=30)
    t0, c0 = time.perf_counter(), _cpu()
    if batch:
        sent = 0
        while sent < count:
            tx = conn.begin()
            for _ in range(min(batch, count - sent)):
                conn.send(spec["queue"], body, headers={"transaction": tx})
                sent += 1
            receipt = "c-%d" % sent
            conn.commit(tx, headers={"receipt": receipt})
            conn.wait_for_receipt(receipt, timeout=60)
    else:
        for _ in range(count - 1):
            conn.send(spec["queue"], body)
        receipt = "r-" + uuid.uuid4().hex
        conn.send(spec["queue"], body, headers={"receipt": receipt})
        conn.wait_for_receipt(receipt, timeout=60)
    t1, c1 = time.perf_counter(), _cpu()
    conn.disconnect()
    return {"received": spec["count"], "seconds": t1 - t0, "cpu": c1 - c0}


def _stompman_server(spec: Dict[str, Any]) -> Any:
    import stompman

    host, port = spec["url"][len("stomp://"):].split(":")
    return stompman.Client(servers=[stompman.ConnectionParameters(host=host, port=int(port), login="",
                                                                  passcode="")],
                           heartbeat=stompman.Heartbeat(0, 0))


async def _stompman_consume(spec: Dict[str, Any]) -> Dict[str, Any]:
    """stompman's ``subscribe`` handler form: the handler runs in a task per message, and
    stompman sends the ACK (client-individual) when it returns."""
    count = spec["count"]
    state = {"n": 0, "t0": 0.0, "c0": 0.0, "t1": 0.0, "c1": 0.0}
    done = asyncio.Event()

    async def handler(frame: Any) -> None:
        if state["n"] == 0:
            state["t0"], state["c0"] = time.perf_counter(), _cpu()
        state["n"] += 1
        if state["n"] == count:
            state["t1"], state["c1"] = time.perf_counter(), _cpu()
            done.set()

    async with _stompman_server(spec) as client:
        sub = await client.subscribe(spec["queue"], handler, ack=spec["ack"],
                                     headers={"activemq.prefetchSize": str(spec["prefetch"])},
                                     on_suppressed_exception=lambda exc, frame: print(repr(exc), file=sys.stderr))
        try:
            await asyncio.wait_for(done.wait(), spec["deadline"])
        except asyncio.TimeoutError:
            pass
        await asyncio.sleep(0.2)  # the last ACK leaves after its handler's task ends
        await sub.unsubscribe()
    return {"received": state["n"], "seconds": state["t1"] - state["t0"], "cpu": state["c1"] - state["c0"]}


async def _stompman_produce(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Sends without receipts, then one with a receipt. Transacted (``batch``): stompman cannot
    ask a RECEIPT for a COMMIT, so its COMMITs are written, not waited; one SEND with a receipt
    after the last one (outside any transaction: one message more) ends the timed span once the
    broker has processed every COMMIT. That favours stompman: its batches are pipelined."""
    body = _body(spec)
    count, batch = spec["count"], spec["batch"]
    async with _stompman_server(spec) as client:
        t0, c0 = time.perf_counter(), _cpu()
        if batch:
            sent = 0
            while sent < count:
                async with client.begin() as tx:
                    for _ in range(min(batch, count - sent)):
                        await tx.send(body, spec["queue"])
                        sent += 1
            await client.send(body, spec["queue"], receipt_timeout=60)
        else:
            for _ in range(count - 1):
                await client.send(body, spec["queue"])
            await client.send(body, spec["queue"], receipt_timeout=60)
        t1, c1 = time.perf_counter(), _cpu()
    return {"received": spec["count"], "seconds": t1 - t0, "cpu": c1 - c0}


def _produces(case: str) -> bool:
    return case.startswith("produce")


def _raw_consume(spec: Dict[str, Any]) -> Dict[str, Any]:
    """``raw-stomp``: the broker's ceiling (bench/_raw_stomp.py), timed from its first message."""
    host, port = _raw_stomp.split_url(spec["url"])
    report = _raw_stomp.consume(host, port, spec["queue"], spec["count"], spec["prefetch"], spec["deadline"])
    if report["status"] != "ok":
        raise SystemExit("raw-stomp: %s" % report)
    return {"received": report["received"], "distinct": report["distinct"], "seconds": report["span_s"],
            "cpu": report["consume_cpu_from_first_s"]}


def child_main(spec_json: str) -> None:
    spec = json.loads(spec_json)
    if spec["api"] == _raw_stomp.RAW:
        result = _raw_consume(spec)
    elif spec["api"] == "stompman":
        result = asyncio.run(_stompman_produce(spec) if _produces(spec["case"]) else _stompman_consume(spec))
    elif spec["api"].startswith("aio"):
        coro = _aio_produce(spec) if _produces(spec["case"]) else _aio_consume(spec)
        if spec["api"] == AIO_UVLOOP:
            import uvloop
            result = uvloop.run(coro)
        else:
            result = asyncio.run(coro)
    else:
        result = _threaded_produce(spec) if _produces(spec["case"]) else _threaded_consume(spec)
    print(json.dumps(result))


def reader_probe(count: int = 200000, runs: int = 3) -> Dict[str, Any]:
    """asyncio.Protocol against a StreamReader task, the two ways to read a socket on the loop:
    a local server writes ``count`` MESSAGE frames (256 B bodies) over loopback TCP at once; the
    client feeds what it reads to the core's ProtocolState (the compiled codec). CPU seconds of
    this process per message (the server's share included, the same in both), median of ``runs``."""
    from amqstomp._core.state import ProtocolState
    from amqstomp.codec import encode_frame

    frame = encode_frame("MESSAGE", {"subscription": "1", "message-id": "ID:x-1:1:1:1:1", "destination": "/queue/a",
                                     "ack": "1"}, b"x" * BODY)
    payload = frame * count

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(payload)
        await writer.drain()
        writer.close()

    class Counting(asyncio.Protocol):
        def __init__(self, done: "asyncio.Future[None]") -> None:
            self.proto = ProtocolState()
            self.proto.connected_frame = self.proto.parser.feed(b"CONNECTED\nversion:1.2\n\n\x00")[0]
            self.n = 0
            self.done = done

        def data_received(self, data: bytes) -> None:
            self.n += len(self.proto.receive_data(data, 0.0))
            if self.n >= count and not self.done.done():
                self.done.set_result(None)

    async def one(kind: str) -> float:
        loop = asyncio.get_running_loop()
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        c0 = _cpu()
        if kind == "protocol":
            done: "asyncio.Future[None]" = loop.create_future()
            transport, _ = await loop.create_connection(lambda: Counting(done), "127.0.0.1", port)
            await done
            transport.close()
        else:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            proto = ProtocolState()
            proto.connected_frame = proto.parser.feed(b"CONNECTED\nversion:1.2\n\n\x00")[0]
            n = 0
            while n < count:
                data = await reader.read(262144)
                if not data:
                    break
                n += len(proto.receive_data(data, 0.0))
            writer.close()
        cpu = _cpu() - c0
        server.close()
        await server.wait_closed()
        return cpu / count * 1e6

    out: Dict[str, Any] = {}
    for kind in ("protocol", "stream-reader"):
        values = [asyncio.run(one(kind)) for _ in range(runs)]
        out[kind] = {"cpu_us_per_msg": statistics.median(values), "runs": values}
        print("reader probe %-14s %.2f us CPU/msg (runs: %s)" % (kind, out[kind]["cpu_us_per_msg"],
                                                                 ", ".join("%.2f" % v for v in values)), flush=True)
    return out


CASES = [("auto-p1000", "auto", 1000), ("client-individual-p1", "client-individual", 1), ("produce", "", 0),
         ("handlers-p1000", "client-individual", 1000)]
#: the APIs compared per case (default: aio and threaded)
APIS = {"handlers-p1000": ("aio", "aio-run4", "aio-sem4")}
#: ``--stompman``: (case, ack, prefetch, APIs)
STOMPMAN_CASES = [("ack-p1000", "client-individual", 1000, ("aio", "aio-optimized", "aio-run", "stompman",
                                                              _raw_stomp.RAW)),
                  ("client-individual-p1", "client-individual", 1, ("aio", "threaded", "stompman", _raw_stomp.RAW)),
                  ("produce", "", 0, ("aio", "threaded", "stompman")),
                  ("consume-1mib", "client-individual", 1000, ("aio", "threaded", "stompman")),
                  ("produce-tx100", "", 0, ("aio", "threaded", "stompman"))]


#: why ``--stompman`` has no batched-ack stompman row beside ``aio-optimized``
STOMPMAN_BATCHING = ("none: stompman 3.16 writes one ACK frame per message (its subscribe handler form on the "
                     "handler's return, or message.ack()), for ack client as for client-individual; it has no "
                     "cumulative or batched acknowledgement to compare with amqstomp's optimize_acknowledge")


def with_loop(case: str, apis: Any, loop: str) -> Any:
    """``apis`` with :data:`AIO_UVLOOP` after ``aio`` when ``loop`` is ``uvloop`` and ``case`` is one
    of :data:`UVLOOP_CASES` (the case tables stay as they are)."""
    apis = tuple(apis)
    if loop != "uvloop" or case not in UVLOOP_CASES or "aio" not in apis:
        return apis
    at = apis.index("aio") + 1
    return apis[:at] + (AIO_UVLOOP,) + apis[at:]


def _run_case(broker: Any, url: str, case: str, ack: str, prefetch: int, apis: Any,
              args: Any) -> Dict[str, List[Dict[str, Any]]]:
    """``args.runs`` repetitions of ``case``, the APIs interleaved (the machine's load moves them alike);
    with ``--loop uvloop``, amqstomp.aio on uvloop too (:func:`with_loop`)."""
    apis = with_loop(case, apis, getattr(args, "loop", "asyncio"))
    runs: Dict[str, List[Dict[str, Any]]] = {api: [] for api in apis}
    count = case_count(case, args)
    body = CASE_BODY.get(case, BODY)
    for _ in range(args.runs):
        for api in apis:
            queue = "/queue/bench-aio-%s" % uuid.uuid4().hex[:8]
            if not _produces(case):
                fill_queue(broker.host_and_ports, queue, count, body)
            spec = {"api": api, "case": case, "ack": ack, "prefetch": prefetch, "count": count, "body": body,
                    "batch": CASE_BATCH.get(case, 0), "queue": queue, "url": url, "deadline": args.deadline}
            child = run_child([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                              args.deadline + 30)
            try:
                result = json.loads(child.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                raise SystemExit("%s %s failed: %s" % (api, case, child.stderr[-2000:]))
            if result.get("distinct", result["received"]) != count:
                raise SystemExit("%s %s: %d of %d messages (%s distinct)" % (
                    api, case, result["received"], count, result.get("distinct", "not counted")))
            if not _produces(case):
                result["dequeued"] = _dequeued(broker, queue, count, api, case)
            runs[api].append(result)
    return runs


def _dequeued(broker: Any, queue: str, count: int, api: str, case: str) -> int:
    """The broker's dequeueCount of ``queue`` once its consumer closed: it must have every message
    ACKed (``count``) and none left (size and in-flight 0), else the run ends (SystemExit): an
    at-least-once consumer that lost an ACK is no row to compare."""
    stats = wait_queue_statistics(broker, queue[len("/queue/"):], lambda s: s.get("dequeueCount", 0) >= count and
                                  not s.get("size") and not s.get("inflightCount"), timeout=10.0)
    if stats.get("dequeueCount") != count or stats.get("size") or stats.get("inflightCount"):
        raise SystemExit("%s %s: the broker's queue after the consumer closed: %r (expected %d dequeued, none left)"
                         % (api, case, stats, count))
    return int(stats["dequeueCount"])


def case_count(case: str, args: Any) -> int:
    """Messages per repetition of ``case``: ``--big-count`` for the 1 MiB case, else ``--count``."""
    return int(getattr(args, "big_count", 50)) if case in BIG_CASES else int(args.count)


def _summarise(case: str, runs: Dict[str, List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    rows = []
    for api, results in runs.items():
        rates = [r["received"] / r["seconds"] for r in results]
        cpus = [r["cpu"] / r["received"] * 1e6 for r in results]
        rows.append({"case": case, "api": api, "body": CASE_BODY.get(case, BODY), "count": results[0]["received"],
                     "msg_per_s": statistics.median(rates),
                     "cpu_us_per_msg": statistics.median(cpus), "runs": results})
        print("%-22s %-9s %9.0f msg/s %6.1f us CPU/msg  (runs: %s; %s us)" % (
            case, api, rows[-1]["msg_per_s"], rows[-1]["cpu_us_per_msg"],
            ", ".join("%.0f" % r for r in rates), ", ".join("%.1f" % c for c in cpus)), flush=True)
    return rows


def _ceiling_ratios(case: str, runs: Dict[str, List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Per repetition: each API's msg/s over the raw ceiling's (``raw-stomp``, the broker's round
    trip bound: about 1 at most for a client-individual consumer), and its CPU per message over the
    raw client's; then the median. Empty when the case has no raw row."""
    out: List[Dict[str, Any]] = []
    for api, results in runs.items() if _raw_stomp.RAW in runs else ():
        if api == _raw_stomp.RAW:
            continue
        pairs = list(zip(results, runs[_raw_stomp.RAW]))
        rate = [(a["received"] / a["seconds"]) / (r["received"] / r["seconds"]) for a, r in pairs]
        cpu = [(a["cpu"] / a["received"]) / (r["cpu"] / r["received"]) for a, r in pairs]
        out.append({"case": case, "api": api, "rate_vs_raw": statistics.median(rate),
                    "cpu_vs_raw": statistics.median(cpu), "rate_vs_raw_runs": rate, "cpu_vs_raw_runs": cpu})
        print("%-22s %-13s / raw ceiling: %.2fx msg/s, %.2fx its CPU/msg (runs: %s)" % (
            case, api, out[-1]["rate_vs_raw"], out[-1]["cpu_vs_raw"], ", ".join("%.2f" % r for r in rate)), flush=True)
    return out


def _stompman_ratios(case: str, runs: Dict[str, List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Per repetition: each amqstomp API's msg/s over stompman's, and stompman's CPU per message
    over the API's (both > 1 when amqstomp is ahead); then the median of the repetitions."""
    out = []
    for api, results in runs.items():
        if api == "stompman":
            continue
        pairs = list(zip(results, runs["stompman"]))
        rate = [(a["received"] / a["seconds"]) / (s["received"] / s["seconds"]) for a, s in pairs]
        cpu = [(s["cpu"] / s["received"]) / (a["cpu"] / a["received"]) for a, s in pairs]
        out.append({"case": case, "api": api, "rate_ratio": statistics.median(rate),
                    "cpu_ratio": statistics.median(cpu), "rate_ratios": rate, "cpu_ratios": cpu})
        print("%-22s %-9s vs stompman: %.2fx msg/s, %.2fx less CPU/msg (runs: %s; %s)" % (
            case, api, out[-1]["rate_ratio"], out[-1]["cpu_ratio"], ", ".join("%.2f" % r for r in rate),
            ", ".join("%.2f" % c for c in cpu)), flush=True)
    return out


def _stompman_main(args: Any) -> Dict[str, Any]:
    import importlib.metadata

    rows: List[Dict[str, Any]] = []
    ratios: List[Dict[str, Any]] = []
    ceiling: List[Dict[str, Any]] = []
    with start_broker() as broker:
        host, port = broker.host_and_ports[0]
        url = "stomp://%s:%d" % (host, port)
        for case, ack, prefetch, apis in STOMPMAN_CASES:
            if args.cases and case not in args.cases.split(","):
                continue
            runs = _run_case(broker, url, case, ack, prefetch, apis, args)
            rows += _summarise(case, runs)
            ratios += _stompman_ratios(case, runs)
            ceiling += _ceiling_ratios(case, runs)
    vs_stompman = {(r["case"], r["api"]): "%.2fx" % r["rate_ratio"] for r in ratios}
    vs_raw = {(r["case"], r["api"]): "%.2fx" % r["rate_vs_raw"] for r in ceiling}
    print(format_table([[r["case"], r["api"], "%.0f" % r["msg_per_s"], "%.1f" % r["cpu_us_per_msg"],
                         vs_stompman.get((r["case"], r["api"]), "-"), vs_raw.get((r["case"], r["api"]), "-")]
                        for r in rows],
                       ["case", "API", "msg/s (median)", "CPU us/msg (median)", "msg/s / stompman",
                        "msg/s / raw ceiling"]))
    machine = machine_info()
    machine["stompman"] = importlib.metadata.version("stompman")
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    section = {"machine": machine, "measured": when, "count": args.count, "big_count": args.big_count, "body": BODY,
               "case_body": CASE_BODY, "case_batch": CASE_BATCH, "runs": args.runs, "rows": rows, "ratios": ratios, "ceiling": ceiling,
               "stompman_batched_acks": STOMPMAN_BATCHING}
    if args.json:
        old = _merged(args.json, {}).get("stompman")
        write_json(args.json, _merged(args.json, {"stompman": merged_section(old, section)}))
    return section


def merged_section(old: Optional[Dict[str, Any]], new: Dict[str, Any]) -> Dict[str, Any]:
    """``new`` (a ``--stompman`` run, maybe of some ``--cases`` only) plus the rows and ratios of
    ``old`` for the cases ``new`` did not measure, so a run of one case does not erase the others'
    figures. Each kept row's run is described under ``earlier`` (its machine, load, count, time);
    the rows of ``new`` take the section's own ``machine`` and ``measured``."""
    cases = {row["case"] for row in new["rows"]}
    kept_rows = [r for r in (old or {}).get("rows", ()) if r.get("case") not in cases]
    if not kept_rows:
        return new
    assert old is not None
    kept = {key: [r for r in old.get(key, ()) if r.get("case") not in cases] for key in ("ratios", "ceiling")}
    earlier = list(old.get("earlier", ()))
    described = {case for run in earlier for case in run.get("cases", ())}
    left = sorted({r["case"] for r in kept_rows} - described)
    if left:
        earlier.append({"cases": left, **{k: old[k] for k in ("machine", "measured", "count", "runs") if k in old}})
    earlier = [dict(run, cases=[c for c in run["cases"] if c not in cases]) for run in earlier]
    out = dict(new, rows=kept_rows + new["rows"], ratios=kept["ratios"] + new["ratios"])
    if kept["ceiling"] or "ceiling" in new:
        out["ceiling"] = kept["ceiling"] + new.get("ceiling", [])
    out["earlier"] = [run for run in earlier if run["cases"]]
    return out


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--big-count", type=int, default=50,
                        help="messages per repetition of the 1 MiB case (--stompman's consume-1mib)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--json", nargs="?", const=default_json_path("aio"), default=None)
    parser.add_argument("--child", default=None)
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--stompman", action="store_true",
                        help="amqstomp.aio against stompman (merged into the JSON under 'stompman')")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                        help="uvloop: amqstomp.aio on uvloop's loop too (API %s) in %s" % (AIO_UVLOOP,
                                                                                        ", ".join(UVLOOP_CASES)))
    parser.add_argument("--reader-probe", action="store_true",
                        help="only compare asyncio.Protocol with a StreamReader task (no broker)")
    args = parser.parse_args(argv)
    if args.child is not None:
        child_main(args.child)
        return {}
    if args.reader_probe:
        return reader_probe()
    if args.stompman:
        return _stompman_main(args)
    rows: List[Dict[str, Any]] = []
    with start_broker() as broker:
        host, port = broker.host_and_ports[0]
        url = "stomp://%s:%d" % (host, port)
        for case, ack, prefetch in CASES:
            if args.cases and case not in args.cases.split(","):
                continue
            apis = APIS.get(case, ("aio", "threaded"))
            rows += _summarise(case, _run_case(broker, url, case, ack, prefetch, apis, args))
    print(format_table([[r["case"], r["api"], "%.0f" % r["msg_per_s"], "%.1f" % r["cpu_us_per_msg"]] for r in rows],
                       ["case", "API", "msg/s (median)", "CPU us/msg (median)"]))
    report = {"machine": machine_info(), "count": args.count, "body": BODY, "rows": rows}
    if args.json:
        write_json(args.json, _merged(args.json, report))
    return report


def _merged(path: str, update: Dict[str, Any]) -> Dict[str, Any]:
    """The JSON report at ``path`` (if any) with ``update``'s keys replaced: a run of the
    default cases keeps the ``stompman`` section, and ``--stompman`` keeps the rest."""
    report: Dict[str, Any] = {}
    if os.path.exists(path):
        with open(path) as fh:
            report = json.load(fh)
    report.update(update)
    return report


if __name__ == "__main__":
    main()
