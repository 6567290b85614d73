"""Publishing rules shared by both adapters: what the next revision is, or that none is needed.

A publish whose content equals the current revision is a no-op (so re-running a
deploy script never resets a schedule). A trigger is bound to one task for life and
an enabled trigger must pin an enabled task revision.
"""

from __future__ import annotations

from qinglong.domain.task import CommandSpec, TaskRevision, new_task_revision
from qinglong.domain.trigger import CronTriggerSpec, TriggerRevision, new_trigger_revision
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
) -> TriggerRevision | None:
    """The trigger revision to append (pinned to ``task``), or None when unchanged.

    For an existing trigger, spec parts left as None keep their current values.
    """
    spec = merged_spec(current, expression, timezone, misfire_policy)
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
) -> CronTriggerSpec:
    """The spec a publish asks for: given parts replace the current ones."""
    if current is None:
        if expression is None:
            raise InvalidInput("cron", "is required for a new trigger (e.g. --cron '0 * * * *')")
        if timezone is None:
            raise InvalidInput("timezone", "is required (an IANA name such as UTC or Europe/Berlin)")
        return CronTriggerSpec.parse(
            expression=expression, timezone=timezone, misfire=misfire_policy or "skip"
        )
    if expression is None and timezone is None and misfire_policy is None:
        return current.spec
    return CronTriggerSpec.parse(
        expression=expression if expression is not None else current.spec.expression,
        timezone=timezone if timezone is not None else current.spec.timezone,
        misfire=misfire_policy if misfire_policy is not None else current.spec.misfire_policy.value,
    )
