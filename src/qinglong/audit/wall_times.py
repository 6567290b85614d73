"""Local wall times and the instants they name, for the audit's cron expansion
(``audit/expansion.py``), written apart from the scheduler's DST mapping: both ``fold``
readings of a wall time are converted to UTC and an instant is kept only if converting it
back yields the same wall time, so a wall time in a spring-forward gap has no instant and
one in a fall-back overlap has two. Zone *data* is the scheduler's on purpose
(:func:`qinglong.domain.timezones.zone_info`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from qinglong.domain.timezones import zone_info

NAIVE_EPOCH = datetime(1970, 1, 1)
UTC_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_LONGEST_GAP = timedelta(days=2)  # the longest real gap is a day (Samoa, 2011-12-30)
_PROBE_STEP_S = 1_800
_MAX_PROBES = 50_000
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")


def zone(name: str) -> ZoneInfo:
    if not isinstance(name, str):
        raise TypeError("a time zone name must be a string")
    if not _ZONE_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not an IANA time zone name")
    try:
        return zone_info(name)
    except (ZoneInfoNotFoundError, OSError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def epoch_of(aware: datetime) -> int:
    return (aware - UTC_EPOCH) // SECOND


def _wall_at(epoch_s: int, tz: ZoneInfo) -> datetime:
    return (UTC_EPOCH + timedelta(seconds=epoch_s)).astimezone(tz).replace(tzinfo=None)


def _offset_at(epoch_s: int, tz: ZoneInfo) -> int:
    wall = _wall_at(epoch_s, tz)
    return (wall - NAIVE_EPOCH) // SECOND - epoch_s


def instants_of(wall: datetime, tz: ZoneInfo) -> tuple[int, ...]:
    """The epoch seconds whose local wall time is ``wall``, ascending: none in a gap, two in
    an overlap. Each fold reading is kept only if it round-trips to ``wall``."""
    readings = {epoch_of(wall.replace(tzinfo=tz, fold=fold)) for fold in (0, 1)}
    return tuple(at for at in sorted(readings) if _wall_at(at, tz) == wall)


def first_instant_after_gap(wall: datetime, tz: ZoneInfo) -> int:
    """For a wall time that does not exist: the instant of the first wall time after it that
    does (the end of the gap)."""
    probe = wall
    while True:
        probe += _MINUTE
        if probe - wall > _LONGEST_GAP:
            raise ValueError(f"no local time exists within 2 days after {wall.isoformat()}")
        if instants_of(probe, tz):
            break
    # probe exists and probe - 1 minute does not: the gap ends in (probe - 1 minute, probe].
    candidate = probe - _MINUTE + SECOND
    while not (instants := instants_of(candidate, tz)):
        candidate += SECOND
    return instants[0]


def offset_bounds(tz: ZoneInfo, first_s: int, last_s: int) -> tuple[int, int]:
    """The least and greatest UTC offset (seconds) in effect between the two instants."""
    step = max(_PROBE_STEP_S, (last_s - first_s) // _MAX_PROBES)
    offsets = {_offset_at(last_s, tz)}
    offsets.update(_offset_at(at, tz) for at in range(first_s, last_s, step))
    return min(offsets), max(offsets)


