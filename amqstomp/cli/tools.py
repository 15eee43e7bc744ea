"""amqstomp's own tools on the command line: ``amqstomp demo``, ``amqstomp
broker`` and ``amqstomp options`` (see :mod:`amqstomp.cli` for how they are
told apart from stomp.py's client options).

Every argument is checked here, before anything starts: a count or size out
of range is a usage error (exit status 2, argparse's ``error:`` line naming
the argument), never a traceback.

``broker`` starts a local ActiveMQ on 127.0.0.1 and keeps it up until Ctrl-C
(or SIGTERM), printing its STOMP URL; exit status 0 after a clean stop, 1 when
it did not start (a port held by another process, a bad configuration: the
broker's reason in a few lines) or died on its own, 2 for a usage error or
ActiveMQ not installed.
"""
import argparse
import logging
import signal
import sys
import time
from typing import Any, Callable, List

from .._core.limits import ACTIVEMQ_LIMITS
from .demo import demo

__all__ = ["main", "build_parser"]

#: bytes a demo body may have: ActiveMQ's frame limit (activemq-stomp
#: ``StompWireFormat`` MAX_DATA_LENGTH) less room for the command and headers
MAX_DEMO_BODY = ACTIVEMQ_LIMITS[2] - 1024


def _int_from(low: int, high: int = 0, what: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` (to ``high`` when set)."""
    def convert(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not a whole number" % text) from None
        if value < low or (high and value > high):
            limit = "from %d to %d" % (low, high) if high else ">= %d" % low
            raise argparse.ArgumentTypeError("must be %s%s, got %d" % (limit, what, value))
        return value
    return convert


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number of seconds" % text) from None
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError("must be a number of seconds above 0, got %s" % text)
    return value


def _queue(text: str) -> str:
    if not text.startswith("/queue/") or len(text) <= len("/queue/"):
        raise argparse.ArgumentTypeError("must be /queue/<name>, got %r" % text)
    return text


def _broker(args: argparse.Namespace) -> int:
    from amqstomp.testing import ActiveMQBroker, BrokerNotAvailable, BrokerStartError

    def stop_on_sigterm(signum: int, frame: Any) -> None:  # `kill` / `timeout`: stop the broker and clean up too
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one must not cut the clean-up
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_sigterm)
    broker = ActiveMQBroker(persistent=args.persistent, stomp_port=args.port, scheduler=args.scheduler)
    try:
        try:
            broker.start()
        except BrokerNotAvailable as exc:
            print("amqstomp broker: %s" % exc, file=sys.stderr)
            return 2
        except BrokerStartError as exc:
            print("amqstomp broker: %s" % exc.summary, file=sys.stderr)
            return 1
        print("ActiveMQ up: %s (pid %s); Ctrl-C stops it" % (broker.url, broker.pid), flush=True)
        while broker.running:
            time.sleep(0.5)
        broker.stop()
        print("amqstomp broker: ActiveMQ exited by itself (status %s)" % broker.returncode, file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM at any point, even while it starts
        print("stopping ActiveMQ", flush=True)
        return 0
    finally:
        broker.stop()


def _options(args: argparse.Namespace) -> int:
    from .._core.uri import options_table_markdown

    print(options_table_markdown(), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``amqstomp demo|broker|options ...``."""
    parser = argparse.ArgumentParser(
        prog="amqstomp", description="amqstomp's tools (without one of these words first, amqstomp is "
                                     "stomp.py's interactive client: amqstomp --help)")
    parser.add_argument("-v", "--verbose", dest="verbose_first", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="TOOL",
                                help="demo, broker or options (amqstomp TOOL --help: its options)")
    d = sub.add_parser("demo", help="producer -> local ActiveMQ -> consumer (client acks)",
                       description="Start a local ActiveMQ, send messages to a queue and consume them with "
                                   "client acknowledgements, showing the rate; the broker is stopped at the end.")
    d.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    d.add_argument("--messages", type=_int_from(1), default=100_000, help="how many, >= 1 (default 100000)")
    d.add_argument("--body-size", type=_int_from(0, MAX_DEMO_BODY, " bytes (ActiveMQ's frame limit)"),
                   default=256, help="bytes per body, 0 to %d (default 256)" % MAX_DEMO_BODY)
    d.add_argument("--prefetch", type=_int_from(1), default=1000,
                   help="consumer prefetch size, >= 1 (default 1000)")
    d.add_argument("--destination", type=_queue, default="/queue/amqstomp.demo",
                   help="the queue, /queue/<name> (default /queue/amqstomp.demo)")
    d.add_argument("--persistent", action="store_true", help="broker with a KahaDB store")
    d.add_argument("--timeout", type=_seconds, default=300.0, help="seconds before giving up (default 300)")
    d.set_defaults(func=demo)
    b = sub.add_parser("broker", help="run a local ActiveMQ until Ctrl-C",
                       description="Run a local ActiveMQ on 127.0.0.1 (STOMP only) and print its URL; Ctrl-C or "
                                   "SIGTERM stops it and removes its directory.")
    b.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    b.add_argument("--port", type=_int_from(1, 65535), default=None, help="STOMP port (default: a free one)")
    b.add_argument("--persistent", action="store_true",
                   help="keep persistent messages in a KahaDB store (default: in memory only)")
    b.add_argument("--scheduler", action="store_true",
                   help="turn ActiveMQ's scheduler on (AMQ_SCHEDULED_* delayed delivery)")
    b.set_defaults(func=_broker)
    o = sub.add_parser("options", help="print the URI option / Python keyword table (docs/options.md)",
                       description="Print, as Markdown, every URI option amqstomp reads (connection options "
                                   "jms.* and amqstomp.*, transport, failover and destination options) with its "
                                   "Python keyword, default and meaning: the table of docs/options.md.")
    o.set_defaults(func=_options)
    return parser


def main(argv: List[str]) -> int:
    """Run ``amqstomp <tool> ...``; returns the exit status (argparse exits 2
    on a usage error)."""
    args = build_parser().parse_args(argv)
    verbose = args.verbose_first or getattr(args, "verbose", False)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    status: int = args.func(args)
    return status
