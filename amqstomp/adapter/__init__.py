"""stomp.py's ``stomp.adapter`` package, where its transports other than plain
TCP live (``stomp.adapter.ws``: STOMP over WebSocket; ``stomp.adapter.multicast``).

Neither is provided by amqstomp yet: ``import stomp.adapter.ws`` after
:func:`amqstomp.install_as_stomp` raises ImportError saying so.
"""

from typing import List

__all__: List[str] = []
