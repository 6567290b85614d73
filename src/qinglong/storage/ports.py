"""The storage ports: Protocols the scheduler, executor and CLI need, with their params.

Each operation takes one params dataclass named after it. The contract tests run
the same cases against every adapter that implements a port.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import BackfillRequest, BackfillTarget
from qinglong.domain.decision import Decision, Disposition
from qinglong.domain.lifecycle import LeaseFence, Outcome
from qinglong.domain.manual import ManualRequest
from qinglong.domain.model import LedgerFacts, Project, Run, RunDetail, TaskView, TriggerView
from qinglong.domain.runs import RunStatus
from qinglong.domain.schedule import ScheduleCandidate, ScheduleClaim
from qinglong.domain.task import CommandSpec, ExecutionRevision, TaskRevision
from qinglong.domain.trigger import Overlap, TriggerRevision
from qinglong.errors import QinglongError

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
    expected_revision: int | None = None  # compare-and-set: refuse if the task moved on


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPublishResult:
    revision: TaskRevision
    created: bool
    repinned_triggers: tuple[str, ...] = ()
    restored: bool = False  # the task had been deleted


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerPublishParams:
    project_id: str
    trigger_id: str
    task_id: str | None = None  # None: keep the current task (only for an existing trigger)
    expression: str | None = None  # None: keep the current value (each of these three)
    timezone: str | None = None
    misfire_policy: str | None = None
    overlap: Overlap | None = None
    enabled: bool | None = True  # None: keep (a new or deleted trigger is enabled)
    dst_gap: str | None = None  # shift | skip (a wall-clock cron trigger's DST policy)
    dst_overlap: str | None = None  # first | second | both
    jitter_s: int | None = None  # the jitter's bound; 0: no jitter
    jitter_random_s: int | None = None  # the part of it drawn per occurrence


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerPublishResult:
    revision: TriggerRevision
    created: bool
    restored: bool = False  # the trigger had been deleted


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerPauseParams:
    project_id: str
    trigger_id: str
    actor: str  # who asked (kept with the pause)
    until_ms: int | None = None  # None: until resumed; else an instant after now
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerResumeParams:
    project_id: str
    trigger_id: str
    actor: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectPauseParams:
    """Pause (or resume, ``until_ms`` and ``reason`` unused) every trigger of a project."""

    project_id: str
    actor: str
    until_ms: int | None = None
    reason: str | None = None


class DefinitionStore(Protocol):
    """Projects, tasks and triggers. Publishing appends an immutable revision (a no-op when
    nothing changed); deleting hides a task or trigger head and stops it, keeping its
    revisions for the Runs and the audit that refer to them (publishing again restores it)."""

    def project_create(self, params: ProjectCreateParams) -> Project: ...
    def project_archive(self, project_id: str) -> Project: ...
    def project_unarchive(self, project_id: str) -> Project: ...
    def project_get(self, project_id: str) -> Project: ...
    def project_list(self) -> list[Project]: ...
    def task_publish(self, params: TaskPublishParams) -> TaskPublishResult: ...
    def task_get(self, project_id: str, task_id: str) -> TaskView: ...
    def task_history(self, project_id: str, task_id: str) -> list[TaskRevision]: ...
    def task_list(self, project_id: str, include_deleted: bool = False) -> list[TaskView]: ...
    def task_delete(self, project_id: str, task_id: str) -> TaskView: ...
    def trigger_publish(self, params: TriggerPublishParams) -> TriggerPublishResult: ...
    def trigger_list(self, project_id: str | None, trigger_id: str | None = None,
                     include_deleted: bool = False) -> list[TriggerView]: ...
    def trigger_delete(self, project_id: str, trigger_id: str) -> TriggerView: ...
    def trigger_pause(self, params: TriggerPauseParams) -> TriggerView: ...
    def trigger_resume(self, params: TriggerResumeParams) -> TriggerView: ...
    def project_pause(self, params: ProjectPauseParams) -> list[TriggerView]: ...
    def project_resume(self, params: ProjectPauseParams) -> list[TriggerView]: ...
    def global_limit_get(self) -> int | None: ...
    def global_limit_set(self, max_running: int | None) -> None: ...


# --- runs ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunListParams:
    project_id: str | None = None
    task_id: str | None = None
    trigger_id: str | None = None
    status: str | None = None
    since_ms: int | None = None  # occurrence (or creation) at or after
    until_ms: int | None = None  # ... and before
    limit: int = 50
    oldest_first: bool = False


class RunReadStore(Protocol):
    """Run reads. ``trigger_ledger_facts`` reads, in one snapshot, what decides the fate of a
    trigger's occurrences in ``[from_ms, to_ms]`` (LedgerFacts; `ql trigger ledger`)."""

    def run_list(self, params: RunListParams) -> list[Run]: ...
    def run_get(self, run_id: str) -> RunDetail: ...
    def trigger_ledger_facts(self, project_id: str, trigger_id: str, from_ms: int,
                             to_ms: int) -> LedgerFacts: ...


# --- run now (manual Runs) -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ManualRunParams:
    request: ManualRequest
    ids: AdmissionIds | None = None  # None: fresh UUIDs


@dataclass(frozen=True, slots=True, kw_only=True)
class ManualRunResult:
    run_id: str
    admitted: bool  # False: the request id had admitted this Run before; nothing was written
    in_doubt: bool = False  # COMMIT's reply was lost; the Run was found by its key afterwards


class ManualRunStore(Protocol):
    """Run now: ``run_admit_manual`` admits one manual Run, in one transaction that re-reads
    the project (active), the task (current revision, enabled) and, for a trigger, its
    current revision (enabled, pinning the task's current revision), and writes the same rows
    as a scheduled admission. The request's idempotency key decides retries: a Run already
    admitted under it for the same target is returned (``admitted`` False), one admitted for
    another target raises RequestIdConflict. Refusals (NotFound, NotRunnable, InvalidInput)
    write nothing.
    """

    def run_admit_manual(self, params: ManualRunParams) -> ManualRunResult: ...


# --- backfill ------------------------------------------------------------------------


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


class BackfillStore(Protocol):
    """Backfill (`ql trigger backfill`): admit past occurrences of a trigger, one Run each.

    ``backfill_target`` reads what a window is judged against (the trigger's current
    revision, its first publish time and its schedule's cursor), refusing as an admission
    would (NotFound, NotRunnable) so a refused backfill writes nothing. ``backfill_runs``
    maps the occurrences in ``[from_ms, to_ms]`` that already have a Run standing for them
    (a scheduled or backfilled Run; manual Runs do not stand for an occurrence) to that Run.
    ``backfill_admit`` admits one occurrence in one transaction that re-reads every fact --
    project active; trigger not deleted, enabled and still at ``trigger_revision``; its task's
    current revision enabled and pinned; the occurrence before the schedule's cursor -- and
    looks for a Run standing for the occurrence first (returned with ``admitted`` False).
    """

    def backfill_target(self, project_id: str, trigger_id: str) -> BackfillTarget: ...
    def backfill_runs(self, project_id: str, trigger_id: str, from_ms: int,
                      to_ms: int) -> dict[int, str]: ...
    def backfill_admit(self, params: BackfillAdmitParams) -> BackfillAdmitResult: ...


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
    def schedule_commit_batch(
        self, params: Sequence[ClaimCommitParams]
    ) -> list[CommitResult | QinglongError]:
        """Many commits in one SERIALIZABLE transaction, each row verified and fenced on its
        own: one outcome per claim, in order -- its result (a row whose facts or fence
        fail is ``raced``, alone), or the error that kept it from committing."""
        ...
    def schedule_next_due_in_ms(self) -> int | None: ...


# --- the Run lifecycle: attempt leases ------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptLease:
    """A lease on one Attempt: the right to run it, proven by ``fence`` on every write."""

    fence: LeaseFence
    attempt: int
    project_id: str
    task_id: str
    trigger_id: str | None
    scheduled_for_ms: int | None
    expires_at_ms: int  # in the store's clock (the database's on PostgreSQL)
    execution: ExecutionRevision | None  # None when the pinned plan failed verification
    problem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseAcquireParams:
    owner: str  # the executor or worker that will hold the leases
    lease_ms: int
    limit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseRenewParams:
    owner: str
    lease_ms: int
    fences: tuple[LeaseFence, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseRenewal:
    renewed: tuple[LeaseFence, ...]
    lost: tuple[LeaseFence, ...]  # no longer held: stop what runs under them
    expires_at_ms: int | None  # the earliest new expiry, in the store's clock
    cancel_requested: tuple[LeaseFence, ...] = ()  # held, but their Run is to be cancelled


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRunningParams:
    fence: LeaseFence
    pid: int
    executor_handle: str
    log_path: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFinishParams:
    fence: LeaseFence
    outcome: Outcome


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseReleaseParams:
    fence: LeaseFence
    reason: str  # e.g. "drain": the command never started


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseRescueParams:
    limit: int = 64
    grace_ms: int = 5_000  # act this long after a lease expired
    ignore_expiry: bool = False  # every active lease: only when no holder can be alive
    notes: Mapping[str, Mapping[str, object]] = field(default_factory=dict)  # per attempt id


@dataclass(frozen=True, slots=True, kw_only=True)
class RescuedAttempt:
    run_id: str
    attempt_id: str
    previous_status: str
    outcome: str  # "requeued" (it never started) or "lost"
    worker: str | None
    pid: int | None
    executor_handle: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActiveAttempt:
    run_id: str
    attempt_id: str
    status: str
    worker: str | None
    pid: int | None
    executor_handle: str | None
    lease_expires_at_ms: int | None


class RunLifecycleStore(Protocol):
    """Leases on Attempts and the fenced steps of the Run lifecycle.

    - ``lease_acquire``: lease up to ``limit`` queued Runs (oldest first) to ``owner``: Run
      queued -> dispatching, Attempt claimed with a new lease generation; returns each lease
      with its verified execution plan. Runs another executor is taking are skipped.
    - ``lease_renew``: extend, in one statement, every lease of ``owner`` whose fence still
      holds; reports the ones that are lost and the Runs someone asked to cancel.
    - ``attempt_start`` / ``attempt_running`` / ``attempt_finish``: the fenced steps (claimed
      -> starting before the spawn, -> running with the process, -> the outcome). A fence that
      no longer holds raises LeaseLost after ``attempt.late_callback_ignored`` is recorded; a
      finish that already landed with the same outcome is accepted again (idempotent).
    - ``attempt_interrupt``: a draining executor stopped the command: the Run is queued again
      without spending an attempt.
    - ``lease_release``: give back a lease whose command never started (the Run is queued
      again and no attempt is spent).
    - ``lease_rescue``: the reconciler's verb: expired leases (by the store's clock, after
      ``grace_ms``) are withdrawn: unstarted Attempts are offered again, started ones are lost
      (their Run lost, retried if the task is idempotent, or cancelled if that was asked).
    - ``retry_promote``: Runs whose retry wait is over are queued with a new Attempt.
    - ``run_cancel``: a Run nobody runs is cancelled now (its new status is returned); one in
      progress is asked to stop (None), which its executor learns at its next renewal.
    - ``attempt_list_active``: what is leased or started now.
    """

    def lease_acquire(self, params: LeaseAcquireParams) -> list[AttemptLease]: ...
    def lease_renew(self, params: LeaseRenewParams) -> LeaseRenewal: ...
    def attempt_start(self, fence: LeaseFence) -> None: ...
    def attempt_running(self, params: AttemptRunningParams) -> None: ...
    def attempt_finish(self, params: AttemptFinishParams) -> None: ...
    def attempt_interrupt(self, fence: LeaseFence, reason: str) -> None: ...
    def lease_release(self, params: LeaseReleaseParams) -> None: ...
    def lease_rescue(self, params: LeaseRescueParams) -> list[RescuedAttempt]: ...
    def retry_promote(self, limit: int) -> list[str]: ...
    def reconcile_pending(self, grace_ms: int) -> bool: ...
    def run_cancel(self, run_id: str, reason: str = "user") -> RunStatus | None: ...
    def attempt_list_active(self) -> list[ActiveAttempt]: ...


# --- process heartbeats --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """A process that serves the database: a `ql serve`, a `ql control` replica, a worker."""

    instance_id: str
    role: str  # serve | control | worker | web
    host: str
    pid: int
    started_at_ms: int
    seen_at_ms: int
    stopped_at_ms: int | None


# A registration whose heartbeat is this old (in the store's clock) and that never stopped
# cleanly belongs to a process taken for dead (a crash): its id may be registered again.
INSTANCE_STALE_MS = 30_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Registration:
    """This process's hold on an instance id: what its heartbeats and its stop are fenced by."""

    instance_id: str
    host: str
    pid: int
    started_at_ms: int


class InstanceStore(Protocol):
    """Heartbeats, in the store's clock. An instance id is held by one live process at a time.

    ``instance_start`` registers this process under an id that is new, stopped cleanly, silent
    for INSTANCE_STALE_MS (its holder crashed), or this process's own earlier registration
    (``resume``, after losing the database); ``locked`` (the caller holds a lock proving no other
    process of its role runs, as `ql serve` does) also takes over a registration of the same
    role. Otherwise it raises InstanceHeld. ``instance_beat`` (False when this process no longer
    holds the id) and ``instance_stop`` touch only the registration this store made."""

    def instance_start(self, instance_id: str, role: str, host: str, pid: int, *,
                       resume: Registration | None = None,
                       locked: bool = False) -> Registration: ...
    def instance_beat(self, instance_id: str) -> bool: ...
    def instance_stop(self, instance_id: str) -> None: ...
    def instance_list(self) -> list[Instance]: ...


# --- logs kept in the database (cluster workers) -------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LogChunk:
    seq: int
    part: str  # "head": kept whole; "tail": the latest output, trimmed to a budget
    byte_offset: int  # where the chunk starts in the command's whole output
    data: bytes


class RunLogStore(Protocol):
    """Output streamed off the workers while commands run.

    - ``log_append``: store chunks under an Attempt's lease (fenced: nothing is stored once
      the lease is gone; idempotent: a chunk sent twice is stored once) and drop tail chunks
      that end before ``keep_tail_from`` (the head and the latest tail are kept).
    - ``log_read``: the chunks of an Attempt after ``after_seq``, in order.
    - ``log_prune``: delete the chunks of up to ``limit`` Attempts that ended longer ago than
      ``retention_ms`` (by the store's clock); the number of chunks deleted.
    """

    def log_append(self, fence: LeaseFence, chunks: tuple[LogChunk, ...],
                   keep_tail_from: int) -> bool: ...
    def log_read(self, attempt_id: str, after_seq: int = -1) -> list[LogChunk]: ...
    def log_prune(self, retention_ms: int, limit: int) -> int: ...


# --- pages of Runs and per-day counts (the HTTP API) -----------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPageParams:
    """One page of Runs in the order of ``RunReadStore.run_list`` (by occurrence, or creation
    for a Run of no occurrence, then id), starting after the Run at ``after`` (its time and
    id) when given: a cursor that stays exact while new Runs arrive."""

    filters: RunListParams
    after: tuple[int, str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunBucketParams:
    """Counts of the Runs of a project (one task, or all) whose time lies in
    ``[from_ms, to_ms)``, grouped by task and by ``bucket_ms`` slices of epoch time."""

    project_id: str
    task_id: str | None
    from_ms: int
    to_ms: int
    bucket_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunBucket:
    task_id: str
    bucket_start_ms: int
    runs: int
    succeeded: int
    failed: int  # failed, timed out or lost
    cancelled: int  # cancelled, except by an overlap policy (those are skipped)
    total_duration_ms: int  # of the Runs that started and finished
    max_duration_ms: int | None
    skipped: int = 0  # ended by an overlap policy: neither a success nor a failure


class RunPageStore(Protocol):
    """Reads the HTTP API adds to RunReadStore: ``run_page`` (cursor pagination; the same
    refusals as ``run_list``) and ``run_buckets`` (NotFound for an unknown project)."""

    def run_page(self, params: RunPageParams) -> list[Run]: ...
    def run_buckets(self, params: RunBucketParams) -> list[RunBucket]: ...


# --- accounts: users, sessions, API tokens, failed logins, the audit log ---------------


@dataclass(frozen=True, slots=True, kw_only=True)
class User:
    username: str
    role: str  # viewer | operator | admin
    password_hash: str  # argon2 (encoded, with its parameters and salt)
    created_at_ms: int
    updated_at_ms: int
    disabled_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class UserCreateParams:
    username: str
    role: str
    password_hash: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UserUpdateParams:
    """Change what is given (None keeps it). A new password hash or ``disabled`` True also
    ends the user's sessions, forgets the user's login devices and revokes the user's tokens
    (recorded as revoked by ``by``; None: by the user themselves)."""

    username: str
    role: str | None = None
    password_hash: str | None = None
    disabled: bool | None = None
    by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A browser session, found by the SHA-256 digest of its cookie's secret."""

    id_digest: str
    username: str
    role: str  # the user's role now
    created_at_ms: int
    expires_at_ms: int
    idle_expires_at_ms: int
    seen_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionCreateParams:
    id_digest: str
    username: str
    lifetime_ms: int  # absolute, from creation
    idle_ms: int  # ends this long after it was last seen
    client: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiToken:
    id: str  # the public part of the token
    username: str
    role: str  # its user's role now
    user_disabled: bool
    name: str
    scope: str  # read | operate | admin
    secret_digest: str
    created_at_ms: int
    expires_at_ms: int | None
    last_used_at_ms: int | None
    revoked_at_ms: int | None
    revoked_by: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenCreateParams:
    id: str
    username: str
    name: str
    scope: str
    secret_digest: str
    lifetime_ms: int | None  # None: until revoked


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginAttempt:
    """An attempt to log in, admitted or not. Admitted: one failure is already recorded per
    subject (``failure_ids``), to be taken back if the password proves right. Refused:
    ``retry_after_ms`` until the subject that refused it admits one again."""

    failure_ids: tuple[str, ...] = ()
    retry_after_ms: int | None = None

    @property
    def admitted(self) -> bool:
        return self.retry_after_ms is None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceCreateParams:
    id_digest: str  # SHA-256 of the device cookie's secret
    username: str
    lifetime_ms: int
    keep: int  # the user's newest devices kept; older ones are forgotten


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    id: int
    at_ms: int
    actor: str
    via: str  # session | token | cli
    token_id: str | None
    action: str  # e.g. task.publish, trigger.pause, run.cancel, run.now
    project_id: str | None
    target: str | None
    detail: Mapping[str, object]
    client: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditWriteParams:
    actor: str
    via: str
    action: str
    token_id: str | None = None
    project_id: str | None = None
    target: str | None = None
    detail: Mapping[str, object] = field(default_factory=dict)
    client: str | None = None


class AccountStore(Protocol):
    """Users, sessions, API tokens, failed logins and the audit log, on the store's clock
    (the database's on PostgreSQL).

    - ``session_get`` returns a session only while it holds (not ended, neither expiry
      passed, its user enabled), and moves its idle expiry to ``idle_ms`` from now when it was
      last seen ``touch_after_ms`` ago or more (a busy session does not write on every request).
    - ``token_get`` returns a token whatever its state (the caller judges it); ``token_used``
      records its use at most once per ``touch_after_ms``.
    - ``login_attempt`` admits a login attempt only while every subject has fewer failures in
      the last ``window_ms`` than its limit, and then records one failure per subject in the
      same step (no two attempts can both be admitted by the same count); it forgets failures
      older than ``window_ms``. ``login_attempt_settle`` takes back the failures an attempt
      recorded and, with ``clear``, every failure of that subject (a right password).
    - ``device_valid`` is true for an unexpired login device of that user; ``device_create``
      records one and keeps only the user's ``keep`` newest.
    - ``user_rehash`` replaces a password hash only while it is still ``old_hash``, and ends
      nothing (the password is the same).
    - ``audit_list`` pages newest first, before the entry ``before_id`` when given.
    """

    def now_ms(self) -> int: ...
    def user_create(self, params: UserCreateParams) -> User: ...
    def user_get(self, username: str) -> User | None: ...
    def user_list(self) -> list[User]: ...
    def user_update(self, params: UserUpdateParams) -> User: ...
    def session_create(self, params: SessionCreateParams) -> Session: ...
    def session_get(self, id_digest: str, touch_after_ms: int,
                    idle_ms: int) -> Session | None: ...
    def session_end(self, id_digest: str) -> None: ...
    def token_create(self, params: TokenCreateParams) -> ApiToken: ...
    def token_get(self, token_id: str) -> ApiToken | None: ...
    def token_used(self, token_id: str, touch_after_ms: int) -> None: ...
    def token_list(self, username: str | None) -> list[ApiToken]: ...
    def token_revoke(self, token_id: str, by: str) -> ApiToken: ...
    def user_rehash(self, username: str, old_hash: str, new_hash: str) -> None: ...
    def login_attempt(self, limits: tuple[tuple[str, int], ...],
                      window_ms: int) -> LoginAttempt: ...
    def login_attempt_settle(self, failure_ids: tuple[str, ...], clear: str | None) -> None: ...
    def device_valid(self, id_digest: str, username: str) -> bool: ...
    def device_create(self, params: DeviceCreateParams) -> None: ...
    def audit_write(self, params: AuditWriteParams) -> AuditEntry: ...
    def audit_list(self, before_id: int | None, limit: int) -> list[AuditEntry]: ...
