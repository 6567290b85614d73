"""The scheduling decision: one pure function shared by every profile.

Let ``c`` be the durable cursor, ``t`` the observation time (the claim's database
acquisition time in the cluster, the node clock on SQLite) and ``g`` the misfire
grace:

* cursor NULL: ``c`` is the first occurrence at or after the revision's publish time;
* ``c > t``: initialize -- store ``c``, admit nothing;
* ``t - c <= g`` (on time): admit ``c``; the next cursor is the first occurrence
  after ``c``, so on-time occurrences are admitted one after another, never dropped;
* ``t - c > g`` (misfired): ``skip`` admits nothing, ``fire_once`` admits exactly one
  Run for ``c``; either way the next cursor is the first occurrence at or after ``t - g``
  (one exactly ``g`` late is still on time), so no backlog is replayed. The dropped
  stretch is ``[c, t - g)``.

The cursor strictly increases with every decision that moves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from qinglong.domain.trigger import MisfirePolicy
from qinglong.errors import InvalidInput

MIN_GRACE_MS = 0
MAX_GRACE_MS = 300_000


class OccurrenceSource(Protocol):
    def next_after(self, after_ms: int) -> int: ...


class Disposition(StrEnum):
    INITIALIZE = "initialize"
    ADMIT = "admit"
    SKIP = "skip"


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    disposition: Disposition
    observed_at_ms: int
    due_at_ms: int
    next_fire_at_ms: int
    scheduled_for_ms: int | None
    misfired: bool
    skipped_through_ms: int | None = None  # misfire only: occurrences up to here were dropped


def check_grace(grace_ms: int) -> int:
    if (
        not isinstance(grace_ms, int)
        or isinstance(grace_ms, bool)
        or not MIN_GRACE_MS <= grace_ms <= MAX_GRACE_MS
    ):
        raise InvalidInput("grace", f"must be between {MIN_GRACE_MS} and {MAX_GRACE_MS} ms")
    return grace_ms


def decide(
    *,
    cursor_ms: int | None,
    published_at_ms: int,
    observed_at_ms: int,
    grace_ms: int,
    policy: MisfirePolicy,
    occurrences: OccurrenceSource,
) -> Decision:
    """Decide what one due (or uninitialised) schedule row does at ``observed_at_ms``."""
    check_grace(grace_ms)
    due = cursor_ms if cursor_ms is not None else occurrences.next_after(published_at_ms - 1)
    if due > observed_at_ms:
        if cursor_ms is not None:
            raise InvalidInput("cursor", "is not due at the observation time")
        return Decision(
            disposition=Disposition.INITIALIZE,
            observed_at_ms=observed_at_ms,
            due_at_ms=due,
            next_fire_at_ms=due,
            scheduled_for_ms=None,
            misfired=False,
        )
    if observed_at_ms - due <= grace_ms:
        return Decision(
            disposition=Disposition.ADMIT,
            observed_at_ms=observed_at_ms,
            due_at_ms=due,
            next_fire_at_ms=occurrences.next_after(due),
            scheduled_for_ms=due,
            misfired=False,
        )
    resume_from = observed_at_ms - grace_ms  # the oldest instant still on time
    admit = policy is MisfirePolicy.FIRE_ONCE
    return Decision(
        disposition=Disposition.ADMIT if admit else Disposition.SKIP,
        observed_at_ms=observed_at_ms,
        due_at_ms=due,
        next_fire_at_ms=occurrences.next_after(resume_from - 1),
        scheduled_for_ms=due if admit else None,
        misfired=True,
        skipped_through_ms=resume_from - 1,
    )
