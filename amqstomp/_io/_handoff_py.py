# cython: language_level=3, annotation_typing=False
"""The hand-off between a link's two threads (:class:`EventQueue`): who reads the
socket, who runs the listeners, and when a MESSAGE skips the queue.

A link has two threads (:class:`amqstomp._io.owner.LinkOwner` starts them): at any
moment one of them *reads* (the socket, the protocol state, the frames' bookkeeping)
and the other *dispatches* (takes the link's events in arrival order to the listeners).
Waking the dispatching thread for every MESSAGE costs two or more context switches per
message, which at 64 KiB bodies is most of the client's CPU (issue 21). So, leader /
followers with lazy promotion:

* **Inline**: when the reading thread has a MESSAGE for the listeners while nothing is
  queued and nobody dispatches, it runs the listeners itself (:meth:`EventQueue.offer`),
  then reads on. Listeners still run one at a time and in arrival order: whoever runs
  them holds the one *dispatch token*, and the dispatching thread takes an item from
  the queue only while holding it.
* **Promotion, lazily**: the idle dispatching thread does not hear of each inline
  dispatch (no wake per message). It sleeps with a timeout (:data:`ACTIVE_POLL_S`
  while inline dispatches happen, :data:`IDLE_POLL_S` otherwise); when it finds a
  listener running on the reading thread and no read of the socket since its previous
  look (one long listener, or a long batch of short ones), or when the listener's thread
  is about to wait on something only a read can bring (:meth:`EventQueue.promote_now`:
  a receipt, the socket's end), it takes over reading by taking the inline dispatch's
  *reader ticket*: it becomes the reading thread, first handling the frames the old
  reader had read and not yet handled (the rest of its batch), and the old reader,
  once its listener returns and finds its ticket gone, dispatches. So a listener that
  runs long or waits never stops the socket being read (heart-beats, receipts, the
  broker's own writes), as with two fixed threads.

The token and the ticket are one-element lists taken with ``pop()`` and given back with
``append()``: each a single operation under the GIL, so exactly one thread wins, without
a lock on the per-message path. Nothing here reads a socket or a clock: a poll's
timeout is the only time it knows.

This file runs as it is (the pure-Python module ``amqstomp._io._handoff_py``) and is
also compiled by Cython, as it is, into the extension ``amqstomp._io._handoff``, with the
C types of ``amqstomp/_io/_handoff.pxd`` (setup.py), as ``amqstomp/_core/_flow_py.py``
is; :mod:`amqstomp._io.handoff` chooses. Its per-message call (:meth:`EventQueue.offer`)
costs some 3,000 instructions as Python.
"""
import queue
import threading
from collections import deque
from typing import Any, Callable, Deque, Iterator, List, Optional

__all__ = ["EventQueue", "ACTIVE_POLL_S", "IDLE_POLL_S", "PROMOTE"]

#: seconds the idle dispatching thread sleeps between looks while the reading thread runs
#: listeners inline (or did since the last look): a listener running longer than one to two of
#: these hands reading over to it. A look costs about as much CPU as a message, so its cost
#: follows the wall clock, not the messages (some 20 looks a second).
ACTIVE_POLL_S = 0.05
#: seconds it sleeps between looks when nothing was dispatched inline since the last look
IDLE_POLL_S = 0.25
#: what :meth:`EventQueue.next_item` returns to a dispatching thread that is to read now
PROMOTE = object()

_get_ident = threading.get_ident


class EventQueue:
    """A link's events for the listeners, in arrival order, and the two threads' roles
    (see the module docstring). :meth:`put` and :meth:`get` as a queue's, for any
    thread; the link's own threads use :meth:`offer`, :meth:`next_item` and
    :meth:`take_batch`."""

    def __init__(self) -> None:
        self._items: Deque[Any] = deque()
        # wake-ups of the sleeping dispatching thread (a spare one only costs it a look)
        self._wake: "queue.SimpleQueue[None]" = queue.SimpleQueue()
        #: the dispatch token: empty while a thread runs listeners
        self._token: List[bool] = [True]
        #: the reader ticket: holds the item the reading thread runs listeners for inline
        self._ticket: List[Any] = []
        #: ``get_ident()`` of the thread running listeners now, 0: none
        self.busy = 0
        #: True while the dispatching thread sleeps for want of work (a put wakes it)
        self.idle = False
        #: ``get_ident()`` of the thread reading the socket, 0: none (before the threads, after the end)
        self.reading = 0
        #: ``get_ident()`` of a reading thread whose ticket was taken while its listener ran
        #: (it dispatches now: :meth:`handed_over`), 0: none
        self.lost = 0
        #: the reading thread's frames not handled yet (an iterator), for a thread taking reading over
        self.batch: Optional[Iterator[Any]] = None
        #: the inline listener's thread is about to wait on a read: take reading over at once
        self.promote_asked = False
        #: times the dispatching thread took reading over
        self.promotions = 0
        #: reads of the socket so far (the reading thread counts them): a look that finds none
        #: since the previous look while a listener runs on the reading thread hands reading over
        self.reads = 0
        #: False: every MESSAGE goes through the queue to the dispatching thread, as with ActiveMQ's
        #: ``alwaysSessionAsync`` (listeners then always run on that one thread)
        self.inline_ok = True

    # ------------------------------------------------------------ any thread

    def put(self, item: Any) -> None:
        """Queue ``item`` behind everything queued, waking the dispatching thread."""
        self._items.append(item)
        if self.idle:
            self.idle = False
            self._wake.put(None)

    def get(self) -> Any:
        """The next item, waiting as long as it takes, for a consumer of the queue that
        takes no part in the hand-off (no token taken)."""
        items = self._items
        while True:
            if items:
                return items.popleft()
            self.idle = True
            if not items:
                self._wake.get()
            self.idle = False

    def empty(self) -> bool:
        return not self._items

    def promote_now(self) -> bool:
        """The calling thread runs listeners inline and is about to wait for
        something only a read brings: the dispatching thread takes reading over at
        once. False when the caller is not the reading thread in a listener."""
        if self.busy != _get_ident() or self.reading != self.busy:
            return False
        return self.ask_promotion()

    def ask_promotion(self) -> bool:
        """Any thread: when the reading thread runs listeners inline, the dispatching
        thread takes reading over at once (True); False when nothing runs inline. (The
        heart-beat check asks when bytes wait unread while a listener runs.)"""
        if not self._ticket:
            return False
        self.promote_asked = True
        self.idle = False
        self._wake.put(None)
        return True

    def dispatching_here(self) -> bool:
        """True on the thread running listeners now (inline or dispatching)."""
        return self.busy == _get_ident()

    def reading_here(self) -> bool:
        """True on the thread reading the socket now."""
        return self.reading == _get_ident()

    # ------------------------------------------------------------ the reading thread

    def offer(self, item: Any, deliver: Callable[[Any], None]) -> None:
        """``item`` for the listeners: ``deliver(item)`` here and now when the caller is
        the reading thread, nothing is queued and nobody dispatches; else queued for
        the dispatching thread. After an inline ``deliver`` the caller may have lost
        reading (:meth:`handed_over`)."""
        reading = self.reading
        token = self._token
        if self.inline_ok and reading == _get_ident() and token and not self._items:
            try:
                token.pop()
            except IndexError:  # the dispatching thread took it between the look and here
                pass
            else:
                if not self._items:
                    self.busy = reading
                    ticket = self._ticket
                    ticket.append(item)
                    try:
                        deliver(item)
                    finally:
                        self.busy = 0
                        try:
                            ticket.pop()  # (one operation: this or the other thread's pop wins)
                        except IndexError:  # taken: the other thread reads now
                            self.lost = reading
                        token.append(True)
                        if self._items and self.idle:  # queued meanwhile: the dispatching thread's
                            self.idle = False
                            self._wake.put(None)
                    return
                token.append(True)
        self._items.append(item)
        if self.idle:
            self.idle = False
            self._wake.put(None)

    def handed_over(self) -> bool:
        """The reading thread, after a frame: True (once) when the other thread took
        reading over while a listener ran here; the caller then dispatches."""
        if self.lost != _get_ident():
            return False
        self.lost = 0
        return True

    def stop_reading(self) -> None:
        """The reading thread reads no more (the socket ended): nothing goes inline now."""
        if self.reading == _get_ident():
            self.reading = 0

    # ------------------------------------------------------------ the dispatching thread

    def next_item(self, done: bool) -> Any:
        """The dispatching thread's next item, the dispatch token held for it (``done``:
        the previous one is finished, its token given back), or :data:`PROMOTE`: the
        caller now reads, beginning with :meth:`take_batch`. Sleeps while there is
        nothing to do."""
        items = self._items
        token = self._token
        ticket = self._ticket
        wake = self._wake
        if done:
            self.busy = 0
            token.append(True)
        me = _get_ident()
        seen = -1  # reads at the previous look while a listener ran on the reading thread (-1: none ran)
        while True:
            if items and token:
                try:
                    token.pop()
                except IndexError:
                    pass
                else:
                    if items:
                        self.busy = me
                        return items.popleft()
                    token.append(True)
            if self.promote_asked and not ticket:  # asked by a listener that returned since
                self.promote_asked = False
            reads = self.reads
            if ticket and (self.promote_asked or reads == seen):
                # a listener runs on the reading thread and nothing was read for a whole poll (one long
                # listener, or a batch of short ones), or it is about to wait on a read
                try:
                    ticket.pop()
                except IndexError:  # its listener returned meanwhile
                    self.promote_asked = False
                else:
                    self.reading = me
                    self.promote_asked = False
                    self.promotions += 1
                    return PROMOTE
            timeout = ACTIVE_POLL_S if ticket or seen >= 0 else IDLE_POLL_S
            seen = reads if ticket else -1
            self.idle = True
            if not (items and token) and not self.promote_asked:
                try:
                    wake.get(True, timeout)
                except queue.Empty:
                    pass
            self.idle = False

    def finish(self) -> None:
        """The dispatching thread handled the link's last item: the token back."""
        self.busy = 0
        self._token.append(True)

    def take_batch(self) -> Optional[Iterator[Any]]:
        """The frames the previous reading thread left (once: None after)."""
        batch, self.batch = self.batch, None
        return batch
