"""SQLite publishers and definition reads: projects, tasks (with execution revisions), triggers."""

from __future__ import annotations

import sqlite3

from qinglong.clock import Clock
from qinglong.domain.identifiers import display_name, entity_id, project_id
from qinglong.domain.model import Project, ProjectStatus, TriggerView
from qinglong.domain.publishing import next_task_revision, next_trigger_revision
from qinglong.domain.task import (
    ExecutorType,
    TaskRevision,
    compile_execution_revision,
    plan_json_text,
    spec_json_text,
)
from qinglong.domain.trigger import TriggerRevision
from qinglong.errors import Conflict, NotFound
from qinglong.storage import records
from qinglong.storage.ports import (
    ProjectCreateParams,
    TaskPublishParams,
    TaskPublishResult,
    TriggerPublishParams,
    TriggerPublishResult,
)
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase


def _active_project(conn: sqlite3.Connection, project: str) -> Project:
    row = conn.execute(QUERIES["project_get"], {"id": project}).fetchone()
    if row is None:
        raise NotFound("project", project)
    record = records.project_from_row(row)
    if record.status is not ProjectStatus.ACTIVE:
        raise Conflict(f"project {project!r} is archived")
    return record


def _current_task(conn: sqlite3.Connection, project: str, task: str) -> TaskRevision | None:
    head = conn.execute(QUERIES["task_head_get"], {"project_id": project, "task_id": task}).fetchone()
    if head is None:
        return None
    row = conn.execute(
        QUERIES["task_revision_get"],
        {"project_id": project, "task_id": task, "revision": head["current_revision"]},
    ).fetchone()
    return records.task_revision(row)


def _current_trigger(conn: sqlite3.Connection, project: str, trigger: str) -> TriggerRevision | None:
    key = {"project_id": project, "trigger_id": trigger}
    head = conn.execute(QUERIES["trigger_head_get"], key).fetchone()
    if head is None:
        return None
    row = conn.execute(
        QUERIES["trigger_revision_get"], {**key, "revision": head["current_revision"]}
    ).fetchone()
    return records.trigger_revision(row)


def _append_trigger_revision(
    conn: sqlite3.Connection, revision: TriggerRevision, previous: TriggerRevision | None
) -> None:
    key = {"project_id": revision.project_id, "trigger_id": revision.trigger_id}
    now = revision.created_at_ms
    if previous is None:
        conn.execute(QUERIES["trigger_head_insert"], {**key, "task_id": revision.task_id, "now_ms": now})
    conn.execute(
        QUERIES["trigger_revision_insert"],
        {
            **key,
            "revision": revision.revision,
            "task_id": revision.task_id,
            "task_revision": revision.task_revision,
            "task_content_digest": revision.task_content_digest,
            "spec_json": revision.spec.json_text(),
            "enabled": int(revision.enabled),
            "content_digest": revision.content_digest,
            "created_at_ms": now,
        },
    )
    if previous is None:
        conn.execute(
            QUERIES["schedule_insert"], {**key, "trigger_revision": revision.revision, "now_ms": now}
        )
        return
    advanced = conn.execute(
        QUERIES["trigger_head_advance"],
        {**key, "revision": revision.revision, "expected_revision": previous.revision, "now_ms": now},
    )
    if advanced.rowcount != 1:
        raise Conflict(f"trigger {revision.trigger_id!r} changed concurrently; publish again")
    conn.execute(QUERIES["schedule_reset"], {**key, "trigger_revision": revision.revision, "now_ms": now})


class SqliteDefinitionStore:
    """Publishers (one BEGIN IMMEDIATE transaction each) and definition reads."""

    def __init__(self, db: SqliteDatabase, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    # -- projects ---------------------------------------------------------------------

    def project_create(self, params: ProjectCreateParams) -> Project:
        project_id(params.project_id)
        name = display_name(params.name or params.project_id)
        with self._db.write("create project") as conn:
            if conn.execute(QUERIES["project_get"], {"id": params.project_id}).fetchone():
                raise Conflict(f"project {params.project_id!r} already exists")
            row = conn.execute(
                QUERIES["project_insert"],
                {"id": params.project_id, "name": name, "now_ms": self._clock.now_ms()},
            ).fetchone()
        return records.project_from_row(row)

    def project_archive(self, project: str) -> Project:
        project_id(project)
        with self._db.write("archive project") as conn:
            row = conn.execute(
                QUERIES["project_archive"], {"id": project, "now_ms": self._clock.now_ms()}
            ).fetchone()
            if row is None:
                if conn.execute(QUERIES["project_get"], {"id": project}).fetchone() is None:
                    raise NotFound("project", project)
                raise Conflict(f"project {project!r} is already archived")
        return records.project_from_row(row)

    def project_get(self, project: str) -> Project:
        with self._db.read("read project") as conn:
            row = conn.execute(QUERIES["project_get"], {"id": project}).fetchone()
        if row is None:
            raise NotFound("project", project)
        return records.project_from_row(row)

    def project_list(self) -> list[Project]:
        with self._db.read("list projects") as conn:
            rows = conn.execute(QUERIES["project_list"]).fetchall()
        return [records.project_from_row(row) for row in rows]

    # -- tasks ------------------------------------------------------------------------

    def task_publish(self, params: TaskPublishParams) -> TaskPublishResult:
        project_id(params.project_id)
        entity_id(params.task_id, "task")
        with self._db.write("publish task") as conn:
            _active_project(conn, params.project_id)
            current = _current_task(conn, params.project_id, params.task_id)
            revision = next_task_revision(
                current,
                project_id=params.project_id,
                task_id=params.task_id,
                name=params.name,
                spec=params.spec,
                enabled=params.enabled,
                now_ms=self._clock.now_ms(),
            )
            if revision is None:
                assert current is not None
                return TaskPublishResult(revision=current, created=False)
            self._append_task_revision(conn, revision, current)
            repinned: list[str] = []
            if params.repin_triggers and revision.enabled and current is not None:
                repinned = self._repin_triggers(conn, revision)
        return TaskPublishResult(revision=revision, created=True, repinned_triggers=tuple(repinned))

    def _append_task_revision(
        self, conn: sqlite3.Connection, revision: TaskRevision, previous: TaskRevision | None
    ) -> None:
        key = {"project_id": revision.project_id, "task_id": revision.task_id}
        now = revision.created_at_ms
        if previous is None:
            conn.execute(QUERIES["task_head_insert"], {**key, "now_ms": now})
        conn.execute(
            QUERIES["task_revision_insert"],
            {
                **key,
                "revision": revision.revision,
                "name": revision.name,
                "kind": revision.kind,
                "spec_json": spec_json_text(revision.spec),
                "enabled": int(revision.enabled),
                "content_digest": revision.content_digest,
                "created_at_ms": now,
            },
        )
        execution = compile_execution_revision(revision, ExecutorType.LOCAL_PROCESS, now)
        conn.execute(
            QUERIES["task_execution_revision_insert"],
            {
                **key,
                "source_revision": execution.source_revision,
                "task_revision": execution.task_revision,
                "source_content_digest": execution.source_content_digest,
                "executor_type": execution.executor_type.value,
                "plan_schema": execution.plan_schema,
                "plan_json": plan_json_text(execution),
                "content_digest": execution.content_digest,
                "created_at_ms": now,
            },
        )
        if previous is not None:
            advanced = conn.execute(
                QUERIES["task_head_advance"],
                {
                    **key,
                    "revision": revision.revision,
                    "expected_revision": previous.revision,
                    "now_ms": now,
                },
            )
            if advanced.rowcount != 1:
                raise Conflict(f"task {revision.task_id!r} changed concurrently; publish again")

    def _repin_triggers(self, conn: sqlite3.Connection, task: TaskRevision) -> list[str]:
        repinned = []
        rows = conn.execute(
            QUERIES["trigger_ids_for_task"], {"project_id": task.project_id, "task_id": task.task_id}
        ).fetchall()
        for row in rows:
            current = _current_trigger(conn, task.project_id, row["trigger_id"])
            assert current is not None
            revision = next_trigger_revision(
                current,
                project_id=task.project_id,
                trigger_id=current.trigger_id,
                task_id=None,
                enabled=current.enabled,
                task=task,
                now_ms=task.created_at_ms,
            )
            if revision is not None:
                _append_trigger_revision(conn, revision, current)
                repinned.append(revision.trigger_id)
        return repinned

    def task_list(self, project: str) -> list[TaskRevision]:
        with self._db.read("list tasks") as conn:
            if conn.execute(QUERIES["project_get"], {"id": project}).fetchone() is None:
                raise NotFound("project", project)
            rows = conn.execute(QUERIES["task_list"], {"project_id": project}).fetchall()
        return [records.task_revision(row) for row in rows]

    # -- triggers ---------------------------------------------------------------------

    def trigger_publish(self, params: TriggerPublishParams) -> TriggerPublishResult:
        project_id(params.project_id)
        entity_id(params.trigger_id, "trigger")
        if params.task_id is not None:
            entity_id(params.task_id, "task")
        with self._db.write("publish trigger") as conn:
            _active_project(conn, params.project_id)
            current = _current_trigger(conn, params.project_id, params.trigger_id)
            if current is None and params.task_id is None:
                raise NotFound("trigger", params.trigger_id)
            task_id = params.task_id or current.task_id  # type: ignore[union-attr]
            task = _current_task(conn, params.project_id, task_id)
            if task is None:
                raise NotFound("task", task_id)
            revision = next_trigger_revision(
                current,
                project_id=params.project_id,
                trigger_id=params.trigger_id,
                task_id=params.task_id,
                enabled=params.enabled,
                expression=params.expression,
                timezone=params.timezone,
                misfire_policy=params.misfire_policy,
                task=task,
                now_ms=self._clock.now_ms(),
            )
            if revision is None:
                assert current is not None
                return TriggerPublishResult(revision=current, created=False)
            _append_trigger_revision(conn, revision, current)
        return TriggerPublishResult(revision=revision, created=True)

    def trigger_list(self, project: str, trigger_id: str | None = None) -> list[TriggerView]:
        with self._db.read("list triggers") as conn:
            if conn.execute(QUERIES["project_get"], {"id": project}).fetchone() is None:
                raise NotFound("project", project)
            rows = conn.execute(
                QUERIES["trigger_list"], {"project_id": project, "trigger_id": trigger_id}
            ).fetchall()
        if trigger_id is not None and not rows:
            raise NotFound("trigger", trigger_id)
        return [
            TriggerView(
                revision=records.trigger_revision(row),
                schedule=records.schedule_state(row, "s_"),
                task_pin_current=bool(row["task_pin_current"]),
                project_active=bool(row["project_active"]),
            )
            for row in rows
        ]
