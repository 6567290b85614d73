"""The single sign-on store (docs/security.md#single-sign-on): logins in progress, each taken
once by its callback, and the identity (issuer, subject) each user is linked to. Written once
over the kernel, on the store's clock.

- ``pending_take`` deletes the login in progress of a state and returns it, expired or not
  (the caller judges ``expires_at_ms`` against ``now_ms``): a state works once at most.
- ``identity_link`` links an identity to a user at the first login and records later ones;
  it refuses (``IdentityMismatch``) a user linked to another subject of the issuer, or a
  subject linked to another user, so a renamed claim never moves a login onto an account.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qinglong.storage.kernel import Database
from qinglong.storage.units import TxUnit, UnitStore, writes


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingLogin:
    state_digest: str
    issuer: str
    verifier: str
    nonce: str
    redirect_uri: str
    next_path: str
    created_at_ms: int
    expires_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCreateParams:
    state_digest: str
    issuer: str
    verifier: str
    nonce: str
    redirect_uri: str
    next_path: str
    lifetime_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    issuer: str
    subject: str
    username: str
    linked_at_ms: int
    last_login_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Taken:
    """A login in progress as its callback took it, and the store's now then."""

    pending: PendingLogin | None
    now_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Linked:
    """What linking found: the identity (new or as it was), or the link that refused it."""

    identity: Identity
    created: bool = False
    conflict: Identity | None = None  # the other link: this user or this subject elsewhere


def _identity(row: Mapping[str, Any]) -> Identity:
    return Identity(issuer=row["issuer"], subject=row["subject"], username=row["username"],
                    linked_at_ms=int(row["linked_at_ms"]),
                    last_login_at_ms=int(row["last_login_at_ms"]))


class OidcRows(TxUnit):
    def pending_create(self, params: PendingCreateParams) -> None:
        self._run("oidc_pending_prune", {"now_ms": self.now_ms})
        self._run("oidc_pending_insert", {
            "state_digest": params.state_digest, "issuer": params.issuer,
            "verifier": params.verifier, "nonce": params.nonce,
            "redirect_uri": params.redirect_uri, "next_path": params.next_path, "lifetime_ms": params.lifetime_ms,
            "now_ms": self.now_ms})

    def pending_take(self, state_digest: str) -> Taken:
        row = self._one("oidc_pending_take", {"state_digest": state_digest})
        if row is None:
            return Taken(pending=None, now_ms=self.now_ms)
        return Taken(now_ms=self.now_ms, pending=PendingLogin(
            state_digest=str(row["state_digest"]).strip(), issuer=row["issuer"],
            verifier=row["verifier"], nonce=row["nonce"], redirect_uri=row["redirect_uri"],
            next_path=row["next_path"],
            created_at_ms=int(row["created_at_ms"]), expires_at_ms=int(row["expires_at_ms"])))

    def identity_link(self, issuer: str, subject: str, username: str) -> Linked:
        keys = {"issuer": issuer, "subject": subject, "username": username}
        by_subject = self._one("oidc_identity_by_subject", keys)
        by_user = self._one("oidc_identity_by_user", keys)
        if by_subject is not None and by_subject["username"] != username:
            return Linked(identity=_identity(by_subject), conflict=_identity(by_subject))
        if by_user is not None and by_user["subject"] != subject:
            return Linked(identity=_identity(by_user), conflict=_identity(by_user))
        if by_subject is not None:
            self._run("oidc_identity_seen", {**keys, "now_ms": self.now_ms})
            return Linked(identity=_identity(by_subject))
        self._run("oidc_identity_insert", {**keys, "now_ms": self.now_ms})
        return Linked(created=True, identity=Identity(
            issuer=issuer, subject=subject, username=username, linked_at_ms=self.now_ms,
            last_login_at_ms=self.now_ms))


class OidcStore(UnitStore[OidcRows]):
    def __init__(self, db: Database) -> None:
        super().__init__(db, OidcRows)

    pending_create = writes("start a single sign-on login", OidcRows.pending_create)
    pending_take = writes("take a single sign-on login", OidcRows.pending_take)
    identity_link = writes("link a single sign-on identity", OidcRows.identity_link)
