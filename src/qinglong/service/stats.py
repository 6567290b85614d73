"""Stats per task and day, as the surfaces ask for them: Runs, successes, failures,
cancellations, skips, the success rate, total and longest duration.

A lost Run is a failure. A Run an overlap policy ended (``skip`` cancelled it because its
trigger's previous Run was still in progress, or ``cancel_previous`` stopped it for a newer
one) is ``skipped``: neither a success nor a failure, nor a cancellation, and left out of
the success rate, which is successes over the Runs that ended otherwise (succeeded, failed,
timed out, lost or cancelled).

A Run counts on the day it was admitted, in the zone asked for (UTC by default). The store
counts Runs in 15-minute slices of epoch time (every UTC offset in use is a whole number of
quarter hours; whole days for UTC) and the slices are folded into local days here, so a day
of a zone with daylight saving time has 23 or 25 hours, as it should.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from qinglong.domain.timezones import canonical_timezone, zone_info
from qinglong.errors import InvalidInput
from qinglong.service.views.reports import DayCounts, DayRow, StatsView
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.params import RunBucketParams

DAY_MS = 86_400_000
SLICE_MS = 900_000
MAX_DAYS = 366
DEFAULT_DAYS = 7


def _parse_day(value: str, field: str) -> date:
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise InvalidInput(field, "must be a date such as 2026-12-01") from None


def _day_start_ms(day: date, zone: str) -> int:
    return int(datetime.combine(day, time(0), zone_info(zone)).timestamp() * 1000)


class TaskStats:
    def __init__(self, store: RunStore) -> None:
        self._store = store

    def per_day(self, project_id: str, *, now_ms: int, task_id: str | None = None,
                from_day: str | None = None, to_day: str | None = None,
                timezone: str = "UTC") -> StatsView:
        """Per task and local day from ``from_day`` to ``to_day`` (both included; default:
        the last 7 days up to today in ``timezone``). Days without a Run are left out;
        ``totals`` sums each task over the window."""
        zone = canonical_timezone(timezone)
        today = datetime.fromtimestamp(now_ms / 1000, UTC).astimezone(zone_info(zone)).date()
        last = _parse_day(to_day, "to") if to_day is not None else today
        first = (_parse_day(from_day, "from") if from_day is not None
                 else last - timedelta(days=DEFAULT_DAYS - 1))
        if first > last:
            raise InvalidInput("from", "must not be after to")
        if (last - first).days + 1 > MAX_DAYS:
            raise InvalidInput("from", f"the window is longer than {MAX_DAYS} days")
        from_ms = _day_start_ms(first, zone)
        to_ms = _day_start_ms(last + timedelta(days=1), zone)
        size = DAY_MS if zone == "UTC" else SLICE_MS
        buckets = self._store.run_buckets(RunBucketParams(
            project_id=project_id, task_id=task_id, from_ms=from_ms, to_ms=to_ms,
            bucket_ms=size))
        days: dict[tuple[str, date], dict[str, int | None]] = defaultdict(_empty)
        local = zone_info(zone)
        for bucket in buckets:
            day = datetime.fromtimestamp(bucket.bucket_start_ms / 1000, UTC).astimezone(local).date()
            _add(days[(bucket.task_id, day)], {
                "runs": bucket.runs, "successes": bucket.succeeded, "failures": bucket.failed,
                "cancelled": bucket.cancelled, "skipped": bucket.skipped,
                "total_duration_ms": bucket.total_duration_ms}, bucket.max_duration_ms)
        totals: dict[str, dict[str, int | None]] = defaultdict(_empty)
        rows: list[DayRow] = []
        for (task, day), counts in sorted(days.items()):
            rows.append(DayRow(task=task, date=day.isoformat(), **_with_rate(counts)))
            _add(totals[task], {key: counts[key] for key in SUMMED}, counts["max_duration_ms"])
        return StatsView(project=project_id, task=task_id, timezone=zone,
                         from_=first.isoformat(), to=last.isoformat(), days=rows,
                         totals=[DayCounts(task=task, **_with_rate(counts))
                                 for task, counts in sorted(totals.items())])


SUMMED = ("runs", "successes", "failures", "cancelled", "skipped", "total_duration_ms")


def _empty() -> dict[str, int | None]:
    return {**dict.fromkeys(SUMMED, 0), "max_duration_ms": None}


def _add(into: dict[str, int | None], counts: dict[str, int | None],
         longest: int | None) -> None:
    for key in SUMMED:
        into[key] = int(into[key] or 0) + int(counts[key] or 0)
    if longest is not None:
        current = into["max_duration_ms"]
        into["max_duration_ms"] = longest if current is None else max(current, longest)


def success_rate(counts: dict[str, int | None]) -> float | None:
    """Successes over the Runs that ended by themselves or were cancelled (skips left out),
    rounded to 4 places; None when there are none."""
    ended = sum(int(counts[key] or 0) for key in ("successes", "failures", "cancelled"))
    return None if ended == 0 else round(int(counts["successes"] or 0) / ended, 4)


def _with_rate(counts: dict[str, int | None]) -> dict[str, Any]:
    """The counts of a day or of the window, with their success rate."""
    return {**counts, "success_rate": success_rate(counts)}
