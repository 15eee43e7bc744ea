"""The shell's ``help <command>`` texts, in stomp.py's layout: a green (at a
terminal) ``Usage:`` section with the command line, ``Required Parameters:`` and
``Optional Parameters:`` when there are any, then ``Description:``; each
entry on its own tab-indented line. The words are amqstomp's.
"""
from typing import Callable, Sequence

from .. import colours

__all__ = ["HelpTopics"]


class HelpTopics:
    """The ``help_<command>`` methods of :class:`amqstomp.cli.shell.StompCLI`
    (:class:`cmd.Cmd` lists a command as documented when it has one)."""

    #: prints one message (the shell's own writer)
    _sysout: Callable[..., None]
    #: ``(codes, text)``: text in those colours at a terminal, plain elsewhere (the shell's)
    _paint: Callable[[str, str], str]

    def help(self, usage: str, description: str, required: Sequence[str] = (),
             optional: Sequence[str] = ()) -> None:
        """Print one command's help: ``usage``, the ``required`` and
        ``optional`` parameters (one string each), then ``description``."""
        def heading(title: str) -> str:
            return self._paint(colours.BOLD + colours.GREEN, title + ":")

        text = heading("Usage") + "\n\t" + usage + "\n\n"
        for title, entries in (("Required Parameters", required), ("Optional Parameters", optional)):
            if entries:
                text += heading(title) + "".join("\n\t" + entry for entry in entries) + "\n\n"
        text += heading("Description") + "\n\t" + description + "\n        "
        self._sysout(text)

    def help_help(self) -> None:
        self._sysout("Quick help on commands")

    def help_quit(self) -> None:
        self.help("exit", "Disconnect from the broker and leave the client.")
    help_exit = help_quit

    def help_EOF(self) -> None:
        self.help("exit", "Disconnect from the broker and leave the client (CTRL-D does the same).")

    def help_subscribe(self) -> None:
        self.help("subscribe <destination> [ack]",
                  "Start receiving the messages of a destination (/queue/name or /topic/name); each one is\n"
                  "\tprinted as it arrives. The subscription gets the next free id.",
                  ["destination - the queue or topic to receive from"],
                  ["ack - auto (the default: the broker counts a message consumed once sent), client or\n"
                   "\tclient-individual (acknowledge each one with 'ack')"])

    def help_unsubscribe(self) -> None:
        self.help("unsubscribe <destination>", "Stop receiving the messages of a destination subscribed to.",
                  ["destination - the destination given to 'subscribe'"])

    def help_send(self) -> None:
        self.help("send <destination> <message>", "Send a text message (inside the transaction, if one is begun).",
                  ["destination - the queue or topic to send to", "message - the text to send (the rest of the line)"])

    def help_sendrec(self) -> None:
        self.help("sendrec <destination> <message>",
                  "Send a text message asking for a receipt, and wait for the broker's RECEIPT.",
                  ["destination - the queue or topic to send to", "message - the text to send (the rest of the line)"])

    def help_sendreply(self) -> None:
        self.help("sendreply <destination> <correlation-id> <message>",
                  "Send a reply: a text message with a correlation-id header.",
                  ["destination - the queue or topic to send to",
                   "correlation-id - the correlation-id header of the reply",
                   "message - the text to send (the rest of the line)"])

    def help_sendfile(self) -> None:
        self.help("sendfile <destination> <filename> [headers.json]",
                  "Send a file, base64-encoded, with a filename header; a client subscribed to the\n"
                  "\tdestination saves it.",
                  ["destination - the queue or topic to send to", "filename - the file to send",
                   "headers.json - a file holding a JSON object of more headers"])

    def help_version(self) -> None:
        self.help("version", "Print the client's version and the STOMP version of the connection.")
    help_ver = help_version

    def help_ack(self) -> None:
        self.help("ack <message-id> [subscription-id]",
                  "Acknowledge a message received on a subscription made with ack client or\n"
                  "\tclient-individual: until then the broker counts it as not consumed.",
                  ["message-id - the message's id (its ack header with STOMP 1.2)"],
                  ["subscription-id - the subscription's id (needed with STOMP 1.1)"])

    def help_nack(self) -> None:
        self.help("nack <message-id> [subscription]",
                  "Refuse a message received on a subscription made with ack client or client-individual\n"
                  "\t(ActiveMQ moves it to the dead letter queue).",
                  ["message-id - the message's id (its ack header with STOMP 1.2)"])

    def help_abort(self) -> None:
        self.help("abort", "Roll back the transaction begun: its messages are not sent, its acks not applied.")
    help_rollback = help_abort

    def help_begin(self) -> None:
        self.help("begin", "Begin a transaction: the messages sent and acknowledged until 'commit' or\n"
                           "\t'abort' take effect together, or not at all.")

    def help_commit(self) -> None:
        self.help("commit", "Commit the transaction begun.")

    def help_stats(self) -> None:
        self.help("stats [on|off]", "Count connections, messages sent and received, errors and heart-beats\n"
                                    "\tfrom 'stats on'; without an argument, print the counts.")

    def help_run(self) -> None:
        self.help("run <filename>", "Run the commands in a file, one a line.")
