"""RunStore contract: fenced steps of several Attempts written in one transaction
(`RunStore.attempt_steps`, what a worker's jobs record at the same moment), on every database.

Each step is judged against its own rows and its own fence: one that fails its fence is
refused and recorded (``attempt.late_callback_ignored``) while the others land; one that may
not be taken from its state fails alone. Sent again, as after a COMMIT whose reply was lost,
every step that landed is accepted as already done and nothing is written twice.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from qinglong.domain.lifecycle import LeaseFence, Outcome
from qinglong.domain.runs import AttemptStatus
from qinglong.errors import IllegalTransition, LeaseLost
from qinglong.execution.step_batch import StepBatch
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.lifecycle import StepOutcome
from qinglong.storage.runs.params import AttemptFinishParams, AttemptRunningParams
from tests.contract.conftest import Backend
from tests.contract.test_leases import acquire, events
from tests.contract.test_runs import R1, R2, R3, R4, setup_definitions

SUCCEEDED = Outcome(status=AttemptStatus.SUCCEEDED, exit_code=0)


@pytest.fixture
def leased(backend: Backend) -> list[LeaseFence]:
    """Four queued Runs, leased to one worker."""
    setup_definitions(backend)
    base = backend.now_ms() // 1000 * 1000
    for number, run_id in enumerate((R1, R2, R3, R4)):
        backend.admit("demo", "t1", base - (number + 1) * 1000, run_id=run_id)
    return [lease.fence for lease in acquire(backend, limit=4)]


def running(fence: LeaseFence, pid: int) -> AttemptRunningParams:
    return AttemptRunningParams(fence=fence, pid=pid,
                                executor_handle=f"pid:{pid}:start:1", log_path=None)


def test_each_step_of_a_batch_answers_to_its_own_fence(backend: Backend,
                                                       leased: list[LeaseFence]) -> None:
    a, b, c, d = leased
    for fence in (a, b, c):
        backend.lifecycle.attempt_start(fence)
    backend.lifecycle.attempt_running(running(a, 4000))
    before = {fence.run_id: backend.runs.run_get(fence.run_id) for fence in (a, b, c, d)}
    batch = [RunStore.finish_step(AttemptFinishParams(fence=a, outcome=SUCCEEDED)),
             RunStore.running_step(running(replace(b, token="forged"), 4001)),  # fence fails
             RunStore.running_step(running(c, 4002)),
             RunStore.running_step(running(d, 4003))]  # never started: may not be running
    outcomes = backend.lifecycle.attempt_steps(batch)
    assert outcomes[:3] == [StepOutcome.APPLIED, StepOutcome.REFUSED, StepOutcome.APPLIED]
    assert isinstance(outcomes[3], IllegalTransition)
    after = {fence.run_id: backend.runs.run_get(fence.run_id) for fence in (a, b, c, d)}
    assert after[a.run_id].run.status == "succeeded"
    assert events(after[a.run_id])[-2:] == ["attempt.succeeded", "run.succeeded"]
    # the refused step wrote its refusal, nothing else
    assert after[b.run_id].attempts[0].status == "starting"
    assert events(after[b.run_id]) == [*events(before[b.run_id]),
                                       "attempt.late_callback_ignored"]
    assert (after[c.run_id].run.status, after[c.run_id].attempts[0].pid) == ("running", 4002)
    assert events(after[c.run_id])[-2:] == ["attempt.running", "run.running"]
    # the illegal step alone wrote nothing
    assert after[d.run_id].run == before[d.run_id].run
    assert events(after[d.run_id]) == events(before[d.run_id])


def test_a_batch_sent_again_after_a_lost_reply_writes_nothing_twice(
        backend: Backend, leased: list[LeaseFence]) -> None:
    fences = leased[:3]
    for number, fence in enumerate(fences):
        backend.lifecycle.attempt_start(fence)
        backend.lifecycle.attempt_running(running(fence, 4000 + number))
    finishes = [RunStore.finish_step(AttemptFinishParams(fence=fence, outcome=SUCCEEDED))
                for fence in fences]
    assert backend.lifecycle.attempt_steps(finishes) == [StepOutcome.APPLIED] * 3
    landed = {fence.run_id: backend.runs.run_get(fence.run_id) for fence in fences}
    # the COMMIT's reply was lost: each job sends its finish again
    assert backend.lifecycle.attempt_steps(finishes) == [StepOutcome.ALREADY_DONE] * 3
    for fence in fences:
        again = backend.runs.run_get(fence.run_id)
        assert again.run == landed[fence.run_id].run
        assert events(again) == events(landed[fence.run_id])


def test_jobs_recording_at_once_share_transactions_and_each_hears_its_own_outcome(
        backend: Backend, leased: list[LeaseFence]) -> None:
    for number, fence in enumerate(leased):
        backend.lifecycle.attempt_start(fence)
        backend.lifecycle.attempt_running(running(fence, 4000 + number))
    steps = StepBatch(backend.lifecycle)
    go = threading.Barrier(len(leased))
    heard: dict[str, BaseException | None] = {}

    def job(index: int) -> None:
        fence = leased[index]
        if index == 0:
            fence = replace(fence, token="forged")  # this one's lease is not its own
        go.wait()
        try:
            steps.write(RunStore.finish_step(AttemptFinishParams(fence=fence,
                                                                 outcome=SUCCEEDED)))
            heard[fence.run_id] = None
        except LeaseLost as exc:
            heard[fence.run_id] = exc

    threads = [threading.Thread(target=job, args=(i,)) for i in range(len(leased))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert isinstance(heard.pop(leased[0].run_id), LeaseLost)
    assert heard == {fence.run_id: None for fence in leased[1:]}
    assert steps.steps == len(leased) and 1 <= steps.transactions <= len(leased)
    statuses = [backend.runs.run_get(fence.run_id).run.status for fence in leased]
    assert statuses == ["running", "succeeded", "succeeded", "succeeded"]


def test_a_command_that_ended_before_its_running_record_is_recorded_by_one_step(
        backend: Backend, leased: list[LeaseFence]) -> None:
    # execution/step_batch.py folds a running record still waiting for a write into the
    # ending: one step, one write of the Run and its Attempt, every event of both.
    a, b, c, _ = leased
    for fence in (a, b, c):
        backend.lifecycle.attempt_start(fence)
    backend.lifecycle.attempt_running(running(b, 4001))  # b's running record did land
    before = {fence.run_id: backend.runs.run_get(fence.run_id) for fence in (a, b, c)}
    ran = [RunStore.ran_step(running(fence, 4000 + n), AttemptFinishParams(
               fence=fence, outcome=SUCCEEDED), ran_for_ms=250) for n, fence in enumerate((a, b))]
    forged = replace(c, token="forged")
    ran.append(RunStore.ran_step(running(forged, 4002),
                                 AttemptFinishParams(fence=forged, outcome=SUCCEEDED),
                                 ran_for_ms=250))
    assert backend.lifecycle.attempt_steps(ran) == [StepOutcome.APPLIED, StepOutcome.APPLIED,
                                                   StepOutcome.REFUSED]
    landed = backend.runs.run_get(a.run_id)
    assert (landed.run.status, landed.attempts[0].status, landed.attempts[0].pid) == (
        "succeeded", "succeeded", 4000)
    assert landed.run.finished_at_ms is not None
    assert landed.run.started_at_ms == landed.run.finished_at_ms - 250  # as long as it ran
    assert events(landed) == [*events(before[a.run_id]), "attempt.running", "run.running",
                              "attempt.succeeded", "run.succeeded"]
    assert landed.run.version == before[a.run_id].run.version + 1  # one write of the Run
    # the running record had landed: the step only ends it
    assert events(backend.runs.run_get(b.run_id)) == [*events(before[b.run_id]),
                                                      "attempt.succeeded", "run.succeeded"]
    # a fence that fails: its refusal, nothing else
    refused = backend.runs.run_get(c.run_id)
    assert refused.attempts[0].status == "starting"
    assert events(refused) == [*events(before[c.run_id]), "attempt.late_callback_ignored"]
    # sent again after a lost reply: already done, nothing written twice
    assert backend.lifecycle.attempt_steps(ran[:2]) == [StepOutcome.ALREADY_DONE] * 2
    assert backend.runs.run_get(a.run_id) == landed
