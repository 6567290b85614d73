"""The ``unplaceable`` notification on every database (issue 21, item 2): a queued Run whose
required worker labels no live worker offers is reported once per channel after its rule's
delay, never before; a Run a live worker can take, or one that requires nothing, never is;
a Run that becomes placeable and unplaceable again is not reported twice; two enqueuers
racing, and a restarted dispatcher, write one outbox row per Run and channel; the walk is
bounded per pass and runs along runs_labelled_queued_idx; and the dispatcher sends it.

Time: on SQLite the store's clock is the fake clock, moved forward (workers that should stay
live beat again, as their heartbeat thread would). PostgreSQL stamps with its own clock,
which a test cannot move: there the queued Runs are made older instead (``queued_at_ms``
moved back by as much), which is the same to a judgement made against the database clock.
Nothing sleeps.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from qinglong.clock import SystemClock
from qinglong.diagnostics import Diagnostic
from qinglong.domain.notify.events import DEFAULT_UNPLACEABLE_AFTER_MS, RuleEvent
from qinglong.errors import InvalidInput
from qinglong.notify.dispatcher import Dispatcher, NotifySettings
from qinglong.notify.senders import Sender
from qinglong.storage.instances import InstanceStore
from qinglong.storage.kernel import Tx
from qinglong.storage.notify import NotifyStore
from qinglong.storage.notify.params import (
    OutboxProbeParams,
    RuleAddParams,
    RuleRemoveParams,
    UnplaceableParams,
    UnplaceableReport,
)
from qinglong.storage.notify.unplaceable import UnplaceableScan
from qinglong.storage.sqlfile import load_queries
from qinglong.testing import FakeClock
from tests.contract.conftest import Backend, PgBackend
from tests.contract.test_notify_outbox import SECRET, UNSETTLED, Notify, add_channel, notify_stores
from tests.contract.test_placement import _setup
from tests.support.test_notify_receivers import WebhookReceiver

DELAY = DEFAULT_UNPLACEABLE_AFTER_MS  # 5 minutes
GPU = {"gpu": "a100"}


@dataclass
class Queue:
    n: Notify
    workers: InstanceStore
    live: set[str] = field(default_factory=set)  # the workers this test keeps beating
    runs: dict[str, str] = field(default_factory=dict)  # task -> its queued Run

    @property
    def backend(self) -> Backend:
        return self.n.backend

    def start(self, worker: str, labels: dict[str, str | None]) -> None:
        self.workers.instance_start(worker, "worker", "host", 4242, labels=labels)
        self.live.add(worker)

    def stop(self, worker: str) -> None:
        self.workers.instance_stop(worker)
        self.live.discard(worker)

    def wait(self, ms: int) -> None:
        """``ms`` pass for the queued Runs (see the module's docstring); the live workers
        stay live."""
        if not self.backend.capabilities.database_clock:
            self.backend.pass_time(ms)  # the fake clock
            for worker in self.live:
                assert self.workers.instance_beat(worker)
        else:
            self.backend.sql("UPDATE runs SET queued_at_ms = queued_at_ms - ? "
                             "WHERE status = 'queued'", ms)

    def scan(self, store: NotifyStore | None = None, **params: Any) -> UnplaceableReport:
        return (store or self.n.runtime).outbox_unplaceable(UnplaceableParams(**params))

    def outbox(self) -> list[tuple[str, str, str | None]]:
        return [(r["channel"], r["source_key"], r["run_id"]) for r in self.n.sql(
            "SELECT channel, source_key, run_id FROM notify_outbox "
            "WHERE event = 'run.unplaceable' ORDER BY channel, source_key")]

    def document(self, run_id: str, channel: str = "ops") -> dict[str, Any]:
        [row] = self.backend.sql("SELECT payload FROM notify_outbox WHERE run_id = ? "
                                 "AND channel = ?", run_id, channel)
        value = row["payload"]
        return json.loads(value) if isinstance(value, str) else dict(value)


def rule(q: Queue, channel: str = "ops", task: str | None = None,
         after_ms: int | None = None, *events: RuleEvent) -> None:
    q.n.admin.rule_add(RuleAddParams(channel=channel, project_id="demo", task_id=task,
                                     events=events or (RuleEvent.UNPLACEABLE,),
                                     unplaceable_after_ms=after_ms))


@contextlib.contextmanager
def open_queue(backend: Backend) -> Iterator[Queue]:
    """Project demo (tasks plain, gpu and eu-gpu: docs of test_placement), channel ops with a
    rule for unplaceable (the default delay), a live worker offering gpu=a100, and one
    queued Run of each task: the eu-gpu one (gpu and region=eu) no live worker can take."""
    _setup(backend)
    with notify_stores(backend, name="unplaceable") as n:
        q = Queue(n=n, workers=InstanceStore(backend.database("ql_worker", "unplaceable-w")))
        add_channel(n, "ops")
        rule(q)
        q.start("w-gpu", GPU)
        base = backend.now_ms() // 1000 * 1000
        q.runs = {task: backend.admit("demo", task, base - seconds * 1000)
                  for task, seconds in (("gpu", 9), ("eu-gpu", 6), ("plain", 3))}
        yield q


@pytest.fixture
def queue(backend: Backend) -> Iterator[Queue]:
    with open_queue(backend) as q:
        yield q


def key(run_id: str) -> str:
    return f"run.unplaceable:{run_id}"


# --- the delay, and which Runs ---------------------------------------------------------------


def test_a_run_no_live_worker_can_take_is_reported_once_after_the_delay(queue: Queue) -> None:
    q = queue
    eu = q.runs["eu-gpu"]
    assert q.scan() == UnplaceableReport()  # none has waited 5 minutes: not even a page
    assert not q.n.runtime.outbox_probe(OutboxProbeParams(settle_ms=UNSETTLED)).unplaceable
    q.wait(DELAY - 10_000)
    assert q.scan().enqueued == 0 and q.outbox() == []
    q.wait(20_000)
    probe = q.n.runtime.outbox_probe(OutboxProbeParams(settle_ms=UNSETTLED))
    assert probe.unplaceable  # (enqueue too: the rule's scan cursors have not started)
    report = q.scan()
    # the gpu Run (a live worker offers gpu) and the plain one are looked at, not reported
    assert (report.examined, report.enqueued, report.next_after) == (2, 1, None)
    assert q.outbox() == [("ops", key(eu), eu)]
    for _ in range(3):
        assert q.scan().enqueued == 0
    assert q.outbox() == [("ops", key(eu), eu)]
    doc = q.document(eu)
    assert doc["event"] == "run.unplaceable" and doc["task"] == "eu-gpu"
    assert doc["run"]["id"] == eu and doc["run"]["status"] == "queued"
    placement = doc["placement"]
    assert placement["requires"] == ["gpu", "region=eu"]
    assert placement["reason"] == "no live worker offers gpu, region=eu"
    assert placement["after_ms"] == DELAY and placement["waited_ms"] >= DELAY
    assert doc["title"] == "qinglong: demo/eu-gpu waits for a worker"
    assert "no live worker offers gpu, region=eu" in doc["summary"]
    assert doc["misfire"] is None and doc["recovery"] is None


def test_a_run_reported_is_not_reported_again_when_it_becomes_unplaceable_again(
        queue: Queue) -> None:
    q = queue
    gpu, eu = q.runs["gpu"], q.runs["eu-gpu"]
    q.wait(DELAY + 1_000)
    assert q.scan().enqueued == 1
    q.stop("w-gpu")  # a stopped worker offers nothing: the gpu Run has no live worker now
    assert q.scan().enqueued == 1
    assert q.outbox() == sorted([("ops", key(eu), eu), ("ops", key(gpu), gpu)])
    q.start("w-gpu", GPU)  # placeable again ...
    assert q.scan().enqueued == 0
    q.stop("w-gpu")  # ... and unplaceable again: reported once is once
    assert q.scan().enqueued == 0
    assert len(q.outbox()) == 2


def test_a_worker_that_stopped_beating_offers_nothing(queue: Queue) -> None:
    """Live means seen within the last 30 s (and not stopped), as for /metrics."""
    q = queue
    q.live.discard("w-gpu")  # it crashed: no more heartbeats, no clean stop
    q.backend.sql("UPDATE instances SET seen_at_ms = seen_at_ms - 31000 "
                  "WHERE instance_id = 'w-gpu'")
    q.wait(DELAY + 1_000)
    assert q.scan().enqueued == 2
    assert {run for _, _, run in q.outbox()} == {q.runs["gpu"], q.runs["eu-gpu"]}


def test_a_run_that_requires_nothing_or_that_a_worker_can_take_is_never_reported(
        queue: Queue) -> None:
    q = queue
    q.start("w-eu", {"gpu": None, "region": "eu"})
    q.wait(7 * 86_400_000 + 1)
    assert q.scan().enqueued == 0 and q.outbox() == []


# --- rules -------------------------------------------------------------------------------------


def test_each_channel_waits_its_rules_delay_and_is_told_once(queue: Queue) -> None:
    q = queue
    eu = q.runs["eu-gpu"]
    add_channel(q.n, "pager")
    rule(q, "pager", "eu-gpu", 3_600_000)  # this task only, after an hour
    rule(q, "pager", None, 7_200_000)  # and every task, after two: the shorter one counts
    q.wait(DELAY + 1_000)
    assert q.scan().enqueued == 1 and q.outbox() == [("ops", key(eu), eu)]
    q.wait(3_600_000)
    assert q.scan().enqueued == 1
    assert q.outbox() == [("ops", key(eu), eu), ("pager", key(eu), eu)]
    assert q.document(eu, "pager")["placement"]["after_ms"] == 3_600_000
    q.wait(3_600_000)
    assert q.scan().enqueued == 0


def test_a_rules_delay_is_listed_kept_and_changed(queue: Queue) -> None:
    q = queue
    admin = q.n.admin

    def delays() -> dict[tuple[str, str | None], int | None]:
        return {(r.channel, r.task_id): r.unplaceable_after_ms for r in admin.rule_list()}

    assert delays() == {("ops", None): DELAY}
    rule(q, "ops", None, None, RuleEvent.FAILED, RuleEvent.UNPLACEABLE)  # kept
    rule(q, "ops", "gpu", None, RuleEvent.FAILED)  # no unplaceable: no delay
    assert delays() == {("ops", None): DELAY, ("ops", "gpu"): None}
    rule(q, "ops", None, 600_000)  # changed
    assert delays() == {("ops", None): 600_000, ("ops", "gpu"): None}
    for after, events in ((59_999, (RuleEvent.UNPLACEABLE,)),
                          (7 * 86_400_000 + 1, (RuleEvent.UNPLACEABLE,)),
                          (600_000, (RuleEvent.FAILED,))):
        with pytest.raises(InvalidInput) as caught:
            rule(q, "ops", "gpu", after, *events)
        assert caught.value.field == "unplaceable_after"
    assert delays() == {("ops", None): 600_000, ("ops", "gpu"): None}


def test_removing_the_event_or_the_channel_stops_it(queue: Queue) -> None:
    q = queue
    q.n.admin.rule_remove(RuleRemoveParams(channel="ops", project_id="demo", task_id=None,
                                           events=(RuleEvent.UNPLACEABLE,)))
    assert not q.n.admin.rule_list()
    q.wait(DELAY + 1_000)
    assert q.scan() == UnplaceableReport()  # no rule: no page at all
    assert q.outbox() == []


# --- at scale: bounded passes along an index, and races -----------------------------------------


def test_a_pass_is_bounded_and_the_walk_goes_on_where_it_ended(queue: Queue) -> None:
    q = queue
    q.stop("w-gpu")  # now the gpu and eu-gpu Runs are both unplaceable
    q.wait(DELAY + 1_000)
    first = q.scan(limit=1)
    assert (first.examined, first.enqueued) == (1, 1) and first.next_after is not None
    second = q.scan(limit=1, after=first.next_after)
    assert (second.examined, second.enqueued) == (1, 1) and second.next_after is not None
    last = q.scan(limit=1, after=second.next_after)  # the plain Run is not in the walk
    assert last == UnplaceableReport()
    assert {run for _, _, run in q.outbox()} == {q.runs["gpu"], q.runs["eu-gpu"]}


def test_the_walk_reads_the_labelled_queue_index(queue: Queue) -> None:
    q = queue
    backend = q.backend
    args = {"after_ms": -1, "after_id": "", "now_ms": backend.now_ms(), "limit": 500}
    if backend.capabilities.name == "postgresql":
        statement = load_queries("qinglong.storage.postgres")["notify_unplaceable_page"]
        with psycopg.connect(backend.url("ql_runtime")) as conn:
            conn.execute("SET enable_seqscan = off")  # as a replica's dispatcher session
            rows = conn.execute("EXPLAIN " + statement, args).fetchall()
        plan = " ".join(str(value) for row in rows for value in row)
    else:
        statement = load_queries("qinglong.storage.sqlite")["notify_unplaceable_page"]
        plan = " ".join(str(row["detail"]) for row in backend.sql(
            "EXPLAIN QUERY PLAN " + statement.replace(":after_ms", "-1")
            .replace(":after_id", "''").replace(":now_ms", str(args["now_ms"]))
            .replace(":limit", "500")))
    assert "runs_labelled_queued_idx" in plan, plan


def test_two_enqueuers_racing_write_one_row_per_run_and_channel(queue: Queue) -> None:
    q = queue
    backend = q.backend
    other = NotifyStore(backend.database("ql_runtime", "unplaceable-other"))
    q.stop("w-gpu")
    q.wait(DELAY + 1_000)
    barrier = threading.Barrier(2)
    reports: list[UnplaceableReport] = []
    errors: list[BaseException] = []

    def race(store: NotifyStore) -> None:
        try:
            barrier.wait(timeout=10)
            reports.append(q.scan(store))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(store,)) for store in (q.n.runtime, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert sum(r.enqueued for r in reports) == 2  # the gpu and eu-gpu Runs, once each
    assert len(q.outbox()) == 2
    assert q.scan(other).enqueued == 0 and q.scan().enqueued == 0  # and a restart: none
    assert len(q.outbox()) == 2


def test_an_enqueuer_waits_for_one_in_flight_and_then_writes_nothing(
        pg_backend: PgBackend) -> None:
    """Two replicas on PostgreSQL, interleaved for certain: one replica's pass has written its
    rows and not committed yet; the other's pass waits on the outbox's unique key for it, and
    once it commits, writes nothing for those Runs."""
    with open_queue(pg_backend) as q:
        q.stop("w-gpu")
        q.wait(DELAY + 1_000)
        held = pg_backend.database("ql_runtime", "unplaceable-held")
        release, written = threading.Event(), threading.Event()
        results: dict[str, UnplaceableReport] = {}
        errors: list[BaseException] = []

        def in_flight(tx: Tx) -> UnplaceableReport:
            report = UnplaceableScan(tx).scan(UnplaceableParams())
            written.set()
            assert release.wait(timeout=30)
            return report

        def run(name: str, work: Any) -> None:
            try:
                results[name] = work()
            except BaseException as exc:  # reported below
                errors.append(exc)

        first = threading.Thread(target=run, args=("first", lambda: held.write(
            "hold a pass open", in_flight, isolation="read committed")))
        first.start()
        assert written.wait(timeout=30)
        other = NotifyStore(pg_backend.database("ql_runtime", "unplaceable-second"))
        second = threading.Thread(target=run, args=("second", lambda: q.scan(other)))
        second.start()
        waiting = ("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                   "AND application_name = 'unplaceable-second' AND datname = current_database()")
        blocked = 0
        while not blocked and second.is_alive():  # until the second waits on the first's rows
            threading.Event().wait(0.01)
            blocked = int(pg_backend.db.execute(waiting)[0]["n"])  # type: ignore[call-overload]
        release.set()
        for thread in (first, second):
            thread.join(timeout=30)
        assert errors == [] and blocked == 1, "the second pass did not wait for the first"
        assert (results["first"].enqueued, results["second"].enqueued) == (2, 0)
        assert len(q.outbox()) == 2


# --- the dispatcher ---------------------------------------------------------------------------


def test_the_dispatcher_sends_it_once_and_keeps_quiet_about_it(queue: Queue) -> None:
    q = queue
    receiver = WebhookReceiver(SECRET).start()
    diagnostics: list[Diagnostic] = []
    try:
        add_channel(q.n, "hook", receiver.url)
        rule(q, "hook")
        clock = FakeClock()  # the dispatcher's pace (the store keeps its own clock)
        dispatcher = Dispatcher(q.n.runtime, Sender(SystemClock()), clock, owner="u",
                                diagnostics=diagnostics.append, jitter=lambda: 1.0,
                                settings=NotifySettings(settle_ms=UNSETTLED))
        dispatcher.run_cycle()  # the scan cursors start
        q.wait(DELAY + 1_000)
        report = dispatcher.run_cycle()
        assert (report.enqueued, report.delivered) == (2, 1)  # ops's row goes nowhere real
        [got] = receiver.received()
        assert got.document["event"] == "run.unplaceable"
        assert got.document["run"]["id"] == q.runs["eu-gpu"]
        for _ in range(3):  # within the pace the walk is not looked at again
            clock.advance(1_000)
            assert dispatcher.run_cycle().enqueued == 0
        clock.advance(15_000)
        assert dispatcher.run_cycle().enqueued == 0  # looked at again: already sent
        assert len(receiver.received()) == 1
        assert [d for d in diagnostics if d.code != "QL_NOTIFY_RETRY"] == []
    finally:
        receiver.stop()
