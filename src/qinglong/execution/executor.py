"""The executor: takes leases on queued Runs and runs their commands, bounded in number.

Every step is recorded, under the Attempt's lease, before it takes effect: ``starting`` is
durable before the child is spawned, so a crash at any point leaves an Attempt that a
reconciler settles visibly (an unstarted lease is offered again; a started Attempt is
``lost``) -- a Run is never silently reset or run twice by the same Attempt.

Leases are renewed together, one store call for all of them. A lease the store says is
gone (or one that could not be renewed before it would expire) stops its command at once:
the process group is killed (self-fencing), because someone else may own the Run now.
A Run someone asked to cancel is stopped the same way and recorded ``cancelled``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from qinglong.clock import Clock, pause
from qinglong.diagnostics import Diagnostic, DiagnosticSink, diagnostic_from, emit
from qinglong.domain.lifecycle import Outcome, check_attempt_lease
from qinglong.domain.runs import AttemptStatus
from qinglong.errors import DatabaseCorrupt, InvalidConfig, LeaseLost, StorageError
from qinglong.execution import command
from qinglong.execution.logs import DEFAULT_LOG_BYTES, MAX_LOG_BYTES, MIN_LOG_BYTES
from qinglong.execution.logship import LogRefusals, LogShipper, noting_lost_output
from qinglong.execution.processes import kill_group, make_handle, settle_orphan
from qinglong.execution.reaper import GroupReaper
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.runs.params import (
    AttemptFinishParams,
    AttemptLease,
    AttemptRunningParams,
    LeaseAcquireParams,
    LeaseReleaseParams,
    LeaseRenewParams,
    LeaseRescueParams,
    RescuedAttempt,
)

MIN_CONCURRENCY = 1
MAX_CONCURRENCY = 256
DEFAULT_LEASE_MS = 60_000
SELF_FENCE_MARGIN = 0.2  # stop commands when this fraction of a lease is left unrenewed
PERSIST_RETRY_S = 0.5  # pause between tries to record an ending through a storage fault


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    run_id: str
    trigger_id: str | None
    scheduled_for_ms: int | None
    status: str
    exit_code: int | None
    duration_ms: int
    error_summary: str | None


@dataclass(slots=True)
class _Job:
    lease: AttemptLease
    process: subprocess.Popen[bytes] | None = None
    started: bool = False
    stop_reason: str | None = None  # shutdown | lease_lost | cancel
    # Nothing left to stop: the command has exited and been reaped, or the job is done with
    # it (never started, or given back) and is recording how it ended -- a renewal that finds
    # the lease gone then sees that ending, not a lost lease.
    exited: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def stop(self, reason: str, sig: signal.Signals = signal.SIGTERM) -> None:
        with self.lock:
            if self.exited:
                return
            if self.stop_reason is None:
                self.stop_reason = reason
            process = self.process
        if process is not None:
            kill_group(process.pid, sig)
            if sig is not signal.SIGKILL:  # a command that ignores SIGTERM is killed after a grace
                timer = threading.Timer(command.KILL_GRACE_S, self._kill_if_running, [process])
                timer.daemon = True
                timer.start()

    def _kill_if_running(self, process: subprocess.Popen[bytes]) -> None:
        with self.lock:
            if self.exited:
                return
        kill_group(process.pid, signal.SIGKILL)


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
    ) -> None:
        """``requeue_on_drain``: a command still running when a drain times out is recorded as
        interrupted and its Run queued again (no attempt spent), instead of cancelled.
        ``log_store``: output is shipped there while the command runs (cluster workers), and
        the local file under ``log_dir`` is only a spool, removed when the Attempt ends.
        ``renew_every_s``: renew more often than three times a lease, so a cancel request
        (carried by every renewal reply) is seen sooner where no notification brings it."""
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
        self._log_dir = log_dir.absolute()
        self._concurrency = concurrency
        self._lease_ms = lease_ms
        self._log_max_bytes = log_max_bytes
        self._poll_interval_s = poll_interval_s
        self._diagnostics = diagnostics
        self._on_finished = on_finished
        self._inherited = dict(os.environ if inherited_env is None else inherited_env)
        self._jobs: dict[str, _Job] = {}
        self._jobs_lock = threading.Lock()
        self._idle = threading.Condition(self._jobs_lock)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._finished = threading.Event()  # stopped and drained: renewals end
        self._threads: list[threading.Thread] = []
        self._workdir = os.getcwd()
        self._renewed_at = clock.monotonic()
        self._requeue_on_drain = requeue_on_drain
        self._log_store = log_store
        self._renewals_failing = False
        self._dispatch_failing = False
        self.log_refusals = LogRefusals(clock)  # a log store refusing output: no new work
        self._renew_every_s = min(lease_ms / 3000, renew_every_s or lease_ms / 3000)
        self._reaper = GroupReaper()
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
        for target, name in ((self._dispatch_loop, "ql-executor"), (self._renew_loop, "ql-lease"),
                             (self._watchdog_loop, "ql-lease-watchdog")):
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
        return not (self._renewals_failing or self._dispatch_failing
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
                if not (self._renewals_failing or self.log_refusals.active):
                    self._dispatch_once()
                self._dispatch_failing = False
            except Exception as exc:  # noqa: BLE001 - isolation boundary
                self._dispatch_failing = True
                emit(self._diagnostics, diagnostic_from("executor", exc))
            self._wake.wait(self._poll_interval_s)
            self._wake.clear()

    def _dispatch_once(self) -> None:
        while not self._stopping.is_set():
            free = self._concurrency - self.active()
            if free <= 0:
                return
            leases = self._store.lease_acquire(
                LeaseAcquireParams(owner=self._owner, lease_ms=self._lease_ms, limit=free))
            for lease in leases:
                self.started += 1
                job = _Job(lease=lease)
                with self._jobs_lock:
                    self._jobs[lease.fence.run_id] = job
                threading.Thread(target=self._run_job, args=(job,), name="ql-run",
                                 daemon=True).start()
            if len(leases) < free:
                return

    # -- leases -----------------------------------------------------------------------

    def _renew_loop(self) -> None:
        interval = self._renew_every_s  # at least three renewals per lease
        retry = min(interval, 1.0)  # after a failure, try again soon
        while not self._finished.wait(retry if self._renewals_failing else interval):
            try:
                self._renew_once()
                self._renewals_failing = False
            except Exception as exc:  # noqa: BLE001 - isolation boundary
                self._renewals_failing = True
                emit(self._diagnostics, diagnostic_from("executor", exc))

    def _watchdog_loop(self) -> None:
        """Self-fencing that no hung renewal can delay: once the leases may be about to run
        out unrenewed, every command is killed (someone else may own its Run soon)."""
        tick = min(0.5, self._lease_ms / 10_000)
        while not self._finished.wait(tick):
            self._self_fence_if_due()

    def _renew_once(self) -> None:
        with self._jobs_lock:
            jobs = {job.lease.fence.attempt_id: job for job in self._jobs.values()}
        if not jobs:
            self._renewed_at = self._clock.monotonic()
            return
        sent_at = self._clock.monotonic()
        renewal = self._store.lease_renew(LeaseRenewParams(
            owner=self._owner, lease_ms=self._lease_ms,
            fences=tuple(job.lease.fence for job in jobs.values())))
        self._renewed_at = sent_at
        for fence in renewal.lost:
            job = jobs[fence.attempt_id]
            if job.exited:  # its ending was being recorded: the lease ended with it
                continue
            if job.stop_reason is None:
                emit(self._diagnostics, Diagnostic(
                    source="executor", code=LeaseLost.code,
                    message=f"run {fence.run_id}: lease lost; stopping its command"))
            job.stop("lease_lost", signal.SIGKILL)
        for fence in renewal.cancel_requested:
            jobs[fence.attempt_id].stop("cancel")

    def _self_fence_if_due(self) -> None:
        """Leases not renewed for most of their length: stop every command before they can
        run out (the database would hand the Runs to someone else)."""
        unrenewed = self._clock.monotonic() - self._renewed_at
        if unrenewed < self._lease_ms / 1000 * (1 - SELF_FENCE_MARGIN):
            return
        with self._jobs_lock:
            jobs = [job for job in self._jobs.values() if job.stop_reason != "lease_lost"]
        for job in jobs:
            emit(self._diagnostics, Diagnostic(
                source="executor", code=LeaseLost.code,
                message=f"run {job.lease.fence.run_id}: leases not renewed for {unrenewed:.1f} s; "
                        "stopping its command before the lease runs out"))
            job.stop("lease_lost", signal.SIGKILL)

    # -- one job ----------------------------------------------------------------------

    def _run_job(self, job: _Job) -> None:
        started = self._clock.monotonic()
        lease = job.lease
        outcome: Outcome | None = None
        try:
            outcome = self._execute(job)
            with job.lock:
                job.exited = True  # whatever it started has ended; only the record is left
            if outcome is not None and job.stop_reason == "shutdown" and self._requeue_on_drain:
                self._persist(job, lambda: self._store.attempt_interrupt(lease.fence, "drain"))
                outcome = dataclasses.replace(outcome, error_code="INTERRUPTED",
                                              error_summary="queued again after a drain")
            elif outcome is not None:
                finished = AttemptFinishParams(fence=lease.fence, outcome=outcome)
                self._persist(job, lambda: self._store.attempt_finish(finished))
        except LeaseLost as exc:
            if job.process is not None:
                kill_group(job.process.pid, signal.SIGKILL)
            emit(self._diagnostics, diagnostic_from("executor", exc))
            outcome = None
        except Exception as exc:  # noqa: BLE001 - isolation boundary
            emit(self._diagnostics, diagnostic_from("executor", exc))
            outcome = None
        finally:
            with self._idle:
                self._jobs.pop(lease.fence.run_id, None)
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

    def _persist(self, job: _Job, write: Callable[[], None]) -> None:
        """Record a step (start, running, ending) despite a passing storage fault: each step
        is idempotent under its fence, and the job stays listed (so its lease is still
        renewed) while it is retried; after a lease length of failures it is left to the
        reconciler."""
        deadline = self._clock.monotonic() + self._lease_ms / 1000
        while True:
            try:
                write()
                return
            except (LeaseLost, DatabaseCorrupt):
                raise
            except StorageError as exc:
                if job.stop_reason == "lease_lost" or self._clock.monotonic() >= deadline:
                    raise
                emit(self._diagnostics, diagnostic_from("executor", exc))
                pause(PERSIST_RETRY_S)

    def _execute(self, job: _Job) -> Outcome | None:
        """Run the job's command; the outcome to record, or None when it was given back."""
        lease = job.lease
        if self._stopping.is_set():
            self._store.lease_release(LeaseReleaseParams(fence=lease.fence, reason="drain"))
            return None
        # Durable before the spawn; a passing storage fault (a pool briefly exhausted by a
        # burst of starts) is retried within the lease, never left to the reconciler.
        self._persist(job, lambda: self._store.attempt_start(lease.fence))
        if lease.execution is None:
            return command.failed("EXECUTION_REVISION_INVALID", lease.problem or "invalid plan")
        log = command.prepare_log(self._log_dir, lease)
        if isinstance(log, Outcome):
            return log
        shipper = None
        if self._log_store is not None:
            shipper = LogShipper(self._log_store, lease.fence, self._log_max_bytes, self._clock,
                                 diagnostics=self._diagnostics,
                                 on_failure=self.log_refusals.refused)
            shipper.start()
        if shipper is None:
            return self._run_command(job, log, None)
        try:
            outcome = self._run_command(job, log, shipper)
            if outcome is not None and outcome.log_path is not None:
                # the command never started: ship the note the spool file holds
                with contextlib.suppress(OSError):
                    shipper.feed(log.read_bytes())
                outcome = dataclasses.replace(outcome, log_path=None)
        finally:
            shipper.close()
            with contextlib.suppress(OSError):
                log.unlink()
        return noting_lost_output(outcome, shipper, lease.fence.run_id, self._diagnostics)

    def _run_command(self, job: _Job, log: Path, shipper: LogShipper | None) -> Outcome | None:
        lease = job.lease
        assert lease.execution is not None
        if job.stop_reason == "lease_lost":  # lost before it began: never start it
            raise LeaseLost(f"run {lease.fence.run_id}: the lease was lost before the command "
                            "started")
        spawned = command.spawn(lease, log, default_cwd=self._workdir, inherited=self._inherited,
                                log_max_bytes=self._log_max_bytes,
                                tap=shipper.feed if shipper is not None else None)
        if isinstance(spawned, Outcome):
            return spawned
        self._reaper.watch(spawned.process.pid)
        with job.lock:
            job.process = spawned.process
            pending = job.stop_reason
        if pending is not None:
            kill_group(spawned.process.pid, signal.SIGTERM)
        running = AttemptRunningParams(
            fence=lease.fence, pid=spawned.process.pid,
            executor_handle=make_handle(spawned.process.pid),
            log_path=None if shipper is not None else str(log))
        try:
            # retried like an ending: giving up here kills a command that already started
            self._persist(job, lambda: self._store.attempt_running(running))
        except BaseException:
            kill_group(spawned.process.pid, signal.SIGKILL)
            spawned.process.wait()
            command.collect(spawned)
            self._reaper.forget(spawned.process.pid)
            raise
        timeout_ms = lease.execution.plan.timeout_ms
        timed_out = False
        try:
            spawned.process.wait(timeout=timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            timed_out = True
            command.terminate(spawned.process)
        command.collect(spawned)
        with job.lock:
            job.exited = True
        self._reaper.forget(spawned.process.pid)
        if spawned.pump.error is not None:
            emit(self._diagnostics, Diagnostic(source="executor", code="QL_LOG_UNWRITABLE",
                                               message=f"run {lease.fence.run_id}: "
                                                       f"{spawned.pump.error}"))
        return self._outcome(job, spawned.process.returncode, timed_out, timeout_ms)

    @staticmethod
    def _outcome(job: _Job, code: int, timed_out: bool, timeout_ms: int) -> Outcome:
        if job.stop_reason == "lease_lost":
            raise LeaseLost(f"run {job.lease.fence.run_id}: the lease was lost while it ran")
        if job.stop_reason == "shutdown":
            return Outcome(status=AttemptStatus.CANCELLED, error_code="SHUTDOWN",
                           error_summary="stopped by executor shutdown", cancel_reason="shutdown")
        if job.stop_reason == "cancel":
            return Outcome(status=AttemptStatus.CANCELLED, error_code="CANCELLED",
                           error_summary="cancelled on request", cancel_reason="user")
        if timed_out:
            return Outcome(status=AttemptStatus.TIMED_OUT, error_code="TIMEOUT",
                           error_summary=f"killed after the {timeout_ms} ms timeout")
        return command.exit_outcome(code)
