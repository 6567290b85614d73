"""Group commit of an executor's fenced steps.

Every job of an executor records its steps (``starting`` before the spawn, ``running`` after
it, the ending) under its own lease fence and waits until the record is durable. Jobs that
record at the same moment share one transaction: the first job to find no write in
progress writes every step waiting then (`RunStore.attempt_steps`, where each step still
checks its own fence against its own rows) while the others wait for that commit; the
next waiting job writes whatever arrived meanwhile. Nothing waits for a batch to fill, so
a lone step is written at once, and under load a transaction carries as many steps as
arrived during the one before it.

A write that fails as a whole (a storage fault, a COMMIT whose outcome is unknown) fails
every step in it, and each job retries its own (`JobRunner.persist`): the steps are
idempotent under their fences, so a step that did land is accepted again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from qinglong.errors import QinglongError
from qinglong.storage.runs import STEP_ACTIONS, RunStore
from qinglong.storage.runs.lifecycle import FencedStep, StepOutcome, refused

MAX_BATCH = 64  # steps per transaction


@dataclass(eq=False, slots=True)
class _Waiting:
    step: FencedStep
    done: bool = False
    error: BaseException | None = None


@dataclass(eq=False)
class StepBatch:
    store: RunStore
    limit: int = MAX_BATCH
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _written: threading.Condition = field(init=False)
    _waiting: list[_Waiting] = field(default_factory=list, init=False)
    _writing: bool = field(default=False, init=False)
    transactions: int = field(default=0, init=False)  # (for tests and diagnostics)
    steps: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._written = threading.Condition(self._lock)

    def write(self, step: FencedStep) -> None:
        """Record ``step`` durably, together with the steps other jobs record meanwhile.
        Raises LeaseLost when its fence no longer holds (the refusal is recorded), the
        step's own error when it may not be taken, or the error of the whole write."""
        mine = _Waiting(step)
        with self._lock:
            self._waiting.append(mine)
            while not mine.done:
                if self._writing:
                    self._written.wait()
                    continue
                batch = self._take()
                self._writing = True
                self._lock.release()
                try:
                    self._write(batch)
                finally:
                    self._lock.acquire()
                    self._writing = False
                    self._written.notify_all()
        if mine.error is not None:
            raise mine.error

    def _take(self) -> list[_Waiting]:
        """The waiting steps to write now: oldest first, one per Run (a second step of the
        same Run -- a late write of an Attempt whose lease this worker lost, beside its new
        Attempt's -- waits for the next transaction), at most ``limit``."""
        batch: list[_Waiting] = []
        runs: set[str] = set()
        for waiting in self._waiting:
            if len(batch) >= self.limit:
                break
            if waiting.step.fence.run_id not in runs:
                runs.add(waiting.step.fence.run_id)
                batch.append(waiting)
        taken = set(map(id, batch))
        self._waiting = [w for w in self._waiting if id(w) not in taken]
        return batch

    def _write(self, batch: list[_Waiting]) -> None:
        try:
            outcomes = self.store.attempt_steps([waiting.step for waiting in batch])
        except BaseException as exc:
            for waiting in batch:
                waiting.error, waiting.done = exc, True
            if not isinstance(exc, Exception):
                raise
            return
        self.transactions += 1
        self.steps += len(batch)
        for waiting, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, QinglongError):
                waiting.error = outcome
            elif outcome is StepOutcome.REFUSED:
                step = waiting.step
                waiting.error = refused(STEP_ACTIONS[step.write], step.fence)
            waiting.done = True
