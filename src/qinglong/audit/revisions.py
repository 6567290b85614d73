"""The audit of one trigger's revisions: each revision's nominal occurrences in the window
(by the audit's own expansion, ``audit/expansion.py``), when each was due (its jittered
instant, ``audit/jitter.py``), and whether each has its one Run or a recorded reason not to
(a misfire decision, a pause, a backfill, a stop before it was due, an archived project);
misfire and pause records are checked against the occurrences they name."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from qinglong.audit.expansion import nominal_occurrences
from qinglong.audit.jitter import jitter_bounds, jittered_instants
from qinglong.audit.model import (
    AuditParams,
    MisfireRecord,
    RunRecord,
    TriggerReport,
    TriggerRevisionRecord,
)
from qinglong.domain.decision import PAUSED_FATE

Key = tuple[str, str]


Interval = tuple[int, int | None]  # [from, until) -- until None: still going


def stop_of(
    revision: TriggerRevisionRecord,
    next_published_at: int | None,
    task_revisions: Mapping[Key, list[tuple[int, int, bool]]],
) -> int | None:
    """The instant (exclusive) from which this revision can no longer fire, if any."""
    stops = [t for t in (next_published_at,) if t is not None]
    for revision_number, published_at, _ in task_revisions.get((revision.project_id, revision.task_id), []):
        if revision_number > revision.task_revision:
            stops.append(published_at)  # the pin is stale from the next task revision on
            break
    return min(stops) if stops else None


def pinned_task_enabled(revision: TriggerRevisionRecord,
                         task_revisions: Mapping[Key, list[tuple[int, int, bool]]]) -> bool:
    for number, _, enabled in task_revisions.get((revision.project_id, revision.task_id), []):
        if number == revision.task_revision:
            return enabled
    return False


class TriggerChecker:
    def __init__(self, report: TriggerReport, params: AuditParams, start: int, end: int,
                 required_until: int) -> None:
        self.report = report
        self.params = params
        self.start = start
        self.end = end
        self.required_until = required_until

    def revision(
        self,
        revision: TriggerRevisionRecord,
        stop: int | None,
        can_fire: bool,
        runs: list[RunRecord],
        misfires: list[MisfireRecord],
        quiet: list[Interval],
        pauses: list[Interval] | None = None,
        backfilled: frozenset[int] = frozenset(),
    ) -> None:
        """``quiet``: intervals in which nothing may be required to fire (archived project);
        ``pauses``: the trigger's pauses (an occurrence in one is held back, except the one
        in progress when it ended, which the misfire policy decides); ``backfilled``: the
        occurrences a backfill admitted a Run for (``runs`` are the scheduled ones)."""
        report = self.report
        pauses = pauses or []
        held = [m for m in misfires if m.policy == PAUSED_FATE]
        misfires = [m for m in misfires if m.policy != PAUSED_FATE]
        low = max(self.start, revision.published_at_ms)
        high = self.end if stop is None else min(self.end, stop - 1)
        nominal = (expected_occurrences(revision, low, high)
                   if can_fire and low <= high else [])
        nominal_set = set(nominal)
        due = _Due(revision, self.report.project_id, self.report.trigger_id, nominal)
        counts = Counter(run.scheduled_for_ms for run in runs)
        created = {run.scheduled_for_ms: run.created_at_ms for run in runs}
        for run in runs:
            if run.scheduled_for_ms not in nominal_set:
                report.spurious.append(run.scheduled_for_ms)
        window = self.params.grace_ms + self.params.lease_ms
        for occurrence in nominal:
            n = counts.get(occurrence, 0)  # more than one: counted by _duplicates
            at = due(occurrence)  # when it was due: its jittered instant, if it has one
            if at > self.required_until or _inside(at, quiet):
                continue
            report.expected += 1
            if n:
                report.admitted += 1
                report.lags_ms.append(created[occurrence] - at)
                if created[occurrence] < at:  # before it was due (before its jittered instant)
                    report.misfire_violations.append(f"admitted-before-due@{occurrence}")
            elif occurrence in backfilled:
                report.gaps_backfilled += 1
            elif _dropped_by_misfire(occurrence, misfires):
                report.gaps_misfire += 1
            elif _inside(at, pauses) or _dropped_by_misfire(occurrence, held):
                report.gaps_paused += 1
            elif stop is not None and stop - at <= window:
                report.gaps_superseded += 1
            elif any(0 <= begin - at <= window for begin, _ in quiet):
                report.gaps_superseded += 1  # the project was archived before it was decided
            else:
                report.gaps_unexplained.append(occurrence)
        for misfire in misfires:
            self._check_misfire(misfire, revision.misfire_policy, counts, due, nominal)
        self._check_pauses(nominal, due, counts, pauses, held)

    def _check_pauses(self, nominal: list[int], due: _Due, counts: Counter[int],
                      pauses: list[Interval], held: list[MisfireRecord]) -> None:
        """No Run for an occurrence a pause held back (only the one in progress when the pause
        ended may run), and every record of held-back occurrences lies inside a pause. An
        occurrence is in a pause when it was due in it (its jittered instant, with jitter)."""
        violations = self.report.pause_violations
        due_at = {due(t) for t in nominal}
        for begin, end in pauses:
            inside = [t for t in nominal if begin <= due(t) and (end is None or due(t) < end)]
            in_progress = (inside[-1] if end is not None and inside and end not in due_at
                           else None)
            violations.extend(f"admitted-while-paused@{t}" for t in inside
                              if counts.get(t) and t != in_progress)
        for record in held:
            if not any(begin <= due(record.due_at_ms)
                       and (end is None or record.skipped_through_ms < end)
                       for begin, end in pauses):
                violations.append(f"paused-outside-a-pause@{record.due_at_ms}")
            if any(counts.get(t) for t in nominal
                   if record.due_at_ms <= t <= record.skipped_through_ms):
                violations.append(f"paused-but-admitted@{record.due_at_ms}")

    def _check_misfire(self, misfire: MisfireRecord, policy: str, counts: Counter[int],
                       due: _Due, nominal: list[int]) -> None:
        where = f"{misfire.due_at_ms}"
        on_time_from = misfire.decided_at_ms - self.params.grace_ms
        if misfire.decided_at_ms - due(misfire.due_at_ms) <= self.params.grace_ms:
            self.report.misfire_violations.append(f"misfire-not-late@{where}")
        if misfire.policy != policy:
            self.report.misfire_violations.append(f"misfire-policy-{misfire.policy}-not-{policy}@{where}")
        if due.jittered:  # the stretch ends before the next occurrence still on time
            dropped = [t for t in nominal if misfire.due_at_ms <= t <= misfire.skipped_through_ms]
            within = (misfire.skipped_through_ms < misfire.due_at_ms
                      or any(due(t) >= on_time_from for t in dropped))
        else:
            within = not misfire.due_at_ms <= misfire.skipped_through_ms < on_time_from
        if within:  # it dropped an occurrence that was still within grace when it decided
            self.report.misfire_violations.append(f"misfire-dropped-within-grace@{where}")
        inside = sum(n for t, n in counts.items() if misfire.due_at_ms <= t <= misfire.skipped_through_ms)
        expected_runs = 1 if misfire.policy == "fire_once" else 0
        if inside != expected_runs or (expected_runs and counts.get(misfire.due_at_ms, 0) != 1):
            self.report.misfire_violations.append(f"misfire-runs-{inside}@{where}")


def expected_occurrences(revision: TriggerRevisionRecord, start_ms: int, end_ms: int) -> list[int]:
    """The revision's nominal occurrences in ``[start_ms, end_ms]``, by the audit's own
    expansion (``audit/expansion.py``), with the cron DST policy of its spec config when the
    record carries the config (``TriggerRevisionRecord.config``; without it, the default
    policy, which every revision published before DST policies existed has)."""
    config = getattr(revision, "config", None)
    dst = config.get("dst") if isinstance(config, Mapping) else None
    policy = dst if isinstance(dst, Mapping) else {}
    return nominal_occurrences(revision.expression, revision.timezone, start_ms, end_ms,
                               dst_gap=str(policy.get("gap", "shift")),
                               dst_overlap=str(policy.get("overlap", "first")))


class _Due:
    """When each nominal occurrence of a revision was due: its jittered instant when the
    revision's spec has a jitter (``audit/jitter.py``), else the occurrence itself."""

    def __init__(self, revision: TriggerRevisionRecord, project_id: str, trigger_id: str,
                 nominal: list[int]) -> None:
        config = getattr(revision, "config", None)
        self._bounds = jitter_bounds(config) if isinstance(config, Mapping) else None
        self._revision = revision
        self._ids = (project_id, trigger_id)
        self._known = self._compute(nominal) if self._bounds is not None else {}

    @property
    def jittered(self) -> bool:
        return self._bounds is not None

    def _following(self, at_ms: int) -> int | None:
        assert self._bounds is not None
        ahead = expected_occurrences(self._revision, at_ms + 1,
                                     at_ms + (self._bounds[1] + 1) * 1000)
        return ahead[0] if ahead else None

    def _compute(self, occurrences: list[int]) -> dict[int, int]:
        assert self._bounds is not None
        return jittered_instants(self._bounds, *self._ids, occurrences, self._following)

    def __call__(self, nominal_ms: int) -> int:
        if self._bounds is None:
            return nominal_ms
        if nominal_ms not in self._known:
            self._known.update(self._compute([nominal_ms]))
        return self._known[nominal_ms]


def _inside(instant: int, intervals: Iterable[Interval]) -> bool:
    return any(begin <= instant and (until is None or instant < until)
               for begin, until in intervals)


def _dropped_by_misfire(occurrence: int, misfires: Iterable[MisfireRecord]) -> bool:
    for misfire in misfires:
        if misfire.due_at_ms <= occurrence <= misfire.skipped_through_ms:
            return not (misfire.policy == "fire_once" and occurrence == misfire.due_at_ms)
    return False


def check_backfilled(report: TriggerReport, chain: list[TriggerRevisionRecord],
                      backfilled: list[RunRecord]) -> None:
    """A backfilled Run lies on the schedule of the revision it was admitted under (its
    occurrence may precede that revision's publish: a backfill judges the past against the
    current schedule)."""
    by_revision: dict[int, list[int]] = defaultdict(list)
    for run in backfilled:
        by_revision[run.trigger_revision].append(run.scheduled_for_ms)
    for revision in chain:
        instants = by_revision.get(revision.revision)
        if not instants:
            continue
        on_spec = set(expected_occurrences(revision, min(instants), max(instants)))
        report.spurious.extend(t for t in instants if t not in on_spec)


