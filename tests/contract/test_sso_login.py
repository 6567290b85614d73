"""Single sign-on with OpenID Connect (docs/security.md#single-sign-on), on SQLite and every
PostgreSQL server (as ql_web): the HTTP API served in this process over the stores under
test, logging in through the test issuer of tests/support/oidc_issuer.py (a real HTTP
server). The happy path ends with a session cookie that works; every refusal answers 401
QL_SSO_REFUSED saying why (or, for a browser, a page saying it) and creates no session.
The ID token's times are judged on the injected clock."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from qinglong.service.accounts import csrf_token_for
from qinglong.service.oidc_provider import OidcProvider
from qinglong.service.sso import STARTS_PER_ADDRESS, SingleSignOn
from qinglong.service.sso_settings import SsoSettings
from qinglong.storage.accounts.params import UserCreateParams, UserUpdateParams
from qinglong.storage.stores import Stores
from qinglong.testing import FakeClock
from qinglong.web.backend import WebBackend
from qinglong.web.server import RunningApi, serve_api
from tests.contract.conftest import Backend
from tests.support.oidc_issuer import CLIENT_ID, CLIENT_SECRET, Issuer, running_issuer
from tests.support.sso_browser import Reply, SsoBrowser, get
from tests.support.test_api_support import Auth, Http

HOUR_MS = 3_600_000


@dataclass
class Site:
    stores: Stores
    issuer: Issuer
    clock: FakeClock  # the provider's: what the ID token's times are judged by
    browser: SsoBrowser
    backend: WebBackend

    def user(self, name: str, role: str = "operator") -> None:
        self.stores.accounts.user_create(UserCreateParams(username=name, role=role,
                                                          password_hash="$argon2id$x"))

    def audited(self) -> list[tuple[str, str, dict[str, object]]]:
        """(actor, action, detail) of the audit entries, oldest first."""
        return [(e.actor, e.action, e.detail)
                for e in reversed(self.backend.accounts.audit_list(None, 100))]

    def whoami(self, reply: Reply) -> dict[str, Any]:
        answer = get(self.browser.base + "/api/v1/session",
                     cookies={"ql_session": reply.cookies["ql_session"]})
        assert answer.status == 200, answer.body
        found: dict[str, Any] = json.loads(answer.body)
        return found


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with running_issuer() as found:
        yield found


@pytest.fixture
def make_site(web_demo: Stores, backend: Backend, issuer: Issuer
              ) -> Iterator[Callable[..., Site]]:
    running: list[RunningApi] = []

    def make(**settings: Any) -> Site:
        clock = FakeClock(now_ms=int(time.time() * 1000))  # the issuer signs at real time
        provider = OidcProvider(SsoSettings(issuer=issuer.url, client_id=CLIENT_ID,
                                            client_secret=CLIENT_SECRET, **settings), clock)
        provider.discover()
        web = WebBackend(stores=web_demo, clock=backend.clock())
        web.sso = SingleSignOn(provider, web_demo.oidc, web_demo.accounts, web.accounts.policy)
        api = serve_api(web, backend.clock(), "127.0.0.1:0")
        running.append(api)
        return Site(web_demo, issuer, clock, SsoBrowser(f"http://127.0.0.1:{api.port}"), web)

    yield make
    for api in running:
        api.stop()


@pytest.fixture
def site(make_site: Callable[..., Site]) -> Site:
    made = make_site()
    made.user("ann")
    return made


def refused(reply: Reply, *words: str) -> dict[str, Any]:
    assert reply.status == 401, (reply.status, reply.body[:500])
    assert reply.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = json.loads(reply.body)
    assert body["code"] == "QL_SSO_REFUSED", body
    for word in words:
        assert word in body["detail"], body
    assert "ql_session" not in reply.cookies
    return body


# --- the happy path ------------------------------------------------------------------------


def test_a_login_ends_with_a_working_session_and_links_the_identity(site: Site) -> None:
    started = site.browser.start("/runs?status=failed")
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(started.authorize_url).query))
    assert started.authorize_url.startswith(site.issuer.url + "/authorize?")
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert query["client_id"] == CLIENT_ID and "openid" in query["scope"].split()
    assert query["redirect_uri"] == site.browser.base + "/api/v1/sso/callback"
    assert len(query["nonce"]) >= 32 and query["nonce"] != query["state"]
    reply = site.browser.callback(site.browser.approve(started), started.state_cookie)
    assert reply.status == 303 and reply.location == "/runs?status=failed"
    line = next(c for c in reply.raw_cookies if c.startswith("ql_session="))
    for part in ("HttpOnly", "Secure", "SameSite=strict", "Path=/"):
        assert part.lower() in line.lower(), line
    assert reply.cookies["ql_sso_state"] == ""  # the state cookie is cleared
    me = site.whoami(reply)
    assert (me["username"], me["role"], me["via"]) == ("ann", "operator", "session")
    linked = site.stores.oidc.identity_link(site.issuer.url, "sub-ann", "ann")
    assert (linked.created, linked.conflict) == (False, None)  # linked at the login
    assert site.audited() == [("ann", "sso.link", {"issuer": site.issuer.url,
                                                   "subject": "sub-ann"})]
    # a session write needs the CSRF token derived from the cookie, as after a password login
    secret = reply.cookies["ql_session"]
    http = Http(int(site.browser.base.rsplit(":", 1)[1]))
    body = {"name": "from sso", "scope": "read"}
    http.call("POST", "/api/v1/tokens", auth=Auth(cookie=secret), body=body).problem(403)
    made = http.ok("POST", "/api/v1/tokens", Auth(cookie=secret, csrf=csrf_token_for(secret)),
                   body, status=201)
    assert made["username"] == "ann"


def test_a_browser_gets_a_page_that_moves_on_and_a_page_saying_what_went_wrong(
        site: Site) -> None:
    started = site.browser.start("/tasks")
    reply = site.browser.callback(site.browser.approve(started), started.state_cookie,
                                  accept="text/html")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/html")
    assert b'http-equiv="refresh" content="0;url=/tasks"' in reply.body
    assert "ql_session" in reply.cookies
    again = site.browser.callback(site.browser.approve(site.browser.start()), None,
                                  accept="text/html")
    assert again.status == 401 and again.headers["content-type"].startswith("text/html")
    assert b"QL_SSO_REFUSED" in again.body and b"not started in this browser" in again.body
    assert b'href="/login"' in again.body and b"Traceback" not in again.body


def test_next_is_kept_to_this_site(site: Site) -> None:
    for unsafe in ("https://evil.test/", "//evil.test/x", "/\\evil.test", "javascript:x"):
        reply = site.browser.login(unsafe)
        assert reply.status == 303 and reply.location == "/", (unsafe, reply.location)


# --- the state: unknown, replayed, from another browser, expired ----------------------------


def test_a_bad_state_is_refused(site: Site) -> None:
    started = site.browser.start()
    url = site.browser.approve(started)
    forged = url.replace(started.state, "A" * 43)
    refused(site.browser.callback(forged, "A" * 43), "unknown or was already used")
    no_state = url.replace("state=" + started.state, "state=")
    refused(site.browser.callback(no_state, started.state_cookie), "no state")


def test_a_state_works_once(site: Site) -> None:
    started = site.browser.start()
    url = site.browser.approve(started)
    assert site.browser.callback(url, started.state_cookie).status == 303
    refused(site.browser.callback(url, started.state_cookie), "unknown or was already used")


def test_a_callback_in_another_browser_is_refused_and_uses_the_state_up(site: Site) -> None:
    started = site.browser.start()
    url = site.browser.approve(started)
    refused(site.browser.callback(url, None), "not started in this browser")
    refused(site.browser.callback(url, started.state_cookie), "already used")


def test_a_slow_login_expires(make_site: Callable[..., Site], backend: Backend) -> None:
    site = make_site(pending_lifetime_ms=1_000)  # 10 minutes unless a test says otherwise
    site.user("ann")
    started = site.browser.start()
    url = site.browser.approve(started)
    backend.pass_time(1_100)  # on the store's clock
    refused(site.browser.callback(url, started.state_cookie), "took too long")


def test_one_address_starts_only_so_many_logins_in_a_lifetime(site: Site,
                                                              backend: Backend) -> None:
    """Anyone may start a login, and each start keeps a row for its lifetime: one address
    cannot fill the table."""
    for _ in range(STARTS_PER_ADDRESS):
        site.browser.start()
    reply = get(site.browser.base + "/api/v1/sso/login?next=/runs")
    assert reply.status == 429, (reply.status, reply.body[:500])
    assert json.loads(reply.body)["code"] == "QL_RATE_LIMITED"
    assert 1 <= int(reply.headers["retry-after"]) <= 600
    assert "ql_sso_state" not in reply.cookies
    # a pending lifetime later (the starts counted so long ago), the address starts again
    backend.sql("UPDATE login_failures SET at_ms = at_ms - 600000")
    site.browser.start()


def test_the_provider_saying_no_is_shown(site: Site) -> None:
    started = site.browser.start()
    url = (site.browser.base + "/api/v1/sso/callback?" + urllib.parse.urlencode(
        {"state": started.state, "error": "access_denied",
         "error_description": "the user said no"}))
    refused(site.browser.callback(url, started.state_cookie), "access_denied", "said no")


# --- the ID token ---------------------------------------------------------------------------


def test_a_wrong_nonce_is_refused(site: Site) -> None:
    site.issuer.tamper.claims = {"nonce": "not-this-login"}
    refused(site.browser.login(), "nonce")


def test_a_bad_signature_is_refused(site: Site) -> None:
    site.issuer.tamper.foreign_key = True  # the issuer's kid, another key
    refused(site.browser.login(), "signature")


def test_a_wrong_audience_or_issuer_is_refused(site: Site) -> None:
    site.issuer.tamper.claims = {"aud": "another-client"}
    refused(site.browser.login(), "aud")
    site.issuer.tamper.claims = {"aud": ["another-client", CLIENT_ID]}  # and no azp
    refused(site.browser.login(), "azp")
    site.issuer.tamper.claims = {"iss": "https://evil.test"}
    refused(site.browser.login(), "another issuer")


def test_an_expired_token_is_refused_on_the_injected_clock(site: Site) -> None:
    site.issuer.tamper.claims = {"exp": 1_000_000_000}
    refused(site.browser.login(), "expired")
    site.issuer.tamper.claims = {}
    site.clock.advance(2 * HOUR_MS)  # the token says 5 minutes
    refused(site.browser.login(), "expired")
    site.clock.advance(-4 * HOUR_MS)  # now the token is issued in the future
    refused(site.browser.login(), "future")


def test_a_rotated_key_is_fetched_again_but_not_on_every_unknown_kid(site: Site) -> None:
    assert site.browser.login().status == 303  # the keys are cached now
    site.issuer.rotate()
    fetched = site.issuer.requests.count(("GET", "/jwks"))
    site.clock.advance(31_000)
    assert site.browser.login().status == 303  # an unknown kid: fetched again
    assert site.issuer.requests.count(("GET", "/jwks")) == fetched + 1
    site.issuer.tamper.kid = "nobody-has-this-kid"
    refused(site.browser.login(), "key the issuer does not publish")
    refused(site.browser.login(), "key the issuer does not publish")
    assert site.issuer.requests.count(("GET", "/jwks")) == fetched + 1  # within 30 s: not again


def test_a_code_of_another_login_fails_pkce(site: Site) -> None:
    victim = site.browser.start()
    attacker = site.browser.start()
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(
        site.browser.approve(attacker)).query))["code"]
    injected = (site.browser.base + "/api/v1/sso/callback?"
                + urllib.parse.urlencode({"code": code, "state": victim.state}))
    refused(site.browser.callback(injected, victim.state_cookie), "refused the code")
    assert site.issuer.token_refusals == ["PKCE verifier does not match"]


def test_a_failing_provider_answers_502_and_no_session(site: Site) -> None:
    for path in ("/jwks", "/token"):
        site.issuer.broken = {path}
        reply = site.browser.login()
        assert reply.status == 502, (path, reply.body)
        body = json.loads(reply.body)
        assert body["code"] == "QL_SSO_PROVIDER_FAILED" and "answered 500" in body["detail"]
        assert "ql_session" not in reply.cookies
    site.issuer.broken = set()
    assert site.browser.login().status == 303


# --- the user -------------------------------------------------------------------------------


def test_an_unknown_user_is_refused_by_default(site: Site) -> None:
    site.issuer.user = {"sub": "sub-bob", "preferred_username": "bob"}
    refused(site.browser.login(), "there is no user bob")
    assert site.stores.accounts.user_get("bob") is None


def test_an_unknown_user_is_created_with_the_configured_role(
        make_site: Callable[..., Site]) -> None:
    site = make_site(create_role="viewer", user_claim="email")
    site.issuer.user = {"sub": "sub-cy", "email": "Cy@Example.test", "email_verified": True}
    reply = site.browser.login()
    assert reply.status == 303, reply.body
    me = site.whoami(reply)
    assert (me["username"], me["role"]) == ("cy@example.test", "viewer")
    created = site.stores.accounts.user_get("cy@example.test")
    assert created is not None and created.password_hash == "!sso"  # no password logs in
    assert [(actor, action) for actor, action, _ in site.audited()] == [
        ("cy@example.test", "user.create"), ("cy@example.test", "sso.link")]
    assert site.audited()[0][2] == {"role": "viewer", "by": "single sign-on",
                                    "issuer": site.issuer.url}
    site.issuer.user = {"sub": "sub-dee", "email": "dee@example.test", "email_verified": False}
    refused(site.browser.login(), "not verified")


def test_a_user_created_with_the_role_none_has_only_grants(
        make_site: Callable[..., Site]) -> None:
    site = make_site(create_role="none")
    site.issuer.user = {"sub": "sub-eve", "preferred_username": "eve"}
    reply = site.browser.login()
    assert reply.status == 303, reply.body
    assert site.whoami(reply)["role"] == "none"


def test_another_subject_for_a_linked_user_is_refused(site: Site) -> None:
    site.user("bob")
    assert site.browser.login().status == 303  # ann is linked to sub-ann
    site.issuer.user = {"sub": "sub-mallory", "preferred_username": "ann"}
    refused(site.browser.login(), "ann is linked to another identity")
    site.issuer.user = {"sub": "sub-ann", "preferred_username": "bob"}  # a renamed claim
    refused(site.browser.login(), "linked to another user")
    site.issuer.user = {"sub": "sub-ann", "preferred_username": "ann"}
    assert site.browser.login().status == 303
    assert [(actor, action, detail.get("subject")) for actor, action, detail in
            site.audited()] == [("ann", "sso.link", "sub-ann"),
                                ("ann", "sso.refuse", "sub-mallory"),
                                ("bob", "sso.refuse", "sub-ann")]


def test_a_disabled_user_is_refused(site: Site) -> None:
    site.stores.accounts.user_update(UserUpdateParams(username="ann", disabled=True))
    refused(site.browser.login(), "disabled")


def test_without_configuration_the_routes_answer_404(web_demo: Stores,
                                                     backend: Backend) -> None:
    web = WebBackend(stores=web_demo, clock=backend.clock())
    api = serve_api(web, backend.clock(), "127.0.0.1:0")
    try:
        for path in ("/api/v1/sso/login?next=/", "/api/v1/sso/callback?state=x&code=y"):
            reply = get(f"http://127.0.0.1:{api.port}{path}")
            assert reply.status == 404 and b"QL_NOT_FOUND" in reply.body, reply.body
    finally:
        api.stop()

