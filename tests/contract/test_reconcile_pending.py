"""The reconciler's probe (``reconcile_pending``) on every database: one read that says
whether rescuing expired leases or queueing due retries could find anything. It must agree
with those two steps: "false" while they would find nothing, "true" as soon as either would,
so an idle reconciler cycle costs one read and a busy one loses nothing."""

from __future__ import annotations

from qinglong.domain.runs import RunStatus
from qinglong.execution.reconciler import Reconciler
from qinglong.storage.runs.params import LeaseRescueParams
from tests.contract.conftest import Backend
from tests.contract.test_leases import LEASE_MS, acquire
from tests.contract.test_retries_and_overlap import (
    RETRIES,
    RETRY_WAIT_OVER_MS,
    admit,
    detail,
    finish,
    publish,
)

# A grace of a minute: a lease aged to just past its expiry stays within it however slow the
# machine is between the ageing and the checks.
GRACE_MS = 60_000


def pending(backend: Backend) -> bool:
    return backend.lifecycle.reconcile_pending(GRACE_MS).settle


def test_an_expired_lease_is_pending_only_after_its_grace(backend: Backend) -> None:
    publish(backend)
    assert not pending(backend)  # nothing at all
    [run_id] = admit(backend)
    assert not pending(backend)  # queued, not leased
    acquire(backend)
    assert not pending(backend)  # leased and alive
    backend.age_leases(LEASE_MS + 2_000)
    assert not pending(backend)  # expired, within the grace
    assert backend.lifecycle.lease_rescue(LeaseRescueParams(grace_ms=GRACE_MS)) == []
    backend.age_leases(GRACE_MS)  # now past the grace too
    assert pending(backend)
    [rescued] = backend.lifecycle.lease_rescue(LeaseRescueParams(grace_ms=GRACE_MS))
    assert rescued.run_id == run_id
    assert not pending(backend)  # offered again: queued, nothing left to rescue


def test_a_retry_is_pending_once_its_wait_is_over(backend: Backend) -> None:
    publish(backend, retry=RETRIES)
    [run_id] = admit(backend)
    finish(backend, acquire(backend)[0])
    assert detail(backend, run_id).run.status == RunStatus.RETRY_WAIT
    assert not pending(backend)
    assert backend.lifecycle.retry_promote(10) == []
    backend.age_retries(RETRY_WAIT_OVER_MS)
    assert pending(backend)
    assert backend.lifecycle.retry_promote(10) == [run_id]
    assert not pending(backend)


def test_an_idle_reconciler_cycle_writes_nothing_and_a_pending_one_settles(
        backend: Backend) -> None:
    publish(backend, retry=RETRIES)
    [run_id] = admit(backend)
    finish(backend, acquire(backend)[0])
    reconciler = Reconciler(backend.lifecycle, grace_ms=GRACE_MS)
    report = reconciler.run_cycle()
    assert (report.rescued, report.promoted) == (0, 0)
    assert detail(backend, run_id).run.status == RunStatus.RETRY_WAIT
    backend.age_retries(RETRY_WAIT_OVER_MS)
    report = reconciler.run_cycle()
    assert (report.rescued, report.promoted) == (0, 1)
    assert detail(backend, run_id).run.status == RunStatus.QUEUED
