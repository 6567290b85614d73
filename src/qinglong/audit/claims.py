"""The audit's checks of claim evidence (cluster only: SQLite keeps no claim log): every
scheduled Run comes from the latest claim on its schedule row, within that claim's lease and
for the occurrence it covered, and a row's cursor never moves back. Evidence retention pruned
(``docs/retention.md``) is not held against a Run."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable

from qinglong.audit.model import ClaimRecord, MisfireRecord, RunRecord, TriggerReport
from qinglong.domain.decision import PAUSED_FATE
from qinglong.domain.runs import TERMINAL_RUN


def events_pruned(run: RunRecord, pruned_before_ms: int | None) -> bool:
    """Whether retention deleted this Run's events: it ended for good (a status no transition
    leaves) before the events mark and has no event left. Retention deletes all events of a
    Run in one statement, so a Run with some of them is judged in full."""
    return (pruned_before_ms is not None and run.events == 0 and run.status in TERMINAL_RUN
            and run.finished_at_ms is not None and run.finished_at_ms < pruned_before_ms)


def check_fences(report: TriggerReport, runs: list[RunRecord], claims: list[ClaimRecord],
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


def check_cursors(report: TriggerReport, claims: list[ClaimRecord]) -> None:
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


