"""SQLite Run reads and the Run lifecycle (attempt leases on the node clock).

One process serves a SQLite database (`ql serve` holds a lock on the file), so leases here
guard against that process's own restarts: every write is still fenced, and a restarted
server rescues what the previous one left with ``ignore_expiry``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from qinglong.clock import Clock
from qinglong.domain import lifecycle
from qinglong.domain.lifecycle import LeaseFence, check_attempt_lease
from qinglong.domain.model import LedgerFacts, Run, RunDetail
from qinglong.domain.runs import Actor, RunStatus
from qinglong.domain.schedule import check_budget
from qinglong.domain.task import ExecutorType
from qinglong.ids import new_uuid
from qinglong.storage.dbapi import fetch_all
from qinglong.storage.lifecycle_writer import (
    FencedSteps,
    LifecycleWriter,
    StepOutcome,
    refused,
)
from qinglong.storage.ports import (
    ActiveAttempt,
    AttemptLease,
    LeaseAcquireParams,
    LeaseRenewal,
    LeaseRenewParams,
    LeaseRescueParams,
    RescuedAttempt,
    RunListParams,
)
from qinglong.storage.run_reader import RunReader
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase

EXECUTOR_TYPE = ExecutorType.LOCAL_PROCESS.value


class SqliteRunStore(FencedSteps):
    """RunReadStore and RunLifecycleStore on SQLite."""

    def __init__(
        self,
        db: SqliteDatabase,
        clock: Clock,
        *,
        new_id: Callable[[], str] | None = None,
        actor_id: str = "standalone",
    ) -> None:
        self._db = db
        self._clock = clock
        self._new_id = new_id or new_uuid
        self._actor_id = actor_id

    # -- reads ------------------------------------------------------------------------

    def run_list(self, params: RunListParams) -> list[Run]:
        with self._db.read("list runs") as conn:
            return RunReader(conn, QUERIES).run_list(params)

    def run_get(self, run_id: str) -> RunDetail:
        with self._db.read("read run") as conn:
            return RunReader(conn, QUERIES).run_get(run_id)

    def trigger_ledger_facts(self, project_id: str, trigger_id: str, from_ms: int,
                             to_ms: int) -> LedgerFacts:
        with self._db.read("read the trigger ledger") as conn:
            return RunReader(conn, QUERIES).trigger_ledger_facts(
                project_id, trigger_id, from_ms, to_ms, now_ms=self._clock.now_ms())

    # -- lifecycle --------------------------------------------------------------------

    def _writer(self, conn: sqlite3.Connection, actor: Actor = Actor.EXECUTOR) -> LifecycleWriter:
        return LifecycleWriter(conn, QUERIES, now_ms=self._clock.now_ms, actor=actor,
                               actor_id=self._actor_id, new_id=self._new_id)

    def lease_acquire(self, params: LeaseAcquireParams) -> list[AttemptLease]:
        check_attempt_lease(params.lease_ms)
        check_budget(params.limit, "limit")
        with self._db.write("lease runs") as conn:
            return self._writer(conn).acquire(owner=params.owner, token=new_uuid,
                                              lease_ms=params.lease_ms, limit=params.limit,
                                              executor_type=EXECUTOR_TYPE)

    def lease_renew(self, params: LeaseRenewParams) -> LeaseRenewal:
        check_attempt_lease(params.lease_ms)
        with self._db.write("renew leases") as conn:
            return self._writer(conn).renew(owner=params.owner, lease_ms=params.lease_ms,
                                            fences=params.fences, now_ms=self._clock.now_ms())

    def _fenced(self, fence: LeaseFence, write: str, action: str,
                plan: Callable[..., lifecycle.Change],
                done: Callable[[lifecycle.AttemptState], bool] | None = None) -> None:
        with self._db.write(action) as conn:
            outcome = self._writer(conn).fenced(fence, write, plan, done=done)
        if outcome is StepOutcome.REFUSED:
            raise refused(action, fence)

    def lease_rescue(self, params: LeaseRescueParams) -> list[RescuedAttempt]:
        check_budget(params.limit, "limit")
        with self._db.write("rescue expired leases") as conn:
            return self._writer(conn, Actor.RECONCILER).rescue(
                grace_ms=params.grace_ms, limit=params.limit, ignore_expiry=params.ignore_expiry,
                executor_type=None, notes=params.notes, now_ms=self._clock.now_ms())

    def reconcile_pending(self, grace_ms: int) -> bool:
        """Whether ``lease_rescue`` or ``retry_promote`` could find anything now."""
        with self._db.read("look for expired leases and due retries") as conn:
            row = conn.execute(QUERIES["reconcile_pending"],
                               {"grace_ms": grace_ms, "now_ms": self._clock.now_ms()}).fetchone()
        return bool(row is None or row["pending"])

    def retry_promote(self, limit: int) -> list[str]:
        check_budget(limit, "limit")
        with self._db.write("queue retries") as conn:
            return self._writer(conn, Actor.RECONCILER).promote_due(
                limit=limit, now_ms=self._clock.now_ms())

    def run_cancel(self, run_id: str, reason: str = "user") -> RunStatus | None:
        with self._db.read("find run") as conn:
            full_id = RunReader(conn, QUERIES).resolve_run_id(run_id)
        with self._db.write("cancel run") as conn:
            return self._writer(conn, Actor.USER).cancel(full_id, reason)

    def attempt_list_active(self) -> list[ActiveAttempt]:
        with self._db.read("list active attempts") as conn:
            rows = fetch_all(conn, QUERIES["attempt_list_active"])
        return [ActiveAttempt(run_id=r["run_id"], attempt_id=r["attempt_id"], status=r["status"],
                              worker=r["worker_id"], pid=r["pid"],
                              executor_handle=r["executor_handle"],
                              lease_expires_at_ms=r["lease_expires_at_ms"]) for r in rows]
