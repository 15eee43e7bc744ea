"""Issue 23, prefetch 1: a MESSAGE read by the loop resumes the receive waiting for it in the
same loop turn (amqstomp/aio/_wake.py), not one turn later through ``call_soon``; the
wake-up keeps a Future's rules everywhere else (cancellation, a resume from inside a task,
the task's context). The client's logic in memory (a real Client over a fake transport, the
bytes fed by hand from a loop callback, as the loop's reader does); nothing a broker decides."""
import asyncio
import contextvars
from typing import Any, List

import pytest

from amqstomp.aio._wake import future_maker, resume
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
        wake = future_maker(loop)()
        waiter = asyncio.ensure_future(_await(wake))
        await asyncio.sleep(0)
        resume(wake)  # from this task: a task cannot resume another while it runs
        assert not waiter.done()
        assert await asyncio.wait_for(waiter, 2) is None
        with pytest.raises(asyncio.InvalidStateError):
            resume(wake)
    run(main())


async def _await(wake: "asyncio.Future[None]") -> None:
    return await wake


def test_the_resumed_task_runs_in_its_own_context_and_at_once():
    var: "contextvars.ContextVar[str]" = contextvars.ContextVar("var", default="reader")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        wake = future_maker(loop)()
        seen: List[str] = []

        async def wait() -> None:
            var.set("task")
            await wake
            seen.append(var.get())

        waiter = asyncio.ensure_future(wait())
        await asyncio.sleep(0)
        after: List[List[str]] = []

        def reader() -> None:  # a loop callback, outside any task
            resume(wake)
            after.append(list(seen))

        loop.call_soon(reader)
        await asyncio.wait_for(waiter, 2)
        assert seen == ["task"] and after == [["task"]]  # resumed before the callback returned
    run(main())


def test_a_wake_up_with_several_callbacks_or_in_the_readers_own_context_is_scheduled():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        calls: List[str] = []
        wake = future_maker(loop)()
        wake.add_done_callback(lambda w: calls.append("a"))
        wake.add_done_callback(lambda w: calls.append("b"))
        loop.call_soon(resume, wake)
        for _ in range(3):
            await asyncio.sleep(0)
        assert calls == ["a", "b"] and wake.result() is None  # in order, as a Future's
        # the one callback's context is the reader's own, entered already: scheduled, not lost
        ctx = contextvars.copy_context()
        other = future_maker(loop)()
        other.add_done_callback(lambda w: calls.append("c"), context=ctx)
        loop.call_soon(resume, other, context=ctx)
        for _ in range(3):
            await asyncio.sleep(0)
        assert calls == ["a", "b", "c"]
    run(main())


def test_a_cancelled_receive_passes_the_delivery_on_to_the_next_one_in_the_same_turn():
    # two receives without a deadline wait; the oldest is cancelled; the read's message
    # goes to the other one, resumed before the reading callback returns (not lost with the first)
    async def main() -> None:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire, ack="client-individual")
        first = asyncio.ensure_future(sub.get())
        second = asyncio.ensure_future(sub.get())
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        after: List[bool] = []

        def reader() -> None:
            first.cancel()  # its future cancelled, still queued: the task has not run since
            message(link, sub, 1)
            after.append(second.done())

        loop.call_soon(reader)
        got = await asyncio.wait_for(second, 2)
        assert got.body == b"body1" and first.cancelled()
        assert after == [True]  # the second receive ran to its end inside the reading callback
        assert len(sub._waiters) == 0 and len(sub._queue) == 0
        await got.ack()
        assert len(wire.frames("ACK")) == 1
    run(main())


def test_bytes_longer_than_the_read_buffer_are_all_parsed():
    # data_received (a loop without the buffer protocol, the tests) goes through the 64 KiB read
    # buffer a chunk at a time: a frame across two chunks, and many frames, all delivered in order
    from amqstomp.aio._link import READ_BYTES

    async def main() -> None:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire)
        body = b"x" * 1000
        count = 3 * READ_BYTES // 1000
        frames = b"".join(b"MESSAGE\nsubscription:%s\nmessage-id:m%d\ndestination:/queue/a\n\n%s\x00"
                          % (sub.id.encode(), n, body) for n in range(count))
        assert len(frames) > 2 * READ_BYTES
        link.data_received(frames)
        ids = []
        for _ in range(count):
            m = await sub.get(timeout=2)
            assert m.body == body
            ids.append(m.message_id)
        assert ids == ["m%d" % n for n in range(count)]
    run(main())


def test_an_ack_not_awaited_writes_nothing_and_the_message_stays_unacknowledged():
    async def main() -> None:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire, ack="client-individual")
        message(link, sub, 1)
        m = await sub.get(timeout=2)
        pending = m.ack()
        pending.close()  # never awaited
        assert wire.frames("ACK") == []
        await m.ack()
        assert len(wire.frames("ACK")) == 1
    run(main())
