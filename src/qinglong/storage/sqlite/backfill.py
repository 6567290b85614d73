"""Backfill on SQLite: the plan in one read transaction, then one admission per BEGIN
IMMEDIATE transaction.

Any process may backfill beside a running `ql serve`: the write lock orders each admission
with the scheduler's, so the check for a Run standing for the occurrence, the cursor it must
lie before and the insert are one step; `ql serve` finds the queued Runs at its next poll.
"""

from __future__ import annotations

from collections.abc import Callable

from qinglong.clock import Clock
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import BackfillTarget
from qinglong.domain.task import ExecutorType
from qinglong.ids import new_uuid
from qinglong.storage.backfill_writer import admit_backfill, read_target, runs_between
from qinglong.storage.ports import BackfillAdmitParams, BackfillAdmitResult
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase

EXECUTOR = ExecutorType.LOCAL_PROCESS.value


class SqliteBackfillStore:
    """The BackfillStore port on SQLite (Runs for the local executor of `ql serve`)."""

    def __init__(self, db: SqliteDatabase, clock: Clock, *,
                 new_id: Callable[[], str] = new_uuid) -> None:
        self._db = db
        self._clock = clock
        self._new_id = new_id

    def backfill_target(self, project_id: str, trigger_id: str) -> BackfillTarget:
        with self._db.read("backfill") as conn:
            return read_target(conn, QUERIES, project_id, trigger_id, executor_type=EXECUTOR)

    def backfill_runs(self, project_id: str, trigger_id: str, from_ms: int,
                      to_ms: int) -> dict[int, str]:
        with self._db.read("backfill") as conn:
            return runs_between(conn, QUERIES, project_id, trigger_id, from_ms, to_ms)

    def backfill_admit(self, params: BackfillAdmitParams) -> BackfillAdmitResult:
        ids = params.ids or AdmissionIds.new(self._new_id)
        with self._db.write("backfill") as conn:
            # read after the write lock is held: admissions are stamped in commit order
            return admit_backfill(conn, QUERIES, params, ids=ids, now_ms=self._clock.now_ms(),
                                  executor_type=EXECUTOR)
