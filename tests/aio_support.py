"""What the amqstomp.aio test modules share: running a coroutine under a bound, a broker's
``stomp://`` URL, a fresh queue name."""
import asyncio
import uuid
from typing import Any, Awaitable, List


def run(coro: Awaitable[Any], bound: float = 45.0) -> Any:
    """Run ``coro`` on a new loop for at most ``bound`` seconds, without relying on a cancel to
    stop it (a wait that ignores cancellation would hang ``asyncio.wait_for`` itself before
    Python 3.12): past the bound the test fails."""
    async def bounded() -> Any:
        task = asyncio.ensure_future(coro)
        done, _ = await asyncio.wait((task,), timeout=bound)
        if not done:
            task.cancel()
            raise AssertionError("still running after %.3g s" % bound)
        return task.result()
    return asyncio.run(bounded())


def url(broker: Any) -> str:
    host, port = broker.host_and_ports[0]
    return "stomp://%s:%d" % (host, port)


def new_queue(tag: str) -> str:
    return "/queue/%s-%s" % (tag, uuid.uuid4().hex[:10])


async def drained(client: Any, dest: str) -> List[Any]:
    """The bodies a new client-individual subscription of ``client`` (an amqstomp.aio.Client)
    to ``dest`` gets within 0.5 s of each other, each ACKed."""
    got = []
    async with client.subscribe(dest, ack="client-individual") as sub:
        while True:  # bounded: each get waits 0.5 s at most and the queue holds a few messages
            try:
                message = await sub.get(timeout=0.5)
            except asyncio.TimeoutError:
                return got
            got.append(message.body)
            await message.ack()
