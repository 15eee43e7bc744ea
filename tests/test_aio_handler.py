"""The handler form of amqstomp.aio (``await sub.run(handler, concurrency=N)``) against the
real ActiveMQ the test session starts: returning ACKs, raising redelivers by the redelivery
policy and then NACKs (ActiveMQ's dead-letter queue), at most N handlers at once, and closing
(the subscription, the client, or cancelling run) ends every worker task."""
import asyncio
import time
from typing import Any, Dict, List

import pytest

import amqstomp.aio
from amqstomp.aio import Message
from amqstomp.exception import ConfigurationError
from amqstomp.flow import RedeliveryPolicy
from aio_support import new_queue, run, url

pytestmark = pytest.mark.timeout(60)


def queue() -> str:
    return new_queue("aio-handler")


async def until(predicate: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "not reached within %s s" % seconds
        await asyncio.sleep(0.01)


async def drained(client: amqstomp.aio.Client, dest: str) -> List[Any]:
    """What a new client-individual subscription to ``dest`` gets within 0.5 s (acked: none back)."""
    got = []
    async with client.subscribe(dest, ack="client-individual") as sub:
        try:
            while True:
                got.append((await sub.get(timeout=0.5)).body)
        except asyncio.TimeoutError:
            return got


def others() -> set:
    """The tasks running besides this test's own (its coroutine, and run()'s bounding task)."""
    mine = {asyncio.current_task()}
    return {task for task in asyncio.all_tasks() - mine if task.get_coro().__qualname__ != "run.<locals>.bounded"}


def test_return_acks_and_concurrency_is_bounded(activemq):
    dest = queue()
    count, limit = 40, 4

    async def main() -> Dict[str, Any]:
        in_flight, seen = [0, 0], []
        async with amqstomp.aio.connect(url(activemq)) as client:
            for i in range(count):
                await client.send(dest, b"%d" % i, receipt=(i == count - 1))

            async def handler(message: Message) -> None:
                in_flight[0] += 1
                in_flight[1] = max(in_flight[1], in_flight[0])
                await asyncio.sleep(0.02)
                seen.append(message.body)
                in_flight[0] -= 1

            async with client.subscribe(dest, ack="client-individual", prefetch_size=20) as sub:
                runner = asyncio.ensure_future(sub.run(handler, concurrency=limit))
                await until(lambda: len(seen) == count)
                await sub.close()
                await asyncio.wait_for(runner, 5)  # run() ends with its subscription
                assert len(others()) == 0, others()
            back = await drained(client, dest)
        return {"max": in_flight[1], "seen": sorted(seen), "back": back}

    result = run(main())
    assert result["max"] == limit  # never above N, and N did run at once
    assert result["seen"] == sorted(b"%d" % i for i in range(count))
    assert result["back"] == []  # every one was ACKed


def test_raise_redelivers_by_the_policy_then_nacks(activemq):
    dest = queue()
    policy = RedeliveryPolicy(maximum_redeliveries=2, initial_redelivery_delay_ms=20, back_off_multiplier=1.0)

    async def main() -> Dict[str, Any]:
        counts: Dict[bytes, List[int]] = {b"bad": [], b"flaky": [], b"good": []}
        errors: List[str] = []
        async with amqstomp.aio.connect(url(activemq)) as client:
            for body in (b"bad", b"flaky", b"good"):
                await client.send(dest, body, {"persistent": "true"})

            async def handler(message: Message) -> None:
                body = message.body
                assert isinstance(body, bytes)
                counts[body].append(message.delivery_count)
                if body == b"bad" or (body == b"flaky" and len(counts[body]) == 1):
                    raise ValueError("refused %s" % body.decode())

            async with client.subscribe(dest, ack="client-individual", prefetch_size=10,
                                        redelivery_policy=policy) as sub:
                runner = asyncio.ensure_future(sub.run(handler, concurrency=2,
                                                       on_error=lambda exc, m: errors.append(str(exc))))
                await until(lambda: len(counts[b"bad"]) == 3 and len(counts[b"flaky"]) == 2
                            and len(counts[b"good"]) == 1)
                await asyncio.sleep(0.3)  # no 4th delivery of "bad": poisoned
                await sub.close()
                await asyncio.wait_for(runner, 5)
            back = await drained(client, dest)
            async with client.subscribe("/queue/ActiveMQ.DLQ", ack="client-individual") as dlq:
                dead = []
                try:
                    while True:
                        message = await dlq.get(timeout=2)
                        if message.headers.get("original-destination") == dest or message.body == b"bad":
                            dead.append(message.body)
                            await message.ack()
                            break
                except asyncio.TimeoutError:
                    pass
        return {"counts": counts, "errors": errors, "back": back, "dead": dead}

    result = run(main())
    assert result["counts"] == {b"bad": [1, 2, 3], b"flaky": [1, 2], b"good": [1]}
    assert result["errors"].count("refused bad") == 3 and result["errors"].count("refused flaky") == 1
    assert result["back"] == []  # ACKed, or NACKed
    assert result["dead"] == [b"bad"]  # the NACK: ActiveMQ's dead-letter queue


def test_auto_raise_is_consumed(activemq):
    dest = queue()

    async def main() -> Dict[str, Any]:
        calls: List[Any] = []
        errors: List[Exception] = []
        async with amqstomp.aio.connect(url(activemq)) as client:
            async with client.subscribe(dest) as sub:
                async def handler(message: Message) -> None:
                    calls.append(message.body)
                    raise RuntimeError("boom")
                runner = asyncio.ensure_future(sub.run(handler, concurrency=3, on_error=lambda e, m: errors.append(e)))
                await client.send(dest, b"once")
                await until(lambda: len(calls) == 1)
                await asyncio.sleep(0.3)
                runner.cancel()  # cancelling run ends its workers
                with pytest.raises(asyncio.CancelledError):
                    await runner
                assert len(others()) == 0, others()
        return {"calls": calls, "errors": [type(e) for e in errors]}

    assert run(main()) == {"calls": [b"once"], "errors": [RuntimeError]}


def test_client_close_bounds_a_handler_that_never_returns(activemq):
    dest = queue()

    async def main() -> Dict[str, Any]:
        started = asyncio.Event()
        client = await amqstomp.aio.connect(url(activemq))
        for body in (b"stuck", b"waiting"):
            await client.send(dest, body)
        sub = client.subscribe(dest, ack="client-individual", prefetch_size=5)
        await sub.__aenter__()

        async def handler(message: Message) -> None:
            started.set()
            await asyncio.Event().wait()  # never returns

        runner = asyncio.ensure_future(sub.run(handler, concurrency=1))
        await asyncio.wait_for(started.wait(), 10)
        began = time.monotonic()
        await client.close(timeout=1.0)
        took = time.monotonic() - began
        await asyncio.wait_for(runner, 5)  # ended by the close, not left behind
        left = others()
        async with amqstomp.aio.connect(url(activemq)) as again:
            back = sorted(await drained(again, dest))
        return {"took": took, "left": left, "back": back}

    result = run(main())
    assert result["took"] < 4.0, result  # the close timeout (1 s) bounds the handler, then DISCONNECT
    assert result["left"] == set()
    assert result["back"] == [b"stuck", b"waiting"]  # never ACKed: the broker has them again


def test_run_refuses_what_it_cannot_settle(activemq):
    async def main() -> List[str]:
        refused = []
        async with amqstomp.aio.connect(url(activemq)) as client:
            async def handler(message: Message) -> None:
                pass
            cases = [({"ack": "client"}, 2), ({"ack": "client", "optimize_acknowledge": True}, 1),
                     ({"ack": "client-individual"}, 0), ({"ack": "client-individual"}, True)]
            for options, concurrency in cases:
                async with client.subscribe(queue(), **options) as sub:
                    with pytest.raises(ConfigurationError) as info:
                        await sub.run(handler, concurrency=concurrency)
                    refused.append(str(info.value).split(" ")[0])
                    assert sub.workers is None
        return refused

    assert run(main()) == ["ack='client'", "run()", "concurrency", "concurrency"]


def test_ack_client_with_one_worker_acks(activemq):
    dest = queue()

    async def main() -> List[Any]:
        seen: List[Any] = []
        async with amqstomp.aio.connect(url(activemq)) as client:
            for i in range(10):
                await client.send(dest, b"%d" % i)
            async with client.subscribe(dest, ack="client", prefetch_size=3) as sub:
                async def handler(message: Message) -> None:
                    seen.append(message.body)
                runner = asyncio.ensure_future(sub.run(handler))
                await until(lambda: len(seen) == 10)
            await asyncio.wait_for(runner, 5)
            return [seen, await drained(client, dest)]

    seen, back = run(main())
    assert seen == [b"%d" % i for i in range(10)]  # one worker: in order
    assert back == []


def test_close_from_a_handler_and_during_a_redelivery_delay(activemq):
    """A handler that closes its own subscription ends run() (no worker waits for itself); a
    close while a worker waits out a long redelivery delay does not wait for the delay."""
    dest, other = queue(), queue()

    async def main() -> Dict[str, Any]:
        async with amqstomp.aio.connect(url(activemq)) as client:
            await client.send(dest, b"last")
            async with client.subscribe(dest, ack="client-individual") as sub:
                async def closer(message: Message) -> None:
                    await sub.close()
                await asyncio.wait_for(sub.run(closer, concurrency=2), 5)
            slow = RedeliveryPolicy(maximum_redeliveries=3, initial_redelivery_delay_ms=60000)
            await client.send(other, b"refused")
            failed = asyncio.Event()
            async with client.subscribe(other, ack="client-individual", redelivery_policy=slow) as sub:
                async def refuse(message: Message) -> None:
                    failed.set()
                    raise ValueError("no")
                runner = asyncio.ensure_future(sub.run(refuse, on_error=lambda e, m: None))
                await asyncio.wait_for(failed.wait(), 10)
                began = time.monotonic()
                await sub.close(timeout=5)
                took = time.monotonic() - began
                await asyncio.wait_for(runner, 5)
            left = others()
            back = await drained(client, other)
            with pytest.raises(ConfigurationError, match="async with"):
                await client.subscribe(other).run(refuse)  # not entered: nothing to run on
        return {"took": took, "left": left, "back": back}

    result = run(main())
    assert result["took"] < 3.0, result  # not the 60 s delay, not the 5 s close timeout
    assert result["left"] == set() and result["back"] == [b"refused"]  # unacknowledged: redelivered
