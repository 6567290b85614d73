"""Running one leased job: spawn its command and supervise it to its end, recording every
step under the Attempt's lease before it takes effect.

``starting`` is durable before the child is spawned, so a crash at any point leaves an
Attempt that a reconciler settles visibly (an unstarted lease is offered again; a started
Attempt is ``lost``). The executor's leases are granted ``starting`` (the start step written
with the lease, one write a Run fewer), so this module writes the start step only for a
lease taken without it. ``running`` follows the spawn: written at once when no other write is
in progress, else in the next write while the job already waits for its command, and folded
into the ending when the command ends first (execution/step_batch.py). Each record is
retried through a passing storage fault within a lease length (`JobRunner.persist`). Output goes to a local log file,
or, with a log store (cluster workers), is shipped there while the command runs and the
local file is only a spool.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from qinglong.clock import Clock, pause
from qinglong.diagnostics import Diagnostic, DiagnosticSink, diagnostic_from, emit
from qinglong.domain.lifecycle import Outcome
from qinglong.domain.parameters import substitute
from qinglong.domain.task import DepsInstallCommand, RepoPullCommand, ScriptCommand
from qinglong.errors import DatabaseCorrupt, LeaseLost, StorageError
from qinglong.execution import command, deps, scripts
from qinglong.execution.identity import Identity
from qinglong.execution.jobs import Job, job_outcome
from qinglong.execution.logship import LogRefusals, LogShipper, noting_lost_output
from qinglong.execution.processes import kill_group, make_handle
from qinglong.execution.reaper import GroupReaper
from qinglong.execution.step_batch import StepBatch
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.runs.params import (
    AttemptFinishParams,
    AttemptRunningParams,
    LeaseReleaseParams,
)

PERSIST_RETRY_S = 0.5  # pause between tries to record an ending through a storage fault


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunnerSettings:
    """What every job of one executor runs with."""

    log_dir: Path
    log_max_bytes: int
    lease_ms: int
    workdir: str  # the working directory of a command whose task names none
    inherited: Mapping[str, str]  # the environment commands start from
    requeue_on_drain: bool
    log_store: LogStore | None
    identity: Identity = dataclasses.field(default_factory=Identity)  # niceness, run-as user
    scripts: scripts.Fetch | None = None  # a script's content by its digest (docs/scripts.md)
    repos_url: str | None = None  # the database a subscription's pull imports into
    deps: deps.Lookup | None = None  # a project's dependency set (docs/dependencies.md)
    deps_dir: Path | None = None  # where this executor caches their environments


def passing(exc: BaseException) -> bool:
    """A storage fault a retry of the same step may outlast (a corrupt database is not one;
    a lost lease is not a storage fault at all)."""
    return isinstance(exc, StorageError) and not isinstance(exc, DatabaseCorrupt)


@dataclasses.dataclass(eq=False, kw_only=True)
class JobRunner:
    store: RunStore
    steps: StepBatch  # the fenced steps of every job, written together (step_batch.py)
    clock: Clock
    settings: RunnerSettings
    reaper: GroupReaper
    log_refusals: LogRefusals
    stopping: threading.Event
    diagnostics: DiagnosticSink | None

    def run(self, job: Job) -> Outcome | None:
        """Run the job's command and record how it ended: the outcome recorded, or None when
        the job was given back or its ending could not be recorded (the reconciler settles
        it then)."""
        lease = job.lease
        try:
            outcome = self._execute(job)
            with job.lock:
                job.exited = True  # whatever it started has ended; only the record is left
            if (outcome is not None and job.stop_reason == "shutdown"
                    and self.settings.requeue_on_drain):
                self._settle_running(job)
                self.persist(job, lambda: self.store.attempt_interrupt(lease.fence, "drain"))
                return dataclasses.replace(outcome, error_code="INTERRUPTED",
                                           error_summary="queued again after a drain")
            if outcome is not None:
                self._record_ending(job, AttemptFinishParams(fence=lease.fence,
                                                             outcome=outcome))
            else:
                self._settle_running(job)
            return outcome
        except LeaseLost as exc:
            if job.process is not None:
                kill_group(job.process.pid, signal.SIGKILL)
            self._withdraw_running(job)
            emit(self.diagnostics, diagnostic_from("executor", exc))
        except Exception as exc:  # noqa: BLE001 - isolation boundary
            self._withdraw_running(job)
            emit(self.diagnostics, diagnostic_from("executor", exc))
        return None

    def _withdraw_running(self, job: Job) -> None:
        """The job ends without an ending of its own: a running record still waiting for a
        write is not sent (the Attempt reads ``starting``, which the reconciler settles)."""
        held, job.running_record = job.running_record, None
        if held is not None:
            self.steps.withdraw(held[0])

    def _record_ending(self, job: Job, finish: AttemptFinishParams) -> None:
        """Write the ending; with the running record when that is still waiting for a write
        (one step for both), else after it."""
        held, job.running_record = job.running_record, None
        if held is not None:
            pending, running, spawned_at = held
            ran = RunStore.ran_step(running, finish, ran_for_ms=round(
                (self.clock.monotonic() - spawned_at) * 1000))
            try:
                if self.steps.fold(pending, ran):
                    return
            except StorageError as exc:
                if not passing(exc):
                    raise
                # not written: both again, through the fault
                emit(self.diagnostics, diagnostic_from("executor", exc))
                self.persist(job, lambda: self.steps.write(ran))
                return
        finished = RunStore.finish_step(finish)
        self.persist(job, lambda: self.steps.write(finished))

    def _settle_running(self, job: Job) -> None:
        """Before another step of the job (an interrupt) or none: let a submitted running
        record be written first, so nothing of this job lands after it."""
        held, job.running_record = job.running_record, None
        if held is not None:
            error = self.steps.settle(held[0])
            if isinstance(error, (LeaseLost, DatabaseCorrupt)):
                raise error

    def persist(self, job: Job, write: Callable[[], None]) -> None:
        """Record a step (start, running, ending) despite a passing storage fault: each step
        is idempotent under its fence, and the job stays listed (so its lease is still
        renewed) while it is retried; after a lease length of failures it is left to the
        reconciler."""
        deadline = self.clock.monotonic() + self.settings.lease_ms / 1000
        while True:
            try:
                write()
                return
            except StorageError as exc:
                if (not passing(exc) or job.stop_reason == "lease_lost"
                        or self.clock.monotonic() >= deadline):
                    raise
                emit(self.diagnostics, diagnostic_from("executor", exc))
                pause(PERSIST_RETRY_S)

    def _execute(self, job: Job) -> Outcome | None:
        """Run the job's command; the outcome to record, or None when it was given back."""
        lease = job.lease
        if self.stopping.is_set():  # given back: nothing started, no attempt spent
            if lease.started:
                self.persist(job, lambda: self.store.attempt_interrupt(lease.fence, "drain"))
            else:
                self.store.lease_release(LeaseReleaseParams(fence=lease.fence, reason="drain"))
            return None
        if not lease.started:
            # Durable before the spawn; a passing storage fault (a pool briefly exhausted by
            # a burst of starts) is retried within the lease, never left to the reconciler.
            started = RunStore.start_step(lease.fence)
            self.persist(job, lambda: self.steps.write(started))
        if lease.execution is None:
            return command.failed("EXECUTION_REVISION_INVALID", lease.problem or "invalid plan")
        log_store = self.settings.log_store
        log = command.prepare_log(self.settings.log_dir, lease, spool=log_store is not None)
        if isinstance(log, Outcome):
            return log
        if log_store is None:
            return self._run_command(job, log, None)
        shipper = LogShipper(log_store, lease.fence, self.settings.log_max_bytes, self.clock,
                             diagnostics=self.diagnostics,
                             on_failure=self.log_refusals.refused)
        shipper.start()
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
        return noting_lost_output(outcome, shipper, lease.fence.run_id, self.diagnostics)

    def _run_command(self, job: Job, log: Path, shipper: LogShipper | None) -> Outcome | None:
        lease = job.lease
        assert lease.execution is not None
        if job.stop_reason == "lease_lost":  # lost before it began: never start it
            raise LeaseLost(f"run {lease.fence.run_id}: the lease was lost before the command "
                            "started")
        plan = lease.execution.plan.command
        if isinstance(plan, RepoPullCommand):
            return self._supervise(job, log, shipper, None, self._pull(job, plan))
        if isinstance(plan, DepsInstallCommand):
            return self._supervise(job, log, shipper, None, self._deps(job, None))
        if not isinstance(plan, ScriptCommand):
            return self._supervise(job, log, shipper, None)
        run_dir = command.run_dir(self.settings.log_dir, lease)
        directory = scripts.script_dir(run_dir, lease.attempt, self.settings.identity)
        try:
            script = self._script(job, plan, directory)
            launch = None if isinstance(script, Outcome) else self._deps(job, [
                plan.interpreter, str(script), *substitute(list(plan.args), lease.parameters)])
            return self._supervise(job, log, shipper, script, launch)
        finally:
            scripts.clean(directory)
            if shipper is not None and directory.parent == run_dir:
                with contextlib.suppress(OSError):  # a spool keeps no Run directory
                    run_dir.rmdir()

    def _script(self, job: Job, plan: ScriptCommand, directory: Path) -> Path | Outcome:
        """The script's content written under ``directory`` (fetched through a passing
        storage fault within a lease length, like a step)."""
        written: list[Path | Outcome] = []
        self.persist(job, lambda: written.append(scripts.materialise(
            plan, self.settings.scripts, directory, self.settings.identity)))
        return written[-1]

    def _pull(self, job: Job, plan: RepoPullCommand) -> tuple[list[str], dict[str, str]] | Outcome:
        """A subscription's pull: `ql repo import-run` with the database URL this executor
        was given for pulls (docs/subscriptions.md)."""
        url = self.settings.repos_url
        if url is None:
            return command.failed("REPOS_UNAVAILABLE", "this executor pulls no subscription: "
                                                       "start the worker with --repos-url")
        return ([sys.executable, "-m", "qinglong", "repo", "import-run", "--project",
                 job.lease.project_id, "--repo", plan.repo],
                {"QL_DATABASE_URL": url, "QL_ACTOR": f"repo:{plan.repo}"})

    def _deps(self, job: Job, then: list[str] | None) -> deps.Launch | Outcome | None:
        """The installer's command for the project's dependency set (fetched through a
        passing storage fault within a lease length; docs/dependencies.md)."""
        found: list[deps.Launch | Outcome | None] = []
        self.persist(job, lambda: found.append(deps.launch(
            self.settings.deps, self.settings.deps_dir, job.lease.project_id, then)))
        return found[-1]

    def _supervise(self, job: Job, log: Path, shipper: LogShipper | None,
                   script: Path | Outcome | None,
                   pull: tuple[list[str], dict[str, str]] | Outcome | None = None,
                   ) -> Outcome | None:
        lease = job.lease
        assert lease.execution is not None
        for failed in (script, pull):
            if isinstance(failed, Outcome):
                command.note(log, failed.error_summary or "the command could not start")
                return dataclasses.replace(failed, log_path=str(log))
        assert not isinstance(script, Outcome) and not isinstance(pull, Outcome)
        spawned_at = self.clock.monotonic()
        spawned = command.spawn(lease, log, default_cwd=self.settings.workdir,
                                inherited=self.settings.inherited,
                                log_max_bytes=self.settings.log_max_bytes,
                                tap=shipper.feed if shipper is not None else None,
                                identity=self.settings.identity, script=script, pull=pull)
        if isinstance(spawned, Outcome):
            return spawned
        self.reaper.watch(spawned.process.pid)
        with job.lock:
            job.process = spawned.process
            stop_asked = job.stop_reason
        if stop_asked is not None:
            kill_group(spawned.process.pid, signal.SIGTERM)
        params = AttemptRunningParams(
            fence=lease.fence, pid=spawned.process.pid,
            executor_handle=make_handle(spawned.process.pid),
            log_path=None if shipper is not None else str(log))
        running = RunStore.running_step(params)
        try:
            pending = self.steps.submit(running)
            if pending.done and pending.error is not None:  # written at once, and failed
                if not passing(pending.error):
                    raise pending.error
                emit(self.diagnostics, diagnostic_from("executor", pending.error))
                # retried like an ending: giving up here kills a command that already started
                self.persist(job, lambda: self.steps.write(running))
            elif not pending.done:  # in the next write, or folded into the ending
                job.running_record = (pending, params, spawned_at)
        except BaseException:
            kill_group(spawned.process.pid, signal.SIGKILL)
            command.supervise(spawned, 0.0)
            self.reaper.forget(spawned.process.pid)
            raise
        timeout_ms = lease.execution.plan.timeout_ms
        code, timed_out = command.supervise(spawned, timeout_ms / 1000)
        memory_killed = spawned.memory_killed()
        with job.lock:
            job.exited = True
        self.reaper.forget(spawned.process.pid)
        if spawned.pump.error is not None:
            emit(self.diagnostics, Diagnostic(source="executor", code="QL_LOG_UNWRITABLE",
                                               message=f"run {lease.fence.run_id}: "
                                                       f"{spawned.pump.error}"))
        return job_outcome(job, code, timed_out, timeout_ms,
                           memory_killed=memory_killed)
