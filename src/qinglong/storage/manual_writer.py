"""Run now on a database connection, shared by both adapters (queries by name).

`admit_manual` runs inside the write transaction its adapter opened (``BEGIN IMMEDIATE`` on
SQLite, SERIALIZABLE on PostgreSQL): it looks the request's idempotency key up first (a
request sent again returns the Run it admitted), then re-reads every fact the admission
depends on -- the project is active; the task exists, is not deleted and its current
revision is enabled; for a trigger, its current revision is enabled and pins the task's
current revision -- and inserts the rows `manual_admission_rows` builds. A refusal raises
before anything is written.
"""

from __future__ import annotations

from qinglong.domain.admission import AdmissionIds, manual_admission_rows
from qinglong.domain.manual import ManualRequest
from qinglong.domain.model import ProjectStatus
from qinglong.domain.task import TaskRevision
from qinglong.domain.trigger import TriggerRevision
from qinglong.errors import NotFound, NotRunnable, RecordCorrupt, RequestIdConflict
from qinglong.storage import records
from qinglong.storage.dbapi import Connection, Queries, fetch_one
from qinglong.storage.lifecycle_writer import insert_admission
from qinglong.storage.ports import ManualRunResult


def find_admitted(conn: Connection, queries: Queries, request: ManualRequest) -> str | None:
    """The Run this request admitted before (None: none yet); RequestIdConflict when its
    request id admitted a Run for another target."""
    row = fetch_one(conn, queries["manual_run_by_key"],
                    {"project_id": request.project_id, "key": request.idempotency_key})
    if row is None:
        return None
    if not request.admitted(trigger_type=row["trigger_type"], task_id=row["task_id"],
                            trigger_id=row["trigger_id"]):
        what = (f"trigger {row['trigger_id']}" if row["trigger_id"] is not None
                else f"task {row['task_id']}")
        raise RequestIdConflict(
            f"request id {request.request_id!r} already admitted run {row['id']} for {what} in "
            f"project {request.project_id}, not for {request.target}; use a new request id")
    return str(row["id"])


def _trigger(conn: Connection, queries: Queries, request: ManualRequest) -> TriggerRevision:
    assert request.trigger_id is not None
    row = fetch_one(conn, queries["manual_trigger_current"],
                    {"project_id": request.project_id, "trigger_id": request.trigger_id})
    if row is None or row["h_deleted_at_ms"] is not None:
        raise NotFound("trigger", request.trigger_id)
    trigger = records.trigger_revision(row)
    if not trigger.enabled:
        raise NotRunnable(f"trigger {request.project_id}/{request.trigger_id} is disabled; "
                          "`ql trigger enable` it first (or run its task with `ql task run`)")
    return trigger


def _task(conn: Connection, queries: Queries, project_id: str, task_id: str) -> TaskRevision:
    row = fetch_one(conn, queries["manual_task_current"],
                    {"project_id": project_id, "task_id": task_id})
    if row is None or row["h_deleted_at_ms"] is not None:
        raise NotFound("task", task_id)
    task = records.task_revision(row)
    if not task.enabled:
        raise NotRunnable(f"task {project_id}/{task_id} is disabled; `ql task enable` it first")
    return task


def admit_manual(conn: Connection, queries: Queries, request: ManualRequest, *,
                 ids: AdmissionIds, now_ms: int, executor_type: str) -> ManualRunResult:
    """Admit the manual Run ``request`` asks for (in the caller's transaction), or return the
    one it admitted before. ``now_ms`` is the commit time of the store's clock."""
    existing = find_admitted(conn, queries, request)
    if existing is not None:
        return ManualRunResult(run_id=existing, admitted=False)
    project = fetch_one(conn, queries["manual_project_get"], {"project_id": request.project_id})
    if project is None:
        raise NotFound("project", request.project_id)
    if project["status"] != ProjectStatus.ACTIVE.value:
        raise NotRunnable(f"project {request.project_id} is archived; nothing of it runs until "
                          "`ql project unarchive`")
    trigger = _trigger(conn, queries, request) if request.trigger_id is not None else None
    task_id = trigger.task_id if trigger is not None else request.task_id
    assert task_id is not None
    task = _task(conn, queries, request.project_id, task_id)
    if trigger is not None and (trigger.task_revision != task.revision
                                or trigger.task_content_digest != task.content_digest):
        raise NotRunnable(
            f"trigger {request.project_id}/{trigger.trigger_id} pins revision "
            f"{trigger.task_revision} of task {task_id}, which is now at revision "
            f"{task.revision}: republish the trigger to re-pin it (or run the task with "
            "`ql task run`)")
    found = fetch_one(conn, queries["manual_execution_revision"], {
        "project_id": request.project_id, "task_id": task_id, "source_revision": task.revision,
        "executor_type": executor_type})
    if found is None:
        raise RecordCorrupt(f"execution revision of {request.project_id}/{task_id}"
                            f"@{task.revision} for {executor_type} is missing")
    execution = records.execution_revision(found)
    if execution.source_content_digest != task.content_digest:
        raise RecordCorrupt("execution revision does not match the task revision's digest")
    insert_admission(conn, queries, manual_admission_rows(
        request=request, task=task, trigger=trigger, execution=execution, ids=ids,
        committed_at_ms=now_ms))
    return ManualRunResult(run_id=ids.run_id, admitted=True)
