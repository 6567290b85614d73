"""PostgreSQL for the CLI: open stores, migrate (creating roles and the database when the
connecting role may), and run the readiness audit."""

from __future__ import annotations

import psycopg
from psycopg import sql

from qinglong.errors import NotReady
from qinglong.profiles.backends import Backend
from qinglong.storage.postgres.backfill import PgBackfillStore
from qinglong.storage.postgres.connection import SingleConnector, connect, conninfo
from qinglong.storage.postgres.definitions import PgDefinitionStore
from qinglong.storage.postgres.logs import PgLogStore
from qinglong.storage.postgres.manual_runs import PgManualRunStore
from qinglong.storage.postgres.migrate import migrate
from qinglong.storage.postgres.readiness import audit, schema_findings, server_findings
from qinglong.storage.postgres.roles import MIGRATION, provision_roles
from qinglong.storage.postgres.runs import PgRunStore

APPLICATION_NAME = "ql-cli"


def open_postgres_backend(url: str) -> Backend:
    connector = SingleConnector(url, application_name=APPLICATION_NAME)
    try:
        with connector.connection() as conn:
            findings, _ = server_findings(conn)
            findings += schema_findings(conn)
    except BaseException:
        connector.close()
        raise
    if findings:
        connector.close()
        raise NotReady(findings)
    runs = PgRunStore(connector, actor_id="cli")
    return Backend(
        kind="postgresql",
        definitions=PgDefinitionStore(connector),
        runs=runs,
        lifecycle=runs,
        logs=PgLogStore(connector),
        close=connector.close,
        manual=PgManualRunStore(connector),
        backfill=PgBackfillStore(connector),
    )


def _ensure_database(url: str) -> None:
    """Create the target database when it is missing and the role may create databases."""
    params = psycopg.conninfo.conninfo_to_dict(conninfo(url, application_name=APPLICATION_NAME))
    target = params.get("dbname")
    if not target or target in ("postgres", "template1"):
        return
    maintenance = {**params, "dbname": "postgres"}
    try:
        with psycopg.connect(**maintenance, autocommit=True) as conn:  # type: ignore[arg-type]
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [target]).fetchone()
            if exists:
                return
            allowed = conn.execute(
                "SELECT rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
            if allowed and allowed[0]:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(str(target))))
    except psycopg.Error:
        return  # the real connection below reports the problem


def migrate_postgres(url: str) -> tuple[list[str], str | None]:
    _ensure_database(url)
    conn = connect(url, application_name=APPLICATION_NAME)
    try:
        facts = conn.execute(
            "SELECT current_user AS who, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS su"
        ).fetchone()
        assert facts is not None
        if facts["su"]:
            provision_roles(conn)
        elif facts["who"] != MIGRATION:
            raise NotReady(
                [f"cannot-migrate-as:{facts['who']}"],
                f"role {facts['who']} cannot migrate: connect as a superuser (which also creates "
                f"the roles) or as {MIGRATION}",
            )
        report = migrate(conn)
    finally:
        conn.close()
    return list(report.applied), report.current


def check_postgres(url: str) -> list[str]:
    conn = connect(url, application_name=APPLICATION_NAME)
    try:
        return audit(conn)
    finally:
        conn.close()
