"""The execution audit (E1-E5) on every database: clean on Runs carried out by the lifecycle
steps (success, retries, a lost attempt retried), and it names each broken shape."""

from __future__ import annotations

from qinglong.audit.execution import ExecutionReport, check_execution
from qinglong.storage.runs.params import LeaseRescueParams
from tests.contract.conftest import Backend
from tests.contract.test_leases import acquire, run_to_running
from tests.contract.test_retries_and_overlap import (
    RETRIES,
    RETRY_WAIT_OVER_MS,
    SUCCEEDED,
    admit,
    finish,
    publish,
)

STALE_MS = 10_000


def audit(backend: Backend, now_ms: int | None = None) -> ExecutionReport:
    """The execution audit in one read-only snapshot, as ``ql audit`` reads it (ql_runtime)."""
    at = now_ms if now_ms is not None else backend.now_ms()
    return backend.database("ql_runtime", "contract-audit").read(
        "audit", lambda tx: check_execution(tx, now_ms=at, from_ms=0, to_ms=2**62,
                                            stale_ms=STALE_MS), snapshot=True)


def test_runs_carried_out_by_the_steps_are_clean(backend: Backend) -> None:
    publish(backend, retry=RETRIES, idempotent=True)
    ok, retried, lost = admit(backend, count=3)
    leases = {lease.fence.run_id: lease for lease in acquire(backend, limit=3)}
    finish(backend, leases[ok], SUCCEEDED)
    finish(backend, leases[retried])  # fails once: waits for its retry
    run_to_running(backend, leases[lost].fence)
    backend.age_leases(60_000)
    backend.lifecycle.lease_rescue(LeaseRescueParams(grace_ms=0))  # lost, retried (idempotent)
    backend.age_retries(RETRY_WAIT_OVER_MS)
    backend.lifecycle.retry_promote(10)
    for lease in acquire(backend, limit=3):
        finish(backend, lease, SUCCEEDED)
    report = audit(backend)
    assert report.violations == 0, report.findings()
    assert (report.runs, report.ended, report.retried) == (3, 3, 2)


def test_a_run_stuck_running_and_an_ended_run_without_its_event_are_named(
        backend: Backend) -> None:
    publish(backend)
    stuck, forced = admit(backend, count=2)
    leases = {lease.fence.run_id: lease for lease in acquire(backend, limit=2)}
    run_to_running(backend, leases[stuck].fence)
    run_to_running(backend, leases[forced].fence)
    backend.force_run_status(forced, "succeeded")  # no step wrote it: no terminal event
    assert audit(backend).stuck == []  # its lease is fresh
    backend.age_leases(60_000)
    report = audit(backend)
    assert [finding.split(":")[0] for finding in report.stuck] == [stuck]
    assert [finding.split(":")[0] for finding in report.terminal_events] == [forced]
    assert report.violations == 2
