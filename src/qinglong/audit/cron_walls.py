"""The audit's naive cron field iteration (``audit/expansion.py`` has the rules and
corrections it follows): an expression split into its fields, the day-of-month/day-of-week
rule applied as a union of ANDed sources, each source iterated by ``croniter`` (``cronsim``
for ``LW`` and ``nL`` only), and the bound on how many naive wall times a window may take."""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from croniter import (  # type: ignore[import-untyped]
    CroniterBadDateError,
    CroniterError,
    croniter,
)
from cronsim import CronSim, CronSimError

from qinglong.audit.wall_times import NAIVE_EPOCH, SECOND

MAX_NAIVE_ITERATIONS = 5_000_000

_DAY_S = 86_400

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


@dataclass(frozen=True, slots=True)
class Fields:
    """An expression split into its fields, upper-cased."""

    clock: tuple[str, ...]  # (second,) minute, hour
    day_of_month: str
    month: str
    day_of_week: str

    @property
    def has_seconds(self) -> bool:
        return len(self.clock) == 3

    @property
    def wall_clock(self) -> bool:
        """None of the clock fields starts with ``*`` (see `is_wall_clock`)."""
        return all(field[:1] != "*" for field in self.clock)

    def with_days(self, day_of_month: str, day_of_week: str) -> str:
        return " ".join((*self.clock, day_of_month, self.month, day_of_week))


def split_fields(expression: str) -> Fields:
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
    return Fields(tuple(parts[:-3]), parts[-3], parts[-2], parts[-1])


def is_wall_clock(expression: str) -> bool:
    """True when the expression fires at local wall-clock times: none of its second (6-field
    form only), minute and hour fields starts with ``*``."""
    return split_fields(expression).wall_clock


# -- naive field iteration -------------------------------------------------------------------


def day_rule_sources(fields: Fields) -> list[tuple[str, str]]:
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
        if count > MAX_NAIVE_ITERATIONS:  # defensive: check_budget should have refused
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
    fields: Fields, dom: str, dow: str, after: datetime, last: datetime
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


def matching_walls(
    fields: Fields, sources: list[tuple[str, str]], first: datetime, last: datetime
) -> Iterator[datetime]:
    """Every naive wall time in [first, last] that the expression matches, ascending, once."""
    after = first - SECOND
    streams = [_source_walls(fields, dom, dow, after, last) for dom, dow in sources]
    previous: datetime | None = None
    for wall in heapq.merge(*streams):
        if wall != previous:
            previous = wall
            yield wall


def _clock_values_per_day(fields: Fields) -> int:
    """How many (second,) minute, hour combinations the time fields match: at most this many
    wall times match per day."""
    probe: Any = croniter(
        _for_croniter(" ".join((*fields.clock, "*", "*", "*"))),
        NAIVE_EPOCH,
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


def check_budget(
    expression: str, fields: Fields, sources: list[tuple[str, str]], first: datetime,
    last: datetime,
) -> None:
    span_s = max(0, (last - first) // SECOND)
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


