"""The amqstomp.aio consumers of the chaos harness (bench/_chaos.py: modes ``aio-*``).

Each runs its own event loop in one harness thread (the harness is threaded): a ``failover:``
client through the mode's proxies, the mode's subscription plus an idle one (every failover
replays both, receipt-gated), until the consumer is stopped; then ``client.close()``. The
producer of an aio mode is the stomp.py API's (the harness's :class:`Producer`): what is
checked here is the asyncio consumer.

* ``aio-auto``: ``ack:auto`` through the handler form (``sub.run``, 2 workers): at-most-once
  (what is buffered or in flight when a socket dies is the broker's loss, as ``stomp-auto``);
* ``aio-individual``: ``ack:client-individual``, ``async``-iterated (``get``), each message
  ACKed with a receipt (``await message.ack(receipt=True)``): a normal return is settled (strict);
* ``aio-client``: ``ack:client``, every 1..8 messages (or after 0.2 s idle) a cumulative ACK of
  the newest with a receipt: settles all taken before it (strict);
* ``aio-handler``: ``ack:client-individual`` through the handler form, 4 workers, a handler that
  raises on 5 % of first deliveries (local redelivery by the policy, then its ACK on return);
  at-least-once: nothing lost, nothing left; the handler form's ACK has no receipt, so a
  redelivery after it is allowed (not strict).

The held faults (bench/_chaos_faults.py) are not planned for aio consumers (their ``unread``
flood writes on the consumer's own connection from a harness thread).
"""
from __future__ import annotations

import asyncio
import random
import threading
from typing import TYPE_CHECKING, Any, List, Optional

import amqstomp.exception as _exc

if TYPE_CHECKING:
    from bench._chaos import Consumer

#: an ACK with a receipt that failed this way was not settled (documented for a failover client); not an error
AIO_ACK_UNSETTLED = (_exc.AcknowledgeInterruptedError, _exc.ConnectionClosedException, _exc.NotConnectedException,
                     _exc.ReceiptTimeout)
#: what each aio mode subscribes with
AIO_ACK = {"auto": "auto", "individual": "client-individual", "client": "client", "handler": "client-individual"}


class AioConnection:
    """The consumer's ``conn``: ``close()`` stops its loop thread (the client closes on the loop)."""

    def __init__(self, consumer: "Consumer") -> None:
        self.consumer = consumer
        self.ready = threading.Event()
        self.failed: Optional[BaseException] = None
        self.thread: Optional[threading.Thread] = None

    def close(self) -> None:
        self.consumer.stopping.set()
        if self.thread is not None:
            self.thread.join(30)


def open_aio(consumer: "Consumer") -> None:
    """Start ``consumer``'s loop thread; return once both SUBSCRIBEs were confirmed (30 s)."""
    conn = consumer.conn = AioConnection(consumer)
    consumer.start_thread(lambda: asyncio.run(_main(consumer, conn)), "aio-loop")
    conn.thread = consumer.threads[-1]
    if not conn.ready.wait(40):
        raise RuntimeError("%s: the aio consumer did not subscribe within 40 s" % consumer.spec.name)
    if conn.failed is not None:
        raise RuntimeError("%s: the aio consumer failed to start: %r" % (consumer.spec.name, conn.failed))


async def _main(consumer: "Consumer", conn: AioConnection) -> None:
    import amqstomp.aio
    from amqstomp.flow import RedeliveryPolicy

    members = ",".join("stomp://%s:%d" % a for a in consumer.addresses)
    hb = consumer.heartbeat_ms
    url = ("failover:(%s)?randomize=false&initialReconnectDelay=10&maxReconnectDelay=200&maxReconnectAttempts=-1"
           % members)
    kind = consumer.spec.settle
    try:
        client = await amqstomp.aio.connect(url, login="admin", passcode="admin", heartbeats=(hb, hb),
                                            connect_timeout=30, receipt_timeout=10,
                                            on_interrupted=lambda reason: consumer.transport_event("interrupted"),
                                            on_resumed=lambda: consumer.transport_event("resumed"))
    except BaseException as exc:
        conn.failed = exc
        conn.ready.set()
        raise
    try:
        policy = RedeliveryPolicy(maximum_redeliveries=-1, initial_redelivery_delay_ms=50, back_off_multiplier=1.0)
        sub = client.subscribe("/queue/" + consumer.queue_name, ack=AIO_ACK[kind],  # type: ignore[arg-type]
                               prefetch_size=consumer.prefetch, redelivery_policy=policy, timeout=30)
        idle = client.subscribe("/queue/%s.idle" % consumer.queue_name, ack="client-individual", timeout=30)
        async with sub, idle:
            conn.ready.set()
            if kind in ("auto", "handler"):
                await _handlers(consumer, sub, 2 if kind == "auto" else 4, kind == "handler")
            else:
                await _receive(consumer, sub, kind == "client")
    except BaseException as exc:
        if not conn.ready.is_set():
            conn.failed = exc
            conn.ready.set()
        consumer.ledger.error("aio consumer", exc)
    finally:
        await client.close(timeout=5)


def _record(consumer: "Consumer", message: Any, count: int = 1) -> str:
    headers = message.headers
    flagged = headers.get("redelivered") == "true"
    mid = headers.get("message-id", "?")
    consumer.ledger.deliver(int(headers.get("chaos_seq", -1)), mid, flagged, max(count, 2 if flagged else 1),
                            message.link.seq, headers.get("chaos_attempt", ""))
    return mid


async def _delay(consumer: "Consumer") -> None:
    with consumer.rng_lock:
        wait = consumer.rng.uniform(0.0, 0.02) if consumer.rng.random() < consumer.delay_probability else 0.0
    if wait:
        await asyncio.sleep(wait)


async def _until_stopped(consumer: "Consumer") -> None:
    while not consumer.stopping.is_set():
        await asyncio.sleep(0.1)


async def _handlers(consumer: "Consumer", sub: Any, concurrency: int, flaky: bool) -> None:
    """The handler form until the consumer stops; then the subscription closes (ending run)."""
    refuse = random.Random("aio-refuse:%s" % consumer.queue_name)
    failed: set = set()

    async def handle(message: Any) -> None:
        mid = _record(consumer, message, message.delivery_count)
        await _delay(consumer)
        if flaky and mid not in failed and refuse.random() < 0.05:
            failed.add(mid)
            raise _Refused("refused once: %s" % mid)

    def on_error(exc: Exception, message: Any) -> None:
        if not isinstance(exc, _Refused):
            consumer.ledger.error("handler", exc)

    runner = asyncio.ensure_future(sub.run(handle, concurrency=concurrency, on_error=on_error))
    await _until_stopped(consumer)
    await sub.close(timeout=5)
    await asyncio.wait_for(runner, 10)


async def _receive(consumer: "Consumer", sub: Any, cumulative: bool) -> None:
    pending: List[Any] = []  # (message-id, the socket that delivered it)
    last: Any = None
    batch = consumer._next_batch() if cumulative else 1
    while not consumer.stopping.is_set():
        try:
            message = await sub.get(timeout=0.2)
        except asyncio.TimeoutError:
            message = None
        if message is not None:
            pending.append((_record(consumer, message), message.link))
            last = message
            await _delay(consumer)
            if len(pending) < batch:
                continue
        if not pending:
            continue
        try:
            await last.ack(receipt=True, timeout=5)
        except AIO_ACK_UNSETTLED as exc:
            consumer.ledger.unsettled("ack", exc)
        except Exception as exc:
            consumer.ledger.error("ack", exc)
        else:  # a cumulative ACK settles what its own socket delivered (the others' are redelivered)
            consumer.ledger.settle([mid for mid, link in pending if link is last.link])
        pending = []
        batch = consumer._next_batch() if cumulative else 1


class _Refused(Exception):
    """The aio-handler mode's deliberate handler failure (redelivered locally, not an error)."""
