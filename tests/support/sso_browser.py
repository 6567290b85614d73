"""A browser's part in single sign-on, over plain HTTP: start the login at a qinglong server,
follow its redirect to the test issuer's authorization endpoint, come back to the callback
with the state cookie, and keep the session cookie it sets."""

from __future__ import annotations

import http.client
import urllib.parse
from dataclasses import dataclass
from http.cookies import SimpleCookie

CALLBACK = "/api/v1/sso/callback"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    cookies: dict[str, str]  # what Set-Cookie set ("" for a deleted one)
    raw_cookies: list[str]
    body: bytes

    @property
    def location(self) -> str:
        return self.headers["location"]


def get(url: str, *, cookies: dict[str, str] | None = None,
        accept: str = "application/json") -> Reply:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Accept": accept}
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""),
                     headers=headers)
        answer = conn.getresponse()
        body = answer.read()
        raw = answer.headers.get_all("Set-Cookie") or []
        jar: dict[str, str] = {}
        for line in raw:
            parsed: SimpleCookie = SimpleCookie()
            parsed.load(line)
            for name, morsel in parsed.items():
                jar[name] = morsel.value
        return Reply(answer.status, {k.lower(): v for k, v in answer.getheaders()}, jar, raw,
                     body)
    finally:
        conn.close()


@dataclass
class Started:
    authorize_url: str
    state: str
    state_cookie: str


class SsoBrowser:
    """The steps of one login at the server ``base`` (http://127.0.0.1:PORT)."""

    def __init__(self, base: str) -> None:
        self.base = base

    def start(self, next_path: str = "/runs") -> Started:
        reply = get(self.base + "/api/v1/sso/login?next=" + urllib.parse.quote(next_path))
        assert reply.status == 303, (reply.status, reply.body[:500])
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(reply.location).query))
        cookie = reply.cookies["ql_sso_state"]
        assert cookie == query["state"]
        line = next(c for c in reply.raw_cookies if c.startswith("ql_sso_state="))
        for part in ("HttpOnly", "Secure", "SameSite=lax", f"Path={CALLBACK}"):
            assert part.lower() in line.lower(), line
        return Started(reply.location, query["state"], cookie)

    @staticmethod
    def approve(started: Started) -> str:
        """The callback URL the issuer sends the browser back to."""
        reply = get(started.authorize_url)
        assert reply.status == 302, (reply.status, reply.body[:500])
        return reply.location

    def callback(self, url: str, state_cookie: str | None, *,
                 accept: str = "application/json") -> Reply:
        assert url.startswith(self.base + CALLBACK), url
        cookies = {"ql_sso_state": state_cookie} if state_cookie is not None else None
        return get(url, cookies=cookies, accept=accept)

    def login(self, next_path: str = "/runs") -> Reply:
        started = self.start(next_path)
        return self.callback(self.approve(started), started.state_cookie)
