"""Opening, migrating and checking a SQLite database file (storage/open.py dispatches here)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qinglong.clock import Clock
from qinglong.errors import DatabaseCorrupt, NotReady
from qinglong.storage.kernel import Wake
from qinglong.storage.sqlite.connection import SqliteDatabase, sqlite_path_from_url
from qinglong.storage.sqlite.driver import open_sqlite
from qinglong.storage.sqlite.migrate import check_integrity, check_schema, migrate
from qinglong.storage.stores import Stores


def open_sqlite_stores(url: str, clock: Clock, *, actor_id: str,
                       on_commit: Callable[[Sequence[Wake]], None] | None = None) -> Stores:
    file = SqliteDatabase(sqlite_path_from_url(url))
    try:
        check_schema(file)
    except BaseException:
        file.close()
        raise
    return Stores(db=open_sqlite(file, clock, on_commit), actor_id=actor_id)


def migrate_sqlite(url: str, clock: Clock) -> tuple[list[str], str | None]:
    file = SqliteDatabase(sqlite_path_from_url(url), create=True)
    try:
        report = migrate(file, clock)
    finally:
        file.close()
    return list(report.applied), report.current


def check_sqlite(url: str) -> list[str]:
    """Pages and indexes (PRAGMA quick_check) first, then the migration history."""
    try:
        file = SqliteDatabase(sqlite_path_from_url(url))
    except DatabaseCorrupt as exc:
        return [f"integrity:{exc.message}"]
    try:
        findings = check_integrity(file)
        if not findings:
            check_schema(file)
    except NotReady as exc:
        findings = list(exc.findings)
    finally:
        file.close()
    return findings
