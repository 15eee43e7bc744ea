"""A fresh user's minor findings in the facades (task "minor"), each with a test that failed
before its fix: a caller's ``content-length`` replaced in silence, a str port taken by one API
and refused by the other, bad command-line values that exited 1 (or later, or never),
``-F`` output whose order depended on timing, a DISCONNECT receipt that never came said
nowhere, and an asyncio handler's error invisible without logging configured. Against the
session's ActiveMQ (a frozen one: a stalled proxy in front of it)."""
import asyncio
import logging
import os
import re
import subprocess
import sys
import textwrap
import time
import uuid
from typing import Any, List

import pytest

import amqstomp
import amqstomp.aio
from amqstomp.exception import ConfigurationError, FrameEncodeError, InvalidHostError
from aio_support import new_queue, run, url
from cli_terminal import AMQSTOMP, cli_env

pytestmark = pytest.mark.timeout(90)


def queue(tag: str) -> str:
    return "/queue/minor-%s-%s" % (tag, uuid.uuid4().hex[:10])


# ------------------------------------------------------------ 2. a str port, in both APIs

def test_both_apis_take_a_port_given_as_a_str_of_digits(activemq):
    host, port = activemq.host_and_ports[0]
    dest = queue("port")
    conn = amqstomp.Connection12([(host, str(port))])
    conn.connect("admin", "admin", wait=True, timeout=15)
    try:
        assert conn.transport.current_host_and_port == (host, port)
        conn.send(dest, "threaded", receipt="r-port")
        conn.wait_for_receipt("r-port", timeout=10)
    finally:
        conn.disconnect()

    async def main() -> List[Any]:
        async with amqstomp.aio.connect([(host, str(port))], login="admin", passcode="admin") as client:
            await client.send(dest, b"aio")
            async with client.subscribe(dest) as sub:
                return [(await sub.get(timeout=10)).body for _ in range(2)]
    assert run(main()) == [b"threaded", b"aio"]


@pytest.mark.parametrize("port", ["abc", "stomp", "6_1613", "", 1.5, None, "0", "70000"])
def test_both_apis_refuse_a_port_that_is_no_number_by_name(port):
    entry = ("127.0.0.1", port)
    with pytest.raises(ConfigurationError) as aio_error:
        amqstomp.aio.connect([entry])
    conn = amqstomp.Connection12([entry])
    with pytest.raises(InvalidHostError) as threaded_error:
        conn.connect("admin", "admin", wait=True, timeout=5)
    for raised, name in ((aio_error, "url_or_hosts"), (threaded_error, "host_and_ports")):
        assert "bad port %r in %s entry %r" % (port, name, entry) in str(raised.value), str(raised.value)


# ------------------------------------------------------------ 3. bad command-line values

@pytest.mark.parametrize("args, named", [
    (["--heartbeats", "x,y"], "argument --heartbeats: invalid heartbeats 'x,y', expecting cx,cy"),
    (["--heartbeats", "1,2,3"], "argument --heartbeats: invalid heartbeats '1,2,3'"),
    (["-F", "no-such-file.txt"], "argument -F/--file: File no-such-file.txt was not found"),
    (["-F", "."], "argument -F/--file: . is not a file"),
    (["-L", " "], "argument -L/--listen: a destination name such as /queue/orders is expected"),
])
def test_a_bad_cli_value_is_a_usage_error_naming_its_option(tmp_path, args, named):
    """argparse's convention (status 2, usage, the option named), before any connect: port 1
    has no broker, so a value let through would end in a connect failure (status 1) instead."""
    proc = subprocess.run(AMQSTOMP + ["-P", "1", "--timeout", "5"] + args, cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=60, env=cli_env(str(tmp_path)))
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "usage: amqstomp" in proc.stderr and named in proc.stderr, proc.stderr
    assert "cannot connect" not in proc.stderr and proc.stdout == ""


# ------------------------------------------------------------ 4. -F: a command's MESSAGE before the next command

@pytest.mark.timeout(180)
def test_a_command_files_message_prints_before_the_next_commands_output(activemq, tmp_path):
    """The MESSAGE a file's send brings (to a destination it subscribed to) printed after a
    later command's line, where depended on timing (a sendrec's after ``version``'s line or
    after ``commit``'s in 3 runs of 6; a plain send's nearly always after). Now in the
    order of the commands, as typed one by one: every run the same."""
    for run_no in range(3):
        dest = queue("file")
        (tmp_path / "c.txt").write_text(
            "subscribe {d}\nsend {d} plain-{n}\nversion\nsendrec {d} rec-{n}\nbegin\nsend {d} tx-{n}\nversion\n"
            "commit\nunsubscribe {d}\n".format(d=dest, n=run_no))
        proc = subprocess.run(AMQSTOMP + ["-P", str(activemq.stomp_port), "-F", "c.txt"], cwd=str(tmp_path),
                              capture_output=True, text=True, timeout=60, env=cli_env(str(tmp_path)))
        assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
        lines = [line for line in proc.stdout.splitlines() if line and not line.startswith(("message-id", "subscr"))]
        lines = [re.sub(r"^\S+ \[Protocol version.*", "VERSION", line) for line in lines]
        lines = [re.sub(r"^(Transaction id|Committing)\b.*", r"\1", line) for line in lines]
        assert lines[1:] == ["plain-%d" % run_no, "VERSION", "rec-%d" % run_no, "Transaction id", "VERSION",
                             "Committing", "tx-%d" % run_no, "Unsubscribing from '%s'" % dest], proc.stdout
