"""Per-project roles on SQLite, through a real `ql web` (issue 23, item 3): the authorization
matrix generated from the OpenAPI document (tests/support/tenant_matrix.py), and what a
tenant sees. The same runs on PostgreSQL in tests/integration/test_tenants_postgres.py."""

from __future__ import annotations

from tests.e2e.test_api_sqlite import Site, still_site  # noqa: F401 - the fixture
from tests.support.tenant_matrix import tenant_matrix, tenant_views


def test_the_tenant_matrix_from_the_openapi_document(still_site: Site) -> None:  # noqa: F811
    counts = tenant_matrix(still_site.server.http, still_site.people, still_site.url,
                           still_site.db.query)
    assert counts["operations"] > 80 and counts["hidden"] > 0, counts
    assert counts["refused"] > 500 and counts["allowed"] > 500, counts
    print("tenant matrix (SQLite):", counts)
    tenant_views(still_site.server.http, still_site.people, still_site.url)
