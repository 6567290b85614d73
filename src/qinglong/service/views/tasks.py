"""The views of projects and tasks: a project, a task's revision with its spec (environment
values left out: they are write-only), what changed between two revisions, and the answers of
publishing, showing and diffing a task."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from qinglong.domain.model import Project
from qinglong.domain.model import TaskView as TaskHead
from qinglong.domain.task import (
    ArgvCommand,
    CommandSpec,
    DepsInstallCommand,
    RepoPullCommand,
    ScriptCommand,
    TaskRevision,
)
from qinglong.service.env_changes import entry_changes
from qinglong.service.times import rfc3339
from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, instant, one_of


class ProjectView(ViewModel):
    id: str
    name: str
    status: Annotated[str, one_of("active", "archived")]
    version: int
    created_at: Instant
    updated_at: Instant


class CommandView(ViewModel):
    kind: Literal["argv", "shell", "script", "repo", "deps"]
    argv: list[str] | None = None
    shell: str | None = None
    command: str | None = None
    script: str | None = None  # a script of the project: its path,
    digest: str | None = None  # the SHA-256 of the content the task runs,
    interpreter: str | None = None  # and what runs it (argv: interpreter, path, args)
    repo: str | None = None  # a subscription's pull task: the subscription it pulls


class RetryView(ViewModel):
    max_attempts: int
    backoff_ms: int
    max_backoff_ms: int
    on_exit_codes: list[int] | Literal["any"]
    on_timeout: bool


class ParameterView(ViewModel):
    name: str
    type: Literal["string", "integer", "boolean"]
    default: str | int | bool


class TaskRevisionView(ViewModel):
    project: str
    task: str
    revision: int
    name: str
    enabled: bool
    command: CommandView
    environment: list[str] = Field(description="Names only: values are write-only")
    working_directory: str | None
    timeout_ms: int
    retry: RetryView
    idempotent: bool
    concurrency: int | None
    requires: list[str] = Field(description="Worker labels a Run of this task needs "
                                            "(KEY or KEY=VALUE); empty: any worker")
    parameters: list[ParameterView] = Field(
        default_factory=list, description="What a run now may give values for (every one has "
                                          "a default)")
    memory_limit_bytes: int | None = Field(
        default=None, description="Most memory (address space) a Run's command may use")
    cpu_limit_s: int | None = Field(
        default=None, description="Most CPU time a Run's command may use, in seconds")
    content_digest: str
    published_at: Instant
    published_at_ms: int


class TaskView(TaskRevisionView):
    deleted: bool
    deleted_at: OptionalInstant
    labels: list[str] | None = Field(default=None, description=(
        "Its labels, sorted (organising tags set beside the revisions: PUT .../labels); "
        "in listings and shows"))
    pinned: bool | None = Field(default=None, description=(
        "Whether you pinned it (GET /api/v1/me/pins): in the API's listings asked ?pins=true"))


class Change(ViewModel):
    field: str
    from_: Any = Field(serialization_alias="from")
    to: Any


class TaskHistoryEntry(TaskRevisionView):
    changes: list[Change]


class TaskShowView(TaskView):
    history: list[TaskHistoryEntry]


class TaskPublishView(TaskRevisionView):
    created: bool
    restored: bool
    repinned_triggers: list[str]


class TaskDiffView(ViewModel):
    project: str
    task: str
    from_: int = Field(serialization_alias="from")
    to: int
    changes: list[Change]


def project_view(item: Project) -> ProjectView:
    return ProjectView(id=item.id, name=item.name, status=item.status.value,
                       version=item.version, created_at=instant(item.created_at_ms),
                       updated_at=instant(item.updated_at_ms))


def command_view(spec: CommandSpec) -> CommandView:
    command = spec.command
    if isinstance(command, ArgvCommand):
        return CommandView(kind="argv", argv=command.argv())
    if isinstance(command, RepoPullCommand):
        return CommandView(kind="repo", argv=command.argv(), repo=command.repo)
    if isinstance(command, DepsInstallCommand):  # installs the project's dependency set
        return CommandView(kind="deps", argv=command.argv())
    if isinstance(command, ScriptCommand):
        return CommandView(kind="script", argv=command.argv(), script=command.path,
                           digest=command.digest, interpreter=command.interpreter)
    return CommandView(kind="shell", shell=command.shell, command=command.command)


def retry_view(spec: CommandSpec) -> RetryView:
    policy = spec.retry
    return RetryView(max_attempts=policy.max_attempts, backoff_ms=policy.backoff_ms,
                     max_backoff_ms=policy.max_backoff_ms,
                     on_exit_codes=list(policy.on_exit_codes) if policy.on_exit_codes else "any",
                     on_timeout=policy.on_timeout)


def task_revision_view(revision: TaskRevision) -> TaskRevisionView:
    spec = revision.spec
    return TaskRevisionView(
        project=revision.project_id, task=revision.task_id, revision=revision.revision,
        name=revision.name, enabled=revision.enabled, command=command_view(spec),
        environment=[entry.name for entry in spec.environment],
        working_directory=spec.working_directory, timeout_ms=spec.timeout_ms,
        retry=retry_view(spec), idempotent=spec.idempotent, concurrency=spec.concurrency,
        requires=list(spec.requires),
        parameters=[ParameterView(name=p.name, type=p.type.value, default=p.default)
                    for p in spec.parameters],
        memory_limit_bytes=spec.limits.memory_bytes,
        cpu_limit_s=spec.limits.cpu_seconds, content_digest=revision.content_digest,
        published_at=instant(revision.created_at_ms), published_at_ms=revision.created_at_ms)


def task_view(item: TaskHead) -> TaskView:
    return task_revision_view(item.revision).extended(
        TaskView, deleted=item.deleted_at_ms is not None, deleted_at=rfc3339(item.deleted_at_ms))


def task_diff(old: TaskRevision, new: TaskRevision) -> list[Change]:
    """What changed from one revision to another, field by field (values of environment
    entries are never shown: only that one was added, removed or changed, or became plain
    or secret; see ``env_changes``)."""
    changes: list[Change] = []

    def note(field: str, before: object, after: object) -> None:
        if before != after:
            changes.append(Change(field=field, from_=before, to=after))

    note("name", old.name, new.name)
    note("enabled", old.enabled, new.enabled)
    note("command", command_view(old.spec).to_json(), command_view(new.spec).to_json())
    note("working_directory", old.spec.working_directory, new.spec.working_directory)
    note("timeout_ms", old.spec.timeout_ms, new.spec.timeout_ms)
    note("retry", retry_view(old.spec).to_json(), retry_view(new.spec).to_json())
    note("idempotent", old.spec.idempotent, new.spec.idempotent)
    note("concurrency", old.spec.concurrency, new.spec.concurrency)
    note("requires", list(old.spec.requires), list(new.spec.requires))
    note("parameters", [p.to_json() for p in old.spec.parameters],
         [p.to_json() for p in new.spec.parameters])
    note("memory_limit_bytes", old.spec.limits.memory_bytes, new.spec.limits.memory_bytes)
    note("cpu_limit_s", old.spec.limits.cpu_seconds, new.spec.limits.cpu_seconds)
    for name, before, after in entry_changes(old.spec.environment, new.spec.environment,
                                             name_secrets=False):
        changes.append(Change(field=f"environment.{name}", from_=before, to=after))
    return changes
