"""amqstomp.aio on uvloop (the ``uvloop`` extra) as on the default loop, against the real
ActiveMQ the test session starts: send/subscribe/ack, a transaction whose COMMIT waits for
its RECEIPT, the handler form, and failover through the fault-injecting TcpProxy. Each
round trip runs on both loops; the uvloop ones skip, saying why, where uvloop is not
installed (``pip install amqstomp[uvloop]``; the ``test`` extra has it on Linux and macOS)."""
import asyncio
from typing import Any, Awaitable, Callable, List

import pytest

import amqstomp.aio
from amqstomp.aio import Message
from amqstomp.testing import TcpProxy
from aio_support import new_queue, url

pytestmark = pytest.mark.timeout(60)

try:
    import uvloop
except ImportError:  # pragma: no cover - the test extra installs it where it has wheels
    uvloop = None

LOOPS = ["asyncio", pytest.param("uvloop", marks=pytest.mark.skipif(
    uvloop is None, reason="uvloop is not installed (pip install 'amqstomp[uvloop]'; no Windows build)"))]


def run_on(kind: str, main: Callable[[], Awaitable[Any]], bound: float = 45.0) -> Any:
    """``main()`` on a new loop of ``kind``, checked to be that loop, within ``bound`` seconds."""
    loop = uvloop.new_event_loop() if kind == "uvloop" else asyncio.new_event_loop()

    async def checked() -> Any:
        running = type(asyncio.get_running_loop()).__module__
        assert running.startswith("uvloop") == (kind == "uvloop"), running
        return await asyncio.wait_for(main(), bound)
    try:
        return loop.run_until_complete(checked())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def queue() -> str:
    return new_queue("aio-uv")


@pytest.mark.parametrize("kind", LOOPS)
def test_send_subscribe_ack(activemq, kind):
    dest = queue()

    async def main() -> List[Any]:
        async with amqstomp.aio.connect(url(activemq), heartbeats=(1000, 1000)) as client:
            for i in range(20):
                await client.send(dest, b"%d" % i, receipt=(i % 5 == 4))
            got = []
            async with client.subscribe(dest, ack="client-individual", prefetch_size=3) as sub:
                for _ in range(20):
                    message = await sub.get(timeout=10)
                    got.append(message.body)
                    await message.ack()
            async with client.subscribe(dest, ack="client-individual") as again:
                with pytest.raises(asyncio.TimeoutError):
                    await again.get(timeout=0.5)  # every one ACKed
            return got

    assert run_on(kind, main) == [b"%d" % i for i in range(20)]


@pytest.mark.parametrize("kind", LOOPS)
def test_transaction_and_handler(activemq, kind):
    dest = queue()

    async def main() -> List[Any]:
        seen: List[Any] = []
        async with amqstomp.aio.connect(url(activemq)) as client:
            async with client.transaction() as tx:  # COMMIT's RECEIPT awaited
                for i in range(10):
                    await tx.send(dest, b"%d" % i)
            async with client.subscribe(dest, ack="client-individual", prefetch_size=5) as sub:
                async def handler(message: Message) -> None:
                    await asyncio.sleep(0.001)
                    seen.append(message.body)
                runner = asyncio.ensure_future(sub.run(handler, concurrency=3))
                for _ in range(1000):
                    if len(seen) == 10:
                        break
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(runner, 5)
        return sorted(seen)

    assert run_on(kind, main) == sorted(b"%d" % i for i in range(10))


@pytest.mark.parametrize("kind", LOOPS)
def test_failover_through_the_proxy(activemq, kind):
    dest = queue()

    async def main() -> List[Any]:
        with TcpProxy(activemq.host_and_ports[0]) as proxy:
            url_ = "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=200" % proxy.address
            async with amqstomp.aio.connect(url_) as client:
                async with client.subscribe(dest, ack="client-individual") as sub:
                    got = []
                    for i in range(5):
                        proxy.cut()
                        await client.send(dest, b"%d" % i, timeout=15)
                        message = await sub.get(timeout=15)
                        await message.ack(receipt=True, timeout=15)
                        got.append(message.body)
                    assert client.failover is not None and client.failover.reconnects == 5
                    return got

    assert run_on(kind, main) == [b"%d" % i for i in range(5)]
