"""What the HTTP API tests share (no tests here): a small HTTP client with a server-sent-events
reader, `ql web` (or `ql serve --http`) started on a free loopback port, accounts made in the
database, the world the tests act on, a snapshot of what writes would change, and the
checks run against both profiles (SQLite and PostgreSQL): the authorization matrix, bad input
on every write route, Run pages, the OpenAPI document.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from qinglong.clock import SystemClock
from qinglong.profiles.open import open_services
from qinglong.service.accounts import Accounts, Level
from qinglong.web.app import api_endpoints
from qinglong.web.routing import Endpoint
from tests.support.ql_process import ForkedQl, start_ql

PASSWORD = "correct horse battery staple"
ROLES = ("viewer", "operator", "admin")
ROLE_LEVEL = {"viewer": Level.READ, "operator": Level.OPERATE, "admin": Level.ADMIN}
SCOPE_LEVEL = {"read": Level.READ, "operate": Level.OPERATE, "admin": Level.ADMIN}
ROLE_SCOPE = {"viewer": "read", "operator": "operate", "admin": "admin"}
GHOST_RUN = "00000000-0000-4000-8000-000000000000"
SERVING = re.compile(r"serving the API on http://[^ ]+?:(\d+)/api/v1")


# --- HTTP ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Auth:
    """How a request proves who it is: a token, a session cookie (with its CSRF token), or a
    raw Authorization header."""

    token: str | None = None
    cookie: str | None = None
    csrf: str | None = None
    header: str | None = None
    label: str = "anonymous"

    def headers(self) -> dict[str, str]:
        found: dict[str, str] = {}
        if self.header is not None:
            found["Authorization"] = self.header
        elif self.token is not None:
            found["Authorization"] = f"Bearer {self.token}"
        if self.cookie is not None:
            found["Cookie"] = f"ql_session={self.cookie}"
            if self.csrf is not None:
                found["X-CSRF-Token"] = self.csrf
        return found


NOBODY = Auth()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.raw)

    @property
    def text(self) -> str:
        return self.raw.decode()

    def problem(self, status: int, code: str | None = None) -> dict[str, Any]:
        """The answer is a problem object with ``status`` (and ``code``)."""
        assert self.status == status, (self.status, self.raw[:500])
        assert self.headers.get("content-type", "").startswith("application/problem+json"), \
            self.headers
        body = self.json
        assert {"type", "title", "status", "detail", "code"} <= set(body), body
        assert body["status"] == status and body["type"] == f"urn:qinglong:error:{body['code']}"
        if code is not None:
            assert body["code"] == code, body
        return body


class Http:
    def __init__(self, port: int) -> None:
        self.port = port

    def call(self, method: str, path: str, *, auth: Auth = NOBODY, body: object = None,
             raw: bytes | None = None, content_type: str | None = "application/json",
             headers: dict[str, str] | None = None, timeout: float = 30) -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        sent = {**auth.headers(), **(headers or {})}
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None and content_type is not None:
            sent["Content-Type"] = content_type
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            payload = response.read()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                          payload)
        finally:
            conn.close()

    def ok(self, method: str, path: str, auth: Auth, body: object = None,
           status: int | tuple[int, ...] = 200) -> Any:
        answer = self.call(method, path, auth=auth, body=body)
        wanted = (status,) if isinstance(status, int) else status
        assert answer.status in wanted, (method, path, answer.status, answer.raw[:800])
        return answer.json if answer.raw else None

    def events(self, path: str, auth: Auth, *, timeout: float = 30,
               on_event: Callable[[str, Any], None] | None = None) -> list[tuple[str, Any, float]]:
        """Read server-sent events until ``end`` or ``error``: (kind, data, wall time)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path, headers={**auth.headers(), "Accept": "text/event-stream"})
            response = conn.getresponse()
            assert response.status == 200, (response.status, response.read()[:500])
            assert response.getheader("content-type", "").startswith("text/event-stream")
            found: list[tuple[str, Any, float]] = []
            kind, data = None, []
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                line = response.fp.readline().decode()
                if not line:
                    break
                line = line.rstrip("\n")
                if line.startswith(":"):
                    continue
                if line.startswith("event: "):
                    kind = line[len("event: "):]
                elif line.startswith("data: "):
                    data.append(line[len("data: "):])
                elif line == "" and kind is not None:
                    payload = json.loads("\n".join(data))
                    found.append((kind, payload, time.time()))
                    if on_event is not None:
                        on_event(kind, payload)
                    if kind in ("end", "error"):
                        return found
                    kind, data = None, []
            raise AssertionError(f"the event stream did not end: {found}")
        finally:
            conn.close()


# --- servers -----------------------------------------------------------------------------------


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QL_", "PG"))}
    return {**env, **(extra or {})}


@dataclass
class Server:
    """A `ql web` or `ql serve --http` process and a client for it."""

    process: ForkedQl | subprocess.Popen[str]
    port: int
    log: Path

    @property
    def http(self) -> Http:
        return Http(self.port)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            raise AssertionError(f"the server did not stop: {self.log.read_text()}") from None


def start_server(args: list[str], log: Path, *, timeout: float = 30,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> Server:
    """Start ``python -m qinglong ARGS`` (listening on 127.0.0.1:0) and wait for its port."""
    process = start_ql(args, stdout=log, env=child_env(env), cwd=cwd, session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = SERVING.search(log.read_text())
        if found:
            server = Server(process, int(found.group(1)), log)
            if server.http.call("GET", "/livez").status == 200:
                return server
        if process.poll() is not None:
            raise AssertionError(f"the server exited {process.returncode}: {log.read_text()}")
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"the server did not start: {log.read_text()}")


def start_web(database_url: str, tmp_path: Path, *extra: str, name: str = "web") -> Server:
    return start_server(["web", "--database-url", database_url, "--http", "127.0.0.1:0", *extra],
                        tmp_path / f"{name}.log")


# --- accounts and the world ------------------------------------------------------------------


@dataclass
class People:
    """Users of every role with a token of their role's scope, and a few more tokens."""

    tokens: dict[str, Auth] = field(default_factory=dict)  # by role, and "admin-read", ...
    token_ids: dict[str, str] = field(default_factory=dict)


def open_accounts(url: str, clock: SystemClock) -> tuple[Accounts, Callable[[], None]]:
    """The accounts of the database ``url`` names, and how to close them."""
    services = open_services(url, clock)
    return services.accounts, services.close


def make_people(accounts_url: str) -> People:
    accounts, close = open_accounts(accounts_url, SystemClock())
    people = People()
    try:
        for role in ROLES:
            accounts.user_create(role, role, PASSWORD)
            made = accounts.token_create(role, name=f"{role} token", scope=ROLE_SCOPE[role],
                                         lifetime_ms=None)
            people.tokens[role] = Auth(token=made.token, label=f"{role} token")
            people.token_ids[role] = made.id
        for scope in ("read", "operate"):
            made = accounts.token_create("admin", name=f"admin {scope}", scope=scope,
                                         lifetime_ms=None)
            people.tokens[f"admin-{scope}"] = Auth(token=made.token,
                                                   label=f"admin's {scope} token")
    finally:
        close()
    return people


def login(http: Http, username: str, password: str = PASSWORD) -> Auth:
    answer = http.call("POST", "/api/v1/session", body={"username": username,
                                                        "password": password})
    assert answer.status == 200, answer.raw
    cookie = answer.headers["set-cookie"]
    for part in ("HttpOnly", "Secure", "SameSite=strict", "Path=/"):
        assert part.lower() in cookie.lower(), cookie
    secret = cookie.split(";", 1)[0].split("=", 1)[1]
    return Auth(cookie=secret, csrf=answer.json["csrf_token"], label=f"{username} session")


@dataclass
class World:
    run_id: str


HOOK_SECRET = "hmac-key-never-shown-Zq7"


def seed_notify(http: Http, admin: Auth) -> None:
    """Channel ops (a signed webhook nobody listens to) told about failures of project demo."""
    http.ok("POST", "/api/v1/notify/channels", admin,
            {"name": "ops", "kind": "webhook", "url": "http://127.0.0.1:9/hook",
             "secret": HOOK_SECRET}, 201)
    http.ok("POST", "/api/v1/notify/rules", admin,
            {"channel": "ops", "project": "demo", "events": ["failed"]}, 201)


def seed(http: Http, admin: Auth) -> World:
    """Project demo, task hello (two revisions), trigger yearly (1 January), one queued Run."""
    http.ok("POST", "/api/v1/projects", admin, {"id": "demo", "name": "Demo"}, 201)
    base = "/api/v1/projects/demo"
    http.ok("POST", f"{base}/tasks/hello/revisions", admin,
            {"command": {"kind": "shell", "command": "echo hello"}}, 201)
    http.ok("POST", f"{base}/tasks/hello/revisions", admin, {"timeout_ms": 60_000}, 201)
    http.ok("POST", f"{base}/triggers/yearly/revisions", admin,
            {"task": "hello", "cron": "0 0 1 1 *", "timezone": "UTC"}, 201)
    run = http.ok("POST", f"{base}/tasks/hello/run", admin, {"request_id": "seed-1"}, 201)
    return World(run_id=str(run["id"]))


# --- what a write would change ---------------------------------------------------------------

SNAPSHOT_TABLES = ("projects", "project_env_revisions", "project_env_entries",
                   "secret_keyring", "task_definitions", "task_definition_revisions", "triggers",
                   "trigger_revisions", "trigger_schedules", "trigger_pauses",
                   "project_archivals", "runs", "run_attempts", "run_events", "users",
                   "audit_log", "notify_channels", "notify_rules", "notify_outbox", "flows",
                   "flow_revisions", "flow_runs", "flow_steps", "scripts", "script_revisions",
                   "script_blobs", "repos", "user_second_factors", "user_recovery_codes",
                   "task_labels", "trigger_labels", "user_pins", "saved_filters")


def snapshot(query: Callable[[str], list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Every row of the tables a write of the API could change (tokens: who, scope, revoked)."""
    found = {table: sorted(json.dumps(row, sort_keys=True, default=str)
                           for row in query(f"SELECT * FROM {table}"))
             for table in SNAPSHOT_TABLES}
    found["api_tokens"] = sorted(json.dumps(row, sort_keys=True, default=str) for row in query(
        "SELECT id, username, scope, revoked_at_ms FROM api_tokens"))
    return found


# --- the route table --------------------------------------------------------------------------

ENDPOINTS: tuple[Endpoint, ...] = api_endpoints()
PUBLIC = {("GET", "/livez"), ("GET", "/readyz"), ("POST", "/api/v1/session"),
          ("GET", "/api/v1/sso/login"), ("GET", "/api/v1/sso/callback")}


def fill(path: str, *, world: World, write: bool, token_id: str) -> str:
    """A path of ``path``: existing records for reads, missing ones for writes (so an
    authorized write answers 404 or 422 and changes nothing)."""
    values = {"project": "ghost" if write else "demo", "task": "hello", "trigger": "yearly",
              "run": GHOST_RUN if write else world.run_id,
              "token": "ffffffffffffffff" if write else token_id,
              "username": "nobody", "channel": "ghost" if write else "ops",
              "delivery": GHOST_RUN, "flow": "ghost", "flow_run": GHOST_RUN,
              "variable": "REGION", "repo": "ghost", "filter": "ghost"}
    return re.sub(r"\{([a-z_]+)\}", lambda m: values[m.group(1)], path)


READ_QUERIES = {"/api/v1/cron/preview": "?cron=0+0+1+1+*", "/api/v1/flow-runs": "?project=demo",
                "/api/v1/projects/{project}/scripts/content": "?path=hello.py",
                "/api/v1/projects/{project}/scripts/history": "?path=hello.py",
                "/api/v1/projects/{project}/scripts/diff": "?path=hello.py"}


def response_schemas(document: dict[str, Any]) -> Callable[[Endpoint, int, Any], None]:
    """A checker of a JSON answer against the document's schema for its route and status."""

    def check(endpoint: Endpoint, status: int, body: Any) -> None:
        operation = document["paths"][endpoint.path][endpoint.method.lower()]
        answer = operation["responses"][str(status)]
        schema = answer["content"]["application/json"]["schema"]
        jsonschema.Draft202012Validator({**schema, "components": document["components"]}
                                        ).validate(body)

    return check


def authorization_matrix(http: Http, people: People, sessions: dict[str, Auth], world: World,
                         strangers: list[Auth], document: dict[str, Any]) -> int:
    """Every route x every role (tokens and sessions) x every kind of stranger. Returns the
    number of requests made."""
    check = response_schemas(document)
    principals: list[tuple[Auth, Level]] = [
        *((people.tokens[role], ROLE_LEVEL[role]) for role in ROLES),
        *((sessions[role], ROLE_LEVEL[role]) for role in ROLES),
        (people.tokens["admin-read"], Level.READ),
        (people.tokens["admin-operate"], Level.OPERATE),
    ]
    made = 0
    for endpoint in ENDPOINTS:
        key = (endpoint.method, endpoint.path)
        if endpoint.level is None:
            assert key in PUBLIC, key
            continue
        if key == ("DELETE", "/api/v1/session"):
            continue  # logs out: tried on its own below
        path = fill(endpoint.path, world=world, write=endpoint.writes,
                    token_id=people.token_ids["viewer"])
        path += READ_QUERIES.get(endpoint.path, "")
        body = {} if endpoint.writes else None
        for stranger in strangers:
            answer = http.call(endpoint.method, path, auth=stranger, body=body)
            answer.problem(401, "QL_UNAUTHENTICATED")
            assert answer.headers.get("www-authenticate") == 'Bearer realm="qinglong"'
            made += 1
        for auth, level in principals:
            answer = http.call(endpoint.method, path, auth=auth, body=body)
            made += 1
            where = (endpoint.method, path, auth.label)
            if level < endpoint.level:
                assert answer.problem(403, "QL_FORBIDDEN"), where
                continue
            assert answer.status not in (401, 403), (where, answer.raw[:300])
            if endpoint.writes:
                # a missing target or an empty body: authorized, nothing written
                assert answer.status in (404, 422), (where, answer.status, answer.raw[:300])
                answer.problem(answer.status)
            else:
                assert answer.status in (200, 404), (where, answer.status, answer.raw[:300])
                if answer.status == 200 and endpoint.response is not None:
                    check(endpoint, 200, answer.json)
    return made


def expected_level(method: str, path: str) -> Level | None:
    for endpoint in ENDPOINTS:
        if (endpoint.method, endpoint.path) == (method, path):
            return endpoint.level
    raise KeyError((method, path))


def write_endpoints() -> Iterator[Endpoint]:
    yield from (e for e in ENDPOINTS if e.writes and e.path.startswith("/api/v1/")
                and e.path != "/api/v1/session")


# Per write route: bodies that break a rule of that route (each must be refused with 422).
BAD_BODIES: dict[tuple[str, str], list[object]] = {
    ("POST", "/api/v1/projects"): [{"id": "Not_Valid"}, {"id": "ok", "name": ""},
                                   {"id": 7}],
    ("POST", "/api/v1/projects/{project}/pause"): [{"until": "tomorrow"},
                                                   {"until": "2026-12-01T08:00:00"},
                                                   {"reason": ["x"]}],
    ("POST", "/api/v1/projects/{project}/tasks/{task}/revisions"): [
        {"command": {"kind": "shell", "command": "   "}},
        {"command": {"kind": "argv", "argv": ["relative/path"]}},
        {"command": {"kind": "python", "code": "1"}},
        {"command": {"kind": "script", "path": "tool.rb"}},
        {"command": {"kind": "script", "path": "/abs.py"}},
        {"timeout_ms": 0}, {"timeout_ms": "5s"},
        {"environment": {"QL_RESERVED": "x"}}, {"environment": {"bad name": "x"}},
        {"retry": {"max_attempts": 0}}, {"retry": {"on_exit_codes": [0]}},
        {"concurrency": 0}, {"working_directory": "relative"},
        {"unset_environment": ["NOT_SET"]}, {"name": "x" * 300},
        {"requires": ["Not A Label"]}, {"requires": ["gpu", "gpu=a100"]}, {"requires": "gpu"},
        {"requires": [f"k{i}" for i in range(17)]}, {"memory_limit_bytes": 1024},
        {"cpu_limit_s": 0}, {"memory_limit_bytes": "512M"},
        {"parameters": [{"name": "QL_X", "default": "1"}]},
        {"parameters": [{"name": "n", "type": "float", "default": 1}]},
        {"parameters": [{"name": "n", "type": "integer", "default": "many"}]},
        {"parameters": [{"name": "a", "default": "1"}, {"name": "a", "default": "2"}]}],
    ("POST", "/api/v1/projects/{project}/triggers/{trigger}/revisions"): [
        {"cron": "61 * * * *"}, {"timezone": "Mars/Olympus"}, {"misfire": "sometimes"},
        {"overlap": "queue", "overlap_queue_limit": -1}, {"overlap_queue_limit": 3},
        {"enabled": "yes"}, {"task": "Bad Task"}, {"parameters": {"nope": "1"}},
        {"parameters": {"x": [1]}}, {"flow": "Bad Flow"}],
    ("POST", "/api/v1/projects/{project}/triggers/{trigger}/pause"): [{"until": "soon"}],
    ("PUT", "/api/v1/projects/{project}/tasks/{task}/labels"): [
        {"labels": ["Upper"]}, {"labels": ["ok", "has space"]}, {"labels": ["x" * 49]},
        {"labels": [""]}, {"labels": "nightly"}, {"labels": [f"l{i}" for i in range(17)]}, {}],
    ("PUT", "/api/v1/projects/{project}/triggers/{trigger}/labels"): [
        {"labels": ["-dash"]}, {"labels": [7]}, {}],
    ("PUT", "/api/v1/me/filters/{filter}"): [
        {"page": "audit", "query": {}}, {"page": "runs", "query": {"Bad": "x"}},
        {"page": "runs", "query": {"status": "a\nb"}}, {"page": "runs", "query": {"s": 1}},
        {"page": "runs"}, {"page": "runs", "query": {f"k{i}": "x" for i in range(17)}}],
    ("POST", "/api/v1/projects/{project}/tasks/{task}/run"): [{"request_id": "has space"},
                                                             {"request_id": 5},
                                                             {"parameters": {"nope": "1"}},
                                                             {"parameters": {"x": [1]}}],
    ("POST", "/api/v1/projects/{project}/triggers/{trigger}/fire"): [{"request_id": ""}],
    ("POST", "/api/v1/projects/{project}/flows/{flow}/revisions"): [
        {"nodes": {}}, {"nodes": {"a": "Bad Task"}}, {"nodes": {"a": "nope"}},
        {"nodes": {"a": "hello", "b": {"task": "hello", "after": "c"}}},
        {"nodes": {"a": {"task": "hello", "after": "b"}, "b": {"task": "hello", "after": "a"}}},
        {"nodes": {"a": {"task": "hello", "after": {"a": "maybe"}}}},
        {"nodes": {"a": {"task": "hello", "join": "any"}}},
        {"nodes": {"a": {"task": "hello", "parameters": {"nope": 1}}}},
        {"failure": "panic", "nodes": {"a": "hello"}}, {"timeout": "soon", "nodes": {"a": "hello"}},
        {"timeout": "10ms", "nodes": {"a": "hello"}}, {"name": "", "nodes": {"a": "hello"}}],
    ("POST", "/api/v1/projects/{project}/repos"): [
        {"name": "jd", "url": "not a url"}, {"name": "Bad Name!", "url": "/r.git"},
        {"name": "jd", "url": "/r.git", "branch": "../x"},
        {"name": "jd", "url": "/r.git", "schedule": "99 * * * *"},
        {"name": "jd", "url": "/r.git", "token_env": "bad name"}],
    ("PUT", "/api/v1/projects/{project}/scripts/content"): [
        {"path": "/abs.py", "content": "print(1)"}, {"path": "a/../b.py", "content": "x"},
        {"path": "x.py"}, {"content": "x"}, {"path": "x.py", "content": 7},
        {"path": "x.py", "content": "x", "expected_revision": -1},
        {"path": "x.py", "content": "x", "expected_revision": 5}],
    ("POST", "/api/v1/projects/{project}/flows/{flow}/run"): [{"request_id": "has space"},
                                                             {"parameters": {"x": [1]}}],
    ("PUT", "/api/v1/projects/{project}/environment/{variable}"): [
        {"value": 5}, {"secret": "yes"}, {"enabled": 1}, {"value": "a\u0000b"},
        {"description": "two\nlines"}, {"value": "x" * (64 * 1024 + 1)}, {}],
    ("POST", "/api/v1/account/second-factor/confirm"): [{"otp": "12345"}, {"otp": 123456},
                                                       {"otp": "abcdef"}, {}],
    ("DELETE", "/api/v1/account/second-factor"): [
        {}, {"otp": "1"}, {"recovery_code": ""}, {"otp": "123456", "recovery_code": "x"}],
    ("POST", "/api/v1/tokens"): [{"name": "x", "scope": "root"}, {"name": "", "scope": "read"},
                                 {"name": "x", "scope": "read", "expires_in_ms": 1},
                                 {"name": "x", "scope": "read", "username": "Not Valid"}],
    ("POST", "/api/v1/users"): [{"username": "Bad Name", "role": "viewer", "password": PASSWORD},
                                {"username": "newbie", "role": "god", "password": PASSWORD},
                                {"username": "newbie", "role": "viewer", "password": "short"},
                                {"username": "admin", "role": "viewer", "password": PASSWORD}],
    ("PATCH", "/api/v1/users/{username}"): [{"role": "god"}, {"password": "short"},
                                            {"disabled": "true"}],
    ("POST", "/api/v1/projects/{project}/triggers/{trigger}/backfill"): [
        {"from": "yesterday", "to": "2026-01-01T00:00:00Z"},
        {"from": "2026-01-01T00:00:00", "to": "2026-01-02T00:00:00Z"},
        {"from": 5, "to": 1}, {"from": True, "to": 1}, {"to": 1},
        {"from": -1, "to": 1},  # (a window before the first publish is no bad input)
        {"from": "2098-01-01T00:00:00Z", "to": "2099-01-01T00:00:00Z"},
        {"from": 1, "to": 2, "dry_run": "yes"}],
    ("POST", "/api/v1/notify/channels"): [
        {"name": "Bad Name", "kind": "webhook", "url": "https://hooks.example.com/h"},
        {"name": "a", "kind": "sms"}, {"name": "a", "kind": "webhook"},
        {"name": "a", "kind": "webhook", "url": "ftp://hooks.example.com/h"},
        {"name": "a", "kind": "webhook", "url": "https://hooks.example.com/h",
         "smtp_host": "mail.example.com"},
        {"name": "a", "kind": "webhook", "url": "https://hooks.example.com/h",
         "headers": ["Host: elsewhere"]},
        {"name": "a", "kind": "webhook", "url": "https://hooks.example.com/h",
         "max_attempts": 0},
        {"name": "a", "kind": "webhook", "url": "https://hooks.example.com/h",
         "secret": "two\nlines"},
        {"name": "a", "kind": "webhook", "url": "https://hooks.example.com/h",
         "drop_secret": True},
        {"name": "a", "kind": "webhook", "url": "https://hooks.example.com/h",
         "timeout_ms": 5},
        {"name": "a", "kind": "email", "smtp_host": "mail.example.com", "from": "nobody",
         "to": ["ops@example.com"]},
        {"name": "a", "kind": "email", "smtp_host": "mail.example.com",
         "from": "ql@example.com", "to": []},
        {"name": "a", "kind": "template", "preset": "telegram"},
        {"name": "a", "kind": "template", "preset": "bark"},
        {"name": "a", "kind": "template", "url": "https://chat.example.com/{nope}"},
        {"name": "a", "kind": "template", "url": "https://chat.example.com/h",
         "body_template": "not json"},
        {"name": "ops", "kind": "webhook", "url": "https://hooks.example.com/h"},
        {"name": "a", "kind": "service"}, {"name": "a", "kind": "service", "service": "sms"},
        {"name": "a", "kind": "service", "service": "gotify", "secret": "app-token"},
        {"name": "a", "kind": "service", "service": "ntfy", "params": {"topic": "a b"}},
        {"name": "a", "kind": "service", "service": "slack", "secret": "not a url"},
        {"name": "a", "kind": "service", "service": "dingtalk"},
        {"name": "a", "kind": "service", "service": "feishu", "url": "https://x.example.com",
         "secret": "tok"},
        {"name": "a", "kind": "webhook", "url": "https://hooks.example.com/h",
         "service": "slack"}],
    ("POST", "/api/v1/notify/rules"): [
        {"channel": "ops", "project": "demo", "events": ["sometimes"]},
        {"channel": "ops", "project": "demo", "events": []},
        {"channel": "Bad Name", "project": "demo"}, {"channel": "ops", "project": "Demo"},
        {"channel": "ops"}, {"channel": "ops", "project": "demo", "task": "Bad Task"},
        {"channel": "ops", "project": "demo", "unplaceable_after_ms": 59_999},
        {"channel": "ops", "project": "demo", "events": ["failed"],
         "unplaceable_after_ms": 600_000},
        {"channel": "ops", "project": "demo", "events": ["failed"],
         "running_long_after_ms": 600_000},
        {"channel": "ops", "project": "demo", "events": ["late_start"],
         "late_start_after_ms": 1_000}],
    ("POST", "/api/v1/notify/rules/remove"): [
        {"channel": "ops", "project": "demo", "events": ["nope"]},
        {"channel": "ops", "project": "demo", "events": []}, {"channel": "ops"},
        {"channel": "ops", "project": "demo", "unplaceable_after_ms": 600_000},
        {"channel": "ops", "project": "demo", "late_start_after_ms": 600_000}],
}
# These answer 409 (the stored state refuses), never 422.
CONFLICTS = {("PUT", "/api/v1/projects/{project}/scripts/content"): [
                 {"path": "x.py", "content": "x", "expected_revision": 5}],
             ("POST", "/api/v1/users"): [{"username": "admin", "role": "viewer",
                                          "password": PASSWORD}],
             ("POST", "/api/v1/notify/channels"): [
                 {"name": "ops", "kind": "webhook", "url": "https://hooks.example.com/h"}]}


REQUIRED_QUERY_VALUES = {"path": "hello.py"}  # a write route's required query parameters


def required_query(endpoint: Endpoint) -> str:
    """The query string of the parameters ``endpoint`` requires (so a probe of its body is
    not refused for a missing parameter first)."""
    needed = [q.name for q in endpoint.query if q.required]
    return ("?" + "&".join(f"{name}={REQUIRED_QUERY_VALUES[name]}" for name in needed)
            if needed else "")


def bad_input_everywhere(http: Http, admin: Auth, world: World) -> int:
    """Every write route with an unreadable body, a wrong content type, an unknown field,
    wrong types and broken rules, on existing targets: a problem each time. Returns the
    number of requests."""
    made = 0

    def target(endpoint: Endpoint) -> str:
        values = {"project": "demo", "task": "hello", "trigger": "yearly",
                  "run": world.run_id, "token": "ffffffffffffffff", "username": "viewer",
                  "channel": "ops", "delivery": GHOST_RUN, "flow": "etl",
                  "flow_run": GHOST_RUN, "variable": "REGION", "repo": "ghost",
                  "filter": "mine"}
        return re.sub(r"\{([a-z_]+)\}", lambda m: values[m.group(1)], endpoint.path)

    for endpoint in write_endpoints():
        path = target(endpoint) + required_query(endpoint)
        key = (endpoint.method, endpoint.path)
        if endpoint.body is None:
            answer = http.call(endpoint.method, path, auth=admin, body={"surprise": 1})
            body = answer.problem(422, "QL_INVALID_INPUT")
            assert body["field"] == "body", body
            made += 1
            continue
        cases: list[tuple[bytes, str | None, int, str | None]] = [
            (b'{"unterminated": ', "application/json", 400, "QL_BAD_REQUEST"),
            (b"\xff\xfe not utf-8", "application/json", 400, "QL_BAD_REQUEST"),
            (b'{"a": 1}', "text/plain", 415, "QL_UNSUPPORTED_MEDIA_TYPE"),
            (b'{"a": 1}', None, 415, "QL_UNSUPPORTED_MEDIA_TYPE"),
            (b"[1, 2]", "application/json", 422, "QL_INVALID_INPUT"),
            (b'{"surprise": true}', "application/json", 422, "QL_INVALID_INPUT"),
            (b"{" + b'"x": "' + b"y" * (1024 * 1024) + b'"}', "application/json", 413,
             "QL_PAYLOAD_TOO_LARGE"),
        ]
        for raw, media, status, code in cases:
            answer = http.call(endpoint.method, path, auth=admin, raw=raw, content_type=media)
            answer.problem(status, code)
            made += 1
        for bad in BAD_BODIES.get(key, []):
            answer = http.call(endpoint.method, path, auth=admin, body=bad)
            conflict = bad in CONFLICTS.get(key, [])
            body = answer.problem(409 if conflict else 422)
            if not conflict:
                assert body.get("field"), (key, bad, body)
            made += 1
    return made


# --- the flows both profiles run ------------------------------------------------------------


@dataclass
class Database:
    """Reads and writes past the API (as a superuser on PostgreSQL), for set-up and checks."""

    query: Callable[[str], list[dict[str, Any]]]
    execute: Callable[[str, tuple[object, ...]], None]
    placeholder: str  # "?" (SQLite) or "%s" (PostgreSQL)

    def run(self, statement: str, *params: object) -> None:
        self.execute(statement.replace("?", self.placeholder), params)


def session_digest(auth: Auth) -> str:
    import hashlib

    assert auth.cookie is not None
    return hashlib.sha256(auth.cookie.encode()).hexdigest()


def strangers(http: Http, admin: Auth, db: Database, accounts_url: str) -> list[Auth]:
    """Every way of not being authenticated: nothing, unknown, malformed, expired, idle,
    logged out, revoked, a disabled user's token."""
    found = [
        NOBODY,
        Auth(token="qlt_" + "0" * 16 + "_" + "A" * 43, label="unknown token"),
        Auth(token="not-a-token", label="garbage token"),
        Auth(header="Basic YWRtaW46eA==", label="basic auth"),
        Auth(header="Bearer", label="empty bearer"),
        Auth(cookie="garbage", csrf="x", label="garbage cookie"),
    ]
    expired = login(http, "admin")
    db.run("UPDATE user_sessions SET expires_at_ms = created_at_ms + 1 WHERE id_digest = ?",
           session_digest(expired))
    idle = login(http, "admin")
    db.run("UPDATE user_sessions SET idle_expires_at_ms = created_at_ms + 1 "
           "WHERE id_digest = ?", session_digest(idle))
    gone = login(http, "operator")
    assert http.call("DELETE", "/api/v1/session", auth=gone).status == 204
    made = http.ok("POST", "/api/v1/tokens", admin,
                   {"name": "revoked", "scope": "read", "username": "operator"}, 201)
    http.ok("DELETE", f"/api/v1/tokens/{made['id']}", admin)
    old = http.ok("POST", "/api/v1/tokens", admin,
                  {"name": "old", "scope": "read", "expires_in_ms": 60_000}, 201)
    db.run("UPDATE api_tokens SET expires_at_ms = created_at_ms + 1 WHERE id = ?", old["id"])
    accounts, close = open_accounts(accounts_url, SystemClock())
    try:
        accounts.user_create("leaver", "operator", PASSWORD)
        leaver = accounts.token_create("leaver", name="t", scope="operate", lifetime_ms=None)
    finally:
        close()
    http.ok("PATCH", "/api/v1/users/leaver", admin, {"disabled": True})
    found += [
        Auth(cookie=expired.cookie, csrf=expired.csrf, label="expired session"),
        Auth(cookie=idle.cookie, csrf=idle.csrf, label="idle session"),
        Auth(cookie=gone.cookie, csrf=gone.csrf, label="logged-out session"),
        Auth(token=str(made["token"]), label="revoked token"),
        Auth(token=str(old["token"]), label="expired token"),
        Auth(token=leaver.token, label="disabled user's token"),
    ]
    return found


def flow_authorization(http: Http, people: People, db: Database, accounts_url: str) -> None:
    admin = people.tokens["admin"]
    world = seed(http, admin)
    seed_notify(http, admin)
    document = http.ok("GET", "/api/v1/openapi.json", admin)
    outsiders = strangers(http, admin, db, accounts_url)
    sessions = {role: login(http, role) for role in ROLES}
    made = authorization_matrix(http, people, sessions, world, outsiders, document)
    assert made > 40 * (len(outsiders) + 8), made
    # routes that do not exist answer strangers 401, everyone else 404 or 405
    for auth, status in ((NOBODY, 401), (people.tokens["viewer"], 404)):
        http.call("GET", "/api/v1/nothing-here", auth=auth).problem(status)
        http.call("GET", "/", auth=auth).problem(status)
    http.call("PUT", "/api/v1/projects", auth=NOBODY).problem(401)
    answer = http.call("PUT", "/api/v1/projects", auth=people.tokens["viewer"])
    answer.problem(405, "QL_METHOD_NOT_ALLOWED")
    assert answer.headers["allow"] == "GET, POST"
    # only /livez, /readyz and the login answer strangers
    assert http.call("GET", "/livez").json == {"status": "alive"}
    assert http.call("GET", "/readyz").json == {"status": "ready"}
    http.call("POST", "/api/v1/session", body={}).problem(422)
    # logging out: the session's own CSRF token is needed, then the cookie is dead
    viewer = sessions["viewer"]
    http.call("DELETE", "/api/v1/session",
              auth=Auth(cookie=viewer.cookie, label="no csrf")).problem(403, "QL_FORBIDDEN")
    assert http.call("DELETE", "/api/v1/session", auth=viewer).status == 204
    http.call("GET", "/api/v1/session", auth=viewer).problem(401)
    # a token-authenticated logout ends nothing
    assert http.call("DELETE", "/api/v1/session", auth=people.tokens["viewer"]).status == 204
    assert http.ok("GET", "/api/v1/session", people.tokens["viewer"])["via"] == "token"


def flow_bad_input(http: Http, people: People, db: Database) -> None:
    admin = people.tokens["admin"]
    world = seed(http, admin)
    seed_notify(http, admin)
    http.ok("GET", "/api/v1/session", admin)  # its first use is recorded now, not below
    before = snapshot(db.query)
    made = bad_input_everywhere(http, admin, world)
    assert made > 150, made
    for path, field_name in (("/api/v1/notify/deliveries?status=lost", "status"),
                             ("/api/v1/notify/deliveries?limit=0", "limit"),
                             ("/api/v1/notify/channels/Bad%20Name", "channel")):
        body = http.call("GET", path, auth=admin).problem(422)
        assert body["field"] == field_name, (path, body)
    for raw, media, status in ((b"{", "application/json", 400),
                               (b'{"username": 5, "password": "x"}', "application/json", 422),
                               (b'{"username": "admin"}', "application/json", 422),
                               (b"username=admin", "application/x-www-form-urlencoded", 415)):
        http.call("POST", "/api/v1/session", raw=raw, content_type=media).problem(status)
    # query strings are read as strictly
    for path, field_name in (("/api/v1/runs?limit=0", "limit"), ("/api/v1/runs?limit=x", "limit"),
                             ("/api/v1/runs?status=done", "status"),
                             ("/api/v1/runs?since=yesterday", "since"),
                             ("/api/v1/runs?colour=red", "colour"),
                             ("/api/v1/runs?limit=1&limit=2", "limit"),
                             ("/api/v1/runs?trigger=Demo/yearly", "trigger"),
                             ("/api/v1/runs?task=demo/hello/x", "task"),
                             ("/api/v1/projects/demo/tasks?include_deleted=maybe",
                              "include_deleted"),
                             ("/api/v1/projects/Demo/tasks", "project"),
                             ("/api/v1/cron/preview", "cron"),
                             ("/api/v1/cron/preview?cron=*+*&timezone=UTC", "cron"),
                             ("/api/v1/projects/demo/stats?from=2026-13-01", "from"),
                             ("/api/v1/projects/demo/stats?timezone=Nowhere/Land", "timezone"),
                             (("/api/v1/projects/demo/triggers/yearly/ledger"
                               "?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z"), "from")):
        body = http.call("GET", path, auth=admin).problem(422)
        assert body["field"] == field_name, (path, body)
    assert snapshot(db.query) == before


def flow_pages(http: Http, people: People) -> None:
    admin = people.tokens["admin"]
    seed(http, admin)
    base = "/api/v1/projects/demo"
    for index in range(22):
        http.ok("POST", f"{base}/tasks/hello/run", admin, {"request_id": f"page-{index:02d}"},
                201)
    http.ok("POST", f"{base}/triggers/yearly/fire", admin, {}, 201)
    whole = http.ok("GET", "/api/v1/runs?limit=1000", admin)
    assert whole["next_cursor"] is None
    runs = whole["items"]
    assert len(runs) == 24
    keys = [(r["scheduled_for_ms"], r["id"]) for r in runs]
    assert keys == sorted(keys, reverse=True)

    def walk(query: str, size: int, between: Callable[[], None] | None = None) -> list[str]:
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            path = f"/api/v1/runs?{query}&limit={size}" + (f"&cursor={cursor}" if cursor else "")
            page = http.ok("GET", path, admin)
            assert len(page["items"]) <= size
            seen += [r["id"] for r in page["items"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                return seen
            assert len(page["items"]) == size
            if between is not None and pages == 1:
                between()

    ids = [r["id"] for r in runs]
    assert walk("order=newest", 7) == ids
    assert walk("order=oldest", 5) == ids[::-1]
    assert walk("order=newest", 24) == ids  # an exact last page: no empty page after it
    manual_by_task = [r["id"] for r in runs if r["trigger"] is None]
    assert walk("task=hello&trigger=yearly", 3) == [r["id"] for r in runs if r["trigger"]]
    # a filter as the panel and the CLI show it: PROJECT/ID (spaces around the slash allowed)
    assert walk("trigger=demo/yearly", 3) == [r["id"] for r in runs if r["trigger"]]
    assert walk("task=demo%20/%20hello&order=newest", 5) == ids
    assert walk("status=queued&task=hello&order=newest", 4) == ids
    assert len(manual_by_task) == 23

    def more() -> None:  # Runs admitted while a client pages do not shift its pages
        for index in range(3):
            http.ok("POST", f"{base}/tasks/hello/run", admin, {"request_id": f"late-{index}"},
                    201)

    assert walk("order=newest", 6, more) == ids
    later = http.ok("GET", "/api/v1/runs?limit=3", admin)["items"]
    assert {r["request_id"] for r in later} == {"late-0", "late-1", "late-2"}
    first = http.ok("GET", "/api/v1/runs?limit=2", admin)
    for cursor, problem_field in ((first["next_cursor"] + "x", "cursor"), ("%%%", "cursor"),
                                  ("bm90IGpzb24", "cursor")):
        body = http.call("GET", f"/api/v1/runs?cursor={cursor}", auth=admin).problem(422)
        assert body["field"] == problem_field
    body = http.call("GET", f"/api/v1/runs?order=oldest&cursor={first['next_cursor']}",
                     auth=admin).problem(422)
    assert "order" in body["detail"]


def flow_openapi(http: Http, people: People) -> None:
    from openapi_spec_validator import validate

    admin = people.tokens["viewer"]
    http.call("GET", "/api/v1/openapi.json").problem(401)
    document = http.ok("GET", "/api/v1/openapi.json", admin)
    validate(document)
    assert document["openapi"].startswith("3.1")
    listed = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    assert listed == {(e.method, e.path) for e in ENDPOINTS}
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            responses = op["responses"]
            assert any(code[0] in "23" for code in responses), (method, path)  # 303: SSO
            if path.startswith("/api/"):
                assert {"404", "422"} <= set(responses), (method, path)
                assert responses["422"]["content"]["application/problem+json"]["schema"] == {
                    "$ref": "#/components/schemas/Problem"}
            if (method.upper(), path) not in PUBLIC:
                assert "401" in responses and "403" in responses, (method, path)
    page = http.call("GET", "/api/v1/docs", auth=admin)
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    for path in document["paths"]:
        assert f"{path}</code>" in page.text, path
    assert "<script" not in page.text


def wait_for_status(http: Http, auth: Auth, run_id: str, wanted: set[str],
                    timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = http.ok("GET", f"/api/v1/runs/{run_id}?tail=0", auth)["run"]
        if run["status"] in wanted:
            return dict(run)
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not reach {wanted}")


def flow_log_follow_and_cancel(http: Http, people: People) -> None:
    """A Run's output followed live (server-sent events), then a running Run cancelled."""
    operator, admin = people.tokens["operator"], people.tokens["admin"]
    seed(http, admin)
    base = "/api/v1/projects/demo/tasks"
    http.ok("POST", f"{base}/lines/revisions", admin, {"command": {
        "kind": "shell", "command": "for i in $(seq 8); do echo line $i; sleep 0.5; done"}}, 201)
    run = http.ok("POST", f"{base}/lines/run", operator, {}, 201)
    events = http.events(f"/api/v1/runs/{run['id']}/logs?follow=true", people.tokens["viewer"])
    kinds = [kind for kind, _, _ in events]
    assert kinds[-1] == "end" and set(kinds[:-1]) == {"log"}, events
    assert "".join(data["text"] for kind, data, _ in events if kind == "log") == "".join(
        f"line {i}\n" for i in range(1, 9))
    assert len(kinds) >= 3  # the output came in pieces, as it was written
    assert events[-1][1] == {"status": "succeeded"}
    finished = http.ok("GET", f"/api/v1/runs/{run['id']}", admin)["run"]
    # the first lines came while the command still ran (workers ship output every second)
    first_seen_ms = events[0][2] * 1000
    assert first_seen_ms < _ms(finished["finished_at"]) - 1500, (events, finished)
    # the whole log, and its tail, as text
    assert http.call("GET", f"/api/v1/runs/{run['id']}/logs", auth=admin).text == "".join(
        f"line {i}\n" for i in range(1, 9))
    assert http.call("GET", f"/api/v1/runs/{run['id']}/logs?tail=2",
                     auth=admin).text == "line 7\nline 8\n"
    # a long Run, cancelled while it runs; its follower sees it end cancelled
    http.ok("POST", f"{base}/long/revisions", admin, {"command": {
        "kind": "shell", "command": "echo started; exec sleep 60"}}, 201)
    long_run = http.ok("POST", f"{base}/long/run", operator, {"request_id": "long-1"}, 201)
    wait_for_status(http, admin, long_run["id"], {"running"})
    cancelled: dict[str, Any] = {}

    def on_event(kind: str, payload: Any) -> None:
        if kind == "log" and not cancelled:
            cancelled.update(http.ok("POST", f"/api/v1/runs/{long_run['id']}/cancel",
                                     operator, {}))

    streamed = http.events(f"/api/v1/runs/{long_run['id']}/logs", people.tokens["viewer"],
                           on_event=on_event)
    assert cancelled["cancel"] == "requested" and cancelled["id"] == long_run["id"]
    assert streamed[0][1] == {"text": "started\n"}
    assert streamed[-1][:2] == ("end", {"status": "cancelled"})
    shown = http.ok("GET", f"/api/v1/runs/{long_run['id']}", admin)
    assert shown["run"]["cancel_reason"] == "user"
    assert any(e["actor"] == "user:operator" for e in shown["events"]), shown["events"]
    http.call("POST", f"/api/v1/runs/{long_run['id']}/cancel", auth=operator,
              body={}).problem(409)
    audit = http.ok("GET", "/api/v1/audit?limit=100", admin)["items"]
    done = [(e["actor"], e["action"], e["target"]) for e in audit]
    assert ("operator", "run.cancel", f"run {long_run['id']}") in done
    assert ("operator", "run.now", "task long") in done


def _ms(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text).timestamp() * 1000)


def flow_security(http: Http, people: People, db: Database) -> None:
    admin = people.tokens["admin"]
    seed(http, admin)
    # login rate limit: 5 failures per user name, then 429 even for the right password
    for _ in range(5):
        http.call("POST", "/api/v1/session",
                  body={"username": "viewer", "password": "wrong password!"}).problem(401)
    limited = http.call("POST", "/api/v1/session",
                        body={"username": "viewer", "password": PASSWORD})
    limited.problem(429, "QL_RATE_LIMITED")
    assert 1 <= int(limited.headers["retry-after"]) <= 900
    assert "set-cookie" not in limited.headers
    http.call("POST", "/api/v1/session",
              body={"username": "nobody-at-all", "password": PASSWORD}).problem(401)
    login(http, "operator")  # another user is not held back
    db.run("DELETE FROM login_failures WHERE subject = ?", "user:viewer")
    login(http, "viewer")
    # CSRF: a session write needs its own token
    session = login(http, "admin")
    path = "/api/v1/projects/demo/triggers/yearly/pause"
    for auth in (Auth(cookie=session.cookie), Auth(cookie=session.cookie, csrf="0" * 64)):
        http.call("POST", path, auth=auth, body={}).problem(403, "QL_FORBIDDEN")
    paused = http.ok("POST", path, session, {"reason": "maintenance"})
    assert paused["state"] == "paused" and paused["pause"]["reason"] == "maintenance"
    # environment values are write-only, everywhere
    secret = "s3cr3t-value-xyz"
    published = http.ok("POST", "/api/v1/projects/demo/tasks/hello/revisions", admin,
                        {"environment": {"API_SECRET": secret}}, 201)
    assert published["environment"] == ["API_SECRET"]
    run = http.ok("POST", "/api/v1/projects/demo/tasks/hello/run", admin, {}, 201)
    for path in ("/api/v1/projects/demo/tasks", "/api/v1/projects/demo/tasks/hello",
                 "/api/v1/projects/demo/tasks/hello/diff", "/api/v1/audit?limit=1000",
                 f"/api/v1/runs/{run['id']}", "/api/v1/runs?limit=100",
                 "/api/v1/projects/demo/triggers"):
        answer = http.call("GET", path, auth=admin)
        assert answer.status == 200 and secret.encode() not in answer.raw, path
    diff = http.ok("GET", "/api/v1/projects/demo/tasks/hello/diff", admin)
    assert {"field": "environment.API_SECRET", "from": None, "to": "(set)"} in diff["changes"]
    # tokens are shown once: never listed again, and stored as digests only
    made = http.ok("POST", "/api/v1/tokens", session, {"name": "ci", "scope": "operate"}, 201)
    assert made["token"].startswith(f"qlt_{made['id']}_")
    listed = http.ok("GET", "/api/v1/tokens", admin)
    assert all("token" not in t for t in listed) and made["id"] in {t["id"] for t in listed}
    stored = db.query("SELECT * FROM api_tokens")
    assert made["token"] not in json.dumps(stored, default=str)
    hashes = db.query("SELECT password_hash FROM users")
    assert all(str(h["password_hash"]).startswith("$argon2id$") for h in hashes)
    # a token narrower than admin cannot mint tokens; an operator cannot mint an admin token
    http.call("POST", "/api/v1/tokens", auth=people.tokens["admin-operate"],
              body={"name": "x", "scope": "read"}).problem(403)
    operator = login(http, "operator")
    body = http.call("POST", "/api/v1/tokens", auth=operator,
                     body={"name": "x", "scope": "admin"}).problem(422)
    assert body["field"] == "scope"
    http.call("POST", "/api/v1/tokens", auth=operator,
              body={"name": "x", "scope": "read", "username": "viewer"}).problem(403)
    # the audit log says who did what
    audit = http.ok("GET", "/api/v1/audit?limit=1000", admin)["items"]
    assert [(e["actor"], e["via"]) for e in audit if e["action"] == "trigger.pause"] == [
        ("admin", "session")]
    publish = [e for e in audit if e["action"] == "task.publish"]
    assert publish[0]["detail"]["environment_set"] == ["API_SECRET"]
    assert all(e["via"] == "token" for e in publish)
    page = http.ok("GET", "/api/v1/audit?limit=2", admin)
    rest = http.ok("GET", f"/api/v1/audit?limit=1000&cursor={page['next_cursor']}", admin)
    assert [e["id"] for e in page["items"] + rest["items"]] == [e["id"] for e in audit]


def endpoint_for(method: str, path: str) -> Endpoint:
    for endpoint in ENDPOINTS:
        if (endpoint.method, endpoint.path) == (method, path):
            return endpoint
    raise KeyError((method, path))


BACKFILL = "/api/v1/projects/{project}/triggers/{trigger}/backfill"


def flow_backfill(http: Http, people: People, db: Database) -> None:
    """Backfill over HTTP, with no scheduler running (so the trigger's horizon is its current
    revision's publish time): a dry run writes nothing, a backfill admits every occurrence
    without a Run, a repeat admits nothing, and refusals write nothing."""
    admin, operator, viewer = (people.tokens[r] for r in ("admin", "operator", "viewer"))
    seed(http, admin)
    check = response_schemas(http.ok("GET", "/api/v1/openapi.json", viewer))
    endpoint = endpoint_for("POST", BACKFILL)
    base = "/api/v1/projects/demo/triggers/bf"
    first = http.ok("POST", f"{base}/revisions", admin,
                    {"task": "hello", "schedule": "every 1s", "timezone": "UTC"}, 201)
    # two whole seconds of it lie between the two revisions (the server's clock, PostgreSQL's
    # or its own, is this machine's)
    while time.time() * 1000 < first["published_at_ms"] + 2_100:
        time.sleep(0.05)
    second = http.ok("POST", f"{base}/revisions", admin, {"misfire": "fire_once"}, 201)
    assert second["revision"] == 2
    window = {"from": first["published_at"], "to": second["published_at_ms"] - 1}
    before = snapshot(db.query)
    dry = http.ok("POST", f"{base}/backfill", operator, {**window, "dry_run": True})
    check(endpoint, 200, dry)
    assert dry["dry_run"] is True and dry["trigger_revision"] == 2
    assert dry["occurrences"] == dry["to_admit"] == len(dry["to_admit_ms"]) >= 2, dry
    assert dry["already_had_run"] == 0 and dry["actor"] == "operator"
    assert snapshot(db.query) == before  # a dry run writes nothing
    http.call("POST", f"{base}/backfill", auth=viewer, body=window).problem(403, "QL_FORBIDDEN")
    done = http.ok("POST", f"{base}/backfill", operator, window, 201)
    check(endpoint, 201, done)
    assert done["dry_run"] is False and done["state"] == "done" and done["rate"] == 200
    assert done["admitted"] == dry["to_admit"] and done["skipped"] == 0, done
    assert done["already_had_run"] == 0 and done["next_ms"] is None
    assert [r["scheduled_for_ms"] for r in done["runs"]] == dry["to_admit_ms"]
    for admitted in done["runs"]:
        run = http.ok("GET", f"/api/v1/runs/{admitted['run_id']}?tail=0", viewer)["run"]
        assert (run["trigger_type"], run["origin"], run["trigger"]) == (
            "backfill", "backfill_user", "bf"), run
        assert run["scheduled_for_ms"] == admitted["scheduled_for_ms"]
        assert run["status"] == "queued" and run["requested_by"] == "operator", run
    # the same request again admits nothing: every occurrence already has its Run
    after = snapshot(db.query)
    again = http.ok("POST", f"{base}/backfill", admin, window, 200)
    check(endpoint, 200, again)
    assert (again["admitted"], again["already_had_run"], again["runs"]) == (
        0, done["admitted"], []), again
    assert {k: v for k, v in snapshot(db.query).items() if k != "audit_log"} == {
        k: v for k, v in after.items() if k != "audit_log"}
    listed = http.ok("GET", "/api/v1/runs?trigger=bf&limit=100", viewer)["items"]
    assert sorted(r["id"] for r in listed) == sorted(r["run_id"] for r in done["runs"])
    # refusals write nothing: past the horizon, a disabled trigger (the first publish is no
    # bound: a dry run reaching back before it answers, writing nothing)
    after = snapshot(db.query)
    body = http.call("POST", f"{base}/backfill", auth=operator,
                     body={"from": window["from"],
                           "to": second["published_at_ms"] + 60_000}).problem(422)
    assert body["field"] == "to" and "scheduler" in body["detail"], body
    early = http.ok("POST", f"{base}/backfill", operator,
                    {"from": first["published_at_ms"] - 1, "to": window["to"], "dry_run": True})
    assert (early["from_ms"], early["dry_run"]) == (first["published_at_ms"] - 1, True), early
    http.call("POST", "/api/v1/projects/demo/triggers/ghost/backfill", auth=operator,
              body=window).problem(404, "QL_NOT_FOUND")
    assert snapshot(db.query) == after
    http.ok("POST", f"{base}/disable", operator, {})
    after = snapshot(db.query)
    http.call("POST", f"{base}/backfill", auth=operator, body=window).problem(409)
    assert snapshot(db.query) == after
    audit = http.ok("GET", "/api/v1/audit?limit=100", admin)["items"]
    backfills = [e for e in audit if e["action"] == "trigger.backfill"]
    assert [(e["actor"], e["detail"]["admitted"]) for e in backfills] == [
        ("admin", 0), ("operator", done["admitted"])], backfills
    assert backfills[0]["target"] == "trigger bf" and backfills[0]["project"] == "demo"


def flow_trigger_specs(http: Http, people: People, db: Database) -> None:
    """Every schedule kind and spec option the CLI publishes, over HTTP: interval and one-shot
    schedules, a cron trigger's DST policy and a bounded jitter, shown back by the trigger
    views; options a schedule cannot take are refused with nothing written."""
    admin, viewer = people.tokens["admin"], people.tokens["viewer"]
    seed(http, admin)
    base = "/api/v1/projects/demo/triggers"
    check = response_schemas(http.ok("GET", "/api/v1/openapi.json", viewer))
    endpoint = endpoint_for("POST", "/api/v1/projects/{project}/triggers/{trigger}/revisions")
    nightly = http.ok("POST", f"{base}/nightly/revisions", admin,
                      {"task": "hello", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
                       "dst_gap": "skip", "dst_overlap": "both", "jitter_s": 600,
                       "jitter_random_s": 60}, 201)
    check(endpoint, 201, nightly)
    shown = http.ok("GET", f"{base}/nightly", viewer)
    assert shown["dst"] == {"gap": "skip", "overlap": "both"}, shown
    assert (shown["jitter"]["max_s"], shown["jitter"]["random_s"]) == (600, 60), shown
    assert 0 <= shown["jitter"]["stable_s"] <= 540, shown
    # a partial publish keeps the DST policy and the jitter; jitter_s 0 removes the jitter
    http.ok("POST", f"{base}/nightly/revisions", admin, {"misfire": "fire_once"}, 201)
    kept = http.ok("GET", f"{base}/nightly", viewer)
    assert kept["dst"] == shown["dst"] and kept["jitter"] == shown["jitter"], kept
    http.ok("POST", f"{base}/nightly/revisions", admin, {"jitter_s": 0}, 201)
    assert http.ok("GET", f"{base}/nightly", viewer)["jitter"] is None
    every = http.ok("POST", f"{base}/tick/revisions", admin,
                    {"task": "hello", "schedule": "every 90s", "timezone": "UTC"}, 201)
    check(endpoint, 201, every)
    assert http.ok("GET", f"{base}/tick", viewer)["kind"] == "interval"
    future = "2099-01-01T00:00:00Z"
    http.ok("POST", f"{base}/once/revisions", admin,
            {"task": "hello", "schedule": f"at {future}", "timezone": "UTC"}, 201)
    assert http.ok("GET", f"{base}/once", viewer)["kind"] == "once"
    # refusals: DST policy on an interval, jitter beyond the bound, random without jitter
    before = snapshot(db.query)
    for name, body, wanted in (
            ("tick", {"dst_gap": "skip"}, "dst-gap"),
            ("nightly", {"jitter_s": 3_601}, "jitter"),
            ("fresh", {"task": "hello", "cron": "0 * * * *", "timezone": "UTC",
                       "jitter_random_s": 5}, "jitter-random"),
            ("fresh", {"task": "hello", "cron": "*/5 * * * *", "timezone": "Europe/Berlin",
                       "dst_overlap": "both"}, "dst-overlap")):
        problem = http.call("POST", f"{base}/{name}/revisions", auth=admin,
                            body=body).problem(422)
        assert problem["field"] == wanted, (name, body, problem)
    http.call("POST", f"{base}/tick/revisions", auth=admin,
              body={"dst_gap": "sideways"}).problem(422)
    assert {k: v for k, v in snapshot(db.query).items() if k != "audit_log"} == {
        k: v for k, v in before.items() if k != "audit_log"}


class Receiver:
    """A webhook receiver on a free loopback port: what it was sent, and what it answers."""

    def __init__(self) -> None:
        import http.server

        received: list[tuple[dict[str, str], bytes]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                received.append(({k.lower(): v for k, v in self.headers.items()},
                                 self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                del args

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def dead_delivery(db: Database, channel: str) -> str:
    """A delivery that ran out of attempts, as the dispatcher leaves one (no dispatcher runs
    beside `ql web` in these tests)."""
    delivery_id = "0123abcd-0000-4000-8000-000000000001"
    payload = "%s::jsonb" if db.placeholder == "%s" else "?"
    db.execute(
        "INSERT INTO notify_outbox (id, channel, source_key, event, project_id, task_id, "
        "trigger_id, run_id, payload, occurred_at_ms, status, attempts, max_attempts, "
        "next_attempt_at_ms, last_status, last_error, created_at_ms, updated_at_ms, "
        f"finished_at_ms) VALUES ({', '.join([db.placeholder] * 8)}, {payload}, "
        f"{', '.join([db.placeholder] * 10)})",
        (delivery_id, channel, "run.failed:r1", "run.failed", "demo", "hello", None, None,
         json.dumps({"event": "run.failed"}), 1_000, "dead", 3, 3, 2_000, 500,
         "the receiver answered 500", 1_000, 3_000, 3_000))
    return delivery_id


def flow_notify(http: Http, people: People, db: Database) -> None:
    """Channels, rules, a test send, the outbox and a retry over HTTP; secrets never shown."""
    admin, operator, viewer = (people.tokens[r] for r in ("admin", "operator", "viewer"))
    seed(http, admin)
    check = response_schemas(http.ok("GET", "/api/v1/openapi.json", viewer))
    answers: list[bytes] = []

    def ok(method: str, path: str, auth: Auth, body: object = None, status: int = 200) -> Any:
        answer = http.call(method, path, auth=auth, body=body)
        assert answer.status == status, (method, path, answer.status, answer.raw[:500])
        answers.append(answer.raw)
        endpoint = next(e for e in ENDPOINTS if e.method == method and re.fullmatch(
            re.sub(r"\{[a-z_]+\}", "[^/]+", e.path), path.split("?", 1)[0]))
        check(endpoint, status, answer.json)
        return answer.json

    receiver = Receiver()
    try:
        channels = "/api/v1/notify/channels"
        made = {"name": "ops", "kind": "webhook", "url": receiver.url,
                "headers": ["X-Team: core"], "secret": HOOK_SECRET, "max_attempts": 3}
        for auth in (viewer, operator):
            http.call("POST", channels, auth=auth, body=made).problem(403, "QL_FORBIDDEN")
        added = ok("POST", channels, admin, made, 201)
        assert (added["name"], added["kind"], added["secret"]) == ("ops", "webhook", "set")
        assert added["webhook"]["signed"] is True and added["retry"]["max_attempts"] == 3
        assert added["rules"] == []
        http.call("POST", channels, auth=admin, body=made).problem(409, "QL_CONFLICT")
        # replaced without a secret: the stored one stays
        replaced = ok("POST", channels, admin,
                      {"name": "ops", "kind": "webhook", "url": receiver.url, "replace": True})
        assert replaced["secret"] == "set" and replaced["webhook"]["headers"] == []
        ok("POST", channels, admin, {"name": "mail", "kind": "email",
                                     "smtp_host": "mail.example.com", "from": "ql@example.com",
                                     "to": ["ops@example.com"], "smtp_user": "ql",
                                     "secret": HOOK_SECRET}, 201)
        # rules
        rules = "/api/v1/notify/rules"
        http.call("POST", rules, auth=operator,
                  body={"channel": "ops", "project": "demo"}).problem(403)
        added_rules = ok("POST", rules, admin, {"channel": "ops", "project": "demo",
                                                "events": ["failed", "lost"]}, 201)
        assert [(r["channel"], r["project"], r["task"], r["events"], r["unplaceable_after_ms"])
                for r in added_rules] == [("ops", "demo", None, ["failed", "lost"], None)]
        [mail] = ok("POST", rules, admin, {"channel": "mail", "project": "demo", "task": "hello"},
                    201)
        assert "unplaceable" in mail["events"] and mail["unplaceable_after_ms"] == 300_000
        [mail] = ok("POST", rules, admin, {"channel": "mail", "project": "demo", "task": "hello",
                                           "events": ["unplaceable"],
                                           "unplaceable_after_ms": 3_600_000}, 201)
        assert mail["unplaceable_after_ms"] == 3_600_000
        [mail] = ok("POST", rules, admin, {"channel": "mail", "project": "demo", "task": "hello",
                                           "events": ["started", "running_long", "late_start"],
                                           "running_long_after_ms": 1_800_000}, 201)
        assert (mail["running_long_after_ms"], mail["late_start_after_ms"]) == (1_800_000,
                                                                                300_000)
        assert {"started", "running_long", "late_start", "unplaceable"} <= set(mail["events"])
        http.call("POST", rules, auth=admin,
                  body={"channel": "ops", "project": "ghost"}).problem(404)
        http.call("POST", rules, auth=admin,
                  body={"channel": "ghost", "project": "demo"}).problem(404)
        assert len(ok("GET", rules, viewer)) == 2
        assert [r["channel"] for r in ok("GET", f"{rules}?channel=ops", viewer)] == ["ops"]
        listed = ok("GET", channels, viewer)
        assert [c["name"] for c in listed] == ["mail", "ops"]
        assert all(c["secret"] == "set" for c in listed)
        shown = ok("GET", f"{channels}/ops", viewer)
        assert [r["events"] for r in shown["rules"]] == [["failed", "lost"]]
        # a test send reaches the receiver, signed with the secret it never shows
        http.call("POST", f"{channels}/ops/test", auth=viewer, body={}).problem(403)
        tested = ok("POST", f"{channels}/ops/test", operator, {})
        assert tested["delivered"] is True and tested["status"] == 204, tested
        assert tested["event"] == "notify.test" and tested["channel"] == "ops"
        assert len(receiver.received) == 1
        headers, sent = receiver.received[0]
        assert headers["x-qinglong-event"] == "notify.test" and "x-qinglong-signature" in headers
        assert json.loads(sent)["id"] == tested["id"] and HOOK_SECRET.encode() not in sent
        http.call("POST", f"{channels}/ghost/test", auth=operator, body={}).problem(404)
        # the outbox, and a dead delivery sent again
        delivery = dead_delivery(db, "ops")
        found = ok("GET", "/api/v1/notify/deliveries?status=dead&channel=ops", viewer)
        assert [(d["id"], d["status"], d["attempts"]) for d in found] == [(delivery, "dead", 3)]
        assert ok("GET", "/api/v1/notify/deliveries?status=pending", viewer) == []
        retry = f"/api/v1/notify/deliveries/{delivery[:8]}/retry"
        http.call("POST", retry, auth=viewer, body={}).problem(403)
        again = ok("POST", retry, operator, {})
        assert (again["id"], again["status"], again["attempts"]) == (delivery, "pending", 0)
        http.call("POST", retry, auth=operator, body={}).problem(409)
        # rules and channels removed
        removed = ok("POST", f"{rules}/remove", admin,
                     {"channel": "ops", "project": "demo", "events": ["lost"]})
        assert removed == {"removed": 1}
        assert ok("POST", f"{rules}/remove", admin, {"channel": "ops", "project": "demo"}) == {
            "removed": 1}
        http.call("POST", f"{rules}/remove", auth=admin,
                  body={"channel": "ops", "project": "demo"}).problem(404)
        http.call("DELETE", f"{channels}/mail", auth=operator).problem(403)
        gone = ok("DELETE", f"{channels}/mail", admin)
        assert gone["removed"] is True and gone["name"] == "mail"
        http.call("GET", f"{channels}/mail", auth=viewer).problem(404)
        assert ok("GET", f"{rules}?channel=mail", viewer) == []
        stored = db.query("SELECT name, secret FROM notify_channels ORDER BY name")
        assert [(r["name"], r["secret"] is None) for r in stored] == [
            ("mail", True), ("ops", False)]  # a removed channel's secret is erased
    finally:
        receiver.close()
    audit = http.call("GET", "/api/v1/audit?limit=1000", auth=admin)
    answers.append(audit.raw)
    actions = [(e["actor"], e["action"]) for e in audit.json["items"]
               if e["action"].startswith("notify.")]
    assert actions == [("admin", "notify.channel.remove"), ("admin", "notify.rule.remove"),
                       ("admin", "notify.rule.remove"), ("operator", "notify.retry"),
                       ("operator", "notify.test"), ("admin", "notify.rule.add"),
                       ("admin", "notify.rule.add"), ("admin", "notify.rule.add"),
                       ("admin", "notify.rule.add"),
                       ("admin", "notify.channel.put"),
                       ("admin", "notify.channel.put"), ("admin", "notify.channel.put")], actions
    assert all(HOOK_SECRET.encode() not in raw for raw in answers)


def flow_flows(http: Http, people: People) -> None:
    """Flows over HTTP (issue 21): publish (201, then 200 for the same content), read, start
    once per request id (201, then 200), show and list flow runs, cancel (which cascades), a
    viewer may read but neither publish nor start, and every answer matches its schema."""
    admin, viewer = people.tokens["admin"], people.tokens["viewer"]
    seed(http, admin)
    document = http.ok("GET", "/api/v1/openapi.json", admin)
    check = response_schemas(document)
    by_key = {(e.method, e.path): e for e in ENDPOINTS}
    base = "/api/v1/projects/demo/flows/greet"
    body = {"name": "Greet twice", "timeout": "1h", "nodes": {
        "first": "hello", "second": {"task": "hello", "after": {"first": "always"}}}}
    published = http.ok("POST", f"{base}/revisions", admin, body, 201)
    check(by_key[("POST", "/api/v1/projects/{project}/flows/{flow}/revisions")], 201, published)
    assert (published["revision"], published["created"], published["timeout_ms"]) == (
        1, True, 3_600_000)
    assert http.ok("POST", f"{base}/revisions", admin, body)["created"] is False
    http.call("POST", f"{base}/revisions", auth=viewer, body=body).problem(403, "QL_FORBIDDEN")
    listed = http.ok("GET", "/api/v1/projects/demo/flows", viewer)
    assert [f["flow"] for f in listed] == ["greet"]
    shown = http.ok("GET", base, viewer)
    assert [(n["id"], n["after"]) for n in shown["nodes"]] == [
        ("first", []), ("second", [{"node": "first", "on": "always"}])]
    started = http.ok("POST", f"{base}/run", admin, {"request_id": "greet-1"}, 201)
    check(by_key[("POST", "/api/v1/projects/{project}/flows/{flow}/run")], 201, started)
    assert started["started"] is True and started["status"] == "running"
    again = http.ok("POST", f"{base}/run", admin, {"request_id": "greet-1"})
    assert (again["id"], again["started"]) == (started["id"], False)
    http.call("POST", f"{base}/run", auth=viewer, body={}).problem(403, "QL_FORBIDDEN")
    runs = http.ok("GET", "/api/v1/flow-runs?project=demo&flow=greet", viewer)
    assert [r["id"] for r in runs] == [started["id"]]
    one = http.ok("GET", f"/api/v1/flow-runs/{started['id'][:13]}", viewer)
    assert {s["node"]: s["state"] for s in one["steps"]} == {"first": "released",
                                                             "second": "pending"}
    cancelled = http.ok("POST", f"/api/v1/flow-runs/{started['id']}/cancel", admin, {})
    assert (cancelled["status"], cancelled["ended_reason"]) == ("cancelled", "cancelled")
    assert {s["node"]: s["state"] for s in cancelled["steps"]}["second"] == "skipped"
    http.call("POST", f"/api/v1/flow-runs/{started['id']}/cancel", auth=admin,
              body={}).problem(409)
