"""The command-line client, driven as a user drives it: typed into a
pseudo-terminal against the session's real ActiveMQ, and compared with
stomp.py 9.0's own client (``python -m stomp``, the real stomp.py, in a
process of its own) doing the same in the same test.

What may differ between the two transcripts is replaced first
(tests/cli_terminal.py: ids, UUIDs, timestamps, the version number, each
run's queue names, prompts); everything else must be the same line for line.
"""
import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from amqstomp.testing import queue_statistics
from cli_terminal import AMQSTOMP, PROMPT, STOMP_PY, Terminal, cli_env, normalise, session
from conftest import broker_keystore

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def stomp_py(tmp_path_factory):
    """stomp.py 9.0's client runs here (``python -m stomp``), else skip."""
    cwd = str(tmp_path_factory.mktemp("stomp_py"))
    proc = subprocess.run(STOMP_PY + ["--version"], cwd=cwd, capture_output=True, text=True, timeout=60)
    if "No module named stomp" in proc.stderr or "No module named 'docopt'" in proc.stderr:
        pytest.skip("stomp.py is not installed (pip install 'stomp.py==9.0.0', the test extra)")
    assert proc.stdout.strip() == "9.0.0", (proc.stdout, proc.stderr)


def _diff(theirs, ours):
    return "\n".join(difflib.unified_diff(theirs, ours, "stomp.py", "amqstomp", lineterm=""))


def _queue_name(destination):
    return destination.rsplit("/", 1)[-1]


def _counters(broker, destination):
    stats = queue_statistics(broker, _queue_name(destination))
    return stats["enqueueCount"], stats["dequeueCount"]


def _scenario(q1, q2):
    """(line typed, what must show up after it) for one session on STOMP 1.1
    (the RECEIPT of sendrec goes to a queue no one reads: a MESSAGE could come before or after it)."""
    message_id = r"message-id: (\S+)\nsubscription: 2\n\nto-ack\n"
    return [
        ("subscribe %s" % q1, r"id set to '1'"),
        ("send %s hello world" % q1, r"\n\nhello world\n"),
        ("sendrec %s with receipt" % q1.replace("one", "three"), r"with receipt\n\n\n"),
        ("sendreply %s corr-7 the reply" % q1, r"\n\nthe reply\n"),
        ("send %s" % q1, r"Expecting: send <destination> <message>"),
        ("unsubscribe /queue/never.subscribed", r"Subscription /queue/never.subscribed not found"),
        ("unsubscribe %s" % q1, r"Unsubscribing from"),
        ("subscribe %s client-individual" % q2, r"id set to '2'"),
        ("subscribe %s" % q2, r"Already subscribed to"),
        ("send %s to-ack" % q2, message_id),
        (lambda text: "ack %s 2" % re.findall(message_id, text)[-1], None),
        ("begin", r"Transaction id: \S+"),
        ("begin", r"Currently in a transaction"),
        ("send %s in-tx" % q2, None),
        ("commit", r"\n\nin-tx\n"),
        ("commit", r"Not currently in a transaction"),
        ("begin", r"Transaction id: \S+"),
        ("send %s dropped" % q2, None),
        ("abort", r"Aborted transaction: \S+"),
        ("stats", r"No stats available"),
        ("stats on", None),
        ("send %s counted" % q2, r"\n\ncounted\n"),
        ("stats", r"Errors: \d+"),
        ("stats off", None),
        ("sendfile %s data.txt" % q2, r"Saved file: data\.txt\.\d+"),
        ("sendfile %s missing.txt" % q2, r"File missing.txt does not exist"),
        ("run commands.txt", r"\n\nfrom-run\n"),
        ("run missing.txt", r"File missing.txt was not found"),
        ("version", r"\[Protocol version 1\.1\]"),
        ("help", r"sendreply +unsubscribe"),
        ("help nosuchtopic", r"No help on nosuchtopic"),
        ("nosuchcommand a b", r"Unknown command: nosuchcommand"),
        ("", None),
        ("quit", None),
    ]


def _run_both(broker, tmp_path, extra_args, scenario, files=None, start=r"\A\n\n$"):
    """Run the scenario with stomp.py's client, then amqstomp's (each with its
    own queues, made alike by :func:`normalise`); returns {name: (lines, queues)}."""
    out = {}
    for name, argv in (("stomp.py", STOMP_PY), ("amqstomp", AMQSTOMP)):
        work = tmp_path / name.replace(".", "_")
        work.mkdir()
        tag = uuid.uuid4().hex[:10]
        queues = {"/queue/cli.%s.one" % tag: "QUEUE-1", "/queue/cli.%s.two" % tag: "QUEUE-2",
                  "/queue/cli.%s.three" % tag: "QUEUE-3"}
        q1, q2 = list(queues)[:2]
        for file_name, text in (files or {}).items():
            (work / file_name).write_text(text.replace("QUEUE-1", q1).replace("QUEUE-2", q2))
        text = session(argv + ["-H", "127.0.0.1", "-P", str(broker.stomp_port)] + extra_args, str(work),
                       cli_env(str(work)), scenario(q1, q2), start=start)
        out[name] = (normalise(text, queues), (q1, q2))
    return out


def test_a_session_prints_what_stomp_pys_client_prints(activemq, stomp_py, tmp_path):
    files = {"data.txt": "file contents\n", "commands.txt": "version\nsend QUEUE-2 from-run\n"}
    runs = _run_both(activemq, tmp_path, [], _scenario, files)
    theirs, ours = runs["stomp.py"][0], runs["amqstomp"][0]
    assert ours == theirs, _diff(theirs, ours)
    # what happened on the broker is the same too: Q1 auto-acked, Q2 one ack, the aborted send dropped
    for (q1, q2), name in ((runs[n][1], n) for n in runs):
        assert _counters(activemq, q1) == (2, 2), name
        assert _counters(activemq, q1.replace("one", "three")) == (1, 0), name
        assert _counters(activemq, q2)[0] == 5, name
    assert _counters(activemq, runs["amqstomp"][1][1])[1] == _counters(activemq, runs["stomp.py"][1][1])[1] == 1
    # the file came back and was saved next to the one sent
    saved = [f for f in os.listdir(tmp_path / "amqstomp") if f.startswith("data.txt.")]
    assert len(saved) == 1 and (tmp_path / "amqstomp" / saved[0]).read_text() == "file contents\n"


def _verbose_scenario(q1, q2):
    return [
        ("subscribe %s" % q1, r"id set to '1'\n"),
        ("send %s verbose body" % q1, r"\n\nverbose body\n"),
        ("quit", None),
    ]


def test_verbose_output_is_stomp_pys(activemq, stomp_py, tmp_path):
    runs = _run_both(activemq, tmp_path, ["-V", "-S", "1.2"], _verbose_scenario, start=r"\nversion:1\.2\n\n\n$")
    theirs, ours = runs["stomp.py"][0], runs["amqstomp"][0]
    # the two differences: amqstomp's SUBSCRIBE asks for the broker's receipt (its reason is in connection.py),
    # and its 1.2 CONNECT's host is "/" where stomp.py sends the broker's host name (RabbitMQ takes that for a
    # virtual host and refuses it: amqstomp/_core/dialect.py connect_host)
    ours = [re.sub(r"'receipt': 'amqstomp-cli-subscribe-<uuid>', ", "", line) for line in ours]
    ours = [line.replace("'host': '/'", "'host': '127.0.0.1'", 1) if line.startswith("Sending {cmd=STOMP") else line
            for line in ours]
    assert ours == theirs, _diff(theirs, ours)
    assert any(line.startswith("Sending {cmd=SEND,headers=[{'destination': 'QUEUE-1'") for line in ours)
    assert "MESSAGE" in ours and "CONNECTED" in ours and "version: 1.2" in ours


def test_help_of_every_command_has_stomp_pys_layout(stomp_py, tmp_path, activemq):
    commands = ["EOF", "abort", "ack", "begin", "commit", "exit", "help", "nack", "quit", "rollback", "run", "send",
                "sendfile", "sendrec", "sendreply", "stats", "subscribe", "unsubscribe", "ver", "version"]

    def scenario(q1, q2):
        return [("help %s" % c, r"(Description:\x1b\[0m\n\t.*\n|Quick help on commands\n)") for c in commands] \
            + [("quit", None)]

    runs = _run_both(activemq, tmp_path, [], scenario)

    def layout(lines):
        # headings and usage lines; the words of the descriptions are each client's own
        keep, after_usage = [], False
        for line in lines:
            if "Usage:" in line or "Parameters:" in line or "Description:" in line or line in commands \
                    or line.startswith("help ") or line == "Quick help on commands":
                keep.append(line.replace("Optional Parameters:", "Parameters:"))
            elif after_usage:
                keep.append(line)
            after_usage = "Usage:" in line
        return [line for line in keep if "Parameters:" not in line]  # stomp.py lists one on unsubscribe by mistake

    assert layout(runs["amqstomp"][0]) == layout(runs["stomp.py"][0])
    assert sum("Usage:" in line for line in runs["amqstomp"][0]) == len(commands) - 1  # help_help has none


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_a_command_file_prints_what_stomp_pys_client_prints(activemq, stomp_py, tmp_path, version):
    """``-F``: commands whose output does not wait on the broker (stomp.py's
    client exits right after the last one, before anything else could arrive).
    The output is a pipe: stomp.py writes its colour codes there too, amqstomp
    only to a terminal (they are taken out of stomp.py's before comparing)."""
    outputs, statuses = {}, {}
    for name, argv in (("stomp.py", STOMP_PY), ("amqstomp", AMQSTOMP)):
        work = tmp_path / name.replace(".", "_")
        work.mkdir()
        queue = "/queue/cli.%s.file" % uuid.uuid4().hex[:10]
        (work / "commands.txt").write_text(
            "version\nbegin\nsend %s in a transaction\ncommit\nstats\nstats on\nstats\nnosuch\n"
            "unsubscribe /queue/x\nsendreply %s\nabort\n" % (queue, queue))
        proc = subprocess.run(argv + ["-P", str(activemq.stomp_port), "-S", version, "-F", "commands.txt"],
                              cwd=str(work),
                              env=cli_env(str(work)), capture_output=True, text=True, timeout=90)
        stdout = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout) if name == "stomp.py" else proc.stdout
        stdout = re.sub(r"(?m)^[0-9][0-9.]* \[Protocol version", "<version> [Protocol version", stdout)
        outputs[name] = [line for line in normalise(stdout, {queue: "QUEUE"}) if line]
        statuses[name] = proc.returncode
        assert "Traceback" not in proc.stderr, proc.stderr
    assert outputs["amqstomp"] == outputs["stomp.py"], _diff(outputs["stomp.py"], outputs["amqstomp"])
    assert "<version> [Protocol version %s]" % version in outputs["amqstomp"]
    assert not any("\x1b" in line for line in outputs["amqstomp"])
    assert statuses == {"stomp.py": 0, "amqstomp": 1}  # amqstomp: a command of the file failed


def test_listen_prints_what_arrives_until_sigterm(activemq, stomp_py, tmp_path):
    import amqstomp

    outputs = {}
    for name, argv in (("stomp.py", STOMP_PY), ("amqstomp", AMQSTOMP)):
        queue = "/queue/cli.%s.listen" % uuid.uuid4().hex[:10]
        term = Terminal(argv + ["-P", str(activemq.stomp_port), "-L", queue], str(tmp_path), cli_env(str(tmp_path)))
        try:
            term.expect(r"Subscribing to '%s'.*\n" % re.escape(queue))
            term.settle()
            sender = amqstomp.Connection12(activemq.host_and_ports)
            sender.connect(wait=True)
            sender.send(queue, "first", headers={"receipt": "r1"})
            sender.wait_for_receipt("r1", timeout=10)
            sender.disconnect()
            term.expect(r"\nfirst\n")
            term.settle()
        finally:
            term.proc.terminate()
            status = term.close()
        outputs[name] = normalise(term.text, {queue: "QUEUE"})
        if name == "amqstomp":
            assert status == 0, term.text
    # CONNECTED prints a blank line (no -V) from the receiving thread while the main thread prints
    # "Subscribing ...": either may come first, in stomp.py too; the rest is in order
    first = {name: next(i for i, line in enumerate(out) if line.startswith("Subscribing"))
             for name, out in outputs.items()}
    for name, out in outputs.items():
        outputs[name] = [line for line in out[:first[name] + 1] if line] + [""] * out[:first[name] + 1].count("") \
            + out[first[name] + 1:]
    assert outputs["amqstomp"] == outputs["stomp.py"], _diff(outputs["stomp.py"], outputs["amqstomp"])


# --------------------------------------------------------------------------- amqstomp's own


def _run(args, cwd, timeout=60, env=None):
    return subprocess.run(AMQSTOMP + args, cwd=str(cwd), capture_output=True, text=True, timeout=timeout,
                          env=env or cli_env(str(cwd)))


def _one_error_line(proc):
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.timeout(60)
def test_an_unknown_host_is_one_line(tmp_path):
    proc = _run(["-H", "no-such-host.invalid"], tmp_path)
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert line.startswith("amqstomp: cannot connect to no-such-host.invalid:61613: unknown host"), line


@pytest.mark.timeout(60)
def test_a_closed_port_is_one_line(tmp_path):
    from amqstomp.testing._process import free_port

    port = free_port()
    proc = _run(["-H", "127.0.0.1", "-P", str(port)], tmp_path)
    assert proc.returncode == 1
    assert _one_error_line(proc) == "amqstomp: cannot connect to 127.0.0.1:%d: connection refused " \
                                    "(no broker listens there)" % port


def test_a_refused_login_on_rabbitmq_says_the_whole_reason(rabbitmq, tmp_path):
    """RabbitMQ's ERROR says ``message:Bad CONNECT`` and the reason in its body:
    the one line has both."""
    host, port = rabbitmq.host_and_ports[0]
    proc = _run(["-H", host, "-P", str(port), "-U", "guest", "-W", "wrong", "-S", "1.2"], tmp_path)
    assert proc.returncode == 1
    assert _one_error_line(proc) == ("amqstomp: %s:%d refused the login of user 'guest': "
                                     "Bad CONNECT: Access refused for user 'guest'" % (host, port))
    assert "wrong" not in proc.stderr and proc.stdout == ""


def test_a_refused_login_says_the_brokers_reason(activemq_factory, tmp_path):
    broker = activemq_factory(users={"admin": "s3cret"}, statistics=False)
    proc = _run(["-P", str(broker.stomp_port), "-U", "admin", "-W", "wrong"], tmp_path)
    assert proc.returncode == 1
    assert _one_error_line(proc) == ("amqstomp: localhost:%d refused the login of user 'admin': "
                                     "User name [admin] or password is invalid." % broker.stomp_port)
    assert "wrong" not in proc.stderr
    assert proc.stdout == ""  # the one line is all (no ERROR frame, no "lost connection")
    (tmp_path / "c.txt").write_text("sendrec /queue/cli.login ok\n")
    good = _run(["-P", str(broker.stomp_port), "-U", "admin", "-W", "s3cret", "-F", "c.txt"], tmp_path)
    assert good.returncode == 0 and good.stderr == "", good.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args, message", [
    (["failover:(tcp://a:61616,tcp://b:61616)"], "is not a STOMP URI"),
    (["stomp://127.0.0.1:61613?jms.prefetchPolicy.all=5"], "option jms.prefetchPolicy.all of the URI belongs"),
    (["failover:(stomp://127.0.0.1:1)?startupMaxReconnectAttempts=2"], "startupMaxReconnectAttempts is not used"),
    (["-H", "stomp://127.0.0.1:61613", "-P", "61613"], "-P does not go with a URI"),
    (["-P", "0"], "argument -P/--port: must be from 1 to 65535"),
    (["-V", "demo"], "'demo' is not a URI"),
])
def test_a_bad_target_is_a_usage_error(tmp_path, args, message):
    proc = _run(args, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert message in proc.stderr


@pytest.mark.parametrize("how", ["positional", "-H"])
def test_host_colon_port_is_a_usage_error_whose_suggestions_work(activemq, tmp_path, how):
    """``amqstomp 127.0.0.1:61613`` (or ``-H 127.0.0.1:61613``, which stomp.py's client would
    look up as a host name): a usage error naming two forms that work; each then connects."""
    where = "127.0.0.1:%d" % activemq.stomp_port
    proc = _run([where] if how == "positional" else ["-H", where], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "-H 127.0.0.1 -P %d" % activemq.stomp_port in proc.stderr, proc.stderr
    assert "stomp://%s" % where in proc.stderr, proc.stderr
    assert "-H %s" % where not in proc.stderr, proc.stderr  # the suggestion that did not work
    (tmp_path / "c.txt").write_text("version\n")
    for args in (["-H", "127.0.0.1", "-P", str(activemq.stomp_port)], ["stomp://" + where]):
        good = _run(args + ["-F", "c.txt"], tmp_path)
        assert good.returncode == 0 and "[Protocol version 1.1]" in good.stdout, (args, good.stdout, good.stderr)


@pytest.mark.parametrize("host", ["::1", "[::1]", "fe80::1%eth0"])
def test_ipv6_addresses_are_no_host_and_port(host):
    from amqstomp.cli.client import host_and_port_typed

    assert host_and_port_typed(host) is None
    assert host_and_port_typed("[::1]:61613") == ("::1", "61613")
    assert host_and_port_typed("broker.example:61614") == ("broker.example", "61614")


def test_colour_codes_go_to_a_terminal_only(activemq, tmp_path):
    """Bold, red and green are for people at a terminal: output to a pipe or a file (``-F``
    in a script, ``| tee``) has none."""
    (tmp_path / "c.txt").write_text("version\nhelp send\nnosuchcommand\ncommit\n")
    proc = _run(["-P", str(activemq.stomp_port), "-F", "c.txt"], tmp_path)
    assert "[Protocol version 1.1]" in proc.stdout and "Usage:" in proc.stdout, proc.stdout
    assert "Unknown command: nosuchcommand" in proc.stdout and "Not currently in a transaction" in proc.stdout
    assert "\x1b" not in proc.stdout + proc.stderr, repr(proc.stdout)
    text = session(AMQSTOMP + ["-P", str(activemq.stomp_port)], str(tmp_path), cli_env(str(tmp_path)),
                   [("version", r"\[Protocol version 1\.1\]"), ("quit", None)])
    assert "\x1b[1m" in text  # at a terminal they stay (stomp.py's look)


def test_every_option_and_tool_has_help_text():
    """``--help`` of the client and of each tool explains every option (``broker --persistent``,
    ``demo --destination``), and each tool says what it does (``amqstomp options --help``)."""
    import argparse

    from amqstomp.cli import client, tools

    parsers = {"amqstomp": client.build_parser()}
    tool_parser = tools.build_parser()
    parsers["amqstomp <tool>"] = tool_parser
    for action in tool_parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.update(("amqstomp " + name, sub) for name, sub in action.choices.items())
    assert {"amqstomp demo", "amqstomp broker", "amqstomp options"} <= set(parsers)
    missing = []
    for name, parser in parsers.items():
        if not (parser.description or "").strip():
            missing.append("%s: no description" % name)
        for action in parser._actions:
            if not (action.help or "").strip() and action.help is not argparse.SUPPRESS:
                missing.append("%s %s: no help" % (name, "/".join(action.option_strings) or action.dest))
    assert not missing, missing


@pytest.mark.timeout(60)
def test_bad_heartbeats_are_a_usage_error_with_stomp_pys_words(tmp_path):
    proc = _run(["--heartbeats", "1,2,3"], tmp_path)  # stomp.py: "Invalid heartbeats, expecting cx,cy", status 1
    assert proc.returncode == 2 and "argument --heartbeats: invalid heartbeats '1,2,3', expecting cx,cy" \
        in proc.stderr.splitlines()[-1], proc.stderr


def test_a_failover_uri_finds_the_broker_that_answers(activemq, tmp_path):
    from amqstomp.testing._process import free_port

    uri = "failover:(stomp://127.0.0.1:%d,stomp://127.0.0.1:%d)?randomize=false&initialReconnectDelay=50" % (
        free_port(), activemq.stomp_port)
    queue = "/queue/cli.%s.failover" % uuid.uuid4().hex[:10]
    (tmp_path / "c.txt").write_text("subscribe %s\nsendrec %s over failover\n" % (queue, queue))
    proc = _run([uri, "-F", "c.txt"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _counters(activemq, queue)[0] == 1


def test_tls_from_the_uri_or_from_ssl(activemq_factory, tmp_path):
    broker = activemq_factory(ssl={"keystore": broker_keystore(tmp_path), "keystore_password": "secret123"})
    queue = "/queue/cli.%s.tls" % uuid.uuid4().hex[:10]
    (tmp_path / "c.txt").write_text("sendrec %s over tls\n" % queue)
    for args in (["stomp+ssl://127.0.0.1:%d" % broker.stomp_ssl_port, "--ssl-insecure"],
                 ["-P", str(broker.stomp_ssl_port), "--ssl", "--ssl-insecure"]):
        proc = _run(args + ["-F", "c.txt"], tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _counters(broker, queue)[0] == 2
    # the broker's self-signed certificate, checked: refused, in one line
    proc = _run(["stomp+ssl://127.0.0.1:%d" % broker.stomp_ssl_port, "-F", "c.txt"], tmp_path)
    assert proc.returncode == 1 and "TLS failed" in _one_error_line(proc), proc.stderr


def test_ack_without_ids_names_the_command(activemq, tmp_path):
    (tmp_path / "c.txt").write_text("ack\nnack\n")
    for version, expected in (("1.1", "ack <message-id> <subscription-id>"), ("1.2", "ack <ack-id>")):
        proc = _run(["-P", str(activemq.stomp_port), "-S", version, "-F", "c.txt"], tmp_path)
        assert "Expecting: %s" % expected in proc.stdout and "Expecting: n%s" % expected in proc.stdout
        assert "bound method" not in proc.stdout and proc.returncode == 1


def test_history_is_kept_and_ctrl_c_drops_the_line(activemq, tmp_path):
    env = cli_env(str(tmp_path))
    term = Terminal(AMQSTOMP + ["-P", str(activemq.stomp_port)], str(tmp_path), env)
    try:
        term.expect(re.escape(PROMPT))
        term.expect(r"Protocol version 1\.1", since=term.send("version"))
        term.settle()
        mark = len(term.text)
        term.interrupt()  # Ctrl-C: a new prompt, the shell carries on
        term.expect(re.escape(PROMPT), since=mark)
        term.settle()
        term.send("quit")
    finally:
        assert term.close() == 0, term.text
    assert "version" in (tmp_path / "history").read_text().split()
    again = Terminal(AMQSTOMP + ["-P", str(activemq.stomp_port)], str(tmp_path), env)
    try:
        again.expect(re.escape(PROMPT))
        again.settle()
        mark = len(again.text)
        os.write(again.fd, b"\x10\x10\r")  # Ctrl-P twice (the line before "quit"), Enter
        again.expect(r"Protocol version 1\.1", since=mark)
        again.settle()
        again.send("quit")
    finally:
        assert again.close() == 0, again.text


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc/<pid>/task")
def test_ctrl_c_taken_by_another_thread_still_gives_a_prompt(activemq, tmp_path):
    """The kernel gives a process's SIGINT to any of its threads that does not block it
    (kill() naming a thread's id: to that one). Taken by one of the connection's threads,
    Python only noted it and the main thread slept on in readline's select() until a key
    came: no new prompt (one way the Ctrl-C test above can fail under load; here every
    time without :mod:`amqstomp.cli._signals`' relay)."""
    term = Terminal(AMQSTOMP + ["-P", str(activemq.stomp_port)], str(tmp_path), cli_env(str(tmp_path)))
    try:
        term.expect(re.escape(PROMPT))
        term.settle()
        pid = term.proc.pid
        others = sorted(int(tid) for tid in os.listdir("/proc/%d/task" % pid) if int(tid) != pid)
        assert others, "the shell runs no thread besides its main one"
        mark = len(term.text)
        os.kill(others[0], signal.SIGINT)  # the connection's first thread takes it
        term.expect(re.escape(PROMPT), since=mark, timeout=15)
        term.settle()
        term.send("quit")
    finally:
        assert term.close() == 0, term.text


@pytest.mark.timeout(60)
def test_importing_the_main_module_runs_nothing(tmp_path):
    code = "import amqstomp.__main__ as m; print('imported', m.StompCLI.__name__, callable(m.main))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "imported StompCLI True", proc.stderr


def test_python_m_stomp_after_install_as_stomp(activemq, tmp_path):
    (tmp_path / "c.txt").write_text("version\n")
    code = ("import sys, runpy, amqstomp; amqstomp.install_as_stomp(); "
            "sys.argv = ['stomp', '-P', sys.argv[1], '-F', 'c.txt']; "
            "runpy.run_module('stomp', run_name='__main__', alter_sys=True)")
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code, str(activemq.stomp_port)], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "[Protocol version 1.1]" in proc.stdout and amqstomp_version() in proc.stdout


def amqstomp_version():
    import amqstomp

    return amqstomp.__version__


def test_the_console_script_is_the_same_client(tmp_path):
    script = os.path.join(os.path.dirname(sys.executable), "amqstomp")
    if not os.path.exists(script):
        script = shutil.which("amqstomp")
    if script is None:
        pytest.skip("no amqstomp console script next to this Python")
    proc = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == amqstomp_version()


# --------------------------------------------------------------------------- the tools


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args, message", [
    (["demo", "--messages", "0"], "argument --messages: must be >= 1, got 0"),
    (["demo", "--messages", "-3"], "argument --messages: must be >= 1, got -3"),
    (["demo", "--prefetch", "0"], "argument --prefetch: must be >= 1, got 0"),
    (["demo", "--body-size", str(200 * 1024 * 1024)], "argument --body-size: must be from 0 to"),
    (["demo", "--messages", "many"], "argument --messages: 'many' is not a whole number"),
    (["demo", "--timeout", "0"], "argument --timeout: must be a number of seconds above 0"),
    (["demo", "--destination", "orders"], "argument --destination: must be /queue/<name>"),
    (["-v", "demo", "--messages", "0"], "argument --messages"),
    (["broker", "--port", "70000"], "argument --port: must be from 1 to 65535"),
])
def test_bad_tool_arguments_are_usage_errors(tmp_path, args, message):
    proc = _run(args, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert message in proc.stderr and "usage: amqstomp" in proc.stderr


@pytest.mark.timeout(90)
def test_broker_on_a_port_held_by_another_process_fails_clearly(tmp_path):
    import socket

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(5)
    port = holder.getsockname()[1]
    try:
        proc = _run(["broker", "--port", str(port)], tmp_path, timeout=80)
    finally:
        holder.close()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ActiveMQ up" not in proc.stdout
    assert _one_error_line(proc) == ("amqstomp broker: ActiveMQ amqstomp-test not started: port %d on 127.0.0.1 "
                                     "is in use by another process (choose another port, or stop that process)"
                                     % port)


def test_broker_runs_until_sigterm(tmp_path):
    term = Terminal(AMQSTOMP + ["broker"], str(tmp_path), cli_env(str(tmp_path)))
    try:
        found = term.expect(r"ActiveMQ up: stomp://127\.0\.0\.1:(\d+) \(pid (\d+)\)", timeout=90)
        term.proc.terminate()
        term.expect(r"stopping ActiveMQ", timeout=30)
    finally:
        status = term.close(timeout=60)
    assert status == 0, term.text
    pid = int(found.group(2))
    assert not os.path.exists("/proc/%d" % pid) or "zombie" in open("/proc/%d/status" % pid).read().lower()


def test_a_lost_connection_is_said_and_the_shell_carries_on(activemq, tcp_proxy_factory, tmp_path):
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    term = Terminal(AMQSTOMP + ["-P", str(proxy.address[1])], str(tmp_path), cli_env(str(tmp_path)))
    try:
        term.expect(re.escape(PROMPT))
        term.settle()
        mark = len(term.text)
        assert proxy.cut() == 1
        term.expect(r"\x1b\[1m\x1b\[31mlost connection\x1b\[0m\n", since=mark)
        term.expect(r"send failed: .*\n", since=term.send("send /queue/cli.lost x"))
        term.settle()
        term.send("quit")
    finally:
        assert term.close() == 0, term.text


def test_a_failover_target_reconnects_and_subscribes_again(activemq, tcp_proxy_factory, tmp_path):
    proxy = tcp_proxy_factory(activemq.host_and_ports[0])
    queue = "/queue/cli.%s.again" % uuid.uuid4().hex[:10]
    uri = "failover:(stomp://127.0.0.1:%d)?initialReconnectDelay=100" % proxy.address[1]
    term = Terminal(AMQSTOMP + [uri], str(tmp_path), cli_env(str(tmp_path)))
    try:
        term.expect(re.escape(PROMPT))
        term.expect(r"id set to '1'", since=term.send("subscribe %s" % queue))
        term.settle()
        mark = len(term.text)
        assert proxy.cut() == 1
        term.expect(r"lost connection: reconnecting.*\n", since=mark)
        term.expect(r"reconnected to 127\.0\.0\.1:%d\n" % proxy.address[1], since=mark)
        term.settle()
        term.expect(r"\n\nafter the cut\n", since=term.send("sendrec %s after the cut" % queue))
        term.settle()
        term.send("quit")
    finally:
        assert term.close() == 0, term.text


def test_a_failover_target_says_a_planned_move_is_a_move(activemq, tcp_proxy_factory, tmp_path):
    """rebalanceInterval moves the connection between two proxies of one broker by plan: the
    shell prints each move as a move (where to, why), never "lost connection"."""
    proxies = [tcp_proxy_factory(activemq.host_and_ports[0]) for _ in range(2)]
    uri = "failover:(%s)?randomize=false&rebalanceInterval=1000&initialReconnectDelay=100" % ",".join(
        "stomp://127.0.0.1:%d" % proxy.address[1] for proxy in proxies)
    term = Terminal(AMQSTOMP + [uri], str(tmp_path), cli_env(str(tmp_path)))
    try:
        term.expect(re.escape(PROMPT))
        mark = len(term.text)
        term.expect(r"moving to 127\.0\.0\.1:%d \(rebalanceInterval\) \(a planned move, not a loss\)\n"
                    % proxies[1].address[1], since=mark)
        term.expect(r"reconnected to 127\.0\.0\.1:%d\n" % proxies[1].address[1], since=mark)
        term.settle()
        assert "lost connection" not in term.text[mark:], term.text[mark:]
        term.send("quit")
    finally:
        assert term.close() == 0, term.text


def test_tab_completes_a_destination_subscribed_to(activemq, tmp_path):
    """(stomp.py's completer takes two arguments where cmd passes four: it never completes.)"""
    queue = "/queue/cli.%s.complete" % uuid.uuid4().hex[:10]
    term = Terminal(AMQSTOMP + ["-P", str(activemq.stomp_port)], str(tmp_path), cli_env(str(tmp_path)))
    try:
        term.expect(re.escape(PROMPT))
        term.expect(r"id set to '1'", since=term.send("subscribe %s" % queue))
        term.settle()
        mark = len(term.text)
        os.write(term.fd, queue[:-6].replace("/queue/", "send /queue/").encode() + b"\t")
        term.expect(re.escape(queue), since=mark)
        os.write(term.fd, b" completed\r")
        term.expect(r"\n\ncompleted\n", since=mark, without_prompts=True)
        term.settle()
        term.send("quit")
    finally:
        assert term.close() == 0, term.text


@pytest.mark.timeout(150)
def test_demo_runs_end_to_end(tmp_path):
    proc = _run(["demo", "--messages", "300", "--body-size", "16", "--prefetch", "50"], tmp_path, timeout=140)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sent 300, received 300, lost 0, duplicates 0" in proc.stdout
    assert "enqueued 300, dequeued 300, left 0" in proc.stdout


def test_ctrl_d_at_the_prompt_ends_the_prompts_line(activemq, tmp_path):
    """Ctrl-D quit with the terminal's cursor still after '> ': the user's shell prompt
    then started on the client's line."""
    term = Terminal(AMQSTOMP + ["-P", str(activemq.stomp_port)], str(tmp_path), cli_env(str(tmp_path)))
    try:
        term.expect(re.escape(PROMPT))
        term.settle()
        mark = len(term.text)
        os.write(term.fd, b"\x04")
    finally:
        assert term.close() == 0, term.text
    assert term.text[mark:].endswith("\n"), repr(term.text[-40:])


@pytest.fixture
def cli11(activemq, tmp_path):
    """A StompCLI on STOMP 1.1 writing to a string, no history; disconnected at the end."""
    import io
    from amqstomp.cli.shell import StompCLI

    shell = StompCLI("127.0.0.1", activemq.stomp_port, "admin", "admin", ver="1.1", stdin=io.StringIO(),
                     stdout=io.StringIO(), history_file="")
    yield shell
    shell.conn.disconnect()


def _complete(shell, line, delimiters=" /-"):
    """What readline would get for ``line`` (the cursor at its end): the completer of its
    command called with the text after the last of readline's delimiters."""
    begidx = max(line.rfind(d) for d in delimiters) + 1
    command = line.split()[0]
    return getattr(shell, "complete_" + command)(line[begidx:], line, begidx, len(line))


def test_tab_completes_destinations_used_and_seen_ids_transactions_and_files(cli11, tmp_path):
    """stomp.py's shell (and ours before) completed destinations subscribed to only."""
    import time as _time

    tag = uuid.uuid4().hex[:8]
    used, seen = "/queue/cli.%s.used" % tag, "/queue/cli.%s.seen" % tag
    cli11.onecmd("send %s hello" % used)
    assert _complete(cli11, "send /queue/cli.%s.u" % tag) == ["cli.%s.used" % tag]
    assert _complete(cli11, "sendrec /queue/cli.%s" % tag) == ["cli.%s.used" % tag]
    cli11.onecmd("subscribe %s client-individual" % seen)
    cli11.onecmd("send %s hi" % seen)
    deadline = _time.monotonic() + 10
    while not cli11._message_ids and _time.monotonic() < deadline:
        _time.sleep(0.02)
    assert _complete(cli11, "unsubscribe /queue/cli.%s." % tag) == ["cli.%s.seen" % tag]
    message_id = next(iter(cli11._message_ids))
    assert _complete(cli11, "ack " + message_id[:3], delimiters=" ") == [message_id]
    assert _complete(cli11, "ack %s " % message_id) == ["1"]  # the subscription's id (STOMP 1.1)
    assert _complete(cli11, "commit ") == []
    cli11.onecmd("begin")
    assert _complete(cli11, "commit ") == [cli11.transaction_id]
    assert _complete(cli11, "abort ") == [cli11.transaction_id]
    cli11.onecmd("abort")
    (tmp_path / "data.bin").write_bytes(b"x")
    (tmp_path / "dir").mkdir()
    prefix = str(tmp_path) + "/d"
    assert _complete(cli11, "sendfile %s %s" % (used, prefix)) == ["data.bin", "dir/"]
    assert _complete(cli11, "sendfile %s %s/data.bin %s/di" % (used, tmp_path, tmp_path)) == ["dir/"]
    assert _complete(cli11, "run %s/da" % tmp_path) == ["data.bin"]
    assert _complete(cli11, "sendfile /queue/cli.%s.s" % tag) == ["cli.%s.seen" % tag]  # the destination first


def test_tab_does_not_offer_ids_of_auto_acked_messages(cli11):
    """An ack:auto message has nothing to acknowledge: ``ack <Tab>`` offered it anyway."""
    import time as _time

    tag = uuid.uuid4().hex[:8]
    auto, acked = "/queue/cli.%s.auto" % tag, "/queue/cli.%s.client" % tag
    cli11.onecmd("subscribe %s" % auto)  # stomp.py's shell: ack mode auto by default
    cli11.onecmd("subscribe %s client-individual" % acked)
    cli11.onecmd("send %s to-auto" % auto)
    cli11.onecmd("send %s to-client" % acked)
    deadline = _time.monotonic() + 10
    while _time.monotonic() < deadline and cli11.stdout.getvalue().count("\nMESSAGE\n") < 2:
        _time.sleep(0.02)
    assert cli11.stdout.getvalue().count("\nMESSAGE\n") == 2  # both printed: both seen
    offered = _complete(cli11, "ack ", delimiters=" ")
    assert len(offered) == 1, offered
    assert offered == list(cli11._message_ids)


@pytest.mark.timeout(180)
def test_a_command_file_prints_every_message_that_came_before_it_ends(activemq, tmp_path):
    """``-F`` with ``subscribe`` then ``sendrec``: the MESSAGE comes right after the
    RECEIPT, about when the file ends; it printed in 2 runs of 3 (the session's end
    stopped the printing before the dispatcher got to it). Now every run prints it,
    and exits 0. ``stats`` with nothing counted is stomp.py's line, no failure."""
    for run in range(5):
        queue = "/queue/cli.%s.fsr" % uuid.uuid4().hex[:10]
        (tmp_path / "c.txt").write_text("subscribe %s\nsendrec %s hello-from-F-%d\nstats\n" % (queue, queue, run))
        proc = _run(["-P", str(activemq.stomp_port), "-F", "c.txt"], tmp_path)
        assert "hello-from-F-%d" % run in proc.stdout, "run %d: the message was not printed:\n%s" % (run, proc.stdout)
        assert "No stats available" in proc.stdout and "lost connection" not in proc.stdout, proc.stdout
        assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.timeout(120)
def test_a_command_file_may_be_a_pipe_and_a_directory_is_refused(activemq, tmp_path):
    """``-F /dev/stdin`` (and so ``-F <(printf ...)``: a pipe, not a regular file) runs
    the commands it reads, as stomp.py's client does (a fresh user's finding: it
    was refused with "is not a file"); a directory is refused (argparse: its usage, then the reason), exit 2,
    before connecting."""
    queue = "/queue/cli.%s.pipe" % uuid.uuid4().hex[:10]
    proc = subprocess.run(AMQSTOMP + ["-P", str(activemq.stomp_port), "-F", "/dev/stdin"], cwd=str(tmp_path),
                          input="send %s from a pipe\nstats\n" % queue, capture_output=True, text=True,
                          timeout=90, env=cli_env(str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    stats = queue_statistics(activemq, queue[len("/queue/"):])
    assert stats and stats["enqueueCount"] == 1, stats
    (tmp_path / "adir").mkdir()
    proc = _run(["-P", str(activemq.stomp_port), "-F", "adir"], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "adir is a directory" in proc.stderr.strip().splitlines()[-1], proc.stderr  # argparse's usage, then it


@pytest.mark.timeout(180)
def test_ctrl_c_during_the_demo_stops_its_broker_in_one_line(tmp_path):
    """``amqstomp demo`` interrupted (SIGINT, as Ctrl-C) while it runs: one line on
    stderr and exit status 130, not a traceback; the ActiveMQ it started is stopped
    (a fresh user's finding: a raw KeyboardInterrupt traceback, status -2)."""
    from amqstomp.testing import ActiveMQBroker
    if not ActiveMQBroker.available():
        pytest.skip("no ActiveMQ here")
    proc = subprocess.Popen(AMQSTOMP + ["demo", "--messages", "50000000", "--timeout", "120"], cwd=str(tmp_path),
                            env=cli_env(str(tmp_path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = None
        for line in proc.stdout:  # (ends when the process does: bounded by the test's timeout)
            found = re.search(r"ActiveMQ started on .* \(pid (\d+)\)", line)
            if found:
                pid = int(found.group(1))
                break
        assert pid is not None, proc.stderr.read()
        time.sleep(1.0)  # inside run_demo: sending
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err, err
    assert "interrupted (Ctrl-C); stopping ActiveMQ" in err
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the demo's ActiveMQ (pid %d) still runs" % pid
