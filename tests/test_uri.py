"""URI and destination-option parsing (amqstomp.uri)."""
import os

import pytest

from amqstomp.exception import ConfigurationError, StompException
from amqstomp.uri import (
    destination_kind,
    options_table_markdown,
    parse_destination,
    parse_uri,
)

pytestmark = pytest.mark.timeout(30)


def test_simple_uri_with_jms_options():
    u = parse_uri("stomp://127.0.0.1:61613?jms.prefetchPolicy.all=50&jms.optimizeAcknowledge=true"
                  "&jms.optimizeAcknowledgeTimeOut=100&heartBeat=1000,2000")
    assert not u.failover
    (e,) = u.endpoints
    assert (e.scheme, e.host, e.port, e.tls) == ("stomp", "127.0.0.1", 61613, False)
    assert e.options == {"heartbeats": (1000, 2000)}
    assert u.options == {"prefetch_all": 50, "optimize_acknowledge": True, "optimize_acknowledge_timeout_ms": 100}


def test_default_ports_and_tls():
    assert parse_uri("stomp://broker").endpoints[0].port == 61613
    e = parse_uri("stomp+ssl://broker").endpoints[0]
    assert e.tls and e.port == 61612
    assert parse_uri("stomp://[::1]:1234").endpoints[0].host_and_port == ("::1", 1234)


def test_failover_grammar():
    u = parse_uri("failover:(stomp://a:1,stomp+ssl://b:2?heartBeat=0,0)?randomize=false&maxReconnectAttempts=5"
                  "&nested.heartBeat=5000,5000&jms.clientID=app")
    assert u.failover
    assert [(e.host, e.port) for e in u.endpoints] == [("a", 1), ("b", 2)]
    assert u.endpoints[0].options["heartbeats"] == (5000, 5000)
    assert u.endpoints[1].options["heartbeats"] == (0, 0)  # the member's own option wins over nested.*
    assert u.failover_options == {"randomize": False, "max_reconnect_attempts": 5}
    assert u.options == {"client_id": "app"}
    bare = parse_uri("failover:stomp://a:1,stomp://b:2?initialReconnectDelay=100")
    assert [e.host for e in bare.endpoints] == ["a", "b"]
    assert bare.failover_options == {"initial_reconnect_delay_ms": 100}


@pytest.mark.parametrize("uri,needle", [
    ("tcp://localhost:61616", "amqstomp speaks STOMP"),
    ("ssl://localhost:61617", "amqstomp speaks STOMP"),
    ("stomp://h:1?jms.prefetchPolicy.queuPrefetch=1", "did you mean jms.prefetchPolicy.queuePrefetch"),
    ("stomp://h:1?jms.prefetchPolicy.all=many", "jms.prefetchPolicy.all='many'"),
    ("stomp://h:1?jms.optimizeAcknowledge=maybe", "true or false"),
    ("stomp://h:1?heartBeat=10", "cx,cy"),
    ("stomp://h:notaport", "bad port"),
    ("stomp://:1", "no host"),
    ("failover:(stomp://a:1)?bogus=1", "failover option 'bogus'"),
    ("failover:(stomp://a:1", "parenthesis"),
    ("failover:()", "names no broker"),
    ("stomp://h:1?novalue", "no value"),
    ("", "non-empty"),
])
def test_errors_name_the_problem(uri, needle):
    with pytest.raises(ConfigurationError) as err:
        parse_uri(uri)
    assert needle in str(err.value)
    assert isinstance(err.value, StompException) and isinstance(err.value, ValueError)


def test_destination_options_become_headers():
    name, headers = parse_destination("/queue/a?consumer.prefetchSize=10&consumer.exclusive=TRUE"
                                      "&consumer.selector=color%3D'red'&consumer.priority=5")
    assert name == "/queue/a"
    assert headers == {"activemq.prefetchSize": "10", "activemq.exclusive": "true",
                       "selector": "color='red'", "activemq.priority": "5"}
    assert parse_destination("/queue/plain") == ("/queue/plain", {})
    with pytest.raises(ConfigurationError, match="did you mean consumer.prefetchSize"):
        parse_destination("/queue/a?consumer.prefetchsize=1")
    with pytest.raises(ConfigurationError, match="consumer.prefetchSize"):
        parse_destination("/queue/a?consumer.prefetchSize=ten")


def test_destination_kind():
    assert destination_kind("/queue/a") == "queue"
    assert destination_kind("/queue/a", browser=True) == "queue-browser"
    assert destination_kind("/topic/a") == "topic"
    assert destination_kind("/topic/a", durable=True) == "durable-topic"
    assert destination_kind("/temp-topic/x") == "topic"


def test_docs_table_is_generated_from_the_code():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "options.md")
    if not os.path.exists(path):
        pytest.skip("docs/ is not shipped in an installed package")
    with open(path, encoding="utf-8") as fh:
        assert fh.read() == options_table_markdown(), "run: amqstomp options > docs/options.md"


@pytest.mark.parametrize("uri,needle", [
    ("stomp://h:1?jms.prefetchPolicy.all=-5", "from 0 to 2147483647"),
    ("stomp://h:1?jms.prefetchPolicy.queuePrefetch=99999999999", "from 0 to 2147483647"),
    ("stomp://h:1?amqstomp.ackBatchCap=0", "from 1 up"),
    ("stomp://h:1?jms.auditDepth=-1", "from 0 up"),
    ("stomp://h:1?heartBeatGraceFactor=nan", "finite"),
    ("stomp://h:1?heartBeatGraceFactor=-inf", "finite"),
    ("stomp://h:1?stompVersion=9.9", "1.0, 1.1 or 1.2"),
    ("failover:(stomp://a:1)?timeout=-5", "from -1 up"),
    ("failover:(stomp://a:1)?backOffMultiplier=0.5", ">= 1"),
    ("stomp://user:secret@host:1", "jms.userName"),
    ("stomp://[::1", "IPv6"),
    ("failover:(stomp://a:1?jms.clientID=x)", "failover URI's own query"),
    # Java's Boolean.parseBoolean reads these as false: refused, not read as true
    ("failover:(stomp://a:1)?randomize=1", "1 and yes included, as false"),
    ("stomp://h:1?jms.optimizeAcknowledge=yes", "expected true or false"),
    ("failover:(stomp://a:1)?priorityBackup=on", "expected true or false"),
])
def test_bad_values_are_refused(uri, needle):
    with pytest.raises(ConfigurationError) as err:
        parse_uri(uri)
    assert needle in str(err.value)


def test_passwords_never_appear_in_errors():
    for uri in ("stomp://h:1?jms.password=hunter2&jms.bogus=1", "stomp://u:hunter2@h:1",
                "failover:(stomp://a:1)?jms.password=hunter2&nope=1"):
        with pytest.raises(ConfigurationError) as err:
            parse_uri(uri)
        assert "hunter2" not in str(err.value)


def test_trailing_comma_in_a_failover_list():
    # one comma after the last member: allowed, as ActiveMQ's client allows it
    for uri in ("failover:(stomp://a:1,stomp://b:2,)", "failover:(stomp://a:1,stomp://b:2 , )?randomize=false",
                "failover:stomp://a:1,stomp://b:2,"):
        assert [e.port for e in parse_uri(uri).endpoints] == [1, 2], uri


@pytest.mark.parametrize("uri, side, index", [
    ("failover:(stomp://a:1,,stomp://b:2)", "after", 21),
    ("failover:(stomp://a:1, ,stomp://b:2)", "after", 21),
    ("failover:(stomp://a:1,stomp://b:2,,)", "after", 33),
    ("failover:(,stomp://a:1)", "before", 10),
    ("failover:( , stomp://a:1)", "before", 11),
    ("failover:(,)", "before", 10),
    ("failover:stomp://a:1,,stomp://b:2?randomize=false", "after", 20),
    # the index is the shown (redacted) URI's
    ("failover:(stomp://u:hunter2@a:1,,stomp://b:2)", "after", 25),
])
def test_an_empty_member_of_a_failover_list_is_refused_naming_the_comma(uri, side, index):
    """A comma with no broker before it, or two with none between: ActiveMQ's client would
    take an empty URI for a broker there."""
    with pytest.raises(ConfigurationError) as err:
        parse_uri(uri)
    message = str(err.value)
    assert isinstance(err.value, ValueError)
    assert "hunter2" not in message
    shown = uri.replace("u:hunter2@", "***@")
    assert message.startswith("failover URI %r has an empty broker: no broker %s the ',' at index %d "
                              % (shown, side, index)), message
    assert shown[index] == ","


def test_consumer_option_ranges():
    with pytest.raises(ConfigurationError, match="from 0 to 127"):
        parse_destination("/queue/a?consumer.priority=200")
    with pytest.raises(ConfigurationError, match="from 0 to"):
        parse_destination("/queue/a?consumer.prefetchSize=-1")


class TestCheckDestinationCache:
    """check_destination remembers the names it accepted (a dict lookup per SEND
    instead of the prefix scan: bench/instructions.py produce_async), bounded."""

    def test_refusals_are_never_remembered(self):
        from amqstomp.exception import InvalidDestinationError
        from amqstomp.uri import check_destination
        check_destination("/queue/cache.a")
        check_destination("/queue/cache.a")  # the remembered path
        for bad in ("/queue/", " ", "/queue/a,/topic/ ", ""):
            for _ in range(2):  # refused the second time too: a refusal is not remembered
                with pytest.raises(InvalidDestinationError):
                    check_destination(bad)
        for bad in (b"/queue/cache.a", ["/queue/cache.a"], None):
            with pytest.raises(TypeError, match="must be a str"):
                check_destination(bad)

    def test_bounded(self):
        from amqstomp._core import destinations
        for i in range(3 * destinations.ACCEPTED_CACHE_SIZE):
            destinations.check_destination("/queue/cache.%d" % i)
        assert 0 < len(destinations._ACCEPTED) <= destinations.ACCEPTED_CACHE_SIZE
        destinations.check_destination("/queue/cache.1")  # still accepted after the cache was emptied


def test_booleans_are_true_or_false_in_any_case_as_in_java():
    assert parse_uri("failover:(stomp://a:1)?randomize=FALSE").failover_options["randomize"] is False
    assert parse_uri("failover:(stomp://a:1)?randomize=True").failover_options["randomize"] is True
