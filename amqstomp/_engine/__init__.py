"""The engine: what every API does the same way on top of the sockets.

* :mod:`.client` -- :class:`~amqstomp._engine.client.Client`: which socket each
  frame goes on (failover-aware writes, transactions pinned to their BEGIN's
  socket, ACKs to the delivering socket: :mod:`.acknowledging`) and SUBSCRIBE
  gated on its RECEIPT (the replay after a reconnect, over failover:
  :mod:`.subscribing`), for both APIs.

The socket engine itself (:class:`amqstomp.transport.Transport`), the
reconnect loop and socket ledger (:mod:`amqstomp.failover`) and the
subscription windows (:mod:`amqstomp.subscription`) sit beside it; the facades
(:mod:`amqstomp.connection`, :mod:`amqstomp.jms`) use all of them through a
``Client``.
"""
