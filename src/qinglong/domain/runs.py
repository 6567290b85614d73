"""Runs, attempts and events: statuses, the allowed transitions, and the event vocabulary.

The transition tables are enforced: `require_run_transition` and
`require_attempt_transition` raise `IllegalTransition` for anything not listed. The steps
that use them are in ``domain/lifecycle.py``.
"""

from __future__ import annotations

from enum import StrEnum

from qinglong.errors import IllegalTransition


class RunStatus(StrEnum):
    CREATED = "created"
    QUEUED = "queued"
    DISPATCHING = "dispatching"
    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    RETRY_WAIT = "retry_wait"
    LOST = "lost"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


class AttemptStatus(StrEnum):
    CLAIMED = "claimed"
    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    LOST = "lost"


TERMINAL_RUN = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT}
)
# Statuses a Run ends in as far as its executor is concerned (lost waits for a decision).
ENDED_RUN = TERMINAL_RUN | {RunStatus.LOST}
TERMINAL_ATTEMPT = frozenset(
    {
        AttemptStatus.SUCCEEDED,
        AttemptStatus.FAILED,
        AttemptStatus.CANCELLED,
        AttemptStatus.TIMED_OUT,
        AttemptStatus.LOST,
    }
)
ACTIVE_ATTEMPT = frozenset({AttemptStatus.CLAIMED, AttemptStatus.STARTING, AttemptStatus.RUNNING})
# What an executor may report when a started Attempt ends.
FINISH_STATUSES = frozenset(
    {AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.TIMED_OUT,
     AttemptStatus.CANCELLED}
)

RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.CREATED: frozenset({RunStatus.QUEUED, RunStatus.CANCELLED}),
    RunStatus.QUEUED: frozenset({RunStatus.DISPATCHING, RunStatus.CANCELLED, RunStatus.TIMED_OUT}),
    # dispatching -> queued: a lease withdrawn before its command started (nothing ran)
    RunStatus.DISPATCHING: frozenset(
        {RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRY_WAIT, RunStatus.FAILED,
         RunStatus.CANCELLED, RunStatus.LOST}
    ),
    RunStatus.RUNNING: frozenset(
        {RunStatus.WAITING_APPROVAL, RunStatus.RETRY_WAIT, RunStatus.SUCCEEDED, RunStatus.FAILED,
         RunStatus.CANCELLED, RunStatus.TIMED_OUT, RunStatus.LOST}
    ),
    RunStatus.WAITING_APPROVAL: frozenset(
        {RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.TIMED_OUT}
    ),
    RunStatus.RETRY_WAIT: frozenset({RunStatus.QUEUED, RunStatus.CANCELLED, RunStatus.TIMED_OUT}),
    RunStatus.LOST: frozenset({RunStatus.QUEUED, RunStatus.FAILED, RunStatus.CANCELLED}),
}

ATTEMPT_TRANSITIONS: dict[AttemptStatus, frozenset[AttemptStatus]] = {
    AttemptStatus.CLAIMED: frozenset(
        {AttemptStatus.STARTING, AttemptStatus.CANCELLED, AttemptStatus.LOST}
    ),
    AttemptStatus.STARTING: frozenset(
        {AttemptStatus.RUNNING, AttemptStatus.FAILED, AttemptStatus.CANCELLED,
         AttemptStatus.TIMED_OUT, AttemptStatus.LOST}
    ),
    AttemptStatus.RUNNING: frozenset(
        {AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.CANCELLED,
         AttemptStatus.TIMED_OUT, AttemptStatus.LOST}
    ),
}


def run_transition_allowed(source: RunStatus, target: RunStatus) -> bool:
    return target in RUN_TRANSITIONS.get(source, frozenset())


def attempt_transition_allowed(source: AttemptStatus, target: AttemptStatus) -> bool:
    return target in ATTEMPT_TRANSITIONS.get(source, frozenset())


def require_run_transition(source: RunStatus, target: RunStatus) -> None:
    if not run_transition_allowed(source, target):
        raise IllegalTransition(f"a run may not go from {source.value} to {target.value}")


def require_attempt_transition(source: AttemptStatus, target: AttemptStatus) -> None:
    if not attempt_transition_allowed(source, target):
        raise IllegalTransition(f"an attempt may not go from {source.value} to {target.value}")


def cron_idempotency_key(trigger_id: str, trigger_revision: int, scheduled_for_ms: int) -> str:
    """The unique key of one cron occurrence of one trigger revision."""
    return f"ql3:cron:v1:{trigger_id}:{trigger_revision}:{scheduled_for_ms}"


MANUAL_KEY_PREFIX = "ql3:manual:v1:"


def manual_idempotency_key(request_id: str) -> str:
    """The unique key (within a project) of the manual Run one client request admits."""
    return MANUAL_KEY_PREFIX + request_id


BACKFILL_KEY_PREFIX = "ql3:backfill:v1:"


def backfill_idempotency_key(trigger_id: str, scheduled_for_ms: int) -> str:
    """The unique key (within a project) of the Run a backfill admits for one occurrence of a
    trigger, whatever its revision: a repeated or concurrent backfill finds it taken."""
    return f"{BACKFILL_KEY_PREFIX}{trigger_id}:{scheduled_for_ms}"


def manual_request_id(idempotency_key: str | None) -> str | None:
    """The client request id a manual Run was admitted for (None for any other Run)."""
    if idempotency_key is None or not idempotency_key.startswith(MANUAL_KEY_PREFIX):
        return None
    return idempotency_key[len(MANUAL_KEY_PREFIX):]


class Actor(StrEnum):
    """Who appended an event."""

    USER = "user"
    SCHEDULER = "scheduler"
    EXECUTOR = "executor"
    WORKER = "worker"
    RECONCILER = "reconciler"
    SYSTEM = "system"


class EventType(StrEnum):
    """Every event a Run can carry, ``aggregate.past_tense``."""

    RUN_CREATED = "run.created"
    RUN_QUEUED = "run.queued"
    RUN_DISPATCHING = "run.dispatching"
    RUN_DISPATCH_RELEASED = "run.dispatch_released"
    RUN_CANCEL_REQUESTED = "run.cancel_requested"
    RUN_RETRY_WAIT = "run.retry_wait"
    RUN_RUNNING = "run.running"
    RUN_SUCCEEDED = "run.succeeded"
    RUN_FAILED = "run.failed"
    RUN_CANCELLED = "run.cancelled"
    RUN_TIMED_OUT = "run.timed_out"
    RUN_LOST = "run.lost"
    ATTEMPT_STARTING = "attempt.starting"
    ATTEMPT_RUNNING = "attempt.running"
    ATTEMPT_SUCCEEDED = "attempt.succeeded"
    ATTEMPT_FAILED = "attempt.failed"
    ATTEMPT_CANCELLED = "attempt.cancelled"
    ATTEMPT_TIMED_OUT = "attempt.timed_out"
    ATTEMPT_LOST = "attempt.lost"
    ATTEMPT_LATE_CALLBACK_IGNORED = "attempt.late_callback_ignored"

    @classmethod
    def for_run(cls, status: RunStatus) -> EventType:
        return cls("run." + status.value)

    @classmethod
    def for_attempt(cls, status: AttemptStatus) -> EventType:
        return cls("attempt." + status.value)

    @property
    def summary(self) -> str:
        """A few words for people reading a Run's timeline."""
        return EVENT_SUMMARIES[self]


EVENT_SUMMARIES: dict[EventType, str] = {
    EventType.RUN_CREATED: "admitted for its occurrence",
    EventType.RUN_QUEUED: "queued for an executor",
    EventType.RUN_DISPATCHING: "leased to an executor",
    EventType.RUN_DISPATCH_RELEASED: "lease withdrawn before the command started; queued again",
    EventType.RUN_CANCEL_REQUESTED: "asked to cancel; its executor will stop it",
    EventType.RUN_RETRY_WAIT: "waiting to be retried",
    EventType.RUN_RUNNING: "command running",
    EventType.RUN_SUCCEEDED: "succeeded",
    EventType.RUN_FAILED: "failed",
    EventType.RUN_CANCELLED: "cancelled",
    EventType.RUN_TIMED_OUT: "timed out",
    EventType.RUN_LOST: "lost: its executor went away while it ran",
    EventType.ATTEMPT_STARTING: "about to start the command",
    EventType.ATTEMPT_RUNNING: "command started",
    EventType.ATTEMPT_SUCCEEDED: "command exited 0",
    EventType.ATTEMPT_FAILED: "command failed",
    EventType.ATTEMPT_CANCELLED: "attempt cancelled",
    EventType.ATTEMPT_TIMED_OUT: "command killed at its timeout",
    EventType.ATTEMPT_LOST: "attempt lost",
    EventType.ATTEMPT_LATE_CALLBACK_IGNORED: "a stale lease holder's write was refused",
}


TRIGGER_TYPE_CRON = "cron"
TRIGGER_TYPE_MANUAL = "manual"  # run now: `ql task run`, `ql trigger fire`
EXECUTION_ORIGIN_SCHEDULED = "scheduled_system"
EXECUTION_ORIGIN_MANUAL = "manual_user"  # a person (or a script acting for one) asked
TRIGGER_TYPE_BACKFILL = "backfill"  # `ql trigger backfill`: a past occurrence admitted late
# what the audit calls a flow run an occurrence of a flow trigger started (no Run has it)
TRIGGER_TYPE_FLOW_START = "flow_start"
EXECUTION_ORIGIN_BACKFILL = "backfill_user"
# The Runs that stand for an occurrence of their trigger (a manual Run does not): at most one
# of them may exist per (project, trigger, scheduled_for_ms).
OCCURRENCE_TRIGGER_TYPES = (TRIGGER_TYPE_CRON, TRIGGER_TYPE_BACKFILL)
EXECUTION_OWNER_RUNTIME = "runtime"
