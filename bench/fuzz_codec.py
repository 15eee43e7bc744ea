"""bench/fuzz_codec: differential fuzzing of the compiled codec against its pure-Python twin.

Every case is fed to :mod:`amqstomp._core._codec` and :mod:`amqstomp._core._codec_py`; they must agree:

* parsing: the same byte stream, cut into the same ``feed()`` chunks, for the same version and
  limits, gives after every call the same frames (cmd, headers in order, body) or the same error
  (type, message, offset, the ``.frames`` completed before it), then the same ``offset``,
  ``buffered`` and ``version``; a feed after an error fails the same way again. Streams are
  STOMP 1.0/1.1/1.2 frames built by hand or by ``encode_frame`` (random headers, escapes valid
  and not, non-UTF-8, content-length right, wrong, huge or padded, bodies with NULs, CRLF,
  CONNECTED frames that switch the version, now and then a body past the compiled parser's
  1 MiB direct-fill threshold), heart-beats and garbage, then mutated (bytes flipped, inserted,
  deleted, repeated) and truncated, and cut at random and at frame boundaries;
* encoding: ``encode_frame``, ``encode_headers`` and ``FrameHead`` give equal bytes, or raise
  the same exception type with the same message.

Each case comes from its own seed (``--seed`` + case number), so a case is reproducible by it.
A disagreement is printed and written to ``--out`` as a Python literal (the case and both
outcomes); ``--replay FILE`` runs such a file again, ``--case SEED [--kind K]`` one case.
tests/test_codec_fuzz.py drives the same generators from hypothesis.

Usage: ``python bench/fuzz_codec.py [--seconds 180] [--seed N] [--kind any] [--out DIR]``,
``python bench/fuzz_codec.py --replay FILE``, ``python bench/fuzz_codec.py --case SEED [--kind K]``.
Exit status 1 when anything disagreed.
"""
import argparse
import ast
import os
import random
import sys
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from amqstomp._core import _codec_py  # noqa: E402

try:
    from amqstomp._core import _codec as _codec_c
except ImportError:  # a pure build: nothing to compare
    _codec_c = None

VERSIONS = ("1.0", "1.1", "1.2")
COMMANDS = sorted(_codec_py.CLIENT_COMMANDS | _codec_py.SERVER_COMMANDS)
BIG_BODY = 1 << 20  # the compiled parser fills a content-length body at least this big directly

# header name/value fragments: plain text, known names, defined escapes, separators, UTF-8 ...
GOOD_FRAGMENTS = (
    b"a", b"id", b"x-y", b"value", b"0", b"12", b" ", b"destination", b"message-id", b"ack",
    b"content-length", b"content-type", b"subscription", b"receipt-id", b"version", b"priority",
    b"\\n", b"\\c", b"\\\\", b"ID\\c1\\c2", b"\xc3\xa9", b"\xe2\x9c\x93", b"\xf0\x9f\x98\x80",
)
# ... escapes that are not defined (or only in 1.2, or cut short) ...
BAD_ESCAPES = (b"\\r", b"\\t", b"\\x", b"\\")
# ... bytes that are no UTF-8: truncated, overlong, a surrogate, out of range, a stray byte
BAD_UTF8 = (b"\xff", b"\xfe", b"\xc3", b"\xe2\x82", b"\xf0\x9f", b"\xc0\x80", b"\xed\xa0\x80", b"\x80",
            b"\xf5\x80\x80\x80")
# everything, for "chaos" frames
FRAGMENTS = GOOD_FRAGMENTS + BAD_ESCAPES + BAD_UTF8 + (b":", b"\r", b"\x00")
# what a faulty frame gets wrong (one thing, so that each fault is often the stream's first)
FAULTS = ("command", "no-colon", "empty-name", "name-utf8", "value-utf8", "name-utf8", "value-utf8",
          "name-escape", "value-escape", "cr", "nul", "content-length", "terminator", "chaos")
BAD_COMMANDS = (b"", b"send", b"HELLO", b"MESSAGEX", b"\xff", b"MESS\x00AGE", b"M" * 40, b"CONNECTED ")
CLEN_FORMS = ("exact", "exact", "exact", "short", "long", "spaces", "zeros", "huge", "junk", "empty")


# ------------------------------------------------------------------------------ outcomes

def frame_tuple(frame) -> Tuple[Any, ...]:
    headers = frame.headers
    return (frame.cmd, list(headers.items()) if isinstance(headers, dict) else headers, frame.body,
            type(frame.body).__name__, frame.delivery_count, frame.link_seq)


def error_tuple(exc: BaseException) -> Tuple[Any, ...]:
    frames = getattr(exc, "frames", None)
    return ("error", type(exc).__name__, str(exc), getattr(exc, "offset", None),
            [frame_tuple(f) for f in frames] if isinstance(frames, list) else frames)


def materialize(kind: str, raw: bytes) -> Any:
    if kind == "bytearray":
        return bytearray(raw)
    if kind == "memoryview":
        return memoryview(raw)
    return raw


def parse_outcome(module, case: Dict[str, Any]) -> List[Tuple[Any, ...]]:
    """What ``module``'s parser does with the case: one entry per feed, ending at the
    first error (plus one more feed, which must fail again)."""
    out: List[Tuple[Any, ...]] = []
    try:
        parser = module.FrameParser(case["version"], **case["limits"])
    except Exception as exc:  # noqa: BLE001 - compared, whatever it is
        return [error_tuple(exc)]
    for raw, kind in zip(case["chunks"], case["kinds"]):
        try:
            step = ("ok", [frame_tuple(f) for f in parser.feed(materialize(kind, raw))])
        except Exception as exc:  # noqa: BLE001
            step = error_tuple(exc)
        out.append(step + ((parser.offset, parser.buffered, parser.version),))
        if step[0] == "error":
            try:
                parser.feed(b"RECEIPT\n\n\x00")
                out.append(("no error after an error",))
            except Exception as exc:  # noqa: BLE001
                out.append(error_tuple(exc) + ((parser.offset, parser.buffered),))
            break
    return out


def _call(fn, *args) -> Tuple[Any, ...]:
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001
        return (type(exc).__name__, str(exc))


def _frame_head(module, command, headers, version) -> Tuple[Any, ...]:
    head = module.FrameHead(command, headers)
    return head.command, dict(head.headers), _call(head.encoded, version)


def encode_outcome(module, case: Dict[str, Any]) -> List[Tuple[Any, ...]]:
    """encode_frame, encode_headers and FrameHead of ``module`` on the case."""
    headers = case["headers"]
    body = materialize(case["body_kind"], case["body"]) if isinstance(case["body"], bytes) else case["body"]
    args = (case["command"], headers, body, case["version"], case["auto"], case["head"])
    return [
        _call(module.encode_frame, *args),
        _call(module.encode_frame, *args[:4]),
        _call(module.encode_headers, case["command"], headers, case["version"]),
        _call(_frame_head, module, case["command"], headers, case["version"]),
    ]


def compare(case: Dict[str, Any]) -> Optional[Tuple[Any, Any]]:
    """None when both implementations agree on the case, else (twin's, compiled's) outcome."""
    outcome = parse_outcome if case["kind"] == "parse" else encode_outcome
    twin = outcome(_codec_py, case)
    compiled = outcome(_codec_c, case)
    return None if twin == compiled else (twin, compiled)


# ------------------------------------------------------------------------------ generators

def _text(rnd: random.Random, most: int = 5, dirty: bool = True) -> bytes:
    pool = FRAGMENTS if dirty else GOOD_FRAGMENTS
    return b"".join(rnd.choice(pool) for _ in range(rnd.randint(0, most)))


def _body(rnd: random.Random, big: bool, nul: bool = True) -> bytes:
    if big:
        size = rnd.choice((BIG_BODY - 1, BIG_BODY, BIG_BODY + 1, BIG_BODY + rnd.randint(2, 70000)))
        body = bytearray(b"body\n\x00" * (size // 6 + 1))[:size]
        body[rnd.randrange(size)] = rnd.randrange(256)
        return bytes(body)
    body = rnd.choice((b"", b"x", b"hello", b"a\x00b", b"\n\n", b"\xff\xfe", b"\\c:")) * rnd.randint(0, 3) \
        + rnd.randbytes(rnd.choice((0, 0, 1, 5, 40)))
    return body if nul else body.replace(b"\x00", b"0")


def _content_length(rnd: random.Random, size: int) -> bytes:
    form = rnd.choice(CLEN_FORMS)
    if form == "short":
        return b"%d" % max(0, size - rnd.randint(1, 3))
    if form == "long":
        return b"%d" % (size + rnd.randint(1, 3))
    if form == "spaces":
        return b" " * rnd.randint(0, 2) + b"%d" % size + b" " * rnd.randint(0, 2)
    if form == "zeros":
        return b"0" * rnd.randint(1, 25) + b"%d" % size
    if form == "huge":
        return rnd.choice((b"99999999999999999999", b"18446744073709551617", b"9" * 40, b"1099511627777"))
    if form == "junk":
        return rnd.choice((b"-1", b"+1", b"1e3", b"0x10", b"1 2", b"\t1", b"\xd9\xa1", b"1\\c", b"\xff"))
    if form == "empty":
        return b""
    return b"%d" % size


def _insert(rnd: random.Random, text: bytes, what: bytes) -> bytes:
    i = rnd.randint(0, len(text))
    return text[:i] + what + text[i:]


def _frame_by_hand(rnd: random.Random, version: str, marks: List[int], at: int, big: bool) -> bytes:
    """A frame; most are valid, one in three gets one thing wrong (see FAULTS)."""
    fault = rnd.choice(FAULTS) if rnd.random() < 0.33 else ""
    chaos = fault == "chaos"
    eol = b"\r\n" if rnd.random() < (0.3 if version == "1.2" or chaos else 0.02) else b"\n"
    if fault == "command":
        cmd = rnd.choice(BAD_COMMANDS)
    elif rnd.random() < 0.15:
        cmd = rnd.choice((b"CONNECTED", b"CONNECT", b"STOMP"))
    else:
        cmd = rnd.choice(COMMANDS).encode()
    lines = []
    if cmd == b"CONNECTED" and rnd.random() < 0.7:
        lines.append((b"version", rnd.choice((b"1.0", b"1.1", b"1.2", b"1.1,1.2", b"2.0", b""))))
    for _ in range(rnd.randint(0, 6)):
        lines.append((_text(rnd, 3, chaos) + rnd.choice(GOOD_FRAGMENTS), _text(rnd, 5, chaos)))
    if fault in ("no-colon", "empty-name", "name-utf8", "value-utf8", "name-escape", "value-escape", "cr", "nul"):
        if not lines:
            lines.append((rnd.choice(GOOD_FRAGMENTS), _text(rnd, 4, False)))
        k = rnd.randrange(len(lines))
        name, value = lines[k]
        if fault == "no-colon":
            lines[k] = name + value
        elif fault == "empty-name":
            lines[k] = (b"", value)
        elif fault in ("name-utf8", "value-utf8"):
            bad = rnd.choice(BAD_UTF8)
            lines[k] = (_insert(rnd, name, bad), value) if fault == "name-utf8" else (name, _insert(rnd, value, bad))
        elif fault in ("name-escape", "value-escape"):
            bad = rnd.choice(BAD_ESCAPES)
            lines[k] = (_insert(rnd, name, bad), value) if fault == "name-escape" else (name, _insert(rnd, value, bad))
        else:
            what = b"\r" if fault == "cr" else b"\x00"
            lines[k] = (_insert(rnd, name, what), value) if rnd.random() < 0.5 else (name, _insert(rnd, value, what))
    lines = [line if isinstance(line, bytes) else line[0] + b":" + line[1] for line in lines]
    with_length = big or rnd.random() < 0.5
    body = _body(rnd, big, with_length or chaos or fault == "terminator")
    if with_length:
        right = big or fault not in ("content-length", "chaos")
        clen = b"%d" % len(body) if right else _content_length(rnd, len(body))
        lines.insert(rnd.randint(0, len(lines)), b"content-length:" + clen)
    head = cmd + eol + b"".join(line + eol for line in lines) + eol
    marks.extend((at + len(head) - 1, at + len(head), at + len(head) + len(body)))
    bad_end = fault == "terminator" or (chaos and rnd.random() < 0.2)
    return head + body + (rnd.choice((b"", b"X", b"\n")) if bad_end else b"\x00")


def _frame_encoded(rnd: random.Random, version: str) -> bytes:
    headers = {}
    for _ in range(rnd.randint(0, 4)):
        try:
            name = _text(rnd, 3).decode("utf-8") or "k"
            value = _text(rnd, 4).decode("utf-8")
        except UnicodeDecodeError:
            continue
        headers[name] = value
    headers.pop("content-length", None)
    try:
        return _codec_py.encode_frame(rnd.choice(COMMANDS), headers, _body(rnd, False), version)
    except Exception:  # noqa: BLE001 - a header this version cannot carry
        return b"SEND\n\n\x00"


def _mutate(rnd: random.Random, data: bytearray) -> None:
    if not data:
        return
    i = rnd.randrange(len(data))
    r = rnd.random()
    if r < 0.3:
        data[i] = rnd.choice((0, 0x0A, 0x0D, 0x3A, 0x5C, 0xFF, 0xC3, 0x80, rnd.randrange(256)))
    elif r < 0.55:
        data[i:i] = rnd.choice((b"\x00", b"\n", b"\r", b":", b"\\", b"\xff", b"\r\n", b"\\c"))
    elif r < 0.8:
        del data[i:i + rnd.randint(1, 8)]
    else:
        j = min(len(data), i + rnd.randint(1, 40))
        data[j:j] = data[i:j]


def gen_parse_case(rnd: random.Random, big: Optional[bool] = None) -> Dict[str, Any]:
    """A stream, its cuts and the parser's arguments. ``big``: force (or forbid) one body
    of at least 1 MiB; None: now and then."""
    version = rnd.choice(VERSIONS)
    if big is None:
        big = rnd.random() < 0.01
    limits: Dict[str, int] = {}
    if rnd.random() < 0.2:
        for name, small in (("max_command_length", (1, 5, 7, 9, 11)),
                            ("max_header_line_length", (1, 4, 8, 16, 30)),
                            ("max_headers", (1, 2, 3, 5)),
                            ("max_body_length", (1, 3, 8, 40))):
            if rnd.random() < 0.4:
                limits[name] = rnd.choice(small)
    if big:
        limits.pop("max_body_length", None)
    data = bytearray()
    marks: List[int] = []
    n = rnd.randint(1, 6)
    big_at = rnd.randrange(n) if big else -1
    for k in range(n):
        r = rnd.random()
        if k == big_at:
            data += _frame_by_hand(rnd, version, marks, len(data), True)
        elif r < 0.12:
            data += rnd.choice((b"\n", b"\r\n", b"\n\n", b"\r\r\n" if r < 0.01 else b"\n"))
        elif r < 0.66:
            data += _frame_by_hand(rnd, version, marks, len(data), False)
        elif r < 0.96:
            data += _frame_encoded(rnd, version)
        else:
            data += rnd.randbytes(rnd.randint(1, 30))
        marks.append(len(data))
    for _ in range(rnd.choice((0, 0, 0, 0, 1, 1, 2))):
        _mutate(rnd, data)
    if rnd.random() < 0.2 and data:
        del data[rnd.randrange(len(data)):]
    size = len(data)
    r = rnd.random()
    if r < 0.05 and size <= 3000:
        points = set(range(size + 1))
    else:
        points = {rnd.randint(0, size) for _ in range(rnd.choice((0, 1, 2, 4, 8)))}
        points.update(m + rnd.randint(-1, 1) for m in marks if rnd.random() < 0.3)
    points = sorted(p for p in points | {0, size} if 0 <= p <= size)
    chunks = [bytes(data[a:b]) for a, b in zip(points, points[1:])] or [b""]
    if rnd.random() < 0.1:
        chunks.insert(rnd.randint(0, len(chunks)), b"")  # an empty read
    kinds = [rnd.choice(("bytes", "bytes", "bytes", "bytearray", "memoryview")) for _ in chunks]
    return {"kind": "parse", "version": version, "limits": limits, "chunks": chunks, "kinds": kinds}


_TEXTS = ("plain", "a:b", "x\ny", "back\\slash", "cr\rlf", "\\c:\\n", "é:✓\n", "::", "\r\n", "", " 3 ",
          "\ud800", "😀", "true", "content-length", "receipt", "destination", "3", "03")


def _value(rnd: random.Random) -> Any:
    r = rnd.random()
    if r < 0.45:
        return rnd.choice(_TEXTS) + rnd.choice(_TEXTS)
    if r < 0.55:
        return rnd.choice((0, 3, -1, 12, 10 ** 18 - 1, 10 ** 18, 10 ** 30, 1796045238967))
    if r < 0.62:
        return rnd.choice((True, False))
    if r < 0.7:
        return None
    if r < 0.8:
        return rnd.choice((b"bytes", b"\xff", b"a:b", b"\xc3\xa9", b"3"))
    if r < 0.9:
        return [rnd.choice(_TEXTS) for _ in range(rnd.randint(0, 3))] + ([None] if rnd.random() < 0.2 else [])
    return rnd.choice((1.5, ("1", "2"), 3.0))


def gen_encode_case(rnd: random.Random) -> Dict[str, Any]:
    """Arguments for encode_frame / encode_headers / FrameHead."""
    command = rnd.choice(COMMANDS + ["send", "BOGUS"]) if rnd.random() < 0.95 else 7
    version = rnd.choice(VERSIONS) if rnd.random() < 0.95 else rnd.choice(("3", None, "1.3"))
    r = rnd.random()
    if r < 0.05:
        headers: Any = None
    elif r < 0.08:
        headers = rnd.choice(("k:v", [("k", "v")]))
    else:
        headers = {}
        for _ in range(rnd.randint(0, 6)):
            k = rnd.random()
            if k < 0.8:
                key: Any = rnd.choice(_TEXTS) + rnd.choice(("", "x", ":", "\\"))
            elif k < 0.95:
                key = rnd.choice((b"k", b"\xff", b"receipt", b"content-length", b"a:b"))
            else:
                key = rnd.choice((1, 2.5))
            headers[key] = _value(rnd)
        if rnd.random() < 0.25:
            headers["content-length"] = rnd.choice((3, "3", " 3", "03", "4", "", "x", None, 3.0, True, b"3"))
    body_kind = rnd.choice(("bytes", "bytes", "bytearray", "memoryview"))
    r = rnd.random()
    if r < 0.15:
        body: Any = None
    elif r < 0.6:
        body = rnd.choice((b"", b"abc", b"a\x00b", b"\xff" * 3, b"x" * 300)) + rnd.randbytes(rnd.randint(0, 8))
    elif r < 0.9:
        body = rnd.choice(("", "abc", "été", "a\x00", "\ud800", "x" * 100))
    else:
        body = rnd.choice((12, True, 1.5, ["x"]))
    r = rnd.random()
    if r < 0.7:
        head: Any = b""
    elif r < 0.9:
        try:
            head = _codec_py.encode_headers("SEND", {"destination": rnd.choice(_TEXTS), "p": 4},
                                            version if version in VERSIONS else "1.2")
        except Exception:  # noqa: BLE001
            head = b"destination:/queue/a\n"
    else:
        head = rnd.choice((b"no-lf", "str\n", 7, None))
    return {"kind": "encode", "command": command, "version": version, "headers": headers, "body": body,
            "body_kind": body_kind, "auto": rnd.choice((True, False, 0, 1)), "head": head}


# names a broker sends on MESSAGE frames (the compiled parser interns them and builds a MESSAGE's
# headers from the previous one's names), one it does not intern, and an escaped one
_MESSAGE_NAMES = (b"content-length", b"expires", b"destination", b"subscription", b"priority",
                  b"message-id", b"persistent", b"timestamp", b"ack", b"redelivered", b"content-type",
                  b"correlation-id", b"reply-to", b"type", b"JMSXGroupID")
_ODD_NAMES = (b"x-custom", b"a\\cb", b"message\\nid", b"\xc3\xa9")
_MESSAGE_VALUES = (b"0", b"4", b"1", b"true", b"/queue/q", b"ID\\cb-1\\c1\\c1", b"ID\\cb-1\\c1\\c2", b"",
                   b"\\n", b"\\\\", b"caf\xc3\xa9", b"1764489600000", b"1764489600001")


def gen_messages_case(rnd: random.Random) -> Dict[str, Any]:
    """A stream of MESSAGE frames like a broker's: most repeat the names of a base list in its
    order, some leave one out, add one, repeat one (the first must win), or carry a name that is
    not a broker's; values repeat (``ack`` often equals ``message-id``) or change; a RECEIPT, an
    ERROR or a CONNECTED (switching the version) now and then; a fault now and then."""
    version = rnd.choice(("1.2", "1.2", "1.1", "1.0"))
    base = rnd.sample(_MESSAGE_NAMES, rnd.randint(1, 10))
    data = bytearray()
    marks: List[int] = []
    for _ in range(rnd.randint(2, 10)):
        r = rnd.random()
        cmd = b"MESSAGE" if r < 0.8 else rnd.choice((b"RECEIPT", b"ERROR", b"CONNECTED", b"SEND"))
        names = list(base)
        r = rnd.random()
        if r < 0.1 and names:
            del names[rnd.randrange(len(names))]
        elif r < 0.2:
            names.insert(rnd.randint(0, len(names)), rnd.choice(_MESSAGE_NAMES))
        elif r < 0.3 and names:
            names.insert(rnd.randint(0, len(names)), rnd.choice(names))
        elif r < 0.4:
            names.insert(rnd.randint(0, len(names)), rnd.choice(_ODD_NAMES))
        elif r < 0.45:
            names.extend(rnd.sample(_MESSAGE_NAMES, 2))
        elif r < 0.5:
            names = names[:rnd.randint(0, len(names))]
        lines = []
        last = rnd.choice(_MESSAGE_VALUES)
        for name in names:
            if name == b"content-length":
                continue
            last = last if rnd.random() < 0.3 else rnd.choice(_MESSAGE_VALUES)
            lines.append(name + b":" + last)
        if cmd == b"CONNECTED" and rnd.random() < 0.7:
            lines.insert(0, b"version:" + rnd.choice((b"1.0", b"1.1", b"1.2")))
        body = _body(rnd, False, nul=b"content-length" in names)
        if b"content-length" in names:
            lines.insert(names.index(b"content-length"), b"content-length:%d" % len(body))
        if rnd.random() < 0.05 and lines:
            k = rnd.randrange(len(lines))
            lines[k] = _insert(rnd, lines[k], rnd.choice(BAD_ESCAPES + BAD_UTF8 + (b"\r",)))
        eol = b"\r\n" if version == "1.2" and rnd.random() < 0.2 else b"\n"
        head = cmd + eol + b"".join(line + eol for line in lines) + eol
        marks.extend((len(data) + len(head) - 1, len(data) + len(head)))
        data += head + body + b"\x00" + rnd.choice((b"", b"", b"\n"))
        marks.append(len(data))
    size = len(data)
    points = {rnd.randint(0, size) for _ in range(rnd.choice((0, 0, 1, 2, 4, 8)))}
    points.update(m + rnd.randint(-1, 1) for m in marks if rnd.random() < 0.2)
    points = sorted(p for p in points | {0, size} if 0 <= p <= size)
    chunks = [bytes(data[a:b]) for a, b in zip(points, points[1:])] or [b""]
    kinds = [rnd.choice(("bytes", "bytes", "bytearray", "memoryview")) for _ in chunks]
    return {"kind": "parse", "version": version, "limits": {}, "chunks": chunks, "kinds": kinds}


def gen_case(rnd: random.Random, kind: str = "any") -> Dict[str, Any]:
    """A case of ``kind``: "parse" (a big body now and then), "small" (none), "big" (one),
    "messages" (a broker's MESSAGE stream), "encode", or "any" (parse cases 7 in 10, messages
    1 in 10, encode cases 2 in 10)."""
    if kind == "any":
        r = rnd.random()
        kind = "parse" if r < 0.7 else "messages" if r < 0.8 else "encode"
    if kind == "encode":
        return gen_encode_case(rnd)
    if kind == "messages":
        return gen_messages_case(rnd)
    return gen_parse_case(rnd, {"parse": None, "small": False, "big": True}[kind])


# ------------------------------------------------------------------------------ the run

def _clip(obj: Any, most: int = 2000) -> str:
    text = repr(obj)
    return text if len(text) <= most else text[:most] + "... (%d chars)" % len(text)


def write_reproducer(out_dir: str, seed: int, case: Dict[str, Any], twin: Any, compiled: Any) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "disagreement-%d.py" % seed)
    with open(path, "w") as fh:
        fh.write("# bench/fuzz_codec.py disagreement, case seed %d; run it again with:\n"
                 "#   python bench/fuzz_codec.py --replay %s\n" % (seed, path))
        fh.write("# twin (amqstomp._core._codec_py):\n#   %s\n" % _clip(twin).replace("\n", "\n#   "))
        fh.write("# compiled (amqstomp._core._codec):\n#   %s\n" % _clip(compiled).replace("\n", "\n#   "))
        fh.write(repr(case) + "\n")
    return path


def replay(case: Dict[str, Any], what: str) -> int:
    diff = compare(case)
    if diff is None:
        print("%s: the implementations agree" % what)
        return 0
    print("%s: they disagree on %s\n  twin:     %s\n  compiled: %s"
          % (what, _clip(case), _clip(diff[0]), _clip(diff[1])))
    return 1


def read_reproducer(path: str) -> Dict[str, Any]:
    with open(path) as fh:
        return ast.literal_eval("".join(line for line in fh if not line.startswith("#")))


def run(seconds: float, seed: int, out_dir: str, report_every: float = 10.0, quiet: bool = False,
        kind: str = "any") -> Dict[str, int]:
    """Run cases seed, seed+1, ... for ``seconds``; return the counts."""
    counts = {"cases": 0, "parse": 0, "encode": 0, "big": 0, "bytes": 0, "disagreements": 0, "crashes": 0}
    start = time.perf_counter()
    stop = start + seconds
    next_report = start + report_every
    case_seed = seed
    while True:
        now = time.perf_counter()
        if now >= stop:
            break
        if now >= next_report and not quiet:
            print("  %6.0f s: %d cases, %.0f/s, %d disagreements"
                  % (now - start, counts["cases"], counts["cases"] / (now - start), counts["disagreements"]),
                  flush=True)
            next_report += report_every
        rnd = random.Random(case_seed)
        case = gen_case(rnd, kind)
        try:
            diff = compare(case)
        except Exception:  # noqa: BLE001 - the harness itself failed on this case: keep it too
            diff = ("harness error", traceback.format_exc())
            counts["crashes"] += 1
        counts["cases"] += 1
        counts[case["kind"]] += 1
        if case["kind"] == "parse":
            size = sum(len(c) for c in case["chunks"])
            counts["bytes"] += size
            counts["big"] += size > BIG_BODY
        if diff is not None:
            counts["disagreements"] += 1
            path = write_reproducer(out_dir, case_seed, case, diff[0], diff[1])
            print("DISAGREEMENT (case seed %d), written to %s" % (case_seed, path), flush=True)
        case_seed += 1
    counts["seconds"] = time.perf_counter() - start
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=180.0, help="how long to run (default 180)")
    ap.add_argument("--seed", type=int, default=None, help="first case seed (default: from the clock)")
    ap.add_argument("--out", default="fuzz-codec-out", help="directory for reproducers (default ./fuzz-codec-out)")
    ap.add_argument("--replay", metavar="FILE", help="run a reproducer written by an earlier run, and stop")
    ap.add_argument("--case", type=int, metavar="SEED", help="run the one case of this seed, and stop")
    ap.add_argument("--kind", default="any", choices=("any", "parse", "small", "big", "messages", "encode"),
                    help="what the cases are (default any; tests/test_codec_fuzz.py names its kind)")
    args = ap.parse_args(argv)
    if _codec_c is None:
        print("the compiled codec is not built: nothing to compare (pip install -e .)", file=sys.stderr)
        return 2
    if args.replay:
        return replay(read_reproducer(args.replay), args.replay)
    if args.case is not None:
        return replay(gen_case(random.Random(args.case), args.kind), "case %d (%s)" % (args.case, args.kind))
    seed = args.seed if args.seed is not None else int(time.time())
    print("fuzz_codec: compiled %s vs twin %s, seeds from %d, %.0f s"
          % (_codec_c.__file__, _codec_py.__file__, seed, args.seconds), flush=True)
    counts = run(args.seconds, seed, args.out, kind=args.kind)
    print("ran %d cases (%d parse, %d with a body >= 1 MiB, %.1f MB fed; %d encode) in %.0f s: %.0f cases/s; "
          "%d disagreements%s"
          % (counts["cases"], counts["parse"], counts["big"], counts["bytes"] / 1e6, counts["encode"],
             counts["seconds"], counts["cases"] / counts["seconds"], counts["disagreements"],
             " (reproducers in %s)" % args.out if counts["disagreements"] else ""))
    return 1 if counts["disagreements"] else 0


if __name__ == "__main__":
    sys.exit(main())
