"""Interval and one-shot triggers through the one scheduler, on SQLite and on every
PostgreSQL server: a one-shot trigger is admitted once (or dropped by its misfire policy) and is
then done -- its row keeps the finished cursor, is never listed, claimed or hinted again, and
lists show it as done -- an interval trigger walks its grid, both are judged by `ql audit`, and
publishing keeps (or refuses) what it should on the store's own clock."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest

from qinglong.audit.model import AuditParams
from qinglong.domain.decision import Decision, Disposition
from qinglong.domain.interval import ceil_second
from qinglong.domain.occurrences import DONE_CURSOR_MS, instant_text
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import InvalidInput
from qinglong.profiles.audit_backend import run_audit
from qinglong.scheduler.coordinator import Coordinator
from qinglong.service.views.triggers import trigger_view
from qinglong.storage.admission.params import CommitOutcome, CommitResult, ScheduleClaimParams
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from tests.contract.conftest import SCHEDULER_OWNER, Backend

SECOND = 1_000


@pytest.fixture
def bed(backend: Backend) -> Backend:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    return backend


def publish(b: Backend, trigger: str, expression: str | None = None, **extra: Any) -> Any:
    return b.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id=trigger, task_id="hello", expression=expression, **extra))


def rows(b: Backend, sql: str, *params: object) -> list[dict[str, Any]]:
    return [dict(r) for r in b.sql(sql, *params)]


def cursor(b: Backend, trigger: str) -> int | None:
    [row] = rows(b, "SELECT next_fire_at_ms FROM trigger_schedules WHERE trigger_id = ?", trigger)
    value = row["next_fire_at_ms"]
    return None if value is None else int(value)


def runs_of(b: Backend, trigger: str) -> list[int]:
    return [int(r["scheduled_for_ms"]) for r in rows(
        b, "SELECT scheduled_for_ms FROM runs WHERE trigger_id = ? ORDER BY scheduled_for_ms",
        trigger)]


def cycle(b: Backend, grace_ms: int = 30_000,
          budget: int = 16) -> list[tuple[Decision, CommitResult]]:
    """One cycle of the coordinator; every decision it committed.

    With ``budget`` equal to the rows due, each row is decided at most once: the cycle does
    not claim a row again that a slow machine let fall due once more in the meantime."""
    seen: list[tuple[Decision, CommitResult]] = []

    def hook(_item: object, decision: Decision, result: CommitResult) -> None:
        seen.append((decision, result))

    Coordinator(b.schedules, owner=SCHEDULER_OWNER, grace_ms=grace_ms, budget=budget,
                new_id=lambda: str(uuid.uuid4()), on_committed=hook, wake_hint=False).run_cycle()
    return seen


def view(b: Backend, trigger: str) -> dict[str, Any]:
    [found] = b.definitions.trigger_list("demo", trigger)
    return trigger_view(found, now_ms=b.now_ms(), next_count=3).to_json()


def next_due_hint(b: Backend) -> int | None:
    return b.schedules.schedule_next_due_in_ms()


def listed_due(b: Backend) -> int:
    """Rows a claim would hand the scheduler now (the claims are let go of again)."""
    claimed = b.schedules.schedule_claim(ScheduleClaimParams(owner=SCHEDULER_OWNER,
                                                             lease_ms=30_000, limit=10))
    b.drop_claims()
    return len(claimed)


def audit(b: Backend, start_ms: int, end_ms: int, trigger: str, grace_ms: int = 30_000) -> Any:
    report = run_audit(b.url("ql_runtime"), b.clock(), AuditParams(start_ms=start_ms, end_ms=end_ms, settle_ms=0,
                                               grace_ms=grace_ms, project_id="demo",
                                               trigger_id=trigger))
    [found] = report.triggers
    assert report.ok, found
    return found


def wait_until(b: Backend, at_ms: int) -> None:
    b.pass_time(max(0, at_ms - b.now_ms()) + 20)


def soon(b: Backend) -> int:
    """A whole second far enough ahead that the cycle initialising a row comes before it, even
    on a slow machine (one second ahead left a loaded machine a few hundred ms)."""
    return ceil_second(b.now_ms()) + 5 * SECOND


def test_a_one_shot_trigger_runs_once_and_is_then_done(bed: Backend) -> None:
    b = bed
    at = soon(b)
    published = publish(b, "launch", f"at {instant_text(at)}").revision
    assert published.spec.kind == "once" and published.spec.timezone == "UTC"
    [(first, _)] = cycle(b, budget=1)
    assert first.disposition is Disposition.INITIALIZE and cursor(b, "launch") == at
    assert view(b, "launch")["next_fire_at_ms"] == [at]
    wait_until(b, at)
    [(decision, result)] = cycle(b)
    assert result.outcome is CommitOutcome.ADMITTED and decision.next_fire_at_ms is None
    assert runs_of(b, "launch") == [at]
    # done: the finished cursor, never listed or claimed again, no wake-up hint
    assert cursor(b, "launch") == DONE_CURSOR_MS
    assert cycle(b) == [] and listed_due(b) == 0
    assert next_due_hint(b) is None
    shown = view(b, "launch")
    assert (shown["state"], shown["done"], shown["next_fire_at"], shown["cursor_ms"]) == (
        "done", True, [], None)
    found = audit(b, at - 5 * SECOND, b.now_ms(), "launch")
    assert (found.expected, found.admitted) == (1, 1)
    # a new instant is a new revision: it fires again
    again = soon(b)
    publish(b, "launch", f"at {instant_text(again)}")
    assert view(b, "launch")["state"] == "firing"
    [(initialized, _)] = cycle(b, budget=1)
    assert initialized.disposition is Disposition.INITIALIZE
    wait_until(b, again)
    [(_, result)] = cycle(b)
    assert result.outcome is CommitOutcome.ADMITTED
    assert runs_of(b, "launch") == [at, again] and cursor(b, "launch") == DONE_CURSOR_MS


@pytest.mark.parametrize("policy", ["skip", "fire_once"])
def test_a_late_one_shot_follows_its_misfire_policy_and_is_done(bed: Backend,
                                                                policy: str) -> None:
    b = bed
    at = soon(b)
    publish(b, "launch", f"at {instant_text(at)}", misfire_policy=policy)
    [(initialized, _)] = cycle(b, grace_ms=0, budget=1)
    assert initialized.disposition is Disposition.INITIALIZE
    wait_until(b, at)
    b.let_time_pass()  # strictly later than the instant: misfired with no grace
    [(decision, _)] = cycle(b, grace_ms=0)
    assert decision.misfired and decision.next_fire_at_ms is None
    assert runs_of(b, "launch") == ([at] if policy == "fire_once" else [])
    [record] = rows(b, "SELECT due_at_ms, skipped_through_ms, next_fire_at_ms, policy "
                       "FROM trigger_schedule_misfires WHERE trigger_id = 'launch'")
    assert (record["due_at_ms"], record["next_fire_at_ms"], record["policy"]) == (
        at, DONE_CURSOR_MS, policy)
    assert cursor(b, "launch") == DONE_CURSOR_MS and cycle(b) == []
    assert view(b, "launch")["state"] == "done"


def test_a_past_instant_is_refused_by_the_stores_clock_unless_published_disabled(
        bed: Backend) -> None:
    b = bed
    past = ceil_second(b.now_ms()) - 10 * SECOND
    with pytest.raises(InvalidInput) as caught:
        publish(b, "late", f"at {instant_text(past)}")
    assert caught.value.field == "at"
    kept = publish(b, "late", f"at {instant_text(past)}", enabled=False)
    assert not kept.revision.enabled
    enabled = publish(b, "late", enabled=True)  # enabling it later: done at once
    assert enabled.created and enabled.revision.enabled
    [(decision, _)] = cycle(b)
    assert decision.disposition is Disposition.INITIALIZE and decision.next_fire_at_ms is None
    assert cursor(b, "late") == DONE_CURSOR_MS and runs_of(b, "late") == []
    assert view(b, "late")["state"] == "done"


def test_an_interval_trigger_walks_its_grid_and_passes_the_audit(bed: Backend) -> None:
    b = bed
    created = publish(b, "beat", "every 1s").revision
    anchor = created.spec.schedule.anchor_ms
    assert anchor == ceil_second(created.created_at_ms)
    assert publish(b, "beat", "every 1s").created is False  # keeps its anchor: unchanged
    admitted: list[int] = []
    deadline = anchor + 3 * SECOND
    while b.now_ms() < deadline:
        for decision, result in cycle(b):
            if result.outcome is CommitOutcome.ADMITTED:
                assert decision.scheduled_for_ms is not None
                admitted.append(decision.scheduled_for_ms)
        b.pass_time(250)
    for decision, result in cycle(b):
        if result.outcome is CommitOutcome.ADMITTED:
            admitted.append(decision.scheduled_for_ms)  # type: ignore[arg-type]
    assert admitted[:4] == [anchor + k * SECOND for k in range(4)]
    assert runs_of(b, "beat") == admitted
    found = audit(b, anchor, admitted[-1], "beat")
    assert found.expected == found.admitted == len(admitted)
    shown = view(b, "beat")
    assert shown["kind"] == "interval" and shown["every_s"] == 1 and shown["anchor_ms"] == anchor
    assert shown["next_fire_at_ms"][:2] == [admitted[-1] + SECOND, admitted[-1] + 2 * SECOND]


def test_kinds_are_stored_with_their_schema(bed: Backend) -> None:
    b = bed
    publish(b, "beat", "every 90s from 2026-12-01T00:00:00Z", timezone="Asia/Shanghai")
    publish(b, "launch", f"at {instant_text(ceil_second(b.now_ms()) + 3_600_000)}")
    publish(b, "nightly", "0 3 * * *", timezone="Europe/Berlin")
    specs = {r["trigger_id"]: r["spec_json"] for r in rows(
        b, "SELECT trigger_id, spec_json FROM trigger_revisions")}
    def decoded(value: Any) -> Any:  # jsonb comes back decoded, SQLite's JSON text does not
        return json.loads(value) if isinstance(value, str) else value

    schemas = {t: decoded(v)["schema"] for t, v in specs.items()}
    assert schemas == {"beat": "qinglong/interval@v1", "launch": "qinglong/once@v1",
                       "nightly": "qinglong/cron@v1"}
    assert decoded(specs["beat"])["config"] == {
        "expression": "every 1m30s from 2026-12-01T00:00:00Z", "timezone": "Asia/Shanghai",
        "misfirePolicy": "skip"}


def test_backfill_of_what_a_misfire_dropped_from_interval_and_one_shot_triggers(
        bed: Backend) -> None:
    from qinglong.domain.backfill import BackfillRequest
    from qinglong.service.backfill import Backfills, plan_view
    from tests.contract.test_backfill import backfill_store

    b = bed
    at = soon(b)
    beat = publish(b, "beat", f"every 1s from {instant_text(at)}").revision
    anchor = beat.spec.schedule.anchor_ms
    assert anchor == at
    launch = publish(b, "launch", f"at {instant_text(at)}").revision
    # a budget of the two rows: each is decided once per cycle (with no grace, the interval
    # misfires again whenever a second passes between its commit and a re-claim)
    initialized = cycle(b, grace_ms=0, budget=2)
    assert [d.disposition for d, _ in initialized] == [Disposition.INITIALIZE] * 2
    wait_until(b, anchor + 3 * SECOND)
    b.let_time_pass()
    decided = cycle(b, grace_ms=0, budget=2)  # both late with no grace: skipped
    assert all(d.misfired and d.scheduled_for_ms is None for d, _ in decided) and len(decided) == 2
    assert cursor(b, "launch") == DONE_CURSOR_MS
    resumed = cursor(b, "beat")  # the interval resumes here: nothing after it was decided
    assert resumed is not None and resumed > anchor + 3 * SECOND
    store = backfill_store(b)
    service = Backfills(store, b.clock(), wait=lambda _s, stop: stop.is_set())
    for trigger, published in (("launch", launch), ("beat", beat)):
        stop_at = cursor(b, trigger)
        assert stop_at is not None
        to_ms = min(stop_at - 1, b.now_ms())
        request = BackfillRequest(project_id="demo", trigger_id=trigger,
                                  from_ms=published.created_at_ms, to_ms=to_ms, actor="alice")
        plan = service.plan(request)
        view_ = plan_view(plan)
        if trigger == "launch":
            assert plan.to_admit == (at,) and view_.horizon is None
            assert view_.kind == "once" and view_.cron is None
        else:  # every second of the grid in the window that has no Run yet
            grid = range(anchor, to_ms + 1, SECOND)
            assert plan.to_admit == tuple(t for t in grid if t not in runs_of(b, "beat"))
            assert len(plan.to_admit) >= 3
        done = service.run(plan, rate=1000.0, stop=threading.Event())
        assert done.state == "done" and done.admitted == len(plan.to_admit)
        assert service.run(service.plan(request), rate=1000.0,
                           stop=threading.Event()).admitted == 0  # nothing twice
    assert runs_of(b, "launch") == [at]
    found = audit(b, at - SECOND, at, "launch", grace_ms=0)
    assert (found.expected, found.gaps_backfilled, found.admitted) == (1, 1, 0)
    beats = audit(b, anchor, resumed - 1, "beat", grace_ms=0)
    assert beats.expected == beats.admitted + beats.gaps_backfilled
