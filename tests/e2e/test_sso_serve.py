"""Single sign-on end to end (docs/security.md#single-sign-on): a real `ql serve --http` on
SQLite configured with the test issuer of tests/support/oidc_issuer.py, logged in by
following the redirects with an HTTP client, ending with a session cookie that reads and
writes (with its CSRF token) like a password login's; and `ql web` refusing to start, saying
why, on a configuration it cannot use. tests/integration/test_sso_postgres.py does the same
login through `ql web` on PostgreSQL."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from qinglong.service.accounts import csrf_token_for
from tests.e2e.test_api_sqlite import migrated
from tests.support.oidc_issuer import CLIENT_ID, CLIENT_SECRET, Issuer, running_issuer
from tests.support.ql_process import run_ql
from tests.support.sso_browser import SsoBrowser, get
from tests.support.test_api_support import Auth, Server, child_env, make_people, start_server


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with running_issuer() as found:
        yield found


def sso_args(issuer: Issuer, tmp_path: Path) -> list[str]:
    secret = tmp_path / "client-secret"
    secret.write_text(CLIENT_SECRET + "\n")
    return ["--oidc-issuer", issuer.url, "--oidc-client-id", CLIENT_ID,
            "--oidc-client-secret-file", str(secret)]


def logs_in(server: Server, issuer: Issuer, username: str) -> None:
    """Follow the whole login as a browser would; the session reads and writes."""
    issuer.user = {"sub": f"sub-{username}", "preferred_username": username}
    browser = SsoBrowser(f"http://127.0.0.1:{server.port}")
    reply = browser.login("/runs")
    assert reply.status == 303 and reply.location == "/runs", reply.body
    secret = reply.cookies["ql_session"]
    session = Auth(cookie=secret, csrf=csrf_token_for(secret))
    http = server.http
    me = http.ok("GET", "/api/v1/session", session)
    assert (me["username"], me["via"]) == (username, "session")
    page = get(f"{browser.base}/runs", cookies={"ql_session": secret}, accept="text/html")
    assert page.status == 200 and b'data-page="runs"' in page.body
    made = http.ok("POST", "/api/v1/tokens", session, {"name": "after sso", "scope": "read"},
                   status=201)
    assert made["username"] == username
    assert http.call("DELETE", "/api/v1/session", auth=session).status == 204
    http.call("GET", "/api/v1/session", auth=session).problem(401)
    assert ("POST", "/token") in issuer.requests


def test_ql_serve_logs_in_with_single_sign_on(tmp_path: Path, issuer: Issuer) -> None:
    url, _ = migrated(tmp_path)
    make_people(url)
    server = start_server(["serve", "--database-url", url, "--http", "127.0.0.1:0",
                           *sso_args(issuer, tmp_path)], tmp_path / "serve.log")
    try:
        login_page = get(f"http://127.0.0.1:{server.port}/login?next=/runs",
                         accept="text/html")
        assert b"Log in with single sign-on" in login_page.body
        assert b'href="/api/v1/sso/login?next=/runs"' in login_page.body
        logs_in(server, issuer, "operator")
    finally:
        assert server.stop() == 0, server.log.read_text()
    assert CLIENT_SECRET not in server.log.read_text()


def _web(url: str, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return run_ql(["web", "--database-url", url,
                   "--http", "127.0.0.1:0", *args], timeout=60, env=child_env(env))


def test_a_configuration_that_cannot_work_stops_the_start_saying_why(
        tmp_path: Path, issuer: Issuer) -> None:
    url, _ = migrated(tmp_path)
    args = sso_args(issuer, tmp_path)
    secret_file = args[-1]
    cases = [
        (["--oidc-issuer", "http://idp.example.test", "--oidc-client-id", CLIENT_ID,
          "--oidc-client-secret-file", secret_file], "must use https"),
        (["--oidc-issuer", issuer.url], "--oidc-client-id: is required"),
        (["--oidc-issuer", issuer.url, "--oidc-client-id", CLIENT_ID],
         "the client secret is empty"),
        (["--oidc-issuer", issuer.url, "--oidc-client-id", CLIENT_ID,
          "--oidc-client-secret-file", str(tmp_path / "missing")], "cannot read it"),
        (["--oidc-client-id", CLIENT_ID], "--oidc-client-id: needs --oidc-issuer"),
        ([*args, "--oidc-redirect-uri", "https://ql.example.test/elsewhere"],
         "must end in /api/v1/sso/callback"),
        (["--oidc-issuer", "http://127.0.0.1:9", "--oidc-client-id", CLIENT_ID,
          "--oidc-client-secret-file", secret_file], "discovery failed: cannot reach"),
    ]
    for given, said in cases:
        done = _web(url, *given)
        assert done.returncode == 2, (given, done.stdout, done.stderr)
        assert said in done.stderr, (given, done.stderr)
        assert "Traceback" not in done.stderr
    issuer.document = {"issuer": "https://someone.else.test"}
    done = _web(url, *args)
    assert done.returncode == 2 and "names the issuer 'https://someone.else.test'" in done.stderr
    issuer.document = {"code_challenge_methods_supported": ["plain"]}
    done = _web(url, *args)
    assert done.returncode == 2 and "PKCE S256" in done.stderr, done.stderr
    done = _web(url, "--oidc-issuer", issuer.url, "--oidc-client-id", CLIENT_ID,
                env={"QL_OIDC_CLIENT_SECRET": ""})
    assert done.returncode == 2 and "the client secret is empty" in done.stderr
