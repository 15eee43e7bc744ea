"""OpenTelemetry tracing and metrics for every amqstomp API: :class:`AmqstompInstrumentor`.

Needs the ``otel`` extra (``pip install amqstomp[otel]``: opentelemetry-api and
opentelemetry-instrumentation). ``opentelemetry-instrument python app.py``
finds the instrumentor by its ``opentelemetry_instrumentor`` entry point; in
code::

    from amqstomp.otel import AmqstompInstrumentor
    AmqstompInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

The spans and metrics come from amqstomp's own hook points
(:mod:`amqstomp._observe`), nothing is patched; ``uninstrument()`` removes the
observer. docs/observability.md describes each span and metric.
"""
import threading
from typing import Any, Collection, Optional

from opentelemetry import metrics, trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from .. import __version__, _observe
from ._conventions import DUP, NEW, OLD, Conventions, semconv_mode
from ._observer import LINK, PARENT, OtelObserver

__all__ = ["AmqstompInstrumentor", "PARENT", "LINK", "OLD", "NEW", "DUP", "semconv_mode"]

#: the schema of the current messaging names (span and metric attributes of the opt-in mode)
SCHEMA_URL = "https://opentelemetry.io/schemas/1.26.0"
#: instrumented before an SDK is set: seconds between looks at the global providers
SDK_WATCH_S = 1.0


class AmqstompInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Turns amqstomp's OpenTelemetry spans and metrics on (``instrument()``) and off
    (``uninstrument()``), for every connection of the process, old and new.

    ``instrument()`` keywords (all optional):

    * ``tracer_provider``, ``meter_provider``: the providers (default: the global ones).
    * ``process_context`` (str): :data:`PARENT` (default, as the OpenTelemetry Java
      agent's JMS instrumentation): a process span (a listener or MessageListener
      with one message) is a child of the context the message carries
      (``traceparent``); :data:`LINK`: a child of the current context, with a
      link to the message's.
    * ``capture_body_size`` (bool): ``messaging.message.body.size`` on send spans (default False).
    * ``semconv`` (str): :data:`OLD`, :data:`NEW` or :data:`DUP`; default: from
      ``OTEL_SEMCONV_STABILITY_OPT_IN`` (``messaging``, ``messaging/dup``), else v1.24's names.

    Raises:
        ValueError: (``instrument()``) ``process_context`` or ``semconv`` is not one of the values above.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("amqstomp >= 0.1",)

    def _instrument(self, **kwargs: Any) -> None:
        mode = kwargs.get("semconv") or semconv_mode()
        schema = SCHEMA_URL if mode != OLD else "https://opentelemetry.io/schemas/1.24.0"
        tracer = trace.get_tracer(__name__, __version__, kwargs.get("tracer_provider"), schema_url=schema)
        meter = metrics.get_meter(__name__, __version__, kwargs.get("meter_provider"), schema_url=schema)
        observer = OtelObserver(tracer, meter, Conventions(mode), kwargs.get("process_context", PARENT),
                                bool(kwargs.get("capture_body_size", False)), kwargs.get("tracer_provider"),
                                kwargs.get("meter_provider"))
        recording = observer.recording()
        _observe.install(observer, messages=recording)
        if not recording:  # no SDK yet: messages pass unobserved until one is set
            self._watch: Optional[_SdkWatch] = _SdkWatch(observer)

    def _uninstrument(self, **kwargs: Any) -> None:
        watch: Optional[_SdkWatch] = getattr(self, "_watch", None)
        if watch is not None:
            watch.stop()
            self._watch = None
        _observe.install(None)


class _SdkWatch:
    """Instrumented while the global providers are the OpenTelemetry API's placeholders (no
    SDK: a message's spans and measurements would all be dropped): each message's
    operations go unobserved (they cost nothing then) and a daemon thread,
    ``amqstomp-otel-sdk-watch``, looks at the providers every :data:`SDK_WATCH_S`
    seconds; once an SDK's are set it turns the message operations on and ends. It
    also ends with ``uninstrument()``. Connections, subscriptions and transactions are
    observed all along."""

    def __init__(self, observer: OtelObserver) -> None:
        self.observer = observer
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="amqstomp-otel-sdk-watch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(SDK_WATCH_S):
            if self.observer.recording():
                if _observe.observer is self.observer:
                    _observe.observe_messages(self.observer)
                return

    def stop(self) -> None:
        self.stopped.set()
        if self.thread is not threading.current_thread():
            self.thread.join(SDK_WATCH_S * 5)
