"""Definition reads (inside a transaction of the store)."""

from __future__ import annotations

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.model import Project, TaskView, TriggerView
from qinglong.domain.task import TaskRevision
from qinglong.errors import NotFound
from qinglong.storage import records
from qinglong.storage.kernel import Tx


class DefinitionReader:
    """Definition reads (inside a read transaction the adapter opened)."""

    def __init__(self, tx: Tx) -> None:
        self._tx = tx

    def _require_project(self, project: str) -> None:
        if self._tx.execute("project_get", {"id": project}).fetchone() is None:
            raise NotFound("project", project)

    def project_get(self, project: str) -> Project:
        row = self._tx.execute("project_get", {"id": project}).fetchone()
        if row is None:
            raise NotFound("project", project)
        return records.project_from_row(row)

    def project_list(self) -> list[Project]:
        return [records.project_from_row(r) for r in self._tx.execute("project_list").fetchall()]

    def global_limit_get(self) -> int | None:
        row = self._tx.execute("global_limit_get").fetchone()
        return None if row is None else int(row["max_running"])

    def task_list(self, project: str, include_deleted: bool = False,
                  task_id: str | None = None, *, label: str | None = None) -> list[TaskView]:
        self._require_project(project)
        rows = self._tx.execute("task_list", {
            "project_id": project, "task_id": task_id, "include_deleted": include_deleted,
            "label": label,
        }).fetchall()
        return [TaskView(revision=records.task_revision(row),
                         deleted_at_ms=records.optional_int(row["h_deleted_at_ms"]))
                for row in rows]

    def task_get(self, project: str, task: str, include_deleted: bool = False) -> TaskView:
        entity_id(task, "task")
        found = self.task_list(project, include_deleted, task)
        if not found:
            raise NotFound("task", task)
        return found[0]

    def task_history(self, project: str, task: str) -> list[TaskRevision]:
        self.task_get(project, task, include_deleted=True)
        rows = self._tx.execute("task_revision_list",
                                  {"project_id": project, "task_id": task}).fetchall()
        return [records.task_revision(row) for row in rows]

    def trigger_list(self, project: str | None, trigger_id: str | None = None,
                     include_deleted: bool = False, *,
                     label: str | None = None) -> list[TriggerView]:
        if project is not None:
            project_id(project)
            self._require_project(project)
        if trigger_id is not None:
            entity_id(trigger_id, "trigger")
        rows = self._tx.execute("trigger_list", {
            "project_id": project, "trigger_id": trigger_id, "include_deleted": include_deleted,
            "label": label,
        }).fetchall()
        if trigger_id is not None and not rows:
            raise NotFound("trigger", trigger_id)
        return [
            TriggerView(
                revision=records.trigger_revision(row),
                schedule=records.schedule_state(row, "s_"),
                task_pin_current=bool(row["task_pin_current"]),
                project_active=bool(row["project_active"]),
                deleted_at_ms=records.optional_int(row["h_deleted_at_ms"]),
                pause_reason=row.get("pause_reason"),
            )
            for row in rows
        ]
