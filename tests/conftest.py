"""Shared fixtures: a fake clock and migrated SQLite stores."""

from __future__ import annotations

import itertools
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
