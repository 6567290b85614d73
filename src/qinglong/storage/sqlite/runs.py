"""SQLite Run reads and the local executor's fenced state transitions."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Mapping

from qinglong.clock import Clock
from qinglong.domain.model import Run, RunDetail
from qinglong.domain.runs import ACTOR_EXECUTOR, ACTOR_RECONCILER, AttemptStatus, RunStatus
from qinglong.domain.task import ExecutionRevision, ExecutorType
from qinglong.errors import Conflict, InvalidInput, NotFound, RecordCorrupt
from qinglong.storage import records
from qinglong.storage.ports import (
    AttemptFinishParams,
    AttemptStartedParams,
    InterruptedAttempt,
    QueuedRun,
    ReconciledAttempt,
    RunListParams,
)
from qinglong.storage.run_reader import RunReader
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase

_FINISH_STATUSES = {"succeeded", "failed", "timed_out", "cancelled"}

_RUN_STEP_DEFAULTS: dict[str, object] = {
    "started_at_ms": None,
    "finished_at_ms": None,
    "cancel_requested_at_ms": None,
    "cancel_reason": None,
    "error_code": None,
    "error_summary": None,
}
_ATTEMPT_STEP_DEFAULTS: dict[str, object] = {
    "pid": None,
    "executor_handle": None,
    "log_path": None,
    "started_at_ms": None,
    "finished_at_ms": None,
    "exit_code": None,
    "error_code": None,
    "error_summary": None,
}


class SqliteRunStore:
    """RunReadStore and LocalExecutionStore on SQLite."""

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
        self._new_id = new_id or (lambda: str(uuid.uuid4()))
        self._actor_id = actor_id

    # -- reads ------------------------------------------------------------------------

    def run_list(self, params: RunListParams) -> list[Run]:
        with self._db.read("list runs") as conn:
            return RunReader(conn, QUERIES).run_list(params)

    def run_get(self, run_id: str) -> RunDetail:
        with self._db.read("read run") as conn:
            return RunReader(conn, QUERIES).run_get(run_id)

    # -- executor ---------------------------------------------------------------------

    def run_list_queued(self, limit: int) -> list[QueuedRun]:
        with self._db.read("list queued runs") as conn:
            rows = conn.execute(QUERIES["run_list_queued"], {"limit": limit}).fetchall()
            queued = []
            for row in rows:
                execution = None
                problem = None
                try:
                    execution = self._execution(conn, row)
                except RecordCorrupt as exc:
                    problem = exc.message
                queued.append(
                    QueuedRun(
                        run_id=row["run_id"],
                        attempt_id=row["attempt_id"],
                        project_id=row["project_id"],
                        task_id=row["task_id"],
                        trigger_id=row["trigger_id"],
                        scheduled_for_ms=row["scheduled_for_ms"],
                        execution=execution,
                        problem=problem,
                    )
                )
        return queued

    def _execution(self, conn: sqlite3.Connection, row: Mapping[str, object]) -> ExecutionRevision:
        if row["executor_type"] != ExecutorType.LOCAL_PROCESS.value:
            raise RecordCorrupt("the Run's attempt is not a local_process attempt")
        found = conn.execute(
            QUERIES["task_execution_revision_get"],
            {
                "project_id": row["project_id"],
                "task_id": row["task_id"],
                "task_revision": row["task_revision"],
                "executor_type": ExecutorType.LOCAL_PROCESS.value,
            },
        ).fetchone()
        if found is None:
            raise RecordCorrupt("the Run's execution revision is missing")
        return records.execution_revision(found)

    def attempt_begin(self, run_id: str, attempt_id: str) -> bool:
        """queued -> dispatching and claimed -> starting; False if the Run is no longer queued."""
        now = self._clock.now_ms()
        with self._db.write("start attempt") as conn:
            if not self._run_step(conn, run_id, RunStatus.QUEUED, RunStatus.DISPATCHING):
                return False
            self._attempt_step(conn, run_id, attempt_id, AttemptStatus.CLAIMED, AttemptStatus.STARTING)
            self._event(conn, run_id, "attempt.starting", attempt_id, {"attempt": 1}, now)
            self._event(
                conn, run_id, "run.dispatching", attempt_id,
                {"from_status": "queued", "to_status": "dispatching"}, now,
            )
        return True

    def attempt_started(self, params: AttemptStartedParams) -> None:
        now = self._clock.now_ms()
        with self._db.write("record running attempt") as conn:
            self._attempt_step(
                conn, params.run_id, params.attempt_id, AttemptStatus.STARTING, AttemptStatus.RUNNING,
                pid=params.pid, executor_handle=params.executor_handle, log_path=params.log_path,
                started_at_ms=now,
            )
            if not self._run_step(
                conn, params.run_id, RunStatus.DISPATCHING, RunStatus.RUNNING, started_at_ms=now
            ):
                raise Conflict(f"run {params.run_id} is no longer dispatching")
            self._event(conn, params.run_id, "attempt.running", params.attempt_id, {"pid": params.pid}, now)
            self._event(
                conn, params.run_id, "run.running", params.attempt_id,
                {"from_status": "dispatching", "to_status": "running"}, now,
            )

    def attempt_finish(self, params: AttemptFinishParams) -> None:
        if params.status not in _FINISH_STATUSES:
            raise InvalidInput("status", f"must be one of {sorted(_FINISH_STATUSES)}")
        now = self._clock.now_ms()
        with self._db.write("finish attempt") as conn:
            attempts = conn.execute(QUERIES["attempt_list_for_run"], {"run_id": params.run_id}).fetchall()
            attempt = next((a for a in attempts if a["id"] == params.attempt_id), None)
            if attempt is None:
                raise NotFound("attempt", params.attempt_id)
            source = AttemptStatus(attempt["status"])
            run_source = RunStatus.RUNNING if source is AttemptStatus.RUNNING else RunStatus.DISPATCHING
            self._attempt_step(
                conn, params.run_id, params.attempt_id, source, AttemptStatus(params.status),
                finished_at_ms=now, exit_code=params.exit_code, error_code=params.error_code,
                error_summary=params.error_summary,
            )
            if not self._run_step(
                conn, params.run_id, run_source, RunStatus(params.status),
                finished_at_ms=now, error_code=params.error_code, error_summary=params.error_summary,
                cancel_reason=params.cancel_reason,
                cancel_requested_at_ms=now if params.cancel_reason else None,
            ):
                raise Conflict(f"run {params.run_id} changed while its attempt finished")
            payload: dict[str, object] = {"exit_code": params.exit_code}
            if params.error_code:
                payload["error_code"] = params.error_code
            self._event(conn, params.run_id, f"attempt.{params.status}", params.attempt_id, payload, now)
            self._event(
                conn, params.run_id, f"run.{params.status}", params.attempt_id,
                {"from_status": run_source.value, "to_status": params.status, **payload}, now,
            )

    def attempt_reconcile_interrupted(
        self, settle: Callable[[InterruptedAttempt], str]
    ) -> list[ReconciledAttempt]:
        """Mark Attempts a crashed executor left behind as lost, each with visible events."""
        with self._db.read("list interrupted attempts") as conn:
            rows = conn.execute(QUERIES["attempt_list_interrupted"]).fetchall()
        reconciled = []
        for row in rows:
            interrupted = InterruptedAttempt(
                run_id=row["run_id"],
                attempt_id=row["attempt_id"],
                status=row["status"],
                pid=row["pid"],
                executor_handle=row["executor_handle"],
            )
            process = settle(interrupted)
            now = self._clock.now_ms()
            source = AttemptStatus(interrupted.status)
            run_source = RunStatus.RUNNING if source is AttemptStatus.RUNNING else RunStatus.DISPATCHING
            payload = {"reason": "executor_restarted", "process": process, "pid": interrupted.pid}
            with self._db.write("reconcile interrupted attempt") as conn:
                self._attempt_step(
                    conn, interrupted.run_id, interrupted.attempt_id, source, AttemptStatus.LOST,
                    finished_at_ms=now, error_code="EXECUTOR_RESTARTED",
                    error_summary="the executor stopped while this attempt was " + source.value,
                )
                if not self._run_step(
                    conn, interrupted.run_id, run_source, RunStatus.LOST,
                    error_code="EXECUTOR_RESTARTED",
                    error_summary="the executor stopped while the run was " + run_source.value,
                ):
                    raise Conflict(f"run {interrupted.run_id} is not {run_source.value}")
                self._event(
                    conn, interrupted.run_id, "attempt.lost", interrupted.attempt_id, payload, now,
                    actor=ACTOR_RECONCILER,
                )
                self._event(
                    conn, interrupted.run_id, "run.lost", interrupted.attempt_id,
                    {"from_status": run_source.value, "to_status": "lost", **payload}, now,
                    actor=ACTOR_RECONCILER,
                )
            reconciled.append(
                ReconciledAttempt(
                    run_id=interrupted.run_id,
                    attempt_id=interrupted.attempt_id,
                    previous_status=interrupted.status,
                    process=process,
                )
            )
        return reconciled

    # -- helpers ----------------------------------------------------------------------

    def _run_step(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        source: RunStatus,
        target: RunStatus,
        **fields: object,
    ) -> bool:
        params = {**_RUN_STEP_DEFAULTS, **fields}
        row = conn.execute(
            QUERIES["run_step"],
            {**params, "run_id": run_id, "from_status": source.value, "to_status": target.value},
        ).fetchone()
        return row is not None

    def _attempt_step(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        attempt_id: str,
        source: AttemptStatus,
        target: AttemptStatus,
        **fields: object,
    ) -> None:
        params = {**_ATTEMPT_STEP_DEFAULTS, **fields}
        changed = conn.execute(
            QUERIES["attempt_step"],
            {
                **params,
                "run_id": run_id,
                "attempt_id": attempt_id,
                "from_status": source.value,
                "to_status": target.value,
            },
        )
        if changed.rowcount != 1:
            raise Conflict(f"attempt {attempt_id} is not {source.value}")

    def _event(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        event_type: str,
        attempt_id: str | None,
        payload: Mapping[str, object],
        now: int,
        *,
        actor: str = ACTOR_EXECUTOR,
    ) -> None:
        sequence = conn.execute(QUERIES["run_next_event_sequence"], {"run_id": run_id}).fetchone()
        conn.execute(
            QUERIES["event_insert"],
            {
                "id": self._new_id(),
                "run_id": run_id,
                "sequence": sequence["event_sequence"],
                "type": event_type,
                "dedupe_key": None,
                "actor_type": actor,
                "actor_id": self._actor_id,
                "attempt_id": attempt_id,
                "payload": records.payload_text(payload),
                "created_at_ms": now,
            },
        )
