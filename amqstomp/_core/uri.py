"""The grammar of amqstomp's broker URIs (ActiveMQ's), pure: text in, a
:class:`BrokerURI` out, or :class:`amqstomp.exception.ConfigurationError`.

* ``stomp://host:port?opt=value&...``, ``stomp+ssl://...`` (TLS), ``stomp+nio://``
  (the broker's NIO connector; a plain TCP socket for the client);
* ``failover:(stomp://a:61613,stomp://b:61613)?opt=...`` or without the
  parentheses; ``nested.*`` options go to every member;
* destinations with consumer options (``/queue/a?consumer.prefetchSize=10``)
  are :mod:`amqstomp._core.destinations`'.

An OpenWire ``tcp://`` URI, an unknown ``jms.*``/transport option, or a bad value
raises :class:`amqstomp.exception.ConfigurationError` naming the option and the URI; so
does an empty member of a failover list (a comma with no broker before it, or two in a
row), naming the URI and the comma's index in it (one comma after the last member is
allowed, as ActiveMQ's client allows it).
The option tables are :mod:`amqstomp._core.uri_options`' (the failover's own,
:data:`FAILOVER_OPTIONS`, is here: ``priorityURIs`` is read with this grammar);
:func:`options_table_markdown` documents them all (``docs/options.md``).
:mod:`amqstomp.uri` is the public module that re-exports these names.
"""
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from .option_values import MS as _MS, MS_OR_OFF as _MS_OR_OFF, boolean as _bool, float_min as _float_min
from .option_values import redact as _redact
from .uri_options import (CONNECTION_OPTIONS, CONSUMER_OPTIONS, KEYWORD_ONLY_OPTIONS, TRANSPORT_OPTIONS, Option,
                          convert_option, mask_secrets, option_table, split_query, unknown_option)
from ..exception import ConfigurationError

__all__ = ["FAILOVER_OPTIONS", "Endpoint", "BrokerURI", "parse_uri", "priority_endpoints", "redact",
           "options_table_markdown", "checked_hosts", "failover_members"]


#: Options of a ``failover:`` URI (FailoverTransport's names and defaults).
FAILOVER_OPTIONS = option_table(
    Option("initialReconnectDelay", "initial_reconnect_delay_ms", _MS, 10, "ms before the first reconnect"),
    Option("maxReconnectDelay", "max_reconnect_delay_ms", _MS, 30000, "upper bound of the delay in ms"),
    Option("useExponentialBackOff", "reconnect_use_exponential_back_off", _bool, True,
           "multiply the delay after each failed attempt"),
    Option("backOffMultiplier", "reconnect_back_off_multiplier", _float_min(1.0), 2.0, "the back-off multiplier"),
    Option("maxReconnectAttempts", "max_reconnect_attempts", _MS_OR_OFF, -1,
           "attempts after a connection was lost; -1 = forever"),
    Option("startupMaxReconnectAttempts", "startup_max_reconnect_attempts", _MS_OR_OFF, -1,
           "attempts before the first connection; -1 = forever"),
    Option("randomize", "randomize", _bool, True,
           "pick members in random order; after a loss the member lost is tried last either way"),
    Option("timeout", "timeout_ms", _MS_OR_OFF, -1, "ms a send waits while disconnected; -1 = forever"),
    Option("priorityBackup", "priority_backup", _bool, False,
           "prefer the priority members (priorityURIs, else the first): tried first on every pass unless just "
           "lost, and moved back to once one answers a probe (sent with the reconnect back-off, at least every "
           "maxReconnectDelay ms) while connected to another"),
    Option("priorityURIs", "priority_uris", lambda text: priority_endpoints(text), None,
           "with priorityBackup: the members to prefer, stomp:// URIs separated by commas; None: the first one"),
    Option("rebalanceInterval", "rebalance_interval_ms", _MS, 0,
           "amqstomp's own: every this many ms (at least 1000; 0 = never) move the connection to the next member "
           "that answers (at random with randomize), handing back what it holds first; not with priorityBackup. "
           "ActiveMQ rebalances OpenWire clients from the broker (rebalanceClusterClients), which STOMP never hears"),
)


def priority_endpoints(text: str) -> Tuple[Tuple[str, int], ...]:
    """``(host, port)`` of each ``stomp://host:port`` URI of ``text`` (separated by commas: ``priorityURIs``).
    Raises ConfigurationError (a ValueError): not a STOMP URI, an option in one, or none."""
    found = [_endpoint(m.strip(), text, {}) for m in str(text).split(",") if m.strip()]
    if not found or any(leftover for _, leftover in found):
        raise ConfigurationError("priorityURIs must be stomp://host:port URIs separated by commas, got %r" % (text,))
    return tuple(endpoint.host_and_port for endpoint, _ in found)


@dataclass
class Endpoint:
    """One broker address of a URI."""

    scheme: str  # "stomp", "stomp+ssl", "stomp+nio", "stomp+nio+ssl"
    host: str
    port: int
    options: Dict[str, Any] = field(default_factory=dict)  # TRANSPORT_OPTIONS keywords

    @property
    def tls(self) -> bool:
        return self.scheme.endswith("+ssl")

    @property
    def host_and_port(self) -> Tuple[str, int]:
        return self.host, self.port


@dataclass
class BrokerURI:
    """A parsed broker URI: its endpoints (one, or the members of a failover
    URI), whether it was a ``failover:`` URI, and its options by Python keyword."""

    endpoints: List[Endpoint]
    failover: bool = False
    options: Dict[str, Any] = field(default_factory=dict)  # CONNECTION_OPTIONS keywords
    failover_options: Dict[str, Any] = field(default_factory=dict)  # FAILOVER_OPTIONS keywords

    def __repr__(self) -> str:  # the password masked (reprs end up in logs and exceptions)
        return "BrokerURI(endpoints=%r, failover=%r, options=%r, failover_options=%r)" % (
            self.endpoints, self.failover, mask_secrets(self.options), self.failover_options)


def redact(text: str) -> str:
    """``text`` (a broker URI) with passwords and URI credentials masked."""
    return _redact(text)


_SCHEMES = {"stomp": 61613, "stomp+nio": 61613, "stomp+ssl": 61612, "stomp+nio+ssl": 61612}
_OPENWIRE = ("tcp", "ssl", "nio", "nio+ssl", "vm", "auto", "auto+nio", "auto+ssl", "amqp", "mqtt", "ws", "wss",
             "udp", "http", "https")


def _endpoint(text: str, uri: str, nested: Dict[str, str]) -> Tuple[Endpoint, Dict[str, str]]:
    if "://" not in text:
        raise ConfigurationError("%r in %r is not a URI (expected stomp://host:port)" % (text, uri))
    scheme, rest = text.split("://", 1)
    scheme = scheme.lower()
    if scheme not in _SCHEMES:
        if scheme in _OPENWIRE:
            raise ConfigurationError(
                "%r is not a STOMP URI: amqstomp speaks STOMP, not %s; use stomp://host:61613 "
                "(or stomp+ssl://) and open a STOMP transport connector on the broker" % (uri, scheme))
        raise ConfigurationError("unknown scheme %r in %r (expected stomp, stomp+ssl, stomp+nio)" % (scheme, uri))
    hostport, _, query = rest.partition("?")
    hostport = hostport.rstrip("/")
    if "@" in hostport:
        raise ConfigurationError("credentials in the authority of %r are not supported: use "
                                 "jms.userName and jms.password" % (uri,))
    if hostport.startswith("["):  # [ipv6]:port
        host, bracket, port_text = hostport[1:].partition("]")
        if not bracket or (port_text and not port_text.startswith(":")):
            raise ConfigurationError("bad IPv6 address in %r (expected [address]:port)" % (uri,))
        port_text = port_text[1:]
    else:
        host, _, port_text = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    if not host:
        raise ConfigurationError("no host in %r" % (uri,))
    _check_host(host, text, uri)
    try:
        port = int(port_text) if port_text else _SCHEMES[scheme]
        if not 0 < port < 65536:
            raise ValueError
    except ValueError:
        raise ConfigurationError("bad port %r in %r" % (port_text, uri)) from None
    raw = dict(nested)
    raw.update(split_query(query, uri))
    options: Dict[str, Any] = {}
    leftover: Dict[str, str] = {}
    for key, value in raw.items():
        if key in TRANSPORT_OPTIONS:
            opt = TRANSPORT_OPTIONS[key]
            options[opt.keyword] = convert_option(opt, value, uri)
        else:
            leftover[key] = value
    return Endpoint(scheme, host, port, options), leftover


def _check_host(host: str, member: str, uri: str) -> None:
    """A host name a socket can be opened to: no blanks or control characters,
    labels of 1-63 characters, 253 in all (RFC 1123); IPv6 literals pass."""
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in host):
        raise ConfigurationError("host %r of %r in %r holds a blank or a control character" % (host, member, uri))
    if ":" in host:  # an IPv6 literal (from [..]); the socket layer checks it
        return
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise ConfigurationError("host %r of %r in %r is not a valid host name (each dot-separated label "
                                 "must have 1 to 63 characters)" % (host, member, uri)) from None
    if len(ascii_host) > 253:
        raise ConfigurationError("host name of %r in %r is longer than 253 characters" % (member, uri))


_PORT_DIGITS = re.compile(r"\s*\+?[0-9]+\s*")


def _port_number(port: Any) -> int:
    """``port`` as an int, or -1: an int (not a bool), or a str of decimal digits, as
    ``socket.getaddrinfo`` reads a numeric service (``"61613"``); a service name
    (``"stomp"``), a float or None is not a port number here."""
    if isinstance(port, str):
        return int(port) if _PORT_DIGITS.fullmatch(port) else -1
    if isinstance(port, (bool, float)):
        return -1
    try:
        return operator.index(port)
    except TypeError:
        return -1


def checked_hosts(host_and_ports: Any, name: str = "host_and_ports") -> List[Tuple[str, int]]:
    """``host_and_ports`` (called ``name`` in the messages) as a list of (host, port),
    the threaded and the asyncio APIs' one rule.

    A host is a non-empty str without blanks or control characters (None, bytes,
    ``""`` would be turned into text and looked up in DNS); a port is an int from 1 to
    65535 or a str of its decimal digits (``"61613"``: what ``socket`` takes, and so
    stomp.py).

    Raises:
        ConfigurationError: ``name`` itself is a str or a bare (host, port) pair, or an
            entry is no (host, port) pair, has a bad host, or a port that is not a number
            from 1 to 65535 (``"abc"``, ``"stomp"``, 0, 1.5): the message names the value and
            its entry.
    """
    if isinstance(host_and_ports, (str, bytes)) or (
            isinstance(host_and_ports, tuple) and len(host_and_ports) == 2 and isinstance(host_and_ports[1], int)):
        raise ConfigurationError("%s must be a list of (host, port) pairs, got %r (one broker: "
                                 "[(host, port)])" % (name, host_and_ports))
    hosts: List[Tuple[str, int]] = []
    for entry in host_and_ports:
        try:
            host, port = entry
        except (TypeError, ValueError):
            raise ConfigurationError("each entry of %s must be a (host, port) pair, got %r"
                                     % (name, entry)) from None
        if not isinstance(host, str) or not host.strip() or any(ord(ch) < 33 or ord(ch) == 127 for ch in host):
            raise ConfigurationError("bad host %r in %s entry %r: a host name or address as a "
                                     "non-empty str (no blanks or control characters) is expected"
                                     % (host, name, entry))
        number = _port_number(port)
        if not 0 < number < 65536:
            raise ConfigurationError("bad port %r in %s entry %r: an int from 1 to 65535 (or a str of its "
                                     "digits, '61613') is expected" % (port, name, entry))
        hosts.append((host, number))
    return hosts


def _apply_connection_options(raw: Dict[str, str], uri: str, target: Dict[str, Any]) -> None:
    for key, value in raw.items():
        opt = CONNECTION_OPTIONS.get(key)
        if opt is None:
            raise unknown_option("option", key, uri, list(CONNECTION_OPTIONS) + list(TRANSPORT_OPTIONS))
        target[opt.keyword] = convert_option(opt, value, uri)


#: a comma that separates two members of a failover URI: one the next member's scheme follows (a
#: heartBeat value holds a comma too)
_MEMBER_COMMA = re.compile(r",(?=\s*[A-Za-z][A-Za-z0-9+.-]*://)")


def failover_members(text: str, start: int, end: int) -> List[str]:
    """The member URLs of the failover URI ``text`` (each stripped), from its comma-separated
    list at ``text[start:end]`` (inside the parentheses, or after ``failover:`` without them).
    One comma after the last member is allowed, as ActiveMQ's client allows it.

    Raises:
        ConfigurationError: an empty member: a comma with no broker before it
            (``failover:(,stomp://a:61613)``), or two with none between them
            (``(stomp://a:61613,,stomp://b:61613)``), which ActiveMQ's client would read as a
            broker with an empty URI. The message shows the URI (redacted) and the 0-based index
            of the comma in it. An empty list (``failover:()``) is the caller's to refuse.
    """
    members: List[str] = []
    if not text[start:end].strip():
        return members
    bounds = [m.start() for m in _MEMBER_COMMA.finditer(text, start, end)] + [end]
    piece_start = start
    for piece_end in bounds:
        piece = text[piece_start:piece_end]
        member = piece.strip(" \t,")
        if not member:  # only the first piece can be: the others start with a scheme
            comma, side = text.find(",", piece_start, piece_end + 1), "before"
        else:
            after = text.index(member, piece_start) + len(member)
            commas = text.count(",", after, piece_end)
            if commas == 0 or (commas == 1 and piece_end == end):  # a comma after the last one: allowed
                members.append(member)
                piece_start = piece_end + 1
                continue
            comma, side = text.index(",", after), "after"
        raise ConfigurationError("failover URI %r has an empty broker: no broker %s the ',' at index %d "
                                 "(0-based); remove that comma or name a broker there"
                                 % (_redact(text), side, len(_redact(text[:comma]))))
    return members


def parse_uri(uri: str) -> BrokerURI:
    """Parse a broker URI (see the module docstring for the grammar).

    Returns:
        BrokerURI: endpoints with their transport options; connection options
        (``jms.*``, ``amqstomp.*``) by snake_case keyword; failover options.

    Raises:
        ConfigurationError: not a STOMP URI (``tcp://`` is OpenWire), an unknown
            option, a bad value, no host, a bad port, an empty member of a failover list
            (:func:`failover_members`).
    """
    if not isinstance(uri, str) or not uri.strip():
        raise ConfigurationError("broker URI must be a non-empty str, got %r" % (uri,))
    text = uri.strip()
    uri = _redact(text)  # what error messages show
    if text.lower().startswith("failover:"):
        start = len("failover:")
        if text.startswith("(", start):
            close = text.find(")", start)
            if close < 0:
                raise ConfigurationError("unbalanced parenthesis in %r" % (uri,))
            members = failover_members(text, start + 1, close)
            query = text[close + 1:]
            if query and not query.startswith("?"):
                raise ConfigurationError("expected '?' after ')' in %r" % (uri,))
            query = query[1:]
        else:
            # without parentheses the outer query is the last member's; ActiveMQ reads it as the failover's
            mark = text.find("?", start)
            members = failover_members(text, start, len(text) if mark < 0 else mark)
            query = "" if mark < 0 else text[mark + 1:]
        raw = split_query(query, uri)
        nested = {k[len("nested."):]: v for k, v in raw.items() if k.startswith("nested.")}
        failover_options: Dict[str, Any] = {}
        connection_raw: Dict[str, str] = {}
        for key, value in raw.items():
            if key.startswith("nested."):
                continue
            if key in FAILOVER_OPTIONS:
                opt = FAILOVER_OPTIONS[key]
                failover_options[opt.keyword] = convert_option(opt, value, uri)
            elif key in CONNECTION_OPTIONS:
                connection_raw[key] = value
            elif key in TRANSPORT_OPTIONS:
                raise ConfigurationError("%s is an option of each broker, not of the failover URI %r: give it to "
                                         "every member as nested.%s=..., or to one inside the parentheses "
                                         "(failover:(stomp://host:port?%s=...))" % (key, uri, key, key))
            else:
                raise unknown_option("failover option", key, uri, list(FAILOVER_OPTIONS) + list(CONNECTION_OPTIONS))
        endpoints = []
        options: Dict[str, Any] = {}
        for member in members:
            endpoint, leftover = _endpoint(member, uri, nested)
            for key in sorted(leftover):
                if key in CONNECTION_OPTIONS:
                    raise ConfigurationError("option %s on a member of %r: connection options go on the failover "
                                             "URI's own query (failover:(...)?%s=...)" % (key, uri, key))
                where = "nested.%s" % key if key in nested else key
                raise unknown_option("transport option", where, uri,
                               ["nested." + k for k in TRANSPORT_OPTIONS] if key in nested else list(TRANSPORT_OPTIONS))
            endpoints.append(endpoint)
        if not endpoints:
            raise ConfigurationError("failover URI %r names no broker" % (uri,))
        _apply_connection_options(connection_raw, uri, options)
        return BrokerURI(endpoints, True, options, failover_options)
    endpoint, leftover = _endpoint(text, uri, {})
    options = {}
    _apply_connection_options(leftover, uri, options)
    return BrokerURI([endpoint], False, options, {})


def options_table_markdown() -> str:
    """The URI option ↔ Python keyword table, as Markdown: the whole of docs/options.md."""
    lines = ["# URI options and Python keywords", "",
             "Generated from the tables of `amqstomp/_core/uri_options.py` and `amqstomp/_core/uri.py` (public",
             "as `amqstomp.uri`) by `amqstomp options > docs/options.md`; a test keeps the two equal.",
             "URI options keep ActiveMQ's camelCase; Python keywords are snake_case, with",
             "`_ms` for milliseconds. An unknown option raises `amqstomp.exception.ConfigurationError`;",
             "so does a boolean other than `true`/`false` (ActiveMQ's Java client reads `1` or `yes` as false).", ""]
    for title, table in (("Connection options (`jms.*`, `amqstomp.*`)", CONNECTION_OPTIONS),
                         ("Transport options (each `stomp://` member)", TRANSPORT_OPTIONS),
                         ("Failover options (`failover:(...)?...`)", FAILOVER_OPTIONS),
                         ("Destination options (`/queue/a?consumer.*`) and the SUBSCRIBE header each becomes",
                          CONSUMER_OPTIONS)):
        lines += ["## " + title, "", "| URI option | Python keyword / header | default | meaning |",
                  "|---|---|---|---|"]
        for opt in table.values():
            default = "" if opt.default is None else "`%s`" % (opt.default,)
            lines.append("| `%s` | `%s` | %s | %s |" % (opt.uri_name, opt.keyword, default, opt.meaning))
        lines.append("")
    lines += ["## Keywords without a URI form (`ConnectionFactory(url, ssl_context=...)`)", "",
              "| Python keyword | meaning |", "|---|---|"]
    lines += ["| `%s` | %s |" % item for item in KEYWORD_ONLY_OPTIONS.items()]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(options_table_markdown(), end="")
