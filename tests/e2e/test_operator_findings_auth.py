"""Issue 18, authentication, on SQLite: what an attacker found, each fixed.

- a login flood (100 wrong passwords at once) checks exactly the limit's 5 passwords, at most 2
  at a time, and the real user still gets in from the browser that logged in before;
- X-Forwarded-For is believed only from --trusted-proxy (the login limit and the audit log
  see the peer address otherwise), and `--trusted-proxy` is checked;
- a new password or disabling revokes the user's tokens (enabling revives none);
- revoking a token you may not see answers as a token that does not exist;
- `password12` and its kind are refused;
- `--password-file` reads a bounded regular file only (/dev/zero, a pipe, a big file: refused);
- `--allow-remote` over plain HTTP: the login says why a browser could not keep its cookie.

The same storage flows run on PostgreSQL in tests/integration/test_operator_findings_auth_pg.py.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from qinglong.clock import SystemClock
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import migrate
from tests.support.auth_flows import (
    PASSWORD,
    WRONG,
    flow_credentials_die_with_the_password,
    flow_login_flood,
    flow_revoking_a_token_you_may_not_see,
    flow_weak_passwords_are_refused,
    login_raw,
)
from tests.support.test_api_support import (
    Server,
    child_env,
    make_people,
    start_server,
    start_web,
)


def migrated(tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "ql.db"
    db = SqliteDatabase(path, create=True)
    try:
        migrate(db, SystemClock())
    finally:
        db.close()
    return f"sqlite:///{path}", path


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[str, Server]]:
    url, _ = migrated(tmp_path)
    server = start_web(url, tmp_path)
    try:
        yield url, server
    finally:
        assert server.stop() == 0, server.log.read_text()


def ql(url: str, *args: str, env: dict[str, str] | None = None,
       timeout: float = 60) -> subprocess.CompletedProcess[str]:
    def limit_memory() -> None:  # a reader gone wild fails here instead of taking the host
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run([sys.executable, "-m", "qinglong", *args, "--database-url", url],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=child_env(env), preexec_fn=limit_memory)


def test_a_login_flood_checks_exactly_the_limit_and_the_real_user_gets_in(
        tmp_path: Path) -> None:
    url, _ = migrated(tmp_path)
    flow_login_flood(url)


def test_forwarded_headers_are_believed_only_from_a_trusted_proxy(tmp_path: Path) -> None:
    url, _ = migrated(tmp_path)
    people = make_people(url)
    admin = people.tokens["admin"]
    # `ql serve --http`, as the issue ran it: loopback is trusted no more
    server = start_server(["serve", "--database-url", url, "--http", "127.0.0.1:0"],
                          tmp_path / "serve.log")
    try:
        http = server.http
        for i in range(30):  # 30 names, 30 made-up addresses: one address, 30 failures
            spoofed = {"X-Forwarded-For": f"203.0.113.{i + 1}"}
            assert login_raw(http.port, f"guess{i}", WRONG, headers=spoofed).status == 401
        limited = login_raw(http.port, "guess-more", WRONG,
                            headers={"X-Forwarded-For": "203.0.113.99"})
        assert (limited.status, limited.body["code"]) == (429, "QL_RATE_LIMITED")
        http.ok("POST", "/api/v1/projects", admin, {"id": "spoof"}, 201)
        answer = http.call("POST", "/api/v1/projects", auth=admin, body={"id": "spoof2"},
                           headers={"X-Forwarded-For": "198.51.100.7"})
        assert answer.status == 201, answer.raw
        clients = {e["target"]: e["client"] for e in http.ok(
            "GET", "/api/v1/audit?limit=100", admin)["items"] if e["action"] == "project.create"}
        assert clients == {"project spoof": "127.0.0.1", "project spoof2": "127.0.0.1"}, clients
    finally:
        assert server.stop() == 0, server.log.read_text()
    # `ql web --trusted-proxy 127.0.0.1`: now the proxy's word is taken
    trusted = start_web(url, tmp_path, "--trusted-proxy", "127.0.0.1", name="trusting")
    try:
        http = trusted.http
        answer = http.call("POST", "/api/v1/projects", auth=admin, body={"id": "proxied"},
                           headers={"X-Forwarded-For": "198.51.100.7, 10.9.9.9"})
        assert answer.status == 201, answer.raw
        entry = next(e for e in http.ok("GET", "/api/v1/audit?limit=100", admin)["items"]
                     if e["target"] == "project proxied")
        assert entry["client"] == "10.9.9.9"  # the nearest hop that is not a trusted proxy
        answer = http.call("POST", "/api/v1/projects", auth=admin, body={"id": "garbled"},
                           headers={"X-Forwarded-For": "<script>"})
        assert answer.status == 201, answer.raw
        entry = next(e for e in http.ok("GET", "/api/v1/audit?limit=100", admin)["items"]
                     if e["target"] == "project garbled")
        assert entry["client"] == "127.0.0.1"  # not an address: not believed
    finally:
        assert trusted.stop() == 0, trusted.log.read_text()
    for bad in ("proxy.example.com", "10.0.0.0/33", "*"):
        done = ql(url, "web", "--http", "127.0.0.1:0", "--trusted-proxy", bad)
        assert done.returncode == 2, done
        assert done.stderr.startswith("ql: --trusted-proxy: ") and "not an IP address" in \
            done.stderr, done.stderr
    serve_alone = ql(url, "serve", "--trusted-proxy", "127.0.0.1", "--duration", "1s")
    assert (serve_alone.returncode, serve_alone.stderr) == (
        2, "ql: --trusted-proxy: goes with --http\n"), serve_alone


def test_a_new_password_or_disabling_revokes_tokens_and_enabling_revives_none(
        web: tuple[str, Server]) -> None:
    url, server = web
    flow_credentials_die_with_the_password(server.http, make_people(url))


def test_revoking_a_token_you_may_not_see_answers_as_a_missing_one(
        web: tuple[str, Server]) -> None:
    url, server = web
    flow_revoking_a_token_you_may_not_see(server.http, make_people(url))


def test_password12_and_its_kind_are_refused(web: tuple[str, Server]) -> None:
    url, server = web
    flow_weak_passwords_are_refused(server.http, make_people(url))
    refused = ql(url, "user", "create", "--username", "fred", "--role", "viewer",
                 env={"QL_USER_PASSWORD": "password12"})
    assert refused.returncode == 2, refused
    assert refused.stderr.startswith("ql: $QL_USER_PASSWORD: is a common password"), \
        refused.stderr
    assert "password12" not in refused.stderr


def test_the_password_file_is_a_bounded_regular_file(tmp_path: Path) -> None:
    url, _ = migrated(tmp_path)
    create = ("user", "create", "--username", "gina", "--role", "viewer", "--password-file")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)  # nobody writes: opening it for reading would wait for ever
    for path in ("/dev/zero", str(pipe)):
        done = ql(url, *create, path, timeout=30)
        assert (done.returncode, done.stderr) == (
            2, ("ql: password-file: is not a regular file (a device, pipe or directory): put "
               "the password in a file, or use $QL_USER_PASSWORD\n")), done
    big = tmp_path / "big"
    big.write_text(PASSWORD + "\n" + "x" * 5000)
    done = ql(url, *create, str(big))
    assert (done.returncode, done.stderr) == (
        2, ("ql: password-file: is larger than 4096 bytes: it holds the password on its first "
           "line\n")), done
    good = tmp_path / "good"
    good.write_text(PASSWORD + "\nanything after the first line is ignored\n")
    done = ql(url, *create, str(good), "--json")
    assert done.returncode == 0, done.stderr


def test_a_plain_http_login_to_a_remote_address_says_why_it_cannot_keep_the_cookie(
        tmp_path: Path) -> None:
    url, _ = migrated(tmp_path)
    make_people(url)
    server = start_server(["web", "--database-url", url, "--http", "0.0.0.0:0",
                           "--allow-remote"], tmp_path / "remote.log")
    try:
        port = server.port
        remote = login_raw(port, "viewer", PASSWORD, headers={"Host": "192.0.2.10:8080"})
        assert (remote.status, remote.body.get("code")) == (403, "QL_INSECURE_TRANSPORT"), remote
        assert "Secure" in str(remote.body["detail"]) and "--trusted-proxy" in \
            str(remote.body["detail"])
        assert remote.cookies == {}
        # claimed HTTPS, but from a proxy nobody trusts: still plain HTTP
        spoofed = login_raw(port, "viewer", PASSWORD, headers={
            "Host": "ql.example.com", "X-Forwarded-Proto": "https"})
        assert spoofed.status == 403, spoofed
        local = login_raw(port, "viewer", PASSWORD, headers={"Host": f"localhost:{port}"})
        assert local.status == 200 and "ql_session" in local.cookies
    finally:
        assert server.stop() == 0, server.log.read_text()
    # `ql serve --http` takes --trusted-proxy too
    behind = start_server(["serve", "--database-url", url, "--http", "0.0.0.0:0",
                           "--allow-remote", "--trusted-proxy", "127.0.0.1"],
                          tmp_path / "behind.log")
    try:
        tls = login_raw(behind.port, "viewer", PASSWORD, headers={
            "Host": "ql.example.com", "X-Forwarded-Proto": "https",
            "X-Forwarded-For": "192.0.2.44"})
        assert tls.status == 200 and "ql_session" in tls.cookies, tls
        plain = login_raw(behind.port, "viewer", PASSWORD, headers={
            "Host": "ql.example.com", "X-Forwarded-Proto": "http"})
        assert plain.status == 403, plain
    finally:
        assert behind.stop() == 0, behind.log.read_text()
