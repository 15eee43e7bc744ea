"""A stomp.py 9.0 user's own test suite, run unchanged against the real stomp.py and amqstomp.

Written as projects that use stomp.py write their tests: a service class of
theirs over a connection, unit tests that replace ``conn.transport`` or
``conn.send_frame`` with a ``unittest.mock.Mock`` on a connection never
connected, a ``from stomp.utils import *`` and the modules that star import
hands out, integration tests that count frames in stomp.py's DEBUG log with
``caplog``, listeners subclassing ``stomp.ConnectionListener``,
``NotConnectedException`` after ``disconnect()``. Every test takes the
``stomp`` fixture, which is the real stomp.py 9.0 (through
``tests/stomppy_reference.py``: skipped only when stomp.py 9.0 is not installed,
a failure when it is installed but cannot be imported as itself) or amqstomp
imported as ``stomp`` (``import amqstomp as stomp``); the suite must pass on both.
"""
import logging
import os
import sys
import threading
import time
import uuid
from unittest import mock

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: stomppy_reference
from stomppy_reference import reference  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["stomp.py", "amqstomp"])
def stomp(request):
    """The library under test, as the user's code names it."""
    if request.param == "stomp.py":
        return reference("stomp")
    import amqstomp
    return amqstomp


def _wait(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


class OrderPublisher:
    """The user's code under test: publishes orders over a stomp.py connection."""

    def __init__(self, conn, destination="/queue/orders"):
        self.conn = conn
        self.destination = destination

    def publish(self, order_id, payload):
        self.conn.send(self.destination, payload, content_type="application/json",
                       headers={"order-id": order_id, "persistent": "true"})

    def publish_batch(self, orders):
        tx = self.conn.begin()
        for order_id, payload in orders:
            self.conn.send(self.destination, payload, headers={"order-id": order_id}, transaction=tx)
        self.conn.commit(tx)
        return tx


# --------------------------------------------------------------------------- unit tests with mocks


def test_publish_transmits_one_send_frame(stomp):
    conn = stomp.Connection12()
    conn.transport = mock.Mock()
    OrderPublisher(conn).publish("o-1", '{"qty": 2}')
    conn.transport.transmit.assert_called_once()
    frame = conn.transport.transmit.call_args[0][0]
    assert frame.cmd == "SEND"
    assert frame.headers["destination"] == "/queue/orders"
    assert frame.headers["order-id"] == "o-1"
    assert frame.headers["content-type"] == "application/json"
    assert frame.headers["content-length"] == len('{"qty": 2}')
    assert frame.body == '{"qty": 2}'


def test_batch_is_one_transaction(stomp):
    conn = stomp.Connection11()
    conn.transport = mock.MagicMock()
    tx = OrderPublisher(conn).publish_batch([("o-1", "a"), ("o-2", "b")])
    cmds = [c[0][0].cmd for c in conn.transport.transmit.call_args_list]
    assert cmds == ["BEGIN", "SEND", "SEND", "COMMIT"]
    assert all(c[0][0].headers["transaction"] == tx for c in conn.transport.transmit.call_args_list)


def test_subscribe_calls_send_frame(stomp):
    conn = stomp.Connection12()
    conn.send_frame = mock.Mock()
    conn.subscribe("/queue/orders", id=1, ack="client-individual", headers={"selector": "region = 'EU'"})
    conn.send_frame.assert_called_once_with(
        "SUBSCRIBE", {"selector": "region = 'EU'", "destination": "/queue/orders", "id": 1,
                      "ack": "client-individual"})
    conn.unsubscribe(id=1)
    conn.send_frame.assert_called_with("UNSUBSCRIBE", {"id": 1})


def test_ack_and_nack_of_a_message_the_test_made_up(stomp):
    conn = stomp.Connection12()
    conn.send_frame = mock.Mock()
    conn.ack("ID:made-up-1")
    conn.send_frame.assert_called_with("ACK", {"id": "ID:made-up-1"})
    conn.nack("ID:made-up-2", receipt="r-1")
    conn.send_frame.assert_called_with("NACK", {"id": "ID:made-up-2", "receipt": "r-1"})
    assert conn.send_frame.call_count == 2


def test_patch_object_on_send_frame(stomp):
    conn = stomp.Connection10()
    with mock.patch.object(conn, "send_frame") as send_frame:
        conn.send("/queue/a", "hello")
        conn.abort("tx-1")
    assert send_frame.call_args_list == [
        mock.call("SEND", {"destination": "/queue/a", "content-length": 5}, "hello"),
        mock.call("ABORT", {"transaction": "tx-1"}),
    ]


def test_connect_through_a_mock_transport(stomp):
    conn = stomp.Connection12()
    conn.transport = mock.MagicMock()
    conn.transport.current_host_and_port = ("mq.example.com", 61613)
    conn.transport.vhost = None
    conn.transport.connection_error = False
    conn.connect("app", "s3cret", wait=True)
    frame = conn.transport.transmit.call_args[0][0]
    assert (frame.cmd, frame.headers) == ("STOMP", {"accept-version": "1.2", "host": "mq.example.com",
                                                     "login": "app", "passcode": "s3cret"})
    conn.transport.wait_for_connection.assert_called_once_with()


def test_utils_star_import(stomp):
    names = {}
    exec("from %s import *" % stomp.utils.__name__, names)  # the user's `from stomp.utils import *`
    assert names["re"].match(r"\d+", "42")
    assert names["os"].path.join("a", "b") == os.path.join("a", "b")
    assert isinstance(names["threading"].Lock(), type(threading.Lock()))
    frame = names["Frame"]("SEND", {"destination": "/queue/a"}, "hi")
    lines = names["convert_frame"](frame)
    assert lines == [b"SEND", b"\n", b"destination:/queue/a\n", b"\n", b"hi", b"\x00"]
    assert names["clean_lines"](lines).startswith("[b'SEND', b'\\n', b'destination:/queue/a\\n'")
    assert names["uuid"].UUID(names["get_uuid"]())


def test_base_transport_stubs(stomp):
    transport = stomp.transport.BaseTransport()
    assert transport.send(b"SEND\n\n\x00") is None
    assert transport.receive() is None
    transport.cleanup()
    transport.disconnect_socket()


class RecordingTransport:
    """The user's fake: a BaseTransport that keeps the bytes instead of writing them."""

    @staticmethod
    def make(stomp):
        class Recording(stomp.transport.BaseTransport):
            def __init__(self):
                super().__init__()
                self.written = []

            def send(self, encoded_frame):
                self.written.append(encoded_frame)
        return Recording()


def test_transmit_on_a_recording_transport(stomp):
    transport = RecordingTransport.make(stomp)
    transport.transmit(stomp.utils.Frame("SEND", {"destination": "/queue/orders", "order-id": "o-9"}, "x"))
    assert transport.written == [b"SEND\ndestination:/queue/orders\norder-id:o-9\n\nx\x00"]


def test_bad_settings_fail_at_connect(stomp):
    conn = stomp.Connection([(None, None)], reconnect_attempts_max=1, reconnect_sleep_initial=0.01)
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect(wait=True)
    conn = stomp.Connection12([("127.0.0.1", 1)])
    conn.set_ssl([("127.0.0.1", 1)], ssl_version="version", verify=False)
    assert conn.transport._Transport__ssl_params[("127.0.0.1", 1)]["ssl_version"] == "version"
    assert conn.get_ssl(("127.0.0.1", 1))["verify"] is False


# --------------------------------------------------------------------------- integration tests (ActiveMQ)


def _listener_class(stomp):
    class Listener(stomp.ConnectionListener):
        def __init__(self):
            self.bodies = []
            self.receipts = []
            self.disconnected = threading.Event()

        def on_message(self, frame):
            self.bodies.append(frame.body)

        def on_receipt(self, frame):
            self.receipts.append(frame.headers["receipt-id"])

        def on_disconnected(self):
            self.disconnected.set()
    return Listener


def test_frames_counted_in_the_debug_log(stomp, activemq, caplog):
    caplog.set_level(logging.DEBUG, logger="stomp.py")
    dest = "/queue/user-log-" + uuid.uuid4().hex[:8]
    listener = _listener_class(stomp)()
    conn = stomp.Connection12([("127.0.0.1", activemq.stomp_port)])
    conn.set_listener("orders", listener)
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(dest, id="1", ack="auto", receipt="sub")
    assert _wait(lambda: "sub" in listener.receipts)
    for n in range(3):
        OrderPublisher(conn, dest).publish("o-%d" % n, "body-%d" % n)
    assert _wait(lambda: len(listener.bodies) == 3)
    conn.disconnect()
    sent = [r.getMessage() for r in caplog.records
            if r.name == "stomp.py" and r.getMessage().startswith("sending frame: [b'SEND'")]
    received = [r for r in caplog.records if r.name == "stomp.py" and r.getMessage().startswith("received frame: ")
                and r.args[0] == "MESSAGE"]
    assert len(sent) == 3 and len(received) == 3
    assert listener.bodies == ["body-0", "body-1", "body-2"]


def test_not_connected_after_disconnect(stomp, activemq):
    conn = stomp.Connection11([("127.0.0.1", activemq.stomp_port)], heartbeats=(1000, 1000))
    listener = _listener_class(stomp)()
    conn.set_listener("", listener)
    assert conn.heartbeat_thread is None
    conn.connect("admin", "admin", wait=True)
    assert conn.is_connected()
    assert _wait(lambda: conn.heartbeat_thread is not None, 5)
    conn.disconnect()
    assert listener.disconnected.wait(10)
    assert not conn.is_connected()
    with pytest.raises(stomp.exception.NotConnectedException):
        conn.send("/queue/after-disconnect", "late")


def test_test_listener_waits_for_the_message(stomp, activemq):
    dest = "/queue/user-wait-" + uuid.uuid4().hex[:8]
    conn = stomp.Connection([("127.0.0.1", activemq.stomp_port)])
    listener = stomp.listener.TestListener("done")
    conn.set_listener("test", listener)
    conn.connect("admin", "admin", wait=True)
    try:
        conn.subscribe(dest, id="1", ack="client-individual")
        conn.send(dest, "payload", receipt="done")
        listener.wait_on_receipt()
        listener.wait_for_message()
        headers, body = listener.get_latest_message()
        assert body == "payload"
        conn.ack(headers["message-id"], headers["subscription"])
    finally:
        conn.disconnect()
