"""Fixtures of the execution tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from qinglong.clock import SystemClock
from qinglong.domain.model import RunDetail
from qinglong.domain.task import CommandSpec
from qinglong.execution.executor import Executor, RunFinished
from qinglong.execution.identity import Identity
from qinglong.execution.scripts import Fetch
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores
from tests.execution.test_local_executor import admit, wait_terminal

RunCommand = Callable[..., RunDetail]


@pytest.fixture
def run(sqlite_stores: SqliteStores, clock: FakeClock, tmp_path: Path) -> Iterator[RunCommand]:
    """Publish a task of ``spec``, admit one Run of it and let a real executor (``identity``:
    its niceness, run-as user and memory cgroups; ``scripts``: the content of a script task
    by its digest) run it to its end; the Run's detail. Each call's executor is stopped before
    the call returns, so the next call's Run is leased by the next call's executor alone (one
    still polling would take it with its own identity)."""
    running: list[Executor] = []

    def go(spec: CommandSpec, identity: Identity | None = None, task: str = "job",
           scripts: Fetch | None = None) -> RunDetail:
        [run_id] = admit(sqlite_stores, clock, spec, task=task)
        executor = Executor(sqlite_stores.runs, SystemClock(), owner="limits",
                            log_dir=tmp_path / "logs", poll_interval_s=0.05, identity=identity,
                            scripts=scripts)
        running.append(executor)
        executor.start()
        try:
            return wait_terminal(sqlite_stores, run_id)
        finally:
            executor.stop(0.5)
            running.remove(executor)

    yield go
    for executor in running:  # a call that failed before its executor was stopped
        executor.stop(0.5)


@pytest.fixture
def make_executor(sqlite_stores: SqliteStores, tmp_path: Path) -> Iterator:
    made: list[Executor] = []
    finished: list[RunFinished] = []

    def build(**kw: object) -> Executor:
        options: dict[str, object] = {"log_dir": tmp_path / "logs", "poll_interval_s": 0.05,
                                      "on_finished": finished.append, "owner": "test-executor"}
        options.update(kw)
        executor = Executor(sqlite_stores.runs, SystemClock(), **options)  # type: ignore[arg-type]
        made.append(executor)
        return executor

    build.finished = finished  # type: ignore[attr-defined]
    yield build
    for executor in made:
        executor.stop(0.5)
