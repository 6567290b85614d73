"""What the audit reads (plain records from any database) and what it reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from qinglong.audit.execution import ExecutionReport
from qinglong.audit.flows import FlowReport


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerRevisionRecord:
    project_id: str
    trigger_id: str
    revision: int
    task_id: str
    task_revision: int
    expression: str
    timezone: str
    misfire_policy: str
    enabled: bool
    published_at_ms: int
    # the spec's whole config (the cron DST policy, ...): what else the schedule depends on
    config: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRevisionRecord:
    project_id: str
    task_id: str
    revision: int
    enabled: bool
    published_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchivalRecord:
    """A project was archived from ``archived_at_ms`` until ``restored_at_ms`` (or now)."""

    project_id: str
    archived_at_ms: int
    restored_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceRecord:
    instance_id: str
    role: str
    seen_at_ms: int
    stopped_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    id: str
    project_id: str
    trigger_id: str
    trigger_revision: int
    scheduled_for_ms: int
    created_at_ms: int
    attempts: int
    admission_events: int  # run.created at sequence 1 and run.queued at sequence 2
    claim_version: int | None
    claim_token: str | None
    # "cron": admitted by a scheduler for its occurrence; "backfill": admitted later by
    # `ql trigger backfill` for a past occurrence (no claim; it explains a gap);
    # "flow_start": the flow run an occurrence of a flow trigger started (attempts: its steps)
    trigger_type: str = "cron"
    # what retention may have pruned (docs/retention.md): how the Run ended and how many
    # events it still has (None: not read, judged as before retention existed)
    status: str | None = None
    finished_at_ms: int | None = None
    events: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRecord:
    project_id: str
    trigger_id: str
    trigger_revision: int
    version: int
    owner: str
    token: str
    cursor_ms: int | None
    acquired_at_ms: int
    expires_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MisfireRecord:
    project_id: str
    trigger_id: str
    trigger_revision: int
    due_at_ms: int
    skipped_through_ms: int
    next_fire_at_ms: int
    policy: str
    run_id: str | None
    decided_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseRecord:
    """A pause of a trigger: from ``paused_at_ms`` until it was resumed or reached its
    ``--until`` (``ended_at_ms``, exclusive; None while it lasts)."""

    project_id: str
    trigger_id: str
    paused_at_ms: int
    ended_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord:
    project_id: str
    trigger_id: str
    trigger_revision: int
    next_fire_at_ms: int | None
    last_scheduled_at_ms: int | None
    claim_version: int | None = None  # the row's latest claim (PostgreSQL; None on SQLite)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditInput:
    """Everything the audit needs, read in one consistent snapshot."""

    dialect: str
    now_ms: int
    revisions: tuple[TriggerRevisionRecord, ...]
    task_revisions: tuple[TaskRevisionRecord, ...]
    archivals: tuple[ArchivalRecord, ...]
    instances: tuple[InstanceRecord, ...]
    runs: tuple[RunRecord, ...]
    claims: tuple[ClaimRecord, ...] | None  # None where there are no claims (SQLite)
    misfires: tuple[MisfireRecord, ...]
    schedules: tuple[ScheduleRecord, ...]
    pauses: tuple[PauseRecord, ...] = ()
    # how far retention pruned claim records and Run events (retention_marks; None: never)
    claims_pruned_before_ms: int | None = None
    events_pruned_before_ms: int | None = None
    marks_ahead: bool = False  # a mark was later than now - 1 day (a clock ran ahead): cut


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditParams:
    start_ms: int | None = None  # None: the earliest publish time
    end_ms: int | None = None  # None: see window.default_end (now, or the last evidence)
    settle_ms: int = 5_000  # occurrences later than end - settle are not required yet
    grace_ms: int = 30_000
    lease_ms: int = 30_000
    project_id: str | None = None
    trigger_id: str | None = None
    # A Run still executing whose Attempt's lease ended longer ago than this, or a retry
    # overdue by as much, is stuck (the reconciler settles leases 5 s after they expire).
    execution_stale_ms: int = 45_000


@dataclass(slots=True, kw_only=True)
class TriggerReport:
    project_id: str
    trigger_id: str
    expected: int = 0
    admitted: int = 0
    duplicates: int = 0
    gaps_misfire: int = 0
    gaps_superseded: int = 0
    gaps_paused: int = 0
    gaps_backfilled: int = 0  # no scheduled Run, but a backfill admitted one later
    gaps_unexplained: list[int] = field(default_factory=list)
    spurious: list[int] = field(default_factory=list)
    fenced_out: list[str] = field(default_factory=list)
    bad_shape: list[str] = field(default_factory=list)
    cursor_regressions: int = 0
    misfire_violations: list[str] = field(default_factory=list)
    pause_violations: list[str] = field(default_factory=list)
    lags_ms: list[int] = field(default_factory=list)
    # Runs judged without the events or the claim retention pruned (before its marks; not
    # violations: docs/retention.md)
    evidence_pruned: list[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return (self.duplicates + len(self.gaps_unexplained) + len(self.spurious)
                + len(self.fenced_out) + len(self.bad_shape) + self.cursor_regressions
                + len(self.misfire_violations) + len(self.pause_violations))


@dataclass(slots=True, kw_only=True)
class LedgerReport:
    acknowledged: int = 0
    double_deliveries: list[str] = field(default_factory=list)  # "trigger@ms" acked twice
    missing: list[str] = field(default_factory=list)  # acked, but not in the database as acked

    @property
    def violations(self) -> int:
        return len(self.double_deliveries) + len(self.missing)


@dataclass(slots=True, kw_only=True)
class AuditReport:
    dialect: str
    start_ms: int
    end_ms: int
    required_until_ms: int
    settle_ms: int
    grace_ms: int
    lease_ms: int
    triggers: list[TriggerReport]
    end_source: str = "option"  # what ended the window: see window.END_SOURCES
    ledger: LedgerReport | None = None
    execution: ExecutionReport | None = None
    flows: FlowReport | None = None
    notes: list[str] = field(default_factory=list)
    # before this instant retention pruned claims or Run events (the later of its marks;
    # None: nothing was ever pruned; docs/retention.md)
    evidence_horizon_ms: int | None = None

    @property
    def violations(self) -> int:
        return (sum(t.violations for t in self.triggers)
                + (self.ledger.violations if self.ledger else 0)
                + (self.execution.violations if self.execution else 0)
                + (self.flows.violations if self.flows else 0))

    @property
    def ok(self) -> bool:
        return self.violations == 0
