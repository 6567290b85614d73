"""The DST policy through the standalone scheduler (the Coordinator on SQLite, deciding at
its claims' times read from the store's clock) under a fake clock that walks, five minutes at a time, over New York's 2027 spring-forward night
(2027-03-14 02:00 -> 03:00 EDT, 07:00Z) and fall-back night (2027-11-07 02:00 -> 01:00 EST,
06:00Z), with a pause that spans the spring-forward change."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime

import pytest

from qinglong.domain.decision import PAUSED_FATE
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.scheduler.coordinator import Coordinator
from qinglong.service.views.triggers import DstView, trigger_view
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPauseParams,
    TriggerPublishParams,
    TriggerResumeParams,
)
from qinglong.storage.runs.params import RunListParams
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores

NY = "America/New_York"
STEP_MS = 5 * 60 * 1000


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def iso(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def stores(sqlite_stores: SqliteStores, clock: FakeClock) -> SqliteStores:
    clock.set(ms("2027-03-13T12:00:00Z"))
    d = sqlite_stores.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    for trigger, cron, extra in (
        ("shift", "30 2 * * *", {}),
        ("skip", "30 2 * * *", {"dst_gap": "skip"}),
        ("held", "30 2 * * *", {"misfire_policy": "fire_once"}),
        ("held-skip", "30 2 * * *", {"misfire_policy": "fire_once", "dst_gap": "skip"}),
        ("first", "30 1 * * *", {}),
        ("second", "30 1 * * *", {"dst_overlap": "second"}),
        ("both", "30 1 * * *", {"dst_overlap": "both"}),
        ("half-hourly", "*/30 * * * *", {}),
    ):
        d.trigger_publish(TriggerPublishParams(
            project_id="demo", trigger_id=trigger, task_id="hello", expression=cron,
            timezone=NY, **extra))  # type: ignore[arg-type]
    return sqlite_stores


def walk(stores: SqliteStores, clock: FakeClock, until: str,
         on_step: dict[int, object] | None = None) -> None:
    coordinator = Coordinator(stores.schedules, owner="standalone:1", budget=64,
                              new_id=lambda: str(uuid.uuid4()))
    while clock.now_ms() < ms(until):
        action = (on_step or {}).get(clock.now_ms())
        if callable(action):
            action()
        coordinator.run_cycle()
        clock.advance(STEP_MS)


def runs(stores: SqliteStores, trigger: str, since: str, before: str) -> list[str]:
    found = stores.runs.run_list(RunListParams(project_id="demo", trigger_id=trigger,
                                               limit=10_000))
    return sorted(iso(r.scheduled_for_ms) for r in found  # type: ignore[arg-type]
                  if ms(since) <= r.scheduled_for_ms < ms(before))  # type: ignore[operator]


def test_the_gap_and_overlap_policies_and_a_pause_across_the_change(
        stores: SqliteStores, clock: FakeClock) -> None:
    d = stores.definitions
    pause_at, resume_at = ms("2027-03-13T17:00:00Z"), ms("2027-03-14T16:00:00Z")

    def pause() -> None:
        for trigger in ("held", "held-skip"):
            d.trigger_pause(TriggerPauseParams(project_id="demo", trigger_id=trigger,
                                               actor="tester", reason="over the DST change"))

    def resume() -> None:
        for trigger in ("held", "held-skip"):
            d.trigger_resume(TriggerResumeParams(project_id="demo", trigger_id=trigger,
                                                 actor="tester"))

    walk(stores, clock, "2027-03-15T12:00:00Z", {pause_at: pause, resume_at: resume})
    window = ("2027-03-13T12:00:00Z", "2027-03-15T12:00:00Z")
    assert runs(stores, "shift", *window) == ["2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z"]
    assert runs(stores, "skip", *window) == ["2027-03-15T06:30:00Z"]
    # paused over the night: with gap shift, 03:00 EDT (07:00Z) is the occurrence in progress
    # at the resume, 9 h late, and fire_once runs it; with gap skip there is none that day
    assert runs(stores, "held", *window) == ["2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z"]
    assert runs(stores, "held-skip", *window) == ["2027-03-15T06:30:00Z"]
    misfires = stores.db.connection().execute(
        "SELECT trigger_id, due_at_ms, policy FROM trigger_schedule_misfires "
        "ORDER BY trigger_id").fetchall()
    assert [(r["trigger_id"], iso(r["due_at_ms"]), r["policy"]) for r in misfires] == [
        ("held", "2027-03-14T07:00:00Z", "fire_once")]
    assert all(r["policy"] != PAUSED_FATE for r in misfires)
    # the half-hourly interval expression runs every 30 real minutes: 01:30 EST, 03:00 EDT
    spring = runs(stores, "half-hourly", "2027-03-14T06:00:00Z", "2027-03-14T08:00:00Z")
    assert spring == ["2027-03-14T06:00:00Z", "2027-03-14T06:30:00Z", "2027-03-14T07:00:00Z",
                      "2027-03-14T07:30:00Z"]
    # views show the policy
    [skip_view] = d.trigger_list("demo", "skip")
    shown = trigger_view(skip_view, now_ms=clock.now_ms(), next_count=1)
    assert shown.dst == DstView(gap="skip", overlap="first")

    clock.set(ms("2027-11-06T12:00:00Z"))  # months later: one catch-up cycle skips the rest
    walk(stores, clock, "2027-11-08T12:00:00Z")
    fall = ("2027-11-06T12:00:00Z", "2027-11-08T12:00:00Z")
    assert runs(stores, "first", *fall) == ["2027-11-07T05:30:00Z", "2027-11-08T06:30:00Z"]
    assert runs(stores, "second", *fall) == ["2027-11-07T06:30:00Z", "2027-11-08T06:30:00Z"]
    assert runs(stores, "both", *fall) == ["2027-11-07T05:30:00Z", "2027-11-07T06:30:00Z",
                                           "2027-11-08T06:30:00Z"]
    overlap = runs(stores, "half-hourly", "2027-11-07T05:00:00Z", "2027-11-07T07:00:00Z")
    assert overlap == ["2027-11-07T05:00:00Z", "2027-11-07T05:30:00Z", "2027-11-07T06:00:00Z",
                       "2027-11-07T06:30:00Z"]  # 01:00, 01:30 EDT, then 01:00, 01:30 EST
    assert list(itertools.chain.from_iterable(
        runs(stores, t, *fall) for t in ("shift", "skip"))) == [
        "2027-11-07T07:30:00Z", "2027-11-08T07:30:00Z"] * 2  # 02:30 EST: no overlap at 02:30
