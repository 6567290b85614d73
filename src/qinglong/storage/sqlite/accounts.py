"""Accounts on SQLite (node clock): users, sessions, API tokens, failed logins, login devices,
the audit log."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from qinglong.clock import Clock
from qinglong.ids import new_uuid
from qinglong.storage.accounts import AccountRows
from qinglong.storage.ports import (
    ApiToken,
    AuditEntry,
    AuditWriteParams,
    DeviceCreateParams,
    LoginAttempt,
    Session,
    SessionCreateParams,
    TokenCreateParams,
    User,
    UserCreateParams,
    UserUpdateParams,
)
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase


class SqliteAccountStore:
    """The AccountStore port on SQLite."""

    def __init__(self, db: SqliteDatabase, clock: Clock, *,
                 new_id: Callable[[], str] = new_uuid) -> None:
        self._db = db
        self._clock = clock
        self._new_id = new_id

    @contextmanager
    def _write(self, action: str) -> Iterator[AccountRows]:
        with self._db.write(action) as conn:
            yield AccountRows(conn, QUERIES, self._clock.now_ms(), new_id=self._new_id)

    @contextmanager
    def _read(self, action: str) -> Iterator[AccountRows]:
        with self._db.read(action) as conn:
            yield AccountRows(conn, QUERIES, self._clock.now_ms(), new_id=self._new_id)

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def user_create(self, params: UserCreateParams) -> User:
        with self._write("create user") as rows:
            return rows.user_create(params)

    def user_get(self, username: str) -> User | None:
        with self._read("read user") as rows:
            return rows.user_get(username)

    def user_list(self) -> list[User]:
        with self._read("list users") as rows:
            return rows.user_list()

    def user_update(self, params: UserUpdateParams) -> User:
        with self._write("update user") as rows:
            return rows.user_update(params)

    def session_create(self, params: SessionCreateParams) -> Session:
        with self._write("create session") as rows:
            return rows.session_create(params)

    def session_get(self, id_digest: str, touch_after_ms: int, idle_ms: int) -> Session | None:
        with self._read("read session") as rows:
            session = rows.session_get(id_digest, touch_after_ms=2**62, idle_ms=idle_ms)
        if session is None or rows.now_ms - session.seen_at_ms < touch_after_ms:
            return session
        with self._write("touch session") as rows:  # seen again: a write, now and then
            return rows.session_get(id_digest, touch_after_ms, idle_ms)

    def session_end(self, id_digest: str) -> None:
        with self._write("end session") as rows:
            rows.session_end(id_digest)

    def token_create(self, params: TokenCreateParams) -> ApiToken:
        with self._write("create token") as rows:
            return rows.token_create(params)

    def token_get(self, token_id: str) -> ApiToken | None:
        with self._read("read token") as rows:
            return rows.token_get(token_id)

    def token_used(self, token_id: str, touch_after_ms: int) -> None:
        with self._write("record token use") as rows:
            rows.token_used(token_id, touch_after_ms)

    def token_list(self, username: str | None) -> list[ApiToken]:
        with self._read("list tokens") as rows:
            return rows.token_list(username)

    def token_revoke(self, token_id: str, by: str) -> ApiToken:
        with self._write("revoke token") as rows:
            return rows.token_revoke(token_id, by)

    def user_rehash(self, username: str, old_hash: str, new_hash: str) -> None:
        with self._write("rehash password") as rows:
            rows.user_rehash(username, old_hash, new_hash)

    def login_attempt(self, limits: tuple[tuple[str, int], ...],
                      window_ms: int) -> LoginAttempt:
        with self._write("admit a login attempt") as rows:
            return rows.login_attempt(limits, window_ms)

    def login_attempt_settle(self, failure_ids: tuple[str, ...], clear: str | None) -> None:
        with self._write("settle a login attempt") as rows:
            rows.login_attempt_settle(failure_ids, clear)

    def device_valid(self, id_digest: str, username: str) -> bool:
        with self._read("read login device") as rows:
            return rows.device_valid(id_digest, username)

    def device_create(self, params: DeviceCreateParams) -> None:
        with self._write("record login device") as rows:
            rows.device_create(params)

    def audit_write(self, params: AuditWriteParams) -> AuditEntry:
        with self._write("write audit entry") as rows:
            return rows.audit_write(params)

    def audit_list(self, before_id: int | None, limit: int) -> list[AuditEntry]:
        with self._read("list audit entries") as rows:
            return rows.audit_list(before_id, limit)
