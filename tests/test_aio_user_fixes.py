"""A new user's findings in amqstomp.aio (task 8), each fixed with a test that failed before:
fake servers on 127.0.0.1 (a listener that accepts and never answers, one that answers CONNECT
and then never reads) and the session's ActiveMQ for what the broker decides."""
import asyncio
import socket
import time
import uuid
from typing import Any, Awaitable, Iterator, Tuple

import pytest

import amqstomp.aio
from amqstomp.exception import ConnectFailedException, TransactionRolledBackError
from amqstomp.testing import TcpProxy

pytestmark = pytest.mark.timeout(60)


def run(coro: Awaitable[Any], bound: float = 30.0) -> Any:
    """Run ``coro`` for at most ``bound`` seconds without cancelling it to stop it (a wait that
    ignores cancellation would hang ``asyncio.wait_for`` itself before Python 3.12)."""
    async def bounded() -> Any:
        task = asyncio.ensure_future(coro)
        done, _ = await asyncio.wait((task,), timeout=bound)
        if not done:
            task.cancel()
            raise AssertionError("still running after %.3g s" % bound)
        return task.result()
    return asyncio.run(bounded())


@pytest.fixture
def silent() -> Iterator[Tuple[str, int]]:
    """A listener the kernel accepts connections on; nothing ever answers CONNECT."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(50)
    try:
        yield listener.getsockname()
    finally:
        listener.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------ 1. the first failover connect is bounded

def test_failover_first_connect_to_a_silent_broker_ends_at_connect_timeout(silent):
    """The per-host CONNECTED deadline and the first connect's bound fall together: before,
    on Python 3.9-3.11 the bound's cancellation was lost and the passes went on for ever."""
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=100" % silent

    async def main() -> None:
        for _ in range(4):  # (before: the first one already hung on 3.11)
            started = time.monotonic()
            with pytest.raises(ConnectFailedException) as raised:
                await amqstomp.aio.connect(url, connect_timeout=0.5)
            took = time.monotonic() - started
            assert 0.45 < took < 1.5, took
            assert "within 0.5 s (connect_timeout" in str(raised.value)
    run(main())


def test_failover_first_connect_names_the_host_tried_when_time_ran_out(silent):
    dead = closed_port()
    url = "failover:(stomp://127.0.0.1:%d,stomp://%s:%d)?initialReconnectDelay=100&randomize=false" % (
        (dead,) + silent)

    async def main() -> str:
        with pytest.raises(ConnectFailedException) as raised:
            await amqstomp.aio.connect(url, connect_timeout=1)
        return str(raised.value)
    why = run(main())
    assert "not tried yet" not in why, why  # before: the silent host being tried was "not tried yet"
    assert "127.0.0.1:%d: " % dead in why and "%s:%d: " % silent in why and "CONNECTED" in why, why


def test_failover_first_connect_bound_holds_before_a_live_broker(silent, activemq):
    """A silent host takes the whole bound: the live broker after it is not tried past the bound
    (before: connected at 1.0x s with connect_timeout=1, or hung on 3.9-3.11)."""
    host, port = activemq.host_and_ports[0]
    url = "failover:(stomp://%s:%d,stomp://%s:%d)?randomize=false" % (silent + (host, port))

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(ConnectFailedException):
            client = await amqstomp.aio.connect(url, connect_timeout=1)
            await client.close()
        return time.monotonic() - started
    took = run(main())
    assert took < 1.3, took


# ------------------------------------------------------------ 2. a transaction whose connection died

def test_commit_after_the_connection_was_lost_is_rolled_back(activemq):
    dest = "/queue/aio-user-%s" % uuid.uuid4().hex[:10]

    async def main() -> None:
        with TcpProxy(activemq.host_and_ports[0]) as proxy:
            async with amqstomp.aio.connect("stomp://%s:%d" % proxy.address) as client:
                with pytest.raises(TransactionRolledBackError) as raised:  # before: UnknownTransactionError
                    async with client.transaction() as tx:
                        await tx.send(dest, b"in the transaction")
                        proxy.cut()
                        for _ in range(500):  # bounded: until the loss is seen
                            if client.link is not None and client.link.closed:
                                break
                            await asyncio.sleep(0.01)
                assert not isinstance(raised.value, ValueError) and "rolled it back" in str(raised.value)
        async with amqstomp.aio.connect("stomp://%s:%d" % activemq.host_and_ports[0]) as client:
            async with client.subscribe(dest) as sub:  # the broker rolled it back: nothing came
                with pytest.raises(asyncio.TimeoutError):
                    await sub.get(timeout=1)
    run(main())
