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


# --- runs ----------------------------------------------------------------------------


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


class InstanceStore(Protocol):
    """Heartbeats, in the store's clock: ``instance_start`` (re)registers a process,
    ``instance_beat`` says it is alive, ``instance_stop`` that it stopped cleanly."""

    def instance_start(self, instance_id: str, role: str, host: str, pid: int) -> None: ...
    def instance_beat(self, instance_id: str) -> None: ...
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
