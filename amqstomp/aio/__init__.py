"""amqstomp's asyncio API, over the same sans-I/O core as the threaded APIs.

::

    import asyncio
    import amqstomp.aio

    async def main() -> None:
        async with amqstomp.aio.connect("stomp://127.0.0.1:61613", heartbeats=(10000, 10000)) as client:
            await client.send("/queue/orders", b"hello")            # returns once the RECEIPT came
            async with client.subscribe("/queue/orders", ack="client-individual", prefetch_size=1) as sub:
                message = await sub.get(timeout=5)
                await message.ack()
            async with client.transaction() as tx:                  # COMMIT's RECEIPT awaited
                await tx.send("/queue/orders", b"in a transaction")

    asyncio.run(main())

One socket per client and no task per message: the loop hands what the socket read to
the socket's protocol object (:mod:`amqstomp.aio._link`), which feeds the core
(:class:`amqstomp._core.state.ProtocolState`: framing by the compiled codec, receipts,
heart-beat deadlines) and appends each MESSAGE to its subscription's queue; the
prefetch window and ACK batching are :mod:`amqstomp._core.acks` and
:mod:`amqstomp.flow`, the transaction guards :mod:`amqstomp._core.transactions`.
Exceptions are :mod:`amqstomp.exception`'s, as in the threaded APIs. A ``failover:``
URI reconnects by the core's plan (:mod:`amqstomp._core.backoff`) and replays the
subscriptions; an ACK of a lost socket's message raises AcknowledgeInterruptedError.
A client belongs to the loop it was connected on: an await of it, its subscriptions,
transactions or messages on another loop (another thread's, a later ``asyncio.run()``)
raises :class:`~amqstomp.exception.WrongEventLoopError` (a RuntimeError) before anything is
written; from another thread use ``asyncio.run_coroutine_threadsafe(coro, loop)``.

Licensed under the Apache License, Version 2.0.
"""
from ..exception import WrongEventLoopError
from .client import Client, connect
from .subscription import Message, Subscription, SubscriptionClosedError
from .transaction import Transaction

__all__ = ["connect", "Client", "Subscription", "Message", "Transaction", "SubscriptionClosedError",
           "WrongEventLoopError"]
