"""A second fresh user's findings (task freshfix) outside amqstomp.aio, each fixed with a test
that failed before, against the session's ActiveMQ: a memoryview body's content-length (F6b),
arguments refused clearly (F6), a STOMP 1.2 ACK by message-id (F7)."""
import array
import asyncio
import uuid
from typing import Any

import pytest

import amqstomp
import amqstomp.aio
from amqstomp.codec import encode_frame
from aio_support import run, url

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def open_conn12(stomp_connect):
    return stomp_connect()


def queue(tag: str) -> str:
    return "/queue/fu2-%s-%s" % (tag, uuid.uuid4().hex[:10])


# ------------------------------------------------------------ F6b. content-length counts bytes

def ints() -> memoryview:
    """A memoryview of 3 items of 4 bytes: len() 3, nbytes 12."""
    return memoryview(array.array("i", [1, 2, 3]))


def test_codec_content_length_of_a_memoryview_is_its_bytes():
    """The codec (compiled, and the pure twin under AMQSTOMP_NO_EXTENSIONS=1) counts bytes."""
    view = ints()
    data = encode_frame("SEND", {"destination": "/queue/x"}, view, "1.2", True)
    assert b"content-length:12\n" in data and data.endswith(view.tobytes() + b"\0")
    data = encode_frame("SEND", {"destination": "/queue/x", "content-length": "12"}, view, "1.2", True)
    assert data.endswith(view.tobytes() + b"\0")


def test_threaded_send_of_a_memoryview_sends_its_bytes(open_conn12):
    conn, col = open_conn12
    dest = queue("mv")
    conn.subscribe(dest, "s1", ack="auto", receipt="sub")
    conn.wait_for_receipt("sub", 10)
    conn.send(dest, ints())
    conn.send(dest, ints(), headers={"content-length": 3})  # a wrong one given: the body's size is written
    frames = col.wait_messages(2)
    assert [bytes(f.body) if isinstance(f.body, (bytes, bytearray)) else f.body.encode("latin-1")
            for f in frames] == [ints().tobytes()] * 2
    assert [f.headers["content-length"] for f in frames] == ["12", "12"]


def test_aio_send_of_a_memoryview_sends_its_bytes(activemq):
    dest = queue("mv-aio")

    async def main() -> Any:
        async with amqstomp.aio.connect(url(activemq)) as client:
            async with client.subscribe(dest) as sub:
                await client.send(dest, ints())
                message = await sub.get(timeout=10)
                return message.body, message.headers.get("content-length")

    assert run(main()) == (ints().tobytes(), "12")
