"""Project environments over HTTP (issue 22, item 3), run against `ql serve --http` on SQLite
(tests/e2e/test_api_sqlite.py) and `ql web` on PostgreSQL (tests/integration/
test_api_postgres.py): read, set, unchanged, disable, history, remove; a viewer reads but
never writes; a secret without the server's key is refused and writes nothing; every change
is audited, never with a value."""

from __future__ import annotations

from tests.support.test_api_support import (
    ENDPOINTS,
    Database,
    Http,
    People,
    response_schemas,
    seed,
)

E = "/api/v1/projects/{project}/environment"
SECRET = "never-in-an-answer-8c1f"


def flow_environments(http: Http, people: People, db: Database) -> None:
    admin, viewer = people.tokens["admin"], people.tokens["viewer"]
    seed(http, admin)
    check = response_schemas(http.ok("GET", "/api/v1/openapi.json", admin))
    by_key = {(e.method, e.path): e for e in ENDPOINTS}
    base = "/api/v1/projects/demo/environment"
    empty = http.ok("GET", base, viewer)
    check(by_key[("GET", E)], 200, empty)
    assert (empty["revision"], empty["entries"], empty["digest"]) == (0, [], None)
    put = http.ok("PUT", f"{base}/REGION", admin, {"value": "eu-west", "description": "where"})
    check(by_key[("PUT", f"{E}/{{variable}}")], 200, put)
    assert (put["changed"], put["revision"]) == (True, 1)
    assert put["entries"] == [{"name": "REGION", "enabled": True, "secret": False,
                               "description": "where", "value": "eu-west",
                               "value_digest": put["entries"][0]["value_digest"]}]
    same = http.ok("PUT", f"{base}/REGION", admin, {"value": "eu-west"})
    assert (same["changed"], same["revision"], same["digest"]) == (False, 1, put["digest"])
    http.call("PUT", f"{base}/REGION", auth=viewer, body={"value": "x"}).problem(
        403, "QL_FORBIDDEN")
    assert http.call("PUT", f"{base}/QL_RUN", auth=admin, body={"value": "x"}).problem(
        422)["field"] == "variable"
    # this server has no key: a secret is refused, and nothing is written
    refused = http.call("PUT", f"{base}/TOKEN", auth=admin,
                        body={"value": SECRET, "secret": True})
    refused.problem(422, "QL_SECRET_KEY_MISSING")
    assert SECRET.encode() not in refused.raw
    assert [r["n"] for r in db.query("SELECT count(*) AS n FROM project_env_revisions")] == [1]
    http.ok("PUT", f"{base}/REGION", admin, {"enabled": False})
    history = http.ok("GET", f"{base}/history", viewer)
    check(by_key[("GET", f"{E}/history")], 200, history)
    assert [(h["revision"], h["op"], h["name"], h["fields"]) for h in history] == [
        (2, "set", "REGION", ["enabled"]),
        (1, "set", "REGION", ["value", "secret", "enabled", "description"])]
    assert [h["revision"] for h in http.ok("GET", f"{base}/history?before=2", viewer)] == [1]
    http.call("DELETE", f"{base}/REGION", auth=viewer).problem(403, "QL_FORBIDDEN")
    removed = http.ok("DELETE", f"{base}/REGION", admin)
    check(by_key[("DELETE", f"{E}/{{variable}}")], 200, removed)
    assert (removed["revision"], removed["entries"]) == (3, [])
    http.call("DELETE", f"{base}/REGION", auth=admin).problem(404, "QL_NOT_FOUND")
    audit = http.ok("GET", "/api/v1/audit?limit=1000", admin)
    mine = [(e["actor"], e["action"], e["target"]) for e in audit["items"]
            if e["action"].startswith("project.env.")]
    assert mine == [("admin", "project.env.remove", "environment REGION"),
                    ("admin", "project.env.set", "environment REGION"),
                    ("admin", "project.env.set", "environment REGION")], mine
    assert all(e["via"] == "token" for e in audit["items"]
               if e["action"].startswith("project.env."))
