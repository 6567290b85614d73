"""The arithmetic of the second factor (RFC 6238 TOTP, with pyotp), at a time given by the
caller's clock: a new secret and its ``otpauth://`` URI, which time step a code belongs to
(one step either side of now, never a step already used: a code is good once), and the
recovery codes (random, shown once, kept as SHA-256 digests). Nothing here reads a clock or
stores anything (``service.second_factor`` does)."""

from __future__ import annotations

import hashlib
import re
import secrets
from base64 import b32encode

import pyotp

STEP_S = 30  # seconds per code (what every authenticator app uses)
DIGITS = 6
WINDOW = 1  # steps either side of now: a phone's clock may be off by up to 30 s
RECOVERY_CODES = 10
ISSUER = "qinglong"
OTP_SHAPE = re.compile(r"^[0-9]{6}$")
RECOVERY_SHAPE = re.compile(r"^[a-z2-7]{16}$")  # 80 random bits, in base32
NO_STEP = -1  # the last used step of a second factor never used


def new_secret() -> str:
    """A random 160-bit secret in base32 (what an authenticator app is given)."""
    return pyotp.random_base32(32)


def provisioning_uri(secret: str, username: str, issuer: str = ISSUER) -> str:
    """The ``otpauth://totp/...`` URI an authenticator app reads (as a QR code or text)."""
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP_S).provisioning_uri(
        name=username, issuer_name=issuer)


def code_at(secret: str, now_ms: int) -> str:
    """The code of the step ``now_ms`` lies in (what the user's app shows then)."""
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP_S).at(now_ms // 1000)


def step_of(now_ms: int) -> int:
    return now_ms // 1000 // STEP_S


def matching_step(secret: str, code: str, now_ms: int, last_used_step: int) -> int | None:
    """The step within ``WINDOW`` of ``now_ms`` whose code ``code`` is, later than
    ``last_used_step`` (a code already used, or one older than it, is refused: replay);
    None when there is none."""
    if not OTP_SHAPE.fullmatch(code):
        return None
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_S)
    now = step_of(now_ms)
    found = None
    for step in range(now - WINDOW, now + WINDOW + 1):  # compare them all: no early exit
        if totp.verify(code, for_time=step * STEP_S) and step > last_used_step:
            found = step if found is None else found
    return found


def new_recovery_codes() -> list[str]:
    """``RECOVERY_CODES`` random codes as shown to the user: xxxx-xxxx-xxxx-xxxx."""
    codes = []
    for _ in range(RECOVERY_CODES):
        text = b32encode(secrets.token_bytes(10)).decode("ascii").lower()
        codes.append("-".join(text[i:i + 4] for i in range(0, 16, 4)))
    return codes


def normal_recovery_code(text: str) -> str | None:
    """A recovery code as typed (any case, with or without dashes and spaces) in its one
    form; None when it cannot be one."""
    plain = re.sub(r"[\s-]", "", text).lower()
    return plain if RECOVERY_SHAPE.fullmatch(plain) else None


def recovery_digest(code: str) -> str:
    """The SHA-256 digest kept in place of a recovery code (80 random bits: no salt or slow
    hash is needed to keep a stolen digest from giving the code back)."""
    plain = normal_recovery_code(code)
    assert plain is not None
    return hashlib.sha256(b"qinglong recovery code\x00" + plain.encode()).hexdigest()
