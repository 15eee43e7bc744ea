"""A link's typed events reach their observer by one table (issue 22): the JMS API's
:class:`amqstomp._io.observer.ObserverLoop` and the stomp.py facade's
:class:`amqstomp._engine.dispatch.ListenerDispatch`, driven in memory (a link's
event queue, no socket, the loop run on this thread until its STOP)."""
from concurrent.futures import Future

from amqstomp._core import events
from amqstomp._engine.dispatch import ListenerDispatch
from amqstomp._engine.subscription import SubscriptionManager
from amqstomp._io.handoff import EventQueue
from amqstomp._io.link import STOP
from amqstomp._io.observer import ObserverLoop
from amqstomp.codec import Frame


class _Link:
    """What a dispatcher loop reads of a link: its queue and its CONNECTED wait."""

    def __init__(self, *items):
        self.events = EventQueue()
        self.connect_future = Future()
        for item in items + (STOP,):
            self.events.put(item)


class _Observer:
    def __init__(self):
        self.calls = []

    def on_error(self, frame):
        self.calls.append(("error", frame.cmd))
        raise RuntimeError("an observer that raises does not end the loop")

    def on_connect_refused(self, frame):
        self.calls.append(("connect_refused", frame.cmd))

    def on_heartbeat_timeout(self):
        self.calls.append(("heartbeat_timeout",))

    def on_disconnected(self):
        self.calls.append(("disconnected",))

    def on_transport_interrupted(self):
        self.calls.append(("transport_interrupted",))

    def on_transport_resumed(self):
        self.calls.append(("transport_resumed",))

    def on_usage(self, full):
        self.calls.append(("usage", full))

    def on_slow_consumer(self, info):
        self.calls.append(("slow_consumer", info))


class _Owner:
    """The engine's side a loop reports a MESSAGE's outcome to."""

    def __init__(self):
        self.observer = self
        self.outcomes = []

    def should_dispatch(self, frame):
        return True

    def on_consumed(self, frame):
        self.outcomes.append(("consumed", frame.headers["message-id"]))

    def on_failed(self, frame, reason):
        self.outcomes.append((reason, frame.headers["message-id"]))


def test_a_typed_observer_hears_each_event_by_its_class_in_order():
    connected = Frame("CONNECTED", {"version": "1.2"}, b"")
    message = Frame("MESSAGE", {"message-id": "m1"}, b"x")
    link = _Link(events.Connecting(("h", 1)), events.Connected(connected), events.HeartbeatIn(),
                 events.ErrorIn(Frame("ERROR", {}, b"")), events.UsageFull(), events.UsageNotFull(),
                 events.SlowConsumer({"id": "1"}), events.HeartbeatTimeout(), message,
                 events.TransportResumed(), events.ReceiverLoopCompleted(), events.Disconnected())
    observer, owner = _Observer(), _Owner()
    ObserverLoop(observer).run(link, owner)
    assert observer.calls == [("error", "ERROR"), ("usage", True), ("usage", False), ("slow_consumer", {"id": "1"}),
                              ("heartbeat_timeout",), ("transport_resumed",), ("disconnected",)]
    assert link.connect_future.result(0) is connected  # resolved once the CONNECTED event was handled
    assert owner.outcomes == [("no listener", "m1")]  # its API routes MESSAGEs past the dispatcher
    loop = ObserverLoop(observer)
    loop.call("transport_interrupted")  # stomp.py's name, no socket: on this thread
    assert observer.calls[-1] == ("transport_interrupted",)


class _Listener:
    def __init__(self):
        self.calls = []

    def on_connected(self, frame):
        self.calls.append(("on_connected", frame.body))

    def on_error(self, frame):
        self.calls.append(("on_error", frame.body))

    def on_heartbeat(self):
        self.calls.append(("on_heartbeat",))

    def on_receiver_loop_completed(self, arg):
        self.calls.append(("on_receiver_loop_completed", arg))

    def on_disconnected(self):
        self.calls.append(("on_disconnected",))

    def on_disconnecting(self):
        self.calls.append(("on_disconnecting",))

    def on_message(self, frame):
        self.calls.append(("on_message", frame.body))


def test_the_stomp_py_listeners_hear_each_event_as_stomp_py_calls_it():
    dispatch = ListenerDispatch()
    listener = _Listener()
    dispatch.set("a", listener)
    link = _Link(events.Connected(Frame("CONNECTED", {}, b"hi")), events.HeartbeatIn(),
                 events.ConnectRefused(Frame("ERROR", {}, b"no")),  # no on_connect_refused: on_error
                 Frame("MESSAGE", {"message-id": "m2"}, b"body"), events.Disconnecting(),
                 events.ReceiverLoopCompleted("ignored"), events.Disconnected())
    owner = _Owner()
    dispatch.run(link, owner)
    assert listener.calls == [("on_connected", "hi"), ("on_heartbeat",), ("on_error", "no"), ("on_message", "body"),
                              ("on_disconnecting",), ("on_receiver_loop_completed", None), ("on_disconnected",)]
    assert owner.outcomes == [("consumed", "m2")]
    assert link.connect_future.result(0).body == "hi"


class _Port:
    """What a SubscriptionManager uses of its driver here: a link whose events go to a queue."""

    version, dialect, server = "1.2", "activemq", "ActiveMQ/5.17.2"

    def __init__(self):
        self.link = _Link()
        self.link.events = EventQueue()  # the STOP goes in after the events
        self.paused = []

    def post(self, event):
        self.link.events.put(event)

    def deliver_message(self, frame):
        self.link.events.put(frame)

    def pause_reading(self):
        self.paused.append(True)

    def resume_reading(self):
        self.paused.append(False)


class _SlowListener(_Listener):
    def on_slow_consumer(self, info):
        self.calls.append(("on_slow_consumer", info))


def test_a_slow_consumer_is_a_typed_event_the_stomp_py_listeners_hear_as_on_slow_consumer():
    """The subscription table posts :class:`~amqstomp._core.events.SlowConsumer` once the
    buffer holds more than 2 x prefetch (ActiveMQ's definition), not a name; stomp.py's
    listeners still hear ``on_slow_consumer(info)``, once, with the same dict."""
    port = _Port()
    manager = SubscriptionManager(port)
    manager.prepare("/queue/slow", "7", "client-individual", {}, {"prefetch_size": 2, "max_buffered": 10})
    for n in range(6):
        manager.on_message(Frame("MESSAGE", {"subscription": "7", "message-id": "m%d" % n,
                                             "destination": "/queue/slow", "ack": "a%d" % n}, b"xy"))
    posted = []
    while not port.link.events.empty():
        posted.append(port.link.events.get())
    slow = [e for e in posted if isinstance(e, events.SlowConsumer)]
    assert len(slow) == 1 and posted.index(slow[0]) == 4  # with the 5th message (5 pending > 2 x 2), before it
    assert slow[0].arg == {"subscription": "7", "destination": "/queue/slow", "pending": 5,
                           "pending_bytes": 10, "prefetch": 2}
    dispatch, listener = ListenerDispatch(), _SlowListener()
    dispatch.set("a", listener)
    link = _Link(*posted)
    dispatch.run(link, _Owner())
    assert [c for c in listener.calls if c[0] == "on_slow_consumer"] == [("on_slow_consumer", slow[0].arg)]
    assert len([c for c in listener.calls if c[0] == "on_message"]) == 6
