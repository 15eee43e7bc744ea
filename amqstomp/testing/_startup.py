"""How a test broker's start is judged: is a port free, has OUR broker
started, and if it did not, why.

- :func:`port_in_use`: another process listens on ``host:port`` now (checked
  before launching, so a held port fails at once, clearly).
- :func:`read_from`: a log file from a byte offset on (the offset taken at
  launch, so a restart does not read the previous run's lines).
- :func:`started_line`: the line in which ActiveMQ's ``BrokerService`` says
  *this* broker (by its ``brokerName``) has started every connector: the proof
  that the STOMP port answering is ours, not another process's listener.
- :func:`failure_reason`: the few lines that say why a start failed (the
  ERROR line and the root ``Caused by:``), instead of the Java stack trace;
  :func:`log_tail`: the longer story, for test failures.
"""
from __future__ import annotations

import errno
import os
import re
import socket
from typing import List, Optional

from ._process import tail_file

__all__ = ["BrokerNotAvailable", "BrokerStartError", "failure_reason", "file_size", "log_tail", "port_in_use", "read_from", "started_line"]

class BrokerNotAvailable(RuntimeError):
    """ActiveMQ (or Java) is not installed on this machine."""


class BrokerStartError(RuntimeError):
    """The broker could not start: a port it was given is held by another
    process, it exited during start-up, or it did not answer STOMP in time.

    Attributes:
        summary (str): what happened and why, in a few lines (the broker's
            ERROR and root cause, no Java stack): what a command line prints.
        details (str): the tail of the broker's log and JVM output ("" when
            none); ``str(exc)`` is the summary, then the details.
    """

    def __init__(self, summary: str, details: str = "") -> None:
        self.summary = summary
        self.details = details
        super().__init__(summary + ("\n" + details if details else ""))


#: at most this many characters of one reason line
_LINE_MAX = 300


def port_in_use(host: str, port: int) -> bool:
    """True when binding ``host:port`` fails because it is taken (EADDRINUSE).

    Binds with ``SO_REUSEADDR`` as the JVM's server sockets do on Linux, so a
    port with only TIME_WAIT connections left (our own broker, restarted)
    counts as free. Other bind errors (EACCES...) are not "in use": the broker
    reports them itself."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def read_from(path: Optional[str], offset: int) -> str:
    """The text of ``path`` from byte ``offset`` on ("" when there is none)."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def file_size(path: Optional[str]) -> int:
    """Bytes in ``path`` now (0 when it does not exist yet)."""
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def started_line(log_text: str, broker_name: str) -> Optional[str]:
    """The log line ``Apache ActiveMQ <version> (<broker_name>, <id>) started``
    (ActiveMQ's BrokerService logs it once every transport connector is bound
    and started), or None."""
    pattern = re.compile(r"\| Apache ActiveMQ \S+ \(%s, [^)]*\) started \|" % re.escape(broker_name))
    for line in log_text.splitlines():
        if pattern.search(line):
            return line
    return None


def _message_of(line: str) -> str:
    """The message part of a log4j line ``date | LEVEL | message | logger | thread``."""
    parts = line.split(" | ")
    return parts[2].strip() if len(parts) >= 4 else line.strip()


def _short(text: str) -> str:
    return text if len(text) <= _LINE_MAX else text[:_LINE_MAX - 3] + "..."


def failure_reason(log_text: str, output_text: str = "") -> List[str]:
    """Why a broker did not start, in at most three lines: the first ERROR
    line's message, and the root cause (the last ``Caused by:``) when it says
    more; from the broker's log, else from the JVM's output (``output_text``,
    e.g. "Error: Could not find or load main class"). [] when neither says."""
    lines = log_text.splitlines()
    errors = [_message_of(line) for line in lines if "| ERROR |" in line or "| FATAL |" in line]
    causes = [line.strip()[len("Caused by:"):].strip() for line in lines + output_text.splitlines()
              if line.strip().startswith("Caused by:")]
    reason: List[str] = []
    if errors:
        reason.append(_short(errors[0]))
    if causes and not any(causes[-1] in line for line in reason):
        reason.append("cause: " + _short(causes[-1]))
    if not reason:
        plain = [line.strip() for line in output_text.splitlines()
                 if line.strip() and not line.startswith(("\tat ", "\t... ", "    at "))]
        reason = [_short(line) for line in plain[-3:]]
    return reason[:3]


def log_tail(log_path: Optional[str], stdout_path: Optional[str], lines: int = 40) -> str:
    """The ERROR lines and root causes of the broker log at ``log_path``, its
    last ``lines`` lines, then the last ``lines`` lines of the JVM output at
    ``stdout_path`` that the log does not hold (the JVM prints the broker's
    stack trace again); "(no broker output)" when both are empty."""
    parts = []
    log_lines = tail_file(log_path, 2000).splitlines()
    highlights = [line for line in log_lines if "| ERROR |" in line or line.startswith("Caused by:")]
    if highlights:
        parts.append("--- errors in activemq.log ---\n" + "\n".join(highlights[-10:]))
    if log_lines:
        parts.append(f"--- activemq.log ({log_path}) ---\n" + "\n".join(log_lines[-lines:]))
    seen = set(log_lines)
    out_lines = [line for line in tail_file(stdout_path, 2000).splitlines() if line not in seen]
    if out_lines:
        parts.append(f"--- broker.out ({stdout_path}) ---\n" + "\n".join(out_lines[-lines:]))
    return "\n".join(parts) or "(no broker output)"
