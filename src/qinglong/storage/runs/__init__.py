"""The run store: Run reads, leases on Attempts and the fenced steps of the Run lifecycle,
written once over the kernel.

- ``lease_acquire``: lease up to ``limit`` queued Runs (oldest first) to ``owner``: Run
  queued -> dispatching, Attempt claimed with a new lease generation (or, with ``start``,
  already ``starting``: the holder spawns at once); returns each lease with its verified
  execution plan. Runs another executor is taking are skipped.
- ``lease_renew``: extend, in one statement, every lease of ``owner`` whose fence still
  holds; reports the ones that are lost and the Runs someone asked to cancel.
- ``attempt_start`` / ``attempt_running`` / ``attempt_finish``: the fenced steps (claimed
  -> starting before the spawn, -> running with the process, -> the outcome). A fence that
  no longer holds raises LeaseLost after ``attempt.late_callback_ignored`` is recorded; a
  finish that already landed with the same outcome is accepted again (idempotent).
- ``attempt_interrupt``: a draining executor stopped the command: the Run is queued again
  without spending an attempt.
- ``lease_release``: give back a lease whose command never started (the Run is queued
  again and no attempt is spent).
- ``lease_rescue``: the reconciler's verb: expired leases (by the store's clock, after
  ``grace_ms``) are withdrawn: unstarted Attempts are offered again, started ones are lost
  (their Run lost, retried if the task is idempotent, or cancelled if that was asked).
- ``retry_promote``: Runs whose retry wait is over are queued with a new Attempt.
- ``run_cancel``: a Run nobody runs is cancelled now (its new status is returned); one in
  progress is asked to stop (None), which its executor hears at once (a ``cancel``
  wake-up) or at its next renewal.
- ``attempt_list_active``: what is leased or started now.
- ``trigger_ledger_facts`` reads, in one snapshot, what decides the fate of a trigger's
  occurrences in ``[from_ms, to_ms]`` (LedgerFacts; `ql trigger ledger`).

Lifecycle steps run at READ COMMITTED on PostgreSQL (the Run row locked first, then its
Attempt; candidates taken with SKIP LOCKED so executors and reconcilers never wait for each
other) and in ``BEGIN IMMEDIATE`` on SQLite, where one process serves the file and leases
guard against that process's own restarts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TypeVar

# (not ``lifecycle``: importing the submodule storage.runs.lifecycle below binds that name
# in this package's namespace, which would shadow the domain module)
from qinglong.domain import lifecycle as steps
from qinglong.domain.lifecycle import (
    AttemptState,
    Change,
    LeaseFence,
    RunState,
    StepContext,
    check_attempt_lease,
)
from qinglong.domain.model import LedgerFacts, Run, RunDetail
from qinglong.domain.retry import Ending
from qinglong.domain.runs import Actor, AttemptStatus, RunStatus
from qinglong.domain.schedule import check_budget
from qinglong.domain.task import ExecutorType
from qinglong.errors import QinglongError
from qinglong.ids import new_uuid
from qinglong.storage.instances import live_offers
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.runs.granting import RevisionCache
from qinglong.storage.runs.lifecycle import (
    FencedStep,
    LifecycleWriter,
    Plan,
    StepOutcome,
    refused,
)
from qinglong.storage.runs.pages import PageReader
from qinglong.storage.runs.params import (
    ActiveAttempt,
    AttemptFinishParams,
    AttemptLease,
    AttemptRunningParams,
    LeaseAcquireParams,
    LeaseReleaseParams,
    LeaseRenewal,
    LeaseRenewParams,
    LeaseRescueParams,
    QueuePlacement,
    ReconcilePending,
    RescuedAttempt,
    RunBucket,
    RunBucketParams,
    RunListParams,
    RunPageParams,
)
from qinglong.storage.runs.reader import RunReader

T = TypeVar("T")


class RunStore:
    def __init__(self, db: Database, *, actor_id: str,
                 new_id: Callable[[], str] = new_uuid) -> None:
        self._db = db
        self._actor_id = actor_id
        self._new_id = new_id
        self._revisions = RevisionCache()  # verified execution revisions (immutable)
        self._executor_type = db.capabilities.executor_type.value
        # who runs the commands: a local executor, or remote workers
        self._runner = (Actor.EXECUTOR if db.capabilities.executor_type is ExecutorType.LOCAL_PROCESS
                        else Actor.WORKER)

    def acting_as(self, actor_id: str) -> RunStore:
        """The same store, recording its lifecycle events as ``actor_id`` (a user's cancel)."""
        return RunStore(self._db, actor_id=actor_id, new_id=self._new_id)

    # -- reads --------------------------------------------------------------------------

    def _read(self, action: str, work: Callable[[RunReader], T], *, snapshot: bool = False) -> T:
        return self._db.read(action, lambda tx: work(RunReader(tx)), snapshot=snapshot)

    def run_list(self, params: RunListParams) -> list[Run]:
        return self._read("list runs", lambda r: r.run_list(params))

    def run_get(self, run_id: str) -> RunDetail:
        return self._read("read run", lambda r: r.run_get(run_id))

    def resolve_run_id(self, run_id: str) -> str:
        return self._read("find run", lambda r: r.resolve_run_id(run_id))

    def trigger_ledger_facts(self, project_id: str, trigger_id: str, from_ms: int,
                             to_ms: int) -> LedgerFacts:
        def read(tx: Tx) -> LedgerFacts:
            return RunReader(tx).trigger_ledger_facts(project_id, trigger_id, from_ms, to_ms,
                                                      now_ms=tx.now_ms())

        return self._db.read("read the trigger ledger", read, snapshot=True)

    def run_page(self, params: RunPageParams) -> list[Run]:
        """One page of Runs in ``run_list``'s order, after a cursor that stays exact while
        new Runs arrive (the HTTP API); the same refusals as ``run_list``."""
        return self._db.read("list runs", lambda tx: PageReader(tx).run_page(params))

    def run_buckets(self, params: RunBucketParams) -> list[RunBucket]:
        """Counts of a project's Runs by task and time bucket (NotFound for an unknown
        project)."""
        return self._db.read("count runs", lambda tx: PageReader(tx).run_buckets(params))

    def queue_depth(self, cap: int) -> tuple[int, int | None, int]:
        """How many Runs are queued (counted up to ``cap``), when the oldest was queued, and
        the store's now to age it by (one statement, for /metrics)."""
        row = self._db.read("read the queue depth", lambda tx: tx.one(
            "metrics_queue", {"cap": cap, **tx.clock_args()}))
        assert row is not None
        oldest = row["oldest_ms"]
        return int(row["depth"]), None if oldest is None else int(oldest), int(row["now_ms"])

    def queue_placement(self, cap: int, groups: int, alive_ms: int) -> QueuePlacement:
        """The queued Runs that require labels by requirement set (the ``groups`` largest, of
        the first ``cap`` such Runs), and the labels of every executor seen within
        ``alive_ms`` and not stopped (for /metrics)."""
        def read(tx: Tx) -> QueuePlacement:
            now = tx.now_ms()
            rows = tx.all("metrics_queue_placement", {"cap": cap, "groups": groups})
            return QueuePlacement(
                groups=tuple((tuple(json.loads(r["requires"])), int(r["depth"]),
                              int(r["oldest_ms"])) for r in rows),
                offers=live_offers(tx, now, alive_ms), now_ms=now)

        return self._db.read("read the queue's placement", read)

    def attempt_list_active(self) -> list[ActiveAttempt]:
        rows = self._db.read("list active attempts", lambda tx: tx.all("attempt_list_active"))
        return [ActiveAttempt(run_id=r["run_id"], attempt_id=r["attempt_id"], status=r["status"],
                              worker=r["worker_id"], pid=r["pid"],
                              executor_handle=r["executor_handle"],
                              lease_expires_at_ms=r["lease_expires_at_ms"]) for r in rows]

    # -- the lifecycle ------------------------------------------------------------------

    def _step(self, action: str, work: Callable[[LifecycleWriter], T],
              actor: Actor | None = None) -> T:
        def run(tx: Tx) -> T:
            return work(LifecycleWriter(tx, shared=self._db.capabilities.shared,
                                        actor=actor or self._runner,
                                        actor_id=self._actor_id, new_id=self._new_id,
                                        revisions=self._revisions))

        return self._db.write(action, run, isolation="read committed")

    def lease_acquire(self, params: LeaseAcquireParams) -> list[AttemptLease]:
        check_attempt_lease(params.lease_ms)
        check_budget(params.limit, "limit")
        return self._step("lease runs", lambda w: w.acquire(
            owner=params.owner, token=new_uuid, lease_ms=params.lease_ms, limit=params.limit,
            executor_type=self._executor_type, label_tokens=params.label_tokens,
            start=params.start))

    def lease_renew(self, params: LeaseRenewParams) -> LeaseRenewal:
        check_attempt_lease(params.lease_ms)
        return self._step("renew leases", lambda w: w.renew(
            owner=params.owner, lease_ms=params.lease_ms, fences=params.fences))

    def lease_rescue(self, params: LeaseRescueParams) -> list[RescuedAttempt]:
        check_budget(params.limit, "limit")
        return self._step("rescue expired leases", lambda w: w.rescue(
            grace_ms=params.grace_ms, limit=params.limit, ignore_expiry=params.ignore_expiry,
            executor_type=self._executor_type, notes=params.notes,
            now_ms=w.context().now_ms), Actor.RECONCILER)

    def reconcile_pending(self, grace_ms: int) -> ReconcilePending:
        """One read without locks: whether ``lease_rescue`` or ``retry_promote`` could find
        anything now, and whether a flow run is past its timeout (the reconciler skips
        those steps, and their transactions, when not)."""
        row = self._db.read("look for expired leases, due retries and overdue flow runs",
                            lambda tx: tx.one("reconcile_pending", {
                                "grace_ms": grace_ms, "executor_type": self._executor_type,
                                **tx.clock_args()}))
        if row is None:
            return ReconcilePending(settle=True, flows_overdue=True)
        return ReconcilePending(settle=bool(row["pending"]),
                                flows_overdue=bool(row["flows_overdue"]))

    def retry_promote(self, limit: int) -> list[str]:
        check_budget(limit, "limit")
        return self._step("queue retries", lambda w: w.promote_due(
            limit=limit, now_ms=w.context().now_ms), Actor.RECONCILER)

    def run_cancel(self, run_id: str, reason: str = "user") -> RunStatus | None:
        full_id = self.resolve_run_id(run_id)

        def cancel(w: LifecycleWriter) -> RunStatus | None:
            status = w.cancel(full_id, reason)
            if status is None:  # in progress: its executor hears it at once
                w.wake_cancel(full_id)
            return status

        return self._step("cancel run", cancel, Actor.USER)

    # -- fenced steps -------------------------------------------------------------------

    def attempt_steps(self, steps: Sequence[FencedStep]) -> list[StepOutcome | QinglongError]:
        """Write fenced steps of distinct Runs (built by the ``*_step`` methods below) in
        one transaction: each checks its own fence against its own rows, and a refused one
        is recorded as ``attempt.late_callback_ignored``. One outcome per step, in order (the
        error of a step that may not be taken, which alone is not written): a worker batches
        what its commands report at the same moment (execution/step_batch.py)."""
        return self._step("record attempt steps", lambda w: w.fenced_all(steps))

    def _fenced(self, step: FencedStep) -> None:
        action = STEP_ACTIONS[step.write]
        outcome = self._step(action, lambda w: w.fenced(step.fence, step.write, step.plan,
                                                        done=step.done))
        if outcome is StepOutcome.REFUSED:
            raise refused(action, step.fence)

    @staticmethod
    def start_step(fence: LeaseFence) -> FencedStep:
        return FencedStep(fence=fence, write="start",
                          plan=lambda w, run, attempt, ctx: steps.start(run, attempt, ctx, fence),
                          done=lambda attempt: steps.already_started(attempt, fence))

    @staticmethod
    def running_step(params: AttemptRunningParams) -> FencedStep:
        return FencedStep(fence=params.fence, write="running",
                          plan=lambda w, run, attempt, ctx: steps.running(
                              run, attempt, ctx, params.fence, pid=params.pid,
                              executor_handle=params.executor_handle, log_path=params.log_path),
                          done=lambda attempt: steps.already_running(attempt, params.fence),
                          params=params)

    @staticmethod
    def finish_step(params: AttemptFinishParams) -> FencedStep:
        return FencedStep(fence=params.fence, write="finish", plan=_finish_plan(params),
                          done=lambda attempt: steps.already_finished(attempt, params.fence,
                                                                      params.outcome),
                          params=params)

    @staticmethod
    def ran_step(running: AttemptRunningParams, params: AttemptFinishParams, *,
                 ran_for_ms: int) -> FencedStep:
        """The running record and the ending as one write, for a command that ended before
        its running record was written (execution/step_batch.py folds them); ``ran_for_ms``:
        the time since its spawn. Sent again after a lost reply, it finds the Attempt
        finished (done) or still starting."""
        finish = _finish_plan(params)

        def plan(w: LifecycleWriter, run: RunState, attempt: AttemptState,
                 ctx: StepContext) -> Change:
            if attempt.status is AttemptStatus.RUNNING:  # the running record landed after all
                return finish(w, run, attempt, ctx)
            return steps.ran(run, attempt, ctx, running.fence, pid=running.pid,
                             executor_handle=running.executor_handle,
                             log_path=running.log_path, ran_for_ms=ran_for_ms,
                             finish_with=lambda r, a: finish(w, r, a, ctx))

        return FencedStep(fence=params.fence, write="ran", plan=plan,
                          done=lambda attempt: steps.already_finished(attempt, params.fence,
                                                                      params.outcome),
                          params=params)

    def attempt_start(self, fence: LeaseFence) -> None:
        self._fenced(self.start_step(fence))

    def attempt_running(self, params: AttemptRunningParams) -> None:
        self._fenced(self.running_step(params))

    def attempt_finish(self, params: AttemptFinishParams) -> None:
        self._fenced(self.finish_step(params))

    def attempt_interrupt(self, fence: LeaseFence, reason: str) -> None:
        """A draining executor stopped the command: queue the Run again, no attempt spent."""
        self._fenced(FencedStep(
            fence=fence, write="interrupt",
            plan=lambda w, run, attempt, ctx: steps.interrupt(run, attempt, ctx, fence,
                                                              reason=reason),
            done=lambda attempt: steps.already_interrupted(attempt, fence)))

    def lease_release(self, params: LeaseReleaseParams) -> None:
        self._fenced(FencedStep(
            fence=params.fence, write="release",
            plan=lambda w, run, attempt, ctx: steps.release(run, attempt, ctx,
                                                            reason=params.reason,
                                                            fence=params.fence),
            done=lambda attempt: steps.already_released(attempt, params.fence)))


def _finish_plan(params: AttemptFinishParams) -> Plan:
    """The ending ``params`` reports, with the retry its Run's pinned policy decides."""
    outcome = params.outcome

    def plan(w: LifecycleWriter, run: RunState, attempt: AttemptState,
             ctx: StepContext) -> Change:
        retry_at = w.retry_at(run, attempt, Ending(
            status=outcome.status, exit_code=outcome.exit_code,
            error_code=outcome.error_code), ctx.now_ms) if attempt.holds(params.fence) else None
        return steps.finish(run, attempt, ctx, params.fence, outcome, retry_at_ms=retry_at)

    return plan


# What each fenced step is called in an error (a refusal names it).
STEP_ACTIONS = {"start": "start attempt", "running": "record running attempt",
                "finish": "finish attempt", "ran": "record running and finished attempt",
                "interrupt": "interrupt attempt", "release": "release lease"}
