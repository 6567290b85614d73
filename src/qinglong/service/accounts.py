"""Accounts as the surfaces ask for them: `ql user`, `ql token` and the HTTP API.

Users have a role (viewer, operator, admin) and an argon2 password hash. A browser logs in
for a session: a random secret in an HttpOnly cookie, stored as its SHA-256 digest, with an
absolute and an idle expiry; its CSRF token is derived from the secret. An API token
(``qlt_<id>_<secret>``) is shown once and stored as its SHA-256 digest; its scope (read,
operate, admin) can only narrow its user's role. A new password or disabling a user ends the
user's sessions and revokes the user's tokens. How a login's password is checked (throttled
before hashing, per user name, address or device, in the store so every `ql web` behind a load
balancer sees the same limit) is ``service.logins``; the password rule is
``service.passwords``. Password hashes and secrets never leave the service: views carry none
of them.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import IntEnum

from argon2 import PasswordHasher

from qinglong.domain.identifiers import project_id
from qinglong.errors import Forbidden, InvalidInput, NotFound
from qinglong.service.account_views import audit_view, token_view, user_view
from qinglong.service.hash_gate import PROCESS_GATE, HashGate
from qinglong.service.logins import USERNAME, LoginLimits, PasswordChecks, digest
from qinglong.service.passwords import check_password
from qinglong.service.second_factor import SecondFactors
from qinglong.service.times import rfc3339
from qinglong.service.views.accounts import (
    AuditEntryView,
    PrincipalView,
    SessionView,
    TokenCreatedView,
    TokenView,
    UserView,
)
from qinglong.storage.accounts import AccountStore
from qinglong.storage.accounts.params import (
    PASSWORD_SESSION,
    ApiToken,
    AuditListParams,
    AuditWriteParams,
    SessionCreateParams,
    TokenCreateParams,
    UserCreateParams,
    UserUpdateParams,
)

USERNAME_RULE = ("must be 1-64 characters of lowercase letters, digits, '.', '_', '@' and '-', "
                 "starting with a letter or digit")
TOKEN_NAME_MAX = 128
MAX_TOKEN_PROJECTS = 100
TOKEN_PREFIX = "qlt_"  # noqa: S105 - the prefix of every token, not a secret
TOKEN_SHAPE = re.compile(r"^qlt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
SESSION_SHAPE = re.compile(r"^[A-Za-z0-9_-]{43}$")
MAX_TOKEN_LIFETIME_MS = 3650 * 86_400_000
MAX_AUDIT_PAGE = 10_000
AUDIT_TEXT_MAX = 64  # an actor's or an action's longest (the columns' width)
TOUCH_AFTER_MS = 60_000  # tokens record being seen at most once a minute, sessions also at
TOUCHES_PER_IDLE = 4  # least 4 times per idle window (so one in use never runs idle)


class Level(IntEnum):
    NONE = 0  # a user with no role on every project (only grants), or outside a token's
    READ = 1
    OPERATE = 2
    ADMIN = 3


ROLE_LEVEL = {"none": Level.NONE, "viewer": Level.READ, "operator": Level.OPERATE,
              "admin": Level.ADMIN}
GRANT_ROLES = ("viewer", "operator", "admin")  # what a grant on one project can be
SCOPE_LEVEL = {"read": Level.READ, "operate": Level.OPERATE, "admin": Level.ADMIN}
LEVEL_SCOPE = {Level.NONE: "none", **{level: scope for scope, level in SCOPE_LEVEL.items()}}


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    lifetime_ms: int = 12 * 3_600_000  # absolute
    idle_ms: int = 3_600_000  # ends an hour after the last request

    @property
    def touch_after_ms(self) -> int:
        """How often a session in use records it was seen: a quarter of the idle window (at
        most a minute), so its idle expiry always lies at least 3/4 of the window after its
        latest request."""
        return max(1, min(TOUCH_AFTER_MS, self.idle_ms // TOUCHES_PER_IDLE))


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who is asking, and how they proved it."""

    username: str
    role: str
    via: str  # session | token | cli
    token_id: str | None = None
    scope: str | None = None  # the token's scope
    session_digest: str | None = None
    expires_at_ms: int | None = None
    grants: tuple[tuple[str, str], ...] = ()  # (project, role): the user's per-project roles
    projects: tuple[str, ...] | None = None  # a token limited to these projects
    session_method: str | None = None  # a session's: password | sso (None: token, CLI)

    @property
    def level(self) -> Level:
        """The level on every project (``service.access`` judges one project)."""
        if self.projects is not None:
            return Level.NONE
        level = ROLE_LEVEL[self.role]
        if self.scope is not None:
            level = min(level, SCOPE_LEVEL[self.scope])
        return Level(level)

    @property
    def effective_scope(self) -> str:
        return LEVEL_SCOPE[self.level]

    def require(self, level: Level) -> None:
        if self.level < level:
            what = f"token scope {self.scope}" if self.scope is not None else "role"
            raise Forbidden(f"this needs the {LEVEL_SCOPE[level]} scope; {self.username} "
                            f"({self.role}, {what}) has {self.effective_scope}")


@dataclass(frozen=True, slots=True)
class LoginResult:
    secret: str  # the cookie value: shown to the browser, never stored
    csrf_token: str
    view: SessionView
    device: str | None = None  # a new device cookie (None: the browser's own still holds)


def check_username(value: object, field: str = "username") -> str:
    if not isinstance(value, str) or not USERNAME.fullmatch(value):
        raise InvalidInput(field, USERNAME_RULE)
    return value


def check_role(value: object, field: str = "role") -> str:
    """A user's role on every project: none (only what grants give), viewer, operator, admin."""
    if value not in ROLE_LEVEL:
        raise InvalidInput(field, "must be one of none, viewer, operator, admin")
    return str(value)


def check_grant_role(value: object, field: str = "role") -> str:
    if value not in GRANT_ROLES:
        raise InvalidInput(field, "must be one of viewer, operator, admin")
    return str(value)


def check_scope(value: object, field: str = "scope") -> str:
    if value not in SCOPE_LEVEL:
        raise InvalidInput(field, "must be one of read, operate, admin")
    return str(value)


def check_token_projects(value: object) -> tuple[str, ...]:
    """The projects a token is limited to: 1 to 100 distinct project ids, kept sorted."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_TOKEN_PROJECTS:
        raise InvalidInput("projects", f"must list 1 to {MAX_TOKEN_PROJECTS} project ids")
    found = sorted({project_id(item, "projects") if isinstance(item, str)
                    else project_id("", "projects") for item in value})
    return tuple(found)


def csrf_token_for(secret: str) -> str:
    """The CSRF token of a session: derived from its secret, so nothing more is stored."""
    return hashlib.sha256(b"qinglong-csrf:" + secret.encode()).hexdigest()


def csrf_matches(secret: str, token: str) -> bool:
    return hmac.compare_digest(csrf_token_for(secret), token)


def principal_view(principal: Principal) -> PrincipalView:
    return PrincipalView(username=principal.username, role=principal.role, via=principal.via,
                         token_id=principal.token_id, scope=principal.effective_scope,
                         expires_at=rfc3339(principal.expires_at_ms),
                         session_method=principal.session_method)



# --- the service --------------------------------------------------------------------------


class Accounts:
    def __init__(self, store: AccountStore, *, policy: SessionPolicy | None = None,
                 hasher: PasswordHasher | None = None, gate: HashGate = PROCESS_GATE,
                 limits: LoginLimits | None = None,
                 second_factor: SecondFactors | None = None) -> None:
        self._store = store
        self._policy = policy or SessionPolicy()
        self._hasher = hasher or PasswordHasher()
        self._checks = PasswordChecks(store, self._hasher, gate, limits or LoginLimits(),
                                      second=second_factor)

    @property
    def policy(self) -> SessionPolicy:
        return self._policy

    @property
    def limits(self) -> LoginLimits:
        return self._checks.limits

    # -- users ---------------------------------------------------------------------------

    def user_create(self, username: str, role: str, password: str) -> UserView:
        name = check_username(username)
        user = self._store.user_create(UserCreateParams(
            username=name, role=check_role(role),
            password_hash=self._hasher.hash(check_password(password, username=name))))
        return user_view(user)

    def user_list(self) -> list[UserView]:
        return [user_view(user) for user in self._store.user_list()]

    def user_update(self, username: str, *, role: str | None = None,
                    password: str | None = None, disabled: bool | None = None,
                    by: str | None = None) -> UserView:
        """Change a user; a new password or disabling ends the user's sessions and revokes
        the user's tokens (as revoked by ``by``)."""
        name = check_username(username)
        password_hash = None
        if password is not None:
            password_hash = self._hasher.hash(check_password(password, username=name))
        user = self._store.user_update(UserUpdateParams(
            username=name, role=None if role is None else check_role(role),
            password_hash=password_hash, disabled=disabled, by=by))
        return user_view(user)

    # -- logging in ----------------------------------------------------------------------

    def login(self, username: object, password: object, *, client: str | None,
              device: str | None = None, otp: object = None,
              recovery_code: object = None) -> LoginResult:
        """A new session for the right password (and the second factor's ``otp`` or
        ``recovery_code``, when the user has one on), unless too many logins failed lately (see
        ``service.logins``). ``device`` is the browser's device cookie, if it sent one; the
        result carries a new one after a login without a valid one."""
        verified = self._checks.verify(username, password, client=client, device=device,
                                       otp=otp, recovery_code=recovery_code)
        secret = secrets.token_urlsafe(32)
        session = self._store.session_create(SessionCreateParams(
            id_digest=digest(secret), username=verified.user.username,
            lifetime_ms=self._policy.lifetime_ms, idle_ms=self._policy.idle_ms, client=client,
            method=PASSWORD_SESSION))
        principal = Principal(username=session.username, role=session.role, via="session",
                              session_digest=session.id_digest,
                              expires_at_ms=session.expires_at_ms,
                              grants=self._store.grants_of(session.username),
                              session_method=session.method)
        csrf = csrf_token_for(secret)
        return LoginResult(secret=secret, csrf_token=csrf, device=verified.new_device,
                           view=principal_view(principal).extended(SessionView,
                                                                    csrf_token=csrf))

    def logout(self, principal: Principal) -> None:
        if principal.session_digest is not None:
            self._store.session_end(principal.session_digest)

    def session_principal(self, secret: str) -> Principal | None:
        if not SESSION_SHAPE.fullmatch(secret):
            return None
        session = self._store.session_get(digest(secret), self._policy.touch_after_ms,
                                          self._policy.idle_ms)
        if session is None:
            return None
        return Principal(username=session.username, role=session.role, via="session",
                         session_digest=session.id_digest, expires_at_ms=session.expires_at_ms,
                         grants=session.grants, session_method=session.method)

    def token_principal(self, token: str) -> Principal | None:
        shape = TOKEN_SHAPE.fullmatch(token)
        if shape is None:
            return None
        found, now_ms = self._store.token_get_at(shape.group(1))
        if (found is None or not hmac.compare_digest(found.secret_digest, digest(token))
                or found.revoked_at_ms is not None or found.user_disabled):
            return None
        if found.expires_at_ms is not None and found.expires_at_ms <= now_ms:
            return None
        if found.last_used_at_ms is None or now_ms - found.last_used_at_ms >= TOUCH_AFTER_MS:
            self._store.token_used(found.id, TOUCH_AFTER_MS)
        return Principal(username=found.username, role=found.role, via="token",
                         token_id=found.id, scope=found.scope,
                         expires_at_ms=found.expires_at_ms, grants=found.grants,
                         projects=found.projects)

    # -- tokens --------------------------------------------------------------------------

    def token_create(self, username: str, *, name: str, scope: str,
                     lifetime_ms: int | None,
                     projects: list[str] | None = None) -> TokenCreatedView:
        """A new token of ``username``, its secret in the view (shown this once); with
        ``projects``, it reaches only those (each one its user has a role on)."""
        check_username(username)
        if not isinstance(name, str) or not 1 <= len(name) <= TOKEN_NAME_MAX \
                or any(not ch.isprintable() for ch in name):
            raise InvalidInput("name", f"must be 1-{TOKEN_NAME_MAX} printable characters")
        check_scope(scope)
        if lifetime_ms is not None and (isinstance(lifetime_ms, bool)
                                        or not 60_000 <= lifetime_ms <= MAX_TOKEN_LIFETIME_MS):
            raise InvalidInput("expires_in", "must be between 1 minute and 3650 days")
        user = self._store.user_get(username)
        if user is None:
            raise NotFound("user", username)
        limited = None if projects is None else check_token_projects(projects)
        top = self._highest_level(user.username, user.role, limited)
        if SCOPE_LEVEL[scope] > top:
            where = "" if limited is None else " on " + ", ".join(limited)
            raise InvalidInput("scope", f"{username} has {LEVEL_SCOPE[top]} access{where}: a "
                                        f"token can have at most that scope")
        token_id = secrets.token_hex(8)
        token = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        created = self._store.token_create(TokenCreateParams(
            id=token_id, username=username, name=name, scope=scope,
            secret_digest=digest(token), lifetime_ms=lifetime_ms, projects=limited))
        return token_view(created, created.created_at_ms).extended(TokenCreatedView,
                                                                   token=token)

    def _highest_level(self, username: str, role: str,
                       projects: tuple[str, ...] | None) -> Level:
        """The highest level a user has (on the given projects only, when given); each given
        project must be one the user has a role on."""
        granted = dict(self._store.grants_of(username))
        if projects is None:
            return max((ROLE_LEVEL[role], *(ROLE_LEVEL[r] for r in granted.values())))
        found = []
        for project in projects:
            level = max(ROLE_LEVEL[role], ROLE_LEVEL[granted.get(project, "none")])
            if level == Level.NONE:
                raise InvalidInput("projects", f"{username} has no role on project {project}")
            found.append(level)
        return max(found)

    def token_list(self, username: str | None) -> list[TokenView]:
        now_ms = self._store.now_ms()
        return [token_view(t, now_ms) for t in self._store.token_list(username)]

    def token_get(self, token_id: str) -> ApiToken:
        found = self._store.token_get(token_id) if isinstance(token_id, str) else None
        if found is None:
            raise NotFound("token", str(token_id))
        return found

    def token_revoke(self, token_id: str, by: str) -> TokenView:
        revoked = self._store.token_revoke(self.token_get(token_id).id, by)
        return token_view(revoked, self._store.now_ms())

    def token_revoke_as(self, who: Principal, token_id: str) -> TokenView:
        """Revoke a token ``who`` may see: their own, or (with the admin scope) anyone's. A
        token they may not see answers exactly as one that does not exist."""
        found = self._store.token_get(token_id) if isinstance(token_id, str) else None
        if found is None or (found.username != who.username and who.level < Level.ADMIN):
            raise NotFound("token", str(token_id))
        return self.token_revoke(found.id, who.username)

    # -- the audit log -------------------------------------------------------------------

    def audit(self, principal: Principal, action: str, *, project: str | None = None,
              target: str | None = None, detail: dict[str, object] | None = None,
              client: str | None = None) -> None:
        self._store.audit_write(AuditWriteParams(
            actor=principal.username, via=principal.via, token_id=principal.token_id,
            action=action, project_id=project, target=target, detail=detail or {},
            client=client))

    def audit_list(self, before_id: int | None, limit: int, *, actor: str | None = None,
                   action: str | None = None, project: str | None = None,
                   since_ms: int | None = None,
                   until_ms: int | None = None) -> list[AuditEntryView]:
        """Newest first, before ``before_id``; only ``actor``'s, only ``action`` (and the
        actions under it), only ``project``'s, only at ``since_ms <= at < until_ms``."""
        if not 1 <= limit <= MAX_AUDIT_PAGE:
            raise InvalidInput("limit", f"must be between 1 and {MAX_AUDIT_PAGE}")
        for name, text in (("actor", actor), ("action", action)):
            if text is not None and not 1 <= len(text) <= AUDIT_TEXT_MAX:
                raise InvalidInput(name, f"must be 1-{AUDIT_TEXT_MAX} characters")
        if since_ms is not None and until_ms is not None and until_ms <= since_ms:
            raise InvalidInput("until", "must be later than since")
        return [audit_view(entry) for entry in self._store.audit_list(AuditListParams(
            limit=limit, before_id=before_id, actor=actor, action=action, project_id=project,
            since_ms=since_ms, until_ms=until_ms))]
