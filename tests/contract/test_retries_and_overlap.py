"""RunStore contract, continued: retries as durable state, cancelling, draining,
overlap policies enforced at dispatch, and concurrency limits -- on every database."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from qinglong.domain.lifecycle import Outcome
from qinglong.domain.model import RunDetail
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.runs import AttemptStatus, RunStatus
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.domain.trigger import Overlap, OverlapPolicy
from qinglong.errors import Conflict
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.runs.params import (
    AttemptFinishParams,
    AttemptLease,
    LeaseRenewParams,
    LeaseRescueParams,
)
from tests.contract.conftest import Backend
from tests.contract.test_leases import acquire, run_to_running

# Waits of a minute or more (48-72 s, then 96-144 s, with the jitter): "not due yet" holds
# however slow the machine, and a case that needs a retry due ages the waits by
# RETRY_WAIT_OVER_MS, longer than any wait RETRIES can ask for (1.2 x 300 s).
RETRIES = RetryPolicy(max_attempts=3, backoff_ms=60_000, max_backoff_ms=300_000)
RETRY_WAIT_OVER_MS = 600_000
FAILED = Outcome(status=AttemptStatus.FAILED, exit_code=7, error_code="EXIT_NONZERO")
SUCCEEDED = Outcome(status=AttemptStatus.SUCCEEDED, exit_code=0)
YEARLY = "0 0 1 1 *"
NO_RETRY = RetryPolicy()
ALLOW = Overlap()
_IDS = itertools.count(1)


def publish(backend: Backend, *, retry: RetryPolicy = NO_RETRY, idempotent: bool = False,
            concurrency: int | None = None, overlap: Overlap = ALLOW,
            triggers: tuple[str, ...] = ("t1",)) -> None:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(
        project_id="demo", task_id="job", name="job",
        spec=CommandSpec(command=ShellCommand(command="true"), retry=retry, idempotent=idempotent,
                         concurrency=concurrency)))
    for trigger in triggers:
        d.trigger_publish(TriggerPublishParams(
            project_id="demo", trigger_id=trigger, task_id="job", expression=YEARLY,
            timezone="UTC", overlap=overlap))


def admit(backend: Backend, trigger: str = "t1", count: int = 1) -> list[str]:
    """``count`` occurrences of ``trigger``, oldest first."""
    base = backend.now_ms() // 1000 * 1000
    run_ids = []
    for n in range(count):
        run_id = f"00000000-0000-4000-8000-{next(_IDS):012d}"
        backend.admit("demo", trigger, base - (count - n) * 1000, run_id=run_id)
        run_ids.append(run_id)
        backend.let_time_pass()
    return run_ids


def detail(backend: Backend, run_id: str) -> RunDetail:
    return backend.runs.run_get(run_id)


def finish(backend: Backend, lease: AttemptLease, outcome: Outcome = FAILED) -> None:
    run_to_running(backend, lease.fence)
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=outcome))


# --- retries -------------------------------------------------------------------------------


def test_a_failure_waits_then_runs_again_with_a_new_attempt_until_the_policy_ends(
        backend: Backend) -> None:
    publish(backend, retry=RETRIES)
    [run_id] = admit(backend)
    for number in (1, 2):
        [lease] = acquire(backend)
        assert lease.attempt == number
        finish(backend, lease)
        waiting = detail(backend, run_id)
        assert waiting.run.status == "retry_wait"
        assert [e.type for e in waiting.events][-2:] == ["attempt.failed", "run.retry_wait"]
        assert backend.lifecycle.retry_promote(10) == []  # not due yet
        assert acquire(backend) == []
        backend.age_retries(RETRY_WAIT_OVER_MS)
        assert backend.lifecycle.retry_promote(10) == [run_id]
        queued = detail(backend, run_id)
        assert queued.run.status == "queued" and len(queued.attempts) == number + 1
        assert queued.attempts[-1].status == "claimed" and queued.events[-1].type == "run.queued"
    [last] = acquire(backend)
    assert last.attempt == 3
    finish(backend, last)
    ended = detail(backend, run_id)
    assert ended.run.status == "failed"
    assert [a.status for a in ended.attempts] == ["failed", "failed", "failed"]
    assert [a.exit_code for a in ended.attempts] == [7, 7, 7]


def test_success_after_a_retry_ends_the_run(backend: Backend) -> None:
    publish(backend, retry=RETRIES)
    [run_id] = admit(backend)
    finish(backend, acquire(backend)[0])
    backend.age_retries(RETRY_WAIT_OVER_MS)
    backend.lifecycle.retry_promote(10)
    finish(backend, acquire(backend)[0], SUCCEEDED)
    assert detail(backend, run_id).run.status == "succeeded"


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_lost_attempt_is_retried_only_for_an_idempotent_task(backend: Backend,
                                                               idempotent: bool) -> None:
    publish(backend, retry=RETRIES, idempotent=idempotent)
    [run_id] = admit(backend)
    run_to_running(backend, acquire(backend)[0].fence)
    backend.age_leases(60_000)
    [rescued] = backend.lifecycle.lease_rescue(LeaseRescueParams())
    assert rescued.outcome == ("retry" if idempotent else "lost")
    assert detail(backend, run_id).run.status == ("retry_wait" if idempotent else "lost")


# --- cancel --------------------------------------------------------------------------------


def test_cancel_ends_a_queued_run_at_once(backend: Backend) -> None:
    publish(backend)
    [run_id] = admit(backend)
    assert backend.lifecycle.run_cancel(run_id[:13]) is RunStatus.CANCELLED  # a prefix works
    ended = detail(backend, run_id)
    assert (ended.run.status, ended.run.cancel_reason) == ("cancelled", "user")
    assert ended.attempts[0].status == "cancelled"
    assert acquire(backend) == []
    with pytest.raises(Conflict, match="already ended"):
        backend.lifecycle.run_cancel(run_id)


def test_cancel_asks_a_running_run_to_stop_and_its_executor_records_it(
        backend: Backend) -> None:
    publish(backend, retry=RETRIES)
    [run_id] = admit(backend)
    [lease] = acquire(backend)
    run_to_running(backend, lease.fence)
    assert backend.lifecycle.run_cancel(run_id) is None
    assert detail(backend, run_id).events[-1].type == "run.cancel_requested"
    with pytest.raises(Conflict, match="already being cancelled"):
        backend.lifecycle.run_cancel(run_id)
    renewal = backend.lifecycle.lease_renew(LeaseRenewParams(owner="w1", lease_ms=30_000,
                                                             fences=(lease.fence,)))
    assert renewal.cancel_requested == (lease.fence,)
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=Outcome(
        status=AttemptStatus.CANCELLED, error_code="CANCELLED", cancel_reason="user")))
    ended = detail(backend, run_id)
    assert (ended.run.status, ended.run.cancel_reason) == ("cancelled", "user")


def test_a_failure_of_a_run_being_cancelled_is_not_retried(backend: Backend) -> None:
    publish(backend, retry=RETRIES)
    [run_id] = admit(backend)
    [lease] = acquire(backend)
    run_to_running(backend, lease.fence)
    backend.lifecycle.run_cancel(run_id)
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=FAILED))
    assert detail(backend, run_id).run.status == "failed"


def test_a_dead_workers_run_that_was_being_cancelled_ends_cancelled(backend: Backend) -> None:
    publish(backend, retry=RETRIES, idempotent=True)
    started, unstarted = admit(backend, count=2)
    leases = {lease.fence.run_id: lease for lease in acquire(backend)}
    run_to_running(backend, leases[started].fence)
    for run_id in (started, unstarted):
        backend.lifecycle.run_cancel(run_id)
    backend.age_leases(60_000)
    outcomes = {r.run_id: r.outcome for r in backend.lifecycle.lease_rescue(LeaseRescueParams())}
    assert outcomes == {started: "cancelled", unstarted: "cancelled"}
    for run_id in (started, unstarted):
        assert detail(backend, run_id).run.status == "cancelled"  # never retried


def test_cancel_ends_a_run_waiting_for_its_retry(backend: Backend) -> None:
    publish(backend, retry=RETRIES)
    [run_id] = admit(backend)
    finish(backend, acquire(backend)[0])
    assert backend.lifecycle.run_cancel(run_id) is RunStatus.CANCELLED
    backend.age_retries(RETRY_WAIT_OVER_MS)
    assert backend.lifecycle.retry_promote(10) == []
    assert detail(backend, run_id).run.status == "cancelled"


# --- drain ---------------------------------------------------------------------------------


def test_an_interrupted_run_is_queued_again_without_spending_an_attempt(backend: Backend) -> None:
    publish(backend)  # no retries at all: an interruption is not a failure
    [run_id] = admit(backend)
    [lease] = acquire(backend)
    run_to_running(backend, lease.fence)
    backend.lifecycle.attempt_interrupt(lease.fence, "drain")
    assert detail(backend, run_id).run.status == "retry_wait"
    assert backend.lifecycle.retry_promote(10) == [run_id]  # due at once
    [again] = acquire(backend)
    assert again.attempt == 2
    finish(backend, again, SUCCEEDED)
    ended = detail(backend, run_id)
    assert ended.run.status == "succeeded"
    assert [a.status for a in ended.attempts] == ["cancelled", "succeeded"]
    assert ended.attempts[0].error_code == "INTERRUPTED"
    backend.lifecycle.attempt_interrupt(lease.fence, "drain")  # resent after a lost reply
    assert "attempt.late_callback_ignored" not in [e.type for e in detail(backend, run_id).events]
    assert detail(backend, run_id).run.status == "succeeded"


def test_an_interrupted_run_that_was_being_cancelled_ends_cancelled(backend: Backend) -> None:
    publish(backend, retry=RETRIES)
    [run_id] = admit(backend)
    [lease] = acquire(backend)
    run_to_running(backend, lease.fence)
    backend.lifecycle.run_cancel(run_id)
    backend.lifecycle.attempt_interrupt(lease.fence, "drain")  # the drain came first
    ended = detail(backend, run_id)
    assert (ended.run.status, ended.run.cancel_reason) == ("cancelled", "user")
    assert backend.lifecycle.retry_promote(10) == []


# --- overlap -------------------------------------------------------------------------------


def test_skip_cancels_a_run_whose_previous_one_is_still_running(backend: Backend) -> None:
    publish(backend, overlap=Overlap(policy=OverlapPolicy.SKIP))
    first, second = admit(backend, count=2)
    [lease] = acquire(backend, limit=1)
    assert lease.fence.run_id == first
    assert acquire(backend) == []
    skipped = detail(backend, second)
    assert (skipped.run.status, skipped.run.cancel_reason) == ("cancelled", "policy")
    assert skipped.events[-1].payload["overlap"] == "skip"
    assert skipped.events[-1].payload["previous_run"] == first


def test_queue_waits_its_turn_up_to_its_limit(backend: Backend) -> None:
    publish(backend, overlap=Overlap(policy=OverlapPolicy.QUEUE, queue_limit=1))
    first, second, third = admit(backend, count=3)
    [lease] = acquire(backend, limit=1)
    assert lease.fence.run_id == first
    assert acquire(backend) == []
    assert detail(backend, second).run.status == "queued"  # waits
    full = detail(backend, third)
    assert (full.run.status, full.events[-1].payload.get("queue_full")) == ("cancelled", True)
    finish(backend, lease, SUCCEEDED)
    [turn] = acquire(backend)
    assert turn.fence.run_id == second


def test_cancel_previous_asks_the_running_one_to_stop_and_waits(backend: Backend) -> None:
    publish(backend, overlap=Overlap(policy=OverlapPolicy.CANCEL_PREVIOUS))
    first, second = admit(backend, count=2)
    [lease] = acquire(backend, limit=1)
    run_to_running(backend, lease.fence)
    assert acquire(backend) == []
    previous = detail(backend, first)
    assert previous.run.cancel_requested_at_ms is not None
    assert previous.run.cancel_reason == "policy"
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=Outcome(
        status=AttemptStatus.CANCELLED, error_code="CANCELLED", cancel_reason="policy")))
    [turn] = acquire(backend)
    assert turn.fence.run_id == second


def test_allow_runs_overlapping_occurrences_side_by_side(backend: Backend) -> None:
    publish(backend)
    admit(backend, count=2)
    assert len(acquire(backend)) == 2


# --- limits --------------------------------------------------------------------------------


def test_a_task_limit_holds_and_heals_when_a_lease_expires(backend: Backend) -> None:
    publish(backend, concurrency=1, triggers=("t1", "t2"))
    admit(backend, "t1")
    admit(backend, "t2")
    [lease] = acquire(backend)
    assert acquire(backend, owner="w2") == []
    run_to_running(backend, lease.fence)
    backend.age_leases(60_000)
    backend.lifecycle.lease_rescue(LeaseRescueParams())  # the holder died: lost frees the place
    assert len(acquire(backend, owner="w2")) == 1


def test_the_global_limit_counts_every_run_in_progress(backend: Backend) -> None:
    publish(backend, triggers=("t1", "t2", "t3"))
    for trigger in ("t1", "t2", "t3"):
        admit(backend, trigger)
    backend.set_global_limit(2)
    assert len(acquire(backend)) == 2
    assert acquire(backend, owner="w2") == []
    backend.set_global_limit(None)
    assert len(acquire(backend, owner="w2")) == 1


def test_runs_that_must_wait_do_not_stall_the_runs_queued_behind_them(backend: Backend) -> None:
    """Three Runs of a task limited to one at a time are queued before a Run of another
    task: a worker with two free slots takes the first of them and the other task's Run."""
    publish(backend, concurrency=1)
    backend.definitions.task_publish(TaskPublishParams(
        project_id="demo", task_id="other", name="other",
        spec=CommandSpec(command=ShellCommand(command="true"))))
    backend.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="t-other", task_id="other", expression=YEARLY,
        timezone="UTC"))
    limited = admit(backend, "t1", count=3)
    [other] = admit(backend, "t-other")
    taken = {lease.fence.run_id for lease in acquire(backend, limit=2)}
    assert taken == {limited[0], other}


def test_cancel_previous_notifies_the_holder_at_once_on_postgres(pg_backend: Any) -> None:
    """The worker running the previous Run hears the cancel by NOTIFY when the new Run's
    acquisition commits, not only at its next renewal."""
    import psycopg

    backend = pg_backend
    publish(backend, overlap=Overlap(policy=OverlapPolicy.CANCEL_PREVIOUS))
    first, _second = admit(backend, count=2)
    [lease] = acquire(backend, limit=1)
    run_to_running(backend, lease.fence)
    with psycopg.connect(backend.db.url("ql_worker"), autocommit=True) as listener:
        listener.execute("LISTEN qinglong_cancel")
        assert acquire(backend) == []  # the new Run waits; the previous one is asked to stop
        heard = [note.payload for note in listener.notifies(timeout=30, stop_after=1)]
    assert heard == [first]
