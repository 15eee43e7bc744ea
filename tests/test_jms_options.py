"""The JMS-style API without a broker: URIs and options, destinations, message mapping."""
import ssl

import pytest

from amqstomp._core.dialect import ACTIVEMQ, ARTEMIS, RABBITMQ

from amqstomp.codec import Frame
from amqstomp.exception import ConfigurationError
from amqstomp.jms import (
    NON_PERSISTENT,
    PERSISTENT,
    BytesMessage,
    ConnectionFactory,
    JMSError,
    MapMessage,
    MessageFormatError,
    MessageNotWriteableError,
    Queue,
    TemporaryQueue,
    TextMessage,
    Topic,
)
from amqstomp.jms.message import message_from_frame, send_headers
from amqstomp.jms.options import JMS_OPTIONS, resolve

pytestmark = pytest.mark.timeout(30)


def test_tcp_uri_says_amqstomp_speaks_stomp():
    with pytest.raises(ConfigurationError, match="amqstomp speaks STOMP"):
        ConnectionFactory("tcp://localhost:61616")


def test_unknown_jms_option_is_refused_with_a_hint():
    with pytest.raises(ConfigurationError, match="jms.prefetchPolicy.queuePrefech.*did you mean"):
        ConnectionFactory("stomp://localhost:61613?jms.prefetchPolicy.queuePrefech=5")
    with pytest.raises(ConfigurationError, match="jms.useAsyncSnd"):
        ConnectionFactory("stomp://localhost:61613?jms.useAsyncSnd=true")


def test_unknown_keyword_is_refused():
    with pytest.raises(ConfigurationError, match="producer_windw_size.*did you mean.*producer_window_size"):
        ConnectionFactory("stomp://localhost:61613", producer_windw_size=10)
    with pytest.raises(ConfigurationError, match="must be an int"):
        ConnectionFactory("stomp://localhost:61613", producer_window_size="big")


def test_failover_uri_options_and_defaults():
    factory = ConnectionFactory("failover:(stomp://a:61613,stomp://b:61614)?randomize=false"
                                "&maxReconnectAttempts=5&jms.prefetchPolicy.all=7")
    uri = factory._resolved.uri
    assert [ep.host_and_port for ep in uri.endpoints] == [("a", 61613), ("b", 61614)]
    assert factory.options["prefetch_all"] == 7
    assert factory.options["heartbeats"] == (5000, 5000)  # failover: a silent broker must be noticed
    assert ConnectionFactory("failover:(stomp://a:61613)?nested.heartBeat=0,0").options["heartbeats"] == (0, 0)
    assert ConnectionFactory("stomp://a:61613").options["heartbeats"] == (0, 0)
    with pytest.raises(ConfigurationError, match="maxReconectAttempts"):
        ConnectionFactory("failover:(stomp://a:61613)?maxReconectAttempts=5")


def test_uri_and_keyword_options_merge_keywords_win():
    factory = ConnectionFactory(
        "stomp://127.0.0.1:61613?jms.prefetchPolicy.all=50&jms.useAsyncSend=true&jms.producerWindowSize=2048"
        "&heartBeat=1000,2000&jms.redeliveryPolicy.maximumRedeliveries=2&amqstomp.usageFullAfter=250",
        producer_window_size=4096, client_id="me")
    options = factory.options
    assert options["prefetch_all"] == 50
    assert options["use_async_send"] is True
    assert options["producer_window_size"] == 4096
    assert options["heartbeats"] == (1000, 2000)
    assert options["maximum_redeliveries"] == 2
    assert options["usage_full_after_ms"] == 250
    assert options["client_id"] == "me"
    # the JMS API's defaults
    defaults = ConnectionFactory("stomp://127.0.0.1").options
    assert defaults["optimize_acknowledge"] is True
    assert defaults["producer_window_size"] == 1048576
    assert defaults["separate_producer_socket"] is True
    assert defaults["use_async_send"] is False


def test_every_jms_option_has_a_keyword_and_a_uri_form():
    for name, option in JMS_OPTIONS.items():
        assert name.startswith(("jms.", "amqstomp.")), name
        resolved = resolve("stomp://h:1?%s=%s" % (name, "true" if isinstance(option.default, bool) else "7"), {})
        assert option.keyword in resolved.given


def test_ssl_scheme_and_context():
    context = ssl.create_default_context()
    factory = ConnectionFactory("stomp+ssl://broker.example:61612", ssl_context=context)
    assert factory._resolved.uri.endpoints[0].tls
    with pytest.raises(ConfigurationError, match="SSLContext"):
        ConnectionFactory("stomp+ssl://broker.example:61612", ssl_context="yes")


def test_destinations():
    assert Queue("a").stomp_name == "/queue/a"
    assert Queue("/queue/a") == Queue("a")
    assert Topic("b").stomp_name == "/topic/b"
    q = Queue("orders?consumer.prefetchSize=10&consumer.exclusive=true")
    assert q.stomp_name == "/queue/orders"
    assert q.subscribe_name == "/queue/orders?consumer.prefetchSize=10&consumer.exclusive=true"
    assert Queue("x") != Topic("x")
    remote = TemporaryQueue("/remote-temp-queue/ID:host-1:2:1", remote=True)
    assert remote.stomp_name == "/remote-temp-queue/ID:host-1:2:1"


def test_send_headers_map_jms_fields():
    message = TextMessage("hello")
    message.correlation_id = "c-1"
    message.reply_to = Queue("replies")
    message.type = "order"
    message.group_id = "g"
    message.set_property("flag", True)
    message.set_property("n", 5)
    headers, body = send_headers(message, Queue("q"), NON_PERSISTENT, 7, 60000, dialect=ACTIVEMQ)
    assert body == b"hello"
    assert headers["content-length"] is None  # a TextMessage on ActiveMQ
    assert headers["content-type"] == "text/plain; charset=utf-8"  # and on every broker
    assert "persistent" not in headers  # non-persistent is the default
    assert headers["priority"] == "7"
    assert headers["correlation-id"] == "c-1"
    assert headers["reply-to"] == "/queue/replies"
    assert headers["type"] == "order"
    assert headers["JMSXGroupID"] == "g"
    assert headers["flag"] == "true" and headers["n"] == "5"
    assert int(headers["expires"]) == int(headers["timestamp"]) + 60000
    assert message.expiration == int(headers["expires"]) and message.destination == Queue("q")
    with pytest.raises(MessageFormatError):
        message.set_property("destination", "x")
    with pytest.raises(MessageFormatError):
        send_headers(message, Queue("q"), 3, 4, 0, dialect=ACTIVEMQ)


class _Named(int):
    """An int whose str() is not its digits, as an IntEnum's is before Python 3.11."""

    def __str__(self):
        return "Level.HIGH"


def test_int_priority_and_properties_go_out_as_digits_whatever_their_str():
    message = TextMessage("x")
    message.set_property("level", _Named(8))
    message.set_property("flag", True)
    headers, _ = send_headers(message, Queue("q"), PERSISTENT, _Named(8), 0, dialect=ACTIVEMQ)
    assert headers["priority"] == "8"  # ActiveMQ closes the connection on a priority that is not a number
    assert headers["level"] == "8" and headers["flag"] == "true"
    assert message.priority == 8 and type(message.priority) is int


def test_text_with_nul_and_bytes():
    headers, body = send_headers(TextMessage("a\x00b"), Queue("q"), PERSISTENT, 4, 0, dialect=ACTIVEMQ)
    assert headers["amq-msg-type"] == "text" and headers["content-length"] == 3
    with pytest.raises(MessageFormatError, match="ActiveMQ Artemis"):
        send_headers(TextMessage("a\x00b"), Queue("q"), PERSISTENT, 4, 0, dialect=ARTEMIS)
    # RabbitMQ puts content-length on every MESSAGE: its content-type says text
    headers, body = send_headers(TextMessage("a\x00b"), Queue("q"), PERSISTENT, 4, 0, dialect=RABBITMQ)
    assert headers["content-length"] == 3 and headers["content-type"] == "text/plain; charset=utf-8"
    assert "amq-msg-type" not in headers
    headers, body = send_headers(BytesMessage(b""), Queue("q"), PERSISTENT, 4, 0, dialect=ACTIVEMQ)
    assert headers["content-length"] == 0 and body == b""


def test_message_from_frame():
    frame = Frame("MESSAGE", {"destination": "/queue/q", "message-id": "ID:x:1:-1:1:1", "subscription": "1",
                              "content-length": "3", "priority": "6", "persistent": "true",
                              "reply-to": "/remote-temp-queue/ID:x:1:1", "correlation-id": "c",
                              "timestamp": "123", "expires": "0", "custom": "v"}, b"a\x00b")
    message = message_from_frame(frame, delivery_count=2)
    assert isinstance(message, BytesMessage) and message.data == b"a\x00b"
    assert message.priority == 6 and message.delivery_mode == PERSISTENT
    assert message.redelivered and message.delivery_count == 2
    assert isinstance(message.reply_to, TemporaryQueue) and message.reply_to.remote
    assert message.reply_to.stomp_name == "/remote-temp-queue/ID:x:1:1"
    assert message.properties == {"custom": "v"}
    text = message_from_frame(Frame("MESSAGE", {"destination": "/topic/t", "message-id": "m"}, b"caf\xc3\xa9"))
    assert isinstance(text, TextMessage) and text.text == "café" and not text.redelivered
    assert text.destination == Topic("t")


def _received(headers, body):
    return message_from_frame(Frame("MESSAGE", dict({"destination": "/queue/q", "message-id": "m"}, **headers), body))


def test_a_received_messages_properties_and_body_are_read_only_until_cleared():
    """javax.jms.Message: a received message's properties and body are read-only
    (MessageNotWriteableException) until clearProperties() / clearBody(); before,
    set_property() and ``text =`` changed it silently. Nothing is changed by a refused write."""
    text = _received({"k": "v"}, b"hello")
    data = _received({"content-length": "3"}, b"a\x00b")
    entries = MapMessage({"n": 1})
    _, xml = send_headers(entries, Queue("q"), PERSISTENT, 4, 0, dialect=ACTIVEMQ)
    mapped = _received({"transformation": "jms-map-xml"}, xml)
    assert isinstance(text, TextMessage) and isinstance(data, BytesMessage) and isinstance(mapped, MapMessage)
    for message in (text, data, mapped):
        with pytest.raises(MessageNotWriteableError, match=r"properties are read-only.*clear_properties\(\)"):
            message.set_property("k", "changed")
        with pytest.raises(MessageNotWriteableError, match="properties"):
            message.schedule(delay_ms=1000)
        assert message.properties == ({"k": "v"} if message is text else {})
    for write in (lambda: setattr(text, "text", "changed"), lambda: setattr(data, "data", b"changed"),
                  lambda: mapped.set_int("n", 2), lambda: mapped.__setitem__("other", "x")):
        with pytest.raises(MessageNotWriteableError, match=r"body is read-only.*clear_body\(\)"):
            write()
    assert text.text == "hello" and data.data == b"a\x00b" and mapped.to_dict() == {"n": 1}
    # header fields stay writable (JMS allows it; a send sets them)
    text.correlation_id = "c-2"
    # clear_properties() opens the properties only, clear_body() the body only
    text.clear_properties()
    text.set_property("k", "new")
    with pytest.raises(MessageNotWriteableError):
        text.text = "still read-only"
    text.clear_body()
    text.text = "new"
    data.clear_body()
    data.data = b"new"
    mapped.clear_body()
    mapped.set_int("n", 2)
    assert (text.text, text.properties, data.data, mapped.to_dict()) == ("new", {"k": "new"}, b"new", {"n": 2})
    with pytest.raises(MessageNotWriteableError):
        data.set_property("k", "v")  # its properties were not cleared
    # messages the application makes stay writable
    mine = TextMessage("mine")
    mine.text = "changed"
    mine.set_property("k", "v")
    entries.set_int("n", 2)
    assert isinstance(MessageNotWriteableError("x"), JMSError)


def test_a_received_message_is_sent_again_as_it_came():
    """The send path sets the header fields of a read-only message (as Java's producer does)."""
    received = _received({"k": "v", "correlation-id": "c"}, b"body")
    received.correlation_id = "c-2"
    headers, body = send_headers(received, Queue("other"), NON_PERSISTENT, 4, 0, dialect=ACTIVEMQ)
    assert body == b"body" and headers["k"] == "v" and headers["correlation-id"] == "c-2"
    assert received.destination == Queue("other") and received.delivery_mode == NON_PERSISTENT
    data = _received({"content-length": "2"}, b"ab")
    headers, body = send_headers(data, Queue("other"), PERSISTENT, 4, 0, dialect=ACTIVEMQ)
    assert body == b"ab" and headers["content-length"] == 2


def test_jms_entry_points_are_exported_from_the_package():
    import amqstomp
    from amqstomp import jms

    for name in ("ConnectionFactory", "Queue", "Topic", "AUTO_ACKNOWLEDGE", "CLIENT_ACKNOWLEDGE",
                 "DUPS_OK_ACKNOWLEDGE", "INDIVIDUAL_ACKNOWLEDGE", "SESSION_TRANSACTED"):
        assert getattr(amqstomp, name) is getattr(jms, name), name
    assert amqstomp.Connection is not jms.Connection  # the stomp.py-compatible one stays


@pytest.mark.parametrize("keyword,value,needle", [
    ("queue_prefetch", -1, "from 0 to"), ("version", "9", "1.0, 1.1 or 1.2"),
    ("producer_window_size", -5, "from 0 up"), ("use_async_send", "yes", "True or False"),
    ("ack_batch_cap", 0, "from 1 up"),
])
def test_keywords_get_the_uri_forms_checks(keyword, value, needle):
    from amqstomp.jms import ConnectionFactory
    with pytest.raises(ConfigurationError, match=needle):
        ConnectionFactory("stomp://127.0.0.1:1", **{keyword: value})


def test_jms_options_are_in_the_one_options_table():
    from amqstomp.uri import CONNECTION_OPTIONS, options_table_markdown
    for name in JMS_OPTIONS:
        assert name in CONNECTION_OPTIONS and name in options_table_markdown()


def test_failover_options_by_keyword_need_a_failover_uri():
    from amqstomp._core.backoff import ReconnectPolicy
    factory = ConnectionFactory("failover:(stomp://a:61613)?maxReconnectDelay=500", max_reconnect_attempts=5,
                                reconnect_back_off_multiplier=3.0, back_off_multiplier=7.0)
    policy = ReconnectPolicy.from_uri(factory._resolved.uri)
    assert (policy.max_reconnect_attempts, policy.back_off_multiplier, policy.max_reconnect_delay_ms) == (5, 3.0, 500)
    assert factory.options["back_off_multiplier"] == 7.0  # the redelivery policy's, not the reconnect's
    with pytest.raises(ConfigurationError, match="needs a failover: URI"):
        ConnectionFactory("stomp://a:61613", max_reconnect_attempts=5)
    with pytest.raises(ConfigurationError, match="must be an int"):
        ConnectionFactory("failover:(stomp://a:61613)", max_reconnect_attempts="5")


# --------------------------------------------------------------------------- the producer window (no broker)


class _FakeLink:
    """What ProducerWindow uses of a Link: its transport's flush() and gone()."""

    def __init__(self) -> None:
        self.flushes = 0
        self.transport = self

    def flush(self) -> None:
        self.flushes += 1

    def gone(self) -> bool:
        return False

    def close_reason(self) -> str:
        return ""


@pytest.mark.timeout(20)
def test_producer_window_chunks_receipts_and_blocks_until_one_comes():
    import threading
    import time

    from amqstomp.exception import ReceiptTimeout
    from amqstomp.jms.link import ProducerWindow

    window, link = ProducerWindow(1000), _FakeLink()  # chunks of 250 bytes
    # sends without a receipt until a chunk fills; the one that fills it asks for one, for all of it
    assert [window.acquire(100, link, None, False) for _ in range(3)] == [0, 0, 300]
    assert (window.closed, window.chunks, window.unreceipted, window.in_flight) == (300, 1, 0, 300)
    assert [window.acquire(100, link, None, False) for _ in range(6)] == [0, 0, 300, 0, 0, 300]
    assert window.in_flight == 900 and window.chunks == 3
    # no room for 200 more: flush the socket first, then wait for a receipt (bounded)
    with pytest.raises(ReceiptTimeout, match="no room in the producer window"):
        window.acquire(200, link, time.monotonic() + 0.2, False)
    assert link.flushes == 1
    # a receipt from another thread frees the waiting sender
    got = []
    sender = threading.Thread(target=lambda: got.append(window.acquire(200, link, time.monotonic() + 10, False)))
    sender.start()
    time.sleep(0.2)
    assert not got
    window.release(300)
    sender.join(5)
    assert got == [0] and window.in_flight == 800
    # a send that failed gives its bytes back (and an unsent chunk reopens its other sends)
    window.unsent(200, 0)
    assert window.in_flight == 600
    chunk = window.acquire(300, link, None, False)
    assert chunk == 300 and window.chunks == 3
    window.unsent(300, chunk)
    assert (window.closed, window.chunks, window.unreceipted) == (600, 2, 0)
    # every_send (the consumer socket): each send asks for its own receipt
    assert window.acquire(10, link, None, True) == 10 and window.chunks == 3
    for chunk in (300, 300, 10):
        window.release(chunk)
    assert (window.in_flight, window.chunks) == (0, 0)
    assert window.drain(link, time.monotonic() + 1)
    # larger than the whole window: goes when nothing else awaits a receipt
    assert window.acquire(5000, link, None, False) == 5000
    with pytest.raises(ReceiptTimeout):
        window.acquire(1, link, time.monotonic() + 0.1, False)


@pytest.mark.timeout(20)
def test_producer_window_without_a_deadline_bounds_its_wait_by_timeout_s():
    """The send without failover passes no deadline (it reads no clock unless it waits):
    ``timeout_s`` then bounds the wait from when it starts; the common send is unaffected."""
    import time

    from amqstomp.exception import ReceiptTimeout
    from amqstomp.jms.link import ProducerWindow

    window, link = ProducerWindow(1000), _FakeLink()
    assert window.acquire(100, link, None, False, 0.2) == 0  # room: no wait, no clock
    assert [window.acquire(300, link, None, False, 0.2) for _ in range(3)] == [400, 300, 300]
    start = time.monotonic()
    with pytest.raises(ReceiptTimeout, match="no room in the producer window"):
        window.acquire(200, link, None, False, 0.2)
    assert 0.15 <= time.monotonic() - start < 5
    assert link.flushes == 1  # the deferred frames were written before it waited


def test_a_text_message_takes_str_or_none_and_refuses_other_types_by_name():
    assert TextMessage(None).text == "" and TextMessage().text == ""  # JMS allows a null text
    headers, body = send_headers(TextMessage(None), Queue("q"), PERSISTENT, 4, 0, dialect=ACTIVEMQ)
    assert body == b""

    class Name(str):
        pass

    assert TextMessage(Name("n")).text == "n"
    for bad, kind in ((b"bytes", "bytes"), (bytearray(b"x"), "bytearray"), (5, "int"), (["a"], "list")):
        with pytest.raises(TypeError, match=r"\btext\b.*\b%s\b" % kind):
            TextMessage(bad)
    with pytest.raises(TypeError, match="BytesMessage"):  # what to use instead
        TextMessage(b"bytes")


def test_a_bytes_message_takes_bytes_like_data_and_refuses_the_rest_by_name():
    import array

    from amqstomp.jms import BytesMessage

    assert BytesMessage().data == b"" and BytesMessage(bytearray(b"ab")).data == b"ab"
    assert BytesMessage(memoryview(b"cd")).data == b"cd" and BytesMessage(array.array("B", [1, 2])).data == b"\x01\x02"
    for bad, kind in (("text", "str"), (3, "int"), ([1, 2], "list"), (None, "NoneType")):
        # bytes(3) would have been three NUL bytes; bytes("x") a TypeError without a name
        with pytest.raises(TypeError, match=r"BytesMessage: data must be bytes-like, got %s" % kind):
            BytesMessage(bad)


def test_the_jms_invalid_destination_error_is_the_stomp_py_apis_too():
    import amqstomp.exception
    from amqstomp.jms.exceptions import InvalidDestinationError
    from amqstomp.uri import check_destination

    assert issubclass(InvalidDestinationError, amqstomp.exception.InvalidDestinationError)
    assert issubclass(InvalidDestinationError, ValueError)
    caught = []
    for fail in (lambda: Queue(""), lambda: check_destination("/queue/")):
        try:
            fail()
        except amqstomp.exception.InvalidDestinationError as exc:  # one clause catches both APIs' errors
            caught.append(type(exc))
    assert caught == [InvalidDestinationError, amqstomp.exception.InvalidDestinationError]


def test_an_unknown_option_points_at_the_options_command_which_lists_every_keyword():
    from amqstomp.jms.options import KNOWN_KEYWORDS
    from amqstomp.uri import options_table_markdown
    with pytest.raises(ConfigurationError, match="`amqstomp options` lists them all") as info:
        ConnectionFactory("stomp://localhost:61613", ca_cert="x")
    assert "README" not in str(info.value) and "ca_certs" in str(info.value)  # the hint
    table = options_table_markdown()
    assert [name for name in KNOWN_KEYWORDS if "`%s`" % name not in table] == []
