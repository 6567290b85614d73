"""Issue 18, item 7: backfill accepts a window before the trigger's first publish (the
history of a migrated crontab), and still refuses what reaches the cursor -- the future
included -- and a window of too many occurrences (docs/controls/backfill.md)."""

from __future__ import annotations

import pytest

from qinglong.domain.backfill import (
    MAX_OCCURRENCES,
    BackfillRequest,
    BackfillTarget,
    window_occurrences,
)
from qinglong.domain.task import CommandSpec, ShellCommand, new_task_revision
from qinglong.domain.trigger import CronTriggerSpec, new_trigger_revision
from qinglong.errors import InvalidInput

T0 = 1_799_913_600_000  # 2027-01-14T08:00:00Z, when the trigger was first published
HOUR = 3_600_000
DAY = 24 * HOUR


def published_today(expression: str, *, cursor: int | None) -> BackfillTarget:
    """A trigger whose only revision was published at T0 (as `ql import crontab` does)."""
    task = new_task_revision(project="legacy", task="job", revision=1, name="job",
                             spec=CommandSpec(command=ShellCommand(command="true")),
                             enabled=True, created_at_ms=T0 - 1)
    trigger = new_trigger_revision(
        project="legacy", trigger="job", revision=1, task="job", task_revision=1,
        task_content_digest=task.content_digest,
        spec=CronTriggerSpec.parse(expression=expression, timezone="UTC", misfire="skip"),
        enabled=True, created_at_ms=T0)
    return BackfillTarget(trigger=trigger, cursor_ms=cursor)


def request(from_ms: int, to_ms: int) -> BackfillRequest:
    return BackfillRequest(project_id="legacy", trigger_id="job", from_ms=from_ms, to_ms=to_ms,
                           actor="alice")


def test_the_days_before_the_first_publish_are_the_triggers_past() -> None:
    hourly = published_today("0 * * * *", cursor=T0 + HOUR)
    got = window_occurrences(request(T0 - 30 * DAY, T0 - 1), hourly)
    assert got == tuple(range(T0 - 30 * DAY, T0, HOUR))
    # across the publish, up to the cursor (the scheduler decided T0)
    assert window_occurrences(request(T0 - 2 * HOUR, T0 + HOUR - 1), hourly) == (
        T0 - 2 * HOUR, T0 - HOUR, T0)


def test_a_window_may_reach_back_to_the_epoch() -> None:
    yearly = published_today("0 0 1 1 *", cursor=T0 + DAY)
    got = window_occurrences(request(0, T0), yearly)
    assert (len(got), got[0], got[-1]) == (58, 0, 1_798_761_600_000)  # 1970 to 2027-01-01


def test_too_many_occurrences_before_the_publish_are_still_refused_with_where_to_cut() -> None:
    every_second = published_today("* * * * * *", cursor=T0 + 1_000)
    start = T0 - 3 * HOUR
    with pytest.raises(InvalidInput) as refused:
        window_occurrences(request(start, T0 - 1), every_second)
    assert refused.value.field == "to"
    assert f"more than {MAX_OCCURRENCES} occurrences" in refused.value.rule
    assert f"--to {start + (MAX_OCCURRENCES - 1) * 1_000}" in refused.value.rule
    assert len(window_occurrences(request(start, start + (MAX_OCCURRENCES - 1) * 1_000),
                                  every_second)) == MAX_OCCURRENCES


def test_the_cursor_still_bounds_the_window_so_the_future_is_refused() -> None:
    hourly = published_today("0 * * * *", cursor=T0 + HOUR)
    for to_ms in (T0 + HOUR, T0 + 365 * DAY):
        with pytest.raises(InvalidInput) as refused:
            window_occurrences(request(T0 - DAY, to_ms), hourly)
        assert refused.value.field == "to" and "2027-01-14T09:00:00.000Z" in refused.value.rule
    # nothing decided yet: the current revision's publish is where the scheduler's part begins
    undecided = published_today("0 * * * *", cursor=None)
    assert len(window_occurrences(request(T0 - DAY, T0 - 1), undecided)) == 24
    with pytest.raises(InvalidInput, match="has not decided an occurrence"):
        window_occurrences(request(T0 - DAY, T0), undecided)
