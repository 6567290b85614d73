"""`ql serve --http`: the HTTP API's commits wake the server's own loops through the
process's one notifier (storage/wakeups.py) -- a Run admitted over the API is looked for at
once, a trigger published over it is decided at once -- instead of waiting for a poll."""

from __future__ import annotations

import json
import sqlite3
import urllib.request
from pathlib import Path

from qinglong.cli.commands.serve import _serve_api
from qinglong.clock import SystemClock
from qinglong.profiles.local import LocalApp, LocalServeConfig
from qinglong.service.accounts import Accounts
from qinglong.storage.accounts import AccountStore
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.driver import open_sqlite
from qinglong.storage.sqlite.migrate import migrate
from tests.support.ql import wait_for


class Quiet:
    def admitted(self, *args: object) -> None: ...
    def finished(self, *args: object) -> None: ...
    def reconciled(self, *args: object) -> None: ...
    def diagnostic(self, *args: object) -> None: ...


def _token(path: Path) -> str:
    file = SqliteDatabase(path)
    try:
        accounts = Accounts(AccountStore(open_sqlite(file, SystemClock())))
        accounts.user_create("admin", "admin", "correct horse battery staple")
        made = accounts.token_create("admin", name="t", scope="admin", lifetime_ms=None)
    finally:
        file.close()
    return made.token


def _post(port: int, token: str, path: str, body: dict[str, object]) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return int(answer.status)


def _statuses(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT status FROM runs")]


def test_the_apis_commits_wake_the_servers_loops(tmp_path: Path) -> None:
    path = tmp_path / "ql.db"
    file = SqliteDatabase(path, create=True)
    migrate(file, SystemClock())
    file.close()
    token = _token(path)
    app = LocalApp(LocalServeConfig(database_path=path, log_dir=tmp_path / "logs",
                                    drain_timeout_s=0.5, stop_timeout_s=5.0), SystemClock(),
                   Quiet())  # type: ignore[arg-type]
    heard: list[str] = []
    app.wakeups.subscribe("runs", lambda _payload: heard.append("runs"))
    app.wakeups.subscribe("schedules", lambda _payload: heard.append("schedules"))
    app.open()
    api = _serve_api(f"sqlite:///{path}", "127.0.0.1:0", quiet=True, json_events=False, app=app)
    try:
        app.start()
        assert heard == []
        assert _post(api.port, token, "/api/v1/projects", {"id": "wake"}) == 201
        assert _post(api.port, token, "/api/v1/projects/wake/tasks/t/revisions",
                     {"command": {"kind": "shell", "command": "true"}}) == 201
        assert heard == ["schedules", "schedules"]
        assert _post(api.port, token, "/api/v1/projects/wake/tasks/t/run",
                     {"request_id": "now"}) == 201
        assert heard == ["schedules", "schedules", "runs"]
        wait_for(lambda: _statuses(path) == ["succeeded"], 30, "the Run to succeed")
    finally:
        api.stop()
        app.stop()
