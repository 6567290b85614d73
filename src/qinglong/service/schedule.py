"""When a trigger fires next, as people ask it (not as the scheduler decides it)."""

from __future__ import annotations

from qinglong.domain.model import TriggerView
from qinglong.domain.occurrences import is_done_cursor
from qinglong.domain.trigger import TriggerRevision


def trigger_done(view: TriggerView) -> bool:
    """Whether a trigger that could fire has no occurrence left: its scheduler decided the
    last one of the current revision (a one-shot trigger after its instant)."""
    schedule = view.schedule
    return (view.state == "firing" and schedule is not None
            and schedule.trigger_revision == view.revision.revision
            and is_done_cursor(schedule.next_fire_at_ms))


def trigger_upcoming(view: TriggerView, *, now_ms: int, count: int) -> list[int]:
    """The next ``count`` fire times of a firing trigger: from its durable cursor when it has
    one, else from the first occurrence at or after both its publish time and ``now_ms``;
    while a pause holds it, from the pause's end (none while it lasts until a resume). A
    finished schedule (no occurrence left) has none."""
    if count <= 0 or not view.firing or trigger_done(view):
        return []
    schedule = view.revision.spec.schedule
    cursor = view.schedule.next_fire_at_ms if view.schedule else None
    first = cursor if cursor is not None else schedule.first_at_or_after(
        max(view.revision.created_at_ms, now_ms))
    pause = view.schedule.pause if view.schedule else None
    if pause is not None and pause.in_effect_at(now_ms) and first is not None:
        if pause.until_ms is None:
            return []  # paused until resumed
        after_pause = schedule.first_at_or_after(pause.until_ms)
        first = None if after_pause is None else max(first, after_pause)
    times: list[int] = []
    at = first
    while at is not None and len(times) < count:
        times.append(at)
        at = schedule.next_after(at)
    return times


def jittered(revision: TriggerRevision, nominal_ms: list[int]) -> list[int]:
    """When each of these occurrences of the revision becomes due: its jittered instant (the
    nominal one for a trigger without jitter)."""
    delay = revision.spec.delay(revision.project_id, revision.trigger_id)
    return list(nominal_ms) if delay is None else [delay.due(at) for at in nominal_ms]
