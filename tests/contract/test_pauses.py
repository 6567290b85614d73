"""Pausing and resuming a trigger, on SQLite and PostgreSQL: a paused trigger is not decided,
a decision in flight when the pause lands is fenced out, what the pause held back is recorded,
the occurrence in progress at the resume follows the misfire rules, and a timed pause ends by
itself on the store's clock."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from qinglong.audit.model import AuditParams
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.decision import PAUSED_FATE, Disposition
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import Conflict, InvalidInput, NotFound
from qinglong.profiles.audit_backend import run_audit
from qinglong.storage.admission.params import (
    ClaimCommitParams,
    CommitOutcome,
    CommitResult,
    CorruptScheduleRow,
    ScheduleClaimParams,
)
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    ProjectPauseParams,
    TaskPublishParams,
    TriggerPauseParams,
    TriggerPublishParams,
    TriggerResumeParams,
)
from tests.contract.conftest import Backend

SECOND = 1_000


@pytest.fixture
def paused_bed(backend: Backend) -> Backend:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="tick", task_id="hello",
                                           expression="* * * * * *", timezone="UTC",
                                           misfire_policy="skip"))
    return backend


def rows(backend: Backend, sql: str, *params: object) -> list[dict[str, Any]]:
    return [dict(r) for r in backend.sql(sql, *params)]


def runs_of(backend: Backend) -> list[int]:
    return [int(r["scheduled_for_ms"]) for r in rows(
        backend, "SELECT scheduled_for_ms FROM runs WHERE trigger_id = 'tick' "
                 "ORDER BY scheduled_for_ms")]


def held_back(backend: Backend) -> list[tuple[int, int, int]]:
    return [(int(r["due_at_ms"]), int(r["skipped_through_ms"]), int(r["next_fire_at_ms"]))
            for r in rows(backend, "SELECT due_at_ms, skipped_through_ms, next_fire_at_ms "
                                   "FROM trigger_schedule_misfires WHERE policy = ?", PAUSED_FATE)]


def cycle(backend: Backend) -> list[CommitResult]:
    results: list[CommitResult] = []
    backend.run_cycle(lambda: str(uuid.uuid4()), lambda _i, _d, r: results.append(r))
    return results


def pause(backend: Backend, *, until_ms: int | None = None, reason: str | None = None) -> Any:
    return backend.definitions.trigger_pause(TriggerPauseParams(
        project_id="demo", trigger_id="tick", until_ms=until_ms, reason=reason, actor="tester"))


def next_second(ms: int) -> int:
    return (ms // SECOND + 1) * SECOND


def assert_resumed_at(b: Backend, results: list[CommitResult], first: int,
                      in_progress: int) -> None:
    """The cycle after a pause ended admitted the occurrence in progress at its end and held
    back ``[first, in_progress)``. On PostgreSQL the database clock runs on: when the cycle
    came a second or more after the end (a loaded machine), the next occurrences are due too
    and admitted on time after it."""
    admitted = runs_of(b)
    assert admitted == [in_progress + SECOND * n for n in range(len(admitted))], admitted
    assert [r.outcome for r in results] == [CommitOutcome.ADMITTED] * len(admitted) != []
    assert held_back(b) == [(first, in_progress - 1, in_progress)]


def test_a_paused_trigger_is_not_decided_and_a_resume_runs_the_occurrence_in_progress(
        paused_bed: Backend) -> None:
    b = paused_bed
    view = pause(b, reason="maintenance")
    assert view.paused_at(b.now_ms()) and view.pause_reason == "maintenance"
    began = view.schedule.pause.from_ms
    first = next_second(began)
    b.set_cursor("demo", "tick", first)  # the first occurrence inside the pause
    b.pass_time(2_500)
    assert cycle(b) == [] and runs_of(b) == []  # held: not even claimed
    resumed = b.definitions.trigger_resume(TriggerResumeParams(project_id="demo",
                                                               trigger_id="tick", actor="tester"))
    ended = resumed.schedule.pause.until_ms
    assert not resumed.paused_at(b.now_ms())
    in_progress = ended // SECOND * SECOND  # the last occurrence at or before the resume
    assert_resumed_at(b, cycle(b), first, in_progress)
    # the history keeps who and why
    [history] = rows(b, "SELECT paused_by, resumed_by, reason, until_ms, resumed_at_ms "
                        "FROM trigger_pauses WHERE trigger_id = 'tick'")
    assert history == {"paused_by": "tester", "resumed_by": "tester", "reason": "maintenance",
                       "until_ms": None, "resumed_at_ms": ended}
    # the audit explains the held-back stretch and accepts the Run of the occurrence in
    # progress (on PostgreSQL its claim's cursor is the stretch's start, not that occurrence)
    report = run_audit(b.url("ql_runtime"), b.clock(), AuditParams(start_ms=first, end_ms=in_progress, settle_ms=0,
                                               project_id="demo", trigger_id="tick"))
    [tick] = report.triggers
    assert report.ok, tick
    assert (tick.admitted, tick.gaps_paused, tick.fenced_out) == (
        1, (in_progress - first) // SECOND, [])


def test_a_timed_pause_ends_by_itself_on_the_stores_clock(paused_bed: Backend) -> None:
    b = paused_bed
    # The pause ends seconds after the first occurrence inside it falls due, so the cycle that
    # finds that occurrence held comes well before the end even on a slow machine.
    until = next_second(b.now_ms()) + 5_200
    view = pause(b, until_ms=until)
    began = view.schedule.pause.from_ms
    first = next_second(began)
    b.set_cursor("demo", "tick", first)
    b.pass_time(first - b.now_ms() + 100)  # the first occurrence inside the pause is due
    assert cycle(b) == [] and runs_of(b) == []  # still paused: not even claimed
    b.pass_time(until - b.now_ms() + 300)  # nobody resumes it: its end passes
    in_progress = until // SECOND * SECOND  # the last occurrence at or before the end
    assert_resumed_at(b, cycle(b), first, in_progress)


def test_pausing_fences_a_decision_in_flight(paused_bed: Backend) -> None:
    b = paused_bed
    due_at = b.now_ms() // SECOND * SECOND
    b.set_cursor("demo", "tick", due_at)
    ids = AdmissionIds.new(lambda: str(uuid.uuid4()))
    [claim] = b.schedules.schedule_claim(ScheduleClaimParams(owner="contract", lease_ms=10_000,
                                                             limit=1))
    assert not isinstance(claim, CorruptScheduleRow)
    decision = claim.decide(grace_ms=30_000)
    assert decision.disposition is Disposition.ADMIT
    pause(b)
    result = b.schedules.schedule_commit(ClaimCommitParams(claim=claim, decision=decision,
                                                           ids=ids))
    assert result.outcome is CommitOutcome.RACED
    assert runs_of(b) == []


def test_pausing_again_moves_the_end_and_keeps_the_start(paused_bed: Backend) -> None:
    b = paused_bed
    first = pause(b, until_ms=b.now_ms() + 60_000, reason="one")
    b.let_time_pass()
    again = pause(b, until_ms=b.now_ms() + 120_000, reason="two")
    assert again.schedule.pause.from_ms == first.schedule.pause.from_ms
    assert again.schedule.pause.until_ms > first.schedule.pause.until_ms
    assert again.pause_reason == "two"
    assert len(rows(b, "SELECT paused_at_ms FROM trigger_pauses")) == 1


def test_bad_pauses_and_resumes_are_refused_and_write_nothing(paused_bed: Backend) -> None:
    b = paused_bed
    with pytest.raises(Conflict, match="not paused"):
        b.definitions.trigger_resume(TriggerResumeParams(project_id="demo", trigger_id="tick",
                                                         actor="tester"))
    with pytest.raises(InvalidInput, match="until"):
        pause(b, until_ms=b.now_ms() - 1)
    with pytest.raises(InvalidInput, match="until"):
        pause(b, until_ms=b.now_ms() + 11 * 366 * 86_400_000)
    with pytest.raises(InvalidInput, match="reason"):
        pause(b, reason=" ")
    with pytest.raises(InvalidInput, match="actor"):
        b.definitions.trigger_pause(TriggerPauseParams(project_id="demo", trigger_id="tick",
                                                       actor=""))
    with pytest.raises(NotFound):
        b.definitions.trigger_pause(TriggerPauseParams(project_id="demo", trigger_id="nope",
                                                       actor="tester"))
    assert rows(b, "SELECT paused_at_ms FROM trigger_pauses") == []
    [schedule] = rows(b, "SELECT paused_from_ms FROM trigger_schedules")
    assert schedule["paused_from_ms"] is None


def test_a_pause_survives_a_republish(paused_bed: Backend) -> None:
    b = paused_bed
    pause(b)
    b.definitions.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="tick",
                                                       expression="*/2 * * * * *"))
    b.pass_time(2_500)
    assert cycle(b) == [] and runs_of(b) == []
    [view] = b.definitions.trigger_list("demo", "tick")
    assert view.revision.revision == 2 and view.paused_at(b.now_ms())


def test_pausing_a_project_pauses_each_of_its_triggers(paused_bed: Backend) -> None:
    b = paused_bed
    b.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="tock", task_id="hello", expression="*/2 * * * * *",
        timezone="UTC"))
    pause(b, reason="first")  # one already paused gets the project's end and reason
    until = b.now_ms() + 60_000
    views = b.definitions.project_pause(ProjectPauseParams(project_id="demo", actor="ops",
                                                           until_ms=until, reason="freeze"))
    now = b.now_ms()
    assert [(v.revision.trigger_id, v.paused_at(now), v.pause_reason) for v in views] == [
        ("tick", True, "freeze"), ("tock", True, "freeze")]
    assert {v.schedule.pause.until_ms for v in views} == {until}
    b.pass_time(2_500)
    assert cycle(b) == []
    resumed = b.definitions.project_resume(ProjectPauseParams(project_id="demo", actor="ops"))
    assert not any(v.paused_at(b.now_ms()) for v in resumed)
    with pytest.raises(Conflict, match="no trigger"):
        b.definitions.project_resume(ProjectPauseParams(project_id="demo", actor="ops"))
    b.definitions.project_create(ProjectCreateParams(project_id="empty"))
    with pytest.raises(Conflict, match="no triggers"):
        b.definitions.project_pause(ProjectPauseParams(project_id="empty", actor="ops"))
    with pytest.raises(NotFound):
        b.definitions.project_pause(ProjectPauseParams(project_id="nope", actor="ops"))


def test_the_wake_up_hint_includes_the_end_of_a_timed_pause(paused_bed: Backend) -> None:
    b = paused_bed
    now = b.now_ms()
    b.set_cursor("demo", "tick", now + 3_600_000)  # nothing due for an hour
    pause(b, until_ms=now + 50_000)
    before = b.now_ms()
    hint = b.schedules.schedule_next_due_in_ms()
    after = b.now_ms()
    # the time left to the pause's end, read between ``before`` and ``after`` (the same
    # instant on a clock the test holds still)
    assert hint is not None and now + 50_000 - after <= hint <= now + 50_000 - before
    assert 40_000 <= hint <= 50_000
