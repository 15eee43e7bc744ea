"""The command line of stomp.py's client (its docopt usage), on amqstomp:
``amqstomp [options] [URI]``, or ``python -m amqstomp``.

stomp.py's options: ``-H/--host``, ``-P/--port``, ``-U/--user``,
``-W/--password``, ``-F/--file``, ``-S/--protocol``, ``-L/--listen``,
``-V/--verbose``, ``--heartbeats cx,cy``, ``--ssl`` with ``--ssl-key-file``,
``--ssl-cert-file``, ``--ssl-ca-file``, ``--ssl-insecure``, ``--version``.
amqstomp's: a positional ``URI`` (or ``-H URI``: an ActiveMQ URI, see
:mod:`amqstomp.cli.target`), ``--timeout`` (seconds for the first connect),
``--debug`` (amqstomp's log on stderr; otherwise it is silent, the errors
being printed as lines of their own).

Exit status: 0; 1 when the connect failed (one line on stderr), a ``-F``
command failed or ``-L`` lost its connection; 2 for a usage error (argparse's
usage and a line naming the option: a bad ``-P``, ``-S``, ``--heartbeats``
(stomp.py printed "Invalid heartbeats, expecting cx,cy" and exited 1),
``--timeout``, a ``-F`` file that is not there, an empty ``-L``), a bad URI or option, or a target written ``host:port`` (the error names ``-H host -P port`` and
``stomp://host:port``, the forms that work).
"""
import argparse
import logging
import os
import re
import sys
from typing import Optional, Sequence, TextIO, Tuple

import amqstomp
from ..exception import ConfigurationError, ConnectFailedException
from .shell import CONNECT_TIMEOUT_S, StompCLI, heartbeat_pattern
from .target import connect_failure, is_uri, parse_target

__all__ = ["build_parser", "main", "host_and_port_typed"]

_HOST_PORT = re.compile(r"\[(?P<v6>[^\]]+)\]:(?P<port6>[0-9]+)|(?P<host>[^:\[\]]+):(?P<port>[0-9]+)")


def host_and_port_typed(text: str) -> Optional[Tuple[str, str]]:
    """``(host, port)`` when ``text``, a target that is not a URI, is written
    ``host:port`` (or ``[IPv6]:port``): a form stomp.py's ``-H`` does not take
    (it looks the whole text up as a host name). None for anything else, IPv6
    addresses (``::1``, ``fe80::1%eth0``) included."""
    found = _HOST_PORT.fullmatch(text)
    if found is None:
        return None
    if found.group("v6") is not None:
        return found.group("v6"), found.group("port6")
    return found.group("host"), found.group("port")


def _host_and_port_error(parser: argparse.ArgumentParser, text: str) -> None:
    """A usage error for ``text`` when it is ``host:port``: the two forms that work."""
    typed = host_and_port_typed(text)
    if typed is not None:
        parser.error("%r is a host and a port: write -H %s -P %s, or the URI stomp://%s"
                     % (text, typed[0], typed[1], text))


def _port(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a port number" % text) from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError("must be from 1 to 65535, got %d" % value)
    return value


def _heartbeats(text: str) -> Tuple[int, int]:
    """``--heartbeats cx,cy``: two whole numbers of milliseconds (stomp.py's pattern)."""
    if not heartbeat_pattern.fullmatch(text):
        raise argparse.ArgumentTypeError("invalid heartbeats %r, expecting cx,cy (two whole numbers of "
                                         "milliseconds, e.g. 10000,10000)" % text)
    send, receive = text.split(",")
    return int(send), int(receive)


def _destination(text: str) -> str:
    """``-L DESTINATION``: a name (an empty one would listen to nothing until Ctrl-C)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a destination name such as /queue/orders is expected, got %r" % text)
    return text


def _command_file(text: str) -> str:
    """``-F FILENAME``: a file that exists and is not a directory (checked before connecting;
    stomp.py connected, printed "File ... was not found" and exited 0). A pipe is a file here, as
    in stomp.py: ``-F <(printf ...)``, ``-F /dev/stdin`` (read once, to its end)."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError("File %s was not found" % text)
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError("%s is a directory, not a file of commands" % text)
    return text


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError("must be a number of seconds above 0, got %r" % text)
    return value


def build_parser() -> argparse.ArgumentParser:
    """stomp.py's options (its docopt usage), plus amqstomp's ``URI``, ``--timeout``, ``--debug``."""
    p = argparse.ArgumentParser(
        prog="amqstomp", description="STOMP command-line client: stomp.py's (python -m stomp), on amqstomp.",
        epilog="amqstomp demo | broker | options: amqstomp's own tools (amqstomp demo --help); "
               "the documentation's 'Command line' page has the rest")
    p.add_argument("uri", nargs="?", metavar="URI",
                   help="where to connect, as an ActiveMQ URI (stomp://host:port, stomp+ssl://..., "
                        "failover:(stomp://a:61613,stomp://b:61613)); the same as -H URI")
    p.add_argument("--version", action="version", version=amqstomp.__version__,
                   help="show the version number and exit")
    p.add_argument("-H", "--host", default=None,
                   help="host name or IP address to connect to, or an ActiveMQ URI [default: localhost]")
    p.add_argument("-P", "--port", type=_port, default=None, help="STOMP port [default: 61613]")
    p.add_argument("-U", "--user", default=None, help="user name for the connection")
    p.add_argument("-W", "--password", default=None, help="password for the connection")
    p.add_argument("-F", "--file", type=_command_file, default=None, metavar="FILENAME",
                   help="run the commands in this file instead of prompting for them")
    p.add_argument("-S", "--protocol", default=None, choices=("1.0", "1.1", "1.2"),
                   help="STOMP protocol version [default: 1.1, or the URI's stompVersion]")
    p.add_argument("-L", "--listen", type=_destination, default=None, metavar="DESTINATION",
                   help="listen for messages on this destination (no prompt) until Ctrl-C")
    p.add_argument("-V", "--verbose", action="store_true",
                   help="print every header of the frames that arrive, and every frame sent")
    p.add_argument("--heartbeats", type=_heartbeats, default=None, metavar="CX,CY",
                   help="heart-beats cx,cy (ms) to ask for with protocol 1.1 or later [default: 0,0]")
    p.add_argument("--ssl", action="store_true", help="connect over TLS")
    p.add_argument("--ssl-key-file", default=None, help="TLS client key file")
    p.add_argument("--ssl-cert-file", default=None, help="TLS client certificate file")
    p.add_argument("--ssl-ca-file", default=None, help="CA certificates to check the broker with")
    p.add_argument("--ssl-insecure", action="store_true", help="do not check the broker's certificate")
    p.add_argument("--timeout", type=_positive_seconds, default=None,
                   help="seconds the connect may take, all attempts [default: %g]" % CONNECT_TIMEOUT_S)
    p.add_argument("--debug", action="store_true", help="amqstomp's debug log on stderr")
    return p


def main(argv: Optional[Sequence[str]] = None, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    """Parse stomp.py's options (``argv``: ``sys.argv[1:]`` when None) and run
    the shell, a ``-F`` file or a ``-L`` listener. Returns the exit status: 0,
    1 when the connect failed (one line on stderr saying why) or a command of
    ``-F`` failed; argparse exits 2 on a usage error."""
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.CRITICAL,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.uri and args.host:
        parser.error("give the target once: -H %s or %s" % (args.host, args.uri))
    for given in (args.uri, args.host):
        if given and not is_uri(given):
            _host_and_port_error(parser, given)
    if args.uri and not is_uri(args.uri):
        parser.error("%r is not a URI (stomp://host:port, failover:(...)): for a host name use -H %s; "
                     "amqstomp's tools go first (amqstomp demo|broker|options ...)" % (args.uri, args.uri))
    host = args.uri or args.host or "localhost"
    if args.port is not None and is_uri(host):
        parser.error("-P does not go with a URI: its port is in the URI (%s)" % host)
    heartbeats = args.heartbeats  # (cx, cy) or None: a bad value is a usage error (status 2)
    listening = args.listen is not None
    try:
        cli = StompCLI(host, args.port if args.port is not None else 61613, args.user, args.password,
                       args.protocol, "" if listening else "> ", args.verbose, heartbeats,
                       use_ssl=args.ssl, ssl_key_file=args.ssl_key_file, ssl_cert_file=args.ssl_cert_file,
                       ssl_ca_file=args.ssl_ca_file, ssl_insecure=args.ssl_insecure, stdin=stdin, stdout=stdout,
                       timeout=args.timeout)
    except ConfigurationError as exc:
        print("amqstomp: %s" % exc, file=sys.stderr)  # a bad target or URI option: one line
        return 2
    except ConnectFailedException as exc:
        print("amqstomp: " + connect_failure(exc, parse_target(host, args.port or 61613), args.user),
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return cli.run_session(args.listen, args.file)
