"""bench/instructions: the client's CPU instructions per message, counted by callgrind (load cannot move it).

Each case is a small client program (``--child CASE N PORT``) run twice under
``valgrind --tool=callgrind``, with N1 and then N2 messages; the figure is

    (total instructions of the N2 run - total of the N1 run) / (N2 - N1)

so interpreter start-up, ``import amqstomp``, connecting, the warm-up and the
disconnect (the same in both runs) cancel out, and what is left is the cost of
one more message. Totals are whole-process (every thread of the client: the
caller, the reader, the dispatcher, the timer): the measured loop has no C
function of its own that ``--toggle-collect`` could switch collection on and
off at, and toggling would not make the runs faster (callgrind instruments
everything either way). Instruction counts do not depend on the machine's load,
so a ceiling a few per cent above today's figure is safe: three repetitions of a
producer case or of the codec agree within 0.15 %, of a consumer case within
about 1 % (``--repeat 3`` shows the spread: what the reader thread has buffered
when the garbage collector runs -- a few per cent of a message's cost -- still
depends on timing).

The peer is a fake STOMP broker (``--peer``, plain Python, NOT under valgrind:
only the client is counted) on 127.0.0.1 in its own process: it answers CONNECT
with an ActiveMQ 5.17 CONNECTED (``server:ActiveMQ/5.17.2``, no heart-beats), every
``receipt`` with a RECEIPT, and a SUBSCRIBE to ``/queue/ic.consume.<count>`` with
``<count>`` ActiveMQ-shaped MESSAGE frames (256 B bodies), keeping at most
``activemq.prefetchSize`` un-acknowledged ones in flight as ActiveMQ does (``ack:client``
acks cumulatively, ``client-individual`` one message; ``auto`` is acked at
dispatch), refilling the window in whole batches (a tenth of the prefetch, at
most 100) so that how many reads the client needs does not follow the timing
of single ACKs; everything else it reads and drops. It ends when its parent
closes its stdin, or after ``--lifetime`` seconds.

Cases (:data:`CASES`; 256-byte bodies, STOMP 1.2, the stomp.py API unless said):

* ``produce_async`` -- ``conn.send(dest, body)``, no receipt (one at the end);
* ``produce_tx100`` -- BEGIN, 100 ``send(..., transaction=tx)``, COMMIT with a
  receipt waited for: per message, the BEGIN/COMMIT and the wait included;
* ``jms_produce_async`` -- ``amqstomp.ConnectionFactory(url).create_connection()``,
  a session, a producer, ``producer.send(BytesMessage(body), delivery_mode=NON_PERSISTENT)``
  (the producer window asks a RECEIPT now and then: 8 in 5,200 sends); back-to-back
  sends coalesce in the write buffer (natively 5-10 µs apart, under the 0.2 ms
  ``DEFER_IDLE_S`` of ``amqstomp._io.writer``): the idle rule is set out of reach, as
  a run 50x slower would have its sends look idle, some or all, as the load says;
* ``consume_auto_p1000``, ``consume_individual_p1000`` (the listener acks each),
  ``consume_cumulative100_p1000`` (``ack="client"``, the listener acks every 100th),
  ``consume_optimized_p1000`` (``ack="client", optimize_acknowledge=True``: an
  ACK per 100; its clock-driven fallbacks, 300 ms after the last ACK and 50 ms
  without a delivery, are set out of reach: a steady native stream never needs
  them, a run 50x slower would, as often as the load says),
  ``consume_individual_p1`` -- a listener on ``Connection12`` at prefetch 1000 / 1;
* ``aio_produce_async`` -- ``amqstomp.aio``: ``await client.send(dest, body, receipt=False)``
  (one with a receipt at the end); ``aio_consume_auto_p1000``,
  ``aio_consume_individual_p1000``, ``aio_consume_individual_p1`` -- an ``async for`` loop over
  one subscription (``await message.ack()`` unless ``ack=auto``) at prefetch 1000 / 1 (issue 23);
* ``codec_parse`` -- no peer: the compiled ``FrameParser.feed`` over 16 KiB chunks
  of the MESSAGE frames ``bench/codec.py`` parses, reading each frame's
  ``message-id``, ``ack``, ``destination``, ``subscription`` and body.

The children run with ``PYTHONHASHSEED=0``, ``PYTHONDONTWRITEBYTECODE=1`` and a
private ``PYTHONPYCACHEPREFIX`` that one native run of each program (before its
valgrind runs) filled, so both runs do the same start-up work and compile
nothing; ``AMQSTOMP_NO_EXTENSIONS`` is removed (the compiled modules are
measured: a child reports which it loaded, and a pure-Python one is an error).
Inside, a program calls ``gc.freeze()`` once connected (a full collection then
walks what the messages left, not the start-up heap, whose size would decide
it) and sets ``sys.setswitchinterval(10)`` (Python's 5 ms clock-driven GIL
hand-overs would follow the wall time of a run 50x slower than native, so the
machine's load), and sets the threads' hand-off polls an hour apart (a listener
running past a 50 ms poll would hand reading over at wall-clock moments);
valgrind runs with ``--fair-sched=yes`` (its threads take turns in a fixed order).

A deliberate regression proves the gate (issue 21): with ``AMQSTOMP_BENCH_SEND_EXTRA=20``
in the environment the producer cases' ``send`` does about 1 microsecond of extra work
(:data:`SEND_EXTRA_ENV`), and ``bench/gate.py --only 'instructions_*produce*'`` goes red;
tests/test_gate.py runs that on the JMS case (``-m slow``).

Usage::

    python bench/instructions.py [--cases GLOB[,GLOB]] [--repeat N] [--python PATH]
                                 [--json [PATH]] [--keep DIR] [--list]

``--python`` measures another interpreter's amqstomp (e.g. an older checkout's
``.venv/bin/python``; it is then imported from that interpreter's own install,
not from this tree). ``--keep DIR`` keeps the callgrind output files, for
``callgrind_annotate``. Results: ``bench/results/instructions.json`` with ``--json``.
Needs valgrind (``apt-get install valgrind``; ``scripts/setup.sh`` installs it as root).
"""
import argparse
import fnmatch
import json
import os
import re
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
THIS_FILE = os.path.abspath(__file__)

BODY_SIZE = 256
BIG_BODY_SIZE = 64 * 1024  #: the *_64k cases' body (issue 21: one copy per body)
#: a SUBSCRIBE header the fake peer reads: the body size of the messages it pushes
BODY_SIZE_HEADER = "bench.body-size"
WARMUP = 200            #: operations every client program does before its N (the same in both runs)
TX_SIZE = 100           #: sends per transaction in produce_tx100
CUMULATIVE_EVERY = 100  #: consume_cumulative100: the listener acks every this many messages
CODEC_BLOCK = 100       #: codec_parse: frames per block; the program parses N / CODEC_BLOCK blocks
CODEC_CHUNK = 16 * 1024
CONSUME_PREFIX = "/queue/ic.consume."
MAX_PUSH = 1_000_000    #: the fake peer never pushes more messages than this on one subscription
CHILD_WAIT_S = 600.0    #: every wait inside a client program is bounded by this
RUN_TIMEOUT_S = 900.0   #: one valgrind run is killed after this
#: ``--fair-sched=yes``: valgrind runs one thread at a time; its ticket lock hands over in a fixed
#: order (the default lock leaves it to the kernel): repeated runs agree more closely
VALGRIND_ARGS = ("--tool=callgrind", "--fair-sched=yes")
#: the client programs' ``sys.setswitchinterval``: Python's default 5 ms forces GIL hand-overs by the
#: clock, and a run under callgrind is ~50x slower than a native one, so their number would follow
#: the machine's load; threads still hand over at every blocking call (socket, lock, event)
SWITCH_INTERVAL_S = 10.0
#: how a client program starts: ``import instructions`` from bench/ put LAST on sys.path (nothing of
#: bench/ shadows the measured amqstomp), from cached byte code like every other module (a script
#: given by path would be compiled in every run)
CHILD_STUB = ("import sys; sys.path.append(%r); import instructions; sys.exit(instructions.main(sys.argv[1:]))"
              % BENCH_DIR)


class Case:
    """One measured client program.

    Attributes:
        name (str), label (str: what one "message" is), n1, n2 (int: the two
        message counts; N2 - N1 divides the difference), peer (bool: needs the
        fake broker), step (int: N1 and N2 are multiples of it).
    """

    def __init__(self, name: str, label: str, n1: int, n2: int, peer: bool = True, step: int = 1) -> None:
        if not 0 < n1 < n2 or n1 % step or n2 % step:
            raise ValueError("%s: need 0 < n1 < n2, both multiples of %d" % (name, step))
        self.name = name
        self.label = label
        self.n1 = n1
        self.n2 = n2
        self.peer = peer
        self.step = step

    def __repr__(self) -> str:
        return "<Case %s n1=%d n2=%d>" % (self.name, self.n1, self.n2)


CASES: Dict[str, Case] = {c.name: c for c in (
    Case("produce_async", "stomp.py API conn.send(), async, 256 B", 1000, 4000),
    Case("produce_tx100", "stomp.py API send() in transactions of 100 (BEGIN/COMMIT+receipt included)",
         1000, 4000, step=TX_SIZE),
    Case("jms_produce_async", "JMS API producer.send(BytesMessage), NON_PERSISTENT, 256 B", 1000, 5000),
    Case("consume_auto_p1000", "stomp.py API listener, ack=auto, prefetch 1000", 1000, 5000),
    Case("consume_individual_p1000", "stomp.py API listener acks each (client-individual), prefetch 1000",
         1000, 4000),
    Case("consume_cumulative100_p1000", "stomp.py API listener, ack=client, acks every 100th, prefetch 1000",
         1000, 6000),
    Case("consume_optimized_p1000", "stomp.py API listener, ack=client + optimize_acknowledge, prefetch 1000",
         1000, 5000),
    Case("consume_individual_p1", "stomp.py API listener acks each (client-individual), prefetch 1",
         500, 2000),
    Case("consume_auto_p1000_64k", "stomp.py API listener, ack=auto, prefetch 1000, 64 KiB bodies", 100, 500),
    Case("consume_individual_p1000_64k",
         "stomp.py API listener acks each (client-individual), prefetch 1000, 64 KiB bodies", 100, 500),
    Case("codec_parse", "compiled FrameParser.feed per ActiveMQ MESSAGE frame, headers read", 2000, 12000,
         peer=False, step=CODEC_BLOCK),
    Case("aio_produce_async", "amqstomp.aio await client.send(receipt=False), 256 B", 1000, 4000),
    Case("aio_consume_auto_p1000", "amqstomp.aio async for, ack=auto, prefetch 1000", 1000, 5000),
    Case("aio_consume_individual_p1000",
         "amqstomp.aio async for + await message.ack(), client-individual, prefetch 1000", 1000, 4000),
    Case("aio_consume_individual_p1",
         "amqstomp.aio async for + await message.ack(), client-individual, prefetch 1", 500, 2000),
)}


# =========================================================================== the arithmetic (pure)


class MeasureError(RuntimeError):
    """A case could not be measured (valgrind missing, a child failed, counts that make no sense)."""


_COLLECTED = re.compile(r"Collected\s*:\s*([\d,]+)")


def parse_collected(log_text: str) -> int:
    """The total instruction count (``Ir``) from callgrind's log ("Collected : 1,234")."""
    found = _COLLECTED.findall(log_text)
    if not found:
        raise MeasureError("no 'Collected :' line in valgrind's log")
    return int(found[-1].replace(",", ""))


def per_message(total1: int, total2: int, n1: int, n2: int) -> float:
    """Instructions per message from two whole-process totals: (T2 - T1) / (N2 - N1).

    Raises:
        MeasureError: N2 <= N1, or T2 <= T1 (the longer run cannot have cost less).
    """
    if n2 <= n1:
        raise MeasureError("n2 (%d) must be larger than n1 (%d)" % (n2, n1))
    if total2 <= total1:
        raise MeasureError("the %d-message run counted %d instructions, not more than the %d-message run's %d"
                           % (n2, total2, n1, total1))
    return (total2 - total1) / float(n2 - n1)


def spread(values: Sequence[float]) -> Dict[str, Optional[float]]:
    """``min``, ``max``, ``median``, ``range`` (max - min) and ``range_pct`` (of the median)."""
    vals = sorted(float(v) for v in values)
    if not vals:
        return {"min": None, "max": None, "median": None, "range": None, "range_pct": None}
    med = statistics.median(vals)
    rng = vals[-1] - vals[0]
    return {"min": vals[0], "max": vals[-1], "median": med, "range": rng,
            "range_pct": 100.0 * rng / med if med else None}


def select_cases(pattern: str) -> List[Case]:
    """The cases matching any comma-separated glob of ``pattern`` (all when empty), in :data:`CASES` order."""
    globs = [p.strip() for p in (pattern or "").split(",") if p.strip()]
    if not globs:
        return list(CASES.values())
    return [c for c in CASES.values() if any(fnmatch.fnmatchcase(c.name, g) for g in globs)]


# =========================================================================== the fake peer (own process, not measured)


def activemq_message(seq: int, body_size: int = BODY_SIZE, subscription: str = "1") -> bytes:
    """A MESSAGE frame shaped like ActiveMQ 5.17's on a STOMP 1.2 connection (':' in
    header values escaped as ``\\c``); the same bytes as bench/codec.py's
    ``activemq_message`` for subscription "1" (tests/test_gate.py checks it). Every
    connection's message ``seq`` has the same id: the N1 and N2 runs parse the same bytes."""
    mid = "ID\\cbench-host-40123-1764489600000-3\\c1\\c%s\\c1\\c%d" % (subscription, seq + 1)
    head = (
        "MESSAGE\n"
        "content-length:%d\n"
        "expires:0\n"
        "destination:/queue/bench.codec\n"
        "subscription:%s\n"
        "priority:4\n"
        "message-id:%s\n"
        "persistent:true\n"
        "timestamp:%d\n"
        "ack:%s\n"
        "\n" % (body_size, subscription, mid, 1764489600000 + seq, mid)
    ).encode("ascii")
    return head + (b"x" * body_size) + b"\x00\n"


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            out.append({"c": ":", "n": "\n", "r": "\r", "\\": "\\"}.get(value[i + 1], value[i + 1]))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class _Sub:
    """One subscription the fake peer pushes messages to."""

    def __init__(self, sub_id: str, total: int, ack: str, prefetch: int, body_size: int = BODY_SIZE) -> None:
        self.sub_id = sub_id
        self.body_size = body_size
        self.total = min(max(total, 0), MAX_PUSH)
        self.ack = ack
        self.prefetch = max(prefetch, 1)
        self.sent = 0
        self.acked = 0
        # the unescaped ack id of message `seq` is this prefix + str(seq + 1)
        self.prefix = "ID:bench-host-40123-1764489600000-3:1:%s:1:" % sub_id

    def refill(self) -> int:
        """How many messages to queue now: the window is refilled in batches of a
        tenth of the prefetch (at most 100, at least 1), or what is left, in one
        write -- never a message per ACK, whose timing would decide how many reads
        the client needs (a broker's pattern, made repeatable); ``auto``: 100."""
        left = self.total - self.sent
        if left <= 0:
            return 0
        if self.ack == "auto":
            return min(left, 100)
        batch = min(max(self.prefetch // 10, 1), 100, left)
        free = self.prefetch - (self.sent - self.acked)
        return batch if free >= batch else 0

    def next_frame(self) -> bytes:
        frame = activemq_message(self.sent, self.body_size, self.sub_id)
        self.sent += 1
        return frame

    def on_ack(self, seq: int) -> None:
        """``seq``: 1-based number of the acknowledged message."""
        if self.ack == "client":  # cumulative, as ActiveMQ's STOMP ack:client
            self.acked = max(self.acked, min(seq, self.sent))
        elif self.acked < self.sent:
            self.acked += 1


class _PeerConn:
    """One client socket of the fake peer: parse what comes, queue what goes."""

    def __init__(self, sock: socket.socket, conn_no: int) -> None:
        self.sock = sock
        self.conn_no = conn_no
        self.inbuf = bytearray()
        self.out = bytearray()
        self.subs: List[_Sub] = []
        self.version = "1.2"
        self.closing = False
        self.frames: Dict[str, int] = {}  # what the client sent, by command (the peer's report)

    def feed(self, data: bytes) -> None:
        buf = self.inbuf
        buf += data
        pos, size = 0, len(buf)
        while pos < size:
            while pos < size and buf[pos] in (10, 13):  # heart-beat EOLs between frames
                pos += 1
            end_head = buf.find(b"\n\n", pos)
            if end_head < 0:
                break
            lines = bytes(buf[pos:end_head]).decode("utf-8", "replace").replace("\r", "").split("\n")
            headers: Dict[str, str] = {}
            for line in lines[1:]:
                key, _, value = line.partition(":")
                headers.setdefault(key, value)
            start = end_head + 2
            clen = headers.get("content-length")
            if clen is not None and clen.strip().isdigit():
                stop = start + int(clen)
                if size < stop + 1:
                    break
                pos = stop + 1
            else:
                stop = buf.find(b"\x00", start)
                if stop < 0:
                    break
                pos = stop + 1
            self.handle(lines[0].strip(), headers)
        del buf[:pos]

    def handle(self, command: str, headers: Dict[str, str]) -> None:
        self.frames[command] = self.frames.get(command, 0) + 1
        if command in ("CONNECT", "STOMP"):
            offered = [v.strip() for v in headers.get("accept-version", "1.0").split(",")]
            self.version = max((v for v in offered if v in ("1.0", "1.1", "1.2")), default="1.0")
            self.out += ("CONNECTED\nserver:ActiveMQ/5.17.2\nheart-beat:0,0\nsession:ID\\cic-peer-%06d\n"
                         "version:%s\n\n\x00" % (self.conn_no, self.version)).encode()
            return
        if command == "SUBSCRIBE":
            dest = headers.get("destination", "")
            total = 0
            if dest.startswith(CONSUME_PREFIX) and dest[len(CONSUME_PREFIX):].isdigit():
                total = int(dest[len(CONSUME_PREFIX):])
            try:
                prefetch = int(headers.get("activemq.prefetchSize", "1000"))
            except ValueError:
                prefetch = 1000
            body_size = int(headers.get(BODY_SIZE_HEADER, BODY_SIZE) or BODY_SIZE)
            self.subs.append(_Sub(_unescape(headers.get("id", dest)), total,
                                  headers.get("ack", "auto"), prefetch, body_size))
        elif command == "UNSUBSCRIBE":
            sub_id = _unescape(headers.get("id", headers.get("destination", "")))
            self.subs = [s for s in self.subs if s.sub_id != sub_id]
        elif command in ("ACK", "NACK"):
            ack_id = _unescape(headers.get("id") or headers.get("message-id") or "")
            for sub in self.subs:
                if ack_id.startswith(sub.prefix) and ack_id[len(sub.prefix):].isdigit():
                    sub.on_ack(int(ack_id[len(sub.prefix):]))
                    break
        receipt = headers.get("receipt")
        if receipt is not None:
            self.frames["(receipts)"] = self.frames.get("(receipts)", 0) + 1
            self.out += b"RECEIPT\nreceipt-id:" + receipt.encode() + b"\n\n\x00"
        if command == "DISCONNECT":
            self.closing = True

    def fill(self, limit: int = 262144) -> None:
        """Queue MESSAGE frames in whole batches (:meth:`_Sub.refill`) while fewer than ``limit`` bytes wait."""
        for sub in self.subs:
            while len(self.out) < limit:
                batch = sub.refill()
                if not batch:
                    break
                self.out += b"".join(sub.next_frame() for _ in range(batch))

    def wants_write(self) -> bool:
        return bool(self.out) or (not self.closing and any(s.refill() for s in self.subs))


def peer_main(lifetime_s: float) -> int:
    """Serve until stdin closes (the parent is done or died) or ``lifetime_s`` passed."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, "accept")
    sel.register(sys.stdin, selectors.EVENT_READ, "stdin")
    print(srv.getsockname()[1], flush=True)
    deadline = time.monotonic() + lifetime_s
    conns: Dict[int, _PeerConn] = {}
    count = 0

    def close(pc: _PeerConn) -> None:
        # one line per connection on stderr (a file, see Peer): what the client sent, what it was sent
        sys.stderr.write(json.dumps({"conn": pc.conn_no, "received": pc.frames,
                                     "pushed": {s.sub_id: [s.sent, s.acked] for s in pc.subs}}) + "\n")
        sys.stderr.flush()
        conns.pop(pc.sock.fileno(), None)
        try:
            sel.unregister(pc.sock)
        except (KeyError, ValueError):
            pass
        pc.sock.close()

    def rearm(pc: _PeerConn) -> None:
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if pc.wants_write() else 0)
        sel.modify(pc.sock, events, pc)

    try:
        while time.monotonic() < deadline:
            for key, events in sel.select(0.5):
                if key.data == "stdin":
                    if not os.read(sys.stdin.fileno(), 4096):
                        return 0
                    continue
                if key.data == "accept":
                    try:
                        sock, _ = srv.accept()
                    except BlockingIOError:
                        continue
                    sock.setblocking(False)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    count += 1
                    pc = _PeerConn(sock, count)
                    conns[sock.fileno()] = pc
                    sel.register(sock, selectors.EVENT_READ, pc)
                    continue
                pc = key.data
                if events & selectors.EVENT_READ:
                    try:
                        data = pc.sock.recv(1 << 20)
                    except (BlockingIOError, InterruptedError):
                        data = None
                    except OSError:
                        data = b""
                    if data == b"":
                        close(pc)
                        continue
                    if data:
                        pc.feed(data)
                if not pc.closing:
                    pc.fill()
                if pc.out:
                    try:
                        sent = pc.sock.send(pc.out)
                        del pc.out[:sent]
                    except (BlockingIOError, InterruptedError):
                        pass
                    except OSError:
                        close(pc)
                        continue
                if pc.closing and not pc.out:
                    close(pc)
                    continue
                rearm(pc)
        return 0
    finally:
        for pc in list(conns.values()):
            close(pc)
        srv.close()


class Peer:
    """The fake peer in a child process (with this parent's Python); ``port`` once started."""

    def __init__(self, lifetime_s: float = 3600.0) -> None:
        # its stderr, appended to (one line per connection, and any traceback) and read by path
        fd, self.report_path = tempfile.mkstemp(prefix="amqstomp-ic-peer-", suffix=".log")
        os.close(fd)
        with open(self.report_path, "ab") as report:
            self.proc = subprocess.Popen([sys.executable, THIS_FILE, "--peer", "--lifetime", str(lifetime_s)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=report,
                                         cwd=tempfile.gettempdir())
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        sel = selectors.DefaultSelector()
        sel.register(self.stdout, selectors.EVENT_READ)
        ready = sel.select(30.0)
        sel.close()
        line = self.stdout.readline() if ready else b""
        if not line.strip().isdigit():
            self.stop()
            raise MeasureError("the fake peer did not start: %r %s" % (line, self.lines()[-500:]))
        self.port = int(line)

    def lines(self) -> str:
        """What the peer wrote on stderr so far (a line per closed connection)."""
        try:
            with open(self.report_path, "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        try:
            self.stdin.close()  # the peer's signal to end
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        try:
            self.stdout.close()
        except OSError:
            pass
        try:
            os.unlink(self.report_path)
        except OSError:
            pass


# =========================================================================== the client programs (measured)


class _Waiter:
    """RECEIPT ids seen by a stomp.py-style listener; bounded waits for one."""

    def __init__(self) -> None:
        import threading

        self.cond = threading.Condition()
        self.seen: set = set()
        self.errors: List[str] = []

    def receipt(self, receipt_id: Any) -> None:
        with self.cond:
            self.seen.add(receipt_id)
            self.cond.notify_all()

    def error(self, text: str) -> None:
        with self.cond:
            self.errors.append(text)
            self.cond.notify_all()

    def wait(self, receipt_id: str, timeout: float = CHILD_WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while receipt_id not in self.seen:
                if self.errors:
                    raise RuntimeError("ERROR from the peer: %s" % self.errors[-1])
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no RECEIPT %s within %.0f s" % (receipt_id, timeout))
                self.cond.wait(left)
            self.seen.discard(receipt_id)


def _settle() -> None:
    """Before the measured work: move every object alive now (modules, classes, the
    connection) out of the garbage collector's reach (``gc.freeze``), so a full
    collection costs what the messages left, not the size of the start-up heap."""
    import gc

    gc.collect()
    gc.freeze()


def _connect(amqstomp: Any, port: int, waiter: _Waiter, on_message: Optional[Callable[[Any], None]] = None) -> Any:
    conn = amqstomp.Connection12([("127.0.0.1", port)], heartbeats=(0, 0))

    class Listener(amqstomp.ConnectionListener):  # type: ignore[misc, name-defined]
        def on_receipt(self, frame: Any) -> None:
            waiter.receipt(frame.headers.get("receipt-id"))

        def on_error(self, frame: Any) -> None:
            waiter.error(str(frame.headers.get("message", "ERROR")))

    if on_message is not None:
        Listener.on_message = lambda self, frame: on_message(frame)  # type: ignore[assignment]
    conn.set_listener("ic", Listener())
    conn.connect(wait=True)
    _settle()
    return conn


#: ``AMQSTOMP_BENCH_SEND_EXTRA``: a deliberate regression, to prove the gate goes red (issue 21;
#: tests/test_gate.py): the producer cases' ``send`` does this many turns of an empty loop first, in
#: a Python function around it (20 turns: about 5,500 instructions per send measured, ~1 microsecond).
#: Unset or 0: the programs as they are. Only these bench programs read it, never amqstomp.
SEND_EXTRA_ENV = "AMQSTOMP_BENCH_SEND_EXTRA"


def _slowed(send: Callable[..., Any]) -> Callable[..., Any]:
    """``send``, or (:data:`SEND_EXTRA_ENV` set) ``send`` after that many turns of an empty loop."""
    turns = int(os.environ.get(SEND_EXTRA_ENV) or 0)
    if turns <= 0:
        return send

    def slowed_send(*args: Any, **kwargs: Any) -> Any:
        for _ in range(turns):
            pass
        return send(*args, **kwargs)

    return slowed_send


def _child_produce_async(n: int, port: int) -> None:
    import amqstomp

    waiter = _Waiter()
    conn = _connect(amqstomp, port, waiter)
    dest, body = "/queue/ic.produce", "x" * BODY_SIZE
    send = _slowed(conn.send)
    for _ in range(WARMUP):
        send(dest, body)
    for _ in range(n):
        send(dest, body)
    send(dest, body, headers={"receipt": "ic-end"})
    waiter.wait("ic-end")
    conn.disconnect()


def _child_produce_tx100(n: int, port: int) -> None:
    import amqstomp

    waiter = _Waiter()
    conn = _connect(amqstomp, port, waiter)
    dest, body = "/queue/ic.produce.tx", "x" * BODY_SIZE
    send = _slowed(conn.send)
    for batch in range((WARMUP + n) // TX_SIZE):
        tx = conn.begin()
        for _ in range(TX_SIZE):
            send(dest, body, transaction=tx)
        conn.commit(tx, headers={"receipt": "ic-c%d" % batch})
        waiter.wait("ic-c%d" % batch)
    conn.disconnect()


def _child_jms_produce_async(n: int, port: int) -> None:
    import amqstomp
    from amqstomp._io import writer
    from amqstomp.jms import NON_PERSISTENT, PERSISTENT, BytesMessage, Queue

    writer.DEFER_IDLE_S = CHILD_WAIT_S  # back to back = under load, as natively (see the module docstring)
    connection = amqstomp.ConnectionFactory("stomp://127.0.0.1:%d" % port).create_connection()
    try:
        session = connection.create_session()
        producer = session.create_producer(Queue("ic.jms"))
        _settle()
        body = b"x" * BODY_SIZE
        send = _slowed(producer.send)
        for _ in range(WARMUP):
            send(BytesMessage(body), delivery_mode=NON_PERSISTENT)
        for _ in range(n):
            send(BytesMessage(body), delivery_mode=NON_PERSISTENT)
        send(BytesMessage(body), delivery_mode=PERSISTENT)  # synchronous: its receipt comes after the others'
    finally:
        connection.close()


def _consume(n: int, port: int, ack: str, prefetch: int, every: int = 0, optimized: bool = False,
             body_size: int = BODY_SIZE) -> None:
    import threading

    import amqstomp

    total = WARMUP + n
    done = threading.Event()
    state: Dict[str, int] = {"count": 0}
    conn_box: List[Any] = []

    def on_message(frame: Any) -> None:
        state["count"] += 1
        count = state["count"]
        if every:
            if count % every == 0 or count == total:
                conn_box[0].ack(frame.headers["ack"])
        if count >= total:
            done.set()

    waiter = _Waiter()
    conn = _connect(amqstomp, port, waiter, on_message)
    conn_box.append(conn)
    kwargs: Dict[str, Any] = {}
    if optimized:
        # batches of ack_batch_cap (100); the clock-driven fallbacks (300 ms since the last ACK, 50 ms
        # without a delivery) never fire in a steady native stream, but would under callgrind (50x
        # slower), as often as the machine's load says: out of reach here
        kwargs = {"optimize_acknowledge": True, "optimize_acknowledge_timeout_ms": 600_000,
                  "idle_ack_ms": 600_000}
    conn.subscribe(CONSUME_PREFIX + str(total), id="1", ack=ack,
                   headers={"activemq.prefetchSize": str(prefetch), BODY_SIZE_HEADER: str(body_size)}, **kwargs)
    if not done.wait(CHILD_WAIT_S):
        raise TimeoutError("consumed %d of %d messages in %.0f s" % (state["count"], total, CHILD_WAIT_S))
    conn.disconnect()


def _child_codec_parse(n: int, port: int) -> None:
    from amqstomp.codec import IMPLEMENTATION, FrameParser

    if IMPLEMENTATION != "cython":
        raise RuntimeError("amqstomp.codec loaded the %s implementation, not the compiled one" % IMPLEMENTATION)
    block = b"".join(activemq_message(i) for i in range(CODEC_BLOCK))
    parts = [block[i:i + CODEC_CHUNK] for i in range(0, len(block), CODEC_CHUNK)]
    parser = FrameParser()
    feed = parser.feed
    count = 0
    _settle()
    for _ in range((WARMUP + n) // CODEC_BLOCK):
        for part in parts:
            for frame in feed(part):
                headers = frame.headers
                headers["message-id"]
                headers["ack"]
                headers["destination"]
                headers["subscription"]
                frame.body
                count += 1
    if count != WARMUP + n:
        raise RuntimeError("parsed %d frames, expected %d" % (count, WARMUP + n))


def _child_aio_produce_async(n: int, port: int) -> None:
    import asyncio

    from amqstomp import aio

    async def run() -> None:
        async with aio.connect([("127.0.0.1", port)], heartbeats=(0, 0)) as client:
            _settle()
            dest, body = "/queue/ic.aio.produce", b"x" * BODY_SIZE
            send = _slowed(client.send)
            for _ in range(WARMUP + n):
                await send(dest, body, receipt=False)
            await asyncio.wait_for(send(dest, body, receipt=True), CHILD_WAIT_S)

    asyncio.run(run())


def _child_aio_consume(n: int, port: int, ack: str, prefetch: int) -> None:
    """``async for`` over one subscription (``await message.ack()`` unless ``ack:auto``)."""
    import asyncio

    from amqstomp import aio

    total = WARMUP + n

    async def consume(sub: Any) -> int:
        count = 0
        acking = ack != "auto"
        async for message in sub:
            if acking:
                await message.ack()
            count += 1
            if count >= total:
                break
        return count

    async def run() -> None:
        async with aio.connect([("127.0.0.1", port)], heartbeats=(0, 0)) as client:
            _settle()
            async with client.subscribe(CONSUME_PREFIX + str(total), ack=ack, prefetch_size=prefetch) as sub:
                count = await asyncio.wait_for(consume(sub), CHILD_WAIT_S)
            if count != total:
                raise RuntimeError("consumed %d of %d messages" % (count, total))

    asyncio.run(run())


CHILDREN: Dict[str, Callable[[int, int], None]] = {
    "produce_async": _child_produce_async,
    "produce_tx100": _child_produce_tx100,
    "jms_produce_async": _child_jms_produce_async,
    "consume_auto_p1000": lambda n, port: _consume(n, port, "auto", 1000),
    "consume_individual_p1000": lambda n, port: _consume(n, port, "client-individual", 1000, every=1),
    "consume_cumulative100_p1000": lambda n, port: _consume(n, port, "client", 1000, every=CUMULATIVE_EVERY),
    "consume_optimized_p1000": lambda n, port: _consume(n, port, "client", 1000, optimized=True),
    "consume_individual_p1": lambda n, port: _consume(n, port, "client-individual", 1, every=1),
    "consume_auto_p1000_64k": lambda n, port: _consume(n, port, "auto", 1000, body_size=BIG_BODY_SIZE),
    "consume_individual_p1000_64k": lambda n, port: _consume(n, port, "client-individual", 1000, every=1,
                                                             body_size=BIG_BODY_SIZE),
    "codec_parse": _child_codec_parse,
    "aio_produce_async": _child_aio_produce_async,
    "aio_consume_auto_p1000": lambda n, port: _child_aio_consume(n, port, "auto", 1000),
    "aio_consume_individual_p1000": lambda n, port: _child_aio_consume(n, port, "client-individual", 1000),
    "aio_consume_individual_p1": lambda n, port: _child_aio_consume(n, port, "client-individual", 1),
}


def _loaded() -> Dict[str, Any]:
    """Which amqstomp the child ran: its file and the codec / flow / hand-off implementations."""
    import amqstomp
    from amqstomp import codec, flow
    from amqstomp._io import handoff

    return {"amqstomp": os.path.dirname(amqstomp.__file__), "codec": codec.IMPLEMENTATION,
            "flow": flow.IMPLEMENTATION, "handoff": handoff.IMPLEMENTATION, "python": sys.version.split()[0]}


#: ``AMQSTOMP_BENCH_OTEL``: the children run instrumented (:mod:`amqstomp.otel`), to measure what
#: the instrumentation costs a message: ``sdk`` -- the OpenTelemetry SDK, every span made and handed
#: to an exporter that drops it (a SimpleSpanProcessor: on the calling thread, no timing), every
#: metric recorded (a reader that is never collected); ``api`` -- instrumented with no SDK (the API's
#: no-op providers, as ``opentelemetry-instrument`` with nothing configured). Unset: not instrumented.
OTEL_ENV = "AMQSTOMP_BENCH_OTEL"


def _instrument(how: str) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from amqstomp.otel import AmqstompInstrumentor

    if how == "api":
        AmqstompInstrumentor().instrument()
        return
    if how != "sdk":
        raise SystemExit("%s must be 'sdk' or 'api', got %r" % (OTEL_ENV, how))

    class Dropped(SpanExporter):  # type: ignore[misc]
        def export(self, spans: Any) -> Any:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(Dropped()))
    AmqstompInstrumentor().instrument(tracer_provider=tracer_provider,
                                      meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))


def _freeze_handoff_polls() -> None:
    """The threads' hand-off (:mod:`amqstomp._io.handoff`) looks every 50 ms whether the reading
    thread has read since its last look while it runs listeners, and takes reading over if not: a
    wall-clock rule, which under callgrind (50x slower) would fire at moments the machine's load
    decides. The programs count the per-message path, so their looks are an hour apart (no listener
    here waits on a read, and heart-beats are off)."""
    from amqstomp._io import handoff

    module = handoff._module  # the module loaded (compiled or not): it reads these when it sleeps
    module.ACTIVE_POLL_S = module.IDLE_POLL_S = 3600.0


def child_main(case: str, n: int, port: int) -> int:
    """Run one client program; print one JSON line (``ok`` and what was loaded)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    _freeze_handoff_polls()
    if os.environ.get(OTEL_ENV):
        _instrument(os.environ[OTEL_ENV])
    CHILDREN[case](n, port)
    info = _loaded()
    info.update(ok=True, case=case, n=n)
    print(json.dumps(info), flush=True)
    return 0


# =========================================================================== measuring (the parent)


def find_valgrind() -> Tuple[Optional[str], str]:
    """(the valgrind executable, "") or (None, why not)."""
    path = shutil.which("valgrind")
    if path is None:
        return None, ("valgrind is not installed: the instruction counts cannot be measured "
                      "(apt-get install valgrind; `bash scripts/setup.sh --system` installs it as root)")
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, "valgrind does not run: %s" % exc
    if proc.returncode != 0:
        return None, "valgrind --version exited %d: %s" % (proc.returncode, proc.stderr.strip()[-300:])
    return path, ""


def child_env(python: Optional[str], pycache: str) -> Dict[str, str]:
    """The client programs' environment: a fixed hash seed, byte code cached in ``pycache``
    (``PYTHONPYCACHEPREFIX``: nothing is written into any source tree), the compiled
    extensions on; this tree first on PYTHONPATH unless another interpreter is measured."""
    env = dict(os.environ)
    env.pop("AMQSTOMP_NO_EXTENSIONS", None)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if python is None:
        env["PYTHONPATH"] = REPO_ROOT
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def _child_info(stdout: str) -> Optional[Dict[str, Any]]:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


class Runner:
    """Measures cases: one fake peer for all of them, valgrind runs one at a time.

    Before a case's first valgrind run, its program runs once natively (the
    *prime*): every module it imports, lazily or not, then has its byte code in
    this runner's cache, and the measured runs (``PYTHONDONTWRITEBYTECODE=1``)
    only read it: the N1 and N2 runs do the same start-up work, without compiling.
    """

    def __init__(self, python: Optional[str] = None, keep_dir: Optional[str] = None,
                 log: Callable[[str], None] = print) -> None:
        self.python = python or sys.executable
        self.other_python = python is not None
        self.keep_dir = keep_dir
        self.log = log
        self.peer: Optional[Peer] = None
        self.valgrind, self.valgrind_error = find_valgrind()
        self.loaded: Optional[Dict[str, Any]] = None  # what the primes loaded (amqstomp, codec, flow)
        self.primed: set = set()
        self.peer_report: List[Dict[str, Any]] = []  # the peer's lines about the last run's connections
        self.pycache = tempfile.mkdtemp(prefix="amqstomp-ic-pycache-")
        self.env = child_env(python if self.other_python else None, self.pycache)

    def _port(self, case: Case) -> int:
        if not case.peer:
            return 0
        if self.peer is None or not self.peer.alive():
            self.peer = Peer()
        return self.peer.port

    def _prime(self, case: Case) -> None:
        """Run ``case`` with N1 messages natively, once (writes the byte code; checks it works)."""
        if case.name in self.primed:
            return
        argv = [self.python, "-c", CHILD_STUB, "--child", case.name, str(case.n1), str(self._port(case))]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=self.env,
                                  cwd=tempfile.gettempdir())
        except subprocess.TimeoutExpired:
            raise MeasureError("%s: its program did not end in 300 s (run natively, before valgrind)" % case.name)
        info = _child_info(proc.stdout)
        if proc.returncode != 0 or not info or not info.get("ok"):
            tail = proc.stderr.strip().splitlines()[-4:]
            raise MeasureError("%s: its program failed natively (exit %d): %s" % (case.name, proc.returncode,
                                                                                  " | ".join(tail)))
        for module in ("codec", "flow", "handoff"):
            if info.get(module, "cython") != "cython":  # (an older tree may not report the hand-off)
                raise MeasureError("%s: %s loads amqstomp's pure-Python %s, not the compiled one (build the "
                                   "extensions: bash scripts/setup.sh)" % (case.name, self.python, module))
        self.loaded = {k: info.get(k) for k in ("amqstomp", "codec", "flow", "handoff", "python")}
        self.primed.add(case.name)

    def total(self, case: Case, n: int, tag: str = "") -> Tuple[int, float]:
        """One valgrind run of ``case`` with ``n`` messages: (its total instructions, wall seconds)."""
        if self.valgrind is None:
            raise MeasureError(self.valgrind_error)
        self._prime(case)
        port = self._port(case)
        seen = len(self.peer.lines()) if case.peer and self.peer is not None else 0
        env = dict(self.env, PYTHONDONTWRITEBYTECODE="1")
        with tempfile.TemporaryDirectory(prefix="amqstomp-ic-") as tmp:
            log_path = os.path.join(tmp, "valgrind.log")
            out_path = "/dev/null"
            if self.keep_dir:
                os.makedirs(self.keep_dir, exist_ok=True)
                out_path = os.path.join(self.keep_dir, "callgrind.out.%s.%d%s" % (case.name, n, tag))
            argv = [self.valgrind] + list(VALGRIND_ARGS) + [
                "--callgrind-out-file=" + out_path, "--log-file=" + log_path,
                self.python, "-c", CHILD_STUB, "--child", case.name, str(n), str(port)]
            t0 = time.monotonic()
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env, cwd=tmp)
            except subprocess.TimeoutExpired:
                raise MeasureError("%s n=%d: killed after %.0f s under valgrind" % (case.name, n, RUN_TIMEOUT_S))
            wall = time.monotonic() - t0
            try:
                with open(log_path, encoding="utf-8", errors="replace") as fh:
                    log_text = fh.read()
            except OSError:
                log_text = ""
        if proc.returncode != 0:
            tail = (proc.stderr.strip() or log_text.strip()).splitlines()[-4:]
            raise MeasureError("%s n=%d exited %d under valgrind: %s" % (case.name, n, proc.returncode,
                                                                          " | ".join(tail)))
        info = _child_info(proc.stdout)
        if not info or not info.get("ok"):
            raise MeasureError("%s n=%d: the client program reported nothing" % (case.name, n))
        if info.get("codec") != "cython":
            raise MeasureError("%s n=%d ran the %s codec, not the compiled one" % (case.name, n, info.get("codec")))
        if case.peer and self.peer is not None:
            time.sleep(0.2)  # the peer writes its line when it sees the socket close
            self.peer_report = [json.loads(line) for line in self.peer.lines()[seen:].splitlines()
                                if line.strip().startswith("{")]
        return parse_collected(log_text), wall

    def measure(self, case: Case, repeat: int = 1) -> Dict[str, Any]:
        """``repeat`` differential measurements of ``case`` (N1 then N2, each under valgrind).

        Returns:
            dict: ``case``, ``n1``, ``n2``, ``samples`` (instructions per message,
            one per repeat), ``value`` (their median), ``spread`` (:func:`spread`),
            ``totals`` ([[T1, T2], ...]), ``wall_s`` (all its valgrind runs), ``error``
            ("" or why it could not be measured: then ``value`` is None).
        """
        out: Dict[str, Any] = {"case": case.name, "label": case.label, "n1": case.n1, "n2": case.n2,
                               "samples": [], "totals": [], "wall_s": 0.0, "value": None, "error": ""}
        try:
            for i in range(repeat):
                tag = ".r%d" % (i + 1) if repeat > 1 else ""
                t1, w1 = self.total(case, case.n1, tag)
                report1 = self.peer_report
                t2, w2 = self.total(case, case.n2, tag)
                value = per_message(t1, t2, case.n1, case.n2)
                out["samples"].append(value)
                out["totals"].append([t1, t2])
                if case.peer:  # what the peer saw of the N1 and N2 runs
                    out.setdefault("peer", []).append([report1, self.peer_report])
                out["wall_s"] += w1 + w2
                self.log("  %-28s %10.0f instructions/msg  (N %d -> %d: %d -> %d; %.0f + %.0f s)" % (
                    case.name, value, case.n1, case.n2, t1, t2, w1, w2))
        except MeasureError as exc:
            out["error"] = str(exc)
            self.log("  %-28s FAILED: %s" % (case.name, exc))
        if out["samples"] and not out["error"]:
            out["value"] = statistics.median(out["samples"])
        out["spread"] = spread(out["samples"])
        out["loaded"] = self.loaded
        return out

    def close(self) -> None:
        if self.peer is not None:
            self.peer.stop()
            self.peer = None
        shutil.rmtree(self.pycache, ignore_errors=True)


def measure_cases(cases: Sequence[Case], repeat: int = 1, python: Optional[str] = None,
                  keep_dir: Optional[str] = None, log: Callable[[str], None] = print) -> Dict[str, Dict[str, Any]]:
    """:meth:`Runner.measure` for each case, in order; {case name: its result}."""
    runner = Runner(python, keep_dir, log)
    try:
        return {case.name: runner.measure(case, repeat) for case in cases}
    finally:
        runner.close()


def format_results(results: Dict[str, Dict[str, Any]]) -> str:
    sys.path.insert(0, REPO_ROOT)
    from bench._common import format_table

    rows = []
    for r in results.values():
        sp = r["spread"]
        rows.append([r["case"], r["n1"], r["n2"], "-" if r["value"] is None else "%.0f" % r["value"],
                     " ".join("%.0f" % s for s in r["samples"]) or "-",
                     "-" if sp["range"] is None else "%.0f (%.3f%%)" % (sp["range"], sp["range_pct"]),
                     "%.0f" % r["wall_s"], r["error"][:80]])
    return format_table(rows, ["case", "N1", "N2", "instr/msg", "samples", "spread", "wall s", "error"],
                        "lrrrrrrl")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="", metavar="GLOB[,GLOB]", help="measure only these cases")
    ap.add_argument("--repeat", type=int, default=1, help="differential measurements per case (default 1)")
    ap.add_argument("--python", help="the interpreter whose amqstomp is measured (default: this one, this tree)")
    ap.add_argument("--json", nargs="?", const=os.path.join(REPO_ROOT, "bench", "results", "instructions.json"),
                    metavar="PATH", help="write the results (default path bench/results/instructions.json)")
    ap.add_argument("--keep", metavar="DIR", help="keep the callgrind output files there (callgrind_annotate)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lifetime", type=float, default=3600.0, help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=3, metavar=("CASE", "N", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.peer:
        return peer_main(args.lifetime)
    if args.child:
        return child_main(args.child[0], int(args.child[1]), int(args.child[2]))
    cases = select_cases(args.cases)
    if not cases:
        ap.error("--cases %r matches none of: %s" % (args.cases, ", ".join(CASES)))
    if args.list:
        for c in cases:
            print("%-28s N1=%-6d N2=%-6d %s" % (c.name, c.n1, c.n2, c.label))
        return 0
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    valgrind, why = find_valgrind()
    if valgrind is None:
        print("instructions: %s" % why, file=sys.stderr)
        return 2
    t0 = time.monotonic()
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print("instructions: %d case(s) x %d, callgrind, %s" % (len(cases), args.repeat, args.python or sys.executable),
          flush=True)
    results = measure_cases(cases, args.repeat, args.python, args.keep,
                            log=lambda line: print(line, flush=True))
    wall = time.monotonic() - t0
    print()
    print(format_results(results))
    print("wall %.0f s" % wall)
    if args.json:
        sys.path.insert(0, REPO_ROOT)
        from bench._common import machine_info, write_json

        loaded = next((r["loaded"] for r in results.values() if r.get("loaded")), None)
        print("results written to %s" % write_json(args.json, {
            "bench": "instructions", "started": started, "python": args.python or sys.executable,
            "loaded": loaded, "repeat": args.repeat, "machine": machine_info(), "wall_s": wall,
            "cases": results}))
    return 1 if any(r["error"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
