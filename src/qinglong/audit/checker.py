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

This module indexes the input and puts the report together; the per-revision checks are in
``audit/revisions.py``, the claim checks in ``audit/claims.py`` and the window's default end
in ``audit/window.py`` (its names are importable from here).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from qinglong.audit.claims import check_cursors, check_fences, events_pruned
from qinglong.audit.model import (
    AuditInput,
    AuditParams,
    AuditReport,
    ClaimRecord,
    LedgerReport,
    MisfireRecord,
    RunRecord,
    TriggerReport,
    TriggerRevisionRecord,
)
from qinglong.audit.revisions import (
    Interval,
    Key,
    TriggerChecker,
    check_backfilled,
    expected_occurrences,
    pinned_task_enabled,
    stop_of,
)
from qinglong.audit.window import (
    END_SOURCES,
    RECENT_HEARTBEAT_MS,
    STALE_HEARTBEAT_MS,
    WindowEnd,
    ago,
    default_end,
)
from qinglong.domain.decision import PAUSED_FATE
from qinglong.domain.runs import TRIGGER_TYPE_BACKFILL, TRIGGER_TYPE_FLOW_START

__all__ = [
    "END_SOURCES", "RECENT_HEARTBEAT_MS", "STALE_HEARTBEAT_MS", "WindowEnd", "audit",
    "check_ledger", "default_end", "events_pruned", "expected_occurrences",
]


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
        checker = TriggerChecker(TriggerReport(project_id=key[0], trigger_id=key[1]), params,
                           start, end, required_until)
        mine = runs.get(key, [])
        scheduled = [r for r in mine if r.trigger_type != TRIGGER_TYPE_BACKFILL]
        backfilled = [r for r in mine if r.trigger_type == TRIGGER_TYPE_BACKFILL]
        known_revisions = {r.revision for r in chain}
        for run in mine:
            if run.trigger_revision not in known_revisions:
                checker.report.spurious.append(run.scheduled_for_ms)
        check_backfilled(checker.report, chain, backfilled)
        filled = frozenset(r.scheduled_for_ms for r in backfilled)
        for index, revision in enumerate(chain):
            following = chain[index + 1].published_at_ms if index + 1 < len(chain) else None
            stop = stop_of(revision, following, task_revisions)
            can_fire = revision.enabled and pinned_task_enabled(revision, task_revisions)
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
        report.bad_shape = [r.id for r in mine if _bad_shape(r, pruned)]
        if data.claims is not None:
            check_fences(report, scheduled, claims.get(key, []), held.get(key, []),
                          events_before, claims_before, latest_claims.get(key))
            check_cursors(report, claims.get(key, []))
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
            f"pruned (up to {ago(data, horizon)}; docs/retention.md); later evidence was "
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


def _bad_shape(run: RunRecord, pruned: set[str]) -> bool:
    """A Run admitted without its first Attempt and its two admission events; a flow run an
    occurrence started, without its step rows (the flow audit judges the rest)."""
    if run.trigger_type == TRIGGER_TYPE_FLOW_START:
        return run.attempts < 1
    return run.attempts != 1 or (run.admission_events != 2 and run.id not in pruned)


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
