"""Tab completion of the interactive client's arguments (:class:`~amqstomp.cli.shell.StompCLI`).

stomp.py's shell completes nothing past the command name (its completer takes
two arguments where :mod:`cmd` passes four). Here each argument completes from
what the session knows:

* a destination (``send``, ``sendrec``, ``sendreply``, ``sendfile``,
  ``subscribe``): those used by a command of this session or seen on a MESSAGE
  (its ``destination`` header); ``unsubscribe``: the destinations subscribed to;
* a subscription id (``ack``/``nack``'s second argument on STOMP 1.1): the ids
  of the subscriptions made; ``ack``/``nack``'s first: the ids of the messages
  received (``ack`` header on 1.2, ``message-id`` before);
* a transaction id (``commit``, ``abort``, ``rollback``): the open one;
* a file name (``sendfile``'s file and headers file, ``run``'s file): the
  paths on disk, a directory with a ``/`` after it.

Readline splits a line at its own delimiters (``/`` and ``-`` among them): the
candidates are computed for the whole word typed and returned from where
readline's ``text`` starts.
"""
import glob
import os
from collections import OrderedDict
from typing import Any, Iterable, List

__all__ = ["Completion", "REMEMBERED"]

#: destinations and message ids remembered for completion (the oldest are forgotten first)
REMEMBERED = 1000


def _remember(kept: "OrderedDict[str, None]", value: Any) -> None:
    if value is None:
        return
    key = str(value)
    kept[key] = None
    kept.move_to_end(key)
    while len(kept) > REMEMBERED:
        kept.popitem(last=False)


class Completion:
    """The ``complete_<command>`` methods of the shell (see the module docstring).
    The shell calls :meth:`used` for each destination a command names and
    :meth:`seen` for each MESSAGE, and provides ``_subscriptions`` (destination ->
    info with an ``id``), ``transaction_id`` and ``nversion``."""

    _subscriptions: Any
    transaction_id: Any
    nversion: float

    def _init_completion(self) -> None:
        self._destinations: "OrderedDict[str, None]" = OrderedDict()
        self._message_ids: "OrderedDict[str, None]" = OrderedDict()

    def used(self, destination: Any) -> None:
        """A command named ``destination``."""
        _remember(self._destinations, destination)

    def seen(self, headers: Any) -> None:
        """A MESSAGE with ``headers`` arrived (dispatching thread). Its id is offered
        to ``ack``/``nack`` unless its subscription acks automatically (an
        ``ack:auto`` message has nothing to acknowledge: the broker refuses it)."""
        _remember(self._destinations, headers.get("destination"))
        sub_id = headers.get("subscription")
        if any(str(info.id) == sub_id and info.ack == "auto" for info in list(self._subscriptions.values())):
            return
        _remember(self._message_ids, headers.get("ack") if self.nversion >= 1.2 else headers.get("message-id"))

    @staticmethod
    def _matches(candidates: Iterable[str], text: str, line: str, begidx: int) -> List[str]:
        """The candidates that start with the whole word being typed, cut to
        readline's ``text`` (the part after its last delimiter)."""
        start = line.rfind(" ", 0, begidx) + 1  # the word's start: arguments are split at spaces
        typed = line[start:begidx] + text
        offset = len(typed) - len(text)
        return sorted({name[offset:] for name in candidates if name.startswith(typed)})

    @staticmethod
    def _argument(line: str, begidx: int) -> int:
        """Which argument of the command is being typed (1: the first after its name)."""
        return len(line[:begidx].split()) if line[:begidx].endswith(" ") else max(0, len(line[:begidx].split()) - 1)

    def _destination_or_file(self, text: str, line: str, begidx: int, files_from: int = 0) -> List[str]:
        argument = self._argument(line, begidx)
        if argument <= 1:
            return self._matches(list(self._destinations) + list(self._subscriptions), text, line, begidx)
        if files_from and argument >= files_from:
            return self._files(text, line, begidx)
        return []

    def _files(self, text: str, line: str, begidx: int) -> List[str]:
        start = line.rfind(" ", 0, begidx) + 1
        typed = line[start:begidx] + text
        offset = len(typed) - len(text)
        names = (path + "/" if os.path.isdir(path) else path for path in glob.glob(glob.escape(typed) + "*"))
        return sorted(name[offset:] for name in names)

    def complete_send(self, text: str, line: str, begidx: int = 0, endidx: int = 0) -> List[str]:
        """Completes a destination used or seen (see the module docstring)."""
        return self._destination_or_file(text, line, begidx)
    complete_sendrec = complete_sendreply = complete_subscribe = complete_send

    def complete_sendfile(self, text: str, line: str, begidx: int = 0, endidx: int = 0) -> List[str]:
        """Completes a destination, then file names."""
        return self._destination_or_file(text, line, begidx, files_from=2)

    def complete_run(self, text: str, line: str, begidx: int = 0, endidx: int = 0) -> List[str]:
        """Completes a file name."""
        return self._files(text, line, begidx) if self._argument(line, begidx) <= 1 else []

    def complete_unsubscribe(self, text: str, line: str, begidx: int = 0, endidx: int = 0) -> List[str]:
        """Completes a destination subscribed to."""
        return self._matches(self._subscriptions, text, line, begidx) if self._argument(line, begidx) <= 1 else []

    def complete_ack(self, text: str, line: str, begidx: int = 0, endidx: int = 0) -> List[str]:
        """Completes a received message's id, then (STOMP 1.1) a subscription id."""
        argument = self._argument(line, begidx)
        if argument <= 1:
            return self._matches(self._message_ids, text, line, begidx)
        if argument == 2 and self.nversion == 1.1:
            return self._matches([str(info.id) for info in self._subscriptions.values()], text, line, begidx)
        return []
    complete_nack = complete_ack

    def complete_commit(self, text: str, line: str, begidx: int = 0, endidx: int = 0) -> List[str]:
        """Completes the open transaction's id."""
        open_ids = [self.transaction_id] if self.transaction_id else []
        return self._matches(open_ids, text, line, begidx) if self._argument(line, begidx) <= 1 else []
    complete_abort = complete_rollback = complete_commit
