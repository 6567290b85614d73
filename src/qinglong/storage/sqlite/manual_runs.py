"""Run now on SQLite: one manual admission per BEGIN IMMEDIATE transaction.

Any process may admit (a `ql task run` beside a running `ql serve`); the write lock orders
it with the scheduler's admissions, and `ql serve` finds the queued Run at its next poll.
"""

from __future__ import annotations

from collections.abc import Callable

from qinglong.clock import Clock
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.task import ExecutorType
from qinglong.ids import new_uuid
from qinglong.storage.manual_writer import admit_manual
from qinglong.storage.ports import ManualRunParams, ManualRunResult
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase


class SqliteManualRunStore:
    """The ManualRunStore port on SQLite (Runs for the local executor of `ql serve`)."""

    def __init__(self, db: SqliteDatabase, clock: Clock, *,
                 new_id: Callable[[], str] = new_uuid) -> None:
        self._db = db
        self._clock = clock
        self._new_id = new_id

    def run_admit_manual(self, params: ManualRunParams) -> ManualRunResult:
        ids = params.ids or AdmissionIds.new(self._new_id)
        with self._db.write("run now") as conn:
            # read after the write lock is held: admissions are stamped in commit order
            return admit_manual(conn, QUERIES, params.request, ids=ids,
                                now_ms=self._clock.now_ms(),
                                executor_type=ExecutorType.LOCAL_PROCESS.value)
