"""The HTTP API on PostgreSQL, through a real `ql web` (as ql_web) on a free loopback port,
with `ql worker` executing Runs where a test needs them: the same flows as on SQLite
(tests/e2e/test_api_sqlite.py), on every PostgreSQL server the harness has; two stateless
`ql web` sharing one database; and `ql web` refusing a role other than ql_web.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from testkit.cluster import Worker
from tests.support.env_api_flows import flow_environments
from tests.support.pg import PgTestDatabase
from tests.support.ql_process import run_ql
from tests.support.test_api_support import (
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
    start_web,
)


@dataclass
class Site:
    url: str
    pg: PgTestDatabase
    server: Server
    people: People
    db: Database


def _database(pg: PgTestDatabase) -> Database:
    conn = pg.superuser()

    def query(statement: str) -> list[dict[str, Any]]:
        cursor = conn.execute(statement)  # type: ignore[call-overload]
        return [dict(row) for row in cursor.fetchall()]

    def execute(statement: str, params: tuple[object, ...]) -> None:
        conn.execute(statement, params)  # type: ignore[call-overload]

    return Database(query=query, execute=execute, placeholder="%s")


@pytest.fixture
def site(pg_db: PgTestDatabase, tmp_path: Path) -> Iterator[Site]:
    url = pg_db.url("ql_web")
    people = make_people(url)
    server = start_web(url, tmp_path)
    try:
        yield Site(url, pg_db, server, people, _database(pg_db))
    finally:
        assert server.stop() == 0, server.log.read_text()


def test_authorization_matrix(site: Site) -> None:
    flow_authorization(site.server.http, site.people, site.db, site.url)


def test_bad_input_on_every_write_route_writes_nothing(site: Site) -> None:
    flow_bad_input(site.server.http, site.people, site.db)



def test_backfill_admits_the_missing_occurrences_once(site: Site) -> None:
    flow_backfill(site.server.http, site.people, site.db)


def test_notification_channels_rules_test_and_retry_keep_secrets(site: Site) -> None:
    flow_notify(site.server.http, site.people, site.db)

def test_flows_publish_start_show_and_cancel_over_http(site: Site) -> None:
    flow_flows(site.server.http, site.people)


def test_project_environments_over_http(site: Site) -> None:
    flow_environments(site.server.http, site.people, site.db)


def test_run_pages_follow_a_cursor(site: Site) -> None:
    flow_pages(site.server.http, site.people)


def test_the_openapi_document_is_valid_and_lists_every_route(site: Site) -> None:
    flow_openapi(site.server.http, site.people)


def test_login_limits_csrf_write_only_environment_tokens_and_audit(site: Site) -> None:
    flow_security(site.server.http, site.people, site.db)


@pytest.mark.slow
def test_a_log_followed_live_and_a_run_cancelled(site: Site, tmp_path: Path) -> None:
    worker = Worker("w1", site.pg.url("ql_worker"), tmp_path, poll_ms=200).start()
    try:
        worker.wait_ready()
        flow_log_follow_and_cancel(site.server.http, site.people)
    finally:
        assert worker.stop() == 0


def test_the_api_answers_what_the_cli_prints_with_json(site: Site) -> None:
    http, admin = site.server.http, site.people.tokens["admin"]
    world = seed(http, admin)
    seed_notify(http, admin)  # and `ql notify` as ql_web reads what the API wrote
    pairs = [
        ("/api/v1/notify/channels", ("notify", "channel", "list")),
        ("/api/v1/notify/channels/ops", ("notify", "channel", "show", "ops")),
        ("/api/v1/notify/rules", ("notify", "rule", "list")),
        ("/api/v1/notify/deliveries", ("notify", "deliveries")),
        ("/api/v1/projects", ("project", "list")),
        ("/api/v1/projects/demo/tasks/hello", ("task", "show", "--project", "demo", "--task",
                                               "hello")),
        ("/api/v1/triggers?next=3", ("trigger", "list", "--next", "3")),
        (f"/api/v1/runs/{world.run_id}", ("run", "show", world.run_id)),
        (("/api/v1/projects/demo/triggers/yearly/ledger?from=2027-01-01T00:00:00Z"
          "&to=2027-03-01T00:00:00Z"),
         ("trigger", "ledger", "--project", "demo", "--trigger", "yearly", "--from",
          "2027-01-01T00:00:00Z", "--to", "2027-03-01T00:00:00Z")),
    ]
    for path, argv in pairs:
        printed = run_ql([*argv, "--json",
                          "--database-url", site.url], timeout=60, env=child_env())
        assert printed.returncode == 0, (argv, printed.stderr)
        assert http.ok("GET", path, admin) == json.loads(printed.stdout), path


def test_two_stateless_servers_share_sessions_tokens_and_login_limits(
        site: Site, tmp_path: Path) -> None:
    other = start_web(site.url, tmp_path, name="web-2")
    try:
        first, second = site.server.http, other.http
        session = login(first, "operator")
        assert second.ok("GET", "/api/v1/session", session)["username"] == "operator"
        seed(second, site.people.tokens["admin"])
        paused = second.ok("POST", "/api/v1/projects/demo/triggers/yearly/pause", session, {})
        assert paused["state"] == "paused"
        assert first.call("DELETE", "/api/v1/session", auth=session).status == 204
        second.call("GET", "/api/v1/session", auth=session).problem(401)
        for http in (first, second, first, second, first):
            http.call("POST", "/api/v1/session",
                      body={"username": "viewer", "password": "not it at all"}).problem(401)
        second.call("POST", "/api/v1/session",
                    body={"username": "viewer", "password": "not it at all"}).problem(429)
        health = first.ok("GET", "/api/v1/health", site.people.tokens["viewer"])
        assert health["profile"] == "postgresql"
        webs = [i for i in health["instances"] if i["role"] == "web" and i["alive"]]
        assert len(webs) == 2, health
    finally:
        assert other.stop() == 0
    names = {row["instance_id"]: row["stopped_at_ms"] for row in site.db.query(
        "SELECT instance_id, stopped_at_ms FROM instances WHERE role = 'web'")}
    assert len(names) == 2 and sum(v is not None for v in names.values()) == 1, names


def test_ql_web_connects_only_as_ql_web(pg_db: PgTestDatabase, tmp_path: Path) -> None:
    for role in ("ql_admin", "ql_runtime"):
        done = run_ql(["web", "--database-url",
                       pg_db.url(role), "--http", "127.0.0.1:0"], timeout=60, env=child_env())
        assert done.returncode == 3, done
        assert done.stderr.strip().splitlines() == [
            (f"ql: ql web connects as ql_web (the role with exactly the API's privileges), not "
            f"{role}: wrong-role:{role}")], done.stderr


def test_ql_web_keeps_the_audit_log_append_only_and_never_claims(site: Site) -> None:
    from qinglong.storage.postgres.connection import connect

    seed(site.server.http, site.people.tokens["admin"])
    with connect(site.url, application_name="probe") as conn:
        assert conn.execute("SELECT count(*) AS n FROM qinglong.audit_log").fetchone()["n"] > 0
        for statement in ("DELETE FROM qinglong.audit_log",
                          "UPDATE qinglong.audit_log SET actor = 'someone else'",
                          "DELETE FROM qinglong.runs",
                          "SELECT * FROM qinglong.trigger_schedule_claims",
                          "SELECT * FROM qinglong.retention_marks",
                          "DELETE FROM qinglong.notify_outbox",
                          "SELECT * FROM qinglong.notify_cursors",
                          "SELECT * FROM qinglong.notify_recoveries"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)  # type: ignore[call-overload]


def test_trigger_specs_interval_once_dst_and_jitter_over_http(site: Site) -> None:
    flow_trigger_specs(site.server.http, site.people, site.db)
