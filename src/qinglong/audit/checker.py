"""The audit: recompute every nominal occurrence and compare it with what was admitted.

For each trigger revision, the occurrences it should have fired are those at or after its
publish time and before it stopped being able to fire (the next revision, a task revision
it no longer pins, or the project's archival), within the window. Each must have exactly one
Run, unless a recorded misfire decision dropped it or the revision stopped before the
scheduler was due to admit it (within lease + grace). Beyond that, every Run must lie on its
revision's nominal occurrences, carry one Attempt and its two admission events, and (in the
cluster) come from the latest claim on its row; cursors must never move back.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from qinglong.audit.expansion import nominal_occurrences
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

Key = tuple[str, str]


Interval = tuple[int, int | None]  # [from, until) -- until None: still going
STALE_HEARTBEAT_MS = 20_000  # a scheduler not seen for this long is not running


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
    ) -> None:
        """``quiet``: intervals in which nothing may be required to fire (archived project)."""
        report = self.report
        low = max(self.start, revision.published_at_ms)
        high = self.end if stop is None else min(self.end, stop - 1)
        nominal = (nominal_occurrences(revision.expression, revision.timezone, low, high)
                   if can_fire and low <= high else [])
        nominal_set = set(nominal)
        counts = Counter(run.scheduled_for_ms for run in runs)
        created = {run.scheduled_for_ms: run.created_at_ms for run in runs}
        for run in runs:
            if run.scheduled_for_ms not in nominal_set:
                report.spurious.append(run.scheduled_for_ms)
        window = self.params.grace_ms + self.params.lease_ms
        for occurrence in nominal:
            n = counts.get(occurrence, 0)
            report.duplicates += max(0, n - 1)
            if occurrence > self.required_until or _inside(occurrence, quiet):
                continue
            report.expected += 1
            if n:
                report.admitted += 1
                report.lags_ms.append(created[occurrence] - occurrence)
            elif _dropped_by_misfire(occurrence, misfires):
                report.gaps_misfire += 1
            elif stop is not None and stop - occurrence <= window:
                report.gaps_superseded += 1
            elif any(0 <= begin - occurrence <= window for begin, _ in quiet):
                report.gaps_superseded += 1  # the project was archived before it was decided
            else:
                report.gaps_unexplained.append(occurrence)
        for misfire in misfires:
            self._check_misfire(misfire, revision.misfire_policy, counts)

    def _check_misfire(self, misfire: MisfireRecord, policy: str, counts: Counter[int]) -> None:
        where = f"{misfire.due_at_ms}"
        if misfire.decided_at_ms - misfire.due_at_ms <= self.params.grace_ms:
            self.report.misfire_violations.append(f"misfire-not-late@{where}")
        if misfire.policy != policy:
            self.report.misfire_violations.append(f"misfire-policy-{misfire.policy}-not-{policy}@{where}")
        if not misfire.due_at_ms <= misfire.skipped_through_ms < misfire.decided_at_ms - self.params.grace_ms:
            # it dropped an occurrence that was still within grace when it decided
            self.report.misfire_violations.append(f"misfire-dropped-within-grace@{where}")
        inside = sum(n for t, n in counts.items() if misfire.due_at_ms <= t <= misfire.skipped_through_ms)
        expected_runs = 1 if misfire.policy == "fire_once" else 0
        if inside != expected_runs or (expected_runs and counts.get(misfire.due_at_ms, 0) != 1):
            self.report.misfire_violations.append(f"misfire-runs-{inside}@{where}")


def _inside(instant: int, intervals: Iterable[Interval]) -> bool:
    return any(begin <= instant and (until is None or instant < until)
               for begin, until in intervals)


def default_end(data: AuditInput) -> tuple[int, str | None]:
    """Now, while a scheduler runs; otherwise where the scheduler last ran (its clean stop or
    its last heartbeat), since nothing could have been decided after that."""
    schedulers = [i for i in data.instances if i.role in ("serve", "control")]
    if not schedulers:
        return data.now_ms, None
    if any(i.stopped_at_ms is None and data.now_ms - i.seen_at_ms <= STALE_HEARTBEAT_MS
           for i in schedulers):
        return data.now_ms, None
    last = min(data.now_ms, max(i.stopped_at_ms or i.seen_at_ms for i in schedulers))
    return last, ("no scheduler is running: the window ends where one last ran "
                  "(use --to to choose another end)")


def _dropped_by_misfire(occurrence: int, misfires: Iterable[MisfireRecord]) -> bool:
    for misfire in misfires:
        if misfire.due_at_ms <= occurrence <= misfire.skipped_through_ms:
            return not (misfire.policy == "fire_once" and occurrence == misfire.due_at_ms)
    return False


def _check_fences(report: TriggerReport, runs: list[RunRecord], claims: list[ClaimRecord]) -> None:
    by_version = {claim.version: claim for claim in claims}
    acquired = sorted((claim.version, claim.acquired_at_ms) for claim in claims)
    for run in runs:
        claim = by_version.get(run.claim_version) if run.claim_version is not None else None
        if claim is None or claim.token != run.claim_token:
            report.fenced_out.append(run.id)  # no evidence of the claim that admitted it
            continue
        if claim.cursor_ms not in (None, run.scheduled_for_ms):
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
    if params.end_ms is not None:
        end = params.end_ms
    else:
        end, end_note = default_end(data)
    required_until = end - params.settle_ms
    task_revisions: dict[Key, list[tuple[int, int, bool]]] = defaultdict(list)
    for task in data.task_revisions:
        task_revisions[(task.project_id, task.task_id)].append((task.revision, task.published_at_ms, task.enabled))
    for entries in task_revisions.values():
        entries.sort()
    quiet: dict[str, list[Interval]] = defaultdict(list)
    for archival in data.archivals:
        quiet[archival.project_id].append((archival.archived_at_ms, archival.restored_at_ms))
    by_trigger: dict[Key, list[TriggerRevisionRecord]] = defaultdict(list)
    for revision in revisions:
        by_trigger[(revision.project_id, revision.trigger_id)].append(revision)
    runs: dict[Key, list[RunRecord]] = defaultdict(list)
    for run in data.runs:
        if start <= run.scheduled_for_ms <= end:
            runs[(run.project_id, run.trigger_id)].append(run)
    misfires: dict[tuple[str, str, int], list[MisfireRecord]] = defaultdict(list)
    for misfire in data.misfires:
        misfires[(misfire.project_id, misfire.trigger_id, misfire.trigger_revision)].append(misfire)
    claims: dict[Key, list[ClaimRecord]] = defaultdict(list)
    for claim in data.claims or ():
        claims[(claim.project_id, claim.trigger_id)].append(claim)

    reports = []
    for key in sorted(by_trigger):
        chain = sorted(by_trigger[key], key=lambda r: r.revision)
        checker = _Trigger(TriggerReport(project_id=key[0], trigger_id=key[1]), params,
                           start, end, required_until)
        mine = runs.get(key, [])
        known_revisions = {r.revision for r in chain}
        for run in mine:
            if run.trigger_revision not in known_revisions:
                checker.report.spurious.append(run.scheduled_for_ms)
        for index, revision in enumerate(chain):
            following = chain[index + 1].published_at_ms if index + 1 < len(chain) else None
            stop = _stop_of(revision, following, task_revisions)
            can_fire = revision.enabled and _pinned_task_enabled(revision, task_revisions)
            checker.revision(
                revision, stop, can_fire,
                [r for r in mine if r.trigger_revision == revision.revision],
                misfires.get((key[0], key[1], revision.revision), []),
                quiet.get(revision.project_id, []),
            )
        report = checker.report
        report.bad_shape = [r.id for r in mine if r.attempts != 1 or r.admission_events != 2]
        if data.claims is not None:
            _check_fences(report, mine, claims.get(key, []))
            _check_cursors(report, claims.get(key, []))
        report.duplicates += _cross_revision_duplicates(mine)
        reports.append(report)
    result = AuditReport(
        dialect=data.dialect, start_ms=start, end_ms=end, required_until_ms=required_until,
        settle_ms=params.settle_ms, grace_ms=params.grace_ms, lease_ms=params.lease_ms,
        triggers=reports,
    )
    if end_note is not None:
        result.notes.append(end_note)
    if data.claims is None:
        result.notes.append("no claim log (SQLite): fence and cursor-history checks do not apply")
    if ledger is not None:
        in_window = [line for line in ledger
                     if start <= int(str(line["scheduled_for_ms"])) <= end
                     and (params.project_id is None or line["project"] == params.project_id)
                     and (params.trigger_id is None or line["trigger"] == params.trigger_id)]
        result.ledger = check_ledger(in_window, data.runs)
    return result


def _cross_revision_duplicates(runs: list[RunRecord]) -> int:
    """Two revisions admitting the same instant of one trigger is a duplicate too."""
    revisions_at: dict[int, set[int]] = defaultdict(set)
    for run in runs:
        revisions_at[run.scheduled_for_ms].add(run.trigger_revision)
    return sum(len(found) - 1 for found in revisions_at.values() if len(found) > 1)


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
