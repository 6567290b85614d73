"""The audit of execution: how every Run in the window was carried out, judged from the
database alone (the admission audit in ``checker.py`` judges whether it should exist).

- E1 every ended Run has exactly one terminal event, and no active Attempt;
- E2 its Attempts are numbered 1..n with at most one active at a time;
- E3 no two Attempts of one Run ran at the same time (by their recorded start and end);
- E4 nothing is stuck: a Run still executing has a lease that has not been expired longer
  than the lease plus the grace the reconciler is given, and a Run waiting for a retry is
  not overdue by more than that either;
- E5 no Run spent more attempts than its policy's maximum (checked by the caller that knows
  the policies; here: attempts spent never exceed the Attempts that exist).

A Run that ended for good before retention's events mark with no event left had its events
pruned (docs/retention.md): E1 is not judged for it (``pruned``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qinglong.domain.retention import trusted_mark
from qinglong.domain.runs import ENDED_RUN, TERMINAL_RUN, RunStatus
from qinglong.storage.kernel import Tx


@dataclass(slots=True)
class ExecutionReport:
    runs: int = 0
    ended: int = 0
    in_progress: int = 0
    retried: int = 0
    terminal_events: list[str] = field(default_factory=list)  # E1
    attempt_chain: list[str] = field(default_factory=list)  # E2
    overlapping: list[str] = field(default_factory=list)  # E3
    stuck: list[str] = field(default_factory=list)  # E4
    overspent: list[str] = field(default_factory=list)  # E5
    pruned: int = 0  # ended before the evidence horizon, events pruned: E1 not judged

    @property
    def violations(self) -> int:
        return (len(self.terminal_events) + len(self.attempt_chain) + len(self.overlapping)
                + len(self.stuck) + len(self.overspent))

    def findings(self) -> dict[str, list[str]]:
        return {"E1 one terminal state": self.terminal_events,
                "E2 attempt chain": self.attempt_chain,
                "E3 overlapping attempts": self.overlapping,
                "E4 stuck": self.stuck, "E5 attempts overspent": self.overspent}


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def check_execution(tx: Tx, *, now_ms: int, from_ms: int, to_ms: int,
                    stale_ms: int) -> ExecutionReport:
    """Judge E1-E5 over the Runs scheduled in [from_ms, to_ms] as of ``now_ms``; a lease or a
    retry overdue by more than ``stale_ms`` is stuck."""
    window: Mapping[str, object] = {"from_ms": from_ms, "to_ms": to_ms}
    report = ExecutionReport()
    marks = {r["subject"]: int(r["pruned_before_ms"])
             for r in tx.all("audit_retention_marks")}
    events_mark = trusted_mark(marks.get("run_events"), now_ms)
    for row in tx.all("audit_run_execution", window):
        _judge_run(report, row, now_ms, stale_ms, events_mark)
    spans: dict[str, list[tuple[int, int, int]]] = {}
    for row in tx.all("audit_attempt_spans", window):
        finished = _int(row["finished_at_ms"])
        spans.setdefault(row["run_id"], []).append(
            (int(row["attempt"]), int(row["started_at_ms"]),
             finished if finished is not None else now_ms))
    for run_id, ranges in spans.items():
        ranges.sort(key=lambda span: span[1])
        latest: tuple[int, int] | None = None  # (attempt, end) of the latest-ending so far
        for attempt, start, end in ranges:
            if latest is not None and start < latest[1]:
                report.overlapping.append(
                    f"{run_id}: attempt {attempt} started before attempt {latest[0]} ended "
                    f"({latest[1] - start} ms overlap)")
            if latest is None or end > latest[1]:
                latest = (attempt, end)
    return report


def _judge_run(report: ExecutionReport, row: Any, now_ms: int, stale_ms: int,
               events_pruned_before_ms: int | None) -> None:
    run_id, status = str(row["id"]), RunStatus(row["status"])
    attempts, last = int(row["attempts"]), _int(row["last_attempt"])
    active, terminal = int(row["active_attempts"]), int(row["terminal_events"])
    report.runs += 1
    if attempts > 1:
        report.retried += 1
    finished = _int(row["finished_at_ms"])
    if (status in TERMINAL_RUN and int(row["events"]) == 0 and finished is not None
            and events_pruned_before_ms is not None and finished < events_pruned_before_ms):
        report.ended += 1
        report.pruned += 1
        if active:
            report.terminal_events.append(f"{run_id}: {status.value} with {active} active attempts")
    elif status in ENDED_RUN:
        report.ended += 1
        if terminal != 1 or active:
            report.terminal_events.append(
                f"{run_id}: {status.value} with {terminal} terminal events and {active} active "
                "attempts")
    else:
        report.in_progress += 1
        if terminal:
            report.terminal_events.append(f"{run_id}: {status.value} after a terminal event")
    if last is not None and last != attempts:
        report.attempt_chain.append(f"{run_id}: attempts numbered up to {last} but {attempts} exist")
    if active > 1:
        report.attempt_chain.append(f"{run_id}: {active} attempts active at once")
    expires = _int(row["lease_expires_at_ms"])
    if status in (RunStatus.DISPATCHING, RunStatus.RUNNING) and (
            expires is None or now_ms - expires > stale_ms):
        report.stuck.append(f"{run_id}: {status.value} with a lease that ended "
                            f"{'never' if expires is None else f'{now_ms - expires} ms ago'}")
    retry_at = _int(row["retry_at_ms"])
    if status is RunStatus.RETRY_WAIT and retry_at is not None and now_ms - retry_at > stale_ms:
        report.stuck.append(f"{run_id}: retry due {now_ms - retry_at} ms ago")
    if int(row["attempts_spent"]) > attempts:
        report.overspent.append(f"{run_id}: {row['attempts_spent']} attempts spent of "
                                f"{attempts}")
