"""The lifecycle steps that cancel a Run (the table in ``domain/lifecycle.py``): ask the
executor of a Run in progress to stop it, or end a Run that waits for a retry, or one still
queued, ``cancelled`` at once."""

from __future__ import annotations

from collections.abc import Mapping

from qinglong.domain.lifecycle_builder import (
    StepBuilder,
    StepContext,
    check_precondition,
    error_fields,
    transition_payload,
)
from qinglong.domain.lifecycle_state import AttemptState, Change, RunState
from qinglong.domain.runs import AttemptStatus, EventType, RunStatus
from qinglong.errors import IllegalTransition


def request_cancel(run: RunState, attempt: AttemptState, ctx: StepContext, *,
                   reason: str, detail: Mapping[str, object] | None = None,
                   error_code: str | None = None, error_summary: str | None = None) -> Change:
    """Ask the executor of a Run in progress to stop it; it learns of it on its next renewal
    (or sooner, by a notification) and records the Run ``cancelled``. ``error_code`` and
    ``error_summary`` (an overlap policy's) say why, and stay when it ends cancelled."""
    check_precondition("request_cancel", run, attempt)
    if run.cancel_requested:
        raise IllegalTransition(f"run {run.id} is already being cancelled")
    b = StepBuilder(run, attempt, ctx)
    b.event(EventType.RUN_CANCEL_REQUESTED, {"cancel_reason": reason, "status": run.status.value,
                                             **(detail or {})})
    return b.change(run_fields={"cancel_requested_at_ms": ctx.now_ms, "cancel_reason": reason,
                                **error_fields(error_code, error_summary)})


def cancel_waiting(run: RunState, attempt: AttemptState, ctx: StepContext, *,
                   reason: str, detail: Mapping[str, object] | None = None,
                   error_code: str | None = None, error_summary: str | None = None) -> Change:
    """Cancel a Run that waits for a retry: it never runs again."""
    check_precondition("cancel_waiting", run, attempt)
    b = StepBuilder(run, attempt, ctx)
    b.event(EventType.RUN_CANCELLED, transition_payload(
        run.status, RunStatus.CANCELLED, cancel_reason=reason, **(detail or {})),
        with_attempt=False)
    return b.change(run_to=RunStatus.CANCELLED, run_fields={
        "finished_at_ms": ctx.now_ms, "cancel_requested_at_ms": ctx.now_ms,
        "cancel_reason": reason, "retry_at_ms": None,
        **error_fields(error_code, error_summary)})


def cancel_queued(run: RunState, attempt: AttemptState, ctx: StepContext, *, reason: str,
                  detail: Mapping[str, object] | None = None, error_code: str | None = None,
                  error_summary: str | None = None) -> Change:
    """Cancel a Run that no executor holds: it never runs (``detail`` says why, e.g. the
    overlap policy that skipped it, and ``error_code``/``error_summary`` tell people)."""
    check_precondition("cancel_queued", run, attempt)
    b = StepBuilder(run, attempt, ctx)
    b.event(EventType.ATTEMPT_CANCELLED, {"cancel_reason": reason, "attempt": attempt.attempt})
    b.event(EventType.RUN_CANCELLED, transition_payload(run.status, RunStatus.CANCELLED,
                                                         cancel_reason=reason, **(detail or {})))
    return b.change(
        run_to=RunStatus.CANCELLED, attempt_to=AttemptStatus.CANCELLED,
        run_fields={"finished_at_ms": ctx.now_ms, "cancel_requested_at_ms": ctx.now_ms,
                    "cancel_reason": reason, **error_fields(error_code, error_summary)},
        attempt_fields={"finished_at_ms": ctx.now_ms},
    )


