"""What the Run lifecycle steps (``domain/lifecycle.py``) read and write: the lease fence a
writer presents, the current Run and Attempt, how an Attempt ended (`Outcome`), the `Change`
a step plans, and the tests that tell a step already applied (its reply was lost and it is
sent again) from one that is refused."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import cast

from qinglong.domain.runs import (
    ACTIVE_ATTEMPT,
    FINISH_STATUSES,
    AttemptStatus,
    RunStatus,
)
from qinglong.errors import InvalidInput

MIN_LEASE_MS = 1_000
MAX_LEASE_MS = 600_000


def check_attempt_lease(lease_ms: int) -> int:
    if (not isinstance(lease_ms, int) or isinstance(lease_ms, bool)
            or not MIN_LEASE_MS <= lease_ms <= MAX_LEASE_MS):
        raise InvalidInput("lease", f"must be between {MIN_LEASE_MS} and {MAX_LEASE_MS} ms")
    return lease_ms


def token_digest(token: str) -> str:
    """What the database keeps of a lease token: its SHA-256 (readers never see the token)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseFence:
    """What every write on a leased Attempt must present: attempt, generation and token."""

    run_id: str
    attempt_id: str
    generation: int
    token: str

    @property
    def digest(self) -> str:
        return token_digest(self.token)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunState:
    id: str
    status: RunStatus
    version: int
    event_sequence: int
    attempts_spent: int = 0  # attempts that counted against the retry policy
    cancel_requested: bool = False
    cancel_reason: str | None = None  # why it was asked to stop (user, policy, ...)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptState:
    id: str
    run_id: str
    attempt: int
    status: AttemptStatus
    executor_type: str
    lease_owner: str | None = None
    lease_generation: int = 0
    lease_token_digest: str | None = None
    lease_expires_at_ms: int | None = None
    pid: int | None = None
    executor_handle: str | None = None

    @property
    def leased(self) -> bool:
        return self.lease_token_digest is not None

    def holds(self, fence: LeaseFence) -> bool:
        return (fence.attempt_id == self.id and fence.run_id == self.run_id
                and fence.generation == self.lease_generation
                and self.lease_token_digest is not None and fence.digest == self.lease_token_digest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One step, ready to apply: compare-and-set updates of a Run and an Attempt, and events."""

    run_id: str
    expected_run_version: int
    run_status: RunStatus
    run_fields: Mapping[str, object]
    attempt_id: str
    expected_attempt_status: AttemptStatus
    expected_generation: int
    attempt_status: AttemptStatus
    attempt_fields: Mapping[str, object]
    events: tuple[dict[str, object], ...]
    event_sequence_base: int  # the Run's event_sequence before this change
    new_generation: int = field(default=-1)
    new_attempt: Mapping[str, object] | None = None  # a further Attempt to insert (retries)

    @property
    def generation(self) -> int:
        return self.expected_generation if self.new_generation < 0 else self.new_generation

    def applied_to(self, run: RunState, attempt: AttemptState) -> tuple[RunState, AttemptState]:
        """The Run and Attempt as they read once this change is written (what a later step
        in the same write plans against)."""
        fields = self.attempt_fields
        return (
            replace(run, status=self.run_status, version=run.version + 1,
                    event_sequence=run.event_sequence + len(self.events),
                    attempts_spent=cast(int, self.run_fields.get("attempts_spent",
                                                                 run.attempts_spent))),
            replace(attempt, status=self.attempt_status, lease_generation=self.generation,
                    pid=cast("int | None", fields.get("pid", attempt.pid)),
                    executor_handle=cast("str | None", fields.get("executor_handle",
                                                                  attempt.executor_handle))),
        )


# Columns a step may set (anything a step does not name is kept as it is).
@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How an Attempt ended, as the executor saw it."""

    status: AttemptStatus  # succeeded | failed | timed_out | cancelled
    exit_code: int | None = None
    error_code: str | None = None
    error_summary: str | None = None
    cancel_reason: str | None = None
    log_path: str | None = None  # where its output went, when no running step recorded it
    # output the executor could not store (a worker's log store refused it): how many bytes,
    # and why; recorded on the Attempt's ending event, so a reader can tell "no output" from
    # "output lost"
    output_lost_bytes: int = 0
    output_lost: str | None = None

    def __post_init__(self) -> None:
        if self.status not in FINISH_STATUSES:
            raise InvalidInput("status", "must be one of " + ", ".join(sorted(FINISH_STATUSES)))
        if (self.cancel_reason is not None) != (self.status is AttemptStatus.CANCELLED):
            raise InvalidInput("cancel_reason", "is given exactly when the status is cancelled")
        if self.error_summary is not None and len(self.error_summary) > 1024:
            object.__setattr__(self, "error_summary", self.error_summary[:1021] + "...")



def already_started(attempt: AttemptState, fence: LeaseFence) -> bool:
    """A start that already landed (its reply was lost and it is sent again)."""
    return (attempt.status in (AttemptStatus.STARTING, AttemptStatus.RUNNING)
            and attempt.holds(fence))


def already_running(attempt: AttemptState, fence: LeaseFence) -> bool:
    return attempt.status is AttemptStatus.RUNNING and attempt.holds(fence)


def already_interrupted(attempt: AttemptState, fence: LeaseFence) -> bool:
    """An interrupt that already landed (resent after a lost reply): the Attempt ended
    cancelled under this very lease."""
    return (attempt.id == fence.attempt_id and attempt.status is AttemptStatus.CANCELLED
            and attempt.lease_generation == fence.generation)


def already_released(attempt: AttemptState, fence: LeaseFence) -> bool:
    """A release that already landed (resent after a lost reply): the Attempt is offered
    again, one generation on, and nobody has leased it since."""
    return (attempt.id == fence.attempt_id and attempt.status is AttemptStatus.CLAIMED
            and attempt.lease_generation == fence.generation + 1 and not attempt.leased)


def already_finished(attempt: AttemptState, fence: LeaseFence, outcome: Outcome) -> bool:
    """A finish that already landed (e.g. its COMMIT reply was lost and it is sent again)."""
    return (attempt.status is outcome.status and fence.attempt_id == attempt.id
            and fence.generation == attempt.lease_generation)



def is_active(attempt: AttemptState) -> bool:
    return attempt.status in ACTIVE_ATTEMPT and (attempt.status is not AttemptStatus.CLAIMED
                                                 or attempt.leased)
