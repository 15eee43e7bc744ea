"""The instruments :class:`amqstomp.otel.AmqstompInstrumentor` records (docs/observability.md lists them).

The four of the messaging conventions ("Semantic conventions for messaging
metrics", current names in every mode: v1.24 had other, experimental ones) and
the client's own, named ``amqstomp.client.*``.
"""
from typing import Any, Callable, Iterable

from opentelemetry.metrics import Meter, Observation

__all__ = ["Instruments", "DURATION_BUCKETS_S"]

#: the conventions' advisory buckets for the duration histograms, seconds (5 ms - 10 s)
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
#: ack batch sizes, messages (a batch is at most the prefetch: 1000 by default on a queue)
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


class Instruments:
    """The instruments of one meter.

    Args:
        meter: the OpenTelemetry meter.
        windows: ``fn() -> iterable of (attributes, window)`` for the gauges: every
            subscription's flow window (:class:`amqstomp.flow.SubscriptionWindow`).
    """

    def __init__(self, meter: Meter, windows: Callable[[], Iterable[Any]]) -> None:
        self._windows = windows
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}",
            description="Messages a producer attempted to send to the broker (SEND frames)")
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages", unit="{message}",
            description="Messages handed to the application (a listener, MessageListener or receive())")
        self.operation_duration = _histogram(
            meter, "messaging.client.operation.duration", "s", DURATION_BUCKETS_S,
            "Duration of send (to the RECEIPT when one is asked for), receive, ack/nack, commit/abort")
        self.process_duration = _histogram(
            meter, "messaging.process.duration", "s", DURATION_BUCKETS_S,
            "Duration of a listener or MessageListener with one message")
        self.ack_batch = _histogram(
            meter, "amqstomp.client.ack.batch.size", "{message}", BATCH_BUCKETS,
            "Messages one ACK/NACK frame settles (a cumulative or optimized ACK settles many)")
        self.redelivered = meter.create_counter(
            "amqstomp.client.redelivered.messages", unit="{message}",
            description="Messages handed to the application again; amqstomp.redelivery.source: broker "
                        "(redelivered:true from the broker) or local (amqstomp's RedeliveryPolicy)")
        self.poisoned = meter.create_counter(
            "amqstomp.client.poisoned.messages", unit="{message}",
            description="Messages amqstomp's RedeliveryPolicy gave up on after maximumRedeliveries "
                        "(NACKed: the broker's dead-letter queue)")
        self.duplicates = meter.create_counter(
            "amqstomp.client.duplicate.messages", unit="{message}",
            description="Deliveries of a message the consumer had settled, not handed over "
                        "(checkForDuplicates: acknowledged so the broker drops them)")
        self.rejected = meter.create_counter(
            "amqstomp.client.rejected.messages", unit="{message}",
            description="Messages NACKed (poison after maximumRedeliveries, or the application's NACK)")
        self.blocked = _histogram(
            meter, "amqstomp.client.producer.blocked.duration", "s", DURATION_BUCKETS_S,
            "Time a send waited for room in its producer window (ActiveMQ's producer flow control "
            "holding the window's RECEIPTs back)")
        self.connections = meter.create_counter(
            "amqstomp.client.connections", unit="{connection}",
            description="CONNECTED frames received (amqstomp.reconnect=true: after a lost socket, failover)")
        self.losses = meter.create_counter(
            "amqstomp.client.connection.losses", unit="{connection}",
            description="Connected sockets lost without the client closing them (EOF, error, heart-beat "
                        "timeout); a failover attempt that never got CONNECTED is none")
        self.moves = meter.create_counter(
            "amqstomp.client.connection.moves", unit="{connection}",
            description="Sockets the client ended by plan to move to another broker (priorityBackup, "
                        "rebalanceInterval): no loss")
        self.disconnected = _histogram(
            meter, "amqstomp.client.disconnected.duration", "s", DURATION_BUCKETS_S,
            "Time from a socket's end (amqstomp.disconnect.cause: loss, or a planned move to another broker) "
            "to the next CONNECTED of the same connection")
        self.in_doubt = meter.create_counter(
            "amqstomp.client.transactions.in_doubt", unit="{transaction}",
            description="COMMITs written whose RECEIPT never came (socket lost): the broker may have committed")
        meter.create_observable_gauge(
            "amqstomp.client.prefetched.messages", callbacks=[self._prefetched], unit="{message}",
            description="Messages the broker delivered that wait in the client's buffer (prefetch window in use)")
        meter.create_observable_gauge(
            "amqstomp.client.unacknowledged.messages", callbacks=[self._unacked], unit="{message}",
            description="Messages handed to the application and not yet covered by an ACK, per subscription "
                        "whose ACKs amqstomp sends (optimizeAcknowledge, JMS AUTO/DUPS_OK)")
        meter.create_observable_gauge(
            "amqstomp.client.prefetch.credit", callbacks=[self._credit], unit="{message}",
            description="Messages the broker may still push to a subscription: its prefetch size minus the "
                        "messages delivered and not yet acknowledged (ActiveMQ's prefetch window)")

    def _prefetched(self, options: Any) -> Iterable[Observation]:
        return [Observation(window.pending, attrs) for attrs, window in self._windows()]

    def _credit(self, options: Any) -> Iterable[Observation]:
        return [Observation(max(0, window.prefetch - (window.delivered - window.acked)), attrs)
                for attrs, window in self._windows()]

    def _unacked(self, options: Any) -> Iterable[Observation]:
        # only where amqstomp sends the ACKs: an application's own ACKs (stomp.py API) are not counted there
        return [Observation(window.unacked, attrs) for attrs, window in self._windows() if window.auto_ack]


def _histogram(meter: Meter, name: str, unit: str, buckets: Any, description: str) -> Any:
    try:
        return meter.create_histogram(name, unit=unit, description=description,
                                      explicit_bucket_boundaries_advisory=list(buckets))
    except TypeError:  # an API before 1.23 has no advisory buckets
        return meter.create_histogram(name, unit=unit, description=description)
