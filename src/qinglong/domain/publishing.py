"""Publishing rules shared by both adapters: what the next revision is, or that none is needed.

A publish whose content equals the current revision is a no-op (so re-running a
deploy script never resets a schedule). A trigger is bound to one task for life and
an enabled trigger must pin an enabled task revision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from qinglong.domain.retry import RetryPolicy
from qinglong.domain.task import (
    DEFAULT_TIMEOUT_MS,
    ArgvCommand,
    CommandSpec,
    EnvEntry,
    ShellCommand,
    TaskRevision,
    new_task_revision,
)
from qinglong.domain.trigger import (
    CronTriggerSpec,
    MisfirePolicy,
    Overlap,
    TriggerRevision,
    new_trigger_revision,
)
from qinglong.errors import Conflict, InvalidInput


def next_task_revision(
    current: TaskRevision | None,
    *,
    project_id: str,
    task_id: str,
    name: str,
    spec: CommandSpec,
    enabled: bool,
    now_ms: int,
) -> TaskRevision | None:
    """The revision to append, or None when ``current`` already says the same."""
    candidate = new_task_revision(
        project=project_id,
        task=task_id,
        revision=1 if current is None else current.revision + 1,
        name=name,
        spec=spec,
        enabled=enabled,
        created_at_ms=now_ms if current is None else max(now_ms, current.created_at_ms),
    )
    if current is not None and current.same_definition(candidate):
        return None
    return candidate


def next_trigger_revision(
    current: TriggerRevision | None,
    *,
    project_id: str,
    trigger_id: str,
    task_id: str | None,
    enabled: bool,
    task: TaskRevision,
    now_ms: int,
    expression: str | None = None,
    timezone: str | None = None,
    misfire_policy: str | None = None,
    overlap: Overlap | None = None,
) -> TriggerRevision | None:
    """The trigger revision to append (pinned to ``task``), or None when unchanged.

    For an existing trigger, spec parts left as None keep their current values.
    """
    spec = merged_spec(current, expression, timezone, misfire_policy, overlap)
    if current is not None and task_id is not None and task_id != current.task_id:
        raise Conflict(
            f"trigger {trigger_id!r} is bound to task {current.task_id!r}; "
            "a trigger never moves to another task (publish a new trigger instead)"
        )
    if enabled and not task.enabled:
        raise Conflict(
            f"task {task.task_id!r} is disabled; an enabled trigger must pin an enabled task"
        )
    candidate = new_trigger_revision(
        project=project_id,
        trigger=trigger_id,
        revision=1 if current is None else current.revision + 1,
        task=task.task_id,
        task_revision=task.revision,
        task_content_digest=task.content_digest,
        spec=spec,
        enabled=enabled,
        created_at_ms=now_ms if current is None else max(now_ms, current.created_at_ms),
    )
    if current is not None and current.same_definition(candidate):
        return None
    return candidate


def merged_spec(
    current: TriggerRevision | None,
    expression: str | None,
    timezone: str | None,
    misfire_policy: str | None,
    overlap: Overlap | None = None,
) -> CronTriggerSpec:
    """The spec a publish asks for: given parts replace the current ones."""
    if current is None:
        if expression is None:
            raise InvalidInput("cron", "is required for a new trigger (e.g. --cron '0 * * * *')")
        if timezone is None:
            raise InvalidInput("timezone", "is required (an IANA name such as UTC or Europe/Berlin)")
        return CronTriggerSpec.parse(
            expression=expression, timezone=timezone, misfire=misfire_policy or "skip",
            overlap=overlap,
        )
    if expression is None and timezone is None and misfire_policy is None and overlap is None:
        return current.spec
    if expression is None and timezone is None:
        # the schedule is kept as stored (it may predate today's stricter input rules)
        return CronTriggerSpec(
            schedule=current.spec.schedule,
            misfire_policy=MisfirePolicy.parse(misfire_policy) if misfire_policy is not None
            else current.spec.misfire_policy,
            overlap=overlap if overlap is not None else current.spec.overlap,
        )
    return CronTriggerSpec.parse(
        expression=expression if expression is not None else current.spec.expression,
        timezone=timezone if timezone is not None else current.spec.timezone,
        misfire=misfire_policy if misfire_policy is not None else current.spec.misfire_policy.value,
        overlap=overlap if overlap is not None else current.spec.overlap,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPatch:
    """What a publish changes; every part left as None keeps the current value (a new task
    needs a command). Environment entries in ``env_set`` are added or replaced, names in
    ``env_unset`` removed; ``env_clear`` starts from no entries at all."""

    command: ArgvCommand | ShellCommand | None = None
    env_set: tuple[EnvEntry, ...] = ()
    env_unset: tuple[str, ...] = ()
    env_clear: bool = False
    working_directory: str | None = None
    clear_working_directory: bool = False
    timeout_ms: int | None = None
    retry: Mapping[str, object] = field(default_factory=dict)  # RetryPolicy fields to change
    idempotent: bool | None = None
    concurrency: int | None = None
    clear_concurrency: bool = False

    def __post_init__(self) -> None:
        if self.working_directory is not None and self.clear_working_directory:
            raise InvalidInput("working-directory", "give a directory or clear it, not both")
        names = [e.name for e in self.env_set]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InvalidInput("environment", f"name {twice[0]!r} is given more than once")
        overlap = set(names) & set(self.env_unset)
        if overlap:
            raise InvalidInput("environment", f"{min(overlap)!r} is both set and unset")


def _merged_retry(current: RetryPolicy, changes: Mapping[str, object]) -> RetryPolicy:
    unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(RetryPolicy)})
    if unknown:
        raise InvalidInput("retry", f"unknown retry setting {unknown[0]!r}")
    return dataclasses.replace(current, **changes)  # type: ignore[arg-type]


def merged_task_spec(current: CommandSpec | None, patch: TaskPatch) -> CommandSpec:
    """The spec a publish asks for: ``patch`` applied to ``current``."""
    if current is None:
        if patch.command is None:
            raise InvalidInput("command", "is required for a new task")
        if patch.env_unset:
            raise InvalidInput("environment", f"{patch.env_unset[0]!r} cannot be unset: the "
                                              "task does not exist yet")
    environment: dict[str, EnvEntry] = {}
    if current is not None and not patch.env_clear:
        environment = {entry.name: entry for entry in current.environment}
    for name in patch.env_unset:
        if name not in environment and not patch.env_clear:
            raise InvalidInput("environment", f"{name!r} is not set, so it cannot be unset")
        environment.pop(name, None)
    for entry in patch.env_set:
        environment[entry.name] = entry
    if patch.clear_working_directory:
        working_directory = None
    elif patch.working_directory is not None:
        working_directory = patch.working_directory
    else:
        working_directory = current.working_directory if current else None
    command = patch.command or (current.command if current else None)
    assert command is not None
    if patch.clear_concurrency:
        concurrency = None
    elif patch.concurrency is not None:
        concurrency = patch.concurrency
    else:
        concurrency = current.concurrency if current else None
    return CommandSpec(
        command=command,
        environment=tuple(environment.values()),
        working_directory=working_directory,
        timeout_ms=patch.timeout_ms if patch.timeout_ms is not None else (
            current.timeout_ms if current else DEFAULT_TIMEOUT_MS),
        retry=_merged_retry(current.retry if current else RetryPolicy(), patch.retry),
        idempotent=patch.idempotent if patch.idempotent is not None else (
            current.idempotent if current else False),
        concurrency=concurrency,
    )
