"""The model of declarative definitions: projects, tasks and triggers as files (or a crontab)
state them, and the problems found in them, each with the file and line it comes from.

``ql apply -f`` (docs/controls/apply.md) and ``ql import crontab`` both build this model: a
:class:`DesiredProject` per project, with every task and trigger fully stated (what a file
leaves out takes its default, never the stored value).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from qinglong.domain.flow import FlowDocument
from qinglong.domain.limits import ResourceLimits
from qinglong.domain.parameters import Parameter
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.scripts import ScriptRef
from qinglong.domain.task import DEFAULT_TIMEOUT_MS, Command
from qinglong.domain.trigger import TriggerSpec
from qinglong.errors import InvalidInput

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
    """One environment entry (see ``definition_env``): a plain ``value``; or a secret read
    from ``from_env``, the variable of the applying process (the stored value is kept when
    that is not set); or, with neither, the secret stored under ``name``, kept."""

    name: str
    value: str | None = None
    from_env: str | None = None
    where: Where | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Placed:
    """Where a task or trigger was given: ``where`` (its document and line), ``lines`` (where
    each of its keys was), and ``path``, how errors name its fields: "tasks.hello" (files), ""
    (crontab)."""

    where: Where | None = None
    path: str = ""
    lines: Mapping[str, Where] = field(default_factory=dict)

    def at(self, key: str) -> Where | None:
        """Where ``key`` was given (a nested key, ``retry.backoff``: where its parent was)."""
        return self.lines.get(key.split(".", 1)[0], self.where)

    def field_name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key


@dataclass(frozen=True, slots=True, kw_only=True)
class DesiredTask(Placed):
    project_id: str
    task_id: str
    name: str
    command: Command | ScriptRef  # a ScriptRef is pinned to its script's content by the plan
    env: tuple[EnvValue, ...] = ()
    working_directory: str | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    idempotent: bool = False
    concurrency: int | None = None
    requires: tuple[str, ...] = ()
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    parameters: tuple[Parameter, ...] = ()
    enabled: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class DesiredTrigger(Placed):
    project_id: str
    trigger_id: str
    task_id: str
    spec: TriggerSpec
    enabled: bool = True
    # An interval trigger whose file gives no anchor: ``spec`` holds a placeholder anchor; the
    # stored anchor is kept when the trigger already is an interval trigger, else the publish
    # time anchors it (as for `ql trigger publish --every` without --anchor).
    keep_anchor: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DesiredFlow(Placed):
    """A flow as a file states it (docs/controls/flows.md): its parsed document."""

    project_id: str = ""
    flow_id: str = ""
    document: FlowDocument | None = None


@dataclass(slots=True, kw_only=True)
class DesiredProject:
    project_id: str
    name: str | None = None  # used when apply creates the project
    tasks: dict[str, DesiredTask] = field(default_factory=dict)
    triggers: dict[str, DesiredTrigger] = field(default_factory=dict)
    where: Where | None = None
    flows: dict[str, DesiredFlow] = field(default_factory=dict)


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
                triggers=dict(doc.triggers), where=doc.where, flows=dict(doc.flows))
            continue
        if doc.name is not None:
            if into.name is not None and into.name != doc.name:
                issues.add(doc.where, "name", f"project {doc.project_id!r} is named "
                           f"{into.name!r} at {into.where}")
            into.name = doc.name
        _add_items("task", doc.tasks, into.tasks, issues)
        _add_items("trigger", doc.triggers, into.triggers, issues)
        _add_items("flow", doc.flows, into.flows, issues)
    for project in projects.values():
        for trigger in project.triggers.values():
            if trigger.task_id not in project.tasks:
                issues.add(trigger.at("task"), trigger.field_name("task"),
                           f"task {trigger.task_id!r} is not defined in project "
                           f"{project.project_id!r} (define it under tasks)")
    return Definitions(projects=projects)


PlacedT = TypeVar("PlacedT", bound=Placed)


def _add_items(kind: str, items: Mapping[str, PlacedT], into: dict[str, PlacedT],
               issues: Issues) -> None:
    """A document's tasks (or triggers) added to its project's: an id given twice is an issue
    (the later definition is kept)."""
    for item_id, item in items.items():
        if item_id in into:
            issues.add(item.where, item.path or item_id,
                       f"{kind} {item_id!r} is defined twice (also at {into[item_id].where})")
        into[item_id] = item
