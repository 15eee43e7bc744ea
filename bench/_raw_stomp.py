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

Large bodies (64 KiB, 1 MiB) as a bare client would read them: ``TCP_QUICKACK`` is re-armed before
each read (Linux; as amqstomp's reader does: ActiveMQ leaves Nagle on, and without it each message
at prefetch 1 waits for the delayed TCP ACK, about 40 ms), and a MESSAGE whose ``content-length``
body (of at least :data:`BODY_READ_MIN` bytes) is not all read yet gets a preallocated bytearray:
what was read of it is copied in once and the rest is ``recv_into`` it (the kernel's copy only),
then the next head is read with at most :data:`HEAD_READ_BYTES` (amqstomp's stream reader does
the same). Smaller frames are found by their NUL in the read buffer, as before.

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
#: a body of at least this many bytes still to come is read straight into its own buffer
#: (amqstomp._io.channel.BODY_READ_MIN)
BODY_READ_MIN = 16 * 1024
#: the read after such a body: the next frame's head (amqstomp._io.channel.HEAD_READ_BYTES)
HEAD_READ_BYTES = 4096
CONTENT_LENGTH = b"\ncontent-length:"
#: Linux only; None elsewhere
QUICKACK = getattr(socket, "TCP_QUICKACK", None) if sys.platform.startswith("linux") else None


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _sys_cpu() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


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
        #: the frame in ``buf`` had its body read straight into it (the next read is a head's)
        self.after_body = False

    def before_read(self) -> None:
        """Before each read: the pending ACKs written, the deadline looked at (TimeoutError past
        it), ``TCP_QUICKACK`` re-armed."""
        if self.acks:
            self.sock.sendall(b"".join(self.acks))
            self.acks.clear()
        if time.monotonic() > self.deadline:
            raise TimeoutError("deadline passed")
        if QUICKACK is not None:
            self.sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)

    def read(self, size: int) -> bytes:
        """One ``recv`` of at most ``size`` bytes after :meth:`before_read`; b"" when the kernel's
        1 s timeout ended it (the caller loops). Raises ConnectionError at EOF."""
        self.before_read()
        try:
            data = self.sock.recv(size)
        except (BlockingIOError, socket.timeout):
            return b""
        if not data:
            raise ConnectionError("the broker closed the connection")
        return data

    def frame_end(self) -> int:
        """Index of the next frame's NUL in ``buf`` (reading more until there is one); skips the
        EOLs between frames. A body of a ``content-length`` of at least :data:`BODY_READ_MIN`
        bytes that is not all in ``buf`` is read into a bytearray of its own, which becomes
        ``buf`` (so the NUL is its last byte). Raises TimeoutError past the deadline,
        ConnectionError at EOF."""
        buf, pos = self.buf, self.pos
        size = RECV_BYTES
        if pos >= len(buf):
            if self.after_body:  # the next frame's head only: a large body after it comes the same way
                size = HEAD_READ_BYTES
            buf, pos = b"", 0
        self.after_body = False
        while True:
            while pos < len(buf) and buf[pos] == 10:
                pos += 1
            head_end = buf.find(b"\n\n", pos)
            if head_end >= 0:
                c = buf.find(CONTENT_LENGTH, pos, head_end)
                if c >= 0:
                    start = head_end + 2
                    length = int(buf[c + 16:buf.index(b"\n", c + 16, head_end + 1)])
                    if start + length < len(buf):
                        if buf[start + length]:
                            raise ConnectionError("no NUL after a body of content-length %d" % length)
                        self.buf, self.pos = buf, pos
                        return start + length
                    if length + 1 - (len(buf) - start) >= BODY_READ_MIN:
                        return self._read_body(buf, pos, start, length)
                else:
                    end = buf.find(b"\x00", head_end)
                    if end >= 0:
                        self.buf, self.pos = buf, pos
                        return end
            data = self.read(size)
            if data:
                buf = buf[pos:] + data
                pos = 0
                size = RECV_BYTES

    def _read_body(self, buf: bytes, pos: int, start: int, length: int) -> int:
        """The frame at ``buf[pos:]`` whose body (``length`` bytes and the NUL) starts at
        ``start``: its head and what came of the body are copied into a bytearray of the frame's
        size, the rest is ``recv_into`` it; that becomes ``buf``. Returns the NUL's index."""
        head = start - pos
        frame = bytearray(head + length + 1)
        have = len(buf) - pos
        view = memoryview(frame)
        view[:have] = memoryview(buf)[pos:]
        recv_into = self.sock.recv_into
        while have < len(frame):
            self.before_read()
            try:
                n = recv_into(view[have:])
            except (BlockingIOError, socket.timeout):
                continue
            if not n:
                raise ConnectionError("the broker closed the connection")
            have += n
        view.release()
        if frame[-1] != 0:
            raise ConnectionError("no NUL after a body of content-length %d" % length)
        self.buf, self.pos = frame, 0
        self.after_body = True
        return len(frame) - 1

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
        SUBSCRIBE to the last message, s; ``consume_cpu_from_first_s`` from the first; ``consume_sys_s``
        the kernel's part of it), ``disconnect_confirmed``, ``reason`` when not ok.
    """
    out: Dict[str, Any] = {"status": "error", "module": MODULE, "count": count}
    wire = _Wire(host, port, time.monotonic() + deadline_s)
    sock = wire.sock
    seen = bytearray(count)
    received = distinct = duplicates = foreign = 0
    first = last = t_sub = 0.0
    max_gap = 0.0
    c_sub = c_first = c_end = 0.0
    s_sub = s_end = 0.0
    try:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\nheart-beat:0,0\n\n\x00")
        wire.expect(b"CONNECTED")
        t_sub, c_sub, s_sub = time.perf_counter(), _cpu(), _sys_cpu()
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
        c_end, s_end = _cpu(), _sys_cpu()
        out["status"] = "ok"
    except TimeoutError as exc:
        out.update(status="timeout", reason=str(exc))
    except (ConnectionError, OSError, ValueError) as exc:
        out.update(status="error", reason="%s: %s" % (type(exc).__name__, exc))
    if not c_end:
        c_end, s_end = _cpu(), _sys_cpu()
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
               consume_sys_s=(s_end - s_sub) if c_sub else None,
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
