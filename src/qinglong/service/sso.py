"""Logging in with single sign-on: the OpenID Connect authorization code flow with PKCE
(docs/security.md#single-sign-on).

1. **Start** (``start``): at most ``STARTS_PER_ADDRESS`` from one client address in a
   pending lifetime (anyone may start one, unauthenticated: each start keeps a row, so one
   address cannot fill the table); a random state, nonce and PKCE verifier; the login in
   progress is kept in the database keyed by the state's digest (with the verifier, the
   nonce, the redirect URI and where to go afterwards), for ``pending_lifetime_ms``; the
   browser is sent to the provider's authorization endpoint with the state, the nonce and
   the S256 challenge, and given the state in a cookie of its own (the callback must come
   back to the browser that started it: no one can log a victim in as themselves with their
   own callback URL).
2. **Finish** (``finish``): the state must match that cookie and name a login in progress,
   which is taken at once (a state works once, even when what follows fails) and must not
   have expired. The code is exchanged with the verifier and the client's credentials; the
   ID token must hold (``OidcProvider.verify``: signature, issuer, audience, times on the
   injected clock, nonce). The configured claim names the user (an email only once the
   provider says it is verified); an unknown user is refused, or created with the configured
   role when the operator allows it (with no password: it logs in only with single sign-on);
   a disabled user is refused. The identity (issuer, subject) is linked to the user at the
   first login; a login naming a linked user with another subject, or a linked subject
   naming another user, is refused. Then a session is created exactly as the password login
   creates one (the same cookie, the same CSRF token derived from it). A user created, an
   identity linked and a login refused for its link are audited (``user.create``,
   ``sso.link``, ``sso.refuse``; actor: the user the claim names, ``via: session``).
"""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from qinglong.errors import Conflict, RateLimited, SsoRefused
from qinglong.service.accounts import SessionPolicy, csrf_token_for
from qinglong.service.logins import USERNAME, digest
from qinglong.service.oidc_provider import OidcProvider
from qinglong.service.sso_settings import CALLBACK_PATH
from qinglong.storage.accounts import AccountStore
from qinglong.storage.accounts.params import (
    SSO_SESSION,
    AuditWriteParams,
    SessionCreateParams,
    UserCreateParams,
)
from qinglong.storage.oidc import OidcStore, PendingCreateParams

STATE_SHAPE = re.compile(r"^[A-Za-z0-9_-]{43}$")
NO_PASSWORD = "!sso"  # noqa: S105 - a hash no password verifies against: SSO-only users
MAX_CODE_CHARS = 2048
STARTS_PER_ADDRESS = 30  # logins started from one client address per pending lifetime


@dataclass(frozen=True, slots=True)
class Started:
    url: str  # the provider's authorization endpoint, with the request
    state: str  # the browser keeps it in a cookie for the callback


@dataclass(frozen=True, slots=True)
class LoggedIn:
    username: str
    role: str
    secret: str  # the session cookie's value: shown to the browser, never stored
    csrf_token: str
    next_path: str
    created_user: bool
    linked: bool  # the identity was linked to the user at this login


class SingleSignOn:
    """The flow over one provider, the SSO store and the accounts' store."""

    def __init__(self, provider: OidcProvider, store: OidcStore, accounts: AccountStore,
                 policy: SessionPolicy) -> None:
        self.provider = provider
        self._store = store
        self._accounts = accounts
        self._policy = policy

    def redirect_uri(self, origin: str) -> str:
        """The callback URL: the configured one, else this server's ``origin``'s."""
        return self.provider.settings.redirect_uri or origin + CALLBACK_PATH

    def start(self, next_path: str, *, origin: str, client: str | None = None) -> Started:
        settings = self.provider.settings
        if client:  # counted as the login limits count failures, forgotten after a lifetime
            counted = self._accounts.login_attempt(
                ((f"sso:{client[:255]}", STARTS_PER_ADDRESS),), settings.pending_lifetime_ms)
            if counted.retry_after_ms is not None:
                wait_s = max(1, -(-counted.retry_after_ms // 1000))
                raise RateLimited("too many single sign-on logins started from this address; "
                                  f"try again in {wait_s} s", wait_s)
        state = secrets.token_urlsafe(32)
        nonce = secrets.token_urlsafe(32)
        verifier = secrets.token_urlsafe(64)  # 86 characters of the PKCE alphabet
        redirect_uri = self.redirect_uri(origin)
        self._store.pending_create(PendingCreateParams(
            state_digest=digest(state), issuer=settings.issuer, verifier=verifier, nonce=nonce,
            redirect_uri=redirect_uri, next_path=next_path,
            lifetime_ms=settings.pending_lifetime_ms))
        url = self.provider.authorization_url(state=state, nonce=nonce, verifier=verifier,
                                              redirect_uri=redirect_uri)
        return Started(url=url, state=state)

    def finish(self, *, state: str | None, code: str | None, error: str | None,
               error_description: str | None, issuer: str | None, browser_state: str | None,
               client: str | None) -> LoggedIn:
        if not state or not STATE_SHAPE.fullmatch(state):
            raise SsoRefused("the callback carries no state of a login this server started")
        taken = self._store.pending_take(digest(state))  # one use, whatever follows
        pending = taken.pending
        if pending is None:
            raise SsoRefused("this login is unknown or was already used: start again")
        if browser_state is None or not hmac.compare_digest(browser_state, state):
            raise SsoRefused("this login was not started in this browser: start again")
        if pending.expires_at_ms <= taken.now_ms:
            raise SsoRefused("this login took too long: start again")
        settings = self.provider.settings
        if pending.issuer != settings.issuer:
            raise SsoRefused("this login was started with another provider: start again")
        if issuer is not None and issuer != settings.issuer:
            raise SsoRefused("the callback names another issuer (iss)")
        if error is not None:
            said = f": {error_description}" if error_description else ""
            raise SsoRefused(f"the provider did not log you in ({error[:100]}{said[:300]})")
        if not code or len(code) > MAX_CODE_CHARS:
            raise SsoRefused("the callback carries no authorization code")
        token = self.provider.exchange(code=code, verifier=pending.verifier,
                                       redirect_uri=pending.redirect_uri)
        claims = self.provider.verify(token, nonce=pending.nonce)
        username = self._username(claims)
        created = self._user(username)
        subject = claims["sub"]
        if created:
            self._audit(username, "user.create", client, role=settings.create_role,
                        by="single sign-on", issuer=settings.issuer)
        linked = self._store.identity_link(settings.issuer, subject, username)
        if linked.created or linked.conflict is not None:
            self._audit(username, "sso.link" if linked.conflict is None else "sso.refuse",
                        client, issuer=settings.issuer, subject=subject,
                        linked_to=None if linked.conflict is None
                        else f"{linked.conflict.username} as {linked.conflict.subject}")
        if linked.conflict is not None:
            if linked.conflict.username != username:
                raise SsoRefused(f"this identity of the provider is linked to another user, "
                                 f"not {username}: an admin must look into it")
            raise SsoRefused(f"{username} is linked to another identity of the provider: the "
                             "claim that names the user changed hands; an admin must look "
                             "into it")
        secret = secrets.token_urlsafe(32)
        session = self._accounts.session_create(SessionCreateParams(
            id_digest=digest(secret), username=username, lifetime_ms=self._policy.lifetime_ms,
            idle_ms=self._policy.idle_ms, client=client, method=SSO_SESSION))
        return LoggedIn(username=username, role=session.role, secret=secret,
                        csrf_token=csrf_token_for(secret), next_path=pending.next_path,
                        created_user=created, linked=linked.created)

    def _audit(self, username: str, action: str, client: str | None,
               **detail: object) -> None:
        """An audit entry of a login (the user it names as actor, ``via: session``)."""
        self._accounts.audit_write(AuditWriteParams(
            actor=username, via="session", action=action, target=f"user {username}",
            detail={k: v for k, v in detail.items() if v is not None}, client=client))

    def _username(self, claims: dict[str, Any]) -> str:
        claim = self.provider.settings.user_claim
        value = claims.get(claim)
        if not isinstance(value, str) or not value:
            raise SsoRefused(f"the ID token has no {claim} claim to name the user by")
        if claim == "email" and claims.get("email_verified") is not True:
            raise SsoRefused("the provider has not verified this email address")
        name = value.lower()
        if not USERNAME.fullmatch(name):
            raise SsoRefused(f"the {claim} {value[:80]!r} is not a user name qinglong accepts")
        return name

    def _user(self, username: str) -> bool:
        """Whether the user had to be created; refuses an unknown (when not allowed) or a
        disabled user."""
        user = self._accounts.user_get(username)
        role = self.provider.settings.create_role
        if user is None and role is None:
            raise SsoRefused(f"there is no user {username}: an admin must create it first")
        if user is None and role is not None:
            try:
                self._accounts.user_create(UserCreateParams(
                    username=username, role=role, password_hash=NO_PASSWORD))
            except Conflict:  # created meanwhile by another login
                return self._user(username)
            return True
        assert user is not None
        if user.disabled_at_ms is not None:
            raise SsoRefused(f"the user {username} is disabled")
        return False
