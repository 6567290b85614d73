"""The schedule row's claim-owner check (migration 0036) accepts exactly the owners the
domain's rule accepts (``identifiers.OWNER_ID``: a letter or digit, then letters, digits and
``. _ : -``, at most 128), without a regular expression. Each owner is written into a copy of
``trigger_schedules`` with all its checks, so the check under test is the migrated one."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import errors as pg_errors

from qinglong.domain.identifiers import OWNER_ID
from qinglong.storage.postgres.connection import PgConnection
from tests.support.pg import PgTestDatabase

ALPHABET = string.ascii_letters + string.digits + "._:-" + " /+é\u00a0\n"
EDGES = ["a", "A", "0", "r1", "node-1.local:8080", "x_", "a..", "9:-._", "", ".a", "-a",
         "_a", ":a", "a b", "a/b", "é", "aé", " a", "a\n", "a" * 128]


@pytest.fixture
def owners(pg_db: PgTestDatabase) -> PgConnection:
    conn = pg_db.superuser()
    conn.execute("CREATE TEMP TABLE owners (LIKE qinglong.trigger_schedules INCLUDING CONSTRAINTS)")
    return conn


def accepted(conn: PgConnection, owner: str) -> bool:
    try:
        with conn.transaction():
            conn.execute(
                "INSERT INTO owners (project_id, trigger_id, trigger_revision, state_version, "
                "claim_owner, claim_token, claim_version, claim_expires_at_ms, updated_at_ms) "
                "VALUES ('p', 't', 1, 1, %s, gen_random_uuid(), 1, 2, 1)", [owner])
            raise _RolledBack
    except _RolledBack:
        return True
    except pg_errors.CheckViolation as exc:
        assert exc.diag.constraint_name == "trigger_schedules_claim_owner_check", exc
        return False


class _RolledBack(Exception):
    pass


@pytest.mark.parametrize("owner", EDGES)
def test_the_check_agrees_with_the_domain_rule_on_the_edges(owners: PgConnection,
                                                            owner: str) -> None:
    assert accepted(owners, owner) == bool(OWNER_ID.fullmatch(owner)), owner


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=ALPHABET, max_size=20))
def test_the_check_agrees_with_the_domain_rule(owners: PgConnection,
                                               owner: str) -> None:
    assert accepted(owners, owner) == bool(OWNER_ID.fullmatch(owner)), owner
