"""Fixtures for PostgreSQL-only tests: stores as each role, on independent connections."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.storage.admission import ScheduleStore
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.kernel import Database
from qinglong.storage.postgres.connection import SessionSettings, SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.runs import RunStore
from tests.support.pg import PgTestDatabase


@dataclass
class Cluster:
    db: PgTestDatabase
    admin: DefinitionStore
    runs: RunStore
    _connectors: list[SingleConnector] = field(default_factory=list)

    def connector(self, role: str = "ql_runtime", name: str = "test") -> SingleConnector:
        connector = SingleConnector(self.db.url(role), application_name=name, settings=SessionSettings())
        self._connectors.append(connector)
        return connector

    def database(self, role: str = "ql_runtime", name: str = "test") -> Database:
        """The kernel over a connection of its own, as a replica opens it (session settings
        turn sequential scans off)."""
        return open_postgres(self.connector(role, name), index_scans_only=True)

    def store(self, name: str = "replica", **kw: object) -> ScheduleStore:
        return ScheduleStore(self.database(name=name), actor_id=name, **kw)  # type: ignore[arg-type]

    def db_now(self) -> int:
        return int(self.db.execute(
            "SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS n")[0]["n"])  # type: ignore[call-overload]

    def publish(self, trigger: str, cron: str = "* * * * * *", task: str = "hello",
                misfire: str = "skip", timezone: str = "UTC") -> None:
        self.admin.trigger_publish(TriggerPublishParams(
            project_id="demo", trigger_id=trigger, task_id=task, expression=cron,
            timezone=timezone, misfire_policy=misfire))

    def make_due(self, trigger: str, at_ms: int | None = None) -> int:
        """Set a trigger's cursor to the database's now (or ``at_ms``), as a fixture would."""
        at = self.db_now() // 1000 * 1000 if at_ms is None else at_ms
        self.db.execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = %s, state_version = state_version + 1 "
            "WHERE trigger_id = %s", [at, trigger])
        return at

    def count(self, table: str, where: str = "TRUE", params: object = None) -> int:
        return int(self.db.execute(f"SELECT count(*) AS n FROM {table} WHERE {where}", params)[0]["n"])  # type: ignore[call-overload]

    def close(self) -> None:
        for connector in self._connectors:
            connector.close()


@contextmanager
def cluster_on(db: PgTestDatabase, *, fresh: bool = True) -> Iterator[Cluster]:
    """A Cluster over ``db``; ``fresh``: create the demo project and its hello task first (a
    copy of a database that has them already is not fresh)."""
    admin_connector = SingleConnector(db.url("ql_admin"), application_name="admin")
    runtime_connector = SingleConnector(db.url("ql_runtime"), application_name="reader")
    c = Cluster(db=db, admin=DefinitionStore(open_postgres(admin_connector)),
                runs=RunStore(open_postgres(runtime_connector), actor_id="cluster"))
    c._connectors += [admin_connector, runtime_connector]
    try:
        if fresh:
            c.admin.project_create(ProjectCreateParams(project_id="demo"))
            c.admin.task_publish(TaskPublishParams(
                project_id="demo", task_id="hello", name="Hello",
                spec=CommandSpec(command=ShellCommand(command="echo hi"))))
        yield c
    finally:
        c.close()


@pytest.fixture
def cluster(pg_db: PgTestDatabase) -> Iterator[Cluster]:
    with cluster_on(pg_db) as c:
        yield c


@pytest.fixture
def controls() -> Iterator[list[Any]]:
    """The in-process `ql control` replicas a test started (test_control.Running): each is
    shut down after the test if it still runs."""
    started: list[Any] = []
    yield started
    for running in started:
        if running.thread.is_alive():
            running.shutdown()


@pytest.fixture
def ids() -> Callable[[], str]:
    import uuid

    return lambda: str(uuid.uuid4())
