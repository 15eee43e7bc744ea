"""The front pages' first example runs as written (the README's "Use" and the docs' index):
pasted into a file and run against a real ActiveMQ, it prints the message it sent and leaves
nothing on the queue. A snippet that printed nothing (it ended before delivery) was a defect."""
import os
import re
import subprocess
import sys
import uuid

import pytest

from amqstomp.testing import queue_statistics

pytestmark = pytest.mark.broker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _first_python_block(path, after):
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        text = fh.read()
    start = text.index(after) if after else 0
    found = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert found, "no python example in %s" % path
    return found.group(1)


@pytest.mark.parametrize("path, after", [("README.md", "## Use"), ("docs/index.md", "")])
def test_the_front_page_example_prints_its_message(activemq, path, after):
    code = _first_python_block(path, after)
    assert '("127.0.0.1", 61613)' in code and '"/queue/orders"' in code, code
    queue = "/queue/orders." + uuid.uuid4().hex[:8]
    code = code.replace('("127.0.0.1", 61613)', '("127.0.0.1", %d)' % activemq.stomp_port)
    code = code.replace('"/queue/orders"', repr(queue))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^\S+ hello$", proc.stdout, re.M), (proc.stdout, proc.stderr)
    stats = queue_statistics(activemq, queue[len("/queue/"):])
    assert stats["size"] == 0, stats  # acknowledged before DISCONNECT


def test_the_readme_asyncio_example_prints_its_message(activemq):
    code = _first_python_block("README.md", "### asyncio")
    assert '"stomp://127.0.0.1:61613"' in code and '"/queue/orders"' in code, code
    queue = "/queue/orders." + uuid.uuid4().hex[:8]
    code = code.replace('"stomp://127.0.0.1:61613"', repr("stomp://127.0.0.1:%d" % activemq.stomp_port))
    code = code.replace('"/queue/orders"', repr(queue))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "b'hello'", (proc.stdout, proc.stderr)
    stats = queue_statistics(activemq, queue[len("/queue/"):])
    assert stats["size"] == 0, stats  # acknowledged


def _run_migration_rows(activemq, heading):
    """Run the program after the migration table under ``heading`` in docs/guides/asyncio.md
    against the session's broker; (its stdout, the queue it used). Every row of the table
    (``| N |``, numbered 1..N, 10 rows at least) must print ``row N ok``."""
    with open(os.path.join(ROOT, "docs/guides/asyncio.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text[text.index(heading):]
    end = section.find("\n## ")  # the next section's heading
    section = section if end < 0 else section[:end]
    rows = re.findall(r"^\| (\d+) \|", section, re.M)
    assert rows == [str(n) for n in range(1, len(rows) + 1)] and len(rows) >= 10, rows
    code = _first_python_block("docs/guides/asyncio.md", heading)
    queue = "/queue/migrate." + uuid.uuid4().hex[:8]
    code = code.replace("stomp://127.0.0.1:61613", "stomp://127.0.0.1:%d" % activemq.stomp_port)
    code = code.replace('"/queue/migrate"', repr(queue))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    done = re.findall(r"^row (\d+) ok", proc.stdout, re.M)
    assert sorted(done, key=int) == rows, proc.stdout
    return proc.stdout, queue


@pytest.mark.timeout(120)
def test_the_stompman_migration_rows_run(activemq):
    """docs/guides/asyncio.md's migration table from stompman: its program runs every row
    (``# row N``, printing ``row N ok``) against the session's broker, and no row of the
    table is left without its run."""
    out, queue = _run_migration_rows(activemq, "## Migrating from stompman")
    assert "row 5 ok 3" in out and "row 6 ok ['refused']" in out, out
    assert "row 11 ok [b'hi there!', b'in a transaction', b'through failover']" in out, out
    assert "row 7 ok b'auto'" in out and "row 8 ok b'to Europe'" in out and "row 10 ok b'by hand'" in out, out
    stats = queue_statistics(activemq, queue[len("/queue/"):])
    assert stats["size"] == 0, stats  # ACKed, NACKed (to the DLQ) or auto


@pytest.mark.timeout(120)
def test_the_aiostomp_migration_rows_run(activemq):
    """docs/guides/asyncio.md's migration table from aiostomp: the same, for its 12 rows: a
    handler's return ACKs, its exception is redelivered by the policy then NACKed, ack/nack by
    hand, a selector, UNSUBSCRIBE, a broker ERROR raised by the await it answered, close."""
    out, queue = _run_migration_rows(activemq, "## Migrating from aiostomp")
    assert "row 4 ok ['confirmed #1', 'confirmed #2', 'fire and forget #1']" in out, out
    assert "row 5 ok ['not yet', 'refused', 'refused']" in out, out
    assert "row 6 ok ['through failover #1', 'through failover #2']" in out, out
    assert "row 7 ok b'by hand'" in out and "row 8 ok b'to Europe'" in out, out
    assert "row 10 ok BrokerError 0" in out and "row 11 ok False" in out and "row 12 ok 5" in out, out
    stats = queue_statistics(activemq, queue[len("/queue/"):])
    assert stats["size"] == 0, stats  # ACKed, or NACKed (to the DLQ)
