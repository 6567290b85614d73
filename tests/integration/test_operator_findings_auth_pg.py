"""Issue 18, authentication, on every PostgreSQL server (as ql_web): the login flood against
the API served in this process over a pool of connections, and through a real `ql web`: a new
password or disabling revokes tokens, revoking a token you may not see answers as a missing
one, weak passwords are refused. The SQLite side, and what involves no storage, is
tests/e2e/test_operator_findings_auth.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.auth_flows import (
    flow_credentials_die_with_the_password,
    flow_login_flood,
    flow_revoking_a_token_you_may_not_see,
    flow_weak_passwords_are_refused,
)
from tests.support.pg import PgTestDatabase
from tests.support.test_api_support import People, Server, make_people, start_web


@pytest.fixture
def web(pg_db: PgTestDatabase, tmp_path: Path) -> Iterator[tuple[Server, People]]:
    url = pg_db.url("ql_web")
    people = make_people(url)
    server = start_web(url, tmp_path)
    try:
        yield server, people
    finally:
        assert server.stop() == 0, server.log.read_text()


def test_a_login_flood_checks_exactly_the_limit_and_the_real_user_gets_in(
        pg_db: PgTestDatabase) -> None:
    flow_login_flood(pg_db.url("ql_web"))  # the API's own accounts, over its pool as ql_web


def test_a_new_password_or_disabling_revokes_tokens_and_enabling_revives_none(
        web: tuple[Server, People]) -> None:
    server, people = web
    flow_credentials_die_with_the_password(server.http, people)


def test_revoking_a_token_you_may_not_see_answers_as_a_missing_one(
        web: tuple[Server, People]) -> None:
    server, people = web
    flow_revoking_a_token_you_may_not_see(server.http, people)


def test_password12_and_its_kind_are_refused(web: tuple[Server, People]) -> None:
    server, people = web
    flow_weak_passwords_are_refused(server.http, people)
