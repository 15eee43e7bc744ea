"""bench/chaos: long chaos runs for release checks (the harness is bench/_chaos.py; CI runs a short
version as tests/test_chaos.py).

Per run: a producer and a consumer per mode, each through its own TCP proxies with failover
on, a seeded schedule of cuts, stalls, half-closes and refusals, held faults on a consumer's
endpoint (``unread``: the peer stops reading while the consumer's own send() is blocked;
``drop``: the endpoint drops SYNs; bench/_chaos_faults.py), busy-loop processes competing
for the CPU (``--hogs``), and with ``--kills N`` a shared-store master/slave pair whose master is
killed (SIGKILL) N times. Then the checker's per-mode table (see bench/_chaos.py for every
invariant and what each mode may do), and the seed to replay it. Exit status 1 on any violation
(a stall -- a consumer idle for ``--stall-timeout`` s while the broker holds messages for it --
is one).

Usage::

    python bench/chaos.py [--runs N] [--seconds S] [--seed X] [--modes a,b,...|all]
                          [--faults cut,stall,half_close,refuse,unread,drop|all|none] [--held-share F]
                          [--kills K] [--hogs H] [--rate R] [--gap S] [--stall-timeout S]
                          [--prefetch 1,5,50,500] [--non-persistent] [--json PATH] [-v]

A held fault lasts ``--stall-timeout`` + 1..3 s; in each round of that length ``--held-share`` of
the modes get one (0.5: half; 1: all; 0: none).

``--seed X`` makes run i use seed X+i (without it, seeds are random and printed). Modes:
stomp-auto, stomp-client, stomp-individual, stomp-optimized, jms-auto, jms-dups-ok, jms-client,
jms-individual, jms-client-async, jms-individual-async, jms-tx1, jms-txbatch.
"""
import argparse
import json
import logging
import os
import random
import sys
import time
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._chaos import (ALL_MODES, DEFAULT_WEIGHTS, MODES, ChaosConfig, MasterSlavePair, RunReport,  # noqa: E402
                          SingleBroker, format_table, make_broker, run_chaos)
from bench._chaos_faults import ALL_FAULTS, parse_faults  # noqa: E402


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=120.0, help="producers + chaos per run (s)")
    ap.add_argument("--seed", type=int, default=None, help="seed of the first run (run i: seed+i)")
    ap.add_argument("--modes", default="all", help="comma-separated, or 'all' (%s)" % ", ".join(ALL_MODES))
    ap.add_argument("--kills", type=int, default=0, help="master kills per run (a shared-store pair)")
    ap.add_argument("--hogs", type=int, default=1, help="busy-loop processes while a hog window is on (0: none)")
    ap.add_argument("--rate", type=float, default=30.0, help="mean sends/s per mode (plus bursts)")
    ap.add_argument("--gap", type=float, default=1.5, help="mean seconds between proxy events")
    ap.add_argument("--stall-timeout", type=float, default=10.0,
                    help="a stall (a violation): a consumer idle this many seconds while the broker holds messages "
                         "for it")
    ap.add_argument("--faults", default="all",
                    help="comma-separated faults, 'all' or 'none' (%s)" % ", ".join(ALL_FAULTS))
    ap.add_argument("--held-share", type=float, default=0.5,
                    help="share of the modes that get a held fault (unread, drop) per round (0..1)")
    ap.add_argument("--drain-timeout", type=float, default=90.0)
    ap.add_argument("--prefetch", default="1,5,50,500", help="prefetch sizes each consumer picks from (seeded)")
    ap.add_argument("--non-persistent", action="store_true", help="send non-persistent messages")
    ap.add_argument("--json", default=None, help="write every run's report here")
    ap.add_argument("-v", "--verbose", action="store_true", help="events, info counters, INFO logs of the harness")
    args = ap.parse_args(argv)
    args.mode_list = ALL_MODES if args.modes == "all" else [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.mode_list if m not in MODES]
    if unknown:
        ap.error("unknown mode(s) %s; known: %s" % (unknown, ", ".join(ALL_MODES)))
    try:
        args.weights, args.held_faults = parse_faults(args.faults, DEFAULT_WEIGHTS)
    except ValueError as exc:
        ap.error(str(exc))
    if not 0 <= args.held_share <= 1:
        ap.error("--held-share is between 0 and 1")
    if args.kills < 0 or args.runs < 1 or args.seconds <= 0:
        ap.error("--runs >= 1, --seconds > 0, --kills >= 0")
    return args


def _failover_max(results: List[Any]) -> str:
    """The longest held fault to resumed over runs (s); ``never``: a consumer did not resume within one."""
    if any(m.held_unresumed for m in results):
        return "never"
    times = [m.failover_max_s for m in results if m.failover_max_s is not None]
    return "%.1f" % max(times) if times else "-"


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    first_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2 ** 31)
    if args.kills:
        brokers: Any = MasterSlavePair(make_broker)
    else:
        brokers = SingleBroker(make_broker(statistics=True, persistent=not args.non_persistent,
                                           allow_link_stealing=True, broker_name="chaos"))
    print("modes (what each may do under failures; everything else is a violation):")
    for mode in args.mode_list:
        spec = MODES[mode]
        print("  %-22s %s %-17s %s" % (mode, spec.api, spec.settle, spec.allowed))
    reports: List[RunReport] = []
    started = time.monotonic()
    try:
        for i in range(args.runs):
            config = ChaosConfig(seed=first_seed + i, modes=args.mode_list, seconds=args.seconds, rate=args.rate,
                                 chaos_gap_s=args.gap, hogs=args.hogs, kills=args.kills,
                                 stall_timeout_s=args.stall_timeout, drain_timeout_s=args.drain_timeout,
                                 weights=dict(args.weights), held_faults=args.held_faults, held_share=args.held_share,
                                 persistent=not args.non_persistent,
                                 prefetch_choices=tuple(int(x) for x in args.prefetch.split(",")))
            print("== run %d/%d seed=%d (%s)" % (i + 1, args.runs, config.seed, config.replay_command()), flush=True)
            report = run_chaos(config, brokers, out=(lambda s: print(s, flush=True)) if args.verbose else
                               (lambda s: print(s, flush=True) if ("STALL" in s or "drain" in s) else None))
            reports.append(report)
            print(report.text(verbose=args.verbose), flush=True)
    finally:
        if args.kills:
            brokers.close()
        else:
            brokers.broker.stop()
    # summary: one row per mode over all runs
    rows = []
    for mode in args.mode_list:
        ms = [r.modes[mode] for r in reports if mode in r.modes]
        rows.append((mode, sum(m.sent for m in ms), sum(m.deliveries for m in ms), sum(m.redeliveries for m in ms),
                     sum(m.settled_redelivered for m in ms), sum(m.rolled_back_gone for m in ms),
                     sum(m.in_doubt for m in ms), sum(m.rolled_back_sends_delivered for m in ms),
                     sum(m.lost for m in ms), sum(m.stalls for m in ms),
                     "%.1f" % max((m.stall_max_s for m in ms), default=0.0), sum(m.held for m in ms),
                     _failover_max(ms), sum(m.left for m in ms), sum(m.errors for m in ms),
                     ",".join(str(r.config.seed) for r in reports if mode in r.modes and not r.modes[mode].ok) or "-"))
    print("\n== summary of %d run(s), %.0f s" % (len(reports), time.monotonic() - started))
    print(format_table(rows, ("mode", "sent", "deliv", "redeliv", "set->redel", "rb-gone", "indoubt", "rbsend", "lost",
                              "stalls", "stall-max", "held", "fo-max", "left", "errors", "failing seeds")))
    failing = [r for r in reports if not r.ok]
    for r in failing:
        for g in r.global_violations:
            print("[seed %d] global: %s" % (r.config.seed, g))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"runs": [r.as_dict() for r in reports]}, fh, indent=1, default=str)
    if failing:
        print("FAIL: %d of %d run(s) violated an invariant; seeds %s" % (
            len(failing), len(reports), [r.config.seed for r in failing]))
        return 1
    print("OK: no violations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
