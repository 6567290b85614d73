"""The audit: recompute every nominal occurrence and compare it with what was admitted.

For each trigger revision, the occurrences it should have fired are those at or after its
publish time and before it stopped being able to fire (the next revision, a task revision
it no longer pins, or the project's archival), within the window. Each must have exactly one
Run, unless a recorded misfire decision dropped it or the revision stopped before the
scheduler was due to admit it (within lease + grace). Beyond that, every Run must lie on its
revision's nominal occurrences, carry one Attempt and its two admission events, and (in the
cluster) come from the latest claim on its row; cursors must never move back. Duplicates (a
second Run for one occurrence) are counted over every Run read, also those after the window.

Retention (docs/retention.md) prunes claim records and the events of Runs that ended, and
records how far in ``retention_marks`` in the same transaction: a Run that ended for good
before the events mark with no event left, or admitted before the claims mark whose claim is
gone, is judged by what remains (its occurrence, duplicates, its first Attempt) and listed in
``evidence_pruned``, not as a violation; anything later, or with no mark (nothing was ever
pruned), is judged in full: missing evidence is a violation.

A backfilled Run (`ql trigger backfill`) is no scheduling decision: it has no claim and is
not judged as an admission, but an occurrence with no scheduled Run that a backfill admitted
later is explained (``gaps_backfilled``); it must lie on its own revision's schedule and has
the shape of every admission, and with a scheduled Run (or another backfilled one) for the
same occurrence it is a duplicate.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from qinglong.audit.expansion import nominal_occurrences
from qinglong.audit.jitter import jitter_bounds, jittered_instants
from qinglong.audit.model import (
    AuditInput,
    AuditParams,
    AuditReport,
    ClaimRecord,
    InstanceRecord,
    LedgerReport,
    MisfireRecord,
    RunRecord,
    TriggerReport,
    TriggerRevisionRecord,
)
from qinglong.domain.decision import PAUSED_FATE
from qinglong.domain.runs import TERMINAL_RUN, TRIGGER_TYPE_BACKFILL
from qinglong.loops import MAX_INTERVAL_S

Key = tuple[str, str]


Interval = tuple[int, int | None]  # [from, until) -- until None: still going

# When is a scheduler that did not stop cleanly no longer running? `ql serve` heartbeats after
# its cycles (at most every 5 s, HEARTBEAT_INTERVAL_S in profiles.local), `ql control` every
# 5 s on a thread of its own (profiles.registration), and each starts a cycle at least once per
# its cadence: `ql serve --interval` and `ql control
# --interval-ms` allow up to loops.MAX_INTERVAL_S (1 h). The instances table records no
# cadence, so only a scheduler silent for longer than the longest cadence plus a margin (a
# slow cycle, the beat throttle) is judged not running; one silent for less is presumed
# running, and the report says so when it has been silent for more than RECENT_HEARTBEAT_MS.
SCHEDULER_ROLES = ("serve", "control")
HEARTBEAT_MARGIN_MS = 60_000
STALE_HEARTBEAT_MS = int(MAX_INTERVAL_S * 1000) + HEARTBEAT_MARGIN_MS
RECENT_HEARTBEAT_MS = 20_000  # a scheduler cycling every second or so beats within this

# What ended the window (AuditReport.end_source).
END_SOURCES = {
    "option": "--to",
    "now": "the database's now: a scheduler is running",
    "stop": "the latest clean stop of a scheduler",
    "heartbeat": "the latest heartbeat of a scheduler that did not stop cleanly",
    "decision": "the latest scheduling decision (a Run admitted or a misfire recorded)",
    "no-scheduler": "no trace of any scheduler: nothing is required",
}


def _stop_of(
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


def _pinned_task_enabled(revision: TriggerRevisionRecord,
                         task_revisions: Mapping[Key, list[tuple[int, int, bool]]]) -> bool:
    for number, _, enabled in task_revisions.get((revision.project_id, revision.task_id), []):
        if number == revision.task_revision:
            return enabled
    return False


class _Trigger:
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


@dataclass(frozen=True, slots=True)
class WindowEnd:
    """The window's default end, what set it (a key of END_SOURCES) and what to tell the user."""

    at_ms: int
    source: str
    note: str


def _last_decision_ms(data: AuditInput) -> int | None:
    """When a scheduler last decided something: the latest Run admission or misfire record
    (read alike from both databases)."""
    return max(itertools.chain((run.created_at_ms for run in data.runs
                                if run.trigger_type != TRIGGER_TYPE_BACKFILL),
                               (misfire.decided_at_ms for misfire in data.misfires)), default=None)


def _ago(data: AuditInput, at_ms: int) -> str:
    return f"{max(0, data.now_ms - at_ms) / 1000:.0f} s ago"


def default_end(data: AuditInput) -> WindowEnd:
    """Where the window ends without ``--to``: nothing can have been decided after the last
    evidence that a scheduler ran, so occurrences after it are not judged.

    * a scheduler is running (no clean stop, heartbeat within STALE_HEARTBEAT_MS): now;
    * schedulers ran but none runs now: the later of their last clean stop or heartbeat and
      the latest scheduling decision (a crash can follow decisions the heartbeat missed);
    * no scheduler ever wrote a heartbeat (a database from before the instances table, or no
      `ql serve` / `ql control` ran): the latest scheduling decision;
    * no trace of a scheduler at all: the earliest publish (nothing is required).
    """
    now = data.now_ms
    decided = _last_decision_ms(data)
    schedulers = [i for i in data.instances if i.role in SCHEDULER_ROLES]
    if not schedulers:
        if decided is None:
            first = min((r.published_at_ms for r in data.revisions), default=now)
            return WindowEnd(min(now, first), "no-scheduler",
                             "no scheduler has left a trace (no heartbeat, no Run, no misfire "
                             "decision): nothing is required (use --to to choose an end)")
        return WindowEnd(min(now, decided), "decision",
                         "no scheduler heartbeats are recorded (a database from an older "
                         "version, or no `ql serve`/`ql control` ran): the window ends at the "
                         f"latest scheduling decision, {_ago(data, decided)} "
                         "(use --to to choose another end)")
    running = [i for i in schedulers
               if i.stopped_at_ms is None and now - i.seen_at_ms <= STALE_HEARTBEAT_MS]
    if running:
        latest = max(running, key=lambda i: i.seen_at_ms)
        note = f"a scheduler is running ({latest.instance_id}, last seen {_ago(data, latest.seen_at_ms)}): the window ends now"
        if now - latest.seen_at_ms > RECENT_HEARTBEAT_MS:
            note += (f"; it is presumed running because a scheduler may cycle as rarely as once "
                     f"per {MAX_INTERVAL_S:.0f} s (--interval) and counts as gone only after "
                     f"{STALE_HEARTBEAT_MS // 1000} s of silence; if it crashed, use --to to end "
                     "the window where it stopped")
        return WindowEnd(now, "now", note)
    last: InstanceRecord = max(schedulers, key=lambda i: i.stopped_at_ms or i.seen_at_ms)
    last_ms = last.stopped_at_ms or last.seen_at_ms
    if decided is not None and decided > last_ms:
        at, source, what = decided, "decision", "the latest scheduling decision, after the last heartbeat"
    elif last.stopped_at_ms is not None:
        at, source, what = last_ms, "stop", f"the clean stop of {last.instance_id}"
    else:
        at, source, what = last_ms, "heartbeat", f"the last heartbeat of {last.instance_id} (no clean stop)"
    return WindowEnd(min(now, at), source,
                     f"no scheduler is running: the window ends where one last ran, at {what}, "
                     f"{_ago(data, at)} (use --to to choose another end)")


def _dropped_by_misfire(occurrence: int, misfires: Iterable[MisfireRecord]) -> bool:
    for misfire in misfires:
        if misfire.due_at_ms <= occurrence <= misfire.skipped_through_ms:
            return not (misfire.policy == "fire_once" and occurrence == misfire.due_at_ms)
    return False


def events_pruned(run: RunRecord, pruned_before_ms: int | None) -> bool:
    """Whether retention deleted this Run's events: it ended for good (a status no transition
    leaves) before the events mark and has no event left. Retention deletes all events of a
    Run in one statement, so a Run with some of them is judged in full."""
    return (pruned_before_ms is not None and run.events == 0 and run.status in TERMINAL_RUN
            and run.finished_at_ms is not None and run.finished_at_ms < pruned_before_ms)


def _check_fences(report: TriggerReport, runs: list[RunRecord], claims: list[ClaimRecord],
                  held: Iterable[MisfireRecord] = (), events_before_ms: int | None = None,
                  claims_before_ms: int | None = None, latest_claim: int | None = None) -> None:
    """``held``: records of occurrences a pause held back; the claim that decided one covered
    its stretch (its cursor is the stretch's start) and may admit the occurrence in progress
    right after it. ``events_before_ms`` and ``claims_before_ms``: retention's marks; a Run
    whose events (with the claim they name) or whose claim retention pruned is not fenced
    out. ``latest_claim``: the schedule row's claim version now; the pruner never deletes it,
    so only an older claim can have been pruned."""
    after_pause = {(m.trigger_revision, m.due_at_ms): m.next_fire_at_ms for m in held
                   if m.policy == PAUSED_FATE}
    by_version = {claim.version: claim for claim in claims}
    acquired = sorted((claim.version, claim.acquired_at_ms) for claim in claims)
    for run in runs:
        if events_pruned(run, events_before_ms):
            continue  # the claim it named went with its events (listed as evidence_pruned)
        claim = by_version.get(run.claim_version) if run.claim_version is not None else None
        if (claim is None and run.claim_version is not None and claims_before_ms is not None
                and run.created_at_ms < claims_before_ms and latest_claim is not None
                and run.claim_version < latest_claim):
            report.evidence_pruned.append(run.id)  # its claim is past retention
            continue
        if claim is None or claim.token != run.claim_token:
            report.fenced_out.append(run.id)  # no evidence of the claim that admitted it
            continue
        resumed_at = after_pause.get((claim.trigger_revision, claim.cursor_ms or -1))
        if claim.cursor_ms not in (None, run.scheduled_for_ms) and resumed_at != run.scheduled_for_ms:
            report.fenced_out.append(run.id)  # the claim covered another occurrence
            continue
        if not claim.acquired_at_ms <= run.created_at_ms < claim.expires_at_ms:
            report.fenced_out.append(run.id)  # committed outside the claim's lease
            continue
        # A newer claim granted before this Run's commit means the row had been taken over.
        later = acquired[bisect.bisect_right(acquired, (claim.version, 2**63)):]
        if any(at < run.created_at_ms for _, at in later):
            report.fenced_out.append(run.id)


def _check_cursors(report: TriggerReport, claims: list[ClaimRecord]) -> None:
    by_revision: dict[int, list[ClaimRecord]] = defaultdict(list)
    for claim in claims:
        by_revision[claim.trigger_revision].append(claim)
    for same in by_revision.values():
        same.sort(key=lambda c: c.version)
        highest: int | None = None
        for claim in same:
            if claim.cursor_ms is None:
                if highest is not None:
                    report.cursor_regressions += 1
                continue
            if highest is not None and claim.cursor_ms < highest:
                report.cursor_regressions += 1
            highest = claim.cursor_ms if highest is None else max(highest, claim.cursor_ms)


def audit(data: AuditInput, params: AuditParams,
          ledger: list[dict[str, object]] | None = None) -> AuditReport:
    revisions = [r for r in data.revisions
                 if (params.project_id is None or r.project_id == params.project_id)
                 and (params.trigger_id is None or r.trigger_id == params.trigger_id)]
    start = params.start_ms if params.start_ms is not None else min(
        (r.published_at_ms for r in revisions), default=data.now_ms)
    end_note = None
    end_source = "option"
    if params.end_ms is not None:
        end = params.end_ms
    else:
        found = default_end(data)
        end, end_source, end_note = max(found.at_ms, start), found.source, found.note
    required_until = end - params.settle_ms
    events_before, claims_before = data.events_pruned_before_ms, data.claims_pruned_before_ms
    latest_claims = {(s.project_id, s.trigger_id): s.claim_version for s in data.schedules
                     if s.claim_version is not None}
    marks = [m for m in (events_before, claims_before) if m is not None]
    horizon = max(marks) if marks else None
    task_revisions: dict[Key, list[tuple[int, int, bool]]] = defaultdict(list)
    for task in data.task_revisions:
        task_revisions[(task.project_id, task.task_id)].append((task.revision, task.published_at_ms, task.enabled))
    for entries in task_revisions.values():
        entries.sort()
    quiet: dict[str, list[Interval]] = defaultdict(list)
    for archival in data.archivals:
        quiet[archival.project_id].append((archival.archived_at_ms, archival.restored_at_ms))
    paused: dict[Key, list[Interval]] = defaultdict(list)
    for pause in data.pauses:
        paused[(pause.project_id, pause.trigger_id)].append((pause.paused_at_ms, pause.ended_at_ms))
    by_trigger: dict[Key, list[TriggerRevisionRecord]] = defaultdict(list)
    for revision in revisions:
        by_trigger[(revision.project_id, revision.trigger_id)].append(revision)
    runs: dict[Key, list[RunRecord]] = defaultdict(list)
    every_run: dict[Key, list[RunRecord]] = defaultdict(list)  # duplicates: whatever the window
    for run in data.runs:
        every_run[(run.project_id, run.trigger_id)].append(run)
        if start <= run.scheduled_for_ms <= end:
            runs[(run.project_id, run.trigger_id)].append(run)
    misfires: dict[tuple[str, str, int], list[MisfireRecord]] = defaultdict(list)
    held: dict[Key, list[MisfireRecord]] = defaultdict(list)  # what pauses held back
    for misfire in data.misfires:
        misfires[(misfire.project_id, misfire.trigger_id, misfire.trigger_revision)].append(misfire)
        if misfire.policy == PAUSED_FATE:
            held[(misfire.project_id, misfire.trigger_id)].append(misfire)
    claims: dict[Key, list[ClaimRecord]] = defaultdict(list)
    for claim in data.claims or ():
        claims[(claim.project_id, claim.trigger_id)].append(claim)

    reports = []
    duplicates_after = 0
    for key in sorted(by_trigger):
        chain = sorted(by_trigger[key], key=lambda r: r.revision)
        checker = _Trigger(TriggerReport(project_id=key[0], trigger_id=key[1]), params,
                           start, end, required_until)
        mine = runs.get(key, [])
        scheduled = [r for r in mine if r.trigger_type != TRIGGER_TYPE_BACKFILL]
        backfilled = [r for r in mine if r.trigger_type == TRIGGER_TYPE_BACKFILL]
        known_revisions = {r.revision for r in chain}
        for run in mine:
            if run.trigger_revision not in known_revisions:
                checker.report.spurious.append(run.scheduled_for_ms)
        _check_backfilled(checker.report, chain, backfilled)
        filled = frozenset(r.scheduled_for_ms for r in backfilled)
        for index, revision in enumerate(chain):
            following = chain[index + 1].published_at_ms if index + 1 < len(chain) else None
            stop = _stop_of(revision, following, task_revisions)
            can_fire = revision.enabled and _pinned_task_enabled(revision, task_revisions)
            checker.revision(
                revision, stop, can_fire,
                [r for r in scheduled if r.trigger_revision == revision.revision],
                misfires.get((key[0], key[1], revision.revision), []),
                quiet.get(revision.project_id, []),
                paused.get(key, []),
                filled,
            )
        report = checker.report
        pruned = {r.id for r in mine if events_pruned(r, events_before)}
        report.evidence_pruned = sorted(pruned)
        report.bad_shape = [r.id for r in mine if r.attempts != 1
                            or (r.admission_events != 2 and r.id not in pruned)]
        if data.claims is not None:
            _check_fences(report, scheduled, claims.get(key, []), held.get(key, []),
                          events_before, claims_before, latest_claims.get(key))
            _check_cursors(report, claims.get(key, []))
        report.duplicates += _duplicates(every_run.get(key, []))
        duplicates_after += _duplicates([r for r in every_run.get(key, []) if r.scheduled_for_ms > end])
        reports.append(report)
    result = AuditReport(
        dialect=data.dialect, start_ms=start, end_ms=end, required_until_ms=required_until,
        settle_ms=params.settle_ms, grace_ms=params.grace_ms, lease_ms=params.lease_ms,
        triggers=reports, end_source=end_source, evidence_horizon_ms=horizon,
    )
    pruned_runs = sum(len(t.evidence_pruned) for t in reports)
    if pruned_runs and horizon is not None:
        result.notes.append(
            f"{pruned_runs} Run(s) are judged without the events or claim records retention "
            f"pruned (up to {_ago(data, horizon)}; docs/retention.md); later evidence was "
            "never pruned")
    if data.marks_ahead:
        result.notes.append(
            "a retention mark is later than a day ago (the clock of a pruner ran ahead): "
            "evidence after a day ago is judged in full (docs/retention.md)")
    if end_note is not None:
        result.notes.append(end_note)
    if duplicates_after:
        result.notes.append(f"{duplicates_after} duplicate Run(s) for occurrences after the window "
                            "end are counted (duplicates are judged whatever the window)")
    if data.claims is None:
        result.notes.append("no claim log (SQLite): fence and cursor-history checks do not apply")
    if ledger is not None:
        in_window = [line for line in ledger
                     if start <= int(str(line["scheduled_for_ms"])) <= end
                     and (params.project_id is None or line["project"] == params.project_id)
                     and (params.trigger_id is None or line["trigger"] == params.trigger_id)]
        result.ledger = check_ledger(in_window, data.runs)
    return result


def _check_backfilled(report: TriggerReport, chain: list[TriggerRevisionRecord],
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


def _duplicates(runs: Iterable[RunRecord]) -> int:
    """Runs beyond the first for one occurrence (one instant of one trigger), whichever
    revisions admitted them."""
    counts = Counter(run.scheduled_for_ms for run in runs)
    return sum(n - 1 for n in counts.values())


def check_ledger(lines: list[dict[str, object]], runs: Iterable[RunRecord]) -> LedgerReport:
    """Acknowledged admissions (written outside the database) against the database."""
    report = LedgerReport(acknowledged=len(lines))
    by_id = {run.id: run for run in runs}
    acked: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for line in lines:
        key = (str(line["project"]), str(line["trigger"]), int(str(line["scheduled_for_ms"])))
        acked[key].add(str(line["run_id"]))
        run = by_id.get(str(line["run_id"]))
        token = line.get("claim_token")
        if (run is None or run.scheduled_for_ms != key[2]
                or (token is not None and run.claim_token is not None and token != run.claim_token)):
            report.missing.append(f"{key[1]}@{key[2]}")
    report.double_deliveries = [f"{k[1]}@{k[2]}" for k, ids in acked.items() if len(ids) > 1]
    return report
