"""Broker dialects and broker reasons without a broker: amqstomp._core.dialect (what
differs by broker), ProtocolState's ERROR attribution, the content-length rule of
jms-* transformations, BrokerError's text, the JMS frame mapping of RabbitMQ's
MESSAGEs and destinations. The same behaviours against the real brokers:
tests/test_brokers.py."""
import subprocess
import sys

import pytest

from amqstomp import ConnectionListener
from amqstomp._engine.dispatch import ListenerDispatch
from amqstomp._core import dialect
from amqstomp._core.dialect import ACTIVEMQ, ARTEMIS, GENERIC, RABBITMQ
from amqstomp._core.state import CONNECTED, ERROR, UNSUBSCRIBED_ERROR, UNSUBSCRIBED_KEPT, ProtocolState
from amqstomp.codec import Frame
from amqstomp.exception import BrokerError, ConfigurationError, ConnectRefusedError, FrameEncodeError, broker_reason
from amqstomp.jms import BytesMessage, ConnectionFactory, Queue, TemporaryQueue, TextMessage, Topic
from amqstomp.jms.destination import ReplyQueue, StompDestination, as_destination, destination_from_header
from amqstomp.jms.message import message_from_frame

RABBIT_UNKNOWN = Frame("ERROR", {"message": "Unknown destination", "content-type": "text/plain"},
                       b"'/foo/bar' is not a valid destination.\nValid destination types are: /temp-queue, "
                       b"/exchange, /topic, /queue, /amq/queue, /reply-queue/.\n")
AMQ_PASSWORD = Frame("ERROR", {"message": "User name [admin] or password is invalid."},
                     b"java.lang.SecurityException: User name [admin] or password is invalid.\n"
                     b"\tat org.apache.activemq.security.SimpleAuthenticationBroker.addConnection(X.java:1)\n")


def test_dialect_of_the_server_header_or_the_users_choice():
    assert dialect.dialect_of("ActiveMQ/5.17.2") == ACTIVEMQ
    assert dialect.dialect_of("ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine") == ARTEMIS
    assert dialect.dialect_of("RabbitMQ/3.10.8") == RABBITMQ
    assert dialect.dialect_of(None) == dialect.dialect_of("apache-apollo/1.7") == GENERIC
    assert dialect.dialect_of("RabbitMQ/3.10.8", "generic") == GENERIC
    assert dialect.dialect_of("RabbitMQ/3.10.8", "auto") == RABBITMQ
    assert dialect.check_broker("RabbitMQ") == RABBITMQ and dialect.check_broker("auto") is None
    with pytest.raises(ConfigurationError, match="activemq, artemis, rabbitmq, generic"):
        dialect.check_broker("kafka")
    with pytest.raises(ConfigurationError, match="amqstomp.broker"):
        ConnectionFactory("stomp://127.0.0.1:1?amqstomp.broker=kafka")
    assert ConnectionFactory("stomp://127.0.0.1:1?amqstomp.broker=rabbitmq").options["broker"] == "rabbitmq"


def test_protocol_state_takes_the_users_dialect_over_the_server_header():
    state = ProtocolState("1.2", broker=GENERIC)
    state.receive_data(b"CONNECTED\nversion:1.2\nserver:ActiveMQ/5.17.2\n\n\x00", 0.0)
    assert state.handle(Frame("CONNECTED", {"version": "1.2", "server": "ActiveMQ/5.17.2"})) == (CONNECTED, None)
    assert state.dialect == GENERIC and state.limits is None  # no ActiveMQ limit checks either


def test_connect_host_default_is_rabbitmqs_default_vhost():
    assert dialect.connect_host("1.2", None) == "/" and dialect.connect_host("1.1", None) == "/"
    assert dialect.connect_host("1.0", None) is None
    assert dialect.connect_host("1.2", "prod") == "prod"


def test_prefetch_headers_and_zero_per_broker():
    assert dialect.prefetch_header(ACTIVEMQ, 10, "ActiveMQ/5.17.2") == ("activemq.prefetchSize", "10")
    assert dialect.prefetch_header(RABBITMQ, 10, "RabbitMQ/3.10.8") == ("prefetch-count", "10")
    with pytest.raises(ConfigurationError, match="RabbitMQ reads prefetch-count:0 as no limit"):
        dialect.prefetch_header(RABBITMQ, 0, "RabbitMQ/3.10.8")
    with pytest.raises(ConfigurationError, match="ActiveMQ Classic"):
        dialect.prefetch_header(ACTIVEMQ, 0, "ActiveMQ/5.17.2")
    with pytest.raises(ConfigurationError, match="ActiveMQ Artemis"):  # consumer-window-size counts bytes
        dialect.prefetch_header(ARTEMIS, 10, "ActiveMQ-Artemis/2.31.2")


#: ActiveMQ 6.1's CONNECTED (the activemq-all 6.1.7 jar): its build left the version unfiltered
UNFILTERED_6_1 = "ActiveMQ/${project.version}"


def test_activemq_6_1s_unfiltered_version_is_still_activemq_classic():
    """The server header names ActiveMQ Classic by its ``ActiveMQ/`` prefix, whatever follows:
    6.1's literal ``${project.version}`` is Classic (its headers, prefetch, temp queues), not
    Artemis and not a generic broker; messages quote it as it came."""
    assert dialect.dialect_of(UNFILTERED_6_1) == ACTIVEMQ
    assert dialect.is_activemq_classic(UNFILTERED_6_1)
    assert dialect.BROKERS[dialect.dialect_of(UNFILTERED_6_1)].classic
    assert dialect.prefetch_header(ACTIVEMQ, 10, UNFILTERED_6_1) == ("activemq.prefetchSize", "10")
    assert dialect.describe(ACTIVEMQ, UNFILTERED_6_1) == "ActiveMQ Classic (server ActiveMQ/${project.version})"
    state = _connected(UNFILTERED_6_1)
    assert state.dialect == ACTIVEMQ and state.server == UNFILTERED_6_1
    for not_classic in ("ActiveMQ-Artemis/${project.version}", "ActiveMQ", "activemq/6.1.7"):
        assert dialect.dialect_of(not_classic) != ACTIVEMQ, not_classic


def test_the_clients_own_nack_does_not_requeue_on_rabbitmq():
    assert dialect.reject_headers(RABBITMQ, {"id": "a"}) == {"id": "a", "requeue": "false"}
    assert dialect.reject_headers(ACTIVEMQ, {"id": "a"}) == {"id": "a"}  # ActiveMQ: the DLQ


def _connected(server):
    state = ProtocolState("1.2")
    state.handle(Frame("CONNECTED", {"version": "1.2", "server": server}))
    return state


def test_an_error_without_receipt_id_answers_the_one_receipt_awaited_on_rabbitmq():
    state = _connected("RabbitMQ/3.10.8")
    state.expect_receipt("r1", "token-1")
    assert state.handle(RABBIT_UNKNOWN) == (ERROR, "token-1")
    assert state.error_receipt_id == "r1" and state.last_error is RABBIT_UNKNOWN
    state.expect_receipt("r2", "token-2")  # two awaited: it answers neither (nothing to guess)
    state.expect_receipt("r3", "token-3")
    assert state.handle(RABBIT_UNKNOWN) == (ERROR, None)
    assert set(state.receipts) == {"r2", "r3"}


def _gone(tag, message="Subscription not found", **headers):
    """RabbitMQ 3.10's ERROR for a delivery whose subscription the client just cancelled."""
    headers.update({"message": message, "content-type": "text/plain", "version": "1.0,1.1,1.2"})
    return Frame("ERROR", headers, ("There is no current subscription with tag '%s'." % tag).encode())


def test_rabbitmqs_late_error_for_a_subscription_the_client_unsubscribed_is_no_error():
    """After the client's own UNSUBSCRIBE of id 1, RabbitMQ's 'Subscription not found'
    naming T_1 is UNSUBSCRIBED_ERROR: it answers no receipt (the DISCONNECT's stays
    awaited) and is not the connection's last ERROR. Every other ERROR stays an ERROR."""
    state = _connected("RabbitMQ/3.10.8")
    state.encode("SUBSCRIBE", {"id": "1", "destination": "/queue/a", "ack": "auto"}, b"")
    state.encode("SUBSCRIBE", {"id": "2", "destination": "/queue/b", "ack": "auto"}, b"")
    assert state.handle(_gone("T_1")) == (ERROR, None)  # still subscribed: the broker lost it, an error
    state.encode("UNSUBSCRIBE", {"id": "1"}, b"")
    state.encode("DISCONNECT", {"receipt": "bye"}, b"")
    state.expect_receipt("bye", "token-bye")
    before = state.last_error
    for body in (_gone("T_1"), Frame("ERROR", dict(_gone("T_1").headers), "There is no current "
                                     "subscription with tag 'T_1'.\n")):  # bytes or str, a trailing EOL
        assert state.handle(body) == (UNSUBSCRIBED_ERROR, None)
    assert state.last_error is before and state.receipts == {"bye": "token-bye"}
    # not one of the client's unsubscribed ids, another message, a receipt named: ERRORs as before
    assert state.handle(_gone("T_2")) == (ERROR, "token-bye")
    state.expect_receipt("bye", "token-bye")
    for frame in (_gone("T_1", message="No subscription found"), _gone("T_1", **{"receipt-id": "bye"}),
                  Frame("ERROR", {"message": "Subscription not found"},
                        b'Message with id "T_1@@session-x@@3" has no subscription')):
        assert state.handle(frame)[0] == ERROR, frame
        state.expect_receipt("bye", "token-bye")
    # a SUBSCRIBE taking id 1 again: an ERROR naming it is about the new subscription
    state.encode("SUBSCRIBE", {"id": "1", "destination": "/queue/a", "ack": "auto"}, b"")
    assert "1" not in state.unsubscribed and state.handle(_gone("T_1"))[0] == ERROR


def test_only_rabbitmq_errors_after_unsubscribe_are_recognised_and_the_ids_kept_are_bounded():
    for server in ("ActiveMQ/5.17.2", "ActiveMQ-Artemis/2.31.2", None):
        state = _connected(server)
        state.encode("UNSUBSCRIBE", {"id": "1"}, b"")
        assert state.handle(_gone("T_1")) == (ERROR, None), server
    assert dialect.unsubscribed_error(RABBITMQ, _gone("T_a b'c").headers, _gone("T_a b'c").body, {"a b'c"}) == "a b'c"
    state = _connected("RabbitMQ/3.10.8")
    for i in range(UNSUBSCRIBED_KEPT + 10):
        state.encode("UNSUBSCRIBE", {"id": str(i)}, b"")
    assert len(state.unsubscribed) == UNSUBSCRIBED_KEPT and "0" not in state.unsubscribed
    assert state.handle(_gone("T_%d" % (UNSUBSCRIBED_KEPT + 9)))[0] == UNSUBSCRIBED_ERROR
    assert state.handle(_gone("T_0"))[0] == ERROR  # forgotten: the oldest go first


def test_activemq_names_the_receipt_an_error_answers_so_none_is_guessed():
    state = _connected("ActiveMQ/5.17.2")
    state.expect_receipt("r1", "token-1")
    assert state.handle(Frame("ERROR", {"message": "Unexpected ACK received"})) == (ERROR, None)
    assert state.handle(Frame("ERROR", {"message": "x", "receipt-id": "r1"})) == (ERROR, "token-1")


def test_a_send_with_a_jms_transformation_gets_no_automatic_content_length():
    state = _connected("ActiveMQ/5.17.2")
    data = state.encode("SEND", {"destination": "/queue/a", "transformation": "jms-map-xml"}, b"<map/>")
    assert b"content-length" not in data
    data = state.encode("SEND", {"destination": "/queue/a", "transformation": "jms-byte"}, b"<map/>")
    assert b"content-length:6" in data  # jms-byte is a BytesMessage on purpose
    data = state.encode("SEND", {"destination": "/queue/a"}, b"x")
    assert b"content-length:1" in data
    with pytest.raises(FrameEncodeError, match="NUL"):
        state.encode("SEND", {"destination": "/queue/a", "transformation": "jms-map-json"}, b"a\x00b")


def test_broker_reason_is_the_message_and_the_first_body_lines():
    assert broker_reason(RABBIT_UNKNOWN) == ("Unknown destination: '/foo/bar' is not a valid destination. Valid "
                                             "destination types are: /temp-queue, /exchange, /topic, /queue, "
                                             "/amq/queue, /reply-queue/.")
    # the body only repeats the message (as SomeException: message) and a stack trace
    assert broker_reason(AMQ_PASSWORD) == "User name [admin] or password is invalid."
    assert broker_reason(Frame("ERROR", {}, b"")) == "(an ERROR frame with no message)"
    assert broker_reason(Frame("ERROR", {}, "only a body\nsecond\nthird\nfourth")) == "only a body second third"


def test_broker_errors_carry_the_reason_and_the_receipt():
    exc = BrokerError("SUBSCRIBE refused", RABBIT_UNKNOWN, "r7")
    assert str(exc).startswith("SUBSCRIBE refused: Unknown destination: '/foo/bar' is not a valid destination.")
    assert str(exc).endswith("(ERROR for receipt 'r7')")
    assert exc.receipt_id == "r7" and exc.broker_message == "Unknown destination" and exc.frame is RABBIT_UNKNOWN
    refused = ConnectRefusedError("the broker refused the connection", AMQ_PASSWORD)
    assert isinstance(refused, BrokerError)
    assert str(refused) == "the broker refused the connection: User name [admin] or password is invalid."


def test_rabbitmq_messages_map_to_text_or_bytes_by_content_type():
    headers = {"destination": "/queue/q", "message-id": "T_1@@s@@1", "subscription": "1", "content-length": "5",
               "receipt": "s-3", "redelivered": "false"}
    text = message_from_frame(Frame("MESSAGE", dict(headers, **{"content-type": "text/plain; charset=utf-8"}),
                                    b"h\xc3\xa9llo"[:5]))
    assert isinstance(text, TextMessage) and text.text.startswith("h")
    assert text.properties == {}  # content-type and the SEND's receipt (RabbitMQ hands it on) are not properties
    latin = message_from_frame(Frame("MESSAGE", dict(headers, **{"content-type": "text/plain; charset=latin-1"}),
                                     b"caf\xe9!"))
    assert latin.text == "café!"
    data = message_from_frame(Frame("MESSAGE", dict(headers, **{"content-type": "application/octet-stream"}),
                                    b"abcde"))
    assert isinstance(data, BytesMessage)
    # ActiveMQ's rule where no content-type says otherwise: content-length means bytes, none text
    assert isinstance(message_from_frame(Frame("MESSAGE", dict(headers), b"abcde")), BytesMessage)
    no_length = {k: v for k, v in headers.items() if k != "content-length"}
    assert isinstance(message_from_frame(Frame("MESSAGE", no_length, b"abc")), TextMessage)


def test_rabbitmq_reply_queues_and_temporary_queue_replies():
    replies = TemporaryQueue("amqstomp-1-abc", owner=object())
    lookup = {replies.stomp_name: replies}.get
    request = message_from_frame(Frame("MESSAGE", {"destination": "/queue/requests", "message-id": "1",
                                                   "reply-to": "/reply-queue/amq.gen-X1"}, b""), lookup)
    assert isinstance(request.reply_to, ReplyQueue) and request.reply_to.remote
    assert request.reply_to.stomp_name == "/reply-queue/amq.gen-X1"
    reply = message_from_frame(Frame("MESSAGE", {"destination": "/queue/amq.gen-X1", "message-id": "2",
                                                 "subscription": replies.stomp_name}, b""), lookup)
    assert reply.destination is replies  # the connection's subscription named after its temporary queue


def test_destination_names_and_activemq_urls():
    assert as_destination("queue://orders") == Queue("orders") == Queue("queue://orders")
    assert as_destination("topic://prices") == Topic("prices")
    remote = as_destination("temp-queue://ID:host-1:2:3")
    assert isinstance(remote, TemporaryQueue) and remote.stomp_name == "/remote-temp-queue/ID:host-1:2:3"
    assert as_destination("temp-topic://ID:h-1").stomp_name == "/remote-temp-topic/ID:h-1"
    assert as_destination("queue://orders?consumer.prefetchSize=5").subscribe_name == \
        "/queue/orders?consumer.prefetchSize=5"
    exchange = as_destination("/exchange/amq.topic/key")
    assert isinstance(exchange, StompDestination) and exchange.stomp_name == "/exchange/amq.topic/key"
    assert destination_from_header("/amq/queue/q").stomp_name == "/amq/queue/q"  # not /queue/amq/queue/q
    assert as_destination("orders") == Queue("orders")
    with pytest.raises(ValueError, match="topic://"):
        Topic("queue://x")


def test_x_destination_options_pass_through_as_headers():
    from amqstomp.uri import parse_destination

    assert parse_destination("/queue/a?x-max-length=10&x-queue-type=quorum&consumer.priority=3") == (
        "/queue/a", {"x-max-length": "10", "x-queue-type": "quorum", "activemq.priority": "3"})
    with pytest.raises(ConfigurationError):
        parse_destination("/queue/a?bogus=1")


class _Record:
    def __init__(self):
        self.calls = []

    def on_error(self, frame):
        self.calls.append(("error", frame))


def test_a_refused_connect_reaches_listeners_as_the_broker_sent_it():
    """No header the broker never sent: ``connect_refused`` calls on_connect_refused,
    whose default (and the fallback of a listener without one) is on_error."""
    seen = []

    class Own(ConnectionListener):
        def on_connect_refused(self, frame):
            seen.append(("refused", frame))

    class Plain(ConnectionListener):
        def on_error(self, frame):
            seen.append(("error", frame))

    dispatch = ListenerDispatch(auto_decode=False)
    duck = _Record()
    dispatch.set("a", Own())
    dispatch.set("b", Plain())
    dispatch.set("c", duck)
    frame = Frame("ERROR", {"message": "Bad CONNECT"}, b"Access refused for user 'guest'")
    dispatch.notify("connect_refused", frame)
    assert seen == [("refused", frame), ("error", frame)] and duck.calls == [("error", frame)]
    assert frame.headers == {"message": "Bad CONNECT"}


def test_library_warnings_print_nothing_without_logging_configured():
    code = ("import logging, amqstomp.jms\n"
            "logging.getLogger('amqstomp.transport').warning('broker ERROR: something')\n"
            "logging.getLogger('amqstomp.jms').error('and this')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
