"""stomp.py's ``stomp.adapter`` package, where its transports other than plain
TCP live: ``stomp.adapter.ws`` (STOMP over WebSocket, :mod:`amqstomp.adapter.ws`;
its WebSocket library is the optional extra ``amqstomp[ws]``, needed only when
a connection is made) and ``stomp.adapter.multicast``, which amqstomp does not
provide (``import stomp.adapter.multicast`` after
:func:`amqstomp.install_as_stomp` raises ImportError saying so).
"""

from typing import List

import amqstomp as stomp  # stomp.py's package binds `stomp` (its `import stomp.adapter.ws`)
from . import ws

#: what ``from stomp.adapter import *`` gives (stomp.py's also gives its ``multicast``, not provided)
__all__: List[str] = ["ws", "stomp"]
