"""The verbs' parameters and records of the account store (storage/accounts)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Grants = tuple[tuple[str, str], ...]  # (project, role), by project
# How a session was made (docs/security.md#single-sign-on): the password (and qinglong's
# second factor, when on), or single sign-on (the provider's login and its multi-factor).
PASSWORD_SESSION = "password"  # noqa: S105 - a way of logging in, not a secret
SSO_SESSION = "sso"


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """A user's role on one project (per-project roles, docs/security.md)."""

    username: str
    project_id: str
    role: str  # viewer | operator | admin
    granted_by: str
    granted_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class User:
    username: str
    role: str  # viewer | operator | admin on every project, or none (only its grants)
    password_hash: str  # argon2 (encoded, with its parameters and salt)
    created_at_ms: int
    updated_at_ms: int
    disabled_at_ms: int | None
    second_factor: str = "off"  # off | pending (enrolment not confirmed) | on


@dataclass(frozen=True, slots=True, kw_only=True)
class UserCreateParams:
    username: str
    role: str
    password_hash: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UserUpdateParams:
    """Change what is given (None keeps it). A new password hash or ``disabled`` True also
    ends the user's sessions, forgets the user's login devices and revokes the user's tokens
    (recorded as revoked by ``by``; None: by the user themselves)."""

    username: str
    role: str | None = None
    password_hash: str | None = None
    disabled: bool | None = None
    by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A browser session, found by the SHA-256 digest of its cookie's secret."""

    id_digest: str
    username: str
    role: str  # the user's role now
    created_at_ms: int
    expires_at_ms: int
    idle_expires_at_ms: int
    seen_at_ms: int
    method: str = PASSWORD_SESSION  # how it was made: password | sso (single sign-on)
    grants: Grants = ()  # the user's per-project roles now


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionCreateParams:
    id_digest: str
    username: str
    lifetime_ms: int  # absolute, from creation
    idle_ms: int  # ends this long after it was last seen
    client: str | None = None
    method: str = PASSWORD_SESSION  # how the user proved who they are: password | sso


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiToken:
    id: str  # the public part of the token
    username: str
    role: str  # its user's role now
    user_disabled: bool
    name: str
    scope: str  # read | operate | admin
    secret_digest: str
    created_at_ms: int
    expires_at_ms: int | None
    last_used_at_ms: int | None
    revoked_at_ms: int | None
    revoked_by: str | None
    projects: tuple[str, ...] | None = None  # None: every project its user may reach
    grants: Grants = ()  # its user's per-project roles now


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenCreateParams:
    id: str
    username: str
    name: str
    scope: str
    secret_digest: str
    lifetime_ms: int | None  # None: until revoked
    projects: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginAttempt:
    """An attempt to log in, admitted or not. Admitted: one failure is already recorded per
    subject (``failure_ids``), to be taken back if the password proves right. Refused:
    ``retry_after_ms`` until the subject that refused it admits one again."""

    failure_ids: tuple[str, ...] = ()
    retry_after_ms: int | None = None

    @property
    def admitted(self) -> bool:
        return self.retry_after_ms is None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceCreateParams:
    id_digest: str  # SHA-256 of the device cookie's secret
    username: str
    lifetime_ms: int
    keep: int  # the user's newest devices kept; older ones are forgotten


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    id: int
    at_ms: int
    actor: str
    via: str  # session | token | cli
    token_id: str | None
    action: str  # e.g. task.publish, trigger.pause, run.cancel, run.now
    project_id: str | None
    target: str | None
    detail: Mapping[str, object]
    client: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditListParams:
    """A page of the audit log, newest first: entries before ``before_id`` (when given) that
    pass every filter given. ``action`` matches that action and every action under it
    (``notify`` matches ``notify.test`` and ``notify.channel.put``); the time range is
    ``since_ms <= at_ms < until_ms``."""

    limit: int
    before_id: int | None = None
    actor: str | None = None
    action: str | None = None
    project_id: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditWriteParams:
    actor: str
    via: str
    action: str
    token_id: str | None = None
    project_id: str | None = None
    target: str | None = None
    detail: Mapping[str, object] = field(default_factory=dict)
    client: str | None = None


