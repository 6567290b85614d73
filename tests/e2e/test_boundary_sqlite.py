"""Issue 18's boundary findings on SQLite, through a real `ql web` (and `ql serve` where a Run
must execute): a refused request writes nothing, a row an older version stored cannot break
a listing (API or CLI), the security headers on every answer, private database and log
files, and the CLI printing stored text with its control characters escaped. The refusals
run on PostgreSQL too (tests/integration/test_boundary_postgres.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from qinglong.clock import SystemClock
from qinglong.profiles.web import open_web_backend
from qinglong.web.app import create_web_app
from qinglong.web.routing import Call, Endpoint, Reply
from tests.e2e.test_api_sqlite import Site, _database, migrated
from tests.support.ql import Ql, wait_for
from tests.support.test_api_support import child_env, make_people, seed, seed_notify, start_web
from tests.support.test_boundary_support import (
    SECURITY_HEADERS,
    flow_login_names_no_database_stores,
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
    assert made == 41, made
    assert "Traceback" not in web_site.server.log.read_text()


def test_a_login_name_no_database_stores_is_refused_401(web_site: Site) -> None:
    flow_login_names_no_database_stores(web_site.server.http, web_site.db)


def test_every_answer_carries_the_security_headers(web_site: Site) -> None:
    flow_security_headers(web_site.server.http, web_site.people)


# --- a row an older version stored ----------------------------------------------------------

BAD_URL = "https://hooks.example.com/\ud800\x1b[31mred\x9b"


def _store_like_an_older_version(path: Path) -> None:
    """A channel whose URL holds a lone surrogate and terminal controls, as the API accepted
    it before issue 18 (its JSON text stores the surrogate as an escape)."""
    with sqlite3.connect(path) as conn:
        columns = [d[0] for d in conn.execute("SELECT * FROM notify_channels").description]
        row = dict(zip(columns, conn.execute(
            "SELECT * FROM notify_channels WHERE name = 'ops'").fetchone(), strict=True))
        config = json.loads(row["config_json"])
        config["target"]["url"] = BAD_URL
        row.update(name="old", config_json=json.dumps(config))
        conn.execute(f"INSERT INTO notify_channels ({', '.join(columns)}) "
                     f"VALUES ({', '.join('?' * len(columns))})", [row[c] for c in columns])


def _ql_bytes(url: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "qinglong", *args, "--database-url", url],
                          capture_output=True, timeout=60, check=False, env=child_env())


def test_a_channel_stored_with_a_surrogate_lists_over_the_api_and_the_cli(web_site: Site) -> None:
    http, admin = web_site.server.http, web_site.people.tokens["admin"]
    seed(http, admin)
    seed_notify(http, admin)
    _store_like_an_older_version(web_site.path)
    for path in ("/api/v1/notify/channels", "/api/v1/notify/channels/old"):
        answer = http.call("GET", path, auth=admin)
        assert answer.status == 200, (path, answer.raw[:300])
        # the surrogate as its JSON escape (the same string), the rest as JSON writes it
        assert '"url":"https://hooks.example.com/\\ud800\\u001b[31mred\x9b"'.encode() in answer.raw
    listed = http.ok("GET", "/api/v1/notify/channels", admin)
    assert {c["name"]: c["webhook"]["url"] for c in listed}["old"] == BAD_URL
    table = _ql_bytes(web_site.url, "notify", "channel", "list")
    assert table.returncode == 0 and table.stderr == b"", table.stderr.decode()[-2000:]
    assert b"https://hooks.example.com/\\ud800\\x1b[31mred\\x9b" in table.stdout, table.stdout
    assert b"\x1b" not in table.stdout and "\x9b".encode() not in table.stdout
    shown_one = _ql_bytes(web_site.url, "notify", "channel", "show", "old")
    assert shown_one.returncode == 0, shown_one.stderr.decode()[-2000:]
    assert b"url           https://hooks.example.com/\\ud800\\x1b[31mred\\x9b\n" in shown_one.stdout
    as_json = _ql_bytes(web_site.url, "notify", "channel", "list", "--json")
    assert as_json.returncode == 0, as_json.stderr.decode()[-2000:]
    assert b"\x1b" not in as_json.stdout and "\x9b".encode() not in as_json.stdout
    assert {c["name"]: c["webhook"]["url"] for c in json.loads(as_json.stdout)}["old"] == BAD_URL


# --- files only their owner reads -------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow
def test_the_database_its_wal_and_the_logs_are_private(tmp_path: Path) -> None:
    """Under umask 022, `ql db migrate` and a `ql serve` that ran a Run leave nothing others
    can read: the database, its -wal and -shm 0600, the log directories 0700, the log 0600.
    A file made before keeps its mode and keeps working. (`ql run show` prints the terminal
    controls of the log's tail as visible escapes.)"""
    old_umask = os.umask(0o022)  # the children inherit it
    try:
        q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
        q.run("db", "migrate")
        q.run("project", "create", "demo")
        q.run("task", "publish", "--project", "demo", "--task", "hello", "--shell",
              "echo hi; printf '\\033[2J\\n'")
        run_id = q.json("task", "run", "--project", "demo", "--task", "hello")["id"]
        server = q.start("serve", "--interval", "250ms")
        try:
            done = wait_for(lambda: [r for r in q.json("run", "list") if r["id"] == run_id
                                     and r["status"] == "succeeded"], 30, "the Run to succeed")
            assert done[0]["status"] == "succeeded"
            attempt = q.json("run", "show", run_id)["attempts"][0]
            log = Path(attempt["log_path"])
            assert log.read_text() == "hi\n\x1b[2J\n"
            tail = subprocess.run(q.command("run", "show", run_id), cwd=tmp_path, env=q.env,
                                  capture_output=True, timeout=60, check=True).stdout
            assert b"  | hi\n  | \\x1b[2J\n" in tail and b"\x1b" not in tail, tail
            found = {"ql.db": _mode(tmp_path / "ql.db"),
                     "ql.db-wal": _mode(tmp_path / "ql.db-wal"),
                     "ql.db-shm": _mode(tmp_path / "ql.db-shm"),
                     "ql.db.logs": _mode(tmp_path / "ql.db.logs"),
                     "run directory": _mode(log.parent), "attempt log": _mode(log)}
        finally:
            assert stop(server) == 0
    finally:
        os.umask(old_umask)
    assert log.parent.parent == tmp_path / "ql.db.logs"
    assert found == {"ql.db": 0o600, "ql.db-wal": 0o600, "ql.db-shm": 0o600,
                     "ql.db.logs": 0o700, "run directory": 0o700, "attempt log": 0o600}
    (tmp_path / "ql.db").chmod(0o640)  # made by an older version, or by the operator
    q.run("db", "migrate")
    assert q.json("task", "show", "--project", "demo", "--task", "hello")["revision"] == 1
    assert _mode(tmp_path / "ql.db") == 0o640


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=30)


# --- the CLI prints stored text visibly ---------------------------------------------------------

CONTROLS = "printf '\x1b]0;owned\x07\x1b[2J\r\x7f\x9b1m'; echo done"


def test_the_cli_escapes_control_characters_of_stored_text(web_site: Site) -> None:
    """A command set over the API with terminal controls: `ql task show` prints them as
    visible escapes; --json escapes them the JSON way and reads back as the very command."""
    http, admin = web_site.server.http, web_site.people.tokens["admin"]
    seed(http, admin)
    http.ok("POST", "/api/v1/projects/demo/tasks/hello/revisions", admin,
            {"command": {"kind": "shell", "command": CONTROLS}}, 201)
    visible = b"printf '\\x1b]0;owned\\a\\x1b[2J\\r\\x7f\\x9b1m'; echo done"
    printed = _ql_bytes(web_site.url, "task", "show", "--project", "demo", "--task", "hello")
    assert printed.returncode == 0, printed.stderr.decode()[-2000:]
    for raw in (b"\x1b", b"\x07", b"\r", b"\x7f", "\x9b".encode()):
        assert raw not in printed.stdout, (raw, printed.stdout)
    assert b"\ncommand    " + visible + b"\n" in printed.stdout, printed.stdout
    listed = _ql_bytes(web_site.url, "task", "list", "--project", "demo")
    assert listed.returncode == 0 and b"\x1b" not in listed.stdout, listed
    as_json = _ql_bytes(web_site.url, "task", "show", "--project", "demo", "--task", "hello",
                        "--json")
    assert as_json.returncode == 0, as_json.stderr.decode()[-2000:]
    for raw in (b"\x1b", b"\x07", b"\r", b"\x7f", "\x9b".encode()):
        assert raw not in as_json.stdout, (raw, as_json.stdout)
    assert json.loads(as_json.stdout)["command"]["command"] == CONTROLS


def test_an_argument_that_is_not_utf8_is_refused_before_anything_is_written(
        web_site: Site) -> None:
    """Bytes the locale cannot decode reach Python as lone surrogates: refused (exit 2, one
    line), nothing stored."""
    before = web_site.db.query("SELECT count(*) AS n FROM task_definition_revisions")
    seed(web_site.server.http, web_site.people.tokens["admin"])
    counted = web_site.db.query("SELECT count(*) AS n FROM task_definition_revisions")
    assert counted != before
    done = subprocess.run([sys.executable, "-m", "qinglong", "task", "publish", "--project",
                           "demo", "--task", "bytes", "--shell", b"echo \xff",
                           "--database-url", web_site.url],
                          capture_output=True, timeout=60, check=False, env=child_env())
    assert done.returncode == 2, done.stderr
    assert done.stderr == b"ql: argument 8 (echo \\udcff): is not valid UTF-8 text\n"
    assert web_site.db.query("SELECT count(*) AS n FROM task_definition_revisions") == counted
    env = child_env({"QL_DATABASE_URL": web_site.url + "\udcff"})
    done = subprocess.run([sys.executable, "-m", "qinglong", "project", "list"],
                          capture_output=True, timeout=60, check=False, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (b"ql: the environment variable QL_DATABASE_URL: is not valid UTF-8 "
                           b"text\n")


def test_a_definitions_file_with_a_lone_surrogate_is_refused_at_its_line(
        web_site: Site, tmp_path: Path) -> None:
    """YAML's "\\ud800" escape makes a lone surrogate: `ql apply` names the file and line
    (exit 2, no traceback) and writes nothing, in a value and in a key alike."""
    counted = web_site.db.query("SELECT count(*) AS n FROM task_definition_revisions")
    for name, task, shell in (("value", "t", "echo \\ud800"), ("key", "t\\ud800", "echo")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(f'apiVersion: qinglong/v1\nproject: demo\ntasks:\n  "{task}":\n'
                        f'    shell: "{shell}"\n')
        done = _ql_bytes(web_site.url, "apply", "-f", str(path))
        assert done.returncode == 2, done.stderr
        line = 5 if name == "value" else 4
        assert (f"{path}:{line}: a {name} is not valid text (it holds a lone UTF-16 "
                "surrogate").encode() in done.stderr, done.stderr
        assert b"Traceback" not in done.stderr
    assert web_site.db.query("SELECT count(*) AS n FROM task_definition_revisions") == counted


# --- a forced 500 -------------------------------------------------------------------------


def _asgi_get(app: Any, path: str) -> tuple[int, dict[str, str], bytes]:
    """One GET straight into the ASGI app (no server in between)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "headers": [],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return (start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]},
            body)


def test_a_crash_answers_a_500_problem_with_the_security_headers(tmp_path: Path) -> None:
    """A handler that raises, and a route outside the API's dispatcher that raises: a 500
    problem object with every security header, never a traceback to the client."""
    url, _ = migrated(tmp_path)
    clock = SystemClock()
    backend = open_web_backend(url, clock)

    def broken(call: Call) -> Reply:
        raise RuntimeError("a bug in a handler")

    async def raw_broken(request: Request) -> Response:
        raise RuntimeError("a bug outside the dispatcher")

    try:
        app = create_web_app(backend, clock, endpoints=(
            Endpoint("GET", "/broken", broken, "Always fails", "system", None),),
            extra_routes=[Route("/raw-broken", raw_broken)])
        for path in ("/broken", "/raw-broken"):
            status, headers, body = _asgi_get(app, path)
            assert status == 500, (path, body)
            assert {name: headers.get(name) for name in SECURITY_HEADERS} == SECURITY_HEADERS
            assert headers["content-type"] == "application/problem+json"
            assert json.loads(body)["code"] == "QL_INTERNAL"
            assert b"a bug" not in body
    finally:
        backend.close()


def test_times_out_of_range_on_the_command_line_are_refused(tmp_path: Path) -> None:
    url, _ = migrated(tmp_path)
    for value, why in (("9" * 400, "is not between 1970 and 9999"),
                       ("9999-12-31T23:59:59-14:00", "is not between 1970 and 9999"),
                       ("\u00b2", "is not an RFC 3339 time")):
        done = _ql_bytes(url, "run", "list", "--since", value)
        assert done.returncode == 2, done.stderr.decode()[-2000:]
        assert done.stderr.decode().startswith("ql run list: Invalid value for '--since': ")
        assert why in done.stderr.decode() and done.stderr.count(b"\n") == 1, done.stderr
