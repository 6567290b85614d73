"""NotifyStore contract on every database: channels with write-only secrets, rules, the outbox
as the dispatcher fills it from Run outcomes and misfires (once per channel and event, rows
committed behind the scan found once they settle), recoveries, leases, backoff and dead
deliveries, and the dispatcher delivering signed documents to a real receiver.

On PostgreSQL channels and rules are written as ql_admin and the outbox is run as
ql_runtime, so the grants are exercised too.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from qinglong.clock import SystemClock
from qinglong.diagnostics import Diagnostic
from qinglong.domain.decision import Decision
from qinglong.domain.lifecycle import Outcome
from qinglong.domain.notify.channels import ChannelSpec, RetryPolicy, WebhookTarget
from qinglong.domain.notify.events import RuleEvent
from qinglong.domain.notify.model import DeliveryStatus
from qinglong.domain.runs import AttemptStatus
from qinglong.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from qinglong.notify.dispatcher import Dispatcher, NotifySettings
from qinglong.notify.senders import Sender
from qinglong.service.views.notify import channel_view
from qinglong.storage.admission.params import CommitResult
from qinglong.storage.definitions.params import TriggerPublishParams
from qinglong.storage.notify import NotifyStore
from qinglong.storage.notify.params import (
    ChannelPutParams,
    DeliveryListParams,
    OutboxClaimParams,
    OutboxEnqueueParams,
    OutboxMaintainParams,
    OutboxRecordParams,
    RuleAddParams,
    RuleRemoveParams,
)
from qinglong.testing import FakeClock
from tests.contract.conftest import EVERY_5_S, Backend, PgBackend, misfired_cursor
from tests.contract.test_leases import acquire
from tests.contract.test_retries_and_overlap import finish, publish
from tests.support.test_notify_receivers import WebhookReceiver, independent_signature_ok

SECRET = "contract-s3cr3t"
SETTLED = 0  # settle window: look again at once
UNSETTLED = 3_600_000  # settle window no row leaves during a test
FAILED = Outcome(status=AttemptStatus.FAILED, exit_code=3, error_code="EXIT_NONZERO",
                 error_summary="exit status 3")


@dataclass
class Notify:
    backend: Backend
    admin: NotifyStore  # channels and rules (ql_admin on PostgreSQL)
    runtime: NotifyStore  # the outbox (ql_runtime on PostgreSQL)
    admitted: int = 0
    base_ms: int = 0

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """As the database owner (test-only tampering and counting); ``?`` placeholders."""
        return self.backend.sql(statement, *params)

    def enqueue(self, settle_ms: int = UNSETTLED) -> int:
        return self.runtime.outbox_enqueue(OutboxEnqueueParams(settle_ms=settle_ms)).enqueued

    def outbox(self) -> list[dict[str, Any]]:
        return self.sql("SELECT channel, source_key, event, status, attempts, run_id "
                        "FROM notify_outbox ORDER BY channel, source_key")


@contextlib.contextmanager
def notify_stores(backend: Backend, name: str = "notify") -> Iterator[Notify]:
    """The backend's NotifyStore as the admin and the runtime role (where the database has
    roles; each over a connection of its own on PostgreSQL, closed with the backend)."""
    yield Notify(backend=backend,
                 admin=NotifyStore(backend.database("ql_admin", f"{name}-admin")),
                 runtime=NotifyStore(backend.database("ql_runtime", f"{name}-runtime")))


@pytest.fixture
def notify(backend: Backend) -> Iterator[Notify]:
    with notify_stores(backend) as stores:
        yield stores


def webhook(name: str, url: str = "http://127.0.0.1:9/hook", **retry: int) -> ChannelSpec:
    return ChannelSpec(name=name, target=WebhookTarget(url=url),
                       retry=RetryPolicy(**retry) if retry else RetryPolicy(), timeout_ms=2_000)


def add_channel(n: Notify, name: str, url: str = "http://127.0.0.1:9/hook",
                secret: str | None = SECRET, **retry: int) -> None:
    n.admin.channel_put(ChannelPutParams(spec=webhook(name, url, **retry), secret=secret))


def fail_run(n: Notify) -> str:
    """Admit one more occurrence of t1 (each a second before the last, within the grace) and
    fail its Run."""
    if n.admitted == 0:
        n.base_ms = n.backend.now_ms() // 1000 * 1000
    n.admitted += 1
    run_id = n.backend.admit("demo", "t1", n.base_ms - 1000 * n.admitted)
    [lease] = acquire(n.backend)
    assert lease.fence.run_id == run_id
    finish(n.backend, lease, FAILED)
    return run_id


# --- channels and rules ---------------------------------------------------------------------


def test_a_channel_keeps_its_secret_and_never_shows_it(notify: Notify) -> None:
    add_channel(notify, "ops")
    channel = notify.admin.channel_get("ops")
    assert channel.secret_set and channel.version == 1
    assert SECRET not in repr(channel) + repr(channel_view(channel, []))
    assert channel_view(channel).secret == "set"
    with pytest.raises(Conflict, match="--replace"):
        add_channel(notify, "ops")
    changed = webhook("ops", "https://hooks.example.com/x")
    notify.admin.channel_put(ChannelPutParams(spec=changed, secret=None, keep_secret=True,
                                              replace=True))
    assert notify.admin.channel_for_send("ops") == (changed, SECRET)  # kept
    notify.admin.channel_put(ChannelPutParams(spec=changed, secret="new", replace=True))
    assert notify.admin.channel_for_send("ops")[1] == "new"
    assert [c.name for c in notify.admin.channel_list()] == ["ops"]
    notify.admin.channel_remove("ops")
    with pytest.raises(NotFound):
        notify.admin.channel_get("ops")
    assert notify.sql("SELECT secret FROM notify_channels") == [{"secret": None}]  # erased
    assert notify.admin.channel_list() == []
    add_channel(notify, "ops", secret=None)  # the name is free again
    assert not notify.admin.channel_get("ops").secret_set


def test_rules_name_existing_channels_projects_and_tasks(notify: Notify) -> None:
    publish(notify.backend)
    add_channel(notify, "ops")
    every = (RuleEvent.FAILED, RuleEvent.LOST)
    for params, missing in (
            (RuleAddParams(channel="nope", project_id="demo", task_id=None, events=every), "channel"),
            (RuleAddParams(channel="ops", project_id="nope", task_id=None, events=every), "project"),
            (RuleAddParams(channel="ops", project_id="demo", task_id="nope", events=every), "task")):
        with pytest.raises(NotFound) as caught:
            notify.admin.rule_add(params)
        assert caught.value.kind == missing
    with pytest.raises(InvalidInput):
        notify.admin.rule_add(RuleAddParams(channel="ops", project_id="demo", task_id=None,
                                            events=()))
    [rule] = notify.admin.rule_add(RuleAddParams(channel="ops", project_id="demo", task_id=None,
                                                 events=every))
    assert (rule.task_id, rule.events) == (None, every)
    notify.admin.rule_add(RuleAddParams(channel="ops", project_id="demo", task_id="job",
                                        events=(RuleEvent.MISFIRED,)))
    assert [(r.task_id, r.events) for r in notify.runtime.rule_list("ops", "demo")] == [
        (None, every), ("job", (RuleEvent.MISFIRED,))]
    assert notify.admin.rule_remove(RuleRemoveParams(channel="ops", project_id="demo",
                                                     task_id=None,
                                                     events=(RuleEvent.LOST,))) == 1
    assert notify.admin.rule_remove(RuleRemoveParams(channel="ops", project_id="demo",
                                                     task_id="job")) == 1
    assert [(r.task_id, r.events) for r in notify.admin.rule_list()] == [
        (None, (RuleEvent.FAILED,))]
    with pytest.raises(NotFound):
        notify.admin.rule_remove(RuleRemoveParams(channel="ops", project_id="demo",
                                                  task_id="job"))
    notify.admin.channel_remove("ops")  # its rules go with it
    assert notify.sql("SELECT count(*) AS n FROM notify_rules") == [{"n": 0}]


# --- the outbox ---------------------------------------------------------------------------


def test_a_failed_run_becomes_one_delivery_per_channel_and_a_rescan_adds_none(
        notify: Notify) -> None:
    publish(notify.backend)
    for name in ("a", "b"):
        add_channel(notify, name)
    failed = (RuleEvent.FAILED,)
    for channel, task in (("a", None), ("a", "job"), ("b", "job")):  # a: twice over
        notify.admin.rule_add(RuleAddParams(channel=channel, project_id="demo", task_id=task,
                                            events=failed))
    notify.backend.let_time_pass()
    assert notify.enqueue() == 0  # the cursor starts just before the first rule
    run_id = fail_run(notify)
    assert notify.enqueue() == 2
    assert notify.enqueue(SETTLED) == 0  # both looks, nothing twice
    rows = notify.outbox()
    assert [(r["channel"], r["event"], r["status"], r["run_id"]) for r in rows] == [
        ("a", "run.failed", "pending", run_id), ("b", "run.failed", "pending", run_id)]
    assert {r["source_key"] for r in rows} == {f"run.failed:{run_id}"}
    claimed = notify.runtime.outbox_claim(OutboxClaimParams(owner="t"))
    assert claimed is not None
    doc = claimed.payload
    assert (doc["schema"], doc["event"], doc["project"], doc["task"], doc["trigger"]) == (
        "qinglong/notification@v1", "run.failed", "demo", "job", "t1")
    assert doc["id"] == claimed.delivery.id and doc["channel"] == claimed.delivery.channel
    assert (doc["run"]["id"], doc["run"]["exit_code"], doc["run"]["attempts"]) == (run_id, 3, 1)
    assert claimed.secret == SECRET


def test_a_row_committed_behind_the_scan_is_found_once_it_settles(notify: Notify) -> None:
    publish(notify.backend)
    add_channel(notify, "ops")
    notify.admin.rule_add(RuleAddParams(channel="ops", project_id="demo", task_id=None,
                                        events=(RuleEvent.FAILED,)))
    notify.backend.pass_time(50)
    first = fail_run(notify)
    assert notify.enqueue() == 1
    [frontier] = notify.sql("SELECT frontier_ms FROM notify_cursors WHERE source = ?",
                            ("run_outcomes",))
    # A transaction that stamped its event before the frontier commits only now.
    late = fail_run(notify)
    notify.sql("UPDATE run_events SET created_at_ms = ? WHERE run_id = ? AND type = ?",
               (int(frontier["frontier_ms"]) - 1, late, "run.failed"))
    assert notify.enqueue() == 0  # behind the frontier, and not settled yet
    assert [r["run_id"] for r in notify.outbox()] == [first]
    assert notify.enqueue(SETTLED) == 1  # the second look finds it
    assert sorted(r["run_id"] for r in notify.outbox()) == sorted([first, late])


def test_a_rule_covers_only_what_happens_after_it_was_added(notify: Notify) -> None:
    publish(notify.backend)
    for name in ("early", "late"):
        add_channel(notify, name)
    notify.admin.rule_add(RuleAddParams(channel="early", project_id="demo", task_id=None,
                                        events=(RuleEvent.FAILED,)))
    notify.backend.pass_time(50)
    before = fail_run(notify)
    notify.backend.pass_time(50)
    notify.admin.rule_add(RuleAddParams(channel="late", project_id="demo", task_id=None,
                                        events=(RuleEvent.FAILED,)))
    notify.backend.pass_time(50)
    after = fail_run(notify)
    notify.enqueue(SETTLED)
    assert sorted((r["channel"], r["run_id"]) for r in notify.outbox()) == sorted([
        ("early", before), ("early", after), ("late", after)])


def test_a_delivery_is_leased_backed_off_taken_over_and_ends_dead(notify: Notify) -> None:
    publish(notify.backend)
    # backoffs of ten minutes: a slow machine never outlasts one between two statements
    add_channel(notify, "ops", max_attempts=3, backoff_ms=600_000, max_backoff_ms=600_000)
    notify.admin.rule_add(RuleAddParams(channel="ops", project_id="demo", task_id=None,
                                        events=(RuleEvent.FAILED,)))
    notify.backend.pass_time(50)
    fail_run(notify)
    notify.enqueue()
    a = notify.runtime.outbox_claim(OutboxClaimParams(owner="a"))
    assert a is not None and a.delivery.attempts == 1
    assert a.delivery.status is DeliveryStatus.SENDING
    assert notify.runtime.outbox_claim(OutboxClaimParams(owner="b")) is None  # leased
    wrong = OutboxRecordParams(delivery_id=a.delivery.id, token=str(uuid.uuid4()), ok=True,
                               status_code=200, detail="HTTP 200", retry_in_ms=0)
    assert notify.runtime.outbox_record(wrong) is None  # not under its lease
    failed = notify.runtime.outbox_record(OutboxRecordParams(
        delivery_id=a.delivery.id, token=a.token, ok=False, status_code=503,
        detail="HTTP 503 Service Unavailable", retry_in_ms=600_000))
    assert failed is not None and failed.status is DeliveryStatus.PENDING
    assert failed.next_attempt_at_ms is not None
    assert failed.next_attempt_at_ms - notify.runtime.now_ms() > 540_000
    assert notify.runtime.outbox_claim(OutboxClaimParams(owner="b")) is None  # backing off
    notify.sql("UPDATE notify_outbox SET next_attempt_at_ms = next_attempt_at_ms - 610000")
    b = notify.runtime.outbox_claim(OutboxClaimParams(owner="b"))
    assert b is not None and b.delivery.attempts == 2 and b.token != a.token
    # b stalls past its lease: c takes the delivery over; b's late report changes nothing
    notify.sql("UPDATE notify_outbox SET next_attempt_at_ms = next_attempt_at_ms - 3600000")
    c = notify.runtime.outbox_claim(OutboxClaimParams(owner="c"))
    assert c is not None and c.delivery.attempts == 3
    assert notify.runtime.outbox_record(OutboxRecordParams(
        delivery_id=b.delivery.id, token=b.token, ok=True, status_code=200, detail="late",
        retry_in_ms=0)) is None
    dead = notify.runtime.outbox_record(OutboxRecordParams(
        delivery_id=c.delivery.id, token=c.token, ok=False, status_code=None,
        detail="connection refused", retry_in_ms=600_000))
    assert dead is not None and dead.status is DeliveryStatus.DEAD
    assert (dead.attempts, dead.last_error, dead.finished_at_ms is not None) == (
        3, "connection refused", True)
    assert notify.runtime.outbox_claim(OutboxClaimParams(owner="d")) is None
    [listed] = notify.runtime.delivery_list(DeliveryListParams(status=DeliveryStatus.DEAD))
    assert listed.id == dead.id
    again = notify.runtime.delivery_retry(dead.id[:8])
    assert again.status is DeliveryStatus.PENDING and again.attempts == 0
    with pytest.raises(Conflict, match="only a dead"):
        notify.runtime.delivery_retry(dead.id)


def test_the_deliveries_of_a_removed_channel_end_dead(notify: Notify) -> None:
    publish(notify.backend)
    add_channel(notify, "ops")
    notify.admin.rule_add(RuleAddParams(channel="ops", project_id="demo", task_id=None,
                                        events=(RuleEvent.FAILED,)))
    notify.backend.pass_time(50)
    fail_run(notify)
    notify.enqueue()
    notify.admin.channel_remove("ops")
    assert notify.runtime.outbox_claim(OutboxClaimParams(owner="a")) is None
    assert notify.runtime.outbox_maintain(OutboxMaintainParams()).orphaned == 1
    [row] = notify.runtime.delivery_list(DeliveryListParams())
    assert (row.status, row.last_error) == (DeliveryStatus.DEAD, "the channel was removed")
    notify.backend.pass_time(100)
    assert notify.runtime.outbox_maintain(OutboxMaintainParams(retention_ms=50)).purged == 1


def test_a_misfire_is_notified_and_so_is_the_next_on_time_occurrence(notify: Notify) -> None:
    publish(notify.backend, triggers=())
    notify.backend.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="sec", task_id="job", expression=EVERY_5_S,
        timezone="UTC", misfire_policy="skip"))
    add_channel(notify, "ops")
    notify.admin.rule_add(RuleAddParams(channel="ops", project_id="demo", task_id="job",
                                        events=(RuleEvent.MISFIRED, RuleEvent.RECOVERED)))
    due = misfired_cursor(notify.backend)
    notify.backend.set_cursor("demo", "sec", due)
    decisions: list[Decision] = []

    def committed(_item: object, decision: Decision, _result: CommitResult) -> None:
        decisions.append(decision)

    notify.backend.run_cycle(lambda: str(uuid.uuid4()), committed)
    assert decisions[0].misfired
    assert notify.enqueue() == 1
    notify.backend.run_cycle(lambda: str(uuid.uuid4()), committed)
    assert any(d.scheduled_for_ms is not None and not d.misfired for d in decisions)
    assert notify.runtime.outbox_recoveries(10) == 1
    assert notify.runtime.outbox_recoveries(10) == 0  # once
    events = {r["event"]: r for r in notify.outbox()}
    assert set(events) == {"trigger.misfired", "trigger.recovered"}
    key = f"demo/sec@1:{due}"
    assert events["trigger.misfired"]["source_key"] == f"trigger.misfired:{key}"
    assert events["trigger.recovered"]["source_key"] == f"trigger.recovered:{key}"
    assert notify.sql("SELECT count(*) AS n FROM notify_recoveries") == [{"n": 0}]
    notify.enqueue(SETTLED)  # the second look at the misfire adds nothing, recovered or not
    notify.runtime.outbox_recoveries(10)
    assert len(notify.outbox()) == 2


def test_the_dispatcher_delivers_signed_documents_and_retries_a_failing_receiver(
        notify: Notify) -> None:
    publish(notify.backend)
    receiver = WebhookReceiver(SECRET).start()
    diagnostics: list[Diagnostic] = []
    # the dispatcher's clock (its channel cool-downs follow it): the store's fake one on
    # SQLite, a fake one of its own on PostgreSQL, so no real pause can end a cool-down early
    store_clock = notify.backend.clock()
    clock = store_clock if isinstance(store_clock, FakeClock) else FakeClock()
    try:
        add_channel(notify, "ops", receiver.url, backoff_ms=200, max_backoff_ms=200)
        notify.admin.rule_add(RuleAddParams(channel="ops", project_id="demo", task_id=None,
                                            events=(RuleEvent.FAILED,)))
        notify.backend.pass_time(50)
        run_ids = {fail_run(notify) for _ in range(3)}
        dispatcher = Dispatcher(notify.runtime, Sender(SystemClock()), clock, owner="contract",
                                diagnostics=diagnostics.append, jitter=lambda: 1.0,
                                settings=NotifySettings(settle_ms=UNSETTLED))
        receiver.mode = "error"
        first = dispatcher.run_cycle()
        assert (first.enqueued, first.delivered, first.failed) == (3, 0, 1)
        assert [d.code for d in diagnostics] == ["QL_NOTIFY_RETRY"]
        assert "HTTP 503" in diagnostics[0].message
        # the channel cools down: its other two deliveries wait as long as the failed one
        assert first.next_due_in_ms is not None and 190 < first.next_due_in_ms <= 200
        again = dispatcher.run_cycle()
        assert (again.delivered, again.failed) == (0, 0)
        receiver.mode = "ok"
        notify.backend.pass_time(250)  # the failed delivery's backoff in the database
        if clock is not store_clock:
            clock.advance(250)  # and the channel's cool-down in the dispatcher
        second = dispatcher.run_cycle()
        assert (second.delivered, second.failed) == (3, 0)
    finally:
        receiver.stop()
    got = receiver.received()
    assert [r.answered for r in got] == [503, 200, 200, 200]
    assert got[0].headers["X-Qinglong-Delivery"] in {r.headers["X-Qinglong-Delivery"]
                                                     for r in got[1:]}
    assert all(r.verified and independent_signature_ok(SECRET, r.headers, r.body) for r in got)
    assert {r.document["run"]["id"] for r in got[1:]} == run_ids
    assert all(r.headers["Idempotency-Key"] == r.document["id"] for r in got)
    listed = notify.runtime.delivery_list(DeliveryListParams())
    assert sorted((d.status, d.attempts, d.last_status) for d in listed) == [
        (DeliveryStatus.DELIVERED, 1, 200), (DeliveryStatus.DELIVERED, 1, 200),
        (DeliveryStatus.DELIVERED, 2, 200)]


# --- PostgreSQL: concurrency and grants ---------------------------------------------------


def test_replicas_never_hold_the_same_delivery_at_once(pg_backend: PgBackend) -> None:
    db = pg_backend.db
    db.execute("INSERT INTO notify_channels VALUES ('ops', 'webhook', %s::jsonb, NULL, 1, 0, 0, "
               "NULL)", [webhook("ops").config_json()])
    for n in range(40):
        db.execute("INSERT INTO notify_outbox (id, channel, source_key, event, project_id, "
                   "payload, occurred_at_ms, status, attempts, max_attempts, "
                   "next_attempt_at_ms, created_at_ms, updated_at_ms) VALUES (%s, 'ops', %s, "
                   "'notify.test', 'demo', '{}'::jsonb, 0, 'pending', 0, 3, 0, 0, 0)",
                   [str(uuid.uuid4()), f"k{n}"])
    stores = [NotifyStore(pg_backend.database("ql_runtime", f"replica-{i}")) for i in range(4)]
    claimed: dict[str, list[str]] = {}
    start = threading.Barrier(len(stores))

    def replica(index: int) -> None:
        store = stores[index]
        start.wait()
        while (item := store.outbox_claim(OutboxClaimParams(owner=f"r{index}"))) is not None:
            claimed.setdefault(item.delivery.id, []).append(f"r{index}")

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(claimed) == 40 and all(len(owners) == 1 for owners in claimed.values())
    assert len({owner for owners in claimed.values() for owner in owners}) > 1


def test_ql_admin_manages_channels_but_cannot_read_the_outbox(pg_backend: PgBackend) -> None:
    store = NotifyStore(pg_backend.database("ql_admin", "admin"))
    store.channel_put(ChannelPutParams(spec=webhook("ops"), secret=SECRET))
    with pytest.raises(PermissionDenied, match="notify_outbox"):
        store.delivery_list(DeliveryListParams())
    with pytest.raises(PermissionDenied):
        store.outbox_enqueue(OutboxEnqueueParams(settle_ms=0))
