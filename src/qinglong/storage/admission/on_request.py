"""The admission store for Runs asked for by someone: run now and backfill.

- ``run_admit_manual``: one manual Run, in one transaction that re-reads the project
  (active), the task (current revision, enabled) and, for a trigger, its current revision
  (enabled, pinning the task's current revision), and writes the same rows as a scheduled
  admission. The request's idempotency key decides retries: a Run already admitted under it
  for the same target is returned (``admitted`` False), one admitted for another target
  raises RequestIdConflict.
- ``backfill_target`` reads what a backfill window is judged against (the trigger's current
  revision, its first publish time and its schedule's cursor), refusing as an admission
  would; ``backfill_runs`` maps the occurrences in ``[from_ms, to_ms]`` that already have a
  Run standing for them (a scheduled or backfilled Run) to that Run; ``backfill_admit``
  admits one occurrence (backfill.py).

Refusals (NotFound, NotRunnable, InvalidInput) write nothing. Each admission is one write
transaction stamped with the store's clock; conflicts are retried before COMMIT, and a
concurrent twin that won the unique idempotency key is found by one more round. A COMMIT
whose reply was lost is never retried: the key says whether it landed. Workers are woken
(``runs``) when an admission commits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from qinglong.clock import pause
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import BackfillTarget, utc_text
from qinglong.errors import Conflict, OutcomeUnknown, QinglongError, TransientStorageError
from qinglong.ids import new_uuid
from qinglong.storage.admission import backfill, manual
from qinglong.storage.admission.params import (
    BackfillAdmitParams,
    BackfillAdmitResult,
    ManualRunParams,
    ManualRunResult,
)
from qinglong.storage.kernel import CommitNotAcknowledged, CommitRejected, Database, Tx


class Admission(Protocol):
    @property
    def admitted(self) -> bool: ...


A = TypeVar("A", bound=Admission)
ATTEMPTS = 5  # conflicts retried before COMMIT, per round
ROUNDS = 2  # a unique-key loss to a concurrent twin is settled by one more round
BACKFILL_HINT = "run the same backfill again: it admits at most one Run per occurrence"


class RequestAdmissions:
    def __init__(self, db: Database, *, new_id: Callable[[], str] = new_uuid,
                 commit_deadline_s: float = 5.0, in_doubt_settle_s: float = 0.2) -> None:
        self._db = db
        self._new_id = new_id
        self._commit_deadline_s = commit_deadline_s
        self._in_doubt_settle_s = in_doubt_settle_s
        self._executor_type = db.capabilities.executor_type.value

    # -- run now ------------------------------------------------------------------------

    def run_admit_manual(self, params: ManualRunParams) -> ManualRunResult:
        request = params.request
        ids = params.ids or AdmissionIds.new(self._new_id)
        hint = (f"run the same command again with --request-id {request.request_id}: it "
                "admits at most one Run")

        def admit(tx: Tx) -> ManualRunResult:
            return manual.admit_manual(tx, request, ids=ids, now_ms=tx.now_ms(),
                                       executor_type=self._executor_type)

        def in_doubt() -> ManualRunResult:
            found = self.look_up("run now", hint,
                                  lambda tx: manual.find_admitted(tx, request))
            return ManualRunResult(run_id=found, admitted=found == ids.run_id, in_doubt=True)

        return self.admit_by_key("run now", admit, hint, in_doubt)

    # -- backfill -----------------------------------------------------------------------

    def backfill_target(self, project_id: str, trigger_id: str) -> BackfillTarget:
        return self._db.write("backfill", lambda tx: backfill.read_target(
            tx, project_id, trigger_id, executor_type=self._executor_type))

    def backfill_runs(self, project_id: str, trigger_id: str, from_ms: int,
                      to_ms: int) -> dict[int, str]:
        return self._db.write("backfill", lambda tx: backfill.runs_between(
            tx, project_id, trigger_id, from_ms, to_ms))

    def backfill_admit(self, params: BackfillAdmitParams) -> BackfillAdmitResult:
        ids = params.ids or AdmissionIds.new(self._new_id)
        action = f"backfill of {utc_text(params.occurrence_ms)}"

        def admit(tx: Tx) -> BackfillAdmitResult:
            return backfill.admit_backfill(tx, params, ids=ids, now_ms=tx.now_ms(),
                                           executor_type=self._executor_type)

        def in_doubt() -> BackfillAdmitResult:
            found = self.look_up(action, BACKFILL_HINT, lambda tx: backfill.find_by_key(
                tx, params.request, params.occurrence_ms))
            return BackfillAdmitResult(run_id=found, admitted=found == ids.run_id, in_doubt=True)

        return self.admit_by_key("backfill", admit, BACKFILL_HINT, in_doubt)

    # -- the keyed admission ------------------------------------------------------------

    def admit_by_key(self, action: str, admit: Callable[[Tx], A], hint: str,
                      in_doubt: Callable[[], A]) -> A:
        """Run an admission keyed by an idempotency key, waking workers (``runs``) when it
        admitted a Run: a plain Conflict means a concurrent twin committed the same key first,
        so one more round looks again; a rejected COMMIT wrote nothing; a lost COMMIT reply is
        settled by ``in_doubt`` (a lookup of the key), never by a retry. Inside a unit of work
        (an API request whose audit row commits with the admission) the admission joins it:
        the unit's commit is the admission's, and a client that did not hear it sends the
        same request id again."""

        def work(tx: Tx) -> A:
            result = admit(tx)
            if result.admitted:
                tx.wake("runs")
            return result

        if self._db.in_unit:
            return self._db.write(action, work)
        for round_ in range(1, ROUNDS + 1):
            try:
                result, _ = self._db.transact(action, work, attempts=ATTEMPTS,
                                              commit_deadline_s=self._commit_deadline_s)
            except Conflict as exc:
                if type(exc) is Conflict and round_ < ROUNDS:
                    continue
                raise
            except CommitRejected as exc:
                raise TransientStorageError(f"{action}: COMMIT was rejected ({exc.sqlstate}); "
                                            f"nothing was written; {hint}") from exc
            except CommitNotAcknowledged:
                return in_doubt()
            return result
        raise AssertionError("unreachable: the last round returns or raises")

    def look_up(self, action: str, hint: str, find: Callable[[Tx], str | None]) -> str:
        """After a lost COMMIT reply: the Run the key found (it landed), else OutcomeUnknown."""
        pause(self._in_doubt_settle_s)  # let a commit that is landing become visible
        try:
            found = self._db.read(action, find)
        except Conflict:
            raise
        except QinglongError as exc:
            raise OutcomeUnknown(f"{action}: COMMIT outcome unknown and the lookup failed "
                                 f"({exc.message}); {hint}") from exc
        if found is None:
            raise OutcomeUnknown(f"{action}: COMMIT outcome unknown (the Run is not visible); "
                                 + hint)
        return found
