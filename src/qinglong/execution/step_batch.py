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

The running record is submitted without waiting when a write is in progress (`submit`): the
job waits for its command meanwhile, and the step goes into the next write like any other.
A command that ends before that write takes its running record (a short command, under
load) is recorded by one step instead of two (`fold`: running and the ending together, one
write of its Run and Attempt). Until the running record is durable the Attempt reads
``starting``, which the reconciler already treats as a command that may have started.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from qinglong.errors import QinglongError
from qinglong.storage.runs import STEP_ACTIONS, RunStore
from qinglong.storage.runs.lifecycle import FencedStep, StepOutcome, refused

MAX_BATCH = 64  # steps per transaction


@dataclass(eq=False, slots=True)
class Pending:
    """A step waiting to be written, in a write, or written (``done``, with its ``error``)."""

    step: FencedStep
    done: bool = False
    error: BaseException | None = None
    detached: bool = False  # submitted with nobody waiting for it (its job waits for a command)
    taken: bool = False  # in a write, or written
    # held while its job sleeps until the step is written or it is its turn to lead; released
    # (under the batch's lock) to wake that job alone
    wakeup: threading.Lock | None = None


@dataclass(eq=False)
class StepBatch:
    store: RunStore
    limit: int = MAX_BATCH
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _waiting: list[Pending] = field(default_factory=list, init=False)
    _writing: bool = field(default=False, init=False)
    transactions: int = field(default=0, init=False)  # (for tests and diagnostics)
    steps: int = field(default=0, init=False)

    def write(self, step: FencedStep) -> None:
        """Record ``step`` durably, together with the steps other jobs record meanwhile.
        Raises LeaseLost when its fence no longer holds (the refusal is recorded), the
        step's own error when it may not be taken, or the error of the whole write."""
        mine = Pending(step)
        with self._lock:
            self._waiting.append(mine)
            self._lead_until(mine)
        if mine.error is not None:
            raise mine.error

    def submit(self, step: FencedStep) -> Pending:
        """Queue ``step`` without waiting for a write in progress: it goes into the next one
        (written by whichever job leads then). With no write in progress it is written at
        once, as by `write`. Its outcome is read from the answer (``done``, ``error``), or
        by `fold` / `settle`, which wait for it."""
        mine = Pending(step)
        with self._lock:
            self._waiting.append(mine)
            if self._writing:
                mine.detached = True
            else:
                self._lead_until(mine)
        return mine

    def fold(self, pending: Pending, folded: FencedStep) -> bool:
        """``folded`` (``pending``'s step and the next one as one write) in place of
        ``pending`` when no write has taken that yet: written, True. Otherwise waits for
        ``pending``'s write: False, the next step is still to be written. Raises the error of
        whichever step was written."""
        with self._lock:
            replaced = not pending.taken
            if replaced:
                pending.step = folded
        error = self.settle(pending)
        if error is not None:
            raise error
        return replaced

    def settle(self, pending: Pending) -> BaseException | None:
        """Wait until ``pending`` is written (leading a write if need be); its error."""
        with self._lock:
            pending.detached = False
            self._lead_until(pending)
        return pending.error

    def withdraw(self, pending: Pending) -> bool:
        """Take ``pending`` out of the queue if no write has taken it yet (True)."""
        with self._lock:
            if pending.taken or pending not in self._waiting:
                return False
            self._waiting.remove(pending)
            pending.done = True
            return True

    def _lead_until(self, mine: Pending) -> None:
        """(Holding the lock.) Write, or wait for others' writes, until ``mine`` is written;
        then, while only detached steps wait (nobody else would lead), write those too. A
        step is detached only when a write is in progress, so every one is written by the
        job that led that write or by a later one. The drain ends: a job detaches at most one
        step per command (its running record), and a waiting step of any other kind stops
        the drain (its job leads), so it writes at most one step per command in flight."""
        while not mine.done:
            if self._writing:
                self._sleep(mine)
                continue
            self._write_next()
        while (not self._writing and self._waiting
               and all(waiting.detached for waiting in self._waiting)):
            self._write_next()

    def _sleep(self, mine: Pending) -> None:
        """(Holding the lock.) Sleep until a write ends that wrote ``mine`` or leaves it
        first in line to lead. Only those jobs are woken: waking every waiting job at the
        end of each write cost each of them a wakeup and a turn at the lock and the
        interpreter lock per write, most of a worker's CPU under load."""
        wakeup = threading.Lock()
        wakeup.acquire()
        mine.wakeup = wakeup
        self._lock.release()
        try:
            wakeup.acquire()
        finally:
            self._lock.acquire()
            mine.wakeup = None

    @staticmethod
    def _wake(pending: Pending) -> None:
        """(Holding the lock.) Wake ``pending``'s job if it sleeps."""
        wakeup, pending.wakeup = pending.wakeup, None
        if wakeup is not None:
            wakeup.release()

    def _write_next(self) -> None:
        batch = self._take()
        self._writing = True
        self._lock.release()
        try:
            self._write(batch)
        finally:
            self._lock.acquire()
            self._writing = False
            for written in batch:
                self._wake(written)
            # the next write is led by the oldest job still waiting (if it sleeps; a job
            # that is awake leads or sleeps by itself)
            for waiting in self._waiting:
                if waiting.wakeup is not None:
                    self._wake(waiting)
                    break

    def _take(self) -> list[Pending]:
        """The waiting steps to write now: oldest first, one per Run (a second step of the
        same Run -- a late write of an Attempt whose lease this worker lost, beside its new
        Attempt's -- waits for the next transaction), at most ``limit``."""
        batch: list[Pending] = []
        runs: set[str] = set()
        for waiting in self._waiting:
            if len(batch) >= self.limit:
                break
            if waiting.step.fence.run_id not in runs:
                runs.add(waiting.step.fence.run_id)
                batch.append(waiting)
        taken = set(map(id, batch))
        self._waiting = [w for w in self._waiting if id(w) not in taken]
        for waiting in batch:
            waiting.taken = True
        return batch

    def _write(self, batch: list[Pending]) -> None:
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
