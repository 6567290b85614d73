"""An executor's lease renewal and self-fencing.

Leases are renewed together, one store call for all of them. A lease the store says is
gone stops its command at once: the process group is killed, because someone else may own
the Run now; a renewal reply that carries a cancel request stops its command too. A
watchdog that no hung renewal can delay kills every command once the leases have gone
unrenewed for most of their length (``SELF_FENCE_MARGIN``), before they can run out.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from qinglong.clock import Clock
from qinglong.diagnostics import Diagnostic, DiagnosticSink, diagnostic_from, emit
from qinglong.errors import LeaseLost
from qinglong.execution.jobs import Job
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.params import LeaseRenewParams

SELF_FENCE_MARGIN = 0.2  # stop commands when this fraction of a lease is left unrenewed


@dataclass(eq=False, kw_only=True)
class LeaseKeeper:
    """Keeps the leases of the jobs ``jobs()`` lists until ``finished`` is set; ``failing``
    while the store refuses renewals (the executor takes no new work then)."""

    store: RunStore
    clock: Clock
    owner: str
    lease_ms: int
    every_s: float
    jobs: Callable[[], list[Job]]
    finished: threading.Event
    diagnostics: DiagnosticSink | None
    failing: bool = field(default=False, init=False)
    _renewed_at: float = field(init=False)

    def __post_init__(self) -> None:
        self._renewed_at = self.clock.monotonic()

    def renew_loop(self) -> None:
        interval = self.every_s  # at least three renewals per lease
        retry = min(interval, 1.0)  # after a failure, try again soon
        while not self.finished.wait(retry if self.failing else interval):
            try:
                self._renew_once()
                self.failing = False
            except Exception as exc:  # noqa: BLE001 - isolation boundary
                self.failing = True
                emit(self.diagnostics, diagnostic_from("executor", exc))

    def watchdog_loop(self) -> None:
        """Self-fencing that no hung renewal can delay: once the leases may be about to run
        out unrenewed, every command is killed (someone else may own its Run soon)."""
        tick = min(0.5, self.lease_ms / 10_000)
        while not self.finished.wait(tick):
            self._self_fence_if_due()

    def _renew_once(self) -> None:
        jobs = {job.lease.fence.attempt_id: job for job in self.jobs()}
        if not jobs:
            self._renewed_at = self.clock.monotonic()
            return
        sent_at = self.clock.monotonic()
        renewal = self.store.lease_renew(LeaseRenewParams(
            owner=self.owner, lease_ms=self.lease_ms,
            fences=tuple(job.lease.fence for job in jobs.values())))
        self._renewed_at = sent_at
        for fence in renewal.lost:
            job = jobs[fence.attempt_id]
            if job.exited:  # its ending was being recorded: the lease ended with it
                continue
            if job.stop_reason is None:
                emit(self.diagnostics, Diagnostic(
                    source="executor", code=LeaseLost.code,
                    message=f"run {fence.run_id}: lease lost; stopping its command"))
            job.stop("lease_lost", signal.SIGKILL)
        for fence in renewal.cancel_requested:
            jobs[fence.attempt_id].stop("cancel")

    def _self_fence_if_due(self) -> None:
        """Leases not renewed for most of their length: stop every command before they can
        run out (the database would hand the Runs to someone else)."""
        unrenewed = self.clock.monotonic() - self._renewed_at
        if unrenewed < self.lease_ms / 1000 * (1 - SELF_FENCE_MARGIN):
            return
        for job in [job for job in self.jobs() if job.stop_reason != "lease_lost"]:
            emit(self.diagnostics, Diagnostic(
                source="executor", code=LeaseLost.code,
                message=f"run {job.lease.fence.run_id}: leases not renewed for {unrenewed:.1f} s; "
                        "stopping its command before the lease runs out"))
            job.stop("lease_lost", signal.SIGKILL)
