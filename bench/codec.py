"""bench/codec: frames/s of amqstomp's codec against stomp.py's parse path, in one run.

Both parse the same in-memory stream of ActiveMQ-style MESSAGE frames, fed in
16 KiB chunks:

* stomp.py: its transport's frame splitting (``BaseTransport.__read`` with
  ``receive()`` served from memory) plus ``stomp.utils.parse_frame`` per frame,
  exactly what its reader thread does per socket read;
* amqstomp: ``FrameParser.feed`` of the compiled module, and of the pure-Python twin.

It also times a 16 MiB and a 64 MiB body made of NULs (with content-length)
to show parse time is linear in body size.

Usage: ``python bench/codec.py [--frames 100000] [--repeat 3] [--json PATH]``.
Prints a table and the ratios; writes JSON when asked.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHUNK = 16 * 1024


def activemq_message(i: int, body_size: int = 256) -> bytes:
    """A MESSAGE frame shaped like the ones ActiveMQ 5.17 sends on a STOMP 1.2 connection
    (which escapes every ':' of a header value as ``\\c``)."""
    mid = "ID\\cbench-host-40123-1764489600000-3\\c1\\c1\\c1\\c%d" % (i + 1)
    head = (
        "MESSAGE\n"
        "content-length:%d\n"
        "expires:0\n"
        "destination:/queue/bench.codec\n"
        "subscription:1\n"
        "priority:4\n"
        "message-id:%s\n"
        "persistent:true\n"
        "timestamp:%d\n"
        "ack:%s\n"
        "\n" % (body_size, mid, 1764489600000 + i, mid)
    ).encode("ascii")
    return head + (b"x" * body_size) + b"\x00\n"


def make_stream(n: int, body_size: int = 256) -> bytes:
    return b"".join(activemq_message(i, body_size) for i in range(n))


def chunks(data: bytes, size: int = CHUNK):
    return [data[i:i + size] for i in range(0, len(data), size)]


def run_amqstomp(module, parts, expect: int) -> float:
    parser = module.FrameParser()
    count = 0
    t0 = time.perf_counter()
    for part in parts:
        count += len(parser.feed(part))
    dt = time.perf_counter() - t0
    assert count == expect, (count, expect)
    return dt


def run_stomppy(parts, expect: int) -> float:
    import stomp.transport
    import stomp.utils

    class MemoryTransport(stomp.transport.BaseTransport):
        def __init__(self, parts):
            super().__init__(auto_decode=False)
            self._parts = iter(parts)
            self.running = True

        def receive(self):
            return next(self._parts, b"")

    transport = MemoryTransport(parts)
    read = transport._BaseTransport__read
    parse = stomp.utils.parse_frame
    count = 0
    t0 = time.perf_counter()
    try:
        while count < expect:
            for raw in read():
                if parse(raw) is not None:
                    count += 1
    except stomp.exception.ConnectionClosedException:
        pass
    dt = time.perf_counter() - t0
    assert count == expect, (count, expect)
    return dt


def big_body(module, size: int) -> float:
    frame = b"MESSAGE\ndestination:/queue/big\ncontent-length:%d\n\n" % size + bytes(size) + b"\x00"
    parts = chunks(frame)
    parser = module.FrameParser(max_body_length=size + 1)
    t0 = time.perf_counter()
    out = []
    for part in parts:
        out += parser.feed(part)
    dt = time.perf_counter() - t0
    assert len(out) == 1 and len(out[0].body) == size
    return dt


def big_body_case(repeat: int) -> dict:
    """Time 16 MiB and 64 MiB bodies in a child process whose malloc maps every
    large block afresh (MALLOC_MMAP_THRESHOLD_ fixed), so both sizes pay the
    same page faults per byte. With glibc's default, a 16 MiB block is reused
    from the heap while a 64 MiB one is mapped and faulted in on every run,
    which measures the allocator, not the parser."""
    import subprocess

    code = (
        "import json, statistics, sys; sys.path.insert(0, %r)\n"
        "from bench.codec import big_body\n"
        "from amqstomp._core import _codec, _codec_py\n"
        "out = {}\n"
        "for name, mod in (('compiled', _codec), ('pure Python', _codec_py)):\n"
        "    t16 = statistics.median(big_body(mod, 16 << 20) for _ in range(%d))\n"
        "    t64 = statistics.median(big_body(mod, 64 << 20) for _ in range(%d))\n"
        "    out[name] = {'16MiB_s': t16, '64MiB_s': t64, 'ratio_64_16': t64 / t16}\n"
        "print(json.dumps(out))\n"
    ) % (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), repeat, repeat)
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the median is reported")
    ap.add_argument("--skip-big", action="store_true", help="skip the 16/64 MiB body case")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)

    from amqstomp._core import _codec_py
    try:
        from amqstomp._core import _codec as compiled
    except ImportError:
        sys.exit("the compiled codec is not built: pip install -e . (or python setup.py build_ext --inplace)")

    data = make_stream(args.frames)
    parts = chunks(data)
    n = args.frames
    results = {"frames": n, "bytes": len(data), "python": platform.python_version(), "cases": {}}

    def median(fn):
        return statistics.median(fn() for _ in range(args.repeat))

    cases = {
        "stomp.py": lambda: run_stomppy(parts, n),
        "amqstomp (compiled)": lambda: run_amqstomp(compiled, parts, n),
        "amqstomp (pure Python)": lambda: run_amqstomp(_codec_py, parts, n),
    }
    for name, fn in cases.items():
        dt = median(fn)
        results["cases"][name] = {"seconds": dt, "frames_per_s": n / dt}
    base = results["cases"]["stomp.py"]["frames_per_s"]
    print("%-24s %12s %10s" % ("parser", "frames/s", "vs stomp.py"))
    for name, r in results["cases"].items():
        r["ratio"] = r["frames_per_s"] / base
        print("%-24s %12.0f %9.1fx" % (name, r["frames_per_s"], r["ratio"]))

    if not args.skip_big:
        results["big_body"] = big_body_case(args.repeat)
        for name, r in results["big_body"].items():
            print("%s, NUL-filled body, 16 KiB chunks: 16 MiB %.4f s, 64 MiB %.4f s, ratio %.2f (linear = 4)"
                  % (name, r["16MiB_s"], r["64MiB_s"], r["ratio_64_16"]))

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return results


if __name__ == "__main__":
    main()
