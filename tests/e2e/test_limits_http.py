"""The global limit over HTTP (issue 23, item 1: limits in the panel's reach): shown to every
role with access everywhere, set and removed by an admin, refused to an operator and to a
tenant, bad values refused, each change audited. On SQLite here; the same flow runs on
PostgreSQL in tests/integration/test_limits_http_postgres.py."""

from __future__ import annotations

from tests.e2e.test_api_sqlite import Site, still_site  # noqa: F401 - the fixture
from tests.support.test_api_support import Http, People


def flow_limits(http: Http, people: People) -> None:
    admin, operator = people.tokens["admin"], people.tokens["operator"]
    assert http.ok("GET", "/api/v1/limits", people.tokens["viewer"]) == {"global": None}
    assert http.ok("PUT", "/api/v1/limits", admin, {"global": 5}) == {"global": 5}
    assert http.ok("GET", "/api/v1/limits", operator) == {"global": 5}
    http.call("PUT", "/api/v1/limits", auth=operator, body={"global": 9}).problem(
        403, "QL_FORBIDDEN")
    for bad in ({"global": 0}, {"global": "5"}, {}, {"global": 5, "more": 1}):
        http.call("PUT", "/api/v1/limits", auth=admin, body=bad).problem(422, "QL_INVALID_INPUT")
    assert http.ok("GET", "/api/v1/limits", admin) == {"global": 5}
    assert http.ok("PUT", "/api/v1/limits", admin, {"global": None}) == {"global": None}
    entries = http.ok("GET", "/api/v1/audit?action=limits", admin)["items"]
    assert [e["detail"] for e in entries] == [{"global": None, "was": 5},
                                              {"global": 5, "was": None}]


def test_the_global_limit_over_http(still_site: Site) -> None:  # noqa: F811
    flow_limits(still_site.server.http, still_site.people)
