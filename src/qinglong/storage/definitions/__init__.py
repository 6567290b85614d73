"""The definition store: projects, tasks and triggers, written once over the kernel.

Publishing appends an immutable revision (a no-op when nothing changed); deleting hides a
task or trigger head and stops it, keeping its revisions for the Runs and the audit that
refer to them (publishing again restores it). Every write is one SERIALIZABLE (PostgreSQL)
or ``BEGIN IMMEDIATE`` (SQLite) transaction at one reading of the database's clock, and
wakes the schedulers (``schedules``) when it commits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from qinglong.domain.model import Project, TaskView, TriggerView
from qinglong.domain.task import TaskRevision
from qinglong.storage.definitions import pauses
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    ProjectPauseParams,
    TaskPublishParams,
    TaskPublishResult,
    TriggerPauseParams,
    TriggerPublishParams,
    TriggerPublishResult,
    TriggerResumeParams,
)
from qinglong.storage.definitions.reader import DefinitionReader
from qinglong.storage.definitions.writer import DefinitionWriter
from qinglong.storage.kernel import Database, Tx

T = TypeVar("T")


class DefinitionStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def _publish(self, action: str, work: Callable[[DefinitionWriter], T]) -> T:
        def run(tx: Tx) -> T:
            writer = DefinitionWriter(tx, self._db.capabilities.executor_type, tx.now_ms())
            result = work(writer)
            tx.wake("schedules")
            return result

        return self._db.write(action, run)

    def _read(self, action: str, work: Callable[[DefinitionReader], T]) -> T:
        return self._db.read(action, lambda tx: work(DefinitionReader(tx)))

    # -- projects -----------------------------------------------------------------------

    def project_create(self, params: ProjectCreateParams) -> Project:
        return self._publish("create project", lambda w: w.project_create(params))

    def project_archive(self, project: str) -> Project:
        return self._publish("archive project", lambda w: w.project_archive(project))

    def project_unarchive(self, project: str) -> Project:
        return self._publish("unarchive project", lambda w: w.project_unarchive(project))

    def project_get(self, project: str) -> Project:
        return self._read("read project", lambda r: r.project_get(project))

    def project_list(self) -> list[Project]:
        return self._read("list projects", lambda r: r.project_list())

    def project_pause(self, params: ProjectPauseParams) -> list[TriggerView]:
        return self._publish("pause project", lambda w: pauses.project_pause(w, params))

    def project_resume(self, params: ProjectPauseParams) -> list[TriggerView]:
        return self._publish("resume project", lambda w: pauses.project_resume(w, params))

    def global_limit_get(self) -> int | None:
        return self._read("read the global limit", lambda r: r.global_limit_get())

    def global_limit_set(self, max_running: int | None) -> None:
        self._publish("set the global limit", lambda w: w.global_limit_set(max_running))

    # -- tasks --------------------------------------------------------------------------

    def task_publish(self, params: TaskPublishParams) -> TaskPublishResult:
        return self._publish("publish task", lambda w: w.task_publish(params))

    def task_get(self, project: str, task: str) -> TaskView:
        return self._read("read task", lambda r: r.task_get(project, task, include_deleted=True))

    def task_history(self, project: str, task: str) -> list[TaskRevision]:
        return self._read("read task history", lambda r: r.task_history(project, task))

    def task_list(self, project: str, include_deleted: bool = False) -> list[TaskView]:
        return self._read("list tasks", lambda r: r.task_list(project, include_deleted))

    def task_delete(self, project: str, task: str) -> TaskView:
        return self._publish("delete task", lambda w: w.task_delete(project, task))

    # -- triggers -----------------------------------------------------------------------

    def trigger_publish(self, params: TriggerPublishParams) -> TriggerPublishResult:
        return self._publish("publish trigger", lambda w: w.trigger_publish(params))

    def trigger_list(self, project: str | None, trigger_id: str | None = None,
                     include_deleted: bool = False) -> list[TriggerView]:
        return self._read("list triggers",
                          lambda r: r.trigger_list(project, trigger_id, include_deleted))

    def trigger_delete(self, project: str, trigger: str) -> TriggerView:
        return self._publish("delete trigger", lambda w: w.trigger_delete(project, trigger))

    def trigger_pause(self, params: TriggerPauseParams) -> TriggerView:
        return self._publish("pause trigger", lambda w: pauses.trigger_pause(w, params))

    def trigger_resume(self, params: TriggerResumeParams) -> TriggerView:
        return self._publish("resume trigger", lambda w: pauses.trigger_resume(w, params))
