"""Opening, migrating and checking a PostgreSQL database (storage/open.py dispatches here):
one connection for a command, a pool as ql_web for `ql web`; the readiness audit first."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import psycopg
from psycopg import sql

from qinglong.errors import NotReady
from qinglong.storage.kernel import Wake
from qinglong.storage.postgres.connection import SingleConnector, connect, conninfo
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.postgres.migrate import migrate
from qinglong.storage.postgres.readiness import audit, schema_findings, server_findings
from qinglong.storage.postgres.roles import MIGRATION, WEB, provision_roles
from qinglong.storage.postgres.topology import choose_primary
from qinglong.storage.postgres.web_pool import WebPool
from qinglong.storage.stores import Stores

CLI_APPLICATION = "ql-cli"


def open_postgres_stores(url: str, *, web: bool, any_server: bool, actor_id: str,
                         application_name: str, pool_size: int,
                         on_commit: Callable[[Sequence[Wake]], None] | None = None) -> Stores:
    """The stores over one connection (a command), or a pool as ql_web (``web``). The schema
    must be exact; the server must be a writable primary of a supported version unless
    ``any_server`` (a read-only audit may read a standby)."""
    if web:
        return _open_web(url, actor_id=actor_id, application_name=application_name,
                         pool_size=pool_size, on_commit=on_commit)
    connector = SingleConnector(url, application_name=application_name)
    try:
        with connector.connection() as conn:
            findings = [] if any_server else server_findings(conn)[0]
            findings += schema_findings(conn)
    except BaseException:
        connector.close()
        raise
    if findings:
        connector.close()
        raise NotReady(findings)
    return Stores(db=open_postgres(connector, on_commit), actor_id=actor_id)


def _open_web(url: str, *, actor_id: str, application_name: str, pool_size: int,
              on_commit: Callable[[Sequence[Wake]], None] | None) -> Stores:
    """A pool as ql_web, the role with exactly the API's privileges, on the primary."""
    target = choose_primary(url, application_name=application_name)
    connector = WebPool(target, application_name=application_name, max_size=pool_size)
    try:
        connector.open()
        with connector.connection() as conn:
            findings = audit(conn)
            who = conn.info.user
        if not findings and who != WEB:
            findings = [f"wrong-role:{who}"]
        if findings:
            raise NotReady(findings, None if who == WEB else (
                f"ql web connects as {WEB} (the role with exactly the API's privileges), not "
                f"{who}: " + ", ".join(findings)))
    except BaseException:
        connector.close()
        raise
    return Stores(db=open_postgres(connector, on_commit), actor_id=actor_id)


def _ensure_database(url: str) -> None:
    """Create the target database when it is missing and the role may create databases."""
    params = psycopg.conninfo.conninfo_to_dict(conninfo(url, application_name=CLI_APPLICATION))
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
    conn = connect(url, application_name=CLI_APPLICATION)
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
    conn = connect(url, application_name=CLI_APPLICATION)
    try:
        return audit(conn)
    finally:
        conn.close()
