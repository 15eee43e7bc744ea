"""Codec tests, run over the compiled module and the pure-Python twin."""
import importlib
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqstomp._core import _codec_py
from amqstomp.exception import FrameEncodeError, StompException, StompProtocolError

pytestmark = pytest.mark.timeout(60)

try:
    from amqstomp._core import _codec as _codec_c
except ImportError:  # pragma: no cover - a build without the extension
    _codec_c = None

IMPLEMENTATIONS = [pytest.param(_codec_py, id="python")]
IMPLEMENTATIONS.append(pytest.param(_codec_c, id="cython",
                                    marks=pytest.mark.skipif(_codec_c is None, reason="compiled codec not built")))


@pytest.fixture(params=IMPLEMENTATIONS)
def codec(request):
    return request.param


def parse_all(codec, data, step=None, **kw):
    parser = codec.FrameParser(**kw)
    if step is None:
        return parser.feed(data)
    frames = []
    for i in range(0, len(data), step):
        frames += parser.feed(data[i:i + step])
    return frames


def frame_tuple(frame):
    return frame.cmd, dict(frame.headers), bytes(frame.body)


MESSAGE = (b"MESSAGE\ndestination:/queue/a\nmessage-id:ID:1\nsubscription:0\n"
           b"content-length:5\n\nhel\x00o\x00")


def test_compiled_codec_is_loaded_by_default():
    """Unless AMQSTOMP_NO_EXTENSIONS is set, the selector loads the compiled codec."""
    env = {k: v for k, v in os.environ.items() if k != "AMQSTOMP_NO_EXTENSIONS"}
    out = subprocess.run(
        [sys.executable, "-c", "import amqstomp.codec as c; print(c.IMPLEMENTATION, c.FrameParser.__module__)"],
        env=env, capture_output=True, text=True, check=True).stdout.split()
    if os.environ.get("AMQSTOMP_PURE_BUILD"):  # a py3-none-any install: nothing compiled to load
        assert out[0] == "python"
    else:
        assert out == ["cython", "amqstomp._core._codec"], out


def test_no_extensions_forces_the_twin():
    env = dict(os.environ, AMQSTOMP_NO_EXTENSIONS="1")
    out = subprocess.run([sys.executable, "-c", "import amqstomp.codec as c; print(c.IMPLEMENTATION)"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert out == "python"


def test_same_public_names():
    if _codec_c is None:
        pytest.skip("compiled codec not built")
    assert sorted(_codec_c.__all__) == sorted(_codec_py.__all__)
    for name in _codec_py.__all__:
        assert hasattr(_codec_c, name), name


@pytest.mark.parametrize("step", [None, 1, 2, 3, 7, 64])
def test_any_split_gives_same_frames(codec, step):
    data = b"\n\r\n" + MESSAGE + b"\n\n" + MESSAGE.replace(b"ID:1", b"ID:2") + b"RECEIPT\nreceipt-id:7\n\n\x00"
    frames = parse_all(codec, data, step)
    assert [f.cmd for f in frames] == ["MESSAGE", "MESSAGE", "RECEIPT"]
    assert frames[0].body == b"hel\x00o"
    assert frames[1].headers["message-id"] == "ID:2"
    assert frames[2].headers == {"receipt-id": "7"}


def test_heartbeats_are_not_frames(codec):
    parser = codec.FrameParser()
    assert parser.feed(b"\n\n\r\n\n") == []
    assert parser.offset == 5
    assert parser.feed(b"\r") == []  # half a CRLF heart-beat: wait
    assert parser.feed(b"\nRECEIPT\nreceipt-id:1\n\n\x00") != []


def test_eol_inside_a_frame_is_data(codec):
    (frame,) = parse_all(codec, b"SEND\ndestination:/queue/a\n\n\nline\n\n\x00")
    assert frame.body == b"\nline\n\n"


def test_body_without_content_length_ends_at_first_nul(codec):
    frames = parse_all(codec, b"MESSAGE\nfoo:bar\n\nabc\x00\nMESSAGE\n\n\x00", 1)
    assert [f.body for f in frames] == [b"abc", b""]


def test_body_stays_bytes(codec):
    (frame,) = parse_all(codec, b"MESSAGE\n\n\xc3\xa9t\xc3\xa9\x00")
    assert frame.body == "été".encode()
    assert isinstance(frame.body, bytes)


def test_content_length_body_keeps_nuls(codec):
    body = bytes(range(256)) * 4
    data = b"MESSAGE\ncontent-length:%d\n\n" % len(body) + body + b"\x00"
    for step in (None, 1, 100):
        (frame,) = parse_all(codec, data, step)
        assert frame.body == body


def test_byte_after_content_length_body_must_be_nul(codec):
    with pytest.raises(StompProtocolError) as err:
        parse_all(codec, b"MESSAGE\ncontent-length:2\n\nabc\x00")
    assert err.value.offset == len(b"MESSAGE\ncontent-length:2\n\nab")
    assert "content-length" in str(err.value)


@pytest.mark.parametrize("value", [b"x", b"-1", b"1e3", b"", b"0x10", b"1 2"])
def test_bad_content_length(codec, value):
    with pytest.raises(StompProtocolError, match="content-length"):
        parse_all(codec, b"MESSAGE\ncontent-length:" + value + b"\n\nab\x00")


def test_big_content_length_body_in_chunks(codec):
    size = 3 << 20  # above the compiled codec's direct-fill threshold
    body = bytes(size)
    data = b"MESSAGE\ncontent-length:%d\n\n" % size + body + b"\x00MESSAGE\n\nnext\x00"
    frames = parse_all(codec, data, 16384)
    assert len(frames) == 2 and frames[0].body == body and frames[1].body == b"next"
    frames = parse_all(codec, data, 1 << 20)
    assert len(frames) == 2 and len(frames[0].body) == size
    bad = data[:len(data) - len(b"\x00MESSAGE\n\nnext\x00")] + b"X"
    parser = codec.FrameParser()
    with pytest.raises(StompProtocolError) as err:
        for i in range(0, len(bad), 65536):
            parser.feed(bad[i:i + 65536])
    assert err.value.offset == len(bad) - 1


def test_first_repeated_header_wins(codec):
    (frame,) = parse_all(codec, b"MESSAGE\nfoo:1\nfoo:2\nbar:\n\n\x00")
    assert frame.headers == {"foo": "1", "bar": ""}


def _message(*lines):
    return b"MESSAGE\n" + b"".join(line + b"\n" for line in lines) + b"\n\x00"


def test_each_message_has_its_own_headers(codec):
    """A MESSAGE stream whose frames share names (as a broker's do), then leave one out, add
    one, repeat one, reorder, or use a name not interned: each frame has exactly its own
    headers, in its order, the first of a repeated name winning; a listener changing one
    frame's headers changes no other frame."""
    base = (b"destination:/queue/a", b"message-id:ID\\c1", b"subscription:0", b"ack:ID\\c1")
    stream = [
        _message(*base),
        _message(b"destination:/queue/a", b"message-id:ID\\c2", b"subscription:0", b"ack:ID\\c2"),
        _message(b"destination:/queue/a", b"message-id:ID\\c3", b"subscription:0"),  # one fewer
        _message(*base, b"redelivered:true"),  # one more
        _message(b"destination:/queue/b", b"destination:/queue/c", b"message-id:m", b"subscription:0",
                 b"ack:a"),  # a repeat: the first wins
        _message(b"message-id:m", b"destination:/queue/a", b"subscription:0", b"ack:a"),  # reordered
        _message(b"destination:/queue/a", b"x-custom:1", b"message-id:m", b"subscription:0", b"ack:a"),
        _message(*base),
        _message(*base),
    ]
    expected = [
        [("destination", "/queue/a"), ("message-id", "ID:1"), ("subscription", "0"), ("ack", "ID:1")],
        [("destination", "/queue/a"), ("message-id", "ID:2"), ("subscription", "0"), ("ack", "ID:2")],
        [("destination", "/queue/a"), ("message-id", "ID:3"), ("subscription", "0")],
        [("destination", "/queue/a"), ("message-id", "ID:1"), ("subscription", "0"), ("ack", "ID:1"),
         ("redelivered", "true")],
        [("destination", "/queue/b"), ("message-id", "m"), ("subscription", "0"), ("ack", "a")],
        [("message-id", "m"), ("destination", "/queue/a"), ("subscription", "0"), ("ack", "a")],
        [("destination", "/queue/a"), ("x-custom", "1"), ("message-id", "m"), ("subscription", "0"),
         ("ack", "a")],
        [("destination", "/queue/a"), ("message-id", "ID:1"), ("subscription", "0"), ("ack", "ID:1")],
        [("destination", "/queue/a"), ("message-id", "ID:1"), ("subscription", "0"), ("ack", "ID:1")],
    ]
    for step in (None, 7):
        frames = parse_all(codec, b"".join(stream), step=step)
        assert [list(f.headers.items()) for f in frames] == expected
        frames[-2].headers["destination"] = "changed"
        del frames[-2].headers["ack"]
        assert list(frames[-1].headers.items()) == expected[-1]
        frames = parse_all(codec, b"".join(stream[:1]), step=step)
        frames[0].headers["message-id"] = "changed"
        parser = codec.FrameParser()
        for data in stream:
            (frame,) = parser.feed(data)
            frame.headers["destination"] = "mine"
        (frame,) = parser.feed(stream[0])
        assert list(frame.headers.items()) == expected[0]


@pytest.mark.parametrize("value", [b"1", b"a\\cb"])
def test_a_repeat_with_the_same_value_is_still_a_repeat(codec, value):
    """A name repeated with the same value (the same str object, in the compiled parser) is
    a repeat: the later MESSAGEs' first value still wins."""
    parser = codec.FrameParser()
    frames = parser.feed(_message(b"priority:" + value, b"priority:" + value)
                         + _message(b"priority:2", b"priority:3") + _message(b"priority:4", b"priority:5"))
    assert [list(f.headers.items()) for f in frames] == [[("priority", "1" if value == b"1" else "a:b")],
                                                          [("priority", "2")], [("priority", "4")]]


@pytest.mark.parametrize("cut", [3, 9, 30, 40, 44, 48, 49])
@pytest.mark.parametrize("bad", [b"x:\\t\n", b"\xff:1\n", b"no colon\n"])
def test_a_fault_after_a_read_ended_a_buffered_frame(codec, cut, bad):
    """A read that ends the frame the parser holds a part of and then breaks the protocol:
    the frames before the fault ride on the error, and offset and buffered are what they
    were before that read (the compiled parser parses such a read in two passes)."""
    first = b"MESSAGE\ndestination:/queue/a\ncontent-length:2\n\nhi\x00"
    stream = first + b"\nMESSAGE\n" + bad + b"\n\x00MESSAGE\n\n\x00"
    parser = codec.FrameParser()
    assert parser.feed(stream[:cut]) == []
    before = parser.offset, parser.buffered
    with pytest.raises(StompProtocolError) as err:
        parser.feed(stream[cut:])
    assert [frame_tuple(f) for f in err.value.frames] == [("MESSAGE", {"destination": "/queue/a",
                                                                       "content-length": "2"}, b"hi")]
    assert len(first) + len(b"\nMESSAGE\n") <= err.value.offset < len(first) + len(b"\nMESSAGE\n") + len(bad)
    assert (parser.offset, parser.buffered) == (before[0], before[1] + len(stream) - cut)
    twin = _codec_py.FrameParser()
    twin.feed(stream[:cut])
    with pytest.raises(StompProtocolError) as twin_err:
        twin.feed(stream[cut:])
    assert (str(err.value), err.value.offset) == (str(twin_err.value), twin_err.value.offset)


def test_values_split_at_first_colon_and_not_trimmed(codec):
    (frame,) = parse_all(codec, b"MESSAGE\nkey: a:b:c \n\n\x00", version="1.1")
    assert frame.headers == {"key": " a:b:c "}


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_unescape_11_12(codec, version):
    (frame,) = parse_all(codec, b"MESSAGE\na\\cb:x\\ny\\\\z\\c\n\n\x00", version=version)
    assert frame.headers == {"a:b": "x\ny\\z:"}


def test_cr_escape_only_in_12(codec):
    (frame,) = parse_all(codec, b"MESSAGE\nk:a\\rb\n\n\x00", version="1.2")
    assert frame.headers["k"] == "a\rb"
    with pytest.raises(StompProtocolError, match="escape"):
        parse_all(codec, b"MESSAGE\nk:a\\rb\n\n\x00", version="1.1")


def test_escaped_values_sharing_a_start_come_out_whole(codec):
    """The compiled parser reuses the unescaped start an escaped value shares with the previous
    one (ActiveMQ's message-ids differ in their last digits): a shared start ending inside an
    escape, a value that is the previous one's start, and a version switch (\\r is an escape in
    1.2 only) must not show."""
    values = [b"ID\\c1\\c2\\c10", b"ID\\c1\\c2\\c11", b"ID\\c1\\c2\\n1", b"ID\\c1\\c2\\\\", b"ID\\c1\\c2",
              b"ID\\c1\\c2\\\\c", b"ID\\c1", b"ID\\c1\\c2\\r9"]
    frames = parse_all(codec, b"".join(b"MESSAGE\nmessage-id:" + v + b"\n\n\x00" for v in values), version="1.2")
    assert [f.headers["message-id"] for f in frames] == [
        "ID:1:2:10", "ID:1:2:11", "ID:1:2\n1", "ID:1:2\\", "ID:1:2", "ID:1:2\\c", "ID:1", "ID:1:2\r9"]
    parser = codec.FrameParser(version="1.2")
    assert parser.feed(b"MESSAGE\nk:a\\rbc\n\n\x00")[0].headers["k"] == "a\rbc"
    parser.version = "1.1"
    with pytest.raises(StompProtocolError, match="escape"):
        parser.feed(b"MESSAGE\nk:a\\rbd\n\n\x00")


@pytest.mark.parametrize("bad", [b"\\t", b"\\x", b"\\"])
def test_undefined_escape_is_an_error(codec, bad):
    with pytest.raises(StompProtocolError) as err:
        parse_all(codec, b"MESSAGE\nk:ab" + bad + b"\n\n\x00")
    assert err.value.offset == len(b"MESSAGE\nk:ab")


def test_no_unescape_in_10(codec):
    (frame,) = parse_all(codec, b"MESSAGE\nk:a\\cb\\t\n\n\x00", version="1.0")
    assert frame.headers["k"] == "a\\cb\\t"


def test_connected_not_unescaped_and_switches_version(codec):
    parser = codec.FrameParser(version="1.2")
    frames = parser.feed(b"CONNECTED\nversion:1.1\nserver:ActiveMQ/5.17.2\nsession:a\\b\n\n\x00"
                         b"MESSAGE\nk:a\\cb\n\n\x00")
    assert frames[0].headers["session"] == "a\\b"
    assert parser.version == "1.1"
    assert frames[1].headers["k"] == "a:b"
    parser = codec.FrameParser()
    parser.feed(b"CONNECTED\n\n\x00")  # no version header: STOMP 1.0
    assert parser.version == "1.0"
    (frame,) = parser.feed(b"MESSAGE\nk:a\\cb\n\n\x00")
    assert frame.headers["k"] == "a\\cb"


def test_crlf_in_12(codec):
    frames = parse_all(codec, b"MESSAGE\r\nk:v\r\ncontent-length:2\r\n\r\nab\x00\r\n", 1, version="1.2")
    assert frame_tuple(frames[0]) == ("MESSAGE", {"k": "v", "content-length": "2"}, b"ab")


def test_cr_is_data_in_11(codec):
    (frame,) = parse_all(codec, b"MESSAGE\nk:v\r\n\n\x00", version="1.1")
    assert frame.headers["k"] == "v\r"


def test_utf8_headers(codec):
    (frame,) = parse_all(codec, "MESSAGE\nclé:värde ✓\n\n\x00".encode())
    assert frame.headers == {"clé": "värde ✓"}


def test_invalid_utf8_header(codec):
    with pytest.raises(StompProtocolError, match="UTF-8") as err:
        parse_all(codec, b"MESSAGE\nk:a\xff\n\n\x00")
    assert err.value.offset == len(b"MESSAGE\nk:a")


@pytest.mark.parametrize("data,what", [
    (b"HELLO\n\n\x00", "unknown command"),
    (b"message\n\n\x00", "unknown command"),
    (b"MESSAGE\nnocolon\n\n\x00", "':'"),
    (b"MESSAGE\n:value\n\n\x00", "name"),
    (b"\x00\n", "unknown command"),
    (b"\rX", "CR"),
])
def test_malformed(codec, data, what):
    with pytest.raises(StompProtocolError, match=what):
        parse_all(codec, data)


def test_error_is_sticky_and_a_stomp_exception(codec):
    parser = codec.FrameParser()
    with pytest.raises(StompProtocolError) as err:
        parser.feed(b"RECEIPT\n\n\x00BOGUS\n")
    assert isinstance(err.value, StompException)
    assert err.value.offset == len(b"RECEIPT\n\n\x00")
    with pytest.raises(StompProtocolError, match="earlier error"):
        parser.feed(b"RECEIPT\n\n\x00")


def test_offsets_count_the_whole_stream(codec):
    parser = codec.FrameParser()
    parser.feed(MESSAGE * 3)
    parser.feed(b"\n" * 10)
    with pytest.raises(StompProtocolError) as err:
        parser.feed(b"MESSAGE\nk:\\q\n\n\x00")
    assert err.value.offset == len(MESSAGE) * 3 + 10 + len(b"MESSAGE\nk:")


@pytest.mark.parametrize("step", [None, 1, 1000])
def test_limit_command(codec, step):
    with pytest.raises(StompProtocolError, match="max_command_length"):
        parse_all(codec, b"M" * 2000, step)
    with pytest.raises(StompProtocolError, match="max_command_length=10"):
        parse_all(codec, b"MESSAGEMESSAGE\n\n\x00", step, max_command_length=10)


@pytest.mark.parametrize("step", [None, 1, 4096])
def test_limit_header_line(codec, step):
    data = b"MESSAGE\nk:" + b"v" * 10240 + b"\n\n\x00"
    with pytest.raises(StompProtocolError, match="max_header_line_length=10240") as err:
        parse_all(codec, data, step)
    assert err.value.offset == len(b"MESSAGE\n")
    parse_all(codec, b"MESSAGE\nk:" + b"v" * 10230 + b"\n\n\x00")  # 10232 bytes: fine


def test_limit_header_count(codec):
    ok = b"MESSAGE\n" + b"k:v\n" * 1000 + b"\n\x00"
    assert len(parse_all(codec, ok)) == 1
    with pytest.raises(StompProtocolError, match="max_headers=1000"):
        parse_all(codec, b"MESSAGE\n" + b"k:v\n" * 1001 + b"\n\x00")
    with pytest.raises(StompProtocolError, match="max_headers=3"):
        parse_all(codec, b"MESSAGE\n" + b"k:v\n" * 4 + b"\n\x00", max_headers=3)


@pytest.mark.parametrize("step", [None, 7])
def test_limit_body(codec, step):
    with pytest.raises(StompProtocolError, match="max_body_length=100"):
        parse_all(codec, b"MESSAGE\ncontent-length:101\n\n" + b"x" * 101 + b"\x00", step, max_body_length=100)
    with pytest.raises(StompProtocolError, match="max_body_length=100"):
        parse_all(codec, b"MESSAGE\n\n" + b"x" * 200, step, max_body_length=100)
    (frame,) = parse_all(codec, b"MESSAGE\n\n" + b"x" * 100 + b"\x00", step, max_body_length=100)
    assert len(frame.body) == 100


def test_default_limits_at_least_activemq(codec):
    parser = codec.FrameParser()
    assert parser.max_command_length >= 1024
    assert parser.max_header_line_length >= 10240
    assert parser.max_headers >= 1000
    assert parser.max_body_length >= 100 * 1024 * 1024


def test_bad_constructor_arguments(codec):
    with pytest.raises(ValueError, match="version"):
        codec.FrameParser(version="2.0")
    with pytest.raises(ValueError, match="max_headers"):
        codec.FrameParser(max_headers=0)


def test_memoryview_and_bytearray_input(codec):
    parser = codec.FrameParser()
    assert len(parser.feed(memoryview(MESSAGE))) == 1
    assert len(parser.feed(bytearray(MESSAGE))) == 1


# ---------------------------------------------------------------- encoding

def test_encode_escapes_per_version(codec):
    headers = {"a:b": "x\ny\\z"}
    assert codec.encode_frame("SEND", headers, b"", "1.2") == b"SEND\na\\cb:x\\ny\\\\z\n\n\x00"
    assert codec.encode_frame("SEND", {"k": "a\rb"}, None, "1.2") == b"SEND\nk:a\\rb\n\n\x00"
    with pytest.raises(FrameEncodeError, match="1.1"):
        codec.encode_frame("SEND", {"k": "a\rb"}, None, "1.1")
    assert codec.encode_frame("SEND", {"k": "a:b"}, None, "1.0") == b"SEND\nk:a:b\n\n\x00"
    with pytest.raises(FrameEncodeError, match="1.0"):
        codec.encode_frame("SEND", {"k": "a\nb"}, None, "1.0")
    with pytest.raises(FrameEncodeError, match="':'"):
        codec.encode_frame("SEND", {"a:b": "v"}, None, "1.0")


def test_encode_connect_is_not_escaped(codec):
    assert codec.encode_frame("CONNECT", {"login": "a:b\\c"}, None, "1.2") == b"CONNECT\nlogin:a:b\\c\n\n\x00"
    for bad in ("a\nb", "a\rb"):
        with pytest.raises(FrameEncodeError, match="CONNECT"):
            codec.encode_frame("CONNECT", {"passcode": bad}, None, "1.2")


def test_encode_content_length_in_octets(codec):
    out = codec.encode_frame("SEND", {"destination": "/queue/a"}, "été")
    assert b"content-length:5\n" in out and out.endswith("été".encode() + b"\x00")
    assert b"content-length" not in codec.encode_frame("SEND", {}, "abc", auto_content_length=False)
    with pytest.raises(FrameEncodeError, match="NUL"):
        codec.encode_frame("SEND", {}, b"a\x00b", auto_content_length=False)
    with pytest.raises(FrameEncodeError, match="content-length"):
        codec.encode_frame("SEND", {"content-length": "9"}, b"abc")
    assert codec.encode_frame("SEND", {"content-length": 3}, b"abc").count(b"content-length") == 1


def test_encode_bad_command_and_version(codec):
    with pytest.raises(FrameEncodeError, match="command"):
        codec.encode_frame("send", {}, b"")
    with pytest.raises(FrameEncodeError, match="version"):
        codec.encode_frame("SEND", {}, b"", version="3")


def test_encode_values_converted(codec):
    out = codec.encode_frame("SEND", {"priority": 4, "persistent": "true"}, None)
    assert out == b"SEND\npriority:4\npersistent:true\n\n\x00"


# ---------------------------------------------------------------- properties

header_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.sampled_from(["1.1", "1.2"]),
    headers=st.dictionaries(header_text, st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
                            max_size=8),
    body=st.binary(max_size=300),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=6),
    heartbeats=st.integers(min_value=0, max_value=3),
)
def test_roundtrip_random_split(version, headers, body, cuts, heartbeats):
    headers.pop("content-length", None)
    if version == "1.1":  # 1.1 has no escape for CR (test_encode_escapes_per_version covers the error)
        headers = {k.replace("\r", ""): v.replace("\r", "") for k, v in headers.items() if k.replace("\r", "")}
    for codec in (_codec_py, _codec_c):
        if codec is None:
            continue
        one = codec.encode_frame("SEND", headers, body, version)
        data = b"\n" * heartbeats + one + b"\n" + one
        points = sorted({0, len(data), *[c % (len(data) + 1) for c in cuts]})
        parser = codec.FrameParser(version=version)
        frames = []
        for a, b in zip(points, points[1:]):
            frames += parser.feed(data[a:b])
        expected = dict(headers)
        if body:
            expected["content-length"] = str(len(body))
        assert [frame_tuple(f) for f in frames] == [("SEND", expected, body)] * 2


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400), step=st.integers(min_value=1, max_value=50))
def test_garbage_never_hangs_or_crashes(data, step):
    """Arbitrary bytes give frames or StompProtocolError, the same for both implementations."""
    results = []
    for codec in (_codec_py, _codec_c):
        if codec is None:
            continue
        parser = codec.FrameParser(max_body_length=1000)
        got = []
        try:
            for i in range(0, len(data), step):
                got += [frame_tuple(f) for f in parser.feed(data[i:i + step])]
            results.append(("ok", got))
        except StompProtocolError as exc:
            results.append(("error", got, exc.offset))
    assert all(r == results[0] for r in results)


def test_selector_module_reexports():
    mod = importlib.import_module("amqstomp.codec")
    for name in _codec_py.__all__:
        assert hasattr(mod, name)


def test_frame_delivery_count_defaults_to_one(codec):
    (frame,) = parse_all(codec, MESSAGE)
    assert frame.delivery_count == 1
    assert codec.Frame("MESSAGE").delivery_count == 1
    frame.delivery_count = 3
    assert frame.delivery_count == 3


# ---------------------------------------------------------------- hostile input (found by a tester)

@pytest.mark.parametrize("step", [None, 1, 5])
def test_frames_before_a_fault_ride_on_the_error(codec, step):
    data = b"MESSAGE\nmessage-id:1\n\nok\x00RECEIPT\nreceipt-id:2\n\n\x00GARBAGE\n\n\x00"
    parser = codec.FrameParser()
    got = []
    with pytest.raises(StompProtocolError) as err:
        for i in range(0, len(data), step or len(data)):
            got += parser.feed(data[i:i + (step or len(data))])
    got += err.value.frames
    assert [f.cmd for f in got] == ["MESSAGE", "RECEIPT"]
    assert got[0].body == b"ok"


@pytest.mark.parametrize("value", [b"9" * 5000, b"99999999999999999999", b"18446744073709551617"],
                         ids=["5000-digits", "20-digits", "2**64+1"])
def test_huge_content_length_is_a_protocol_error(codec, value):
    for limit in (100, codec.MAX_LIMIT):
        with pytest.raises(StompProtocolError, match="exceeds max_body_length"):
            parse_all(codec, b"MESSAGE\ncontent-length:" + value + b"\n\nabc\x00", max_body_length=limit)


def test_leading_zeros_are_fine(codec):
    (frame,) = parse_all(codec, b"MESSAGE\ncontent-length:0003\n\nabc\x00")
    assert frame.body == b"abc"
    (frame,) = parse_all(codec, b"MESSAGE\ncontent-length:" + b"0" * 5000 + b"3\n\nabc\x00")
    assert frame.body == b"abc"


@pytest.mark.parametrize("value", [b"\t1", b"\x0b1", b"\xc2\xa01", b"1\t", b"+1", b"\xd9\xa1"])
def test_content_length_takes_only_ascii_digits_and_spaces(codec, value):
    with pytest.raises(StompProtocolError, match="not a non-negative integer"):
        parse_all(codec, b"MESSAGE\ncontent-length:" + value + b"\n\nx\x00", version="1.1")
    (frame,) = parse_all(codec, b"MESSAGE\ncontent-length: 1 \n\nx\x00")
    assert frame.body == b"x"


@pytest.mark.parametrize("bad", [True, 0, -1, 1 << 41, 2 ** 63 - 1, "100"])
def test_limits_are_bounded_ints(codec, bad):
    with pytest.raises(ValueError, match="max_body_length"):
        codec.FrameParser(max_body_length=bad)


def test_crlf_split_at_the_limit(codec):
    line = b"k:" + b"v" * 10238  # exactly max_header_line_length
    data = b"MESSAGE\r\n" + line + b"\r\n\r\n\x00"
    cut = data.index(line) + len(line) + 1  # between the CR and the LF
    for parts in ([data], [data[:cut], data[cut:]]):
        parser = codec.FrameParser(version="1.2")
        frames = []
        for part in parts:
            frames += parser.feed(part)
        assert len(frames) == 1 and len(frames[0].headers["k"]) == 10238
    cmd = b"MESSAGE\r"
    parser = codec.FrameParser(version="1.2", max_command_length=7)
    assert parser.feed(cmd) == []
    assert len(parser.feed(b"\n\r\n\x00")) == 1


def test_utf8_offset_after_escapes(codec):
    with pytest.raises(StompProtocolError, match="UTF-8") as err:
        parse_all(codec, b"MESSAGE\nfoo:\\n\\n\xff\n\n\x00")
    assert err.value.offset == 16


def test_repr_with_no_body(codec):
    assert "body=None" in repr(codec.Frame("SEND", {}, None))


@pytest.mark.parametrize("body", [12345, True, ["x"], 1.5, object()])
def test_encode_refuses_other_body_types(codec, body):
    with pytest.raises(FrameEncodeError, match="body"):
        codec.encode_frame("SEND", {"destination": "/queue/a"}, body)


@pytest.mark.parametrize("headers,needle", [
    ({b"\xff": "v"}, "UTF-8"),
    ({"k": b"\xff"}, "UTF-8"),
    ({"k": "\ud800"}, "UTF-8"),
    ([("k", "v")], "mapping"),
])
def test_encode_bad_header_text(codec, headers, needle):
    with pytest.raises(FrameEncodeError, match=needle):
        codec.encode_frame("SEND", headers, b"")


def test_encode_none_bool_and_repeated_values(codec):
    out = codec.encode_frame("SEND", {"a": None, "persistent": True, "b": ("1", "2")}, None)
    assert out == b"SEND\npersistent:true\nb:1\nb:2\n\n\x00"


# ---------------------------------------------------------------- encoding: compiled == twin

def _encode_outcome(codec, args, kwargs):
    """What encode_frame gives: ("ok", bytes) or (exception type, message)."""
    try:
        return "ok", codec.encode_frame(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the point is to compare any error
        return type(exc), str(exc)


def _same_encoding(args, kwargs=None):
    if _codec_c is None:
        pytest.skip("compiled codec not built")
    kwargs = kwargs or {}
    twin = _encode_outcome(_codec_py, args, kwargs)
    compiled = _encode_outcome(_codec_c, args, kwargs)
    assert compiled == twin, (args, kwargs)
    return twin


def test_compiled_encode_is_compiled():
    """encode_frame of the compiled module is its own C function, not the twin's."""
    if _codec_c is None:
        pytest.skip("compiled codec not built")
    assert _codec_c.encode_frame is not _codec_py.encode_frame
    assert type(_codec_c.encode_frame).__name__ in ("cython_function_or_method", "builtin_function_or_method")


ESCAPE_TEXTS = ["plain", "a:b", "x\ny", "back\\slash", "cr\rlf", "\\c:\\n", "é:✓\n", "::", "\r\n", ""]


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2", "3", None])
@pytest.mark.parametrize("command", ["SEND", "CONNECT", "STOMP", "CONNECTED", "ACK", "MESSAGE", "send", "BOGUS"])
def test_encode_compiled_matches_twin_escaping(command, version):
    for name in ESCAPE_TEXTS:
        for value in ESCAPE_TEXTS:
            _same_encoding((command, {"destination": "/queue/a", name: value}, b"body", version))


@pytest.mark.parametrize("body", [None, b"", b"abc", b"a\x00b", "été", "", "a\x00", bytearray(b"xy"),
                                  memoryview(b"mv"), "\ud800", 12, True, 1.5, ["x"], object()])
@pytest.mark.parametrize("auto", [True, False, 0, 1])
def test_encode_compiled_matches_twin_bodies(body, auto):
    _same_encoding(("SEND", {"destination": "/queue/a"}, body, "1.2", auto))
    _same_encoding(("SEND", {"destination": "/queue/a"}, body), {"auto_content_length": auto})


@pytest.mark.parametrize("length", [3, "3", " 3", "3 ", "03", "4", "2", "", "x", "\u0663", None, 3.0, True, b"3",
                                    ["3"], ("3", "4")])
@pytest.mark.parametrize("body", [b"abc", "abc", b"", None])
def test_encode_compiled_matches_twin_content_length(length, body):
    _same_encoding(("SEND", {"destination": "/queue/a", "content-length": length}, body, "1.2"))
    _same_encoding(("SEND", {"content-length": length, "destination": "/queue/a"}, body, "1.0", False))


@pytest.mark.parametrize("headers", [
    None, {}, {"a": None}, {"persistent": True, "redelivered": False}, {"priority": 4, "n": -12, "big": 10 ** 30},
    {"a": ("1", "2")}, {"a": ["1", None, "2"]}, {"a": b"bytes"}, {"a": b"\xff"}, {b"k": "v"}, {b"\xff": "v"},
    {"": "v"}, {"k": ""}, {"k": "\ud800"}, {"\ud800": "v"}, {1: "v"}, {"k": 1.5}, {"k": object()},
    [("k", "v")], "k:v", {"ké": "vé✓" * 50}, {"k" * 5000: "v" * 20000},
])
@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_encode_compiled_matches_twin_headers(headers, version):
    _same_encoding(("SEND", headers, b"x", version))
    _same_encoding(("CONNECT", headers, None, version))


def test_encode_compiled_matches_twin_mapping_types():
    from collections import OrderedDict
    from types import MappingProxyType

    class Text(str):
        pass

    class Number(int):
        pass

    for headers in (OrderedDict([("b", "1"), ("a", "2")]), MappingProxyType({"a": "1:2"}),
                    {Text("a:b"): Text("c\nd")}, {"n": Number(5)}):
        _same_encoding(("SEND", headers, b"x", "1.2"))


def test_encode_large_body_and_many_headers_match():
    headers = {"h%d" % i: "v:%d\n" % i for i in range(300)}
    body = bytes(range(256)) * 8192  # 2 MiB with NULs
    kind, out = _same_encoding(("SEND", headers, body, "1.2"))
    assert kind == "ok" and out.endswith(body + b"\x00")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    command=st.sampled_from(["SEND", "CONNECT", "ACK", "MESSAGE", "NACK", "STOMP"]),
    version=st.sampled_from(["1.0", "1.1", "1.2"]),
    headers=st.dictionaries(
        st.text(max_size=12),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=24), st.binary(max_size=8),
                  st.lists(st.text(max_size=4), max_size=3)),
        max_size=8),
    body=st.one_of(st.none(), st.binary(max_size=64), st.text(max_size=32)),
    auto=st.booleans(),
)
def test_encode_compiled_matches_twin_random(command, version, headers, body, auto):
    _same_encoding((command, headers, body, version, auto))


# ---------------------------------------------------------------- frame heads (encode_headers, FrameHead, head=)

def test_frame_with_head_equals_frame_with_all_headers(codec):
    head = codec.encode_headers("SEND", {"destination": "/queue/a:b", "persistent": True, "priority": 7}, "1.2")
    assert head == b"destination:/queue/a\\cb\npersistent:true\npriority:7\n"
    with_head = codec.encode_frame("SEND", {"timestamp": 1796045238967, "x": "y"}, b"body", "1.2", True, head)
    whole = codec.encode_frame("SEND", {"destination": "/queue/a:b", "persistent": True, "priority": 7,
                                        "timestamp": 1796045238967, "x": "y"}, b"body", "1.2")
    assert with_head == whole
    assert codec.encode_frame("SEND", None, None, "1.2", True, head) == b"SEND\n" + head + b"\n\x00"


def test_frame_head_encodes_once_per_version(codec):
    head = codec.FrameHead("SEND", {"destination": "/queue/a:b"})
    assert head.encoded("1.2") == b"destination:/queue/a\\cb\n"
    assert head.encoded("1.2") is head.encoded("1.2")
    assert head.encoded("1.0") == b"destination:/queue/a:b\n"
    # what a writer reads first (a dict lookup per frame): the versions encoded so far
    assert head.encodings == {"1.2": b"destination:/queue/a\\cb\n", "1.0": b"destination:/queue/a:b\n"}
    with pytest.raises(TypeError):  # read-only: the encoded lines must stay what they say
        head.headers["destination"] = "changed"  # type: ignore[index]
    with pytest.raises(FrameEncodeError, match="unknown STOMP version"):
        head.encoded("2.0")
    given = {"destination": "/queue/a", b"x-name": "v", "dropped": None}
    head = codec.FrameHead("SEND", given)
    given["destination"] = "/queue/b"  # a copy: the caller's dict is not kept
    assert dict(head.headers) == {"destination": "/queue/a", "x-name": "v"}  # None left out, names as str


@pytest.mark.parametrize("headers, error", [
    ({"content-length": 3}, "content-length cannot be part of a frame head"),
    ({"receipt": "r1"}, "receipt cannot be part of a frame head"),
    ({b"receipt": "r1"}, "receipt cannot be part of a frame head"),
    ({b"content-length": 1}, "content-length cannot be part of a frame head"),
    ({7: "v"}, "header name 7 is not text"),
    ("destination:/queue/a", "headers must be a mapping"),
])
def test_frame_head_refuses_per_frame_headers(codec, headers, error):
    with pytest.raises(FrameEncodeError, match=error):
        codec.FrameHead("SEND", headers)


def test_frame_head_refuses_unknown_command(codec):
    with pytest.raises(FrameEncodeError, match="unknown STOMP command 'send'"):
        codec.FrameHead("send", {})
    for command in ("CONNECT", "STOMP"):
        with pytest.raises(FrameEncodeError, match="sent once per connection"):
            codec.FrameHead(command, {"heart-beat": "1000,1000"})
    with pytest.raises(FrameEncodeError, match="content-length cannot be part of a frame head"):
        codec.encode_headers("SEND", {"content-length": "3"})
    with pytest.raises(FrameEncodeError, match="holds CR or LF"):
        codec.encode_headers("SEND", {"k": "a\nb"}, "1.0")


@pytest.mark.parametrize("head", [b"destination:/queue/a", "destination:/queue/a\n", bytearray(b"a:b\n"), 7, None])
def test_encode_frame_refuses_a_bad_head(codec, head):
    with pytest.raises(FrameEncodeError, match="head must be bytes from encode_headers"):
        codec.encode_frame("SEND", {}, b"x", "1.2", True, head)


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@pytest.mark.parametrize("headers", [
    {}, {"timestamp": 1796045238967, "expires": 0}, {"content-length": 3}, {"content-length": 4},
    {"n": -5, "big": 10 ** 18, "bigger": 10 ** 30, "t": True}, {"a:b": 12}, {"k": "v\n"},
])
@pytest.mark.parametrize("head", [b"", b"destination:/queue/a\n", b"destination:/queue/a\npersistent:true\n"])
def test_encode_with_head_compiled_matches_twin(version, headers, head):
    _same_encoding(("SEND", headers, b"abc", version, True, head))
    _same_encoding(("SEND", headers, b"abc", version), {"head": head})


def test_int_header_values_are_written_as_digits(codec):
    out = codec.encode_frame("SEND", {"timestamp": 0, "expires": 999999999999999999, "n": -1}, None, "1.2")
    assert out == b"SEND\ntimestamp:0\nexpires:999999999999999999\nn:-1\n\n\x00"


# ---------------------------------------------------------------- header decoding faults (every path)

GOOD = b"MESSAGE\nmessage-id:1\n\nok\x00"

# (command, version, header line): a line that is not UTF-8, on every decode path of the parser:
# 1.1/1.2 lines with and without a backslash (in the name, in the value), CONNECTED (never
# unescaped) and STOMP 1.0; name and value faults
BAD_UTF8_LINES = [
    (cmd, version, line)
    for version in ("1.0", "1.1", "1.2")
    for cmd in ("MESSAGE", "CONNECTED")
    for line in (b"k\xff:a\\cb", b"k\xff:ab", b"k\\c\xff:ab", b"k:a\\cb\xff", b"k:ab\xff", b"k\xff\\c:a\xfe\\c",
                 b"content-length\xff:1\\c", b"ack:\xc3\\c", b"\xc3\\n:v", b"destination:\xe2\x82\\n")
]


@pytest.mark.parametrize("step", [None, 1, 9])
@pytest.mark.parametrize("cmd,version,line", BAD_UTF8_LINES)
def test_bad_utf8_header_is_a_protocol_error_on_every_path(codec, cmd, version, line, step):
    """A header that is not UTF-8 is a StompProtocolError carrying the frames before it, at the
    offset of its first bad byte. The compiled parser raised a bare UnicodeDecodeError for a
    bad name on a 1.1/1.2 line that holds a backslash (losing the frames before it)."""
    data = GOOD + cmd.encode() + b"\n" + line + b"\n\n\x00"
    parser = codec.FrameParser(version=version)
    got = []
    fed = 0
    with pytest.raises(StompProtocolError, match="header is not valid UTF-8") as err:
        for i in range(0, len(data), step or len(data)):
            fed = min(len(data), i + (step or len(data)))
            got += parser.feed(data[i:fed])
    got += err.value.frames
    assert [frame_tuple(f) for f in got] == [("MESSAGE", {"message-id": "1"}, b"ok")]
    start = len(GOOD) + len(cmd) + 1
    name, _, value = line.partition(b":")
    bad = []  # first byte of the first undecodable part (the name is decoded first)
    for part, at in ((name, start), (value, start + len(name) + 1)):
        try:
            part.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad.append(at + exc.start)
    assert err.value.offset == bad[0]
    assert parser.offset + parser.buffered == fed


@pytest.mark.parametrize("cmd,version,line", BAD_UTF8_LINES)
def test_bad_utf8_header_compiled_matches_twin(cmd, version, line):
    if _codec_c is None:
        pytest.skip("compiled codec not built")
    data = GOOD + cmd.encode() + b"\n" + line + b"\n\n\x00"
    outcomes = []
    for codec in (_codec_py, _codec_c):
        parser = codec.FrameParser(version=version)
        try:
            outcomes.append(("ok", [frame_tuple(f) for f in parser.feed(data)]))
        except Exception as exc:  # noqa: BLE001 - the point is to compare any error
            outcomes.append((type(exc), str(exc), getattr(exc, "offset", None),
                             [frame_tuple(f) for f in getattr(exc, "frames", [])]))
        outcomes[-1] += (parser.offset, parser.buffered)
    assert outcomes[1] == outcomes[0]


# ---------------------------------------------------------------- large bodies: memory and offsets

def _traced_peak(fn):
    import tracemalloc
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_declared_body_is_not_reserved_before_it_arrives(codec):
    """A peer declaring a 100 MiB body (within max_body_length) makes the parser hold what it
    sent, not 100 MiB: the compiled one allocated the whole declared body with the headers."""
    size = 100 << 20
    head = b"MESSAGE\ncontent-length:%d\n\n" % size
    parser = codec.FrameParser(max_body_length=size)
    assert _traced_peak(lambda: parser.feed(head + b"x" * 1000)) < 4 << 20
    part = b"y" * 65536
    # 2 MiB more in 64 KiB reads: what is held grows with what came (at most about twice it + 1 MiB)
    assert _traced_peak(lambda: [parser.feed(part) for _ in range(32)]) < 8 << 20
    assert parser.buffered == 1000 + (2 << 20)
    assert parser.offset == len(head)


@pytest.mark.parametrize("size", [1000, (1 << 20) - 1, 1 << 20, 3 << 20])
@pytest.mark.parametrize("step", [4096, 65536, 1 << 20])
def test_offset_and_buffered_while_a_body_arrives(codec, size, step):
    """offset = the stream position parsing resumes at (a partial frame's body start once its
    headers are parsed); buffered = the bytes received past it; offset + buffered = bytes fed.
    The compiled parser counted a >= 1 MiB partial body in offset, not in buffered."""
    head = b"MESSAGE\ncontent-length:%d\n\n" % size
    data = b"\n" + head + b"z" * size + b"\x00" + b"RECEIPT\nreceipt-id:1\n\n\x00" + b"SEND"
    parser = codec.FrameParser()
    fed = 0
    frames = []
    for i in range(0, len(data), step):
        frames += parser.feed(data[i:i + step])
        fed = min(len(data), i + step)
        assert parser.offset + parser.buffered == fed
        if 1 + len(head) <= fed <= 1 + len(head) + size:
            assert (parser.offset, parser.buffered) == (1 + len(head), fed - 1 - len(head))
    assert [f.cmd for f in frames] == ["MESSAGE", "RECEIPT"] and len(frames[0].body) == size
    assert (parser.offset, parser.buffered) == (len(data) - len(b"SEND"), len(b"SEND"))


def test_offset_and_buffered_after_a_big_body_fault(codec):
    size = 2 << 20
    data = b"MESSAGE\ncontent-length:%d\n\n" % size + b"z" * size + b"X"
    parser = codec.FrameParser()
    with pytest.raises(StompProtocolError, match="not followed by NUL") as err:
        for i in range(0, len(data), 65536):
            parser.feed(data[i:i + 65536])
    assert err.value.offset == len(data) - 1
    assert (parser.offset, parser.buffered) == (len(data) - size - 1, size + 1)
