"""Map database rows (dicts with the shared column names) to domain records.

Both adapters alias their joins the same way (``t_`` for trigger revision columns,
``k_`` for task revision columns), so one set of mappers serves SQLite and PostgreSQL.
Every mapper that rebuilds a revision re-verifies its content digest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from qinglong.domain.canonical import parse_json_object
from qinglong.domain.decision import Pause
from qinglong.domain.model import Attempt, Project, ProjectStatus, Run, RunEvent, ScheduleState
from qinglong.domain.schedule import ScheduleCandidate
from qinglong.domain.stored_trigger import trigger_revision_from_text
from qinglong.domain.task import (
    ExecutionRevision,
    TaskRevision,
    execution_revision_from_row,
    task_revision_from_row,
)
from qinglong.domain.trigger import TriggerRevision, trigger_revision_from_row
from qinglong.errors import InvalidInput, RecordCorrupt


def json_object(value: Any, what: str) -> dict[str, object]:
    """A stored JSON object (RecordCorrupt if it is not one)."""
    if isinstance(value, dict):  # PostgreSQL jsonb arrives decoded
        return value
    return parse_json_object(str(value), what)


def project_from_row(row: Mapping[str, Any]) -> Project:
    return Project(
        id=row["id"],
        slug=row["slug"],
        name=row["name"],
        status=ProjectStatus(row["status"]),
        version=int(row["version"]),
        created_at_ms=int(row["created_at_ms"]),
        updated_at_ms=int(row["updated_at_ms"]),
    )


def task_revision(row: Mapping[str, Any]) -> TaskRevision:
    return task_revision_from_row(row, json_object(row["spec_json"], "task spec"))


def execution_revision(row: Mapping[str, Any]) -> ExecutionRevision:
    return execution_revision_from_row(row, json_object(row["plan_json"], "execution plan"))


def trigger_revision(row: Mapping[str, Any]) -> TriggerRevision:
    spec = row["spec_json"]
    if isinstance(spec, str):  # read as text: each distinct text is parsed once
        return trigger_revision_from_text(row, spec)
    return trigger_revision_from_row(row, json_object(spec, "trigger spec"))


def prefixed(row: Mapping[str, Any], prefix: str, **extra: Any) -> dict[str, Any]:
    """The columns of ``row`` that start with ``prefix``, without it, plus ``extra``."""
    out = {key[len(prefix):]: value for key, value in row.items() if key.startswith(prefix)}
    out.update(extra)
    return out


# The trigger revision columns of a candidate row (``t_`` + name): every one the revision is
# rebuilt from, picked by name rather than by scanning the row (a hot path of admission).
_TRIGGER_REVISION_COLUMNS = tuple(
    ("t_" + name, name) for name in ("revision", "task_id", "task_revision", "task_content_digest",
                                     "spec_json", "enabled", "content_digest", "created_at_ms"))


def candidate_trigger_revision(row: Mapping[str, Any]) -> TriggerRevision:
    columns = {name: row[column] for column, name in _TRIGGER_REVISION_COLUMNS if column in row}
    columns["project_id"] = row["project_id"]
    columns["trigger_id"] = row["trigger_id"]
    return trigger_revision(columns)


def candidate_task_revision(row: Mapping[str, Any]) -> TaskRevision:
    """The task revision a batch row brings (``k_`` columns, its task id among them)."""
    return task_revision(prefixed(row, "k_", project_id=row["project_id"]))


def candidate_from_row(row: Mapping[str, Any]) -> ScheduleCandidate:
    """A schedule row joined to its trigger revision (``t_`` columns), digest-verified."""
    return candidate_with_revision(row, candidate_trigger_revision(row))


def candidate_with_revision(row: Mapping[str, Any], revision: TriggerRevision) -> ScheduleCandidate:
    """A schedule row with the trigger revision it is pinned to (already verified)."""
    cursor = row["next_fire_at_ms"]
    return ScheduleCandidate(
        project_id=row["project_id"],
        trigger_id=row["trigger_id"],
        trigger_revision=int(row["trigger_revision"]),
        trigger_content_digest=revision.content_digest,
        trigger_published_at_ms=revision.created_at_ms,
        task_id=revision.task_id,
        task_revision=revision.task_revision,
        task_content_digest=revision.task_content_digest,
        spec=revision.spec,
        state_version=int(row["state_version"]),
        next_fire_at_ms=None if cursor is None else int(cursor),
        pause=pause_from_row(row),
    )


def pause_from_row(row: Mapping[str, Any], prefix: str = "") -> Pause | None:
    """The schedule row's latest pause (``paused_from_ms``, ``paused_until_ms``), if any."""
    begun = row.get(prefix + "paused_from_ms")
    if begun is None:
        return None
    until = row.get(prefix + "paused_until_ms")
    try:
        return Pause(from_ms=int(begun), until_ms=None if until is None else int(until))
    except InvalidInput as exc:
        raise RecordCorrupt(f"schedule row pause: {exc.message}") from exc


def schedule_state(row: Mapping[str, Any], prefix: str = "") -> ScheduleState | None:
    if row.get(prefix + "trigger_revision") is None:
        return None

    def opt(name: str) -> int | None:
        value = row.get(prefix + name)
        return None if value is None else int(value)

    return ScheduleState(
        project_id=row["project_id"],
        trigger_id=row["trigger_id"],
        trigger_revision=int(row[prefix + "trigger_revision"]),
        next_fire_at_ms=opt("next_fire_at_ms"),
        last_scheduled_at_ms=opt("last_scheduled_at_ms"),
        state_version=int(row[prefix + "state_version"]),
        updated_at_ms=int(row[prefix + "updated_at_ms"]),
        claim_owner=row.get(prefix + "claim_owner"),
        claim_version=int(row.get(prefix + "claim_version") or 0),
        claim_expires_at_ms=opt("claim_expires_at_ms"),
        pause=pause_from_row(row, prefix),
    )


def optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


_opt_int = optional_int


def run_from_row(row: Mapping[str, Any]) -> Run:
    return Run(
        id=row["id"],
        project_id=row["project_id"],
        task_id=row["task_id"],
        task_revision=row["task_revision"],
        task_name=row["task_name"],
        trigger_id=row["trigger_id"],
        trigger_revision=_opt_int(row["trigger_revision"]),
        scheduled_for_ms=_opt_int(row["scheduled_for_ms"]),
        status=row["status"],
        version=int(row["version"]),
        event_sequence=int(row["event_sequence"]),
        idempotency_key=row["idempotency_key"],
        created_at_ms=int(row["created_at_ms"]),
        queued_at_ms=_opt_int(row["queued_at_ms"]),
        started_at_ms=_opt_int(row["started_at_ms"]),
        finished_at_ms=_opt_int(row["finished_at_ms"]),
        error_code=row["error_code"],
        error_summary=row["error_summary"],
        cancel_requested_at_ms=_opt_int(row["cancel_requested_at_ms"]),
        cancel_reason=row["cancel_reason"],
        trigger_type=row["trigger_type"],
        exit_code=_opt_int(row.get("exit_code")),
    )


def attempt_from_row(row: Mapping[str, Any]) -> Attempt:
    return Attempt(
        id=row["id"],
        run_id=row["run_id"],
        attempt=int(row["attempt"]),
        status=row["status"],
        executor_type=row["executor_type"],
        pid=_opt_int(row.get("pid")),
        executor_handle=row.get("executor_handle"),
        log_path=row.get("log_path"),
        created_at_ms=int(row["created_at_ms"]),
        started_at_ms=_opt_int(row.get("started_at_ms")),
        finished_at_ms=_opt_int(row.get("finished_at_ms")),
        exit_code=_opt_int(row.get("exit_code")),
        error_code=row.get("error_code"),
        error_summary=row.get("error_summary"),
        worker_id=row.get("worker_id"),
        lease_generation=int(row.get("lease_generation") or 0),
        lease_expires_at_ms=_opt_int(row.get("lease_expires_at_ms")),
        environment_revision=_opt_int(row.get("environment_revision")),
        environment_digest=row.get("environment_digest"),
    )


def event_from_row(row: Mapping[str, Any]) -> RunEvent:
    return RunEvent(
        id=row["id"],
        run_id=row["run_id"],
        sequence=int(row["sequence"]),
        type=row["type"],
        actor_type=row["actor_type"],
        actor_id=row["actor_id"],
        attempt_id=row["attempt_id"],
        payload=json_object(row["payload"], "event payload"),
        created_at_ms=int(row["created_at_ms"]),
    )


def payload_text(payload: Mapping[str, object]) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))
