"""Declarative definitions: plan and apply projects, tasks, triggers and flows as files say
they should be (docs/controls/apply.md; flows in ``definition_flows``).

``plan`` reads what is stored, checks everything a write would refuse, and returns the
changes field by field without writing; ``apply`` writes them. A problem anywhere (a file, a
field, a state the store would refuse) is reported with the file and line it comes from, and
nothing is written. The model is in ``definition_model``, the field views in
``definition_fields``, the plan's shape in ``definition_plan``, the export in
``definition_export``.

``apply`` writes each project in one unit of work: its project, tasks and triggers commit
together or not at all. Everything is validated first, so what can still stop an apply is
only what changed meanwhile (a concurrent publish, a lost connection); the project it
stopped in is then rolled back whole, ``ApplyStopped`` says which projects were written
before it and what was not, and applying again writes only what still differs.

Environment entries are plain values or secrets (``definition_env``). Values never appear
in a plan: only ``(set)`` (plain), ``(secret)``, ``(changed)``, ``-`` (none).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol, TypeVar

from qinglong.domain.interval import IntervalSchedule
from qinglong.domain.model import ProjectStatus, TaskView, TriggerView
from qinglong.domain.occurrences import instant_text
from qinglong.domain.once import OnceSchedule
from qinglong.domain.task import CommandSpec
from qinglong.errors import NotFound, QinglongError
from qinglong.service.definition_env import env_field_changes, resolve_env
from qinglong.service.definition_export import export_definitions
from qinglong.service.definition_fields import (
    TRIGGER_DEFAULTS,
    FieldChange,
    created_fields,
    default_policy_noise,
    diff_fields,
    target_change,
    task_fields,
    trigger_fields,
)
from qinglong.service.definition_flows import plan_flows
from qinglong.service.definition_model import (
    Definitions,
    DesiredProject,
    DesiredTask,
    DesiredTrigger,
    Issues,
)
from qinglong.service.definition_plan import (
    PHASE_PROJECT,
    PHASE_STOP_TRIGGERS,
    PHASE_TASKS,
    PHASE_TRIGGERS,
    Action,
    ApplyStopped,
    Change,
    FlowPublishParams,
    Plan,
    WriteParams,
    action_of,
)
from qinglong.service.definition_task_spec import ScriptPinner, desired_spec, pinned_command, pulls
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.runs.flow_store import FlowStore

T = TypeVar("T")


class Declarative:
    """Plan, apply and export definitions over one DefinitionStore."""

    def __init__(self, definitions: DefinitionStore, unit: UnitRunner,
                 flows: FlowStore | None = None,
                 pin_script: ScriptPinner | None = None) -> None:
        self._store = definitions
        self._unit = unit
        self._flows = flows
        self._pin_script = pin_script
        self._now_ms: int | None = None

    # -- plan ---------------------------------------------------------------------------

    def plan(self, wanted: Definitions, *, prune: bool = False,
             environ: Mapping[str, str] | None = None,
             cwd_must_exist: bool = False, now_ms: int | None = None) -> Plan:
        """What applying ``wanted`` would write, field by field; DefinitionErrors (with
        every problem found) when any write would be refused. Writes nothing. ``now_ms``
        (the caller's clock) lets the plan refuse a one-shot instant that has passed."""
        issues = Issues()
        self._now_ms = now_ms
        changes: list[Change] = []
        for project_id in sorted(wanted.projects):
            changes.extend(self._plan_project(wanted.projects[project_id], prune,
                                              environ or {}, cwd_must_exist, issues))
        issues.raise_any()
        kinds = {"project": 0, "trigger": 1, "task": 2, "flow": 3}
        changes.sort(key=lambda c: (c.project_id, c.phase, kinds[c.kind], c.item_id))
        return Plan(changes)

    def _plan_project(self, want: DesiredProject, prune: bool, environ: Mapping[str, str],
                      cwd_must_exist: bool, issues: Issues) -> list[Change]:
        project_id = want.project_id
        try:
            project = self._store.project_get(project_id)
        except NotFound:
            project = None
        changes: list[Change] = []
        tasks_now: dict[str, TaskView] = {}
        triggers_now: dict[str, TriggerView] = {}
        if project is None:
            changes.append(Change(
                kind="project", project_id=project_id, item_id=project_id, action=Action.CREATE,
                fields=(FieldChange("name", None, want.name or project_id),), where=want.where,
                phase=PHASE_PROJECT,
                params=ProjectCreateParams(project_id=project_id, name=want.name)))
        elif project.status is ProjectStatus.ARCHIVED:
            issues.add(want.where, "project", f"project {project_id!r} is archived; unarchive "
                       f"it first (ql project unarchive {project_id})")
            return []
        else:
            changes.append(Change(kind="project", project_id=project_id, item_id=project_id,
                                  action=Action.UNCHANGED, where=want.where,
                                  phase=PHASE_PROJECT))
            tasks_now = {v.revision.task_id: v for v in self._store.task_list(project_id, True)}
            triggers_now = {v.revision.trigger_id: v
                            for v in self._store.trigger_list(project_id, None, True)}
        task_changes: dict[str, Change] = {}
        for task_id, task in sorted(want.tasks.items()):
            change = self._plan_task(task, tasks_now.get(task_id), environ, cwd_must_exist,
                                     issues)
            if change is not None:
                task_changes[task_id] = change
                changes.append(change)
        for trigger_id, trigger in sorted(want.triggers.items()):
            bound = want.tasks.get(trigger.task_id)
            if bound is None:
                continue  # reported by merge_projects
            change = self._plan_trigger(trigger, triggers_now.get(trigger_id), bound,
                                        task_changes.get(trigger.task_id), issues)
            if change is not None:
                changes.append(change)
        changes.extend(self._extras(want, tasks_now, triggers_now, prune))
        if want.flows:
            changes.extend(plan_flows(want, None if self._flows is None else self._flows.flow_list,
                                      project is not None, tasks_now, task_changes, issues))
        # A task whose triggers are all republished here anyway does not re-pin them first
        # (that would write a revision of each trigger only to replace it a moment later).
        republished = {c.item_id for c in changes if c.kind == "trigger" and c.params is not None}
        for task_id, change in task_changes.items():
            if not isinstance(change.params, TaskPublishParams) or change.action is Action.CREATE:
                continue
            pinned = [v.revision.trigger_id for v in triggers_now.values()
                      if v.revision.task_id == task_id and v.deleted_at_ms is None]
            if pinned and all(trigger_id in republished for trigger_id in pinned):
                change.params = replace(change.params, repin_triggers=False)
        return changes

    def _plan_task(self, task: DesiredTask, view: TaskView | None, environ: Mapping[str, str],
                   cwd_must_exist: bool, issues: Issues) -> Change | None:
        current = view.revision if view else None
        stored = {e.name: e for e in current.spec.environment} if current else {}
        entries = resolve_env(task, stored, environ, issues)
        if entries is None:
            return None
        command = pinned_command(task, self._pin_script, issues)
        spec = None if command is None else desired_spec(task, command, entries, issues)
        if command is None or spec is None:
            return None
        if (cwd_must_exist and spec.working_directory is not None
                and not Path(spec.working_directory).is_dir()):
            issues.add(task.at("cwd"), task.field_name("cwd"),
                       f"directory {spec.working_directory!r} does not exist on this host "
                       "(commands of the SQLite profiles run here)")
            return None
        wanted = task_fields(task.name, spec, task.enabled)
        if current is None:
            defaults = task_fields(task.task_id, CommandSpec(command=command), True)
            defaults["bash"] = False
            fields = created_fields(wanted, defaults, ("shell", "argv", "script"))
            fields += env_field_changes((), spec.environment)
            action = Action.CREATE
        else:
            fields = diff_fields(task_fields(current.name, current.spec, current.enabled), wanted)
            fields += env_field_changes(current.spec.environment, spec.environment)
            action = action_of(fields, deleted=view is not None and view.deleted_at_ms is not None)
        params = None if action is Action.UNCHANGED else TaskPublishParams(
            project_id=task.project_id, task_id=task.task_id, name=task.name, spec=spec,
            enabled=task.enabled, repin_triggers=True,
            expected_revision=current.revision if current else None)
        return Change(kind="task", project_id=task.project_id, item_id=task.task_id,
                      action=action, fields=tuple(fields), where=task.where, phase=PHASE_TASKS,
                      params=params, revision=current.revision if current else None)

    def _plan_trigger(self, trigger: DesiredTrigger, view: TriggerView | None,
                      task: DesiredTask, task_change: Change | None,
                      issues: Issues) -> Change | None:
        spec, keep_anchor = trigger.spec, trigger.keep_anchor
        stored = view.revision.spec.schedule if view is not None else None
        if keep_anchor and isinstance(stored, IntervalSchedule):
            assert isinstance(spec.schedule, IntervalSchedule)
            spec = replace(spec, schedule=replace(spec.schedule, anchor_ms=stored.anchor_ms))
            keep_anchor = False
        wanted = trigger_fields(trigger.task_id, spec, trigger.enabled, keep_anchor=keep_anchor)
        if view is None:
            fields = created_fields(wanted, TRIGGER_DEFAULTS,
                                     ("task", "cron", "every", "anchor", "at", "timezone"))
            action = Action.CREATE
        else:
            current = view.revision
            if current.task_id != trigger.task_id:
                issues.add(trigger.at("task"), trigger.field_name("task"),
                           f"trigger {trigger.trigger_id!r} is bound to task "
                           f"{current.task_id!r} for life; give the trigger a new id to run "
                           f"{trigger.task_id!r}")
                return None
            if current.spec.flow != spec.flow:
                issues.add(trigger.at("flow" if spec.flow else "task"),
                           trigger.field_name("flow"), target_change(trigger.trigger_id,
                                                                     current.spec, spec))
                return None
            stored_fields = trigger_fields(current.task_id, current.spec, current.enabled)
            fields = [change for change in diff_fields(stored_fields, wanted)
                      if not default_policy_noise(change)]
            # A stale pin (the task moved on without it) is re-pinned when the trigger should
            # fire and no new enabled task revision re-pins it anyway.
            task_repins = (task_change is not None and task_change.params is not None
                           and task.enabled and task_change.action is not Action.CREATE
                           and (task_change.action is not Action.RESTORE
                                or bool(task_change.fields)))
            if (not view.task_pin_current and trigger.enabled and task.enabled
                    and not task_repins and view.deleted_at_ms is None):
                fields.append(FieldChange("pin", f"task revision {current.task_revision}",
                                          "the task's current revision"))
            action = action_of(fields, deleted=view.deleted_at_ms is not None)
        writes = action is not Action.UNCHANGED
        if writes and trigger.enabled and not task.enabled:
            issues.add(trigger.at("enabled"), trigger.field_name("enabled"),
                       f"task {task.task_id!r} is disabled (enabled: false), so this trigger "
                       "cannot be published enabled: set enabled: false here too, or enable "
                       "the task")
            return None
        once = spec.schedule
        if (writes and trigger.enabled and isinstance(once, OnceSchedule)
                and self._now_ms is not None and once.at_ms < self._now_ms
                and (stored is None or stored != once)):
            issues.add(trigger.at("at"), trigger.field_name("at"),
                       f"{instant_text(once.at_ms)} is in the past: a one-shot trigger fires "
                       "only at an instant after it is published (set enabled: false to keep "
                       "it as a record)")
            return None
        stops = (writes and not trigger.enabled and view is not None
                 and view.deleted_at_ms is None)
        expression = spec.expression
        if keep_anchor:  # anchored by the publish
            expression = expression.split(" from ", 1)[0]
        dst, jitter = spec.dst, spec.jitter
        params = TriggerPublishParams(
            project_id=trigger.project_id, trigger_id=trigger.trigger_id,
            task_id=trigger.task_id, expression=expression, timezone=spec.timezone,
            misfire_policy=spec.misfire_policy.value, overlap=spec.overlap,
            enabled=trigger.enabled, dst_gap=dst.gap.value if dst else None,
            dst_overlap=dst.overlap.value if dst else None,
            jitter_s=jitter.max_s if jitter else 0,
            jitter_random_s=jitter.random_s if jitter else 0, parameters=spec.values,
            flow=spec.flow if view is None else None) if writes else None
        return Change(kind="trigger", project_id=trigger.project_id, item_id=trigger.trigger_id,
                      action=action, fields=tuple(fields), where=trigger.where,
                      phase=PHASE_STOP_TRIGGERS if stops else PHASE_TRIGGERS, params=params,
                      revision=view.revision.revision if view else None)

    def _extras(self, want: DesiredProject, tasks_now: Mapping[str, TaskView],
                triggers_now: Mapping[str, TriggerView], prune: bool) -> list[Change]:
        """Enabled tasks and triggers the files do not name: disabled with --prune."""
        project = want.project_id
        changes = [_left_over(
            "trigger", project, trigger_id, view, PHASE_STOP_TRIGGERS,
            TriggerPublishParams(project_id=project, trigger_id=trigger_id, enabled=False)
            if prune else None)
            for trigger_id, view in sorted(triggers_now.items()) if trigger_id not in want.triggers
            and not pulls(tasks_now.get(view.revision.task_id))]
        changes += [_left_over(
            "task", project, task_id, view, PHASE_TASKS,
            TaskPublishParams(project_id=project, task_id=task_id, name=view.revision.name,
                              spec=view.revision.spec, enabled=False,
                              expected_revision=view.revision.revision) if prune else None)
            for task_id, view in sorted(tasks_now.items()) if task_id not in want.tasks
            and not pulls(view)]
        return [change for change in changes if change is not None]

    # -- apply --------------------------------------------------------------------------

    def apply(self, plan: Plan, on_change: Callable[[Change], None] | None = None) -> Plan:
        """Write the plan's changes in order, one transaction per project (``on_change``
        hears of each change, written or not, once its project has committed). A refused
        write raises ApplyStopped: its project wrote nothing, the projects before it did."""
        for project in _by_project(plan.changes):
            self._apply_project(plan, project)
            if on_change is not None:
                for change in project:
                    on_change(change)
        return plan

    def _apply_project(self, plan: Plan, changes: list[Change]) -> None:
        planned = [change.revision for change in changes]
        stopped_at: list[Change] = []

        def undo() -> None:  # the unit rolled back (or runs again): nothing of it stands
            for change, revision in zip(changes, planned, strict=True):
                change.written, change.revision, change.repinned = False, revision, ()

        def work() -> None:
            undo()
            for change in changes:
                if change.params is not None:
                    stopped_at[:] = [change]
                    self._write(change, change.params)

        if not any(change.params is not None for change in changes):
            return
        try:
            self._unit(f"apply project {changes[0].project_id}", work)
        except QinglongError as exc:
            undo()
            raise ApplyStopped(stopped_at[0] if stopped_at else changes[0], exc, plan) from exc

    def _write(self, change: Change, params: WriteParams) -> None:
        if isinstance(params, ProjectCreateParams):
            self._store.project_create(params)
            change.written = True
        elif isinstance(params, FlowPublishParams):
            assert self._flows is not None
            flow = self._flows.flow_publish(params.document, params.project_id)
            change.revision = flow.revision.revision
            change.written = True
        elif isinstance(params, TaskPublishParams):
            result = self._store.task_publish(params)
            change.revision = result.revision.revision
            change.repinned = result.repinned_triggers
            change.written = True
        else:
            published = self._store.trigger_publish(params)
            change.revision = published.revision.revision
            change.written = True


    # -- export -------------------------------------------------------------------------

    def export(self, project_ids: Sequence[str] | None = None
               ) -> tuple[list[DesiredProject], list[str]]:
        """The stored definitions as files would state them, and notes on what a file
        cannot say (see ``definition_export``)."""
        return export_definitions(self._store, project_ids,
                                  None if self._flows is None else self._flows.flow_list)


__all__ = ["Declarative", "UnitRunner"]


class UnitRunner(Protocol):
    """Runs ``work`` as one unit of work: every store call it makes commits together, or
    none does (``storage.kernel.Database.unit``)."""

    def __call__(self, action: str, work: Callable[[], T]) -> T: ...


def _by_project(changes: Sequence[Change]) -> list[list[Change]]:
    """The plan's changes in runs of one project each, in the plan's order."""
    groups: list[list[Change]] = []
    for change in changes:
        if groups and groups[-1][0].project_id == change.project_id:
            groups[-1].append(change)
        else:
            groups.append([change])
    return groups


def _left_over(kind: str, project_id: str, item_id: str, view: TaskView | TriggerView, phase: int,
               disable: WriteParams | None) -> Change | None:
    """A task or trigger the files do not name: None when it is deleted or disabled already,
    else kept, or disabled by ``disable`` (with --prune)."""
    if view.deleted_at_ms is not None or not view.revision.enabled:
        return None
    pruned = disable is not None
    return Change(kind=kind, project_id=project_id, item_id=item_id,
                  action=Action.DISABLE if pruned else Action.KEPT, pruned=pruned,
                  fields=(FieldChange("enabled", True, False),) if pruned else (),
                  phase=phase, revision=view.revision.revision, params=disable)
