"""UTC offsets of a time zone over time, for the cron occurrence walker (``domain/cron.py``)
and its DST mapping (``domain/cron_dst.py``): the offset at an instant, the next instant it
changes, and every offset in effect over a span. Instants are whole epoch seconds; ``tz`` is
a tzinfo (``domain/timezones.zone_info``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

PROBE_STEP_S = 7 * 86_400  # offsets never change twice within a week


def offset_at(epoch_s: int, tz: object) -> timedelta | None:
    return datetime.fromtimestamp(epoch_s, UTC).astimezone(tz).utcoffset()  # type: ignore[arg-type]


def offset_seconds(epoch_s: int, tz: object) -> int:
    offset = offset_at(epoch_s, tz)
    return int(offset.total_seconds()) if offset is not None else 0


def first_differing(low: int, high: int, tz: object, base: timedelta | None) -> int:
    """The first second in (low, high] whose offset is not ``base``, where ``low``'s offset
    is ``base`` and ``high``'s is not (a bisection)."""
    while high - low > 1:
        middle = (low + high) // 2
        if offset_at(middle, tz) == base:
            low = middle
        else:
            high = middle
    return high


def next_offset_change(start_s: int, until_s: int, tz: object) -> int | None:
    """The first second in (start_s, until_s] whose UTC offset differs from start_s's."""
    base = offset_at(start_s, tz)
    low = start_s
    while low < until_s:
        high = min(until_s, low + PROBE_STEP_S)
        if offset_at(high, tz) != base:
            return first_differing(low, high, tz, base)
        low = high
    return None


def offsets_between(start_s: int, end_s: int, tz: object) -> Iterator[int]:
    """The UTC offsets (seconds) in effect in [start_s, end_s]: the one at ``start_s``, then
    the one after each change."""
    yield offset_seconds(start_s, tz)
    at = start_s
    while (change := next_offset_change(at, end_s, tz)) is not None:
        yield offset_seconds(change, tz)
        at = change
