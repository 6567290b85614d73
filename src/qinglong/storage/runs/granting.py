"""Granting and renewing leases on Attempts, inside a lifecycle transaction of the run store
(`LifecycleWriter` is a `LeaseGranting`): the candidates a lease may take, the overlap and
concurrency checks, the verified execution plan each lease carries, and renewal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from qinglong.domain import lifecycle
from qinglong.domain.lifecycle import (
    AttemptState,
    Change,
    LeaseFence,
    RunState,
    StepContext,
)
from qinglong.domain.project_env import LeasedEnvironment
from qinglong.domain.task import ExecutionRevision
from qinglong.errors import RecordCorrupt
from qinglong.storage import records
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Tx
from qinglong.storage.project_env import leased_environment, record_leased
from qinglong.storage.runs.overlap import OverlapDecision, OverlapVerdict
from qinglong.storage.runs.params import AttemptLease, LeaseRenewal
from qinglong.storage.runs.rows import attempt_state, run_from_candidate, run_state

CANDIDATES_PER_SLOT = 4  # queued Runs looked at per free slot
CANDIDATES_MAX = 256


class RevisionCache:
    """Verified execution revisions by (project, task, task revision, executor type): a
    published revision is immutable (its digest is pinned by every Run of it), so one store
    verifies each once. Bounded: it is emptied when full."""

    LIMIT = 1024

    def __init__(self) -> None:
        self._found: dict[tuple[str, str, str, str], ExecutionRevision] = {}

    def get(self, key: tuple[str, str, str, str]) -> ExecutionRevision | None:
        return self._found.get(key)

    def put(self, key: tuple[str, str, str, str], revision: ExecutionRevision) -> None:
        if len(self._found) >= self.LIMIT:
            self._found.clear()
        self._found[key] = revision


class LeaseGranting:
    """The lease steps of `LifecycleWriter` (storage/runs/lifecycle.py)."""

    if TYPE_CHECKING:  # provided by LifecycleWriter
        _tx: Tx
        _revisions: RevisionCache
        _shared: bool

        def apply(self, change: Change) -> None: ...

        def apply_all(self, changes: Sequence[Change]) -> None: ...

        def context(self, now_ms: int | None = None) -> StepContext: ...

    def acquire(self, *, owner: str, token: Callable[[], str], lease_ms: int, limit: int,
                executor_type: str, label_tokens: Sequence[str] = (),
                start: bool = False) -> list[AttemptLease]:
        """Lease up to ``limit`` queued Runs, oldest first, as their trigger's overlap policy
        and the task and global limits allow; a Run that must wait stays queued. Only Runs
        whose required labels are among ``label_tokens`` are looked at (the statement
        passes over the others, so they are neither locked nor counted). With ``start``,
        each lease is granted ``starting`` (domain/lifecycle.acquire)."""
        # Look further than ``limit``: Runs that must wait (overlap, limits) are passed over,
        # so they never stall the Runs queued behind them.
        rows = self._tx.all("lease_candidates",
                         {"executor_type": executor_type,
                          "labels": json.dumps(sorted(label_tokens)),
                          "limit": min(CANDIDATES_MAX, limit * CANDIDATES_PER_SLOT),
                          **self._tx.clock_args()})
        if not rows:
            return []
        ctx = self.context(int(rows[0]["now_ms"]))
        leases: list[AttemptLease] = []
        pending: list[Change] = []  # written together, or before a decision that counts them
        limited = rows[0]["global_max_running"] is not None  # counted only when one is set
        environments: dict[str, LeasedEnvironment | None] = {}  # by project, read once
        for row in rows:
            if len(leases) >= limit:
                break
            run = run_from_candidate(row)
            attempt = attempt_state(row, id_column="attempt_id", status_column="attempt_status")
            execution, problem = self._execution(row, executor_type)
            task_limit = None if execution is None else execution.plan.concurrency
            if row["overlap_key"] is not None or limited or task_limit is not None:
                self.apply_all(pending)  # what this call leased so far counts as running
                pending = []
            if row["overlap_key"] is not None and OverlapDecision(
                    self._tx, apply=self.apply, locked=self._locked,
                    latest=self._latest).decide(row, run, attempt, ctx) is not OverlapVerdict.GO:
                continue
            if execution is not None and (limited or task_limit is not None) and \
                    not self._has_capacity(row, task_limit):
                continue
            secret = token()
            change = lifecycle.acquire(run, attempt, ctx, owner=owner,
                                       token_digest_hex=lifecycle.token_digest(secret),
                                       lease_ms=lease_ms, start=start)
            pending.append(change)
            project = row["project_id"]
            if project not in environments:
                environments[project] = leased_environment(self._tx, project)
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
                parameters=json.loads(row["parameters"]) if row["parameters"] else {},
                environment=environments[project], started=start,
            ))
        self.apply_all(pending)
        for lease in leases:  # which environment revision each Attempt runs with
            if lease.environment is not None:
                record_leased(self._tx, lease.fence.attempt_id, lease.environment)
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
        limits = self._tx.one("global_limit_get", {})
        if limits is not None and limits["max_running"] is not None:
            if not self._locked("global"):
                return False
            limits = self._tx.one("global_active_count", {})
            assert limits is not None
            if limits["max_running"] is not None and \
                    int(limits["active"]) >= int(limits["max_running"]):
                return False
        return True

    def _execution(self, row: Row, executor_type: str) -> tuple[ExecutionRevision | None, str | None]:
        return self._revision(row["project_id"], row["task_id"], row["task_revision"],
                              executor_type)

    def _revision(self, project_id: str, task_id: str, task_revision: str,
                  executor_type: str) -> tuple[ExecutionRevision | None, str | None]:
        """The verified execution revision a Run pinned (None and why when it is missing or
        fails verification). A revision never changes once published, so a verified one is
        read once per store (`RevisionCache`)."""
        key = (project_id, task_id, task_revision, executor_type)
        cached = self._revisions.get(key)
        if cached is not None:
            return cached, None
        found = self._tx.one("task_execution_revision_get", {
            "project_id": project_id, "task_id": task_id, "task_revision": task_revision,
            "executor_type": executor_type,
        })
        if found is None:
            return None, "the Run's execution revision is missing"
        try:
            revision = records.execution_revision(found)
        except RecordCorrupt as exc:
            return None, exc.message
        self._revisions.put(key, revision)
        return revision, None

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
