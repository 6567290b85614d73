"""Backfill on a database connection, shared by both adapters (queries by name).

`read_target` and `runs_between` run in a read transaction; `admit_backfill` runs inside the
write transaction its adapter opened (``BEGIN IMMEDIATE`` on SQLite, SERIALIZABLE on
PostgreSQL). An admission first looks for a Run standing for the occurrence (a scheduled Run
of any revision, or a backfilled one: then nothing is written), then re-reads every fact it
depends on -- the project is active; the trigger exists, is not deleted, is enabled and is
still at the revision the window was judged against; its task's current revision is enabled
and pinned by the trigger; the occurrence lies on the trigger's schedule and before its
cursor -- and inserts the rows `backfill_admission_rows` builds. A refusal raises before
anything is written. The definitions are read with run now's queries (``manual_*``).
"""

from __future__ import annotations

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import (
    BackfillRequest,
    BackfillTarget,
    backfill_admission_rows,
    utc_text,
)
from qinglong.domain.model import ProjectStatus
from qinglong.domain.task import ExecutionRevision, TaskRevision
from qinglong.domain.trigger import TriggerRevision
from qinglong.errors import InvalidInput, NotFound, NotRunnable, RecordCorrupt
from qinglong.storage import records
from qinglong.storage.dbapi import Connection, Queries, fetch_all, fetch_one
from qinglong.storage.lifecycle_writer import insert_admission
from qinglong.storage.ports import BackfillAdmitParams, BackfillAdmitResult


def _runnable(conn: Connection, queries: Queries, project_id: str,
              trigger_id: str) -> tuple[TriggerRevision, TaskRevision]:
    """The trigger's current revision and its task's, as long as an admission may use them."""
    project = fetch_one(conn, queries["manual_project_get"], {"project_id": project_id})
    if project is None:
        raise NotFound("project", project_id)
    if project["status"] != ProjectStatus.ACTIVE.value:
        raise NotRunnable(f"project {project_id} is archived; nothing of it runs until "
                          "`ql project unarchive`")
    row = fetch_one(conn, queries["manual_trigger_current"],
                    {"project_id": project_id, "trigger_id": trigger_id})
    if row is None or row["h_deleted_at_ms"] is not None:
        raise NotFound("trigger", trigger_id)
    trigger = records.trigger_revision(row)
    if not trigger.enabled:
        raise NotRunnable(f"trigger {project_id}/{trigger_id} is disabled; `ql trigger enable` "
                          "it first")
    found = fetch_one(conn, queries["manual_task_current"],
                      {"project_id": project_id, "task_id": trigger.task_id})
    if found is None or found["h_deleted_at_ms"] is not None:
        raise NotFound("task", trigger.task_id)
    task = records.task_revision(found)
    if not task.enabled:
        raise NotRunnable(f"task {project_id}/{task.task_id} of trigger {trigger_id} is disabled; "
                          "`ql task enable` it first")
    if (trigger.task_revision, trigger.task_content_digest) != (task.revision, task.content_digest):
        raise NotRunnable(
            f"trigger {project_id}/{trigger_id} pins revision {trigger.task_revision} of task "
            f"{task.task_id}, which is now at revision {task.revision}: republish the trigger "
            "to re-pin it")
    return trigger, task


def _execution(conn: Connection, queries: Queries, task: TaskRevision,
               executor_type: str) -> ExecutionRevision:
    found = fetch_one(conn, queries["manual_execution_revision"], {
        "project_id": task.project_id, "task_id": task.task_id, "source_revision": task.revision,
        "executor_type": executor_type})
    if found is None:
        raise RecordCorrupt(f"execution revision of {task.project_id}/{task.task_id}"
                            f"@{task.revision} for {executor_type} is missing")
    execution = records.execution_revision(found)
    if execution.source_content_digest != task.content_digest:
        raise RecordCorrupt("execution revision does not match the task revision's digest")
    return execution


def _cursor(conn: Connection, queries: Queries, project_id: str, trigger_id: str) -> int | None:
    row = fetch_one(conn, queries["backfill_schedule"],
                    {"project_id": project_id, "trigger_id": trigger_id})
    if row is None:
        raise RecordCorrupt(f"trigger {project_id}/{trigger_id} has no schedule row")
    return None if row["next_fire_at_ms"] is None else int(row["next_fire_at_ms"])


def read_target(conn: Connection, queries: Queries, project_id: str, trigger_id: str, *,
                executor_type: str) -> BackfillTarget:
    """What a window is judged against; refused (writing nothing) as an admission would be."""
    trigger, task = _runnable(conn, queries, project_id, trigger_id)
    _execution(conn, queries, task, executor_type)
    return BackfillTarget(trigger=trigger,
                          cursor_ms=_cursor(conn, queries, project_id, trigger_id))


def runs_between(conn: Connection, queries: Queries, project_id: str, trigger_id: str,
                 from_ms: int, to_ms: int) -> dict[int, str]:
    rows = fetch_all(conn, queries["backfill_runs_between"], {
        "project_id": project_id, "trigger_id": trigger_id, "from_ms": from_ms, "to_ms": to_ms})
    return {int(row["scheduled_for_ms"]): str(row["id"]) for row in rows}


def find_by_key(conn: Connection, queries: Queries, request: BackfillRequest,
                occurrence_ms: int) -> str | None:
    """The Run a backfill admitted for this occurrence (None: none has)."""
    row = fetch_one(conn, queries["backfill_run_by_key"], {
        "project_id": request.project_id, "key": request.idempotency_key(occurrence_ms)})
    return None if row is None else str(row["id"])


def admit_backfill(conn: Connection, queries: Queries, params: BackfillAdmitParams, *,
                   ids: AdmissionIds, now_ms: int, executor_type: str) -> BackfillAdmitResult:
    """Admit one occurrence (in the caller's transaction), or return the Run that already
    stands for it. ``now_ms`` is the commit time of the store's clock."""
    request, occurrence = params.request, params.occurrence_ms
    key = {"project_id": request.project_id, "trigger_id": request.trigger_id}
    existing = fetch_one(conn, queries["backfill_run_at"], {**key, "scheduled_for_ms": occurrence})
    if existing is not None:
        return BackfillAdmitResult(run_id=str(existing["id"]), admitted=False)
    trigger, task = _runnable(conn, queries, request.project_id, request.trigger_id)
    if trigger.revision != params.trigger_revision:
        raise NotRunnable(
            f"{request.target} was published again (revision {trigger.revision}) after the "
            f"backfill judged its window against revision {params.trigger_revision}; run the "
            "backfill again to judge it against the new schedule")
    if not request.from_ms <= occurrence <= request.to_ms:
        raise InvalidInput("occurrence", f"{utc_text(occurrence)} is outside the window")
    if trigger.spec.schedule.first_at_or_after(occurrence) != occurrence:
        raise InvalidInput("occurrence", f"{utc_text(occurrence)} is not an occurrence of "
                                         f"{trigger.spec.expression!r} in {trigger.spec.timezone}")
    target = BackfillTarget(trigger=trigger,
                            cursor_ms=_cursor(conn, queries, request.project_id,
                                              request.trigger_id))
    if occurrence >= target.horizon_ms:
        raise InvalidInput("to", f"must be before {target.horizon_text()}: occurrences from "
                                 "then on are the scheduler's to decide")
    execution = _execution(conn, queries, task, executor_type)
    insert_admission(conn, queries, backfill_admission_rows(
        request=request, occurrence_ms=occurrence, task=task, trigger=trigger,
        execution=execution, ids=ids, committed_at_ms=now_ms))
    return BackfillAdmitResult(run_id=ids.run_id, admitted=True)
