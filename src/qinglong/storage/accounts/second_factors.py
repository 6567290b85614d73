"""The second factor's statements and records in the account store (migrations
0025_totp / 0024_totp): a user's TOTP secret as sealed (the store never sees it plain),
pending until enabled; the newest time step a code was accepted for; recovery code digests.

- ``second_factor_begin`` replaces a pending second factor (a new enrolment) and refuses
  (Conflict) while one is on.
- ``second_factor_enable`` turns a pending one on at the confirming code's step and keeps
  the recovery code digests it is given; False when there is none pending.
- ``second_factor_step_use`` accepts a code's step only when it is later than every step
  accepted before (compare and set in one statement: a code is good once, even when two
  logins send it at the same moment).
- ``recovery_code_use`` uses a recovery code once (True) of a second factor that is on.
- ``second_factor_reseal_all`` seals every second factor again as ``reseal`` says (a new key
  id and sealed text; None leaves it), in one transaction: a new secret key
  (`ql user reseal-second-factors`).
- ``second_factor_remove`` forgets a user's second factor, pending or on (True when there
  was one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from qinglong.errors import Conflict, NotFound
from qinglong.storage.units import TxUnit


@dataclass(frozen=True, slots=True, kw_only=True)
class SecondFactor:
    username: str
    key_id: str  # the keyring key the secret is sealed under
    sealed: str
    last_step: int  # -1: no code accepted yet
    created_at_ms: int
    enabled_at_ms: int | None  # None: pending (enrolment not confirmed)
    codes_left: int  # recovery codes not used yet

    @property
    def enabled(self) -> bool:
        return self.enabled_at_ms is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class SecondFactorBeginParams:
    username: str
    key_id: str
    sealed: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SecondFactorEnableParams:
    username: str
    step: int  # the step of the code that confirmed it
    code_digests: tuple[str, ...]  # the recovery codes', SHA-256


def second_factor_from_row(row: Mapping[str, Any]) -> SecondFactor:
    enabled = row["enabled_at_ms"]
    return SecondFactor(username=row["username"], key_id=str(row["key_id"]).strip(),
                        sealed=row["sealed"], last_step=int(row["last_step"]),
                        created_at_ms=int(row["created_at_ms"]),
                        enabled_at_ms=None if enabled is None else int(enabled),
                        codes_left=int(row["codes_left"]))


class SecondFactorRows(TxUnit):
    """The second factor's part of one unit of account work."""

    def second_factor_get(self, username: str) -> SecondFactor | None:
        row = self._one("second_factor_get", {"username": username})
        return None if row is None else second_factor_from_row(row)

    def second_factor_begin(self, params: SecondFactorBeginParams) -> SecondFactor:
        if self._one("account_user_get", {"username": params.username}) is None:
            raise NotFound("user", params.username)
        found = self.second_factor_get(params.username)
        if found is not None and found.enabled:
            raise Conflict(f"{params.username} already has a second factor: turn it off first")
        self._run("second_factor_delete", {"username": params.username})
        self._run("second_factor_insert", {"username": params.username,
                                           "key_id": params.key_id, "sealed": params.sealed,
                                           "now_ms": self.now_ms})
        begun = self.second_factor_get(params.username)
        assert begun is not None
        return begun

    def second_factor_enable(self, params: SecondFactorEnableParams) -> bool:
        if self._run("second_factor_enable", {"username": params.username,
                                              "step": params.step, "now_ms": self.now_ms}) == 0:
            return False
        for code_digest in params.code_digests:
            self._run("recovery_code_insert", {"username": params.username,
                                               "code_digest": code_digest})
        return True

    def second_factor_step_use(self, username: str, step: int) -> bool:
        return self._run("second_factor_step_use", {"username": username, "step": step}) == 1

    def recovery_code_use(self, username: str, code_digest: str) -> bool:
        return self._run("recovery_code_use", {"username": username, "code_digest": code_digest,
                                               "now_ms": self.now_ms}) == 1

    def second_factor_reseal_all(
            self, reseal: Callable[[SecondFactor], tuple[str, str] | None]) -> int:
        count = 0
        for row in self._all("second_factor_all", {}):
            found = second_factor_from_row(row)
            again = reseal(found)
            if again is not None:
                count += self._run("second_factor_reseal", {
                    "username": found.username, "old_key_id": found.key_id,
                    "key_id": again[0], "sealed": again[1]})
        return count

    def second_factor_remove(self, username: str) -> bool:
        return self._run("second_factor_delete", {"username": username}) > 0
