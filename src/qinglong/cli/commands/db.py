"""`ql db`: migrate the schema and check that a database is ready."""

from __future__ import annotations

import click

from qinglong.cli.context import CLOCK
from qinglong.cli.output import emit_json, say
from qinglong.cli.params import database_url_option, json_option
from qinglong.profiles.open import check_database, migrate_database


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
    applied, current = migrate_database(database_url, CLOCK)
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
    findings = check_database(database_url)
    if as_json:
        emit_json({"ready": not findings, "findings": findings})
    elif findings:
        for finding in findings:
            say(finding)
    else:
        say("ready")
    if findings:
        raise SystemExit(3)
