"""The schedule store: claim due schedule rows, then commit the decisions made about them.
One algorithm on every database; only the claim statement and the clock differ.

- ``schedule_claim``: one statement with one reading of the store's clock picks up to
  ``limit`` due (or uninitialised) rows whose trigger can fire, oldest cursor first, each
  with its own fence. PostgreSQL writes the claim into the row (owner, a fresh token, claim
  version, expiry) in an auto-committed statement that skips rows other replicas hold
  (``SKIP LOCKED``); on SQLite one process serves the file, so the claim writes nothing and
  its fence is the row's state version.
- ``schedule_commit_batch`` (batch.py): the decisions of one claim statement in one
  transaction, each row re-verified and fenced on its own; ``schedule_commit`` is a batch of
  one.
- ``schedule_next_due_in_ms``: a wake-up hint for the scheduler's cadence.

A COMMIT whose reply was lost is resolved from durable facts (the occurrence's idempotency
key and the claim token its ``run.created`` carries, or for a flow trigger the flow run's
key and id; else the schedule row) and never retried.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qinglong.clock import pause
from qinglong.domain.decision import Disposition
from qinglong.domain.flow import occurrence_flow_key
from qinglong.domain.identifiers import owner_id
from qinglong.domain.occurrences import DONE_CURSOR_MS, cursor_for_storage
from qinglong.domain.runs import cron_idempotency_key
from qinglong.domain.schedule import ScheduleClaim, check_budget, check_claim_lease
from qinglong.errors import InvalidInput, OutcomeUnknown, QinglongError
from qinglong.storage.admission.batch import BatchCommitter, Outcome
from qinglong.storage.admission.claims import claim_from_row
from qinglong.storage.admission.params import (
    ClaimCommitParams,
    CommitOutcome,
    CommitResult,
    CorruptScheduleRow,
    ScheduleClaimParams,
)
from qinglong.storage.admission.writes import FlowStarter
from qinglong.storage.kernel import Database, Tx

# While a row is due (held by another replica, or locked by its claim in flight when ours
# skipped it) the wake-up hint is at most this: the row is usually admitted and moved on
# within milliseconds, to an occurrence the hint cannot see yet (queries/schedules.sql).
DUE_ROW_RECHECK_MS = 1_000


class ScheduleStore:
    def __init__(
        self,
        db: Database,
        *,
        actor_id: str = "cluster",
        commit_deadline_s: float = 5.0,
        in_doubt_settle_s: float = 0.2,
        before_commit: Callable[[], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
        start_flow: FlowStarter | None = None,
    ) -> None:
        """``on_retry`` hears the code of every admission conflict retried before COMMIT;
        ``before_commit`` runs just before each COMMIT (a fault-injection seam);
        ``start_flow`` starts the flow of an occurrence of a flow trigger (writes.py; without
        it such an occurrence is an error of its row and is decided again)."""
        self._db = db
        self._commit_deadline_s = commit_deadline_s
        self._in_doubt_settle_s = in_doubt_settle_s
        self._committer = BatchCommitter(
            db, actor_id=actor_id, commit_deadline_s=commit_deadline_s,
            in_doubt_settle_s=in_doubt_settle_s,
            resolve_in_doubt=lambda item: self._resolve_in_doubt(item, settle=False),
            before_commit=before_commit, on_retry=on_retry, start_flow=start_flow,
        )

    # -- claim ------------------------------------------------------------------------

    def schedule_claim(self, params: ScheduleClaimParams) -> list[ScheduleClaim | CorruptScheduleRow]:
        owner_id(params.owner)
        check_claim_lease(params.lease_ms)
        check_budget(params.limit, "limit")

        def claim(tx: Tx) -> list[ScheduleClaim | CorruptScheduleRow]:
            rows = tx.all("schedule_claim", {"owner": params.owner, "lease_ms": params.lease_ms,
                                             "limit": params.limit, **tx.clock_args()})
            return [claim_from_row(row) for row in rows]

        # The claim commits by itself; with synchronous replication that commit waits for
        # the standby, which only a client-side deadline can bound.
        return self._db.read("claim schedules", claim, deadline_s=self._commit_deadline_s)

    def schedule_next_due_in_ms(self) -> int | None:
        row = self._db.read("read the next due time", lambda tx: tx.one(
            "schedule_next_due_in", {"done_cursor_ms": DONE_CURSOR_MS,
                                     "due_recheck_ms": DUE_ROW_RECHECK_MS, **tx.clock_args()}))
        if row is None or row["due_in_ms"] is None:
            return None
        return max(0, int(row["due_in_ms"]))

    # -- commit -----------------------------------------------------------------------

    def schedule_commit(self, params: ClaimCommitParams) -> CommitResult:
        """One decision: a batch of one, whose error (if it failed) is raised."""
        [outcome] = self.schedule_commit_batch([params])
        if isinstance(outcome, QinglongError):
            raise outcome
        return outcome

    def schedule_commit_batch(self, params: Sequence[ClaimCommitParams]) -> list[Outcome]:
        """Commit the decisions of many claims together (batch.py): one outcome per claim,
        in order -- its CommitResult, or the error that kept it from committing (its claim
        then simply expires). Checked before anything is sent."""
        for item in params:
            _check_command(item)
        if not params:
            return []
        return self._committer.commit(params)

    def _resolve_in_doubt(self, params: ClaimCommitParams, *, settle: bool = True) -> CommitResult:
        """COMMIT was sent and its reply lost: look the occurrence up before anything else
        (after letting a commit that is landing become visible, unless the caller did)."""
        claim, decision = params.claim, params.decision
        candidate = claim.candidate
        if settle:
            pause(self._in_doubt_settle_s)

        def look(tx: Tx) -> CommitResult | None:
            if decision.disposition is Disposition.ADMIT and candidate.spec.flow is not None:
                assert decision.scheduled_for_ms is not None and params.ids is not None
                key = occurrence_flow_key(candidate.trigger_id, candidate.trigger_revision,
                                          decision.scheduled_for_ms)
                flow = tx.one("flow_run_by_key", {"project_id": candidate.project_id,
                                                  "key": key})
                if flow is None:
                    return None
                if flow["id"] == params.ids.run_id:  # the flow run of our claim's commit
                    return CommitResult(outcome=CommitOutcome.ADMITTED,
                                        disposition=decision.disposition,
                                        flow_run_id=flow["id"], in_doubt=True)
                return CommitResult(outcome=CommitOutcome.RACED,
                                    disposition=decision.disposition,
                                    reason="superseded_while_in_doubt")
            if decision.disposition is Disposition.ADMIT:
                assert decision.scheduled_for_ms is not None and params.ids is not None
                key = cron_idempotency_key(candidate.trigger_id, candidate.trigger_revision,
                                           decision.scheduled_for_ms)
                found = tx.one("run_find_by_key", {"project_id": candidate.project_id,
                                                   "key": key})
                if found is not None and found["claim_token"] == claim.fence.token:
                    return CommitResult(outcome=CommitOutcome.ADMITTED,
                                        disposition=decision.disposition, run_id=found["id"],
                                        attempt_id=params.ids.attempt_id, in_doubt=True)
                if found is not None:  # admitted under a later claim: ours did not commit
                    return CommitResult(outcome=CommitOutcome.RACED,
                                        disposition=decision.disposition,
                                        reason="superseded_while_in_doubt")
                return None
            state = tx.one("schedule_state_get", {"project_id": candidate.project_id,
                                                  "trigger_id": candidate.trigger_id})
            if (state is not None and state["claim_token"] is None
                    and state["trigger_revision"] == candidate.trigger_revision
                    and state["state_version"] == candidate.state_version + 1
                    and state["next_fire_at_ms"] == cursor_for_storage(decision.next_fire_at_ms)):
                return CommitResult(outcome=CommitOutcome.ADVANCED,
                                    disposition=decision.disposition, in_doubt=True)
            return None

        try:
            result = self._db.read("resolve an in-doubt commit", look)
        except QinglongError as exc:
            raise OutcomeUnknown("COMMIT outcome unknown and the lookup failed") from exc
        if result is None:
            raise OutcomeUnknown("COMMIT outcome unknown: the occurrence is not visible (yet)")
        return result


def _check_command(params: ClaimCommitParams) -> None:
    decision, fence = params.decision, params.claim.fence
    if decision.observed_at_ms != fence.acquired_at_ms:
        raise InvalidInput("decision", "must be observed at the claim's acquisition time")
    moved_to = cursor_for_storage(decision.next_fire_at_ms)
    if moved_to <= decision.due_at_ms and decision.disposition is not Disposition.INITIALIZE:
        raise InvalidInput("decision", "must move the cursor forward")
    if (decision.disposition is Disposition.INITIALIZE
            and params.claim.candidate.next_fire_at_ms is not None):
        raise InvalidInput("decision", "initialize is only for a NULL cursor")
    if (decision.disposition is Disposition.ADMIT) != (params.ids is not None):
        raise InvalidInput("ids", "an admission needs ids and nothing else may carry them")
