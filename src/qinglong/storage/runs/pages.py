"""Reads the HTTP API and the panel add (inside a read of the run store): pages of Runs
after a cursor, and per-task counts of Runs in time buckets."""

from __future__ import annotations

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.model import Run
from qinglong.domain.runs import RunStatus
from qinglong.errors import InvalidInput, NotFound
from qinglong.storage.kernel import Tx
from qinglong.storage.runs.params import RunBucket, RunBucketParams, RunPageParams
from qinglong.storage.runs.reader import MAX_INSTANT_MS, MAX_LIST_LIMIT, run_from_row

MAX_BUCKETS = 100_000  # rows of one bucket read (tasks x buckets)


class PageReader:
    def __init__(self, tx: Tx) -> None:
        self._tx = tx

    def _check_project(self, project: str) -> None:
        project_id(project)
        if self._tx.one("project_get", {"id": project}) is None:
            raise NotFound("project", project)

    def run_page(self, params: RunPageParams) -> list[Run]:
        f = params.filters
        if not 1 <= f.limit <= MAX_LIST_LIMIT:
            raise InvalidInput("limit", f"must be between 1 and {MAX_LIST_LIMIT}")
        if f.trigger_id is not None:
            entity_id(f.trigger_id, "trigger")
        if f.task_id is not None:
            entity_id(f.task_id, "task")
        if f.status is not None and f.status not in {s.value for s in RunStatus}:
            raise InvalidInput("status", "must be one of " + ", ".join(s.value for s in RunStatus))
        if f.since_ms is not None and f.until_ms is not None and f.since_ms > f.until_ms:
            raise InvalidInput("since", "must not be after until")
        if f.project_id is not None:
            self._check_project(f.project_id)
        after_ms, after_id = params.after if params.after is not None else (None, None)
        query = "run_page_oldest_first" if f.oldest_first else "run_page_newest_first"
        rows = self._tx.all(query, {
            "project_id": f.project_id, "task_id": f.task_id, "trigger_id": f.trigger_id,
            "status": f.status, "since_ms": f.since_ms, "until_ms": f.until_ms,
            "limit": f.limit, "after_ms": after_ms, "after_id": after_id})
        return [run_from_row(row) for row in rows]

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
        self._check_project(params.project_id)
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
