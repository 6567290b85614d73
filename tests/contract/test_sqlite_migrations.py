"""The SQLite migration stream: ordered, checksummed, drift refused and never repaired."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from qinglong.errors import NotReady
from qinglong.storage.migrations import AppliedMigration, Migration, audit_history, load_migrations
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import MIGRATIONS, check_schema, migrate
from qinglong.testing import FakeClock

TABLES = {
    "projects", "task_definitions", "task_definition_revisions", "task_execution_revisions",
    "triggers", "trigger_revisions", "trigger_schedules", "trigger_schedule_misfires",
    "runs", "run_attempts", "run_events", "schema_migrations",
}


def fresh(tmp_path: Path) -> SqliteDatabase:
    return SqliteDatabase(tmp_path / "m.db", create=True)


def test_migrate_creates_the_named_tables_and_is_idempotent(tmp_path: Path) -> None:
    db = fresh(tmp_path)
    report = migrate(db, FakeClock())
    assert report.applied == tuple(m.id for m in MIGRATIONS)
    names = {r["name"] for r in db.connection().execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert TABLES <= names
    assert migrate(db, FakeClock()).applied == ()
    check_schema(db)
    journal = db.connection().execute("PRAGMA journal_mode").fetchone()["journal_mode"]
    assert journal == "wal"


def test_the_ledger_records_checksums_of_the_files(tmp_path: Path) -> None:
    db = fresh(tmp_path)
    migrate(db, FakeClock(now_ms=42))
    rows = db.connection().execute("SELECT * FROM schema_migrations").fetchall()
    assert [(r["migration_id"], r["checksum"], r["applied_at_ms"]) for r in rows] == [
        (m.id, m.checksum, 42) for m in MIGRATIONS
    ]


@pytest.mark.parametrize(
    ("statement", "finding"),
    [
        ("UPDATE schema_migrations SET checksum = '{}'".format("0" * 64), "checksum-mismatch:0001_core"),
        ("INSERT INTO schema_migrations VALUES ('0099_future', 'sqlite-main', 'sqlite', '{}', 1)".format("a" * 64),
         "unknown-migration:0099_future"),
    ],
    ids=["changed-checksum", "unknown-id"],
)
def test_history_drift_is_refused_by_migrate_and_by_every_reader(
    tmp_path: Path, statement: str, finding: str
) -> None:
    db = fresh(tmp_path)
    migrate(db, FakeClock())
    db.connection().execute(statement)
    before = db.connection().execute("SELECT * FROM schema_migrations ORDER BY migration_id").fetchall()
    with pytest.raises(NotReady) as refused:
        migrate(db, FakeClock())
    assert finding in refused.value.findings
    with pytest.raises(NotReady):
        check_schema(db)
    after = db.connection().execute("SELECT * FROM schema_migrations ORDER BY migration_id").fetchall()
    assert after == before  # never auto-repaired


def test_an_unmigrated_database_is_not_ready(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "m.db").close()
    db = SqliteDatabase(tmp_path / "m.db")
    with pytest.raises(NotReady) as refused:
        check_schema(db)
    assert refused.value.findings == tuple(f"missing-migration:{m.id}" for m in MIGRATIONS)


def test_audit_history_finds_gaps_and_order_problems() -> None:
    code = (Migration("0001_a", "", "1" * 64), Migration("0002_b", "", "2" * 64), Migration("0003_c", "", "3" * 64))
    assert audit_history([AppliedMigration("0001_a", "1" * 64)], code) == []
    assert audit_history([AppliedMigration("0002_b", "2" * 64)], code) == ["migration-out-of-order:0002_b"]
    assert audit_history(
        [AppliedMigration("0001_a", "1" * 64), AppliedMigration("0003_c", "3" * 64)], code
    ) == ["migration-out-of-order:0003_c"]


def test_migration_files_are_a_contiguous_numbered_stream() -> None:
    stream = load_migrations("qinglong.storage.sqlite")
    assert [int(m.id[:4]) for m in stream] == list(range(1, len(stream) + 1))
