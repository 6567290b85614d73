"""Batched admission on PostgreSQL: many claimed occurrences in one SERIALIZABLE transaction.

The single-row commit (``scheduling.PgScheduleStore.schedule_commit``) spends about eight
round trips and one WAL flush on every occurrence. A batch does the same work for all its
rows with a fixed number of statements (queries/admission_batch.sql):

1. read the database clock and every fact of the definitions each decision used (trigger
   head and revision, task head and revision, project, pinned execution revision), by key;
2. verify each row as the single-row commit does (eligibility, trigger revision and its
   digest, task digest, expiry, clock, execution revision); a row that fails is left out of
   the writes and reported ``raced`` (a corrupt record: an error of that row alone);
3. one statement advances every cursor and clears every claim, each row found by the
   physical address its claim wrote and only under its full fence (trigger revision, state
   version, cursor, owner, token, claim version, expiry), and inserts the Runs, Attempts,
   events and misfire records of exactly the rows it advanced; a row that changed since its
   claim (taken over, reset, paused, resumed) is not advanced and is reported ``raced``;
4. the clock once more, now that the row locks are held: a claim that expired meanwhile
   rolls the whole batch back (it is then decided again in smaller parts);
5. COMMIT.

The schedule rows are not read before they are written: an UPDATE drops its own predicate
lock on each row it writes, whereas reading a batch's rows first would lock whole heap
pages (more than two rows of a page) and two replicas' batches would fail serialization
against each other.

When a batch fails before COMMIT (serialization failure, deadlock, lock or statement
timeout, any error of the database), nothing of it was written: it is split in halves and
each half tried again, down to single rows, which take the single-row path with its own
retries; so one bad row costs its neighbours a few transactions, never their admission. The
splitting stops once half of the claims' lease has passed by the database clock: the rows
not tried by then keep their claims, which expire and are decided afresh. A lost COMMIT
reply is never retried: every row the batch wrote is resolved from durable facts (its
idempotency key, its schedule row) as the single-row path resolves its own. Losing the
connection (or the server turning read-only, or a missing privilege) ends the batch: the
rows not yet settled carry that error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg

from qinglong.clock import pause
from qinglong.domain.admission import admission_rows
from qinglong.domain.admission_jitter import with_jittered_instant
from qinglong.domain.decision import PAUSED_FATE, Disposition
from qinglong.domain.occurrences import cursor_for_storage
from qinglong.domain.task import ExecutionRevision, ExecutorType, TaskRevision
from qinglong.errors import (
    ConnectionLost,
    NotReady,
    PermissionDenied,
    QinglongError,
    RecordCorrupt,
    StorageError,
    TransientStorageError,
)
from qinglong.storage import records
from qinglong.storage.ports import (
    ClaimCommitParams,
    CommitOutcome,
    CommitResult,
)
from qinglong.storage.postgres.claims import REVISIONS, ClockRegressed, Raced
from qinglong.storage.postgres.connection import (
    QUERIES,
    CommitNotAcknowledged,
    CommitRejected,
    Connector,
    PgConnection,
)
from qinglong.storage.postgres.errors import ServerNotWritable, sqlstate
from qinglong.storage.postgres.transactions import db_now_ms, transact

ACTION = "admit occurrences"
# Errors that say nothing about one row but about the connection, the server or the role:
# they end the batch instead of splitting it.
_ENDS_THE_BATCH = (ConnectionLost, ServerNotWritable, PermissionDenied, NotReady)

Outcome = CommitResult | QinglongError
# The batch's rows as JSON text: compact, and without the reference-cycle check (the rows
# are plain dicts and lists built here, never cyclic).
_ENCODE = json.JSONEncoder(check_circular=False, separators=(",", ":")).encode


class BatchAbandoned(TransientStorageError):
    """A failing batch was not split further: half of its claims' lease had passed."""


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
        connector: Connector,
        *,
        actor_id: str,
        commit_deadline_s: float,
        in_doubt_settle_s: float,
        single: Callable[[ClaimCommitParams], CommitResult],
        resolve_in_doubt: Callable[[ClaimCommitParams], CommitResult],
        before_commit: Callable[[], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        self._connector = connector
        self._actor_id = actor_id
        self._commit_deadline_s = commit_deadline_s
        self._in_doubt_settle_s = in_doubt_settle_s
        self._single = single
        self._resolve_in_doubt = resolve_in_doubt
        self._before_commit = before_commit
        self._on_retry = on_retry

    def commit(self, items: Sequence[ClaimCommitParams]) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        ended: QinglongError | None = None  # the error that ended the batch, if one did
        # Split no further once half of the shortest lease has passed (database clock).
        give_up_at_ms = min(p.claim.fence.acquired_at_ms
                            + (p.claim.fence.expires_at_ms - p.claim.fence.acquired_at_ms) // 2
                            for p in items)
        chunks: list[list[int]] = [list(range(len(items)))]
        while chunks:
            chunk = chunks.pop(0)
            if ended is not None:
                outcomes.update(dict.fromkeys(chunk, ended))
                continue
            if len(chunk) == 1:
                outcome = self._one(items[chunk[0]])
                outcomes[chunk[0]] = outcome
                if isinstance(outcome, _ENDS_THE_BATCH):
                    ended = outcome
                continue
            try:
                attempt = self._transaction(items, chunk)
            except _InDoubt as doubt:
                outcomes.update(doubt.attempt.settled)
                outcomes.update(self._settle_in_doubt(items, doubt.attempt.written))
                continue
            except QinglongError as exc:
                if isinstance(exc, _ENDS_THE_BATCH):
                    ended = exc
                    outcomes.update(dict.fromkeys(chunk, exc))
                    continue
                if self._past(give_up_at_ms):
                    gave_up = BatchAbandoned(
                        f"{ACTION}: gave up on {len(chunk)} claims after repeated failures "
                        f"({exc.message}); they expire and are decided afresh")
                    outcomes.update(dict.fromkeys(chunk, gave_up))
                    continue
                state = _sqlstate_of(exc)
                if state is not None and self._on_retry is not None:
                    self._on_retry(state)
                half = len(chunk) // 2
                chunks[0:0] = [chunk[:half], chunk[half:]]
                continue
            outcomes.update(attempt.settled)
            outcomes.update(attempt.written)
        return [outcomes[index] for index in range(len(items))]

    # -- the pieces ---------------------------------------------------------------------

    def _one(self, params: ClaimCommitParams) -> Outcome:
        try:
            return self._single(params)
        except QinglongError as exc:
            return exc

    def _past(self, at_ms: int) -> bool:
        try:
            with self._connector.connection() as conn:
                return db_now_ms(conn) >= at_ms
        except (QinglongError, psycopg.Error):  # a failing clock read ends the splitting
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

    def _transaction(self, items: Sequence[ClaimCommitParams], chunk: list[int]) -> _Attempt:
        holder: list[_Attempt] = []

        def work(conn: PgConnection) -> _Attempt:
            holder.clear()
            attempt = _Attempt()
            holder.append(attempt)
            self._admit(conn, items, chunk, attempt)
            return attempt

        try:
            attempt, receipt = transact(
                self._connector, ACTION, work, attempts=1,
                commit_deadline_s=self._commit_deadline_s, retry_rejected_commit=False,
                before_commit=self._before_commit,
            )
        except CommitNotAcknowledged as exc:
            raise _InDoubt(holder[0]) from exc
        except CommitRejected:
            raise  # rolled back for sure: the caller splits the batch
        if not receipt.durable:
            attempt.written = {index: replace(result, durable=False)
                               for index, result in attempt.written.items()}
        return attempt

    def _admit(self, conn: PgConnection, items: Sequence[ClaimCommitParams], chunk: list[int],
               attempt: _Attempt) -> None:
        candidates = [items[index].claim.candidate for index in chunk]
        facts = conn.execute(QUERIES["schedule_facts_batch"], {
            "project_ids": [c.project_id for c in candidates],
            "trigger_ids": [c.trigger_id for c in candidates],
            "trigger_revisions": [c.trigger_revision for c in candidates],
        }).fetchall()
        if len(facts) != len(chunk):
            raise StorageError(f"{ACTION}: the facts of the batch did not come back whole")
        now = int(facts[0]["now_ms"])
        tasks: dict[tuple[str, str, int], TaskRevision] = {}
        executions: dict[tuple[str, str, int], ExecutionRevision | QinglongError] = {}
        writes = _Writes()
        for index, row in zip(chunk, facts, strict=True):
            params = items[index]
            try:
                task, execution = _verify(row, params, now, tasks, executions)
            except Raced as raced:
                attempt.settled[index] = CommitResult(
                    outcome=CommitOutcome.RACED, disposition=params.decision.disposition,
                    reason=raced.reason)
                continue
            except QinglongError as exc:
                attempt.settled[index] = exc
                continue
            writes.add(index, params, task, execution, now=now, actor_id=self._actor_id)
        if not writes.moves:
            return
        advanced = conn.execute(QUERIES["schedule_admit_batch"],
                                writes.statement_params(now)).fetchall()
        done = {(row["project_id"], row["trigger_id"]) for row in advanced}
        if advanced and (int(advanced[0]["runs"]), int(advanced[0]["attempts"]),
                         int(advanced[0]["events"]),
                         int(advanced[0]["misfires"])) != writes.counts(done):
            raise StorageError(f"{ACTION}: the batch did not write the shape it planned")
        if done:
            # The row locks are held now: every fence written must still be live at this
            # instant, or the whole batch is rolled back and decided again in smaller parts.
            after = db_now_ms(conn)
            if any(after >= items[index].claim.fence.expires_at_ms for index in writes.results
                   if _key(items[index]) in done):
                raise _LeaseRanOut(f"{ACTION}: a claim expired while the batch waited for its rows")
        for index, result in writes.results.items():
            if _key(items[index]) in done:
                attempt.written[index] = result
            else:  # the row changed since its claim (taken over, reset, paused): not written
                attempt.settled[index] = CommitResult(
                    outcome=CommitOutcome.RACED, disposition=items[index].decision.disposition,
                    reason="claim_superseded")


def _key(params: ClaimCommitParams) -> tuple[str, str]:
    return params.claim.candidate.project_id, params.claim.candidate.trigger_id


class _LeaseRanOut(TransientStorageError):
    """A claim of the batch expired before its row locks were held: roll back and split."""


def _sqlstate_of(exc: BaseException) -> str | None:
    if isinstance(exc, CommitRejected):
        return exc.sqlstate
    cause = exc.__cause__
    return sqlstate(cause) if cause is not None else None


def _verify(row: dict[str, Any], params: ClaimCommitParams, now: int,
            tasks: dict[tuple[str, str, int], TaskRevision],
            executions: dict[tuple[str, str, int], ExecutionRevision | QinglongError],
            ) -> tuple[TaskRevision, ExecutionRevision | None]:
    """Every check of the single-row commit that is not about the schedule row itself (the
    write statement checks that row's version, revision, cursor and full fence): raises
    Raced or the error of this row."""
    claim = params.claim
    candidate, fence = claim.candidate, claim.fence
    if (row["project_id"], row["trigger_id"]) != (candidate.project_id, candidate.trigger_id):
        raise StorageError(f"{ACTION}: the facts came back out of order")
    if not row["eligible"]:  # the trigger cannot fire any more (disabled, archived, moved)
        raise Raced("claim_superseded")
    revision = REVISIONS.get(row)  # digest-verified (once per stored content)
    if (revision.content_digest != candidate.trigger_content_digest
            or revision.created_at_ms != candidate.trigger_published_at_ms
            or revision.task_id != candidate.task_id
            or revision.task_revision != candidate.task_revision
            or revision.task_content_digest != candidate.task_content_digest
            or revision.spec != candidate.spec):
        raise Raced("schedule_changed")
    key = (candidate.project_id, candidate.task_id, int(row["k_revision"]))
    task = tasks.get(key)
    if task is None:  # one parse and digest check per task revision of the batch
        task = tasks[key] = records.candidate_task_revision(row)
    if task.content_digest != candidate.task_content_digest:
        raise Raced("task_changed")
    if now >= fence.expires_at_ms:
        raise Raced("claim_expired")
    if now < fence.acquired_at_ms:
        raise ClockRegressed("the database clock moved backwards between claim and commit")
    if params.decision.disposition is not Disposition.ADMIT:
        return task, None
    execution = executions.get(key)
    if execution is None:
        try:
            execution = _execution(row, key, candidate.task_content_digest)
        except QinglongError as exc:
            execution = exc
        executions[key] = execution
    if isinstance(execution, QinglongError):
        raise execution
    return task, execution


def _execution(row: dict[str, Any], key: tuple[str, str, int],
               pinned_digest: str) -> ExecutionRevision:
    project, task, revision = key
    if row["e_project_id"] is None:
        raise RecordCorrupt(f"execution revision of {project}/{task}@{revision} is missing")
    execution = records.execution_revision(records.prefixed(row, "e_"))
    if execution.executor_type is not ExecutorType.REMOTE_WORKER:
        raise RecordCorrupt("execution revision is not a remote_worker plan")
    if execution.source_content_digest != pinned_digest:
        raise RecordCorrupt("execution revision does not match the pinned task digest")
    return execution


# The columns of each row the write statement takes, in the order of its JSON arrays
# (queries/admission_batch.sql, schedule_admit_batch).
_RUN_COLUMNS = ("id", "project_id", "task_id", "task_revision", "task_name", "task_snapshot_ref",
                "trigger_id", "trigger_revision", "trigger_type", "execution_origin",
                "execution_owner", "triggered_by", "scheduled_for_ms", "status", "version",
                "event_sequence", "priority", "idempotency_key", "created_at_ms", "queued_at_ms",
                "overlap_policy", "overlap_key", "overlap_queue_limit")
_ATTEMPT_COLUMNS = ("id", "run_id", "attempt", "status", "executor_type", "callback_sequence",
                    "created_at_ms")  # after project_id, trigger_id
_EVENT_COLUMNS = ("id", "run_id", "sequence", "type", "dedupe_key", "actor_type", "actor_id",
                  "attempt_id", "payload", "created_at_ms")  # after project_id, trigger_id


@dataclass(slots=True)
class _Writes:
    """The rows the batch's write statement takes, built once per batch: each a list of its
    columns (the statement's order), sent as one JSON array per table."""

    moves: list[list[object]] = field(default_factory=list)
    runs: list[list[object]] = field(default_factory=list)
    attempts: list[list[object]] = field(default_factory=list)
    events: list[list[object]] = field(default_factory=list)
    misfires: list[list[object]] = field(default_factory=list)
    results: dict[int, CommitResult] = field(default_factory=dict)
    shape: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # runs, misfires

    def add(self, index: int, params: ClaimCommitParams, task: TaskRevision,
            execution: ExecutionRevision | None, *, now: int, actor_id: str) -> None:
        claim, decision = params.claim, params.decision
        candidate, fence = claim.candidate, claim.fence
        project_id, trigger_id = candidate.project_id, candidate.trigger_id
        run_id = attempt_id = None
        if decision.disposition is Disposition.ADMIT:
            assert params.ids is not None and execution is not None
            rows = with_jittered_instant(admission_rows(
                candidate=candidate, decision=decision, execution=execution, task_name=task.name,
                ids=params.ids, committed_at_ms=now, actor_id=actor_id, fence=fence,
            ), decision.jittered_for_ms)
            run, attempt = rows.run, rows.attempt
            self.runs.append([run[name] for name in _RUN_COLUMNS])
            self.attempts.append([project_id, trigger_id,
                                  *[attempt[name] for name in _ATTEMPT_COLUMNS]])
            self.events.extend([project_id, trigger_id, *[event[name] for name in _EVENT_COLUMNS]]
                               for event in rows.events)
            run_id, attempt_id = params.ids.run_id, params.ids.attempt_id
        misfires = 0
        if decision.paused_from_ms is not None:  # what the pause held back, on record
            self.misfires.append([
                project_id, trigger_id, candidate.trigger_revision, decision.paused_from_ms,
                decision.paused_through_ms, decision.due_at_ms, PAUSED_FATE, None,
                fence.version, decision.observed_at_ms,
            ])
            misfires += 1
        if decision.misfired:
            self.misfires.append([
                project_id, trigger_id, candidate.trigger_revision, decision.due_at_ms,
                decision.skipped_through_ms, cursor_for_storage(decision.next_fire_at_ms),
                candidate.spec.misfire_policy.value, run_id, fence.version,
                decision.observed_at_ms,
            ])
            misfires += 1
        self.moves.append([
            claim.row_locator, project_id, trigger_id, candidate.trigger_revision,
            candidate.state_version, candidate.next_fire_at_ms, fence.owner, fence.token,
            fence.version, fence.expires_at_ms, cursor_for_storage(decision.next_fire_at_ms),
            decision.next_due_at_ms, decision.scheduled_for_ms,
        ])
        self.shape[(project_id, trigger_id)] = (1 if run_id is not None else 0, misfires)
        if run_id is not None:
            self.results[index] = CommitResult(outcome=CommitOutcome.ADMITTED,
                                               disposition=decision.disposition,
                                               run_id=run_id, attempt_id=attempt_id)
        else:
            self.results[index] = CommitResult(outcome=CommitOutcome.ADVANCED,
                                               disposition=decision.disposition)

    def statement_params(self, now: int) -> dict[str, object]:
        return {
            "now_ms": now,
            "row_locators": [move[0] for move in self.moves],
            "moves": _ENCODE(self.moves),
            "runs": _ENCODE(self.runs),
            "attempts": _ENCODE(self.attempts),
            "events": _ENCODE(self.events),
            "misfires": _ENCODE(self.misfires),
        }

    def counts(self, done: set[tuple[str, str]]) -> tuple[int, int, int, int]:
        """Runs, Attempts, events and misfire rows the rows in ``done`` write."""
        runs = sum(self.shape[key][0] for key in done)
        misfires = sum(self.shape[key][1] for key in done)
        return runs, runs, 2 * runs, misfires
