"""The dashboard's store: one page of current triggers with what each one's latest Runs say,
read in one statement whatever the number of triggers (queries/dashboard.sql). Written once
over the kernel.

A page lists triggers in (project, trigger) order after a key, so the next page starts
exactly after the last one shown however many triggers are published meanwhile. Each
trigger's facts come from its latest ``window`` Runs by occurrence (``scheduled_for_ms``,
then id, newest first), read along ``runs_trigger_idx``: never more than ``window`` Runs per
trigger, however many it has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from qinglong.domain.identifiers import project_id
from qinglong.domain.model import TriggerView
from qinglong.errors import NotFound
from qinglong.storage import records
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Database, Tx


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerSummaryParams:
    project_id: str | None  # None: every project
    projects: tuple[str, ...] | None = None  # only these (the ones the caller may read)
    label: str | None = None  # only the triggers with this label
    only: tuple[tuple[str, str], ...] | None = None  # only these (project, trigger) pairs
    skip: tuple[tuple[str, str], ...] | None = None  # all but these
    after: tuple[str, str] | None  # the (project, trigger) the previous page ended with
    limit: int  # triggers on the page
    window: int  # how many of each trigger's latest Runs the counts cover


@dataclass(frozen=True, slots=True, kw_only=True)
class LastRun:
    """A trigger's latest Run by occurrence."""

    id: str
    status: str
    trigger_type: str
    scheduled_for_ms: int
    created_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunWindow:
    """What a trigger's latest Runs (at most the window) say, as service/stats.py counts:
    a lost Run is a failure; a Run its overlap policy ended is skipped."""

    runs: int
    successes: int
    failures: int
    cancelled: int
    skipped: int
    max_lag_ms: int | None  # the largest admission lag of a Run the scheduler admitted


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerSummaryRow:
    head: TriggerView
    window: RunWindow
    last: LastRun | None


def _summary(row: Row) -> TriggerSummaryRow:
    head = TriggerView(
        revision=records.trigger_revision(row),
        schedule=records.schedule_state(row, "s_"),
        task_pin_current=bool(row["task_pin_current"]),
        project_active=bool(row["project_active"]),
        deleted_at_ms=records.optional_int(row["h_deleted_at_ms"]),
        pause_reason=row.get("pause_reason"),
    )
    window = RunWindow(
        runs=int(row["w_runs"]), successes=int(row["w_successes"]),
        failures=int(row["w_failures"]), cancelled=int(row["w_cancelled"]),
        skipped=int(row["w_skipped"]), max_lag_ms=records.optional_int(row["w_max_lag_ms"]))
    last = None
    if row["l_id"] is not None:
        last = LastRun(
            id=str(row["l_id"]), status=str(row["l_status"]),
            trigger_type=str(row["l_trigger_type"]),
            scheduled_for_ms=int(row["l_scheduled_for_ms"]),
            created_at_ms=int(row["l_created_at_ms"]),
            started_at_ms=records.optional_int(row["l_started_at_ms"]),
            finished_at_ms=records.optional_int(row["l_finished_at_ms"]))
    return TriggerSummaryRow(head=head, window=window, last=last)


def _pairs(pairs: tuple[tuple[str, str], ...] | None) -> str | None:
    return None if pairs is None else json.dumps([list(pair) for pair in pairs])


class DashboardStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def trigger_summary_page(self, params: TriggerSummaryParams) -> list[TriggerSummaryRow]:
        """One page of current (not deleted) triggers with their Run facts: two statements
        at most (the project's existence, when one is asked for, and the page)."""
        def work(tx: Tx) -> list[TriggerSummaryRow]:
            if params.project_id is not None:
                project_id(params.project_id)
                if tx.one("project_get", {"id": params.project_id}) is None:
                    raise NotFound("project", params.project_id)
            after_project, after_trigger = params.after or (None, None)
            rows = tx.execute("trigger_summary_page", {
                "project_id": params.project_id, "after_project": after_project,
                "projects": None if params.projects is None else json.dumps(params.projects),
                "after_trigger": after_trigger, "limit": params.limit, "label": params.label,
                "window": params.window, "only": _pairs(params.only),
                "skip": _pairs(params.skip)}).fetchall()
            return [_summary(row) for row in rows]

        return self._db.read("summarize triggers", work)
