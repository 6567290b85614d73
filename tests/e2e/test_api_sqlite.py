"""The HTTP API on SQLite, through a real `ql web` on a free loopback port (and a `ql serve`
executing Runs where a test needs them): the authorization matrix, bad input on every write
route, Run pages, the OpenAPI document, live logs and cancel, login limits, CSRF,
write-only environment values, the same JSON as the CLI's --json, `ql user` and `ql token`,
and the loopback bind. The same flows run on PostgreSQL in tests/integration/test_api_postgres.py.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qinglong.clock import SystemClock
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import migrate
from tests.support.env_api_flows import flow_environments
from tests.support.ql_process import run_ql
from tests.support.test_api_support import (
    PASSWORD,
    Database,
    People,
    Server,
    child_env,
    flow_authorization,
    flow_backfill,
    flow_bad_input,
    flow_flows,
    flow_log_follow_and_cancel,
    flow_notify,
    flow_openapi,
    flow_pages,
    flow_security,
    flow_trigger_specs,
    login,
    make_people,
    seed,
    seed_notify,
    start_server,
    start_web,
)


@dataclass
class Site:
    url: str
    path: Path
    server: Server
    people: People
    db: Database


def _database(path: Path) -> Database:
    def query(statement: str) -> list[dict[str, Any]]:
        with sqlite3.connect(path) as conn:
            conn.row_factory = sqlite3.Row
            return [dict(row) for row in conn.execute(statement).fetchall()]

    def execute(statement: str, params: tuple[object, ...]) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(statement, params)

    return Database(query=query, execute=execute, placeholder="?")


def migrated(tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "ql.db"
    db = SqliteDatabase(path, create=True)
    try:
        migrate(db, SystemClock())
    finally:
        db.close()
    return f"sqlite:///{path}", path


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    """`ql serve --http`: the scheduler, the executor and the API in one process."""
    url, path = migrated(tmp_path)
    people = make_people(url)
    server = start_server(["serve", "--database-url", url, "--http", "127.0.0.1:0",
                           "--interval", "250ms"], tmp_path / "serve.log")
    try:
        yield Site(url, path, server, people, _database(path))
    finally:
        assert server.stop() == 0, server.log.read_text()


@pytest.fixture
def still_site(tmp_path: Path) -> Iterator[Site]:
    """`ql web` on the SQLite file: the API alone, so nothing changes unless it writes."""
    url, path = migrated(tmp_path)
    people = make_people(url)
    server = start_web(url, tmp_path)
    try:
        yield Site(url, path, server, people, _database(path))
    finally:
        assert server.stop() == 0, server.log.read_text()


def ql(url: str | None, *args: str, env: dict[str, str] | None = None,
       stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    where = ["--database-url", url] if url is not None else []
    return run_ql([*args, *where],
                  timeout=60, env=child_env(env), input=stdin)


def test_authorization_matrix(site: Site) -> None:
    flow_authorization(site.server.http, site.people, site.db, site.url)


def test_bad_input_on_every_write_route_writes_nothing(still_site: Site) -> None:
    flow_bad_input(still_site.server.http, still_site.people, still_site.db)



def test_backfill_admits_the_missing_occurrences_once(still_site: Site) -> None:
    flow_backfill(still_site.server.http, still_site.people, still_site.db)


def test_notification_channels_rules_test_and_retry_keep_secrets(still_site: Site) -> None:
    flow_notify(still_site.server.http, still_site.people, still_site.db)

def test_flows_publish_start_show_and_cancel_over_http(still_site: Site) -> None:
    flow_flows(still_site.server.http, still_site.people)


def test_project_environments_over_http(still_site: Site) -> None:
    flow_environments(still_site.server.http, still_site.people, still_site.db)


def test_run_pages_follow_a_cursor(still_site: Site) -> None:
    flow_pages(still_site.server.http, still_site.people)


def test_the_openapi_document_is_valid_and_lists_every_route(site: Site) -> None:
    flow_openapi(site.server.http, site.people)


def test_login_limits_csrf_write_only_environment_tokens_and_audit(site: Site) -> None:
    flow_security(site.server.http, site.people, site.db)


@pytest.mark.slow
def test_a_log_followed_live_and_a_run_cancelled(site: Site) -> None:
    flow_log_follow_and_cancel(site.server.http, site.people)


def test_ql_web_serves_a_sqlite_file_beside_ql_serve(still_site: Site, tmp_path: Path) -> None:
    """`ql web` on the file `ql serve` runs: a Run it admits is executed by the server."""
    http, operator = still_site.server.http, still_site.people.tokens["operator"]
    seed(http, still_site.people.tokens["admin"])
    server = start_server(["serve", "--database-url", still_site.url, "--http", "127.0.0.1:0"],
                          tmp_path / "serve.log")
    try:
        run = http.ok("POST", "/api/v1/projects/demo/tasks/hello/run", operator, {}, 201)
        from tests.support.test_api_support import wait_for_status

        done = wait_for_status(http, operator, run["id"], {"succeeded", "failed"})
        assert done["status"] == "succeeded"
        health = server.http.ok("GET", "/api/v1/health", operator)
        assert {i["role"] for i in health["instances"] if i["alive"]} == {"serve", "web"}
    finally:
        assert server.stop() == 0


def test_the_api_answers_what_the_cli_prints_with_json(still_site: Site) -> None:
    site = still_site
    http, admin = site.server.http, site.people.tokens["admin"]
    world = seed(http, admin)
    seed_notify(http, admin)
    window = ("--from", "2027-01-01T00:00:00Z", "--to", "2027-03-01T00:00:00Z")
    pairs = [
        ("/api/v1/notify/channels", ("notify", "channel", "list")),
        ("/api/v1/notify/channels/ops", ("notify", "channel", "show", "ops")),
        ("/api/v1/notify/rules", ("notify", "rule", "list")),
        ("/api/v1/notify/deliveries", ("notify", "deliveries")),
        ("/api/v1/projects", ("project", "list")),
        ("/api/v1/projects/demo/tasks", ("task", "list", "--project", "demo")),
        ("/api/v1/projects/demo/tasks/hello", ("task", "show", "--project", "demo", "--task",
                                               "hello")),
        ("/api/v1/projects/demo/tasks/hello/diff?from=1&to=2",
         ("task", "diff", "--project", "demo", "--task", "hello", "--from", "1", "--to", "2")),
        ("/api/v1/triggers?next=3", ("trigger", "list", "--next", "3")),
        (f"/api/v1/runs/{world.run_id}", ("run", "show", world.run_id)),
        (("/api/v1/projects/demo/triggers/yearly/ledger?from=2027-01-01T00:00:00Z"
         "&to=2027-03-01T00:00:00Z"),
         ("trigger", "ledger", "--project", "demo", "--trigger", "yearly", *window)),
    ]
    for path, argv in pairs:
        printed = ql(site.url, *argv, "--json")
        assert printed.returncode == 0, (argv, printed.stderr)
        assert http.ok("GET", path, admin) == json.loads(printed.stdout), path
    listed = json.loads(ql(site.url, "run", "list", "--json").stdout)
    assert http.ok("GET", "/api/v1/runs", admin)["items"] == listed


def test_ql_user_and_ql_token(still_site: Site, tmp_path: Path) -> None:
    site = still_site
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n")
    made = ql(site.url, "user", "create", "--username", "carol", "--role", "operator",
              "--password-file", str(secret), "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["role"] == "operator"
    assert PASSWORD not in made.stdout + made.stderr
    # the password never comes from argv alone: no terminal, no file, no variable -> refused
    refused = ql(site.url, "user", "create", "--username", "dave", "--role", "viewer",
                 stdin="")
    assert refused.returncode == 2 and "--password-file" in refused.stderr, refused
    assert len(refused.stderr.strip().splitlines()) == 1
    by_env = ql(site.url, "user", "create", "--username", "dave", "--role", "viewer",
                env={"QL_USER_PASSWORD": PASSWORD})
    assert by_env.returncode == 0, by_env.stderr
    short = ql(site.url, "user", "create", "--username", "erin", "--role", "viewer",
               env={"QL_USER_PASSWORD": "short"})
    assert short.stderr == "ql: $QL_USER_PASSWORD: must be 10-1024 characters\n", short.stderr
    users = json.loads(ql(site.url, "user", "list", "--json").stdout)
    assert {u["username"]: u["role"] for u in users}["carol"] == "operator"
    assert all("password" not in json.dumps(u) for u in users)
    token = ql(site.url, "token", "create", "--username", "carol", "--name", "deploy",
               "--scope", "operate", "--expires-in", "30d")
    assert token.returncode == 0, token.stderr
    value = token.stdout.strip()
    assert value.startswith("qlt_") and "not shown again" in token.stderr
    http = site.server.http
    from tests.support.test_api_support import Auth

    auth = Auth(token=value)
    assert http.ok("GET", "/api/v1/session", auth)["username"] == "carol"
    too_much = ql(site.url, "token", "create", "--username", "carol", "--name", "x", "--scope",
                  "admin")
    assert too_much.returncode == 2 and "scope" in too_much.stderr
    listed = json.loads(ql(site.url, "token", "list", "--username", "carol", "--json").stdout)
    assert [t["name"] for t in listed] == ["deploy"] and value not in json.dumps(listed)
    token_id = listed[0]["id"]
    assert ql(site.url, "token", "revoke", token_id).returncode == 0
    http.call("GET", "/api/v1/session", auth=auth).problem(401)
    update = ql(site.url, "user", "update", "--username", "carol", "--disable", "--json")
    assert update.returncode == 0 and json.loads(update.stdout)["disabled"] is True
    http.call("POST", "/api/v1/session",
              body={"username": "carol", "password": PASSWORD}).problem(401)
    audit = http.ok("GET", "/api/v1/audit?limit=100", site.people.tokens["admin"])["items"]
    actions = [e["action"] for e in audit if e["via"] == "cli"]
    assert actions == ["user.update", "token.revoke", "token.create", "user.create",
                       "user.create"], actions
    login(http, "dave")


def test_the_api_binds_to_loopback_unless_told(tmp_path: Path) -> None:
    url, _ = migrated(tmp_path)
    refused = ql(url, "web", "--http", "0.0.0.0:0")
    assert refused.returncode == 2, refused
    assert refused.stderr.strip().splitlines() == [
        ("ql: --http: 0.0.0.0 is not a loopback address: the API binds to loopback unless "
        "--allow-remote is given (and then belongs behind TLS)")]
    server = start_server(["web", "--database-url", url, "--http", "0.0.0.0:0",
                           "--allow-remote"], tmp_path / "remote.log")
    try:
        assert server.http.call("GET", "/readyz").json == {"status": "ready"}
    finally:
        assert server.stop() == 0


def test_trigger_specs_interval_once_dst_and_jitter_over_http(still_site: Site) -> None:
    flow_trigger_specs(still_site.server.http, still_site.people, still_site.db)


def test_a_task_keeps_replaces_and_clears_its_worker_requirements(still_site: Site) -> None:
    """Placement through the API: the labels a task requires are published in canonical
    order, kept by a revision that does not name them, and cleared by an empty list."""
    http, admin = still_site.server.http, still_site.people.tokens["admin"]
    seed(http, admin)
    path = "/api/v1/projects/demo/tasks/gpu/revisions"
    made = http.ok("POST", path, admin, {"command": {"kind": "shell", "command": "true"},
                                         "requires": ["region=eu", "gpu"]}, 201)
    assert made["requires"] == ["gpu", "region=eu"]
    kept = http.ok("POST", path, admin, {"timeout_ms": 5_000}, 201)
    assert kept["requires"] == ["gpu", "region=eu"]
    shown = http.ok("GET", "/api/v1/projects/demo/tasks/gpu", admin)
    assert shown["requires"] == ["gpu", "region=eu"]
    assert http.ok("POST", path, admin, {"requires": []}, 201)["requires"] == []


def test_the_queue_by_required_labels(still_site: Site) -> None:
    """GET /api/v1/queue: a queued Run that requires labels no live executor offers (the
    site's `ql serve` offers none) is counted under its set and marked unplaceable."""
    http, admin = still_site.server.http, still_site.people.tokens["admin"]
    seed(http, admin)
    http.ok("POST", "/api/v1/projects/demo/tasks/far/revisions", admin,
            {"command": {"kind": "shell", "command": "true"}, "requires": ["region=us"]}, 201)
    http.ok("POST", "/api/v1/projects/demo/tasks/far/run", admin, {"request_id": "far-1"}, 201)
    queue = http.ok("GET", "/api/v1/queue", still_site.people.tokens["viewer"])
    [group] = queue["requirements"]
    assert (group["requires"], group["queued"], group["unplaceable"]) == (
        ["region=us"], 1, True)
    assert queue["unplaceable"] == 1 and queue["queued"] >= 1
    assert queue["oldest_age_ms"] is not None and queue["oldest_age_ms"] >= 0


def test_a_task_with_parameters_is_run_now_with_values(still_site: Site) -> None:
    """Parameters through the API: declared with defaults, given by a run now (the others
    keep their defaults), recorded on the Run, refused for an undeclared name or a value of
    another type with nothing admitted."""
    http, admin = still_site.server.http, still_site.people.tokens["admin"]
    seed(http, admin)
    made = http.ok("POST", "/api/v1/projects/demo/tasks/greet/revisions", admin, {
        "command": {"kind": "shell", "command": "true"},
        "parameters": [{"name": "who", "default": "world"},
                       {"name": "count", "type": "integer", "default": 2}]}, 201)
    assert made["parameters"] == [{"name": "count", "type": "integer", "default": 2},
                                  {"name": "who", "type": "string", "default": "world"}]
    run = http.ok("POST", "/api/v1/projects/demo/tasks/greet/run", admin,
                  {"request_id": "p-1", "parameters": {"count": 5}}, 201)
    assert run["parameters"] == {"count": 5, "who": "world"}
    shown = http.ok("GET", f"/api/v1/runs/{run['id']}", admin)
    assert shown["run"]["parameters"] == {"count": 5, "who": "world"}
    before = len(http.ok("GET", "/api/v1/runs?limit=100", admin)["items"])
    http.call("POST", "/api/v1/projects/demo/tasks/greet/run", auth=admin,
              body={"request_id": "p-2", "parameters": {"count": "many"}}).problem(422)
    assert len(http.ok("GET", "/api/v1/runs?limit=100", admin)["items"]) == before
