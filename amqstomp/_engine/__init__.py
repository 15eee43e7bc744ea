"""The engine: what every API does the same way on top of the sockets.

* :mod:`.client` -- :class:`~amqstomp._engine.client.Client`: which socket each
  frame goes on (failover-aware writes, transactions pinned to their BEGIN's
  socket, ACKs to the delivering socket: :mod:`.acknowledging`) and SUBSCRIBE
  gated on its RECEIPT (the replay after a reconnect, over failover:
  :mod:`.subscribing`), for both APIs.

* :mod:`.failover` -- :class:`~amqstomp._engine.failover.Reconnector`, the
  reconnect loop and the planned moves; :mod:`.ledger` --
  :class:`~amqstomp._engine.ledger.SocketLedger`, which socket delivered each message.
* :mod:`.subscription` -- :class:`~amqstomp._engine.subscription.SubscriptionManager`,
  the subscription windows, their ACKs and the dispatch policy.
* :mod:`.dispatch` -- the stomp.py listeners; :mod:`.ports` -- what the engine uses of a driver.

The facades (:mod:`amqstomp.connection`, :mod:`amqstomp.jms`) use them through a ``Client``
over a driver (:mod:`amqstomp._io.driver`).
"""
