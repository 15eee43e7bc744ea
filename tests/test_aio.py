"""amqstomp.aio against the real ActiveMQ the test session starts: connect, send with
receipts, subscriptions in every ack mode with prefetch windows, transactions, errors,
close. Each test runs its coroutine with ``asyncio.run`` under a bound (no plugin)."""
import asyncio
import logging
from typing import Any, List

import pytest

import amqstomp.aio
from amqstomp.exception import (BrokerError, ConfigurationError, ConnectFailedException,
                                DuplicateTransactionError, ReceiptTimeout, UnknownMessageError,
                                UnknownTransactionError)
from conftest import broker_keystore
from aio_support import new_queue, run, url

pytestmark = pytest.mark.timeout(60)


def queue() -> str:
    return new_queue("aio")


def test_send_and_receive_auto(activemq):
    dest = queue()

    async def main() -> List[bytes]:
        async with amqstomp.aio.connect(url(activemq)) as client:
            assert client.connected
            assert client.server and client.server.startswith("ActiveMQ")
            async with client.subscribe(dest) as sub:
                for i in range(20):
                    await client.send(dest, b"m%d" % i)
                got = []
                for _ in range(20):
                    message = await sub.get(timeout=10)
                    got.append(message.body)
                with pytest.raises(asyncio.TimeoutError):
                    await sub.get(timeout=0.2)
                return got
    assert run(main()) == [b"m%d" % i for i in range(20)]


def test_host_list_tries_in_order(activemq):
    host, port = activemq.host_and_ports[0]

    async def main() -> None:
        # the first address refuses (a closed port), the second is the broker
        async with amqstomp.aio.connect([("127.0.0.1", 1), (host, port)], connect_timeout=5) as client:
            await client.send(queue(), b"x")
    run(main())


def test_connect_failed_and_refused(activemq):
    async def nobody() -> None:
        await amqstomp.aio.connect([("127.0.0.1", 1)], connect_timeout=2)
    with pytest.raises(ConnectFailedException):
        run(nobody())

    with pytest.raises(ConfigurationError):
        amqstomp.aio.connect("tcp://127.0.0.1:61616")  # OpenWire, not STOMP

    async def gives_up() -> None:
        await amqstomp.aio.connect("failover:(stomp://127.0.0.1:1)?startupMaxReconnectAttempts=2"
                                   "&initialReconnectDelay=10", connect_timeout=2)
    with pytest.raises(ConnectFailedException, match="gave up after 2"):
        run(gives_up())


def test_client_individual_prefetch_1(activemq):
    dest = queue()
    count = 50

    async def main() -> int:
        async with amqstomp.aio.connect(url(activemq)) as client:
            for i in range(count):
                await client.send(dest, b"%d" % i, receipt=(i == count - 1))
            async with client.subscribe(dest, ack="client-individual", prefetch_size=1) as sub:
                seen = 0
                async for message in sub:
                    assert message.body == b"%d" % seen
                    await message.ack()
                    with pytest.raises(UnknownMessageError):
                        await message.ack()
                    seen += 1
                    if seen == count:
                        break
            # all acked: nothing comes back on a new subscription
            async with client.subscribe(dest, ack="client-individual") as again:
                with pytest.raises(asyncio.TimeoutError):
                    await again.get(timeout=0.5)
            return seen
    assert run(main()) == count


def test_unacked_messages_come_back(activemq):
    dest = queue()

    async def main() -> List[str]:
        async with amqstomp.aio.connect(url(activemq)) as client:
            for i in range(3):
                await client.send(dest, b"%d" % i)
            async with client.subscribe(dest, ack="client", prefetch_size=10) as sub:
                first = [await sub.get(timeout=10) for _ in range(3)]
                await first[1].ack()  # cumulative: 0 and 1
            async with client.subscribe(dest, ack="client") as sub:
                again = await sub.get(timeout=10)
                await again.ack()
                return [again.body, again.headers.get("redelivered")]
    assert run(main()) == [b"2", "true"]


def test_optimized_acknowledge_batches(activemq):
    dest = queue()
    count = 300

    async def main() -> None:
        async with amqstomp.aio.connect(url(activemq)) as client:
            for i in range(count):
                await client.send(dest, b"x" * 256, receipt=(i == count - 1))
            async with client.subscribe(dest, ack="client", prefetch_size=100, optimize_acknowledge=True) as sub:
                for _ in range(count):
                    message = await sub.get(timeout=10)
                    with pytest.raises(UnknownMessageError):
                        await message.ack()  # amqstomp acks
                assert sub.window.acks_sent < count // 10  # batched
            async with client.subscribe(dest, ack="client") as sub:
                with pytest.raises(asyncio.TimeoutError):
                    await sub.get(timeout=0.5)  # every one was acked at close
    run(main())


def test_prefetch_window_pauses_reading(activemq):
    dest = queue()

    async def main() -> None:
        async with amqstomp.aio.connect(url(activemq)) as client:
            for i in range(40):
                await client.send(dest, b"x", receipt=(i == 39))
            async with client.subscribe(dest, ack="auto", prefetch_size=10) as sub:
                await asyncio.sleep(0.5)
                # ack:auto: the local buffer is bounded by the prefetch: reading is held once it is
                # full (what one read of the socket completed is queued whole)
                assert sub.window.paused and sub.link is not None and sub.link._read_holders
                got = 0
                while got < 40:
                    await sub.get(timeout=10)
                    got += 1
                assert not sub.link._read_holders  # drained: reading again
    run(main())


def test_send_error_is_broker_error(activemq):
    async def main() -> None:
        async with amqstomp.aio.connect(url(activemq)) as client:
            with pytest.raises(BrokerError) as info:
                # ActiveMQ refuses a SEND in a transaction it does not know; bypass the table's guard
                link = client.require()
                await client.write_frame(link, "SEND", {"destination": queue(), "transaction": "nope"}, b"x",
                                          True, 5, "a SEND")
            assert info.value.reason
    run(main())


def test_transactions(activemq):
    dest = queue()

    async def main() -> List[bytes]:
        async with amqstomp.aio.connect(url(activemq)) as client:
            async with client.transaction() as tx:
                await tx.send(dest, b"committed")
            with pytest.raises(RuntimeError):
                async with client.transaction() as tx:
                    await tx.send(dest, b"aborted")
                    raise RuntimeError("the application failed")
            tx = client.transaction()
            with pytest.raises(UnknownTransactionError):
                await tx.commit()
            await tx.begin()
            with pytest.raises(DuplicateTransactionError):
                await tx.begin()
            await tx.abort()
            got = []
            async with client.subscribe(dest, ack="client-individual") as sub:
                message = await sub.get(timeout=10)
                got.append(message.body)
                async with client.transaction() as tx2:
                    await tx2.ack(message)
                with pytest.raises(asyncio.TimeoutError):
                    await sub.get(timeout=0.5)
            return got
    assert run(main()) == [b"committed"]


def test_transactional_ack_aborted_comes_back(activemq):
    dest = queue()

    async def main() -> Any:
        async with amqstomp.aio.connect(url(activemq)) as client:
            await client.send(dest, b"one")
            async with client.subscribe(dest, ack="client-individual") as sub:
                message = await sub.get(timeout=10)
                with pytest.raises(KeyError):
                    async with client.transaction() as tx:
                        await tx.ack(message)
                        raise KeyError("fail")
            async with client.subscribe(dest, ack="client-individual") as sub:
                again = await sub.get(timeout=10)
                await again.ack()
                return again.body
    assert run(main()) == b"one"


def test_timeouts_are_checked(activemq):
    async def main() -> None:
        async with amqstomp.aio.connect(url(activemq)) as client:
            with pytest.raises(ValueError):
                await client.send(queue(), b"x", timeout=float("nan"))
            sub = client.subscribe(queue())
            async with sub:
                with pytest.raises(ReceiptTimeout):
                    # no room: a window of 1 byte, one send holding it, the next waits and times out
                    client.window.size = 1
                    client.window.in_flight = 1
                    await client.send(queue(), b"xx", timeout=0.2)
                client.window.in_flight = 0
    run(main())


def test_open_close_cycles_leave_nothing(activemq):
    """50 connect/subscribe/close cycles leave no task, thread or open socket behind."""
    import threading

    threads = threading.active_count()

    async def main() -> None:
        before = len(asyncio.all_tasks())
        for _ in range(50):
            async with amqstomp.aio.connect(url(activemq)) as client:
                async with client.subscribe(queue()):
                    pass
            assert client.link is not None and client.link.closed
            assert client.link.transport is not None and client.link.transport.is_closing()
        assert len(asyncio.all_tasks()) == before
    run(main())
    assert threading.active_count() == threads


def test_the_guide_example_runs(activemq, capsys):
    """docs/guides/asyncio.md's example, run as written against the session's broker (its URI swapped in)."""
    import os
    import re

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "guides", "asyncio.md")
    with open(path, encoding="utf-8") as f:
        code = re.search(r"```python\n(.*?)```", f.read(), re.DOTALL).group(1)
    code = code.replace("stomp://127.0.0.1:61613", url(activemq)).replace("/queue/guide", queue())
    code = code.replace("asyncio.run(main())", "asyncio.run(asyncio.wait_for(main(), 45))")
    exec(compile(code, path, "exec"), {"__name__": "guide"})
    assert capsys.readouterr().out.splitlines() == ["b'message 0'", "b'message 1'", "b'message 2'",
                                                    "b'sent at COMMIT'"]


def test_an_aborted_transactions_ack_is_given_back(activemq):
    """ABORT gives the transaction's ACKs back (the core's table: ``took``/``ended``): the
    message is unacknowledged again, on the broker (ActiveMQ keeps it dispatched to the
    subscription) and here, so a new ACK outside the transaction settles it."""
    dest = queue()

    async def main() -> None:
        async with amqstomp.aio.connect(url(activemq)) as client:
            await client.send(dest, b"one")
            async with client.subscribe(dest, ack="client-individual") as sub:
                message = await sub.get(timeout=10)
                tx = client.transaction()
                await tx.begin()
                await tx.ack(message)
                with pytest.raises(UnknownMessageError):
                    await message.ack()  # taken by the transaction
                await tx.abort()
                await message.ack(receipt=True)  # given back: acknowledged now
            async with client.subscribe(dest, ack="client-individual") as sub:
                with pytest.raises(asyncio.TimeoutError):
                    await sub.get(timeout=0.5)
    run(main())


def test_tls(tmp_path, activemq_factory):
    """stomp+ssl:// (the loop's TLS transport under the buffered protocol): messages both ways."""
    import ssl

    broker = activemq_factory(ssl={"keystore": broker_keystore(tmp_path), "keystore_password": "secret123"})
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a self-signed test certificate
    dest = queue()

    async def main() -> List[bytes]:
        async with amqstomp.aio.connect(broker.ssl_url, ssl=context) as client:
            async with client.subscribe(dest, ack="client-individual", prefetch_size=5) as sub:
                for i in range(50):
                    await client.send(dest, b"%d" % i + b"x" * 70000 * (i % 2))  # some above one TLS record
                got = []
                for _ in range(50):
                    message = await sub.get(timeout=10)
                    await message.ack()
                    got.append(message.body[:2].rstrip(b"x"))
                return got
    assert run(main()) == [b"%d" % i for i in range(50)]


def test_an_error_answering_no_await_reaches_on_error_else_it_is_logged(activemq, caplog):
    """Issue 22: a broker ERROR that answers none of the client's awaits (ActiveMQ 5.17 answers a
    SEND without a destination, written without a receipt, with an ERROR and keeps the socket)
    reaches ``on_error`` as a BrokerError; one answering an await (an ACK of no message, with its
    receipt) raises there and does not; with no ``on_error`` the ERROR is logged, not dropped."""
    heard: List[BrokerError] = []

    async def provoke(client: Any) -> None:
        link = await client.ready(10, "test")
        await client.write_frame(link, "SEND", {}, b"no destination", False, 10, "a SEND with no destination")
        for _ in range(200):  # bounded: 10 s (logged, then on_error called, as the ERROR is read)
            if any(r.name == "amqstomp.aio" and "broker ERROR" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)

    async def main() -> None:
        async with amqstomp.aio.connect(url(activemq), on_error=heard.append) as client:
            await provoke(client)
            assert len(heard) == 1, heard
            link = await client.ready(10, "test")
            with pytest.raises(BrokerError, match="ACK"):  # answers this await: raised here, not heard
                await client.write_frame(link, "ACK", {"id": "no-such-ack-id"}, b"", True, 10, "an ACK")
            dest = queue()
            await client.send(dest, b"after the errors")  # the socket goes on
            assert client.connected
        async with amqstomp.aio.connect(url(activemq)) as client:  # no on_error: logged
            caplog.clear()
            await provoke(client)
            assert client.connected

    with caplog.at_level(logging.WARNING, logger="amqstomp.aio"):
        run(main())
    assert len(heard) == 1, heard
    error = heard[0]
    assert type(error) is BrokerError and error.frame.cmd == "ERROR" and "Destination" in error.broker_message
    assert error.receipt_id is None and error.reason in str(error)
    logged = [r for r in caplog.records if r.name == "amqstomp.aio" and "broker ERROR" in r.getMessage()]
    assert logged and logged[-1].levelno == logging.WARNING and "Destination" in logged[-1].getMessage()
