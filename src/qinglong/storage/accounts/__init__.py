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
- ``audit_list`` pages newest first, before the entry ``before_id`` when given, keeping the
  entries of one actor, action (and the actions under it), project and time range when
  asked (``AuditListParams``).
- The second factor's verbs (``second_factor_*``, ``recovery_code_use``) are described in
  ``storage.accounts.second_factors``.
"""

from __future__ import annotations

from collections.abc import Callable

from qinglong.ids import new_uuid
from qinglong.storage.accounts.params import ApiToken, Session
from qinglong.storage.accounts.rows import AccountRows as Rows
from qinglong.storage.kernel import Database
from qinglong.storage.units import UnitStore, reads, writes


class AccountStore(UnitStore[Rows]):
    def __init__(self, db: Database, *, new_id: Callable[[], str] = new_uuid) -> None:
        super().__init__(db, Rows, new_id=new_id)

    user_create = writes("create user", Rows.user_create)
    user_get = reads("read user", Rows.user_get)
    user_list = reads("list users", Rows.user_list)
    user_update = writes("update user", Rows.user_update)
    user_rehash = writes("rehash password", Rows.user_rehash)

    session_create = writes("create session", Rows.session_create)

    def session_get(self, id_digest: str, touch_after_ms: int, idle_ms: int) -> Session | None:
        session, now = self._read("read session", lambda rows: (
            rows.session_get(id_digest, touch_after_ms=2**62, idle_ms=idle_ms), rows.now_ms))
        if session is None or now - session.seen_at_ms < touch_after_ms:
            return session
        return self._write("touch session",  # seen again: a write, now and then
                           lambda rows: rows.session_get(id_digest, touch_after_ms, idle_ms))

    session_end = writes("end session", Rows.session_end)

    token_create = writes("create token", Rows.token_create)
    token_get = reads("read token", Rows.token_get)

    def token_get_at(self, token_id: str) -> tuple[ApiToken | None, int]:
        """The token and the clock's now, in one read (authenticating a request)."""
        return self._read("read token", lambda rows: (rows.token_get(token_id), rows.now_ms))

    token_used = writes("record token use", Rows.token_used)
    token_list = reads("list tokens", Rows.token_list)
    token_revoke = writes("revoke token", Rows.token_revoke)

    login_attempt = writes("admit a login attempt", Rows.login_attempt)
    login_attempt_settle = writes("settle a login attempt", Rows.login_attempt_settle)

    device_valid = reads("read login device", Rows.device_valid)
    device_create = writes("record login device", Rows.device_create)

    grants_of = reads("read a user's grants", Rows.grants_of)
    grants_on = reads("read a project's grants", Rows.grants_on)
    grant_put = writes("grant a project role", Rows.grant_put)
    grant_delete = writes("take a project role back", Rows.grant_delete)

    audit_write = writes("write audit entry", Rows.audit_write)
    audit_list = reads("list audit entries", Rows.audit_list)

    second_factor_get = reads("read second factor", Rows.second_factor_get)
    second_factor_begin = writes("begin second factor enrolment", Rows.second_factor_begin)
    second_factor_enable = writes("turn second factor on", Rows.second_factor_enable)
    second_factor_step_use = writes("use a one-time code", Rows.second_factor_step_use)
    recovery_code_use = writes("use a recovery code", Rows.recovery_code_use)
    second_factor_remove = writes("remove second factor", Rows.second_factor_remove)
    second_factor_reseal_all = writes("seal second factors again",
                                      Rows.second_factor_reseal_all)
