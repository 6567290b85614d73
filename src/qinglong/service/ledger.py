"""The occurrence ledger of a trigger: every nominal time in a window and its fate.

The nominal occurrences are computed with the scheduler's own schedules (cron, interval or
one-shot, ``domain.trigger.stored_schedule``), each
under the revision in force at that instant: revision ``r`` is in force from its publish
time until the next revision's, and it can fire only while it is enabled and the task
revision it pins is enabled and still the task's latest (a later task revision makes the pin
stale). Spans in which it cannot fire have no nominal occurrences, as in ``ql audit``.

Each occurrence gets the first fate that applies:

* ``ran``: exactly one Run stands for it (any trigger type but manual: a manual Run is an
  operator's request, not an occurrence);
* ``duplicate``: more than one Run does (a violation; all are shown);
* ``skipped``: a misfire decision dropped it (policy ``skip``, or ``fire_once`` for all but
  the first occurrence it covers, which it runs);
* ``paused``: it lies in a pause of the trigger, or a record of what a pause held back
  covers it;
* ``archived``: the project was archived at that instant;
* ``due`` / ``pending``: the schedule has not decided it yet (it is at or after the cursor
  of the revision the schedule row serves); ``due`` when its time has come (by the store's
  clock), ``pending`` when it is still ahead;
* ``superseded``: the revision stopped (a later revision, or a newer task revision that made
  its pin stale) or the project was archived within ``SUPERSEDED_WITHIN_MS`` after it, before
  the scheduler had decided it;
* ``missing``: none of these: a gap ``ql audit`` reports.

Everything here is pure: the facts come from ``RunStore.trigger_ledger_facts``.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from qinglong.domain.decision import PAUSED_FATE
from qinglong.domain.jitter import Delay
from qinglong.domain.model import LedgerFacts, LedgerRevision, LedgerRun
from qinglong.domain.occurrences import Schedule
from qinglong.domain.runs import TRIGGER_TYPE_MANUAL
from qinglong.domain.trigger import MisfirePolicy, TriggerSpec, stored_schedule
from qinglong.errors import InvalidInput
from qinglong.service.times import in_zone, rfc3339
from qinglong.service.views.base import instant
from qinglong.service.views.reports import LedgerOccurrence, LedgerRunView, LedgerView
from qinglong.storage.runs import RunStore

MAX_OCCURRENCES = 100_000  # a window holding more nominal occurrences is refused
MAX_LIMIT = 10_000
DEFAULT_LIMIT = 50
DEFAULT_SPAN_MS = 3_600_000  # without --from: the hour before the window's end
UPCOMING = 3  # without --to: the next occurrences after now, shown as pending
SUPERSEDED_WITHIN_MS = 60_000
FAR_FUTURE_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: read facts without an end
FIRE_ONCE = MisfirePolicy.FIRE_ONCE.value


class Fate(StrEnum):
    RAN = "ran"
    DUPLICATE = "duplicate"
    SKIPPED = "skipped"
    PAUSED = "paused"
    ARCHIVED = "archived"
    DUE = "due"
    PENDING = "pending"
    SUPERSEDED = "superseded"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class FiringSpan:
    """Where one revision could fire: from ``from_ms`` until ``until_ms`` (exclusive; None:
    it is the latest revision and nothing stopped it)."""

    revision: LedgerRevision
    from_ms: int
    until_ms: int | None


@dataclass(frozen=True, slots=True)
class Entry:
    """One nominal occurrence, the revision in force at it, and its fate; ``due_ms`` is when
    it became due (its jittered instant; ``at_ms`` for a trigger without jitter)."""

    at_ms: int
    revision: LedgerRevision
    fate: Fate
    runs: tuple[LedgerRun, ...]
    due_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Ledger:
    project_id: str
    trigger_id: str
    from_ms: int
    to_ms: int
    entries: tuple[Entry, ...]  # oldest first; the upcoming ones (if asked for) last


def firing_spans(facts: LedgerFacts) -> list[FiringSpan]:
    """The spans in which each revision could fire, oldest first."""
    revisions = sorted(facts.revisions, key=lambda r: r.revision)
    tasks = sorted(facts.task_revisions, key=lambda t: t.revision)
    spans = []
    for index, revision in enumerate(revisions):
        stops = [revisions[index + 1].published_at_ms] if index + 1 < len(revisions) else []
        stale = next((t.published_at_ms for t in tasks if t.revision > revision.task_revision),
                     None)
        if stale is not None:
            stops.append(stale)
        pinned = next((t for t in tasks if t.revision == revision.task_revision), None)
        # (a pinned revision missing from the facts is taken as enabled: shown, not hidden)
        if not revision.enabled or (pinned is not None and not pinned.enabled):
            continue
        spans.append(FiringSpan(revision, revision.published_at_ms, min(stops, default=None)))
    return spans


def revision_schedule(revision: LedgerRevision) -> Schedule:
    """The revision's schedule: from its verified spec when the facts carry it (the DST policy
    of a cron trigger is in the spec only), else from its stored text and zone."""
    spec = _spec(revision)
    if spec is not None:
        return spec.schedule
    return stored_schedule(revision.expression, revision.timezone)


def _spec(revision: LedgerRevision) -> TriggerSpec | None:
    spec = getattr(revision, "spec", None)  # LedgerRevision.spec, where the store provides it
    return spec if isinstance(spec, TriggerSpec) else None


def revision_delay(facts: LedgerFacts, revision: LedgerRevision) -> Delay | None:
    """When the revision's occurrences become due (its jitter), if it has one."""
    spec = _spec(revision)
    return None if spec is None else spec.delay(facts.project_id, facts.trigger_id)


def _too_many(count: int) -> InvalidInput:
    return InvalidInput("from", f"the window holds more than {count:,} occurrences of this "
                                "trigger: choose a narrower window (--from, --to)")


def nominal(facts: LedgerFacts, from_ms: int, to_ms: int,
            upcoming: int = 0) -> list[tuple[int, FiringSpan]]:
    """Every nominal occurrence in ``[from_ms, to_ms]``, ascending, with the span in force
    at it; then the next ``upcoming`` ones after ``to_ms`` (of the latest revision, if it
    can fire). More than MAX_OCCURRENCES in the window: InvalidInput."""
    found: list[tuple[int, FiringSpan]] = []
    spans = firing_spans(facts)
    for span in spans:
        low = max(span.from_ms, from_ms)
        high = to_ms if span.until_ms is None else min(to_ms, span.until_ms - 1)
        if low > high:
            continue
        schedule = revision_schedule(span.revision)
        for at_ms in schedule.iter_after(low - 1):
            if at_ms > high:
                break
            found.append((at_ms, span))
            if len(found) > MAX_OCCURRENCES:
                raise _too_many(MAX_OCCURRENCES)
    if upcoming > 0 and spans and spans[-1].until_ms is None:
        last = spans[-1]
        schedule = revision_schedule(last.revision)
        after = max(to_ms, last.from_ms - 1)
        found.extend((at_ms, last) for at_ms in itertools.islice(schedule.iter_after(after),
                                                                  upcoming))
    return found


class _Cover:
    """Whether an instant lies in any of a set of closed intervals (they may overlap):
    the greatest end among the intervals starting at or before it, by bisection."""

    def __init__(self, intervals: Iterable[tuple[int, int | None]]) -> None:
        ordered = sorted((begin, FAR_FUTURE_MS if end is None else end)
                         for begin, end in intervals)
        self._starts = [begin for begin, _ in ordered]
        self._reach = list(itertools.accumulate((end for _, end in ordered), max))

    def __contains__(self, at_ms: int) -> bool:
        index = bisect.bisect_right(self._starts, at_ms) - 1
        return index >= 0 and self._reach[index] >= at_ms


def decide(facts: LedgerFacts, occurrences: Sequence[tuple[int, FiringSpan]]) -> list[Entry]:
    """The fate of each occurrence (the first that applies, see the module docs). A jittered
    occurrence is judged at its jittered instant (when it became due: the pauses, archivals
    and revision ends around it, due or pending) and keeps its nominal instant as its identity
    (its Runs, the misfire and held-back records)."""
    delays = {span.revision.revision: revision_delay(facts, span.revision)
              for _, span in occurrences}
    runs_at: dict[int, list[LedgerRun]] = defaultdict(list)
    for run in facts.runs:
        if run.trigger_type != TRIGGER_TYPE_MANUAL:  # an operator's request, no occurrence
            runs_at[run.scheduled_for_ms].append(run)
    # fire_once runs the first occurrence it covers: without its Run, that one is no skip
    dropped = _Cover((m.due_at_ms + (1 if m.policy == FIRE_ONCE else 0), m.skipped_through_ms)
                     for m in facts.misfires if m.policy != PAUSED_FATE)
    held = _Cover((m.due_at_ms, m.skipped_through_ms) for m in facts.misfires
                  if m.policy == PAUSED_FATE)
    paused = _Cover((p.from_ms, None if p.until_ms is None else p.until_ms - 1)
                    for p in facts.pauses)
    archived = _Cover((a.from_ms, None if a.until_ms is None else a.until_ms - 1)
                      for a in facts.archivals)
    archived_from = sorted(a.from_ms for a in facts.archivals)
    cursor = facts.cursor
    entries = []
    for at_ms, span in occurrences:
        delay = delays[span.revision.revision]
        due_ms = at_ms if delay is None else delay.due(at_ms)
        runs = tuple(sorted(runs_at.get(at_ms, ()), key=lambda run: run.id))
        if len(runs) == 1:
            fate = Fate.RAN
        elif runs:
            fate = Fate.DUPLICATE
        elif at_ms in dropped:
            fate = Fate.SKIPPED
        elif at_ms in held or due_ms in paused:
            fate = Fate.PAUSED
        elif due_ms in archived:
            fate = Fate.ARCHIVED
        elif (cursor is not None and cursor.trigger_revision == span.revision.revision
              and (cursor.next_fire_at_ms is None or at_ms >= cursor.next_fire_at_ms)):
            fate = Fate.DUE if due_ms <= facts.now_ms else Fate.PENDING
        elif _stopped_soon_after(due_ms, span, archived_from):
            fate = Fate.SUPERSEDED
        else:
            fate = Fate.MISSING
        entries.append(Entry(at_ms, span.revision, fate, runs,
                             None if delay is None else due_ms))
    return entries


def _stopped_soon_after(at_ms: int, span: FiringSpan, archived_from: list[int]) -> bool:
    """The revision stopped, or the project was archived, within SUPERSEDED_WITHIN_MS after
    ``at_ms``: the scheduler may not have reached it before."""
    if span.until_ms is not None and span.until_ms - at_ms <= SUPERSEDED_WITHIN_MS:
        return True
    index = bisect.bisect_right(archived_from, at_ms)
    return index < len(archived_from) and archived_from[index] - at_ms <= SUPERSEDED_WITHIN_MS


def build_ledger(facts: LedgerFacts, *, from_ms: int, to_ms: int, upcoming: int = 0) -> Ledger:
    if from_ms > to_ms:
        raise InvalidInput("from", "must not be after --to")
    entries = decide(facts, nominal(facts, from_ms, to_ms, upcoming))
    return Ledger(facts.project_id, facts.trigger_id, from_ms, to_ms, tuple(entries))


def check_limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit", f"must be between 1 and {MAX_LIMIT:,}")
    return limit


def entry_view(entry: Entry) -> LedgerOccurrence:
    due: dict[str, Any] = {}
    if entry.due_ms is not None:  # a trigger with jitter: when it became due
        due.update(due_at=rfc3339(entry.due_ms), due_at_ms=entry.due_ms)
    return LedgerOccurrence(
        at=instant(entry.at_ms), at_ms=entry.at_ms,
        local=in_zone(entry.at_ms, entry.revision.timezone),
        revision=entry.revision.revision, fate=entry.fate.value,
        runs=[LedgerRunView(id=run.id, status=run.status, type=run.trigger_type)
              for run in entry.runs], **due)


def ledger_view(ledger: Ledger, limit: int = DEFAULT_LIMIT) -> LedgerView:
    """The most recent ``limit`` occurrences, newest first; ``not_shown`` counts the earlier
    ones left out and ``counts`` the fates of all of them."""
    check_limit(limit)
    shown = ledger.entries[-limit:]
    return LedgerView(
        project=ledger.project_id, trigger=ledger.trigger_id,
        from_=instant(ledger.from_ms), from_ms=ledger.from_ms,
        to=instant(ledger.to_ms), to_ms=ledger.to_ms,
        occurrences=[entry_view(entry) for entry in reversed(shown)],
        not_shown=len(ledger.entries) - len(shown),
        counts=dict(sorted(Counter(e.fate.value for e in ledger.entries).items())))


class TriggerLedger:
    """The ledger as the surfaces ask for it (the CLI; the HTTP API can reuse it)."""

    def __init__(self, runs: RunStore) -> None:
        self._runs = runs

    def ledger(self, project_id: str, trigger_id: str, *, now_ms: int,
               from_ms: int | None = None, to_ms: int | None = None,
               limit: int = DEFAULT_LIMIT) -> LedgerView:
        """Without ``to_ms`` the window ends at ``now_ms`` and the next UPCOMING occurrences
        follow it; without ``from_ms`` it starts DEFAULT_SPAN_MS before its end."""
        check_limit(limit)
        end = now_ms if to_ms is None else to_ms
        start = end - DEFAULT_SPAN_MS if from_ms is None else from_ms
        if start > end:
            raise InvalidInput("from", "must not be after --to")
        start = max(start, 0)
        # Without --to the facts are read to the far future, so upcoming occurrences that a
        # store clock ahead of ours has already decided are judged by what it wrote.
        facts = self._runs.trigger_ledger_facts(project_id, trigger_id, start,
                                                FAR_FUTURE_MS if to_ms is None else end)
        if to_ms is None:
            # The store's clock decides due against pending (facts.now_ms); the open window
            # ends at that same instant, or an occurrence between our clock and the store's
            # would be listed among the upcoming ones yet judged due.
            end = max(start, facts.now_ms)
        ledger = build_ledger(facts, from_ms=start, to_ms=end,
                              upcoming=UPCOMING if to_ms is None else 0)
        return ledger_view(ledger, limit)
