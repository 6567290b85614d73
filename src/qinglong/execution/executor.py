"""The executor: takes leases on queued Runs and runs their commands, bounded in number.

Every step is recorded, under the Attempt's lease, before it takes effect: ``starting`` is
durable before the child is spawned, so a crash at any point leaves an Attempt that a
reconciler settles visibly (a started Attempt is ``lost``) -- a Run is never silently reset
or run twice by the same Attempt. Leases are taken only for free slots and each is handed to
a job at once, so they are granted ``starting`` (the start step in the lease's own write):
one write a Run fewer, for which a crash between a lease and its spawn (milliseconds) costs
the Attempt (``lost``, or retried as the task's policy says) instead of offering it again.

Leases are renewed together, one store call for all of them. A lease the store says is
gone (or one that could not be renewed before it would expire) stops its command at once:
the process group is killed (self-fencing), because someone else may own the Run now.
A Run someone asked to cancel is stopped the same way and recorded ``cancelled``.

This module dispatches (leases, threads, drain and stop); one job is run and recorded by
``execution/job_runner.py``, leases are renewed and self-fenced by
``execution/lease_keeper.py``, and a job's state is in ``execution/jobs.py``.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from qinglong.clock import Clock
from qinglong.diagnostics import DiagnosticSink, diagnostic_from, emit
from qinglong.domain.lifecycle import check_attempt_lease
from qinglong.domain.placement import label_tokens
from qinglong.errors import InvalidConfig
from qinglong.execution import command
from qinglong.execution.deps import Lookup
from qinglong.execution.identity import Identity
from qinglong.execution.job_runner import JobRunner, RunnerSettings
from qinglong.execution.jobs import Job, RunFinished
from qinglong.execution.lease_keeper import LeaseKeeper
from qinglong.execution.logs import DEFAULT_LOG_BYTES, MAX_LOG_BYTES, MIN_LOG_BYTES
from qinglong.execution.logship import LogRefusals
from qinglong.execution.processes import settle_orphan
from qinglong.execution.reaper import GroupReaper
from qinglong.execution.scripts import Fetch
from qinglong.execution.step_batch import StepBatch
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.runs.params import (
    LeaseAcquireParams,
    LeaseRescueParams,
    RescuedAttempt,
)

__all__ = ["DEFAULT_LEASE_MS", "MAX_CONCURRENCY", "MIN_CONCURRENCY", "Executor", "RunFinished"]

MIN_CONCURRENCY = 1
MAX_CONCURRENCY = 256
DEFAULT_LEASE_MS = 60_000
GATHER_S = 0.01  # with a backlog, how long a lone free slot waits for others (one lease)


class Executor:
    def __init__(
        self,
        store: RunStore,
        clock: Clock,
        *,
        owner: str,
        log_dir: Path,
        concurrency: int = 4,
        lease_ms: int = DEFAULT_LEASE_MS,
        log_max_bytes: int = DEFAULT_LOG_BYTES,
        poll_interval_s: float = 0.5,
        diagnostics: DiagnosticSink | None = None,
        on_finished: Callable[[RunFinished], None] | None = None,
        inherited_env: Mapping[str, str] | None = None,
        requeue_on_drain: bool = False,
        log_store: LogStore | None = None,
        renew_every_s: float | None = None,
        lease_store: RunStore | None = None,
        labels: Mapping[str, str | None] | None = None,
        identity: Identity | None = None,
        scripts: Fetch | None = None,
        repos_url: str | None = None,
        deps: Lookup | None = None,
        deps_dir: Path | None = None,
    ) -> None:
        """``requeue_on_drain``: a command still running when a drain times out is recorded as
        interrupted and its Run queued again (no attempt spent), instead of cancelled.
        ``log_store``: output is shipped there while the command runs (cluster workers), and
        the local file under ``log_dir`` is only a spool, removed when the Attempt ends.
        ``labels``: what this executor offers (domain/placement.py); it leases only Runs whose
        task requires no label it lacks. ``identity``: the niceness and run-as user of every
        command (execution/identity.py). ``scripts``: the content of a script task by its
        digest (execution/scripts.py). ``repos_url``: the database a subscription's pull
        imports into (given only to the pull's command; docs/subscriptions.md). ``deps``: a
        project's dependency set, whose environments are cached in ``deps_dir``
        (docs/dependencies.md).
        ``renew_every_s``: renew more often than three times a lease, so a cancel request
        (carried by every renewal reply) is seen sooner where no notification brings it.
        ``lease_store``: renewals go through it (a connection of their own, which reconnects
        at each try) instead of ``store``, so they resume as soon as the database is back."""
        if not MIN_CONCURRENCY <= concurrency <= MAX_CONCURRENCY:
            raise InvalidConfig(
                "concurrency", f"must be between {MIN_CONCURRENCY} and {MAX_CONCURRENCY}"
            )
        if not MIN_LOG_BYTES <= log_max_bytes <= MAX_LOG_BYTES:
            raise InvalidConfig(
                "log-max-bytes", f"must be between {MIN_LOG_BYTES} and {MAX_LOG_BYTES} bytes"
            )
        check_attempt_lease(lease_ms)
        self._store = store
        self._clock = clock
        self._owner = owner
        self._label_tokens = tuple(label_tokens(labels or {}))
        self._concurrency = concurrency
        self._lease_ms = lease_ms
        self._poll_interval_s = poll_interval_s
        self._diagnostics = diagnostics
        self._on_finished = on_finished
        self._jobs: dict[str, Job] = {}
        self._jobs_lock = threading.Lock()
        self._idle = threading.Condition(self._jobs_lock)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._finished = threading.Event()  # stopped and drained: renewals end
        self._threads: list[threading.Thread] = []
        # Job threads are kept and reused (at most one per slot): a thread started per Run
        # cost more CPU than the rest of its supervision, and each new thread opened
        # connections of its own (SQLite keeps one per thread).
        self._handoff: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._runners = 0  # job threads started
        self._idle_runners = 0  # of which waiting for a job
        self._dispatch_failing = False
        self._backlog = False  # the last lease filled every free slot
        self.log_refusals = LogRefusals(clock)  # a log store refusing output: no new work
        self._reaper = GroupReaper()
        self._leases = LeaseKeeper(
            store=lease_store or store, clock=clock, owner=owner, lease_ms=lease_ms,
            every_s=min(lease_ms / 3000, renew_every_s or lease_ms / 3000),
            jobs=self._listed_jobs, finished=self._finished, diagnostics=diagnostics)
        self._runner = JobRunner(
            store=store, steps=StepBatch(store), clock=clock, settings=RunnerSettings(
                log_dir=log_dir.absolute(), log_max_bytes=log_max_bytes, lease_ms=lease_ms,
                workdir=os.getcwd(),
                inherited=dict(os.environ if inherited_env is None else inherited_env),
                requeue_on_drain=requeue_on_drain, log_store=log_store,
                identity=identity or Identity(), scripts=scripts, repos_url=repos_url,
                deps=deps, deps_dir=deps_dir),
            reaper=self._reaper, log_refusals=self.log_refusals, stopping=self._stopping,
            diagnostics=diagnostics)
        self.started = 0  # commands started (for metrics)

    @property
    def owner(self) -> str:
        return self._owner

    # -- lifecycle --------------------------------------------------------------------

    def recover(self) -> list[RescuedAttempt]:
        """After a restart of the only executor of a database (``ql serve``): kill what the
        previous process left running, then settle its Attempts (call before ``start``)."""
        notes: dict[str, Mapping[str, object]] = {}
        for active in self._store.attempt_list_active():
            notes[active.attempt_id] = {"process": settle_orphan(active.executor_handle)}
        return self._store.lease_rescue(LeaseRescueParams(ignore_expiry=True, notes=notes,
                                                          limit=256))

    def start(self) -> None:
        if self._threads:
            return
        self._reaper.start()
        for target, name in ((self._dispatch_loop, "ql-executor"),
                             (self._leases.renew_loop, "ql-lease"),
                             (self._leases.watchdog_loop, "ql-lease-watchdog")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def poke(self) -> None:
        """Something was admitted: look for queued Runs now."""
        self._wake.set()

    def active(self) -> int:
        with self._jobs_lock:
            return len(self._jobs)

    @property
    def healthy(self) -> bool:
        """False while the store refuses renewals or acquisitions, or refused output lately
        (LogRefusals); no new work is taken then."""
        return not (self._leases.failing or self._dispatch_failing
                    or self.log_refusals.active)

    def cancel(self, run_id: str) -> bool:
        """A cancel request arrived by notification: stop the Run's command if it runs here."""
        with self._jobs_lock:
            job = self._jobs.get(run_id)
        if job is None:
            return False
        job.stop("cancel")
        return True

    def fence(self, attempt_id: str) -> bool:
        """The reconciler declared this attempt lost: kill its command now if it runs here
        (a single-server profile, where the reconciler and this executor share a process)."""
        with self._jobs_lock:
            job = next((j for j in self._jobs.values()
                        if j.lease.fence.attempt_id == attempt_id), None)
        if job is None:
            return False
        job.stop("lease_lost", signal.SIGKILL)
        return True

    def kill_all(self) -> int:
        """A hard stop: kill every command now, record nothing (the reconciler settles them)."""
        with self._jobs_lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.stop("lease_lost", signal.SIGKILL)
        return len(jobs)

    def stop(self, drain_timeout_s: float) -> int:
        """Stop taking work; let running commands finish for ``drain_timeout_s``, then stop
        what is left: recorded cancelled (reason shutdown), or with ``requeue_on_drain``
        interrupted and queued again. Returns how many were stopped."""
        self._stopping.set()
        self._wake.set()
        for thread in self._threads[:1]:  # the dispatcher: nothing new is leased after this
            thread.join(5.0)
        self._wait_idle(drain_timeout_s)
        with self._jobs_lock:
            leftovers = list(self._jobs.values())
        for job in leftovers:
            job.stop("shutdown")
        self._wait_idle(command.KILL_GRACE_S)
        for job in leftovers:
            job.stop("shutdown", signal.SIGKILL)
        self._wait_idle(command.STRAGGLER_WAIT_S + 1.0)
        self._finished.set()
        self._end_runners()
        for thread in self._threads[1:]:
            thread.join(5.0)
        self._reaper.close()  # kills whatever a stuck stop left behind
        return len(leftovers)

    def _wait_idle(self, timeout_s: float) -> None:
        deadline = self._clock.monotonic() + timeout_s
        with self._idle:
            while self._jobs and self._clock.monotonic() < deadline:
                self._idle.wait(max(0.0, deadline - self._clock.monotonic()))

    # -- dispatch ---------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                # a store we cannot renew with, or that refuses output, gives no work
                if not (self._leases.failing or self.log_refusals.active):
                    self._dispatch_once()
                self._dispatch_failing = False
            except Exception as exc:  # noqa: BLE001 - isolation boundary
                self._dispatch_failing = True
                emit(self._diagnostics, diagnostic_from("executor", exc))
            self._wake.wait(self._poll_interval_s)
            self._wake.clear()

    def _dispatch_once(self) -> None:
        while not self._stopping.is_set():
            free = self._free_slots()
            if free <= 0:
                return
            leases = self._store.lease_acquire(
                LeaseAcquireParams(owner=self._owner, lease_ms=self._lease_ms, limit=free,
                                   label_tokens=self._label_tokens, start=True))
            self._backlog = len(leases) == free  # the queue may hold more
            for lease in leases:
                self.started += 1
                job = Job(lease=lease)
                with self._jobs_lock:
                    self._jobs[lease.fence.run_id] = job
                self._hand_off(job)
            if len(leases) < free:
                return

    def _free_slots(self) -> int:
        """Free slots to lease for now. While a backlog is queued, a lone free slot waits up
        to GATHER_S for others to free up, so one lease transaction takes several Runs (a
        slot freed with nothing queued is offered at once: a new Run waits for nothing)."""
        gather = max(1, self._concurrency // 2)
        deadline = self._clock.monotonic() + GATHER_S
        with self._idle:
            free = self._concurrency - len(self._jobs)
            while (self._backlog and 0 < free < gather and not self._stopping.is_set()
                   and (left := deadline - self._clock.monotonic()) > 0):
                self._idle.wait(left)
                free = self._concurrency - len(self._jobs)
        return free

    # -- job threads ------------------------------------------------------------------

    def _hand_off(self, job: Job) -> None:
        """Give the job to an idle job thread, or to a new one when none is idle."""
        with self._jobs_lock:
            start = self._idle_runners == 0
            if start:
                self._runners += 1
            else:
                self._idle_runners -= 1
        self._handoff.put(job)
        if start:
            threading.Thread(target=self._runner_loop, name="ql-run", daemon=True).start()

    def _runner_loop(self) -> None:
        while (job := self._handoff.get()) is not None:
            self._run_job(job)  # counts this thread idle when the job's slot is freed

    def _end_runners(self) -> None:
        with self._jobs_lock:
            count, self._runners, self._idle_runners = self._runners, 0, 0
        for _ in range(count):
            self._handoff.put(None)

    # -- one job ----------------------------------------------------------------------

    def _listed_jobs(self) -> list[Job]:
        with self._jobs_lock:
            return list(self._jobs.values())

    def _run_job(self, job: Job) -> None:
        started = self._clock.monotonic()
        lease = job.lease
        try:
            outcome = self._runner.run(job)
        finally:
            with self._idle:
                self._jobs.pop(lease.fence.run_id, None)
                self._idle_runners += 1  # a job leased for the freed slot waits for this one
                self._idle.notify_all()
            self._wake.set()
        if outcome is not None and self._on_finished is not None:
            try:
                self._on_finished(RunFinished(
                    run_id=lease.fence.run_id, trigger_id=lease.trigger_id,
                    scheduled_for_ms=lease.scheduled_for_ms, status=outcome.status.value,
                    exit_code=outcome.exit_code,
                    duration_ms=int((self._clock.monotonic() - started) * 1000),
                    error_summary=outcome.error_summary,
                ))
            except Exception as exc:  # noqa: BLE001 - isolation boundary
                emit(self._diagnostics, diagnostic_from("executor", exc))
