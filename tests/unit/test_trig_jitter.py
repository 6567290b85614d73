"""Bounded jitter: the offsets (a stable part from the trigger's identity plus a per-occurrence
part), never beyond the bound and never out of order, the same everywhere (the audit's own
implementation agrees); the spec keeps old digests; publishing keeps or replaces it; and the
decision judges due-ness, lateness (near the grace) and pauses at the jittered instant while the
occurrence keeps its nominal identity."""

from __future__ import annotations

import itertools
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.audit.jitter import jitter_bounds, jittered_instants
from qinglong.domain.cron import CronSchedule
from qinglong.domain.decision import Disposition, Pause, decide
from qinglong.domain.interval import IntervalSchedule
from qinglong.domain.jitter import Jitter
from qinglong.domain.once import OnceSchedule
from qinglong.domain.publishing import merged_jitter, next_trigger_revision
from qinglong.domain.task import CommandSpec, ShellCommand, new_task_revision
from qinglong.domain.trigger import (
    MisfirePolicy,
    TriggerSpec,
    new_trigger_revision,
    parse_trigger_envelope,
)
from qinglong.errors import InvalidInput

SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
T0 = int(datetime.fromisoformat("2026-12-01T00:00:00+00:00").timestamp() * 1000)
SKIP, FIRE_ONCE = MisfirePolicy.SKIP, MisfirePolicy.FIRE_ONCE


def offsets(jitter: Jitter, schedule: IntervalSchedule | CronSchedule, after_ms: int, count: int,
            trigger: str = "nightly") -> list[tuple[int, int]]:
    due = jitter.delay(schedule, "demo", trigger).due
    nominal = list(itertools.islice(schedule.iter_after(after_ms), count))
    return [(at, due(at)) for at in nominal]


# --- the offsets ---------------------------------------------------------------------------


@pytest.mark.parametrize(("bound", "random", "field"), [
    (0, 0, "jitter"), (3601, 0, "jitter"), (60, 61, "jitter-random"), (-1, 0, "jitter"),
])
def test_bounds_are_checked(bound: int, random: int, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Jitter(bound, random)
    assert caught.value.field == field


def test_no_jitter_and_a_random_part_without_a_bound() -> None:
    assert Jitter.of(0) is None and Jitter.of(0, 0) is None
    assert Jitter.of(3600, 3600) == Jitter(3600, 3600)
    with pytest.raises(InvalidInput, match="needs a jitter"):
        Jitter.of(0, 5)


def test_the_stable_part_is_the_triggers_own_and_spreads_triggers() -> None:
    jitter = Jitter(3600)
    every_hour = IntervalSchedule(3600, T0, "UTC")
    found = offsets(jitter, every_hour, T0 - 1, 50)
    assert len({due - at for at, due in found}) == 1  # no per-occurrence part: one offset
    spread = {jitter.stable_s("demo", f"nightly-{n}") for n in range(200)}
    assert len(spread) > 150 and min(spread) >= 0 and max(spread) <= 3600
    assert jitter.stable_s("demo", "a") != jitter.stable_s("other", "a") or \
        jitter.stable_s("demo", "b") != jitter.stable_s("other", "b")


@settings(max_examples=300, deadline=None)
@given(bound=st.integers(1, 3600), random=st.integers(0, 3600), every_s=st.integers(1, 7200),
       trigger=st.text("abcxyz-0123", min_size=1, max_size=12), count=st.integers(2, 40))
def test_offsets_stay_within_the_bound_and_in_order(bound: int, random: int, every_s: int,
                                                    trigger: str, count: int) -> None:
    jitter = Jitter(bound, min(random, bound))
    schedule = IntervalSchedule(every_s, T0, "UTC")
    found = offsets(jitter, schedule, T0 - 1, count, trigger)
    for at, due in found:
        assert at <= due <= at + bound * SECOND and (due - at) % SECOND == 0
    dues = [due for _, due in found]
    assert dues == sorted(dues) and len(set(dues)) == len(dues)  # strictly in order


@pytest.mark.parametrize("expression", ["* * * * * *", "*/7 * * * * *", "0,1,2 0 * * * *",
                                        "0 3 * * *", "15,16 9 * * MON-FRI"])
def test_cron_occurrences_a_second_apart_stay_in_order(expression: str) -> None:
    jitter = Jitter(600, 600)  # the random part is capped by the gap to the next occurrence
    found = offsets(jitter, CronSchedule.parse(expression, "Europe/Berlin"), T0, 300)
    dues = [due for _, due in found]
    assert all(a < b for a, b in itertools.pairwise(dues))
    assert all(at <= due <= at + 600 * SECOND for at, due in found)


def test_a_one_shot_instant_may_use_the_whole_random_part() -> None:
    jitter = Jitter(3600, 3600)
    due = jitter.delay(OnceSchedule(T0, "UTC"), "demo", "launch").due(T0)
    assert T0 <= due <= T0 + HOUR


@settings(max_examples=300, deadline=None)
@given(bound=st.integers(1, 3600), random=st.integers(0, 3600), every_s=st.integers(1, 900),
       project=st.text("pq", min_size=1, max_size=3), trigger=st.text("abc", min_size=1, max_size=5))
def test_the_audit_computes_the_same_instants(bound: int, random: int, every_s: int, project: str,
                                              trigger: str) -> None:
    jitter = Jitter(bound, min(random, bound))
    schedule = IntervalSchedule(every_s, T0, "UTC")
    due = jitter.delay(schedule, project, trigger).due
    nominal = list(itertools.islice(schedule.iter_after(T0 - 1), 30))
    bounds = jitter_bounds({"jitter": jitter.to_json()})
    assert bounds == (jitter.max_s, jitter.random_s)
    theirs = jittered_instants(bounds, project, trigger, nominal, schedule.next_after)
    assert theirs == {at: due(at) for at in nominal}


@pytest.mark.parametrize("config", [
    {"jitter": {"maxSeconds": 0, "randomSeconds": 0}},
    {"jitter": {"maxSeconds": 10, "randomSeconds": 11}},
    {"jitter": {"maxSeconds": 3601, "randomSeconds": 0}},
])
def test_the_audit_refuses_broken_bounds(config: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="out of range"):
        jitter_bounds(config)
    assert jitter_bounds({}) is None


# --- the spec ------------------------------------------------------------------------------


def revision(spec: TriggerSpec):  # type: ignore[no-untyped-def]
    return new_trigger_revision(project="demo", trigger="nightly", revision=1, task="backup",
                                task_revision=1, task_content_digest="a" * 64, spec=spec,
                                enabled=True, created_at_ms=0)


def test_jitter_is_stored_only_when_set() -> None:
    plain = TriggerSpec.parse(expression="0 3 * * *", timezone="UTC", misfire="skip")
    jittered = TriggerSpec.parse(expression="0 3 * * *", timezone="UTC", misfire="skip",
                                 jitter=Jitter(600, 60))
    assert "jitter" not in plain.json_text()
    assert jittered.envelope()["config"]["jitter"] == {  # type: ignore[index]
        "maxSeconds": 600, "randomSeconds": 60}
    assert revision(plain).content_digest != revision(jittered).content_digest
    assert parse_trigger_envelope(jittered.envelope(), stored=True) == jittered
    interval = TriggerSpec.parse(expression="every 1h from 2026-12-01T00:00:00Z",
                                 timezone="UTC", misfire="skip", jitter=Jitter(30))
    assert parse_trigger_envelope(interval.envelope()) == interval
    broken = jittered.envelope()
    broken["config"]["jitter"] = {"maxSeconds": 600}  # type: ignore[index]
    with pytest.raises(InvalidInput, match="maxSeconds and randomSeconds"):
        parse_trigger_envelope(broken, stored=True)


TASK = new_task_revision(project="demo", task="backup", revision=1, name="backup",
                         spec=CommandSpec(command=ShellCommand(command="true")), enabled=True,
                         created_at_ms=0)


def test_publishing_keeps_replaces_and_removes_the_jitter() -> None:
    first = next_trigger_revision(None, project_id="demo", trigger_id="nightly", task_id="backup",
                                  enabled=True, task=TASK, now_ms=HOUR, expression="0 3 * * *",
                                  timezone="UTC", jitter_s=600)
    assert first is not None and first.spec.jitter == Jitter(600)
    kept = next_trigger_revision(first, project_id="demo", trigger_id="nightly", task_id=None,
                                 enabled=True, task=TASK, now_ms=HOUR, expression="0 4 * * *")
    assert kept is not None and kept.spec.jitter == Jitter(600)
    assert merged_jitter(Jitter(600), None, 60) == Jitter(600, 60)
    assert merged_jitter(Jitter(600, 60), 300, None) == Jitter(300, 60)
    assert merged_jitter(Jitter(600, 60), 0, None) is None
    with pytest.raises(InvalidInput) as caught:
        merged_jitter(Jitter(600, 60), 30, None)  # the random part no longer fits
    assert caught.value.field == "jitter-random"
    with pytest.raises(InvalidInput, match="needs a jitter"):
        merged_jitter(None, None, 30)


# --- the decision at jittered instants -----------------------------------------------------

EVERY_HOUR = IntervalSchedule(3600, T0, "UTC")
JITTER = Jitter(1800)  # a stable offset only: the same for every occurrence of one trigger
DELAY = JITTER.delay(EVERY_HOUR, "demo", "nightly")
OFFSET = DELAY.due(T0) - T0
GRACE = 30_000


def test_the_offset_used_below_is_a_real_delay() -> None:
    assert 0 < OFFSET <= 1800 * SECOND and OFFSET == JITTER.stable_s("demo", "nightly") * SECOND


def test_an_occurrence_becomes_due_at_its_jittered_instant() -> None:
    early = decide(cursor_ms=None, published_at_ms=T0 - MINUTE, observed_at_ms=T0 + 1,
                   grace_ms=GRACE, policy=SKIP, occurrences=EVERY_HOUR, delay=DELAY)
    assert early.disposition is Disposition.INITIALIZE
    assert (early.next_fire_at_ms, early.next_due_at_ms) == (T0, T0 + OFFSET)
    with pytest.raises(InvalidInput, match="not due"):  # a stored cursor before its instant
        decide(cursor_ms=T0, published_at_ms=0, observed_at_ms=T0 + OFFSET - 1, grace_ms=GRACE,
               policy=SKIP, occurrences=EVERY_HOUR, delay=DELAY)


@pytest.mark.parametrize(("late_ms", "on_time"), [(0, True), (GRACE, True), (GRACE + 1, False)])
@pytest.mark.parametrize("policy", [SKIP, FIRE_ONCE])
def test_lateness_near_the_grace_counts_from_the_jittered_instant(late_ms: int, on_time: bool,
                                                                  policy: MisfirePolicy) -> None:
    # observed well past nominal + grace, yet judged against nominal + offset
    decided = decide(cursor_ms=T0, published_at_ms=0, observed_at_ms=T0 + OFFSET + late_ms,
                     grace_ms=GRACE, policy=policy, occurrences=EVERY_HOUR, delay=DELAY)
    assert decided.misfired is not on_time
    assert decided.due_at_ms == T0  # the identity stays nominal
    if on_time or policy is FIRE_ONCE:
        assert decided.scheduled_for_ms == T0 and decided.jittered_for_ms == T0 + OFFSET
    else:
        assert decided.scheduled_for_ms is None and decided.jittered_for_ms is None
    assert decided.next_fire_at_ms == T0 + HOUR
    assert decided.next_due_at_ms == T0 + HOUR + OFFSET
    if not on_time:
        assert decided.skipped_through_ms == T0 + HOUR - 1  # just this one was dropped


def test_a_misfire_keeps_every_occurrence_still_on_time_by_its_jittered_instant() -> None:
    every_minute = IntervalSchedule(60, T0, "UTC")
    delay = Jitter(300).delay(every_minute, "demo", "minutely")
    offset = delay.due(T0) - T0
    observed = T0 + 10 * MINUTE
    decided = decide(cursor_ms=T0, published_at_ms=0, observed_at_ms=observed, grace_ms=GRACE,
                     policy=SKIP, occurrences=every_minute, delay=delay)
    nxt = decided.next_fire_at_ms
    assert nxt is not None and decided.next_due_at_ms == nxt + offset
    assert delay.due(nxt) >= observed - GRACE > delay.due(nxt - MINUTE)  # the first still on time
    assert decided.skipped_through_ms == nxt - 1
    # without jitter the same observation resumes at the first nominal still on time
    plain = decide(cursor_ms=T0, published_at_ms=0, observed_at_ms=observed, grace_ms=GRACE,
                   policy=SKIP, occurrences=every_minute)
    assert plain.next_fire_at_ms == T0 + 10 * MINUTE and plain.next_due_at_ms is None
    assert nxt <= plain.next_fire_at_ms


def test_a_pause_holds_back_what_was_due_in_it() -> None:
    every_minute = IntervalSchedule(60, T0, "UTC")
    delay = Jitter(50).delay(every_minute, "demo", "minutely")
    offset = delay.due(T0) - T0
    assert 0 < offset <= 50 * SECOND
    # the pause ends between 00:05 and its jittered instant: 00:04 is the one in progress
    until = T0 + 5 * MINUTE + offset - 1
    decided = decide(cursor_ms=T0, published_at_ms=0, observed_at_ms=until + 1, grace_ms=300_000,
                     policy=SKIP, occurrences=every_minute, delay=delay,
                     pause=Pause(from_ms=T0 - MINUTE, until_ms=until))
    assert decided.scheduled_for_ms == T0 + 4 * MINUTE
    assert (decided.paused_from_ms, decided.paused_through_ms) == (T0, T0 + 4 * MINUTE - 1)
    assert decided.jittered_for_ms == T0 + 4 * MINUTE + offset
