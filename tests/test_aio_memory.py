"""amqstomp.aio's driver in memory: the protocol object fed bytes by hand over a fake
transport (no socket), and the one pure rule it added to the core
(:func:`amqstomp._core.acks.acked_by_application`)."""
import asyncio
import re
from typing import Any, List

import pytest

from amqstomp import aio
from amqstomp._core import acks
from amqstomp.aio._link import AioLink
from amqstomp.exception import (BrokerError, ConfigurationError, ConnectFailedException, ConnectionClosedException,
                                ConnectRefusedError)
from amqstomp.flow import ACK_CLIENT, ACK_CLIENT_INDIVIDUAL, SubscriptionWindow

pytestmark = pytest.mark.timeout(30)


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: List[bytes] = []
        self.reading = True
        self.aborted = False

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def _link(loop: asyncio.AbstractEventLoop, messages: List[Any], lost: List[Any]) -> AioLink:
    link = AioLink(loop, 1, messages.append, lost.append)
    link.connection_made(FakeTransport())
    return link


def test_receipts_errors_and_loss_in_memory():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        messages: List[Any] = []
        lost: List[Any] = []
        link = _link(loop, messages, lost)
        link.write(link.encode("CONNECT", {"accept-version": "1.2", "heart-beat": "0,0"}))
        link.data_received(b"CONNECTED\nversion:1.2\nserver:ActiveMQ/5.17.2\n\n\x00")
        assert (await link.connected).headers["server"] == "ActiveMQ/5.17.2"
        ok = link.expect_receipt("r-1")
        refused = link.expect_receipt("r-2")
        pending = link.expect_receipt("r-3")
        link.data_received(b"RECEIPT\nreceipt-id:r-1\n\n\x00ERROR\nreceipt-id:r-2\nmessage:no way\n\n\x00"
                           b"MESSAGE\nsubscription:1\nmessage-id:m\ndestination:/queue/a\nack:a1\n\nhi\x00")
        assert (await ok).cmd == "RECEIPT"
        with pytest.raises(BrokerError, match="no way"):
            await refused
        assert [m.body for m in messages] == [b"hi"]
        link.connection_lost(None)
        with pytest.raises(ConnectionClosedException, match="closed by the broker"):
            await pending
        assert lost == [link] and link.closed
        with pytest.raises(ConnectionClosedException):
            link.write(b"x")
    asyncio.run(main())


def test_refused_connect_in_memory():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        link = _link(loop, [], [])
        link.write(link.encode("CONNECT", {"accept-version": "1.2"}))
        link.data_received(b"ERROR\nmessage:bad login\n\n\x00")
        with pytest.raises(ConnectRefusedError, match="bad login"):
            await link.connected
        assert link.closed
    asyncio.run(main())


def test_heartbeat_is_written_and_silence_ends_the_link_once_confirmed():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        lost: List[Any] = []
        link = _link(loop, [], lost)
        link.write(link.encode("CONNECT", {"accept-version": "1.2", "heart-beat": "100,100"}))
        transport = link.transport
        assert isinstance(transport, FakeTransport)
        link.data_received(b"CONNECTED\nversion:1.2\nheart-beat:100,100\n\n\x00")
        assert link.proto.send_ms == 100 and link.proto.recv_ms == 100
        await asyncio.sleep(0.2)
        assert b"\n" in transport.written  # a heart-beat went out (every 50 ms of write silence)
        # reading held by flow control: the silence is ours, not the broker's
        link.hold_reading("sub")
        await asyncio.sleep(0.5)
        assert not link.closed and not transport.reading
        link.release_reading("sub")
        assert transport.reading
        link.data_received(b"\n")
        await asyncio.sleep(0.1)
        assert not link.closed
        await asyncio.sleep(0.5)  # silent past 100 x 2 x 1.5 = 300 ms
        assert link.closed and "heart-beat" in link.close_reason and lost == [link]
    asyncio.run(main())


def test_acked_by_application_frees_the_window():
    sub = acks.Acking(SubscriptionWindow(2, ACK_CLIENT_INDIVIDUAL, auto_ack=False, max_buffered=4))
    flags = [acks.delivered(sub, 0, 1) for _ in range(4)]
    assert flags[-1] & acks.PAUSE and sub.window.paused
    dues = [acks.consumed(sub, {"message-id": str(seq)}, seq, 1, 0, False) for seq in (1, 2)]
    assert dues[0] is None and dues[1] is not None and dues[1].resume and dues[1].ack is None
    assert sub.window.unacked == 2
    assert acks.acked_by_application(sub, False) is False  # not paused any more: nothing to resume
    assert sub.window.unacked == 1
    cumulative = acks.Acking(SubscriptionWindow(10, ACK_CLIENT, auto_ack=False))
    for seq in range(1, 4):
        acks.delivered(cumulative, 0, 0)
        acks.consumed(cumulative, {"message-id": str(seq)}, seq, 0, 0, False)
    assert cumulative.window.unacked == 3
    assert acks.acked_by_application(cumulative, True) is False
    assert cumulative.window.unacked == 0


def test_aio_imports_no_threaded_driver_nor_facade():
    """amqstomp.aio reuses the core, never the threaded driver (threads and locks) or a facade
    (checked on its modules' own import statements: ``import amqstomp.aio`` loads the package's
    ``__init__``, so the import closure says nothing)."""
    import ast
    import os

    import amqstomp.aio

    forbidden = ("_io.link", "_io.owner", "_io.driver", "_io.writer", "_engine", "connection", "transport",
                 "protocol", "_session", "listener", "subscription", "failover", "jms", "utils")
    folder = os.path.dirname(amqstomp.aio.__file__)
    found = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:  # from ..X import (outside aio/)
                module = node.module or ""
                if any(module == bad or module.startswith(bad + ".") for bad in forbidden):
                    found.append("%s: from %s%s" % (name, "." * node.level, module))
            elif isinstance(node, ast.Import):
                found.extend("%s: import %s" % (name, a.name) for a in node.names
                             if a.name.startswith("amqstomp.") and not a.name.startswith("amqstomp.aio"))
    assert found == []


@pytest.mark.parametrize("uri, named", [
    ("failover:(stomp://127.0.0.1:1,stomp://127.0.0.1:2)?priorityBackup=true", "priorityBackup"),
    ("failover:(stomp://127.0.0.1:1,stomp://127.0.0.1:2)?rebalanceInterval=2000", "rebalanceInterval"),
    ("stomp://127.0.0.1:1?connectionTimeout=100", "connectionTimeout"),
    ("stomp://127.0.0.1:1?jms.prefetchPolicy.all=5", "jms.prefetchPolicy.all"),
])
def test_uri_options_this_api_does_not_apply_are_refused_not_ignored(uri: str, named: str) -> None:
    """A URI option the asyncio API does not apply yet is a ConfigurationError naming it,
    before any socket (the threaded APIs apply it; silently ignoring it would not do)."""
    async def main() -> None:
        async with aio.connect(uri, connect_timeout=1):
            pass

    with pytest.raises(ConfigurationError, match=re.escape(named)):
        asyncio.run(main())


def test_the_uri_options_this_api_applies_are_taken() -> None:
    """heartBeat, host, stompVersion and the failover back-off options pass the check (the
    refusal above is not a refusal of every option): the connect then fails on the closed port."""
    uri = ("failover:(stomp://127.0.0.1:1?heartBeat=1000,1000&stompVersion=1.1)"
           "?maxReconnectAttempts=0&initialReconnectDelay=10&randomize=false&jms.userName=u")

    async def main() -> None:
        async with aio.connect(uri, connect_timeout=1):
            pass

    with pytest.raises(ConnectFailedException):
        asyncio.run(main())
