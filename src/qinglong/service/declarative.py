"""Declarative definitions: projects, tasks and triggers as files say they should be.

The files (``ql apply -f``, see docs/controls/apply.md) and ``ql import crontab`` both build
the same model: a :class:`DesiredProject` per project, with every task and trigger fully
stated (what a file leaves out takes its default, never the stored value). ``plan`` reads
what is stored, checks everything a write would refuse, and returns the changes field by
field without writing; ``apply`` writes them. A problem anywhere (a file, a field, a state
the store would refuse) is reported with the file and line it comes from, and nothing is
written.

Writes go through the DefinitionStore port one publish at a time (the port has no batch
transaction): everything is validated first, so what can still stop an apply half-way is
only what changed meanwhile (a concurrent publish, a lost connection). ``ApplyStopped``
then says what was written and what was not; applying again writes only what still
differs.

Environment values are write-only in every view, so an exported task names each entry with
``from_env``: the value is read from the environment of ``ql apply``, and when that variable
is not set the value already stored under the entry's name is kept (a new entry needs the
variable). Values never appear in a plan: only ``(set)``, ``(changed)`` or ``(removed)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from qinglong.domain.cron import DstGap, DstOverlap
from qinglong.domain.interval import IntervalSchedule, format_every
from qinglong.domain.model import ProjectStatus, TaskView, TriggerView
from qinglong.domain.occurrences import instant_text
from qinglong.domain.once import OnceSchedule
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.task import (
    DEFAULT_TIMEOUT_MS,
    ArgvCommand,
    CommandSpec,
    EnvEntry,
    ShellCommand,
)
from qinglong.domain.trigger import (
    MisfirePolicy,
    OverlapPolicy,
    TriggerSpec,
)
from qinglong.errors import InvalidInput, NotFound, QinglongError
from qinglong.storage.ports import (
    DefinitionStore,
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)

API_VERSION = "qinglong/v1"


# --- where things come from, and what is wrong with them -------------------------------


@dataclass(frozen=True, slots=True)
class Where:
    """A place in a definitions file (``line`` None: the file as a whole)."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem: ``jobs.yaml:12: triggers.nightly.cron: must have 5 fields ...``."""

    where: Where | None
    field: str
    message: str

    def __str__(self) -> str:
        parts = [str(self.where)] if self.where is not None else []
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {"file": self.where.file if self.where else None,
                "line": self.where.line if self.where else None,
                "field": self.field or None, "message": self.message, "text": str(self)}


class DefinitionErrors(InvalidInput):
    """The definitions have problems; nothing was written."""

    def __init__(self, issues: Sequence[Issue]) -> None:
        files: dict[str, int] = {}
        for issue in issues:
            files.setdefault(issue.where.file if issue.where else "", len(files))
        self.issues = tuple(sorted(issues, key=lambda i: (
            files[i.where.file if i.where else ""], (i.where.line or 0) if i.where else 0)))
        more = f" (and {len(self.issues) - 1} more)" if len(self.issues) > 1 else ""
        super().__init__("definitions", f"{self.issues[0]}{more}")


class Issues:
    """Collects problems so that one pass reports all of them."""

    def __init__(self) -> None:
        self.items: list[Issue] = []

    def add(self, where: Where | None, field_name: str, message: str) -> None:
        self.items.append(Issue(where, field_name, message))

    def raise_any(self) -> None:
        if self.items:
            raise DefinitionErrors(self.items)


# --- the model -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvValue:
    """One environment entry: a literal ``value``, or ``from_env``, the variable of the
    applying process to read it from (the stored value is kept when that is not set)."""

    name: str
    value: str | None = None
    from_env: str | None = None
    where: Where | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DesiredTask:
    project_id: str
    task_id: str
    name: str
    command: ArgvCommand | ShellCommand
    env: tuple[EnvValue, ...] = ()
    working_directory: str | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    idempotent: bool = False
    concurrency: int | None = None
    enabled: bool = True
    where: Where | None = None
    path: str = ""  # how errors name the task's fields: "tasks.hello" (files), "" (crontab)
    lines: Mapping[str, Where] = field(default_factory=dict)  # where each key was given

    def at(self, key: str) -> Where | None:
        return self.lines.get(key.split(".", 1)[0], self.where)

    def field_name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key


@dataclass(frozen=True, slots=True, kw_only=True)
class DesiredTrigger:
    project_id: str
    trigger_id: str
    task_id: str
    spec: TriggerSpec
    enabled: bool = True
    # An interval trigger whose file gives no anchor: ``spec`` holds a placeholder anchor; the
    # stored anchor is kept when the trigger already is an interval trigger, else the publish
    # time anchors it (as for `ql trigger publish --every` without --anchor).
    keep_anchor: bool = False
    where: Where | None = None
    path: str = ""
    lines: Mapping[str, Where] = field(default_factory=dict)

    def at(self, key: str) -> Where | None:
        return self.lines.get(key, self.where)

    def field_name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key


@dataclass(slots=True, kw_only=True)
class DesiredProject:
    project_id: str
    name: str | None = None  # used when apply creates the project
    tasks: dict[str, DesiredTask] = field(default_factory=dict)
    triggers: dict[str, DesiredTrigger] = field(default_factory=dict)
    where: Where | None = None


@dataclass(frozen=True, slots=True)
class Definitions:
    projects: Mapping[str, DesiredProject]


def merge_projects(documents: Iterable[DesiredProject], issues: Issues) -> Definitions:
    """One project per id (several documents may add to one project), each trigger's task
    defined among the project's tasks."""
    projects: dict[str, DesiredProject] = {}
    for doc in documents:
        into = projects.get(doc.project_id)
        if into is None:
            projects[doc.project_id] = DesiredProject(
                project_id=doc.project_id, name=doc.name, tasks=dict(doc.tasks),
                triggers=dict(doc.triggers), where=doc.where)
            continue
        if doc.name is not None:
            if into.name is not None and into.name != doc.name:
                issues.add(doc.where, "name", f"project {doc.project_id!r} is named "
                           f"{into.name!r} at {into.where}")
            into.name = doc.name
        for task_id, task in doc.tasks.items():
            if task_id in into.tasks:
                issues.add(task.where, task.path or task_id,
                           f"task {task_id!r} is defined twice (also at {into.tasks[task_id].where})")
            into.tasks[task_id] = task
        for trigger_id, trigger in doc.triggers.items():
            if trigger_id in into.triggers:
                issues.add(trigger.where, trigger.path or trigger_id,
                           f"trigger {trigger_id!r} is defined twice "
                           f"(also at {into.triggers[trigger_id].where})")
            into.triggers[trigger_id] = trigger
    for project in projects.values():
        for trigger in project.triggers.values():
            if trigger.task_id not in project.tasks:
                issues.add(trigger.at("task"), trigger.field_name("task"),
                           f"task {trigger.task_id!r} is not defined in project "
                           f"{project.project_id!r} (define it under tasks)")
    return Definitions(projects=projects)


# --- durations -------------------------------------------------------------------------

_PART = re.compile(r"\s*(\d{1,15}(?:\.\d{1,6})?)\s*(ms|s|m|h|d)")
_UNIT_MS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
_UNITS = list(_UNIT_MS)


def parse_duration(text: str) -> int:
    """``500ms``, ``30s``, ``1h30m``, ``1d`` (the CLI's grammar) in milliseconds."""
    hint = (f"{text!r} is not a duration; use numbers with units (d, h, m, s, ms), largest "
            "first: 500ms, 30s, 5m, 1h30m, 1d")
    position, total, last = 0, 0.0, -1
    stripped = text.rstrip()
    while position < len(stripped):
        match = _PART.match(stripped, position)
        if not match:
            raise ValueError(hint)
        unit = _UNITS.index(match.group(2))
        if unit <= last:
            raise ValueError(hint)
        last = unit
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        position = match.end()
    if last < 0 or total != int(total) or total > 2**53 - 1:
        raise ValueError(hint)
    return int(total)


def format_duration(ms: int) -> str:
    """The shortest text ``parse_duration`` reads back as ``ms``: ``1h30m``, ``500ms``."""
    parts, rest = [], ms
    for unit, size in _UNIT_MS.items():
        if rest >= size:
            count, rest = divmod(rest, size)
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


# --- field-by-field views (what a plan shows) -------------------------------------------

SET, CHANGED = "(set)", "(changed)"


def task_fields(name: str, spec: CommandSpec, enabled: bool) -> dict[str, object]:
    """A task as the file's fields (environment values left out)."""
    fields: dict[str, object] = {"name": name}
    command = spec.command
    if isinstance(command, ShellCommand):
        fields["shell"] = command.command
        fields["bash"] = command.shell == "/bin/bash"
    else:
        fields["argv"] = command.argv()
    retry = spec.retry
    fields.update({
        "cwd": spec.working_directory,
        "timeout": format_duration(spec.timeout_ms),
        "retry.max_attempts": retry.max_attempts,
        "retry.backoff": format_duration(retry.backoff_ms),
        "retry.max_backoff": format_duration(retry.max_backoff_ms),
        "retry.on_exit": list(retry.on_exit_codes) or "any",
        "retry.on_timeout": retry.on_timeout,
        "idempotent": spec.idempotent,
        "concurrency": spec.concurrency,
        "enabled": enabled,
    })
    return fields


PUBLISH_TIME = "(the publish time)"  # an anchor a file leaves to the publish


def schedule_fields(spec: TriggerSpec, *, keep_anchor: bool = False) -> dict[str, object]:
    """The schedule as the file's keys: ``cron`` (with ``dst_gap``, ``dst_overlap``),
    ``every`` and ``anchor``, or ``at``."""
    schedule = spec.schedule
    if isinstance(schedule, IntervalSchedule):
        return {"every": format_every(schedule.every_s),
                "anchor": PUBLISH_TIME if keep_anchor else instant_text(schedule.anchor_ms)}
    if isinstance(schedule, OnceSchedule):
        return {"at": instant_text(schedule.at_ms)}
    return {"cron": schedule.expression, "dst_gap": schedule.dst.gap.value,
            "dst_overlap": schedule.dst.overlap.value}


def trigger_fields(task_id: str, spec: TriggerSpec, enabled: bool, *,
                   keep_anchor: bool = False) -> dict[str, object]:
    jitter = spec.jitter
    return {
        "task": task_id,
        **schedule_fields(spec, keep_anchor=keep_anchor),
        "timezone": spec.timezone,
        "jitter": format_duration(jitter.max_s * 1000) if jitter else None,
        "jitter_random": (format_duration(jitter.random_s * 1000)
                          if jitter and jitter.random_s else None),
        "misfire": spec.misfire_policy.value,
        "overlap": spec.overlap.policy.value,
        "overlap_queue_limit": (spec.overlap.queue_limit
                                if spec.overlap.policy is OverlapPolicy.QUEUE else None),
        "enabled": enabled,
    }


_TRIGGER_DEFAULTS: dict[str, object] = {
    "jitter": None, "jitter_random": None,
    "dst_gap": DstGap.SHIFT.value, "dst_overlap": DstOverlap.FIRST.value,
    "misfire": MisfirePolicy.SKIP.value, "overlap": OverlapPolicy.ALLOW.value,
    "overlap_queue_limit": None, "enabled": True}


def _default_policy_noise(change: FieldChange) -> bool:
    """A cron trigger's default DST policy appearing or going with a change of kind (a cron
    trigger always states its policy, other kinds have none): not a change worth showing."""
    default = _TRIGGER_DEFAULTS.get(change.field)
    return (change.field in ("dst_gap", "dst_overlap")
            and {change.before, change.after} == {default, None})


@dataclass(frozen=True, slots=True)
class FieldChange:
    field: str
    before: object  # None: not set
    after: object

    def to_json(self) -> dict[str, object]:
        return {"field": self.field, "from": self.before, "to": self.after}


def _diff(before: Mapping[str, object], after: Mapping[str, object]) -> list[FieldChange]:
    keys = list(before) + [k for k in after if k not in before]
    return [FieldChange(k, before.get(k), after.get(k)) for k in keys
            if before.get(k) != after.get(k)]


def _env_diff(before: Mapping[str, str], after: Mapping[str, str]) -> list[FieldChange]:
    changes = []
    for name in sorted(before.keys() | after.keys()):
        if name not in before:
            changes.append(FieldChange(f"env.{name}", None, SET))
        elif name not in after:
            changes.append(FieldChange(f"env.{name}", SET, None))
        elif before[name] != after[name]:
            changes.append(FieldChange(f"env.{name}", SET, CHANGED))
    return changes


def _created_fields(values: Mapping[str, object], defaults: Mapping[str, object],
                    always: Sequence[str]) -> list[FieldChange]:
    return [FieldChange(k, None, v) for k, v in values.items()
            if v is not None and (k in always or defaults.get(k) != v)]


# --- plans ---------------------------------------------------------------------------


class Action(StrEnum):
    CREATE = "create"
    CHANGE = "change"
    RESTORE = "restore"  # it had been deleted
    ENABLE = "enable"
    DISABLE = "disable"
    UNCHANGED = "unchanged"
    KEPT = "kept"  # stored, enabled, not in the files, and no --prune: left as it is


# Writes in this order, per project: create the project; stop the triggers that end up
# disabled (before their tasks change, so none fires a task revision it should not); publish
# the tasks (their triggers are re-pinned with them); publish the other triggers.
PHASE_PROJECT, PHASE_STOP_TRIGGERS, PHASE_TASKS, PHASE_TRIGGERS = range(4)

WriteParams = ProjectCreateParams | TaskPublishParams | TriggerPublishParams


@dataclass(slots=True, kw_only=True)
class Change:
    kind: str  # project | task | trigger
    project_id: str
    item_id: str
    action: Action
    fields: tuple[FieldChange, ...] = ()
    pruned: bool = False  # disabled by --prune: no longer in the files
    where: Where | None = None
    phase: int = PHASE_TASKS
    params: WriteParams | None = None  # None: nothing to write
    revision: int | None = None  # stored now (plan), or written (apply)
    repinned: tuple[str, ...] = ()  # triggers the store re-pinned with a task
    written: bool = False

    @property
    def label(self) -> str:
        return self.project_id if self.kind == "project" else f"{self.project_id}/{self.item_id}"

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "project": self.project_id,
                "id": self.item_id, "action": self.action.value, "pruned": self.pruned,
                "source": str(self.where) if self.where else None,
                "fields": [c.to_json() for c in self.fields], "revision": self.revision,
                "repinned_triggers": list(self.repinned), "written": self.written}


@dataclass(slots=True)
class Plan:
    changes: list[Change]

    @property
    def writes(self) -> list[Change]:
        return [c for c in self.changes if c.params is not None]

    def counts(self) -> dict[str, int]:
        counts = {action.value: 0 for action in Action}
        for change in self.changes:
            if change.kind != "project" or change.action is not Action.UNCHANGED:
                counts[change.action.value] += 1
        return counts


class ApplyStopped(Exception):
    """A write failed after others landed (only what changed since the plan can do this)."""

    def __init__(self, change: Change, cause: QinglongError, plan: Plan) -> None:
        self.change = change
        self.cause = cause
        self.written = [c for c in plan.writes if c.written]
        self.not_written = [c for c in plan.writes if not c.written]
        super().__init__(f"apply stopped at {change.kind} {change.label}: {cause.message}")


_SPEC_FIELDS = {  # domain field names -> the file's keys
    "working-directory": "cwd", "timeout": "timeout", "concurrency": "concurrency",
    "idempotent": "idempotent", "environment": "env", "retry": "retry",
    "command": "command", "command.command": "shell", "command.shell": "bash",
    "command.file": "argv", "command.args": "argv",
}


def spec_key(domain_field: str) -> str:
    base = domain_field.split("[", 1)[0]
    if base.startswith("environment."):
        return "env." + base.split(".", 1)[1]
    return _SPEC_FIELDS.get(base, base)


class Declarative:
    """Plan, apply and export definitions over one DefinitionStore."""

    def __init__(self, definitions: DefinitionStore) -> None:
        self._store = definitions
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
        kinds = {"project": 0, "trigger": 1, "task": 2}
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

    def _resolve_env(self, task: DesiredTask, stored: Mapping[str, str],
                     environ: Mapping[str, str], issues: Issues) -> list[EnvEntry] | None:
        entries, ok = [], True
        for item in task.env:
            value = item.value
            if value is None:
                assert item.from_env is not None
                value = environ.get(item.from_env, stored.get(item.name))
                if value is None:
                    issues.add(item.where, task.field_name(f"env.{item.name}.from_env"),
                               f"${item.from_env} is not set in the environment of ql apply, "
                               f"and the task has no stored value for {item.name}")
                    ok = False
                    continue
            try:
                entries.append(EnvEntry(name=item.name, value=value))
            except InvalidInput as exc:
                issues.add(item.where, task.field_name(f"env.{item.name}"), exc.rule)
                ok = False
        return entries if ok else None

    def _plan_task(self, task: DesiredTask, view: TaskView | None, environ: Mapping[str, str],
                   cwd_must_exist: bool, issues: Issues) -> Change | None:
        current = view.revision if view else None
        stored = {e.name: e.value for e in current.spec.environment} if current else {}
        entries = self._resolve_env(task, stored, environ, issues)
        if entries is None:
            return None
        try:
            spec = CommandSpec(command=task.command, environment=tuple(entries),
                               working_directory=task.working_directory,
                               timeout_ms=task.timeout_ms, retry=task.retry,
                               idempotent=task.idempotent, concurrency=task.concurrency)
        except InvalidInput as exc:
            key = spec_key(exc.field)
            issues.add(task.at(key), task.field_name(key), exc.rule)
            return None
        if (cwd_must_exist and spec.working_directory is not None
                and not Path(spec.working_directory).is_dir()):
            issues.add(task.at("cwd"), task.field_name("cwd"),
                       f"directory {spec.working_directory!r} does not exist on this host "
                       "(commands of the SQLite profiles run here)")
            return None
        wanted = task_fields(task.name, spec, task.enabled)
        env_now = {e.name: e.value for e in spec.environment}
        if current is None:
            defaults = task_fields(task.task_id, CommandSpec(command=task.command), True)
            defaults["bash"] = False
            fields = _created_fields(wanted, defaults, ("shell", "argv"))
            fields += _env_diff({}, env_now)
            action = Action.CREATE
        else:
            fields = _diff(task_fields(current.name, current.spec, current.enabled), wanted)
            fields += _env_diff(stored, env_now)
            action = _action(fields, deleted=view is not None and view.deleted_at_ms is not None)
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
            fields = _created_fields(wanted, _TRIGGER_DEFAULTS,
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
            fields = [change for change in _diff(trigger_fields(current.task_id, current.spec,
                                                                current.enabled), wanted)
                      if not _default_policy_noise(change)]
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
            action = _action(fields, deleted=view.deleted_at_ms is not None)
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
            jitter_random_s=jitter.random_s if jitter else 0) if writes else None
        return Change(kind="trigger", project_id=trigger.project_id, item_id=trigger.trigger_id,
                      action=action, fields=tuple(fields), where=trigger.where,
                      phase=PHASE_STOP_TRIGGERS if stops else PHASE_TRIGGERS, params=params,
                      revision=view.revision.revision if view else None)

    def _extras(self, want: DesiredProject, tasks_now: Mapping[str, TaskView],
                triggers_now: Mapping[str, TriggerView], prune: bool) -> list[Change]:
        """Enabled tasks and triggers the files do not name: disabled with --prune."""
        changes = []
        for trigger_id, view in sorted(triggers_now.items()):
            current = view.revision
            if trigger_id in want.triggers or view.deleted_at_ms is not None or not current.enabled:
                continue
            changes.append(Change(
                kind="trigger", project_id=want.project_id, item_id=trigger_id,
                action=Action.DISABLE if prune else Action.KEPT, pruned=prune,
                fields=(FieldChange("enabled", True, False),) if prune else (),
                phase=PHASE_STOP_TRIGGERS, revision=current.revision,
                params=TriggerPublishParams(project_id=want.project_id, trigger_id=trigger_id,
                                            enabled=False) if prune else None))
        for task_id, task_view in sorted(tasks_now.items()):
            task = task_view.revision
            if task_id in want.tasks or task_view.deleted_at_ms is not None or not task.enabled:
                continue
            changes.append(Change(
                kind="task", project_id=want.project_id, item_id=task_id,
                action=Action.DISABLE if prune else Action.KEPT, pruned=prune,
                fields=(FieldChange("enabled", True, False),) if prune else (),
                phase=PHASE_TASKS, revision=task.revision,
                params=TaskPublishParams(project_id=want.project_id, task_id=task_id,
                                         name=task.name, spec=task.spec, enabled=False,
                                         expected_revision=task.revision) if prune else None))
        return changes

    # -- apply --------------------------------------------------------------------------

    def apply(self, plan: Plan, on_change: Callable[[Change], None] | None = None) -> Plan:
        """Write the plan's changes in order (``on_change`` hears of each one, written or
        not). A refused write raises ApplyStopped, saying what was written before it."""
        for change in plan.changes:
            if change.params is not None:
                try:
                    self._write(change, change.params)
                except QinglongError as exc:
                    raise ApplyStopped(change, exc, plan) from exc
            if on_change is not None:
                on_change(change)
        return plan

    def _write(self, change: Change, params: WriteParams) -> None:
        if isinstance(params, ProjectCreateParams):
            self._store.project_create(params)
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
        """The stored definitions as files would state them (environment entries as
        ``from_env`` references of the same name), and notes on what a file cannot say.
        Without ``project_ids`` every active project; archived ones are left out."""
        notes: list[str] = []
        if project_ids:
            projects = [self._store.project_get(p) for p in dict.fromkeys(project_ids)]
        else:
            projects = []
            for project in self._store.project_list():
                if project.status is ProjectStatus.ARCHIVED:
                    notes.append(f"project {project.id!r} is archived and was left out")
                else:
                    projects.append(project)
        exported = []
        for project in sorted(projects, key=lambda p: p.id):
            if project.status is ProjectStatus.ARCHIVED:
                notes.append(f"project {project.id!r} is archived: ql apply refuses it until "
                             "it is unarchived")
            desired = DesiredProject(project_id=project.id,
                                     name=None if project.name == project.id else project.name)
            for view in self._store.task_list(project.id):
                task = view.revision
                spec = task.spec
                desired.tasks[task.task_id] = DesiredTask(
                    project_id=project.id, task_id=task.task_id, name=task.name,
                    command=spec.command,
                    env=tuple(EnvValue(name=e.name, from_env=e.name) for e in spec.environment),
                    working_directory=spec.working_directory, timeout_ms=spec.timeout_ms,
                    retry=spec.retry, idempotent=spec.idempotent,
                    concurrency=spec.concurrency, enabled=task.enabled)
            for trigger_view in self._store.trigger_list(project.id, None):
                trigger = trigger_view.revision
                if trigger.enabled and not trigger_view.task_pin_current:
                    task_now = desired.tasks.get(trigger.task_id)
                    if task_now is not None and task_now.enabled:
                        notes.append(f"trigger {project.id}/{trigger.trigger_id} pins an older "
                                     "revision of its task; ql apply will re-pin it")
                desired.triggers[trigger.trigger_id] = DesiredTrigger(
                    project_id=project.id, trigger_id=trigger.trigger_id,
                    task_id=trigger.task_id, spec=trigger.spec, enabled=trigger.enabled)
            exported.append(desired)
        return exported, notes


def _action(fields: Sequence[FieldChange], *, deleted: bool) -> Action:
    if deleted:
        return Action.RESTORE
    if not fields:
        return Action.UNCHANGED
    if [f.field for f in fields] == ["enabled"]:
        return Action.ENABLE if fields[0].after else Action.DISABLE
    return Action.CHANGE


__all__ = [
    "API_VERSION",
    "Action",
    "ApplyStopped",
    "Change",
    "Declarative",
    "DefinitionErrors",
    "Definitions",
    "DesiredProject",
    "DesiredTask",
    "DesiredTrigger",
    "EnvValue",
    "FieldChange",
    "Issue",
    "Issues",
    "Plan",
    "Where",
    "format_duration",
    "merge_projects",
    "parse_duration",
    "spec_key",
]
