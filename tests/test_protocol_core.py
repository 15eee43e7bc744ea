"""The sans-I/O protocol core (amqstomp._core): bytes in, events out; commands in,
bytes out; deadlines from times passed in. No broker, no socket, no thread, no clock."""
import ast
import os
import threading

import pytest

import amqstomp
from amqstomp._core import backoff, frames, heartbeat, limits
from amqstomp._core.state import (
    CONNECT_REFUSED,
    CONNECTED,
    ERROR,
    RECEIPT,
    UNEXPECTED,
    LinkState,
    ProtocolState,
)
from amqstomp.codec import encode_frame
from amqstomp.exception import ConfigurationError, FrameLimitError, StompProtocolError

PACKAGE = os.path.dirname(amqstomp.__file__)
FORBIDDEN = {"socket", "ssl", "threading", "selectors", "time"}


def _imports(path):
    """Top-level module names a source file imports, and the amqstomp modules it
    imports (resolved to dotted names), anywhere in the file (functions too)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    here = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
    package = here.rsplit(".", 1)[0] if not here.endswith("__init__") else here.rsplit(".", 1)[0]
    outside, inside = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                (inside if alias.name.startswith("amqstomp") else outside).add(alias.name.split(".")[0]
                                                                               if not alias.name.startswith("amqstomp")
                                                                               else alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
                inside.add(name)
                if not node.module:  # "from . import x"
                    inside.update(name + "." + alias.name for alias in node.names)
            elif node.module.startswith("amqstomp"):
                inside.add(node.module)
            else:
                outside.add(node.module.split(".")[0])
    return outside, inside


def _source_of(module):
    rel = module.split(".")[1:]
    base = os.path.join(PACKAGE, *rel)
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.exists(candidate):
            return candidate
    return None


def _forbidden_imports(start_modules):
    """{module: forbidden names} over ``start_modules`` and every amqstomp module they
    import, transitively."""
    seen, todo, bad = set(), list(start_modules), {}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _source_of(module)
        if path is None:
            continue
        outside, inside = _imports(path)
        hit = outside & FORBIDDEN
        if hit:
            bad[module] = hit
        todo.extend(inside)
    return bad, seen


def test_protocol_core_imports_no_sockets_threads_or_clocks():
    core = ["amqstomp._core." + name[:-3] for name in os.listdir(os.path.join(PACKAGE, "_core"))
            if name.endswith(".py")]
    bad, seen = _forbidden_imports(core + ["amqstomp.codec", "amqstomp.flow", "amqstomp._core._codec_py",
                                           "amqstomp._core._flow_py"])
    assert bad == {}
    # the walk reached the modules the core is built on (it would pass vacuously otherwise)
    assert {"amqstomp.codec", "amqstomp._core.uri", "amqstomp._core.state"} <= seen
    for source in ("_codec.pyx", "_codec_parse.pxi", "_codec_template.pxi", "_codec_big.pxi",
                   "_codec_encode.pxi"):  # the compiled codec
        with open(os.path.join(PACKAGE, "_core", source), encoding="utf-8") as f:
            pyx = f.read()
        for name in FORBIDDEN:
            assert "import %s\n" % name not in pyx and "from %s import" % name not in pyx


def test_the_import_check_catches_a_forbidden_import(tmp_path, monkeypatch):
    """The check above can fail: a module importing time (in a function) is reported."""
    fake = tmp_path / "amqstomp"
    (fake / "_core").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "_core" / "__init__.py").write_text("")
    (fake / "_core" / "a.py").write_text("from . import b\n")
    (fake / "_core" / "b.py").write_text("def f():\n    import time\n    return time\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", str(fake))
    bad, _ = _forbidden_imports(["amqstomp._core.a"])
    assert bad == {"amqstomp._core.b": {"time"}}


def _connected(state, heart_beat="0,0", server="ActiveMQ/5.17.2", version="1.2", now_ms=0.0):
    data = encode_frame("CONNECTED", {"version": version, "server": server, "heart-beat": heart_beat}, b"", "1.2")
    (frame,) = state.receive_data(data, now_ms)
    return state.handle(frame)


def test_connect_then_connected_negotiates_version_heartbeats_and_limits():
    threads = threading.active_count()
    state = ProtocolState("1.2", grace=1.5, now_ms=0.0)
    data = state.encode("CONNECT", frames.connect_headers("1.0,1.1,1.2", "broker", (1000, 2000), "u", "p"), b"")
    assert data.startswith(b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:broker\nheart-beat:1000,2000\n")
    assert not state.connected
    event, token = _connected(state, heart_beat="3000,500", version="1.1")
    assert (event, token) == (CONNECTED, None)
    assert state.connected and state.version == "1.1" and state.dialect == frames.ACTIVEMQ
    # send every MAX(cx, sy) = 1000 ms, expect the broker every MAX(sx, cy) = 3000 ms
    assert (state.send_ms, state.recv_ms) == (1000, 3000)
    assert state.recv_timeout_ms == 3000 * heartbeat.PEER_GRID_FACTOR * 1.5
    assert state.limits == limits.ACTIVEMQ_LIMITS
    assert threading.active_count() == threads  # nothing started a thread


def test_heartbeats_off_when_either_side_says_zero():
    state = ProtocolState("1.2")
    state.encode("STOMP", {"accept-version": "1.2", "heart-beat": "0,1000"}, b"")
    _connected(state, heart_beat="1000,1000")
    assert (state.send_ms, state.recv_ms) == (0, 1000)
    assert state.next_deadline(0.0) == state.recv_timeout_ms


def test_receipt_correlation_and_errors():
    state = ProtocolState("1.2")
    refused = encode_frame("ERROR", {"message": "bad login"}, b"", "1.2")
    (frame,) = state.receive_data(refused, 0.0)
    assert state.handle(frame) == (CONNECT_REFUSED, None)
    _connected(state)
    token, other = object(), object()
    state.expect_receipt("r-1", token)
    state.expect_receipt("r-2", other)
    stream = encode_frame("RECEIPT", {"receipt-id": "r-1"}, b"", "1.2") + b"\n" + \
        encode_frame("ERROR", {"receipt-id": "r-2", "message": "no"}, b"", "1.2") + \
        encode_frame("RECEIPT", {"receipt-id": "r-1"}, b"", "1.2")
    # split anywhere: the same events
    for cut in (1, 7, len(stream) // 2, len(stream) - 1):
        probe = ProtocolState("1.2")
        _connected(probe)
        probe.expect_receipt("r-1", token)
        probe.expect_receipt("r-2", other)
        got = probe.receive_data(stream[:cut], 1.0) + probe.receive_data(stream[cut:], 2.0)
        assert [probe.handle(f) for f in got] == [(RECEIPT, token), (ERROR, other), (RECEIPT, None)]
    (answer,) = state.receive_data(stream[:stream.index(b"\0") + 1], 3.0)
    assert state.handle(answer) == (RECEIPT, token)
    state.expect_receipt("r-3", token)
    assert state.connection_lost() == [other, token]  # what is still awaited: none will come
    assert not state.connected and state.receipts == {}


def test_an_error_naming_no_receipt_is_matched_once_the_other_receipts_are_answered():
    # RabbitMQ: the ERROR for the second SEND comes before the first SEND's RECEIPT
    state = ProtocolState("1.2")
    _connected(state, server="RabbitMQ/3.10.8")
    first, second, third = object(), object(), object()
    state.expect_receipt("ok", first)
    state.expect_receipt("bad", second)
    error = encode_frame("ERROR", {"message": "Unknown destination"}, b"", "1.2")
    receipt = encode_frame("RECEIPT", {"receipt-id": "ok"}, b"", "1.2")
    (frame,) = state.receive_data(error, 1.0)
    assert state.handle(frame) == (ERROR, None)  # either may be its answer
    assert state.take_error_answers() == []
    state.expect_receipt("later", third)  # sent after the ERROR: no suspect
    (answer,) = state.receive_data(receipt, 2.0)
    assert state.handle(answer) == (RECEIPT, first)
    assert state.take_error_answers() == [("bad", second, frame)]
    assert state.take_error_answers() == [] and state.receipts == {"later": third}
    (answer,) = state.receive_data(encode_frame("RECEIPT", {"receipt-id": "later"}, b"", "1.2"), 2.5)
    assert state.handle(answer) == (RECEIPT, third) and state.take_error_answers() == []
    # two ERRORs, three receipts awaited: matched in order once one RECEIPT came
    tokens = {name: object() for name in ("a", "b", "c")}
    for name, token in tokens.items():
        state.expect_receipt(name, token)
    errors = [state.receive_data(encode_frame("ERROR", {"message": m}, b"", "1.2"), 3.0)[0] for m in ("x", "y")]
    assert [state.handle(e) for e in errors] == [(ERROR, None), (ERROR, None)]
    (answer,) = state.receive_data(encode_frame("RECEIPT", {"receipt-id": "b"}, b"", "1.2"), 4.0)
    assert state.handle(answer) == (RECEIPT, tokens["b"])
    assert state.take_error_answers() == [("a", tokens["a"], errors[0]), ("c", tokens["c"], errors[1])]
    # the connection ends first: whose answer it was is unknown, every wait gets the loss
    state.expect_receipt("d", first)
    state.expect_receipt("e", third)
    (frame,) = state.receive_data(error, 5.0)
    assert state.handle(frame) == (ERROR, None)
    assert state.connection_lost() == [first, third] and state.take_error_answers() == []
    # ActiveMQ names the receipt: an ERROR naming none answers none of them
    classic = ProtocolState("1.2")
    _connected(classic)
    classic.expect_receipt("ok", first)
    classic.expect_receipt("bad", second)
    (frame,) = classic.receive_data(error, 1.0)
    assert classic.handle(frame) == (ERROR, None)
    (answer,) = classic.receive_data(receipt, 2.0)
    assert classic.handle(answer) == (RECEIPT, first) and classic.take_error_answers() == []


def test_what_an_error_means_is_one_decision_of_the_core():
    """amqstomp._core.errors: for every driver, which waiter an ERROR fails with which
    exception, the refused CONNECT, the listeners' event, the log line and its level."""
    import logging

    from amqstomp._core.errors import connect_wait_failure, error_answer_failures, error_outcome, last_error_note
    from amqstomp._core.events import ConnectRefused, ErrorIn
    from amqstomp._core.state import UNSUBSCRIBED_ERROR
    from amqstomp.exception import BrokerError, ConnectRefusedError

    state = ProtocolState("1.2")
    assert last_error_note(state, 0.0) == ""
    (frame,) = state.receive_data(encode_frame("ERROR", {"message": "bad login"}, b"", "1.2"), 1000.0)
    event, token = state.handle(frame)
    refused = error_outcome(state, event, token, frame)
    assert isinstance(refused.refused, ConnectRefusedError) and str(refused.refused) == \
        "the broker refused the connection: bad login"
    assert refused.token is None and refused.error is None and isinstance(refused.event, ConnectRefused)
    assert (refused.level, refused.log_line) == (logging.WARNING, "broker ERROR: bad login")
    assert last_error_note(state, 1250.0) == "; its last ERROR (0.25 s before): bad login"
    _connected(state)
    waiter = object()
    state.expect_receipt("r-1", waiter)
    (frame,) = state.receive_data(encode_frame("ERROR", {"receipt-id": "r-1", "message": "no"}, b"", "1.2"), 2.0)
    answered = error_outcome(state, *state.handle(frame), frame)
    assert answered.token is waiter and answered.refused is None and isinstance(answered.event, ErrorIn)
    assert type(answered.error) is BrokerError and answered.error.receipt_id == "r-1"
    assert str(answered.error) == "the broker answered with ERROR: no (ERROR for receipt 'r-1')"
    (frame,) = state.receive_data(encode_frame("ERROR", {"message": "nobody's"}, b"", "1.2"), 3.0)
    alone = error_outcome(state, *state.handle(frame), frame)
    assert (alone.token, alone.error, alone.refused) == (None, None, None) and alone.event.arg is frame
    # answering no waiter: only that one is for the asyncio API's on_error (issue 22)
    assert (refused.unanswered, answered.unanswered, alone.unanswered) == (False, False, True)
    # a late answer to this side's own UNSUBSCRIBE (RabbitMQ's): a DEBUG line, nothing else
    rabbit = ProtocolState("1.2")
    _connected(rabbit, server="RabbitMQ/3.10.8")
    rabbit.encode("UNSUBSCRIBE", {"id": "7"}, b"")
    late = encode_frame("ERROR", {"message": "Subscription not found"},
                        b"There is no current subscription with tag 'T_7'.", "1.2")
    (frame,) = rabbit.receive_data(late, 1.0)
    event, token = rabbit.handle(frame)
    assert event == UNSUBSCRIBED_ERROR
    quiet = error_outcome(rabbit, event, token, frame)
    assert (quiet.token, quiet.error, quiet.refused, quiet.event, quiet.level) == (None, None, None, None,
                                                                                  logging.DEBUG)
    assert "UNSUBSCRIBE" in quiet.log_line and "Subscription not found" in quiet.log_line and not quiet.unanswered
    # RabbitMQ names no receipt: with two awaited, the ERROR is kept to answer one of them, not unanswered
    rabbit.expect_receipt("r-a", object())
    rabbit.expect_receipt("r-b", object())
    (frame,) = rabbit.receive_data(encode_frame("ERROR", {"message": "not found"}, b"", "1.2"), 2.0)
    kept = error_outcome(rabbit, *rabbit.handle(frame), frame)
    assert kept.token is None and isinstance(kept.event, ErrorIn) and not kept.unanswered
    with pytest.raises(ValueError, match="RECEIPT"):
        error_outcome(rabbit, RECEIPT, None, frames_of(rabbit, "RECEIPT"))
    (failure,) = error_answer_failures([("bad", waiter, frame)])
    assert failure[0] is waiter and failure[1].receipt_id == "bad" and "naming no receipt" in str(failure[1])
    # the CONNECTED wait, when the socket ended first: a broker that closed it with no ERROR says so
    lapse = ProtocolState("1.2")
    lapse.connection_lost("connection closed by the broker")
    failed = connect_wait_failure(lapse, "connection closed by the broker", None)
    assert str(failed) == ("connection closed before CONNECTED: connection closed by the broker without an ERROR "
                           "frame (no reason given: a refused login, or a broker stopping)")
    mine = ProtocolState("1.2")
    mine.closing()
    cause = OSError("reset")
    failed = connect_wait_failure(mine, "connection closed by the client", cause)
    assert str(failed) == "connection closed before CONNECTED: connection closed by the client"
    assert failed.__cause__ is cause
    assert str(connect_wait_failure(state, "gone", None)) == "connection closed right after CONNECTED: gone"


def frames_of(state, cmd):
    """One ``cmd`` frame parsed by ``state`` (a frame as a driver hands it to the core)."""
    (frame,) = state.receive_data(encode_frame(cmd, {"receipt-id": "x"}, b"", "1.2"), 0.0)
    return frame


@pytest.mark.parametrize("accept, answered, taken", [
    ("1.0,1.1,1.2", "1.2", True), ("1.0,1.1,1.2", "1.1", True), ("1.2", "1.2", True), (None, None, True),
    ("1.2", "9.9", False), ("1.2", "1.1", False), ("1.1", None, False), (None, "1.2", False), ("1.0,1.1", "1.2", False),
])
def test_a_connected_naming_a_version_not_offered_is_a_protocol_error(accept, answered, taken):
    state = ProtocolState("1.2")
    state.encode("CONNECT", {} if accept is None else {"accept-version": accept}, b"")
    headers = {"server": "ActiveMQ/5.17.2"} if answered is None else {"version": answered, "server": "x"}
    receipt = encode_frame("RECEIPT", {"receipt-id": "early"}, b"", "1.2")
    data = receipt + encode_frame("CONNECTED", headers, b"", "1.2")
    if taken:
        frames = state.receive_data(data, 0.0)
        assert [f.cmd for f in frames] == ["RECEIPT", "CONNECTED"]
        return
    with pytest.raises(StompProtocolError) as caught:
        state.receive_data(data, 0.0)
    assert repr(answered or "1.0") in str(caught.value) and "did not offer" in str(caught.value), caught.value
    assert [f.cmd for f in caught.value.frames] == ["RECEIPT"]  # what came before it is handed on
    assert state.connected_frame is None and not state.connected


def test_the_link_state_goes_connecting_open_then_closing_closed_or_lost():
    state = ProtocolState("1.2")
    assert state.link_state is LinkState.CONNECTING and not state.connected and not state.by_client
    _connected(state)
    assert state.link_state is LinkState.OPEN and state.connected
    state.closing()  # this side asks to close: still connected until the socket ends, and no loss
    assert state.link_state is LinkState.CLOSING and state.connected and state.by_client
    state.connection_lost()
    assert state.link_state is LinkState.CLOSED and not state.connected and state.by_client
    lost = ProtocolState("1.2")
    _connected(lost)
    lost.connection_lost()  # the peer or the network ended it: a failover layer may replace it
    assert lost.link_state is LinkState.LOST and not lost.connected and not lost.by_client
    lost.closing()  # the client closes what was lost already: its end, not a loss to recover from
    assert lost.link_state is LinkState.CLOSED and lost.by_client
    early = ProtocolState("1.2")
    early.closing()  # closed before CONNECTED: never connected
    assert early.link_state is LinkState.CLOSING and not early.connected
    _connected(early)  # a CONNECTED racing the close does not reopen it
    assert early.link_state is LinkState.CLOSING and early.connected


def test_the_core_records_how_a_link_ended_and_whether_it_is_usable():
    """One state answers "usable / ended / by whom / reported" (issue 22): the end
    record, the silent end of an abandoned attempt, the API's word that it is down."""
    state = ProtocolState("1.2")
    assert not state.usable and state.end is None
    _connected(state)
    assert state.usable
    state.set_down(True)  # stomp.py's set_connected(False), a DISCONNECT's receipt
    assert not state.usable and state.connected and state.link_state is LinkState.OPEN
    state.set_down(False)
    assert state.usable
    error = OSError("reset")
    assert state.connection_lost("connection lost: reset", error) == []
    end = state.end
    assert end is not None and end.reason == "connection lost: reset" and end.error is error
    assert not end.by_client and not state.silent and not state.usable
    state.connection_lost("again", None)  # the first end is the record
    assert state.end is end and bool(end)
    attempt = ProtocolState("1.2")
    attempt.closing(silent=True)  # a failover layer abandons its own attempt: its end is not reported
    attempt.connection_lost("failover attempt abandoned")
    assert attempt.silent and attempt.end is not None and attempt.end.by_client
    attempt.closing()  # a later close keeps it silent
    assert attempt.silent


def test_link_events_are_typed_and_named_once():
    from amqstomp._core import events
    from amqstomp._engine.dispatch import LISTENER_CALLS

    assert isinstance(events.event_named("heartbeat"), events.HeartbeatIn)
    refused = events.event_named("connect_refused", "frame")
    assert type(refused) is events.ConnectRefused and refused.arg == "frame"
    frame = object()
    assert events.event_named("message", frame) is frame  # a MESSAGE is its own event
    assert type(events.event_named("disconnecting")) is events.Disconnecting  # a class, as every library event
    notice = events.event_named("my_own_event", frame)  # the application's name (stomp.py's notify): a Notice
    assert type(notice) is events.Notice and notice.name == "my_own_event" and notice.arg is frame
    # every named event class has its stomp.py listener method, under the same name
    assert {cls: LISTENER_CALLS[cls][0] for cls in events.EVENT_NAMES.values()} == \
        {cls: name for name, cls in events.EVENT_NAMES.items()}
    with pytest.raises(AttributeError):
        events.HeartbeatIn().other = 1  # __slots__: cheap, and no stray fields


def test_unexpected_frames_are_reported_not_fatal():
    state = ProtocolState("1.2")
    (frame,) = state.receive_data(encode_frame("SEND", {"destination": "/queue/x"}, b"", "1.2"), 0.0)
    assert state.handle(frame) == (UNEXPECTED, None)


def test_heartbeat_deadlines_from_times_passed_in():
    state = ProtocolState("1.2", grace=1.5, now_ms=0.0)
    state.encode("CONNECT", {"accept-version": "1.2", "heart-beat": "1000,1000"}, b"")
    _connected(state, heart_beat="1000,1000", now_ms=0.0)
    period = 1000 * heartbeat.SEND_FRACTION
    assert state.send_period_ms == period
    assert state.heartbeat_due_in_ms(0.0) == period
    state.data_written(400.0)
    assert state.heartbeat_due_in_ms(600.0) == pytest.approx(period - 200.0)
    assert state.heartbeat_due_in_ms(400.0 + period) == 0.0
    timeout = 1000 * heartbeat.PEER_GRID_FACTOR * 1.5
    assert state.receive_left_ms(1000.0) == timeout - 1000.0
    state.receive_data(b"\n", 2500.0)  # a heart-beat from the broker: alive at 2500
    assert state.receive_left_ms(3000.0) == timeout - 500.0
    assert state.receive_left_ms(2500.0 + timeout) <= 0  # overdue
    state.peer_seen(5000.0)
    assert state.receive_left_ms(5000.0) == timeout
    assert state.next_deadline(5000.0) == min(5000.0 + state.heartbeat_due_in_ms(5000.0), 5000.0 + timeout)


def test_connected_deadline_while_connecting():
    """CONNECT written at 1000 ms with 2000 ms for the answer: due at 3000 (the
    next deadline while CONNECTING), overdue from then; CONNECTED clears it."""
    state = ProtocolState("1.2", now_ms=1000.0)
    assert state.next_deadline(1000.0) is None and not state.connected_overdue(10 ** 9)  # none armed
    state.encode("CONNECT", {"accept-version": "1.2"}, b"")
    state.connect_sent(1000.0, 2000.0)
    assert state.next_deadline(1500.0) == 3000.0
    assert not state.connected_overdue(2999.0)
    assert state.connected_overdue(3000.0)
    with pytest.raises(ValueError, match="within_ms"):
        state.connect_sent(1000.0, float("nan"))
    _connected(state, now_ms=2500.0)  # answered in time
    assert state.link_state is LinkState.OPEN
    assert not state.connected_overdue(5000.0) and state.next_deadline(5000.0) is None  # heart-beats off
    state.connect_sent(6000.0, 1.0)  # no effect once connected
    assert not state.connected_overdue(10 ** 9)
    closing = ProtocolState("1.2")
    closing.connect_sent(0.0, 10.0)
    closing.closing()  # this side closes before the answer: no deadline to report
    assert not closing.connected_overdue(20.0) and closing.next_deadline(20.0) is None


def test_broker_limits_apply_to_activemq_classic_only():
    big = {"x": "y" * 10241}
    classic = ProtocolState("1.2")
    _connected(classic, server="ActiveMQ/5.17.2")
    with pytest.raises(FrameLimitError) as info:
        classic.encode("SEND", dict(big, destination="/queue/a"), b"")
    assert info.value.limit == "header line" and "'x'" in str(info.value)
    for server in ("ActiveMQ-Artemis/2.31.2", "RabbitMQ/3.10.8", None):
        other = ProtocolState("1.2")
        _connected(other, server=server or "")
        assert other.encode("SEND", dict(big, destination="/queue/a"), b"")


def test_dialects():
    assert frames.dialect_of("ActiveMQ/5.17.2") == frames.ACTIVEMQ
    assert frames.dialect_of("ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine") == frames.ARTEMIS
    assert frames.dialect_of("RabbitMQ/3.10.8") == frames.RABBITMQ
    assert frames.dialect_of(None) == frames.dialect_of("apache-apollo/1.7") == frames.GENERIC
    assert frames.is_activemq_classic("ActiveMQ/5.17.2")
    assert not frames.is_activemq_classic("ActiveMQ-Artemis/2.31.2")


def test_connect_headers():
    assert frames.connect_headers("1.0", "h", (1000, 1000), "u", None) == {"accept-version": "1.0", "host": "h",
                                                                         "login": "u"}
    headers = frames.connect_headers("1.2", None, (0, 0), None, "secret", client_id="c1",
                                     extra={"accept-version": "9", "x": "1"})
    assert headers == {"accept-version": "1.2", "x": "1", "passcode": "secret", "client-id": "c1"}
    assert list(frames.connect_headers("1.1", "v", (5, 6), "u", "p")) == [
        "accept-version", "host", "heart-beat", "login", "passcode"]


def test_ack_headers_per_version_and_the_activemq_1_0_quirk():
    message = {"message-id": "m1", "subscription": "s1", "ack": "a1"}
    assert frames.ack_headers("1.2", message) == {"id": "a1"}
    assert frames.ack_headers("1.1", message) == {"message-id": "m1", "subscription": "s1"}
    assert frames.ack_headers("1.0", message) == {"message-id": "m1"}
    assert frames.ack_headers("1.0", message, activemq=True) == {"message-id": "m1", "subscription": "s1"}
    assert frames.ack_identity("1.2", message) == ("a1",)
    assert frames.ack_identity("1.2", {"id": "a1"}) == ("a1",)  # an ACK's headers name the same
    assert frames.ack_identity("1.1", message) == ("m1", "s1")
    assert frames.ack_identity("1.0", message) == ("m1",)
    assert frames.reject_command("1.0") == "ACK" and frames.reject_command("1.2") == "NACK"


def test_subscribe_headers_one_builder_for_every_subscribe():
    """SUBSCRIBE's headers (STOMP 1.2 "SUBSCRIBE"): the caller's first, the
    destination's options where the caller gave none of that name, then
    destination, id (left out for STOMP 1.0 without one) and ack, which replace
    the caller's of those names."""
    caller = {"selector": "a = 1", "activemq.prefetchSize": "5", "ack": "auto", "receipt": "r1"}
    headers = frames.subscribe_headers("/queue/a", "s1", "client", caller,
                                       {"activemq.prefetchSize": "10", "activemq.exclusive": "true"})
    assert headers == {"selector": "a = 1", "activemq.prefetchSize": "5", "ack": "client", "receipt": "r1",
                       "activemq.exclusive": "true", "destination": "/queue/a", "id": "s1"}
    assert list(headers)[-2:] == ["destination", "id"]  # ack kept the caller's place
    assert caller["ack"] == "auto"  # a new mapping
    assert frames.subscribe_headers("/topic/t", None, "auto", {}, {}) == {"destination": "/topic/t", "ack": "auto"}


def test_backoff_policies():
    stomp_py = backoff.ReconnectPolicy.stomp_py(0.1, 0.5, 0.0, 0.2, 3)
    assert [stomp_py.delay_ms(n) for n in (1, 2, 3, 50)] == [100, 150, 200, 200]
    assert stomp_py.gives_up(3, True) and not stomp_py.randomize
    activemq = backoff.ReconnectPolicy()
    assert [activemq.delay_ms(n) for n in (1, 2, 3)] == [10, 20, 40]
    assert activemq.delay_ms(10 ** 6) == 30000
    with pytest.raises(ConfigurationError, match="reconnect_sleep_max"):
        backoff.ReconnectPolicy.stomp_py(reconnect_sleep_max=float("nan"))
    with pytest.raises(ConfigurationError, match="reconnect_attempts_max"):
        backoff.ReconnectPolicy.stomp_py(reconnect_attempts_max=-2)


def test_a_message_before_connected_is_a_protocol_error_and_one_after_a_closing_socket_is_not():
    from amqstomp.exception import StompProtocolError

    early = ProtocolState("1.2")
    message = encode_frame("MESSAGE", {"destination": "/queue/a", "message-id": "m1", "subscription": "s"},
                           b"x", "1.2")
    receipt = encode_frame("RECEIPT", {"receipt-id": "r"}, b"", "1.2")
    with pytest.raises(StompProtocolError, match="MESSAGE frame before CONNECTED") as caught:
        early.receive_data(receipt + message, 0.0)
    assert [f.cmd for f in caught.value.frames] == ["RECEIPT"]
    # CONNECTED and a MESSAGE in one read: the MESSAGE comes after it, fine
    both = ProtocolState("1.2")
    connected = encode_frame("CONNECTED", {"version": "1.2"}, b"", "1.2")
    assert [f.cmd for f in both.receive_data(connected + message, 0.0)] == ["CONNECTED", "MESSAGE"]
    # messages still in flight when the socket is closing (connection_lost) are no protocol error
    closing = ProtocolState("1.2")
    _connected(closing)
    closing.connection_lost()
    assert [f.cmd for f in closing.receive_data(message, 0.0)] == ["MESSAGE"]
