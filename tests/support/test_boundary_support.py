"""What the boundary tests share (no tests here): requests an attacker sent (issue 18) that
must be refused with a problem object and write nothing, run against a real `ql web` on
SQLite (tests/e2e/test_boundary_sqlite.py) and on PostgreSQL
(tests/integration/test_boundary_postgres.py).
"""

from __future__ import annotations

from typing import Any

from tests.support.test_api_support import (
    GHOST_RUN,
    NOBODY,
    Answer,
    Auth,
    Database,
    Http,
    People,
    seed,
    seed_notify,
    snapshot,
)

SURROGATE = "\\ud800"  # as JSON writes it: a lone UTF-16 surrogate once parsed
HOOK = "https://hooks.example.com/h"
DEMO = "/api/v1/projects/demo"
SECURITY_HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff",
                    "x-frame-options": "DENY", "referrer-policy": "no-referrer"}

# (route, JSON body holding a lone surrogate, the field the problem names)
SURROGATE_BODIES: list[tuple[str, str, str]] = [
    ("POST /api/v1/notify/channels",
     f'{{"name": "s1", "kind": "webhook", "url": "{HOOK}/{SURROGATE}"}}', "url"),
    ("POST /api/v1/notify/channels",
     f'{{"name": "s2", "kind": "webhook", "url": "{HOOK}", "headers": ["X-A: {SURROGATE}"]}}',
     "headers[0]"),
    ("POST /api/v1/notify/channels",
     (f'{{"name": "s3", "kind": "template", "url": "{HOOK}", '
      f'"body_template": {{"text": "{{summary}} {SURROGATE}"}}}}'), "body_template.text"),
    ("POST /api/v1/notify/channels",
     (f'{{"name": "s4", "kind": "email", "smtp_host": "mail.example.com", '
      f'"from": "ql@example.com", "to": ["ops{SURROGATE}@example.com"]}}'), "to[0]"),
    ("POST /api/v1/session", f'{{"username": "admin{SURROGATE}", "password": "x"}}',
     "username"),
    ("POST /api/v1/session", f'{{"username": "admin", "password": "p{SURROGATE}"}}',
     "password"),
    ("POST /api/v1/projects", f'{{"id": "p2", "name": "P {SURROGATE}"}}', "name"),
    (f"POST {DEMO}/tasks/t2/revisions",
     f'{{"command": {{"kind": "shell", "command": "echo {SURROGATE}"}}}}', "command.command"),
    (f"POST {DEMO}/tasks/hello/revisions", f'{{"name": "{SURROGATE}"}}', "name"),
    (f"POST {DEMO}/tasks/hello/revisions", f'{{"environment": {{"K{SURROGATE}": "v"}}}}',
     "environment"),
    (f"POST {DEMO}/tasks/hello/revisions", f'{{"environment": {{"K": "v{SURROGATE}"}}}}',
     "environment.K"),
    (f"POST {DEMO}/tasks/hello/revisions", f'{{"working_directory": "/tmp/{SURROGATE}"}}',
     "working_directory"),
    (f"POST {DEMO}/triggers/yearly/revisions", f'{{"timezone": "UTC{SURROGATE}"}}',
     "timezone"),
    (f"POST {DEMO}/triggers/yearly/pause", f'{{"reason": "r{SURROGATE}"}}', "reason"),
    (f"POST {DEMO}/tasks/hello/run", f'{{"request_id": "r{SURROGATE}"}}', "request_id"),
    ("POST /api/v1/tokens", f'{{"name": "t{SURROGATE}", "scope": "read"}}', "name"),
    ("POST /api/v1/notify/rules", f'{{"channel": "ops", "project": "demo{SURROGATE}"}}',
     "project"),
]


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


# (route, raw JSON body, status, the field the problem names or None)
MALFORMED_BODIES: list[tuple[str, str, int, str | None]] = [
    ("POST /api/v1/projects", f'{{"id": "p3", "name": {nested(1000)}}}', 422, "body"),
    ("POST /api/v1/notify/channels",
     (f'{{"name": "n1", "kind": "template", "url": "{HOOK}", '
      f'"body_template": {{"a": {nested(100)}}}}}'), 422, "body"),
    ("POST /api/v1/notify/channels",
     f'{{"name": "n2", "kind": "template", "url": "{HOOK}", "body_template": {{"a": NaN}}}}',
     400, None),
    ("POST /api/v1/notify/channels",
     f'{{"name": "n3", "kind": "template", "url": "{HOOK}", "body_template": [Infinity]}}',
     400, None),
    ("POST /api/v1/notify/channels",
     f'{{"name": "n4", "kind": "template", "url": "{HOOK}", "body_template": [1e999]}}',
     422, "body_template[0]"),
    (f"POST {DEMO}/tasks/hello/revisions", f'{{"timeout_ms": {"9" * 400}}}', 422,
     "timeout_ms"),
    (f"POST {DEMO}/triggers/yearly/backfill", f'{{"from": 1, "to": {"9" * 400}}}', 422, "to"),
]

# (path, the field the problem names): numbers, cursors and days out of range
OUT_OF_RANGE: list[tuple[str, str]] = [
    ("/api/v1/audit?cursor=" + "9" * 400, "cursor"),
    ("/api/v1/audit?cursor=9223372036854775808", "cursor"),
    ("/api/v1/audit?cursor=%C2%B2", "cursor"),  # a superscript two: a digit to isdigit()
    ("/api/v1/audit?limit=" + "9" * 400, "limit"),
    ("/api/v1/runs?limit=" + "1" * 30, "limit"),
    ("/api/v1/runs?since=" + "9" * 400, "since"),
    ("/api/v1/runs?until=99999999999999999", "until"),
    ("/api/v1/runs?since=%C2%B2", "since"),  # a superscript two: a digit to str.isdigit
    ("/api/v1/runs?limit=%C2%B2", "limit"),
    (f"{DEMO}/stats?from=9999-12-01&to=9999-12-31", "from"),
    (f"{DEMO}/stats?to=9999-12-31", "to"),
    (f"{DEMO}/stats?from=1969-12-31&to=1970-01-02", "from"),
    (f"{DEMO}/stats?from=%D9%A2%D9%A0%D9%A2%D9%A6-01-01", "from"),  # Arabic-Indic digits
    (f"{DEMO}/tasks?include_deleted=%1B", "include_deleted"),
    ("/api/v1/runs?task=a%00b", "task"),
    ("/api/v1/notify/rules?channel=Bad%20Name", "channel"),
    ("/api/v1/projects/demo/triggers/yearly?next=" + "9" * 30, "next"),
]


def _send(http: Http, route: str, raw: str, auth: Auth) -> Answer:
    method, path = route.split(" ", 1)
    return http.call(method, path, auth=auth, raw=raw.encode())


def counts(db: Database) -> dict[str, int]:
    return {table: int(db.query(f"SELECT count(*) AS n FROM {table}")[0]["n"])
            for table in ("audit_log", "notify_channels", "login_failures", "projects",
                          "task_definition_revisions", "trigger_revisions", "runs")}


def _refused(answer: Answer, status: int, field: str | None, surrogate: bool) -> str | None:
    """Why ``answer`` is not the refusal wanted (None: it is)."""
    try:
        body = answer.problem(status, "QL_BAD_REQUEST" if status == 400 else "QL_INVALID_INPUT")
    except AssertionError as exc:
        return str(exc)[:300]
    if body.get("field") != field or (surrogate and "surrogate" not in body["detail"]):
        return f"{body.get('field')}: {body['detail']}"
    return None


def flow_refusals_write_nothing(http: Http, people: People, db: Database) -> int:
    """Every surrogate, malformed body and out-of-range number above: 400 or 422 with a
    problem object naming the field, and the database (rows and audit entries) unchanged.
    Every request is made; the failures are listed together. Returns the number made."""
    admin = people.tokens["admin"]
    seed(http, admin)
    seed_notify(http, admin)
    http.ok("GET", "/api/v1/session", admin)  # the token's first use is recorded now
    before, tally = snapshot(db.query), counts(db)
    wrong: list[tuple[str, str]] = []
    for route, raw, field in SURROGATE_BODIES:
        auth = NOBODY if route == "POST /api/v1/session" else admin
        why = _refused(_send(http, route, raw, auth), 422, field, surrogate=True)
        if why is not None:
            wrong.append((f"{route} {raw}", why))
    for route, raw, status, field in MALFORMED_BODIES:
        why = _refused(_send(http, route, raw, admin), status, field, surrogate=False)
        if why is not None:
            wrong.append((f"{route} {raw[:60]}", why))
    for path, field in OUT_OF_RANGE:
        why = _refused(http.call("GET", path, auth=admin), 422, field, surrogate=False)
        if why is not None:
            wrong.append((path[:80], why))
    assert wrong == [], "\n".join(f"{what}\n    -> {why}" for what, why in wrong)
    assert counts(db) == tally
    assert snapshot(db.query) == before
    return len(SURROGATE_BODIES) + len(MALFORMED_BODIES) + len(OUT_OF_RANGE)


def flow_login_names_no_database_stores(http: Http, db: Database) -> None:
    """Found by the fuzz run: a login whose user name held NUL (which no PostgreSQL text can)
    answered 503, its failure counted under that name. Such a name is no user's: 401 like any
    unknown name, the failure counted (and limited) under its digest."""
    before = counts(db)["login_failures"]
    for name in ("ad\u0000min", "\u0000", "x" * 100 + "\u0000"):
        http.call("POST", "/api/v1/session",
                  body={"username": name, "password": "not it at all"}).problem(
                      401, "QL_UNAUTHENTICATED")
    assert counts(db)["login_failures"] > before


def headers_of(answer: Answer) -> dict[str, str]:
    return {name: answer.headers.get(name, "") for name in SECURITY_HEADERS}


def flow_security_headers(http: Http, people: People) -> None:
    """The security headers on answers of every kind: 200, 201, 204, 401, 403, 404 (a route,
    a record, the panel's own), 405, 413, 415, 422, 400, and the log as text."""
    admin, viewer = people.tokens["admin"], people.tokens["viewer"]
    world = seed(http, admin)
    wanted = SECURITY_HEADERS
    cases: list[tuple[Answer, int]] = [
        (http.call("GET", "/api/v1/projects", auth=admin), 200),
        (http.call("GET", "/livez"), 200),
        (http.call("POST", "/api/v1/projects", auth=admin, body={"id": "hdr"}), 201),
        (http.call("GET", "/api/v1/projects"), 401),
        (http.call("GET", "/api/v1/nowhere"), 401),
        (http.call("POST", "/api/v1/projects", auth=viewer, body={"id": "x"}), 403),
        (http.call("GET", "/api/v1/nowhere", auth=admin), 404),
        (http.call("GET", "/api/v1/projects/ghost", auth=admin), 404),
        (http.call("DELETE", "/api/v1/projects", auth=admin), 405),
        (http.call("PUT", "/livez", auth=admin), 405),
        (http.call("POST", "/api/v1/projects", auth=admin,
                   raw=b'{"x": "' + b"y" * (1024 * 1024) + b'"}'), 413),
        (http.call("POST", "/api/v1/projects", auth=admin, raw=b"{}",
                   content_type="text/plain"), 415),
        (http.call("POST", "/api/v1/projects", auth=admin, body={"id": "Bad Id"}), 422),
        (http.call("POST", "/api/v1/projects", auth=admin, raw=b"{"), 400),
        (http.call("GET", "/api/v1/projects/demo%2Fx", auth=admin), 404),
        (http.call("GET", f"/api/v1/runs/{GHOST_RUN}/logs", auth=admin), 404),
        (http.call("GET", f"/api/v1/runs/{world.run_id}?tail=0", auth=admin), 200),
        (http.call("GET", "/api/v1/openapi.json", auth=viewer), 200),
    ]
    for answer, status in cases:
        assert answer.status == status, (status, answer.status, answer.raw[:300])
        assert headers_of(answer) == wanted, (status, answer.headers)
    static = http.call("GET", "/static/panel/nothing-here.css", auth=admin)
    assert static.status == 404, static.raw[:200]
    assert headers_of(static) == wanted, static.headers


def json_lines(text: str) -> list[Any]:
    import json

    return [json.loads(line) for line in text.splitlines() if line.strip()]
