"""The notification tables' grants in behaviour: every application role can do on them
exactly what storage/postgres/roles.py says (ql_admin manages channels and rules, ql_runtime
runs the outbox, the others have nothing), and the readiness audit finds nothing about them."""

from __future__ import annotations

from qinglong.storage.postgres.readiness import audit
from qinglong.storage.postgres.roles import APP_ROLES, PRIVILEGES
from tests.integration.test_pg_readiness import PROBED, _probe, open_as
from tests.support.pg import PgTestDatabase

NOTIFY_TABLES = ("notify_channels", "notify_rules", "notify_outbox", "notify_cursors",
                 "notify_recoveries")


def test_each_role_can_do_exactly_what_the_matrix_says_on_the_notification_tables(
        pg_db: PgTestDatabase) -> None:
    columns = {r["table_name"]: r["column_name"] for r in pg_db.execute(
        "SELECT DISTINCT ON (table_name) table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'qinglong' AND table_name LIKE 'notify%%' "
        "ORDER BY table_name, ordinal_position")}
    assert set(columns) == set(NOTIFY_TABLES)
    can: dict[tuple[str, str], set[str]] = {}
    want: dict[tuple[str, str], set[str]] = {}
    for role in APP_ROLES:
        with open_as(pg_db, role) as conn:
            for table in NOTIFY_TABLES:
                can[role, table] = {p for p in PROBED if _probe(conn, table, p, columns[table])}
                want[role, table] = set(PRIVILEGES[role].get(table, ()))
    assert can == want
    assert want["ql_runtime", "notify_outbox"] == {"SELECT", "INSERT", "UPDATE", "DELETE"}
    assert want["ql_admin", "notify_channels"] == {"SELECT", "INSERT", "UPDATE"}
    assert not any(want["ql_worker", table] for table in NOTIFY_TABLES)


def test_the_audit_finds_nothing_about_the_notification_tables(pg_db: PgTestDatabase) -> None:
    for role in (*APP_ROLES, "ql_migration", "postgres"):
        with open_as(pg_db, role) as conn:
            findings = audit(conn)
        assert [f for f in findings if "notify" in f] == [], (role, findings)
    pg_db.execute("GRANT SELECT ON notify_outbox TO ql_admin")
    with open_as(pg_db, "ql_admin") as conn:
        assert "extra-privilege:ql_admin:notify_outbox:SELECT" in audit(conn)
