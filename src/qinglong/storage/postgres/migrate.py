"""The PostgreSQL migration runner: ordered, checksummed, one transaction per migration under
a try-lock advisory lock (a second runner fails fast), drift refused and never repaired."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg import sql

from qinglong.errors import NotReady, StorageError
from qinglong.storage.migrations import AppliedMigration, audit_history, load_migrations, pending
from qinglong.storage.postgres.connection import QUERIES, PgConnection, rollback_quietly
from qinglong.storage.postgres.errors import translate
from qinglong.storage.postgres.roles import MIGRATION

MIGRATIONS = load_migrations("qinglong.storage.postgres")


@dataclass(frozen=True, slots=True)
class MigrateReport:
    applied: tuple[str, ...]
    current: str | None


def history(conn: PgConnection) -> list[AppliedMigration]:
    present = conn.execute(QUERIES["ledger_exists"]).fetchone()
    if not present or not present["present"]:
        return []
    return [AppliedMigration(id=r["migration_id"], checksum=r["checksum"].strip())
            for r in conn.execute(QUERIES["ledger_list"])]


def _as_migration_role(conn: PgConnection) -> None:
    """Run DDL as ql_migration so it owns every object (a superuser can SET ROLE to it)."""
    role = conn.execute("SELECT current_user AS name").fetchone()
    assert role is not None
    if role["name"] != MIGRATION:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(MIGRATION)))


def migrate(conn: PgConnection) -> MigrateReport:
    """Apply pending migrations; ``conn`` is autocommit, as ql_migration or a superuser."""
    try:
        _as_migration_role(conn)
        return _migrate(conn)
    finally:
        if not conn.closed and not conn.broken:
            conn.execute("RESET ROLE")


@contextmanager
def _locked_transaction(conn: PgConnection) -> Iterator[None]:
    """A transaction with bounded lock waits that holds the migration lock (NotReady when
    another migration runner holds it), rolled back when it fails."""
    try:
        conn.execute("BEGIN")
        conn.execute(QUERIES["migration_timeouts"])
        locked = conn.execute(QUERIES["migration_try_lock"]).fetchone()
        if not locked or not locked["locked"]:
            raise NotReady(["migration-lock-held"], "another migration runner holds the lock")
        yield
    except (NotReady, psycopg.Error):
        rollback_quietly(conn)
        raise


def _migrate(conn: PgConnection) -> MigrateReport:
    try:
        with _locked_transaction(conn):
            conn.execute(QUERIES["ledger_bootstrap"])
            conn.execute("COMMIT")
    except psycopg.Error as exc:
        raise translate(exc, "create the migration ledger", conn) from exc
    applied: list[str] = []
    for migration in MIGRATIONS:
        try:
            with _locked_transaction(conn):
                done = history(conn)
                findings = audit_history(done, MIGRATIONS)
                if findings:
                    raise NotReady(findings, "migration history drift: " + ", ".join(findings))
                if migration not in pending(done, MIGRATIONS):
                    conn.execute("ROLLBACK")
                    continue
                conn.execute(migration.sql.encode("utf-8"))
                conn.execute(QUERIES["ledger_insert"],
                             {"migration_id": migration.id, "checksum": migration.checksum})
                conn.execute("COMMIT")
        except psycopg.Error as exc:
            detail = exc.diag.message_primary if exc.diag else None
            if detail and not isinstance(exc, psycopg.OperationalError):
                raise StorageError(f"migration {migration.id} failed: {detail}") from exc
            raise translate(exc, f"migration {migration.id}", conn) from exc
        applied.append(migration.id)
    return MigrateReport(applied=tuple(applied), current=MIGRATIONS[-1].id)
