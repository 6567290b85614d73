"""A run store that remembers what each leased Run runs (project, task, trigger), so a
finished Run is counted under its task and trigger (`ql serve` and `ql worker` metrics)."""

from __future__ import annotations

from qinglong.metrics import LeaseTargets
from qinglong.storage.kernel import Database
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.params import AttemptLease, LeaseAcquireParams


class LeaseRecordingRunStore(RunStore):
    def __init__(self, db: Database, *, actor_id: str, targets: LeaseTargets) -> None:
        super().__init__(db, actor_id=actor_id)
        self._targets = targets

    def lease_acquire(self, params: LeaseAcquireParams) -> list[AttemptLease]:
        leases = super().lease_acquire(params)
        self._targets.remember(leases)
        return leases
