"""The engine: what every API does the same way on top of the sockets.

* :mod:`.client` -- :class:`~amqstomp._engine.client.Client`: which socket each
  frame goes on (failover-aware writes, transactions pinned to their BEGIN's
  socket, ACKs to the delivering socket) and the replay of subscriptions after
  a reconnect.

The socket engine itself (:class:`amqstomp.transport.Transport`), the
reconnect loop and socket ledger (:mod:`amqstomp.failover`) and the
subscription windows (:mod:`amqstomp.subscription`) sit beside it; the facades
(:mod:`amqstomp.connection`, :mod:`amqstomp.jms`) use all of them through a
``Client``.
"""
