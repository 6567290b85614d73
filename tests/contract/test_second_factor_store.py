"""The second factor in the account store and its service (migrations 0025_totp /
0024_totp), on SQLite and on every PostgreSQL server (as ql_web): a pending secret until a
code confirms it, a code accepted once even when two logins send it at once, recovery codes
each usable once, and the secret sealed under the keyring's key (never kept plain)."""

from __future__ import annotations

import threading

import pytest

from qinglong.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    SecondFactorRequired,
    SecretKeyMismatch,
    SecretKeyMissing,
)
from qinglong.keyring import SecretKey
from qinglong.service import totp
from qinglong.service.second_factor import SecondFactorPolicy, SecondFactors
from qinglong.storage.accounts import AccountStore
from qinglong.storage.accounts.params import UserCreateParams
from qinglong.storage.accounts.second_factors import SecondFactorBeginParams
from qinglong.testing import FakeClock
from tests.contract.conftest import Backend

KEY = SecretKey(b"k" * 32)
OTHER_KEY = SecretKey(b"o" * 32)
T0 = 1_800_000_000_000


@pytest.fixture
def accounts(backend: Backend) -> AccountStore:
    store = AccountStore(backend.database("ql_web", "contract-web"))
    for name, role in (("ann", "admin"), ("bob", "viewer")):
        store.user_create(UserCreateParams(username=name, role=role,
                                           password_hash="$argon2id$x"))
    return store


def _factors(accounts: AccountStore, clock: FakeClock, key: SecretKey | None = KEY,
             required_from: str | None = None) -> SecondFactors:
    return SecondFactors(accounts, clock, policy=SecondFactorPolicy(required_from),
                         key=lambda: key)


def _enrolled(factors: SecondFactors, clock: FakeClock, name: str = "ann") -> tuple[str, list[str]]:
    secret = factors.begin(name).secret
    codes = factors.confirm(name, totp.code_at(secret, clock.now_ms())).recovery_codes
    clock.advance(30_000)  # the next step: its code is unused
    return secret, codes


def test_enrolment_is_pending_until_confirmed_and_the_secret_is_sealed(
        accounts: AccountStore) -> None:
    clock = FakeClock(T0)
    factors = _factors(accounts, clock)
    started = factors.begin("ann")
    assert started.otpauth_uri.startswith("otpauth://totp/qinglong:ann?")
    stored = accounts.second_factor_get("ann")
    assert stored is not None and not stored.enabled and stored.key_id == KEY.key_id
    assert started.secret not in stored.sealed
    assert factors.view("ann", "admin").model_dump() == {
        "enabled": False, "pending": True, "required": False, "recovery_codes_left": 0}
    factors.check_login("ann", None, None)  # pending: the password alone still logs in
    with pytest.raises(InvalidInput):
        factors.confirm("ann", "000000" if totp.code_at(started.secret, T0) != "000000"
                        else "111111")
    again = factors.begin("ann")  # starting again replaces the pending secret
    assert again.secret != started.secret
    codes = factors.confirm("ann", totp.code_at(again.secret, T0)).recovery_codes
    assert len(codes) == 10
    assert factors.view("ann", "admin").recovery_codes_left == 10
    with pytest.raises(Conflict):
        factors.begin("ann")  # one is on: turn it off first
    with pytest.raises(Conflict):
        factors.confirm("ann", totp.code_at(again.secret, T0))
    with pytest.raises(NotFound):
        accounts.second_factor_begin(SecondFactorBeginParams(
            username="nobody", key_id=KEY.key_id, sealed="x"))


def test_a_login_needs_a_code_once_and_each_recovery_code_once(accounts: AccountStore) -> None:
    clock = FakeClock(T0)
    factors = _factors(accounts, clock)
    secret, codes = _enrolled(factors, clock)
    with pytest.raises(SecondFactorRequired):
        factors.check_login("ann", None, None)
    code = totp.code_at(secret, clock.now_ms())
    factors.check_login("ann", code, None)
    with pytest.raises(SecondFactorRequired):  # replayed within its window
        factors.check_login("ann", code, None)
    factors.check_login("ann", None, codes[3].upper())
    with pytest.raises(SecondFactorRequired):
        factors.check_login("ann", None, codes[3])
    with pytest.raises(SecondFactorRequired):
        factors.check_login("ann", None, "aaaa-bbbb-cccc-dddd")
    assert factors.view("ann", "admin").recovery_codes_left == 9
    factors.check_login("bob", None, None)  # no second factor: nothing asked


def test_two_logins_with_the_same_code_at_once_one_wins(backend: Backend) -> None:
    store = AccountStore(backend.database("ql_web", "contract-web-pool", pool=True))
    store.user_create(UserCreateParams(username="ann", role="admin", password_hash="$x"))
    clock = FakeClock(T0)
    factors = _factors(store, clock)
    secret, _ = _enrolled(factors, clock)
    code = totp.code_at(secret, clock.now_ms())
    start = threading.Barrier(6)
    won: list[bool] = []

    def login() -> None:
        start.wait(30)
        try:
            factors.check_login("ann", code, None)
            won.append(True)
        except SecondFactorRequired:
            won.append(False)

    threads = [threading.Thread(target=login) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(won) == [False] * 5 + [True]


def test_turning_off_needs_a_code_and_an_admin_resets(accounts: AccountStore) -> None:
    clock = FakeClock(T0)
    factors = _factors(accounts, clock)
    secret, codes = _enrolled(factors, clock)
    with pytest.raises(InvalidInput):
        factors.turn_off("ann", None, "aaaa-bbbb-cccc-dddd")
    factors.turn_off("ann", None, codes[0])
    assert accounts.second_factor_get("ann") is None
    with pytest.raises(Conflict):
        factors.turn_off("ann", totp.code_at(secret, clock.now_ms()), None)
    _enrolled(factors, clock)
    assert factors.reset("ann")[0] is True
    assert factors.reset("ann") == (False, factors.view("ann", "admin"))
    with pytest.raises(NotFound):
        factors.reset("nobody")


def test_no_key_refuses_enrolment_and_another_key_is_named(accounts: AccountStore) -> None:
    clock = FakeClock(T0)
    with pytest.raises(SecretKeyMissing) as refused:
        _factors(accounts, clock, key=None).begin("ann")
    assert "QL_SECRET_KEY" in refused.value.message
    assert accounts.second_factor_get("ann") is None
    _enrolled(_factors(accounts, clock), clock)
    with pytest.raises(SecretKeyMismatch):
        _factors(accounts, clock, key=OTHER_KEY).check_login("ann", "123456", None)


def test_enforcement_applies_from_a_role_until_enrolled(accounts: AccountStore) -> None:
    clock = FakeClock(T0)
    factors = _factors(accounts, clock, required_from="operator")
    assert factors.enrolment_needed("ann", "admin")
    assert not factors.enrolment_needed("bob", "viewer")
    factors.begin("ann")
    assert factors.enrolment_needed("ann", "admin")  # pending is not enough
    assert factors.view("ann", "admin").required
    _enrolled(factors, clock)
    assert not factors.enrolment_needed("ann", "admin")


def test_a_new_key_reseals_every_second_factor_in_one_go(accounts: AccountStore) -> None:
    clock = FakeClock(T0)
    secret, _ = _enrolled(_factors(accounts, clock), clock)
    _factors(accounts, clock).begin("bob")  # a pending one is resealed too
    moved = _factors(accounts, clock, key=OTHER_KEY)
    with pytest.raises(SecretKeyMismatch):  # the old key given is not theirs: nothing moves
        moved.reseal(SecretKey(b"x" * 32))
    assert moved.reseal(KEY) == 2
    stored = accounts.second_factor_get("ann")
    assert stored is not None and stored.key_id == OTHER_KEY.key_id
    moved.check_login("ann", totp.code_at(secret, clock.now_ms()), None)  # opens, and works
    assert moved.reseal(KEY) == 0  # already under the new key
    with pytest.raises(SecretKeyMismatch):
        _factors(accounts, clock).check_login("ann", "123456", None)
