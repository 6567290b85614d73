"""Runs, attempts and events: statuses, allowed transitions and event names."""

from __future__ import annotations

from enum import StrEnum


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
TERMINAL_ATTEMPT = frozenset(
    {
        AttemptStatus.SUCCEEDED,
        AttemptStatus.FAILED,
        AttemptStatus.CANCELLED,
        AttemptStatus.TIMED_OUT,
        AttemptStatus.LOST,
    }
)

RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.CREATED: frozenset({RunStatus.QUEUED, RunStatus.CANCELLED}),
    RunStatus.QUEUED: frozenset({RunStatus.DISPATCHING, RunStatus.CANCELLED, RunStatus.TIMED_OUT}),
    RunStatus.DISPATCHING: frozenset(
        {RunStatus.RUNNING, RunStatus.RETRY_WAIT, RunStatus.FAILED, RunStatus.CANCELLED,
         RunStatus.LOST}
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


def cron_idempotency_key(trigger_id: str, trigger_revision: int, scheduled_for_ms: int) -> str:
    """The unique key of one cron occurrence of one trigger revision."""
    return f"ql3:cron:v1:{trigger_id}:{trigger_revision}:{scheduled_for_ms}"


TRIGGER_TYPE_CRON = "cron"
EXECUTION_ORIGIN_SCHEDULED = "scheduled_system"
EXECUTION_OWNER_RUNTIME = "runtime"
ACTOR_SCHEDULER = "scheduler"
ACTOR_EXECUTOR = "executor"
ACTOR_RECONCILER = "reconciler"
