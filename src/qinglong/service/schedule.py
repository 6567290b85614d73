"""When a trigger fires next, as people ask it (not as the scheduler decides it)."""

from __future__ import annotations

from qinglong.domain.model import TriggerView


def trigger_upcoming(view: TriggerView, *, now_ms: int, count: int) -> list[int]:
    """The next ``count`` fire times of a firing trigger: from its durable cursor when it has
    one, else from the first occurrence at or after both its publish time and ``now_ms``;
    while a pause holds it, from the pause's end (none while it lasts until a resume)."""
    if count <= 0 or not view.firing:
        return []
    schedule = view.revision.spec.schedule
    cursor = view.schedule.next_fire_at_ms if view.schedule else None
    first = cursor if cursor is not None else schedule.first_at_or_after(
        max(view.revision.created_at_ms, now_ms))
    pause = view.schedule.pause if view.schedule else None
    if pause is not None and pause.in_effect_at(now_ms):
        if pause.until_ms is None:
            return []  # paused until resumed
        first = max(first, schedule.first_at_or_after(pause.until_ms))
    times = [first]
    while len(times) < count:
        times.append(schedule.next_after(times[-1]))
    return times
