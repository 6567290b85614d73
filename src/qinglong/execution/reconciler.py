"""The reconciler: settles Attempts whose executor is gone, a few seconds after their lease
expired (by the store's clock), in every replica and with no leader: each cycle takes the
expired leases nobody else is handling (SKIP LOCKED) and, under the row locks, offers an
unstarted Attempt again or marks a started one ``lost``."""

from __future__ import annotations

from collections.abc import Callable

from qinglong.domain.schedule import check_budget
from qinglong.scheduler.report import CycleReport
from qinglong.storage.ports import LeaseRescueParams, RescuedAttempt, RunLifecycleStore

DEFAULT_GRACE_MS = 5_000
DEFAULT_LIMIT = 64


class Reconciler:
    def __init__(self, store: RunLifecycleStore, *, grace_ms: int = DEFAULT_GRACE_MS,
                 limit: int = DEFAULT_LIMIT,
                 on_rescued: Callable[[RescuedAttempt], None] | None = None) -> None:
        self._store = store
        self._grace_ms = grace_ms
        self._limit = check_budget(limit, "limit")
        self._on_rescued = on_rescued

    def run_cycle(self) -> CycleReport:
        rescued = self._store.lease_rescue(LeaseRescueParams(limit=self._limit,
                                                             grace_ms=self._grace_ms))
        for attempt in rescued:
            if self._on_rescued is not None:
                self._on_rescued(attempt)
        return CycleReport(claimed=len(rescued), saturated=len(rescued) >= self._limit)
