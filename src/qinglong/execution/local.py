"""The local executor: runs admitted Runs as child processes with bounded concurrency.

Every step is recorded before it takes effect: ``starting`` is durable before the
child is spawned, so a crash at any point leaves an Attempt that the next start
reconciles visibly as ``lost`` -- a Run is never silently reset or run twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from qinglong.clock import Clock
from qinglong.errors import InvalidConfig
from qinglong.execution.logs import DEFAULT_LOG_BYTES, MAX_LOG_BYTES, MIN_LOG_BYTES, CappedLogPump
from qinglong.execution.processes import kill_group, make_handle, settle_orphan
from qinglong.scheduler.diagnostics import DiagnosticSink, diagnostic_from, emit
from qinglong.storage.ports import (
    AttemptFinishParams,
    AttemptStartedParams,
    InterruptedAttempt,
    LocalExecutionStore,
    QueuedRun,
    ReconciledAttempt,
)

MIN_CONCURRENCY = 1
MAX_CONCURRENCY = 256
KILL_GRACE_S = 2.0
STRAGGLER_WAIT_S = 2.0
_INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "SHELL")


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
    queued: QueuedRun
    process: subprocess.Popen[bytes] | None = None
    shutdown_kill: bool = False


class LocalExecutor:
    def __init__(
        self,
        store: LocalExecutionStore,
        clock: Clock,
        *,
        log_dir: Path,
        concurrency: int = 4,
        log_max_bytes: int = DEFAULT_LOG_BYTES,
        poll_interval_s: float = 0.5,
        diagnostics: DiagnosticSink | None = None,
        on_finished: Callable[[RunFinished], None] | None = None,
    ) -> None:
        if not MIN_CONCURRENCY <= concurrency <= MAX_CONCURRENCY:
            raise InvalidConfig(
                "concurrency", f"must be between {MIN_CONCURRENCY} and {MAX_CONCURRENCY}"
            )
        if not MIN_LOG_BYTES <= log_max_bytes <= MAX_LOG_BYTES:
            raise InvalidConfig(
                "log-max-bytes", f"must be between {MIN_LOG_BYTES} and {MAX_LOG_BYTES} bytes"
            )
        self._store = store
        self._clock = clock
        self._log_dir = log_dir
        self._concurrency = concurrency
        self._log_max_bytes = log_max_bytes
        self._poll_interval_s = poll_interval_s
        self._diagnostics = diagnostics
        self._on_finished = on_finished
        self._jobs: dict[str, _Job] = {}
        self._jobs_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._idle = threading.Condition(self._jobs_lock)
        self._thread: threading.Thread | None = None
        self._workdir = os.getcwd()

    # -- lifecycle --------------------------------------------------------------------

    def recover(self) -> list[ReconciledAttempt]:
        """Reconcile what a crashed executor left running (call before ``start``)."""
        return self._store.attempt_reconcile_interrupted(self._settle)

    @staticmethod
    def _settle(attempt: InterruptedAttempt) -> str:
        return settle_orphan(attempt.executor_handle)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._dispatch_loop, name="ql-executor", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Something was admitted: look for queued Runs now."""
        self._wake.set()

    def active(self) -> int:
        with self._jobs_lock:
            return len(self._jobs)

    def stop(self, drain_timeout_s: float) -> int:
        """Stop taking work; wait for running jobs, then kill what is left.

        Returns how many jobs were cancelled because they outlived the drain.
        """
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._wait_idle(drain_timeout_s)
        with self._jobs_lock:
            leftovers = list(self._jobs.values())
        for job in leftovers:
            job.shutdown_kill = True
        self._signal_jobs(leftovers, signal.SIGTERM)
        self._wait_idle(KILL_GRACE_S)
        self._signal_jobs(leftovers, signal.SIGKILL)
        self._wait_idle(STRAGGLER_WAIT_S + 1.0)
        return len(leftovers)

    @staticmethod
    def _signal_jobs(jobs: list[_Job], sig: signal.Signals) -> None:
        for job in jobs:
            if job.process is not None:
                kill_group(job.process.pid, sig)

    def _wait_idle(self, timeout_s: float) -> None:
        deadline = self._clock.monotonic() + timeout_s
        with self._idle:
            while self._jobs and self._clock.monotonic() < deadline:
                self._idle.wait(max(0.0, deadline - self._clock.monotonic()))

    # -- dispatch ---------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self._dispatch_once()
            except Exception as exc:  # noqa: BLE001 - isolation boundary
                emit(self._diagnostics, diagnostic_from("executor", exc))
            self._wake.wait(self._poll_interval_s)
            self._wake.clear()

    def _dispatch_once(self) -> None:
        while not self._stopping.is_set():
            free = self._concurrency - self.active()
            if free <= 0:
                return
            queued = self._store.run_list_queued(free)
            if not queued:
                return
            started = 0
            for item in queued:
                if self._stopping.is_set():
                    return
                with self._jobs_lock:
                    if item.run_id in self._jobs:
                        continue
                if not self._store.attempt_begin(item.run_id, item.attempt_id):
                    continue
                job = _Job(queued=item)
                with self._jobs_lock:
                    self._jobs[item.run_id] = job
                threading.Thread(
                    target=self._run_job, args=(job,), name="ql-run", daemon=True
                ).start()
                started += 1
            if started == 0:
                return

    # -- one job ----------------------------------------------------------------------

    def _run_job(self, job: _Job) -> None:
        started = self._clock.monotonic()
        item = job.queued
        outcome = AttemptFinishParams(
            run_id=item.run_id, attempt_id=item.attempt_id, status="failed", exit_code=None,
            error_code="EXECUTOR_ERROR", error_summary="the executor failed",
        )
        try:
            outcome = self._execute(job)
        except Exception as exc:  # noqa: BLE001 - isolation boundary
            emit(self._diagnostics, diagnostic_from("executor", exc))
        try:
            self._store.attempt_finish(outcome)
        except Exception as exc:  # noqa: BLE001 - isolation boundary
            emit(self._diagnostics, diagnostic_from("executor", exc))
        finally:
            with self._idle:
                self._jobs.pop(item.run_id, None)
                self._idle.notify_all()
            self._wake.set()
        if self._on_finished is not None:
            try:
                self._on_finished(
                    RunFinished(
                        run_id=item.run_id,
                        trigger_id=item.trigger_id,
                        scheduled_for_ms=item.scheduled_for_ms,
                        status=outcome.status,
                        exit_code=outcome.exit_code,
                        duration_ms=int((self._clock.monotonic() - started) * 1000),
                        error_summary=outcome.error_summary,
                    )
                )
            except Exception as exc:  # noqa: BLE001 - isolation boundary
                emit(self._diagnostics, diagnostic_from("executor", exc))

    def _finish(self, job: _Job, status: str, exit_code: int | None, code: str | None,
                summary: str | None) -> AttemptFinishParams:
        return AttemptFinishParams(
            run_id=job.queued.run_id,
            attempt_id=job.queued.attempt_id,
            status=status,
            exit_code=exit_code,
            error_code=code,
            error_summary=summary,
            cancel_reason="shutdown" if status == "cancelled" else None,
        )

    def _execute(self, job: _Job) -> AttemptFinishParams:
        item = job.queued
        execution = item.execution
        if execution is None:
            return self._finish(
                job, "failed", None, "EXECUTION_REVISION_INVALID", item.problem or "invalid plan"
            )
        run_dir = self._log_dir / item.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        log_path = run_dir / "attempt-1.log"
        try:
            process = subprocess.Popen(
                execution.argv(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=execution.plan.working_directory or self._workdir,
                env=self._environment(item),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            log_path.write_text(f"[qinglong: could not start the command: {exc.strerror}]\n")
            return self._finish(
                job, "failed", None, "EXECUTOR_START_FAILED",
                f"could not start {execution.argv()[0]!r}: {exc.strerror}",
            )
        job.process = process
        assert process.stdout is not None
        pump = CappedLogPump(process.stdout, log_path, self._log_max_bytes)
        pump.start()
        try:
            self._store.attempt_started(
                AttemptStartedParams(
                    run_id=item.run_id,
                    attempt_id=item.attempt_id,
                    pid=process.pid,
                    executor_handle=make_handle(process.pid),
                    log_path=str(log_path),
                )
            )
        except Exception:
            kill_group(process.pid, signal.SIGKILL)
            process.wait()
            raise
        timeout_s = execution.plan.timeout_ms / 1000
        timed_out = False
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            self._terminate(process)
        if not pump.join(STRAGGLER_WAIT_S):
            # Something in the job's process group still holds the output open.
            kill_group(process.pid, signal.SIGKILL)
            pump.join(STRAGGLER_WAIT_S)
        code = process.returncode
        if job.shutdown_kill:
            return self._finish(job, "cancelled", None, "SHUTDOWN", "stopped by executor shutdown")
        if timed_out:
            return self._finish(
                job, "timed_out", None, "TIMEOUT",
                f"killed after the {execution.plan.timeout_ms} ms timeout",
            )
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return self._finish(job, "failed", None, "KILLED_BY_SIGNAL", f"terminated by {name}")
        if code == 0:
            return self._finish(job, "succeeded", 0, None, None)
        return self._finish(job, "failed", code, "EXIT_NONZERO", f"exited with code {code}")

    def _terminate(self, process: subprocess.Popen[bytes]) -> None:
        kill_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            kill_group(process.pid, signal.SIGKILL)
            process.wait()
        kill_group(process.pid, signal.SIGKILL)  # stragglers in the group

    def _environment(self, item: QueuedRun) -> dict[str, str]:
        assert item.execution is not None
        env = {name: os.environ[name] for name in _INHERITED_ENV if name in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update({entry.name: entry.value for entry in item.execution.plan.environment})
        env["QL_RUN_ID"] = item.run_id
        env["QL_ATTEMPT_ID"] = item.attempt_id
        env["QL_PROJECT_ID"] = item.project_id
        env["QL_TASK_ID"] = item.task_id
        if item.trigger_id is not None:
            env["QL_TRIGGER_ID"] = item.trigger_id
        if item.scheduled_for_ms is not None:
            env["QL_SCHEDULED_FOR_MS"] = str(item.scheduled_for_ms)
            env["QL_SCHEDULED_FOR"] = (
                datetime.fromtimestamp(item.scheduled_for_ms / 1000, UTC)
                .isoformat(timespec="milliseconds")
                .replace("+00:00", "Z")
            )
        return env

