"""The executor with real child processes on a real SQLite store."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from qinglong.clock import SystemClock
from qinglong.domain.model import RunDetail
from qinglong.domain.task import ArgvCommand, CommandSpec, EnvEntry, ShellCommand
from qinglong.errors import ConnectionLost
from qinglong.execution.executor import Executor
from qinglong.execution.processes import make_handle, process_start_ticks, settle_orphan
from qinglong.scheduler.coordinator import Coordinator
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.runs.lifecycle import FencedStep
from qinglong.storage.runs.params import AttemptRunningParams, LeaseAcquireParams, RunListParams
from qinglong.testing import FakeClock
from tests.conftest import BASE_MS, SqliteStores
from tests.support.processes import process_running

WAIT_S = 20.0
TERMINAL = {"succeeded", "failed", "timed_out", "cancelled", "lost"}
IDS = itertools.count()


def admit(stores: SqliteStores, clock: FakeClock, spec: CommandSpec, runs: int = 1, task: str = "job") -> list[str]:
    """Publish ``spec`` with a per-second trigger and admit ``runs`` occurrences."""
    d = stores.definitions
    clock.set(BASE_MS)  # publish at a whole second so the first occurrence is BASE_MS
    if not d.project_list():
        d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id=task, name=task, spec=spec))
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id=f"{task}-t", task_id=task,
                                           expression="* * * * * *", timezone="UTC"))
    clock.set(BASE_MS + (runs - 1) * 1000 + 10)
    Coordinator(stores.schedules, owner="standalone:1",  # decides at the clock's time
                new_id=lambda: str(uuid.UUID(int=next(IDS) + 1))).run_cycle()
    listed = stores.runs.run_list(RunListParams(trigger_id=f"{task}-t", limit=1000, oldest_first=True))
    assert len(listed) == runs
    return [r.id for r in listed]


def wait_terminal(stores: SqliteStores, run_id: str) -> RunDetail:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        detail = stores.runs.run_get(run_id)
        if detail.run.status in TERMINAL:
            return detail
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} did not finish: {stores.runs.run_get(run_id).run.status}")


def log_text(detail: RunDetail) -> str:
    path = detail.attempts[0].log_path
    assert path is not None
    return Path(path).read_text()


def test_success_records_every_transition_and_the_output(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor, tmp_path: Path
) -> None:
    spec = CommandSpec(
        command=ShellCommand(command='echo "out $QL_TRIGGER_ID $QL_SCHEDULED_FOR $GREETING"; pwd; echo err >&2'),
        environment=(EnvEntry(name="GREETING", value="hello"),),
        working_directory=str(tmp_path),
        timeout_ms=30_000,
    )
    [run_id] = admit(sqlite_stores, clock, spec)
    executor = make_executor()
    executor.start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert detail.run.status == "succeeded"
    [attempt] = detail.attempts
    assert (attempt.status, attempt.exit_code) == ("succeeded", 0)
    assert attempt.pid is not None and attempt.started_at_ms and attempt.finished_at_ms
    assert [e.type for e in detail.events] == [
        "run.created", "run.queued", "run.dispatching", "attempt.starting",
        "attempt.running", "run.running", "attempt.succeeded", "run.succeeded",
    ]
    assert [e.sequence for e in detail.events] == list(range(1, 9))
    # the lease was granted starting: one write (and Run version) for dispatching and starting
    assert detail.run.version == 5 and detail.run.event_sequence == 8
    assert detail.events[2].created_at_ms == detail.events[3].created_at_ms
    assert detail.events[2].payload["worker"] == "test-executor"
    assert Path(attempt.log_path or "").is_absolute()
    assert log_text(detail).splitlines() == ["out job-t 2027-01-14T08:00:00.000Z hello", str(tmp_path), "err"]


def test_nonzero_exit_and_signals_are_failures_with_their_cause(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    [exit3] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="exit 3")), task="three")
    [killed] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="kill -9 $$")), task="nine")
    make_executor().start()
    detail = wait_terminal(sqlite_stores, exit3)
    assert (detail.run.status, detail.attempts[0].exit_code, detail.run.error_code) == ("failed", 3, "EXIT_NONZERO")
    detail = wait_terminal(sqlite_stores, killed)
    assert (detail.run.status, detail.run.error_code) == ("failed", "KILLED_BY_SIGNAL")
    assert "SIGKILL" in (detail.run.error_summary or "")


def test_timeout_kills_the_whole_process_group(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    spec = CommandSpec(
        command=ShellCommand(command=f"sleep 60 & echo $! > {pidfile}; sleep 60"), timeout_ms=500
    )
    [run_id] = admit(sqlite_stores, clock, spec)
    make_executor().start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert (detail.run.status, detail.run.error_code) == ("timed_out", "TIMEOUT")
    assert [e.type for e in detail.events][-2:] == ["attempt.timed_out", "run.timed_out"]
    background = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while process_running(background) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_running(background), "the background child of the timed-out command survived"


def test_a_program_that_cannot_start_fails_visibly(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ArgvCommand(file="/nonexistent/program")))
    make_executor().start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert (detail.run.status, detail.run.error_code) == ("failed", "EXECUTOR_START_FAILED")
    assert detail.attempts[0].pid is None
    assert "could not start" in log_text(detail) if detail.attempts[0].log_path else True


def test_output_beyond_the_cap_keeps_head_and_tail(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    spec = CommandSpec(command=ShellCommand(
        command="head -c 20000 /dev/zero | tr '\\0' x; echo; echo the-error-at-the-end"))
    [run_id] = admit(sqlite_stores, clock, spec)
    make_executor(log_max_bytes=1024).start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert detail.run.status == "succeeded"
    text = log_text(detail)
    assert text.startswith("x" * 512 + "\n[qinglong: 18998 bytes of output dropped here]\n")
    assert text.endswith("x\nthe-error-at-the-end\n")


def test_concurrency_is_bounded(sqlite_stores: SqliteStores, clock: FakeClock, make_executor) -> None:
    run_ids = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="sleep 0.4")), runs=5)
    make_executor(concurrency=2).start()
    details = [wait_terminal(sqlite_stores, r) for r in run_ids]
    assert all(d.run.status == "succeeded" for d in details)
    spans = [(d.attempts[0].started_at_ms, d.attempts[0].finished_at_ms) for d in details]
    for start, _ in spans:
        assert start is not None
        overlapping = sum(1 for s, f in spans if s is not None and f is not None and s <= start < f)
        assert overlapping <= 2


def test_stop_cancels_what_outlives_the_drain(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="sleep 60")))
    executor = make_executor()
    executor.start()
    deadline = time.monotonic() + WAIT_S
    while sqlite_stores.runs.run_get(run_id).run.status != "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = sqlite_stores.runs.run_get(run_id).attempts[0].pid
    assert pid is not None
    assert executor.stop(0.2) == 1
    # stopped by the executor, not ended by itself (a 60 s command would have succeeded)
    detail = sqlite_stores.runs.run_get(run_id)
    assert (detail.run.status, detail.run.error_code) == ("cancelled", "SHUTDOWN")
    assert not process_running(pid)


def test_restart_settles_what_the_previous_executor_left_visibly(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    running, gone, starting, leased = admit(
        sqlite_stores, clock, CommandSpec(command=ShellCommand(command="sleep 60")), runs=4
    )
    store = sqlite_stores.runs
    leases = {lease.fence.run_id: lease.fence for lease in store.lease_acquire(
        LeaseAcquireParams(owner="crashed-server", lease_ms=60_000, limit=10))}
    assert set(leases) == {running, gone, starting, leased}
    orphan = subprocess.Popen(["sleep", "60"], start_new_session=True)
    short = subprocess.Popen(["true"], start_new_session=True)
    short_handle = make_handle(short.pid)
    short.wait()
    try:
        for run_id, process, handle in ((running, orphan, make_handle(orphan.pid)),
                                        (gone, short, short_handle)):
            store.attempt_start(leases[run_id])
            store.attempt_running(AttemptRunningParams(fence=leases[run_id], pid=process.pid,
                                                       executor_handle=handle, log_path="/dev/null"))
        store.attempt_start(leases[starting])
        assert process_start_ticks(orphan.pid) is not None
        # A new executor starts on the same database, as after `kill -9` of ql serve: its
        # leases have not expired, but no holder can be alive (one server per file).
        rescued = {r.run_id: r for r in make_executor().recover()}
        assert {k: (v.previous_status, v.outcome) for k, v in rescued.items()} == {
            running: ("running", "lost"),
            gone: ("running", "lost"),
            starting: ("starting", "lost"),
            leased: ("claimed", "requeued"),
        }
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        processes = {}
        for run_id in (running, gone, starting):
            detail = store.run_get(run_id)
            assert detail.run.status == "lost" and detail.attempts[0].status == "lost"
            assert [e.type for e in detail.events][-2:] == ["attempt.lost", "run.lost"]
            assert detail.events[-1].actor_type == "reconciler"
            assert detail.events[-1].payload["reason"] == "executor_restarted"
            processes[run_id] = detail.events[-1].payload["process"]
        assert processes == {running: "killed", gone: "gone", starting: "unknown"}
        requeued = store.run_get(leased)
        assert requeued.run.status == "queued" and requeued.attempts[0].status == "claimed"
        assert requeued.events[-1].type == "run.dispatch_released"
        assert make_executor().recover() == []  # nothing left to settle
    finally:
        orphan.kill()


def wait_status(stores: SqliteStores, run_id: str, status: str) -> RunDetail:
    deadline = time.monotonic() + WAIT_S
    while (detail := stores.runs.run_get(run_id)).run.status != status:
        assert time.monotonic() < deadline, f"run {run_id} never became {status}"
        time.sleep(0.02)
    return detail


def take_over(stores: SqliteStores, run_id: str) -> None:
    """What a takeover does to the old holder: its lease generation is no longer current."""
    stores.db.connection().execute(
        "UPDATE run_attempts SET lease_generation = lease_generation + 1 WHERE run_id = ?",
        (run_id,))


def test_a_lost_lease_stops_the_command_at_the_next_renewal(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="sleep 60")))
    executor = make_executor(lease_ms=1_000)
    executor.start()
    pid = wait_status(sqlite_stores, run_id, "running").attempts[0].pid
    assert pid is not None and process_running(pid)
    take_over(sqlite_stores, run_id)
    deadline = time.monotonic() + WAIT_S
    while process_running(pid) or executor.active():  # killed, and the job is done with the run
        assert time.monotonic() < deadline, "the command outlived its lost lease"
        time.sleep(0.05)
    detail = sqlite_stores.runs.run_get(run_id)
    # The executor knew its lease was gone, so it wrote nothing: whoever holds it decides.
    assert detail.run.status == "running"
    assert [e.type for e in detail.events][-1] == "run.running"


def test_a_stale_holders_result_is_refused_and_recorded(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="sleep 1")))
    make_executor(lease_ms=60_000).start()  # no renewal before the command ends
    wait_status(sqlite_stores, run_id, "running")
    take_over(sqlite_stores, run_id)
    deadline = time.monotonic() + WAIT_S
    while (detail := sqlite_stores.runs.run_get(run_id)).events[-1].type != (
            "attempt.late_callback_ignored"):
        assert time.monotonic() < deadline, "the stale finish was not recorded"
        time.sleep(0.05)
    assert detail.run.status == "running" and detail.attempts[0].status == "running"
    assert detail.events[-1].payload == {"write": "finish", "fence_generation": 1,
                                         "current_generation": 2, "current_status": "running"}


def test_a_cancel_request_stops_the_command(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="sleep 60")))
    # a renewal (every lease/3) carries the cancel; 3 s leaves a starved renewal thread time
    # before the watchdog would end the command for a lost lease instead
    make_executor(lease_ms=3_000).start()
    deadline = time.monotonic() + WAIT_S
    while sqlite_stores.runs.run_get(run_id).run.status != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert sqlite_stores.runs.run_cancel(run_id) is None  # asked to stop; the executor ends it
    detail = wait_terminal(sqlite_stores, run_id)
    assert (detail.run.status, detail.run.cancel_reason) == ("cancelled", "user")
    assert detail.run.error_code == "CANCELLED"


def test_a_missing_working_directory_is_named(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor, tmp_path: Path
) -> None:
    gone = tmp_path / "was-here"
    spec = CommandSpec(command=ShellCommand(command="true"), working_directory=str(gone))
    [run_id] = admit(sqlite_stores, clock, spec)
    make_executor().start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert (detail.run.status, detail.run.error_code) == ("failed", "WORKING_DIRECTORY_MISSING")
    assert str(gone) in (detail.run.error_summary or "")
    assert "does not exist" in log_text(detail)


def test_an_unwritable_log_directory_is_named(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.write_text("a file where the log directory should be")
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="true")))
    make_executor(log_dir=logs).start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert (detail.run.status, detail.run.error_code) == ("failed", "LOG_UNWRITABLE")
    assert str(logs) in (detail.run.error_summary or "")
    assert detail.attempts[0].pid is None


def test_children_left_by_a_group_leader_that_exited_are_killed_on_restart() -> None:
    # The attempt's shell started a background job and exited; the job still runs in the
    # shell's process group, and must not outlive an executor restart.
    leader = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & echo $!"], start_new_session=True,
                              stdout=subprocess.PIPE, text=True)
    handle = make_handle(leader.pid)
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    leader.wait(timeout=5)
    leader.stdout.close()
    try:
        assert process_running(child) and process_start_ticks(leader.pid) is None
        assert settle_orphan(handle) == "killed"
        deadline = time.monotonic() + 5
        while process_running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process_running(child)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_a_corrupt_execution_plan_is_never_run(sqlite_stores: SqliteStores, clock: FakeClock, make_executor) -> None:
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="echo safe")))
    sqlite_stores.db.connection().execute(
        "UPDATE task_execution_revisions SET plan_json = replace(plan_json, 'echo safe', 'echo evil')")
    make_executor().start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert (detail.run.status, detail.run.error_code) == ("failed", "EXECUTION_REVISION_INVALID")
    assert detail.attempts[0].pid is None


class _PoolBrieflyExhausted:
    """The real store, but the first lease (which records the start step too) and the first
    write of every Attempt's running step fail as a worker's pool does when a burst of
    starts waits too long for a connection. The executor writes its jobs' steps in batches
    (execution/step_batch.py): a refused write refuses every step in it, and each is
    counted. A running record that waited until its command ended travels with the ending
    (a "ran" step) and is refused like one."""

    def __init__(self, store: object) -> None:
        self._store = store
        self.refused: list[tuple[str, str]] = []  # (step, attempt), once each
        self.failed_steps = 0  # steps in refused writes (each job hears its own)
        self.leases_refused = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def lease_acquire(self, params: LeaseAcquireParams) -> object:
        assert params.start  # the executor's leases carry the start step
        if not self.leases_refused:
            self.leases_refused += 1
            raise ConnectionLost("no database connection available")
        return self._store.lease_acquire(params)  # type: ignore[attr-defined]

    def attempt_steps(self, steps: Sequence[FencedStep]) -> object:
        kinds = {"start": "start", "running": "running", "ran": "running"}
        fresh = [(kinds[s.write], s.fence.attempt_id) for s in steps
                 if s.write in kinds and (kinds[s.write], s.fence.attempt_id) not in self.refused]
        if fresh:
            self.refused.extend(fresh)
            self.failed_steps += len(steps)
            raise ConnectionLost("no database connection available")
        return self._store.attempt_steps(steps)  # type: ignore[attr-defined]


def test_a_passing_storage_fault_at_start_or_running_is_retried_within_the_lease(
    sqlite_stores: SqliteStores, clock: FakeClock, tmp_path: Path
) -> None:
    # Before: the first failure dropped the job, so its Run sat `dispatching` (or its started
    # command was killed) until the reconciler took the expired lease over.
    run_ids = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="echo ran")),
                    runs=3)
    store = _PoolBrieflyExhausted(sqlite_stores.runs)
    seen: list[str] = []
    executor = Executor(store, SystemClock(), log_dir=tmp_path / "logs",  # type: ignore[arg-type]
                        poll_interval_s=0.05, owner="test-executor", lease_ms=5_000,
                        diagnostics=lambda d: seen.append(d.code))
    executor.start()
    try:
        for run_id in run_ids:
            detail = wait_terminal(sqlite_stores, run_id)
            assert detail.run.status == "succeeded"
            assert [a.status for a in detail.attempts] == ["succeeded"]  # no attempt spent
            assert log_text(detail) == "ran\n"
    finally:
        executor.stop(0.5)
    assert sorted(step for step, _ in store.refused) == ["running"] * 3
    assert store.leases_refused == 1
    # the dispatcher said the refused lease once, and each job each fault its write met
    # once, then retried
    assert seen.count("QL_CONNECTION_LOST") == store.failed_steps + 1 >= 4


class _StopsWhileLeasing:
    """The real store; the executor is told to stop while it takes its first lease (written,
    and not yet handed to a job)."""

    def __init__(self, store: object) -> None:
        self._store = store
        self.executor: Executor | None = None
        self.stopper: threading.Thread | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def lease_acquire(self, params: LeaseAcquireParams) -> object:
        leases = self._store.lease_acquire(params)  # type: ignore[attr-defined]
        if leases and self.stopper is None:
            assert self.executor is not None
            stopper = threading.Thread(target=self.executor.stop, args=(5.0,))
            stopper.start()
            self.stopper = stopper  # (started: the test may join it from now on)
            stopping = self.executor._stopping  # (private: the moment under test)
            assert stopping.wait(WAIT_S), "the executor was not told to stop"
        return leases


def test_a_drain_before_the_spawn_interrupts_the_started_lease_without_spending_it(
    sqlite_stores: SqliteStores, clock: FakeClock, tmp_path: Path
) -> None:
    """The executor's leases are granted ``starting``; one whose job finds the executor
    draining is interrupted (its Run queued again through retry_wait, no attempt spent),
    not released, and its command never starts."""
    marker = tmp_path / "ran"
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(
        command=f"touch {marker}")))
    store = _StopsWhileLeasing(sqlite_stores.runs)
    executor = Executor(store, SystemClock(), log_dir=tmp_path / "logs",  # type: ignore[arg-type]
                        poll_interval_s=0.05, owner="test-executor")
    store.executor = executor
    executor.start()
    deadline = time.monotonic() + WAIT_S
    while store.stopper is None:
        assert time.monotonic() < deadline, "the executor took no lease"
        time.sleep(0.02)
    store.stopper.join(WAIT_S)
    assert not store.stopper.is_alive()
    detail = sqlite_stores.runs.run_get(run_id)
    assert detail.run.status == "retry_wait"
    [attempt] = detail.attempts
    assert (attempt.status, attempt.error_code, attempt.pid) == ("cancelled", "INTERRUPTED", None)
    assert [e.type for e in detail.events][2:] == [
        "run.dispatching", "attempt.starting", "attempt.cancelled", "run.retry_wait"]
    assert detail.events[-1].payload["attempts_spent"] == 0
    assert not marker.exists()
