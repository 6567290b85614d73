"""Issue 18 (items 6 and 7), on every database: what stats count and what a Run records when
its trigger's overlap policy ends it, and how long a retried Run lasted.

- a ``lost`` Run is a failure in the stats and their success rate;
- a Run an overlap policy ended -- ``skip`` (or a full ``queue``) cancelled it, or
  ``cancel_previous`` stopped it for a newer Run -- is ``skipped``: neither a success nor a
  failure nor a cancellation, and left out of the success rate; a user's cancellation still
  counts as ``cancelled``;
- such a Run's error names the Run it gave way to (not "cancelled on request"), and the
  events keep their vocabulary (cancel reason ``policy``, ``previous_run``), adding
  ``next_run`` to the cancel request of ``cancel_previous``;
- a retried Run lasts from its first attempt's start to its last attempt's end: in the Run
  (``ql run show``/``list``, the API view) and in the stats.
"""

from __future__ import annotations

import pytest

from qinglong.domain.lifecycle import Outcome
from qinglong.domain.runs import AttemptStatus, RunStatus
from qinglong.domain.trigger import Overlap, OverlapPolicy
from qinglong.errors import InvalidInput, NotFound
from qinglong.service.runs import RunViews
from qinglong.service.stats import TaskStats
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.params import AttemptFinishParams, LeaseRescueParams, RunListParams
from tests.contract.conftest import Backend
from tests.contract.test_leases import acquire, run_to_running
from tests.contract.test_retries_and_overlap import (
    FAILED,
    RETRIES,
    RETRY_WAIT_OVER_MS,
    SUCCEEDED,
    admit,
    detail,
    finish,
    publish,
)

# what an executor reports when it stopped a command on request (execution/executor.py)
STOPPED_ON_REQUEST = Outcome(status=AttemptStatus.CANCELLED, error_code="CANCELLED",
                             error_summary="cancelled on request", cancel_reason="user")


@pytest.fixture
def pages(backend: Backend) -> RunStore:
    """Run reads as the HTTP API has them (as ql_web where the database has roles)."""
    return RunStore(backend.database("ql_web", "contract-stats"), actor_id="web")


def totals(backend: Backend, pages: RunStore) -> dict[str, object]:
    """The task's totals over the last week (the Runs were admitted just now)."""
    view = TaskStats(pages).per_day("demo", now_ms=backend.now_ms()).to_json()
    [total] = view["totals"]
    assert isinstance(total, dict) and total["task"] == "job"
    return total


def counts(total: dict[str, object]) -> tuple[object, ...]:
    return tuple(total[key] for key in ("runs", "successes", "failures", "cancelled", "skipped",
                                        "success_rate"))


# --- lost Runs are failures -----------------------------------------------------------------


def test_a_lost_run_is_a_failure_in_the_stats(backend: Backend, pages: RunStore) -> None:
    publish(backend)
    lost, good = admit(backend, count=2)
    leases = {lease.fence.run_id: lease for lease in acquire(backend)}
    run_to_running(backend, leases[lost].fence)
    finish(backend, leases[good], SUCCEEDED)
    backend.age_leases(60_000)
    [rescued] = backend.lifecycle.lease_rescue(LeaseRescueParams())
    assert (rescued.run_id, rescued.outcome) == (lost, "lost")
    assert detail(backend, lost).run.status == "lost"
    # runs, successes, failures, cancelled, skipped, success rate
    assert counts(totals(backend, pages)) == (2, 1, 1, 0, 0, 0.5)


# --- overlap skips are neither successes nor failures ---------------------------------------


def test_a_run_the_skip_policy_cancelled_is_skipped_and_names_the_run_in_progress(
        backend: Backend, pages: RunStore) -> None:
    publish(backend, overlap=Overlap(policy=OverlapPolicy.SKIP))
    first, second = admit(backend, count=2)
    [lease] = acquire(backend, limit=1)
    assert acquire(backend) == []  # the second comes up while the first runs: skipped
    finish(backend, lease, SUCCEEDED)
    skipped = detail(backend, second).run
    assert (skipped.status, skipped.cancel_reason, skipped.error_code) == (
        "cancelled", "policy", "OVERLAP_SKIPPED")
    assert skipped.error_summary == (f"skipped by the trigger's overlap policy skip: run "
                                     f"{first} was still in progress")
    last = detail(backend, second).events[-1]
    assert (last.type, last.payload["cancel_reason"], last.payload["previous_run"]) == (
        "run.cancelled", "policy", first)
    assert counts(totals(backend, pages)) == (2, 1, 0, 0, 1, 1.0)


def test_a_run_a_full_queue_cancelled_names_the_run_in_progress_and_the_limit(
        backend: Backend, pages: RunStore) -> None:
    publish(backend, overlap=Overlap(policy=OverlapPolicy.QUEUE, queue_limit=1))
    first, _waiting, third = admit(backend, count=3)
    [lease] = acquire(backend, limit=1)
    assert acquire(backend) == []
    full = detail(backend, third).run
    assert (full.status, full.error_code) == ("cancelled", "OVERLAP_SKIPPED")
    assert full.error_summary == (f"skipped by the trigger's overlap policy queue: run {first} "
                                  "was still in progress and 1 Run(s) were already waiting "
                                  "(the queue limit)")
    finish(backend, lease, FAILED)
    assert counts(totals(backend, pages)) == (3, 0, 1, 0, 1, 0.0)


def test_a_run_cancel_previous_stopped_names_the_newer_run_and_is_skipped(
        backend: Backend, pages: RunStore) -> None:
    publish(backend, overlap=Overlap(policy=OverlapPolicy.CANCEL_PREVIOUS))
    first, second = admit(backend, count=2)
    [lease] = acquire(backend, limit=1)
    run_to_running(backend, lease.fence)
    assert acquire(backend) == []  # asks the first to stop; the second waits for it
    requested = detail(backend, first).events[-1]
    assert (requested.type, requested.payload["cancel_reason"], requested.payload["next_run"],
            requested.payload["overlap"]) == (
        "run.cancel_requested", "policy", second, "cancel_previous")
    # its executor stops the command and reports what it always reports
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence,
                                                         outcome=STOPPED_ON_REQUEST))
    stopped = detail(backend, first)
    assert (stopped.run.status, stopped.run.cancel_reason, stopped.run.error_code) == (
        "cancelled", "policy", "OVERLAP_CANCELLED")
    assert stopped.run.error_summary == (f"cancelled by the trigger's overlap policy "
                                         f"cancel_previous: run {second} was due")
    assert stopped.events[-1].payload["cancel_reason"] == "policy"
    [turn] = acquire(backend)
    assert turn.fence.run_id == second
    finish(backend, turn, SUCCEEDED)
    assert counts(totals(backend, pages)) == (2, 1, 0, 0, 1, 1.0)


def test_cancel_previous_of_a_run_waiting_for_its_retry_names_the_newer_run(
        backend: Backend) -> None:
    publish(backend, retry=RETRIES, overlap=Overlap(policy=OverlapPolicy.CANCEL_PREVIOUS))
    [first] = admit(backend)
    finish(backend, acquire(backend)[0])  # attempt 1 fails: waits for its retry
    assert detail(backend, first).run.status == "retry_wait"
    backend.pass_time(1_000)  # the next occurrence (admit() takes the one a second ago)
    [second] = admit(backend)
    assert acquire(backend) == []  # the waiting Run is cancelled at once ...
    [turn] = acquire(backend)  # ... and the new one goes next
    assert turn.fence.run_id == second
    ended = detail(backend, first).run
    assert (ended.status, ended.cancel_reason, ended.error_code) == (
        "cancelled", "policy", "OVERLAP_CANCELLED")
    assert ended.error_summary is not None and second in ended.error_summary


def test_a_users_cancel_is_still_a_cancellation_and_says_so(
        backend: Backend, pages: RunStore) -> None:
    publish(backend, overlap=Overlap(policy=OverlapPolicy.SKIP))
    running, queued = admit(backend, count=2)
    [lease] = acquire(backend, limit=1)
    assert lease.fence.run_id == running
    run_to_running(backend, lease.fence)
    assert backend.lifecycle.run_cancel(running) is None
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence,
                                                         outcome=STOPPED_ON_REQUEST))
    stopped = detail(backend, running).run
    assert (stopped.cancel_reason, stopped.error_code, stopped.error_summary) == (
        "user", "CANCELLED", "cancelled on request")
    assert backend.lifecycle.run_cancel(queued) is RunStatus.CANCELLED
    assert counts(totals(backend, pages)) == (2, 0, 0, 2, 0, 0.0)


# --- Run id prefixes ---------------------------------------------------------------------------


def test_a_prefix_too_short_or_ambiguous_says_so(backend: Backend) -> None:
    publish(backend)
    first, second = admit(backend, count=2)  # ids 00000000-0000-4000-8000-0000000000NN
    assert first[:8] == second[:8]
    with pytest.raises(InvalidInput, match=r"^run: '0000000': prefix too short \(at least 8 "
                                           r"characters\)$"):
        backend.runs.run_get(first[:7])
    with pytest.raises(InvalidInput, match=r"^run: '00000000': prefix ambiguous \(it matches "
                                           r"more than one Run; give more characters\)$"):
        backend.runs.run_get(first[:8])
    common = next(n for n, (a, b) in enumerate(zip(first, second, strict=True)) if a != b)
    unique = first[:common + 1]
    assert backend.runs.run_get(unique).run.id == first
    with pytest.raises(NotFound):
        backend.runs.run_get("ffffffff")


# --- a retried Run's duration ------------------------------------------------------------------


def test_a_retried_run_lasts_from_its_first_attempts_start_to_its_last_attempts_end(
        backend: Backend, pages: RunStore) -> None:
    publish(backend, retry=RETRIES)
    [run_id] = admit(backend)
    finish(backend, acquire(backend)[0])  # attempt 1: runs, fails
    backend.let_time_pass()
    backend.age_retries(RETRY_WAIT_OVER_MS)
    assert backend.lifecycle.retry_promote(10) == [run_id]
    backend.let_time_pass()
    [again] = acquire(backend)
    assert again.attempt == 2
    run_to_running(backend, again.fence)
    backend.let_time_pass()
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=again.fence, outcome=SUCCEEDED))
    ended = detail(backend, run_id)
    first, last = ended.attempts
    assert first.started_at_ms is not None and last.started_at_ms is not None
    assert first.started_at_ms < last.started_at_ms  # the attempts really are apart
    assert last.finished_at_ms is not None
    whole = last.finished_at_ms - first.started_at_ms
    assert (ended.run.started_at_ms, ended.run.finished_at_ms) == (first.started_at_ms,
                                                                   last.finished_at_ms)
    assert ended.run.duration_ms == whole
    views = RunViews(backend.runs)
    shown = views.run_show(run_id, tail_lines=0).run
    assert shown.duration_ms == whole  # ql run show, the API
    [listed] = views.run_list(RunListParams(project_id="demo"))
    assert listed.duration_ms == whole  # ql run list
    total = totals(backend, pages)
    assert (total["total_duration_ms"], total["max_duration_ms"]) == (whole, whole)
