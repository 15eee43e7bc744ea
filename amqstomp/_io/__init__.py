"""The I/O layer: sockets and threads only, no STOMP decisions.

* :mod:`.scheduler` -- the per-socket timer thread (``call_later``);
* :mod:`.channel` -- plain and TLS sockets (one TLS helper,
  :func:`~amqstomp._io.channel.tls_context`), connecting with keep-alive,
  looking at a socket without reading it, broker address checks;
* :mod:`.link` -- one socket and what lives and dies with it: the writer
  (write lock, write coalescing), heart-beat ticks, watching a paused
  socket, closing.

The reader and dispatching threads and everything above one socket (connect
with back-off, receipts, listeners, the hooks a failover layer uses) are in
:mod:`amqstomp.transport`; the protocol decisions they act on are
:class:`amqstomp._core.state.ProtocolState`'s.
"""
