"""The global limit over HTTP on PostgreSQL, through `ql web` as ql_web (which 0031_web_limits
lets read and change it), on every PostgreSQL server: the flow of
tests/e2e/test_limits_http.py."""

from __future__ import annotations

from tests.e2e.test_limits_http import flow_limits
from tests.integration.test_api_postgres import Site, site  # noqa: F401 - the fixture


def test_the_global_limit_over_http(site: Site) -> None:  # noqa: F811
    flow_limits(site.server.http, site.people)
