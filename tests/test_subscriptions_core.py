"""SUBSCRIBE preparation in the pure core (amqstomp._core.subscriptions): values in,
headers and a window out. No broker, no socket, no thread, no clock."""
import threading

import pytest

from amqstomp._core import subscriptions as subs
from amqstomp._core.dialect import ACTIVEMQ, ARTEMIS, GENERIC, RABBITMQ
from amqstomp.exception import ConfigurationError, InvalidDestinationError
from amqstomp.flow import ACK_AUTO, ACK_CLIENT, PrefetchPolicy, RedeliveryPolicy

pytestmark = pytest.mark.timeout(30)

POLICY = PrefetchPolicy()
REDELIVERY = RedeliveryPolicy()
AMQ = "ActiveMQ/5.17.2"


def _plan(destination="/queue/a", id="1", ack="auto", headers=None, options=None, dialect=ACTIVEMQ, server=AMQ,
          policy=POLICY):
    request = subs.subscribe_request(destination, id, ack, dict(headers or {}), dict(options or {}), REDELIVERY)
    return subs.subscribe_plan(request, dialect, server, policy)


def test_the_frame_is_the_callers_headers_then_the_destination_options_then_destination_id_ack():
    threads = threading.active_count()
    plan = _plan("/queue/a?consumer.prefetchSize=10&consumer.exclusive=true&x-queue-type=quorum", 7, "client",
                 {"selector": "a > 1", "activemq.exclusive": "false", "id": "ignored"})
    assert plan.headers == {"selector": "a > 1", "activemq.exclusive": "false", "id": 7, "activemq.prefetchSize": "10",
                            "x-queue-type": "quorum", "destination": "/queue/a", "ack": "client"}
    assert list(plan.headers)[-2:] == ["destination", "ack"]  # the wire order of the frame builder
    assert (plan.name, plan.ack, plan.prefetch, plan.browser) == ("/queue/a", "client", 10, False)
    assert (plan.window.prefetch, plan.window.ack_mode) == (10, ACK_CLIENT)
    assert threading.active_count() == threads  # nothing started


def test_the_window_prefetch_is_the_brokers_header_else_the_policy_by_destination_kind():
    policy = PrefetchPolicy(queue_prefetch=11, queue_browser_prefetch=12, durable_topic_prefetch=13,
                            topic_prefetch=14)
    assert _plan("/queue/a", policy=policy).prefetch == 11
    assert _plan("/queue/a", headers={"browser": "true"}, policy=policy).prefetch == 12
    assert _plan("/topic/a", headers={"activemq.subscriptionName": "d"}, policy=policy).prefetch == 13
    assert _plan("/topic/a", headers={"durable-subscription-name": "d"}, policy=policy).prefetch == 13
    assert _plan("/temp-topic/a", policy=policy).prefetch == 14
    assert _plan("/queue/a", headers={"activemq.prefetchSize": " 5 "}, policy=policy).prefetch == 5
    # RabbitMQ's header counts on RabbitMQ; ActiveMQ's header does not (the broker ignores it)
    assert _plan("/queue/a", headers={"prefetch-count": "6"}, dialect=RABBITMQ, server="RabbitMQ/3.10",
                 policy=policy).prefetch == 6
    assert _plan("/queue/a", headers={"activemq.prefetchSize": "6"}, dialect=RABBITMQ, server="RabbitMQ/3.10",
                 policy=policy).prefetch == 11
    # a generic broker: either header
    assert _plan("/queue/a", headers={"prefetch-count": "8"}, dialect=GENERIC, server=None, policy=policy).prefetch == 8
    assert subs.window_prefetch("/topic/a", {}, ACTIVEMQ, policy) == 14
    assert subs.policy_prefetch(policy, "/topic/a", durable=True) == 13


@pytest.mark.parametrize("value", ["x", "-1", str(2 ** 31)])
def test_a_bad_prefetch_header_is_refused(value):
    with pytest.raises(ConfigurationError, match="activemq.prefetchSize"):
        _plan(headers={"activemq.prefetchSize": value})


def test_prefetch_size_becomes_the_header_of_the_broker_and_a_window_of_that_size():
    request = subs.subscribe_request("/queue/a", "1", "client-individual", {}, {"prefetch_size": 3}, REDELIVERY)
    assert request.needs_broker
    assert subs.subscribe_plan(request, ACTIVEMQ, AMQ, POLICY).headers["activemq.prefetchSize"] == "3"
    rabbit = _plan(options={"prefetch_size": 4}, dialect=RABBITMQ, server="RabbitMQ/3.10")
    assert rabbit.headers["prefetch-count"] == "4" and rabbit.window.prefetch == 4
    with pytest.raises(ConfigurationError, match="no known prefetch header.*ActiveMQ Artemis"):
        _plan(options={"prefetch_size": 4}, dialect=ARTEMIS, server="ActiveMQ-Artemis/2.30")
    with pytest.raises(ConfigurationError, match="prefetch_size must be an int"):
        _plan(options={"prefetch_size": True})


def test_prefetch_zero_is_refused_where_the_broker_reads_it_as_nothing_or_no_limit():
    with pytest.raises(ConfigurationError, match="delivers nothing over STOMP"):
        _plan(options={"prefetch_size": 0})
    with pytest.raises(ConfigurationError, match="delivers nothing over STOMP"):
        _plan(headers={"activemq.prefetchSize": "0"})  # the header given directly, broker known or not
    with pytest.raises(ConfigurationError, match="no limit at all"):
        _plan(headers={"prefetch-count": "0"}, dialect=RABBITMQ, server="RabbitMQ/3.10")
    plan = _plan(headers={"prefetch-count": "0"}, dialect=GENERIC, server=None)  # nobody's header: allowed
    assert plan.prefetch == 0 and plan.window.prefetch == 1  # the window holds one at least


def test_broker_specific_asks_are_refused_on_other_brokers_naming_the_broker():
    with pytest.raises(ConfigurationError, match="activemq.exclusive needs ActiveMQ Classic.*RabbitMQ"):
        _plan("/queue/a?consumer.exclusive=true", dialect=RABBITMQ, server="RabbitMQ/3.10.8")
    with pytest.raises(ConfigurationError, match="a selector needs a broker that applies selectors"):
        _plan(headers={"selector": "a = 1"}, dialect=RABBITMQ, server="RabbitMQ/3.10.8")
    with pytest.raises(ConfigurationError, match="a selector"):
        _plan("/queue/a?consumer.selector=a%3D1", dialect=RABBITMQ, server="RabbitMQ/3.10.8")
    assert _plan(headers={"selector": "a = 1"}, dialect=ARTEMIS).headers["selector"] == "a = 1"
    # a header the caller names itself is the caller's: passed on to any broker
    assert _plan(headers={"activemq.exclusive": "true"}, dialect=RABBITMQ).headers["activemq.exclusive"] == "true"


def test_the_request_checks_the_arguments_before_any_broker_is_known():
    with pytest.raises(ConfigurationError, match="ack must be one of"):
        subs.subscribe_request("/queue/a", "1", "clint", {}, {}, REDELIVERY)
    with pytest.raises(ConfigurationError, match="needs ack='client'"):
        subs.subscribe_request("/queue/a", "1", "auto", {}, {"optimize_acknowledge": True}, REDELIVERY)
    with pytest.raises(ConfigurationError, match="True or False"):
        subs.subscribe_request("/queue/a", "1", "client", {}, {"optimize_acknowledge": 1}, REDELIVERY)
    with pytest.raises(ConfigurationError, match="redelivery_policy must be"):
        subs.subscribe_request("/queue/a", "1", "auto", {}, {"redelivery_policy": {}}, REDELIVERY)
    with pytest.raises(ConfigurationError, match="unknown destination option"):
        subs.subscribe_request("/queue/a?consumer.bogus=1", "1", "auto", {}, {}, REDELIVERY)
    with pytest.raises(InvalidDestinationError):
        subs.subscribe_request("/queue/?consumer.exclusive=true", "1", "auto", {}, {}, REDELIVERY)
    mine = RedeliveryPolicy(maximum_redeliveries=1)
    request = subs.subscribe_request("/queue/a", 5, "auto", {}, {"redelivery_policy": mine}, REDELIVERY)
    assert (request.sub_id, request.id, request.redelivery_policy, request.needs_broker) == ("5", 5, mine, False)
    assert subs.subscribe_request("/queue/a", 5, "auto", {"selector": "x"}, {}, REDELIVERY).needs_broker
    assert subs.subscribe_request("/queue/a?consumer.priority=1", 5, "auto", {}, {}, REDELIVERY).needs_broker


def test_the_window_options_are_checked_and_a_new_window_is_fresh():
    plan = _plan(ack="client", options={"optimize_acknowledge": True, "ack_batch_cap": 7, "idle_ack_ms": 0,
                                        "optimize_acknowledge_timeout_ms": 10, "max_buffered": 9})
    window = plan.window
    assert window.optimize_acknowledge and window.ack_mode == ACK_CLIENT
    window.on_delivered(0)
    again = plan.new_window()
    assert again is not window and again.pending == 0 and window.pending == 1
    assert again.optimize_acknowledge and again.prefetch == window.prefetch
    for options, needle in (({"ack_batch_cap": 0}, "ack_batch_cap must be an int >= 1"),
                            ({"idle_ack_ms": -1}, "idle_ack_ms"), ({"max_buffered_bytes": "1"}, "max_buffered_bytes"),
                            ({"optimize_acknowledge_timeout_ms": True}, "optimize_acknowledge_timeout_ms")):
        with pytest.raises(ConfigurationError, match=needle):
            _plan(options=options)
    with pytest.raises(ConfigurationError):  # the window's own check, as a ConfigurationError
        _plan(options={"max_buffered": -5})
    assert subs.option_int({}, "x", 4) == 4


def test_a_jms_consumers_headers():
    assert subs.consumer_headers(ACTIVEMQ, AMQ, "a = 1", True, "dur", True, "jms-map-json") == {
        "selector": "a = 1", "activemq.noLocal": "true", "activemq.subscriptionName": "dur", "browser": "true",
        "transformation": "jms-map-json"}
    assert subs.consumer_headers(RABBITMQ, "RabbitMQ/3.10", selector="") == {}
    with pytest.raises(ConfigurationError, match="no_local.*Artemis"):
        subs.consumer_headers(ARTEMIS, "ActiveMQ-Artemis/2.30", no_local=True)


def test_both_apis_get_the_same_frame_for_the_same_subscription():
    """A JMS durable subscriber and a stomp.py subscribe() with the same headers go
    through the same plan: the same SUBSCRIBE."""
    jms = subs.consumer_headers(ACTIVEMQ, AMQ, selector="a = 1", durable_name="d")
    stomp_py = {"selector": "a = 1", "activemq.subscriptionName": "d"}
    assert _plan("/topic/t", "9", "client", jms).headers == _plan("/topic/t", "9", "client", stomp_py).headers


def test_plain_gated_and_receipt_headers():
    assert subs.plain_headers("/queue/a?consumer.priority=3", None, "auto", {"x": "1"}) == {
        "x": "1", "activemq.priority": "3", "destination": "/queue/a", "ack": "auto"}
    assert subs.plain_headers("/queue/a?odd", 2, "client", {}, destination_options=False) == {
        "destination": "/queue/a?odd", "id": 2, "ack": "client"}  # stomp.py's frame as given
    headers = {"destination": "/queue/a", "id": "1", "ack": "auto"}
    wire = subs.gated_headers(headers, "subscribe-1-3")
    assert wire == dict(headers, receipt="subscribe-1-3") and "receipt" not in headers
    assert subs.receipt_id("subscribe", "1.2.3", 4) == "subscribe-1.2.3-4"
    window = subs.unregistered_window()
    assert (window.prefetch, window.ack_mode, window.auto_ack) == (subs.UNREGISTERED_MAX_BUFFERED, ACK_AUTO, False)
