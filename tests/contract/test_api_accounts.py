"""The AccountStore contract (the HTTP API's users, sessions, tokens, failed logins and audit
log), on SQLite and on every PostgreSQL server (as ql_web), on each store's own clock."""

from __future__ import annotations

from typing import Any

import pytest

from qinglong.errors import Conflict, InvalidInput, NotFound
from qinglong.service.container import Services
from qinglong.storage.accounts import AccountStore
from qinglong.storage.accounts.params import (
    AuditListParams,
    AuditWriteParams,
    SessionCreateParams,
    TokenCreateParams,
    UserCreateParams,
    UserUpdateParams,
)
from tests.contract.conftest import Backend

D1, D2, D3 = "a" * 64, "b" * 64, "c" * 64
HOUR = 3_600_000
IDLE = 600_000  # a session's idle time in the tests: ages far beyond any pause of a busy host


@pytest.fixture
def accounts(backend: Backend) -> AccountStore:
    return AccountStore(backend.database("ql_web", "contract-web"))


def _user(accounts: AccountStore, name: str = "ann", role: str = "operator") -> None:
    accounts.user_create(UserCreateParams(username=name, role=role, password_hash="$argon2id$x"))


def test_users_are_created_once_listed_and_updated(accounts: AccountStore) -> None:
    _user(accounts, "ann")
    _user(accounts, "bob", "viewer")
    with pytest.raises(Conflict):
        _user(accounts, "ann", "admin")
    assert [(u.username, u.role) for u in accounts.user_list()] == [
        ("ann", "operator"), ("bob", "viewer")]
    promoted = accounts.user_update(UserUpdateParams(username="bob", role="admin"))
    assert (promoted.role, promoted.disabled_at_ms, promoted.password_hash) == (
        "admin", None, "$argon2id$x")
    assert accounts.user_get("nobody") is None
    with pytest.raises(NotFound):
        accounts.user_update(UserUpdateParams(username="nobody", role="viewer"))


def test_a_session_holds_until_idle_or_ended_and_disabling_ends_it(
        accounts: AccountStore, backend: Backend) -> None:
    _user(accounts)
    created = accounts.session_create(SessionCreateParams(
        id_digest=D1, username="ann", lifetime_ms=HOUR, idle_ms=IDLE, client="10.0.0.1"))
    assert (created.username, created.role) == ("ann", "operator")
    assert created.idle_expires_at_ms == created.created_at_ms + IDLE
    assert created.expires_at_ms == created.created_at_ms + HOUR
    backend.age_sessions(IDLE * 2 // 3)
    seen = accounts.session_get(D1, touch_after_ms=0, idle_ms=IDLE)
    assert seen is not None  # seen again: its idle expiry moved on
    backend.age_sessions(IDLE * 2 // 3)  # 4/3 of the idle time old, 2/3 since last seen
    assert accounts.session_get(D1, touch_after_ms=0, idle_ms=IDLE) is not None
    backend.age_sessions(IDLE * 7 // 6)
    assert accounts.session_get(D1, touch_after_ms=0, idle_ms=IDLE) is None  # idle too long
    accounts.session_create(SessionCreateParams(id_digest=D2, username="ann", lifetime_ms=HOUR,
                                                idle_ms=HOUR))
    accounts.session_create(SessionCreateParams(id_digest=D3, username="ann", lifetime_ms=HOUR,
                                                idle_ms=HOUR))
    accounts.session_end(D2)
    assert accounts.session_get(D2, touch_after_ms=0, idle_ms=HOUR) is None
    assert accounts.session_get(D3, touch_after_ms=0, idle_ms=HOUR) is not None
    accounts.user_update(UserUpdateParams(username="ann", disabled=True))
    assert accounts.session_get(D3, touch_after_ms=0, idle_ms=HOUR) is None
    accounts.user_update(UserUpdateParams(username="ann", disabled=False))
    assert accounts.session_get(D3, touch_after_ms=0, idle_ms=HOUR) is None  # ended for good
    assert accounts.session_get("f" * 64, touch_after_ms=0, idle_ms=HOUR) is None


def test_a_session_never_outlives_its_lifetime_and_a_new_password_ends_it(
        accounts: AccountStore, backend: Backend) -> None:
    _user(accounts)
    accounts.session_create(SessionCreateParams(id_digest=D1, username="ann", lifetime_ms=500,
                                                idle_ms=HOUR))
    backend.pass_time(600)
    assert accounts.session_get(D1, touch_after_ms=0, idle_ms=HOUR) is None
    accounts.session_create(SessionCreateParams(id_digest=D2, username="ann", lifetime_ms=HOUR,
                                                idle_ms=HOUR))
    accounts.user_update(UserUpdateParams(username="ann", password_hash="$argon2id$y"))
    assert accounts.session_get(D2, touch_after_ms=0, idle_ms=HOUR) is None
    with pytest.raises(NotFound):
        accounts.session_create(SessionCreateParams(id_digest=D3, username="nobody",
                                                    lifetime_ms=HOUR, idle_ms=HOUR))


def test_tokens_are_kept_as_digests_and_revoked_once(accounts: AccountStore,
                                                    backend: Backend) -> None:
    _user(accounts, "ann")
    _user(accounts, "bob", "viewer")
    made = accounts.token_create(TokenCreateParams(id="0123456789abcdef", username="ann",
                                                   name="ci", scope="read", secret_digest=D1,
                                                   lifetime_ms=HOUR))
    assert (made.username, made.role, made.scope, made.secret_digest) == (
        "ann", "operator", "read", D1)
    assert made.expires_at_ms == made.created_at_ms + HOUR and made.last_used_at_ms is None
    accounts.token_create(TokenCreateParams(id="fedcba9876543210", username="bob", name="b",
                                            scope="read", secret_digest=D2, lifetime_ms=None))
    with pytest.raises(Conflict):
        accounts.token_create(TokenCreateParams(id="0123456789abcdef", username="bob",
                                                name="again", scope="read", secret_digest=D3,
                                                lifetime_ms=None))
    with pytest.raises(NotFound):
        accounts.token_create(TokenCreateParams(id="1111111111111111", username="nobody",
                                                name="x", scope="read", secret_digest=D3,
                                                lifetime_ms=None))
    assert [t.id for t in accounts.token_list("ann")] == ["0123456789abcdef"]
    assert {t.id for t in accounts.token_list(None)} == {"0123456789abcdef", "fedcba9876543210"}
    accounts.token_used("0123456789abcdef", 60_000)
    first = accounts.token_get("0123456789abcdef")
    assert first is not None and first.last_used_at_ms is not None
    backend.pass_time(20)
    accounts.token_used("0123456789abcdef", 60_000)  # within a minute: not written again
    assert accounts.token_get("0123456789abcdef").last_used_at_ms == first.last_used_at_ms  # type: ignore[union-attr]
    accounts.token_used("0123456789abcdef", 0)
    assert accounts.token_get("0123456789abcdef").last_used_at_ms > first.last_used_at_ms  # type: ignore[union-attr, operator]
    revoked = accounts.token_revoke("0123456789abcdef", "bob")
    assert revoked.revoked_at_ms is not None and revoked.revoked_by == "bob"
    backend.pass_time(20)
    again = accounts.token_revoke("0123456789abcdef", "ann")
    assert (again.revoked_at_ms, again.revoked_by) == (revoked.revoked_at_ms, "bob")
    with pytest.raises(NotFound):
        accounts.token_revoke("2222222222222222", "ann")
    accounts.user_update(UserUpdateParams(username="bob", disabled=True))
    assert accounts.token_get("fedcba9876543210").user_disabled  # type: ignore[union-attr]


def test_login_attempts_are_admitted_under_their_limits_counted_and_settled(
        accounts: AccountStore, backend: Backend) -> None:
    ann = (("user:ann", 3), ("addr:10.0.0.1", 5))
    admitted = [accounts.login_attempt(ann, window_ms=HOUR) for _ in range(3)]
    assert [(a.admitted, len(a.failure_ids)) for a in admitted] == [(True, 2)] * 3
    backend.pass_time(5)
    refused = accounts.login_attempt(ann, window_ms=HOUR)
    assert (refused.admitted, refused.failure_ids) == (False, ())
    assert refused.retry_after_ms is not None and 0 < refused.retry_after_ms < HOUR
    # the address has 3 of its 5: bob is admitted from it, twice, then the address refuses
    bob = (("user:bob", 3), ("addr:10.0.0.1", 5))
    first_bob = accounts.login_attempt(bob, window_ms=HOUR)
    assert first_bob.admitted
    assert accounts.login_attempt(bob, window_ms=HOUR).admitted
    assert not accounts.login_attempt(bob, window_ms=HOUR).admitted
    # a right password: its own recorded failures are taken back, bob's cleared
    accounts.login_attempt_settle(first_bob.failure_ids, "user:bob")
    assert accounts.login_attempt((("user:bob", 1),), window_ms=HOUR).admitted
    # a check that never happened is taken back: ann (and the address) have room again
    accounts.login_attempt_settle(admitted[0].failure_ids, None)
    assert accounts.login_attempt(ann, window_ms=HOUR).admitted
    assert not accounts.login_attempt(ann, window_ms=HOUR).admitted
    # failures older than the window neither count nor stay
    backend.pass_time(300)
    assert accounts.login_attempt(ann, window_ms=200).admitted


def test_the_audit_log_pages_newest_first(accounts: AccountStore) -> None:
    written = [accounts.audit_write(AuditWriteParams(
        actor="ann", via="token", token_id="0123456789abcdef", action=f"task.publish.{i}",
        project_id="demo", target=f"task t{i}", detail={"revision": i, "nested": {"a": [1]}},
        client="127.0.0.1")) for i in range(5)]
    assert [w.id for w in written] == sorted(w.id for w in written)
    page = accounts.audit_list(AuditListParams(limit=3))
    assert [e.action for e in page] == ["task.publish.4", "task.publish.3", "task.publish.2"]
    assert page[0].detail == {"revision": 4, "nested": {"a": [1]}}
    assert (page[0].actor, page[0].via, page[0].token_id, page[0].client) == (
        "ann", "token", "0123456789abcdef", "127.0.0.1")
    rest = accounts.audit_list(AuditListParams(limit=3, before_id=page[-1].id))
    assert [e.action for e in rest] == ["task.publish.1", "task.publish.0"]
    assert accounts.audit_list(AuditListParams(limit=3, before_id=rest[-1].id)) == []


def test_the_audit_log_filters_by_actor_action_project_and_time(
        accounts: AccountStore, backend: Backend) -> None:
    def write(actor: str, action: str, project: str | None) -> int:
        entry = accounts.audit_write(AuditWriteParams(
            actor=actor, via="session", action=action, project_id=project))
        backend.pass_time(5)  # each entry at its own instant
        return entry.at_ms

    first = write("ann", "task.publish", "demo")
    write("bob", "notify.test", None)
    middle = write("ann", "notify.channel.put", "other")
    write("ann", "notifyx", "demo")  # not under notify: only 'notify' itself or 'notify.*'
    write("bob", "task.publish", "demo")
    last = write("ann", "trigger.pause", "demo")

    def actions(**given: Any) -> list[str]:
        return [e.action for e in accounts.audit_list(AuditListParams(limit=100, **given))]

    assert actions(actor="ann") == ["trigger.pause", "notifyx", "notify.channel.put",
                                    "task.publish"]
    assert actions(action="notify") == ["notify.channel.put", "notify.test"]
    assert actions(action="notify.channel") == ["notify.channel.put"]
    assert actions(action="task.publish", actor="bob") == ["task.publish"]
    assert actions(project_id="demo") == ["trigger.pause", "task.publish", "notifyx",
                                          "task.publish"]
    assert actions(since_ms=middle, until_ms=last) == ["task.publish", "notifyx",
                                                       "notify.channel.put"]
    assert actions(since_ms=last) == ["trigger.pause"]
    assert actions(until_ms=first + 1) == ["task.publish"]
    assert actions(actor="nobody") == []
    # a filtered page continues after its cursor with the same filters
    page = accounts.audit_list(AuditListParams(limit=2, actor="ann", project_id="demo"))
    assert [e.action for e in page] == ["trigger.pause", "notifyx"]
    rest = accounts.audit_list(AuditListParams(limit=2, actor="ann", project_id="demo",
                                               before_id=page[-1].id))
    assert [e.action for e in rest] == ["task.publish"]


@pytest.mark.parametrize(("given", "field"), [
    ({"actor": "a" * 65}, "actor"), ({"actor": ""}, "actor"), ({"action": "x" * 65}, "action"),
    ({"since_ms": 2_000, "until_ms": 2_000}, "until"),
    ({"since_ms": 3_000, "until_ms": 2_000}, "until")])
def test_the_audit_logs_filters_refuse_what_cannot_match(
        demo_services: Services, given: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        demo_services.accounts.audit_list(None, 10, **given)
    assert refused.value.field == field


def test_the_audit_logs_filters_as_the_api_asks_them(demo_services: Services) -> None:
    accounts = demo_services.accounts
    for actor, project in (("ann", "demo"), ("bob", None), ("ann", None)):
        demo_services.stores.accounts.audit_write(AuditWriteParams(
            actor=actor, via="cli", action="project.pause", project_id=project))
    shown = accounts.audit_list(None, 10, actor="ann", action="project", project="demo")
    assert [(e.actor, e.project, e.action) for e in shown] == [("ann", "demo", "project.pause")]
