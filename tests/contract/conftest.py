"""The storage contract: one suite, every adapter that implements a port."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from qinglong.storage.ports import DefinitionStore, RunReadStore
from tests.conftest import SqliteStores


@dataclass
class Backend:
    name: str
    definitions: DefinitionStore
    runs: RunReadStore
    execute: Callable[[str], None]  # raw SQL for tampering (test-only)


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest, sqlite_stores: SqliteStores) -> Iterator[Backend]:
    def execute(sql: str) -> None:
        sqlite_stores.db.connection().execute(sql)

    yield Backend(
        name="sqlite",
        definitions=sqlite_stores.definitions,
        runs=sqlite_stores.runs,
        execute=execute,
    )
