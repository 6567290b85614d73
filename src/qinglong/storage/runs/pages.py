"""Reads the HTTP API and the panel add (inside a read of the run store): pages of Runs
after a cursor, and per-task counts of Runs in time buckets."""

from __future__ import annotations

from qinglong.domain.identifiers import entity_id
from qinglong.domain.model import Run
from qinglong.errors import InvalidInput
from qinglong.storage.kernel import Tx
from qinglong.storage.runs.params import RunBucket, RunBucketParams, RunPageParams
from qinglong.storage.runs.reader import MAX_INSTANT_MS, RunReader, check_project

MAX_BUCKETS = 100_000  # rows of one bucket read (tasks x buckets)


class PageReader:
    def __init__(self, tx: Tx) -> None:
        self._tx = tx

    def run_page(self, params: RunPageParams) -> list[Run]:
        return RunReader(self._tx).run_page(params.filters, params.after)

    def run_buckets(self, params: RunBucketParams) -> list[RunBucket]:
        if params.task_id is not None:
            entity_id(params.task_id, "task")
        for name, value in (("from", params.from_ms), ("to", params.to_ms)):
            if not 0 <= value <= MAX_INSTANT_MS:
                raise InvalidInput(name, "must be an instant between 1970 and 9999")
        if params.from_ms >= params.to_ms:
            raise InvalidInput("from", "must be before to")
        if params.bucket_ms <= 0:
            raise InvalidInput("bucket", "must be positive")
        check_project(self._tx, params.project_id)
        rows = self._tx.all("run_buckets", {
            "project_id": params.project_id, "task_id": params.task_id,
            "from_ms": params.from_ms, "to_ms": params.to_ms, "bucket_ms": params.bucket_ms,
            "limit": MAX_BUCKETS + 1})
        if len(rows) > MAX_BUCKETS:
            raise InvalidInput("from", "the window holds too many tasks and days: choose a "
                                       "narrower window or one task")
        return [RunBucket(task_id=row["task_id"], bucket_start_ms=int(row["bucket_start_ms"]),
                          runs=int(row["runs"]), succeeded=int(row["succeeded"]),
                          failed=int(row["failed"]), cancelled=int(row["cancelled"]),
                          skipped=int(row["skipped"]),
                          total_duration_ms=int(row["total_duration_ms"]),
                          max_duration_ms=None if row["max_duration_ms"] is None
                          else int(row["max_duration_ms"]))
                for row in rows]
