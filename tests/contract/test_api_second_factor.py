"""The second factor over HTTP, on SQLite and on every PostgreSQL server (the API as `ql web`
serves it, as ql_web): a login without the code, with a wrong, replayed or right code and with
a recovery code; wrong codes count toward the login limit; enrolment and turning it off;
enforcement from a role (a password session may only enrol until it has one; a token is not
gated); an admin's reset, and the user list's state of each. The codes are made at the fake
clock the second factor is given."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from qinglong.keyring import SecretKey
from qinglong.service import totp
from qinglong.service.accounts import Accounts
from qinglong.service.second_factor import SecondFactorPolicy, SecondFactors
from qinglong.storage.stores import Stores
from qinglong.testing import FakeClock
from qinglong.web.backend import WebBackend
from qinglong.web.server import serve_api
from tests.support.auth_flows import PASSWORD, CountingHasher
from tests.support.test_api_support import Auth, Http

KEY = SecretKey(b"s" * 32)
SESSION = "/api/v1/session"
MINE = "/api/v1/account/second-factor"


@dataclass
class Site:
    http: Http
    clock: FakeClock
    accounts: Accounts
    admin: Auth  # an admin's token (not gated by enforcement)

    def login(self, username: str, **more: str) -> tuple[int, dict[str, object], Auth | None]:
        answer = self.http.call("POST", SESSION, body={"username": username,
                                                       "password": PASSWORD, **more})
        if answer.status != 200:
            return answer.status, answer.json, None
        secret = answer.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
        return 200, answer.json, Auth(cookie=secret, csrf=answer.json["csrf_token"],
                                      label=f"{username} session")

    def session(self, username: str, **more: str) -> Auth:
        status, body, auth = self.login(username, **more)
        assert status == 200 and auth is not None, body
        return auth

    def enrol(self, auth: Auth) -> tuple[str, list[str]]:
        secret = self.http.ok("POST", MINE, auth, status=201)["secret"]
        codes = self.http.ok("POST", MINE + "/confirm", auth,
                             {"otp": totp.code_at(secret, self.clock.now_ms())})
        self.clock.advance(30_000)  # the code of the next step is unused
        return secret, codes["recovery_codes"]

    def code(self, secret: str) -> str:
        return totp.code_at(secret, self.clock.now_ms())


def _serve(stores: Stores, required_from: str | None) -> Iterator[Site]:
    clock = FakeClock(1_800_000_000_000)
    backend = WebBackend(stores=stores, clock=clock)
    backend.second_factor = SecondFactors(stores.accounts, clock,
                                          policy=SecondFactorPolicy(required_from),
                                          key=lambda: KEY)
    backend.accounts = Accounts(stores.accounts, hasher=CountingHasher(),
                                second_factor=backend.second_factor)
    for name, role in (("ann", "operator"), ("vic", "viewer"), ("root", "admin")):
        backend.accounts.user_create(name, role, PASSWORD)
    token = backend.accounts.token_create("root", name="t", scope="admin",
                                          lifetime_ms=None).token
    running = serve_api(backend, clock, "127.0.0.1:0")
    try:
        yield Site(Http(running.port), clock, backend.accounts, Auth(token=token, label="root"))
    finally:
        running.stop()


@pytest.fixture
def site(web_demo: Stores) -> Iterator[Site]:
    yield from _serve(web_demo, None)


@pytest.fixture
def enforced(web_demo: Stores) -> Iterator[Site]:
    yield from _serve(web_demo, "operator")


def test_a_login_with_a_second_factor_needs_a_fresh_code_or_a_recovery_code(site: Site) -> None:
    ann = site.session("ann")
    assert site.http.ok("GET", SESSION, ann)["second_factor"] == {
        "enabled": False, "pending": False, "required": False, "recovery_codes_left": 0}
    secret, codes = site.enrol(ann)
    assert len(codes) == 10
    status, body, _ = site.login("ann")
    assert (status, body["code"]) == (401, "QL_SECOND_FACTOR_REQUIRED")
    wrong = "000000" if site.code(secret) != "000000" else "111111"
    status, body, _ = site.login("ann", otp=wrong)
    assert (status, body["code"]) == (401, "QL_SECOND_FACTOR_REQUIRED")
    code = site.code(secret)
    fresh = site.session("ann", otp=code)  # (and its failures above are cleared)
    assert site.http.ok("GET", SESSION, fresh)["second_factor"]["enabled"] is True
    status, body, _ = site.login("ann", otp=code)  # replayed within its window
    assert (status, body["code"]) == (401, "QL_SECOND_FACTOR_REQUIRED")
    site.session("ann", recovery_code=codes[0])
    status, body, _ = site.login("ann", recovery_code=codes[0])  # used once already
    assert (status, body["code"]) == (401, "QL_SECOND_FACTOR_REQUIRED")
    status, body, _ = site.login("ann", otp="12345")
    assert (status, body["field"]) == (422, "otp")
    status, body, _ = site.login("ann", otp=code, recovery_code=codes[1])
    assert (status, body["field"]) == (422, "recovery_code")
    assert site.http.ok("GET", SESSION, fresh)["second_factor"]["recovery_codes_left"] == 9
    site.session("vic", otp="123456")  # no second factor: the code is not asked for


def test_wrong_codes_count_as_failed_logins(site: Site) -> None:
    secret, _ = site.enrol(site.session("ann"))
    wrong = "000000" if site.code(secret) != "000000" else "111111"
    for _ in range(3):
        assert site.login("ann", otp=wrong)[0] == 401
    for _ in range(2):
        assert site.login("ann")[0] == 401  # no code: counted too
    status, body, _ = site.login("ann", otp=site.code(secret))  # the limit (5) is reached
    assert (status, body["code"]) == (429, "QL_RATE_LIMITED")


def test_enrolment_turning_off_and_an_admins_reset(site: Site) -> None:
    ann = site.session("ann")
    first = site.http.ok("POST", MINE, ann, status=201)
    assert first["otpauth_uri"].startswith("otpauth://totp/qinglong:ann?secret=" + first["secret"])
    assert site.http.ok("GET", SESSION, ann)["second_factor"]["pending"] is True
    assert site.login("ann")[0] == 200  # pending: not on yet
    site.http.call("POST", MINE + "/confirm", auth=ann, body={
        "otp": "000000" if site.code(first["secret"]) != "000000" else "111111"}
    ).problem(422, "QL_INVALID_INPUT")
    secret, codes = site.enrol(ann)
    site.http.call("POST", MINE, auth=ann).problem(409, "QL_CONFLICT")
    ann_token = site.accounts.token_create("ann", name="t", scope="operate", lifetime_ms=None)
    site.http.call("DELETE", MINE, auth=Auth(token=ann_token.token),
                   body={"otp": site.code(secret)}).problem(403, "QL_FORBIDDEN")
    site.http.call("DELETE", MINE, auth=ann, body={"recovery_code": "aaaa-bbbb-cccc-dddd"}
                   ).problem(422, "QL_INVALID_INPUT")
    assert site.http.call("DELETE", MINE, auth=ann,
                          body={"recovery_code": codes[5]}).status == 204
    assert site.login("ann")[0] == 200
    site.enrol(ann)
    assert site.login("ann")[0] == 401
    site.http.call("DELETE", "/api/v1/users/ann/second-factor", auth=ann).problem(403)
    reset = site.http.ok("DELETE", "/api/v1/users/ann/second-factor", site.admin)
    assert reset == {"enabled": False, "pending": False, "required": False,
                     "recovery_codes_left": 0}
    assert site.login("ann")[0] == 200
    audit = site.http.ok("GET", "/api/v1/audit", site.admin)["items"]
    assert [e["action"] for e in audit if e["action"].startswith("second-factor.")][:3] == [
        "second-factor.reset", "second-factor.enable", "second-factor.begin"]


def test_enforcement_lets_a_password_session_only_enrol(enforced: Site) -> None:
    site = enforced
    ann = site.session("ann")  # an operator: must have one
    refused = site.http.call("GET", "/api/v1/projects", auth=ann)
    assert "enrol" in refused.problem(403, "QL_SECOND_FACTOR_ENROLMENT_REQUIRED")["detail"]
    site.http.call("POST", "/api/v1/tokens", auth=ann, body={"name": "t", "scope": "read"}
                   ).problem(403, "QL_SECOND_FACTOR_ENROLMENT_REQUIRED")
    assert site.http.ok("GET", SESSION, ann)["second_factor"]["required"] is True
    vic = site.session("vic")  # a viewer: below the level
    site.http.ok("GET", "/api/v1/projects", vic)
    ann_token = site.accounts.token_create("ann", name="t", scope="read", lifetime_ms=None)
    site.http.ok("GET", "/api/v1/projects", Auth(token=ann_token.token))  # tokens: not gated
    site.enrol(ann)
    site.http.ok("GET", "/api/v1/projects", ann)  # the same session, now enrolled
    site.http.ok("DELETE", "/api/v1/users/ann/second-factor", site.admin)
    site.http.call("GET", "/api/v1/projects", auth=ann).problem(
        403, "QL_SECOND_FACTOR_ENROLMENT_REQUIRED")
    assert site.http.call("DELETE", SESSION, auth=ann).status == 204  # logging out is allowed


def test_enforcement_counts_a_project_grant(enforced: Site, web_demo: Stores) -> None:
    site = enforced
    site.accounts.user_create("gus", "none", PASSWORD)  # no role on every project
    gus = site.session("gus")
    assert site.http.ok("GET", SESSION, gus)["second_factor"]["required"] is False
    site.http.ok("PUT", "/api/v1/projects/demo/grants/gus", site.admin, {"role": "operator"})
    assert site.http.ok("GET", SESSION, gus)["second_factor"]["required"] is True
    site.http.call("GET", "/api/v1/projects/demo", auth=gus).problem(
        403, "QL_SECOND_FACTOR_ENROLMENT_REQUIRED")
    site.enrol(gus)
    site.http.ok("GET", "/api/v1/projects/demo", gus)


def test_the_user_list_says_each_users_second_factor_state(site: Site) -> None:
    def states() -> dict[str, str]:
        return {u["username"]: u["second_factor"]
                for u in site.http.ok("GET", "/api/v1/users", site.admin)}

    assert states() == {"ann": "off", "root": "off", "vic": "off"}
    site.http.ok("POST", MINE, site.session("vic"), status=201)  # begun, not confirmed
    site.enrol(site.session("ann"))
    assert states() == {"ann": "on", "root": "off", "vic": "pending"}
    changed = site.http.ok("PATCH", "/api/v1/users/ann", site.admin, {"role": "viewer"})
    assert changed["second_factor"] == "on"  # every answer with a user says it
    site.http.ok("DELETE", "/api/v1/users/ann/second-factor", site.admin)
    site.http.ok("DELETE", "/api/v1/users/vic/second-factor", site.admin)
    assert states() == {"ann": "off", "root": "off", "vic": "off"}
