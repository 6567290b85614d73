"""The standalone/edge coordinator: one bounded cycle over due SQLite schedule rows."""

from __future__ import annotations

from collections.abc import Callable

from qinglong.clock import Clock
from qinglong.diagnostics import (
    DiagnosticSink,
    diagnostic_from,
    emit,
)
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.decision import Decision, Disposition, check_grace
from qinglong.domain.schedule import ScheduleCandidate, check_budget
from qinglong.errors import InvalidSchedule, RecordCorrupt
from qinglong.ids import new_uuid
from qinglong.scheduler.report import CycleReport, Stats, Tally, corrupt_row_diagnostic
from qinglong.storage.ports import (
    CommitResult,
    CorruptScheduleRow,
    LocalScheduleStore,
    ScheduleCommitParams,
    ScheduleListDueParams,
)

AdmittedHook = Callable[[ScheduleCandidate, Decision, CommitResult], None]


class LocalCoordinator:
    """Decide and commit up to ``budget`` due rows per cycle, observing the node clock."""

    def __init__(
        self,
        store: LocalScheduleStore,
        clock: Clock,
        *,
        budget: int = 16,
        grace_ms: int = 30_000,
        new_id: Callable[[], str] = new_uuid,
        on_committed: AdmittedHook | None = None,
        diagnostics: DiagnosticSink | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._budget = check_budget(budget)
        self._grace_ms = check_grace(grace_ms)
        self._new_id = new_id
        self._on_committed = on_committed
        self._diagnostics = diagnostics
        self.stats = Stats()

    def run_cycle(self, stop_requested: Callable[[], bool] = lambda: False) -> CycleReport:
        """Decide and commit due rows until the budget is spent, nothing is due, or a stop is
        requested (checked between listings, so a drain never waits for a whole catch-up)."""
        tally = Tally()
        failed: set[tuple[str, str]] = set()  # rows that errored: not retried in this cycle
        while tally.claimed < self._budget and not stop_requested():
            listed = self._store.schedule_list_due(
                ScheduleListDueParams(
                    now_ms=self._clock.now_ms(), limit=self._budget - tally.claimed + len(failed)
                )
            )
            fresh = [item for item in listed if (item.project_id, item.trigger_id) not in failed]
            if not fresh:
                break
            for item in fresh[: self._budget - tally.claimed]:
                tally.claimed += 1
                if isinstance(item, CorruptScheduleRow):
                    tally.errors += 1
                    failed.add((item.project_id, item.trigger_id))
                    emit(self._diagnostics, corrupt_row_diagnostic(item))
                elif not self._decide_and_commit(item, tally):
                    failed.add((item.project_id, item.trigger_id))
        now = self._clock.now_ms()
        next_due = self._store.schedule_next_due_at(now)
        hint = None if next_due is None else max(0, next_due - now)
        report = tally.report(budget=self._budget, next_due_in_ms=hint)
        self.stats.add(report, tally.raced_reasons)
        return report

    def _decide_and_commit(self, candidate: ScheduleCandidate, tally: Tally) -> bool:
        """Decide and commit one row; False when it failed and must wait for the next cycle."""
        observed = self._clock.now_ms()
        tally.observed.append(observed)
        try:
            decision = candidate.decide(observed_at_ms=observed, grace_ms=self._grace_ms)
        except (InvalidSchedule, RecordCorrupt) as exc:
            tally.errors += 1
            emit(self._diagnostics, diagnostic_from("scheduler", exc))
            return False
        ids = AdmissionIds.new(self._new_id) if decision.disposition is Disposition.ADMIT else None
        try:
            result = self._store.schedule_commit(
                ScheduleCommitParams(
                    candidate=candidate, decision=decision, ids=ids, committed_at_ms=self._clock.now_ms()
                )
            )
        except RecordCorrupt as exc:
            tally.errors += 1
            emit(self._diagnostics, diagnostic_from("scheduler", exc))
            return False
        tally.record(result)
        if self._on_committed is not None:
            try:
                self._on_committed(candidate, decision, result)
            except Exception as exc:  # noqa: BLE001 - an observer must not break admission
                emit(self._diagnostics, diagnostic_from("scheduler", exc))
        return True
