"""FrameParser.body_missing / read_body (issue 21: one copy per body): the rest of a body whose
content-length is known is read straight into its final bytes. Both codecs (compiled and the pure
twin) must give the same frames, offsets and errors as ``feed``; the compiled one must hand
``readinto`` the body's own bytes (no copy after the kernel's)."""
import ctypes
import random
import socket
import sys
import threading

import pytest

from amqstomp._core import _codec_py
from amqstomp._core.state import ProtocolState
from amqstomp._io.channel import BODY_READ_MIN, HEAD_READ_BYTES, PlainChannel, stream_reader
from amqstomp.exception import StompProtocolError

pytestmark = pytest.mark.timeout(60)

try:
    from amqstomp._core import _codec as _codec_c
except ImportError:  # pragma: no cover - a build without the extension
    _codec_c = None

IMPLEMENTATIONS = [pytest.param(_codec_py, id="python"),
                   pytest.param(_codec_c, id="cython",
                                marks=pytest.mark.skipif(_codec_c is None, reason="compiled codec not built"))]
BYTES_HEADER = sys.getsizeof(b"") - 1  # where a bytes object's data starts, from its address


@pytest.fixture(params=IMPLEMENTATIONS)
def codec(request):
    return request.param


def message(body: bytes, mid: int = 1) -> bytes:
    return (b"MESSAGE\ndestination:/queue/big\nmessage-id:ID:%d\nsubscription:0\ncontent-length:%d\n\n"
            % (mid, len(body))) + body + b"\x00\n"


class Source:
    """A readinto over a byte string, giving at most ``most`` bytes a call (random sizes)."""

    def __init__(self, data: bytes, rng: random.Random, most: int) -> None:
        self.data, self.pos, self.rng, self.most = data, 0, rng, most
        self.buffers = []

    def readinto(self, buffer) -> int:
        self.buffers.append(type(buffer))
        n = min(len(buffer), len(self.data) - self.pos, self.rng.randint(1, self.most))
        buffer[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n

    def read(self, size: int) -> bytes:
        chunk = self.data[self.pos:self.pos + self.rng.randint(1, size)]
        self.pos += len(chunk)
        return chunk


@pytest.mark.parametrize("size", [100, 20_000, 64 * 1024, (1 << 20) + 12345, 3 << 20])
@pytest.mark.parametrize("seed", range(3))
def test_read_body_gives_what_feed_gives(codec, size, seed):
    rng = random.Random(seed * 1000 + size)
    bodies = [bytes(rng.getrandbits(8) for _ in range(64)) * (size // 64) + b"\x00" * (size % 64)
              for _ in range(2)]
    stream = message(bodies[0], 1) + b"\n" + message(bodies[1], 2) + message(b"small", 3)
    parser = codec.FrameParser()
    source = Source(stream, rng, 300_000)
    frames, reads = [], 0
    while source.pos < len(stream):
        if parser.body_missing and rng.random() < 0.8:
            before = parser.offset + parser.buffered
            missing = parser.body_missing
            got = parser.read_body(source.readinto)
            assert 0 < got <= missing and parser.offset + parser.buffered == before + got
            assert parser.body_missing == missing - got
            reads += 1
        else:
            frames += parser.feed(source.read(70_000))
        assert parser.offset + parser.buffered == source.pos
    assert [f.body for f in frames] == bodies + [b"small"]
    assert all(type(f.body) is bytes for f in frames)
    assert [f.headers["message-id"] for f in frames] == ["ID:1", "ID:2", "ID:3"]
    assert parser.buffered == 0 and parser.body_missing == 0 and parser.offset == len(stream)
    if size > 70_000:
        assert reads  # the body did arrive through read_body


def test_compiled_reads_straight_into_the_body():
    """The 64 KiB body's rest is written by readinto into the frame's body object itself."""
    if _codec_c is None:
        pytest.skip("compiled codec not built")
    body = bytes(range(256)) * 256
    stream = message(body)
    head = stream.index(b"\n\n") + 2 + 1000  # the header block and 1000 bytes of the body
    parser = _codec_c.FrameParser()
    assert parser.feed(stream[:head]) == []
    assert parser.body_missing == len(body) - 1000
    where = []

    def readinto(view):
        assert isinstance(view, memoryview) and len(view) == len(body) - 1000
        c = ctypes.c_char.from_buffer(view)
        where.append(ctypes.addressof(c))
        del c
        view[:] = body[1000:]
        return len(view)

    assert parser.read_body(readinto) == len(body) - 1000
    assert parser.body_missing == 0
    frames = parser.feed(stream[head + len(body) - 1000:])
    assert len(frames) == 1 and frames[0].body == body
    assert where == [id(frames[0].body) + BYTES_HEADER + 1000]


def test_a_body_parser_can_not_read(codec):
    parser = codec.FrameParser()
    with pytest.raises(ValueError):
        parser.read_body(lambda buffer: 0)  # nothing arriving
    parser.feed(b"MESSAGE\ncontent-length:50000\n\nabc")
    for bad in (-1, 50_000, True, 1.0, None):
        with pytest.raises(ValueError):
            parser.read_body(lambda buffer, bad=bad: bad)
        assert parser.buffered == 3 and parser.body_missing == 49_997  # nothing counted
    assert parser.read_body(lambda buffer: 0) == 0  # the stream ended
    with pytest.raises(StompProtocolError) as err:
        parser.feed(b"x" * 49_997 + b"Y")
    assert err.value.offset == len(b"MESSAGE\ncontent-length:50000\n\n") + 50_000
    assert parser.body_missing == 0
    with pytest.raises(StompProtocolError):
        parser.read_body(lambda buffer: 0)  # stopped


def test_no_body_missing_without_content_length(codec):
    parser = codec.FrameParser()
    parser.feed(b"MESSAGE\ndestination:/q\n\n" + b"x" * 40_000)
    assert parser.body_missing == 0


def connected_state() -> ProtocolState:
    proto = ProtocolState()
    proto.handle(proto.receive_data(b"CONNECTED\nversion:1.2\n\n\x00", 0.0)[0])
    return proto


@pytest.mark.parametrize("size", [64 * 1024, 3 << 20])
def test_stream_reader_reads_big_bodies_straight(size):
    """The reader thread's read over a real socket: the rest of a body of at least BODY_READ_MIN
    bytes is read with recv_into, the read after it asks for a frame's head only (so that the next
    body comes the same way); every frame comes out as it was sent."""
    proto = connected_state()
    bodies = [bytes([i]) * size for i in range(3)] + [b"tiny"]
    stream = b"".join(message(body, i) for i, body in enumerate(bodies))
    a, b = socket.socketpair()
    sender = threading.Thread(target=a.sendall, args=(stream,), daemon=True)
    try:
        b.settimeout(30)
        channel = PlainChannel(b)
        b.settimeout(30)
        into = []
        recv_into = channel.recv_into

        def counted(buffer):
            into.append(len(buffer))
            return recv_into(buffer)
        channel.recv_into = counted  # type: ignore[method-assign]
        read = stream_reader(channel, proto, 65536, lambda: 1.0)
        sender.start()
        frames = []
        for _ in range(100_000):
            if len(frames) == len(bodies):
                break
            frames += proto.receive_data(read(), 0.0)
        assert [f.body for f in frames] == bodies
        assert into and proto.last_read_ms == 0.0  # receive_data's time came last
        # the first body may come mostly by recv(65536); the read after it asks for a head only
        assert sum(into) >= 2 * (size - HEAD_READ_BYTES)
    finally:
        a.close()
        b.close()
        sender.join(10)


def test_stream_reader_leaves_small_bodies_to_recv():
    proto = connected_state()
    proto.receive_data(b"MESSAGE\ncontent-length:%d\n\nab" % (BODY_READ_MIN - 1), 0.0)
    a, b = socket.socketpair()
    try:
        b.settimeout(30)
        channel = PlainChannel(b)
        b.settimeout(30)
        channel.recv_into = None  # type: ignore[assignment]  # a read must not come here
        a.sendall(b"z" * (BODY_READ_MIN - 3) + b"\x00")
        read = stream_reader(channel, proto, 65536, lambda: 1.0)
        frames = []
        for _ in range(100):
            frames += proto.receive_data(read(), 0.0)
            if frames:
                break
        assert frames[0].body == b"ab" + b"z" * (BODY_READ_MIN - 3)
    finally:
        a.close()
        b.close()
