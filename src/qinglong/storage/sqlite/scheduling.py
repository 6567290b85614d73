"""SQLite scheduling: list due rows, then admit or advance each in one BEGIN IMMEDIATE tx."""

from __future__ import annotations

import sqlite3

from qinglong.clock import Clock
from qinglong.domain.admission import admission_rows
from qinglong.domain.admission_jitter import with_jittered_instant
from qinglong.domain.decision import PAUSED_FATE, Disposition
from qinglong.domain.occurrences import DONE_CURSOR_MS, cursor_for_storage
from qinglong.domain.schedule import ScheduleCandidate
from qinglong.domain.task import ExecutionRevision, ExecutorType, execution_task_revision
from qinglong.errors import Conflict, RecordCorrupt, StorageError
from qinglong.storage import records
from qinglong.storage.lifecycle_writer import insert_admission
from qinglong.storage.ports import (
    CommitOutcome,
    CommitResult,
    CorruptScheduleRow,
    ScheduleCommitParams,
    ScheduleListDueParams,
)
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase

ACTOR_ID = "standalone"


class _Raced(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SqliteScheduleStore:
    """The LocalScheduleStore port on SQLite."""

    def __init__(self, db: SqliteDatabase, clock: Clock, *, actor_id: str = ACTOR_ID) -> None:
        self._db = db
        self._clock = clock
        self._actor_id = actor_id

    def schedule_list_due(
        self, params: ScheduleListDueParams
    ) -> list[ScheduleCandidate | CorruptScheduleRow]:
        with self._db.read("list due schedules") as conn:
            rows = conn.execute(
                QUERIES["schedule_list_due"], {"now_ms": params.now_ms, "limit": params.limit}
            ).fetchall()
        return [records.candidate_or_corrupt(row) for row in rows]

    def schedule_next_due_at(self, after_ms: int) -> int | None:
        with self._db.read("read next due time") as conn:
            row = conn.execute(QUERIES["schedule_next_due_at"],
                               {"after_ms": after_ms, "done_cursor_ms": DONE_CURSOR_MS}).fetchone()
        value = row["next_due_at_ms"]
        return None if value is None else int(value)

    def schedule_commit(self, params: ScheduleCommitParams) -> CommitResult:
        decision = params.decision
        try:
            with self._db.write("admit occurrence") as conn:
                result = self._commit(conn, params)
        except _Raced as raced:
            return CommitResult(
                outcome=CommitOutcome.RACED, disposition=decision.disposition, reason=raced.reason
            )
        except Conflict as exc:  # a constraint refused the admission: nothing was written
            raise StorageError(f"admission refused by a database constraint ({exc.message})") from exc
        return result

    def _commit(self, conn: sqlite3.Connection, params: ScheduleCommitParams) -> CommitResult:
        candidate, decision = params.candidate, params.decision
        key = {"project_id": candidate.project_id, "trigger_id": candidate.trigger_id}
        row = conn.execute(QUERIES["schedule_get_for_commit"], key).fetchone()
        if row is None:
            raise _Raced("not_eligible")
        if records.candidate_from_row(row) != candidate:
            raise _Raced("schedule_changed")
        task = records.candidate_task_revision(row)
        if task.content_digest != candidate.task_content_digest:
            raise _Raced("task_changed")
        committed_at = max(params.committed_at_ms, decision.observed_at_ms)
        run_id = attempt_id = None
        if decision.disposition is Disposition.ADMIT:
            assert params.ids is not None, "an admission needs its ids"
            execution = self._execution_revision(conn, candidate, task.revision)
            rows = with_jittered_instant(admission_rows(
                candidate=candidate,
                decision=decision,
                execution=execution,
                task_name=task.name,
                ids=params.ids,
                committed_at_ms=committed_at,
                actor_id=self._actor_id,
            ), decision.jittered_for_ms)
            insert_admission(conn, QUERIES, rows)
            run_id, attempt_id = params.ids.run_id, params.ids.attempt_id
        if decision.paused_from_ms is not None:  # what the pause held back, on record
            conn.execute(
                QUERIES["schedule_misfire_insert"],
                {
                    **key,
                    "trigger_revision": candidate.trigger_revision,
                    "due_at_ms": decision.paused_from_ms,
                    "skipped_through_ms": decision.paused_through_ms,
                    "next_fire_at_ms": decision.due_at_ms,
                    "policy": PAUSED_FATE,
                    "run_id": None,
                    "decided_at_ms": decision.observed_at_ms,
                },
            )
        if decision.misfired:
            conn.execute(
                QUERIES["schedule_misfire_insert"],
                {
                    **key,
                    "trigger_revision": candidate.trigger_revision,
                    "due_at_ms": decision.due_at_ms,
                    "skipped_through_ms": decision.skipped_through_ms,
                    "next_fire_at_ms": cursor_for_storage(decision.next_fire_at_ms),
                    "policy": candidate.spec.misfire_policy.value,
                    "run_id": run_id,
                    "decided_at_ms": decision.observed_at_ms,
                },
            )
        advanced = conn.execute(
            QUERIES["schedule_advance"],
            {
                **key,
                "trigger_revision": candidate.trigger_revision,
                "state_version": candidate.state_version,
                "cursor_ms": candidate.next_fire_at_ms,
                "next_fire_at_ms": cursor_for_storage(decision.next_fire_at_ms),
                "next_due_at_ms": decision.next_due_at_ms,
                "scheduled_for_ms": decision.scheduled_for_ms,
                "now_ms": committed_at,
            },
        )
        if advanced.rowcount != 1:
            raise _Raced("schedule_changed")
        if run_id is not None:
            return CommitResult(
                outcome=CommitOutcome.ADMITTED,
                disposition=decision.disposition,
                run_id=run_id,
                attempt_id=attempt_id,
            )
        return CommitResult(outcome=CommitOutcome.ADVANCED, disposition=decision.disposition)

    def _execution_revision(
        self, conn: sqlite3.Connection, candidate: ScheduleCandidate, task_revision: int
    ) -> ExecutionRevision:
        reference = execution_task_revision(task_revision, candidate.task_content_digest)
        row = conn.execute(
            QUERIES["task_execution_revision_get"],
            {
                "project_id": candidate.project_id,
                "task_id": candidate.task_id,
                "task_revision": reference,
                "executor_type": ExecutorType.LOCAL_PROCESS.value,
            },
        ).fetchone()
        if row is None:
            raise RecordCorrupt(
                f"execution revision for {candidate.project_id}/{candidate.task_id}"
                f"@{task_revision} is missing"
            )
        execution = records.execution_revision(row)
        if execution.source_content_digest != candidate.task_content_digest:
            raise RecordCorrupt("execution revision does not match the pinned task digest")
        return execution
