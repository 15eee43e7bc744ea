"""A fresh user's findings (task 10), each fixed with a test that failed before: callbacks of
the wrong kind (a plain ``def`` handler for ``aio`` ``run()``, an ``async def`` JMS listener),
error messages that named the wrong cause, and arguments that were let through. Against the
session's ActiveMQ (the silent-peer connect is in test_aio_user_fixes.py, beside its fixture)."""
import asyncio
import functools
import time
import uuid
from typing import Any, List, Tuple

import pytest

import amqstomp
import amqstomp.aio
from amqstomp.aio import Message
from amqstomp.exception import (AcknowledgeInterruptedError, ConfigurationError, InvalidTimeoutError,
                                UnknownMessageError)
from amqstomp.jms import ConnectionFactory, Queue, TextMessage
from aio_support import drained, new_queue, run, url

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------ 1. aio run() takes async handlers only

def plain(message: Message) -> None:
    """A handler written as a plain ``def`` (what run() must refuse)."""


async def coroutine_handler(message: Message, seen: List[Any]) -> None:
    seen.append(message.body)


class AsyncCallable:
    def __init__(self) -> None:
        self.seen: List[Any] = []

    async def __call__(self, message: Message) -> None:
        self.seen.append(message.body)


class SyncCallable:
    def __call__(self, message: Message) -> None:
        pass


@pytest.mark.parametrize("handler", [plain, lambda message: None, SyncCallable(), functools.partial(plain)],
                         ids=["def", "lambda", "sync-call", "partial-of-def"])
def test_run_refuses_a_plain_def_handler_up_front(activemq, handler):
    dest = new_queue("fu-plain")

    async def main() -> List[Any]:
        async with amqstomp.aio.connect(url(activemq)) as client:
            await client.send(dest, b"kept", receipt=True)
            async with client.subscribe(dest, ack="client-individual") as sub:
                with pytest.raises(ConfigurationError, match="async"):
                    await asyncio.wait_for(sub.run(handler), 5)
            return await drained(client, dest)
    assert run(main()) == [b"kept"]  # not handled, not poisoned: still on the queue


def test_run_accepts_async_callables(activemq):
    dest = new_queue("fu-async")

    async def main() -> Tuple[List[Any], List[Any]]:
        seen: List[Any] = []
        obj = AsyncCallable()
        async with amqstomp.aio.connect(url(activemq)) as client:
            for handler, got in ((functools.partial(coroutine_handler, seen=seen), seen), (obj, obj.seen)):
                await client.send(dest, b"m", receipt=True)
                async with client.subscribe(dest, ack="client-individual") as sub:
                    runner = asyncio.ensure_future(sub.run(handler))
                    for _ in range(500):  # bounded: 5 s
                        if got:
                            break
                        await asyncio.sleep(0.01)
                    await sub.close()
                    await asyncio.wait_for(runner, 5)
            return seen, await drained(client, dest)
    seen, left = run(main())
    assert seen == [b"m"] and left == []


class Undecidable:
    """A callable whose kind cannot be told before it is called (its ``__call__`` is no Python
    function): returns what ``inner`` does."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def __call__(self) -> Any:  # type: ignore[override]
        return self.inner


def test_run_refuses_at_the_first_call_a_handler_that_returns_no_awaitable(activemq):
    dest = new_queue("fu-first")
    calls: List[Any] = []

    async def main() -> List[Any]:
        async with amqstomp.aio.connect(url(activemq)) as client:
            await client.send(dest, b"kept", receipt=True)
            async with client.subscribe(dest, ack="client-individual") as sub:
                with pytest.raises(ConfigurationError, match="awaitable"):
                    await asyncio.wait_for(sub.run(Undecidable(calls.append), concurrency=3), 5)
            return await drained(client, dest)
    assert run(main()) == [b"kept"]  # not ACKed, not redelivered to it, not NACKed
    assert len(calls) == 1


# ------------------------------------------------------------ 2. JMS listeners are plain functions

async def async_listener(message: Any) -> None:
    pass


class AsyncListener:
    async def __call__(self, message: Any) -> None:
        pass


@pytest.mark.parametrize("listener", [async_listener, AsyncListener(), functools.partial(async_listener), 5],
                         ids=["async-def", "async-call", "partial", "not-callable"])
def test_jms_set_message_listener_refuses_an_async_or_non_callable_listener(activemq, listener):
    queue = Queue("fu.jms.%s" % uuid.uuid4().hex[:10])
    with ConnectionFactory(activemq.url).create_connection() as conn:
        session = conn.create_session()
        session.create_producer(queue).send(TextMessage("kept"))
        consumer = session.create_consumer(queue)
        conn.start()
        with pytest.raises(ConfigurationError) as raised:
            consumer.set_message_listener(listener)
        if listener != 5:
            assert "amqstomp.aio" in str(raised.value)
        assert consumer.message_listener is None
        message = consumer.receive(5)  # not acked by a listener that never ran
        assert message is not None and message.text == "kept"


# ------------------------------------------------------------ 3. messages that name the cause

def test_aio_ack_of_an_acked_message_after_close_says_acknowledged_already(activemq):
    dest = new_queue("fu-acked")

    async def main() -> None:
        async with amqstomp.aio.connect(url(activemq)) as client:
            await client.send(dest, b"m", receipt=True)
            async with client.subscribe(dest, ack="client-individual") as sub:
                message = await sub.get(timeout=5)
                await message.ack(receipt=True)
            with pytest.raises(UnknownMessageError, match="acknowledged already"):
                await message.ack()
            other = None
            await client.send(dest, b"n", receipt=True)
            async with client.subscribe(dest, ack="client-individual") as sub:
                other = await sub.get(timeout=5)
            with pytest.raises(AcknowledgeInterruptedError, match="redelivers"):  # not acked: still so
                await other.ack()
    run(main())


def test_aio_transaction_ack_of_another_clients_message(activemq):
    dest = new_queue("fu-txother")

    async def main() -> None:
        async with amqstomp.aio.connect(url(activemq)) as one, amqstomp.aio.connect(url(activemq)) as two:
            await one.send(dest, b"m", receipt=True)
            async with one.subscribe(dest, ack="client-individual") as sub:
                message = await sub.get(timeout=5)
                async with two.transaction() as tx:
                    with pytest.raises(UnknownMessageError, match="another connection"):
                        await tx.ack(message)
                await message.ack(receipt=True)  # still this client's to settle
    run(main())


def test_stomppy_ack_on_an_optimize_acknowledge_subscription_says_amqstomp_acks_it(open_conn12):
    conn, col = open_conn12
    dest = "/queue/fu-opt-" + uuid.uuid4().hex[:10]
    conn.subscribe(dest, "s1", ack="client", optimize_acknowledge=True, receipt="sub")
    conn.wait_for_receipt("sub", 10)
    conn.send(dest, "m")
    frame = col.wait_messages(1)[0]
    with pytest.raises(UnknownMessageError, match="optimize_acknowledge"):
        conn.ack(frame.headers["ack"])


@pytest.fixture
def open_conn12(stomp_connect):
    return stomp_connect()


# ------------------------------------------------------------ 4. validation

def test_wait_for_receipt_refuses_a_negative_timeout(open_conn12):
    conn, _ = open_conn12
    conn.send("/queue/fu-r-" + uuid.uuid4().hex[:8], "m", receipt="r")
    started = time.monotonic()
    with pytest.raises(InvalidTimeoutError, match="timeout"):
        conn.wait_for_receipt("r", timeout=-1)
    assert time.monotonic() - started < 5
    conn.wait_for_receipt("r", timeout=10)  # the receipt is still there to wait for


@pytest.mark.parametrize("kwargs", [{"login": 5}, {"passcode": b"secret"}, {"login": "admin", "passcode": 1}])
def test_aio_connect_refuses_non_str_credentials(kwargs):
    with pytest.raises(ConfigurationError, match="str") as raised:
        amqstomp.aio.connect("stomp://127.0.0.1:1", **kwargs)
    assert "secret" not in str(raised.value)
