"""The dispatcher's probe on every database: one statement that tells whether a cycle could have
work. An idle database probes "nothing", and then every step, run anyway, finds nothing too;
each kind of work (a rule and a Run outcome, a row committed behind the scan that settles, a
misfire and its recovery, a due delivery, one due once its channel has cooled down, a tidy,
a purge) makes it say "work", and the full cycle then does it.

On PostgreSQL an idle cycle sends exactly one statement and no transaction: counted on the
wire (libpq's trace of the dispatcher's own connection, every server) and by the server
itself (``log_statement = all`` on the embedded server, with the wiring `ql control` uses).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest

from qinglong.clock import Clock, SystemClock
from qinglong.diagnostics import Diagnostic
from qinglong.domain.decision import Decision
from qinglong.domain.notify.events import RuleEvent
from qinglong.notify.dispatcher import Dispatcher, NotifyReport, NotifySettings
from qinglong.notify.senders import Sender
from qinglong.profiles.cluster import cluster_notify_service
from qinglong.storage.admission.params import CommitResult
from qinglong.storage.definitions.params import TriggerPublishParams
from qinglong.storage.notify import NotifyStore
from qinglong.storage.notify.params import (
    OutboxClaimParams,
    OutboxEnqueueParams,
    OutboxMaintainParams,
    OutboxProbe,
    OutboxProbeParams,
    RuleAddParams,
)
from qinglong.storage.postgres.connection import SessionSettings, SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from qinglong.testing import FakeClock
from testkit.postgres import EmbeddedPostgres
from tests.contract.conftest import (
    EVERY_5_S,
    Backend,
    PgBackend,
    PgTargets,
    _pg_backend,
    misfired_cursor,
)
from tests.contract.test_notify_outbox import (
    SECRET,
    SETTLED,
    UNSETTLED,
    Notify,
    add_channel,
)
from tests.contract.test_notify_outbox import fail_run as _fail_run
from tests.contract.test_notify_outbox import notify_stores as _notify_stores
from tests.contract.test_retries_and_overlap import publish
from tests.support.pg import EMBEDDED
from tests.support.test_notify_receivers import WebhookReceiver

RETENTION_MS = 30 * 86_400_000
PROBE_SQL_START = "WITH clock AS MATERIALIZED ("  # the first line of notify_probe on PostgreSQL
DISPATCHER_SESSION = SessionSettings(statement_timeout_ms=5_000, lock_timeout_ms=1_000,
                                     idle_in_transaction_timeout_ms=10_000,
                                     transaction_timeout_ms=20_000)  # as wiring.cluster_service


class Recording:
    """A NotifyStore that records the calls a dispatcher makes (name and arguments)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args))
            return attr(*args, **kwargs)

        return call

    def names(self) -> list[str]:
        names = [name for name, _ in self.calls]
        self.calls.clear()
        return names


@dataclass
class Probing:
    n: Notify
    clock: Clock  # the dispatcher's: the store's fake clock on SQLite, real time on PostgreSQL
    receiver: WebhookReceiver
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def backend(self) -> Backend:
        return self.n.backend

    def probe(self, *, settle_ms: int = UNSETTLED, skip: tuple[str, ...] = (),
              tidy: bool = False, retention_ms: int | None = None) -> OutboxProbe:
        return self.n.runtime.outbox_probe(OutboxProbeParams(
            settle_ms=settle_ms, skip_channels=skip, tidy=tidy, retention_ms=retention_ms))

    def dispatcher(self, clock: Clock | None = None,
                   **settings: Any) -> tuple[Dispatcher, Recording]:
        store = Recording(self.n.runtime)
        dispatcher = Dispatcher(cast(Any, store), Sender(SystemClock()), clock or self.clock,
                                owner="probe", diagnostics=self.diagnostics.append,
                                jitter=lambda: 1.0,
                                settings=NotifySettings(**{"settle_ms": UNSETTLED, **settings}))
        return dispatcher, store

    def fake_clock(self) -> FakeClock:
        """A fake clock for a dispatcher whose cool-downs a test times: the store's on
        SQLite, one of its own on PostgreSQL (so a real pause never ends one early)."""
        return self.clock if isinstance(self.clock, FakeClock) else FakeClock()

    def pass_time(self, ms: int, *dispatcher_clocks: FakeClock) -> None:
        """Let ``ms`` pass for the database (the fake clock on SQLite, real time on
        PostgreSQL) and on the ``dispatcher_clocks`` (each advanced once)."""
        self.backend.pass_time(ms)  # the fake clock on SQLite (the dispatcher's too)
        for clock in dispatcher_clocks:
            if clock is not self.clock:
                clock.advance(ms)

    def state(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        outbox = self.n.sql("SELECT id, channel, source_key, status, attempts, "
                            "next_attempt_at_ms, finished_at_ms FROM notify_outbox ORDER BY id")
        watches = self.n.sql("SELECT project_id, trigger_id, trigger_revision, due_at_ms, "
                             "next_fire_at_ms, policy FROM notify_recoveries "
                             "ORDER BY project_id, trigger_id")
        return outbox, watches

    def assert_nothing_to_do(self, *, settle_ms: int = UNSETTLED, skip: tuple[str, ...] = (),
                             retention_ms: int = RETENTION_MS) -> OutboxProbe:
        """The probe says nothing, and every step, run anyway, agrees: nothing examined,
        enqueued, recovered, moved, leased, tidied or purged."""
        found = self.probe(settle_ms=settle_ms, skip=skip, tidy=True, retention_ms=retention_ms)
        assert found.idle, found
        before = self.state()
        runtime = self.n.runtime
        enqueued = runtime.outbox_enqueue(OutboxEnqueueParams(settle_ms=settle_ms))
        assert (enqueued.examined, enqueued.enqueued) == (0, 0)
        assert runtime.outbox_recoveries(1000) == 0
        assert runtime.outbox_claim(OutboxClaimParams(owner="check", skip_channels=skip)) is None
        tidied = runtime.outbox_maintain(OutboxMaintainParams(retention_ms=retention_ms))
        assert (tidied.orphaned, tidied.exhausted, tidied.purged) == (0, 0, 0)
        assert self.state() == before
        return found


def fail_run(p: Probing) -> str:
    return _fail_run(p.n)


def notify_stores(backend: Backend) -> contextlib.AbstractContextManager[Notify]:
    return _notify_stores(backend, name="probe")


@pytest.fixture
def probing(backend: Backend) -> Iterator[Probing]:
    clock = backend.clock()
    receiver = WebhookReceiver(SECRET).start()
    try:
        with notify_stores(backend) as n:
            yield Probing(n=n, clock=clock, receiver=receiver)
    finally:
        receiver.stop()


def rule(p: Probing, *events: RuleEvent, channel: str = "ops", task: str | None = None) -> None:
    p.n.admin.rule_add(RuleAddParams(channel=channel, project_id="demo", task_id=task,
                                     events=events))


def cycle(dispatcher: Dispatcher) -> NotifyReport:
    return dispatcher.run_cycle()


# --- idle -----------------------------------------------------------------------------------


def test_an_idle_database_has_nothing_to_do(probing: Probing) -> None:
    p = probing
    p.assert_nothing_to_do()
    dispatcher, store = p.dispatcher()
    assert cycle(dispatcher) == NotifyReport()
    assert store.names() == ["outbox_probe"]  # the tidy, due now, found nothing: done
    publish(p.backend)
    add_channel(p.n, "ops", p.receiver.url)
    fail_run(p)  # no rule: nothing is wanted, no cursor starts
    p.assert_nothing_to_do()
    p.assert_nothing_to_do(settle_ms=SETTLED)
    assert p.n.sql("SELECT count(*) AS n FROM notify_cursors") == [{"n": 0}]
    assert cycle(dispatcher) == NotifyReport()
    assert store.names() == ["outbox_probe"]
    assert p.diagnostics == [] and p.receiver.received() == []


def test_quiet_probes_lengthen_the_pause_until_a_cycle_finds_work(probing: Probing) -> None:
    p = probing
    dispatcher, store = p.dispatcher(idle_max_s=5.0)
    pauses = []
    for _ in range(6):
        assert cycle(dispatcher) == NotifyReport()
        pauses.append(dispatcher.quiet_pause_s())
    assert pauses == [None, 2.0, 4.0, 5.0, 5.0, 5.0]  # None: the loop's interval (1 s)
    assert set(store.names()) == {"outbox_probe"}
    publish(p.backend)
    add_channel(p.n, "ops", p.receiver.url)
    rule(p, RuleEvent.FAILED)  # work: the cursors start
    cycle(dispatcher)
    assert dispatcher.quiet_pause_s() is None
    assert "outbox_enqueue" in store.names()
    assert cycle(dispatcher) == NotifyReport() and dispatcher.quiet_pause_s() is None
    assert cycle(dispatcher) == NotifyReport() and dispatcher.quiet_pause_s() == 2.0
    p.pass_time(50)
    run_id = fail_run(p)
    report = cycle(dispatcher)  # the failed Run is sent, and the pause is the interval again
    assert (report.enqueued, report.delivered) == (1, 1)
    assert [r.document["run"]["id"] for r in p.receiver.received()] == [run_id]
    assert dispatcher.quiet_pause_s() is None


# --- enqueue ----------------------------------------------------------------------------------


def test_a_rule_and_a_failed_run_are_work_until_a_cycle_sends_it(probing: Probing) -> None:
    p = probing
    publish(p.backend)
    add_channel(p.n, "ops", p.receiver.url)
    rule(p, RuleEvent.FAILED)
    found = p.probe()
    assert found.enqueue and not (found.deliver or found.recoveries)  # no cursor yet
    dispatcher, store = p.dispatcher()
    assert cycle(dispatcher) == NotifyReport()  # the cursors start; nothing else to do
    assert store.names()[:2] == ["outbox_probe", "outbox_enqueue"]
    # outcomes, misfires, and the starts and successes (issue 22)
    assert p.n.sql("SELECT count(*) AS n FROM notify_cursors") == [{"n": 3}]
    p.assert_nothing_to_do()
    assert cycle(dispatcher).next_due_in_ms is None
    assert store.names() == ["outbox_probe"]
    p.pass_time(50)
    run_id = fail_run(p)
    found = p.probe()
    assert found.enqueue and not found.deliver
    report = cycle(dispatcher)
    assert (report.enqueued, report.delivered, report.failed) == (1, 1, 0)
    assert [r.document["run"]["id"] for r in p.receiver.received()] == [run_id]
    store.names()
    p.assert_nothing_to_do()
    assert cycle(dispatcher) == NotifyReport()
    assert store.names() == ["outbox_probe"]


def test_a_row_committed_behind_the_scan_is_work_once_it_settles(probing: Probing) -> None:
    p = probing
    publish(p.backend)
    add_channel(p.n, "ops", p.receiver.url)
    rule(p, RuleEvent.FAILED)
    p.pass_time(50)
    fail_run(p)
    dispatcher, _ = p.dispatcher()
    report = cycle(dispatcher)
    assert (report.enqueued, report.delivered) == (1, 1)
    [cursor] = p.n.sql("SELECT frontier_ms FROM notify_cursors WHERE source = ?",
                       ("run_outcomes",))
    late = fail_run(p)
    p.n.sql("UPDATE run_events SET created_at_ms = ? WHERE run_id = ? AND type = ?",
            (int(cursor["frontier_ms"]) - 1, late, "run.failed"))
    p.assert_nothing_to_do()  # behind the frontier, not settled: the scan agrees
    found = p.probe(settle_ms=SETTLED)
    assert found.enqueue and not found.deliver  # settled now
    dispatcher, _ = p.dispatcher(settle_ms=SETTLED)
    report = cycle(dispatcher)
    assert (report.enqueued, report.delivered) == (1, 1)
    assert late in {r.document["run"]["id"] for r in p.receiver.received()}
    p.assert_nothing_to_do(settle_ms=SETTLED)


# --- misfires and recoveries ------------------------------------------------------------------


def test_a_misfire_is_work_and_its_recovery_is_sent_in_the_same_cycle(
        probing: Probing) -> None:
    p = probing
    publish(p.backend, triggers=())
    p.backend.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="sec", task_id="job", expression=EVERY_5_S,
        timezone="UTC", misfire_policy="skip"))
    add_channel(p.n, "ops", p.receiver.url)
    rule(p, RuleEvent.MISFIRED, RuleEvent.RECOVERED, task="job")
    dispatcher, store = p.dispatcher()
    cycle(dispatcher)  # the cursors start
    p.assert_nothing_to_do()
    p.backend.set_cursor("demo", "sec", misfired_cursor(p.backend))
    decisions: list[Decision] = []

    def committed(_item: object, decision: Decision, _result: CommitResult) -> None:
        decisions.append(decision)

    p.backend.run_cycle(lambda: str(uuid.uuid4()), committed)
    assert decisions[0].misfired  # and the occurrences within the grace ran on time
    found = p.probe()
    assert found.enqueue and not found.recoveries  # nothing watched yet
    store.names()
    report = cycle(dispatcher)
    assert (report.enqueued, report.recovered, report.delivered) == (1, 1, 2)
    assert sorted(r.document["event"] for r in p.receiver.received()) == [
        "trigger.misfired", "trigger.recovered"]
    p.assert_nothing_to_do()
    store.names()
    assert cycle(dispatcher) == NotifyReport()
    assert store.names() == ["outbox_probe"]


def test_a_waiting_recovery_is_work_once_its_trigger_fired_misfired_or_went(
        probing: Probing) -> None:
    p = probing
    publish(p.backend)
    add_channel(p.n, "ops", p.receiver.url)
    rule(p, RuleEvent.RECOVERED)
    assert p.n.enqueue() == 0  # the cursors start
    now = p.backend.now_ms()
    p.n.sql("INSERT INTO notify_recoveries (project_id, trigger_id, trigger_revision, due_at_ms, "
            "next_fire_at_ms, policy, misfired_at_ms, checked_at_ms) "
            "VALUES ('demo', 't1', 1, ?, ?, 'skip', ?, ?)",
            (now - 60_000, now + 3_600_000, now - 50_000, now - 50_000))
    p.assert_nothing_to_do()  # t1 has not fired since: the step would only mark it looked at
    at = now // 1000 * 1000 - 1000
    run_id = p.backend.admit("demo", "t1", at)
    p.assert_nothing_to_do()  # that Run is before the occurrence the watch waits for
    # fired on time
    p.n.sql("UPDATE notify_recoveries SET next_fire_at_ms = ?", (at,))
    found = p.probe()
    assert found.recoveries and not found.enqueue
    dispatcher, _ = p.dispatcher()
    report = cycle(dispatcher)
    assert (report.recovered, report.delivered) == (1, 1)
    [sent] = p.receiver.received()
    assert (sent.document["event"], sent.document["recovery"]["run_id"]) == (
        "trigger.recovered", run_id)
    p.assert_nothing_to_do()
    # misfired again (a later misfire than the one watched): the watch moves to it
    p.n.sql("INSERT INTO notify_recoveries (project_id, trigger_id, trigger_revision, due_at_ms, "
            "next_fire_at_ms, policy, misfired_at_ms, checked_at_ms) "
            "VALUES ('demo', 't1', 1, ?, ?, 'skip', ?, ?)",
            (now - 60_000, now + 3_600_000, now - 50_000, now - 50_000))
    p.assert_nothing_to_do()
    p.n.sql("INSERT INTO trigger_schedule_misfires (project_id, trigger_id, trigger_revision, "
            "due_at_ms, skipped_through_ms, next_fire_at_ms, policy, run_id, decided_at_ms) "
            "VALUES ('demo', 't1', 1, ?, ?, ?, 'skip', NULL, 1)",
            (now - 30_000, now - 30_000, now + 7_200_000))
    found = p.probe()
    assert found.recoveries and not found.enqueue  # decided long before the cursor started
    assert p.n.runtime.outbox_recoveries(10) == 0
    assert p.n.sql("SELECT due_at_ms, next_fire_at_ms FROM notify_recoveries") == [
        {"due_at_ms": now - 30_000, "next_fire_at_ms": now + 7_200_000}]
    p.assert_nothing_to_do()
    # went: nobody is left to tell, the watch is dropped
    p.backend.definitions.trigger_delete("demo", "t1")
    assert p.probe().recoveries
    assert p.n.runtime.outbox_recoveries(10) == 0
    assert p.n.sql("SELECT count(*) AS n FROM notify_recoveries") == [{"n": 0}]
    p.assert_nothing_to_do()


# --- deliveries -------------------------------------------------------------------------------


def test_a_due_delivery_is_work_and_one_of_a_cooling_channel_waits(probing: Probing) -> None:
    p = probing
    publish(p.backend)
    add_channel(p.n, "ops", p.receiver.url, backoff_ms=300, max_backoff_ms=300)
    rule(p, RuleEvent.FAILED)
    p.pass_time(50)
    fail_run(p)
    fail_run(p)
    assert p.n.enqueue() == 2  # the scan is done: what is left is delivering
    found = p.probe()
    assert found.deliver and found.next_due_in_ms == 0 and not found.enqueue
    clock = p.fake_clock()  # the cool-down lasts until the test moves this clock
    dispatcher, store = p.dispatcher(clock)
    p.receiver.mode = "error"
    report = cycle(dispatcher)
    assert (report.enqueued, report.delivered, report.failed) == (0, 0, 1)
    # the other delivery is due, but its channel cools down in this dispatcher
    assert p.probe().deliver
    assert p.assert_nothing_to_do(skip=("ops",)).next_due_in_ms is None
    store.names()
    waiting = cycle(dispatcher)
    assert waiting.delivered == 0 and waiting.failed == 0
    assert waiting.next_due_in_ms is not None and 290 < waiting.next_due_in_ms <= 300
    assert store.names() == ["outbox_probe"]
    p.receiver.mode = "ok"
    p.pass_time(350, clock)  # the backoff in the database, the cool-down in the dispatcher
    assert p.probe().deliver
    report = cycle(dispatcher)
    assert (report.delivered, report.failed) == (2, 0)
    assert [r.answered for r in p.receiver.received()] == [503, 200, 200]
    p.assert_nothing_to_do()


def test_a_delivery_due_later_is_reported_and_then_sent_on_time(probing: Probing) -> None:
    p = probing
    publish(p.backend)
    add_channel(p.n, "ops", p.receiver.url)
    rule(p, RuleEvent.FAILED)
    p.pass_time(50)
    fail_run(p)
    assert p.n.enqueue() == 1
    # due in a minute: no pause of a slow machine makes it due before the test says so
    p.n.sql("UPDATE notify_outbox SET next_attempt_at_ms = next_attempt_at_ms + 60000")
    dispatcher, store = p.dispatcher()
    found = p.probe()
    assert not found.deliver and found.next_due_in_ms is not None
    assert 30_000 < found.next_due_in_ms <= 60_000
    report = cycle(dispatcher)
    assert report.delivered == 0
    assert report.next_due_in_ms is not None and 30_000 < report.next_due_in_ms <= 60_000
    assert store.names() == ["outbox_probe"]
    # the minute is up: due again at the moment it was enqueued for
    p.n.sql("UPDATE notify_outbox SET next_attempt_at_ms = next_attempt_at_ms - 60000")
    assert cycle(dispatcher).delivered == 1


def test_after_a_saturated_cycle_the_next_one_does_not_ask(probing: Probing) -> None:
    p = probing
    publish(p.backend)
    add_channel(p.n, "ops", p.receiver.url)
    rule(p, RuleEvent.FAILED)
    p.pass_time(50)
    fail_run(p)
    fail_run(p)
    assert p.n.enqueue() == 2
    dispatcher, store = p.dispatcher(deliveries_per_cycle=1)
    first = cycle(dispatcher)
    assert (first.delivered, first.saturated) == (1, True)
    assert store.names()[0] == "outbox_probe"
    second = cycle(dispatcher)  # more was waiting for sure: straight to work
    assert (second.delivered, second.saturated) == (1, True)
    assert "outbox_probe" not in store.names()
    third = cycle(dispatcher)
    assert (third.delivered, third.saturated) == (0, False)
    assert "outbox_probe" not in store.names()
    assert cycle(dispatcher) == NotifyReport()
    assert store.names() == ["outbox_probe"]


# --- the tidy -----------------------------------------------------------------------------------


def test_the_tidy_is_asked_only_when_due_and_then_does_its_work(probing: Probing) -> None:
    p = probing
    publish(p.backend)
    add_channel(p.n, "ops", p.receiver.url)
    add_channel(p.n, "gone", p.receiver.url)
    rule(p, RuleEvent.FAILED)
    rule(p, RuleEvent.FAILED, channel="gone")
    p.pass_time(50)
    fail_run(p)
    assert p.n.enqueue() == 2
    # "ops": its last attempt's sender vanished; "gone": its channel is removed
    p.n.sql("UPDATE notify_outbox SET attempts = max_attempts WHERE channel = 'ops'")
    p.n.admin.channel_remove("gone")
    found = p.probe()
    assert found.idle  # nothing to send or scan, and the tidy was not asked
    assert p.probe(tidy=True).tidy
    dispatcher, store = p.dispatcher()
    assert cycle(dispatcher).dead == 0
    assert [name for name in store.names()][:2] == ["outbox_probe", "outbox_maintain"]
    assert sorted((r["channel"], r["status"]) for r in p.n.outbox()) == [
        ("gone", "dead"), ("ops", "dead")]
    assert [d.code for d in p.diagnostics] == ["QL_NOTIFY_DEAD"]
    assert not p.probe(tidy=True).tidy
    p.pass_time(100)
    assert p.probe(retention_ms=50).purge and not p.probe().purge
    assert not p.probe(retention_ms=RETENTION_MS).purge
    assert p.n.runtime.outbox_maintain(OutboxMaintainParams(retention_ms=50)).purged == 2
    p.assert_nothing_to_do(retention_ms=50)


def test_the_dispatcher_asks_the_tidy_questions_on_the_tidy_schedule(probing: Probing) -> None:
    p = probing
    # the schedule follows the dispatcher's monotonic clock: a fake one on every database
    clock = p.clock if isinstance(p.clock, FakeClock) else FakeClock()
    dispatcher, store = p.dispatcher(clock, tidy_every_s=30.0, purge_every_s=3600.0)

    def asked() -> tuple[bool, int | None]:
        [(name, (params,))] = store.calls
        store.calls.clear()
        assert name == "outbox_probe"
        return params.tidy, params.retention_ms

    cycle(dispatcher)
    assert asked() == (True, RETENTION_MS)  # the first cycle: tidy and purge are due
    cycle(dispatcher)
    assert asked() == (False, None)  # found nothing to tidy: that counts as done
    clock.advance(29_000)
    cycle(dispatcher)
    assert asked() == (False, None)
    clock.advance(1_000)
    cycle(dispatcher)
    assert asked() == (True, None)
    cycle(dispatcher)
    assert asked() == (False, None)
    clock.advance(3_600_000)
    cycle(dispatcher)
    assert asked() == (True, RETENTION_MS)


# --- PostgreSQL: what an idle cycle sends -----------------------------------------------------


def _idle_with_rules(n: Notify, receiver: WebhookReceiver) -> None:
    """A database with a channel, a rule, started cursors, one delivered and one dead
    delivery, and nothing to do."""
    publish(n.backend)
    add_channel(n, "ops", receiver.url)
    n.admin.rule_add(RuleAddParams(channel="ops", project_id="demo", task_id=None,
                                   events=(RuleEvent.FAILED,)))
    n.backend.pass_time(50)
    _fail_run(n)
    _fail_run(n)
    assert n.enqueue() == 2
    first = n.runtime.outbox_claim(OutboxClaimParams(owner="setup"))
    assert first is not None
    n.sql("UPDATE notify_outbox SET status = 'delivered', lease_owner = NULL, "
          "lease_token = NULL, finished_at_ms = 1 WHERE id = ?", (first.delivery.id,))
    n.sql("UPDATE notify_outbox SET status = 'dead', finished_at_ms = 1 WHERE status = 'pending'")


@contextlib.contextmanager
def wire_trace(connector: SingleConnector) -> Iterator[list[str]]:
    """libpq's trace of every message on the connector's connection while the block runs:
    the yielded list holds its lines once the block has ended (libpq flushes the trace when
    it stops)."""
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "wire.trace"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            with connector.connection() as conn:
                conn.pgconn.trace(fd)
                conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS
                                            | psycopg.pq.Trace.REGRESS_MODE)
            try:
                yield lines
            finally:
                with connector.connection() as conn:
                    conn.pgconn.untrace()
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        lines.extend(path.read_text().splitlines())


def statements_sent(trace: list[str]) -> list[str]:
    """The statements the client asked to run: simple Query messages and Execute messages
    of the extended protocol (a prepared statement runs with Bind and Execute)."""
    return [line for line in trace
            if line.startswith("F\t") and line.split("\t")[2].strip() in ("Query", "Execute")]


def test_an_idle_cycle_sends_one_statement_and_no_transaction(pg_backend: PgBackend) -> None:
    receiver = WebhookReceiver(SECRET).start()
    connector = SingleConnector(pg_backend.db.url("ql_runtime"),
                                application_name="ql-notify:probe-test",
                                settings=DISPATCHER_SESSION)
    try:
        with notify_stores(pg_backend) as n:
            _idle_with_rules(n, receiver)
            store = NotifyStore(open_postgres(connector, index_scans_only=True))
            dispatcher = Dispatcher(store, Sender(SystemClock()),
                                    SystemClock(), owner="probe-test",
                                    settings=NotifySettings(settle_ms=UNSETTLED))
            eager = Dispatcher(store, Sender(SystemClock()), SystemClock(),
                               owner="probe-test",
                               settings=NotifySettings(settle_ms=UNSETTLED, tidy_every_s=0.0,
                                                       purge_every_s=0.0))
            assert cycle(dispatcher) == NotifyReport()  # opens the session; tidy found nothing
            with wire_trace(connector) as idle:
                for _ in range(5):
                    assert cycle(dispatcher) == NotifyReport()
                for _ in range(3):  # the tidy and the purge asked every cycle: still one
                    assert cycle(eager) == NotifyReport()
            sent = statements_sent(idle)
            assert len(sent) == 8, "\n".join(idle)
            assert not any('"BEGIN' in line or '"COMMIT' in line for line in idle)
            completed = [line for line in idle if line.startswith("B\t")
                         and "CommandComplete" in line]
            assert len(completed) == 8 and all('"SELECT 1"' in line for line in completed)
            # the server agrees about which statement that was
            [activity] = n.sql("SELECT query, state FROM pg_stat_activity "
                               "WHERE application_name = 'ql-notify:probe-test' "
                               "AND datname = current_database()")
            assert activity["state"] == "idle"
            assert str(activity["query"]).startswith(PROBE_SQL_START)
            # and the count is not blind: a cycle with work sends far more
            _fail_run(n)
            with wire_trace(connector) as busy:
                report = cycle(dispatcher)
            assert (report.enqueued, report.delivered) == (1, 1)
            assert len(statements_sent(busy)) > 10
            assert any('"BEGIN' in line for line in busy)
            with wire_trace(connector) as after:
                assert cycle(dispatcher) == NotifyReport()
            assert len(statements_sent(after)) == 1
    finally:
        connector.close()
        receiver.stop()


@pytest.fixture
def embedded_backend(request: pytest.FixtureRequest,
                     contract_pg: PgTargets) -> Iterator[PgBackend]:
    """A PostgreSQL backend on the embedded server, whose log the test can read."""
    with _pg_backend(f"pg:{EMBEDDED}", request, contract_pg) as pg:
        yield pg


def test_the_server_logs_one_statement_per_idle_cycle_of_ql_control(
        embedded_backend: PgBackend) -> None:
    """The wiring `ql control` runs (its own connection, application_name ql-notify:<owner>),
    counted by the server with log_statement = all."""
    db = embedded_backend.db
    server = db.server.embedded
    assert isinstance(server, EmbeddedPostgres)
    log = server.data_dir / "server.log"
    owner = f"probe-{uuid.uuid4().hex[:8]}"
    pattern = re.compile(rf" ql-notify:{owner} LOG:  (?:statement|execute [^:]*): ?(.*)$")
    receiver = WebhookReceiver(SECRET).start()
    db.execute(f"ALTER DATABASE {db.name} SET log_statement = 'all'")
    # (its settle window, 5 minutes, outlasts the test: no row settles while it runs)
    service = cluster_notify_service(db.url("ql_runtime"), SystemClock(), owner=owner,
                                     stop_timeout_s=5.0, diagnostics=None)

    def logged(offset: int) -> list[str]:
        """The service's statements logged since ``offset``, all of them: a backend logs a
        statement as it receives it, appending to the log, so every statement the cycles sent
        is there once a marker sent after they returned is."""
        marker = f"ql-probe-marker-{uuid.uuid4().hex}"
        with db.server.connect(db.name) as conn:  # a new session: it logs its statements
            conn.execute(f"SELECT '{marker}'")
        deadline = time.monotonic() + 30
        while True:
            with log.open("rb") as f:
                f.seek(offset)
                text = f.read().decode(errors="replace")
            if marker in text:
                return [m.group(1) for line in text.splitlines() if (m := pattern.search(line))]
            assert time.monotonic() < deadline, "the marker statement never reached the log"
            time.sleep(0.05)

    try:
        with notify_stores(embedded_backend) as n:
            _idle_with_rules(n, receiver)
            run_once = service.loop.run_once  # a cycle of the loop, on this thread
            assert run_once() == NotifyReport()  # opens its session
            offset = log.stat().st_size
            for _ in range(5):
                assert run_once() == NotifyReport()
            idle = logged(offset)
            assert len(idle) == 5, idle
            assert all(line.startswith(PROBE_SQL_START) for line in idle), idle
            assert service.loop.longest_pause_s() == 5.0  # six quiet probes: the longest pause
            _fail_run(n)
            offset = log.stat().st_size
            report = run_once()
            assert (report.enqueued, report.delivered) == (1, 1)
            busy = logged(offset)
            assert len(busy) > 10 and "BEGIN ISOLATION LEVEL READ COMMITTED" in busy, busy
            assert service.loop.longest_pause_s() == 1.0  # work found: the interval again
    finally:
        service.stop()
        receiver.stop()
        db.execute(f"ALTER DATABASE {db.name} RESET log_statement")
