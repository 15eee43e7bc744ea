"""Chaos: every settle mode of both APIs through fault proxies, busy-loop CPU competition and a
master kill, checked for loss, settled-then-redelivered messages, rolled-back commits that were
not, unflagged redeliveries, stalls, leftovers, library errors and leaked threads/sockets.

The harness is bench/_chaos.py (its docstring lists every invariant and what each mode may do);
``python bench/chaos.py`` runs it for minutes. Here the runs are short (< 2 min for the file).
Each run's seed is printed and is in every failure message: replay it with
``python bench/chaos.py --seed X --modes ...`` (the printed ``replay:`` line), or here with
``AMQSTOMP_CHAOS_SEED=X``. ``AMQSTOMP_CHAOS_SECONDS`` lengthens the broker runs.

The first tests feed the checker deliberately broken inputs (and a deliberately broken client)
to show each invariant can trip.
"""
import logging
import os
import random
import sys
import threading
import time

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from bench._chaos import (AIO_MODES, ALL_MODES, DEFAULT_WEIGHTS, MODES, ChaosConfig, ErrorCapture, Ledger,  # noqa: E402
                          MasterSlavePair, SingleBroker, evaluate, make_schedule, run_chaos, socket_fds)
from bench._chaos_faults import HELD_FAULTS, parse_faults  # noqa: E402

SEED = int(os.environ.get("AMQSTOMP_CHAOS_SEED") or random.SystemRandom().randrange(1, 2 ** 31))
SECONDS = float(os.environ.get("AMQSTOMP_CHAOS_SECONDS") or 0)


# --------------------------------------------------------------------------- the checker itself


def _deliver(ledger, seq, mid, flagged=False, count=1):
    return ledger.deliver(seq, mid, flagged, count)


@pytest.mark.timeout(10)
def test_checker_passes_a_clean_history():
    ledger = Ledger("jms-client")
    for seq in range(3):
        ledger.attempt(seq)
        ledger.confirm(seq)
        _deliver(ledger, seq, "m%d" % seq)
    ledger.settle(["m0", "m1", "m2"])
    result = evaluate(MODES["jms-client"], ledger)
    assert result.ok, result.violations
    assert (result.sent, result.deliveries, result.unique, result.settled) == (3, 3, 3, 3)


@pytest.mark.timeout(10)
def test_checker_catches_a_settled_message_delivered_again_in_strict_modes_only():
    for mode in ("stomp-client", "stomp-individual", "jms-client", "jms-individual", "jms-tx1", "jms-txbatch",
                 "jms-auto", "jms-client-async", "stomp-optimized"):
        ledger = Ledger(mode)
        ledger.confirm(1)
        _deliver(ledger, 1, "m1")
        if MODES[mode].transacted:
            ledger.commit_ok(["m1"])
        else:
            ledger.settle(["m1"])
        _deliver(ledger, 1, "m1", flagged=True, count=2)  # after the settlement returned
        result = evaluate(MODES[mode], ledger)
        assert result.settled_redelivered == 1
        if MODES[mode].strict:
            assert not result.ok and "already settled" in result.violations[0], mode
        else:
            assert result.ok and "allowed" in result.notes[0], mode


@pytest.mark.timeout(10)
def test_checker_a_redelivery_before_the_settlement_is_fine():
    ledger = Ledger("jms-individual")
    ledger.confirm(1)
    _deliver(ledger, 1, "m1")
    _deliver(ledger, 1, "m1", flagged=True)  # came again before acknowledge() returned
    ledger.settle(["m1"])
    assert evaluate(MODES["jms-individual"], ledger).ok


@pytest.mark.timeout(10)
def test_checker_catches_loss_except_where_documented():
    for mode in ("jms-auto", "stomp-auto"):
        ledger = Ledger(mode)
        ledger.confirm(1)
        ledger.confirm(2)
        _deliver(ledger, 1, "m1")
        result = evaluate(MODES[mode], ledger)
        assert result.lost == 1
        assert result.ok == MODES[mode].may_lose, (mode, result.violations)


@pytest.mark.timeout(10)
def test_checker_catches_a_rolled_back_commit_whose_messages_never_come_again():
    ledger = Ledger("jms-txbatch")
    ledger.confirm(1)
    ledger.confirm(2)
    _deliver(ledger, 1, "m1")
    _deliver(ledger, 2, "m2")
    ledger.commit_rolled_back(["m1", "m2"])
    _deliver(ledger, 1, "m1", flagged=True, count=2)  # m1 came again, m2 never did: committed after all
    ledger.commit_ok(["m1"])
    result = evaluate(MODES["jms-txbatch"], ledger)
    assert result.rolled_back == 2 and result.rolled_back_gone == 1
    assert not result.ok and "never came again" in " ".join(result.violations)
    # in doubt: either outcome is fine
    ledger = Ledger("jms-tx1")
    ledger.confirm(1)
    _deliver(ledger, 1, "m1")
    ledger.commit_in_doubt(["m1"])
    result = evaluate(MODES["jms-tx1"], ledger)
    assert result.ok and result.in_doubt == 1


@pytest.mark.timeout(10)
def test_checker_catches_a_delivered_send_of_a_producer_transaction_reported_rolled_back():
    ledger = Ledger("jms-txbatch")
    first = [ledger.attempt(1), ledger.attempt(2)]
    ledger.attempt_outcome(first, "rolled_back")
    again = [ledger.attempt(1), ledger.attempt(2)]  # the batch sent again, committed
    ledger.attempt_outcome(again, "committed")
    ledger.confirm(1)
    ledger.confirm(2)
    ledger.deliver(1, "m1", False, 1, attempt=again[0])
    ledger.deliver(2, "m2", False, 1, attempt=again[1])
    assert evaluate(MODES["jms-txbatch"], ledger).ok
    ledger.deliver(2, "m2-old", False, 1, attempt=first[1])  # the rolled-back copy arrives too
    result = evaluate(MODES["jms-txbatch"], ledger)
    assert result.rolled_back_sends_delivered == 1 and not result.ok
    assert "reported rolled back were delivered" in " ".join(result.violations)


@pytest.mark.timeout(10)
def test_checker_catches_unflagged_redeliveries_stalls_leftovers_dlq_and_errors():
    ledger = Ledger("jms-auto")
    ledger.confirm(1)
    _deliver(ledger, 1, "m1")
    _deliver(ledger, 1, "m1", flagged=False, count=1)
    result = evaluate(MODES["jms-auto"], ledger)
    assert result.unflagged == 1 and not result.ok
    ledger = Ledger("jms-auto")
    ledger.stalls.append((3.0, 12.5, "idle 12.5s: broker holds 7 message(s)"))
    ledger.error("receive", RuntimeError("boom"))
    result = evaluate(MODES["jms-auto"], ledger, left=2, left_settled=1, dlq=1)
    text = " ".join(result.violations)
    assert (result.stalls, result.left, result.dlq, result.errors) == (1, 2, 1, 1)
    assert "stall" in text and "left on the broker" in text and "DLQ" in text and "boom" in text
    assert evaluate(MODES["jms-auto"], Ledger("jms-auto"), broker_size=3).left == 3


@pytest.mark.timeout(10)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the one we raise on purpose
def test_error_capture_sees_library_errors_and_thread_exceptions_only():
    capture = ErrorCapture()
    capture.install()
    try:
        logging.getLogger("amqstomp.transport").error("reader died: %s", "boom")
        logging.getLogger("amqstomp.testing").error("proxy noise")  # the test tools: not the library
        logging.getLogger("amqstomp.transport").warning("just a warning")
        logging.getLogger("other").error("not ours")
        t = threading.Thread(target=lambda: 1 / 0, name="amqstomp-fake-reader")
        t.start()
        t.join()
    finally:
        capture.uninstall()
    assert len(capture.records) == 1 and "reader died: boom" in capture.records[0]
    assert any("amqstomp-fake-reader" in e and "ZeroDivisionError" in e for e in capture.thread_exceptions)


@pytest.mark.timeout(10)
def test_the_socket_count_sees_a_socket_left_open():
    import socket
    before = socket_fds()
    sock = socket.socket()
    try:
        assert len(socket_fds() - before) == 1
    finally:
        sock.close()
    assert socket_fds() - before == set()


@pytest.mark.timeout(10)
def test_the_schedule_is_a_function_of_the_seed():
    config = ChaosConfig(seed=1234, seconds=30, kills=2)
    a = [e.describe() for e in make_schedule(config, ALL_MODES)]
    b = [e.describe() for e in make_schedule(config, ALL_MODES)]
    c = [e.describe() for e in make_schedule(ChaosConfig(seed=1235, seconds=30, kills=2), ALL_MODES)]
    assert a == b and a != c
    kinds = {d.split()[1] for d in a}
    assert {"cut", "stall", "unstall", "hog", "kill"} <= kinds, kinds
    assert sum(d.split()[1] == "kill" for d in a) == 2
    assert not kinds & set(HELD_FAULTS), "a held fault where a master kill may fall"


@pytest.mark.timeout(10)
def test_held_faults_are_in_every_short_schedule_and_alone_on_their_mode():
    """The short CI run (20 s, stall timeout 10 s) has both held faults on half the modes, each
    longer than the stall timeout, with no other proxy event on that mode meanwhile (1 s around)."""
    for seed in range(1, 40):
        config = ChaosConfig(seed=seed, seconds=20, stall_timeout_s=10)
        events = make_schedule(config, ALL_MODES)
        held = [e for e in events if e.action in HELD_FAULTS]
        assert sorted(e.action for e in held) == ["drop"] * 3 + ["unread"] * 3, seed
        for h in held:
            (mode,) = h.targets
            assert 11.0 <= h.arg <= 13.0 and h.at + h.arg < config.seconds
            ends = [e for e in events if e.action == h.action + "_end" and e.targets == (mode,)]
            assert len(ends) == 1 and abs(ends[0].at - (h.at + h.arg)) < 1e-6
            others = [e for e in events if mode in e.targets and e is not h and e is not ends[0]
                      and e.action != "hog" and h.at - 1.0 < e.at < h.at + h.arg + 1.0]
            assert not others, (seed, h.describe(), [e.describe() for e in others])
    # only the held faults; all the modes
    weights, held_faults = parse_faults("unread,drop", DEFAULT_WEIGHTS)
    config = ChaosConfig(seed=7, seconds=40, weights=weights, held_faults=held_faults, held_share=1.0, hogs=0)
    kinds = [e.action for e in make_schedule(config, ALL_MODES)]
    assert set(kinds) == {"unread", "unread_end", "drop", "drop_end"}
    held_modes = [m for m in ALL_MODES if m not in AIO_MODES]  # none for the aio consumers (bench/_chaos_aio.py)
    assert kinds.count("unread") + kinds.count("drop") == 2 * len(held_modes)  # two rounds
    assert parse_faults("all", DEFAULT_WEIGHTS) == (DEFAULT_WEIGHTS, HELD_FAULTS)
    with pytest.raises(ValueError):
        parse_faults("cut,nope", DEFAULT_WEIGHTS)


# --------------------------------------------------------------------------- against a real broker


def _run(config, brokers):
    lines = []

    def out(text):
        lines.append(text)
        print(text, flush=True)

    report = run_chaos(config, brokers, out=out)
    print(report.text(verbose=True), flush=True)
    return report


@pytest.mark.broker
@pytest.mark.compiled_pass_only  # the harness's own check on a sabotaged client
@pytest.mark.timeout(60)
def test_a_deliberately_broken_client_trips_the_invariants(activemq):
    """A consumer that records settlements without acknowledging: the messages stay on the
    broker (and come again after a failure): the run must fail."""
    config = ChaosConfig(seed=SEED, modes=["stomp-individual", "jms-individual"], seconds=3, rate=20, hogs=0,
                         drain_timeout_s=4, stall_timeout_s=2.5, sabotage="skip-ack")
    report = _run(config, SingleBroker(activemq))
    assert not report.ok
    for mode in config.modes:
        result = report.modes[mode]
        assert result.left > 0, (mode, result)
        assert any("left on the broker" in v for v in result.violations), result.violations


@pytest.mark.broker
@pytest.mark.compiled_pass_only  # the harness's stall check, no heart-beats
@pytest.mark.timeout(60)
def test_a_consumer_that_never_notices_a_stalled_endpoint_is_a_stall(activemq):
    """Consumers without heart-beats: the ``unread`` held fault (their endpoint stops reading
    while their own send() is blocked) goes unnoticed, the producers go on filling the queue:
    the stall check must flag it, and the consumer never resumed during the fault."""
    config = ChaosConfig(seed=SEED, modes=["stomp-optimized", "jms-auto"], seconds=6, rate=20, hogs=0,
                         weights={}, held_faults=("unread",), held_share=1.0, held_s=(2.5, 3.0),
                         stall_timeout_s=1.5, drain_timeout_s=5, sabotage="no-heartbeats")
    report = _run(config, SingleBroker(activemq))
    for mode in config.modes:
        result = report.modes[mode]
        assert result.held == 1 and result.held_unresumed == 1, (mode, result.info)
        assert result.stalls >= 1 and any("stall" in v for v in result.violations), (mode, result.violations)


@pytest.mark.broker
@pytest.mark.timeout(170)  # typically ~30 s; the bound leaves room for a stalled drain (40 s) and closes
def test_chaos_every_mode_through_cuts_stalls_half_closes_and_a_busy_cpu(activemq):
    """Also the held faults (unread, drop) on the consumers of half the modes, 11-13 s each."""
    config = ChaosConfig(seed=SEED, modes=[m for m in ALL_MODES if m not in AIO_MODES], seconds=SECONDS or 20,
                         rate=15, hogs=2, chaos_gap_s=1.0, stall_timeout_s=10, drain_timeout_s=40)
    report = _run(config, SingleBroker(activemq))
    assert report.ok, "seed %d:\n%s" % (SEED, report.text())
    assert sum(m.held for m in report.modes.values()) == 6, report.text(verbose=True)


@pytest.mark.broker
@pytest.mark.timeout(120)  # typically ~20 s
def test_chaos_aio_modes(activemq):
    """The amqstomp.aio consumers (bench/_chaos_aio.py), one mode per ack mode and the handler
    form, through cuts, stalls, half-closes and a busy CPU, checked by the same invariants:
    nothing lost in the at-least-once modes, no settled message redelivered in the strict ones,
    nothing left, no task, thread or socket left behind."""
    config = ChaosConfig(seed=SEED, modes=AIO_MODES, seconds=SECONDS or 10, rate=15, hogs=1,
                         chaos_gap_s=1.0, stall_timeout_s=10, drain_timeout_s=30)
    report = _run(config, SingleBroker(activemq))
    assert report.ok, "seed %d:\n%s" % (SEED, report.text())
    for mode in AIO_MODES:  # each consumed, and its settlements were counted where it reports them
        result, spec = report.modes[mode], MODES[mode]
        assert result.sent > 0 and result.unique > 0, (mode, result)
        # every send arrived, but in an at-most-once mode (aio-auto: the broker acks at dispatch, so a
        # cut takes the frames in flight with it; report.ok above held the checker's count of those)
        assert result.unique == result.sent or spec.may_lose, (mode, result)
        assert result.settled > 0 or not spec.strict, (mode, result)


@pytest.mark.broker
@pytest.mark.compiled_pass_only  # a master kill: the pure pass keeps the every-mode chaos run above
@pytest.mark.timeout(170)  # typically ~25 s with the pair's start
def test_chaos_master_kill_on_a_shared_store_pair(activemq_factory):
    pair = MasterSlavePair(activemq_factory)
    try:
        config = ChaosConfig(seed=SEED, modes=["stomp-individual", "stomp-optimized", "jms-client", "jms-txbatch"],
                             seconds=SECONDS or 12, rate=15, hogs=1, kills=1, chaos_gap_s=2.0,
                             stall_timeout_s=15, drain_timeout_s=45)
        report = _run(config, pair)
        assert pair.kills == 1
    finally:
        pair.close()
    assert report.ok, "seed %d:\n%s" % (SEED, report.text())
