"""PostgreSQL Run reads and the Run lifecycle (attempt leases on the database clock).

Lifecycle steps run at READ COMMITTED: the Run row is locked first (it is the mutex of its
lifecycle), then its Attempt; every time a step stamps or compares comes from the database
clock, read after those locks. Candidate Runs are taken with SKIP LOCKED, so executors and
reconcilers never wait for each other. A fenced write whose lease is gone commits its
``attempt.late_callback_ignored`` record and then raises LeaseLost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import psycopg

from qinglong.domain import lifecycle
from qinglong.domain.lifecycle import LeaseFence, check_attempt_lease
from qinglong.domain.model import LedgerFacts, Run, RunDetail
from qinglong.domain.runs import Actor, RunStatus
from qinglong.domain.schedule import check_budget
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
from qinglong.storage.postgres.connection import (
    QUERIES,
    Connector,
    PgConnection,
    rollback_quietly,
)
from qinglong.storage.postgres.errors import translate
from qinglong.storage.postgres.transactions import db_now_ms, serializable
from qinglong.storage.run_reader import RunReader

T = TypeVar("T")


class PgRunStore(FencedSteps):
    """RunReadStore and RunLifecycleStore on PostgreSQL."""

    def __init__(self, connector: Connector, *, actor_id: str = "cluster",
                 executor_type: str = "remote_worker",
                 new_id: Callable[[], str] = new_uuid) -> None:
        self._connector = connector
        self._actor_id = actor_id
        self._executor_type = executor_type
        self._new_id = new_id

    # -- reads ------------------------------------------------------------------------

    def _read(self, action: str, work: Callable[[PgConnection], T]) -> T:
        with self._connector.connection() as conn:
            try:
                return work(conn)
            except psycopg.Error as exc:
                raise translate(exc, action, conn) from exc

    def run_list(self, params: RunListParams) -> list[Run]:
        return self._read("list runs", lambda conn: RunReader(conn, QUERIES).run_list(params))

    def run_get(self, run_id: str) -> RunDetail:
        return self._read("read run", lambda conn: RunReader(conn, QUERIES).run_get(run_id))

    def trigger_ledger_facts(self, project_id: str, trigger_id: str, from_ms: int,
                             to_ms: int) -> LedgerFacts:
        def read(conn: PgConnection) -> LedgerFacts:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")  # one snapshot
            try:
                facts = RunReader(conn, QUERIES).trigger_ledger_facts(
                    project_id, trigger_id, from_ms, to_ms, now_ms=db_now_ms(conn))
            except BaseException:
                rollback_quietly(conn)
                raise
            conn.execute("COMMIT")
            return facts

        return self._read("read the trigger ledger", read)

    # -- lifecycle --------------------------------------------------------------------

    def _step(self, action: str, work: Callable[[LifecycleWriter], T],
              actor: Actor = Actor.WORKER) -> T:
        def run(conn: PgConnection) -> T:
            writer = LifecycleWriter(conn, QUERIES, now_ms=lambda: db_now_ms(conn), actor=actor,
                                     actor_id=self._actor_id, new_id=self._new_id)
            return work(writer)

        return serializable(self._connector, action, run, isolation="read committed")

    def lease_acquire(self, params: LeaseAcquireParams) -> list[AttemptLease]:
        check_attempt_lease(params.lease_ms)
        check_budget(params.limit, "limit")
        return self._step("lease runs", lambda w: w.acquire(
            owner=params.owner, token=new_uuid, lease_ms=params.lease_ms, limit=params.limit,
            executor_type=self._executor_type))

    def lease_renew(self, params: LeaseRenewParams) -> LeaseRenewal:
        check_attempt_lease(params.lease_ms)
        return self._step("renew leases", lambda w: w.renew(
            owner=params.owner, lease_ms=params.lease_ms, fences=params.fences))

    def _fenced(self, fence: LeaseFence, write: str, action: str,
                plan: Callable[..., lifecycle.Change],
                done: Callable[[lifecycle.AttemptState], bool] | None = None) -> None:
        outcome = self._step(action, lambda w: w.fenced(fence, write, plan, done=done))
        if outcome is StepOutcome.REFUSED:
            raise refused(action, fence)

    def lease_rescue(self, params: LeaseRescueParams) -> list[RescuedAttempt]:
        check_budget(params.limit, "limit")

        def rescue(writer: LifecycleWriter) -> list[RescuedAttempt]:
            return writer.rescue(grace_ms=params.grace_ms, limit=params.limit,
                                 ignore_expiry=params.ignore_expiry,
                                 executor_type=self._executor_type, notes=params.notes,
                                 now_ms=writer.context().now_ms)

        return self._step("rescue expired leases", rescue, Actor.RECONCILER)

    def reconcile_pending(self, grace_ms: int) -> bool:
        """One read without locks: whether ``lease_rescue`` or ``retry_promote`` could find
        anything now (the reconciler skips both, and their transactions, when not)."""
        row = self._read("look for expired leases and due retries", lambda conn: conn.execute(
            QUERIES["reconcile_pending"],
            {"grace_ms": grace_ms, "executor_type": self._executor_type}).fetchone())
        return bool(row is None or row["pending"])

    def retry_promote(self, limit: int) -> list[str]:
        check_budget(limit, "limit")
        return self._step("queue retries", lambda w: w.promote_due(
            limit=limit, now_ms=w.context().now_ms), Actor.RECONCILER)

    def run_cancel(self, run_id: str, reason: str = "user") -> RunStatus | None:
        full_id = self._read("find run", lambda conn: RunReader(conn, QUERIES).resolve_run_id(run_id))
        status = self._step("cancel run", lambda w: w.cancel(full_id, reason), Actor.USER)
        self._read("notify cancel", lambda conn: conn.execute(QUERIES["notify_cancel"],
                                                             {"run_id": full_id}))
        return status

    def attempt_list_active(self) -> list[ActiveAttempt]:
        rows = self._read("list active attempts",
                          lambda conn: fetch_all(conn, QUERIES["attempt_list_active"]))
        return [ActiveAttempt(run_id=r["run_id"], attempt_id=r["attempt_id"], status=r["status"],
                              worker=r["worker_id"], pid=r["pid"],
                              executor_handle=r["executor_handle"],
                              lease_expires_at_ms=r["lease_expires_at_ms"]) for r in rows]


def corrupt_runs(conn: PgConnection, limit: int = 16) -> list[str]:
    """Findings for Runs in a shape no lifecycle step can produce (they block activation)."""
    try:
        rows = fetch_all(conn, QUERIES["lifecycle_corrupt"], {"limit": limit})
    except psycopg.Error as exc:
        raise translate(exc, "check run shapes", conn) from exc
    return [f"run-corrupt:{row['run_id']}:{row['status']}:{row['problem']}" for row in rows]
