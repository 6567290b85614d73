"""Issue 18's boundary findings on PostgreSQL, through a real `ql web` as ql_web on every
PostgreSQL server of the harness: requests with lone surrogates, JSON nested too deep, NaN,
numbers, cursors and days out of range answer 400 or 422 and write nothing (no row, no audit
entry); every answer carries the security headers. The same flows run on SQLite in
tests/e2e/test_boundary_sqlite.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_api_postgres import Site, _database
from tests.support.pg import PgTestDatabase
from tests.support.test_api_support import make_people, start_web
from tests.support.test_boundary_support import (
    flow_login_names_no_database_stores,
    flow_refusals_write_nothing,
    flow_security_headers,
)


@pytest.fixture
def site(pg_db: PgTestDatabase, tmp_path: Path) -> Iterator[Site]:
    url = pg_db.url("ql_web")
    people = make_people(url)
    server = start_web(url, tmp_path)
    try:
        yield Site(url, pg_db, server, people, _database(pg_db))
    finally:
        assert server.stop() == 0, server.log.read_text()


def test_refused_requests_answer_4xx_and_write_nothing(site: Site) -> None:
    made = flow_refusals_write_nothing(site.server.http, site.people, site.db)
    assert made == 41, made
    assert "Traceback" not in site.server.log.read_text()


def test_a_login_name_no_database_stores_is_refused_401(site: Site) -> None:
    flow_login_names_no_database_stores(site.server.http, site.db)


def test_every_answer_carries_the_security_headers(site: Site) -> None:
    flow_security_headers(site.server.http, site.people)
