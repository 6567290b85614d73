"""Who is asking: an API token (``Authorization: Bearer qlt_...``) or a session cookie (with
its CSRF token on every write). A request that sends an Authorization header is judged by it
alone; a bad one is never rescued by a cookie."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import Response

from qinglong.errors import Forbidden as ForbiddenError
from qinglong.errors import Unauthenticated
from qinglong.service.accounts import Accounts, Principal, csrf_matches

SESSION_COOKIE = "ql_session"
DEVICE_COOKIE = "ql_device"  # sent to the login route only: which browser logged in before
DEVICE_PATH = "/api/v1/session"
CSRF_HEADER = "x-csrf-token"


@dataclass(frozen=True, slots=True)
class Credentials:
    bearer: str | None  # the token (None: no Authorization header)
    session: str | None  # the session cookie's secret


def credentials(headers: Headers, cookies: dict[str, str]) -> Credentials:
    header = headers.get("authorization")
    if header is None:
        return Credentials(bearer=None, session=cookies.get(SESSION_COOKIE))
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the Authorization header must be: Bearer <token>")
    return Credentials(bearer=token.strip(), session=None)


def authenticate(accounts: Accounts, found: Credentials) -> Principal | None:
    """The principal the credentials prove; None when there are none. A token or session
    that does not hold (unknown, revoked, expired, its user disabled) is refused."""
    if found.bearer is not None:
        principal = accounts.token_principal(found.bearer)
        if principal is None:
            raise Unauthenticated("the API token is not valid (unknown, revoked or expired)")
        return principal
    if found.session:
        principal = accounts.session_principal(found.session)
        if principal is None:
            raise Unauthenticated("the session has ended or expired: log in again")
        return principal
    return None


def check_csrf(principal: Principal, secret: str | None, headers: Headers) -> None:
    """A write made with a session cookie must carry the session's CSRF token."""
    if principal.via != "session":
        return
    sent = headers.get(CSRF_HEADER)
    if secret is None or not sent or not csrf_matches(secret, sent):
        raise ForbiddenError("a write with a session cookie needs the session's CSRF token in "
                             "the X-CSRF-Token header")


def set_session_cookie(response: Response, secret: str, max_age_s: int) -> None:
    response.set_cookie(SESSION_COOKIE, secret, max_age=max_age_s, path="/", secure=True,
                        httponly=True, samesite="strict")


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True,
                           samesite="strict")


def device_cookie(headers: Headers) -> str | None:
    """The device cookie the browser sent to the login, if any."""
    return cookie_parser(headers.get("cookie", "")).get(DEVICE_COOKIE)


def set_device_cookie(response: Response, secret: str, max_age_s: int) -> None:
    response.set_cookie(DEVICE_COOKIE, secret, max_age=max_age_s, path=DEVICE_PATH, secure=True,
                        httponly=True, samesite="strict")
