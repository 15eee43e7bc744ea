"""The command line: the ``amqstomp`` console script and ``python -m amqstomp``.

``amqstomp [options] [URI]`` is stomp.py 9.0's interactive client
(:mod:`amqstomp.cli.shell`): its options (``-H -P -U -W -S -F -L -V
--heartbeats --ssl...``), commands and output, on amqstomp.

``amqstomp demo ...``, ``amqstomp broker ...`` and ``amqstomp options`` are
amqstomp's own tools (:mod:`amqstomp.cli.tools`). They are told apart by the
first argument: one of those three words (after an optional ``-v``) names a
tool; anything else goes to the client. stomp.py's client takes no
positional argument, so no stomp.py command line starts with one of them (to
connect to a host named ``demo``, write ``-H demo``).
"""
import sys
from typing import Optional, Sequence

from .demo import run_demo
from .client import main as shell_main
from .tools import main as tools_main

__all__ = ["TOOLS", "is_tool", "main", "run_demo"]

#: the first arguments that name one of amqstomp's tools
TOOLS = ("demo", "broker", "options")


def is_tool(argv: Sequence[str]) -> bool:
    """True when ``argv`` (without the program name) runs a tool, not the client."""
    first = 0
    while first < len(argv) and argv[first] in ("-v", "--verbose"):  # `amqstomp -v demo`, as before
        first += 1
    return first < len(argv) and argv[first] in TOOLS


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line (``argv``: ``sys.argv[1:]`` when None); returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if is_tool(args):
        return tools_main(args)
    return shell_main(args)
