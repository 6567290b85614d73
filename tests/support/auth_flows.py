"""What the authentication tests of issue 18 share (no tests here): an argon2 hasher that counts
its verifications (the seam ``Accounts(hasher=...)`` takes), the API served in this process
over the database a URL names, a login client that sees every Set-Cookie, and the flows run on
SQLite and on PostgreSQL.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from argon2 import PasswordHasher

from qinglong.clock import SystemClock
from qinglong.profiles.web import open_web_backend
from qinglong.service.accounts import Accounts
from qinglong.web.server import serve_api
from tests.support.test_api_support import Auth, Http, People

PASSWORD = "correct horse battery staple"
NEW_PASSWORD = "staple battery horse correct"
WRONG = "not the password at all"
LOGIN = "/api/v1/session"


class CountingHasher(PasswordHasher):
    """argon2id with cheap parameters, counting verifications and how many ran at once."""

    def __init__(self) -> None:
        super().__init__(time_cost=1, memory_cost=8192, parallelism=1)
        self._lock = threading.Lock()
        self.verified = 0
        self.running = 0
        self.most_at_once = 0

    def verify(self, hash: str | bytes, password: str | bytes) -> bool:
        with self._lock:
            self.verified += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            return super().verify(hash, password)
        finally:
            with self._lock:
                self.running -= 1


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


# --- the API in this process ---------------------------------------------------------------


@dataclass
class Served:
    http: Http
    accounts: Accounts
    hasher: CountingHasher


@contextmanager
def served(url: str) -> Iterator[Served]:
    """The whole API (real uvicorn, real worker threads) over ``url``, its accounts (the web
    backend's own store, as `ql web` opens it) hashing with a CountingHasher."""
    clock = SystemClock()
    backend = open_web_backend(url, clock)
    hasher = CountingHasher()
    backend.accounts = Accounts(backend.stores.accounts, policy=backend.accounts.policy,
                                hasher=hasher)
    running = serve_api(backend, clock, "127.0.0.1:0", close_backend=True)
    try:
        yield Served(Http(running.port), backend.accounts, hasher)
    finally:
        running.stop()


# --- logging in, seeing every cookie -------------------------------------------------------


@dataclass
class Login:
    status: int
    headers: dict[str, str]
    cookies: dict[str, str] = field(default_factory=dict)  # name -> the Set-Cookie line
    body: dict[str, object] = field(default_factory=dict)

    def value(self, name: str) -> str:
        return self.cookies[name].split(";", 1)[0].split("=", 1)[1]


def login_raw(port: int, username: str, password: str, *, cookie: str | None = None,
              headers: dict[str, str] | None = None) -> Login:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sent = {"Content-Type": "application/json", **(headers or {})}
    if cookie is not None:
        sent["Cookie"] = cookie
    try:
        conn.request("POST", LOGIN, body=json.dumps({"username": username,
                                                     "password": password}), headers=sent)
        response = conn.getresponse()
        raw = response.read()
        cookies = {line.split("=", 1)[0]: line for name, line in response.getheaders()
                   if name.lower() == "set-cookie"}
        return Login(response.status, {k.lower(): v for k, v in response.getheaders()},
                     cookies, json.loads(raw) if raw else {})
    finally:
        conn.close()


def flood(port: int, username: str, password: str, attempts: int) -> list[Login]:
    """``attempts`` logins sent at once, each on its own thread and connection."""
    start = threading.Barrier(attempts)
    answers: list[Login | None] = [None] * attempts

    def one(index: int) -> None:
        start.wait(60)
        answers[index] = login_raw(port, username, password)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(attempts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(a is not None for a in answers), "a login of the flood did not answer"
    return [a for a in answers if a is not None]


def flow_login_flood(url: str) -> None:
    """100 wrong passwords for one user at once: exactly 5 verifications (the user's limit),
    never more than the gate's 2 at a time; the other 95 are refused with 429 and Retry-After
    without hashing. The real user, from the browser that logged in before (its device
    cookie), still gets in; without the device cookie the name is locked."""
    with served(url) as site:
        site.accounts.user_create("victim", "operator", PASSWORD)
        before = login_raw(site.http.port, "victim", PASSWORD)
        assert before.status == 200, before.body
        device = before.cookies.get("ql_device")  # judged after the flood
        site.hasher.verified = 0
        answers = flood(site.http.port, "victim", WRONG, 100)
        statuses = Counter(a.status for a in answers)
        assert (statuses, site.hasher.verified) == ({401: 5, 429: 95}, 5), (
            statuses, site.hasher.verified)
        assert site.hasher.most_at_once <= 2, site.hasher.most_at_once
        for refused in (a for a in answers if a.status == 429):
            assert refused.body["code"] == "QL_RATE_LIMITED"
            assert 1 <= int(refused.headers["retry-after"]) <= 900, refused.headers
        locked = login_raw(site.http.port, "victim", PASSWORD)
        assert (locked.status, locked.body["code"]) == (429, "QL_RATE_LIMITED")
        assert site.hasher.verified == 5
        assert device is not None and "Path=/api/v1/session" in device, before.cookies
        real = login_raw(site.http.port, "victim", PASSWORD,
                         cookie=device.split(";", 1)[0])
        assert real.status == 200, real.body
        assert "ql_session" in real.cookies and "ql_device" not in real.cookies
        assert site.hasher.verified == 6


# --- through a real `ql web` / `ql serve --http` -------------------------------------------


def flow_credentials_die_with_the_password(http: Http, people: People) -> None:
    """A new password or disabling a user revokes the user's tokens and ends the sessions;
    enabling the user again revives none of them."""
    admin = people.tokens["admin"]
    http.ok("POST", "/api/v1/users", admin,
            {"username": "dora", "role": "operator", "password": PASSWORD}, 201)

    def token(name: str) -> Auth:
        made = http.ok("POST", "/api/v1/tokens", admin,
                       {"name": name, "scope": "operate", "username": "dora"}, 201)
        return Auth(token=str(made["token"]), label=name)

    def session(password: str) -> Auth:
        answer = login_raw(http.port, "dora", password)
        assert answer.status == 200, answer.body
        return Auth(cookie=answer.value("ql_session"), csrf=str(answer.body["csrf_token"]))

    def works(auth: Auth) -> bool:
        answer = http.call("GET", "/api/v1/session", auth=auth)
        assert answer.status in (200, 401), answer.raw
        return answer.status == 200

    first, first_session = token("first"), session(PASSWORD)
    assert works(first) and works(first_session)
    http.ok("PATCH", "/api/v1/users/dora", admin, {"password": NEW_PASSWORD})
    still = (works(first), works(first_session))
    assert still == (False, False), f"after a new password, (token, session) work: {still}"
    listed = {t["name"]: t for t in http.ok("GET", "/api/v1/tokens?all=true", admin)
              if t["username"] == "dora"}
    assert (listed["first"]["state"], listed["first"]["revoked_by"]) == ("revoked", "admin")
    assert login_raw(http.port, "dora", PASSWORD).status == 401
    second, second_session = token("second"), session(NEW_PASSWORD)
    assert works(second) and works(second_session)
    http.ok("PATCH", "/api/v1/users/dora", admin, {"disabled": True})
    still = (works(second), works(second_session))
    assert still == (False, False), f"disabled, (token, session) work: {still}"
    http.ok("PATCH", "/api/v1/users/dora", admin, {"disabled": False})
    still = (works(first), works(second), works(second_session))
    assert still == (False, False, False), f"enabled again, these work again: {still}"
    third = token("third")
    assert works(third) and works(session(NEW_PASSWORD))
    http.ok("PATCH", "/api/v1/users/dora", admin, {"role": "viewer"})  # a role is no credential
    assert works(third)


def flow_weak_passwords_are_refused(http: Http, people: People) -> None:
    admin = people.tokens["admin"]
    for weak in ("password12", "P@ssw0rd2024!", "qwertyuiop", "1212121212", "eve12345678"):
        body = http.call("POST", "/api/v1/users", auth=admin,
                         body={"username": "eve", "role": "viewer", "password": weak}
                         ).problem(422, "QL_INVALID_INPUT")
        assert body["field"] == "password" and weak not in body["detail"], body
    http.ok("POST", "/api/v1/users", admin,
            {"username": "eve", "role": "viewer", "password": "trombone lighthouse 42"}, 201)
    body = http.call("PATCH", "/api/v1/users/eve", auth=admin,
                     body={"password": "password12"}).problem(422, "QL_INVALID_INPUT")
    assert "common password" in body["detail"], body


def flow_revoking_a_token_you_may_not_see(http: Http, people: People) -> None:
    """Another user's token answers a revoke exactly as a token that does not exist."""
    operators = people.token_ids["operator"]
    # a viewer; an admin through a token narrowed to read (it may not see others' tokens)
    for auth in (people.tokens["viewer"], people.tokens["admin-read"]):
        theirs = http.call("DELETE", f"/api/v1/tokens/{operators}", auth=auth)
        missing = http.call("DELETE", "/api/v1/tokens/ffffffffffffffff", auth=auth)
        assert (theirs.status, missing.status) == (404, 404), (theirs.raw, missing.raw)
        assert theirs.raw.replace(operators.encode(), b"ID") == \
            missing.raw.replace(b"ffffffffffffffff", b"ID")
        assert {k: v for k, v in theirs.headers.items() if k not in ("date", "content-length")} \
            == {k: v for k, v in missing.headers.items() if k not in ("date", "content-length")}
    assert http.ok("GET", "/api/v1/session", people.tokens["operator"])["username"] == "operator"

