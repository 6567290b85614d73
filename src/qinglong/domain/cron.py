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

This module walks the occurrences (`CronSchedule`). The field rules are checked in
``domain/cron_fields.py``, the DST policy and the mapping of a wall time to its instants are
in ``domain/cron_dst.py``, and a zone's UTC offsets over time in ``domain/zone_offsets.py``;
the public names of the first two are importable from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from cronsim import CronSim, CronSimError

from qinglong.domain.cron_dst import (
    DstGap,
    DstNote,
    DstOverlap,
    DstPolicy,
    check_dst_applies,
    gap_end,
    is_ambiguous,
    resolve_wall_time,
)
from qinglong.domain.cron_fields import (
    MAX_EXPRESSION_LENGTH,
    MAX_FIELD_LENGTH,
    MAX_NUMBER_DIGITS,
    is_wall_clock,
    normalize_expression,
)
from qinglong.domain.timezones import UTC_NAME, canonical_timezone, zone_info
from qinglong.domain.zone_offsets import next_offset_change, offset_seconds, offsets_between
from qinglong.errors import InvalidSchedule

__all__ = [
    "MAX_EXPRESSION_LENGTH", "MAX_FIELD_LENGTH", "MAX_NUMBER_DIGITS", "CronSchedule", "DstGap",
    "DstNote", "DstOverlap", "DstPolicy", "Occurrence", "check_dst_applies", "is_wall_clock",
    "normalize_expression",
]

_MAX_CANDIDATES = 100_000
_MAX_SEGMENTS = 1_000
_ITER_STRETCH_S = 366 * 86_400  # iter_after looks for the next offset change this far ahead
_MEMO_SIZE = 4096  # next occurrences (and computable stored schedules) remembered


@dataclass(frozen=True, slots=True)
class Occurrence:
    at_ms: int
    wall: datetime  # the naive local wall time the expression matched
    note: DstNote
    # wall times before this one that a spring-forward gap swallowed (DST policy gap=skip)
    skipped: tuple[datetime, ...] = ()


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A validated cron expression in a canonical IANA time zone, with its DST policy."""

    expression: str
    timezone: str
    dst: DstPolicy = field(default_factory=DstPolicy)

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
            offset = offset_seconds(start, tz)
            change = next_offset_change(start, start + _ITER_STRETCH_S, tz)
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
            offset = offset_seconds(start, tz)
            wall_start = datetime.fromtimestamp(start + offset, UTC).replace(tzinfo=None)
            wall = next(CronSim(self.expression, wall_start - timedelta(seconds=1)))
            at_s = _naive_utc_ms(wall) // 1000 - offset
            change = next_offset_change(start, at_s, tz)
            if change is None:
                note = DstNote.NONE
                if is_ambiguous(wall, tz):
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
            instants = resolve_wall_time(wall, tz, self.dst)
            if not instants:
                gaps.append((wall, gap_end(wall, tz)))
            for at_s, note in instants:
                if at_s > after_s and (best is None or at_s < best[0]):
                    best = (at_s, wall, note)
                    if self.dst.overlap is DstOverlap.BOTH:
                        ceiling = at_s + max(offsets_between(after_s, at_s, tz))
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
        offsets = list(offsets_between(after_s, after_s + 86_400, tz))
        return max(0, offsets[0] - min(offsets))


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

