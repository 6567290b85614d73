"""RequestAdmissions contract (`ql trigger backfill`) on every database, through the service.

A backfill judges its window against the trigger's current schedule and admits each of its
occurrences that has no Run -- one transaction each, the rows of every admission (queued Run,
claimed first Attempt, run.created + run.queued), origin backfill -- and nothing else: a rerun
is a no-op, occurrences with a scheduled Run are left alone, a window reaching the
schedule's cursor (the scheduler's to decide) is refused, as are a disabled, deleted or
stale-pinned trigger and an archived project, all writing nothing. Concurrent backfills still
admit one Run per occurrence, and the audit explains every backfilled occurrence.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from qinglong.audit.model import AuditParams
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import BackfillRequest, utc_text
from qinglong.domain.manual import ManualRequest
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.domain.trigger import Overlap, OverlapPolicy
from qinglong.errors import (
    InvalidInput,
    NotFound,
    NotRunnable,
    PermissionDenied,
    QinglongError,
)
from qinglong.profiles.audit_backend import run_audit
from qinglong.scheduler.coordinator import Coordinator
from qinglong.service.backfill import BackfillPlan, BackfillProgress, Backfills
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.admission.params import (
    BackfillAdmitParams,
    BackfillAdmitResult,
    CommitOutcome,
    CommitResult,
    ManualRunParams,
)
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.testing import FakeClock
from tests.contract.conftest import SCHEDULER_OWNER, Backend, PgBackend
from tests.contract.test_execution_audit import audit as execution_audit
from tests.contract.test_manual_runs import count_runs, manual_store, wait_for
from tests.support.held_commits import HeldCommits

SECOND = 1_000
FAST = 1000.0  # admissions per second: pacing is tested in tests/unit/test_backfill.py


def next_second(ms: int) -> int:
    return (ms // SECOND + 1) * SECOND


def backfill_store(backend: Backend, role: str = "ql_runtime", **options: float) -> RequestAdmissions:
    """The backfill store as ``role`` (a connection of its own on PostgreSQL, closed with the
    backend); ``options`` go to the store (its deadlines)."""
    return RequestAdmissions(backend.database(role, "contract-backfill"), **options)


@dataclass
class Bed:
    backend: Backend
    store: RequestAdmissions
    first: int  # the trigger's first occurrence: the first whole second after its publish

    def service(self, store: RequestAdmissions | None = None) -> Backfills:
        clock = self.backend.clock()
        if isinstance(clock, FakeClock):
            fake = clock

            def wait(seconds: float, stop: threading.Event) -> bool:
                fake.advance(max(1, round(seconds * 1000)))  # pacing passes on the fake clock
                return stop.is_set()

            return Backfills(store or self.store, clock, wait=wait)
        return Backfills(store or self.store, clock)

    def request(self, from_ms: int, to_ms: int, *, actor: str = "alice",
                trigger: str = "tick") -> BackfillRequest:
        return BackfillRequest(project_id="demo", trigger_id=trigger, from_ms=from_ms,
                               to_ms=to_ms, actor=actor)

    def plan(self, from_ms: int, to_ms: int, **kwargs: Any) -> BackfillPlan:
        return self.service().plan(self.request(from_ms, to_ms, **kwargs))

    def backfill(self, from_ms: int, to_ms: int, *, store: RequestAdmissions | None = None,
                 stop: threading.Event | None = None, **kwargs: Any) -> BackfillProgress:
        service = self.service(store)
        plan = service.plan(self.request(from_ms, to_ms, **kwargs))
        return service.run(plan, rate=FAST, stop=stop or threading.Event())

    def rows(self, sql: str, *params: object) -> list[dict[str, Any]]:
        return [dict(r) for r in self.backend.sql(sql, *params)]

    def runs(self, trigger: str = "tick") -> list[tuple[int, str]]:
        """(scheduled_for_ms, trigger_type) of the trigger's Runs, in order."""
        return [(int(r["scheduled_for_ms"]), str(r["trigger_type"])) for r in self.rows(
            "SELECT scheduled_for_ms, trigger_type FROM runs WHERE trigger_id = ? "
            "ORDER BY scheduled_for_ms, trigger_type", trigger)]

    def counts(self) -> tuple[int, int, int]:
        [row] = self.rows("SELECT (SELECT count(*) FROM runs) AS r, (SELECT count(*) FROM "
                          "run_attempts) AS a, (SELECT count(*) FROM run_events) AS e")
        return int(row["r"]), int(row["a"]), int(row["e"])

    def until(self, at_ms: int) -> None:
        """Let the adapter's clock reach ``at_ms``."""
        left = at_ms - self.backend.now_ms()
        if left > 0:
            self.backend.pass_time(left)


def scheduler_admits(backend: Backend, at_ms: int) -> str:
    """The scheduler admits the occurrence of ``tick`` at ``at_ms`` (made due there, the
    clock just past it) and nothing after it; returns the Run id. On a real clock a slow
    cycle may come after the next occurrence is due as well, and a full cycle would admit
    that one too: the cycle's budget is this one claim."""
    backend.set_cursor("demo", "tick", at_ms)
    results: list[CommitResult] = []
    coordinator = Coordinator(backend.schedules, owner=SCHEDULER_OWNER, budget=1,
                              wake_hint=False,
                              on_committed=lambda _c, _d, result: results.append(result))
    report = coordinator.run_cycle()
    assert report.admitted == 1 and len(results) == 1, (report, results)
    [admitted] = results
    assert admitted.outcome is CommitOutcome.ADMITTED and admitted.run_id is not None
    return admitted.run_id


@pytest.fixture
def bed(backend: Backend) -> Iterator[Bed]:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    published = d.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="tick", task_id="hello", expression="* * * * * *",
        timezone="UTC", overlap=Overlap(policy=OverlapPolicy.QUEUE, queue_limit=5)))
    yield Bed(backend, backfill_store(backend), next_second(published.revision.created_at_ms))


# --- admission -------------------------------------------------------------------------------


def test_a_window_of_missed_occurrences_gets_exactly_one_run_each(bed: Bed) -> None:
    first = bed.first
    bed.backend.set_cursor("demo", "tick", first + 10 * SECOND)  # decided up to there
    progress = bed.backfill(first, first + 5 * SECOND + 500)
    assert (progress.state, progress.admitted, progress.existing, progress.skipped) == (
        "done", 6, 0, 0)
    wanted = [first + n * SECOND for n in range(6)]
    assert [at for at, _ in progress.runs] == wanted
    assert bed.runs() == [(at, "backfill") for at in wanted]
    assert bed.counts() == (6, 6, 12)
    at, run_id = progress.runs[2]
    detail = bed.backend.runs.run_get(run_id)
    run = detail.run
    assert (run.status, run.trigger_type, run.execution_origin, run.triggered_by) == (
        "queued", "backfill", "backfill_user", "alice")
    assert (run.project_id, run.task_id, run.trigger_id, run.trigger_revision) == (
        "demo", "hello", "tick", 1)
    assert run.scheduled_for_ms == at and run.idempotency_key == f"ql3:backfill:v1:tick:{at}"
    assert run.created_at_ms == run.queued_at_ms
    [attempt] = detail.attempts
    assert (attempt.attempt, attempt.status, attempt.executor_type) == (
        1, "claimed", bed.backend.executor_type)
    assert [(e.sequence, e.type, e.actor_type, e.actor_id) for e in detail.events] == [
        (1, "run.created", "user", "alice"), (2, "run.queued", "user", "alice")]
    created = detail.events[0].payload
    assert (created["origin"], created["requested_by"], created["scheduled_for_ms"],
            created["trigger_revision"], created["task_revision"]) == (
        "backfill_user", "alice", at, 1, 1)
    [raw] = bed.rows("SELECT overlap_policy, overlap_key, overlap_queue_limit FROM runs "
                     "WHERE id = ?", run_id)
    assert raw == {"overlap_policy": "queue", "overlap_key": "tick", "overlap_queue_limit": 5}


def test_a_rerun_is_a_no_op_and_a_wider_window_admits_only_the_rest(bed: Bed) -> None:
    first = bed.first
    bed.backend.set_cursor("demo", "tick", first + 10 * SECOND)
    done = bed.backfill(first + 2 * SECOND, first + 4 * SECOND)
    counts = bed.counts()
    again = bed.backfill(first + 2 * SECOND, first + 4 * SECOND, actor="bob")
    assert (again.admitted, again.existing, again.runs) == (0, 3, [])
    assert bed.counts() == counts
    # the store answers from the database too (a rerun racing the plan): nothing is written
    at, run_id = done.runs[0]
    assert bed.store.backfill_admit(BackfillAdmitParams(
        request=bed.request(first, first + 9 * SECOND), trigger_revision=1,
        occurrence_ms=at)) == BackfillAdmitResult(run_id=run_id, admitted=False)
    assert bed.counts() == counts
    wider = bed.backfill(first, first + 9 * SECOND)
    assert (wider.admitted, wider.existing) == (7, 3)
    assert bed.runs() == [(first + n * SECOND, "backfill") for n in range(10)]
    assert bed.backend.runs.run_get(run_id).run.triggered_by == "alice"


def test_occurrences_with_a_scheduled_run_are_left_alone(bed: Bed) -> None:
    b, first = bed.backend, bed.first
    manual = None
    clock = b.clock()
    if isinstance(clock, FakeClock):  # a Run fired by hand at the very instant of an occurrence
        clock.set(first)
        manual = manual_store(b).run_admit_manual(ManualRunParams(request=ManualRequest(
            project_id="demo", trigger_id="tick", request_id="by-hand", actor="carol"))).run_id
    scheduled = []
    for at in (first + SECOND, first + 3 * SECOND):
        bed.until(at)
        scheduled.append(scheduler_admits(b, at))
    progress = bed.backfill(first, first + 3 * SECOND)
    assert (progress.admitted, progress.existing) == (2, 2)
    assert [at for at, _ in progress.runs] == [first, first + 2 * SECOND]
    expected = [(first, "backfill"), (first + SECOND, "cron"), (first + 2 * SECOND, "backfill"),
                (first + 3 * SECOND, "cron")]
    if manual is not None:  # a manual Run stands for no occurrence: the backfill admitted it
        expected.insert(1, (first, "manual"))
    assert bed.runs() == expected
    for run_id in scheduled:
        run = b.runs.run_get(run_id).run
        assert (run.trigger_type, run.status, run.version) == ("cron", "queued", 2)


# --- refusals: nothing written ---------------------------------------------------------------


def _refused(bed: Bed, error: type[QinglongError], from_ms: int, to_ms: int,
             **kwargs: Any) -> QinglongError:
    counts = bed.counts()
    with pytest.raises(error) as refused:
        bed.backfill(from_ms, to_ms, **kwargs)
    assert bed.counts() == counts
    return refused.value


def test_a_window_reaching_the_cursor_is_refused(bed: Bed) -> None:
    first = bed.first
    # nothing decided yet: the scheduler owns everything from the revision's publish on
    refused = _refused(bed, InvalidInput, first, first + SECOND)
    assert isinstance(refused, InvalidInput) and refused.field == "to"
    assert "has not decided an occurrence" in refused.rule
    cursor = first + 5 * SECOND
    bed.backend.set_cursor("demo", "tick", cursor)
    refused = _refused(bed, InvalidInput, first, cursor)
    assert isinstance(refused, InvalidInput) and refused.field == "to"
    assert utc_text(cursor) in refused.rule and "cursor" in refused.rule
    assert bed.counts() == (0, 0, 0)
    assert bed.backfill(first, cursor - 1).admitted == 5  # up to just before the cursor


def test_a_window_of_more_than_ten_thousand_occurrences_is_refused(bed: Bed) -> None:
    first = bed.first
    bed.backend.set_cursor("demo", "tick", first + 20_000 * SECOND)
    refused = _refused(bed, InvalidInput, first, first + 10_000 * SECOND)
    assert isinstance(refused, InvalidInput) and "more than 10000" in refused.rule
    assert f"--to {first + 9_999 * SECOND}" in refused.rule
    plan = bed.plan(first, first + 9_999 * SECOND)  # exactly the bound
    assert len(plan.occurrences) == 10_000


def test_disabled_deleted_stale_and_archived_are_refused_and_write_nothing(bed: Bed) -> None:
    b, d, first = bed.backend, bed.backend.definitions, bed.first
    window = (first, first + 2 * SECOND)
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="tick", enabled=False))
    assert "disabled" in _refused(bed, NotRunnable, *window).message
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="tick", enabled=True))
    b.set_cursor("demo", "tick", first + 10 * SECOND)
    d.project_archive("demo")
    assert "archived" in _refused(bed, NotRunnable, *window).message
    d.project_unarchive("demo")
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="true")),
                                     enabled=False, expected_revision=1))
    assert "disabled" in _refused(bed, NotRunnable, *window).message
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="echo 3")),
                                     repin_triggers=False, expected_revision=2))
    assert "pins revision" in _refused(bed, NotRunnable, *window).message
    assert "'nope'" in _refused(bed, NotFound, *window, trigger="nope").message
    d.trigger_delete("demo", "tick")
    assert "'tick'" in _refused(bed, NotFound, *window).message
    assert bed.counts() == (0, 0, 0)


def test_each_admission_checks_again_and_stops_at_a_refusal(bed: Bed) -> None:
    """What changes after the plan is seen by the next admission: a disabled trigger, a
    republished one (its schedule may have changed), a cursor that moved into the window."""
    b, d, first = bed.backend, bed.backend.definitions, bed.first
    b.set_cursor("demo", "tick", first + 10 * SECOND)
    service = bed.service()
    plan = service.plan(bed.request(first, first + 4 * SECOND))
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="tick", enabled=False))
    progress = service.run(plan, rate=FAST, stop=threading.Event())
    assert (progress.state, progress.admitted, progress.skipped) == ("failed", 0, 5)
    assert isinstance(progress.error, NotRunnable) and "disabled" in progress.error.message
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="tick", enabled=True))
    progress = service.run(plan, rate=FAST, stop=threading.Event())  # judged against rev 1
    assert isinstance(progress.error, NotRunnable) and "published again" in progress.error.message
    b.set_cursor("demo", "tick", first + 2 * SECOND)  # as if the row were reset to here
    plan = service.plan(bed.request(first, first + SECOND))
    b.set_cursor("demo", "tick", first + SECOND)
    progress = service.run(plan, rate=FAST, stop=threading.Event())
    assert (progress.state, progress.admitted, progress.next_ms) == ("failed", 1, first + SECOND)
    assert isinstance(progress.error, InvalidInput) and "cursor" in progress.error.rule
    assert bed.runs() == [(first, "backfill")]
    with pytest.raises(InvalidInput, match="not an occurrence"):
        bed.store.backfill_admit(BackfillAdmitParams(
            request=bed.request(first - SECOND, first + SECOND), trigger_revision=3,
            occurrence_ms=first - 500))


def test_a_stopped_backfill_carries_on_when_run_again(bed: Bed) -> None:
    first = bed.first
    bed.backend.set_cursor("demo", "tick", first + 10 * SECOND)
    stop = threading.Event()

    class StopAfterThree:
        """The store, with Ctrl-C pressed during the third admission."""

        def __init__(self, inner: RequestAdmissions) -> None:
            self.inner, self.calls = inner, 0

        def __getattr__(self, name: str) -> Callable[..., Any]:
            return getattr(self.inner, name)  # type: ignore[no-any-return]

        def backfill_admit(self, params: BackfillAdmitParams) -> BackfillAdmitResult:
            self.calls += 1
            if self.calls == 3:
                stop.set()
            return self.inner.backfill_admit(params)

    progress = bed.backfill(first, first + 7 * SECOND, stop=stop,
                            store=StopAfterThree(bed.store))
    assert (progress.state, progress.admitted, progress.skipped, progress.next_ms) == (
        "interrupted", 3, 5, first + 3 * SECOND)
    rest = bed.backfill(first, first + 7 * SECOND)
    assert (rest.state, rest.admitted, rest.existing) == ("done", 5, 3)
    assert bed.runs() == [(first + n * SECOND, "backfill") for n in range(8)]


# --- the audits ------------------------------------------------------------------------------


def test_the_audit_explains_backfilled_occurrences_and_stays_clean(bed: Bed) -> None:
    b, first = bed.backend, bed.first
    # the scheduler moved on past first+2..4 without a trace (as a crash of an old release
    # might): unexplained gaps until the backfill admits them
    for at in (first, first + SECOND, first + 5 * SECOND):
        bed.until(at)
        scheduler_admits(b, at)
    clock, url = b.clock(), b.url("ql_runtime")
    params = AuditParams(start_ms=first, end_ms=first + 5 * SECOND, settle_ms=0,
                         project_id="demo", trigger_id="tick")
    before = run_audit(url, clock, params)
    assert before.triggers[0].gaps_unexplained == [first + n * SECOND for n in (2, 3, 4)]
    progress = bed.backfill(first, first + 4 * SECOND)
    assert (progress.admitted, progress.existing) == (3, 2)
    after = run_audit(url, clock, params)
    assert after.ok, (after.triggers, after.execution)
    [tick] = after.triggers
    assert (tick.expected, tick.admitted, tick.gaps_backfilled, tick.duplicates, tick.spurious,
            tick.fenced_out, tick.bad_shape) == (6, 3, 3, 0, [], [], [])
    report = execution_audit(b)
    assert report.violations == 0, report.findings()
    assert report.runs == 6


# --- concurrency ---------------------------------------------------------------------------


def test_concurrent_backfills_admit_one_run_per_occurrence(bed: Bed) -> None:
    b, first = bed.backend, bed.first
    b.set_cursor("demo", "tick", first + 30 * SECOND)
    twins = 3
    barrier = threading.Barrier(twins)
    results: list[BackfillProgress] = []
    errors: list[BaseException] = []

    stores = [backfill_store(b) for _ in range(twins)]

    def run(n: int) -> None:
        store = stores[n]
        try:
            plan = bed.service(store).plan(bed.request(first, first + 19 * SECOND,
                                                       actor=f"twin-{n}"))
            barrier.wait(10)
            results.append(bed.service(store).run(plan, rate=FAST, stop=threading.Event()))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(twins)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and len(results) == twins
    assert all(r.state == "done" and r.admitted + r.existing == 20 for r in results), results
    assert sum(r.admitted for r in results) == 20
    assert bed.runs() == [(first + n * SECOND, "backfill") for n in range(20)]
    assert bed.counts() == (20, 20, 40)


def test_twin_admissions_of_one_occurrence_at_the_same_instant_admit_one_run(bed: Bed) -> None:
    """Two stores admit the same occurrence at once, occurrence after occurrence: one Run each
    (on PostgreSQL a serialization conflict or the unique key settles every race)."""
    b, first = bed.backend, bed.first
    b.set_cursor("demo", "tick", first + 30 * SECOND)
    request = bed.request(first, first + 9 * SECOND)
    barrier = threading.Barrier(2)
    results: list[list[BackfillAdmitResult]] = [[], []]
    errors: list[BaseException] = []

    stores = [backfill_store(b) for _ in range(2)]

    def run(n: int) -> None:
        store = stores[n]
        try:
            for k in range(10):
                barrier.wait(10)
                results[n].append(store.backfill_admit(BackfillAdmitParams(
                    request=request, trigger_revision=1, occurrence_ms=first + k * SECOND)))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    for left, right in zip(*results, strict=True):
        assert left.run_id == right.run_id and left.admitted != right.admitted, (left, right)
    assert bed.runs() == [(first + n * SECOND, "backfill") for n in range(10)]
    assert bed.counts() == (10, 10, 20)


# --- PostgreSQL: the role ------------------------------------------------------------------


def test_backfill_needs_ql_runtime_and_ql_admin_is_refused(pg_backend: PgBackend) -> None:
    d = pg_backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    published = d.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="tick", task_id="hello", expression="* * * * * *",
        timezone="UTC"))
    first = next_second(published.revision.created_at_ms)
    pg_backend.set_cursor("demo", "tick", first + 5 * SECOND)
    store = backfill_store(pg_backend, "ql_admin")
    request = BackfillRequest(project_id="demo", trigger_id="tick", from_ms=first,
                              to_ms=first + 2 * SECOND, actor="alice")
    with pytest.raises(PermissionDenied) as refused:
        Backfills(store, pg_backend.clock()).plan(request)
    assert "ql_admin" in refused.value.message
    with pytest.raises(PermissionDenied):
        store.backfill_admit(BackfillAdmitParams(
            request=request, trigger_revision=1, occurrence_ms=first,
            ids=AdmissionIds.new(lambda: "00000000-0000-4000-8000-000000000001")))
    assert pg_backend.db.execute("SELECT count(*) AS n FROM runs") == [{"n": 0}]


def test_a_lost_commit_reply_is_resolved_by_the_occurrences_key(
        pg_backend: PgBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    d = pg_backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    published = d.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="tick", task_id="hello", expression="* * * * * *",
        timezone="UTC"))
    first = next_second(published.revision.created_at_ms)
    pg_backend.set_cursor("demo", "tick", first + 5 * SECOND)
    landed: list[int] = []
    with HeldCommits(pg_backend.db) as held:
        def commit_lands(_settle_s: float) -> None:
            """Where the store waits between a lost reply and its lookup: that commit lands,
            and the next one is held again."""
            landed.append(1)
            held.release()
            wait_for(lambda: count_runs(pg_backend) == len(landed))
            held.hold()

        monkeypatch.setattr("qinglong.storage.admission.on_request.pause", commit_lands)
        store = backfill_store(pg_backend, commit_deadline_s=0.3)
        request = BackfillRequest(project_id="demo", trigger_id="tick", from_ms=first,
                                  to_ms=first + SECOND, actor="alice")
        service = Backfills(store, pg_backend.clock())
        progress = service.run(service.plan(request), rate=FAST, stop=threading.Event())
        assert (progress.state, progress.admitted, progress.in_doubt) == ("done", 2, 2)
        held.release()
        again = store.backfill_admit(BackfillAdmitParams(request=request, trigger_revision=1,
                                                         occurrence_ms=first))
        assert (again.run_id, again.admitted) == (progress.runs[0][1], False)
    assert count_runs(pg_backend) == 2
