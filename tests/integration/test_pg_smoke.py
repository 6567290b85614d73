"""The harness itself: both servers answer, migrations apply, roles exist."""

from __future__ import annotations

from tests.support.pg import PgTestDatabase


def test_database_is_migrated_and_roles_can_log_in(pg_db: PgTestDatabase) -> None:
    rows = pg_db.execute("SELECT migration_id FROM schema_migrations ORDER BY 1")
    assert [r["migration_id"] for r in rows] == ["0001_core", "0002_role_grants", "0003_lifecycle",
                                                  "0004_workers", "0005_pauses"]
    import psycopg
    for role in ("ql_admin", "ql_runtime", "ql_worker", "ql_worker_ingress", "ql_migration"):
        with psycopg.connect(pg_db.url(role)) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (role,)
