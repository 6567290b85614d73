"""Shared fixtures: a fake clock and migrated SQLite stores; how `make test` runs in parallel."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.definitions import SqliteDefinitionStore
from qinglong.storage.sqlite.migrate import migrate
from qinglong.storage.sqlite.runs import SqliteRunStore
from qinglong.storage.sqlite.scheduling import SqliteScheduleStore
from qinglong.testing import FakeClock

pytest_plugins = ["tests.support.pg"]

settings.register_profile("qinglong", deadline=None, print_blob=True)
settings.load_profile("qinglong")

# `make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadgroup`). The tests
# that judge real time (fault injection, the soak, whole clusters and servers timed end to
# end) form one group: xdist gives it to one worker, which runs them one after another, never
# two at once, as a plain `pytest` would. The other worker takes the rest, and (as root, who
# may raise a process's priority back) at a lower CPU priority while a timed test runs beside
# it, so the timed tests see the machine as they would alone. Without xdist nothing changes.
TIMED_GROUP = "timed"
TIMED_FOLDERS = ("faults",)
TIMED_FILES = ("test_cluster_e2e.py", "test_cluster_clock.py", "test_serve_exactly_once.py")
BULK_NICENESS = 10


def is_timed(item: pytest.Item) -> bool:
    return item.path.parent.name in TIMED_FOLDERS or item.path.name in TIMED_FILES


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if is_timed(item):
            item.add_marker(pytest.mark.xdist_group(TIMED_GROUP))


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
    db: SqliteDatabase
    path: Path
    definitions: SqliteDefinitionStore
    schedules: SqliteScheduleStore
    runs: SqliteRunStore


@pytest.fixture
def sqlite_stores(tmp_path: Path, clock: FakeClock) -> Iterator[SqliteStores]:
    path = tmp_path / "ql.db"
    db = SqliteDatabase(path, create=True)
    migrate(db, clock)
    counter = itertools.count(1)
    stores = SqliteStores(
        db=db,
        path=path,
        definitions=SqliteDefinitionStore(db, clock),
        schedules=SqliteScheduleStore(db, clock),
        runs=SqliteRunStore(db, clock, new_id=lambda: f"00000000-0000-4000-8000-{next(counter):012d}"),
    )
    yield stores
    db.close()
