"""amqstomp.aio's writes against the real ActiveMQ the test session starts: the frames written
during one turn of the loop leave in one ``transport.write`` at the turn's end
(:meth:`amqstomp.aio._link.AioLink.write`), whole, in order, and a lone frame leaves in the
same turn (no timer). Counted on the link's transport, not timed."""
import asyncio
from typing import Any, List

import pytest

import amqstomp.aio
from aio_support import new_queue, run, url

pytestmark = pytest.mark.timeout(60)


def count_writes(client: Any) -> List[int]:
    """Sizes of the link's ``transport.write`` calls from now on (the transport's own write wrapped)."""
    transport = client.link.transport
    sizes: List[int] = []
    write = transport.write

    def counting(data: Any) -> None:
        sizes.append(len(data))
        write(data)
    transport.write = counting
    return sizes


async def drain_queue(client: Any, dest: str, count: int) -> List[bytes]:
    got = []
    async with client.subscribe(dest) as sub:
        for _ in range(count):
            got.append((await sub.get(timeout=10)).body)
    return got


def test_sends_of_one_loop_turn_leave_in_one_write_in_order(activemq):
    """50 sends awaiting their RECEIPTs, started together (asyncio.gather): their SEND frames are
    written in one loop turn and leave together (before: one transport.write each, 50)."""
    dest = new_queue("aio-coalesce")

    async def main() -> List[bytes]:
        async with amqstomp.aio.connect(url(activemq)) as client:
            await client.send(dest, b"warm")  # (connected, its receipt come: nothing left to write)
            link = client.link
            # the link's clock stopped at its last write: never idle (DEFER_IDLE_S), whatever the
            # machine's load does to the time between two sends (an idle link's first frame leaves at once)
            link.clock = lambda: link.proto.last_write_ms / 1000.0
            sizes = count_writes(client)
            await asyncio.gather(*[client.send(dest, b"m%d" % i) for i in range(50)])
            assert len(sizes) == 1, sizes
            return await drain_queue(client, dest, 51)
    assert run(main()) == [b"warm"] + [b"m%d" % i for i in range(50)]


def test_a_lone_frame_leaves_in_the_same_turn_and_big_frames_keep_their_place(activemq):
    dest = new_queue("aio-coalesce")
    big = b"b" * 100000  # over the 64 KiB bound: written as it is, behind what gathered

    async def main() -> List[bytes]:
        async with amqstomp.aio.connect(url(activemq)) as client:
            sizes = count_writes(client)
            await client.send(dest, b"one", receipt=False)
            await asyncio.sleep(0)  # the task yields once: the loop's turn ends, the frame is written
            assert len(sizes) == 1, sizes
            for body in (b"s1", big, b"s2"):
                await client.send(dest, body, receipt=False)
            await client.send(dest, b"last")  # (its RECEIPT: the broker has every one before it)
            # s1 gathered, then written before the big frame, which is not copied into the buffer
            assert sizes[1] < 1000 and sizes[2] > 100000, sizes
            return await drain_queue(client, dest, 5)
    assert run(main()) == [b"one", b"s1", big, b"s2", b"last"]


def test_a_task_that_never_yields_still_writes_and_close_flushes_first(activemq):
    dest = new_queue("aio-coalesce")
    count = 1000  # 256 B bodies: past the 64 KiB bound several times

    async def main() -> List[bytes]:
        async with amqstomp.aio.connect(url(activemq)) as client:
            sizes = count_writes(client)
            for i in range(count):
                client.link.write(client.link.encode("SEND", {"destination": dest}, b"%03d" % i + b"x" * 253))
            assert sizes and sum(sizes) >= 65536  # written without a yield (the byte bound)
        async with amqstomp.aio.connect(url(activemq)) as client:  # the close wrote what gathered first
            return await drain_queue(client, dest, count)
    assert [body[:3] for body in run(main())] == [b"%03d" % i for i in range(count)]
