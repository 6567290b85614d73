"""The audit's checker on plain records: where the window ends by default (heartbeats,
clean stops, the last scheduling decision, nothing at all), when a scheduler counts as
running, and duplicates judged whatever the window."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from qinglong.audit.checker import (
    END_SOURCES,
    RECENT_HEARTBEAT_MS,
    STALE_HEARTBEAT_MS,
    audit,
    default_end,
)
from qinglong.audit.model import (
    AuditInput,
    AuditParams,
    InstanceRecord,
    MisfireRecord,
    PauseRecord,
    RunRecord,
    TaskRevisionRecord,
    TriggerRevisionRecord,
)
from qinglong.loops import MAX_INTERVAL_S

# 2027-01-14T08:00:00Z, far from any DST transition; every trigger here fires each second.
T0 = 1_799_913_600_000
NOW = T0 + 600_000
_IDS = itertools.count(1)


def revision(published_at_ms: int = T0, trigger_id: str = "t1") -> TriggerRevisionRecord:
    return TriggerRevisionRecord(
        project_id="demo", trigger_id=trigger_id, revision=1, task_id="hello", task_revision=1,
        expression="* * * * * *", timezone="UTC", misfire_policy="skip", enabled=True,
        published_at_ms=published_at_ms)


TASK = TaskRevisionRecord(project_id="demo", task_id="hello", revision=1, enabled=True,
                          published_at_ms=T0 - 1_000)


def run(scheduled_for_ms: int, created_at_ms: int | None = None,
        trigger_id: str = "t1") -> RunRecord:
    return RunRecord(
        id=f"run-{next(_IDS)}", project_id="demo", trigger_id=trigger_id, trigger_revision=1,
        scheduled_for_ms=scheduled_for_ms,
        created_at_ms=scheduled_for_ms + 3 if created_at_ms is None else created_at_ms,
        attempts=1, admission_events=2, claim_version=None, claim_token=None)


def runs_until(last_ms: int, first_ms: int = T0) -> tuple[RunRecord, ...]:
    """One Run for every second from ``first_ms`` to ``last_ms``, admitted 3 ms late."""
    return tuple(run(at) for at in range(first_ms, last_ms + 1, 1_000))


def instance(seen_at_ms: int, stopped_at_ms: int | None = None, role: str = "serve",
             instance_id: str = "local") -> InstanceRecord:
    return InstanceRecord(instance_id=instance_id, role=role, seen_at_ms=seen_at_ms,
                          stopped_at_ms=stopped_at_ms)


def data(*, instances: tuple[InstanceRecord, ...] = (), runs: tuple[RunRecord, ...] = (),
         misfires: tuple[MisfireRecord, ...] = (),
         revisions: tuple[TriggerRevisionRecord, ...] = (), now_ms: int = NOW) -> AuditInput:
    return AuditInput(dialect="sqlite", now_ms=now_ms, revisions=revisions, task_revisions=(TASK,),
                      archivals=(), instances=instances, runs=runs, claims=None, misfires=misfires,
                      schedules=())


def test_the_staleness_bound_covers_the_longest_cadence() -> None:
    # `ql serve --interval` and `ql control --interval-ms` allow up to 1 h between cycles
    assert MAX_INTERVAL_S == 3600
    assert STALE_HEARTBEAT_MS > MAX_INTERVAL_S * 1000
    assert set(END_SOURCES) == {"option", "now", "stop", "heartbeat", "decision", "no-scheduler"}


# --- with heartbeats ------------------------------------------------------------------------


def test_a_scheduler_seen_just_now_is_running_and_the_window_ends_now() -> None:
    end = default_end(data(instances=(instance(NOW - 1_000),), runs=runs_until(NOW - 1_000)))
    assert (end.at_ms, end.source) == (NOW, "now")
    assert "a scheduler is running" in end.note and "presumed" not in end.note


@pytest.mark.parametrize("silent_ms", [30_000, 10 * 60_000, int(MAX_INTERVAL_S * 1000)])
def test_a_scheduler_on_a_slow_cadence_is_still_running(silent_ms: int) -> None:
    """`ql serve --interval 1h` heartbeats once per cycle: silence up to the cadence is not
    death (the old 20 s bound called such a live server "no scheduler is running")."""
    end = default_end(data(instances=(instance(NOW - silent_ms),)))
    assert (end.at_ms, end.source) == (NOW, "now")
    assert silent_ms > RECENT_HEARTBEAT_MS and "presumed running" in end.note
    assert "no scheduler is running" not in end.note


def test_a_scheduler_silent_for_longer_than_any_cadence_is_not_running() -> None:
    seen = NOW - STALE_HEARTBEAT_MS - 1
    end = default_end(data(instances=(instance(seen),), runs=runs_until(seen - 10_000)))
    assert (end.at_ms, end.source) == (seen, "heartbeat")
    assert "no scheduler is running" in end.note and "last heartbeat of local" in end.note


def test_after_a_clean_stop_the_window_ends_at_the_stop() -> None:
    stopped = NOW - 4_000
    end = default_end(data(instances=(instance(stopped, stopped),), runs=runs_until(stopped - 200)))
    assert (end.at_ms, end.source) == (stopped, "stop")
    assert "no scheduler is running" in end.note and "clean stop of local" in end.note


def test_the_latest_of_several_schedulers_ends_the_window() -> None:
    end = default_end(data(instances=(
        instance(NOW - 50_000, NOW - 50_000, role="control", instance_id="a"),
        instance(NOW - 9_000, NOW - 9_000, role="control", instance_id="b"),
        instance(NOW - 1_000, role="worker", instance_id="w"),  # workers decide nothing
    )))
    assert (end.at_ms, end.source) == (NOW - 9_000, "stop")


def test_decisions_after_the_last_heartbeat_extend_the_window_after_a_crash() -> None:
    """Heartbeats are throttled (5 s), so a crash can follow admissions the last heartbeat
    missed: those Runs are judged, not dropped."""
    seen = NOW - STALE_HEARTBEAT_MS - 10_000
    last_run = run(seen + 4_000 - 3)  # admitted at seen + 4 s, then the process died
    end = default_end(data(instances=(instance(seen),), runs=(*runs_until(seen), last_run)))
    assert (end.at_ms, end.source) == (seen + 4_000, "decision")
    assert "no scheduler is running" in end.note


# --- without heartbeats ---------------------------------------------------------------------


def test_without_heartbeats_the_window_ends_at_the_last_admission() -> None:
    """A database from before the instances table, or one no `ql serve`/`ql control` ran on:
    the window ends at the last evidence of scheduling, not now."""
    runs = runs_until(T0 + 59_000)
    end = default_end(data(runs=runs, revisions=(revision(),)))
    assert end.at_ms == max(r.created_at_ms for r in runs) == T0 + 59_003
    assert end.source == "decision" and "no scheduler heartbeats are recorded" in end.note


def test_without_heartbeats_a_later_misfire_decision_ends_the_window() -> None:
    misfire = MisfireRecord(project_id="demo", trigger_id="t1", trigger_revision=1,
                            due_at_ms=T0 + 10_000, skipped_through_ms=T0 + 99_000,
                            next_fire_at_ms=T0 + 100_000, policy="skip", run_id=None,
                            decided_at_ms=T0 + 99_500)
    end = default_end(data(runs=runs_until(T0 + 9_000), misfires=(misfire,)))
    assert (end.at_ms, end.source) == (T0 + 99_500, "decision")


def test_worker_heartbeats_alone_are_no_scheduler_evidence() -> None:
    end = default_end(data(instances=(instance(NOW - 500, role="worker"),),
                           runs=runs_until(T0 + 5_000)))
    assert (end.at_ms, end.source) == (T0 + 5_003, "decision")


def test_without_heartbeats_the_audit_reports_no_false_gaps() -> None:
    """Occurrences after the last admission were never up to any scheduler: no gaps."""
    runs = runs_until(T0 + 59_000)
    report = audit(data(runs=runs, revisions=(revision(),)), AuditParams(settle_ms=5_000))
    assert report.ok, report
    [t1] = report.triggers
    assert t1.gaps_unexplained == [] and t1.admitted == t1.expected == 55
    assert report.end_ms == T0 + 59_003 and report.end_source == "decision"
    assert any("no scheduler heartbeats are recorded" in note for note in report.notes)


def test_without_heartbeats_a_missing_run_is_still_a_gap() -> None:
    runs = tuple(r for r in runs_until(T0 + 59_000) if r.scheduled_for_ms != T0 + 20_000)
    report = audit(data(runs=runs, revisions=(revision(),)), AuditParams(settle_ms=5_000))
    assert report.triggers[0].gaps_unexplained == [T0 + 20_000]


# --- an empty database ----------------------------------------------------------------------


def test_an_empty_database_ends_the_window_now() -> None:
    end = default_end(data())
    assert (end.at_ms, end.source) == (NOW, "no-scheduler")
    report = audit(data(), AuditParams())
    assert report.ok and report.triggers == [] and report.end_ms == NOW


def test_published_triggers_that_no_scheduler_ever_saw_require_nothing() -> None:
    report = audit(data(revisions=(revision(),)), AuditParams())
    assert report.ok, report
    assert report.end_source == "no-scheduler" and report.end_ms == report.start_ms == T0
    assert report.triggers[0].expected == 0


def test_an_explicit_end_is_named_as_such() -> None:
    report = audit(data(revisions=(revision(),), runs=runs_until(T0 + 9_000)),
                   AuditParams(end_ms=T0 + 9_000, settle_ms=0))
    assert report.end_source == "option" and report.end_ms == T0 + 9_000 and report.ok


# --- duplicates whatever the window ---------------------------------------------------------


def test_a_duplicate_after_the_window_end_is_reported() -> None:
    runs = runs_until(T0 + 30_000)
    twice = run(T0 + 25_000)  # a second Run for an occurrence after --to
    report = audit(data(revisions=(revision(),), runs=(*runs, twice)),
                   AuditParams(end_ms=T0 + 20_000, settle_ms=0))
    [t1] = report.triggers
    assert t1.duplicates == 1 and not report.ok
    assert any("after the window end" in note for note in report.notes)
    assert t1.spurious == [] and t1.admitted == 21  # the rest is judged in the window only


def test_a_duplicate_admitted_after_the_last_heartbeat_is_reported() -> None:
    seen = NOW - STALE_HEARTBEAT_MS - 10_000
    runs = runs_until(seen + 3_000, first_ms=seen - 30_000)
    again = run(seen + 3_000, created_at_ms=seen + 3_500)
    report = audit(data(instances=(instance(seen),), revisions=(revision(seen - 30_000),),
                        runs=(*runs, again)), AuditParams(settle_ms=5_000))
    assert report.triggers[0].duplicates == 1 and not report.ok


def test_duplicates_across_revisions_are_counted_once_per_extra_run() -> None:
    second = dataclasses.replace(run(T0 + 5_000), id="other", trigger_revision=2)
    report = audit(data(revisions=(revision(),), runs=(*runs_until(T0 + 9_000), second)),
                   AuditParams(end_ms=T0 + 9_000, settle_ms=0))
    assert report.triggers[0].duplicates == 1


# -- pauses --------------------------------------------------------------------------------


def paused_input(runs: tuple[RunRecord, ...], pauses: tuple[PauseRecord, ...],
                 misfires: tuple[MisfireRecord, ...] = ()) -> AuditInput:
    return dataclasses.replace(
        data(instances=(instance(T0 + 60_000, stopped_at_ms=T0 + 60_000),), runs=runs,
             misfires=misfires, revisions=(revision(),)),
        pauses=pauses)


def held(due_ms: int, through_ms: int) -> MisfireRecord:
    return MisfireRecord(project_id="demo", trigger_id="t1", trigger_revision=1, due_at_ms=due_ms,
                         skipped_through_ms=through_ms, next_fire_at_ms=through_ms + 1,
                         policy="paused", run_id=None, decided_at_ms=through_ms + 2)


def pause_of(began_ms: int, ended_ms: int | None) -> PauseRecord:
    return PauseRecord(project_id="demo", trigger_id="t1", paused_at_ms=began_ms,
                       ended_at_ms=ended_ms)


def test_occurrences_held_back_by_a_pause_are_explained() -> None:
    # paused from +10.5 s to +20.5 s: 11..19 held back (recorded), 20 ran at the resume
    runs = (*runs_until(T0 + 10000), run(T0 + 20000, T0 + 20600), *runs_until(T0 + 60000, T0 + 21000))
    report = audit(paused_input(runs, (pause_of(T0 + 10_500, T0 + 20_500),),
                                (held(T0 + 11_000, T0 + 19_999),)), AuditParams(settle_ms=0))
    assert report.ok, report
    assert report.triggers[0].gaps_paused == 9


def test_a_pause_still_in_effect_explains_what_it_holds_back() -> None:
    report = audit(paused_input(runs_until(T0 + 10_000), (pause_of(T0 + 10_500, None),)),
                   AuditParams(settle_ms=0))
    assert report.ok, report
    assert report.triggers[0].gaps_paused == 50


def test_a_run_admitted_inside_a_pause_is_a_violation() -> None:
    # 15 ran although the pause held it (only 20, in progress at the resume, may run)
    runs = ((*runs_until(T0 + 10000), run(T0 + 15000), run(T0 + 20000, T0 + 20600), *runs_until(T0 + 60000, T0 + 21000)))
    report = audit(paused_input(runs, (pause_of(T0 + 10_500, T0 + 20_500),)),
                   AuditParams(settle_ms=0))
    assert report.triggers[0].pause_violations == [f"admitted-while-paused@{T0 + 15_000}"]
    assert not report.ok


def test_a_record_of_held_back_occurrences_outside_any_pause_is_a_violation() -> None:
    runs = runs_until(T0 + 10_000) + runs_until(T0 + 60_000, T0 + 20_000)
    report = audit(paused_input(runs, (), (held(T0 + 11_000, T0 + 19_999),)),
                   AuditParams(settle_ms=0))
    assert report.triggers[0].pause_violations == [f"paused-outside-a-pause@{T0 + 11_000}"]
    assert not report.ok


# -- backfilled Runs ---------------------------------------------------------------------------


def backfilled(scheduled_for_ms: int, created_at_ms: int = NOW - 1_000,
               trigger_revision: int = 1) -> RunRecord:
    """A Run `ql trigger backfill` admitted late for a past occurrence (no claim)."""
    return dataclasses.replace(run(scheduled_for_ms, created_at_ms), trigger_type="backfill",
                               trigger_revision=trigger_revision)


def test_an_occurrence_a_backfill_admitted_later_is_explained() -> None:
    # 11..19 were never decided (no misfire record, no pause), then backfilled
    runs = (*runs_until(T0 + 10_000), *runs_until(T0 + 60_000, T0 + 20_000),
            *(backfilled(at) for at in range(T0 + 11_000, T0 + 20_000, 1_000)))
    before = audit(paused_input(runs[:-9], ()), AuditParams(settle_ms=0))
    assert len(before.triggers[0].gaps_unexplained) == 9
    report = audit(paused_input(runs, ()), AuditParams(settle_ms=0))
    assert report.ok, report
    [t1] = report.triggers
    assert (t1.expected, t1.admitted, t1.gaps_backfilled) == (61, 52, 9)
    assert max(t1.lags_ms) == 3  # a backfill is no admission lag


def test_backfilling_what_a_pause_held_back_is_no_pause_violation() -> None:
    runs = (*runs_until(T0 + 10_000), run(T0 + 20_000, T0 + 20_600),
            *runs_until(T0 + 60_000, T0 + 21_000),
            *(backfilled(at) for at in range(T0 + 11_000, T0 + 20_000, 1_000)))
    report = audit(paused_input(runs, (pause_of(T0 + 10_500, T0 + 20_500),),
                                (held(T0 + 11_000, T0 + 19_999),)), AuditParams(settle_ms=0))
    assert report.ok, report
    assert (report.triggers[0].gaps_backfilled, report.triggers[0].gaps_paused) == (9, 0)


def test_a_backfilled_run_beside_a_scheduled_one_or_another_backfill_is_a_duplicate() -> None:
    runs = (*runs_until(T0 + 10_000), backfilled(T0 + 5_000))
    report = audit(paused_input(runs, ()), AuditParams(end_ms=T0 + 10_000, settle_ms=0))
    assert report.triggers[0].duplicates == 1 and not report.ok
    runs = (*runs_until(T0 + 4_000), backfilled(T0 + 5_000), backfilled(T0 + 5_000),
            *runs_until(T0 + 10_000, T0 + 6_000))
    report = audit(paused_input(runs, ()), AuditParams(end_ms=T0 + 10_000, settle_ms=0))
    assert report.triggers[0].duplicates == 1 and report.triggers[0].gaps_backfilled == 1


def test_a_backfilled_run_off_its_revisions_schedule_is_spurious() -> None:
    runs = (*runs_until(T0 + 4_000), backfilled(T0 + 5_500), *runs_until(T0 + 10_000, T0 + 6_000))
    report = audit(paused_input(runs, ()), AuditParams(end_ms=T0 + 10_000, settle_ms=0))
    assert report.triggers[0].spurious == [T0 + 5_500]
    assert report.triggers[0].gaps_unexplained == [T0 + 5_000]


def test_a_backfill_after_the_scheduler_stopped_does_not_move_the_window_end() -> None:
    stopped = NOW - 100_000
    runs = (*runs_until(stopped - 1_000, T0 + 3_000), backfilled(T0 + 2_000, NOW - 1_000))
    found = default_end(data(instances=(instance(stopped, stopped),), runs=runs))
    assert (found.at_ms, found.source) == (stopped, "stop")
