"""Nominal occurrences for ``ql audit``, computed independently of the scheduler's schedules.

Interval and one-shot schedules (``every 1m30s from 2026-12-01T00:00:00Z``, ``at
2026-12-24T10:00:00Z``; see ``docs/controls/triggers.md``) are expanded at the end of this
module by plain arithmetic on their stored text: ``anchor + k * every`` for k >= 0, or the one
instant; neither reads a time zone. The rest of this module expands cron expressions,
independently of ``qinglong.domain.cron``.

The audit recomputes, for a window, every occurrence a trigger should have fired and compares
it with the Runs in the database. So that it cannot share the scheduler's bugs, this module
implements the documented rules (``docs/reference/cron.md``) with different code:

* Field matching on *naive* local wall times is done by ``croniter`` (the scheduler uses
  ``cronsim``). croniter with naive datetimes matches fields only; it knows nothing of zones.
* The day-of-month/day-of-week rule is applied here, not by croniter: the two day fields are
  ANDed when either starts with ``*`` and ORed otherwise. An OR expression is expanded as the
  union of one expression with day-of-week replaced by ``*`` and one with day-of-month
  replaced by ``*``, so croniter is only asked to AND (``day_or=False``). (croniter's own OR
  decides from the *expanded* fields and intersects the day-of-month side with ``#`` items.)
  A day field is also split into groups of items one matcher takes together (croniter
  refuses ``#`` items listed with plain ones), and the expansion is the union of the groups.
* Wall times are mapped to instants here: both ``fold`` readings of a wall time are converted
  to UTC and an instant is kept only if converting it back yields the same wall time, so a
  wall time in a spring-forward gap has no instant and one in a fall-back overlap has two.
  A *wall-clock* expression (second [6 fields only], minute and hour fields none starting
  with ``*``) fires by the trigger's DST policy: at the earliest instant of each matching
  wall time (overlap ``first``, the default), the latest (``second``) or every one
  (``both``); a gap time fires at the instant of the first wall time that exists after the
  gap (gap ``shift``, the default), found by scanning forward a minute, then a second, at a
  time, or not at all (``skip``). Every other expression is an *interval* expression and
  fires at every instant of each matching wall time, whatever the policy.

Zone *data* is shared with the scheduler on purpose: :func:`qinglong.domain.timezones.zone_info`.

Limits and corrections:

* croniter cannot parse ``LW`` (last weekday) in day-of-month or ``nL`` (``5L``: the last
  Friday) in day-of-week. The items of a day field that use them are iterated with
  ``cronsim`` instead, the scheduler's own field matcher, so for those two forms the audit is
  independent of the scheduler only in its day rule and DST mapping. (A cronsim group that
  must be ANDed with a day field not starting with ``*`` is intersected here, because
  cronsim would OR it.)
* croniter departs from the documented field meanings in two places, and is handed an
  equivalent spelling: it reads a range with equal ends (``5-5``, ``JAN-JAN``, ``7-7``) as
  the whole field, so it gets the single value; and it ends day-of-week at 6, so ``a/n``
  there (documented range 0-7, 7 being Sunday) becomes ``a-7/n``.
* croniter takes a day-of-month list of 31 entries as the whole field even when one of them
  is ``L`` (``L,1,3/1`` would match the 2nd, which it names nowhere), so ``L`` is always
  matched as a group of its own and the groups are united.
* The naive wall times to iterate are bounded by the UTC offsets in effect during the
  window, sampled every 30 minutes (every window/50,000 for windows over about 3 years). An
  offset in effect for less than one sampling step could be missed; no zone in the tz
  database has one.
* Work is bounded: a window whose expansion could need more than ``MAX_NAIVE_ITERATIONS``
  naive wall times is refused with ValueError before anything is iterated. The bound counts,
  for each group expanded, the matching second/minute/hour combinations per day times the
  days spanned, but never more than one wall time per second (per minute for 5 fields).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterator
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
_RANGE_ITEM = re.compile(rf"({_VALUE})-({_VALUE})(?:/\d+)?")
_START_STEP_ITEM = re.compile(rf"({_VALUE})/(\d+)")
_NAME_VALUES = {
    name: number
    for names, first in (("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC", 1),
                         ("SUN MON TUE WED THU FRI SAT", 0))
    for number, name in enumerate(names.split(), start=first)
}
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


def nominal_occurrences(expression: str, timezone: str, start_ms: int, end_ms: int, *,
                        dst_gap: str = "shift", dst_overlap: str = "first") -> list[int]:
    """Every occurrence of ``expression`` in ``timezone`` at or after ``start_ms`` and at or
    before ``end_ms``, as sorted, unique UTC epoch milliseconds (whole seconds).

    ``dst_gap`` (``shift``, ``skip``) and ``dst_overlap`` (``first``, ``second``, ``both``)
    are the trigger's DST policy; they change what a wall-clock expression does with a wall
    time that does not exist (the end of the gap, or nothing) or exists twice (the earlier
    instant, the later one, or both). Interval expressions ignore them.

    Raises ValueError for an expression or zone this module cannot expand and for a window
    that would need more than ``MAX_NAIVE_ITERATIONS`` naive wall times, TypeError for
    arguments of the wrong type."""
    for bound in (start_ms, end_ms):
        if not isinstance(bound, int) or isinstance(bound, bool):
            raise TypeError("start_ms and end_ms must be integers (UTC epoch milliseconds)")
    if isinstance(expression, str) and expression.startswith(("every ", "at ")):
        return _arithmetic_occurrences(expression, start_ms, end_ms)
    if dst_gap not in ("shift", "skip") or dst_overlap not in ("first", "second", "both"):
        raise ValueError(f"unknown DST policy: gap {dst_gap!r}, overlap {dst_overlap!r}")
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
    _check_budget(expression, fields, sources, first_wall, last_wall)

    wall_clock = all(field[:1] != "*" for field in fields.clock)
    found: set[int] = set()
    for wall in _matching_walls(fields, sources, first_wall, last_wall):
        instants = _instants_of(wall, tz)
        if not wall_clock:
            fired = instants
        elif not instants:  # in a spring-forward gap
            fired = () if dst_gap == "skip" else (_first_instant_after_gap(wall, tz),)
        elif len(instants) == 1:
            fired = instants
        else:  # repeated by a fall-back overlap
            fired = {"first": instants[:1], "second": instants[1:], "both": instants}[dst_overlap]
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


def _day_rule_sources(fields: _Fields) -> list[tuple[str, str]]:
    """(day-of-month, day-of-week) pairs, each pair ANDed, whose union is the expression.

    Each field is first split into groups of items one matcher can take together: croniter
    refuses ``#`` items listed with plain ones, ``LW``/``nL`` items need cronsim, and ``L``
    listed with plain days can make croniter read the whole field."""
    dom_groups = _groups(fields.day_of_month.split(","), lambda item: item == "LW")
    dom_groups = [
        group
        for listed in dom_groups
        for group in _groups(listed.split(","), lambda item: item == "L")
    ]
    dow_groups = _groups(fields.day_of_week.split(","), lambda item: "#" in item)
    dow_groups = [
        group
        for listed in dow_groups
        for group in _groups(listed.split(","), lambda item: bool(_LAST_DOW_ITEM.fullmatch(item)))
    ]
    if fields.day_of_month.startswith("*") or fields.day_of_week.startswith("*"):
        return [(dom, dow) for dom in dom_groups for dow in dow_groups]
    return [(dom, "*") for dom in dom_groups] + [("*", dow) for dow in dow_groups]


def _groups(items: list[str], special: Callable[[str], bool]) -> list[str]:
    """The items split into the ordinary ones and the special ones (each group non-empty)."""
    ordinary = ",".join(item for item in items if not special(item))
    unusual = ",".join(item for item in items if special(item))
    return [group for group in (ordinary, unusual) if group]


def _needs_cronsim(day_group: str) -> bool:
    first = day_group.split(",")[0]
    return first == "LW" or bool(_LAST_DOW_ITEM.fullmatch(first))


def _intersected(dom: str, dow: str) -> bool:
    """cronsim ORs two day fields that do not start with ``*``: such a pair is ANDed here by
    intersecting the wall times of each side."""
    uses_cronsim = _needs_cronsim(dom) or _needs_cronsim(dow)
    return uses_cronsim and not (dom.startswith("*") or dow.startswith("*"))


def _value_of(token: str) -> int:
    return int(token) if token.isdigit() else _NAME_VALUES.get(token, -1)


def _for_croniter(expression: str) -> str:
    """The expression spelled so that croniter reads it as documented:

    * a range with equal ends (``5-5``, ``JAN-JAN``, ``7-7``) is that one value; croniter
      reads it as the whole field;
    * day-of-week runs from 0 to 7 (both Sunday), so ``a/n`` there is ``a-7/n``; croniter
      stops at 6 and never reaches Sunday as 7 (``5/1`` would miss Sundays)."""

    def collapsed(item: str) -> str:
        bounds = _RANGE_ITEM.fullmatch(item)
        if bounds and _value_of(bounds[1]) == _value_of(bounds[2]):
            return bounds[1]
        return item

    def day_of_week(item: str) -> str:
        start_step = _START_STEP_ITEM.fullmatch(item)
        if start_step and _value_of(start_step[1]) >= 0:
            item = f"{_value_of(start_step[1])}-7/{start_step[2]}"
        return collapsed(item)

    *fields, dow = expression.split()
    spelled = [",".join(map(collapsed, field.split(","))) for field in fields]
    return " ".join((*spelled, ",".join(map(day_of_week, dow.split(",")))))


def _croniter_walls(expression: str, seconds: bool, after: datetime, years: int
                    ) -> Iterator[datetime]:
    """Naive wall times strictly after ``after`` matching ``expression`` (day fields ANDed)."""
    try:
        cursor: Any = croniter(
            _for_croniter(expression),
            after,
            day_or=False,
            second_at_beginning=seconds,
            max_years_between_matches=years,
        )
    except (CroniterError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"cron expression {expression!r} cannot be parsed: {exc}") from exc
    return _drain_croniter(cursor)


def _drain_croniter(cursor: Any) -> Iterator[datetime]:
    while True:
        try:
            wall = cursor.get_next(datetime)
        except CroniterBadDateError:  # no match within max_years_between_matches
            return
        assert isinstance(wall, datetime)
        yield wall


def _cronsim_walls(expression: str, after: datetime) -> Iterator[datetime]:
    """The fallback for ``LW`` and ``nL``: naive wall times strictly after ``after``."""
    try:
        cursor = CronSim(expression, after)
    except (CronSimError, ValueError, IndexError) as exc:
        raise ValueError(f"cron expression {expression!r} cannot be parsed: {exc}") from exc
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


def _intersection(left: Iterator[datetime], right: Iterator[datetime]) -> Iterator[datetime]:
    """The wall times in both ascending streams."""
    other = next(right, None)
    for wall in left:
        while other is not None and other < wall:
            other = next(right, None)
        if other is None:
            return
        if other == wall:
            yield wall


def _source_walls(
    fields: _Fields, dom: str, dow: str, after: datetime, last: datetime
) -> Iterator[datetime]:
    """Wall times in (after, last] matching the time fields, the month, ``dom`` AND ``dow``."""
    if _intersected(dom, dow):
        return _intersection(
            _source_walls(fields, dom, "*", after, last),
            _source_walls(fields, "*", dow, after, last),
        )
    expression = fields.with_days(dom, dow)
    if _needs_cronsim(dom) or _needs_cronsim(dow):
        return _walls_until(_cronsim_walls(expression, after), last)
    years = last.year - after.year + 2
    return _walls_until(_croniter_walls(expression, fields.has_seconds, after, years), last)


def _matching_walls(
    fields: _Fields, sources: list[tuple[str, str]], first: datetime, last: datetime
) -> Iterator[datetime]:
    """Every naive wall time in [first, last] that the expression matches, ascending, once."""
    after = first - _SECOND
    streams = [_source_walls(fields, dom, dow, after, last) for dom, dow in sources]
    previous: datetime | None = None
    for wall in heapq.merge(*streams):
        if wall != previous:
            previous = wall
            yield wall


def _clock_values_per_day(fields: _Fields) -> int:
    """How many (second,) minute, hour combinations the time fields match: at most this many
    wall times match per day."""
    probe: Any = croniter(
        _for_croniter(" ".join((*fields.clock, "*", "*", "*"))),
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
    expression: str, fields: _Fields, sources: list[tuple[str, str]], first: datetime,
    last: datetime,
) -> None:
    span_s = max(0, (last - first) // _SECOND)
    resolution_s = 1 if fields.has_seconds else 60
    try:
        per_day = _clock_values_per_day(fields)
    except (CroniterError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"cron expression {expression!r} cannot be parsed: {exc}") from exc
    per_source = min(per_day * (span_s // _DAY_S + 2), span_s // resolution_s + 1)
    bound = per_source * sum(2 if _intersected(dom, dow) else 1 for dom, dow in sources)
    if bound > MAX_NAIVE_ITERATIONS:
        raise ValueError(
            f"window too large for {expression!r}: expanding it could take up to {bound:,} "
            f"naive wall times (limit {MAX_NAIVE_ITERATIONS:,}); audit a shorter window"
        )


# -- interval and one-shot schedules -----------------------------------------------------------

_EVERY_TEXT = re.compile(r"every ((?:[0-9]+[dhms])+) from ([0-9]{4}-[0-9]{2}-[0-9]{2}T"
                         r"[0-9]{2}:[0-9]{2}:[0-9]{2}Z)")
_AT_TEXT = re.compile(r"at ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)")
_UNIT_S = {"d": _DAY_S, "h": 3_600, "m": 60, "s": 1}


def _utc_seconds(text: str) -> int:
    return _epoch_of(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC))


def _arithmetic_occurrences(expression: str, start_ms: int, end_ms: int) -> list[int]:
    """The occurrences of an interval or one-shot schedule in ``[start_ms, end_ms]``."""
    first_s = -(-start_ms // 1000)
    last_s = end_ms // 1000
    once = _AT_TEXT.fullmatch(expression)
    if once is not None:
        at_s = _utc_seconds(once.group(1))
        return [at_s * 1000] if first_s <= at_s <= last_s else []
    every = _EVERY_TEXT.fullmatch(expression)
    if every is None:
        raise ValueError(f"schedule {expression!r} is neither 'every D from T' nor 'at T'")
    step_s = sum(int(part[:-1]) * _UNIT_S[part[-1]]
                 for part in re.findall(r"[0-9]+[dhms]", every.group(1)))
    if step_s <= 0:
        raise ValueError(f"schedule {expression!r} has no interval")
    anchor_s = _utc_seconds(every.group(2))
    if first_s > last_s:
        return []
    k = max(0, -(-(first_s - anchor_s) // step_s))  # the first k with anchor + k*step >= first
    count = (last_s - anchor_s) // step_s - k + 1
    if count > MAX_NAIVE_ITERATIONS:
        raise ValueError(f"window too large for {expression!r}: {count:,} occurrences (limit "
                         f"{MAX_NAIVE_ITERATIONS:,}); audit a shorter window")
    return [(anchor_s + (k + i) * step_s) * 1000 for i in range(max(0, count))]
