"""The harness itself: both servers answer, migrations apply, roles exist."""

from __future__ import annotations

from qinglong.storage.postgres.migrate import MIGRATIONS
from qinglong.storage.postgres.roles import ROLES
from tests.support.pg import PgTestDatabase


def test_database_is_migrated_and_roles_can_log_in(pg_db: PgTestDatabase) -> None:
    rows = pg_db.execute("SELECT migration_id FROM schema_migrations ORDER BY 1")
    assert [r["migration_id"] for r in rows] == [m.id for m in MIGRATIONS]
    assert [m.id for m in MIGRATIONS][:5] == ["0001_core", "0002_role_grants", "0003_lifecycle",
                                              "0004_workers", "0005_pauses"]
    import psycopg
    for role in ROLES:
        with psycopg.connect(pg_db.url(role)) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (role,)
