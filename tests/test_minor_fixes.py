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


# ------------------------------------------------------------ 1. a caller's content-length

@pytest.mark.parametrize("auto", [True, False], ids=["auto", "no-auto"])
def test_a_content_length_that_is_not_the_bodys_size_is_replaced_as_stomp_py_does_and_said(
        stomp_connect, caplog, auto):
    """stomp.py 9.0 writes every given content-length as the body's size (utils.convert_frame),
    auto_content_length or not: so does amqstomp (the broker gets the whole body), and it is no
    longer silent: one WARNING names the value given and the size sent, later ones are DEBUG."""
    conn, col = stomp_connect(auto_content_length=auto)
    dest = queue("cl")
    conn.subscribe(dest, id="1", ack="auto")
    with caplog.at_level(logging.DEBUG, logger="amqstomp.connection"):
        conn.send(dest, "hello world", headers={"content-length": 5})
        conn.send(dest, "h\u00e9llo", headers={"content-length": "6"})  # 6 bytes encoded: no mismatch
        conn.send(dest, "hello again", headers={"content-length": "3"})
    bodies = [frame.body for frame in col.wait_messages(3)]
    assert bodies == ["hello world", "h\u00e9llo", "hello again"]
    said = [r for r in caplog.records if "content-length" in r.getMessage() and r.name == "amqstomp.connection"]
    assert [r.levelno for r in said] == [logging.WARNING, logging.DEBUG], [r.getMessage() for r in said]
    assert "content-length 5 given for a body of 11 bytes: 11 is sent" in said[0].getMessage()


def test_the_asyncio_api_refuses_a_content_length_that_is_not_the_bodys_size(activemq):
    """The asyncio API has no stomp.py code to keep working: a mismatch is refused, named,
    nothing written (the connection goes on)."""
    dest = new_queue("minor-cl")

    async def main() -> List[Any]:
        async with amqstomp.aio.connect(url(activemq), login="admin", passcode="admin") as client:
            with pytest.raises(FrameEncodeError, match=r"content-length='5'.*11 bytes"):
                await client.send(dest, "hello world", {"content-length": 5})
            await client.send(dest, "hello world", {"content-length": 11})
            async with client.subscribe(dest) as sub:
                return [(await sub.get(timeout=10)).body]
    assert run(main()) == [b"hello world"]


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
    (["-F", "."], "argument -F/--file: . is a directory, not a file of commands"),
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


# ------------------------------------------------------------ 5. a DISCONNECT receipt that never came

def test_disconnect_to_a_frozen_broker_returns_in_its_bound_and_warns_naming_the_receipt(
        activemq, tcp_proxy_factory, caplog):
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    conn = amqstomp.Connection12([proxy.address], timeout=1.0)
    conn.connect("admin", "admin", wait=True, timeout=15)
    proxy.stall()  # receives, never answers
    with caplog.at_level(logging.WARNING, logger="amqstomp.connection"):
        started = time.monotonic()
        conn.disconnect(receipt="frozen-receipt")  # no exception: stomp.py's disconnect() raises none either
        took = time.monotonic() - started
    assert took < 1.0 + 10.0, took  # its bound (1 s) and the threads' join
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "frozen-receipt" in r.getMessage()]
    assert len(said) == 1 and "within 1 s" in said[0], [r.getMessage() for r in caplog.records]
    assert not conn.is_connected()


def test_disconnect_with_its_receipt_answered_warns_of_nothing(stomp_connect, caplog):
    conn, _ = stomp_connect()
    with caplog.at_level(logging.WARNING, logger="amqstomp"):
        conn.disconnect(receipt="answered-receipt")
    assert not [r for r in caplog.records if "answered-receipt" in r.getMessage()]


def test_aio_close_to_a_frozen_broker_warns_without_raising(activemq, tcp_proxy_factory, caplog):
    """close() runs as ``async with``'s exit: it does not raise for the broker's silence (an
    error there would hide the block's own); it says so at WARNING (it was INFO)."""
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])

    async def main() -> float:
        client = await amqstomp.aio.connect("stomp://%s:%d" % proxy.address, login="admin", passcode="admin",
                                            close_timeout=1.0)
        proxy.stall()
        started = time.monotonic()
        await client.close()
        return time.monotonic() - started
    with caplog.at_level(logging.WARNING, logger="amqstomp.aio"):
        took = run(main())
    assert took < 5.0, took
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "DISCONNECT" in r.getMessage()]
    assert len(said) == 1 and "no RECEIPT for the DISCONNECT within 1 s" in said[0], said


# ------------------------------------------------------------ 6. an asyncio handler's error, logging not configured

HANDLER_FAILS = textwrap.dedent("""
    import asyncio, sys
    import amqstomp.aio
    from amqstomp.flow import RedeliveryPolicy

    async def main(target, dest):
        seen = []

        async def handler(message):
            seen.append(message.body)
            raise RuntimeError("the handler's own error")

        async with amqstomp.aio.connect(target, login="admin", passcode="admin") as client:
            await client.send(dest, b"one")
            await client.send(dest, b"two")
            policy = RedeliveryPolicy(maximum_redeliveries=0)
            async with client.subscribe(dest, ack="client-individual", redelivery_policy=policy) as sub:
                task = asyncio.ensure_future(sub.run(handler, on_error=None if sys.argv[3] == "default" else
                                                     lambda exc, message: 1 / 0))
                for _ in range(200):  # bounded: 10 s
                    if len(seen) >= 2:
                        break
                    await asyncio.sleep(0.05)
                await sub.close()
                await asyncio.wait_for(task, 10)
        print("handled", len(seen))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
""")


@pytest.mark.parametrize("on_error", ["default", "raising"])
def test_an_aio_handlers_error_reaches_stderr_without_logging_configured(activemq, tmp_path, on_error):
    """As the threaded APIs' listener errors: with no logging set up (amqstomp's NullHandler
    only), a failing handler (or a failing on_error) is written to stderr with its traceback;
    before, it was a WARNING nobody could see."""
    script = tmp_path / "handler_fails.py"
    script.write_text(HANDLER_FAILS)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, str(script), url(activemq), new_queue("minor-stderr"), on_error],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and "handled 2" in proc.stdout, (proc.stdout, proc.stderr)
    if on_error == "default":
        assert proc.stderr.count("amqstomp: handler of subscription") == 2, proc.stderr
        assert "RuntimeError: the handler's own error" in proc.stderr
    else:
        assert proc.stderr.count("amqstomp: on_error of subscription") == 2, proc.stderr
        assert "ZeroDivisionError" in proc.stderr


def test_an_aio_handlers_error_is_logged_once_logging_is_configured(activemq, caplog, capsys):
    """With a handler configured (caplog's), the record goes there, not to stderr as well."""
    dest = new_queue("minor-logged")

    async def main() -> None:
        async def handler(message: Any) -> None:
            raise RuntimeError("logged, not printed")

        async with amqstomp.aio.connect(url(activemq), login="admin", passcode="admin") as client:
            await client.send(dest, b"x")
            async with client.subscribe(dest) as sub:
                task = asyncio.ensure_future(sub.run(handler))
                for _ in range(200):  # bounded: 10 s
                    if any("handler of subscription" in r.getMessage() for r in caplog.records):
                        break
                    await asyncio.sleep(0.05)
                await sub.close()
                await asyncio.wait_for(task, 10)
    with caplog.at_level(logging.WARNING, logger="amqstomp.aio"):
        run(main())
    said = [r for r in caplog.records if "handler of subscription" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING and said[0].exc_info is not None
    assert "logged, not printed" not in capsys.readouterr().err
