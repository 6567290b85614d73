"""The SQLite driver of the storage kernel: one writer, the node clock, no roles.

One `ql serve` serves a SQLite file at a time (it holds a lock beside the file), so a write
transaction is ``BEGIN IMMEDIATE`` on the calling thread's connection and nothing is
retried: SQLite's busy timeout already waits for a reader's checkpoint. Times come from the
injected Clock. A commit wakes this process's own listeners (see ``Wakeups``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext

from qinglong.clock import Clock
from qinglong.domain.task import ExecutorType
from qinglong.errors import QinglongError
from qinglong.storage.dbapi import Connection
from qinglong.storage.kernel import (
    DURABLE,
    Capabilities,
    CommitReceipt,
    Database,
    Isolation,
    Wake,
)
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase
from qinglong.storage.sqlite.errors import translate

CAPABILITIES = Capabilities(
    name="sqlite",
    database_clock=False,
    shared=False,
    set_based_writes=False,
    listen=False,
    roles=False,
    logs_in_database=False,
    executor_type=ExecutorType.LOCAL_PROCESS,
)


class SqliteDriver:
    capabilities = CAPABILITIES
    queries = QUERIES
    error = sqlite3.Error

    def __init__(self, file: SqliteDatabase, clock: Clock,
                 on_commit: Callable[[Sequence[Wake]], None] | None = None) -> None:
        self.file = file
        self.clock = clock
        self._on_commit = on_commit

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        yield self.file.connection()

    def begin(self, conn: Connection, *, write: bool, isolation: Isolation,
              snapshot: bool) -> bool:
        assert isinstance(conn, sqlite3.Connection)
        if write:
            self.file.begin_immediate(conn)  # the gate is left at COMMIT or ROLLBACK
        else:
            conn.execute("BEGIN")
        return True

    def announce(self, conn: Connection, wakes: Sequence[Wake]) -> None:
        return None  # one process serves the file: after_commit tells it

    def commit(self, conn: Connection, *, deadline_s: float) -> CommitReceipt:
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            self.rollback(conn)
            raise
        self.file.gate.leave()
        return DURABLE

    def bounded(self, conn: Connection, seconds: float) -> AbstractContextManager[None]:
        return nullcontext()  # a local file: nothing waits on another machine

    def array(self, values: Sequence[object]) -> object:
        return json.dumps(list(values), separators=(",", ":"))

    def rollback(self, conn: Connection) -> None:
        assert isinstance(conn, sqlite3.Connection)
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        finally:
            self.file.gate.leave()

    def now_ms(self, conn: Connection) -> int:
        return self.clock.now_ms()

    def retryable(self, exc: BaseException) -> str | None:
        return None

    def error_code(self, exc: BaseException) -> str | None:
        name = getattr(exc, "sqlite_errorname", None)
        return str(name) if name else None

    def translate(self, exc: BaseException, action: str, conn: Connection) -> QinglongError:
        assert isinstance(exc, sqlite3.Error)
        return translate(exc, action)

    def after_commit(self, wakes: Sequence[Wake]) -> None:
        if wakes and self._on_commit is not None:
            self._on_commit(wakes)

    def close(self) -> None:
        self.file.close()


def open_sqlite(file: SqliteDatabase, clock: Clock,
                on_commit: Callable[[Sequence[Wake]], None] | None = None) -> Database:
    return Database(SqliteDriver(file, clock, on_commit))
