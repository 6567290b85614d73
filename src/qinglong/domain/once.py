"""The ``qinglong/once@v1`` schedule: a single instant, and nothing after it.

Its only occurrence is ``at`` (a whole second, UTC); ``next_after`` of any instant at or after
it is None, so once the scheduler has decided that occurrence (run it, or dropped it by the
misfire policy) the trigger is done: its schedule row keeps the finished cursor
(``domain/occurrences.py``) and is never due again. A new revision (a new ``at``, or
disabling and enabling it) starts a new schedule, like for every trigger: it fires if its
instant is at or after the new revision's publish time. The time zone is only how the
instant is shown.

Stored as the canonical text ``at 2026-12-24T10:00:00Z``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from qinglong.domain.cron import DstNote, Occurrence
from qinglong.domain.occurrences import (
    check_instant,
    instant_text,
    parse_instant,
    stored_schedule,
)
from qinglong.domain.timezones import canonical_timezone, zone_info
from qinglong.errors import InvalidSchedule

KIND = "once"

_TEXT = re.compile(r"at\s+(\S+)")


def _parse_text(text: str) -> int:
    match = _TEXT.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise InvalidSchedule("at", f"{text!r} is not 'at TIME'")
    return parse_instant(match.group(1), "at")


@dataclass(frozen=True, slots=True)
class OnceSchedule:
    """One occurrence at ``at_ms``; ``timezone`` is how it is shown."""

    at_ms: int
    timezone: str

    def __post_init__(self) -> None:
        check_instant(self.at_ms, "at")

    kind = KIND

    @classmethod
    def parse(cls, at_ms: int, timezone: str) -> OnceSchedule:
        return cls(at_ms, canonical_timezone(timezone))

    @classmethod
    def from_text(cls, text: str, timezone: str) -> OnceSchedule:
        """``at TIME``: RFC 3339 with an offset, or epoch milliseconds."""
        return cls.parse(_parse_text(text), timezone)

    @classmethod
    def stored(cls, text: str, timezone: str) -> OnceSchedule:
        """Read back from a digest-verified revision: the canonical text only."""
        return stored_schedule("at", text, timezone, lambda: _parse_text(text),
                               lambda at_ms: cls(at_ms, timezone))

    @property
    def expression(self) -> str:
        return f"at {instant_text(self.at_ms)}"

    def next_after(self, after_ms: int) -> int | None:
        return self.at_ms if after_ms < self.at_ms else None

    def first_at_or_after(self, at_ms: int) -> int | None:
        return self.next_after(at_ms - 1)

    def iter_after(self, after_ms: int) -> Iterator[int]:
        if after_ms < self.at_ms:
            yield self.at_ms

    def occurrences(self, after_ms: int, count: int) -> list[Occurrence]:
        if count < 1 or after_ms >= self.at_ms:
            return []
        wall = (datetime.fromtimestamp(self.at_ms // 1000, UTC)
                .astimezone(zone_info(self.timezone)).replace(tzinfo=None))
        return [Occurrence(self.at_ms, wall, DstNote.NONE)]
