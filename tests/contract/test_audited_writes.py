"""An API write (and a `ql user` / `ql token` change) and its audit-log row are one unit of
work, on every database: a change whose audit row cannot be written is not made at all, and a run-now over HTTP takes at most two
transactions (the caller's authentication, then the admission with its audit row).

The requests go straight into the ASGI app (no server in between), as the admin's API token.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qinglong.clock import SystemClock
from qinglong.profiles.web import open_web_backend
from qinglong.web.app import create_web_app
from qinglong.web.backend import WebBackend
from tests.contract.conftest import Backend
from tests.support.ql import Ql
from tests.support.test_api_support import make_people

WEB = "ql_web"


def _call(app: Any, method: str, path: str, token: str,
          body: dict[str, object] | None = None) -> tuple[int, Any]:
    """One request into the ASGI app: its status and its JSON body (None when empty)."""
    raw = b"" if body is None else json.dumps(body).encode()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"authorization", f"Bearer {token}".encode()),
               (b"content-type", b"application/json")]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    status = next(m for m in sent if m["type"] == "http.response.start")["status"]
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(payload) if payload else None


@pytest.fixture
def web(backend: Backend) -> Iterator[tuple[WebBackend, Any, str]]:
    """The API over ``backend``'s database as `ql web` opens it, and an admin's token."""
    url = backend.url(WEB)
    token = str(make_people(url).tokens["admin"].token)
    opened = open_web_backend(url, SystemClock(), pool_size=2)
    try:
        yield opened, create_web_app(opened, SystemClock()), token
    finally:
        opened.close()


def _audited(backend: Backend, action: str) -> int:
    rows = backend.sql("SELECT count(*) AS n FROM audit_log WHERE action = ?", action)
    return int(rows[0]["n"])


def test_a_change_whose_audit_row_is_refused_is_not_made(
        backend: Backend, web: tuple[WebBackend, Any, str]) -> None:
    _, app, token = web
    status, _ = _call(app, "POST", "/api/v1/projects", token, {"id": "kept"})
    assert status == 201
    assert _audited(backend, "project.create") == 1

    backend.refuse_writes("audit_log")
    status, problem = _call(app, "POST", "/api/v1/projects", token, {"id": "lost"})
    assert status >= 400, problem
    assert problem["code"] != "QL_INTERNAL", problem  # a storage error, named, not a crash
    assert backend.sql("SELECT id FROM projects ORDER BY id") == [{"id": "kept"}]
    status, _ = _call(app, "GET", "/api/v1/projects/lost", token)
    assert status == 404
    assert _audited(backend, "project.create") == 1


def test_an_http_run_now_takes_at_most_two_transactions(
        backend: Backend, web: tuple[WebBackend, Any, str]) -> None:
    opened, app, token = web
    assert _call(app, "POST", "/api/v1/projects", token, {"id": "p"})[0] == 201
    assert _call(app, "POST", "/api/v1/projects/p/tasks/t/revisions", token,
                 {"command": {"kind": "shell", "command": "true"}})[0] == 201

    driver = opened.stores.db.driver
    began: list[bool] = []
    real_begin = driver.begin

    def counting_begin(conn: Any, **options: Any) -> bool:
        began.append(options["write"])
        return real_begin(conn, **options)

    driver.begin = counting_begin  # type: ignore[method-assign]
    try:
        status, view = _call(app, "POST", "/api/v1/projects/p/tasks/t/run", token,
                             {"request_id": "once"})
    finally:
        driver.begin = real_begin  # type: ignore[method-assign]
    assert status == 201, view
    assert view["admitted"] is True
    assert 1 <= len(began) <= 2, began
    assert began[-1] is True  # the admission and its audit row: one write transaction
    assert _audited(backend, "run.now") == 1
    rows = backend.sql("SELECT count(*) AS n FROM runs WHERE project_id = 'p'")
    assert rows == [{"n": 1}]


def test_ql_token_and_user_commands_commit_with_their_audit_row(
        backend: Backend, tmp_path: Path) -> None:
    url = backend.url(WEB)
    ql = Ql(url, tmp_path, env={"QL_USER_PASSWORD": "a long and unguessable passphrase 9"})
    ql.run("user", "create", "--username", "ann", "--role", "operator")
    assert _audited(backend, "user.create") == 1

    backend.refuse_writes("audit_log")
    refused = ql.run("token", "create", "--username", "ann", "--name", "ci", "--scope", "read",
                     check=False)
    assert refused.returncode != 0, refused.stdout
    assert "Traceback" not in refused.stderr and refused.stderr.strip(), refused.stderr
    assert backend.sql("SELECT count(*) AS n FROM api_tokens") == [{"n": 0}]
    refused = ql.run("user", "update", "--username", "ann", "--role", "viewer", check=False)
    assert refused.returncode != 0, refused.stdout
    assert backend.sql("SELECT role FROM users WHERE username = 'ann'") == [
        {"role": "operator"}]
