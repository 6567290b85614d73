"""The SQLite migration runner and the schema check every other command runs first."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from qinglong.clock import Clock
from qinglong.errors import DatabaseCorrupt, NotReady, StorageError
from qinglong.storage.migrations import AppliedMigration, audit_history, load_migrations, pending
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase
from qinglong.storage.sqlite.errors import translate

MIGRATIONS = load_migrations("qinglong.storage.sqlite")
APPLICATION_ID = 0x716C6E67  # "qlng" in the file header: this file is a qinglong database


@dataclass(frozen=True, slots=True)
class MigrateReport:
    applied: tuple[str, ...]
    current: str | None


def _history(conn: sqlite3.Connection) -> list[AppliedMigration]:
    if conn.execute(QUERIES["ledger_exists"]).fetchone()["n"] == 0:
        return []
    return [
        AppliedMigration(id=row["migration_id"], checksum=row["checksum"])
        for row in conn.execute(QUERIES["ledger_list"])
    ]


LEDGER = "schema_migrations"
LEDGER_COLUMNS = ("migration_id", "stream_id", "dialect", "checksum", "applied_at_ms")
STREAM = ("sqlite-main", "sqlite")  # (stream_id, dialect) of every row of our ledger


def check_ledger(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a ``schema_migrations`` table that is not qinglong's (Rails, Ecto and
    golang-migrate use the name too): it must have our columns, and every row must belong to
    our stream. Reads only."""
    if conn.execute(QUERIES["ledger_exists"]).fetchone()["n"] == 0:
        return
    columns = [row["name"] for row in conn.execute("PRAGMA table_info(schema_migrations)").fetchall()]
    if sorted(columns) != sorted(LEDGER_COLUMNS):
        raise NotReady(["foreign-migration-ledger"],
                       f"{path!r} is not a qinglong database: its {LEDGER} table has the columns "
                       f"({', '.join(columns)}), not qinglong's ({', '.join(LEDGER_COLUMNS)}), so "
                       "another tool's migrations live there; refusing to touch it: name a new "
                       "file instead")
    streams = {(row["stream_id"], row["dialect"]) for row in conn.execute(
        "SELECT DISTINCT stream_id, dialect FROM schema_migrations").fetchall()}
    foreign = sorted(f"{stream}/{dialect}" for stream, dialect in streams - {STREAM})
    if foreign:
        raise NotReady(["foreign-migration-ledger"],
                       f"{path!r} is not a qinglong SQLite database: its {LEDGER} table records "
                       f"the migration stream(s) {', '.join(foreign)}, not {'/'.join(STREAM)}; "
                       "refusing to touch it: name a new file instead")


def check_ours(conn: sqlite3.Connection, path: str) -> None:
    """Refuse to add qinglong's tables to a SQLite file that holds someone else's data: one
    with tables but no migration ledger, or whose ledger is not qinglong's. The ledger is
    checked even when the file carries our application_id (older versions stamped a foreign
    file before they found out). Reads only."""
    check_ledger(conn, path)
    if conn.execute("PRAGMA application_id").fetchone()["application_id"] == APPLICATION_ID:
        return
    tables = [row["name"] for row in conn.execute(QUERIES["user_tables"]).fetchall()]
    if tables and LEDGER not in tables:
        listed = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        raise NotReady(["foreign-database"],
                       f"{path!r} is not a qinglong database (it holds the tables {listed}); "
                       "refusing to add qinglong's tables to it: name a new file instead")


def migrate(db: SqliteDatabase, clock: Clock) -> MigrateReport:
    """Apply pending migrations, each in its own transaction; refuse history drift and
    files that belong to something else. Nothing is changed (not the journal mode, not the
    application_id) until the file and its ledger have passed those checks."""
    conn = db.connection()
    try:
        check_ours(conn, str(db.path))
    except sqlite3.Error as exc:
        raise translate(exc, "migrate") from exc
    with db.write("create migration ledger") as tx:
        tx.execute(QUERIES["ledger_create"])
        history = _history(tx)
    findings = audit_history(history, MIGRATIONS)
    if findings:
        raise NotReady(findings, "migration history drift: " + ", ".join(findings))
    try:
        conn.execute("PRAGMA journal_mode = WAL")  # persistent: readers never block the writer
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")  # the ledger is ours
    except sqlite3.Error as exc:
        raise translate(exc, "migrate") from exc
    applied: list[str] = []
    for migration in pending(history, MIGRATIONS):
        try:
            # executescript runs the DDL inside our explicit transaction; the ledger row
            # commits with it, so a crash leaves either both or neither.
            conn.executescript("BEGIN IMMEDIATE;\n" + migration.sql)
            if len(_history(conn)) != len(history) + len(applied):
                raise NotReady(["concurrent-migration"], "another runner migrated meanwhile")
            conn.execute(
                QUERIES["ledger_insert"],
                {
                    "migration_id": migration.id,
                    "checksum": migration.checksum,
                    "applied_at_ms": clock.now_ms(),
                },
            )
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StorageError(f"migration {migration.id} failed: {exc}") from exc
            raise
        applied.append(migration.id)
    return MigrateReport(applied=tuple(applied), current=MIGRATIONS[-1].id if MIGRATIONS else None)


def check_integrity(db: SqliteDatabase) -> list[str]:
    """SQLite's own check of the file's pages and indexes (``PRAGMA quick_check``)."""
    try:
        with db.read("check the database file") as conn:
            rows = conn.execute("PRAGMA quick_check(20)").fetchall()
    except DatabaseCorrupt as exc:
        return [f"integrity:{exc.message}"]
    problems = [str(next(iter(row.values()))) for row in rows]
    return [] if problems == ["ok"] else [f"integrity:{problem}" for problem in problems]


def check_schema(db: SqliteDatabase) -> None:
    """Raise NotReady unless the ledger equals the code's migration stream exactly."""
    with db.read("read migration ledger") as conn:
        check_ledger(conn, str(db.path))
        history = _history(conn)
    findings = audit_history(history, MIGRATIONS)
    if findings:
        raise NotReady(findings, "migration history drift: " + ", ".join(findings))
    missing = pending(history, MIGRATIONS)
    if missing:
        raise NotReady(
            [f"missing-migration:{m.id}" for m in missing],
            "database schema is not up to date; run `ql db migrate`",
        )
