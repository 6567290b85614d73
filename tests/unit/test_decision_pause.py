"""The decision after a pause: what the pause held back is recorded, the occurrence in
progress when it ended follows the misfire rules, and nothing is replayed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.domain.cron import CronSchedule
from qinglong.domain.decision import Disposition, Pause, decide, last_at_or_before
from qinglong.domain.trigger import MisfirePolicy
from qinglong.errors import InvalidInput

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SKIP = MisfirePolicy.SKIP
ONCE = MisfirePolicy.FIRE_ONCE
EVERY_MINUTE = CronSchedule.parse("* * * * *", "UTC")
EVERY_SECOND = CronSchedule.parse("* * * * * *", "UTC")
DAILY_2AM = CronSchedule.parse("0 2 * * *", "UTC")


def at(clock: str, day: int = 1) -> int:
    moment = datetime.fromisoformat(f"2026-01-{day:02d}T{clock}+00:00")
    return (moment - EPOCH) // timedelta(milliseconds=1)


def test_a_pause_in_effect_is_never_decided() -> None:
    with pytest.raises(InvalidInput, match="pause"):
        decide(cursor_ms=at("10:05:00"), published_at_ms=at("09:00:00"),
               observed_at_ms=at("10:06:00"), grace_ms=30_000, policy=SKIP,
               occurrences=EVERY_MINUTE, pause=Pause(from_ms=at("10:00:30")))
    with pytest.raises(InvalidInput, match="pause"):
        decide(cursor_ms=at("10:05:00"), published_at_ms=at("09:00:00"),
               observed_at_ms=at("10:06:00"), grace_ms=30_000, policy=SKIP,
               occurrences=EVERY_MINUTE,
               pause=Pause(from_ms=at("10:00:30"), until_ms=at("10:06:00") + 1))


def test_resumed_within_the_grace_of_the_occurrence_in_progress_admits_it_on_time() -> None:
    # paused 10:00:30-10:05:20, every minute: 10:01..10:04 held back, 10:05 (20 s late) runs
    decision = decide(cursor_ms=at("10:01:00"), published_at_ms=at("09:00:00"),
                      observed_at_ms=at("10:05:21"), grace_ms=30_000, policy=SKIP,
                      occurrences=EVERY_MINUTE,
                      pause=Pause(from_ms=at("10:00:30"), until_ms=at("10:05:20")))
    assert decision.disposition is Disposition.ADMIT and not decision.misfired
    assert decision.scheduled_for_ms == decision.due_at_ms == at("10:05:00")
    assert (decision.paused_from_ms, decision.paused_through_ms) == (at("10:01:00"),
                                                                   at("10:05:00") - 1)
    assert decision.next_fire_at_ms == at("10:06:00")


@pytest.mark.parametrize("policy, disposition", [(SKIP, Disposition.SKIP),
                                                 (ONCE, Disposition.ADMIT)])
def test_an_occurrence_in_progress_already_late_follows_the_misfire_policy(
        policy: MisfirePolicy, disposition: Disposition) -> None:
    # daily at 02:00, paused 01:00-03:00: at the resume 02:00 is an hour late
    decision = decide(cursor_ms=at("02:00:00"), published_at_ms=at("00:00:00"),
                      observed_at_ms=at("03:00:01"), grace_ms=30_000, policy=policy,
                      occurrences=DAILY_2AM,
                      pause=Pause(from_ms=at("01:00:00"), until_ms=at("03:00:00")))
    assert decision.disposition is disposition and decision.misfired
    assert decision.due_at_ms == at("02:00:00")
    assert decision.paused_from_ms is None  # nothing before it was held back
    assert decision.next_fire_at_ms == at("02:00:00", day=2)


def test_a_cursor_due_before_the_pause_or_after_it_is_decided_as_usual() -> None:
    pause = Pause(from_ms=at("10:00:30"), until_ms=at("10:05:20"))
    before = decide(cursor_ms=at("10:00:00"), published_at_ms=at("09:00:00"),
                    observed_at_ms=at("10:05:21"), grace_ms=30_000, policy=SKIP,
                    occurrences=EVERY_MINUTE, pause=pause)
    assert before.misfired and before.paused_from_ms is None
    after = decide(cursor_ms=at("10:06:00"), published_at_ms=at("09:00:00"),
                   observed_at_ms=at("10:06:01"), grace_ms=30_000, policy=SKIP,
                   occurrences=EVERY_MINUTE, pause=pause)
    assert after.disposition is Disposition.ADMIT and after.paused_from_ms is None


def test_a_long_pause_of_a_frequent_trigger_is_decided_in_few_steps() -> None:
    calls = 0

    class Counting:
        def next_after(self, after_ms: int) -> int:
            nonlocal calls
            calls += 1
            return EVERY_SECOND.next_after(after_ms)

    decision = decide(cursor_ms=at("00:00:00"), published_at_ms=at("00:00:00"),
                      observed_at_ms=at("00:00:01", day=8), grace_ms=5_000, policy=SKIP,
                      occurrences=Counting(),
                      pause=Pause(from_ms=at("00:00:00"), until_ms=at("00:00:00", day=8)))
    assert decision.due_at_ms == at("00:00:00", day=8)
    assert decision.paused_through_ms == at("00:00:00", day=8) - 1
    assert calls < 10


@settings(max_examples=200)
@given(expression=st.sampled_from(["* * * * * *", "*/7 * * * * *", "0 * * * *", "*/5 * * * *",
                                   "0 2 * * *", "0 0-5 * * *", "15 10 1 * *"]),
       offset=st.integers(0, 40 * 86_400_000), span=st.integers(0, 2 * 3_600_000))
def test_last_at_or_before_matches_a_walk(expression: str, offset: int, span: int) -> None:
    schedule = CronSchedule.parse(expression, "Asia/Shanghai")
    floor = schedule.first_at_or_after(at("00:00:00") + offset)
    until = floor + span
    walked = floor
    while (following := schedule.next_after(walked)) <= until:
        walked = following
    assert last_at_or_before(schedule, until, floor_ms=floor) == walked


def test_a_pause_cannot_end_before_it_began() -> None:
    with pytest.raises(InvalidInput):
        Pause(from_ms=10, until_ms=9)


@settings(max_examples=150)
@given(expression=st.sampled_from(["0 2 * * *", "0 0-5 * * *", "15 10 1 * *", "0 9 * * 1-5",
                                   "30 23 29 2 *"]),
       offset=st.integers(0, 400 * 86_400_000), span=st.integers(0, 800 * 86_400_000))
def test_last_at_or_before_matches_a_walk_for_sparse_schedules_and_long_pauses(
        expression: str, offset: int, span: int) -> None:
    test_last_at_or_before_matches_a_walk.hypothesis.inner_test(  # type: ignore[attr-defined]
        expression=expression, offset=offset, span=span)
