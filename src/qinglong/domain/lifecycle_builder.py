"""How a lifecycle step is planned: who takes it (`StepContext`), where it may be taken
(`PRECONDITIONS`), the fence it must hold, and the `StepBuilder` that numbers its events and
checks every status change against the transition tables of ``domain/runs.py``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NoReturn

from qinglong.domain.lifecycle_state import AttemptState, Change, LeaseFence, RunState
from qinglong.domain.runs import (
    TERMINAL_ATTEMPT,
    Actor,
    AttemptStatus,
    EventType,
    RunStatus,
    require_attempt_transition,
    require_run_transition,
)
from qinglong.errors import IllegalTransition, InvalidInput, LeaseLost

# Columns a step may set (anything a step does not name is kept as it is).
RUN_FIELDS = ("started_at_ms", "finished_at_ms", "cancel_requested_at_ms", "cancel_reason",
              "error_code", "error_summary", "retry_at_ms", "attempts_spent", "queued_at_ms")
ATTEMPT_FIELDS = ("worker_id", "lease_token_digest", "lease_expires_at_ms", "pid",
                  "executor_handle", "log_path", "started_at_ms", "finished_at_ms", "exit_code",
                  "error_code", "error_summary")
CLEAR_LEASE: dict[str, object] = {"lease_token_digest": None, "lease_expires_at_ms": None}


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """Who takes a step, when, and where new event ids come from."""

    now_ms: int
    actor: Actor
    actor_id: str
    new_id: Callable[[], str]


class StepBuilder:
    def __init__(self, run: RunState, attempt: AttemptState, ctx: StepContext) -> None:
        if attempt.run_id != run.id:
            raise InvalidInput("attempt", f"attempt {attempt.id} does not belong to run {run.id}")
        self.run = run
        self.attempt = attempt
        self.ctx = ctx
        self.events: list[dict[str, object]] = []

    def event(self, kind: EventType, payload: Mapping[str, object], *,
              with_attempt: bool = True) -> None:
        self.events.append({
            "id": self.ctx.new_id(),
            "run_id": self.run.id,
            "sequence": self.run.event_sequence + len(self.events) + 1,
            "type": kind.value,
            "dedupe_key": None,
            "actor_type": self.ctx.actor.value,
            "actor_id": self.ctx.actor_id,
            "attempt_id": self.attempt.id if with_attempt else None,
            "payload": dict(payload),
            "created_at_ms": self.ctx.now_ms,
        })

    def change(self, *, run_to: RunStatus | None = None, attempt_to: AttemptStatus | None = None,
               run_fields: Mapping[str, object] | None = None,
               attempt_fields: Mapping[str, object] | None = None,
               new_generation: int = -1,
               new_attempt: Mapping[str, object] | None = None) -> Change:
        run_status = self.run.status if run_to is None else run_to
        attempt_status = self.attempt.status if attempt_to is None else attempt_to
        if run_to is not None:
            require_run_transition(self.run.status, run_to)
        if attempt_to is not None:
            require_attempt_transition(self.attempt.status, attempt_to)
        unknown = set(run_fields or ()) - set(RUN_FIELDS) | set(attempt_fields or ()) - set(
            ATTEMPT_FIELDS)
        assert not unknown, f"unknown columns {unknown}"
        return Change(
            run_id=self.run.id,
            expected_run_version=self.run.version,
            run_status=run_status,
            run_fields=dict(run_fields or {}),
            attempt_id=self.attempt.id,
            expected_attempt_status=self.attempt.status,
            expected_generation=self.attempt.lease_generation,
            attempt_status=attempt_status,
            attempt_fields=dict(attempt_fields or {}),
            events=tuple(self.events),
            event_sequence_base=self.run.event_sequence,
            new_generation=new_generation,
            new_attempt=new_attempt,
        )


_R, _A = RunStatus, AttemptStatus
# Where each step may be taken: the (Run, Attempt) statuses, and whether the Attempt must be
# leased (True), unleased (False) or either (None).
PRECONDITIONS: dict[str, tuple[frozenset[tuple[RunStatus, AttemptStatus]], bool | None]] = {
    "acquire": (frozenset({(_R.QUEUED, _A.CLAIMED)}), False),
    "start": (frozenset({(_R.DISPATCHING, _A.CLAIMED)}), True),
    "running": (frozenset({(_R.DISPATCHING, _A.STARTING)}), True),
    "finish": (frozenset({(_R.DISPATCHING, _A.STARTING), (_R.RUNNING, _A.RUNNING)}), True),
    "release": (frozenset({(_R.DISPATCHING, _A.CLAIMED)}), True),
    "lose": (frozenset({(_R.DISPATCHING, _A.STARTING), (_R.RUNNING, _A.RUNNING)}), None),
    "cancel_queued": (frozenset({(_R.QUEUED, _A.CLAIMED)}), False),
    "interrupt": (frozenset({(_R.DISPATCHING, _A.STARTING), (_R.RUNNING, _A.RUNNING)}), True),
    "request_cancel": (frozenset({(_R.DISPATCHING, _A.CLAIMED), (_R.DISPATCHING, _A.STARTING),
                                  (_R.RUNNING, _A.RUNNING)}), True),
    "cancel_waiting": (frozenset((_R.RETRY_WAIT, a) for a in TERMINAL_ATTEMPT), None),
    "promote": (frozenset((_R.RETRY_WAIT, a) for a in TERMINAL_ATTEMPT), False),
}


def check_precondition(step: str, run: RunState, attempt: AttemptState) -> None:
    pairs, leased = PRECONDITIONS[step]
    if (run.status, attempt.status) not in pairs or (leased is not None
                                                    and attempt.leased is not leased):
        raise_illegal(run, attempt, step)


def require_fence(attempt: AttemptState, fence: LeaseFence) -> None:
    if not attempt.holds(fence):
        raise LeaseLost(f"attempt {fence.attempt_id} generation {fence.generation} no longer "
                        "holds its lease")


def transition_payload(source: RunStatus, target: RunStatus, **extra: object) -> dict[str, object]:
    return {"from_status": source.value, "to_status": target.value, **extra}



def error_fields(error_code: str | None, error_summary: str | None) -> dict[str, object]:
    """The Run's error columns when a cancelling step says why (else left as they are)."""
    return {} if error_code is None else {"error_code": error_code,
                                          "error_summary": error_summary}


def raise_illegal(run: RunState, attempt: AttemptState, step: str) -> NoReturn:
    raise IllegalTransition(
        f"{step} is not allowed for run {run.id} ({run.status.value}) with attempt "
        f"{attempt.attempt} ({attempt.status.value}{', leased' if attempt.leased else ''})")

