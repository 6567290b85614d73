"""The PostgreSQL driver of the storage kernel: the database clock, SERIALIZABLE writes with
bounded retries, COMMIT under a client-side deadline, NOTIFY for wake-ups.

Every connection is in autocommit mode and transactions are explicit, so a statement run
outside one (a claim) commits by itself. Only 40001, 40P01 and 55P03 before COMMIT are
conflicts worth running again; a COMMIT the server answered with 40001 or 40P01 rolled
back for sure; a COMMIT whose reply never came is never retried (connection.commit).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import LiteralString

import psycopg

from qinglong.domain.task import ExecutorType
from qinglong.errors import QinglongError
from qinglong.storage.dbapi import Connection
from qinglong.storage.kernel import Capabilities, CommitReceipt, Database, Isolation, Wake
from qinglong.storage.postgres.connection import (
    QUERIES,
    Connector,
    PgConnection,
    commit,
    deadline,
    rollback_quietly,
)
from qinglong.storage.postgres.errors import is_retryable, sqlstate, translate

CAPABILITIES = Capabilities(
    name="postgresql",
    database_clock=True,
    shared=True,
    set_based_writes=True,
    listen=True,
    roles=True,
    logs_in_database=True,
    executor_type=ExecutorType.REMOTE_WORKER,
)
CHANNEL_PREFIX = "qinglong_"  # topic "schedules" is NOTIFY channel "qinglong_schedules"
_BEGIN: dict[Isolation, LiteralString] = {
    "serializable": "BEGIN ISOLATION LEVEL SERIALIZABLE",
    "read committed": "BEGIN ISOLATION LEVEL READ COMMITTED",
}
_SNAPSHOT: LiteralString = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


def _pg(conn: Connection) -> PgConnection:
    assert isinstance(conn, psycopg.Connection)
    return conn


class PgDriver:
    capabilities = CAPABILITIES
    queries = QUERIES
    error = psycopg.Error

    def __init__(self, connector: Connector,
                 on_commit: Callable[[Sequence[Wake]], None] | None = None, *,
                 index_scans_only: bool = False) -> None:
        """``index_scans_only``: the connector's sessions already turn sequential scans off
        (prepare_session); otherwise every SERIALIZABLE write turns them off for itself."""
        self.connector = connector
        self._on_commit = on_commit
        self._tuned = index_scans_only

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        with self.connector.connection() as conn:
            yield conn

    def begin(self, conn: Connection, *, write: bool, isolation: Isolation,
              snapshot: bool) -> bool:
        if write:
            conn.execute(_BEGIN[isolation])
            if isolation == "serializable" and not self._tuned:
                # A sequential scan under SERIALIZABLE predicate-locks a whole table, so two
                # unrelated writes would conflict: index scans only, in this transaction.
                conn.execute(QUERIES["serializable_session"], {})
            return True
        if snapshot:
            conn.execute(_SNAPSHOT)
            return True
        return False  # autocommit statements: each reads its own snapshot

    def announce(self, conn: Connection, wakes: Sequence[Wake]) -> None:
        for wake in wakes:  # delivered by the server only if the COMMIT lands
            conn.execute(QUERIES["wake"], {"channel": CHANNEL_PREFIX + wake.topic,
                                           "payload": wake.payload})

    def commit(self, conn: Connection, *, deadline_s: float) -> CommitReceipt:
        return commit(_pg(conn), deadline_s=deadline_s)

    def bounded(self, conn: Connection, seconds: float) -> AbstractContextManager[None]:
        return deadline(_pg(conn), seconds)

    def array(self, values: Sequence[object]) -> object:
        return list(values)

    def rollback(self, conn: Connection) -> None:
        rollback_quietly(_pg(conn))

    def now_ms(self, conn: Connection) -> int:
        row = conn.execute(QUERIES["now_ms"], {}).fetchone()
        assert row is not None
        return int(row["now_ms"])

    def retryable(self, exc: BaseException) -> str | None:
        return str(sqlstate(exc)) if is_retryable(exc) else None

    def error_code(self, exc: BaseException) -> str | None:
        return sqlstate(exc)

    def translate(self, exc: BaseException, action: str, conn: Connection) -> QinglongError:
        return translate(exc, action, _pg(conn))

    def after_commit(self, wakes: Sequence[Wake]) -> None:
        if wakes and self._on_commit is not None:
            self._on_commit(wakes)

    def close(self) -> None:
        self.connector.close()


def open_postgres(connector: Connector,
                  on_commit: Callable[[Sequence[Wake]], None] | None = None, *,
                  index_scans_only: bool = False) -> Database:
    return Database(PgDriver(connector, on_commit, index_scans_only=index_scans_only))
