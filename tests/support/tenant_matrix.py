"""The authorization matrix of per-project roles (issue 23, item 3), generated from the API's
own OpenAPI document: every operation x every kind of caller x a target in the caller's own
project and in another project x no credentials, with the status each must get, derived from
the operation's ``x-qinglong-scope`` and ``x-qinglong-reach`` and the caller's roles. Shared by
the SQLite (tests/e2e) and PostgreSQL (tests/integration) runs; no tests here.

Every request is one nothing can come of: a read, or a write whose body is refused (a JSON
array, or any body where the route takes none) once the caller is let through. So an allowed
write answers 422, a refused one 403 (or 404 for a Run or flow run of a project the caller may
not read), and the database is the same after the whole matrix as before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qinglong.clock import SystemClock
from tests.support.test_api_support import (
    ENDPOINTS,
    NOBODY,
    PUBLIC,
    READ_QUERIES,
    Auth,
    Http,
    People,
    login,
    open_accounts,
    seed,
    snapshot,
)

LEVELS = {"none": 0, "read": 1, "operate": 2, "admin": 3}
ROLE = {"viewer": 1, "operator": 2, "admin": 3}
SCOPE_OF = {"viewer": "read", "operator": "operate", "admin": "admin"}
OWN, OTHER = "demo", "other"
METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Caller:
    """A way of calling and the levels it has: on every project, and on single ones."""

    auth: Auth
    everywhere: int
    on: dict[str, int] = field(default_factory=dict)

    def level(self, project: str) -> int:
        return max(self.everywhere, self.on.get(project, 0))

    def reaches(self, need: int) -> bool:
        return self.everywhere >= need or any(v >= need for v in self.on.values())


@dataclass
class Targets:
    """The records each project holds, to name in paths."""

    runs: dict[str, str]
    flow_runs: dict[str, str]
    token_id: str


def expected(reach: str, need: int, caller: Caller, project: str | None) -> int | str:
    """What ``caller`` must get: "ok" (let through), 403, or 404 (a Run or flow run of a
    project it may not read answers as one that does not exist)."""
    if reach == "self":
        return "ok"
    if reach == "global":
        return "ok" if caller.everywhere >= need else 403
    if reach == "project" or (reach == "listing" and project is not None):
        assert project is not None
        return "ok" if caller.level(project) >= need else 403
    if reach == "listing":
        return "ok" if caller.reaches(need) else 403
    assert reach in ("run", "flow_run"), reach
    assert project is not None
    if not caller.reaches(need):
        return 403
    if caller.everywhere >= need:
        return "ok"
    if caller.level(project) < 1:
        return 404
    return "ok" if caller.level(project) >= need else 403


def _fill(path: str, project: str, targets: Targets) -> str:
    values = {"project": project, "task": "hello", "trigger": "yearly", "flow": "greet",
              "run": targets.runs[project], "flow_run": targets.flow_runs[project],
              "token": targets.token_id, "username": "nobody", "channel": "ops",
              "delivery": "00000000-0000-4000-8000-000000000000", "variable": "REGION",
              "repo": "ghost", "filter": "ghost"}
    return re.sub(r"\{([a-z_]+)\}", lambda m: values[m.group(1)], path)


def _seed_project(http: Http, admin: Auth, project: str) -> tuple[str, str]:
    """Task hello, trigger yearly, flow greet, one Run and one flow run in ``project``."""
    base = f"/api/v1/projects/{project}"
    if project != OWN:
        http.ok("POST", "/api/v1/projects", admin, {"id": project, "name": project}, 201)
        http.ok("POST", f"{base}/tasks/hello/revisions", admin,
                {"command": {"kind": "shell", "command": "echo hello"}}, 201)
        http.ok("POST", f"{base}/tasks/hello/revisions", admin, {"timeout_ms": 60_000}, 201)
        http.ok("POST", f"{base}/triggers/yearly/revisions", admin,
                {"task": "hello", "cron": "0 0 1 1 *", "timezone": "UTC"}, 201)
    run = http.ok("POST", f"{base}/tasks/hello/run", admin, {"request_id": f"m-{project}"},
                  201)
    http.ok("POST", f"{base}/flows/greet/revisions", admin,
            {"nodes": {"first": "hello"}}, 201)
    flow_run = http.ok("POST", f"{base}/flows/greet/run", admin,
                       {"request_id": f"f-{project}"}, 201)
    return str(run["id"]), str(flow_run["id"])


def tenants(http: Http, people: People, accounts_url: str) -> dict[str, Caller]:
    """Users with no role on every project and a role on project demo (a token and a session
    of each), an admin's token limited to demo, and the users of every global role."""
    admin = people.tokens["admin"]
    callers: dict[str, Caller] = {}
    for role, level in ROLE.items():
        callers[f"global {role} token"] = Caller(people.tokens[role], level)
    callers["global admin's read token"] = Caller(people.tokens["admin-read"], 1)
    callers["global admin's operate token"] = Caller(people.tokens["admin-operate"], 2)
    accounts, close = open_accounts(accounts_url, SystemClock())
    try:
        for role, level in ROLE.items():
            name = f"team-{role}"
            accounts.user_create(name, "none", "correct horse battery staple")
            granted = http.ok("PUT", f"/api/v1/projects/{OWN}/grants/{name}", admin,
                              {"role": role})
            assert (granted["project"], granted["role"]) == (OWN, role), granted
            made = accounts.token_create(name, name="t", scope=SCOPE_OF[role], lifetime_ms=None)
            callers[f"demo {role} token"] = Caller(Auth(token=made.token, label=f"{name} token"),
                                                   0, {OWN: level})
            callers[f"demo {role} session"] = Caller(login(http, name), 0, {OWN: level})
        limited = accounts.token_create("admin", name="demo only", scope="admin",
                                        lifetime_ms=None, projects=[OWN])
        callers["admin token limited to demo"] = Caller(
            Auth(token=limited.token, label="admin token limited to demo"), 0, {OWN: 3})
        narrow = accounts.token_create("team-admin", name="read", scope="read",
                                       lifetime_ms=None)
        callers["demo admin's read token"] = Caller(
            Auth(token=narrow.token, label="team-admin read token"), 0, {OWN: 1})
    finally:
        close()
    return callers


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every operation of the document; the same set of routes as the route table."""
    found = [(method.upper(), path, op) for path, item in document["paths"].items()
             for method, op in item.items() if method in METHODS]
    assert {(m, p) for m, p, _ in found} == {(e.method, e.path) for e in ENDPOINTS}
    return found


def tenant_matrix(http: Http, people: People, accounts_url: str,
                  query: Callable[[str], list[dict[str, Any]]]) -> dict[str, int]:
    """Runs the matrix; returns how many requests of each kind it made."""
    admin = people.tokens["admin"]
    seed(http, admin)
    http.ok("POST", "/api/v1/notify/channels", admin,
            {"name": "ops", "kind": "webhook", "url": "http://127.0.0.1:9/hook"}, 201)
    runs, flow_runs = {}, {}
    for project in (OWN, OTHER):
        runs[project], flow_runs[project] = _seed_project(http, admin, project)
    callers = tenants(http, people, accounts_url)
    targets = Targets(runs, flow_runs, people.token_ids["viewer"])
    document = http.ok("GET", "/api/v1/openapi.json", admin)
    before = snapshot(query)
    counts = {"operations": 0, "requests": 0, "allowed": 0, "refused": 0, "hidden": 0,
              "unauthenticated": 0}
    for method, path, op in operations(document):
        if op.get("security") == []:
            assert (method, path) in PUBLIC, (method, path)
            continue
        if (method, path) == ("DELETE", "/api/v1/session"):
            continue  # logs out; the bad body below would refuse it, but keep sessions safe
        counts["operations"] += 1
        reach, need = op["x-qinglong-reach"], LEVELS[op["x-qinglong-scope"]]
        writes = method != "GET"
        variants: list[str | None] = [OWN, OTHER]
        if reach == "listing":  # ?project= when the route takes it, and without when it may
            query_params = {q["name"]: q.get("required", False)
                            for q in op.get("parameters", ()) if q["in"] == "query"}
            if "project" not in query_params:
                variants = [None]
            elif not query_params["project"]:
                variants.append(None)
        for project in variants:
            target = _fill(path, project or OWN, targets)
            if reach == "listing" and project is not None:
                target += ("&" if "?" in target else "?") + f"project={project}"
            elif path in READ_QUERIES and not writes:
                target += READ_QUERIES[path]
            body = [] if writes else None
            answer = http.call(method, target, auth=NOBODY, body=body)
            answer.problem(401, "QL_UNAUTHENTICATED")
            counts["unauthenticated"] += 1
            for label, caller in callers.items():
                want = expected(reach, need, caller, project)
                answer = http.call(method, target, auth=caller.auth, body=body)
                counts["requests"] += 1
                where = (method, target, label, want, answer.raw[:240])
                if want == "ok":
                    assert answer.status not in (401, 403), where
                    if writes:
                        assert answer.status == 422, where
                    else:
                        assert answer.status in (200, 404), where
                    counts["allowed"] += 1
                elif want == 403:
                    answer.problem(403, "QL_FORBIDDEN")
                    counts["refused"] += 1
                else:
                    assert answer.status == 404, where
                    counts["hidden"] += 1
    after = snapshot(query)
    assert after == before, "a request of the matrix changed the database"
    return counts


def tenant_views(http: Http, people: People, accounts_url: str) -> None:
    """What a tenant sees: its project only in every listing, and /me saying so."""
    del accounts_url
    admin = people.tokens["admin"]
    viewer = login(http, "team-viewer")
    me = http.ok("GET", "/api/v1/me", viewer)
    assert (me["role"], me["everywhere"], me["projects"]) == ("none", "none", {OWN: "read"}), me
    assert [p["id"] for p in http.ok("GET", "/api/v1/projects", viewer)] == [OWN]
    assert {t["project"] for t in http.ok("GET", "/api/v1/triggers", viewer)} == {OWN}
    page = http.ok("GET", "/api/v1/runs?limit=1000", viewer)
    assert page["items"] and {r["project"] for r in page["items"]} == {OWN}
    # a tenant names a Run by its whole id: a prefix is looked up across every project, and
    # "ambiguous" would say that another project holds an id starting so
    mine = page["items"][0]["id"]
    assert http.ok("GET", f"/api/v1/runs/{mine}", viewer)["run"]["id"] == mine
    http.call("GET", f"/api/v1/runs/{mine[:8]}", auth=viewer).problem(422, "QL_INVALID_INPUT")
    assert http.ok("GET", f"/api/v1/runs/{mine[:8]}", admin)["run"]["id"] == mine
    assert {r["project"] for r in http.ok("GET", "/api/v1/runs?limit=1000", admin)["items"]} \
        == {OWN, OTHER}
    me = http.ok("GET", "/api/v1/me", admin)
    assert (me["role"], me["everywhere"], me["projects"]) == ("admin", "admin", {}), me
    grants = http.ok("GET", f"/api/v1/projects/{OWN}/grants", admin)
    assert [(g["username"], g["role"]) for g in grants] == [
        ("team-admin", "admin"), ("team-operator", "operator"), ("team-viewer", "viewer")]
    # a project's admin manages its grants, and no other project's
    team_admin = login(http, "team-admin")
    http.ok("PUT", f"/api/v1/projects/{OWN}/grants/viewer", team_admin, {"role": "operator"})
    http.call("PUT", f"/api/v1/projects/{OTHER}/grants/viewer", auth=team_admin,
              body={"role": "operator"}).problem(403, "QL_FORBIDDEN")
    assert http.call("DELETE", f"/api/v1/projects/{OWN}/grants/viewer",
                     auth=team_admin).status == 204
    http.call("DELETE", f"/api/v1/projects/{OWN}/grants/viewer",
              auth=team_admin).problem(404, "QL_NOT_FOUND")
    http.call("PUT", "/api/v1/projects/ghost/grants/viewer", auth=admin,
              body={"role": "viewer"}).problem(404, "QL_NOT_FOUND")
    http.call("PUT", f"/api/v1/projects/{OWN}/grants/viewer", auth=admin,
              body={"role": "none"}).problem(422)
    # a token of a tenant can be limited to its project, not widened past its roles
    http.call("POST", "/api/v1/tokens", auth=team_admin,
              body={"name": "x", "scope": "read", "projects": [OTHER]}).problem(422)
    made = http.ok("POST", "/api/v1/tokens", team_admin,
                   {"name": "x", "scope": "operate", "projects": [OWN]}, 201)
    assert made["projects"] == [OWN]
    http.call("POST", "/api/v1/tokens", auth=viewer,
              body={"name": "x", "scope": "operate"}).problem(422)
