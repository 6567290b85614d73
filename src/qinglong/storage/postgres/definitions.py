"""PostgreSQL publishers (admin role) and definition reads; times come from the database.

Every publish also sends ``NOTIFY qinglong_schedules`` in its own transaction, so the
`ql control` replicas wake at once for a trigger that is due now (see profiles/wakeups.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import psycopg

from qinglong.domain.model import Project, TaskView, TriggerView
from qinglong.domain.task import ExecutorType, TaskRevision
from qinglong.storage.definition_writer import DefinitionReader, DefinitionWriter
from qinglong.storage.ports import (
    ProjectCreateParams,
    ProjectPauseParams,
    TaskPublishParams,
    TaskPublishResult,
    TriggerPauseParams,
    TriggerPublishParams,
    TriggerPublishResult,
    TriggerResumeParams,
)
from qinglong.storage.postgres.connection import QUERIES, Connector, PgConnection
from qinglong.storage.postgres.errors import translate
from qinglong.storage.postgres.transactions import db_now_ms, serializable

T = TypeVar("T")


class PgDefinitionStore:
    """The DefinitionStore port on PostgreSQL: each publish is one SERIALIZABLE transaction."""

    def __init__(self, connector: Connector) -> None:
        self._connector = connector

    def _publish(self, action: str, work: Callable[[DefinitionWriter], T]) -> T:
        def run(conn: PgConnection) -> T:
            writer = DefinitionWriter(conn, QUERIES, ExecutorType.REMOTE_WORKER, db_now_ms(conn))
            result = work(writer)
            conn.execute(QUERIES["notify_schedules"])  # delivered on commit only
            return result

        return serializable(self._connector, action, run)

    def _read(self, action: str, work: Callable[[DefinitionReader], T]) -> T:
        with self._connector.connection() as conn:
            try:
                return work(DefinitionReader(conn, QUERIES))
            except psycopg.Error as exc:
                raise translate(exc, action, conn) from exc

    def project_create(self, params: ProjectCreateParams) -> Project:
        return self._publish("create project", lambda w: w.project_create(params))

    def project_archive(self, project: str) -> Project:
        return self._publish("archive project", lambda w: w.project_archive(project))

    def project_unarchive(self, project: str) -> Project:
        return self._publish("unarchive project", lambda w: w.project_unarchive(project))

    def global_limit_get(self) -> int | None:
        return self._read("read the global limit", lambda r: r.global_limit_get())

    def global_limit_set(self, max_running: int | None) -> None:
        self._publish("set the global limit", lambda w: w.global_limit_set(max_running))

    def project_get(self, project: str) -> Project:
        return self._read("read project", lambda r: r.project_get(project))

    def project_list(self) -> list[Project]:
        return self._read("list projects", lambda r: r.project_list())

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

    def trigger_publish(self, params: TriggerPublishParams) -> TriggerPublishResult:
        return self._publish("publish trigger", lambda w: w.trigger_publish(params))

    def trigger_list(self, project: str | None, trigger_id: str | None = None,
                     include_deleted: bool = False) -> list[TriggerView]:
        return self._read("list triggers",
                          lambda r: r.trigger_list(project, trigger_id, include_deleted))

    def trigger_delete(self, project: str, trigger: str) -> TriggerView:
        return self._publish("delete trigger", lambda w: w.trigger_delete(project, trigger))

    def trigger_pause(self, params: TriggerPauseParams) -> TriggerView:
        return self._publish("pause trigger", lambda w: w.trigger_pause(params))

    def trigger_resume(self, params: TriggerResumeParams) -> TriggerView:
        return self._publish("resume trigger", lambda w: w.trigger_resume(params))

    def project_pause(self, params: ProjectPauseParams) -> list[TriggerView]:
        return self._publish("pause project", lambda w: w.project_pause(params))

    def project_resume(self, params: ProjectPauseParams) -> list[TriggerView]:
        return self._publish("resume project", lambda w: w.project_resume(params))
