"""A trigger's overlap policy at dispatch, inside the leasing transaction of the run store.

When a queued Run of a trigger with an exclusive overlap policy comes up for a lease while
another Run of the trigger is in progress, the policy decides, in the leasing transaction:
``skip`` cancels the new Run, ``queue`` lets it wait (or cancels it when the queue is full),
``cancel_previous`` stops the Run in progress and lets the new one wait for it. A Run the
policy ends is cancelled with the reason ``policy`` and says which Run it gave way to
(``domain/overlap_reasons.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from qinglong.domain import lifecycle, overlap_reasons
from qinglong.domain.lifecycle import AttemptState, Change, RunState, StepContext
from qinglong.domain.runs import RunStatus
from qinglong.domain.trigger import OverlapPolicy
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Tx


class OverlapVerdict(StrEnum):
    GO = "go"  # no other Run of the trigger is in progress
    WAIT = "wait"  # stays queued for now
    CANCELLED = "cancelled"  # its fate under the policy is decided: it never runs
    BUSY = "busy"  # another executor is deciding for this trigger right now


class OverlapDecision:
    """One decision of the leasing transaction: ``apply`` writes a planned step, ``locked``
    takes the short lock that serialises a trigger's decisions, ``latest`` reads a Run and
    its latest Attempt (None when it does not exist)."""

    def __init__(self, tx: Tx, *, apply: Callable[[Change], None],
                 locked: Callable[[str], bool],
                 latest: Callable[[str], tuple[RunState, AttemptState] | None]) -> None:
        self._tx = tx
        self._apply = apply
        self._locked = locked
        self._latest = latest

    def decide(self, row: Row, run: RunState, attempt: AttemptState,
               ctx: StepContext) -> OverlapVerdict:
        key = {"project_id": row["project_id"], "overlap_key": row["overlap_key"], "run_id": run.id}
        if not self._locked(f"overlap:{row['project_id']}:{row['overlap_key']}"):
            return OverlapVerdict.BUSY
        sibling = self._tx.one("overlap_active", key)
        if sibling is None:
            return OverlapVerdict.GO
        policy = OverlapPolicy(row["overlap_policy"])
        previous = str(sibling["id"])
        detail = {"overlap": policy.value, "previous_run": previous}
        if policy is OverlapPolicy.SKIP:
            self._apply(lifecycle.cancel_queued(
                run, attempt, ctx, reason=overlap_reasons.POLICY, detail=detail,
                error_code=overlap_reasons.SKIPPED,
                error_summary=overlap_reasons.skipped_summary(policy.value, previous)))
            return OverlapVerdict.CANCELLED
        if policy is OverlapPolicy.QUEUE:
            ahead = self._tx.one("overlap_waiting_before",
                              {**key, "queued_at_ms": row["queued_at_ms"]})
            waiting = int(ahead["waiting"]) if ahead else 0
            limit = int(row["overlap_queue_limit"])
            if waiting >= limit:
                self._apply(lifecycle.cancel_queued(
                    run, attempt, ctx, reason=overlap_reasons.POLICY,
                    detail={**detail, "queue_full": True, "queue_limit": limit},
                    error_code=overlap_reasons.SKIPPED,
                    error_summary=overlap_reasons.skipped_summary(policy.value, previous,
                                                                  queue_limit=limit)))
                return OverlapVerdict.CANCELLED
            return OverlapVerdict.WAIT
        self._cancel_previous(previous, run.id, ctx)
        return OverlapVerdict.WAIT

    def _cancel_previous(self, run_id: str, next_run: str, ctx: StepContext) -> None:
        """Stop the Run in progress (``run_id``) because ``next_run`` is due; the step
        records which Run it gave way to."""
        found = self._latest(run_id)
        if found is None:
            return
        previous, attempt = found
        if previous.cancel_requested:
            return
        if previous.status is RunStatus.RETRY_WAIT:
            step = lifecycle.cancel_waiting
        elif attempt.leased:
            step = lifecycle.request_cancel
        else:
            return
        self._apply(step(previous, attempt, ctx, reason=overlap_reasons.POLICY,
                         detail={"overlap": OverlapPolicy.CANCEL_PREVIOUS.value,
                                 "next_run": next_run},
                         error_code=overlap_reasons.CANCELLED,
                         error_summary=overlap_reasons.cancelled_summary(next_run)))
        if step is lifecycle.request_cancel:
            self._tx.wake("cancel", run_id)  # the holder hears it at COMMIT
