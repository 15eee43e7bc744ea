"""Issue 23, prefetch 1: a MESSAGE read by the loop resumes the receive waiting for it in the
same loop turn (amqstomp/aio/_wake.py), not one turn later through ``call_soon``; the
wake-up keeps a Future's rules everywhere else (cancellation, a resume from inside a task,
the task's context). The client's logic in memory (a real Client over a fake transport, the
bytes fed by hand from a loop callback, as the loop's reader does); nothing a broker decides."""
import asyncio
import contextvars
from typing import Any, List

import pytest

from amqstomp.aio._wake import Wake
from test_aio_fixes import memory_client, message, run, subscribed

pytestmark = pytest.mark.timeout(60)


def test_a_delivery_from_the_reading_callback_resumes_the_waiting_receive_before_it_returns():
    async def main() -> None:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire, ack="client-individual")
        seen: List[Any] = []

        async def consume() -> None:
            async for m in sub:
                seen.append(m.body)
                await m.ack()  # written at once, inside the same turn
                if len(seen) == 2:
                    return

        consumer = asyncio.ensure_future(consume())
        await asyncio.sleep(0)  # it waits in __anext__
        loop = asyncio.get_running_loop()
        after: List[Any] = []

        def reader(n: int) -> None:  # a loop callback, outside any task: as the selector's read
            message(link, sub, n)
            after.append((list(seen), len(wire.frames("ACK"))))

        loop.call_soon(reader, 1)
        await asyncio.sleep(0)
        assert after == [([b"body1"], 1)]  # handed and acked before the read's callback returned
        loop.call_soon(reader, 2)
        await asyncio.sleep(0)
        assert after[1] == ([b"body1", b"body2"], 2)
        await asyncio.wait_for(consumer, 2)
    run(main())


def test_the_frames_of_one_read_are_all_delivered_before_the_waiting_receive_resumes():
    # prefetch 1000: a read brings many MESSAGEs; the consumer, resumed once, takes them all in one
    # go (resumed at each, it would take one, find the queue empty and suspend again per message)
    async def main() -> None:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire)
        queued: List[int] = []

        async def consume() -> None:
            async for _m in sub:
                queued.append(len(sub._queue))  # what the read had delivered behind this one
                if len(queued) == 3:
                    return

        consumer = asyncio.ensure_future(consume())
        await asyncio.sleep(0)
        frames = b"".join(b"MESSAGE\nsubscription:%s\nmessage-id:m%d\ndestination:/queue/a\n\nbody\x00"
                          % (sub.id.encode(), n) for n in range(3))
        asyncio.get_running_loop().call_soon(link.data_received, frames)
        await asyncio.wait_for(consumer, 2)
        assert queued == [2, 1, 0]
    run(main())


def test_a_wake_up_from_inside_a_task_is_scheduled_like_a_futures():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        wake = Wake(loop)
        waiter = asyncio.ensure_future(_await(wake))
        await asyncio.sleep(0)
        wake.resume()  # from this task: a task cannot resume another while it runs
        assert not waiter.done()
        assert await asyncio.wait_for(waiter, 2) is None
        with pytest.raises(asyncio.InvalidStateError):
            wake.resume()
    run(main())


async def _await(wake: Wake) -> None:
    return await wake


def test_a_cancelled_wait_raises_cancelled_error_and_the_wake_up_is_cancelled():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        wake = Wake(loop)
        waiter = asyncio.ensure_future(_await(wake))
        await asyncio.sleep(0)
        waiter.cancel("stop")
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiter, 2)
        assert wake.cancelled() and wake.done()
        assert not wake.cancel()
        with pytest.raises(asyncio.CancelledError):
            wake.result()
    run(main())


def test_the_resumed_task_runs_in_its_own_context():
    var: "contextvars.ContextVar[str]" = contextvars.ContextVar("var", default="reader")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        wake = Wake(loop)
        seen: List[str] = []

        async def wait() -> None:
            var.set("task")
            await wake
            seen.append(var.get())

        waiter = asyncio.ensure_future(wait())
        await asyncio.sleep(0)
        loop.call_soon(wake.resume)
        await asyncio.wait_for(waiter, 2)
        assert seen == ["task"]
    run(main())
