"""Single sign-on and the second factor, one policy (docs/security.md#second-factor), on
SQLite and every PostgreSQL server: under ``--require-second-factor operator`` a password
session of an operator without a second factor may only enrol, while a single-sign-on
session of the same user is let through (its login never asks for qinglong's code; the
provider's multi-factor is its second factor). GET /api/v1/session and /api/v1/me say how
each session was made. The API is served in this process over the stores under test; the
test issuer of tests/support/oidc_issuer.py logs the user in."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from qinglong.keyring import SecretKey
from qinglong.service import totp
from qinglong.service.accounts import Accounts, csrf_token_for
from qinglong.service.oidc_provider import OidcProvider
from qinglong.service.second_factor import SecondFactorPolicy, SecondFactors
from qinglong.service.sso import SingleSignOn
from qinglong.service.sso_settings import SsoSettings
from qinglong.storage.stores import Stores
from qinglong.testing import FakeClock
from qinglong.web.backend import WebBackend
from qinglong.web.server import serve_api
from tests.contract.conftest import Backend
from tests.support.auth_flows import PASSWORD, CountingHasher
from tests.support.oidc_issuer import CLIENT_ID, CLIENT_SECRET, running_issuer
from tests.support.sso_browser import SsoBrowser
from tests.support.test_api_support import Auth, Http

KEY = SecretKey(b"s" * 32)
SESSION = "/api/v1/session"


@dataclass
class Site:
    http: Http
    browser: SsoBrowser
    clock: FakeClock  # the second factor's (the codes are made on it)

    def password_session(self, username: str, **more: str) -> Auth:
        answer = self.http.call("POST", SESSION, body={"username": username,
                                                       "password": PASSWORD, **more})
        assert answer.status == 200, answer.json
        assert answer.json["session_method"] == "password"
        secret = answer.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
        return Auth(cookie=secret, csrf=answer.json["csrf_token"], label=f"{username} password")

    def sso_session(self) -> Auth:
        reply = self.browser.login("/")
        assert reply.status == 303, reply.body[:500]
        secret = reply.cookies["ql_session"]
        return Auth(cookie=secret, csrf=csrf_token_for(secret), label="sso session")


@pytest.fixture
def site(web_demo: Stores, backend: Backend) -> Iterator[Site]:
    """`ql web --require-second-factor operator` with single sign-on; ann an operator."""
    clock = FakeClock(int(time.time() * 1000))  # the issuer signs ID tokens at real time
    web = WebBackend(stores=web_demo, clock=backend.clock())
    web.second_factor = SecondFactors(web_demo.accounts, clock,
                                      policy=SecondFactorPolicy("operator"), key=lambda: KEY)
    web.accounts = Accounts(web_demo.accounts, hasher=CountingHasher(),
                            second_factor=web.second_factor)
    web.accounts.user_create("ann", "operator", PASSWORD)
    with running_issuer() as issuer:
        provider = OidcProvider(SsoSettings(issuer=issuer.url, client_id=CLIENT_ID,
                                            client_secret=CLIENT_SECRET), clock)
        provider.discover()
        web.sso = SingleSignOn(provider, web_demo.oidc, web_demo.accounts, web.accounts.policy)
        api = serve_api(web, backend.clock(), "127.0.0.1:0")
        try:
            yield Site(Http(api.port), SsoBrowser(f"http://127.0.0.1:{api.port}"), clock)
        finally:
            api.stop()


def test_a_single_sign_on_session_is_let_through_and_a_password_session_is_gated(
        site: Site) -> None:
    password = site.password_session("ann")
    site.http.call("GET", "/api/v1/projects", auth=password).problem(
        403, "QL_SECOND_FACTOR_ENROLMENT_REQUIRED")
    said = site.http.ok("GET", SESSION, password)
    assert said["session_method"] == "password"
    assert said["second_factor"]["required"] is True
    sso = site.sso_session()  # the same user, through the provider
    site.http.ok("GET", "/api/v1/projects", sso)
    made = site.http.ok("POST", "/api/v1/tokens", sso, {"name": "from sso", "scope": "read"},
                        status=201)  # a write too
    assert made["username"] == "ann"
    said = site.http.ok("GET", SESSION, sso)
    assert said["session_method"] == "sso"
    assert said["second_factor"] == {"enabled": False, "pending": False, "required": False,
                                     "recovery_codes_left": 0}
    me = site.http.ok("GET", "/api/v1/me", sso)
    assert (me["via"], me["session_method"], me["second_factor_on"]) == ("session", "sso",
                                                                         False)
    # the password session stays gated while the single-sign-on one works
    site.http.call("GET", "/api/v1/projects", auth=password).problem(
        403, "QL_SECOND_FACTOR_ENROLMENT_REQUIRED")


def test_me_says_how_the_session_was_made_and_whether_the_second_factor_is_on(
        site: Site) -> None:
    password = site.password_session("ann")
    secret = site.http.ok("POST", "/api/v1/account/second-factor", password,
                          status=201)["secret"]
    site.http.ok("POST", "/api/v1/account/second-factor/confirm", password,
                 {"otp": totp.code_at(secret, site.clock.now_ms())})
    me = site.http.ok("GET", "/api/v1/me", password)  # enrolled: no longer gated
    assert (me["session_method"], me["second_factor_on"]) == ("password", True)
    sso = site.sso_session()
    me = site.http.ok("GET", "/api/v1/me", sso)
    assert (me["session_method"], me["second_factor_on"]) == ("sso", True)
    token = site.http.ok("POST", "/api/v1/tokens", password,
                         {"name": "t", "scope": "read"}, status=201)["token"]
    me = site.http.ok("GET", "/api/v1/me", Auth(token=token))
    assert (me["via"], me["session_method"], me["second_factor_on"]) == ("token", None, None)
    assert site.http.ok("GET", SESSION, Auth(token=token))["session_method"] is None
