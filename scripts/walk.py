"""Walk one message through amqstomp and print every amqstomp function it passes, per thread.

    .venv/bin/python scripts/walk.py            # starts its own ActiveMQ on 127.0.0.1
    .venv/bin/python scripts/walk.py --write docs/architecture.md  # its "One message, walked" tables

Four walks, each one message on a real broker: the stomp.py API's ``send()`` and its delivery to a
listener that acknowledges it (``ack="client-individual"``), the JMS API's ``producer.send()``
(persistent: it waits for its RECEIPT) and its delivery to a ``MessageListener`` that calls
``message.acknowledge()`` (CLIENT_ACKNOWLEDGE). A profile hook on every amqstomp thread records
each Python function's first call while the walk is armed (C functions, the compiled codec's and
flow's, do not show: they are named in the docs by hand). Functions are listed in first-call
order per thread; the application's callback is marked where it runs.
"""
import argparse
import os
import re
import sys
import threading
import time
from typing import Any, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import amqstomp  # noqa: E402
from amqstomp.jms import CLIENT_ACKNOWLEDGE  # noqa: E402
from amqstomp.testing.broker import start_broker  # noqa: E402

Hop = Tuple[str, str, str]  # (thread, module path below amqstomp/, qualified name)
_calls: List[Hop] = []
_armed = threading.Event()
MARK = "(application)"


def _profile(frame: Any, event: str, arg: Any) -> None:
    if event == "call" and _armed.is_set():
        code = frame.f_code
        path = code.co_filename.replace(os.sep, "/")
        if "/amqstomp/" in path:
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
    return out


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
