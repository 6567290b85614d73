"""Views: the JSON shapes of projects, tasks, triggers, runs, attempts and events.

Every surface prints these (``--json``) or serves them (the HTTP API), so they are built in
one place. Instants appear twice: RFC 3339 in UTC (``*_at``) and epoch milliseconds
(``*_at_ms``). Task environment values are write-only: views carry their names, never
their values.
"""

from __future__ import annotations

from collections.abc import Sequence

from qinglong.domain.interval import IntervalSchedule
from qinglong.domain.model import Attempt, Project, Run, RunDetail, RunEvent, TaskView, TriggerView
from qinglong.domain.occurrences import is_done_cursor
from qinglong.domain.once import OnceSchedule
from qinglong.domain.runs import (
    TRIGGER_TYPE_BACKFILL,
    TRIGGER_TYPE_MANUAL,
    EventType,
    manual_request_id,
)
from qinglong.domain.task import ArgvCommand, CommandSpec, TaskRevision
from qinglong.domain.trigger import TriggerRevision, TriggerSpec
from qinglong.service.env_changes import entry_changes
from qinglong.service.schedule import jittered, trigger_done, trigger_upcoming
from qinglong.service.times import in_zone, rfc3339

View = dict[str, object]


def project_view(item: Project) -> View:
    return {
        "id": item.id,
        "name": item.name,
        "status": item.status.value,
        "version": item.version,
        "created_at": rfc3339(item.created_at_ms),
        "updated_at": rfc3339(item.updated_at_ms),
    }


def command_view(spec: CommandSpec) -> View:
    command = spec.command
    if isinstance(command, ArgvCommand):
        return {"kind": "argv", "argv": command.argv()}
    return {"kind": "shell", "shell": command.shell, "command": command.command}


def spec_view(spec: CommandSpec) -> View:
    """The task spec with its environment values left out (write-only)."""
    return {
        "command": command_view(spec),
        "environment": [entry.name for entry in spec.environment],
        "working_directory": spec.working_directory,
        "timeout_ms": spec.timeout_ms,
        "retry": retry_view(spec),
        "idempotent": spec.idempotent,
        "concurrency": spec.concurrency,
    }


def retry_view(spec: CommandSpec) -> View:
    policy = spec.retry
    return {"max_attempts": policy.max_attempts, "backoff_ms": policy.backoff_ms,
            "max_backoff_ms": policy.max_backoff_ms,
            "on_exit_codes": list(policy.on_exit_codes) or "any",
            "on_timeout": policy.on_timeout}


def task_revision_view(revision: TaskRevision) -> View:
    return {
        "project": revision.project_id,
        "task": revision.task_id,
        "revision": revision.revision,
        "name": revision.name,
        "enabled": revision.enabled,
        **spec_view(revision.spec),
        "content_digest": revision.content_digest,
        "published_at": rfc3339(revision.created_at_ms),
        "published_at_ms": revision.created_at_ms,
    }


def task_view(item: TaskView) -> View:
    return {**task_revision_view(item.revision), "deleted": item.deleted_at_ms is not None,
            "deleted_at": rfc3339(item.deleted_at_ms)}


def task_diff(old: TaskRevision, new: TaskRevision) -> list[View]:
    """What changed from one revision to another, field by field (values of environment
    entries are never shown: only that one was added, removed or changed, or became plain
    or secret; see ``env_changes``)."""
    changes: list[View] = []

    def note(field: str, before: object, after: object) -> None:
        if before != after:
            changes.append({"field": field, "from": before, "to": after})

    note("name", old.name, new.name)
    note("enabled", old.enabled, new.enabled)
    note("command", command_view(old.spec), command_view(new.spec))
    note("working_directory", old.spec.working_directory, new.spec.working_directory)
    note("timeout_ms", old.spec.timeout_ms, new.spec.timeout_ms)
    note("retry", retry_view(old.spec), retry_view(new.spec))
    note("idempotent", old.spec.idempotent, new.spec.idempotent)
    note("concurrency", old.spec.concurrency, new.spec.concurrency)
    for name, before, after in entry_changes(old.spec.environment, new.spec.environment,
                                             name_secrets=False):
        changes.append({"field": f"environment.{name}", "from": before, "to": after})
    return changes


def schedule_view(spec: TriggerSpec) -> View:
    """What kind of schedule a spec has and its parts: ``schedule`` is its canonical text
    (the cron expression, ``every 1m30s from ...``, ``at ...``); ``cron`` and ``dst`` (the
    DST policy: ``gap``, ``overlap``) only for cron."""
    schedule = spec.schedule
    view: View = {"kind": spec.kind, "schedule": spec.expression, "cron": spec.cron_expression}
    if spec.dst is not None:  # the DST policy of a cron trigger (docs/reference/cron.md)
        view["dst"] = spec.dst.to_json()
    if isinstance(schedule, IntervalSchedule):
        view.update(every_s=schedule.every_s, anchor=rfc3339(schedule.anchor_ms),
                    anchor_ms=schedule.anchor_ms)
    elif isinstance(schedule, OnceSchedule):
        view.update(at=rfc3339(schedule.at_ms), at_ms=schedule.at_ms)
    return view


def jitter_view(revision: TriggerRevision) -> View | None:
    """The trigger's jitter: its bound, the part drawn per occurrence, and the stable offset
    (a hash of the trigger's identity) every occurrence gets."""
    jitter = revision.spec.jitter
    if jitter is None:
        return None
    return {"max_s": jitter.max_s, "random_s": jitter.random_s,
            "stable_s": jitter.stable_s(revision.project_id, revision.trigger_id)}


def trigger_revision_view(revision: TriggerRevision) -> View:
    return {
        "project": revision.project_id,
        "trigger": revision.trigger_id,
        "revision": revision.revision,
        "task": revision.task_id,
        "task_revision": revision.task_revision,
        "task_content_digest": revision.task_content_digest,
        **schedule_view(revision.spec),
        "timezone": revision.spec.timezone,
        "misfire": revision.spec.misfire_policy.value,
        "overlap": revision.spec.overlap.policy.value,
        "overlap_queue_limit": revision.spec.overlap.queue_limit,
        "jitter": jitter_view(revision),
        "enabled": revision.enabled,
        "content_digest": revision.content_digest,
        "published_at": rfc3339(revision.created_at_ms),
        "published_at_ms": revision.created_at_ms,
    }


def trigger_view(view: TriggerView, *, now_ms: int, next_count: int) -> View:
    upcoming = trigger_upcoming(view, now_ms=now_ms, count=next_count)
    due = jittered(view.revision, upcoming)
    schedule = view.schedule
    done = trigger_done(view)
    return {
        **trigger_revision_view(view.revision),
        "state": "done" if done else view.state_at(now_ms),
        "done": done,
        "pause": pause_view(view, now_ms),
        "deleted_at": rfc3339(view.deleted_at_ms),
        "next_fire_at": [rfc3339(t) for t in upcoming],
        "next_fire_at_ms": upcoming,
        "next_fire_local": [in_zone(t, view.revision.spec.timezone) for t in upcoming],
        # when each becomes due: its jittered instant (the same as next_fire_at without jitter)
        "next_due_at": [rfc3339(t) for t in due],
        "next_due_at_ms": due,
        # the first occurrence not decided yet (None: none decided yet, or none is left)
        "cursor_ms": (None if schedule is None or is_done_cursor(schedule.next_fire_at_ms)
                      else schedule.next_fire_at_ms),
        "last_scheduled_at": rfc3339(schedule.last_scheduled_at_ms) if schedule else None,
    }


def pause_view(view: TriggerView, now_ms: int) -> View | None:
    """The pause holding the trigger back at ``now_ms``, if one does."""
    pause = view.schedule.pause if view.schedule else None
    if pause is None or not pause.in_effect_at(now_ms):
        return None
    return {"since": rfc3339(pause.from_ms), "since_ms": pause.from_ms,
            "until": rfc3339(pause.until_ms), "until_ms": pause.until_ms,
            "reason": view.pause_reason}


def run_view(item: Run) -> View:
    manual = item.trigger_type == TRIGGER_TYPE_MANUAL
    requested = manual or item.trigger_type == TRIGGER_TYPE_BACKFILL  # somebody asked for it
    # a manual Run's occurrence is its admission, a backfilled one was admitted when somebody
    # asked: neither has a scheduler's lag to speak of
    lag = (None if item.scheduled_for_ms is None or requested
           else item.created_at_ms - item.scheduled_for_ms)
    return {
        "id": item.id,
        "project": item.project_id,
        "task": item.task_id,
        "task_name": item.task_name,
        "task_revision": item.task_revision,
        "trigger": item.trigger_id,
        "trigger_revision": item.trigger_revision,
        "trigger_type": item.trigger_type,
        "origin": item.execution_origin,
        "triggered_by": item.triggered_by,
        "requested_by": item.triggered_by if requested else None,
        "request_id": manual_request_id(item.idempotency_key) if manual else None,
        "scheduled_for": rfc3339(item.scheduled_for_ms),
        "scheduled_for_ms": item.scheduled_for_ms,
        "status": item.status,
        "version": item.version,
        "idempotency_key": item.idempotency_key,
        "created_at": rfc3339(item.created_at_ms),
        "created_at_ms": item.created_at_ms,
        "admission_lag_ms": lag,
        "started_at": rfc3339(item.started_at_ms),
        "finished_at": rfc3339(item.finished_at_ms),
        "duration_ms": item.duration_ms,
        "exit_code": item.exit_code,
        "error_code": item.error_code,
        "error_summary": item.error_summary,
        "cancel_reason": item.cancel_reason,
    }


def attempt_view(item: Attempt) -> View:
    return {
        "id": item.id,
        "attempt": item.attempt,
        "status": item.status,
        "executor_type": item.executor_type,
        "worker": item.worker_id,
        "lease_generation": item.lease_generation,
        "lease_expires_at": rfc3339(item.lease_expires_at_ms),
        "pid": item.pid,
        "exit_code": item.exit_code,
        "started_at": rfc3339(item.started_at_ms),
        "finished_at": rfc3339(item.finished_at_ms),
        "log_path": item.log_path,
        "error_code": item.error_code,
        "error_summary": item.error_summary,
    }


def event_summary(kind: str) -> str:
    try:
        return EventType(kind).summary
    except ValueError:
        return ""


def event_view(item: RunEvent) -> View:
    return {
        "sequence": item.sequence,
        "type": item.type,
        "summary": event_summary(item.type),
        "actor": f"{item.actor_type}:{item.actor_id}" if item.actor_id else item.actor_type,
        "attempt_id": item.attempt_id,
        "payload": item.payload,
        "at": rfc3339(item.created_at_ms),
        "at_ms": item.created_at_ms,
    }


def run_detail_view(detail: RunDetail, log_tail: Sequence[str], log: View) -> View:
    return {
        "run": run_view(detail.run),
        "attempts": [attempt_view(a) for a in detail.attempts],
        "events": [event_view(e) for e in detail.events],
        "log": log,
        "log_tail": list(log_tail),
    }
