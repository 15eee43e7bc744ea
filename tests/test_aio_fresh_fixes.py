"""A fresh user's findings in amqstomp.aio (task freshfix), each fixed with a test that failed
before, against the session's real ActiveMQ: a handler closing its client (F1), a
subscription entered twice (F2), a refused SUBSCRIBE (F4), a close inside a transaction (F5)."""
import asyncio
import logging
import time
from typing import Any, Dict, List

import pytest

import amqstomp.aio
from amqstomp.aio import Message
from amqstomp.exception import BrokerError, ConfigurationError, TransactionRolledBackError
from aio_support import drained, new_queue, run, url

pytestmark = pytest.mark.timeout(60)


def others() -> set:
    """The tasks running besides this test's own (its coroutine, and run()'s bounding task)."""
    mine = {asyncio.current_task()}
    return {task for task in asyncio.all_tasks() - mine if task.get_coro().__qualname__ != "run.<locals>.bounded"}


# ------------------------------------------------------------ F1. client.close() from a handler

def test_handler_closing_its_client_returns(activemq, caplog):
    """``await client.close()`` inside a run() handler: the close returns (it does not wait for
    the handler calling it), run() ends, nothing is left running, no RecursionError; the
    message whose handler closed is unacknowledged (the DISCONNECT came first): redelivered."""
    dest = new_queue("fresh-selfclose")

    async def main() -> Dict[str, Any]:
        client = await amqstomp.aio.connect(url(activemq), close_timeout=2)
        await client.send(dest, b"stop")
        closed = []
        began = time.monotonic()
        async with client.subscribe(dest, ack="client-individual") as sub:
            async def handle(message: Message) -> None:
                await client.close()
                closed.append(time.monotonic() - began)
            await asyncio.wait_for(sub.run(handle), 10)
        took = time.monotonic() - began
        left = others()
        async with amqstomp.aio.connect(url(activemq)) as again:
            back = await drained(again, dest)
        return {"closed": closed, "took": took, "left": left, "back": back}

    with caplog.at_level(logging.DEBUG):
        result = run(main(), bound=20)
    assert len(result["closed"]) == 1 and result["closed"][0] < 1.5, result  # not the 2 s close_timeout
    assert result["took"] < 1.5 and result["left"] == set(), result
    assert result["back"] == [b"stop"]
    assert "RecursionError" not in caplog.text and "Traceback" not in caplog.text


def test_handler_closing_its_client_while_another_subscription_runs(activemq):
    """A handler of subscription A closes the client while B's handler is running: B's handler
    gets the close timeout to finish, A's handler is not waited for (it is the caller)."""
    one, two = new_queue("fresh-close-a"), new_queue("fresh-close-b")

    async def main() -> Dict[str, Any]:
        client = await amqstomp.aio.connect(url(activemq), close_timeout=2)
        await client.send(two, b"slow")
        b_started = asyncio.Event()
        b_done: List[Any] = []
        closed: List[float] = []
        sub_a = client.subscribe(one, ack="client-individual")
        sub_b = client.subscribe(two, ack="client-individual")
        await sub_a.__aenter__()
        await sub_b.__aenter__()

        async def slow(message: Message) -> None:
            b_started.set()
            await asyncio.sleep(0.5)
            b_done.append(message.body)

        async def closer(message: Message) -> None:
            began = time.monotonic()
            await client.close()
            closed.append(time.monotonic() - began)

        run_b = asyncio.ensure_future(sub_b.run(slow))
        await asyncio.wait_for(b_started.wait(), 10)
        run_a = asyncio.ensure_future(sub_a.run(closer))
        await client.send(one, b"close")
        await asyncio.wait_for(asyncio.gather(run_a, run_b), 10)
        await sub_a.__aexit__(None, None, None)
        await sub_b.__aexit__(None, None, None)
        left = others()
        async with amqstomp.aio.connect(url(activemq)) as again:
            back = [await drained(again, one), await drained(again, two)]
        return {"closed": closed, "b_done": b_done, "left": left, "back": back}

    result = run(main(), bound=30)
    assert result["b_done"] == [b"slow"], result  # the other handler finished within the close timeout
    assert len(result["closed"]) == 1 and result["closed"][0] < 1.9, result
    assert result["left"] == set(), result
    assert result["back"] == [[b"close"], []], result  # B's ACK was written before the DISCONNECT


def test_handler_closing_another_subscription(activemq):
    """A handler of A closes subscription B (whose handler is idle): both end, nothing hangs."""
    one, two = new_queue("fresh-subclose-a"), new_queue("fresh-subclose-b")

    async def main() -> List[Any]:
        async with amqstomp.aio.connect(url(activemq), close_timeout=2) as client:
            async with client.subscribe(one, ack="client-individual") as sub_a, \
                    client.subscribe(two, ack="client-individual") as sub_b:
                async def closer(message: Message) -> None:
                    await sub_b.close()

                async def idle(message: Message) -> None:
                    pass
                run_b = asyncio.ensure_future(sub_b.run(idle))
                run_a = asyncio.ensure_future(sub_a.run(closer))
                await client.send(one, b"x")
                await asyncio.wait_for(run_b, 10)
                await sub_a.close()
                await asyncio.wait_for(run_a, 10)
            return [await drained(client, one), sorted(map(repr, others()))]

    assert run(main(), bound=30) == [[], []]


def test_close_is_bounded_by_a_handler_ignoring_its_cancellation(activemq, caplog):
    """A handler that swallows its cancellation does not hold client.close() past its timeout
    (it is left running, a WARNING says so); released afterwards, run() ends."""
    dest = new_queue("fresh-stubborn")

    async def main() -> Dict[str, Any]:
        release = asyncio.Event()
        started = asyncio.Event()
        client = await amqstomp.aio.connect(url(activemq))
        await client.send(dest, b"stubborn")
        sub = client.subscribe(dest, ack="client-individual")
        await sub.__aenter__()

        async def stubborn(message: Message) -> None:
            started.set()
            for _ in range(100):  # bounded: released by the test
                try:
                    await release.wait()
                    return
                except asyncio.CancelledError:
                    continue

        runner = asyncio.ensure_future(sub.run(stubborn))
        await asyncio.wait_for(started.wait(), 10)
        began = time.monotonic()
        await client.close(timeout=1.0)
        took = time.monotonic() - began
        release.set()
        await asyncio.wait_for(runner, 5)
        return {"took": took}

    with caplog.at_level(logging.WARNING, logger="amqstomp.aio"):
        result = run(main(), bound=20)
    assert result["took"] < 2.0, result
    assert "ignored their cancellation" in caplog.text


# ------------------------------------------------------------ F2. a subscription has one life

def test_subscription_entered_twice_or_after_close_is_refused(activemq):
    """A second ``async with`` of a subscription, while open or after its close, raises a
    ConfigurationError naming it (nothing SUBSCRIBEd again); the open one keeps working."""
    dest = new_queue("fresh-twice")

    async def main() -> List[str]:
        texts = []
        async with amqstomp.aio.connect(url(activemq)) as client:
            sub = client.subscribe(dest, ack="client-individual")
            async with sub:
                with pytest.raises(ConfigurationError) as info:
                    await sub.__aenter__()
                texts.append(str(info.value))
                await client.send(dest, b"one")
                message = await sub.get(timeout=5)
                await message.ack()  # still the one subscription: its ACK is written
            with pytest.raises(ConfigurationError) as info:
                async with sub:
                    pass
            texts.append(str(info.value))
            texts.append(repr(await drained(client, dest)))
        return texts

    entered, closed, back = run(main())
    assert "is open already" in entered and dest in entered, entered
    assert "has ended (closed by the application)" in closed and "client.subscribe(" in closed and dest in closed, closed
    assert back == "[]"


# ------------------------------------------------------------ F4. a refused SUBSCRIBE is not UNSUBSCRIBEd

def test_refused_subscribe_writes_no_unsubscribe(activemq, caplog):
    """ActiveMQ refuses a bad selector with an ERROR answering the SUBSCRIBE: BrokerError from
    the entry, and no UNSUBSCRIBE after it (ActiveMQ would answer a second ERROR, 'Cannot remove a
    consumer that had not been registered', reaching on_error and a WARNING)."""
    dest = new_queue("fresh-selector")

    async def main() -> Dict[str, Any]:
        errors: List[Any] = []
        async with amqstomp.aio.connect(url(activemq), on_error=errors.append) as client:
            with pytest.raises(BrokerError) as info:
                async with client.subscribe(dest, headers={"selector": "a = = ="}):
                    pass
            await asyncio.sleep(1.0)  # the second ERROR would come within this
            await client.send(dest, b"still")  # the connection is fine
            back = await drained(client, dest)
        return {"refused": str(info.value), "errors": [str(e) for e in errors], "back": back}

    with caplog.at_level(logging.DEBUG, logger="amqstomp"):
        result = run(main())
    assert result["errors"] == [] and result["back"] == [b"still"], result
    assert "had not been registered" not in caplog.text


# ------------------------------------------------------------ F5. client.close() inside a transaction

def test_close_inside_a_transaction_rolls_it_back(activemq, caplog):
    """``client.close()`` inside ``async with client.transaction()``: the COMMIT on exit raises
    TransactionRolledBackError (the broker rolled the transaction back with the connection, as
    for a lost socket: docs/guides/asyncio.md), not UnknownTransactionError (a ValueError); an
    exception in the block after the close goes on, the ABORT having nothing to do (no WARNING)."""
    dest = new_queue("fresh-txclose")

    async def main() -> Dict[str, Any]:
        client = await amqstomp.aio.connect(url(activemq))
        with pytest.raises(TransactionRolledBackError) as info:
            async with client.transaction() as tx:
                await tx.send(dest, b"t")
                await client.close()
        other = await amqstomp.aio.connect(url(activemq))
        with pytest.raises(KeyError):
            async with other.transaction() as tx:
                await tx.send(dest, b"u")
                await other.close()
                raise KeyError("mine")
        async with amqstomp.aio.connect(url(activemq)) as again:
            back = await drained(again, dest)
        return {"text": str(info.value), "back": back}

    with caplog.at_level(logging.WARNING, logger="amqstomp"):
        result = run(main())
    assert "rolled it back" in result["text"] and result["back"] == [], result
    assert "ABORT" not in caplog.text, caplog.text
