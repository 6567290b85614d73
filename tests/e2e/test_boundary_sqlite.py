"""Issue 18's boundary findings on SQLite, through a real `ql web` (and `ql serve` where a Run
must execute): a refused request writes nothing, a row an older version stored cannot break
a listing (API or CLI), the security headers on every answer, private database and log
files, and the CLI printing stored text with its control characters escaped. The refusals
run on PostgreSQL too (tests/integration/test_boundary_postgres.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_api_sqlite import Site, _database, migrated, ql
from tests.support.test_api_support import make_people, start_web
from tests.support.test_boundary_support import (
    flow_refusals_write_nothing,
    flow_security_headers,
)


@pytest.fixture
def web_site(tmp_path: Path) -> Iterator[Site]:
    url, path = migrated(tmp_path)
    people = make_people(url)
    server = start_web(url, tmp_path)
    try:
        yield Site(url, path, server, people, _database(path))
    finally:
        assert server.stop() == 0, server.log.read_text()


def test_refused_requests_answer_4xx_and_write_nothing(web_site: Site) -> None:
    made = flow_refusals_write_nothing(web_site.server.http, web_site.people, web_site.db)
    assert made == 40, made
    assert "Traceback" not in web_site.server.log.read_text()


def test_every_answer_carries_the_security_headers(web_site: Site) -> None:
    flow_security_headers(web_site.server.http, web_site.people)
