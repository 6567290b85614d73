"""The Run lifecycle: every step a Run and its Attempt may take, and the events each appends.

A step is planned here, purely, from the current state of one Run and one of its Attempts,
and comes back as a `Change`: the Run's new status and fields (compare-and-set on its
version), the Attempt's new status and fields (compare-and-set on its status and lease
generation) and the events to append. Both storage adapters apply a Change the same way
(``storage/lifecycle_writer.py``), so SQLite and PostgreSQL share one state machine.

Every status change is checked against the transition tables in ``domain/runs.py``; a step
that would take a disallowed transition raises `IllegalTransition`. Every write an executor
or worker makes on a leased Attempt carries a `LeaseFence` (attempt, lease generation,
token); a fence that no longer matches raises `LeaseLost`, and the adapter records
``attempt.late_callback_ignored`` instead of the write.

The steps, with the Run and Attempt status each moves:

=============  =============================  ==========================  ====================
step           Run                            Attempt                     events
=============  =============================  ==========================  ====================
acquire        queued -> dispatching          claimed (lease granted)     run.dispatching
start          dispatching                    claimed -> starting         attempt.starting
running        dispatching -> running         starting -> running         attempt.running,
                                                                          run.running
finish         dispatching|running -> S|R     starting|running -> S       attempt.S, run.S or
                                                                          run.retry_wait
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
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn

from qinglong.domain import overlap_reasons
from qinglong.domain.runs import (
    ACTIVE_ATTEMPT,
    FINISH_STATUSES,
    TERMINAL_ATTEMPT,
    Actor,
    AttemptStatus,
    EventType,
    RunStatus,
    require_attempt_transition,
    require_run_transition,
)
from qinglong.errors import IllegalTransition, InvalidInput, LeaseLost

MIN_LEASE_MS = 1_000
MAX_LEASE_MS = 600_000


def check_attempt_lease(lease_ms: int) -> int:
    if (not isinstance(lease_ms, int) or isinstance(lease_ms, bool)
            or not MIN_LEASE_MS <= lease_ms <= MAX_LEASE_MS):
        raise InvalidInput("lease", f"must be between {MIN_LEASE_MS} and {MAX_LEASE_MS} ms")
    return lease_ms


def token_digest(token: str) -> str:
    """What the database keeps of a lease token: its SHA-256 (readers never see the token)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseFence:
    """What every write on a leased Attempt must present: attempt, generation and token."""

    run_id: str
    attempt_id: str
    generation: int
    token: str

    @property
    def digest(self) -> str:
        return token_digest(self.token)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunState:
    id: str
    status: RunStatus
    version: int
    event_sequence: int
    attempts_spent: int = 0  # attempts that counted against the retry policy
    cancel_requested: bool = False
    cancel_reason: str | None = None  # why it was asked to stop (user, policy, ...)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptState:
    id: str
    run_id: str
    attempt: int
    status: AttemptStatus
    executor_type: str
    lease_owner: str | None = None
    lease_generation: int = 0
    lease_token_digest: str | None = None
    lease_expires_at_ms: int | None = None
    pid: int | None = None
    executor_handle: str | None = None

    @property
    def leased(self) -> bool:
        return self.lease_token_digest is not None

    def holds(self, fence: LeaseFence) -> bool:
        return (fence.attempt_id == self.id and fence.run_id == self.run_id
                and fence.generation == self.lease_generation
                and self.lease_token_digest is not None and fence.digest == self.lease_token_digest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One step, ready to apply: compare-and-set updates of a Run and an Attempt, and events."""

    run_id: str
    expected_run_version: int
    run_status: RunStatus
    run_fields: Mapping[str, object]
    attempt_id: str
    expected_attempt_status: AttemptStatus
    expected_generation: int
    attempt_status: AttemptStatus
    attempt_fields: Mapping[str, object]
    events: tuple[dict[str, object], ...]
    event_sequence_base: int  # the Run's event_sequence before this change
    new_generation: int = field(default=-1)
    new_attempt: Mapping[str, object] | None = None  # a further Attempt to insert (retries)

    @property
    def generation(self) -> int:
        return self.expected_generation if self.new_generation < 0 else self.new_generation


# Columns a step may set (anything a step does not name is kept as it is).
RUN_FIELDS = ("started_at_ms", "finished_at_ms", "cancel_requested_at_ms", "cancel_reason",
              "error_code", "error_summary", "retry_at_ms", "attempts_spent", "queued_at_ms")
ATTEMPT_FIELDS = ("worker_id", "lease_token_digest", "lease_expires_at_ms", "pid",
                  "executor_handle", "log_path", "started_at_ms", "finished_at_ms", "exit_code",
                  "error_code", "error_summary")
_CLEAR_LEASE: dict[str, object] = {"lease_token_digest": None, "lease_expires_at_ms": None}


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """Who takes a step, when, and where new event ids come from."""

    now_ms: int
    actor: Actor
    actor_id: str
    new_id: Callable[[], str]


class _Builder:
    def __init__(self, run: RunState, attempt: AttemptState, ctx: StepContext) -> None:
        if attempt.run_id != run.id:
            raise InvalidInput("attempt", f"attempt {attempt.id} does not belong to run {run.id}")
        self.run = run
        self.attempt = attempt
        self.ctx = ctx
        self.events: list[dict[str, object]] = []

    def event(self, kind: EventType, payload: Mapping[str, object], *,
              with_attempt: bool = True) -> None:
        self.events.append({
            "id": self.ctx.new_id(),
            "run_id": self.run.id,
            "sequence": self.run.event_sequence + len(self.events) + 1,
            "type": kind.value,
            "dedupe_key": None,
            "actor_type": self.ctx.actor.value,
            "actor_id": self.ctx.actor_id,
            "attempt_id": self.attempt.id if with_attempt else None,
            "payload": dict(payload),
            "created_at_ms": self.ctx.now_ms,
        })

    def change(self, *, run_to: RunStatus | None = None, attempt_to: AttemptStatus | None = None,
               run_fields: Mapping[str, object] | None = None,
               attempt_fields: Mapping[str, object] | None = None,
               new_generation: int = -1,
               new_attempt: Mapping[str, object] | None = None) -> Change:
        run_status = self.run.status if run_to is None else run_to
        attempt_status = self.attempt.status if attempt_to is None else attempt_to
        if run_to is not None:
            require_run_transition(self.run.status, run_to)
        if attempt_to is not None:
            require_attempt_transition(self.attempt.status, attempt_to)
        unknown = set(run_fields or ()) - set(RUN_FIELDS) | set(attempt_fields or ()) - set(
            ATTEMPT_FIELDS)
        assert not unknown, f"unknown columns {unknown}"
        return Change(
            run_id=self.run.id,
            expected_run_version=self.run.version,
            run_status=run_status,
            run_fields=dict(run_fields or {}),
            attempt_id=self.attempt.id,
            expected_attempt_status=self.attempt.status,
            expected_generation=self.attempt.lease_generation,
            attempt_status=attempt_status,
            attempt_fields=dict(attempt_fields or {}),
            events=tuple(self.events),
            event_sequence_base=self.run.event_sequence,
            new_generation=new_generation,
            new_attempt=new_attempt,
        )


_R, _A = RunStatus, AttemptStatus
# Where each step may be taken: the (Run, Attempt) statuses, and whether the Attempt must be
# leased (True), unleased (False) or either (None).
PRECONDITIONS: dict[str, tuple[frozenset[tuple[RunStatus, AttemptStatus]], bool | None]] = {
    "acquire": (frozenset({(_R.QUEUED, _A.CLAIMED)}), False),
    "start": (frozenset({(_R.DISPATCHING, _A.CLAIMED)}), True),
    "running": (frozenset({(_R.DISPATCHING, _A.STARTING)}), True),
    "finish": (frozenset({(_R.DISPATCHING, _A.STARTING), (_R.RUNNING, _A.RUNNING)}), True),
    "release": (frozenset({(_R.DISPATCHING, _A.CLAIMED)}), True),
    "lose": (frozenset({(_R.DISPATCHING, _A.STARTING), (_R.RUNNING, _A.RUNNING)}), None),
    "cancel_queued": (frozenset({(_R.QUEUED, _A.CLAIMED)}), False),
    "interrupt": (frozenset({(_R.DISPATCHING, _A.STARTING), (_R.RUNNING, _A.RUNNING)}), True),
    "request_cancel": (frozenset({(_R.DISPATCHING, _A.CLAIMED), (_R.DISPATCHING, _A.STARTING),
                                  (_R.RUNNING, _A.RUNNING)}), True),
    "cancel_waiting": (frozenset((_R.RETRY_WAIT, a) for a in TERMINAL_ATTEMPT), None),
    "promote": (frozenset((_R.RETRY_WAIT, a) for a in TERMINAL_ATTEMPT), False),
}


def _precondition(step: str, run: RunState, attempt: AttemptState) -> None:
    pairs, leased = PRECONDITIONS[step]
    if (run.status, attempt.status) not in pairs or (leased is not None
                                                    and attempt.leased is not leased):
        raise_illegal(run, attempt, step)


def _require_fence(attempt: AttemptState, fence: LeaseFence) -> None:
    if not attempt.holds(fence):
        raise LeaseLost(f"attempt {fence.attempt_id} generation {fence.generation} no longer "
                        "holds its lease")


def _transition_payload(source: RunStatus, target: RunStatus, **extra: object) -> dict[str, object]:
    return {"from_status": source.value, "to_status": target.value, **extra}


def acquire(run: RunState, attempt: AttemptState, ctx: StepContext, *, owner: str,
            token_digest_hex: str, lease_ms: int) -> Change:
    """Grant a lease on a queued Run's claimed Attempt to ``owner`` (a new generation)."""
    check_attempt_lease(lease_ms)
    _precondition("acquire", run, attempt)
    b = _Builder(run, attempt, ctx)
    generation = attempt.lease_generation + 1
    b.event(EventType.RUN_DISPATCHING, _transition_payload(
        run.status, RunStatus.DISPATCHING, worker=owner, attempt=attempt.attempt,
        lease_generation=generation))
    return b.change(
        run_to=RunStatus.DISPATCHING,
        attempt_fields={"worker_id": owner, "lease_token_digest": token_digest_hex,
                        "lease_expires_at_ms": ctx.now_ms + lease_ms},
        new_generation=generation,
    )


def start(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence) -> Change:
    """Record that the command is about to be spawned (durable before the spawn)."""
    _require_fence(attempt, fence)
    _precondition("start", run, attempt)
    b = _Builder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_STARTING, {"attempt": attempt.attempt,
                                         "lease_generation": attempt.lease_generation})
    return b.change(attempt_to=AttemptStatus.STARTING)


def running(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence, *,
            pid: int, executor_handle: str, log_path: str | None) -> Change:
    """Record the spawned process."""
    _require_fence(attempt, fence)
    _precondition("running", run, attempt)
    b = _Builder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_RUNNING, {"pid": pid, "attempt": attempt.attempt})
    b.event(EventType.RUN_RUNNING, _transition_payload(run.status, RunStatus.RUNNING))
    return b.change(
        run_to=RunStatus.RUNNING, attempt_to=AttemptStatus.RUNNING,
        run_fields={"started_at_ms": ctx.now_ms},
        attempt_fields={"pid": pid, "executor_handle": executor_handle, "log_path": log_path,
                        "started_at_ms": ctx.now_ms},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How an Attempt ended, as the executor saw it."""

    status: AttemptStatus  # succeeded | failed | timed_out | cancelled
    exit_code: int | None = None
    error_code: str | None = None
    error_summary: str | None = None
    cancel_reason: str | None = None
    log_path: str | None = None  # where its output went, when no running step recorded it
    # output the executor could not store (a worker's log store refused it): how many bytes,
    # and why; recorded on the Attempt's ending event, so a reader can tell "no output" from
    # "output lost"
    output_lost_bytes: int = 0
    output_lost: str | None = None

    def __post_init__(self) -> None:
        if self.status not in FINISH_STATUSES:
            raise InvalidInput("status", "must be one of " + ", ".join(sorted(FINISH_STATUSES)))
        if (self.cancel_reason is not None) != (self.status is AttemptStatus.CANCELLED):
            raise InvalidInput("cancel_reason", "is given exactly when the status is cancelled")
        if self.error_summary is not None and len(self.error_summary) > 1024:
            object.__setattr__(self, "error_summary", self.error_summary[:1021] + "...")


def already_started(attempt: AttemptState, fence: LeaseFence) -> bool:
    """A start that already landed (its reply was lost and it is sent again)."""
    return (attempt.status in (AttemptStatus.STARTING, AttemptStatus.RUNNING)
            and attempt.holds(fence))


def already_running(attempt: AttemptState, fence: LeaseFence) -> bool:
    return attempt.status is AttemptStatus.RUNNING and attempt.holds(fence)


def already_interrupted(attempt: AttemptState, fence: LeaseFence) -> bool:
    """An interrupt that already landed (resent after a lost reply): the Attempt ended
    cancelled under this very lease."""
    return (attempt.id == fence.attempt_id and attempt.status is AttemptStatus.CANCELLED
            and attempt.lease_generation == fence.generation)


def already_released(attempt: AttemptState, fence: LeaseFence) -> bool:
    """A release that already landed (resent after a lost reply): the Attempt is offered
    again, one generation on, and nobody has leased it since."""
    return (attempt.id == fence.attempt_id and attempt.status is AttemptStatus.CLAIMED
            and attempt.lease_generation == fence.generation + 1 and not attempt.leased)


def already_finished(attempt: AttemptState, fence: LeaseFence, outcome: Outcome) -> bool:
    """A finish that already landed (e.g. its COMMIT reply was lost and it is sent again)."""
    return (attempt.status is outcome.status and fence.attempt_id == attempt.id
            and fence.generation == attempt.lease_generation)


def finish(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence,
           outcome: Outcome, *, retry_at_ms: int | None = None) -> Change:
    """End the Attempt with the executor's outcome (the lease ends with it) and its Run: with
    the same outcome, or in ``retry_wait`` until ``retry_at_ms`` when the retry policy says
    so (the caller decides that with ``domain/retry.py``)."""
    _require_fence(attempt, fence)
    _precondition("finish", run, attempt)
    if outcome.cancel_reason is not None and run.cancel_reason:
        # the executor stopped it on request: the request says why (user, policy, ...)
        outcome = dataclasses.replace(outcome, cancel_reason=run.cancel_reason)
    b = _Builder(run, attempt, ctx)
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
                      **_CLEAR_LEASE, **({"log_path": outcome.log_path} if outcome.log_path else {})}
    if retry_at_ms is not None:
        b.event(EventType.RUN_RETRY_WAIT, _transition_payload(
            run.status, RunStatus.RETRY_WAIT, **detail, attempts_spent=spent,
            retry_at_ms=retry_at_ms, next_attempt=attempt.attempt + 1))
        return b.change(
            run_to=RunStatus.RETRY_WAIT, attempt_to=outcome.status,
            run_fields={"retry_at_ms": retry_at_ms, "attempts_spent": spent,
                        "error_code": outcome.error_code, "error_summary": outcome.error_summary},
            attempt_fields=attempt_fields)
    target = RunStatus(outcome.status.value)
    b.event(EventType.for_run(target), _transition_payload(run.status, target, **detail))
    run_fields: dict[str, object] = {"finished_at_ms": ctx.now_ms, "attempts_spent": spent}
    if not (target is RunStatus.CANCELLED and run.cancel_requested
            and run.cancel_reason == overlap_reasons.POLICY):
        # (an overlap policy's request recorded why, naming the Run it gave way to: kept)
        run_fields.update(error_code=outcome.error_code, error_summary=outcome.error_summary)
    if outcome.cancel_reason is not None and not run.cancel_requested:
        run_fields.update(cancel_reason=outcome.cancel_reason, cancel_requested_at_ms=ctx.now_ms)
    return b.change(run_to=target, attempt_to=outcome.status, run_fields=run_fields,
                    attempt_fields=attempt_fields)


def release(run: RunState, attempt: AttemptState, ctx: StepContext, *, reason: str,
            fence: LeaseFence | None = None) -> Change:
    """Withdraw a lease whose command never started: the Run is queued again, the Attempt is
    offered afresh (nothing ran, so no attempt is spent). ``fence`` is given when the holder
    gives the lease back itself; the reconciler withdraws an expired lease without one."""
    if fence is not None:
        _require_fence(attempt, fence)
    _precondition("release", run, attempt)
    b = _Builder(run, attempt, ctx)
    b.event(EventType.RUN_DISPATCH_RELEASED, _transition_payload(
        run.status, RunStatus.QUEUED, reason=reason, worker=attempt.lease_owner,
        lease_generation=attempt.lease_generation))
    return b.change(run_to=RunStatus.QUEUED, attempt_fields={"worker_id": None, **_CLEAR_LEASE},
                    new_generation=attempt.lease_generation + 1)


def lose(run: RunState, attempt: AttemptState, ctx: StepContext, *, reason: str,
         error_code: str, detail: Mapping[str, object] | None = None,
         retry_at_ms: int | None = None, cancel_reason: str | None = None) -> Change:
    """The executor of a started Attempt is gone (its lease expired, or it crashed): the
    Attempt is lost, visibly, and never run again. Its Run is lost too, or waits for a retry
    (``retry_at_ms``, idempotent tasks), or -- when someone had asked to cancel it -- ends
    ``cancelled`` (``cancel_reason``)."""
    _precondition("lose", run, attempt)
    b = _Builder(run, attempt, ctx)
    payload = {"reason": reason, "worker": attempt.lease_owner, "pid": attempt.pid,
               "lease_generation": attempt.lease_generation, **(detail or {})}
    b.event(EventType.ATTEMPT_LOST, {**payload, "attempt": attempt.attempt})
    summary = f"the executor stopped while this attempt was {attempt.status.value} ({reason})"
    spent = run.attempts_spent + 1
    attempt_fields = {"finished_at_ms": ctx.now_ms, "error_code": error_code,
                      "error_summary": summary, **_CLEAR_LEASE}
    if cancel_reason is not None:
        b.event(EventType.RUN_CANCELLED, _transition_payload(
            run.status, RunStatus.CANCELLED, **payload, cancel_reason=cancel_reason))
        run_to, run_fields = RunStatus.CANCELLED, {
            "finished_at_ms": ctx.now_ms, "error_code": error_code, "error_summary": summary,
            "attempts_spent": spent}
    elif retry_at_ms is not None:
        b.event(EventType.RUN_RETRY_WAIT, _transition_payload(
            run.status, RunStatus.RETRY_WAIT, **payload, attempts_spent=spent,
            retry_at_ms=retry_at_ms, next_attempt=attempt.attempt + 1))
        run_to, run_fields = RunStatus.RETRY_WAIT, {
            "retry_at_ms": retry_at_ms, "attempts_spent": spent, "error_code": error_code,
            "error_summary": summary}
    else:
        b.event(EventType.RUN_LOST, _transition_payload(run.status, RunStatus.LOST, **payload))
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
    _require_fence(attempt, fence)
    _precondition("interrupt", run, attempt)
    if run.cancel_requested:
        return finish(run, attempt, ctx, fence, Outcome(
            status=AttemptStatus.CANCELLED, error_code="CANCELLED",
            error_summary="cancelled on request (stopped by a draining executor)",
            cancel_reason=run.cancel_reason or "user"))
    b = _Builder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_CANCELLED, {"attempt": attempt.attempt, "reason": reason,
                                          "error_code": "INTERRUPTED"})
    b.event(EventType.RUN_RETRY_WAIT, _transition_payload(
        run.status, RunStatus.RETRY_WAIT, reason=reason, attempts_spent=run.attempts_spent,
        retry_at_ms=ctx.now_ms, next_attempt=attempt.attempt + 1))
    return b.change(
        run_to=RunStatus.RETRY_WAIT, attempt_to=AttemptStatus.CANCELLED,
        run_fields={"retry_at_ms": ctx.now_ms},
        attempt_fields={"finished_at_ms": ctx.now_ms, "error_code": "INTERRUPTED",
                        "error_summary": f"stopped by the executor ({reason}); the run is "
                                         "queued again", **_CLEAR_LEASE},
    )


def promote(run: RunState, attempt: AttemptState, ctx: StepContext, *, new_attempt_id: str,
            executor_type: str) -> Change:
    """A Run whose retry is due is queued again with a new Attempt (``attempt`` is its
    latest, ended one)."""
    _precondition("promote", run, attempt)
    b = _Builder(run, attempt, ctx)
    number = attempt.attempt + 1
    b.event(EventType.RUN_QUEUED, {**_transition_payload(run.status, RunStatus.QUEUED),
                                   "attempt": number, "attempt_id": new_attempt_id},
            with_attempt=False)
    return b.change(
        run_to=RunStatus.QUEUED,
        run_fields={"retry_at_ms": None, "queued_at_ms": ctx.now_ms},
        new_attempt={"id": new_attempt_id, "run_id": run.id, "attempt": number,
                     "status": AttemptStatus.CLAIMED.value, "executor_type": executor_type,
                     "callback_sequence": 0, "created_at_ms": ctx.now_ms},
    )


def _error_fields(error_code: str | None, error_summary: str | None) -> dict[str, object]:
    """The Run's error columns when a cancelling step says why (else left as they are)."""
    return {} if error_code is None else {"error_code": error_code,
                                          "error_summary": error_summary}


def request_cancel(run: RunState, attempt: AttemptState, ctx: StepContext, *,
                   reason: str, detail: Mapping[str, object] | None = None,
                   error_code: str | None = None, error_summary: str | None = None) -> Change:
    """Ask the executor of a Run in progress to stop it; it learns of it on its next renewal
    (or sooner, by a notification) and records the Run ``cancelled``. ``error_code`` and
    ``error_summary`` (an overlap policy's) say why, and stay when it ends cancelled."""
    _precondition("request_cancel", run, attempt)
    if run.cancel_requested:
        raise IllegalTransition(f"run {run.id} is already being cancelled")
    b = _Builder(run, attempt, ctx)
    b.event(EventType.RUN_CANCEL_REQUESTED, {"cancel_reason": reason, "status": run.status.value,
                                             **(detail or {})})
    return b.change(run_fields={"cancel_requested_at_ms": ctx.now_ms, "cancel_reason": reason,
                                **_error_fields(error_code, error_summary)})


def cancel_waiting(run: RunState, attempt: AttemptState, ctx: StepContext, *,
                   reason: str, detail: Mapping[str, object] | None = None,
                   error_code: str | None = None, error_summary: str | None = None) -> Change:
    """Cancel a Run that waits for a retry: it never runs again."""
    _precondition("cancel_waiting", run, attempt)
    b = _Builder(run, attempt, ctx)
    b.event(EventType.RUN_CANCELLED, _transition_payload(
        run.status, RunStatus.CANCELLED, cancel_reason=reason, **(detail or {})),
        with_attempt=False)
    return b.change(run_to=RunStatus.CANCELLED, run_fields={
        "finished_at_ms": ctx.now_ms, "cancel_requested_at_ms": ctx.now_ms,
        "cancel_reason": reason, "retry_at_ms": None,
        **_error_fields(error_code, error_summary)})


def cancel_queued(run: RunState, attempt: AttemptState, ctx: StepContext, *, reason: str,
                  detail: Mapping[str, object] | None = None, error_code: str | None = None,
                  error_summary: str | None = None) -> Change:
    """Cancel a Run that no executor holds: it never runs (``detail`` says why, e.g. the
    overlap policy that skipped it, and ``error_code``/``error_summary`` tell people)."""
    _precondition("cancel_queued", run, attempt)
    b = _Builder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_CANCELLED, {"cancel_reason": reason, "attempt": attempt.attempt})
    b.event(EventType.RUN_CANCELLED, _transition_payload(run.status, RunStatus.CANCELLED,
                                                         cancel_reason=reason, **(detail or {})))
    return b.change(
        run_to=RunStatus.CANCELLED, attempt_to=AttemptStatus.CANCELLED,
        run_fields={"finished_at_ms": ctx.now_ms, "cancel_requested_at_ms": ctx.now_ms,
                    "cancel_reason": reason, **_error_fields(error_code, error_summary)},
        attempt_fields={"finished_at_ms": ctx.now_ms},
    )


def late_callback(run: RunState, attempt: AttemptState, ctx: StepContext, fence: LeaseFence,
                  write: str) -> Change:
    """Record a write that a stale lease holder tried (it changes nothing else)."""
    b = _Builder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_LATE_CALLBACK_IGNORED, {
        "write": write, "fence_generation": fence.generation,
        "current_generation": attempt.lease_generation, "current_status": attempt.status.value,
    })
    return b.change()


def raise_illegal(run: RunState, attempt: AttemptState, step: str) -> NoReturn:
    raise IllegalTransition(
        f"{step} is not allowed for run {run.id} ({run.status.value}) with attempt "
        f"{attempt.attempt} ({attempt.status.value}{', leased' if attempt.leased else ''})")


def is_active(attempt: AttemptState) -> bool:
    return attempt.status in ACTIVE_ATTEMPT and (attempt.status is not AttemptStatus.CLAIMED
                                                 or attempt.leased)
