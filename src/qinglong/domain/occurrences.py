"""What every kind of trigger schedule offers the scheduler, and how instants are written.

A schedule (``CronSchedule``, ``IntervalSchedule``, ``OnceSchedule``) is an
:class:`OccurrenceSource`: ``next_after(t)`` is its first occurrence strictly after ``t``, or
None when it has no further occurrence (a one-shot trigger after its instant). The decision
(``domain/decision.py``) needs nothing else. Occurrences are whole seconds, as UTC epoch
milliseconds, and never later than ``LAST_INSTANT_MS`` (the last second of the year 9999).

**No further occurrence.** A schedule row whose source has run out keeps the cursor
``DONE_CURSOR_MS``: the first instant of the year 10000, later than every occurrence any
schedule can have. It is not a placeholder for "unknown": the cursor always means "every
occurrence before it has been decided", and for an exhausted source that is every
occurrence. So the claim (``next_fire_at_ms <= now``) never reaches the row again, the
ledger and backfill judge every occurrence as decided, and the due-order index keeps such
rows at its far end, where a claim never scans. The value lives only in the schedule row
(and in the ``next_fire_at_ms`` of a misfire record that dropped the last occurrence): the
domain says None, and every view shows the trigger as done, never this instant.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from qinglong.domain.timezones import zone_info
from qinglong.errors import InvalidInput, InvalidSchedule

LAST_INSTANT_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z: no occurrence is later
DONE_CURSOR_MS = 253_402_300_800_000  # 10000-01-01T00:00:00Z: the cursor of a finished row


class OccurrenceSource(Protocol):
    """Occurrences, one after another: what the scheduling decision needs."""

    def next_after(self, after_ms: int) -> int | None:
        """The first occurrence strictly after ``after_ms``; None when there is none."""
        ...


class Schedule(OccurrenceSource, Protocol):
    """A trigger's schedule as the surfaces use it (preview, lists, ledger, backfill)."""

    @property
    def expression(self) -> str:
        """The canonical text of the schedule (a cron expression, ``every ...``, ``at ...``)."""
        ...

    @property
    def timezone(self) -> str: ...

    def first_at_or_after(self, at_ms: int) -> int | None: ...

    def iter_after(self, after_ms: int) -> Iterator[int]: ...


P = TypeVar("P")
S = TypeVar("S", bound=Schedule)


def stored_schedule(kind: str, text: str, timezone: str, parse: Callable[[], P],
                    make: Callable[[P], S]) -> S:
    """A schedule read back from a digest-verified revision: ``parse`` reads its text, ``make``
    builds it, and only its canonical text is accepted. A text or zone that cannot be
    computed, or a text not in canonical form, is InvalidSchedule (``kind``: every, at)."""
    try:
        parts = parse()
        zone_info(timezone)
    except (InvalidInput, LookupError, OSError, ValueError) as exc:
        why = f" ({exc})" if isinstance(exc, InvalidInput) else ""
        raise InvalidSchedule(kind, f"stored schedule {text!r} in {timezone!r} cannot be "
                                    f"computed{why}") from exc
    schedule = make(parts)
    if schedule.expression != text:
        raise InvalidSchedule(kind, f"stored schedule {text!r} is not in canonical form")
    return schedule


def cursor_for_storage(next_fire_at_ms: int | None) -> int:
    """The cursor a decision leaves, as the schedule row stores it (None: finished)."""
    return DONE_CURSOR_MS if next_fire_at_ms is None else next_fire_at_ms


def is_done_cursor(cursor_ms: int | None) -> bool:
    """Whether a stored cursor says the schedule has no further occurrence."""
    return cursor_ms is not None and cursor_ms >= DONE_CURSOR_MS


# -- instants as text ------------------------------------------------------------------------

_DIGITS = re.compile(r"[0-9]{1,16}")


def instant_text(ms: int) -> str:
    """A whole-second instant in canonical form: ``2026-12-24T10:00:00Z``."""
    return datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_instant(text: str, field: str) -> int:
    """An instant given as RFC 3339 with an offset (``2026-12-24T18:00:00+08:00``, ``...Z``)
    or as epoch milliseconds: a whole second from 1970 to the end of 9999, in epoch ms."""
    if not isinstance(text, str):
        raise InvalidInput(field, "must be a time")
    stripped = text.strip()
    if _DIGITS.fullmatch(stripped):
        at_ms = int(stripped)
    else:
        try:
            parsed = datetime.fromisoformat(stripped)
        except ValueError:
            raise InvalidInput(field, f"{text!r} is not an RFC 3339 time (e.g. "
                                      "2026-12-24T18:00:00+08:00) or epoch milliseconds") from None
        if parsed.tzinfo is None:
            raise InvalidInput(field, f"{text!r} needs a UTC offset or Z")
        if parsed.microsecond:
            raise InvalidInput(field, f"{text!r} must be a whole second")
        at_ms = int(parsed.timestamp()) * 1000
    return check_instant(at_ms, field)


def check_instant(at_ms: int, field: str) -> int:
    if isinstance(at_ms, bool) or not isinstance(at_ms, int) or not 0 <= at_ms <= LAST_INSTANT_MS:
        raise InvalidInput(field, "must be an instant between 1970 and the end of 9999")
    if at_ms % 1000:
        raise InvalidInput(field, "must be a whole second")
    return at_ms
