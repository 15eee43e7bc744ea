"""bench/_raw_stomp: the broker's own round-trip ceiling for a STOMP consumer (not a usable client).

A blocking socket does the least a client-individual consumer can do: CONNECT, SUBSCRIBE, then for
each MESSAGE find the ``ack`` header's value and an ``ACK`` frame with it, nothing more -- no frame
object, no header dict, no escapes, no threads, no listener. The ACKs of the messages one read
brought are written together, in one ``sendall`` before the next read (one ACK frame per message
still; a client writing a syscall per ACK is slower than the ones it bounds at prefetch 1000). What it reaches at prefetch 1 is what
the broker and the loopback round trip allow one consumer on this machine (each message waits for
the previous ACK); at prefetch 1000, what the broker can push to a consumer that acks every message.
bench/consume.py and bench/aio.py --stompman run it as the ``raw-stomp`` row, in the same run as
the clients, and divide each client's msg/s by it ("client / raw ceiling").

Honest: each message's ``bench-seq`` header (bench/_common.py's fill_queue numbers them) is read
too, so the report says how many distinct messages arrived and how many came twice; a frame that is
not a MESSAGE (an ERROR) ends the run as a failure. It assumes what the bench's backlogs are: no NUL
byte in a body (they are hex digits), STOMP 1.2 without heart-beats. It ends with DISCONNECT and
waits for that RECEIPT, so every ACK was processed when it returns.

Usage (the benches' child process)::

    python bench/_raw_stomp.py '{"host": .., "port": .., "destination": .., "count": N,
                                 "prefetch": P, "deadline_s": S}'

prints one JSON line: bench/consume.py's child report (``status``, ``received``, ``distinct``,
``duplicates``, ``msg_per_s``, ``span_s``, ``consume_cpu_s``, ``max_gap_s``...).
"""
import json
import resource
import socket
import struct
import sys
import time
from typing import Any, Dict, List, Tuple

#: the header bench/_common.py's fill_queue numbers each message with (bench/_common.SEQ_HEADER)
SEQ = b"\nbench-seq:"
ACK = b"\nack:"
#: the row's client name in bench/consume.py and bench/aio.py
RAW = "raw-stomp"
MODULE = "bench._raw_stomp (broker ceiling: find-and-ACK)"
RECV_BYTES = 1 << 16


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class _Wire:
    """The socket and what was read from it but not yet consumed (``buf[pos:]``)."""

    def __init__(self, host: str, port: int, deadline: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=10.0)
        # a blocking socket (one recv syscall per read, no poll first, as amqstomp's reader thread);
        # the kernel ends a recv blocked for a second (SO_RCVTIMEO) so the deadline is looked at
        self.sock.settimeout(None)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 1, 0))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.deadline = deadline
        self.buf = b""
        self.pos = 0
        #: ACK frames not written yet: written before the next read
        self.acks: List[bytes] = []

    def frame_end(self) -> int:
        """Index of the next frame's NUL in ``buf`` (reading more until there is one); skips the
        EOLs between frames. Raises TimeoutError past the deadline, ConnectionError at EOF."""
        buf, pos = self.buf, self.pos
        while True:
            while pos < len(buf) and buf[pos] == 10:
                pos += 1
            end = buf.find(b"\x00", pos)
            if end >= 0:
                self.buf, self.pos = buf, pos
                return end
            if self.acks:
                self.sock.sendall(b"".join(self.acks))
                self.acks.clear()
            if time.monotonic() > self.deadline:
                raise TimeoutError("deadline passed")
            try:
                data = self.sock.recv(RECV_BYTES)
            except (BlockingIOError, socket.timeout):
                continue
            if not data:
                raise ConnectionError("the broker closed the connection")
            buf = buf[pos:] + data
            pos = 0

    def expect(self, command: bytes) -> bytes:
        end = self.frame_end()
        frame = self.buf[self.pos:end]
        self.pos = end + 1
        if not frame.startswith(command):
            raise ConnectionError("expected %s, got %r" % (command.decode(), frame[:300]))
        return frame


def consume(host: str, port: int, destination: str, count: int, prefetch: int, deadline_s: float) -> Dict[str, Any]:
    """Consume ``count`` messages of ``destination`` (client-individual, ``prefetch``), an ACK each.

    Returns:
        dict: ``status`` (``ok`` | ``timeout`` | ``error``), ``received``, ``distinct``,
        ``duplicates``, ``foreign`` (no usable ``bench-seq``), ``acks_sent``, ``first_message_s``
        (SUBSCRIBE to the first message, s), ``span_s`` (first to last message, s), ``msg_per_s``
        ((received - 1) / span), ``max_gap_s``, ``consume_cpu_s`` (this process's CPU from
        SUBSCRIBE to the last message, s; ``consume_cpu_from_first_s`` from the first), ``disconnect_confirmed``, ``reason`` when not ok.
    """
    out: Dict[str, Any] = {"status": "error", "module": MODULE, "count": count}
    wire = _Wire(host, port, time.monotonic() + deadline_s)
    sock = wire.sock
    seen = bytearray(count)
    received = distinct = duplicates = foreign = 0
    first = last = t_sub = 0.0
    max_gap = 0.0
    c_sub = c_first = c_end = 0.0
    try:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\nheart-beat:0,0\n\n\x00")
        wire.expect(b"CONNECTED")
        t_sub, c_sub = time.perf_counter(), _cpu()
        sock.sendall(b"SUBSCRIBE\nid:1\ndestination:%s\nack:client-individual\nactivemq.prefetchSize:%d\n\n\x00"
                     % (destination.encode(), prefetch))
        ack = wire.acks.append
        while distinct < count:
            end = wire.frame_end()
            buf, pos = wire.buf, wire.pos
            if not buf.startswith(b"MESSAGE\n", pos):
                raise ConnectionError("not a MESSAGE: %r" % buf[pos:min(end, pos + 300)])
            a = buf.index(ACK, pos, end) + 5
            ack(b"ACK\nid:%s\n\n\x00" % buf[a:buf.index(b"\n", a, end)])
            now = time.perf_counter()
            if received:
                if now - last > max_gap:
                    max_gap = now - last
            else:
                first, c_first = now, _cpu()
            last = now
            received += 1
            s = buf.find(SEQ, pos, end)
            seq = int(buf[s + 11:buf.index(b"\n", s + 11, end)]) if s >= 0 else -1
            if 0 <= seq < count:
                if seen[seq]:
                    duplicates += 1
                else:
                    seen[seq] = 1
                    distinct += 1
            else:
                foreign += 1
            wire.pos = end + 1
        sock.sendall(b"".join(wire.acks))
        wire.acks.clear()
        c_end = _cpu()
        out["status"] = "ok"
    except TimeoutError as exc:
        out.update(status="timeout", reason=str(exc))
    except (ConnectionError, OSError, ValueError) as exc:
        out.update(status="error", reason="%s: %s" % (type(exc).__name__, exc))
    if not c_end:
        c_end = _cpu()
    confirmed = False
    try:
        sock.sendall(b"DISCONNECT\nreceipt:raw-bye\n\n\x00")
        wire.deadline = time.monotonic() + 10.0
        while not confirmed:
            confirmed = wire.expect(b"").startswith(b"RECEIPT")
    except (TimeoutError, ConnectionError, OSError):
        pass
    sock.close()
    span = last - first
    out.update(received=received, distinct=distinct, duplicates=duplicates, foreign=foreign, acks_sent=received,
               redelivered=0, first_message_s=(first - t_sub) if received else None, span_s=span,
               msg_per_s=((received - 1) / span) if span > 0 else None, max_gap_s=max_gap,
               tail_gap_s=0.0, stalls=[], consume_cpu_s=(c_end - c_sub) if c_sub else None,
               consume_cpu_from_first_s=(c_end - c_first) if received else None,
               disconnect_confirmed=confirmed, broker_errors=[])
    return out


def consume_spec(spec: Dict[str, Any]) -> Dict[str, Any]:
    """:func:`consume` of a bench child spec (``host``, ``port``, ``destination``, ``count``,
    ``prefetch``, ``deadline_s``)."""
    return consume(spec["host"], int(spec["port"]), spec["destination"], int(spec["count"]), int(spec["prefetch"]),
                   float(spec["deadline_s"]))


def split_url(url: str) -> Tuple[str, int]:
    """``stomp://host:port`` -> (host, port)."""
    host, port = url.split("://", 1)[-1].rsplit(":", 1)
    return host, int(port)


def main(argv: List[str]) -> int:
    result = consume_spec(json.loads(argv[0]))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
