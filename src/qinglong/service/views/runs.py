"""The views of Runs: a Run, its attempts and events, where its log is, one Run with all of
them, a page of Runs, and the answers of cancelling one and of run now."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from qinglong.domain.model import Attempt, Run, RunDetail, RunEvent
from qinglong.domain.runs import (
    TRIGGER_TYPE_BACKFILL,
    TRIGGER_TYPE_MANUAL,
    EventType,
    manual_request_id,
)
from qinglong.service.times import rfc3339
from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, instant


class RunView(ViewModel):
    id: str
    project: str
    task: str
    task_name: str | None
    task_revision: str
    trigger: str | None
    trigger_revision: int | None
    trigger_type: str
    origin: str
    triggered_by: str | None
    requested_by: str | None
    request_id: str | None
    scheduled_for: OptionalInstant
    scheduled_for_ms: int | None
    status: str
    version: int
    idempotency_key: str | None
    created_at: Instant
    created_at_ms: int
    admission_lag_ms: int | None
    started_at: OptionalInstant
    finished_at: OptionalInstant
    duration_ms: int | None
    exit_code: int | None
    error_code: str | None
    error_summary: str | None
    cancel_reason: str | None
    requires: list[str] = Field(description="Worker labels the Run needs (KEY or KEY=VALUE); "
                                            "empty: any worker")
    parameters: dict[str, str | int | bool] = Field(
        default_factory=dict, description="The value of each of its task's parameters")


class RunPageView(ViewModel):
    items: list[RunView]
    next_cursor: str | None = Field(description="Send it as ?cursor= with the same filters for "
                                                "the next page; null: no more")


class AttemptView(ViewModel):
    id: str
    attempt: int
    status: str
    executor_type: str
    worker: str | None
    lease_generation: int
    lease_expires_at: OptionalInstant
    pid: int | None
    exit_code: int | None
    started_at: OptionalInstant
    finished_at: OptionalInstant
    log_path: str | None
    error_code: str | None
    error_summary: str | None
    environment_revision: int | None = None  # the project environment it ran with
    environment_digest: str | None = None  # (SHA-256 of its names, flags and value digests)


class EventView(ViewModel):
    sequence: int
    type: str
    summary: str
    actor: str
    attempt_id: str | None
    payload: dict[str, Any]
    at: Instant
    at_ms: int


class LogLocation(ViewModel):
    path: str | None
    readable: bool
    stored: Literal["file", "database"] | None
    note: str | None


class RunDetailView(ViewModel):
    run: RunView
    attempts: list[AttemptView]
    events: list[EventView]
    log: LogLocation
    log_tail: list[str]
    unplaceable: str | None = Field(
        default=None, description="For a queued Run that requires labels: why no live worker "
                                  "can take it (null: one can, or it requires none)")


class RunCancelView(RunView):
    cancel: Literal["done", "requested"]


class RunNowView(RunView):
    admitted: bool = Field(description="False: the request id had admitted this Run before")
    in_doubt: bool


def run_view(item: Run) -> RunView:
    manual = item.trigger_type == TRIGGER_TYPE_MANUAL
    requested = manual or item.trigger_type == TRIGGER_TYPE_BACKFILL  # somebody asked for it
    # a manual Run's occurrence is its admission, a backfilled one was admitted when somebody
    # asked: neither has a scheduler's lag to speak of
    lag = (None if item.scheduled_for_ms is None or requested
           else item.created_at_ms - item.scheduled_for_ms)
    return RunView(
        id=item.id, project=item.project_id, task=item.task_id, task_name=item.task_name,
        task_revision=item.task_revision, trigger=item.trigger_id,
        trigger_revision=item.trigger_revision, trigger_type=item.trigger_type,
        origin=item.execution_origin, triggered_by=item.triggered_by,
        requested_by=item.triggered_by if requested else None,
        request_id=manual_request_id(item.idempotency_key) if manual else None,
        scheduled_for=rfc3339(item.scheduled_for_ms), scheduled_for_ms=item.scheduled_for_ms,
        status=item.status, version=item.version, idempotency_key=item.idempotency_key,
        created_at=instant(item.created_at_ms), created_at_ms=item.created_at_ms,
        admission_lag_ms=lag, started_at=rfc3339(item.started_at_ms),
        finished_at=rfc3339(item.finished_at_ms), duration_ms=item.duration_ms,
        exit_code=item.exit_code, error_code=item.error_code,
        error_summary=item.error_summary, cancel_reason=item.cancel_reason,
        requires=list(item.requires), parameters=dict(item.parameters))


def attempt_view(item: Attempt) -> AttemptView:
    return AttemptView(
        id=item.id, attempt=item.attempt, status=item.status, executor_type=item.executor_type,
        worker=item.worker_id, lease_generation=item.lease_generation,
        lease_expires_at=rfc3339(item.lease_expires_at_ms), pid=item.pid,
        exit_code=item.exit_code, started_at=rfc3339(item.started_at_ms),
        finished_at=rfc3339(item.finished_at_ms), log_path=item.log_path,
        error_code=item.error_code, error_summary=item.error_summary,
        environment_revision=item.environment_revision,
        environment_digest=item.environment_digest)


def event_summary(kind: str) -> str:
    try:
        return EventType(kind).summary
    except ValueError:
        return ""


def event_view(item: RunEvent) -> EventView:
    return EventView(
        sequence=item.sequence, type=item.type, summary=event_summary(item.type),
        actor=f"{item.actor_type}:{item.actor_id}" if item.actor_id else item.actor_type,
        attempt_id=item.attempt_id, payload=item.payload, at=instant(item.created_at_ms),
        at_ms=item.created_at_ms)


def run_detail_view(detail: RunDetail, log_tail: Sequence[str],
                    log: LogLocation, unplaceable: str | None = None) -> RunDetailView:
    return RunDetailView(run=run_view(detail.run),
                         attempts=[attempt_view(a) for a in detail.attempts],
                         events=[event_view(e) for e in detail.events], log=log,
                         log_tail=list(log_tail), unplaceable=unplaceable)
