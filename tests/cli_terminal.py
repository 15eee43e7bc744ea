"""Drive a command-line program through a pseudo-terminal, as a user at a
keyboard does, and normalise what it printed so that two clients' sessions
can be compared (tests/test_cli.py: amqstomp's client against stomp.py's).

Every wait has a deadline; a pattern that does not show up in time fails
with the whole transcript so far.
"""
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from typing import Callable, Dict, List, Optional, Sequence, Union

#: the interactive prompt of both clients
PROMPT = "> "

Step = Union[str, Callable[[str], str]]


class Terminal:
    """``argv`` running on a pty (80 columns) in ``cwd`` with ``env``."""

    def __init__(self, argv: Sequence[str], cwd: str, env: Dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        # a program started with SIGINT ignored keeps ignoring it (Python installs no handler): so
        # is every program a non-interactive shell starts in the background (`pytest ... &`), and
        # Ctrl-C then never showed a new prompt. The program gets SIGINT's default, as at a terminal.
        ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        if ignored:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # (reset to the default by exec)
        try:
            self.proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                                         start_new_session=True, close_fds=True)
        finally:
            if ignored:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.close(slave)
        self.argv = list(argv)
        self.fd = master
        self.raw = b""
        self.eof = False

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace").replace("\r", "")

    def _read(self, timeout: float) -> bool:
        """Read what is there within ``timeout`` s; False when nothing came."""
        if self.eof:
            time.sleep(timeout)
            return False
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the program closed the terminal
            data = b""
        if not data:
            self.eof = True
            return False
        self.raw += data
        return True

    def expect(self, pattern: str, since: int = 0, timeout: float = 30.0, without_prompts: bool = False,
               transform: Optional[Callable[[str], str]] = None) -> "re.Match[str]":
        """Wait until ``pattern`` (a regex) matches the text after character
        ``since`` (with every prompt taken out first when ``without_prompts``:
        the shell and the thread printing what arrives print them in either
        order; or changed by ``transform``)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text[since:]
            if without_prompts:
                text = _without_prompts(text)
            if transform is not None:
                text = transform(text)
            found = re.search(pattern, text)
            if found:
                return found
            left = deadline - time.monotonic()
            if left <= 0 or (self.eof and not self._read(0)):
                raise AssertionError("%r did not show up within %.0f s in %s; the session so far:\n%r"
                                     % (pattern, timeout, " ".join(self.argv), self.text))
            self._read(min(left, 0.1))

    def settle(self, quiet: float = 0.3, timeout: float = 10.0) -> None:
        """Read until nothing came for ``quiet`` s (at most ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(quiet):
            pass

    def send(self, line: str) -> int:
        """Type ``line`` and Enter; returns where the text stood before (for :meth:`expect`)."""
        mark = len(self.text)
        os.write(self.fd, line.encode() + b"\r")
        return mark

    def interrupt(self) -> None:
        """Ctrl-C (SIGINT to the program: the pty is not its controlling terminal)."""
        self.proc.send_signal(signal.SIGINT)

    def close(self, timeout: float = 30.0) -> int:
        """Wait for the program to end (killed after ``timeout`` s); its exit status."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        while self._read(0.05):
            pass
        os.close(self.fd)
        return self.proc.returncode


def session(argv: Sequence[str], cwd: str, env: Dict[str, str], steps: Sequence[Sequence[Optional[Step]]],
            start: str = r"\A\n\n$", timeout: float = 30.0) -> str:
    """Run ``argv`` on a pty, wait for ``start`` (CONNECTED's two lines and
    the first prompt; matched without blanks and ``>``: stomp.py's shell prints
    them from two threads, in any order, even a prompt cut in two), then
    for each ``(line, pattern)`` of ``steps`` type the line (a callable gets
    the text so far and returns the line) and wait for ``pattern`` in what
    follows (None: nothing in particular), and for quiet. Returns the text;
    fails when the program does not exit 0 after the last step."""
    term = Terminal(argv, cwd, env)
    try:
        term.expect(start, timeout=timeout, transform=lambda text: text.replace(">", "").replace(" ", ""))
        term.settle()
        for line, pattern in steps:
            typed = line(term.text) if callable(line) else line
            assert isinstance(typed, str)
            mark = term.send(typed)
            if pattern is not None:
                term.expect(pattern, since=mark, timeout=timeout, without_prompts=True)
            term.settle()
    finally:
        status = term.close()
    assert status == 0, "exit status %s; the session:\n%s" % (status, term.text)
    return term.text


def _without_prompts(text: str) -> str:
    """``text`` without prompts: at the start (CONNECTED's lines and the first
    prompt, in the order two threads printed them), at the start of lines, and
    the halves of a prompt that lines printed by the other thread cut in two
    (``>`` ending one line, a blank starting a later one)."""
    text = re.sub(r"\A[\n> ]*", lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r"^(> ?)+", "", text, flags=re.M)
    return re.sub(r"^ (?=\S)", "", text, flags=re.M)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalise(text: str, names: Optional[Dict[str, str]] = None) -> List[str]:
    """The lines of a session with what differs from run to run replaced:
    ``names`` (e.g. each run's queue names), ActiveMQ ids, UUIDs (transaction
    ids), timestamps, the client's version number and saved-file suffixes;
    readline's terminal modes and every prompt are dropped (prompts are
    printed by the reading thread and the shell in either order)."""
    text = _without_prompts(re.sub(r"\x1b\[\?\d+[hl]", "", text.replace("\r", "")))
    for real, alias in (names or {}).items():
        text = text.replace(real, alias)
    text = re.sub(r"ID:[\w.:-]+", "ID:<id>", text)
    text = _UUID.sub("<uuid>", text)
    text = re.sub(r"(timestamp|expires): \d+", r"\1: <t>", text)
    text = re.sub(r"\x1b\[1m[0-9][0-9.]* \[Protocol version", "\x1b[1m<version> [Protocol version", text)
    text = re.sub(r"(Saved file: \S+?)\.\d+$", r"\1.<t>", text, flags=re.M)
    return text.split("\n")


def cli_env(home: str) -> Dict[str, str]:
    """The environment both clients run in: a dumb terminal, their own HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TERM="dumb", HOME=home, AMQSTOMP_HISTORY=os.path.join(home, "history"), PYTHONUNBUFFERED="1")
    return env


STOMP_PY = [sys.executable, "-m", "stomp"]
AMQSTOMP = [sys.executable, "-m", "amqstomp"]
