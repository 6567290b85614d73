"""The views of accounts: who is asking (and a new session), users, API tokens and the audit
log. Password hashes and secrets never appear; a new token's secret only in the answer that
created it. The builders are ``service.accounts``'s."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, one_of

Role = Annotated[str, one_of("none", "viewer", "operator", "admin")]
GrantRole = Annotated[str, one_of("viewer", "operator", "admin")]
Scope = Annotated[str, one_of("read", "operate", "admin")]
Access = Annotated[str, one_of("none", "read", "operate", "admin")]
Via = Annotated[str, one_of("session", "token", "cli")]
SessionMethod = Annotated[str, one_of("password", "sso")]
SESSION_METHOD_TEXT = ("How the session was made: password (with qinglong's second factor when "
                       "it is on) or sso (single sign-on: the provider's login and its "
                       "multi-factor); null for a token or the CLI")


class PrincipalView(ViewModel):
    username: str
    role: Role
    via: Via
    token_id: str | None
    scope: Access
    expires_at: OptionalInstant
    session_method: SessionMethod | None = Field(description=SESSION_METHOD_TEXT)


class SessionView(PrincipalView):
    csrf_token: str = Field(description="Send it as X-CSRF-Token with every write of this "
                                        "session")


class UserView(ViewModel):
    username: str
    role: Role
    disabled: bool
    created_at: Instant
    updated_at: Instant
    disabled_at: OptionalInstant
    second_factor: Annotated[str, one_of("off", "pending", "on")] = Field(
        description="The user's second factor (TOTP): off, pending (an enrolment not "
                    "confirmed yet) or on")


class TokenView(ViewModel):
    id: str
    name: str
    username: str
    scope: Scope
    state: Annotated[str, one_of("active", "expired", "revoked")]
    created_at: Instant
    expires_at: OptionalInstant
    last_used_at: OptionalInstant
    revoked_at: OptionalInstant
    revoked_by: str | None
    projects: list[str] | None = Field(
        default=None, description="The projects the token is limited to (null: every project "
                                  "its user may reach)")


class TokenCreatedView(TokenView):
    token: str = Field(description="The token itself: shown this once, stored only as a digest")


class AuditEntryView(ViewModel):
    id: int
    at: Instant
    at_ms: int
    actor: str
    via: Via
    token_id: str | None
    action: str
    project: str | None
    target: str | None
    detail: dict[str, Any]
    client: str | None


class AuditPageView(ViewModel):
    items: list[AuditEntryView]
    next_cursor: str | None


class GrantView(ViewModel):
    username: str
    project: str
    role: GrantRole
    granted_by: str
    granted_at: Instant


class MeView(ViewModel):
    """What the caller may do: its access on every project, and on each project where it has
    more (``read``, ``operate`` or ``admin``; ``none``: nothing)."""

    username: str
    role: Role
    via: Via
    token_id: str | None
    token_scope: Scope | None
    token_projects: list[str] | None
    everywhere: Access = Field(description="The access on every project (and to what belongs "
                                           "to no project: users, the audit log, channels)")
    projects: dict[str, Access] = Field(description="Projects where the access is higher than "
                                                    "everywhere")
    session_method: SessionMethod | None = Field(description=SESSION_METHOD_TEXT)
    second_factor_on: bool | None = Field(
        description="Whether the user's second factor (TOTP) is on; null for a token or the "
                    "CLI, as in GET /api/v1/session")
