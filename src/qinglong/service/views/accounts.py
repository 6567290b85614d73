"""The views of accounts: who is asking (and a new session), users, API tokens and the audit
log. Password hashes and secrets never appear; a new token's secret only in the answer that
created it. The builders are ``service.accounts``'s."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, one_of

Role = Annotated[str, one_of("viewer", "operator", "admin")]
Scope = Annotated[str, one_of("read", "operate", "admin")]
Via = Annotated[str, one_of("session", "token", "cli")]


class PrincipalView(ViewModel):
    username: str
    role: Role
    via: Via
    token_id: str | None
    scope: Scope
    expires_at: OptionalInstant


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
