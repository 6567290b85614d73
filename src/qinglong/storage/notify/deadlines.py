"""The deadline notifications: ``running_long`` (a Run still running its rule's delay after
its attempt started) and ``late_start`` (a Run still queued, never started, its rule's delay
after its scheduled time; a manual Run is scheduled for when it was asked for).

Like ``unplaceable`` (storage/notify/unplaceable.py) these are states, not rows that appear
once, so they are walked, not scanned: each pass looks at a bounded page of the Runs in that
state that have waited at least the shortest such delay, after a position the dispatcher
keeps (the running Runs by their attempt's start; the queued ones along runs_queued_idx),
and names for each Run the channels whose rule covers it, whose delay it has run out, and
that have no outbox row for it yet. The key is one per Run (``run.running_long:<run id>``,
``run.late_start:<run id>``), unique per channel: two replicas that find the same Run write
one row, and a Run is reported once, even when a retry runs long again.
"""

from __future__ import annotations

from qinglong.domain.notify.events import RuleEvent
from qinglong.domain.notify.payload import DeadlineFacts, NotifyEvent, RunFacts
from qinglong.domain.runs import RunStatus
from qinglong.storage.dbapi import Row
from qinglong.storage.notify.params import UnplaceableParams, UnplaceableReport
from qinglong.storage.notify.rows import OutboxUnit, optional_int

START = (-1, "")  # before every position
WALKED = (RuleEvent.RUNNING_LONG, RuleEvent.LATE_START)


class DeadlineScan(OutboxUnit):
    """One pass over a page of the Runs that may be late for ``event``, at one reading of the
    store's clock."""

    def scan(self, event: RuleEvent, params: UnplaceableParams) -> UnplaceableReport:
        if event not in WALKED:
            raise ValueError(f"{event.value} is not a deadline")
        after_ms, after_id = params.after or START
        rows = self._all(f"notify_{event.value}_page", {
            "after_ms": after_ms, "after_id": after_id, "now_ms": self.now_ms,
            "limit": params.limit})
        if not rows:
            return UnplaceableReport()
        runs = {row["id"] for row in rows}
        told: set[tuple[str, str]] = set()
        enqueued = 0
        for row in rows:
            # rows come by Run, then shortest delay: a channel two rules cover gets one
            if row["channel"] is None or (row["id"], row["channel"]) in told:
                continue
            told.add((row["id"], row["channel"]))
            enqueued += self._insert(_event(event, row, self.now_ms), row)
        last = rows[-1]
        full = len(runs) >= params.limit
        return UnplaceableReport(
            examined=len(runs), enqueued=enqueued,
            next_after=(int(last["pos_ms"]), str(last["id"])) if full else None)


def _event(event: RuleEvent, row: Row, now_ms: int) -> NotifyEvent:
    since = int(row["since_ms"])
    running = event is RuleEvent.RUNNING_LONG
    run = RunFacts(
        id=row["id"], status=(RunStatus.RUNNING if running else RunStatus.QUEUED).value,
        task_name=row["task_name"], origin=row["execution_origin"],
        requested_by=row["triggered_by"],
        scheduled_for_ms=optional_int(row["scheduled_for_ms"]),
        created_at_ms=int(row["created_at_ms"]), started_at_ms=since if running else None,
        finished_at_ms=None, attempts=int(row["attempts_spent"]) + (1 if running else 0),
        exit_code=None,
        error_code=None, error_summary=None, cancel_reason=None)
    return NotifyEvent(
        event=event.wire, source_key=f"{event.wire}:{row['id']}", occurred_at_ms=now_ms,
        project_id=row["project_id"], task_id=row["task_id"], trigger_id=row["trigger_id"],
        run=run, deadline=DeadlineFacts(since_ms=since, waited_ms=max(0, now_ms - since),
                                        after_ms=int(row["after_ms"])))
