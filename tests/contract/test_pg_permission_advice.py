"""Issue 18, item 7: a PostgreSQL permission error names the role to connect as, never a
grant (each role's privileges are exact: `ql db check` refuses one too many).

On every PostgreSQL server of the harness: a store used under the wrong role is refused with
the object the server named, the role that connected and the role(s) that may do it. The
choice of roles is checked against the whole privilege matrix.
"""

from __future__ import annotations

import pytest

from qinglong.errors import PermissionDenied
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import ProjectCreateParams
from qinglong.storage.postgres.errors import permission_advice, roles_for_table
from qinglong.storage.postgres.roles import APP_ROLES, PRIVILEGES, ROLES
from qinglong.storage.runs import RunStore
from tests.contract.conftest import PgBackend
from tests.contract.test_runs import setup_definitions

TABLES = sorted({table for tables in PRIVILEGES.values() for table in tables})


def test_a_worker_that_publishes_is_told_to_connect_as_ql_admin_or_ql_web(
        pg_backend: PgBackend) -> None:
    assert pg_backend.capabilities.roles
    store = DefinitionStore(pg_backend.database("ql_worker", "advice"))
    with pytest.raises(PermissionDenied) as refused:
        store.project_create(ProjectCreateParams(project_id="p2"))
    message = refused.value.message
    assert "permission denied for table projects (42501): the database role 'ql_worker' may " \
           "not do this; connect as ql_admin or ql_web instead" in message, message
    assert "grant" not in message.replace("refuses a grant", "")
    assert pg_backend.db.execute("SELECT count(*) AS n FROM projects") == [{"n": 0}]


def test_ql_admin_reading_runs_is_told_to_connect_as_ql_runtime_or_ql_web(
        pg_backend: PgBackend) -> None:
    setup_definitions(pg_backend)
    store = RunStore(pg_backend.database("ql_admin", "advice"), actor_id="advice")
    with pytest.raises(PermissionDenied) as refused:
        store.run_get("00000000-0000-4000-8000-000000000001")
    message = refused.value.message
    assert "permission denied for table runs (42501): the database role 'ql_admin' may not " \
           "do this; connect as ql_runtime, ql_worker or ql_web instead" in message, message


@pytest.mark.parametrize("table", TABLES)
def test_some_suggested_role_holds_every_privilege_the_connected_role_lacks(table: str) -> None:
    for role in [*ROLES, "alice"]:
        suggested = roles_for_table(table, role)
        mine = PRIVILEGES.get(role, {}).get(table, frozenset())
        wanted = set().union(*(PRIVILEGES[r].get(table, frozenset()) for r in APP_ROLES)) - mine
        assert set(suggested) <= set(APP_ROLES) - {role}
        for privilege in wanted:
            assert any(privilege in PRIVILEGES[r].get(table, frozenset()) for r in suggested), (
                table, role, privilege, suggested)
        if not wanted:
            assert suggested == []


def test_an_object_that_is_no_table_gets_the_role_of_each_command() -> None:
    advice = permission_advice("permission denied for schema qinglong", "alice")
    assert advice.startswith("connect as the role made for this command: ql_admin to publish, "
                             "ql_runtime for `ql control` and backfills, ql_worker for `ql "
                             "worker`, ql_web for `ql web`")
    assert permission_advice("permission denied for table trigger_schedule_claims",
                             "ql_admin").startswith("connect as ql_runtime instead, the role ")
