"""Single sign-on end to end on PostgreSQL: a real `ql web` (as ql_web) configured with the
test issuer, logged in by following the redirects, on every server the harness has (the
SQLite twin is tests/e2e/test_sso_serve.py; the refusals run on both in
tests/contract/test_sso_login.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_sso_serve import logs_in, sso_args
from tests.support.oidc_issuer import Issuer, running_issuer
from tests.support.pg import PgTestDatabase
from tests.support.test_api_support import make_people, start_web


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with running_issuer() as found:
        yield found


def test_ql_web_logs_in_with_single_sign_on(pg_db: PgTestDatabase, tmp_path: Path,
                                            issuer: Issuer) -> None:
    url = pg_db.url("ql_web")
    make_people(url)
    server = start_web(url, tmp_path, *sso_args(issuer, tmp_path))
    try:
        logs_in(server, issuer, "viewer")
        rows = pg_db.superuser().execute(
            "SELECT issuer, subject, username FROM oidc_identities").fetchall()
        assert [tuple(row.values()) if isinstance(row, dict) else tuple(row) for row in rows] \
            == [(issuer.url, "sub-viewer", "viewer")]
    finally:
        assert server.stop() == 0, server.log.read_text()
