"""Publishing rules shared by both adapters: what the next revision is, or that none is needed.

A publish whose content equals the current revision is a no-op (so re-running a
deploy script never resets a schedule). A trigger is bound to one task for life and
an enabled trigger must pin an enabled task revision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from qinglong.domain.cron import CronSchedule, DstPolicy, check_dst_applies
from qinglong.domain.interval import IntervalSchedule
from qinglong.domain.jitter import Jitter
from qinglong.domain.limits import ResourceLimits
from qinglong.domain.occurrences import instant_text
from qinglong.domain.once import OnceSchedule
from qinglong.domain.parameters import Parameter, resolve, trigger_values
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.scripts import ScriptRef
from qinglong.domain.task import (
    DEFAULT_TIMEOUT_MS,
    Command,
    CommandSpec,
    EnvEntry,
    TaskRevision,
    new_task_revision,
)
from qinglong.domain.timezones import UTC_NAME
from qinglong.domain.trigger import (
    MisfirePolicy,
    Overlap,
    ScheduleKind,
    TriggerRevision,
    TriggerSpec,
    new_trigger_revision,
    parse_schedule,
    schedule_kind,
    text_kind,
)
from qinglong.errors import Conflict, InvalidInput, InvalidSchedule


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
    dst_gap: str | None = None,
    dst_overlap: str | None = None,
    jitter_s: int | None = None,
    jitter_random_s: int | None = None,
    parameters: Mapping[str, object] | None = None,
    flow: str | None = None,
) -> TriggerRevision | None:
    """The trigger revision to append (pinned to ``task``), or None when unchanged.

    ``parameters`` replaces the values the trigger gives (``{}``: none; None: keep them);
    those of a trigger of a task are checked against, and typed by, ``task``'s declarations
    (a flow trigger's are checked against its flow by the caller). ``flow`` makes a new
    trigger start that flow; an existing trigger never changes what it starts.

    For an existing trigger, spec parts left as None keep their current values. An interval
    schedule given without an anchor keeps the current one (when the trigger already is an
    interval trigger) or is anchored at the publish time. A one-shot instant given anew must
    not lie before the publish time (unless the revision is published disabled).
    """
    created_at_ms = now_ms if current is None else max(now_ms, current.created_at_ms)
    spec = merged_spec(current, expression, timezone, misfire_policy, overlap,
                       published_at_ms=created_at_ms, dst_gap=dst_gap, dst_overlap=dst_overlap,
                       jitter_s=jitter_s, jitter_random_s=jitter_random_s)
    if current is not None and flow is not None and flow != current.spec.flow:
        was = f"flow {current.spec.flow!r}" if current.spec.flow else "its task"
        raise Conflict(f"trigger {trigger_id!r} starts {was}; a trigger never changes what it "
                       "starts (publish a new trigger instead)")
    values = spec.parameters if parameters is None else trigger_values(parameters)
    spec = replace(spec, parameters=values,
                   flow=flow if current is None else current.spec.flow)
    if spec.flow is None and spec.parameters:
        typed = resolve(task.spec.parameters, spec.values)
        spec = replace(spec, parameters=tuple((name, typed[name]) for name in spec.values))
    if current is not None and task_id is not None and task_id != current.task_id:
        raise Conflict(
            f"trigger {trigger_id!r} is bound to task {current.task_id!r}; "
            "a trigger never moves to another task (publish a new trigger instead)"
        )
    if enabled and not task.enabled:
        raise Conflict(
            f"task {task.task_id!r} is disabled; an enabled trigger must pin an enabled task"
        )
    schedule = spec.schedule
    if (enabled and isinstance(schedule, OnceSchedule) and schedule.at_ms < created_at_ms
            and (current is None or current.spec.schedule != schedule)):
        raise InvalidInput("at", f"{instant_text(schedule.at_ms)} is in the past (it is now "
                                 f"{instant_text(created_at_ms)}); a one-shot trigger fires only "
                                 "at an instant after it is published")
    candidate = new_trigger_revision(
        project=project_id,
        trigger=trigger_id,
        revision=1 if current is None else current.revision + 1,
        task=task.task_id,
        task_revision=task.revision,
        task_content_digest=task.content_digest,
        spec=spec,
        enabled=enabled,
        created_at_ms=created_at_ms,
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
    *,
    published_at_ms: int = 0,
    dst_gap: str | None = None,
    dst_overlap: str | None = None,
    jitter_s: int | None = None,
    jitter_random_s: int | None = None,
) -> TriggerSpec:
    """The spec a publish asks for: given parts replace the current ones.

    ``expression`` states the schedule: a cron expression, ``every DURATION [from TIME]`` or
    ``at TIME``. A new cron trigger needs a time zone; interval and one-shot triggers show
    their times in UTC unless one is given. ``dst_gap`` and ``dst_overlap`` change a cron
    trigger's DST policy (parts left out keep the current policy of a cron trigger);
    ``jitter_s`` and ``jitter_random_s`` its jitter (``jitter_s=0``: none)."""
    dst_given = dst_gap is not None or dst_overlap is not None
    jitter = merged_jitter(current.spec.jitter if current is not None else None, jitter_s,
                           jitter_random_s)
    if current is None:
        if expression is None:
            raise InvalidInput("cron", "a new trigger needs a schedule: --cron '0 * * * *', "
                                       "--every 90s or --at TIME")
        if timezone is None:
            if text_kind(expression) == "cron":
                raise InvalidInput("timezone",
                                   "is required (an IANA name such as UTC or Europe/Berlin)")
            timezone = UTC_NAME
        return TriggerSpec.parse(
            expression=expression, timezone=timezone, misfire=misfire_policy or "skip",
            overlap=overlap, default_anchor_ms=published_at_ms,
            dst=DstPolicy.parse(dst_gap, dst_overlap) if dst_given else None, jitter=jitter,
        )
    misfire = (MisfirePolicy.parse(misfire_policy) if misfire_policy is not None
               else current.spec.misfire_policy)
    kept_overlap = overlap if overlap is not None else current.spec.overlap
    now = current.spec.schedule
    if expression is None and timezone is None and not dst_given:
        # the schedule is kept as stored (it may predate today's stricter input rules)
        if misfire_policy is None and overlap is None and jitter == current.spec.jitter:
            return current.spec
        return TriggerSpec(schedule=now, misfire_policy=misfire, overlap=kept_overlap,
                           jitter=jitter)
    dst = DstPolicy.parse(dst_gap, dst_overlap, base=current.spec.dst)
    if expression is None and timezone is None:  # only the DST policy changes
        if not isinstance(now, CronSchedule):
            raise InvalidSchedule("dst-gap" if dst_gap is not None else "dst-overlap",
                                  "a DST policy applies only to cron triggers (this one is "
                                  f"{schedule_kind(now)!r}: it follows real elapsed time)")
        check_dst_applies(now.expression, dst)
        schedule: ScheduleKind = replace(now, dst=dst)
    elif expression is None:
        assert timezone is not None
        schedule = rezoned(now, timezone, dst)
    else:
        zone = timezone if timezone is not None else now.timezone
        anchor = now.anchor_ms if isinstance(now, IntervalSchedule) else published_at_ms
        kept = dst if dst_given or text_kind(expression) == "cron" else None
        schedule = parse_schedule(expression, zone, default_anchor_ms=anchor, dst=kept)
    return TriggerSpec(schedule=schedule, misfire_policy=misfire, overlap=kept_overlap,
                       jitter=jitter)


def merged_jitter(current: Jitter | None, jitter_s: int | None,
                  jitter_random_s: int | None) -> Jitter | None:
    """The jitter a publish asks for: a part left out keeps its current value; a bound of 0
    removes the jitter (and its random part with it)."""
    if jitter_s is None and jitter_random_s is None:
        return current
    if jitter_s == 0:
        if jitter_random_s:
            raise InvalidInput("jitter-random", "needs a jitter (--jitter) to be a part of")
        return None
    bound = jitter_s if jitter_s is not None else (current.max_s if current else 0)
    random = (jitter_random_s if jitter_random_s is not None
              else (current.random_s if current else 0))
    return Jitter.of(bound, random)


def rezoned(schedule: ScheduleKind, timezone: str, dst: DstPolicy | None = None) -> ScheduleKind:
    """The same schedule shown (cron: evaluated, with ``dst``) in another zone."""
    if isinstance(schedule, IntervalSchedule):
        return IntervalSchedule.parse(schedule.every_s, schedule.anchor_ms, timezone)
    if isinstance(schedule, OnceSchedule):
        return OnceSchedule.parse(schedule.at_ms, timezone)
    return CronSchedule.parse(schedule.expression, timezone, dst)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPatch:
    """What a publish changes; every part left as None keeps the current value (a new task
    needs a command). Environment entries in ``env_set`` are added or replaced, names in
    ``env_unset`` removed; ``env_clear`` starts from no entries at all."""

    command: Command | ScriptRef | None = None  # a ScriptRef is pinned by the publish
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
    requires: tuple[str, ...] | None = None  # replaces the requirements (empty: none)
    parameters: tuple[Parameter, ...] | None = None  # replaces them (empty: none)
    memory_limit_bytes: int | None = None
    clear_memory_limit: bool = False
    cpu_limit_s: int | None = None
    clear_cpu_limit: bool = False

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
        if self.memory_limit_bytes is not None and self.clear_memory_limit:
            raise InvalidInput("memory-limit", "give a limit or clear it, not both")
        if self.cpu_limit_s is not None and self.clear_cpu_limit:
            raise InvalidInput("cpu-limit", "give a limit or clear it, not both")


def _merged_retry(current: RetryPolicy, changes: Mapping[str, object]) -> RetryPolicy:
    unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(RetryPolicy)})
    if unknown:
        raise InvalidInput("retry", f"unknown retry setting {unknown[0]!r}")
    return dataclasses.replace(current, **changes)  # type: ignore[arg-type]


V = TypeVar("V")


def _cleared_or_set(clear: bool, given: V | None, current: V | None) -> V | None:
    """An optional setting after a patch: cleared, set to what is given, or kept."""
    if clear:
        return None
    return given if given is not None else current


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
    command = patch.command or (current.command if current else None)
    assert command is not None
    if isinstance(command, ScriptRef):
        raise InvalidInput("script", "must be pinned to a revision before it is published")
    return CommandSpec(
        command=command,
        environment=tuple(environment.values()),
        working_directory=_cleared_or_set(patch.clear_working_directory,
                                          patch.working_directory,
                                          current.working_directory if current else None),
        timeout_ms=patch.timeout_ms if patch.timeout_ms is not None else (
            current.timeout_ms if current else DEFAULT_TIMEOUT_MS),
        retry=_merged_retry(current.retry if current else RetryPolicy(), patch.retry),
        idempotent=patch.idempotent if patch.idempotent is not None else (
            current.idempotent if current else False),
        concurrency=_cleared_or_set(patch.clear_concurrency, patch.concurrency,
                                    current.concurrency if current else None),
        requires=patch.requires if patch.requires is not None else (
            current.requires if current else ()),
        parameters=patch.parameters if patch.parameters is not None else (
            current.parameters if current else ()),
        limits=ResourceLimits(
            memory_bytes=_cleared_or_set(patch.clear_memory_limit, patch.memory_limit_bytes,
                                         current.limits.memory_bytes if current else None),
            cpu_seconds=_cleared_or_set(patch.clear_cpu_limit, patch.cpu_limit_s,
                                        current.limits.cpu_seconds if current else None)),
    )
