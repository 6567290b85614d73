"""Issue 18, authentication, at the store and the service, on SQLite and on every PostgreSQL
server (as ql_web): concurrent login attempts are admitted exactly up to the limit (on a real
connection pool), the hash gate refuses beyond its queue without hashing and takes the attempt
back, a device cookie lets the real user past the lock on the name, a new password or disabling
revokes tokens and forgets devices, a rehash ends nothing, and a session in use never runs
idle.
"""

from __future__ import annotations

import threading

import pytest

from qinglong.errors import RateLimited, Unauthenticated
from qinglong.service.accounts import Accounts, SessionPolicy
from qinglong.service.hash_gate import HashGate
from qinglong.storage.accounts import AccountStore
from qinglong.storage.accounts.params import (
    DeviceCreateParams,
    SessionCreateParams,
    TokenCreateParams,
    UserCreateParams,
    UserUpdateParams,
)
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores
from tests.contract.conftest import Backend
from tests.support.auth_flows import PASSWORD, WRONG, CountingHasher, wait_for

HOUR = 3_600_000
D1, D2, D3, D4 = "1" * 64, "2" * 64, "3" * 64, "4" * 64


@pytest.fixture
def pooled(backend: Backend) -> AccountStore:
    """The store as `ql web` has it: on PostgreSQL a pool of 8 connections as ql_web."""
    return AccountStore(backend.database("ql_web", "auth-contract", pool=True))


def _user(store: AccountStore, name: str = "ann") -> None:
    store.user_create(UserCreateParams(username=name, role="operator",
                                       password_hash="$argon2id$x"))


def test_concurrent_attempts_are_admitted_exactly_up_to_the_limit(pooled: AccountStore) -> None:
    limits = (("user:ann", 5), ("addr:10.0.0.1", 30))
    start = threading.Barrier(24)
    admitted: list[bool] = []
    lock = threading.Lock()

    def attempt() -> None:
        start.wait(30)
        result = pooled.login_attempt(limits, window_ms=HOUR)
        with lock:
            admitted.append(result.admitted)

    threads = [threading.Thread(target=attempt) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(admitted) == [False] * 19 + [True] * 5, admitted.count(True)
    # the address recorded one failure per admitted attempt: 25 more fit, not 26
    other = (("user:bob", 100), ("addr:10.0.0.1", 30))
    assert [pooled.login_attempt(other, window_ms=HOUR).admitted for _ in range(26)] == \
        [True] * 25 + [False]


def test_the_gate_refuses_beyond_its_queue_without_hashing_and_takes_the_attempt_back(
        pooled: AccountStore) -> None:
    release = threading.Event()

    class Held(CountingHasher):
        def verify(self, hash: str | bytes, password: str | bytes) -> bool:
            if not release.is_set():
                with self._lock:
                    self.running += 1  # seen as running while it waits
                release.wait(60)
                with self._lock:
                    self.running -= 1
            return super().verify(hash, password)

    hasher = Held()
    gate = HashGate(slots=1, queue=1)
    accounts = Accounts(pooled, hasher=hasher, gate=gate)
    for name in ("ann", "bob", "cid"):
        accounts.user_create(name, "viewer", PASSWORD)
    outcomes: dict[str, str] = {}

    def login(name: str) -> None:
        try:
            accounts.login(name, WRONG, client=None)
        except Unauthenticated:
            outcomes[name] = "wrong"

    first = threading.Thread(target=login, args=("ann",))
    second = threading.Thread(target=login, args=("bob",))
    try:
        first.start()
        wait_for(lambda: hasher.running == 1, "ann's check to hold the only slot")
        second.start()
        wait_for(lambda: gate.waiting == 1, "bob to wait in the queue")
        with pytest.raises(RateLimited) as refused:
            accounts.login("cid", PASSWORD, client=None)
        assert refused.value.retry_after_s == 1 and "too many passwords" in refused.value.message
    finally:
        release.set()
        first.join(60)
        if second.is_alive() or second.ident is not None:
            second.join(60)
    assert outcomes == {"ann": "wrong", "bob": "wrong"}
    assert hasher.verified == 2  # cid's attempt was never hashed...
    for _ in range(5):  # ...nor counted: cid still has all 5 of its failures
        with pytest.raises(Unauthenticated):
            accounts.login("cid", WRONG, client=None)
    with pytest.raises(RateLimited):
        accounts.login("cid", PASSWORD, client=None)
    assert hasher.verified == 7


def test_a_device_that_logged_in_before_passes_the_lock_on_the_name(
        pooled: AccountStore) -> None:
    accounts = Accounts(pooled, hasher=CountingHasher())
    accounts.user_create("ann", "operator", PASSWORD)
    accounts.user_create("bob", "operator", PASSWORD)
    first = accounts.login("ann", PASSWORD, client="10.0.0.1")
    device = first.device
    assert device is not None
    for name in ("ann", "bob"):
        for _ in range(5):  # an attacker elsewhere burns the names' failures
            with pytest.raises(Unauthenticated):
                accounts.login(name, WRONG, client="203.0.113.9")
    with pytest.raises(RateLimited):
        accounts.login("ann", PASSWORD, client="10.0.0.1")  # no device: the name is locked
    again = accounts.login("ann", PASSWORD, client="10.0.0.1", device=device)
    assert again.device is None and again.view.username == "ann"
    with pytest.raises(RateLimited):  # ann's device is no key to another name
        accounts.login("bob", PASSWORD, client="10.0.0.1", device=device)
    for _ in range(5):  # a stolen device cookie: 5 guesses, then the device is locked too
        with pytest.raises(Unauthenticated):
            accounts.login("ann", WRONG, client="198.51.100.1", device=device)
    with pytest.raises(RateLimited):
        accounts.login("ann", PASSWORD, client="10.0.0.1", device=device)


def test_a_new_password_or_disabling_revokes_tokens_and_forgets_devices(
        pooled: AccountStore) -> None:
    _user(pooled)

    def token(token_id: str) -> None:
        pooled.token_create(TokenCreateParams(id=token_id, username="ann", name=token_id,
                                              scope="read", secret_digest=D1, lifetime_ms=None))

    def revoked_by(token_id: str) -> str | None:
        found = pooled.token_get(token_id)
        assert found is not None
        return found.revoked_by

    def device(digest: str) -> None:
        pooled.device_create(DeviceCreateParams(id_digest=digest, username="ann",
                                                lifetime_ms=HOUR, keep=20))

    token("aaaaaaaaaaaaaaaa")
    device(D1)
    assert pooled.device_valid(D1, "ann") and not pooled.device_valid(D1, "bob")
    pooled.user_update(UserUpdateParams(username="ann", role="viewer"))  # no credential
    assert revoked_by("aaaaaaaaaaaaaaaa") is None and pooled.device_valid(D1, "ann")
    pooled.user_update(UserUpdateParams(username="ann", password_hash="$argon2id$y", by="root"))
    assert revoked_by("aaaaaaaaaaaaaaaa") == "root" and not pooled.device_valid(D1, "ann")
    token("bbbbbbbbbbbbbbbb")
    device(D2)
    pooled.user_update(UserUpdateParams(username="ann", disabled=True))
    assert revoked_by("bbbbbbbbbbbbbbbb") == "ann" and not pooled.device_valid(D2, "ann")
    pooled.user_update(UserUpdateParams(username="ann", disabled=False))
    assert revoked_by("bbbbbbbbbbbbbbbb") == "ann"  # enabling revives nothing
    token("cccccccccccccccc")
    assert revoked_by("cccccccccccccccc") is None


def test_a_rehash_replaces_the_hash_only_while_unchanged_and_ends_nothing(
        pooled: AccountStore) -> None:
    _user(pooled)
    pooled.session_create(SessionCreateParams(id_digest=D1, username="ann", lifetime_ms=HOUR,
                                              idle_ms=HOUR))
    pooled.token_create(TokenCreateParams(id="aaaaaaaaaaaaaaaa", username="ann", name="t",
                                          scope="read", secret_digest=D2, lifetime_ms=None))
    pooled.user_rehash("ann", "$argon2id$x", "$argon2id$stronger")
    pooled.user_rehash("ann", "$argon2id$x", "$argon2id$other")  # no longer x: nothing
    user = pooled.user_get("ann")
    assert user is not None and user.password_hash == "$argon2id$stronger"
    assert pooled.session_get(D1, touch_after_ms=HOUR, idle_ms=HOUR) is not None
    token = pooled.token_get("aaaaaaaaaaaaaaaa")
    assert token is not None and token.revoked_at_ms is None


def test_devices_hold_until_they_expire_and_only_the_newest_are_kept(
        accounts: AccountStore, backend: Backend) -> None:
    _user(accounts)
    for digest in (D1, D2, D3):
        accounts.device_create(DeviceCreateParams(id_digest=digest, username="ann",
                                                  lifetime_ms=HOUR, keep=2))
        backend.pass_time(5)
    assert [accounts.device_valid(d, "ann") for d in (D1, D2, D3)] == [False, True, True]
    accounts.device_create(DeviceCreateParams(id_digest=D4, username="ann", lifetime_ms=1500,
                                              keep=20))
    assert accounts.device_valid(D4, "ann")
    backend.pass_time(1600)
    assert not accounts.device_valid(D4, "ann")


@pytest.fixture
def accounts(backend: Backend) -> AccountStore:
    return AccountStore(backend.database("ql_web", "auth-contract"))


def test_a_session_in_use_never_runs_idle(sqlite_stores: SqliteStores,
                                         clock: FakeClock) -> None:
    """`--session-idle 1m`: a request every 59 s keeps the session; a minute without one ends
    it. (How often a session in use is touched is the service's choice, so the fake clock of
    SQLite tells it exactly; the store's touch is the contract test's.)"""
    accounts = Accounts(AccountStore(sqlite_stores.database), hasher=CountingHasher(),
                        policy=SessionPolicy(lifetime_ms=HOUR, idle_ms=60_000))
    accounts.user_create("ann", "viewer", PASSWORD)
    secret = accounts.login("ann", PASSWORD, client=None).secret
    for _ in range(20):
        clock.advance(59_000)
        assert accounts.session_principal(secret) is not None
    clock.advance(60_000)
    assert accounts.session_principal(secret) is None
