"""The Run lifecycle in the domain: transition tables and steps, exhaustively."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.domain import lifecycle
from qinglong.domain.lifecycle import (
    AttemptState,
    Change,
    LeaseFence,
    Outcome,
    RunState,
    StepContext,
    token_digest,
)
from qinglong.domain.runs import (
    ATTEMPT_TRANSITIONS,
    RUN_TRANSITIONS,
    TERMINAL_ATTEMPT,
    TERMINAL_RUN,
    Actor,
    AttemptStatus,
    EventType,
    RunStatus,
    require_attempt_transition,
    require_run_transition,
)
from qinglong.errors import IllegalTransition, InvalidInput, LeaseLost

TOKEN = "the-token"


@pytest.mark.parametrize(("source", "target"), list(itertools.product(RunStatus, RunStatus)),
                         ids=lambda s: s.value)
def test_every_run_transition_is_allowed_exactly_when_listed(source: RunStatus,
                                                             target: RunStatus) -> None:
    if target in RUN_TRANSITIONS.get(source, frozenset()):
        require_run_transition(source, target)
    else:
        with pytest.raises(IllegalTransition, match=f"from {source.value} to {target.value}"):
            require_run_transition(source, target)


@pytest.mark.parametrize(("source", "target"),
                         list(itertools.product(AttemptStatus, AttemptStatus)),
                         ids=lambda s: s.value)
def test_every_attempt_transition_is_allowed_exactly_when_listed(source: AttemptStatus,
                                                                 target: AttemptStatus) -> None:
    if target in ATTEMPT_TRANSITIONS.get(source, frozenset()):
        require_attempt_transition(source, target)
    else:
        with pytest.raises(IllegalTransition):
            require_attempt_transition(source, target)


def test_terminal_states_have_no_way_out() -> None:
    for status in TERMINAL_RUN:
        assert not RUN_TRANSITIONS.get(status)
    for status in TERMINAL_ATTEMPT:
        assert not ATTEMPT_TRANSITIONS.get(status)


def test_every_event_type_has_a_summary() -> None:
    assert all(kind.summary for kind in EventType)
    for status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT,
                   RunStatus.LOST):
        assert EventType.for_run(status).value == "run." + status.value


# --- steps over every combination of states -----------------------------------------------


def ctx() -> StepContext:
    ids = itertools.count(1)
    return StepContext(now_ms=1_000_000, actor=Actor.EXECUTOR, actor_id="x",
                       new_id=lambda: f"e{next(ids)}")


def states(run_status: RunStatus, attempt_status: AttemptStatus,
           leased: bool) -> tuple[RunState, AttemptState, LeaseFence]:
    run = RunState(id="r", status=run_status, version=4, event_sequence=7)
    attempt = AttemptState(
        id="a", run_id="r", attempt=1, status=attempt_status, executor_type="local_process",
        lease_owner="w" if leased else None, lease_generation=3,
        lease_token_digest=token_digest(TOKEN) if leased else None,
        lease_expires_at_ms=2_000_000 if leased else None,
    )
    return run, attempt, LeaseFence(run_id="r", attempt_id="a", generation=3, token=TOKEN)


SUCCEEDED = Outcome(status=AttemptStatus.SUCCEEDED, exit_code=0)
FAILED = Outcome(status=AttemptStatus.FAILED, error_code="EXECUTOR_START_FAILED")
Step = Callable[[RunState, AttemptState, LeaseFence], Change]
STEPS: dict[str, Step] = {
    "acquire": lambda r, a, f: lifecycle.acquire(r, a, ctx(), owner="w2",
                                                 token_digest_hex=token_digest("t2"),
                                                 lease_ms=5_000),
    "start": lambda r, a, f: lifecycle.start(r, a, ctx(), f),
    "running": lambda r, a, f: lifecycle.running(r, a, ctx(), f, pid=9, executor_handle="h",
                                                 log_path=None),
    # a command that never got going can only fail; one that ran may end any way
    "finish": lambda r, a, f: lifecycle.finish(
        r, a, ctx(), f, SUCCEEDED if a.status is AttemptStatus.RUNNING else FAILED),
    "release": lambda r, a, f: lifecycle.release(r, a, ctx(), reason="drain", fence=f),
    "lose": lambda r, a, f: lifecycle.lose(r, a, ctx(), reason="lease_expired",
                                           error_code="LEASE_EXPIRED"),
    "cancel_queued": lambda r, a, f: lifecycle.cancel_queued(r, a, ctx(), reason="user"),
    "interrupt": lambda r, a, f: lifecycle.interrupt(r, a, ctx(), f, reason="drain"),
    "request_cancel": lambda r, a, f: lifecycle.request_cancel(r, a, ctx(), reason="user"),
    "cancel_waiting": lambda r, a, f: lifecycle.cancel_waiting(r, a, ctx(), reason="user"),
    "promote": lambda r, a, f: lifecycle.promote(r, a, ctx(), new_attempt_id="a2",
                                                 executor_type="local_process"),
}

# Where each step may be taken: (run status, attempt status, leased).
ALLOWED: dict[str, set[tuple[RunStatus, AttemptStatus, bool]]] = {
    "acquire": {(RunStatus.QUEUED, AttemptStatus.CLAIMED, False)},
    "start": {(RunStatus.DISPATCHING, AttemptStatus.CLAIMED, True)},
    "running": {(RunStatus.DISPATCHING, AttemptStatus.STARTING, True)},
    "finish": {(RunStatus.DISPATCHING, AttemptStatus.STARTING, True),
               (RunStatus.RUNNING, AttemptStatus.RUNNING, True)},
    "release": {(RunStatus.DISPATCHING, AttemptStatus.CLAIMED, True)},
    "lose": {(RunStatus.DISPATCHING, AttemptStatus.STARTING, True),
             (RunStatus.DISPATCHING, AttemptStatus.STARTING, False),
             (RunStatus.RUNNING, AttemptStatus.RUNNING, True),
             (RunStatus.RUNNING, AttemptStatus.RUNNING, False)},
    "cancel_queued": {(RunStatus.QUEUED, AttemptStatus.CLAIMED, False)},
    "interrupt": {(RunStatus.DISPATCHING, AttemptStatus.STARTING, True),
                  (RunStatus.RUNNING, AttemptStatus.RUNNING, True)},
    "request_cancel": {(RunStatus.DISPATCHING, AttemptStatus.CLAIMED, True),
                       (RunStatus.DISPATCHING, AttemptStatus.STARTING, True),
                       (RunStatus.RUNNING, AttemptStatus.RUNNING, True)},
    "cancel_waiting": {(RunStatus.RETRY_WAIT, a, leased) for a in TERMINAL_ATTEMPT
                       for leased in (False, True)},
    "promote": {(RunStatus.RETRY_WAIT, a, False) for a in TERMINAL_ATTEMPT},
}
COMBINATIONS = list(itertools.product(RunStatus, AttemptStatus, (False, True)))


def test_the_domain_table_of_preconditions_is_the_one_documented_here() -> None:
    documented = {
        name: {(r, a) for r, a, _ in where} for name, where in ALLOWED.items()
    }
    assert {name: set(pairs) for name, (pairs, _) in lifecycle.PRECONDITIONS.items()} == documented


@pytest.mark.parametrize("name", sorted(STEPS))
def test_each_step_is_taken_exactly_where_allowed(name: str) -> None:
    step = STEPS[name]
    for run_status, attempt_status, leased in COMBINATIONS:
        run, attempt, fence = states(run_status, attempt_status, leased)
        where = (run_status, attempt_status, leased)
        if where in ALLOWED[name]:
            change = step(run, attempt, fence)
            if change.run_status is not run_status:
                assert change.run_status in RUN_TRANSITIONS[run_status]
            if change.attempt_status is not attempt_status:
                assert change.attempt_status in ATTEMPT_TRANSITIONS[attempt_status]
            assert change.expected_run_version == 4 and change.expected_generation == 3
            assert [e["sequence"] for e in change.events] == list(
                range(8, 8 + len(change.events)))
            assert change.events, f"{name} appended no event"
        else:
            with pytest.raises((IllegalTransition, LeaseLost)):
                step(run, attempt, fence)


def test_steps_that_grant_or_withdraw_a_lease_move_the_generation() -> None:
    run, attempt, fence = states(RunStatus.QUEUED, AttemptStatus.CLAIMED, False)
    assert STEPS["acquire"](run, attempt, fence).generation == 4
    run, attempt, fence = states(RunStatus.DISPATCHING, AttemptStatus.CLAIMED, True)
    assert STEPS["release"](run, attempt, fence).generation == 4
    assert STEPS["start"](run, attempt, fence).generation == 3
    run, attempt, fence = states(RunStatus.RUNNING, AttemptStatus.RUNNING, True)
    assert STEPS["lose"](run, attempt, fence).generation == 4
    finished = STEPS["finish"](run, attempt, fence)
    assert finished.generation == 3
    assert finished.attempt_fields["lease_token_digest"] is None


@pytest.mark.parametrize("wrong", ["token", "generation", "attempt", "run"])
def test_a_fence_that_does_not_hold_raises_lease_lost(wrong: str) -> None:
    run, attempt, _ = states(RunStatus.RUNNING, AttemptStatus.RUNNING, True)
    bad = {
        "token": LeaseFence(run_id="r", attempt_id="a", generation=3, token="other"),
        "generation": LeaseFence(run_id="r", attempt_id="a", generation=2, token=TOKEN),
        "attempt": LeaseFence(run_id="r", attempt_id="b", generation=3, token=TOKEN),
        "run": LeaseFence(run_id="q", attempt_id="a", generation=3, token=TOKEN),
    }[wrong]
    with pytest.raises(LeaseLost):
        lifecycle.finish(run, attempt, ctx(), bad, SUCCEEDED)
    recorded = lifecycle.late_callback(run, attempt, ctx(), bad, "finish")
    assert (recorded.run_status, recorded.attempt_status) == (run.status, attempt.status)
    assert [e["type"] for e in recorded.events] == ["attempt.late_callback_ignored"]


def test_a_retried_finish_waits_and_spends_an_attempt() -> None:
    run, attempt, fence = states(RunStatus.RUNNING, AttemptStatus.RUNNING, True)
    failed = Outcome(status=AttemptStatus.FAILED, exit_code=3, error_code="EXIT_NONZERO")
    change = lifecycle.finish(run, attempt, ctx(), fence, failed, retry_at_ms=1_060_000)
    assert (change.run_status, change.attempt_status) == (RunStatus.RETRY_WAIT,
                                                           AttemptStatus.FAILED)
    assert change.run_fields["retry_at_ms"] == 1_060_000
    assert change.run_fields["attempts_spent"] == run.attempts_spent + 1
    assert [e["type"] for e in change.events] == ["attempt.failed", "run.retry_wait"]
    waiting = RunState(id="r", status=RunStatus.RETRY_WAIT, version=5, event_sequence=9,
                       attempts_spent=1)
    ended = AttemptState(id="a", run_id="r", attempt=1, status=AttemptStatus.FAILED,
                         executor_type="local_process", lease_generation=3)
    promoted = lifecycle.promote(waiting, ended, ctx(), new_attempt_id="a2",
                                 executor_type="local_process")
    assert promoted.run_status is RunStatus.QUEUED
    assert promoted.new_attempt is not None and promoted.new_attempt["attempt"] == 2
    assert promoted.run_fields["retry_at_ms"] is None


def test_ran_is_running_then_finish_as_one_change() -> None:
    # A command that ended before its running record was written: both steps in one write.
    run, attempt, fence = states(RunStatus.DISPATCHING, AttemptStatus.STARTING, True)
    change = lifecycle.ran(run, attempt, ctx(), fence, pid=9, executor_handle="h",
                           log_path=None, ran_for_ms=1_500, finish_with=lambda r, a: (
                               lifecycle.finish(r, a, ctx(), fence, SUCCEEDED)))
    assert (change.run_status, change.attempt_status) == (RunStatus.SUCCEEDED,
                                                           AttemptStatus.SUCCEEDED)
    # one compare-and-set against the state before both steps
    assert (change.expected_run_version, change.expected_attempt_status,
            change.expected_generation, change.event_sequence_base) == (
        4, AttemptStatus.STARTING, 3, 7)
    assert [(e["type"], e["sequence"]) for e in change.events] == [
        ("attempt.running", 8), ("run.running", 9), ("attempt.succeeded", 10),
        ("run.succeeded", 11)]
    assert change.attempt_fields["pid"] == 9 and change.attempt_fields["executor_handle"] == "h"
    # one instant of the store's clock: the start is dated by how long the command ran
    assert change.run_fields["finished_at_ms"] == 1_000_000
    assert change.run_fields["started_at_ms"] == change.attempt_fields["started_at_ms"] == 998_500
    assert change.run_fields["attempts_spent"] == 1
    assert change.attempt_fields["lease_token_digest"] is None  # the lease ends with it


def test_ran_is_refused_where_running_is() -> None:
    finish_with: Callable[[RunState, AttemptState], Change] = (
        lambda r, a: lifecycle.finish(r, a, ctx(), fence, SUCCEEDED))
    for run_status, attempt_status, leased in COMBINATIONS:
        run, attempt, fence = states(run_status, attempt_status, leased)
        if (run_status, attempt_status, leased) in ALLOWED["running"]:
            continue
        with pytest.raises((IllegalTransition, LeaseLost)):
            lifecycle.ran(run, attempt, ctx(), fence, pid=9, executor_handle="h",
                          log_path=None, ran_for_ms=0, finish_with=finish_with)
    run, attempt, fence = states(RunStatus.DISPATCHING, AttemptStatus.STARTING, True)
    forged = LeaseFence(run_id="r", attempt_id="a", generation=3, token="forged")
    with pytest.raises(LeaseLost):
        lifecycle.ran(run, attempt, ctx(), forged, pid=9, executor_handle="h", log_path=None,
                      ran_for_ms=0, finish_with=finish_with)


def test_an_interrupted_attempt_is_queued_again_without_spending_one() -> None:
    run, attempt, fence = states(RunStatus.RUNNING, AttemptStatus.RUNNING, True)
    change = lifecycle.interrupt(run, attempt, ctx(), fence, reason="drain")
    assert (change.run_status, change.attempt_status) == (RunStatus.RETRY_WAIT,
                                                           AttemptStatus.CANCELLED)
    assert "attempts_spent" not in change.run_fields
    assert change.run_fields["retry_at_ms"] == 1_000_000  # at once
    assert change.attempt_fields["error_code"] == "INTERRUPTED"


def test_a_lost_attempt_of_a_run_being_cancelled_ends_it_cancelled() -> None:
    run, attempt, _ = states(RunStatus.RUNNING, AttemptStatus.RUNNING, True)
    change = lifecycle.lose(run, attempt, ctx(), reason="lease_expired",
                            error_code="LEASE_EXPIRED", cancel_reason="user")
    assert (change.run_status, change.attempt_status) == (RunStatus.CANCELLED, AttemptStatus.LOST)
    retried = lifecycle.lose(run, attempt, ctx(), reason="lease_expired",
                             error_code="LEASE_EXPIRED", retry_at_ms=1_010_000)
    assert retried.run_status is RunStatus.RETRY_WAIT


def test_cancel_can_be_requested_once() -> None:
    run, attempt, _ = states(RunStatus.RUNNING, AttemptStatus.RUNNING, True)
    change = lifecycle.request_cancel(run, attempt, ctx(), reason="user")
    assert change.run_status is RunStatus.RUNNING
    assert change.run_fields["cancel_reason"] == "user"
    again = RunState(id="r", status=RunStatus.RUNNING, version=5, event_sequence=8,
                     cancel_requested=True)
    with pytest.raises(IllegalTransition, match="already being cancelled"):
        lifecycle.request_cancel(again, attempt, ctx(), reason="user")


def test_a_command_that_never_ran_cannot_have_succeeded() -> None:
    run, attempt, fence = states(RunStatus.DISPATCHING, AttemptStatus.STARTING, True)
    for status in (AttemptStatus.SUCCEEDED, AttemptStatus.TIMED_OUT):
        with pytest.raises(IllegalTransition):
            lifecycle.finish(run, attempt, ctx(), fence, Outcome(status=status))


def test_an_outcome_must_be_an_end() -> None:
    for status in AttemptStatus:
        if status in (AttemptStatus.CLAIMED, AttemptStatus.STARTING, AttemptStatus.RUNNING,
                      AttemptStatus.LOST):
            with pytest.raises(InvalidInput):
                Outcome(status=status)
    with pytest.raises(InvalidInput, match="cancel_reason"):
        Outcome(status=AttemptStatus.CANCELLED)
    with pytest.raises(InvalidInput, match="cancel_reason"):
        Outcome(status=AttemptStatus.FAILED, cancel_reason="user")
    assert len(Outcome(status=AttemptStatus.FAILED, error_summary="x" * 5000).error_summary
               or "") == 1024


# --- any sequence of steps stays inside the tables -----------------------------------------


def apply(run: RunState, attempt: AttemptState, change: Change) -> tuple[RunState, AttemptState]:
    fields = change.attempt_fields
    digest = fields.get("lease_token_digest", attempt.lease_token_digest)
    spent = change.run_fields.get("attempts_spent", run.attempts_spent)
    reason = change.run_fields.get("cancel_reason", run.cancel_reason)
    after = RunState(id=run.id, status=change.run_status, version=run.version + 1,
                     event_sequence=run.event_sequence + len(change.events),
                     attempts_spent=spent,  # type: ignore[arg-type]
                     cancel_requested=run.cancel_requested or reason is not None,
                     cancel_reason=reason)  # type: ignore[arg-type]
    if change.new_attempt is not None:  # a retry: the new Attempt is the one that moves on
        new = change.new_attempt
        return after, AttemptState(id=str(new["id"]), run_id=run.id, attempt=int(new["attempt"]),  # type: ignore[call-overload]
                                   status=AttemptStatus(new["status"]),
                                   executor_type=str(new["executor_type"]))
    return (
        after,
        AttemptState(id=attempt.id, run_id=attempt.run_id, attempt=attempt.attempt,
                     status=change.attempt_status, executor_type=attempt.executor_type,
                     lease_owner=fields.get("worker_id", attempt.lease_owner),  # type: ignore[arg-type]
                     lease_generation=change.generation,
                     lease_token_digest=digest,  # type: ignore[arg-type]
                     lease_expires_at_ms=None),
    )


# An independent model of the lifecycle, written from the documented table in
# domain/lifecycle.py rather than from its code: for each step, the state
# (Run status, Attempt status, leased, cancel requested) it leads to, or None where it must be
# refused. In these sequences the fence is the one the last acquire handed out, so it holds
# exactly while the Attempt is leased.
_R, _A = RunStatus, AttemptStatus
ModelState = tuple[RunStatus, AttemptStatus, bool, bool]


def model_step(name: str, state: ModelState) -> ModelState | None:
    run, attempt, leased, cancel = state
    at = (run, attempt)
    in_progress = at in ((_R.DISPATCHING, _A.STARTING), (_R.RUNNING, _A.RUNNING))
    if name == "acquire" and at == (_R.QUEUED, _A.CLAIMED) and not leased:
        return _R.DISPATCHING, _A.CLAIMED, True, cancel
    if name == "start" and at == (_R.DISPATCHING, _A.CLAIMED) and leased:
        return _R.DISPATCHING, _A.STARTING, True, cancel
    if name == "running" and at == (_R.DISPATCHING, _A.STARTING) and leased:
        return _R.RUNNING, _A.RUNNING, True, cancel
    if name == "finish" and in_progress and leased:  # STEPS["finish"]: success only if it ran
        ended = (_R.SUCCEEDED, _A.SUCCEEDED) if attempt is _A.RUNNING else (_R.FAILED, _A.FAILED)
        return *ended, False, cancel
    if name == "release" and at == (_R.DISPATCHING, _A.CLAIMED) and leased:
        return _R.QUEUED, _A.CLAIMED, False, cancel
    if name == "lose" and in_progress:  # the reconciler needs no fence
        return _R.LOST, _A.LOST, False, cancel
    if name == "cancel_queued" and at == (_R.QUEUED, _A.CLAIMED) and not leased:
        return _R.CANCELLED, _A.CANCELLED, False, True
    if name == "interrupt" and in_progress and leased:
        return (_R.CANCELLED if cancel else _R.RETRY_WAIT), _A.CANCELLED, False, cancel
    if name == "request_cancel" and leased and not cancel and (
            in_progress or at == (_R.DISPATCHING, _A.CLAIMED)):
        return run, attempt, True, True
    if name == "cancel_waiting" and run is _R.RETRY_WAIT and attempt in TERMINAL_ATTEMPT:
        return _R.CANCELLED, attempt, leased, True
    if name == "promote" and run is _R.RETRY_WAIT and attempt in TERMINAL_ATTEMPT and not leased:
        return _R.QUEUED, _A.CLAIMED, False, cancel  # a new Attempt, not yet leased
    return None


def test_the_model_refuses_every_step_from_an_ended_run() -> None:
    for name, (run, attempt, leased) in itertools.product(STEPS, COMBINATIONS):
        if run in TERMINAL_RUN:
            assert model_step(name, (run, attempt, leased, False)) is None


Walk = tuple[RunState, AttemptState, LeaseFence, ModelState]


def first_state() -> Walk:
    run, attempt, _ = states(RunStatus.QUEUED, AttemptStatus.CLAIMED, False)
    fence = LeaseFence(run_id="r", attempt_id="a", generation=0, token="t2")
    return run, attempt, fence, (run.status, attempt.status, attempt.leased, False)


def take(name: str, walk: Walk) -> Walk | None:
    """Take step ``name`` and check it against the model: refused exactly where the model
    refuses it, and otherwise leading where the model says. The state after it, if taken."""
    run, attempt, fence, model = walk
    expected = model_step(name, model)
    try:
        change = STEPS[name](run, attempt, fence)
    except (IllegalTransition, LeaseLost) as exc:
        assert expected is None, f"{name} refused from {model}, the model allows it: {exc}"
        return None
    assert expected is not None, f"{name} was taken from {model}, the model refuses it"
    if name == "acquire":  # the new holder's fence
        fence = LeaseFence(run_id="r", attempt_id=attempt.id, generation=change.generation,
                           token="t2")
    assert change.events, f"{name} changed the Run without an event"
    assert change.new_attempt is not None or change.generation >= attempt.lease_generation
    run, attempt = apply(run, attempt, change)
    assert (run.status, attempt.status, attempt.leased, run.cancel_requested) == expected, (
        f"{name} from {model} led to {run.status}/{attempt.status} (leased {attempt.leased}, "
        f"cancel requested {run.cancel_requested}), the model expects {expected}")
    assert run.status not in TERMINAL_RUN or attempt.status in TERMINAL_ATTEMPT
    # an Attempt is leased exactly while the Run is being dispatched or run
    assert attempt.leased == (run.status in (RunStatus.DISPATCHING, RunStatus.RUNNING)), (
        f"{name}: Run {run.status} with attempt leased={attempt.leased}")
    return run, attempt, fence, expected


def test_every_step_from_every_reachable_state_agrees_with_the_model() -> None:
    """Exhaustive: every state the steps can reach from a queued Run, every step from it."""
    seen = {first_state()[3]}
    frontier = [first_state()]
    while frontier:
        walk = frontier.pop()
        for name in sorted(STEPS):
            after = take(name, walk)
            if after is not None and after[3] not in seen:
                seen.add(after[3])
                frontier.append(after)
    # the walk got everywhere the lifecycle goes, including the cancel paths
    assert {state[0] for state in seen} == {
        _R.QUEUED, _R.DISPATCHING, _R.RUNNING, _R.RETRY_WAIT, _R.SUCCEEDED, _R.FAILED,
        _R.CANCELLED, _R.LOST}
    assert (_R.RUNNING, _A.RUNNING, True, True) in seen


@settings(max_examples=200)
@given(st.data())
def test_random_step_sequences_only_move_along_the_tables(data: st.DataObject) -> None:
    walk = first_state()
    for _ in range(data.draw(st.integers(min_value=0, max_value=24), label="length")):
        # half of the steps are ones the model allows, so sequences get deep into the
        # lifecycle (uniformly drawn steps are mostly refused and rarely get past a start)
        allowed = [name for name in sorted(STEPS) if model_step(name, walk[3]) is not None]
        pool = allowed if allowed and data.draw(st.booleans(), label="allowed") else sorted(STEPS)
        after = take(data.draw(st.sampled_from(pool), label="step"), walk)
        walk = walk if after is None else after
