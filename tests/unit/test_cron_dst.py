"""Cron occurrences at real DST transitions, day semantics and instant boundaries.

Every expected instant below is derived from calendar and tz facts, not from the code:

* America/New_York: EST is UTC-5, EDT is UTC-4. 2026-03-08 02:00 EST -> 03:00 EDT
  (transition at 07:00Z); 2026-11-01 02:00 EDT -> 01:00 EST (transition at 06:00Z, so
  01:00-01:59 local happens at 05:00-05:59Z and again at 06:00-06:59Z).
* Europe/Berlin: CET is UTC+1, CEST is UTC+2. 2026-03-29 02:00 CET -> 03:00 CEST
  (transition at 01:00Z); 2026-10-25 03:00 CEST -> 02:00 CET (transition at 01:00Z, so
  02:00-02:59 local happens at 00:00-00:59Z and again at 01:00-01:59Z).
* Australia/Lord_Howe shifts by 30 minutes: LHST is UTC+10:30, LHDT is UTC+11.
  2026-04-05 02:00 LHDT -> 01:30 LHST (transition at 2026-04-04T15:00Z, so 01:30-01:59 local
  happens at 14:30-14:59Z and again at 15:00-15:29Z); 2026-10-04 02:00 LHST -> 02:30 LHDT
  (transition at 2026-10-03T15:30Z; 02:00-02:29 local does not exist).
* Asia/Shanghai is UTC+8 all year; UTC has no offset.
* 2026-01-01 is a Thursday; 2026 is not a leap year, 2028 is.
"""

from __future__ import annotations

import calendar
import functools
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from qinglong.domain.cron import CronSchedule, DstNote, is_wall_clock

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
GAP = DstNote.GAP_SHIFTED.value
FIRST = DstNote.OVERLAP_FIRST.value
SECOND = DstNote.OVERLAP_SECOND.value


def ms(text: str) -> int:
    """``2026-03-08T07:00:00Z`` (optionally with .fff) -> UTC epoch milliseconds."""
    moment = datetime.fromisoformat(text)
    return (moment - EPOCH) // timedelta(milliseconds=1)


def iso(epoch_ms: int) -> str:
    """UTC epoch milliseconds -> ``2026-03-08T07:00:00Z`` (``.fff`` shown when not whole)."""
    moment = EPOCH + timedelta(milliseconds=epoch_ms)
    if epoch_ms % 1000:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def occurrences(expr: str, zone: str, after: str, count: int) -> list[tuple[str, str, str]]:
    schedule = CronSchedule.parse(expr, zone)
    return [
        (iso(o.at_ms), o.wall.isoformat(), o.note.value)
        for o in schedule.occurrences(ms(after), count)
    ]


# --- occurrences at the transitions ----------------------------------------------------
# (zone, expression, after (exclusive), [(utc instant, local wall time matched, note)])

NY = "America/New_York"
BER = "Europe/Berlin"
LHI = "Australia/Lord_Howe"
SHA = "Asia/Shanghai"

DST_CASES = [
    # -- New York, spring forward 2026-03-08 (02:00-02:59 local does not exist) --
    (NY, "30 2 * * *", "2026-03-07T00:00:00Z", [
        ("2026-03-07T07:30:00Z", "2026-03-07T02:30:00", ""),  # 02:30 EST
        ("2026-03-08T07:00:00Z", "2026-03-08T02:30:00", GAP),  # end of the gap = 03:00 EDT
        ("2026-03-09T06:30:00Z", "2026-03-09T02:30:00", ""),  # 02:30 EDT
    ]),
    (NY, "0 30 2 * * *", "2026-03-07T00:00:00Z", [
        ("2026-03-07T07:30:00Z", "2026-03-07T02:30:00", ""),
        ("2026-03-08T07:00:00Z", "2026-03-08T02:30:00", GAP),
        ("2026-03-09T06:30:00Z", "2026-03-09T02:30:00", ""),
    ]),
    # 02:00 and 02:30 both fall in the gap: both map to 07:00Z, which is one instant.
    (NY, "0,30 2 * * *", "2026-03-08T05:00:00Z", [
        ("2026-03-08T07:00:00Z", "2026-03-08T02:00:00", GAP),
        ("2026-03-09T06:00:00Z", "2026-03-09T02:00:00", ""),
        ("2026-03-09T06:30:00Z", "2026-03-09T02:30:00", ""),
    ]),
    (NY, "59 59 2 * * *", "2026-03-08T06:00:00Z", [
        ("2026-03-08T07:00:00Z", "2026-03-08T02:59:59", GAP),
        ("2026-03-09T06:59:59Z", "2026-03-09T02:59:59", ""),
    ]),
    (NY, "30 2 * * SUN", "2026-03-01T00:00:00Z", [
        ("2026-03-01T07:30:00Z", "2026-03-01T02:30:00", ""),
        ("2026-03-08T07:00:00Z", "2026-03-08T02:30:00", GAP),
        ("2026-03-15T06:30:00Z", "2026-03-15T02:30:00", ""),
    ]),
    (NY, "30 1 * * *", "2026-03-08T00:00:00Z", [
        ("2026-03-08T06:30:00Z", "2026-03-08T01:30:00", ""),  # 01:30 EST
        ("2026-03-09T05:30:00Z", "2026-03-09T01:30:00", ""),  # 01:30 EDT
    ]),
    (NY, "0 3 * * *", "2026-03-08T00:00:00Z", [
        ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00", ""),  # 03:00 EDT exists: no note
        ("2026-03-09T07:00:00Z", "2026-03-09T03:00:00", ""),
    ]),
    (NY, "0 * * * *", "2026-03-08T05:00:00Z", [
        ("2026-03-08T06:00:00Z", "2026-03-08T01:00:00", ""),
        ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00", ""),  # no 02:00
        ("2026-03-08T08:00:00Z", "2026-03-08T04:00:00", ""),
    ]),
    (NY, "*/30 * * * *", "2026-03-08T06:00:00Z", [
        ("2026-03-08T06:30:00Z", "2026-03-08T01:30:00", ""),
        ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00", ""),
        ("2026-03-08T07:30:00Z", "2026-03-08T03:30:00", ""),
    ]),
    (NY, "* * * * * *", "2026-03-08T06:59:58Z", [
        ("2026-03-08T06:59:59Z", "2026-03-08T01:59:59", ""),
        ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00", ""),
        ("2026-03-08T07:00:01Z", "2026-03-08T03:00:01", ""),
    ]),
    (NY, "*/15 * * * * *", "2026-03-08T06:59:30Z", [
        ("2026-03-08T06:59:45Z", "2026-03-08T01:59:45", ""),
        ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00", ""),
        ("2026-03-08T07:00:15Z", "2026-03-08T03:00:15", ""),
    ]),
    # Interval expressions whose hour is fixed: wall times in the gap never occur.
    (NY, "*/30 2 * * *", "2026-03-07T07:15:00Z", [
        ("2026-03-07T07:30:00Z", "2026-03-07T02:30:00", ""),
        ("2026-03-09T06:00:00Z", "2026-03-09T02:00:00", ""),
        ("2026-03-09T06:30:00Z", "2026-03-09T02:30:00", ""),
    ]),
    # Seconds starting with '*' make it an interval expression although minute/hour are fixed.
    (NY, "* 30 2 * * *", "2026-03-08T05:00:00Z", [
        ("2026-03-09T06:30:00Z", "2026-03-09T02:30:00", ""),
        ("2026-03-09T06:30:01Z", "2026-03-09T02:30:01", ""),
    ]),
    # -- New York, fall back 2026-11-01 (01:00-01:59 local happens twice) --
    (NY, "30 1 * * *", "2026-10-31T00:00:00Z", [
        ("2026-10-31T05:30:00Z", "2026-10-31T01:30:00", ""),  # 01:30 EDT
        ("2026-11-01T05:30:00Z", "2026-11-01T01:30:00", FIRST),  # first 01:30 only
        ("2026-11-02T06:30:00Z", "2026-11-02T01:30:00", ""),  # 01:30 EST
    ]),
    (NY, "0 30 1 * * *", "2026-10-31T00:00:00Z", [
        ("2026-10-31T05:30:00Z", "2026-10-31T01:30:00", ""),
        ("2026-11-01T05:30:00Z", "2026-11-01T01:30:00", FIRST),
        ("2026-11-02T06:30:00Z", "2026-11-02T01:30:00", ""),
    ]),
    (NY, "0,30 1 * * *", "2026-11-01T04:00:00Z", [
        ("2026-11-01T05:00:00Z", "2026-11-01T01:00:00", FIRST),
        ("2026-11-01T05:30:00Z", "2026-11-01T01:30:00", FIRST),
        ("2026-11-02T06:00:00Z", "2026-11-02T01:00:00", ""),
        ("2026-11-02T06:30:00Z", "2026-11-02T01:30:00", ""),
    ]),
    # Observed during the second 01:xx: the repeated 01:30 (06:30Z) must not fire again.
    (NY, "30 1 * * *", "2026-11-01T06:10:00Z", [
        ("2026-11-02T06:30:00Z", "2026-11-02T01:30:00", ""),
    ]),
    (NY, "30 2 * * *", "2026-11-01T04:00:00Z", [
        ("2026-11-01T07:30:00Z", "2026-11-01T02:30:00", ""),  # 02:30 EST, once
        ("2026-11-02T07:30:00Z", "2026-11-02T02:30:00", ""),
    ]),
    (NY, "0 * * * *", "2026-11-01T04:00:00Z", [
        ("2026-11-01T05:00:00Z", "2026-11-01T01:00:00", FIRST),
        ("2026-11-01T06:00:00Z", "2026-11-01T01:00:00", SECOND),
        ("2026-11-01T07:00:00Z", "2026-11-01T02:00:00", ""),
    ]),
    (NY, "0 * * * *", "2026-11-01T06:00:00Z", [
        ("2026-11-01T07:00:00Z", "2026-11-01T02:00:00", ""),
    ]),
    (NY, "*/30 * * * *", "2026-11-01T05:00:00Z", [
        ("2026-11-01T05:30:00Z", "2026-11-01T01:30:00", FIRST),
        ("2026-11-01T06:00:00Z", "2026-11-01T01:00:00", SECOND),
        ("2026-11-01T06:30:00Z", "2026-11-01T01:30:00", SECOND),
        ("2026-11-01T07:00:00Z", "2026-11-01T02:00:00", ""),
    ]),
    (NY, "*/30 1 * * *", "2026-11-01T04:00:00Z", [
        ("2026-11-01T05:00:00Z", "2026-11-01T01:00:00", FIRST),
        ("2026-11-01T05:30:00Z", "2026-11-01T01:30:00", FIRST),
        ("2026-11-01T06:00:00Z", "2026-11-01T01:00:00", SECOND),
        ("2026-11-01T06:30:00Z", "2026-11-01T01:30:00", SECOND),
        ("2026-11-02T06:00:00Z", "2026-11-02T01:00:00", ""),
    ]),
    (NY, "* * * * * *", "2026-11-01T05:59:58Z", [
        ("2026-11-01T05:59:59Z", "2026-11-01T01:59:59", FIRST),
        ("2026-11-01T06:00:00Z", "2026-11-01T01:00:00", SECOND),
        ("2026-11-01T06:00:01Z", "2026-11-01T01:00:01", SECOND),
    ]),
    (NY, "*/15 * * * * *", "2026-11-01T05:59:30Z", [
        ("2026-11-01T05:59:45Z", "2026-11-01T01:59:45", FIRST),
        ("2026-11-01T06:00:00Z", "2026-11-01T01:00:00", SECOND),
        ("2026-11-01T06:00:15Z", "2026-11-01T01:00:15", SECOND),
    ]),
    # -- Berlin, spring forward 2026-03-29 (02:00-02:59 local does not exist) --
    (BER, "30 2 * * *", "2026-03-28T00:00:00Z", [
        ("2026-03-28T01:30:00Z", "2026-03-28T02:30:00", ""),  # 02:30 CET
        ("2026-03-29T01:00:00Z", "2026-03-29T02:30:00", GAP),  # 03:00 CEST
        ("2026-03-30T00:30:00Z", "2026-03-30T02:30:00", ""),  # 02:30 CEST
    ]),
    (BER, "0 0 2 * * *", "2026-03-29T00:00:00Z", [
        ("2026-03-29T01:00:00Z", "2026-03-29T02:00:00", GAP),
        ("2026-03-30T00:00:00Z", "2026-03-30T02:00:00", ""),
    ]),
    (BER, "0 * * * *", "2026-03-28T23:00:00Z", [
        ("2026-03-29T00:00:00Z", "2026-03-29T01:00:00", ""),
        ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00", ""),
        ("2026-03-29T02:00:00Z", "2026-03-29T04:00:00", ""),
    ]),
    (BER, "*/30 * * * *", "2026-03-29T00:00:00Z", [
        ("2026-03-29T00:30:00Z", "2026-03-29T01:30:00", ""),
        ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00", ""),
        ("2026-03-29T01:30:00Z", "2026-03-29T03:30:00", ""),
    ]),
    (BER, "* * * * * *", "2026-03-29T00:59:58Z", [
        ("2026-03-29T00:59:59Z", "2026-03-29T01:59:59", ""),
        ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00", ""),
    ]),
    (BER, "*/15 * * * * *", "2026-03-29T00:59:30Z", [
        ("2026-03-29T00:59:45Z", "2026-03-29T01:59:45", ""),
        ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00", ""),
        ("2026-03-29T01:00:15Z", "2026-03-29T03:00:15", ""),
    ]),
    # -- Berlin, fall back 2026-10-25 (02:00-02:59 local happens twice) --
    (BER, "30 2 * * *", "2026-10-24T00:00:00Z", [
        ("2026-10-24T00:30:00Z", "2026-10-24T02:30:00", ""),  # 02:30 CEST
        ("2026-10-25T00:30:00Z", "2026-10-25T02:30:00", FIRST),  # first 02:30 only
        ("2026-10-26T01:30:00Z", "2026-10-26T02:30:00", ""),  # 02:30 CET
    ]),
    (BER, "0 30 2 * * *", "2026-10-24T00:00:00Z", [
        ("2026-10-24T00:30:00Z", "2026-10-24T02:30:00", ""),
        ("2026-10-25T00:30:00Z", "2026-10-25T02:30:00", FIRST),
        ("2026-10-26T01:30:00Z", "2026-10-26T02:30:00", ""),
    ]),
    (BER, "30 1 * * *", "2026-10-24T22:00:00Z", [
        ("2026-10-24T23:30:00Z", "2026-10-25T01:30:00", ""),  # 01:30 CEST, not repeated
        ("2026-10-26T00:30:00Z", "2026-10-26T01:30:00", ""),  # 01:30 CET
    ]),
    (BER, "0 * * * *", "2026-10-24T23:00:00Z", [
        ("2026-10-25T00:00:00Z", "2026-10-25T02:00:00", FIRST),
        ("2026-10-25T01:00:00Z", "2026-10-25T02:00:00", SECOND),
        ("2026-10-25T02:00:00Z", "2026-10-25T03:00:00", ""),
    ]),
    (BER, "*/30 * * * *", "2026-10-25T00:00:00Z", [
        ("2026-10-25T00:30:00Z", "2026-10-25T02:30:00", FIRST),
        ("2026-10-25T01:00:00Z", "2026-10-25T02:00:00", SECOND),
        ("2026-10-25T01:30:00Z", "2026-10-25T02:30:00", SECOND),
        ("2026-10-25T02:00:00Z", "2026-10-25T03:00:00", ""),
    ]),
    (BER, "* * * * * *", "2026-10-25T00:59:58Z", [
        ("2026-10-25T00:59:59Z", "2026-10-25T02:59:59", FIRST),
        ("2026-10-25T01:00:00Z", "2026-10-25T02:00:00", SECOND),
    ]),
    (BER, "*/15 * * * * *", "2026-10-25T00:59:30Z", [
        ("2026-10-25T00:59:45Z", "2026-10-25T02:59:45", FIRST),
        ("2026-10-25T01:00:00Z", "2026-10-25T02:00:00", SECOND),
        ("2026-10-25T01:00:15Z", "2026-10-25T02:00:15", SECOND),
    ]),
    # -- Lord Howe (30-minute shift), cases the implementation handles --
    (LHI, "15 2 * * *", "2026-10-03T12:00:00Z", [
        ("2026-10-03T15:30:00Z", "2026-10-04T02:15:00", GAP),  # 02:30 LHDT
        ("2026-10-04T15:15:00Z", "2026-10-05T02:15:00", ""),  # 02:15 LHDT
    ]),
    (LHI, "45 1 * * *", "2026-04-04T12:00:00Z", [
        ("2026-04-04T14:45:00Z", "2026-04-05T01:45:00", FIRST),  # 01:45 LHDT only
        ("2026-04-05T15:15:00Z", "2026-04-06T01:45:00", ""),  # 01:45 LHST
    ]),
    (LHI, "0 * * * *", "2026-04-04T13:00:00Z", [
        ("2026-04-04T14:00:00Z", "2026-04-05T01:00:00", ""),  # not repeated
        ("2026-04-04T15:30:00Z", "2026-04-05T02:00:00", ""),  # 02:00 LHST
        ("2026-04-04T16:30:00Z", "2026-04-05T03:00:00", ""),
    ]),
    # -- controls without DST --
    ("UTC", "30 2 * * *", "2026-03-08T00:00:00Z", [
        ("2026-03-08T02:30:00Z", "2026-03-08T02:30:00", ""),
        ("2026-03-09T02:30:00Z", "2026-03-09T02:30:00", ""),
    ]),
    ("UTC", "0 * * * *", "2026-11-01T04:30:00Z", [
        ("2026-11-01T05:00:00Z", "2026-11-01T05:00:00", ""),
        ("2026-11-01T06:00:00Z", "2026-11-01T06:00:00", ""),
        ("2026-11-01T07:00:00Z", "2026-11-01T07:00:00", ""),
    ]),
    ("UTC", "*/15 * * * * *", "2026-03-29T00:59:30Z", [
        ("2026-03-29T00:59:45Z", "2026-03-29T00:59:45", ""),
        ("2026-03-29T01:00:00Z", "2026-03-29T01:00:00", ""),
        ("2026-03-29T01:00:15Z", "2026-03-29T01:00:15", ""),
    ]),
    (SHA, "30 2 * * *", "2026-03-07T12:00:00Z", [
        ("2026-03-07T18:30:00Z", "2026-03-08T02:30:00", ""),
        ("2026-03-08T18:30:00Z", "2026-03-09T02:30:00", ""),
    ]),
    (SHA, "30 1 * * *", "2026-10-31T12:00:00Z", [
        ("2026-10-31T17:30:00Z", "2026-11-01T01:30:00", ""),
        ("2026-11-01T17:30:00Z", "2026-11-02T01:30:00", ""),
    ]),
    (SHA, "0 * * * *", "2026-11-01T05:30:00Z", [
        ("2026-11-01T06:00:00Z", "2026-11-01T14:00:00", ""),
        ("2026-11-01T07:00:00Z", "2026-11-01T15:00:00", ""),
    ]),
]


def _case_id(case: tuple[str, str, str, list[tuple[str, str, str]]]) -> str:
    zone, expr, after, _ = case
    return f"{zone.split('/')[-1]}|{expr}|after {after}"


@pytest.mark.parametrize(
    ("zone", "expr", "after", "expected"), DST_CASES, ids=[_case_id(c) for c in DST_CASES]
)
def test_occurrences_at_dst_transitions(
    zone: str, expr: str, after: str, expected: list[tuple[str, str, str]]
) -> None:
    assert occurrences(expr, zone, after, len(expected)) == expected
    # next_after agrees with the first element of occurrences().
    assert iso(CronSchedule.parse(expr, zone).next_after(ms(after))) == expected[0][0]


# Interval expressions in a zone with a 30-minute shift. The documented rule is "fires at each
# real instant whose local time matches"; the implementation relies on cronsim's aware-time
# stepping, which moves in whole hours and jumps over the half hour that the transition
# repeats or removes.
LORD_HOWE_INTERVAL_CASES = [
    # 01:30 happens at 14:30Z (LHDT) and again at 15:00Z (LHST).
    ("30 * * * *", "2026-04-04T14:00:00Z", [
        ("2026-04-04T14:30:00Z", "2026-04-05T01:30:00", FIRST),
        ("2026-04-04T15:00:00Z", "2026-04-05T01:30:00", SECOND),
        ("2026-04-04T16:00:00Z", "2026-04-05T02:30:00", ""),
    ]),
    # 02:00 LHST is 15:30Z, right after the repeated half hour.
    ("* 2 * * *", "2026-04-04T15:00:00Z", [
        ("2026-04-04T15:30:00Z", "2026-04-05T02:00:00", ""),
        ("2026-04-04T15:31:00Z", "2026-04-05T02:01:00", ""),
    ]),
    # 03:00 LHDT is 16:00Z, half an hour after the gap.
    ("*/15 3 * * *", "2026-10-03T12:00:00Z", [
        ("2026-10-03T16:00:00Z", "2026-10-04T03:00:00", ""),
        ("2026-10-03T16:15:00Z", "2026-10-04T03:15:00", ""),
        ("2026-10-03T16:30:00Z", "2026-10-04T03:30:00", ""),
    ]),
]


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    LORD_HOWE_INTERVAL_CASES,
    ids=[f"{c[0]}|after {c[1]}" for c in LORD_HOWE_INTERVAL_CASES],
)
def test_lord_howe_interval_expressions_fire_at_every_matching_instant(
    expr: str, after: str, expected: list[tuple[str, str, str]]
) -> None:
    assert occurrences(expr, LHI, after, len(expected)) == expected


# --- wall-clock versus interval classification --------------------------------------------

CLASSIFICATION = [
    ("30 2 * * *", True),
    ("0 30 2 * * *", True),
    ("0,30 2 * * *", True),
    ("30 1 * * *", True),
    ("15 9-17 * * MON-FRI", True),
    ("0-59 2 * * *", True),  # by the documented definition: no field starts with '*'
    ("* * * * *", False),
    ("*/5 * * * *", False),
    ("0 * * * *", False),
    ("*/30 * * * *", False),
    ("30 */2 * * *", False),
    ("* * * * * *", False),
    ("*/15 * * * * *", False),
    ("* 30 2 * * *", False),  # 6 fields: the seconds field counts
    ("0 * 2 * * *", False),
]


@pytest.mark.parametrize(
    ("expr", "wall_clock"), CLASSIFICATION, ids=[c[0] for c in CLASSIFICATION]
)
def test_wall_clock_classification(expr: str, wall_clock: bool) -> None:
    assert is_wall_clock(expr) is wall_clock


# --- 5 fields and 6 fields agree ----------------------------------------------------------

FIVE_SIX = [
    ("30 2 * * *", "0 30 2 * * *"),
    ("0,30 1 * * *", "0 0,30 1 * * *"),
    ("15 9-17 * * MON-FRI", "0 15 9-17 * * MON-FRI"),
    ("0 3 * * SUN", "0 0 3 * * SUN"),
    ("0 * * * *", "0 0 * * * *"),
    ("*/30 * * * *", "0 */30 * * * *"),
]
ZONE_STARTS = [
    (NY, "2026-03-06T00:00:00Z"),
    (NY, "2026-10-30T00:00:00Z"),
    (BER, "2026-03-27T00:00:00Z"),
    (BER, "2026-10-23T00:00:00Z"),
    (LHI, "2026-04-03T00:00:00Z"),
    (LHI, "2026-10-02T00:00:00Z"),
    ("UTC", "2026-03-06T00:00:00Z"),
    (SHA, "2026-10-30T00:00:00Z"),
]


@pytest.mark.parametrize(("five", "six"), FIVE_SIX, ids=[f"{a}|{b}" for a, b in FIVE_SIX])
@pytest.mark.parametrize(
    ("zone", "start"), ZONE_STARTS, ids=[f"{z.split('/')[-1]}@{s[:10]}" for z, s in ZONE_STARTS]
)
def test_five_and_six_field_forms_agree(zone: str, start: str, five: str, six: str) -> None:
    a = CronSchedule.parse(five, zone).occurrences(ms(start), 60)
    b = CronSchedule.parse(six, zone).occurrences(ms(start), 60)
    assert a == b
    assert is_wall_clock(five) == is_wall_clock(six)


# --- day-of-month / day-of-week, L, nL, #, names -------------------------------------------


def _midnights(*days: str) -> list[str]:
    return [f"{d}T00:00:00Z" for d in days]


DAY_CASES = [
    # OR: neither field starts with '*': every 13th and every Friday (Jan 13 is a Tuesday).
    ("0 0 13 * FRI", "2026-01-01T00:00:00Z", _midnights(
        "2026-01-02", "2026-01-09", "2026-01-13", "2026-01-16", "2026-01-23", "2026-01-30",
        "2026-02-06", "2026-02-13", "2026-02-20",
    )),
    ("0 0 13 * 5", "2026-01-01T00:00:00Z", _midnights(
        "2026-01-02", "2026-01-09", "2026-01-13", "2026-01-16",
    )),
    ("0 0 1,15 * MON", "2026-01-01T00:00:00Z", _midnights(
        "2026-01-05", "2026-01-12", "2026-01-15", "2026-01-19", "2026-01-26",
        "2026-02-01", "2026-02-02",
    )),
    # AND: day-of-month starts with '*': Mondays that are odd days of the month.
    ("0 0 */2 * MON", "2026-01-01T00:00:00Z", _midnights(
        "2026-01-05", "2026-01-19", "2026-02-09", "2026-02-23", "2026-03-09",
    )),
    # AND with day-of-week '*': only the 13th.
    ("0 0 13 * *", "2026-01-01T00:00:00Z", _midnights("2026-01-13", "2026-02-13", "2026-03-13")),
    ("0 0 * * FRI", "2026-01-01T00:00:00Z", _midnights(
        "2026-01-02", "2026-01-09", "2026-01-16", "2026-01-23", "2026-01-30",
    )),
    ("0 0 * * MON-FRI", "2026-01-01T00:00:00Z", _midnights(
        "2026-01-02", "2026-01-05", "2026-01-06", "2026-01-07", "2026-01-08", "2026-01-09",
        "2026-01-12",
    )),
    # Sunday is 0, 7 and SUN.
    ("0 0 * * SUN", "2026-01-01T00:00:00Z", _midnights("2026-01-04", "2026-01-11", "2026-01-18")),
    ("0 0 * * 0", "2026-01-01T00:00:00Z", _midnights("2026-01-04", "2026-01-11", "2026-01-18")),
    ("0 0 * * 7", "2026-01-01T00:00:00Z", _midnights("2026-01-04", "2026-01-11", "2026-01-18")),
    ("0 0 * * sun", "2026-01-01T00:00:00Z", _midnights("2026-01-04", "2026-01-11", "2026-01-18")),
    # L: last day of the month; February 2026 has 28 days, February 2028 has 29.
    ("0 0 L * *", "2026-01-01T00:00:00Z", _midnights(
        "2026-01-31", "2026-02-28", "2026-03-31", "2026-04-30",
    )),
    ("0 0 L 2 *", "2027-01-01T00:00:00Z", _midnights("2027-02-28", "2028-02-29", "2029-02-28")),
    # LW: last weekday (Jan 31 2026 is a Saturday, Feb 28 a Saturday, Mar 31 a Tuesday).
    ("0 0 LW * *", "2026-01-01T00:00:00Z", _midnights("2026-01-30", "2026-02-27", "2026-03-31")),
    # nL: last Friday of the month.
    ("0 0 * * 5L", "2026-01-01T00:00:00Z", _midnights(
        "2026-01-30", "2026-02-27", "2026-03-27", "2026-04-24",
    )),
    # #: second Monday; fifth Monday (only months that have one).
    ("0 0 * * MON#2", "2026-01-01T00:00:00Z", _midnights(
        "2026-01-12", "2026-02-09", "2026-03-09", "2026-04-13",
    )),
    ("0 0 * * 1#5", "2026-01-01T00:00:00Z", _midnights("2026-03-30", "2026-06-29", "2026-08-31")),
    # Month and day names.
    ("0 9 * JAN MON", "2026-01-01T00:00:00Z", [
        "2026-01-05T09:00:00Z", "2026-01-12T09:00:00Z", "2026-01-19T09:00:00Z",
        "2026-01-26T09:00:00Z", "2027-01-04T09:00:00Z",
    ]),
    ("0 0 1 jan,jul *", "2026-01-01T00:00:00Z", _midnights("2026-07-01", "2027-01-01")),
    ("0 0 1 MAR-MAY *", "2026-01-01T00:00:00Z", _midnights(
        "2026-03-01", "2026-04-01", "2026-05-01", "2027-03-01",
    )),
]


@pytest.mark.parametrize(
    ("expr", "after", "expected"), DAY_CASES, ids=[c[0] for c in DAY_CASES]
)
def test_day_fields_in_utc(expr: str, after: str, expected: list[str]) -> None:
    schedule = CronSchedule.parse(expr, "UTC")
    got = [iso(o.at_ms) for o in schedule.occurrences(ms(after), len(expected))]
    assert got == expected


@pytest.mark.parametrize(
    ("zone", "expr", "after", "expected"),
    [
        # Monday 2026-01-05 01:00 in Shanghai is Sunday 17:00Z.
        (SHA, "0 1 * * MON", "2026-01-01T00:00:00Z", [
            "2026-01-04T17:00:00Z", "2026-01-11T17:00:00Z",
        ]),
        # The 13th at 23:30 in New York (EST) is the 14th at 04:30Z.
        (NY, "30 23 13 * *", "2026-01-01T00:00:00Z", [
            "2026-01-14T04:30:00Z", "2026-02-14T04:30:00Z",
        ]),
        # An interval expression with a day-of-week: every 30 minutes on Sundays in Berlin.
        (BER, "*/30 * * * SUN", "2026-01-03T22:00:00Z", [
            "2026-01-03T23:00:00Z", "2026-01-03T23:30:00Z", "2026-01-04T00:00:00Z",
        ]),
    ],
    ids=["shanghai-monday", "new-york-13th", "berlin-sunday-interval"],
)
def test_day_fields_use_the_local_date(
    zone: str, expr: str, after: str, expected: list[str]
) -> None:
    schedule = CronSchedule.parse(expr, zone)
    assert [iso(o.at_ms) for o in schedule.occurrences(ms(after), len(expected))] == expected


# --- strictly after versus at-or-after, with millisecond inputs --------------------------

BOUNDARY_CASES = [
    # UTC path
    ("UTC", "0 * * * *", "next_after", "2026-05-05T10:00:00.000Z", "2026-05-05T11:00:00Z"),
    ("UTC", "0 * * * *", "next_after", "2026-05-05T09:59:59.999Z", "2026-05-05T10:00:00Z"),
    ("UTC", "0 * * * *", "next_after", "2026-05-05T10:00:00.500Z", "2026-05-05T11:00:00Z"),
    ("UTC", "0 * * * *", "first_at_or_after", "2026-05-05T10:00:00.000Z", "2026-05-05T10:00:00Z"),
    ("UTC", "0 * * * *", "first_at_or_after", "2026-05-05T10:00:00.001Z", "2026-05-05T11:00:00Z"),
    ("UTC", "0 * * * *", "first_at_or_after", "2026-05-05T09:59:59.500Z", "2026-05-05T10:00:00Z"),
    ("UTC", "* * * * * *", "next_after", "2026-05-05T10:00:00.000Z", "2026-05-05T10:00:01Z"),
    ("UTC", "* * * * * *", "next_after", "2026-05-05T10:00:00.500Z", "2026-05-05T10:00:01Z"),
    ("UTC", "* * * * * *", "next_after", "2026-05-05T09:59:59.999Z", "2026-05-05T10:00:00Z"),
    ("UTC", "* * * * * *", "first_at_or_after", "2026-05-05T10:00:00.000Z", "2026-05-05T10:00:00Z"),
    ("UTC", "* * * * * *", "first_at_or_after", "2026-05-05T10:00:00.500Z", "2026-05-05T10:00:01Z"),
    # interval path in a zone with DST (14:00Z is 10:00 EDT)
    (NY, "*/10 * * * * *", "next_after", "2026-05-05T14:00:10.000Z", "2026-05-05T14:00:20Z"),
    (NY, "*/10 * * * * *", "next_after", "2026-05-05T14:00:09.500Z", "2026-05-05T14:00:10Z"),
    (NY, "*/10 * * * * *", "first_at_or_after", "2026-05-05T14:00:10.000Z", "2026-05-05T14:00:10Z"),
    (NY, "*/10 * * * * *", "first_at_or_after", "2026-05-05T14:00:10.500Z", "2026-05-05T14:00:20Z"),
    # wall-clock path (12:00 CEST is 10:00Z)
    (BER, "0 12 * * *", "next_after", "2026-05-05T10:00:00.000Z", "2026-05-06T10:00:00Z"),
    (BER, "0 12 * * *", "next_after", "2026-05-05T09:59:59.500Z", "2026-05-05T10:00:00Z"),
    (BER, "0 12 * * *", "first_at_or_after", "2026-05-05T10:00:00.000Z", "2026-05-05T10:00:00Z"),
    (BER, "0 12 * * *", "first_at_or_after", "2026-05-05T10:00:00.500Z", "2026-05-06T10:00:00Z"),
    # wall-clock path without DST (08:30 CST is 00:30Z)
    (SHA, "0 30 8 * * *", "first_at_or_after", "2026-05-05T00:30:00.000Z", "2026-05-05T00:30:00Z"),
    (SHA, "0 30 8 * * *", "next_after", "2026-05-05T00:29:59.999Z", "2026-05-05T00:30:00Z"),
    (SHA, "0 30 8 * * *", "next_after", "2026-05-05T00:30:00.000Z", "2026-05-06T00:30:00Z"),
    # a gap-shifted occurrence is an ordinary instant for these boundaries
    (NY, "30 2 * * *", "first_at_or_after", "2026-03-08T07:00:00.000Z", "2026-03-08T07:00:00Z"),
    (NY, "30 2 * * *", "next_after", "2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00Z"),
    (NY, "30 2 * * *", "next_after", "2026-03-08T06:59:59.500Z", "2026-03-08T07:00:00Z"),
]


@pytest.mark.parametrize(
    ("zone", "expr", "method", "at", "expected"),
    BOUNDARY_CASES,
    ids=[f"{c[0].split('/')[-1]}|{c[1]}|{c[2]}({c[3]})" for c in BOUNDARY_CASES],
)
def test_next_after_is_strict_and_first_at_or_after_is_inclusive(
    zone: str, expr: str, method: str, at: str, expected: str
) -> None:
    schedule = CronSchedule.parse(expr, zone)
    assert iso(getattr(schedule, method)(ms(at))) == expected


# --- property: occurrences are increasing whole seconds that match the fields ---------------

PROPERTY_ZONES = ["UTC", SHA, NY, BER, LHI]
MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


def _number(text: str, names: tuple[str, ...], base: int) -> int:
    if text in names:
        return names.index(text) + base
    return int(text)


def _values(field: str, lo: int, hi: int, names: tuple[str, ...] = (), base: int = 0) -> set[int]:
    """Our own reading of one plain cron field: lists, ranges, steps, '*', names."""
    result: set[int] = set()
    for part in field.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/")
            step = int(step_text)
        if part == "*":
            first, last = lo, hi
        elif "-" in part:
            a, b = part.split("-")
            first, last = _number(a, names, base), _number(b, names, base)
        else:
            first = _number(part, names, base)
            last = hi if step > 1 else first
        result.update(range(first, last + 1, step))
    return result


@functools.cache
def _matcher(expr: str) -> Callable[[datetime], bool]:
    """Compile ``expr`` with our own reading of the fields (independent of cronsim)."""
    fields = expr.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    sec, minute, hour, dom, month, dow = fields
    seconds, minutes, hours = _values(sec, 0, 59), _values(minute, 0, 59), _values(hour, 0, 23)
    months = _values(month, 1, 12, MONTH_NAMES, 1)
    day_and = dom.startswith("*") or dow.startswith("*")

    def dom_ok(day: date) -> bool:
        if dom == "L":
            return day.day == calendar.monthrange(day.year, day.month)[1]
        return day.day in _values(dom, 1, 31)

    def dow_ok(day: date) -> bool:
        cron_dow = (day.weekday() + 1) % 7  # Sunday = 0
        if dow.endswith("L"):  # nL: the last such weekday of the month
            last = calendar.monthrange(day.year, day.month)[1]
            return int(dow[:-1]) % 7 == cron_dow and day.day + 7 > last
        if "#" in dow:  # X#n: the n-th such weekday of the month
            name, nth = dow.split("#")
            return (
                _number(name, DAY_NAMES, 0) % 7 == cron_dow and (day.day - 1) // 7 + 1 == int(nth)
            )
        return cron_dow in {v % 7 for v in _values(dow, 0, 7, DAY_NAMES, 0)}

    def match(wall: datetime) -> bool:
        if wall.second not in seconds or wall.minute not in minutes or wall.hour not in hours:
            return False
        if wall.month not in months:
            return False
        day = wall.date()
        if day_and:
            return dom_ok(day) and dow_ok(day)
        return dom_ok(day) or dow_ok(day)

    return match


def matches(expr: str, wall: datetime) -> bool:
    return _matcher(expr)(wall)


def _exists(wall: datetime, tz: ZoneInfo) -> bool:
    aware = wall.replace(tzinfo=tz, fold=0)
    return aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall


def _ambiguous(wall: datetime, tz: ZoneInfo) -> bool:
    return _exists(wall, tz) and (
        wall.replace(tzinfo=tz, fold=0).utcoffset() != wall.replace(tzinfo=tz, fold=1).utcoffset()
    )


SECONDS = ["0", "30", "*/15", "*", "0,30", "10-20/5"]
MINUTES = ["0", "30", "*/15", "*", "0,30", "15-45/15", "59", "*/7"]
HOURS = ["*", "1", "2", "3", "1-3", "*/2", "0,2", "2-3", "9-17"]
DOMS = ["*", "*", "*", "1", "13", "1-15", "*/2", "L"]
MONTHS = ["*", "*", "3", "10,11", "MAR-NOV", "*/2"]
DOWS = ["*", "*", "*", "MON", "1-5", "SUN", "0", "7", "FRI", "5L", "MON#2"]

TRANSITIONS = {
    "UTC": [ms("2026-03-08T07:00:00Z")],
    SHA: [ms("2026-11-01T06:00:00Z")],
    NY: [ms("2026-03-08T07:00:00Z"), ms("2026-11-01T06:00:00Z")],
    BER: [ms("2026-03-29T01:00:00Z"), ms("2026-10-25T01:00:00Z")],
    LHI: [ms("2026-04-04T15:00:00Z"), ms("2026-10-03T15:30:00Z")],
}
YEAR_START, YEAR_END = ms("2026-01-01T00:00:00Z"), ms("2027-01-01T00:00:00Z") - 1
DAY_MS = 86_400_000


@st.composite
def expressions(draw: st.DrawFn) -> str:
    fields = [
        draw(st.sampled_from(MINUTES)),
        draw(st.sampled_from(HOURS)),
        draw(st.sampled_from(DOMS)),
        draw(st.sampled_from(MONTHS)),
        draw(st.sampled_from(DOWS)),
    ]
    if draw(st.booleans()):
        fields.insert(0, draw(st.sampled_from(SECONDS)))
    return " ".join(fields)


@st.composite
def zone_and_instant(draw: st.DrawFn) -> tuple[str, int]:
    zone = draw(st.sampled_from(PROPERTY_ZONES))
    if draw(st.booleans()):
        instant = draw(st.integers(YEAR_START, YEAR_END))
    else:  # near a transition, where the rules differ
        center = draw(st.sampled_from(TRANSITIONS[zone]))
        instant = center + draw(st.integers(-2 * DAY_MS, 2 * DAY_MS))
    return zone, instant


@settings(max_examples=300)
@given(expr=expressions(), zone_at=zone_and_instant())
def test_occurrences_are_increasing_whole_seconds_matching_the_fields(
    expr: str, zone_at: tuple[str, int]
) -> None:
    zone, after = zone_at
    tz = ZoneInfo(zone)
    wall_clock = is_wall_clock(expr)
    found = CronSchedule.parse(expr, zone).occurrences(after, 6)
    previous = after
    for occ in found:
        assert occ.at_ms % 1000 == 0, iso(occ.at_ms)
        assert occ.at_ms > previous, (iso(previous), iso(occ.at_ms))
        previous = occ.at_ms
        local = (EPOCH + timedelta(milliseconds=occ.at_ms)).astimezone(tz)
        naive = local.replace(tzinfo=None)
        if occ.note is DstNote.GAP_SHIFTED:
            # Only wall-clock expressions shift; the matched wall time does not exist and the
            # occurrence is the first instant after the gap that contains it.
            assert wall_clock
            assert matches(expr, occ.wall)
            assert not _exists(occ.wall, tz)
            before = (EPOCH + timedelta(milliseconds=occ.at_ms - 1000)).astimezone(tz)
            assert before.utcoffset() != local.utcoffset()
            assert before.replace(tzinfo=None) < occ.wall < naive
            continue
        assert matches(expr, naive), (expr, zone, naive.isoformat())
        assert occ.wall == naive
        if _ambiguous(naive, tz):
            expected_note = DstNote.OVERLAP_SECOND if local.fold else DstNote.OVERLAP_FIRST
            assert occ.note is expected_note
            if wall_clock:  # a repeated wall time fires only at its first instant
                assert local.fold == 0
        else:
            assert occ.note is DstNote.NONE


# --- property: the next occurrences equal a brute-force scan ------------------------------
# For expressions that fire at least once a day (day fields '*'), scan every UTC minute and
# apply the documented rules directly.

ORACLE_ZONES = ["UTC", SHA, NY, BER, LHI]


def brute_force(expr: str, zone: str, after_ms: int, count: int, horizon_days: int) -> list[int]:
    tz = ZoneInfo(zone)
    fields = expr.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    seconds = sorted(_values(fields[0], 0, 59))
    wall_clock = is_wall_clock(expr)
    found: set[int] = set()
    minute_s = (after_ms // 1000) // 60 * 60
    previous_offset = (EPOCH + timedelta(seconds=minute_s - 60)).astimezone(tz).utcoffset()
    assert previous_offset is not None
    for step in range(horizon_days * 1440):
        u = minute_s + 60 * step
        local = (EPOCH + timedelta(seconds=u)).astimezone(tz)
        offset = local.utcoffset()
        assert offset is not None
        naive = local.replace(tzinfo=None)
        if wall_clock and offset > previous_offset:
            # Spring forward at u: wall times in [naive - jump, naive) do not exist and fire at u.
            probe = naive - (offset - previous_offset)
            while probe < naive:
                if any(matches(expr, probe.replace(second=s)) for s in seconds):
                    found.add(u * 1000)
                    break
                probe += timedelta(minutes=1)
        if matches(expr, naive) and not (wall_clock and local.fold == 1):
            found.update((u + s) * 1000 for s in seconds)
        previous_offset = offset
        if sum(1 for x in found if x > after_ms) >= count:
            break  # later minutes only add later instants
    return sorted(x for x in found if x > after_ms)[:count]


@st.composite
def daily_expressions(draw: st.DrawFn) -> str:
    fields = [draw(st.sampled_from(MINUTES)), draw(st.sampled_from(HOURS)), "*", "*", "*"]
    if draw(st.booleans()):
        fields.insert(0, draw(st.sampled_from(SECONDS)))
    return " ".join(fields)


@settings(max_examples=150)
@given(
    expr=daily_expressions(),
    zone=st.sampled_from(ORACLE_ZONES),
    offset=st.integers(-36 * 3_600_000, 6 * 3_600_000),
    which=st.integers(0, 1),
)
def test_next_occurrences_match_a_brute_force_scan(
    expr: str, zone: str, offset: int, which: int
) -> None:
    centers = TRANSITIONS[zone]
    after = centers[which % len(centers)] + offset
    expected = brute_force(expr, zone, after, 3, horizon_days=4)
    assume(len(expected) == 3)
    got = [o.at_ms for o in CronSchedule.parse(expr, zone).occurrences(after, 3)]
    assert [iso(x) for x in got] == [iso(x) for x in expected]
