"""amqstomp.aio against every broker of the ``stomp_broker`` fixture (ActiveMQ, and RabbitMQ's
STOMP plugin where it is installed): what is broker-neutral -- receipts, the prefetch header
of the broker's dialect, acknowledgements, a transaction waited for at COMMIT."""
import uuid
from typing import List

import pytest

import amqstomp.aio
from aio_support import run

pytestmark = pytest.mark.timeout(60)


def test_send_subscribe_ack_transaction(stomp_broker):
    dest = "/queue/aio-any-%s" % uuid.uuid4().hex[:10]

    async def main() -> List[bytes]:
        async with amqstomp.aio.connect(stomp_broker.url, login=stomp_broker.username,
                                        passcode=stomp_broker.password, vhost=stomp_broker.vhost) as client:
            assert client.link is not None and client.link.proto.dialect == stomp_broker.name
            async with client.subscribe(dest, ack="client-individual", prefetch_size=1) as sub:
                for i in range(5):
                    await client.send(dest, b"%d" % i)
                async with client.transaction() as tx:
                    await tx.send(dest, b"tx")
                got = []
                for _ in range(6):
                    message = await sub.get(timeout=10)
                    got.append(message.body)
                    await message.ack()
                return got
    assert run(main()) == [b"0", b"1", b"2", b"3", b"4", b"tx"]
