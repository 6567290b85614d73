"""The account statements, run inside one transaction of the account store at one reading
of its clock (taken when first needed). Rows map to the records of ``params``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from qinglong.domain.text import MAX_JSON_INT
from qinglong.errors import Conflict, InvalidInput, NotFound
from qinglong.storage.accounts.params import (
    ApiToken,
    AuditEntry,
    AuditListParams,
    AuditWriteParams,
    DeviceCreateParams,
    Grant,
    Grants,
    LoginAttempt,
    Session,
    SessionCreateParams,
    TokenCreateParams,
    User,
    UserCreateParams,
    UserUpdateParams,
)
from qinglong.storage.accounts.second_factors import SecondFactorRows

R = TypeVar("R")


def _opt(value: Any) -> int | None:
    return None if value is None else int(value)


def user_from_row(row: Mapping[str, Any]) -> User:
    role = row["role"] if row["all_projects"] else "none"
    return User(username=row["username"], role=role, password_hash=row["password_hash"],
                created_at_ms=int(row["created_at_ms"]), updated_at_ms=int(row["updated_at_ms"]),
                disabled_at_ms=_opt(row["disabled_at_ms"]),
                second_factor=row["second_factor"])


def session_from_row(row: Mapping[str, Any]) -> Session:
    return Session(id_digest=str(row["id_digest"]).strip(), username=row["username"],
                   role=row["role"], created_at_ms=int(row["created_at_ms"]),
                   expires_at_ms=int(row["expires_at_ms"]),
                   idle_expires_at_ms=int(row["idle_expires_at_ms"]),
                   seen_at_ms=int(row["seen_at_ms"]), method=row["method"])


def token_from_row(row: Mapping[str, Any]) -> ApiToken:
    return ApiToken(id=row["id"], username=row["username"], role=row["role"],
                    user_disabled=row["user_disabled_at_ms"] is not None, name=row["name"],
                    scope=row["scope"], secret_digest=str(row["secret_digest"]).strip(),
                    created_at_ms=int(row["created_at_ms"]),
                    expires_at_ms=_opt(row["expires_at_ms"]),
                    last_used_at_ms=_opt(row["last_used_at_ms"]),
                    revoked_at_ms=_opt(row["revoked_at_ms"]), revoked_by=row["revoked_by"],
                    projects=None if row["projects"] is None
                    else tuple(str(row["projects"]).split(",")))


def grant_from_row(row: Mapping[str, Any]) -> Grant:
    return Grant(username=row["username"], project_id=row["project_id"], role=row["role"],
                 granted_by=row["granted_by"], granted_at_ms=int(row["granted_at_ms"]))


def audit_from_row(row: Mapping[str, Any]) -> AuditEntry:
    detail = row["detail"]
    if not isinstance(detail, dict):  # PostgreSQL jsonb arrives decoded, SQLite as text
        detail = json.loads(detail)
    return AuditEntry(id=int(row["id"]), at_ms=int(row["at_ms"]), actor=row["actor"],
                      via=row["via"], token_id=row["token_id"], action=row["action"],
                      project_id=row["project_id"], target=row["target"], detail=detail,
                      client=row["client"])


class AccountRows(SecondFactorRows):
    """One unit of account work in ``tx``, at one reading of the store's clock."""

    # -- users ---------------------------------------------------------------------------

    def _insert_new(self, what: str, read: Callable[[], R | None], insert: str,
                    params: Mapping[str, Any]) -> R:
        """Insert a row that must not exist yet (else Conflict naming ``what``), and read it
        back as its record."""
        if read() is not None:
            raise Conflict(f"{what} already exists")
        self._run(insert, params)
        created = read()
        assert created is not None
        return created

    def _user_exists(self, username: str) -> None:
        if self.user_get(username) is None:
            raise NotFound("user", username)

    def user_create(self, params: UserCreateParams) -> User:
        return self._insert_new(f"user {params.username!r}",
                                lambda: self.user_get(params.username), "account_user_insert",
                                {"username": params.username, "role": params.role,
                                 "password_hash": params.password_hash, "now_ms": self.now_ms})

    def user_get(self, username: str) -> User | None:
        row = self._one("account_user_get", {"username": username})
        return None if row is None else user_from_row(row)

    def user_list(self) -> list[User]:
        return [user_from_row(row) for row in self._all("account_user_list")]

    def user_update(self, params: UserUpdateParams) -> User:
        changed = self._run("account_user_update", {
            "username": params.username, "role": params.role,
            "password_hash": params.password_hash, "disabled": params.disabled,
            "now_ms": self.now_ms})
        if changed == 0:
            raise NotFound("user", params.username)
        if params.disabled or params.password_hash is not None:
            # what the old password (or the enabled user) proved dies with it: re-enabling
            # the user or the old password coming back revives none of it
            self._run("account_sessions_end_for_user",
                      {"username": params.username, "now_ms": self.now_ms})
            self._run("account_tokens_revoke_for_user",
                      {"username": params.username, "now_ms": self.now_ms,
                       "by": params.by or params.username})
            self._run("account_devices_end_for_user", {"username": params.username})
        updated = self.user_get(params.username)
        assert updated is not None
        return updated

    def user_rehash(self, username: str, old_hash: str, new_hash: str) -> None:
        self._run("account_user_rehash",
                  {"username": username, "old_hash": old_hash, "new_hash": new_hash})

    # -- sessions ------------------------------------------------------------------------

    def session_create(self, params: SessionCreateParams) -> Session:
        self._user_exists(params.username)
        self._run("account_session_insert", {
            "id_digest": params.id_digest, "username": params.username,
            "lifetime_ms": params.lifetime_ms, "idle_ms": params.idle_ms,
            "client": params.client, "method": params.method, "now_ms": self.now_ms})
        found = self._one("account_session_get",
                          {"id_digest": params.id_digest, "now_ms": self.now_ms})
        if found is None:
            raise NotFound("user", params.username)  # disabled meanwhile
        return session_from_row(found)

    def session_get(self, id_digest: str, touch_after_ms: int, idle_ms: int) -> Session | None:
        row = self._one("account_session_get", {"id_digest": id_digest, "now_ms": self.now_ms})
        if row is None:
            return None
        session = replace(session_from_row(row), grants=self.grants_of(row["username"]))
        if self.now_ms - session.seen_at_ms >= touch_after_ms:
            self._run("account_session_touch", {"id_digest": id_digest, "now_ms": self.now_ms,
                                                "idle_ms": idle_ms})
        return session

    def session_end(self, id_digest: str) -> None:
        self._run("account_session_end", {"id_digest": id_digest, "now_ms": self.now_ms})

    # -- tokens --------------------------------------------------------------------------

    def token_create(self, params: TokenCreateParams) -> ApiToken:
        self._user_exists(params.username)
        return self._insert_new(f"token id {params.id!r}", lambda: self.token_get(params.id),
                                "account_token_insert",
                                {"id": params.id, "username": params.username,
                                 "name": params.name, "scope": params.scope,
                                 "secret_digest": params.secret_digest,
                                 "lifetime_ms": params.lifetime_ms, "now_ms": self.now_ms,
                                 "projects": None if params.projects is None
                                 else ",".join(params.projects)})

    def token_get(self, token_id: str) -> ApiToken | None:
        row = self._one("account_token_get", {"id": token_id})
        if row is None:
            return None
        return replace(token_from_row(row), grants=self.grants_of(row["username"]))

    def token_used(self, token_id: str, touch_after_ms: int) -> None:
        self._run("account_token_used", {"id": token_id, "now_ms": self.now_ms,
                                         "touch_after_ms": touch_after_ms})

    def token_list(self, username: str | None) -> list[ApiToken]:
        return [token_from_row(row) for row in
                self._all("account_token_list", {"username": username})]

    def token_revoke(self, token_id: str, by: str) -> ApiToken:
        if self.token_get(token_id) is None:
            raise NotFound("token", token_id)
        self._run("account_token_revoke", {"id": token_id, "by": by, "now_ms": self.now_ms})
        revoked = self.token_get(token_id)
        assert revoked is not None
        return revoked

    # -- per-project roles ---------------------------------------------------------------

    def grants_of(self, username: str) -> Grants:
        return tuple((row["project_id"], row["role"]) for row in
                     self._all("account_grants_of_user", {"username": username}))

    def grants_on(self, project_id: str) -> list[Grant]:
        return [grant_from_row(row) for row in
                self._all("account_grants_on_project", {"project_id": project_id})]

    def grant_put(self, username: str, project_id: str, role: str, by: str) -> Grant:
        self._user_exists(username)
        if self._one("project_get", {"id": project_id}) is None:
            raise NotFound("project", project_id)
        self._run("account_grant_put", {"username": username, "project_id": project_id,
                                        "role": role, "by": by, "now_ms": self.now_ms})
        row = self._one("account_grant_get", {"username": username, "project_id": project_id})
        assert row is not None
        return grant_from_row(row)

    def grant_delete(self, username: str, project_id: str) -> bool:
        """Take a grant back; False when there was none."""
        return self._run("account_grant_delete",
                         {"username": username, "project_id": project_id}) > 0

    # -- failed logins and login devices -------------------------------------------------

    def login_attempt(self, limits: tuple[tuple[str, int], ...], window_ms: int) -> LoginAttempt:
        subjects = sorted({subject for subject, _ in limits})
        for subject in subjects:  # always in one order: two attempts never wait on each other
            self._one("account_login_lock", {"subject": subject})
        held = self._one("account_login_prune_lock", {})
        if held is not None and held["held"]:
            self._run("account_login_failures_prune", {"before_ms": self.now_ms - window_ms})
        wait_ms = 0
        for subject, limit in limits:
            row = self._one("account_login_failure_count",
                            {"subject": subject, "since_ms": self.now_ms - window_ms})
            if row is not None and int(row["n"]) >= limit:
                wait_ms = max(wait_ms, int(row["oldest_ms"]) + window_ms - self.now_ms)
        if wait_ms > 0:
            return LoginAttempt(retry_after_ms=wait_ms)
        ids = []
        for subject in subjects:
            ids.append(self._new_id())
            self._run("account_login_failure_insert",
                      {"id": ids[-1], "subject": subject, "now_ms": self.now_ms})
        return LoginAttempt(failure_ids=tuple(ids))

    def login_attempt_settle(self, failure_ids: tuple[str, ...], clear: str | None) -> None:
        for failure_id in failure_ids:
            self._run("account_login_failure_delete", {"id": failure_id})
        if clear is not None:
            self._run("account_login_failures_clear", {"subject": clear})

    def device_valid(self, id_digest: str, username: str) -> bool:
        return self._one("account_device_get", {"id_digest": id_digest, "username": username,
                                                "now_ms": self.now_ms}) is not None

    def device_create(self, params: DeviceCreateParams) -> None:
        self._user_exists(params.username)
        self._run("account_device_insert", {
            "id_digest": params.id_digest, "username": params.username,
            "lifetime_ms": params.lifetime_ms, "now_ms": self.now_ms})
        self._run("account_devices_trim", {"username": params.username, "keep": params.keep,
                                           "now_ms": self.now_ms})

    # -- the audit log -------------------------------------------------------------------

    def audit_write(self, params: AuditWriteParams) -> AuditEntry:
        row = self._one("account_audit_insert", {
            "actor": params.actor, "via": params.via, "token_id": params.token_id,
            "action": params.action, "project_id": params.project_id, "target": params.target,
            "detail": json.dumps(dict(params.detail), sort_keys=True, separators=(",", ":")),
            "client": params.client, "now_ms": self.now_ms})
        assert row is not None
        return AuditEntry(id=int(row["id"]), at_ms=self.now_ms, actor=params.actor,
                          via=params.via, token_id=params.token_id, action=params.action,
                          project_id=params.project_id, target=params.target,
                          detail=dict(params.detail), client=params.client)

    def audit_list(self, params: AuditListParams) -> list[AuditEntry]:
        before_id = params.before_id
        if before_id is not None and not 0 <= before_id <= MAX_JSON_INT:  # a 64-bit row id
            raise InvalidInput("cursor", "is not a cursor this API gave out")
        return [audit_from_row(row) for row in self._all("account_audit_list", {
            "before_id": before_id, "limit": params.limit, "actor": params.actor,
            "action": params.action, "project_id": params.project_id,
            "since_ms": params.since_ms, "until_ms": params.until_ms})]
