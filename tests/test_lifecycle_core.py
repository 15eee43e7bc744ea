"""The connection lifecycle of the core (:mod:`amqstomp._core.lifecycle`), in memory:
no thread, socket or clock (issue 22: one state machine for the failover loops and
the JMS connection, instead of their flags)."""
import pytest

from amqstomp._core.lifecycle import TRANSITIONS, ConnectionLifecycle, IllegalTransition, Phase, Step

I, C, O, R, S, G, X, F = (Phase.IDLE, Phase.CONNECTING, Phase.OPEN, Phase.RECONNECTING, Phase.STOPPING,
                          Phase.FAILING, Phase.CLOSED, Phase.FAILED)

#: the steps no phase allows, written out here (not read from the table under test)
ILLEGAL = {
    (I, Step.UP), (I, Step.LOST),
    (C, Step.CONNECT), (C, Step.LOST),
    (O, Step.UP),
    (R, Step.CONNECT), (R, Step.LOST),
    (S, Step.CONNECT), (S, Step.UP), (S, Step.LOST),
    (G, Step.CONNECT), (G, Step.UP), (G, Step.LOST),
    (X, Step.UP), (X, Step.LOST), (X, Step.FAIL),
    (F, Step.UP), (F, Step.LOST),
}

#: phase -> (armed, reconnecting, takes_over_losses, closing, closed)
QUESTIONS = {
    I: (False, False, False, False, False),
    C: (True, True, False, False, False),
    O: (True, False, True, False, False),
    R: (True, True, False, False, False),
    S: (False, True, False, True, False),
    G: (False, True, False, False, False),
    X: (False, False, False, True, True),
    F: (False, False, False, False, False),
}


def at(phase, cause=None):
    life = ConnectionLifecycle()
    life.phase, life.cause = phase, cause
    return life


def apply(life, step):
    return life.fail(ValueError("boom")) if step is Step.FAIL else getattr(life, step.value)()


def test_a_new_connection_is_idle_without_cause():
    life = ConnectionLifecycle()
    assert (life.phase, life.cause) == (Phase.IDLE, None)


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("step", list(Step))
def test_every_step_in_every_phase_goes_where_the_table_says_or_raises(phase, step):
    earlier = RuntimeError("earlier")
    life = at(phase, earlier)
    if (phase, step) in ILLEGAL:
        with pytest.raises(IllegalTransition) as caught:
            apply(life, step)
        assert (caught.value.phase, caught.value.step) == (phase, step)
        assert (life.phase, life.cause) == (phase, earlier)  # nothing changed
        return
    target = apply(life, step)
    assert target is life.phase is TRANSITIONS[phase][step]
    if step in (Step.ARM, Step.CONNECT):
        assert life.cause is None  # an earlier failure is forgotten
    elif step is Step.FAIL:
        assert isinstance(life.cause, ValueError)
    else:
        assert life.cause is earlier  # kept (a close keeps why it broke)


def test_the_table_lists_every_phase_and_exactly_the_legal_steps():
    assert set(TRANSITIONS) == set(Phase)
    listed = {(phase, step) for phase, steps in TRANSITIONS.items() for step in steps}
    every = {(phase, step) for phase in Phase for step in Step}
    assert listed == every - ILLEGAL


@pytest.mark.parametrize("phase", list(Phase))
def test_the_questions_per_phase(phase):
    life = at(phase)
    assert (life.armed, life.reconnecting, life.takes_over_losses, life.closing, life.closed) == QUESTIONS[phase]


def walk(life, *steps):
    return [apply(life, step) for step in steps]


def test_failover_story_lost_reconnected_then_closed():
    life = ConnectionLifecycle()
    assert walk(life, Step.ARM, Step.CONNECT, Step.UP, Step.LOOP_ENDED) == [O, C, O, O]
    assert walk(life, Step.LOST, Step.UP, Step.LOOP_ENDED, Step.CLOSE) == [R, O, O, X]
    assert life.cause is None and not life.armed


def test_failover_gives_up_after_a_loss_and_says_why_until_armed_again():
    life = at(O)
    assert walk(life, Step.LOST, Step.FAIL) == [R, G]
    assert life.reconnecting and not life.armed  # the loop still has to end
    assert walk(life, Step.LOOP_ENDED) == [F]
    assert str(life.cause) == "boom" and not life.reconnecting
    assert walk(life, Step.CLOSE) == [X] and str(life.cause) == "boom"  # a disarm keeps why it gave up
    assert walk(life, Step.ARM) == [O] and life.cause is None


def test_close_while_reconnecting_waits_for_the_loop_then_is_closed():
    life = at(O)
    assert walk(life, Step.LOST, Step.CLOSE) == [R, S]
    assert life.closing and life.reconnecting and not life.closed
    with pytest.raises(IllegalTransition):
        life.up()  # the loop must not report a socket once stopped
    assert walk(life, Step.LOOP_ENDED) == [X] and life.closed and life.cause is None


def test_armed_again_before_the_stopped_loop_ended_goes_on_reconnecting():
    life = at(S)
    assert walk(life, Step.ARM, Step.UP) == [R, O]


def test_a_first_connection_that_does_not_come_goes_back_to_idle():
    life = ConnectionLifecycle()
    assert walk(life, Step.CONNECT, Step.LOOP_ENDED) == [C, I]
    assert life.cause is None and not life.closing


def test_jms_connection_story_broken_then_closed_keeps_the_failure():
    life = ConnectionLifecycle()
    assert walk(life, Step.CONNECT, Step.UP, Step.FAIL, Step.CLOSE) == [C, O, F, X]
    assert life.closed and str(life.cause) == "boom"
    with pytest.raises(IllegalTransition):
        life.fail(ValueError("late"))  # the owner checks closing first, under its lock
    assert str(life.cause) == "boom"


def test_a_loss_is_taken_over_only_when_open():
    for phase in Phase:
        life = at(phase)
        if phase is O:
            assert life.lost() is R
        else:
            with pytest.raises(IllegalTransition):
                life.lost()
