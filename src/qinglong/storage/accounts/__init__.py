"""The account store: users, sessions, API tokens, login attempts and devices, and the
audit log, on the store's clock (the database's on PostgreSQL, where ql_web keeps them),
written once over the kernel. Each write is one READ COMMITTED (PostgreSQL) or ``BEGIN
IMMEDIATE`` (SQLite) transaction; each read one read.

- ``session_get`` returns a session only while it holds (not ended, neither expiry passed,
  its user enabled), and moves its idle expiry to ``idle_ms`` from now when it was last seen
  ``touch_after_ms`` ago or more (a busy session does not write on every request).
- ``token_get`` returns a token whatever its state (the caller judges it); ``token_used``
  records its use at most once per ``touch_after_ms``.
- ``login_attempt`` admits a login attempt only while every subject has fewer failures in
  the last ``window_ms`` than its limit, and then records one failure per subject in the
  same step (no two attempts can both be admitted by the same count); it forgets failures
  older than ``window_ms``. ``login_attempt_settle`` takes back the failures an attempt
  recorded and, with ``clear``, every failure of that subject (a right password).
- ``device_valid`` is true for an unexpired login device of that user; ``device_create``
  records one and keeps only the user's ``keep`` newest.
- ``user_rehash`` replaces a password hash only while it is still ``old_hash``, and ends
  nothing (the password is the same).
- ``audit_list`` pages newest first, before the entry ``before_id`` when given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from qinglong.ids import new_uuid
from qinglong.storage.accounts.params import (
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
from qinglong.storage.accounts.rows import AccountRows
from qinglong.storage.kernel import Database, Tx

T = TypeVar("T")


class AccountStore:
    def __init__(self, db: Database, *, new_id: Callable[[], str] = new_uuid) -> None:
        self._db = db
        self._new_id = new_id

    def _rows(self, tx: Tx) -> AccountRows:
        return AccountRows(tx, new_id=self._new_id)

    def _write(self, action: str, work: Callable[[AccountRows], T]) -> T:
        return self._db.write(action, lambda tx: work(self._rows(tx)), isolation="read committed")

    def _read(self, action: str, work: Callable[[AccountRows], T]) -> T:
        return self._db.read(action, lambda tx: work(self._rows(tx)))

    def now_ms(self) -> int:
        return self._db.now_ms()

    def user_create(self, params: UserCreateParams) -> User:
        return self._write("create user", lambda rows: rows.user_create(params))

    def user_get(self, username: str) -> User | None:
        return self._read("read user", lambda rows: rows.user_get(username))

    def user_list(self) -> list[User]:
        return self._read("list users", lambda rows: rows.user_list())

    def user_update(self, params: UserUpdateParams) -> User:
        return self._write("update user", lambda rows: rows.user_update(params))

    def user_rehash(self, username: str, old_hash: str, new_hash: str) -> None:
        self._write("rehash password", lambda rows: rows.user_rehash(username, old_hash, new_hash))

    def session_create(self, params: SessionCreateParams) -> Session:
        return self._write("create session", lambda rows: rows.session_create(params))

    def session_get(self, id_digest: str, touch_after_ms: int, idle_ms: int) -> Session | None:
        session, now = self._read("read session", lambda rows: (
            rows.session_get(id_digest, touch_after_ms=2**62, idle_ms=idle_ms), rows.now_ms))
        if session is None or now - session.seen_at_ms < touch_after_ms:
            return session
        return self._write("touch session",  # seen again: a write, now and then
                           lambda rows: rows.session_get(id_digest, touch_after_ms, idle_ms))

    def session_end(self, id_digest: str) -> None:
        self._write("end session", lambda rows: rows.session_end(id_digest))

    def token_create(self, params: TokenCreateParams) -> ApiToken:
        return self._write("create token", lambda rows: rows.token_create(params))

    def token_get(self, token_id: str) -> ApiToken | None:
        return self._read("read token", lambda rows: rows.token_get(token_id))

    def token_get_at(self, token_id: str) -> tuple[ApiToken | None, int]:
        """The token and the clock's now, in one read (authenticating a request)."""
        return self._read("read token", lambda rows: (rows.token_get(token_id), rows.now_ms))

    def token_used(self, token_id: str, touch_after_ms: int) -> None:
        self._write("record token use", lambda rows: rows.token_used(token_id, touch_after_ms))

    def token_list(self, username: str | None) -> list[ApiToken]:
        return self._read("list tokens", lambda rows: rows.token_list(username))

    def token_revoke(self, token_id: str, by: str) -> ApiToken:
        return self._write("revoke token", lambda rows: rows.token_revoke(token_id, by))

    def login_attempt(self, limits: tuple[tuple[str, int], ...],
                      window_ms: int) -> LoginAttempt:
        return self._write("admit a login attempt",
                           lambda rows: rows.login_attempt(limits, window_ms))

    def login_attempt_settle(self, failure_ids: tuple[str, ...], clear: str | None) -> None:
        self._write("settle a login attempt",
                    lambda rows: rows.login_attempt_settle(failure_ids, clear))

    def device_valid(self, id_digest: str, username: str) -> bool:
        return self._read("read login device", lambda rows: rows.device_valid(id_digest, username))

    def device_create(self, params: DeviceCreateParams) -> None:
        self._write("record login device", lambda rows: rows.device_create(params))

    def audit_write(self, params: AuditWriteParams) -> AuditEntry:
        return self._write("write audit entry", lambda rows: rows.audit_write(params))

    def audit_list(self, before_id: int | None, limit: int) -> list[AuditEntry]:
        return self._read("list audit entries", lambda rows: rows.audit_list(before_id, limit))
