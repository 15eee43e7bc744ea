"""Held faults of the chaos harness (bench/_chaos.py): one endpoint of a mode's consumer kept
broken for longer than the stall timeout, so that a client which does not get away from it
(to the mode's other endpoint) is caught by the stall check.

``unread`` -- *the peer stops reading*
    the proxy the consumer is connected to stops reading and forwarding, both ways
    (:meth:`TcpProxy.stall`), while the consumer's own connection floods a topic nobody
    subscribes to (:class:`Flood`): the application's ``send()`` ends up blocked in a socket
    write, with the consumer's batched/optimized ACKs due. Only the heart-beats can tell; the
    client must notice and fail over (tests/test_blocked_writes.py asserts the bound).
``drop`` -- *the primary drops SYNs*
    that proxy turns into a black hole (``refuse(True, mode="drop")``: connects to it hang until
    the client's connect timeout, 20 s / 30 s here) and cuts its connections: the client must go
    to the other endpoint at once (the endpoint just lost goes last, docs/guides/failover.md).

For both the consumer needs a second endpoint: with held faults on, every mode's consumer gets
a second proxy per broker address (to the same broker), listed after the first ones; the
producer has its own proxies, which held faults leave alone, so the queue keeps filling and a
consumer stuck on the broken endpoint is idle while the broker holds messages for it: a stall.
The window lasts ``stall_timeout_s`` + 1..3 s (``ChaosConfig.held_s``) for that reason; the
mode gets no other chaos event during it (a cut of the second endpoint would make the broken
one "not the last lost" again: trying it first and waiting a connect timeout is then correct).

Per fault the run records when the consumer heard ``on_transport_interrupted`` / ``_resumed``
after the fault began (table columns ``held`` and ``fo-max``): information, not an invariant;
the invariant is the stall check's.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type

import amqstomp.exception as _exc

log = logging.getLogger("amqstomp.testing.chaos")

CLASSIC_FAULTS: Tuple[str, ...] = ("cut", "stall", "half_close", "refuse")
HELD_FAULTS: Tuple[str, ...] = ("unread", "drop")
ALL_FAULTS: Tuple[str, ...] = CLASSIC_FAULTS + HELD_FAULTS
#: the end of each held fault, as a schedule action
HELD_END = {kind: kind + "_end" for kind in HELD_FAULTS}
HELD_ACTIONS = frozenset(HELD_FAULTS) | frozenset(HELD_END.values())

#: a send of the flood that failed this way was cut short by the failover: the flood ends
FLOOD_RELEASED: Tuple[Type[BaseException], ...] = (_exc.ConnectionClosedException, _exc.NotConnectedException,
                                    _exc.ReceiptTimeout)


def parse_faults(text: str, default_weights: Dict[str, float]) -> Tuple[Dict[str, float], Tuple[str, ...]]:
    """``"cut,stall,unread"`` (or ``"all"``, ``"none"``) -> (classic fault weights, held faults).

    Raises:
        ValueError: an unknown fault name, or an empty list.
    """
    text = text.strip()
    if text == "none":
        return {}, ()
    names = list(ALL_FAULTS) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALL_FAULTS]
    if unknown or not names:
        raise ValueError("unknown fault(s) %s; known: %s (or all, none)" % (unknown, ", ".join(ALL_FAULTS)))
    weights = {n: default_weights.get(n, 1.0) for n in CLASSIC_FAULTS if n in names}
    return weights, tuple(n for n in HELD_FAULTS if n in names)


# ------------------------------------------------------------------------------------------ schedule


def held_window(stall_timeout_s: float, held_s: Optional[Tuple[float, float]]) -> Tuple[float, float]:
    """How long a held fault lasts: ``held_s``, or longer than the stall timeout by 1..3 s."""
    return held_s if held_s is not None else (stall_timeout_s + 1.0, stall_timeout_s + 3.0)


def plan_held(seed: int, modes: Sequence[str], seconds: float, kinds: Sequence[str], share: float,
              window: Tuple[float, float], blocked: Sequence[Tuple[float, float]] = (),
              gap_s: float = 2.0) -> List[Tuple[float, str, Tuple[str, ...], Any]]:
    """The held faults of a run, from its seed: ``(at, action, (mode,), duration | None)``.

    The run is cut into rounds of ``window[1] + gap_s`` seconds; in each, ``share`` of the modes
    (at least one) get one held fault, the kinds taken in turn (so a round of two modes or more
    has both), each at its own time inside the round. A fault overlapping a ``blocked`` interval
    (around a master kill) is left out. Seeded by its own random stream: the other events of a
    seed stay as they were."""
    kinds = [k for k in HELD_FAULTS if k in kinds]
    if not kinds or share <= 0 or not modes:
        return []
    rng = random.Random("held:%d" % seed)
    lo, hi = window
    slot = hi + gap_s
    out: List[Tuple[float, str, Tuple[str, ...], Any]] = []
    first = rng.randrange(len(kinds))
    for r in range(int(max(0.0, seconds - 1.0) // slot)):
        chosen = rng.sample(list(modes), max(1, min(len(modes), int(round(share * len(modes))))))
        for i, mode in enumerate(chosen):
            kind = kinds[(first + i + r) % len(kinds)]
            dur = round(rng.uniform(lo, hi), 2)
            start = r * slot + rng.uniform(0.5, max(0.5, slot - dur - 0.5))
            if any(start < b_hi and b_lo < start + dur for b_lo, b_hi in blocked):
                continue
            out.append((start, kind, (mode,), dur))
            out.append((start + dur, HELD_END[kind], (mode,), None))
    return out


def held_intervals(events: Sequence[Tuple[float, str, Tuple[str, ...], Any]]) -> Dict[str, List[Tuple[float, float]]]:
    """mode -> [(start, end)] of its held faults (from :func:`plan_held`)."""
    out: Dict[str, List[Tuple[float, float]]] = {}
    for at, action, targets, arg in events:
        if action in HELD_FAULTS:
            for mode in targets:
                out.setdefault(mode, []).append((at, at + float(arg)))
    return out


def free_of_held(intervals: Dict[str, List[Tuple[float, float]]], mode: str, start: float, end: float,
                 margin: float = 1.0) -> bool:
    """No held fault of ``mode`` within ``margin`` s of [start, end]."""
    return all(end + margin <= lo or hi + margin <= start for lo, hi in intervals.get(mode, ()))


# ------------------------------------------------------------------------------------------ the flood


class Flood:
    """Messages of 64 KiB written as fast as the socket takes them on a consumer's own
    connection (``send(body)``), until ``deadline``, ``MAX_BYTES``, a send that was blocked for
    ``RELEASED_S`` or more (the failover released it: the scenario happened), or a send that
    raised one of :data:`FLOOD_RELEASED`. Anything else a send raises goes to ``error``."""

    BODY = b"f" * 65536
    MAX_BYTES = 24 * 1024 * 1024  # well above loopback socket buffers (4 MiB send + the proxy's receive)
    RELEASED_S = 1.0

    def __init__(self, send: Callable[[bytes], None], deadline: float, stopping: threading.Event,
                 error: Callable[[str, BaseException], None]) -> None:
        self.send = send
        self.deadline = deadline
        self.stopping = stopping
        self.error = error
        self.stop = threading.Event()
        self.sends = 0
        self.bytes = 0
        self.longest_s = 0.0  # the longest single send(): how long it was blocked
        self.ended = "running"

    def run(self) -> None:
        for _ in range(self.MAX_BYTES // len(self.BODY) + 1):
            if self.stop.is_set() or self.stopping.is_set() or time.monotonic() > self.deadline:
                self.ended = "window over"
                return
            if self.bytes >= self.MAX_BYTES:
                break
            t = time.monotonic()
            try:
                self.send(self.BODY)
            except FLOOD_RELEASED as exc:
                self.longest_s = max(self.longest_s, time.monotonic() - t)
                self.ended = "released: %s" % type(exc).__name__
                return
            except Exception as exc:
                self.ended = "failed: %s" % type(exc).__name__
                self.error("flood send on the consumer's connection", exc)
                return
            took = time.monotonic() - t
            self.longest_s = max(self.longest_s, took)
            self.sends += 1
            self.bytes += len(self.BODY)
            if took >= self.RELEASED_S:
                self.ended = "released after %.1f s blocked" % took
                return
        self.ended = "%d MiB written, never blocked" % (self.bytes >> 20)

    def describe(self) -> str:
        return "flood %d x 64 KiB, longest send %.1f s, %s" % (self.sends, self.longest_s, self.ended)


# ------------------------------------------------------------------------------------------ the run side


@dataclass
class HeldOutcome:
    mode: str
    kind: str
    at: float  # run time (s) the fault began
    port: int = 0  # the consumer's endpoint (proxy port) that was broken; 0: skipped
    interrupted_s: Optional[float] = None  # after the fault began, the consumer heard it lost the link
    resumed_s: Optional[float] = None  # ... and was connected again
    flood: Optional[Flood] = None
    skipped: str = ""

    def describe(self) -> str:
        if self.skipped:
            return "%s t=%.1f skipped: %s" % (self.kind, self.at, self.skipped)

        def s(v: Optional[float]) -> str:
            return "never" if v is None else "+%.2f s" % v
        text = "%s t=%.1f on :%d: interrupted %s, resumed %s" % (self.kind, self.at, self.port,
                                                                s(self.interrupted_s), s(self.resumed_s))
        return text + ("; " + self.flood.describe() if self.flood is not None else "")


@dataclass
class _Active:
    outcome: HeldOutcome
    proxy: Any
    began: float
    flood: Optional[Flood] = None


class HeldFaults:
    """Applies the held faults of a run to the consumers' proxies and records their outcomes.

    ``t0()`` gives the run's start (monotonic); ``note(text)`` reports harness trouble."""

    def __init__(self, t0: Callable[[], float], note: Callable[[str], None]) -> None:
        self.t0 = t0
        self.note = note
        self.lock = threading.Lock()
        self.outcomes: Dict[str, List[HeldOutcome]] = {}
        self.active: Dict[str, _Active] = {}

    # -- events from the consumers' transport listeners
    def consumer_event(self, mode: str, name: str) -> None:
        now = time.monotonic()
        with self.lock:
            a = self.active.get(mode)
            if a is None:
                return
            o = a.outcome
            if name == "interrupted" and o.interrupted_s is None:
                o.interrupted_s = now - a.began
            elif name == "resumed" and o.resumed_s is None and o.interrupted_s is not None:
                o.resumed_s = now - a.began

    # -- the executor
    def apply(self, action: str, mode: str, arg: Any, consumer: Any, proxies: Sequence[Any]) -> None:
        """``consumer``: the mode's Consumer (``flood_send``, ``start_thread``, ``stopping``,
        ``ledger``); ``proxies``: its endpoints, in its failover order."""
        if action in HELD_FAULTS:
            self._begin(action, mode, float(arg), consumer, proxies)
        else:
            self._end(mode)

    def _in_use(self, proxies: Sequence[Any]) -> Optional[Any]:
        """The consumer's endpoint: the proxy holding its connection (waits up to 1 s for one)."""
        for _ in range(10):
            live = [p for p in proxies if p.connections > 0 and not p.stalled and not p.refusing]
            if live:
                return live[0]
            time.sleep(0.1)
        return None

    def _begin(self, kind: str, mode: str, duration: float, consumer: Any, proxies: Sequence[Any]) -> None:
        outcome = HeldOutcome(mode, kind, time.monotonic() - self.t0())
        with self.lock:
            self.outcomes.setdefault(mode, []).append(outcome)
        proxy = self._in_use(proxies)
        if proxy is None or len(proxies) < 2:
            outcome.skipped = "the consumer holds no connection" if proxy is None else "no second endpoint"
            self.note("%s [%s]: %s" % (kind, mode, outcome.skipped))
            return
        outcome.port = proxy.address[1]
        # times are taken from the moment the endpoint breaks: the stall, the cut
        active = _Active(outcome, proxy, time.monotonic())
        if kind == "unread":
            flood = Flood(consumer.flood_send, active.began + duration, consumer.stopping, consumer.ledger.error)
            active.flood = outcome.flood = flood
            with self.lock:
                self.active[mode] = active
            consumer.start_thread(flood.run, "flood")
            active.began = time.monotonic()
            proxy.stall()
        else:
            try:  # about 0.5 s: the black hole is made on the proxy's thread
                proxy.refuse(True, mode="drop")
            except OSError as exc:  # no black hole (not Linux?): the port stays closed, connects are refused
                self.note("drop [%s]: no black hole on :%d (%s): refused instead" % (mode, outcome.port, exc))
            with self.lock:
                self.active[mode] = active
                active.began = time.monotonic()
            proxy.cut()
        log.info("chaos %s: %s on :%d for %.1f s", mode, kind, outcome.port, duration)

    def _end(self, mode: str) -> None:
        with self.lock:
            a = self.active.pop(mode, None)
        if a is None:
            return
        if a.flood is not None:
            a.flood.stop.set()
        if a.outcome.kind == "unread":
            a.proxy.unstall()
        else:
            a.proxy.refuse(False)

    def end_all(self) -> None:
        for mode in list(self.active):
            try:
                self._end(mode)
            except Exception as exc:
                self.note("ending the held fault of %s: %s" % (mode, exc))

    # -- results
    def summary(self, mode: str) -> Tuple[int, Optional[float], int, List[str]]:
        """(held faults applied, the longest time to resumed (None: none resumed), how many did
        not resume within their fault, descriptions)."""
        with self.lock:
            outcomes = list(self.outcomes.get(mode, ()))
        applied = [o for o in outcomes if not o.skipped]
        times = [o.resumed_s for o in applied if o.resumed_s is not None]
        return (len(applied), (max(times) if times else None), len(applied) - len(times),
                [o.describe() for o in outcomes])
