"""The broker-neutral integration suite: every test runs on ActiveMQ Classic AND on
RabbitMQ's STOMP plugin (the ``stomp_broker`` fixture of amqstomp.testing.pytest_plugin,
parametrised over both), through both APIs (stomp.py-style and JMS-style). What only
ActiveMQ can do is marked ``activemq_only`` with the reason; what RabbitMQ cannot do is
checked to be refused up front, naming the broker. The broker reasons (wrong password,
wrong virtual host, invalid destination) must reach the exception within 1 s.

Queues are named ``amqstomp-bt-*``; RabbitMQ keeps a ``/queue/x`` queue after its last
consumer, so the module deletes its own there at the end.
"""
import logging
import re
import threading
import time
import uuid

import pytest
from conftest import Collector, SessionQueues, connect12, wait_until

import amqstomp
from amqstomp.exception import (
    BrokerError,
    ConfigurationError,
    ConnectFailedException,
    ConnectionClosedException,
    ConnectRefusedError,
    StompException,
)
from amqstomp.flow import RedeliveryPolicy
from amqstomp.jms import (
    AUTO_ACKNOWLEDGE,
    CLIENT_ACKNOWLEDGE,
    DUPS_OK_ACKNOWLEDGE,
    INDIVIDUAL_ACKNOWLEDGE,
    BytesMessage,
    ConnectionFactory,
    MapMessage,
    MessageFormatError,
    Queue,
    TextMessage,
    Topic,
)
from amqstomp.testing import ActiveMQBroker

pytestmark = pytest.mark.timeout(120)

QUEUES = SessionQueues("bt")
#: what the broker-reason tests allow between the refused call and its exception (s)
REASON_WITHIN_S = 1.0


@pytest.fixture(scope="module", autouse=True)
def _delete_rabbitmq_queues():
    yield
    QUEUES.clean_up()


def qname(broker, kind="queue"):
    return "/%s/%s" % (kind, QUEUES.name(broker))


#: the connections stomp12() made in the running test: disconnected when it ends, also when it
#: failed half-way (their threads would fail the thread checks of the tests after it)
_MADE = []


@pytest.fixture(autouse=True)
def _disconnect_what_the_test_made():
    yield
    while _MADE:
        _MADE.pop().disconnect()


def stomp12(target, listener=None, **kwargs):
    return connect12(target, _MADE, listener, **kwargs)


def jms(broker, query="", **options):
    return ConnectionFactory(broker.url + query, **options).create_connection(broker.username, broker.password)


class Sent:
    """on_send: the frames a connection wrote."""

    def __init__(self):
        self.frames = []

    def on_send(self, frame):
        self.frames.append((frame.cmd, dict(frame.headers)))

    def first(self, cmd):
        return next(headers for command, headers in self.frames if command == cmd)


# ------------------------------------------------------------------ stomp.py-style API


def test_send_receive_with_receipts_and_the_default_vhost(stomp_broker):
    """Connection12 without a vhost: CONNECT says host:/ (RabbitMQ's default vhost; the
    broker host name, stomp.py's 1.2 default, is refused by RabbitMQ)."""
    sent, col = Sent(), Collector()
    conn = amqstomp.Connection12(stomp_broker.host_and_ports)
    conn.set_listener("sent", sent)
    conn.set_listener("col", col)
    conn.connect(stomp_broker.username, stomp_broker.password, wait=True, timeout=15)
    try:
        assert sent.first("STOMP")["host"] == "/"
        assert conn.transport.dialect == stomp_broker.name
        q = qname(stomp_broker)
        conn.subscribe(q, id="1", ack="auto", receipt="sub")
        conn.wait_for_receipt("sub", 10)
        for i in range(3):
            conn.send(q, "m%d" % i, receipt="r%d" % i)
            conn.wait_for_receipt("r%d" % i, 10)
        assert [m.body for m in col.wait_messages(3, 10)] == ["m0", "m1", "m2"]
    finally:
        conn.disconnect()


@pytest.mark.parametrize("ack", ["auto", "client", "client-individual"])
def test_ack_modes(stomp_broker, ack):
    q = qname(stomp_broker)
    producer = stomp12(stomp_broker)
    for i in range(10):
        producer.send(q, "m%d" % i, receipt="r%d" % i)
    producer.wait_for_receipt("r9", 10)
    col = Collector()
    conn = stomp12(stomp_broker, col)
    conn.subscribe(q, id="1", ack=ack)
    messages = col.wait_messages(10, 15)
    assert len(messages) == 10
    if ack == "client":
        conn.ack(messages[-1].headers["ack"], receipt="acked")  # cumulative on both brokers
        conn.wait_for_receipt("acked", 10)
    elif ack == "client-individual":
        for i, m in enumerate(messages):
            conn.ack(m.headers["ack"], receipt="a%d" % i)
        conn.wait_for_receipt("a9", 10)
    conn.disconnect()
    again = Collector()
    conn = stomp12(stomp_broker, again)
    conn.subscribe(q, id="2", ack="client-individual")
    time.sleep(1.0)
    assert again.messages == [], "acknowledged messages came back"
    # and one not acknowledged does come back (the check above can fail)
    producer.send(q, "unacked", receipt="u")
    producer.wait_for_receipt("u", 10)
    assert [m.body for m in again.wait_messages(1, 10)] == ["unacked"]
    conn.disconnect()
    back = Collector()
    conn = stomp12(stomp_broker, back)
    conn.subscribe(q, id="3", ack="auto")
    assert [m.body for m in back.wait_messages(1, 10)] == ["unacked"]
    assert back.messages[0].headers.get("redelivered") == "true"
    conn.disconnect()
    producer.disconnect()


def test_optimized_acks_with_the_brokers_prefetch_header(stomp_broker):
    q = qname(stomp_broker)
    producer = stomp12(stomp_broker)
    for i in range(300):
        producer.send(q, "m%d" % i)
    producer.send(q, "last", receipt="last")
    producer.wait_for_receipt("last", 20)
    sent, col = Sent(), Collector()
    conn = stomp12(stomp_broker, col)
    conn.set_listener("sent", sent)
    conn.subscribe(q, id="1", ack="client", optimize_acknowledge=True, prefetch_size=50)
    header = {"activemq": "activemq.prefetchSize", "rabbitmq": "prefetch-count"}[stomp_broker.name]
    assert sent.first("SUBSCRIBE")[header] == "50"
    assert len(col.wait_messages(301, 30)) == 301
    acks = [h for cmd, h in sent.frames if cmd == "ACK"]
    assert 0 < len(acks) < 301 / 5  # batched
    conn.disconnect()
    again = Collector()
    conn = stomp12(stomp_broker, again)
    conn.subscribe(q, id="2", ack="auto")
    time.sleep(1.0)
    assert again.messages == []
    conn.disconnect()
    producer.disconnect()


def test_the_other_brokers_prefetch_header_is_only_a_header(stomp_broker):
    """Only the header this broker reads sizes the local window (and is checked for 0): the other
    broker's is passed through as an ordinary header (ActiveMQ ignores prefetch-count, RabbitMQ
    activemq.prefetchSize), so messages flow at the broker's own prefetch."""
    other = {"activemq": "prefetch-count", "rabbitmq": "activemq.prefetchSize"}[stomp_broker.name]
    q = qname(stomp_broker)
    producer = stomp12(stomp_broker)
    for i in range(5):
        producer.send(q, "m%d" % i)
    producer.send(q, "last", receipt="last")
    producer.wait_for_receipt("last", 20)
    col = Collector()
    conn = stomp12(stomp_broker, col)
    try:
        conn.subscribe(q, id="1", ack="auto", headers={other: "0"})
        assert len(col.wait_messages(6, 20)) == 6
    finally:
        conn.disconnect()
        producer.disconnect()


def test_prefetch_zero_is_refused_naming_the_broker(stomp_broker):
    conn = stomp12(stomp_broker)
    try:
        with pytest.raises(ConfigurationError, match={"activemq": "ActiveMQ Classic",
                                                      "rabbitmq": "RabbitMQ"}[stomp_broker.name]):
            conn.subscribe(qname(stomp_broker), id="1", ack="client", prefetch_size=0)
    finally:
        conn.disconnect()


def test_transactions(stomp_broker):
    q = qname(stomp_broker)
    col = Collector()
    conn = stomp12(stomp_broker, col)
    try:
        conn.subscribe(q, id="1", ack="auto", receipt="s")
        conn.wait_for_receipt("s", 10)
        tx = conn.begin()
        conn.send(q, "aborted", transaction=tx)
        conn.abort(tx)
        tx = conn.begin()
        conn.send(q, "committed", transaction=tx)
        time.sleep(0.3)
        assert col.messages == []  # not before the commit
        conn.commit(tx)
        assert [m.body for m in col.wait_messages(1, 10)] == ["committed"]
        time.sleep(0.5)
        assert len(col.messages) == 1
    finally:
        conn.disconnect()


def test_heartbeats(stomp_broker):
    col = Collector()
    conn = stomp12(stomp_broker, col, heartbeats=(500, 500))
    try:
        send_ms, recv_ms = conn.transport.heartbeats
        assert send_ms > 0 and recv_ms > 0
        time.sleep(3 * max(send_ms, recv_ms) / 1000.0)
        assert conn.is_connected() and "heartbeat_timeout" not in col.events
        assert col.heartbeats > 0  # the broker's
    finally:
        conn.disconnect()


def test_failover_through_a_proxy(stomp_broker, tcp_proxy_factory):
    proxy = tcp_proxy_factory(stomp_broker.host_and_ports[0])
    col = Collector()
    conn = amqstomp.Connection12([proxy.address], auto_reconnect=True, reconnect_attempts_max=-1,
                                 reconnect_sleep_initial=0.05, heartbeats=(1000, 1000), timeout=20)
    conn.set_listener("col", col)
    conn.connect(stomp_broker.username, stomp_broker.password, wait=True, timeout=15)
    q = qname(stomp_broker)
    try:
        conn.subscribe(q, id="1", ack="client-individual", receipt="s")
        conn.wait_for_receipt("s", 10)
        conn.send(q, "before", receipt="b")
        conn.wait_for_receipt("b", 10)
        first = col.wait_messages(1, 10)[0]
        conn.ack(first.headers["ack"])
        proxy.cut()
        assert wait_until(lambda: conn.is_connected() and conn.reconnector.failovers >= 1, 20)
        conn.send(q, "after", receipt="a")  # the subscription was replayed on the new socket
        conn.wait_for_receipt("a", 10)
        assert wait_until(lambda: [m.body for m in col.messages][-1:] == ["after"], 10), col.messages
    finally:
        conn.disconnect()


def test_a_poisoned_message_is_not_requeued(stomp_broker):
    """The client's own NACK of a message whose listener kept failing: ActiveMQ moves it
    to the DLQ; RabbitMQ would put it straight back on the queue without requeue:false."""
    q = qname(stomp_broker)
    attempts = []

    class Failing(amqstomp.ConnectionListener):
        def on_message(self, frame):
            attempts.append(frame.body)
            raise RuntimeError("poison")

    sent = Sent()
    conn = stomp12(stomp_broker, Failing())
    conn.set_listener("sent", sent)
    conn.subscribe(q, id="1", ack="client", optimize_acknowledge=True,
                   redelivery_policy=RedeliveryPolicy(maximum_redeliveries=1, initial_redelivery_delay_ms=10,
                                                      redelivery_delay_ms=10))
    conn.send(q, "bad", receipt="r")
    conn.wait_for_receipt("r", 10)
    assert wait_until(lambda: any(cmd == "NACK" for cmd, _ in sent.frames), 10)
    nack = sent.first("NACK")
    assert nack.get("requeue") == ("false" if stomp_broker.name == "rabbitmq" else None)
    time.sleep(0.3)
    conn.disconnect()
    col = Collector()
    fresh = stomp12(stomp_broker, col)
    fresh.subscribe(q, id="2", ack="auto")
    time.sleep(1.5)
    assert col.messages == [], "the poisoned message came back"
    fresh.disconnect()
    assert len(attempts) == 2


def test_x_queue_arguments_pass_through(stomp_broker):
    """``x-*`` destination options are SUBSCRIBE headers (RabbitMQ's queue arguments:
    x-max-length keeps the newest 2; ActiveMQ ignores the header)."""
    q = qname(stomp_broker)
    sent = Sent()
    conn = stomp12(stomp_broker)
    conn.set_listener("sent", sent)
    conn.subscribe(q + "?x-max-length=2", id="1", ack="client", receipt="s")
    conn.wait_for_receipt("s", 10)
    assert sent.first("SUBSCRIBE")["x-max-length"] == "2"
    assert sent.first("SUBSCRIBE")["destination"] == q
    conn.unsubscribe("1")
    for i in range(5):
        conn.send(q, "m%d" % i, receipt="r%d" % i)
    conn.wait_for_receipt("r4", 10)
    col = Collector()
    conn.set_listener("col", col)
    conn.subscribe(q, id="2", ack="auto")
    expected = ["m3", "m4"] if stomp_broker.name == "rabbitmq" else ["m%d" % i for i in range(5)]
    assert [m.body for m in col.wait_messages(len(expected), 10)] == expected
    time.sleep(0.5)
    assert len(col.messages) == len(expected)
    conn.disconnect()


# ------------------------------------------------------------------ JMS-style API


def test_jms_request_reply_over_a_temporary_queue_as_the_readme_writes_it(stomp_broker):
    """The request/reply of docs/guides/jms.md's tour, line for line (broker URL and login aside).
    On RabbitMQ the temporary queue exists only as a reply-to: no SUBSCRIBE, the replies
    come on the connection's own subscription of that name."""
    factory = ConnectionFactory(stomp_broker.url + "?heartBeat=1000,1000&jms.prefetchPolicy.all=50")
    requests = Queue(qname(stomp_broker))  # the tour's Queue("requests"), a fresh one
    got = []
    with factory.create_connection(stomp_broker.username, stomp_broker.password) as connection:
        connection.set_exception_listener(print)           # connection lost, async ERRORs

        # request/reply over a temporary queue
        server = connection.create_session()
        replier = server.create_producer(None)

        def serve(request):
            reply = TextMessage("re: " + request.text)
            reply.correlation_id = request.correlation_id
            replier.send(reply, destination=request.reply_to)
        server.create_consumer(requests).set_message_listener(serve)

        client = connection.create_session(False, AUTO_ACKNOWLEDGE)
        replies = client.create_temporary_queue()
        reply_consumer = client.create_consumer(replies)
        connection.start()                                  # delivery starts here, as in JMS
        request = TextMessage("what time is it?")
        request.reply_to, request.correlation_id = replies, "42"
        client.create_producer(requests).send(request)      # persistent: waits for the RECEIPT
        reply = reply_consumer.receive(10)
        got.append(reply)
    assert got[0] is not None and got[0].text == "re: what time is it?"
    assert got[0].correlation_id == "42" and got[0].destination == replies


def test_jms_text_bytes_and_map_messages(stomp_broker):
    q = Queue(qname(stomp_broker))
    with jms(stomp_broker) as connection:
        session = connection.create_session()
        consumer = session.create_consumer(q, map_messages=stomp_broker.is_activemq)
        producer = session.create_producer(q)
        connection.start()
        producer.send(TextMessage("héllo"))
        producer.send(TextMessage("a\x00b"))  # needs content-length: amq-msg-type / content-type say text
        producer.send(BytesMessage(b"\x00\x01"))
        text, nul, data = (consumer.receive(10) for _ in range(3))
        assert isinstance(text, TextMessage) and text.text == "héllo"
        assert text.headers["content-type"].startswith("text/plain")
        assert "content-type" not in text.properties
        assert isinstance(nul, TextMessage) and nul.text == "a\x00b"
        assert isinstance(data, BytesMessage) and data.data == b"\x00\x01"
        entries = MapMessage()
        entries.set_int("n", 7)
        if stomp_broker.is_activemq:
            producer.send(entries)
            got = consumer.receive(10)
            assert isinstance(got, MapMessage) and got.get_int("n") == 7
        else:
            with pytest.raises(MessageFormatError, match="RabbitMQ"):
                producer.send(entries)


@pytest.mark.parametrize("mode", [AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE, INDIVIDUAL_ACKNOWLEDGE,
                                  DUPS_OK_ACKNOWLEDGE, "transacted"])
def test_jms_acknowledge_modes(stomp_broker, mode):
    q = Queue(qname(stomp_broker))
    with jms(stomp_broker, "?jms.prefetchPolicy.all=50") as connection:  # CLIENT: 30 unacked fit
        sender = connection.create_session().create_producer(q)
        for i in range(30):
            sender.send(TextMessage("m%d" % i))
        session = (connection.create_session(transacted=True) if mode == "transacted"
                   else connection.create_session(False, mode))
        consumer = session.create_consumer(q)
        connection.start()
        received = [consumer.receive(10) for _ in range(30)]
        assert [m.text for m in received] == ["m%d" % i for i in range(30)]
        if mode == "transacted":
            session.commit()
        elif mode == CLIENT_ACKNOWLEDGE:
            received[-1].acknowledge()
        elif mode == INDIVIDUAL_ACKNOWLEDGE:
            for m in received:
                m.acknowledge()
        consumer.close()
    with jms(stomp_broker) as connection:
        consumer = connection.create_session().create_consumer(q)
        connection.start()
        assert consumer.receive(1.0) is None, "acknowledged messages came back"


def test_jms_rollback_redelivers(stomp_broker):
    q = Queue(qname(stomp_broker))
    with jms(stomp_broker) as connection:
        session = connection.create_session(transacted=True)
        producer, consumer = session.create_producer(q), session.create_consumer(q)
        connection.start()
        producer.send(TextMessage("x"))
        session.commit()
        assert consumer.receive(10).text == "x"
        session.rollback()
        again = consumer.receive(10)
        assert again.text == "x" and again.redelivered
        session.commit()


def test_jms_a_poisoned_message_is_not_requeued(stomp_broker):
    q = Queue(qname(stomp_broker))
    attempts = []

    def failing(message):
        attempts.append(message.text)
        raise RuntimeError("poison")

    query = "?jms.redeliveryPolicy.maximumRedeliveries=1&jms.redeliveryPolicy.initialRedeliveryDelay=10"
    with jms(stomp_broker, query) as connection:
        session = connection.create_session()
        session.create_consumer(q).set_message_listener(failing)
        connection.start()
        connection.create_session().create_producer(q).send(TextMessage("bad"))
        assert wait_until(lambda: len(attempts) >= 2, 10), attempts
        time.sleep(0.5)
    with jms(stomp_broker) as connection:
        consumer = connection.create_session().create_consumer(q)
        connection.start()
        assert consumer.receive(1.5) is None, "the poisoned message came back"
    assert attempts == ["bad", "bad"]


def test_jms_optimized_acks(stomp_broker):
    q = Queue(qname(stomp_broker))
    with jms(stomp_broker, "?jms.prefetchPolicy.all=50&jms.optimizeAcknowledge=true") as connection:
        producer = connection.create_session().create_producer(q)
        for i in range(400):
            producer.send(TextMessage("m%d" % i), delivery_mode=1)
        producer.send(TextMessage("end"))
        consumer = connection.create_session().create_consumer(q)
        connection.start()
        texts = set()
        for _ in range(401):  # ActiveMQ may dispatch the persistent one before the others
            m = consumer.receive(10)
            assert m is not None, len(texts)
            texts.add(m.text)
        assert texts == {"m%d" % i for i in range(400)} | {"end"}
        consumer.close()
    with jms(stomp_broker) as connection:
        consumer = connection.create_session().create_consumer(q)
        connection.start()
        assert consumer.receive(1.0) is None


def test_jms_failover_through_a_proxy(stomp_broker, tcp_proxy_factory):
    proxy = tcp_proxy_factory(stomp_broker.host_and_ports[0])
    q = Queue(qname(stomp_broker))
    # sync acks: acknowledge() returns once the broker confirmed it, so "before" cannot come again
    # (async, the default, an ACK written just before the cut may be lost: redelivered, at-least-once)
    url = "failover:(stomp://%s:%d)?initialReconnectDelay=10&maxReconnectDelay=200&jms.sendAcksAsync=false" \
        % proxy.address
    factory = ConnectionFactory(url)
    with factory.create_connection(stomp_broker.username, stomp_broker.password, timeout_s=20) as connection:
        session = connection.create_session(False, CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(q)
        producer = connection.create_session().create_producer(q)
        connection.start()
        producer.send(TextMessage("before"))
        first = consumer.receive(10)
        assert first.text == "before"
        first.acknowledge()
        proxy.cut()
        producer.send(TextMessage("after"))  # waits for the new socket, then for its RECEIPT
        m = consumer.receive(20)
        assert m is not None and m.text == "after"
        m.acknowledge()


def test_jms_destination_urls(stomp_broker):
    name = qname(stomp_broker)[len("/queue/"):]
    with jms(stomp_broker) as connection:
        session = connection.create_session()
        producer = session.create_producer("queue://" + name)
        assert producer.destination == Queue(name)
        consumer = session.create_consumer("/queue/" + name)
        connection.start()
        producer.send(TextMessage("by url"))
        assert consumer.receive(10).text == "by url"
    assert session.create_topic("topic://prices") == Topic("prices")


def test_rabbitmq_refuses_what_it_cannot_do_up_front(stomp_broker):
    if stomp_broker.is_activemq:
        pytest.skip("RabbitMQ's refusals (ActiveMQ does all of these)")
    q = Queue(qname(stomp_broker))
    with jms(stomp_broker, client_id="amqstomp-bt-" + uuid.uuid4().hex[:6]) as connection:
        session = connection.create_session()
        refused = {
            "a queue browser": lambda: session.create_browser(q),
            "a durable subscriber": lambda: session.create_durable_subscriber(Topic("t"), "sub"),
            "no_local": lambda: session.create_consumer(q, no_local=True),
            "a selector": lambda: session.create_consumer(q, selector="a = 1"),
            "map_messages": lambda: session.create_consumer(q, map_messages=True),
            "a temporary topic": lambda: session.create_temporary_topic(),
        }
        for what, call in refused.items():
            with pytest.raises(ConfigurationError, match="RabbitMQ") as caught:
                call()
            assert "RabbitMQ/3" in str(caught.value), what  # the server header, as announced
        scheduled = TextMessage("later")
        scheduled.schedule(delay_ms=1000)
        with pytest.raises(ConfigurationError, match="RabbitMQ"):
            session.create_producer(q).send(scheduled)
        replies = session.create_temporary_queue()
        with pytest.raises(ConfigurationError, match="reply-to"):
            session.create_producer(replies).send(TextMessage("to myself"))


# ------------------------------------------------------------------ broker reasons


AUTH_XML = """    <plugins><simpleAuthenticationPlugin anonymousAccessAllowed="true"><users>
      <authenticationUser username="admin" password="secret" groups="admins"/>
    </users></simpleAuthenticationPlugin></plugins>"""


@pytest.fixture(scope="module")
def activemq_auth():
    """An ActiveMQ that checks passwords (admin/secret; anonymous users may connect, so
    the start-up check gets in)."""
    ActiveMQBroker.require()
    broker = ActiveMQBroker(statistics=False, extra_xml=AUTH_XML, broker_name="amqstomp-auth").start()
    try:
        yield broker
    finally:
        broker.stop()


def _login_target(stomp_broker, request):
    """(host_and_ports, url, login): a broker that checks passwords."""
    if stomp_broker.is_activemq:
        broker = request.getfixturevalue("activemq_auth")
        return broker.host_and_ports, broker.url, "admin", "User name [admin] or password is invalid"
    return stomp_broker.host_and_ports, stomp_broker.url, "guest", "Access refused for user 'guest'"


def _within(seconds, call):
    start = time.monotonic()
    with pytest.raises(StompException) as caught:
        call()
    took = time.monotonic() - start
    assert took < seconds, "took %.2f s: %s" % (took, caught.value)
    return caught.value


#: ActiveMQ 5.17 closes the socket of a refused CONNECT before writing its ERROR now and then
#: (5 in 1,000 over raw sockets): the client cannot give a reason it never got
BROKER_LAPSE = "before CONNECTED: connection closed by the broker without an ERROR frame"


def _refused(call, attempts=5):
    """The exception of ``call()``, each attempt within REASON_WITHIN_S; an attempt the broker
    ended without its ERROR (BROKER_LAPSE, said so in the exception) is tried again, a few times."""
    for _ in range(attempts):
        exc = _within(REASON_WITHIN_S, call)
        if not (isinstance(exc, ConnectFailedException) and BROKER_LAPSE in str(exc)):
            return exc
    return exc


def test_a_wrong_password_says_the_brokers_reason_at_once(stomp_broker, request):
    host_and_ports, url, login, reason = _login_target(stomp_broker, request)

    def connect():
        conn = amqstomp.Connection12(host_and_ports)
        try:
            conn.connect(login, "wrong", wait=True, timeout=15)
        finally:
            conn.disconnect()
    exc = _refused(connect)
    assert isinstance(exc, ConnectRefusedError) and reason in str(exc), exc
    exc = _refused(lambda: ConnectionFactory(url).create_connection(login, "wrong"))
    assert isinstance(exc, ConnectRefusedError) and reason in str(exc), exc
    # failover: a refused login ends the start-up attempts (it used to retry forever, and with
    # timeout_s the exception lost the reason)
    failover = "failover:(%s)?initialReconnectDelay=10" % url
    for timeout_s in (None, 30):
        exc = _within(REASON_WITHIN_S, lambda: ConnectionFactory(failover).create_connection(
            login, "wrong", timeout_s=timeout_s))
        assert isinstance(exc, ConnectRefusedError) and reason in str(exc), exc


def test_a_wrong_vhost_says_the_brokers_reason_at_once(stomp_broker):
    vhost = "amqstomp-no-such-vhost"
    conn = amqstomp.Connection12(stomp_broker.host_and_ports, vhost=vhost)
    factory = ConnectionFactory(stomp_broker.url + "?host=" + vhost)
    if stomp_broker.is_activemq:  # ActiveMQ has no virtual hosts: it ignores the host header
        conn.connect(stomp_broker.username, stomp_broker.password, wait=True, timeout=15)
        conn.disconnect()
        factory.create_connection().close()
        return
    reason = "Virtual host '%s' access denied" % vhost
    try:
        exc = _within(REASON_WITHIN_S, lambda: conn.connect(stomp_broker.username, stomp_broker.password,
                                                            wait=True, timeout=15))
    finally:
        conn.disconnect()
    assert isinstance(exc, ConnectRefusedError) and reason in str(exc) and "Bad CONNECT" in str(exc), exc
    assert exc.broker_message == "Bad CONNECT" and reason in exc.reason
    exc = _within(REASON_WITHIN_S, lambda: factory.create_connection(stomp_broker.username, stomp_broker.password))
    assert isinstance(exc, ConnectRefusedError) and reason in str(exc), exc


#: a destination each broker refuses with an ERROR, and the broker's words for it
INVALID = {
    "activemq": ("/remote-temp-queue/ID:amqstomp-none-1:1:1", "does not exist"),
    "rabbitmq": ("/amqstomp-bt-kind/x", "is not a valid destination"),
}


def test_an_invalid_destination_says_the_brokers_reason_at_once(stomp_broker):
    destination, reason = INVALID[stomp_broker.name]
    errors = Collector()
    conn = stomp12(stomp_broker, errors)
    try:
        conn.send(destination, "x", receipt="bad")
        exc = _within(REASON_WITHIN_S, lambda: conn.wait_for_receipt("bad", 15))
        assert isinstance(exc, BrokerError) and reason in str(exc) and exc.receipt_id == "bad", exc
        assert wait_until(lambda: errors.errors, 5)
        assert not any(name.startswith("amqstomp") for name in errors.errors[0].headers)  # as the broker sent it
    finally:
        conn.disconnect()
    with jms(stomp_broker) as connection:
        producer = connection.create_session().create_producer(destination)
        exc = _within(REASON_WITHIN_S, lambda: producer.send(TextMessage("x")))  # persistent: waits
        assert isinstance(exc, BrokerError) and reason in str(exc), exc
    if stomp_broker.name == "rabbitmq":  # a SUBSCRIBE it refuses without a receipt-id
        with jms(stomp_broker) as connection:
            session = connection.create_session()
            exc = _within(REASON_WITHIN_S, lambda: session.create_consumer(destination))
            assert isinstance(exc, BrokerError) and reason in str(exc), exc


def test_an_error_naming_no_receipt_ends_its_wait_while_other_receipts_are_awaited(stomp_broker):
    """RabbitMQ's ERROR names no receipt and can come before an earlier SEND's RECEIPT (sent once
    the message is confirmed): the refused frame's wait ends at once with the broker's reason once
    the other receipt is answered (it used to sit out its timeout; ActiveMQ names the receipt)."""
    destination, reason = INVALID[stomp_broker.name]
    conn = stomp12(stomp_broker)
    try:
        for attempt in range(3):  # the SEND's RECEIPT is pending when the ERROR comes (each round)
            conn.send(qname(stomp_broker), "one", receipt="ok-%d" % attempt)
            conn.send(destination, "x", receipt="bad-%d" % attempt)
            exc = _within(REASON_WITHIN_S, lambda: conn.wait_for_receipt("bad-%d" % attempt, 15))
            assert isinstance(exc, BrokerError) and reason in str(exc) and exc.receipt_id == "bad-%d" % attempt, exc
            assert conn.wait_for_receipt("ok-%d" % attempt, 15).headers["receipt-id"] == "ok-%d" % attempt
    finally:
        conn.disconnect()


@pytest.mark.activemq_only("ActiveMQ's header-line limit (RabbitMQ 3.10 takes a 20000-byte header line)")
def test_a_broker_closing_after_an_oversize_frame_gives_its_reason(stomp_broker):
    """With the dialect forced to generic, amqstomp does not check ActiveMQ's limits: the
    broker answers ERROR and closes; the exception says why, not Broken pipe."""
    conn = stomp12(stomp_broker, broker="generic")
    try:
        def send_big():
            conn.send(qname(stomp_broker), "x" * 4_000_000, headers={"big": "y" * 20000}, receipt="big")
            conn.wait_for_receipt("big", 15)
        exc = _within(5.0, send_big)
    finally:
        conn.disconnect()
    # the write failing (the broker closed) or the receipt's wait getting the ERROR: a race; both say why
    assert isinstance(exc, (ConnectionClosedException, BrokerError)), exc
    # ActiveMQ names the limit it met first: the header's length or the whole command's
    found = re.search(r"maximum (header|command) length was exceeded", str(exc))
    assert found, exc
    assert found.start() < str(exc).find("Broken pipe") or "Broken pipe" not in str(exc)


@pytest.mark.activemq_only("ActiveMQ's JmsFrameTranslator reads the transformation")
def test_a_send_with_a_jms_transformation_goes_without_content_length(stomp_broker):
    q = qname(stomp_broker)
    xml = ('<map><entry><string>n</string><int>7</int></entry></map>')
    conn = stomp12(stomp_broker)
    try:
        with jms(stomp_broker) as connection:
            consumer = connection.create_session().create_consumer(q, map_messages=True)
            connection.start()
            conn.send(q, xml, headers={"transformation": "jms-map-xml"}, receipt="r")
            conn.wait_for_receipt("r", 10)
            got = consumer.receive(10)
            assert isinstance(got, MapMessage) and got.get_int("n") == 7, got
            # the broker made a MapMessage (a Java consumer gets one): it renders it without
            # content-length; a BytesMessage (what the automatic content-length made) has one
            assert "content-length" not in got.headers, got.headers
    finally:
        conn.disconnect()



#: clean closes per API in the test below, and the messages queued for each: RabbitMQ
#: 3.10.8 answered 4 to 17 in 40 (stomp.py API) and 30 in 30 (JMS API) of such closes with
#: an ERROR 'Subscription not found' before amqstomp recognised it
CLEAN_CLOSES = 10
IN_FLIGHT = 1000


class FirstMessage(Collector):
    def __init__(self):
        super().__init__()
        self.came = threading.Event()

    def on_message(self, frame):
        self.came.set()


def test_a_clean_close_with_messages_in_flight_reports_no_error(stomp_broker, caplog):
    """unsubscribe + disconnect (stomp.py API) and close() (JMS API) of a consumer with
    deliveries on their way: no on_error, no exception listener call, nothing logged at
    WARNING or above. (RabbitMQ answers such a delivery with ERROR 'Subscription not found'
    naming the id the client just unsubscribed: logged at DEBUG, not an error.)"""
    caplog.set_level(logging.DEBUG, logger="amqstomp")
    heard, reported = [], []
    for api in ("stomp.py", "jms"):
        for _ in range(CLEAN_CLOSES):
            q = qname(stomp_broker)
            listener = FirstMessage()
            conn = stomp12(stomp_broker, listener)
            for i in range(IN_FLIGHT):
                conn.send(q, "m%d" % i, receipt="filled" if i == IN_FLIGHT - 1 else None)
            conn.wait_for_receipt("filled", 30)
            if api == "stomp.py":
                conn.subscribe(q, id="1", ack="auto")
                assert listener.came.wait(10)
                conn.unsubscribe("1")
            else:
                with jms(stomp_broker) as connection:
                    connection.set_exception_listener(reported.append)
                    connection.start()
                    assert connection.create_session().create_consumer(q).receive(10) is not None
            conn.disconnect()
            heard += listener.errors
    loud = [r.getMessage() for r in caplog.records if r.name.startswith("amqstomp") and r.levelno >= logging.WARNING]
    assert heard == [] and reported == [] and loud == [], (heard[:1], reported[:1], loud[:3])
