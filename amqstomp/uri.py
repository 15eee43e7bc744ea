"""ActiveMQ-style URIs and options: one table maps each camelCase URI option to
its snake_case Python keyword (``docs/options.md`` is generated from it).

Grammar (ActiveMQ's):

* ``stomp://host:port?opt=value&...``, ``stomp+ssl://...`` (TLS), ``stomp+nio://``
  (the broker's NIO connector; a plain TCP socket for the client);
* ``failover:(stomp://a:61613,stomp://b:61613)?opt=...`` or without the
  parentheses; ``nested.*`` options go to every member;
* destinations with consumer options: ``/queue/a?consumer.prefetchSize=10``
  (ActiveMQ ignores ``?consumer.*`` over STOMP, so amqstomp turns each option
  into the matching SUBSCRIBE header, e.g. ``activemq.prefetchSize:10``).

An OpenWire ``tcp://`` URI, an unknown ``jms.*``/transport option, or a bad value
raises :class:`amqstomp.exception.ConfigurationError` naming the option and the URI; so
does an empty member of a failover list (a comma with no broker before it, or two in a
row), naming the URI and the comma's index in it (one comma after the last member is
allowed, as ActiveMQ's client allows it).

The public face of the pure core's modules, which hold the code (issue 22):
:mod:`amqstomp._core.uri` (the grammar, the failover options),
:mod:`amqstomp._core.uri_options` (the other option tables) and
:mod:`amqstomp._core.destinations` (destination names and their options).
``python -m amqstomp.uri`` prints the options table (``amqstomp options`` too).
"""
from ._core.destinations import ACCEPTED_CACHE_SIZE as ACCEPTED_CACHE_SIZE
from ._core.destinations import DESTINATION_PREFIXES, check_destination, destination_kind, parse_destination
from ._core.uri import FAILOVER_OPTIONS, BrokerURI, Endpoint, options_table_markdown, parse_uri, priority_endpoints
from ._core.uri import redact as redact
from ._core.uri_options import CONNECTION_OPTIONS, CONSUMER_OPTIONS, KEYWORD_ONLY_OPTIONS, TRANSPORT_OPTIONS, Option
from ._core.uri_options import SECRET_KEYWORDS as SECRET_KEYWORDS, mask_secrets as mask_secrets

__all__ = [
    "Option", "CONNECTION_OPTIONS", "TRANSPORT_OPTIONS", "FAILOVER_OPTIONS", "CONSUMER_OPTIONS",
    "KEYWORD_ONLY_OPTIONS", "Endpoint", "BrokerURI", "parse_uri", "priority_endpoints", "DESTINATION_PREFIXES",
    "check_destination", "parse_destination", "destination_kind", "options_table_markdown",
]

if __name__ == "__main__":
    print(options_table_markdown(), end="")
