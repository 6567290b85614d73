"""The Coordinator on SQLite (as `ql serve` runs it) under a fake clock: every decision is
made at its claim's acquisition time, read from the store's clock (the node's, here the
FakeClock); bounded cycles, catch-up, misfires, corrupt rows, a stop between claims."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest

from qinglong.diagnostics import Diagnostic
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.scheduler.coordinator import Coordinator
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.runs.params import RunListParams
from qinglong.testing import FakeClock
from tests.conftest import BASE_MS, SqliteStores


@pytest.fixture
def stores(sqlite_stores: SqliteStores) -> SqliteStores:
    d = sqlite_stores.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="echo hi"))))
    return sqlite_stores


def add_trigger(stores: SqliteStores, trigger: str, cron: str = "* * * * * *", misfire: str = "skip") -> None:
    stores.definitions.trigger_publish(
        TriggerPublishParams(project_id="demo", trigger_id=trigger, task_id="hello", expression=cron,
                             timezone="UTC", misfire_policy=misfire))


COUNTER = itertools.count()


def coordinator(stores: SqliteStores, clock: FakeClock, **kw: object) -> Coordinator:
    """A coordinator over the store; it takes no clock: the store reads ``clock``."""
    counter = COUNTER
    options: dict[str, Any] = {"owner": "standalone:1", "lease_ms": 10_000, **kw}
    return Coordinator(stores.schedules, new_id=lambda: str(uuid.UUID(int=next(counter) + 1)),
                       **options)


def scheduled(stores: SqliteStores, trigger: str | None = None) -> list[int]:
    runs = stores.runs.run_list(RunListParams(trigger_id=trigger, limit=10_000, oldest_first=True))
    return [r.scheduled_for_ms for r in runs if r.scheduled_for_ms is not None]


def test_on_time_occurrences_are_admitted_one_per_second(stores: SqliteStores, clock: FakeClock) -> None:
    add_trigger(stores, "t1")  # published at BASE_MS: first occurrence is BASE_MS itself
    c = coordinator(stores, clock)
    for step in range(5):
        clock.set(BASE_MS + step * 1000 + 20)
        report = c.run_cycle()
        assert report.admitted == 1 and not report.saturated
        assert report.next_due_in_ms == 980
        # decided at the claim's acquisition time, which the store read from the node clock
        assert report.first_observed_at_ms == report.last_observed_at_ms == clock.now_ms()
    assert scheduled(stores) == [BASE_MS + i * 1000 for i in range(5)]


def test_at_its_default_ids_a_run_and_its_attempt_are_time_ordered_at_the_claims_instant(
        stores: SqliteStores, clock: FakeClock) -> None:
    add_trigger(stores, "t1")
    c = Coordinator(stores.schedules, owner="standalone:1", lease_ms=10_000)  # random ids
    claimed_at = []
    for step in range(3):
        clock.set(BASE_MS + step * 1000 + 20)
        claimed_at.append(clock.now_ms())
        assert c.run_cycle().admitted == 1
    runs = stores.runs.run_list(RunListParams(trigger_id="t1", limit=10, oldest_first=True))
    assert len(runs) == 3
    for run, at_ms in zip(runs, claimed_at, strict=True):
        detail = stores.runs.run_get(run.id)
        (attempt,) = detail.attempts
        for made in (run.id, attempt.id):  # version 7: the claim's instant, then random bits
            assert (uuid.UUID(made).version, uuid.UUID(made).int >> 80) == (7, at_ms)
        assert {uuid.UUID(e.id).version for e in detail.events} == {4}  # keyed by nothing
    assert [r.id for r in runs] == sorted(r.id for r in runs)


def test_a_late_cycle_catches_up_in_order_without_dropping(stores: SqliteStores, clock: FakeClock) -> None:
    add_trigger(stores, "t1")
    c = coordinator(stores, clock)
    clock.set(BASE_MS + 7_500)  # 7.5 s late, within the 30 s grace
    report = c.run_cycle()
    assert (report.claimed, report.admitted, report.saturated) == (8, 8, False)
    assert scheduled(stores) == [BASE_MS + i * 1000 for i in range(8)]


def test_a_stop_request_ends_a_catch_up_between_listings(stores: SqliteStores, clock: FakeClock) -> None:
    add_trigger(stores, "t1")
    c = coordinator(stores, clock)
    clock.set(BASE_MS + 7_500)
    report = c.run_cycle(lambda: True)  # stopping before the cycle began: nothing is touched
    assert (report.claimed, report.admitted) == (0, 0) and scheduled(stores) == []
    assert c.run_cycle().admitted == 8  # the next cycle, not stopped, catches up everything


def test_a_stop_lands_between_two_claims(stores: SqliteStores, clock: FakeClock) -> None:
    for i in range(12):
        add_trigger(stores, f"t{i:02d}")
    c = coordinator(stores, clock, budget=16, batch=8)
    clock.set(BASE_MS + 100)
    asked: list[int] = []

    def stop() -> bool:  # asked before each claim: no before the first, yes before the second
        asked.append(1)
        return len(asked) > 1

    report = c.run_cycle(stop)
    # the claims in hand are committed, nothing more is claimed
    assert (report.claimed, report.admitted, report.saturated) == (8, 8, False)
    assert len(asked) == 2 and len(scheduled(stores)) == 8
    assert c.run_cycle().admitted == 4


def test_the_budget_bounds_a_cycle_and_saturation_is_reported(stores: SqliteStores, clock: FakeClock) -> None:
    for i in range(20):
        add_trigger(stores, f"t{i:02d}")
    c = coordinator(stores, clock, budget=16)
    clock.set(BASE_MS + 100)
    first = c.run_cycle()
    assert (first.claimed, first.admitted, first.saturated) == (16, 16, True)
    second = c.run_cycle()
    assert (second.claimed, second.admitted, second.saturated) == (4, 4, False)
    assert len(scheduled(stores)) == 20


@pytest.mark.parametrize("policy", ["skip", "fire_once"])
def test_misfire_policies_after_an_outage(stores: SqliteStores, clock: FakeClock, policy: str) -> None:
    add_trigger(stores, "t1", misfire=policy)
    c = coordinator(stores, clock, budget=256, grace_ms=30_000)
    clock.set(BASE_MS + 2_100)
    c.run_cycle()  # admits BASE_MS, +1 s, +2 s
    clock.set(BASE_MS + 100_500)  # down for ~98 s
    c.run_cycle()
    got = scheduled(stores)
    resumed = [BASE_MS + s * 1000 for s in range(71, 101)]  # first occurrence after t - g = +70.5 s
    before = [BASE_MS, BASE_MS + 1000, BASE_MS + 2000]
    if policy == "skip":
        assert got == before + resumed
    else:
        assert got == [*before, BASE_MS + 3000, *resumed]  # exactly one Run for the misfired stretch


def test_initialize_when_the_first_occurrence_is_in_the_future(stores: SqliteStores, clock: FakeClock) -> None:
    clock.set(BASE_MS + 1000)  # published just after 08:00:00, so the first occurrence is 09:00
    add_trigger(stores, "hourly", cron="0 * * * *")
    c = coordinator(stores, clock)
    report = c.run_cycle()
    assert (report.initialized, report.admitted) == (1, 0)
    assert report.next_due_in_ms == 3_599_000
    assert c.run_cycle().claimed == 0


def test_a_corrupt_row_is_reported_and_the_others_still_progress(stores: SqliteStores, clock: FakeClock) -> None:
    add_trigger(stores, "a")
    add_trigger(stores, "b")
    stores.db.connection().execute(
        "UPDATE trigger_revisions SET spec_json = replace(spec_json, 'UTC', 'Etc/GMT') WHERE trigger_id = 'a'")
    seen: list[Diagnostic] = []
    c = coordinator(stores, clock, diagnostics=seen.append)
    clock.set(BASE_MS + 10)
    report = c.run_cycle()
    assert report.admitted == 1 and report.errors == 1 and not report.saturated
    assert {d.code for d in seen} == {"QL_RECORD_CORRUPT"}
    assert scheduled(stores, "b") == [BASE_MS] and scheduled(stores, "a") == []


def test_corrupt_rows_beyond_a_claim_neither_fill_the_budget_nor_starve_the_others(
        stores: SqliteStores, clock: FakeClock) -> None:
    # SQLite's claim writes nothing: the corrupt rows (the oldest cursors, claimed first) come
    # back in every claim statement; the coordinator passes over them for the rest of the cycle
    for i in range(10):
        add_trigger(stores, f"bad{i}")
    clock.set(BASE_MS + 500)
    add_trigger(stores, "good")  # published later: its cursor sorts after the bad ones
    stores.db.connection().execute(
        "UPDATE trigger_revisions SET spec_json = replace(spec_json, 'UTC', 'Etc/GMT') "
        "WHERE trigger_id LIKE 'bad%'")
    seen: list[Diagnostic] = []
    c = coordinator(stores, clock, budget=16, batch=4, diagnostics=seen.append)
    clock.set(BASE_MS + 1_010)
    report = c.run_cycle()
    assert (report.claimed, report.errors, report.admitted, report.saturated) == (11, 10, 1, False)
    assert len(seen) == 10 and {d.code for d in seen} == {"QL_RECORD_CORRUPT"}
    assert scheduled(stores, "good") == [BASE_MS + 1000]
    clock.set(BASE_MS + 2_010)
    again = c.run_cycle()  # each corrupt row is reported once a cycle, the good row admitted
    assert (again.claimed, again.errors, again.admitted) == (11, 10, 1)
    assert scheduled(stores, "good") == [BASE_MS + 1000, BASE_MS + 2000]


def test_an_observer_that_raises_does_not_stop_admission(stores: SqliteStores, clock: FakeClock) -> None:
    add_trigger(stores, "t1")
    seen: list[Diagnostic] = []

    def explode(*_: object) -> None:
        raise RuntimeError("observer broke")

    c = coordinator(stores, clock, on_committed=explode, diagnostics=seen.append)
    clock.set(BASE_MS + 3_010)
    assert c.run_cycle().admitted == 4
    assert len(seen) == 4 and all(d.code == "QL_INTERNAL" for d in seen)


def test_two_coordinators_on_one_database_never_duplicate(stores: SqliteStores, clock: FakeClock) -> None:
    add_trigger(stores, "t1")
    a, b = coordinator(stores, clock), coordinator(stores, clock)
    for step in range(1, 30):
        clock.set(BASE_MS + step * 333)
        (a if step % 2 else b).run_cycle()
        (b if step % 2 else a).run_cycle()
    got = scheduled(stores)
    assert got == sorted(set(got))
    assert got == [BASE_MS + i * 1000 for i in range(len(got))]


def test_stats_add_up_what_every_cycle_did(stores: SqliteStores, clock: FakeClock) -> None:
    add_trigger(stores, "t1")
    add_trigger(stores, "late", misfire="skip")
    c = coordinator(stores, clock)
    clock.set(BASE_MS + 2_500)
    first = c.run_cycle()
    clock.set(BASE_MS + 120_000)  # far past the grace: both triggers misfire
    second = c.run_cycle()
    stats = c.stats.snapshot()
    assert stats["cycles"] == 2
    assert first.admitted == 6  # 0, 1 and 2 s of two triggers
    assert second.skipped == 2  # each misfired, then admits what is still within the grace
    assert stats["admitted"] == first.admitted + second.admitted
    assert stats["skipped"] == 2
    assert stats["claimed"] == first.claimed + second.claimed
    assert stats.get("raced", 0) == 0 and stats.get("errors", 0) == 0
