"""SQLite publishers and definition reads: the shared writer inside BEGIN IMMEDIATE."""

from __future__ import annotations

import sqlite3

from qinglong.clock import Clock
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
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase


class SqliteDefinitionStore:
    """The DefinitionStore port on SQLite; publish times come from the node clock."""

    def __init__(self, db: SqliteDatabase, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def _writer(self, conn: sqlite3.Connection) -> DefinitionWriter:
        return DefinitionWriter(conn, QUERIES, ExecutorType.LOCAL_PROCESS, self._clock.now_ms())

    def project_create(self, params: ProjectCreateParams) -> Project:
        with self._db.write("create project") as conn:
            return self._writer(conn).project_create(params)

    def project_archive(self, project: str) -> Project:
        with self._db.write("archive project") as conn:
            return self._writer(conn).project_archive(project)

    def project_unarchive(self, project: str) -> Project:
        with self._db.write("unarchive project") as conn:
            return self._writer(conn).project_unarchive(project)

    def global_limit_get(self) -> int | None:
        with self._db.read("read the global limit") as conn:
            return DefinitionReader(conn, QUERIES).global_limit_get()

    def global_limit_set(self, max_running: int | None) -> None:
        with self._db.write("set the global limit") as conn:
            self._writer(conn).global_limit_set(max_running)

    def project_get(self, project: str) -> Project:
        with self._db.read("read project") as conn:
            return DefinitionReader(conn, QUERIES).project_get(project)

    def project_list(self) -> list[Project]:
        with self._db.read("list projects") as conn:
            return DefinitionReader(conn, QUERIES).project_list()

    def task_publish(self, params: TaskPublishParams) -> TaskPublishResult:
        with self._db.write("publish task") as conn:
            return self._writer(conn).task_publish(params)

    def task_get(self, project: str, task: str) -> TaskView:
        with self._db.read("read task") as conn:
            return DefinitionReader(conn, QUERIES).task_get(project, task, include_deleted=True)

    def task_history(self, project: str, task: str) -> list[TaskRevision]:
        with self._db.read("read task history") as conn:
            return DefinitionReader(conn, QUERIES).task_history(project, task)

    def task_list(self, project: str, include_deleted: bool = False) -> list[TaskView]:
        with self._db.read("list tasks") as conn:
            return DefinitionReader(conn, QUERIES).task_list(project, include_deleted)

    def task_delete(self, project: str, task: str) -> TaskView:
        with self._db.write("delete task") as conn:
            return self._writer(conn).task_delete(project, task)

    def trigger_publish(self, params: TriggerPublishParams) -> TriggerPublishResult:
        with self._db.write("publish trigger") as conn:
            return self._writer(conn).trigger_publish(params)

    def trigger_list(self, project: str | None, trigger_id: str | None = None,
                     include_deleted: bool = False) -> list[TriggerView]:
        with self._db.read("list triggers") as conn:
            return DefinitionReader(conn, QUERIES).trigger_list(project, trigger_id,
                                                                include_deleted)

    def trigger_delete(self, project: str, trigger: str) -> TriggerView:
        with self._db.write("delete trigger") as conn:
            return self._writer(conn).trigger_delete(project, trigger)

    def trigger_pause(self, params: TriggerPauseParams) -> TriggerView:
        with self._db.write("pause trigger") as conn:
            return self._writer(conn).trigger_pause(params)

    def trigger_resume(self, params: TriggerResumeParams) -> TriggerView:
        with self._db.write("resume trigger") as conn:
            return self._writer(conn).trigger_resume(params)

    def project_pause(self, params: ProjectPauseParams) -> list[TriggerView]:
        with self._db.write("pause project") as conn:
            return self._writer(conn).project_pause(params)

    def project_resume(self, params: ProjectPauseParams) -> list[TriggerView]:
        with self._db.write("resume project") as conn:
            return self._writer(conn).project_resume(params)
