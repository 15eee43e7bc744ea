"""``python -m amqstomp``: the command line (see :mod:`amqstomp.cli`).

After :func:`amqstomp.install_as_stomp` this module is also ``stomp.__main__``:
``from stomp.__main__ import StompCLI, main`` and
``runpy.run_module("stomp", run_name="__main__")`` (what ``python -m stomp``
does) give amqstomp's client, which has the names of stomp.py 9.0's module
(:class:`StompCLI`, :class:`SubscriptionInfo`, :data:`heartbeat_pattern`,
:func:`do_nothing_loop`, :func:`main`, and what it imports from stomp.py's
other modules). Importing it runs nothing. ``from stomp.__main__ import *`` gives
stomp.py's names, the modules it imports included, but for its ``docopt`` (the
argument parser it uses; amqstomp's is argparse) and ``MulticastConnection``
(stomp.py's UDP adapter, not provided).
"""
import base64
import json
import os
import re
import sys
import time
from cmd import Cmd
from functools import partial

import amqstomp as stomp  # stomp.py's module imports its package as `stomp`
from .cli import main
from .cli.shell import StompCLI, SubscriptionInfo, do_nothing_loop, heartbeat_pattern
from .connect import StompConnection10, StompConnection11, StompConnection12
from .listener import ConnectionListener, StatsListener

__all__ = ["StompCLI", "SubscriptionInfo", "do_nothing_loop", "heartbeat_pattern", "main",
           "StompConnection10", "StompConnection11", "StompConnection12", "ConnectionListener", "StatsListener",
           # stomp.py's module has no __all__: its star import also gives what it imports
           "Cmd", "base64", "json", "os", "partial", "re", "stomp", "sys", "time"]

if __name__ == "__main__":
    sys.exit(main())
