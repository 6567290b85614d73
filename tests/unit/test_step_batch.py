"""The executor's group commit of fenced steps (execution/step_batch.py), against a store
that records the batches it is given: steps that wait while a write is in progress go
together in the next, but never two steps of one Run."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import pytest

from qinglong.domain.lifecycle import LeaseFence
from qinglong.errors import ConnectionLost
from qinglong.execution.step_batch import Pending, StepBatch
from qinglong.storage.runs.lifecycle import FencedStep, StepOutcome

WAIT_S = 10.0


def step(run_id: str, attempt_id: str) -> FencedStep:
    fence = LeaseFence(run_id=run_id, attempt_id=attempt_id, generation=1, token="t")
    return FencedStep(fence=fence, write="finish", plan=lambda *_: None)  # type: ignore[arg-type,return-value]


class Recorder:
    """Holds the first write until told to go, so that others queue up behind it."""

    def __init__(self, fail_second: bool = False, later_writes_s: float = 0.0) -> None:
        self.batches: list[list[str]] = []
        self.go = threading.Event()
        self.fail_second = fail_second
        self.later_writes_s = later_writes_s  # how long each write after the first takes

    def attempt_steps(self, steps: Sequence[FencedStep]) -> list[StepOutcome]:
        self.batches.append([s.fence.attempt_id for s in steps])
        if len(self.batches) == 1:
            assert self.go.wait(WAIT_S)
        else:
            threading.Event().wait(self.later_writes_s)
        if self.fail_second and len(self.batches) == 2:
            raise ConnectionLost("the write failed as a whole")
        return [StepOutcome.APPLIED] * len(steps)


def until(batch: StepBatch, holds: Callable[[], bool]) -> None:
    """Wait until ``holds`` (read under the batch's lock) is true."""
    while True:
        with batch._lock:
            if holds():
                return
        threading.Event().wait(0.001)


def queue_behind_first(batch: StepBatch, first: FencedStep, others: list[FencedStep]
                       ) -> dict[str, BaseException | None]:
    heard: dict[str, BaseException | None] = {}

    def write(s: FencedStep) -> None:
        try:
            batch.write(s)
            heard[s.fence.attempt_id] = None
        except BaseException as exc:
            heard[s.fence.attempt_id] = exc

    threads = [threading.Thread(target=write, args=(first,))]
    threads[0].start()
    store = batch.store
    assert isinstance(store, Recorder)
    while not store.batches:  # the first write is in progress
        threading.Event().wait(0.001)
    for other in others:
        thread = threading.Thread(target=write, args=(other,))
        thread.start()
        threads.append(thread)
    until(batch, lambda: len(batch._waiting) >= len(others))  # every other step queued
    store.go.set()
    for thread in threads:
        thread.join(WAIT_S)
    return heard


def test_steps_queued_during_a_write_share_the_next_but_one_run_never_twice() -> None:
    recorder = Recorder()
    batch = StepBatch(recorder)  # type: ignore[arg-type]
    run_of = {"a1": "r1", "a2": "r2", "a3": "r2", "a4": "r3"}  # a2 and a3: one Run
    heard = queue_behind_first(batch, step("r1", "a1"),
                               [step(run_of[a], a) for a in ("a2", "a3", "a4")])
    assert heard == {"a1": None, "a2": None, "a3": None, "a4": None}
    assert recorder.batches[0] == ["a1"]
    assert len(recorder.batches) == 3  # the three queued steps took two transactions
    for written in recorder.batches:
        assert len({run_of[a] for a in written}) == len(written)  # one step per Run
    assert sorted(a for written in recorder.batches for a in written) == ["a1", "a2", "a3", "a4"]
    assert (batch.transactions, batch.steps) == (3, 4)


def test_a_write_that_fails_as_a_whole_fails_every_step_in_it() -> None:
    recorder = Recorder(fail_second=True)
    batch = StepBatch(recorder)  # type: ignore[arg-type]
    heard = queue_behind_first(batch, step("r1", "a1"), [step("r2", "a2"), step("r3", "a3")])
    assert heard["a1"] is None
    assert isinstance(heard["a2"], ConnectionLost) and isinstance(heard["a3"], ConnectionLost)
    assert recorder.batches[1] in (["a2", "a3"], ["a3", "a2"])


def _started_write(batch: StepBatch, first: FencedStep) -> threading.Thread:
    """A write of ``first`` that the recorder holds until ``go`` (in progress on return)."""
    thread = threading.Thread(target=batch.write, args=(first,))
    thread.start()
    store = batch.store
    assert isinstance(store, Recorder)
    while not store.batches:
        threading.Event().wait(0.001)
    return thread


def test_a_step_submitted_while_idle_is_written_before_submit_returns() -> None:
    recorder = Recorder()
    recorder.go.set()
    batch = StepBatch(recorder)  # type: ignore[arg-type]
    pending = batch.submit(step("r1", "a1"))
    assert (pending.done, pending.error, pending.detached) == (True, None, False)
    assert recorder.batches == [["a1"]]


def test_a_running_record_not_yet_taken_is_folded_into_the_ending() -> None:
    recorder = Recorder()
    batch = StepBatch(recorder)  # type: ignore[arg-type]
    writer = _started_write(batch, step("r1", "a1"))
    running = batch.submit(step("r2", "a2"))  # a write is in progress: queued, not waited for
    assert (running.done, running.detached, running.taken) == (False, True, False)
    folded: list[bool] = []
    ender = threading.Thread(target=lambda: folded.append(
        batch.fold(running, step("r2", "a2-folded"))))
    ender.start()  # the command ended while the first write is still in progress
    until(batch, lambda: not running.detached)  # the ending replaced the running record
    recorder.go.set()
    writer.join(WAIT_S)
    ender.join(WAIT_S)
    assert folded == [True]  # replaced while still queued, then written
    assert recorder.batches == [["a1"], ["a2-folded"]]  # the running record alone never went
    assert running.done and running.error is None


def _running_written_by_the_writer(recorder: Recorder) -> tuple[StepBatch, Pending]:
    """A running record submitted during another job's write, which that job then writes
    (it drains the detached steps before returning)."""
    batch = StepBatch(recorder)  # type: ignore[arg-type]
    writer = _started_write(batch, step("r1", "a1"))
    running = batch.submit(step("r2", "a2"))
    recorder.go.set()
    writer.join(WAIT_S)
    assert recorder.batches == [["a1"], ["a2"]]
    assert running.done and running.taken
    return batch, running


def test_a_running_record_already_in_a_write_is_waited_for_not_folded() -> None:
    recorder = Recorder()
    batch, running = _running_written_by_the_writer(recorder)
    assert batch.fold(running, step("r2", "a2-folded")) is False
    assert recorder.batches == [["a1"], ["a2"]]  # the caller writes the ending next


def test_a_failed_running_record_is_heard_when_the_ending_is_folded() -> None:
    batch, running = _running_written_by_the_writer(Recorder(fail_second=True))
    with pytest.raises(ConnectionLost):
        batch.fold(running, step("r2", "a2-folded"))
    assert batch.settle(running) is running.error


def test_the_leading_job_writes_every_detached_step_left_after_its_own() -> None:
    recorder = Recorder()
    batch = StepBatch(recorder, limit=1)  # type: ignore[arg-type]
    writer = _started_write(batch, step("r1", "a1"))
    detached = [batch.submit(step(f"r{n}", f"a{n}")) for n in range(2, 7)]
    recorder.go.set()
    writer.join(WAIT_S)
    # nobody else waited to write: the job that led wrote them all, oldest first
    assert recorder.batches == [["a1"], ["a2"], ["a3"], ["a4"], ["a5"], ["a6"]]
    assert all(p.done and p.error is None for p in detached)
    assert batch.settle(detached[4]) is None
    assert len(recorder.batches) == 6  # settling a written step writes nothing


def test_a_job_waiting_to_write_stops_the_drain_and_takes_the_detached_steps_along() -> None:
    recorder = Recorder()
    batch = StepBatch(recorder)  # type: ignore[arg-type]
    writer = _started_write(batch, step("r1", "a1"))
    running = batch.submit(step("r2", "a2"))
    ender = threading.Thread(target=batch.write, args=(step("r3", "a3"),))
    ender.start()  # another job's ending waits for the write in progress
    with batch._lock:  # (the test waits until it is queued)
        while len(batch._waiting) < 2:
            batch._written.wait(0.01)
    recorder.go.set()
    writer.join(WAIT_S)
    ender.join(WAIT_S)
    # the first job stopped after its own write; the waiting job's write took both
    assert recorder.batches == [["a1"], ["a2", "a3"]]
    assert running.done and running.error is None


def test_a_withdrawn_step_is_never_written() -> None:
    recorder = Recorder()
    batch = StepBatch(recorder)  # type: ignore[arg-type]
    writer = _started_write(batch, step("r1", "a1"))
    running = batch.submit(step("r2", "a2"))
    assert batch.withdraw(running) is True
    assert batch.withdraw(running) is False  # once
    recorder.go.set()
    writer.join(WAIT_S)
    assert recorder.batches == [["a1"]]


def test_a_write_wakes_the_jobs_it_wrote_and_the_next_leader_only() -> None:
    """Five steps of one Run queue behind a write: each goes in a write of its own, and
    each job sleeps once (woken when it is first in line, then leads), instead of being
    woken by every write that ends before its own."""
    slept: dict[str, int] = {}
    sleep = StepBatch._sleep

    def counting_sleep(self: StepBatch, mine: Pending) -> None:
        slept[mine.step.fence.attempt_id] = slept.get(mine.step.fence.attempt_id, 0) + 1
        sleep(self, mine)

    recorder = Recorder(later_writes_s=0.02)  # time for woken jobs to find a write going on
    batch = StepBatch(recorder)  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StepBatch, "_sleep", counting_sleep)
        queued = [f"a{n}" for n in range(2, 7)]
        heard = queue_behind_first(batch, step("r1", "a1"), [step("r2", a) for a in queued])
    assert heard == {a: None for a in ["a1", *queued]}
    assert recorder.batches[0] == ["a1"] and len(recorder.batches) == 6
    assert slept == {a: 1 for a in queued}
