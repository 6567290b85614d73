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

A pause ``[P, U)`` (``U`` the instant it ended: resumed by hand or its ``--until`` time)
changes the decision of a cursor that fell due inside it (``P <= c < U``). The scheduler does
not decide a row while its pause is in effect; once it ended, the occurrence in progress at
``U`` -- the last one at or before ``U``, ``L`` -- is decided by the rules above as if there
had been no pause, and the occurrences before it, ``[c, L)``, are recorded as paused. So a
resume neither replays what the pause held back nor loses the occurrence it resumed in, and
the misfire policy says what happens to that occurrence when it is already late.

The cursor strictly increases with every decision that moves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from qinglong.domain.trigger import MisfirePolicy
from qinglong.errors import InvalidInput

# The policy recorded beside misfires for the occurrences a pause held back.
PAUSED_FATE = "paused"

MIN_GRACE_MS = 0
MAX_GRACE_MS = 300_000


class OccurrenceSource(Protocol):
    def next_after(self, after_ms: int) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Pause:
    """The latest pause of a trigger: from ``from_ms`` until ``until_ms`` (exclusive; None while
    it lasts until a resume)."""

    from_ms: int
    until_ms: int | None = None

    def __post_init__(self) -> None:
        if self.until_ms is not None and self.until_ms < self.from_ms:
            raise InvalidInput("pause", "cannot end before it began")

    def in_effect_at(self, at_ms: int) -> bool:
        return self.from_ms <= at_ms and (self.until_ms is None or at_ms < self.until_ms)


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
    # after a pause: the occurrences [paused_from_ms, paused_through_ms] fell in it
    paused_from_ms: int | None = None
    paused_through_ms: int | None = None


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
    pause: Pause | None = None,
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
    paused: tuple[int, int] | None = None
    if pause is not None and pause.from_ms <= due:
        if pause.in_effect_at(observed_at_ms):
            raise InvalidInput("pause", "is in effect at the observation time")
        assert pause.until_ms is not None  # a pause not in effect has ended
        if due < pause.until_ms:
            in_progress = last_at_or_before(occurrences, pause.until_ms, floor_ms=due)
            if in_progress > due:
                paused = (due, in_progress - 1)
            due = in_progress
    return _decide_due(due, observed_at_ms, grace_ms, policy, occurrences, paused)


def _decide_due(
    due: int,
    observed_at_ms: int,
    grace_ms: int,
    policy: MisfirePolicy,
    occurrences: OccurrenceSource,
    paused: tuple[int, int] | None,
) -> Decision:
    paused_from, paused_through = paused if paused is not None else (None, None)
    if observed_at_ms - due <= grace_ms:
        return Decision(
            disposition=Disposition.ADMIT,
            observed_at_ms=observed_at_ms,
            due_at_ms=due,
            next_fire_at_ms=occurrences.next_after(due),
            scheduled_for_ms=due,
            misfired=False,
            paused_from_ms=paused_from,
            paused_through_ms=paused_through,
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
        paused_from_ms=paused_from,
        paused_through_ms=paused_through,
    )


def last_at_or_before(occurrences: OccurrenceSource, at_ms: int, *, floor_ms: int) -> int:
    """The last occurrence at or before ``at_ms``, given that ``floor_ms`` is an occurrence at or
    before it. Searches backwards from ``at_ms`` in doubling steps, then walks forward, so a
    long pause of a frequent trigger costs a few dozen steps, not one per occurrence."""
    if floor_ms > at_ms:
        raise InvalidInput("pause", "the cursor is after the instant searched from")
    step = 1_000
    start = floor_ms
    while at_ms - step > floor_ms:
        probe = occurrences.next_after(at_ms - step - 1)
        if probe <= at_ms:
            start = probe
            break
        step *= 2
    last = start
    while (following := occurrences.next_after(last)) <= at_ms:
        last = following
    return last
