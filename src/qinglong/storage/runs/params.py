"""The verbs' parameters and results of the run store (storage/runs)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from qinglong.domain.lifecycle import LeaseFence, Outcome
from qinglong.domain.project_env import LeasedEnvironment
from qinglong.domain.task import ExecutionRevision


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
    projects: tuple[str, ...] | None = None  # only these projects (the caller may read)


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
    parameters: Mapping[str, str | int | bool] = field(default_factory=dict)  # the Run's values
    # the project's environment at its latest revision, read with the lease (its secrets
    # still sealed: the executor opens them with its own key, execution/project_env.py)
    environment: LeasedEnvironment | None = None
    started: bool = False  # granted ``starting`` (LeaseAcquireParams.start): no start step


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuePlacement:
    """The queued Runs that require worker labels, by requirement set, and what the live
    executors offer, read together at ``now_ms`` (the store's clock)."""

    groups: tuple[tuple[tuple[str, ...], int, int], ...]  # (requires, Runs, oldest queued at)
    offers: tuple[Mapping[str, str | None], ...]  # each live executor's labels
    now_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseAcquireParams:
    owner: str  # the executor or worker that will hold the leases
    lease_ms: int
    limit: int
    # every requirement token the executor's labels meet (domain/placement.label_tokens):
    # only Runs whose requirements are among them are leased
    label_tokens: tuple[str, ...] = ()
    # record the start step with the lease (the holder spawns each command at once): one
    # write a Run fewer, but a lease lost before its spawn is settled ``lost``, not offered
    # again (domain/lifecycle.acquire)
    start: bool = False


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
class ReconcilePending:
    """What a reconciler cycle could do now (``RunStore.reconcile_pending``)."""

    settle: bool  # lease_rescue or retry_promote could find something
    flows_overdue: bool  # a running flow run is past its timeout (flows_expire)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPageParams:
    """One page of Runs in the order of ``RunStore.run_list`` (by occurrence, or creation
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


@dataclass(frozen=True, slots=True, kw_only=True)
class LogChunk:
    seq: int
    part: str  # "head": kept whole; "tail": the latest output, trimmed to a budget
    byte_offset: int  # where the chunk starts in the command's whole output
    data: bytes
