"""Cron occurrences: validation of expressions and the next-occurrence function.

Field matching is done by the cronsim library; this module owns only the rules
for time zones and daylight saving time, which are documented in
``docs/reference/cron.md``:

* 5 fields are ``minute hour day-of-month month day-of-week``; 6 fields put seconds
  first. Day-of-month and day-of-week are ANDed when either field starts with ``*``,
  ORed otherwise (Vixie/Debian cron).
* Every number is checked here, before cronsim sees it, so a refusal names the field,
  the number's role and its allowed range: a value must lie in the field's range
  (second and minute 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week
  0-7); a step (after ``/``) must be between 1 and the length of the field's cycle
  (60 seconds, 60 minutes, 24 hours, 31 days, 12 months, 7 weekdays), since a longer
  step can only ever select its start; the week number after ``#`` must be 1-5. No
  number the fields can hold needs more than 2 digits, so longer digit strings
  (``007``, ``0000000000000000000001``) are refused rather than read as their value.
* A *wall-clock* expression (its second, minute and hour fields all name fixed
  values, i.e. none starts with ``*``) fires at local wall-clock times, by the trigger's
  DST policy (:class:`DstPolicy`): a time that falls in a spring-forward gap fires at the
  first instant after the gap (``gap=shift``, the default) or not at all (``gap=skip``); a
  time repeated by a fall-back overlap fires once at its first (earlier) instant
  (``overlap=first``, the default), once at its second (``overlap=second``), or at both
  (``overlap=both``).
* Every other expression is an *interval* expression: it fires at each real
  instant whose local time matches, so wall times inside a gap never occur and
  wall times repeated by an overlap occur twice. A DST policy does not apply to it
  (``CronSchedule.parse`` refuses one that is not the default).

Occurrences are whole seconds, returned as UTC epoch milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import lru_cache

from cronsim import CronSim, CronSimError

from qinglong.domain.timezones import UTC_NAME, canonical_timezone, zone_info
from qinglong.errors import InvalidSchedule

FIELD_CHARS = re.compile(r"[0-9A-Za-z*,/#-]+")
MAX_FIELD_LENGTH = 128
MAX_EXPRESSION_LENGTH = 512
MAX_NUMBER_DIGITS = 2
_MAX_CANDIDATES = 100_000
_MAX_SEGMENTS = 1_000
_PROBE_STEP_S = 7 * 86_400  # offsets never change twice within a week
_ITER_STRETCH_S = 366 * 86_400  # iter_after looks for the next offset change this far ahead
_MEMO_SIZE = 4096  # next occurrences (and computable stored schedules) remembered


class DstNote(StrEnum):
    """What daylight saving time did to one occurrence."""

    NONE = ""
    GAP_SHIFTED = "gap-shifted"  # wall time did not exist; fired at the end of the gap
    OVERLAP_FIRST = "overlap-first"  # wall time repeated; this is its first instant
    OVERLAP_SECOND = "overlap-second"  # wall time repeated; this is its second instant


@dataclass(frozen=True, slots=True)
class Occurrence:
    at_ms: int
    wall: datetime  # the naive local wall time the expression matched
    note: DstNote
    # wall times before this one that a spring-forward gap swallowed (DST policy gap=skip)
    skipped: tuple[datetime, ...] = ()


class DstGap(StrEnum):
    """A wall-clock time that a spring-forward gap makes not exist."""

    SHIFT = "shift"  # fire at the first instant after the gap
    SKIP = "skip"  # do not fire that day


class DstOverlap(StrEnum):
    """A wall-clock time that a fall-back overlap makes happen twice."""

    FIRST = "first"  # fire once, at the first (earlier) instant
    SECOND = "second"  # fire once, at the second (later) instant
    BOTH = "both"  # fire at both instants


@dataclass(frozen=True, slots=True)
class DstPolicy:
    """What a wall-clock cron expression does at DST transitions (``docs/reference/cron.md``).

    Stored in a cron spec's config as ``dst`` only when it is not the default, so revisions
    published before policies existed keep their exact envelope and digest."""

    gap: DstGap = DstGap.SHIFT
    overlap: DstOverlap = DstOverlap.FIRST

    @classmethod
    def parse(cls, gap: str | None = None, overlap: str | None = None,
              base: DstPolicy | None = None) -> DstPolicy:
        """Named parts replace those of ``base`` (default: the default policy)."""
        base = base or cls()
        try:
            return cls(gap=DstGap(gap) if gap is not None else base.gap,
                       overlap=DstOverlap(overlap) if overlap is not None else base.overlap)
        except ValueError:
            if gap is not None and gap not in {g.value for g in DstGap}:
                raise InvalidSchedule("dst-gap", "must be shift or skip") from None
            raise InvalidSchedule("dst-overlap", "must be first, second or both") from None

    @property
    def default(self) -> bool:
        return self == DstPolicy()

    def to_json(self) -> dict[str, object]:
        return {"gap": self.gap.value, "overlap": self.overlap.value}

    @classmethod
    def from_json(cls, value: object) -> DstPolicy:
        """The ``dst`` of a stored config: exactly ``gap`` and ``overlap``, not the default."""
        if not isinstance(value, dict) or set(value) != {"gap", "overlap"}:
            raise InvalidSchedule("dst", "must have exactly gap and overlap")
        gap, overlap = value["gap"], value["overlap"]
        if not isinstance(gap, str) or not isinstance(overlap, str):
            raise InvalidSchedule("dst", "gap and overlap must be strings")
        policy = cls.parse(gap, overlap)
        if policy.default:
            raise InvalidSchedule("dst", "is not in canonical form (the default is left out)")
        return policy

    def describe(self) -> str:
        return f"gap {self.gap.value}, overlap {self.overlap.value}"


def normalize_expression(expression: str) -> str:
    """Validate a cron expression and return it with single spaces and upper-case names."""
    if not isinstance(expression, str):
        raise InvalidSchedule("cron", "must be a string")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise InvalidSchedule("cron", f"must be at most {MAX_EXPRESSION_LENGTH} characters")
    text = expression.strip()
    if text.startswith("@"):
        raise InvalidSchedule(
            "cron", "macros such as @daily are not supported; write the fields, e.g. '0 0 * * *'"
        )
    fields = text.split()
    if len(fields) not in (5, 6):
        raise InvalidSchedule(
            "cron", f"must have 5 fields (or 6 with seconds first), got {len(fields)}"
        )
    for field in fields:
        if len(field) > MAX_FIELD_LENGTH:
            raise InvalidSchedule("cron", f"each field must be at most {MAX_FIELD_LENGTH} characters")
        if not FIELD_CHARS.fullmatch(field):
            raise InvalidSchedule(
                "cron", f"field {field!r} may only use digits, names and the characters * , / # L -"
            )
    names = _FIELD_NAMES if len(fields) == 6 else _FIELD_NAMES[1:]
    for name, field in zip(names, fields, strict=True):
        _check_numbers(name, field.upper())
    normalized = " ".join(_collapse_equal_ranges(field.upper()) for field in fields)
    try:
        CronSim(normalized, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise InvalidSchedule("cron", _explain(normalized, str(exc))) from exc
    except (ValueError, IndexError) as exc:
        raise InvalidSchedule("cron", f"cannot be parsed: {normalized!r}") from exc
    return normalized


_FIELD_NAMES = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_FIELD_RULES = {
    "second": "0-59", "minute": "0-59", "hour": "0-23",
    "day-of-month": "1-31, L or LW", "month": "1-12 or JAN-DEC",
    "day-of-week": "0-7 or SUN-SAT, with n#k (k 1-5) or nL",
}


def _explain(normalized: str, error: str) -> str:
    """Name the field, what it may hold, and a day that no month given can have."""
    fields = normalized.split()
    names = _FIELD_NAMES if len(fields) == 6 else _FIELD_NAMES[1:]
    name = error.removeprefix("Bad ").strip()
    if name not in names:
        return f"{error} in {normalized!r}"
    field = fields[names.index(name)]
    if name == "day-of-month":
        with_any_month = fields.copy()
        with_any_month[names.index("month")] = "*"
        try:
            CronSim(" ".join(with_any_month), datetime(2000, 1, 1))
        except CronSimError:
            pass
        else:
            month = fields[names.index("month")]
            return (f"day-of-month {field!r} never occurs in month {month!r}: "
                    f"{normalized!r} could never fire")
    step = "; a step must be at least 1" if "/" in field else ""
    ranges = "; a range must go upwards" if "-" in field else ""
    return (f"the {name} field {field!r} is not valid in {normalized!r}: "
            f"use {_FIELD_RULES[name]}, lists, ranges and steps{step}{ranges}")


# Per field: the lowest and highest value, and the longest useful step (the cycle length).
_FIELD_LIMITS = {
    "second": (0, 59, 60), "minute": (0, 59, 60), "hour": (0, 23, 24),
    "day-of-month": (1, 31, 31), "month": (1, 12, 12), "day-of-week": (0, 7, 7),
}
_VALUE_NAMES = {"month": " or a name JAN-DEC", "day-of-week": " or a name SUN-SAT"}
_NTH_LIMITS = (1, 5)  # MON#k: the k-th such weekday of the month
_NUMBER = re.compile(r"[0-9]+")


def _check_numbers(name: str, field: str) -> None:
    """Refuse a number outside what its place in ``field`` can hold (see module docs).

    A number right after ``/`` is a step, one right after ``#`` in day-of-week is a week
    number, and every other number is a value. Structure (range order, stray characters,
    names) is left to cronsim; this only bounds the numbers.
    """
    low, high, longest_step = _FIELD_LIMITS[name]
    for match in _NUMBER.finditer(field):
        digits = match.group()
        number = int(digits)  # at most MAX_FIELD_LENGTH digits: cheap and exact
        before = field[match.start() - 1] if match.start() else ""
        if before == "/":
            if not 1 <= number <= longest_step:
                raise InvalidSchedule(
                    "cron",
                    f"the {name} field {field!r}: the step must be between 1 and {longest_step}"
                    f" (got {digits})",
                )
        elif before == "#" and name == "day-of-week":
            if not _NTH_LIMITS[0] <= number <= _NTH_LIMITS[1]:
                raise InvalidSchedule(
                    "cron",
                    f"the {name} field {field!r}: the week number after # must be between "
                    f"{_NTH_LIMITS[0]} and {_NTH_LIMITS[1]} (got {digits})",
                )
        elif not low <= number <= high:
            raise InvalidSchedule(
                "cron",
                f"the {name} field {field!r}: a value must be between {low} and {high}"
                f"{_VALUE_NAMES.get(name, '')} (got {digits})",
            )
        if len(digits) > MAX_NUMBER_DIGITS:
            raise InvalidSchedule(
                "cron",
                f"the {name} field {field!r}: the number {digits!r} has too many digits;"
                f" write numbers with at most {MAX_NUMBER_DIGITS} digits",
            )


_EQUAL_RANGE_STEP = re.compile(r"^([0-9A-Z]+)-\1/\d+$")


def _collapse_equal_ranges(field: str) -> str:
    """``a-a/n`` means just ``a``; cronsim would read it as ``a/n`` (``a`` to the end)."""
    return ",".join(
        term.split("-", 1)[0] if _EQUAL_RANGE_STEP.fullmatch(term) else term
        for term in field.split(",")
    )


def is_wall_clock(expression: str) -> bool:
    """True when second, minute and hour fields name fixed values (see module docs)."""
    fields = expression.split()
    time_fields = fields[:3] if len(fields) == 6 else fields[:2]
    return not any(field.startswith("*") for field in time_fields)


def check_dst_applies(expression: str, dst: DstPolicy) -> None:
    """A DST policy other than the default needs a wall-clock expression."""
    if dst.default or is_wall_clock(expression):
        return
    field = "dst-gap" if dst.gap is not DstGap.SHIFT else "dst-overlap"
    raise InvalidSchedule(field, f"applies only to wall-clock expressions (fixed second, minute "
                                 f"and hour fields); {expression!r} follows real elapsed time "
                                 "across DST changes (use --dst-gap shift --dst-overlap first)")


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A validated cron expression in a canonical IANA time zone, with its DST policy."""

    expression: str
    timezone: str
    dst: DstPolicy = DstPolicy()

    @classmethod
    def parse(cls, expression: str, timezone: str, dst: DstPolicy | None = None) -> CronSchedule:
        normalized = normalize_expression(expression)
        policy = dst or DstPolicy()
        check_dst_applies(normalized, policy)
        return cls(normalized, canonical_timezone(timezone), policy)

    @classmethod
    def stored(cls, expression: str, timezone: str, dst: DstPolicy | None = None) -> CronSchedule:
        """A schedule read back from a revision whose digest was verified: accepted as it was
        published, even if today's stricter input rules would refuse it, as long as it can
        still be computed (an older release may have accepted a zone or a step we now refuse
        at publish time; its Runs must stay readable and its trigger keep firing)."""
        if not isinstance(expression, str) or not isinstance(timezone, str):
            raise InvalidSchedule("cron", "must be a string")
        _check_computable(expression, timezone)
        return cls(expression, timezone, dst or DstPolicy())

    def next_after(self, after_ms: int) -> int:
        """The first occurrence strictly after ``after_ms``."""
        return self.next_occurrence(after_ms).at_ms

    def first_at_or_after(self, at_ms: int) -> int:
        return self.next_after(at_ms - 1)

    def next_occurrence(self, after_ms: int) -> Occurrence:
        """The first occurrence strictly after ``after_ms``: a pure function of the schedule
        and the instant, so it is memoised (many triggers share an expression and fall due
        at the same instants; a refusal is not cached)."""
        return _next_occurrence(self, after_ms)

    def _compute_next(self, after_ms: int) -> Occurrence:
        try:
            if self.timezone == UTC_NAME:
                return self._next_utc(after_ms)
            if is_wall_clock(self.expression):
                return self._next_wall_clock(after_ms)
            return self._next_interval(after_ms)
        except (StopIteration, CronSimError, OverflowError, ValueError) as exc:
            raise InvalidSchedule("cron", "has no further occurrence") from exc

    def occurrences(self, after_ms: int, count: int) -> list[Occurrence]:
        result: list[Occurrence] = []
        cursor = after_ms
        for _ in range(count):
            occurrence = self.next_occurrence(cursor)
            result.append(occurrence)
            cursor = occurrence.at_ms
        return result

    def iter_after(self, after_ms: int) -> Iterator[int]:
        """Every occurrence strictly after ``after_ms``, ascending, until there is none: the
        same instants as chaining :meth:`next_after`, but an interval expression (and any
        expression in UTC) keeps one field iterator per stretch of constant UTC offset
        instead of building one per occurrence, so walking many thousands of occurrences
        (``ql trigger ledger``) stays cheap. Wall-clock expressions chain ``next_after``."""
        try:
            if self.timezone == UTC_NAME:
                start = datetime.fromtimestamp(after_ms // 1000, UTC).replace(tzinfo=None)
                for wall in CronSim(self.expression, start):
                    yield _naive_utc_ms(wall)
            elif is_wall_clock(self.expression):
                at_ms = after_ms
                while True:
                    try:
                        at_ms = self.next_after(at_ms)
                    except InvalidSchedule:
                        return
                    yield at_ms
            else:
                yield from self._iter_interval(after_ms)
        except (CronSimError, OverflowError, ValueError):
            return  # past what the field iterator can reach: no further occurrence

    # -- implementations -------------------------------------------------------------

    def _iter_interval(self, after_ms: int) -> Iterator[int]:
        """``_next_interval`` over and over: within a stretch of constant offset, walk one
        field iterator; an instant past the stretch's end is found again from that end."""
        tz = zone_info(self.timezone)
        start = after_ms // 1000 + 1
        while True:
            offset = _offset_seconds(start, tz)
            change = _next_offset_change(start, start + _ITER_STRETCH_S, tz)
            end = change if change is not None else start + _ITER_STRETCH_S + 1
            wall_start = datetime.fromtimestamp(start + offset, UTC).replace(tzinfo=None)
            for wall in CronSim(self.expression, wall_start - timedelta(seconds=1)):
                at_s = _naive_utc_ms(wall) // 1000 - offset
                if at_s >= end:
                    break
                yield at_s * 1000
            else:
                return
            start = end

    def _next_utc(self, after_ms: int) -> Occurrence:
        start = datetime.fromtimestamp(after_ms // 1000, UTC).replace(tzinfo=None)
        wall = next(CronSim(self.expression, start))
        return Occurrence(_naive_utc_ms(wall), wall, DstNote.NONE)

    def _next_interval(self, after_ms: int) -> Occurrence:
        """Walk segments of constant UTC offset: the first instant after ``after_ms`` whose
        local wall time matches. Within a segment, wall time is instant + offset, so the
        first naive match at or after the segment's start maps to one instant; if that
        instant lies past the next offset change, the walk restarts at the change."""
        tz = zone_info(self.timezone)
        start = after_ms // 1000 + 1
        for _ in range(_MAX_SEGMENTS):
            offset = _offset_seconds(start, tz)
            wall_start = datetime.fromtimestamp(start + offset, UTC).replace(tzinfo=None)
            wall = next(CronSim(self.expression, wall_start - timedelta(seconds=1)))
            at_s = _naive_utc_ms(wall) // 1000 - offset
            change = _next_offset_change(start, at_s, tz)
            if change is None:
                note = DstNote.NONE
                if _is_ambiguous(wall, tz):
                    local = datetime.fromtimestamp(at_s, UTC).astimezone(tz)
                    note = DstNote.OVERLAP_SECOND if local.fold else DstNote.OVERLAP_FIRST
                return Occurrence(at_s * 1000, wall, note)
            start = change
        raise InvalidSchedule("cron", "has no further occurrence")

    def _next_wall_clock(self, after_ms: int) -> Occurrence:
        """The first instant after ``after_ms`` of a matching wall time, by the DST policy.

        With one instant per wall time, wall order is instant order, and the first instant
        after ``after_ms`` is the answer; but with ``overlap=second`` or ``both`` a wall time
        before the wall time of ``after_ms`` can still fire after it (the second 01:30 comes
        after the first 01:45), so the walk starts that much earlier (``_lookback_s``). With
        ``both`` a wall time fires twice and wall order is not instant order inside an
        overlap, so the walk stops only at a wall time that cannot map to an instant before
        the best one found: an instant is its wall time minus the UTC offset, so a wall time
        later than ``best + the largest offset in between`` cannot."""
        tz = zone_info(self.timezone)
        after_s = after_ms // 1000
        start = datetime.fromtimestamp(after_s, UTC).astimezone(tz).replace(tzinfo=None)
        back = self._lookback_s(after_s, tz)
        iterator = CronSim(self.expression, start - timedelta(seconds=back + 1) if back else start)
        best: tuple[int, datetime, DstNote] | None = None
        ceiling: int | None = None
        gaps: list[tuple[datetime, int]] = []  # skipped wall times and where their gap ends
        for _ in range(_MAX_CANDIDATES):
            wall = next(iterator)
            if ceiling is not None and _naive_utc_ms(wall) // 1000 > ceiling:
                break
            instants = _resolve_wall_time(wall, tz, self.dst)
            if not instants:
                gaps.append((wall, _gap_end(wall, tz)))
            for at_s, note in instants:
                if at_s > after_s and (best is None or at_s < best[0]):
                    best = (at_s, wall, note)
                    if self.dst.overlap is DstOverlap.BOTH:
                        ceiling = at_s + _max_offset_seconds(after_s, at_s, tz)
            if best is not None and self.dst.overlap is not DstOverlap.BOTH:
                break  # one instant per wall time: wall order is instant order
        if best is None:
            raise InvalidSchedule("cron", "has no further occurrence")
        skipped = tuple(wall for wall, end in gaps if after_s < end <= best[0])
        return Occurrence(best[0] * 1000, best[1], best[2], skipped)

    def _lookback_s(self, after_s: int, tz: object) -> int:
        """How far before the wall time of ``after_s`` a wall time can lie whose chosen instant
        is still after it: only the second instants of a fall-back overlap that begins within
        the next day can, by as much as the offset drops."""
        if self.dst.overlap is DstOverlap.FIRST:
            return 0
        offset = _offset_seconds(after_s, tz)
        lowest = offset
        at = after_s
        while (change := _next_offset_change(at, after_s + 86_400, tz)) is not None:
            lowest = min(lowest, _offset_seconds(change, tz))
            at = change
        return max(0, offset - lowest)


@lru_cache(maxsize=_MEMO_SIZE)
def _check_computable(expression: str, timezone: str) -> None:
    """Whether a stored schedule can be computed (InvalidSchedule if not): checked once per
    expression and zone (a refusal raises, so it is not remembered)."""
    try:
        CronSim(expression, datetime(2000, 1, 1))
        zone_info(timezone)
    except (CronSimError, ValueError, IndexError, LookupError, OSError) as exc:
        raise InvalidSchedule("cron", f"stored schedule {expression!r} in {timezone!r} "
                                      "cannot be computed") from exc


@lru_cache(maxsize=_MEMO_SIZE)
def _next_occurrence(schedule: CronSchedule, after_ms: int) -> Occurrence:
    return schedule._compute_next(after_ms)


def _naive_utc_ms(wall: datetime) -> int:
    return int(wall.replace(tzinfo=UTC).timestamp()) * 1000


def _is_ambiguous(wall: datetime, tz: object) -> bool:
    first = wall.replace(tzinfo=tz, fold=0)  # type: ignore[arg-type]
    second = wall.replace(tzinfo=tz, fold=1)  # type: ignore[arg-type]
    return first.utcoffset() != second.utcoffset() and not _is_imaginary(wall, tz)


def _is_imaginary(wall: datetime, tz: object) -> bool:
    aware = wall.replace(tzinfo=tz, fold=0)  # type: ignore[arg-type]
    return aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None) != wall  # type: ignore[arg-type]


def _gap_end(wall: datetime, tz: object) -> int:
    """For a wall time in a spring-forward gap: the first instant after the gap. fold=1 applies
    the later offset (an earlier instant), fold=0 the earlier offset (a later instant); the
    gap ends where the offset changes in between."""
    low = int(wall.replace(tzinfo=tz, fold=1).timestamp())  # type: ignore[arg-type]
    high = int(wall.replace(tzinfo=tz, fold=0).timestamp())  # type: ignore[arg-type]
    before = _offset_at(low, tz)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset_at(middle, tz) == before:
            low = middle
        else:
            high = middle
    return high


def _resolve_wall_time(wall: datetime, tz: object, dst: DstPolicy) -> list[tuple[int, DstNote]]:
    """The epoch seconds a local wall time fires at under the wall-clock rule and ``dst``:
    none (a gap skipped), one, or two (both instants of an overlap), ascending."""
    if _is_imaginary(wall, tz):
        return [] if dst.gap is DstGap.SKIP else [(_gap_end(wall, tz), DstNote.GAP_SHIFTED)]
    first = int(wall.replace(tzinfo=tz, fold=0).timestamp())  # type: ignore[arg-type]
    if not _is_ambiguous(wall, tz):
        return [(first, DstNote.NONE)]
    second = int(wall.replace(tzinfo=tz, fold=1).timestamp())  # type: ignore[arg-type]
    if dst.overlap is DstOverlap.FIRST:
        return [(first, DstNote.OVERLAP_FIRST)]
    if dst.overlap is DstOverlap.SECOND:
        return [(second, DstNote.OVERLAP_SECOND)]
    return [(first, DstNote.OVERLAP_FIRST), (second, DstNote.OVERLAP_SECOND)]


def _max_offset_seconds(start_s: int, end_s: int, tz: object) -> int:
    """The largest UTC offset (seconds) in effect at any instant in [start_s, end_s]."""
    highest = _offset_seconds(start_s, tz)
    at = start_s
    while (change := _next_offset_change(at, end_s, tz)) is not None:
        highest = max(highest, _offset_seconds(change, tz))
        at = change
    return highest


def _offset_at(epoch_s: int, tz: object) -> timedelta | None:
    return datetime.fromtimestamp(epoch_s, UTC).astimezone(tz).utcoffset()  # type: ignore[arg-type]


def _offset_seconds(epoch_s: int, tz: object) -> int:
    offset = _offset_at(epoch_s, tz)
    return int(offset.total_seconds()) if offset is not None else 0


def _next_offset_change(start_s: int, until_s: int, tz: object) -> int | None:
    """The first second in (start_s, until_s] whose UTC offset differs from start_s's."""
    base = _offset_at(start_s, tz)
    low = start_s
    while low < until_s:
        high = min(until_s, low + _PROBE_STEP_S)
        if _offset_at(high, tz) != base:
            while high - low > 1:  # offset(low) == base, offset(high) != base
                middle = (low + high) // 2
                if _offset_at(middle, tz) == base:
                    low = middle
                else:
                    high = middle
            return high
        low = high
    return None
