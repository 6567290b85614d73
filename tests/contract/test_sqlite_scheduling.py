"""ScheduleStore on SQLite: due rows, and atomic admission by compare-and-set."""

from __future__ import annotations

import sqlite3

import pytest

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.decision import Disposition
from qinglong.domain.schedule import ScheduleCandidate
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import RecordCorrupt, StorageError
from qinglong.storage.admission.params import CommitOutcome
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.ports import ScheduleCommitParams, ScheduleListDueParams
from qinglong.storage.runs.params import RunListParams
from qinglong.testing import FakeClock
from tests.conftest import BASE_MS, SqliteStores


def run_id(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def ids(n: int = 1) -> AdmissionIds:
    return AdmissionIds(
        run_id=run_id(n), attempt_id=f"att-{n}", created_event_id=f"ev-{n}-1", queued_event_id=f"ev-{n}-2"
    )


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
                             timezone="UTC", misfire_policy=misfire)
    )


def due(stores: SqliteStores, now: int, limit: int = 16) -> list[ScheduleCandidate]:
    return stores.schedules.schedule_list_due(ScheduleListDueParams(now_ms=now, limit=limit))


def commit(stores: SqliteStores, candidate: ScheduleCandidate, now: int, grace: int = 30_000, n: int = 1):
    decision = candidate.decide(observed_at_ms=now, grace_ms=grace)
    return decision, stores.schedules.schedule_commit(
        ScheduleCommitParams(candidate=candidate, decision=decision,
                             ids=ids(n) if decision.disposition is Disposition.ADMIT else None,
                             committed_at_ms=now)
    )


def table_counts(stores: SqliteStores) -> dict[str, int]:
    conn = stores.db.connection()
    return {t: conn.execute(f"SELECT count(*) AS n FROM {t}").fetchone()["n"]
            for t in ("runs", "run_attempts", "run_events", "trigger_schedule_misfires")}


def cursor_of(stores: SqliteStores, trigger: str) -> tuple[int | None, int]:
    row = stores.db.connection().execute(
        "SELECT next_fire_at_ms, state_version FROM trigger_schedules WHERE trigger_id = ?", (trigger,)
    ).fetchone()
    return row["next_fire_at_ms"], row["state_version"]


def test_initialize_then_admit_writes_the_exact_admission_shape(stores: SqliteStores, clock: FakeClock) -> None:
    add_trigger(stores, "t1")  # published at BASE_MS (a whole second)
    [candidate] = due(stores, BASE_MS - 5000)  # NULL cursor rows are always listed
    decision, result = commit(stores, candidate, BASE_MS - 5000)
    assert decision.disposition is Disposition.INITIALIZE
    assert result.outcome is CommitOutcome.ADVANCED
    assert cursor_of(stores, "t1") == (BASE_MS, 1)
    assert due(stores, BASE_MS - 1) == []
    [candidate] = due(stores, BASE_MS + 250)
    decision, result = commit(stores, candidate, BASE_MS + 250)
    assert result.outcome is CommitOutcome.ADMITTED and result.run_id == run_id(1)
    assert cursor_of(stores, "t1") == (BASE_MS + 1000, 2)
    detail = stores.runs.run_get(run_id(1))
    run = detail.run
    assert (run.status, run.version, run.event_sequence, run.scheduled_for_ms) == ("queued", 2, 2, BASE_MS)
    assert run.idempotency_key == f"ql3:cron:v1:t1:1:{BASE_MS}"
    assert run.created_at_ms == run.queued_at_ms == BASE_MS + 250
    assert run.task_revision.startswith("qltd:v1:1:")
    [attempt] = detail.attempts
    assert (attempt.attempt, attempt.status, attempt.executor_type) == (1, "claimed", "local_process")
    assert [(e.sequence, e.type, e.attempt_id) for e in detail.events] == [
        (1, "run.created", None),
        (2, "run.queued", "att-1"),
    ]
    assert detail.events[0].payload["scheduled_for_ms"] == BASE_MS
    assert detail.events[0].payload["misfired"] is False


def test_due_rows_exclude_everything_that_cannot_fire(stores: SqliteStores) -> None:
    d = stores.definitions
    for name in ("a-disabled", "b-firing", "c-stale"):
        add_trigger(stores, name)
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="a-disabled", enabled=False))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="other", name="o",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    assert [c.trigger_id for c in due(stores, BASE_MS + 10_000)] == ["b-firing", "c-stale"]
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello", repin_triggers=False,
                                     spec=CommandSpec(command=ShellCommand(command="echo v2"))))
    assert due(stores, BASE_MS + 10_000) == []  # both now pin a stale task revision
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="b-firing", enabled=True))
    assert [c.trigger_id for c in due(stores, BASE_MS + 10_000)] == ["b-firing"]  # re-pinned
    d.project_archive("demo")
    assert due(stores, BASE_MS + 10_000) == []


def test_due_rows_are_ordered_nulls_first_then_by_cursor(stores: SqliteStores) -> None:
    for name in ("z", "y", "x"):
        add_trigger(stores, name)
    for candidate in due(stores, BASE_MS - 1000):
        commit(stores, candidate, BASE_MS - 1000)  # initialise all three at BASE_MS
    add_trigger(stores, "w")
    [first, *rest] = due(stores, BASE_MS)
    assert first.trigger_id == "w" and first.next_fire_at_ms is None
    assert [c.trigger_id for c in rest] == ["x", "y", "z"]
    assert [c.trigger_id for c in due(stores, BASE_MS, limit=2)] == ["w", "x"]


def test_stale_candidate_races_and_writes_nothing(stores: SqliteStores) -> None:
    add_trigger(stores, "t1")
    [candidate] = due(stores, BASE_MS)
    _, first = commit(stores, candidate, BASE_MS, n=1)
    assert first.outcome is CommitOutcome.ADMITTED
    before = table_counts(stores)
    _, second = commit(stores, candidate, BASE_MS, n=2)  # same candidate again: state moved on
    assert second.outcome is CommitOutcome.RACED and second.reason == "schedule_changed"
    assert table_counts(stores) == before


def test_republish_between_list_and_commit_races(stores: SqliteStores) -> None:
    add_trigger(stores, "t1")
    [candidate] = due(stores, BASE_MS)
    stores.definitions.trigger_publish(
        TriggerPublishParams(project_id="demo", trigger_id="t1", expression="*/2 * * * * *"))
    _, result = commit(stores, candidate, BASE_MS)
    assert result.outcome is CommitOutcome.RACED
    assert table_counts(stores)["runs"] == 0


@pytest.mark.parametrize("change", ["disable", "archive", "task-moved"])
def test_ineligible_at_commit_races(stores: SqliteStores, change: str) -> None:
    add_trigger(stores, "t1")
    [candidate] = due(stores, BASE_MS)
    d = stores.definitions
    if change == "disable":
        d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="t1", enabled=False))
    elif change == "archive":
        d.project_archive("demo")
    else:
        d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello", repin_triggers=False,
                                         spec=CommandSpec(command=ShellCommand(command="echo v2"))))
    _, result = commit(stores, candidate, BASE_MS)
    assert result.outcome is CommitOutcome.RACED and result.reason == "not_eligible"
    assert table_counts(stores)["runs"] == 0


@pytest.mark.parametrize("policy", ["skip", "fire_once"])
def test_misfire_is_recorded_with_the_dropped_stretch(stores: SqliteStores, policy: str) -> None:
    add_trigger(stores, "t1", misfire=policy)
    late = BASE_MS + 100_000  # first occurrence BASE_MS, 100 s late, grace 30 s
    [candidate] = due(stores, late)
    decision, result = commit(stores, candidate, late, grace=30_000)
    assert decision.misfired
    assert cursor_of(stores, "t1")[0] == BASE_MS + 70_000  # first occurrence at or after t - g
    row = stores.db.connection().execute("SELECT * FROM trigger_schedule_misfires").fetchone()
    assert (row["due_at_ms"], row["skipped_through_ms"], row["policy"]) == (BASE_MS, late - 30_000 - 1, policy)
    runs = stores.runs.run_list(RunListParams())
    if policy == "skip":
        assert result.outcome is CommitOutcome.ADVANCED and runs == [] and row["run_id"] is None
    else:
        assert result.outcome is CommitOutcome.ADMITTED and row["run_id"] == run_id(1)
        assert [r.scheduled_for_ms for r in runs] == [BASE_MS]


def test_corrupt_execution_revision_fails_closed_without_writes(stores: SqliteStores) -> None:
    add_trigger(stores, "t1")
    [candidate] = due(stores, BASE_MS)
    stores.db.connection().execute(
        "UPDATE task_execution_revisions SET plan_json = replace(plan_json, 'echo hi', 'rm -rf /')")
    before = table_counts(stores)
    with pytest.raises(RecordCorrupt):
        commit(stores, candidate, BASE_MS)
    assert table_counts(stores) == before
    assert cursor_of(stores, "t1") == (None, 0)


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE TRIGGER boom BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'injected'); END",
        "CREATE TRIGGER boom BEFORE INSERT ON run_attempts BEGIN SELECT RAISE(ABORT, 'injected'); END",
        (
            "CREATE TRIGGER boom BEFORE INSERT ON run_events WHEN NEW.sequence = 2 "
            "BEGIN SELECT RAISE(ABORT, 'injected'); END"
        ),
        "CREATE TRIGGER boom BEFORE UPDATE ON trigger_schedules BEGIN SELECT RAISE(ABORT, 'injected'); END",
    ],
    ids=["run", "attempt", "second-event", "cursor-update"],
)
def test_a_failure_in_any_write_rolls_back_everything(stores: SqliteStores, statement: str) -> None:
    add_trigger(stores, "t1")
    [candidate] = due(stores, BASE_MS)
    stores.db.connection().execute(statement)
    with pytest.raises(StorageError):
        commit(stores, candidate, BASE_MS)
    assert table_counts(stores) == {"runs": 0, "run_attempts": 0, "run_events": 0,
                                    "trigger_schedule_misfires": 0}
    assert cursor_of(stores, "t1") == (None, 0)


def test_idempotency_key_is_unique(stores: SqliteStores) -> None:
    add_trigger(stores, "t1")
    [candidate] = due(stores, BASE_MS)
    commit(stores, candidate, BASE_MS)
    conn = stores.db.connection()
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO runs (id, project_id, task_id, task_revision, trigger_type, execution_origin, "
            "execution_owner, status, version, event_sequence, idempotency_key, created_at_ms) "
            "SELECT 'dup', project_id, task_id, task_revision, trigger_type, execution_origin, "
            "execution_owner, status, version, event_sequence, idempotency_key, created_at_ms FROM runs"
        )


def test_next_due_hint_ignores_past_and_uninitialised_rows(stores: SqliteStores) -> None:
    add_trigger(stores, "t1")
    assert stores.schedules.schedule_next_due_at(BASE_MS) is None
    [candidate] = due(stores, BASE_MS - 500)
    commit(stores, candidate, BASE_MS - 500)
    assert stores.schedules.schedule_next_due_at(BASE_MS - 500) == BASE_MS
    assert stores.schedules.schedule_next_due_at(BASE_MS) is None
