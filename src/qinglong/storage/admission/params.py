"""The verbs' parameters and results of the schedule store (storage/schedules)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import BackfillRequest
from qinglong.domain.decision import Decision, Disposition
from qinglong.domain.manual import ManualRequest
from qinglong.domain.schedule import ScheduleClaim


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
    flow_run_id: str | None = None  # an occurrence of a flow trigger: the flow run it started
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
class ScheduleClaimParams:
    owner: str
    lease_ms: int
    limit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimCommitParams:
    claim: ScheduleClaim
    decision: Decision
    ids: AdmissionIds | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ManualRunParams:
    request: ManualRequest
    ids: AdmissionIds | None = None  # None: fresh UUIDs


@dataclass(frozen=True, slots=True, kw_only=True)
class ManualRunResult:
    run_id: str
    admitted: bool  # False: the request id had admitted this Run before; nothing was written
    in_doubt: bool = False  # COMMIT's reply was lost; the Run was found by its key afterwards


@dataclass(frozen=True, slots=True, kw_only=True)
class BackfillAdmitParams:
    request: BackfillRequest
    trigger_revision: int  # the revision the window was judged against: refuse if it moved on
    occurrence_ms: int
    ids: AdmissionIds | None = None  # None: fresh UUIDs


@dataclass(frozen=True, slots=True, kw_only=True)
class BackfillAdmitResult:
    run_id: str  # the Run admitted now, or the one that already stood for the occurrence
    admitted: bool  # False: a Run already stood for the occurrence; nothing was written
    in_doubt: bool = False  # COMMIT's reply was lost; the Run was found by its key afterwards
