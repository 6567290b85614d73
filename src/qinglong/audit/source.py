"""Read an AuditInput from either database in one consistent snapshot.

Only the audit's own queries are used (``audit_*`` blocks in each adapter's ``.sql``
files); the rows map onto plain records here, so the checker never sees a driver. A driver
error while reading becomes a QinglongError of the database's own driver (for PostgreSQL:
a role that may not SELECT a table is QL_PERMISSION_DENIED naming the table).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from qinglong.audit.model import (
    ArchivalRecord,
    AuditInput,
    ClaimRecord,
    InstanceRecord,
    MisfireRecord,
    PauseRecord,
    RunRecord,
    ScheduleRecord,
    TaskRevisionRecord,
    TriggerRevisionRecord,
)
from qinglong.domain.retention import trusted_mark
from qinglong.storage.kernel import Tx

# Claims and misfires are read this far around the window: enough to cover any claim that
# could have admitted a Run in it (a lease plus the longest grace).
EVIDENCE_MARGIN_MS = 10 * 60 * 1000
# Runs are read from the window's start on, with no upper bound: a second Run for one
# occurrence is a duplicate whatever the window (the checker judges the rest in the window).
RUNS_UNTIL_MS = 2**62


def _opt(value: Any) -> int | None:
    return None if value is None else int(value)


def _config(value: Any) -> dict[str, object]:
    """A spec config as read: a dict from PostgreSQL's jsonb, JSON text from SQLite."""
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value) if isinstance(value, dict) else {}


def read_input(tx: Tx, *, now_ms: int, from_ms: int, to_ms: int) -> AuditInput:
    """Everything the checker judges, read in ``tx`` (one snapshot)."""
    def rows(name: str, params: Mapping[str, object] | None = None) -> list[Any]:
        return tx.all(name, params)

    window = {"from_ms": from_ms, "to_ms": RUNS_UNTIL_MS}
    evidence = {"from_ms": from_ms - EVIDENCE_MARGIN_MS, "to_ms": to_ms + EVIDENCE_MARGIN_MS}
    claims = None
    if tx.capabilities.shared:  # only replicas that share the database write claims
        claims = tuple(ClaimRecord(
            project_id=r["project_id"], trigger_id=r["trigger_id"],
            trigger_revision=int(r["trigger_revision"]), version=int(r["claim_version"]),
            owner=r["claim_owner"], token=r["claim_token"], cursor_ms=_opt(r["cursor_ms"]),
            acquired_at_ms=int(r["acquired_at_ms"]), expires_at_ms=int(r["expires_at_ms"]),
        ) for r in rows("audit_claims", evidence))
    marks = {r["subject"]: int(r["pruned_before_ms"]) for r in rows("audit_retention_marks")}
    trusted = {subject: trusted_mark(mark, now_ms) for subject, mark in marks.items()}
    return AuditInput(
        dialect=tx.capabilities.name,
        now_ms=now_ms,
        claims_pruned_before_ms=trusted.get("claims"),
        events_pruned_before_ms=trusted.get("run_events"),
        marks_ahead=trusted != marks,
        revisions=tuple(TriggerRevisionRecord(
            project_id=r["project_id"], trigger_id=r["trigger_id"], revision=int(r["revision"]),
            task_id=r["task_id"], task_revision=int(r["task_revision"]),
            expression=r["expression"], timezone=r["timezone"], misfire_policy=r["misfire_policy"],
            enabled=bool(r["enabled"]), published_at_ms=int(r["created_at_ms"]),
            config=_config(r["config"]),
        ) for r in rows("audit_trigger_revisions")),
        task_revisions=tuple(TaskRevisionRecord(
            project_id=r["project_id"], task_id=r["task_id"], revision=int(r["revision"]),
            enabled=bool(r["enabled"]), published_at_ms=int(r["created_at_ms"]),
        ) for r in rows("audit_task_revisions")),
        archivals=tuple(ArchivalRecord(
            project_id=r["project_id"], archived_at_ms=int(r["archived_at_ms"]),
            restored_at_ms=_opt(r["restored_at_ms"]),
        ) for r in rows("audit_project_archivals")),
        instances=tuple(InstanceRecord(
            instance_id=r["instance_id"], role=r["role"], seen_at_ms=int(r["seen_at_ms"]),
            stopped_at_ms=_opt(r["stopped_at_ms"]),
        ) for r in rows("audit_instances")),
        runs=tuple(RunRecord(
            id=r["id"], project_id=r["project_id"], trigger_id=r["trigger_id"],
            trigger_revision=int(r["trigger_revision"]), scheduled_for_ms=int(r["scheduled_for_ms"]),
            created_at_ms=int(r["created_at_ms"]), attempts=int(r["attempts"]),
            admission_events=int(r["admission_events"]), claim_version=_opt(r["claim_version"]),
            claim_token=r["claim_token"], trigger_type=r["trigger_type"], status=r["status"],
            finished_at_ms=_opt(r["finished_at_ms"]), events=_opt(r["events"]),
        ) for r in rows("audit_runs", window)),
        claims=claims,
        misfires=tuple(MisfireRecord(
            project_id=r["project_id"], trigger_id=r["trigger_id"],
            trigger_revision=int(r["trigger_revision"]), due_at_ms=int(r["due_at_ms"]),
            skipped_through_ms=int(r["skipped_through_ms"]), next_fire_at_ms=int(r["next_fire_at_ms"]),
            policy=r["policy"], run_id=r["run_id"], decided_at_ms=int(r["decided_at_ms"]),
        ) for r in rows("audit_misfires", evidence)),
        schedules=tuple(ScheduleRecord(
            project_id=r["project_id"], trigger_id=r["trigger_id"],
            trigger_revision=int(r["trigger_revision"]), next_fire_at_ms=_opt(r["next_fire_at_ms"]),
            last_scheduled_at_ms=_opt(r["last_scheduled_at_ms"]),
            claim_version=_opt(r["claim_version"]),
        ) for r in rows("audit_schedules")),
        pauses=tuple(PauseRecord(
            project_id=r["project_id"], trigger_id=r["trigger_id"],
            paused_at_ms=int(r["paused_at_ms"]), ended_at_ms=_opt(r["ended_at_ms"]),
        ) for r in rows("audit_trigger_pauses")),
    )
