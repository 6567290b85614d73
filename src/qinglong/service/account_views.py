"""The views of accounts as the service builds them from the store's records (no password
hash or secret in any of them)."""

from __future__ import annotations

from qinglong.service.times import rfc3339
from qinglong.service.views.accounts import (
    AuditEntryView,
    TokenView,
    UserView,
)
from qinglong.service.views.base import instant
from qinglong.storage.accounts.params import ApiToken, AuditEntry, User


def user_view(user: User) -> UserView:
    return UserView(username=user.username, role=user.role,
                    disabled=user.disabled_at_ms is not None,
                    created_at=instant(user.created_at_ms),
                    updated_at=instant(user.updated_at_ms),
                    disabled_at=rfc3339(user.disabled_at_ms),
                    second_factor=user.second_factor)


def token_state(token: ApiToken, now_ms: int) -> str:
    if token.revoked_at_ms is not None:
        return "revoked"
    if token.expires_at_ms is not None and token.expires_at_ms <= now_ms:
        return "expired"
    return "active"


def token_view(token: ApiToken, now_ms: int) -> TokenView:
    return TokenView(id=token.id, name=token.name, username=token.username,
                     scope=token.scope, state=token_state(token, now_ms),
                     created_at=instant(token.created_at_ms),
                     expires_at=rfc3339(token.expires_at_ms),
                     last_used_at=rfc3339(token.last_used_at_ms),
                     revoked_at=rfc3339(token.revoked_at_ms), revoked_by=token.revoked_by,
                     projects=None if token.projects is None else list(token.projects))


def audit_view(entry: AuditEntry) -> AuditEntryView:
    return AuditEntryView(id=entry.id, at=instant(entry.at_ms), at_ms=entry.at_ms,
                          actor=entry.actor, via=entry.via, token_id=entry.token_id,
                          action=entry.action, project=entry.project_id,
                          target=entry.target, detail=dict(entry.detail),
                          client=entry.client)
