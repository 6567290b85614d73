"""Backfill without a database: the window judged against the current schedule (the cursor,
the occurrence bound, DST; not the first publish), the request's rules, the rows of an admission, and
the service's pacing, progress and stop on a fake store and the fake clock."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

import pytest

from qinglong.audit.expansion import nominal_occurrences
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import (
    MAX_OCCURRENCES,
    BackfillRequest,
    BackfillTarget,
    backfill_admission_rows,
    check_rate,
    window_occurrences,
)
from qinglong.domain.task import (
    CommandSpec,
    ExecutorType,
    ShellCommand,
    compile_execution_revision,
    new_task_revision,
)
from qinglong.domain.trigger import CronTriggerSpec, Overlap, OverlapPolicy, new_trigger_revision
from qinglong.errors import InvalidInput, NotRunnable
from qinglong.service.backfill import BackfillProgress, Backfills, summary_view
from qinglong.storage.admission.params import BackfillAdmitParams, BackfillAdmitResult
from qinglong.testing import FakeClock

T0 = 1_799_913_600_000  # 2027-01-14T08:00:00Z
SECOND = 1_000


def target(expression: str = "* * * * * *", timezone: str = "UTC", *, published: int = T0,
           cursor: int | None = T0 + 3_600_000,
           overlap: Overlap | None = None) -> BackfillTarget:
    task = new_task_revision(project="demo", task="hello", revision=1, name="Hello",
                             spec=CommandSpec(command=ShellCommand(command="true")),
                             enabled=True, created_at_ms=published - 1)
    trigger = new_trigger_revision(
        project="demo", trigger="tick", revision=2, task="hello", task_revision=1,
        task_content_digest=task.content_digest,
        spec=CronTriggerSpec.parse(expression=expression, timezone=timezone, misfire="skip",
                                   overlap=overlap),
        enabled=True, created_at_ms=published)
    return BackfillTarget(trigger=trigger, cursor_ms=cursor)


def request(from_ms: int, to_ms: int, actor: str = "alice") -> BackfillRequest:
    return BackfillRequest(project_id="demo", trigger_id="tick", from_ms=from_ms, to_ms=to_ms,
                           actor=actor)


# --- the window --------------------------------------------------------------------------------


def test_the_window_holds_the_current_schedules_occurrences_both_ends_included() -> None:
    assert window_occurrences(request(T0, T0 + 3 * SECOND), target()) == tuple(
        T0 + n * SECOND for n in range(4))
    assert window_occurrences(request(T0 + 1, T0 + 999), target()) == ()
    every_5 = target("*/5 * * * *")
    got = window_occurrences(request(T0 - 3_600_000, T0 - 1), every_5)
    assert len(got) == 12 and got[0] == T0 - 3_600_000 and got[-1] == T0 - 300_000


def test_the_window_must_not_reach_the_horizon() -> None:
    cursor = T0 + 10 * SECOND
    with pytest.raises(InvalidInput) as late:
        window_occurrences(request(T0, cursor), target(cursor=cursor))
    assert late.value.field == "to" and "2027-01-14T08:00:10.000Z" in late.value.rule
    assert "cursor" in late.value.rule
    assert len(window_occurrences(request(T0, cursor - 1), target(cursor=cursor))) == 10
    # no cursor yet: everything from the current revision's publish is the scheduler's
    undecided = target(published=T0 + 60 * SECOND, cursor=None)
    assert undecided.horizon_ms == T0 + 60 * SECOND
    with pytest.raises(InvalidInput, match="has not decided an occurrence"):
        window_occurrences(request(T0, T0 + 60 * SECOND), undecided)


def test_a_window_beyond_the_bound_is_refused_with_where_to_cut_it() -> None:
    wide = target(cursor=T0 + 20_000 * SECOND)
    assert len(window_occurrences(request(T0, T0 + (MAX_OCCURRENCES - 1) * SECOND), wide)) \
        == MAX_OCCURRENCES
    with pytest.raises(InvalidInput) as refused:
        window_occurrences(request(T0, T0 + MAX_OCCURRENCES * SECOND), wide)
    assert f"--to {T0 + (MAX_OCCURRENCES - 1) * SECOND}" in refused.value.rule


@pytest.mark.parametrize(("zone", "start"), [
    ("America/New_York", "2027-03-13T00:00:00-05:00"),  # spring forward on 2027-03-14
    ("Europe/Berlin", "2027-10-30T00:00:00+02:00"),  # fall back on 2027-10-31
])
def test_across_a_dst_change_the_window_is_what_the_scheduler_and_the_audit_compute(
        zone: str, start: str) -> None:
    from datetime import datetime

    begin = int(datetime.fromisoformat(start).timestamp() * 1000)
    end = begin + 3 * 86_400_000
    for expression in ("30 2 * * *", "0 * * * *"):
        schedule = target(expression, zone, published=begin - 1, cursor=end + 1)
        got = window_occurrences(request(begin, end), schedule)
        walked, at = [], schedule.trigger.spec.schedule.first_at_or_after(begin)
        while at <= end:
            walked.append(at)
            at = schedule.trigger.spec.schedule.next_after(at)
        assert list(got) == walked == nominal_occurrences(expression, zone, begin, end)


def test_a_request_and_a_rate_are_checked() -> None:
    for from_ms, to_ms in ((T0 + 1, T0), (-1, T0), (True, T0)):
        with pytest.raises(InvalidInput):
            BackfillRequest(project_id="demo", trigger_id="tick", actor="a", from_ms=from_ms,
                            to_ms=to_ms)
    with pytest.raises(InvalidInput):
        request(T0, T0, actor="tab\there")
    with pytest.raises(InvalidInput):
        BackfillRequest(project_id="Demo", trigger_id="tick", from_ms=T0, to_ms=T0, actor="a")
    assert request(T0, T0).idempotency_key(T0) == f"ql3:backfill:v1:tick:{T0}"
    assert check_rate(10) == 10.0 and check_rate(0.1) == 0.1
    for rate in (0, 0.05, 1001, True):
        with pytest.raises(InvalidInput):
            check_rate(rate)


def test_the_rows_of_a_backfill_admission() -> None:
    queue = target(overlap=Overlap(policy=OverlapPolicy.QUEUE, queue_limit=3))
    task = new_task_revision(project="demo", task="hello", revision=1, name="Hello",
                             spec=CommandSpec(command=ShellCommand(command="true")),
                             enabled=True, created_at_ms=T0 - 1)
    execution = compile_execution_revision(task, ExecutorType.REMOTE_WORKER, created_at_ms=T0)
    ids = AdmissionIds(run_id="r", attempt_id="a", created_event_id="c", queued_event_id="q")
    rows = backfill_admission_rows(request=request(T0, T0 + 9 * SECOND, actor="bob"),
                                   occurrence_ms=T0 + SECOND, task=task, trigger=queue.trigger,
                                   execution=execution, ids=ids, committed_at_ms=T0 + 99_000)
    run = rows.run
    assert (run["trigger_type"], run["execution_origin"], run["triggered_by"],
            run["scheduled_for_ms"], run["created_at_ms"], run["trigger_revision"]) == (
        "backfill", "backfill_user", "bob", T0 + SECOND, T0 + 99_000, 2)
    assert run["idempotency_key"] == f"ql3:backfill:v1:tick:{T0 + SECOND}"
    assert (run["overlap_policy"], run["overlap_key"], run["overlap_queue_limit"]) == (
        "queue", "tick", 3)
    assert rows.attempt["status"] == "claimed" and rows.attempt["executor_type"] == "remote_worker"
    created, queued = rows.events
    assert (created["type"], created["actor_type"], created["actor_id"]) == (
        "run.created", "user", "bob")
    assert (queued["type"], queued["sequence"], queued["attempt_id"]) == ("run.queued", 2, "a")
    assert created["payload"]["backfill_from_ms"] == T0  # type: ignore[index]


# --- the service: pacing, progress, stop ----------------------------------------------------------


@dataclass
class FakeStore:
    clock: FakeClock
    target: BackfillTarget
    existing: dict[int, str] = field(default_factory=dict)
    admitted_at: list[tuple[int, float]] = field(default_factory=list)  # (occurrence, monotonic)
    fail_at: int | None = None

    def backfill_target(self, project_id: str, trigger_id: str) -> BackfillTarget:
        return self.target

    def backfill_runs(self, project_id: str, trigger_id: str, from_ms: int,
                      to_ms: int) -> dict[int, str]:
        return {o: r for o, r in self.existing.items() if from_ms <= o <= to_ms}

    def backfill_admit(self, params: BackfillAdmitParams) -> BackfillAdmitResult:
        if params.occurrence_ms == self.fail_at:
            raise NotRunnable("trigger demo/tick is disabled")
        self.clock.advance(5)  # an admission takes 5 ms
        self.admitted_at.append((params.occurrence_ms, self.clock.monotonic()))
        self.existing[params.occurrence_ms] = f"run-{params.occurrence_ms}"
        return BackfillAdmitResult(run_id=f"run-{params.occurrence_ms}", admitted=True)


def service(store: FakeStore) -> Backfills:
    def wait(seconds: float, stop: threading.Event) -> bool:
        store.clock.advance(round(seconds * 1000))
        return stop.is_set()

    return Backfills(store, store.clock, wait=wait)


def test_admissions_are_paced_to_the_rate_on_the_clock_and_existing_runs_cost_nothing() -> None:
    store = FakeStore(FakeClock(), target(), existing={T0 + SECOND: "cron-run"})
    backfills = service(store)
    plan = backfills.plan(request(T0, T0 + 9 * SECOND))
    assert (len(plan.occurrences), dict(plan.existing), len(plan.to_admit)) == (
        10, {T0 + SECOND: "cron-run"}, 9)
    reports: list[tuple[int, int]] = []
    progress = backfills.run(plan, rate=2, stop=threading.Event(),
                             on_progress=lambda p: reports.append((p.admitted, p.existing)))
    assert (progress.state, progress.admitted, progress.existing, progress.skipped) == (
        "done", 9, 1, 0)
    starts = [at - 0.005 for _, at in store.admitted_at]
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(starts)]
    assert gaps == [0.5] * 8  # two a second, evenly
    assert progress.elapsed_s == pytest.approx(4.005)
    assert reports == [(7, 1)]  # every 3 s: once, after the admission at 3 s
    view = summary_view(plan, progress, 2).to_json()
    assert (view["admitted"], view["already_had_run"], view["skipped"], view["state"],
            view["next_ms"]) == (9, 1, 0, "done", None)
    runs = view["runs"]
    assert isinstance(runs, list)
    assert [r["scheduled_for_ms"] for r in runs][:2] == [T0, T0 + 2 * SECOND]


def test_a_stop_lands_between_two_admissions_and_an_error_stops_with_the_counts() -> None:
    store = FakeStore(FakeClock(), target())
    backfills = service(store)
    plan = backfills.plan(request(T0, T0 + 9 * SECOND))
    stop = threading.Event()

    def press_ctrl_c(progress: BackfillProgress) -> None:
        stop.set()

    progress = backfills.run(plan, rate=1, stop=stop, on_progress=press_ctrl_c,
                             progress_every_s=2)
    assert (progress.state, progress.admitted, progress.skipped, progress.next_ms) == (
        "interrupted", 3, 7, T0 + 3 * SECOND)
    store.fail_at = T0 + 6 * SECOND
    again = backfills.run(backfills.plan(request(T0, T0 + 9 * SECOND)), rate=1000,
                          stop=threading.Event())
    assert (again.state, again.admitted, again.existing, again.skipped, again.next_ms) == (
        "failed", 3, 3, 4, T0 + 6 * SECOND)
    assert isinstance(again.error, NotRunnable)
