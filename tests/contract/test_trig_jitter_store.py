"""Jittered triggers through the one scheduler (on SQLite and every PostgreSQL server):
the schedule row keeps the nominal cursor and its jittered instant, the row is not due before
that instant, the Run keeps the nominal occurrence as `scheduled_for` and records the jittered
instant, and a new revision without jitter clears it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from qinglong.domain.decision import Decision, Disposition
from qinglong.domain.interval import ceil_second
from qinglong.domain.jitter import Jitter
from qinglong.domain.occurrences import instant_text
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.scheduler.coordinator import Coordinator
from qinglong.service.views.triggers import JitterView, trigger_view
from qinglong.storage.admission.params import CommitOutcome, CommitResult
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from tests.contract.conftest import SCHEDULER_OWNER, Backend

SECOND = 1_000
BOUND_S = 10


def trigger_with_offset(low: int, high: int) -> str:
    """A trigger id whose stable offset (bound 10 s) lies in [low, high] seconds."""
    jitter = Jitter(BOUND_S)
    return next(f"j{n}" for n in range(1000) if low <= jitter.stable_s("demo", f"j{n}") <= high)


@pytest.fixture
def bed(backend: Backend) -> Backend:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    return backend


def rows(b: Backend, sql: str, *params: object) -> list[dict[str, Any]]:
    return [dict(r) for r in b.sql(sql, *params)]


def cycle(b: Backend, budget: int = 16) -> list[tuple[Decision, CommitResult]]:
    """One cycle of the coordinator; every decision it committed. With a budget of 1 the one
    row is decided once: a slow cycle does not go on to admit it as well."""
    seen: list[tuple[Decision, CommitResult]] = []

    def hook(_item: object, decision: Decision, result: CommitResult) -> None:
        seen.append((decision, result))

    Coordinator(b.schedules, owner=SCHEDULER_OWNER, budget=budget,
                new_id=lambda: str(uuid.uuid4()), on_committed=hook, wake_hint=False).run_cycle()
    return seen


def schedule_row(b: Backend, trigger: str) -> dict[str, Any]:
    [row] = rows(b, "SELECT next_fire_at_ms, next_due_at_ms FROM trigger_schedules "
                    "WHERE trigger_id = ?", trigger)
    return row


def wait_until(b: Backend, at_ms: int) -> None:
    b.pass_time(max(0, at_ms - b.now_ms()) + 20)


def test_a_jittered_occurrence_is_due_at_its_jittered_instant(bed: Backend) -> None:
    b = bed
    # an offset of several seconds: the cycles before the jittered instant come before it
    # even on a slow machine
    trigger = trigger_with_offset(5, 7)
    offset = Jitter(BOUND_S).stable_s("demo", trigger) * SECOND
    nominal = ceil_second(b.now_ms()) + SECOND
    published = b.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id=trigger, task_id="hello",
        expression=f"every 1h from {instant_text(nominal)}", jitter_s=BOUND_S)).revision
    assert published.spec.jitter == Jitter(BOUND_S)
    [(first, _)] = cycle(b, budget=1)
    assert (first.next_fire_at_ms, first.next_due_at_ms) == (nominal, nominal + offset)
    assert schedule_row(b, trigger) == {"next_fire_at_ms": nominal,
                                        "next_due_at_ms": nominal + offset}
    [listed] = b.definitions.trigger_list("demo", trigger)
    shown = trigger_view(listed, now_ms=b.now_ms(), next_count=2)
    assert shown.next_fire_at_ms == [nominal, nominal + 3_600_000]
    assert shown.next_due_at_ms == [nominal + offset, nominal + 3_600_000 + offset]
    assert shown.jitter == JitterView(max_s=BOUND_S, random_s=0, stable_s=offset // SECOND)
    wait_until(b, nominal)  # the nominal instant has come, the jittered one has not
    assert b.now_ms() < nominal + offset
    assert cycle(b) == []
    wait_until(b, nominal + offset)
    [(decision, result)] = cycle(b)
    assert result.outcome is CommitOutcome.ADMITTED
    assert (decision.scheduled_for_ms, decision.jittered_for_ms) == (nominal, nominal + offset)
    [run] = rows(b, "SELECT id, scheduled_for_ms, created_at_ms FROM runs WHERE trigger_id = ?",
                 trigger)
    assert run["scheduled_for_ms"] == nominal and run["created_at_ms"] >= nominal + offset
    [payload] = rows(b, "SELECT payload FROM run_events WHERE run_id = ? AND sequence = 1",
                     run["id"])
    created = payload["payload"]
    created = created if isinstance(created, dict) else json.loads(created)
    assert created["jittered_for_ms"] == nominal + offset
    assert created["scheduled_for_ms"] == nominal
    assert schedule_row(b, trigger) == {"next_fire_at_ms": nominal + 3_600_000,
                                        "next_due_at_ms": nominal + 3_600_000 + offset}
    # a revision without jitter: the row's jittered instant is cleared with the cursor
    b.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id=trigger, jitter_s=0))
    assert schedule_row(b, trigger) == {"next_fire_at_ms": None, "next_due_at_ms": None}
    [(again, _)] = cycle(b)
    assert again.next_due_at_ms is None
    assert schedule_row(b, trigger) == {"next_fire_at_ms": nominal + 3_600_000,
                                        "next_due_at_ms": None}


def test_without_jitter_nothing_changes(bed: Backend) -> None:
    b = bed
    nominal = ceil_second(b.now_ms()) + 5 * SECOND  # the first cycle surely comes before it
    b.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="plain", task_id="hello",
        expression=f"every 1h from {instant_text(nominal)}"))
    [(first, _)] = cycle(b, budget=1)
    assert first.disposition is Disposition.INITIALIZE and first.next_due_at_ms is None
    wait_until(b, nominal)
    [(decision, result)] = cycle(b)
    assert result.outcome is CommitOutcome.ADMITTED and decision.jittered_for_ms is None
    [payload] = rows(b, "SELECT e.payload FROM run_events e JOIN runs r ON r.id = e.run_id "
                        "WHERE r.trigger_id = 'plain' AND e.sequence = 1")
    created = payload["payload"]
    created = created if isinstance(created, dict) else json.loads(created)
    assert "jittered_for_ms" not in created
    assert schedule_row(b, "plain")["next_due_at_ms"] is None
