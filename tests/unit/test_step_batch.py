"""The executor's group commit of fenced steps (execution/step_batch.py), against a store
that records the batches it is given: steps that wait while a write is in progress go
together in the next, but never two steps of one Run."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from qinglong.domain.lifecycle import LeaseFence
from qinglong.errors import ConnectionLost
from qinglong.execution.step_batch import StepBatch
from qinglong.storage.runs.lifecycle import FencedStep, StepOutcome

WAIT_S = 10.0


def step(run_id: str, attempt_id: str) -> FencedStep:
    fence = LeaseFence(run_id=run_id, attempt_id=attempt_id, generation=1, token="t")
    return FencedStep(fence=fence, write="finish", plan=lambda *_: None)  # type: ignore[arg-type,return-value]


class Recorder:
    """Holds the first write until told to go, so that others queue up behind it."""

    def __init__(self, fail_second: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.go = threading.Event()
        self.fail_second = fail_second

    def attempt_steps(self, steps: Sequence[FencedStep]) -> list[StepOutcome]:
        self.batches.append([s.fence.attempt_id for s in steps])
        if len(self.batches) == 1:
            assert self.go.wait(WAIT_S)
        if self.fail_second and len(self.batches) == 2:
            raise ConnectionLost("the write failed as a whole")
        return [StepOutcome.APPLIED] * len(steps)


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
    with batch._lock:  # (the test waits until every other step is queued)
        while len(batch._waiting) < len(others):
            batch._written.wait(0.01)
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
