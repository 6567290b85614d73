"""Nominal cron occurrences for ``ql audit``, computed independently of ``qinglong.domain.cron``.

The audit recomputes, for a window, every occurrence a trigger should have fired and compares
it with the Runs in the database. So that it cannot share the scheduler's bugs, this module
implements the documented rules (``docs/reference/cron.md``) with different code:

* Field matching on *naive* local wall times is done by ``croniter`` (the scheduler uses
  ``cronsim``). croniter with naive datetimes matches fields only; it knows nothing of zones.
* The day-of-month/day-of-week rule is applied here: the two day fields are ANDed when either
  starts with ``*`` and ORed otherwise. An OR expression is expanded as the union of two
  expressions, one with day-of-week replaced by ``*`` and one with day-of-month replaced by
  ``*``, so croniter is only ever asked to AND (``day_or=False``). croniter's own OR decides
  from the *expanded* fields and intersects the day-of-month side with ``#`` day-of-week
  items, which is not the documented rule.
* Wall times are mapped to instants here: both ``fold`` readings of a wall time are converted
  to UTC and an instant is kept only if converting it back yields the same wall time, so a
  wall time in a spring-forward gap has no instant and one in a fall-back overlap has two.
  A *wall-clock* expression (second [6 fields only], minute and hour fields none starting
  with ``*``) fires at the earliest instant of each matching wall time; a gap time fires at
  the instant of the first wall time that exists after the gap, found by scanning forward
  a minute, then a second, at a time. Every other expression is an *interval* expression and
  fires at every instant of each matching wall time.

Zone *data* is shared with the scheduler on purpose: :func:`qinglong.domain.timezones.zone_info`.

Limits:

* croniter cannot parse ``LW`` (last weekday) in day-of-month or ``nL`` (``5L``: the last
  Friday) in day-of-week. An expression -- for an OR expression, the half -- that uses one of
  them is iterated with ``cronsim`` instead, the scheduler's own field matcher, so for those
  two forms the audit is independent of the scheduler only in its day rule and DST mapping.
* croniter reads the day-of-week range ``7-7`` as every day; it is handed ``0`` (Sunday).
* The naive wall times to iterate are bounded by the UTC offsets in effect during the
  window, sampled every 30 minutes (every window/50,000 for windows over about 3 years). An
  offset in effect for less than one sampling step could be missed; no zone in the tz
  database has one.
* Work is bounded: a window whose expansion could need more than ``MAX_NAIVE_ITERATIONS``
  naive wall times (bound: matching second/minute/hour values per day times days, and at
  most one per second, or per minute for 5 fields; twice that for OR expressions) is refused
  with ValueError before anything is iterated.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import (  # type: ignore[import-untyped]
    CroniterBadDateError,
    CroniterError,
    croniter,
)
from cronsim import CronSim, CronSimError

from qinglong.domain.timezones import zone_info

MAX_NAIVE_ITERATIONS = 5_000_000

_NAIVE_EPOCH = datetime(1970, 1, 1)
_UTC_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_LONGEST_GAP = timedelta(days=2)  # the longest real gap is a day (Samoa, 2011-12-30)
_DAY_S = 86_400
_PROBE_STEP_S = 1_800
_MAX_PROBES = 50_000

_VALUE = r"(?:\d+|[A-Z]{3})"
_PLAIN_ITEM = rf"(?:\*|{_VALUE}(?:-{_VALUE})?)(?:/\d+)?"
_ITEM = {
    "second": re.compile(_PLAIN_ITEM),
    "minute": re.compile(_PLAIN_ITEM),
    "hour": re.compile(_PLAIN_ITEM),
    "day-of-month": re.compile(rf"{_PLAIN_ITEM}|L|LW"),
    "month": re.compile(_PLAIN_ITEM),
    "day-of-week": re.compile(rf"{_PLAIN_ITEM}|{_VALUE}#\d+|\d+L"),
}
_LAST_DOW_ITEM = re.compile(r"\d+L")
_SUNDAY_RANGE_ITEM = re.compile(r"7-7(?:/\d+)?")
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")


@dataclass(frozen=True, slots=True)
class _Fields:
    """An expression split into its fields, upper-cased."""

    clock: tuple[str, ...]  # (second,) minute, hour
    day_of_month: str
    month: str
    day_of_week: str

    @property
    def has_seconds(self) -> bool:
        return len(self.clock) == 3

    def with_days(self, day_of_month: str, day_of_week: str) -> str:
        return " ".join((*self.clock, day_of_month, self.month, day_of_week))


def _split(expression: str) -> _Fields:
    if not isinstance(expression, str):
        raise TypeError("a cron expression must be a string")
    parts = expression.upper().split()
    if len(parts) == 5:
        names: tuple[str, ...] = ("minute", "hour", "day-of-month", "month", "day-of-week")
    elif len(parts) == 6:
        names = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
    else:
        raise ValueError(
            f"cron expression {expression!r} must have 5 fields (or 6 with seconds first), "
            f"not {len(parts)}"
        )
    for name, part in zip(names, parts, strict=True):
        for item in part.split(","):
            if not _ITEM[name].fullmatch(item):
                raise ValueError(f"cron {name} field {part!r}: {item!r} is not supported")
    return _Fields(tuple(parts[:-3]), parts[-3], parts[-2], parts[-1])


def is_wall_clock(expression: str) -> bool:
    """True when the expression fires at local wall-clock times: none of its second (6-field
    form only), minute and hour fields starts with ``*``."""
    fields = _split(expression)
    return all(field[:1] != "*" for field in fields.clock)


def nominal_occurrences(expression: str, timezone: str, start_ms: int, end_ms: int) -> list[int]:
    """Every occurrence of ``expression`` in ``timezone`` at or after ``start_ms`` and at or
    before ``end_ms``, as sorted, unique UTC epoch milliseconds (whole seconds).

    Raises ValueError for an expression or zone this module cannot expand and for a window
    that would need more than ``MAX_NAIVE_ITERATIONS`` naive wall times."""
    fields = _split(expression)
    tz = _zone(timezone)
    first_s = -(-start_ms // 1000)
    last_s = end_ms // 1000
    if first_s > last_s:
        return []
    # A wall time w maps to instants t with w = t + offset(t); a gap time shifted to the
    # instant T lies at or after T + offset(T - 1 s). So every wall time that can yield an
    # instant in [first_s, last_s] lies between these two bounds.
    low_offset, high_offset = _offset_bounds(tz, first_s - 1, last_s)
    try:
        first_wall = _NAIVE_EPOCH + timedelta(seconds=first_s + low_offset)
        last_wall = _NAIVE_EPOCH + timedelta(seconds=last_s + high_offset)
    except OverflowError as exc:
        raise ValueError("the window is outside the supported date range") from exc
    sources = _day_rule_sources(fields)
    _check_budget(expression, fields, len(sources), first_wall, last_wall)

    wall_clock = all(field[:1] != "*" for field in fields.clock)
    found: set[int] = set()
    for wall in _matching_walls(fields, sources, first_wall, last_wall):
        instants = _instants_of(wall, tz)
        if wall_clock:
            fired = instants[:1] if instants else (_first_instant_after_gap(wall, tz),)
        else:
            fired = instants
        found.update(at for at in fired if first_s <= at <= last_s)
    return [at * 1000 for at in sorted(found)]


# -- zones and wall times --------------------------------------------------------------------


def _zone(name: str) -> ZoneInfo:
    if not isinstance(name, str):
        raise TypeError("a time zone name must be a string")
    if not _ZONE_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not an IANA time zone name")
    try:
        return zone_info(name)
    except (ZoneInfoNotFoundError, OSError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def _epoch_of(aware: datetime) -> int:
    return (aware - _UTC_EPOCH) // _SECOND


def _wall_at(epoch_s: int, tz: ZoneInfo) -> datetime:
    return (_UTC_EPOCH + timedelta(seconds=epoch_s)).astimezone(tz).replace(tzinfo=None)


def _offset_at(epoch_s: int, tz: ZoneInfo) -> int:
    wall = _wall_at(epoch_s, tz)
    return (wall - _NAIVE_EPOCH) // _SECOND - epoch_s


def _instants_of(wall: datetime, tz: ZoneInfo) -> tuple[int, ...]:
    """The epoch seconds whose local wall time is ``wall``, ascending: none in a gap, two in
    an overlap. Each fold reading is kept only if it round-trips to ``wall``."""
    readings = {_epoch_of(wall.replace(tzinfo=tz, fold=fold)) for fold in (0, 1)}
    return tuple(at for at in sorted(readings) if _wall_at(at, tz) == wall)


def _first_instant_after_gap(wall: datetime, tz: ZoneInfo) -> int:
    """For a wall time that does not exist: the instant of the first wall time after it that
    does (the end of the gap)."""
    probe = wall
    while True:
        probe += _MINUTE
        if probe - wall > _LONGEST_GAP:
            raise ValueError(f"no local time exists within 2 days after {wall.isoformat()}")
        if _instants_of(probe, tz):
            break
    # probe exists and probe - 1 minute does not: the gap ends in (probe - 1 minute, probe].
    candidate = probe - _MINUTE + _SECOND
    while not (instants := _instants_of(candidate, tz)):
        candidate += _SECOND
    return instants[0]


def _offset_bounds(tz: ZoneInfo, first_s: int, last_s: int) -> tuple[int, int]:
    """The least and greatest UTC offset (seconds) in effect between the two instants."""
    step = max(_PROBE_STEP_S, (last_s - first_s) // _MAX_PROBES)
    offsets = {_offset_at(last_s, tz)}
    offsets.update(_offset_at(at, tz) for at in range(first_s, last_s, step))
    return min(offsets), max(offsets)


# -- naive field iteration -------------------------------------------------------------------


def _day_rule_sources(fields: _Fields) -> list[str]:
    """Expressions whose day fields are ANDed and whose union is ``fields``."""
    dom, dow = fields.day_of_month, fields.day_of_week
    if dom.startswith("*") or dow.startswith("*"):
        return [fields.with_days(dom, dow)]
    return [fields.with_days(dom, "*"), fields.with_days("*", dow)]


def _needs_cronsim(source: str) -> bool:
    *_, dom, _month, dow = source.split()
    return "LW" in dom.split(",") or any(_LAST_DOW_ITEM.fullmatch(i) for i in dow.split(","))


def _for_croniter(source: str) -> str:
    *rest, dow = source.split()
    items = ["0" if _SUNDAY_RANGE_ITEM.fullmatch(item) else item for item in dow.split(",")]
    return " ".join((*rest, ",".join(items)))


def _croniter_walls(source: str, seconds: bool, after: datetime, years: int) -> Iterator[datetime]:
    """Naive wall times strictly after ``after`` matching ``source`` (day fields ANDed)."""
    try:
        cursor: Any = croniter(
            _for_croniter(source),
            after,
            day_or=False,
            second_at_beginning=seconds,
            max_years_between_matches=years,
        )
    except (CroniterError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"cron expression {source!r} cannot be parsed: {exc}") from exc
    return _drain_croniter(cursor)


def _drain_croniter(cursor: Any) -> Iterator[datetime]:
    while True:
        try:
            wall = cursor.get_next(datetime)
        except CroniterBadDateError:  # no match within max_years_between_matches
            return
        assert isinstance(wall, datetime)
        yield wall


def _cronsim_walls(source: str, after: datetime) -> Iterator[datetime]:
    """The fallback for ``LW`` and ``nL``: naive wall times strictly after ``after``."""
    try:
        cursor = CronSim(source, after)
    except (CronSimError, ValueError, IndexError) as exc:
        raise ValueError(f"cron expression {source!r} cannot be parsed: {exc}") from exc
    return _drain_cronsim(cursor)


def _drain_cronsim(cursor: CronSim) -> Iterator[datetime]:
    while True:
        try:
            wall = next(cursor)
        except (StopIteration, CronSimError):
            return
        yield wall


def _walls_until(walls: Iterator[datetime], last: datetime) -> Iterator[datetime]:
    for count, wall in enumerate(walls, start=1):
        if wall > last:
            return
        if count > MAX_NAIVE_ITERATIONS:  # defensive: _check_budget should have refused
            raise ValueError(f"more than {MAX_NAIVE_ITERATIONS:,} naive wall times")
        yield wall


def _matching_walls(
    fields: _Fields, sources: list[str], first: datetime, last: datetime
) -> Iterator[datetime]:
    """Every naive wall time in [first, last] that the expression matches, ascending, once."""
    after = first - _SECOND
    years = last.year - after.year + 2
    streams = []
    for source in sources:
        if _needs_cronsim(source):
            walls = _cronsim_walls(source, after)
        else:
            walls = _croniter_walls(source, fields.has_seconds, after, years)
        streams.append(_walls_until(walls, last))
    previous: datetime | None = None
    for wall in heapq.merge(*streams):
        if wall != previous:
            previous = wall
            yield wall


def _clock_values_per_day(fields: _Fields) -> int:
    """How many (second,) minute, hour combinations the time fields match: at most this many
    wall times match per day."""
    probe: Any = croniter(
        " ".join((*fields.clock, "*", "*", "*")),
        _NAIVE_EPOCH,
        second_at_beginning=fields.has_seconds,
    )
    expanded: list[list[int | str]] = probe.expanded
    sizes = [(expanded[0], 60), (expanded[1], 24)]
    if fields.has_seconds:
        sizes.append((expanded[5], 60))
    total = 1
    for values, full in sizes:
        total *= full if "*" in values else len(set(values))
    return total


def _check_budget(
    expression: str, fields: _Fields, sources: int, first: datetime, last: datetime
) -> None:
    span_s = max(0, (last - first) // _SECOND)
    resolution_s = 1 if fields.has_seconds else 60
    try:
        per_day = _clock_values_per_day(fields)
    except (CroniterError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"cron expression {expression!r} cannot be parsed: {exc}") from exc
    per_source = min(per_day * (span_s // _DAY_S + 2), span_s // resolution_s + 1)
    bound = per_source * sources
    if bound > MAX_NAIVE_ITERATIONS:
        raise ValueError(
            f"window too large for {expression!r}: expanding it could take up to {bound:,} "
            f"naive wall times (limit {MAX_NAIVE_ITERATIONS:,}); audit a shorter window"
        )
