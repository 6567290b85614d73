"""The second factor's arithmetic (service.totp) at times a fake clock gives: one step either
side of now, a code good once (replay), recovery codes in one form and kept as digests."""

from __future__ import annotations

import pyotp
import pytest

from qinglong.errors import InvalidInput
from qinglong.service import totp
from qinglong.service.second_factor import SecondFactorPolicy
from qinglong.testing import FakeClock

T0 = 1_800_000_000_000  # a step boundary: 1.8e9 s is a multiple of 30
SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"


def test_a_code_is_good_one_step_either_side_of_now_and_no_further() -> None:
    clock = FakeClock(T0)
    code = totp.code_at(SECRET, clock.now_ms())
    step = totp.step_of(T0)
    assert totp.matching_step(SECRET, code, clock.now_ms(), totp.NO_STEP) == step
    clock.advance(29_999)  # the same step
    assert totp.matching_step(SECRET, code, clock.now_ms(), totp.NO_STEP) == step
    clock.advance(30_000)  # the next step: one step late is forgiven
    assert totp.matching_step(SECRET, code, clock.now_ms(), totp.NO_STEP) == step
    clock.advance(1)  # two steps late
    assert totp.matching_step(SECRET, code, clock.now_ms(), totp.NO_STEP) is None
    early = FakeClock(T0 - 30_000)  # the phone's clock ahead by a step
    assert totp.matching_step(SECRET, code, early.now_ms(), totp.NO_STEP) == step
    assert totp.matching_step(SECRET, code, T0 - 30_001, totp.NO_STEP) is None


def test_a_code_once_used_is_refused_and_so_is_an_older_one() -> None:
    now = T0 + 30_000
    previous = totp.code_at(SECRET, T0)
    current = totp.code_at(SECRET, now)
    used = totp.matching_step(SECRET, current, now, totp.NO_STEP)
    assert used == totp.step_of(now)
    assert totp.matching_step(SECRET, current, now, used) is None  # replayed
    assert totp.matching_step(SECRET, previous, now, used) is None  # older than one used
    following = totp.code_at(SECRET, now + 30_000)
    assert totp.matching_step(SECRET, following, now, used) == used + 1  # a later one is fine


def test_pyotp_agrees_and_malformed_codes_match_nothing() -> None:
    assert totp.code_at(SECRET, T0) == pyotp.TOTP(SECRET).at(T0 // 1000)
    for code in ("", "12345", "1234567", "abcdef", " 12345", "１２３４５６"):
        assert totp.matching_step(SECRET, code, T0, totp.NO_STEP) is None


def test_a_new_secret_and_its_uri() -> None:
    secret = totp.new_secret()
    assert len(secret) == 32 and secret != totp.new_secret()
    uri = totp.provisioning_uri(secret, "ann@example.org")
    assert uri.startswith("otpauth://totp/qinglong:ann%40example.org?")
    assert f"secret={secret}" in uri and "issuer=qinglong" in uri


def test_recovery_codes_are_ten_random_codes_read_in_any_form() -> None:
    codes = totp.new_recovery_codes()
    assert len(codes) == len(set(codes)) == totp.RECOVERY_CODES == 10
    code = codes[0]
    assert len(code) == 19 and code.count("-") == 3
    digest = totp.recovery_digest(code)
    assert len(digest) == 64 and code.replace("-", "") not in digest
    assert totp.recovery_digest(code.upper().replace("-", " ")) == digest
    assert totp.normal_recovery_code("not a code") is None
    assert totp.normal_recovery_code(code + "a") is None


def test_the_policy_names_a_role_and_covers_the_roles_above_it() -> None:
    policy = SecondFactorPolicy("operator")
    assert [policy.applies_to(r) for r in ("none", "viewer", "operator", "admin")] == [
        False, False, True, True]
    assert not SecondFactorPolicy().applies_to("admin")
    with pytest.raises(InvalidInput):
        SecondFactorPolicy("root")


def test_a_project_grant_counts_toward_the_policy() -> None:
    policy = SecondFactorPolicy("admin")
    assert not policy.applies_to("viewer", (("a", "operator"),))
    assert policy.applies_to("none", (("a", "viewer"), ("b", "admin")))
