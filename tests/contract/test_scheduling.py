"""ScheduleStore contract on every database: which rows a claim picks, and the commit of a
claimed row's decision, all or nothing under the claim's fence.

The same algorithm runs everywhere (claim -> decide -> commit by the store's clock): on
PostgreSQL the claim writes its fence into the row, on SQLite (one process serves the file)
it writes nothing and its fence is the row's state version; either way a commit whose fence
no longer holds writes nothing and is reported raced. (Batches of claims:
test_admission_batch.py.)
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.decision import Disposition
from qinglong.domain.schedule import ScheduleClaim
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import Conflict, RecordCorrupt
from qinglong.storage.admission.params import (
    ClaimCommitParams,
    CommitOutcome,
    CommitResult,
    ScheduleClaimParams,
)
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.runs.params import RunListParams
from tests.contract.conftest import EVERY_5_S, SCHEDULER_OWNER, Backend

EVERY_SECOND = "* * * * * *"
GRACE = 30_000
TABLES = ("runs", "run_attempts", "run_events", "trigger_schedule_misfires")


def new_ids() -> AdmissionIds:
    return AdmissionIds.new(lambda: str(uuid.uuid4()))


@pytest.fixture
def b(backend: Backend) -> Backend:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="echo hi"))))
    return backend


def add_trigger(b: Backend, trigger: str, cron: str = EVERY_SECOND, misfire: str = "skip") -> int:
    """Publish a trigger; its publish time."""
    view = b.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id=trigger, task_id="hello", expression=cron,
        timezone="UTC", misfire_policy=misfire))
    return view.revision.created_at_ms


def claim(b: Backend, limit: int = 16) -> list[ScheduleClaim]:
    claims = b.schedules.schedule_claim(ScheduleClaimParams(owner=SCHEDULER_OWNER,
                                                            lease_ms=30_000, limit=limit))
    assert all(isinstance(c, ScheduleClaim) for c in claims), claims
    return claims  # type: ignore[return-value]


def claimed(b: Backend, limit: int = 16) -> list[str]:
    """The triggers a claim picks now, in its order; the claims are let go of again."""
    ids = [c.candidate.trigger_id for c in claim(b, limit)]
    b.drop_claims()
    return ids


def commit(b: Backend, item: ScheduleClaim, ids: AdmissionIds | None = None
           ) -> tuple[ClaimCommitParams, CommitResult]:
    decision = item.decide(grace_ms=GRACE)
    admit = decision.disposition is Disposition.ADMIT
    params = ClaimCommitParams(claim=item, decision=decision,
                               ids=(ids or new_ids()) if admit else None)
    return params, b.schedules.schedule_commit(params)


def table_counts(b: Backend) -> dict[str, int]:
    return {t: int(b.sql(f"SELECT count(*) AS n FROM {t}")[0]["n"]) for t in TABLES}


def cursor_of(b: Backend, trigger: str) -> tuple[int | None, int]:
    [row] = b.sql("SELECT next_fire_at_ms, state_version FROM trigger_schedules "
                  "WHERE trigger_id = ?", trigger)
    return row["next_fire_at_ms"], row["state_version"]


def just_past(b: Backend, period_ms: int) -> int:
    """Let the store's clock reach just past a multiple of ``period_ms``; that multiple."""
    phase = b.now_ms() % period_ms
    b.pass_time(period_ms - phase + 20 if phase >= 300 else 20)
    return b.now_ms() // period_ms * period_ms


def second_ago(b: Backend) -> int:
    return b.now_ms() // 1000 * 1000 - 1000


def test_initialize_then_admit_writes_the_exact_admission_shape(b: Backend) -> None:
    start = just_past(b, 5_000)
    add_trigger(b, "t1", cron=EVERY_5_S)  # its first occurrence: the next multiple of 5 s
    first = start + 5_000
    [fresh] = claim(b)  # an uninitialised row is claimed as soon as it exists
    assert fresh.candidate.next_fire_at_ms is None
    params, result = commit(b, fresh)
    assert params.decision.disposition is Disposition.INITIALIZE
    assert result.outcome is CommitOutcome.ADVANCED
    assert cursor_of(b, "t1") == (first, fresh.candidate.state_version + 1)
    assert claimed(b) == []  # not due before its cursor
    b.pass_time(first - b.now_ms() + 250)
    [due] = claim(b)
    ids = new_ids()
    params, result = commit(b, due, ids)
    assert result.outcome is CommitOutcome.ADMITTED and result.run_id == ids.run_id
    assert result.attempt_id == ids.attempt_id
    assert cursor_of(b, "t1") == (first + 5_000, due.candidate.state_version + 1)
    detail = b.runs.run_get(ids.run_id)
    run = detail.run
    assert (run.status, run.version, run.event_sequence, run.scheduled_for_ms) == (
        "queued", 2, 2, first)
    assert run.idempotency_key == f"ql3:cron:v1:t1:1:{first}"
    assert run.created_at_ms == run.queued_at_ms
    assert due.fence.acquired_at_ms <= run.created_at_ms <= b.now_ms()
    assert run.task_revision.startswith("qltd:v1:1:")
    [attempt] = detail.attempts
    assert (attempt.id, attempt.attempt, attempt.status, attempt.executor_type) == (
        ids.attempt_id, 1, "claimed", b.executor_type)
    assert [(e.id, e.sequence, e.type, e.attempt_id) for e in detail.events] == [
        (ids.created_event_id, 1, "run.created", None),
        (ids.queued_event_id, 2, "run.queued", ids.attempt_id),
    ]
    assert detail.events[0].payload["scheduled_for_ms"] == first
    assert detail.events[0].payload["misfired"] is False
    assert detail.events[0].payload["decided_at_ms"] == due.fence.acquired_at_ms
    assert detail.events[0].payload["claim_token"] == due.fence.token


def test_a_claim_picks_only_rows_whose_trigger_can_fire(b: Backend) -> None:
    d = b.definitions
    for name in ("a-disabled", "b-firing", "c-stale"):
        add_trigger(b, name)
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="a-disabled", enabled=False))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="other", name="o",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    assert claimed(b) == ["b-firing", "c-stale"]
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     repin_triggers=False,
                                     spec=CommandSpec(command=ShellCommand(command="echo v2"))))
    assert claimed(b) == []  # both now pin a stale task revision
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="b-firing", enabled=True))
    assert claimed(b) == ["b-firing"]  # re-pinned
    d.project_archive("demo")
    assert claimed(b) == []


def test_a_claim_takes_uninitialised_rows_first_then_the_oldest_cursor(b: Backend) -> None:
    at = second_ago(b)
    for name, cursor in (("z", at), ("y", at), ("x", at), ("v", at + 3_600_000)):
        add_trigger(b, name)
        b.set_cursor("demo", name, cursor)
    add_trigger(b, "a-old")
    b.set_cursor("demo", "a-old", at - 2_000)
    add_trigger(b, "w")  # a NULL cursor: first, whatever its name
    assert claimed(b) == ["w", "a-old", "x", "y", "z"]  # v is not due
    assert claimed(b, limit=2) == ["w", "a-old"]
    [first, *rest] = claim(b)
    assert first.candidate.trigger_id == "w" and first.candidate.next_fire_at_ms is None
    assert [c.candidate.next_fire_at_ms for c in rest] == [at - 2_000, at, at, at]


def test_a_stale_claim_races_and_writes_nothing(b: Backend) -> None:
    add_trigger(b, "t1")
    b.set_cursor("demo", "t1", second_ago(b))
    [item] = claim(b)
    _, first = commit(b, item)
    assert first.outcome is CommitOutcome.ADMITTED
    before, cursor = table_counts(b), cursor_of(b, "t1")
    _, second = commit(b, item)  # the same claim again: the row moved on since
    assert second.outcome is CommitOutcome.RACED and second.reason == "claim_superseded"
    assert (table_counts(b), cursor_of(b, "t1")) == (before, cursor)


def test_a_republish_between_claim_and_commit_races(b: Backend) -> None:
    add_trigger(b, "t1")
    b.set_cursor("demo", "t1", second_ago(b))
    [item] = claim(b)
    b.definitions.trigger_publish(
        TriggerPublishParams(project_id="demo", trigger_id="t1", expression="*/2 * * * * *"))
    _, result = commit(b, item)
    assert result.outcome is CommitOutcome.RACED and result.reason == "claim_superseded"
    assert table_counts(b)["runs"] == 0


@pytest.mark.parametrize("change", ["disable", "archive", "task-moved"])
def test_a_trigger_that_can_no_longer_fire_at_commit_races(b: Backend, change: str) -> None:
    add_trigger(b, "t1")
    b.set_cursor("demo", "t1", second_ago(b))
    [item] = claim(b)
    d = b.definitions
    if change == "disable":
        d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="t1", enabled=False))
    elif change == "archive":
        d.project_archive("demo")
    else:
        d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                         repin_triggers=False,
                                         spec=CommandSpec(command=ShellCommand(command="echo v2"))))
    _, result = commit(b, item)
    assert result.outcome is CommitOutcome.RACED and result.reason == "claim_superseded"
    assert table_counts(b)["runs"] == 0


@pytest.mark.parametrize("policy", ["skip", "fire_once"])
def test_a_misfire_is_recorded_with_the_dropped_stretch(b: Backend, policy: str) -> None:
    add_trigger(b, "t1", misfire=policy)
    late = second_ago(b) - 99_000  # 100 s late, grace 30 s
    b.set_cursor("demo", "t1", late)
    [item] = claim(b)
    seen = item.fence.acquired_at_ms
    ids = new_ids()
    params, result = commit(b, item, ids)
    assert params.decision.misfired
    resumed = -(-(seen - GRACE) // 1000) * 1000  # the first occurrence at or after t - grace
    assert cursor_of(b, "t1")[0] == resumed
    [row] = b.sql("SELECT * FROM trigger_schedule_misfires")
    assert (row["due_at_ms"], row["skipped_through_ms"], row["next_fire_at_ms"],
            row["policy"], row["decided_at_ms"]) == (late, seen - GRACE - 1, resumed, policy, seen)
    runs = b.runs.run_list(RunListParams())
    if policy == "skip":
        assert result.outcome is CommitOutcome.ADVANCED and runs == [] and row["run_id"] is None
    else:
        assert result.outcome is CommitOutcome.ADMITTED and row["run_id"] == ids.run_id
        assert [r.scheduled_for_ms for r in runs] == [late]


def test_a_corrupt_execution_revision_fails_closed_without_writes(b: Backend) -> None:
    add_trigger(b, "t1")
    b.set_cursor("demo", "t1", second_ago(b))
    [item] = claim(b)
    assert b.tamper_execution_plan("echo hi", "rm -rf /") == 1
    before, cursor = table_counts(b), cursor_of(b, "t1")
    with pytest.raises(RecordCorrupt):
        commit(b, item)
    assert (table_counts(b), cursor_of(b, "t1")) == (before, cursor)
    assert cursor == (item.candidate.next_fire_at_ms, item.candidate.state_version)


@pytest.mark.parametrize(
    ("table", "event", "when"),
    [("runs", "INSERT", None), ("run_attempts", "INSERT", None),
     ("run_events", "INSERT", "NEW.sequence = 2"), ("trigger_schedules", "UPDATE", None)],
    ids=["run", "attempt", "second-event", "cursor-update"],
)
def test_a_failure_in_any_write_rolls_back_everything(
        b: Backend, table: str, event: str, when: str | None) -> None:
    add_trigger(b, "t1")
    b.set_cursor("demo", "t1", second_ago(b))
    [item] = claim(b)
    cursor = cursor_of(b, "t1")
    b.refuse_writes(table, event, when)
    with pytest.raises(Conflict):
        commit(b, item)
    assert table_counts(b) == dict.fromkeys(TABLES, 0)
    assert cursor_of(b, "t1") == cursor


def test_the_idempotency_key_is_unique(b: Backend) -> None:
    add_trigger(b, "t1")
    b.set_cursor("demo", "t1", second_ago(b))
    [item] = claim(b)
    commit(b, item)
    [run] = b.sql("SELECT * FROM runs")
    with pytest.raises(Exception, match=r"(?i)unique") as refused:
        b.sql("INSERT INTO runs (id, project_id, task_id, task_revision, trigger_type, "
              "execution_origin, execution_owner, status, version, event_sequence, "
              "idempotency_key, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
              str(uuid.uuid4()), *(run[c] for c in (
                  "project_id", "task_id", "task_revision", "trigger_type", "execution_origin",
                  "execution_owner", "status", "version", "event_sequence", "idempotency_key",
                  "created_at_ms")))
    assert "idempotency_key" in str(refused.value)
    assert table_counts(b)["runs"] == 1


def _hint(b: Backend) -> int | None:
    return b.schedules.schedule_next_due_in_ms()


def test_the_next_due_hint_ignores_uninitialised_rows_and_sees_the_next_cursor(b: Backend) -> None:
    add_trigger(b, "t1")
    assert _hint(b) is None  # an uninitialised row has no due time yet
    at = b.now_ms() + 3_600_000
    b.set_cursor("demo", "t1", at)
    before = b.now_ms()
    hint: Any = _hint(b)
    after = b.now_ms()
    # the time left to the cursor, read between ``before`` and ``after`` (the same instant
    # on a clock the test holds still)
    assert hint is not None and at - after <= hint <= at - before, hint
    b.set_cursor("demo", "t1", second_ago(b))  # due now: nothing ahead
    hint = _hint(b)
    if b.capabilities.shared:
        # another process may hold the due row and move it on to an occurrence this read
        # cannot see yet: it is looked at again within a second
        assert hint is not None and 0 < hint <= 1_000, hint
    else:
        assert hint is None  # one process serves the file: its own cycle takes the row
