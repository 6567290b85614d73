"""One leased Run in an executor (`Job`): its command's process, why it is being stopped and
whether it has exited; how it ended as the executor saw it (`job_outcome`), and what the
executor tells its owner when a Run it ran is recorded (`RunFinished`)."""

from __future__ import annotations

import signal
import subprocess
import threading
from dataclasses import dataclass, field

from qinglong.domain.lifecycle import Outcome
from qinglong.domain.runs import AttemptStatus
from qinglong.errors import LeaseLost
from qinglong.execution import command
from qinglong.execution.processes import kill_group
from qinglong.execution.step_batch import Pending
from qinglong.storage.runs.params import AttemptLease, AttemptRunningParams


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
class Job:
    lease: AttemptLease
    process: subprocess.Popen[bytes] | None = None
    started: bool = False
    stop_reason: str | None = None  # shutdown | lease_lost | cancel
    # Nothing left to stop: the command has exited and been reaped, or the job is done with
    # it (never started, or given back) and is recording how it ended -- a renewal that finds
    # the lease gone then sees that ending, not a lost lease.
    exited: bool = False
    # the running record submitted and perhaps not written yet (execution/step_batch.py),
    # and when the command was spawned (clock.monotonic()): the ending folds it in, or
    # waits for it
    running_record: tuple[Pending, AttemptRunningParams, float] | None = None
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


def job_outcome(job: Job, code: int, timed_out: bool, timeout_ms: int, *,
                memory_killed: bool = False) -> Outcome:
    """How a command that ran ended: stopped (and why), timed out, killed at its memory
    limit, or its exit code; a command stopped because its lease was lost has no outcome to
    record (LeaseLost)."""
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
    if memory_killed:
        return command.memory_outcome()
    return command.exit_outcome(code)
