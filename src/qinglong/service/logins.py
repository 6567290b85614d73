"""Checking a password at login: throttled before anything is hashed, bounded while hashing.

1. **Which limits apply.** A login that presents a device cookie of the user it names (set at
   an earlier successful login of that user, docs/security.md#login-rate-limiting) is limited
   per device; any other login per user name and per client address.
2. **Admitted or refused, before hashing.** One store step counts the recent failures of each
   subject and, when all are under their limit, records a failure for each at once; so however
   many attempts arrive together, at most ``limit`` of them are admitted per window, and the
   rest are refused with 429 and Retry-After without hashing anything.
3. **Hashing, bounded.** The admitted attempt takes a slot of the process's ``HashGate`` (a
   few hashes at once, a few waiting, the rest refused at once; its recorded failures are taken
   back then, since nothing was checked).
4. **The second factor.** A right password of a user whose second factor is on needs its
   one-time code or a recovery code too (``service.second_factor``): none, or a wrong or used
   one, answers 401 QL_SECOND_FACTOR_REQUIRED and leaves the attempt counted as a failure, as
   a wrong password does (so it is throttled alike).
5. **Settled.** A right password (and second factor) takes its recorded failures back and
   clears the failures of the subject that limited it; a wrong one leaves them counted. A
   wrong password, an unknown user and a disabled user cost one verification each and answer
   alike.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from qinglong.errors import RateLimited, Unauthenticated
from qinglong.service.hash_gate import HashGate
from qinglong.storage.accounts import AccountStore
from qinglong.storage.accounts.params import DeviceCreateParams, User

if TYPE_CHECKING:
    from qinglong.service.second_factor import SecondFactors

USERNAME = re.compile(r"^[a-z0-9][a-z0-9._@-]{0,63}$")
DEVICE_SHAPE = re.compile(r"^[A-Za-z0-9_-]{43}$")


@dataclass(frozen=True, slots=True)
class LoginLimits:
    window_ms: int = 15 * 60_000
    per_user: int = 5  # failures per user name (without a device cookie of that user)
    per_address: int = 30  # failures per client address (many names from one place)
    per_device: int = 5  # failures per device cookie
    device_lifetime_ms: int = 90 * 86_400_000
    devices_kept: int = 20  # per user; older devices are forgotten


@dataclass(frozen=True, slots=True)
class Verified:
    user: User
    new_device: str | None  # a device cookie to give the browser (None: it has a valid one)


def digest(secret: str) -> str:
    """The SHA-256 digest kept in place of a random secret (a session, a token, a device)."""
    return hashlib.sha256(secret.encode()).hexdigest()


class PasswordChecks:
    """The login's password check over ``store``, hashing with ``hasher`` inside ``gate``."""

    def __init__(self, store: AccountStore, hasher: PasswordHasher, gate: HashGate,
                 limits: LoginLimits, second: SecondFactors | None = None) -> None:
        self._store = store
        self._second = second
        self._hasher = hasher
        self._gate = gate
        self.limits = limits
        self._dummy_hash: str | None = None

    def verify(self, username: object, password: object, *, client: str | None,
               device: str | None, otp: object = None,
               recovery_code: object = None) -> Verified:
        name = username if isinstance(username, str) else ""
        known_name = USERNAME.fullmatch(name) is not None
        device_digest = digest(device) if device and DEVICE_SHAPE.fullmatch(device) else None
        trusted = (device_digest is not None and known_name
                   and self._store.device_valid(device_digest, name))
        if trusted:
            limits: tuple[tuple[str, int], ...] = ((f"device:{device_digest}",
                                                    self.limits.per_device),)
        else:
            # a name no user can have (it may hold what no database text can, such as NUL)
            # is counted under its digest
            counted = name[:64] if known_name else f"#{digest(name)[:32]}"
            limits = ((f"user:{counted}", self.limits.per_user),)
            if client:
                limits += ((f"addr:{client[:255]}", self.limits.per_address),)
        attempt = self._store.login_attempt(limits, self.limits.window_ms)
        if attempt.retry_after_ms is not None:
            wait_s = max(1, -(-attempt.retry_after_ms // 1000))
            raise RateLimited(f"too many failed logins; try again in {wait_s} s", wait_s)
        try:
            with self._gate.slot():
                user = self._store.user_get(name) if known_name else None
                right = self._check(user, password if isinstance(password, str) else "")
        except RateLimited:
            self._store.login_attempt_settle(attempt.failure_ids, None)  # nothing was checked
            raise
        if not right:
            raise Unauthenticated("wrong user name or password")
        assert user is not None
        if self._second is not None:  # refused: the attempt stays counted as a failure
            self._second.check_login(user.username, otp, recovery_code)
        self._store.login_attempt_settle(attempt.failure_ids, limits[0][0])
        if trusted:
            return Verified(user=user, new_device=None)
        secret = secrets.token_urlsafe(32)
        self._store.device_create(DeviceCreateParams(
            id_digest=digest(secret), username=user.username,
            lifetime_ms=self.limits.device_lifetime_ms, keep=self.limits.devices_kept))
        return Verified(user=user, new_device=secret)

    def _check(self, user: User | None, password: str) -> bool:
        """One argon2 verification, whoever asks (a stronger hash replaces an old one)."""
        if user is None or user.disabled_at_ms is not None:
            if self._dummy_hash is None:
                self._dummy_hash = self._hasher.hash(secrets.token_urlsafe(16))
            target, real = self._dummy_hash, False
        else:
            target, real = user.password_hash, True
        try:
            self._hasher.verify(target, password)
        except (VerificationError, InvalidHashError):
            return False
        if real and user is not None and self._hasher.check_needs_rehash(target):
            self._store.user_rehash(user.username, target, self._hasher.hash(password))
        return real
