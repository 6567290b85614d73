"""The second factor of password logins (TOTP, docs/security.md#second-factor) as the
surfaces ask for it: enrol (a pending secret, shown once), confirm with a code (it is on; 10
recovery codes, shown once), turn it off with a code or a recovery code, an admin's reset,
the check a login makes after the right password, and whether a session must enrol first.

One policy for both ways in: qinglong's second factor guards password logins only. A
single-sign-on login is never asked for it (the provider's login, and the multi-factor the
operator requires there, are that session's second factor), so a single-sign-on session is
never made to enrol one either, whatever ``--require-second-factor`` says.

Time is the injected clock's. The secret is sealed with the project keyring (the key in
``QL_SECRET_KEY`` or ``QL_SECRET_KEY_FILE``), bound to the user name; with no key, enrolment
is refused, naming the variable: a secret kept in plain text would let a copy of the database
make codes. Recovery codes are kept as digests (``service.totp``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from qinglong import keyring
from qinglong.clock import Clock
from qinglong.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    RateLimited,
    SecondFactorRequired,
    SecretKeyMismatch,
)
from qinglong.keyring import SecretKey, key_from_environment
from qinglong.service import totp
from qinglong.service.views.second_factor import (
    EnrolmentView,
    RecoveryCodesView,
    SecondFactorView,
)
from qinglong.storage.accounts import AccountStore
from qinglong.storage.accounts.params import PASSWORD_SESSION, SSO_SESSION
from qinglong.storage.accounts.second_factors import (
    SecondFactor,
    SecondFactorBeginParams,
    SecondFactorEnableParams,
)

ROLE_RANK = {"viewer": 1, "operator": 2, "admin": 3}
ENFORCE_CHOICES = ("viewer", "operator", "admin")
TURN_OFF_LIMIT = 5  # wrong codes per user, when turning it off, in TURN_OFF_WINDOW_MS
TURN_OFF_WINDOW_MS = 15 * 60_000


Grants = tuple[tuple[str, str], ...]  # (project, role): a user's per-project roles


@dataclass(frozen=True, slots=True)
class SecondFactorPolicy:
    """Which roles must log in with a second factor: ``required_from`` and every role above
    it (None: nobody must). A user's highest role counts: the one on every project, or one a
    project grants (a project's admin is covered by ``admin``)."""

    required_from: str | None = None

    def __post_init__(self) -> None:
        if self.required_from is not None and self.required_from not in ROLE_RANK:
            raise InvalidInput("require-second-factor",
                               "must be one of " + ", ".join(ENFORCE_CHOICES))

    def applies_to(self, role: str, grants: Grants = ()) -> bool:
        if self.required_from is None:
            return False
        highest = max(ROLE_RANK.get(r, 0) for r in (role, *(g for _, g in grants)))
        return highest >= ROLE_RANK[self.required_from]


def _context(username: str) -> bytes:
    return b"qinglong second factor\x00" + username.encode()


class SecondFactors:
    def __init__(self, store: AccountStore, clock: Clock, *,
                 policy: SecondFactorPolicy | None = None,
                 key: Callable[[], SecretKey | None] = key_from_environment) -> None:
        self._store = store
        self._clock = clock
        self.policy = policy or SecondFactorPolicy()
        self._key = key

    # -- what a user has -----------------------------------------------------------------

    def view(self, username: str, role: str, grants: Grants = (),
             method: str | None = None) -> SecondFactorView:
        """The user's state; ``required`` as the session made by ``method`` is held to it
        (never for single sign-on: see ``enrolment_needed``)."""
        found = self._store.second_factor_get(username)
        enabled = found is not None and found.enabled
        return SecondFactorView(
            enabled=enabled, pending=found is not None and not found.enabled,
            required=method != SSO_SESSION and self.policy.applies_to(role, grants),
            recovery_codes_left=found.codes_left if found is not None and enabled else 0)

    def enrolment_needed(self, username: str, role: str, grants: Grants = (),
                         method: str | None = PASSWORD_SESSION) -> bool:
        """Whether a password session of this user may do nothing but enrol: their role (or
        a project's grant) must have a second factor and they have none on. Never for a
        single-sign-on session (``method`` sso): its login never asks for qinglong's code,
        so one enrolled would guard nothing there; the provider's multi-factor does."""
        if method == SSO_SESSION or not self.policy.applies_to(role, grants):
            return False
        found = self._store.second_factor_get(username)
        return found is None or not found.enabled

    # -- enrolling and turning off -------------------------------------------------------

    def begin(self, username: str) -> EnrolmentView:
        """A new pending secret (replacing a pending one): its URI and base32 text, shown
        this once. It is not on until ``confirm``."""
        key = keyring.require(self._key(), "a second factor (its secret is sealed with it)")
        secret = totp.new_secret()
        self._store.second_factor_begin(SecondFactorBeginParams(
            username=username, key_id=key.key_id,
            sealed=keyring.seal(key, secret.encode(), _context(username))))
        return EnrolmentView(secret=secret, otpauth_uri=totp.provisioning_uri(secret, username),
                             digits=totp.DIGITS, period_s=totp.STEP_S)

    def confirm(self, username: str, otp: str) -> RecoveryCodesView:
        """Turn the pending second factor on with a current code: its recovery codes, shown
        this once."""
        found = self._store.second_factor_get(username)
        if found is None or found.enabled:
            raise Conflict("no enrolment is pending: start one first" if found is None else
                           f"{username}'s second factor is already on")
        step = totp.matching_step(self._secret(found), otp, self._clock.now_ms(),
                                  found.last_step)
        if step is None:
            raise InvalidInput("otp", "is not the current code of the authenticator app (check "
                                      "the phone's clock, or start the enrolment again)")
        codes = totp.new_recovery_codes()
        if not self._store.second_factor_enable(SecondFactorEnableParams(
                username=username, step=step,
                code_digests=tuple(totp.recovery_digest(code) for code in codes))):
            raise Conflict("the enrolment changed meanwhile: start it again")
        return RecoveryCodesView(recovery_codes=codes)

    def turn_off(self, username: str, otp: str | None, recovery_code: str | None) -> None:
        """Turn the user's own second factor off, proven with a current code or an unused
        recovery code (a wrong one: 422, nothing changes)."""
        found = self._store.second_factor_get(username)
        if found is None or not found.enabled:
            raise Conflict(f"{username} has no second factor on")
        subject = f"second-factor-off:{username}"
        attempt = self._store.login_attempt(((subject, TURN_OFF_LIMIT),), TURN_OFF_WINDOW_MS)
        if attempt.retry_after_ms is not None:  # a stolen session cannot guess codes
            raise RateLimited("too many wrong codes; try again later",
                              max(1, -(-attempt.retry_after_ms // 1000)))
        if not self._proven(found, otp, recovery_code):  # the failure stays counted
            raise InvalidInput("recovery_code" if otp is None else "otp",
                               "is wrong or was used already")
        self._store.login_attempt_settle(attempt.failure_ids, subject)
        self._store.second_factor_remove(username)

    def reset(self, username: str) -> tuple[bool, SecondFactorView]:
        """An admin's reset of another user's second factor (pending or on): whether they
        had one, and their state now. They may then log in with the password alone (and must
        enrol again where their role requires it)."""
        user = self._store.user_get(username)
        if user is None:
            raise NotFound("user", username)
        removed = self._store.second_factor_remove(username)
        return removed, self.view(username, user.role, self._store.grants_of(username))

    def reseal(self, old: SecretKey) -> int:
        """Seal every second factor under ``old`` again under this process's key, in one
        transaction (after `ql secret rotate-key`): how many were. One under neither key is
        refused, changing nothing."""
        new = keyring.require(self._key(), "sealing the second factors again")

        def again(found: SecondFactor) -> tuple[str, str] | None:
            if found.key_id == new.key_id:
                return None
            what = f"{found.username}'s second factor"
            if found.key_id != old.key_id:
                raise SecretKeyMismatch("old-key-file", f"{what} is sealed under key "
                                                        f"{found.key_id}, not {old.key_id}")
            plain = keyring.open_sealed(old, found.key_id, found.sealed,
                                        _context(found.username), what)
            return new.key_id, keyring.seal(new, plain, _context(found.username))

        return self._store.second_factor_reseal_all(again)

    # -- logging in ----------------------------------------------------------------------

    def check_login(self, username: str, otp: object, recovery_code: object) -> None:
        """After the right password: nothing when the user has no second factor on; else
        SecondFactorRequired unless ``otp`` or ``recovery_code`` proves it (and is used up)."""
        found = self._store.second_factor_get(username)
        if found is None or not found.enabled:
            return
        if otp is None and recovery_code is None:
            raise SecondFactorRequired("this account has a second factor: send the 6-digit "
                                       "code of the authenticator app as otp (or a recovery "
                                       "code as recovery_code) with the password")
        if not self._proven(found, otp if isinstance(otp, str) else None,
                            recovery_code if isinstance(recovery_code, str) else None):
            raise SecondFactorRequired("the one-time code or recovery code is wrong or was "
                                       "used already")

    # -- the parts -----------------------------------------------------------------------

    def _proven(self, found: SecondFactor, otp: str | None, recovery_code: str | None) -> bool:
        """Whether the code is right, using it up (a code's step, a recovery code)."""
        if otp is not None:
            step = totp.matching_step(self._secret(found), otp, self._clock.now_ms(),
                                      found.last_step)
            return step is not None and self._store.second_factor_step_use(found.username,
                                                                           step)
        if recovery_code is not None and totp.normal_recovery_code(recovery_code) is not None:
            return self._store.recovery_code_use(found.username,
                                                 totp.recovery_digest(recovery_code))
        return False

    def _secret(self, found: SecondFactor) -> str:
        key = keyring.require(self._key(), f"{found.username}'s second factor")
        return keyring.open_sealed(key, found.key_id, found.sealed, _context(found.username),
                                   f"{found.username}'s second factor").decode("ascii")


def session_only(via: str) -> None:
    """Enrolling and turning the second factor off take a password session: a token (a
    separate credential) cannot change how its user logs in."""
    if via != "session":
        raise Forbidden("log in with the password to change your second factor (an API token "
                        "cannot)")
