"""Walk one message through amqstomp and print every amqstomp function it passes, per thread.

    .venv/bin/python scripts/walk.py            # starts its own ActiveMQ on 127.0.0.1
    .venv/bin/python scripts/walk.py --write docs/architecture.md  # its "One message, walked" tables

Six walks, each one message on a real broker: the stomp.py API's ``send()`` and its delivery to a
listener that acknowledges it (``ack="client-individual"``), the JMS API's ``producer.send()``
(persistent: it waits for its RECEIPT) and its delivery to a ``MessageListener`` that calls
``message.acknowledge()`` (CLIENT_ACKNOWLEDGE), the asyncio API's ``await client.send()`` (its
RECEIPT awaited) and its delivery to ``async for message in sub`` that awaits ``message.ack()``
(``ack="client-individual"``; the message is sent by a plain socket, which records nothing, so
that the walk holds the delivery alone). A profile hook on every amqstomp thread (and on the
asyncio loop's thread, shown as ``loop``) records
each Python function's first call while the walk is armed (C functions, the compiled codec's and
flow's, do not show: they are named in the docs by hand). Functions are listed in first-call
order per thread; the application's callback is marked where it runs.
"""
import argparse
import asyncio
import os
import re
import sys
import threading
import time
from typing import Any, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import amqstomp  # noqa: E402
import amqstomp.aio  # noqa: E402
from amqstomp.jms import CLIENT_ACKNOWLEDGE  # noqa: E402
from amqstomp.testing._stomp import encode_frame, goodbye, handshake  # noqa: E402
from amqstomp.testing.broker import start_broker  # noqa: E402

Hop = Tuple[str, str, str]  # (thread, module path below amqstomp/, qualified name)
_calls: List[Hop] = []
_armed = threading.Event()
MARK = "(application)"


def _profile(frame: Any, event: str, arg: Any) -> None:
    if event == "call" and _armed.is_set():
        code = frame.f_code
        path = code.co_filename.replace(os.sep, "/")
        if "/amqstomp/" in path and "/amqstomp/testing/" not in path:  # (the walks' raw-socket sender)
            name = getattr(code, "co_qualname", code.co_name)
            _calls.append((threading.current_thread().name, path.rsplit("/amqstomp/", 1)[1], name))


def _thread_kind(name: str) -> str:
    """A thread's name without its numbers (amqstomp-reader-1.1 -> reader, MainThread -> caller)."""
    if name == "MainThread":
        return "caller"
    if name == MARK:
        return name
    return re.sub(r"-?\d+(\.\d+)?", "", name[len("amqstomp-"):] if name.startswith("amqstomp-") else name)


def _walk(run: Any) -> List[Hop]:
    del _calls[:]
    sys.setprofile(_profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        _armed.clear()
    return _first_calls()


def _first_calls() -> List[Hop]:
    """The hops recorded, each once, in first-call order (the walk's own functions left out)."""
    seen: List[Hop] = []
    for thread, path, name in _calls:
        hop = (_thread_kind(thread), path, name)
        if hop not in seen and not name.startswith("_walk"):
            seen.append(hop)
    return seen


def walks(broker: Any) -> List[Tuple[str, List[Hop]]]:
    out: List[Tuple[str, List[Hop]]] = []
    threading.setprofile(_profile)  # threads started from now on (the connections' own)
    # -- the stomp.py API
    done = threading.Event()
    conn = amqstomp.Connection12(broker.host_and_ports)

    class Acks(amqstomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            _calls.append((MARK, "", "on_message(frame): conn.ack(frame.headers['ack'])"))
            conn.ack(frame.headers["ack"])
            done.set()

    conn.set_listener("walk", Acks())
    conn.connect(wait=True)
    conn.subscribe("/queue/walk.stomppy", id="1", ack="client-individual")
    time.sleep(0.5)

    def stomppy() -> None:
        _armed.set()
        conn.send("/queue/walk.stomppy", "one message")
        done.wait(10)
        time.sleep(0.2)

    hops = _walk(stomppy)
    out.append(("stomp.py API: send()", [h for h in hops if h[0] == "caller"]))
    out.append(("stomp.py API: delivery, listener, ACK", [h for h in hops if h[0] != "caller"]))
    conn.disconnect()
    # -- the JMS API
    done.clear()
    connection = amqstomp.ConnectionFactory(broker.url).create_connection()
    session = connection.create_session(False, CLIENT_ACKNOWLEDGE)
    consumer = session.create_consumer(amqstomp.Queue("walk.jms"))

    def on_message(message: Any) -> None:
        _calls.append((MARK, "", "on_message(message): message.acknowledge()"))
        message.acknowledge()
        done.set()

    consumer.set_message_listener(on_message)
    connection.start()
    producer = session.create_producer(amqstomp.Queue("walk.jms"))
    text = session.create_text_message("one message")
    time.sleep(0.5)

    def jms() -> None:
        _armed.set()
        producer.send(text)
        done.wait(10)
        time.sleep(0.2)

    hops = _walk(jms)
    out.append(("JMS API: producer.send() (persistent: waits for its RECEIPT)",
                [h for h in hops if h[0] == "caller" or "producer" in h[0]]))
    out.append(("JMS API: delivery, MessageListener, ACK",
                [h for h in hops if not (h[0] == "caller" or "producer" in h[0])]))
    connection.close()
    threading.setprofile(None)
    out.extend(_aio_walks(broker))
    return out


def _raw_send(host: str, port: int, destination: str, body: bytes) -> None:
    """SEND ``body`` through the test tools' raw socket (:mod:`amqstomp.testing._stomp`, left out
    of the walk: no client function runs), its RECEIPT read."""
    sock, reader = handshake(host, port, 10)
    try:
        sock.sendall(encode_frame("SEND", {"destination": destination, "receipt": "r"}, body))
        while reader.read()[0] != "RECEIPT":
            pass
    finally:
        goodbye(sock)


def _aio_walks(broker: Any) -> List[Tuple[str, List[Hop]]]:
    """The asyncio API's walks: on the loop's thread (the caller's), shown as ``loop``."""
    host, port = broker.host_and_ports[0]
    walked: List[Tuple[str, List[Hop]]] = []

    async def main() -> None:
        async with amqstomp.aio.connect("stomp://%s:%d" % (host, port)) as client:
            await client.send("/queue/walk.aio.warm", b"warm")  # (first calls made before the walk)

            async def send() -> None:
                _armed.set()
                await client.send("/queue/walk.aio.send", b"one message")

            walked.append(("asyncio API: await client.send() (its RECEIPT awaited)", await _walk_async(send)))
            async with client.subscribe("/queue/walk.aio", ack="client-individual") as sub:
                async def deliver() -> None:
                    _armed.set()
                    _raw_send(host, port, "/queue/walk.aio", b"one message")
                    async for message in sub:
                        _calls.append((MARK, "", "async for message in sub: await message.ack()"))
                        await message.ack()
                        break

                walked.append(("asyncio API: delivery, async for, ACK", await _walk_async(deliver)))

    asyncio.run(main())
    return [(title, [("loop" if h[0] == "caller" else h[0], h[1], h[2]) for h in hops]) for title, hops in walked]


async def _walk_async(run: Any) -> List[Hop]:
    """:func:`_walk` for a coroutine function, on the running loop."""
    del _calls[:]
    sys.setprofile(_profile)
    try:
        await run()
    finally:
        sys.setprofile(None)
        _armed.clear()
    return _first_calls()


START, END = "<!-- walk:start (scripts/walk.py --write docs/architecture.md) -->", "<!-- walk:end -->"


def markdown(result: List[Tuple[str, List[Hop]]]) -> str:
    """The walks as collapsible blocks of tables (mkdocs-material's ``???``)."""
    lines: List[str] = []
    for title, hops in result:
        files = {h[1] for h in hops if h[1]}
        threads = []
        for h in hops:
            if h[1] and h[0] not in threads:
                threads.append(h[0])
        lines += ['??? note "%s: %d functions in %d files, on %s"' % (
            title, sum(1 for h in hops if h[1]), len(files), ", ".join("`%s`" % t for t in threads)), "",
            "    | thread | module | function |", "    |---|---|---|"]
        for thread, path, name in hops:
            lines.append("    | %s | %s | %s |" % (thread, "`%s`" % path if path else "",
                                                   "`%s`" % name if path else "*%s*" % name))
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true", help="print the Markdown blocks")
    ap.add_argument("--write", metavar="PATH", help="replace the blocks between the walk markers of PATH")
    args = ap.parse_args()
    broker = start_broker()
    try:
        result = walks(broker)
    finally:
        broker.stop()
    if args.write:
        with open(args.write, encoding="utf-8") as f:
            text = f.read()
        if START not in text or END not in text:
            raise SystemExit("%s has no walk markers (%s ... %s)" % (args.write, START, END))
        head, rest = text.split(START, 1)
        text = head + START + "\n" + markdown(result) + rest[rest.index(END):]
        with open(args.write, "w", encoding="utf-8") as f:
            f.write(text)
        print("wrote the walks into %s" % args.write)
    elif args.markdown:
        print(markdown(result))
    else:
        for title, hops in result:
            files = {h[1] for h in hops if h[1]}
            print("== %s (%d functions, %d files)" % (title, sum(1 for h in hops if h[1]), len(files)))
            for thread, path, name in hops:
                print("  %-20s %-28s %s" % (thread, path, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
