"""Per-project roles on PostgreSQL, through a real `ql web` as ql_web, on every PostgreSQL
server the harness has: the same matrix and tenant views as on SQLite
(tests/e2e/test_tenants_sqlite.py)."""

from __future__ import annotations

from tests.integration.test_api_postgres import Site, site  # noqa: F401 - the fixture
from tests.support.tenant_matrix import tenant_matrix, tenant_views


def test_the_tenant_matrix_from_the_openapi_document(site: Site) -> None:  # noqa: F811
    counts = tenant_matrix(site.server.http, site.people, site.url, site.db.query)
    assert counts["operations"] > 80 and counts["hidden"] > 0, counts
    assert counts["refused"] > 500 and counts["allowed"] > 500, counts
    print("tenant matrix (PostgreSQL):", counts)
    tenant_views(site.server.http, site.people, site.url)
