"""What every admission on request (run now, backfill) re-reads and checks first, in the
admission's own transaction: the project is active; the trigger (if any) exists, is not
deleted and is enabled; its task exists, is not deleted and is enabled, and is the revision
the trigger pins; the execution plan of that revision is there and matches it. A refusal
raises before anything is written, naming what to do about it.
"""

from __future__ import annotations

from qinglong.domain.model import ProjectStatus
from qinglong.domain.task import ExecutionRevision, TaskRevision
from qinglong.domain.trigger import TriggerRevision
from qinglong.errors import NotFound, NotRunnable, RecordCorrupt
from qinglong.storage import records
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Tx


def active_project(tx: Tx, project_id: str) -> None:
    project = tx.one("manual_project_get", {"project_id": project_id})
    if project is None:
        raise NotFound("project", project_id)
    if project["status"] != ProjectStatus.ACTIVE.value:
        raise NotRunnable(f"project {project_id} is archived; nothing of it runs until "
                          "`ql project unarchive`")


def _current(tx: Tx, query: str, kind: str, key: dict[str, str]) -> Row:
    """The row of a trigger's or task's current revision (``kind``), NotFound when there is
    none or it is deleted."""
    row = tx.one(query, key)
    if row is None or row["h_deleted_at_ms"] is not None:
        raise NotFound(kind, key[f"{kind}_id"])
    return row


def enabled_trigger(tx: Tx, project_id: str, trigger_id: str, *, instead: str = "") -> TriggerRevision:
    """The trigger's current revision, refused unless it is there and enabled (``instead``:
    what else the user may do, said with the refusal) and runs its task (a trigger that
    starts a flow admits flow runs only as its schedule's occurrences)."""
    trigger = records.trigger_revision(_current(tx, "manual_trigger_current", "trigger", {
        "project_id": project_id, "trigger_id": trigger_id}))
    if trigger.spec.flow is not None:
        raise NotRunnable(f"trigger {project_id}/{trigger_id} starts flow {trigger.spec.flow}, "
                          "not a Run of its task: start the flow with `ql flow run --flow "
                          f"{trigger.spec.flow}`")
    if not trigger.enabled:
        raise NotRunnable(f"trigger {project_id}/{trigger_id} is disabled; `ql trigger enable` "
                          f"it first{instead}")
    return trigger


def enabled_task(tx: Tx, project_id: str, task_id: str, *, of: str = "") -> TaskRevision:
    """The task's current revision, refused unless it is there and enabled."""
    task = records.task_revision(_current(tx, "manual_task_current", "task", {
        "project_id": project_id, "task_id": task_id}))
    if not task.enabled:
        raise NotRunnable(f"task {project_id}/{task_id}{of} is disabled; `ql task enable` it "
                          "first")
    return task


def check_pinned(trigger: TriggerRevision, task: TaskRevision, *, instead: str = "") -> None:
    if (trigger.task_revision, trigger.task_content_digest) != (task.revision, task.content_digest):
        raise NotRunnable(
            f"trigger {trigger.project_id}/{trigger.trigger_id} pins revision "
            f"{trigger.task_revision} of task {task.task_id}, which is now at revision "
            f"{task.revision}: republish the trigger to re-pin it{instead}")


def execution_plan(tx: Tx, task: TaskRevision, executor_type: str) -> ExecutionRevision:
    """The digest-checked execution plan of ``task`` for ``executor_type``."""
    found = tx.one("manual_execution_revision", {
        "project_id": task.project_id, "task_id": task.task_id, "source_revision": task.revision,
        "executor_type": executor_type})
    if found is None:
        raise RecordCorrupt(f"execution revision of {task.project_id}/{task.task_id}"
                            f"@{task.revision} for {executor_type} is missing")
    execution = records.execution_revision(found)
    if execution.source_content_digest != task.content_digest:
        raise RecordCorrupt("execution revision does not match the task revision's digest")
    return execution
