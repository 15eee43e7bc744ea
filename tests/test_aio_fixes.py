"""Issue 23 (a fresh user's findings in amqstomp.aio), each fixed with a test that failed
before: the client's logic in memory (a real Client over a fake transport, no socket, the
RECEIPTs fed by hand), what the broker decides against the session's ActiveMQ."""
import asyncio
import logging
import re
import socket
import time
import uuid
from typing import Any, List, Optional, Tuple

import pytest

import amqstomp.aio
from amqstomp.aio._link import AioLink
from amqstomp.aio.subscription import SubscriptionClosedError
from amqstomp.exception import (AcknowledgeInterruptedError, ConfigurationError, ConnectFailedException,
                                ConnectionClosedException, InvalidTimeoutError, NotConnectedException)
from amqstomp.testing import TcpProxy
import aio_support

pytestmark = pytest.mark.timeout(60)


def run(coro: Any, bound: float = 30.0) -> Any:
    return aio_support.run(coro, bound)


class Wire(asyncio.Transport):
    """A transport that keeps what is written and ends its protocol on close."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.protocol: Optional[AioLink] = None

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.abort()

    def abort(self) -> None:
        protocol, self.protocol = self.protocol, None
        if protocol is not None:
            protocol.connection_lost(None)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def frames(self, command: str) -> List[bytes]:
        """The ``command`` frames written: to this transport, and those the link gathered in this
        loop turn (they leave at its end: :meth:`AioLink.write`)."""
        written = bytes(self.written) + (bytes(self.protocol._deferred) if self.protocol is not None else b"")
        return [f for f in written.split(b"\x00") if f.lstrip(b"\n").startswith(command.encode() + b"\n")]


async def memory_client(**options: Any) -> Tuple[amqstomp.aio.Client, AioLink, Wire]:
    loop = asyncio.get_running_loop()
    client = amqstomp.aio.connect("stomp://127.0.0.1:1", **options)
    link = AioLink(loop, 1, client._on_message, client._on_lost, "1.2", 1.5, None)
    wire = Wire()
    wire.protocol = link
    link.connection_made(wire)
    link.write(link.encode("CONNECT", {"accept-version": "1.2", "heart-beat": "0,0"}))
    link.data_received(b"CONNECTED\nversion:1.2\nserver:ActiveMQ/5.17.2\n\n\x00")
    await link.connected
    client.link = link
    return client, link, wire


async def answer_receipts(link: AioLink, wire: Wire, count: int = 1) -> None:
    """Answer the next ``count`` frames that ask for a RECEIPT (bounded: 200 turns)."""
    answered: List[bytes] = []
    for _ in range(200):
        await asyncio.sleep(0)
        for rid in re.findall(rb"\nreceipt:([^\n]+)\n", bytes(wire.written)):
            if rid not in answered and len(answered) < count:
                answered.append(rid)
                link.data_received(b"RECEIPT\nreceipt-id:" + rid + b"\n\n\x00")
        if len(answered) >= count:
            return
    raise AssertionError("only %d of %d receipts asked for" % (len(answered), count))


async def subscribed(client: amqstomp.aio.Client, link: AioLink, wire: Wire, **options: Any) -> Any:
    sub = client.subscribe("/queue/a", **options)
    entering = asyncio.ensure_future(sub.__aenter__())
    await answer_receipts(link, wire, len(re.findall(rb"\nreceipt:", bytes(wire.written))) + 1)
    await entering
    return sub


def message(link: AioLink, sub: Any, n: int) -> None:
    link.data_received(b"MESSAGE\nsubscription:%s\nmessage-id:m%d\ndestination:/queue/a\nack:a%d\n\nbody%d\x00"
                       % (sub.id.encode(), n, n, n))


# ------------------------------------------------------------ 1. several readers of one subscription

def test_concurrent_readers_each_get_messages_fifo_and_all_wake_on_close():
    async def main() -> None:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire)
        readers = [asyncio.ensure_future(sub.get()) for _ in range(3)]
        await asyncio.sleep(0)
        message(link, sub, 1)
        message(link, sub, 2)
        done, _ = await asyncio.wait(readers, timeout=2, return_when=asyncio.ALL_COMPLETED)
        assert len(done) == 2  # two messages: two readers, the oldest first, one each
        assert readers[0].result().body == b"body1" and readers[1].result().body == b"body2"
        assert not readers[2].done()
        # two more readers (one via async for), then the subscription ends: every one is woken
        late = asyncio.ensure_future(sub.get())

        async def iterate() -> List[Any]:
            return [m async for m in sub]
        loop_reader = asyncio.ensure_future(iterate())
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(sub.close())
        await answer_receipts(link, wire, 2)
        await closing
        for reader in (readers[2], late):
            with pytest.raises(SubscriptionClosedError):
                await asyncio.wait_for(reader, 2)
        assert await asyncio.wait_for(loop_reader, 2) == []
    run(main())


def test_a_cancelled_or_timed_out_reader_takes_no_message():
    async def main() -> None:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire)
        first = asyncio.ensure_future(sub.get())
        second = asyncio.ensure_future(sub.get())
        await asyncio.sleep(0)
        message(link, sub, 1)  # wakes `first`, which is cancelled before it runs
        first.cancel()
        assert (await asyncio.wait_for(second, 2)).body == b"body1"  # the wake-up was passed on
        with pytest.raises(asyncio.TimeoutError):
            await sub.get(timeout=0.01)
        message(link, sub, 2)
        assert (await sub.get(timeout=1)).body == b"body2"
        assert not sub._waiters
    run(main())


# ------------------------------------------------------------ 2. ACK after the subscription closed

def test_ack_after_the_subscription_closed_raises_and_writes_nothing():
    async def main() -> None:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire, ack="client-individual")
        message(link, sub, 1)
        got = await sub.get(timeout=1)
        closing = asyncio.ensure_future(sub.close())
        await answer_receipts(link, wire, 2)
        await closing
        with pytest.raises(AcknowledgeInterruptedError, match="was closed"):
            await got.ack()
        with pytest.raises(AcknowledgeInterruptedError):
            await got.nack()
        await asyncio.sleep(0)
        assert wire.frames("ACK") == [] and wire.frames("NACK") == []
    run(main())


# ------------------------------------------------------------ 7. after close(), no more messages

def test_no_message_after_client_close_and_auto_drop_is_logged(caplog):
    async def main() -> Tuple[List[Any], Any]:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire)  # ack:auto
        for n in range(3):
            message(link, sub, n)
        closing = asyncio.ensure_future(client.close(timeout=1))
        await answer_receipts(link, wire, 2)
        await closing
        with pytest.raises(SubscriptionClosedError):
            await sub.get(timeout=1)
        return [m async for m in sub], sub
    with caplog.at_level(logging.WARNING, logger="amqstomp.aio"):
        after, sub = run(main())
    assert after == []
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("3 buffered message(s) dropped" in w and "ack:auto" in w for w in warned), warned


# ------------------------------------------------------------ 3. timeouts

def test_receipt_timeout_none_is_the_default_bound_and_bad_timeouts_write_nothing():
    async def main() -> None:
        client, link, wire = await memory_client(receipt_timeout=None)
        assert client.receipt_timeout == amqstomp.aio.client.DEFAULT_RECEIPT_TIMEOUT
        sending = asyncio.ensure_future(client.send("/queue/a", b"x"))
        await answer_receipts(link, wire)
        await asyncio.wait_for(sending, 2)  # before: ReceiptTimeout at once (a wait of 0 s)
        written = len(wire.frames("SEND"))
        for bad in (0, -1, 1e-9, float("nan"), "5", True):
            with pytest.raises(InvalidTimeoutError):
                await client.send("/queue/a", b"y", timeout=bad)
            with pytest.raises(InvalidTimeoutError):
                await client.send("/queue/a", b"y", receipt=False, timeout=bad)
            with pytest.raises(InvalidTimeoutError):
                client.subscribe("/queue/a", timeout=bad)
        await asyncio.sleep(0)
        assert len(wire.frames("SEND")) == written and wire.frames("SUBSCRIBE") == []
    run(main())


@pytest.mark.parametrize("name", ["connect_timeout", "receipt_timeout", "close_timeout"])
@pytest.mark.parametrize("bad", [0, -1, 1e-9, "10", float("inf")])
def test_connect_refuses_the_timeouts_send_refuses(name, bad):
    with pytest.raises(InvalidTimeoutError, match=name):
        amqstomp.aio.connect("stomp://127.0.0.1:1", **{name: bad})


# ------------------------------------------------------------ 6. bad keywords and bodies

@pytest.mark.parametrize("given, error, words", [
    ({"broker": "nonsense"}, ConfigurationError, "'nonsense'"),
    ({"heart_beat_receive_scale": 0}, ConfigurationError, ">= 1"),
    ({"heart_beat_receive_scale": -1}, ConfigurationError, ">= 1"),
    ({"heart_beat_receive_scale": 0.5}, ConfigurationError, ">= 1"),
    ({"version": 1.2}, ConfigurationError, "1.2 (float)"),
    ({"version": "1.3"}, ConfigurationError, "'1.3'"),
])
def test_bad_keywords_are_configuration_errors(given, error, words):
    with pytest.raises(error) as raised:
        amqstomp.aio.connect("stomp://127.0.0.1:1", **given)
    assert words in str(raised.value)


@pytest.mark.parametrize("target, words", [(None, "NoneType"), (61714, "61714 (int)"), ([("h", "x1")], "bad port 'x1'"),
                                           (["stomp://h:1"], "(host, port)")])
def test_what_to_connect_to_is_checked(target, words):
    with pytest.raises(ConfigurationError) as raised:
        amqstomp.aio.connect(target)
    assert words in str(raised.value)


def test_auto_broker_and_a_dialect_name_are_taken():
    assert amqstomp.aio.connect("stomp://127.0.0.1:1", broker="auto").broker is None
    assert amqstomp.aio.connect("stomp://127.0.0.1:1", broker="ActiveMQ").broker == "activemq"


def test_bodies_must_be_bytes_or_str_and_none_headers_as_the_threaded_api():
    async def main() -> None:
        client, link, wire = await memory_client()
        for body, name in ((5, "int"), ({"a": 1}, "dict"), (None, "NoneType"), ([1, 2], "list")):
            with pytest.raises(TypeError, match="not %s" % name):
                await client.send("/queue/a", body)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        assert wire.frames("SEND") == []
        await client.send("/queue/a", bytearray(b"ba"), receipt=False)
        await client.send("/queue/a", b"hi", {"gone": None, "content-length": None, "kept": "1"}, receipt=False)
        await asyncio.sleep(0)
        first, second = wire.frames("SEND")
        assert first.endswith(b"\n\nba") and b"content-length:2" in first
        assert b"gone" not in second and b"content-length" not in second and b"kept:1" in second
    run(main())


# ------------------------------------------------------------ 4. the first connect of a failover URI is bounded

def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_failover_first_connect_is_bounded_by_connect_timeout():
    port = closed_port()

    async def main() -> Tuple[float, str]:
        started = time.monotonic()
        with pytest.raises(ConnectFailedException) as raised:
            await amqstomp.aio.connect("failover:(stomp://127.0.0.1:%d)" % port, connect_timeout=2)
        return time.monotonic() - started, str(raised.value)
    took, why = run(main())
    assert 1.5 < took < 6, took  # before: retried for ever (the URI's startupMaxReconnectAttempts -1)
    assert "127.0.0.1:%d" % port in why and "connect_timeout" in why


def test_failover_first_connect_follows_the_uris_startup_attempts():
    port = closed_port()

    async def main() -> Tuple[float, str]:
        started = time.monotonic()
        url = "failover:(stomp://127.0.0.1:%d)?startupMaxReconnectAttempts=3&initialReconnectDelay=10" % port
        with pytest.raises(ConnectFailedException) as raised:
            await amqstomp.aio.connect(url, connect_timeout=20)
        return time.monotonic() - started, str(raised.value)
    took, why = run(main())
    assert took < 5 and "after 3 attempt(s)" in why and "127.0.0.1:%d" % port in why


# ------------------------------------------------------------ 5. close() wakes what waits for a reconnect

def test_close_wakes_a_send_waiting_for_a_reconnect(activemq):
    async def main() -> float:
        with TcpProxy(activemq.host_and_ports[0]) as proxy:
            url = "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100" % proxy.address
            client = await amqstomp.aio.connect(url, connect_timeout=5)
            proxy.refuse(True, "closed")
            proxy.cut()
            for _ in range(200):  # bounded: until the loss is seen
                if client.link is None or client.link.closed:
                    break
                await asyncio.sleep(0.01)
            sending = asyncio.ensure_future(client.send("/queue/aio-fix-%s" % uuid.uuid4().hex[:8], b"x",
                                                        timeout=20))
            await asyncio.sleep(0.2)
            assert not sending.done()
            started = time.monotonic()
            await client.close(timeout=1)
            with pytest.raises(ConnectionClosedException) as raised:
                await asyncio.wait_for(sending, 5)
            assert not isinstance(raised.value, NotConnectedException)
            assert "closed" in str(raised.value)
            return time.monotonic() - started
    assert run(main()) < 2.5  # before: the send waited out its 20 s, then NotConnectedException


# ------------------------------------------------------------ 2. (the broker decides) the message is redelivered

def test_ack_after_leaving_the_subscription_raises_and_the_broker_redelivers(activemq):
    host, port = activemq.host_and_ports[0]
    dest = "/queue/aio-fix-%s" % uuid.uuid4().hex[:10]

    async def main() -> None:
        async with amqstomp.aio.connect("stomp://%s:%d" % (host, port)) as client:
            await client.send(dest, b"once")
            async with client.subscribe(dest, ack="client-individual", prefetch_size=1) as sub:
                got = await sub.get(timeout=10)
            with pytest.raises(AcknowledgeInterruptedError):
                await got.ack()  # before: returned normally, and the broker redelivered it
            async with client.subscribe(dest, ack="client-individual") as sub:
                again = await sub.get(timeout=10)
                assert again.body == b"once" and again.message_id == got.message_id
                await again.ack(receipt=True)
    run(main())


def test_concurrent_readers_count_every_message_consumed():
    """Two readers each handed a message while both waited: both count in the window (a single
    'handed' slot lost one, and its prefetch credit with it)."""
    async def main() -> None:
        client, link, wire = await memory_client()
        sub = await subscribed(client, link, wire, prefetch_size=10)
        readers = [asyncio.ensure_future(sub.get()) for _ in range(2)]
        await asyncio.sleep(0)
        message(link, sub, 1)
        message(link, sub, 2)
        await asyncio.wait_for(asyncio.gather(*readers), 2)
        with pytest.raises(asyncio.TimeoutError):
            await sub.get(timeout=0.01)  # asking for the next one: both handed messages are consumed
        assert sub.window.delivered == 2 and sub.window.consumed == 2
    run(main())
