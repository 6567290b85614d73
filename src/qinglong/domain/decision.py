"""The scheduling decision: one pure function shared by every profile.

Let ``c`` be the durable cursor, ``t`` the observation time (the claim's database
acquisition time in the cluster, the node clock on SQLite) and ``g`` the misfire
grace:

* cursor NULL: ``c`` is the first occurrence at or after the revision's publish time (none:
  the source has no occurrence from then on, and the row is initialised as finished);
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

With jitter (``domain/jitter.py``) an occurrence ``c`` is due at its jittered instant ``j(c)``
(``c <= j(c) <= c + bound``, in the order of the occurrences) instead of ``c``: every rule
above reads ``j(c)`` where it compares an occurrence with a time (due-ness, lateness, the
pause it fell in), so a misfire resumes at the first occurrence whose jittered instant is
still on time and drops the nominal stretch before it; the cursor, the Run and every record
keep the nominal instants.

The cursor strictly increases with every decision that moves it. When the source has no
occurrence after the one decided (a one-shot trigger, see ``domain/once.py``), the next
cursor is None: the schedule is finished, and its row is never due again (the adapters store
``domain.occurrences.DONE_CURSOR_MS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from qinglong.domain.jitter import Delay
from qinglong.domain.occurrences import OccurrenceSource
from qinglong.domain.trigger import MisfirePolicy
from qinglong.errors import InvalidInput

# The policy recorded beside misfires for the occurrences a pause held back.
PAUSED_FATE = "paused"

MIN_GRACE_MS = 0
MAX_GRACE_MS = 300_000


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
    due_at_ms: int  # the occurrence decided (initialising a finished source: the publish time)
    next_fire_at_ms: int | None  # None: no further occurrence, the schedule is finished
    scheduled_for_ms: int | None
    misfired: bool
    skipped_through_ms: int | None = None  # misfire only: occurrences up to here were dropped
    # after a pause: the occurrences [paused_from_ms, paused_through_ms] fell in it
    paused_from_ms: int | None = None
    paused_through_ms: int | None = None
    # with jitter: the jittered instant of the next cursor, and of the occurrence admitted
    next_due_at_ms: int | None = None
    jittered_for_ms: int | None = None


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
    delay: Delay | None = None,
) -> Decision:
    """Decide what one due (or uninitialised) schedule row does at ``observed_at_ms``.

    With a ``delay`` (a trigger's jitter, ``domain/jitter.py``) every judgement of time uses an
    occurrence's jittered instant -- when it is due, how late it is, whether a pause held it
    back -- while the cursor, the Run and every record keep its nominal instant."""
    check_grace(grace_ms)
    due_of = delay.due if delay is not None else _nominal
    due = cursor_ms if cursor_ms is not None else occurrences.next_after(published_at_ms - 1)
    if due is None:  # nothing from the publish time on (a one-shot instant already past)
        return _initialize(observed_at_ms, published_at_ms, None, None)
    if due_of(due) > observed_at_ms:
        if cursor_ms is not None:
            raise InvalidInput("cursor", "is not due at the observation time")
        return _initialize(observed_at_ms, due, due, due_of(due) if delay is not None else None)
    paused: tuple[int, int] | None = None
    if pause is not None and pause.from_ms <= due_of(due):
        if pause.in_effect_at(observed_at_ms):
            raise InvalidInput("pause", "is in effect at the observation time")
        assert pause.until_ms is not None  # a pause not in effect has ended
        if due_of(due) < pause.until_ms:
            in_progress = last_due_at_or_before(occurrences, pause.until_ms, floor_ms=due,
                                                delay=delay)
            if in_progress > due:
                paused = (due, in_progress - 1)
            due = in_progress
    return _decide_due(due, observed_at_ms, grace_ms, policy, occurrences, paused, delay)


def _nominal(at_ms: int) -> int:
    return at_ms


def _decide_due(
    due: int,
    observed_at_ms: int,
    grace_ms: int,
    policy: MisfirePolicy,
    occurrences: OccurrenceSource,
    paused: tuple[int, int] | None,
    delay: Delay | None = None,
) -> Decision:
    paused_from, paused_through = paused if paused is not None else (None, None)
    due_of = delay.due if delay is not None else _nominal
    jittered = due_of(due) if delay is not None else None
    skipped_through: int | None = None  # misfire only
    if observed_at_ms - due_of(due) <= grace_ms:  # on time
        admit, misfired = True, False
        following = occurrences.next_after(due)
    else:
        resume_from = observed_at_ms - grace_ms  # the oldest instant still on time
        admit, misfired = policy is MisfirePolicy.FIRE_ONCE, True
        if delay is None:
            following = occurrences.next_after(resume_from - 1)
            skipped_through = resume_from - 1
        else:  # the first occurrence whose jittered instant is still on time
            following = first_due_at_or_after(occurrences, resume_from, after_ms=due, delay=delay)
            skipped_through = following - 1 if following is not None else max(due, resume_from - 1)
    return Decision(
        disposition=Disposition.ADMIT if admit else Disposition.SKIP,
        observed_at_ms=observed_at_ms,
        due_at_ms=due,
        next_fire_at_ms=following,
        scheduled_for_ms=due if admit else None,
        misfired=misfired,
        skipped_through_ms=skipped_through,
        paused_from_ms=paused_from,
        paused_through_ms=paused_through,
        next_due_at_ms=due_of(following) if delay is not None and following is not None else None,
        jittered_for_ms=jittered if admit else None,
    )


def _initialize(observed_at_ms: int, due_at_ms: int, next_fire_at_ms: int | None,
                next_due_at_ms: int | None) -> Decision:
    """Set the cursor and admit nothing: a row seen for the first time (``next_fire_at_ms`` its
    first occurrence, None when there is none)."""
    return Decision(disposition=Disposition.INITIALIZE, observed_at_ms=observed_at_ms,
                    due_at_ms=due_at_ms, next_fire_at_ms=next_fire_at_ms, scheduled_for_ms=None,
                    misfired=False, next_due_at_ms=next_due_at_ms)


def first_due_at_or_after(occurrences: OccurrenceSource, at_ms: int, *, after_ms: int,
                          delay: Delay) -> int | None:
    """The first occurrence after ``after_ms`` whose jittered instant is at or after ``at_ms``
    (jittered instants keep the nominal order and lie at most ``delay.bound_ms`` later)."""
    candidate = occurrences.next_after(max(after_ms, at_ms - delay.bound_ms - 1))
    while candidate is not None and delay.due(candidate) < at_ms:
        candidate = occurrences.next_after(candidate)
    return candidate


def last_due_at_or_before(occurrences: OccurrenceSource, at_ms: int, *, floor_ms: int,
                          delay: Delay | None = None) -> int:
    """The last occurrence due at or before ``at_ms`` (its jittered instant, with a delay),
    given that ``floor_ms`` is one."""
    if delay is None:
        return last_at_or_before(occurrences, at_ms, floor_ms=floor_ms)
    surely = at_ms - delay.bound_ms  # every occurrence up to here is due by at_ms
    last = (last_at_or_before(occurrences, surely, floor_ms=floor_ms) if surely >= floor_ms
            else floor_ms)
    while ((following := occurrences.next_after(last)) is not None
           and delay.due(following) <= at_ms):
        last = following
    return last


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
        if probe is not None and probe <= at_ms:
            start = probe
            break
        step *= 2
    last = start
    while (following := occurrences.next_after(last)) is not None and following <= at_ms:
        last = following
    return last
