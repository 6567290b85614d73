"""The ``unplaceable`` notification: a queued Run whose required worker labels no live worker
offers, once it has waited longer than a rule's delay (docs/controls/placement.md).

Unlike Run outcomes and misfires, this is a state, not a row that appears once: a Run may be
placeable when it passes its delay and unplaceable a minute later (its worker stopped), or
the other way round. So it is not scanned by a time cursor; each pass walks a bounded page of
the queued Runs that require labels and have waited at least the shortest such delay, oldest
first after a position the dispatcher keeps (and wraps round at the end), along
``runs_labelled_queued_idx``. For each Run the page names the channels whose rule covers it,
whose delay it has waited out, and that have no outbox row for it yet. Whether a live worker
could take it is judged here, by the one definition /metrics and ``ql run show`` use: the
labels of the executors seen within INSTANCE_STALE_MS and not stopped (``live_offers``), held
against its requirements (``domain.placement.unplaceable``).

The outbox row's key is one per Run (``run.unplaceable:<run id>``), unique per channel: two
replicas that find the same Run write one row, and a Run reported once is never reported
again, even if it becomes placeable and then unplaceable again (until that row is purged, 30
days after it was delivered).
"""

from __future__ import annotations

from qinglong.domain.notify.events import RuleEvent
from qinglong.domain.notify.payload import NotifyEvent, PlacementFacts, RunFacts
from qinglong.domain.placement import unplaceable
from qinglong.domain.runs import RunStatus
from qinglong.storage.dbapi import Row
from qinglong.storage.instances import live_offers
from qinglong.storage.notify.params import UnplaceableParams, UnplaceableReport
from qinglong.storage.notify.rows import OutboxUnit, json_value, optional_int, unplaceable_key

START = (-1, "")  # before every position (queued_at_ms is never negative)


class UnplaceableScan(OutboxUnit):
    """One pass over a page of the queued Runs that require labels, at one reading of the
    store's clock."""

    def scan(self, params: UnplaceableParams) -> UnplaceableReport:
        after_ms, after_id = params.after or START
        rows = self._all("notify_unplaceable_page", {
            "after_ms": after_ms, "after_id": after_id, "now_ms": self.now_ms,
            "limit": params.limit})
        if not rows:
            return UnplaceableReport()
        runs = {row["id"] for row in rows}
        owed = [row for row in rows if row["channel"] is not None]
        enqueued = 0
        if owed:
            offers = live_offers(self._tx, self.now_ms)
            reasons: dict[tuple[str, ...], str | None] = {}
            told: set[tuple[str, str]] = set()
            for row in owed:
                requires = tuple(json_value(row["requires"]))
                if requires not in reasons:
                    reasons[requires] = unplaceable(requires, offers)
                reason = reasons[requires]
                # rows come by Run, then shortest delay: a channel two rules cover gets one
                if reason is None or (row["id"], row["channel"]) in told:
                    continue
                told.add((row["id"], row["channel"]))
                enqueued += self._insert(_event(row, reason, requires, self.now_ms), row)
        last = rows[-1]
        full = len(runs) >= params.limit
        return UnplaceableReport(
            examined=len(runs), enqueued=enqueued,
            next_after=(int(last["queued_at_ms"]), str(last["id"])) if full else None)


def _event(row: Row, reason: str, requires: tuple[str, ...], now_ms: int) -> NotifyEvent:
    queued_at = int(row["queued_at_ms"])
    run = RunFacts(
        id=row["id"], status=RunStatus.QUEUED.value, task_name=row["task_name"],
        origin=row["execution_origin"], requested_by=row["triggered_by"],
        scheduled_for_ms=optional_int(row["scheduled_for_ms"]),
        created_at_ms=int(row["created_at_ms"]), started_at_ms=None, finished_at_ms=None,
        attempts=int(row["attempts_spent"]), exit_code=None, error_code=None,
        error_summary=None, cancel_reason=None)
    return NotifyEvent(
        event=RuleEvent.UNPLACEABLE.wire, source_key=unplaceable_key(row["id"]),
        occurred_at_ms=now_ms, project_id=row["project_id"], task_id=row["task_id"],
        trigger_id=row["trigger_id"], run=run,
        placement=PlacementFacts(requires=requires, reason=reason, queued_at_ms=queued_at,
                                 waited_ms=max(0, now_ms - queued_at),
                                 after_ms=int(row["after_ms"])))
