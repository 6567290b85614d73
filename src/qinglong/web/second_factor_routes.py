"""Routes of the second factor (docs/security.md#second-factor): a user enrols (a pending
secret, shown once), confirms with a current code (recovery codes, shown once), turns it off
with a code or a recovery code; an admin resets another user's. Also the gate every route
passes: a password session of a user whose role must have a second factor, and who has none
on, may only say who it is, enrol and log out (403 QL_SECOND_FACTOR_ENROLMENT_REQUIRED); a
single-sign-on session is not gated (the provider's multi-factor is its second factor)."""

from __future__ import annotations

from pydantic import Field

from qinglong.errors import InvalidInput, SecondFactorEnrolmentRequired
from qinglong.service.access import Reach
from qinglong.service.accounts import Level, Principal, check_username
from qinglong.service.second_factor import session_only
from qinglong.service.views import second_factor as views
from qinglong.web.backend import WebBackend
from qinglong.web.requests import Request
from qinglong.web.routing import Call, Endpoint, Reply

MINE = "/api/v1/account/second-factor"
THEIRS = "/api/v1/users/{username}/second-factor"
OTP_PATTERN = r"^[0-9]{6}$"


class ConfirmRequest(Request):
    otp: str = Field(pattern=OTP_PATTERN, description="The 6-digit code the app shows now")


class TurnOffRequest(Request):
    otp: str | None = Field(default=None, pattern=OTP_PATTERN,
                            description="The 6-digit code the app shows now")
    recovery_code: str | None = Field(default=None, min_length=1, max_length=64,
                                      description="Or one unused recovery code")


def begin(call: Call) -> Reply:
    session_only(call.who.via)
    view = call.backend.second_factor.begin(call.who.username)
    call.audit("second-factor.begin", target=f"user {call.who.username}")
    return Reply(view, 201)


def confirm(call: Call) -> Reply:
    session_only(call.who.via)
    body: ConfirmRequest = call.body
    view = call.backend.second_factor.confirm(call.who.username, body.otp)
    call.audit("second-factor.enable", target=f"user {call.who.username}")
    return Reply(view)


def turn_off(call: Call) -> Reply:
    body: TurnOffRequest = call.body
    if (body.otp is None) == (body.recovery_code is None):
        raise InvalidInput("otp", "send otp (the current code) or recovery_code, one of them")
    session_only(call.who.via)
    call.backend.second_factor.turn_off(call.who.username, body.otp, body.recovery_code)
    call.audit("second-factor.disable", target=f"user {call.who.username}",
               detail={"with": "otp" if body.otp is not None else "recovery_code"})
    return Reply(None, 204)


def reset(call: Call) -> Reply:
    username = check_username(call.path["username"])
    removed, view = call.backend.second_factor.reset(username)
    call.audit("second-factor.reset", target=f"user {username}", detail={"removed": removed})
    return Reply(view)


# What a session that must enrol first may still do.
ENROLMENT_ROUTES = frozenset({("GET", "/api/v1/session"), ("DELETE", "/api/v1/session"),
                              ("POST", MINE), ("POST", MINE + "/confirm")})


def check_enrolled(backend: WebBackend, principal: Principal, endpoint: Endpoint) -> None:
    """Refuse every other route to a password session that must enrol first. A token is a
    separate credential, and a single-sign-on session's second factor is the provider's: not
    gated (docs/security.md#second-factor)."""
    if principal.via != "session" or (endpoint.method, endpoint.path) in ENROLMENT_ROUTES:
        return
    if backend.second_factor.enrolment_needed(principal.username, principal.role,
                                              principal.grants, principal.session_method):
        raise SecondFactorEnrolmentRequired(
            f"{principal.username} ({principal.role}) must have a second factor: enrol one on "
            f"the Account page (POST {MINE}) before anything else")


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", MINE, begin, "Start enrolling a second factor (TOTP): its secret and "
             "otpauth:// URI, shown this once", "accounts", Level.READ, reach=Reach.SELF,
             response=views.EnrolmentView, status=201,
             description="Not on until confirmed with a current code. Starting again replaces "
                         "a pending enrolment; with one on: 409. Needs a password session "
                         "(a token: 403) and the secret key (QL_SECRET_KEY or "
                         "QL_SECRET_KEY_FILE), which seals the secret: without it, 422 "
                         "QL_SECRET_KEY_MISSING."),
    Endpoint("POST", MINE + "/confirm", confirm, "Turn the second factor on with a current "
             "code: 10 recovery codes, shown this once", "accounts", Level.READ,
             reach=Reach.SELF, body=ConfirmRequest, response=views.RecoveryCodesView,
             description="A wrong code: 422 (field otp). Each recovery code logs in once "
                         "instead of a code."),
    Endpoint("DELETE", MINE, turn_off, "Turn your second factor off, with a current code or "
             "a recovery code", "accounts", Level.READ, reach=Reach.SELF, body=TurnOffRequest,
             status=204,
             description="A wrong or used code: 422, nothing changes; it counts as a failed "
                         "attempt (5 in 15 minutes per user, then 429 with Retry-After).",
             atomic=False),  # a refused attempt keeps its count (the throttle)
    Endpoint("DELETE", THEIRS, reset, "Reset a user's second factor (pending or on): they log "
             "in with the password alone and may enrol again", "accounts", Level.ADMIN,
             response=views.SecondFactorView),
)
