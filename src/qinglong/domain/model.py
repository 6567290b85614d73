"""Read models returned by the stores: projects, runs, attempts, events, trigger views."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from qinglong.domain.decision import Pause
from qinglong.domain.task import TaskRevision
from qinglong.domain.trigger import TriggerRevision, TriggerSpec


class ProjectStatus(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"


@dataclass(frozen=True, slots=True, kw_only=True)
class Project:
    id: str
    slug: str
    name: str
    status: ProjectStatus
    version: int
    created_at_ms: int
    updated_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleState:
    project_id: str
    trigger_id: str
    trigger_revision: int
    next_fire_at_ms: int | None
    last_scheduled_at_ms: int | None
    state_version: int
    updated_at_ms: int
    claim_owner: str | None = None
    claim_version: int = 0
    claim_expires_at_ms: int | None = None
    pause: Pause | None = None  # the latest pause: in effect, or ended


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerView:
    """A trigger's current revision with its schedule row and whether it can fire."""

    revision: TriggerRevision
    schedule: ScheduleState | None
    task_pin_current: bool
    project_active: bool
    deleted_at_ms: int | None = None
    pause_reason: str | None = None  # why the latest pause was made, if it was said

    @property
    def firing(self) -> bool:
        return (self.revision.enabled and self.task_pin_current and self.project_active
                and self.deleted_at_ms is None)

    def paused_at(self, now_ms: int) -> bool:
        """Whether a pause holds the trigger back at ``now_ms``."""
        pause = self.schedule.pause if self.schedule else None
        return pause is not None and pause.in_effect_at(now_ms)

    def state_at(self, now_ms: int) -> str:
        """``state``, or paused while a pause holds a trigger that would fire."""
        state = self.state
        return "paused" if state == "firing" and self.paused_at(now_ms) else state

    @property
    def state(self) -> str:
        """deleted, archived (its project is), disabled, stale-pin (the task moved on and
        this trigger was not re-pinned) or firing."""
        if self.deleted_at_ms is not None:
            return "deleted"
        if not self.project_active:
            return "archived"
        if not self.revision.enabled:
            return "disabled"
        if not self.task_pin_current:
            return "stale-pin"
        return "firing"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskView:
    revision: TaskRevision
    deleted_at_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    id: str
    project_id: str
    task_id: str
    task_revision: str
    task_name: str | None
    trigger_id: str | None
    trigger_revision: int | None
    scheduled_for_ms: int | None
    status: str
    version: int
    event_sequence: int
    idempotency_key: str | None
    created_at_ms: int
    queued_at_ms: int | None
    started_at_ms: int | None
    finished_at_ms: int | None
    error_code: str | None
    error_summary: str | None
    cancel_requested_at_ms: int | None = None
    cancel_reason: str | None = None
    trigger_type: str = "cron"
    exit_code: int | None = None  # of its latest attempt (filled by listings)
    execution_origin: str = "scheduled_system"  # or "manual_user" (run now), "backfill_user"
    triggered_by: str | None = None  # the trigger (scheduled) or who asked (manual, backfill)
    requires: tuple[str, ...] = ()  # worker labels it needs (domain/placement.py)
    parameters: Mapping[str, str | int | bool] = field(default_factory=dict)  # its values

    @property
    def duration_ms(self) -> int | None:
        if self.started_at_ms is None or self.finished_at_ms is None:
            return None
        return self.finished_at_ms - self.started_at_ms


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    id: str
    run_id: str
    attempt: int
    status: str
    executor_type: str
    pid: int | None
    executor_handle: str | None
    log_path: str | None
    created_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None
    exit_code: int | None
    error_code: str | None
    error_summary: str | None
    worker_id: str | None = None
    lease_generation: int = 0
    lease_expires_at_ms: int | None = None
    environment_revision: int | None = None  # the project environment it was leased with
    environment_digest: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEvent:
    id: str
    run_id: str
    sequence: int
    type: str
    actor_type: str
    actor_id: str | None
    attempt_id: str | None
    payload: dict[str, object]
    created_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunDetail:
    run: Run
    attempts: tuple[Attempt, ...] = ()
    events: tuple[RunEvent, ...] = field(default_factory=tuple)


# --- the occurrence ledger of one trigger (`ql trigger ledger`) ----------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerRevision:
    """One trigger revision: in force from its publish time until the next one's."""

    revision: int
    enabled: bool
    published_at_ms: int
    expression: str
    timezone: str
    misfire_policy: str
    task_revision: int  # the task revision it pins
    spec: TriggerSpec | None = None  # the verified spec (the DST policy is only there)


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerTaskRevision:
    """A revision of the trigger's task: one after the pinned one makes the pin stale."""

    revision: int
    enabled: bool
    published_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerRun:
    """A Run standing for an occurrence (any trigger type but manual)."""

    id: str
    scheduled_for_ms: int
    status: str
    trigger_type: str
    trigger_revision: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerMisfire:
    """A recorded decision that dropped (skip, fire_once) or held back (paused) the
    occurrences from ``due_at_ms`` through ``skipped_through_ms``."""

    trigger_revision: int
    due_at_ms: int
    skipped_through_ms: int
    policy: str  # skip | fire_once | paused
    decided_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerSpan:
    """A pause or an archival: from ``from_ms`` until ``until_ms`` (exclusive; None: still)."""

    from_ms: int
    until_ms: int | None

    def covers(self, at_ms: int) -> bool:
        return self.from_ms <= at_ms and (self.until_ms is None or at_ms < self.until_ms)


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerCursor:
    """The trigger's schedule row: the revision it serves and the next occurrence to decide
    (None: that revision has decided nothing yet)."""

    trigger_revision: int
    next_fire_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerFacts:
    """What the ledger of one trigger is computed from, read in one snapshot: every
    revision, the task's revisions, the Runs, misfire records, pauses and archivals that
    touch ``[from_ms, to_ms]``, the schedule row, and the store's clock."""

    project_id: str
    trigger_id: str
    from_ms: int
    to_ms: int
    now_ms: int  # the store's clock (the database's on PostgreSQL)
    revisions: tuple[LedgerRevision, ...]
    task_revisions: tuple[LedgerTaskRevision, ...]
    runs: tuple[LedgerRun, ...]
    misfires: tuple[LedgerMisfire, ...]
    pauses: tuple[LedgerSpan, ...]
    archivals: tuple[LedgerSpan, ...]
    cursor: LedgerCursor | None
