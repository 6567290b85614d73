"""`ql audit`: prove from the database that every occurrence was admitted exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from qinglong.audit.model import AuditParams, AuditReport, TriggerReport
from qinglong.cli.context import CLOCK
from qinglong.cli.output import emit_json, rfc3339, say
from qinglong.cli.params import DURATION, Instant, database_url_option, json_option
from qinglong.errors import InvalidInput

EXIT_VIOLATIONS = 5


def _percentile(values: list[int], p: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _trigger_json(t: TriggerReport) -> dict[str, object]:
    return {
        "project": t.project_id, "trigger": t.trigger_id, "expected": t.expected,
        "admitted": t.admitted, "duplicates": t.duplicates,
        "gaps_explained": {"misfire": t.gaps_misfire, "superseded": t.gaps_superseded,
                           "paused": t.gaps_paused, "backfilled": t.gaps_backfilled},
        "gaps_unexplained": t.gaps_unexplained, "spurious": t.spurious,
        "fenced_out_runs": t.fenced_out, "bad_shape_runs": t.bad_shape,
        "cursor_regressions": t.cursor_regressions, "misfire_violations": t.misfire_violations,
        "pause_violations": t.pause_violations, "evidence_pruned_runs": t.evidence_pruned,
        "lag_ms": {"p50": _percentile(t.lags_ms, 50), "p99": _percentile(t.lags_ms, 99),
                   "max": max(t.lags_ms, default=None)},
        "violations": t.violations,
    }


STUCK_MARGIN_MS = 15_000  # the reconciler settles a lease 5 s after it ends, every 2 s


def report_json(report: AuditReport) -> dict[str, object]:
    lags = [lag for t in report.triggers for lag in t.lags_ms]
    totals = {
        "expected": sum(t.expected for t in report.triggers),
        "admitted": sum(t.admitted for t in report.triggers),
        "duplicates": sum(t.duplicates for t in report.triggers),
        "gaps_explained": sum(t.gaps_misfire + t.gaps_superseded + t.gaps_paused
                              + t.gaps_backfilled for t in report.triggers),
        "gaps_unexplained": sum(len(t.gaps_unexplained) for t in report.triggers),
        "spurious": sum(len(t.spurious) for t in report.triggers),
        "fenced_out_runs": sum(len(t.fenced_out) for t in report.triggers),
        "bad_shape_runs": sum(len(t.bad_shape) for t in report.triggers),
        "cursor_regressions": sum(t.cursor_regressions for t in report.triggers),
        "misfire_violations": sum(len(t.misfire_violations) for t in report.triggers),
        "pause_violations": sum(len(t.pause_violations) for t in report.triggers),
        "lag_ms": {"p50": _percentile(lags, 50), "p99": _percentile(lags, 99), "max": max(lags, default=None)},
    }
    out: dict[str, object] = {
        "ok": report.ok, "violations": report.violations, "dialect": report.dialect,
        "window": {"from": rfc3339(report.start_ms), "to": rfc3339(report.end_ms),
                   "from_ms": report.start_ms, "to_ms": report.end_ms,
                   "to_source": report.end_source,
                   "required_until_ms": report.required_until_ms},
        "settle_ms": report.settle_ms, "grace_ms": report.grace_ms, "lease_ms": report.lease_ms,
        "totals": totals, "triggers": [_trigger_json(t) for t in report.triggers], "notes": report.notes,
    }
    if report.evidence_horizon_ms is not None:
        out["retention"] = {
            "evidence_horizon": rfc3339(report.evidence_horizon_ms),
            "evidence_horizon_ms": report.evidence_horizon_ms,
            "evidence_pruned_runs": sum(len(t.evidence_pruned) for t in report.triggers)}
    if report.execution is not None:
        e = report.execution
        out["execution"] = {"runs": e.runs, "ended": e.ended, "in_progress": e.in_progress,
                            "retried": e.retried, "events_pruned": e.pruned,
                            "violations": e.violations,
                            "findings": e.findings()}
    if report.flows is not None:
        f = report.flows
        out["flows"] = {"flow_runs": f.flow_runs, "running": f.running,
                        "steps_released": f.steps_released, "steps_skipped": f.steps_skipped,
                        "violations": f.violations, "findings": f.findings()}
    if report.ledger is not None:
        out["ledger"] = {"acknowledged": report.ledger.acknowledged,
                         "double_deliveries": report.ledger.double_deliveries,
                         "acknowledged_but_missing": report.ledger.missing}
    return out


def _read_ledger(path: Path) -> list[dict[str, object]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput("ledger", f"cannot read {str(path)!r} ({exc.strerror})") from exc
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            raise InvalidInput("ledger", f"line {number} is not JSON") from None
        if not isinstance(entry, dict) or not {"project", "trigger", "scheduled_for_ms", "run_id"} <= set(entry):
            raise InvalidInput("ledger", f"line {number} lacks project/trigger/scheduled_for_ms/run_id")
        lines.append(entry)
    return lines


@click.command()
@database_url_option
@click.option("--from", "start", type=Instant(), help="Window start (default: the first publish).")
@click.option("--to", "end", type=Instant(),
              help="Window end (default: the database's now while a scheduler is running, "
                   "otherwise the last evidence that one ran: its clean stop, last heartbeat or "
                   "latest scheduling decision, whichever is latest; the report names which).")
@click.option("--settle", type=DURATION, default="5s", show_default=True,
              help="Occurrences within this long before --to are not required yet.")
@click.option("--grace", type=DURATION, default="30s", show_default=True,
              help="The misfire grace the scheduler ran with.")
@click.option("--lease", type=DURATION, default="30s", show_default=True,
              help="The claim lease the replicas ran with (cluster).")
@click.option("--worker-lease", type=DURATION, default="30s", show_default=True,
              help="The Attempt lease the workers ran with: a Run still executing whose lease "
                   "ended longer ago than this plus 15 s is reported stuck.")
@click.option("--project", metavar="PROJECT", help="Only this project.")
@click.option("--trigger", "trigger_id", metavar="TRIGGER", help="Only this trigger.")
@click.option("--ledger", type=click.Path(dir_okay=False, path_type=Path),
              help="A file of acknowledged admissions (JSON lines) to check against the database.")
@json_option
def audit(database_url: str, start: int | None, end: int | None, settle: int, grace: int, lease: int,
          worker_lease: int, project: str | None, trigger_id: str | None, ledger: Path | None, as_json: bool) -> None:
    """Recompute every nominal occurrence in a window (database time) and check the Runs.

    Reports per trigger: expected, admitted, duplicates, gaps explained by a recorded misfire,
    by a revision that stopped first, by a pause (only the occurrence in progress when a
    pause ended may have run) or by a backfill that admitted it later, unexplained gaps, spurious Runs, Runs admitted by a
    fenced-out claim, Run shape (a first Attempt, 2 admission events), cursor regressions,
    and admission lag. Retention records in the database how far it pruned claims and Run
    events: Runs whose evidence it removed (before that mark) are judged by what remains and
    counted, not reported as violations; evidence missing after the mark, or with no mark, is
    a violation (docs/retention.md). Then how every Run in the window was carried out: exactly one
    terminal state per ended Run, Attempts numbered 1..n with at most one active, no two
    Attempts of a Run running at once, nothing stuck executing past its lease, and no more
    attempts spent than made. And every flow run started in the window: each step it released
    admitted once, released only when its edges allowed it, none lost, and its outcome what
    its nodes say (docs/controls/flows.md). Exits 5 when anything is violated.
    """
    from qinglong.profiles.audit_backend import run_audit

    if start is not None and end is not None and start > end:
        raise InvalidInput("from", "must not be after --to")
    params = AuditParams(start_ms=start, end_ms=end, settle_ms=settle, grace_ms=grace,
                         lease_ms=lease, project_id=project, trigger_id=trigger_id,
                         execution_stale_ms=worker_lease + STUCK_MARGIN_MS)
    report = run_audit(database_url, CLOCK, params, _read_ledger(ledger) if ledger else None)
    data = report_json(report)
    if as_json:
        emit_json(data)
    else:
        _print(report, data)
    if not report.ok:
        raise SystemExit(EXIT_VIOLATIONS)


def _print(report: AuditReport, data: dict[str, Any]) -> None:
    from qinglong.audit.checker import END_SOURCES

    say(f"audit {report.dialect} from {rfc3339(report.start_ms)} to {rfc3339(report.end_ms)} "
        f"[{END_SOURCES.get(report.end_source, report.end_source)}] "
        f"(required until {rfc3339(report.required_until_ms)}; grace {report.grace_ms} ms, "
        f"lease {report.lease_ms} ms)")
    header = (f"{'trigger':<28}{'expected':>9}{'admitted':>9}{'dup':>5}{'gap-ok':>7}{'gap-bad':>8}"
              f"{'spur':>6}{'fenced':>7}{'shape':>6}{'cursor':>7}{'p50ms':>7}{'p99ms':>7}")
    say(header)
    for t in data["triggers"]:
        say(f"{t['project'] + '/' + t['trigger']:<28}{t['expected']:>9}{t['admitted']:>9}"
            f"{t['duplicates']:>5}{sum(t['gaps_explained'].values()):>7}{len(t['gaps_unexplained']):>8}"
            f"{len(t['spurious']):>6}{len(t['fenced_out_runs']):>7}{len(t['bad_shape_runs']):>6}"
            f"{t['cursor_regressions']:>7}{t['lag_ms']['p50'] or '-':>7}{t['lag_ms']['p99'] or '-':>7}")
    totals = data["totals"]
    say(f"totals: {json.dumps(totals, sort_keys=True)}")
    if "ledger" in data:
        say(f"ledger: {json.dumps(data['ledger'], sort_keys=True)}")
    execution = report.execution
    if execution is not None:
        say(f"execution: {execution.runs} Runs, {execution.ended} ended, {execution.in_progress} "
            f"in progress, {execution.retried} with more than one attempt")
        for name, found in execution.findings().items():
            for finding in found[:20]:
                say(f"  {name}: {finding}")
    flows = report.flows
    if flows is not None and flows.flow_runs:
        say(f"flows: {flows.flow_runs} flow runs ({flows.running} running), "
            f"{flows.steps_released} steps released, each once; {flows.steps_skipped} skipped"
            if not flows.violations else
            f"flows: {flows.flow_runs} flow runs, {flows.violations} violation(s)")
        for name, found in flows.findings().items():
            for finding in found[:20]:
                say(f"  {name}: {finding}")
    if "retention" in data:
        say(f"retention: claims and events were pruned up to "
            f"{data['retention']['evidence_horizon']}; {data['retention']['evidence_pruned_runs']} Run(s) judged "
            "without them (docs/retention.md)")
    for note in report.notes:
        say(f"note: {note}")
    say("OK: every occurrence exactly once, every Run carried out consistently" if report.ok
        else f"VIOLATIONS: {report.violations}")
