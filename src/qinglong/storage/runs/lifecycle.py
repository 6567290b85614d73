"""The Run lifecycle inside one transaction of the run store.

Steps are planned by ``domain/lifecycle.py`` and applied here with compare-and-set updates
(the Run row first: it is the mutex of its lifecycle, then its Attempt; every time a step
stamps or compares comes from the store's clock, read after those rows are locked). A
fenced write whose lease is gone is not applied: the refusal is recorded as
``attempt.late_callback_ignored`` in the same transaction and returned as a value, so the
store commits the record and then raises `LeaseLost`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, cast

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
from qinglong.domain.task import ExecutionRevision
from qinglong.errors import Conflict, LeaseLost, NotFound, RecordCorrupt
from qinglong.ids import new_uuid
from qinglong.storage import records
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Tx
from qinglong.storage.runs.overlap import OverlapDecision, OverlapVerdict
from qinglong.storage.runs.params import (
    AttemptLease,
    LeaseRenewal,
    RescuedAttempt,
)


def insert_events(tx: Tx, events: tuple[dict[str, object], ...]) -> None:
    for event in events:
        payload = cast(Mapping[str, object], event["payload"])
        tx.execute("event_insert", {**event, "payload": records.payload_text(payload)})


class StepOutcome(StrEnum):
    APPLIED = "applied"
    ALREADY_DONE = "already_done"  # the same write landed before (a resent finish)
    REFUSED = "refused"  # the lease is gone; recorded as attempt.late_callback_ignored


def run_state(row: Row, *, id_column: str = "id", status_column: str = "status") -> RunState:
    return RunState(id=row[id_column], status=RunStatus(row[status_column]),
                    version=int(row["version"]), event_sequence=int(row["event_sequence"]),
                    attempts_spent=int(row["attempts_spent"]),
                    cancel_requested=bool(row["cancel_requested"]),
                    cancel_reason=row["cancel_reason"])


def _run_from_candidate(row: Row) -> RunState:
    return run_state(row, id_column="run_id", status_column="run_status")


def attempt_state(row: Row, *, id_column: str = "id", status_column: str = "status") -> AttemptState:
    expires = row["lease_expires_at_ms"]
    return AttemptState(
        id=row[id_column], run_id=row["run_id"], attempt=int(row["attempt"]),
        status=AttemptStatus(row[status_column]), executor_type=row["executor_type"],
        lease_owner=row["worker_id"], lease_generation=int(row["lease_generation"]),
        lease_token_digest=row["lease_token_digest"],
        lease_expires_at_ms=None if expires is None else int(expires),
        pid=row["pid"], executor_handle=row["executor_handle"],
    )


def _flagged(fields: Mapping[str, object], names: tuple[str, ...]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in names:
        out["set_" + name] = name in fields
        out[name] = fields.get(name)
    return out


CANDIDATES_PER_SLOT = 4  # queued Runs looked at per free slot
CANDIDATES_MAX = 256


Plan = Callable[["LifecycleWriter", RunState, AttemptState, StepContext], Change]


class LifecycleWriter:
    def __init__(
        self,
        tx: Tx,
        *,
        shared: bool,
        actor: Actor,
        actor_id: str,
        new_id: Callable[[], str] = new_uuid,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        self._tx = tx
        self._shared = shared  # other processes take leases too: lock Runs in id order
        self._actor = actor
        self._actor_id = actor_id
        self._new_id = new_id
        self._jitter = jitter or _random_jitter

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
        """Write one planned step; the compare-and-set guards can only fail if a row moved
        under a lock we hold, which is a bug, so it raises Conflict (rolling back)."""
        ran = self._tx.execute("lifecycle_run_update", {
            "run_id": change.run_id, "expected_version": change.expected_run_version,
            "status": change.run_status.value, "event_count": len(change.events),
            **_flagged(change.run_fields, RUN_FIELDS),
        })
        if ran.rowcount != 1:
            raise Conflict(f"run {change.run_id} changed during a lifecycle step")
        attempted = self._tx.execute("lifecycle_attempt_update", {
            "run_id": change.run_id, "attempt_id": change.attempt_id,
            "expected_status": change.expected_attempt_status.value,
            "expected_generation": change.expected_generation,
            "status": change.attempt_status.value, "generation": change.generation,
            **_flagged(change.attempt_fields, ATTEMPT_FIELDS),
        })
        if attempted.rowcount != 1:
            raise Conflict(f"attempt {change.attempt_id} changed during a lifecycle step")
        if change.new_attempt is not None:
            self._tx.execute("attempt_insert", change.new_attempt)
        insert_events(self._tx, change.events)

    # -- fenced steps -------------------------------------------------------------------

    def fenced(self, fence: LeaseFence, write: str, plan: Plan,
               *, done: Callable[[AttemptState], bool] | None = None) -> StepOutcome:
        """Apply the step ``plan`` makes under ``fence``; a lost lease is recorded, not applied."""
        run, attempt = self.load(fence.run_id, fence.attempt_id)
        if done is not None and done(attempt):
            return StepOutcome.ALREADY_DONE
        ctx = self.context()
        try:
            change = plan(self, run, attempt, ctx)
        except LeaseLost:
            self.apply(lifecycle.late_callback(run, attempt, ctx, fence, write))
            return StepOutcome.REFUSED
        self.apply(change)
        return StepOutcome.APPLIED

    # -- leases -------------------------------------------------------------------------

    def retry_at(self, run: RunState, attempt: AttemptState, ending: Ending,
                 now_ms: int) -> int | None:
        """When the Run is tried again after ``ending`` (None: it is not), by the retry
        policy of the plan it pinned."""
        found = self._tx.one("run_plan_get",
                          {"run_id": run.id, "executor_type": attempt.executor_type})
        if found is None:
            return None
        try:
            plan = records.execution_revision(found).plan
        except RecordCorrupt:
            return None
        spent = run.attempts_spent + 1
        if not should_retry(plan.retry, idempotent=plan.idempotent, ending=ending, spent=spent,
                            cancel_requested=run.cancel_requested):
            return None
        return now_ms + plan.retry.delay_ms(spent, self._jitter())

    def acquire(self, *, owner: str, token: Callable[[], str], lease_ms: int, limit: int,
                executor_type: str) -> list[AttemptLease]:
        """Lease up to ``limit`` queued Runs, oldest first, as their trigger's overlap policy
        and the task and global limits allow; a Run that must wait stays queued."""
        # Look further than ``limit``: Runs that must wait (overlap, limits) are passed over,
        # so they never stall the Runs queued behind them.
        rows = self._tx.all("lease_candidates",
                         {"executor_type": executor_type,
                          "limit": min(CANDIDATES_MAX, limit * CANDIDATES_PER_SLOT)})
        if not rows:
            return []
        ctx = self.context()
        leases: list[AttemptLease] = []
        for row in rows:
            if len(leases) >= limit:
                break
            run = _run_from_candidate(row)
            attempt = attempt_state(row, id_column="attempt_id", status_column="attempt_status")
            if row["overlap_key"] is not None and OverlapDecision(
                    self._tx, apply=self.apply, locked=self._locked,
                    latest=self._latest).decide(row, run, attempt, ctx) is not OverlapVerdict.GO:
                continue
            execution, problem = self._execution(row, executor_type)
            if execution is not None and not self._has_capacity(row, execution.plan.concurrency):
                continue
            secret = token()
            change = lifecycle.acquire(run, attempt, ctx, owner=owner,
                                       token_digest_hex=lifecycle.token_digest(secret),
                                       lease_ms=lease_ms)
            self.apply(change)
            leases.append(AttemptLease(
                fence=LeaseFence(run_id=run.id, attempt_id=attempt.id,
                                 generation=change.generation, token=secret),
                attempt=attempt.attempt,
                project_id=row["project_id"], task_id=row["task_id"],
                trigger_id=row["trigger_id"],
                scheduled_for_ms=None if row["scheduled_for_ms"] is None
                else int(row["scheduled_for_ms"]),
                expires_at_ms=ctx.now_ms + lease_ms,
                execution=execution, problem=problem,
            ))
        return leases

    def _locked(self, key: str) -> bool:
        """Take the short lock that serialises one decision (a trigger's overlap, a task's or
        the global capacity) until COMMIT; False when another executor holds it now."""
        row = self._tx.one("concurrency_lock", {"key": key})
        return bool(row and row["locked"])

    def _latest(self, run_id: str) -> tuple[RunState, AttemptState] | None:
        """A Run (locked first) and its latest Attempt; None when either is missing."""
        run_row = self._tx.one("lifecycle_run_get", {"run_id": run_id})
        latest = self._tx.one("run_latest_attempt", {"run_id": run_id})
        if run_row is None or latest is None:
            return None
        return run_state(run_row), attempt_state(latest)

    def _has_capacity(self, row: Row, task_limit: int | None) -> bool:
        """Below the task's concurrency limit and the global one (counted from the Runs in
        progress, so nothing leaks when a lease expires)."""
        if task_limit is not None:
            if not self._locked(f"task:{row['project_id']}:{row['task_id']}"):
                return False
            active = self._tx.one("task_active_count",
                               {"project_id": row["project_id"], "task_id": row["task_id"]})
            if active is not None and int(active["active"]) >= task_limit:
                return False
        limits = self._tx.one("global_active_count", {})
        if limits is not None and limits["max_running"] is not None:
            if not self._locked("global"):
                return False
            limits = self._tx.one("global_active_count", {})
            assert limits is not None
            if int(limits["active"]) >= int(limits["max_running"]):
                return False
        return True

    def _execution(self, row: Row, executor_type: str) -> tuple[ExecutionRevision | None, str | None]:
        found = self._tx.one("task_execution_revision_get", {
            "project_id": row["project_id"], "task_id": row["task_id"],
            "task_revision": row["task_revision"], "executor_type": executor_type,
        })
        if found is None:
            return None, "the Run's execution revision is missing"
        try:
            return records.execution_revision(found), None
        except RecordCorrupt as exc:
            return None, exc.message

    def renew(self, *, owner: str, lease_ms: int, fences: tuple[LeaseFence, ...]) -> LeaseRenewal:
        held = json.dumps([{"attempt_id": f.attempt_id, "generation": f.generation,
                            "digest": f.digest} for f in fences])
        params: dict[str, Any] = {"owner": owner, "lease_ms": lease_ms, "fences": held,
                                  **self._tx.clock_args()}
        if self._shared:  # row locks across processes: the Runs first, in id order
            self._tx.all("lease_renew_lock", {"fences": held})
        rows = self._tx.all("lease_renew", params)
        renewed = {row["id"]: int(row["lease_expires_at_ms"]) for row in rows}
        run_ids = json.dumps(sorted({row["run_id"] for row in rows}))
        cancel = {row["id"] for row in self._tx.all("lease_cancel_requested",
                                                   {"run_ids": run_ids})}
        return LeaseRenewal(
            renewed=tuple(f for f in fences if f.attempt_id in renewed),
            lost=tuple(f for f in fences if f.attempt_id not in renewed),
            expires_at_ms=min(renewed.values(), default=None),
            cancel_requested=tuple(f for f in fences
                                   if f.attempt_id in renewed and f.run_id in cancel),
        )

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
        rescued = []
        reason = "lease_expired" if not ignore_expiry else "executor_restarted"
        for row in rows:
            run = _run_from_candidate(row)
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
            run = _run_from_candidate(row)
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
