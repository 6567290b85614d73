"""The reconciler: settles Attempts whose executor is gone, a few seconds after their lease
expired (by the store's clock), and queues Runs whose retry wait is over -- in every replica
and with no leader: each cycle takes the rows nobody else is handling (SKIP LOCKED) and,
under the row locks, offers an unstarted Attempt again, marks a started one ``lost`` (its
Run lost, retried or cancelled), and gives due retries a new Attempt; it also ends flow runs
past their timeout. Each cycle first asks the store, in one read without locks, whether any
of these could find anything; an idle cycle is that one read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from qinglong.domain.schedule import check_budget
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.params import LeaseRescueParams, RescuedAttempt

DEFAULT_GRACE_MS = 5_000
DEFAULT_LIMIT = 64


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    rescued: int
    promoted: int
    saturated: bool  # more may be waiting: look again at once
    next_due_in_ms: int | None = None


class Reconciler:
    def __init__(self, store: RunStore, *, grace_ms: int = DEFAULT_GRACE_MS,
                 limit: int = DEFAULT_LIMIT,
                 on_rescued: Callable[[RescuedAttempt], None] | None = None,
                 on_promoted: Callable[[list[str]], None] | None = None,
                 prune: Callable[[], int] | None = None, prune_every: int = 30,
                 expire_flows: Callable[[], list[str]] | None = None) -> None:
        """``prune``: removes output past its retention, every ``prune_every`` cycles;
        ``expire_flows``: ends the flow runs past their timeout, in a cycle whose probe
        found one."""
        self._store = store
        self._expire_flows = expire_flows
        self._prune = prune
        self._prune_every = prune_every
        self._cycles = 0
        self._on_promoted = on_promoted
        self._grace_ms = grace_ms
        self._limit = check_budget(limit, "limit")
        self._on_rescued = on_rescued

    def run_cycle(self) -> ReconcileReport:
        self._cycles += 1
        if self._prune is not None and self._cycles % self._prune_every == 1:
            self._prune()
        pending = self._store.reconcile_pending(self._grace_ms)
        if pending.flows_overdue and self._expire_flows is not None:
            self._expire_flows()
        if not pending.settle:
            return ReconcileReport(rescued=0, promoted=0, saturated=False)
        rescued = self._store.lease_rescue(LeaseRescueParams(limit=self._limit,
                                                             grace_ms=self._grace_ms))
        for attempt in rescued:
            if self._on_rescued is not None:
                self._on_rescued(attempt)
        promoted = self._store.retry_promote(self._limit)
        if promoted and self._on_promoted is not None:
            self._on_promoted(promoted)
        busy = len(rescued) >= self._limit or len(promoted) >= self._limit
        return ReconcileReport(rescued=len(rescued), promoted=len(promoted), saturated=busy)
