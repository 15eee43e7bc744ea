"""amqstomp: a STOMP 1.0/1.1/1.2 client for ActiveMQ Classic, a drop-in for stomp.py.

``import amqstomp as stomp`` keeps stomp.py code working:

    conn = stomp.Connection([("127.0.0.1", 61613)])
    conn.set_listener("", MyListener())
    conn.connect("admin", "admin", wait=True)
    conn.subscribe(destination="/queue/x", id=1, ack="auto")
    conn.send(body="hi", destination="/queue/x")

The documentation (docs/ in the source tree; ``bash scripts/docs.sh`` builds the
site) starts at "Getting started" (docs/getting-started.md); "Switching from
stomp.py" (docs/guides/stomp-py.md) says what differs from stomp.py and why.

Licensed under the Apache License, Version 2.0.
"""
from typing import TYPE_CHECKING, Any, List

from . import exception, listener, utils
from .connection import (
    Connection,
    Connection10,
    Connection11,
    Connection12,
    StompConnection10,
    StompConnection11,
    StompConnection12,
)
from .listener import ConnectionListener, PrintingListener, StatsListener, WaitingListener
from . import adapter, connect, constants, log, protocol, transport  # stomp.py's other modules
from .adapter.ws import WSConnection, WSStompConnection  # STOMP over WebSocket (the 'ws' extra)
from ._compat import tuple_version
# amqstomp's own names, outside __all__ (not in stomp.py's star import): ``X as X`` re-exports them
from . import colours as colours
from ._compat import install_as_stomp as install_as_stomp
from .listener import TestListener as TestListener
# client-side balancing over several brokers (docs/guides/scaling-out.md)
from .fanin import FanInConnection as FanInConnection
from .spreading import SpreadingConnection as SpreadingConnection

if TYPE_CHECKING:  # pragma: no cover - for type checkers; at run time __getattr__ loads them
    from .jms import (
        AUTO_ACKNOWLEDGE as AUTO_ACKNOWLEDGE,
        CLIENT_ACKNOWLEDGE as CLIENT_ACKNOWLEDGE,
        DUPS_OK_ACKNOWLEDGE as DUPS_OK_ACKNOWLEDGE,
        INDIVIDUAL_ACKNOWLEDGE as INDIVIDUAL_ACKNOWLEDGE,
        SESSION_TRANSACTED as SESSION_TRANSACTED,
        ConnectionFactory as ConnectionFactory,
        Queue as Queue,
        Topic as Topic,
    )

#: The JMS-style API's entry points and constants, also importable from here;
#: ``amqstomp.jms`` is imported on the first use of one (PEP 562), not by
#: ``import amqstomp``.
_JMS_NAMES = frozenset((
    "ConnectionFactory", "Queue", "Topic", "AUTO_ACKNOWLEDGE", "CLIENT_ACKNOWLEDGE", "DUPS_OK_ACKNOWLEDGE",
    "INDIVIDUAL_ACKNOWLEDGE", "SESSION_TRANSACTED",
))


if not TYPE_CHECKING:  # type checkers see the imports above (and no catch-all __getattr__)
    def __getattr__(name: str) -> Any:
        """``amqstomp.ConnectionFactory`` and the other JMS names: loaded from
        :mod:`amqstomp.jms` when first asked for.

        Raises:
            AttributeError: ``name`` is not an attribute of amqstomp.
        """
        if name in _JMS_NAMES:
            from . import jms  # lazy on purpose: import amqstomp must not load the JMS API

            value = getattr(jms, name)
            globals()[name] = value  # later lookups do not come here
            return value
        raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__() -> List[str]:
    return sorted(set(globals()) | _JMS_NAMES)


__version__ = "0.1.0"

#: What ``from amqstomp import *`` (``from stomp import *``) gives: stomp.py 9.0's names, no
#: more (its package has no ``__all__``: the connection classes, listeners and the modules it
#: imported). amqstomp's own (``install_as_stomp``, ``TestListener``, ``colours``,
#: ``__version__``, and the JMS-style API's ``ConnectionFactory``, ``Queue``, ``Topic`` and
#: acknowledge modes) are imported by name: a star import never shadows a name of the
#: importer's (``Queue`` after ``from queue import Queue``) nor loads the JMS API.
__all__ = [
    "Connection",
    "Connection10",
    "Connection11",
    "Connection12",
    "StompConnection10",
    "StompConnection11",
    "StompConnection12",
    "WSConnection",
    "WSStompConnection",
    "ConnectionListener",
    "StatsListener",
    "WaitingListener",
    "PrintingListener",
    "tuple_version",
    "adapter",
    "connect",
    "constants",
    "exception",
    "listener",
    "log",
    "protocol",
    "transport",
    "utils",
]
