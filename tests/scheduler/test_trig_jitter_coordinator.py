"""Jitter near the misfire grace, through the standalone scheduler under a fake clock: a
scheduler that comes back after the nominal instant plus the grace but before the jittered
instant plus the grace admits on time; one second later it is a misfire (skip drops it,
fire_once runs it), recorded against the nominal occurrence."""

from __future__ import annotations

import uuid

import pytest

from qinglong.domain.interval import ceil_second
from qinglong.domain.jitter import Jitter
from qinglong.domain.occurrences import instant_text
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.scheduler.coordinator import Coordinator
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.runs.params import RunListParams
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores

GRACE = 30_000
HOUR = 3_600_000


def offset_of(trigger: str) -> int:
    return Jitter(3600).stable_s("demo", trigger) * 1000


@pytest.fixture
def stores(sqlite_stores: SqliteStores) -> SqliteStores:
    d = sqlite_stores.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    return sqlite_stores


@pytest.mark.parametrize(("late_ms", "misfire", "runs", "misfired"), [
    (GRACE, "skip", 1, False),         # exactly the grace after the jittered instant: on time
    (GRACE + 1_000, "skip", 0, True),  # a second more: dropped
    (GRACE + 1_000, "fire_once", 1, True),
])
def test_jitter_near_the_grace(stores: SqliteStores, clock: FakeClock, late_ms: int,
                               misfire: str, runs: int, misfired: bool) -> None:
    trigger = "nightly"
    offset = offset_of(trigger)
    assert offset > GRACE  # so nominal + grace is well before the jittered instant
    nominal = ceil_second(clock.now_ms()) + HOUR
    stores.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id=trigger, task_id="hello", misfire_policy=misfire,
        expression=f"every 1d from {instant_text(nominal)}", jitter_s=3600))
    coordinator = Coordinator(stores.schedules, owner="standalone:1", grace_ms=GRACE,
                              new_id=lambda: str(uuid.uuid4()))
    coordinator.run_cycle()  # initialises: the cursor and its jittered instant
    clock.set(nominal + GRACE + 1_000)  # late by the nominal instant, not by the jittered one
    assert coordinator.run_cycle().claimed == 0
    clock.set(nominal + offset + late_ms)  # the scheduler comes back only now
    coordinator.run_cycle()
    found = stores.runs.run_list(RunListParams(project_id="demo", trigger_id=trigger, limit=10))
    assert [r.scheduled_for_ms for r in found] == [nominal] * runs
    records = stores.db.connection().execute(
        "SELECT due_at_ms, skipped_through_ms, next_fire_at_ms, policy, decided_at_ms "
        "FROM trigger_schedule_misfires").fetchall()
    if misfired:
        [record] = records
        assert (record["due_at_ms"], record["policy"]) == (nominal, misfire)
        assert record["skipped_through_ms"] == nominal + 86_400_000 - 1
        assert record["next_fire_at_ms"] == nominal + 86_400_000
        # decided at the claim's time: the store read it from the (fake) node clock
        assert record["decided_at_ms"] == nominal + offset + late_ms
    else:
        assert records == []
    [row] = stores.db.connection().execute(
        "SELECT next_fire_at_ms, next_due_at_ms FROM trigger_schedules").fetchall()
    assert (row["next_fire_at_ms"], row["next_due_at_ms"]) == (
        nominal + 86_400_000, nominal + 86_400_000 + offset)
