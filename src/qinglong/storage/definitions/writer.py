"""Publishing definitions: projects, tasks and triggers (inside a write transaction of the
store, at one reading of its clock).

A publish appends an immutable revision (nothing when the content is the same), compiles
the task's execution plan in the same transaction, re-pins the triggers of a task, and
resets a trigger's schedule row so that no claim taken before it can commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from qinglong.domain.identifiers import display_name, entity_id, project_id
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
from qinglong.storage.dbapi import Row
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TaskPublishResult,
    TriggerPublishParams,
    TriggerPublishResult,
)
from qinglong.storage.definitions.reader import DefinitionReader
from qinglong.storage.definitions.trigger_flows import check_flow_values, flow_task
from qinglong.storage.kernel import Tx


def _spec_extras(params: TriggerPublishParams) -> dict[str, Any]:
    return {name: getattr(params, name)
            for name in ("dst_gap", "dst_overlap", "jitter_s", "jitter_random_s", "parameters")}


_HEAD_GET = {"task": "task_head_get", "trigger": "trigger_head_get"}


class DefinitionWriter:
    def __init__(self, tx: Tx, executor_type: ExecutorType, now_ms: int):
        self.tx = self._tx = tx
        self._executor_type = executor_type
        self.now_ms = self._now_ms = now_ms

    def _one(self, name: str, params: Mapping[str, object]) -> Row | None:
        return self._tx.one(name, params)

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
        return self._project_status(project, "project_archive", "project_archival_open",
                                    "is already archived")

    def project_unarchive(self, project: str) -> Project:
        return self._project_status(project, "project_unarchive", "project_archival_close",
                                    "is not archived")

    def _project_status(self, project: str, change: str, archival: str, refusal: str) -> Project:
        """Archive or restore a project (``change``) and open or close its archival record
        (``archival``); Conflict, saying it ``refusal``, when it is already so."""
        project_id(project)
        row = self._one(change, {"id": project, "now_ms": self._now_ms})
        if row is None:
            if self._one("project_get", {"id": project}) is None:
                raise NotFound("project", project)
            raise Conflict(f"project {project!r} {refusal}")
        self._tx.execute(archival, {"id": project, "now_ms": self._now_ms})
        return records.project_from_row(row)

    # -- limits -----------------------------------------------------------------------

    def global_limit_set(self, max_running: int | None) -> None:
        if max_running is None:
            self._tx.execute("global_limit_clear")
            return
        if (not isinstance(max_running, int) or isinstance(max_running, bool)
                or not 1 <= max_running <= MAX_CONCURRENCY):
            raise InvalidInput("max_running", f"must be between 1 and {MAX_CONCURRENCY}")
        self._tx.execute("global_limit_set",
                           {"max_running": max_running, "now_ms": self._now_ms})

    def live_key(self, kind: Literal["task", "trigger"], project: str, name: str) -> dict[str, str]:
        """The key of a task or trigger of an active project that is not deleted (else
        NotFound), its names checked first."""
        project_id(project)
        entity_id(name, kind)
        self.active_project(project)
        key = {"project_id": project, f"{kind}_id": name}
        head = self._one(_HEAD_GET[kind], key)
        if head is None or head["deleted_at_ms"] is not None:
            raise NotFound(kind, name)
        return key

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
                self._tx.execute("task_head_restore",
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
            self._tx.execute("task_head_insert", {**key, "now_ms": now})
        self._tx.execute("task_revision_insert",
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
        self._tx.execute("task_execution_revision_insert",
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
            advanced = self._tx.execute("task_head_advance",
                {**key, "revision": revision.revision, "expected_revision": previous.revision,
                 "now_ms": now},
            )
            if advanced.rowcount != 1:
                raise Conflict(f"task {revision.task_id!r} changed concurrently; publish again")

    def _repin_triggers(self, task: TaskRevision) -> list[str]:
        repinned = []
        rows = self._tx.execute("trigger_ids_for_task", {"project_id": task.project_id, "task_id": task.task_id}
        ).fetchall()
        for row in rows:
            current = self.current_trigger(task.project_id, row["trigger_id"])
            assert current is not None
            try:
                revision = next_trigger_revision(
                    current,
                    project_id=task.project_id,
                    trigger_id=current.trigger_id,
                    task_id=None,
                    enabled=current.enabled,
                    task=task,
                    now_ms=task.created_at_ms,
                )
            except InvalidInput as exc:  # its values no longer fit the task
                raise InvalidInput(
                    f"trigger {current.trigger_id}: {exc.field}",
                    f"{exc.rule}; change the trigger's values first (`ql trigger publish "
                    "--param`/`--no-params`), or publish the task with --no-repin") from None
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
                       and params.overlap is None and params.flow is None
                       and all(value is None for value in extras.values()))
        if current is None or (deleted and switch_only):
            if switch_only:
                raise NotFound("trigger", params.trigger_id)  # enable/disable of no trigger
            if params.task_id is None and params.flow is None:
                raise InvalidInput("task", f"is required for a new trigger ({params.trigger_id!r} "
                                           "does not exist yet), or --flow")
        flow = params.flow if current is None else current.spec.flow
        if params.flow is not None:
            entity_id(params.flow, "flow")
        if current is None and flow is not None:
            task_id = flow_task(self._tx, params.project_id, flow, params.task_id)
        else:
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
            flow=params.flow,
            **extras,
        )
        if revision is not None and revision.spec.flow is not None:
            check_flow_values(self._tx, params.project_id, revision.spec.flow,
                              revision.spec.values)
        if revision is None:
            assert current is not None
            if deleted:
                self._tx.execute("trigger_head_restore", key)
            return TriggerPublishResult(revision=current, created=False, restored=deleted)
        self._append_trigger_revision(revision, current)
        return TriggerPublishResult(revision=revision, created=True, restored=deleted)

    def trigger_delete(self, project: str, trigger: str) -> TriggerView:
        """Stop a trigger (a disabled revision, so the scheduler and the audit see it end)
        and hide it; its revisions stay."""
        key = self.live_key("trigger", project, trigger)
        current = self.current_trigger(project, trigger)
        assert current is not None  # a head has its current revision
        if current.enabled:
            task = self.current_task(project, current.task_id)
            assert task is not None
            revision = next_trigger_revision(current, project_id=project, trigger_id=trigger,
                                             task_id=None, enabled=False, task=task,
                                             now_ms=self._now_ms)
            assert revision is not None
            self._append_trigger_revision(revision, current)
        self._tx.execute("trigger_head_delete", {**key, "now_ms": self._now_ms})
        [view] = DefinitionReader(self._tx).trigger_list(project, trigger,
                                                                     include_deleted=True)
        return view

    def task_delete(self, project: str, task: str) -> TaskView:
        """Stop a task (a disabled revision) and hide it; refused while triggers use it."""
        key = self.live_key("task", project, task)
        current = self.current_task(project, task)
        assert current is not None  # a head has its current revision
        bound = [row["trigger_id"] for row in
                 self._tx.execute("trigger_ids_for_task", key).fetchall()]
        if bound:
            raise Conflict(f"task {task!r} is used by the trigger(s) {', '.join(bound)}; "
                           "delete those first")
        if current.enabled:
            revision = next_task_revision(current, project_id=project, task_id=task,
                                          name=current.name, spec=current.spec, enabled=False,
                                          now_ms=self._now_ms)
            assert revision is not None
            self._append_task_revision(revision, current)
        self._tx.execute("task_head_delete", {**key, "now_ms": self._now_ms})
        return DefinitionReader(self._tx).task_get(project, task, include_deleted=True)

    def _append_trigger_revision(self, revision: TriggerRevision, previous: TriggerRevision | None) -> None:
        key = {"project_id": revision.project_id, "trigger_id": revision.trigger_id}
        now = revision.created_at_ms
        if previous is None:
            self._tx.execute("trigger_head_insert",
                               {**key, "task_id": revision.task_id, "now_ms": now})
        self._tx.execute("trigger_revision_insert",
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
            self._tx.execute("schedule_insert",
                               {**key, "trigger_revision": revision.revision, "now_ms": now})
            return
        advanced = self._tx.execute("trigger_head_advance",
            {**key, "revision": revision.revision, "expected_revision": previous.revision,
             "now_ms": now},
        )
        if advanced.rowcount != 1:
            raise Conflict(f"trigger {revision.trigger_id!r} changed concurrently; publish again")
        self._tx.execute("schedule_reset",
                           {**key, "trigger_revision": revision.revision, "now_ms": now})
