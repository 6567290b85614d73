"""Routes for accounts: logging in and out (session cookie), API tokens, users, the audit log."""

from __future__ import annotations

from starlette.responses import Response

from qinglong.errors import Forbidden, InvalidInput
from qinglong.service.access import Reach
from qinglong.service.accounts import (
    Level,
    check_username,
    principal_view,
)
from qinglong.service.views import accounts as views
from qinglong.service.views.second_factor import WhoamiView
from qinglong.web import requests as rq
from qinglong.web.auth import (
    clear_session_cookie,
    device_cookie,
    set_device_cookie,
    set_session_cookie,
)
from qinglong.web.problems import JsonAnswer
from qinglong.web.routing import Call, Endpoint, Query, Reply

TOKENS = "/api/v1/tokens"
USERS = "/api/v1/users"


def login(call: Call) -> Response:
    body: rq.LoginRequest = call.body
    if body.otp is not None and body.recovery_code is not None:
        raise InvalidInput("recovery_code", "send otp or recovery_code, not both")
    accounts = call.backend.accounts
    result = accounts.login(body.username, body.password, client=call.client,
                            device=device_cookie(call.headers), otp=body.otp,
                            recovery_code=body.recovery_code)
    response = JsonAnswer(result.view, headers={"Cache-Control": "no-store"})
    if result.device is not None:  # first, so the session cookie is the last Set-Cookie
        set_device_cookie(response, result.device, accounts.limits.device_lifetime_ms // 1000)
    set_session_cookie(response, result.secret, accounts.policy.lifetime_ms // 1000)
    return response


def whoami(call: Call) -> Reply:
    who = call.who
    state = None
    if who.via == "session":
        state = call.backend.second_factor.view(who.username, who.role, who.grants,
                                                who.session_method)
    return Reply(principal_view(who).extended(WhoamiView, second_factor=state))


def logout(call: Call) -> Response:
    call.backend.accounts.logout(call.who)
    response = Response(status_code=204, headers={"Cache-Control": "no-store"})
    clear_session_cookie(response)
    return response


def list_tokens(call: Call) -> Reply:
    if call.query["all"]:
        call.who.require(Level.ADMIN)
        return Reply(call.backend.accounts.token_list(None))
    return Reply(call.backend.accounts.token_list(call.who.username))


def create_token(call: Call) -> Reply:
    body: rq.TokenCreateRequest = call.body
    who = call.who
    if who.via == "token" and who.level < Level.ADMIN:
        raise Forbidden("a token can create tokens only with the admin scope: log in, or use "
                        "`ql token create`")
    owner = who.username if body.username is None else check_username(body.username)
    if owner != who.username:
        who.require(Level.ADMIN)
    view = call.backend.accounts.token_create(owner, name=body.name, scope=body.scope,
                                              lifetime_ms=body.expires_in_ms,
                                              projects=body.projects)
    call.audit("token.create", target=f"token {view.id}",
               detail={"username": owner, "name": body.name, "scope": body.scope,
                       "projects": view.projects})
    return Reply(view, 201)


def revoke_token(call: Call) -> Reply:
    accounts = call.backend.accounts
    token_id = call.path["token"]
    if len(token_id) > 32:
        raise InvalidInput("token", "is not a token id (the 16 characters after qlt_)")
    view = accounts.token_revoke_as(call.who, token_id)  # one you may not see: 404, as unknown
    call.audit("token.revoke", target=f"token {view.id}", detail={"username": view.username})
    return Reply(view)


def list_users(call: Call) -> Reply:
    return Reply(call.backend.accounts.user_list())


def create_user(call: Call) -> Reply:
    body: rq.UserCreateRequest = call.body
    view = call.backend.accounts.user_create(body.username, body.role, body.password)
    call.audit("user.create", target=f"user {body.username}", detail={"role": body.role})
    return Reply(view, 201)


def update_user(call: Call) -> Reply:
    body: rq.UserUpdateRequest = call.body
    username = check_username(call.path["username"])
    if username == call.who.username and (body.disabled or body.role not in (None, "admin")):
        raise InvalidInput("username", "an admin cannot disable or demote themselves "
                                       "(another admin can)")
    view = call.backend.accounts.user_update(username, role=body.role, password=body.password,
                                             disabled=body.disabled, by=call.who.username)
    call.audit("user.update", target=f"user {username}",
               detail={"role": body.role, "password_changed": body.password is not None,
                       "disabled": body.disabled})
    return Reply(view)


def audit_log(call: Call) -> Reply:
    cursor = call.query["cursor"]
    if cursor is not None and not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 19
                                   and int(cursor) < 2**63):
        raise InvalidInput("cursor", "is not a cursor this API gave out")
    q = call.query
    limit = q["limit"]
    entries = call.backend.accounts.audit_list(
        None if cursor is None else int(cursor), limit + 1, actor=q["actor"],
        action=q["action"], project=q["project"], since_ms=q["since"], until_ms=q["until"])
    shown = entries[:limit]
    more = len(entries) > limit
    return Reply(views.AuditPageView(items=shown, next_cursor=str(shown[-1].id) if more else None))


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", "/api/v1/session", login, "Log in: a session cookie (HttpOnly, Secure, "
             "SameSite=Strict) and its CSRF token", "accounts", None, body=rq.LoginRequest,
             response=views.SessionView,
             description="Failed logins are limited per user name (5 in 15 minutes) and per "
                         "client address (30), or, for a browser that sends the device cookie "
                         "`ql_device` of an earlier login of that user, per device (5): beyond "
                         "that, 429 with Retry-After, before the password is checked. Also 429 "
                         "(Retry-After: 1) while the server checks too many passwords at once. "
                         "Over plain HTTP to an address that is not loopback, 403 "
                         "QL_INSECURE_TRANSPORT: a browser would drop the Secure cookie. A user "
                         "whose second factor is on sends otp (or recovery_code) too: without "
                         "it, or with a wrong or used one, 401 QL_SECOND_FACTOR_REQUIRED, "
                         "counted as a failed login.",
             atomic=False),  # a refused login keeps its count (the throttle)
    Endpoint("GET", "/api/v1/session", whoami, "Who you are, how you proved it, and your "
             "second factor", "accounts", Level.READ, response=WhoamiView, reach=Reach.SELF),
    Endpoint("DELETE", "/api/v1/session", logout, "Log out (ends the session)", "accounts",
             Level.READ, status=204, reach=Reach.SELF),
    Endpoint("GET", TOKENS, list_tokens, "List your API tokens (all=true: everyone's, admins "
             "only)", "accounts", Level.READ, response=views.TokenView, many=True,
             reach=Reach.SELF,
             query=(Query("all", "bool", "Every user's tokens (admins)", default=False),)),
    Endpoint("POST", TOKENS, create_token, "Create an API token: the token is in this answer "
             "only", "accounts", Level.READ, body=rq.TokenCreateRequest, reach=Reach.SELF,
             response=views.TokenCreatedView, status=201,
             description="With a session; with a token only if its scope is admin. The scope "
                         "can be at most your role's. Another user's token: admins only."),
    Endpoint("DELETE", TOKENS + "/{token}", revoke_token, "Revoke an API token (yours; anyone's "
             "for admins)", "accounts", Level.READ, response=views.TokenView, reach=Reach.SELF,
             description="Another user's token, without the admin scope, answers 404 like a "
                         "token that does not exist."),
    Endpoint("GET", USERS, list_users, "List users", "accounts", Level.ADMIN,
             response=views.UserView, many=True),
    Endpoint("POST", USERS, create_user, "Create a user", "accounts", Level.ADMIN,
             body=rq.UserCreateRequest, response=views.UserView, status=201),
    Endpoint("PATCH", USERS + "/{username}", update_user, "Change a user's role, password or "
             "disabled state (a new password or disabling ends their sessions and revokes their "
             "tokens)", "accounts",
             Level.ADMIN, body=rq.UserUpdateRequest, response=views.UserView),
    Endpoint("GET", "/api/v1/audit", audit_log, "The audit log: who published, paused, "
             "cancelled or ran what, newest first", "accounts", Level.ADMIN,
             response=views.AuditPageView,
             description="The filters combine; send the same ones with the cursor.",
             query=(Query("limit", "int", "Entries per page", 1, 1000, default=100),
                    Query("cursor", "str", "next_cursor of the previous page"),
                    Query("actor", "str", "Only this user's (or CLI user's) entries"),
                    Query("action", "str", "Only this action and the actions under it "
                          "(notify: notify.test, notify.channel.put, ...)"),
                    Query("project", "str", "Only this project's entries"),
                    Query("since", "instant", "Only entries at or after this time"),
                    Query("until", "instant", "Only entries before this time"))),
)
