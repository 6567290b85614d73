"""Backfill on PostgreSQL: one admission per SERIALIZABLE transaction, as ql_runtime.

The plan is read in one transaction; each admission then reads the Run standing for its
occurrence, the definitions and the schedule's cursor by their keys (index lookups, so the
predicate locks cover exactly what was read), stamps the Run with the database clock, and
inserts the same rows as every admission. Two backfills of one occurrence conflict on what
they read (40001, retried before COMMIT) or on the unique idempotency key (one more round
finds the winner's Run); the scheduler never admits an occurrence before its cursor. A
COMMIT whose reply was lost is never retried: the key says whether it landed. After a commit
the workers are told (NOTIFY qinglong_runs) so one starts the Run without waiting for its
poll.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import psycopg

from qinglong.clock import pause
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import BackfillTarget, utc_text
from qinglong.domain.task import ExecutorType
from qinglong.errors import OutcomeUnknown, QinglongError
from qinglong.ids import new_uuid
from qinglong.storage.backfill_writer import (
    admit_backfill,
    find_by_key,
    read_target,
    runs_between,
)
from qinglong.storage.ports import BackfillAdmitParams, BackfillAdmitResult
from qinglong.storage.postgres.connection import (
    QUERIES,
    Connector,
    PgConnection,
)
from qinglong.storage.postgres.errors import translate
from qinglong.storage.postgres.transactions import admit_by_key, db_now_ms, serializable

ACTION = "backfill"
EXECUTOR = ExecutorType.REMOTE_WORKER.value
ATTEMPTS = 5  # conflicts retried before COMMIT, per round
ROUNDS = 2  # a unique-key loss to a concurrent backfill is settled by one more round
RETRY_HINT = "run the same backfill again: it admits at most one Run per occurrence"


class PgBackfillStore:
    """The BackfillStore port on PostgreSQL (Runs for `ql worker`)."""

    def __init__(self, connector: Connector, *, new_id: Callable[[], str] = new_uuid,
                 commit_deadline_s: float = 5.0, in_doubt_settle_s: float = 0.2) -> None:
        self._connector = connector
        self._new_id = new_id
        self._commit_deadline_s = commit_deadline_s
        self._in_doubt_settle_s = in_doubt_settle_s

    def backfill_target(self, project_id: str, trigger_id: str) -> BackfillTarget:
        def work(conn: PgConnection) -> BackfillTarget:
            conn.execute(QUERIES["manual_session"])
            return read_target(conn, QUERIES, project_id, trigger_id, executor_type=EXECUTOR)

        return serializable(self._connector, ACTION, work)

    def backfill_runs(self, project_id: str, trigger_id: str, from_ms: int,
                      to_ms: int) -> dict[int, str]:
        def work(conn: PgConnection) -> dict[int, str]:
            conn.execute(QUERIES["manual_session"])
            return runs_between(conn, QUERIES, project_id, trigger_id, from_ms, to_ms)

        return serializable(self._connector, ACTION, work)

    def backfill_admit(self, params: BackfillAdmitParams) -> BackfillAdmitResult:
        ids = params.ids or AdmissionIds.new(self._new_id)

        def work(conn: PgConnection) -> BackfillAdmitResult:
            conn.execute(QUERIES["manual_session"])
            return admit_backfill(conn, QUERIES, params, ids=ids, now_ms=db_now_ms(conn),
                                  executor_type=EXECUTOR)

        result = admit_by_key(self._connector, ACTION, work, attempts=ATTEMPTS,
                              commit_deadline_s=self._commit_deadline_s, rounds=ROUNDS,
                              retry_hint=RETRY_HINT,
                              in_doubt=lambda: self._resolve_in_doubt(params, ids))
        if result.admitted:
            self._notify()
        return result

    def _resolve_in_doubt(self, params: BackfillAdmitParams,
                          ids: AdmissionIds) -> BackfillAdmitResult:
        """COMMIT was sent and its reply lost: the idempotency key says whether it landed."""
        when = utc_text(params.occurrence_ms)
        pause(self._in_doubt_settle_s)  # let a commit that is landing become visible
        try:
            with self._connector.connection() as conn:
                found = find_by_key(conn, QUERIES, params.request, params.occurrence_ms)
        except psycopg.Error as exc:
            raise OutcomeUnknown(f"{ACTION} of {when}: COMMIT outcome unknown and the lookup "
                                 f"failed ({translate(exc, ACTION).message}); "
                                 + RETRY_HINT) from exc
        except QinglongError as exc:
            raise OutcomeUnknown(f"{ACTION} of {when}: COMMIT outcome unknown and the lookup "
                                 "failed; " + RETRY_HINT) from exc
        if found is None:
            raise OutcomeUnknown(f"{ACTION} of {when}: COMMIT outcome unknown (the Run is not "
                                 "visible); " + RETRY_HINT)
        if found == ids.run_id:
            self._notify()
        return BackfillAdmitResult(run_id=found, admitted=found == ids.run_id, in_doubt=True)

    def _notify(self) -> None:
        with contextlib.suppress(QinglongError, psycopg.Error), \
                self._connector.connection() as conn:
            conn.execute(QUERIES["manual_notify_runs"])
