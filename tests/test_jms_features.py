"""The JMS-style API's remaining features of issue 4 against a real ActiveMQ: durable
subscribers and unsubscribe, queue browsers, MapMessage, scheduled delivery, and the
release-after-rollback option."""
import threading
import time
import uuid

import pytest
from conftest import wait_until

from amqstomp.exception import BrokerError, ConfigurationError
from amqstomp.jms import (
    AUTO_ACKNOWLEDGE,
    NON_PERSISTENT,
    PERSISTENT,
    BrowseTimeoutError,
    ConnectionFactory,
    IllegalStateError,
    InvalidDestinationError,
    MapMessage,
    MessageFormatError,
    Queue,
    TextMessage,
    Topic,
)
from amqstomp.testing import queue_statistics

pytestmark = pytest.mark.broker


def qname(prefix="feat"):
    return "%s.%s" % (prefix, uuid.uuid4().hex[:10])


def drain(consumer, timeout=0.5, limit=10_000):
    """Texts of the messages ``consumer`` gets until none comes for ``timeout`` s."""
    out = []
    for _ in range(limit):
        message = consumer.receive(timeout)
        if message is None:
            break
        out.append(message.text)
    return out


def _queue_size(broker, name):
    """The queue's size, or None while the broker's statistics do not list it yet (a loaded broker)."""
    try:
        return queue_statistics(broker, name)["size"]
    except LookupError:
        return None


def send_texts(session, destination, texts, delivery_mode=None):
    producer = session.create_producer(destination)
    for text in texts:
        if delivery_mode is None:
            producer.send(TextMessage(text))
        else:
            producer.send(TextMessage(text), delivery_mode=delivery_mode)
    producer.close()


# --------------------------------------------------------------------------- durable subscribers


@pytest.mark.timeout(90)
def test_durable_subscriber_gets_what_was_published_while_closed_until_unsubscribed(activemq_persistent):
    topic = Topic(qname("durable"))
    client_id = qname("client")
    factory = ConnectionFactory(activemq_persistent.url, client_id=client_id)
    publisher_factory = ConnectionFactory(activemq_persistent.url)
    with publisher_factory.create_connection() as publisher:
        pub = publisher.create_session()
        with factory.create_connection() as connection:
            session = connection.create_session()
            subscriber = session.create_durable_subscriber(topic, "orders-audit")
            assert subscriber.durable_name == "orders-audit"
            connection.start()
            send_texts(pub, topic, ["live-1"])
            assert drain(subscriber) == ["live-1"]
            subscriber.close()
            # the subscription outlives its consumer (and the connection)
            send_texts(pub, topic, ["away-%d" % i for i in range(5)])
        with factory.create_connection() as connection:
            session = connection.create_session()
            subscriber = session.create_durable_subscriber(topic, "orders-audit")
            connection.start()
            assert drain(subscriber) == ["away-%d" % i for i in range(5)]
            # JMS (and ActiveMQ) refuse to remove a subscription in use
            with pytest.raises(IllegalStateError, match="in use"):
                session.unsubscribe("orders-audit")
            with pytest.raises(IllegalStateError, match="open on this connection"):
                session.create_durable_subscriber(topic, "orders-audit")
            subscriber.close()
            session.unsubscribe("orders-audit")
            with pytest.raises(InvalidDestinationError, match="no durable subscription"):
                session.unsubscribe("orders-audit")
            send_texts(pub, topic, ["after-unsubscribe"])
            # a new subscription of the same name starts empty: nothing kept after unsubscribe
            subscriber = session.create_durable_subscriber(topic, "orders-audit")
            assert drain(subscriber, timeout=1.0) == []
            send_texts(pub, topic, ["fresh"])
            assert drain(subscriber) == ["fresh"]
            subscriber.close()
            session.unsubscribe("orders-audit")


@pytest.mark.timeout(60)
def test_durable_subscriber_refuses_bad_input(activemq):
    with ConnectionFactory(activemq.url).create_connection() as anonymous:
        session = anonymous.create_session()
        with pytest.raises(IllegalStateError, match="client id"):
            session.create_durable_subscriber(Topic(qname()), "name")
        with pytest.raises(IllegalStateError, match="client id"):
            session.unsubscribe("name")
    with ConnectionFactory(activemq.url, client_id=qname("client")).create_connection() as connection:
        session = connection.create_session()
        with pytest.raises(InvalidDestinationError, match="Topic"):
            session.create_durable_subscriber(Queue(qname()), "name")
        with pytest.raises(InvalidDestinationError, match="Topic"):
            session.create_durable_subscriber(session.create_temporary_topic(), "name")
        with pytest.raises(ValueError, match="non-empty str"):
            session.create_durable_subscriber(Topic(qname()), "")
        with pytest.raises(ValueError, match="non-empty str"):
            session.unsubscribe(None)


@pytest.mark.timeout(60)
def test_durable_subscriber_uses_the_durable_topic_prefetch(activemq):
    """The broker stops dispatching at the durable topic prefetch: with the connection
    stopped nothing is consumed, so the buffer holds exactly ``prefetch`` messages,
    while a plain topic subscriber (prefetch 32767) gets them all."""
    topic = Topic(qname("prefetch"))
    factory = ConnectionFactory(activemq.url + "?jms.prefetchPolicy.durableTopicPrefetch=7&jms.clientID="
                                + qname("client"))
    default_factory = ConnectionFactory(activemq.url, client_id=qname("client"))
    with factory.create_connection() as connection, default_factory.create_connection() as default:
        session = connection.create_session()
        durable = session.create_durable_subscriber(topic, "seven")
        plain = session.create_consumer(topic)
        default_durable = default.create_session().create_durable_subscriber(topic, "hundred")
        assert durable._sub.window.prefetch == 7
        assert default_durable._sub.window.prefetch == 100  # ActiveMQPrefetchPolicy's default
        send_texts(session, topic, ["m%d" % i for i in range(150)], delivery_mode=NON_PERSISTENT)
        assert wait_until(lambda: len(plain._buffer) == 150, 10)
        assert wait_until(lambda: len(default_durable._buffer) >= 100, 10)
        time.sleep(0.3)  # the broker would have sent more by now if it were going to
        assert len(durable._buffer) == 7
        assert len(default_durable._buffer) == 100
        connection.start()
        default.start()
        assert len(drain(durable)) == 150
        assert len(drain(default_durable)) == 150
        durable.close()
        default_durable.close()
        session.unsubscribe("seven")
        default.create_session().unsubscribe("hundred")


# --------------------------------------------------------------------------- queue browser


@pytest.mark.timeout(90)
def test_browser_sees_every_message_and_consumes_none(activemq):
    queue = Queue(qname("browse"))
    count = 300
    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session()
        send_texts(session, queue, ["m%d" % i for i in range(count)], delivery_mode=NON_PERSISTENT)
        assert wait_until(lambda: _queue_size(activemq, queue.name) == count, 10)
        with session.create_browser(queue) as browser:
            started = time.monotonic()
            seen = [message.text for message in browser]
            elapsed = time.monotonic() - started
            assert seen == ["m%d" % i for i in range(count)]
            # a second iteration is a new browse of the same messages
            assert [m.text for m in browser.get_enumeration()] == seen
        print("browsed %d messages in %.3f s" % (count, elapsed))
        assert queue_statistics(activemq, queue.name)["size"] == count
        selected = session.create_browser(Queue(queue.name), selector="JMSMessageID IS NOT NULL")
        assert len(list(selected)) == count
        selected.close()
        # and every message is still there for a consumer
        consumer = session.create_consumer(queue)
        connection.start()
        assert drain(consumer) == ["m%d" % i for i in range(count)]
        assert queue_statistics(activemq, queue.name)["size"] == 0


@pytest.mark.timeout(90)
def test_browser_shows_at_most_the_brokers_max_browse_page_size(activemq):
    """ActiveMQ's browse pages in at most the destination policy's maxBrowsePageSize
    (400 by default) messages: a longer queue is browsed up to there, then
    browser:end. Documented in docs/guides/jms.md ("Queue browsers")."""
    queue = Queue(qname("browse"))
    count = 600
    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session()
        send_texts(session, queue, ["m%d" % i for i in range(count)], delivery_mode=NON_PERSISTENT)
        assert wait_until(lambda: _queue_size(activemq, queue.name) == count, 10)
        with session.create_browser(queue, timeout=10) as browser:
            seen = [message.text for message in browser]
        assert seen == ["m%d" % i for i in range(400)]
        assert queue_statistics(activemq, queue.name)["size"] == count


@pytest.mark.timeout(60)
def test_browser_selector_empty_queue_close_and_bad_input(activemq):
    queue = Queue(qname("browse"))
    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session()
        assert list(session.create_browser(queue)) == []  # ends at browser:end at once
        producer = session.create_producer(queue)
        for i in range(10):
            message = TextMessage("m%d" % i)
            message.set_property("parity", "even" if i % 2 == 0 else "odd")
            producer.send(message)
        browser = session.create_browser(queue, selector="parity = 'odd'")
        assert [m.text for m in browser] == ["m1", "m3", "m5", "m7", "m9"]
        iterator = iter(browser)
        assert next(iterator).text == "m1"
        browser.close()
        with pytest.raises(IllegalStateError):
            next(iterator)
        with pytest.raises(IllegalStateError):
            list(browser)
        with pytest.raises(InvalidDestinationError, match="Queue"):
            session.create_browser(Topic(qname()))
        with pytest.raises(ValueError, match="timeout"):
            session.create_browser(queue, timeout=0)
        with pytest.raises(BrokerError):
            session.create_browser(queue, selector="this is not ( a selector")
        assert queue_statistics(activemq, queue.name)["size"] == 10
        # closing the session closes its browsers
        other = session.create_browser(queue)
        session.close()
        assert other.closed


@pytest.mark.timeout(60)
def test_browser_times_out_instead_of_hanging(activemq):
    queue = Queue(qname("browse"))
    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session()
        send_texts(session, queue, ["a", "b"])
        # a browse whose end marker never comes: swallow it on its way in (patched before
        # the SUBSCRIBE, or the marker may already be in)
        original = session._state.enqueue

        def drop_end(target, frame):
            if frame.headers.get("browser") != "end":
                original(target, frame)

        session._state.enqueue = drop_end
        browser = session.create_browser(queue, timeout=0.5)
        started = time.monotonic()
        got = []
        with pytest.raises(BrowseTimeoutError, match="within 0.5 s"):
            for message in browser:
                got.append(message.text)
        assert got == ["a", "b"]
        assert 0.4 < time.monotonic() - started < 5
        session._state.enqueue = original
        assert [m.text for m in browser] == ["a", "b"]  # the next browse works
        browser.close()


# --------------------------------------------------------------------------- MapMessage


@pytest.mark.timeout(60)
def test_map_message_round_trip_through_the_broker(activemq):
    queue = Queue(qname("map"))
    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session()
        message = session.create_map_message()
        message.set_int("int", -5)
        message.set_long("long", 2 ** 40)
        message.set_short("short", 300)
        message.set_byte("byte", -7)
        message.set_double("double", 1.25)
        message.set_float("float", 0.5)
        message.set_boolean("flag", True)
        message.set_string("text", "grüße <&> \"q\"")
        message.set_string("empty", "")
        message.set_char("char", "λ")
        message["inferred"] = 2 ** 31  # beyond an int: a long
        message["nothing"] = None
        message.set_property("kind", "map")
        session.create_producer(queue).send(message)
        text = TextMessage("plain")
        session.create_producer(queue).send(text)

        consumer = session.create_consumer(queue, map_messages=True)
        connection.start()
        received = consumer.receive(10)
        assert isinstance(received, MapMessage)
        assert received.to_dict() == {
            "int": -5, "long": 2 ** 40, "short": 300, "byte": -7, "double": 1.25, "float": 0.5, "flag": True,
            "text": "grüße <&> \"q\"", "empty": "", "char": "λ", "inferred": 2 ** 31, "nothing": None}
        # the broker kept the Java types
        assert [received.get_type(n) for n in ("int", "long", "short", "byte", "double", "float", "flag", "char",
                                                "inferred", "nothing")] == [
            "int", "long", "short", "byte", "double", "float", "boolean", "char", "long", "null"]
        assert received.get_long("int") == -5 and received.get_string("double") == "1.25"
        assert received.get_property("kind") == "map" and "transformation" not in received.properties
        with pytest.raises(MessageFormatError, match="'long'"):
            received.get_int("long")
        with pytest.raises(KeyError, match="missing"):
            received.get_int("missing")
        assert received.get_string("missing") is None
        # a text message on a map_messages consumer is still a text message
        plain = consumer.receive(10)
        assert plain.text == "plain" and "transformation" not in plain.properties


@pytest.mark.timeout(60)
def test_map_message_without_map_messages_and_bad_values(activemq):
    queue = Queue(qname("map"))
    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session()
        session.create_producer(queue).send(MapMessage({"a": 1}))
        consumer = session.create_consumer(queue)
        connection.start()
        received = consumer.receive(10)
        assert isinstance(received, MapMessage)
        with pytest.raises(MessageFormatError, match="map_messages=True"):
            received.get_int("a")
    # a map a map_messages=True consumer prefetched and gave back keeps that subscription's
    # transformation on the broker: a plain consumer still gets a MapMessage that says what to do
    queue2 = Queue(qname("map-back"))
    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session()
        producer = session.create_producer(queue2)
        producer.send(MapMessage({"qty": 1}))
        producer.send(MapMessage({"qty": 2}))
        mapper = session.create_consumer(queue2, map_messages=True)
        connection.start()
        assert mapper.receive(10).get_int("qty") == 1
        mapper.close()  # the second map was prefetched: back to the queue
        plain = session.create_consumer(queue2)
        again = plain.receive(10)
        assert isinstance(again, MapMessage)
        with pytest.raises(MessageFormatError, match="map_messages=True"):
            again.get_int("qty")
    message = MapMessage()
    for bad in ({}, [1], object(), 1j, b"bytes"):
        with pytest.raises(TypeError, match="'key'"):
            message.set_object("key", bad)
    with pytest.raises(TypeError, match="'key'"):
        message.set_int("key", "5")
    with pytest.raises(MessageFormatError, match="'key'"):
        message.set_int("key", 2 ** 31)
    with pytest.raises(MessageFormatError, match="'key'"):
        message["key"] = 2 ** 63
    with pytest.raises(MessageFormatError, match="'key'"):
        message.set_string("key", "a\x00b")
    with pytest.raises(MessageFormatError, match="non-empty str"):
        message.set_int("", 1)
    assert len(message) == 0


def test_map_message_parses_what_java_producers_send():
    """XStream renders a Java producer's map with types amqstomp does not send
    (byte[], others): byte[] is read as bytes, an unknown type as its text."""
    body = (b"<map>\n  <entry>\n    <string>raw</string>\n    <byte-array>AAH+/w==</byte-array>\n  </entry>\n"
            b"  <entry>\n    <string>when</string>\n    <sql-timestamp>2026-01-01 00:00:00.0</sql-timestamp>\n"
            b"  </entry>\n  <entry>\n    <string>big</string>\n    <double>1.0E20</double>\n  </entry>\n"
            b"  <entry>\n    <string>nan</string>\n    <float>NaN</float>\n  </entry>\n</map>")
    message = MapMessage.from_xml(body)
    assert message.get_bytes("raw") == b"\x00\x01\xfe\xff"
    assert message.get_string("when") == "2026-01-01 00:00:00.0"
    assert message.get_double("big") == 1e20
    assert message.get_string("nan") == "NaN"
    with pytest.raises(MessageFormatError, match="'raw'"):
        message.get_string("raw")
    with pytest.raises(MessageFormatError, match="DOCTYPE"):
        MapMessage.from_xml(b'<!DOCTYPE map [<!ENTITY x "y">]><map/>')
    with pytest.raises(MessageFormatError, match="not XML"):
        MapMessage.from_xml(b"<map><entry>")
    with pytest.raises(MessageFormatError, match="bad <int>"):
        MapMessage.from_xml(b"<map><entry><string>k</string><int>x</int></entry></map>")


# --------------------------------------------------------------------------- scheduled delivery


@pytest.fixture(scope="module")
def scheduler_broker(activemq_factory_module):
    """An ActiveMQ with its scheduler on, shared by this module's scheduling tests (own queues each)."""
    return activemq_factory_module(scheduler=True)


@pytest.mark.timeout(60)
def test_scheduled_delay_holds_the_message_back(scheduler_broker):
    broker = scheduler_broker
    queue = Queue(qname("scheduled"))
    delay_ms = 2000
    with ConnectionFactory(broker.url).create_connection() as connection:
        session = connection.create_session()
        consumer = session.create_consumer(queue)
        connection.start()
        later = TextMessage("later")
        later.schedule(delay_ms=delay_ms)
        assert later.properties == {"AMQ_SCHEDULED_DELAY": delay_ms}
        producer = session.create_producer(queue)
        sent = time.monotonic()
        producer.send(later)
        producer.send(TextMessage("now"))  # no delay: overtakes the scheduled one
        first = consumer.receive(5)
        assert first is not None and first.text == "now"
        assert consumer.receive(delay_ms / 1000.0 - 0.5) is None  # not before the delay
        second = consumer.receive(10)
        waited = time.monotonic() - sent
        assert second is not None and second.text == "later"
        assert delay_ms / 1000.0 <= waited + 0.05 < delay_ms / 1000.0 + 3
        # the property set by hand works the same way
        by_hand = TextMessage("by hand")
        by_hand.set_property("AMQ_SCHEDULED_DELAY", 1000)
        sent = time.monotonic()
        producer.send(by_hand)
        assert consumer.receive(0.6) is None
        got = consumer.receive(10)
        assert got is not None and got.text == "by hand" and time.monotonic() - sent >= 0.95


def test_schedule_refuses_bad_values():
    message = TextMessage("x")
    for kwargs in ({"delay_ms": -1}, {"delay_ms": 1.5}, {"delay_ms": True}, {"repeat": 2},
                   {"period_ms": "10"}, {"cron": ""}):
        with pytest.raises(ValueError):
            message.schedule(**kwargs)
    message.schedule(delay_ms=10, period_ms=100, repeat=3)
    assert message.properties == {"AMQ_SCHEDULED_DELAY": 10, "AMQ_SCHEDULED_PERIOD": 100,
                                  "AMQ_SCHEDULED_REPEAT": 3}
    message.schedule(cron="0 * * * *")
    assert message.properties == {"AMQ_SCHEDULED_CRON": "0 * * * *"}


# --------------------------------------------------------------------------- release after rollback


def _rolled_back_run(broker, release):
    """Consumer A (transacted) rolls back everything it gets; consumer B on another
    connection commits. Returns (texts B got, texts A got, whether B saw redelivered)."""
    queue = Queue(qname("release"))
    url = broker.url + "?jms.prefetchPolicy.queuePrefetch=1&jms.redeliveryPolicy.initialRedeliveryDelay=0" \
                       "&jms.redeliveryPolicy.redeliveryDelay=0&jms.redeliveryPolicy.maximumRedeliveries=-1"
    factory = ConnectionFactory(url, release_after_rollback=release)
    texts = ["m%d" % i for i in range(10)]
    a_got, b_got, b_redelivered = [], [], []
    lock = threading.Lock()
    with factory.create_connection() as a_connection, factory.create_connection() as b_connection:
        a_session = a_connection.create_session(transacted=True)
        a_consumer = a_session.create_consumer(queue)
        send_texts(a_connection.create_session(), queue, texts)
        a_connection.start()
        first = a_consumer.receive(5)  # A holds a message in its transaction before B exists
        assert first is not None
        a_got.append(first.text)
        b_session = b_connection.create_session(transacted=True)
        b_consumer = b_session.create_consumer(queue)

        def b_listener(message):
            with lock:
                b_got.append(message.text)
                b_redelivered.append(message.redelivered)
            b_session.commit()

        b_consumer.set_message_listener(b_listener)
        b_connection.start()
        a_session.rollback()
        deadline = time.monotonic() + (20 if release else 4)  # without release B never gets them all
        while time.monotonic() < deadline:
            with lock:
                if sorted(set(b_got)) == texts:
                    break
            message = a_consumer.receive(0.2)
            if message is not None:
                a_got.append(message.text)
                a_session.rollback()
        b_consumer.set_message_listener(None)
    return b_got, a_got, b_redelivered, texts


@pytest.mark.timeout(90)
def test_release_after_rollback_hands_rolled_back_messages_to_another_consumer(activemq):
    b_got, a_got, b_redelivered, texts = _rolled_back_run(activemq, release=True)
    assert sorted(b_got) == texts  # every message reached B, each once (B commits)
    assert a_got[0] in b_got  # including the one A rolled back first
    print("A rolled back %d deliveries; B got %d, %d marked redelivered"
          % (len(a_got), len(b_got), sum(b_redelivered)))
    assert b_redelivered[b_got.index(a_got[0])]  # the broker marks what A released


@pytest.mark.timeout(90)
def test_without_release_rolled_back_messages_stay_with_their_consumer(activemq):
    b_got, a_got, b_redelivered, texts = _rolled_back_run(activemq, release=False)
    assert a_got[0] not in b_got  # local redelivery: A keeps it (until poisoned)
    assert a_got.count(a_got[0]) > 1
    assert sorted(set(b_got)) != texts


def test_release_after_rollback_is_a_documented_option():
    from amqstomp.uri import CONNECTION_OPTIONS, options_table_markdown

    assert CONNECTION_OPTIONS["amqstomp.releaseAfterRollback"].keyword == "release_after_rollback"
    assert "amqstomp.releaseAfterRollback" in options_table_markdown()
    with pytest.raises(ConfigurationError, match="release_after_rollback"):
        ConnectionFactory("stomp://127.0.0.1:61613", release_after_rollback="yes")
    assert ConnectionFactory("stomp://127.0.0.1:61613?amqstomp.releaseAfterRollback=true") \
        .options["release_after_rollback"] is True


# --------------------------------------------------------------------------- scheduling values ActiveMQ refuses


_BAD_SCHEDULED = [
    ("AMQ_SCHEDULED_DELAY", 2 ** 70), ("AMQ_SCHEDULED_DELAY", 2 ** 63), ("AMQ_SCHEDULED_DELAY", -1),
    # now + delay overflows the broker's Java long: "Illegal execution time"
    ("AMQ_SCHEDULED_DELAY", 2 ** 63 - 1), ("AMQ_SCHEDULED_DELAY", str(2 ** 63 - 1 - int(time.time() * 1000))),
    ("AMQ_SCHEDULED_DELAY", "abc"), ("AMQ_SCHEDULED_DELAY", "-1"), ("AMQ_SCHEDULED_DELAY", 1.5),
    ("AMQ_SCHEDULED_DELAY", " 5"), ("AMQ_SCHEDULED_DELAY", "1_000"), ("AMQ_SCHEDULED_DELAY", True),
    ("AMQ_SCHEDULED_PERIOD", -5), ("AMQ_SCHEDULED_PERIOD", "5.0"),
    ("AMQ_SCHEDULED_REPEAT", 2 ** 31), ("AMQ_SCHEDULED_REPEAT", -1), ("AMQ_SCHEDULED_REPEAT", "x"),
    ("AMQ_SCHEDULED_CRON", "not a cron"), ("AMQ_SCHEDULED_CRON", "* * * *"), ("AMQ_SCHEDULED_CRON", "* * * * * *"),
    ("AMQ_SCHEDULED_CRON", "60 * * * *"), ("AMQ_SCHEDULED_CRON", "* 24 * * *"), ("AMQ_SCHEDULED_CRON", "* * 0 * *"),
    ("AMQ_SCHEDULED_CRON", "* * * 13 *"), ("AMQ_SCHEDULED_CRON", "* * * * 7"), ("AMQ_SCHEDULED_CRON", "* * * JAN *"),
    ("AMQ_SCHEDULED_CRON", "0 0 ? * MON"), ("AMQ_SCHEDULED_CRON", "5/10 * * * *"), ("AMQ_SCHEDULED_CRON", "*/0 * * * *"),
    ("AMQ_SCHEDULED_CRON", "1-2-3 * * * *"), ("AMQ_SCHEDULED_CRON", "-5 * * * *"), ("AMQ_SCHEDULED_CRON", "5-1 * * * *"),
    ("AMQ_SCHEDULED_CRON", "0-99999999999 * * * *"), ("AMQ_SCHEDULED_CRON", "1,,2 * * * *"),
    ("AMQ_SCHEDULED_CRON", "   "), ("AMQ_SCHEDULED_CRON", 5),
]


# the largest delay the check takes (with a day to spare): 2**63 - 1 less now and 100 years
_FAR_DELAY_MS = 2 ** 63 - 1 - int(time.time() * 1000) - 101 * 365 * 24 * 3600 * 1000


@pytest.mark.parametrize("name,value", _BAD_SCHEDULED)
def test_scheduling_properties_refuse_what_activemq_cannot_parse(name, value):
    message = TextMessage("x")
    with pytest.raises(MessageFormatError) as caught:
        message.set_property(name, value)
    assert name in str(caught.value) and repr(value) in str(caught.value)
    assert name not in message.properties
    # a value put into the dict by hand is refused when sent
    from amqstomp.jms.message import send_headers

    message.properties[name] = value
    with pytest.raises(MessageFormatError, match=name):
        send_headers(message, Queue("q"), 2, 4, 0, "activemq")


def test_schedule_refuses_values_out_of_java_range_and_bad_cron():
    message = TextMessage("x")
    message.schedule(delay_ms=10)
    for kwargs in ({"delay_ms": 2 ** 70}, {"period_ms": 2 ** 63}, {"repeat": 2 ** 31, "period_ms": 1},
                   {"cron": "not a cron"}, {"cron": "61 * * * *"}, {"cron": "* * * * MON"}):
        with pytest.raises(ValueError) as caught:
            message.schedule(**kwargs)
        value = next(iter(kwargs.values()))
        assert repr(value) in str(caught.value) and "AMQ_SCHEDULED_" in str(caught.value)
        assert message.properties == {"AMQ_SCHEDULED_DELAY": 10}  # unchanged
    message.schedule(delay_ms=_FAR_DELAY_MS, period_ms=2 ** 63 - 1, repeat=2 ** 31 - 1)
    for cron in ("* * * * *", "*/15 0-23 1,15 * 1-5", "0-30/10 9 * 1-12 0", "0\t12  31 12 6", "59 23 31 12 0-6"):
        message.schedule(cron=cron)
        assert message.properties == {"AMQ_SCHEDULED_CRON": cron}
    for value in (0, "+5", "007", 2 ** 63 - 1, str(2 ** 63 - 1)):
        message.set_property("AMQ_SCHEDULED_PERIOD", value)


@pytest.mark.timeout(60)
def test_accepted_scheduling_values_keep_the_connection(scheduler_broker):
    """What the checks let through, ActiveMQ's scheduler takes without closing the
    socket; what they refuse never reaches it."""
    broker = scheduler_broker
    queue = Queue(qname("sched-values"))
    errors = []
    with ConnectionFactory(broker.url).create_connection() as connection:
        connection.set_exception_listener(errors.append)
        session = connection.create_session()
        consumer = session.create_consumer(queue)
        connection.start()
        producer = session.create_producer(queue)
        for cron in ("*/15 0-23 1,15 * 1-5", "0-30/10 9 * 1-12 0", "0\t12  31 12 6", "59 23 31 12 0-6"):
            message = TextMessage("cron")
            message.schedule(cron=cron)
            producer.send(message)  # persistent: waits for the RECEIPT
        far = TextMessage("far")
        far.set_property("AMQ_SCHEDULED_DELAY", "+3600000")
        far.set_property("AMQ_SCHEDULED_REPEAT", "0")
        producer.send(far)
        farthest = TextMessage("farthest")
        farthest.schedule(delay_ms=_FAR_DELAY_MS)
        producer.send(farthest)
        for name, value in _BAD_SCHEDULED:
            with pytest.raises(MessageFormatError):
                bad = TextMessage("bad")
                bad.set_property(name, value)
                producer.send(bad)
        soon = TextMessage("soon")
        soon.set_property("AMQ_SCHEDULED_DELAY", "007")
        producer.send(soon)
        producer.send(TextMessage("plain"))
        got = sorted(m.text for m in (consumer.receive(10), consumer.receive(10)) if m is not None)
        assert got == ["plain", "soon"]
        assert errors == [] and not connection.is_closed and connection.failure is None


# --------------------------------------------------------------------------- release after rollback + failover


@pytest.mark.timeout(240)
def test_release_after_rollback_survives_a_failover_during_the_rollback(activemq, tcp_proxy_factory):
    """A socket cut while rollback() re-subscribes (UNSUBSCRIBE / SUBSCRIBE in
    flight): the consumer must end up subscribed on the new socket and get every
    message, or at least not stay open and silent."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = ("failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100"
           "&amqstomp.releaseAfterRollback=true" % proxy.address)
    queue = Queue(qname("release-fo"))
    count = 50
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        send_texts(feeder.create_session(), queue, ["m%d" % i for i in range(count)])
    committed = set()
    cuts = 0
    errors = []
    with ConnectionFactory(url, heartbeats=(1000, 1000)).create_connection(timeout_s=15) as connection:
        connection.set_exception_listener(errors.append)
        session = connection.create_session(transacted=True)
        consumer = session.create_consumer(queue)
        connection.start()
        deadline = time.monotonic() + 150
        turn = 0
        while len(committed) < count and time.monotonic() < deadline:
            message = consumer.receive(10)
            assert message is not None, (
                "consumer stalled: %d of %d committed after %d cuts; closed=%s, broker consumers=%s, errors=%r"
                % (len(committed), count, cuts, consumer.closed,
                   queue_statistics(activemq, queue.name)["consumerCount"], errors[-3:]))
            turn += 1
            if turn % 2:
                cutter = threading.Timer(0.002, proxy.cut)
                cutter.start()
                session.rollback()
                cutter.join(5)
                cuts += 1
            else:
                try:
                    session.commit()
                    committed.add(message.text)
                except Exception:  # the transaction was lost with a socket: it comes again
                    pass
        assert committed == {"m%d" % i for i in range(count)}
        assert not consumer.closed and connection.failure is None
        assert wait_until(lambda: queue_statistics(activemq, queue.name)["consumerCount"] == 1, 10)
    assert cuts >= 20


# --------------------------------------------------------------------------- queue browser + failover


@pytest.mark.timeout(120)
def test_a_browse_interrupted_by_a_failover_raises_and_the_next_browse_is_whole(activemq, tcp_proxy_factory):
    """A browse is a snapshot: a failover in the middle must not yield the queue
    again from its head in the same iteration (duplicates); it raises, and a new
    iteration on the new socket shows every message once."""
    from amqstomp.jms import BrowseInterruptedError

    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = ("failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=100"
           "&jms.prefetchPolicy.queueBrowserPrefetch=10" % proxy.address)
    queue = Queue(qname("browse-fo"))
    count = 300
    # ~1.3 KB frames: the proxy lets 100 KB of the browse through (more than 50 messages,
    # far fewer than 300) and then holds the rest, so the cut at message 50 lands in the
    # middle of the browse however fast ActiveMQ sends it and however loaded the machine is
    texts = ["m%03d" % i + "." * 1000 for i in range(count)]
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        send_texts(feeder.create_session(), queue, texts)
    with ConnectionFactory(url, heartbeats=(1000, 1000)).create_connection(timeout_s=15) as connection:
        errors = []
        connection.set_exception_listener(errors.append)
        session = connection.create_session()
        proxy.stall_after(to_client=100_000)
        with session.create_browser(queue, timeout=20) as browser:
            seen = []
            with pytest.raises(BrowseInterruptedError, match="iterate again"):
                for message in browser:
                    seen.append(message.text)
                    if len(seen) == 50:
                        assert proxy.cut() >= 1
                        proxy.unstall()
            assert len(seen) == len(set(seen)), "duplicates within one browse"
            assert seen == texts[:len(seen)] and 50 <= len(seen) < count
            # the browse was not replayed on the new socket
            assert not any(c._browser for c in connection._state.consumers().values())
            again = [m.text for m in browser]
            assert again == texts
        assert queue_statistics(activemq, queue.name)["size"] == count  # browsing consumed nothing
        assert connection.failure is None and errors == []
        consumer = session.create_consumer(queue)
        connection.start()
        assert drain(consumer, timeout=2) == texts


@pytest.mark.timeout(120)
def test_a_browse_started_while_the_socket_is_down_browses_once_it_is_back(activemq, tcp_proxy_factory):
    """A browser made during an outage has sent nothing yet: when the new socket
    comes it browses there (the reconnect does not drop it as interrupted)."""
    from amqstomp.jms import BrowseInterruptedError

    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=50&maxReconnectDelay=200" % proxy.address
    queue = Queue(qname("browse-down"))
    texts = ["d%02d" % i for i in range(20)]
    with ConnectionFactory(activemq.url).create_connection() as feeder:
        send_texts(feeder.create_session(), queue, texts)
    with ConnectionFactory(url, heartbeats=(500, 500)).create_connection(timeout_s=15) as connection:
        errors = []
        connection.set_exception_listener(errors.append)
        session = connection.create_session()
        consumer_link = connection._state.consumer_link
        proxy.refuse(True, mode="closed")
        assert proxy.cut() >= 1
        assert wait_until(lambda: not consumer_link.transport.is_connected(), 10)
        result = {}

        def browse():
            try:
                with session.create_browser(queue, timeout=20) as browser:
                    result["texts"] = [m.text for m in browser]
            except BrowseInterruptedError as exc:  # the bug: raised though nothing had been browsed
                result["error"] = exc

        browsing = threading.Thread(target=browse)
        browsing.start()
        time.sleep(1.0)  # create_browser waits for the socket
        assert browsing.is_alive()
        proxy.refuse(False)
        browsing.join(30)
        assert not browsing.is_alive()
        assert result == {"texts": texts}
        assert connection.failure is None and errors == []


# --------------------------------------------------------------------------- the producer's frame head


@pytest.mark.timeout(60)
def test_a_producer_without_destination_alternating_heads_sends_each_to_its_own(activemq):
    """The producer encodes destination/persistent/priority once and reuses them
    while they repeat: sends that alternate destinations, modes and priorities
    (and an IntEnum priority) each carry their own, synchronous and not."""
    import enum

    class Level(enum.IntEnum):
        HIGH = 8

    a, b = Queue(qname("head-a")), Queue(qname("head-b"))
    plan = [(a, NON_PERSISTENT, 4), (a, NON_PERSISTENT, 4), (b, PERSISTENT, 7), (a, PERSISTENT, 4),
            (b, NON_PERSISTENT, Level.HIGH), (b, NON_PERSISTENT, 0), (a, NON_PERSISTENT, 9)]
    with ConnectionFactory(activemq.url).create_connection() as connection:
        session = connection.create_session()
        producer = session.create_producer(None)
        for i, (dest, mode, priority) in enumerate(plan):
            message = TextMessage("m%d" % i)
            producer.send(message, delivery_mode=mode, priority=priority, destination=dest)
            assert (message.destination, message.delivery_mode, message.priority) == (dest, mode, int(priority))
            assert type(message.priority) is int
        with pytest.raises(MessageFormatError, match="priority must be an int 0-9, got True"):
            producer.send(TextMessage("bad"), priority=True, destination=a)
        with pytest.raises(MessageFormatError, match="delivery_mode must be"):
            producer.send(TextMessage("bad"), delivery_mode=3, destination=a)
        connection.start()
        got = {}
        for dest in (a, b):
            consumer = session.create_consumer(dest)
            for _ in range(10):
                message = consumer.receive(2.0 if len(got) < len(plan) else 0.3)
                if message is None:
                    break
                got[message.text] = (message.destination, message.delivery_mode, message.priority)
    assert got == {"m%d" % i: (dest, mode, int(priority)) for i, (dest, mode, priority) in enumerate(plan)}
