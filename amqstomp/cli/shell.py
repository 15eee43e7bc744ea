"""stomp.py 9.0's interactive client (its ``stomp/__main__.py``), on amqstomp.

:class:`StompCLI` is a :class:`cmd.Cmd` shell and a connection listener with
stomp.py's constructor, commands (``subscribe``, ``unsubscribe``, ``send``,
``sendrec``, ``sendreply``, ``sendfile``, ``begin``, ``commit``, ``abort``
(``rollback``), ``ack``, ``nack``, ``stats``, ``run``, ``version`` (``ver``),
``quit`` (``exit``, Ctrl-D) and ``help``) and output: a MESSAGE prints its
``message-id`` and ``subscription`` headers, a blank line and its body (every
header with ``-V``); errors are bold red lines. :func:`amqstomp.cli.client.main`
is its command line, with stomp.py's options (see ``amqstomp --help``).

What differs from stomp.py, on purpose:

* the target may be an ActiveMQ URI (``-H 'failover:(stomp://a:61613,stomp://b:61613)'``,
  see :mod:`amqstomp.cli.target`);
* a connect that fails prints one line on stderr (unknown host, connection
  refused, or the broker's reason for refusing the login) and exits 1
  (stomp.py printed a log line per attempt and exited 0);
* a command that fails prints a red line and the shell carries on (stomp.py's
  shell ended); ``-F`` exits 1 when a command of the file failed (``stats`` with no
  counts is none) and, a subscription open, prints what comes until it is quiet
  (bounded, :mod:`amqstomp.cli._sessions`);
* ``sendrec`` waits (bounded) for its RECEIPT, as its help says, and
  ``subscribe`` for the broker's (amqstomp's subscribe asks for one);
* readline history is kept in ``~/.amqstomp_history`` (``$AMQSTOMP_HISTORY``;
  empty: none); Ctrl-C drops the line being typed (stomp.py ignored it); Ctrl-D
  ends the prompt's line; Tab completes arguments too (:mod:`amqstomp.cli._complete`);
* output arriving while a command runs does not print a prompt of its own,
  and output arriving at the prompt prints the prompt again with the line
  typed so far;
* colours (bold red errors, green help headings) only at a terminal: output to
  a pipe or a file has no escape codes (stomp.py wrote them everywhere);
* a received file (a MESSAGE with a ``filename`` header, from ``sendfile``) is
  saved under that name's last path component in the current directory, never
  elsewhere (stomp.py wrote to the path the sender chose);
* ``-S multicast`` (stomp.py's UDP adapter) is not provided.
"""
import base64
import json
import os
import re
import sys
import threading
import time
from cmd import Cmd
from functools import partial
from typing import Any, Callable, Dict, Optional, Sequence, TextIO, Tuple

import amqstomp
from .. import colours, utils
from ..connect import StompConnection10, StompConnection11, StompConnection12
from ..exception import StompException
from ..listener import ConnectionListener, StatsListener
from ._complete import Completion
from ._help import HelpTopics
from ._sessions import Sessions
from .target import parse_target

__all__ = ["StompCLI", "SubscriptionInfo", "heartbeat_pattern", "do_nothing_loop", "CONNECT_TIMEOUT_S"]

#: ``--heartbeats``: two comma-separated whole numbers (ms), as stomp.py checks it
heartbeat_pattern = re.compile(r"[0-9]+,[0-9]+")
#: seconds a command waits for the broker's RECEIPT (sendrec, subscribe)
RECEIPT_TIMEOUT_S = 10.0
#: seconds the first connect may take (all attempts, failover included) unless --timeout
CONNECT_TIMEOUT_S = 30.0
HISTORY_ENV = "AMQSTOMP_HISTORY"
HISTORY_LENGTH = 1000


def _default_history() -> str:
    return os.environ.get(HISTORY_ENV, os.path.join(os.path.expanduser("~"), ".amqstomp_history"))


def _is_tty(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (False for a pipe, a file, a closed or odd stream)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class SubscriptionInfo:
    """A subscription the shell made: its ``id`` and ``ack`` mode (stomp.py's)."""

    def __init__(self, id: Any, ack: str) -> None:
        self.id = id
        self.ack = ack


class StompCLI(Completion, HelpTopics, Sessions, Cmd, ConnectionListener):
    """stomp.py's command shell over an amqstomp connection; connects in the constructor.

    Args (stomp.py's, in its order): ``host`` (a host name or an ActiveMQ
    URI), ``port``, ``user``, ``passcode``, ``ver`` ("1.0", "1.1", "1.2";
    None: the URI's ``stompVersion`` or 1.1), ``prompt``, ``verbose`` (print
    every header of what arrives, and every frame sent), ``heartbeats`` (ms,
    ms; None: the URI's or (0, 0)), ``use_ssl`` with ``ssl_key_file``,
    ``ssl_cert_file``, ``ssl_ca_file``, ``ssl_insecure`` (no certificate
    check), ``stdin``, ``stdout``. amqstomp's, keyword-only: ``timeout``
    (seconds for the first connect, all attempts), ``history_file`` (readline
    history of an interactive session; "" for none).

    Raises:
        ConfigurationError: a bad target or option (a ValueError).
        ConnectFailedException: the connect failed (ConnectRefusedError: the
            broker refused the login; see :func:`amqstomp.cli.target.connect_failure`).
        RuntimeError: an unknown ``ver`` (as stomp.py).
    """

    def __init__(self, host: str = "localhost", port: Any = 61613, user: Optional[str] = "",
                 passcode: Optional[str] = "", ver: Optional[str] = "1.1", prompt: str = "> ",
                 verbose: bool = True, heartbeats: Optional[Tuple[int, int]] = (0, 0), use_ssl: bool = False,
                 ssl_key_file: Optional[str] = None, ssl_cert_file: Optional[str] = None,
                 ssl_ca_file: Optional[str] = None, ssl_insecure: bool = False, stdin: TextIO = sys.stdin,
                 stdout: TextIO = sys.stdout, *, timeout: Optional[float] = None,
                 history_file: Optional[str] = None) -> None:
        Cmd.__init__(self, "tab", stdin, stdout)
        ConnectionListener.__init__(self)
        self._tty = _is_tty(stdout)  # colours only then: never escape codes in a pipe or a file
        self.prompt = prompt
        self.verbose = verbose
        self._write_lock = threading.RLock()
        self._quit = False
        self._last_message = 0.0  # time.monotonic() of the last MESSAGE printed (a -F file's end waits for quiet)
        self._busy = True  # a command (or the constructor) runs: async output prints no prompt
        self._connected_shown = threading.Event()
        self._moves_seen = 0  # the reconnector's planned_moves when on_transport_interrupted last ran
        self._gone = threading.Event()
        self._receipts_shown: Dict[str, threading.Event] = {}  # sendrec's, printed by on_receipt
        self._history_file = _default_history() if history_file is None else history_file
        self._readline: Any = None  # the readline module, in an interactive session
        self._run_depth = 0
        self.failures = 0
        self.transaction_id: Optional[str] = None
        self._tx_echo = False
        self._subscriptions: Dict[str, SubscriptionInfo] = {}
        self._subscription_id = 1
        self._init_completion()  # destinations used and seen, message ids (cli/_complete.py)
        self.target = parse_target(host, port)
        version = ver if ver is not None else (self.target.version or "1.1")
        self.version = version
        try:
            self.nversion = float(version)
        except ValueError:
            self.nversion = 1.0
        self.user = user if user is not None else self.target.username
        self.passcode = passcode if passcode is not None else self.target.password
        beats = heartbeats if heartbeats is not None else (self.target.heartbeats or (0, 0))
        self.conn = self._connection(version, beats)
        if use_ssl or self.target.tls_hosts:
            self.conn.set_ssl(self.target.host_and_ports if use_ssl else self.target.tls_hosts,
                              key_file=ssl_key_file, cert_file=ssl_cert_file, ca_certs=ssl_ca_file,
                              verify=not ssl_insecure)
        self.conn.set_listener("", self)
        wait_s = CONNECT_TIMEOUT_S if timeout is None else timeout
        self.conn.connect(self.user, self.passcode, wait=True, timeout=wait_s, headers=self.target.headers)
        self._connected_shown.wait(5.0)  # CONNECTED printed before the first prompt

    def _connection(self, version: str, heartbeats: Tuple[int, int]) -> Any:
        keywords = dict(self.target.keywords)
        hosts = self.target.host_and_ports
        if version == "1.0":
            keywords.pop("heart_beat_receive_scale", None)
            return StompConnection10(hosts, **keywords)
        if version == "1.1":
            return StompConnection11(hosts, heartbeats=heartbeats, **keywords)
        if version == "1.2":
            return StompConnection12(hosts, heartbeats=heartbeats, **keywords)
        if version == "multicast":
            raise RuntimeError("Unknown version: stomp.py's multicast adapter is not provided by amqstomp")
        raise RuntimeError("Unknown version %r (expected 1.0, 1.1 or 1.2)" % (version,))

    # ------------------------------------------------------------------ output

    def _write(self, text: str) -> None:
        with self._write_lock:
            self.stdout.write(text)
            self.stdout.flush()

    def _paint(self, codes: str, text: str) -> str:
        """``text`` in the colour/weight ``codes`` (:mod:`amqstomp.colours`) when the
        output is a terminal; as it is in a pipe or a file."""
        return codes + text + colours.NO_COLOUR if self._tty else text

    def _sysout(self, msg: Any, end: str = "\n") -> None:
        if not self._quit:
            self._write(str(msg) + end)

    def _error(self, msg: Any, end: str = "\n", failed: bool = True) -> None:
        self.failures += 1 if failed else 0  # (not failed: stomp.py's red line that is no failure)
        self._write(self._paint(colours.BOLD + colours.RED, str(msg)) + end)

    def _typed_so_far(self) -> str:
        return str(self._readline.get_line_buffer()) if self._readline is not None else ""

    def _print_frame(self, frame_type: str, frame: Any, blank_first: bool = False) -> None:
        """stomp.py's layout of a frame that arrived (a MESSAGE after a blank line)."""
        if self._quit:
            return
        lines = [""] if blank_first else []
        if self.verbose:
            lines.append(frame_type)
            lines.extend("%s: %s" % item for item in frame.headers.items())
        else:
            lines.extend("%s: %s" % (name, frame.headers[name]) for name in ("message-id", "subscription")
                         if name in frame.headers)
        if self.prompt != "":
            lines.append("")
        lines.append(str(frame.body))
        text = "\n".join(lines) + "\n"
        if not self._busy:
            text += self.prompt + self._typed_so_far()
        self._write(text)

    # ------------------------------------------------------------------ listener

    def on_connecting(self, host_and_port: Tuple[str, int]) -> None:
        """See :meth:`ConnectionListener.on_connecting` (prints nothing)."""

    def on_connected(self, frame: Any) -> None:
        """Prints the CONNECTED frame (its headers with ``-V``)."""
        self._print_frame("CONNECTED", frame)
        self._connected_shown.set()

    def on_disconnected(self) -> None:
        """Prints "lost connection" unless the shell is quitting or never
        connected (a failed connect is the one line ``main`` prints on stderr)."""
        if not self._quit and self._connected_shown.is_set():
            self._error("lost connection")
        self._gone.set()

    def on_transport_interrupted(self) -> None:
        """amqstomp's: a failover target lost its broker and reconnects, or moves by plan (``planned_moves`` grew)."""
        seen, self._moves_seen = self._moves_seen, getattr(getattr(self.conn, "reconnector", None), "planned_moves", 0)
        if not self._quit and self._moves_seen != seen:
            self._sysout("%s (a planned move, not a loss)" % (self.conn.reconnector.last_move,))
        elif not self._quit:
            self._error("lost connection: reconnecting")

    def on_transport_resumed(self) -> None:
        """amqstomp's: a failover target is connected again."""
        if not self._quit:
            self._sysout("reconnected to %s:%s" % tuple(self.conn.transport.current_host_and_port or ("?", "?")))

    def on_message(self, frame: Any) -> None:
        """Prints the MESSAGE; one with a ``filename`` header is a file
        (``sendfile``): saved in the current directory, its body replaced by
        ``Saved file: <name>``."""
        self.seen(frame.headers)  # for completion
        if "filename" in frame.headers:
            frame.body = self._save_file(frame)
        self._print_frame("MESSAGE", frame, blank_first=True)
        self._last_message = time.monotonic()

    def _save_file(self, frame: Any) -> str:
        name = os.path.basename(str(frame.headers["filename"]).replace("\\", "/")) or "received"
        try:
            body = frame.body if isinstance(frame.body, bytes) else str(frame.body).encode()
            content = base64.b64decode(body, validate=True)
        except ValueError as exc:
            return "Not saved: the body of %s is not base64 (%s)" % (name, exc)
        if os.path.exists(name):
            name = "%s.%d" % (name, int(time.time()))
        with open(name, "wb") as f:
            f.write(content)
        return "Saved file: %s" % name

    def on_error(self, frame: Any) -> None:
        """Prints the ERROR frame."""
        self._print_frame("ERROR", frame)

    def on_connect_refused(self, frame: Any) -> None:
        """The broker refused the login: printed as an ERROR after a reconnect; at
        the first connect the exception's one line on stderr says it all."""
        if self._connected_shown.is_set():
            self._print_frame("ERROR", frame)

    def on_receipt(self, frame: Any) -> None:
        """Prints the RECEIPT frame (those the shell asks for itself reach no listener)."""
        receipt = frame.headers.get("receipt-id")
        self._print_frame("RECEIPT", frame)
        shown = self._receipts_shown.pop(receipt, None)
        if shown is not None:
            shown.set()

    def on_send(self, frame: Any) -> None:
        """With ``-V``: ``Sending {cmd=...,headers=[...],body=...}``."""
        if self.verbose:
            body = frame.body
            if isinstance(body, (bytes, bytearray)):  # shown as text, as stomp.py shows the str it was given
                body = bytes(body).decode(self.conn.encoding, "replace")
            self._sysout("Sending {cmd=%s,headers=[%s],body=%s}" % (frame.cmd, frame.headers, body))

    # ------------------------------------------------------------------ the loop

    def preloop(self) -> None:
        """Readline and its history (an interactive session only)."""
        self._busy = False
        if self._readline is not None or not self.use_rawinput or not self.stdin.isatty():
            return
        try:
            import readline
        except ImportError:  # pragma: no cover - no readline on this platform
            return
        self._readline = readline
        if self._history_file:
            readline.set_history_length(HISTORY_LENGTH)
            try:
                readline.read_history_file(self._history_file)
            except OSError:
                pass  # none yet

    def postloop(self) -> None:
        if self._readline is not None and self._history_file:
            try:
                self._readline.write_history_file(self._history_file)
            except OSError as exc:
                self._error("readline history not saved to %s: %s" % (self._history_file, exc))

    def precmd(self, line: str) -> str:
        self._busy = True
        return line

    def postcmd(self, stop: bool, line: str) -> bool:
        self._busy = False
        return stop

    def cmdloop(self, intro: Any = None) -> None:
        """:meth:`cmd.Cmd.cmdloop`; Ctrl-C drops the line typed (or stops the
        command running) and shows a new prompt."""
        while True:
            try:
                Cmd.cmdloop(self, intro)
                return
            except KeyboardInterrupt:
                self._busy = False
                self._write("\n")
                intro = None

    def onecmd(self, line: str) -> bool:
        """One command; one that fails prints why (a red line) instead of ending the shell."""
        try:
            return bool(Cmd.onecmd(self, line))
        except (StompException, ValueError, OSError) as exc:
            self._error("%s failed: %s" % (line.split()[0] if line.split() else "command", exc))
            return False

    def default(self, line: str) -> None:
        self._error("Unknown command: %s" % line.split()[0])

    def emptyline(self) -> bool:
        return False  # an empty line does nothing (Cmd's default repeats the last command)

    # ------------------------------------------------------------------ commands

    def do_quit(self, args: str = "") -> bool:
        self._quit = True  # from here on nothing is printed (stomp.py's shell says nothing either)
        return True
    do_exit = do_quit

    def do_EOF(self, args: str = "") -> bool:
        """Ctrl-D at the prompt: quit, ending the prompt's line (the terminal's shell prompt then starts
        on a line of its own, not after ours)."""
        if self._tty and _is_tty(self.stdin):
            self._write("\n")
        return self.do_quit(args)

    def do_subscribe(self, args: str) -> None:
        words = args.split()
        if len(words) < 1:
            self._error("Expecting: subscribe <destination> [ack]")
            return
        name = words[0]
        self.used(name)
        if name in self._subscriptions:
            self._error("Already subscribed to %s" % name)
            return
        ack_mode = words[1] if len(words) >= 2 else "auto"
        sid = self._subscription_id
        self._subscription_id += 1
        self._sysout("Subscribing to '%s' with acknowledge set to '%s', id set to '%s'" % (name, ack_mode, sid))
        receipt = "amqstomp-cli-subscribe-%s" % utils.get_uuid()
        self.conn.transport.own_receipt(receipt)  # amqstomp's own: no on_receipt for it
        self.conn.subscribe(destination=name, ack=ack_mode, id=sid, receipt=receipt)
        self._subscriptions[name] = SubscriptionInfo(sid, ack_mode)
        try:
            self.conn.wait_for_receipt(receipt, timeout=RECEIPT_TIMEOUT_S)
        except StompException:
            del self._subscriptions[name]  # refused (the broker's ERROR printed) or unanswered
            raise

    def do_unsubscribe(self, args: str) -> None:
        words = args.split()
        if len(words) < 1:
            self._error("Expecting: unsubscribe <destination>")
            return
        if words[0] not in self._subscriptions:
            self._sysout("Subscription %s not found" % words[0])
            return
        self._sysout("Unsubscribing from '%s'" % words[0])
        self.conn.unsubscribe(destination=words[0], id=self._subscriptions[words[0]].id)
        del self._subscriptions[words[0]]

    def _transaction(self) -> Dict[str, str]:
        return {"transaction": self.transaction_id} if self.transaction_id else {}

    def do_send(self, args: str) -> None:
        words = args.split()
        if len(words) < 2:
            self._error("Expecting: send <destination> <message>")
            return
        self.used(words[0])
        self.conn.send(words[0], " ".join(words[1:]), **self._transaction())

    def do_sendrec(self, args: str) -> None:
        words = args.split()
        if len(words) < 2:
            self._error("Expecting: sendrec <destination> <message>")
            return
        self.used(words[0])
        receipt = utils.get_uuid()
        shown = self._receipts_shown[receipt] = threading.Event()
        self.conn.send(words[0], " ".join(words[1:]), receipt=receipt, **self._transaction())
        try:
            self.conn.wait_for_receipt(receipt, timeout=RECEIPT_TIMEOUT_S)
            shown.wait(RECEIPT_TIMEOUT_S)  # printed before the next prompt
        finally:
            self._receipts_shown.pop(receipt, None)

    def do_sendreply(self, args: str) -> None:
        words = args.split()
        if len(words) < 3:
            self._error("Expecting: sendreply <destination> <correlation-id> <message>")
            return
        self.used(words[0])
        self.conn.send(words[0], "%s\n" % " ".join(words[2:]), headers={"correlation-id": words[1]},
                       **self._transaction())

    def do_sendfile(self, args: str) -> None:
        words = args.split()
        if len(words) < 2:
            self._error("Expecting: sendfile <destination> <filename> [headers.json]")
            return
        self.used(words[0])
        if not os.path.exists(words[1]):
            self._error("File %s does not exist" % words[1])
            return
        headers: Dict[str, Any] = {}
        if len(words) == 3:
            if not os.path.exists(words[2]):
                self._error("File %s does not exist" % words[2])
                return
            self._sysout("Loading %s" % words[2])
            with open(words[2], mode="rb") as f:
                headers = json.load(f)
            if not isinstance(headers, dict):
                raise ValueError("%s holds no JSON object (a map of headers)" % words[2])
            self._sysout("Using headers %s" % str(headers))
        with open(words[1], mode="rb") as f:
            content = f.read()
        self.conn.send(words[0], base64.b64encode(content).decode(), filename=words[1], headers=headers,
                       **self._transaction())

    def do_version(self, args: str) -> None:
        self._sysout(self._paint(colours.BOLD, "%s [Protocol version %s]" % (amqstomp.__version__, self.conn.version)))
    do_ver = do_version

    def check_ack_nack(self, acknackfunc: Callable[..., Any], args: Sequence[str]) -> Optional[Callable[..., Any]]:
        """``acknackfunc`` (``conn.ack``/``conn.nack``) bound to the ids the
        STOMP version needs, or None after printing what is expected."""
        command = getattr(acknackfunc, "__name__", "ack")
        if self.nversion >= 1.2 and len(args) < 1:
            self._error("Expecting: %s <ack-id>" % command)
            return None
        if self.nversion == 1.1 and len(args) < 2:
            self._error("Expecting: %s <message-id> <subscription-id>" % command)
            return None
        if len(args) < 1:
            self._error("Expecting: %s <message-id>" % command)
            return None
        if self.nversion == 1.1:
            return partial(acknackfunc, args[0], args[1])
        return partial(acknackfunc, args[0])

    def do_ack(self, args: str) -> None:
        func = self.check_ack_nack(self.conn.ack, args.split())
        if func is not None:
            func(**self._transaction())

    def do_nack(self, args: str) -> None:
        if self.nversion < 1.1:
            self._error("nack needs STOMP 1.1 or later (this connection speaks %s)" % self.version)
            return
        func = self.check_ack_nack(self.conn.nack, args.split())
        if func is not None:
            func(**self._transaction())

    def do_abort(self, args: str) -> None:
        if not self.transaction_id:
            self._error("Not currently in a transaction")
            return
        self.conn.abort(transaction=self.transaction_id)
        self._sysout("Aborted transaction: %s" % self.transaction_id)
        self.transaction_id = None
    do_rollback = do_abort

    def do_begin(self, args: str) -> None:
        if self.transaction_id:
            self._error("Currently in a transaction (%s)" % self.transaction_id)
            return
        self.transaction_id = self.conn.begin()
        self._sysout("Transaction id: %s" % self.transaction_id)

    def do_commit(self, args: str) -> None:
        if not self.transaction_id:
            self._error("Not currently in a transaction")
            return
        self._sysout("Committing %s" % self.transaction_id)
        transaction, self.transaction_id = self.transaction_id, None
        self.conn.commit(transaction=transaction)

    def do_stats(self, args: str) -> None:
        words = args.split()
        if len(words) < 1:
            stats = self.conn.get_listener("stats")
            if stats:
                self._sysout(stats)
            else:  # nothing counted yet ('stats on' starts counting): stomp.py's red line, no failed command
                self._error("No stats available", failed=False)
        elif words[0] == "on":
            self.conn.set_listener("stats", StatsListener())
        elif words[0] == "off":
            self.conn.remove_listener("stats")
        else:
            self._error("Expecting: stats [on|off]")

    def do_run(self, args: str) -> bool:
        """Runs the commands of a file, one a line; a ``quit`` line ends the file and the shell."""
        words = args.split()
        if len(words) == 0:
            self._error("Expecting: run <filename>")
            return False
        if not os.path.exists(words[0]):
            self._error("File %s was not found" % words[0])
            return False
        if self._run_depth >= 10:
            self._error("run %s: files run each other more than 10 deep" % words[0])
            return False
        with open(words[0]) as f:
            lines = f.read().split("\n")
        self._run_depth += 1
        try:
            for line in lines:
                failures, started = self.failures, time.monotonic()
                if self.onecmd(line):
                    return True
                if self.failures == failures:
                    self.await_echo(line, started)
        finally:
            self._run_depth -= 1
        return False


def do_nothing_loop() -> None:
    """Sleeps forever (stomp.py's; kept for programs that import it)."""
    while True:
        time.sleep(1)


