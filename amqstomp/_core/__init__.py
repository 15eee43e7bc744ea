"""The protocol core: everything about STOMP that needs no socket, thread or clock.

Modules (each pure; ``tests/test_structure.py`` asserts none of them, nor
anything of amqstomp they import, transitively, imports ``socket``, ``ssl``,
``threading``, ``selectors``, ``time``, ``asyncio`` or ``concurrent``):

* ``_codec`` (compiled from ``_codec.pyx`` and its ``.pxi``) and its pure twin
  ``_codec_py`` (with ``_frame_py``) -- frames from bytes and back; ``_flow``
  (``_flow_py.py`` compiled as it is, typed by ``_flow.pxd``) and the twin
  ``_flow_py`` -- prefetch windows, ack batching, redelivery. The rest of
  amqstomp imports them through :mod:`amqstomp.codec` and :mod:`amqstomp.flow`,
  which choose the compiled module or the twin;
* :mod:`.state` -- :class:`~amqstomp._core.state.ProtocolState`, one
  socket's session: framing, CONNECTED, receipts, heart-beat deadlines, the
  one link state (usable, ended, by whom, reported);
* :mod:`.errors` -- what a broker's ERROR means for the socket's waiters (which receipt
  fails with which exception, a refused CONNECT, the log line), applied by every driver;
* :mod:`.events` -- the typed events a link reports (RECEIPT, ERROR,
  heart-beats, the end of a link ...) and :class:`~amqstomp._core.events.LinkEnd`;
* :mod:`.frames` -- frame builders per STOMP version and broker dialect
  (CONNECT, ACK/NACK identities, ActiveMQ's 1.0 quirk);
* :mod:`.dialect` -- what differs by broker (ActiveMQ Classic, Artemis,
  RabbitMQ, generic STOMP): chosen from CONNECTED's ``server`` or the user's
  ``broker`` option, used by every frame builder and both APIs;
* :mod:`.heartbeat` -- heart-beat negotiation and deadlines;
* :mod:`.limits` -- the frame limits a broker enforces;
* :mod:`.backoff` -- reconnect back-off (ActiveMQ's and stomp.py's policies);
* :mod:`.lifecycle` -- one connection's life above its sockets (idle, connecting, open,
  reconnecting, stopping, failing, closed, failed; why it failed): one transition table for the
  failover loops of both drivers and the JMS connection;
* :mod:`.rebalance` -- when and where a periodic rebalance moves a failover connection;
* :mod:`.option_values` -- how a URI option's text becomes its value;
* :mod:`.settle` -- settlement, one machine for both APIs: hand-over, the
  lost-socket rule, what a failed listener means, local redelivery and poison;
* :mod:`.duplicates` -- a delivery of a message this consumer settled before
  (ActiveMQ's ``checkForDuplicates``): not handed over, and how it is settled;
* :mod:`.acks` -- acknowledgement: what a subscription's window decides on a
  delivery, a consumption, a failure, a poison, the flush timer and close
  (pause, resume, the ACK amqstomp writes), as values;
* :mod:`.subscriptions` -- SUBSCRIBE preparation, once for every API: the
  frame's headers and the prefetch window that goes with them, by broker dialect;
* :mod:`.uri` -- the broker URI grammar (``stomp://``, ``failover:(...)``) and the
  failover options; :mod:`.uri_options` -- the other option tables and how an
  option's text is read; :mod:`.destinations` -- destination names, their
  ``consumer.*`` options and checks. :mod:`amqstomp.uri` re-exports them.
"""
