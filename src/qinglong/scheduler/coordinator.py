"""The coordinator: one bounded cycle of claim -> decide -> commit, on every database.

It takes no clock: every decision is made at its claim's acquisition time by the store's
clock (the database's on PostgreSQL, the node's on SQLite), and the commit reads that clock
again. Several rows are claimed per statement; each keeps
its own fence. The decisions of one claim statement are committed together
(``schedule_commit_batch``: one write transaction for the batch -- SERIALIZABLE on
PostgreSQL, SQLite's BEGIN IMMEDIATE on its one writer -- each row verified
and fenced on its own, falling back to smaller batches and to single rows on failure), or
one by one when batching is off or a single row was claimed. Every result of a batch is
recorded before an error of one of its rows ends the cycle; an exception abandons the rest
of the cycle: claims not committed simply expire (by database time) and are taken over.

A row that could not be decided (corrupt, or an invalid schedule) is reported once per cycle
and left alone for the rest of it. A claim that holds its rows (PostgreSQL) never hands it
back within its lease; a claim that writes nothing (SQLite, whose fence is the row's state
version) hands it back first every time (its cursor never moves), so the coordinator claims
again with room for such rows and passes over them: they neither fill the budget nor keep
the other rows waiting.
"""

from __future__ import annotations

from collections.abc import Callable

from qinglong.diagnostics import (
    Diagnostic,
    DiagnosticSink,
    diagnostic_from,
    emit,
)
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.decision import Decision, Disposition, check_grace
from qinglong.domain.identifiers import owner_id
from qinglong.domain.schedule import (
    DEFAULT_CLAIM_LEASE_MS,
    MAX_BUDGET,
    ScheduleClaim,
    check_budget,
    check_claim_lease,
)
from qinglong.errors import InvalidSchedule, QinglongError, StorageError
from qinglong.ids import new_uuid
from qinglong.scheduler.report import CycleReport, Stats, Tally, corrupt_row_diagnostic
from qinglong.storage.admission import ScheduleStore
from qinglong.storage.admission.params import (
    ClaimCommitParams,
    CommitResult,
    CorruptScheduleRow,
    ScheduleClaimParams,
)

CommittedHook = Callable[[ScheduleClaim, Decision, CommitResult], None]
# Errors of a batch that are about the connection, the server or the role, not one row.
_ABOUT_THE_DATABASE = frozenset({"QL_CONNECTION_LOST", "QL_SERVER_NOT_WRITABLE", "QL_NOT_READY",
                                 "QL_PERMISSION_DENIED"})


class ForeignClaim(StorageError):
    """A claim came back that this coordinator did not take."""

    code = "QL_FOREIGN_CLAIM"


class Coordinator:
    def __init__(
        self,
        store: ScheduleStore,
        *,
        owner: str,
        lease_ms: int = DEFAULT_CLAIM_LEASE_MS,
        budget: int = 16,
        batch: int = 8,
        grace_ms: int = 30_000,
        new_id: Callable[[], str] = new_uuid,
        on_committed: CommittedHook | None = None,
        diagnostics: DiagnosticSink | None = None,
        wake_hint: bool = True,
        after_claim: Callable[[], None] | None = None,
        batched: bool = True,
    ) -> None:
        check_claim_lease(lease_ms)
        self._store = store
        self._owner = owner_id(owner)
        self._lease_ms = lease_ms
        self._budget = check_budget(budget)
        self._batch = check_budget(batch, "batch")
        self._grace_ms = check_grace(grace_ms)
        self._new_id = new_id
        self._on_committed = on_committed
        self._diagnostics = diagnostics
        self.stats = Stats()
        self._wake_hint = wake_hint
        self._after_claim = after_claim  # a fault-injection seam (tests and the soak only)
        self._batched = batched

    @property
    def owner(self) -> str:
        return self._owner

    def run_cycle(self, stop_requested: Callable[[], bool] = lambda: False) -> CycleReport:
        """Claim, decide and commit until the budget is spent, nothing is due, or a stop is
        requested: a stop ends the cycle after the claims in hand are committed, so a
        replica that is catching up (its rows due again at once) still drains promptly."""
        tally = Tally()
        failed: set[tuple[str, str]] = set()  # rows not decided: left alone for this cycle
        while tally.claimed < self._budget and not stop_requested():
            limit = min(self._batch, self._budget - tally.claimed)
            claims = self._claim(limit)
            if any(_key(item) in failed for item in claims):
                # this claim wrote nothing (SQLite): room for the rows that failed
                claims = self._claim(min(limit + len(failed), MAX_BUDGET))
            fresh = [item for item in claims if _key(item) not in failed][:limit]
            if fresh and self._after_claim is not None:
                self._after_claim()
            decided: list[ClaimCommitParams] = []
            for item in fresh:
                tally.counts["claimed"] += 1
                if isinstance(item, CorruptScheduleRow):
                    tally.counts["errors"] += 1
                    failed.add(_key(item))
                    emit(self._diagnostics, corrupt_row_diagnostic(item))
                    continue
                self._check_ours(item)
                tally.observed.append(item.fence.acquired_at_ms)
                params = self._decide(item, tally)
                if params is None:
                    failed.add(_key(item))
                else:
                    decided.append(params)
            self._commit(decided, tally)
            if not fresh:
                break  # a row that is due again (catch-up) is simply claimed again
        # a saturated cycle is followed by another at once: it needs no wake-up hint
        saturated = tally.claimed >= self._budget
        hint = (self._store.schedule_next_due_in_ms()
                if self._wake_hint and not saturated else None)
        report = tally.report(budget=self._budget, next_due_in_ms=hint)
        self.stats.add(report, tally.raced_reasons)
        return report

    def _claim(self, limit: int) -> list[ScheduleClaim | CorruptScheduleRow]:
        return self._store.schedule_claim(
            ScheduleClaimParams(owner=self._owner, lease_ms=self._lease_ms, limit=limit))

    def _check_ours(self, claim: ScheduleClaim) -> None:
        fence = claim.fence
        if fence.owner != self._owner or fence.expires_at_ms - fence.acquired_at_ms != self._lease_ms:
            raise ForeignClaim("the store returned a claim this coordinator did not take")

    def _decide(self, claim: ScheduleClaim, tally: Tally) -> ClaimCommitParams | None:
        try:
            decision = claim.decide(grace_ms=self._grace_ms)
        except InvalidSchedule as exc:
            tally.counts["errors"] += 1
            emit(self._diagnostics, diagnostic_from("scheduler", exc))
            return None
        ids = (AdmissionIds.new(self._new_id, at_ms=claim.fence.acquired_at_ms)
               if decision.disposition is Disposition.ADMIT else None)
        return ClaimCommitParams(claim=claim, decision=decision, ids=ids)

    def _commit(self, decided: list[ClaimCommitParams], tally: Tally) -> None:
        if not self._batched or len(decided) < 2:
            for params in decided:  # an error ends the cycle here, as it always did
                self._committed(params, self._store.schedule_commit(params), tally)
            return
        failed: list[QinglongError] = []
        for params, outcome in zip(decided, self._store.schedule_commit_batch(decided),
                                   strict=True):
            if isinstance(outcome, QinglongError):
                failed.append(outcome)
            else:
                self._committed(params, outcome, tally)
        if failed:
            # Every result is on record; one error ends the cycle as a single commit's would
            # (the one about the database itself if there is one, so that it reaches the
            # availability fence), the others are told.
            raised = next((e for e in failed if e.code in _ABOUT_THE_DATABASE), failed[0])
            told: set[int] = {id(raised)}
            for other in failed:
                if id(other) not in told:
                    told.add(id(other))
                    emit(self._diagnostics, diagnostic_from("scheduler", other))
            raise raised

    def _committed(self, params: ClaimCommitParams, result: CommitResult, tally: Tally) -> None:
        claim, decision = params.claim, params.decision
        tally.record(result)
        if not result.durable:
            emit(self._diagnostics, Diagnostic(
                source="scheduler", code="QL_COMMIT_NOT_DURABLE",
                message=f"{claim.candidate.project_id}/{claim.candidate.trigger_id}: committed "
                        "locally but replication was not confirmed (WARNING 01000)",
            ))
        if self._on_committed is not None:
            try:
                self._on_committed(claim, decision, result)
            except Exception as exc:  # noqa: BLE001 - an observer must not break admission
                emit(self._diagnostics, diagnostic_from("scheduler", exc))


def _key(item: ScheduleClaim | CorruptScheduleRow) -> tuple[str, str]:
    if isinstance(item, CorruptScheduleRow):
        return (item.project_id, item.trigger_id)
    return (item.candidate.project_id, item.candidate.trigger_id)
