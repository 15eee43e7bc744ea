"""amqstomp.aio's lifecycle, each failure injected (TcpProxy between the client and the real
ActiveMQ, a listener that never answers): heart-beats with a loop blocked by a slow handler
(no false alarm) and with a silent broker (noticed within the negotiated bound), the CONNECTED
deadline, an ACK of a lost socket's message refused by name, a SEND or COMMIT whose socket is
lost after it was written reported in doubt, and cancellations that leave no half state."""
import asyncio
import socket
import time
from typing import Any

import pytest

import amqstomp.aio
from amqstomp.exception import (AcknowledgeInterruptedError, ConnectFailedException, ConnectionClosedException,
                                SendInDoubtError, TransactionInDoubtError)
from amqstomp.testing import TcpProxy
from aio_support import new_queue, run

pytestmark = pytest.mark.timeout(60)


def queue() -> str:
    return new_queue("aio-life")


def url_of(address: Any) -> str:
    return "stomp://%s:%d" % tuple(address)


@pytest.mark.compiled_pass_only  # heart-beat timers against a blocked event loop
def test_a_blocked_loop_is_no_heartbeat_timeout(activemq):
    """The broker's heart-beats every 1 s: it is declared dead after 3 s of silence (1000 x 2 x
    1.5); ours every 10 s (so the broker does not end a client that is silent 4 s). A handler
    holds the loop 4 s; the broker's heart-beats wait in the socket meanwhile, and are read
    before the deadline is judged: the connection lives on."""
    async def main() -> None:
        async with amqstomp.aio.connect(url_of(activemq.host_and_ports[0]), heartbeats=(10000, 1000)) as client:
            link = client.link
            assert link is not None and link.proto.recv_ms == 1000
            time.sleep(4.0)  # a handler that blocks the loop
            await asyncio.sleep(1.5)
            assert client.connected, link.close_reason
            await client.send(queue(), b"still here")
    run(main())


def test_a_silent_broker_is_noticed_within_the_bound(activemq):
    async def main() -> float:
        with TcpProxy(activemq.host_and_ports[0]) as proxy:
            async with amqstomp.aio.connect(url_of(proxy.address), heartbeats=(1000, 1000)) as client:
                async with client.subscribe(queue()) as sub:
                    proxy.stall()
                    started = time.monotonic()
                    with pytest.raises(ConnectionClosedException):
                        await sub.get(timeout=15)
                    took = time.monotonic() - started
                    assert client.link is not None and "heart-beat" in client.link.close_reason
                    assert not client.connected
                    with pytest.raises(ConnectionClosedException):
                        await client.send(queue(), b"x")
                    return took
    took = run(main())
    assert took < 3.0 + 1.0, took  # 3 s of silence, and the timer's lateness


def test_connected_deadline():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts (the kernel does), never answers CONNECT

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(ConnectFailedException):
            await amqstomp.aio.connect(url_of(listener.getsockname()), connect_timeout=1.0)
        return time.monotonic() - started
    try:
        assert run(main()) < 3.0
    finally:
        listener.close()


def test_ack_of_a_lost_sockets_message_is_refused(activemq):
    dest = queue()

    async def main() -> None:
        with TcpProxy(activemq.host_and_ports[0]) as proxy:
            async with amqstomp.aio.connect(url_of(proxy.address)) as client:
                await client.send(dest, b"one")
                async with client.subscribe(dest, ack="client-individual") as sub:
                    message = await sub.get(timeout=10)
                    proxy.cut()
                    with pytest.raises(ConnectionClosedException):
                        await sub.get(timeout=10)
                    with pytest.raises(AcknowledgeInterruptedError):
                        await message.ack()
        # the broker redelivers it
        async with amqstomp.aio.connect(url_of(activemq.host_and_ports[0])) as client:
            async with client.subscribe(dest, ack="client-individual") as sub:
                again = await sub.get(timeout=10)
                assert again.body == b"one" and again.headers.get("redelivered") == "true"
                await again.ack()
    run(main())


def test_send_and_commit_lost_after_writing_are_in_doubt(activemq):
    async def main() -> None:
        with TcpProxy(activemq.host_and_ports[0]) as proxy:
            async with amqstomp.aio.connect(url_of(proxy.address)) as client:
                proxy.stall()
                sending = asyncio.ensure_future(client.send(queue(), b"x", timeout=10))
                await asyncio.sleep(0.3)
                proxy.cut()
                with pytest.raises(SendInDoubtError):
                    await sending
        with TcpProxy(activemq.host_and_ports[0]) as proxy:
            async with amqstomp.aio.connect(url_of(proxy.address)) as client:
                tx = client.transaction(timeout=10)
                await tx.begin()
                await tx.send(queue(), b"x")
                proxy.stall()
                committing = asyncio.ensure_future(tx.commit())
                await asyncio.sleep(0.3)
                proxy.cut()
                with pytest.raises(TransactionInDoubtError):
                    await committing
    run(main())


def test_cancellations_leave_no_half_state(activemq):
    dest = queue()

    async def main() -> None:
        with TcpProxy(activemq.host_and_ports[0]) as proxy:
            async with amqstomp.aio.connect(url_of(proxy.address)) as client:
                link = client.link
                assert link is not None
                # a receive cancelled while waiting takes nothing: the message goes to the next one
                async with client.subscribe(dest, ack="client-individual") as sub:
                    waiting = asyncio.ensure_future(sub.get(timeout=10))
                    await asyncio.sleep(0.1)
                    waiting.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await waiting
                    await client.send(dest, b"after the cancel")
                    message = await sub.get(timeout=10)
                    assert message.body == b"after the cancel"
                    await message.ack()
                # a send cancelled while awaiting its receipt: the frame went whole, the receipt is forgotten
                proxy.stall()
                sending = asyncio.ensure_future(client.send(dest, b"cancelled", timeout=10))
                await asyncio.sleep(0.2)
                assert link.proto.receipts
                sending.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await sending
                assert not link.proto.receipts
                proxy.unstall()
                async with client.subscribe(dest, ack="client-individual") as sub:
                    message = await sub.get(timeout=10)  # the frame was whole: the broker has it
                    assert message.body == b"cancelled"
                    await message.ack()
    run(main())


def test_close_is_bounded_when_the_broker_is_silent(activemq):
    async def main() -> float:
        with TcpProxy(activemq.host_and_ports[0]) as proxy:
            client = await amqstomp.aio.connect(url_of(proxy.address))
            proxy.stall()
            started = time.monotonic()
            await client.close(timeout=1.0)
            took = time.monotonic() - started
            assert client.link is not None and client.link.closed
            return took
    assert run(main()) < 3.0
