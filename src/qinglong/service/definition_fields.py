"""Definitions field by field: a task or trigger as the file's keys, and the differences
a plan shows (``before -> after``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from qinglong.domain.cron import DstGap, DstOverlap
from qinglong.domain.durations import format_duration
from qinglong.domain.interval import IntervalSchedule, format_every
from qinglong.domain.limits import size_text
from qinglong.domain.occurrences import instant_text
from qinglong.domain.once import OnceSchedule
from qinglong.domain.task import CommandSpec, ScriptCommand, ShellCommand
from qinglong.domain.trigger import MisfirePolicy, OverlapPolicy, TriggerSpec

# --- field-by-field views (what a plan shows) -------------------------------------------

def task_fields(name: str, spec: CommandSpec, enabled: bool) -> dict[str, object]:
    """A task as the file's fields (environment values left out)."""
    fields: dict[str, object] = {"name": name}
    command = spec.command
    if isinstance(command, ShellCommand):
        fields["shell"] = command.command
        fields["bash"] = command.shell == "/bin/bash"
    elif isinstance(command, ScriptCommand):
        fields["script"] = command.path
        fields["script.digest"] = command.digest
        fields["interpreter"] = command.interpreter
        fields["args"] = list(command.args)
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
        "requires": list(spec.requires),
        "parameters": [p.to_json() for p in spec.parameters],
        "limits.memory": None if spec.limits.memory_bytes is None
        else size_text(spec.limits.memory_bytes),
        "limits.cpu": None if spec.limits.cpu_seconds is None
        else format_duration(spec.limits.cpu_seconds * 1000),
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
        "flow": spec.flow,
        "parameters": spec.values or None,
        "enabled": enabled,
    }


def target_change(trigger_id: str, stored: TriggerSpec, wanted: TriggerSpec) -> str:
    """Why a file may not change what a stored trigger starts (a flow, or its task)."""
    def what(spec: TriggerSpec) -> str:
        return f"flow {spec.flow!r}" if spec.flow else "its task"

    return (f"trigger {trigger_id!r} starts {what(stored)} for life; give the trigger a new "
            f"id to start {what(wanted)}")


TRIGGER_DEFAULTS: dict[str, object] = {
    "jitter": None, "jitter_random": None,
    "dst_gap": DstGap.SHIFT.value, "dst_overlap": DstOverlap.FIRST.value,
    "misfire": MisfirePolicy.SKIP.value, "overlap": OverlapPolicy.ALLOW.value,
    "overlap_queue_limit": None, "flow": None, "parameters": None, "enabled": True}


def default_policy_noise(change: FieldChange) -> bool:
    """A cron trigger's default DST policy appearing or going with a change of kind (a cron
    trigger always states its policy, other kinds have none): not a change worth showing."""
    default = TRIGGER_DEFAULTS.get(change.field)
    return (change.field in ("dst_gap", "dst_overlap")
            and {change.before, change.after} == {default, None})


@dataclass(frozen=True, slots=True)
class FieldChange:
    field: str
    before: object  # None: not set
    after: object


def diff_fields(before: Mapping[str, object], after: Mapping[str, object]) -> list[FieldChange]:
    keys = list(before) + [k for k in after if k not in before]
    return [FieldChange(k, before.get(k), after.get(k)) for k in keys
            if before.get(k) != after.get(k)]


def created_fields(values: Mapping[str, object], defaults: Mapping[str, object],
                    always: Sequence[str]) -> list[FieldChange]:
    return [FieldChange(k, None, v) for k, v in values.items()
            if v is not None and (k in always or defaults.get(k) != v)]
