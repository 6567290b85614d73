"""`ql db migrate` on a SQLite file whose ``schema_migrations`` table belongs to another tool
(Rails, Ecto and golang-migrate all use that name): refused with one clear error naming the
file, before anything in it changes (no WAL, no application_id), and refused again by every
other command. The CLI runs in-process (see test_cli_errors.py)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from qinglong.storage.sqlite.migrate import APPLICATION_ID, MIGRATIONS
from tests.e2e.test_cli_errors import Result, assert_one_line_error, dump, ql  # noqa: F401

FOREIGN_LEDGERS = {
    "rails": ("CREATE TABLE schema_migrations (version varchar NOT NULL PRIMARY KEY)",
              "CREATE TABLE ar_internal_metadata (key varchar PRIMARY KEY, value varchar)",
              "INSERT INTO schema_migrations VALUES ('20240101000000')"),
    "ecto": ("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, inserted_at TEXT)",
             "INSERT INTO schema_migrations VALUES (20240101000000, '2024-01-01')"),
    "golang-migrate": ("CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean)",
                       "INSERT INTO schema_migrations VALUES (3, 0)"),
    # our columns, another stream: not ours either
    "other-stream": (("CREATE TABLE schema_migrations (migration_id TEXT PRIMARY KEY, "
                      "stream_id TEXT, dialect TEXT, checksum TEXT, applied_at_ms INTEGER)"),
                     ("INSERT INTO schema_migrations VALUES ('0001_core', 'billing', 'sqlite', "
                      f"'{'a' * 64}', 1)")),
}


def header(path: Path) -> tuple[int, str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return (conn.execute("PRAGMA application_id").fetchone()[0],
                conn.execute("PRAGMA journal_mode").fetchone()[0])


def make(path: Path, statements: tuple[str, ...]) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for statement in statements:
            conn.execute(statement)
        conn.commit()


@pytest.fixture(autouse=True)
def _no_ambient_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("tool", sorted(FOREIGN_LEDGERS))
def test_migrate_refuses_another_tools_ledger_and_changes_nothing(
        ql: Callable[..., Result], tmp_path: Path, tool: str) -> None:  # noqa: F811
    path = tmp_path / "app.db"
    make(path, FOREIGN_LEDGERS[tool])
    before = dump(path)
    url = f"sqlite:///{path}"
    for _ in range(2):  # and not accepted the second time either
        result = ql("db", "migrate", "--database-url", url)
        assert_one_line_error(result, 3, str(path), "not a qinglong", "schema_migrations")
        assert dump(path) == before
        assert header(path) == (0, "delete")  # neither stamped nor switched to WAL


def test_a_file_an_older_version_stamped_is_refused_by_every_command(
        ql: Callable[..., Result], tmp_path: Path) -> None:  # noqa: F811
    """Older versions set WAL and our application_id before failing on the foreign ledger;
    such a file must still be refused, by migrate and by everything that reads the schema."""
    path = tmp_path / "stamped.db"
    make(path, FOREIGN_LEDGERS["rails"])
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    before = dump(path)
    url = f"sqlite:///{path}"
    assert_one_line_error(ql("db", "migrate", "--database-url", url), 3, str(path),
                          "schema_migrations")
    assert_one_line_error(ql("task", "list", "--project", "demo", "--database-url", url), 3,
                          str(path), "schema_migrations")
    assert dump(path) == before


def test_a_qinglong_file_still_migrates_and_is_stamped(
        ql: Callable[..., Result], tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "ql.db"
    url = f"sqlite:///{path}"
    assert ql("db", "migrate", "--database-url", url).code == 0
    assert header(path) == (APPLICATION_ID, "wal")
    assert ql("db", "migrate", "--database-url", url).code == 0
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT migration_id FROM schema_migrations").fetchall()
    assert [r[0] for r in rows] == [m.id for m in MIGRATIONS]


def test_an_interrupted_first_migrate_leaves_an_empty_ledger_that_is_accepted(
        ql: Callable[..., Result], tmp_path: Path) -> None:  # noqa: F811
    """Our own empty ledger (a first migrate that stopped after creating it) is not foreign."""
    path = tmp_path / "ql.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE schema_migrations (migration_id TEXT NOT NULL PRIMARY KEY, "
                      "stream_id TEXT NOT NULL, dialect TEXT NOT NULL, checksum TEXT NOT NULL, "
                      "applied_at_ms INTEGER NOT NULL) STRICT")
    result = ql("db", "migrate", "--database-url", f"sqlite:///{path}")
    assert result.code == 0, result.err
    assert header(path) == (APPLICATION_ID, "wal")
