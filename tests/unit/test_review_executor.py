"""The executor where a lease renewal races a job's own steps or hangs (review findings 10a-d).

The renewal runs on its own thread; these tests make it land at the racy moment (or hang)
through a seam around the real SQLite run store (no mock: every write reaches the database)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from qinglong.clock import SystemClock
from qinglong.diagnostics import Diagnostic
from qinglong.domain.lifecycle import LeaseFence
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import LeaseLost
from qinglong.execution import command
from qinglong.execution.executor import Executor
from qinglong.profiles.local import LOCAL_LEASE_MS, LocalApp, LocalServeConfig
from qinglong.storage.runs.lifecycle import FencedStep
from qinglong.storage.runs.params import (
    AttemptLease,
    AttemptRunningParams,
    LeaseRenewal,
    LeaseRenewParams,
    RescuedAttempt,
)
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores
from tests.execution.test_local_executor import admit, take_over, wait_terminal
from tests.support.processes import process_running

WAIT_S = 10.0


class RenewalSeam:
    """The run store, with hooks that wait (bounded) for the executor's next renewal."""

    def __init__(self, stores: SqliteStores) -> None:
        self.stores = stores
        self._store = stores.runs
        self._renewed = threading.Condition()
        self.renewals = 0
        self.lost: list[LeaseFence] = []  # what renewals reported lost
        self.running: list[AttemptRunningParams] = []  # a command was spawned
        self.waited_for_renewal = False
        self.after_finish: Any = None
        self.hang = threading.Event()  # set: renewals hang in the "driver" until released
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def lease_renew(self, params: LeaseRenewParams) -> LeaseRenewal:
        if self.hang.is_set():
            self.release.wait(WAIT_S)
        renewal = self._store.lease_renew(params)
        with self._renewed:
            self.lost.extend(renewal.lost)
            self.renewals += 1
            self._renewed.notify_all()
        return renewal

    def wait_for_a_renewal(self) -> None:
        """Until a renewal that started after this call has ended."""
        with self._renewed:
            target = self.renewals + 2  # one may be on its way already
            self.waited_for_renewal = self._renewed.wait_for(
                lambda: self.renewals >= target, WAIT_S)

    def attempt_steps(self, steps: Sequence[FencedStep]) -> list[object]:
        # the executor writes its jobs' steps in batches (execution/step_batch.py)
        self.running.extend(cast(AttemptRunningParams, s.params) for s in steps
                            if s.write == "running")
        outcomes: list[object] = self._store.attempt_steps(steps)
        for step in steps:
            if step.write == "finish" and self.after_finish is not None:
                self.after_finish(step.params)
        return outcomes


@pytest.fixture
def seam(sqlite_stores: SqliteStores) -> RenewalSeam:
    return RenewalSeam(sqlite_stores)


@pytest.fixture
def diagnostics() -> list[Diagnostic]:
    return []


@pytest.fixture
def executor(seam: RenewalSeam, diagnostics: list[Diagnostic], tmp_path: Path
             ) -> Iterator[Executor]:
    made = Executor(seam, SystemClock(), owner="review-executor",  # type: ignore[arg-type]
                    log_dir=tmp_path / "logs", poll_interval_s=0.05, lease_ms=30_000,
                    renew_every_s=0.05, diagnostics=diagnostics.append)
    yield made
    made.stop(0.5)


def wait_idle(executor: Executor) -> None:
    deadline = time.monotonic() + WAIT_S
    while executor.active():
        assert time.monotonic() < deadline, "the executor kept the job"
        time.sleep(0.02)


def test_a_command_whose_lease_is_known_lost_before_the_spawn_never_starts(
        seam: RenewalSeam, sqlite_stores: SqliteStores, clock: FakeClock, executor: Executor,
        diagnostics: list[Diagnostic], monkeypatch: pytest.MonkeyPatch) -> None:
    """10a: the renewal reports the lease lost after ``starting`` was recorded (with the
    lease) and before the spawn -- held in the job's first step after its lease, making the
    log file; the command must not be started (and then killed)."""
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="true")))
    prepare_log = command.prepare_log

    def lose_then_prepare(log_dir: Path, lease: AttemptLease, *, spool: bool) -> object:
        assert sqlite_stores.runs.run_get(lease.fence.run_id).attempts[0].status == "starting"
        take_over(sqlite_stores, lease.fence.run_id)
        seam.wait_for_a_renewal()
        return prepare_log(log_dir, lease, spool=spool)

    monkeypatch.setattr(command, "prepare_log", lose_then_prepare)
    executor.start()
    deadline = time.monotonic() + WAIT_S
    while not seam.waited_for_renewal:
        assert time.monotonic() < deadline, "no renewal came while the start was held"
        time.sleep(0.02)
    wait_idle(executor)
    assert {f.run_id for f in seam.lost} == {run_id}
    assert seam.running == [], "the command was spawned under a lease known to be lost"
    assert any(d.code == LeaseLost.code for d in diagnostics)


def test_an_ending_being_recorded_is_not_reported_as_a_lost_lease(
        seam: RenewalSeam, sqlite_stores: SqliteStores, clock: FakeClock, executor: Executor,
        diagnostics: list[Diagnostic], tmp_path: Path) -> None:
    """10b: a renewal that lands after the ending committed and before the job left the list
    finds the lease gone; that is the ending, not a lost lease (no error line, nothing
    killed). Here the command never started (a missing working directory), so no process
    was reaped to say it had ended."""
    spec = CommandSpec(command=ShellCommand(command="true"),
                       working_directory=str(tmp_path / "missing"))
    [run_id] = admit(sqlite_stores, clock, spec)
    seam.after_finish = lambda _params: seam.wait_for_a_renewal()
    executor.start()
    detail = wait_terminal(sqlite_stores, run_id)
    wait_idle(executor)
    assert (detail.run.status, detail.run.error_code) == ("failed", "WORKING_DIRECTORY_MISSING")
    assert seam.waited_for_renewal, "no renewal came while the ending was held"
    assert {f.run_id for f in seam.lost} == {run_id}  # the race happened: the lease was gone
    assert [d for d in diagnostics if d.code == LeaseLost.code] == []


def test_a_renewal_stuck_in_the_driver_still_self_fences(
        seam: RenewalSeam, sqlite_stores: SqliteStores, clock: FakeClock,
        diagnostics: list[Diagnostic], tmp_path: Path) -> None:
    """10c: the watchdog kills the command once the leases may run out unrenewed, even while
    the renewal call itself never returns (it cannot raise, so nothing waits for it)."""
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="sleep 60")))
    executor = Executor(seam, SystemClock(), owner="review-executor",  # type: ignore[arg-type]
                        log_dir=tmp_path / "logs", poll_interval_s=0.05, lease_ms=1_000,
                        renew_every_s=0.05, diagnostics=diagnostics.append)
    try:
        executor.start()
        deadline = time.monotonic() + WAIT_S
        while not seam.running:
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.02)
        pid = seam.running[0].pid
        seam.hang.set()
        deadline = time.monotonic() + 5.0  # 0.8 of a 1 s lease, and a watchdog tick
        while process_running(pid):
            assert time.monotonic() < deadline, "the command outlived its unrenewed lease"
            time.sleep(0.05)
        assert not seam.release.is_set()  # killed while the renewal still hung
        assert any(d.code == LeaseLost.code and "not renewed" in d.message for d in diagnostics)
        assert sqlite_stores.runs.run_get(run_id).run.status == "running"  # the reconciler's
    finally:
        seam.release.set()
        executor.stop(0.5)


class Observer:
    def __init__(self) -> None:
        self.rescued: list[RescuedAttempt] = []
        self.diagnostics: list[Diagnostic] = []

    def admitted(self, *_args: object) -> None:
        pass

    def finished(self, _finished: object) -> None:
        pass

    def reconciled(self, attempt: RescuedAttempt) -> None:
        self.rescued.append(attempt)

    def diagnostic(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)


def test_serve_settles_a_self_fenced_attempt_without_a_restart(
        sqlite_stores: SqliteStores, clock: FakeClock, tmp_path: Path) -> None:
    """10d: on the SQLite single-server profile an Attempt whose command was self-fenced is
    settled by the server's own reconciler once its lease ran out (plus the grace), not left
    ``running`` until the next `ql serve`. The fake clock jumps past the lease: the watchdog
    (or the refused renewal) kills the command, the reconciler records the loss."""
    [run_id] = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="sleep 60")))
    sqlite_stores.definitions.trigger_delete("demo", "job-t")  # nothing more is admitted
    observer = Observer()
    app = LocalApp(LocalServeConfig(database_path=sqlite_stores.path, log_dir=tmp_path / "logs",
                                    drain_timeout_s=0.5, stop_timeout_s=5.0), clock,
                   observer)  # type: ignore[arg-type]
    try:
        app.start()
        deadline = time.monotonic() + WAIT_S
        while (detail := sqlite_stores.runs.run_get(run_id)).run.status != "running":
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.05)
        pid = detail.attempts[0].pid
        assert pid is not None
        clock.set(clock.now_ms() + LOCAL_LEASE_MS + 10_000)  # past the lease and the grace
        deadline = time.monotonic() + WAIT_S
        while (detail := sqlite_stores.runs.run_get(run_id)).run.status == "running":
            assert time.monotonic() < deadline, "the self-fenced attempt stayed running"
            time.sleep(0.05)
        assert (detail.run.status, detail.attempts[0].status) == ("lost", "lost")
        assert [a.run_id for a in observer.rescued] == [run_id]
        # the rescue commits, then fences the command: waited for on the condition, with the
        # suite's bound for a condition (a detector of a command left to run out its 60 s, not
        # a latency figure: 2 s here failed once on a loaded machine)
        deadline = time.monotonic() + WAIT_S
        while process_running(pid):
            assert time.monotonic() < deadline, "the lost attempt's command still runs"
            time.sleep(0.02)
    finally:
        app.stop()


