"""The storage ports: Protocols the scheduler, executor and CLI need, with their params.

Each operation takes one params dataclass named after it. The contract tests run
the same cases against every adapter that implements a port.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.decision import Decision, Disposition
from qinglong.domain.model import Project, Run, RunDetail, TriggerView
from qinglong.domain.schedule import ScheduleCandidate, ScheduleClaim
from qinglong.domain.task import CommandSpec, ExecutionRevision, TaskRevision
from qinglong.domain.trigger import TriggerRevision

# --- definitions ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectCreateParams:
    project_id: str
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPublishParams:
    project_id: str
    task_id: str
    name: str
    spec: CommandSpec
    enabled: bool = True
    repin_triggers: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPublishResult:
    revision: TaskRevision
    created: bool
    repinned_triggers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerPublishParams:
    project_id: str
    trigger_id: str
    task_id: str | None = None  # None: keep the current task (only for an existing trigger)
    expression: str | None = None  # None: keep the current value (each of these three)
    timezone: str | None = None
    misfire_policy: str | None = None
    enabled: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerPublishResult:
    revision: TriggerRevision
    created: bool


class DefinitionStore(Protocol):
    def project_create(self, params: ProjectCreateParams) -> Project: ...
    def project_archive(self, project_id: str) -> Project: ...
    def project_get(self, project_id: str) -> Project: ...
    def project_list(self) -> list[Project]: ...
    def task_publish(self, params: TaskPublishParams) -> TaskPublishResult: ...
    def task_list(self, project_id: str) -> list[TaskRevision]: ...
    def trigger_publish(self, params: TriggerPublishParams) -> TriggerPublishResult: ...
    def trigger_list(self, project_id: str, trigger_id: str | None = None) -> list[TriggerView]: ...


# --- runs ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunListParams:
    project_id: str | None = None
    trigger_id: str | None = None
    status: str | None = None
    limit: int = 50
    oldest_first: bool = False


class RunReadStore(Protocol):
    def run_list(self, params: RunListParams) -> list[Run]: ...
    def run_get(self, run_id: str) -> RunDetail: ...


# --- scheduling ----------------------------------------------------------------------


class CommitOutcome(StrEnum):
    ADMITTED = "admitted"
    ADVANCED = "advanced"
    RACED = "raced"


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitResult:
    outcome: CommitOutcome
    disposition: Disposition
    run_id: str | None = None
    attempt_id: str | None = None
    reason: str | None = None  # why a commit raced, low-cardinality
    in_doubt: bool = False  # COMMIT's reply was lost; durable facts showed it committed
    durable: bool = True  # False: committed locally, replication not confirmed (WARNING 01000)


@dataclass(frozen=True, slots=True, kw_only=True)
class CorruptScheduleRow:
    """A due row whose stored facts failed verification; it is reported, never decided."""

    project_id: str
    trigger_id: str
    problem: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleListDueParams:
    now_ms: int
    limit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleCommitParams:
    candidate: ScheduleCandidate
    decision: Decision
    ids: AdmissionIds | None
    committed_at_ms: int


class LocalScheduleStore(Protocol):
    """Single-writer scheduling on SQLite: due rows, then a CAS commit per decision."""

    def schedule_list_due(
        self, params: ScheduleListDueParams
    ) -> list[ScheduleCandidate | CorruptScheduleRow]: ...
    def schedule_commit(self, params: ScheduleCommitParams) -> CommitResult: ...
    def schedule_next_due_at(self, after_ms: int) -> int | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleClaimParams:
    owner: str
    lease_ms: int
    limit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimCommitParams:
    claim: ScheduleClaim
    decision: Decision
    ids: AdmissionIds | None


class ClusterScheduleStore(Protocol):
    """Row-lease scheduling on PostgreSQL: fenced claims, then a SERIALIZABLE commit."""

    def schedule_claim(
        self, params: ScheduleClaimParams
    ) -> list[ScheduleClaim | CorruptScheduleRow]: ...
    def schedule_commit(self, params: ClaimCommitParams) -> CommitResult: ...
    def schedule_next_due_in_ms(self) -> int | None: ...


# --- local execution -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedRun:
    run_id: str
    attempt_id: str
    project_id: str
    task_id: str
    trigger_id: str | None
    scheduled_for_ms: int | None
    execution: ExecutionRevision | None  # None when the pinned revision failed verification
    problem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptStartedParams:
    run_id: str
    attempt_id: str
    pid: int
    executor_handle: str
    log_path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFinishParams:
    run_id: str
    attempt_id: str
    status: str  # succeeded | failed | timed_out | cancelled
    exit_code: int | None
    error_code: str | None = None
    error_summary: str | None = None
    cancel_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptedAttempt:
    run_id: str
    attempt_id: str
    status: str
    pid: int | None
    executor_handle: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconciledAttempt:
    run_id: str
    attempt_id: str
    previous_status: str
    process: str  # what happened to its process: "gone", "killed", "unknown"


class LocalExecutionStore(Protocol):
    def run_list_queued(self, limit: int) -> list[QueuedRun]: ...
    def attempt_begin(self, run_id: str, attempt_id: str) -> bool: ...
    def attempt_started(self, params: AttemptStartedParams) -> None: ...
    def attempt_finish(self, params: AttemptFinishParams) -> None: ...
    def attempt_reconcile_interrupted(
        self, settle: Callable[[InterruptedAttempt], str]
    ) -> list[ReconciledAttempt]: ...
