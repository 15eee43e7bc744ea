"""stomp.py 9.0's helper modules as amqstomp provides them (``stomp.utils``,
``stomp.log``, ``stomp.listener``): the same results as the real stomp.py on
the same input (differential: the real module is imported here under its own
name; amqstomp is not installed as ``stomp`` in this module's tests), and
amqstomp's logging seen through the ``"stomp.py"`` logger.
"""
import errno
import io
import logging
import re
import select
import socket
import sys
import threading
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import amqstomp.codec
import amqstomp.log as amqlog
import amqstomp.utils as mine
from amqstomp.listener import HeartbeatListener, Publisher, TestListener

from stomppy_reference import reference

# the real stomp.py, decided by module identity (tests/stomppy_reference.py); skipped only without stomp.py 9.0
real = reference("stomp.utils")
real_listener = reference("stomp.listener")

pytestmark = pytest.mark.timeout(120)


def outcome(fn, *args):
    """(\"ok\", result) or (\"raise\", exception type name)."""
    try:
        return "ok", fn(*args)
    except Exception as exc:
        return "raise", type(exc).__name__


def frame_tuple(frame):
    return None if frame is None else (frame.cmd, dict(frame.headers), frame.body)


# --------------------------------------------------------------------------- parse_frame


PARSE_CASES = [
    b"MESSAGE\nfoo:bar\n\nbody",
    b"MESSAGE\ndestination:/queue/a\nmessage-id:1\ncontent-length:4\n\nbody",
    b"MESSAGE\nfoo:bar\nfoo:baz\n\n",  # repeated header: the first wins
    b"MESSAGE\nk\\cey:va\\nl\\\\ue\\r\n\n",  # escapes
    b"MESSAGE\nkey:bad \\t escape\n\n",  # an unknown escape is kept
    b"CONNECTED\nversion:1.2\nserver:x\\cy\n\n",  # escapes undone on CONNECTED too (stomp.py)
    b"MESSAGE\r\nfoo:bar\r\n\r\nbody",  # CRLF
    b"MESSAGE\nfoo:bar\r\n\nbody",  # mixed: stomp.py keeps the CR
    b"\n\nMESSAGE\nfoo:bar\n\nbody",  # a leading blank line ends stomp.py's preamble: None
    b"\nMESSAGE\nfoo:bar\n\nbody",
    b"MESSAGE\nfoo:bar",  # no blank line
    b"MESSAGE\nno colon\n:empty name\n\n",
    b"MESSAGE\n\nbo\x00dy\x00",  # NULs in the body, a trailing NUL
    b"MESSAGE\ncontent-length:2\n\nbody",  # content-length not checked
    b"message\nfoo:bar\n\n",  # unknown command
    b"MESSAGE\nfoo:\xff\xfe\n\nbody",  # not UTF-8
    b"MESSAGE\nfoo:a:b:c\n\n",
    b"\n",
    b"",
    b"\r\n",
]


@pytest.mark.parametrize("data", PARSE_CASES)
def test_parse_frame_as_stomp_py(data):
    assert frame_tuple(mine.parse_frame(data)) == frame_tuple(real.parse_frame(data))


def test_parse_frame_uses_the_codec_for_a_valid_frame():
    frame = mine._parse_with_codec(b"MESSAGE\ndestination:/queue/a\nk\\cey:v\n\nbody")
    assert frame is not None and isinstance(frame, amqstomp.codec.Frame)
    assert frame.headers == {"destination": "/queue/a", "k:ey": "v"}
    assert mine._parse_with_codec(b"MESSAGE\nk:bad \\t\n\n") is None  # the lenient path reads it


def test_parse_frame_refuses_text():
    with pytest.raises(TypeError, match="bytes"):
        mine.parse_frame("MESSAGE\n\n")


_TEXT = st.text(alphabet="ab:\\cnrté \x00", max_size=6)
_COMMANDS = st.sampled_from(["MESSAGE", "SEND", "CONNECTED", "CONNECT", "ERROR", "RECEIPT", "message", "NOPE", ""])


@st.composite
def frames(draw):
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    lead = draw(st.sampled_from(["", "\n", "\r\n"]))
    headers = draw(st.lists(st.tuples(_TEXT, _TEXT), max_size=4))
    body = draw(st.binary(max_size=12))
    lines = ["%s:%s" % h for h in headers]
    if draw(st.booleans()):
        lines.append("content-length:%d" % (len(body) + draw(st.sampled_from([0, 0, 1, -1]))))
    head = lead + draw(_COMMANDS) + eol + "".join(line + eol for line in lines) + eol
    data = head.encode("utf-8") + body
    if draw(st.booleans()):
        data += b"\x00"
    if draw(st.integers(0, 9)) == 0:
        data = data.replace(b"a", b"\xff", 1)
    return data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_parse_frame_matches_stomp_py_on_generated_frames(data):
    assert frame_tuple(mine.parse_frame(data)) == frame_tuple(real.parse_frame(data)), data


def _escaped(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c").replace("\r", "\\r")


@st.composite
def valid_frames(draw):
    """Frames amqstomp's codec accepts (so parse_frame takes the codec's path)."""
    command = draw(st.sampled_from(["MESSAGE", "SEND", "ERROR", "RECEIPT", "SUBSCRIBE", "ACK"]))
    names = st.text(alphabet="abc-:\\\n\ré", min_size=1, max_size=6)
    headers = draw(st.lists(st.tuples(names, st.text(alphabet="xy :\\\n\ré\x00", max_size=6)), max_size=5))
    body = draw(st.binary(max_size=16))
    lines = ["%s:%s" % (_escaped(k), _escaped(v)) for k, v in headers]
    if b"\x00" in body or draw(st.booleans()):
        lines.append("content-length:%d" % len(body))
    return ("%s\n%s\n" % (command, "".join(line + "\n" for line in lines))).encode("utf-8") + body


@settings(max_examples=300, deadline=None)
@given(valid_frames())
def test_parse_frame_on_the_codec_path_matches_stomp_py(data):
    assert mine._parse_with_codec(data) is not None, data
    assert frame_tuple(mine.parse_frame(data)) == frame_tuple(real.parse_frame(data)), data


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40))
def test_parse_frame_matches_stomp_py_on_any_bytes(data):
    assert outcome(lambda d: frame_tuple(mine.parse_frame(d)), data) == \
        outcome(lambda d: frame_tuple(real.parse_frame(d)), data)


# --------------------------------------------------------------------------- convert_frame


CONVERT_CASES = [
    ("SEND", {"destination": "/queue/a", "b": 1, "a": "x"}, "hello"),
    ("SEND", {"destination": "/queue/a", "content-length": 99}, "héllo"),  # corrected in place
    ("SEND", {"z": None, "multi": ("1", "2")}, b"\x00bytes"),
    ("SEND", {"persistent": True, "colon": "a:b", "nl": "a\nb"}, ""),  # nothing escaped
    ("CONNECT", {"passcode": "secret"}, None),
    (None, {}, None),  # a heart-beat
    ("", {"x": "y"}, "body"),
]


@pytest.mark.parametrize("cmd, headers, body", CONVERT_CASES)
def test_convert_frame_as_stomp_py(cmd, headers, body):
    theirs = real.Frame(cmd, dict(headers), body)
    ours = mine.Frame(cmd, dict(headers), body)
    assert mine.convert_frame(ours) == real.convert_frame(theirs)
    assert ours.headers == theirs.headers  # the same content-length correction
    assert mine.pack(mine.convert_frame(ours)) == real.pack(real.convert_frame(theirs))


def test_convert_frame_refuses_a_body_of_another_type():
    assert outcome(mine.convert_frame, mine.Frame("SEND", {}, 12)) == ("raise", "TypeError")
    assert outcome(real.convert_frame, real.Frame("SEND", {}, 12)) == ("raise", "TypeError")


# --------------------------------------------------------------------------- small helpers


@pytest.mark.parametrize("name, args", [
    ("encode", ("héllo",)), ("encode", (b"raw",)), ("encode", ("\udc80",)), ("encode", (bytearray(b"x"),)),
    ("encode", (3,)), ("encode", ("x", "latin-1")), ("encode", ("x", "no-such-codec")),
    ("decode", (b"h\xc3\xa9llo",)), ("decode", (b"\xff",)), ("decode", (None,)), ("decode", ("text",)),
    ("decode", (b"x", "ascii")),
    ("pack", ([b"a", b"b"],)), ("pack", ()), ("pack", (["a"],)),
    ("join", ([b"a", b"\xc3\xa9"],)), ("join", ()), ("join", ([b"\xff"],)),
    ("length", (None,)), ("length", ("abc",)), ("length", (b"",)), ("length", (3,)),
    ("is_eol_default", (b"\n",)), ("is_eol_default", (b"\r\n",)), ("is_eol_default", ("\n",)),
    ("parse_headers", (["a:b", "c:d:e", "bad", ":x", "a:again", "k\\cx:v\\n"],)),
    ("parse_headers", (["ignored:1", "a:b"], 1)),
    ("calculate_heartbeats", (("0", "0"), (1000, 1000))),
    ("calculate_heartbeats", (("500", "2000"), (1000, 1000))),
    ("calculate_heartbeats", (("3000", "0"), (1000, 1000))),
    ("calculate_heartbeats", (("3000", "100"), (0, 1000))),
    ("calculate_heartbeats", (("x", "1"), (1, 1))),
    ("calculate_heartbeats", (("1",), (1, 1))),
    ("clean_headers", ({"login": "a", "passcode": "secret"},)), ("clean_headers", ({"a": "b"},)),
    ("merge_headers", ([{"a": 1}, None, {"a": 2, "b": 3}],)),
    ("is_localhost", (("localhost", 61613),)), ("is_localhost", (("127.0.0.1", 1),)),
    ("is_localhost", (("broker.example", 1),)), ("is_localhost", (("a", 1, 2),)),
    ("clean_lines", ([b"SEND\n", b"a:b\n"],)), ("clean_lines", ("no pass code",)),
])
def test_helper_as_stomp_py(name, args):
    assert outcome(getattr(mine, name), *args) == outcome(getattr(real, name), *args)


@pytest.mark.parametrize("exc", [OSError(errno.ECONNRESET, "reset"), OSError("no errno"), ValueError(7),
                                 socket.timeout()])
def test_get_errno_as_stomp_py(exc):
    assert outcome(mine.get_errno, exc) == outcome(real.get_errno, exc)


def test_clean_lines_masks_a_passcode_stomp_py_missed():
    lines = mine.convert_frame(mine.Frame("CONNECT", {"login": "me", "passcode": "s3cr3t"}, None))
    assert "s3cr3t" in real.clean_lines(lines)  # stomp.py 9.0's pattern wants a space after the colon
    cleaned = mine.clean_lines(lines)
    assert "s3cr3t" not in cleaned and "passcode:********" in cleaned and "login:me" in cleaned
    # with a space both mask it; stomp.py's pattern also eats the rest of the line's text
    spaced = [b"CONNECT\n", b"passcode: secret\n"]
    assert "secret" not in real.clean_lines(spaced)
    assert mine.clean_lines(spaced) == "[b'CONNECT\\n', b'passcode:********\\n']"


def test_constants_and_patterns_as_stomp_py():
    for name in ("NULL", "ENC_NEWLINE", "ENC_NULL", "HDR_ACK", "CMD_STOMP", "HDR_HEARTBEAT"):
        assert getattr(mine, name) == getattr(real, name), name
    for line in ["a:b", "a:b:c", ":x", "abc", "k\\c:v"]:
        ours, theirs = mine.HEADER_LINE_RE.match(line), real.HEADER_LINE_RE.match(line)
        assert (ours and ours.groupdict()) == (theirs and theirs.groupdict()), line
    for text in ["a\nb\r\nc", "\n\n"]:
        assert mine.LINE_END_RE.split(text) == real.LINE_END_RE.split(text)
    for data in [b"A\n\nB", b"A\r\n\r\nB", b"AB"]:
        ours_m, theirs_m = mine.PREAMBLE_END_RE.search(data), real.PREAMBLE_END_RE.search(data)
        assert (ours_m and ours_m.span()) == (theirs_m and theirs_m.span())
    assert frame_tuple(mine.HEARTBEAT_FRAME) == ("heartbeat", {}, b"")  # stomp.py's body is None
    assert real.HEARTBEAT_FRAME.cmd == "heartbeat"
    assert set(real.LOCALHOST_NAMES) <= set(mine.LOCALHOST_NAMES) | {socket.gethostname()}


def test_get_uuid_and_default_create_thread():
    assert uuid.UUID(mine.get_uuid()).version == 4
    ran = threading.Event()
    thread = mine.default_create_thread(ran.set)
    assert isinstance(thread, threading.Thread) and thread.daemon
    assert ran.wait(5)
    thread.join(5)


def test_pollable_queue():
    q = mine.PollableQueue()
    try:
        assert select.select([q], [], [], 0)[0] == []
        q.put("a")
        q.put("b")
        assert select.select([q], [], [], 1)[0] == [q]
        assert q.get() == "a" and q.get() == "b"
        assert select.select([q], [], [], 0)[0] == []
    finally:
        q.shutdown()
    assert q.fileno() == -1


def test_localhost_names_are_worked_out_on_first_use(monkeypatch):
    monkeypatch.delitem(mine.__dict__, "LOCALHOST_NAMES", raising=False)
    monkeypatch.setenv("STOMP_SKIP_HOSTNAME_SCAN", "1")
    assert mine.LOCALHOST_NAMES == ["localhost", "127.0.0.1"]
    assert mine.is_localhost(("127.0.0.1", 1)) == 1 and mine.is_localhost((socket.gethostname() + ".x", 1)) == 2


# --------------------------------------------------------------------------- stomp.log and logging


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def logging_state():
    """Puts the ``amqstomp`` and ``stomp.py`` loggers back as they were."""
    amq, stomp_py = logging.getLogger("amqstomp"), logging.getLogger("stomp.py")
    saved = [(lg, lg.parent, lg.level, list(lg.handlers), list(lg.filters)) for lg in (amq, stomp_py)]
    verbose = amqlog.verbose
    yield amq, stomp_py
    for lg, parent, level, handlers, filters in saved:
        lg.parent, lg.handlers, lg.filters = parent, handlers, filters
        lg.setLevel(level)
    amqlog.verbose = verbose


def test_the_package_logger_has_a_null_handler():
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("amqstomp").handlers)
    assert real.__name__ == "stomp.utils" and logging.getLogger("stomp.py") is not logging.getLogger("amqstomp")


def test_records_reach_the_stomp_py_logger_once(logging_state, caplog):
    amq, stomp_py = logging_state
    theirs = Records()
    stomp_py.addHandler(theirs)
    stomp_py.setLevel(logging.DEBUG)  # what a stomp.py user does; amqstomp's level is not set
    amq.setLevel(logging.NOTSET)
    amqlog.route_to_stomp_py(True)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("amqstomp.transport").debug("one record %d", 1)
    assert [r.getMessage() for r in theirs.records] == ["one record 1"]
    assert theirs.records[0].name == "amqstomp.transport"
    assert [r.getMessage() for r in caplog.records if r.name == "amqstomp.transport"] == ["one record 1"]
    amqlog.route_to_stomp_py(False)
    logging.getLogger("amqstomp.transport").debug("not routed")
    assert len(theirs.records) == 1
    with pytest.raises(TypeError):
        amqlog.route_to_stomp_py("yes")


def test_the_stomp_py_level_applies_to_amqstomp_records(logging_state):
    amq, stomp_py = logging_state
    amq.setLevel(logging.NOTSET)
    amqlog.route_to_stomp_py(True)
    stomp_py.setLevel(logging.ERROR)
    assert not logging.getLogger("amqstomp.connection").isEnabledFor(logging.WARNING)
    stomp_py.setLevel(logging.DEBUG)
    assert logging.getLogger("amqstomp.connection").isEnabledFor(logging.DEBUG)


def test_verbose_adds_the_traceback(logging_state):
    amq, _ = logging_state
    got = Records()
    amq.addHandler(got)
    amq.setLevel(logging.DEBUG)
    assert amqlog.attach_verbose_filter() >= 0
    log = logging.getLogger("amqstomp.transport")
    assert amqlog.attach_verbose_filter() == 0  # idempotent
    try:
        raise ConnectionResetError(errno.ECONNRESET, "reset")
    except OSError as exc:
        error = exc
    amqlog.verbose = False
    log.warning("socket error: %s", error)
    amqlog.verbose = True
    log.warning("socket error: %s", error)
    log.warning("no exception here: %s", "x")
    assert [bool(r.exc_info) for r in got.records] == [False, True, False]
    assert got.records[1].exc_info[1] is error


def test_log_to_stdout(logging_state, monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    amqlog.log_to_stdout()
    amqlog.log_to_stdout(verbose_logging=False)  # no second handler
    logging.getLogger("amqstomp.connection").debug("hello %s", "there")
    assert re.search(r" - amqstomp.connection - DEBUG - hello there\n$", out.getvalue())
    assert out.getvalue().count("hello there") == 1
    assert amqlog.verbose is False


def test_stomp_log_helpers_are_the_package_loggers(logging_state):
    amq, _ = logging_state
    got = Records()
    amq.addHandler(got)
    amqlog.setLevel(logging.INFO)
    assert amq.level == logging.INFO and amqlog.isEnabledFor(amqlog.INFO) and not amqlog.isEnabledFor(amqlog.DEBUG)
    amqlog.info("i")
    amqlog.warning("w")
    amqlog.error("e")
    amqlog.debug("d")
    assert [r.levelname for r in got.records] == ["INFO", "WARNING", "ERROR"]


# --------------------------------------------------------------------------- stomp.listener


def test_test_listener_has_stomp_py_attributes():
    ours, theirs = TestListener(), real_listener.TestListener()
    assert re.fullmatch(r"\d{14}", ours.timestamp)
    assert set(vars(theirs)) <= set(dir(ours))
    assert ours.message_received is False and ours.heartbeat_received is False
    frame = mine.Frame("MESSAGE", {"message-id": "1"}, "a")
    ours.on_message(frame)
    ours.on_message(mine.Frame("MESSAGE", {"message-id": "2"}, "b"))
    assert ours.message_received is True
    assert ours.wait_for_message(1) is True
    ours.message_received = False  # stomp.py code resets the flag this way
    assert ours.message_received is False and ours.wait_for_message(0.05) is False
    ours.on_heartbeat()
    assert ours.heartbeat_received is True and ours.wait_for_heartbeat(1) and not ours.heartbeat_received
    assert ours.get_latest_message() == ({"message-id": "2"}, "b")


def _every_callback(listener, frame_class):
    """The same calls on a listener of either library, with frames of that library."""
    def frame(cmd, headers, body):
        return frame_class(cmd, headers, body)

    listener.on_connecting(("127.0.0.1", 61613))
    listener.on_send(frame("STOMP", {"accept-version": "1.2", "login": "admin", "passcode": "s3cret"}, ""))
    listener.on_connected(frame("CONNECTED", {"version": "1.2", "server": "ActiveMQ/5.17.2"}, ""))
    listener.on_send(frame("SEND", {"destination": "/queue/a"}, "hello"))
    message = frame("MESSAGE", {"destination": "/queue/a", "message-id": "m-1", "subscription": "1"}, "hello")
    listener.on_before_message(message)
    listener.on_message(message)
    listener.on_message(frame("MESSAGE", {"message-id": "m-2"}, b"bytes \x00"))
    listener.on_receipt(frame("RECEIPT", {"receipt-id": "r-1"}, ""))
    listener.on_error(frame("ERROR", {"message": "Unexpected ACK"}, "details"))
    listener.on_heartbeat()
    listener.on_heartbeat_timeout()
    listener.on_disconnecting()
    listener.on_receiver_loop_completed(None)
    listener.on_disconnected()


@pytest.mark.parametrize("name", ["PrintingListener", "TestListener"])
def test_printing_and_test_listeners_print_what_stomp_py_prints(capsys, name):
    """stomp.py's PrintingListener (and TestListener, one) prints every callback
    with print() unless print_to_log: the same lines, line for line."""
    import amqstomp.listener as ours_module

    printed = {}
    for label, module, frame_class in (("stomp.py", real_listener, real.Frame),
                                       ("amqstomp", ours_module, amqstomp.codec.Frame)):
        _every_callback(getattr(module, name)(print_to_log=False), frame_class)
        printed[label] = capsys.readouterr().out
    assert printed["stomp.py"].count("\n") == 12  # a line per callback stomp.py prints
    assert printed["amqstomp"] == printed["stomp.py"]
    assert "s3cret" not in printed["amqstomp"] and "'passcode': '********'" in printed["amqstomp"]


@pytest.mark.parametrize("name", ["PrintingListener", "TestListener"])
def test_printing_to_the_log_prints_nothing_and_logs_no_body_at_info(capsys, caplog, name):
    import amqstomp.listener as ours_module

    with caplog.at_level(logging.INFO, logger="amqstomp.listener"):
        _every_callback(getattr(ours_module, name)(print_to_log=True), amqstomp.codec.Frame)
    assert capsys.readouterr().out == ""
    lines = [r.getMessage() for r in caplog.records if r.name == "amqstomp.listener"]
    assert "on_message {'destination': '/queue/a', 'message-id': 'm-1', 'subscription': '1'}" in lines
    assert "on_disconnected" in lines and len(lines) >= 12
    assert not [line for line in lines if "hello" in line or "s3cret" in line]


def test_a_test_listener_with_verbose_false_prints_nothing(capsys):
    _every_callback(TestListener(verbose=False), amqstomp.codec.Frame)
    assert capsys.readouterr().out == ""


def test_publisher_does_nothing():
    publisher = Publisher()
    publisher.set_listener("a", object())
    assert publisher.get_listener("a") is None
    publisher.remove_listener("a")


class FakeTransport:
    """The stomp.py transport interface a HeartbeatListener drives."""

    def __init__(self):
        self.listeners = {}
        self.connected = True
        self.sent = []
        self.calls = []

    def transmit(self, frame):
        self.sent.append(frame)

    def is_connected(self):
        return self.connected

    def set_connected(self, connected):
        self.calls.append(("set_connected", connected))
        self.connected = connected

    def disconnect_socket(self):
        self.calls.append(("disconnect_socket",))

    def stop(self):
        self.calls.append(("stop",))


@pytest.mark.parametrize("server, client", [("100,200", (150, 50)), ("0,0", (100, 100)), ("0,100", (0, 0))])
def test_heartbeat_listener_negotiates_as_stomp_py(server, client):
    ours, theirs = HeartbeatListener(FakeTransport(), client), real_listener.HeartbeatListener(FakeTransport(), client)
    for hb in (ours, theirs):
        connect = mine.Frame("CONNECT", {}, None)
        hb.on_send(connect)
        hb.connect_headers = dict(connect.headers)
        hb.on_connected(mine.Frame("CONNECTED", {"heart-beat": server}, None))
    try:
        assert ours.heartbeats == theirs.heartbeats
        assert ours.connect_headers == theirs.connect_headers
        assert ours.running == theirs.running
    finally:
        for hb in (ours, theirs):
            hb.on_disconnected()


def test_heartbeat_listener_sends_and_detects_silence():
    transport = FakeTransport()
    watcher = TestListener()
    hb = HeartbeatListener(transport, (100, 100))
    transport.listeners = {"hb": hb, "watcher": watcher}
    hb.on_connected(mine.Frame("CONNECTED", {"heart-beat": "100,100"}, None))
    try:
        assert hb.heartbeats == (100, 100) and hb.heartbeat_thread is not None
        deadline = time.monotonic() + 5
        while not transport.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert transport.calls[:3] == [("set_connected", False), ("disconnect_socket",), ("stop",)]
        assert watcher.heartbeat_timeouts == 1
        assert transport.sent and all(f.cmd is None for f in transport.sent)  # heart-beats
    finally:
        hb.on_disconnected()
    deadline = time.monotonic() + 5
    while hb.heartbeat_thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hb.heartbeat_thread is None


def test_heartbeat_listener_keeps_quiet_while_data_arrives():
    transport = FakeTransport()
    hb = HeartbeatListener(transport, (0, 100))
    transport.listeners = {"hb": hb}
    hb.on_connected(mine.Frame("CONNECTED", {"heart-beat": "100,0"}, None))
    try:
        assert hb.heartbeats == (0, 100) and hb.send_sleep == 0
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            hb.on_heartbeat()
            time.sleep(0.02)
        assert transport.calls == [] and transport.sent == []
    finally:
        hb.on_disconnected()


class SocketTransport:
    """A minimal stomp.py-style transport over a plain socket, for the
    HeartbeatListener against a real broker (frames parsed by amqstomp's codec)."""

    def __init__(self, host_and_port):
        self.sock = socket.create_connection(host_and_port, timeout=10)
        self.sock.settimeout(None)
        self.listeners = {}
        self.connected = False
        self.heartbeats_sent = 0
        self.closed = threading.Event()
        self.connected_event = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        parser = amqstomp.codec.FrameParser("1.2")
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            frames = parser.feed(data)
            for frame in frames:
                for listener in list(self.listeners.values()):
                    getattr(listener, "on_" + frame.cmd.lower())(frame)
                if frame.cmd == "CONNECTED":
                    self.connected = True
                    self.connected_event.set()
            if not frames and not data.strip(b"\r\n"):
                for listener in list(self.listeners.values()):
                    listener.on_heartbeat()
        self.connected = False
        self.closed.set()
        for listener in list(self.listeners.values()):
            listener.on_disconnected()

    def transmit(self, frame):
        for listener in list(self.listeners.values()):
            listener.on_send(frame)
        if frame.cmd is None:
            self.heartbeats_sent += 1
        self.sock.sendall(mine.pack(mine.convert_frame(frame)))

    def is_connected(self):
        return self.connected

    def set_connected(self, connected):
        self.connected = connected

    def disconnect_socket(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def stop(self):
        pass

    def close(self):
        self.disconnect_socket()
        self.reader.join(10)
        self.sock.close()


@pytest.mark.broker
def test_heartbeat_listener_against_activemq(activemq):
    transport = SocketTransport(("127.0.0.1", activemq.stomp_port))
    hb = HeartbeatListener(transport, (300, 300))
    stats = TestListener(receipt="bye")
    transport.listeners = {"hb": hb, "stats": stats}
    try:
        transport.transmit(mine.Frame("CONNECT", {"accept-version": "1.2", "host": "localhost",
                                                  "login": "admin", "passcode": "admin"}, None))
        assert transport.connected_event.wait(15), "no CONNECTED"
        assert hb.heartbeats[0] >= 300 and hb.heartbeats[1] >= 300, hb.heartbeats
        time.sleep(max(hb.heartbeats) / 1000.0 * 6)
        assert not transport.closed.is_set(), "the broker closed the connection: heart-beats not sent"
        assert transport.heartbeats_sent >= 3
        assert stats.heartbeat_count >= 2 and stats.heartbeat_timeouts == 0
        transport.transmit(mine.Frame("DISCONNECT", {"receipt": "bye"}, None))
        assert stats.wait_on_receipt(10)
    finally:
        transport.close()
    assert transport.closed.wait(10)
    deadline = time.monotonic() + 5
    while hb.heartbeat_thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hb.heartbeat_thread is None
