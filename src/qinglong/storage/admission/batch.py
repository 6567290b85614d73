"""Committing the decisions of claimed schedule rows: one transaction for a batch, each row
verified and fenced on its own. A single commit is a batch of one.

The transaction (SERIALIZABLE on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) does the same
work for any number of rows with a fixed number of statements:

1. read the store's clock and, by key, every fact of the definitions each decision used
   (``schedule_facts_batch``): whether the trigger can still fire (its head and its task's
   head still at the claimed revisions, its project active) and its trigger revision; the
   task revision and its pinned execution revision only where this committer has not
   verified them before (pinned.py: revisions are never changed once written);
2. verify each row (eligibility, trigger revision and its digest, task digest, both
   revisions enabled, expiry, clock, execution revision); a row that fails is left out of
   the writes and reported ``raced`` (a corrupt record: an error of that row alone);
3. write every row that passed (writes.py): its cursor is advanced and its claim cleared
   only under its full fence, and its Run, Attempt, events and misfire records are written
   with it; a row that changed since its claim (taken over, reset, paused, resumed) writes
   nothing and is reported ``raced``;
4. the clock once more, now that the rows are written (PostgreSQL: their locks are held): a
   claim that expired meanwhile rolls the whole batch back (it is then decided again in
   smaller parts);
5. COMMIT.

The schedule rows are not read before they are written: on PostgreSQL an UPDATE drops its
own predicate lock on each row it writes, whereas reading a batch's rows first would lock
whole heap pages (more than two rows of a page) and two replicas' batches would fail
serialization against each other.

When a batch fails before COMMIT (serialization failure, deadlock, lock or statement
timeout, any error of the database), nothing of it was written: it is split in halves and
each half tried again, down to single rows, which a conflict may run again a few times; so
one bad row costs its neighbours a few transactions, never their admission. The splitting
stops once half of the claims' lease has passed by the store's clock: the rows not tried by
then keep their claims, which expire and are decided afresh. A COMMIT the server refused for
a single row reports it raced. A lost COMMIT reply is never retried: every row the batch
wrote is resolved from durable facts (its idempotency key, its schedule row). Losing the
connection (or the server turning read-only, or a missing privilege) ends the batch: the
rows not yet settled carry that error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from qinglong.clock import pause
from qinglong.domain.admission import admission_rows
from qinglong.domain.admission_jitter import with_jittered_instant
from qinglong.domain.decision import Disposition
from qinglong.domain.flow_runs import FlowOccurrence
from qinglong.domain.task import ExecutionRevision, TaskRevision
from qinglong.errors import (
    ConnectionLost,
    NotReady,
    PermissionDenied,
    QinglongError,
    ServerNotWritable,
    StorageError,
    TransientStorageError,
)
from qinglong.storage.admission.claims import REVISIONS, ClockRegressed, Raced
from qinglong.storage.admission.params import ClaimCommitParams, CommitOutcome, CommitResult
from qinglong.storage.admission.pinned import Key as PinnedKey
from qinglong.storage.admission.pinned import Pinned, PinnedRevisions
from qinglong.storage.admission.writes import FlowStarter, Key, Writes
from qinglong.storage.kernel import (
    CommitNotAcknowledged,
    CommitRejected,
    Database,
    Tx,
)

ACTION = "admit occurrences"
COMMIT_ATTEMPTS = 5  # a single row's conflicts retried before COMMIT
# Errors that say nothing about one row but about the connection, the server or the role:
# they end the batch instead of splitting it.
_ENDS_THE_BATCH = (ConnectionLost, ServerNotWritable, PermissionDenied, NotReady)

Outcome = CommitResult | QinglongError


class BatchAbandoned(TransientStorageError):
    """A failing batch was not split further: half of its claims' lease had passed."""


class _LeaseRanOut(TransientStorageError):
    """A claim of the batch expired before its rows were written: roll back and split."""


@dataclass(slots=True)
class _Attempt:
    """What one batch transaction settled, kept for when its COMMIT reply is lost."""

    settled: dict[int, Outcome] = field(default_factory=dict)  # raced or failed: nothing written
    written: dict[int, CommitResult] = field(default_factory=dict)  # written, if COMMIT landed


class _InDoubt(Exception):
    def __init__(self, attempt: _Attempt) -> None:
        super().__init__("COMMIT of a batch was sent but not acknowledged")
        self.attempt = attempt


class BatchCommitter:
    """Commits the claims of one claim statement; see the module docstring."""

    def __init__(
        self,
        db: Database,
        *,
        actor_id: str,
        commit_deadline_s: float,
        in_doubt_settle_s: float,
        resolve_in_doubt: Callable[[ClaimCommitParams], CommitResult],
        before_commit: Callable[[], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
        start_flow: FlowStarter | None = None,
    ) -> None:
        self._db = db
        self._start_flow = start_flow
        self._actor_id = actor_id
        self._commit_deadline_s = commit_deadline_s
        self._in_doubt_settle_s = in_doubt_settle_s
        self._resolve_in_doubt = resolve_in_doubt
        self._before_commit = before_commit
        self._on_retry = on_retry
        self._pinned = PinnedRevisions()  # of this committer's database only

    def commit(self, items: Sequence[ClaimCommitParams]) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        ended: QinglongError | None = None  # the error that ended the batch, if one did
        # Split no further once half of the shortest lease has passed (the store's clock).
        give_up_at_ms = min(p.claim.fence.acquired_at_ms
                            + (p.claim.fence.expires_at_ms - p.claim.fence.acquired_at_ms) // 2
                            for p in items)
        chunks: list[list[int]] = [list(range(len(items)))]
        while chunks:
            chunk = chunks.pop(0)
            if ended is not None:
                outcomes.update(dict.fromkeys(chunk, ended))
                continue
            single = len(chunk) == 1
            try:
                attempt = self._transaction(items, chunk,
                                            attempts=COMMIT_ATTEMPTS if single else 1)
            except _InDoubt as doubt:
                outcomes.update(doubt.attempt.settled)
                outcomes.update(self._settle_in_doubt(items, doubt.attempt.written))
                continue
            except CommitRejected as rejected:
                if single:  # rolled back for sure: the claim expires and is decided afresh
                    params = items[chunk[0]]
                    outcomes[chunk[0]] = CommitResult(
                        outcome=CommitOutcome.RACED, disposition=params.decision.disposition,
                        reason=f"commit_rejected_{rejected.sqlstate}")
                    continue
                self._split(chunks, chunk, rejected, outcomes, give_up_at_ms)
                continue
            except QinglongError as exc:
                if single or isinstance(exc, _ENDS_THE_BATCH):
                    outcomes.update(dict.fromkeys(chunk, exc))
                    if isinstance(exc, _ENDS_THE_BATCH):
                        ended = exc
                    continue
                self._split(chunks, chunk, exc, outcomes, give_up_at_ms)
                continue
            outcomes.update(attempt.settled)
            outcomes.update(attempt.written)
        return [outcomes[index] for index in range(len(items))]

    # -- the pieces ---------------------------------------------------------------------

    def _split(self, chunks: list[list[int]], chunk: list[int], exc: QinglongError,
               outcomes: dict[int, Outcome], give_up_at_ms: int) -> None:
        if self._past(give_up_at_ms):
            gave_up = BatchAbandoned(
                f"{ACTION}: gave up on {len(chunk)} claims after repeated failures "
                f"({exc.message}); they expire and are decided afresh")
            outcomes.update(dict.fromkeys(chunk, gave_up))
            return
        state = self._db.error_code(exc)
        if state is not None and self._on_retry is not None:
            self._on_retry(state)
        half = len(chunk) // 2
        chunks[0:0] = [chunk[:half], chunk[half:]]

    def _past(self, at_ms: int) -> bool:
        try:
            return self._db.now_ms() >= at_ms
        except QinglongError:  # a failing clock read ends the splitting
            return True

    def _settle_in_doubt(self, items: Sequence[ClaimCommitParams],
                         written: dict[int, CommitResult]) -> dict[int, Outcome]:
        if not written:
            return {}
        pause(self._in_doubt_settle_s)  # once for the batch: let a landing commit show
        settled: dict[int, Outcome] = {}
        for index in written:
            try:
                settled[index] = self._resolve_in_doubt(items[index])
            except QinglongError as exc:
                settled[index] = exc
        return settled

    def _transaction(self, items: Sequence[ClaimCommitParams], chunk: list[int], *,
                     attempts: int) -> _Attempt:
        holder: list[_Attempt] = []

        def work(tx: Tx) -> _Attempt:
            holder.clear()
            attempt = _Attempt()
            holder.append(attempt)
            self._admit(tx, items, chunk, attempt)
            return attempt

        try:
            attempt, receipt = self._db.transact(
                ACTION, work, attempts=attempts, commit_deadline_s=self._commit_deadline_s,
                # A rejected COMMIT rolled back for sure, but is not run again here: the
                # caller splits the batch, or reports a single row raced.
                retry_rejected_commit=False, before_commit=self._before_commit,
                on_retry=self._on_retry if attempts > 1 else None,
            )
        except CommitNotAcknowledged as exc:
            raise _InDoubt(holder[0]) from exc
        if not receipt.durable:
            attempt.written = {index: replace(result, durable=False)
                               for index, result in attempt.written.items()}
        return attempt

    def _admit(self, tx: Tx, items: Sequence[ClaimCommitParams], chunk: list[int],
               attempt: _Attempt) -> None:
        candidates = [items[index].claim.candidate for index in chunk]
        executor = tx.capabilities.executor_type.value
        keys = [(c.project_id, c.task_id, c.task_revision, executor) for c in candidates]
        known = self._pinned.known(keys)  # held for the batch, whatever is evicted meanwhile
        facts = tx.all("schedule_facts_batch", {
            "project_ids": tx.array([c.project_id for c in candidates]),
            "trigger_ids": tx.array([c.trigger_id for c in candidates]),
            "trigger_revisions": tx.array([c.trigger_revision for c in candidates]),
            "task_ids": tx.array([c.task_id for c in candidates]),
            "task_revisions": tx.array([c.task_revision for c in candidates]),
            "unverified": tx.array([key not in known for key in keys]),
            **tx.clock_args(),
        })
        if len(facts) != len(chunk):
            raise StorageError(f"{ACTION}: the facts of the batch did not come back whole")
        now = int(facts[0]["now_ms"])
        writes = Writes(start_flow=self._start_flow)
        for index, key, row in zip(chunk, keys, facts, strict=True):
            params = items[index]
            try:
                task, execution = _verify(row, params, now, key, known, self._pinned)
            except Raced as raced:
                attempt.settled[index] = CommitResult(
                    outcome=CommitOutcome.RACED, disposition=params.decision.disposition,
                    reason=raced.reason)
                continue
            except QinglongError as exc:
                attempt.settled[index] = exc
                continue
            admission = flow = None
            if params.decision.disposition is Disposition.ADMIT:
                assert params.ids is not None and execution is not None
                claim, decision = params.claim, params.decision
                if claim.candidate.spec.flow is not None:
                    flow = (_occurrence(params, self._actor_id), params.ids.run_id)
                else:
                    admission = with_jittered_instant(admission_rows(
                        candidate=claim.candidate, decision=decision, execution=execution,
                        task_name=task.name, ids=params.ids, committed_at_ms=now,
                        actor_id=self._actor_id, fence=claim.fence,
                    ), decision.jittered_for_ms)
            writes.add(index, params.claim, params.decision, admission, now_ms=now, flow=flow)
        done = writes.apply(tx, now_ms=now)
        if done:
            # The rows are written (and locked) now: every fence written must still be live
            # at this instant, or the whole batch is rolled back and decided again in parts.
            after = tx.now_ms()
            if any(after >= items[index].claim.fence.expires_at_ms
                   for index, planned in writes.planned.items() if planned.key in done):
                raise _LeaseRanOut(f"{ACTION}: a claim expired while the batch waited for its rows")
        for index, planned in writes.planned.items():
            if planned.key in done:
                attempt.written[index] = planned.result
            else:  # the row changed since its claim (taken over, reset, paused): not written
                attempt.settled[index] = CommitResult(
                    outcome=CommitOutcome.RACED, disposition=items[index].decision.disposition,
                    reason="claim_superseded")


def _verify(row: dict[str, Any] | Any, params: ClaimCommitParams, now: int, key: PinnedKey,
            known: dict[PinnedKey, Pinned], pinned_revisions: PinnedRevisions,
            ) -> tuple[TaskRevision, ExecutionRevision | None]:
    """Every check that is not about the schedule row itself (the write checks that row's
    version, revision, cursor and full fence): raises Raced or the error of this row. The
    task and execution revisions the trigger pins are verified once per committer
    (pinned.py): ``known`` holds those verified before, the row brings the others."""
    claim = params.claim
    candidate, fence = claim.candidate, claim.fence
    if (row["project_id"], row["trigger_id"]) != (candidate.project_id, candidate.trigger_id):
        raise StorageError(f"{ACTION}: the facts came back out of order")
    if not row["eligible"]:  # the trigger cannot fire any more (disabled, archived, moved)
        raise Raced("claim_superseded")
    # The claim found the revisions eligible, and they are immutable: the facts re-read only
    # the heads and the project. Each revision is still checked to be the one claimed.
    revision = REVISIONS.get(row)  # digest-verified (once per stored content)
    if (not revision.enabled or revision.content_digest != candidate.trigger_content_digest
            or revision.created_at_ms != candidate.trigger_published_at_ms
            or revision.task_id != candidate.task_id
            or revision.task_revision != candidate.task_revision
            or revision.task_content_digest != candidate.task_content_digest
            or revision.spec != candidate.spec):
        raise Raced("schedule_changed")
    pinned = known.get(key)
    if pinned is None:  # read with this row: verified now, then known to later batches
        pinned = known[key] = pinned_revisions.verify(key, row)
    if pinned[0].content_digest != candidate.task_content_digest or not pinned[0].enabled:
        raise Raced("task_changed")
    if now >= fence.expires_at_ms:
        raise Raced("claim_expired")
    if now < fence.acquired_at_ms:
        raise ClockRegressed("the store's clock moved backwards between claim and commit")
    task, execution = pinned
    if isinstance(execution, QinglongError):
        if params.decision.disposition is Disposition.ADMIT:
            raise execution
        return task, None
    return task, execution


def _occurrence(params: ClaimCommitParams, actor_id: str) -> FlowOccurrence:
    """The flow start an admitted occurrence of a flow trigger asks for."""
    candidate, fence = params.claim.candidate, params.claim.fence
    assert candidate.spec.flow is not None and params.decision.scheduled_for_ms is not None
    return FlowOccurrence(
        project_id=candidate.project_id, flow_id=candidate.spec.flow,
        trigger_id=candidate.trigger_id, trigger_revision=candidate.trigger_revision,
        scheduled_for_ms=params.decision.scheduled_for_ms, claim_version=fence.version,
        claim_token=str(fence.token), actor=actor_id, parameters=candidate.spec.values)


__all__ = ["COMMIT_ATTEMPTS", "BatchAbandoned", "BatchCommitter", "Key", "Outcome"]
