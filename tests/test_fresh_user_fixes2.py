"""A second fresh user's findings (task freshfix) outside amqstomp.aio, each fixed with a test
that failed before, against the session's ActiveMQ: a memoryview body's content-length (F6b),
arguments refused clearly (F6), a STOMP 1.2 ACK by message-id (F7)."""
import array
import asyncio
import time
import uuid
from typing import Any

import pytest

import amqstomp
import amqstomp.aio
from amqstomp.codec import encode_frame
import amqstomp.transport
from amqstomp.exception import (ConfigurationError, ConnectFailedException, InvalidHostError, UnknownEncodingError,
                                UnknownMessageError)
from amqstomp.jms import ConnectionFactory
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


class SendFrameSpy(amqstomp.Connection12):
    """A stomp.py test's subclass: its send_frame sees every frame, then calls the real one."""

    def send_frame(self, cmd, headers=None, body=b""):
        self.seen = getattr(self, "seen", []) + [(cmd, dict(headers or {}))]
        return super().send_frame(cmd, headers, body)


def test_send_frame_route_counts_a_memoryview_in_bytes(stomp_connect):
    """send() through a replaced send_frame (its super() the real one), and send_frame itself:
    content-length is the body's bytes, as send()'s own route (amqstomp._core.frames.body_bytes).
    Before: send() on the subclass raised FrameEncodeError (content-length 3 for 12 bytes, and
    5 for the 6 bytes of 'h\u00e9llo')."""
    conn, col = stomp_connect(SendFrameSpy, auto_decode=False)
    dest = queue("mv-sf")
    conn.subscribe(dest, "s1", ack="auto", receipt="sub")
    conn.wait_for_receipt("sub", 10)
    conn.send(dest, ints())
    conn.send(dest, "h\u00e9llo")
    conn.send(dest, ints(), headers={"content-length": 3})  # a wrong one given: the body's size is written
    conn.send_frame("SEND", {"destination": dest}, ints())
    frames = col.wait_messages(4)
    assert [f.headers["content-length"] for f in frames] == ["12", "6", "12", "12"]
    assert [bytes(f.body) for f in frames] == [ints().tobytes(), "h\u00e9llo".encode()] + [ints().tobytes()] * 2
    sends = [headers for cmd, headers in conn.seen if cmd == "SEND"]
    # what the subclass sees is stomp.py's send() count, but a memoryview's in bytes (stomp.py: its 3 items)
    assert [h.get("content-length") for h in sends] == [12, 5, 3, None]


def test_aio_send_of_a_memoryview_sends_its_bytes(activemq):
    dest = queue("mv-aio")

    async def main() -> Any:
        async with amqstomp.aio.connect(url(activemq)) as client:
            async with client.subscribe(dest) as sub:
                await client.send(dest, ints())
                message = await sub.get(timeout=10)
                return message.body, message.headers.get("content-length")

    assert run(main()) == (ints().tobytes(), "12")


# ------------------------------------------------------------ F6. arguments refused clearly

@pytest.mark.parametrize("kwargs, error, words", [
    ({"heartbeats": None}, ConfigurationError, "heartbeats"),
    ({"heartbeats": "1000,1000"}, ConfigurationError, "heartbeats"),
    ({"ssl": "yes"}, ConfigurationError, "ssl"),
    ({"vhost": 5}, ConfigurationError, "vhost"),
    ({"on_error": 5}, ConfigurationError, "on_error"),
    ({"on_resumed": "x"}, ConfigurationError, "on_resumed"),
])
def test_aio_connect_refuses_bad_arguments_naming_them(kwargs, error, words):
    with pytest.raises(error, match=words) as raised:
        amqstomp.aio.Client("stomp://127.0.0.1:1", **kwargs)
    assert repr(list(kwargs.values())[0]) in str(raised.value)


def test_aio_connect_refuses_a_bad_port_as_the_threaded_api_does():
    with pytest.raises(InvalidHostError, match="99999"):
        amqstomp.aio.Client([("127.0.0.1", 99999)])
    conn = amqstomp.Connection12([("127.0.0.1", 99999)])
    with pytest.raises(InvalidHostError, match="99999"):
        conn.connect(wait=True)


@pytest.mark.parametrize("make", [
    lambda **kw: amqstomp.Connection10([("127.0.0.1", 1)], **kw),
    lambda **kw: amqstomp.Connection11([("127.0.0.1", 1)], **kw),
    lambda **kw: amqstomp.Connection12([("127.0.0.1", 1)], **kw),
    lambda **kw: amqstomp.transport.Transport([("127.0.0.1", 1)], **kw),
    lambda **kw: amqstomp.transport.BaseTransport(**kw),
], ids=["Connection10", "Connection11", "Connection12", "Transport", "BaseTransport"])
@pytest.mark.parametrize("encoding", ["no-such-codec", "base64"])
def test_a_bogus_encoding_is_refused_at_construction_naming_it(make, encoding):
    """Before: accepted; the first send of a str raised LookupError, and every body received
    with auto_decode was dropped (the dispatcher logged the LookupError)."""
    with pytest.raises(UnknownEncodingError, match="encoding=%r" % encoding) as raised:
        make(encoding=encoding)
    assert isinstance(raised.value, LookupError) and isinstance(raised.value, ConfigurationError)
    with pytest.raises(TypeError, match="encoding must be a str"):
        make(encoding=None)
    assert make(encoding="latin-1") is not None  # any text codec Python knows


def test_a_bogus_encoding_is_refused_by_the_websocket_connection():
    ws = pytest.importorskip("amqstomp.adapter.ws")
    with pytest.raises(UnknownEncodingError, match="'no-such-codec'"):
        ws.WSStompConnection([("127.0.0.1", 1)], encoding="no-such-codec")


@pytest.mark.parametrize("recv_bytes", [-1, 0, 1.5, True])
def test_threaded_recv_bytes_is_checked_at_construction(recv_bytes):
    with pytest.raises(ConfigurationError, match="recv_bytes"):
        amqstomp.Connection12([("127.0.0.1", 1)], recv_bytes=recv_bytes)


def test_send_headers_not_a_mapping_is_refused_naming_it(open_conn12, activemq):
    conn, _ = open_conn12
    with pytest.raises(ConfigurationError, match="headers of SEND must be a mapping.*'abc'"):
        conn.send(queue("hdr"), "x", headers="abc")

    async def main() -> None:
        async with amqstomp.aio.connect(url(activemq)) as client:
            with pytest.raises(ConfigurationError, match="headers of SEND must be a mapping.*'abc'"):
                await client.send(queue("hdr-aio"), b"x", headers="abc")
    run(main())


# ------------------------------------------------------------ F7. a STOMP 1.2 ACK by message-id

def test_threaded_12_ack_by_message_id_says_to_use_the_ack_header(open_conn12):
    conn, col = open_conn12
    dest = queue("ack12")
    conn.subscribe(dest, "s1", ack="client-individual", receipt="sub")
    conn.wait_for_receipt("sub", 10)
    conn.send(dest, "one")
    frame = col.wait_messages(1)[0]
    assert frame.headers["message-id"] != frame.headers["ack"]  # ActiveMQ on STOMP 1.2
    with pytest.raises(UnknownMessageError, match="MESSAGE's 'ack' header") as info:
        conn.ack(frame.headers["message-id"])
    assert "not its message-id" in str(info.value)
    conn.ack(frame.headers["ack"])  # still held: the right id acknowledges it


# ------------------------------------------------------------ F3. JMS create_connection(timeout_s) on stomp://

def test_jms_create_connection_timeout_bounds_a_plain_stomp_uri(activemq, tcp_proxy_factory):
    """A broker that takes the socket and never answers CONNECT (a stalled TcpProxy):
    ``timeout_s=2`` bounds the connect on a plain ``stomp://`` URI as on ``failover:`` (it was
    validated, then ignored: the connectionTimeout of 30 s applied)."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    proxy.stall()
    factory = ConnectionFactory("stomp://%s:%d" % proxy.address)
    started = time.monotonic()
    with pytest.raises(ConnectFailedException):
        factory.create_connection(timeout_s=2)
    assert time.monotonic() - started < 2 + 3.0  # not the 30 s connectionTimeout
