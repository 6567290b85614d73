"""`ql db`: migrate the schema and check that a database is ready."""

from __future__ import annotations

import click

from qinglong.cli.context import CLOCK
from qinglong.cli.output import emit_json, say
from qinglong.cli.params import database_url_option, json_option
from qinglong.errors import DatabaseCorrupt, NotReady
from qinglong.profiles.backends import url_kind


@click.group()
def db() -> None:
    """Create or upgrade the schema, and check readiness."""


@db.command()
@database_url_option
@json_option
def migrate(database_url: str, as_json: bool) -> None:
    """Apply pending migrations (creates the SQLite file if needed).

    History drift (a changed, missing or unknown migration) is refused, never repaired.
    """
    if url_kind(database_url) == "sqlite":
        from qinglong.storage.sqlite.connection import SqliteDatabase, sqlite_path_from_url
        from qinglong.storage.sqlite.migrate import migrate as run_migrate

        database = SqliteDatabase(sqlite_path_from_url(database_url), create=True)
        try:
            report = run_migrate(database, CLOCK)
        finally:
            database.close()
        applied, current = list(report.applied), report.current
    else:
        from qinglong.profiles.cluster_backend import migrate_postgres

        applied, current = migrate_postgres(database_url)
    if as_json:
        emit_json({"applied": applied, "current": current})
        return
    for migration in applied:
        say(f"applied {migration}")
    say(f"schema is at {current}" if applied else f"schema already at {current}; nothing to do")


@db.command()
@database_url_option
@json_option
def check(database_url: str, as_json: bool) -> None:
    """Check that the database is ready for this role; print findings, exit 3 if not.

    On SQLite it also checks the file's pages and indexes (PRAGMA quick_check)."""
    if url_kind(database_url) == "sqlite":
        findings = _sqlite_findings(database_url)
    else:
        from qinglong.profiles.cluster_backend import check_postgres

        findings = check_postgres(database_url)
    if as_json:
        emit_json({"ready": not findings, "findings": findings})
    elif findings:
        for finding in findings:
            say(finding)
    else:
        say("ready")
    if findings:
        raise SystemExit(3)


def _sqlite_findings(database_url: str) -> list[str]:
    from qinglong.storage.sqlite.connection import SqliteDatabase, sqlite_path_from_url
    from qinglong.storage.sqlite.migrate import check_integrity, check_schema

    try:
        database = SqliteDatabase(sqlite_path_from_url(database_url))
    except DatabaseCorrupt as exc:
        return [f"integrity:{exc.message}"]
    try:
        findings = check_integrity(database)
        if not findings:
            check_schema(database)
    except NotReady as exc:
        findings = list(exc.findings)
    finally:
        database.close()
    return findings
