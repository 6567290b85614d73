"""The Run lifecycle inside one transaction of the run store.

Steps are planned by ``domain/lifecycle.py`` and applied here with compare-and-set updates
(the Run row first: it is the mutex of its lifecycle, then its Attempt; every time a step
stamps or compares comes from the store's clock, read by the statement that locks those rows
or after it). Fenced steps of several Attempts are read, planned and written together
(`LifecycleWriter.fenced_all`, one set-based write in `apply_all`). A
fenced write whose lease is gone is not applied: the refusal is recorded as
``attempt.late_callback_ignored`` in the same transaction and returned as a value, so the
store commits the record and then raises `LeaseLost`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

from qinglong.domain import lifecycle
from qinglong.domain.lifecycle import (
    ATTEMPT_FIELDS,
    RUN_FIELDS,
    AttemptState,
    Change,
    LeaseFence,
    RunState,
    StepContext,
)
from qinglong.domain.retry import JITTER, Ending, should_retry
from qinglong.domain.runs import ENDED_RUN, Actor, AttemptStatus, RunStatus
from qinglong.errors import Conflict, LeaseLost, NotFound, QinglongError, RecordCorrupt
from qinglong.ids import new_uuid
from qinglong.storage import records
from qinglong.storage.dbapi import Row
from qinglong.storage.events import event_rows, insert_events, json_rows
from qinglong.storage.flows.release import TRIGGER_TYPE_FLOW, FlowSteps, Releaser
from qinglong.storage.kernel import Tx
from qinglong.storage.runs.granting import LeaseGranting, RevisionCache
from qinglong.storage.runs.params import (
    RescuedAttempt,
)
from qinglong.storage.runs.rows import attempt_state, run_from_candidate, run_state


class StepOutcome(StrEnum):
    APPLIED = "applied"
    ALREADY_DONE = "already_done"  # the same write landed before (a resent finish)
    REFUSED = "refused"  # the lease is gone; recorded as attempt.late_callback_ignored


def _flagged(fields: Mapping[str, object], names: tuple[str, ...]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in names:
        out["set_" + name] = name in fields
        out[name] = fields.get(name)
    return out


Plan = Callable[["LifecycleWriter", RunState, AttemptState, StepContext], Change]


@dataclass(frozen=True, slots=True, kw_only=True)
class FencedStep:
    """A step on a leased Attempt: planned by ``plan`` under ``fence`` (``write`` names it in
    a refusal); ``done`` says whether the same step already landed (a resent write)."""

    fence: LeaseFence
    write: str
    plan: Plan
    done: Callable[[AttemptState], bool] | None = None
    params: object = None  # what the caller asked to record (the running or finish params)


class LifecycleWriter(LeaseGranting):
    def __init__(
        self,
        tx: Tx,
        *,
        shared: bool,
        actor: Actor,
        actor_id: str,
        new_id: Callable[[], str] = new_uuid,
        jitter: Callable[[], float] | None = None,
        revisions: RevisionCache | None = None,
    ) -> None:
        self._tx = tx
        self._revisions = RevisionCache() if revisions is None else revisions
        # the task revision each Run loaded by a fenced step pinned (for its retry policy)
        self._pinned: dict[str, tuple[str, str, str]] = {}
        self._shared = shared  # other processes take leases too: lock Runs in id order
        self._actor = actor
        self._actor_id = actor_id
        self._new_id = new_id
        self._jitter = jitter or _random_jitter
        self._flows: FlowSteps | None = None
        self._deferred: list[tuple[list[tuple[str, RunStatus]], int]] | None = None
        # Runs read with their trigger type and not released by a flow: no flow step to move
        # when they end (the others, and Runs read without it, are looked up in flow_steps)
        self._outside_flows: set[str] = set()

    def context(self, now_ms: int | None = None) -> StepContext:
        return StepContext(now_ms=self._tx.now_ms() if now_ms is None else now_ms, actor=self._actor,
                           actor_id=self._actor_id, new_id=self._new_id)

    # -- reading and applying -----------------------------------------------------------

    def load(self, run_id: str, attempt_id: str) -> tuple[RunState, AttemptState]:
        """The Run (locked first) and its Attempt; NotFound when either does not exist."""
        run = self._tx.one("lifecycle_run_get", {"run_id": run_id})
        if run is None:
            raise NotFound("run", run_id)
        attempt = self._tx.one("lifecycle_attempt_get",
                            {"run_id": run_id, "attempt_id": attempt_id})
        if attempt is None:
            raise NotFound("attempt", attempt_id)
        return run_state(run), attempt_state(attempt)

    def apply(self, change: Change) -> None:
        """Write one planned step (see `apply_all`)."""
        self.apply_all((change,))

    def apply_all(self, changes: Sequence[Change]) -> None:
        """Write planned steps, each on its own Run: the Runs (compare-and-set on each
        version), their Attempts (on each status and lease generation) and every event, in
        one statement where the dialect writes several tables at once
        (``Capabilities.set_based_writes``), else one statement per table. The guards can
        only fail if a row moved under a lock we hold, which is a bug, so it raises Conflict
        (rolling back)."""
        if not changes:
            return
        if len({change.run_id for change in changes}) != len(changes):
            raise Conflict("two steps of one Run planned against the same state")
        runs = json_rows([{"run_id": c.run_id, "expected_version": c.expected_run_version,
                           "status": c.run_status.value, "event_count": len(c.events),
                           **_flagged(c.run_fields, RUN_FIELDS)} for c in changes])
        attempts = json_rows([{"run_id": c.run_id, "attempt_id": c.attempt_id,
                               "expected_status": c.expected_attempt_status.value,
                               "expected_generation": c.expected_generation,
                               "status": c.attempt_status.value, "generation": c.generation,
                               **_flagged(c.attempt_fields, ATTEMPT_FIELDS)} for c in changes])
        run_ids = self._tx.array([c.run_id for c in changes])
        attempt_ids = self._tx.array([c.attempt_id for c in changes])
        events = tuple(event for c in changes for event in c.events)
        if self._tx.capabilities.set_based_writes:
            row = self._tx.one("lifecycle_apply", {
                "runs": runs, "attempts": attempts, "events": event_rows(events),
                "run_ids": run_ids, "attempt_ids": attempt_ids})
            if row is None or (int(row["runs"]), int(row["attempts"])) != (len(changes),) * 2:
                raise Conflict("a run or attempt changed during a lifecycle step")
        else:
            moved = {c.run_id for c in changes} - {row["id"] for row in self._tx.all(
                "lifecycle_runs_update", {"changes": runs, "run_ids": run_ids})}
            if moved:
                raise Conflict(f"run {min(moved)} changed during a lifecycle step")
            moved = {c.attempt_id for c in changes} - {row["id"] for row in self._tx.all(
                "lifecycle_attempts_update", {"changes": attempts, "attempt_ids": attempt_ids})}
            if moved:
                raise Conflict(f"attempt {min(moved)} changed during a lifecycle step")
            insert_events(self._tx, events)
        for change in changes:
            if change.new_attempt is not None:
                self._tx.execute("attempt_insert", change.new_attempt)
        # the Runs this write ends (a step into an ended state stamps its end; a refused late
        # callback on an ended Run does not): their flow steps move on, in this transaction
        # (a Run known to be outside every flow has none)
        stamped = [(c, at) for c in changes if c.run_status in ENDED_RUN
                   and isinstance(at := c.run_fields.get("finished_at_ms"), int)
                   and c.run_id not in self._outside_flows]
        if stamped:
            ended = [(c.run_id, c.run_status) for c, _ in stamped]
            at_ms = max(at for _, at in stamped)
            if self._deferred is not None:
                self._deferred.append((ended, at_ms))
            else:
                self.flows.after_ended(ended, at_ms)

    @contextmanager
    def flows_deferred(self) -> Iterator[None]:
        """Within: the Runs that end record their flow steps only at the end, together, so
        their flow runs are locked after every Run this transaction locks and in one order
        (a transaction that ends Runs one by one would otherwise lock flow runs in between)."""
        self._deferred = []
        try:
            yield
            ended = [pair for batch, _ in self._deferred for pair in batch]
            if ended:
                self.flows.after_ended(ended, max(at for _, at in self._deferred))
        finally:
            self._deferred = None

    @property
    def flows(self) -> FlowSteps:
        """The flow steps this transaction moves (storage/flows/release.py)."""
        if self._flows is None:
            self._flows = FlowSteps(self._tx, Releaser(actor=self._actor,
                                                       actor_id=self._actor_id,
                                                       new_id=self._new_id))
        return self._flows

    # -- fenced steps -------------------------------------------------------------------

    def fenced(self, fence: LeaseFence, write: str, plan: Plan,
               *, done: Callable[[AttemptState], bool] | None = None) -> StepOutcome:
        """Apply the step ``plan`` makes under ``fence``; a lost lease is recorded, not applied."""
        [outcome] = self.fenced_all([FencedStep(fence=fence, write=write, plan=plan, done=done)])
        if isinstance(outcome, QinglongError):
            raise outcome
        return outcome

    def fenced_all(self, steps: Sequence[FencedStep]) -> list[StepOutcome | QinglongError]:
        """Apply fenced steps of distinct Runs together: their Runs and Attempts are read
        and locked in one statement (Run id order) that also reads the clock, each
        step is planned against its own rows and fence (a lost lease is recorded, not
        applied), and every change is written by `apply_all`. One outcome per step, in
        order: NotFound for a step whose Run or Attempt does not exist, and the error of a
        step that may not be taken from its rows' state (that step alone is not written)."""
        if len({step.fence.run_id for step in steps}) != len(steps):
            raise Conflict("two steps of one Run in one transaction")
        rows = {row["attempt_id"]: row for row in self._tx.all("lifecycle_steps_get", {
            "run_ids": self._tx.array([step.fence.run_id for step in steps]),
            "attempt_ids": self._tx.array([step.fence.attempt_id for step in steps]),
            **self._tx.clock_args()})}
        ctx = self.context(int(next(iter(rows.values()))["now_ms"])) if rows else None
        outcomes: list[StepOutcome | QinglongError] = []
        changes: list[Change] = []
        for step in steps:
            row = rows.get(step.fence.attempt_id)
            if row is None or ctx is None or row["run_id"] != step.fence.run_id:
                outcomes.append(NotFound("attempt", step.fence.attempt_id))
                continue
            run = run_from_candidate(row)
            attempt = attempt_state(row, id_column="attempt_id", status_column="attempt_status")
            self._pinned[run.id] = (row["project_id"], row["task_id"], row["task_revision"])
            if row["trigger_type"] != TRIGGER_TYPE_FLOW:
                self._outside_flows.add(run.id)
            if step.done is not None and step.done(attempt):
                outcomes.append(StepOutcome.ALREADY_DONE)
                continue
            try:
                changes.append(step.plan(self, run, attempt, ctx))
                outcomes.append(StepOutcome.APPLIED)
            except LeaseLost:
                changes.append(lifecycle.late_callback(run, attempt, ctx, step.fence, step.write))
                outcomes.append(StepOutcome.REFUSED)
            except QinglongError as exc:  # (an illegal transition) this step only
                outcomes.append(exc)
        self.apply_all(changes)
        return outcomes

    # -- leases -------------------------------------------------------------------------

    def retry_at(self, run: RunState, attempt: AttemptState, ending: Ending,
                 now_ms: int) -> int | None:
        """When the Run is tried again after ``ending`` (None: it is not), by the retry
        policy of the plan it pinned."""
        pinned = self._pinned.get(run.id)
        if pinned is not None:
            plan = self._revision(*pinned, attempt.executor_type)[0]
            if plan is None:
                return None
            execution = plan.plan
        else:
            found = self._tx.one("run_plan_get",
                                 {"run_id": run.id, "executor_type": attempt.executor_type})
            if found is None:
                return None
            try:
                execution = records.execution_revision(found).plan
            except RecordCorrupt:
                return None
        spent = run.attempts_spent + 1
        if not should_retry(execution.retry, idempotent=execution.idempotent, ending=ending,
                            spent=spent, cancel_requested=run.cancel_requested):
            return None
        return now_ms + execution.retry.delay_ms(spent, self._jitter())

    def rescue(self, *, grace_ms: int, limit: int, ignore_expiry: bool,
               executor_type: str | None, notes: Mapping[str, Mapping[str, object]],
               now_ms: int) -> list[RescuedAttempt]:
        """Withdraw leases whose holder is gone: an unstarted Attempt is offered again; a
        started one is lost, and its Run lost, retried (idempotent tasks) or -- when someone
        had asked to cancel it -- cancelled."""
        rows = self._tx.all("lease_expired", {
            "grace_ms": grace_ms, "limit": limit, "ignore_expiry": ignore_expiry,
            "executor_type": executor_type, "now_ms": now_ms,
        })
        ctx = self.context(now_ms)
        reason = "lease_expired" if not ignore_expiry else "executor_restarted"
        with self.flows_deferred():  # every Run's lock first, then the flow runs'
            return self._rescue_rows(rows, ctx, reason, ignore_expiry, notes, now_ms)

    def _rescue_rows(self, rows: Sequence[Row], ctx: StepContext, reason: str,
                     ignore_expiry: bool, notes: Mapping[str, Mapping[str, object]],
                     now_ms: int) -> list[RescuedAttempt]:
        rescued = []
        for row in rows:
            run = run_from_candidate(row)
            attempt = attempt_state(row, id_column="attempt_id", status_column="attempt_status")
            cancel_reason = (row["cancel_reason"] or "user") if run.cancel_requested else None
            if attempt.status is AttemptStatus.CLAIMED:
                released = lifecycle.release(run, attempt, ctx, reason=reason)
                self.apply(released)
                outcome = "requeued"
                if cancel_reason is not None:  # it never started: it ends here, cancelled
                    run, attempt = self.load(run.id, attempt.id)
                    self.apply(lifecycle.cancel_queued(run, attempt, ctx, reason=cancel_reason))
                    outcome = "cancelled"
            else:
                retry_at = None if cancel_reason else self.retry_at(
                    run, attempt, Ending(status=AttemptStatus.LOST), now_ms)
                self.apply(lifecycle.lose(
                    run, attempt, ctx, reason=reason,
                    error_code="LEASE_EXPIRED" if not ignore_expiry else "EXECUTOR_RESTARTED",
                    detail=notes.get(attempt.id), retry_at_ms=retry_at,
                    cancel_reason=cancel_reason))
                outcome = ("cancelled" if cancel_reason else
                           "retry" if retry_at is not None else "lost")
            rescued.append(RescuedAttempt(
                run_id=run.id, attempt_id=attempt.id, previous_status=row["attempt_status"],
                outcome=outcome, worker=attempt.lease_owner, pid=attempt.pid,
                executor_handle=attempt.executor_handle,
            ))
        return rescued

    def promote_due(self, *, limit: int, now_ms: int) -> list[str]:
        """Queue again, each with a new Attempt, the Runs whose retry wait is over."""
        rows = self._tx.all("retry_due", {"limit": limit, "now_ms": now_ms})
        ctx = self.context(now_ms)
        for row in rows:
            run = run_from_candidate(row)
            attempt = attempt_state(row, id_column="attempt_id", status_column="attempt_status")
            self.apply(lifecycle.promote(run, attempt, ctx, new_attempt_id=self._new_id(),
                                         executor_type=attempt.executor_type))
        return [row["run_id"] for row in rows]

    def wake_cancel(self, run_id: str) -> None:
        """Tell the Run's executor at COMMIT that it is asked to stop."""
        self._tx.wake("cancel", run_id)

    def cancel(self, run_id: str, reason: str) -> RunStatus | None:
        """Cancel a Run: one nobody runs ends now (the new status); one in progress is asked
        to stop (None: its executor records the end)."""
        run_row = self._tx.one("lifecycle_run_get", {"run_id": run_id})
        if run_row is None:
            raise NotFound("run", run_id)
        latest = self._tx.one("run_latest_attempt", {"run_id": run_id})
        if latest is None:
            raise Conflict(f"run {run_id} has no attempt")
        run, attempt = run_state(run_row), attempt_state(latest)
        ctx = self.context()
        if run.status in ENDED_RUN:
            raise Conflict(f"run {run_id} has already ended ({run.status.value})")
        if run.cancel_requested:
            raise Conflict(f"run {run_id} is already being cancelled")
        if run.status is RunStatus.QUEUED and not attempt.leased:
            self.apply(lifecycle.cancel_queued(run, attempt, ctx, reason=reason))
            return RunStatus.CANCELLED
        if run.status is RunStatus.RETRY_WAIT:
            self.apply(lifecycle.cancel_waiting(run, attempt, ctx, reason=reason))
            return RunStatus.CANCELLED
        self.apply(lifecycle.request_cancel(run, attempt, ctx, reason=reason))
        return None


def _random_jitter() -> float:
    low, high = JITTER
    return random.uniform(low, high)  # noqa: S311 - spreads retries, not security


def refused(action: str, fence: LeaseFence) -> LeaseLost:
    return LeaseLost(f"{action}: attempt {fence.attempt_id} generation {fence.generation} no "
                     "longer holds its lease")
