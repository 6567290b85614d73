"""Publishing and reading definitions, shared by both adapters.

Each method runs inside a transaction the adapter opened (``BEGIN IMMEDIATE`` on SQLite,
``SERIALIZABLE`` on PostgreSQL) and uses the adapter's queries by name; ``now_ms`` is the
adapter's clock (the node on SQLite, the database on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qinglong.domain.identifiers import actor_name, display_name, entity_id, project_id
from qinglong.domain.model import Project, ProjectStatus, TaskView, TriggerView
from qinglong.domain.publishing import next_task_revision, next_trigger_revision
from qinglong.domain.task import (
    MAX_CONCURRENCY,
    ExecutorType,
    TaskRevision,
    compile_execution_revision,
    plan_json_text,
    spec_json_text,
)
from qinglong.domain.trigger import TriggerRevision
from qinglong.errors import Conflict, InvalidInput, NotFound
from qinglong.storage import records
from qinglong.storage.dbapi import Connection, Queries, Row
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

MAX_PAUSE_MS = 10 * 366 * 86_400_000
MAX_PAUSE_REASON = 1024


def _spec_extras(params: TriggerPublishParams) -> dict[str, Any]:
    return {name: getattr(params, name)
            for name in ("dst_gap", "dst_overlap", "jitter_s", "jitter_random_s")}


class DefinitionWriter:
    def __init__(self, conn: Connection, queries: Queries, executor_type: ExecutorType, now_ms: int):
        self._conn = conn
        self._q = queries
        self._executor_type = executor_type
        self._now_ms = now_ms

    def _one(self, name: str, params: Mapping[str, object]) -> Row | None:
        row: Row | None = self._conn.execute(self._q[name], params).fetchone()
        return row

    # -- projects ---------------------------------------------------------------------

    def project_create(self, params: ProjectCreateParams) -> Project:
        project_id(params.project_id)
        name = display_name(params.project_id if params.name is None else params.name)
        if self._one("project_get", {"id": params.project_id}):
            raise Conflict(f"project {params.project_id!r} already exists")
        row = self._one("project_insert", {"id": params.project_id, "name": name, "now_ms": self._now_ms})
        assert row is not None
        return records.project_from_row(row)

    def project_archive(self, project: str) -> Project:
        project_id(project)
        row = self._one("project_archive", {"id": project, "now_ms": self._now_ms})
        if row is None:
            if self._one("project_get", {"id": project}) is None:
                raise NotFound("project", project)
            raise Conflict(f"project {project!r} is already archived")
        self._conn.execute(self._q["project_archival_open"], {"id": project, "now_ms": self._now_ms})
        return records.project_from_row(row)

    def project_unarchive(self, project: str) -> Project:
        project_id(project)
        row = self._one("project_unarchive", {"id": project, "now_ms": self._now_ms})
        if row is None:
            if self._one("project_get", {"id": project}) is None:
                raise NotFound("project", project)
            raise Conflict(f"project {project!r} is not archived")
        self._conn.execute(self._q["project_archival_close"],
                           {"id": project, "now_ms": self._now_ms})
        return records.project_from_row(row)

    # -- limits -----------------------------------------------------------------------

    def global_limit_set(self, max_running: int | None) -> None:
        if max_running is None:
            self._conn.execute(self._q["global_limit_clear"])
            return
        if (not isinstance(max_running, int) or isinstance(max_running, bool)
                or not 1 <= max_running <= MAX_CONCURRENCY):
            raise InvalidInput("max_running", f"must be between 1 and {MAX_CONCURRENCY}")
        self._conn.execute(self._q["global_limit_set"],
                           {"max_running": max_running, "now_ms": self._now_ms})

    def active_project(self, project: str) -> Project:
        row = self._one("project_get", {"id": project})
        if row is None:
            raise NotFound("project", project)
        record = records.project_from_row(row)
        if record.status is not ProjectStatus.ACTIVE:
            raise Conflict(f"project {project!r} is archived")
        return record

    # -- tasks ------------------------------------------------------------------------

    def current_task(self, project: str, task: str) -> TaskRevision | None:
        head = self._one("task_head_get", {"project_id": project, "task_id": task})
        if head is None:
            return None
        row = self._one("task_revision_get",
                        {"project_id": project, "task_id": task, "revision": head["current_revision"]})
        assert row is not None
        return records.task_revision(row)

    def task_publish(self, params: TaskPublishParams) -> TaskPublishResult:
        project_id(params.project_id)
        entity_id(params.task_id, "task")
        self.active_project(params.project_id)
        head = self._one("task_head_get", {"project_id": params.project_id, "task_id": params.task_id})
        current = self.current_task(params.project_id, params.task_id)
        if params.expected_revision is not None and (
                current is None or current.revision != params.expected_revision):
            raise Conflict(f"task {params.task_id!r} changed while this publish was prepared; "
                           "publish again")
        revision = next_task_revision(
            current,
            project_id=params.project_id,
            task_id=params.task_id,
            name=params.name,
            spec=params.spec,
            enabled=params.enabled,
            now_ms=self._now_ms,
        )
        restored = head is not None and head["deleted_at_ms"] is not None
        if revision is None:
            assert current is not None
            if restored:  # same content: the deleted task comes back as it was
                self._conn.execute(self._q["task_head_restore"],
                                   {"project_id": params.project_id, "task_id": params.task_id})
            return TaskPublishResult(revision=current, created=False, restored=restored)
        self._append_task_revision(revision, current)
        repinned: list[str] = []
        if params.repin_triggers and revision.enabled and current is not None:
            repinned = self._repin_triggers(revision)
        return TaskPublishResult(revision=revision, created=True, repinned_triggers=tuple(repinned),
                                 restored=restored)

    def _append_task_revision(self, revision: TaskRevision, previous: TaskRevision | None) -> None:
        key = {"project_id": revision.project_id, "task_id": revision.task_id}
        now = revision.created_at_ms
        if previous is None:
            self._conn.execute(self._q["task_head_insert"], {**key, "now_ms": now})
        self._conn.execute(
            self._q["task_revision_insert"],
            {
                **key,
                "revision": revision.revision,
                "name": revision.name,
                "kind": revision.kind,
                "spec_json": spec_json_text(revision.spec),
                "enabled": revision.enabled,
                "content_digest": revision.content_digest,
                "created_at_ms": now,
            },
        )
        execution = compile_execution_revision(revision, self._executor_type, now)
        self._conn.execute(
            self._q["task_execution_revision_insert"],
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
            advanced = self._conn.execute(
                self._q["task_head_advance"],
                {**key, "revision": revision.revision, "expected_revision": previous.revision,
                 "now_ms": now},
            )
            if advanced.rowcount != 1:
                raise Conflict(f"task {revision.task_id!r} changed concurrently; publish again")

    def _repin_triggers(self, task: TaskRevision) -> list[str]:
        repinned = []
        rows = self._conn.execute(
            self._q["trigger_ids_for_task"], {"project_id": task.project_id, "task_id": task.task_id}
        ).fetchall()
        for row in rows:
            current = self.current_trigger(task.project_id, row["trigger_id"])
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
                self._append_trigger_revision(revision, current)
                repinned.append(revision.trigger_id)
        return repinned

    # -- triggers ---------------------------------------------------------------------

    def current_trigger(self, project: str, trigger: str) -> TriggerRevision | None:
        key = {"project_id": project, "trigger_id": trigger}
        head = self._one("trigger_head_get", key)
        if head is None:
            return None
        row = self._one("trigger_revision_get", {**key, "revision": head["current_revision"]})
        assert row is not None
        return records.trigger_revision(row)

    def trigger_publish(self, params: TriggerPublishParams) -> TriggerPublishResult:
        project_id(params.project_id)
        entity_id(params.trigger_id, "trigger")
        if params.task_id is not None:
            entity_id(params.task_id, "task")
        self.active_project(params.project_id)
        key = {"project_id": params.project_id, "trigger_id": params.trigger_id}
        head = self._one("trigger_head_get", key)
        deleted = head is not None and head["deleted_at_ms"] is not None
        current = self.current_trigger(params.project_id, params.trigger_id)
        extras = _spec_extras(params)
        switch_only = (params.task_id is None and params.expression is None
                       and params.timezone is None and params.misfire_policy is None
                       and params.overlap is None
                       and all(value is None for value in extras.values()))
        if current is None or (deleted and switch_only):
            if switch_only:
                raise NotFound("trigger", params.trigger_id)  # enable/disable of no trigger
            if params.task_id is None:
                raise InvalidInput("task", f"is required for a new trigger ({params.trigger_id!r} "
                                           "does not exist yet)")
        task_id = params.task_id or current.task_id  # type: ignore[union-attr]
        task = self.current_task(params.project_id, task_id)
        if task is None:
            raise NotFound("task", task_id)
        enabled = params.enabled
        if enabled is None:
            enabled = True if current is None or deleted else current.enabled
        revision = next_trigger_revision(
            current,
            project_id=params.project_id,
            trigger_id=params.trigger_id,
            task_id=params.task_id,
            enabled=enabled,
            task=task,
            now_ms=self._now_ms,
            expression=params.expression,
            timezone=params.timezone,
            misfire_policy=params.misfire_policy,
            overlap=params.overlap,
            **extras,
        )
        if revision is None:
            assert current is not None
            if deleted:
                self._conn.execute(self._q["trigger_head_restore"], key)
            return TriggerPublishResult(revision=current, created=False, restored=deleted)
        self._append_trigger_revision(revision, current)
        return TriggerPublishResult(revision=revision, created=True, restored=deleted)

    def trigger_delete(self, project: str, trigger: str) -> TriggerView:
        """Stop a trigger (a disabled revision, so the scheduler and the audit see it end)
        and hide it; its revisions stay."""
        project_id(project)
        entity_id(trigger, "trigger")
        self.active_project(project)
        key = {"project_id": project, "trigger_id": trigger}
        head = self._one("trigger_head_get", key)
        current = self.current_trigger(project, trigger)
        if head is None or current is None or head["deleted_at_ms"] is not None:
            raise NotFound("trigger", trigger)
        if current.enabled:
            task = self.current_task(project, current.task_id)
            assert task is not None
            revision = next_trigger_revision(current, project_id=project, trigger_id=trigger,
                                             task_id=None, enabled=False, task=task,
                                             now_ms=self._now_ms)
            assert revision is not None
            self._append_trigger_revision(revision, current)
        self._conn.execute(self._q["trigger_head_delete"], {**key, "now_ms": self._now_ms})
        [view] = DefinitionReader(self._conn, self._q).trigger_list(project, trigger,
                                                                     include_deleted=True)
        return view

    def task_delete(self, project: str, task: str) -> TaskView:
        """Stop a task (a disabled revision) and hide it; refused while triggers use it."""
        project_id(project)
        entity_id(task, "task")
        self.active_project(project)
        key = {"project_id": project, "task_id": task}
        head = self._one("task_head_get", key)
        current = self.current_task(project, task)
        if head is None or current is None or head["deleted_at_ms"] is not None:
            raise NotFound("task", task)
        bound = [row["trigger_id"] for row in
                 self._conn.execute(self._q["trigger_ids_for_task"], key).fetchall()]
        if bound:
            raise Conflict(f"task {task!r} is used by the trigger(s) {', '.join(bound)}; "
                           "delete those first")
        if current.enabled:
            revision = next_task_revision(current, project_id=project, task_id=task,
                                          name=current.name, spec=current.spec, enabled=False,
                                          now_ms=self._now_ms)
            assert revision is not None
            self._append_task_revision(revision, current)
        self._conn.execute(self._q["task_head_delete"], {**key, "now_ms": self._now_ms})
        return DefinitionReader(self._conn, self._q).task_get(project, task, include_deleted=True)

    def trigger_pause(self, params: TriggerPauseParams) -> TriggerView:
        """Pause a trigger from now (until ``until_ms``, or until resumed). Pausing a paused
        trigger again changes when its pause ends and why; the pause keeps its start."""
        key = self._live_trigger(params.project_id, params.trigger_id)
        until = params.until_ms
        if until is not None and (not isinstance(until, int) or isinstance(until, bool)
                                  or until <= self._now_ms):
            raise InvalidInput("until", "must be later than now")
        if until is not None and until - self._now_ms > MAX_PAUSE_MS:
            raise InvalidInput("until", "must be within 10 years (leave it out to pause until "
                                        "resumed)")
        reason = params.reason
        if reason is not None and (not reason.strip() or len(reason) > MAX_PAUSE_REASON):
            raise InvalidInput("reason", f"must be 1 to {MAX_PAUSE_REASON} characters")
        open_pause = self._one("trigger_pause_open", {**key, "now_ms": self._now_ms})
        if open_pause is None:
            began = self._now_ms
            self._conn.execute(self._q["trigger_pause_insert"], {
                **key, "now_ms": began, "until_ms": until, "reason": reason,
                "actor": actor_name(params.actor)})
        else:
            began = int(open_pause["paused_at_ms"])
            self._conn.execute(self._q["trigger_pause_amend"], {
                **key, "paused_at_ms": began, "until_ms": until, "reason": reason})
        self._conn.execute(self._q["schedule_pause_set"], {
            **key, "paused_from_ms": began, "paused_until_ms": until, "now_ms": self._now_ms})
        [view] = DefinitionReader(self._conn, self._q).trigger_list(key["project_id"],
                                                                     key["trigger_id"])
        return view

    def trigger_resume(self, params: TriggerResumeParams) -> TriggerView:
        """End the trigger's pause now; the occurrence in progress follows the misfire policy."""
        key = self._live_trigger(params.project_id, params.trigger_id)
        open_pause = self._one("trigger_pause_open", {**key, "now_ms": self._now_ms})
        if open_pause is None:
            raise Conflict(f"trigger {params.trigger_id!r} is not paused")
        began = int(open_pause["paused_at_ms"])
        self._conn.execute(self._q["trigger_pause_end"], {
            **key, "paused_at_ms": began, "now_ms": self._now_ms,
            "actor": actor_name(params.actor)})
        self._conn.execute(self._q["schedule_pause_set"], {
            **key, "paused_from_ms": began, "paused_until_ms": self._now_ms,
            "now_ms": self._now_ms})
        [view] = DefinitionReader(self._conn, self._q).trigger_list(key["project_id"],
                                                                     key["trigger_id"])
        return view

    def project_pause(self, params: ProjectPauseParams) -> list[TriggerView]:
        """Pause every trigger of the project (one pause each, in this transaction); a
        trigger already paused gets the new end and reason."""
        for trigger in self._project_triggers(params.project_id):
            self.trigger_pause(TriggerPauseParams(
                project_id=params.project_id, trigger_id=trigger, actor=params.actor,
                until_ms=params.until_ms, reason=params.reason))
        return DefinitionReader(self._conn, self._q).trigger_list(params.project_id, None)

    def project_resume(self, params: ProjectPauseParams) -> list[TriggerView]:
        """Resume every paused trigger of the project; refused when none is paused."""
        resumed = 0
        for trigger in self._project_triggers(params.project_id):
            key = {"project_id": params.project_id, "trigger_id": trigger}
            if self._one("trigger_pause_open", {**key, "now_ms": self._now_ms}) is not None:
                self.trigger_resume(TriggerResumeParams(project_id=params.project_id,
                                                        trigger_id=trigger, actor=params.actor))
                resumed += 1
        if not resumed:
            raise Conflict(f"no trigger of project {params.project_id!r} is paused")
        return DefinitionReader(self._conn, self._q).trigger_list(params.project_id, None)

    def _project_triggers(self, project: str) -> list[str]:
        project_id(project)
        self.active_project(project)
        triggers = [view.revision.trigger_id for view in
                    DefinitionReader(self._conn, self._q).trigger_list(project, None)]
        if not triggers:
            raise Conflict(f"project {project!r} has no triggers")
        return triggers

    def _live_trigger(self, project: str, trigger: str) -> dict[str, str]:
        project_id(project)
        entity_id(trigger, "trigger")
        self.active_project(project)
        key = {"project_id": project, "trigger_id": trigger}
        head = self._one("trigger_head_get", key)
        if head is None or head["deleted_at_ms"] is not None:
            raise NotFound("trigger", trigger)
        return key

    def _append_trigger_revision(self, revision: TriggerRevision, previous: TriggerRevision | None) -> None:
        key = {"project_id": revision.project_id, "trigger_id": revision.trigger_id}
        now = revision.created_at_ms
        if previous is None:
            self._conn.execute(self._q["trigger_head_insert"],
                               {**key, "task_id": revision.task_id, "now_ms": now})
        self._conn.execute(
            self._q["trigger_revision_insert"],
            {
                **key,
                "revision": revision.revision,
                "task_id": revision.task_id,
                "task_revision": revision.task_revision,
                "task_content_digest": revision.task_content_digest,
                "spec_json": revision.spec.json_text(),
                "enabled": revision.enabled,
                "content_digest": revision.content_digest,
                "created_at_ms": now,
            },
        )
        if previous is None:
            self._conn.execute(self._q["schedule_insert"],
                               {**key, "trigger_revision": revision.revision, "now_ms": now})
            return
        advanced = self._conn.execute(
            self._q["trigger_head_advance"],
            {**key, "revision": revision.revision, "expected_revision": previous.revision,
             "now_ms": now},
        )
        if advanced.rowcount != 1:
            raise Conflict(f"trigger {revision.trigger_id!r} changed concurrently; publish again")
        self._conn.execute(self._q["schedule_reset"],
                           {**key, "trigger_revision": revision.revision, "now_ms": now})


class DefinitionReader:
    """Definition reads (inside a read transaction the adapter opened)."""

    def __init__(self, conn: Connection, queries: Queries) -> None:
        self._conn = conn
        self._q = queries

    def _require_project(self, project: str) -> None:
        if self._conn.execute(self._q["project_get"], {"id": project}).fetchone() is None:
            raise NotFound("project", project)

    def project_get(self, project: str) -> Project:
        row = self._conn.execute(self._q["project_get"], {"id": project}).fetchone()
        if row is None:
            raise NotFound("project", project)
        return records.project_from_row(row)

    def project_list(self) -> list[Project]:
        return [records.project_from_row(r) for r in self._conn.execute(self._q["project_list"]).fetchall()]

    def global_limit_get(self) -> int | None:
        row = self._conn.execute(self._q["global_limit_get"]).fetchone()
        return None if row is None else int(row["max_running"])

    def task_list(self, project: str, include_deleted: bool = False,
                  task_id: str | None = None) -> list[TaskView]:
        self._require_project(project)
        rows = self._conn.execute(self._q["task_list"], {
            "project_id": project, "task_id": task_id, "include_deleted": include_deleted,
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
        rows = self._conn.execute(self._q["task_revision_list"],
                                  {"project_id": project, "task_id": task}).fetchall()
        return [records.task_revision(row) for row in rows]

    def trigger_list(self, project: str | None, trigger_id: str | None,
                     include_deleted: bool = False) -> list[TriggerView]:
        if project is not None:
            project_id(project)
            self._require_project(project)
        if trigger_id is not None:
            entity_id(trigger_id, "trigger")
        rows = self._conn.execute(self._q["trigger_list"], {
            "project_id": project, "trigger_id": trigger_id, "include_deleted": include_deleted,
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
