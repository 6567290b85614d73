"""Run now on PostgreSQL: one manual admission per SERIALIZABLE transaction, as ql_runtime.

The transaction reads the request's idempotency key and the definitions it depends on by
their keys, stamps the Run with the database clock, and inserts the same rows as a cluster
admission. Conflicts (40001, 40P01, 55P03) are retried before COMMIT; a concurrent request
with the same id loses on the unique key and, run again, finds the winner's Run. A COMMIT
whose reply was lost is never retried: the key says whether it landed. After a commit the
workers are told (NOTIFY qinglong_runs) so one starts the Run without waiting for its poll.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import psycopg

from qinglong.clock import pause
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.manual import ManualRequest
from qinglong.domain.task import ExecutorType
from qinglong.errors import Conflict, OutcomeUnknown, QinglongError
from qinglong.ids import new_uuid
from qinglong.storage.manual_writer import admit_manual, find_admitted
from qinglong.storage.ports import ManualRunParams, ManualRunResult
from qinglong.storage.postgres.connection import (
    QUERIES,
    Connector,
    PgConnection,
)
from qinglong.storage.postgres.errors import translate
from qinglong.storage.postgres.transactions import admit_by_key, db_now_ms

ACTION = "run now"
ATTEMPTS = 5  # conflicts retried before COMMIT, per round
ROUNDS = 2  # a unique-key loss to a concurrent twin is settled by one more round


def _retry_hint(request: ManualRequest) -> str:
    return (f"run the same command again with --request-id {request.request_id}: it admits "
            "at most one Run")


class PgManualRunStore:
    """The ManualRunStore port on PostgreSQL (Runs for `ql worker`)."""

    def __init__(self, connector: Connector, *, new_id: Callable[[], str] = new_uuid,
                 commit_deadline_s: float = 5.0, in_doubt_settle_s: float = 0.2) -> None:
        self._connector = connector
        self._new_id = new_id
        self._commit_deadline_s = commit_deadline_s
        self._in_doubt_settle_s = in_doubt_settle_s

    def run_admit_manual(self, params: ManualRunParams) -> ManualRunResult:
        request = params.request
        ids = params.ids or AdmissionIds.new(self._new_id)

        def work(conn: PgConnection) -> ManualRunResult:
            conn.execute(QUERIES["manual_session"])
            return admit_manual(conn, QUERIES, request, ids=ids, now_ms=db_now_ms(conn),
                                executor_type=ExecutorType.REMOTE_WORKER.value)

        result = admit_by_key(self._connector, ACTION, work, attempts=ATTEMPTS,
                              commit_deadline_s=self._commit_deadline_s, rounds=ROUNDS,
                              retry_hint=_retry_hint(request),
                              in_doubt=lambda: self._resolve_in_doubt(request, ids))
        if result.admitted:
            self._notify()
        return result

    def _resolve_in_doubt(self, request: ManualRequest, ids: AdmissionIds) -> ManualRunResult:
        """COMMIT was sent and its reply lost: the idempotency key says whether it landed."""
        pause(self._in_doubt_settle_s)  # let a commit that is landing become visible
        try:
            with self._connector.connection() as conn:
                found = find_admitted(conn, QUERIES, request)
        except psycopg.Error as exc:
            raise OutcomeUnknown(f"{ACTION}: COMMIT outcome unknown and the lookup failed "
                                 f"({translate(exc, ACTION).message}); "
                                 + _retry_hint(request)) from exc
        except QinglongError as exc:
            if isinstance(exc, Conflict):
                raise
            raise OutcomeUnknown(f"{ACTION}: COMMIT outcome unknown and the lookup failed; "
                                 + _retry_hint(request)) from exc
        if found is None:
            raise OutcomeUnknown(f"{ACTION}: COMMIT outcome unknown (the Run is not visible); "
                                 + _retry_hint(request))
        if found == ids.run_id:
            self._notify()
        return ManualRunResult(run_id=found, admitted=found == ids.run_id, in_doubt=True)

    def _notify(self) -> None:
        with contextlib.suppress(QinglongError, psycopg.Error), \
                self._connector.connection() as conn:
            conn.execute(QUERIES["manual_notify_runs"])
