"""Cluster scheduling on PostgreSQL: fenced row-lease claims and atomic Run admission.

Claim: one auto-committed READ COMMITTED statement with one database-clock reading.
Commit: one SERIALIZABLE transaction that locks the row, reads the database clock again
(after the lock is held), re-verifies every fact and the full fence, writes the Run, its
Attempt, two events and the advanced cursor, and clears the claim. Mismatches are ``raced``
values. Only 40001/40P01/55P03 before COMMIT are retried; a lost COMMIT reply is resolved
from durable facts (the idempotency key, the schedule row) and never retried.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import psycopg

from qinglong.clock import pause
from qinglong.domain.admission import admission_rows
from qinglong.domain.admission_jitter import with_jittered_instant
from qinglong.domain.decision import PAUSED_FATE, Disposition
from qinglong.domain.identifiers import owner_id
from qinglong.domain.occurrences import DONE_CURSOR_MS, cursor_for_storage
from qinglong.domain.runs import cron_idempotency_key
from qinglong.domain.schedule import ScheduleClaim, check_budget, check_claim_lease
from qinglong.domain.task import ExecutionRevision, ExecutorType
from qinglong.errors import InvalidInput, OutcomeUnknown, QinglongError, RecordCorrupt
from qinglong.storage import records
from qinglong.storage.lifecycle_writer import insert_admission
from qinglong.storage.ports import (
    ClaimCommitParams,
    CommitOutcome,
    CommitResult,
    CorruptScheduleRow,
    ScheduleClaimParams,
)
from qinglong.storage.postgres.admission_batch import BatchCommitter, Outcome
from qinglong.storage.postgres.claims import ClockRegressed, Raced, claim_from_row
from qinglong.storage.postgres.connection import (
    QUERIES,
    CommitNotAcknowledged,
    CommitRejected,
    Connector,
    PgConnection,
    deadline,
)
from qinglong.storage.postgres.errors import translate
from qinglong.storage.postgres.transactions import db_now_ms, transact

COMMIT_ATTEMPTS = 5
# While a row is due (held by another replica, or locked by its claim in flight when ours
# skipped it) the wake-up hint is at most this: the row is usually admitted and moved on
# within milliseconds, to an occurrence the hint cannot see yet (queries/schedules.sql).
DUE_ROW_RECHECK_MS = 1_000
__all__ = ["COMMIT_ATTEMPTS", "ClockRegressed", "PgScheduleStore", "claim_from_row"]


class PgScheduleStore:
    """The ClusterScheduleStore port (runtime role)."""

    def __init__(
        self,
        connector: Connector,
        *,
        actor_id: str = "cluster",
        commit_deadline_s: float = 5.0,
        in_doubt_settle_s: float = 0.2,
        before_commit: Callable[[], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        """``on_retry`` hears the SQLSTATE of every admission attempt retried before COMMIT."""
        self._connector = connector
        self._actor_id = actor_id
        self._commit_deadline_s = commit_deadline_s
        self._in_doubt_settle_s = in_doubt_settle_s
        self._before_commit = before_commit
        self._on_retry = on_retry

    # -- claim ------------------------------------------------------------------------

    def schedule_claim(self, params: ScheduleClaimParams) -> list[ScheduleClaim | CorruptScheduleRow]:
        owner_id(params.owner)
        check_claim_lease(params.lease_ms)
        check_budget(params.limit, "limit")
        with self._connector.connection() as conn:
            try:
                # The claim commits by itself; with synchronous replication that commit waits
                # for the standby, which only a client-side deadline can bound.
                with deadline(conn, self._commit_deadline_s):
                    rows = conn.execute(
                        QUERIES["schedule_claim"],
                        {"owner": params.owner, "lease_ms": params.lease_ms, "limit": params.limit},
                    ).fetchall()
            except psycopg.Error as exc:
                raise translate(exc, "claim schedules", conn) from exc
        return [claim_from_row(row) for row in rows]

    def schedule_next_due_in_ms(self) -> int | None:
        with self._connector.connection() as conn:
            try:
                row = conn.execute(QUERIES["schedule_next_due_in"],
                                   {"done_cursor_ms": DONE_CURSOR_MS,
                                    "due_recheck_ms": DUE_ROW_RECHECK_MS}).fetchone()
            except psycopg.Error as exc:
                raise translate(exc, "read the next due time", conn) from exc
        if row is None or row["due_in_ms"] is None:
            return None
        return max(0, int(row["due_in_ms"]))

    # -- commit -----------------------------------------------------------------------

    def schedule_commit(self, params: ClaimCommitParams) -> CommitResult:
        self._check_command(params)
        disposition = params.decision.disposition
        try:
            result, receipt = transact(
                self._connector, "admit occurrence", lambda conn: self._admit(conn, params),
                attempts=COMMIT_ATTEMPTS, commit_deadline_s=self._commit_deadline_s,
                # A rejected COMMIT rolled back for sure, but is not run again: the claim stays
                # until it expires and the occurrence is decided afresh.
                retry_rejected_commit=False,
                before_commit=self._before_commit, on_retry=self._on_retry,
            )
        except Raced as raced:
            return CommitResult(outcome=CommitOutcome.RACED, disposition=disposition,
                                reason=raced.reason)
        except CommitRejected as rejected:
            return CommitResult(outcome=CommitOutcome.RACED, disposition=disposition,
                                reason=f"commit_rejected_{rejected.sqlstate}")
        except CommitNotAcknowledged:  # resolved on a fresh connection, never by a retry
            return self._resolve_in_doubt(params)
        if not receipt.durable:
            return CommitResult(
                outcome=result.outcome, disposition=disposition, run_id=result.run_id,
                attempt_id=result.attempt_id, durable=False,
            )
        return result

    def schedule_commit_batch(self, params: Sequence[ClaimCommitParams]) -> list[Outcome]:
        """Commit the decisions of many claims together (admission_batch.py): one outcome per
        claim, in order -- its CommitResult, or the error that kept it from committing (its
        claim then simply expires). Checked like single commits, before anything is sent."""
        for item in params:
            self._check_command(item)
        if not params:
            return []
        committer = BatchCommitter(
            self._connector, actor_id=self._actor_id, commit_deadline_s=self._commit_deadline_s,
            in_doubt_settle_s=self._in_doubt_settle_s, single=self.schedule_commit,
            resolve_in_doubt=lambda item: self._resolve_in_doubt(item, settle=False),
            before_commit=self._before_commit, on_retry=self._on_retry,
        )
        return committer.commit(params)

    def _check_command(self, params: ClaimCommitParams) -> None:
        decision, fence = params.decision, params.claim.fence
        if decision.observed_at_ms != fence.acquired_at_ms:
            raise InvalidInput("decision", "must be observed at the claim's acquisition time")
        moved_to = cursor_for_storage(decision.next_fire_at_ms)
        if moved_to <= decision.due_at_ms and decision.disposition is not Disposition.INITIALIZE:
            raise InvalidInput("decision", "must move the cursor forward")
        if decision.disposition is Disposition.INITIALIZE and params.claim.candidate.next_fire_at_ms is not None:
            raise InvalidInput("decision", "initialize is only for a NULL cursor")
        if (decision.disposition is Disposition.ADMIT) != (params.ids is not None):
            raise InvalidInput("ids", "an admission needs ids and nothing else may carry them")

    def _admit(self, conn: PgConnection, params: ClaimCommitParams) -> CommitResult:
        claim, decision = params.claim, params.decision
        candidate, fence = claim.candidate, claim.fence
        key = {"project_id": candidate.project_id, "trigger_id": candidate.trigger_id}
        row = conn.execute(QUERIES["schedule_lock_for_commit"],
                           {**key, "row_locator": claim.row_locator}).fetchone()
        if row is None:  # the claimed row version was replaced, or the trigger cannot fire
            raise Raced("claim_superseded")
        current = claim_from_row(row)
        if isinstance(current, CorruptScheduleRow):
            raise RecordCorrupt(current.problem)
        if current.candidate != candidate:
            raise Raced("schedule_changed")
        if current.fence != fence:
            raise Raced("fence_changed")  # (the row version is the claimed one: same locator)
        task = records.candidate_task_revision(row)
        if task.content_digest != candidate.task_content_digest:
            raise Raced("task_changed")
        now = db_now_ms(conn)  # read after the row lock is held
        if now >= fence.expires_at_ms:
            raise Raced("claim_expired")
        if now < fence.acquired_at_ms:
            raise ClockRegressed("the database clock moved backwards between claim and commit")
        run_id = attempt_id = None
        if decision.disposition is Disposition.ADMIT:
            assert params.ids is not None
            execution = self._execution_revision(conn, candidate.project_id, candidate.task_id,
                                                 task.revision, candidate.task_content_digest)
            insert_admission(conn, QUERIES, with_jittered_instant(admission_rows(
                candidate=candidate, decision=decision, execution=execution, task_name=task.name,
                ids=params.ids, committed_at_ms=now, actor_id=self._actor_id, fence=fence,
            ), decision.jittered_for_ms))
            run_id, attempt_id = params.ids.run_id, params.ids.attempt_id
        if decision.paused_from_ms is not None:  # what the pause held back, on record
            conn.execute(QUERIES["schedule_misfire_insert"], {
                **key,
                "trigger_revision": candidate.trigger_revision,
                "due_at_ms": decision.paused_from_ms,
                "skipped_through_ms": decision.paused_through_ms,
                "next_fire_at_ms": decision.due_at_ms,
                "policy": PAUSED_FATE,
                "run_id": None,
                "claim_version": fence.version,
                "decided_at_ms": decision.observed_at_ms,
            })
        if decision.misfired:
            conn.execute(QUERIES["schedule_misfire_insert"], {
                **key,
                "trigger_revision": candidate.trigger_revision,
                "due_at_ms": decision.due_at_ms,
                "skipped_through_ms": decision.skipped_through_ms,
                "next_fire_at_ms": cursor_for_storage(decision.next_fire_at_ms),
                "policy": candidate.spec.misfire_policy.value,
                "run_id": run_id,
                "claim_version": fence.version,
                "decided_at_ms": decision.observed_at_ms,
            })
        advanced = conn.execute(QUERIES["schedule_advance_fenced"], {
            **key,
            "row_locator": claim.row_locator,
            "trigger_revision": candidate.trigger_revision,
            "state_version": candidate.state_version,
            "cursor_ms": candidate.next_fire_at_ms,
            "claim_owner": fence.owner,
            "claim_token": fence.token,
            "claim_version": fence.version,
            "claim_expires_at_ms": fence.expires_at_ms,
            "next_fire_at_ms": cursor_for_storage(decision.next_fire_at_ms),
            "next_due_at_ms": decision.next_due_at_ms,
            "scheduled_for_ms": decision.scheduled_for_ms,
            "now_ms": now,
        })
        if advanced.rowcount != 1:
            raise Raced("fence_changed")
        if run_id is not None:
            return CommitResult(outcome=CommitOutcome.ADMITTED, disposition=decision.disposition,
                                run_id=run_id, attempt_id=attempt_id)
        return CommitResult(outcome=CommitOutcome.ADVANCED, disposition=decision.disposition)

    @staticmethod
    def _execution_revision(
        conn: PgConnection, project: str, task: str, revision: int, pinned_digest: str
    ) -> ExecutionRevision:
        row = conn.execute(QUERIES["execution_revision_for_commit"], {
            "project_id": project, "task_id": task, "source_revision": revision,
        }).fetchone()
        if row is None:
            raise RecordCorrupt(f"execution revision of {project}/{task}@{revision} is missing")
        execution = records.execution_revision(row)
        if execution.executor_type is not ExecutorType.REMOTE_WORKER:
            raise RecordCorrupt("execution revision is not a remote_worker plan")
        if execution.source_content_digest != pinned_digest:
            raise RecordCorrupt("execution revision does not match the pinned task digest")
        return execution

    def _resolve_in_doubt(self, params: ClaimCommitParams, *, settle: bool = True) -> CommitResult:
        """COMMIT was sent and its reply lost: look the occurrence up before anything else
        (after letting a commit that is landing become visible, unless the caller did)."""
        claim, decision = params.claim, params.decision
        candidate = claim.candidate
        if settle:
            pause(self._in_doubt_settle_s)
        try:
            with self._connector.connection() as conn:
                if decision.disposition is Disposition.ADMIT:
                    assert decision.scheduled_for_ms is not None and params.ids is not None
                    key = cron_idempotency_key(candidate.trigger_id, candidate.trigger_revision,
                                               decision.scheduled_for_ms)
                    found = conn.execute(QUERIES["run_find_by_key"],
                                         {"project_id": candidate.project_id, "key": key}).fetchone()
                    if found is not None and found["claim_token"] == claim.fence.token:
                        return CommitResult(outcome=CommitOutcome.ADMITTED,
                                            disposition=decision.disposition, run_id=found["id"],
                                            attempt_id=params.ids.attempt_id, in_doubt=True)
                    if found is not None:  # admitted under a later claim: ours did not commit
                        return CommitResult(outcome=CommitOutcome.RACED,
                                            disposition=decision.disposition,
                                            reason="superseded_while_in_doubt")
                else:
                    state = conn.execute(QUERIES["schedule_state_get"], {
                        "project_id": candidate.project_id, "trigger_id": candidate.trigger_id,
                    }).fetchone()
                    if (state is not None and state["claim_token"] is None
                            and state["trigger_revision"] == candidate.trigger_revision
                            and state["state_version"] == candidate.state_version + 1
                            and state["next_fire_at_ms"]
                            == cursor_for_storage(decision.next_fire_at_ms)):
                        return CommitResult(outcome=CommitOutcome.ADVANCED,
                                            disposition=decision.disposition, in_doubt=True)
        except (psycopg.Error, QinglongError) as exc:
            raise OutcomeUnknown("COMMIT outcome unknown and the lookup failed") from exc
        raise OutcomeUnknown("COMMIT outcome unknown: the occurrence is not visible (yet)")
