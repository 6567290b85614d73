"""RunStore contract: attempt leases and the fenced lifecycle steps, on every database.

Runs are admitted by the one scheduler (see test_runs.py). Leases are judged by the
store's clock (the fake clock on SQLite, the database clock on PostgreSQL); a case
that needs a lease to expire ages the leases through the backend hook instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from qinglong.domain.lifecycle import LeaseFence, Outcome
from qinglong.domain.model import RunDetail
from qinglong.domain.runs import AttemptStatus, RunStatus
from qinglong.errors import IllegalTransition, InvalidInput, LeaseLost
from qinglong.storage.flows.release import FlowSteps
from qinglong.storage.runs.params import (
    AttemptFinishParams,
    AttemptLease,
    AttemptRunningParams,
    LeaseAcquireParams,
    LeaseReleaseParams,
    LeaseRenewParams,
    LeaseRescueParams,
)
from tests.contract.conftest import Backend
from tests.contract.test_runs import R1, R2, R3, R4, setup_definitions

LEASE_MS = 30_000
SUCCEEDED = Outcome(status=AttemptStatus.SUCCEEDED, exit_code=0)


@pytest.fixture
def queued(backend: Backend) -> list[str]:
    """Four queued Runs, admitted oldest first: R1, R3 (and R2 at the same time), R4."""
    setup_definitions(backend)
    base = backend.now_ms() // 1000 * 1000
    for run_id, project, trigger, seconds_before in ((R1, "demo", "t1", 9), (R3, "demo", "t2", 6),
                                                     (R2, "demo", "t1", 6), (R4, "other", "t1", 3)):
        backend.admit(project, trigger, base - seconds_before * 1000, run_id=run_id)
    return [R1, R3, R2, R4]


def acquire(backend: Backend, owner: str = "w1", limit: int = 10,
            lease_ms: int = LEASE_MS) -> list[AttemptLease]:
    return backend.lifecycle.lease_acquire(
        LeaseAcquireParams(owner=owner, lease_ms=lease_ms, limit=limit))


def run_to_running(backend: Backend, fence: LeaseFence, pid: int = 4242) -> None:
    backend.lifecycle.attempt_start(fence)
    backend.lifecycle.attempt_running(AttemptRunningParams(
        fence=fence, pid=pid, executor_handle=f"pid:{pid}:start:1", log_path="/tmp/ql.log"))


def events(detail: RunDetail) -> list[str]:
    return [event.type for event in detail.events]


def test_acquire_leases_queued_runs_oldest_first_each_once(backend: Backend,
                                                           queued: list[str]) -> None:
    by_age = sorted(queued, key=lambda r: (backend.runs.run_get(r).run.queued_at_ms, r))
    before = backend.now_ms()
    first = acquire(backend, limit=2)
    assert [lease.fence.run_id for lease in first] == by_age[:2]
    rest = acquire(backend, owner="w2")
    assert {lease.fence.run_id for lease in first + rest} == set(queued)
    assert len(first + rest) == 4
    assert acquire(backend, owner="w3") == []
    lease = next(lease for lease in first + rest if lease.fence.run_id == R1)
    assert lease.fence.generation == 1 and lease.attempt == 1
    assert lease.execution is not None and lease.problem is None
    assert lease.execution.argv() == ["/bin/sh", "-c", "echo hi"]
    assert (lease.project_id, lease.task_id, lease.trigger_id) == ("demo", "hello", "t1")
    assert before + LEASE_MS <= lease.expires_at_ms <= backend.now_ms() + LEASE_MS
    detail = backend.runs.run_get(R1)
    assert detail.run.status == "dispatching" and detail.run.version == 3
    [attempt] = detail.attempts
    assert (attempt.status, attempt.lease_generation) == ("claimed", 1)
    assert attempt.worker_id == ("w1" if lease in first else "w2")
    assert events(detail) == ["run.created", "run.queued", "run.dispatching"]
    assert detail.events[-1].payload["worker"] == attempt.worker_id
    assert detail.events[-1].attempt_id == attempt.id


def test_acquire_refuses_bad_bounds(backend: Backend, queued: list[str]) -> None:
    with pytest.raises(InvalidInput, match="lease"):
        acquire(backend, lease_ms=10)
    with pytest.raises(InvalidInput, match="limit"):
        acquire(backend, limit=0)
    assert all(backend.runs.run_get(run_id).run.status == "queued" for run_id in queued)


def test_a_tampered_plan_comes_with_its_problem_not_its_command(backend: Backend,
                                                                queued: list[str]) -> None:
    del queued
    assert backend.tamper_execution_plan("echo hi", "echo evil") >= 1
    leases = acquire(backend)
    assert len(leases) == 4
    for lease in leases:
        assert lease.execution is None
        assert lease.problem is not None and "digest" in lease.problem


def test_the_happy_path_records_every_step(backend: Backend, queued: list[str]) -> None:
    del queued
    [lease] = acquire(backend, limit=1)
    fence = lease.fence
    backend.lifecycle.attempt_start(fence)
    assert backend.runs.run_get(fence.run_id).attempts[0].status == "starting"
    backend.lifecycle.attempt_running(AttemptRunningParams(
        fence=fence, pid=4242, executor_handle="pid:4242:start:1", log_path="/var/log/ql/x.log"))
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=fence, outcome=SUCCEEDED))
    detail = backend.runs.run_get(fence.run_id)
    assert detail.run.status == "succeeded" and detail.run.version == 6
    assert detail.run.started_at_ms is not None and detail.run.finished_at_ms is not None
    [attempt] = detail.attempts
    assert (attempt.status, attempt.pid, attempt.exit_code, attempt.log_path) == (
        "succeeded", 4242, 0, "/var/log/ql/x.log")
    assert attempt.lease_expires_at_ms is None
    assert events(detail) == ["run.created", "run.queued", "run.dispatching", "attempt.starting",
                              "attempt.running", "run.running", "attempt.succeeded",
                              "run.succeeded"]
    assert [e.sequence for e in detail.events] == list(range(1, 9))
    assert {e.actor_type for e in detail.events[2:]} <= {"executor", "worker"}


def test_a_resent_step_is_accepted_once(backend: Backend, queued: list[str]) -> None:
    del queued
    [lease] = acquire(backend, limit=1)
    fence = lease.fence
    backend.lifecycle.attempt_start(fence)
    backend.lifecycle.attempt_start(fence)  # its reply was lost and it was sent again
    run_to_running(backend, fence)
    finish = AttemptFinishParams(fence=fence, outcome=SUCCEEDED)
    backend.lifecycle.attempt_finish(finish)
    backend.lifecycle.attempt_finish(finish)
    detail = backend.runs.run_get(fence.run_id)
    assert events(detail).count("attempt.starting") == 1
    assert events(detail).count("run.succeeded") == 1
    assert detail.run.version == 6


def test_a_different_result_after_the_end_is_refused_and_recorded(backend: Backend,
                                                                 queued: list[str]) -> None:
    del queued
    [lease] = acquire(backend, limit=1)
    run_to_running(backend, lease.fence)
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=SUCCEEDED))
    failed = Outcome(status=AttemptStatus.FAILED, exit_code=1, error_code="EXIT_NONZERO")
    with pytest.raises(LeaseLost):
        backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=failed))
    detail = backend.runs.run_get(lease.fence.run_id)
    assert detail.run.status == "succeeded"
    assert events(detail)[-1] == "attempt.late_callback_ignored"


@pytest.mark.parametrize("stale", ["token", "generation", "attempt"])
def test_a_stale_fence_writes_nothing_but_its_refusal(backend: Backend, queued: list[str],
                                                      stale: str) -> None:
    del queued
    [lease] = acquire(backend, limit=1)
    fence = lease.fence
    bad = {"token": replace(fence, token="not-the-token"),
           "generation": replace(fence, generation=fence.generation + 1),
           "attempt": replace(fence, attempt_id=fence.attempt_id)}[stale]
    if stale == "attempt":  # a fence from before a release: right token, old generation
        backend.lifecycle.lease_release(LeaseReleaseParams(fence=fence, reason="drain"))
        [lease] = acquire(backend, limit=1)
        assert lease.fence.generation == fence.generation + 2  # withdrawn, then granted
    before = backend.runs.run_get(fence.run_id)
    with pytest.raises(LeaseLost):
        backend.lifecycle.attempt_start(bad)
    after = backend.runs.run_get(fence.run_id)
    assert after.attempts[0].status == before.attempts[0].status == "claimed"
    assert events(after) == [*events(before), "attempt.late_callback_ignored"]
    assert after.events[-1].payload["write"] == "start"
    for step in (lambda: run_to_running(backend, bad),
                 lambda: backend.lifecycle.attempt_finish(
                     AttemptFinishParams(fence=bad, outcome=SUCCEEDED))):
        with pytest.raises(LeaseLost):
            step()
    assert backend.runs.run_get(fence.run_id).run.status == "dispatching"


def test_steps_out_of_order_are_illegal(backend: Backend, queued: list[str]) -> None:
    del queued
    [lease] = acquire(backend, limit=1)
    with pytest.raises(IllegalTransition):  # running before starting
        backend.lifecycle.attempt_running(AttemptRunningParams(
            fence=lease.fence, pid=1, executor_handle="pid:1:start:1", log_path=None))
    backend.lifecycle.attempt_start(lease.fence)
    with pytest.raises(IllegalTransition):  # a started attempt cannot be given back
        backend.lifecycle.lease_release(LeaseReleaseParams(fence=lease.fence, reason="drain"))
    detail = backend.runs.run_get(lease.fence.run_id)
    assert detail.attempts[0].status == "starting" and detail.run.status == "dispatching"


def test_renew_extends_held_leases_and_reports_the_rest(backend: Backend,
                                                        queued: list[str]) -> None:
    del queued
    leases = acquire(backend, limit=3)
    other = acquire(backend, owner="w2", limit=1)
    held = (leases[0].fence, leases[1].fence)
    stale = replace(leases[2].fence, token="stale")
    backend.age_leases(10_000)
    backend.request_cancel(leases[1].fence.run_id)
    before = backend.now_ms()
    renewal = backend.lifecycle.lease_renew(LeaseRenewParams(
        owner="w1", lease_ms=LEASE_MS, fences=(*held, stale, other[0].fence)))
    assert set(renewal.renewed) == set(held)
    assert set(renewal.lost) == {stale, other[0].fence}
    assert renewal.cancel_requested == (leases[1].fence,)
    assert renewal.expires_at_ms is not None
    assert before + LEASE_MS <= renewal.expires_at_ms <= backend.now_ms() + LEASE_MS
    expiries = {a.run_id: a.lease_expires_at_ms for run in (held[0].run_id, leases[2].fence.run_id)
                for a in backend.runs.run_get(run).attempts}
    assert expiries[held[0].run_id] == renewal.expires_at_ms
    assert (expiries[leases[2].fence.run_id] or 0) < renewal.expires_at_ms  # not renewed


def test_release_queues_the_run_again_with_a_new_generation(backend: Backend,
                                                            queued: list[str]) -> None:
    del queued
    [lease] = acquire(backend, limit=1)
    backend.lifecycle.lease_release(LeaseReleaseParams(fence=lease.fence, reason="drain"))
    detail = backend.runs.run_get(lease.fence.run_id)
    assert detail.run.status == "queued"
    assert (detail.attempts[0].status, detail.attempts[0].worker_id) == ("claimed", None)
    assert events(detail)[-1] == "run.dispatch_released"
    assert detail.events[-1].payload["reason"] == "drain"
    [again] = acquire(backend, owner="w2", limit=1)
    assert again.fence.run_id == lease.fence.run_id
    assert again.fence.generation == 3  # granted, withdrawn, granted again
    assert again.attempt == 1  # nothing ran, so no attempt was spent
    with pytest.raises(LeaseLost):
        backend.lifecycle.attempt_start(lease.fence)


def test_rescue_waits_for_expiry_plus_grace(backend: Backend, queued: list[str]) -> None:
    del queued
    acquire(backend, limit=2)
    grace_ms = 60_000  # long enough to hold the lease aged below within it on a slow machine
    rescue = LeaseRescueParams(grace_ms=grace_ms)
    assert backend.lifecycle.lease_rescue(rescue) == []
    backend.age_leases(LEASE_MS + 2_000)  # expired, but within the grace
    assert backend.lifecycle.lease_rescue(rescue) == []
    backend.age_leases(grace_ms)  # now past the grace too
    assert len(backend.lifecycle.lease_rescue(rescue)) == 2


def test_rescue_requeues_unstarted_and_loses_started_attempts(backend: Backend,
                                                              queued: list[str]) -> None:
    del queued
    unstarted, starting, running = acquire(backend, limit=3)
    backend.lifecycle.attempt_start(starting.fence)
    run_to_running(backend, running.fence, pid=777)
    backend.age_leases(LEASE_MS + 10_000)
    rescued = {r.run_id: r for r in backend.lifecycle.lease_rescue(LeaseRescueParams())}
    assert {k: (r.previous_status, r.outcome, r.worker) for k, r in rescued.items()} == {
        unstarted.fence.run_id: ("claimed", "requeued", "w1"),
        starting.fence.run_id: ("starting", "lost", "w1"),
        running.fence.run_id: ("running", "lost", "w1"),
    }
    assert rescued[running.fence.run_id].pid == 777
    requeued = backend.runs.run_get(unstarted.fence.run_id)
    assert requeued.run.status == "queued" and requeued.events[-1].actor_type == "reconciler"
    for lease in (starting, running):
        detail = backend.runs.run_get(lease.fence.run_id)
        assert (detail.run.status, detail.attempts[0].status) == ("lost", "lost")
        assert detail.run.error_code == "LEASE_EXPIRED"
        assert events(detail)[-2:] == ["attempt.lost", "run.lost"]
        assert detail.events[-1].payload["reason"] == "lease_expired"
        assert detail.events[-1].actor_type == "reconciler"
        # the zombie holder's late result is refused and recorded
        with pytest.raises(LeaseLost):
            backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence,
                                                                 outcome=SUCCEEDED))
        assert events(backend.runs.run_get(lease.fence.run_id))[-1] == (
            "attempt.late_callback_ignored")
    assert backend.lifecycle.lease_rescue(LeaseRescueParams()) == []


def test_a_lease_granted_starting_is_one_write_and_is_lost_not_offered_again(
        backend: Backend, queued: list[str]) -> None:
    """The executor's leases (``start``): the start step lands with the lease, in one Run
    version, and the holder goes straight to running; an expired one is a started Attempt
    (lost), never queued again; a drain before the spawn interrupts it, spending nothing."""
    del queued
    leases = backend.lifecycle.lease_acquire(
        LeaseAcquireParams(owner="w1", lease_ms=LEASE_MS, limit=3, start=True))
    ran, expired, drained = leases
    assert all(lease.started for lease in leases)
    assert not any(lease.started for lease in acquire(backend, owner="w2"))  # the plain kind
    detail = backend.runs.run_get(ran.fence.run_id)
    assert detail.run.status == "dispatching" and detail.run.version == 3
    assert [a.status for a in detail.attempts] == ["starting"]
    assert events(detail)[-2:] == ["run.dispatching", "attempt.starting"]
    assert detail.events[-1].payload == {"attempt": 1, "lease_generation": 1}
    backend.lifecycle.attempt_start(ran.fence)  # a start step too is accepted, writing nothing
    assert backend.runs.run_get(ran.fence.run_id).run.version == 3
    backend.lifecycle.attempt_running(AttemptRunningParams(
        fence=ran.fence, pid=4242, executor_handle="pid:4242:start:1", log_path=None))
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=ran.fence, outcome=SUCCEEDED))
    detail = backend.runs.run_get(ran.fence.run_id)
    assert (detail.run.status, detail.run.version) == ("succeeded", 5)
    backend.lifecycle.attempt_interrupt(drained.fence, "drain")
    detail = backend.runs.run_get(drained.fence.run_id)
    assert detail.run.status == "retry_wait" and detail.attempts[0].status == "cancelled"
    assert events(detail)[-2:] == ["attempt.cancelled", "run.retry_wait"]
    assert detail.events[-1].payload["attempts_spent"] == 0
    backend.age_leases(LEASE_MS + 10_000)
    rescued = {r.run_id: r for r in backend.lifecycle.lease_rescue(LeaseRescueParams())}
    assert (rescued[expired.fence.run_id].previous_status,
            rescued[expired.fence.run_id].outcome) == ("starting", "lost")
    assert backend.runs.run_get(expired.fence.run_id).run.status == "lost"


def test_the_ending_of_a_run_outside_every_flow_looks_up_no_flow_step(
        backend: Backend, queued: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A fenced step reads its Run's trigger type: an ending of a Run no flow released asks
    flow_steps nothing (a statement a Run saved). An ending read without it (the reconciler's)
    still looks; flow steps' own endings are in test_flows.py."""
    del queued
    looked: list[list[str]] = []
    after_ended = FlowSteps.after_ended

    def spy(steps: FlowSteps, ended: Sequence[tuple[str, RunStatus]], now_ms: int) -> None:
        looked.append([run_id for run_id, _ in ended])
        after_ended(steps, ended, now_ms)

    monkeypatch.setattr(FlowSteps, "after_ended", spy)
    [lease] = acquire(backend, limit=1)
    run_to_running(backend, lease.fence)
    backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=SUCCEEDED))
    assert backend.runs.run_get(lease.fence.run_id).run.status == "succeeded"
    assert looked == []
    [other] = acquire(backend, limit=1)
    run_to_running(backend, other.fence)
    backend.age_leases(LEASE_MS + 10_000)
    [rescued] = backend.lifecycle.lease_rescue(LeaseRescueParams())
    assert rescued.outcome == "lost"
    assert looked == [[other.fence.run_id]]


def test_rescue_ignoring_expiry_takes_every_active_lease(backend: Backend,
                                                         queued: list[str]) -> None:
    del queued
    acquire(backend, limit=2)
    assert len(backend.lifecycle.attempt_list_active()) == 2
    rescued = backend.lifecycle.lease_rescue(
        LeaseRescueParams(ignore_expiry=True, notes={}))
    assert {r.outcome for r in rescued} == {"requeued"} and len(rescued) == 2
    assert backend.lifecycle.attempt_list_active() == []


def test_active_attempts_are_listed_with_their_process(backend: Backend, queued: list[str]) -> None:
    del queued
    leased, started = acquire(backend, limit=2)
    run_to_running(backend, started.fence, pid=555)
    active = {a.run_id: a for a in backend.lifecycle.attempt_list_active()}
    assert set(active) == {leased.fence.run_id, started.fence.run_id}
    assert (active[started.fence.run_id].status, active[started.fence.run_id].pid) == (
        "running", 555)
    assert active[leased.fence.run_id].worker == "w1"


def test_an_expired_lease_is_not_renewed(backend: Backend, queued: list[str]) -> None:
    """Once a lease has expired the reconciler may be withdrawing it: renewing it then would
    let a worker believe it still owns a Run that is about to be declared lost."""
    del queued
    [lease] = acquire(backend, limit=1)
    run_to_running(backend, lease.fence)
    backend.age_leases(LEASE_MS + 60_000)
    renewal = backend.lifecycle.lease_renew(LeaseRenewParams(
        owner="w1", lease_ms=LEASE_MS, fences=(lease.fence,)))
    assert renewal.renewed == () and renewal.lost == (lease.fence,)
    [rescued] = backend.lifecycle.lease_rescue(LeaseRescueParams(grace_ms=0))
    assert (rescued.run_id, rescued.outcome) == (lease.fence.run_id, "lost")


def test_a_resent_release_is_accepted_once(backend: Backend, queued: list[str]) -> None:
    """A release whose reply was lost is sent again: it lands once and records no refusal."""
    del queued
    [lease] = acquire(backend, limit=1)
    release = LeaseReleaseParams(fence=lease.fence, reason="drain")
    backend.lifecycle.lease_release(release)
    backend.lifecycle.lease_release(release)
    detail = backend.runs.run_get(lease.fence.run_id)
    assert events(detail).count("run.dispatch_released") == 1
    assert "attempt.late_callback_ignored" not in events(detail)
    assert detail.run.status == "queued"
