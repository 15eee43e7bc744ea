"""An amqstomp.aio client belongs to the event loop it was connected on: an await of it, its
subscriptions, transactions or messages on another loop (another thread's, or after the owning
``asyncio.run()`` ended) raises WrongEventLoopError before anything is written -- before, a SEND
from another thread went out and then failed with asyncio's own ValueError (a retry sent it
twice). A fake broker on 127.0.0.1 records every frame the client wrote."""
import asyncio
import os
import re
import threading
from typing import Any, Callable, Dict, Iterator

import pytest
from test_guards import FakeBroker

import amqstomp.aio
from amqstomp.exception import StompException, WrongEventLoopError

pytestmark = pytest.mark.timeout(60)


class AnsweringBroker(FakeBroker):
    """test_guards' fake STOMP server (an ActiveMQ CONNECTED), answering every ``receipt`` with a
    RECEIPT and a SUBSCRIBE with one MESSAGE too; :meth:`commands` lists what the client wrote."""

    def answer(self, frame: bytes) -> bytes:
        lines = frame.split(b"\n\n", 1)[0].decode().split("\n")
        headers = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
        out = super().answer(frame)
        if "receipt" in headers:
            out += b"RECEIPT\nreceipt-id:%s\n\n\0" % headers["receipt"].encode()
        if lines[0] == "SUBSCRIBE":
            out += (b"MESSAGE\nsubscription:%s\nmessage-id:m-1\nack:m-1\ndestination:%s\ncontent-length:2\n\nhi\0"
                    % (headers["id"].encode(), headers["destination"].encode()))
        return out


@pytest.fixture
def broker() -> Iterator[AnsweringBroker]:
    fake = AnsweringBroker(server="ActiveMQ/5.17.2")
    try:
        yield fake
    finally:
        fake.close()


def test_every_await_from_another_threads_loop_raises_before_writing(broker: AnsweringBroker) -> None:
    """The user's reproducer, for every public await that writes or waits: each raises
    WrongEventLoopError (a RuntimeError and a StompException, naming the fix), and the broker
    got nothing from the other thread; run_coroutine_threadsafe, as the message says, works."""
    async def main() -> Dict[str, Any]:
        loop = asyncio.get_running_loop()
        client = await amqstomp.aio.connect("stomp://127.0.0.1:%d" % broker.port)
        sub = await client.subscribe("/queue/x", ack="client-individual").__aenter__()
        message = await sub.get(timeout=5)
        tx = await client.transaction().__aenter__()
        fresh = client.subscribe("/queue/y")

        async def handler(_: Any) -> None:
            pass

        calls: Dict[str, Callable[[], Any]] = {
            "send": lambda: client.send("/queue/x", b"from-thread"),
            "send(receipt=False)": lambda: client.send("/queue/x", b"from-thread", receipt=False),
            "get": lambda: sub.get(timeout=1), "async for": sub.__anext__, "ack": message.ack,
            "nack": message.nack, "run": lambda: sub.run(handler), "enter": fresh.__aenter__,
            "begin": client.transaction().begin, "tx.send": lambda: tx.send("/queue/x", b"t"),
            "tx.ack": lambda: tx.ack(message), "commit": tx.commit, "abort": tx.abort, "sub.close": sub.close,
            "close": client.close}
        await client.send("/queue/x", b"sync")  # its RECEIPT: the broker read the BEGIN before it
        before = list(broker.commands())
        outcomes: Dict[str, Any] = {}

        def other() -> None:
            for name, call in calls.items():
                try:
                    asyncio.run(asyncio.wait_for(call(), 2))
                    outcomes[name] = "returned"
                except BaseException as exc:  # noqa: B902 - the test reports whatever came
                    outcomes[name] = exc
            future = asyncio.run_coroutine_threadsafe(client.send("/queue/x", b"by the owner's loop"), loop)
            outcomes["run_coroutine_threadsafe"] = future.result(10)

        thread = threading.Thread(target=other)
        thread.start()
        await loop.run_in_executor(None, thread.join)
        written = broker.commands()[len(before):]
        await message.ack()  # all still usable on its own loop
        await tx.commit()
        await sub.close()
        await client.close()
        return {"outcomes": outcomes, "written": written}

    got = asyncio.run(asyncio.wait_for(main(), 40))
    outcomes = got.pop("outcomes")
    assert outcomes.pop("run_coroutine_threadsafe") is None
    for name, outcome in outcomes.items():
        assert isinstance(outcome, WrongEventLoopError), (name, outcome)
    error = outcomes["send"]
    assert isinstance(error, RuntimeError) and isinstance(error, StompException)
    assert "belongs to the event loop it was connected on" in str(error)
    assert "asyncio.run_coroutine_threadsafe(coro, loop)" in str(error)
    assert got["written"] == ["SEND"], got  # only run_coroutine_threadsafe's


def test_awaits_after_the_owning_loop_ended_raise_before_writing(broker: AnsweringBroker) -> None:
    """The client was not closed and its asyncio.run() ended: a later asyncio.run() of its
    send, close, a message's ack or a receive raises WrongEventLoopError, writing nothing
    (before: RuntimeError "Event loop is closed", a bare ValueError, an ack that returned None)."""
    async def first() -> Any:
        client = await amqstomp.aio.connect("stomp://127.0.0.1:%d" % broker.port)
        sub = await client.subscribe("/queue/x", ack="client-individual").__aenter__()
        return client, sub, await sub.get(timeout=5)

    client, sub, message = asyncio.run(first())
    count = len(broker.commands())
    for call in (lambda: client.send("/queue/x", b"late"), message.ack, lambda: sub.get(timeout=1),
                 client.transaction().begin, client.close):
        with pytest.raises(WrongEventLoopError, match="run_coroutine_threadsafe"):
            asyncio.run(call())
    assert broker.commands()[count:] == []  # (the socket is the fake broker's to close: its loop is closed)


def test_the_guides_handler_form_imports_redelivery_policy() -> None:
    """docs/guides/asyncio.md: each code block that uses RedeliveryPolicy imports it, from
    amqstomp.flow (``from amqstomp.aio import RedeliveryPolicy`` is an ImportError)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "guides", "asyncio.md")
    with open(path, encoding="utf-8") as f:
        blocks = re.findall(r"```(?:python|text)\n(.*?)```", f.read(), re.DOTALL)
    using = [block for block in blocks if "RedeliveryPolicy(" in block]
    assert len(using) >= 2
    for block in using:
        assert "from amqstomp.flow import RedeliveryPolicy" in block, block
    with pytest.raises(ImportError):
        from amqstomp.aio import RedeliveryPolicy  # noqa: F401
