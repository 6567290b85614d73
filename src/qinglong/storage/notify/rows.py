"""What the notify store's units share: an outbox row written for one event and channel
(``OutboxUnit``), and the rows of the notify tables and of the sources the dispatcher scans
read back as deliveries and events (storage/notify/writer.py, storage/notify/unplaceable.py).
"""

from __future__ import annotations

import json
from typing import Any

from qinglong.domain.notify import payload as documents
from qinglong.domain.notify.channels import DEFAULT_ATTEMPTS, spec_from_stored
from qinglong.domain.notify.events import RuleEvent
from qinglong.domain.notify.model import Delivery, DeliveryStatus
from qinglong.domain.notify.payload import MisfireFacts, NotifyEvent, RunFacts
from qinglong.errors import RecordCorrupt
from qinglong.storage.dbapi import Row
from qinglong.storage.units import TxUnit


def misfire_key(project_id: str, trigger_id: str, revision: int, due_at_ms: int) -> str:
    return f"trigger.misfired:{project_id}/{trigger_id}@{revision}:{due_at_ms}"


def recovery_key(project_id: str, trigger_id: str, revision: int, due_at_ms: int) -> str:
    return f"trigger.recovered:{project_id}/{trigger_id}@{revision}:{due_at_ms}"


def unplaceable_key(run_id: str) -> str:
    """One per Run: a Run is reported unplaceable at most once per channel, however often it
    becomes placeable and unplaceable again (notify_unplaceable_page builds the same key)."""
    return f"{RuleEvent.UNPLACEABLE.wire}:{run_id}"


def json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def delivery_from_row(row: Row) -> Delivery:
    status = DeliveryStatus(row["status"])
    active = status in (DeliveryStatus.PENDING, DeliveryStatus.SENDING)
    return Delivery(
        id=row["id"], channel=row["channel"], event=row["event"], source_key=row["source_key"],
        project_id=row["project_id"], task_id=row["task_id"], trigger_id=row["trigger_id"],
        run_id=row["run_id"], status=status, attempts=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        next_attempt_at_ms=int(row["next_attempt_at_ms"]) if active else None,
        last_status=optional_int(row["last_status"]), last_error=row["last_error"],
        occurred_at_ms=int(row["occurred_at_ms"]), created_at_ms=int(row["created_at_ms"]),
        finished_at_ms=optional_int(row["finished_at_ms"]))


def _max_attempts(row: Row) -> int:
    try:
        return spec_from_stored(row["channel"], row["kind"], row["config_json"]).retry.max_attempts
    except RecordCorrupt:
        return DEFAULT_ATTEMPTS  # its sends will fail, visibly, with the same error


class OutboxUnit(TxUnit):
    """A unit of notify work that writes outbox rows."""

    def _insert(self, event: NotifyEvent, channel_row: Row) -> int:
        """The notification of ``event`` for the channel of ``channel_row`` (its ``channel``,
        ``kind`` and ``config_json``): 1, or 0 when that channel already has it."""
        delivery_id = self._new_id()
        channel = channel_row["channel"]
        document = documents.build(event, delivery_id=delivery_id, channel=channel)
        return self._run("notify_outbox_insert", {
            "id": delivery_id, "channel": channel, "source_key": event.source_key,
            "event": event.event, "project_id": event.project_id, "task_id": event.task_id,
            "trigger_id": event.trigger_id,
            "run_id": event.run.id if event.run is not None else None,
            "payload": documents.body(document).decode("utf-8"),
            "occurred_at_ms": event.occurred_at_ms, "max_attempts": _max_attempts(channel_row),
            "now_ms": self.now_ms})


def run_event(row: Row) -> NotifyEvent:
    """A Run outcome (the run_outcome_columns fragment) as its event."""
    details = json_value(row["event_payload"]) or {}
    status = str(row["event_type"]).removeprefix("run.")
    exit_code = details.get("exit_code")
    run = RunFacts(
        id=row["run_id"], status=status, task_name=row["task_name"],
        origin=row["execution_origin"], requested_by=row["triggered_by"],
        scheduled_for_ms=optional_int(row["scheduled_for_ms"]),
        created_at_ms=int(row["run_created_at_ms"]),
        started_at_ms=optional_int(row["started_at_ms"]),
        finished_at_ms=optional_int(row["finished_at_ms"]), attempts=int(row["attempts_spent"]),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        error_code=row["error_code"], error_summary=row["error_summary"],
        cancel_reason=row["cancel_reason"] or details.get("cancel_reason"))
    return NotifyEvent(event=row["event_type"], source_key=f"{row['event_type']}:{row['run_id']}",
                       occurred_at_ms=int(row["occurred_at_ms"]), project_id=row["project_id"],
                       task_id=row["task_id"], trigger_id=row["trigger_id"], run=run)


def misfire_event(row: Row) -> NotifyEvent:
    """A misfire record (notify_misfires_match) as its event."""
    revision, due = int(row["trigger_revision"]), int(row["due_at_ms"])
    return NotifyEvent(
        event=RuleEvent.MISFIRED.wire,
        source_key=misfire_key(row["project_id"], row["trigger_id"], revision, due),
        occurred_at_ms=int(row["decided_at_ms"]), project_id=row["project_id"],
        task_id=row["task_id"], trigger_id=row["trigger_id"],
        misfire=MisfireFacts(trigger_revision=revision, policy=row["policy"], due_at_ms=due,
                             skipped_through_ms=int(row["skipped_through_ms"]),
                             next_fire_at_ms=int(row["next_fire_at_ms"]), run_id=row["run_id"],
                             decided_at_ms=int(row["decided_at_ms"])))


def progress_event(row: Row) -> NotifyEvent:
    """A Run's start (an ``attempt.running`` event: ``run.started``) or its success
    (``run.succeeded``), from notify_progress_match. A start is told as it was then: the Run
    running, its attempt that started, nothing about how it ended."""
    if row["event_type"] != "attempt.running":
        return run_event(row)
    details = json_value(row["event_payload"]) or {}
    attempt = details.get("attempt")
    at = int(row["occurred_at_ms"])
    run = RunFacts(
        id=row["run_id"], status="running", task_name=row["task_name"],
        origin=row["execution_origin"], requested_by=row["triggered_by"],
        scheduled_for_ms=optional_int(row["scheduled_for_ms"]),
        created_at_ms=int(row["run_created_at_ms"]), started_at_ms=at, finished_at_ms=None,
        attempts=attempt if isinstance(attempt, int) else int(row["attempts_spent"]) + 1,
        exit_code=None, error_code=None, error_summary=None, cancel_reason=None)
    wire = RuleEvent.STARTED.wire
    return NotifyEvent(event=wire, source_key=f"{wire}:{row['run_id']}", occurred_at_ms=at,
                       project_id=row["project_id"], task_id=row["task_id"],
                       trigger_id=row["trigger_id"], run=run)
