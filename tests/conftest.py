"""Shared fixtures: a fake clock and migrated SQLite stores; how `make test` runs in parallel."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from qinglong.storage.admission import ScheduleStore
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.kernel import Database
from qinglong.storage.runs import RunStore
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.driver import open_sqlite
from qinglong.storage.sqlite.migrate import migrate
from qinglong.testing import FakeClock
from tests.support.ql_process import forked_cpu_seconds

pytest_plugins = ["tests.support.pg"]

settings.register_profile("qinglong", deadline=None, print_blob=True)
settings.load_profile("qinglong")

# `make test` runs the suite on six pytest-xdist workers (`-n 6 --dist loadgroup`), on two
# cores. Once the `ql` commands were forked from a warm process (tests/support/ql_process.py)
# the run was no longer bound by the cores: with four workers they were 35 % idle (10 s
# samples), the workers waiting together on real time (a database-clock instant a few seconds
# ahead, a server's start); six workers fill that (16 % idle) and took 681 s of pytest against
# 756 s with four (clean-clone runs R4 and R5 on 2026-12-06). The tests that judge real time (fault
# injection, the soak, whole clusters and servers timed end to end) run at full CPU priority,
# in three work units that the scheduler below hands out first, each to a worker of its own
# that runs its tests one after another as a plain `pytest` would: two heavy ones (the
# clusters, workers and servers under faults, the soak; in halves of about 350 s, so that
# neither sets the length of the whole run, as the single unit of 693 s did) and a light one
# (a single `ql serve` on SQLite, the harness's own primitives, one replica behind a wire
# proxy). Every other test runs (as root, who may raise a process's priority back) at a
# lower priority, so the timed tests get the cores first. (xdist's own `xdist_group` marks
# did not group anything here with pytest 9.2 and xdist 3.8, so the group is read from the
# test's path instead.) Without xdist nothing changes.
TIMED_GROUP = "timed"
TIMED_SECOND_GROUP = "timed-2"
TIMED_LIGHT_GROUP = "timed-light"
TIMED_FOLDERS = ("faults",)
TIMED_FILES = ("test_cluster_e2e.py", "test_cluster_clock.py", "test_serve_exactly_once.py",
               "test_schedule_wakeups.py")
TIMED_SECOND_FILES = ("test_replica_faults.py", "test_server_faults.py", "test_soak.py",
                      "test_cluster_clock.py", "test_schedule_wakeups.py")
TIMED_LIGHT_FILES = ("test_serve_exactly_once.py", "test_primitives.py", "test_wire_faults.py")
BULK_NICENESS = 10
# Folders whose modules share an expensive module-scoped setup (the browser suite: a `ql serve`
# and a headless chromium per module, about 20 s on a loaded machine): each module is one work
# unit, so one worker sets it up once instead of every worker that got one of its tests.
MODULE_UNIT_FOLDERS = ("browser",)


def is_timed_path(path: str) -> bool:
    parts = path.split("::", 1)[0].split("/")
    return (len(parts) > 1 and parts[-2] in TIMED_FOLDERS) or parts[-1] in TIMED_FILES


def work_unit(nodeid: str) -> str:
    """The xdist work unit of a test: a timed group, its module, or the test itself."""
    module = nodeid.split("::", 1)[0]
    parts = module.split("/")
    if is_timed_path(nodeid):
        if parts[-1] in TIMED_LIGHT_FILES:
            return TIMED_LIGHT_GROUP
        return TIMED_SECOND_GROUP if parts[-1] in TIMED_SECOND_FILES else TIMED_GROUP
    if len(parts) > 1 and parts[-2] in MODULE_UNIT_FOLDERS:
        return module
    return nodeid


def is_timed(item: pytest.Item) -> bool:
    return is_timed_path(item.nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class TimedGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """The timed tests in three work units (the largest, so handed out first), each module
        of the browser suite one unit, every other test a unit of its own."""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return TimedGroupScheduling(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """With QL_CPU_PROFILE=FILE, append each test's CPU seconds (its worker's own, those of
    the processes it started and waited for, and those of its forked `ql` commands) to FILE,
    one "seconds nodeid worker begin end" line per test (begin and end: os.times()'s elapsed
    seconds, one clock for every worker): where `make test`'s two cores go, and when each
    worker was busy with what."""
    target = os.environ.get("QL_CPU_PROFILE")
    if not target:
        return (yield)
    before, forked = os.times(), forked_cpu_seconds()
    try:
        return (yield)
    finally:
        after = os.times()
        spent = sum(after[:4]) - sum(before[:4]) + forked_cpu_seconds() - forked
        worker = os.environ.get("PYTEST_XDIST_WORKER", "-")
        with open(target, "a") as out:  # then the worker and when the test began and ended
            out.write(f"{spent:.2f} {item.nodeid} {worker} {before[4]:.1f} {after[4]:.1f}\n")


@pytest.fixture(autouse=True)
def _cpu_priority(request: pytest.FixtureRequest) -> None:
    """Under xdist as root: full priority for a timed test (and what it starts), lower for the
    rest. A process may lower its own priority but only root may raise it back, so elsewhere
    the priority is left alone."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None or os.geteuid() != 0:
        return
    niceness = 0 if is_timed(request.node) else BULK_NICENESS
    if os.getpriority(os.PRIO_PROCESS, 0) != niceness:
        os.setpriority(os.PRIO_PROCESS, 0, niceness)

# 2027-01-14T08:00:00Z, a round instant far from any DST transition.
BASE_MS = 1_799_913_600_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(BASE_MS)


@dataclass
class SqliteStores:
    db: SqliteDatabase  # the file, for statements a test runs itself
    database: Database  # the kernel every store is written over
    path: Path
    definitions: DefinitionStore
    schedules: ScheduleStore
    runs: RunStore


@pytest.fixture
def sqlite_stores(tmp_path: Path, clock: FakeClock) -> Iterator[SqliteStores]:
    path = tmp_path / "ql.db"
    db = SqliteDatabase(path, create=True)
    migrate(db, clock)
    counter = itertools.count(1)
    database = open_sqlite(db, clock)
    stores = SqliteStores(
        db=db,
        database=database,
        path=path,
        definitions=DefinitionStore(database),
        schedules=ScheduleStore(database, actor_id="standalone"),
        runs=RunStore(database, actor_id="standalone",
                      new_id=lambda: f"00000000-0000-4000-8000-{next(counter):012d}"),
    )
    yield stores
    db.close()
