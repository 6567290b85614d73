"""The Run lifecycle: every step a Run and its Attempt may take, and the events each appends.

A step is planned here, purely, from the current state of one Run and one of its Attempts,
and comes back as a `Change`: the Run's new status and fields (compare-and-set on its
version), the Attempt's new status and fields (compare-and-set on its status and lease
generation) and the events to append. Both storage adapters apply a Change the same way
(``storage/runs/lifecycle.py``), so SQLite and PostgreSQL share one state machine.

Every status change is checked against the transition tables in ``domain/runs.py``; a step
that would take a disallowed transition raises `IllegalTransition`. Every write an executor
or worker makes on a leased Attempt carries a `LeaseFence` (attempt, lease generation,
token); a fence that no longer matches raises `LeaseLost`, and the adapter records
``attempt.late_callback_ignored`` instead of the write.

The steps, with the Run and Attempt status each moves:

=============  =============================  ==========================  ====================
step           Run                            Attempt                     events
=============  =============================  ==========================  ====================
acquire        queued -> dispatching          claimed (lease granted;     run.dispatching
                                              with ``start``: starting)   (and attempt.starting)
start          dispatching                    claimed -> starting         attempt.starting
running        dispatching -> running         starting -> running         attempt.running,
                                                                          run.running
finish         dispatching|running -> S|R     starting|running -> S       attempt.S, run.S or
                                                                          run.retry_wait
ran            dispatching -> S|R             starting -> S               running's, then
               (running, then finish, as one write: a command that ended  finish's
               before its running record was written)
release        dispatching -> queued          claimed (lease withdrawn)   run.dispatch_released
lose           dispatching|running -> lost|R  starting|running -> lost    attempt.lost, run.lost
               (cancelled when asked to)                                  (or retry_wait,
                                                                          run.cancelled)
interrupt      dispatching|running -> R       starting|running ->         attempt.cancelled,
               (cancelled when asked to)      cancelled                   run.retry_wait
promote        retry_wait -> queued           a new Attempt, claimed      run.queued
request_cancel (unchanged; cancel requested)  (unchanged)                 run.cancel_requested
cancel_waiting retry_wait -> cancelled        (unchanged)                 run.cancelled
cancel_queued  queued -> cancelled            claimed -> cancelled        attempt.cancelled,
                                                                          run.cancelled
late_callback  (unchanged)                    (unchanged)                 attempt.late_callback_ignored
=============  =============================  ==========================  ====================

``S`` is succeeded, failed, timed_out or cancelled; ``R`` is retry_wait (a retry decided by
the task's policy, or an interrupt that costs no attempt). Every step that takes or
withdraws a lease moves the lease generation on, so a token handed out before is dead from
then on.

The steps that move a Run on are here; the three that cancel one are in
``domain/lifecycle_cancel.py``, what a step reads and the `Change` it plans in
``domain/lifecycle_state.py``, and how a step is built and where it may be taken
(`PRECONDITIONS`) in ``domain/lifecycle_builder.py``. Every name is importable from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from qinglong.domain import overlap_reasons
from qinglong.domain.lifecycle_builder import (
    ATTEMPT_FIELDS,
    CLEAR_LEASE,
    PRECONDITIONS,
    RUN_FIELDS,
    StepBuilder,
    StepContext,
    check_precondition,
    raise_illegal,
    require_fence,
    transition_payload,
)
from qinglong.domain.lifecycle_cancel import cancel_queued, cancel_waiting, request_cancel
from qinglong.domain.lifecycle_state import (
    MAX_LEASE_MS,
    MIN_LEASE_MS,
    AttemptState,
    Change,
    LeaseFence,
    Outcome,
    RunState,
    already_finished,
    already_interrupted,
    already_released,
    already_running,
    already_started,
    check_attempt_lease,
    is_active,
    token_digest,
)
from qinglong.domain.runs import AttemptStatus, EventType, RunStatus

__all__ = [
    "ATTEMPT_FIELDS", "MAX_LEASE_MS", "MIN_LEASE_MS", "PRECONDITIONS", "RUN_FIELDS",
    "AttemptState", "Change", "LeaseFence", "Outcome", "RunState", "StepContext", "acquire",
    "already_finished", "already_interrupted", "already_released", "already_running",
    "already_started", "cancel_queued", "cancel_waiting", "check_attempt_lease", "finish",
    "interrupt", "is_active", "late_callback", "lose", "promote", "raise_illegal", "ran",
    "release", "request_cancel", "running", "start", "token_digest",
]


def acquire(run: RunState, attempt: AttemptState, ctx: StepContext, *, owner: str,
            token_digest_hex: str, lease_ms: int, start: bool = False) -> Change:
    """Grant a lease on a queued Run's claimed Attempt to ``owner`` (a new generation).
    With ``start``, the lease is granted ``starting``: the holder spawns the command at once,
    so the start step is written with the lease instead of after it (its event follows the
    lease's). Such a lease is never offered again: an expiry finds it started, and ``lose``
    settles it, as for any start the holder recorded itself."""
    check_attempt_lease(lease_ms)
    check_precondition("acquire", run, attempt)
    b = StepBuilder(run, attempt, ctx)
    generation = attempt.lease_generation + 1
    b.event(EventType.RUN_DISPATCHING, transition_payload(
        run.status, RunStatus.DISPATCHING, worker=owner, attempt=attempt.attempt,
        lease_generation=generation))
    if start:
        b.event(EventType.ATTEMPT_STARTING, {"attempt": attempt.attempt,
                                             "lease_generation": generation})
    return b.change(
        run_to=RunStatus.DISPATCHING, attempt_to=AttemptStatus.STARTING if start else None,
        attempt_fields={"worker_id": owner, "lease_token_digest": token_digest_hex,
                        "lease_expires_at_ms": ctx.now_ms + lease_ms},
        new_generation=generation,
    )


def start(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence) -> Change:
    """Record that the command is about to be spawned (durable before the spawn)."""
    require_fence(attempt, fence)
    check_precondition("start", run, attempt)
    b = StepBuilder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_STARTING, {"attempt": attempt.attempt,
                                         "lease_generation": attempt.lease_generation})
    return b.change(attempt_to=AttemptStatus.STARTING)


def running(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence, *,
            pid: int, executor_handle: str, log_path: str | None) -> Change:
    """Record the spawned process."""
    require_fence(attempt, fence)
    check_precondition("running", run, attempt)
    b = StepBuilder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_RUNNING, {"pid": pid, "attempt": attempt.attempt})
    b.event(EventType.RUN_RUNNING, transition_payload(run.status, RunStatus.RUNNING))
    return b.change(
        run_to=RunStatus.RUNNING, attempt_to=AttemptStatus.RUNNING,
        run_fields={"started_at_ms": ctx.now_ms},
        attempt_fields={"pid": pid, "executor_handle": executor_handle, "log_path": log_path,
                        "started_at_ms": ctx.now_ms},
    )


def finish(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence,
           outcome: Outcome, *, retry_at_ms: int | None = None) -> Change:
    """End the Attempt with the executor's outcome (the lease ends with it) and its Run: with
    the same outcome, or in ``retry_wait`` until ``retry_at_ms`` when the retry policy says
    so (the caller decides that with ``domain/retry.py``)."""
    require_fence(attempt, fence)
    check_precondition("finish", run, attempt)
    if outcome.cancel_reason is not None and run.cancel_reason:
        # the executor stopped it on request: the request says why (user, policy, ...)
        outcome = dataclasses.replace(outcome, cancel_reason=run.cancel_reason)
    b = StepBuilder(run, attempt, ctx)
    detail: dict[str, object] = {"exit_code": outcome.exit_code}
    if outcome.error_code:
        detail["error_code"] = outcome.error_code
    if outcome.cancel_reason:
        detail["cancel_reason"] = outcome.cancel_reason
    ending: dict[str, object] = {**detail, "attempt": attempt.attempt}
    if outcome.output_lost is not None:
        ending.update(output_lost=outcome.output_lost, output_lost_bytes=outcome.output_lost_bytes)
    b.event(EventType.for_attempt(outcome.status), ending)
    spent = run.attempts_spent + 1
    attempt_fields = {"finished_at_ms": ctx.now_ms, "exit_code": outcome.exit_code,
                      "error_code": outcome.error_code, "error_summary": outcome.error_summary,
                      **CLEAR_LEASE, **({"log_path": outcome.log_path} if outcome.log_path else {})}
    if retry_at_ms is not None:
        b.event(EventType.RUN_RETRY_WAIT, transition_payload(
            run.status, RunStatus.RETRY_WAIT, **detail, attempts_spent=spent,
            retry_at_ms=retry_at_ms, next_attempt=attempt.attempt + 1))
        return b.change(
            run_to=RunStatus.RETRY_WAIT, attempt_to=outcome.status,
            run_fields={"retry_at_ms": retry_at_ms, "attempts_spent": spent,
                        "error_code": outcome.error_code, "error_summary": outcome.error_summary},
            attempt_fields=attempt_fields)
    target = RunStatus(outcome.status.value)
    b.event(EventType.for_run(target), transition_payload(run.status, target, **detail))
    run_fields: dict[str, object] = {"finished_at_ms": ctx.now_ms, "attempts_spent": spent}
    if not (target is RunStatus.CANCELLED and run.cancel_requested
            and run.cancel_reason == overlap_reasons.POLICY):
        # (an overlap policy's request recorded why, naming the Run it gave way to: kept)
        run_fields.update(error_code=outcome.error_code, error_summary=outcome.error_summary)
    if outcome.cancel_reason is not None and not run.cancel_requested:
        run_fields.update(cancel_reason=outcome.cancel_reason, cancel_requested_at_ms=ctx.now_ms)
    return b.change(run_to=target, attempt_to=outcome.status, run_fields=run_fields,
                    attempt_fields=attempt_fields)


def ran(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence, *,
        pid: int, executor_handle: str, log_path: str | None, ran_for_ms: int,
        finish_with: Callable[[RunState, AttemptState], Change]) -> Change:
    """``running`` and then the ending ``finish_with`` plans from the state running leaves,
    as one Change: both steps' events in order, each field as the later step left it, one
    compare-and-set against the state before both. For a command that ended before its
    running record was written (the executor folds the two writes into one). Both steps
    happen at one instant of the store's clock, so the start is dated ``ran_for_ms`` (the
    time since the spawn, as the executor measured it) before it: the Run's duration is the
    command's, not zero."""
    first = running(run, attempt, ctx, fence, pid=pid, executor_handle=executor_handle,
                    log_path=log_path)
    after_run, after_attempt = first.applied_to(run, attempt)
    second = finish_with(after_run, after_attempt)
    started = {"started_at_ms": max(0, ctx.now_ms - max(0, ran_for_ms))}
    return dataclasses.replace(
        second,
        expected_run_version=first.expected_run_version,
        expected_attempt_status=first.expected_attempt_status,
        expected_generation=first.expected_generation,
        run_fields={**first.run_fields, **second.run_fields, **started},
        attempt_fields={**first.attempt_fields, **second.attempt_fields, **started},
        events=first.events + second.events,
        event_sequence_base=first.event_sequence_base,
    )


def release(run: RunState, attempt: AttemptState, ctx: StepContext, *, reason: str,
            fence: LeaseFence | None = None) -> Change:
    """Withdraw a lease whose command never started: the Run is queued again, the Attempt is
    offered afresh (nothing ran, so no attempt is spent). ``fence`` is given when the holder
    gives the lease back itself; the reconciler withdraws an expired lease without one."""
    if fence is not None:
        require_fence(attempt, fence)
    check_precondition("release", run, attempt)
    b = StepBuilder(run, attempt, ctx)
    b.event(EventType.RUN_DISPATCH_RELEASED, transition_payload(
        run.status, RunStatus.QUEUED, reason=reason, worker=attempt.lease_owner,
        lease_generation=attempt.lease_generation))
    return b.change(run_to=RunStatus.QUEUED, attempt_fields={"worker_id": None, **CLEAR_LEASE},
                    new_generation=attempt.lease_generation + 1)


def lose(run: RunState, attempt: AttemptState, ctx: StepContext, *, reason: str,
         error_code: str, detail: Mapping[str, object] | None = None,
         retry_at_ms: int | None = None, cancel_reason: str | None = None) -> Change:
    """The executor of a started Attempt is gone (its lease expired, or it crashed): the
    Attempt is lost, visibly, and never run again. Its Run is lost too, or waits for a retry
    (``retry_at_ms``, idempotent tasks), or -- when someone had asked to cancel it -- ends
    ``cancelled`` (``cancel_reason``)."""
    check_precondition("lose", run, attempt)
    b = StepBuilder(run, attempt, ctx)
    payload = {"reason": reason, "worker": attempt.lease_owner, "pid": attempt.pid,
               "lease_generation": attempt.lease_generation, **(detail or {})}
    b.event(EventType.ATTEMPT_LOST, {**payload, "attempt": attempt.attempt})
    summary = f"the executor stopped while this attempt was {attempt.status.value} ({reason})"
    spent = run.attempts_spent + 1
    attempt_fields = {"finished_at_ms": ctx.now_ms, "error_code": error_code,
                      "error_summary": summary, **CLEAR_LEASE}
    if cancel_reason is not None:
        b.event(EventType.RUN_CANCELLED, transition_payload(
            run.status, RunStatus.CANCELLED, **payload, cancel_reason=cancel_reason))
        run_to, run_fields = RunStatus.CANCELLED, {
            "finished_at_ms": ctx.now_ms, "error_code": error_code, "error_summary": summary,
            "attempts_spent": spent}
    elif retry_at_ms is not None:
        b.event(EventType.RUN_RETRY_WAIT, transition_payload(
            run.status, RunStatus.RETRY_WAIT, **payload, attempts_spent=spent,
            retry_at_ms=retry_at_ms, next_attempt=attempt.attempt + 1))
        run_to, run_fields = RunStatus.RETRY_WAIT, {
            "retry_at_ms": retry_at_ms, "attempts_spent": spent, "error_code": error_code,
            "error_summary": summary}
    else:
        b.event(EventType.RUN_LOST, transition_payload(run.status, RunStatus.LOST, **payload))
        run_to, run_fields = RunStatus.LOST, {
            "finished_at_ms": ctx.now_ms, "error_code": error_code, "error_summary": summary,
            "attempts_spent": spent}
    return b.change(run_to=run_to, attempt_to=AttemptStatus.LOST, run_fields=run_fields,
                    attempt_fields=attempt_fields, new_generation=attempt.lease_generation + 1)


def interrupt(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence, *,
              reason: str) -> Change:
    """The executor stopped a command because it is draining: the Attempt is cancelled and
    the Run is queued again at once (through ``retry_wait``), without spending an attempt --
    unless someone had asked to cancel it: then it ends ``cancelled`` here."""
    require_fence(attempt, fence)
    check_precondition("interrupt", run, attempt)
    if run.cancel_requested:
        return finish(run, attempt, ctx, fence, Outcome(
            status=AttemptStatus.CANCELLED, error_code="CANCELLED",
            error_summary="cancelled on request (stopped by a draining executor)",
            cancel_reason=run.cancel_reason or "user"))
    b = StepBuilder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_CANCELLED, {"attempt": attempt.attempt, "reason": reason,
                                          "error_code": "INTERRUPTED"})
    b.event(EventType.RUN_RETRY_WAIT, transition_payload(
        run.status, RunStatus.RETRY_WAIT, reason=reason, attempts_spent=run.attempts_spent,
        retry_at_ms=ctx.now_ms, next_attempt=attempt.attempt + 1))
    return b.change(
        run_to=RunStatus.RETRY_WAIT, attempt_to=AttemptStatus.CANCELLED,
        run_fields={"retry_at_ms": ctx.now_ms},
        attempt_fields={"finished_at_ms": ctx.now_ms, "error_code": "INTERRUPTED",
                        "error_summary": f"stopped by the executor ({reason}); the run is "
                                         "queued again", **CLEAR_LEASE},
    )


def promote(run: RunState, attempt: AttemptState, ctx: StepContext, *, new_attempt_id: str,
            executor_type: str) -> Change:
    """A Run whose retry is due is queued again with a new Attempt (``attempt`` is its
    latest, ended one)."""
    check_precondition("promote", run, attempt)
    b = StepBuilder(run, attempt, ctx)
    number = attempt.attempt + 1
    b.event(EventType.RUN_QUEUED, {**transition_payload(run.status, RunStatus.QUEUED),
                                   "attempt": number, "attempt_id": new_attempt_id},
            with_attempt=False)
    return b.change(
        run_to=RunStatus.QUEUED,
        run_fields={"retry_at_ms": None, "queued_at_ms": ctx.now_ms},
        new_attempt={"id": new_attempt_id, "run_id": run.id, "attempt": number,
                     "status": AttemptStatus.CLAIMED.value, "executor_type": executor_type,
                     "callback_sequence": 0, "created_at_ms": ctx.now_ms},
    )


def late_callback(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence,
                  write: str) -> Change:
    """Record a write that a stale lease holder tried (it changes nothing else)."""
    b = StepBuilder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_LATE_CALLBACK_IGNORED, {
        "write": write, "fence_generation": fence.generation,
        "current_generation": attempt.lease_generation, "current_status": attempt.status.value,
    })
    return b.change()


