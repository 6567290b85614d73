"""The ``qinglong/interval@v1`` schedule: every N seconds from an anchor instant.

The occurrences are ``anchor + k * every`` for k = 0, 1, 2, ...: plain arithmetic on UTC
instants, so daylight saving time never moves, skips or doubles one (the time zone of the
trigger is only how its times are shown). The interval is a whole number of seconds from
``MIN_EVERY_S`` to ``MAX_EVERY_S``; the anchor is a whole second. A trigger fires at the
first occurrence at or after its revision's publish time, so an anchor in the past only
sets the phase (``every 1h from 2026-01-01T00:15:00Z`` runs at a quarter past every hour)
and an anchor in the future is the first run.

Stored as the canonical text ``every 1h30m from 2026-12-01T00:00:00Z`` (units d, h, m, s,
largest first, none repeated or zero; the anchor in UTC), which is also how lists show it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from qinglong.domain.cron import DstNote, Occurrence
from qinglong.domain.occurrences import (
    LAST_INSTANT_MS,
    check_instant,
    instant_text,
    parse_instant,
    stored_schedule,
)
from qinglong.domain.timezones import canonical_timezone, zone_info
from qinglong.errors import InvalidInput, InvalidSchedule

KIND = "interval"
MIN_EVERY_S = 1
MAX_EVERY_S = 366 * 86_400  # a (leap) year

_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
_DURATION = re.compile(r"(?:([0-9]{1,9})d)?(?:([0-9]{1,9})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,9})s)?")
_TEXT = re.compile(r"every\s+(\S+)(?:\s+from\s+(\S+))?")


def format_every(every_s: int) -> str:
    """``5400`` -> ``1h30m``; ``90`` -> ``1m30s``."""
    parts = []
    left = every_s
    for unit, size in _UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def parse_every(text: str, field: str = "every") -> int:
    """``90s``, ``1m30s``, ``5400s``, ``1h30m``, ``1d``: whole seconds within the bounds."""
    match = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None or not any(match.groups()):
        raise InvalidInput(field, f"{text!r} is not an interval; write whole units, largest "
                                  "first: 30s, 5m, 1h30m, 1d")
    seconds = sum(int(count) * size for count, (_, size) in zip(match.groups(), _UNITS, strict=True)
                  if count)
    return check_every(seconds, field)


def check_every(every_s: int, field: str = "every") -> int:
    if (isinstance(every_s, bool) or not isinstance(every_s, int)
            or not MIN_EVERY_S <= every_s <= MAX_EVERY_S):
        raise InvalidInput(field, f"must be from {MIN_EVERY_S}s to {format_every(MAX_EVERY_S)} "
                                  "(whole seconds)")
    return every_s


def _parse_text(text: str, default_anchor_ms: int | None) -> tuple[int, int]:
    match = _TEXT.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise InvalidSchedule("every", f"{text!r} is not 'every DURATION [from TIME]'")
    every_s = parse_every(match.group(1))
    if match.group(2) is not None:
        return every_s, parse_instant(match.group(2), "anchor")
    if default_anchor_ms is None:
        raise InvalidSchedule("anchor", "is required ('every DURATION from TIME')")
    return every_s, ceil_second(default_anchor_ms)


def ceil_second(ms: int) -> int:
    return -(-ms // 1000) * 1000


@dataclass(frozen=True, slots=True)
class IntervalSchedule:
    """Every ``every_s`` seconds from ``anchor_ms``; ``timezone`` is how its times are shown."""

    every_s: int
    anchor_ms: int
    timezone: str

    def __post_init__(self) -> None:
        check_every(self.every_s)
        check_instant(self.anchor_ms, "anchor")

    kind = KIND

    @classmethod
    def parse(cls, every_s: int, anchor_ms: int, timezone: str) -> IntervalSchedule:
        return cls(every_s, anchor_ms, canonical_timezone(timezone))

    @classmethod
    def from_text(cls, text: str, timezone: str, *, default_anchor_ms: int | None = None
                  ) -> IntervalSchedule:
        """``every 90s [from TIME]``: TIME is RFC 3339 with an offset or epoch ms; without it
        the anchor is ``default_anchor_ms`` (rounded up to a whole second)."""
        every_s, anchor_ms = _parse_text(text, default_anchor_ms)
        return cls.parse(every_s, anchor_ms, timezone)

    @classmethod
    def stored(cls, text: str, timezone: str) -> IntervalSchedule:
        """Read back from a digest-verified revision: the canonical text only."""
        return stored_schedule("every", text, timezone, lambda: _parse_text(text, None),
                               lambda parts: cls(*parts, timezone))

    @property
    def expression(self) -> str:
        return f"every {format_every(self.every_s)} from {instant_text(self.anchor_ms)}"

    @property
    def every_ms(self) -> int:
        return self.every_s * 1000

    def next_after(self, after_ms: int) -> int | None:
        if after_ms < self.anchor_ms:
            return self.anchor_ms
        steps = (after_ms - self.anchor_ms) // self.every_ms + 1
        at_ms = self.anchor_ms + steps * self.every_ms
        return at_ms if at_ms <= LAST_INSTANT_MS else None

    def first_at_or_after(self, at_ms: int) -> int | None:
        return self.next_after(at_ms - 1)

    def iter_after(self, after_ms: int) -> Iterator[int]:
        at_ms = self.next_after(after_ms)
        while at_ms is not None:
            yield at_ms
            at_ms = at_ms + self.every_ms if at_ms + self.every_ms <= LAST_INSTANT_MS else None

    def occurrences(self, after_ms: int, count: int) -> list[Occurrence]:
        """The next ``count`` occurrences after ``after_ms`` (fewer at the end of time), with
        their local wall times; daylight saving time never marks one."""
        zone = zone_info(self.timezone)
        found: list[Occurrence] = []
        for at_ms in self.iter_after(after_ms):
            if len(found) == count:
                break
            wall = datetime.fromtimestamp(at_ms // 1000, UTC).astimezone(zone).replace(tzinfo=None)
            found.append(Occurrence(at_ms, wall, DstNote.NONE))
        return found
