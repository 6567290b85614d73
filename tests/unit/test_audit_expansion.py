"""The audit's independent cron expansion: DST tables, a differential property against the
scheduler, the cronsim fallback for ``LW``/``nL`` and the work bound.

Expected instants in the tables come from calendar and tz facts, not from code:

* America/New_York: EST is UTC-5, EDT is UTC-4. 2026-03-08 02:00 EST -> 03:00 EDT at 07:00Z
  (02:00-02:59 local does not exist); 2026-11-01 02:00 EDT -> 01:00 EST at 06:00Z (01:00-01:59
  local happens at 05:00-05:59Z and again at 06:00-06:59Z).
* Europe/Berlin: CET is UTC+1, CEST is UTC+2. 2026-03-29 02:00 CET -> 03:00 CEST at 01:00Z;
  2026-10-25 03:00 CEST -> 02:00 CET at 01:00Z (02:00-02:59 local at 00:00-00:59Z and again
  at 01:00-01:59Z).
* Australia/Lord_Howe: LHST is UTC+10:30, LHDT is UTC+11. 2026-04-05 02:00 LHDT -> 01:30 LHST
  at 2026-04-04T15:00Z (01:30-01:59 local at 14:30-14:59Z and again at 15:00-15:29Z);
  2026-10-04 02:00 LHST -> 02:30 LHDT at 2026-10-03T15:30Z (02:00-02:29 local does not exist).
* Asia/Shanghai is UTC+8 all year; UTC has no offset.
* 2026-01-01 is a Thursday, 2026-03-01 a Sunday, 2026-04-01 a Wednesday, 2026-10-01 a
  Thursday, 2026-11-01 a Sunday. 2026 is not a leap year, 2028 is.

The differential property compares the expansion with the scheduler's own sequence
(``CronSchedule.first_at_or_after`` then ``next_after``) for random expressions, zones and
windows. It leaves out one form on which the scheduler disagrees with the documentation (a
range with equal ends and a step, ``5-5/2``); the scheduler now collapses that form to the
single value when it normalises an expression, and a table test pins the agreement.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest
from croniter import croniter  # type: ignore[import-untyped]
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from qinglong.audit import expansion
from qinglong.audit.expansion import MAX_NAIVE_ITERATIONS, is_wall_clock, nominal_occurrences
from qinglong.domain.cron import CronSchedule
from qinglong.domain.cron import is_wall_clock as product_is_wall_clock
from qinglong.errors import InvalidSchedule

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

NY = "America/New_York"
BER = "Europe/Berlin"
LHI = "Australia/Lord_Howe"
SHA = "Asia/Shanghai"
ZONES = ["UTC", SHA, NY, BER, LHI]


def ms(text: str) -> int:
    """``2026-03-08T07:00:00Z`` (optionally with .fff) -> UTC epoch milliseconds."""
    return (datetime.fromisoformat(text) - EPOCH) // timedelta(milliseconds=1)


def iso(epoch_ms: int) -> str:
    moment = EPOCH + timedelta(milliseconds=epoch_ms)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{epoch_ms % 1000:03d}Z" if epoch_ms % 1000 else "Z")


def expand(expr: str, zone: str, start: str, end: str) -> list[str]:
    return [iso(at) for at in nominal_occurrences(expr, zone, ms(start), ms(end))]


# --- (a) tables at real DST transitions --------------------------------------------------
# (zone, expression, window start, window end (both inclusive), expected UTC instants)

DST_CASES = [
    # -- New York, spring forward 2026-03-08 --
    pytest.param(NY, "30 2 * * *", "2026-03-07T00:00:00Z", "2026-03-09T23:59:59Z", [
        "2026-03-07T07:30:00Z",  # 02:30 EST
        "2026-03-08T07:00:00Z",  # 02:30 does not exist: the end of the gap, 03:00 EDT
        "2026-03-09T06:30:00Z",  # 02:30 EDT
    ], id="ny-spring-wall-clock"),
    pytest.param(NY, "0 30 2 * * *", "2026-03-07T00:00:00Z", "2026-03-09T23:59:59Z", [
        "2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z",
    ], id="ny-spring-wall-clock-6-fields"),
    # 02:00 and 02:30 both shift to 07:00Z, where 03:00 EDT also fires: one occurrence.
    pytest.param(NY, "0,30 2,3 * * *", "2026-03-08T06:00:00Z", "2026-03-08T09:00:00Z", [
        "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z",
    ], id="ny-spring-wall-clock-shifted-times-collapse"),
    pytest.param(NY, "0 * * * *", "2026-03-08T05:00:00Z", "2026-03-08T09:00:00Z", [
        "2026-03-08T05:00:00Z",  # 00:00 EST
        "2026-03-08T06:00:00Z",  # 01:00 EST
        "2026-03-08T07:00:00Z",  # 03:00 EDT; no 02:00
        "2026-03-08T08:00:00Z",
        "2026-03-08T09:00:00Z",
    ], id="ny-spring-interval-hourly"),
    pytest.param(NY, "*/30 2 * * *", "2026-03-07T00:00:00Z", "2026-03-09T23:59:59Z", [
        "2026-03-07T07:00:00Z", "2026-03-07T07:30:00Z",
        # 2026-03-08: 02:00 and 02:30 never happen
        "2026-03-09T06:00:00Z", "2026-03-09T06:30:00Z",
    ], id="ny-spring-interval-gap-never-fires"),
    # -- New York, fall back 2026-11-01 --
    pytest.param(NY, "30 1 * * *", "2026-10-31T00:00:00Z", "2026-11-02T23:59:59Z", [
        "2026-10-31T05:30:00Z",  # 01:30 EDT
        "2026-11-01T05:30:00Z",  # 01:30 happens twice: the first, EDT, only
        "2026-11-02T06:30:00Z",  # 01:30 EST
    ], id="ny-fall-wall-clock"),
    pytest.param(NY, "30 2 * * *", "2026-11-01T00:00:00Z", "2026-11-01T23:59:59Z", [
        "2026-11-01T07:30:00Z",  # 02:30 EST, once
    ], id="ny-fall-wall-clock-after-overlap"),
    pytest.param(NY, "30 59 1 * * *", "2026-11-01T00:00:00Z", "2026-11-01T23:59:59Z", [
        "2026-11-01T05:59:30Z",
    ], id="ny-fall-wall-clock-6-fields"),
    pytest.param(NY, "*/30 1 * * *", "2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z", [
        "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z",  # EDT
        "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z",  # EST
    ], id="ny-fall-interval-overlap-twice"),
    pytest.param(NY, "0 * * * *", "2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z", [
        "2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z",
        "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z",
    ], id="ny-fall-interval-hourly"),
    pytest.param(NY, "*/20 59 1 * * *", "2026-11-01T00:00:00Z", "2026-11-01T23:59:59Z", [
        "2026-11-01T05:59:00Z", "2026-11-01T05:59:20Z", "2026-11-01T05:59:40Z",
        "2026-11-01T06:59:00Z", "2026-11-01T06:59:20Z", "2026-11-01T06:59:40Z",
    ], id="ny-fall-interval-6-fields"),
    # -- Berlin, spring forward 2026-03-29 --
    pytest.param(BER, "15 2 * * *", "2026-03-28T00:00:00Z", "2026-03-30T23:59:59Z", [
        "2026-03-28T01:15:00Z",  # 02:15 CET
        "2026-03-29T01:00:00Z",  # gap: 03:00 CEST
        "2026-03-30T00:15:00Z",  # 02:15 CEST
    ], id="berlin-spring-wall-clock"),
    pytest.param(BER, "0 0 * * * *", "2026-03-28T23:00:00Z", "2026-03-29T03:00:00Z", [
        "2026-03-28T23:00:00Z", "2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z",
        "2026-03-29T02:00:00Z", "2026-03-29T03:00:00Z",
    ], id="berlin-spring-interval-6-fields"),
    pytest.param(BER, "* 2 29 3 *", "2026-03-28T12:00:00Z", "2026-03-29T12:00:00Z", [],
                 id="berlin-spring-interval-whole-hour-missing"),
    # -- Berlin, fall back 2026-10-25 --
    pytest.param(BER, "15 2 * * *", "2026-10-24T00:00:00Z", "2026-10-26T23:59:59Z", [
        "2026-10-24T00:15:00Z",  # 02:15 CEST
        "2026-10-25T00:15:00Z",  # first of the two 02:15s
        "2026-10-26T01:15:00Z",  # 02:15 CET
    ], id="berlin-fall-wall-clock"),
    pytest.param(BER, "*/15 * * * *", "2026-10-24T23:30:00Z", "2026-10-25T02:00:00Z", [
        "2026-10-24T23:30:00Z", "2026-10-24T23:45:00Z", "2026-10-25T00:00:00Z",
        "2026-10-25T00:15:00Z", "2026-10-25T00:30:00Z", "2026-10-25T00:45:00Z",
        "2026-10-25T01:00:00Z", "2026-10-25T01:15:00Z", "2026-10-25T01:30:00Z",
        "2026-10-25T01:45:00Z", "2026-10-25T02:00:00Z",
    ], id="berlin-fall-interval-follows-real-time"),
    # -- Lord Howe, 30-minute fall back 2026-04-05 --
    pytest.param(LHI, "45 1 * * *", "2026-04-03T12:00:00Z", "2026-04-05T18:00:00Z", [
        "2026-04-03T14:45:00Z",  # 2026-04-04 01:45 LHDT
        "2026-04-04T14:45:00Z",  # 2026-04-05 01:45, first (LHDT) instant
        "2026-04-05T15:15:00Z",  # 2026-04-06 01:45 LHST
    ], id="lord-howe-fall-wall-clock"),
    pytest.param(LHI, "*/15 1 * * *", "2026-04-04T13:00:00Z", "2026-04-04T16:00:00Z", [
        "2026-04-04T14:00:00Z", "2026-04-04T14:15:00Z",  # 01:00, 01:15 happen once
        "2026-04-04T14:30:00Z", "2026-04-04T14:45:00Z",  # 01:30, 01:45 LHDT
        "2026-04-04T15:00:00Z", "2026-04-04T15:15:00Z",  # 01:30, 01:45 LHST
    ], id="lord-howe-fall-interval"),
    # -- Lord Howe, 30-minute spring forward 2026-10-04 --
    pytest.param(LHI, "0,15,30,45 2 * * *", "2026-10-03T12:00:00Z", "2026-10-04T18:00:00Z", [
        "2026-10-03T15:30:00Z",  # 02:00 and 02:15 shift to the gap's end, where 02:30 is
        "2026-10-03T15:45:00Z",
        "2026-10-04T15:00:00Z", "2026-10-04T15:15:00Z",  # 2026-10-05, LHDT
        "2026-10-04T15:30:00Z", "2026-10-04T15:45:00Z",
    ], id="lord-howe-spring-wall-clock"),
    pytest.param(LHI, "*/10 2 * * *", "2026-10-03T15:00:00Z", "2026-10-03T16:00:00Z", [
        "2026-10-03T15:30:00Z", "2026-10-03T15:40:00Z", "2026-10-03T15:50:00Z",
    ], id="lord-howe-spring-interval"),
    # -- Apia skipped 2011-12-30: 2011-12-29 24:00 at UTC-10 became 2011-12-31 00:00 at UTC+14
    #    (at 2011-12-30T10:00Z), so a whole day of wall times does not exist --
    pytest.param("Pacific/Apia", "30 2 * * *", "2011-12-28T00:00:00Z", "2011-12-31T23:59:59Z", [
        "2011-12-28T12:30:00Z",  # 12-28 02:30 -10
        "2011-12-29T12:30:00Z",  # 12-29 02:30 -10
        "2011-12-30T10:00:00Z",  # 12-30 02:30 does not exist: the end of the gap
        "2011-12-30T12:30:00Z",  # 12-31 02:30 +14
        "2011-12-31T12:30:00Z",  # 2012-01-01 02:30 +14
    ], id="apia-skipped-day-wall-clock"),
    # -- zones without DST --
    pytest.param("UTC", "0 12 * * *", "2026-03-07T00:00:00Z", "2026-03-09T23:59:59Z", [
        "2026-03-07T12:00:00Z", "2026-03-08T12:00:00Z", "2026-03-09T12:00:00Z",
    ], id="utc-daily"),
    pytest.param("UTC", "*/20 * * * * *", "2026-03-08T10:00:00Z", "2026-03-08T10:01:00Z", [
        "2026-03-08T10:00:00Z", "2026-03-08T10:00:20Z", "2026-03-08T10:00:40Z",
        "2026-03-08T10:01:00Z",
    ], id="utc-window-is-inclusive"),
    pytest.param(SHA, "30 2 * * *", "2026-03-07T00:00:00Z", "2026-03-09T00:00:00Z", [
        "2026-03-07T18:30:00Z", "2026-03-08T18:30:00Z",
    ], id="shanghai-daily"),
    pytest.param(SHA, "0 * * * *", "2026-11-01T04:00:00Z", "2026-11-01T07:00:00Z", [
        "2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z",
        "2026-11-01T07:00:00Z",
    ], id="shanghai-hourly"),
]


@pytest.mark.parametrize(("zone", "expr", "start", "end", "expected"), DST_CASES)
def test_occurrences_at_dst_transitions(
    zone: str, expr: str, start: str, end: str, expected: list[str]
) -> None:
    assert expand(expr, zone, start, end) == expected


DAY_CASES = [
    # OR: the 13th (a Monday) and every Friday of April 2026, local midnight = 16:00Z before
    pytest.param(SHA, "0 0 13 * FRI", "2026-03-31T16:00:00Z", "2026-04-30T15:59:59Z", [
        "2026-04-02T16:00:00Z", "2026-04-09T16:00:00Z", "2026-04-12T16:00:00Z",
        "2026-04-16T16:00:00Z", "2026-04-23T16:00:00Z",
    ], id="or"),
    # AND (day-of-month starts with *): odd days that are Mondays: the 13th and 27th
    pytest.param(SHA, "0 0 */2 * MON", "2026-03-31T16:00:00Z", "2026-04-30T15:59:59Z", [
        "2026-04-12T16:00:00Z", "2026-04-26T16:00:00Z",
    ], id="and"),
    # OR with '#': the 1st and the second Monday (croniter's own day_or would drop the 1st)
    pytest.param("UTC", "0 0 1 * MON#2", "2026-04-01T00:00:00Z", "2026-04-30T23:59:59Z", [
        "2026-04-01T00:00:00Z", "2026-04-13T00:00:00Z",
    ], id="or-with-hash"),
    # OR where one side spells out every day: every day matches
    pytest.param("UTC", "0 0 1-31 * FRI", "2026-04-01T00:00:00Z", "2026-04-03T23:59:59Z", [
        "2026-04-01T00:00:00Z", "2026-04-02T00:00:00Z", "2026-04-03T00:00:00Z",
    ], id="or-full-range"),
    pytest.param("UTC", "0 0 L * *", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", [
        "2026-02-28T00:00:00Z",
    ], id="last-day"),
    pytest.param("UTC", "0 0 L 2 *", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", [
        "2028-02-29T00:00:00Z",
    ], id="last-day-leap-year"),
    # day-of-week 7 is Sunday, also as the range 7-7 (which croniter alone reads as every day)
    pytest.param("UTC", "0 0 * * 7-7", "2026-03-01T00:00:00Z", "2026-03-14T00:00:00Z", [
        "2026-03-01T00:00:00Z", "2026-03-08T00:00:00Z",
    ], id="sunday-as-7-7"),
    pytest.param("UTC", "0 0 * * sun,7", "2026-03-01T00:00:00Z", "2026-03-14T00:00:00Z", [
        "2026-03-01T00:00:00Z", "2026-03-08T00:00:00Z",
    ], id="sunday-lower-case-name-and-7"),
    # day-of-week runs 0-7, so 5/2 is 5 and 7: Fridays and Sundays
    pytest.param("UTC", "0 0 * * 5/2", "2026-03-01T00:00:00Z", "2026-03-08T23:59:59Z", [
        "2026-03-01T00:00:00Z", "2026-03-06T00:00:00Z", "2026-03-08T00:00:00Z",
    ], id="day-of-week-start-step-reaches-7"),
    # '#' listed with plain days (croniter refuses the mix): Sundays and the first Monday
    pytest.param("UTC", "0 0 * * 0,1#1", "2026-03-01T00:00:00Z", "2026-03-09T23:59:59Z", [
        "2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z", "2026-03-08T00:00:00Z",
    ], id="hash-listed-with-plain-days"),
    # ranges with equal ends are one value (croniter alone reads them as the whole field)
    pytest.param("UTC", "5-5 10-10 * * 0-0", "2026-03-01T00:00:00Z", "2026-03-08T23:59:59Z", [
        "2026-03-01T10:05:00Z", "2026-03-08T10:05:00Z",
    ], id="equal-ended-ranges"),
    pytest.param("UTC", "0 0 * JAN-MAR/2 *", "2026-01-31T00:00:00Z", "2026-03-02T00:00:00Z", [
        "2026-01-31T00:00:00Z", "2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z",
    ], id="month-names-and-step"),
]


@pytest.mark.parametrize(("zone", "expr", "start", "end", "expected"), DAY_CASES)
def test_day_fields(zone: str, expr: str, start: str, end: str, expected: list[str]) -> None:
    assert expand(expr, zone, start, end) == expected


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("2026-03-08T10:00:00.500Z", "2026-03-08T10:00:03.000Z",
         ["2026-03-08T10:00:01Z", "2026-03-08T10:00:02Z", "2026-03-08T10:00:03Z"]),
        ("2026-03-08T10:00:00.000Z", "2026-03-08T10:00:01.999Z",
         ["2026-03-08T10:00:00Z", "2026-03-08T10:00:01Z"]),
        ("2026-03-08T10:00:00.001Z", "2026-03-08T10:00:00.999Z", []),
        ("2026-03-08T10:00:05Z", "2026-03-08T10:00:04Z", []),
    ],
)
def test_window_bounds_in_milliseconds(start: str, end: str, expected: list[str]) -> None:
    assert expand("* * * * * *", NY, start, end) == expected


@pytest.mark.parametrize(
    ("expr", "wall_clock"),
    [
        ("30 2 * * *", True),
        ("0 30 2 * * *", True),
        ("0,30 2 * * *", True),
        ("15 9-17 * * MON-FRI", True),
        ("5/15 2 * * *", True),
        ("30 2 * * *".replace(" ", "   "), True),
        ("* * * * *", False),
        ("*/5 * * * *", False),
        ("0 * * * *", False),
        ("*/10 * * * * *", False),
        ("* 30 2 * * *", False),
        ("0 */5 2 * * *", False),
        ("0 0 * * *", True),
    ],
)
def test_wall_clock_classification(expr: str, wall_clock: bool) -> None:
    assert is_wall_clock(expr) is wall_clock


@pytest.mark.parametrize(
    ("expr", "zone", "message"),
    [
        ("* * * *", "UTC", "must have 5 fields"),
        ("* * * * * * *", "UTC", "must have 5 fields"),
        ("H * * * *", "UTC", "not supported"),
        ("0 0 ? * *", "UTC", "not supported"),
        ("0 0 15W * *", "UTC", "not supported"),
        ("0 0 * * L", "UTC", "not supported"),
        ("61 * * * *", "UTC", "cannot be parsed"),
        ("0 0 * * *", "Mars/Olympus_Mons", "unknown time zone"),
        ("0 0 * * *", "../../etc/passwd", "not an IANA time zone name"),
    ],
)
def test_refuses_what_it_cannot_expand(expr: str, zone: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        nominal_occurrences(expr, zone, ms("2026-01-01T00:00:00Z"), ms("2026-01-02T00:00:00Z"))


# --- (c) the cronsim fallback for LW and nL ----------------------------------------------


@pytest.mark.parametrize("expr", ["0 0 LW * *", "0 0 * * 5L", "0 0 15,LW * *"])
def test_croniter_cannot_parse_the_fallback_forms(expr: str) -> None:
    """Why the fallback exists; if croniter learns these forms, the fallback can go."""
    with pytest.raises(ValueError):  # croniter's errors are ValueErrors
        croniter(expr, datetime(2026, 1, 1))


FALLBACK_CASES = [
    # last weekdays: Fri 02-27 (28th is a Saturday), Tue 03-31, Thu 04-30, Fri 05-29 (31st is
    # a Sunday); 09:00 CST is 01:00Z
    pytest.param(SHA, "0 9 LW * *", "2026-02-01T00:00:00Z", "2026-06-01T00:00:00Z", [
        "2026-02-27T01:00:00Z", "2026-03-31T01:00:00Z", "2026-04-30T01:00:00Z",
        "2026-05-29T01:00:00Z",
    ], id="lw"),
    # OR: Mondays of April 2026 and its last weekday, Thu 04-30
    pytest.param("UTC", "0 12 LW * MON", "2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z", [
        "2026-04-06T12:00:00Z", "2026-04-13T12:00:00Z", "2026-04-20T12:00:00Z",
        "2026-04-27T12:00:00Z", "2026-04-30T12:00:00Z",
    ], id="lw-or-monday"),
    # AND: last weekdays that are Sundays or Fridays (*/5 = 0,5)
    pytest.param("UTC", "0 12 LW * */5", "2026-02-01T00:00:00Z", "2026-06-01T00:00:00Z", [
        "2026-02-27T12:00:00Z", "2026-05-29T12:00:00Z",
    ], id="lw-and-step"),
    # AND with a split day-of-week: last weekdays that are Sun/Wed/Sat or the last Friday --
    # Fri 02-27, Fri 05-29, Fri 07-31 (not Tue 03-31, Thu 04-30, Tue 06-30). LW and 5L meet
    # in one cronsim call that would OR them, so this pair is intersected instead.
    pytest.param("UTC", "0 12 LW * */3,5L", "2026-02-01T00:00:00Z", "2026-08-01T00:00:00Z", [
        "2026-02-27T12:00:00Z", "2026-05-29T12:00:00Z", "2026-07-31T12:00:00Z",
    ], id="lw-and-last-friday-intersected"),
    # last Fridays: 10-30 (00:00 EDT = 04:00Z) and 11-27 (00:00 EST = 05:00Z)
    pytest.param(NY, "0 0 * * 5L", "2026-10-01T00:00:00Z", "2026-12-01T00:00:00Z", [
        "2026-10-30T04:00:00Z", "2026-11-27T05:00:00Z",
    ], id="last-friday"),
    # the DST mapping still applies: the last Sundays of March and October are Berlin's
    # transition days
    pytest.param(BER, "30 2 * * 0L", "2026-03-01T00:00:00Z", "2026-04-30T00:00:00Z", [
        "2026-03-29T01:00:00Z",  # gap: 03:00 CEST
        "2026-04-26T00:30:00Z",
    ], id="last-sunday-wall-clock-gap"),
    pytest.param(BER, "30 2 * * 0L", "2026-10-01T00:00:00Z", "2026-11-30T00:00:00Z", [
        "2026-10-25T00:30:00Z",  # overlap: the first 02:30 (CEST)
        "2026-11-29T01:30:00Z",
    ], id="last-sunday-wall-clock-overlap"),
    pytest.param(BER, "*/20 2 * * 0L", "2026-10-24T22:00:00Z", "2026-10-25T03:00:00Z", [
        "2026-10-25T00:00:00Z", "2026-10-25T00:20:00Z", "2026-10-25T00:40:00Z",
        "2026-10-25T01:00:00Z", "2026-10-25T01:20:00Z", "2026-10-25T01:40:00Z",
    ], id="last-sunday-interval-overlap"),
    pytest.param(BER, "*/20 2 * * 0L", "2026-03-28T22:00:00Z", "2026-03-29T03:00:00Z", [],
                 id="last-sunday-interval-gap"),
]


@pytest.mark.parametrize(("zone", "expr", "start", "end", "expected"), FALLBACK_CASES)
def test_fallback_forms(zone: str, expr: str, start: str, end: str, expected: list[str]) -> None:
    assert expand(expr, zone, start, end) == expected


# --- a disagreement with the scheduler --------------------------------------------------
# The documented ``a-b/n`` is a, a+n, ... up to b, so a range with equal ends and a step is
# that one value. The scheduler (through cronsim) reads ``a-a/n`` as ``a/n``: from a to the
# field's maximum. The differential property leaves this form out; these pin it down.

EQUAL_ENDED_RANGES_WITH_STEP = [
    # 2025-01-01T00:00:00Z is 08:00 in Shanghai, not hour 0
    pytest.param("* 0-0/1 * * *", SHA, "2025-01-01T00:00:00Z", "2025-01-01T00:00:01Z", [],
                 id="hour-0-0/1"),
    pytest.param("5-5/2 * * * *", "UTC", "2026-03-08T10:00:00Z", "2026-03-08T10:10:00Z",
                 ["2026-03-08T10:05:00Z"], id="minute-5-5/2"),
    # Wednesdays only (the scheduler adds Fridays and Sundays)
    pytest.param("0 0 * * 3-3/2", "UTC", "2026-03-01T00:00:00Z", "2026-03-14T23:59:59Z",
                 ["2026-03-04T00:00:00Z", "2026-03-11T00:00:00Z"], id="day-of-week-3-3/2"),
]


@pytest.mark.parametrize(("expr", "zone", "start", "end", "expected"),
                         EQUAL_ENDED_RANGES_WITH_STEP)
def test_an_equal_ended_range_with_a_step_is_one_value(
    expr: str, zone: str, start: str, end: str, expected: list[str]
) -> None:
    assert expand(expr, zone, start, end) == expected


@pytest.mark.parametrize(("expr", "zone", "start", "end", "expected"),
                         EQUAL_ENDED_RANGES_WITH_STEP)
def test_scheduler_reads_an_equal_ended_range_with_a_step_as_documented(
    expr: str, zone: str, start: str, end: str, expected: list[str]
) -> None:
    found = product_occurrences(expr, zone, ms(start), ms(end))
    assert [iso(at) for at in found] == expected


# --- (d) the work bound ------------------------------------------------------------------


def test_refuses_a_window_that_needs_too_many_iterations(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_iterate(*args: object) -> None:
        raise AssertionError("the window should be refused before iterating")

    monkeypatch.setattr(expansion, "matching_walls", must_not_iterate)
    # every second for 60 days: 5,184,000 wall times
    with pytest.raises(ValueError, match="window too large"):
        nominal_occurrences("* * * * * *", "UTC", ms("2026-01-01T00:00:00Z"),
                            ms("2026-03-02T00:00:00Z"))
    # every minute for 10 years
    with pytest.raises(ValueError, match="window too large"):
        nominal_occurrences("* * * * *", BER, ms("2026-01-01T00:00:00Z"),
                            ms("2036-01-01T00:00:00Z"))
    # every 2 seconds for 60 days with the day fields ORed: two expansions of up to
    # 2,678,400 wall times each (one alone would be allowed)
    with pytest.raises(ValueError, match="window too large"):
        nominal_occurrences("*/2 * * 1 * MON", NY, ms("2026-01-01T00:00:00Z"),
                            ms("2026-03-02T00:00:00Z"))
    assert MAX_NAIVE_ITERATIONS == 5_000_000


def test_the_bound_counts_matching_times_not_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    # 50 years of a yearly expression is 50 wall times, far below the bound.
    found = nominal_occurrences("0 0 1 1 *", NY, ms("2026-01-01T00:00:00Z"),
                                ms("2075-12-31T23:59:59Z"))
    assert len(found) == 50
    assert (iso(found[0]), iso(found[-1])) == ("2026-01-01T05:00:00Z", "2075-01-01T05:00:00Z")
    # every second for 50 days (4,320,000 wall times) is allowed: the walk is reached
    walked: list[tuple[object, ...]] = []

    def record_walk(*args: object) -> Iterator[datetime]:
        walked.append(args)
        return iter(())

    monkeypatch.setattr(expansion, "matching_walls", record_walk)
    assert nominal_occurrences("* * * * * *", "UTC", ms("2026-01-01T00:00:00Z"),
                               ms("2026-02-19T23:59:59Z")) == []
    assert len(walked) == 1


# --- (b) differential property against the scheduler -------------------------------------


T = TypeVar("T")


def weighted(*options: tuple[int, st.SearchStrategy[T]]) -> st.SearchStrategy[T]:
    """Choose among strategies in proportion to their weights (st.one_of does not weight)."""
    table = [strategy for weight, strategy in options for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda index: table[index])


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int]  # what a time field matches (used to size the window)


def _numeric_item(lo: int, hi: int, favour: list[int]) -> st.SearchStrategy[Field]:
    value = st.one_of(st.sampled_from(favour), st.integers(lo, hi))
    pair = st.tuples(value, value).map(sorted)
    step = st.integers(1, hi - lo + 3)
    single = value.map(lambda v: Field(str(v), frozenset([v])))
    return weighted(
        (3, single),
        (1, pair.map(lambda p: Field(f"{p[0]}-{p[1]}", frozenset(range(p[0], p[1] + 1))))),
        (1, step.map(lambda n: Field(f"*/{n}", frozenset(range(lo, hi + 1, n))))),
        # a range with equal ends and a step is left out: the scheduler gets it wrong (see
        # test_scheduler_reads_an_equal_ended_range_with_a_step_as_documented)
        (1, st.tuples(pair.filter(lambda p: p[0] < p[1]), step).map(
            lambda t: Field(f"{t[0][0]}-{t[0][1]}/{t[1]}",
                            frozenset(range(t[0][0], t[0][1] + 1, t[1])))
        )),
        (1, st.tuples(value, step).map(
            lambda t: Field(f"{t[0]}/{t[1]}", frozenset(range(t[0], hi + 1, t[1])))
        )),
    )


def _join(items: list[Field]) -> Field:
    return Field(",".join(i.text for i in items), frozenset().union(*(i.values for i in items)))


def _listed(item: st.SearchStrategy[str], star_weight: int, list_weight: int
            ) -> st.SearchStrategy[str]:
    listed = st.lists(item, min_size=1, max_size=3).map(",".join)
    return weighted((star_weight, st.just("*")), (list_weight, listed))


def _time_field(lo: int, hi: int, favour: list[int]) -> st.SearchStrategy[Field]:
    listed = st.lists(_numeric_item(lo, hi, favour), min_size=1, max_size=3).map(_join)
    return weighted((1, st.just(Field("*", frozenset(range(lo, hi + 1))))), (4, listed))


def _named_item(names: list[str]) -> st.SearchStrategy[str]:
    index = st.integers(0, len(names) - 1)
    return st.one_of(
        st.sampled_from(names),
        st.sampled_from(names).map(str.lower),
        st.tuples(index, index).map(sorted).map(lambda p: f"{names[p[0]]}-{names[p[1]]}"),
        st.tuples(index, index, st.integers(1, 4)).filter(lambda t: t[0] != t[1]).map(
            lambda t: f"{names[min(t[0], t[1])]}-{names[max(t[0], t[1])]}/{t[2]}"
        ),
    )


MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

# day fields favour the transition dates (the 4th/5th, 8th, 25th, 29th, 1st; Sundays)
DOM = _listed(
    st.one_of(
        _numeric_item(1, 31, [1, 3, 4, 5, 8, 25, 28, 29, 31]).map(lambda f: f.text),
        st.sampled_from(["L", "LW"]),
    ),
    star_weight=3, list_weight=2,
)
DOW = _listed(
    st.one_of(
        _numeric_item(0, 7, [0, 7]).map(lambda f: f.text),
        _named_item(DAYS),
        st.tuples(st.one_of(st.sampled_from(["0", "7", "SUN"]), st.integers(0, 7).map(str),
                            st.sampled_from(DAYS)),
                  st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
        st.one_of(st.sampled_from([0, 7]), st.integers(0, 7)).map(lambda d: f"{d}L"),
        st.just("7-7"),
    ),
    star_weight=3, list_weight=2,
)
MONTH = _listed(
    st.one_of(_numeric_item(1, 12, [3, 4, 10, 11]).map(lambda f: f.text), _named_item(MONTHS)),
    star_weight=4, list_weight=1,
)

# Instants where the zones under test change offset (all in 2026).
TRANSITIONS = {
    NY: [ms("2026-03-08T07:00:00Z"), ms("2026-11-01T06:00:00Z")],
    BER: [ms("2026-03-29T01:00:00Z"), ms("2026-10-25T01:00:00Z")],
    LHI: [ms("2026-04-04T15:00:00Z"), ms("2026-10-03T15:30:00Z")],
}
# hour fields that meet the local hours those transitions skip or repeat
GAP_OR_OVERLAP_HOURS = {
    zone: [Field(str(h), frozenset([h])) for h in hours] + [Field("1-3", frozenset([1, 2, 3]))]
    for zone, hours in ((NY, [1, 2]), (BER, [2]), (LHI, [1, 2]))
}
ALL_TRANSITIONS = sorted(t for instants in TRANSITIONS.values() for t in instants)
TARGET_OCCURRENCES = 120
LONGEST_WINDOW_S = 35 * 86_400


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, int, int]:
    """An expression, a zone and a window [start, end] in milliseconds. The window's length
    follows the expression's frequency (about TARGET_OCCURRENCES at most, from a second to
    35 days; mostly a day or more when that stays under the target); four in five windows lie across or within 3 hours of one of the
    zone's DST transitions. Half the cases in zones with DST focus on the transitions: hours
    they skip or repeat, days that include them, windows within an hour of them."""
    six = draw(st.booleans())
    # hours and minutes favour the transitions' local times
    second = draw(_time_field(0, 59, [0, 30, 59])) if six else Field("0", frozenset([0]))
    minute = draw(_time_field(0, 59, [0, 15, 29, 30, 45, 59]))
    zone = draw(st.sampled_from(ZONES))
    focused = zone in GAP_OR_OVERLAP_HOURS and draw(st.booleans())
    if focused:
        # focused on the transition days: the skipped or repeated hours, days that include
        # the transition Sundays
        hour = draw(st.sampled_from(GAP_OR_OVERLAP_HOURS[zone]))
        dom = draw(st.sampled_from(["*", "*", "*", "1-10", "4,5,8,25,29", "*/2"]))
        dow = draw(st.sampled_from(["*", "*", "0", "7", "SUN", "0L", "SUN#1", "0#2", "6-7"]))
        month = "*"
    else:
        hour = draw(_time_field(0, 23, [0, 1, 2, 3]))
        dom, month, dow = draw(DOM), draw(MONTH), draw(DOW)
    fields = [minute.text, hour.text, dom, month, dow]
    expr = " ".join([second.text, *fields] if six else fields)

    per_day = len(second.values) * len(minute.values) * len(hour.values)
    longest = min(LONGEST_WINDOW_S, max(60, TARGET_OCCURRENCES * 86_400 // per_day))
    # mostly at least a day (when the expression allows), so that restricted hours are met
    shortest = 1 if draw(st.integers(0, 4)) == 0 else min(longest, 86_400)
    length_ms = draw(st.integers(shortest * 1_000, longest * 1_000))
    if focused or draw(st.integers(0, 4)):
        anchor = draw(st.sampled_from(TRANSITIONS.get(zone, ALL_TRANSITIONS)))
        jitter_s = 3_600 if focused else 3 * 3_600
        anchor += draw(st.integers(-jitter_s, jitter_s)) * 1000
        start = anchor - draw(st.integers(0, length_ms))
    else:
        start = draw(st.integers(ms("2025-01-01T00:00:00Z"), ms("2028-12-31T00:00:00Z")))
    if draw(st.booleans()):
        start -= start % 1000  # whole seconds half of the time
    return expr, zone, start, start + length_ms


def product_occurrences(expr: str, zone: str, start_ms: int, end_ms: int) -> list[int]:
    schedule = CronSchedule.parse(expr, zone)
    found: list[int] = []
    try:
        at = schedule.first_at_or_after(start_ms)
        while at <= end_ms:
            found.append(at)
            at = schedule.next_after(at)
    except InvalidSchedule:  # "has no further occurrence"
        pass
    return found


def assert_same_as_product(expr: str, zone: str, start_ms: int, end_ms: int) -> None:
    try:
        CronSchedule.parse(expr, zone)
    except InvalidSchedule:
        assume(False)  # the grammar can produce what the scheduler refuses
    ours = nominal_occurrences(expr, zone, start_ms, end_ms)
    theirs = product_occurrences(expr, zone, start_ms, end_ms)
    assert [iso(t) for t in ours] == [iso(t) for t in theirs], (
        f"{expr!r} in {zone} over [{iso(start_ms)}, {iso(end_ms)}]"
    )
    assert is_wall_clock(expr) is product_is_wall_clock(" ".join(expr.upper().split()))


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
# Found by this property: croniter read the 31-entry list ``L,1,3/1`` as ``*`` and matched
# the 2nd of January, which the list does not name.
@example(("* * L,1,3/1 * *", "UTC", 1_735_775_999_000, 1_735_776_000_000))
def test_same_occurrences_as_the_scheduler(case: tuple[str, str, int, int]) -> None:
    assert_same_as_product(*case)


# L standing in a list with other days (docs/reference/cron.md), from calendar facts: 2028
# is a leap year (February has 29 days); 2028-04-29 and -30 are a Saturday and a Sunday.
L_LIST_CASES = [
    ("0 0 L,15 2 *", ["2028-02-15T00:00:00Z", "2028-02-29T00:00:00Z"]),
    ("0 0 29,L 2 *", ["2028-02-29T00:00:00Z"]),  # the 29th is the last day: once
    ("0 0 L,30 4 *", ["2028-04-30T00:00:00Z"]),
    ("0 0 L,LW 4 *", ["2028-04-28T00:00:00Z", "2028-04-30T00:00:00Z"]),
    ("0 0 1,L 1,2 *", ["2028-01-01T00:00:00Z", "2028-01-31T00:00:00Z",
                       "2028-02-01T00:00:00Z", "2028-02-29T00:00:00Z"]),
    ("0 0 L,1-3/2 2 *", ["2028-02-01T00:00:00Z", "2028-02-03T00:00:00Z",
                         "2028-02-29T00:00:00Z"]),
]


@pytest.mark.parametrize(("expr", "expected"), L_LIST_CASES)
def test_l_in_a_list_of_days(expr: str, expected: list[str]) -> None:
    start, end = "2028-01-01T00:00:00Z", "2028-04-30T23:59:59Z"
    assert expand(expr, "UTC", start, end) == expected
    assert [iso(t) for t in product_occurrences(expr, "UTC", ms(start), ms(end))] == expected


@pytest.mark.parametrize("expr", ["* * L,1,3/1 * *", "* * 1,3-31,L * *", "0 0 L,1,3-31 * *"])
def test_a_day_list_with_l_is_not_read_as_every_day(expr: str) -> None:
    # The list names the 1st, the 3rd to the 31st and the last day: never the 2nd.
    found = expand(expr, "UTC", "2025-01-02T00:00:00Z", "2025-01-03T00:00:00Z")
    assert found[0] == "2025-01-03T00:00:00Z"
    assert not [at for at in found if at.startswith("2025-01-02")]
